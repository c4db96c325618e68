//! The opaque handles that other modules' functions take: `leveldb_t`
//! (its operations are in `db.rs`) and `leveldb_snapshot_t` (in
//! `snapshot.rs`). They live below both, so that the options (which name
//! a snapshot) and the snapshots (which name a database) import them from
//! here rather than from each other's modules.

use shale::{Snapshot, DB};

/// An open database. Every function taking a `leveldb_t*` may be called
/// from several threads at once.
#[derive(Debug)]
pub struct leveldb_t {
    pub(crate) db: DB,
}

/// A snapshot, released with `leveldb_release_snapshot`.
#[derive(Debug)]
pub struct leveldb_snapshot_t {
    pub(crate) snapshot: Snapshot,
}
