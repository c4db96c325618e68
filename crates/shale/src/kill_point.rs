//! White-box kill points: named places in the engine where a crash test may
//! have the process killed, so that crashes land on the exact steps whose
//! ordering recovery depends on, not only where a timer happens to fall
//! (RocksDB's `TEST_KILL_RANDOM`).
//!
//! Compiled in only with the `kill-points` cargo feature, which the crash
//! test's and the stress test's builds turn on (`cargo build -p shale-cli
//! --features kill-points`); in every other build [`maybe_kill`] is empty,
//! so no environment variable can make a program that embeds the library
//! kill itself. With the feature, a disarmed point costs one relaxed atomic
//! load. Armed by the environment at the first call:
//!
//! * `SHALE_KILL_POINT=NAME[,NAME...]` (or `all`): the points armed;
//! * `SHALE_KILL_ODDS=N` (default 1): each time an armed point is passed,
//!   the process is killed with probability 1/N.
//!
//! A kill prints `shale: kill point NAME` on stderr (so a crash test can
//! count kills by point), then sends `SIGKILL` to the process itself: no
//! destructor, no buffered write, no `atexit` runs, as with a real crash.
//!
//! The points ([`POINTS`]):
//!
//! | name | where | what recovery must get right |
//! |---|---|---|
//! | `wal-written-before-memtable` | `db/write.rs`: a group's WAL record written (and synced if asked), memtable not yet updated, nobody acknowledged | the record is replayed: its writes may appear (whole) or not |
//! | `table-write-mid` | `db/job_io.rs`: each write of a flush's or local compaction's output table | a partial table that no MANIFEST names is ignored and removed |
//! | `flush-table-written-before-install` | `db/flush.rs`: the flushed table synced and checked, not yet in the MANIFEST | the table is an orphan; the WAL still holds its writes |
//! | `compaction-output-written-before-install` | `db/job_host.rs`: a compaction's outputs written, its edit not yet logged | the inputs stay live; the outputs are orphans |
//! | `manifest-written-before-current` | `version_set.rs`: a new MANIFEST written and synced, CURRENT still naming the old one | the old MANIFEST is read; the new one is an orphan |

#[cfg(feature = "kill-points")]
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
#[cfg(feature = "kill-points")]
use std::sync::OnceLock;

/// After a group's WAL record is written, before its memtable insert.
pub const WAL_WRITTEN_BEFORE_MEMTABLE: &str = "wal-written-before-memtable";
/// Each write to a flush's or a local compaction's output table file.
pub const TABLE_WRITE_MID: &str = "table-write-mid";
/// After a flush's table is written and synced, before the MANIFEST names it.
pub const FLUSH_TABLE_WRITTEN_BEFORE_INSTALL: &str = "flush-table-written-before-install";
/// After a compaction's outputs are written, before its edit is logged.
pub const COMPACTION_OUTPUT_WRITTEN_BEFORE_INSTALL: &str =
    "compaction-output-written-before-install";
/// After a new MANIFEST is written and synced, before CURRENT names it.
pub const MANIFEST_WRITTEN_BEFORE_CURRENT: &str = "manifest-written-before-current";

/// Every kill point, for the crash test and for checking names.
pub const POINTS: [&str; 5] = [
    WAL_WRITTEN_BEFORE_MEMTABLE,
    TABLE_WRITE_MID,
    FLUSH_TABLE_WRITTEN_BEFORE_INSTALL,
    COMPACTION_OUTPUT_WRITTEN_BEFORE_INSTALL,
    MANIFEST_WRITTEN_BEFORE_CURRENT,
];

/// Names the points to arm.
pub const POINT_VAR: &str = "SHALE_KILL_POINT";
/// One in this many passes kills.
pub const ODDS_VAR: &str = "SHALE_KILL_ODDS";

/// Whether this build honours kill points (the `kill-points` feature).
pub const ENABLED: bool = cfg!(feature = "kill-points");

/// Without the `kill-points` feature: nothing, whatever the environment
/// says.
#[cfg(not(feature = "kill-points"))]
#[inline(always)]
pub fn maybe_kill(_name: &str) {}

#[cfg(feature = "kill-points")]
const UNKNOWN: u8 = 0;
#[cfg(feature = "kill-points")]
const DISARMED: u8 = 1;
#[cfg(feature = "kill-points")]
const ARMED: u8 = 2;

/// Whether the environment was read, and what it said: the fast path reads
/// only this.
#[cfg(feature = "kill-points")]
static STATUS: AtomicU8 = AtomicU8::new(UNKNOWN);
#[cfg(feature = "kill-points")]
static ARMING: OnceLock<Option<Arming>> = OnceLock::new();
/// The generator for the odds (xorshift64*; seeded from the clock and pid).
#[cfg(feature = "kill-points")]
static RANDOM: AtomicU64 = AtomicU64::new(0);

#[cfg(feature = "kill-points")]
#[derive(Debug)]
struct Arming {
    /// `None`: every point.
    points: Option<Vec<String>>,
    odds: u64,
}

/// Kills the process with probability 1/`SHALE_KILL_ODDS` when the point
/// `name` is armed; otherwise returns at once.
#[cfg(feature = "kill-points")]
#[inline]
pub fn maybe_kill(name: &str) {
    if STATUS.load(Ordering::Relaxed) == DISARMED {
        return;
    }
    maybe_kill_slow(name);
}

#[cfg(feature = "kill-points")]
#[cold]
fn maybe_kill_slow(name: &str) {
    let Some(arming) = ARMING.get_or_init(read_environment) else {
        STATUS.store(DISARMED, Ordering::Relaxed);
        return;
    };
    STATUS.store(ARMED, Ordering::Relaxed);
    let armed = arming
        .points
        .as_ref()
        .is_none_or(|points| points.iter().any(|p| p == name));
    if armed && next_random() % arming.odds == 0 {
        eprintln!("shale: kill point {name}");
        // SAFETY: kill(2) with our own pid and a valid signal number has no
        // memory-safety requirements.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

#[cfg(feature = "kill-points")]
fn read_environment() -> Option<Arming> {
    let points = std::env::var(POINT_VAR).ok()?;
    let points = points.trim();
    if points.is_empty() {
        return None;
    }
    let odds = std::env::var(ODDS_VAR)
        .ok()
        .and_then(|odds| odds.trim().parse::<u64>().ok())
        .unwrap_or(1)
        .max(1);
    let points = if points == "all" {
        None
    } else {
        let names: Vec<String> = points.split(',').map(|p| p.trim().to_string()).collect();
        // A misspelled point would silently never fire: say so once.
        for name in &names {
            if !POINTS.contains(&name.as_str()) {
                eprintln!(
                    "shale: unknown kill point {name:?} in {POINT_VAR} (known: {})",
                    POINTS.join(", ")
                );
            }
        }
        Some(names)
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    RANDOM.store(seed | 1, Ordering::Relaxed);
    Some(Arming { points, odds })
}

/// xorshift64*: good enough to spread kills; races between threads only
/// reuse a value.
#[cfg(feature = "kill-points")]
fn next_random() -> u64 {
    let mut x = RANDOM.load(Ordering::Relaxed);
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    RANDOM.store(x, Ordering::Relaxed);
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "kill-points")]
    #[test]
    fn disarmed_without_the_variable() {
        // The test process does not set SHALE_KILL_POINT: every point is a
        // no-op, and the second call takes the fast path.
        if std::env::var_os(POINT_VAR).is_some() {
            return;
        }
        for point in POINTS {
            maybe_kill(point);
        }
        assert_eq!(STATUS.load(Ordering::Relaxed), DISARMED);
    }

    #[test]
    fn names_are_distinct() {
        let mut names = POINTS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), POINTS.len());
    }
}
