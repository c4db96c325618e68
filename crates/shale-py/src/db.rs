//! `DB`: an open database, plyvel's `DB` name for name, plus `stats()`.
//!
//! The class `DB` is declared in `shared.rs`, with the state that every
//! object made from it shares; its methods are here.
//!
//! The engine handle lives in a shared slot that `close()` empties; every
//! call clones the handle out (cheap) and works on the clone with the GIL
//! released, so a `close()` from another thread never pulls the database
//! out from under a running call. `close()` waits for the calls under way
//! to finish, so that when it returns the engine is closed and its LOCK
//! released (the path can be opened again at once).

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::bytes_arg::{bytes_arg, optional_bytes_arg};
use crate::errors::{database_closed, to_py_err, IntoPyResult};
use crate::iterator::{new_iterator, new_raw_iterator, IteratorArgs, RawIteratorArgs};
use crate::options::parse_options;
use crate::prefixed::PrefixedDB;
use crate::shared::{read_options, Db, DbShared};
use crate::snapshot::Snapshot;
use crate::write_batch::WriteBatch as PyWriteBatch;

/// The directory of a database from `name`: `str`, `bytes` or a path-like.
pub fn database_path(name: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    if let Ok(bytes) = name.downcast::<PyBytes>() {
        use std::os::unix::ffi::OsStrExt;
        return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes.as_bytes())));
    }
    name.extract::<PathBuf>()
        .map_err(|_| PyTypeError::new_err("'name' arg must be a byte string or a unicode string"))
}

#[pymethods]
impl Db {
    #[new]
    #[pyo3(signature = (name, **options))]
    fn new(
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Db> {
        let path = database_path(name)?;
        let options = parse_options("DB", options)?;
        let db = py
            .allow_threads(|| shale::DB::open(&path, options))
            .into_py_result()?;
        Ok(Db {
            shared: Arc::new(DbShared::new(db)),
            name: name.clone().unbind(),
        })
    }

    /// The name the database was opened with (read-only).
    #[getter]
    fn name(&self, py: Python<'_>) -> PyObject {
        self.name.clone_ref(py)
    }

    /// True once `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Closes the database: open iterators are closed, background work
    /// finishes, files and the LOCK are released. Closing twice is fine.
    fn close(&self, py: Python<'_>) {
        let shared = self.shared.clone();
        py.allow_threads(move || shared.close());
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type=None, _exc_value=None, _traceback=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc_value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<shaledb.DB with name {}{}>",
            self.name.bind(py).repr()?,
            if self.shared.is_closed() {
                " (closed)"
            } else {
                ""
            }
        ))
    }

    /// The value of `key`, or `default` when it is absent.
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
        self.shared.get(
            py,
            key.as_bytes(),
            default.unwrap_or_else(|| py.None()),
            read_options(verify_checksums, fill_cache, None),
        )
    }

    /// Sets `key` to `value`; with `sync` the WAL is synced first.
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
        self.shared
            .put(py, b"", key.as_bytes(), value.as_bytes(), sync)
    }

    /// Removes `key` (not an error when absent).
    #[pyo3(signature = (key, *, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        self.shared.delete(py, b"", key.as_bytes(), sync)
    }

    /// `key in db`: true when `key` has a value.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_arg(key, "key")?;
        let value = self.shared.get(
            py,
            key.as_bytes(),
            py.None(),
            read_options(None, true, None),
        )?;
        Ok(!value.is_none(py))
    }

    /// A write batch; see `WriteBatch`.
    #[pyo3(signature = (*, transaction=false, sync=false))]
    fn write_batch(&self, transaction: bool, sync: bool) -> PyResult<PyWriteBatch> {
        if self.shared.is_closed() {
            return Err(database_closed());
        }
        Ok(PyWriteBatch::new(
            self.shared.clone(),
            Vec::new(),
            transaction,
            sync,
        ))
    }

    /// An iterator over the database; see `Iterator` for the arguments.
    #[pyo3(signature = (**kwargs))]
    fn iterator(
        &self,
        py: Python<'_>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::iterator::Iterator> {
        let args = IteratorArgs::parse(kwargs)?;
        new_iterator(py, &self.shared, None, args, None)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<crate::iterator::Iterator> {
        new_iterator(py, &self.shared, None, IteratorArgs::default(), None)
    }

    /// A raw iterator (LevelDB's cursor interface).
    #[pyo3(signature = (**kwargs))]
    fn raw_iterator(
        &self,
        py: Python<'_>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::iterator::RawIterator> {
        let args = RawIteratorArgs::parse(kwargs)?;
        new_raw_iterator(py, &self.shared, args, None)
    }

    /// A consistent point-in-time view.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        Snapshot::new(py, self.shared.clone(), Vec::new())
    }

    /// A property as bytes, or `None` for an unknown name. LevelDB's names
    /// (`leveldb.stats`, `leveldb.num-files-at-level<N>`, `leveldb.sstables`,
    /// `leveldb.approximate-memory-usage`) and ours (`shale.` prefix, and
    /// `shale.executors`).
    fn get_property(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Py<PyBytes>>> {
        let name = if let Ok(text) = name.downcast::<PyString>() {
            text.to_cow()?.into_owned()
        } else {
            String::from_utf8_lossy(bytes_arg(name, "name")?.as_bytes()).into_owned()
        };
        let db = self.shared.handle()?;
        let value = py.allow_threads(|| db.property(&name));
        Ok(value.map(|value| PyBytes::new(py, value.as_bytes()).unbind()))
    }

    /// Compacts the keys from `start` to `stop` (both included; `None`:
    /// unbounded) down through every level that holds them. `executor`
    /// (a ShaleDB extra): run the jobs on `"streaming"`, `"parallel"`,
    /// `"opencl"` or `"remote"` (then on `streaming` if it fails) instead
    /// of where the scheduler would (`None` or `"auto"`).
    #[pyo3(signature = (*, start=None, stop=None, executor=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        executor: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let start = optional_bytes_arg(start, "start")?;
        let stop = optional_bytes_arg(stop, "stop")?;
        let executor = match executor {
            None => shale::ExecutorChoice::Auto,
            Some(name) if name.is_none() => shale::ExecutorChoice::Auto,
            Some(name) => name
                .extract::<String>()
                .map_err(|_| PyTypeError::new_err("'executor' must be a str"))?
                .parse()
                .map_err(|message| to_py_err(shale::Error::InvalidArgument(message)))?,
        };
        let (start, stop) = (
            start.as_ref().map(|b| b.as_bytes()),
            stop.as_ref().map(|b| b.as_bytes()),
        );
        let options = shale::CompactRangeOptions { executor };
        let db = self.shared.handle()?;
        py.allow_threads(|| db.compact_range_with(start, stop, &options))
            .into_py_result()
    }

    /// Approximate bytes on disk for the keys in `[start, stop)`.
    fn approximate_size(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let start = bytes_arg(start, "start")?;
        let stop = bytes_arg(stop, "stop")?;
        let db = self.shared.handle()?;
        let (start, stop) = (start.as_bytes(), stop.as_bytes());
        let sizes = py.allow_threads(|| db.approximate_sizes(&[(start, stop)]));
        Ok(sizes.first().copied().unwrap_or(0))
    }

    /// Approximate bytes on disk for each `(start, stop)` range.
    #[pyo3(signature = (*ranges))]
    fn approximate_sizes(&self, py: Python<'_>, ranges: &Bound<'_, PyTuple>) -> PyResult<Vec<u64>> {
        let mut owned = Vec::with_capacity(ranges.len());
        for range in ranges.iter() {
            let (start, stop): (Bound<'_, PyAny>, Bound<'_, PyAny>) = range
                .extract()
                .map_err(|_| PyTypeError::new_err("each range must be a (start, stop) tuple"))?;
            owned.push((bytes_arg(&start, "start")?, bytes_arg(&stop, "stop")?));
        }
        let slices: Vec<(&[u8], &[u8])> = owned
            .iter()
            .map(|(a, b)| (a.as_bytes(), b.as_bytes()))
            .collect();
        let db = self.shared.handle()?;
        Ok(py.allow_threads(|| db.approximate_sizes(&slices)))
    }

    /// A view of the keys that start with `prefix`, with the prefix taken
    /// off.
    fn prefixed_db(slf: &Bound<'_, Self>, prefix: &Bound<'_, PyAny>) -> PyResult<PrefixedDB> {
        let prefix = bytes_arg(prefix, "prefix")?;
        Ok(PrefixedDB::new(
            slf.clone().unbind(),
            prefix.as_bytes().to_vec(),
        ))
    }

    /// ShaleDB extra: compaction and stall statistics since open, as a dict
    /// (the engine's one schema: `shale::stats`).
    fn stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        let db = self.shared.handle()?;
        crate::stats::to_dict(py, &db)
    }
}
