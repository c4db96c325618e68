//! Keys, values and bounds from Python: `bytes`, or any object with the
//! buffer protocol (`bytearray`, `memoryview`, `array.array`, ...), whose
//! bytes are copied at the call. Anything else (`str`, `int`, `None` where
//! a key is required) is a `TypeError`, as in plyvel.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView};

/// The bytes of `obj`: `obj` itself when it is `bytes` (no copy), else a
/// `bytes` copy of its buffer. `what` names the argument in the error.
pub fn bytes_arg<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(bytes) = obj.downcast::<PyBytes>() {
        return Ok(bytes.clone());
    }
    let not_bytes = || {
        PyTypeError::new_err(format!(
            "{what} must be bytes or a bytes-like object, not {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "unknown".to_string(), |n| n.to_string())
        ))
    };
    // A mutable buffer (bytearray) may change while the GIL is released:
    // take a copy now, as plyvel's callers would see it at the call.
    let view = PyMemoryView::from(obj).map_err(|_| not_bytes())?;
    view.call_method0("tobytes")?
        .downcast_into::<PyBytes>()
        .map_err(|_| not_bytes())
}

/// Like [`bytes_arg`], but `None` gives `None`.
pub fn optional_bytes_arg<'py>(
    obj: Option<&Bound<'py, PyAny>>,
    what: &str,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    match obj {
        None => Ok(None),
        Some(obj) if obj.is_none() => Ok(None),
        Some(obj) => bytes_arg(obj, what).map(Some),
    }
}

/// `prefix + key` (a `PrefixedDB`'s key), or `key` as it is.
pub fn prefixed(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + key.len());
    out.extend_from_slice(prefix);
    out.extend_from_slice(key);
    out
}

/// The smallest key above every key that starts with `prefix`: `prefix`
/// with its last byte that is not 0xff incremented and the rest cut off.
/// `None` when `prefix` is empty or all 0xff (no key is above them all).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&byte| byte != 0xff)?;
    let mut out = prefix[..=last].to_vec();
    out[last] += 1;
    Some(out)
}

/// The smallest key after `key` in bytewise order: `key` followed by a zero
/// byte. Turns an inclusive stop into an exclusive bound, an exclusive
/// start into an inclusive one.
pub fn key_successor(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.extend_from_slice(key);
    out.push(0);
    out
}
