//! The scheduler's pure core on versions built in memory: no disk, no
//! thread.

use shale_format::internal_key::{InternalKey, ValueType};

use super::*;
use crate::compaction::test_versions::{numbers, version};

fn options() -> Options {
    Options {
        max_bytes_for_level_base: 1000,
        max_background_compactions: 2,
        cross_level_compaction: false,
        ..crate::compaction::test_versions::leveldb_triggers()
    }
}

/// L1 four files of 500 bytes (score 2) over an L2 with different overlaps:
/// a..b overlaps three L2 files, c..d none, e..f one, g..h two.
const BUSY_LEVELS: &[(usize, u64, &str, &str, u64)] = &[
    (1, 1, "a", "b", 500),
    (1, 2, "c", "d", 500),
    (1, 3, "e", "f", 500),
    (1, 4, "g", "h", 500),
    (2, 10, "a", "a", 100),
    (2, 11, "aa", "aa", 100),
    (2, 12, "b", "b", 100),
    (2, 13, "e", "e", 100),
    (2, 14, "g", "g", 100),
    (2, 15, "h", "h", 100),
];

fn two_busy_levels() -> Version {
    version(BUSY_LEVELS)
}

/// [`BUSY_LEVELS`] without the file numbered `without`, plus `extra`.
fn busy_levels_changed(
    without: Option<u64>,
    extra: (usize, u64, &'static str, &'static str, u64),
) -> Version {
    let mut files: Vec<_> = BUSY_LEVELS
        .iter()
        .copied()
        .filter(|f| Some(f.1) != without)
        .collect();
    files.push(extra);
    version(&files)
}

#[test]
fn refill_queues_a_level_once_per_excess_and_reserves_files() {
    let v = two_busy_levels();
    let mut s = Scheduler::new(&options());
    let queued = s.refill(&v, &options());
    // L1 holds 2000 bytes for a 1000-byte target: two jobs of 500 bytes
    // bring its net score to 1, a third would take 1000 and go below...
    // each pick subtracts its bytes (equation 1) until the score is < 1.
    let bytes: u64 = queued.iter().map(|j| j.plan.inputs[0][0].file_size).sum();
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert_eq!(bytes, 1000);
    // No file is in two jobs.
    let mut all: Vec<u64> = queued.iter().flat_map(|j| j.plan.input_numbers()).collect();
    let count = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), count);
    for n in &all {
        assert!(s.is_reserved(*n));
    }
    assert_eq!(s.taken_work()[1].bytes, 1000);
    // Nothing new until the version changes.
    assert!(s.refill(&v, &options()).is_empty());
}

#[test]
fn min_overlap_picks_the_file_with_the_fewest_files_below() {
    let v = two_busy_levels();
    let mut s = Scheduler::new(&options());
    let queued = s.refill(&v, &options());
    let firsts: Vec<u64> = queued.iter().map(|j| j.plan.inputs[0][0].number).collect();
    // c..d (no overlap) first, then e..f (one).
    assert_eq!(firsts, vec![2, 3]);
    assert_eq!(queued[0].overlap_score, 0);
    assert_eq!(queued[1].overlap_score, 1);

    let round_robin = Options {
        compaction_pick: PickStyle::RoundRobin,
        ..options()
    };
    let mut s = Scheduler::new(&round_robin);
    let queued = s.refill(&v, &round_robin);
    let firsts: Vec<u64> = queued.iter().map(|j| j.plan.inputs[0][0].number).collect();
    assert_eq!(firsts, vec![1, 2], "rotation from the start");
    assert_eq!(
        s.compact_pointers[1],
        InternalKey::new(b"d", 100, ValueType::Value).encoded()
    );
}

#[test]
fn queues_are_ordered_by_size_and_ends_serve_fast_and_slow_executors() {
    // L1 over target with jobs of 1, 2 and 3 input files.
    let v = version(&[
        (1, 1, "a", "a", 700),
        (1, 2, "c", "c", 700),
        (1, 3, "e", "f", 700),
        (2, 10, "a", "a", 10),
        (2, 11, "e", "e", 10),
        (2, 12, "f", "f", 10),
    ]);
    let opts = Options {
        max_background_compactions: 4,
        max_bytes_for_level_base: 500,
        ..options()
    };
    let mut s = Scheduler::new(&opts);
    s.refill(&v, &opts);
    let sizes: Vec<usize> = s.queued().map(|j| j.plan.input_files()).collect();
    assert_eq!(sizes, vec![1, 2, 3]);
    let large = s.take(&v, &opts, QueueEnd::Large).unwrap();
    let small = s.take(&v, &opts, QueueEnd::Small).unwrap();
    assert!(large.plan.input_files() >= small.plan.input_files());
    assert_eq!(s.running().len(), 2);
    s.finish(large.ticket);
    assert_eq!(s.running().len(), 1);
}

#[test]
fn a_job_whose_inputs_moved_is_dropped_and_picked_again() {
    let v = two_busy_levels();
    let mut s = Scheduler::new(&options());
    s.refill(&v, &options());
    // File 2 (queued) was compacted by someone else: gone from L1.
    let moved = busy_levels_changed(Some(2), (2, 16, "c", "d", 500));
    let dropped = s.revalidate(&moved, &options());
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].plan.inputs[0][0].number, 2);
    assert_eq!(s.counts.dropped_stale, 1);
    // A file appearing below a queued job's range makes it stale too.
    let mut s = Scheduler::new(&options());
    s.refill(&v, &options());
    let grown_below = busy_levels_changed(None, (2, 17, "cc", "cc", 100));
    let dropped = s.revalidate(&grown_below, &options());
    assert_eq!(dropped.len(), 1, "the c..d job now has a file below");
    let again = s.refill(&grown_below, &options());
    assert!(!again.is_empty());
}

#[test]
fn disjoint_jobs_run_together_and_overlapping_ones_wait() {
    // L0 (5 files, score 1.25) outranks L1 (1200 bytes, score 1.2).
    let v = version(&[
        (0, 20, "a", "c", 10),
        (0, 21, "a", "c", 10),
        (0, 22, "a", "c", 10),
        (0, 23, "a", "c", 10),
        (0, 24, "a", "c", 10),
        (1, 1, "a", "b", 600),
        (1, 2, "m", "n", 600),
        (2, 10, "m", "m", 10),
    ]);
    let opts = Options {
        max_bytes_for_level_base: 1000,
        ..options()
    };
    let mut s = Scheduler::new(&opts);
    let queued = s.refill(&v, &opts);
    assert!(queued.iter().any(|j| j.plan.level == 0));
    assert!(queued.iter().any(|j| j.plan.level == 1));
    let first = s.take(&v, &opts, QueueEnd::Large).unwrap();
    let second = s.take(&v, &opts, QueueEnd::Large).unwrap();
    assert_ne!(first.plan.level, second.plan.level);
    assert!(!first.plan.conflicts_with(&second.plan.running()));
    assert!(s.take(&v, &opts, QueueEnd::Large).is_none());
}

#[test]
fn an_l0_pick_evicts_queued_deeper_jobs_it_conflicts_with() {
    // L1 over its target; L0 not yet at its trigger.
    let opts = options();
    let before = version(&[
        (0, 20, "a", "c", 10),
        (1, 1, "a", "b", 1100),
        (2, 10, "a", "a", 10),
    ]);
    let mut s = Scheduler::new(&opts);
    let queued = s.refill(&before, &opts);
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].plan.level, 1);
    // Flushes push L0 to its trigger (score 1.25, over L1's 1.1); its job
    // needs file 1.
    let l0_files = |l1_bytes| {
        version(&[
            (0, 20, "a", "c", 10),
            (0, 21, "a", "c", 10),
            (0, 22, "a", "c", 10),
            (0, 23, "a", "c", 10),
            (0, 24, "a", "c", 10),
            (1, 1, "a", "b", l1_bytes),
            (2, 10, "a", "a", 10),
        ])
    };
    let after = l0_files(1100);
    s.revalidate(&after, &opts);
    let queued = s.refill(&after, &opts);
    assert!(queued.iter().any(|j| j.plan.level == 0), "{queued:?}");
    let l0 = s.queued().find(|j| j.plan.level == 0).unwrap();
    assert_eq!(numbers(&l0.plan.inputs[1]), vec![1]);

    // With L1 far over its target (score 3 against L0's 1.25), its queued
    // job stays and L0 waits: an L0 job now would rewrite all of it.
    let mut s = Scheduler::new(&opts);
    let far_over = version(&[
        (0, 20, "a", "c", 10),
        (1, 1, "a", "b", 3000),
        (2, 10, "a", "a", 10),
    ]);
    assert_eq!(s.refill(&far_over, &opts)[0].plan.level, 1);
    let after = l0_files(3000);
    s.revalidate(&after, &opts);
    s.refill(&after, &opts);
    assert!(
        s.queued().all(|j| j.plan.level == 1),
        "{:?}",
        s.queued().collect::<Vec<_>>()
    );
}

#[test]
fn cross_level_takes_the_level_below_when_the_next_level_is_over_its_target() {
    let opts = Options {
        cross_level_compaction: true,
        ..options()
    };
    // L1 and L2 both over target (1000 and 10000 bytes).
    let v = version(&[
        (1, 1, "c", "d", 1500),
        (2, 10, "c", "c", 6000),
        (2, 11, "x", "y", 6000),
        (3, 20, "a", "cc", 100),
        (3, 21, "d", "e", 100),
        (3, 22, "x", "z", 100),
    ]);
    let mut s = Scheduler::new(&opts);
    let queued = s.refill(&v, &opts);
    let job = queued.iter().find(|j| j.plan.level == 1).unwrap();
    assert!(job.plan.is_cross_level());
    assert_eq!(job.plan.output_level, 3);
    assert_eq!(numbers(&job.plan.inputs[1]), vec![10]);
    assert_eq!(numbers(&job.plan.inputs[2]), vec![20, 21]);
    assert!(plan_still_holds(&v, &opts, &job.plan));
    // Turned off: a plain two-level job.
    let mut s = Scheduler::new(&options());
    let queued = s.refill(&v, &options());
    let job = queued.iter().find(|j| j.plan.level == 1).unwrap();
    assert!(!job.plan.is_cross_level());
}

#[test]
fn manual_jobs_take_their_files_from_queued_jobs_and_wait_for_running_ones() {
    let v = two_busy_levels();
    let opts = options();
    let mut s = Scheduler::new(&opts);
    let queued = s.refill(&v, &opts);
    assert!(!queued.is_empty());
    let plan = picker::plan_for_range(&v, &opts, 1, None, None).unwrap();
    // Queued automatic jobs over the same files give them up.
    let claim = s.new_claim();
    let job = s.start_manual(plan.clone(), claim).unwrap();
    assert!(job.manual);
    assert!(s
        .queued()
        .all(|q| !q.plan.running().conflicts_with(&plan.running())));
    // Background threads never take it; a second manual job over the same
    // files waits for it.
    let second = s.new_claim();
    assert!(s.start_manual(plan.clone(), second).is_none());
    s.finish(job.ticket);
    let again = s.start_manual(plan, second).unwrap();
    s.finish(again.ticket);
    while let Some(job) = s.take(&v, &opts, QueueEnd::Large) {
        s.finish(job.ticket);
    }
    assert!(s.is_idle());
}

#[test]
fn a_waiting_manual_job_holds_back_the_jobs_it_conflicts_with() {
    let v = two_busy_levels();
    let opts = options();
    let mut s = Scheduler::new(&opts);
    assert!(!s.refill(&v, &opts).is_empty());
    let running = s.take(&v, &opts, QueueEnd::Large).unwrap();
    // A manual job over all of L1: the running job holds one of its files,
    // the other queued L1 jobs (not in the running one's way) others.
    let plan = picker::plan_for_range(&v, &opts, 1, None, None).unwrap();
    let claimed = plan.running();
    let claim = s.new_claim();
    // The running job holds some of its files: the manual job waits...
    assert!(s.start_manual(plan.clone(), claim).is_none());
    // ...and no job over its files starts meanwhile (it used to wait for
    // each one picked after the running one too).
    s.refill(&v, &opts);
    assert!(s.queued().any(|q| q.plan.running().conflicts_with(&claimed)
        && !q.plan.running().conflicts_with(&running.plan.running())));
    let mut others = Vec::new();
    while let Some(job) = s.take(&v, &opts, QueueEnd::Large) {
        assert!(
            !job.plan.running().conflicts_with(&claimed),
            "{} started over a waiting manual job's files",
            job.describe()
        );
        others.push(job);
    }
    s.finish(running.ticket);
    let manual = s.start_manual(plan, claim).unwrap();
    s.finish(manual.ticket);
    for job in others {
        s.finish(job.ticket);
    }
    // Let go, the claim holds nothing back.
    s.release_claim(claim);
    s.refill(&v, &opts);
    while let Some(job) = s.take(&v, &opts, QueueEnd::Large) {
        s.finish(job.ticket);
    }
    assert!(s.is_idle());
}

#[test]
fn refill_ends_when_l0_jobs_overlap_each_other() {
    // Eight overlapping L0 files: one L0 job takes them all; a second pick
    // would need the same files and must not evict the first.
    let files: Vec<(usize, u64, &str, &str, u64)> =
        (0..8).map(|n| (0, 20 + n, "a", "z", 10)).collect();
    let v = version(&files);
    let opts = options();
    let mut s = Scheduler::new(&opts);
    let queued = s.refill(&v, &opts);
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].plan.inputs[0].len(), 8);
    assert_eq!(s.counts.dropped_stale, 0);
    assert!(s.refill(&v, &opts).is_empty());
}

#[test]
fn refill_ends_when_two_l0_jobs_need_the_same_l1_file() {
    // Two L0 key ranges over one L1 file too big for either job to grow
    // into the other: each L0 job needs that file. Evicting each other
    // would pick forever; the second waits instead.
    let mut files: Vec<(usize, u64, &str, &str, u64)> = Vec::new();
    for n in 0..4 {
        files.push((0, 20 + n, "a", "b", 10));
        files.push((0, 30 + n, "y", "z", 10));
    }
    files.push((1, 5, "b", "y", 1 << 40));
    let v = version(&files);
    let opts = options();
    let mut s = Scheduler::new(&opts);
    let queued = s.refill(&v, &opts);
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(s.counts.dropped_stale, 0, "no L0 job evicted another");
    assert!(s.refill(&v, &opts).is_empty());
}
