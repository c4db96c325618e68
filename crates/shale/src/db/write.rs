//! The write path: group commit, the memtable switch and write throttling.
//!
//! Writers queue up; the one at the front leads: it makes room (maybe
//! switching to a new memtable and WAL), merges the batches of the writers
//! behind it into one, takes the WAL writer out of the state, and — without
//! the state lock — appends one record, syncs once if any writer asked, and
//! inserts into the memtable. Then it publishes the new last sequence and
//! wakes the writers it served.

use std::sync::{Arc, Condvar, MutexGuard};
use std::time::{Duration, Instant};

use shale_format::internal_key::ValueType;
use shale_format::log_writer::LogWriter;
use shale_format::write_batch::{BatchOp, WriteBatch};
use shale_format::{Error, Result};

use super::{DbInner, State};
use crate::compaction::priority;
use crate::filename;
use crate::kill_point;
use crate::memtable::MemTable;
use crate::options::WriteOptions;

/// A queued write.
pub(crate) struct PendingWrite {
    /// `None` asks only for a memtable switch (used by flush).
    batch: Option<WriteBatch>,
    sync: bool,
    /// Signalled when this write is done or its writer leads: each writer
    /// is woken on its own, not with every flush and compaction.
    wakeup: Arc<Condvar>,
}

thread_local! {
    /// A thread has at most one write queued: its wake-up is reused.
    static WAKEUP: Arc<Condvar> = Arc::new(Condvar::new());
}

/// Largest group a leader builds, in bytes of batch data.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// The shortest sleep the write throttle takes: the delay owed by writes
/// under the compaction debt is summed until it reaches this much, RocksDB's
/// refill period for its delayed-write rate. The total delay is the same
/// whatever this is; shorter sleeps hit more writes (100 us sleeps put
/// 0.27 % of a 5M x 256 B fill's writes above 100 us: P99.9 196 us,
/// `docs/benchmarks.md`, "Scheduler").
const MIN_DELAY_SLEEP: Duration = Duration::from_millis(1);

impl DbInner {
    pub(super) fn write(&self, options: &WriteOptions, batch: Option<WriteBatch>) -> Result<()> {
        let force_switch = batch.is_none();
        let wakeup = WAKEUP.with(Arc::clone);
        let mut state = self.lock_state();
        let id = state.next_writer_id;
        state.next_writer_id += 1;
        state.writers.push_back(id);
        state.pending_writes.insert(
            id,
            PendingWrite {
                batch,
                sync: options.sync,
                wakeup: wakeup.clone(),
            },
        );
        loop {
            if let Some(result) = state.finished_writes.remove(&id) {
                return result;
            }
            if state.writers.front() == Some(&id) {
                break;
            }
            state = self.wait(&wakeup, state);
        }

        // This writer leads.
        let write_bytes = state
            .pending_writes
            .get(&id)
            .and_then(|w| w.batch.as_ref())
            .map_or(0, WriteBatch::approximate_size);
        let (guard, room) = self.make_room_for_write(state, force_switch, write_bytes);
        state = guard;
        let (group, last_id, sync) = match room {
            Ok(()) => self.build_group(&mut state),
            Err(err) => {
                state.writers.pop_front();
                state.pending_writes.remove(&id);
                wake_next_leader(&state);
                return Err(err);
            }
        };
        let mut result = Ok(());
        if let Some(mut batch) = group {
            let first_sequence = state.last_sequence + 1;
            batch.set_sequence(first_sequence);
            let last_sequence = state.last_sequence + u64::from(batch.count());
            let mem = state.mem.clone();
            let mut log = state.log.take();
            let wal_name = format!("{:06}.log", state.log_number);
            // Once synced, the retired WAL needs no more syncs: it is dropped.
            let retired = if sync { state.retired_log.take() } else { None };
            drop(state);
            result = sync_retired_wal(retired)
                .and_then(|()| {
                    append_to_wal(log.as_mut(), &batch, sync).map_err(|e| e.in_file(&wal_name))
                })
                .and_then(|()| {
                    kill_point::maybe_kill(kill_point::WAL_WRITTEN_BEFORE_MEMTABLE);
                    insert_into(&mem, &batch)
                });
            state = self.lock_state();
            // Used up even when the write failed: its record may be in the
            // WAL, and no later write may share its sequence numbers.
            state.last_sequence = last_sequence;
            match &result {
                Ok(()) => state.log = log,
                // The WAL may now end in a torn record or hold one we could
                // not acknowledge: it is dropped, never appended to again,
                // and writes stop until a new one replaces it (`resume.rs`).
                Err(err) => self.record_wal_error(&mut state, err),
            }
        }
        // Hand the result to every writer in the group and wake each; then
        // the next leader. A lone writer wakes nobody.
        while let Some(writer) = state.writers.pop_front() {
            let served = state.pending_writes.remove(&writer);
            if writer != id {
                state.finished_writes.insert(writer, result.clone());
                if let Some(served) = served {
                    served.wakeup.notify_one();
                }
            }
            if writer == last_id {
                break;
            }
        }
        wake_next_leader(&state);
        result
    }

    /// Merges the batches of the queued writers into one, starting with the
    /// leader's. Stops before a sync write when the leader does not sync (its
    /// caller did not ask to wait for a sync) and at the size limit. Returns
    /// the merged batch, the id of the last writer included and whether to
    /// sync.
    fn build_group(&self, state: &mut State) -> (Option<WriteBatch>, u64, bool) {
        let leader = state.writers.front().copied().unwrap_or_default();
        let (mut group, sync) = match state.pending_writes.get_mut(&leader) {
            Some(w) => (w.batch.take(), w.sync),
            None => (None, false),
        };
        let mut last = leader;
        let Some(first) = group.as_ref() else {
            return (None, leader, sync);
        };
        // A small leader should not wait behind a huge group.
        let limit = if first.approximate_size() <= 128 << 10 {
            first.approximate_size() + (128 << 10)
        } else {
            MAX_GROUP_BYTES
        };
        let followers: Vec<u64> = state.writers.iter().skip(1).copied().collect();
        for writer in followers {
            let Some(pending) = state.pending_writes.get_mut(&writer) else {
                break;
            };
            if pending.sync && !sync {
                break;
            }
            let Some(batch) = pending.batch.as_ref() else {
                break; // a memtable switch request leads its own group
            };
            let merged = group.as_mut().map(|g| {
                if g.approximate_size() + batch.approximate_size() > limit {
                    return false;
                }
                g.append(batch).is_ok()
            });
            if merged != Some(true) {
                break;
            }
            pending.batch = None;
            last = writer;
        }
        (group, last, sync)
    }

    /// Makes sure the memtable has room, throttling when L0 is backed up
    /// (LevelDB's `MakeRoomForWrite`, with a rate-based delay instead of its
    /// 1 ms sleep). With `force`, switches to a new memtable whenever the
    /// current one holds anything. Takes and returns the state lock because
    /// it may wait.
    /// REQUIRES: the caller leads the write queue.
    fn make_room_for_write<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        mut force: bool,
        write_bytes: usize,
    ) -> (MutexGuard<'a, State>, Result<()>) {
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
                    l0_drain_rate: self.l0_drain_rate(),
                };
                state.owed_delay += priority::write_delay(write_bytes.max(1), &debt, options);
                if state.owed_delay < MIN_DELAY_SLEEP {
                    continue;
                }
                let owed = std::mem::take(&mut state.owed_delay);
                let started = Instant::now();
                drop(state);
                std::thread::sleep(owed);
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

    /// Creates WAL `number` and makes its name durable: a synced write to
    /// it must survive a power loss.
    pub(super) fn create_wal(&self, number: u64) -> Result<Box<dyn crate::env::WritableFile>> {
        let path = filename::log_file_name(&self.dir, number);
        let file = self.options.env.new_writable_file(&path)?;
        if let Err(err) = self.options.env.sync_dir(&self.dir) {
            drop(file);
            let _ = self.options.env.remove_file(&path);
            return Err(err);
        }
        Ok(file)
    }

    /// Starts a new memtable writing to WAL `number` (`file`, from
    /// [`DbInner::create_wal`]); the old memtable becomes immutable and the
    /// flush thread is woken.
    pub(super) fn switch_memtable(
        &self,
        state: &mut State,
        number: u64,
        file: Box<dyn crate::env::WritableFile>,
    ) {
        // Writes before a later synced write must be durable too, even when
        // they sit in the WAL being retired: the first synced write syncs it
        // (see `State::retired_log`). Every record is already flushed to the
        // file, so nothing is lost if it is never synced and the process dies.
        // The previous retired WAL belongs to a memtable already flushed
        // (switches wait for that).
        state.retired_log = state.log.replace(LogWriter::new(file));
        state.log_number = number;
        let old = std::mem::replace(
            &mut state.mem,
            Arc::new(MemTable::with_order(self.order.clone())),
        );
        state.imm = Some(old);
        state.work_epoch += 1;
        self.work_cv.notify_all();
    }

    /// Switches the memtable (if it holds anything) and waits until it is a
    /// table on disk.
    pub(super) fn flush_memtable(&self) -> Result<()> {
        self.write(&WriteOptions::default(), None)?;
        let mut state = self.lock_state();
        while state.imm.is_some() && state.bg_error.is_none() {
            state = self.wait(&self.done_cv, state);
        }
        match &state.bg_error {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }
}

/// Wakes the writer now at the front of the queue: it leads the next group.
fn wake_next_leader(state: &State) {
    if let Some(next) = state.writers.front() {
        if let Some(pending) = state.pending_writes.get(next) {
            pending.wakeup.notify_one();
        }
    }
}

/// Syncs the WAL retired at the last memtable switch, if a synced write
/// found it still unsynced.
fn sync_retired_wal(retired: Option<LogWriter<Box<dyn crate::env::WritableFile>>>) -> Result<()> {
    match retired {
        Some(mut log) => log
            .get_mut()
            .sync()
            .map_err(|e| Error::io("syncing the retired WAL", e)),
        None => Ok(()),
    }
}

fn append_to_wal(
    log: Option<&mut LogWriter<Box<dyn crate::env::WritableFile>>>,
    batch: &WriteBatch,
    sync: bool,
) -> Result<()> {
    let log = log.ok_or_else(|| Error::InvalidArgument("no WAL is open".into()))?;
    log.add_record(batch.data())?;
    if sync {
        log.get_mut()
            .sync()
            .map_err(|e| Error::io("syncing the WAL", e))?;
    }
    Ok(())
}

/// Applies a whole batch to the memtable, assigning consecutive sequence
/// numbers from the batch's. The batch is checked completely first so a
/// damaged batch is never half applied.
pub(crate) fn insert_into(mem: &MemTable, batch: &WriteBatch) -> Result<()> {
    // Two passes rather than collecting the records: no allocation per write.
    for op in batch.iter() {
        op?;
    }
    for (sequence, op) in (batch.sequence()..).zip(batch.iter()) {
        match op? {
            BatchOp::Put { key, value } => mem.add(sequence, ValueType::Value, key, value),
            BatchOp::Delete { key } => mem.add(sequence, ValueType::Deletion, key, b""),
        }
    }
    Ok(())
}
