//! What the scheduler remembers of each executor: the throughput of its last
//! jobs (ProckStore's third score, equation 3), job, failure and fallback
//! counts, the bytes and phase times of its jobs, and the average entry
//! size of what it compacted; and of each level, the flushes and
//! compactions that wrote to it. The database's one ledger:
//! `shale.stats`, `shale.scheduler`, `shale.executors`,
//! `DB::level_stats`, `DB::executor_stats`, `DB::scheduler_stats` and the
//! bench summary all read it. Pure bookkeeping: the compaction service
//! records finished jobs and flushes, the priority and placement functions
//! read it.

use std::collections::{BTreeMap, VecDeque};

use shale_compact::job::PhaseStats;
use shale_compact::ExecutorId;
use shale_format::version_edit::NUM_LEVELS;

/// Jobs the throughput is measured over (ProckStore: five).
pub const THROUGHPUT_WINDOW: usize = 5;

/// One executor's record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutorRecord {
    /// Input bytes and seconds of its last [`THROUGHPUT_WINDOW`] jobs.
    recent: VecDeque<(u64, f64)>,
    /// Jobs completed since open.
    pub jobs: u64,
    /// Input bytes of those jobs.
    pub bytes: u64,
    /// Seconds they took.
    pub seconds: f64,
    /// Jobs this executor failed (each went on to the next executor).
    pub failures: u64,
    /// Of those failures, the panics caught.
    pub panics: u64,
    /// What its completed jobs read and wrote, and the time of each phase.
    pub phases: PhaseStats,
}

impl ExecutorRecord {
    /// Input bytes per second over the last jobs; `None` before the first.
    pub fn throughput(&self) -> Option<f64> {
        let (bytes, secs) = self
            .recent
            .iter()
            .fold((0u64, 0f64), |(b, s), (jb, js)| (b + jb, s + js));
        (secs > 0.0 && bytes > 0).then(|| bytes as f64 / secs)
    }

    /// CPU seconds per input byte that the device executor's own host
    /// threads spent on its completed jobs
    /// ([`shale_compact::job::DeviceCosts::host_thread_cpu_nanos`]);
    /// `None` for CPU executors and before a measured job.
    pub fn device_host_cpu_per_byte(&self) -> Option<f64> {
        let nanos = self.phases.costs.device?.host_thread_cpu_nanos;
        (nanos > 0 && self.bytes > 0).then(|| nanos as f64 / 1e9 / self.bytes as f64)
    }
}

/// Work done by flushes and compactions whose output went to one level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelStats {
    /// Seconds spent.
    pub seconds: f64,
    /// Bytes read from input tables.
    pub bytes_read: u64,
    /// Bytes written to output tables.
    pub bytes_written: u64,
    /// Number of flushes or compactions.
    pub count: u64,
}

/// The scheduler's record of every executor, by name (as its jobs' outputs
/// and the statistics name it), and of every level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecutorBook {
    records: BTreeMap<String, ExecutorRecord>,
    /// Jobs that ran on another executor than the first of their chain.
    pub fallbacks: u64,
    /// Why the last one did.
    pub last_fallback: Option<String>,
    /// Entries and bytes compacted (for the average entry size).
    entries: u64,
    entry_bytes: u64,
    /// Per output level: what flushes and compactions wrote there.
    levels: [LevelStats; NUM_LEVELS],
}

impl ExecutorBook {
    /// Records a completed job of `executor` (the name its output gives):
    /// `bytes` of input in `seconds`.
    pub fn record_job(&mut self, executor: &str, bytes: u64, seconds: f64, entries: u64) {
        let record = self.records.entry(executor.to_string()).or_default();
        record.jobs += 1;
        record.bytes += bytes;
        record.seconds += seconds;
        if seconds > 0.0 {
            record.recent.push_back((bytes, seconds));
            if record.recent.len() > THROUGHPUT_WINDOW {
                record.recent.pop_front();
            }
        }
        self.entries += entries;
        self.entry_bytes += bytes;
    }

    /// Adds a completed job's phases to `executor`'s record (by the name
    /// its output gives).
    pub fn record_phases(&mut self, executor: &str, phases: &PhaseStats) {
        let record = self.records.entry(executor.to_string()).or_default();
        record.phases.accumulate(phases);
    }

    /// Records that `executor` failed a job and the job went on elsewhere.
    pub fn record_failure(&mut self, executor: impl Into<ExecutorId>, panicked: bool) {
        let name = executor.into().name();
        let record = self.records.entry(name.to_string()).or_default();
        record.failures += 1;
        record.panics += u64::from(panicked);
    }

    /// Records that a job did not run on the first executor of its chain.
    pub fn record_fallback(&mut self, reason: String) {
        self.fallbacks += 1;
        self.last_fallback = Some(reason);
    }

    /// Throughput of `executor` over its last jobs.
    pub fn throughput(&self, executor: impl Into<ExecutorId>) -> Option<f64> {
        self.record(executor)?.throughput()
    }

    /// `executor`'s record; `None` before it ran or failed a job.
    pub fn record(&self, executor: impl Into<ExecutorId>) -> Option<&ExecutorRecord> {
        self.records.get(executor.into().name())
    }

    /// Jobs `executor` completed.
    pub fn jobs(&self, executor: impl Into<ExecutorId>) -> u64 {
        self.record(executor).map_or(0, |r| r.jobs)
    }

    /// Average input bytes per entry of the jobs so far (`None` before the
    /// first).
    pub fn average_entry_bytes(&self) -> Option<f64> {
        (self.entries > 0).then(|| self.entry_bytes as f64 / self.entries as f64)
    }

    /// Records a flush or compaction whose output went to `level`.
    pub fn record_level(&mut self, level: usize, seconds: f64, read: u64, written: u64) {
        if let Some(stats) = self.levels.get_mut(level) {
            stats.seconds += seconds;
            stats.bytes_read += read;
            stats.bytes_written += written;
            stats.count += 1;
        }
    }

    /// What flushes and compactions wrote to each level since open.
    pub fn levels(&self) -> &[LevelStats; NUM_LEVELS] {
        &self.levels
    }

    /// Every executor's record, by name.
    pub fn records(&self) -> impl Iterator<Item = (&str, &ExecutorRecord)> {
        self.records.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_compact::ExecutorKind::{OpenCl, Parallel};

    #[test]
    fn throughput_is_over_the_last_five_jobs() {
        let mut book = ExecutorBook::default();
        assert_eq!(book.throughput(Parallel), None);
        for _ in 0..5 {
            book.record_job("parallel", 100, 1.0, 10);
        }
        assert_eq!(book.throughput(Parallel), Some(100.0));
        // Five fast jobs push the slow ones out of the window.
        for _ in 0..5 {
            book.record_job("parallel", 1000, 1.0, 10);
        }
        assert_eq!(book.throughput(Parallel), Some(1000.0));
        assert_eq!(book.jobs(Parallel), 10);
        assert_eq!(book.average_entry_bytes(), Some(5500.0 / 100.0));
        // A job too quick to time leaves the window alone.
        book.record_job("parallel", 5, 0.0, 1);
        assert_eq!(book.throughput(Parallel), Some(1000.0));
    }

    #[test]
    fn failures_and_fallbacks_are_counted() {
        let mut book = ExecutorBook::default();
        book.record_failure(OpenCl, false);
        book.record_fallback("the device failed: boom".into());
        assert_eq!(book.fallbacks, 1);
        assert_eq!(
            book.last_fallback.as_deref(),
            Some("the device failed: boom")
        );
        let (name, record) = book.records().next().unwrap();
        assert_eq!((name, record.failures, record.jobs), ("opencl", 1, 0));
    }
}
