//! `DB.stats()`: the engine's statistics document (`shale::stats`, the
//! schema `shale stats --json` and the C API's `shaledb_statistics_json`
//! print too), as a dict. It is the same document by construction: the
//! engine serializes it to JSON and Python's `json` module reads it back,
//! so the names, nesting and units cannot drift apart.

use pyo3::prelude::*;

/// The statistics of `db` as a Python dict; the counters are read with
/// the GIL released.
pub fn to_dict(py: Python<'_>, db: &shale::DB) -> PyResult<PyObject> {
    let text = py.allow_threads(|| db.statistics().to_json());
    let json = py.import("json")?;
    Ok(json.call_method1("loads", (text,))?.unbind())
}
