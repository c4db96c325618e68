//! The filter block: one filter per 2 KiB range of data-block offsets, so a
//! reader finds the filter for a block from the block's offset alone.
//! The layout is in `docs/format/table.md` ("Filter block").

use std::sync::Arc;

use bytes::Bytes;

use crate::bloom::FilterPolicy;
use crate::coding::{decode_fixed32, put_fixed32};

/// log2 of the offset range one filter covers (2 KiB). Frozen: written into
/// every filter block.
pub const FILTER_BASE_LG: u8 = 11;
const FILTER_BASE: u64 = 1 << FILTER_BASE_LG;

/// Accumulates keys per data block and emits the filter block.
///
/// Call order: `(start_block add_key*)* finish`.
#[derive(Debug)]
pub struct FilterBlockBuilder {
    policy: Arc<dyn FilterPolicy>,
    /// Keys of the current filter, concatenated.
    keys: Vec<u8>,
    /// Start of each key in `keys`.
    starts: Vec<usize>,
    /// Hashes of the current filter's keys, instead of `keys` and `starts`,
    /// for a policy that hashes keys ([`FilterPolicy::hashed`]).
    hashes: Vec<u32>,
    result: Vec<u8>,
    filter_offsets: Vec<u32>,
}

impl FilterBlockBuilder {
    /// A builder producing filters with `policy`.
    pub fn new(policy: Arc<dyn FilterPolicy>) -> FilterBlockBuilder {
        FilterBlockBuilder {
            policy,
            keys: Vec::new(),
            starts: Vec::new(),
            hashes: Vec::new(),
            result: Vec::new(),
            filter_offsets: Vec::new(),
        }
    }

    /// Announces a data block starting at `block_offset`: filters for every
    /// 2 KiB range before it are emitted (empty ones for ranges with no keys).
    pub fn start_block(&mut self, block_offset: u64) {
        let filter_index = block_offset / FILTER_BASE;
        while filter_index > self.filter_offsets.len() as u64 {
            self.generate_filter();
        }
    }

    /// Adds a key of the current data block.
    pub fn add_key(&mut self, key: &[u8]) {
        match self.policy.hashed() {
            Some(hashed) => self.hashes.push(hashed.key_hash(key)),
            None => {
                self.starts.push(self.keys.len());
                self.keys.extend_from_slice(key);
            }
        }
    }

    /// Emits the last filter and the offset array; returns the block contents.
    pub fn finish(mut self) -> Vec<u8> {
        if !self.starts.is_empty() || !self.hashes.is_empty() {
            self.generate_filter();
        }
        append_filter_trailer(self.result, &self.filter_offsets)
    }

    fn generate_filter(&mut self) {
        self.filter_offsets.push(self.result.len() as u32);
        if !self.hashes.is_empty() {
            if let Some(hashed) = self.policy.hashed() {
                hashed.create_filter_from_hashes(&self.hashes, &mut self.result);
            }
            self.hashes.clear();
            return;
        }
        if self.starts.is_empty() {
            return;
        }
        self.starts.push(self.keys.len());
        let keys: Vec<&[u8]> = self
            .starts
            .windows(2)
            .map(|w| &self.keys[w[0]..w[1]])
            .collect();
        self.policy.create_filter(&keys, &mut self.result);
        self.keys.clear();
        self.starts.clear();
    }
}

/// Appends the offset array, its offset and the base to concatenated filters.
fn append_filter_trailer(mut result: Vec<u8>, filter_offsets: &[u32]) -> Vec<u8> {
    let array_offset = result.len() as u32;
    for &offset in filter_offsets {
        put_fixed32(&mut result, offset);
    }
    put_fixed32(&mut result, array_offset);
    result.push(FILTER_BASE_LG);
    result
}

/// Which data blocks each filter covers, for a table whose data blocks occupy
/// the byte ranges `blocks[i] = (start, end)` (end includes the trailer), in
/// order. Filter `f` holds the keys of blocks `plan[f]` (an empty range gives
/// an empty filter). This replays exactly the calls
/// [`FilterBlockBuilder`] receives from a table builder, so filters built
/// from the plan and laid out by [`assemble_filters`] equal its output.
pub fn plan_filters(blocks: &[(u64, u64)]) -> Vec<std::ops::Range<usize>> {
    let mut plan = Vec::new();
    let mut group_start = 0;
    for (i, &(_, end)) in blocks.iter().enumerate() {
        // Block i's keys were added; the next block starts at `end`.
        let filter_index = end / FILTER_BASE;
        while filter_index > plan.len() as u64 {
            plan.push(group_start..i + 1);
            group_start = i + 1;
        }
    }
    if group_start < blocks.len() {
        plan.push(group_start..blocks.len());
    }
    plan
}

/// Lays out finished filters as a filter block.
pub fn assemble_filters(filters: &[Vec<u8>]) -> Vec<u8> {
    let mut result =
        Vec::with_capacity(filters.iter().map(Vec::len).sum::<usize>() + 4 * filters.len() + 5);
    let mut offsets = Vec::with_capacity(filters.len());
    for filter in filters {
        offsets.push(result.len() as u32);
        result.extend_from_slice(filter);
    }
    append_filter_trailer(result, &offsets)
}

/// Answers filter queries from a filter block. Malformed blocks never fail a
/// read: every query on them answers "may match", as LevelDB does, because a
/// filter can only save work, never decide correctness.
#[derive(Debug, Clone)]
pub struct FilterBlockReader {
    policy: Arc<dyn FilterPolicy>,
    /// The block's bytes: a slice of the table's mapping where it has one,
    /// so opening a table copies none of its filter.
    data: Bytes,
    /// Offset of the filter-offset array; 0 with `num` = 0 when malformed.
    array_offset: usize,
    num: usize,
    base_lg: u8,
}

impl FilterBlockReader {
    /// Reads the trailer of `contents`.
    pub fn new(policy: Arc<dyn FilterPolicy>, contents: impl Into<Bytes>) -> FilterBlockReader {
        let data: Bytes = contents.into();
        let mut reader = FilterBlockReader {
            policy,
            data,
            array_offset: 0,
            num: 0,
            base_lg: FILTER_BASE_LG,
        };
        let n = reader.data.len();
        if n < 5 {
            return reader;
        }
        let base_lg = reader.data[n - 1];
        let array_offset = decode_fixed32(&reader.data[n - 5..]).unwrap_or(u32::MAX) as usize;
        if array_offset > n - 5 || base_lg >= 64 {
            return reader;
        }
        reader.base_lg = base_lg;
        reader.array_offset = array_offset;
        reader.num = (n - 5 - array_offset) / 4;
        reader
    }

    /// False only when `key` is certainly not in the data block that starts
    /// at `block_offset`.
    pub fn key_may_match(&self, block_offset: u64, key: &[u8]) -> bool {
        let index = (block_offset >> self.base_lg) as usize;
        if index >= self.num {
            // Out of range or no filters: only a false positive is safe.
            return true;
        }
        let at = self.array_offset + index * 4;
        let start = decode_fixed32(&self.data[at..]).unwrap_or(0) as usize;
        let limit = decode_fixed32(&self.data[at + 4..]).unwrap_or(0) as usize;
        if start <= limit && limit <= self.array_offset {
            if start == limit {
                // An empty filter: no key was added for this range.
                return false;
            }
            return self.policy.key_may_match(key, &self.data[start..limit]);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transparent policy, as in LevelDB's filter block test: the filter is
    /// the list of key hashes, so the layout can be checked by eye.
    #[derive(Debug)]
    struct HashListPolicy;

    impl FilterPolicy for HashListPolicy {
        fn name(&self) -> &'static str {
            "test.HashList"
        }
        fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
            for key in keys {
                put_fixed32(dst, crate::bloom::leveldb_hash(key, 1));
            }
        }
        fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
            let h = crate::bloom::leveldb_hash(key, 1);
            filter.chunks_exact(4).any(|c| decode_fixed32(c) == Some(h))
        }
    }

    #[test]
    fn empty_builder() {
        let block = FilterBlockBuilder::new(Arc::new(HashListPolicy)).finish();
        assert_eq!(block, [0, 0, 0, 0, 11]);
        let reader = FilterBlockReader::new(Arc::new(HashListPolicy), block);
        assert!(reader.key_may_match(0, b"foo"));
        assert!(reader.key_may_match(100_000, b"foo"));
    }

    #[test]
    fn single_chunk() {
        let mut builder = FilterBlockBuilder::new(Arc::new(HashListPolicy));
        builder.start_block(100);
        builder.add_key(b"foo");
        builder.add_key(b"bar");
        builder.start_block(200);
        builder.add_key(b"box");
        builder.start_block(300);
        builder.add_key(b"hello");
        let reader = FilterBlockReader::new(Arc::new(HashListPolicy), builder.finish());
        for key in [&b"foo"[..], b"bar", b"box", b"hello"] {
            assert!(reader.key_may_match(100, key));
        }
        assert!(!reader.key_may_match(100, b"missing"));
    }

    #[test]
    fn multi_chunk_with_empty_ranges() {
        let mut builder = FilterBlockBuilder::new(Arc::new(HashListPolicy));
        builder.start_block(0);
        builder.add_key(b"foo");
        builder.start_block(2000);
        builder.add_key(b"bar");
        builder.start_block(3100);
        builder.add_key(b"box");
        builder.start_block(9000);
        builder.add_key(b"box");
        builder.add_key(b"hello");
        let reader = FilterBlockReader::new(Arc::new(HashListPolicy), builder.finish());
        assert!(reader.key_may_match(0, b"foo"));
        assert!(reader.key_may_match(2000, b"bar"));
        assert!(!reader.key_may_match(0, b"box"));
        assert!(reader.key_may_match(3100, b"box"));
        assert!(!reader.key_may_match(3100, b"foo"));
        // Ranges 4096..8191 got empty filters.
        assert!(!reader.key_may_match(4100, b"box"));
        assert!(!reader.key_may_match(6000, b"hello"));
        assert!(reader.key_may_match(9000, b"box"));
        assert!(reader.key_may_match(9000, b"hello"));
        assert!(!reader.key_may_match(9000, b"foo"));
    }

    proptest::proptest! {
        #[test]
        fn plan_and_assemble_match_the_builder(sizes in proptest::collection::vec((1u64..5000, 1usize..4), 0..40)) {
            let policy: Arc<dyn FilterPolicy> = Arc::new(HashListPolicy);
            let mut builder = FilterBlockBuilder::new(policy.clone());
            builder.start_block(0);
            let mut offset = 0;
            let mut blocks = Vec::new();
            let mut keys_per_block = Vec::new();
            for (b, &(size, nkeys)) in sizes.iter().enumerate() {
                let keys: Vec<Vec<u8>> = (0..nkeys).map(|k| format!("{b}-{k}").into_bytes()).collect();
                for key in &keys {
                    builder.add_key(key);
                }
                blocks.push((offset, offset + size));
                offset += size;
                builder.start_block(offset);
                keys_per_block.push(keys);
            }
            let expected = builder.finish();
            let filters: Vec<Vec<u8>> = plan_filters(&blocks)
                .into_iter()
                .map(|range| {
                    let keys: Vec<&[u8]> = keys_per_block[range].iter().flatten().map(Vec::as_slice).collect();
                    let mut filter = Vec::new();
                    if !keys.is_empty() {
                        policy.create_filter(&keys, &mut filter);
                    }
                    filter
                })
                .collect();
            proptest::prop_assert_eq!(assemble_filters(&filters), expected);
        }
    }

    #[test]
    fn malformed_blocks_match_everything() {
        for bytes in [&[][..], &[1, 2, 3], &[9, 9, 9, 9, 11], &[0, 0, 0, 0, 200]] {
            let reader = FilterBlockReader::new(Arc::new(HashListPolicy), bytes.to_vec());
            assert!(reader.key_may_match(0, b"x"));
        }
    }

    /// The Bloom policy with its hashing hidden, so the builder keeps keys.
    #[derive(Debug)]
    struct KeysOnly(crate::bloom::InternalFilterPolicy<crate::bloom::BloomFilterPolicy>);

    impl FilterPolicy for KeysOnly {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
            self.0.create_filter(keys, dst);
        }
        fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
            self.0.key_may_match(key, filter)
        }
    }

    #[test]
    fn hashing_keys_as_they_come_builds_the_same_block() {
        use crate::bloom::{BloomFilterPolicy, InternalFilterPolicy};
        let policy = || InternalFilterPolicy::new(BloomFilterPolicy::new(10));
        let mut hashed = FilterBlockBuilder::new(Arc::new(policy()));
        let mut kept = FilterBlockBuilder::new(Arc::new(KeysOnly(policy())));
        let mut offset = 0;
        for block in 0u64..40 {
            hashed.start_block(offset);
            kept.start_block(offset);
            for i in 0..block % 7 {
                let mut key = format!("key{block:04}{i}").into_bytes();
                key.extend_from_slice(&(block * 8 + i).to_le_bytes());
                hashed.add_key(&key);
                kept.add_key(&key);
            }
            offset += 700 + block * 97;
        }
        assert_eq!(hashed.finish(), kept.finish());
    }
}
