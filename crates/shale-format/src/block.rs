//! Reads a block written by [`crate::block_builder::BlockBuilder`]: checks the
//! restart array once, then decodes entries lazily with bounds checks on
//! every length. The layout is in `docs/format/table.md` ("Blocks").

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::block_builder::shared_prefix_len;
use crate::coding::{decode_fixed32, decode_varint32};
use crate::comparator::{bytewise_window, Comparator};
use crate::error::{Error, Result};
use crate::iterator::KvIterator;

/// The decoded contents of one block (after the trailer is checked and the
/// block decompressed). Cheap to clone; may share a memory-mapped file.
#[derive(Debug, Clone)]
pub struct Block {
    data: Bytes,
    restarts_offset: usize,
    num_restarts: usize,
    /// Dense restart-key prefixes for seeks; see [`Block::with_search_index`].
    search: Option<Arc<SearchIndex>>,
}

/// Blocks with fewer restart points are searched as they are: the dense
/// array would save at most a probe or two.
const MIN_RESTARTS_FOR_SEARCH_INDEX: usize = 16;

/// Eight bytes of every restart key of a block, taken after the prefix all
/// of them share, as big-endian integers ("windows"). Window order agrees
/// with key order (with ties), so a seek binary-searches the windows and
/// decodes full keys only among equal ones. Without it every probe of the
/// binary search decodes a key at a scattered offset of the block: in an
/// index block of a few thousand entries, about a dozen probes per table
/// lookup, each likely a cache miss. The windows sit in cache lines of five, each
/// with the five restart offsets, under a top array of every line's last
/// window: a seek touches the small top array, one line, and then the
/// entry itself (not the block's restart array).
#[derive(Debug)]
struct SearchIndex {
    /// The order the block was written in; gives the bytewise part of a key.
    comparator: Arc<dyn Comparator>,
    /// Prefix of the bytewise part shared by every restart key but perhaps
    /// the last (an index block's last key is often a short successor).
    shared: Box<[u8]>,
    /// The last window of each line.
    tops: Box<[u64]>,
    lines: Box<[Line]>,
    /// Number of restart points.
    len: usize,
}

/// Restart points per [`Line`]: five windows and five offsets fill 60 of
/// its 64 bytes.
const LINE_RESTARTS: usize = 5;

/// Windows and offsets of five consecutive restart points, one cache line.
/// Past the last restart point, windows are `u64::MAX`.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line {
    windows: [u64; LINE_RESTARTS],
    offsets: [u32; LINE_RESTARTS],
}

impl SearchIndex {
    /// Builds the index from the restart keys' bytewise parts and offsets;
    /// `None` when the windows are out of order (a corrupt block).
    fn new(
        comparator: &Arc<dyn Comparator>,
        parts: &[&[u8]],
        offsets: &[u32],
    ) -> Option<SearchIndex> {
        let first = parts[0];
        let shared = &first[..shared_prefix_len(first, parts[parts.len() - 2])];
        let windows: Vec<u64> = parts.iter().map(|part| window(shared, part)).collect();
        if !windows.is_sorted() {
            return None;
        }
        let lines = windows
            .chunks(LINE_RESTARTS)
            .zip(offsets.chunks(LINE_RESTARTS))
            .map(|(windows, offsets)| {
                let mut line = Line {
                    windows: [u64::MAX; LINE_RESTARTS],
                    offsets: [0; LINE_RESTARTS],
                };
                line.windows[..windows.len()].copy_from_slice(windows);
                line.offsets[..offsets.len()].copy_from_slice(offsets);
                line
            })
            .collect();
        let tops = windows
            .chunks(LINE_RESTARTS)
            .map(|chunk| chunk[chunk.len() - 1])
            .collect();
        Some(SearchIndex {
            comparator: comparator.clone(),
            shared: shared.into(),
            tops,
            lines,
            len: parts.len(),
        })
    }

    fn window_at(&self, index: usize) -> u64 {
        self.lines[index / LINE_RESTARTS].windows[index % LINE_RESTARTS]
    }

    /// The range of restart points `[left, right]` that holds the last one
    /// whose key is below the key with bytewise part `part` (or 0 when
    /// none is): every restart before `left + 1` is below it, every one
    /// after `right` above it. Also the offset of restart point `left`.
    fn narrow(&self, part: &[u8]) -> (usize, usize, usize) {
        let target = window(&self.shared, part);
        let line = self.tops.partition_point(|&w| w < target);
        let below = match self.lines.get(line) {
            Some(found) => line * LINE_RESTARTS + found.windows.partition_point(|&w| w < target),
            None => self.len,
        };
        // Ties are few (usually none): gallop from `below`.
        let mut step = 1;
        while below + step <= self.len && self.window_at(below + step - 1) == target {
            step *= 2;
        }
        let (mut lo, mut hi) = (below + step / 2, (below + step).min(self.len));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.window_at(mid) == target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let left = below.saturating_sub(1);
        let offset = self.lines[left / LINE_RESTARTS].offsets[left % LINE_RESTARTS];
        (left, lo.saturating_sub(1).max(left), offset as usize)
    }
}

/// The search integer of a key whose bytewise part is `part`, in a block
/// whose restart keys share `shared`: the window after the shared prefix, or
/// the extremes for keys outside the range of keys with that prefix. If
/// `window(a) < window(b)` then `a < b`.
fn window(shared: &[u8], part: &[u8]) -> u64 {
    match part.strip_prefix(shared) {
        Some(rest) => bytewise_window(rest),
        None if part < shared => 0,
        None => u64::MAX,
    }
}

impl Block {
    /// Checks the restart array of `data`. A corruption error (offsets within
    /// the block) when the block is too short or the restart count does not fit.
    pub fn new(data: impl Into<Bytes>) -> Result<Block> {
        let data: Bytes = data.into();
        let size = data.len();
        if size < 4 {
            return Err(Error::corruption(
                0,
                format!("block of {size} bytes has no restart count"),
            ));
        }
        let num_restarts = decode_fixed32(&data[size - 4..]).unwrap_or(u32::MAX) as usize;
        let max_restarts = (size - 4) / 4;
        if num_restarts > max_restarts {
            return Err(Error::corruption(
                (size - 4) as u64,
                format!("block of {size} bytes claims {num_restarts} restart points"),
            ));
        }
        if num_restarts == 0 && size > 4 {
            return Err(Error::corruption(
                (size - 4) as u64,
                "block with entries has no restart point",
            ));
        }
        Ok(Block {
            restarts_offset: size - (1 + num_restarts) * 4,
            num_restarts,
            data,
            search: None,
        })
    }

    /// The block with a dense search index over its restart keys (about 8
    /// bytes per restart point), for blocks that are sought often and have
    /// many restart points: a table's index block. Seeks find the same
    /// entries with or without it. `comparator` must be the order the block
    /// was written in; orders without a bytewise part, blocks with few
    /// restart points and blocks whose restart keys do not decode in order
    /// are left as they are (a malformed block then fails on seek as usual).
    pub fn with_search_index(mut self, comparator: &Arc<dyn Comparator>) -> Block {
        if self.num_restarts >= MIN_RESTARTS_FOR_SEARCH_INDEX {
            self.search = self.build_search_index(comparator).map(Arc::new);
        }
        self
    }

    fn build_search_index(&self, comparator: &Arc<dyn Comparator>) -> Option<SearchIndex> {
        let limit = self.restarts_offset;
        let mut offsets = Vec::with_capacity(self.num_restarts);
        let parts = (0..self.num_restarts)
            .map(|index| {
                let offset = self.restart_point(index);
                let entry = decode_entry(&self.data, offset, limit)?;
                if entry.shared != 0 {
                    return None;
                }
                offsets.push(u32::try_from(offset).ok()?);
                comparator.bytewise_part(&self.data[entry.body..entry.body + entry.non_shared])
            })
            .collect::<Option<Vec<&[u8]>>>()?;
        SearchIndex::new(comparator, &parts, &offsets)
    }

    /// Size of the block contents in bytes.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// The raw contents.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// A cursor over the entries, ordered by `comparator`.
    pub fn iter(&self, comparator: Arc<dyn Comparator>) -> BlockIter {
        BlockIter {
            block: self.clone(),
            comparator,
            current: self.restarts_offset,
            next_offset: self.restarts_offset,
            restart_index: self.num_restarts,
            key: SmallVec::new(),
            value: (0, 0),
            error: None,
        }
    }

    fn restart_point(&self, index: usize) -> usize {
        let at = self.restarts_offset + index * 4;
        decode_fixed32(&self.data[at..]).unwrap_or(u32::MAX) as usize
    }
}

/// One decoded entry header: where the key suffix and value are.
struct EntryHeader {
    shared: usize,
    non_shared: usize,
    value_len: usize,
    /// Offset of the key suffix.
    body: usize,
}

/// Decodes the three varints at `offset`, checking that the entry ends at or
/// before `limit`.
#[inline]
fn decode_entry(data: &[u8], offset: usize, limit: usize) -> Option<EntryHeader> {
    let region = data.get(offset..limit)?;
    if region.len() < 3 {
        return None;
    }
    let (shared, non_shared, value_len, header_len) = if (region[0] | region[1] | region[2]) < 0x80
    {
        // All three lengths fit in one byte each: the common case.
        (region[0] as u32, region[1] as u32, region[2] as u32, 3)
    } else {
        let (shared, a) = decode_varint32(region)?;
        let (non_shared, b) = decode_varint32(&region[a..])?;
        let (value_len, c) = decode_varint32(&region[a + b..])?;
        (shared, non_shared, value_len, a + b + c)
    };
    let body_len = non_shared as u64 + value_len as u64;
    if body_len > (region.len() - header_len) as u64 {
        return None;
    }
    Some(EntryHeader {
        shared: shared as usize,
        non_shared: non_shared as usize,
        value_len: value_len as usize,
        body: offset + header_len,
    })
}

/// A cursor over one block.
#[derive(Debug)]
pub struct BlockIter {
    block: Block,
    comparator: Arc<dyn Comparator>,
    /// Offset of the current entry; `restarts_offset` when not valid.
    current: usize,
    /// Offset just past the current entry.
    next_offset: usize,
    /// A restart group at or before the one holding `current` (forward
    /// moves leave it behind; `prev` catches it up).
    restart_index: usize,
    /// The current key, rebuilt from its shared prefix. Inline up to 32
    /// bytes (a 16-byte user key and its 8-byte tag fit): a point lookup
    /// seeks two blocks per table and should not allocate for it.
    key: SmallVec<[u8; 32]>,
    /// Value as (offset, length) into the block.
    value: (usize, usize),
    error: Option<Error>,
}

impl BlockIter {
    fn restarts_offset(&self) -> usize {
        self.block.restarts_offset
    }

    fn mark_corrupt(&mut self, reason: &str) {
        if self.error.is_none() {
            self.error = Some(Error::corruption(
                self.current as u64,
                format!("bad block entry: {reason}"),
            ));
        }
        self.current = self.restarts_offset();
        self.next_offset = self.restarts_offset();
        self.restart_index = self.block.num_restarts;
        self.key.clear();
        self.value = (0, 0);
    }

    fn seek_to_restart_point(&mut self, index: usize) {
        self.seek_to_offset(index, self.block.restart_point(index));
    }

    /// Like `seek_to_restart_point` when the caller knows the offset.
    fn seek_to_offset(&mut self, restart_index: usize, offset: usize) {
        self.key.clear();
        self.restart_index = restart_index;
        // `current` is fixed by the next parse_next_entry call.
        self.next_offset = offset;
    }

    /// Decodes the entry at `next_offset`; false at the end or on corruption.
    fn parse_next_entry(&mut self) -> bool {
        self.current = self.next_offset;
        let limit = self.restarts_offset();
        if self.current >= limit {
            self.current = limit;
            self.restart_index = self.block.num_restarts;
            return false;
        }
        let data = &self.block.data;
        let Some(entry) = decode_entry(data, self.current, limit) else {
            self.mark_corrupt("entry runs past the restart array");
            return false;
        };
        if entry.shared > self.key.len() {
            self.mark_corrupt("shared key bytes exceed the previous key");
            return false;
        }
        self.key.truncate(entry.shared);
        self.key
            .extend_from_slice(&data[entry.body..entry.body + entry.non_shared]);
        self.value = (entry.body + entry.non_shared, entry.value_len);
        self.next_offset = entry.body + entry.non_shared + entry.value_len;
        // `restart_index` is not advanced here (a read of the restart
        // array, often a cache line of its own, per entry); `prev` finds
        // the group it needs.
        true
    }

    /// The full key stored at restart point `index` (which has no shared
    /// prefix), or `None` when that entry is malformed.
    fn key_at_restart(&self, index: usize) -> Option<&[u8]> {
        let offset = self.block.restart_point(index);
        let entry = decode_entry(&self.block.data, offset, self.restarts_offset())?;
        if entry.shared != 0 {
            return None;
        }
        Some(&self.block.data[entry.body..entry.body + entry.non_shared])
    }
}

impl KvIterator for BlockIter {
    fn valid(&self) -> bool {
        self.current < self.restarts_offset()
    }

    fn seek_to_first(&mut self) {
        if self.block.num_restarts == 0 {
            self.current = self.restarts_offset();
            return;
        }
        self.seek_to_restart_point(0);
        self.parse_next_entry();
    }

    fn seek_to_last(&mut self) {
        if self.block.num_restarts == 0 {
            self.current = self.restarts_offset();
            return;
        }
        self.seek_to_restart_point(self.block.num_restarts - 1);
        while self.parse_next_entry() && self.next_offset < self.restarts_offset() {}
    }

    fn seek(&mut self, target: &[u8]) {
        if self.block.num_restarts == 0 {
            self.current = self.restarts_offset();
            return;
        }
        // Binary search for the last restart point whose key is < target,
        // first on the dense windows when the block has them.
        let last = self.block.num_restarts - 1;
        let (mut left, mut right, mut left_offset) = match &self.block.search {
            Some(search) => match search.comparator.bytewise_part(target) {
                Some(part) => {
                    let (left, right, offset) = search.narrow(part);
                    (left, right, Some(offset))
                }
                None => (0, last, None),
            },
            None => (0, last, None),
        };
        while left < right {
            let mid = (left + right).div_ceil(2);
            let Some(mid_key) = self.key_at_restart(mid) else {
                self.current = self.block.restart_point(mid);
                self.mark_corrupt("restart point does not start a full key");
                return;
            };
            if self.comparator.compare(mid_key, target) == Ordering::Less {
                left = mid;
                left_offset = None;
            } else {
                right = mid - 1;
            }
        }
        // Then walk forward to the first key >= target.
        match left_offset {
            Some(offset) => self.seek_to_offset(left, offset),
            None => self.seek_to_restart_point(left),
        }
        while self.parse_next_entry() {
            if self.comparator.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        self.parse_next_entry();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        let original = self.current;
        // Catch up with the group of the current entry, then back up to a
        // restart point that starts before it.
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) < original
        {
            self.restart_index += 1;
        }
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.current = self.restarts_offset();
                self.restart_index = self.block.num_restarts;
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart_point(self.restart_index);
        // Walk forward to the entry just before `original`.
        while self.parse_next_entry() && self.next_offset < original {}
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        let (offset, len) = self.value;
        &self.block.data[offset..offset + len]
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_builder::BlockBuilder;
    use crate::comparator::BytewiseComparator;
    use crate::iterator::collect_all;
    use proptest::prelude::*;

    fn build(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Block {
        let mut builder = BlockBuilder::new(restart_interval);
        for (k, v) in entries {
            builder.add(k, v);
        }
        Block::new(builder.finish().to_vec()).unwrap()
    }

    fn sorted_entries() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
        proptest::collection::btree_map(
            proptest::collection::vec(any::<u8>(), 0..24),
            proptest::collection::vec(any::<u8>(), 0..40),
            0..200,
        )
        .prop_map(|m| m.into_iter().collect())
    }

    #[test]
    fn empty_block_iterates_nothing() {
        let block = build(&[], 16);
        let mut it = block.iter(Arc::new(BytewiseComparator));
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"x");
        assert!(!it.valid());
        assert!(it.status().is_ok());
    }

    #[test]
    fn short_and_lying_blocks_are_corruption() {
        assert!(Block::new(vec![1u8, 0]).unwrap_err().is_corruption());
        assert!(Block::new(vec![0u8, 0, 0, 0, 9, 0, 0, 0])
            .unwrap_err()
            .is_corruption());
        assert!(Block::new(vec![7u8, 7, 7, 0, 0, 0, 0])
            .unwrap_err()
            .is_corruption());
    }

    #[test]
    fn entry_past_restarts_is_reported() {
        // One entry claiming a 100-byte value in a 12-byte block.
        let block = Block::new(vec![0u8, 1, 100, b'k', 0, 0, 0, 0, 1, 0, 0, 0]).unwrap();
        let mut it = block.iter(Arc::new(BytewiseComparator));
        it.seek_to_first();
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());
    }

    /// Keys with long shared prefixes and a small alphabet, so that many
    /// restart keys tie on their eight-byte window.
    fn clustered_key() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::sample::select(vec![&b""[..], b"user", b"000000000", b"\xff\xff"]),
            proptest::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'b', 0xff]), 0..12),
        )
            .prop_map(|(prefix, suffix)| [prefix, &suffix[..]].concat())
    }

    /// Seeks the same probes in `block` with and without the search index.
    fn assert_same_seeks(block: &Block, comparator: Arc<dyn Comparator>, probes: &[Vec<u8>]) {
        let indexed = block.clone().with_search_index(&comparator);
        assert!(indexed.search.is_some() || block.num_restarts() < MIN_RESTARTS_FOR_SEARCH_INDEX);
        let mut plain_it = block.iter(comparator.clone());
        let mut indexed_it = indexed.iter(comparator);
        for probe in probes {
            plain_it.seek(probe);
            indexed_it.seek(probe);
            assert_eq!(plain_it.valid(), indexed_it.valid(), "probe {probe:?}");
            if plain_it.valid() {
                assert_eq!(plain_it.key(), indexed_it.key(), "probe {probe:?}");
                assert_eq!(plain_it.value(), indexed_it.value(), "probe {probe:?}");
            }
        }
    }

    #[test]
    fn search_index_needs_many_restarts_and_a_bytewise_order() {
        #[derive(Debug)]
        struct Reverse;
        impl Comparator for Reverse {
            fn name(&self) -> &'static str {
                "test.Reverse"
            }
            fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
                b.cmp(a)
            }
            fn find_shortest_separator(&self, _: &mut Vec<u8>, _: &[u8]) {}
            fn find_short_successor(&self, _: &mut Vec<u8>) {}
        }
        let entries: Vec<_> = (0..100u32)
            .map(|i| (format!("{i:016}").into_bytes(), vec![1u8]))
            .collect();
        let bytewise: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let many = build(&entries, 1).with_search_index(&bytewise);
        let search = many
            .search
            .as_ref()
            .expect("100 restart points get an index");
        assert_eq!(&*search.shared, b"00000000000000");
        assert_eq!(
            (search.len, search.lines.len(), search.tops.len()),
            (100, 20, 20)
        );
        assert!(build(&entries, 16)
            .with_search_index(&bytewise)
            .search
            .is_none());
        let reversed: Vec<_> = entries.iter().rev().cloned().collect();
        let reverse: Arc<dyn Comparator> = Arc::new(Reverse);
        assert!(build(&reversed, 1)
            .with_search_index(&reverse)
            .search
            .is_none());
    }

    proptest! {
        #[test]
        fn search_index_seeks_like_the_plain_search(
            keys in proptest::collection::btree_set(clustered_key(), 0..300),
            interval in 1usize..4,
            probes in proptest::collection::vec(clustered_key(), 1..64),
        ) {
            let entries: Vec<_> = keys.iter().map(|k| (k.clone(), k.repeat(2))).collect();
            let block = build(&entries, interval);
            let mut probes = probes;
            probes.extend(keys.iter().cloned());
            assert_same_seeks(&block, Arc::new(BytewiseComparator), &probes);
        }

        #[test]
        fn search_index_seeks_internal_keys_like_the_plain_search(
            keys in proptest::collection::btree_set((clustered_key(), 1u64..4), 0..300),
            probes in proptest::collection::vec((clustered_key(), 0u64..5), 1..64),
        ) {
            use crate::internal_key::{InternalKey, ValueType};
            let internal = |(user, seq): &(Vec<u8>, u64)| {
                InternalKey::new(user, *seq, ValueType::Value).encoded().to_vec()
            };
            let comparator: Arc<dyn Comparator> = Arc::new(crate::comparator::InternalKeyComparator);
            let mut entries: Vec<_> = keys.iter().map(|k| (internal(k), vec![7u8])).collect();
            entries.sort_by(|a, b| comparator.compare(&a.0, &b.0));
            let block = build(&entries, 1);
            let probes: Vec<_> = probes.iter().chain(&keys).map(internal).collect();
            assert_same_seeks(&block, comparator, &probes);
        }

        #[test]
        fn round_trip_and_seek(entries in sorted_entries(), interval in 1usize..20, probe in proptest::collection::vec(any::<u8>(), 0..24)) {
            let block = build(&entries, interval);
            let mut it = block.iter(Arc::new(BytewiseComparator));
            prop_assert_eq!(collect_all(&mut it).unwrap(), entries.clone());

            // Backwards.
            let mut reversed = Vec::new();
            it.seek_to_last();
            while it.valid() {
                reversed.push((it.key().to_vec(), it.value().to_vec()));
                it.prev();
            }
            reversed.reverse();
            prop_assert_eq!(&reversed, &entries);

            // Forward some steps (across restart groups), then back to the
            // start: `prev` after forward moves.
            let steps = probe.iter().map(|&b| b as usize).sum::<usize>() % (entries.len() + 1);
            it.seek_to_first();
            for _ in 0..steps.min(entries.len().saturating_sub(1)) {
                it.next();
            }
            let mut back = Vec::new();
            while it.valid() {
                back.push(it.key().to_vec());
                it.prev();
            }
            back.reverse();
            let expected: Vec<_> = entries.iter().take(back.len()).map(|(k, _)| k.clone()).collect();
            prop_assert_eq!(back.len(), steps.min(entries.len().saturating_sub(1)) + usize::from(!entries.is_empty()));
            prop_assert_eq!(back, expected);

            // Seek lands on the first key >= probe.
            it.seek(&probe);
            let expected = entries.iter().find(|(k, _)| k.as_slice() >= probe.as_slice());
            match expected {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), k.as_slice());
                    prop_assert_eq!(it.value(), v.as_slice());
                }
                None => prop_assert!(!it.valid()),
            }
        }

        #[test]
        fn corrupted_blocks_never_panic(entries in sorted_entries(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>(), interval in 1usize..5) {
            let block = build(&entries, interval);
            let mut bytes = block.data().to_vec();
            for (at, byte) in flips {
                let at = at % bytes.len();
                bytes[at] ^= byte | 1;
            }
            if cut % 3 == 0 {
                bytes.truncate(cut % (bytes.len() + 1));
            }
            if let Ok(block) = Block::new(bytes) {
                let block = block.with_search_index(&(Arc::new(BytewiseComparator) as Arc<dyn Comparator>));
                let mut it = block.iter(Arc::new(BytewiseComparator));
                let mut steps = 0;
                it.seek_to_first();
                while it.valid() && steps < 10_000 {
                    it.next();
                    steps += 1;
                }
                prop_assert!(steps < 10_000);
                it.seek_to_last();
                steps = 0;
                while it.valid() && steps < 10_000 {
                    it.prev();
                    steps += 1;
                }
                prop_assert!(steps < 10_000);
                it.seek(b"m");
                let _ = it.status();
            }
        }
    }
}
