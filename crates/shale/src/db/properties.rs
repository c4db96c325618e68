//! `DB::property`: the statistics and listings LevelDB exposes, under the
//! `shale.` prefix (the `leveldb.` prefix is accepted too).

use std::fmt::Write as _;

use shale_format::version_edit::NUM_LEVELS;

use super::inner::DbInner;
use crate::compaction::scheduler::book::ExecutorBook;
use crate::compaction::scheduler::Scheduler;

use crate::units::MB;

impl DbInner {
    pub(super) fn property(&self, name: &str) -> Option<String> {
        let name = name
            .strip_prefix("shale.")
            .or_else(|| name.strip_prefix("leveldb."))?;
        // The ledger first: the scheduler's lock comes before the state's.
        let levels = self
            .service()
            .with_scheduler(|scheduler| scheduler.book.levels().clone());
        let state = self.lock_state();
        let version = state.current.clone();
        if let Some(level) = name.strip_prefix("num-files-at-level") {
            let level: usize = level.parse().ok()?;
            return (level < NUM_LEVELS).then(|| version.num_files(level).to_string());
        }
        match name {
            "stats" => {
                let mut out = String::new();
                let _ = writeln!(out, "                               Compactions");
                let _ = writeln!(out, "Level  Files Size(MB) Time(sec) Read(MB) Write(MB)");
                let _ = writeln!(out, "--------------------------------------------------");
                for (level, stats) in levels.iter().enumerate() {
                    let files = version.num_files(level);
                    if files == 0 && stats.count == 0 {
                        continue;
                    }
                    let _ = writeln!(
                        out,
                        "{level:>3} {files:>8} {:>8.0} {:>9.0} {:>8.0} {:>9.0}",
                        version.level_bytes(level) as f64 / MB,
                        stats.seconds,
                        stats.bytes_read as f64 / MB,
                        stats.bytes_written as f64 / MB
                    );
                }
                let stalls = state.stalls;
                let _ = writeln!(
                    out,
                    "Stalls: {} slowdowns ({:.3} s), {} stops ({:.3} s); by cause: {}",
                    stalls.slowdown_count,
                    stalls.slowdown_micros as f64 / 1e6,
                    stalls.stop_count,
                    stalls.stop_micros as f64 / 1e6,
                    stalls.causes().describe()
                );
                let _ = writeln!(
                    out,
                    "Writes: {} direct, {} leads taken from sleeping writers, direct writes closed {} times by a writer that slept",
                    self.direct_writes(),
                    state.write_queue.leads_taken,
                    self.direct.closed_by_sleep()
                );
                drop(state);
                self.service().with_scheduler(|scheduler| {
                    out.push_str(&executor_lines(&scheduler.book));
                    out.push_str(&fallback_line(&scheduler.book));
                    out.push_str(&scheduler_lines(scheduler));
                });
                Some(out)
            }
            "executors" => {
                drop(state);
                let mut out = self
                    .service()
                    .with_scheduler(|s| executor_lines(&s.book) + &fallback_line(&s.book));
                out.push_str(&self.worker_lines());
                Some(out)
            }
            "scheduler" => {
                drop(state);
                Some(self.service().with_scheduler(scheduler_lines))
            }
            "sstables" => {
                let mut out = String::new();
                for level in 0..NUM_LEVELS {
                    let _ = writeln!(out, "--- level {level} ---");
                    for file in &version.files[level] {
                        let _ = writeln!(
                            out,
                            " {}:{}[{:?} .. {:?}]",
                            file.number, file.file_size, file.smallest, file.largest
                        );
                    }
                }
                Some(out)
            }
            "approximate-memory-usage" => {
                let mut total = state.mem.approximate_memory_usage() as u64;
                if let Some(imm) = &state.imm {
                    total += imm.approximate_memory_usage() as u64;
                }
                total += self.table_cache.block_cache().usage();
                Some(total.to_string())
            }
            _ => None,
        }
    }
}

impl DbInner {
    /// One line per remote worker: `worker ENDPOINT: jobs N, failures N,
    /// running N, refused: CHECK=N, ...` (the engine's checks that failed,
    /// `shale_compact::remote::Check`); nothing without workers.
    fn worker_lines(&self) -> String {
        let Some(remote) = &self.compaction.executors().remote else {
            return String::new();
        };
        let mut out = String::new();
        for worker in remote.worker_stats() {
            let refused = if worker.refusals.is_empty() {
                "none".to_string()
            } else {
                worker
                    .refusals
                    .iter()
                    .map(|(check, n)| format!("{check}={n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "worker {}: jobs {}, failures {}, running {}, refused: {refused}",
                worker.endpoint, worker.jobs, worker.failures, worker.running
            );
        }
        out
    }
}

/// `fallback: N jobs ran on another executor than their first choice
/// (last reason: ...)`, or nothing.
fn fallback_line(book: &ExecutorBook) -> String {
    match book.fallbacks {
        0 => String::new(),
        n => format!(
            "fallback: {n} jobs ran on another executor than their first choice (last reason: {})\n",
            book.last_fallback.as_deref().unwrap_or("unknown")
        ),
    }
}

/// The `shale.scheduler` property: queues, running jobs, per-executor
/// throughput and counts, fallbacks, sub-compactions, cross-level jobs.
pub(super) fn scheduler_lines(scheduler: &Scheduler) -> String {
    let mut out = String::new();
    let lengths = scheduler.queue_lengths();
    let queues: Vec<String> = lengths
        .iter()
        .enumerate()
        .map(|(level, n)| format!("L{level} {n}"))
        .collect();
    let _ = writeln!(out, "Scheduler queues: {}", queues.join(", "));
    let _ = writeln!(out, "Running: {} jobs", scheduler.running().len());
    for job in scheduler.running() {
        let _ = writeln!(out, "  {}", job.describe());
    }
    for job in scheduler.queued() {
        let _ = writeln!(out, "  queued {}", job.describe());
    }
    for (name, record) in scheduler.book.records() {
        let throughput = record.throughput().map_or("not measured".to_string(), |t| {
            format!("{:.1} MB/s", t / MB)
        });
        let _ = writeln!(
            out,
            "Executor {name}: {} jobs, {:.1} MB in {:.3} s, last jobs {throughput}, {} failures ({} panics)",
            record.jobs,
            record.bytes as f64 / MB,
            record.seconds,
            record.failures,
            record.panics
        );
    }
    let _ = writeln!(out, "Jobs: {}", scheduler.counts);
    let _ = writeln!(
        out,
        "Fallbacks: {}{}",
        scheduler.book.fallbacks,
        scheduler
            .book
            .last_fallback
            .as_ref()
            .map_or(String::new(), |r| format!(" (last: {r})"))
    );
    out
}

fn executor_lines(book: &ExecutorBook) -> String {
    let mut out = String::new();
    for (name, record) in book.records().filter(|(_, r)| r.jobs > 0) {
        let (jobs, s) = (record.jobs, &record.phases);
        let speed = if s.total_secs > 0.0 {
            (s.bytes_read + s.bytes_written) as f64 / MB / s.total_secs
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "Executor {name}: {jobs} jobs, read {:.1} MB, wrote {:.1} MB, {:.3} s ({speed:.1} MB/s); \
             phases: read {:.3} s, unpack {:.3} s, merge {:.3} s, gc {:.3} s, pack {:.3} s, write {:.3} s \
             ({:.3} s of it overlapped with compute)",
            s.bytes_read as f64 / MB,
            s.bytes_written as f64 / MB,
            s.total_secs,
            s.read_secs,
            s.unpack_secs,
            s.merge_secs,
            s.gc_secs,
            s.pack_secs,
            s.write_secs,
            s.overlapped_secs
        );
        out.push_str(&kernel_lines(s));
        if let Some(d) = s.costs.nonzero_device() {
            let _ = writeln!(
                out,
                "  host cost: {}; per job {:.1} waits, {:.1} allocations",
                d.summary(),
                d.host_waits as f64 / jobs as f64,
                d.device_allocations as f64 / jobs as f64,
            );
        }
    }
    out
}

/// For device executors: one line per kernel or transfer kind (device
/// seconds, launches, MB/s of the bytes it processed), then the pipeline's
/// stage busy times against the wall time.
fn kernel_lines(s: &shale_compact::job::PhaseStats) -> String {
    let mut out = String::new();
    let mut kernels: Vec<_> = s.costs.work.iter().collect();
    // Most time first: what to look at is on top.
    kernels.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds).then(a.0.cmp(b.0)));
    for (name, time) in kernels {
        if name.starts_with("wire-") {
            // The remote executor's protobuf bytes each way: exact, as the
            // benchmarks quote them.
            let _ = writeln!(
                out,
                "  {name}: {} messages, {} bytes",
                time.count, time.bytes
            );
            continue;
        }
        let speed = time
            .bytes_per_second()
            .map_or_else(|| "-".to_string(), |b| format!("{:.1}", b / MB));
        let _ = writeln!(
            out,
            "  {name}: {} launches, {:.1} MB, {:.4} s, {speed} MB/s",
            time.count,
            time.bytes as f64 / MB,
            time.seconds
        );
    }
    if let Some(pipeline) = s.pipeline_summary() {
        let _ = writeln!(out, "  pipeline: {pipeline}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_compact::job::{DeviceCosts, PhaseStats, WorkTally};

    #[test]
    fn device_executor_lines_show_kernels_and_pipeline_overlap() {
        let mut stats = PhaseStats {
            total_secs: 2.0,
            ..PhaseStats::default()
        };
        stats.costs.work.insert(
            "rank_merge".into(),
            WorkTally {
                count: 3,
                items: 300,
                bytes: 4 << 20,
                seconds: 0.5,
            },
        );
        stats.costs.work.insert(
            "download".into(),
            WorkTally {
                count: 1,
                items: 0,
                bytes: 0,
                seconds: 0.0,
            },
        );
        stats.stage_busy_secs.insert("read".into(), 1.0);
        stats.stage_busy_secs.insert("device".into(), 1.5);
        stats.costs.device = Some(DeviceCosts {
            kernel_launches: 60,
            transfers: 30,
            bytes_uploaded: 2 << 20,
            bytes_downloaded: 1 << 20,
            bytes_uploaded_pinned: 3 << 19,
            bytes_downloaded_pinned: 1 << 19,
            host_waits: 12,
            device_allocations: 3,
            host_bytes_copied: 1 << 19,
            host_thread_cpu_nanos: 250_000_000,
            pinned_bytes_mapped: 64 << 20,
        });
        let mut executors = ExecutorBook::default();
        for _ in 0..3 {
            executors.record_job("opencl", 1 << 20, 0.5, 100);
        }
        executors.record_phases("opencl", &stats);
        let text = executor_lines(&executors);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("Executor opencl: 3 jobs"), "{text}");
        assert_eq!(
            lines[1],
            "  rank_merge: 3 launches, 4.0 MB, 0.5000 s, 8.0 MB/s"
        );
        assert_eq!(lines[2], "  download: 1 launches, 0.0 MB, 0.0000 s, - MB/s");
        assert_eq!(
            lines[3],
            "  pipeline: stages busy device 1.500 s, read 1.000 s = 2.500 s in 2.000 s wall (0.500 s ran concurrently)"
        );
        assert_eq!(
            lines[4],
            "  host cost: 60 launches, 30 transfers (2.0 MB up, 1.5 from pinned memory; 1.0 MB down, 0.5 into pinned memory), 12 waits, 3 allocations, 0.5 MB copied on the host, 0.250 CPU-s in the executor's threads, 64.0 MB of pinned memory mapped; per job 4.0 waits, 1.0 allocations"
        );
        assert_eq!(lines.len(), 5);

        // CPU executors print no kernel lines.
        let mut executors = ExecutorBook::default();
        executors.record_job("parallel", 1 << 20, 0.5, 100);
        // One that only failed has no line.
        executors.record_failure(shale_compact::ExecutorKind::OpenCl, false);
        assert_eq!(executor_lines(&executors).lines().count(), 1);
    }
}
