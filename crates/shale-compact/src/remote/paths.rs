//! The names a job's files go by: the staging directory, its sessions, and
//! table files. Where a worker may open them is [`super::fs`]'s business.

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
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
}
