//! Fuzzes `LogReader`: every record of a log, with checksums checked and not,
//! from an initial offset taken from the input, through a plain reader, a
//! reader returning short reads, and a reader failing part way.
//!
//! Input: a flags byte, an 8-byte initial offset, then either a raw log
//! (flags bit 0 set) or a recipe for a well-formed log (up to 3 byte flips, a
//! cut, records) written with `LogWriter` and then damaged. Record lengths in
//! the recipe are scaled so that small inputs make logs of many 32 KiB
//! blocks, with records spanning blocks and ending near block boundaries.
//!
//! Checked: no panic, hang or overrun; the short-read reader sees exactly
//! what the plain one sees (records and reports); and an undamaged log,
//! possibly cut short, yields exactly the records that start at or after the
//! initial offset and end before the cut, with no report when read from 0.
#![no_main]

mod common;

use std::io::{self, Read};

use common::{flip, read_flips, Input};
use libfuzzer_sys::fuzz_target;
use shale_format::log_format::{BLOCK_SIZE, HEADER_SIZE};
use shale_format::log_reader::LogReader;
use shale_format::log_writer::LogWriter;

/// Hands out at most `chunk` bytes per read, cycling through the sizes.
struct Choppy<'a> {
    data: &'a [u8],
    chunks: &'a [u8],
    turn: usize,
}

impl Read for Choppy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let chunk = match self.chunks {
            [] => 1,
            chunks => usize::from(chunks[self.turn % chunks.len()]) * 97 + 1,
        };
        self.turn += 1;
        if self.turn % 5 == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = chunk.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Fails every read once `left` bytes were handed out.
struct Failing<'a> {
    data: &'a [u8],
    left: usize,
}

impl Read for Failing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("injected read error"));
        }
        let n = buf.len().min(self.data.len()).min(self.left);
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.left -= n;
        Ok(n)
    }
}

/// Records, with the offset of each from `last_record_offset`, and reports.
#[derive(Debug, PartialEq)]
struct Outcome {
    records: Vec<(u64, Vec<u8>)>,
    reports: Vec<(u64, String)>,
    error: bool,
}

fn read_all(src: impl Read, verify: bool, initial_offset: u64, log_len: usize) -> Outcome {
    let mut reports = Vec::new();
    let mut records = Vec::new();
    let mut error = false;
    {
        let reporter =
            |bytes: u64, err: shale_format::Error| reports.push((bytes, err.to_string()));
        let mut reader = LogReader::new(src, reporter, verify, initial_offset);
        // Each record uses at least one header: more is a loop.
        let max_records = log_len / HEADER_SIZE + 1;
        loop {
            match reader.read_record() {
                Ok(Some(record)) => {
                    assert!(record.len() <= log_len, "record longer than the log");
                    records.push((reader.last_record_offset(), record));
                    assert!(records.len() <= max_records, "more records than headers");
                }
                Ok(None) => break,
                Err(_) => {
                    error = true;
                    // The reader is at its end after an I/O error.
                    assert!(matches!(reader.read_record(), Ok(None)));
                    break;
                }
            }
        }
        assert!(
            matches!(reader.read_record(), Ok(None)),
            "reader restarted after its end"
        );
    }
    // Dropped bytes never exceed the log.
    let dropped: u64 = reports.iter().map(|(bytes, _)| bytes).sum();
    assert!(
        dropped <= log_len as u64,
        "dropped {dropped} bytes of a {log_len}-byte log"
    );
    Outcome {
        records,
        reports,
        error,
    }
}

/// A record length from one byte: short, medium, block-sized, or just under
/// a block boundary.
fn record_len(code: u8) -> usize {
    let n = usize::from(code & 0x3f);
    match code >> 6 {
        0 => n,
        1 => n * 64,
        2 => n * 1024,
        _ => BLOCK_SIZE - HEADER_SIZE - n,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let raw = flags & 1 != 0;
    let offset_bytes = input.u64();

    // Written records as (start offset, end offset, payload).
    let (log, written) = if raw {
        (input.rest().to_vec(), None)
    } else {
        let flips = read_flips(&mut input, 3);
        let cut = input.u32();
        let mut writer = LogWriter::new(Vec::new());
        let mut written = Vec::new();
        while !input.is_empty() && writer.file_len() < 1 << 18 {
            let len = record_len(input.u8());
            let seed = input.u8();
            let record: Vec<u8> = (0..len)
                .map(|i| seed.wrapping_add((i / 13) as u8))
                .collect();
            // A record starts in the next block when this one has no room
            // for a header.
            let mut start = writer.file_len();
            let left = BLOCK_SIZE as u64 - start % BLOCK_SIZE as u64;
            if left < HEADER_SIZE as u64 {
                start += left;
            }
            writer.add_record(&record).expect("write to a Vec");
            written.push((start, writer.file_len(), record));
        }
        let mut log = writer.into_inner();
        let damaged = flip(&mut log, &flips);
        if flags & 2 != 0 && !log.is_empty() {
            log.truncate(cut as usize % log.len());
        }
        (log, (!damaged).then_some(written))
    };

    let len = log.len() as u64;
    // Mostly an offset within (or just past) the log; sometimes any u64.
    let initial_offset = if flags & 4 != 0 {
        offset_bytes
    } else {
        offset_bytes % (len + 2 * BLOCK_SIZE as u64 + 1)
    };
    let chunks = &data[..data.len().min(16)];

    for verify in [true, false] {
        let plain = read_all(&log[..], verify, initial_offset, log.len());
        assert!(!plain.error);
        let choppy = Choppy {
            data: &log,
            chunks,
            turn: 0,
        };
        assert_eq!(
            read_all(choppy, verify, initial_offset, log.len()),
            plain,
            "short reads changed what was read"
        );
        let failing = Failing {
            data: &log,
            left: (offset_bytes >> 32) as usize % (log.len() + 1),
        };
        let failed = read_all(failing, verify, initial_offset, log.len());
        // Records read before the error are the ones the plain reader read.
        assert!(plain.records.starts_with(&failed.records));

        if let Some(written) = &written {
            let expected: Vec<(u64, Vec<u8>)> = written
                .iter()
                .filter(|(start, end, _)| *start >= initial_offset && *end <= len)
                .map(|(start, _, record)| (*start, record.clone()))
                .collect();
            // From offset 0 nothing is damage. From a later offset, the
            // fragments of a record that started before it are reported as
            // "missing start", as LevelDB reports them.
            if initial_offset == 0 {
                assert_eq!(plain.reports, Vec::new(), "clean log: corruption reported");
            }
            assert!(
                plain.records == expected,
                "clean log: read {:?}, expected {:?}",
                plain
                    .records
                    .iter()
                    .map(|(at, r)| (at, r.len()))
                    .collect::<Vec<_>>(),
                expected
                    .iter()
                    .map(|(at, r)| (at, r.len()))
                    .collect::<Vec<_>>()
            );
        }
    }
});
