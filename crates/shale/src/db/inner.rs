//! The database's shared state, below every part that works on it: the
//! [`DbInner`] that the write path, reads, the flush thread, recovery and
//! the compaction host share, and the [`State`] under its lock. Each part
//! adds its methods to `DbInner` in a file of its own and imports it from
//! here; nothing here imports those parts but the types the state holds.
//!
//! Locks, always taken in this order: `versions` (the MANIFEST, held
//! across its fsync), then the compaction service's scheduler, then
//! `state` (everything else, held briefly), then the service's bell (a
//! leaf that anything may ring); checked in debug builds
//! (`crate::lock_order`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};

use crossbeam_utils::CachePadded;
use shale_format::comparator::KeyOrder;
use shale_format::internal_key::SequenceNumber;
use shale_format::log_writer::LogWriter;
use shale_format::Error;

use super::direct_claim::DirectWrites;
use super::retry::Resume;
use super::writer_queue::WriteQueue;
use crate::compaction::runner::Runner;
use crate::compaction::service::Service;
use crate::env::{FileLock, LogFile};
use crate::info_log::InfoLog;
use crate::lock_order::{self, Rank};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::snapshot::SnapshotList;
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::version_set::VersionSet;

/// The WAL being appended to.
pub(crate) type Wal = LogWriter<LogFile>;

/// Counters of time writers spent throttled, in all and by cause.
#[derive(Debug, Default, Clone, Copy)]
pub struct StallStats {
    /// Writes the write throttle delayed (L0 at or past the slowdown
    /// trigger: each write owes a delay that follows the compaction debt,
    /// waits up to 10 us of it, and what is owed beyond that is slept once
    /// it reaches 1 ms; or the memtable nearly full while the previous one
    /// is still being flushed, `slowdown_for_flush`).
    pub slowdown_count: u64,
    /// Microseconds spent in those delays.
    pub slowdown_micros: u64,
    /// Microseconds writers waited for a memtable flush or for L0 to drop
    /// below the stop trigger.
    pub stop_micros: u64,
    /// Times a writer had to wait that way.
    pub stop_count: u64,
    /// The stops because L0 held `l0_stop_writes_trigger` files.
    pub stop_for_l0: StallTime,
    /// The stops because the memtable was full while the previous one was
    /// still being flushed.
    pub stop_for_flush: StallTime,
    /// Of the slowdowns, those paced to the flush of the previous memtable
    /// (`room.rs`, `flush_pacing_delay`).
    pub slowdown_for_flush: StallTime,
}

/// Writes held back for one cause, and for how long.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StallTime {
    /// Times a writer waited.
    pub count: u64,
    /// Microseconds of those waits.
    pub micros: u64,
}

impl StallTime {
    /// Counts one wait of `micros`.
    pub fn add(&mut self, micros: u64) {
        self.count += 1;
        self.micros += micros;
    }

    /// Adds `other`'s waits to these.
    pub fn absorb(&mut self, other: &StallTime) {
        self.count += other.count;
        self.micros += other.micros;
    }
}

impl StallStats {
    /// The counters by cause, for the statistics document and the
    /// `Stalls:` lines.
    pub fn causes(&self) -> crate::stats::StallCauses {
        let cause = |count: u64, micros: u64| crate::stats::StallCause {
            count,
            seconds: micros as f64 / 1e6,
        };
        crate::stats::StallCauses {
            l0_slowdown: cause(
                self.slowdown_count - self.slowdown_for_flush.count,
                self.slowdown_micros - self.slowdown_for_flush.micros,
            ),
            l0_stop: cause(self.stop_for_l0.count, self.stop_for_l0.micros),
            flush_slowdown: cause(
                self.slowdown_for_flush.count,
                self.slowdown_for_flush.micros,
            ),
            memtable_flush: cause(self.stop_for_flush.count, self.stop_for_flush.micros),
        }
    }

    /// Adds `other`'s counters to these (a tool summing several opens).
    pub fn absorb(&mut self, other: &StallStats) {
        self.slowdown_count += other.slowdown_count;
        self.slowdown_micros += other.slowdown_micros;
        self.stop_count += other.stop_count;
        self.stop_micros += other.stop_micros;
        self.stop_for_l0.absorb(&other.stop_for_l0);
        self.stop_for_flush.absorb(&other.stop_for_flush);
        self.slowdown_for_flush.absorb(&other.slowdown_for_flush);
    }
}

/// The state lock, held.
pub(crate) type StateGuard<'a> = lock_order::Guard<'a, State>;

pub(crate) struct State {
    pub(super) mem: Arc<MemTable>,
    pub(super) imm: Option<Arc<MemTable>>,
    /// The WAL writer; `None` while the leading writer has it out.
    pub(super) log: Option<Wal>,
    /// The WAL retired at the last memtable switch while it may still hold
    /// unsynced writes (the immutable memtable's). A synced write syncs it
    /// first, so a synced write never outlives an earlier write in a crash;
    /// dropped, unsynced, once its memtable is a table. Syncing it at the
    /// switch instead would stall the writer for the whole file's fdatasync.
    pub(super) retired_log: Option<Wal>,
    /// Number of the WAL `log` writes to.
    pub(super) log_number: u64,
    /// A WAL was created since the directory was last synced: the next
    /// synced write syncs the directory first, so that the WAL's name (and
    /// the retired one's) survives a power loss with the write.
    pub(super) wal_name_unsynced: bool,
    /// The last sequence number published: readers and snapshots see the
    /// writes up to it. Pipelined write groups may hold higher ones while
    /// they insert (`write.rs`).
    pub(super) last_sequence: SequenceNumber,
    pub(super) current: Arc<Version>,
    /// Versions handed to readers; their files are not deleted.
    pub(super) live_versions: Vec<Weak<Version>>,
    /// The background error; writes are refused while there is one.
    pub(super) bg_error: Option<Error>,
    /// How the database gets over `bg_error` (see `resume.rs`).
    pub(super) resume: Resume,
    pub(super) write_queue: WriteQueue,
    /// Table numbers being written by a flush or compaction.
    pub(super) pending_outputs: HashSet<u64>,
    /// Bumped (with `done_cv` signalled) whenever background work finishes
    /// or gives up: a flush, a compaction, a resume attempt, a compaction
    /// thread finding nothing to do. A waiter notes it before checking its
    /// condition and sleeps until it moves, so no wake-up is lost and none
    /// is polled for.
    pub(super) done_epoch: u64,
    pub(super) flushing: bool,
    /// When the flush of `imm` that is running began.
    pub(super) flush_started: Option<std::time::Instant>,
    /// Seconds a flush has taken per byte of memtable, on average (0
    /// before the first flush): how long the running one should take.
    pub(super) flush_seconds_per_byte: f64,
    pub(super) stalls: StallStats,
    /// Write delay owed under the compaction debt and not yet slept.
    pub(super) owed_delay: std::time::Duration,
    /// Whether the database is read while it is written (sampled at
    /// memtable switches): L0's write triggers depend on it.
    pub(super) reads: super::read_activity::ReadActivity,
}

pub(crate) struct DbInner {
    pub(super) dir: PathBuf,
    pub(super) options: Options,
    /// The order of user keys (`options.comparator`).
    pub(super) order: KeyOrder,
    pub(super) table_cache: Arc<TableCache>,
    pub(super) versions: Mutex<VersionSet>,
    pub(super) state: Mutex<State>,
    /// Signalled when a flush or a compaction finishes (writers waiting for
    /// their turn have wake-ups of their own, see `write.rs`).
    pub(super) done_cv: Condvar,
    /// Signalled when there may be background work.
    pub(super) work_cv: Condvar,
    /// Signalled when a pipelined write group publishes its sequence
    /// numbers and a writer waits for that (`write.rs`).
    pub(super) published_cv: Condvar,
    pub(super) snapshots: Arc<SnapshotList>,
    pub(super) info_log: InfoLog,
    /// Deletes the files a flush or an install made obsolete, off the
    /// thread that made them so (`deleter.rs`).
    pub(super) deleter: super::deleter::Deleter,
    /// The executors, the compaction service (when and where jobs run,
    /// the ledger) and the running of jobs.
    pub(crate) compaction: Runner,
    pub(super) file_numbers: Arc<AtomicU64>,
    pub(super) shutting_down: AtomicBool,
    /// The last sequence number published: what readers and snapshots
    /// see. `State::last_sequence` is stored with it by the write queue;
    /// direct writes (`direct_writes.rs`) publish here alone, and the queue's
    /// next leader takes their numbers into the state. On a cache line of
    /// its own: every write stores it and every read loads it, and the
    /// fields beside it are read by every write.
    pub(super) published_sequence: CachePadded<AtomicU64>,
    /// The claim of direct writes (`direct_writes.rs`).
    pub(super) direct: DirectWrites,
    /// Marked by every read (`read_activity.rs`).
    pub(super) read_mark: super::read_activity::ReadMark,
    /// Opened with `DB::open_read_only`: nothing is written, no thread
    /// runs, and writes are refused.
    pub(super) read_only: bool,
    /// The LOCK file, held while open (none when read-only).
    pub(super) _lock: Option<Box<dyn FileLock>>,
}

impl DbInner {
    pub(crate) fn lock_state(&self) -> StateGuard<'_> {
        lock_order::lock(&self.state, Rank::State)
    }

    pub(crate) fn lock_versions(&self) -> lock_order::Guard<'_, VersionSet> {
        lock_order::lock(&self.versions, Rank::Versions)
    }

    pub(super) fn wait<'a>(&self, cv: &Condvar, guard: StateGuard<'a>) -> StateGuard<'a> {
        guard.wait(cv)
    }

    /// The compaction service: queues, the ledger, the waits.
    pub(super) fn service(&self) -> &Service {
        self.compaction.service()
    }

    /// The options the database was opened with.
    #[cfg(test)]
    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    pub(crate) fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Smallest sequence a live snapshot (or the present) can read.
    /// Taken under the state lock, with the version it reads.
    pub(super) fn smallest_snapshot(&self) -> SequenceNumber {
        self.snapshots
            .oldest()
            .unwrap_or_else(|| self.visible_sequence())
    }

    /// The last sequence number published: the writes a read sees.
    pub(super) fn visible_sequence(&self) -> SequenceNumber {
        self.published_sequence.load(Ordering::Acquire)
    }

    /// Installs `version` as current. REQUIRES: the version-set lock is held
    /// by the caller (so installs happen in MANIFEST order).
    pub(super) fn install_version(&self, state: &mut State, version: Arc<Version>) {
        state.live_versions.retain(|v| v.strong_count() > 0);
        state.live_versions.push(Arc::downgrade(&version));
        if version.num_files(0) >= self.write_triggers(state).slowdown {
            // Writes meet the throttle in the queue.
            self.direct.close();
        }
        state.current = version;
        self.work_cv.notify_all();
        self.service().work_available();
        self.signal_done(state);
    }

    /// Background work finished or gave up: waiters on `done_cv` look again.
    pub(super) fn signal_done(&self, state: &mut State) {
        state.done_epoch += 1;
        self.done_cv.notify_all();
    }
}
