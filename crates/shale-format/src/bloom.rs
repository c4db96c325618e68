//! LevelDB's built-in Bloom filter ("leveldb.BuiltinBloomFilter2"), bit for
//! bit: the same hash, the same number of probes and the same probe sequence,
//! so a filter written here answers correctly in LevelDB and the other way
//! round. This is why the hash is written by hand rather than taken from a
//! crate: no crate reproduces LevelDB's `Hash()` exactly.
//! The layout is in `docs/format/table.md` ("Bloom filter").

use std::fmt::Debug;

use crate::internal_key::extract_user_key;

/// Name of LevelDB's Bloom filter policy; the metaindex key is
/// `"filter." + FILTER_NAME`.
pub const BLOOM_FILTER_NAME: &str = "leveldb.BuiltinBloomFilter2";

const BLOOM_HASH_SEED: u32 = 0xbc9f_1d34;

/// Builds filters over a set of keys and answers "may this key be in it".
pub trait FilterPolicy: Send + Sync + Debug {
    /// Name stored in the metaindex block; readers only use a filter whose
    /// name matches their policy.
    fn name(&self) -> &'static str;
    /// Appends a filter for `keys` to `dst`.
    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>);
    /// False only when `key` was certainly not among the keys of `filter`.
    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool;
    /// The policy as a [`HashedFilter`], when its filter depends on each key
    /// only through a 32-bit hash; `None` (the default) otherwise.
    fn hashed(&self) -> Option<&dyn HashedFilter> {
        None
    }
}

/// A shared policy is a policy: lets [`InternalFilterPolicy`] wrap a
/// caller's `Arc<dyn FilterPolicy>` (a filter policy given through the C API).
impl<P: FilterPolicy + ?Sized> FilterPolicy for std::sync::Arc<P> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        (**self).create_filter(keys, dst)
    }

    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
        (**self).key_may_match(key, filter)
    }

    fn hashed(&self) -> Option<&dyn HashedFilter> {
        (**self).hashed()
    }
}

/// A filter policy whose filter depends on each key only through a 32-bit
/// hash (LevelDB's Bloom filter): a table builder hashes each key as it is
/// added instead of keeping a copy of every key until the filter is made.
pub trait HashedFilter {
    /// The hash of `key` the filter keeps.
    fn key_hash(&self, key: &[u8]) -> u32;
    /// Appends the filter of the keys whose [`HashedFilter::key_hash`]es
    /// are `hashes`: the same bytes as [`FilterPolicy::create_filter`] over
    /// those keys.
    fn create_filter_from_hashes(&self, hashes: &[u32], dst: &mut Vec<u8>);
}

/// LevelDB's `Hash(data, n, seed)` from `util/hash.cc` (a Murmur-like hash).
pub fn leveldb_hash(data: &[u8], seed: u32) -> u32 {
    const M: u32 = 0xc6a4_a793;
    const R: u32 = 24;
    let mut h = seed ^ (data.len() as u32).wrapping_mul(M);
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        h = h.wrapping_add(w).wrapping_mul(M);
        h ^= h >> 16;
    }
    let tail = words.remainder();
    // Bytes are unsigned here, as in LevelDB 1.23 (earlier releases sign
    // extended them on some platforms).
    if tail.len() == 3 {
        h = h.wrapping_add(u32::from(tail[2]) << 16);
    }
    if tail.len() >= 2 {
        h = h.wrapping_add(u32::from(tail[1]) << 8);
    }
    if !tail.is_empty() {
        h = h.wrapping_add(u32::from(tail[0]));
        h = h.wrapping_mul(M);
        h ^= h >> R;
    }
    h
}

/// The hash the Bloom filter uses for a key.
#[inline]
pub fn bloom_hash(key: &[u8]) -> u32 {
    leveldb_hash(key, BLOOM_HASH_SEED)
}

/// Number of probes for `bits_per_key`: 0.69 * bits (about ln 2), clamped to
/// [1, 30] exactly as LevelDB computes it.
pub fn probes_for_bits_per_key(bits_per_key: u32) -> u8 {
    let k = (f64::from(bits_per_key) * 0.69) as u32;
    k.clamp(1, 30) as u8
}

/// Size in bits of the filter for `num_keys` keys: at least 64, rounded up
/// to whole bytes.
pub fn filter_bits(num_keys: usize, bits_per_key: u32) -> usize {
    let bits = (num_keys * bits_per_key as usize).max(64);
    bits.div_ceil(8) * 8
}

/// Sets the `probes` bit positions of `hash` in a filter of `bits` bits,
/// calling `set` for each. Shared by the builder and by the data-parallel
/// path, which sets bytes of a byte vector instead of bits.
#[inline]
pub fn for_each_probe(hash: u32, probes: u8, bits: usize, set: impl FnMut(usize)) {
    match BitModulus::new(bits) {
        Some(modulus) => for_each_probe_in(hash, probes, &modulus, set),
        None => {
            // Filters of 2^32 bits and more (never written in practice).
            let mut set = set;
            let mut h = hash;
            let delta = h.rotate_right(17);
            for _ in 0..probes {
                set(h as usize % bits);
                h = h.wrapping_add(delta);
            }
        }
    }
}

/// [`for_each_probe`] with the filter's size taken once for all its keys.
#[inline]
pub fn for_each_probe_in(hash: u32, probes: u8, modulus: &BitModulus, mut set: impl FnMut(usize)) {
    let mut h = hash;
    let delta = h.rotate_right(17);
    for _ in 0..probes {
        set(modulus.reduce(h));
        h = h.wrapping_add(delta);
    }
}

/// `h % bits` for 32-bit `h` and a fixed `bits` below 2^32, by a
/// multiplication instead of a division (Lemire, Kaser and Kurz, "Faster
/// remainder by direct computation", 2019): exact for every `h`, and a
/// filter's probes are its builder's hottest loop (one remainder per probe,
/// six probes per key at 10 bits per key).
#[derive(Debug, Clone, Copy)]
pub struct BitModulus {
    bits: u32,
    /// `ceil(2^64 / bits)`, wrapped to 0 for `bits == 1`.
    magic: u64,
}

impl BitModulus {
    /// The modulus for a filter of `bits` bits; `None` when `bits` is 0 or
    /// does not fit in 32 bits.
    #[inline]
    pub fn new(bits: usize) -> Option<BitModulus> {
        let bits = u32::try_from(bits).ok().filter(|&b| b > 0)?;
        Some(BitModulus {
            bits,
            magic: (u64::MAX / u64::from(bits)).wrapping_add(1),
        })
    }

    /// `h % bits`.
    #[inline]
    pub fn reduce(&self, h: u32) -> usize {
        let fraction = self.magic.wrapping_mul(u64::from(h));
        ((u128::from(fraction) * u128::from(self.bits)) >> 64) as usize
    }
}

/// LevelDB's Bloom filter over whole keys.
#[derive(Debug, Clone, Copy)]
pub struct BloomFilterPolicy {
    bits_per_key: u32,
    probes: u8,
}

impl BloomFilterPolicy {
    /// A policy using `bits_per_key` bits per key (LevelDB's usual choice is 10,
    /// about 1 % false positives).
    pub fn new(bits_per_key: u32) -> BloomFilterPolicy {
        BloomFilterPolicy {
            bits_per_key,
            probes: probes_for_bits_per_key(bits_per_key),
        }
    }

    /// Bits per key this policy was made with.
    pub fn bits_per_key(&self) -> u32 {
        self.bits_per_key
    }

    /// Appends a filter for keys given by their [`bloom_hash`]es. The same
    /// filter as [`FilterPolicy::create_filter`] over those keys: that method
    /// hashes and calls this one. Lets callers hash keys in parallel.
    pub fn create_filter_from_hashes(&self, hashes: &[u32], dst: &mut Vec<u8>) {
        let bits = filter_bits(hashes.len(), self.bits_per_key);
        let start = dst.len();
        dst.resize(start + bits / 8, 0);
        dst.push(self.probes);
        let array = &mut dst[start..start + bits / 8];
        let Some(modulus) = BitModulus::new(bits) else {
            for &hash in hashes {
                for_each_probe(hash, self.probes, bits, |bit| {
                    array[bit / 8] |= 1 << (bit % 8);
                });
            }
            return;
        };
        for &hash in hashes {
            for_each_probe_in(hash, self.probes, &modulus, |bit| {
                array[bit / 8] |= 1 << (bit % 8);
            });
        }
    }
}

impl FilterPolicy for BloomFilterPolicy {
    fn name(&self) -> &'static str {
        BLOOM_FILTER_NAME
    }

    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        let hashes: Vec<u32> = keys.iter().map(|key| bloom_hash(key)).collect();
        self.create_filter_from_hashes(&hashes, dst);
    }

    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
        let Some((&probes, array)) = filter.split_last() else {
            return false;
        };
        if array.is_empty() {
            return false;
        }
        if probes > 30 {
            // Reserved by LevelDB for other encodings: treat as a match.
            return true;
        }
        let bits = array.len() * 8;
        let mut all_set = true;
        for_each_probe(bloom_hash(key), probes, bits, |bit| {
            all_set &= array[bit / 8] & (1 << (bit % 8)) != 0;
        });
        all_set
    }

    fn hashed(&self) -> Option<&dyn HashedFilter> {
        Some(self)
    }
}

impl HashedFilter for BloomFilterPolicy {
    fn key_hash(&self, key: &[u8]) -> u32 {
        bloom_hash(key)
    }

    fn create_filter_from_hashes(&self, hashes: &[u32], dst: &mut Vec<u8>) {
        BloomFilterPolicy::create_filter_from_hashes(self, hashes, dst);
    }
}

/// Wraps a policy for tables whose keys are internal keys: the filter is over
/// user keys, so a lookup matches whatever its sequence number.
#[derive(Debug, Clone)]
pub struct InternalFilterPolicy<P> {
    user_policy: P,
}

impl<P: FilterPolicy> InternalFilterPolicy<P> {
    /// Wraps `user_policy`.
    pub fn new(user_policy: P) -> InternalFilterPolicy<P> {
        InternalFilterPolicy { user_policy }
    }
}

impl<P: FilterPolicy> FilterPolicy for InternalFilterPolicy<P> {
    fn name(&self) -> &'static str {
        self.user_policy.name()
    }

    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        let user_keys: Vec<&[u8]> = keys.iter().map(|k| extract_user_key(k)).collect();
        self.user_policy.create_filter(&user_keys, dst);
    }

    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
        self.user_policy
            .key_may_match(extract_user_key(key), filter)
    }

    fn hashed(&self) -> Option<&dyn HashedFilter> {
        self.user_policy.hashed().map(|_| self as &dyn HashedFilter)
    }
}

/// Reached only through [`FilterPolicy::hashed`], which is `Some` only when
/// the user policy hashes keys.
impl<P: FilterPolicy> HashedFilter for InternalFilterPolicy<P> {
    fn key_hash(&self, key: &[u8]) -> u32 {
        self.user_policy
            .hashed()
            .map_or(0, |user| user.key_hash(extract_user_key(key)))
    }

    fn create_filter_from_hashes(&self, hashes: &[u32], dst: &mut Vec<u8>) {
        if let Some(user) = self.user_policy.hashed() {
            user.create_filter_from_hashes(hashes, dst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn bit_modulus_is_the_remainder(h in any::<u32>(), bits in 1usize..=u32::MAX as usize) {
            let modulus = BitModulus::new(bits).unwrap();
            prop_assert_eq!(modulus.reduce(h), h as usize % bits);
        }
    }

    #[test]
    fn bit_modulus_edges() {
        for bits in [
            1usize,
            2,
            3,
            7,
            64,
            65,
            640,
            1 << 31,
            (1 << 31) + 1,
            u32::MAX as usize,
        ] {
            let modulus = BitModulus::new(bits).unwrap();
            for h in [
                0u32,
                1,
                2,
                bits as u32 - 1,
                bits as u32,
                u32::MAX - 1,
                u32::MAX,
            ] {
                assert_eq!(modulus.reduce(h), h as usize % bits, "{h} % {bits}");
            }
        }
        assert!(BitModulus::new(0).is_none());
        assert!(BitModulus::new(1 << 32).is_none());
    }

    #[test]
    fn hash_matches_leveldb_test_vectors() {
        // The vectors LevelDB's own hash test checks; bytes >= 0x80 catch a
        // sign-extension mistake. The interop tests also compare filters
        // with the library's.
        assert_eq!(leveldb_hash(&[], 0xbc9f1d34), 0xbc9f1d34);
        assert_eq!(leveldb_hash(&[0x62], 0xbc9f1d34), 0xef1345c4);
        assert_eq!(leveldb_hash(&[0xc3, 0x97], 0xbc9f1d34), 0x5b663814);
        assert_eq!(leveldb_hash(&[0xe2, 0x99, 0xa5], 0xbc9f1d34), 0x323c078f);
        assert_eq!(
            leveldb_hash(&[0xe1, 0x80, 0xb9, 0x32], 0xbc9f1d34),
            0xed21633a
        );
    }

    #[test]
    fn probes_clamped() {
        assert_eq!(probes_for_bits_per_key(0), 1);
        assert_eq!(probes_for_bits_per_key(10), 6);
        assert_eq!(probes_for_bits_per_key(100), 30);
    }

    #[test]
    fn empty_filter_matches_nothing() {
        let policy = BloomFilterPolicy::new(10);
        let mut filter = Vec::new();
        policy.create_filter(&[], &mut filter);
        assert_eq!(filter.len(), 9);
        assert!(!policy.key_may_match(b"hello", &filter));
        assert!(!policy.key_may_match(b"", &[]));
    }

    #[test]
    fn every_key_matches_and_false_positives_are_rare() {
        let policy = BloomFilterPolicy::new(10);
        for n in [1usize, 10, 100, 1000, 10_000] {
            let keys: Vec<Vec<u8>> = (0..n as u32).map(|i| i.to_le_bytes().to_vec()).collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let mut filter = Vec::new();
            policy.create_filter(&refs, &mut filter);
            for key in &refs {
                assert!(policy.key_may_match(key, &filter));
            }
            let false_positives = (0..10_000u32)
                .filter(|i| policy.key_may_match(&(i + 1_000_000_000).to_le_bytes(), &filter))
                .count();
            assert!(
                false_positives < 300,
                "n={n}: {false_positives} false positives"
            );
        }
    }

    #[test]
    fn internal_policy_ignores_sequence() {
        use crate::internal_key::{InternalKey, ValueType};
        let policy = InternalFilterPolicy::new(BloomFilterPolicy::new(10));
        let stored = InternalKey::new(b"key", 5, ValueType::Value);
        let mut filter = Vec::new();
        policy.create_filter(&[stored.encoded()], &mut filter);
        let lookup = InternalKey::new(b"key", 99, ValueType::Value);
        assert!(policy.key_may_match(lookup.encoded(), &filter));
    }
}
