//! The flags of `shale bench`, spelled as db_bench's, and their checking:
//! every value is checked before anything is created or opened.

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::Args;
use shale::Options;

use super::generator::{KeyFormat, ValueGenerator};
use super::workloads::{Benchmark, BENCHMARKS};
use crate::db_flags::DbFlags;

/// db_bench 1.23's default `--benchmarks`.
pub const DEFAULT_BENCHMARKS: &str = "fillseq,fillsync,fillrandom,overwrite,readrandom,readrandom,\
     readseq,readreverse,compact,readrandom,readseq,readreverse,fill100K,crc32c,snappycomp,snappyuncomp";

/// Arguments of `shale bench`, spelled as db_bench's flags.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks, run in order: fillseq, fillrandom,
    /// overwrite, fillsync, fill100K, readrandom, readmissing, readhot,
    /// readseq, readreverse, seekrandom, readwhilewriting, deleteseq,
    /// deleterandom, readrandomwriterandom, compact, waitforcompaction,
    /// stats, sstables, crc32c, snappycomp, snappyuncomp.
    #[arg(long = "benchmarks", value_name = "LIST", default_value = DEFAULT_BENCHMARKS)]
    pub benchmarks: String,
    /// Number of keys (the key space) and of writes per fill.
    #[arg(long = "num", value_name = "N", default_value_t = 200_000,
          value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
    pub num: u64,
    /// Reads per read benchmark; negative: --num.
    #[arg(
        long = "reads",
        value_name = "N",
        default_value_t = -1,
        allow_negative_numbers = true
    )]
    pub reads: i64,
    /// Concurrent threads per benchmark.
    #[arg(long = "threads", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Bytes per value.
    #[arg(long = "value_size", value_name = "BYTES", default_value_t = 100)]
    pub value_size: usize,
    /// Bytes per key (16: db_bench's `%016d`).
    #[arg(long = "key_size", value_name = "BYTES", default_value_t = 16)]
    pub key_size: usize,
    /// Values compress to about this fraction of their size (0 < x <= 1).
    #[arg(
        long = "compression_ratio",
        value_name = "X",
        default_value_t = 0.5,
        allow_negative_numbers = true
    )]
    pub compression_ratio: f64,
    /// Print latency percentiles after each benchmark (0 or 1).
    #[arg(long = "histogram", value_name = "0|1", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub histogram: bool,
    /// For each operation slower than this many microseconds, tell what
    /// its thread went through: preempted, waiting in the kernel, page
    /// faults, or none of these (0: off). Reads the thread's resource usage
    /// after every operation, which adds about half a microsecond to each.
    #[arg(long = "slow_op_causes", value_name = "MICROS", default_value_t = 0)]
    pub slow_op_causes: u64,
    /// Check the CRC of every block a read benchmark reads (0 or 1). Off,
    /// as in db_bench (whose reads use LevelDB's default `ReadOptions`), so
    /// the two compare the same work; the engine's own default is on.
    #[arg(long = "verify_checksums", value_name = "0|1", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub verify_checksums: bool,
    /// Database directory (default: a temporary directory, removed at the
    /// end).
    #[arg(long = "db", value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Keep the database in --db instead of starting empty; fill
    /// benchmarks are then skipped (0 or 1).
    #[arg(long = "use_existing_db", value_name = "0|1", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub use_existing_db: bool,
    /// Added to each thread's key seed (db_bench 1.23: 1000 + thread index).
    #[arg(long = "seed", value_name = "N", default_value_t = 0)]
    pub seed: u32,
    /// readrandomwriterandom: percent of operations that are reads.
    #[arg(long = "readwritepercent", value_name = "PCT", default_value_t = 90,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub readwritepercent: u32,
    /// readwhilewriting: the writer's rate, in bytes of keys and values per
    /// second (db_bench's flag; 0: as fast as it can), so that builds whose
    /// writers write at different speeds can be compared under the same
    /// write load.
    #[arg(
        long = "benchmark_write_rate_limit",
        value_name = "BYTES",
        default_value_t = 0
    )]
    pub benchmark_write_rate_limit: u64,
    /// Direct I/O (O_DIRECT) for compaction reads and writes
    /// (`--use_direct_io_for_compaction`); user reads stay memory-mapped.
    /// The database's file system must take O_DIRECT.
    #[arg(long = "direct_io", value_name = "0|1", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true",
          value_parser = BoolishValueParser::new())]
    pub direct_io: bool,
    /// Write ops/s and p99 latency per interval to this CSV file.
    #[arg(long = "timeline", value_name = "FILE.csv")]
    pub timeline: Option<PathBuf>,
    /// Seconds per --timeline interval.
    #[arg(
        long = "timeline_interval",
        value_name = "SECONDS",
        default_value_t = 1.0
    )]
    pub timeline_interval: f64,
    /// Draw throughput over time and the latency CDF into this PNG file.
    #[arg(long = "plot", value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// Also write the run as one JSON document to this file (db_bench's
    /// `--report_file`, in JSON): the flags, the machine, each benchmark's
    /// figures (and latency percentiles with --histogram=1), the engine
    /// summary and the engine's statistics. The schema is in
    /// docs/benchmarks.md. The file is created before the benchmarks run.
    #[arg(long = "json", value_name = "FILE.json")]
    pub json: Option<PathBuf>,
    /// Keep every core busy this percent of the time in background threads
    /// while the benchmarks run.
    #[arg(long = "cpu_stress", value_name = "PCT", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub cpu_stress: u32,
    #[command(flatten)]
    pub db_flags: DbFlags,
}

/// The checked plan of a run.
#[derive(Debug)]
pub struct Plan {
    /// The benchmarks, in order.
    pub benchmarks: Vec<Benchmark>,
    /// Database options (`create_if_missing` unless `--use_existing_db`).
    pub options: Options,
    /// How keys are written.
    pub key_format: KeyFormat,
    /// Reads per read benchmark.
    pub reads: u64,
}

impl BenchArgs {
    /// Checks every flag before anything is created or opened.
    pub fn plan(&self) -> Result<Plan, String> {
        let benchmarks = parse_benchmarks(&self.benchmarks)?;
        if !(self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            return Err(format!(
                "--compression_ratio must be above 0 and at most 1 (got {})",
                self.compression_ratio
            ));
        }
        let key_format = KeyFormat::new(self.key_size);
        key_format.check_capacity(self.num)?;
        let capacity = ValueGenerator::new(self.compression_ratio).capacity();
        if self.value_size > capacity {
            return Err(format!(
                "--value_size must be at most {capacity} (the value generator's buffer; got {})",
                self.value_size
            ));
        }
        if !(self.timeline_interval > 0.0 && self.timeline_interval.is_finite()) {
            return Err(format!(
                "--timeline_interval must be a positive number of seconds (got {})",
                self.timeline_interval
            ));
        }
        if self.use_existing_db && self.db.is_none() {
            return Err("--use_existing_db=1 needs --db=DIR".into());
        }
        let mut options = self.db_flags.to_options()?;
        options.create_if_missing = !self.use_existing_db;
        if self.direct_io {
            options.direct_io_for_compaction = true;
        }
        let reads = u64::try_from(self.reads).unwrap_or(self.num);
        Ok(Plan {
            benchmarks,
            options,
            key_format,
            reads,
        })
    }
}

/// Parses `--benchmarks` (empty names are skipped, as db_bench does).
pub fn parse_benchmarks(list: &str) -> Result<Vec<Benchmark>, String> {
    let mut benchmarks = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Benchmark::by_name(name) {
            Some(benchmark) => benchmarks.push(benchmark),
            None => {
                let known: Vec<&str> = BENCHMARKS.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown benchmark '{name}' in --benchmarks (known: {})",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(benchmarks)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Harness {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Harness::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
            .map(|h| h.args)
    }

    #[test]
    fn defaults_are_db_bench_s_except_num() {
        let args = parse(&[]).unwrap();
        let plan = args.plan().unwrap();
        assert_eq!(args.num, 200_000);
        assert_eq!(plan.reads, 200_000);
        assert_eq!(args.value_size, 100);
        assert_eq!(args.compression_ratio, 0.5);
        assert!(!args.histogram && !args.use_existing_db);
        let names: Vec<&str> = plan.benchmarks.iter().map(|b| b.name()).collect();
        assert_eq!(names.len(), 16);
        assert_eq!(
            &names[..4],
            &["fillseq", "fillsync", "fillrandom", "overwrite"]
        );
        assert!(plan.options.create_if_missing);
    }

    #[test]
    fn db_bench_flags_parse() {
        let args = parse(&[
            "--benchmarks=fillrandom,,readrandom,stats",
            "--num=1000",
            "--reads=50",
            "--threads=4",
            "--value_size=32",
            "--key_size=20",
            "--histogram=1",
            "--db=/tmp/x",
            "--use_existing_db=0",
            "--seed=7",
            "--compression_ratio=0.25",
            "--readwritepercent=50",
            "--benchmark_write_rate_limit=1000000",
            "--write_buffer_size=8388608",
            "--max_file_size=8388608",
            "--bloom_bits=10",
            "--compression=none",
            "--compaction_executor=streaming",
            "--max_background_compactions=2",
            "--cpu_stress=40",
            "--timeline=t.csv",
            "--timeline_interval=0.5",
            "--json=run.json",
        ])
        .unwrap();
        let plan = args.plan().unwrap();
        assert_eq!(
            plan.benchmarks,
            vec![
                Benchmark::FillRandom,
                Benchmark::ReadRandom,
                Benchmark::Stats
            ]
        );
        assert_eq!(plan.reads, 50);
        assert_eq!(args.benchmark_write_rate_limit, 1_000_000);
        assert_eq!(plan.key_format.key_size, 20);
        assert_eq!(
            (
                args.threads,
                args.seed,
                args.readwritepercent,
                args.cpu_stress
            ),
            (4, 7, 50, 40)
        );
        assert!(args.histogram);
        assert_eq!(args.json.as_deref(), Some(std::path::Path::new("run.json")));
        assert_eq!(plan.options.write_buffer_size, 8 << 20);
        assert_eq!(plan.options.compaction_executor.to_string(), "streaming");
        assert_eq!(plan.options.max_background_compactions, 2);
        assert!(!plan.options.snappy);
        // Space-separated values work too.
        let args = parse(&["--num", "10", "--histogram", "--json", "r.json"]).unwrap();
        assert!(args.histogram);
        assert_eq!(args.json.as_deref(), Some(std::path::Path::new("r.json")));
        assert_eq!(args.num, 10);
    }

    #[test]
    fn bad_flags_are_refused_with_their_name() {
        for bad in [
            &["--num=abc"][..],
            &["--num=-5"],
            &["--num=0"],
            &["--threads=0"],
            &["--histogram=2"],
            &["--readwritepercent=101"],
            &["--cpu_stress=150"],
            &["--nosuch_flag=1"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        let message = |args: &[&str]| parse(args).unwrap().plan().unwrap_err();
        assert!(message(&["--benchmarks=fillrandom,nosuch"]).contains("'nosuch'"));
        assert!(message(&["--compression_ratio=2"]).contains("--compression_ratio"));
        assert!(message(&["--compression_ratio=0"]).contains("--compression_ratio"));
        assert!(message(&["--value_size=2000000"]).contains("--value_size"));
        assert!(message(&["--key_size=3", "--num=5000"]).contains("--key_size"));
        assert!(message(&["--use_existing_db=1"]).contains("--db"));
        assert!(message(&["--timeline_interval=0"]).contains("--timeline_interval"));
        assert!(message(&["--block_size=0"]).contains("block_size"));
        assert!(
            !parse(&["--direct_io=0"])
                .unwrap()
                .plan()
                .unwrap()
                .options
                .direct_io_for_compaction
        );
        assert!(
            parse(&["--direct_io=1"])
                .unwrap()
                .plan()
                .unwrap()
                .options
                .direct_io_for_compaction
        );
    }
}
