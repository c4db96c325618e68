//! Appends logical records to a log in LevelDB's format (`db/log_writer.cc`):
//! each record is cut into fragments that never cross a 32 KiB block
//! boundary. See `docs/format/log.md` and [`crate::log_format`].

use std::io::{self, Write};

use crate::crc;
use crate::error::{Error, Result};
use crate::log_format::{RecordType, BLOCK_SIZE, HEADER_SIZE};

/// Zeros that fill the end of a block too short for a header.
const TRAILER_ZEROS: [u8; HEADER_SIZE - 1] = [0; HEADER_SIZE - 1];

/// Where a [`LogWriter`] puts its bytes.
///
/// Every [`Write`] is a sink that writes a fragment's header, then its
/// payload, and flushes after each record, as LevelDB's writer calls
/// `WritableFile::Flush`. A sink over preallocated, zero-filled space (the
/// engine's memory-mapped WAL) copies the payload first and the header
/// last, so that a copy cut short by a crash leaves a zero header, which
/// readers take for preallocated space rather than damage
/// (`docs/format/log.md`, "Zero fragment").
pub trait LogSink {
    /// Makes room for `bytes` more bytes (an upper bound of what the next
    /// record takes), failing before anything of it is written: a full disk
    /// fails the record whole, never half of it.
    fn reserve(&mut self, _bytes: usize) -> io::Result<()> {
        Ok(())
    }
    /// Appends one fragment: its header, then its payload.
    fn append_fragment(&mut self, header: &[u8; HEADER_SIZE], payload: &[u8]) -> io::Result<()>;
    /// Appends `len` zero bytes (the trailer of a block too short for a
    /// header).
    fn append_zeros(&mut self, len: usize) -> io::Result<()>;
    /// Called after each record: buffered bytes go to the file (not an
    /// `fsync`).
    fn end_record(&mut self) -> io::Result<()>;
}

impl<W: Write + ?Sized> LogSink for W {
    fn append_fragment(&mut self, header: &[u8; HEADER_SIZE], payload: &[u8]) -> io::Result<()> {
        self.write_all(header)?;
        self.write_all(payload)
    }

    fn append_zeros(&mut self, len: usize) -> io::Result<()> {
        self.write_all(&TRAILER_ZEROS[..len])
    }

    fn end_record(&mut self) -> io::Result<()> {
        self.flush()
    }
}

/// Writes log records to a [`LogSink`] (any [`Write`]).
///
/// Making the data durable (`fsync`) is the caller's decision.
///
/// After an error from `dest` the log may end in a partial fragment; readers
/// treat that as a torn write, but nothing more should be appended to it.
#[derive(Debug)]
pub struct LogWriter<W: LogSink> {
    dest: W,
    /// Length of the log, counting bytes that were in it before this writer.
    file_len: u64,
}

impl<W: LogSink> LogWriter<W> {
    /// A writer for a new, empty log.
    pub fn new(dest: W) -> LogWriter<W> {
        LogWriter::with_offset(dest, 0)
    }

    /// A writer that appends to a log already holding `existing_len` bytes
    /// (`dest` must be positioned at its end), so fragments keep to the
    /// block boundaries of the whole file.
    pub fn with_offset(dest: W, existing_len: u64) -> LogWriter<W> {
        LogWriter {
            dest,
            file_len: existing_len,
        }
    }

    /// Appends one logical record (any length, including zero) and flushes
    /// `dest`.
    pub fn add_record(&mut self, record: &[u8]) -> Result<()> {
        self.dest
            .reserve(physical_len_bound(record.len()))
            .map_err(|err| Error::io("reserving log space", err))?;
        let mut left = record;
        for fragment in Fragments::new(self.file_len, record.len()) {
            if fragment.trailer > 0 {
                // Too short for a header: fill with zeros, switch blocks.
                self.dest
                    .append_zeros(fragment.trailer)
                    .map_err(|err| Error::io("appending to log", err))?;
                self.file_len += fragment.trailer as u64;
            }
            let (payload, rest) = left.split_at(fragment.len);
            self.emit_physical_record(fragment.record_type, payload)?;
            left = rest;
        }
        self.dest
            .end_record()
            .map_err(|err| Error::io("flushing log", err))
    }

    /// Takes note that `len - file_len()` bytes were written to the log
    /// without this writer, by [`write_record_at`] (the engine's writers
    /// each copy their own record into the mapped WAL): the next record
    /// starts at `len`. REQUIRES: `len >= file_len()`, and the bytes up to
    /// `len` are whole records.
    pub fn skip_to(&mut self, len: u64) {
        debug_assert!(len >= self.file_len);
        self.file_len = len;
    }

    /// Sends buffered bytes to the file (not an `fsync`).
    pub fn flush(&mut self) -> Result<()> {
        self.dest
            .end_record()
            .map_err(|err| Error::io("flushing log", err))
    }

    /// Length of the log so far, including the bytes that were there before
    /// this writer was made.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The destination.
    pub fn get_ref(&self) -> &W {
        &self.dest
    }

    /// The destination, mutably: for syncing a file. Writing to it directly
    /// breaks the block layout.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.dest
    }

    /// Consumes the writer, returning the destination.
    pub fn into_inner(self) -> W {
        self.dest
    }

    /// REQUIRES: the fragment fits in the current block after its header.
    fn emit_physical_record(&mut self, record_type: RecordType, fragment: &[u8]) -> Result<()> {
        let header = fragment_header(record_type, fragment);
        self.dest
            .append_fragment(&header, fragment)
            .map_err(|err| Error::io("appending to log", err))?;
        self.file_len += (HEADER_SIZE + fragment.len()) as u64;
        Ok(())
    }
}

/// One fragment of a record: the zeros that end the block before it, if
/// any, its type and its payload's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fragment {
    trailer: usize,
    record_type: RecordType,
    len: usize,
}

/// The fragments of a record of `len` bytes that starts at log offset
/// `start`: LevelDB's framing depends on nothing else, which is what lets
/// each writer frame its own record at the place it reserved.
struct Fragments {
    /// Offset of the next byte within the current block.
    block_offset: usize,
    left: usize,
    begin: bool,
    done: bool,
}

impl Fragments {
    fn new(start: u64, len: usize) -> Fragments {
        Fragments {
            block_offset: (start % BLOCK_SIZE as u64) as usize,
            left: len,
            begin: true,
            done: false,
        }
    }
}

impl Iterator for Fragments {
    type Item = Fragment;

    fn next(&mut self) -> Option<Fragment> {
        // An empty record still gets one (empty) fragment.
        if self.done {
            return None;
        }
        let mut trailer = 0;
        if BLOCK_SIZE - self.block_offset < HEADER_SIZE {
            trailer = BLOCK_SIZE - self.block_offset;
            self.block_offset = 0;
        }
        let available = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
        let len = self.left.min(available);
        self.left -= len;
        let end = self.left == 0;
        let record_type = match (self.begin, end) {
            (true, true) => RecordType::Full,
            (true, false) => RecordType::First,
            (false, true) => RecordType::Last,
            (false, false) => RecordType::Middle,
        };
        self.begin = false;
        self.done = end;
        self.block_offset += HEADER_SIZE + len;
        Some(Fragment {
            trailer,
            record_type,
            len,
        })
    }
}

/// Where a record of `len` bytes that starts at log offset `start` ends:
/// what [`LogWriter::add_record`] would append, trailers included.
pub fn record_end(start: u64, len: usize) -> u64 {
    Fragments::new(start, len).fold(start, |end, fragment| {
        end + (fragment.trailer + HEADER_SIZE + fragment.len) as u64
    })
}

/// Writes `record` as [`LogWriter::add_record`] would if the log were
/// `start` bytes long, into `dst`, which covers the log from `start` to
/// [`record_end`]. Where `dst` was zeros (preallocated log space), a copy
/// a crash cuts short leaves the record's first header zero: each
/// fragment's payload is written before its header, and the first
/// fragment's header after everything else. Readers skip a zero header
/// and the rest of its block, and the record's later fragments with it
/// (`docs/format/log.md`), so an unfinished record is never read, whatever
/// other writers copied after it.
pub fn write_record_at(dst: &mut [u8], start: u64, record: &[u8]) {
    debug_assert_eq!(dst.len() as u64, record_end(start, record.len()) - start);
    let mut at = 0;
    let mut left = record;
    let mut first_header = None;
    for fragment in Fragments::new(start, record.len()) {
        dst[at..at + fragment.trailer].fill(0);
        at += fragment.trailer;
        let (payload, rest) = left.split_at(fragment.len);
        let header = fragment_header(fragment.record_type, payload);
        dst[at + HEADER_SIZE..at + HEADER_SIZE + payload.len()].copy_from_slice(payload);
        // Headers after payloads, in program order (see above); the CPU
        // stores in program order up to the instruction a signal stops.
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::Release);
        match first_header {
            None => first_header = Some((at, header)),
            Some(_) => dst[at..at + HEADER_SIZE].copy_from_slice(&header),
        }
        at += HEADER_SIZE + payload.len();
        left = rest;
    }
    if let Some((at, header)) = first_header {
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::Release);
        dst[at..at + HEADER_SIZE].copy_from_slice(&header);
    }
}

/// CRC-32C of a record type's byte, which every fragment's checksum starts
/// with (LevelDB's `type_crc_`), computed once: one call to the CRC code
/// per fragment instead of two, in a small `Put` where the record is a few
/// dozen bytes.
fn type_crc(record_type: RecordType) -> u32 {
    static TYPE_CRC: std::sync::OnceLock<[u32; RecordType::Last as usize + 1]> =
        std::sync::OnceLock::new();
    TYPE_CRC.get_or_init(|| std::array::from_fn(|type_byte| crc::value(&[type_byte as u8])))
        [record_type as usize]
}

/// A fragment's header: masked checksum of its type and payload, its
/// length, its type.
fn fragment_header(record_type: RecordType, payload: &[u8]) -> [u8; HEADER_SIZE] {
    // Fragments are below BLOCK_SIZE, so the length fits in 16 bits.
    let length = payload.len() as u16;
    let checksum = crc::mask(crc::extend(type_crc(record_type), payload));
    let mut header = [0u8; HEADER_SIZE];
    header[..4].copy_from_slice(&checksum.to_le_bytes());
    header[4..6].copy_from_slice(&length.to_le_bytes());
    header[6] = record_type as u8;
    header
}

/// At least the bytes a record of `len` bytes takes in the log, wherever it
/// starts: a header per started block, and a trailer of fewer than
/// [`HEADER_SIZE`] zeros before the first.
pub fn physical_len_bound(len: usize) -> usize {
    let fragments = len / (BLOCK_SIZE - HEADER_SIZE) + 2;
    len.saturating_add(fragments * HEADER_SIZE + HEADER_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_record_is_one_full_header() {
        let mut writer = LogWriter::new(Vec::new());
        writer.add_record(b"").expect("write");
        let bytes = writer.into_inner();
        assert_eq!(bytes.len(), HEADER_SIZE);
        assert_eq!(&bytes[4..], &[0, 0, RecordType::Full as u8]);
        let expected = crc::mask(crc::value(&[RecordType::Full as u8]));
        assert_eq!(&bytes[..4], &expected.to_le_bytes());
    }

    #[test]
    fn header_layout_is_crc_length_type() {
        let mut writer = LogWriter::new(Vec::new());
        writer.add_record(b"foo").expect("write");
        let bytes = writer.into_inner();
        let crc = crc::mask(crc::value(&[1, b'f', b'o', b'o']));
        let mut expected = crc.to_le_bytes().to_vec();
        expected.extend_from_slice(&[3, 0, 1, b'f', b'o', b'o']);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn record_filling_a_block_leaves_no_trailer() {
        let mut writer = LogWriter::new(Vec::new());
        writer
            .add_record(&vec![b'x'; BLOCK_SIZE - HEADER_SIZE])
            .expect("write");
        writer.add_record(b"y").expect("write");
        let bytes = writer.into_inner();
        assert_eq!(bytes.len(), BLOCK_SIZE + HEADER_SIZE + 1);
        assert_eq!(bytes[BLOCK_SIZE + 6], RecordType::Full as u8);
    }

    #[test]
    fn short_trailer_is_zero_filled() {
        let mut writer = LogWriter::new(Vec::new());
        // Leaves 6 bytes in the first block: one less than a header.
        writer
            .add_record(&vec![b'x'; BLOCK_SIZE - 2 * HEADER_SIZE + 1])
            .expect("write");
        writer.add_record(b"").expect("write");
        assert_eq!(writer.file_len(), (BLOCK_SIZE + HEADER_SIZE) as u64);
        let bytes = writer.into_inner();
        assert_eq!(&bytes[BLOCK_SIZE - 6..BLOCK_SIZE], &[0; 6]);
        assert_eq!(bytes.len(), BLOCK_SIZE + HEADER_SIZE);
    }

    #[test]
    fn with_offset_continues_block_layout() {
        let mut whole = LogWriter::new(Vec::new());
        whole.add_record(&vec![1; 40_000]).expect("write");
        let prefix_len = whole.file_len();
        whole.add_record(&vec![2; 50_000]).expect("write");
        let whole = whole.into_inner();

        let mut reopened = LogWriter::with_offset(Vec::new(), prefix_len);
        reopened.add_record(&vec![2; 50_000]).expect("write");
        assert_eq!(reopened.file_len(), whole.len() as u64);
        let suffix = reopened.into_inner();
        assert_eq!(&whole[prefix_len as usize..], &suffix[..]);
    }

    #[test]
    fn a_record_written_in_place_equals_the_writers() {
        // Starts all over a block, near its end (trailers), lengths from
        // empty to several blocks.
        let starts = [
            0,
            1,
            100,
            BLOCK_SIZE - HEADER_SIZE - 1,
            BLOCK_SIZE - HEADER_SIZE,
            BLOCK_SIZE - 3,
            BLOCK_SIZE - 1,
        ];
        let lens = [
            0,
            1,
            7,
            1000,
            BLOCK_SIZE - HEADER_SIZE,
            BLOCK_SIZE,
            3 * BLOCK_SIZE + 5,
        ];
        for block in [0u64, 5] {
            for &start in &starts {
                let start = block * BLOCK_SIZE as u64 + start as u64;
                for &len in &lens {
                    let record: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
                    let mut writer = LogWriter::with_offset(Vec::new(), start);
                    writer.add_record(&record).expect("write");
                    let expected = writer.into_inner();
                    let end = record_end(start, len);
                    assert_eq!(
                        end - start,
                        expected.len() as u64,
                        "start {start}, len {len}"
                    );
                    let mut dst = vec![0xAA; expected.len()];
                    write_record_at(&mut dst, start, &record);
                    assert_eq!(dst, expected, "start {start}, len {len}");
                }
            }
        }
    }
}
