//! Compaction speed: `streaming` vs `parallel` vs LevelDB 1.23 on copies of
//! the very same database directory (our files are LevelDB's, so LevelDB can
//! compact the same files).
//!
//! A database is filled with db_bench-style entries (16-byte keys, values
//! half compressible): by ShaleDB with automatic compaction off, so
//! everything sits in L0 files, or, with `--writer leveldb`, by LevelDB
//! 1.23 itself (which compacts as it fills, so the files are spread over
//! levels as in a LevelDB database in use). Each engine then opens a copy
//! and compacts it fully; the engines take turns, one run each per round. Speed is
//! (bytes read + bytes written) / seconds, as the FPGA paper defines it;
//! CPU-seconds per GB of input are from `getrusage` (all threads). It runs
//! with the system allocator, as the `shale` binary does (an earlier
//! version used mimalloc while saying it matched the binary).
//!
//! ```sh
//! cargo bench -p shale --bench compaction -- [--num N] [--repeats R] [--values 32,128,256] [--snappy 0|1]
//!     [--engines leveldb,streaming,parallel] [--writer shale|leveldb] [--keep DIR]
//! ```
//!
//! `--keep DIR` keeps the filled databases in `DIR` (one per value size and
//! writer) and reuses them on the next run, so repeated measurements and
//! profiles of one change skip the fill.

#![allow(clippy::unwrap_used, reason = "benchmark program")]
#![allow(clippy::print_stdout, reason = "benchmark program")]

use std::path::Path;
use std::time::Instant;

use shale::{Options, WriteBatch, WriteOptions, DB};

struct Args {
    num: u64,
    repeats: usize,
    values: Vec<usize>,
    snappy: bool,
    engines: Vec<String>,
    leveldb_writes: bool,
    keep: Option<std::path::PathBuf>,
}

fn parse_args() -> Args {
    let mut args = Args {
        num: 1_000_000,
        repeats: 3,
        values: vec![32, 128, 256],
        snappy: true,
        engines: vec!["leveldb".into(), "streaming".into(), "parallel".into()],
        leveldb_writes: false,
        keep: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--num" => args.num = value.parse().expect("--num N"),
            "--repeats" => args.repeats = value.parse().expect("--repeats R"),
            "--values" => {
                args.values = value
                    .split(',')
                    .map(|v| v.parse().expect("--values a,b,c"))
                    .collect()
            }
            "--snappy" => args.snappy = value == "1",
            "--keep" => args.keep = Some(value.into()),
            "--engines" => args.engines = value.split(',').map(String::from).collect(),
            "--writer" => {
                args.leveldb_writes = match value.as_str() {
                    "leveldb" => true,
                    "shale" => false,
                    _ => panic!("--writer shale|leveldb"),
                }
            }
            _ => {
                i += 1;
                continue; // cargo bench passes --bench
            }
        }
        i += 2;
    }
    args
}

/// db_bench's value generator in spirit: random printable bytes where each
/// 100-byte piece repeats its first `100 * ratio` bytes, so Snappy compresses
/// values to about half.
struct ValueGenerator {
    data: Vec<u8>,
    position: usize,
}

impl ValueGenerator {
    fn new(seed: u64) -> ValueGenerator {
        let mut rng = Rng(seed);
        let mut data = Vec::with_capacity(1 << 20);
        while data.len() < 1 << 20 {
            let piece: Vec<u8> = (0..50).map(|_| b' ' + (rng.next() % 95) as u8).collect();
            data.extend_from_slice(&piece);
            data.extend_from_slice(&piece);
        }
        ValueGenerator { data, position: 0 }
    }

    fn generate(&mut self, len: usize) -> &[u8] {
        if self.position + len > self.data.len() {
            self.position = 0;
        }
        self.position += len;
        &self.data[self.position - len..self.position]
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn base_options(snappy: bool) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 4 << 20,
        max_file_size: 2 << 20,
        snappy,
        // Everything stays in L0 until the manual compaction under test.
        l0_compaction_trigger: 100_000,
        l0_slowdown_writes_trigger: 100_000,
        l0_stop_writes_trigger: 100_000,
        compaction_executor: "streaming".parse().unwrap(),
        ..Options::default()
    }
}

fn fill(dir: &Path, num: u64, value_size: usize, snappy: bool) {
    let db = DB::open(dir, base_options(snappy)).unwrap();
    let mut rng = Rng(0x5eed_0000 + value_size as u64);
    let mut values = ValueGenerator::new(301);
    let write = WriteOptions::default();
    let mut batch = WriteBatch::new();
    for i in 0..num {
        let key = format!("{:016}", rng.next() % num);
        batch
            .put(key.as_bytes(), values.generate(value_size))
            .unwrap();
        if i % 1000 == 999 {
            db.write(&write, std::mem::take(&mut batch)).unwrap();
        }
    }
    db.write(&write, batch).unwrap();
    db.flush().unwrap();
}

/// [`fill`] through LevelDB 1.23, the same keys and values in the same
/// batches.
fn fill_with_leveldb(dir: &Path, num: u64, value_size: usize, snappy: bool) {
    let options = leveldb_shim::DbOptions {
        create_if_missing: true,
        write_buffer_size: 4 << 20,
        max_file_size: 2 << 20,
        snappy,
        ..leveldb_shim::DbOptions::default()
    };
    let mut db = leveldb_shim::Db::open(dir, &options).unwrap();
    let mut rng = Rng(0x5eed_0000 + value_size as u64);
    let mut values = ValueGenerator::new(301);
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(1000);
    for i in 0..num {
        let key = format!("{:016}", rng.next() % num);
        batch.push((key.into_bytes(), values.generate(value_size).to_vec()));
        if i % 1000 == 999 || i + 1 == num {
            let ops: Vec<(&[u8], Option<&[u8]>)> = batch
                .iter()
                .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
                .collect();
            db.write(&ops, false).unwrap();
            batch.clear();
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    // Start each run with a cold page cache for the inputs as far as we can:
    // flush dirty pages so writeback of the copy is not timed.
    let _ = std::process::Command::new("sync").status();
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// (seconds, bytes read, bytes written, cpu seconds)
type Measurement = (f64, u64, u64, f64);

fn run_shale(dir: &Path, executor: &str, snappy: bool) -> Measurement {
    let cpu = cpu_seconds();
    let started = Instant::now();
    let db = DB::open(
        dir,
        Options {
            compaction_executor: executor.parse().unwrap(),
            ..base_options(snappy)
        },
    )
    .unwrap();
    db.compact_range(None, None).unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let stats = db.level_stats();
    if std::env::var_os("SHALE_BENCH_PHASES").is_some() {
        eprintln!("{}", db.property("shale.executors").unwrap_or_default());
    }
    drop(db);
    let read = stats.iter().map(|s| s.bytes_read).sum();
    let written = stats.iter().map(|s| s.bytes_written).sum();
    (seconds, read, written, cpu_seconds() - cpu)
}

fn run_leveldb(dir: &Path, snappy: bool) -> Option<Measurement> {
    if !leveldb_shim::available() {
        return None;
    }
    let cpu = cpu_seconds();
    let started = Instant::now();
    let options = leveldb_shim::DbOptions {
        create_if_missing: false,
        write_buffer_size: 4 << 20,
        max_file_size: 2 << 20,
        bloom_bits_per_key: Some(10),
        snappy,
        ..leveldb_shim::DbOptions::default()
    };
    let mut db = leveldb_shim::Db::open(dir, &options).unwrap();
    db.compact_range(None, None);
    let seconds = started.elapsed().as_secs_f64();
    let stats = db.property("leveldb.stats").unwrap_or_default();
    drop(db);
    // Level lines: level, files, size MB, time s, read MB, write MB.
    let (mut read, mut written) = (0.0, 0.0);
    for line in stats.lines() {
        let fields: Vec<f64> = line
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        if fields.len() == 6 {
            read += fields[4];
            written += fields[5];
        }
    }
    let mb = 1048576.0;
    Some((
        seconds,
        (read * mb) as u64,
        (written * mb) as u64,
        cpu_seconds() - cpu,
    ))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

fn main() {
    let args = parse_args();
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "compaction benchmark: {} entries, 16-byte keys, snappy {}, {} repeats (median), {} threads available",
        args.num,
        args.snappy,
        args.repeats,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>12}",
        "value", "engine", "seconds", "read MB", "write MB", "MB/s", "cpu s/GB in"
    );
    for &value_size in &args.values {
        let writer = if args.leveldb_writes {
            "leveldb"
        } else {
            "shale"
        };
        let name = format!("source-{writer}-{}-{value_size}-{}", args.num, args.snappy);
        let source = args.keep.as_deref().unwrap_or(tmp.path()).join(name);
        if !source.exists() {
            // Filled under another name and renamed when complete, so a
            // kept database is never a half-filled one.
            let filling = source.with_extension("filling");
            let _ = std::fs::remove_dir_all(&filling);
            if args.leveldb_writes {
                if !leveldb_shim::available() {
                    println!("--writer leveldb: LevelDB is not available");
                    return;
                }
                fill_with_leveldb(&filling, args.num, value_size, args.snappy);
            } else {
                fill(&filling, args.num, value_size, args.snappy);
            }
            std::fs::rename(&filling, &source).unwrap();
        }
        // Rounds: every engine once per round, starting one further along,
        // so a change in the machine's load touches them all alike.
        let engines: Vec<&str> = args.engines.iter().map(String::as_str).collect();
        let mut measured: Vec<Vec<Measurement>> = vec![Vec::new(); engines.len()];
        for r in 0..args.repeats {
            for k in 0..engines.len() {
                let e = (r + k) % engines.len();
                let engine = engines[e];
                let dir = tmp.path().join(format!("run-{engine}-{r}"));
                copy_dir(&source, &dir);
                let m = match engine {
                    "leveldb" => run_leveldb(&dir, args.snappy),
                    executor => Some(run_shale(&dir, executor, args.snappy)),
                };
                let _ = std::fs::remove_dir_all(&dir);
                measured[e].extend(m);
            }
        }
        let mut speeds: Vec<(&str, f64)> = Vec::new();
        for (engine, runs) in engines.iter().copied().zip(measured) {
            if runs.is_empty() {
                println!("{value_size:>6} {engine:>10}  (LevelDB not available)");
                continue;
            }
            let seconds = median(runs.iter().map(|m| m.0).collect());
            let read = median(runs.iter().map(|m| m.1 as f64).collect()) / 1e6;
            let written = median(runs.iter().map(|m| m.2 as f64).collect()) / 1e6;
            let speed = median(
                runs.iter()
                    .map(|m| (m.1 + m.2) as f64 / 1e6 / m.0)
                    .collect(),
            );
            let cpu_per_gb = median(runs.iter().map(|m| m.3 / (m.1 as f64 / 1e9)).collect());
            println!("{value_size:>6} {engine:>10} {seconds:>9.3} {read:>9.1} {written:>9.1} {speed:>9.1} {cpu_per_gb:>12.2}");
            speeds.push((engine, speed));
        }
        let speed = |name: &str| speeds.iter().find(|(n, _)| *n == name).map(|s| s.1);
        if let (Some(p), Some(s)) = (speed("parallel"), speed("streaming")) {
            print!("{value_size:>6} ratios: parallel/streaming {:.2}x", p / s);
            if let Some(l) = speed("leveldb") {
                print!(
                    ", parallel/leveldb {:.2}x, streaming/leveldb {:.2}x",
                    p / l,
                    s / l
                );
            }
            println!();
        }
    }
}
