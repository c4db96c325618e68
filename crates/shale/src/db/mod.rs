//! The database: open and recovery, the public read/write API, and the
//! shared state the write path and the background threads work on.
//!
//! Locks: `versions` (the MANIFEST, held across its fsync), `state`
//! (everything else, held briefly) and `scheduler` (the compaction queues).
//! Code holding `versions` may take `state`; code holding `state` never
//! takes `versions` or `scheduler`; code holding `scheduler` may take
//! `state` (picks read the current version under it), never `versions`. The WAL writer
//! is owned by whichever writer leads the current write group (see
//! `write.rs`).

mod compaction_threads;
mod executors;
mod flush;
mod install;
mod job_io;
mod properties;
mod recovery;
mod resume;
mod table_writer;
mod write;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

use shale_compact::job::PhaseStats;
use shale_format::comparator::KeyOrder;
use shale_format::concat_iterator::ConcatIterator;
use shale_format::internal_key::{
    InternalKey, ParsedInternalKey, SequenceNumber, ValueType, MAX_SEQUENCE_NUMBER,
};
use shale_format::iterator::KvIterator;
use shale_format::merging_iterator::merging_iterator;
use shale_format::table::BlockReadOptions;
use shale_format::version_edit::NUM_LEVELS;
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use crate::compaction::service::Service;
use crate::db_iter::DbIterator;
use crate::env::FileLock;
use crate::filename;
use crate::info_log::InfoLog;
use crate::memtable::{MemGet, MemTable};
use crate::options::{CompactRangeOptions, Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::table_cache::{SharedBlockCache, TableCache};
use crate::version::{FileMeta, Version};
use crate::version_set::VersionSet;

pub use executors::{executor_by_name, opencl_options, Lane, AUTO, EXECUTORS};
pub use flush::pick_level_for_memtable_output;
pub use properties::LevelStats;
pub(crate) use table_writer::TableWriter;
pub(crate) use write::insert_into;

/// An open database. Cheap to clone and share between threads; the database
/// closes (background work finishes, files are released) when the last clone
/// is dropped.
#[derive(Clone)]
pub struct DB {
    inner: Arc<DbInner>,
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

/// Counters of time writers spent throttled.
#[derive(Debug, Default, Clone, Copy)]
pub struct StallStats {
    /// Writes the write throttle delayed (L0 at or past the slowdown
    /// trigger: each write owes a delay that follows the compaction debt,
    /// waits up to 10 us of it, and what is owed beyond that is slept once
    /// it reaches 1 ms).
    pub slowdown_count: u64,
    /// Microseconds spent in those delays.
    pub slowdown_micros: u64,
    /// Microseconds writers waited for a memtable flush or for L0 to drop
    /// below the stop trigger.
    pub stop_micros: u64,
    /// Times a writer had to wait that way.
    pub stop_count: u64,
}

pub(crate) struct State {
    mem: Arc<MemTable>,
    imm: Option<Arc<MemTable>>,
    /// The WAL writer; `None` while the leading writer has it out.
    log: Option<write::Wal>,
    /// The WAL retired at the last memtable switch while it may still hold
    /// unsynced writes (the immutable memtable's). A synced write syncs it
    /// first, so a synced write never outlives an earlier write in a crash;
    /// dropped, unsynced, once its memtable is a table. Syncing it at the
    /// switch instead would stall the writer for the whole file's fdatasync.
    retired_log: Option<write::Wal>,
    /// Number of the WAL `log` writes to.
    log_number: u64,
    /// A WAL was created since the directory was last synced: the next
    /// synced write syncs the directory first, so that the WAL's name (and
    /// the retired one's) survives a power loss with the write.
    wal_name_unsynced: bool,
    last_sequence: SequenceNumber,
    current: Arc<Version>,
    /// Versions handed to readers; their files are not deleted.
    live_versions: Vec<Weak<Version>>,
    /// The background error; writes are refused while there is one.
    bg_error: Option<Error>,
    /// How the database gets over `bg_error` (see `resume.rs`).
    resume: resume::Resume,
    write_queue: write::WriteQueue,
    /// Table numbers being written by a flush or compaction.
    pending_outputs: HashSet<u64>,
    /// Bumped whenever something changes that may create compaction work.
    work_epoch: u64,
    /// Bumped (with `done_cv` signalled) whenever background work finishes
    /// or gives up: a flush, a compaction, a resume attempt, a compaction
    /// thread finding nothing to do. A waiter notes it before checking its
    /// condition and sleeps until it moves, so no wake-up is lost and none
    /// is polled for.
    done_epoch: u64,
    flushing: bool,
    level_stats: [LevelStats; NUM_LEVELS],
    executor_stats: HashMap<String, (u64, PhaseStats)>,
    stalls: StallStats,
    /// Write delay owed under the compaction debt and not yet slept.
    owed_delay: std::time::Duration,
}

pub(crate) struct DbInner {
    dir: PathBuf,
    options: Options,
    /// The order of user keys (`options.comparator`).
    order: KeyOrder,
    table_cache: Arc<TableCache>,
    versions: Mutex<VersionSet>,
    state: Mutex<State>,
    /// Signalled when a flush or a compaction finishes (writers waiting for
    /// their turn have wake-ups of their own, see `write.rs`).
    done_cv: Condvar,
    /// Signalled when there may be background work.
    work_cv: Condvar,
    snapshots: Arc<SnapshotList>,
    info_log: InfoLog,
    executors: executors::Executors,
    /// When and where compactions run, and what happened to each.
    service: Service,
    file_numbers: Arc<AtomicU64>,
    shutting_down: AtomicBool,
    next_job_id: AtomicU64,
    /// Input bytes per second of the last compaction out of L0 (`f64`
    /// bits; 0 before the first): the write throttle's rate.
    l0_drain_rate: AtomicU64,
    _lock: Box<dyn FileLock>,
}

/// Stops and joins the background threads when the last `DB` clone drops.
struct Closer {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        self.inner.service.close();
        {
            let _state = self.inner.lock_state();
            self.inner.work_cv.notify_all();
            self.inner.done_cv.notify_all();
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for thread in threads {
            let _ = thread.join();
        }
        shale_log!(self.inner.info_log, "Closed");
    }
}

impl DB {
    /// Opens (or with `create_if_missing` creates) the database in `path`,
    /// replaying its MANIFEST and WAL. A database held open by another
    /// handle or process gives [`Error::Busy`].
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<DB> {
        options.validate().map_err(Error::InvalidArgument)?;
        let executors = executors::Executors::from_options(&options)?;
        let dir = path.as_ref().to_path_buf();
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
        let lock = env
            .lock_file(&filename::lock_file_name(&dir))
            .map_err(|e| match e {
                Error::Busy(_) => Error::Busy(format!(
                    "{}: database is in use by another handle or process",
                    dir.display()
                )),
                other => other,
            })?;
        let info_log = InfoLog::open(&*env, &dir)?;
        let service_log = info_log.clone();
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
        let inner = Arc::new(DbInner {
            dir,
            order: options.key_order(),
            table_cache,
            state: Mutex::new(State {
                mem: Arc::new(MemTable::with_order(options.key_order())),
                imm: None,
                log: None,
                retired_log: None,
                log_number: 0,
                wal_name_unsynced: false,
                last_sequence: 0,
                current: Arc::new(Version::empty(options.key_order())),
                live_versions: Vec::new(),
                bg_error: None,
                resume: resume::Resume::default(),
                write_queue: write::WriteQueue::default(),
                pending_outputs: HashSet::new(),
                work_epoch: 1,
                done_epoch: 0,
                flushing: false,
                level_stats: Default::default(),
                executor_stats: HashMap::new(),
                stalls: StallStats::default(),
                owed_delay: std::time::Duration::ZERO,
            }),
            versions: Mutex::new(versions),
            done_cv: Condvar::new(),
            work_cv: Condvar::new(),
            snapshots: Arc::new(SnapshotList::default()),
            info_log,
            service: Service::new(&options, executors.facts(), service_log),
            executors,
            file_numbers,
            shutting_down: AtomicBool::new(false),
            next_job_id: AtomicU64::new(1),
            l0_drain_rate: AtomicU64::new(0),
            options,
            _lock: lock,
        });
        inner.recover()?;
        job_io::remove_staging(&*inner.options.env, &inner.dir);
        let pointers = inner.lock_versions().compact_pointers.clone();
        inner.service.set_compact_pointers(pointers);
        shale_log!(
            inner.info_log,
            "Scheduler: {} compaction threads, up to {} sub-compactions, pick {}, cross-level {}; {}",
            inner.options.background_compactions(),
            inner.options.subcompactions(),
            inner.options.compaction_pick.name(),
            if inner.options.cross_level_compaction { "on" } else { "off" },
            inner.executors.describe()
        );
        let threads = compaction_threads::start(&inner)?;
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
        let state = self.inner.lock_state();
        self.inner.snapshots.acquire(state.last_sequence)
    }

    /// A cursor over the database as of the snapshot in `options` (or now).
    pub fn iter(&self, options: &ReadOptions) -> Result<DbIterator> {
        self.inner.iter(options)
    }

    /// Compacts the user-key range `[begin, end]` (`None`: unbounded) down
    /// through every level that holds it: the memtable is flushed first, then
    /// each level's overlapping files are merged into the next.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.compact_range(begin, end, None)
    }

    /// [`compact_range`](Self::compact_range) with every job run on the
    /// executor `options.executor` names (`streaming`, `parallel`,
    /// `opencl`, `remote`; `auto` or `None`: the scheduler's choice), then
    /// on `streaming` if that one fails, as the executor chain does. An
    /// executor this database does not have (no OpenCL device, no remote
    /// workers) is an error before anything runs.
    pub fn compact_range_with(
        &self,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        options: &CompactRangeOptions,
    ) -> Result<()> {
        self.inner
            .compact_range(begin, end, options.executor.as_deref())
    }

    /// Flushes the memtable to a table and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_memtable()
    }

    /// Waits until no compaction is needed or running (for benchmarks and
    /// tests).
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_compactions()
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
        self.inner.lock_state().level_stats.clone()
    }

    /// Per-executor job counts and phase statistics since open.
    pub fn executor_stats(&self) -> Vec<(String, u64, PhaseStats)> {
        let state = self.inner.lock_state();
        let mut out: Vec<_> = state
            .executor_stats
            .iter()
            .map(|(name, (jobs, stats))| (name.clone(), *jobs, stats.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
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
            .service
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

/// Deletes the database in `path`: every file the database owns, then the
/// directory if it is empty. Fails with [`Error::Busy`] when it is open.
pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
    let dir = path.as_ref();
    let env = &options.env;
    let names = match env.children(dir) {
        Ok(names) => names,
        Err(Error::NotFound(_)) => return Ok(()),
        Err(err) => return Err(err),
    };
    let lock_path = filename::lock_file_name(dir);
    let lock = env.lock_file(&lock_path)?;
    // What remote workers staged is the database's too.
    job_io::remove_staging(&**env, dir);
    for name in names {
        if let Some((_, kind)) = filename::parse_file_name(&name) {
            if kind != filename::FileType::DbLock {
                env.remove_file(&dir.join(&name))?;
            }
        }
    }
    drop(lock);
    let _ = env.remove_file(&lock_path);
    let _ = env.remove_dir(dir);
    Ok(())
}

/// The block-level part of read options.
fn block_read_options(options: &ReadOptions) -> BlockReadOptions {
    BlockReadOptions {
        verify_checksums: options.verify_checksums,
        fill_cache: options.fill_cache,
    }
}

impl DbInner {
    pub(crate) fn lock_state(&self) -> MutexGuard<'_, State> {
        // A panic in a thread holding the state lock is a bug; the data it
        // guards is still structurally valid, so keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn lock_versions(&self) -> MutexGuard<'_, VersionSet> {
        self.versions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, cv: &Condvar, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        cv.wait(guard).unwrap_or_else(|e| e.into_inner())
    }

    /// The sequence reads see: the snapshot's, or the latest.
    fn read_sequence(&self, state: &State, options: &ReadOptions) -> SequenceNumber {
        options
            .snapshot
            .as_ref()
            .map_or(state.last_sequence, Snapshot::sequence)
    }

    /// Pins the current version for a reader.
    fn pin_current(state: &mut State) -> Arc<Version> {
        state.current.clone()
    }

    fn get(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (mem, imm, version, sequence) = {
            let mut state = self.lock_state();
            let sequence = self.read_sequence(&state, options);
            (
                state.mem.clone(),
                state.imm.clone(),
                Self::pin_current(&mut state),
                sequence,
            )
        };
        for table in std::iter::once(&mem).chain(imm.as_ref()) {
            match table.get(key, sequence) {
                Some(MemGet::Value(value)) => return Ok(Some(value)),
                Some(MemGet::Deleted) => return Ok(None),
                None => {}
            }
        }
        self.version_get(&version, options, key, sequence)
    }

    /// Looks `user_key` up in the tables of `version`: L0 newest first, then
    /// one candidate file per deeper level.
    fn version_get(
        &self,
        version: &Version,
        options: &ReadOptions,
        user_key: &[u8],
        sequence: SequenceNumber,
    ) -> Result<Option<Vec<u8>>> {
        let (mut stack, mut heap) = ([0u8; crate::memtable::STACK_KEY_LEN], Vec::new());
        let lookup = crate::memtable::lookup_key(user_key, sequence, &mut stack, &mut heap);
        let read = block_read_options(options);
        let order = &self.order;
        // The first file searched, charged a seek when the search goes on
        // to a second file (LevelDB's `GetStats`).
        let mut first_searched: Option<(usize, Arc<FileMeta>)> = None;
        let mut searched_more = false;
        // `Some(answer)` when `file` decides the key: a value or a deletion.
        let mut search = |level: usize, file: &Arc<FileMeta>| {
            if first_searched.is_none() {
                first_searched = Some((level, file.clone()));
            } else {
                searched_more = true;
            }
            let table = self.table_cache.table(file.number, file.file_size)?;
            let found =
                table.get_entry(
                    lookup,
                    read,
                    |found_key, value| match ParsedInternalKey::parse(found_key) {
                        Ok(parsed) if order.compare_user(parsed.user_key, user_key).is_ne() => {
                            Ok(None)
                        }
                        Ok(parsed) => Ok(Some(match parsed.value_type {
                            ValueType::Value => Some(value.to_vec()),
                            ValueType::Deletion => None,
                        })),
                        Err(err) => Err(err.at(table.name(), 0)),
                    },
                )?;
            Ok::<_, Error>(found.transpose()?.flatten())
        };
        let answer = (|| {
            // L0 files may overlap: search those that hold the key, newest
            // first, since a newer file's entry hides an older one's.
            // Inline up to the stop trigger's default: no allocation per lookup.
            let mut overlapping: smallvec::SmallVec<[&Arc<FileMeta>; 12]> = version.files[0]
                .iter()
                .filter(|f| {
                    order.compare_user(f.smallest.user_key(), user_key).is_le()
                        && order.compare_user(user_key, f.largest.user_key()).is_le()
                })
                .collect();
            overlapping.sort_unstable_by_key(|f| std::cmp::Reverse(f.number));
            for file in overlapping {
                if let Some(answer) = search(0, file)? {
                    return Ok(answer);
                }
            }
            // Deeper levels are sorted and disjoint: at most one file each.
            for level in 1..NUM_LEVELS {
                let index = version.find_file(level, lookup);
                if let Some(file) = version.files[level]
                    .get(index)
                    .filter(|f| order.compare_user(f.smallest.user_key(), user_key).is_le())
                {
                    if let Some(answer) = search(level, file)? {
                        return Ok(answer);
                    }
                }
            }
            Ok(None)
        })();
        if let (Some((level, file)), true) = (first_searched, searched_more) {
            self.charge_seek(version, level, &file);
        }
        answer
    }

    /// Charges `file` (at `level` of `version`) a seek that found nothing;
    /// when its allowance runs out it becomes the version's seek compaction.
    fn charge_seek(&self, version: &Version, level: usize, file: &Arc<FileMeta>) {
        if !self.options.seek_compaction
            || !file.charge_seek()
            || version.seek_compaction.get().is_some()
            || version.seek_compaction.set((level, file.clone())).is_err()
        {
            return;
        }
        self.service.work_available();
    }

    /// The merged internal iterator over memtables and tables of `version`.
    fn internal_iter(
        &self,
        mem: &Arc<MemTable>,
        imm: Option<&Arc<MemTable>>,
        version: &Arc<Version>,
        read: BlockReadOptions,
    ) -> Result<Box<dyn KvIterator + Send>> {
        let mut children: Vec<Box<dyn KvIterator + Send>> = vec![Box::new(mem.iter())];
        if let Some(imm) = imm {
            children.push(Box::new(imm.iter()));
        }
        for file in &version.files[0] {
            let table = self.table_cache.table(file.number, file.file_size)?;
            children.push(Box::new(table.iter_with(read)));
        }
        for level in 1..NUM_LEVELS {
            let files = version.files[level].clone();
            if files.is_empty() {
                continue;
            }
            let largest = files.iter().map(|f| f.largest.encoded().to_vec()).collect();
            let table_cache = self.table_cache.clone();
            // The closure holds the version, so its files outlive the cursor.
            let pinned = version.clone();
            children.push(Box::new(ConcatIterator::new(
                self.order.internal_comparator(),
                largest,
                Box::new(move |i| {
                    let file = &pinned.files[level][i];
                    let table = table_cache.table(file.number, file.file_size)?;
                    Ok(Box::new(table.iter_with(read)) as Box<dyn KvIterator + Send>)
                }),
            )));
        }
        Ok(merging_iterator(self.order.internal_comparator(), children))
    }

    fn iter(&self, options: &ReadOptions) -> Result<DbIterator> {
        let (mem, imm, version, sequence) = {
            let mut state = self.lock_state();
            let sequence = self.read_sequence(&state, options);
            (
                state.mem.clone(),
                state.imm.clone(),
                Self::pin_current(&mut state),
                sequence,
            )
        };
        let internal =
            self.internal_iter(&mem, imm.as_ref(), &version, block_read_options(options))?;
        let mut iter = DbIterator::with_order(internal, sequence, self.order.clone());
        if let Some(lower) = &options.lower_bound {
            iter = iter.with_lower_bound(lower.clone());
        }
        if let Some(upper) = &options.upper_bound {
            iter = iter.with_upper_bound(upper.clone());
        }
        Ok(iter)
    }

    /// Input bytes per second of the last compaction out of L0.
    fn l0_drain_rate(&self) -> Option<f64> {
        let rate = f64::from_bits(self.l0_drain_rate.load(Ordering::Relaxed));
        (rate > 0.0).then_some(rate)
    }

    /// Smallest sequence a live snapshot (or the present) can read.
    fn smallest_snapshot(&self, state: &State) -> SequenceNumber {
        self.snapshots.oldest().unwrap_or(state.last_sequence)
    }

    fn new_file_number(&self) -> u64 {
        self.file_numbers.fetch_add(1, Ordering::SeqCst)
    }

    /// Installs `version` as current. REQUIRES: the version-set lock is held
    /// by the caller (so installs happen in MANIFEST order).
    fn install_version(&self, state: &mut State, version: Arc<Version>) {
        state.live_versions.retain(|v| v.strong_count() > 0);
        state.live_versions.push(Arc::downgrade(&version));
        state.current = version;
        state.work_epoch += 1;
        self.work_cv.notify_all();
        self.service.work_available();
        self.signal_done(state);
    }

    /// Background work finished or gave up: waiters on `done_cv` look again.
    fn signal_done(&self, state: &mut State) {
        state.done_epoch += 1;
        self.done_cv.notify_all();
    }

    /// The files no version, pending output or needed log refers to, with
    /// their kinds and numbers. REQUIRES: the version-set lock is held by
    /// the caller, so the set of live files cannot change underneath. A
    /// number once obsolete never becomes live again (numbers are not
    /// reused), so the caller deletes them after releasing the lock
    /// ([`DbInner::delete_files`]).
    fn obsolete_files(&self, versions: &VersionSet) -> Vec<(String, u64, filename::FileType)> {
        // List first, then read the live set: a file being created already
        // has its number in `pending_outputs` (or is the WAL whose number is
        // already in `log_number`) before it appears in a listing.
        let Ok(names) = self.options.env.children(&self.dir) else {
            return Vec::new();
        };
        let (live, log_number) = {
            let mut state = self.lock_state();
            if state.bg_error.is_some() {
                // After an error the state of the directory is uncertain:
                // keep everything.
                return Vec::new();
            }
            state.live_versions.retain(|v| v.strong_count() > 0);
            let mut live: HashSet<u64> = state.pending_outputs.clone();
            live.extend(state.current.live_files());
            for version in state.live_versions.iter().filter_map(Weak::upgrade) {
                live.extend(version.live_files());
            }
            (live, state.log_number)
        };
        let mut obsolete = Vec::new();
        for name in names {
            let Some((number, kind)) = filename::parse_file_name(&name) else {
                continue;
            };
            use filename::FileType;
            let keep = match kind {
                FileType::Log => {
                    number >= versions.log_number.min(log_number)
                        || number == versions.prev_log_number
                }
                FileType::Descriptor => number >= versions.manifest_file_number(),
                FileType::Table | FileType::Temp => live.contains(&number),
                FileType::Current | FileType::DbLock | FileType::InfoLog => true,
            };
            if !keep {
                obsolete.push((name, number, kind));
            }
        }
        obsolete
    }

    /// Deletes files [`DbInner::obsolete_files`] found, without any lock.
    fn delete_files(&self, files: Vec<(String, u64, filename::FileType)>) {
        for (name, number, kind) in files {
            if kind == filename::FileType::Table {
                self.table_cache.evict(number);
            }
            shale_log!(self.info_log, "Delete type={kind:?} #{number}");
            let _ = self.options.env.remove_file(&self.dir.join(&name));
        }
    }

    fn approximate_sizes(&self, ranges: &[(&[u8], &[u8])]) -> Vec<u64> {
        let version = self.lock_state().current.clone();
        let offset_of = |user_key: &[u8]| -> u64 {
            let key = InternalKey::new(user_key, MAX_SEQUENCE_NUMBER, ValueType::VALUE_FOR_SEEK);
            let mut total = 0;
            for file in version.files.iter().flatten() {
                if self
                    .order
                    .compare_internal(file.largest.encoded(), key.encoded())
                    .is_le()
                {
                    total += file.file_size;
                } else if self
                    .order
                    .compare_internal(file.smallest.encoded(), key.encoded())
                    .is_lt()
                {
                    if let Ok(table) = self.table_cache.table(file.number, file.file_size) {
                        total += table.approximate_offset_of(key.encoded());
                    }
                }
            }
            total
        };
        ranges
            .iter()
            .map(|(start, end)| offset_of(end).saturating_sub(offset_of(start)))
            .collect()
    }
}
