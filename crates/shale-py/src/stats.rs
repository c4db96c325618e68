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
//!   "fallbacks": {"jobs", "last_reason"},    # off the first executor of a chain
//!   "scheduler": {"queue_lengths", "running", "queued", "completed",
//!                 "failed", "refused", "dropped_stale", "trivial_moves", "cross_level",
//!                 "split_jobs", "subcompactions",
//!                 "executor_bytes_per_second"},
//!   "stalls": {"slowdown_count", "slowdown_seconds", "stop_count",
//!              "stop_seconds"},
//! }
//! ```
//!
//! Everything comes from the engine's structured accessors
//! (`level_stats`, `level_sizes`, `executor_stats`, `scheduler_stats`,
//! `stall_stats`), not from property text.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use shale::shale_compact::job::PhaseStats;

/// One level's files now and the work that wrote to it since open.
#[derive(Debug, Default)]
struct LevelRow {
    files: usize,
    bytes: u64,
    stats: shale::db::LevelStats,
}

/// Everything `stats()` reports, gathered with the GIL released.
#[derive(Debug)]
pub struct Stats {
    levels: Vec<LevelRow>,
    executors: Vec<(String, u64, PhaseStats)>,
    scheduler: shale::SchedulerStats,
    stalls: shale::StallStats,
}

impl Stats {
    /// Reads the counters of `db`.
    pub fn collect(db: &shale::DB) -> Stats {
        let levels: Vec<LevelRow> = db
            .level_stats()
            .into_iter()
            .zip(db.level_sizes())
            .map(|(stats, (files, bytes))| LevelRow {
                files,
                bytes,
                stats,
            })
            .collect();
        Stats {
            levels,
            executors: db.executor_stats(),
            scheduler: db.scheduler_stats(),
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
        fallbacks.set_item("jobs", self.scheduler.fallbacks)?;
        fallbacks.set_item("last_reason", self.scheduler.last_fallback.as_deref())?;
        out.set_item("fallbacks", fallbacks)?;
        let scheduler = PyDict::new(py);
        scheduler.set_item("queue_lengths", self.scheduler.queue_lengths.to_vec())?;
        scheduler.set_item("running", self.scheduler.running)?;
        let c = &self.scheduler.counts;
        for (name, value) in [
            ("queued", c.queued),
            ("completed", c.completed),
            ("failed", c.failed),
            ("refused", c.refused),
            ("dropped_stale", c.dropped_stale),
            ("trivial_moves", c.trivial_moves),
            ("cross_level", c.cross_level),
            ("split_jobs", c.split_jobs),
            ("subcompactions", c.subcompactions),
        ] {
            scheduler.set_item(name, value)?;
        }
        let throughput = PyDict::new(py);
        for (name, record) in &self.scheduler.executors {
            throughput.set_item(name, record.throughput())?;
        }
        scheduler.set_item("executor_bytes_per_second", throughput)?;
        out.set_item("scheduler", scheduler)?;
        let stalls = PyDict::new(py);
        stalls.set_item("slowdown_count", self.stalls.slowdown_count)?;
        stalls.set_item("slowdown_seconds", self.stalls.slowdown_micros as f64 / 1e6)?;
        stalls.set_item("stop_count", self.stalls.stop_count)?;
        stalls.set_item("stop_seconds", self.stalls.stop_micros as f64 / 1e6)?;
        out.set_item("stalls", stalls)?;
        Ok(out.into_any().unbind())
    }
}
