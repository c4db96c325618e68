//! Local file access confined by file descriptor: the worker opens its root
//! once and reaches every file through descriptors beneath it, never by a
//! path it checked earlier (the root itself is the worker crate's
//! `root.rs`). A path is resolved with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it (5.6 and
//! later), else by walking it one component at a time with `openat(2)` and
//! `O_NOFOLLOW`; either way no symlink is followed (one that leads out of
//! the root or stays inside it), no `..` is taken, and a directory swapped
//! for a symlink between two calls leads nowhere. The engine uses the same
//! [`Dir`] to open a staged table without following a symlink a lying
//! worker put in its place.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `openat2` answered ENOSYS once (an old kernel or a seccomp
/// filter): from then on paths are walked with `openat`.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

fn cstring(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
}

/// `name` as one plain path component: not empty, not `.` or `..`, no `/`.
fn component(name: &str) -> io::Result<CString> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a plain file name"),
        ));
    }
    cstring(name.as_bytes())
}

/// `openat(dir, name, flags)` for one component.
fn openat(
    dir: RawFd,
    name: &CString,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; the returned descriptor is owned
    // by nobody else.
    let fd = unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is valid.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat2(dir, path, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`;
/// `None` when the kernel lacks the call.
fn openat2_beneath(dir: RawFd, path: &CString, flags: libc::c_int) -> Option<io::Result<OwnedFd>> {
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: open_how is plain data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: `path` is NUL-terminated and `how` is a valid open_how of the
    // size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ENOSYS) {
            NO_OPENAT2.store(true, Ordering::Relaxed);
            return None;
        }
        return Some(Err(err));
    }
    // SAFETY: the kernel returned a new descriptor.
    Some(Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
}

/// True when `name` in `dir` is a symlink (not followed).
fn is_symlink_at(dir: RawFd, name: &CString) -> bool {
    // SAFETY: a zeroed stat is valid storage that fstatat fills in.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated; `stat` is valid.
    let rc = unsafe { libc::fstatat(dir, name.as_ptr(), &mut stat, libc::AT_SYMLINK_NOFOLLOW) };
    rc == 0 && stat.st_mode & libc::S_IFMT == libc::S_IFLNK
}

/// A symlink met where a directory was asked for answers ENOTDIR or ELOOP,
/// depending on the call; both become ELOOP when it is a symlink, so the
/// caller hears "a symlink".
fn explain_not_dir(err: io::Error, dir: RawFd, name: &CString) -> io::Error {
    let code = err.raw_os_error();
    if (code == Some(libc::ENOTDIR) || code == Some(libc::ELOOP)) && is_symlink_at(dir, name) {
        io::Error::from_raw_os_error(libc::ELOOP)
    } else {
        err
    }
}

/// What `fstat` says of an open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Device and inode: the file itself, whatever its name.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Last modification, in nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// True for a regular file.
    pub regular: bool,
}

/// `fstat` of an open descriptor.
pub fn file_id(fd: &impl AsRawFd) -> io::Result<FileId> {
    // SAFETY: a zeroed stat is valid storage that fstat fills in.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for the call; `stat` is valid.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FileId {
        dev: stat.st_dev,
        ino: stat.st_ino,
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mtime_ns: i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec),
        regular: stat.st_mode & libc::S_IFMT == libc::S_IFREG,
    })
}

/// An open directory; every name below is resolved through it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// Opens the directory at `path` (the root, or a database directory the
    /// engine owns); symlinks in `path` itself are the caller's choice.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let name = cstring(path.as_os_str().as_bytes())?;
        let fd = openat(libc::AT_FDCWD, &name, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        Ok(Dir { fd })
    }

    /// The directory `relative` beneath this one, no symlink followed and
    /// no `..` taken. An empty path is this directory again.
    pub fn open_beneath(&self, relative: &Path) -> io::Result<Dir> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY;
        let parts: Vec<&std::ffi::OsStr> = relative
            .components()
            .filter_map(|c| match c {
                Component::Normal(part) => Some(Ok(part)),
                Component::CurDir => None,
                _ => Some(Err(())),
            })
            .collect::<Result<_, ()>>()
            .map_err(|()| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is not a relative path without \"..\"",
                        relative.display()
                    ),
                )
            })?;
        if parts.is_empty() {
            return self.open_dir(".");
        }
        let joined = cstring(relative.as_os_str().as_bytes())?;
        // On failure the path is walked again below, only to say which
        // component failed how.
        if let Some(Ok(fd)) = openat2_beneath(self.fd.as_raw_fd(), &joined, flags) {
            return Ok(Dir { fd });
        }
        // Walk: one component at a time, never following a symlink.
        let mut current = openat(self.fd.as_raw_fd(), &cstring(b".")?, flags, 0)?;
        for part in parts {
            let name = cstring(part.as_bytes())?;
            current = openat(current.as_raw_fd(), &name, flags | libc::O_NOFOLLOW, 0)
                .map_err(|e| explain_not_dir(e, current.as_raw_fd(), &name))?;
        }
        Ok(Dir { fd: current })
    }

    /// The subdirectory `name` (one component, not a symlink).
    pub fn open_dir(&self, name: &str) -> io::Result<Dir> {
        let name = if name == "." {
            cstring(b".")?
        } else {
            component(name)?
        };
        let fd = openat(
            self.fd.as_raw_fd(),
            &name,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )
        .map_err(|e| explain_not_dir(e, self.fd.as_raw_fd(), &name))?;
        Ok(Dir { fd })
    }

    /// The file `name` (one component, not a symlink), for reading.
    pub fn open_file(&self, name: &str) -> io::Result<File> {
        let fd = openat(
            self.fd.as_raw_fd(),
            &component(name)?,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
            0,
        )?;
        Ok(File::from(fd))
    }

    /// A new file `name` (fails if anything by that name exists).
    pub fn create_file(&self, name: &str) -> io::Result<File> {
        let fd = openat(
            self.fd.as_raw_fd(),
            &component(name)?,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            0o644,
        )?;
        Ok(File::from(fd))
    }

    /// Creates the subdirectory `name`; `Ok(false)` when it existed.
    pub fn create_dir(&self, name: &str) -> io::Result<bool> {
        let name = component(name)?;
        // SAFETY: `name` is NUL-terminated.
        if unsafe { libc::mkdirat(self.fd.as_raw_fd(), name.as_ptr(), 0o755) } == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::AlreadyExists {
            Ok(false)
        } else {
            Err(err)
        }
    }

    fn unlink(&self, name: &str, flags: libc::c_int) -> io::Result<()> {
        let name = component(name)?;
        // SAFETY: `name` is NUL-terminated.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), flags) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Removes the file (or symlink) `name`.
    pub fn remove_file(&self, name: &str) -> io::Result<()> {
        self.unlink(name, 0)
    }

    /// Removes the empty subdirectory `name`.
    pub fn remove_dir(&self, name: &str) -> io::Result<()> {
        self.unlink(name, libc::AT_REMOVEDIR)
    }

    /// Removes the subdirectory `name` and the files in it (one level: a
    /// staging session holds only files). Entries that are not files, such
    /// as a directory a hostile client planted, are left and reported.
    pub fn remove_tree(&self, name: &str) -> io::Result<()> {
        let sub = match self.open_dir(name) {
            Ok(sub) => sub,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::ELOOP)
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                return self.remove_file(name);
            }
            Err(e) => return Err(e),
        };
        for entry in sub.entries()? {
            let _ = sub.remove_file(&entry);
        }
        self.remove_dir(name)
    }

    /// The names in this directory, `.` and `..` left out.
    pub fn entries(&self) -> io::Result<Vec<String>> {
        // SAFETY: dup returns a new descriptor that fdopendir takes over.
        let dup = unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dup` is a valid directory descriptor owned by the stream.
        let stream = unsafe { libc::fdopendir(dup) };
        if stream.is_null() {
            let err = io::Error::last_os_error();
            // SAFETY: `dup` was not taken over.
            unsafe { libc::close(dup) };
            return Err(err);
        }
        // SAFETY: rewinding an open stream: the duplicate shares the offset.
        unsafe { libc::rewinddir(stream) };
        let mut names = Vec::new();
        loop {
            // SAFETY: `stream` is open; readdir returns null at the end.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: d_name is NUL-terminated inside the entry.
            let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
            let name = String::from_utf8_lossy(name.to_bytes()).into_owned();
            if name != "." && name != ".." {
                names.push(name);
            }
        }
        // SAFETY: closes the stream and `dup` with it.
        unsafe { libc::closedir(stream) };
        Ok(names)
    }

    /// `fstat` of the directory.
    pub fn id(&self) -> io::Result<FileId> {
        file_id(&self.fd)
    }

    /// `fsync` of the directory.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: the descriptor is open.
        if unsafe { libc::fsync(self.fd.as_raw_fd()) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    /// A directory holding a database `a/db` with a table, and symlinks
    /// planted in and out of it.
    fn fixture() -> (tempfile::TempDir, tempfile::TempDir, Dir) {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/db")).unwrap();
        std::fs::write(dir.path().join("a/db/000005.ldb"), b"x").unwrap();
        std::fs::write(outside.path().join("000007.ldb"), b"secret").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("000007.ldb"),
            dir.path().join("a/db/000007.ldb"),
        )
        .unwrap();
        std::os::unix::fs::symlink("000005.ldb", dir.path().join("a/db/000008.ldb")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("inside")).unwrap();
        let root = Dir::open(dir.path()).unwrap();
        (outside, dir, root)
    }

    fn both_ways(check: impl Fn()) {
        check();
        // And again with the component walk an old kernel gets.
        NO_OPENAT2.store(true, Ordering::Relaxed);
        check();
        NO_OPENAT2.store(false, Ordering::Relaxed);
    }

    #[test]
    fn paths_resolve_beneath_the_directory_without_symlinks() {
        let (_outside, _dir, root) = fixture();
        both_ways(|| {
            let db = root.open_beneath(Path::new("a/db")).unwrap();
            assert!(db.open_file("000005.ldb").is_ok());
            for (path, errno) in [
                ("escape", libc::ELOOP),
                ("inside/db", libc::ELOOP),
                ("a/db/000005.ldb", libc::ENOTDIR),
                ("missing", libc::ENOENT),
            ] {
                let err = root.open_beneath(Path::new(path)).unwrap_err();
                assert_eq!(err.raw_os_error(), Some(errno), "{path}: {err}");
            }
            for path in ["a/db/../..", "/etc"] {
                let err = root.open_beneath(Path::new(path)).unwrap_err();
                assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{path}: {err}");
            }
            let err = db.open_file("000007.ldb").unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
            let err = db.open_file("000008.ldb").unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
            assert!(db.open_file("../x").is_err());
        });
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_after_it_was_opened_leads_nowhere() {
        let (outside, dir, root) = fixture();
        let db = root.open_beneath(Path::new("a/db")).unwrap();
        // The opened descriptor still names the directory it opened, wherever
        // its name now points.
        std::fs::rename(dir.path().join("a/db"), dir.path().join("a/moved")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("a/db")).unwrap();
        assert!(db.open_file("000005.ldb").is_ok());
        let err = root.open_beneath(Path::new("a/db")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
        assert!(db.create_dir("staging").unwrap());
        assert!(dir.path().join("a/moved/staging").is_dir());
        assert!(!outside.path().join("staging").exists());
    }

    #[test]
    fn files_are_created_and_removed_through_the_directory() {
        let (_outside, _dir, root) = fixture();
        let db = root.open_beneath(Path::new("a/db")).unwrap();
        assert!(db.create_dir("s").unwrap());
        assert!(!db.create_dir("s").unwrap());
        let s = db.open_dir("s").unwrap();
        std::io::Write::write_all(&mut s.create_file("1.ldb").unwrap(), b"abc").unwrap();
        assert!(s.create_file("1.ldb").is_err());
        let id = file_id(&s.open_file("1.ldb").unwrap()).unwrap();
        assert!(id.regular);
        assert_eq!(id.size, 3);
        assert_eq!(s.entries().unwrap(), vec!["1.ldb".to_string()]);
        db.remove_tree("s").unwrap();
        assert!(db.open_dir("s").is_err());
        db.remove_tree("s").unwrap();
    }
}
