//! `PrefixedDB`: a view of the keys that start with a prefix, which it
//! adds on the way in and takes off on the way out (plyvel's).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::bytes_arg::{bytes_arg, prefixed};
use crate::errors::database_closed;
use crate::iterator::{new_iterator, IteratorArgs};
use crate::shared::{read_options, Db};
use crate::snapshot::Snapshot;
use crate::write_batch::WriteBatch;

/// A `DB`-like view whose keys are prefixed with `prefix`. Made by
/// `DB.prefixed_db()` (or `PrefixedDB.prefixed_db()`, which appends).
#[derive(Debug)]
#[pyclass(frozen, module = "shaledb")]
pub struct PrefixedDB {
    db: Py<Db>,
    prefix: Vec<u8>,
}

impl PrefixedDB {
    pub fn new(db: Py<Db>, prefix: Vec<u8>) -> PrefixedDB {
        PrefixedDB { db, prefix }
    }
}

#[pymethods]
impl PrefixedDB {
    /// The underlying `DB`.
    #[getter]
    fn db(&self, py: Python<'_>) -> Py<Db> {
        self.db.clone_ref(py)
    }

    /// The prefix of this view.
    #[getter]
    fn prefix<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.prefix)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<shaledb.PrefixedDB with prefix {}>",
            PyBytes::new(py, &self.prefix)
                .repr()
                .map_or_else(|_| "?".to_string(), |r| r.to_string())
        )
    }

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
        self.db.get().shared().get(
            py,
            &prefixed(&self.prefix, key.as_bytes()),
            default.unwrap_or_else(|| py.None()),
            read_options(verify_checksums, fill_cache, None),
        )
    }

    #[pyo3(signature = (key, value, *, sync=false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        self.db
            .get()
            .shared()
            .put(py, &self.prefix, key.as_bytes(), value.as_bytes(), sync)
    }

    #[pyo3(signature = (key, *, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        self.db
            .get()
            .shared()
            .delete(py, &self.prefix, key.as_bytes(), sync)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let value = self.get(py, key, None, None, true)?;
        Ok(!value.is_none(py))
    }

    #[pyo3(signature = (*, transaction=false, sync=false))]
    fn write_batch(&self, transaction: bool, sync: bool) -> PyResult<WriteBatch> {
        let shared = self.db.get().shared();
        if shared.is_closed() {
            return Err(database_closed());
        }
        Ok(WriteBatch::new(
            shared.clone(),
            self.prefix.clone(),
            transaction,
            sync,
        ))
    }

    #[pyo3(signature = (**kwargs))]
    fn iterator(
        &self,
        py: Python<'_>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::iterator::Iterator> {
        let args = IteratorArgs::parse(kwargs)?;
        new_iterator(py, self.db.get().shared(), Some(&self.prefix), args, None)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<crate::iterator::Iterator> {
        new_iterator(
            py,
            self.db.get().shared(),
            Some(&self.prefix),
            IteratorArgs::default(),
            None,
        )
    }

    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        Snapshot::new(py, self.db.get().shared().clone(), self.prefix.clone())
    }

    /// A view with `prefix` appended to this view's prefix.
    fn prefixed_db(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>) -> PyResult<PrefixedDB> {
        let prefix = bytes_arg(prefix, "prefix")?;
        Ok(PrefixedDB::new(
            self.db.clone_ref(py),
            prefixed(&self.prefix, prefix.as_bytes()),
        ))
    }
}
