//! The engine summary printed after the last benchmark: write
//! amplification, compaction work per level and per executor, compaction
//! speed, write stalls and CPU time.
//!
//! A run may reopen the database several times (every `fill*` benchmark
//! starts from an empty one), and the engine's counters start at zero on
//! each open, so each database's counters are added up before it is closed
//! ([`EngineTotals::absorb`]).
//!
//! Definitions (as `docs/benchmarks.md` gives them for `shale bench`):
//! * write amplification = bytes written by flushes and compactions / bytes
//!   of user data written (keys + values of puts, keys of deletes);
//! * compaction speed = compaction input bytes / compaction seconds (the FPGA
//!   paper's definition), over compactions only (the executors' counters),
//!   flushes excluded — the per-level counters mix both, since a flush may
//!   write to level 1 or 2 when nothing there overlaps, as in LevelDB;
//! * MB is 2^20 bytes, as in db_bench's MB/s.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use shale::compaction::scheduler::SchedulerCounts;
use shale::db::LevelStats;
use shale::shale_compact::job::PhaseStats;
use shale::stats::StallCauses;
use shale::{SchedulerStats, StallStats, DB};

use super::cpu::CpuTime;

use shale::stats::MB;

/// What the compaction service recorded, summed over a run's opens.
#[derive(Debug, Clone, Default)]
struct SchedulerTotals {
    executors: BTreeMap<String, ExecutorTotals>,
    counts: SchedulerCounts,
    fallbacks: u64,
    last_fallback: Option<String>,
}

/// One executor's jobs over every database the run opened (the sums of its
/// `ExecutorRecord`s).
#[derive(Debug, Clone, Default)]
struct ExecutorTotals {
    jobs: u64,
    /// Input bytes.
    bytes: u64,
    seconds: f64,
    failures: u64,
    panics: u64,
}

impl SchedulerTotals {
    fn absorb(&mut self, stats: &SchedulerStats) {
        for (name, record) in &stats.executors {
            let totals = self.executors.entry(name.clone()).or_default();
            totals.jobs += record.jobs;
            totals.bytes += record.bytes;
            totals.seconds += record.seconds;
            totals.failures += record.failures;
            totals.panics += record.panics;
        }
        self.counts.add(&stats.counts);
        self.fallbacks += stats.fallbacks;
        if stats.last_fallback.is_some() {
            self.last_fallback.clone_from(&stats.last_fallback);
        }
    }

    /// One `Scheduler:` line per executor, one for the jobs, one for the
    /// fallbacks: what the whole run did, however often it opened.
    fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        for (name, totals) in &self.executors {
            writeln!(
                out,
                "Scheduler: Executor {name}: {} jobs, {:.1} MB in {:.3} s, {} failures ({} panics)",
                totals.jobs,
                totals.bytes as f64 / MB,
                totals.seconds,
                totals.failures,
                totals.panics
            )?;
        }
        writeln!(out, "Scheduler: Jobs: {}", self.counts)?;
        writeln!(
            out,
            "Scheduler: Fallbacks: {}{}",
            self.fallbacks,
            self.last_fallback
                .as_ref()
                .map_or(String::new(), |r| format!(" (last: {r})"))
        )
    }
}

/// Counters of every database a run opened, added up.
#[derive(Debug, Clone, Default)]
pub struct EngineTotals {
    levels: Vec<LevelStats>,
    executors: BTreeMap<String, (u64, PhaseStats)>,
    stalls: StallStats,
    /// How writes were written (direct, by the queue), summed.
    writes: shale::stats::Writes,
    /// The compaction service's ledger of every database, summed.
    scheduler: SchedulerTotals,
    /// Bytes of user data written (keys and values).
    pub user_bytes: u64,
}

impl EngineTotals {
    /// Adds the counters of `db` (call once per open, before closing it).
    pub fn absorb(&mut self, db: &DB) {
        let levels = db.level_stats();
        if self.levels.len() < levels.len() {
            self.levels.resize(levels.len(), LevelStats::default());
        }
        for (total, level) in self.levels.iter_mut().zip(levels.iter()) {
            total.seconds += level.seconds;
            total.bytes_read += level.bytes_read;
            total.bytes_written += level.bytes_written;
            total.count += level.count;
        }
        for (name, jobs, stats) in db.executor_stats() {
            let entry = self.executors.entry(name).or_default();
            entry.0 += jobs;
            entry.1.accumulate(&stats);
        }
        self.stalls.absorb(&db.stall_stats());
        let writes = db.statistics().writes;
        self.writes.direct += writes.direct;
        self.writes.leads_taken += writes.leads_taken;
        self.writes.direct_closed_by_sleep += writes.direct_closed_by_sleep;
        self.scheduler.absorb(&db.scheduler_stats());
    }

    /// Bytes written by flushes and compactions.
    pub fn engine_bytes_written(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes_written).sum()
    }

    /// Engine bytes written per user byte (`None` before any user write).
    pub fn write_amplification(&self) -> Option<f64> {
        (self.user_bytes > 0).then(|| self.engine_bytes_written() as f64 / self.user_bytes as f64)
    }

    /// Input bytes and seconds of compactions, over every executor.
    pub fn compaction_input(&self) -> (u64, f64) {
        self.executors
            .values()
            .fold((0, 0.0), |(bytes, secs), (_, s)| {
                (bytes + s.bytes_read, secs + s.total_secs)
            })
    }

    /// Writes the summary. `cpu` is the process's CPU time over the run,
    /// `stress` what the `--cpu_stress` threads used of it, `wall_secs` the
    /// run's duration.
    pub fn write_summary(
        &self,
        out: &mut dyn Write,
        cpu: CpuTime,
        stress: CpuTime,
        wall_secs: f64,
    ) -> io::Result<()> {
        writeln!(out, "------------------------------------------------")?;
        writeln!(out, "Engine summary (all benchmarks of this run):")?;
        let written = self.engine_bytes_written();
        match self.write_amplification() {
            Some(amplification) => writeln!(
                out,
                "Write amplification: {amplification:.2} ({:.1} MB written by flushes and compactions \
                 for {:.1} MB of user data)",
                written as f64 / MB,
                self.user_bytes as f64 / MB
            )?,
            None => writeln!(
                out,
                "Write amplification: - (no user data written; {:.1} MB written by flushes and compactions)",
                written as f64 / MB
            )?,
        }
        writeln!(
            out,
            "Level  Count  Read(MB) Write(MB)   Time(s)  Read(MB/s)   (flushes and compactions writing to the level)"
        )?;
        for (level, stats) in self.levels.iter().enumerate() {
            if stats.count == 0 {
                continue;
            }
            let speed = if stats.bytes_read > 0 && stats.seconds > 0.0 {
                format!("{:10.1}", stats.bytes_read as f64 / MB / stats.seconds)
            } else {
                format!("{:>10}", "-")
            };
            writeln!(
                out,
                "{level:5} {:6} {:9.1} {:9.1} {:9.3}  {speed}",
                stats.count,
                stats.bytes_read as f64 / MB,
                stats.bytes_written as f64 / MB,
                stats.seconds
            )?;
        }
        for (name, (jobs, stats)) in &self.executors {
            let speed = if stats.total_secs > 0.0 {
                stats.bytes_read as f64 / MB / stats.total_secs
            } else {
                0.0
            };
            writeln!(
                out,
                "Executor {name}: {jobs} jobs, read {:.1} MB, wrote {:.1} MB in {:.3} s ({speed:.1} MB/s input); \
                 phases (s): read {:.3} unpack {:.3} merge {:.3} gc {:.3} pack {:.3} write {:.3}",
                stats.bytes_read as f64 / MB,
                stats.bytes_written as f64 / MB,
                stats.total_secs,
                stats.read_secs,
                stats.unpack_secs,
                stats.merge_secs,
                stats.gc_secs,
                stats.pack_secs,
                stats.write_secs
            )?;
            // A device executor's cost to the host, as `shale compact` and
            // `shale.executors` print it.
            if let Some(d) = stats.costs.nonzero_device() {
                writeln!(
                    out,
                    "  host cost: {}; per job {:.1} waits, {:.1} allocations",
                    d.summary(),
                    d.host_waits as f64 / (*jobs).max(1) as f64,
                    d.device_allocations as f64 / (*jobs).max(1) as f64,
                )?;
            }
        }
        let (input, seconds) = self.compaction_input();
        if seconds > 0.0 {
            writeln!(
                out,
                "Compaction speed: {:.1} MB/s ({:.1} MB of input in {seconds:.3} s)",
                input as f64 / MB / seconds,
                input as f64 / MB
            )?;
        } else {
            writeln!(out, "Compaction speed: - (no compaction ran)")?;
        }
        writeln!(
            out,
            "Stalls: slowed down {} times ({:.3} s), stopped {} times ({:.3} s); by cause: {}",
            self.stalls.slowdown_count,
            self.stalls.slowdown_micros as f64 / 1e6,
            self.stalls.stop_count,
            self.stalls.stop_micros as f64 / 1e6,
            self.stalls.causes().describe()
        )?;
        writeln!(
            out,
            "Writes: {} direct, {} leads taken from sleeping writers, direct writes closed {} times by a writer that slept",
            self.writes.direct, self.writes.leads_taken, self.writes.direct_closed_by_sleep
        )?;
        let own = cpu.since(&stress);
        let per_gb = if input > 0 {
            format!(
                "; {:.1} CPU-s per GB compacted",
                own.total() / (input as f64 / (1024.0 * MB))
            )
        } else {
            String::new()
        };
        let stress_note = if stress.total() > 0.0 {
            format!(" (not counting {:.2} s of --cpu_stress)", stress.total())
        } else {
            String::new()
        };
        writeln!(
            out,
            "CPU: {:.2} s (user {:.2}, system {:.2}){stress_note} in {wall_secs:.2} s{per_gb}",
            own.total(),
            own.user,
            own.system
        )?;
        self.scheduler.write(out)?;
        Ok(())
    }
}

/// The engine summary as `shale bench --json` writes it (its `summary`):
/// the figures of [`EngineTotals::write_summary`]'s lines, in bytes,
/// seconds and MB (2^20 bytes) per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Bytes of user data written (keys and values of puts, keys of
    /// deletes).
    pub user_bytes: u64,
    /// Bytes written by flushes and compactions.
    pub engine_bytes_written: u64,
    /// `engine_bytes_written / user_bytes`; `None` before any user write.
    pub write_amplification: Option<f64>,
    /// The levels that flushes and compactions wrote to, L0 first.
    pub levels: Vec<SummaryLevel>,
    /// Per executor, by name: its compactions (flushes excluded).
    pub executors: BTreeMap<String, SummaryExecutor>,
    /// Compaction speed over every executor.
    pub compaction: SummaryCompaction,
    /// Time writers were held back.
    pub stalls: SummaryStalls,
    /// The process's CPU time over the run, `--cpu_stress` left out.
    pub cpu: SummaryCpu,
    /// Seconds the whole run took.
    pub wall_seconds: f64,
    /// The compaction service's ledger.
    pub scheduler: SummaryScheduler,
}

/// One level of [`Summary::levels`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryLevel {
    /// The level.
    pub level: usize,
    /// Flushes and compactions that wrote to it.
    pub count: u64,
    /// Bytes they read.
    pub bytes_read: u64,
    /// Bytes they wrote.
    pub bytes_written: u64,
    /// Their seconds.
    pub seconds: f64,
    /// `bytes_read` in MB per second; `None` when nothing was read.
    pub read_megabytes_per_second: Option<f64>,
}

/// One executor of [`Summary::executors`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryExecutor {
    /// Jobs it completed.
    pub jobs: u64,
    /// Input bytes.
    pub bytes_read: u64,
    /// Output bytes.
    pub bytes_written: u64,
    /// Seconds of its jobs.
    pub seconds: f64,
    /// Input MB per second (0 when no time was counted).
    pub megabytes_per_second: f64,
    /// Seconds per phase.
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
}

/// [`Summary::compaction`]: input bytes over compaction seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryCompaction {
    /// Input bytes of every compaction.
    pub input_bytes: u64,
    /// Their seconds.
    pub seconds: f64,
    /// Input MB per second; `None` when no compaction ran.
    pub megabytes_per_second: Option<f64>,
}

/// [`Summary::stalls`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryStalls {
    /// Writes slowed down.
    pub slowdown_count: u64,
    /// Their seconds.
    pub slowdown_seconds: f64,
    /// Writes stopped.
    pub stop_count: u64,
    /// Their seconds.
    pub stop_seconds: f64,
    /// The same by cause.
    pub causes: StallCauses,
}

/// [`Summary::cpu`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryCpu {
    /// User plus system seconds.
    pub seconds: f64,
    /// In user mode.
    pub user_seconds: f64,
    /// In the kernel.
    pub system_seconds: f64,
    /// What the `--cpu_stress` threads used (left out of the above).
    pub stress_seconds: f64,
    /// CPU seconds per GB (2^30 bytes) of compaction input; `None` when
    /// nothing was compacted.
    pub seconds_per_gb_compacted: Option<f64>,
}

/// [`Summary::scheduler`]: the `Scheduler:` lines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryScheduler {
    /// Per executor, by name: the jobs the service gave it.
    pub executors: BTreeMap<String, SummarySchedulerExecutor>,
    /// Jobs queued, completed, failed, refused and so on, summed over the
    /// run's opens (fields of this object in the document).
    #[serde(flatten)]
    pub counts: shale::compaction::scheduler::SchedulerCounts,
    /// Jobs that ran on another executor than the first of their chain.
    pub fallbacks: u64,
    /// Why the last of them fell back.
    pub last_fallback: Option<String>,
}

/// One executor of [`SummaryScheduler::executors`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummarySchedulerExecutor {
    /// Jobs it completed.
    pub jobs: u64,
    /// Their input bytes.
    pub bytes: u64,
    /// Their seconds.
    pub seconds: f64,
    /// Jobs it failed.
    pub failures: u64,
    /// Of those, panics caught.
    pub panics: u64,
}

impl EngineTotals {
    /// The figures of [`write_summary`](Self::write_summary), for
    /// `shale bench --json`; the arguments are the same.
    pub fn summary(&self, cpu: CpuTime, stress: CpuTime, wall_secs: f64) -> Summary {
        let (input, seconds) = self.compaction_input();
        let own = cpu.since(&stress);
        let counts = &self.scheduler.counts;
        Summary {
            user_bytes: self.user_bytes,
            engine_bytes_written: self.engine_bytes_written(),
            write_amplification: self.write_amplification(),
            levels: self
                .levels
                .iter()
                .enumerate()
                .filter(|(_, stats)| stats.count > 0)
                .map(|(level, stats)| SummaryLevel {
                    level,
                    count: stats.count,
                    bytes_read: stats.bytes_read,
                    bytes_written: stats.bytes_written,
                    seconds: stats.seconds,
                    read_megabytes_per_second: (stats.bytes_read > 0 && stats.seconds > 0.0)
                        .then(|| stats.bytes_read as f64 / MB / stats.seconds),
                })
                .collect(),
            executors: self
                .executors
                .iter()
                .map(|(name, (jobs, stats))| {
                    let executor = SummaryExecutor {
                        jobs: *jobs,
                        bytes_read: stats.bytes_read,
                        bytes_written: stats.bytes_written,
                        seconds: stats.total_secs,
                        megabytes_per_second: shale::stats::megabytes_per_second(
                            stats.bytes_read,
                            stats.total_secs,
                        ),
                        read_seconds: stats.read_secs,
                        unpack_seconds: stats.unpack_secs,
                        merge_seconds: stats.merge_secs,
                        gc_seconds: stats.gc_secs,
                        pack_seconds: stats.pack_secs,
                        write_seconds: stats.write_secs,
                    };
                    (name.clone(), executor)
                })
                .collect(),
            compaction: SummaryCompaction {
                input_bytes: input,
                seconds,
                megabytes_per_second: (seconds > 0.0).then(|| input as f64 / MB / seconds),
            },
            stalls: SummaryStalls {
                slowdown_count: self.stalls.slowdown_count,
                slowdown_seconds: self.stalls.slowdown_micros as f64 / 1e6,
                stop_count: self.stalls.stop_count,
                stop_seconds: self.stalls.stop_micros as f64 / 1e6,
                causes: self.stalls.causes(),
            },
            cpu: SummaryCpu {
                seconds: own.total(),
                user_seconds: own.user,
                system_seconds: own.system,
                stress_seconds: stress.total(),
                seconds_per_gb_compacted: (input > 0)
                    .then(|| own.total() / (input as f64 / (1024.0 * MB))),
            },
            wall_seconds: wall_secs,
            scheduler: SummaryScheduler {
                executors: self
                    .scheduler
                    .executors
                    .iter()
                    .map(|(name, totals)| {
                        let executor = SummarySchedulerExecutor {
                            jobs: totals.jobs,
                            bytes: totals.bytes,
                            seconds: totals.seconds,
                            failures: totals.failures,
                            panics: totals.panics,
                        };
                        (name.clone(), executor)
                    })
                    .collect(),
                counts: *counts,
                fallbacks: self.scheduler.fallbacks,
                last_fallback: self.scheduler.last_fallback.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use shale::shale_compact::job::{CostReport, DeviceCosts};

    #[test]
    fn summary_of_known_counters() {
        let mut totals = EngineTotals {
            levels: vec![LevelStats::default(); 3],
            user_bytes: 10 << 20,
            ..EngineTotals::default()
        };
        totals.levels[0] = LevelStats {
            seconds: 1.0,
            bytes_read: 0,
            bytes_written: 10 << 20,
            count: 5,
        };
        totals.levels[1] = LevelStats {
            seconds: 2.0,
            bytes_read: 40 << 20,
            bytes_written: 20 << 20,
            count: 3,
        };
        totals.executors.insert(
            "parallel".into(),
            (
                3,
                PhaseStats {
                    bytes_read: 40 << 20,
                    bytes_written: 20 << 20,
                    total_secs: 2.0,
                    ..PhaseStats::default()
                },
            ),
        );
        assert_eq!(totals.write_amplification(), Some(3.0));
        assert_eq!(totals.compaction_input(), (40 << 20, 2.0));
        // A device executor also says what it cost the host.
        let mut device = totals.clone();
        device.executors.insert(
            "opencl".into(),
            (
                2,
                PhaseStats {
                    bytes_read: 8 << 20,
                    total_secs: 1.0,
                    costs: CostReport {
                        device: Some(DeviceCosts {
                            kernel_launches: 40,
                            transfers: 10,
                            host_waits: 6,
                            device_allocations: 2,
                            host_thread_cpu_nanos: 300_000_000,
                            ..DeviceCosts::default()
                        }),
                        ..CostReport::default()
                    },
                    ..PhaseStats::default()
                },
            ),
        );
        let mut out = Vec::new();
        device
            .write_summary(&mut out, CpuTime::default(), CpuTime::default(), 5.0)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("Executor opencl: 2 jobs"))
            .unwrap();
        assert_eq!(
            lines[at + 1],
            "  host cost: 40 launches, 10 transfers (0.0 MB up, 0.0 from pinned memory; 0.0 MB down, 0.0 into pinned memory), 6 waits, 2 allocations, 0.0 MB copied on the host, 0.300 CPU-s in the executor's threads, 0.0 MB of pinned memory mapped; per job 3.0 waits, 1.0 allocations"
        );
        assert!(lines[at + 2].starts_with("Executor parallel:"), "{text}");
        let mut out = Vec::new();
        let cpu = CpuTime {
            user: 3.0,
            system: 1.0,
        };
        totals
            .write_summary(&mut out, cpu, CpuTime::default(), 5.0)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("Write amplification: 3.00 (30.0 MB"),
            "{text}"
        );
        assert!(text.contains("Compaction speed: 20.0 MB/s"), "{text}");
        assert!(
            text.contains("CPU: 4.00 s (user 3.00, system 1.00) in 5.00 s; 102.4 CPU-s per GB"),
            "{text}"
        );
        assert!(
            text.contains("    1      3      40.0      20.0     2.000        20.0"),
            "{text}"
        );
        assert!(!text.contains("\n    2 "), "{text}");
        // The JSON summary has the same figures.
        let summary = totals.summary(cpu, CpuTime::default(), 5.0);
        assert_eq!(summary.write_amplification, Some(3.0));
        assert_eq!(summary.compaction.megabytes_per_second, Some(20.0));
        let per_gb = summary.cpu.seconds_per_gb_compacted.unwrap();
        assert!((per_gb - 102.4).abs() < 1e-9, "{per_gb}");
        assert_eq!(summary.levels.len(), 2);
        assert_eq!(summary.levels[1].read_megabytes_per_second, Some(20.0));
        assert_eq!(summary.executors["parallel"].megabytes_per_second, 20.0);
        assert!(
            text.contains("Executor parallel: 3 jobs, read 40.0 MB, wrote 20.0 MB in 2.000 s (20.0 MB/s input)"),
            "{text}"
        );
    }
}
