//! `DB`: an open database, plyvel's `DB` name for name, plus `stats()`.
//!
//! The engine handle lives in a shared slot that `close()` empties; every
//! call clones the handle out (cheap) and works on the clone with the GIL
//! released, so a `close()` from another thread never pulls the database
//! out from under a running call. `close()` waits for the calls under way
//! to finish, so that when it returns the engine is closed and its LOCK
//! released (the path can be opened again at once).

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, RwLock};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use shale::{ReadOptions, WriteBatch, WriteOptions};

use crate::bytes_arg::{bytes_arg, optional_bytes_arg};
use crate::cursor::{lock, CursorRegistry, SharedCursor};
use crate::errors::{database_closed, IntoPyResult};
use crate::iterator::{new_iterator, new_raw_iterator, IteratorArgs, RawIteratorArgs};
use crate::options::parse_options;
use crate::prefixed::PrefixedDB;
use crate::snapshot::Snapshot;
use crate::write_batch::WriteBatch as PyWriteBatch;

/// What every object made from one `DB` shares: the engine handle (`None`
/// once closed) and the cursors open on it.
#[derive(Debug, Default)]
pub struct DbShared {
    db: RwLock<Option<shale::DB>>,
    cursors: Mutex<CursorRegistry>,
    /// Calls holding a [`DbHandle`], and the signal `close()` waits on.
    in_flight: Mutex<usize>,
    idle: Condvar,
}

/// The engine handle for one call: `close()` waits until every one of these
/// is dropped.
#[derive(Debug)]
pub struct DbHandle<'a> {
    db: shale::DB,
    shared: &'a DbShared,
}

impl Deref for DbHandle<'_> {
    type Target = shale::DB;

    fn deref(&self) -> &shale::DB {
        &self.db
    }
}

impl Drop for DbHandle<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .shared
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *in_flight -= 1;
        if *in_flight == 0 {
            self.shared.idle.notify_all();
        }
    }
}

/// The last handle of a database that was not closed: dropping it joins
/// the background threads, which may be calling a Python comparator and
/// waiting for the GIL, so it is dropped without the GIL.
impl Drop for DbShared {
    fn drop(&mut self) {
        let db = self.db.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(db) = db {
            Python::with_gil(|py| py.allow_threads(move || drop(db)));
        }
    }
}

impl DbShared {
    /// A clone of the engine handle for one call, or plyvel's
    /// `RuntimeError` when closed.
    pub fn handle(&self) -> PyResult<DbHandle<'_>> {
        let slot = self.db.read().unwrap_or_else(|e| e.into_inner());
        let db = slot.clone().ok_or_else(database_closed)?;
        // Counted while the slot is read-locked, so `close()` (which empties
        // the slot under the write lock first) sees every call that got one.
        *self.in_flight.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Ok(DbHandle { db, shared: self })
    }

    /// True once `close()` ran.
    pub fn is_closed(&self) -> bool {
        self.db.read().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// Adds a cursor so that `close()` closes it. False when the database
    /// closed meanwhile (the cursor is then closed).
    pub fn register(&self, cursor: &SharedCursor) -> bool {
        self.cursors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .register(cursor)
    }

    /// Closes the open cursors, then lets go of the engine handle. Waits
    /// for cursors in use by other threads: call with the GIL released.
    fn close(&self) {
        let cursors = self
            .cursors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .close();
        for cursor in cursors.iter().filter_map(std::sync::Weak::upgrade) {
            lock(&cursor).iter = None;
        }
        let db = self.db.write().unwrap_or_else(|e| e.into_inner()).take();
        // Calls under way hold clones: wait for them, so that ours is the
        // last and dropping it stops and joins the background threads.
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        while *in_flight > 0 {
            in_flight = self.idle.wait(in_flight).unwrap_or_else(|e| e.into_inner());
        }
        drop(in_flight);
        drop(db);
    }

    /// `get` for the database, a prefixed view or a snapshot: the value of
    /// `key`, or `default`.
    pub fn get(
        &self,
        py: Python<'_>,
        key: &[u8],
        default: PyObject,
        read: ReadOptions,
    ) -> PyResult<PyObject> {
        let db = self.handle()?;
        let value = py.allow_threads(|| db.get(&read, key)).into_py_result()?;
        Ok(match value {
            Some(value) => PyBytes::new(py, &value).into_any().unbind(),
            None => default,
        })
    }

    /// Applies `batch`.
    pub fn write(&self, py: Python<'_>, batch: WriteBatch, sync: bool) -> PyResult<()> {
        let db = self.handle()?;
        py.allow_threads(|| db.write(&WriteOptions { sync }, batch))
            .into_py_result()
    }

    /// `put` (with `prefix` in front of `key`).
    pub fn put(
        &self,
        py: Python<'_>,
        prefix: &[u8],
        key: &[u8],
        value: &[u8],
        sync: bool,
    ) -> PyResult<()> {
        let mut batch = WriteBatch::with_capacity(prefix.len() + key.len() + value.len() + 32);
        batch
            .put(&crate::bytes_arg::prefixed(prefix, key), value)
            .into_py_result()?;
        self.write(py, batch, sync)
    }

    /// `delete` (with `prefix` in front of `key`).
    pub fn delete(&self, py: Python<'_>, prefix: &[u8], key: &[u8], sync: bool) -> PyResult<()> {
        let mut batch = WriteBatch::with_capacity(prefix.len() + key.len() + 32);
        batch
            .delete(&crate::bytes_arg::prefixed(prefix, key))
            .into_py_result()?;
        self.write(py, batch, sync)
    }
}

/// Read options from plyvel's arguments. `verify_checksums=None` (the
/// default) keeps the engine's default, which verifies.
pub fn read_options(
    verify_checksums: Option<bool>,
    fill_cache: bool,
    snapshot: Option<shale::Snapshot>,
) -> ReadOptions {
    let mut read = ReadOptions::new();
    if let Some(verify) = verify_checksums {
        read.verify_checksums = verify;
    }
    read.fill_cache = fill_cache;
    read.snapshot = snapshot;
    read
}

/// The directory of a database from `name`: `str`, `bytes` or a path-like.
pub fn database_path(name: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    if let Ok(bytes) = name.downcast::<PyBytes>() {
        use std::os::unix::ffi::OsStrExt;
        return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes.as_bytes())));
    }
    name.extract::<PathBuf>()
        .map_err(|_| PyTypeError::new_err("'name' arg must be a byte string or a unicode string"))
}

/// A LevelDB database, opened with ShaleDB.
#[derive(Debug)]
#[pyclass(frozen, module = "shaledb", name = "DB")]
pub struct Db {
    shared: Arc<DbShared>,
    name: PyObject,
}

impl Db {
    pub fn shared(&self) -> &Arc<DbShared> {
        &self.shared
    }
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
            shared: Arc::new(DbShared {
                db: RwLock::new(Some(db)),
                cursors: Mutex::default(),
                in_flight: Mutex::new(0),
                idle: Condvar::new(),
            }),
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
            None => None,
            Some(name) if name.is_none() => None,
            Some(name) => Some(
                name.extract::<String>()
                    .map_err(|_| PyTypeError::new_err("'executor' must be a str"))?,
            ),
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
    /// (see `stats.rs` for the keys).
    fn stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        let db = self.shared.handle()?;
        let stats = py.allow_threads(|| crate::stats::Stats::collect(&db));
        stats.to_dict(py)
    }
}
