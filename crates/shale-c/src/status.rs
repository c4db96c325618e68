//! How results cross the boundary: LevelDB's `char** errptr` convention, a
//! guard that turns a Rust panic into an error, and `malloc`ed copies the
//! caller releases with `leveldb_free` (or `free`).
//!
//! LevelDB's counterpart is `SaveError` and `CopyString` in `db/c.cc`.

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use shale::Error;

/// A failure to report through `errptr`: an engine error, or a message of
/// the C layer's own (a null handle, a panic).
#[derive(Debug)]
pub(crate) enum Failure {
    /// An error from the engine.
    Engine(Error),
    /// LevelDB's `Status` text, already formatted ("Invalid argument: ...").
    Message(String),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure::Engine(error)
    }
}

impl Failure {
    /// A caller passed a null handle where LevelDB would dereference it.
    pub(crate) fn null(what: &str) -> Failure {
        Failure::Message(format!("Invalid argument: {what} is NULL"))
    }

    /// The text LevelDB's `Status::ToString()` would give: its code name,
    /// then the engine's message.
    fn text(&self) -> String {
        match self {
            Failure::Message(text) => text.clone(),
            Failure::Engine(error) => status_text(error),
        }
    }
}

/// LevelDB's `Status::ToString()` shape for an engine error: `NotFound: `,
/// `Corruption: `, `Not implemented: `, `Invalid argument: ` or
/// `IO error: `, then what the engine says. Bindings (levigo among them)
/// hand the text on; some look at the code name.
pub(crate) fn status_text(error: &Error) -> String {
    let code = match error {
        Error::NotFound(_) => "NotFound",
        Error::Corruption { .. } => "Corruption",
        Error::NotSupported(_) => "Not implemented",
        Error::InvalidArgument(_) => "Invalid argument",
        // A held LOCK is an I/O error in LevelDB too; so is anything else.
        _ => "IO error",
    };
    format!("{code}: {error}")
}

/// Stores `failure`'s text in `*errptr` as LevelDB's `SaveError` does: a
/// message already there is freed first. A null `errptr` drops the message
/// (LevelDB would crash).
///
/// # Safety
/// `errptr` is null or points to a `char*` that is null or was returned by
/// this library.
pub(crate) unsafe fn save_error(errptr: *mut *mut c_char, failure: &Failure) {
    if errptr.is_null() {
        return;
    }
    // SAFETY: the caller's contract: a valid `char**`, holding null or a
    // message this library allocated with malloc.
    unsafe {
        if !(*errptr).is_null() {
            libc::free((*errptr).cast());
        }
        *errptr = malloc_c_string(&failure.text());
    }
}

/// Runs `body`, reporting an error or a panic through `errptr` and
/// returning `default` then. This is the one way an entry point with an
/// `errptr` runs its work.
///
/// # Safety
/// As [`save_error`].
pub(crate) unsafe fn with_errptr<T>(
    errptr: *mut *mut c_char,
    default: T,
    body: impl FnOnce() -> Result<T, Failure>,
) -> T {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::Message(format!("IO error: {}", panic_text(&*payload))),
    };
    // SAFETY: passed on from the caller.
    unsafe { save_error(errptr, &failure) };
    default
}

/// Runs `body` for an entry point without an `errptr`: a panic gives
/// `default` (LevelDB's functions of this kind cannot fail).
pub(crate) fn no_errptr<T>(default: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(default)
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".to_string());
    format!("internal error in libshaledb (a Rust panic, caught): {detail}")
}

/// A `malloc`ed, NUL-terminated copy of `text` (an interior NUL, which C
/// cannot hold, becomes `?`). Null only when malloc fails.
pub(crate) fn malloc_c_string(text: &str) -> *mut c_char {
    let bytes = text.as_bytes();
    // SAFETY: malloc of len + 1 bytes, each written below before use.
    unsafe {
        let out = libc::malloc(bytes.len() + 1).cast::<u8>();
        if out.is_null() {
            return std::ptr::null_mut();
        }
        for (i, &b) in bytes.iter().enumerate() {
            *out.add(i) = if b == 0 { b'?' } else { b };
        }
        *out.add(bytes.len()) = 0;
        out.cast()
    }
}

/// A `malloc`ed copy of `bytes` (not NUL-terminated, as LevelDB's
/// `CopyString`); at least one byte is allocated so that an empty value is
/// not confused with "not found". Null only when malloc fails.
pub(crate) fn malloc_copy(bytes: &[u8]) -> *mut c_char {
    // SAFETY: malloc of at least len bytes, then a copy of len bytes into it.
    unsafe {
        let out = libc::malloc(bytes.len().max(1)).cast::<u8>();
        if !out.is_null() {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len());
        }
        out.cast()
    }
}

/// `value` as a `malloc`ed buffer the caller releases with `leveldb_free`
/// (or `free`), without copying it: the vector's own buffer, which
/// [`crate::allocator::Malloc`] took from `malloc`. An empty vector owns no
/// buffer, so one byte is allocated for it, as [`malloc_copy`] does, so
/// that an empty value is not confused with "not found". Null only when
/// malloc fails.
pub(crate) fn into_malloced(value: Vec<u8>) -> *mut c_char {
    if value.capacity() == 0 {
        return malloc_copy(&[]);
    }
    // The buffer now belongs to the caller; its capacity may exceed its
    // length, which `free` does not need to know.
    std::mem::ManuallyDrop::new(value).as_mut_ptr().cast()
}

/// The bytes `(data, len)` a C caller passed; empty for a null `data`.
///
/// # Safety
/// `data` is null or points to `len` readable bytes that outlive `'a`.
pub(crate) unsafe fn bytes<'a>(data: *const c_char, len: usize) -> &'a [u8] {
    if data.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(data.cast(), len) }
    }
}

/// A C string argument as Rust text (lossy for bytes that are not UTF-8);
/// `None` for null.
///
/// # Safety
/// `text` is null or a NUL-terminated string.
pub(crate) unsafe fn c_str(text: *const c_char) -> Option<String> {
    if text.is_null() {
        None
    } else {
        // SAFETY: the caller's contract.
        Some(
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// Frees memory this library returned: values from `leveldb_get`,
/// messages stored in `errptr`, property values, the test directory.
///
/// # Safety
/// `ptr` is null or was returned by this library and not freed yet.
#[no_mangle]
pub unsafe extern "C" fn leveldb_free(ptr: *mut libc::c_void) {
    // SAFETY: the caller's contract; free(NULL) does nothing.
    unsafe { libc::free(ptr) }
}

/// The LevelDB release whose C API this is: 1.
#[no_mangle]
pub extern "C" fn leveldb_major_version() -> libc::c_int {
    1
}

/// The LevelDB release whose C API this is: 23.
#[no_mangle]
pub extern "C" fn leveldb_minor_version() -> libc::c_int {
    23
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// Takes the message out of `errptr`, freeing it.
    fn take(errptr: &mut *mut c_char) -> Option<String> {
        if errptr.is_null() {
            return None;
        }
        // SAFETY: a message this module allocated.
        let text = unsafe { CStr::from_ptr(*errptr) }
            .to_str()
            .unwrap()
            .to_string();
        unsafe { leveldb_free((*errptr).cast()) };
        *errptr = std::ptr::null_mut();
        Some(text)
    }

    #[test]
    fn a_panic_becomes_an_error_message_and_the_default() {
        let mut err: *mut c_char = std::ptr::null_mut();
        let value =
            unsafe { with_errptr(&mut err, 7, || -> Result<i32, Failure> { panic!("boom") }) };
        assert_eq!(value, 7);
        let text = take(&mut err).unwrap();
        assert!(
            text.starts_with("IO error: internal error in libshaledb"),
            "{text}"
        );
        assert!(text.contains("boom"), "{text}");
        assert_eq!(no_errptr(3, || -> i32 { panic!("quiet") }), 3);
    }

    #[test]
    fn a_second_error_replaces_the_first() {
        let mut err: *mut c_char = std::ptr::null_mut();
        let first = Failure::Engine(Error::NotFound("one".into()));
        let second = Failure::Engine(Error::InvalidArgument("two".into()));
        unsafe {
            save_error(&mut err, &first);
            save_error(&mut err, &second);
        }
        assert_eq!(
            take(&mut err).unwrap(),
            "Invalid argument: invalid argument: two"
        );
        // A null errptr drops the message instead of crashing.
        unsafe { save_error(std::ptr::null_mut(), &first) };
    }

    #[test]
    fn status_text_names_leveldb_s_codes() {
        let corruption = Error::Corruption {
            location: Default::default(),
            reason: "bad block".into(),
        };
        assert!(status_text(&corruption).starts_with("Corruption: "));
        assert!(status_text(&Error::NotSupported("x".into())).starts_with("Not implemented: "));
        assert!(status_text(&Error::Busy("x".into())).starts_with("IO error: "));
        assert!(status_text(&Error::NotFound("x".into())).starts_with("NotFound: "));
    }

    #[test]
    fn copies_are_malloced_and_nul_safe() {
        let text = malloc_c_string("a\0b");
        // SAFETY: just allocated, NUL-terminated.
        assert_eq!(unsafe { CStr::from_ptr(text) }.to_str().unwrap(), "a?b");
        unsafe { leveldb_free(text.cast()) };
        let empty = malloc_copy(b"");
        assert!(!empty.is_null());
        unsafe { leveldb_free(empty.cast()) };
        // The engine's buffer, handed over whole, is freed by C's free.
        let value = into_malloced(b"value".to_vec());
        // SAFETY: five bytes, just handed over.
        assert_eq!(
            unsafe { std::slice::from_raw_parts(value.cast::<u8>(), 5) },
            b"value"
        );
        unsafe { libc::free(value.cast()) };
        let empty = into_malloced(Vec::new());
        assert!(!empty.is_null());
        unsafe { leveldb_free(empty.cast()) };
    }
}
