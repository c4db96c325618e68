//! rocksdb-bench: the RocksDB side of scripts/compare and scripts/writers-bench.
//!
//! A db_bench-compatible driver over RocksDB built from source in release
//! mode (the `rocksdb` crate; librocksdb-sys compiles RocksDB with
//! `-DNDEBUG`, so without assertions, unlike Debian's `db_bench`). It is
//! `tools/leveldb-bench/leveldb_bench.cc` with RocksDB underneath: the same
//! flags, the same keys and values (generator.rs), the same loops
//! (benchmark.rs) and the same output lines (stats.rs), so that
//! scripts/compare's parser reads all three engines alike.
//!
//! Benchmarks: fillseq, fillrandom, overwrite, fillsync, readrandom,
//! readmissing, readseq, readreverse, seekrandom, deleteseq, deleterandom,
//! readrandomwriterandom, compact, stats. At the end: the write
//! amplification (bytes of every table file RocksDB wrote, from its LOG's
//! `table_file_creation` events, over the bytes of keys and values written)
//! and the CPU time used.
//!
//! `--timeline=FILE.csv` writes operations per `--timeline_interval`
//! seconds in the CSV of `shale bench --timeline` and leveldb_bench
//! (timeline.rs).
//!
//! Beside LevelDB's flags: the LSM shape options that scripts/compare sets
//! (flags.rs, `LsmShape`) and the write path that scripts/writers-bench
//! compares (`--allow_concurrent_memtable_write`, `--enable_pipelined_write`,
//! `--enable_write_thread_adaptive_yield`; flags.rs, `WritePath`).
//!
//! Build (scripts/compare does it on first use; many minutes, RocksDB is
//! C++): `cd tools/rocksdb-bench && cargo build --release`;
//! `scripts/writers-bench prepare` copies the result.

mod benchmark;
mod flags;
mod generator;
mod stats;
mod timeline;

use std::path::Path;

use benchmark::Benchmark;
use flags::Flags;

/// The RocksDB that librocksdb-sys bundles (the `+10.4.2` of its version in
/// Cargo.lock); the C API has no call that reports it.
const ROCKSDB_VERSION: &str = "10.4.2";

/// Prints the reason and exits with leveldb_bench's status for errors.
pub fn die(message: &str) -> ! {
    eprintln!("rocksdb-bench: {message}");
    std::process::exit(2)
}

fn main() {
    let flags = match Flags::parse(std::env::args().skip(1)) {
        Ok(flags) => flags,
        Err(error) => die(&error.to_string()),
    };
    // Before anything else, so that a path that cannot be written stops the
    // run at once, with the database untouched.
    let timeline_file = flags.timeline.as_ref().map(|path| {
        std::fs::File::create(path)
            .map(|file| (path.clone(), file))
            .unwrap_or_else(|error| {
                die(&format!(
                    "--timeline {path}: cannot create the file: {error}"
                ))
            })
    });
    println!("RocksDB:    version {ROCKSDB_VERSION} (release build, assertions off)");
    println!("Keys:       {} bytes each", flags.key_size);
    println!(
        "Values:     {} bytes each ({} bytes after compression)",
        flags.value_size,
        (flags.value_size as f64 * flags.compression_ratio + 0.5) as i64
    );
    println!("Entries:    {}", flags.num);
    let write_path = &flags.write_path;
    println!(
        "Writes:     allow_concurrent_memtable_write={} enable_pipelined_write={} enable_write_thread_adaptive_yield={}",
        u8::from(write_path.allow_concurrent_memtable_write),
        u8::from(write_path.enable_pipelined_write),
        u8::from(write_path.enable_write_thread_adaptive_yield)
    );
    println!("------------------------------------------------");
    let db = flags.db.clone();
    let mut benchmark = Benchmark::new(flags);
    benchmark.run();
    benchmark.close();
    println!("------------------------------------------------");
    let user_bytes = benchmark.user_bytes();
    if user_bytes > 0 {
        if let Some(written) = table_bytes_written(Path::new(&db)) {
            let written_mb = written as f64 / 1048576.0;
            println!(
                "Write amplification: {:.2} ({:.1} MB written by flushes and compactions for {:.1} MB of user data)",
                written as f64 / user_bytes as f64,
                written_mb,
                user_bytes as f64 / 1048576.0
            );
        }
    }
    if let Some((user, system)) = cpu_seconds() {
        println!(
            "CPU: {:.2} s (user {user:.2}, system {system:.2})",
            user + system
        );
    }
    if let (Some((path, mut file)), Some(csv)) = (timeline_file, benchmark.timeline_csv()) {
        use std::io::Write as _;
        if let Err(error) = file.write_all(csv.as_bytes()) {
            die(&format!(
                "--timeline {path}: cannot write the file: {error}"
            ));
        }
        println!("Timeline:   {path}");
    }
}

/// Bytes of all table files written since this process opened the
/// database: RocksDB's event log records each flush and compaction output
/// as `"event": "table_file_creation"` with its `"file_size"`, and starts a
/// new LOG at every open. LevelDB's counterpart is the Write(MB) column of
/// `leveldb.stats` that leveldb_bench sums.
fn table_bytes_written(db: &Path) -> Option<u64> {
    let log = std::fs::read_to_string(db.join("LOG")).ok()?;
    let mut total = 0u64;
    for line in log
        .lines()
        .filter(|line| line.contains("\"event\": \"table_file_creation\""))
    {
        let (_, rest) = line.split_once("\"file_size\": ")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        total += digits.parse::<u64>().ok()?;
    }
    Some(total)
}

/// User and system CPU seconds of this process.
fn cpu_seconds() -> Option<(f64, f64)> {
    // SAFETY: `rusage` is plain data, for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage` for the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    Some((seconds(usage.ru_utime), seconds(usage.ru_stime)))
}
