//! `shale bench`: LevelDB's db_bench, spoken by ShaleDB.
//!
//! The flags are db_bench's (`--benchmarks=fillrandom,readrandom --num=N
//! --value_size=100 ...`, plus every database flag of [`DbFlags`](crate::db_flags::DbFlags)), the keys
//! and values are generated as db_bench 1.23 generates them (see
//! [`generator`]), and each benchmark prints db_bench's line
//!
//! ```text
//! fillrandom   :       2.450 micros/op;   18.7 MB/s
//! ```
//!
//! so that the same command line can be run against LevelDB
//! (`tools/leveldb-bench`), RocksDB (`db_bench`) and ShaleDB, and compared
//! by `scripts/compare`. After the last benchmark an engine summary follows
//! (write amplification, compaction work and speed, stalls, CPU time; see
//! [`report`]).
//!
//! Differences from db_bench, all deliberate: `--num` defaults to 200,000
//! (the whole default list runs in well under a minute); without `--db` the
//! database lives in a temporary directory removed at the end; `compact` and
//! `waitforcompaction` run in one thread whatever `--threads` says; an
//! unknown benchmark name is an error before anything runs.

pub mod args;
pub mod cpu;
pub mod environment;
pub mod generator;
pub mod json;
pub mod latency;
pub mod plot;
pub mod report;
pub mod stats;
pub mod timeline;
pub mod workloads;

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use shale::DB;

pub use self::args::BenchArgs;
use self::args::Plan;
use self::cpu::{CpuStress, CpuTime};
use self::environment::{DbLocation, Environment};
use self::generator::Random;
use self::json::{BenchmarkRow, Flags, JsonFile, RunReport};
use self::report::EngineTotals;
use self::stats::{LatencySummary, Recording, Stats};
use self::timeline::Timeline;
use self::workloads::{Benchmark, Context, ThreadState};
use crate::error::{CliError, CliResult};

/// Value size of `fill100K`.
const FILL_100K_VALUE_SIZE: usize = 100_000;
fn print_header(
    out: &mut dyn Write,
    args: &BenchArgs,
    plan: &Plan,
    environment: &Environment,
) -> io::Result<()> {
    environment.print("ShaleDB");
    let (raw_size_mb, file_size_mb) = json::estimated_sizes(args, plan);
    writeln!(out, "Keys:       {} bytes each", plan.key_format.key_size)?;
    writeln!(
        out,
        "Values:     {} bytes each ({} bytes after compression)",
        args.value_size,
        (args.value_size as f64 * args.compression_ratio + 0.5) as u64
    )?;
    writeln!(out, "Entries:    {}", args.num)?;
    writeln!(out, "RawSize:    {raw_size_mb:.1} MB (estimated)")?;
    writeln!(out, "FileSize:   {file_size_mb:.1} MB (estimated)")?;
    writeln!(
        out,
        "Executor:   {} (max_background_compactions {})",
        plan.options.compaction_executor, plan.options.max_background_compactions
    )?;
    for warning in &environment.warnings {
        writeln!(out, "{warning}")?;
    }
    writeln!(out, "------------------------------------------------")?;
    Ok(())
}

/// The open database and what the run has measured of earlier ones.
struct Session {
    db: Option<DB>,
    totals: EngineTotals,
    /// The benchmarks run so far, for `--json`.
    rows: Vec<BenchmarkRow>,
}

impl Session {
    fn db(&self) -> CliResult<&DB> {
        self.db
            .as_ref()
            .ok_or_else(|| CliError::Failed("the database is not open".into()))
    }

    /// Closes the database, keeping its counters.
    fn close(&mut self) {
        if let Some(db) = self.db.take() {
            self.totals.absorb(&db);
        }
    }
}

/// Runs `shale bench`.
pub fn run(args: &BenchArgs) -> CliResult {
    let plan = args.plan().map_err(CliError::Usage)?;
    // Before anything runs: a --json path that cannot be written is an
    // error now, not after the benchmarks.
    let json = args.json.as_deref().map(JsonFile::create).transpose()?;
    match (run_planned(args, &plan, json.is_some()), json) {
        (Ok(Some(report)), Some(file)) => file.write(&report),
        (Ok(_), _) => Ok(()),
        (Err(e), file) => {
            if let Some(file) = file {
                file.discard();
            }
            Err(e)
        }
    }
}

/// Runs the checked `plan`; returns the run's JSON document when `json`.
fn run_planned(args: &BenchArgs, plan: &Plan, json: bool) -> CliResult<Option<RunReport>> {
    let location = DbLocation::new(args.db.as_deref(), "shale-bench-")?;
    let dir = location.path().to_path_buf();
    let mut out = io::stdout().lock();
    let environment = Environment::probe();
    print_header(&mut out, args, plan, &environment)?;

    let run_start = Instant::now();
    let cpu_start = CpuTime::process();
    if !args.use_existing_db {
        shale::destroy(&dir, &plan.options)?;
    }
    let mut session = Session {
        db: Some(DB::open(&dir, plan.options.clone())?),
        totals: EngineTotals::default(),
        rows: Vec::new(),
    };
    let timeline = (args.timeline.is_some() || args.plot.is_some()).then(|| {
        Arc::new(Timeline::new(Duration::from_secs_f64(
            args.timeline_interval,
        )))
    });
    let mut latencies: Vec<(String, Histogram<u64>)> = Vec::new();
    let stress = CpuStress::start(args.cpu_stress);

    let outcome = run_benchmarks(
        args,
        plan,
        &dir,
        &mut session,
        timeline.as_ref(),
        &mut latencies,
        &mut out,
    );
    let stress_cpu = stress.stop();
    outcome?;

    if let Some(db) = &session.db {
        session.totals.absorb(db);
    }
    let cpu = CpuTime::process().since(&cpu_start);
    let wall_secs = run_start.elapsed().as_secs_f64();
    session
        .totals
        .write_summary(&mut out, cpu, stress_cpu, wall_secs)?;
    let report = json.then(|| RunReport {
        schema: json::SCHEMA,
        engine: "ShaleDB",
        version: env!("CARGO_PKG_VERSION"),
        command_line: std::env::args().collect(),
        environment,
        flags: Flags::new(args, plan),
        benchmarks: std::mem::take(&mut session.rows),
        summary: Some(session.totals.summary(cpu, stress_cpu, wall_secs)),
        statistics: session.db.as_ref().map(DB::statistics),
    });
    // Close before the temporary directory goes.
    session.db = None;

    if let Some(timeline) = &timeline {
        let rows = timeline.rows();
        if let Some(path) = &args.timeline {
            let mut file = io::BufWriter::new(
                std::fs::File::create(path)
                    .map_err(|e| CliError::Failed(format!("{}: {e}", path.display())))?,
            );
            timeline::write_csv(&rows, &mut file)
                .and_then(|()| file.flush())
                .map_err(|e| CliError::Failed(format!("{}: {e}", path.display())))?;
            writeln!(out, "Timeline:   {}", path.display())?;
        }
        if let Some(path) = &args.plot {
            let note = plot::draw(path, &rows, &latencies).map_err(CliError::Failed)?;
            writeln!(out, "Plot:       {}", path.display())?;
            if let Some(note) = note {
                eprintln!("note: {note}");
            }
        }
    }
    out.flush()?;
    Ok(report)
}

/// Runs the benchmark list, printing one report per benchmark.
fn run_benchmarks(
    args: &BenchArgs,
    plan: &Plan,
    dir: &Path,
    session: &mut Session,
    timeline: Option<&Arc<Timeline>>,
    latencies: &mut Vec<(String, Histogram<u64>)>,
    out: &mut dyn Write,
) -> CliResult {
    for &benchmark in &plan.benchmarks {
        let name = benchmark.name();
        if benchmark.is_report() {
            let property = match benchmark {
                Benchmark::Sstables => "leveldb.sstables",
                _ => "leveldb.stats",
            };
            let text = session
                .db()?
                .property(property)
                .unwrap_or_else(|| "(failed)".into());
            writeln!(out, "\n{text}")?;
            continue;
        }
        if benchmark.wants_fresh_db() {
            if args.use_existing_db {
                writeln!(out, "{name:<12} : skipped (--use_existing_db is true)")?;
                continue;
            }
            session.close();
            shale::destroy(dir, &plan.options)?;
            session.db = Some(DB::open(dir, plan.options.clone())?);
        }

        let (mut num, mut value_size, mut sync) = (args.num, args.value_size, false);
        let mut threads = args.threads as usize;
        match benchmark {
            Benchmark::FillSync => {
                num /= 1000;
                sync = true;
            }
            Benchmark::Fill100K => {
                num /= 1000;
                value_size = FILL_100K_VALUE_SIZE;
            }
            Benchmark::ReadWhileWriting => threads += 1,
            _ if benchmark.single_threaded() => threads = 1,
            _ => {}
        }
        let db = session.db()?;
        let context = Context {
            db,
            // plan() checked that --num fits in an i32.
            key_space: u32::try_from(args.num).unwrap_or(i32::MAX as u32),
            num,
            reads: plan.reads,
            value_size,
            sync,
            key_format: plan.key_format,
            compression_ratio: args.compression_ratio,
            read_percent: args.readwritepercent,
            write_rate_limit: args.benchmark_write_rate_limit,
            verify_checksums: args.verify_checksums,
            threads,
            threads_done: AtomicUsize::new(0),
            user_bytes: AtomicU64::new(0),
            writer_micros: AtomicU64::new(0),
        };
        let segment = timeline.map(|t| (t.clone(), t.begin(name)));
        let recording = Recording {
            latencies: args.histogram || args.plot.is_some(),
            progress: true,
            timeline: segment.clone(),
            slow_op_causes: (args.slow_op_causes > 0).then_some(args.slow_op_causes),
        };
        let seeds: Vec<u32> = (0..threads)
            .map(|i| 1000u32.wrapping_add(args.seed).wrapping_add(i as u32))
            .collect();
        let merged = run_threads(benchmark, &context, &recording, &seeds);
        if let Some((timeline, number)) = &segment {
            timeline.end(*number);
        }
        let merged = merged.map_err(CliError::Failed)?;
        let writer_line = (benchmark == Benchmark::ReadWhileWriting).then(|| context.writer_line());
        session.totals.user_bytes += context.user_bytes.load(Ordering::Relaxed);
        if std::io::stderr().is_terminal() {
            // Clear the progress line.
            eprint!("{:60}\r", "");
        }
        writeln!(out, "{}", merged.report_line(name))?;
        if let Some(line) = writer_line {
            writeln!(out, "{line}")?;
        }
        let summary = args
            .histogram
            .then(|| merged.latencies().map(LatencySummary::of))
            .flatten();
        if let Some(summary) = &summary {
            write!(out, "Microseconds per op:\n{}", summary.db_bench_lines())?;
        }
        session
            .rows
            .push(BenchmarkRow::new(name, threads, merged.figures(), summary));
        if let Some(slow_ops) = merged.slow_ops() {
            writeln!(out, "{}", slow_ops.report_line())?;
        }
        out.flush()?;
        if let Some(histogram) = merged.latencies() {
            latencies.push((name.to_string(), histogram.clone()));
        }
    }
    Ok(())
}

/// Runs `benchmark` in one thread per seed, all starting together, and
/// merges their statistics.
fn run_threads(
    benchmark: Benchmark,
    context: &Context<'_>,
    recording: &Recording,
    seeds: &[u32],
) -> Result<Stats, String> {
    let barrier = Barrier::new(seeds.len());
    let results: Vec<Result<Stats, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .iter()
            .enumerate()
            .map(|(index, &seed)| {
                let barrier = &barrier;
                let recording = recording.for_thread(index);
                scope.spawn(move || {
                    let mut thread = ThreadState {
                        index,
                        rand: Random::new(seed),
                        stats: Stats::new(&recording),
                    };
                    barrier.wait();
                    thread.stats.start();
                    let outcome = workloads::run_thread(benchmark, context, &mut thread);
                    thread.stats.stop();
                    context.threads_done.fetch_add(1, Ordering::Release);
                    outcome.map(|()| thread.stats)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(format!("{benchmark}: a thread panicked")))
            })
            .collect()
    });
    let mut merged: Option<Stats> = None;
    for result in results {
        let stats = result?;
        match &mut merged {
            None => merged = Some(stats),
            Some(m) => m.merge(&stats),
        }
    }
    merged.ok_or_else(|| format!("{benchmark}: no thread ran"))
}
