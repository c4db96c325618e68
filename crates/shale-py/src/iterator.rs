//! `Iterator` (plyvel's Python-style iterator over a key range) and
//! `RawIterator` (LevelDB's cursor interface).
//!
//! plyvel checks the range itself on every step; here the range goes to
//! the engine as bounds (`ReadOptions::lower_bound` / `upper_bound`), so
//! the engine never produces a key outside it: an exclusive start becomes
//! the inclusive bound `start + b"\0"`, an inclusive stop the exclusive
//! bound `stop + b"\0"` (the next keys in bytewise order).
//!
//! Every step releases the GIL: a step may read and decompress a block.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use shale::DbIterator;

use crate::bytes_arg::{bytes_arg, key_successor, prefix_successor, prefixed};
use crate::cursor::{lock, CursorState, Position, SharedCursor};
use crate::errors::{iterator_closed, to_py_err, IteratorInvalidError};
use crate::shared::{read_options, DbShared};

/// The arguments of `iterator(...)`, as plyvel names them.
#[derive(Debug, Clone)]
pub struct IteratorArgs {
    reverse: bool,
    start: Option<Vec<u8>>,
    stop: Option<Vec<u8>>,
    include_start: bool,
    include_stop: bool,
    prefix: Option<Vec<u8>>,
    include_key: bool,
    include_value: bool,
    verify_checksums: Option<bool>,
    fill_cache: bool,
}

impl Default for IteratorArgs {
    fn default() -> IteratorArgs {
        IteratorArgs {
            reverse: false,
            start: None,
            stop: None,
            include_start: true,
            include_stop: false,
            prefix: None,
            include_key: true,
            include_value: true,
            verify_checksums: None,
            fill_cache: true,
        }
    }
}

/// Keys given as `None` are unset.
fn optional_key(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Vec<u8>>> {
    if value.is_none() {
        return Ok(None);
    }
    Ok(Some(bytes_arg(value, what)?.as_bytes().to_vec()))
}

/// `verify_checksums`: `None` keeps the engine's default (verify).
fn optional_flag(value: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
    if value.is_none() {
        Ok(None)
    } else {
        value.is_truthy().map(Some)
    }
}

fn unexpected(function: &str, name: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "{function}() got an unexpected keyword argument '{name}'"
    ))
}

impl IteratorArgs {
    /// From the keyword arguments of `iterator(...)`.
    pub fn parse(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<IteratorArgs> {
        let mut args = IteratorArgs::default();
        for (key, value) in kwargs.into_iter().flat_map(|kwargs| kwargs.iter()) {
            let key: String = key.extract()?;
            match key.as_str() {
                "reverse" => args.reverse = value.is_truthy()?,
                "start" => args.start = optional_key(&value, "start")?,
                "stop" => args.stop = optional_key(&value, "stop")?,
                "include_start" => args.include_start = value.is_truthy()?,
                "include_stop" => args.include_stop = value.is_truthy()?,
                "prefix" => args.prefix = optional_key(&value, "prefix")?,
                "include_key" => args.include_key = value.is_truthy()?,
                "include_value" => args.include_value = value.is_truthy()?,
                "verify_checksums" => args.verify_checksums = optional_flag(&value)?,
                "fill_cache" => args.fill_cache = value.is_truthy()?,
                other => return Err(unexpected("iterator", other)),
            }
        }
        Ok(args)
    }
}

/// The arguments of `raw_iterator(...)`.
#[derive(Debug, Clone, Default)]
pub struct RawIteratorArgs {
    verify_checksums: Option<bool>,
    fill_cache: Option<bool>,
}

impl RawIteratorArgs {
    /// From the keyword arguments of `raw_iterator(...)`.
    pub fn parse(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<RawIteratorArgs> {
        let mut args = RawIteratorArgs::default();
        for (key, value) in kwargs.into_iter().flat_map(|kwargs| kwargs.iter()) {
            let key: String = key.extract()?;
            match key.as_str() {
                "verify_checksums" => args.verify_checksums = optional_flag(&value)?,
                "fill_cache" => args.fill_cache = Some(value.is_truthy()?),
                other => return Err(unexpected("raw_iterator", other)),
            }
        }
        Ok(args)
    }
}

/// A key range as the engine takes it: `[lower, upper)`, either end open.
#[derive(Debug)]
struct EngineBounds {
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

/// The engine range `[lower, upper)` of an iterator over the database, a
/// prefixed view (`db_prefix`) or a snapshot of either; plyvel's rules:
/// `prefix` excludes `start` and `stop`; a prefixed view's range is its
/// prefix, narrowed by `start` and `stop` given relative to it.
fn engine_bounds(db_prefix: Option<&[u8]>, args: &IteratorArgs) -> PyResult<EngineBounds> {
    let mut start = args.start.clone();
    let mut stop = args.stop.clone();
    let mut prefix = args.prefix.clone();
    let (mut include_start, mut include_stop) = (args.include_start, args.include_stop);
    if let Some(db_prefix) = db_prefix {
        if let Some(inner) = &prefix {
            prefix = Some(prefixed(db_prefix, inner));
        } else {
            start = Some(match &start {
                Some(start) => prefixed(db_prefix, start),
                None => {
                    include_start = true;
                    db_prefix.to_vec()
                }
            });
            stop = match &stop {
                Some(stop) => Some(prefixed(db_prefix, stop)),
                None => {
                    include_stop = false;
                    prefix_successor(db_prefix)
                }
            };
        }
    }
    if let Some(prefix) = prefix {
        if args.start.is_some() || args.stop.is_some() {
            return Err(PyTypeError::new_err(
                "'prefix' cannot be used together with 'start' or 'stop'",
            ));
        }
        return Ok(EngineBounds {
            upper: prefix_successor(&prefix),
            lower: Some(prefix),
        });
    }
    let lower = start.map(|start| {
        if include_start {
            start
        } else {
            key_successor(&start)
        }
    });
    let upper = stop.map(|stop| {
        if include_stop {
            key_successor(&stop)
        } else {
            stop
        }
    });
    Ok(EngineBounds { lower, upper })
}

/// Opens an engine cursor with the GIL released and registers it.
fn open_cursor(
    py: Python<'_>,
    shared: &Arc<DbShared>,
    read: shale::ReadOptions,
    position: Position,
) -> PyResult<SharedCursor> {
    let db = shared.handle()?;
    let iter = py.allow_threads(|| db.iter(&read)).map_err(to_py_err)?;
    let cursor = Arc::new(Mutex::new(CursorState {
        iter: Some(iter),
        position,
    }));
    if !shared.register(&cursor) {
        return Err(crate::errors::database_closed());
    }
    Ok(cursor)
}

/// `iterator(...)` of a database, prefixed view or snapshot.
pub fn new_iterator(
    py: Python<'_>,
    shared: &Arc<DbShared>,
    db_prefix: Option<&[u8]>,
    args: IteratorArgs,
    snapshot: Option<shale::Snapshot>,
) -> PyResult<Iterator> {
    let bounds = engine_bounds(db_prefix, &args)?;
    let mut read = read_options(args.verify_checksums, args.fill_cache, snapshot);
    read.lower_bound = bounds.lower;
    read.upper_bound = bounds.upper;
    let position = if args.reverse {
        Position::AfterStop
    } else {
        Position::BeforeStart
    };
    Ok(Iterator {
        cursor: open_cursor(py, shared, read, position)?,
        reverse: args.reverse,
        include_key: args.include_key,
        include_value: args.include_value,
        db_prefix: db_prefix.map(<[u8]>::to_vec),
    })
}

/// `raw_iterator(...)` of a database or snapshot.
pub fn new_raw_iterator(
    py: Python<'_>,
    shared: &Arc<DbShared>,
    args: RawIteratorArgs,
    snapshot: Option<shale::Snapshot>,
) -> PyResult<RawIterator> {
    let read = read_options(
        args.verify_checksums,
        args.fill_cache.unwrap_or(true),
        snapshot,
    );
    Ok(RawIterator {
        cursor: open_cursor(py, shared, read, Position::BeforeStart)?,
    })
}

/// What one step hands back to Python: the parts of the entry asked for.
type Entry = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Why a step produced no entry.
enum NoEntry {
    /// The end of the range in the direction of the step.
    Exhausted,
    Closed,
    Failed(shale::Error),
}

impl From<shale::Error> for NoEntry {
    fn from(err: shale::Error) -> NoEntry {
        NoEntry::Failed(err)
    }
}

/// Iterates over (a range of) a database, forwards or in reverse; see
/// plyvel's `Iterator`. Made by `DB.iterator()`, `PrefixedDB.iterator()`
/// and `Snapshot.iterator()`.
#[derive(Debug)]
#[pyclass(frozen, module = "shaledb")]
pub struct Iterator {
    cursor: SharedCursor,
    reverse: bool,
    include_key: bool,
    include_value: bool,
    /// A prefixed view's prefix: added to `seek` targets, cut from keys.
    db_prefix: Option<Vec<u8>>,
}

impl Iterator {
    /// The current entry, as asked for. REQUIRES: `iter.valid()`.
    fn entry(&self, iter: &DbIterator) -> Entry {
        let strip = self.db_prefix.as_ref().map_or(0, Vec::len);
        (
            self.include_key
                .then(|| iter.key().get(strip..).unwrap_or_default().to_vec()),
            self.include_value.then(|| iter.value().to_vec()),
        )
    }

    /// The next entry in key order (plyvel's `real_next`).
    fn forward(&self, state: &mut CursorState) -> Result<Entry, NoEntry> {
        let iter = state.iter.as_mut().ok_or(NoEntry::Closed)?;
        match state.position {
            Position::InBetween => {
                iter.next();
                if !iter.valid() {
                    iter.status()?;
                    state.position = Position::AfterStop;
                    return Err(NoEntry::Exhausted);
                }
            }
            Position::AlreadyPositioned => state.position = Position::InBetween,
            Position::BeforeStart => {
                iter.seek_to_first();
                if !iter.valid() {
                    iter.status()?;
                    return Err(NoEntry::Exhausted);
                }
                state.position = Position::InBetween;
            }
            Position::AfterStop => return Err(NoEntry::Exhausted),
        }
        Ok(self.entry(iter))
    }

    /// The previous entry in key order (plyvel's `real_prev`): the entry
    /// the cursor is on is returned, then the cursor moves back, so
    /// alternating `next` and `prev` returns the same entry.
    fn backward(&self, state: &mut CursorState) -> Result<Entry, NoEntry> {
        let iter = state.iter.as_mut().ok_or(NoEntry::Closed)?;
        match state.position {
            Position::InBetween => {}
            Position::AlreadyPositioned => {
                iter.prev();
                if !iter.valid() {
                    iter.status()?;
                    state.position = Position::BeforeStart;
                    return Err(NoEntry::Exhausted);
                }
            }
            Position::BeforeStart => return Err(NoEntry::Exhausted),
            Position::AfterStop => {
                iter.seek_to_last();
                if !iter.valid() {
                    iter.status()?;
                    return Err(NoEntry::Exhausted);
                }
            }
        }
        let entry = self.entry(iter);
        iter.prev();
        if iter.valid() {
            state.position = Position::InBetween;
        } else {
            iter.status()?;
            state.position = Position::BeforeStart;
        }
        Ok(entry)
    }

    /// Runs a step with the GIL released and turns its entry into Python.
    fn step(&self, py: Python<'_>, forward: bool) -> PyResult<Option<PyObject>> {
        let result = py.allow_threads(|| {
            let mut state = lock(&self.cursor);
            if forward {
                self.forward(&mut state)
            } else {
                self.backward(&mut state)
            }
        });
        match result {
            Ok(entry) => self.to_python(py, entry).map(Some),
            Err(NoEntry::Exhausted) => Ok(None),
            Err(NoEntry::Closed) => Err(iterator_closed()),
            Err(NoEntry::Failed(err)) => Err(to_py_err(err)),
        }
    }

    fn to_python(&self, py: Python<'_>, entry: Entry) -> PyResult<PyObject> {
        Ok(match entry {
            (Some(key), Some(value)) => {
                PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])?
                    .into_any()
                    .unbind()
            }
            (Some(key), None) => PyBytes::new(py, &key).into_any().unbind(),
            (None, Some(value)) => PyBytes::new(py, &value).into_any().unbind(),
            (None, None) => py.None(),
        })
    }

    /// Sets the position with the GIL released (the cursor may be busy).
    fn set_position(&self, py: Python<'_>, position: Position) -> PyResult<()> {
        py.allow_threads(|| {
            let mut state = lock(&self.cursor);
            if state.iter.is_none() {
                return false;
            }
            state.position = position;
            true
        })
        .then_some(())
        .ok_or_else(iterator_closed)
    }
}

#[pymethods]
impl Iterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        self.step(py, !self.reverse)
    }

    /// Moves one step back and returns that entry (the one the last
    /// `next()` returned); `StopIteration` at the start of the range.
    fn prev(&self, py: Python<'_>) -> PyResult<PyObject> {
        self.step(py, self.reverse)?
            .ok_or_else(|| pyo3::exceptions::PyStopIteration::new_err(()))
    }

    /// Moves before the start of the range: `next()` of a forward iterator
    /// returns the first entry again. As in plyvel this is the start of the
    /// key range whatever the direction, so a reverse iterator is then
    /// exhausted (`seek_to_stop()` rewinds it).
    fn seek_to_start(&self, py: Python<'_>) -> PyResult<()> {
        self.set_position(py, Position::BeforeStart)
    }

    /// Moves past the end of the key range: `next()` of a forward iterator
    /// stops, `prev()` returns the last entry.
    fn seek_to_stop(&self, py: Python<'_>) -> PyResult<()> {
        self.set_position(py, Position::AfterStop)
    }

    /// Moves to the first key at or after `target` within the range.
    fn seek(&self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<()> {
        let target = bytes_arg(target, "target")?;
        let target = match &self.db_prefix {
            Some(db_prefix) => prefixed(db_prefix, target.as_bytes()),
            None => target.as_bytes().to_vec(),
        };
        let result = py.allow_threads(|| {
            let mut state = lock(&self.cursor);
            let state = &mut *state;
            let iter = state.iter.as_mut().ok_or(NoEntry::Closed)?;
            iter.seek(&target);
            if iter.valid() {
                state.position = Position::AlreadyPositioned;
            } else {
                iter.status()?;
                state.position = Position::AfterStop;
            }
            Ok(())
        });
        match result {
            Ok(()) | Err(NoEntry::Exhausted) => Ok(()),
            Err(NoEntry::Closed) => Err(iterator_closed()),
            Err(NoEntry::Failed(err)) => Err(to_py_err(err)),
        }
    }

    /// Closes the iterator; any further use raises `RuntimeError`.
    fn close(&self, py: Python<'_>) {
        close_cursor(py, &self.cursor);
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
}

fn close_cursor(py: Python<'_>, cursor: &SharedCursor) {
    let iter = py.allow_threads(|| lock(cursor).iter.take());
    drop(iter);
}

/// LevelDB's cursor: `valid`, `seek_to_first`, `seek_to_last`, `seek`,
/// `next`, `prev`, `key`, `value`, `item`. Moving or reading while not
/// `valid()` raises `IteratorInvalidError`.
#[derive(Debug)]
#[pyclass(frozen, module = "shaledb")]
pub struct RawIterator {
    cursor: SharedCursor,
}

/// What a raw cursor operation found.
enum RawOutcome<T> {
    Done(T),
    Invalid,
    Closed,
    Failed(shale::Error),
}

impl RawIterator {
    /// Runs `op` on the engine cursor with the GIL released. With
    /// `needs_valid`, an unpositioned cursor is `IteratorInvalidError`.
    /// Afterwards an invalid cursor reports its error, if any.
    fn with_cursor<T: Send>(
        &self,
        py: Python<'_>,
        needs_valid: bool,
        op: impl FnOnce(&mut DbIterator) -> T + Send,
    ) -> PyResult<T> {
        let outcome = py.allow_threads(|| {
            let mut state = lock(&self.cursor);
            let Some(iter) = state.iter.as_mut() else {
                return RawOutcome::Closed;
            };
            if needs_valid && !iter.valid() {
                return RawOutcome::Invalid;
            }
            let out = op(iter);
            if !iter.valid() {
                if let Err(err) = iter.status() {
                    return RawOutcome::Failed(err);
                }
            }
            RawOutcome::Done(out)
        });
        match outcome {
            RawOutcome::Done(out) => Ok(out),
            RawOutcome::Invalid => Err(IteratorInvalidError::new_err(())),
            RawOutcome::Closed => Err(iterator_closed()),
            RawOutcome::Failed(err) => Err(to_py_err(err)),
        }
    }
}

#[pymethods]
impl RawIterator {
    /// True when positioned on an entry.
    fn valid(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_cursor(py, false, |iter| iter.valid())
    }

    fn seek_to_first(&self, py: Python<'_>) -> PyResult<()> {
        self.with_cursor(py, false, DbIterator::seek_to_first)
    }

    fn seek_to_last(&self, py: Python<'_>) -> PyResult<()> {
        self.with_cursor(py, false, DbIterator::seek_to_last)
    }

    /// Positions on the first key at or after `target`.
    fn seek(&self, py: Python<'_>, target: &Bound<'_, PyAny>) -> PyResult<()> {
        let target = bytes_arg(target, "target")?;
        let target = target.as_bytes();
        self.with_cursor(py, false, |iter| iter.seek(target))
    }

    fn next(&self, py: Python<'_>) -> PyResult<()> {
        self.with_cursor(py, true, DbIterator::next)
    }

    fn prev(&self, py: Python<'_>) -> PyResult<()> {
        self.with_cursor(py, true, DbIterator::prev)
    }

    fn key(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        let key = self.with_cursor(py, true, |iter| iter.key().to_vec())?;
        Ok(PyBytes::new(py, &key).unbind())
    }

    fn value(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        let value = self.with_cursor(py, true, |iter| iter.value().to_vec())?;
        Ok(PyBytes::new(py, &value).unbind())
    }

    /// `(key, value)` of the current entry.
    fn item(&self, py: Python<'_>) -> PyResult<(Py<PyBytes>, Py<PyBytes>)> {
        let (key, value) = self.with_cursor(py, true, |iter| {
            (iter.key().to_vec(), iter.value().to_vec())
        })?;
        Ok((
            PyBytes::new(py, &key).unbind(),
            PyBytes::new(py, &value).unbind(),
        ))
    }

    /// Closes the iterator; any further use raises `RuntimeError`.
    fn close(&self, py: Python<'_>) {
        close_cursor(py, &self.cursor);
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
}
