//! Timing and the report lines, printed exactly as leveldb_bench's `Stats`
//! prints them (scripts/compare parses `name : X micros/op; Y MB/s` and the
//! `Percentiles:` line after it).

use std::sync::OnceLock;
use std::time::Instant;

use crate::timeline::Recorder;

/// Microseconds on a monotonic clock (leveldb_bench: `steady_clock`).
fn now_micros() -> f64 {
    micros_at(Instant::now())
}

/// `at` in microseconds on the clock of `now_micros`.
fn micros_at(at: Instant) -> f64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    at.saturating_duration_since(*EPOCH.get_or_init(Instant::now))
        .as_nanos() as f64
        / 1000.0
}

/// One thread's counts for one benchmark.
#[derive(Debug, Default)]
pub struct Stats<'a> {
    start: f64,
    finish: f64,
    seconds: f64,
    last: f64,
    done: u64,
    pub bytes: u64,
    message: String,
    histogram: bool,
    /// Microseconds of every operation, as `float`s like leveldb_bench's.
    latencies: Vec<f32>,
    /// This thread's part of the --timeline.
    recorder: Option<Recorder<'a>>,
}

impl<'a> Stats<'a> {
    pub fn new(histogram: bool, recorder: Option<Recorder<'a>>) -> Stats<'a> {
        Stats {
            histogram,
            recorder,
            ..Stats::default()
        }
    }

    pub fn start(&mut self) {
        let now = now_micros();
        self.start = now;
        self.finish = now;
        self.last = now;
        self.done = 0;
        self.bytes = 0;
        self.seconds = 0.0;
        self.message.clear();
        self.latencies.clear();
    }

    pub fn stop(&mut self) {
        self.finish = now_micros();
        self.seconds = (self.finish - self.start) * 1e-6;
        if let Some(recorder) = &mut self.recorder {
            recorder.finish();
        }
    }

    pub fn finished_single_op(&mut self) {
        if self.histogram || self.recorder.is_some() {
            let at = Instant::now();
            let now = micros_at(at);
            let latency = (now - self.last) as f32;
            if self.histogram {
                self.latencies.push(latency);
            }
            if let Some(recorder) = &mut self.recorder {
                recorder.record(at, latency);
            }
            self.last = now;
        }
        self.done += 1;
    }

    pub fn add_message(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.message.is_empty() {
            self.message.push(' ');
        }
        self.message.push_str(text);
    }

    /// Folds another thread's counts in: times add up (micros/op is per
    /// thread), the wall interval spans both (MB/s is for all threads).
    pub fn merge(&mut self, other: Stats<'a>) {
        self.latencies.extend(other.latencies);
        self.done += other.done;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
        self.start = self.start.min(other.start);
        self.finish = self.finish.max(other.finish);
        if self.message.is_empty() {
            self.message = other.message;
        }
    }

    pub fn report(&mut self, name: &str) {
        let ops = self.done.max(1);
        let mut extra = String::new();
        if self.bytes > 0 {
            let rate = (self.bytes as f64 / 1048576.0) / ((self.finish - self.start) * 1e-6);
            extra = format!("{rate:6.1} MB/s");
        }
        if !self.message.is_empty() {
            if !extra.is_empty() {
                extra.push(' ');
            }
            extra.push_str(&self.message);
        }
        let separator = if extra.is_empty() { "" } else { " " };
        println!(
            "{name:<12} : {:11.3} micros/op;{separator}{extra}",
            self.seconds * 1e6 / ops as f64
        );
        if self.histogram && !self.latencies.is_empty() {
            self.latencies.sort_by(f32::total_cmp);
            let latencies = &self.latencies;
            let count = latencies.len();
            // leveldb_bench's percentile: the ceil(q * n)-th smallest.
            let at = |quantile: f64| {
                let index = ((quantile * count as f64).ceil() as usize).saturating_sub(1);
                latencies[index.min(count - 1)]
            };
            let sum: f64 = latencies.iter().map(|&latency| f64::from(latency)).sum();
            println!("Microseconds per op:");
            println!("Count: {count}  Average: {:.4}", sum / count as f64);
            println!(
                "Min: {:.4}  Median: {:.4}  Max: {:.4}",
                latencies[0],
                at(0.5),
                latencies[count - 1]
            );
            println!(
                "Percentiles: P50: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}",
                at(0.5),
                at(0.99),
                at(0.999),
                at(0.9999)
            );
        }
    }
}
