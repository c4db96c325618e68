//! `shaledb`: ShaleDB for Python, with plyvel's API name for name, so that
//! `import shaledb as plyvel` is all a plyvel program changes.
//!
//! The reference is plyvel's `doc/api.rst`; differences are listed in
//! `crates/shale-py/README.md`. Every call that does I/O or waits releases
//! the GIL.

mod bytes_arg;
mod comparator;
mod cursor;
mod db;
mod errors;
mod iterator;
mod options;
mod prefixed;
mod shared;
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

/// Repairs the database `name` from the files in its directory, as
/// plyvel's `repair_db` (LevelDB's `RepairDB`): a new MANIFEST listing
/// every table, the logs turned into tables, damaged files moved to
/// `lost/` (see `shale::repair`). The keyword arguments are `DB(...)`'s; the
/// table settings and `write_buffer_size` shape the tables it writes.
/// Returns `None`, as plyvel; what was lost is written to the database's
/// `LOG`. An open database gives `IOError`; a missing directory, or one
/// without database files, `Error`.
#[pyfunction]
#[pyo3(signature = (name, **options))]
fn repair_db(
    py: Python<'_>,
    name: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<()> {
    let path = db::database_path(name)?;
    let options = options::parse_options("repair_db", options)?;
    py.allow_threads(|| shale::repair(&path, &options))
        .map(drop)
        .into_py_result()
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
    m.add_class::<shared::Db>()?;
    m.add_class::<prefixed::PrefixedDB>()?;
    m.add_class::<write_batch::WriteBatch>()?;
    m.add_class::<iterator::Iterator>()?;
    m.add_class::<iterator::RawIterator>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_function(wrap_pyfunction!(destroy_db, m)?)?;
    m.add_function(wrap_pyfunction!(repair_db, m)?)?;
    Ok(())
}
