//! plyvel's exceptions and how the engine's errors map onto them.
//!
//! | engine error (`shale::Error`) | Python exception |
//! | --- | --- |
//! | `Corruption` | `CorruptionError` |
//! | `Io`, `Busy` (the LOCK is held) | `IOError` (also an `OSError`) |
//! | `InvalidArgument`, `NotSupported`, `NotFound` | `Error` |
//!
//! This is what LevelDB's statuses give under plyvel: a held lock is an
//! I/O error there, and opening a missing database without
//! `create_if_missing` or an existing one with `error_if_exists` is an
//! invalid argument.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};

create_exception!(
    shaledb,
    Error,
    PyException,
    "Generic database error; the parent of the other shaledb errors."
);
create_exception!(
    shaledb,
    CorruptionError,
    Error,
    "Damaged data: a bad checksum, a record that does not decode."
);
create_exception!(
    shaledb,
    IteratorInvalidError,
    Error,
    "A RawIterator was asked for an entry while not positioned on one."
);

/// `IOError` derives from both `Error` and the built-in `OSError`, as
/// plyvel's does; `create_exception!` takes one base, so the class is made
/// at import time with `type(...)`.
static IO_ERROR: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// The `IOError` class.
pub fn io_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    IO_ERROR
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [
                    py.get_type::<Error>().into_any(),
                    py.get_type::<PyOSError>().into_any(),
                ],
            )?;
            let namespace = PyDict::new(py);
            namespace.set_item("__module__", "shaledb")?;
            namespace.set_item("__doc__", "I/O error; also a built-in OSError.")?;
            let class = py
                .get_type::<PyType>()
                .call1(("IOError", bases, namespace))?
                .downcast_into::<PyType>()?;
            Ok::<_, PyErr>(class.unbind())
        })
        .map(|class| class.bind(py))
}

/// The Python exception for an engine error.
pub fn to_py_err(err: shale::Error) -> PyErr {
    let message = err.to_string();
    match err {
        shale::Error::Corruption { .. } => CorruptionError::new_err(message),
        shale::Error::Io { .. } | shale::Error::Busy(_) => {
            Python::with_gil(|py| match io_error_type(py) {
                Ok(class) => PyErr::from_type(class.clone(), message),
                Err(failed) => failed,
            })
        }
        _ => Error::new_err(message),
    }
}

/// Shorthand: an engine result as a Python result.
pub trait IntoPyResult<T> {
    /// Maps the error with [`to_py_err`].
    fn into_py_result(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for shale::Result<T> {
    fn into_py_result(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}

/// plyvel's error for any use of a closed database.
pub fn database_closed() -> PyErr {
    PyRuntimeError::new_err("Database is closed")
}

/// plyvel's error for any use of a closed iterator (or one whose database
/// was closed).
pub fn iterator_closed() -> PyErr {
    PyRuntimeError::new_err("Database or iterator is closed")
}

/// plyvel's error for any use of a released snapshot (or one whose
/// database was closed).
pub fn snapshot_closed() -> PyErr {
    PyRuntimeError::new_err("Database or snapshot is closed")
}
