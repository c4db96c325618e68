//! `leveldb_snapshot_t`: a consistent view of the database.

pub use crate::handles::leveldb_snapshot_t;
use crate::handles::leveldb_t;
use crate::status::no_errptr;

/// Takes a snapshot of the latest state. NULL for a NULL database.
#[no_mangle]
pub unsafe extern "C" fn leveldb_create_snapshot(db: *mut leveldb_t) -> *const leveldb_snapshot_t {
    // SAFETY: null or a pointer from leveldb_open, not closed.
    let Some(db) = (unsafe { db.as_ref() }) else {
        return std::ptr::null();
    };
    no_errptr(std::ptr::null(), || {
        Box::into_raw(Box::new(leveldb_snapshot_t {
            snapshot: db.db.snapshot(),
        }))
    })
}

/// Releases a snapshot. Read options that still name it keep reading as
/// of it (LevelDB leaves that undefined).
#[no_mangle]
pub unsafe extern "C" fn leveldb_release_snapshot(
    _db: *mut leveldb_t,
    snapshot: *const leveldb_snapshot_t,
) {
    if !snapshot.is_null() {
        // SAFETY: a pointer from leveldb_create_snapshot, released once.
        no_errptr((), || drop(unsafe { Box::from_raw(snapshot.cast_mut()) }));
    }
}
