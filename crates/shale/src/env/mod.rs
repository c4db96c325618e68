//! The file-system interface the engine uses for every file it touches, so
//! that tests can swap the real disk for memory or for a disk that loses
//! power on command.
//!
//! * [`PosixEnv`]: the real file system, with LevelDB-compatible `LOCK`
//!   locking (POSIX record locks).
//! * [`MemEnv`]: everything in memory, for fast tests.
//! * [`FaultInjectionEnv`]: wraps another `Env`; injects I/O errors and
//!   simulates power loss by dropping what was never made durable.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{
    Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

mod direct_io;
mod fault;
mod log_file;
mod mem;
mod posix;

pub use direct_io::{probe_direct_io, DIRECT_IO_ALIGNMENT};
pub use fault::FaultInjectionEnv;
pub use log_file::{DirectRegion, LogFile, MappedLog};
pub use mem::MemEnv;
pub use posix::PosixEnv;

/// A file being written. Dropping it closes it; only [`WritableFile::sync`]
/// makes data durable.
pub trait WritableFile: Write + Send {
    /// Flushes buffers and makes the written data durable (fdatasync / fsync).
    fn sync(&mut self) -> std::io::Result<()>;

    /// Says the file will hold at least `len` bytes: a file system may
    /// reserve their space now, without changing the file's size. A hint:
    /// by default, and where the file system cannot reserve, it does
    /// nothing; a disk without room for them is an error.
    fn reserve(&mut self, len: u64) -> std::io::Result<()> {
        let _ = len;
        Ok(())
    }
}

/// [`WritableFile::reserve`] for a file of a real file system: a disk (or
/// quota) without room is an error; anything else that stops a reservation
/// (a file system without `fallocate`, a FUSE one that refuses the mode)
/// leaves the writes to allocate as they go.
fn reserve_file(file: &std::fs::File, len: u64) -> std::io::Result<()> {
    match log_file::reserve_without_growing(file, len) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => Err(e),
        _ => Ok(()),
    }
}

/// A held lock on a file (the database's `LOCK`), released on drop.
pub trait FileLock: Send + Sync + std::fmt::Debug {}

/// Everything the engine does with files and directories.
///
/// Errors name the path in their context; a file or directory that does not
/// exist gives [`Error::NotFound`] with the path.
pub trait Env: Send + Sync + std::fmt::Debug + 'static {
    /// Creates `path`, or truncates it when it exists, for writing.
    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates `path`, or truncates it when it exists, for a write-ahead
    /// log expected to grow to about `expected_len` bytes. By default a
    /// [`WritableFile`] flushed after each record; [`PosixEnv`] maps it and
    /// reserves its space ahead ([`MappedLog`]).
    fn new_log_file(&self, path: &Path, expected_len: u64) -> Result<LogFile> {
        let _ = expected_len;
        Ok(LogFile::Buffered(self.new_writable_file(path)?))
    }
    /// Opens `path` for appending, creating it when it does not exist.
    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens `path` for reading from the start.
    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn Read + Send>>;
    /// Opens `path` for reads at any offset, shareable between threads.
    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccess>>;
    /// True when `path` names an existing file or directory.
    fn file_exists(&self, path: &Path) -> bool;
    /// The names (not paths) of the entries in `dir`, in no particular order.
    fn children(&self, dir: &Path) -> Result<Vec<String>>;
    /// Deletes the file `path`.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Creates `dir` and any missing parents; an existing directory is fine.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Deletes the empty directory `dir`.
    fn remove_dir(&self, dir: &Path) -> Result<()>;
    /// The size of the file `path` in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Renames `from` to `to`, atomically replacing `to` when it exists.
    /// The new name is durable only after [`Env::sync_dir`] of its directory.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Locks `path` (creating it when missing) for exclusive use by this
    /// handle; [`Error::Busy`] when another handle, in this process or
    /// another, holds it.
    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Makes the entries of `dir` (files created, renamed or removed in it)
    /// durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// [`Env::new_writable_file`] with direct I/O (`O_DIRECT`, bypassing
    /// the page cache); [`Error::NotSupported`] where there is none.
    fn new_direct_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Err(Error::NotSupported(format!(
            "{}: this Env has no direct I/O",
            path.display()
        )))
    }
    /// [`Env::new_random_access_file`] with direct I/O;
    /// [`Error::NotSupported`] where there is none.
    fn new_direct_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccess>> {
        Err(Error::NotSupported(format!(
            "{}: this Env has no direct I/O",
            path.display()
        )))
    }
    /// Checks that files in `dir` can be written and read with direct I/O.
    fn check_direct_io(&self, dir: &Path) -> Result<()> {
        Err(Error::NotSupported(format!(
            "{}: this Env has no direct I/O",
            dir.display()
        )))
    }
}

/// The process-wide [`PosixEnv`], as LevelDB's `Env::Default()`.
pub fn default_env() -> Arc<dyn Env> {
    static DEFAULT: OnceLock<Arc<dyn Env>> = OnceLock::new();
    Arc::clone(DEFAULT.get_or_init(|| Arc::new(PosixEnv::new())))
}

/// Reads the whole file `path`.
pub fn read_file(env: &dyn Env, path: &Path) -> Result<Vec<u8>> {
    let mut file = env.new_sequential_file(path)?;
    let mut contents = Vec::new();
    file.read_to_end(&mut contents)
        .map_err(|e| io_error("reading", path, e))?;
    Ok(contents)
}

/// Writes `contents` to `path`, replacing what was there, and syncs it when
/// `sync` is set. On failure the partly written file is removed, as LevelDB's
/// `WriteStringToFile` does.
pub fn write_file(env: &dyn Env, path: &Path, contents: &[u8], sync: bool) -> Result<()> {
    let result = (|| {
        let mut file = env.new_writable_file(path)?;
        file.write_all(contents)
            .and_then(|()| file.flush())
            .map_err(|e| io_error("writing", path, e))?;
        if sync {
            file.sync().map_err(|e| io_error("syncing", path, e))?;
        }
        Ok(())
    })();
    if result.is_err() {
        // Best effort: the write already failed, and that is the error to report.
        let _ = env.remove_file(path);
    }
    result
}

/// Maps an I/O error on `path` to the engine's error: a missing file becomes
/// [`Error::NotFound`], anything else [`Error::Io`] with "`action` `path`".
pub(crate) fn io_error(action: &str, path: &Path, err: std::io::Error) -> Error {
    if err.kind() == std::io::ErrorKind::NotFound {
        Error::NotFound(path.display().to_string())
    } else {
        Error::io(format!("{action} {}", path.display()), err)
    }
}

/// Locks a mutex, ignoring poisoning: the data these mutexes guard (file
/// bytes, bookkeeping sets) stays consistent even when a holder panicked.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks an `RwLock`, ignoring poisoning (see [`lock`]).
pub(crate) fn read_lock<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    rwlock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks an `RwLock`, ignoring poisoning (see [`lock`]).
pub(crate) fn write_lock<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    rwlock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    //! One conformance harness, run over every `Env`.

    use super::*;
    use std::path::PathBuf;

    fn sorted_children(env: &dyn Env, dir: &Path) -> Vec<String> {
        let mut names = env.children(dir).unwrap();
        names.sort();
        names
    }

    fn conformance(env: &dyn Env, root: &Path) {
        let dir = root.join("db");
        env.create_dir_all(&dir).unwrap();
        env.create_dir_all(&dir).unwrap();
        assert!(env.file_exists(&dir));
        assert!(sorted_children(env, &dir).is_empty());

        // Write, read back sequentially and at offsets.
        let a = dir.join("a");
        let mut file = env.new_writable_file(&a).unwrap();
        file.write_all(b"hello ").unwrap();
        file.write_all(b"world").unwrap();
        file.sync().unwrap();
        drop(file);
        assert!(env.file_exists(&a));
        assert_eq!(env.file_size(&a).unwrap(), 11);
        assert_eq!(read_file(env, &a).unwrap(), b"hello world");
        let random = env.new_random_access_file(&a).unwrap();
        let mut buf = [0u8; 5];
        random.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        assert!(random.read_exact_at(&mut buf, 7).is_err());

        // Appendable appends; writable truncates.
        let mut file = env.new_appendable_file(&a).unwrap();
        file.write_all(b"!").unwrap();
        file.flush().unwrap();
        drop(file);
        assert_eq!(read_file(env, &a).unwrap(), b"hello world!");
        let b = dir.join("b");
        let mut file = env.new_appendable_file(&b).unwrap();
        file.write_all(b"new").unwrap();
        drop(file);
        assert_eq!(read_file(env, &b).unwrap(), b"new");
        write_file(env, &b, b"xy", true).unwrap();
        assert_eq!(read_file(env, &b).unwrap(), b"xy");
        assert_eq!(sorted_children(env, &dir), ["a", "b"]);

        // Rename replaces the target.
        env.rename(&a, &b).unwrap();
        assert!(!env.file_exists(&a));
        assert_eq!(read_file(env, &b).unwrap(), b"hello world!");
        env.sync_dir(&dir).unwrap();
        assert_eq!(sorted_children(env, &dir), ["b"]);

        // Missing things are NotFound.
        let missing = dir.join("missing");
        for err in [
            env.new_sequential_file(&missing).err().unwrap(),
            env.new_random_access_file(&missing).err().unwrap(),
            env.file_size(&missing).unwrap_err(),
            env.remove_file(&missing).unwrap_err(),
            env.rename(&missing, &a).unwrap_err(),
            env.children(&missing).unwrap_err(),
        ] {
            assert!(
                matches!(&err, Error::NotFound(p) if p.contains("missing")),
                "{err:?}"
            );
        }

        // The lock is exclusive and released on drop.
        let lock_path = dir.join("LOCK");
        let held = env.lock_file(&lock_path).unwrap();
        assert!(env.file_exists(&lock_path));
        let err = env.lock_file(&lock_path).unwrap_err();
        assert!(matches!(err, Error::Busy(_)), "{err:?}");
        drop(held);
        let again = env.lock_file(&lock_path).unwrap();
        drop(again);

        // Removal, then the directory itself.
        env.remove_file(&b).unwrap();
        env.remove_file(&lock_path).unwrap();
        assert!(!env.file_exists(&b));
        assert!(sorted_children(env, &dir).is_empty());
        env.remove_dir(&dir).unwrap();
        assert!(!env.file_exists(&dir));
    }

    #[test]
    fn posix_env_conformance() {
        let tmp = tempfile::tempdir().unwrap();
        conformance(&PosixEnv::new(), tmp.path());
    }

    #[test]
    fn mem_env_conformance() {
        conformance(&MemEnv::new(), Path::new("/mem"));
    }

    #[test]
    fn fault_env_conformance_over_mem() {
        conformance(
            &FaultInjectionEnv::new(Arc::new(MemEnv::new())),
            Path::new("/mem"),
        );
    }

    #[test]
    fn fault_env_conformance_over_posix() {
        let tmp = tempfile::tempdir().unwrap();
        conformance(&FaultInjectionEnv::new(default_env()), tmp.path());
    }

    #[test]
    fn write_file_removes_partial_file_on_failure() {
        let env = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
        let path = PathBuf::from("/db/x");
        env.set_fail_syncs(true);
        assert!(matches!(
            write_file(&env, &path, b"abc", true),
            Err(Error::Io { .. })
        ));
        assert!(!env.file_exists(&path));
    }
}
