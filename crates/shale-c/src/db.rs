//! `leveldb_t` and the operations on a database: open, close, reads,
//! writes, snapshots' owner, properties, sizes, compaction, destroy and
//! repair (LevelDB's `db/c.cc`, "DB operations" and "Management
//! operations").

use std::ffi::c_char;
use std::path::PathBuf;

use shale::{Error, DB};

pub use crate::handles::leveldb_t;
use crate::iterator::leveldb_iterator_t;
use crate::options::{
    leveldb_options_t, leveldb_readoptions_t, leveldb_writeoptions_t, options_ref,
};
use crate::status::{
    bytes, c_str, into_malloced, malloc_c_string, no_errptr, with_errptr, Failure,
};
use crate::write_batch::leveldb_writebatch_t;

/// The database a call names, checked for null.
pub(crate) fn db_ref<'a>(db: *mut leveldb_t) -> Result<&'a leveldb_t, Failure> {
    // SAFETY: null or a pointer from leveldb_open, not closed.
    unsafe { db.as_ref() }.ok_or_else(|| Failure::null("db"))
}

/// A database path from a C string.
fn path(name: *const c_char) -> Result<PathBuf, Failure> {
    // SAFETY: the caller passes null or a NUL-terminated string.
    unsafe { c_str(name) }
        .map(PathBuf::from)
        .ok_or_else(|| Failure::null("name"))
}

/// Opens (with `create_if_missing`, creates) the database in directory
/// `name`. NULL with a message in `*errptr` on failure.
#[no_mangle]
pub unsafe extern "C" fn leveldb_open(
    options: *const leveldb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) -> *mut leveldb_t {
    // SAFETY: the caller's errptr.
    unsafe {
        with_errptr(errptr, std::ptr::null_mut(), || {
            let options = options_ref(options)?;
            if let Some(message) = &options.executor_error {
                return Err(Error::InvalidArgument(message.clone()).into());
            }
            let options = options.options.clone();
            let db = DB::open(path(name)?, options).map_err(|error| match error {
                // LevelDB reports a missing database (create_if_missing
                // off) as an invalid argument, and programs test for it.
                Error::NotFound(message) => Error::InvalidArgument(message),
                other => other,
            })?;
            Ok(Box::into_raw(Box::new(leveldb_t { db })))
        })
    }
}

/// Closes the database: waits for the background work in progress, then
/// releases the `LOCK`. Iterators and snapshots must be destroyed first.
#[no_mangle]
pub unsafe extern "C" fn leveldb_close(db: *mut leveldb_t) {
    if !db.is_null() {
        // SAFETY: a pointer from leveldb_open, closed once.
        no_errptr((), || drop(unsafe { Box::from_raw(db) }));
    }
}

/// Sets `key` to `value`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_put(
    db: *mut leveldb_t,
    options: *const leveldb_writeoptions_t,
    key: *const c_char,
    key_len: usize,
    value: *const c_char,
    value_len: usize,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's pointers and lengths.
    unsafe {
        with_errptr(errptr, (), || {
            let options = options.as_ref().ok_or_else(|| Failure::null("options"))?;
            db_ref(db)?.db.put(
                &options.options,
                bytes(key, key_len),
                bytes(value, value_len),
            )?;
            Ok(())
        })
    }
}

/// Removes `key` (not an error when it is absent).
#[no_mangle]
pub unsafe extern "C" fn leveldb_delete(
    db: *mut leveldb_t,
    options: *const leveldb_writeoptions_t,
    key: *const c_char,
    key_len: usize,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's pointers and lengths.
    unsafe {
        with_errptr(errptr, (), || {
            let options = options.as_ref().ok_or_else(|| Failure::null("options"))?;
            db_ref(db)?
                .db
                .delete(&options.options, bytes(key, key_len))?;
            Ok(())
        })
    }
}

/// Applies `batch` atomically. The batch is left as it was.
#[no_mangle]
pub unsafe extern "C" fn leveldb_write(
    db: *mut leveldb_t,
    options: *const leveldb_writeoptions_t,
    batch: *mut leveldb_writebatch_t,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's pointers.
    unsafe {
        with_errptr(errptr, (), || {
            let options = options.as_ref().ok_or_else(|| Failure::null("options"))?;
            let batch = batch.as_ref().ok_or_else(|| Failure::null("batch"))?;
            if let Some(error) = &batch.error {
                return Err(Failure::Engine(error.clone()));
            }
            db_ref(db)?
                .db
                .write(&options.options, batch.batch.clone())?;
            Ok(())
        })
    }
}

/// The value of `key`: a `malloc`ed buffer holding its bytes (free with
/// `leveldb_free`) and its length in `*value_len`; NULL with `*value_len`
/// 0 when the key is absent (not an error) or on error. The buffer is the
/// one the engine read the value into, handed over without a second copy.
#[no_mangle]
pub unsafe extern "C" fn leveldb_get(
    db: *mut leveldb_t,
    options: *const leveldb_readoptions_t,
    key: *const c_char,
    key_len: usize,
    value_len: *mut usize,
    errptr: *mut *mut c_char,
) -> *mut c_char {
    if !value_len.is_null() {
        // SAFETY: the caller's size_t.
        unsafe { *value_len = 0 };
    }
    // SAFETY: the caller's pointers and lengths.
    unsafe {
        with_errptr(errptr, std::ptr::null_mut(), || {
            let options = options.as_ref().ok_or_else(|| Failure::null("options"))?;
            match db_ref(db)?.db.get(&options.options, bytes(key, key_len))? {
                None => Ok(std::ptr::null_mut()),
                Some(value) => {
                    if !value_len.is_null() {
                        *value_len = value.len();
                    }
                    Ok(into_malloced(value))
                }
            }
        })
    }
}

/// An iterator over the database as `options` say (destroy it with
/// `leveldb_iter_destroy` before closing the database). NULL only for a
/// NULL database or options.
#[no_mangle]
pub unsafe extern "C" fn leveldb_create_iterator(
    db: *mut leveldb_t,
    options: *const leveldb_readoptions_t,
) -> *mut leveldb_iterator_t {
    // SAFETY: null or pointers this library returned.
    let (Ok(db), Some(options)) = (db_ref(db), unsafe { options.as_ref() }) else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(leveldb_iterator_t {
            iter: db.db.iter(&options.options),
        }))
    })
}

/// The value of a property as a `malloc`ed string (free with
/// `leveldb_free`), NULL for an unknown name. LevelDB's names
/// (`leveldb.stats`, `leveldb.num-files-at-level<N>`, `leveldb.sstables`,
/// `leveldb.approximate-memory-usage`) and ShaleDB's (`shale.*`).
#[no_mangle]
pub unsafe extern "C" fn leveldb_property_value(
    db: *mut leveldb_t,
    name: *const c_char,
) -> *mut c_char {
    // SAFETY: null or a NUL-terminated string.
    let (Ok(db), Some(name)) = (db_ref(db), unsafe { c_str(name) }) else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || match db.db.property(&name) {
        Some(value) => malloc_c_string(&value),
        None => std::ptr::null_mut(),
    })
}

/// The approximate bytes on disk of each range `[start[i], limit[i])`,
/// written to `sizes[i]`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_approximate_sizes(
    db: *mut leveldb_t,
    num_ranges: libc::c_int,
    range_start_key: *const *const c_char,
    range_start_key_len: *const usize,
    range_limit_key: *const *const c_char,
    range_limit_key_len: *const usize,
    sizes: *mut u64,
) {
    let Ok(db) = db_ref(db) else { return };
    let count = usize::try_from(num_ranges).unwrap_or(0);
    let arrays_given = !(range_start_key.is_null()
        || range_start_key_len.is_null()
        || range_limit_key.is_null()
        || range_limit_key_len.is_null());
    if count == 0 || sizes.is_null() || !arrays_given {
        return;
    }
    no_errptr((), || {
        // SAFETY: the caller passes `num_ranges` entries in each array.
        let ranges: Vec<(&[u8], &[u8])> = (0..count)
            .map(|i| unsafe {
                (
                    bytes(*range_start_key.add(i), *range_start_key_len.add(i)),
                    bytes(*range_limit_key.add(i), *range_limit_key_len.add(i)),
                )
            })
            .collect();
        for (i, size) in db.db.approximate_sizes(&ranges).into_iter().enumerate() {
            // SAFETY: `sizes` holds `num_ranges` entries.
            unsafe { *sizes.add(i) = size };
        }
    })
}

/// Compacts the key range `[start, limit]`; a NULL `start` is before every
/// key and a NULL `limit` after every key. Returns when done. Errors are not
/// reported (LevelDB's `CompactRange` has no status either); they show in
/// the next write.
#[no_mangle]
pub unsafe extern "C" fn leveldb_compact_range(
    db: *mut leveldb_t,
    start_key: *const c_char,
    start_key_len: usize,
    limit_key: *const c_char,
    limit_key_len: usize,
) {
    let Ok(db) = db_ref(db) else { return };
    // SAFETY: the caller's ranges.
    let start = (!start_key.is_null()).then(|| unsafe { bytes(start_key, start_key_len) });
    let limit = (!limit_key.is_null()).then(|| unsafe { bytes(limit_key, limit_key_len) });
    no_errptr((), || {
        let _ = db.db.compact_range(start, limit);
    })
}

/// Deletes the database in `name` and its files. A missing database is
/// not an error; an open one is.
#[no_mangle]
pub unsafe extern "C" fn leveldb_destroy_db(
    options: *const leveldb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's errptr.
    unsafe {
        with_errptr(errptr, (), || {
            let options = &options_ref(options)?.options;
            match shale::destroy(path(name)?, options) {
                Ok(()) | Err(Error::NotFound(_)) => Ok(()),
                Err(error) => Err(error.into()),
            }
        })
    }
}

/// Rebuilds the database in `name` from the files in its directory
/// (LevelDB's `RepairDB`): what was lost is written to its `LOG`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_repair_db(
    options: *const leveldb_options_t,
    name: *const c_char,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's errptr.
    unsafe {
        with_errptr(errptr, (), || {
            let options = &options_ref(options)?.options;
            shale::repair(path(name)?, options)?;
            Ok(())
        })
    }
}
