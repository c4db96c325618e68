//! `Snapshot`: reads as of one moment, as plyvel's. Released by `close()`
//! / `release()`, by leaving its `with` block, or when Python drops it.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::bytes_arg::{bytes_arg, prefixed};
use crate::errors::snapshot_closed;
use crate::iterator::{new_iterator, new_raw_iterator, IteratorArgs, RawIteratorArgs};
use crate::shared::{read_options, DbShared};

/// A consistent point-in-time view of a database (or of a prefixed view:
/// keys are then relative to its prefix).
#[derive(Debug)]
#[pyclass(frozen, module = "shaledb")]
pub struct Snapshot {
    shared: Arc<DbShared>,
    prefix: Vec<u8>,
    /// `None` once released.
    snapshot: Mutex<Option<shale::Snapshot>>,
}

impl Snapshot {
    /// A snapshot of the database as it is now. Takes the engine's state
    /// lock, so the GIL is released meanwhile.
    pub fn new(py: Python<'_>, shared: Arc<DbShared>, prefix: Vec<u8>) -> PyResult<Snapshot> {
        let snapshot = {
            let db = shared.handle()?;
            py.allow_threads(|| db.snapshot())
        };
        Ok(Snapshot {
            shared,
            prefix,
            snapshot: Mutex::new(Some(snapshot)),
        })
    }

    /// The engine snapshot, or plyvel's `RuntimeError` when it or the
    /// database is closed.
    fn live(&self) -> PyResult<shale::Snapshot> {
        if self.shared.is_closed() {
            return Err(snapshot_closed());
        }
        self.snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(snapshot_closed)
    }

    fn db_prefix(&self) -> Option<&[u8]> {
        (!self.prefix.is_empty()).then_some(self.prefix.as_slice())
    }
}

#[pymethods]
impl Snapshot {
    /// The value of `key` as of the snapshot, or `default`.
    #[pyo3(signature = (key, default=None, *, verify_checksums=None, fill_cache=true))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
        verify_checksums: Option<bool>,
        fill_cache: bool,
    ) -> PyResult<PyObject> {
        let key = bytes_arg(key, "key")?;
        let snapshot = self.live()?;
        self.shared.get(
            py,
            &prefixed(&self.prefix, key.as_bytes()),
            default.unwrap_or_else(|| py.None()),
            read_options(verify_checksums, fill_cache, Some(snapshot)),
        )
    }

    /// `key in snapshot`.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let value = self.get(py, key, None, None, true)?;
        Ok(!value.is_none(py))
    }

    /// An iterator over the snapshot; the arguments of `DB.iterator()`.
    #[pyo3(signature = (**kwargs))]
    fn iterator(
        &self,
        py: Python<'_>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::iterator::Iterator> {
        let args = IteratorArgs::parse(kwargs)?;
        let snapshot = self.live()?;
        new_iterator(py, &self.shared, self.db_prefix(), args, Some(snapshot))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<crate::iterator::Iterator> {
        self.iterator(py, None)
    }

    /// A raw iterator over the snapshot (whole keys, prefix included).
    #[pyo3(signature = (**kwargs))]
    fn raw_iterator(
        &self,
        py: Python<'_>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::iterator::RawIterator> {
        let args = RawIteratorArgs::parse(kwargs)?;
        let snapshot = self.live()?;
        new_raw_iterator(py, &self.shared, args, Some(snapshot))
    }

    /// Releases the snapshot (compactions may then drop what only it
    /// could see). Iterators made from it stay usable. Twice is fine.
    fn close(&self) {
        let released = self
            .snapshot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(released);
    }

    /// The same as `close()` (LevelDB's name).
    fn release(&self) {
        self.close();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type=None, _exc_value=None, _traceback=None))]
    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close();
        false
    }
}
