//! Test support: the real LevelDB 1.23 library, reached through a small C++
//! shim (`shim/leveldb_shim.cc`), so that ShaleDB's tests and benchmarks can
//! compare its tables, filters, logs and MANIFESTs with LevelDB's own.
//!
//! Every operation is one FFI call over flat buffers, so a benchmark measures
//! LevelDB and not the glue.
//!
//! The build script links Debian's `libleveldb-dev` when it is installed.
//! When it is not, the crate still builds: [`available`] returns `false` and
//! every operation returns [`Error::Unavailable`]. With `SHALE_REQUIRE_ALL=1`
//! (set in CI; the workspace's one rule for tests that need something of
//! their machine, `shale_compact::testing`) a missing LevelDB fails the
//! build instead, and [`require`] panics, so compatibility tests fail
//! rather than silently skip.

mod bloom;
mod db;
mod flat;
mod table;

#[cfg(leveldb_available)]
mod ffi;
#[cfg(leveldb_available)]
use ffi as backend;

#[cfg(not(leveldb_available))]
mod unavailable;
#[cfg(not(leveldb_available))]
use unavailable as backend;

use std::path::Path;

pub use bloom::{bloom_create_filter, bloom_key_may_match};
pub use db::{Db, DbOptions};
pub use flat::FlatEntries;
pub use table::{build_table, build_table_flat, read_table, TableOptions};

/// The command that installs LevelDB 1.23 on Debian and Ubuntu.
pub const INSTALL_COMMAND: &str = "apt-get install -y --no-install-recommends libleveldb-dev";

/// A key and its value, as tables and databases return them.
pub type Entry = (Vec<u8>, Vec<u8>);

/// What went wrong in a call to LevelDB.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// This build of the crate has no LevelDB to call.
    #[error("LevelDB 1.23 is not available: install it ({INSTALL_COMMAND}) and rebuild")]
    Unavailable,
    /// LevelDB returned a non-OK status; the text is `Status::ToString()`,
    /// e.g. `"Corruption: block checksum mismatch"`.
    #[error("LevelDB: {0}")]
    LevelDb(String),
    /// The arguments cannot be handed to LevelDB (e.g. a path that is not
    /// UTF-8, or a key of 4 GiB or more).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Whether this build links LevelDB.
pub fn available() -> bool {
    cfg!(leveldb_available)
}

/// For tests: returns `true` if LevelDB is linked.
///
/// If it is not, panics when `SHALE_REQUIRE_ALL=1` (tests must fail, not
/// skip, in CI); otherwise prints a "skipping" line to stderr and returns
/// `false`, so a test can `if !leveldb_shim::require() { return; }`.
pub fn require() -> bool {
    if available() {
        return true;
    }
    if std::env::var_os("SHALE_REQUIRE_ALL").is_some_and(|value| value == "1") {
        panic!(
            "LevelDB 1.23 is required (SHALE_REQUIRE_ALL=1); install it with: {INSTALL_COMMAND}"
        );
    }
    eprintln!("skipping: LevelDB 1.23 not available (apt-get install libleveldb-dev)");
    false
}

/// Runs `leveldb::DumpFile` on a file and returns what it printed.
///
/// DumpFile chooses the parser from the file name, as LevelDB names files:
/// `NNNNNN.log` (write-ahead log records, decoded as write batches),
/// `MANIFEST-NNNNNN` (version edits) and `NNNNNN.ldb` / `NNNNNN.sst` (table
/// entries, whose keys must be internal keys; others print as `badkey`).
pub fn dump_file(path: &Path) -> Result<String, Error> {
    backend::dump_file(path_str(path)?)
}

/// Runs LevelDB's `RepairDB` (`leveldb_repair_db` of its C API) on the
/// database at `path`: every log turned into a table, every table scanned,
/// a new MANIFEST listing them all at level 0, damaged files moved to
/// `lost/`. LevelDB's default options, with `paranoid_checks` on so that
/// table blocks are read with their checksums verified.
pub fn repair_db(path: &Path) -> Result<(), Error> {
    backend::repair_db(path_str(path)?)
}

/// A path as LevelDB takes it: a C string, so UTF-8 here and free of NUL.
fn path_str(path: &Path) -> Result<&str, Error> {
    let text = path
        .to_str()
        .ok_or_else(|| Error::InvalidArgument(format!("path {path:?} is not UTF-8")))?;
    if text.contains('\0') {
        return Err(Error::InvalidArgument(format!(
            "path {path:?} contains NUL"
        )));
    }
    Ok(text)
}
