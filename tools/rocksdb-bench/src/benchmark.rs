//! The benchmarks, one method each, as leveldb_bench runs them over LevelDB:
//! the same loops, the same keys and values, the same report lines; only
//! the database calls are RocksDB's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, Options, ReadOptions, WriteOptions, DB,
};

use crate::die;
use crate::flags::{Compression, Flags};
use crate::generator::{KeyFormat, Random, ValueGenerator};
use crate::stats::Stats;
use crate::timeline::{Recorder, Timeline};

/// Which loop a benchmark name runs.
#[derive(Debug, Clone, Copy)]
enum Method {
    FillSeq,
    FillRandom,
    ReadRandom,
    ReadMissing,
    ReadSeq,
    ReadReverse,
    SeekRandom,
    DeleteSeq,
    DeleteRandom,
    ReadRandomWriteRandom,
    Compact,
}

/// The database and the per-benchmark settings leveldb_bench keeps in its
/// `Benchmark` class. (No `Debug`: RocksDB's `Cache` has none.)
pub struct Benchmark {
    flags: Flags,
    /// Shared by every open, as leveldb_bench shares its `Cache`.
    cache: Option<Cache>,
    db: Option<DB>,
    num: i64,
    reads: i64,
    value_size: usize,
    sync: bool,
    /// Key and value bytes handed to the database, for write amplification.
    user_bytes: AtomicU64,
    /// With --timeline: started at the end of the first open.
    timeline: Option<Timeline>,
}

impl Benchmark {
    pub fn new(flags: Flags) -> Benchmark {
        let cache = usize::try_from(flags.cache_size)
            .ok()
            .map(Cache::new_lru_cache);
        let benchmark = Benchmark {
            flags,
            cache,
            db: None,
            num: 0,
            reads: 0,
            value_size: 0,
            sync: false,
            user_bytes: AtomicU64::new(0),
            timeline: None,
        };
        if !benchmark.flags.use_existing_db {
            benchmark.destroy();
        }
        benchmark
    }

    pub fn user_bytes(&self) -> u64 {
        self.user_bytes.load(Ordering::Relaxed)
    }

    /// The --timeline CSV (timeline.rs), when the flag was given.
    pub fn timeline_csv(&self) -> Option<String> {
        self.timeline.as_ref().map(Timeline::csv)
    }

    /// Runs the comma-separated list in `--benchmarks`.
    pub fn run(&mut self) {
        self.open();
        if self.flags.timeline.is_some() {
            self.timeline = Some(Timeline::new(self.flags.timeline_interval));
        }
        let list = self.flags.benchmarks.clone();
        for name in list.split(',').filter(|name| !name.is_empty()) {
            self.num = self.flags.num;
            self.reads = if self.flags.reads < 0 {
                self.flags.num
            } else {
                self.flags.reads
            };
            self.value_size = self.flags.value_size;
            self.sync = false;
            let mut fresh = false;
            let method = match name {
                "fillseq" => {
                    fresh = true;
                    Method::FillSeq
                }
                "fillrandom" => {
                    fresh = true;
                    Method::FillRandom
                }
                "overwrite" => Method::FillRandom,
                "fillsync" => {
                    fresh = true;
                    self.num /= 1000;
                    self.sync = true;
                    Method::FillRandom
                }
                "readrandom" => Method::ReadRandom,
                "readmissing" => Method::ReadMissing,
                "readseq" => Method::ReadSeq,
                "readreverse" => Method::ReadReverse,
                "seekrandom" => Method::SeekRandom,
                "deleteseq" => Method::DeleteSeq,
                "deleterandom" => Method::DeleteRandom,
                "readrandomwriterandom" => Method::ReadRandomWriteRandom,
                "compact" => Method::Compact,
                "stats" => {
                    let stats = self.db().property_value("rocksdb.stats").ok().flatten();
                    println!("\n{}", stats.as_deref().unwrap_or("(failed)"));
                    continue;
                }
                _ => die(&format!("unknown benchmark '{name}'")),
            };
            if fresh {
                if self.flags.use_existing_db {
                    println!("{name:<12} : skipped (--use_existing_db is true)");
                    continue;
                }
                self.db = None;
                self.destroy();
                self.open();
            }
            let threads = if matches!(method, Method::Compact) {
                1
            } else {
                self.flags.threads
            };
            self.run_threads(name, method, threads);
        }
    }

    /// Closes the database, so that RocksDB flushes its LOG (the write
    /// amplification is read from it).
    pub fn close(&mut self) {
        self.db = None;
    }

    fn destroy(&self) {
        // As leveldb_bench: a missing database is not an error.
        let _ = DB::destroy(&Options::default(), &self.flags.db);
    }

    fn open(&mut self) {
        let flags = &self.flags;
        let mut options = Options::default();
        options.create_if_missing(!flags.use_existing_db);
        let mut table = BlockBasedOptions::default();
        if let Some(cache) = &self.cache {
            table.set_block_cache(cache);
        }
        if flags.bloom_bits > 0 {
            // A full filter, as RocksDB's db_bench makes for --bloom_bits.
            table.set_bloom_filter(flags.bloom_bits as f64, false);
        }
        if let Ok(block_size) = usize::try_from(flags.block_size) {
            if block_size > 0 {
                table.set_block_size(block_size);
            }
        }
        if flags.block_restart_interval > 0 {
            table.set_block_restart_interval(clamp_i32(flags.block_restart_interval));
        }
        options.set_block_based_table_factory(&table);
        if let Ok(size) = usize::try_from(flags.write_buffer_size) {
            if size > 0 {
                options.set_write_buffer_size(size);
            }
        }
        if let Ok(size) = u64::try_from(flags.max_file_size) {
            if size > 0 {
                options.set_target_file_size_base(size);
            }
        }
        if flags.open_files > 0 {
            options.set_max_open_files(clamp_i32(flags.open_files));
        }
        options.set_compression_type(match flags.compression {
            Compression::None => DBCompressionType::None,
            Compression::Snappy => DBCompressionType::Snappy,
        });
        let shape = &flags.shape;
        options.set_max_bytes_for_level_base(shape.max_bytes_for_level_base);
        options.set_max_bytes_for_level_multiplier(shape.max_bytes_for_level_multiplier);
        options
            .set_level_zero_file_num_compaction_trigger(shape.level0_file_num_compaction_trigger);
        options.set_level_zero_slowdown_writes_trigger(shape.level0_slowdown_writes_trigger);
        options.set_level_zero_stop_writes_trigger(shape.level0_stop_writes_trigger);
        options
            .set_level_compaction_dynamic_level_bytes(shape.level_compaction_dynamic_level_bytes);
        options.set_max_background_jobs(shape.max_background_jobs);
        options.set_max_write_buffer_number(shape.max_write_buffer_number);
        options.set_allow_mmap_reads(flags.mmap_read);
        let write_path = &flags.write_path;
        options.set_allow_concurrent_memtable_write(write_path.allow_concurrent_memtable_write);
        options.set_enable_pipelined_write(write_path.enable_pipelined_write);
        options
            .set_enable_write_thread_adaptive_yield(write_path.enable_write_thread_adaptive_yield);
        match DB::open(&options, &flags.db) {
            Ok(db) => self.db = Some(db),
            Err(error) => die(&format!("open error: {error}")),
        }
    }

    fn db(&self) -> &DB {
        match &self.db {
            Some(db) => db,
            None => die("internal error: the database is not open"),
        }
    }

    fn run_threads(&self, name: &str, method: Method, threads: usize) {
        let barrier = Barrier::new(threads);
        let timeline = self.timeline.as_ref();
        let segment = timeline.map(|timeline| timeline.begin(name, threads));
        let mut all: Vec<Stats<'_>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|thread| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        // leveldb_bench: Random(1000 + seed + i), as uint32_t.
                        let mut rand = Random::new((1000 + self.flags.seed + thread as i64) as u32);
                        let recorder = timeline
                            .zip(segment)
                            .map(|(timeline, segment)| Recorder::new(timeline, segment, thread));
                        let mut stats = Stats::new(self.flags.histogram, recorder);
                        // Every thread starts its clock together.
                        barrier.wait();
                        stats.start();
                        self.run_one(method, &mut stats, &mut rand);
                        stats.stop();
                        stats
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| {
                    worker
                        .join()
                        .unwrap_or_else(|_| die("a benchmark thread panicked"))
                })
                .collect()
        });
        if let Some((timeline, segment)) = timeline.zip(segment) {
            timeline.end(segment);
        }
        let mut first = all.remove(0);
        for other in all {
            first.merge(other);
        }
        first.report(name);
    }

    fn run_one(&self, method: Method, stats: &mut Stats<'_>, rand: &mut Random) {
        match method {
            Method::FillSeq => self.write(stats, rand, true),
            Method::FillRandom => self.write(stats, rand, false),
            Method::ReadRandom => self.read_random(stats, rand),
            Method::ReadMissing => self.read_missing(stats, rand),
            Method::ReadSeq => self.scan(stats, true),
            Method::ReadReverse => self.scan(stats, false),
            Method::SeekRandom => self.seek_random(stats, rand),
            Method::DeleteSeq => self.delete(stats, rand, true),
            Method::DeleteRandom => self.delete(stats, rand, false),
            Method::ReadRandomWriteRandom => self.read_random_write_random(stats, rand),
            Method::Compact => {
                self.db().compact_range::<&[u8], &[u8]>(None, None);
                stats.finished_single_op();
            }
        }
    }

    fn read_options(&self) -> ReadOptions {
        let mut options = ReadOptions::default();
        options.set_verify_checksums(self.flags.verify_checksums);
        options
    }

    fn key_space(&self) -> u32 {
        // --num is checked to be in 1..2^31-1.
        self.flags.num as u32
    }

    fn write(&self, stats: &mut Stats<'_>, rand: &mut Random, sequential: bool) {
        if self.num != self.flags.num {
            stats.add_message(&format!("({} ops)", self.num));
        }
        let mut values = ValueGenerator::new(self.flags.compression_ratio, self.value_size);
        let mut keys = KeyFormat::new(self.flags.key_size);
        let mut options = WriteOptions::default();
        options.set_sync(self.sync);
        let db = self.db();
        let mut bytes = 0u64;
        for i in 0..self.num {
            let k = if sequential {
                i as u64
            } else {
                u64::from(rand.uniform(self.key_space()))
            };
            let key = keys.make(k);
            let value = values.generate(self.value_size);
            if let Err(error) = db.put_opt(key, value, &options) {
                die(&format!("put error: {error}"));
            }
            bytes += (value.len() + key.len()) as u64;
            stats.finished_single_op();
        }
        stats.bytes += bytes;
        self.user_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn read_random(&self, stats: &mut Stats<'_>, rand: &mut Random) {
        let options = self.read_options();
        let mut keys = KeyFormat::new(self.flags.key_size);
        let db = self.db();
        let mut found = 0u64;
        for _ in 0..self.reads {
            let key = keys.make(u64::from(rand.uniform(self.key_space())));
            // Pinned: no copy of the value, as RocksDB's own db_bench reads.
            if let Ok(Some(_)) = db.get_pinned_opt(key, &options) {
                found += 1;
            }
            stats.finished_single_op();
        }
        stats.add_message(&format!("({found} of {} found)", self.num));
    }

    fn read_missing(&self, stats: &mut Stats<'_>, rand: &mut Random) {
        let options = self.read_options();
        let mut keys = KeyFormat::new(self.flags.key_size);
        let db = self.db();
        for _ in 0..self.reads {
            let key = keys.make(u64::from(rand.uniform(self.key_space())));
            // The key without its last byte: never written.
            let _ = db.get_pinned_opt(&key[..key.len().saturating_sub(1)], &options);
            stats.finished_single_op();
        }
    }

    fn scan(&self, stats: &mut Stats<'_>, forward: bool) {
        // The raw iterator hands out borrowed slices, as LevelDB's does.
        let mut iterator = self.db().raw_iterator_opt(self.read_options());
        if forward {
            iterator.seek_to_first();
        } else {
            iterator.seek_to_last();
        }
        let mut bytes = 0u64;
        let mut i = 0;
        while i < self.reads && iterator.valid() {
            let key_len = iterator.key().map_or(0, <[u8]>::len);
            let value_len = iterator.value().map_or(0, <[u8]>::len);
            bytes += (key_len + value_len) as u64;
            stats.finished_single_op();
            i += 1;
            if forward {
                iterator.next();
            } else {
                iterator.prev();
            }
        }
        stats.bytes += bytes;
    }

    fn seek_random(&self, stats: &mut Stats<'_>, rand: &mut Random) {
        let mut keys = KeyFormat::new(self.flags.key_size);
        let db = self.db();
        let mut found = 0u64;
        for _ in 0..self.reads {
            let mut iterator = db.raw_iterator_opt(self.read_options());
            let key = keys.make(u64::from(rand.uniform(self.key_space())));
            iterator.seek(key);
            if iterator.valid() && iterator.key() == Some(key) {
                found += 1;
            }
            stats.finished_single_op();
        }
        stats.add_message(&format!("({found} of {} found)", self.num));
    }

    fn delete(&self, stats: &mut Stats<'_>, rand: &mut Random, sequential: bool) {
        let options = WriteOptions::default();
        let mut keys = KeyFormat::new(self.flags.key_size);
        let db = self.db();
        for i in 0..self.num {
            let k = if sequential {
                i as u64
            } else {
                u64::from(rand.uniform(self.key_space()))
            };
            let key = keys.make(k);
            if let Err(error) = db.delete_opt(key, &options) {
                die(&format!("del error: {error}"));
            }
            self.user_bytes
                .fetch_add(key.len() as u64, Ordering::Relaxed);
            stats.finished_single_op();
        }
    }

    /// RocksDB's mix: of every 100 operations, readwritepercent reads first,
    /// then the writes.
    fn read_random_write_random(&self, stats: &mut Stats<'_>, rand: &mut Random) {
        let read_options = self.read_options();
        let write_options = WriteOptions::default();
        let mut values = ValueGenerator::new(self.flags.compression_ratio, self.value_size);
        let mut keys = KeyFormat::new(self.flags.key_size);
        let db = self.db();
        let (mut reads_left, mut writes_left) = (0u32, 0u32);
        let (mut reads, mut writes, mut found, mut bytes) = (0u64, 0u64, 0u64, 0u64);
        for _ in 0..self.reads {
            let key = keys.make(u64::from(rand.uniform(self.key_space())));
            if reads_left == 0 && writes_left == 0 {
                reads_left = self.flags.readwritepercent;
                writes_left = 100 - self.flags.readwritepercent;
            }
            if reads_left > 0 {
                if let Ok(Some(_)) = db.get_pinned_opt(key, &read_options) {
                    found += 1;
                }
                reads_left -= 1;
                reads += 1;
            } else {
                let value = values.generate(self.value_size);
                if let Err(error) = db.put_opt(key, value, &write_options) {
                    die(&format!("put error: {error}"));
                }
                bytes += (key.len() + value.len()) as u64;
                writes_left -= 1;
                writes += 1;
            }
            stats.finished_single_op();
        }
        self.user_bytes.fetch_add(bytes, Ordering::Relaxed);
        stats.add_message(&format!(
            "( reads:{reads} writes:{writes} total:{} found:{found})",
            self.reads
        ));
    }
}

fn clamp_i32(value: i64) -> i32 {
    value.clamp(0, i64::from(i32::MAX)) as i32
}
