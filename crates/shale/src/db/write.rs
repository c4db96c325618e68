//! The write path: group commit, the memtable switch and write throttling.
//!
//! Writers queue up; the one at the front leads a group: it makes room
//! (maybe switching to a new memtable and WAL), takes the batches of the
//! writers queued behind it, gives them consecutive sequence numbers, takes
//! the WAL writer out of the state and — without the state lock — appends
//! one record per batch (no batch is copied into another), syncs once if
//! the group asked, and inserts the batches into the memtable. Then it
//! publishes the new last sequence, makes the next writer in the queue the
//! leader, and tells each writer of its group its result.
//!
//! A writer that finds no writer leading or queued, and room in the
//! memtable, does not queue: it writes its batch as a group of one without
//! the group (`DbInner::write_alone`), leading while it does so that
//! writers who come meanwhile queue behind it.
//!
//! When a group holds several batches, the writers of the group that are
//! awake help insert them into the memtable (RocksDB's
//! `allow_concurrent_memtable_write`; `Options::concurrent_memtable_writes`):
//! the leader appends the group to the WAL, offers the insert to its
//! followers, and it and every follower that takes the offer claim batches
//! one at a time until none is left. A follower that sleeps is not woken
//! for it (on a machine with fewer cores than writers, a wake-up costs more
//! than the insert it would do); its batch is inserted by whoever is awake.
//! The memtable's skip list takes concurrent inserts (`skiplist.rs`).
//!
//! With `Options::pipelined_write` (off by default), a leader with writers
//! queued behind it hands the lead on as soon as its group is in the WAL
//! and inserts while the next group appends (RocksDB's
//! `enable_pipelined_write`). Either way groups publish their sequence
//! numbers in the order they took them: a group waits until the groups
//! before it have published, so a snapshot never gains a write after it
//! was taken.
//!
//! A writer waits on a slot of its own (one per thread, reused: no
//! allocation and no map entry per write) and is told its result through
//! it: a follower never takes the state lock again, so a group's writers do
//! not queue for it one after another when they wake (no lock convoy).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use shale_format::internal_key::{SequenceNumber, ValueType};
use shale_format::log_writer::LogWriter;
use shale_format::write_batch::{BatchOp, WriteBatch};
use shale_format::{Error, Result};

use super::{DbInner, State, StateGuard};
use crate::compaction::priority;
use crate::env::LogFile;
use crate::filename;
use crate::kill_point;
use crate::memtable::MemTable;
use crate::options::{Options, WriteOptions};

/// The WAL being appended to.
pub(crate) type Wal = LogWriter<LogFile>;

/// A queued write.
pub(crate) struct QueuedWrite {
    /// `None` asks only for a memtable switch (used by flush).
    batch: Option<WriteBatch>,
    sync: bool,
    /// Where its writer waits.
    slot: Arc<WriterSlot>,
}

/// The writers waiting to write, in order; the first leads the next group.
#[derive(Default)]
pub(crate) struct WriteQueue {
    writers: VecDeque<QueuedWrite>,
    /// A leader is at work: its group may be out of the queue already.
    leading: bool,
    /// The last sequence number given to a group. Above
    /// `State::last_sequence` (what readers see) while pipelined groups
    /// insert into the memtable; 0 until the first group.
    allocated: SequenceNumber,
    /// Pipelined groups past the WAL whose sequence numbers are not
    /// published yet: they may still be inserting into the memtable.
    in_flight: usize,
    /// Writers waiting on `DbInner::published_cv`.
    publish_waiters: usize,
}

impl WriteQueue {
    /// Gives `batches` consecutive sequence numbers after every number
    /// published (`published`, `State::last_sequence`) or given out
    /// already, and records them as given: used up whatever happens next
    /// (the records may reach the WAL, and no later write may share their
    /// numbers). Returns the first and the last number; the last is the
    /// first minus one when the batches hold no entries.
    fn allocate<'b>(
        &mut self,
        published: SequenceNumber,
        batches: impl Iterator<Item = &'b mut WriteBatch>,
    ) -> (SequenceNumber, SequenceNumber) {
        let first = published.max(self.allocated) + 1;
        let mut next = first;
        for batch in batches {
            batch.set_sequence(next);
            next += u64::from(batch.count());
        }
        self.allocated = next - 1;
        (first, next - 1)
    }
}

/// Where a writer waits: what it waits for, and the thread to wake. Each on
/// cache lines of its own: the writers queued spin on their slots while
/// the leader writes to them, and slots of different threads allocated
/// side by side would bounce one line between every core involved.
#[repr(align(128))]
struct WriterSlot {
    status: AtomicU8,
    thread: Thread,
    /// The group's error, set before `status` turns `DONE` (a lock taken
    /// only by this writer and its leader, once).
    error: Mutex<Option<Error>>,
    /// Set with `INSERT`: the group's insert, on its leader's stack.
    insert: AtomicPtr<GroupInsert<'static>>,
}

/// A group's insert into the memtable, shared by its leader and the
/// followers that help. The leader keeps it (on its stack) until no
/// follower can touch it any more.
struct GroupInsert<'a> {
    mem: &'a MemTable,
    /// The group; its batches are numbered and sequenced already.
    group: &'a [QueuedWrite],
    /// The next batch to claim.
    next: AtomicUsize,
    /// The first failure.
    failed: Mutex<Option<Error>>,
    leader: &'a Thread,
}

impl GroupInsert<'_> {
    /// Claims and inserts batches until none is left.
    fn help(&self) {
        loop {
            let claimed = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(write) = self.group.get(claimed) else {
                return;
            };
            let Some(batch) = write.batch.as_ref() else {
                continue;
            };
            if let Err(err) = insert_caught(self.mem, batch) {
                let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
                failed.get_or_insert(err);
            }
        }
    }
}

/// [`WriterSlot::status`]: queued, its write not done.
const WAITING: u8 = 0;
/// It is at the front of the queue: it leads the next group.
const LEADING: u8 = 1;
/// A leader wrote it; the result is in the slot.
const DONE: u8 = 2;
/// Its leader wrote the group to the WAL and offers its insert: a writer
/// awake to see it may take it (`HELPING`, [`WriterSlot::help`]); the
/// leader withdraws the offer (back to `WAITING`) once every batch is
/// claimed.
const INSERT: u8 = 3;
/// It took the offer: it inserts batches of the group, and goes back to
/// `WAITING` when none is left.
const HELPING: u8 = 4;

/// Spins of a waiting writer before it yields or sleeps: a group takes a
/// few microseconds, and a writer that sleeps costs a system call to sleep
/// and one to be woken.
const SPINS: u32 = 64;
/// Yields of a writer that waits alone behind the leader on a machine with
/// no core to spare, between spinning and sleeping: the processor goes to
/// readers or the compaction and comes back soon. A writer with others
/// waiting beside it there sleeps at once instead: with more writers than
/// cores every `sched_yield` among them is a context switch, and 16 yields
/// per wait made four writers on two cores slower than sleeping at once
/// (2.1M context switches for 2.4M writes against 0.2M;
/// `docs/benchmarks.md`), while with one writer among readers sleeping at
/// once cost `readrandomwriterandom` about 15 %.
const LONE_WRITER_YIELDS: u32 = 2;
/// A writer on a machine with a core for it stays awake (yielding) for up
/// to `Options::write_thread_max_yield_usec` before it sleeps. There a
/// sleeping writer is what limits several writers: every group hands the
/// lead to a writer that must be woken, and waking a thread on an idle core
/// takes tens of microseconds, longer than the group itself. Four writers
/// on 16 idle cores wrote at 0.46x of one writer when they slept after
/// spinning, 0.52x awake (`docs/benchmarks.md`, "Writers on 16 cores").
/// RocksDB's write thread waits the same way. A yield that took
/// `write_thread_slow_yield_usec` ran another thread: after
/// [`SLOW_YIELDS`] of them the core is wanted after all, and the writer
/// sleeps.
const SLOW_YIELDS: u32 = 3;

/// Whether a writer queued behind `waiting` others stays awake: the
/// machine has a core for each of them, this writer and the leader, and
/// one more for the compaction (two cores are never enough).
fn stays_awake(waiting: usize, options: &Options) -> bool {
    static CORES: OnceLock<usize> = OnceLock::new();
    let cores = *CORES.get_or_init(crate::options::available_cores);
    waiting + 2 < cores && options.write_thread_max_yield_usec > 0
}

/// How a writer waits once spinning did not see its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Patience {
    /// Yields this many times, then sleeps.
    Yields(u32),
    /// Yields for up to `most` while its yields are faster than `slow`
    /// (the core is free), then sleeps.
    StayAwake { most: Duration, slow: Duration },
}

impl Patience {
    /// The patience of a writer that queues behind `waiting` others (the
    /// leader among them, or leading a group already): awake where
    /// [`stays_awake`] says so, else as [`LONE_WRITER_YIELDS`] says.
    fn for_queue(waiting: usize, options: &Options) -> Patience {
        if stays_awake(waiting, options) {
            Patience::StayAwake {
                most: Duration::from_micros(options.write_thread_max_yield_usec),
                slow: Duration::from_micros(options.write_thread_slow_yield_usec),
            }
        } else if waiting == 0 {
            Patience::Yields(LONE_WRITER_YIELDS)
        } else {
            Patience::Yields(0)
        }
    }

    /// Yields as this patience allows; false when the writer should sleep
    /// now. `state`: the yields so far and the slow ones among them, and
    /// when the first began.
    fn yield_once(self, state: &mut (u32, u32, Option<Instant>)) -> bool {
        let (yields, slow_yields, since) = state;
        match self {
            Patience::Yields(most) if *yields < most => {
                *yields += 1;
                std::thread::yield_now();
                true
            }
            Patience::Yields(_) => false,
            Patience::StayAwake { most, slow } => {
                let now = Instant::now();
                let since = *since.get_or_insert(now);
                if *slow_yields >= SLOW_YIELDS || now - since >= most {
                    return false;
                }
                std::thread::yield_now();
                *yields += 1;
                if now.elapsed() >= slow {
                    *slow_yields += 1;
                }
                true
            }
        }
    }
}

/// Spins, yields as `patience` allows, then parks until `ready` returns
/// `Some`; whoever makes it so unparks this thread afterwards.
fn wait_for<T>(patience: Patience, mut ready: impl FnMut() -> Option<T>) -> T {
    for _ in 0..SPINS {
        if let Some(value) = ready() {
            return value;
        }
        std::hint::spin_loop();
    }
    let mut yielded = (0, 0, None);
    loop {
        if let Some(value) = ready() {
            return value;
        }
        if !patience.yield_once(&mut yielded) {
            break;
        }
    }
    loop {
        if let Some(value) = ready() {
            return value;
        }
        // Wakes at the `unpark` that follows the change, or spuriously:
        // look again.
        std::thread::park();
    }
}

impl WriterSlot {
    /// Waits until the slot leaves `WAITING`; returns the new status.
    fn wait(&self, patience: Patience) -> u8 {
        wait_for(patience, || {
            let status = self.status.load(Ordering::Acquire);
            (status != WAITING).then_some(status)
        })
    }

    /// Takes the leader's offer to help insert its group (`INSERT`), if it
    /// still stands, and helps; then goes back to waiting.
    fn help(&self) {
        if self
            .status
            .compare_exchange(INSERT, HELPING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Withdrawn, or the group is done already.
            return;
        }
        // SAFETY: the leader stored the pointer before it set `INSERT`
        // (release; the exchange above acquired it), and keeps the group's
        // insert in place until this writer leaves `HELPING`.
        let insert = unsafe { &*self.insert.load(Ordering::Relaxed) };
        insert.help();
        let leader = insert.leader.clone();
        // After this store the leader may return: `insert` is not touched
        // again.
        self.status.store(WAITING, Ordering::Release);
        leader.unpark();
    }

    /// Offers the group's insert (see [`WriterSlot::help`]); the writer is
    /// not woken for it.
    fn offer(&self, insert: *const GroupInsert<'_>) {
        self.insert
            .store(insert as *mut GroupInsert<'static>, Ordering::Relaxed);
        self.status.store(INSERT, Ordering::Release);
    }

    /// Withdraws the offer and waits until this writer no longer helps,
    /// with the `patience` of the group's writers: a helper is inserting
    /// a batch it claimed, a matter of a microsecond or two unless it was
    /// preempted, and where writers stay awake the leader must too.
    /// Parking after a short spin there made four writers on 16 idle cores
    /// park their leader about 40,000 times per 2M writes (61 % of their
    /// context switches; a quarter fewer switches with this patience,
    /// `docs/benchmarks.md`, "Writers on 16 cores, tenth pass").
    fn withdraw(&self, patience: Patience) {
        if self
            .status
            .compare_exchange(INSERT, WAITING, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        wait_for(patience, || {
            (self.status.load(Ordering::Acquire) != HELPING).then_some(())
        });
    }

    /// Moves the slot out of `WAITING` and wakes its writer.
    fn set(&self, status: u8) {
        self.status.store(status, Ordering::Release);
        self.thread.unpark();
    }

    /// Hands the writer its result.
    fn finish(&self, result: &Result<()>) {
        if let Err(err) = result {
            *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(err.clone());
        }
        self.set(DONE);
    }

    /// The result a leader handed over.
    fn result(&self) -> Result<()> {
        match self
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

thread_local! {
    /// A thread has at most one write queued: its slot is reused.
    static SLOT: Arc<WriterSlot> = Arc::new(WriterSlot {
        status: AtomicU8::new(WAITING),
        thread: std::thread::current(),
        error: Mutex::new(None),
        insert: AtomicPtr::new(std::ptr::null_mut()),
    });
    /// The leader's list of the group it writes, reused.
    static GROUP: RefCell<Vec<QueuedWrite>> = const { RefCell::new(Vec::new()) };
}

/// The fewest entries a group of sleeping writers must hold for its leader
/// to share the insert with those that happen to be awake. A group whose
/// writers stay awake (a core for each: [`stays_awake`]) always shares:
/// there each follower inserts while the leader does, and since the skip
/// list gives each thread an inserter state of its own, inserts from
/// several cores add up (8 threads inserting one-entry batches: 3.8x one
/// thread's rate, 0.55x before). Eight writers of single 32-byte puts on
/// 16 cores wrote 1.25x faster sharing every group than with only groups
/// of 64 entries shared, four 0.96x (within that machine's noise). On two
/// cores the followers sleep and cannot help: a four-writer fill sharing
/// every group took 1.04x the time (`docs/benchmarks.md`, "Writers on 16
/// cores, again").
const MIN_SHARED_ENTRIES: usize = 64;

/// Largest group a leader builds, in bytes of batch data.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// The most of its owed delay one write waits out by itself. The write
/// throttle (`docs/compaction.md`, "Write throttling") spreads the delay
/// that the compaction debt asks for over every write: each pays what it
/// owes, up to this much, in a wait that yields the processor instead of a
/// sleep (a sleep this short oversleeps by the timer slack, 50 us). So a
/// throttled write takes a few microseconds longer instead of one write in
/// hundreds taking a millisecond, which is what keeps the P99.9 of a
/// throttled fill low.
const MAX_SPREAD_DELAY: Duration = Duration::from_micros(10);

/// What writes owe beyond [`MAX_SPREAD_DELAY`] each (the debt outruns what
/// spreading pays) is summed and slept in one go once it reaches this
/// much, RocksDB's refill period for its delayed-write rate.
const MIN_DELAY_SLEEP: Duration = Duration::from_millis(1);

impl DbInner {
    pub(super) fn write(&self, options: &WriteOptions, batch: Option<WriteBatch>) -> Result<()> {
        let mut state = self.lock_state();
        let batch = match batch {
            Some(batch) if !options.sync && self.may_write_alone(&state) => {
                return self.write_alone(state, batch);
            }
            batch => batch,
        };
        let force_switch = batch.is_none();
        let slot = SLOT.with(Arc::clone);
        slot.status.store(WAITING, Ordering::Relaxed);
        let write_bytes = batch.as_ref().map_or(0, WriteBatch::approximate_size);
        state.write_queue.writers.push_back(QueuedWrite {
            batch,
            sync: options.sync,
            slot: slot.clone(),
        });
        if state.write_queue.leading {
            // Writers queued ahead of this one, the leader's group aside.
            let patience = Patience::for_queue(state.write_queue.writers.len() - 1, &self.options);
            drop(state);
            loop {
                match slot.wait(patience) {
                    DONE => return slot.result(),
                    INSERT => slot.help(),
                    _ => break,
                }
            }
            state = self.lock_state();
        }

        // This writer leads: it is at the front of the queue.
        state.write_queue.leading = true;
        let (guard, room) = self.make_room_for_write(state, force_switch, write_bytes);
        state = guard;
        if let Err(err) = room {
            state.write_queue.writers.pop_front();
            wake_next_leader(&mut state);
            return Err(err);
        }
        GROUP.with(|group| {
            let mut group = group.borrow_mut();
            let result = self.write_group(state, &mut group);
            // The leader's own entry is first; the rest learn their result.
            for follower in group.drain(..).skip(1) {
                follower.slot.finish(&result);
            }
            result
        })
    }

    /// Takes the group led by the front of the queue out of it, writes it
    /// to the WAL and the memtable, publishes its sequence numbers and
    /// hands the lead to the next writer. The group is left in `group`.
    ///
    /// Pipelined (`Options::pipelined_write`), the lead passes as soon as
    /// the group is in the WAL: the next group appends its record while
    /// this one inserts into the memtable (RocksDB's
    /// `enable_pipelined_write`; the skip list takes concurrent inserts).
    /// Groups then publish their sequence numbers in the order they took
    /// them, so a reader never sees a write before an earlier one.
    /// REQUIRES: the caller leads the write queue and made room.
    fn write_group<'a>(
        &'a self,
        mut state: StateGuard<'a>,
        group: &mut Vec<QueuedWrite>,
    ) -> Result<()> {
        let sync = take_group(&mut state.write_queue, group);
        if group.iter().all(|w| w.batch.is_none()) {
            // A memtable switch: nothing to write.
            wake_next_leader(&mut state);
            return Ok(());
        }
        let published = state.last_sequence;
        let batches = group.iter_mut().filter_map(|w| w.batch.as_mut());
        let (first_sequence, last_sequence) = state.write_queue.allocate(published, batches);
        // A group hands the lead on early only to a writer already queued:
        // a writer alone would take the state lock once more for nothing.
        let pipelined = self.options.pipelined_write && !state.write_queue.writers.is_empty();
        let mem = state.mem.clone();
        let mut log = state.log.take();
        let wal_number = state.log_number;
        // Once synced, the retired WAL needs no more syncs: it is dropped.
        let retired = if sync { state.retired_log.take() } else { None };
        let sync_name = sync && state.wal_name_unsynced;
        drop(state);
        let name_synced = if sync_name {
            self.options.env.sync_dir(&self.dir)
        } else {
            Ok(())
        };
        let logged = name_synced
            .and_then(|()| sync_retired_wal(retired))
            .and_then(|()| {
                let batches = group.iter().filter_map(|w| w.batch.as_ref());
                append_to_wal(log.as_mut(), wal_number, batches, sync)
            });
        let wal_failed = logged.is_err();
        if pipelined {
            let mut state = self.lock_state();
            self.return_wal(&mut state, log.take(), sync_name, &logged);
            state.write_queue.in_flight += 1;
            wake_next_leader(&mut state);
        }
        let result = logged.and_then(|()| {
            kill_point::maybe_kill(kill_point::WAL_WRITTEN_BEFORE_MEMTABLE);
            self.insert_group(&mem, group)
        });
        let mut state = self.publish(first_sequence, last_sequence);
        if pipelined {
            state.write_queue.in_flight -= 1;
            match &result {
                // Recorded when the WAL was put back.
                Err(_) if wal_failed => {}
                // Logged but not in the memtable: writes stop.
                Err(err) => self.record_wal_error(&mut state, err),
                Ok(()) => {}
            }
        } else {
            self.return_wal(&mut state, log.take(), sync_name, &result);
            wake_next_leader(&mut state);
        }
        self.tell_publish_waiters(&state);
        result
    }

    /// Whether a writer may write its batch alone ([`DbInner::write_alone`]):
    /// no writer leads or waits, and the memtable has room with nothing
    /// to wait for (what `make_room_for_write` would find at once).
    fn may_write_alone(&self, state: &State) -> bool {
        let queue = &state.write_queue;
        !queue.leading && queue.writers.is_empty() && self.has_room_now(state)
    }

    /// Whether a write finds room with nothing to wait for: no background
    /// error, L0 under the slowdown trigger, the memtable not full.
    /// `make_room_for_write` returns at once, without a switch, exactly
    /// when this holds.
    fn has_room_now(&self, state: &State) -> bool {
        state.bg_error.is_none()
            && state.current.num_files(0) < self.options.l0_slowdown_writes_trigger
            && state.mem.approximate_memory_usage() <= self.options.write_buffer_size
    }

    /// Writes the batch of a writer that found no other writer (a group
    /// of one without the group: no queue entry, no slot, no shared
    /// insert: a 32-byte fill took 4 % less time with one writer and 9 %
    /// with four, `docs/benchmarks.md`).
    /// It leads while it writes, so writers that come meanwhile queue and
    /// the first of them leads next. Never for a synced write, which
    /// takes the queue (the sync of the retired WAL and of the
    /// directory are there).
    /// REQUIRES: [`DbInner::may_write_alone`].
    fn write_alone<'a>(&'a self, mut state: StateGuard<'a>, mut batch: WriteBatch) -> Result<()> {
        state.write_queue.leading = true;
        let published = state.last_sequence;
        let (first_sequence, last_sequence) = state
            .write_queue
            .allocate(published, std::iter::once(&mut batch));
        let mem = state.mem.clone();
        let mut log = state.log.take();
        let wal_number = state.log_number;
        drop(state);
        let result = append_to_wal(log.as_mut(), wal_number, std::iter::once(&batch), false)
            .and_then(|()| {
                kill_point::maybe_kill(kill_point::WAL_WRITTEN_BEFORE_MEMTABLE);
                insert_caught(&mem, &batch)
            });
        let mut state = self.publish(first_sequence, last_sequence);
        self.return_wal(&mut state, log, false, &result);
        wake_next_leader(&mut state);
        self.tell_publish_waiters(&state);
        result
    }

    /// Publishes sequence numbers `first..=last` once every earlier
    /// number is: earlier groups publish first, pipelined ones perhaps
    /// still inserting. (A group of empty batches takes no number: a later
    /// group may have published already.) The wait is short: look
    /// without the lock before sleeping on it. Returns the state lock.
    fn publish(&self, first: SequenceNumber, last: SequenceNumber) -> StateGuard<'_> {
        self.await_published(first - 1);
        let mut state = self.lock_state();
        while state.last_sequence + 1 < first {
            state = self.wait_for_a_publish(state);
        }
        state.last_sequence = state.last_sequence.max(last);
        self.published_sequence
            .store(state.last_sequence, Ordering::Release);
        state
    }

    /// Wakes the writers waiting for a publish, if any.
    fn tell_publish_waiters(&self, state: &State) {
        if state.write_queue.publish_waiters > 0 {
            self.published_cv.notify_all();
        }
    }

    /// Spins, then yields while the machine has a core to spare, until the
    /// writes up to `sequence` are published; gives up after that (the
    /// caller then waits on `published_cv`).
    fn await_published(&self, sequence: SequenceNumber) {
        let published = || self.published_sequence.load(Ordering::Acquire) >= sequence;
        for _ in 0..SPINS {
            if published() {
                return;
            }
            std::hint::spin_loop();
        }
        let patience = Patience::for_queue(0, &self.options);
        let mut yielded = (0, 0, None);
        while !published() && patience.yield_once(&mut yielded) {}
    }

    /// Puts the WAL back after a group's append; a failed write stops
    /// writes. The WAL may then end in a torn record or hold one we could
    /// not acknowledge: it is dropped, never appended to again, and writes
    /// stop until a new one replaces it (`resume.rs`).
    fn return_wal(
        &self,
        state: &mut State,
        log: Option<Wal>,
        sync_name: bool,
        result: &Result<()>,
    ) {
        match result {
            Ok(()) => {
                state.log = log;
                state.wal_name_unsynced &= !sync_name;
            }
            Err(err) => self.record_wal_error(state, err),
        }
    }

    /// Waits until no pipelined group is inserting into the memtable, so
    /// that it can be switched (the immutable memtable is flushed whole).
    pub(super) fn wait_for_inserts<'a>(&'a self, mut state: StateGuard<'a>) -> StateGuard<'a> {
        while state.write_queue.in_flight > 0 {
            state = self.wait_for_a_publish(state);
        }
        state
    }

    /// Sleeps until a write group publishes (counted, so that a group
    /// signals `published_cv` only when someone waits).
    fn wait_for_a_publish<'a>(&'a self, mut state: StateGuard<'a>) -> StateGuard<'a> {
        state.write_queue.publish_waiters += 1;
        state = self.wait(&self.published_cv, state);
        state.write_queue.publish_waiters -= 1;
        state
    }

    /// Inserts the group's batches into `mem`, with the help of the
    /// followers that are awake when the options allow it. A panic in an
    /// insert, the leader's own included, becomes the group's error.
    fn insert_group(&self, mem: &MemTable, group: &[QueuedWrite]) -> Result<()> {
        let Some((leader, followers)) = group.split_first() else {
            return Ok(());
        };
        let insert = GroupInsert {
            mem,
            group,
            next: AtomicUsize::new(0),
            failed: Mutex::new(None),
            leader: &leader.slot.thread,
        };
        let entries: usize = group
            .iter()
            .filter_map(|w| w.batch.as_ref())
            .map(|b| b.count() as usize)
            .sum();
        let shared = self.options.concurrent_memtable_writes
            && (entries >= MIN_SHARED_ENTRIES || stays_awake(followers.len(), &self.options));
        let offered = if shared { followers } else { &[] };
        for follower in offered {
            follower.slot.offer(&insert);
        }
        insert.help();
        // Every batch is claimed; `insert` stays in place until no
        // follower helps.
        let patience = Patience::for_queue(offered.len(), &self.options);
        for follower in offered {
            follower.slot.withdraw(patience);
        }
        match insert
            .failed
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Makes sure the memtable has room, throttling when L0 is backed up
    /// (LevelDB's `MakeRoomForWrite`, with a rate-based delay instead of its
    /// 1 ms sleep). With `force`, switches to a new memtable whenever the
    /// current one holds anything. Takes and returns the state lock because
    /// it may wait.
    /// REQUIRES: the caller leads the write queue.
    fn make_room_for_write<'a>(
        &'a self,
        mut state: StateGuard<'a>,
        mut force: bool,
        write_bytes: usize,
    ) -> (StateGuard<'a>, Result<()>) {
        if !force && self.has_room_now(&state) {
            return (state, Ok(()));
        }
        let options = &self.options;
        let mut allow_delay = !force;
        loop {
            if let Some(err) = &state.bg_error {
                let err = err.clone();
                return (state, Err(err));
            }
            let l0_files = state.current.num_files(0);
            if allow_delay && l0_files >= options.l0_slowdown_writes_trigger {
                // Hold the writer to a rate that follows the compaction debt,
                // owed by every write and slept in slices of at least
                // MIN_DELAY_SLEEP.
                allow_delay = false;
                let debt = priority::Debt {
                    l0_files,
                    l0_drain_rate: self.service().l0_drain_rate(),
                };
                state.owed_delay += priority::write_delay(write_bytes.max(1), &debt, options);
                let started = Instant::now();
                if state.owed_delay < MIN_DELAY_SLEEP {
                    let now = state.owed_delay.min(MAX_SPREAD_DELAY);
                    state.owed_delay -= now;
                    drop(state);
                    while started.elapsed() < now {
                        std::thread::yield_now();
                    }
                } else {
                    let owed = std::mem::take(&mut state.owed_delay);
                    drop(state);
                    std::thread::sleep(owed);
                }
                state = self.lock_state();
                state.stalls.slowdown_count += 1;
                state.stalls.slowdown_micros += started.elapsed().as_micros() as u64;
            } else if !force && state.mem.approximate_memory_usage() <= options.write_buffer_size {
                return (state, Ok(()));
            } else if state.imm.is_some() || l0_files >= options.l0_stop_writes_trigger {
                if state.imm.is_none() {
                    shale_log!(self.info_log, "Too many L0 files ({l0_files}); waiting...");
                }
                let started = Instant::now();
                self.work_cv.notify_all();
                state = self.wait(&self.done_cv, state);
                state.stalls.stop_count += 1;
                state.stalls.stop_micros += started.elapsed().as_micros() as u64;
            } else if force && state.mem.is_empty() {
                return (state, Ok(()));
            } else if state.write_queue.in_flight > 0 {
                // Pipelined groups still insert into the memtable to retire.
                state = self.wait_for_inserts(state);
            } else {
                // The next WAL is created and its name made durable without
                // the state lock, which readers take. Only the leader
                // switches, and cleanup keeps logs newer than the current.
                let number = self.new_file_number();
                drop(state);
                let created = self.create_wal(number);
                state = self.lock_state();
                let file = match created {
                    Ok(file) => file,
                    Err(err) => return (state, Err(err)),
                };
                if let Some(err) = state.bg_error.clone() {
                    drop(file);
                    let _ = self
                        .options
                        .env
                        .remove_file(&filename::log_file_name(&self.dir, number));
                    return (state, Err(err));
                }
                self.switch_memtable(&mut state, number, file);
                force = false;
            }
        }
    }

    /// Creates WAL `number`. Its name is made durable by the first synced
    /// write to it (see `State::wal_name_unsynced`): a directory sync at
    /// every memtable switch stalled the writer for milliseconds.
    pub(super) fn create_wal(&self, number: u64) -> Result<LogFile> {
        let path = filename::log_file_name(&self.dir, number);
        self.options
            .env
            .new_log_file(&path, self.options.write_buffer_size as u64)
    }

    /// Starts a new memtable writing to WAL `number` (`file`, from
    /// [`DbInner::create_wal`]); the old memtable becomes immutable and the
    /// flush thread is woken.
    pub(super) fn switch_memtable(&self, state: &mut State, number: u64, file: LogFile) {
        // Writes before a later synced write must be durable too, even when
        // they sit in the WAL being retired: the first synced write syncs it
        // (see `State::retired_log`). Every record is already flushed to the
        // file, so nothing is lost if it is never synced and the process dies.
        // The previous retired WAL belongs to a memtable already flushed
        // (switches wait for that).
        state.retired_log = state.log.replace(LogWriter::new(file));
        state.log_number = number;
        state.wal_name_unsynced = true;
        let old = std::mem::replace(
            &mut state.mem,
            Arc::new(MemTable::with_order(self.order.clone())),
        );
        state.imm = Some(old);
        self.work_cv.notify_all();
    }
}

/// Moves the group the front writer leads from `queue` to `group`: the
/// leader, then the writers behind it up to the size limit, stopping before
/// a sync write when the leader does not sync (its caller did not ask to
/// wait for a sync) and before a memtable switch. Returns whether to sync.
fn take_group(queue: &mut WriteQueue, group: &mut Vec<QueuedWrite>) -> bool {
    let Some(leader) = queue.writers.pop_front() else {
        return false;
    };
    let sync = leader.sync;
    let Some(first) = leader.batch.as_ref() else {
        // A memtable switch leads its own group.
        group.push(leader);
        return sync;
    };
    // A small leader should not wait behind a huge group.
    let limit = if first.approximate_size() <= 128 << 10 {
        first.approximate_size() + (128 << 10)
    } else {
        MAX_GROUP_BYTES
    };
    let mut size = first.approximate_size();
    group.push(leader);
    while let Some(next) = queue.writers.front() {
        let Some(batch) = next.batch.as_ref() else {
            break;
        };
        if (next.sync && !sync) || size + batch.approximate_size() > limit {
            break;
        }
        size += batch.approximate_size();
        if let Some(next) = queue.writers.pop_front() {
            group.push(next);
        }
    }
    sync
}

/// Tells the writer now at the front of the queue that it leads the next
/// group; with none, the next writer to come leads.
fn wake_next_leader(state: &mut State) {
    let queue = &mut state.write_queue;
    match queue.writers.front() {
        Some(next) => next.slot.set(LEADING),
        None => queue.leading = false,
    }
}

/// Syncs the WAL retired at the last memtable switch, if a synced write
/// found it still unsynced.
fn sync_retired_wal(retired: Option<Wal>) -> Result<()> {
    match retired {
        Some(mut log) => log
            .get_mut()
            .sync()
            .map_err(|e| Error::io("syncing the retired WAL", e)),
        None => Ok(()),
    }
}

/// Appends one record per batch to WAL `wal_number`, then syncs if asked;
/// an error names the file.
fn append_to_wal<'a>(
    log: Option<&mut Wal>,
    wal_number: u64,
    batches: impl Iterator<Item = &'a WriteBatch>,
    sync: bool,
) -> Result<()> {
    let append = || {
        let log = log.ok_or_else(|| Error::Internal("no WAL is open".into()))?;
        for batch in batches {
            log.add_record(batch.data())?;
        }
        if sync {
            log.get_mut()
                .sync()
                .map_err(|e| Error::io("syncing the WAL", e))?;
        }
        Ok(())
    };
    append().map_err(|e: Error| e.in_file(&format!("{wal_number:06}.log")))
}

/// Applies a whole batch to the memtable, assigning consecutive sequence
/// numbers from the batch's. The batch is checked completely first so a
/// damaged batch is never half applied.
pub(crate) fn insert_into(mem: &MemTable, batch: &WriteBatch) -> Result<()> {
    // Two passes rather than collecting the records: no allocation per write.
    for op in batch.iter() {
        op?;
    }
    let mut inserter = mem.inserter();
    for (sequence, op) in (batch.sequence()..).zip(batch.iter()) {
        match op? {
            BatchOp::Put { key, value } => inserter.add(sequence, ValueType::Value, key, value),
            BatchOp::Delete { key } => inserter.add(sequence, ValueType::Deletion, key, b""),
        }
    }
    Ok(())
}

/// [`insert_into`], with a panic in it made the write's error: a writer
/// that panicked while leading would leave the lead taken and every later
/// writer waiting.
fn insert_caught(mem: &MemTable, batch: &WriteBatch) -> Result<()> {
    catch_unwind(AssertUnwindSafe(|| insert_into(mem, batch)))
        .unwrap_or_else(|panic| Err(Error::panicked("a memtable insert", &*panic)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Patience;

    fn yields_until_sleep(patience: Patience) -> u32 {
        let mut state = (0, 0, None);
        let mut yields = 0;
        while patience.yield_once(&mut state) {
            yields += 1;
            assert!(yields < 1_000_000, "{patience:?} never sleeps");
        }
        yields
    }

    #[test]
    fn a_counted_patience_yields_that_often() {
        assert_eq!(yields_until_sleep(Patience::Yields(0)), 0);
        assert_eq!(yields_until_sleep(Patience::Yields(2)), 2);
    }

    #[test]
    fn an_awake_writer_sleeps_after_its_time_or_three_slow_yields() {
        // No time at all: sleeps at once.
        let none = Patience::StayAwake {
            most: Duration::ZERO,
            slow: Duration::from_secs(1),
        };
        assert_eq!(yields_until_sleep(none), 0);
        // Every yield counts as slow: three, then sleep.
        let slow = Patience::StayAwake {
            most: Duration::from_secs(60),
            slow: Duration::ZERO,
        };
        assert_eq!(yields_until_sleep(slow), 3);
        // Fast yields: awake until the time is up.
        let awake = Patience::StayAwake {
            most: Duration::from_millis(2),
            slow: Duration::from_secs(1),
        };
        let started = std::time::Instant::now();
        assert!(yields_until_sleep(awake) >= 1);
        assert!(started.elapsed() >= Duration::from_millis(2));
    }
}
