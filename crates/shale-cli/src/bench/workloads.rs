//! The benchmarks: what one thread does for each name, following LevelDB
//! 1.23's db_bench (and RocksDB's for `readrandomwriterandom` and
//! `waitforcompaction`).

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shale::stats::MB;
use shale::{ReadOptions, WriteOptions, DB};

use super::generator::{KeyFormat, Random, ValueGenerator};
use super::stats::Stats;

/// A benchmark of the `--benchmarks` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Benchmark {
    /// Write `num` values in key order (fresh database).
    FillSeq,
    /// Write `num` values in random key order (fresh database).
    FillRandom,
    /// Write `num` values in random key order over the existing ones.
    Overwrite,
    /// Write `num / 1000` values in random order, syncing each (fresh
    /// database).
    FillSync,
    /// Write `num / 1000` values of 100,000 bytes in random order (fresh
    /// database).
    Fill100K,
    /// Read `reads` random keys.
    ReadRandom,
    /// Read `reads` random keys that are absent (a key without its last
    /// byte).
    ReadMissing,
    /// Read `reads` random keys from the first 1 % of the key space.
    ReadHot,
    /// Scan `reads` entries forward.
    ReadSeq,
    /// Scan `reads` entries backward.
    ReadReverse,
    /// `reads` seeks to random keys, one new iterator each.
    SeekRandom,
    /// `readrandom` in `threads` threads while one more thread writes.
    ReadWhileWriting,
    /// Delete `num` keys in key order.
    DeleteSeq,
    /// Delete `num` random keys.
    DeleteRandom,
    /// RocksDB's mix: of every 100 operations on random keys,
    /// `readwritepercent` reads then the rest writes.
    ReadRandomWriteRandom,
    /// Compact the whole key range.
    Compact,
    /// Wait until no compaction is needed or running.
    WaitForCompaction,
    /// Print the `leveldb.stats` property.
    Stats,
    /// Print the `leveldb.sstables` property.
    Sstables,
    /// CRC32C of 4 KiB blocks, 500 MB in all.
    Crc32c,
    /// Snappy compression of a 4 KiB block, 1 GB in all.
    SnappyComp,
    /// Snappy decompression of a 4 KiB block, 1 GB in all.
    SnappyUncomp,
}

/// Every benchmark, by name.
pub const BENCHMARKS: &[(&str, Benchmark)] = &[
    ("fillseq", Benchmark::FillSeq),
    ("fillrandom", Benchmark::FillRandom),
    ("overwrite", Benchmark::Overwrite),
    ("fillsync", Benchmark::FillSync),
    ("fill100K", Benchmark::Fill100K),
    ("readrandom", Benchmark::ReadRandom),
    ("readmissing", Benchmark::ReadMissing),
    ("readhot", Benchmark::ReadHot),
    ("readseq", Benchmark::ReadSeq),
    ("readreverse", Benchmark::ReadReverse),
    ("seekrandom", Benchmark::SeekRandom),
    ("readwhilewriting", Benchmark::ReadWhileWriting),
    ("deleteseq", Benchmark::DeleteSeq),
    ("deleterandom", Benchmark::DeleteRandom),
    ("readrandomwriterandom", Benchmark::ReadRandomWriteRandom),
    ("compact", Benchmark::Compact),
    ("waitforcompaction", Benchmark::WaitForCompaction),
    ("stats", Benchmark::Stats),
    ("sstables", Benchmark::Sstables),
    ("crc32c", Benchmark::Crc32c),
    ("snappycomp", Benchmark::SnappyComp),
    ("snappyuncomp", Benchmark::SnappyUncomp),
];

impl Benchmark {
    /// The benchmark called `name`.
    pub fn by_name(name: &str) -> Option<Benchmark> {
        BENCHMARKS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
    }

    /// Its name in `--benchmarks`.
    pub fn name(self) -> &'static str {
        BENCHMARKS
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("?", |(n, _)| n)
    }

    /// Starts from an empty database.
    pub fn wants_fresh_db(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::FillSync | Benchmark::Fill100K
        )
    }

    /// Prints a property instead of running threads.
    pub fn is_report(self) -> bool {
        matches!(self, Benchmark::Stats | Benchmark::Sstables)
    }

    /// Runs once, in one thread, whatever `--threads` says (db_bench runs
    /// these in every thread; a second whole-range compaction at the same
    /// time measures nothing useful).
    pub fn single_threaded(self) -> bool {
        matches!(self, Benchmark::Compact | Benchmark::WaitForCompaction)
    }
}

impl fmt::Display for Benchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What every thread of one benchmark shares.
#[derive(Debug)]
pub struct Context<'a> {
    /// The database.
    pub db: &'a DB,
    /// `--num`: the key space, whatever the benchmark's own count.
    pub key_space: u32,
    /// Operations of this benchmark (db_bench's `num_`).
    pub num: u64,
    /// Reads of this benchmark (db_bench's `reads_`).
    pub reads: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Sync every write.
    pub sync: bool,
    /// How keys are written.
    pub key_format: KeyFormat,
    /// `--compression_ratio`.
    pub compression_ratio: f64,
    /// `--readwritepercent`.
    pub read_percent: u32,
    /// `--benchmark_write_rate_limit`: bytes per second of
    /// `readwhilewriting`'s writer (0: unlimited).
    pub write_rate_limit: u64,
    /// `--verify_checksums`.
    pub verify_checksums: bool,
    /// Threads running this benchmark.
    pub threads: usize,
    /// Threads that have finished (for `readwhilewriting`'s writer).
    pub threads_done: AtomicUsize,
    /// Bytes of user data written (keys and values), for write
    /// amplification.
    pub user_bytes: AtomicU64,
    /// How long `readwhilewriting`'s writer wrote, in microseconds (its
    /// bytes are `user_bytes`).
    pub writer_micros: AtomicU64,
}

impl Context<'_> {
    /// The options of every read.
    fn read_options(&self) -> ReadOptions {
        let mut options = ReadOptions::new();
        options.verify_checksums = self.verify_checksums;
        options
    }

    /// `readwhilewriting`'s line about its writer, printed after the
    /// readers' report line: what it wrote and how fast.
    pub fn writer_line(&self) -> String {
        let bytes = self.user_bytes.load(Ordering::Relaxed);
        let seconds = self.writer_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let limit = match self.write_rate_limit {
            0 => String::new(),
            limit => format!(", limit {limit} bytes/s"),
        };
        format!(
            "readwhilewriting writer: {bytes} bytes in {seconds:.3} s ({:.1} MB/s{limit})",
            bytes as f64 / MB / seconds.max(1e-9)
        )
    }
}

/// One thread's state.
#[derive(Debug)]
pub struct ThreadState {
    /// 0 .. threads-1.
    pub index: usize,
    /// Key choice (db_bench: `Random(1000 + index)`, plus `--seed`).
    pub rand: Random,
    /// What the thread measured.
    pub stats: Stats,
}

type Outcome = Result<(), String>;

/// Runs `benchmark` as thread `thread.index` of `context.threads`.
pub fn run_thread(
    benchmark: Benchmark,
    context: &Context<'_>,
    thread: &mut ThreadState,
) -> Outcome {
    match benchmark {
        Benchmark::FillSeq => write(context, thread, true),
        Benchmark::FillRandom
        | Benchmark::Overwrite
        | Benchmark::FillSync
        | Benchmark::Fill100K => write(context, thread, false),
        Benchmark::ReadRandom => read_random(context, thread),
        Benchmark::ReadMissing => read_missing(context, thread),
        Benchmark::ReadHot => read_hot(context, thread),
        Benchmark::ReadSeq => read_sequential(context, thread, true),
        Benchmark::ReadReverse => read_sequential(context, thread, false),
        Benchmark::SeekRandom => seek_random(context, thread),
        Benchmark::ReadWhileWriting => read_while_writing(context, thread),
        Benchmark::DeleteSeq => delete(context, thread, true),
        Benchmark::DeleteRandom => delete(context, thread, false),
        Benchmark::ReadRandomWriteRandom => read_random_write_random(context, thread),
        Benchmark::Compact => {
            context
                .db
                .compact_range(None, None)
                .map_err(|e| format!("compact: {e}"))?;
            thread.stats.finished_single_op();
            Ok(())
        }
        Benchmark::WaitForCompaction => {
            context
                .db
                .wait_for_compactions()
                .map_err(|e| format!("waitforcompaction: {e}"))?;
            thread.stats.finished_single_op();
            Ok(())
        }
        Benchmark::Crc32c => crc32c(thread),
        Benchmark::SnappyComp => snappy_compress(context, thread),
        Benchmark::SnappyUncomp => snappy_uncompress(context, thread),
        // Printed by the runner; nothing to run.
        Benchmark::Stats | Benchmark::Sstables => Ok(()),
    }
}

fn write(context: &Context<'_>, thread: &mut ThreadState, sequential: bool) -> Outcome {
    if context.num != u64::from(context.key_space) {
        thread.stats.add_message(&format!("({} ops)", context.num));
    }
    let mut values = ValueGenerator::new(context.compression_ratio);
    let options = WriteOptions { sync: context.sync };
    let mut key = Vec::with_capacity(context.key_format.key_size);
    let mut bytes = 0u64;
    for i in 0..context.num {
        let k = if sequential {
            i
        } else {
            u64::from(thread.rand.uniform(context.key_space))
        };
        context.key_format.write(k, &mut key);
        let value = values.generate(context.value_size);
        context
            .db
            .put(&options, &key, value)
            .map_err(|e| format!("put error: {e}"))?;
        bytes += (value.len() + key.len()) as u64;
        thread.stats.finished_single_op();
    }
    thread.stats.add_bytes(bytes);
    context.user_bytes.fetch_add(bytes, Ordering::Relaxed);
    Ok(())
}

fn read_random(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    let options = context.read_options();
    let mut key = Vec::with_capacity(context.key_format.key_size);
    let mut found = 0u64;
    for _ in 0..context.reads {
        let k = thread.rand.uniform(context.key_space);
        context.key_format.write(u64::from(k), &mut key);
        if context
            .db
            .get(&options, &key)
            .map_err(|e| format!("get error: {e}"))?
            .is_some()
        {
            found += 1;
        }
        thread.stats.finished_single_op();
    }
    thread
        .stats
        .add_message(&format!("({found} of {} found)", context.num));
    Ok(())
}

fn read_missing(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    let options = context.read_options();
    let mut key = Vec::with_capacity(context.key_format.key_size);
    for _ in 0..context.reads {
        let k = thread.rand.uniform(context.key_space);
        context.key_format.write(u64::from(k), &mut key);
        key.pop();
        context
            .db
            .get(&options, &key)
            .map_err(|e| format!("get error: {e}"))?;
        thread.stats.finished_single_op();
    }
    Ok(())
}

fn read_hot(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    let options = context.read_options();
    let range = context.key_space.div_ceil(100);
    let mut key = Vec::with_capacity(context.key_format.key_size);
    for _ in 0..context.reads {
        let k = thread.rand.uniform(range);
        context.key_format.write(u64::from(k), &mut key);
        context
            .db
            .get(&options, &key)
            .map_err(|e| format!("get error: {e}"))?;
        thread.stats.finished_single_op();
    }
    Ok(())
}

fn read_sequential(context: &Context<'_>, thread: &mut ThreadState, forward: bool) -> Outcome {
    let mut iter = context
        .db
        .iter(&context.read_options())
        .map_err(|e| format!("iterator error: {e}"))?;
    if forward {
        iter.seek_to_first();
    } else {
        iter.seek_to_last();
    }
    let mut bytes = 0u64;
    let mut count = 0u64;
    while count < context.reads && iter.valid() {
        bytes += (iter.key().len() + iter.value().len()) as u64;
        thread.stats.finished_single_op();
        count += 1;
        if forward {
            iter.next();
        } else {
            iter.prev();
        }
    }
    iter.status().map_err(|e| format!("iterator error: {e}"))?;
    thread.stats.add_bytes(bytes);
    Ok(())
}

fn seek_random(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    let options = context.read_options();
    let mut key = Vec::with_capacity(context.key_format.key_size);
    let mut found = 0u64;
    for _ in 0..context.reads {
        let mut iter = context
            .db
            .iter(&options)
            .map_err(|e| format!("iterator error: {e}"))?;
        let k = thread.rand.uniform(context.key_space);
        context.key_format.write(u64::from(k), &mut key);
        iter.seek(&key);
        if iter.valid() && iter.key() == key.as_slice() {
            found += 1;
        }
        iter.status().map_err(|e| format!("iterator error: {e}"))?;
        thread.stats.finished_single_op();
    }
    thread
        .stats
        .add_message(&format!("({found} of {} found)", context.num));
    Ok(())
}

fn read_while_writing(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    if thread.index > 0 {
        return read_random(context, thread);
    }
    // The extra thread writes until every reader is done, at most
    // `write_rate_limit` bytes per second; its work is not counted in the
    // readers' figures but said on a line of its own.
    let mut values = ValueGenerator::new(context.compression_ratio);
    let options = WriteOptions { sync: context.sync };
    let mut key = Vec::with_capacity(context.key_format.key_size);
    let mut bytes = 0u64;
    let started = Instant::now();
    while context.threads_done.load(Ordering::Acquire) + 1 < context.threads {
        let k = thread.rand.uniform(context.key_space);
        context.key_format.write(u64::from(k), &mut key);
        let value = values.generate(context.value_size);
        context
            .db
            .put(&options, &key, value)
            .map_err(|e| format!("put error: {e}"))?;
        bytes += (value.len() + key.len()) as u64;
        if context.write_rate_limit > 0 {
            // Ahead of the rate: wait until the bytes written are due.
            let due = Duration::from_secs_f64(bytes as f64 / context.write_rate_limit as f64);
            if let Some(early) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(early);
            }
        }
    }
    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    context.writer_micros.store(micros, Ordering::Relaxed);
    context.user_bytes.fetch_add(bytes, Ordering::Relaxed);
    thread.stats.start();
    Ok(())
}

fn delete(context: &Context<'_>, thread: &mut ThreadState, sequential: bool) -> Outcome {
    let options = WriteOptions { sync: context.sync };
    let mut key = Vec::with_capacity(context.key_format.key_size);
    let mut bytes = 0u64;
    for i in 0..context.num {
        let k = if sequential {
            i
        } else {
            u64::from(thread.rand.uniform(context.key_space))
        };
        context.key_format.write(k, &mut key);
        context
            .db
            .delete(&options, &key)
            .map_err(|e| format!("del error: {e}"))?;
        bytes += key.len() as u64;
        thread.stats.finished_single_op();
    }
    context.user_bytes.fetch_add(bytes, Ordering::Relaxed);
    Ok(())
}

fn read_random_write_random(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    let read_options = context.read_options();
    let write_options = WriteOptions { sync: context.sync };
    let mut values = ValueGenerator::new(context.compression_ratio);
    let mut key = Vec::with_capacity(context.key_format.key_size);
    let (mut reads_left, mut writes_left) = (0u32, 0u32);
    let (mut reads, mut writes, mut found, mut bytes) = (0u64, 0u64, 0u64, 0u64);
    for _ in 0..context.reads {
        let k = thread.rand.uniform(context.key_space);
        context.key_format.write(u64::from(k), &mut key);
        if reads_left == 0 && writes_left == 0 {
            reads_left = context.read_percent;
            writes_left = 100 - context.read_percent;
        }
        if reads_left > 0 {
            if context
                .db
                .get(&read_options, &key)
                .map_err(|e| format!("get error: {e}"))?
                .is_some()
            {
                found += 1;
            }
            reads_left -= 1;
            reads += 1;
        } else {
            let value = values.generate(context.value_size);
            context
                .db
                .put(&write_options, &key, value)
                .map_err(|e| format!("put error: {e}"))?;
            bytes += (value.len() + key.len()) as u64;
            writes_left -= 1;
            writes += 1;
        }
        thread.stats.finished_single_op();
    }
    context.user_bytes.fetch_add(bytes, Ordering::Relaxed);
    thread.stats.add_message(&format!(
        "( reads:{reads} writes:{writes} total:{} found:{found})",
        context.reads
    ));
    Ok(())
}

/// Bytes checksummed by `crc32c` (db_bench: 500 MB).
const CRC_TOTAL_BYTES: u64 = 500 * MB as u64;

/// Bytes (de)compressed by the snappy benchmarks (db_bench: 1 GB).
const SNAPPY_TOTAL_BYTES: u64 = 1024 * MB as u64;

/// Block size of the snappy benchmarks (LevelDB's default `block_size`).
const SNAPPY_BLOCK: usize = 4096;

fn crc32c(thread: &mut ThreadState) -> Outcome {
    let data = vec![b'x'; 4096];
    let mut bytes = 0u64;
    let mut crc = 0u32;
    while bytes < CRC_TOTAL_BYTES {
        crc = crc32c::crc32c(std::hint::black_box(&data));
        thread.stats.finished_single_op();
        bytes += data.len() as u64;
    }
    std::hint::black_box(crc);
    thread.stats.add_bytes(bytes);
    thread.stats.add_message("(4K per op)");
    Ok(())
}

fn snappy_compress(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    let mut values = ValueGenerator::new(context.compression_ratio);
    let input = values.generate(SNAPPY_BLOCK).to_vec();
    let mut encoder = snap::raw::Encoder::new();
    let mut output = vec![0; snap::raw::max_compress_len(input.len())];
    let (mut bytes, mut produced) = (0u64, 0u64);
    while bytes < SNAPPY_TOTAL_BYTES {
        let n = encoder
            .compress(&input, &mut output)
            .map_err(|e| format!("snappy: {e}"))?;
        produced += n as u64;
        bytes += input.len() as u64;
        thread.stats.finished_single_op();
    }
    thread.stats.add_message(&format!(
        "(output: {:.1}%)",
        produced as f64 * 100.0 / bytes as f64
    ));
    thread.stats.add_bytes(bytes);
    Ok(())
}

fn snappy_uncompress(context: &Context<'_>, thread: &mut ThreadState) -> Outcome {
    let mut values = ValueGenerator::new(context.compression_ratio);
    let input = values.generate(SNAPPY_BLOCK).to_vec();
    let compressed = snap::raw::Encoder::new()
        .compress_vec(&input)
        .map_err(|e| format!("snappy: {e}"))?;
    let mut decoder = snap::raw::Decoder::new();
    let mut output = vec![0; input.len()];
    let mut bytes = 0u64;
    while bytes < SNAPPY_TOTAL_BYTES {
        decoder
            .decompress(&compressed, &mut output)
            .map_err(|e| format!("snappy: {e}"))?;
        bytes += input.len() as u64;
        thread.stats.finished_single_op();
    }
    thread.stats.add_bytes(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::bench::stats::Recording;

    #[test]
    fn names_round_trip() {
        for (name, benchmark) in BENCHMARKS {
            assert_eq!(Benchmark::by_name(name), Some(*benchmark));
            assert_eq!(benchmark.name(), *name);
        }
        assert_eq!(Benchmark::by_name("nosuch"), None);
    }

    fn context(db: &DB, num: u64) -> Context<'_> {
        Context {
            db,
            key_space: num as u32,
            num,
            reads: num,
            value_size: 100,
            sync: false,
            verify_checksums: true,
            key_format: KeyFormat::new(16),
            compression_ratio: 0.5,
            read_percent: 90,
            write_rate_limit: 0,
            threads: 1,
            threads_done: AtomicUsize::new(0),
            user_bytes: AtomicU64::new(0),
            writer_micros: AtomicU64::new(0),
        }
    }

    fn thread() -> ThreadState {
        ThreadState {
            index: 0,
            rand: Random::new(1000),
            stats: Stats::new(&Recording::default()),
        }
    }

    #[test]
    fn fill_then_read_finds_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let options = shale::Options {
            create_if_missing: true,
            ..shale::Options::default()
        };
        let db = DB::open(dir.path(), options).unwrap();
        let context = context(&db, 500);
        let mut t = thread();
        run_thread(Benchmark::FillSeq, &context, &mut t).unwrap();
        assert_eq!(t.stats.done(), 500);
        assert_eq!(context.user_bytes.load(Ordering::Relaxed), 500 * 116);
        assert_eq!(
            db.get(&context.read_options(), b"0000000000000499")
                .unwrap()
                .unwrap()
                .len(),
            100
        );
        let mut t = thread();
        run_thread(Benchmark::ReadRandom, &context, &mut t).unwrap();
        assert!(t
            .stats
            .report_line("readrandom")
            .ends_with("(500 of 500 found)"));
        let mut t = thread();
        run_thread(Benchmark::ReadReverse, &context, &mut t).unwrap();
        assert_eq!(t.stats.done(), 500);
        let mut t = thread();
        run_thread(Benchmark::ReadRandomWriteRandom, &context, &mut t).unwrap();
        let line = t.stats.report_line("readrandomwriterandom");
        assert!(
            line.contains("( reads:450 writes:50 total:500 found:450)"),
            "{line}"
        );
        let mut t = thread();
        run_thread(Benchmark::DeleteSeq, &context, &mut t).unwrap();
        assert_eq!(
            db.get(&context.read_options(), b"0000000000000000")
                .unwrap(),
            None
        );
    }
}
