//! The compaction service: the one owner of a job's life, from queued to
//! installed or failed (`docs/compaction.md`).
//!
//! It owns the scheduler (queues, reservations, the executor ledger) under
//! a mutex of its own and one condition variable. Everything that happens
//! to a job goes through it, so "why did this job run there, and what
//! happened to it" is answered here and in the LOG lines it writes:
//!
//! ```text
//!   refill ──► queued ──► next(lane) ──► placed ──► run on chain[i]
//!   (picked,    (files     (taken by a    (chain,     │
//!    reserved)   reserved)  thread)        once)      ├─ installed ──► finish(Installed):
//!                                                     │    ledger, fallback counted once
//!   start_manual(plan) ─► (reserved, taken by         ├─ error or panic ──► judge(..):
//!                          the caller) ──► placed ────┤    Refused: counted, chain[i+1]
//!                                                     │      runs it from scratch
//!                                                     │    Failed ──► finish(Failed):
//!                                                     │      background error
//!                                                     └─ no executor left ──► finish(Refused):
//!                                                          picked again later
//!   finish(..): the reservation released, waiters woken
//! ```
//!
//! * [`Service::next`] blocks a compaction thread until there may be work
//!   and hands it a job from the end of a queue its lane has earned;
//!   [`Service::plan_manual`] reserves and takes a manual compaction's plan
//!   for its caller.
//! * [`Service::place`] decides where a job runs, once: the executor chain
//!   and the sub-compactions (`scheduler::placement`), with the remote
//!   lane's worker and the options' custom executor first. Executors only
//!   run what they are given; they never place, retry or fall back on
//!   their own.
//! * [`Service::judge`] decides what an executor's error or panic means
//!   for the job, an [`Outcome`]: refused (the next executor of the chain
//!   runs it; counted and logged once) or failed; [`Service::finish`]
//!   records the job's [`Outcome`] in the ledger
//!   that `shale.scheduler`, `DB::scheduler_stats`, the bench summary and
//!   the queue-end choice all read, releases the job's files and wakes
//!   whoever waits.
//! * Waits are signalled, never polled: [`Service::next`],
//!   [`Service::wait_for_job_end`] and [`Service::wait_idle`] sleep on the
//!   service's one condition variable, under its bell: two counters (work
//!   that may have appeared, jobs that ended) that a waiter notes before it
//!   looks and sleeps on until they move, so no wake-up is lost.
//!
//! Lock order: the version set, then the scheduler (this service's), then
//! the database's state, then the bell. Code holding the scheduler reads
//! the current version (the state lock), so a pick never sees a version
//! older than the jobs the service knows finished; the bell is a leaf, so
//! anything (an install under the state lock) may ring it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use shale_compact::job::{CompactionJob, PhaseStats};
use shale_compact::ExecutorId;
use shale_compact::ExecutorKind::{self, OpenCl, Parallel, Remote, Streaming};
use shale_format::Error;

use crate::compaction::picker::CompactionPlan;
use crate::compaction::priority::{self, QueueEnd};
use crate::compaction::scheduler::placement::{self, Chain, DeviceFacts, ExecutorChoice, Load};
use crate::compaction::scheduler::{ScheduledJob, Scheduler};
use crate::info_log::InfoLog;
use crate::lock_order::{self, Guard, Rank};
use crate::options::Options;
use crate::version::{total_file_size, Version};

/// Which executors a compaction thread offers its jobs to first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// The OpenCL device first, then the CPU.
    Device,
    /// CPU executors only.
    Host,
    /// A remote worker first, then the CPU.
    Remote,
}

/// What placement knows of the database's executors (fixed at open; the
/// device is told later, by [`Service::set_device`], when `auto` has
/// looked for it).
#[derive(Debug, Clone)]
pub struct PlacementFacts {
    /// `compaction_executor`.
    pub choice: ExecutorChoice,
    /// True when the database has remote workers.
    pub remote: bool,
    /// The options' custom executor, by name.
    pub custom: Option<&'static str>,
}

/// How a job, or one executor's attempt at it, ended.
#[derive(Debug)]
pub enum Outcome {
    /// Its outputs are in the current version.
    Installed(Box<Installed>),
    /// An executor declined the job or could not run it (a device without
    /// the memory, a worker that is down or lied, a caught panic): the next
    /// executor of its chain runs it from scratch. As a job's end (no
    /// executor of its chain could take it), not an error: its files are
    /// released and it is picked again when there is new work.
    Refused(Refusal),
    /// It did not complete: the error becomes the background error.
    Failed(Error),
}

/// What the ledger records of an installed job.
#[derive(Debug, Clone, Default)]
pub struct Installed {
    /// The executor that wrote its outputs (empty for a trivial move).
    pub executor: String,
    /// Input bytes.
    pub input_bytes: u64,
    /// Seconds from start to install.
    pub seconds: f64,
    /// Input entries.
    pub entries: u64,
    /// Sub-compactions it ran as.
    pub subcompactions: usize,
    /// A file moved down without being rewritten.
    pub trivial_move: bool,
    /// Why it did not run on the first executor of its chain, if it did not.
    pub fallback: Option<String>,
    /// What it read and wrote, and the time of each phase.
    pub phases: PhaseStats,
    /// Bytes of its output tables.
    pub written_bytes: u64,
    /// Its output tables.
    pub output_files: usize,
    /// The levels after its install (for the LOG).
    pub summary: String,
}

/// One executor's attempt at a job that did not complete, and that the
/// next executor of the chain may redo: the executor said "not me"
/// ([`Error::Refused`]), failed ([`Error::ExecutorFailed`]) or panicked.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The executor.
    pub executor: ExecutorId,
    /// What it returned (for a panic, an executor failure with the
    /// panic's message).
    pub cause: Error,
    /// It panicked.
    pub panicked: bool,
}

impl Refusal {
    /// A refusal by `executor` for `reason`.
    pub fn new(executor: impl Into<ExecutorId>, reason: impl Into<String>) -> Refusal {
        let executor = executor.into();
        Refusal {
            executor,
            cause: Error::refused(executor.name(), reason),
            panicked: false,
        }
    }

    /// The job's error when no executor of its chain completed it: a
    /// refusal, never the background error.
    pub fn into_error(self) -> Error {
        match self.cause {
            Error::Refused { .. } => self.cause,
            cause => Error::refused(
                self.executor.name(),
                shale_compact::chain::fallback_reason(self.executor.name(), &cause),
            ),
        }
    }
}

/// The one wording of why a job left an executor: the job's fallback
/// reason if a later executor completes it.
impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&shale_compact::chain::fallback_reason(
            self.executor.name(),
            &self.cause,
        ))
    }
}

/// Where a job runs: its executor chain and how many sub-compactions it
/// is cut into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The executors to try, first choice first, and why.
    pub chain: Chain,
    /// Sub-compactions (1: whole).
    pub parts: usize,
}

/// What waiters sleep on: counters that only grow.
#[derive(Debug, Default)]
struct Bell {
    /// Bumped when something may have made compaction work: a flush, an
    /// install, a resume, a seek allowance run out, a job's end.
    work: u64,
    /// Bumped when a job ends, a background error is recorded, or a thread
    /// finds nothing to do.
    ended: u64,
    closing: bool,
}

/// The compaction service (see the module comment).
pub struct Service {
    scheduler: Mutex<Scheduler>,
    bell: Mutex<Bell>,
    rung: Condvar,
    options: Options,
    executors: PlacementFacts,
    /// The OpenCL device, when the database has one: set once the
    /// database knows (`auto` looks for it beside the database, and the
    /// first compaction thread to see the answer sets it); no device until
    /// then.
    device: OnceLock<Option<DeviceFacts>>,
    /// Input bytes per second of the last compaction out of L0 (`f64`
    /// bits; 0 before the first), recorded with the job.
    l0_drain_rate: AtomicU64,
    /// The database is not read (a load): L0's write triggers are
    /// `l0_load_slack` higher, and so is where L0 turns urgent.
    loading: AtomicBool,
    info_log: InfoLog,
}

/// "The current version, or `None` while a background error stands (no job
/// starts then)", read under the scheduler's lock.
pub type Current<'a> = &'a dyn Fn() -> Option<Arc<Version>>;

impl Service {
    /// A service with empty queues.
    pub fn new(options: &Options, executors: PlacementFacts, info_log: InfoLog) -> Service {
        Service {
            scheduler: Mutex::new(Scheduler::new(options)),
            bell: Mutex::new(Bell {
                work: 1,
                ..Bell::default()
            }),
            rung: Condvar::new(),
            options: options.clone(),
            executors,
            device: OnceLock::new(),
            l0_drain_rate: AtomicU64::new(0),
            loading: AtomicBool::new(false),
            info_log,
        }
    }

    /// Whether the database is loading (not read): the write path's
    /// sample (`db/read_activity.rs`). May be called under any lock.
    pub fn set_loading(&self, loading: bool) {
        self.loading.store(loading, Ordering::Relaxed);
    }

    /// The database's OpenCL device (or none), once the database knows it;
    /// until then jobs are placed as if there were none. Set once: true
    /// the first time, later calls are ignored.
    pub fn set_device(&self, device: Option<DeviceFacts>) -> bool {
        self.device.set(device).is_ok()
    }

    fn device(&self) -> Option<&DeviceFacts> {
        self.device.get().and_then(Option::as_ref)
    }

    fn lock(&self) -> Guard<'_, Scheduler> {
        let mut scheduler = lock_order::lock(&self.scheduler, Rank::Scheduler);
        scheduler.loading = self.loading.load(Ordering::Relaxed);
        scheduler
    }

    fn bell(&self) -> Guard<'_, Bell> {
        lock_order::lock(&self.bell, Rank::Bell)
    }

    /// Sleeps while `asleep` holds for the bell, or until the service closes.
    fn sleep_while(&self, asleep: impl Fn(&Bell) -> bool) -> bool {
        let mut bell = self.bell();
        while !bell.closing && asleep(&bell) {
            bell = bell.wait(&self.rung);
        }
        !bell.closing
    }

    fn ring(&self, change: impl FnOnce(&mut Bell)) {
        change(&mut self.bell());
        self.rung.notify_all();
    }

    /// Reads the scheduler's state and counters.
    pub fn with_scheduler<T>(&self, read: impl FnOnce(&Scheduler) -> T) -> T {
        read(&self.lock())
    }

    /// Sets LevelDB's compact pointers (the MANIFEST's, at open).
    pub fn set_compact_pointers(
        &self,
        pointers: [Vec<u8>; shale_format::version_edit::NUM_LEVELS],
    ) {
        self.lock().compact_pointers = pointers;
    }

    /// Something may have made compaction work: threads look again. May be
    /// called under any lock.
    pub fn work_available(&self) {
        self.ring(|bell| bell.work += 1);
    }

    /// A background error was recorded: waiters look again (and give up).
    /// May be called under any lock.
    pub fn error_recorded(&self) {
        self.ring(|bell| bell.ended += 1);
    }

    /// The database closes: threads and waiters return.
    pub fn close(&self) {
        self.ring(|bell| bell.closing = true);
    }

    /// Blocks until there may be work, then revalidates and refills the
    /// queues and takes a job for `lane` from the end its measured
    /// throughput earns (equation 3). `seen`: the work count this thread
    /// last looked at (0: look at once). `None` once the database closes:
    /// a closing database starts no job, as LevelDB's close waits only for
    /// the one running. What is left stays in the tree, scored again at the
    /// next open, and the close does not sit behind a backlog.
    pub fn next(&self, lane: Lane, seen: &mut u64, current: Current<'_>) -> Option<ScheduledJob> {
        loop {
            let (work, closing) = {
                let bell = self.bell();
                (bell.work, bell.closing)
            };
            if closing {
                return None;
            }
            if work != *seen {
                *seen = work;
                let mut scheduler = self.lock();
                if let Some(version) = current() {
                    self.refill(&mut scheduler, &version);
                    let end = self.queue_end(&scheduler, lane);
                    if let Some(job) = scheduler.take(&version, &self.options, end) {
                        // More may be ready once it is taken.
                        *seen = 0;
                        return Some(job);
                    }
                }
                drop(scheduler);
                // Nothing to do now: whoever waits for idleness looks again.
                self.ring(|bell| bell.ended += 1);
            }
            if !self.sleep_while(|bell| bell.work == *seen) {
                return None;
            }
        }
    }

    /// Drops stale queued jobs and picks new ones, logging both.
    fn refill(&self, scheduler: &mut Scheduler, version: &Version) {
        for job in scheduler.revalidate(version, &self.options) {
            shale_log!(self.info_log, "Scheduler: dropped stale {}", job.describe());
        }
        for job in scheduler.refill(version, &self.options) {
            shale_log!(
                self.info_log,
                "Scheduler: queued {} (queue L{} now {})",
                job.describe(),
                job.plan.level,
                scheduler.queue_lengths()[job.plan.level]
            );
        }
    }

    /// Equation 3 for `lane`: its executor's throughput against the others'.
    fn queue_end(&self, scheduler: &Scheduler, lane: Lane) -> QueueEnd {
        let book = &scheduler.book;
        let cpu = [Parallel, Streaming]
            .into_iter()
            .filter_map(|kind| book.throughput(kind))
            .reduce(f64::max);
        match lane {
            Lane::Device => priority::queue_end(book.throughput(OpenCl), &[cpu], QueueEnd::Large),
            Lane::Host if self.device().is_some() => {
                priority::queue_end(cpu, &[book.throughput(OpenCl)], QueueEnd::Small)
            }
            Lane::Host => QueueEnd::Large,
            Lane::Remote => priority::queue_end(book.throughput(Remote), &[cpu], QueueEnd::Large),
        }
    }

    /// Plans a manual compaction under the service's lock from the current
    /// version (read through `current`), so that the plan sees every job
    /// the service knows ended, then reserves it and takes it for its
    /// caller ([`Scheduler::start_manual`]: its files are taken from queued
    /// automatic jobs). `None` when `plan` finds nothing to do; `Err(epoch)`
    /// while a running job holds some of its files: the plan is held under
    /// `claim` (from [`Service::manual_claim`]), so that threads start no
    /// job over its files; wait for a job to end with
    /// [`Service::wait_for_job_end`], then plan again.
    pub fn plan_manual<T>(
        &self,
        current: Current<'_>,
        claim: &ManualClaim<'_>,
        plan: impl FnOnce(&Version) -> Option<(CompactionPlan, T)>,
    ) -> Option<(Result<ScheduledJob, u64>, T)> {
        let mut scheduler = self.lock();
        let ended = self.bell().ended;
        let Some(version) = current() else {
            scheduler.release_claim(claim.id);
            return None;
        };
        let Some((plan, extra)) = plan(&version) else {
            scheduler.release_claim(claim.id);
            return None;
        };
        drop(version);
        // Waiting, the caller sleeps until a running job ends; threads are
        // not woken (they would find the claimed jobs held back, report
        // themselves idle and wake the caller for nothing, over and over).
        let taken = scheduler.start_manual(plan, claim.id).ok_or(ended);
        Some((taken, extra))
    }

    /// A claim for one manual compaction's plans ([`Service::plan_manual`]):
    /// what it holds back is let go when it drops, and the threads look
    /// again.
    pub fn manual_claim(&self) -> ManualClaim<'_> {
        ManualClaim {
            service: self,
            id: self.lock().new_claim(),
        }
    }

    /// Sleeps until a job ends (or an error is recorded) after `ended`, an
    /// epoch from [`Service::plan_manual`]; `false` when the service closes.
    pub fn wait_for_job_end(&self, ended: u64) -> bool {
        self.sleep_while(|bell| bell.ended == ended)
    }

    /// Where `job` (the described `scheduled`) runs: its executor chain
    /// and the sub-compactions it is cut into, decided here once (by
    /// `scheduler::placement`) and logged. `lane`: the thread's;
    /// `requested`: the executor a manual compaction named (then
    /// `streaming` if it fails), instead of placement's choice.
    pub fn place(
        &self,
        scheduled: &ScheduledJob,
        job: &CompactionJob,
        lane: Lane,
        requested: Option<ExecutorKind>,
    ) -> Placed {
        let parts = self.parts(scheduled, job, lane, requested);
        let chain = match requested {
            Some(kind) => placement::requested(kind),
            None => self.chain(job, lane, parts, !scheduled.manual),
        };
        let parts = placement::parts_on(&chain, parts, self.options.opencl.subcompactions);
        shale_log!(
            self.info_log,
            "Compaction #{}: {}; executor chain {} ({}){}",
            job.id,
            scheduled.describe(),
            chain.names().join(" -> "),
            chain.reason,
            if parts > 1 {
                format!(", up to {parts} sub-compactions")
            } else {
                String::new()
            }
        );
        Placed { chain, parts }
    }

    /// Placement's chain for `job` on `lane`, cut into `parts`; a
    /// `background` job is one that no caller waits for.
    fn chain(&self, job: &CompactionJob, lane: Lane, parts: usize, background: bool) -> Chain {
        let scheduler = self.lock();
        let load = Load {
            cores: crate::options::available_cores(),
            other_jobs: scheduler.running().len().saturating_sub(1),
            parts,
            job_sequence: job.id,
            foreground: background,
        };
        let device = match lane {
            Lane::Device => self.device(),
            Lane::Host | Lane::Remote => None,
        };
        let chain = placement::chain(job, &self.executors.choice, device, &scheduler.book, &load);
        drop(scheduler);
        let chain = match lane {
            Lane::Remote if self.executors.remote => placement::remote_first(chain),
            _ => chain,
        };
        match self.executors.custom {
            Some(custom) => placement::custom_first(chain, custom),
            None => chain,
        }
    }

    /// How many sub-compactions `job` runs as on `lane`
    /// ([`placement::subcompactions`]).
    fn parts(
        &self,
        scheduled: &ScheduledJob,
        job: &CompactionJob,
        lane: Lane,
        requested: Option<ExecutorKind>,
    ) -> usize {
        placement::subcompactions(placement::PartsAsk {
            input_bytes: job.input_bytes(),
            part_bytes: job.max_output_file_size,
            whole: lane == Lane::Remote
                || requested == Some(Remote)
                || !self.options.key_order().is_bytewise(),
            urgent: scheduled.plan.level == 0 || scheduled.manual,
            cores: crate::options::available_cores(),
            other_jobs: self.lock().running().len().saturating_sub(1),
            max_subcompactions: self.options.subcompactions(),
        })
    }

    /// Executor `index` of `chain` did not complete job `job_id`: it
    /// returned `error`, or panicked (`error` then says with what). The
    /// service alone decides what that means, and records it once:
    ///
    /// * [`Outcome::Refused`]: the executor declined or failed in a way the
    ///   next one can redo ([`placement::passes_to_next_executor`]: not
    ///   corrupt input, not an I/O error), and it is not the last of the
    ///   chain. Counted against it (as a panic too, if it panicked) and
    ///   logged; the caller runs the job on `chain.executors[index + 1]`.
    /// * [`Outcome::Failed`]: anything else, the job's failure. A panic in
    ///   an executor that is not the reference is
    ///   [`Error::ExecutorFailed`]; the reference's (the last resort) is an
    ///   internal error of ShaleDB.
    pub fn judge(
        &self,
        job_id: u64,
        chain: &Chain,
        index: usize,
        error: Error,
        panicked: bool,
    ) -> Outcome {
        let executor = chain.executors[index];
        let next = chain.executors.get(index + 1).copied();
        let error = match error {
            Error::Internal(why) if panicked && next.is_some() => {
                Error::executor_failed(executor.name(), why)
            }
            other => other,
        };
        let next = next.filter(|_| placement::passes_to_next_executor(&error));
        if next.is_some() || panicked {
            self.lock().book.record_failure(executor, panicked);
            let what = if panicked { "panicked" } else { "failed" };
            let then = next.map_or(String::new(), |next| format!("; running it on {next}"));
            shale_log!(
                self.info_log,
                "Compaction #{job_id}: the {executor} executor {what}: {error}{then}"
            );
        }
        if next.is_none() {
            shale_log!(self.info_log, "Compaction #{job_id} failed: {error}");
            return Outcome::Failed(error);
        }
        Outcome::Refused(Refusal {
            executor,
            cause: error,
            panicked,
        })
    }

    /// Job `job` ended with `outcome`: recorded in the ledger (an
    /// installed job's executor, bytes, time, sub-compactions, fallback
    /// and level; a refused or failed job's count), logged, its files
    /// released, and whoever waits woken.
    pub fn finish(&self, job: &ScheduledJob, outcome: &Outcome) {
        let mut scheduler = self.lock();
        scheduler.finish(job.ticket);
        match outcome {
            Outcome::Refused(refusal) => {
                scheduler.counts.refused += 1;
                shale_log!(
                    self.info_log,
                    "Scheduler: {} refused by every executor of its chain ({refusal}); picked again later",
                    job.describe(),
                );
            }
            Outcome::Failed(_) => scheduler.counts.failed += 1,
            Outcome::Installed(done) => {
                self.record_installed(&mut scheduler, job, done);
            }
        }
        drop(scheduler);
        // A refused job is not work again until something else changes:
        // picking it at once would only be refused again.
        let more = u64::from(!matches!(outcome, Outcome::Refused(_)));
        self.ring(|bell| {
            bell.ended += 1;
            bell.work += more;
        });
    }

    /// The ledger's record of an installed job, and its LOG lines.
    fn record_installed(&self, scheduler: &mut Scheduler, job: &ScheduledJob, done: &Installed) {
        let plan = &job.plan;
        scheduler.counts.completed += 1;
        scheduler.book.record_level(
            plan.output_level,
            done.seconds,
            if done.trivial_move {
                0
            } else {
                done.input_bytes
            },
            done.written_bytes,
        );
        if done.trivial_move {
            scheduler.counts.trivial_moves += 1;
            let moved = &plan.inputs[0];
            let numbers: Vec<String> = moved.iter().map(|f| format!("#{}", f.number)).collect();
            shale_log!(
                self.info_log,
                "Moved {} to level-{} {} bytes: {}",
                numbers.join(" "),
                plan.level + 1,
                total_file_size(moved),
                done.summary
            );
            return;
        }
        scheduler
            .book
            .record_job(&done.executor, done.input_bytes, done.seconds, done.entries);
        scheduler.book.record_phases(&done.executor, &done.phases);
        if plan.is_cross_level() {
            scheduler.counts.cross_level += 1;
        }
        if plan.level == 0 && done.seconds > 0.0 {
            let rate = done.input_bytes as f64 / done.seconds;
            self.l0_drain_rate.store(rate.to_bits(), Ordering::Relaxed);
        }
        if done.subcompactions > 1 {
            scheduler.counts.split_jobs += 1;
            scheduler.counts.subcompactions += done.subcompactions as u64;
        }
        if let Some(reason) = &done.fallback {
            scheduler.book.record_fallback(reason.clone());
            shale_log!(
                self.info_log,
                "Compaction #{}: fallback to the {} executor: {reason}",
                job.ticket,
                done.executor
            );
        }
        shale_log!(
            self.info_log,
            "Compaction #{} done by {}{}: read {} bytes, wrote {} bytes in {} files, {:.3} s; {}",
            job.ticket,
            done.executor,
            if done.subcompactions > 1 {
                format!(" in {} sub-compactions", done.subcompactions)
            } else {
                String::new()
            },
            done.input_bytes,
            done.written_bytes,
            done.output_files,
            done.seconds,
            done.summary
        );
    }

    /// A memtable flush wrote `bytes` to `level` in `seconds`: the ledger
    /// counts it with the level's compactions.
    pub fn record_flush(&self, level: usize, seconds: f64, bytes: u64) {
        self.lock().book.record_level(level, seconds, 0, bytes);
    }

    /// Input bytes per second of the last compaction out of L0 (`None`
    /// before the first): the write throttle's rate. Read without a lock,
    /// so the write path may ask while it holds the state lock.
    pub fn l0_drain_rate(&self) -> Option<f64> {
        let rate = f64::from_bits(self.l0_drain_rate.load(Ordering::Relaxed));
        (rate > 0.0).then_some(rate)
    }

    /// Blocks until no compaction is needed, queued or running: the
    /// queues, refilled from the current version, are empty and nothing
    /// runs. `false` when a background error stands or the service closes.
    pub fn wait_idle(&self, current: Current<'_>) -> bool {
        loop {
            let ended = self.bell().ended;
            {
                let mut scheduler = self.lock();
                let Some(version) = current() else {
                    return false;
                };
                self.refill(&mut scheduler, &version);
                if scheduler.is_idle() {
                    return true;
                }
            }
            self.work_available();
            if !self.sleep_while(|bell| bell.ended == ended) {
                return false;
            }
        }
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("executors", &self.executors)
            .finish_non_exhaustive()
    }
}

/// A manual compaction's hold on the files of its plan while it waits
/// ([`Service::manual_claim`]).
#[derive(Debug)]
pub struct ManualClaim<'s> {
    service: &'s Service,
    id: u64,
}

impl Drop for ManualClaim<'_> {
    fn drop(&mut self) {
        self.service.lock().release_claim(self.id);
        // Jobs held back for the claim may be taken now.
        self.service.work_available();
    }
}
