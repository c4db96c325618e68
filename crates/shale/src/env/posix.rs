//! [`PosixEnv`]: the real file system through `std::fs`, with `LOCK`
//! locked the way LevelDB 1.23 locks it.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

use super::{io_error, lock, Env, FileLock, LogFile, MappedLog, WritableFile};

/// Size of the write buffer of every writable file.
const WRITE_BUFFER_SIZE: usize = 64 * 1024;

/// The operating system's file system.
///
/// Writable files are buffered (64 KiB); [`WritableFile::sync`] flushes and
/// calls `fdatasync`. Random-access reads use `pread`.
///
/// `LOCK` files are locked with `fcntl(F_SETLK)` POSIX record locks, as
/// LevelDB 1.23 locks them: on Linux `flock` and `fcntl` locks do not see
/// each other, so only `fcntl` keeps ShaleDB and LevelDB from opening one
/// database at the same time. POSIX locks belong to a process (a second
/// `fcntl` lock from the same process succeeds, and closing *any* descriptor
/// of the file drops the lock), so a process-wide table of locked files, like
/// LevelDB's `PosixLockTable`, refuses a second lock from this process and
/// makes sure no descriptor of a locked file is ever closed behind its
/// holder's back.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixEnv;

/// A read-only memory map of a file, shared as [`Bytes`] so that blocks can
/// borrow from it.
struct MappedFile(Bytes);

impl RandomAccess for MappedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }

    fn mapped(&self) -> Option<&Bytes> {
        Some(&self.0)
    }
}

impl PosixEnv {
    /// The real file system.
    pub fn new() -> PosixEnv {
        PosixEnv
    }
}

/// A buffered file being written.
#[derive(Debug)]
struct PosixWritableFile {
    writer: BufWriter<File>,
}

impl Write for PosixWritableFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

impl WritableFile for PosixWritableFile {
    fn sync(&mut self) -> std::io::Result<()> {
        self.writer.flush()?;
        self.writer.get_ref().sync_data()
    }

    fn reserve(&mut self, len: u64) -> std::io::Result<()> {
        super::reserve_file(self.writer.get_ref(), len)
    }
}

fn writable(file: File) -> Box<dyn WritableFile> {
    Box::new(PosixWritableFile {
        writer: BufWriter::with_capacity(WRITE_BUFFER_SIZE, file),
    })
}

/// Identifies a file independently of the path that reached it, so that
/// `db/LOCK` and `./db/LOCK` are one lock.
type FileKey = (u64, u64);

/// The files this process holds `fcntl` locks on.
static LOCKED_FILES: Mutex<BTreeSet<FileKey>> = Mutex::new(BTreeSet::new());

fn locked_files() -> MutexGuard<'static, BTreeSet<FileKey>> {
    lock(&LOCKED_FILES)
}

fn file_key(metadata: &std::fs::Metadata) -> FileKey {
    (metadata.dev(), metadata.ino())
}

/// Takes (`lock`) or releases a write lock on the whole of `file` without
/// waiting.
fn set_record_lock(file: &File, lock: bool) -> std::io::Result<()> {
    // SAFETY: `flock` is a plain C struct for which all-zero bytes are a
    // valid value; the fields that matter are set below.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    let lock_type = if lock { libc::F_WRLCK } else { libc::F_UNLCK };
    request.l_type = lock_type as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    request.l_start = 0;
    request.l_len = 0; // to the end of the file, however long it grows
                       // SAFETY: the descriptor is open for as long as `file` lives, and
                       // `request` is a valid, initialised `flock` that outlives the call.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &request) };
    if rc == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A held `fcntl` lock; the descriptor stays open while it is held.
#[derive(Debug)]
struct PosixFileLock {
    file: Option<File>,
    key: FileKey,
}

impl FileLock for PosixFileLock {}

impl Drop for PosixFileLock {
    fn drop(&mut self) {
        // The table stays locked until the descriptor is closed: were the key
        // removed first, another handle in this process could take the lock
        // and then lose it when this descriptor closes.
        let mut table = locked_files();
        if let Some(file) = self.file.take() {
            // Closing the descriptor releases the lock anyway; an error here
            // changes nothing.
            let _ = set_record_lock(&file, false);
            drop(file);
        }
        table.remove(&self.key);
    }
}

fn busy(path: &Path, holder: &str) -> Error {
    Error::Busy(format!("{} is locked by {holder}", path.display()))
}

impl Env for PosixEnv {
    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| io_error("creating", path, e))?;
        Ok(writable(file))
    }

    fn new_log_file(&self, path: &Path, expected_len: u64) -> Result<LogFile> {
        match MappedLog::create(path, expected_len) {
            Ok(log) => Ok(LogFile::Mapped(log)),
            // A file system that cannot preallocate: write(2) per record.
            Err(err) if err.kind() == std::io::ErrorKind::Unsupported => {
                self.new_writable_file(path).map(LogFile::Buffered)
            }
            Err(err) => {
                // Best effort: the creation already failed.
                let _ = std::fs::remove_file(path);
                Err(io_error("creating", path, err))
            }
        }
    }

    fn new_direct_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(super::direct_io::DirectWritableFile::create(
            path,
        )?))
    }

    fn new_direct_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccess>> {
        Ok(Arc::new(super::direct_io::DirectRandomAccessFile::open(
            path,
        )?))
    }

    fn check_direct_io(&self, dir: &Path) -> Result<()> {
        super::direct_io::probe_direct_io(dir)
    }

    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| io_error("opening for append", path, e))?;
        Ok(writable(file))
    }

    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn Read + Send>> {
        let file = File::open(path).map_err(|e| io_error("opening", path, e))?;
        Ok(Box::new(file))
    }

    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccess>> {
        let file = File::open(path).map_err(|e| io_error("opening", path, e))?;
        // Map the file, as LevelDB 1.23 does for tables: a read is then a
        // copy from the page cache without a system call. Files this engine
        // reads at random are never written again, so the mapping stays
        // valid; a file that cannot be mapped (empty, or mmap refused) is
        // read with pread instead.
        let len = file
            .metadata()
            .map_err(|e| io_error("reading the size of", path, e))?
            .len();
        if len > 0 {
            // SAFETY: the mapping is read-only and the engine never
            // truncates or rewrites a file after opening it for random
            // access (tables are immutable once written).
            if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                return Ok(Arc::new(MappedFile(Bytes::from_owner(map))));
            }
        }
        Ok(Arc::new(file))
    }

    fn file_exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn children(&self, dir: &Path) -> Result<Vec<String>> {
        let entries = std::fs::read_dir(dir).map_err(|e| io_error("listing", dir, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error("listing", dir, e))?;
            // A name that is not UTF-8 cannot be one of the database's files.
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| io_error("removing", path, e))
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| io_error("creating directory", dir, e))
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        std::fs::remove_dir(dir).map_err(|e| io_error("removing directory", dir, e))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let metadata = std::fs::metadata(path).map_err(|e| io_error("reading size of", path, e))?;
        Ok(metadata.len())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::NotFound(from.display().to_string())
            } else {
                Error::io(
                    format!("renaming {} to {}", from.display(), to.display()),
                    e,
                )
            }
        })
    }

    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        // Held across the whole call so that two threads cannot both pass the
        // in-process check.
        let mut table = locked_files();
        // Checked before opening: opening and closing a descriptor of a file
        // this process has locked would silently release the lock.
        if let Ok(metadata) = std::fs::metadata(path) {
            if table.contains(&file_key(&metadata)) {
                return Err(busy(path, "this process"));
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_error("opening lock file", path, e))?;
        let key = file_key(
            &file
                .metadata()
                .map_err(|e| io_error("inspecting", path, e))?,
        );
        if table.contains(&key) {
            // The path was switched to a locked file between the two looks.
            // Closing this descriptor would drop that lock, so it is kept
            // open for the life of the process instead.
            std::mem::forget(file);
            return Err(busy(path, "this process"));
        }
        if let Err(e) = set_record_lock(&file, true) {
            return Err(match e.raw_os_error() {
                Some(libc::EACCES | libc::EAGAIN) => busy(path, "another process"),
                _ => io_error("locking", path, e),
            });
        }
        table.insert(key);
        Ok(Box::new(PosixFileLock {
            file: Some(file),
            key,
        }))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let handle = File::open(dir).map_err(|e| io_error("opening directory", dir, e))?;
        handle
            .sync_all()
            .map_err(|e| io_error("syncing directory", dir, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Set in the child process of [`lock_conflicts_across_processes`]: the
    /// path of the lock file to try.
    const CHILD_LOCK_PATH: &str = "SHALE_TEST_CHILD_LOCK_PATH";

    /// Does nothing unless run as the child of
    /// [`lock_conflicts_across_processes`]; then tries the lock and prints
    /// what happened.
    #[test]
    fn lock_probe_in_child_process() {
        let Some(path) = std::env::var_os(CHILD_LOCK_PATH) else {
            return;
        };
        match PosixEnv::new().lock_file(Path::new(&path)) {
            Ok(_held) => println!("CHILD-RESULT:locked"),
            Err(Error::Busy(_)) => println!("CHILD-RESULT:busy"),
            Err(other) => println!("CHILD-RESULT:error {other}"),
        }
    }

    fn probe_from_child(path: &Path) -> String {
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "env::posix::tests::lock_probe_in_child_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_LOCK_PATH, path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "child failed: {stdout}");
        stdout
            .lines()
            // The harness prints the test's name on the same line.
            .find_map(|line| Some(line.split_once("CHILD-RESULT:")?.1))
            .unwrap_or_else(|| panic!("child printed no result: {stdout}"))
            .to_string()
    }

    /// The lock is an `fcntl` record lock: another process is refused while
    /// this one holds it, and gets it once it is released.
    #[test]
    fn lock_conflicts_across_processes() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("LOCK");
        let held = PosixEnv::new().lock_file(&path).unwrap();
        assert_eq!(probe_from_child(&path), "busy");
        drop(held);
        assert_eq!(probe_from_child(&path), "locked");
    }

    /// A refused second lock in this process must not release the first:
    /// POSIX locks vanish when any descriptor of the file is closed.
    #[test]
    fn refused_lock_in_process_keeps_the_first() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("LOCK");
        let env = PosixEnv::new();
        let held = env.lock_file(&path).unwrap();
        let other_spelling = tmp.path().join(".").join("LOCK");
        assert!(matches!(
            env.lock_file(&other_spelling),
            Err(Error::Busy(_))
        ));
        assert_eq!(probe_from_child(&path), "busy");
        drop(held);
        drop(env.lock_file(&other_spelling).unwrap());
    }

    #[test]
    fn writes_are_buffered_until_flush_or_sync() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let env = PosixEnv::new();
        let mut file = env.new_writable_file(&path).unwrap();
        file.write_all(b"abc").unwrap();
        assert_eq!(env.file_size(&path).unwrap(), 0);
        file.sync().unwrap();
        assert_eq!(env.file_size(&path).unwrap(), 3);
        file.write_all(b"de").unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), b"abcde");
    }

    #[test]
    fn reserving_allocates_the_space_and_keeps_the_size() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let env = PosixEnv::new();
        let mut file = env.new_writable_file(&path).unwrap();
        file.reserve(1 << 20).unwrap();
        assert_eq!(env.file_size(&path).unwrap(), 0, "the size stays");
        let allocated = std::fs::metadata(&path).unwrap().blocks() * 512;
        // Where the file system reserves at all (ext4, xfs, tmpfs do).
        let probe = std::fs::File::create(tmp.path().join("probe")).unwrap();
        let supported = super::super::log_file::reserve_without_growing(&probe, 4096).is_ok();
        eprintln!("fallocate supported here: {supported}");
        if supported {
            assert!(allocated >= 1 << 20, "{allocated} bytes allocated");
        }
        file.write_all(&[7u8; 5000]).unwrap();
        file.sync().unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 5000]);
        // A file system with no room for it says so.
        let mut file = env.new_writable_file(&tmp.path().join("g")).unwrap();
        if supported {
            let free = super::super::log_file::free_bytes(&probe).unwrap();
            let err = file.reserve(free + (1 << 30)).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        }
    }

    #[test]
    fn errors_name_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let env = PosixEnv::new();
        let dir_as_file = tmp.path().to_path_buf();
        let err = env.new_writable_file(&dir_as_file).err().unwrap();
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
        assert!(
            err.to_string().contains(&dir_as_file.display().to_string()),
            "{err}"
        );
    }
}
