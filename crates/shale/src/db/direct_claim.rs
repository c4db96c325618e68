//! The claim of direct writes and the wait for publishing: what the
//! direct writers (`direct_writes.rs`) share, two counters under a short
//! lock of its own and the published sequence's sleepers. It sits below
//! `inner.rs`, which holds it in `DbInner`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crossbeam_utils::CachePadded;
use shale_format::internal_key::SequenceNumber;
use shale_format::log_writer::record_end;

use super::writer_queue::{Patience, SPINS};
use crate::env::DirectRegion;
use crate::memtable::MemTable;

/// How many queue groups in a row must end with no more writers writing
/// than may write directly before the claim opens again. Writers that
/// come and go between direct writes and the queue cost a settle each
/// time, with a wait for the direct writes still in flight: four writers
/// on two cores, which queue, wrote slower when the claim opened whenever
/// one of them found itself alone for a moment
/// (`docs/results/write-path.md`, "Direct writes: each writer copies its
/// own record").
pub(super) const GROUPS_TO_OPEN: u32 = 16;

/// A direct writer that had to sleep waiting for an earlier write to
/// publish (that writer was preempted between its claim and its publish,
/// and every later writer waits with this one) closes the claim: the
/// queue's leader writes for writers that are not running. The claim then
/// opens again after `GROUPS_TO_OPEN << shift` more groups, the shift one
/// more each time the claim closes this way after fewer than
/// [`CALM_WRITES`] direct writes, back to 0 after more, and at most
/// [`MAX_REOPEN_SHIFT`]. Where writers outnumber the cores, direct writers
/// without it wrote at a fraction of the queue's rate, and with it about
/// as fast as the queue (`docs/results/write-path.md`, "Direct writers
/// that sleep close the claim").
pub(super) const CALM_WRITES: u64 = 1 << 16;
/// See [`CALM_WRITES`]: at most 16 << 10 groups between tries.
pub(super) const MAX_REOPEN_SHIFT: u32 = 10;

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
pub(super) struct Claim {
    pub(super) open: bool,
    /// The memtable the writes go to (`State::mem` while open).
    pub(super) mem: Option<Arc<MemTable>>,
    /// Memtable bytes past which writes take the queue: less than
    /// `write_buffer_size` when the claim opened while the previous
    /// memtable was being flushed, so that the queue paces writes to that
    /// flush (`room.rs`).
    pub(super) memtable_limit: usize,
    /// The mapped log space writes are copied into.
    pub(super) region: Option<DirectRegion>,
    /// Where the next record starts in the log.
    pub(super) offset: u64,
    /// The last sequence number given out.
    pub(super) last_sequence: SequenceNumber,
    /// Something was claimed since the claim was opened.
    pub(super) claimed: bool,
    /// Writes claimed since the database opened.
    pub(super) writes: u64,
    /// `writes` when the claim last opened.
    pub(super) writes_at_open: u64,
    /// Queue groups still to go before the claim may open again, after a
    /// direct writer slept ([`CALM_WRITES`]).
    pub(super) groups_to_wait: u64,
    /// The shift of the wait (see [`CALM_WRITES`]).
    pub(super) reopen_shift: u32,
    /// Times a direct writer that slept closed the claim.
    pub(super) closed_by_sleep: u64,
}

/// A write's claim: its first sequence number and its place.
pub(super) struct Claimed {
    pub(super) first: SequenceNumber,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) region: DirectRegion,
    pub(super) mem: *const MemTable,
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
    /// two cores, writers that all wrote directly wrote at a fraction of the
    /// write queue's rate (`docs/results/write-path.md`, "Direct writes:
    /// each writer copies its own record"). The queue's leader writes for
    /// the writers that are not running.
    pub(super) fn enter(&self, most: usize) -> (Active<'_>, bool) {
        let writers = self.active.fetch_add(1, Ordering::Relaxed) + 1;
        (Active(&self.active), writers <= most)
    }

    /// Writers in `DB::write` now, direct or queued.
    pub(super) fn writers(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Claim> {
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
    pub(super) fn claim(&self, len: usize, count: u64, memtable_limit: usize) -> Option<Claimed> {
        let mut claim = self.lock();
        if !claim.open {
            return None;
        }
        let mem = claim.mem.as_ref()?;
        if mem.approximate_memory_usage() > memtable_limit.min(claim.memtable_limit) {
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
    pub(super) fn close_after_sleep(&self) {
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
    pub(super) fn may_reopen(&self) -> bool {
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
    pub(super) fn await_published(
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
    pub(super) fn publish(
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

#[cfg(test)]
mod tests {
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
}
