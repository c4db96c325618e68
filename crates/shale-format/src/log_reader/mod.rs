//! Reads logical records back from a log in LevelDB's format
//! (`db/log_reader.cc`), reassembling fragments and skipping damage the way
//! LevelDB does, so that recovery drops exactly the records LevelDB would.
//! See `docs/format/log.md` and [`crate::log_format`].
//!
//! Damage is not an error: the reader tells a [`Reporter`] how many bytes it
//! dropped and why, then carries on at the next block. The end of the file is
//! not damage either: a header or payload cut short by the end of the file is
//! a write the writer did not finish, and reads as the end of the log.

use std::io::{self, Read};

use crate::coding::decode_fixed32;
use crate::crc;
use crate::error::{Error, Result};
use crate::log_format::{RecordType, BLOCK_SIZE, HEADER_SIZE};

/// Told about every run of bytes the reader drops.
///
/// Implemented for closures `FnMut(u64, Error)`.
pub trait Reporter {
    /// `bytes` bytes were dropped because of `reason`, an
    /// [`Error::Corruption`] whose offset is where LevelDB estimates the
    /// dropped bytes start (for fragmented records it counts payload only,
    /// so it can be a little early) and whose reason is LevelDB's message:
    /// "checksum mismatch", "bad record length", "unknown record type N",
    /// "partial record without end(N)", "missing start of fragmented
    /// record(N)" or "error in middle of record".
    fn corruption(&mut self, bytes: u64, reason: Error);
}

impl<F: FnMut(u64, Error)> Reporter for F {
    fn corruption(&mut self, bytes: u64, reason: Error) {
        self(bytes, reason);
    }
}

/// A [`Reporter`] that ignores drops, like LevelDB's null reporter.
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreCorruption;

impl Reporter for IgnoreCorruption {
    fn corruption(&mut self, _bytes: u64, _reason: Error) {}
}

/// What [`LogReader::read_physical_record`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Physical {
    /// A fragment whose checksum (if checked) matched: its type byte, which
    /// may be unknown, and where its payload lies in the block buffer.
    Fragment {
        type_byte: u8,
        start: usize,
        len: usize,
    },
    /// Bytes that cannot form a fragment were skipped.
    Bad,
    /// A zero header with data after it in the file: the rest of its block
    /// was skipped, unreported (preallocated space, or a record a writer
    /// had claimed and not yet copied when a crash came).
    Zero,
    /// The end of the log.
    Eof,
}

/// Reads logical records from a log.
#[derive(Debug)]
pub struct LogReader<R: Read, P: Reporter> {
    src: R,
    reporter: P,
    verify_checksums: bool,
    /// One block, as read from `src`. Never grows.
    block: Box<[u8]>,
    /// The unparsed part of the block is `block[buffer_start..buffer_end]`.
    buffer_start: usize,
    buffer_end: usize,
    /// True once a read came back short (or failed): no more reads.
    eof: bool,
    /// Offset of the first fragment of the last record returned.
    last_record_offset: u64,
    /// File offset just past the bytes in `block`.
    end_of_buffer_offset: u64,
    /// Records that start before this offset are skipped.
    initial_offset: u64,
    /// True while skipping the middle and last fragments of a record that
    /// started before `initial_offset`.
    resyncing: bool,
    skipped_to_initial_block: bool,
}

impl<R: Read, P: Reporter> LogReader<R, P> {
    /// A reader of `src`, positioned at the start of the log. Corruption goes
    /// to `reporter`. With `verify_checksums`, fragments whose checksum does
    /// not match are dropped. The first record returned is the first one
    /// that starts at or after `initial_offset`.
    pub fn new(
        src: R,
        reporter: P,
        verify_checksums: bool,
        initial_offset: u64,
    ) -> LogReader<R, P> {
        LogReader {
            src,
            reporter,
            verify_checksums,
            block: vec![0; BLOCK_SIZE].into_boxed_slice(),
            buffer_start: 0,
            buffer_end: 0,
            eof: false,
            last_record_offset: 0,
            end_of_buffer_offset: 0,
            initial_offset,
            resyncing: initial_offset > 0,
            skipped_to_initial_block: false,
        }
    }

    /// The next record, or `None` at the end of the log. Damaged records are
    /// reported and skipped; only an I/O error from `src` is returned, after
    /// which the reader is at its end.
    pub fn read_record(&mut self) -> Result<Option<Vec<u8>>> {
        let mut record = Vec::new();
        Ok(self.read_record_into(&mut record)?.then_some(record))
    }

    /// Like [`LogReader::read_record`], but into `record` (cleared first) so
    /// that a loop can reuse one buffer; returns false at the end of the log.
    pub fn read_record_into(&mut self, record: &mut Vec<u8>) -> Result<bool> {
        record.clear();
        if !self.skipped_to_initial_block {
            self.skip_to_initial_block()?;
        }

        // `record` doubles as the buffer for the fragments read so far.
        let mut in_fragmented_record = false;
        let mut prospective_record_offset = 0;
        loop {
            let physical = match self.read_physical_record() {
                Ok(physical) => physical,
                Err(err) => {
                    record.clear();
                    return Err(err);
                }
            };
            let fragment_len = match physical {
                Physical::Fragment { len, .. } => len,
                Physical::Bad | Physical::Zero | Physical::Eof => 0,
            };
            // Where this fragment's header started. Only meaningful for a
            // fragment; LevelDB's unsigned arithmetic wraps otherwise.
            let physical_record_offset = self
                .end_of_buffer_offset
                .wrapping_sub(self.buffer_len() as u64)
                .wrapping_sub(HEADER_SIZE as u64)
                .wrapping_sub(fragment_len as u64);
            let record_type = match physical {
                Physical::Fragment { type_byte, .. } => RecordType::from_u8(type_byte),
                Physical::Bad | Physical::Zero | Physical::Eof => None,
            };

            if self.resyncing {
                match record_type {
                    Some(RecordType::Middle) => continue,
                    Some(RecordType::Last) => {
                        self.resyncing = false;
                        continue;
                    }
                    _ => self.resyncing = false,
                }
            }

            let (type_byte, fragment) = match physical {
                Physical::Eof => {
                    // A record cut off by the end of the file is a write the
                    // writer never finished, not damage: drop it silently.
                    record.clear();
                    return Ok(false);
                }
                Physical::Zero if !in_fragmented_record => {
                    // A record whose first fragment lay in the skipped
                    // space, never finished (writers copy a record's first
                    // header last), may go on in the next block: skip its
                    // other fragments too, as after an initial offset.
                    self.resyncing = true;
                    continue;
                }
                Physical::Bad | Physical::Zero => {
                    if in_fragmented_record {
                        self.report_corruption(record.len() as u64, "error in middle of record");
                        in_fragmented_record = false;
                        record.clear();
                    }
                    continue;
                }
                Physical::Fragment {
                    type_byte,
                    start,
                    len,
                } => (type_byte, &self.block[start..start + len]),
            };

            match record_type {
                Some(RecordType::Full) => {
                    // Old writers could leave an empty First fragment at the
                    // end of a block before a Full one: not worth reporting.
                    let dropped = record.len() as u64;
                    record.clear();
                    record.extend_from_slice(fragment);
                    if in_fragmented_record && dropped > 0 {
                        self.report_corruption(dropped, "partial record without end(1)");
                    }
                    self.last_record_offset = physical_record_offset;
                    return Ok(true);
                }
                Some(RecordType::First) => {
                    let dropped = record.len() as u64;
                    record.clear();
                    record.extend_from_slice(fragment);
                    if in_fragmented_record && dropped > 0 {
                        self.report_corruption(dropped, "partial record without end(2)");
                    }
                    prospective_record_offset = physical_record_offset;
                    in_fragmented_record = true;
                }
                Some(RecordType::Middle) => {
                    if in_fragmented_record {
                        record.extend_from_slice(fragment);
                    } else {
                        let dropped = fragment.len() as u64;
                        self.report_corruption(dropped, "missing start of fragmented record(1)");
                    }
                }
                Some(RecordType::Last) => {
                    if in_fragmented_record {
                        record.extend_from_slice(fragment);
                        self.last_record_offset = prospective_record_offset;
                        return Ok(true);
                    }
                    let dropped = fragment.len() as u64;
                    self.report_corruption(dropped, "missing start of fragmented record(2)");
                }
                // Zero is only legal with an empty payload, which
                // read_physical_record already skipped.
                Some(RecordType::Zero) | None => {
                    let mut dropped = fragment.len() as u64;
                    if in_fragmented_record {
                        dropped += record.len() as u64;
                    }
                    self.report_corruption(dropped, &format!("unknown record type {type_byte}"));
                    in_fragmented_record = false;
                    record.clear();
                }
            }
        }
    }

    /// File offset of the first fragment of the record most recently
    /// returned (0 before any).
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }

    /// The reporter.
    pub fn reporter(&self) -> &P {
        &self.reporter
    }

    /// Consumes the reader, returning the source and the reporter.
    pub fn into_parts(self) -> (R, P) {
        (self.src, self.reporter)
    }

    fn buffer_len(&self) -> usize {
        self.buffer_end - self.buffer_start
    }

    fn clear_buffer(&mut self) {
        self.buffer_start = self.buffer_end;
    }

    /// Skips to the start of the first block that can hold a fragment
    /// starting at or after `initial_offset`.
    fn skip_to_initial_block(&mut self) -> Result<()> {
        self.skipped_to_initial_block = true;
        let block_size = BLOCK_SIZE as u64;
        let offset_in_block = self.initial_offset % block_size;
        let mut block_start = self.initial_offset - offset_in_block;
        // No fragment starts in the last 6 bytes of a block. In the last
        // block below 2^64 there is no next block: skip everything (LevelDB's
        // unsigned sum wraps to 0 instead, and then drops every fragment as
        // starting before the offset: the same empty log).
        if offset_in_block > block_size - 6 {
            block_start = block_start.saturating_add(block_size);
        }
        self.end_of_buffer_offset = block_start;
        if block_start > 0 {
            // A log shorter than the skip simply reads as empty afterwards.
            let skipped = io::copy(&mut (&mut self.src).take(block_start), &mut io::sink());
            if let Err(err) = skipped {
                self.eof = true;
                return Err(Error::io("skipping to the initial offset of a log", err));
            }
        }
        Ok(())
    }

    /// Reads the next fragment, refilling the block buffer as needed.
    fn read_physical_record(&mut self) -> Result<Physical> {
        loop {
            if self.buffer_len() < HEADER_SIZE {
                if self.eof {
                    // A non-empty buffer here is a header cut short by the
                    // end of the file: an unfinished write, not damage.
                    self.clear_buffer();
                    return Ok(Physical::Eof);
                }
                // The previous read filled a whole block, so what is left is
                // a trailer of zeros: skip it.
                self.clear_buffer();
                self.refill()?;
                continue;
            }

            let header_start = self.buffer_start;
            let header = &self.block[header_start..header_start + HEADER_SIZE];
            let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
            let type_byte = header[6];
            let stored_crc = decode_fixed32(header).unwrap_or_default();

            if HEADER_SIZE + length > self.buffer_len() {
                let dropped = self.buffer_len() as u64;
                // The payload runs past the end of the file: the writer died
                // while writing it, not damage, as LevelDB reads it. Unless
                // no writer could have written it: a fragment that would
                // cross a block boundary, or one whose bytes are all there
                // under a damaged length (LevelDB drops those silently too,
                // and with them every later record of the last block).
                let impossible = self.eof
                    && (header_start + HEADER_SIZE + length > BLOCK_SIZE
                        || (self.verify_checksums
                            && whole_record_under_damaged_length(
                                &self.block[header_start..self.buffer_end],
                            )));
                self.clear_buffer();
                if self.eof && !impossible {
                    return Ok(Physical::Eof);
                }
                self.report_corruption(dropped, "bad record length");
                return Ok(Physical::Bad);
            }

            if type_byte == RecordType::Zero as u8 && length == 0 {
                // Preallocated space: the rest of the block is skipped
                // unreported, as LevelDB does. When every block after it is
                // zeros too, this is the log's preallocated tail and the end
                // of the log: a fragmented record cut off here is a write
                // the writer never finished (it copies a header last), not
                // damage. LevelDB reaches the same end block by block, and
                // drops the same records, but reports such a record.
                self.clear_buffer();
                if self.only_zeros_remain()? {
                    return Ok(Physical::Eof);
                }
                return Ok(Physical::Zero);
            }

            if self.verify_checksums {
                // The checksum covers the type byte and the payload.
                let covered = &self.block[header_start + 6..header_start + HEADER_SIZE + length];
                if crc::value(covered) != crc::unmask(stored_crc) {
                    // The length itself may be what is damaged; trusting it
                    // could land in the middle of a payload that happens to
                    // look like a record. Drop the rest of the block.
                    let dropped = self.buffer_len() as u64;
                    self.clear_buffer();
                    self.report_corruption(dropped, "checksum mismatch");
                    return Ok(Physical::Bad);
                }
            }

            self.buffer_start += HEADER_SIZE + length;
            // Cannot wrap: the fragment's bytes were counted in
            // end_of_buffer_offset.
            let fragment_offset = self
                .end_of_buffer_offset
                .wrapping_sub(self.buffer_len() as u64)
                .wrapping_sub((HEADER_SIZE + length) as u64);
            if fragment_offset < self.initial_offset {
                // A fragment that starts before the initial offset.
                return Ok(Physical::Bad);
            }
            return Ok(Physical::Fragment {
                type_byte,
                start: header_start + HEADER_SIZE,
                len: length,
            });
        }
    }

    /// Reads the blocks after the current one while they hold nothing but
    /// zeros; true when that reaches the end of the file. Otherwise the
    /// first block with data is in the buffer, to be read next.
    /// REQUIRES: the buffer is empty.
    fn only_zeros_remain(&mut self) -> Result<bool> {
        loop {
            if self.eof {
                return Ok(true);
            }
            self.refill()?;
            if self.block[..self.buffer_end].iter().any(|&byte| byte != 0) {
                return Ok(false);
            }
            self.clear_buffer();
        }
    }

    /// Reads the next block into the (empty) buffer.
    fn refill(&mut self) -> Result<()> {
        let read = self.fill_block()?;
        self.end_of_buffer_offset += read as u64;
        self.buffer_start = 0;
        self.buffer_end = read;
        if read < BLOCK_SIZE {
            self.eof = true;
        }
        Ok(())
    }

    /// Reads up to one block into the buffer; short only at the end of the
    /// file. A failed read ends the log.
    fn fill_block(&mut self) -> Result<usize> {
        let mut read = 0;
        while read < BLOCK_SIZE {
            match self.src.read(&mut self.block[read..]) {
                Ok(0) => break,
                // `min` guards against a reader claiming more than it was given.
                Ok(n) => read += n.min(BLOCK_SIZE - read),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    self.eof = true;
                    self.clear_buffer();
                    return Err(Error::io(
                        format!("reading log block at offset {}", self.end_of_buffer_offset),
                        err,
                    ));
                }
            }
        }
        Ok(read)
    }

    fn report_corruption(&mut self, bytes: u64, reason: &str) {
        // Where the dropped bytes start, by LevelDB's reckoning. Drops that
        // begin before the initial offset are not reported; LevelDB's
        // unsigned arithmetic wraps here, and so does this test.
        let start = self
            .end_of_buffer_offset
            .wrapping_sub(self.buffer_len() as u64)
            .wrapping_sub(bytes);
        if start >= self.initial_offset {
            let offset = self
                .end_of_buffer_offset
                .saturating_sub(self.buffer_len() as u64)
                .saturating_sub(bytes);
            self.reporter
                .corruption(bytes, Error::corruption(offset, reason));
        }
    }
}

/// True when `tail` (a header, then the rest of the file) holds a whole
/// fragment of some length shorter than the header claims: its checksum
/// matches, and what follows it is either nothing or another fragment
/// whose checksum matches too (a second check, so a torn write is not
/// mistaken for one by a chance match). A flipped bit in the length field
/// looks like that; a write cut short by a crash does not.
fn whole_record_under_damaged_length(tail: &[u8]) -> bool {
    let Some((header, payload)) = tail.split_first_chunk::<HEADER_SIZE>() else {
        return false;
    };
    let stored = crc::unmask(decode_fixed32(header).unwrap_or_default());
    let mut running = crc::value(&header[6..]);
    for length in 0..=payload.len() {
        if length > 0 {
            running = crc::extend(running, &payload[length - 1..length]);
        }
        if running == stored && fragment_chain_fits(&payload[length..]) {
            return true;
        }
    }
    false
}

/// True when `rest` is empty or starts with a whole fragment whose
/// checksum matches.
fn fragment_chain_fits(rest: &[u8]) -> bool {
    let Some((header, payload)) = rest.split_first_chunk::<HEADER_SIZE>() else {
        return rest.is_empty();
    };
    let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
    let stored = crc::unmask(decode_fixed32(header).unwrap_or_default());
    payload.len() >= length && crc::extend(crc::value(&header[6..]), &payload[..length]) == stored
}

#[cfg(test)]
mod tests;
