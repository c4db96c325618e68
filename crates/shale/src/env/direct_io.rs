//! Direct I/O (`O_DIRECT`) for compaction input and output tables: reads
//! and writes that bypass the page cache, so a large compaction does not
//! evict the pages user reads need (the GPU compaction paper uses direct
//! I/O for the same reason).
//!
//! `O_DIRECT` wants the buffer address, the file offset and the length
//! aligned to the device's logical block size; [`DIRECT_IO_ALIGNMENT`]
//! (4 KiB) covers the usual 512-byte and 4 KiB devices.
//!
//! - Reads ([`DirectRandomAccessFile`]) of an aligned buffer at an aligned
//!   offset go straight into it. Small reads (blocks, read in order by a
//!   compaction) are served from a window of 1 MiB read at once; other
//!   reads are widened to aligned bounds, read into an aligned buffer and
//!   the asked-for bytes copied out.
//! - Writes ([`DirectWritableFile`]) collect bytes in an aligned buffer and
//!   write whole aligned chunks with `O_DIRECT`; an aligned piece written
//!   while nothing is buffered goes to the disk straight from where it is.
//!   A file's length is rarely a multiple of the alignment: on `sync` the
//!   unaligned tail is written with `pwrite` through a second, ordinary
//!   descriptor of the same file, and then `fdatasync` makes all of it
//!   durable, as the buffered path does. The tail stays in the buffer, so
//!   bytes written after a sync rewrite that last partial chunk with
//!   `O_DIRECT` from an aligned offset.
//!
//! A file system that refuses `O_DIRECT` (tmpfs before Linux 6.6 answers
//! `EINVAL` at open)
//! gives an [`Error::NotSupported`] that says so: direct I/O is asked for
//! explicitly, so it never silently turns into buffered I/O. The engine
//! checks at `DB::open` (see [`probe_direct_io`]), before any compaction.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

use super::{io_error, WritableFile};

/// Alignment of buffers, offsets and lengths of direct I/O.
pub const DIRECT_IO_ALIGNMENT: usize = 4096;

/// Bytes collected before a direct write.
const DIRECT_WRITE_BUFFER: usize = 1 << 20;

/// A heap buffer aligned to [`DIRECT_IO_ALIGNMENT`].
struct AlignedBuffer {
    ptr: *mut u8,
    capacity: usize,
}

// SAFETY: the buffer is plain owned memory; no aliasing pointer escapes.
unsafe impl Send for AlignedBuffer {}
// SAFETY: shared references only read it.
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// A zeroed buffer of `capacity` bytes (a multiple of the alignment).
    fn new(capacity: usize) -> AlignedBuffer {
        let capacity = capacity.max(DIRECT_IO_ALIGNMENT);
        let layout = Self::layout(capacity);
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuffer { ptr, capacity }
    }

    /// A buffer of no bytes, allocating nothing (what a dropped file's
    /// buffer is replaced with when it goes back to the spares).
    fn empty() -> AlignedBuffer {
        AlignedBuffer {
            ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
            capacity: 0,
        }
    }

    fn layout(capacity: usize) -> Layout {
        Layout::from_size_align(capacity, DIRECT_IO_ALIGNMENT)
            .unwrap_or_else(|_| unreachable!("aligned sizes below isize::MAX"))
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `capacity` initialised bytes
        // (or, for `empty`, dangling, aligned and non-null with capacity 0).
        unsafe { std::slice::from_raw_parts(self.ptr, self.capacity) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.capacity) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        if self.capacity == 0 {
            // `empty`: nothing was allocated.
            return;
        }
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, Self::layout(self.capacity)) }
    }
}

fn round_down(n: u64) -> u64 {
    n - n % DIRECT_IO_ALIGNMENT as u64
}

fn round_up(n: u64) -> u64 {
    round_down(n + DIRECT_IO_ALIGNMENT as u64 - 1)
}

/// What an open with `O_DIRECT` that failed means.
fn open_error(action: &str, path: &Path, err: std::io::Error) -> Error {
    if err.raw_os_error() == Some(libc::EINVAL) {
        Error::NotSupported(format!(
            "{}: the file system refuses direct I/O (O_DIRECT gave EINVAL, as tmpfs before Linux 6.6 does); \
             turn direct I/O off or use another file system",
            path.display()
        ))
    } else {
        io_error(action, path, err)
    }
}

/// Bytes a direct read of a small piece (a block) reads at once.
/// Compaction reads its input files' blocks in order, and with `O_DIRECT`
/// nothing reads ahead for it: read one at a time, each 4 KiB block was a
/// read from the disk, and `streaming` with direct I/O compacted far
/// slower than through the page cache (`docs/results/opencl-pocl.md`,
/// "Files come back into pinned memory and go out as they came; direct
/// I/O without bounce buffers"). RocksDB reads ahead for direct
/// compaction reads too (`compaction_readahead_size`).
const READAHEAD: usize = 1 << 20;

/// A file read with `O_DIRECT`.
pub(crate) struct DirectRandomAccessFile {
    file: File,
    /// The last [`READAHEAD`] bytes read for small reads (allocated at the
    /// first), and where they start in the file.
    window: std::sync::Mutex<Option<Window>>,
}

struct Window {
    buffer: AlignedBuffer,
    /// File offset of `buffer[0]` (aligned).
    start: u64,
    /// Bytes of `buffer` read (fewer than its capacity at the file's end).
    len: usize,
}

impl Window {
    /// The window's bytes for `[offset, offset + len)`, if it holds them.
    fn get(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let from = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.buffer.as_slice()[..self.len].get(from..from.checked_add(len)?)
    }
}

/// Buffers of files closed (read windows and write buffers, both
/// [`SPARE_SIZE`]), for the next files opened: a compaction opens and
/// closes many files, and a new 1 MiB buffer to allocate and fault in cost
/// the reading and writing threads more than their reads and writes.
static SPARE_BUFFERS: std::sync::Mutex<Vec<AlignedBuffer>> = std::sync::Mutex::new(Vec::new());

/// The size of every spare buffer.
const SPARE_SIZE: usize = 1 << 20;
const _: () = assert!(READAHEAD == SPARE_SIZE && DIRECT_WRITE_BUFFER == SPARE_SIZE);

/// Spare buffers kept at most (16 MiB).
const MOST_SPARE_BUFFERS: usize = 16;

/// A kept buffer of [`SPARE_SIZE`] bytes (its bytes those of its last
/// use), or a new one.
fn spare_buffer() -> AlignedBuffer {
    SPARE_BUFFERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .pop()
        .unwrap_or_else(|| AlignedBuffer::new(SPARE_SIZE))
}

/// Keeps `buffer` for the next file, unless enough are kept.
fn keep_spare(buffer: AlignedBuffer) {
    let mut spare = SPARE_BUFFERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if spare.len() < MOST_SPARE_BUFFERS && buffer.capacity == SPARE_SIZE {
        spare.push(buffer);
    }
}

impl Drop for DirectRandomAccessFile {
    fn drop(&mut self) {
        let window = self
            .window
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(window) = window {
            keep_spare(window.buffer);
        }
    }
}

impl DirectRandomAccessFile {
    pub(crate) fn open(path: &Path) -> Result<DirectRandomAccessFile> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| open_error("opening for direct reads", path, e))?;
        Ok(DirectRandomAccessFile {
            file,
            window: std::sync::Mutex::new(None),
        })
    }

    /// Reads from the aligned `offset` into the aligned `buf` until it is
    /// full or the file ends; the bytes read.
    fn read_aligned(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            let n = match self
                .file
                .read_at(&mut buf[filled..], offset + filled as u64)
            {
                Ok(n) => n,
                // A signal arrived before anything was read: try again.
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            if n == 0 {
                break;
            }
            filled += n;
            if filled % DIRECT_IO_ALIGNMENT != 0 {
                // A short read not on a block boundary: the file ended.
                break;
            }
        }
        Ok(filled)
    }

    /// Reads `buf.len()` bytes at `offset` through an aligned buffer of
    /// their own (pieces too large for the window).
    fn read_bounced(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        let start = round_down(offset);
        let len = usize::try_from(round_up(end) - start)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let mut aligned = AlignedBuffer::new(len);
        let skip = (offset - start) as usize;
        let filled = self.read_aligned(&mut aligned.as_mut_slice()[..len], start)?;
        if filled < skip + buf.len() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&aligned.as_slice()[skip..skip + buf.len()]);
        Ok(())
    }
}

impl RandomAccess for DirectRandomAccessFile {
    fn direct_alignment(&self) -> Option<usize> {
        Some(DIRECT_IO_ALIGNMENT)
    }

    fn read_up_to(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let aligned = |n: usize| n % DIRECT_IO_ALIGNMENT == 0;
        if aligned(buf.as_ptr() as usize) && aligned(buf.len()) && aligned(offset as usize) {
            self.read_aligned(buf, offset)
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a direct read needs an aligned buffer, length and offset",
            ))
        }
    }

    /// Aligned requests (address, length and offset) are read straight
    /// into `buf`; small ones come from a window of [`READAHEAD`] bytes
    /// read at once; other large ones through an aligned buffer.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let aligned = |n: usize| n % DIRECT_IO_ALIGNMENT == 0;
        if aligned(buf.as_ptr() as usize)
            && aligned(buf.len())
            && offset % DIRECT_IO_ALIGNMENT as u64 == 0
        {
            return match self.read_aligned(buf, offset)? {
                n if n == buf.len() => Ok(()),
                _ => Err(std::io::ErrorKind::UnexpectedEof.into()),
            };
        }
        if buf.len() > READAHEAD / 2 {
            return self.read_bounced(buf, offset);
        }
        // Another thread reading this file at the same time reads on its
        // own rather than wait for (and then move) the window.
        let Ok(mut window) = self.window.try_lock() else {
            return self.read_bounced(buf, offset);
        };
        if let Some(bytes) = window.as_ref().and_then(|w| w.get(offset, buf.len())) {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        let window = window.get_or_insert_with(|| Window {
            buffer: spare_buffer(),
            start: 0,
            len: 0,
        });
        window.start = round_down(offset);
        window.len = 0;
        window.len = self.read_aligned(window.buffer.as_mut_slice(), window.start)?;
        let bytes = window
            .get(offset, buf.len())
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(bytes);
        Ok(())
    }
}

/// A file written with `O_DIRECT` (see the module documentation).
pub(crate) struct DirectWritableFile {
    direct: File,
    /// The same file without `O_DIRECT`, for the unaligned tail.
    buffered: File,
    buffer: AlignedBuffer,
    /// Bytes in `buffer`.
    len: usize,
    /// File offset of `buffer[0]` (aligned).
    offset: u64,
}

impl std::fmt::Debug for DirectWritableFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectWritableFile")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl DirectWritableFile {
    /// Creates (or truncates) `path` for direct writes.
    pub(crate) fn create(path: &Path) -> Result<DirectWritableFile> {
        let direct = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| open_error("creating for direct writes", path, e))?;
        let buffered = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io_error("opening", path, e))?;
        Ok(DirectWritableFile {
            direct,
            buffered,
            buffer: spare_buffer(),
            len: 0,
            offset: 0,
        })
    }

    /// Writes the buffer's whole aligned chunks with `O_DIRECT` and moves
    /// the rest (less than one chunk) to the front.
    fn write_aligned(&mut self) -> std::io::Result<()> {
        let aligned = self.len - self.len % DIRECT_IO_ALIGNMENT;
        if aligned == 0 {
            return Ok(());
        }
        self.direct
            .write_all_at(&self.buffer.as_slice()[..aligned], self.offset)?;
        self.buffer.as_mut_slice().copy_within(aligned..self.len, 0);
        self.len -= aligned;
        self.offset += aligned as u64;
        Ok(())
    }
}

impl Write for DirectWritableFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Nothing buffered and an aligned source (a table's data blocks as
        // they came back from a device into pinned memory): its aligned
        // part goes to the disk straight from it, with no copy.
        let whole = buf.len() - buf.len() % DIRECT_IO_ALIGNMENT;
        if self.len == 0 && whole > 0 && (buf.as_ptr() as usize) % DIRECT_IO_ALIGNMENT == 0 {
            self.direct.write_all_at(&buf[..whole], self.offset)?;
            self.offset += whole as u64;
            return Ok(whole);
        }
        if self.len == self.buffer.capacity {
            self.write_aligned()?;
        }
        let n = buf.len().min(self.buffer.capacity - self.len);
        self.buffer.as_mut_slice()[self.len..self.len + n].copy_from_slice(&buf[..n]);
        self.len += n;
        Ok(n)
    }

    /// Writes what is aligned; the tail waits for more bytes or `sync`.
    fn flush(&mut self) -> std::io::Result<()> {
        self.write_aligned()
    }
}

impl Drop for DirectWritableFile {
    fn drop(&mut self) {
        keep_spare(std::mem::replace(&mut self.buffer, AlignedBuffer::empty()));
    }
}

impl WritableFile for DirectWritableFile {
    fn sync(&mut self) -> std::io::Result<()> {
        self.write_aligned()?;
        if self.len > 0 {
            // The unaligned tail through the ordinary descriptor; it stays
            // in the buffer in case more bytes follow.
            self.buffered
                .write_all_at(&self.buffer.as_slice()[..self.len], self.offset)?;
        }
        // fdatasync covers the file, whichever descriptor wrote it.
        self.buffered.sync_data()
    }

    fn reserve(&mut self, len: u64) -> std::io::Result<()> {
        super::reserve_file(&self.buffered, len)
    }
}

/// Checks that `dir`'s file system takes `O_DIRECT`, with a scratch file
/// that is removed again.
pub fn probe_direct_io(dir: &Path) -> Result<()> {
    let path = dir.join("DIRECT_IO_PROBE");
    let result = DirectWritableFile::create(&path).and_then(|mut file| {
        file.write_all(&[0u8; DIRECT_IO_ALIGNMENT])
            .and_then(|()| file.sync())
            .map_err(|e| open_error("writing with O_DIRECT", &path, e))
    });
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory whose file system takes O_DIRECT, or `None`
    /// (printed) when it refuses and the test is not required
    /// ([`shale_compact::testing::skip`]).
    fn direct_dir() -> Option<tempfile::TempDir> {
        let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
        match probe_direct_io(dir.path()) {
            Ok(()) => Some(dir),
            Err(e) => {
                shale_compact::testing::skip(
                    "direct I/O",
                    &e.to_string(),
                    "run it from a file system that takes O_DIRECT (ext4, xfs)",
                );
                None
            }
        }
    }

    #[test]
    fn unaligned_writes_read_back_exactly() {
        let Some(dir) = direct_dir() else {
            return;
        };
        for size in [
            0usize,
            1,
            4095,
            4096,
            4097,
            100_000,
            DIRECT_WRITE_BUFFER + 12_345,
        ] {
            let path = dir.path().join(format!("f{size}"));
            let bytes: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
            let mut file = DirectWritableFile::create(&path).unwrap();
            // Odd-sized pieces, a sync in the middle, then the rest.
            let half = size / 2;
            for chunk in bytes[..half].chunks(777) {
                file.write_all(chunk).unwrap();
            }
            file.sync().unwrap();
            for chunk in bytes[half..].chunks(1000) {
                file.write_all(chunk).unwrap();
            }
            file.flush().unwrap();
            file.sync().unwrap();
            drop(file);
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "size {size}");

            let reader = DirectRandomAccessFile::open(&path).unwrap();
            for (offset, len) in [(0, size), (size / 3, size / 3), (size.saturating_sub(7), 7)] {
                let len = len.min(size - offset.min(size));
                let mut buf = vec![0u8; len];
                reader.read_exact_at(&mut buf, offset as u64).unwrap();
                assert_eq!(buf, bytes[offset..offset + len], "size {size} at {offset}");
            }
            let mut past = vec![0u8; 2];
            assert!(reader.read_exact_at(&mut past, size as u64).is_err());
        }
    }

    #[test]
    fn aligned_pieces_written_straight_read_back_exactly() {
        let Some(dir) = direct_dir() else {
            return;
        };
        let path = dir.path().join("aligned");
        let mut source = AlignedBuffer::new(5 * DIRECT_IO_ALIGNMENT);
        for (i, b) in source.as_mut_slice().iter_mut().enumerate() {
            *b = (i * 13 % 241) as u8;
        }
        let mut expected = Vec::new();
        let mut file = DirectWritableFile::create(&path).unwrap();
        // Aligned and whole, aligned with a tail, then unaligned pieces
        // (buffered), then aligned again while bytes are buffered.
        for piece in [
            &source.as_slice()[..2 * DIRECT_IO_ALIGNMENT],
            &source.as_slice()[..3 * DIRECT_IO_ALIGNMENT + 100],
            &source.as_slice()[7..5_000],
            &source.as_slice()[..DIRECT_IO_ALIGNMENT],
        ] {
            file.write_all(piece).unwrap();
            expected.extend_from_slice(piece);
        }
        file.sync().unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn reads_in_order_aligned_and_from_several_threads_read_back_exactly() {
        let Some(dir) = direct_dir() else {
            return;
        };
        // Three windows and a piece: reads cross window boundaries and the
        // last one ends at the file's end.
        let size = 3 * READAHEAD + 12_345;
        let path = dir.path().join("blocks");
        let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let reader = DirectRandomAccessFile::open(&path).unwrap();
        // Blocks of odd sizes, in order, as a compaction reads them.
        let mut offset = 0;
        let mut len = 1;
        while offset < size {
            let n = len.min(size - offset);
            let mut buf = vec![0u8; n];
            reader.read_exact_at(&mut buf, offset as u64).unwrap();
            assert_eq!(buf, bytes[offset..offset + n], "{n} bytes at {offset}");
            offset += n;
            len = len * 3 % 9_001 + 1;
        }
        // Backwards, and one larger than half a window.
        for (offset, len) in [(size - 100, 100), (5, 4_000), (1_000, READAHEAD / 2 + 3)] {
            let mut buf = vec![0u8; len];
            reader.read_exact_at(&mut buf, offset as u64).unwrap();
            assert_eq!(buf, bytes[offset..offset + len], "{len} bytes at {offset}");
        }
        // An aligned buffer at an aligned offset is read straight into.
        let mut aligned = AlignedBuffer::new(8 * DIRECT_IO_ALIGNMENT);
        reader
            .read_exact_at(aligned.as_mut_slice(), 2 * DIRECT_IO_ALIGNMENT as u64)
            .unwrap();
        let at = 2 * DIRECT_IO_ALIGNMENT;
        assert_eq!(aligned.as_slice(), &bytes[at..at + 8 * DIRECT_IO_ALIGNMENT]);
        // Past the end: an error, aligned or not, and the window stays good.
        let mut tail = AlignedBuffer::new(4 * DIRECT_IO_ALIGNMENT);
        let last = round_down(size as u64 - 1);
        assert!(reader.read_exact_at(tail.as_mut_slice(), last).is_err());
        assert!(reader
            .read_exact_at(&mut [0u8; 2], size as u64 - 1)
            .is_err());
        let mut buf = [0u8; 10];
        reader.read_exact_at(&mut buf, size as u64 - 10).unwrap();
        assert_eq!(buf, bytes[size - 10..]);
        // Threads reading the same file at once each get their bytes.
        std::thread::scope(|scope| {
            for t in 0..4usize {
                let (reader, bytes) = (&reader, &bytes);
                scope.spawn(move || {
                    let mut offset = t * 7_919;
                    while offset + 5_000 < size {
                        let mut buf = vec![0u8; 5_000];
                        reader.read_exact_at(&mut buf, offset as u64).unwrap();
                        assert_eq!(buf, bytes[offset..offset + 5_000]);
                        offset += 50_021;
                    }
                });
            }
        });
    }

    #[test]
    fn tmpfs_refusal_is_a_clear_error() {
        // /dev/shm is tmpfs, which refuses O_DIRECT before Linux 6.6. Not
        // required: no setup gives a newer kernel a file system that refuses.
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            eprintln!("skipping: no /dev/shm");
            return;
        }
        let Ok(dir) = tempfile::tempdir_in(shm) else {
            eprintln!("skipping: cannot write in /dev/shm");
            return;
        };
        match probe_direct_io(dir.path()) {
            Ok(()) => eprintln!("skipping: this /dev/shm takes O_DIRECT"),
            Err(e) => {
                assert!(matches!(e, Error::NotSupported(_)), "{e}");
                assert!(e.to_string().contains("refuses direct I/O"), "{e}");
            }
        }
    }
}
