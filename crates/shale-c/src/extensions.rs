//! ShaleDB's own options and statistics, declared in `shaledb/c.h` beside
//! LevelDB's `leveldb/c.h`: the compaction executor, remote compaction
//! workers, compaction threads, and statistics as text or JSON.

use std::ffi::{c_char, c_int};

use serde_json::json;
use shale::options::RemoteToken;
use shale::CompactRangeOptions;

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
    with_options(options, |o| o.compaction_executor = name)
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
    with_options(options, |o| o.remote_workers = workers)
}

/// The token sent to the workers with every call; NULL: none.
#[no_mangle]
pub unsafe extern "C" fn shaledb_options_set_remote_token(
    options: *mut leveldb_options_t,
    token: *const c_char,
) {
    // SAFETY: null or a NUL-terminated string.
    let token = unsafe { c_str(token) }.map(RemoteToken);
    with_options(options, |o| o.remote_token = token)
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
            options.options.remote_mode = mode
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
                executor: c_str(executor),
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

/// Statistics as one JSON object (layout in docs/c-api.md): per level its
/// files, bytes and compaction work; write stalls; per executor its jobs and
/// phase times; the scheduler's counts and fallbacks. A `malloc`ed string
/// (free with `leveldb_free`); NULL for a NULL database.
#[no_mangle]
pub unsafe extern "C" fn shaledb_statistics_json(db: *mut leveldb_t) -> *mut c_char {
    let Ok(db) = db_ref(db) else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || {
        malloc_c_string(&statistics_json(&db.db).to_string())
    })
}

fn statistics_json(db: &shale::DB) -> serde_json::Value {
    let sizes = db.level_sizes();
    let levels: Vec<_> = db
        .level_stats()
        .iter()
        .zip(sizes)
        .enumerate()
        .map(|(level, (stats, (files, bytes)))| {
            json!({
                "level": level,
                "files": files,
                "bytes": bytes,
                "compactions": stats.count,
                "seconds": stats.seconds,
                "bytes_read": stats.bytes_read,
                "bytes_written": stats.bytes_written,
            })
        })
        .collect();
    let stalls = db.stall_stats();
    let executors: Vec<_> = db
        .executor_stats()
        .into_iter()
        .map(|(name, jobs, phases)| {
            json!({
                "name": name,
                "jobs": jobs,
                "bytes_read": phases.bytes_read,
                "bytes_written": phases.bytes_written,
                "entries_in": phases.entries_in,
                "entries_out": phases.entries_out,
                "read_seconds": phases.read_secs,
                "unpack_seconds": phases.unpack_secs,
                "merge_seconds": phases.merge_secs,
                "gc_seconds": phases.gc_secs,
                "pack_seconds": phases.pack_secs,
                "write_seconds": phases.write_secs,
            })
        })
        .collect();
    let scheduler = db.scheduler_stats();
    let counts = &scheduler.counts;
    json!({
        "levels": levels,
        "stalls": {
            "slowdown_count": stalls.slowdown_count,
            "slowdown_micros": stalls.slowdown_micros,
            "stop_count": stalls.stop_count,
            "stop_micros": stalls.stop_micros,
        },
        "executors": executors,
        "scheduler": {
            "queue_lengths": scheduler.queue_lengths,
            "running": scheduler.running,
            "queued": counts.queued,
            "completed": counts.completed,
            "failed": counts.failed,
            "refused": counts.refused,
            "dropped_stale": counts.dropped_stale,
            "cross_level": counts.cross_level,
            "split_jobs": counts.split_jobs,
            "subcompactions": counts.subcompactions,
            "trivial_moves": counts.trivial_moves,
            "fallbacks": scheduler.fallbacks,
            "last_fallback": scheduler.last_fallback,
        },
    })
}
