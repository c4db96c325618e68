//! `leveldb_iterator_t`: a cursor over the database, as LevelDB's
//! `Iterator` through `db/c.cc`.

use std::ffi::c_char;

use shale::{DbIterator, Error};

use crate::status::{bytes, no_errptr, save_error, Failure};

/// An iterator. One that could not be created is never valid and reports
/// why through `leveldb_iter_get_error`, as a LevelDB iterator with an
/// error status does.
#[derive(Debug)]
pub struct leveldb_iterator_t {
    pub(crate) iter: Result<DbIterator, Error>,
}

fn with_iter<T>(
    iter: *const leveldb_iterator_t,
    default: T,
    f: impl FnOnce(&DbIterator) -> T,
) -> T {
    // SAFETY: null or a pointer from leveldb_create_iterator, not destroyed.
    match unsafe { iter.as_ref() } {
        Some(leveldb_iterator_t { iter: Ok(iter) }) => no_errptr(default, || f(iter)),
        _ => default,
    }
}

fn with_iter_mut(iter: *mut leveldb_iterator_t, f: impl FnOnce(&mut DbIterator)) {
    // SAFETY: null or a pointer from leveldb_create_iterator, not destroyed,
    // used by one thread at a time (LevelDB's rule for iterators).
    if let Some(leveldb_iterator_t { iter: Ok(iter) }) = unsafe { iter.as_mut() } {
        no_errptr((), || f(iter));
    }
}

/// Destroys an iterator.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_destroy(iter: *mut leveldb_iterator_t) {
    if !iter.is_null() {
        // SAFETY: a pointer from leveldb_create_iterator, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(iter) }));
    }
}

/// 1 when the iterator is at an entry.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_valid(iter: *const leveldb_iterator_t) -> u8 {
    with_iter(iter, 0, |i| u8::from(i.valid()))
}

/// Moves to the first entry.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_seek_to_first(iter: *mut leveldb_iterator_t) {
    with_iter_mut(iter, |i| i.seek_to_first())
}

/// Moves to the last entry.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_seek_to_last(iter: *mut leveldb_iterator_t) {
    with_iter_mut(iter, |i| i.seek_to_last())
}

/// Moves to the first entry at or after `key`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_seek(
    iter: *mut leveldb_iterator_t,
    key: *const c_char,
    key_len: usize,
) {
    // SAFETY: the caller passes key_len readable bytes.
    let key = unsafe { bytes(key, key_len) };
    with_iter_mut(iter, |i| i.seek(key))
}

/// Moves to the next entry. REQUIRES (LevelDB): valid; here a no-op otherwise.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_next(iter: *mut leveldb_iterator_t) {
    with_iter_mut(iter, |i| {
        if i.valid() {
            i.next()
        }
    })
}

/// Moves to the previous entry. REQUIRES (LevelDB): valid; here a no-op
/// otherwise.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_prev(iter: *mut leveldb_iterator_t) {
    with_iter_mut(iter, |i| {
        if i.valid() {
            i.prev()
        }
    })
}

/// The current key, valid until the iterator moves or is destroyed; its
/// length in `*key_len`. REQUIRES (LevelDB): valid; here NULL and length 0
/// otherwise.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_key(
    iter: *const leveldb_iterator_t,
    key_len: *mut usize,
) -> *const c_char {
    let (pointer, len) = with_iter(iter, (std::ptr::null(), 0), |i| {
        if i.valid() {
            // Asked once: each call goes down the merging iterator.
            let key = i.key();
            (key.as_ptr().cast(), key.len())
        } else {
            (std::ptr::null(), 0)
        }
    });
    if !key_len.is_null() {
        // SAFETY: the caller's size_t.
        unsafe { *key_len = len };
    }
    pointer
}

/// The current value, as `leveldb_iter_key`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_value(
    iter: *const leveldb_iterator_t,
    value_len: *mut usize,
) -> *const c_char {
    let (pointer, len) = with_iter(iter, (std::ptr::null(), 0), |i| {
        if i.valid() {
            // Asked once: each call goes down the merging iterator.
            let value = i.value();
            (value.as_ptr().cast(), value.len())
        } else {
            (std::ptr::null(), 0)
        }
    });
    if !value_len.is_null() {
        // SAFETY: the caller's size_t.
        unsafe { *value_len = len };
    }
    pointer
}

/// Stores the error the iterator met, if any, in `*errptr`.
#[no_mangle]
pub unsafe extern "C" fn leveldb_iter_get_error(
    iter: *const leveldb_iterator_t,
    errptr: *mut *mut c_char,
) {
    // SAFETY: null or a pointer from leveldb_create_iterator.
    let error = match unsafe { iter.as_ref() } {
        None => Some(Failure::null("iterator")),
        Some(leveldb_iterator_t { iter: Err(error) }) => Some(Failure::Engine(error.clone())),
        Some(leveldb_iterator_t { iter: Ok(iter) }) => {
            no_errptr(None, || iter.status().err().map(Failure::Engine))
        }
    };
    if let Some(error) = error {
        // SAFETY: the caller's errptr.
        unsafe { save_error(errptr, &error) };
    }
}
