//! `DB(...)`'s keyword arguments onto `shale::Options`.
//!
//! plyvel's arguments keep their names and meanings; an argument left at
//! `None` (or left out) keeps the engine's default, as plyvel leaves
//! LevelDB's. Differences, all documented in the package docstring:
//!
//! * `bloom_filter_bits` left out gives the engine's 10-bit Bloom filter
//!   (plyvel: none); `0` turns it off as in plyvel. The filter is LevelDB's,
//!   so files stay readable by LevelDB either way.
//! * `comparator` / `comparator_name`: checked as plyvel checks them; the
//!   database then compacts on the `streaming` executor only (the others
//!   compare key bytes), see `comparator.rs`.
//!
//! The ShaleDB extras (executor, scheduler and L0 trigger options) are
//! keyword arguments named after the fields of `shale::Options`.

use std::str::FromStr;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use shale::format::comparator::Comparator;
use shale::shale_compact::opencl::PlacementPolicy;

use crate::comparator::PyComparator;
use crate::errors::to_py_err;

/// The plyvel arguments this module accepts besides `name`, in plyvel's
/// order, then the ShaleDB extras.
pub const PLYVEL_ARGUMENTS: &[&str] = &[
    "create_if_missing",
    "error_if_exists",
    "paranoid_checks",
    "write_buffer_size",
    "max_open_files",
    "lru_cache_size",
    "block_size",
    "block_restart_interval",
    "max_file_size",
    "compression",
    "bloom_filter_bits",
    "comparator",
    "comparator_name",
];

/// Builds engine options from the keyword arguments of `function` (for
/// error messages: `DB`, `repair_db`).
pub fn parse_options(
    function: &str,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<shale::Options> {
    let mut options = shale::Options::default();
    let mut comparator: Option<Bound<'_, PyAny>> = None;
    let mut comparator_name: Option<Bound<'_, PyAny>> = None;
    let Some(kwargs) = kwargs else {
        return Ok(options);
    };
    for (key, value) in kwargs.iter() {
        let key: String = key.extract()?;
        if value.is_none() {
            // plyvel: None means "LevelDB's default", except for
            // `compression`, where None means no compression.
            if key == "compression" {
                options.snappy = false;
            } else if !is_known(&key) {
                return Err(unexpected(function, &key));
            }
            continue;
        }
        let name = key.as_str();
        match name {
            "create_if_missing" => options.create_if_missing = flag(&value, name)?,
            "error_if_exists" => options.error_if_exists = flag(&value, name)?,
            "paranoid_checks" => options.paranoid_checks = flag(&value, name)?,
            "write_buffer_size" => options.write_buffer_size = value.extract()?,
            "max_open_files" => options.max_open_files = value.extract()?,
            "lru_cache_size" => options.block_cache_size = value.extract()?,
            "block_size" => options.block_size = value.extract()?,
            "block_restart_interval" => options.block_restart_interval = value.extract()?,
            "max_file_size" => options.max_file_size = value.extract()?,
            "compression" => options.snappy = snappy(&value)?,
            "bloom_filter_bits" => {
                let bits: i64 = value.extract()?;
                options.bloom_bits_per_key = if bits > 0 {
                    Some(u32::try_from(bits).map_err(|_| {
                        PyValueError::new_err(format!("bloom_filter_bits is too large: {bits}"))
                    })?)
                } else {
                    None
                };
            }
            "comparator" => comparator = Some(value),
            "comparator_name" => comparator_name = Some(value),
            // ShaleDB extras.
            "compaction_executor" => {
                let name: String = value.extract()?;
                options.compaction_executor = name
                    .parse()
                    .map_err(|message| to_py_err(shale::Error::InvalidArgument(message)))?;
            }
            "max_background_compactions" => options.max_background_compactions = value.extract()?,
            "compaction_threads" => options.compaction_threads = value.extract()?,
            "max_subcompactions" => options.max_subcompactions = value.extract()?,
            "cross_level_compaction" => options.cross_level_compaction = flag(&value, name)?,
            "concurrent_memtable_writes" => {
                options.concurrent_memtable_writes = flag(&value, name)?
            }
            "pipelined_write" => options.pipelined_write = flag(&value, name)?,
            "direct_writers" => options.direct_writers = value.extract()?,
            "direct_writers_back_off" => options.direct_writers_back_off = flag(&value, name)?,
            "write_thread_max_yield_usec" => {
                options.write_thread_max_yield_usec = value.extract()?
            }
            "write_thread_slow_yield_usec" => {
                options.write_thread_slow_yield_usec = value.extract()?
            }
            "compaction_pick" => {
                let text: String = value.extract()?;
                options.compaction_pick = text.parse().map_err(PyValueError::new_err)?;
            }
            "compaction_nice" => options.compaction_nice = value.extract()?,
            "compaction_memory_budget" => options.compaction_memory_budget = value.extract()?,
            "l0_compaction_trigger" => options.l0_compaction_trigger = value.extract()?,
            "l0_slowdown_writes_trigger" => options.l0_slowdown_writes_trigger = value.extract()?,
            "l0_stop_writes_trigger" => options.l0_stop_writes_trigger = value.extract()?,
            "l0_load_slack" => options.l0_load_slack = value.extract()?,
            "max_bytes_for_level_base" => options.max_bytes_for_level_base = value.extract()?,
            "level_multiplier" => options.level_multiplier = value.extract()?,
            "dynamic_level_targets" => options.dynamic_level_targets = flag(&value, name)?,
            "seek_compaction" => options.seek_compaction = flag(&value, name)?,
            "direct_io_for_compaction" => options.direct_io_for_compaction = flag(&value, name)?,
            "opencl_max_device_files" => options.opencl.max_device_files = value.extract()?,
            "opencl_subcompactions" => options.opencl.subcompactions = value.extract()?,
            "opencl_slice_bytes" => options.opencl.slice_bytes = value.extract()?,
            "opencl_memory_budget" => options.opencl.memory_budget = Some(value.extract()?),
            "opencl_placement" => {
                let text: String = value.extract()?;
                options.opencl.placement =
                    PlacementPolicy::from_str(&text).map_err(PyValueError::new_err)?;
            }
            "remote_workers" => options.remote.workers = value.extract()?,
            "remote_token" => {
                options.remote.token = Some(shale::options::RemoteToken(value.extract()?))
            }
            "remote_mode" => {
                let text: String = value.extract()?;
                options.remote.mode = text.parse().map_err(PyValueError::new_err)?;
            }
            "remote_keys_window" => options.remote.keys_window = value.extract()?,
            "remote_timeout" => {
                let seconds: f64 = value.extract()?;
                if !(seconds > 0.0 && seconds.is_finite() && seconds < 1e9) {
                    return Err(PyValueError::new_err(format!(
                        "remote_timeout must be a positive number of seconds (got {seconds})"
                    )));
                }
                options.remote.timeout = std::time::Duration::from_secs_f64(seconds);
            }
            "remote_tls_ca" => {
                let path: std::path::PathBuf = value.extract()?;
                options.remote.tls_ca = Some(path);
            }
            other => return Err(unexpected(function, other)),
        }
    }
    options.comparator = custom_comparator(comparator.as_ref(), comparator_name.as_ref())?;
    Ok(options)
}

/// The ShaleDB extras, after plyvel's arguments.
pub const SHALE_ARGUMENTS: &[&str] = &[
    "compaction_executor",
    "max_background_compactions",
    "compaction_threads",
    "max_subcompactions",
    "cross_level_compaction",
    "concurrent_memtable_writes",
    "pipelined_write",
    "direct_writers",
    "direct_writers_back_off",
    "write_thread_max_yield_usec",
    "write_thread_slow_yield_usec",
    "compaction_pick",
    "compaction_nice",
    "compaction_memory_budget",
    "l0_compaction_trigger",
    "l0_slowdown_writes_trigger",
    "l0_stop_writes_trigger",
    "l0_load_slack",
    "max_bytes_for_level_base",
    "level_multiplier",
    "dynamic_level_targets",
    "seek_compaction",
    "direct_io_for_compaction",
    "opencl_max_device_files",
    "opencl_subcompactions",
    "opencl_slice_bytes",
    "opencl_memory_budget",
    "opencl_placement",
    "remote_workers",
    "remote_token",
    "remote_mode",
    "remote_keys_window",
    "remote_timeout",
    "remote_tls_ca",
];

fn is_known(name: &str) -> bool {
    PLYVEL_ARGUMENTS.contains(&name) || SHALE_ARGUMENTS.contains(&name)
}

fn unexpected(function: &str, name: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "{function}() got an unexpected keyword argument '{name}'"
    ))
}

/// A `bool` argument: plyvel types these as `bool`, so `1` is refused.
fn flag(value: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    value
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("'{name}' must be a bool")))
}

/// `compression`: `'snappy'` (str or bytes) or `None` (handled by the
/// caller); anything else is refused as plyvel refuses it.
fn snappy(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    let text = if let Ok(text) = value.downcast::<PyString>() {
        text.to_cow()?.into_owned()
    } else if let Ok(bytes) = value.downcast::<PyBytes>() {
        String::from_utf8_lossy(bytes.as_bytes()).into_owned()
    } else {
        return Err(PyTypeError::new_err(
            "'compression' must be None or a string",
        ));
    };
    if text == "snappy" {
        Ok(true)
    } else {
        Err(PyValueError::new_err(
            "'compression' must be None or 'snappy'",
        ))
    }
}

/// The comparator `comparator` and `comparator_name` give, with plyvel's
/// checks: both or neither.
fn custom_comparator(
    comparator: Option<&Bound<'_, PyAny>>,
    comparator_name: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<Arc<dyn Comparator>>> {
    match (comparator, comparator_name) {
        (None, None) => Ok(None),
        (Some(_), None) | (None, Some(_)) => Err(PyValueError::new_err(
            "'comparator' and 'comparator_name' must be specified together",
        )),
        (Some(comparator), Some(name)) => Ok(Some(Arc::new(PyComparator::new(comparator, name)?))),
    }
}
