//! The write path: group commit, the memtable switch and write throttling.
//!
//! A write that needs only room, while few writers write, is written by
//! its own writer without the queue (`direct_writes.rs`); the rest queue here.
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
//! The lead passes to the next writer in the queue by waking it. Until
//! it runs and takes the lead, a writer that comes awake may take the
//! lead instead (`take_lead_from_sleeper`): it leads the group at the
//! front of the queue, which holds the sleeping writer's write, and that
//! writer finds its result when it wakes. Waking a thread takes longer
//! than a group of small writes, and the writers that are running would
//! otherwise wait for it too.
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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use shale_format::internal_key::SequenceNumber;
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use super::inner::{DbInner, State, StateGuard, Wal};
use super::insert::insert_caught;
use super::writer_queue::*;
use crate::kill_point;
use crate::memtable::MemTable;
use crate::options::WriteOptions;

/// The fewest entries a group of sleeping writers must hold for its leader
/// to share the insert with those that happen to be awake. A group whose
/// writers stay awake (a core for each: [`stays_awake`]) always shares:
/// there each follower inserts while the leader does, and since the skip
/// list gives each thread an inserter state of its own, inserts from
/// several cores add up: eight writers on 16 cores wrote faster sharing
/// every group. On two cores the followers sleep and cannot help, and
/// sharing every group made a four-writer fill no faster
/// (`docs/results/write-path.md`, "Writers on 16 cores, again: an inserter
/// per thread (eighth pass)").
const MIN_SHARED_ENTRIES: usize = 64;

impl DbInner {
    pub(super) fn write(&self, options: &WriteOptions, batch: Option<WriteBatch>) -> Result<()> {
        if self.read_only {
            return Err(Error::NotSupported(format!(
                "{}: the database is open read-only",
                self.dir.display()
            )));
        }
        let (_active, may_go_direct) = self.direct.enter(self.options.direct_writers);
        let may_go_direct = may_go_direct && !options.sync;
        let batch = match batch {
            Some(batch) if may_go_direct => match self.write_direct(batch) {
                Ok(result) => return result,
                Err(batch) => Some(batch),
            },
            batch => batch,
        };
        self.write_queued(options, batch, may_go_direct)
    }

    /// The write through the queue (or alone). With `may_leave`, a writer
    /// that comes to lead while the claim of direct writes is open leaves
    /// the queue and writes directly; if that fails (the memtable filled
    /// up meanwhile), it queues again and leads, never leaving twice.
    fn write_queued(
        &self,
        options: &WriteOptions,
        batch: Option<WriteBatch>,
        may_leave: bool,
    ) -> Result<()> {
        let mut state = self.lock_state();
        let batch = match batch {
            Some(batch) if !options.sync && self.may_write_alone(&state) => {
                return self.write_alone(state, batch);
            }
            batch => batch,
        };
        let may_leave = may_leave && batch.is_some();
        let slot = SLOT.with(Arc::clone);
        slot.status.store(WAITING, Ordering::Relaxed);
        state.write_queue.writers.push_back(QueuedWrite {
            batch,
            sync: options.sync,
            slot: slot.clone(),
        });
        // Writers queued ahead of this one, the leader's group aside.
        let patience = Patience::for_queue(state.write_queue.writers.len() - 1, &self.options);
        loop {
            if slot.status.load(Ordering::Acquire) == DONE {
                return slot.result();
            }
            let queue = &mut state.write_queue;
            let queued = queue.writers.iter().any(|w| Arc::ptr_eq(&w.slot, &slot));
            let leads = if !queued {
                // In a group that is being written: its result comes.
                false
            } else if !queue.leading {
                // No leader: the queue held no one else.
                true
            } else if queue.lead_taken {
                false
            } else if queue
                .writers
                .front()
                .is_some_and(|f| Arc::ptr_eq(&f.slot, &slot))
            {
                // The lead was handed to this writer.
                true
            } else if take_lead_from_sleeper(queue, self.direct.writers()) {
                queue.leads_taken += 1;
                true
            } else {
                false
            };
            if !leads {
                drop(state);
                loop {
                    match slot.wait(patience) {
                        DONE => return slot.result(),
                        INSERT => slot.help(),
                        _ => break,
                    }
                }
                state = self.lock_state();
                match slot.status.load(Ordering::Acquire) {
                    LEADING => {}
                    DONE => return slot.result(),
                    // A writer that was awake took the lead this one was
                    // handed, and writes its batch in its group.
                    _ => continue,
                }
                // The claim opened while this writer waited: it leaves the
                // queue to the writers behind it and writes directly.
                if may_leave && self.direct.is_open() {
                    if let Some(batch) = state.write_queue.writers.pop_front().and_then(|w| w.batch)
                    {
                        wake_next_leader(&mut state);
                        drop(state);
                        return match self.write_direct(batch) {
                            Ok(result) => result,
                            Err(batch) => self.write_queued(options, Some(batch), false),
                        };
                    }
                }
            }

            // This writer leads the group at the front of the queue (its
            // own, or one whose leader was still asleep), and the queue
            // owns the log and the memtable (`direct_writes.rs`).
            state.write_queue.leading = true;
            state.write_queue.lead_taken = true;
            let (force_switch, write_bytes) = match state.write_queue.writers.front() {
                Some(front) => (
                    front.batch.is_none(),
                    front.batch.as_ref().map_or(0, WriteBatch::approximate_size),
                ),
                None => {
                    return Err(Error::Internal(
                        "a write queue leader without a write".into(),
                    ))
                }
            };
            self.settle_direct(&mut state);
            let (guard, room) = self.make_room_for_write(state, force_switch, write_bytes);
            state = guard;
            if let Err(err) = room {
                let front = state.write_queue.writers.pop_front();
                wake_next_leader(&mut state);
                match front {
                    Some(front) if !Arc::ptr_eq(&front.slot, &slot) => {
                        front.slot.finish(&Err(err));
                        continue;
                    }
                    _ => return Err(err),
                }
            }
            let (result, own_done) = GROUP.with(|group| {
                let mut group = group.borrow_mut();
                let result = self.write_group(state, &mut group, &slot);
                let mut own_done = false;
                for write in group.drain(..) {
                    if Arc::ptr_eq(&write.slot, &slot) {
                        own_done = true;
                    } else {
                        write.slot.finish(&result);
                    }
                }
                (result, own_done)
            });
            if own_done {
                return result;
            }
            // It led a group that did not reach its own write: it waits
            // (or leads) again.
            state = self.lock_state();
        }
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
        leader: &WriterSlot,
    ) -> Result<()> {
        let sync = take_group(&mut state.write_queue, group);
        if group.iter().all(|w| w.batch.is_none()) {
            // A memtable switch: nothing to write.
            wake_next_leader(&mut state);
            self.reopen_direct(&mut state);
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
            self.insert_group(&mem, group, leader)
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
        self.reopen_direct(&mut state);
        result
    }

    /// Whether a writer may write its batch alone ([`DbInner::write_alone`]):
    /// no writer leads or waits, and the memtable has room with nothing
    /// to wait for (what `make_room_for_write` would find at once).
    fn may_write_alone(&self, state: &State) -> bool {
        let queue = &state.write_queue;
        !queue.leading && queue.writers.is_empty() && self.has_room_now(state)
    }

    /// Writes the batch of a writer that found no other writer (a group
    /// of one without the group: no queue entry, no slot, no shared
    /// insert, which a writer alone paid for: `docs/results/write-path.md`,
    /// "Four writers on two cores, ninth pass").
    /// It leads while it writes, so writers that come meanwhile queue and
    /// the first of them leads next. Never for a synced write, which
    /// takes the queue (the sync of the retired WAL and of the
    /// directory are there).
    /// REQUIRES: [`DbInner::may_write_alone`].
    fn write_alone<'a>(&'a self, mut state: StateGuard<'a>, mut batch: WriteBatch) -> Result<()> {
        state.write_queue.leading = true;
        state.write_queue.lead_taken = true;
        self.settle_direct(&mut state);
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
        self.reopen_direct(&mut state);
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
    fn insert_group(
        &self,
        mem: &MemTable,
        group: &[QueuedWrite],
        leader: &WriterSlot,
    ) -> Result<()> {
        if group.is_empty() {
            return Ok(());
        }
        let insert = GroupInsert {
            mem,
            group,
            next: AtomicUsize::new(0),
            failed: Mutex::new(None),
            leader: &leader.thread,
        };
        // The writers of the group but the one that leads it (which may
        // be any of them, or, for a group whose leader was asleep, none).
        let is_follower = |w: &&QueuedWrite| !std::ptr::eq(Arc::as_ptr(&w.slot), leader);
        let followers = group.iter().filter(is_follower).count();
        let entries: usize = group
            .iter()
            .filter_map(|w| w.batch.as_ref())
            .map(|b| b.count() as usize)
            .sum();
        let shared = self.options.concurrent_memtable_writes
            && (entries >= MIN_SHARED_ENTRIES || stays_awake(followers, &self.options));
        let offered = if shared { followers } else { 0 };
        for follower in group.iter().filter(is_follower).take(offered) {
            follower.slot.offer(&insert);
        }
        insert.help();
        // Every batch is claimed; `insert` stays in place until no
        // follower helps.
        let patience = Patience::for_queue(offered, &self.options);
        for follower in group.iter().filter(is_follower).take(offered) {
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

/// Tells the writer now at the front of the queue that it leads the next
/// group; with none, the next writer to come leads.
fn wake_next_leader(state: &mut State) {
    let queue = &mut state.write_queue;
    queue.lead_taken = false;
    match queue.writers.front() {
        Some(next) => next.slot.set(LEADING),
        None => queue.leading = false,
    }
}
