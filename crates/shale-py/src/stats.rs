//! `DB.stats()`: what the engine counts, as a dict.
//!
//! ```text
//! {
//!   "levels": [{"level", "files", "bytes", "compactions", "seconds",
//!               "bytes_read", "bytes_written"}, ...],       # L0 .. L6
//!   "executors": {name: {"jobs", "bytes_read", "bytes_written",
//!                        "entries_in", "entries_out", "seconds",
//!                        "read_seconds", "unpack_seconds", "merge_seconds",
//!                        "gc_seconds", "pack_seconds", "write_seconds",
//!                        "megabytes_per_second"}},
//!   "fallbacks": {"jobs", "last_reason"},                   # device -> CPU
//!   "stalls": {"slowdown_count", "slowdown_seconds", "stop_count",
//!              "stop_seconds"},
//! }
//! ```
//!
//! Files and bytes per level, and the fallback count, are read from the
//! `shale.sstables` and `shale.executors` properties: the engine has no
//! structured accessor for them today.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use shale::shale_compact::job::PhaseStats;

/// One level's files now and the work that wrote to it since open.
#[derive(Debug, Default)]
struct LevelRow {
    files: u64,
    bytes: u64,
    stats: shale::db::LevelStats,
}

/// Everything `stats()` reports, gathered with the GIL released.
#[derive(Debug)]
pub struct Stats {
    levels: Vec<LevelRow>,
    executors: Vec<(String, u64, PhaseStats)>,
    fallbacks: (u64, Option<String>),
    stalls: shale::StallStats,
}

impl Stats {
    /// Reads the counters of `db`.
    pub fn collect(db: &shale::DB) -> Stats {
        let mut levels: Vec<LevelRow> = db
            .level_stats()
            .into_iter()
            .map(|stats| LevelRow {
                stats,
                ..LevelRow::default()
            })
            .collect();
        for (level, bytes) in table_sizes(&db.property("shale.sstables").unwrap_or_default()) {
            if let Some(row) = levels.get_mut(level) {
                row.files += 1;
                row.bytes += bytes;
            }
        }
        Stats {
            levels,
            executors: db.executor_stats(),
            fallbacks: fallbacks(&db.property("shale.executors").unwrap_or_default()),
            stalls: db.stall_stats(),
        }
    }

    /// The dict described at the top of this file.
    pub fn to_dict(&self, py: Python<'_>) -> PyResult<PyObject> {
        let out = PyDict::new(py);
        let levels = PyList::empty(py);
        for (level, row) in self.levels.iter().enumerate() {
            let entry = PyDict::new(py);
            entry.set_item("level", level)?;
            entry.set_item("files", row.files)?;
            entry.set_item("bytes", row.bytes)?;
            entry.set_item("compactions", row.stats.count)?;
            entry.set_item("seconds", row.stats.seconds)?;
            entry.set_item("bytes_read", row.stats.bytes_read)?;
            entry.set_item("bytes_written", row.stats.bytes_written)?;
            levels.append(entry)?;
        }
        out.set_item("levels", levels)?;
        let executors = PyDict::new(py);
        for (name, jobs, phases) in &self.executors {
            let entry = PyDict::new(py);
            entry.set_item("jobs", jobs)?;
            entry.set_item("bytes_read", phases.bytes_read)?;
            entry.set_item("bytes_written", phases.bytes_written)?;
            entry.set_item("entries_in", phases.entries_in)?;
            entry.set_item("entries_out", phases.entries_out)?;
            entry.set_item("seconds", phases.total_secs)?;
            entry.set_item("read_seconds", phases.read_secs)?;
            entry.set_item("unpack_seconds", phases.unpack_secs)?;
            entry.set_item("merge_seconds", phases.merge_secs)?;
            entry.set_item("gc_seconds", phases.gc_secs)?;
            entry.set_item("pack_seconds", phases.pack_secs)?;
            entry.set_item("write_seconds", phases.write_secs)?;
            let throughput = if phases.total_secs > 0.0 {
                phases.bytes_read as f64 / 1048576.0 / phases.total_secs
            } else {
                0.0
            };
            entry.set_item("megabytes_per_second", throughput)?;
            executors.set_item(name, entry)?;
        }
        out.set_item("executors", executors)?;
        let fallbacks = PyDict::new(py);
        fallbacks.set_item("jobs", self.fallbacks.0)?;
        fallbacks.set_item("last_reason", self.fallbacks.1.as_deref())?;
        out.set_item("fallbacks", fallbacks)?;
        let stalls = PyDict::new(py);
        stalls.set_item("slowdown_count", self.stalls.slowdown_count)?;
        stalls.set_item("slowdown_seconds", self.stalls.slowdown_micros as f64 / 1e6)?;
        stalls.set_item("stop_count", self.stalls.stop_count)?;
        stalls.set_item("stop_seconds", self.stalls.stop_micros as f64 / 1e6)?;
        out.set_item("stalls", stalls)?;
        Ok(out.into_any().unbind())
    }
}

/// `(level, file size)` of every table in the `shale.sstables` listing:
/// `--- level N ---` headers, then one ` number:size[smallest .. largest]`
/// line per table.
fn table_sizes(listing: &str) -> Vec<(usize, u64)> {
    let mut level = None;
    let mut out = Vec::new();
    for line in listing.lines() {
        if let Some(header) = line.strip_prefix("--- level ") {
            level = header.trim_end_matches(" ---").trim().parse().ok();
            continue;
        }
        let size = line
            .split('[')
            .next()
            .and_then(|head| head.split(':').nth(1))
            .and_then(|size| size.trim().parse::<u64>().ok());
        if let (Some(level), Some(size)) = (level, size) {
            out.push((level, size));
        }
    }
    out
}

/// The count and last reason from the `fallback: N jobs ... (last reason:
/// R)` line of `shale.executors`, or `(0, None)`.
fn fallbacks(executors: &str) -> (u64, Option<String>) {
    for line in executors.lines() {
        if let Some(rest) = line.strip_prefix("fallback: ") {
            let jobs = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let reason = rest
                .split_once("(last reason: ")
                .map(|(_, reason)| reason.trim_end().trim_end_matches(')').to_string());
            return (jobs, reason);
        }
    }
    (0, None)
}
