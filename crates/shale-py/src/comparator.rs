//! A custom comparator given as a Python callable, as plyvel takes it
//! (`comparator=` and `comparator_name=`): `comparator(a, b)` returns a
//! number below, equal to or above 0 as `a` sorts before, with or after `b`.
//!
//! The engine calls it from whatever thread compares keys (writers,
//! readers, the flush and compaction threads), taking the GIL for each call;
//! every call into the engine releases the GIL first, so a thread waiting
//! on the engine never holds it. A comparator that raises leaves the engine
//! no order to trust: like plyvel, the exception is printed and the process
//! aborts rather than write keys out of order. A callable that cannot
//! compare two sample keys is refused when the database opens, before any
//! key is written.

use std::cmp::Ordering;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shale::format::comparator::Comparator;

/// The callable and its name.
#[derive(Debug)]
pub struct PyComparator {
    name: String,
    callable: PyObject,
}

impl PyComparator {
    /// Checks `callable` and `name` as plyvel does, then calls the
    /// callable once on sample keys so that a comparator that cannot
    /// compare fails here, with its own exception, and not in the engine.
    pub fn new(callable: &Bound<'_, PyAny>, name: &Bound<'_, PyAny>) -> PyResult<PyComparator> {
        if !callable.is_callable() {
            return Err(PyTypeError::new_err(
                "custom comparator object must be callable",
            ));
        }
        let name = name
            .downcast::<PyBytes>()
            .map_err(|_| PyTypeError::new_err("'comparator_name' must be bytes"))?;
        let name = std::str::from_utf8(name.as_bytes())
            .map_err(|_| PyValueError::new_err("'comparator_name' must be UTF-8"))?;
        if name.is_empty() {
            return Err(PyValueError::new_err("'comparator_name' must not be empty"));
        }
        let comparator = PyComparator {
            name: name.to_string(),
            callable: callable.clone().unbind(),
        };
        comparator.call(callable.py(), b"a", b"b")?;
        Ok(comparator)
    }

    fn call(&self, py: Python<'_>, a: &[u8], b: &[u8]) -> PyResult<Ordering> {
        let result = self
            .callable
            .bind(py)
            .call1((PyBytes::new(py, a), PyBytes::new(py, b)))?;
        Ok(if result.gt(0)? {
            Ordering::Greater
        } else if result.lt(0)? {
            Ordering::Less
        } else {
            Ordering::Equal
        })
    }
}

impl Comparator for PyComparator {
    fn name(&self) -> &str {
        &self.name
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        Python::with_gil(|py| match self.call(py, a, b) {
            Ok(ordering) => ordering,
            Err(err) => {
                err.print(py);
                eprintln!(
                    "FATAL: the custom comparator {:?} raised; aborting so that no key is \
                     written out of order",
                    self.name
                );
                std::process::abort()
            }
        })
    }

    // plyvel's comparator does not shorten index keys either: an index key
    // is then the last key of its block, right in any order.
    fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}

    fn find_short_successor(&self, _key: &mut Vec<u8>) {}
}
