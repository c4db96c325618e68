//! The file a write-ahead log is appended to ([`LogFile`]): memory-mapped,
//! preallocated and written with zeros a stretch ahead of the records on a
//! real file system ([`MappedLog`]), or any
//! [`WritableFile`] (in memory, under fault injection, or where the file
//! system cannot preallocate).
//!
//! Why a mapping: a small write then costs a copy into the page cache and
//! no system call, where `write(2)` per record was the largest single cost
//! of a small `Put` (`docs/results/engine-speed.md`, "Engine speed after
//! the read- and write-path work"; the mapping's effect:
//! `docs/results/write-path.md`, "The write path: a memory-mapped WAL, a
//! group commit without maps, a leaner skip list"). What an acknowledged
//! write survives does not change: it is in the page cache either way, so
//! it outlives the process being killed, and only a sync makes it outlive
//! the machine.
//!
//! The layout of the file: the records LevelDB's log writer would write,
//! followed while it is being written by zeros up to the space reserved
//! ahead with `fallocate`. LevelDB 1.23's log reader skips a zero header and
//! the rest of its block without a report (its reader was written for the
//! mmap-based writer LevelDB once had), so the file stays readable by
//! LevelDB; ours also takes an all-zero rest of file for the end of the log
//! (`docs/format/log.md`). The tail is trimmed when the log is closed:
//! once the memtable it logged is a table, and when the database closes.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::atomic::{compiler_fence, Ordering};

use memmap2::{MmapMut, MmapOptions};
use shale_format::log_format::{BLOCK_SIZE, HEADER_SIZE};
use shale_format::log_writer::LogSink;

use super::WritableFile;

/// The most a log reserves (and maps) at a time.
pub const MAX_RESERVE_BYTES: u64 = 256 << 20;
/// The least: two blocks.
const MIN_RESERVE_BYTES: u64 = 2 * BLOCK_SIZE as u64;
/// Bytes of reserved space written with zeros at a time ahead of the
/// records (`MappedLog::prepare`): a multiple of the log's block size.
const PREPARE_BYTES: u64 = 1 << 20;
/// The zeros `prepare` writes.
static ZEROS: [u8; PREPARE_BYTES as usize] = [0; PREPARE_BYTES as usize];

/// A write-ahead log's file.
pub enum LogFile {
    /// Memory-mapped and preallocated.
    Mapped(MappedLog),
    /// Written through a [`WritableFile`], flushed after each record.
    Buffered(Box<dyn WritableFile>),
}

impl std::fmt::Debug for LogFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogFile::Mapped(log) => f.debug_tuple("Mapped").field(log).finish(),
            LogFile::Buffered(_) => f.write_str("Buffered"),
        }
    }
}

impl LogFile {
    /// Makes everything appended durable.
    pub fn sync(&mut self) -> io::Result<()> {
        match self {
            LogFile::Mapped(log) => log.sync(),
            LogFile::Buffered(file) => file.sync(),
        }
    }
}

impl LogFile {
    /// The mapped stretch of log that writers may copy whole records into
    /// themselves, at least `want` bytes reserved from the end of the log
    /// on (`None` for a log that is not mapped). See [`DirectRegion`].
    pub fn direct_region(&mut self, want: u64) -> io::Result<Option<DirectRegion>> {
        match self {
            LogFile::Mapped(log) => log.direct_region(want).map(Some),
            LogFile::Buffered(_) => Ok(None),
        }
    }

    /// Takes note that records were copied into the region
    /// [`LogFile::direct_region`] gave, up to `len`.
    pub fn advance_to(&mut self, len: u64) -> io::Result<()> {
        match self {
            LogFile::Mapped(log) => log.advance_to(len),
            LogFile::Buffered(_) => Err(io::Error::other("a buffered log has no direct region")),
        }
    }
}

/// A stretch of a mapped log, `start..end` in the file, that writers copy
/// records into themselves, each at the place it reserved (`db/direct_writes.rs`).
/// `base` points at the byte of the mapping at file offset `base_offset`
/// (at or before `start`). It stays valid until the log is next used
/// through `&mut` ([`LogFile::advance_to`] and every append or unmapping
/// take that).
#[derive(Debug, Clone, Copy)]
pub struct DirectRegion {
    /// The mapping's byte at `base_offset`.
    pub base: *mut u8,
    /// The file offset `base` maps.
    pub base_offset: u64,
    /// The end of the log when the region was taken.
    pub start: u64,
    /// The end of the mapped window: no record may go past it.
    pub end: u64,
}

// SAFETY: a region is an address range of a shared file mapping; whoever
// copies into it keeps to the protocol above, on any thread.
unsafe impl Send for DirectRegion {}

impl LogSink for LogFile {
    fn reserve(&mut self, bytes: usize) -> io::Result<()> {
        match self {
            LogFile::Mapped(log) => log.reserve(bytes as u64),
            LogFile::Buffered(_) => Ok(()),
        }
    }

    fn append_fragment(&mut self, header: &[u8; HEADER_SIZE], payload: &[u8]) -> io::Result<()> {
        match self {
            LogFile::Mapped(log) => log.append_fragment(header, payload),
            LogFile::Buffered(file) => file.append_fragment(header, payload),
        }
    }

    fn append_zeros(&mut self, len: usize) -> io::Result<()> {
        match self {
            LogFile::Mapped(log) => log.append_zeros(len as u64),
            LogFile::Buffered(file) => file.append_zeros(len),
        }
    }

    fn end_record(&mut self) -> io::Result<()> {
        match self {
            // The bytes are in the page cache already.
            LogFile::Mapped(_) => Ok(()),
            LogFile::Buffered(file) => file.end_record(),
        }
    }
}

/// A log file written through a shared memory mapping of space reserved
/// ahead with `fallocate`: an append is a copy, a full disk fails the
/// reservation before any byte of a record is written, and what is not
/// written reads as zeros.
pub struct MappedLog {
    file: File,
    /// Bytes reserved with each `fallocate` (a system call per this many
    /// bytes of log), and mapped at a time: a multiple of the log's block
    /// size, and mapped at multiples of itself, so that no fragment (which
    /// never crosses a block) crosses a window. Shrinks when the disk has
    /// no room for a whole step.
    step: u64,
    /// The mapped window, `step` long (less at the end of the reserved
    /// space), starting at `window_start`.
    window: Option<MmapMut>,
    window_start: u64,
    /// Bytes of log written.
    len: u64,
    /// Bytes reserved: the file's size while it is being written.
    reserved: u64,
    /// Bytes from the start written with `write(2)` (zeros) before any
    /// record was copied there: nothing is copied at or past it.
    prepared: u64,
    /// True once the tail is trimmed: nothing more may be appended.
    finished: bool,
}

impl std::fmt::Debug for MappedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedLog")
            .field("len", &self.len)
            .field("reserved", &self.reserved)
            .finish()
    }
}

impl MappedLog {
    /// Creates (or truncates) `path` and reserves its first stretch:
    /// `expected_len` bytes (the log of a memtable of that size) and a
    /// tenth more, between 64 KiB and `MAX_RESERVE_BYTES`, as RocksDB
    /// preallocates its WAL. The log of a full memtable is then reserved
    /// and mapped once, when the memtable is switched, instead of a
    /// reservation and a new mapping every stretch of its life: with 1 MiB
    /// stretches those were among the slowest writes of a 256-byte fill
    /// (`docs/results/write-path.md`, "Tails of a 256-byte fill (third
    /// pass)").
    /// Where the disk has less room, it reserves smaller stretches, at
    /// most an eighth of the room left at a time. An
    /// error of kind [`io::ErrorKind::Unsupported`] means the file system
    /// cannot preallocate: write the log another way.
    pub fn create(path: &Path, expected_len: u64) -> io::Result<MappedLog> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        // Never an eighth of the room left, so that a log on a nearly full
        // disk leaves the flush of the memtable before it room to write.
        let room = free_bytes(&file).unwrap_or(u64::MAX) / 8;
        let step = expected_len
            .saturating_add(expected_len / 10)
            .min(room)
            .clamp(MIN_RESERVE_BYTES, MAX_RESERVE_BYTES)
            .next_multiple_of(BLOCK_SIZE as u64);
        let mut log = MappedLog {
            file,
            step,
            window: None,
            window_start: 0,
            len: 0,
            reserved: 0,
            prepared: 0,
            finished: false,
        };
        log.reserve(1)?;
        Ok(log)
    }

    /// Makes sure `bytes` more bytes can be written without a system call
    /// that could fail for lack of space.
    fn reserve(&mut self, bytes: u64) -> io::Result<()> {
        if self.finished {
            return Err(io::Error::other("appending to a finished log"));
        }
        let needed = self
            .len
            .checked_add(bytes)
            .ok_or_else(|| io::Error::other("log length overflows"))?;
        if needed <= self.reserved {
            return Ok(());
        }
        loop {
            let target = needed.max(self.reserved + self.step);
            let target = target.next_multiple_of(self.step);
            match allocate(&self.file, self.reserved, target - self.reserved) {
                Ok(()) => {
                    self.reserved = target;
                    return Ok(());
                }
                // No room for a whole stretch ahead: reserve in smaller
                // ones (windows stay whole blocks), down to two blocks,
                // before saying the disk is full. A memtable larger than
                // the free space still takes writes until the space is
                // used up.
                Err(err)
                    if err.raw_os_error() == Some(libc::ENOSPC)
                        && self.step > MIN_RESERVE_BYTES =>
                {
                    self.step = (self.step / 4)
                        .next_multiple_of(BLOCK_SIZE as u64)
                        .max(MIN_RESERVE_BYTES);
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Writes zeros over the reserved space up to at least `upto` (at most
    /// the reserved end), a [`PREPARE_BYTES`] stretch at a time, ahead of
    /// the copies through the mapping.
    ///
    /// Why: a copy into a page of reserved space that is not in the page
    /// cache faults, and the kernel then reads the page (zeros, from an
    /// unwritten extent) and makes it writable: about 4.5 µs of CPU per
    /// 4 KiB page of log on ext4, where writing the stretch first with
    /// `write(2)` and then copying into pages already cached costs about
    /// 0.9 (`docs/results/compaction-tax.md`, "The log's pages written
    /// before they are mapped"). The bytes read the same: zeros.
    fn prepare(&mut self, upto: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let upto = upto.min(self.reserved);
        while self.prepared < upto {
            let n = PREPARE_BYTES.min(self.reserved - self.prepared);
            self.file
                .write_all_at(&ZEROS[..n as usize], self.prepared)?;
            self.prepared += n;
        }
        Ok(())
    }

    fn append_fragment(&mut self, header: &[u8; HEADER_SIZE], payload: &[u8]) -> io::Result<()> {
        let total = (HEADER_SIZE + payload.len()) as u64;
        self.reserve(total)?;
        // The payload first and the header last: a copy cut short by a
        // crash leaves a zero header, which readers take for the end of
        // the log, never a header whose payload is half there. The fence
        // keeps the compiler from reordering the two copies; the CPU
        // stores in program order up to the instruction a signal stops.
        self.copy_at(self.len + HEADER_SIZE as u64, payload)?;
        compiler_fence(Ordering::Release);
        self.copy_at(self.len, header)?;
        self.len += total;
        Ok(())
    }

    fn append_zeros(&mut self, len: u64) -> io::Result<()> {
        // Reserved space reads as zeros: the file was created empty, and
        // nothing is written past `len`.
        self.reserve(len)?;
        self.len += len;
        Ok(())
    }

    /// Copies `bytes` to `offset`, inside the reserved space.
    fn copy_at(&mut self, mut offset: u64, mut bytes: &[u8]) -> io::Result<()> {
        if offset.saturating_add(bytes.len() as u64) > self.reserved {
            return Err(io::Error::other("log copy past the reserved space"));
        }
        self.prepare(offset + bytes.len() as u64)?;
        while !bytes.is_empty() {
            let (window_start, window) = self.window_at(offset)?;
            // Below `step`: `window_at` maps the window holding it.
            let at = (offset - window_start) as usize;
            let n = bytes.len().min(window.len() - at);
            window[at..at + n].copy_from_slice(&bytes[..n]);
            offset += n as u64;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// The mapped window holding `offset`, mapping it if needed, and where
    /// it starts. REQUIRES: `offset < self.reserved`.
    fn window_at(&mut self, offset: u64) -> io::Result<(u64, &mut MmapMut)> {
        let start = offset - offset % self.step;
        let mapped = self
            .window
            .as_ref()
            .is_some_and(|w| self.window_start == start && offset - start < w.len() as u64);
        if !mapped {
            // Unmapping leaves what was copied in the page cache.
            self.window = None;
            let len = self.step.min(self.reserved - start) as usize;
            // SAFETY: the mapping covers reserved space of a file this log
            // created and alone writes; it is never truncated below the
            // mapping while mapped (`finish` unmaps first). Another process
            // truncating it would be a bug outside this program's control,
            // as with any mapping.
            let window = unsafe {
                MmapOptions::new()
                    .offset(start)
                    .len(len)
                    .map_mut(&self.file)?
            };
            self.window_start = start;
            self.window = Some(window);
        }
        let window = self
            .window
            .as_mut()
            .ok_or_else(|| io::Error::other("log window not mapped"))?;
        Ok((self.window_start, window))
    }

    /// The rest of the mapped window that holds the end of the log, up to
    /// where the log is prepared, with at least `want` bytes reserved and
    /// prepared past that end (fewer may lie in the window). See
    /// [`DirectRegion`].
    fn direct_region(&mut self, want: u64) -> io::Result<DirectRegion> {
        self.reserve(want.max(1))?;
        let start = self.len;
        self.prepare(start + want.max(1))?;
        let prepared = self.prepared;
        let (base_offset, window) = self.window_at(start)?;
        let end = (base_offset + window.len() as u64).min(prepared);
        Ok(DirectRegion {
            base: window.as_mut_ptr(),
            base_offset,
            start,
            end,
        })
    }

    /// Moves the end of the log to `len`: records were copied there
    /// through a [`DirectRegion`].
    fn advance_to(&mut self, len: u64) -> io::Result<()> {
        if len < self.len || len > self.reserved || self.finished {
            return Err(io::Error::other(format!(
                "log end {len} outside {}..={} (or the log is finished)",
                self.len, self.reserved
            )));
        }
        self.len = len;
        Ok(())
    }

    /// `fdatasync`: on Linux it writes back pages dirtied through a
    /// mapping as well as by `write(2)`, and the file's size.
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Ends appending: unmaps the file and cuts it at the end of the log.
    /// The file stays open, so it can still be synced.
    fn finish(&mut self) -> io::Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        self.window = None;
        self.file.set_len(self.len)?;
        self.reserved = self.len;
        Ok(())
    }
}

impl Drop for MappedLog {
    fn drop(&mut self) {
        // Best effort: an untrimmed tail reads as the end of the log.
        let _ = self.finish();
    }
}

/// The bytes an unprivileged user may still write on `file`'s file system.
pub(crate) fn free_bytes(file: &File) -> io::Result<u64> {
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `stat` is a buffer of the right type for the call to fill; it
    // is read only when the call succeeded.
    let rc = unsafe { libc::fstatvfs(file.as_raw_fd(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: filled by the successful call above.
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Reserves `len` bytes at `offset` of `file`, growing it.
fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    fallocate(file, 0, offset, len)
}

/// Reserves the disk space of `file`'s first `len` bytes without changing
/// its size (`FALLOC_FL_KEEP_SIZE`), for a file about to be written whole:
/// the writes then fill blocks already allocated, which on ext4 costs less
/// CPU than allocating them as they are written back
/// (`docs/results/opencl-pocl.md`, "Output space reserved before the
/// write").
/// A file system that cannot reserve says `Unsupported`.
pub(crate) fn reserve_without_growing(file: &File, len: u64) -> io::Result<()> {
    fallocate(file, libc::FALLOC_FL_KEEP_SIZE, 0, len)
}

fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    let offset = libc::off_t::try_from(offset).map_err(io::Error::other)?;
    let len = libc::off_t::try_from(len).map_err(io::Error::other)?;
    loop {
        // SAFETY: a plain system call on a descriptor `file` keeps open.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
                return Err(io::Error::new(io::ErrorKind::Unsupported, err))
            }
            _ => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_format::log_reader::LogReader;
    use shale_format::log_writer::LogWriter;

    fn records(path: &Path) -> (Vec<Vec<u8>>, Vec<String>) {
        let mut dropped = Vec::new();
        let file = File::open(path).unwrap();
        let mut reader = LogReader::new(
            file,
            |bytes: u64, reason: shale_format::Error| dropped.push(format!("{bytes}: {reason}")),
            true,
            0,
        );
        let mut out = Vec::new();
        while let Some(record) = reader.read_record().unwrap() {
            out.push(record);
        }
        drop(reader);
        (out, dropped)
    }

    fn sample(i: usize) -> Vec<u8> {
        // Sizes from empty to several blocks, so records cross blocks and
        // windows.
        let len = [0, 1, 50, 7000, 40_000, 33_000, 200_000][i % 7];
        (0..len).map(|b| (b * 31 + i) as u8).collect()
    }

    #[test]
    fn records_read_back_and_the_tail_is_trimmed_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let mut expected = Vec::new();
        let mut writer =
            LogWriter::new(LogFile::Mapped(MappedLog::create(&path, 1 << 20).unwrap()));
        let mut buffered = LogWriter::new(Vec::new());
        for i in 0..40 {
            let record = sample(i);
            writer.add_record(&record).unwrap();
            buffered.add_record(&record).unwrap();
            expected.push(record);
        }
        let len = writer.file_len();
        // While open, the file is longer than the log, and reads the same.
        assert!(std::fs::metadata(&path).unwrap().len() > len);
        let (read, dropped) = records(&path);
        assert_eq!(read, expected);
        assert!(dropped.is_empty(), "{dropped:?}");
        drop(writer);
        // Closed: exactly the bytes a buffered writer writes.
        assert_eq!(std::fs::read(&path).unwrap(), buffered.into_inner());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    }

    #[test]
    fn a_record_cut_short_reads_as_the_end_of_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let mut log = MappedLog::create(&path, 1 << 20).unwrap();
        let mut writer = LogWriter::new(Vec::new());
        writer.add_record(b"first").unwrap();
        // Two fragments: the first fills block 0, the second starts block 1.
        writer.add_record(&vec![7u8; 50_000]).unwrap();
        let bytes = writer.into_inner();
        let second_record = HEADER_SIZE + 5;
        let second_fragment = BLOCK_SIZE;
        let zero = |log: &mut MappedLog, range: std::ops::Range<usize>| {
            log.copy_at(range.start as u64, &vec![0; range.len()])
                .unwrap();
        };
        // What a crash leaves when it stops the copy of the second record:
        // fragments are copied in order, each payload before its header.
        let cases: [Vec<std::ops::Range<usize>>; 2] = [
            // the first fragment's payload, not its header
            vec![
                second_record..second_record + HEADER_SIZE,
                second_fragment..bytes.len(),
            ],
            // the first fragment whole, the second's payload only
            std::iter::once(second_fragment..second_fragment + HEADER_SIZE).collect(),
        ];
        for (case, zeroed) in cases.into_iter().enumerate() {
            log.copy_at(0, &bytes).unwrap();
            for range in zeroed {
                zero(&mut log, range);
            }
            let (read, dropped) = records(&path);
            assert_eq!(read, vec![b"first".to_vec()], "case {case}");
            assert!(dropped.is_empty(), "case {case}: {dropped:?}");
        }
        // Damage that is not a tail is still reported: the second
        // fragment's header zero but data in a later block.
        log.copy_at(0, &bytes).unwrap();
        zero(&mut log, second_fragment..second_fragment + HEADER_SIZE);
        log.copy_at(3 * BLOCK_SIZE as u64, &bytes[..second_record])
            .unwrap();
        let (read, dropped) = records(&path);
        assert_eq!(read, vec![b"first".to_vec(), b"first".to_vec()]);
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert!(
            dropped[0].contains("error in middle of record"),
            "{dropped:?}"
        );
    }

    #[test]
    fn a_direct_region_ends_where_the_log_is_written_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let mut log = MappedLog::create(&path, 8 << 20).unwrap();
        let mut start = 0;
        for _ in 0..3 {
            let region = log.direct_region(100).unwrap();
            assert_eq!(region.start, start);
            assert!(region.end >= start + 100, "{region:?}");
            assert!(region.end <= log.prepared, "{region:?}");
            assert!(region.end - region.start <= PREPARE_BYTES, "{region:?}");
            // What writers copy there lands in the file.
            // SAFETY: the region is mapped, and only this test writes it.
            unsafe {
                let at = region
                    .base
                    .add((region.end - 1 - region.base_offset) as usize);
                *at = 9;
            }
            log.advance_to(region.end).unwrap();
            start = region.end;
        }
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes[PREPARE_BYTES as usize - 1], 9);
        assert_eq!(bytes[2 * PREPARE_BYTES as usize - 1], 9);
        assert_eq!(bytes[3 * PREPARE_BYTES as usize - 1], 9);
        assert_eq!(bytes.iter().filter(|&&b| b != 0).count(), 3);
    }

    #[test]
    fn finished_logs_refuse_appends_and_still_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let mut log = MappedLog::create(&path, 1 << 20).unwrap();
        log.append_fragment(&[1; HEADER_SIZE], b"x").unwrap();
        log.finish().unwrap();
        let mut file = LogFile::Mapped(log);
        file.sync().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8);
        assert!(file.reserve(1).is_err());
    }
}
