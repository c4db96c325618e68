//! `leveldb_writebatch_t`: updates applied together by `leveldb_write`.

use std::ffi::{c_char, c_void};

use shale::format::write_batch::BatchOp;
use shale::{Error, WriteBatch};

use crate::status::{bytes, no_errptr};

/// A write batch. A record the batch cannot hold (a key or value of 4 GiB
/// or more) is remembered and fails the `leveldb_write` of the batch:
/// LevelDB's batch functions have no `errptr`.
#[derive(Debug)]
pub struct leveldb_writebatch_t {
    pub(crate) batch: WriteBatch,
    pub(crate) error: Option<Error>,
}

fn with_batch(batch: *mut leveldb_writebatch_t, f: impl FnOnce(&mut leveldb_writebatch_t)) {
    // SAFETY: null or a pointer from leveldb_writebatch_create, used by one
    // thread at a time.
    if let Some(batch) = unsafe { batch.as_mut() } {
        no_errptr((), || f(batch));
    }
}

/// Creates an empty batch.
#[no_mangle]
pub extern "C" fn leveldb_writebatch_create() -> *mut leveldb_writebatch_t {
    Box::into_raw(Box::new(leveldb_writebatch_t {
        batch: WriteBatch::new(),
        error: None,
    }))
}

/// Destroys a batch.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_destroy(batch: *mut leveldb_writebatch_t) {
    if !batch.is_null() {
        // SAFETY: a pointer from leveldb_writebatch_create, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(batch) }));
    }
}

/// Empties the batch.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_clear(batch: *mut leveldb_writebatch_t) {
    with_batch(batch, |b| {
        b.batch.clear();
        b.error = None;
    })
}

/// Adds "set `key` to `value`".
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_put(
    batch: *mut leveldb_writebatch_t,
    key: *const c_char,
    key_len: usize,
    value: *const c_char,
    value_len: usize,
) {
    // SAFETY: the caller passes readable ranges of these lengths.
    let (key, value) = unsafe { (bytes(key, key_len), bytes(value, value_len)) };
    with_batch(batch, |b| {
        if let Err(error) = b.batch.put(key, value) {
            b.error.get_or_insert(error);
        }
    })
}

/// Adds "remove `key`".
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_delete(
    batch: *mut leveldb_writebatch_t,
    key: *const c_char,
    key_len: usize,
) {
    // SAFETY: the caller passes a readable range of this length.
    let key = unsafe { bytes(key, key_len) };
    with_batch(batch, |b| {
        if let Err(error) = b.batch.delete(key) {
            b.error.get_or_insert(error);
        }
    })
}

/// Calls `put` or `deleted` for each record, in order.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_iterate(
    batch: *const leveldb_writebatch_t,
    state: *mut c_void,
    put: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize)>,
    deleted: Option<unsafe extern "C" fn(*mut c_void, *const c_char, usize)>,
) {
    // SAFETY: null or a pointer from leveldb_writebatch_create.
    let Some(batch) = (unsafe { batch.as_ref() }) else {
        return;
    };
    no_errptr((), || {
        // A malformed batch cannot be built through this API; LevelDB's C
        // wrapper ignores the status of Iterate too.
        for op in batch.batch.iter().map_while(Result::ok) {
            match op {
                BatchOp::Put { key, value } => {
                    if let Some(put) = put {
                        // SAFETY: the program's callback with valid ranges.
                        unsafe {
                            put(
                                state,
                                key.as_ptr().cast(),
                                key.len(),
                                value.as_ptr().cast(),
                                value.len(),
                            )
                        }
                    }
                }
                BatchOp::Delete { key } => {
                    if let Some(deleted) = deleted {
                        // SAFETY: the program's callback with a valid range.
                        unsafe { deleted(state, key.as_ptr().cast(), key.len()) }
                    }
                }
            }
        }
    })
}

/// Appends the records of `source` to `destination`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writebatch_append(
    destination: *mut leveldb_writebatch_t,
    source: *const leveldb_writebatch_t,
) {
    // SAFETY: null or a pointer from leveldb_writebatch_create; the two may
    // be the same batch, so the source is copied before the append.
    let Some(source) = (unsafe { source.as_ref() }).map(|s| (s.batch.clone(), s.error.clone()))
    else {
        return;
    };
    with_batch(destination, |d| {
        if let Some(error) = source.1 {
            d.error.get_or_insert(error);
        }
        if let Err(error) = d.batch.append(&source.0) {
            d.error.get_or_insert(error);
        }
    })
}
