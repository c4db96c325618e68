//! `--timeline=FILE.csv`: operations per `--timeline_interval` seconds, in
//! the CSV of `shale bench --timeline` (crates/shale-cli/src/bench/timeline.rs)
//! and leveldb_bench's, so that one plot draws every engine:
//!
//! ```text
//! seconds,benchmark,ops,ops_per_sec,p99_micros
//! 1.000,fillrandom,401234,401234.0,5.123
//! ```
//!
//! One row per benchmark and interval, intervals counted from the end of
//! the first open; intervals without an operation are included (a write
//! stall shows as 0). `seconds` is the end of the interval (or of the
//! benchmark, for its last one); `ops_per_sec` divides by the part of the
//! interval the benchmark ran; the P99 is exact over the interval's
//! latencies, as the `Percentiles:` line computes it (stats.rs).
//!
//! Each thread keeps the latencies of the interval it is in and hands them
//! over when it moves on (one lock per interval, not per operation). An
//! interval is summed up as soon as no thread of its benchmark can add to it
//! any more, so only the latencies of the last interval or two are kept.
//! Standard library only: `rustc --test src/timeline.rs` runs its tests
//! without building RocksDB.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Where a thread that has finished its benchmark is.
const DONE: u64 = u64::MAX;

/// An interval summed up.
#[derive(Debug, Clone, Copy)]
struct Interval {
    ops: u64,
    p99: f32,
}

/// One benchmark's span, in seconds since the timeline's start.
#[derive(Debug)]
struct Segment {
    name: String,
    start: f64,
    end: f64,
    /// The interval each thread is in.
    current: Vec<u64>,
    /// Latencies of the intervals a thread may still add to.
    pending: BTreeMap<u64, Vec<f32>>,
    done: BTreeMap<u64, Interval>,
}

/// The intervals of a whole run, shared by the benchmark threads.
#[derive(Debug)]
pub struct Timeline {
    start: Instant,
    /// Seconds per interval.
    interval: f64,
    segments: Mutex<Vec<Segment>>,
}

/// The exact P99 of `latencies` (reordered): the ceil(0.99 n)-th smallest.
fn p99(latencies: &mut [f32]) -> f32 {
    let index = ((0.99 * latencies.len() as f64).ceil() as usize).saturating_sub(1);
    let (_, value, _) = latencies.select_nth_unstable_by(index, f32::total_cmp);
    *value
}

impl Timeline {
    /// A timeline starting now, with intervals of `interval_seconds` (> 0).
    pub fn new(interval_seconds: f64) -> Timeline {
        Timeline {
            start: Instant::now(),
            interval: interval_seconds,
            segments: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Segment>> {
        self.segments.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn seconds_at(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }

    /// The interval `at` falls in.
    pub fn interval_of(&self, at: Instant) -> u64 {
        (self.seconds_at(at) / self.interval) as u64
    }

    /// Opens a segment, starting now, for a benchmark run by `threads`
    /// threads; returns its number.
    pub fn begin(&self, name: &str, threads: usize) -> usize {
        let now = Instant::now();
        let start = self.seconds_at(now);
        let mut segments = self.lock();
        segments.push(Segment {
            name: name.to_string(),
            start,
            end: start,
            current: vec![self.interval_of(now); threads],
            pending: BTreeMap::new(),
            done: BTreeMap::new(),
        });
        segments.len() - 1
    }

    /// Closes `segment` now.
    pub fn end(&self, segment: usize) {
        let end = self.seconds_at(Instant::now());
        if let Some(s) = self.lock().get_mut(segment) {
            s.end = end;
        }
    }

    /// Thread `thread` of `segment` hands over the latencies of `interval`
    /// (emptying `latencies`) and moves on to `next` (`None`: it is done).
    fn add(
        &self,
        segment: usize,
        thread: usize,
        interval: u64,
        latencies: &mut Vec<f32>,
        next: Option<u64>,
    ) {
        let mut segments = self.lock();
        let Some(s) = segments.get_mut(segment) else {
            return;
        };
        if !latencies.is_empty() {
            s.pending.entry(interval).or_default().append(latencies);
        }
        if let Some(current) = s.current.get_mut(thread) {
            *current = next.unwrap_or(DONE);
        }
        let oldest = s.current.iter().copied().min().unwrap_or(DONE);
        while let Some(entry) = s.pending.first_entry() {
            if *entry.key() >= oldest {
                break;
            }
            let (index, mut values) = entry.remove_entry();
            let interval = Interval {
                ops: values.len() as u64,
                p99: p99(&mut values),
            };
            s.done.insert(index, interval);
        }
    }

    /// The CSV of the whole run.
    pub fn csv(&self) -> String {
        let segments = self.lock();
        let mut out = String::from("seconds,benchmark,ops,ops_per_sec,p99_micros\n");
        for s in segments.iter() {
            let first = (s.start / self.interval) as u64;
            let last = (s.end / self.interval) as u64;
            for index in first..=last {
                let window_start = (index as f64 * self.interval).max(s.start);
                let window_end = ((index + 1) as f64 * self.interval).min(s.end);
                let (ops, p99) = s
                    .done
                    .get(&index)
                    .map_or((0, 0.0), |i| (i.ops, f64::from(i.p99)));
                let width = window_end - window_start;
                if width <= 0.0 && ops == 0 {
                    continue;
                }
                let rate = if width > 0.0 { ops as f64 / width } else { 0.0 };
                // Writing to a String cannot fail.
                let _ = writeln!(out, "{window_end:.3},{},{ops},{rate:.1},{p99:.3}", s.name);
            }
        }
        out
    }
}

/// One thread's part of a segment: the interval it is in and its latencies
/// there.
#[derive(Debug)]
pub struct Recorder<'a> {
    timeline: &'a Timeline,
    segment: usize,
    thread: usize,
    interval: u64,
    latencies: Vec<f32>,
}

impl<'a> Recorder<'a> {
    /// Thread `thread` of `segment`, starting now.
    pub fn new(timeline: &'a Timeline, segment: usize, thread: usize) -> Recorder<'a> {
        Recorder {
            timeline,
            segment,
            thread,
            interval: timeline.interval_of(Instant::now()),
            latencies: Vec::new(),
        }
    }

    /// Counts an operation that finished at `at` after `micros`.
    pub fn record(&mut self, at: Instant, micros: f32) {
        let index = self.timeline.interval_of(at);
        if index != self.interval {
            self.timeline.add(
                self.segment,
                self.thread,
                self.interval,
                &mut self.latencies,
                Some(index),
            );
            self.interval = index;
        }
        self.latencies.push(micros);
    }

    /// Hands the last interval over: the thread is done.
    pub fn finish(&mut self) {
        self.timeline.add(
            self.segment,
            self.thread,
            self.interval,
            &mut self.latencies,
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rows_cover_every_interval_and_count_every_operation() {
        let timeline = Timeline::new(1.0);
        let start = timeline.start;
        let segment = timeline.begin("fillrandom", 1);
        let mut recorder = Recorder::new(&timeline, segment, 0);
        for i in 0..100 {
            recorder.record(start + Duration::from_millis(700), i as f32);
        }
        // Nothing in [1, 2): a stall.
        for _ in 0..50 {
            recorder.record(start + Duration::from_millis(2100), 10.0);
        }
        recorder.record(start + Duration::from_millis(3200), 1000.0);
        recorder.finish();
        timeline.lock()[segment].end = 3.25;
        let csv = timeline.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "seconds,benchmark,ops,ops_per_sec,p99_micros");
        let ops: Vec<(String, u64)> = lines[1..]
            .iter()
            .map(|line| {
                let cells: Vec<&str> = line.split(',').collect();
                assert_eq!(cells.len(), 5, "{line}");
                (cells[0].to_string(), cells[2].parse().unwrap_or(u64::MAX))
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                ("1.000".to_string(), 100),
                ("2.000".to_string(), 0),
                ("3.000".to_string(), 50),
                ("3.250".to_string(), 1)
            ]
        );
        // The 99th of 0..100 is 98; a stall interval has no P99.
        assert!(lines[1].ends_with(",98.000"), "{}", lines[1]);
        assert_eq!(lines[2], "2.000,fillrandom,0,0.0,0.000");
        // One operation in the quarter second the benchmark ran of [3, 4).
        assert_eq!(lines[4], "3.250,fillrandom,1,4.0,1000.000");
    }

    #[test]
    fn threads_add_into_the_same_interval() {
        let timeline = Timeline::new(10.0);
        let segment = timeline.begin("readrandom", 4);
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let timeline = &timeline;
                scope.spawn(move || {
                    let mut recorder = Recorder::new(timeline, segment, thread);
                    for _ in 0..1000 {
                        recorder.record(Instant::now(), 0.5);
                    }
                    recorder.finish();
                });
            }
        });
        timeline.end(segment);
        let csv = timeline.csv();
        let rows: Vec<&str> = csv.lines().skip(1).collect();
        assert_eq!(rows.len(), 1, "{csv}");
        assert!(rows[0].contains(",readrandom,4000,"), "{}", rows[0]);
    }

    #[test]
    fn an_interval_waits_for_the_slowest_thread() {
        let timeline = Timeline::new(1.0);
        let start = timeline.start;
        let segment = timeline.begin("fillrandom", 2);
        let mut fast = Recorder::new(&timeline, segment, 0);
        let mut slow = Recorder::new(&timeline, segment, 1);
        fast.record(start + Duration::from_millis(100), 1.0);
        fast.record(start + Duration::from_millis(1100), 1.0);
        // Thread 1 is still in interval 0: nothing is summed up yet.
        assert!(timeline.lock()[segment].done.is_empty());
        slow.record(start + Duration::from_millis(200), 3.0);
        slow.finish();
        fast.finish();
        let done = &timeline.lock()[segment].done;
        assert_eq!(done.get(&0).map(|i| i.ops), Some(2));
        assert_eq!(done.get(&1).map(|i| i.ops), Some(1));
    }
}
