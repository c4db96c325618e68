//! What one file has been through since its last `fsync` or `fdatasync`:
//! the writes and size changes the application made, in order, which the
//! backing file has not seen yet ([`PendingFile`]).
//!
//! The backing file holds the file as of its last sync. What the
//! application reads is the backing file with the pending operations
//! replayed over it ([`PendingFile::overlay`]); a sync replays them onto
//! the backing file ([`PendingFile::apply_to`]); a simulated power loss
//! drops them, or replays a random part of them ([`PendingFile::torn`]).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::rng::SplitMix64;

/// Writes that follow each other are merged into one operation up to this
/// length, so that a file written sequentially does not keep thousands of
/// small operations between syncs.
const MERGE_LIMIT: usize = 1 << 20;

/// The unit a torn writeback keeps or drops: a page, the unit the page
/// cache writes back.
pub const TORN_UNIT: u64 = 4096;

/// One operation the backing file has not seen.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PendingOp {
    /// `data` written at `offset` (extending the file if it ends past it).
    Write { offset: u64, data: Vec<u8> },
    /// The file cut or extended (with zeros) to this length: `ftruncate`,
    /// or `fallocate` growing the file.
    SetLen(u64),
}

/// The operations a file has had since its last sync, and the length the
/// application sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFile {
    ops: Vec<PendingOp>,
    len: u64,
}

impl PendingFile {
    /// Nothing pending over a backing file of `durable_len` bytes.
    pub fn new(durable_len: u64) -> PendingFile {
        PendingFile {
            ops: Vec::new(),
            len: durable_len,
        }
    }

    /// The file's length as the application sees it.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the backing file already holds everything.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The operations not yet on the backing file, oldest first.
    pub fn ops(&self) -> &[PendingOp] {
        &self.ops
    }

    /// Bytes of data written and not yet on the backing file.
    pub fn bytes(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                PendingOp::Write { data, .. } => data.len() as u64,
                PendingOp::SetLen(_) => 0,
            })
            .sum()
    }

    /// Records `data` written at `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        self.len = self.len.max(end);
        if let Some(PendingOp::Write {
            offset: last_offset,
            data: last,
        }) = self.ops.last_mut()
        {
            // The page cache writes the same page back again and again
            // (the WAL's last page, written through a mapping): keep the
            // newest copy only.
            if *last_offset == offset && last.len() == data.len() {
                last.copy_from_slice(data);
                return;
            }
            if *last_offset + last.len() as u64 == offset && last.len() + data.len() <= MERGE_LIMIT
            {
                last.extend_from_slice(data);
                return;
            }
        }
        self.ops.push(PendingOp::Write {
            offset,
            data: data.to_vec(),
        });
    }

    /// Records the file cut or extended to `len`.
    pub fn set_len(&mut self, len: u64) {
        self.len = len;
        self.ops.push(PendingOp::SetLen(len));
    }

    /// Turns `buf`, which holds the backing file's bytes from `offset` on
    /// (zeros past its end), into what the application sees there, and
    /// returns how many of its bytes lie before the end of the file.
    pub fn overlay(&self, offset: u64, buf: &mut [u8]) -> usize {
        let buf_end = offset + buf.len() as u64;
        for op in &self.ops {
            match op {
                PendingOp::Write { offset: at, data } => {
                    let start = offset.max(*at);
                    let end = buf_end.min(*at + data.len() as u64);
                    if start < end {
                        buf[(start - offset) as usize..(end - offset) as usize]
                            .copy_from_slice(&data[(start - at) as usize..(end - at) as usize]);
                    }
                }
                // Cut: what lay past the new end reads as zeros if the file
                // grows again.
                PendingOp::SetLen(len) => {
                    if *len < buf_end {
                        let from = len.saturating_sub(offset) as usize;
                        buf[from..].fill(0);
                    }
                }
            }
        }
        self.len.saturating_sub(offset).min(buf.len() as u64) as usize
    }

    /// Replays every pending operation onto the backing file, in order,
    /// and forgets them: the file is synced.
    pub fn apply_to(&mut self, file: &File) -> io::Result<()> {
        apply_ops(&self.ops, file)?;
        self.ops.clear();
        Ok(())
    }

    /// How many pieces [`PendingFile::torn`] keeps or drops: the pages of
    /// each write and each size change.
    pub fn torn_pieces(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                PendingOp::Write { offset, data } => {
                    let end = offset + data.len() as u64;
                    end.div_ceil(TORN_UNIT) - offset / TORN_UNIT
                }
                PendingOp::SetLen(_) => 1,
            })
            .sum()
    }

    /// What a power loss in the middle of writeback leaves of these
    /// operations: each write cut into pages ([`TORN_UNIT`]) and each page
    /// and each size change kept or dropped at random, the kept ones
    /// replayed in order.
    pub fn torn(&self, rng: &mut SplitMix64) -> Vec<PendingOp> {
        let mut kept = Vec::new();
        for op in &self.ops {
            match op {
                PendingOp::Write { offset, data } => {
                    let end = offset + data.len() as u64;
                    let mut at = *offset;
                    while at < end {
                        let page_end = ((at / TORN_UNIT) + 1) * TORN_UNIT;
                        let piece_end = page_end.min(end);
                        if rng.chance_half() {
                            let from = (at - offset) as usize;
                            let to = (piece_end - offset) as usize;
                            kept.push(PendingOp::Write {
                                offset: at,
                                data: data[from..to].to_vec(),
                            });
                        }
                        at = piece_end;
                    }
                }
                PendingOp::SetLen(len) => {
                    if rng.chance_half() {
                        kept.push(PendingOp::SetLen(*len));
                    }
                }
            }
        }
        kept
    }
}

/// Replays `ops` onto `file`, in order.
pub fn apply_ops(ops: &[PendingOp], file: &File) -> io::Result<()> {
    for op in ops {
        match op {
            PendingOp::Write { offset, data } => file.write_all_at(data, *offset)?,
            PendingOp::SetLen(len) => file.set_len(*len)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

    use super::*;

    /// What the application reads of the whole file.
    fn seen(pending: &PendingFile, backing: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; backing.len().max(pending.len() as usize) + 16];
        buf[..backing.len()].copy_from_slice(backing);
        let n = pending.overlay(0, &mut buf);
        buf.truncate(n);
        buf
    }

    fn applied(pending: &mut PendingFile, backing: &[u8]) -> Vec<u8> {
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(backing, 0).unwrap();
        pending.apply_to(&file).unwrap();
        assert!(pending.is_empty());
        let mut out = vec![0u8; file.metadata().unwrap().len() as usize];
        file.read_exact_at(&mut out, 0).unwrap();
        out
    }

    #[test]
    fn reads_see_writes_and_the_backing_file_does_not_until_applied() {
        let backing = b"0123456789".to_vec();
        let mut pending = PendingFile::new(backing.len() as u64);
        pending.write(2, b"ab");
        pending.write(8, b"xyzw");
        assert_eq!(pending.len(), 12);
        assert_eq!(seen(&pending, &backing), b"01ab4567xyzw");
        assert_eq!(pending.bytes(), 6);
        assert_eq!(applied(&mut pending, &backing), b"01ab4567xyzw");
    }

    #[test]
    fn a_cut_then_growth_reads_zeros_where_the_cut_removed_bytes() {
        let backing = b"0123456789".to_vec();
        let mut pending = PendingFile::new(10);
        pending.set_len(4);
        pending.write(6, b"ab");
        assert_eq!(seen(&pending, &backing), b"0123\0\0ab");
        assert_eq!(applied(&mut pending, &backing), b"0123\0\0ab");
        // Growth by fallocate: zeros.
        let mut pending = PendingFile::new(10);
        pending.set_len(14);
        assert_eq!(seen(&pending, &backing), b"0123456789\0\0\0\0");
    }

    #[test]
    fn a_read_at_an_offset_sees_only_its_window() {
        let mut pending = PendingFile::new(0);
        pending.write(0, &[7u8; 10]);
        pending.set_len(6);
        let mut buf = [0u8; 8];
        assert_eq!(pending.overlay(4, &mut buf), 2);
        assert_eq!(&buf[..2], &[7, 7]);
        assert_eq!(pending.overlay(20, &mut buf), 0);
    }

    #[test]
    fn sequential_writes_merge_and_rewrites_of_a_page_replace_it() {
        let mut pending = PendingFile::new(0);
        pending.write(0, b"aa");
        pending.write(2, b"bb");
        pending.write(2, b"cc");
        assert_eq!(pending.ops().len(), 2);
        pending.write(2, b"dd");
        assert_eq!(pending.ops().len(), 2);
        assert_eq!(seen(&pending, b""), b"aadd");
    }

    #[test]
    fn a_torn_writeback_keeps_whole_pages_in_order_and_differs_by_seed() {
        let mut pending = PendingFile::new(0);
        let data: Vec<u8> = (0..5 * TORN_UNIT)
            .map(|i| (i / TORN_UNIT) as u8 + 1)
            .collect();
        pending.write(100, &data);
        pending.set_len(3 * TORN_UNIT);
        let mut shapes = std::collections::HashSet::new();
        for seed in 0..64 {
            let kept = pending.torn(&mut SplitMix64::new(seed));
            for op in &kept {
                if let PendingOp::Write { offset, data } = op {
                    // A piece never crosses a page.
                    assert_eq!(
                        offset / TORN_UNIT,
                        (offset + data.len() as u64 - 1) / TORN_UNIT
                    );
                }
            }
            shapes.insert(kept);
        }
        assert!(shapes.len() > 32, "{} different outcomes", shapes.len());
        // Every page kept and the cut kept: the same as the whole replay.
        let everything = {
            let file = tempfile::tempfile().unwrap();
            apply_ops(pending.ops(), &file).unwrap();
            file.metadata().unwrap().len()
        };
        assert_eq!(everything, 3 * TORN_UNIT);
    }
}
