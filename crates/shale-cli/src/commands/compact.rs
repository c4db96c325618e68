//! `shale compact`: a full manual compaction (`compact_range(None, None)`),
//! with its speed.
//!
//! Output: the per-executor lines of `shale.executors` (job counts and time
//! per phase; for the `opencl` executor also one line per kernel and
//! transfer and one for the pipeline's stages), then
//!
//! ```text
//! compact, open included: read <bytes> bytes, wrote <bytes> bytes, <seconds> s, <MB/s> MB/s
//! compact: read <bytes> bytes, wrote <bytes> bytes, <seconds> s, <MB/s> MB/s, executor <name>
//! ```
//!
//! The last line, the summary, is the compaction from the end of the open
//! until every compaction is done: the manual one (the memtable flush it
//! starts with included) and any the open started (a LevelDB-written
//! database often needs some), which run alongside it as they do in
//! LevelDB. Read and written are summed over the levels from
//! `DB::level_stats()` differences, and MB/s is (read + written) /
//! seconds / 2^20 (db_bench's MB). The line before it counts from the start of the open
//! (recovery and its flush included), as LevelDB's `CompactRange` is
//! usually timed on a database it opens.
//!
//! On a terminal, stderr shows a spinner meanwhile (the engine reports no
//! progress of a manual compaction): the time so far, the files at each
//! level and the bytes written, polled every 200 ms.

use std::io::Write;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::HumanBytes;
use shale::db::LevelStats;
use shale::DB;

use super::Target;
use crate::error::{CliError, CliResult};
use crate::progress::{self, Progress};

/// How often the spinner's level counts are refreshed.
const POLL: Duration = Duration::from_millis(200);

/// Arguments of `shale compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Compaction executor (same as --compaction_executor).
    #[arg(long, value_name = "NAME")]
    executor: Option<String>,
    #[command(flatten)]
    target: Target,
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

/// Compacts everything and prints the speed.
pub fn run(args: &CompactArgs) -> CliResult {
    let mut target = args.target.clone();
    if let Some(name) = &args.executor {
        match &target.flags.compaction_executor {
            Some(other) if other != name => {
                return Err(CliError::Usage(format!(
                    "--executor={name} and --compaction_executor={other} disagree"
                )))
            }
            _ => target.flags.compaction_executor = Some(name.clone()),
        }
    }
    let options = target.options(false)?;
    let executor = options.compaction_executor.clone();
    let opened = Instant::now();
    let bar = progress::spinner("compact");
    bar.set_message(format!("opening {}", target.db.display()));
    let db = target.open(options)?;

    // Compactions the open started run alongside the manual one, as in
    // LevelDB (waiting for them first left cores idle: `docs/benchmarks.md`);
    // the summary ends when all are done.
    let (read_before, written_before) = totals(&db.level_stats());
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
    drop(bar);
    let seconds = started.elapsed().as_secs_f64();
    let all_seconds = opened.elapsed().as_secs_f64();
    // Level stats count from the open on.
    let (read_after, written_after) = totals(&db.level_stats());
    let read = read_after.saturating_sub(read_before);
    let written = written_after.saturating_sub(written_before);
    // db_bench's MB (2^20 bytes), as every MB ShaleDB prints.
    use shale::stats::megabytes_per_second;

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
         {:.1} MB/s, executor {executor}",
        megabytes_per_second(read + written, seconds)
    )?;
    out.flush()?;
    Ok(())
}
