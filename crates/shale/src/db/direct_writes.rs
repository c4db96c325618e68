//! Direct writes: a writer that does its own work.
//!
//! A write that needs nothing but room (no sync, no memtable switch, no
//! throttle, no background error, a memory-mapped WAL) does not queue
//! behind a leader. Under a short lock of its own (the claim, never the
//! state lock) it takes its sequence numbers and its place in the mapped
//! log: LevelDB's framing depends only on where a record starts and how
//! long it is ([`record_end`]), so the next record's place is known before
//! this one is copied. Then, with no lock held, the writer frames its own
//! record into its place ([`write_record_at`]), inserts its own batch into
//! the memtable (the skip list takes concurrent inserts) and publishes its
//! sequence numbers once every earlier write has published its own, so a
//! reader or a snapshot never sees a later write without an earlier one.
//! Each write's data and state stay on its writer's core; what writers
//! share is the claim (two counters) and the published sequence.
//!
//! A writer returns after it publishes, and it publishes after every
//! earlier write is copied and inserted: an acknowledged write has no hole
//! before it in the log. A crash can leave holes only after the last
//! acknowledged write: a record claimed and not yet copied reads as a zero
//! header, which LevelDB's reader and ours skip to the end of its block,
//! and a later record in that block, never acknowledged, is skipped with
//! it (`docs/format/log.md`).
//!
//! Everything else takes the write queue of `write.rs`: synced writes
//! (their group sync is there), memtable switches, throttled writes, a log
//! that is not mapped, and every write while more writers than
//! `Options::direct_writers` are writing (see [`DirectWrites::enter`]). A
//! writer that leads a group first closes the claim and *settles*: it
//! waits until every direct write has published, and moves the WAL
//! writer's end past their records. The queue's writers then own the log
//! and the memtable as before. Once enough groups in a row have ended
//! with no more writers writing than may go direct, the last one's leader
//! opens the claim again, at the log's new end, and the writers still
//! queued leave the queue for it one by one as each comes to lead. The
//! claim is also closed by a background error and by a version that puts
//! L0 at the slowdown trigger (`install_version`), so that such writes
//! meet the error or the throttle in the queue; and by a direct writer
//! that had to sleep until an earlier write published, a sign that writers
//! are preempted between claim and publish (the machine's cores are busy
//! with more than the writers), for a number of groups that doubles while
//! it keeps happening ([`CALM_WRITES`]).
//!
//! RocksDB keeps a leader that writes the WAL for its group, even with
//! pipelined or unordered writes (`WriteThread`): its log is a file
//! written with `write(2)`, whose offset only one writer may advance.
//! LevelDB's one writer copies every batch of its group into one record.
//! A mapped, preallocated log lets each writer copy its own record at an
//! offset it reserved, as a ring buffer does.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use shale_format::internal_key::SequenceNumber;
use shale_format::log_format::BLOCK_SIZE;
use shale_format::log_writer::{record_end, write_record_at};
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use super::inner::{DbInner, State};
use super::insert::insert_caught;
use super::writer_queue::{stays_awake, Patience, SPINS};
use crate::env::DirectRegion;
use crate::kill_point;
use crate::memtable::MemTable;

/// The log space a claim opens with at least: two blocks. A record that
/// does not fit what the mapped window has left takes the queue, which
/// maps the next window.
const MIN_OPEN_BYTES: u64 = 2 * BLOCK_SIZE as u64;

/// How many queue groups in a row must end with no more writers writing
/// than may write directly before the claim opens again. Writers that
/// come and go between direct writes and the queue cost a settle each
/// time, with a wait for the direct writes still in flight: four writers
/// on two cores, which queue, wrote 4 % slower when the claim opened
/// whenever one of them found itself alone for a moment (1.7 % of their
/// writes went direct; `docs/results/write-path.md`).
const GROUPS_TO_OPEN: u32 = 16;

/// A direct writer that had to sleep waiting for an earlier write to
/// publish (that writer was preempted between its claim and its publish,
/// and every later writer waits with this one) closes the claim: the
/// queue's leader writes for writers that are not running. The claim then
/// opens again after `GROUPS_TO_OPEN << shift` more groups, the shift one
/// more each time the claim closes this way after fewer than
/// [`CALM_WRITES`] direct writes, back to 0 after more, and at most
/// [`MAX_REOPEN_SHIFT`]. Two writers on two cores with
/// `--direct_writers=2` wrote 32-byte puts at 8.5 MB/s before, 40.1 MB/s
/// with this (medians of 3); with every writer allowed direct, four wrote
/// at 13 MB/s before, 47.3 after (`docs/results/write-path.md`).
const CALM_WRITES: u64 = 1 << 16;
/// See [`CALM_WRITES`]: at most 16 << 10 groups between tries.
const MAX_REOPEN_SHIFT: u32 = 10;

/// How many times a direct writer yields the processor, waiting for an
/// earlier write to publish, before it sleeps, on a machine without a core
/// to spare for each writer: the earlier writer is most likely preempted
/// in the middle of its copy or insert, and a yield lets it run.
const YIELDS_BEFORE_SLEEP: u32 = 4;

/// The claim and the wait for publishing, shared by the direct writers.
/// Every direct write changes `active` twice and takes the claim's lock
/// once, and looks at `sleepers` when it publishes: each on a cache line of
/// its own, so that writers on other cores counting themselves in and out
/// do not take the claim's line away from the one claiming.
#[derive(Default)]
pub(crate) struct DirectWrites {
    /// Writers in `DB::write` now, direct or queued.
    active: CachePadded<AtomicUsize>,
    /// A leaf lock: nothing is taken while it is held.
    claim: CachePadded<Mutex<Claim>>,
    /// Direct writers asleep until an earlier write publishes.
    sleepers: CachePadded<AtomicUsize>,
    sleep: Mutex<()>,
    published: Condvar,
}

/// What the next direct write takes: its sequence numbers, its place in
/// the log. Open only while the write queue is idle.
#[derive(Default)]
struct Claim {
    open: bool,
    /// The memtable the writes go to (`State::mem` while open).
    mem: Option<Arc<MemTable>>,
    /// The mapped log space writes are copied into.
    region: Option<DirectRegion>,
    /// Where the next record starts in the log.
    offset: u64,
    /// The last sequence number given out.
    last_sequence: SequenceNumber,
    /// Something was claimed since the claim was opened.
    claimed: bool,
    /// Writes claimed since the database opened.
    writes: u64,
    /// `writes` when the claim last opened.
    writes_at_open: u64,
    /// Queue groups still to go before the claim may open again, after a
    /// direct writer slept ([`CALM_WRITES`]).
    groups_to_wait: u64,
    /// The shift of the wait (see [`CALM_WRITES`]).
    reopen_shift: u32,
    /// Times a direct writer that slept closed the claim.
    closed_by_sleep: u64,
}

/// A write's claim: its first sequence number and its place.
struct Claimed {
    first: SequenceNumber,
    start: u64,
    end: u64,
    region: DirectRegion,
    mem: *const MemTable,
}

/// A writer counted in [`DirectWrites::active`] until it drops.
pub(super) struct Active<'a>(&'a AtomicUsize);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl DirectWrites {
    /// Counts a writer in until the guard drops; true when it may write
    /// directly: the writers number at most `most`
    /// (`Options::direct_writers`). By default that leaves a core for the
    /// flush and compactions and one to spare. A direct write
    /// publishes only after every earlier one, so a writer that the
    /// scheduler preempts between its claim and its publish holds up
    /// every later writer until it runs again, a time slice or more. With
    /// a core for each writer that is rare; without, it is the rule: on
    /// two cores, two writers wrote at 0.29x of the write queue's rate
    /// directly, four at 0.31x (`docs/results/write-path.md`). The queue's
    /// leader writes for the writers that are not running.
    pub(super) fn enter(&self, most: usize) -> (Active<'_>, bool) {
        let writers = self.active.fetch_add(1, Ordering::Relaxed) + 1;
        (Active(&self.active), writers <= most)
    }

    /// Writers in `DB::write` now, direct or queued.
    pub(super) fn writers(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Claim> {
        self.claim.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the claim is open.
    pub(super) fn is_open(&self) -> bool {
        self.lock().open
    }

    /// Closes the claim: writes take the queue until it is opened again.
    /// Writes claimed already go on; the next leader settles them.
    pub(super) fn close(&self) {
        self.lock().open = false;
    }

    /// Claims `count` sequence numbers and room for a record of `len`
    /// bytes, if the claim is open, the memtable has room and the record
    /// fits the mapped log space.
    fn claim(&self, len: usize, count: u64, memtable_limit: usize) -> Option<Claimed> {
        let mut claim = self.lock();
        if !claim.open {
            return None;
        }
        let mem = claim.mem.as_ref()?;
        if mem.approximate_memory_usage() > memtable_limit {
            return None;
        }
        let mem: *const MemTable = Arc::as_ptr(mem);
        let region = claim.region?;
        let start = claim.offset;
        let end = record_end(start, len);
        if end > region.end {
            return None;
        }
        let first = claim.last_sequence + 1;
        claim.last_sequence += count;
        claim.offset = end;
        claim.claimed = true;
        claim.writes += 1;
        Some(Claimed {
            first,
            start,
            end,
            region,
            mem,
        })
    }

    /// Closes the claim because a direct writer slept waiting for an
    /// earlier one, and sets how long it stays closed ([`CALM_WRITES`]).
    fn close_after_sleep(&self) {
        let mut claim = self.lock();
        if !claim.open {
            return;
        }
        claim.open = false;
        claim.reopen_shift = if claim.writes - claim.writes_at_open >= CALM_WRITES {
            0
        } else {
            (claim.reopen_shift + 1).min(MAX_REOPEN_SHIFT)
        };
        claim.groups_to_wait = u64::from(GROUPS_TO_OPEN) << claim.reopen_shift;
        claim.closed_by_sleep += 1;
    }

    /// Times a direct writer that slept closed the claim, since open.
    pub(super) fn closed_by_sleep(&self) -> u64 {
        self.lock().closed_by_sleep
    }

    /// Counts a queue group that would open the claim again: false while
    /// the claim must stay closed after a direct writer slept.
    fn may_reopen(&self) -> bool {
        let mut claim = self.lock();
        if claim.groups_to_wait == 0 {
            return true;
        }
        claim.groups_to_wait -= 1;
        false
    }

    /// Waits until the writes up to `sequence` are published: spins, then
    /// yields as `patience` allows, then sleeps until a publish wakes it.
    /// True when it slept.
    fn await_published(
        &self,
        published: &AtomicU64,
        sequence: SequenceNumber,
        patience: Patience,
    ) -> bool {
        let done = || published.load(Ordering::Acquire) >= sequence;
        for _ in 0..SPINS {
            if done() {
                return false;
            }
            std::hint::spin_loop();
        }
        let mut yielded = (0, 0, None);
        while !done() {
            if !patience.yield_once(&mut yielded) {
                break;
            }
        }
        if done() {
            return false;
        }
        let mut guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        // Counted before looking again, and looked at after the count
        // (both sequentially consistent): a publisher that finds no
        // sleeper stored its sequence before this look.
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while published.load(Ordering::SeqCst) < sequence {
            guard = self
                .published
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        true
    }

    /// Publishes `first..=last` once every earlier write has published;
    /// true when it slept waiting for them.
    fn publish(
        &self,
        published: &AtomicU64,
        first: SequenceNumber,
        last: SequenceNumber,
        patience: Patience,
    ) -> bool {
        let slept = self.await_published(published, first - 1, patience);
        published.store(last, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
            self.published.notify_all();
        }
        slept
    }
}

impl DbInner {
    /// Writes `batch` directly if the claim is open and it fits (see the
    /// module comment): `Ok` with the write's result, or the batch back
    /// for the write queue.
    pub(super) fn write_direct(
        &self,
        mut batch: WriteBatch,
    ) -> std::result::Result<Result<()>, WriteBatch> {
        let count = u64::from(batch.count());
        if count == 0 {
            // Takes no sequence number: the queue logs it.
            return Err(batch);
        }
        let Some(claimed) =
            self.direct
                .claim(batch.data().len(), count, self.options.write_buffer_size)
        else {
            return Err(batch);
        };
        batch.set_sequence(claimed.first);
        let region = claimed.region;
        // SAFETY: `start..end` lies in the region (`claim` checked `end`;
        // `start` is at or past the region's start, where the claim opened),
        // and no other writer claimed any byte of it. The mapping stays in
        // place, and the memtable alive, until the claim is settled, which
        // waits for this write to publish.
        let (dst, mem) = unsafe {
            let at = region
                .base
                .add((claimed.start - region.base_offset) as usize);
            let dst = std::slice::from_raw_parts_mut(at, (claimed.end - claimed.start) as usize);
            (dst, &*claimed.mem)
        };
        write_record_at(dst, claimed.start, batch.data());
        kill_point::maybe_kill(kill_point::WAL_WRITTEN_BEFORE_MEMTABLE);
        let result = insert_caught(mem, &batch);
        let last = claimed.first + count - 1;
        let slept = self.direct.publish(
            &self.published_sequence,
            claimed.first,
            last,
            self.direct_patience(),
        );
        if slept && self.options.direct_writers_back_off {
            self.direct.close_after_sleep();
        }
        if let Err(err) = &result {
            // Logged but not in the memtable: writes stop.
            self.record_wal_error(&mut self.lock_state(), err);
        }
        Ok(result)
    }

    /// How a direct writer waits for an earlier one: awake where the
    /// machine has cores to spare, else a few yields and then sleep.
    fn direct_patience(&self) -> Patience {
        if stays_awake(1, &self.options) {
            Patience::StayAwake {
                most: Duration::from_micros(self.options.write_thread_max_yield_usec),
                slow: Duration::from_micros(self.options.write_thread_slow_yield_usec),
            }
        } else {
            Patience::Yields(YIELDS_BEFORE_SLEEP)
        }
    }

    /// Closes the claim and settles the direct writes: waits until each
    /// has published, then takes their sequence numbers and records into
    /// the state and the WAL writer. After this the write queue owns the
    /// log and the memtable. REQUIRES: the state lock (held throughout:
    /// direct writers never take it before they publish).
    pub(super) fn settle_direct(&self, state: &mut State) {
        let (claimed, offset, last) = {
            let mut claim = self.direct.lock();
            claim.open = false;
            claim.mem = None;
            claim.region = None;
            let claimed = std::mem::take(&mut claim.claimed);
            (claimed, claim.offset, claim.last_sequence)
        };
        if !claimed {
            return;
        }
        self.direct
            .await_published(&self.published_sequence, last, self.direct_patience());
        state.last_sequence = state.last_sequence.max(last);
        state.write_queue.allocated = state.write_queue.allocated.max(last);
        let moved = match state.log.as_mut() {
            Some(log) => log
                .get_mut()
                .advance_to(offset)
                .map(|()| log.skip_to(offset)),
            None => Err(std::io::Error::other(
                "no WAL while direct writes were open",
            )),
        };
        if let Err(err) = moved {
            let err = Error::Internal(format!("settling direct writes: {err}"));
            self.record_wal_error(state, &err);
        }
    }

    /// At the end of a queue group: opens the claim again once enough
    /// groups in a row ended with no more writers writing than may write
    /// directly ([`GROUPS_TO_OPEN`]). Writers still queued leave the queue
    /// for the claim as each comes to lead (`write.rs`).
    /// REQUIRES: the state lock.
    pub(super) fn reopen_direct(&self, state: &mut State) {
        let most = self.options.direct_writers;
        let queue = &mut state.write_queue;
        if self.direct.writers() > most {
            queue.direct_streak = 0;
            return;
        }
        queue.direct_streak = queue.direct_streak.saturating_add(1);
        if queue.direct_streak >= GROUPS_TO_OPEN && self.direct.may_reopen() {
            self.open_direct(state);
        }
    }

    /// Opens the claim at the WAL's end, if writes may go direct: the
    /// option is on, the memtable has room with nothing to wait for, the
    /// WAL is mapped and in the state (no leader has it out), and no
    /// pipelined group is inserting. True when it is open (it may have
    /// been already). REQUIRES: the state lock.
    fn open_direct(&self, state: &mut State) -> bool {
        if self.direct.is_open() {
            return true;
        }
        if self.options.direct_writers == 0
            || self.read_only
            || self.shutting_down()
            || state.write_queue.in_flight > 0
            || !self.has_room_now(state)
        {
            return false;
        }
        // Writes claimed before a close (a version at the slowdown
        // trigger, an error) are taken into the state first.
        self.settle_direct(state);
        let last_sequence = state.last_sequence.max(state.write_queue.allocated);
        let Some(log) = state.log.as_mut() else {
            return false;
        };
        // A log that cannot reserve the room (a full disk) or is not
        // mapped: the queue writes, and reports what it finds.
        let Ok(Some(region)) = log.get_mut().direct_region(MIN_OPEN_BYTES) else {
            return false;
        };
        debug_assert_eq!(region.start, log.file_len());
        let mut claim = self.direct.lock();
        *claim = Claim {
            open: true,
            mem: Some(state.mem.clone()),
            region: Some(region),
            offset: region.start,
            last_sequence,
            claimed: false,
            writes: claim.writes,
            writes_at_open: claim.writes,
            groups_to_wait: 0,
            reopen_shift: claim.reopen_shift,
            closed_by_sleep: claim.closed_by_sleep,
        };
        true
    }

    /// Writes written directly since the database opened.
    pub(crate) fn direct_writes(&self) -> u64 {
        self.direct.lock().writes
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{DirectWrites, CALM_WRITES, GROUPS_TO_OPEN, MAX_REOPEN_SHIFT};

    /// Opens the claim as `open_direct` would, as to the counts.
    fn open(direct: &DirectWrites) {
        let mut claim = direct.lock();
        claim.open = true;
        claim.writes_at_open = claim.writes;
        claim.groups_to_wait = 0;
    }

    /// Groups the claim waits for after a sleep closed it.
    fn groups_until_open(direct: &DirectWrites) -> u64 {
        let mut groups = 0;
        while !direct.may_reopen() {
            groups += 1;
        }
        groups
    }

    #[test]
    fn a_sleep_closes_the_claim_for_longer_while_sleeps_keep_coming() {
        let direct = DirectWrites::default();
        // A claim that is not open stays as it is.
        direct.close_after_sleep();
        assert_eq!(direct.lock().closed_by_sleep, 0);
        assert!(direct.may_reopen());
        let base = u64::from(GROUPS_TO_OPEN);
        for shift in 1..=MAX_REOPEN_SHIFT + 2 {
            open(&direct);
            direct.lock().writes += 10;
            direct.close_after_sleep();
            assert!(!direct.is_open());
            let expected = base << shift.min(MAX_REOPEN_SHIFT);
            assert_eq!(groups_until_open(&direct), expected, "close {shift}");
        }
        // A long calm stretch of direct writes: the next sleep waits the
        // least again.
        open(&direct);
        direct.lock().writes += CALM_WRITES;
        direct.close_after_sleep();
        assert_eq!(groups_until_open(&direct), base);
        assert_eq!(
            direct.lock().closed_by_sleep,
            u64::from(MAX_REOPEN_SHIFT) + 3
        );
    }

    use crate::{Options, ReadOptions, WriteBatch, WriteOptions, DB};

    fn key(thread: usize, i: usize) -> Vec<u8> {
        format!("{thread:02}-{i:06}").into_bytes()
    }

    /// Writers on several threads, with synced writes, deletes and empty
    /// batches among them (those take the queue) and memtables small
    /// enough to switch dozens of times: every write is read back, also
    /// after a reopen, and the directory verifies.
    fn write_and_check(direct_writers: usize) -> u64 {
        write_and_check_with(direct_writers, 4, false).0
    }

    /// As `write_and_check` (which keeps direct writers direct, preempted
    /// or not), with `writers` threads and `back_off` as
    /// `Options::direct_writers_back_off`; also returns how many leads were
    /// taken from sleeping writers, and how many times a direct writer that
    /// slept closed direct writes.
    fn write_and_check_with(
        direct_writers: usize,
        writers: usize,
        back_off: bool,
    ) -> (u64, u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let options = Options {
            create_if_missing: true,
            write_buffer_size: 64 << 10,
            direct_writers,
            direct_writers_back_off: back_off,
            ..Options::default()
        };
        let db = Arc::new(DB::open(&path, options.clone()).unwrap());
        let threads: Vec<_> = (0..writers)
            .map(|thread| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..3_000 {
                        let sync = WriteOptions { sync: i % 500 == 0 };
                        let value = vec![thread as u8; 10 + i % 90];
                        db.put(&sync, &key(thread, i), &value).unwrap();
                        if i % 7 == 0 {
                            db.delete(&WriteOptions::default(), &key(thread, i))
                                .unwrap();
                        }
                        if i % 1_000 == 0 {
                            db.write(&WriteOptions::default(), WriteBatch::new())
                                .unwrap();
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let direct = db.inner.direct_writes();
        let leads_taken = db.inner.lock_state().write_queue.leads_taken;
        let closed_by_sleep = db.inner.direct.closed_by_sleep();
        let check = |db: &DB| {
            for thread in 0..writers {
                for i in 0..3_000 {
                    let expected = (i % 7 != 0).then(|| vec![thread as u8; 10 + i % 90]);
                    let got = db.get(&ReadOptions::new(), &key(thread, i)).unwrap();
                    assert_eq!(got, expected, "thread {thread}, write {i}");
                }
            }
        };
        check(&db);
        drop(db);
        crate::verify::verify_db(&path, &options).unwrap();
        check(&DB::open(&path, options).unwrap());
        (direct, leads_taken, closed_by_sleep)
    }

    #[test]
    fn direct_writes_are_read_back_after_switches_and_a_reopen() {
        // More writers than this machine may have cores: they all go
        // direct, preempted or not.
        let direct = write_and_check(8);
        // Most of the 12,000 puts and 1,716 deletes; synced writes and
        // the writes that meet a full memtable take the queue.
        assert!(direct > 6_000, "{direct} writes went direct");
    }

    #[test]
    fn preempted_direct_writers_back_off_to_the_queue_and_lose_nothing() {
        // As above, with the default back-off: where writers are
        // preempted (more of them than cores), one that sleeps waiting for
        // an earlier one closes direct writes for a while, and the queue
        // writes meanwhile.
        let (direct, _, closed_by_sleep) = write_and_check_with(8, 4, true);
        eprintln!("{direct} writes went direct, closed {closed_by_sleep} times by a sleep");
        assert!(direct > 0);
        // 5 to 8 closes per run in 9 runs on the 2-core development
        // machine.
        if crate::options::available_cores() <= 2 {
            assert!(closed_by_sleep > 0);
        }
    }

    #[test]
    fn with_direct_writes_off_every_write_takes_the_queue() {
        assert_eq!(write_and_check(0), 0);
    }

    #[test]
    fn two_writers_in_the_queue_take_each_others_leads_and_lose_nothing() {
        // Two writers are at most the cores of any machine this runs on,
        // so a lead handed to one that has not woken yet may be taken by
        // the other (`take_lead_from_sleeper`); its write is then done in
        // the taker's group. Synced writes, deletes, empty batches and
        // memtable switches among them, as above.
        let (direct, leads_taken, _) = write_and_check_with(0, 2, true);
        assert_eq!(direct, 0);
        eprintln!("leads taken from sleeping writers: {leads_taken}");
        // On two cores a queued writer soon sleeps, and leads are taken
        // (8 to 45 times per run of this test in 10 runs on the 2-core
        // development machine); with many cores the writer handed the
        // lead is mostly awake to take it itself.
        if crate::options::available_cores() <= 2 {
            assert!(leads_taken > 0);
        }
    }
}
