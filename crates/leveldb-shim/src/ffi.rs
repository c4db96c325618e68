//! The C++ shim's functions (`shim/leveldb_shim.cc`), a few functions of
//! LevelDB's own C API (`leveldb/c.h`) where it has what is needed, and safe
//! wrappers over them. Compiled only when the build script found LevelDB.
//!
//! Ownership across the boundary: inputs are borrowed for the call only;
//! outputs are `malloc`'d by the shim, copied here and released with
//! `shim_free`. An error comes back as a `malloc`'d C string, null meaning OK
//! (from the C API: through an `errptr`, released with `leveldb_free`).

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{self, NonNull};
use std::slice;

use crate::db::Batch;
use crate::flat::{FlatBytes, FlatEntries};
use crate::{DbOptions, Entry, Error, TableOptions};

/// `ShimTableOptions` in the shim; same fields, same order.
#[repr(C)]
struct ShimTableOptions {
    block_size: usize,
    block_restart_interval: i32,
    use_bloom: i32,
    bloom_bits_per_key: i32,
    snappy: i32,
}

impl From<&TableOptions> for ShimTableOptions {
    fn from(opts: &TableOptions) -> Self {
        ShimTableOptions {
            block_size: opts.block_size,
            block_restart_interval: opts.block_restart_interval,
            use_bloom: i32::from(opts.bloom_bits_per_key.is_some()),
            bloom_bits_per_key: opts.bloom_bits_per_key.unwrap_or(0),
            snappy: i32::from(opts.snappy),
        }
    }
}

/// `ShimDbOptions` in the shim; same fields, same order.
#[repr(C)]
struct ShimDbOptions {
    create_if_missing: i32,
    error_if_exists: i32,
    paranoid_checks: i32,
    use_bloom: i32,
    bloom_bits_per_key: i32,
    snappy: i32,
    block_restart_interval: i32,
    max_open_files: i32,
    write_buffer_size: usize,
    max_file_size: usize,
    block_size: usize,
}

impl From<&DbOptions> for ShimDbOptions {
    fn from(opts: &DbOptions) -> Self {
        ShimDbOptions {
            create_if_missing: i32::from(opts.create_if_missing),
            error_if_exists: i32::from(opts.error_if_exists),
            paranoid_checks: i32::from(opts.paranoid_checks),
            use_bloom: i32::from(opts.bloom_bits_per_key.is_some()),
            bloom_bits_per_key: opts.bloom_bits_per_key.unwrap_or(0),
            snappy: i32::from(opts.snappy),
            block_restart_interval: opts.block_restart_interval,
            max_open_files: opts.max_open_files,
            write_buffer_size: opts.write_buffer_size,
            max_file_size: opts.max_file_size,
            block_size: opts.block_size,
        }
    }
}

/// The shim's `ShimDb`: an open `leveldb::DB` and its filter policy. Opaque.
#[repr(C)]
struct ShimDb {
    _private: [u8; 0],
}

extern "C" {
    fn shim_free(ptr: *mut c_void);

    fn shim_build_table(
        keys: *const u8,
        key_lens: *const u32,
        values: *const u8,
        value_lens: *const u32,
        count: usize,
        table_options: *const ShimTableOptions,
        out: *mut *mut u8,
        out_len: *mut usize,
    ) -> *mut c_char;

    fn shim_read_table(
        bytes: *const u8,
        len: usize,
        table_options: *const ShimTableOptions,
        out: *mut *mut u8,
        out_len: *mut usize,
        lens: *mut *mut usize,
        count: *mut usize,
    ) -> *mut c_char;

    fn shim_bloom_create_filter(
        bits_per_key: i32,
        keys: *const u8,
        key_lens: *const u32,
        count: usize,
        out: *mut *mut u8,
        out_len: *mut usize,
    );

    fn shim_bloom_key_may_match(
        bits_per_key: i32,
        key: *const u8,
        key_len: usize,
        filter: *const u8,
        filter_len: usize,
    ) -> i32;

    fn shim_dump_file(
        path: *const c_char,
        path_len: usize,
        out: *mut *mut u8,
        out_len: *mut usize,
    ) -> *mut c_char;

    fn shim_db_open(
        path: *const c_char,
        path_len: usize,
        db_options: *const ShimDbOptions,
        out: *mut *mut ShimDb,
    ) -> *mut c_char;

    fn shim_db_close(handle: *mut ShimDb);

    fn shim_db_write(
        handle: *mut ShimDb,
        keys: *const u8,
        key_lens: *const u32,
        values: *const u8,
        value_lens: *const u32,
        is_put: *const u8,
        count: usize,
        sync: i32,
    ) -> *mut c_char;

    fn shim_db_get(
        handle: *mut ShimDb,
        key: *const u8,
        key_len: usize,
        found: *mut i32,
        out: *mut *mut u8,
        out_len: *mut usize,
    ) -> *mut c_char;

    fn shim_db_scan_all(
        handle: *mut ShimDb,
        out: *mut *mut u8,
        out_len: *mut usize,
        lens: *mut *mut usize,
        count: *mut usize,
    ) -> *mut c_char;

    fn shim_db_compact_range(
        handle: *mut ShimDb,
        begin: *const u8,
        begin_len: usize,
        end: *const u8,
        end_len: usize,
    );

    fn shim_db_property(
        handle: *mut ShimDb,
        name: *const c_char,
        name_len: usize,
        out: *mut *mut u8,
        out_len: *mut usize,
    ) -> i32;
}

/// LevelDB's C API `leveldb_options_t`. Opaque.
#[repr(C)]
struct CApiOptions {
    _private: [u8; 0],
}

// LevelDB's C API (`leveldb/c.h`), from the same library.
extern "C" {
    fn leveldb_options_create() -> *mut CApiOptions;
    fn leveldb_options_destroy(options: *mut CApiOptions);
    fn leveldb_options_set_paranoid_checks(options: *mut CApiOptions, value: u8);
    fn leveldb_repair_db(
        options: *const CApiOptions,
        name: *const c_char,
        errptr: *mut *mut c_char,
    );
    fn leveldb_free(ptr: *mut c_void);
}

/// Turns the shim's error return into a `Result`, freeing the message.
///
/// # Safety
/// `error` is null or a NUL-terminated string the shim allocated.
unsafe fn status(error: *mut c_char) -> Result<(), Error> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: non-null, so a NUL-terminated string from the shim (contract).
    let message = unsafe { CStr::from_ptr(error) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: allocated by the shim and not used after this.
    unsafe { shim_free(error.cast()) };
    Err(Error::LevelDb(message))
}

/// Copies a buffer the shim allocated and frees it.
///
/// # Safety
/// `ptr` is null, or points to `len` initialized items the shim allocated.
unsafe fn take<T: Copy>(ptr: *mut T, len: usize) -> Vec<T> {
    if ptr.is_null() {
        return Vec::new();
    }
    // SAFETY: `len` initialized items at `ptr` (contract).
    let items = unsafe { slice::from_raw_parts(ptr, len) }.to_vec();
    // SAFETY: allocated by the shim and not used after this.
    unsafe { shim_free(ptr.cast()) };
    items
}

/// Unpacks the entry layout of `shim_read_table` and `shim_db_scan_all`:
/// keys and values back to back, with a (key length, value length) pair each.
///
/// # Safety
/// `data` holds `data_len` bytes and `lens` holds `2 * count` lengths, both
/// allocated by the shim, and the lengths add up to `data_len`.
unsafe fn take_entries(
    data: *mut u8,
    data_len: usize,
    lens: *mut usize,
    count: usize,
) -> Vec<Entry> {
    // SAFETY: forwarded from the caller.
    let (data, lens) = unsafe { (take(data, data_len), take(lens, 2 * count)) };
    let mut rest = data.as_slice();
    let mut entries = Vec::with_capacity(count);
    for pair in lens.chunks_exact(2) {
        // The lengths add up to data_len (contract), so these cannot panic.
        let (key, after_key) = rest.split_at(pair[0]);
        let (value, after_value) = after_key.split_at(pair[1]);
        entries.push((key.to_vec(), value.to_vec()));
        rest = after_value;
    }
    entries
}

pub(crate) fn build_table(entries: &FlatEntries, opts: &TableOptions) -> Result<Vec<u8>, Error> {
    let table_options = ShimTableOptions::from(opts);
    let (mut out, mut out_len) = (ptr::null_mut(), 0);
    // SAFETY: key and value buffers hold the sum of their `len()` lengths
    // (FlatBytes keeps them in step); outputs are valid out-pointers.
    unsafe {
        status(shim_build_table(
            entries.keys.bytes.as_ptr(),
            entries.keys.lens.as_ptr(),
            entries.values.bytes.as_ptr(),
            entries.values.lens.as_ptr(),
            entries.len(),
            &table_options,
            &mut out,
            &mut out_len,
        ))?;
        Ok(take(out, out_len))
    }
}

pub(crate) fn read_table(bytes: &[u8], opts: &TableOptions) -> Result<Vec<Entry>, Error> {
    let table_options = ShimTableOptions::from(opts);
    let (mut out, mut out_len) = (ptr::null_mut(), 0);
    let (mut lens, mut count) = (ptr::null_mut(), 0);
    // SAFETY: `bytes` is valid for the call; on success the shim fills the
    // outputs with the layout take_entries expects.
    unsafe {
        status(shim_read_table(
            bytes.as_ptr(),
            bytes.len(),
            &table_options,
            &mut out,
            &mut out_len,
            &mut lens,
            &mut count,
        ))?;
        Ok(take_entries(out, out_len, lens, count))
    }
}

pub(crate) fn bloom_create_filter(bits_per_key: i32, keys: &FlatBytes) -> Result<Vec<u8>, Error> {
    let (mut out, mut out_len) = (ptr::null_mut(), 0);
    // SAFETY: `keys.bytes` holds the sum of `keys.lens`; outputs are valid.
    unsafe {
        shim_bloom_create_filter(
            bits_per_key,
            keys.bytes.as_ptr(),
            keys.lens.as_ptr(),
            keys.len(),
            &mut out,
            &mut out_len,
        );
        Ok(take(out, out_len))
    }
}

pub(crate) fn bloom_key_may_match(
    bits_per_key: i32,
    key: &[u8],
    filter: &[u8],
) -> Result<bool, Error> {
    // SAFETY: both slices are valid for the call.
    let matched = unsafe {
        shim_bloom_key_may_match(
            bits_per_key,
            key.as_ptr(),
            key.len(),
            filter.as_ptr(),
            filter.len(),
        )
    };
    Ok(matched != 0)
}

pub(crate) fn dump_file(path: &str) -> Result<String, Error> {
    let (mut out, mut out_len) = (ptr::null_mut(), 0);
    // SAFETY: `path` is valid for the call; outputs are valid out-pointers.
    let text = unsafe {
        status(shim_dump_file(
            path.as_ptr().cast(),
            path.len(),
            &mut out,
            &mut out_len,
        ))?;
        take(out, out_len)
    };
    Ok(String::from_utf8_lossy(&text).into_owned())
}

pub(crate) fn repair_db(path: &str) -> Result<(), Error> {
    let name = CString::new(path)
        .map_err(|_| Error::InvalidArgument(format!("path {path:?} contains NUL")))?;
    let mut error: *mut c_char = ptr::null_mut();
    // SAFETY: the options are created, used and destroyed here only; `name`
    // is a NUL-terminated string valid for the call; `error` is a valid
    // out-pointer, set by LevelDB to null or a string it allocated.
    unsafe {
        let options = leveldb_options_create();
        // Table blocks read with their checksums verified, as ShaleDB's
        // repair reads them (LevelDB's `ScanTable` follows paranoid_checks).
        leveldb_options_set_paranoid_checks(options, 1);
        leveldb_repair_db(options, name.as_ptr(), &mut error);
        leveldb_options_destroy(options);
    }
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: non-null, so a NUL-terminated string LevelDB allocated.
    let message = unsafe { CStr::from_ptr(error) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: allocated by LevelDB (`errptr` contract) and not used after this.
    unsafe { leveldb_free(error.cast()) };
    Err(Error::LevelDb(message))
}

/// Owns the shim's `ShimDb`; dropping it closes the database.
pub(crate) struct DbHandle(NonNull<ShimDb>);

// SAFETY: a leveldb::DB may be used from any thread, and from several at once
// without external synchronization (LevelDB's doc/index.md, "Concurrency").
unsafe impl Send for DbHandle {}
// SAFETY: as above; `&self` methods only read through the DB.
unsafe impl Sync for DbHandle {}

impl DbHandle {
    pub(crate) fn open(path: &str, opts: &DbOptions) -> Result<Self, Error> {
        let db_options = ShimDbOptions::from(opts);
        let mut handle = ptr::null_mut();
        // SAFETY: inputs are valid for the call; on success `handle` is set.
        unsafe {
            status(shim_db_open(
                path.as_ptr().cast(),
                path.len(),
                &db_options,
                &mut handle,
            ))?
        };
        NonNull::new(handle)
            .map(DbHandle)
            .ok_or_else(|| Error::LevelDb("shim_db_open returned no database".to_owned()))
    }

    pub(crate) fn write(&mut self, batch: &Batch, sync: bool) -> Result<(), Error> {
        // SAFETY: the handle is open; the three arrays describe
        // `batch.is_put.len()` operations (Db::write pushes to all three).
        unsafe {
            status(shim_db_write(
                self.0.as_ptr(),
                batch.keys.bytes.as_ptr(),
                batch.keys.lens.as_ptr(),
                batch.values.bytes.as_ptr(),
                batch.values.lens.as_ptr(),
                batch.is_put.as_ptr(),
                batch.is_put.len(),
                i32::from(sync),
            ))
        }
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let (mut found, mut out, mut out_len) = (0, ptr::null_mut(), 0);
        // SAFETY: the handle is open; `key` is valid for the call; outputs are
        // valid out-pointers, and `out` is set only when `found`.
        unsafe {
            status(shim_db_get(
                self.0.as_ptr(),
                key.as_ptr(),
                key.len(),
                &mut found,
                &mut out,
                &mut out_len,
            ))?;
            Ok((found != 0).then(|| take(out, out_len)))
        }
    }

    pub(crate) fn scan_all(&self) -> Result<Vec<Entry>, Error> {
        let (mut out, mut out_len) = (ptr::null_mut(), 0);
        let (mut lens, mut count) = (ptr::null_mut(), 0);
        // SAFETY: the handle is open; on success the shim fills the outputs
        // with the layout take_entries expects.
        unsafe {
            status(shim_db_scan_all(
                self.0.as_ptr(),
                &mut out,
                &mut out_len,
                &mut lens,
                &mut count,
            ))?;
            Ok(take_entries(out, out_len, lens, count))
        }
    }

    pub(crate) fn compact_range(&mut self, begin: Option<&[u8]>, end: Option<&[u8]>) {
        // A null pointer is how the shim hears "unbounded".
        let (begin_ptr, begin_len) =
            begin.map_or((ptr::null(), 0), |key| (key.as_ptr(), key.len()));
        let (end_ptr, end_len) = end.map_or((ptr::null(), 0), |key| (key.as_ptr(), key.len()));
        // SAFETY: the handle is open; the bounds are valid for the call.
        unsafe { shim_db_compact_range(self.0.as_ptr(), begin_ptr, begin_len, end_ptr, end_len) };
    }

    pub(crate) fn property(&self, name: &str) -> Option<String> {
        let (mut out, mut out_len) = (ptr::null_mut(), 0);
        // SAFETY: the handle is open; `name` is valid for the call; outputs
        // are set only when the shim returns 1.
        let value = unsafe {
            if shim_db_property(
                self.0.as_ptr(),
                name.as_ptr().cast(),
                name.len(),
                &mut out,
                &mut out_len,
            ) == 0
            {
                return None;
            }
            take(out, out_len)
        };
        Some(String::from_utf8_lossy(&value).into_owned())
    }
}

impl Drop for DbHandle {
    fn drop(&mut self) {
        // SAFETY: opened by shim_db_open and closed only here.
        unsafe { shim_db_close(self.0.as_ptr()) };
    }
}
