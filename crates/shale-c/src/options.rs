//! `leveldb_options_t`, `leveldb_readoptions_t`, `leveldb_writeoptions_t`,
//! and the objects options point to: the LRU cache, the env and the info
//! logger. Defaults are LevelDB 1.23's (no filter policy, checksums not
//! verified on reads), not ShaleDB's Rust defaults, so a C program gets
//! what it got from LevelDB.
//!
//! LevelDB copies a pointer to the comparator, filter policy, cache and env
//! into its options; here the options take what they need (a shared
//! reference to the comparator, the cache's capacity, the env), so an
//! object destroyed while options still name it stays valid.

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use shale::env::Env;
use shale::{Options, ReadOptions, WriteOptions};

use crate::comparator::leveldb_comparator_t;
use crate::filter_policy::{leveldb_filterpolicy_t, Filter};
use crate::handles::leveldb_snapshot_t;
use crate::status::{malloc_c_string, no_errptr};

/// Options for opening, destroying and repairing a database.
#[derive(Debug)]
pub struct leveldb_options_t {
    pub(crate) options: Options,
    /// Why the last `shaledb_options_set_compaction_executor` name was
    /// refused: the setter has no `errptr` (LevelDB's setters have none), so
    /// `leveldb_open` reports it.
    pub(crate) executor_error: Option<String>,
}

impl leveldb_options_t {
    /// LevelDB 1.23's `Options()`: ShaleDB's defaults where they agree, and
    /// LevelDB's where ShaleDB's Rust API chose otherwise (no filter, 1,000
    /// open files).
    fn leveldb_defaults() -> leveldb_options_t {
        leveldb_options_t {
            options: Options {
                bloom_bits_per_key: None,
                // LevelDB's, where the Rust API's default is 10,000.
                max_open_files: 1000,
                ..Options::default()
            },
            executor_error: None,
        }
    }
}

/// Options for reads and iterators.
#[derive(Debug)]
pub struct leveldb_readoptions_t {
    pub(crate) options: ReadOptions,
}

/// Options for writes.
#[derive(Debug)]
pub struct leveldb_writeoptions_t {
    pub(crate) options: WriteOptions,
}

/// An LRU block cache. ShaleDB gives each database a block cache of its
/// own, sized from this capacity; two databases opened with one cache do
/// not share it (docs/c-api.md).
#[derive(Debug)]
pub struct leveldb_cache_t {
    capacity: usize,
}

/// The file-system environment: ShaleDB's POSIX env.
#[derive(Debug)]
pub struct leveldb_env_t {
    env: Arc<dyn Env>,
}

/// LevelDB's info logger. The C API has no function that creates one, so
/// a program can only pass NULL (the `LOG` file in the database directory,
/// which ShaleDB always writes).
#[derive(Debug)]
pub struct leveldb_logger_t {
    _private: (),
}

/// Writes `f(&mut options)` through a possibly-null pointer, catching a
/// panic: the setters below have no `errptr`.
unsafe fn set<T>(target: *mut T, f: impl FnOnce(&mut T)) {
    // SAFETY: the caller passes a pointer this library returned, or null.
    if let Some(target) = unsafe { target.as_mut() } {
        no_errptr((), || f(target));
    }
}

/// Creates options with LevelDB's defaults.
#[no_mangle]
pub extern "C" fn leveldb_options_create() -> *mut leveldb_options_t {
    Box::into_raw(Box::new(leveldb_options_t::leveldb_defaults()))
}

/// Destroys options (databases opened with them are not affected).
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_destroy(options: *mut leveldb_options_t) {
    if !options.is_null() {
        // SAFETY: a pointer from leveldb_options_create, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(options) }));
    }
}

/// Sets the order of keys (NULL: bytewise). The comparator's name is
/// checked against the one the database was created with.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_comparator(
    options: *mut leveldb_options_t,
    comparator: *mut leveldb_comparator_t,
) {
    // SAFETY: null or a pointer from leveldb_comparator_create.
    let comparator = unsafe { comparator.as_ref() }.map(|c| c.shared());
    unsafe { set(options, |o| o.options.comparator = comparator) }
}

/// Sets the filter policy (NULL: no filter).
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_filter_policy(
    options: *mut leveldb_options_t,
    policy: *mut leveldb_filterpolicy_t,
) {
    // SAFETY: null or a pointer from leveldb_filterpolicy_create*.
    let filter = unsafe { policy.as_ref() }.map(|p| p.filter());
    unsafe {
        set(options, |o| match filter {
            None => {
                o.options.bloom_bits_per_key = None;
                o.options.filter_policy = None;
            }
            Some(Filter::Bloom(bits)) => {
                o.options.bloom_bits_per_key = Some(bits);
                o.options.filter_policy = None;
            }
            Some(Filter::Custom(policy)) => {
                o.options.bloom_bits_per_key = None;
                o.options.filter_policy = Some(policy);
            }
        })
    }
}

/// Creates the database when it does not exist.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_create_if_missing(
    options: *mut leveldb_options_t,
    value: u8,
) {
    unsafe { set(options, |o| o.options.create_if_missing = value != 0) }
}

/// Fails the open when the database exists.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_error_if_exists(
    options: *mut leveldb_options_t,
    value: u8,
) {
    unsafe { set(options, |o| o.options.error_if_exists = value != 0) }
}

/// Treats any sign of corruption as an error.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_paranoid_checks(
    options: *mut leveldb_options_t,
    value: u8,
) {
    unsafe { set(options, |o| o.options.paranoid_checks = value != 0) }
}

/// Sets the env (NULL: the default env).
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_env(
    options: *mut leveldb_options_t,
    env: *mut leveldb_env_t,
) {
    // SAFETY: null or a pointer from leveldb_create_default_env.
    let env = match unsafe { env.as_ref() } {
        Some(env) => env.env.clone(),
        None => shale::env::default_env(),
    };
    unsafe { set(options, |o| o.options.env = env) }
}

/// Accepted and ignored: the C API cannot create a logger, and ShaleDB
/// writes the `LOG` file in the database directory, as LevelDB does for NULL.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_info_log(
    _options: *mut leveldb_options_t,
    _logger: *mut leveldb_logger_t,
) {
}

/// Bytes of writes buffered in the memtable before a flush.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_write_buffer_size(
    options: *mut leveldb_options_t,
    size: usize,
) {
    unsafe { set(options, |o| o.options.write_buffer_size = size) }
}

/// Most table files kept open (negative values count as 0, which the open
/// rejects).
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_max_open_files(
    options: *mut leveldb_options_t,
    count: c_int,
) {
    unsafe {
        set(options, |o| {
            o.options.max_open_files = count.max(0) as usize
        })
    }
}

/// Sets the block cache: its capacity becomes the database's block cache
/// size (NULL: LevelDB's default, 8 MiB).
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_cache(
    options: *mut leveldb_options_t,
    cache: *mut leveldb_cache_t,
) {
    // SAFETY: null or a pointer from leveldb_cache_create_lru.
    let capacity =
        unsafe { cache.as_ref() }.map_or(Options::default().block_cache_size, |c| c.capacity);
    unsafe { set(options, |o| o.options.block_cache_size = capacity) }
}

/// Target size of a data block before compression.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_block_size(
    options: *mut leveldb_options_t,
    size: usize,
) {
    unsafe { set(options, |o| o.options.block_size = size) }
}

/// Entries between restart points in data blocks.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_block_restart_interval(
    options: *mut leveldb_options_t,
    interval: c_int,
) {
    unsafe {
        set(options, |o| {
            o.options.block_restart_interval = interval.max(0) as usize
        })
    }
}

/// Tables are cut at about this size.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_max_file_size(
    options: *mut leveldb_options_t,
    size: usize,
) {
    unsafe { set(options, |o| o.options.max_file_size = size as u64) }
}

/// `leveldb_no_compression` (0) or `leveldb_snappy_compression` (1); other
/// values mean no compression, as in LevelDB.
#[no_mangle]
pub unsafe extern "C" fn leveldb_options_set_compression(
    options: *mut leveldb_options_t,
    compression: c_int,
) {
    unsafe { set(options, |o| o.options.snappy = compression == 1) }
}

/// Creates read options with LevelDB's defaults: checksums not verified,
/// blocks cached, the latest state.
#[no_mangle]
pub extern "C" fn leveldb_readoptions_create() -> *mut leveldb_readoptions_t {
    Box::into_raw(Box::new(leveldb_readoptions_t {
        options: ReadOptions {
            verify_checksums: false,
            ..ReadOptions::default()
        },
    }))
}

/// Destroys read options.
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_destroy(options: *mut leveldb_readoptions_t) {
    if !options.is_null() {
        // SAFETY: a pointer from leveldb_readoptions_create, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(options) }));
    }
}

/// Checks the CRC of every block read from disk.
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_set_verify_checksums(
    options: *mut leveldb_readoptions_t,
    value: u8,
) {
    unsafe { set(options, |o| o.options.verify_checksums = value != 0) }
}

/// Keeps the blocks read in the block cache.
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_set_fill_cache(
    options: *mut leveldb_readoptions_t,
    value: u8,
) {
    unsafe { set(options, |o| o.options.fill_cache = value != 0) }
}

/// Reads as of `snapshot` (NULL: the latest state).
#[no_mangle]
pub unsafe extern "C" fn leveldb_readoptions_set_snapshot(
    options: *mut leveldb_readoptions_t,
    snapshot: *const leveldb_snapshot_t,
) {
    // SAFETY: null or a pointer from leveldb_create_snapshot, not released.
    let snapshot = unsafe { snapshot.as_ref() }.map(|s| s.snapshot.clone());
    unsafe { set(options, |o| o.options.snapshot = snapshot) }
}

/// Creates write options with LevelDB's defaults (no sync).
#[no_mangle]
pub extern "C" fn leveldb_writeoptions_create() -> *mut leveldb_writeoptions_t {
    Box::into_raw(Box::new(leveldb_writeoptions_t {
        options: WriteOptions::default(),
    }))
}

/// Destroys write options.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writeoptions_destroy(options: *mut leveldb_writeoptions_t) {
    if !options.is_null() {
        // SAFETY: a pointer from leveldb_writeoptions_create, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(options) }));
    }
}

/// Syncs the log before a write returns.
#[no_mangle]
pub unsafe extern "C" fn leveldb_writeoptions_set_sync(
    options: *mut leveldb_writeoptions_t,
    value: u8,
) {
    unsafe { set(options, |o| o.options.sync = value != 0) }
}

/// An LRU block cache of `capacity` bytes.
#[no_mangle]
pub extern "C" fn leveldb_cache_create_lru(capacity: usize) -> *mut leveldb_cache_t {
    Box::into_raw(Box::new(leveldb_cache_t { capacity }))
}

/// Destroys a cache.
#[no_mangle]
pub unsafe extern "C" fn leveldb_cache_destroy(cache: *mut leveldb_cache_t) {
    if !cache.is_null() {
        // SAFETY: a pointer from leveldb_cache_create_lru, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(cache) }));
    }
}

/// The default (POSIX) env. LevelDB returns the one process-wide env; here
/// each call returns a handle to it, destroyed with `leveldb_env_destroy`.
#[no_mangle]
pub extern "C" fn leveldb_create_default_env() -> *mut leveldb_env_t {
    Box::into_raw(Box::new(leveldb_env_t {
        env: shale::env::default_env(),
    }))
}

/// Destroys an env handle.
#[no_mangle]
pub unsafe extern "C" fn leveldb_env_destroy(env: *mut leveldb_env_t) {
    if !env.is_null() {
        // SAFETY: a pointer from leveldb_create_default_env, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(env) }));
    }
}

/// A directory for tests, as LevelDB's POSIX env: `$TEST_TMPDIR` when set
/// and not empty, else `/tmp/leveldbtest-<euid>`; created if missing.
/// The caller frees the result with `leveldb_free`. NULL for a NULL env.
#[no_mangle]
pub unsafe extern "C" fn leveldb_env_get_test_directory(env: *mut leveldb_env_t) -> *mut c_char {
    // SAFETY: null or a pointer from leveldb_create_default_env.
    let Some(env) = (unsafe { env.as_ref() }) else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || {
        let dir = match std::env::var("TEST_TMPDIR") {
            Ok(dir) if !dir.is_empty() => dir,
            // SAFETY: geteuid has no preconditions.
            _ => format!("/tmp/leveldbtest-{}", unsafe { libc::geteuid() }),
        };
        // LevelDB ignores a failure here too: the directory may exist.
        let _ = env.env.create_dir_all(std::path::Path::new(&dir));
        malloc_c_string(&dir)
    })
}

/// The options a database needs, checked for null.
pub(crate) fn options_ref<'a>(
    options: *const leveldb_options_t,
) -> Result<&'a leveldb_options_t, crate::status::Failure> {
    // SAFETY: null or a pointer from leveldb_options_create.
    unsafe { options.as_ref() }.ok_or_else(|| crate::status::Failure::null("options"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_leveldb_s() {
        let options = leveldb_options_create();
        // SAFETY: just created.
        let o = unsafe { &*options };
        assert_eq!(o.options.bloom_bits_per_key, None);
        assert!(o.options.filter_policy.is_none());
        assert!(!o.options.create_if_missing);
        assert_eq!(o.options.write_buffer_size, 4 << 20);
        assert_eq!(o.options.block_cache_size, 8 << 20);
        unsafe { leveldb_options_destroy(options) };
        let read = leveldb_readoptions_create();
        // SAFETY: just created.
        assert!(!unsafe { &*read }.options.verify_checksums);
        unsafe { leveldb_readoptions_destroy(read) };
    }
}
