//! Direct writes: a writer that does its own work.
//!
//! A write that needs nothing but room (no sync, no memtable switch, no
//! throttle, no background error, a memory-mapped WAL) does not queue
//! behind a leader. Under a short lock of its own (the claim, never the
//! state lock) it takes its sequence numbers and its place in the mapped
//! log: LevelDB's framing depends only on where a record starts and how
//! long it is (`record_end`), so the next record's place is known before
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
//! `Options::direct_writers` are writing (see `DirectWrites::enter`). A
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
//! it keeps happening (`direct_claim::CALM_WRITES`).
//!
//! RocksDB keeps a leader that writes the WAL for its group, even with
//! pipelined or unordered writes (`WriteThread`): its log is a file
//! written with `write(2)`, whose offset only one writer may advance.
//! LevelDB's one writer copies every batch of its group into one record.
//! A mapped, preallocated log lets each writer copy its own record at an
//! offset it reserved, as a ring buffer does.

use std::time::Duration;

use shale_format::log_format::BLOCK_SIZE;
use shale_format::log_writer::write_record_at;
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use super::direct_claim::{Claim, GROUPS_TO_OPEN};
use super::inner::{DbInner, State};
use super::insert::insert_caught;
use super::writer_queue::{stays_awake, Patience};
use crate::kill_point;

/// The log space a claim opens with at least: two blocks. A record that
/// does not fit what the mapped window has left takes the queue, which
/// maps the next window.
const MIN_OPEN_BYTES: u64 = 2 * BLOCK_SIZE as u64;

/// How many times a direct writer yields the processor, waiting for an
/// earlier write to publish, before it sleeps, on a machine without a core
/// to spare for each writer: the earlier writer is most likely preempted
/// in the middle of its copy or insert, and a yield lets it run.
const YIELDS_BEFORE_SLEEP: u32 = 4;

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
            memtable_limit: self.direct_memtable_limit(state),
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
        // On two cores a sleep closes them in every run (the counts:
        // `docs/results/write-path.md`, "What the direct-write tests print").
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
        // On two cores a queued writer soon sleeps, and leads are taken in
        // every run (the counts: `docs/results/write-path.md`, "What the
        // direct-write tests print"); with many cores the writer handed the
        // lead is mostly awake to take it itself.
        if crate::options::available_cores() <= 2 {
            assert!(leads_taken > 0);
        }
    }
}
