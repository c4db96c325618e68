//! ShaleDB's own options and statistics, declared in `shaledb/c.h` beside
//! LevelDB's `leveldb/c.h`: the compaction executor, remote compaction
//! workers, compaction threads, and statistics as text or JSON.

use std::ffi::{c_char, c_int};

use shale::options::RemoteToken;
use shale::{CompactRangeOptions, Error, ExecutorChoice};

use crate::db::db_ref;
use crate::handles::leveldb_t;
use crate::options::leveldb_options_t;
use crate::status::{bytes, c_str, malloc_c_string, no_errptr, with_errptr, Failure};

fn with_options(options: *mut leveldb_options_t, f: impl FnOnce(&mut shale::Options)) {
    // SAFETY: null or a pointer from leveldb_options_create.
    if let Some(options) = unsafe { options.as_mut() } {
        no_errptr((), || f(&mut options.options));
    }
}

/// The compaction executor by name: `auto` (the default), `streaming`,
/// `parallel`, `opencl` or `remote`. An unknown name, or one the other
/// options rule out (a custom comparator or filter policy allows only
/// `auto` and `streaming`), fails `leveldb_open`. NULL: `auto`.
#[no_mangle]
pub unsafe extern "C" fn shaledb_options_set_compaction_executor(
    options: *mut leveldb_options_t,
    name: *const c_char,
) {
    // SAFETY: null or a NUL-terminated string.
    let name = unsafe { c_str(name) }.unwrap_or_else(|| "auto".to_string());
    // SAFETY: null or a pointer from leveldb_options_create.
    if let Some(options) = unsafe { options.as_mut() } {
        match name.parse() {
            Ok(choice) => {
                options.options.compaction_executor = choice;
                options.executor_error = None;
            }
            Err(message) => options.executor_error = Some(message),
        }
    }
}

/// Threads running compactions; 0 (the default): chosen for the machine.
/// Negative values count as 0.
#[no_mangle]
pub unsafe extern "C" fn shaledb_options_set_max_background_compactions(
    options: *mut leveldb_options_t,
    count: c_int,
) {
    with_options(options, |o| {
        o.max_background_compactions = count.max(0) as usize
    })
}

/// The compaction workers (`shale worker`) the `remote` executor ships jobs
/// to: `count` endpoints, each `http://HOST:PORT`, `https://HOST:PORT` or
/// `HOST:PORT`. 0 removes them.
#[no_mangle]
pub unsafe extern "C" fn shaledb_options_set_remote_workers(
    options: *mut leveldb_options_t,
    endpoints: *const *const c_char,
    count: usize,
) {
    let workers: Vec<String> = if endpoints.is_null() {
        Vec::new()
    } else {
        // SAFETY: the caller passes `count` strings (a NULL one is skipped).
        (0..count)
            .filter_map(|i| unsafe { c_str(*endpoints.add(i)) })
            .collect()
    };
    with_options(options, |o| o.remote.workers = workers)
}

/// The token sent to the workers with every call; NULL: none.
#[no_mangle]
pub unsafe extern "C" fn shaledb_options_set_remote_token(
    options: *mut leveldb_options_t,
    token: *const c_char,
) {
    // SAFETY: null or a NUL-terminated string.
    let token = unsafe { c_str(token) }.map(RemoteToken);
    with_options(options, |o| o.remote.token = token)
}

/// What crosses the wire to a worker: `near-data` (the default) or
/// `keys-only`. An unknown mode is reported through `errptr` and leaves the
/// options as they were.
#[no_mangle]
pub unsafe extern "C" fn shaledb_options_set_remote_mode(
    options: *mut leveldb_options_t,
    mode: *const c_char,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's errptr and pointers.
    unsafe {
        with_errptr(errptr, (), || {
            let options = options.as_mut().ok_or_else(|| Failure::null("options"))?;
            let mode = c_str(mode).ok_or_else(|| Failure::null("mode"))?;
            options.options.remote.mode = mode
                .parse()
                .map_err(|e| Failure::Message(format!("Invalid argument: {e}")))?;
            Ok(())
        })
    }
}

/// Compacts `[start, limit]` (NULL: unbounded) on the executor `executor`
/// (NULL or `auto`: the scheduler's choice), reporting failures through
/// `errptr` (`leveldb_compact_range` cannot).
#[no_mangle]
pub unsafe extern "C" fn shaledb_compact_range(
    db: *mut leveldb_t,
    start_key: *const c_char,
    start_key_len: usize,
    limit_key: *const c_char,
    limit_key_len: usize,
    executor: *const c_char,
    errptr: *mut *mut c_char,
) {
    // SAFETY: the caller's errptr, ranges and string.
    unsafe {
        with_errptr(errptr, (), || {
            let db = db_ref(db)?;
            let start = (!start_key.is_null()).then(|| bytes(start_key, start_key_len));
            let limit = (!limit_key.is_null()).then(|| bytes(limit_key, limit_key_len));
            let options = CompactRangeOptions {
                executor: match c_str(executor) {
                    Some(name) => name.parse().map_err(Error::InvalidArgument)?,
                    None => ExecutorChoice::Auto,
                },
            };
            db.db.compact_range_with(start, limit, &options)?;
            Ok(())
        })
    }
}

/// Statistics as text: the `leveldb.stats` property, which ShaleDB extends
/// with executor and scheduler lines. A `malloc`ed string (free with
/// `leveldb_free`); NULL for a NULL database.
#[no_mangle]
pub unsafe extern "C" fn shaledb_statistics_text(db: *mut leveldb_t) -> *mut c_char {
    let Ok(db) = db_ref(db) else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || {
        malloc_c_string(&db.db.property("leveldb.stats").unwrap_or_default())
    })
}

/// Statistics as one JSON object: the engine's one schema (`shale::stats`,
/// layout in docs/c-api.md, the same document as `shale stats --json` and
/// Python's `DB.stats()`): per level its files, bytes and compaction work;
/// per executor its jobs and phase times; fallbacks; the scheduler's
/// counts; write stalls. Times in seconds. A `malloc`ed string
/// (free with `leveldb_free`); NULL for a NULL database.
#[no_mangle]
pub unsafe extern "C" fn shaledb_statistics_json(db: *mut leveldb_t) -> *mut c_char {
    let Ok(db) = db_ref(db) else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || {
        malloc_c_string(&db.db.statistics().to_json())
    })
}
