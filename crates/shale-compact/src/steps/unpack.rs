//! Unpack: input data blocks into entries. A block's CRC is checked and it
//! is decompressed, then each restart group (the smallest unit whose keys do
//! not depend on another group) is parsed into a key arena plus entry
//! references; values are not copied, they stay in the block contents until
//! pack (lazy value movement). This is the CPU twin of the device kernel
//! that parses one restart group per work item.

use shale_format::coding::{decode_fixed32, decode_varint32};
use shale_format::format::{decode_block_into, BlockHandle};
use shale_format::internal_key::extract_user_key;
use shale_format::{Error, Result};

use crate::job::KeyRange;

/// Where one entry's key and value are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef {
    /// Offset of the full internal key in the block's key arena.
    pub key_offset: u32,
    /// Length of the internal key.
    pub key_len: u32,
    /// Offset of the value in the block contents.
    pub value_offset: u32,
    /// Length of the value.
    pub value_len: u32,
}

/// A decoded data block: contents (holding the values), full keys, entries.
#[derive(Debug, Default)]
pub struct ParsedBlock {
    /// Decompressed block contents; values point into it.
    pub contents: Vec<u8>,
    /// Full internal keys, concatenated.
    pub keys: Vec<u8>,
    /// The entries in block order.
    pub entries: Vec<EntryRef>,
}

impl ParsedBlock {
    /// The internal key of entry `i`.
    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        self.entry_key(&self.entries[i])
    }

    /// The internal key of `entry`, one of this block's entries.
    #[inline]
    pub fn entry_key(&self, entry: &EntryRef) -> &[u8] {
        &self.keys[entry.key_offset as usize..(entry.key_offset + entry.key_len) as usize]
    }

    /// The value of entry `i`.
    #[inline]
    pub fn value(&self, i: usize) -> &[u8] {
        let e = self.entries[i];
        &self.contents[e.value_offset as usize..(e.value_offset + e.value_len) as usize]
    }

    /// Keeps only the entries whose user key is in `range`: for the blocks
    /// at the edges of a sub-compaction's range (see
    /// [`crate::job::CompactionJob::range`]). Two binary searches, no
    /// allocation. REQUIRES: the entries are in key order.
    pub fn retain_range(&mut self, range: &KeyRange) {
        let user_key = |e: &EntryRef| extract_user_key(self.entry_key(e));
        let end = self
            .entries
            .partition_point(|e| !range.is_above(user_key(e)));
        let start = self.entries[..end].partition_point(|e| range.is_below(user_key(e)));
        self.entries.truncate(end);
        self.entries.drain(..start);
    }

    /// A block made of owned entries (the entries a slice hands to the next).
    pub fn from_entries(entries: &[(Vec<u8>, Vec<u8>)]) -> ParsedBlock {
        let mut block = ParsedBlock::default();
        for (key, value) in entries {
            block.entries.push(EntryRef {
                key_offset: block.keys.len() as u32,
                key_len: key.len() as u32,
                value_offset: block.contents.len() as u32,
                value_len: value.len() as u32,
            });
            block.keys.extend_from_slice(key);
            block.contents.extend_from_slice(value);
        }
        block
    }
}

/// Checks, decompresses and parses one block read with its trailer.
#[cfg_attr(
    not(feature = "opencl"),
    allow(dead_code, reason = "the opencl executor's twin; used by it")
)]
pub fn unpack_block(raw: &[u8], file: &str, handle: BlockHandle) -> Result<ParsedBlock> {
    let mut block = ParsedBlock::default();
    unpack_block_into(raw, file, handle, &mut block)?;
    Ok(block)
}

/// [`unpack_block`] into `block`, whose allocations are reused (see
/// [`crate::pool`]): what it held is replaced.
pub fn unpack_block_into(
    raw: &[u8],
    file: &str,
    handle: BlockHandle,
    block: &mut ParsedBlock,
) -> Result<()> {
    decode_block_into(raw, file, handle, true, &mut block.contents)?;
    let contents = &block.contents;
    let corrupt = |offset: usize, reason: &str| {
        Error::corruption(offset as u64, reason.to_string()).at(file, handle.offset)
    };
    thread_local! {
        static GROUPS: std::cell::RefCell<Vec<(usize, usize)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    GROUPS.with(|groups| {
        let mut groups = groups.borrow_mut();
        restart_groups_into(contents, &mut groups)
            .map_err(|(offset, reason)| corrupt(offset, reason))?;
        // Reused vectors keep their capacity; new ones start at about a
        // block's worth instead of growing there by doubling.
        block.keys.clear();
        block.entries.clear();
        if block.keys.capacity() == 0 {
            block.keys.reserve(contents.len() / 2);
            block.entries.reserve(contents.len() / 32);
        }
        for &(start, limit) in groups.iter() {
            parse_restart_group(contents, start, limit, &mut block.keys, &mut block.entries)
                .map_err(|offset| corrupt(offset, "bad entry in restart group"))?;
        }
        Ok(())
    })
}

/// The restart groups of a block's `contents` as `[start, limit)` offsets,
/// into `groups` (replacing what it held), after checking its restart
/// array: a count that fits the block, and points in order that tile the
/// entries. On a bad array, the offset within the contents and what is
/// wrong. (The `opencl` executor's `restart_counts` and `restart_groups`
/// kernels apply the same rules.)
pub fn restart_groups_into(
    contents: &[u8],
    groups: &mut Vec<(usize, usize)>,
) -> std::result::Result<(), (usize, &'static str)> {
    groups.clear();
    let size = contents.len();
    if size < 4 {
        return Err((0, "block too short for its restart count"));
    }
    let num_restarts = decode_fixed32(&contents[size - 4..]).unwrap_or(u32::MAX) as usize;
    if num_restarts == 0 || num_restarts > (size - 4) / 4 {
        return Err((size - 4, "bad restart count"));
    }
    let restarts_offset = size - (1 + num_restarts) * 4;
    let restart = |i: usize| {
        decode_fixed32(&contents[restarts_offset + 4 * i..]).unwrap_or(u32::MAX) as usize
    };
    groups.reserve(num_restarts);
    let mut previous_end = 0;
    for group in 0..num_restarts {
        let start = restart(group);
        let limit = if group + 1 < num_restarts {
            restart(group + 1)
        } else {
            restarts_offset
        };
        if start != previous_end || limit < start || limit > restarts_offset {
            return Err((restarts_offset + 4 * group, "restart points out of order"));
        }
        groups.push((start, limit));
        previous_end = limit;
    }
    Ok(())
}

/// Parses the entries of one restart group, `contents[start..limit]`,
/// appending full keys to `keys`. The first entry must share nothing. On a
/// malformed entry returns its offset.
pub fn parse_restart_group(
    contents: &[u8],
    start: usize,
    limit: usize,
    keys: &mut Vec<u8>,
    entries: &mut Vec<EntryRef>,
) -> std::result::Result<(), usize> {
    let mut offset = start;
    let mut previous_key: Option<(usize, usize)> = None;
    while offset < limit {
        let region = &contents[offset..limit];
        let (shared, a) = decode_varint32(region).ok_or(offset)?;
        let (non_shared, b) = decode_varint32(&region[a..]).ok_or(offset)?;
        let (value_len, c) = decode_varint32(&region[a + b..]).ok_or(offset)?;
        let (shared, non_shared, value_len) =
            (shared as usize, non_shared as usize, value_len as usize);
        let body = offset + a + b + c;
        let end = body
            .checked_add(non_shared)
            .and_then(|e| e.checked_add(value_len))
            .filter(|&e| e <= limit)
            .ok_or(offset)?;
        let key_offset = keys.len();
        match previous_key {
            None if shared != 0 => return Err(offset),
            Some((prev_offset, prev_len)) => {
                if shared > prev_len {
                    return Err(offset);
                }
                keys.extend_from_within(prev_offset..prev_offset + shared);
            }
            None => {}
        }
        keys.extend_from_slice(&contents[body..body + non_shared]);
        let key_len = shared + non_shared;
        entries.push(EntryRef {
            key_offset: key_offset as u32,
            key_len: key_len as u32,
            value_offset: (body + non_shared) as u32,
            value_len: value_len as u32,
        });
        previous_key = Some((key_offset, key_len));
        offset = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_format::block_builder::BlockBuilder;
    use shale_format::format::{block_trailer, CompressionType};

    #[test]
    fn parses_what_the_builder_wrote() {
        let mut builder = BlockBuilder::new(3);
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..50u32)
            .map(|i| {
                (
                    format!("key{i:04}").into_bytes(),
                    vec![i as u8; i as usize % 7],
                )
            })
            .collect();
        for (k, v) in &entries {
            builder.add(k, v);
        }
        let contents = builder.finish().to_vec();
        let mut raw = contents.clone();
        raw.extend_from_slice(&block_trailer(&contents, CompressionType::None));
        let block = unpack_block(&raw, "t", BlockHandle::new(0, contents.len() as u64)).unwrap();
        assert_eq!(block.entries.len(), 50);
        for (i, (k, v)) in entries.iter().enumerate() {
            assert_eq!(block.key(i), k.as_slice());
            assert_eq!(block.value(i), v.as_slice());
        }
        raw[5] ^= 1;
        assert!(unpack_block(&raw, "t", BlockHandle::new(0, contents.len() as u64)).is_err());
    }
}
