//! Reads a block written by [`crate::block_builder::BlockBuilder`]: checks the
//! restart array once, then decodes entries lazily with bounds checks on
//! every length. The layout is in `docs/format/table.md` ("Blocks").

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::coding::{decode_fixed32, decode_varint32};
use crate::comparator::Comparator;
use crate::error::{Error, Result};
use crate::iterator::KvIterator;

/// The decoded contents of one block (after the trailer is checked and the
/// block decompressed). Cheap to clone; may share a memory-mapped file.
#[derive(Debug, Clone)]
pub struct Block {
    data: Bytes,
    restarts_offset: usize,
    num_restarts: usize,
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
        })
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
    /// Restart group holding `current`.
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
        self.key.clear();
        self.restart_index = index;
        // `current` is fixed by the next parse_next_entry call.
        self.next_offset = self.block.restart_point(index);
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
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) < self.current
        {
            self.restart_index += 1;
        }
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
        // Binary search for the last restart point whose key is < target.
        let (mut left, mut right) = (0usize, self.block.num_restarts - 1);
        while left < right {
            let mid = (left + right).div_ceil(2);
            let Some(mid_key) = self.key_at_restart(mid) else {
                self.current = self.block.restart_point(mid);
                self.mark_corrupt("restart point does not start a full key");
                return;
            };
            if self.comparator.compare(mid_key, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        // Then walk forward to the first key >= target.
        self.seek_to_restart_point(left);
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
        // Back up to a restart point that starts before the current entry.
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

    proptest! {
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
        fn corrupted_blocks_never_panic(entries in sorted_entries(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
            let block = build(&entries, 4);
            let mut bytes = block.data().to_vec();
            for (at, byte) in flips {
                let at = at % bytes.len();
                bytes[at] ^= byte | 1;
            }
            if cut % 3 == 0 {
                bytes.truncate(cut % (bytes.len() + 1));
            }
            if let Ok(block) = Block::new(bytes) {
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
