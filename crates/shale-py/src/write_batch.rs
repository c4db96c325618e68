//! `WriteBatch`: puts and deletes applied atomically by `write()`, or at the
//! end of a `with` block; with `transaction=True` a block that raises
//! writes nothing (plyvel's).

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;

use crate::bytes_arg::{bytes_arg, prefixed};
use crate::errors::{database_closed, IntoPyResult};
use crate::shared::DbShared;

/// A batch of writes for one database (or prefixed view: keys get its
/// prefix). Made by `DB.write_batch()`.
#[derive(Debug)]
#[pyclass(frozen, module = "shaledb")]
pub struct WriteBatch {
    shared: Arc<DbShared>,
    prefix: Vec<u8>,
    transaction: bool,
    sync: bool,
    batch: Mutex<shale::WriteBatch>,
}

impl WriteBatch {
    pub fn new(
        shared: Arc<DbShared>,
        prefix: Vec<u8>,
        transaction: bool,
        sync: bool,
    ) -> WriteBatch {
        WriteBatch {
            shared,
            prefix,
            transaction,
            sync,
            batch: Mutex::new(shale::WriteBatch::new()),
        }
    }

    /// The batch. Held only for in-memory edits, never across I/O.
    fn batch(&self) -> MutexGuard<'_, shale::WriteBatch> {
        self.batch.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_open(&self) -> PyResult<()> {
        if self.shared.is_closed() {
            Err(database_closed())
        } else {
            Ok(())
        }
    }
}

#[pymethods]
impl WriteBatch {
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_open()?;
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        self.batch()
            .put(&prefixed(&self.prefix, key.as_bytes()), value.as_bytes())
            .into_py_result()
    }

    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_open()?;
        let key = bytes_arg(key, "key")?;
        self.batch()
            .delete(&prefixed(&self.prefix, key.as_bytes()))
            .into_py_result()
    }

    /// Discards the buffered writes.
    fn clear(&self) -> PyResult<()> {
        self.check_open()?;
        self.batch().clear();
        Ok(())
    }

    /// Writes the buffered writes, atomically. The batch keeps them: a
    /// second `write()` writes them again.
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        self.check_open()?;
        let batch = self.batch().clone();
        self.shared.write(py, batch, self.sync)
    }

    /// Appends the writes buffered in `source` (LevelDB's `Append`).
    fn append(&self, source: &Bound<'_, WriteBatch>) -> PyResult<()> {
        self.check_open()?;
        let source = source.get();
        // `batch.append(batch)` would lock the same mutex twice: copy first.
        let copied = source.batch().clone();
        self.batch().append(&copied).into_py_result()
    }

    /// Size in bytes of the batch's encoding (LevelDB's `ApproximateSize`).
    fn approximate_size(&self) -> usize {
        self.batch().approximate_size()
    }

    fn __enter__(slf: Py<Self>) -> PyResult<Py<Self>> {
        slf.get().check_open()?;
        Ok(slf)
    }

    /// Writes the batch, unless the block raised and the batch is a
    /// transaction; then it is discarded. Exceptions propagate.
    #[pyo3(signature = (exc_type=None, _exc_value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let raised = exc_type.is_some_and(|t| !t.is_none());
        if !(self.transaction && raised) {
            self.write(py)?;
        }
        self.batch().clear();
        Ok(false)
    }
}
