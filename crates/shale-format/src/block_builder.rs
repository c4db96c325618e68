//! Builds one block: prefix-compressed entries, a restart point every
//! `restart_interval` entries, then the restart array and its length.
//! The layout is in `docs/format/table.md` ("Blocks").

use crate::coding::{put_fixed32, put_varint32};

/// Accumulates sorted entries into the bytes of one block.
///
/// REQUIRES: keys are added in increasing order of the table's comparator;
/// the table builder checks this before calling [`BlockBuilder::add`].
#[derive(Debug, Clone)]
pub struct BlockBuilder {
    restart_interval: usize,
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    entries_since_restart: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// An empty block that starts a new restart group every
    /// `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            restart_interval: restart_interval.max(1),
            buffer: Vec::new(),
            restarts: vec![0],
            entries_since_restart: 0,
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Like [`BlockBuilder::new`], with room for `bytes` of entries: a block
    /// built to a known size grows without reallocating.
    pub fn with_capacity(restart_interval: usize, bytes: usize) -> BlockBuilder {
        let mut builder = BlockBuilder::new(restart_interval);
        builder.buffer.reserve(bytes);
        builder
    }

    /// Forgets every entry, keeping the allocations.
    pub fn reset(&mut self) {
        self.buffer.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.entries_since_restart = 0;
        self.last_key.clear();
        self.finished = false;
    }

    /// True when no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The key of the last entry added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Size of the block if it were finished now: entries plus the restart
    /// array and its count. This is the number the table builder compares
    /// with `block_size`.
    #[inline]
    pub fn current_size_estimate(&self) -> usize {
        self.buffer.len() + self.restarts.len() * 4 + 4
    }

    /// Appends one entry.
    ///
    /// # Panics
    /// In debug builds, if called after [`BlockBuilder::finish`] without a reset.
    #[inline]
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished, "add after finish");
        let shared = if self.entries_since_restart < self.restart_interval {
            shared_prefix_len(&self.last_key, key)
        } else {
            self.restarts.push(self.buffer.len() as u32);
            self.entries_since_restart = 0;
            0
        };
        let non_shared = key.len() - shared;
        if (shared | non_shared | value.len()) < 0x80 {
            // Three one-byte varints: the common case for small entries.
            self.buffer.reserve(3 + non_shared + value.len());
            self.buffer
                .extend_from_slice(&[shared as u8, non_shared as u8, value.len() as u8]);
        } else {
            put_varint32(&mut self.buffer, shared as u32);
            put_varint32(&mut self.buffer, non_shared as u32);
            put_varint32(&mut self.buffer, value.len() as u32);
        }
        self.buffer.extend_from_slice(&key[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.entries_since_restart += 1;
    }

    /// Finishes the block and hands over its contents.
    pub fn into_contents(mut self) -> Vec<u8> {
        self.finish();
        self.buffer
    }

    /// Appends the restart array and returns the finished block contents.
    /// The builder stays finished until [`BlockBuilder::reset`].
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &restart in &self.restarts {
                put_fixed32(&mut self.buffer, restart);
            }
            put_fixed32(&mut self.buffer, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buffer
    }
}

/// Length of the longest common prefix of `a` and `b`.
#[inline]
pub fn shared_prefix_len(a: &[u8], b: &[u8]) -> usize {
    let limit = a.len().min(b.len());
    let (a, b) = (&a[..limit], &b[..limit]);
    // Eight bytes at a time: most neighbouring keys share long prefixes.
    let mut i = 0;
    while i + 8 <= limit {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or_default());
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let diff = x ^ y;
        if diff != 0 {
            return i + (diff.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < limit && a[i] == b[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_prefix_len_cases() {
        assert_eq!(shared_prefix_len(b"", b"abc"), 0);
        assert_eq!(shared_prefix_len(b"abc", b"abd"), 2);
        assert_eq!(
            shared_prefix_len(b"0123456789abcdef", b"0123456789abcdeg"),
            15
        );
        assert_eq!(shared_prefix_len(b"0123456789", b"0123456789xyz"), 10);
        assert_eq!(shared_prefix_len(b"01234567", b"01234567"), 8);
    }

    #[test]
    fn two_entry_block_bytes() {
        // The worked example in docs/format/table.md.
        let mut builder = BlockBuilder::new(16);
        builder.add(b"apple", b"1");
        builder.add(b"apricot", b"22");
        let expected: &[u8] = &[
            0, 5, 1, b'a', b'p', b'p', b'l', b'e', b'1', // entry 1
            2, 5, 2, b'r', b'i', b'c', b'o', b't', b'2', b'2', // entry 2
            0, 0, 0, 0, // restart[0] = 0
            1, 0, 0, 0, // one restart
        ];
        assert_eq!(builder.finish(), expected);
    }

    #[test]
    fn empty_block_has_one_restart() {
        let mut builder = BlockBuilder::new(16);
        assert_eq!(builder.current_size_estimate(), 8);
        assert_eq!(builder.finish(), &[0, 0, 0, 0, 1, 0, 0, 0]);
    }

    #[test]
    fn restart_every_interval() {
        let mut builder = BlockBuilder::new(2);
        for key in [b"a1", b"a2", b"a3", b"a4", b"a5"] {
            builder.add(key, b"");
        }
        let block = builder.finish().to_vec();
        let n = block.len();
        assert_eq!(&block[n - 4..], &3u32.to_le_bytes());
    }
}
