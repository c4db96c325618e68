//! `leveldb_filterpolicy_t`: LevelDB's built-in Bloom filter, or a filter
//! given as C callbacks (LevelDB's `leveldb_filterpolicy_t` in `db/c.cc`).

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use shale::format::bloom::FilterPolicy;

use crate::status::{c_str, no_errptr};

/// A filter policy handle.
#[derive(Debug)]
pub struct leveldb_filterpolicy_t {
    filter: Filter,
}

/// What a filter policy handle stands for.
#[derive(Debug, Clone)]
pub(crate) enum Filter {
    /// LevelDB's Bloom filter with this many bits per key: the engine's own,
    /// which every executor builds.
    Bloom(u32),
    /// Callbacks (compactions then run on the `streaming` executor).
    Custom(Arc<dyn FilterPolicy>),
}

impl leveldb_filterpolicy_t {
    pub(crate) fn filter(&self) -> Filter {
        self.filter.clone()
    }
}

struct CFilterPolicy {
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    create_filter: unsafe extern "C" fn(
        *mut c_void,
        *const *const c_char,
        *const usize,
        c_int,
        *mut usize,
    ) -> *mut c_char,
    key_may_match:
        unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize) -> u8,
    name: &'static str,
}

// SAFETY: LevelDB calls a filter policy from any thread (flushes and
// compactions build filters while reads probe them); so does the engine.
// `state` is only handed back to the callbacks.
unsafe impl Send for CFilterPolicy {}
// SAFETY: as above.
unsafe impl Sync for CFilterPolicy {}

impl std::fmt::Debug for CFilterPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CFilterPolicy")
            .field("name", &self.name)
            .finish()
    }
}

impl FilterPolicy for CFilterPolicy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        let pointers: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr().cast()).collect();
        let lengths: Vec<usize> = keys.iter().map(|k| k.len()).collect();
        let count = c_int::try_from(keys.len()).unwrap_or(c_int::MAX);
        let mut length = 0usize;
        // SAFETY: the program's callback with `count` valid keys; it returns
        // a malloc'ed buffer of `length` bytes (or NULL), freed here as
        // LevelDB's C wrapper frees it.
        unsafe {
            let filter = (self.create_filter)(
                self.state,
                pointers.as_ptr(),
                lengths.as_ptr(),
                count,
                &mut length,
            );
            if !filter.is_null() {
                dst.extend_from_slice(std::slice::from_raw_parts(filter.cast::<u8>(), length));
                libc::free(filter.cast());
            }
        }
    }

    fn key_may_match(&self, key: &[u8], filter: &[u8]) -> bool {
        // SAFETY: the program's callback with two valid byte ranges.
        unsafe {
            (self.key_may_match)(
                self.state,
                key.as_ptr().cast(),
                key.len(),
                filter.as_ptr().cast(),
                filter.len(),
            ) != 0
        }
    }
}

impl Drop for CFilterPolicy {
    fn drop(&mut self) {
        if let Some(destructor) = self.destructor {
            // SAFETY: the program's destructor, called once with its state.
            unsafe { destructor(self.state) }
        }
    }
}

/// The engine's filter policies name themselves with a `&'static str` (the
/// metaindex key); a C policy's name is kept here, once per distinct name,
/// for the life of the process.
fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// Creates a filter policy from callbacks. `name` is called once, here;
/// tables name their filter block `filter.<name>`. NULL if a callback other
/// than `destructor` is NULL.
#[no_mangle]
pub unsafe extern "C" fn leveldb_filterpolicy_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    create_filter: Option<
        unsafe extern "C" fn(
            *mut c_void,
            *const *const c_char,
            *const usize,
            c_int,
            *mut usize,
        ) -> *mut c_char,
    >,
    key_may_match: Option<
        unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize) -> u8,
    >,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut leveldb_filterpolicy_t {
    let (Some(create_filter), Some(key_may_match), Some(name_fn)) =
        (create_filter, key_may_match, name)
    else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || {
        // SAFETY: the program's name callback; it returns a C string.
        let name = intern(unsafe { c_str(name_fn(state)) }.unwrap_or_default());
        let policy = CFilterPolicy {
            state,
            destructor,
            create_filter,
            key_may_match,
            name,
        };
        Box::into_raw(Box::new(leveldb_filterpolicy_t {
            filter: Filter::Custom(Arc::new(policy)),
        }))
    })
}

/// LevelDB's Bloom filter (`leveldb.BuiltinBloomFilter2`) with
/// `bits_per_key` bits per key (negative counts as 0).
#[no_mangle]
pub extern "C" fn leveldb_filterpolicy_create_bloom(
    bits_per_key: c_int,
) -> *mut leveldb_filterpolicy_t {
    Box::into_raw(Box::new(leveldb_filterpolicy_t {
        filter: Filter::Bloom(bits_per_key.max(0) as u32),
    }))
}

/// Destroys a filter policy handle. A custom policy's destructor runs now,
/// or when the last open database using it closes.
#[no_mangle]
pub unsafe extern "C" fn leveldb_filterpolicy_destroy(policy: *mut leveldb_filterpolicy_t) {
    if !policy.is_null() {
        // SAFETY: a pointer from leveldb_filterpolicy_create*, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(policy) }));
    }
}
