//! `--timeline=FILE.csv`: throughput and tail latency per time interval.
//!
//! Each benchmark is a segment of the run. Every thread counts its
//! operations and their latencies for the interval it is in (intervals are
//! `--timeline_interval` seconds long, counted from the start of the run)
//! and hands the interval to the shared [`Timeline`] when it moves on to the
//! next one, so threads share a lock once per interval, not per operation.
//!
//! The CSV has one row per segment and interval, intervals without any
//! operation included (a write stall shows as 0 ops/s):
//!
//! ```text
//! seconds,benchmark,ops,ops_per_sec,p99_micros
//! 1.000,fillrandom,401234,401234.0,5.123
//! ```
//!
//! `seconds` is the end of the interval since the start of the run (or the
//! end of the benchmark, for its last interval); `ops_per_sec` divides by
//! the part of the interval the benchmark ran.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::latency::{new_histogram, record_latency};

/// Operations and latencies of one segment in one interval.
#[derive(Debug)]
struct IntervalData {
    ops: u64,
    latencies: Histogram<u64>,
}

/// A benchmark's span in the run, in seconds since the start.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Benchmark name.
    pub benchmark: String,
    /// When it started.
    pub start_secs: f64,
    /// When it ended (`None` while running).
    pub end_secs: Option<f64>,
}

#[derive(Debug, Default)]
struct TimelineState {
    segments: Vec<Segment>,
    /// Keyed by (segment, interval index).
    intervals: BTreeMap<(usize, u64), IntervalData>,
}

/// The intervals of a whole run, shared by the benchmark threads.
#[derive(Debug)]
pub struct Timeline {
    start: Instant,
    interval: Duration,
    state: Mutex<TimelineState>,
}

/// One row of the CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    /// End of the interval (or of the benchmark), since the start of the run.
    pub seconds: f64,
    /// Benchmark name.
    pub benchmark: String,
    /// Operations finished in the interval.
    pub ops: u64,
    /// `ops` over the part of the interval the benchmark ran.
    pub ops_per_sec: f64,
    /// 99th percentile latency in the interval, in microseconds (0 without
    /// operations).
    pub p99_micros: f64,
    /// Seconds of the interval the benchmark ran (not in the CSV).
    pub window_secs: f64,
}

impl Timeline {
    /// A timeline starting now, with intervals of `interval`.
    pub fn new(interval: Duration) -> Timeline {
        Timeline {
            start: Instant::now(),
            interval: interval.max(Duration::from_millis(1)),
            state: Mutex::new(TimelineState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TimelineState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Seconds since the start of the run.
    pub fn seconds_at(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }

    /// The interval `at` falls in.
    fn interval_index(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.start).as_nanos() / self.interval.as_nanos()) as u64
    }

    /// Opens a segment for `benchmark`, starting now; returns its number.
    pub fn begin(&self, benchmark: &str) -> usize {
        let start_secs = self.seconds_at(Instant::now());
        let mut state = self.lock();
        state.segments.push(Segment {
            benchmark: benchmark.to_string(),
            start_secs,
            end_secs: None,
        });
        state.segments.len() - 1
    }

    /// Closes `segment` now.
    pub fn end(&self, segment: usize) {
        let end_secs = self.seconds_at(Instant::now());
        if let Some(s) = self.lock().segments.get_mut(segment) {
            s.end_secs = Some(end_secs);
        }
    }

    /// Adds a thread's counts for one interval.
    fn add(&self, segment: usize, interval: u64, ops: u64, latencies: &Histogram<u64>) {
        let mut state = self.lock();
        let data = state
            .intervals
            .entry((segment, interval))
            .or_insert_with(|| IntervalData {
                ops: 0,
                latencies: new_histogram(),
            });
        data.ops += ops;
        // Auto-resizing histograms: adding cannot run out of range.
        let _ = data.latencies.add(latencies);
    }

    /// The rows of the CSV so far.
    pub fn rows(&self) -> Vec<TimelineRow> {
        let state = self.lock();
        let interval = self.interval.as_secs_f64();
        let mut rows = Vec::new();
        for (number, segment) in state.segments.iter().enumerate() {
            let end_secs = segment.end_secs.unwrap_or(segment.start_secs);
            let first = (segment.start_secs / interval).floor() as u64;
            let last = (end_secs / interval).floor() as u64;
            for index in first..=last {
                let window_start = (index as f64 * interval).max(segment.start_secs);
                let window_end = ((index + 1) as f64 * interval).min(end_secs);
                let data = state.intervals.get(&(number, index));
                let ops = data.map_or(0, |d| d.ops);
                let width = window_end - window_start;
                if width <= 0.0 && ops == 0 {
                    continue;
                }
                rows.push(TimelineRow {
                    seconds: window_end,
                    benchmark: segment.benchmark.clone(),
                    ops,
                    ops_per_sec: if width > 0.0 { ops as f64 / width } else { 0.0 },
                    p99_micros: data
                        .filter(|d| !d.latencies.is_empty())
                        .map_or(0.0, |d| d.latencies.value_at_quantile(0.99) as f64 / 1000.0),
                    window_secs: width,
                });
            }
        }
        rows
    }
}

/// Writes `rows` as the timeline CSV.
pub fn write_csv(rows: &[TimelineRow], out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "seconds,benchmark,ops,ops_per_sec,p99_micros")?;
    for row in rows {
        writeln!(
            out,
            "{:.3},{},{},{:.1},{:.3}",
            row.seconds, row.benchmark, row.ops, row.ops_per_sec, row.p99_micros
        )?;
    }
    Ok(())
}

/// A thread's counts for the interval it is in.
#[derive(Debug)]
pub struct TimelineRecorder {
    timeline: std::sync::Arc<Timeline>,
    segment: usize,
    interval: Option<u64>,
    ops: u64,
    latencies: Histogram<u64>,
}

impl TimelineRecorder {
    /// Records into `segment` of `timeline`.
    pub fn new(timeline: std::sync::Arc<Timeline>, segment: usize) -> TimelineRecorder {
        TimelineRecorder {
            timeline,
            segment,
            interval: None,
            ops: 0,
            latencies: new_histogram(),
        }
    }

    /// Counts an operation that finished at `at` after `nanos`.
    pub fn record(&mut self, at: Instant, nanos: u64) {
        let index = self.timeline.interval_index(at);
        if self.interval != Some(index) {
            self.flush();
            self.interval = Some(index);
        }
        self.ops += 1;
        record_latency(&mut self.latencies, nanos);
    }

    /// Hands the current interval to the timeline.
    pub fn flush(&mut self) {
        if let Some(index) = self.interval.take() {
            if self.ops > 0 {
                self.timeline
                    .add(self.segment, index, self.ops, &self.latencies);
            }
        }
        self.ops = 0;
        self.latencies.reset();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::Arc;

    use super::*;

    #[test]
    fn rows_cover_every_interval_of_a_segment() {
        let timeline = Arc::new(Timeline::new(Duration::from_secs(1)));
        let start = timeline.start;
        {
            let mut state = timeline.lock();
            state.segments.push(Segment {
                benchmark: "fillrandom".into(),
                start_secs: 0.5,
                end_secs: Some(3.25),
            });
        }
        let mut recorder = TimelineRecorder::new(timeline.clone(), 0);
        for _ in 0..100 {
            recorder.record(start + Duration::from_millis(700), 2000);
        }
        // Nothing in [1, 2): a stall.
        for _ in 0..50 {
            recorder.record(start + Duration::from_millis(2100), 10_000);
        }
        recorder.record(start + Duration::from_millis(3200), 1_000_000);
        recorder.flush();
        let rows = timeline.rows();
        let summary: Vec<(String, u64)> = rows
            .iter()
            .map(|r| (format!("{:.2}", r.seconds), r.ops))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("1.00".into(), 100),
                ("2.00".into(), 0),
                ("3.00".into(), 50),
                ("3.25".into(), 1)
            ]
        );
        // 100 ops in the half second the benchmark ran of [0, 1).
        assert!((rows[0].ops_per_sec - 200.0).abs() < 1e-9);
        assert!((rows[0].p99_micros - 2.0).abs() < 0.01);
        assert_eq!(rows[1].p99_micros, 0.0);
        assert!((rows[3].ops_per_sec - 4.0).abs() < 1e-9);

        let mut csv = Vec::new();
        write_csv(&rows, &mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "seconds,benchmark,ops,ops_per_sec,p99_micros");
        assert_eq!(lines[1], "1.000,fillrandom,100,200.0,2.000");
        assert_eq!(lines[2], "2.000,fillrandom,0,0.0,0.000");
        assert_eq!(lines.len(), 5);
        for line in &lines[1..] {
            assert_eq!(line.split(',').count(), 5, "{line}");
        }
    }

    #[test]
    fn threads_add_into_the_same_interval() {
        let timeline = Arc::new(Timeline::new(Duration::from_secs(10)));
        let segment = timeline.begin("readrandom");
        std::thread::scope(|scope| {
            for _ in 0..4 {
                let timeline = timeline.clone();
                scope.spawn(move || {
                    let mut recorder = TimelineRecorder::new(timeline, segment);
                    for _ in 0..1000 {
                        recorder.record(Instant::now(), 500);
                    }
                    recorder.flush();
                });
            }
        });
        timeline.end(segment);
        let rows = timeline.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].ops, 4000);
        assert_eq!(rows[0].benchmark, "readrandom");
    }
}
