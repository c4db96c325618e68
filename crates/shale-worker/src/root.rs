//! The worker's root: the one directory tree it reads and writes, opened
//! once. A job names its database by a path the engine sees; the root turns
//! it into a directory opened beneath itself (`shale_compact::remote::fs`),
//! and an open error into words a client can act on.

use std::io;
use std::path::{Component, Path, PathBuf};

use shale_compact::remote::fs::Dir;

/// The worker's root, opened once: every database, table and staging
/// directory is reached through its descriptor.
#[derive(Debug)]
pub struct Root {
    dir: Dir,
    /// The root as configured and as resolved, to strip from absolute
    /// database paths (the engine sends the path it sees).
    given: PathBuf,
    canonical: PathBuf,
}

impl Root {
    /// The root at `path`, which must be an existing directory.
    pub fn open(path: &Path) -> io::Result<Root> {
        let with_path =
            |e: io::Error| io::Error::new(e.kind(), format!("worker root {}: {e}", path.display()));
        let dir = Dir::open(path).map_err(with_path)?;
        let canonical = path.canonicalize().map_err(with_path)?;
        let given = std::path::absolute(path).map_err(with_path)?;
        Ok(Root {
            dir,
            given,
            canonical,
        })
    }

    /// The resolved root, for messages.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// The root directory itself.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The database path a job names, relative to the root: a relative path
    /// as given, an absolute one with the root's prefix taken off. `..`, a
    /// NUL byte, an empty path and an absolute path elsewhere are refused.
    pub fn relative(&self, db_path: &str) -> Result<PathBuf, String> {
        if db_path.is_empty() {
            return Err("db_path: the job names no database directory".to_string());
        }
        if db_path.contains('\0') {
            return Err("db_path: the path holds a NUL byte".to_string());
        }
        let path = Path::new(db_path);
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(format!("db_path: {db_path:?} holds \"..\""));
        }
        if !path.is_absolute() {
            return Ok(path.to_path_buf());
        }
        for prefix in [&self.given, &self.canonical] {
            if let Ok(rest) = path.strip_prefix(prefix) {
                return Ok(rest.to_path_buf());
            }
        }
        Err(format!(
            "db_path: {db_path:?} lies outside the worker's root {}",
            self.canonical.display()
        ))
    }

    /// The database directory `db_path`, opened beneath the root.
    pub fn database(&self, db_path: &str) -> Result<Dir, String> {
        let relative = self.relative(db_path)?;
        self.dir
            .open_beneath(&relative)
            .map_err(|e| format!("db_path: {db_path:?}: {}", describe(&e)))
    }
}

/// An open error in words a client can act on.
pub fn describe(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(libc::ELOOP) => "a symlink (the worker follows none)".to_string(),
        Some(libc::EXDEV) => "leads outside the worker's root".to_string(),
        Some(libc::ENOTDIR) => "not a directory".to_string(),
        Some(libc::ENOENT) => "no such file or directory".to_string(),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_database_path_resolves_beneath_the_root_or_says_why_not() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/db")).unwrap();
        std::fs::write(dir.path().join("a/db/000005.ldb"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("inside")).unwrap();
        let root = Root::open(dir.path()).unwrap();
        let db = root.database("a/db").unwrap();
        assert!(db.open_file("000005.ldb").is_ok());
        let absolute = dir.path().join("a/db");
        assert!(root.database(absolute.to_str().unwrap()).is_ok());
        for (path, why) in [
            ("a/db/../..", ".."),
            ("/etc", "outside"),
            ("escape", "symlink"),
            ("inside/db", "symlink"),
            ("a/db/000005.ldb", "not a directory"),
            ("missing", "no such"),
            ("", "no database"),
        ] {
            let err = root.database(path).unwrap_err();
            assert!(err.contains(why), "{path}: {err}");
            assert!(err.starts_with("db_path"), "{path}: {err}");
        }
    }
}
