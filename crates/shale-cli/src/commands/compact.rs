//! `shale compact`: a full manual compaction (`compact_range(None, None)`),
//! with its speed.
//!
//! Output: the per-executor lines of `shale.executors` (job counts and time
//! per phase; for the `opencl` executor also one line per kernel and
//! transfer and one for the pipeline's stages), then
//!
//! ```text
//! compact, open included: read <bytes> bytes, wrote <bytes> bytes, <seconds> s, <MB/s> MB/s
//! compact: read <bytes> bytes, wrote <bytes> bytes, <seconds> s, <MB/s> MB/s, host CPU <seconds> s, <x> CPU-s/GB, executor <name>
//! ```
//!
//! The last line, the summary, is the compaction from the end of the open
//! until every compaction is done: the manual one (the memtable flush it
//! starts with included) and any the open started (a LevelDB-written
//! database often needs some), which run alongside it as they do in
//! LevelDB. Read and written are summed over the levels from
//! `DB::level_stats()` differences, and MB/s is (read + written) /
//! seconds / 2^20 (db_bench's MB). Host CPU is the user and system time of
//! the whole process over the same span (`getrusage(RUSAGE_SELF)`: every
//! thread, the `parallel` executor's pool and the OpenCL runtime's threads
//! included), and CPU-s/GB that time per GB (2^30 bytes) read, the
//! compaction's input (`-` when nothing was read). The executor is the one
//! asked for (`auto`: the scheduler chose per job; the executor lines above
//! say where the jobs ran). The line before it counts from the start of the
//! open (recovery and its flush included), as LevelDB's `CompactRange` is
//! usually timed on a database it opens.
//!
//! `--json FILE` writes the same figures as one JSON document (the schema
//! of [`CompactReport`], documented in docs/cli.md).
//!
//! On a terminal, stderr shows a spinner meanwhile (the engine reports no
//! progress of a manual compaction): the time so far, the files at each
//! level and the bytes written, polled every 200 ms.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::HumanBytes;
use serde::Serialize;
use shale::db::LevelStats;
use shale::stats::{megabytes_per_second, GB};
use shale::{ExecutorChoice, Options, DB};

use super::Target;
use crate::bench::cpu::CpuTime;
use crate::bench::json::JsonFile;
use crate::db_flags::parse_executor;
use crate::error::{CliError, CliResult};
use crate::progress::{self, Progress};

/// How often the spinner's level counts are refreshed.
const POLL: Duration = Duration::from_millis(200);

/// Arguments of `shale compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Compaction executor (same as --compaction_executor).
    #[arg(long, value_name = "NAME", value_parser = parse_executor)]
    executor: Option<ExecutorChoice>,
    /// Also write the result as one JSON document to this file.
    #[arg(long = "json", value_name = "FILE.json")]
    json: Option<PathBuf>,
    #[command(flatten)]
    target: Target,
}

/// `shale compact --json`'s document. Sizes in bytes, times in seconds,
/// speeds in MB ([`shale::stats::MB`], 2^20 bytes) per second.
#[derive(Debug, Serialize)]
pub struct CompactReport {
    /// Raised when a field changes meaning or goes away.
    pub schema: u32,
    /// `"ShaleDB"`.
    pub engine: &'static str,
    /// The `shale` version.
    pub version: &'static str,
    /// The process's arguments, as given.
    pub command_line: Vec<String>,
    /// The database directory.
    pub db: PathBuf,
    /// The executor asked for (`auto`, `parallel`, ...).
    pub executor: String,
    /// `"snappy"` or `"none"`: how the output was compressed.
    pub compression: &'static str,
    /// The compaction, from the end of the open until every compaction is
    /// done (the `compact:` line).
    pub compaction: CompactFigures,
    /// From the start of the open (the `compact, open included:` line).
    pub open_included: CompactFigures,
    /// Per executor, by name: the compaction jobs it ran since the open.
    pub executors: BTreeMap<String, CompactExecutor>,
}

/// One span's figures in a [`CompactReport`].
#[derive(Debug, Serialize)]
pub struct CompactFigures {
    /// Bytes read by compactions: their input.
    pub read_bytes: u64,
    /// Bytes written by flushes and compactions.
    pub written_bytes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// (read + written) / seconds, in MB/s.
    pub mb_per_second: f64,
    /// User CPU seconds of the whole process over the span.
    pub host_cpu_user_seconds: f64,
    /// System CPU seconds of the whole process over the span.
    pub host_cpu_system_seconds: f64,
    /// User plus system.
    pub host_cpu_seconds: f64,
    /// Host CPU seconds per GB (2^30 bytes) of `read_bytes`; `None` when
    /// nothing was read.
    pub cpu_seconds_per_gb: Option<f64>,
}

/// One executor's jobs in a [`CompactReport`].
#[derive(Debug, Serialize)]
pub struct CompactExecutor {
    /// Jobs it ran.
    pub jobs: u64,
    /// Their input bytes.
    pub read_bytes: u64,
    /// Their output bytes.
    pub written_bytes: u64,
    /// Their seconds, summed over jobs.
    pub seconds: f64,
}

/// Host CPU seconds per GB of `input_bytes`; `None` for no input.
fn cpu_seconds_per_gb(cpu: &CpuTime, input_bytes: u64) -> Option<f64> {
    (input_bytes > 0).then(|| cpu.total() / (input_bytes as f64 / GB))
}

/// Bytes read and written, summed over the levels.
fn totals(stats: &[LevelStats]) -> (u64, u64) {
    stats.iter().fold((0, 0), |(read, written), level| {
        (read + level.bytes_read, written + level.bytes_written)
    })
}

/// `L0 3 L1 12 L2 40 files, 52.1 MiB written`: the non-empty levels' file
/// counts and the bytes written since `written_before`.
fn levels_message(db: &DB, written_before: u64) -> String {
    let mut message = String::new();
    for (level, (files, _bytes)) in db.level_sizes().iter().enumerate() {
        if *files > 0 {
            message.push_str(&format!("L{level} {files} "));
        }
    }
    let written = totals(&db.level_stats()).1.saturating_sub(written_before);
    format!("{message}files, {} written", HumanBytes(written))
}

/// Refreshes the spinner's message until `stop` is dropped.
fn poll_levels(db: &DB, bar: &Progress, written_before: u64, stop: &mpsc::Receiver<()>) {
    loop {
        bar.set_message(levels_message(db, written_before));
        match stop.recv_timeout(POLL) {
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Compacts everything and prints the speed (and writes `--json`).
pub fn run(args: &CompactArgs) -> CliResult {
    let mut target = args.target.clone();
    if let Some(choice) = args.executor {
        match target.flags.compaction_executor {
            Some(other) if other != choice => {
                return Err(CliError::Usage(format!(
                    "--executor={choice} and --compaction_executor={other} disagree"
                )))
            }
            _ => target.flags.compaction_executor = Some(choice),
        }
    }
    let options = target.options(false)?;
    // Created first: a path that cannot be written fails before the work.
    let json = args.json.as_deref().map(JsonFile::create).transpose()?;
    match compact(&target, options) {
        Ok(report) => json.map_or(Ok(()), |json| json.write(&report)),
        Err(e) => {
            // An empty file must not pass for a result.
            if let Some(json) = json {
                json.discard();
            }
            Err(e)
        }
    }
}

/// Opens the database, compacts everything, prints the executor lines and
/// the two summary lines, and returns the same figures as a document.
fn compact(target: &Target, options: Options) -> CliResult<CompactReport> {
    let executor = options.compaction_executor.to_string();
    let compression = if options.snappy { "snappy" } else { "none" };
    let cpu_at_open = CpuTime::process();
    let opened = Instant::now();
    let bar = progress::spinner("compact");
    bar.set_message(format!("opening {}", target.db.display()));
    let db = target.open(options)?;

    // Compactions the open started run alongside the manual one, as in
    // LevelDB (waiting for them first left cores idle:
    // `docs/results/format-and-compaction.md`, "Streaming, the shared table
    // code and an I/O thread (second pass)");
    // the summary ends when all are done.
    let (read_before, written_before) = totals(&db.level_stats());
    let cpu_before = CpuTime::process();
    let started = Instant::now();
    std::thread::scope(|scope| {
        let (stop, stopped) = mpsc::channel::<()>();
        if !bar.is_hidden() {
            let (db, bar) = (&db, &bar);
            scope.spawn(move || poll_levels(db, bar, written_before, &stopped));
        }
        let result = db
            .compact_range(None, None)
            .and_then(|()| db.wait_for_compactions());
        drop(stop);
        result
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_now = CpuTime::process();
    let cpu = cpu_now.since(&cpu_before);
    let all_cpu = cpu_now.since(&cpu_at_open);
    let all_seconds = opened.elapsed().as_secs_f64();
    drop(bar);
    // Level stats count from the open on.
    let (read_after, written_after) = totals(&db.level_stats());
    let read = read_after.saturating_sub(read_before);
    let written = written_after.saturating_sub(written_before);
    // db_bench's MB (2^20 bytes), as every MB ShaleDB prints.
    let speed = megabytes_per_second(read + written, seconds);
    let per_gb = cpu_seconds_per_gb(&cpu, read);

    let mut out = std::io::stdout().lock();
    if let Some(lines) = db.property("shale.executors") {
        write!(out, "{lines}")?;
        if !lines.is_empty() && !lines.ends_with('\n') {
            writeln!(out)?;
        }
    }
    writeln!(
        out,
        "compact, open included: read {read_after} bytes, wrote {written_after} bytes, \
         {all_seconds:.3} s, {:.1} MB/s",
        megabytes_per_second(read_after + written_after, all_seconds)
    )?;
    writeln!(
        out,
        "compact: read {read} bytes, wrote {written} bytes, {seconds:.3} s, \
         {speed:.1} MB/s, host CPU {:.3} s, {} CPU-s/GB, executor {executor}",
        cpu.total(),
        per_gb.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"))
    )?;
    out.flush()?;

    let executors = db
        .executor_stats()
        .into_iter()
        .map(|(name, jobs, stats)| {
            let executor = CompactExecutor {
                jobs,
                read_bytes: stats.bytes_read,
                written_bytes: stats.bytes_written,
                seconds: stats.total_secs,
            };
            (name, executor)
        })
        .collect();
    let report = CompactReport {
        schema: 1,
        engine: "ShaleDB",
        version: env!("CARGO_PKG_VERSION"),
        command_line: std::env::args().collect(),
        db: target.db.clone(),
        executor,
        compression,
        compaction: CompactFigures {
            read_bytes: read,
            written_bytes: written,
            seconds,
            mb_per_second: speed,
            host_cpu_user_seconds: cpu.user,
            host_cpu_system_seconds: cpu.system,
            host_cpu_seconds: cpu.total(),
            cpu_seconds_per_gb: per_gb,
        },
        open_included: CompactFigures {
            read_bytes: read_after,
            written_bytes: written_after,
            seconds: all_seconds,
            mb_per_second: megabytes_per_second(read_after + written_after, all_seconds),
            host_cpu_user_seconds: all_cpu.user,
            host_cpu_system_seconds: all_cpu.system,
            host_cpu_seconds: all_cpu.total(),
            cpu_seconds_per_gb: cpu_seconds_per_gb(&all_cpu, read_after),
        },
        executors,
    };
    Ok(report)
}
