//! Key orderings. A table stores, in its MANIFEST entry and its index
//! separators, the consequences of one ordering; the two LevelDB ones are
//! here: plain bytewise order for user keys and the internal-key order that
//! every table written by the engine uses. [`KeyOrder`] is a database's
//! user-key order as the engine carries it: bytewise (inlined, the only one
//! the data-parallel executors know) or a custom [`Comparator`].

use std::cmp::Ordering;
use std::fmt::Debug;
use std::sync::Arc;

use crate::internal_key::{
    extract_user_key, pack_sequence_and_type, ValueType, MAX_SEQUENCE_NUMBER,
};

/// The name LevelDB records for bytewise order. A MANIFEST with another
/// comparator name is rejected on open.
pub const BYTEWISE_COMPARATOR_NAME: &str = "leveldb.BytewiseComparator";

/// A total order on keys plus the two key-shortening hooks a table builder
/// uses for index entries. Implementations must agree with LevelDB's for files
/// to be interchangeable.
pub trait Comparator: Send + Sync + Debug {
    /// Name stored in the MANIFEST. A database created with one name opens
    /// only with a comparator of the same name.
    fn name(&self) -> &str;
    /// Three-way comparison.
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;
    /// Changes `start` to a short key in `[start, limit)` when one exists.
    /// REQUIRES: `start < limit`.
    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]);
    /// Changes `key` to a short key `>= key`.
    fn find_short_successor(&self, key: &mut Vec<u8>);
    /// When this order first compares a part of each key bytewise (and
    /// looks further only when those parts are equal), that part of `key`.
    /// Lets a block search on dense key prefixes instead of decoding every
    /// probed key (see `Block::with_search_index`). `None` (the default)
    /// for an order that is not of that shape.
    fn bytewise_part<'a>(&self, _key: &'a [u8]) -> Option<&'a [u8]> {
        None
    }
    /// True only for [`InternalKeyComparator`] (internal keys over bytewise
    /// user keys): a hot loop may then compare with
    /// [`compare_internal_keys`], inlined, instead of through a trait
    /// object. False (the default) for every other order.
    fn is_bytewise_internal(&self) -> bool {
        false
    }
}

/// Lexicographic order of unsigned bytes (`memcmp`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BytewiseComparator;

impl Comparator for BytewiseComparator {
    fn name(&self) -> &str {
        BYTEWISE_COMPARATOR_NAME
    }

    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_bytes(a, b)
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
        if common >= start.len().min(limit.len()) {
            // One is a prefix of the other: no shorter separator.
            return;
        }
        let diff_byte = start[common];
        if diff_byte < 0xff && diff_byte + 1 < limit[common] {
            start[common] += 1;
            start.truncate(common + 1);
        }
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        if let Some(i) = key.iter().position(|&b| b != 0xff) {
            key[i] += 1;
            key.truncate(i + 1);
        }
        // A run of 0xff bytes is its own shortest successor.
    }

    fn bytewise_part<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        Some(key)
    }
}

/// Order of internal keys (`user_key | seq<<8 | type`): user key ascending by
/// the user comparator (bytewise here), then the 8-byte tag descending so that
/// newer entries of one user key come first.
#[derive(Debug, Clone, Copy, Default)]
pub struct InternalKeyComparator;

/// Bytewise order (as `memcmp`, then the shorter first), eight bytes at a
/// time and inlined: keys are short and often share long prefixes (db_bench
/// keys share nine digits), where the call to `memcmp` that `<[u8]>::cmp`
/// makes costs more than the comparison itself. A memtable insert compares
/// once per step down its skip list.
#[inline]
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let (mut a_rest, mut b_rest) = (a, b);
    while let (Some((x, a_tail)), Some((y, b_tail))) = (
        a_rest.split_first_chunk::<8>(),
        b_rest.split_first_chunk::<8>(),
    ) {
        if x != y {
            return u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y));
        }
        (a_rest, b_rest) = (a_tail, b_tail);
    }
    for (x, y) in a_rest.iter().zip(b_rest) {
        if x != y {
            return x.cmp(y);
        }
    }
    a_rest.len().cmp(&b_rest.len())
}

/// The first eight bytes of `bytes`, zero-padded, as a big-endian integer.
/// Integer order agrees with the bytewise order of the byte strings: if
/// `window(a) < window(b)` then `a < b` (strings that share their first
/// eight bytes tie). Compaction merges and block searches compare these
/// integers, taken after a prefix every key shares, before whole keys.
#[inline]
pub fn bytewise_window(bytes: &[u8]) -> u64 {
    // The usual case, one load: a copy of a length known only at run time
    // is a call to `memcpy`, too much for a function called once per
    // comparison.
    if let Some(first) = bytes.first_chunk::<8>() {
        return u64::from_be_bytes(*first);
    }
    let mut window = [0u8; 8];
    let n = bytes.len().min(8);
    window[..n].copy_from_slice(&bytes[..n]);
    u64::from_be_bytes(window)
}

/// Compares two encoded internal keys. Keys shorter than 8 bytes (only seen
/// in corrupt data) compare as if their tag were 0.
#[inline]
pub fn compare_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    match compare_bytes(extract_user_key(a), extract_user_key(b)) {
        Ordering::Equal => tag_of(b).cmp(&tag_of(a)),
        other => other,
    }
}

#[inline]
fn tag_of(key: &[u8]) -> u64 {
    key.len()
        .checked_sub(8)
        .and_then(|at| crate::coding::decode_fixed64(&key[at..]))
        .unwrap_or(0)
}

impl Comparator for InternalKeyComparator {
    fn name(&self) -> &str {
        INTERNAL_KEY_COMPARATOR_NAME
    }

    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_internal_keys(a, b)
    }

    fn is_bytewise_internal(&self) -> bool {
        true
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        shorten_internal_separator(&BytewiseComparator, start, limit);
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        shorten_internal_successor(&BytewiseComparator, key);
    }

    fn bytewise_part<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        // `compare_internal_keys` looks at the tag only on equal user keys.
        Some(extract_user_key(key))
    }
}

/// What LevelDB's `InternalKeyComparator` reports as its name.
const INTERNAL_KEY_COMPARATOR_NAME: &str = "leveldb.InternalKeyComparator";

/// LevelDB's `InternalKeyComparator::FindShortestSeparator` over `user`.
fn shorten_internal_separator(user: &dyn Comparator, start: &mut Vec<u8>, limit: &[u8]) {
    let user_start = extract_user_key(start);
    let user_limit = extract_user_key(limit);
    let mut shortened = user_start.to_vec();
    user.find_shortest_separator(&mut shortened, user_limit);
    if shortened.len() < user_start.len() && user.compare(user_start, &shortened).is_lt() {
        // The user key got shorter but logically larger: the earliest
        // possible tag keeps it before every entry of that user key.
        append_max_tag(&mut shortened);
        *start = shortened;
    }
}

/// LevelDB's `InternalKeyComparator::FindShortSuccessor` over `user`.
fn shorten_internal_successor(user: &dyn Comparator, key: &mut Vec<u8>) {
    let user_key = extract_user_key(key);
    let mut shortened = user_key.to_vec();
    user.find_short_successor(&mut shortened);
    if shortened.len() < user_key.len() && user.compare(user_key, &shortened).is_lt() {
        append_max_tag(&mut shortened);
        *key = shortened;
    }
}

/// A database's order of user keys: bytewise (LevelDB's default, inlined on
/// every path) or a custom [`Comparator`] (as LevelDB's
/// `Options::comparator`). Cheap to clone. Internal keys order by user key
/// in this order, then by tag descending.
///
/// Only bytewise order is known to the data-parallel executors, the device
/// kernels and remote workers (they compare key bytes directly); a
/// database with a custom order compacts on `streaming`.
#[derive(Clone, Default)]
pub struct KeyOrder {
    custom: Option<Arc<dyn Comparator>>,
}

impl Debug for KeyOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyOrder({})", self.name())
    }
}

/// Two orders are the same when their comparators have the same name, as
/// LevelDB judges a database's comparator on open.
impl PartialEq for KeyOrder {
    fn eq(&self, other: &KeyOrder) -> bool {
        self.name() == other.name()
    }
}

impl Eq for KeyOrder {}

impl KeyOrder {
    /// Bytewise order.
    pub fn bytewise() -> KeyOrder {
        KeyOrder::default()
    }

    /// The order of `comparator`.
    pub fn custom(comparator: Arc<dyn Comparator>) -> KeyOrder {
        KeyOrder {
            custom: Some(comparator),
        }
    }

    /// True for bytewise order.
    #[inline]
    pub fn is_bytewise(&self) -> bool {
        self.custom.is_none()
    }

    /// The comparator's name, as the MANIFEST records it.
    pub fn name(&self) -> &str {
        match &self.custom {
            None => BYTEWISE_COMPARATOR_NAME,
            Some(custom) => custom.name(),
        }
    }

    /// Three-way comparison of user keys.
    #[inline]
    pub fn compare_user(&self, a: &[u8], b: &[u8]) -> Ordering {
        match &self.custom {
            None => compare_bytes(a, b),
            Some(custom) => custom.compare(a, b),
        }
    }

    /// Three-way comparison of encoded internal keys: user key in this
    /// order, then tag descending.
    #[inline]
    pub fn compare_internal(&self, a: &[u8], b: &[u8]) -> Ordering {
        match &self.custom {
            None => compare_internal_keys(a, b),
            Some(custom) => compare_internal_with(&**custom, a, b),
        }
    }

    /// This order as a comparator of user keys.
    pub fn user_comparator(&self) -> Arc<dyn Comparator> {
        match &self.custom {
            None => Arc::new(BytewiseComparator),
            Some(custom) => custom.clone(),
        }
    }

    /// The comparator of internal keys over this order (for tables, index
    /// separators and merging iterators).
    pub fn internal_comparator(&self) -> Arc<dyn Comparator> {
        match &self.custom {
            None => Arc::new(InternalKeyComparator),
            Some(user) => Arc::new(CustomInternalKeyComparator { user: user.clone() }),
        }
    }
}

/// [`InternalKeyComparator`] over a custom user order.
#[derive(Debug, Clone)]
struct CustomInternalKeyComparator {
    user: Arc<dyn Comparator>,
}

/// Internal-key order over the user order `user`: user key, then tag
/// descending.
fn compare_internal_with(user: &dyn Comparator, a: &[u8], b: &[u8]) -> Ordering {
    match user.compare(extract_user_key(a), extract_user_key(b)) {
        Ordering::Equal => tag_of(b).cmp(&tag_of(a)),
        other => other,
    }
}

impl Comparator for CustomInternalKeyComparator {
    fn name(&self) -> &str {
        INTERNAL_KEY_COMPARATOR_NAME
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_internal_with(&*self.user, a, b)
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        shorten_internal_separator(&*self.user, start, limit);
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        shorten_internal_successor(&*self.user, key);
    }
}

fn append_max_tag(user_key: &mut Vec<u8>) {
    crate::coding::put_fixed64(
        user_key,
        pack_sequence_and_type(MAX_SEQUENCE_NUMBER, ValueType::VALUE_FOR_SEEK),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn compare_bytes_is_slice_order(
            prefix in proptest::collection::vec(any::<u8>(), 0..20),
            a in proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..20),
            b in proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..20),
        ) {
            let (a, b) = ([&prefix[..], &a].concat(), [&prefix[..], &b].concat());
            prop_assert_eq!(compare_bytes(&a, &b), a.cmp(&b));
            prop_assert_eq!(compare_bytes(&b, &a), b.cmp(&a));
            prop_assert_eq!(compare_bytes(&a, &a), Ordering::Equal);
        }

        #[test]
        fn the_window_is_the_zero_padded_first_eight_bytes_and_keeps_order(
            a in proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..12),
            b in proptest::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..12),
        ) {
            let mut padded = [0u8; 8];
            let n = a.len().min(8);
            padded[..n].copy_from_slice(&a[..n]);
            prop_assert_eq!(bytewise_window(&a), u64::from_be_bytes(padded));
            if bytewise_window(&a) < bytewise_window(&b) {
                prop_assert!(a < b);
            }
        }
    }
    use crate::internal_key::InternalKey;

    fn sep(start: &[u8], limit: &[u8]) -> Vec<u8> {
        let mut s = start.to_vec();
        BytewiseComparator.find_shortest_separator(&mut s, limit);
        s
    }

    #[test]
    fn bytewise_separator_cases() {
        assert_eq!(sep(b"abcdef", b"abzzz"), b"abd");
        assert_eq!(sep(b"abc", b"abcd"), b"abc"); // prefix
        assert_eq!(sep(b"abc", b"abd"), b"abc"); // adjacent bytes
        assert_eq!(sep(b"a\xff\x01", b"b"), b"a\xff\x01");
        assert_eq!(sep(b"", b"a"), b"");
    }

    #[test]
    fn bytewise_successor_cases() {
        let mut k = b"abc".to_vec();
        BytewiseComparator.find_short_successor(&mut k);
        assert_eq!(k, b"b");
        let mut k = b"\xff\xffq".to_vec();
        BytewiseComparator.find_short_successor(&mut k);
        assert_eq!(k, b"\xff\xffr");
        let mut k = b"\xff\xff".to_vec();
        BytewiseComparator.find_short_successor(&mut k);
        assert_eq!(k, b"\xff\xff");
    }

    #[test]
    fn internal_order_is_user_key_then_newest_first() {
        let a1 = InternalKey::new(b"a", 1, ValueType::Value);
        let a2 = InternalKey::new(b"a", 2, ValueType::Value);
        let a2d = InternalKey::new(b"a", 2, ValueType::Deletion);
        let b1 = InternalKey::new(b"b", 1, ValueType::Value);
        assert_eq!(
            compare_internal_keys(a2.encoded(), a1.encoded()),
            Ordering::Less
        );
        assert_eq!(
            compare_internal_keys(a2.encoded(), a2d.encoded()),
            Ordering::Less
        );
        assert_eq!(
            compare_internal_keys(a1.encoded(), b1.encoded()),
            Ordering::Less
        );
    }

    #[test]
    fn internal_separator_appends_max_tag() {
        let start = InternalKey::new(b"foo", 100, ValueType::Value);
        let limit = InternalKey::new(b"hello", 200, ValueType::Value);
        let mut s = start.encoded().to_vec();
        InternalKeyComparator.find_shortest_separator(&mut s, limit.encoded());
        let expect = InternalKey::new(b"g", MAX_SEQUENCE_NUMBER, ValueType::Value);
        assert_eq!(s, expect.encoded());

        // Same user key: unchanged.
        let limit = InternalKey::new(b"foo", 99, ValueType::Value);
        let mut s = start.encoded().to_vec();
        InternalKeyComparator.find_shortest_separator(&mut s, limit.encoded());
        assert_eq!(s, start.encoded());
    }
}
