//! The scheduler: when and where compactions run (`docs/compaction.md`;
//! ProckStore sections 3.2-3.4).
//!
//! This is its pure core: state in, decisions out, no disk, no lock, no
//! thread, so tests (and a simulator) drive it with versions built in
//! memory. The compaction service (`compaction::service`) holds it under a
//! lock of its own and the runner (`compaction::runner`) carries its
//! decisions out.
//!
//! * **Queues** (asynchronous compaction, 3.2): [`Scheduler::refill`] picks
//!   jobs into one double-ended queue per level, kept in ascending size
//!   (input files, then bytes); a queued job reserves its input files, so
//!   later picks avoid them. Picking is thereby decoupled from running: a
//!   thread that finishes takes the next queued job at once.
//! * **Staleness**: before every refill and take, [`Scheduler::revalidate`]
//!   drops a queued job whose plan the current version would no longer
//!   produce (an input gone or moved, the files below changed); its level
//!   is picked again. Queues are at most [`Scheduler::max_queue_depth`]
//!   deep, so picks are never far behind the version.
//! * **Priority** (3.3): trigger scores net of queued and running work,
//!   the file with the fewest overlaps below, the queue end by measured
//!   throughput, the smallest sub-compaction on the calling thread
//!   (`compaction::priority`).
//! * **Cross-level** (3.4): a job picked at `L` while `L+1` still scores
//!   above 1 takes the overlapping `L+2` files and writes there
//!   (`picker::cross_level`).
//! * **Manual** compactions run on the thread that asked for them
//!   ([`Scheduler::start_manual`]): they reserve their files among the
//!   running jobs and take them from queued automatic ones.

pub mod book;
pub mod placement;

use std::collections::{HashSet, VecDeque};

use shale_format::version_edit::NUM_LEVELS;

use crate::compaction::picker::{self, CompactionPlan, PickReason, PickStyle, RunningCompaction};
use crate::compaction::priority::{self, QueueEnd, TakenWork};
use crate::options::Options;
use crate::version::{total_file_size, Version};
use book::ExecutorBook;

/// A job waiting in a queue or running.
#[derive(Debug, Clone)]
pub struct ScheduledJob {
    /// Identifies the job from queueing to install.
    pub ticket: u64,
    /// What it compacts.
    pub plan: CompactionPlan,
    /// Asked for by `compact_range`: run by the asking thread.
    pub manual: bool,
    /// The level's trigger score (equation 1) when it was picked.
    pub trigger_score: f64,
    /// The first file's overlap count below (equation 2) when picked.
    pub overlap_score: usize,
}

impl ScheduledJob {
    /// Queue order: input files, then input bytes (ProckStore sorts by the
    /// number of tables).
    fn size_key(&self) -> (usize, u64) {
        (self.plan.input_files(), self.plan.input_bytes())
    }

    /// How errors name the job: "compaction L0->L1".
    pub fn name(&self) -> String {
        format!(
            "compaction L{}->L{}",
            self.plan.level, self.plan.output_level
        )
    }

    /// One line for the LOG and the `shale.scheduler` property.
    pub fn describe(&self) -> String {
        let levels: Vec<String> = self
            .plan
            .inputs
            .iter()
            .enumerate()
            .map(|(i, files)| format!("{}@{}", files.len(), self.plan.level + i))
            .collect();
        format!(
            "ticket {} L{}->L{} ({}{}): {} files, {} bytes; scores trigger {:.2} overlap {}",
            self.ticket,
            self.plan.level,
            self.plan.output_level,
            self.plan.reason,
            if self.plan.is_cross_level() {
                ", cross-level"
            } else {
                ""
            },
            levels.join(" + "),
            self.plan.input_bytes(),
            self.trigger_score,
            self.overlap_score,
        )
    }
}

/// Counters for the `shale.scheduler` property (and, flattened, for the
/// statistics document's `scheduler` object).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SchedulerCounts {
    /// Jobs put in a queue.
    pub queued: u64,
    /// Queued jobs dropped because the version moved under them.
    pub dropped_stale: u64,
    /// Jobs that were cross-level.
    pub cross_level: u64,
    /// Jobs run as sub-compactions, and the sub-compactions they made.
    pub split_jobs: u64,
    /// See `split_jobs`.
    pub subcompactions: u64,
    /// Jobs that moved a file down without rewriting it.
    pub trivial_moves: u64,
    /// Jobs completed.
    pub completed: u64,
    /// Jobs that every executor of their chain refused (released, to be
    /// picked again).
    pub refused: u64,
    /// Jobs that failed (their error became the background error).
    pub failed: u64,
}

impl SchedulerCounts {
    /// Adds `other`'s counts to these (a run that opens a database several
    /// times sums what each open did).
    pub fn add(&mut self, other: &SchedulerCounts) {
        self.queued += other.queued;
        self.dropped_stale += other.dropped_stale;
        self.cross_level += other.cross_level;
        self.split_jobs += other.split_jobs;
        self.subcompactions += other.subcompactions;
        self.trivial_moves += other.trivial_moves;
        self.completed += other.completed;
        self.refused += other.refused;
        self.failed += other.failed;
    }
}

/// "N queued, N completed, ...": the line `shale.scheduler` and the bench
/// summary print after "Jobs: ".
impl std::fmt::Display for SchedulerCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} queued, {} completed, {} failed, {} refused, {} dropped stale, {} trivial moves, \
             {} cross-level, {} split into {} sub-compactions",
            self.queued,
            self.completed,
            self.failed,
            self.refused,
            self.dropped_stale,
            self.trivial_moves,
            self.cross_level,
            self.split_jobs,
            self.subcompactions
        )
    }
}

/// The scheduler's state.
#[derive(Debug)]
pub struct Scheduler {
    queues: [VecDeque<ScheduledJob>; NUM_LEVELS],
    running: Vec<ScheduledJob>,
    next_ticket: u64,
    /// Most jobs waiting in one level's queue.
    pub max_queue_depth: usize,
    /// How files are picked.
    pub pick_style: PickStyle,
    /// Whether cross-level jobs are made.
    pub cross_level: bool,
    /// LevelDB's rotating compact pointers (encoded internal keys), one per
    /// level, advanced at pick time; the MANIFEST records them at install.
    ///
    /// The picker's own copy, seeded from the version set's at open: picks
    /// run under the scheduler's lock, which ranks after the version set's
    /// (`lock_order.rs`), so the picker cannot read the version set's. The
    /// two differ only while a picked job runs (this one is ahead, as
    /// LevelDB's is between pick and install); a job that fails leaves this
    /// one ahead, so the next pick moves on instead of retrying the range.
    pub compact_pointers: [Vec<u8>; NUM_LEVELS],
    /// The executors' measured throughput, counts and fallbacks.
    pub book: ExecutorBook,
    /// Counters.
    pub counts: SchedulerCounts,
    /// What manual compactions waiting for running jobs to end will take,
    /// by claim ([`Scheduler::start_manual`]): no thread starts a job that
    /// conflicts with one, so a manual compaction waits for the jobs that
    /// ran when it asked, not for each job picked after them too.
    manual_claims: Vec<(u64, RunningCompaction)>,
    next_claim: u64,
    /// The database is not read (a load): L0 turns urgent near its raised
    /// slowdown trigger (`priority::WriteTriggers`).
    pub loading: bool,
}

impl Scheduler {
    /// An empty scheduler configured from `options`.
    pub fn new(options: &Options) -> Scheduler {
        Scheduler {
            queues: Default::default(),
            running: Vec::new(),
            next_ticket: 1,
            max_queue_depth: options.background_compactions().max(2),
            pick_style: options.compaction_pick,
            cross_level: options.cross_level_compaction,
            compact_pointers: Default::default(),
            book: ExecutorBook::default(),
            counts: SchedulerCounts::default(),
            manual_claims: Vec::new(),
            next_claim: 1,
            loading: false,
        }
    }

    fn jobs(&self) -> impl Iterator<Item = &ScheduledJob> {
        self.queues.iter().flatten().chain(&self.running)
    }

    /// True when `number` is an input of a queued or running job.
    pub fn is_reserved(&self, number: u64) -> bool {
        self.jobs()
            .any(|j| j.plan.inputs.iter().flatten().any(|f| f.number == number))
    }

    /// Files and bytes taken from each level by jobs picked there (the
    /// subtrahends of equation 1).
    pub fn taken_work(&self) -> [TakenWork; NUM_LEVELS] {
        let mut taken = [TakenWork::default(); NUM_LEVELS];
        for job in self.jobs() {
            let first = &job.plan.inputs[0];
            taken[job.plan.level].files += first.len();
            taken[job.plan.level].bytes += total_file_size(first);
        }
        taken
    }

    /// Jobs waiting per level.
    pub fn queue_lengths(&self) -> [usize; NUM_LEVELS] {
        let mut lengths = [0; NUM_LEVELS];
        for (level, queue) in self.queues.iter().enumerate() {
            lengths[level] = queue.len();
        }
        lengths
    }

    /// The running jobs.
    pub fn running(&self) -> &[ScheduledJob] {
        &self.running
    }

    /// The queued jobs, level by level, smallest first.
    pub fn queued(&self) -> impl Iterator<Item = &ScheduledJob> {
        self.queues.iter().flatten()
    }

    /// True when nothing is queued or running.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.queues.iter().all(VecDeque::is_empty)
    }

    fn conflicts_with_others(&self, plan: &CompactionPlan, except: Option<u64>) -> bool {
        let record = plan.running();
        self.jobs()
            .filter(|j| Some(j.ticket) != except)
            .any(|j| j.plan.running().conflicts_with(&record))
    }

    fn conflicts_with_running(&self, plan: &CompactionPlan) -> bool {
        let record = plan.running();
        self.running
            .iter()
            .any(|j| j.plan.running().conflicts_with(&record))
    }

    /// True when `plan` conflicts with what a waiting manual compaction
    /// holds (see `manual_claims`).
    fn conflicts_with_claims(&self, plan: &CompactionPlan) -> bool {
        if self.manual_claims.is_empty() {
            return false;
        }
        let record = plan.running();
        self.manual_claims
            .iter()
            .any(|(_, claimed)| claimed.conflicts_with(&record))
    }

    /// Drops every queued job whose plan `version` would not produce any
    /// more: an input gone or at another level, or different files below.
    /// Returns the dropped jobs (their levels are picked again by the next
    /// refill).
    pub fn revalidate(&mut self, version: &Version, options: &Options) -> Vec<ScheduledJob> {
        let mut dropped = Vec::new();
        for queue in &mut self.queues {
            let (keep, stale): (Vec<ScheduledJob>, Vec<ScheduledJob>) = queue
                .drain(..)
                .partition(|job| plan_still_holds(version, options, &job.plan));
            *queue = keep.into();
            dropped.extend(stale);
        }
        self.counts.dropped_stale += dropped.len() as u64;
        dropped
    }

    fn enqueue(&mut self, job: ScheduledJob) {
        let queue = &mut self.queues[job.plan.level];
        let key = job.size_key();
        let at = queue.partition_point(|j| j.size_key() <= key);
        queue.insert(at, job);
        self.counts.queued += 1;
    }

    fn new_ticket(&mut self) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        ticket
    }

    /// Picks jobs into the queues while a level's trigger score (net of
    /// queued and running work) is at least 1 and its queue has room. The
    /// compact pointers advance as LevelDB's do (at pick time). An L0 pick
    /// may evict queued (not running) deeper jobs that hold files it needs.
    /// Returns the jobs queued.
    pub fn refill(&mut self, version: &Version, options: &Options) -> Vec<ScheduledJob> {
        let mut queued = Vec::new();
        let l0_urgent = priority::l0_is_urgent(version.num_files(0), options, self.loading);
        // Each round picks at most one job; a level that yields nothing is
        // not tried again this refill.
        let mut exhausted = [false; NUM_LEVELS];
        // Every pick takes work off a level's score, so this ends; the
        // bound only guards against a rule that would not.
        for _ in 0..NUM_LEVELS * self.max_queue_depth {
            let scores = priority::trigger_scores(version, options, &self.taken_work());
            let level = priority::levels_by_priority(&scores, l0_urgent)
                .into_iter()
                .find(|&l| !exhausted[l] && self.queues[l].len() < self.max_queue_depth);
            let Some(level) = level else {
                break;
            };
            match self.pick_at(version, options, level, &scores) {
                Some(job) => {
                    queued.push(job.clone());
                    self.enqueue(job);
                }
                None => exhausted[level] = true,
            }
        }
        // The seek compaction, when no size compaction is waiting.
        if self.is_idle() {
            if let Some(plan) = picker::seek_plan(version, options) {
                if !self.conflicts_with_others(&plan, None) {
                    let job = ScheduledJob {
                        ticket: self.new_ticket(),
                        plan,
                        manual: false,
                        trigger_score: 0.0,
                        overlap_score: 0,
                    };
                    queued.push(job.clone());
                    self.enqueue(job);
                }
            }
        }
        queued
    }

    /// One job at `level`, from the best candidate file that conflicts with
    /// nothing queued or running (an L0 pick may evict queued deeper jobs).
    fn pick_at(
        &mut self,
        version: &Version,
        options: &Options,
        level: usize,
        scores: &[f64],
    ) -> Option<ScheduledJob> {
        let reserved: HashSet<u64> = self
            .jobs()
            .flat_map(|j| j.plan.inputs.iter().flatten().map(|f| f.number))
            .collect();
        let candidates = picker::candidate_files(
            version,
            level,
            &self.compact_pointers[level],
            self.pick_style,
            &|n| reserved.contains(&n),
        );
        for file in candidates {
            let overlap_score = picker::overlap_score(version, level, &file);
            let reason = PickReason::Size {
                score: scores[level],
            };
            let mut plan = picker::plan_from_file(version, options, level, file, reason);
            if self.conflicts_with_running(&plan) {
                continue;
            }
            if self.conflicts_with_others(&plan, None) {
                // L0 cannot wait behind deeper jobs that are only queued; it
                // never evicts another L0 job (that would pick forever), nor
                // L1's while L1 outranks it (`priority::l0_outranks_l1`).
                let l1_first = || {
                    let gross = priority::trigger_scores(
                        version,
                        options,
                        &[TakenWork::default(); NUM_LEVELS],
                    );
                    !priority::l0_outranks_l1(&gross) && self.conflicts_with_queued_at(&plan, 1)
                };
                if level != 0 || self.conflicts_with_queued_at(&plan, 0) || l1_first() {
                    continue;
                }
                self.evict_queued_conflicting(&plan);
            }
            if self.cross_level {
                let next_score = scores.get(level + 1).copied().unwrap_or(0.0);
                if let Some(cross) = picker::cross_level(version, options, &plan, next_score) {
                    if !self.conflicts_with_others(&cross, None) {
                        plan = cross;
                    }
                }
            }
            self.compact_pointers[level] = plan.compact_pointer.encoded().to_vec();
            return Some(ScheduledJob {
                ticket: self.new_ticket(),
                plan,
                manual: false,
                trigger_score: scores[level],
                overlap_score,
            });
        }
        None
    }

    fn conflicts_with_queued_at(&self, plan: &CompactionPlan, level: usize) -> bool {
        let record = plan.running();
        self.queues[level]
            .iter()
            .any(|j| j.plan.running().conflicts_with(&record))
    }

    fn evict_queued_conflicting(&mut self, plan: &CompactionPlan) {
        let record = plan.running();
        for queue in &mut self.queues {
            let before = queue.len();
            queue.retain(|j| j.manual || !j.plan.running().conflicts_with(&record));
            self.counts.dropped_stale += (before - queue.len()) as u64;
        }
    }

    /// The next job for a compaction thread: levels by priority (an urgent
    /// L0 first, then by trigger score), from the `end` of the level's queue
    /// (equation 3), skipping jobs that conflict with running ones and
    /// manual jobs (their callers take those). The job moves to running.
    pub fn take(
        &mut self,
        version: &Version,
        options: &Options,
        end: QueueEnd,
    ) -> Option<ScheduledJob> {
        let scores =
            priority::trigger_scores(version, options, &[TakenWork::default(); NUM_LEVELS]);
        let l0_urgent = priority::l0_is_urgent(version.num_files(0), options, self.loading);
        let mut levels: Vec<usize> = (0..NUM_LEVELS)
            .filter(|&l| !self.queues[l].is_empty())
            .collect();
        priority::sort_by_urgency(&mut levels, &scores, l0_urgent);
        for level in levels {
            let order: Vec<usize> = match end {
                QueueEnd::Small => (0..self.queues[level].len()).collect(),
                QueueEnd::Large => (0..self.queues[level].len()).rev().collect(),
            };
            for i in order {
                let job = &self.queues[level][i];
                if job.manual
                    || self.conflicts_with_running(&job.plan)
                    || self.conflicts_with_claims(&job.plan)
                {
                    continue;
                }
                if let Some(job) = self.queues[level].remove(i) {
                    self.running.push(job.clone());
                    return Some(job);
                }
            }
        }
        None
    }

    /// A claim for a manual compaction about to plan: pass it to every
    /// [`Scheduler::start_manual`] of that compaction and give it back with
    /// [`Scheduler::release_claim`] once the compaction stops waiting.
    pub fn new_claim(&mut self) -> u64 {
        let claim = self.next_claim;
        self.next_claim += 1;
        claim
    }

    /// Drops what `claim` held back (nothing when it holds nothing).
    pub fn release_claim(&mut self, claim: u64) {
        self.manual_claims.retain(|(c, _)| *c != claim);
    }

    /// Starts a manual compaction's plan for the thread that asked for it:
    /// it runs at once, taking its files from queued automatic jobs (they
    /// are dropped and picked again later, as an L0 pick does), so a manual
    /// compaction never starves behind picks. `None` while a running job or
    /// another manual one holds some of its files: the plan is then held
    /// under `claim`, so that no thread starts a job it conflicts with
    /// while the caller waits for a job to end and plans again.
    pub fn start_manual(&mut self, plan: CompactionPlan, claim: u64) -> Option<ScheduledJob> {
        let record = plan.running();
        let held = self
            .jobs()
            .filter(|j| j.manual || self.running.iter().any(|r| r.ticket == j.ticket))
            .any(|j| j.plan.running().conflicts_with(&record));
        self.release_claim(claim);
        if held {
            self.manual_claims.push((claim, record));
            return None;
        }
        self.evict_queued_conflicting(&plan);
        let job = ScheduledJob {
            ticket: self.new_ticket(),
            plan,
            manual: true,
            trigger_score: 0.0,
            overlap_score: 0,
        };
        self.counts.queued += 1;
        self.running.push(job.clone());
        Some(job)
    }

    /// The running job `ticket` is over (installed or failed).
    pub fn finish(&mut self, ticket: u64) {
        self.running.retain(|j| j.ticket != ticket);
    }
}

/// True when `plan` is what picking from its first inputs would produce in
/// `version`: every input still at its level, the same files below.
pub fn plan_still_holds(version: &Version, options: &Options, plan: &CompactionPlan) -> bool {
    let present = plan.inputs.iter().enumerate().all(|(i, files)| {
        files.iter().all(|f| {
            version.files[plan.level + i]
                .iter()
                .any(|g| g.number == f.number)
        })
    });
    if !present || plan.reason == PickReason::Manual {
        return present;
    }
    let numbers = |p: &CompactionPlan| -> Vec<Vec<u64>> {
        p.inputs
            .iter()
            .map(|files| {
                let mut n: Vec<u64> = files.iter().map(|f| f.number).collect();
                n.sort_unstable();
                n
            })
            .collect()
    };
    let Some(first) = plan.inputs[0].first().cloned() else {
        return false;
    };
    let mut again = picker::plan_from_file(version, options, plan.level, first, plan.reason);
    if plan.is_cross_level() {
        match picker::cross_level(version, options, &again, f64::INFINITY) {
            Some(cross) => again = cross,
            None => return false,
        }
    }
    numbers(&again) == numbers(plan)
}

#[cfg(test)]
mod tests;
