//! Where a worker may touch files: only under its root. A job names its
//! database directory as a path (relative to the root, or absolute inside
//! it) and its tables by number; every path is resolved with symlinks
//! followed and must still lie under the root, so `..`, absolute paths
//! elsewhere and symlinks that leave the root are refused before any file
//! is opened.

use std::hash::{BuildHasher, Hasher};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The directory inside a database that holds the workers' staged outputs,
/// one subdirectory per attempt (`staging/<session>/`).
pub const STAGING_DIR: &str = "staging";

/// The staging directory of `session` in database `db`.
pub fn staging_dir(db: &Path, session: &str) -> PathBuf {
    db.join(STAGING_DIR).join(session)
}

/// True for a session name: 32 lowercase hex digits.
pub fn valid_session(session: &str) -> bool {
    session.len() == 32
        && session
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A fresh session name: unique per process and attempt (a random seed
/// from the standard library's hasher keys, the process id, a counter and
/// the time), so a restarted worker's leftovers never match a new attempt.
pub fn new_session() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    hasher.write_u128(nanos);
    let high = hasher.finish();
    hasher.write_u64(high);
    format!("{high:016x}{:016x}", hasher.finish())
}

/// The name of table `number` as `.ldb` and as LevelDB's older `.sst`.
pub fn table_names(number: u64) -> [String; 2] {
    [format!("{number:06}.ldb"), format!("{number:06}.sst")]
}

/// A worker's root directory, resolved once.
#[derive(Debug, Clone)]
pub struct Root {
    canonical: PathBuf,
}

impl Root {
    /// The root at `path`, which must be an existing directory.
    pub fn new(path: &Path) -> std::io::Result<Root> {
        let canonical = path.canonicalize().map_err(|e| {
            std::io::Error::new(e.kind(), format!("worker root {}: {e}", path.display()))
        })?;
        if !canonical.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("worker root {} is not a directory", path.display()),
            ));
        }
        Ok(Root { canonical })
    }

    /// The resolved root.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// `path` with symlinks resolved, when it lies under the root.
    pub fn contain(&self, path: &Path) -> Result<PathBuf, String> {
        let resolved = path
            .canonicalize()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if resolved.starts_with(&self.canonical) {
            Ok(resolved)
        } else {
            Err(format!(
                "{} leads outside the worker's root {}",
                path.display(),
                self.canonical.display()
            ))
        }
    }

    /// The database directory a job names: relative to the root or
    /// absolute inside it, without `..`, resolving to a directory under the
    /// root.
    pub fn database(&self, db_path: &str) -> Result<PathBuf, String> {
        if db_path.is_empty() {
            return Err("the job names no database directory".to_string());
        }
        if db_path.contains('\0') {
            return Err("the database path holds a NUL byte".to_string());
        }
        let path = Path::new(db_path);
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(format!("the database path {db_path:?} holds \"..\""));
        }
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.canonical.join(path)
        };
        let resolved = self.contain(&joined)?;
        if !resolved.is_dir() {
            return Err(format!("{db_path:?} is not a directory"));
        }
        Ok(resolved)
    }

    /// Table `number` of database `db` (`.ldb`, else `.sst`), resolved and
    /// under the root.
    pub fn table(&self, db: &Path, number: u64) -> Result<PathBuf, String> {
        let [ldb, sst] = table_names(number);
        let path = if db.join(&ldb).symlink_metadata().is_ok() {
            db.join(ldb)
        } else if db.join(&sst).symlink_metadata().is_ok() {
            db.join(sst)
        } else {
            return Err(format!("table {ldb} is not in {}", db.display()));
        };
        let resolved = self.contain(&path)?;
        if !resolved.is_file() {
            return Err(format!("{} is not a file", path.display()));
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn sessions_are_hex_and_distinct() {
        let a = new_session();
        let b = new_session();
        assert!(valid_session(&a) && valid_session(&b), "{a} {b}");
        assert_ne!(a, b);
        assert!(!valid_session("../../etc"));
        assert!(!valid_session(&"A".repeat(32)));
    }

    #[test]
    fn paths_stay_under_the_root() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        std::fs::create_dir(dir.path().join("db")).unwrap();
        std::fs::write(dir.path().join("db/000005.ldb"), b"x").unwrap();
        std::fs::write(outside.path().join("000007.ldb"), b"x").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("000007.ldb"),
            dir.path().join("db/000007.ldb"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).unwrap();

        let db = root.database("db").unwrap();
        assert_eq!(db, root.path().join("db"));
        let absolute = root.path().join("db");
        assert_eq!(root.database(absolute.to_str().unwrap()).unwrap(), db);
        assert!(root.table(&db, 5).is_ok());
        assert!(root.table(&db, 6).unwrap_err().contains("not in"));
        assert!(root.table(&db, 7).unwrap_err().contains("outside"));
        assert!(root.database("db/../..").unwrap_err().contains(".."));
        assert!(root.database("/etc").unwrap_err().contains("outside"));
        assert!(root.database("escape").unwrap_err().contains("outside"));
        assert!(root.database("").is_err());
        assert!(root
            .database("db/000005.ldb")
            .unwrap_err()
            .contains("not a directory"));
        assert!(root.database("missing").is_err());
    }
}
