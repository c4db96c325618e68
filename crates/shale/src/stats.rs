//! The database's statistics as one document ([`Statistics`], from
//! [`DB::statistics`](crate::db::DB::statistics)): the one schema that `shale
//! stats --json`, the C API's `shaledb_statistics_json` and Python's
//! `DB.stats()` all serialize, with the same names and units everywhere:
//! times in seconds, sizes in bytes, speeds in [`MB`] per second.
//!
//! ```text
//! {
//!   "levels": [{"level", "files", "bytes", "compactions", "seconds",
//!               "bytes_read", "bytes_written"}, ...],       L0 .. L6
//!   "executors": {NAME: {"jobs", "failures", "panics", "bytes_read",
//!                        "bytes_written", "entries_in", "entries_out",
//!                        "seconds", "read_seconds", "unpack_seconds",
//!                        "merge_seconds", "gc_seconds", "pack_seconds",
//!                        "write_seconds", "megabytes_per_second"}},
//!   "fallbacks": {"jobs", "last_reason"},
//!   "scheduler": {"queue_lengths", "running", "queued", "completed",
//!                 "failed", "refused", "dropped_stale", "trivial_moves",
//!                 "cross_level", "split_jobs", "subcompactions",
//!                 "executor_bytes_per_second": {NAME: number or null}},
//!   "stalls": {"slowdown_count", "slowdown_seconds", "stop_count",
//!              "stop_seconds", "causes": {"l0_slowdown", "l0_stop",
//!              "flush_slowdown", "memtable_flush": {"count", "seconds"}}},
//!   "writes": {"direct", "leads_taken", "direct_closed_by_sleep"}
//! }
//! ```

use std::collections::BTreeMap;

use serde::Serialize;

pub use crate::units::{megabytes_per_second, GB, MB};

/// Everything the engine counts, since open (levels' files and bytes: now).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Statistics {
    /// Per level, L0 first.
    pub levels: Vec<LevelRow>,
    /// Per executor that completed or failed a job, by name.
    pub executors: BTreeMap<String, ExecutorRow>,
    /// Jobs that ran on another executor than the first of their chain.
    pub fallbacks: Fallbacks,
    /// The compaction scheduler's queues and counts.
    pub scheduler: SchedulerRow,
    /// Time writers were held back.
    pub stalls: Stalls,
    /// How writes were written.
    pub writes: Writes,
}

/// How writes were written, since open.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Writes {
    /// Writes their own writers wrote, without the write queue
    /// (`Options::direct_writers`).
    pub direct: u64,
    /// Leads of the write queue taken from a writer handed one while it
    /// slept, by a writer that was awake (`db/writer_queue.rs`).
    pub leads_taken: u64,
    /// Times a direct writer that had to sleep until an earlier write
    /// published closed direct writes for a while (`db/direct_writes.rs`): the
    /// writers were preempted, the cores busy with more than them.
    pub direct_closed_by_sleep: u64,
}

/// One level: its files now, and the flushes and compactions that wrote
/// to it since open.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LevelRow {
    /// The level (0 to 6).
    pub level: usize,
    /// Table files at the level now.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Flushes and compactions that wrote to the level.
    pub compactions: u64,
    /// Their seconds.
    pub seconds: f64,
    /// Bytes they read.
    pub bytes_read: u64,
    /// Bytes they wrote.
    pub bytes_written: u64,
}

/// One executor's completed jobs and their phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecutorRow {
    /// Jobs it completed.
    pub jobs: u64,
    /// Jobs it failed (each went on to the next executor).
    pub failures: u64,
    /// Of those, the panics caught.
    pub panics: u64,
    /// Input bytes of its jobs.
    pub bytes_read: u64,
    /// Output bytes.
    pub bytes_written: u64,
    /// Input entries.
    pub entries_in: u64,
    /// Output entries.
    pub entries_out: u64,
    /// Seconds its jobs took.
    pub seconds: f64,
    /// Seconds of each phase.
    pub read_seconds: f64,
    /// See `read_seconds`.
    pub unpack_seconds: f64,
    /// See `read_seconds`.
    pub merge_seconds: f64,
    /// See `read_seconds`.
    pub gc_seconds: f64,
    /// See `read_seconds`.
    pub pack_seconds: f64,
    /// See `read_seconds`.
    pub write_seconds: f64,
    /// Input [`MB`] per second of its jobs (0 before the first).
    pub megabytes_per_second: f64,
    /// Device executors: what their jobs cost the host (kernel launches,
    /// transfers, blocking waits, device allocations, host copies); zeros
    /// for CPU executors.
    pub device: shale_compact::job::DeviceCosts,
}

/// Jobs that did not run on the first executor of their chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Fallbacks {
    /// How many.
    pub jobs: u64,
    /// Why the last one did.
    pub last_reason: Option<String>,
}

/// The scheduler's queues and counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SchedulerRow {
    /// Jobs waiting per level.
    pub queue_lengths: Vec<usize>,
    /// Jobs running.
    pub running: usize,
    /// Jobs queued, completed, failed, refused, dropped stale; trivial
    /// moves, cross-level jobs, jobs split and their sub-compactions (in
    /// the document, fields of `scheduler` itself).
    #[serde(flatten)]
    pub counts: crate::compaction::scheduler::SchedulerCounts,
    /// Input bytes per second of each executor's last jobs (what the
    /// scheduler's queue-end choice reads); `None` before its first.
    pub executor_bytes_per_second: BTreeMap<String, Option<f64>>,
}

/// Time writers were held back by the write throttle.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stalls {
    /// Writes the throttle delayed.
    pub slowdown_count: u64,
    /// Seconds of those delays.
    pub slowdown_seconds: f64,
    /// Times a writer waited for a flush or for L0 to drain.
    pub stop_count: u64,
    /// Seconds of those waits.
    pub stop_seconds: f64,
    /// The same by cause.
    pub causes: StallCauses,
}

/// [`Stalls`] by cause: what held the writers back.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StallCauses {
    /// Slowed: L0 at or past `l0_slowdown_writes_trigger` files.
    pub l0_slowdown: StallCause,
    /// Stopped: L0 at `l0_stop_writes_trigger` files.
    pub l0_stop: StallCause,
    /// Slowed: the memtable three quarters full while the previous one was
    /// still being flushed; writes are paced so that the memtable fills
    /// when the flush is expected to end instead of stopping then.
    pub flush_slowdown: StallCause,
    /// Stopped: the memtable full while the previous one was still being
    /// flushed.
    pub memtable_flush: StallCause,
}

/// One cause of [`StallCauses`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StallCause {
    /// Writes held back.
    pub count: u64,
    /// Seconds they were held back.
    pub seconds: f64,
}

impl StallCauses {
    /// One line for people: "L0 slowdown 3 (0.001 s), L0 stop 0 (0.000 s),
    /// flush slowdown 2 (0.001 s), memtable flush 1 (0.002 s)".
    pub fn describe(&self) -> String {
        [
            ("L0 slowdown", &self.l0_slowdown),
            ("L0 stop", &self.l0_stop),
            ("flush slowdown", &self.flush_slowdown),
            ("memtable flush", &self.memtable_flush),
        ]
        .iter()
        .map(|(name, cause)| format!("{name} {} ({:.3} s)", cause.count, cause.seconds))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

impl Statistics {
    /// The document as JSON text (one object, no trailing newline).
    pub fn to_json(&self) -> String {
        // Plain data of numbers, strings and maps: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
