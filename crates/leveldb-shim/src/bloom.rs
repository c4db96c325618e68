//! LevelDB's bloom filter policy (`leveldb::NewBloomFilterPolicy`) on its own,
//! to compare filter bytes and probe answers with ShaleDB's.

use crate::flat::FlatBytes;
use crate::table::check_bloom_bits;
use crate::{backend, Error};

/// Returns the filter `CreateFilter` builds over `keys` with
/// `NewBloomFilterPolicy(bits_per_key)`: the bit array followed by one byte
/// holding the number of probes.
pub fn bloom_create_filter(bits_per_key: i32, keys: &[&[u8]]) -> Result<Vec<u8>, Error> {
    check_bloom_bits(Some(bits_per_key))?;
    backend::bloom_create_filter(bits_per_key, &FlatBytes::from_items(keys)?)
}

/// `KeyMayMatch(key, filter)` of `NewBloomFilterPolicy(bits_per_key)`.
/// `false` means the key was certainly not among those the filter was built
/// from.
pub fn bloom_key_may_match(bits_per_key: i32, key: &[u8], filter: &[u8]) -> Result<bool, Error> {
    check_bloom_bits(Some(bits_per_key))?;
    backend::bloom_key_may_match(bits_per_key, key, filter)
}
