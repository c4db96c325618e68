//! What the objects made from one `DB` share: the engine handle
//! ([`DbShared`], with the per-call [`DbHandle`]), the `DB` class itself
//! (its methods are in `db.rs`) and the read options built from plyvel's
//! arguments. `DB`, `PrefixedDB`, `Snapshot`, `WriteBatch` and the
//! iterators all build on this module, which imports none of them.

use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex, RwLock};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shale::{ReadOptions, WriteBatch, WriteOptions};

use crate::cursor::{lock, CursorRegistry, SharedCursor};
use crate::errors::{database_closed, IntoPyResult};

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
    /// The state of a database just opened.
    pub fn new(db: shale::DB) -> DbShared {
        DbShared {
            db: RwLock::new(Some(db)),
            cursors: Mutex::default(),
            in_flight: Mutex::new(0),
            idle: Condvar::new(),
        }
    }

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
    pub fn close(&self) {
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

/// A LevelDB database, opened with ShaleDB.
#[derive(Debug)]
#[pyclass(frozen, module = "shaledb", name = "DB")]
pub struct Db {
    pub(crate) shared: Arc<DbShared>,
    pub(crate) name: PyObject,
}

impl Db {
    pub fn shared(&self) -> &Arc<DbShared> {
        &self.shared
    }
}
