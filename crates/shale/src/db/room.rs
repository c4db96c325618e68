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

/// From this many bytes of memtable on, while the previous memtable is
/// still being flushed, writes are paced by [`flush_pacing_delay`]: three
/// quarters of `write_buffer_size`.
fn flush_pacing_from(options: &Options) -> usize {
    options.write_buffer_size - options.write_buffer_size / 4
}

/// The least time a flush that ran past the time expected of it is
/// assumed to still need; past that, as long again as it is overdue (a
/// flush that slowed down, behind a busy disk or cores, is likely to stay
/// slow), so the pace slows as the memtable fills and as the flush drags.
const FLUSH_OVERDUE: Duration = Duration::from_millis(1);

/// The flush that runs, as the pacing sees it.
#[derive(Debug, Clone, Copy)]
struct FlushProgress {
    started: Instant,
    /// Bytes of the memtable being flushed.
    bytes: usize,
    /// The average time a flush has taken per byte of memtable.
    seconds_per_byte: f64,
}

/// The delay a write of `write_bytes` owes while the previous memtable is
/// being flushed and this one is past [`flush_pacing_from`] (`None` when
/// no flush paces writes). See [`pacing_delay`].
fn flush_pacing_delay(
    state: &State,
    options: &Options,
    write_bytes: usize,
    now: Instant,
) -> Option<Duration> {
    let flush = FlushProgress {
        started: state.flush_started?,
        bytes: state.imm.as_ref()?.approximate_memory_usage(),
        seconds_per_byte: state.flush_seconds_per_byte,
    };
    let usage = state.mem.approximate_memory_usage();
    pacing_delay(&flush, usage, options, write_bytes, now)
}

/// The time `flush` should still take (from its average time per byte;
/// once overdue, see [`FLUSH_OVERDUE`]) shared out over the memtable's remaining room,
/// in proportion to `write_bytes`: writes at that pace fill the memtable
/// (now `usage` bytes) as the flush ends, instead of stopping when it is
/// full and the flush is not done. RocksDB slows writes on its count of
/// unflushed memtables; with one immutable memtable, the time left to its
/// flush is the measure. `None` below [`flush_pacing_from`] and once the
/// memtable is full (then the writer waits for the flush).
fn pacing_delay(
    flush: &FlushProgress,
    usage: usize,
    options: &Options,
    write_bytes: usize,
    now: Instant,
) -> Option<Duration> {
    if usage <= flush_pacing_from(options) || usage > options.write_buffer_size {
        return None;
    }
    let expected =
        flush.started + Duration::from_secs_f64(flush.seconds_per_byte * flush.bytes as f64);
    let left = if now < expected {
        expected - now
    } else {
        (now - expected).max(FLUSH_OVERDUE)
    };
    let room = (options.write_buffer_size - usage).max(1);
    Some(left.mul_f64(write_bytes as f64 / room as f64))
}

impl DbInner {
    /// Whether a write finds room with nothing to wait for: no background
    /// error, L0 under the slowdown trigger, the memtable not full (nor
    /// past [`flush_pacing_from`] while the previous one is flushed).
    /// `make_room_for_write` returns at once, without a switch, exactly
    /// when this holds.
    #[inline]
    pub(super) fn has_room_now(&self, state: &State) -> bool {
        let usage = state.mem.approximate_memory_usage();
        state.bg_error.is_none()
            && state.current.num_files(0) < self.write_triggers(state).slowdown
            && usage <= self.options.write_buffer_size
            && (state.imm.is_none() || usage <= flush_pacing_from(&self.options))
    }

    /// L0's write triggers in effect: the options', raised by
    /// `l0_load_slack` while the database is not read
    /// (`read_activity.rs`).
    #[inline]
    pub(super) fn write_triggers(&self, state: &State) -> priority::WriteTriggers {
        priority::WriteTriggers::new(&self.options, state.reads.loading)
    }

    /// The memtable bytes up to which writes may go direct, with nothing to
    /// wait for: all of `write_buffer_size`, or the bytes from which writes
    /// are paced while the previous memtable is being flushed.
    pub(super) fn direct_memtable_limit(&self, state: &State) -> usize {
        if state.imm.is_some() {
            flush_pacing_from(&self.options)
        } else {
            self.options.write_buffer_size
        }
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
        let triggers = self.write_triggers(&state);
        let mut allow_delay = !force;
        // The flush's pace is a bound of its own beside L0's: a write owes
        // the larger of the two delays.
        let mut allow_flush_pacing = !force;
        let mut l0_owed = Duration::ZERO;
        loop {
            if let Some(err) = &state.bg_error {
                let err = err.clone();
                return (state, Err(err));
            }
            let l0_files = state.current.num_files(0);
            if allow_delay && l0_files >= triggers.slowdown {
                // Hold the writer to a rate that follows the compaction debt,
                // owed by every write and slept in slices of at least
                // MIN_DELAY_SLEEP.
                allow_delay = false;
                let debt = priority::Debt {
                    l0_files,
                    l0_drain_rate: self.service().l0_drain_rate(),
                };
                l0_owed = priority::write_delay(write_bytes.max(1), &debt, &triggers);
                state.owed_delay += l0_owed;
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
            } else if let Some(delay) = allow_flush_pacing
                .then(|| flush_pacing_delay(&state, options, write_bytes.max(1), Instant::now()))
                .flatten()
            {
                // The previous memtable is still being flushed and this one
                // is filling: pace writes so that it is full when the flush
                // should end, instead of stopping them then.
                allow_flush_pacing = false;
                let slowed_for_l0 = !allow_delay && !force;
                allow_delay = false;
                state.owed_delay += delay.saturating_sub(l0_owed);
                let started = Instant::now();
                if state.owed_delay >= MIN_DELAY_SLEEP {
                    let owed = std::mem::take(&mut state.owed_delay);
                    drop(state);
                    std::thread::sleep(owed);
                    state = self.lock_state();
                }
                // Counted once a write: a write L0's debt slowed already
                // adds only the time it slept here.
                let micros = started.elapsed().as_micros() as u64;
                state.stalls.slowdown_micros += micros;
                state.stalls.slowdown_for_flush.micros += micros;
                if !slowed_for_l0 {
                    state.stalls.slowdown_count += 1;
                    state.stalls.slowdown_for_flush.count += 1;
                }
            } else if !force && state.mem.approximate_memory_usage() <= options.write_buffer_size {
                return (state, Ok(()));
            } else if state.imm.is_some() || l0_files >= triggers.stop {
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
            Arc::new(MemTable::for_buffer(
                self.order.clone(),
                self.options.write_buffer_size,
            )),
        );
        state.imm = Some(old);
        if state.reads.sample(&self.read_mark, Instant::now()) && self.options.l0_load_slack > 0 {
            self.service().set_loading(state.reads.loading);
            let triggers = self.write_triggers(state);
            shale_log!(
                self.info_log,
                "Writes: {}: L0's write triggers at {}/{} files",
                if state.reads.loading {
                    "no read for a second (a load)"
                } else {
                    "reads again"
                },
                triggers.slowdown,
                triggers.stop
            );
        }
        self.work_cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            write_buffer_size: 4 << 20,
            ..Options::default()
        }
    }

    /// A flush of 4 MiB at 10 ns a byte (42 ms), started `ago` before now.
    fn flush(now: Instant, ago: Duration) -> FlushProgress {
        FlushProgress {
            started: now - ago,
            bytes: 4 << 20,
            seconds_per_byte: 10e-9,
        }
    }

    #[test]
    fn writes_are_paced_only_past_three_quarters_of_the_memtable() {
        let options = options();
        let now = Instant::now();
        let flush = flush(now, Duration::ZERO);
        assert_eq!(pacing_delay(&flush, 3 << 20, &options, 100, now), None);
        assert!(pacing_delay(&flush, (3 << 20) + 1, &options, 100, now).is_some());
        // Full: the writer waits for the flush instead.
        assert_eq!(
            pacing_delay(&flush, (4 << 20) + 1, &options, 100, now),
            None
        );
    }

    #[test]
    fn the_paced_writes_fill_the_memtable_as_the_flush_should_end() {
        let options = options();
        let now = Instant::now();
        // 10 ms into a flush expected to take 41.9 ms: 31.9 ms left over
        // the last 1 MiB of room, in writes of 1 KiB.
        let flush = flush(now, Duration::from_millis(10));
        let left = Duration::from_secs_f64(10e-9 * (4 << 20) as f64) - Duration::from_millis(10);
        let mut owed = Duration::ZERO;
        let mut usage = 3 << 20;
        while usage < 4 << 20 {
            usage += 1024;
            owed += pacing_delay(&flush, usage, &options, 1024, now).unwrap_or_default();
        }
        // Summed at a fixed `now` the delays grow as the room shrinks, so
        // they come to more than the time left; each one is the right
        // share of the time left at its own moment.
        assert!(owed >= left, "{owed:?} against {left:?}");
        let first = pacing_delay(&flush, (3 << 20) + 1024, &options, 1024, now).unwrap();
        let share = left.as_secs_f64() * 1024.0 / ((1 << 20) - 1024) as f64;
        assert!((first.as_secs_f64() - share).abs() < 1e-9, "{first:?}");
    }

    #[test]
    fn an_overdue_flush_still_slows_writes_more_as_the_room_shrinks() {
        let options = options();
        let now = Instant::now();
        // Expected to end 42 ms after its start: 1 ms overdue.
        let expected = Duration::from_secs_f64(10e-9 * (4 << 20) as f64);
        let flush = flush(now, expected + Duration::from_millis(1));
        let early = pacing_delay(&flush, (3 << 20) + 1, &options, 100, now).unwrap();
        let late = pacing_delay(&flush, (4 << 20) - 1000, &options, 100, now).unwrap();
        assert!(
            early > Duration::ZERO && late > early * 100,
            "{early:?} {late:?}"
        );
        // 1 ms spread over the last 1,000 bytes: 100 bytes owe a tenth.
        let tenth = late.as_secs_f64() / FLUSH_OVERDUE.as_secs_f64();
        assert!((tenth - 0.1).abs() < 1e-6, "{late:?}");
        // Later, the flush 20 ms overdue: assumed to need 20 ms more.
        let dragging = self::flush(now, expected + Duration::from_millis(20));
        let later = pacing_delay(&dragging, (4 << 20) - 1000, &options, 100, now).unwrap();
        let share = later.as_secs_f64() / 0.002;
        assert!((share - 1.0).abs() < 1e-3, "{later:?}");
    }
}
