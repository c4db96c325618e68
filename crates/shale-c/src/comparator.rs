//! `leveldb_comparator_t`: a key order given as C callbacks, as LevelDB's
//! `leveldb_comparator_t` in `db/c.cc`.

use std::cmp::Ordering;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use shale::format::comparator::Comparator;

use crate::status::{c_str, no_errptr};

/// A comparator made of C callbacks. The engine holds it through an `Arc`:
/// the destructor runs when `leveldb_comparator_destroy` was called and no
/// open database uses it any more.
#[derive(Debug)]
pub struct leveldb_comparator_t {
    shared: Arc<CComparator>,
}

impl leveldb_comparator_t {
    /// The comparator as the engine takes it.
    pub(crate) fn shared(&self) -> Arc<dyn Comparator> {
        self.shared.clone()
    }
}

struct CComparator {
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    compare: unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize) -> c_int,
    /// Asked once, when the comparator is created: the engine borrows it.
    name: String,
}

// SAFETY: LevelDB requires a comparator to be callable from any thread at
// once (its background compaction calls it); so does the engine. `state` is
// only handed back to the callbacks.
unsafe impl Send for CComparator {}
// SAFETY: as above.
unsafe impl Sync for CComparator {}

impl std::fmt::Debug for CComparator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CComparator")
            .field("name", &self.name)
            .finish()
    }
}

impl Comparator for CComparator {
    fn name(&self) -> &str {
        &self.name
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        // SAFETY: the callback the program gave, with its own state and two
        // valid byte ranges.
        let result = unsafe {
            (self.compare)(
                self.state,
                a.as_ptr().cast(),
                a.len(),
                b.as_ptr().cast(),
                b.len(),
            )
        };
        result.cmp(&0)
    }

    // No key shortening, as LevelDB's C comparator: the callbacks cannot
    // say how to shorten a key.
    fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}

    fn find_short_successor(&self, _key: &mut Vec<u8>) {}
}

impl Drop for CComparator {
    fn drop(&mut self) {
        if let Some(destructor) = self.destructor {
            // SAFETY: the program's destructor, called once with its state.
            unsafe { destructor(self.state) }
        }
    }
}

/// Creates a comparator from callbacks. `name` is called once, here; its
/// result is the name recorded in (and checked against) the MANIFEST.
/// NULL if `compare` or `name` is NULL.
#[no_mangle]
pub unsafe extern "C" fn leveldb_comparator_create(
    state: *mut c_void,
    destructor: Option<unsafe extern "C" fn(*mut c_void)>,
    compare: Option<
        unsafe extern "C" fn(*mut c_void, *const c_char, usize, *const c_char, usize) -> c_int,
    >,
    name: Option<unsafe extern "C" fn(*mut c_void) -> *const c_char>,
) -> *mut leveldb_comparator_t {
    let (Some(compare), Some(name_fn)) = (compare, name) else {
        return std::ptr::null_mut();
    };
    no_errptr(std::ptr::null_mut(), || {
        // SAFETY: the program's name callback; it returns a C string.
        let name = unsafe { c_str(name_fn(state)) }.unwrap_or_default();
        Box::into_raw(Box::new(leveldb_comparator_t {
            shared: Arc::new(CComparator {
                state,
                destructor,
                compare,
                name,
            }),
        }))
    })
}

/// Destroys a comparator handle. Its destructor runs now, or when the last
/// open database using it closes.
#[no_mangle]
pub unsafe extern "C" fn leveldb_comparator_destroy(comparator: *mut leveldb_comparator_t) {
    if !comparator.is_null() {
        // SAFETY: a pointer from leveldb_comparator_create, destroyed once.
        no_errptr((), || drop(unsafe { Box::from_raw(comparator) }));
    }
}
