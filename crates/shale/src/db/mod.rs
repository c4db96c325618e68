//! The database: opening it and the public read/write API. The state the
//! write path and the background threads share is `inner.rs` (`DbInner`,
//! `State`, the lock order), below every other part; each part adds its
//! methods to `DbInner` in a file of its own:
//!
//! - `write.rs` (group commit, the WAL), `writer_queue.rs` (writers' slots
//!   and waits), `room.rs` (the memtable switch and the write throttle),
//!   `insert.rs` (a batch into the memtable);
//! - `read.rs` (lookups, iterators, sizes), `properties.rs`;
//! - `flush.rs` (the flush thread), `table_writer.rs`;
//! - `recovery.rs` (replaying the MANIFEST and the WALs at open),
//!   `files.rs` (file numbers, obsolete files, `destroy`), `resume.rs` and
//!   `retry.rs` (background errors and resuming after a full disk);
//! - `job_host.rs` and `job_io.rs`: all the compaction runner
//!   (`crate::compaction::runner`) sees of the database (the current
//!   version, the snapshot floor, job I/O, install, the background error).
//!
//! Locks, always taken in this order: `versions` (the MANIFEST, held
//! across its fsync), then the compaction service's scheduler, then
//! `state` (everything else, held briefly), then the service's bell (a
//! leaf that anything may ring). Code holding `state` takes neither
//! `versions` nor the scheduler; code holding the scheduler reads the
//! current version (`state`) but never takes `versions`. The order is
//! checked in debug builds (`crate::lock_order`). The WAL writer is owned
//! by whichever writer leads the current write group (see `write.rs`).

mod deleter;
mod direct_claim;
mod direct_writes;
mod files;
mod flush;
mod inner;
mod insert;
mod job_host;
mod job_io;
mod properties;
mod read;
mod read_activity;
mod recovery;
mod resume;
mod retry;
mod room;
mod table_writer;
mod write;
mod writer_queue;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use shale_compact::job::PhaseStats;
use shale_format::version_edit::NUM_LEVELS;
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use crate::compaction::runner::Runner;
use crate::db_iter::DbIterator;
use crate::filename;
use crate::info_log::InfoLog;
use crate::memtable::MemTable;
use crate::options::{
    CompactRangeOptions, ExecutorChoice, Options, ReadOptions, RemoteSettings, WriteOptions,
};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::table_cache::{SharedBlockCache, TableCache};
use crate::version::Version;
use crate::version_set::VersionSet;

#[cfg(feature = "opencl")]
pub use crate::compaction::executors::opencl_options;
pub use crate::compaction::executors::{executor_by_name, Lane};
pub use crate::compaction::scheduler::book::LevelStats;
pub use files::destroy;
pub use flush::pick_level_for_memtable_output;
pub(crate) use inner::DbInner;
use inner::State;
pub use inner::{StallStats, StallTime};
pub(crate) use insert::insert_into;
pub(crate) use table_writer::TableWriter;

/// An open database. Cheap to clone and share between threads; the database
/// closes when the last clone is dropped: the compaction that runs finishes
/// (no new one starts; what is left waits for the next open), the flush
/// thread stops (the memtable is in the WAL), and files are released.
#[derive(Clone)]
pub struct DB {
    pub(crate) inner: Arc<DbInner>,
    _closer: Arc<Closer>,
}

impl std::fmt::Debug for DB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DB").field("dir", &self.inner.dir).finish()
    }
}

/// The scheduler's state and counters ([`DB::scheduler_stats`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerStats {
    /// Jobs waiting per level.
    pub queue_lengths: [usize; NUM_LEVELS],
    /// Jobs running.
    pub running: usize,
    /// Per executor: jobs, bytes, seconds, recent throughput, failures.
    pub executors: Vec<(String, crate::compaction::scheduler::book::ExecutorRecord)>,
    /// Jobs queued, completed, dropped, cross-level, split, ...
    pub counts: crate::compaction::scheduler::SchedulerCounts,
    /// Jobs that ran on another executor than their first choice.
    pub fallbacks: u64,
    /// Why the last one did.
    pub last_fallback: Option<String>,
}

/// Stops and joins the background threads when the last `DB` clone drops.
struct Closer {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        self.inner.service().close();
        {
            let _state = self.inner.lock_state();
            self.inner.work_cv.notify_all();
            self.inner.done_cv.notify_all();
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for thread in threads {
            let _ = thread.join();
        }
        // No writer is left: the WAL's end moves past the direct writes,
        // so that closing it trims nothing they wrote.
        self.inner.settle_direct(&mut self.inner.lock_state());
        // A cleanup after an install skips files that a version held at
        // that moment still names (a compaction thread's look at the tree,
        // a reader), and none may follow. With every background thread
        // gone, delete what no live version names: a closed database
        // leaves no dead tables behind (which `repair` would take back as
        // live), as the next open would delete them anyway. A read-only
        // handle writes nothing.
        if !self.inner.read_only {
            self.inner.delete_obsolete_files(self.inner.lock_versions());
        }
        shale_log!(self.inner.info_log, "Closed");
    }
}

impl DB {
    /// Opens (or with `create_if_missing` creates) the database in `path`,
    /// replaying its MANIFEST and WAL. A database held open by another
    /// handle or process gives [`Error::Busy`].
    ///
    /// ```
    /// use shale::{Options, ReadOptions, WriteOptions, DB};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db");
    /// let db = DB::open(&path, Options { create_if_missing: true, ..Options::default() })?;
    /// db.put(&WriteOptions::default(), b"key", b"value")?;
    /// assert_eq!(db.get(&ReadOptions::new(), b"key")?, Some(b"value".to_vec()));
    /// # Ok::<(), shale::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<DB> {
        DB::open_with(path.as_ref(), options, false)
    }

    /// Opens the database in `path` for reading only, as RocksDB's
    /// `OpenForReadOnly` does: no LOCK is taken (so it works while another
    /// handle or process has the database open), nothing in the directory
    /// is written, created or deleted (no info LOG, no new WAL, MANIFEST or
    /// table), the WALs are replayed into memory, and no background thread
    /// runs. It sees the database as of the open. Writes, flushes and
    /// compactions fail with [`Error::NotSupported`].
    ///
    /// A process writing the database meanwhile may delete tables this
    /// handle still reads (a compaction's inputs): a read may then fail
    /// with a "not found" or I/O error; open again to see the newer state.
    ///
    /// ```
    /// use shale::{Options, ReadOptions, WriteOptions, DB};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("db");
    /// let writer = DB::open(&path, Options { create_if_missing: true, ..Options::default() })?;
    /// writer.put(&WriteOptions::default(), b"key", b"value")?;
    /// // While `writer` holds the database open:
    /// let reader = DB::open_read_only(&path, Options::default())?;
    /// assert_eq!(reader.get(&ReadOptions::new(), b"key")?, Some(b"value".to_vec()));
    /// assert!(reader.put(&WriteOptions::default(), b"key", b"new").is_err());
    /// # Ok::<(), shale::Error>(())
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<DB> {
        // Nothing runs compactions: no executor to look for or connect to.
        let options = Options {
            create_if_missing: false,
            error_if_exists: false,
            compaction_executor: shale_compact::ExecutorKind::Streaming.into(),
            remote: RemoteSettings {
                workers: Vec::new(),
                ..options.remote
            },
            custom_executor: None,
            direct_io_for_compaction: false,
            ..options
        };
        DB::open_with(path.as_ref(), options, true)
    }

    fn open_with(path: &Path, options: Options, read_only: bool) -> Result<DB> {
        options.validate().map_err(Error::InvalidArgument)?;
        let dir = path.to_path_buf();
        let env = options.env.clone();
        if options.create_if_missing {
            env.create_dir_all(&dir)?;
        } else if !env.file_exists(&dir) {
            return Err(Error::NotFound(format!(
                "{}: database does not exist (create_if_missing is false)",
                dir.display()
            )));
        }
        if options.direct_io_for_compaction {
            // Now rather than at the first compaction.
            env.check_direct_io(&dir)?;
        }
        let lock = if read_only {
            None
        } else {
            Some(
                env.lock_file(&filename::lock_file_name(&dir))
                    .map_err(|e| match e {
                        Error::Busy(_) => Error::Busy(format!(
                            "{}: database is in use by another handle or process",
                            dir.display()
                        )),
                        other => other,
                    })?,
            )
        };
        let info_log = if read_only {
            InfoLog::from_writer(Box::new(std::io::sink()))
        } else {
            InfoLog::open(&*env, &dir)?
        };
        let compaction = Runner::new(&options, info_log.clone())?;
        let block_cache = Arc::new(SharedBlockCache::new(options.block_cache_size));
        let table_cache = Arc::new(TableCache::new(
            &dir,
            env.clone(),
            options.max_open_files.saturating_sub(10).max(16),
            block_cache,
            options.table_options(),
            options.paranoid_checks,
        ));
        let versions = VersionSet::new(&dir, env.clone(), options.key_order());
        let file_numbers = versions.file_numbers();
        let deleter = deleter::Deleter::new(env.clone(), dir.clone(), info_log.clone());
        let inner = Arc::new(DbInner {
            dir,
            order: options.key_order(),
            table_cache,
            state: Mutex::new(State {
                mem: Arc::new(MemTable::for_buffer(
                    options.key_order(),
                    options.write_buffer_size,
                )),
                imm: None,
                log: None,
                retired_log: None,
                log_number: 0,
                wal_name_unsynced: false,
                last_sequence: 0,
                current: Arc::new(Version::empty(options.key_order())),
                live_versions: Vec::new(),
                bg_error: None,
                resume: retry::Resume::default(),
                write_queue: writer_queue::WriteQueue::default(),
                pending_outputs: HashSet::new(),
                done_epoch: 0,
                flushing: false,
                flush_started: None,
                flush_seconds_per_byte: 0.0,
                stalls: StallStats::default(),
                owed_delay: std::time::Duration::ZERO,
                reads: Default::default(),
            }),
            versions: Mutex::new(versions),
            done_cv: Condvar::new(),
            work_cv: Condvar::new(),
            published_cv: Condvar::new(),
            snapshots: Arc::new(SnapshotList::default()),
            deleter,
            info_log,
            compaction,
            file_numbers,
            shutting_down: AtomicBool::new(false),
            published_sequence: crossbeam_utils::CachePadded::new(AtomicU64::new(0)),
            direct: direct_claim::DirectWrites::default(),
            read_mark: Default::default(),
            options,
            read_only,
            _lock: lock,
        });
        if read_only {
            inner.recover_read_only()?;
            return Ok(DB {
                _closer: Arc::new(Closer {
                    inner: inner.clone(),
                    threads: Mutex::new(Vec::new()),
                }),
                inner,
            });
        }
        inner.recover()?;
        inner.compaction.note_device();
        job_io::remove_staging(&*inner.options.env, &inner.dir);
        let pointers = inner.lock_versions().compact_pointers.clone();
        inner.service().set_compact_pointers(pointers);
        shale_log!(
            inner.info_log,
            "Scheduler: {} compaction threads, up to {} sub-compactions, pick {}, cross-level {}; {}",
            inner.options.background_compactions(),
            inner.options.subcompactions(),
            inner.options.compaction_pick.name(),
            if inner.options.cross_level_compaction { "on" } else { "off" },
            inner.compaction.executors().describe()
        );
        let mut threads = vec![flush::start_flush_thread(&inner)?];
        threads.extend(Runner::start_threads(&inner, |inner| &inner.compaction)?);
        Ok(DB {
            _closer: Arc::new(Closer {
                inner: inner.clone(),
                threads: Mutex::new(threads),
            }),
            inner,
        })
    }

    /// Sets `key` to `value`.
    pub fn put(&self, options: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(WriteBatch::record_size(key, value));
        batch.put(key, value)?;
        self.write(options, batch)
    }

    /// Removes `key` (not an error when it is absent).
    pub fn delete(&self, options: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(WriteBatch::record_size(key, &[]));
        batch.delete(key)?;
        self.write(options, batch)
    }

    /// Applies `batch` atomically. Concurrent writers share one WAL write and
    /// one sync (group commit).
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner.write(options, Some(batch))
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(options, key)
    }

    /// A consistent point-in-time view; pass it in [`ReadOptions::snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        // Under the state lock, as compactions read the oldest snapshot.
        let _state = self.inner.lock_state();
        self.inner.snapshots.acquire(self.inner.visible_sequence())
    }

    /// A cursor over the database as of the snapshot in `options` (or now).
    pub fn iter(&self, options: &ReadOptions) -> Result<DbIterator> {
        self.inner.iter(options)
    }

    /// Compacts the user-key range `[begin, end]` (`None`: unbounded) down
    /// through every level that holds it: the memtable is flushed first, then
    /// each level's overlapping files are merged into the next (level 0's,
    /// with L1's over them, into L2 in one job when L2 holds the range and
    /// `cross_level_compaction` is on). The files it made obsolete are
    /// deleted when it returns.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let compacted =
            self.inner
                .compaction
                .compact_range(&*self.inner, begin, end, ExecutorChoice::Auto);
        self.inner.deleter.wait();
        compacted
    }

    /// [`compact_range`](Self::compact_range) with every job run on the
    /// executor `options.executor` names (`streaming`, `parallel`,
    /// `opencl`, `remote`; `auto`: the scheduler's choice), then
    /// on `streaming` if that one fails, as the executor chain does. An
    /// executor this database does not have (no OpenCL device, no remote
    /// workers) is an error before anything runs.
    pub fn compact_range_with(
        &self,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        options: &CompactRangeOptions,
    ) -> Result<()> {
        let compacted =
            self.inner
                .compaction
                .compact_range(&*self.inner, begin, end, options.executor);
        self.inner.deleter.wait();
        compacted
    }

    /// Flushes the memtable to a table and waits for it (and for the
    /// deletion of the WAL it made obsolete).
    pub fn flush(&self) -> Result<()> {
        let flushed = self.inner.flush_memtable();
        self.inner.deleter.wait();
        flushed
    }

    /// Waits until no compaction is needed or running (for benchmarks and
    /// tests), then deletes the files no version needs any more.
    pub fn wait_for_compactions(&self) -> Result<()> {
        if self.inner.read_only {
            // No compaction runs in a read-only handle.
            return Ok(());
        }
        self.inner.compaction.wait_for_compactions(&*self.inner)?;
        // The last install's cleanup keeps what a version held at that
        // moment names, and one is often held for an instant (a thread
        // looking for work, this wait checking for idleness): without a
        // later flush or compaction those files would stay until the next
        // one, or the close. Idle now, nothing holds an old version.
        self.inner.delete_obsolete_files(self.inner.lock_versions());
        Ok(())
    }

    /// A property of the database, or `None` for an unknown name. Known:
    /// `shale.stats`, `shale.sstables`, `shale.num-files-at-level<N>`,
    /// `shale.approximate-memory-usage`, `shale.executors` (and the same
    /// names with the `leveldb.` prefix).
    pub fn property(&self, name: &str) -> Option<String> {
        self.inner.property(name)
    }

    /// Approximate bytes on disk for each user-key range `[start, end)`.
    pub fn approximate_sizes(&self, ranges: &[(&[u8], &[u8])]) -> Vec<u64> {
        self.inner.approximate_sizes(ranges)
    }

    /// The error writes are refused with, if any: a full disk, which the
    /// database retries by itself and gets over once space is freed, or
    /// another failed background write, which stays until reopen
    /// (`docs/reliability.md`, "A full disk and I/O errors").
    pub fn background_error(&self) -> Option<Error> {
        self.inner.lock_state().bg_error.clone()
    }

    /// Times the database got over a full disk by itself since open.
    pub fn resumed_count(&self) -> u64 {
        self.inner.lock_state().resume.resumed
    }

    /// Time writers spent throttled since open.
    pub fn stall_stats(&self) -> StallStats {
        self.inner.lock_state().stalls
    }

    /// Per-level compaction statistics since open.
    pub fn level_stats(&self) -> [LevelStats; NUM_LEVELS] {
        self.inner
            .service()
            .with_scheduler(|scheduler| scheduler.book.levels().clone())
    }

    /// Per-executor job counts and phase statistics since open.
    pub fn executor_stats(&self) -> Vec<(String, u64, PhaseStats)> {
        self.inner.service().with_scheduler(|scheduler| {
            scheduler
                .book
                .records()
                .filter(|(_, record)| record.jobs > 0)
                .map(|(name, record)| (name.to_string(), record.jobs, record.phases.clone()))
                .collect()
        })
    }

    /// Every statistic the engine keeps, as one document (the schema of
    /// [`crate::stats`]; `shale stats --json`, the C API and Python all
    /// serialize this).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = shale::DB::open(dir.path(), shale::Options { create_if_missing: true, ..Default::default() })?;
    /// let stats = db.statistics();
    /// assert_eq!(stats.levels.len(), 7);
    /// println!("{}", stats.to_json());
    /// # Ok::<(), shale::Error>(())
    /// ```
    pub fn statistics(&self) -> crate::stats::Statistics {
        use crate::stats::{
            megabytes_per_second, ExecutorRow, Fallbacks, LevelRow, SchedulerRow, Stalls,
        };
        let sizes = self.level_sizes();
        let (book, scheduler) = self.inner.service().with_scheduler(|scheduler| {
            (
                scheduler.book.clone(),
                (
                    scheduler.queue_lengths(),
                    scheduler.running().len(),
                    scheduler.counts,
                ),
            )
        });
        let (queue_lengths, running, counts) = scheduler;
        let levels = book
            .levels()
            .iter()
            .zip(sizes)
            .enumerate()
            .map(|(level, (stats, (files, bytes)))| LevelRow {
                level,
                files,
                bytes,
                compactions: stats.count,
                seconds: stats.seconds,
                bytes_read: stats.bytes_read,
                bytes_written: stats.bytes_written,
            })
            .collect();
        let executors = book
            .records()
            .filter(|(_, record)| record.jobs > 0 || record.failures > 0)
            .map(|(name, record)| {
                let phases = &record.phases;
                let row = ExecutorRow {
                    jobs: record.jobs,
                    failures: record.failures,
                    panics: record.panics,
                    bytes_read: phases.bytes_read,
                    bytes_written: phases.bytes_written,
                    entries_in: phases.entries_in,
                    entries_out: phases.entries_out,
                    seconds: phases.total_secs,
                    read_seconds: phases.read_secs,
                    unpack_seconds: phases.unpack_secs,
                    merge_seconds: phases.merge_secs,
                    gc_seconds: phases.gc_secs,
                    pack_seconds: phases.pack_secs,
                    write_seconds: phases.write_secs,
                    megabytes_per_second: megabytes_per_second(
                        phases.bytes_read,
                        phases.total_secs,
                    ),
                    device: phases.costs.device.unwrap_or_default(),
                };
                (name.to_string(), row)
            })
            .collect();
        let stalls = self.stall_stats();
        crate::stats::Statistics {
            levels,
            executors,
            fallbacks: Fallbacks {
                jobs: book.fallbacks,
                last_reason: book.last_fallback.clone(),
            },
            scheduler: SchedulerRow {
                queue_lengths: queue_lengths.to_vec(),
                running,
                counts,
                executor_bytes_per_second: book
                    .records()
                    .map(|(name, record)| (name.to_string(), record.throughput()))
                    .collect(),
            },
            stalls: Stalls {
                slowdown_count: stalls.slowdown_count,
                slowdown_seconds: stalls.slowdown_micros as f64 / 1e6,
                stop_count: stalls.stop_count,
                stop_seconds: stalls.stop_micros as f64 / 1e6,
                causes: stalls.causes(),
            },
            writes: crate::stats::Writes {
                direct: self.inner.direct_writes(),
                leads_taken: self.inner.lock_state().write_queue.leads_taken,
                direct_closed_by_sleep: self.inner.direct.closed_by_sleep(),
            },
        }
    }

    /// Files and bytes at each level now.
    pub fn level_sizes(&self) -> [(usize, u64); NUM_LEVELS] {
        let version = self.inner.lock_state().current.clone();
        std::array::from_fn(|level| (version.num_files(level), version.level_bytes(level)))
    }

    /// What the compaction scheduler has queued and running, what each
    /// executor did, and its counters (the `shale.scheduler` property as
    /// data).
    pub fn scheduler_stats(&self) -> SchedulerStats {
        self.inner
            .service()
            .with_scheduler(|scheduler| SchedulerStats {
                queue_lengths: scheduler.queue_lengths(),
                running: scheduler.running().len(),
                executors: scheduler
                    .book
                    .records()
                    .map(|(name, record)| (name.to_string(), record.clone()))
                    .collect(),
                counts: scheduler.counts,
                fallbacks: scheduler.book.fallbacks,
                last_fallback: scheduler.book.last_fallback.clone(),
            })
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }
}
