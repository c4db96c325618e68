//! Per-thread benchmark statistics and db_bench's report line.
//!
//! As in db_bench, each thread times its own run; the threads' statistics
//! are merged when all are done: micros/op is the sum of the threads'
//! seconds over the total operations, MB/s is bytes over the wall-clock time
//! from the first start to the last finish. An operation's latency is the
//! time since the previous operation of the same thread finished (db_bench's
//! `FinishedSingleOp`).

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;
use shale::stats::MB;

use super::latency::{new_histogram, record_latency};
use super::timeline::{Timeline, TimelineRecorder};

/// Latency percentiles of a set of operations, in microseconds (in
/// `shale bench --json` as the benchmark's `latency`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Operations recorded.
    pub count: u64,
    /// Mean latency.
    pub average: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Smallest latency.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Largest latency.
    pub max: f64,
}

impl LatencySummary {
    /// Summarizes a histogram of nanoseconds (all zeros when empty).
    pub fn of(histogram: &Histogram<u64>) -> LatencySummary {
        let micros = |nanos: u64| nanos as f64 / 1000.0;
        if histogram.is_empty() {
            return LatencySummary {
                count: 0,
                average: 0.0,
                stddev: 0.0,
                min: 0.0,
                p50: 0.0,
                p99: 0.0,
                p999: 0.0,
                p9999: 0.0,
                max: 0.0,
            };
        }
        LatencySummary {
            count: histogram.len(),
            average: histogram.mean() / 1000.0,
            stddev: histogram.stdev() / 1000.0,
            min: micros(histogram.min()),
            p50: micros(histogram.value_at_quantile(0.5)),
            p99: micros(histogram.value_at_quantile(0.99)),
            p999: micros(histogram.value_at_quantile(0.999)),
            p9999: micros(histogram.value_at_quantile(0.9999)),
            max: micros(histogram.max()),
        }
    }

    /// db_bench's first two histogram lines and RocksDB's percentile line.
    pub fn db_bench_lines(&self) -> String {
        format!(
            "Count: {}  Average: {:.4}  StdDev: {:.2}\n\
             Min: {:.4}  Median: {:.4}  Max: {:.4}\n\
             Percentiles: P50: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n",
            self.count,
            self.average,
            self.stddev,
            self.min,
            self.p50,
            self.max,
            self.p50,
            self.p99,
            self.p999,
            self.p9999
        )
    }
}

/// db_bench's progress message thresholds: every 100 ops up to 1000, then
/// coarser steps.
fn next_report_after(done: u64) -> u64 {
    let step = match done {
        0..1000 => 100,
        1000..5000 => 500,
        5000..10_000 => 1000,
        10_000..50_000 => 5000,
        50_000..100_000 => 10_000,
        100_000..500_000 => 50_000,
        _ => 100_000,
    };
    done + step
}

/// What a thread's [`Stats`] records besides counts.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// Keep a latency histogram (`--histogram`, `--plot`).
    pub latencies: bool,
    /// Print db_bench's `... finished N ops` progress on stderr.
    pub progress: bool,
    /// Feed the `--timeline` intervals: the timeline and this benchmark's
    /// segment in it.
    pub timeline: Option<(Arc<Timeline>, usize)>,
    /// Tell what the thread went through in each operation slower than
    /// this many microseconds (`--slow_op_causes`).
    pub slow_op_causes: Option<u64>,
}

impl Recording {
    /// Progress only when stderr is a terminal and `thread` is the first.
    pub fn for_thread(&self, thread: usize) -> Recording {
        Recording {
            progress: self.progress && thread == 0 && std::io::stderr().is_terminal(),
            ..self.clone()
        }
    }
}

/// What a thread went through during its operations slower than a
/// threshold, from its own resource usage (`getrusage(RUSAGE_THREAD)`,
/// read after every operation): a slow operation is counted under the
/// first of these that happened during it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlowOps {
    threshold_micros: u64,
    /// Operations timed.
    pub ops: u64,
    /// The kernel took the processor away (an involuntary context switch):
    /// another thread ran, or the thread yielded to one.
    pub preempted: u64,
    /// The thread waited in the kernel (a voluntary context switch): a
    /// lock, a condition, a sleep, I/O.
    pub waited: u64,
    /// Page faults and nothing of the above.
    pub faulted: u64,
    /// None of these: the time went where the kernel does not count it
    /// (the hypervisor running another machine, interrupts, the caches),
    /// or into the operation's own work.
    pub unexplained: u64,
    last: Option<ThreadUsage>,
}

/// The counters of a thread's resource usage that `SlowOps` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ThreadUsage {
    involuntary_switches: i64,
    voluntary_switches: i64,
    faults: i64,
}

impl ThreadUsage {
    /// The calling thread's usage; `None` where it cannot be had.
    fn now() -> Option<ThreadUsage> {
        #[cfg(target_os = "linux")]
        {
            let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
            // SAFETY: `usage` is a buffer of the right type for the call to
            // fill; it is read only when the call succeeded.
            let usage = unsafe {
                if libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) != 0 {
                    return None;
                }
                usage.assume_init()
            };
            Some(ThreadUsage {
                involuntary_switches: usage.ru_nivcsw,
                voluntary_switches: usage.ru_nvcsw,
                faults: usage.ru_minflt + usage.ru_majflt,
            })
        }
        #[cfg(not(target_os = "linux"))]
        None
    }
}

impl SlowOps {
    fn new(threshold_micros: u64) -> SlowOps {
        SlowOps {
            threshold_micros,
            last: ThreadUsage::now(),
            ..SlowOps::default()
        }
    }

    /// Operations slower than the threshold.
    pub fn slow(&self) -> u64 {
        self.preempted + self.waited + self.faulted + self.unexplained
    }

    /// Classifies the operation that just took `nanos`, from what changed
    /// in the thread's usage since the previous one.
    fn record(&mut self, nanos: u64) {
        let now = ThreadUsage::now();
        let last = std::mem::replace(&mut self.last, now);
        self.ops += 1;
        if nanos <= self.threshold_micros.saturating_mul(1000) {
            return;
        }
        let (Some(now), Some(last)) = (now, last) else {
            self.unexplained += 1;
            return;
        };
        if now.involuntary_switches > last.involuntary_switches {
            self.preempted += 1;
        } else if now.voluntary_switches > last.voluntary_switches {
            self.waited += 1;
        } else if now.faults > last.faults {
            self.faulted += 1;
        } else {
            self.unexplained += 1;
        }
    }

    fn merge(&mut self, other: &SlowOps) {
        self.ops += other.ops;
        self.preempted += other.preempted;
        self.waited += other.waited;
        self.faulted += other.faulted;
        self.unexplained += other.unexplained;
    }

    /// `Ops over 20 us: ...`, the line `shale bench` prints.
    pub fn report_line(&self) -> String {
        let share = |n: u64| 100.0 * n as f64 / self.ops.max(1) as f64;
        format!(
            "Ops over {} us: {} of {} ({:.3}%): preempted {}, waited {}, page faults {}, \
             none of these {}",
            self.threshold_micros,
            self.slow(),
            self.ops,
            share(self.slow()),
            self.preempted,
            self.waited,
            self.faulted,
            self.unexplained
        )
    }
}

/// One thread's statistics for one benchmark.
#[derive(Debug)]
pub struct Stats {
    start: Instant,
    finish: Instant,
    seconds: f64,
    done: u64,
    bytes: u64,
    message: String,
    last_op_finish: Instant,
    next_report: u64,
    latencies: Option<Histogram<u64>>,
    slow_ops: Option<SlowOps>,
    progress: bool,
    timeline: Option<TimelineRecorder>,
}

impl Stats {
    /// Statistics that record what `recording` asks, started now.
    pub fn new(recording: &Recording) -> Stats {
        let now = Instant::now();
        Stats {
            start: now,
            finish: now,
            seconds: 0.0,
            done: 0,
            bytes: 0,
            message: String::new(),
            last_op_finish: now,
            next_report: 100,
            latencies: recording.latencies.then(new_histogram),
            slow_ops: recording.slow_op_causes.map(SlowOps::new),
            progress: recording.progress,
            timeline: recording
                .timeline
                .as_ref()
                .map(|(timeline, segment)| TimelineRecorder::new(timeline.clone(), *segment)),
        }
    }

    /// Starts (or restarts, forgetting what was counted) the clock.
    pub fn start(&mut self) {
        let now = Instant::now();
        self.start = now;
        self.finish = now;
        self.last_op_finish = now;
        self.seconds = 0.0;
        self.done = 0;
        self.bytes = 0;
        self.next_report = 100;
        self.message.clear();
        if let Some(histogram) = &mut self.latencies {
            histogram.reset();
        }
        if let Some(slow_ops) = &mut self.slow_ops {
            *slow_ops = SlowOps::new(slow_ops.threshold_micros);
        }
    }

    /// Stops the clock and hands the last timeline interval over.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.seconds = (self.finish - self.start).as_secs_f64();
        if let Some(timeline) = &mut self.timeline {
            timeline.flush();
        }
    }

    /// Whether per-operation timing is needed.
    fn timed(&self) -> bool {
        self.latencies.is_some() || self.timeline.is_some() || self.slow_ops.is_some()
    }

    /// Counts one operation (and times it when latencies are kept).
    pub fn finished_single_op(&mut self) {
        if self.timed() {
            let now = Instant::now();
            let nanos = (now - self.last_op_finish).as_nanos() as u64;
            self.last_op_finish = now;
            if let Some(histogram) = &mut self.latencies {
                record_latency(histogram, nanos);
            }
            if let Some(slow_ops) = &mut self.slow_ops {
                slow_ops.record(nanos);
            }
            if let Some(timeline) = &mut self.timeline {
                timeline.record(now, nanos.max(1));
            }
        }
        self.done += 1;
        if self.progress && self.done >= self.next_report {
            self.next_report = next_report_after(self.next_report);
            eprint!("... finished {} ops{:30}\r", self.done, "");
        }
    }

    /// Counts bytes for the MB/s column.
    pub fn add_bytes(&mut self, bytes: u64) {
        self.bytes += bytes;
    }

    /// Appends to the message printed after the rate.
    pub fn add_message(&mut self, message: &str) {
        append_with_space(&mut self.message, message);
    }

    /// Operations counted.
    #[cfg(test)]
    pub fn done(&self) -> u64 {
        self.done
    }

    /// The latency histogram, when kept.
    pub fn latencies(&self) -> Option<&Histogram<u64>> {
        self.latencies.as_ref()
    }

    /// What the slow operations went through (`--slow_op_causes`).
    pub fn slow_ops(&self) -> Option<&SlowOps> {
        self.slow_ops.as_ref()
    }

    /// Adds another thread's statistics (db_bench's `Stats::Merge`).
    pub fn merge(&mut self, other: &Stats) {
        if let (Some(mine), Some(theirs)) = (&mut self.latencies, &other.latencies) {
            // Both auto-resize, so adding cannot run out of range.
            let _ = mine.add(theirs);
        }
        if let (Some(mine), Some(theirs)) = (&mut self.slow_ops, &other.slow_ops) {
            mine.merge(theirs);
        }
        self.done += other.done;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
        self.start = self.start.min(other.start);
        self.finish = self.finish.max(other.finish);
        // Keep the message of one thread only, as db_bench.
        if self.message.is_empty() {
            self.message = other.message.clone();
        }
    }

    /// Wall-clock seconds from the first start to the last finish.
    pub fn elapsed_seconds(&self) -> f64 {
        (self.finish - self.start).as_secs_f64()
    }

    /// The benchmark's figures, as the report line prints them and
    /// `shale bench --json` writes them.
    pub fn figures(&self) -> Figures {
        // Pretend at least one op was done, for benchmarks that count none.
        let done = self.done.max(1);
        let elapsed = self.elapsed_seconds();
        Figures {
            ops: self.done,
            micros_per_op: self.seconds * 1e6 / done as f64,
            mb_per_second: (self.bytes > 0).then(|| {
                if elapsed > 0.0 {
                    self.bytes as f64 / MB / elapsed
                } else {
                    0.0
                }
            }),
            seconds: elapsed,
            bytes: self.bytes,
            message: self.message.clone(),
        }
    }

    /// db_bench's report line, without the newline.
    pub fn report_line(&self, name: &str) -> String {
        let figures = self.figures();
        let mut extra = String::new();
        if let Some(rate) = figures.mb_per_second {
            extra = format!("{rate:6.1} MB/s");
        }
        append_with_space(&mut extra, &figures.message);
        format_report_line(name, figures.micros_per_op, &extra)
    }
}

/// What a benchmark measured (its threads merged), as its report line
/// prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Operations done.
    pub ops: u64,
    /// The threads' seconds over the operations (at least one), in
    /// microseconds: db_bench's micros/op.
    pub micros_per_op: f64,
    /// Bytes over the wall-clock seconds, in MB (2^20 bytes) per second;
    /// `None` when the benchmark counts no bytes (db_bench prints no MB/s).
    pub mb_per_second: Option<f64>,
    /// Wall-clock seconds from the first thread's start to the last one's
    /// finish.
    pub seconds: f64,
    /// Bytes counted for the MB/s.
    pub bytes: u64,
    /// What the line prints after the rate (`(1234 of 2000 found)`).
    pub message: String,
}

/// `name : micros micros/op; extra` with db_bench's widths.
pub fn format_report_line(name: &str, micros_per_op: f64, extra: &str) -> String {
    let separator = if extra.is_empty() { "" } else { " " };
    format!("{name:<12} : {micros_per_op:11.3} micros/op;{separator}{extra}")
}

/// Appends `message` to `text`, separated by a space.
fn append_with_space(text: &mut String, message: &str) {
    if message.is_empty() {
        return;
    }
    if !text.is_empty() {
        text.push(' ');
    }
    text.push_str(message);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn report_line_has_db_bench_s_format() {
        assert_eq!(
            format_report_line("fillrandom", 2.45, "  18.7 MB/s"),
            "fillrandom   :       2.450 micros/op;   18.7 MB/s"
        );
        assert_eq!(
            format_report_line("compact", 1_234_567.0, ""),
            "compact      : 1234567.000 micros/op;"
        );
        assert_eq!(
            format_report_line("readrandomwriterandom", 3.0, "(x)"),
            "readrandomwriterandom :       3.000 micros/op; (x)"
        );
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn slow_operations_are_told_apart_by_what_their_thread_went_through() {
        let recording = Recording {
            slow_op_causes: Some(1000),
            ..Recording::default()
        };
        let mut stats = Stats::new(&recording);
        stats.start();
        // Fast: not counted as slow.
        stats.finished_single_op();
        // Asleep for 5 ms: a voluntary context switch (or, on a machine
        // busy enough, an involuntary one as well).
        std::thread::sleep(std::time::Duration::from_millis(5));
        stats.finished_single_op();
        let slow = stats.slow_ops().unwrap();
        assert_eq!((slow.ops, slow.slow()), (2, 1), "{slow:?}");
        assert_eq!(slow.waited + slow.preempted, 1, "{slow:?}");

        let mut other = Stats::new(&recording);
        other.start();
        std::thread::sleep(std::time::Duration::from_millis(5));
        other.finished_single_op();
        stats.merge(&other);
        let line = stats.slow_ops().unwrap().report_line();
        assert!(
            line.starts_with("Ops over 1000 us: 2 of 3 (66.667%): preempted "),
            "{line}"
        );
    }

    #[test]
    fn merged_stats_sum_seconds_and_keep_one_message() {
        let recording = Recording {
            latencies: true,
            ..Recording::default()
        };
        let mut a = Stats::new(&recording);
        let mut b = Stats::new(&recording);
        for _ in 0..10 {
            a.finished_single_op();
            b.finished_single_op();
        }
        a.add_bytes(1000);
        b.add_bytes(1000);
        b.add_message("(10 of 10 found)");
        a.stop();
        b.stop();
        a.merge(&b);
        assert_eq!(a.done(), 20);
        assert_eq!(a.latencies().unwrap().len(), 20);
        let line = a.report_line("readrandom");
        assert!(line.starts_with("readrandom   : "), "{line}");
        assert!(line.contains(" micros/op; "), "{line}");
        assert!(line.ends_with("MB/s (10 of 10 found)"), "{line}");
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut histogram = new_histogram();
        // 1..=1000 microseconds, once each.
        for micros in 1..=1000u64 {
            histogram.record(micros * 1000).unwrap();
        }
        let summary = LatencySummary::of(&histogram);
        assert_eq!(summary.count, 1000);
        let close = |a: f64, b: f64| (a - b).abs() <= b * 0.002 + 0.001;
        assert!(close(summary.average, 500.5), "{summary:?}");
        assert!(close(summary.min, 1.0), "{summary:?}");
        assert!(close(summary.p50, 500.0), "{summary:?}");
        assert!(close(summary.p99, 990.0), "{summary:?}");
        assert!(close(summary.p999, 999.0), "{summary:?}");
        assert!(close(summary.max, 1000.0), "{summary:?}");
        assert!(close(summary.stddev, 288.675), "{summary:?}");
        let lines = summary.db_bench_lines();
        assert!(lines.starts_with("Count: 1000  Average: 500.5"), "{lines}");
        assert!(lines.contains("P99: 99"), "{lines}");
        assert_eq!(LatencySummary::of(&new_histogram()).count, 0);
    }

    #[test]
    fn histograms_grow_to_hold_long_operations() {
        let mut histogram = new_histogram();
        record_latency(&mut histogram, 50);
        record_latency(&mut histogram, 0);
        record_latency(&mut histogram, 12_000_000_000);
        let summary = LatencySummary::of(&histogram);
        assert_eq!(summary.count, 3);
        assert!((summary.max - 12_000_000.0).abs() < 12_000.0, "{summary:?}");
        assert!((summary.min - 0.001).abs() < 1e-9, "{summary:?}");
    }

    #[test]
    fn progress_steps_follow_db_bench() {
        let mut next = 100;
        let mut steps = vec![];
        while next <= 1_000_000 {
            steps.push(next);
            next = next_report_after(next);
        }
        assert_eq!(
            &steps[..11],
            &[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1500]
        );
        assert!(steps.contains(&5000) && steps.contains(&60_000) && steps.contains(&600_000));
    }
}
