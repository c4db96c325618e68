//! The writers' queue: each writer waits on a slot of its own (one per
//! thread, reused), the writer at the front leads a group, and the group's
//! followers are told their result through their slots (see `write.rs` for
//! the group commit these serve). How long a writer stays awake before it
//! sleeps ([`Patience`]) follows the cores left for it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use shale_format::internal_key::SequenceNumber;
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use super::insert::insert_caught;
use crate::memtable::MemTable;
use crate::options::Options;

/// A queued write.
pub(crate) struct QueuedWrite {
    /// `None` asks only for a memtable switch (used by flush).
    pub(super) batch: Option<WriteBatch>,
    pub(super) sync: bool,
    /// Where its writer waits.
    pub(super) slot: Arc<WriterSlot>,
}

/// Takes the lead that was handed to the writer at the front of `queue`
/// and not taken yet, for the calling writer (which has queued behind
/// it), while no more than `writers` are writing, one per core: true when
/// it now leads the front's group, which holds the front's write, and the
/// front writer waits for that group's result instead.
///
/// A leader hands the lead on by waking the next writer, and a writer
/// that sleeps takes tens of microseconds to run again: on an idle core,
/// longer than a group takes, and on a virtual machine longer still (a
/// halted virtual processor must be scheduled again). Meanwhile the
/// writers that are awake would queue behind it and wait too. Instead the
/// first of them to come leads, and the writer that was asleep finds its
/// write done when it wakes. With more writers than cores the sleeper's
/// wake-up costs another writer its core, and a lead taken from it makes
/// it wake twice, for the lead and for its result, so then it is left to
/// the sleeper: taking every such lead made two writers on two cores
/// faster and four slower (`docs/results/write-path.md`, "A lead taken
/// from a sleeping writer"). A memtable
/// switch (no batch) is never taken over. REQUIRES: the state lock.
pub(super) fn take_lead_from_sleeper(queue: &mut WriteQueue, writers: usize) -> bool {
    if writers > cores() {
        return false;
    }
    let Some(front) = queue.writers.front() else {
        return false;
    };
    if front.batch.is_none() {
        return false;
    }
    // Its writer looks at its slot only to wait, and acts on `LEADING`
    // only under the state lock, after checking it again.
    front
        .slot
        .status
        .compare_exchange(LEADING, WAITING, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

/// The writers waiting to write, in order; the first leads the next group.
#[derive(Default)]
pub(crate) struct WriteQueue {
    pub(super) writers: VecDeque<QueuedWrite>,
    /// A leader is at work: its group may be out of the queue already.
    pub(super) leading: bool,
    /// The writer handed the lead (the front of the queue) took it. Until
    /// it does, a writer that is awake may take the lead from it
    /// ([`take_lead_from_sleeper`]).
    pub(super) lead_taken: bool,
    /// Leads taken from writers handed them asleep, since the open.
    pub(super) leads_taken: u64,
    /// The last sequence number given to a group. Above
    /// `State::last_sequence` (what readers see) while pipelined groups
    /// insert into the memtable; 0 until the first group.
    pub(super) allocated: SequenceNumber,
    /// Pipelined groups past the WAL whose sequence numbers are not
    /// published yet: they may still be inserting into the memtable.
    pub(super) in_flight: usize,
    /// Writers waiting on `DbInner::published_cv`.
    pub(super) publish_waiters: usize,
    /// Groups in a row that ended with no more writers writing than may
    /// write directly (`direct_writes.rs` opens the claim after enough of them).
    pub(super) direct_streak: u32,
}

impl WriteQueue {
    /// Gives `batches` consecutive sequence numbers after every number
    /// published (`published`, `State::last_sequence`) or given out
    /// already, and records them as given: used up whatever happens next
    /// (the records may reach the WAL, and no later write may share their
    /// numbers). Returns the first and the last number; the last is the
    /// first minus one when the batches hold no entries.
    #[inline]
    pub(super) fn allocate<'b>(
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
pub(super) struct WriterSlot {
    pub(super) status: AtomicU8,
    pub(super) thread: Thread,
    /// The group's error, set before `status` turns `DONE` (a lock taken
    /// only by this writer and its leader, once).
    pub(super) error: Mutex<Option<Error>>,
    /// Set with `INSERT`: the group's insert, on its leader's stack.
    pub(super) insert: AtomicPtr<GroupInsert<'static>>,
}

/// A group's insert into the memtable, shared by its leader and the
/// followers that help. The leader keeps it (on its stack) until no
/// follower can touch it any more.
pub(super) struct GroupInsert<'a> {
    pub(super) mem: &'a MemTable,
    /// The group; its batches are numbered and sequenced already.
    pub(super) group: &'a [QueuedWrite],
    /// The next batch to claim.
    pub(super) next: AtomicUsize,
    /// The first failure.
    pub(super) failed: Mutex<Option<Error>>,
    pub(super) leader: &'a Thread,
}

impl GroupInsert<'_> {
    /// Claims and inserts batches until none is left.
    #[inline]
    pub(super) fn help(&self) {
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
pub(super) const WAITING: u8 = 0;
/// It is at the front of the queue: it leads the next group.
pub(super) const LEADING: u8 = 1;
/// A leader wrote it; the result is in the slot.
pub(super) const DONE: u8 = 2;
/// Its leader wrote the group to the WAL and offers its insert: a writer
/// awake to see it may take it (`HELPING`, [`WriterSlot::help`]); the
/// leader withdraws the offer (back to `WAITING`) once every batch is
/// claimed.
pub(super) const INSERT: u8 = 3;
/// It took the offer: it inserts batches of the group, and goes back to
/// `WAITING` when none is left.
pub(super) const HELPING: u8 = 4;

/// Spins of a waiting writer before it yields or sleeps: a group takes a
/// few microseconds, and a writer that sleeps costs a system call to sleep
/// and one to be woken.
pub(super) const SPINS: u32 = 64;
/// Yields of a writer that waits alone behind the leader on a machine with
/// no core to spare, between spinning and sleeping: the processor goes to
/// readers or the compaction and comes back soon. A writer with others
/// waiting beside it there sleeps at once instead: with more writers than
/// cores every `sched_yield` among them is a context switch, and yielding
/// made four writers on two cores slower than sleeping at once, while
/// with one writer among readers sleeping at once made
/// `readrandomwriterandom` slower (`docs/results/write-path.md`,
/// "Concurrent memtable inserts and writers that do not yield (second
/// pass)").
pub(super) const LONE_WRITER_YIELDS: u32 = 2;
/// A writer on a machine with a core for it stays awake (yielding) for up
/// to `Options::write_thread_max_yield_usec` before it sleeps. There a
/// sleeping writer is what limits several writers: every group hands the
/// lead to a writer that must be woken, and waking a thread on an idle core
/// takes tens of microseconds, longer than the group itself: on 16 idle
/// cores, writers that stay awake wrote faster than writers that slept
/// after spinning (`docs/results/write-path.md`, "Writers on 16 cores:
/// writers that stay awake, and groups of small writes inserted by their
/// leader"). RocksDB's write thread waits the same way. A yield that took
/// `write_thread_slow_yield_usec` ran another thread: after
/// [`SLOW_YIELDS`] of them the core is wanted after all, and the writer
/// sleeps.
pub(super) const SLOW_YIELDS: u32 = 3;

/// Whether a writer queued behind `waiting` others stays awake: the
/// machine has a core for each of them, this writer and the leader, and
/// one more for the compaction (two cores are never enough).
#[inline]
pub(super) fn stays_awake(waiting: usize, options: &Options) -> bool {
    waiting + 2 < cores() && options.write_thread_max_yield_usec > 0
}

/// The machine's cores (looked up once).
#[inline]
pub(super) fn cores() -> usize {
    crate::options::available_cores()
}

/// How a writer waits once spinning did not see its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Patience {
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
    #[inline]
    pub(super) fn for_queue(waiting: usize, options: &Options) -> Patience {
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
    #[inline]
    pub(super) fn yield_once(self, state: &mut (u32, u32, Option<Instant>)) -> bool {
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
#[inline]
pub(super) fn wait_for<T>(patience: Patience, mut ready: impl FnMut() -> Option<T>) -> T {
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
    #[inline]
    pub(super) fn wait(&self, patience: Patience) -> u8 {
        wait_for(patience, || {
            let status = self.status.load(Ordering::Acquire);
            (status != WAITING).then_some(status)
        })
    }

    /// Takes the leader's offer to help insert its group (`INSERT`), if it
    /// still stands, and helps; then goes back to waiting.
    pub(super) fn help(&self) {
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
    #[inline]
    pub(super) fn offer(&self, insert: *const GroupInsert<'_>) {
        self.insert
            .store(insert as *mut GroupInsert<'static>, Ordering::Relaxed);
        self.status.store(INSERT, Ordering::Release);
    }

    /// Withdraws the offer and waits until this writer no longer helps,
    /// with the `patience` of the group's writers: a helper is inserting
    /// a batch it claimed, a matter of a microsecond or two unless it was
    /// preempted, and where writers stay awake the leader must too.
    /// Parking after a short spin there made four writers on 16 idle cores
    /// park their leader for most of their context switches, and this
    /// patience takes many of them away (`docs/results/write-path.md`,
    /// "Writers on 16 cores, tenth pass").
    #[inline]
    pub(super) fn withdraw(&self, patience: Patience) {
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
    #[inline]
    pub(super) fn set(&self, status: u8) {
        self.status.store(status, Ordering::Release);
        self.thread.unpark();
    }

    /// Hands the writer its result.
    #[inline]
    pub(super) fn finish(&self, result: &Result<()>) {
        if let Err(err) = result {
            *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(err.clone());
        }
        self.set(DONE);
    }

    /// The result a leader handed over.
    #[inline]
    pub(super) fn result(&self) -> Result<()> {
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
    pub(super) static SLOT: Arc<WriterSlot> = Arc::new(WriterSlot {
        status: AtomicU8::new(WAITING),
        thread: std::thread::current(),
        error: Mutex::new(None),
        insert: AtomicPtr::new(std::ptr::null_mut()),
    });
    /// The leader's list of the group it writes, reused.
    pub(super) static GROUP: RefCell<Vec<QueuedWrite>> = const { RefCell::new(Vec::new()) };
}

/// Largest group a leader builds, in bytes of batch data.
pub(super) const MAX_GROUP_BYTES: usize = 1 << 20;

/// Moves the group the front writer leads from `queue` to `group`: the
/// leader, then the writers behind it up to the size limit, stopping before
/// a sync write when the leader does not sync (its caller did not ask to
/// wait for a sync) and before a memtable switch. Returns whether to sync.
#[inline]
pub(super) fn take_group(queue: &mut WriteQueue, group: &mut Vec<QueuedWrite>) -> bool {
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use shale_format::write_batch::WriteBatch;

    use super::*;

    fn queued(batch: Option<WriteBatch>, status: u8) -> QueuedWrite {
        QueuedWrite {
            batch,
            sync: false,
            slot: Arc::new(WriterSlot {
                status: AtomicU8::new(status),
                thread: std::thread::current(),
                error: Mutex::new(None),
                insert: AtomicPtr::new(std::ptr::null_mut()),
            }),
        }
    }

    #[test]
    fn an_awake_writer_takes_only_a_lead_handed_and_not_taken() {
        let mut batch = WriteBatch::new();
        batch.put(b"k", b"v").unwrap();
        // Handed (LEADING) and not taken: taken over, and its writer
        // waits again.
        let mut queue = WriteQueue::default();
        queue
            .writers
            .push_back(queued(Some(batch.clone()), LEADING));
        // Not while more writers write than the machine has cores.
        assert!(!take_lead_from_sleeper(&mut queue, cores() + 1));
        assert_eq!(
            queue.writers[0].slot.status.load(Ordering::Relaxed),
            LEADING
        );
        assert!(take_lead_from_sleeper(&mut queue, 1));
        assert_eq!(
            queue.writers[0].slot.status.load(Ordering::Relaxed),
            WAITING
        );
        // Not handed yet (the leader still writes): no.
        assert!(!take_lead_from_sleeper(&mut queue, 1));
        // A memtable switch leads itself.
        let mut queue = WriteQueue::default();
        queue.writers.push_back(queued(None, LEADING));
        assert!(!take_lead_from_sleeper(&mut queue, 1));
        assert_eq!(
            queue.writers[0].slot.status.load(Ordering::Relaxed),
            LEADING
        );
        // An empty queue: nothing to take.
        assert!(!take_lead_from_sleeper(&mut WriteQueue::default(), 1));
    }

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
