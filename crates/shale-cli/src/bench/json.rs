//! `shale bench --json FILE`: the run as one JSON document (db_bench's
//! `--report_file`, in JSON), for scripts that would otherwise parse the
//! text lines (`scripts/compare`). The text on stdout stays db_bench's.
//!
//! The schema (docs/benchmarks.md, "`shale bench --json`"): times in
//! seconds (latencies and micros/op in microseconds), sizes in bytes,
//! speeds in MB per second with db_bench's MB, [`MB`] (2^20 bytes).
//!
//! ```text
//! {
//!   "schema": 1, "engine": "ShaleDB", "version", "command_line": [...],
//!   "environment": {"date", "cpus", "cpu_model", "cpu_cache", "optimized", "warnings"},
//!   "flags": {"benchmarks", "num", "reads", "threads", "value_size", "key_size", ...},
//!   "benchmarks": [{"name", "threads", "ops", "micros_per_op", "mb_per_second",
//!                   "seconds", "bytes", "message", "latency"}, ...],
//!   "summary": {...},      the engine summary (report::Summary)
//!   "statistics": {...}    shale::Statistics of the database at the end
//! }
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use shale::stats::MB;
use shale::Statistics;

use super::args::{BenchArgs, Plan};
use super::environment::Environment;
use super::report::Summary;
use super::stats::{Figures, LatencySummary};
use crate::error::{CliError, CliResult};

/// The version of the document's schema: raised when a field changes
/// meaning or goes away (new fields may come without it).
pub const SCHEMA: u32 = 1;

/// The whole document.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// [`SCHEMA`].
    pub schema: u32,
    /// `"ShaleDB"`.
    pub engine: &'static str,
    /// The `shale` version.
    pub version: &'static str,
    /// The process's arguments, as given.
    pub command_line: Vec<String>,
    /// The machine facts db_bench prints on stderr.
    pub environment: Environment,
    /// The flags that shape the workload and the database.
    pub flags: Flags,
    /// The benchmarks that ran, in order (report benchmarks such as
    /// `stats`, and fills skipped by --use_existing_db, left out).
    pub benchmarks: Vec<BenchmarkRow>,
    /// The engine summary printed after the last benchmark.
    pub summary: Option<Summary>,
    /// The engine's statistics document (`shale stats --json`'s schema)
    /// of the database open at the end, since it was last opened (every
    /// `fill*` benchmark but with --use_existing_db reopens it empty).
    pub statistics: Option<Statistics>,
}

/// The flags of a run that shape what it measures.
#[derive(Debug, Clone, Serialize)]
pub struct Flags {
    /// `--benchmarks`, as planned (names checked, empty ones dropped).
    pub benchmarks: Vec<&'static str>,
    /// `--num`.
    pub num: u64,
    /// Reads per read benchmark (`--reads`, or `--num` when negative).
    pub reads: u64,
    /// `--threads`.
    pub threads: u32,
    /// `--value_size`, bytes.
    pub value_size: usize,
    /// `--key_size`, bytes.
    pub key_size: usize,
    /// `--compression_ratio`.
    pub compression_ratio: f64,
    /// `"snappy"` or `"none"`.
    pub compression: &'static str,
    /// `--histogram`.
    pub histogram: bool,
    /// `--use_existing_db`.
    pub use_existing_db: bool,
    /// `--seed`.
    pub seed: u32,
    /// `--db`; `None`: a temporary directory.
    pub db: Option<PathBuf>,
    /// `--write_buffer_size`, bytes.
    pub write_buffer_size: usize,
    /// `--max_file_size`, bytes.
    pub max_file_size: u64,
    /// `--block_size`, bytes.
    pub block_size: usize,
    /// `--bloom_bits`; `None`: no filter.
    pub bloom_bits: Option<u32>,
    /// `--cache_size`, bytes.
    pub cache_size: usize,
    /// `--compaction_executor`.
    pub executor: String,
    /// `--max_background_compactions`.
    pub max_background_compactions: usize,
    /// `--max_subcompactions`.
    pub max_subcompactions: usize,
    /// `--compaction_pick`.
    pub compaction_pick: &'static str,
    /// `--cross_level_compaction`.
    pub cross_level_compaction: bool,
    /// `--cpu_stress`, percent.
    pub cpu_stress: u32,
    /// The header's `RawSize`: keys and values of `--num` entries, MB.
    pub raw_size_mb: f64,
    /// The header's `FileSize`: the same after compression, MB.
    pub file_size_mb: f64,
}

impl Flags {
    /// The flags of `args`, checked into `plan`.
    pub fn new(args: &BenchArgs, plan: &Plan) -> Flags {
        let options = &plan.options;
        let (raw_size_mb, file_size_mb) = estimated_sizes(args, plan);
        Flags {
            benchmarks: plan.benchmarks.iter().map(|b| b.name()).collect(),
            num: args.num,
            reads: plan.reads,
            threads: args.threads,
            value_size: args.value_size,
            key_size: plan.key_format.key_size,
            compression_ratio: args.compression_ratio,
            compression: if options.snappy { "snappy" } else { "none" },
            histogram: args.histogram,
            use_existing_db: args.use_existing_db,
            seed: args.seed,
            db: args.db.clone(),
            write_buffer_size: options.write_buffer_size,
            max_file_size: options.max_file_size,
            block_size: options.block_size,
            bloom_bits: options.bloom_bits_per_key,
            cache_size: options.block_cache_size,
            executor: options.compaction_executor.to_string(),
            max_background_compactions: options.max_background_compactions,
            max_subcompactions: options.max_subcompactions,
            compaction_pick: options.compaction_pick.name(),
            cross_level_compaction: options.cross_level_compaction,
            cpu_stress: args.cpu_stress,
            raw_size_mb,
            file_size_mb,
        }
    }
}

/// The header's estimated raw and file sizes, in MB.
pub fn estimated_sizes(args: &BenchArgs, plan: &Plan) -> (f64, f64) {
    let key_size = plan.key_format.key_size as f64;
    let value_size = args.value_size as f64;
    let num = args.num as f64;
    (
        (key_size + value_size) * num / MB,
        (key_size + value_size * args.compression_ratio) * num / MB,
    )
}

/// One benchmark that ran.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkRow {
    /// Its name (`fillrandom`).
    pub name: &'static str,
    /// Threads that ran it.
    pub threads: usize,
    /// Operations done.
    pub ops: u64,
    /// db_bench's micros/op: the threads' seconds over the operations.
    pub micros_per_op: f64,
    /// db_bench's MB/s: bytes over the wall-clock seconds; `None` where the
    /// line prints none.
    pub mb_per_second: Option<f64>,
    /// Wall-clock seconds, first thread's start to last one's finish.
    pub seconds: f64,
    /// Bytes counted for the MB/s.
    pub bytes: u64,
    /// What the line prints after the rate (`(1264 of 2000 found)`), or
    /// `None`.
    pub message: Option<String>,
    /// Latency percentiles, microseconds (with --histogram=1; else `None`).
    pub latency: Option<LatencySummary>,
}

impl BenchmarkRow {
    /// The row of `name`, run in `threads` threads.
    pub fn new(
        name: &'static str,
        threads: usize,
        figures: Figures,
        latency: Option<LatencySummary>,
    ) -> BenchmarkRow {
        BenchmarkRow {
            name,
            threads,
            ops: figures.ops,
            micros_per_op: figures.micros_per_op,
            mb_per_second: figures.mb_per_second,
            seconds: figures.seconds,
            bytes: figures.bytes,
            message: (!figures.message.is_empty()).then_some(figures.message),
            latency,
        }
    }
}

/// The `--json` file, created before the benchmarks run so that a path
/// that cannot be written fails the run at once.
#[derive(Debug)]
pub struct JsonFile {
    path: PathBuf,
    file: File,
}

impl JsonFile {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> CliResult<JsonFile> {
        let file = File::create(path).map_err(|e| {
            CliError::Failed(format!(
                "--json {}: cannot create the file: {e}",
                path.display()
            ))
        })?;
        Ok(JsonFile {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Writes `report` (pretty-printed, one final newline): a
    /// [`RunReport`], or `shale compact --json`'s document.
    pub fn write<T: Serialize>(self, report: &T) -> CliResult {
        let failed = |e: &dyn std::fmt::Display| {
            CliError::Failed(format!("--json {}: {e}", self.path.display()))
        };
        let mut out = BufWriter::new(&self.file);
        serde_json::to_writer_pretty(&mut out, report).map_err(|e| failed(&e))?;
        out.write_all(b"\n")
            .and_then(|()| out.flush())
            .map_err(|e| failed(&e))?;
        Ok(())
    }

    /// Removes the file: the run failed, and an empty file must not pass
    /// for its results.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
