//! `shale ycsb`: the YCSB core workloads A–F against ShaleDB, in process.
//!
//! Load phase: `--records` inserts (keys `user<fnvhash64(n)>`, YCSB's
//! hashed insert order). Run phase: `--operations` operations in YCSB's
//! standard mixes:
//!
//! | workload | operations | request distribution |
//! |---|---|---|
//! | a | 50 % read, 50 % update | scrambled zipfian |
//! | b | 95 % read, 5 % update | scrambled zipfian |
//! | c | 100 % read | scrambled zipfian |
//! | d | 95 % read, 5 % insert | latest |
//! | e | 95 % scan (length uniform in 1..=100), 5 % insert | scrambled zipfian |
//! | f | 50 % read, 50 % read-modify-write | scrambled zipfian |
//!
//! A record is one value of `--value_size` bytes (YCSB's default record is
//! ten 100-byte fields), from db_bench's value generator; an update writes
//! the whole value. Latencies are per operation (a read-modify-write is
//! timed as one operation), reported as average, P50, P99, P99.9 and max.

pub mod generator;
pub mod workload;

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, PoisonError};
use std::time::Instant;

use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use shale::{ReadOptions, WriteOptions, DB};

use self::generator::{fnv_hash64, Rng, ScrambledZipfian, SkewedLatest};
use self::workload::{Distribution, Operation, Workload, OPERATIONS};
use crate::bench::cpu::{CpuStress, CpuTime};
use crate::bench::environment::{build_warnings, print_environment, DbLocation};
use crate::bench::generator::ValueGenerator;
use crate::bench::latency::{new_histogram, record_latency};
use crate::bench::report::EngineTotals;
use crate::bench::stats::LatencySummary;
use crate::db_flags::DbFlags;
use crate::error::{CliError, CliResult};

/// Longest scan of workload E (YCSB's `maxscanlength`).
const MAX_SCAN_LENGTH: u64 = 100;
/// Arguments of `shale ycsb`.
#[derive(Debug, Clone, Args)]
pub struct YcsbArgs {
    /// Core workload.
    #[arg(long, value_enum, default_value_t = Workload::A)]
    pub workload: Workload,
    /// Records inserted by the load phase.
    #[arg(long, value_name = "N", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub records: u64,
    /// Operations of the run phase.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub operations: u64,
    /// Client threads.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Bytes per record.
    #[arg(long = "value_size", value_name = "BYTES", default_value_t = 1000)]
    pub value_size: usize,
    /// Override the workload's request distribution.
    #[arg(long = "distribution", value_enum, value_name = "KIND")]
    pub distribution: Option<Distribution>,
    /// Seed of the client threads' random sources.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Keep every core busy this percent of the time in background threads
    /// during the run phase.
    #[arg(long = "cpu_stress", value_name = "PCT", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub cpu_stress: u32,
    /// Database directory, emptied first (default: a temporary directory,
    /// removed at the end).
    #[arg(long = "db", value_name = "DIR")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub db_flags: DbFlags,
}

/// The key of record `n`: YCSB's `"user" + fnvhash64(n)`.
pub fn key_name(n: u64) -> Vec<u8> {
    format!("user{}", fnv_hash64(n)).into_bytes()
}

/// Per-operation latency histograms of one thread.
#[derive(Debug)]
struct Measurements {
    latencies: Vec<Histogram<u64>>,
    not_found: u64,
}

impl Measurements {
    fn new() -> Measurements {
        Measurements {
            latencies: OPERATIONS.iter().map(|_| new_histogram()).collect(),
            not_found: 0,
        }
    }

    fn record(&mut self, operation: Operation, started: Instant) {
        let nanos = started.elapsed().as_nanos() as u64;
        record_latency(&mut self.latencies[operation.index()], nanos);
    }

    fn merge(&mut self, other: &Measurements) {
        for (mine, theirs) in self.latencies.iter_mut().zip(&other.latencies) {
            // Auto-resizing: cannot run out of range.
            let _ = mine.add(theirs);
        }
        self.not_found += other.not_found;
    }
}

/// What the threads of a phase share.
struct Shared<'a> {
    db: &'a DB,
    workload: Workload,
    distribution: Distribution,
    records: u64,
    value_size: usize,
    /// Next record number to insert.
    next_insert: AtomicU64,
    /// Records inserted so far (the `latest` distribution's horizon): in
    /// the run phase, every record below it is inserted.
    inserted: AtomicU64,
    /// Run-phase inserts that finished while one below them had not.
    finished_early: Mutex<BTreeSet<u64>>,
    user_bytes: AtomicU64,
}

impl Shared<'_> {
    /// Record `n`, handed out by `next_insert` in the run phase, is
    /// inserted: the horizon moves past it once every record below it is
    /// inserted too (YCSB's `AcknowledgedCounterGenerator`). Inserts of two
    /// threads finish in either order, and a horizon moved to the highest
    /// finished record sent reads, which the `latest` distribution aims at
    /// the newest records, to a record still being inserted.
    fn acknowledge(&self, n: u64) {
        let mut finished = self
            .finished_early
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        finished.insert(n);
        let mut horizon = self.inserted.load(Ordering::Acquire);
        while finished.remove(&horizon) {
            horizon += 1;
        }
        self.inserted.store(horizon, Ordering::Release);
    }
}

/// Key chooser of one thread.
enum KeyChooser {
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
    Uniform,
}

impl KeyChooser {
    fn new(shared: &Shared<'_>, operations: u64) -> KeyChooser {
        match shared.distribution {
            Distribution::Zipfian => {
                // YCSB sizes the key space for the inserts to come (twice the
                // expected number, its "fudge factor") and redraws keys not
                // inserted yet.
                let insert_share: f64 = shared
                    .workload
                    .mix()
                    .iter()
                    .filter(|(o, _)| *o == Operation::Insert)
                    .map(|(_, p)| p)
                    .sum();
                let expected_new = (operations as f64 * insert_share * 2.0) as u64;
                KeyChooser::Zipfian(ScrambledZipfian::new(0, shared.records + expected_new - 1))
            }
            Distribution::Latest => KeyChooser::Latest(SkewedLatest::new(
                shared.inserted.load(Ordering::Acquire).saturating_sub(1),
            )),
            Distribution::Uniform => KeyChooser::Uniform,
        }
    }

    /// A record number that has been inserted.
    fn next(&mut self, rng: &mut Rng, shared: &Shared<'_>) -> u64 {
        let inserted = shared.inserted.load(Ordering::Acquire).max(1);
        match self {
            KeyChooser::Zipfian(generator) => loop {
                let n = generator.next(rng);
                if n < inserted {
                    return n;
                }
            },
            KeyChooser::Latest(generator) => generator.next(rng, inserted - 1),
            KeyChooser::Uniform => rng.uniform(0, shared.records - 1),
        }
    }
}

fn insert(shared: &Shared<'_>, values: &mut ValueGenerator, n: u64) -> Result<(), String> {
    let key = key_name(n);
    let value = values.generate(shared.value_size);
    shared
        .db
        .put(&WriteOptions::default(), &key, value)
        .map_err(|e| format!("insert: {e}"))?;
    shared
        .user_bytes
        .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
    Ok(())
}

/// Loads records `range` (one thread's share).
fn load_thread(shared: &Shared<'_>, range: std::ops::Range<u64>) -> Result<Measurements, String> {
    let mut values = ValueGenerator::new(0.5);
    let mut measurements = Measurements::new();
    for n in range {
        let started = Instant::now();
        insert(shared, &mut values, n)?;
        measurements.record(Operation::Insert, started);
        shared.inserted.fetch_add(1, Ordering::AcqRel);
    }
    Ok(measurements)
}

/// Runs `operations` operations of the workload.
fn run_thread(shared: &Shared<'_>, operations: u64, seed: u64) -> Result<Measurements, String> {
    let mut rng = Rng::new(seed);
    let mut values = ValueGenerator::new(0.5);
    let mut chooser = KeyChooser::new(shared, operations);
    let mut measurements = Measurements::new();
    let read_options = ReadOptions::new();
    for _ in 0..operations {
        let operation = shared.workload.choose(rng.next_f64());
        let started = Instant::now();
        match operation {
            Operation::Read => {
                let key = key_name(chooser.next(&mut rng, shared));
                if shared
                    .db
                    .get(&read_options, &key)
                    .map_err(|e| format!("read: {e}"))?
                    .is_none()
                {
                    measurements.not_found += 1;
                }
            }
            Operation::Update => {
                let key = key_name(chooser.next(&mut rng, shared));
                let value = values.generate(shared.value_size);
                shared
                    .db
                    .put(&WriteOptions::default(), &key, value)
                    .map_err(|e| format!("update: {e}"))?;
                shared
                    .user_bytes
                    .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
            }
            Operation::Insert => {
                let n = shared.next_insert.fetch_add(1, Ordering::AcqRel);
                insert(shared, &mut values, n)?;
                shared.acknowledge(n);
            }
            Operation::Scan => {
                let start = key_name(chooser.next(&mut rng, shared));
                let length = rng.uniform(1, MAX_SCAN_LENGTH);
                let mut iter = shared
                    .db
                    .iter(&read_options)
                    .map_err(|e| format!("scan: {e}"))?;
                iter.seek(&start);
                let mut seen = 0;
                while seen < length && iter.valid() {
                    std::hint::black_box(iter.value());
                    seen += 1;
                    iter.next();
                }
                iter.status().map_err(|e| format!("scan: {e}"))?;
            }
            Operation::ReadModifyWrite => {
                let key = key_name(chooser.next(&mut rng, shared));
                if shared
                    .db
                    .get(&read_options, &key)
                    .map_err(|e| format!("read-modify-write: {e}"))?
                    .is_none()
                {
                    measurements.not_found += 1;
                }
                let value = values.generate(shared.value_size);
                shared
                    .db
                    .put(&WriteOptions::default(), &key, value)
                    .map_err(|e| format!("read-modify-write: {e}"))?;
                shared
                    .user_bytes
                    .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
            }
        }
        measurements.record(operation, started);
    }
    Ok(measurements)
}

/// Runs `body(thread index)` in `threads` threads started together; returns
/// the merged measurements and the wall-clock seconds.
fn in_threads<F>(threads: usize, body: F) -> Result<(Measurements, f64), String>
where
    F: Fn(usize) -> Result<Measurements, String> + Sync,
{
    let barrier = Barrier::new(threads + 1);
    let (results, seconds) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|index| {
                let (barrier, body) = (&barrier, &body);
                scope.spawn(move || {
                    barrier.wait();
                    body(index)
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        let results: Vec<Result<Measurements, String>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a client thread panicked".into()))
            })
            .collect();
        (results, started.elapsed().as_secs_f64())
    });
    let mut merged = Measurements::new();
    for result in results {
        merged.merge(&result?);
    }
    Ok((merged, seconds))
}

/// The `count` operations' share of thread `index` of `threads`.
fn share(count: u64, threads: u64, index: u64) -> std::ops::Range<u64> {
    let start = count * index / threads;
    let end = count * (index + 1) / threads;
    start..end
}

/// Writes one phase's result: throughput and the latency table.
fn write_phase(
    out: &mut dyn Write,
    phase: &str,
    count: u64,
    seconds: f64,
    threads: u32,
    measurements: &Measurements,
) -> io::Result<()> {
    let rate = if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    };
    writeln!(
        out,
        "[{phase}] {count} operations in {seconds:.3} s: {rate:.1} ops/s ({threads} threads)"
    )?;
    writeln!(
        out,
        "  {:<18} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "operation", "count", "avg(us)", "p50(us)", "p99(us)", "p99.9(us)", "max(us)"
    )?;
    for operation in OPERATIONS {
        let summary = LatencySummary::of(&measurements.latencies[operation.index()]);
        if summary.count == 0 {
            continue;
        }
        writeln!(
            out,
            "  {:<18} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            operation.name(),
            summary.count,
            summary.average,
            summary.p50,
            summary.p99,
            summary.p999,
            summary.max
        )?;
    }
    if measurements.not_found > 0 {
        writeln!(out, "  ({} reads found no record)", measurements.not_found)?;
    }
    Ok(())
}

/// The command-line spelling of a flag value (`a`, `zipfian`).
fn value_name(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string())
}

/// Runs `shale ycsb`.
pub fn run(args: &YcsbArgs) -> CliResult {
    let mut options = args.db_flags.to_options().map_err(CliError::Usage)?;
    options.create_if_missing = true;
    let capacity = ValueGenerator::new(0.5).capacity();
    if args.value_size > capacity {
        return Err(CliError::Usage(format!(
            "--value_size must be at most {capacity} (got {})",
            args.value_size
        )));
    }
    let distribution = args.distribution.unwrap_or(args.workload.distribution());
    let location = DbLocation::new(args.db.as_deref(), "shale-ycsb-")?;
    let mut out = io::stdout().lock();

    print_environment("ShaleDB");
    let mix: Vec<String> = args
        .workload
        .mix()
        .iter()
        .map(|(o, p)| format!("{:.0}% {}", p * 100.0, o.name()))
        .collect();
    writeln!(
        out,
        "Workload:   {} ({}), request distribution {}",
        value_name(args.workload),
        mix.join(", "),
        value_name(distribution)
    )?;
    writeln!(
        out,
        "Records:    {} of {} bytes",
        args.records, args.value_size
    )?;
    writeln!(out, "Operations: {}", args.operations)?;
    writeln!(out, "Executor:   {}", options.compaction_executor)?;
    for warning in build_warnings() {
        writeln!(out, "{warning}")?;
    }
    writeln!(out, "------------------------------------------------")?;

    let run_start = Instant::now();
    let cpu_start = CpuTime::process();
    shale::destroy(location.path(), &options)?;
    let db = DB::open(location.path(), options)?;
    let shared = Shared {
        db: &db,
        workload: args.workload,
        distribution,
        records: args.records,
        value_size: args.value_size,
        next_insert: AtomicU64::new(args.records),
        inserted: AtomicU64::new(0),
        finished_early: Mutex::new(BTreeSet::new()),
        user_bytes: AtomicU64::new(0),
    };
    let threads = u64::from(args.threads);

    let (loaded, seconds) = in_threads(args.threads as usize, |index| {
        load_thread(&shared, share(args.records, threads, index as u64))
    })
    .map_err(CliError::Failed)?;
    write_phase(
        &mut out,
        "LOAD",
        args.records,
        seconds,
        args.threads,
        &loaded,
    )?;
    out.flush()?;

    let stress = CpuStress::start(args.cpu_stress);
    let result = in_threads(args.threads as usize, |index| {
        let range = share(args.operations, threads, index as u64);
        let seed = args
            .seed
            .wrapping_mul(0x9E37_79B9)
            .wrapping_add(index as u64 + 1);
        run_thread(&shared, range.end - range.start, seed)
    });
    let stress_cpu = stress.stop();
    let (measured, seconds) = result.map_err(CliError::Failed)?;
    write_phase(
        &mut out,
        "RUN",
        args.operations,
        seconds,
        args.threads,
        &measured,
    )?;

    let mut totals = EngineTotals::default();
    totals.absorb(&db);
    totals.user_bytes = shared.user_bytes.load(Ordering::Relaxed);
    let cpu = CpuTime::process().since(&cpu_start);
    totals.write_summary(&mut out, cpu, stress_cpu, run_start.elapsed().as_secs_f64())?;
    out.flush()?;
    drop(db);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    #[test]
    fn keys_are_ycsb_s() {
        assert_eq!(key_name(0), format!("user{}", fnv_hash64(0)).into_bytes());
        assert_ne!(key_name(1), key_name(2));
    }

    #[test]
    fn shares_cover_the_count() {
        let ranges: Vec<_> = (0..3).map(|i| share(10, 3, i)).collect();
        assert_eq!(ranges, vec![0..3, 3..6, 6..10]);
    }

    /// A fresh database in a temporary directory.
    fn temp_db() -> (tempfile::TempDir, DB) {
        let dir = tempfile::tempdir().unwrap();
        let options = shale::Options {
            create_if_missing: true,
            ..shale::Options::default()
        };
        let db = DB::open(dir.path(), options).unwrap();
        (dir, db)
    }

    /// The state of a run of `workload` over `records` records, none
    /// loaded yet.
    fn shared(db: &DB, workload: Workload, records: u64) -> Shared<'_> {
        Shared {
            db,
            workload,
            distribution: workload.distribution(),
            records,
            value_size: 50,
            next_insert: AtomicU64::new(records),
            inserted: AtomicU64::new(0),
            finished_early: Mutex::new(BTreeSet::new()),
            user_bytes: AtomicU64::new(0),
        }
    }

    #[test]
    fn the_horizon_waits_for_inserts_that_finish_late() {
        let (_dir, db) = temp_db();
        let shared = shared(&db, Workload::D, 10);
        shared.inserted.store(10, Ordering::Release);
        // Records 10, 11 and 12 handed out; 12 and 11 finish first.
        shared.acknowledge(12);
        shared.acknowledge(11);
        assert_eq!(shared.inserted.load(Ordering::Acquire), 10);
        shared.acknowledge(10);
        assert_eq!(shared.inserted.load(Ordering::Acquire), 13);
        assert!(shared.finished_early.lock().unwrap().is_empty());
    }

    #[test]
    fn every_workload_runs() {
        let (_dir, db) = temp_db();
        for workload in [
            Workload::A,
            Workload::B,
            Workload::C,
            Workload::D,
            Workload::E,
            Workload::F,
        ] {
            let shared = shared(&db, workload, 200);
            let loaded = load_thread(&shared, 0..200).unwrap();
            assert_eq!(loaded.latencies[Operation::Insert.index()].len(), 200);
            let measured = run_thread(&shared, 300, 1).unwrap();
            let total: u64 = measured.latencies.iter().map(Histogram::len).sum();
            assert_eq!(total, 300, "{workload:?}");
            // Every key read was loaded or inserted before.
            assert_eq!(measured.not_found, 0, "{workload:?}");
        }
    }
}
