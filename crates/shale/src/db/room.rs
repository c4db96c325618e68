//! Room for a write: the memtable switch when it is full (a new WAL
//! created outside the state lock) and the write throttle, a delay that
//! follows the compaction debt (L0 files and the rate compactions drain it
//! at, as the compaction service measures it), spread over every write
//! instead of one write in hundreds sleeping a millisecond.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_format::log_writer::LogWriter;
use shale_format::Result;

use super::inner::{DbInner, State, StateGuard};
use crate::compaction::priority;
use crate::env::LogFile;
use crate::filename;
use crate::memtable::MemTable;
use crate::options::Options;

/// The most of its owed delay one write waits out by itself. The write
/// throttle (`docs/compaction.md`, "Write throttling") spreads the delay
/// that the compaction debt asks for over every write: each pays what it
/// owes, up to this much, in a wait that yields the processor instead of a
/// sleep (a sleep this short oversleeps by the timer slack, 50 us). So a
/// throttled write takes a few microseconds longer instead of one write in
/// hundreds taking a millisecond, which is what keeps the P99.9 of a
/// throttled fill low.
pub(super) const MAX_SPREAD_DELAY: Duration = Duration::from_micros(10);

/// What writes owe beyond [`MAX_SPREAD_DELAY`] each (the debt outruns what
/// spreading pays) is summed and slept in one go once it reaches this
/// much, RocksDB's refill period for its delayed-write rate.
pub(super) const MIN_DELAY_SLEEP: Duration = Duration::from_millis(1);

/// Whether the machine has a core to spare beside the compaction threads,
/// the flush thread and one writer. Where it has, a throttled writer waits
/// its share of the delay out by yielding, on time; where it has not,
/// yielding in a loop is a busy wait that takes from the compactions the
/// processor they need to end the throttle (a writer at normal priority
/// yields little to their lowered threads), so the writer sleeps what it
/// owes once it reaches [`MIN_DELAY_SLEEP`] instead, as it sleeps longer
/// debts everywhere (`docs/results/compaction-tax.md`, "The throttle's
/// wait on two cores").
fn has_spare_core(options: &Options) -> bool {
    crate::options::available_cores() > options.background_compactions() + 2
}

impl DbInner {
    /// Whether a write finds room with nothing to wait for: no background
    /// error, L0 under the slowdown trigger, the memtable not full.
    /// `make_room_for_write` returns at once, without a switch, exactly
    /// when this holds.
    #[inline]
    pub(super) fn has_room_now(&self, state: &State) -> bool {
        state.bg_error.is_none()
            && state.current.num_files(0) < self.options.l0_slowdown_writes_trigger
            && state.mem.approximate_memory_usage() <= self.options.write_buffer_size
    }

    /// Makes sure the memtable has room, throttling when L0 is backed up
    /// (LevelDB's `MakeRoomForWrite`, with a rate-based delay instead of its
    /// 1 ms sleep). With `force`, switches to a new memtable whenever the
    /// current one holds anything. Takes and returns the state lock because
    /// it may wait.
    /// REQUIRES: the caller leads the write queue.
    pub(super) fn make_room_for_write<'a>(
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
                let spare_core = has_spare_core(options);
                if spare_core && state.owed_delay < MIN_DELAY_SLEEP {
                    let now = state.owed_delay.min(MAX_SPREAD_DELAY);
                    state.owed_delay -= now;
                    drop(state);
                    while started.elapsed() < now {
                        std::thread::yield_now();
                    }
                } else if !spare_core && state.owed_delay < MIN_DELAY_SLEEP {
                    // Owed, and slept with what later writes owe.
                    drop(state);
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
                let for_flush = state.imm.is_some();
                if !for_flush {
                    shale_log!(self.info_log, "Too many L0 files ({l0_files}); waiting...");
                }
                let started = Instant::now();
                self.work_cv.notify_all();
                state = self.wait(&self.done_cv, state);
                let micros = started.elapsed().as_micros() as u64;
                state.stalls.stop_count += 1;
                state.stalls.stop_micros += micros;
                if for_flush {
                    state.stalls.stop_for_flush.add(micros);
                } else {
                    state.stalls.stop_for_l0.add(micros);
                }
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
