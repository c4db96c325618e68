//! `shaledb`: ShaleDB for Python, with plyvel's API name for name, so that
//! `import shaledb as plyvel` is all a plyvel program changes.
//!
//! The reference is plyvel's `doc/api.rst`; differences are listed in
//! `crates/shale-py/README.md`. Every call that does I/O or waits releases
//! the GIL.

mod bytes_arg;
mod cursor;
mod db;
mod errors;
mod iterator;
mod options;
mod prefixed;
mod snapshot;
mod stats;
mod write_batch;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::IntoPyResult;

/// Deletes the database `name` and its directory (when empty). An open
/// database gives `IOError`; a missing one is not an error.
#[pyfunction]
fn destroy_db(py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<()> {
    let path = db::database_path(name)?;
    py.allow_threads(|| shale::destroy(&path, &shale::Options::default()))
        .into_py_result()
}

/// LevelDB's `RepairDB`. Not implemented by the engine yet: the arguments
/// are checked as `DB(...)` checks them, then `Error` is raised.
#[pyfunction]
#[pyo3(signature = (name, **options))]
fn repair_db(name: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    db::database_path(name)?;
    options::parse_options("repair_db", options)?;
    Err(errors::Error::new_err(
        "repair_db is not implemented yet: ShaleDB has no repair; `shale verify --db DIR` \
         names the damaged file and offset, and plyvel.repair_db (LevelDB's RepairDB) \
         works on the same files",
    ))
}

#[pymodule]
fn shaledb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The LevelDB release whose on-disk format ShaleDB reads and writes.
    m.add("__leveldb_version__", "1.23")?;
    m.add("Error", py.get_type::<errors::Error>())?;
    m.add("IOError", errors::io_error_type(py)?)?;
    m.add("CorruptionError", py.get_type::<errors::CorruptionError>())?;
    m.add(
        "IteratorInvalidError",
        py.get_type::<errors::IteratorInvalidError>(),
    )?;
    m.add_class::<db::Db>()?;
    m.add_class::<prefixed::PrefixedDB>()?;
    m.add_class::<write_batch::WriteBatch>()?;
    m.add_class::<iterator::Iterator>()?;
    m.add_class::<iterator::RawIterator>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_function(wrap_pyfunction!(destroy_db, m)?)?;
    m.add_function(wrap_pyfunction!(repair_db, m)?)?;
    Ok(())
}
