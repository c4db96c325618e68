//! ProckStore's four-level priority (the ProckStore paper on near-data
//! asynchronous compaction, section 3.3), each level a pure
//! function the scheduler calls:
//!
//! 1. *trigger* ([`trigger_scores`], equation 1): a level's score counts only
//!    the files and bytes no queued or running job has taken yet, so a level
//!    is not picked twice for the same excess;
//! 2. *file pick* (`picker::candidate_files`, equation 2): the file with
//!    the fewest overlapping bytes below per byte of its own
//!    (`PickStyle::MinOverlapRatio`, the default; `MinOverlap` counts files
//!    as the paper does);
//! 3. *allocation* ([`queue_end`], equation 3): the executor with the higher
//!    measured throughput takes the larger jobs, from the other end of a
//!    level's queue;
//! 4. *sub-task* ([`primary_subtask`]): of a job's sub-compactions, the
//!    smallest runs on the thread that took the job.
//!
//! Beside them, what outranks what: flushes come first (they have their own
//! thread), an L0 job outranks deeper ones when L0 nears the slowdown
//! trigger ([`l0_is_urgent`]), and the write delay follows the compaction
//! debt ([`write_delay`]).

use std::time::Duration;

use shale_format::version_edit::NUM_LEVELS;

use crate::options::Options;
use crate::version::Version;

/// Work already taken from a level by queued and running jobs picked there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TakenWork {
    /// Files of the level that are inputs of those jobs.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Equation 1: each level's trigger score (all but the last level). L0:
/// files not yet taken over `l0_compaction_trigger`; deeper levels: bytes
/// not yet taken over the level's target. A level with a score >= 1 needs
/// another job.
pub fn trigger_scores(
    version: &Version,
    options: &Options,
    taken: &[TakenWork; NUM_LEVELS],
) -> [f64; NUM_LEVELS - 1] {
    // Each level's bytes once, for both the targets and the scores.
    let level_bytes: [u64; NUM_LEVELS] = std::array::from_fn(|level| version.level_bytes(level));
    let targets = level_targets(&level_bytes, options);
    let mut scores = [0.0; NUM_LEVELS - 1];
    for (level, score) in scores.iter_mut().enumerate() {
        *score = if level == 0 {
            version.num_files(0).saturating_sub(taken[0].files) as f64
                / options.l0_compaction_trigger as f64
        } else {
            level_bytes[level].saturating_sub(taken[level].bytes) as f64 / targets[level]
        };
    }
    scores
}

/// Each level's target size in bytes (index 0 unused), from the bytes at
/// each level now. With fixed targets (`dynamic_level_targets` off),
/// LevelDB's: L1 holds `max_bytes_for_level_base` and each level below
/// `level_multiplier` times more. With dynamic targets, the levels between
/// L1 and the deepest level holding data grow by one factor from L1's
/// target to that level's size, the factor at most `level_multiplier`
/// (the deepest level and those below keep their fixed targets, so a new
/// level opens when the deepest outgrows its own).
///
/// Why: in a growing store the deepest level is young and small beside
/// its fixed target while the level above is full, so a byte moving into
/// the level above is merged with a level ten times its parent's size;
/// equal ratios between the levels write less at a steady size (RocksDB's
/// `level_compaction_dynamic_level_bytes` sizes levels from the last one).
/// While a store grows, a small deepest level is also cheap to write
/// into, and fixed targets measured better or the same: off by default
/// (`docs/results/compaction-tax.md`, "Level targets from the deepest
/// level").
pub fn level_targets(level_bytes: &[u64; NUM_LEVELS], options: &Options) -> [f64; NUM_LEVELS] {
    let mut targets = fixed_level_targets(options);
    if !options.dynamic_level_targets {
        return targets;
    }
    let Some(deepest) = (2..NUM_LEVELS).rev().find(|&l| level_bytes[l] > 0) else {
        return targets;
    };
    let base = options.max_bytes_for_level_base as f64;
    let steps = (deepest - 1) as f64;
    let factor = (level_bytes[deepest] as f64 / base)
        .powf(1.0 / steps)
        .clamp(1.0, options.level_multiplier);
    for (level, target) in targets.iter_mut().enumerate().take(deepest).skip(2) {
        *target = base * factor.powi(level as i32 - 1);
    }
    targets
}

/// LevelDB's fixed targets (index 0 unused): L1 holds
/// `max_bytes_for_level_base` and each level below `level_multiplier`
/// times more.
pub fn fixed_level_targets(options: &Options) -> [f64; NUM_LEVELS] {
    std::array::from_fn(|level| options.max_bytes_for_level(level.max(1)))
}

/// [`level_targets`] of `version`; with fixed targets it reads no file
/// sizes.
pub fn version_level_targets(version: &Version, options: &Options) -> [f64; NUM_LEVELS] {
    if !options.dynamic_level_targets {
        return fixed_level_targets(options);
    }
    level_targets(
        &std::array::from_fn(|level| version.level_bytes(level)),
        options,
    )
}

/// Levels whose score is at least 1, most urgent first: L0 first when it
/// [`l0_is_urgent`], then by descending score.
pub fn levels_by_priority(scores: &[f64], l0_urgent: bool) -> Vec<usize> {
    let mut levels: Vec<usize> = (0..scores.len()).filter(|&l| scores[l] >= 1.0).collect();
    sort_by_urgency(&mut levels, scores, l0_urgent);
    levels
}

/// Orders `levels` most urgent first: L0 first when `l0_urgent` and it
/// [`l0_outranks_l1`], then by descending score (a level without a score,
/// the last, counts 0).
pub fn sort_by_urgency(levels: &mut [usize], scores: &[f64], l0_urgent: bool) {
    let l0_first = l0_urgent && l0_outranks_l1(scores);
    let urgent = |l: usize| l0_first && l == 0;
    let score = |l: usize| scores.get(l).copied().unwrap_or(0.0);
    levels.sort_by(|&a, &b| {
        urgent(b)
            .cmp(&urgent(a))
            .then(score(b).total_cmp(&score(a)))
    });
}

/// Whether L0's score is at least L1's. An L0 job takes every L1 file its
/// key range overlaps (with random keys, all of L1), so it rewrites L1
/// whole; while L1 scores higher, its own jobs go first (and an L0 job does
/// not push them out of the queue), since each L0 job would rewrite more
/// than L1's target, and the throttle holds the writers meanwhile. Left to
/// go first whenever it neared the slowdown trigger, L0 kept L1's jobs from
/// ever starting: L1 grew without bound and every L0 job rewrote it
/// (`docs/results/compaction-tax.md`, "L1 drained before an urgent L0").
pub fn l0_outranks_l1(scores: &[f64]) -> bool {
    let score = |l: usize| scores.get(l).copied().unwrap_or(0.0);
    score(0) >= score(1)
}

/// True when L0 has come within two files of the slowdown trigger in
/// effect (raised while `loading`, see [`WriteTriggers`]) or reached it: its jobs then go before any deeper one, and get the cores
/// for sub-compactions.
pub fn l0_is_urgent(l0_files: usize, options: &Options, loading: bool) -> bool {
    l0_files + 2 >= WriteTriggers::new(options, loading).slowdown
        && l0_files >= options.l0_compaction_trigger
}

/// Which end of a level's queue (kept in ascending job size) an executor
/// takes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueEnd {
    /// The smallest job.
    Small,
    /// The largest job.
    Large,
}

/// Equation 3: an executor whose measured throughput (input bytes per
/// second over its last jobs) is at least every other available executor's
/// takes the large jobs; a slower one the small jobs. Without a
/// measurement for every side, each keeps `default_end` (ProckStore: the
/// host takes the small end, the device the large one).
pub fn queue_end(mine: Option<f64>, others: &[Option<f64>], default_end: QueueEnd) -> QueueEnd {
    let Some(mine) = mine else {
        return default_end;
    };
    let mut fastest_other = None::<f64>;
    for other in others {
        match other {
            Some(t) => fastest_other = Some(fastest_other.map_or(*t, |f| f.max(*t))),
            None => return default_end,
        }
    }
    match fastest_other {
        None => QueueEnd::Large,
        Some(other) if mine >= other => QueueEnd::Large,
        Some(_) => QueueEnd::Small,
    }
}

/// The fourth priority: the index of the sub-compaction the calling thread
/// runs itself, the one with the fewest input bytes (the others start on
/// threads of their own first). `None` for no sub-compactions.
pub fn primary_subtask(input_bytes: &[u64]) -> Option<usize> {
    input_bytes
        .iter()
        .enumerate()
        .min_by_key(|&(i, bytes)| (*bytes, i))
        .map(|(i, _)| i)
}

/// How many sub-compactions a job of `input_bytes` is cut into: at most
/// `max_subcompactions`, each at least `min_part_bytes` (one output file's
/// worth, so a part never writes less than a whole file).
pub fn subcompaction_parts(
    input_bytes: u64,
    min_part_bytes: u64,
    max_subcompactions: usize,
) -> usize {
    let by_size = input_bytes / min_part_bytes.max(1);
    (by_size as usize).clamp(1, max_subcompactions.max(1))
}

/// Cores a deeper job may split itself over: the machine's, less one for
/// the foreground and one for each of the `other_jobs` running, at least
/// one.
pub fn idle_cores(cores: usize, other_jobs: usize) -> usize {
    cores.saturating_sub(1 + other_jobs).max(1)
}

/// What the write path needs to know of the compaction debt.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Debt {
    /// Files in L0.
    pub l0_files: usize,
    /// Input bytes per second compactions into L1 reached lately (`None`
    /// before the first one).
    pub l0_drain_rate: Option<f64>,
}

/// L0's write triggers in effect: the options' slowdown and stop triggers,
/// `l0_load_slack` files higher while the database is not read (see
/// `db/read_activity.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteTriggers {
    /// L0 files from which writes are throttled.
    pub slowdown: usize,
    /// L0 files at which writes stop.
    pub stop: usize,
}

impl WriteTriggers {
    /// The triggers of `options`, raised when `loading`.
    pub fn new(options: &Options, loading: bool) -> WriteTriggers {
        let slack = if loading { options.l0_load_slack } else { 0 };
        WriteTriggers {
            slowdown: options.l0_slowdown_writes_trigger.saturating_add(slack),
            stop: options.l0_stop_writes_trigger.saturating_add(slack),
        }
    }
}

/// The share of the L0 drain rate that [`write_delay`] holds writes to at
/// the stop trigger.
pub const STOP_RATE_SHARE: f64 = 0.01;

/// Where, from the slowdown trigger (0) to the stop trigger (1),
/// [`write_delay`]'s rate stops falling linearly and starts falling by a
/// constant factor per L0 file.
pub const THROTTLE_KNEE: f64 = 0.5;

/// The delay for one write of `write_bytes` under `debt`: none below the
/// slowdown trigger; from there to the stop trigger the writer is held to a
/// rate that falls from the measured L0 drain rate (or 16 MiB/s before any
/// measurement, RocksDB's `delayed_write_rate`): linearly to 0.55 of it
/// halfway to the stop trigger ([`THROTTLE_KNEE`]), then by the same
/// factor per L0 file to [`STOP_RATE_SHARE`] of it at the stop trigger, so
/// the delay is spread thinly over every write instead of 1 ms every now
/// and then (LevelDB). The stop trigger stays the last resort (the caller
/// waits there).
///
/// Why the steep second half: the drain rate is a job's input rate while
/// it runs, and jobs into L1 share the cores with deeper ones, so L0
/// empties far slower than that over wall time. A rate falling linearly
/// to a tenth never came down to what a deep tree's compaction sustains,
/// and a 200M-pair fill was stopped hundreds of times (one write waited
/// 2.4 s). Falling geometrically from the slowdown trigger on, it stopped
/// none, but held L0 lower, so each job into L1 took fewer L0 files and
/// a 5M-pair fill wrote more; from halfway, it keeps the first half as
/// it was (`docs/results/compaction-tax.md`, "The throttle's curve").
pub fn write_delay(write_bytes: usize, debt: &Debt, triggers: &WriteTriggers) -> Duration {
    const DEFAULT_RATE: f64 = 16.0 * 1024.0 * 1024.0;
    let slowdown = triggers.slowdown;
    if debt.l0_files < slowdown {
        return Duration::ZERO;
    }
    let span = triggers.stop.saturating_sub(slowdown).max(1) as f64;
    // 0 at the slowdown trigger, 1 at the stop trigger.
    let depth = ((debt.l0_files - slowdown) as f64 / span).min(1.0);
    let drain = debt
        .l0_drain_rate
        .filter(|r| *r > 0.0)
        .unwrap_or(DEFAULT_RATE);
    let at_knee = 1.0 - 0.9 * THROTTLE_KNEE;
    let share = if depth <= THROTTLE_KNEE {
        1.0 - 0.9 * depth
    } else {
        let beyond = (depth - THROTTLE_KNEE) / (1.0 - THROTTLE_KNEE);
        at_knee * (STOP_RATE_SHARE / at_knee).powf(beyond)
    };
    let rate = drain * share;
    Duration::from_secs_f64(write_bytes as f64 / rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::test_versions;

    /// Files as (level, number, size), each holding one key of its own.
    fn version(files: &[(usize, u64, u64)]) -> Version {
        let keys: Vec<String> = files.iter().map(|f| format!("k{:04}", f.1)).collect();
        let files: Vec<(usize, u64, &str, &str, u64)> = files
            .iter()
            .zip(&keys)
            .map(|(&(level, number, size), key)| (level, number, key.as_str(), key.as_str(), size))
            .collect();
        test_versions::version(&files)
    }

    #[test]
    fn fixed_level_targets_are_leveldbs() {
        let options = Options {
            max_bytes_for_level_base: 100,
            ..Options::default()
        };
        let mut bytes = [0u64; NUM_LEVELS];
        bytes[3] = 2500;
        let targets = level_targets(&bytes, &options);
        assert_eq!(targets[1..4], [100.0, 1000.0, 10_000.0]);
        assert_eq!(targets[6], 100e5);
    }

    #[test]
    fn dynamic_level_targets_grow_evenly_to_the_deepest_level() {
        let options = Options {
            max_bytes_for_level_base: 100,
            dynamic_level_targets: true,
            ..Options::default()
        };
        let fixed = fixed_level_targets(&options);
        let targets_with = |deepest: usize, size: u64| {
            let mut bytes = [0u64; NUM_LEVELS];
            bytes[1] = 70;
            bytes[deepest] = size;
            level_targets(&bytes, &options)
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
        // Data at L1 and L2 only: nothing between them, LevelDB's targets.
        assert_eq!(targets_with(2, 5000), fixed);
        // L3 at a quarter of its fixed target: L2 is the mean ratio between
        // L1's 100 and L3's 2500, 5x each.
        let targets = targets_with(3, 2500);
        assert!(close(targets[2], 500.0), "{targets:?}");
        assert_eq!(targets[1], 100.0);
        assert_eq!(targets[3..], fixed[3..]);
        // Four levels down: L2, L3, L4 at 2x, 4x, 8x of L1 for 1600 at L5.
        let targets = targets_with(5, 1600);
        for (level, expect) in [(2, 200.0), (3, 400.0), (4, 800.0)] {
            assert!(close(targets[level], expect), "{targets:?}");
        }
        // A deepest level smaller than L1's target: the levels above it
        // aim at L1's size, pushing their data down.
        assert_eq!(targets_with(3, 50)[2], 100.0);
        // Past its fixed target the ratio stays at the multiplier: the
        // deepest level pushes into a new one.
        assert_eq!(targets_with(3, 1_000_000), fixed);
    }

    #[test]
    fn trigger_scores_subtract_work_already_taken() {
        let options = Options {
            max_bytes_for_level_base: 1000,
            ..crate::compaction::test_versions::leveldb_triggers()
        };
        let v = version(&[
            (0, 1, 10),
            (0, 2, 10),
            (0, 3, 10),
            (0, 4, 10),
            (0, 5, 10),
            (1, 6, 1500),
            (1, 7, 1500),
        ]);
        let none = [TakenWork::default(); NUM_LEVELS];
        let scores = trigger_scores(&v, &options, &none);
        assert_eq!(scores[0], 5.0 / 4.0);
        assert_eq!(scores[1], 3.0);
        let mut taken = none;
        taken[0] = TakenWork {
            files: 4,
            bytes: 40,
        };
        taken[1] = TakenWork {
            files: 1,
            bytes: 1500,
        };
        let scores = trigger_scores(&v, &options, &taken);
        assert_eq!(scores[0], 1.0 / 4.0, "L0's excess is already queued");
        assert_eq!(scores[1], 1.5);
        // Never negative.
        taken[0].files = 9;
        assert_eq!(trigger_scores(&v, &options, &taken)[0], 0.0);
    }

    #[test]
    fn urgent_l0_goes_first_then_descending_scores() {
        let scores = [2.2, 1.9, 0.5, 3.0, 0.0, 0.0];
        assert_eq!(levels_by_priority(&scores, false), vec![3, 0, 1]);
        assert_eq!(levels_by_priority(&scores, true), vec![0, 3, 1]);
        // L1 over L0's score: L1 first, urgent or not.
        let l1_behind = [1.2, 3.0, 0.5, 1.5, 0.0, 0.0];
        assert!(!l0_outranks_l1(&l1_behind));
        assert_eq!(levels_by_priority(&l1_behind, false), vec![1, 3, 0]);
        assert_eq!(levels_by_priority(&l1_behind, true), vec![1, 3, 0]);
        let options = Options {
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 8,
            l0_load_slack: 4,
            ..crate::compaction::test_versions::leveldb_triggers()
        };
        assert!(!l0_is_urgent(5, &options, false));
        assert!(l0_is_urgent(6, &options, false));
        assert!(l0_is_urgent(12, &options, false));
        // During a load the slowdown trigger is 4 files higher, and so is
        // where L0 turns urgent.
        assert!(!l0_is_urgent(9, &options, true));
        assert!(l0_is_urgent(10, &options, true));
        let low = Options {
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 4,
            ..crate::compaction::test_versions::leveldb_triggers()
        };
        assert!(
            !l0_is_urgent(3, &low, false),
            "below the compaction trigger"
        );
    }

    #[test]
    fn the_faster_executor_takes_the_large_end() {
        use QueueEnd::*;
        assert_eq!(queue_end(Some(200.0), &[Some(100.0)], Small), Large);
        assert_eq!(queue_end(Some(100.0), &[Some(200.0)], Large), Small);
        assert_eq!(queue_end(Some(100.0), &[Some(100.0)], Small), Large);
        // Until every side has a measurement, the defaults hold.
        assert_eq!(queue_end(None, &[Some(100.0)], Small), Small);
        assert_eq!(queue_end(Some(100.0), &[None], Large), Large);
        // Alone: the large end.
        assert_eq!(queue_end(Some(1.0), &[], Small), Large);
    }

    #[test]
    fn the_smallest_subtask_runs_on_the_calling_thread() {
        assert_eq!(primary_subtask(&[30, 10, 20, 10]), Some(1));
        assert_eq!(primary_subtask(&[]), None);
        assert_eq!(subcompaction_parts(100, 30, 8), 3);
        assert_eq!(subcompaction_parts(100, 30, 2), 2);
        assert_eq!(subcompaction_parts(10, 30, 8), 1);
        assert_eq!(subcompaction_parts(10, 0, 0), 1);
    }

    #[test]
    fn write_delay_grows_smoothly_from_slowdown_to_stop() {
        let options = crate::compaction::test_versions::leveldb_triggers(); // slowdown 8, stop 12
        let debt = |l0_files| Debt {
            l0_files,
            l0_drain_rate: Some(100e6),
        };
        assert_eq!(
            write_delay(1000, &debt(7), &WriteTriggers::new(&options, false)),
            Duration::ZERO
        );
        let delays: Vec<Duration> = (8..=12)
            .map(|files| write_delay(1000, &debt(files), &WriteTriggers::new(&options, false)))
            .collect();
        assert_eq!(delays[0], Duration::from_secs_f64(1000.0 / 100e6));
        assert!(delays.windows(2).all(|w| w[0] < w[1]), "{delays:?}");
        // Linear to 0.55 of the rate halfway, then the same factor per
        // file to a hundredth at the stop trigger.
        let close = |d: Duration, rate: f64| (d.as_secs_f64() - 1000.0 / rate).abs() < 1e-8;
        assert!(close(delays[1], 100e6 * 0.775), "{delays:?}");
        assert!(close(delays[2], 100e6 * 0.55), "{delays:?}");
        assert!(
            close(delays[3], 100e6 * (0.55f64 * 0.01).sqrt()),
            "{delays:?}"
        );
        assert!(close(delays[4], 100e6 * 0.01), "{delays:?}");
        // Far below LevelDB's 1 ms per write at the slowdown trigger.
        assert!(delays[0] < Duration::from_micros(200));
        // Before any measurement: 16 MiB/s.
        let unknown = Debt {
            l0_drain_rate: None,
            ..debt(8)
        };
        assert_eq!(
            write_delay(16 << 20, &unknown, &WriteTriggers::new(&options, false)),
            Duration::from_secs(1)
        );
    }
}
