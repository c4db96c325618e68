//! Tables written and read by `leveldb::TableBuilder` and `leveldb::Table`.

use crate::flat::FlatEntries;
use crate::{backend, Entry, Error};

/// The `leveldb::Options` fields that shape a table file. Tables use the
/// default bytewise comparator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// Uncompressed size at which a data block is cut (`Options::block_size`).
    pub block_size: usize,
    /// Keys between restart points in a block
    /// (`Options::block_restart_interval`).
    pub block_restart_interval: i32,
    /// `Some(bits)` attaches `NewBloomFilterPolicy(bits)` as the filter
    /// policy; it must not be negative.
    pub bloom_bits_per_key: Option<i32>,
    /// Snappy-compress blocks (`kSnappyCompression`) instead of storing them
    /// raw (`kNoCompression`). Reading detects compression per block.
    pub snappy: bool,
}

impl Default for TableOptions {
    /// 4096-byte blocks, a restart every 16 keys, no filter, no compression.
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: None,
            snappy: false,
        }
    }
}

/// Builds a table with `leveldb::TableBuilder` in memory and returns the
/// exact bytes of the file LevelDB would have written.
///
/// Keys must be strictly increasing in bytewise order; otherwise this returns
/// an error (TableBuilder itself only asserts it in debug builds).
pub fn build_table(entries: &[Entry], opts: &TableOptions) -> Result<Vec<u8>, Error> {
    build_table_flat(&FlatEntries::from_pairs(entries)?, opts)
}

/// [`build_table`] over entries packed in advance, for benchmarks: one FFI
/// call, no per-entry conversion.
pub fn build_table_flat(entries: &FlatEntries, opts: &TableOptions) -> Result<Vec<u8>, Error> {
    check_bloom_bits(opts.bloom_bits_per_key)?;
    backend::build_table(entries, opts)
}

/// Opens table bytes with `leveldb::Table::Open` and returns every entry in
/// order.
///
/// Every checksum is verified: the footer, index and meta blocks (LevelDB
/// checks those only under `paranoid_checks`, which is set) and each data
/// block (`ReadOptions::verify_checksums`). With `bloom_bits_per_key` set,
/// Table::Open also loads the filter block, so a malformed one is noticed.
pub fn read_table(bytes: &[u8], opts: &TableOptions) -> Result<Vec<Entry>, Error> {
    check_bloom_bits(opts.bloom_bits_per_key)?;
    backend::read_table(bytes, opts)
}

/// LevelDB's bloom policy turns a negative bits-per-key into an enormous
/// allocation, so refuse it before it gets there.
pub(crate) fn check_bloom_bits(bits_per_key: Option<i32>) -> Result<(), Error> {
    match bits_per_key {
        Some(bits) if bits < 0 => Err(Error::InvalidArgument(format!(
            "bloom bits per key must not be negative, got {bits}"
        ))),
        _ => Ok(()),
    }
}
