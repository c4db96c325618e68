//! Options for building and reading tables.

use std::sync::Arc;

use crate::bloom::{BloomFilterPolicy, FilterPolicy, InternalFilterPolicy};
use crate::comparator::{BytewiseComparator, Comparator, InternalKeyComparator};
use crate::format::CompressionType;

/// How a table is laid out. The defaults are LevelDB's, with a 10-bit Bloom
/// filter added (LevelDB has none by default).
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Order of the keys; also shortens index keys.
    pub comparator: Arc<dyn Comparator>,
    /// Target size of a data block before compression, in bytes.
    pub block_size: usize,
    /// Entries between restart points in data blocks.
    pub block_restart_interval: usize,
    /// Per-block compression.
    pub compression: CompressionType,
    /// Filter written into the filter block, if any.
    pub filter_policy: Option<Arc<dyn FilterPolicy>>,
}

impl TableOptions {
    /// Options for tables of user keys in bytewise order (what LevelDB's
    /// `TableBuilder` writes with default options), with an optional Bloom
    /// filter.
    pub fn bytewise(bloom_bits_per_key: Option<u32>) -> TableOptions {
        TableOptions {
            comparator: Arc::new(BytewiseComparator),
            filter_policy: bloom_bits_per_key
                .map(|bits| Arc::new(BloomFilterPolicy::new(bits)) as Arc<dyn FilterPolicy>),
            ..TableOptions::default()
        }
    }

    /// Options for tables of internal keys, as a database writes them: the
    /// filter covers user keys only.
    pub fn internal(bloom_bits_per_key: Option<u32>) -> TableOptions {
        TableOptions {
            comparator: Arc::new(InternalKeyComparator),
            filter_policy: bloom_bits_per_key.map(|bits| {
                Arc::new(InternalFilterPolicy::new(BloomFilterPolicy::new(bits)))
                    as Arc<dyn FilterPolicy>
            }),
            ..TableOptions::default()
        }
    }
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            comparator: Arc::new(InternalKeyComparator),
            block_size: 4096,
            block_restart_interval: 16,
            compression: CompressionType::Snappy,
            filter_policy: Some(Arc::new(InternalFilterPolicy::new(BloomFilterPolicy::new(
                10,
            )))),
        }
    }
}
