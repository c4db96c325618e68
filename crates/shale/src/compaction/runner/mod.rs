//! The compaction runner: the one place that carries a job out, from the
//! thread that takes it to the install. It owns the database's executors
//! and its compaction service, and reaches the engine only through
//! [`JobHost`] (`compaction::host`).
//!
//! ```text
//!   thread loop ──► Service::next(lane) ──► run_job ──► Service::place (chain, parts; logged)
//!                                              │
//!                      run_chain: chain[0] in parts ─ error/panic ─► Service::judge
//!                                 chain[1] ...        (refused: next; failed: end)
//!                                              │
//!                      JobHost::install ──► Service::finish (ledger, LOG, files released)
//!                                      └──► JobHost::job_ended (background error, waiters)
//! ```
//!
//! Each compaction thread serves a lane: the device lane (when the database
//! has an OpenCL device) offers its jobs to the device first; host lanes run
//! them on CPU executors; remote lanes on a worker. Manual compactions
//! (`manual.rs`) run the same `run_job` on the calling thread.

mod manual;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use shale_compact::job::{CompactionJob, CompactionOutput, Executor};
use shale_compact::{ExecutorId, ExecutorKind};
use shale_format::{Error, Result};

use crate::compaction::executors::{ExecutorChoice, Executors};
use crate::compaction::host::{JobHost, OutputIo};
use crate::compaction::priority;
use crate::compaction::scheduler::ScheduledJob;
use crate::compaction::service::{Installed, Lane, Outcome, Placed, Refusal, Service};
use crate::info_log::InfoLog;
use crate::options::Options;

/// Runs a database's compactions (see the module comment).
pub(crate) struct Runner {
    service: Service,
    executors: Executors,
    options: Options,
    info_log: InfoLog,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("executors", &self.executors)
            .finish_non_exhaustive()
    }
}

/// A job that ran: its output, the number of sub-compactions, and the I/O
/// whose pending outputs are released once the job is installed.
struct Ran<'a> {
    output: CompactionOutput,
    io: Box<dyn OutputIo + 'a>,
    subcompactions: usize,
}

impl Runner {
    /// The executors `options` call for (`opencl` named but unusable is an
    /// error) and an idle service.
    pub(crate) fn new(options: &Options, info_log: InfoLog) -> Result<Runner> {
        let executors = Executors::from_options(options)?;
        Ok(Runner {
            service: Service::new(options, executors.facts(), info_log.clone()),
            executors,
            options: options.clone(),
            info_log,
        })
    }

    /// The compaction service: queues, the ledger, the waits.
    pub(crate) fn service(&self) -> &Service {
        &self.service
    }

    /// The database's executors.
    pub(crate) fn executors(&self) -> &Executors {
        &self.executors
    }

    /// Starts the compaction threads over `host`: one per
    /// `background_compactions()` (at the nice level asked for, but the one
    /// that may serve the device: [`Priority`]), and one per remote worker
    /// under `auto`.
    pub(crate) fn start_threads<H: JobHost + 'static>(
        host: &Arc<H>,
        runner: impl Fn(&H) -> &Runner + Send + Sync + Copy + 'static,
    ) -> Result<Vec<JoinHandle<()>>> {
        let this = runner(host);
        let spawn = |name: String, lane: Option<usize>, priority: Priority| {
            let host = host.clone();
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let worker = match priority {
                        Priority::Normal => None,
                        Priority::Lowered(nice) => {
                            shale_compact::nice::lower_current_thread(nice);
                            None
                        }
                        Priority::NormalWithLoweredWorker(nice) => {
                            lowered_worker(nice).or_else(|| {
                                // No worker: the thread runs its jobs
                                // itself, lowered.
                                shale_compact::nice::lower_current_thread(nice);
                                None
                            })
                        }
                    };
                    runner(&host).compaction_loop(&*host, lane, worker)
                })
                .map_err(|e| Error::io("starting a compaction thread", e))
        };
        let nice = this.options.compaction_nice;
        let mut threads = Vec::new();
        for i in 0..this.options.background_compactions() {
            // Not the flush thread either: writers wait for flushes.
            let priority = if this.executors.may_serve_the_device(i) {
                Priority::NormalWithLoweredWorker(nice)
            } else {
                Priority::Lowered(nice)
            };
            threads.push(spawn(format!("shale-compact-{i}"), Some(i), priority)?);
        }
        // Threads that wait on remote workers, not on cores: the nice level
        // does not matter to them, and they leave the others to the CPU.
        for i in 0..this.executors.remote_lanes() {
            threads.push(spawn(format!("shale-remote-{i}"), None, Priority::Normal)?);
        }
        Ok(threads)
    }

    /// Takes jobs until the database closes. `thread`: the compaction
    /// thread's index, whose lane may change once `auto` knows its device;
    /// `None` for a thread of the remote workers.
    ///
    /// `worker`: the thread's lowered worker, when it may serve the device
    /// and keeps normal priority for it ([`Caller::CompactionThread`]); a
    /// job of the CPU's lane then runs whole on the worker, as it would on
    /// a lowered compaction thread. Once `auto`'s probe has found no
    /// device, the thread lowers itself and lets the worker go.
    fn compaction_loop(
        &self,
        host: &dyn JobHost,
        thread: Option<usize>,
        mut worker: Option<rayon::ThreadPool>,
    ) {
        let mut seen = 0;
        let current = || host.current_version();
        loop {
            if worker.is_some()
                && thread.is_some_and(|index| !self.executors.may_serve_the_device(index))
            {
                worker = None;
                shale_compact::nice::lower_current_thread(self.options.compaction_nice);
            }
            // The service learns the device in `run_job`, before placing.
            let lane = match thread {
                Some(index) => self.executors.lane_of_thread(index),
                None => Lane::Remote,
            };
            let Some(job) = self.service.next(lane, &mut seen, &current) else {
                return;
            };
            let outcome = match (worker.as_ref(), lane) {
                (Some(worker), Lane::Device) => {
                    let caller = Caller::CompactionThread(worker);
                    self.run_job_caught(host, &job, lane, None, caller)
                }
                (Some(worker), _) => {
                    worker.install(|| self.run_job_caught(host, &job, lane, None, Caller::User))
                }
                (None, _) => self.run_job_caught(host, &job, lane, None, Caller::User),
            };
            let _ = self.finish_job(host, &job, outcome);
        }
    }

    /// Tells the service the database's OpenCL device (or that it has
    /// none) once that is known and the service does not know it yet:
    /// `auto`'s probe may end after the open.
    pub(crate) fn note_device(&self) {
        if !self.executors.device_known() {
            return;
        }
        let device = self.executors.device_facts();
        if self.service.set_device(device) && self.executors.choice == ExecutorChoice::Auto {
            shale_log!(
                self.info_log,
                "Executors: the OpenCL device probe is over: {}",
                self.executors.describe_device()
            );
        }
    }

    /// `run_job`, with a panic outside the executors (planning, install)
    /// caught and turned into an internal error, so that the job still
    /// ends and its files are released.
    fn run_job_caught(
        &self,
        host: &dyn JobHost,
        job: &ScheduledJob,
        lane: Lane,
        executor: Option<ExecutorKind>,
        caller: Caller<'_>,
    ) -> Outcome {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_job(host, job, lane, executor, caller)
        }))
        .unwrap_or_else(|payload| Err(Error::panicked(&job.name(), &*payload)));
        match ran {
            Ok(Outcome::Failed(err)) | Err(err) => Outcome::Failed(err.during(&job.name())),
            Ok(outcome) => outcome,
        }
    }

    /// Tells the service how a job ended (the ledger, its LOG line, its
    /// files released, waiters woken) and the host (a failure becomes the
    /// background error). Returns the job's result: a refused job is an
    /// error for the manual compaction that ran it, not the background
    /// error.
    fn finish_job(&self, host: &dyn JobHost, job: &ScheduledJob, outcome: Outcome) -> Result<()> {
        self.service.finish(job, &outcome);
        match outcome {
            Outcome::Installed(_) => {
                host.job_ended(None);
                Ok(())
            }
            Outcome::Refused(refusal) => {
                host.job_ended(None);
                Err(refusal.into_error())
            }
            Outcome::Failed(err) => {
                host.job_ended(Some(&err));
                Err(err)
            }
        }
    }

    /// Runs a taken job (a trivial move, or a job on the executor chain the
    /// service places it on, in sub-compactions when it is large) and
    /// installs the result. `executor`: the executor a manual compaction
    /// asked for (then `streaming` if it fails), instead of placement's.
    fn run_job(
        &self,
        host: &dyn JobHost,
        scheduled: &ScheduledJob,
        lane: Lane,
        executor: Option<ExecutorKind>,
        caller: Caller<'_>,
    ) -> Result<Outcome> {
        let started = Instant::now();
        let plan = &scheduled.plan;
        if plan.is_trivial_move(&self.options) {
            let summary = host.install(plan, None)?;
            return Ok(Outcome::Installed(Box::new(Installed {
                trivial_move: true,
                seconds: started.elapsed().as_secs_f64(),
                summary,
                ..Installed::default()
            })));
        }
        let job = describe_job(host, scheduled, &self.options);
        self.note_device();
        let placed = self.service.place(scheduled, &job, lane, executor);
        let by_id = |id: ExecutorId| self.executors.by_id(id);
        let ran = match self.run_chain(host, &job, &placed, &by_id, caller) {
            Ok(ran) => ran,
            Err(ended) => return Ok(ended),
        };
        let summary = host.install(plan, Some((&ran.output, &*ran.io)))?;
        let output = ran.output;
        Ok(Outcome::Installed(Box::new(Installed {
            input_bytes: job.input_bytes(),
            seconds: started.elapsed().as_secs_f64(),
            entries: output.stats.entries_in,
            written_bytes: output.outputs.iter().map(|t| t.file_size).sum(),
            output_files: output.outputs.len(),
            subcompactions: ran.subcompactions,
            trivial_move: false,
            executor: output.executor,
            fallback: output.fallback,
            phases: output.stats,
            summary,
        })))
    }

    /// Runs `job` on the first executor of the placed chain that completes
    /// it. When one does not (an error, or a panic, caught here so that
    /// the job still ends and its reservation is released), the service
    /// judges ([`Service::judge`]) whether the next executor redoes it from
    /// scratch (its files deleted) or the job fails. `executor` resolves
    /// the chain's executors (to the database's). `Err`: how the job
    /// ended without outputs, refused or failed.
    fn run_chain<'h>(
        &self,
        host: &'h dyn JobHost,
        job: &CompactionJob,
        placed: &Placed,
        executor: &dyn Fn(ExecutorId) -> Option<Arc<dyn Executor>>,
        caller: Caller<'_>,
    ) -> std::result::Result<Ran<'h>, Outcome> {
        let chain = &placed.chain;
        let mut fallback = chain.kept_off_device_reason();
        let mut refused = None;
        for (i, &id) in chain.executors.iter().enumerate() {
            let Some(executor) = executor(id) else {
                continue;
            };
            let io = host.job_io();
            let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_in_parts(
                    &*executor,
                    job,
                    &*io,
                    placed.parts,
                    self.options.compaction_nice,
                    caller,
                )
            }));
            let (error, panicked) = match attempt {
                Ok(Ok((output, subcompactions))) => {
                    let output = CompactionOutput {
                        fallback: fallback.or(output.fallback),
                        ..output
                    };
                    return Ok(Ran {
                        output,
                        io,
                        subcompactions,
                    });
                }
                Ok(Err(error)) => (error, false),
                Err(payload) => (
                    Error::panicked(&format!("the {id} executor"), &*payload),
                    true,
                ),
            };
            io.release(true);
            match self.service.judge(job.id, chain, i, error, panicked) {
                Outcome::Refused(refusal) => {
                    fallback = Some(refusal.to_string());
                    refused = Some(refusal);
                }
                ended => return Err(ended),
            }
        }
        Err(Outcome::Refused(refused.unwrap_or_else(|| {
            Refusal::new(
                chain.executors[0],
                format!(
                    "compaction #{}: no executor of the chain {:?} is available",
                    job.id,
                    chain.names()
                ),
            )
        })))
    }
}

/// The plan as a job executors can run from nothing else; its id is the
/// scheduler's ticket. The version is needed only to describe it; holding
/// it longer would keep the inputs alive past the install that obsoletes
/// them.
fn describe_job(host: &dyn JobHost, scheduled: &ScheduledJob, options: &Options) -> CompactionJob {
    let (version, smallest_snapshot) = host.version_and_snapshot_floor();
    scheduled
        .plan
        .to_job(scheduled.ticket, &version, smallest_snapshot, options)
}

/// The priority a compaction thread starts with.
#[derive(Debug, Clone, Copy)]
enum Priority {
    /// As the database's opener: a remote workers' thread.
    Normal,
    /// `nice` levels down: a thread of the CPU's lanes.
    Lowered(u8),
    /// Normal, with a worker `nice` levels down for the CPU's work: a
    /// thread that may serve the device.
    NormalWithLoweredWorker(u8),
}

/// The thread a job runs from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Caller<'a> {
    /// A compaction thread serving the device's lane.
    /// It keeps normal priority: it drives the device, whose every step
    /// waits for it to wake, and installs the result under the database's
    /// lock. The job's CPU work runs `compaction_nice` levels down: on the
    /// executor's own lowered threads (`Executor::lowers_its_own_threads`),
    /// else on the compaction thread's lowered worker.
    CompactionThread(&'a rayon::ThreadPool),
    /// Anyone else: a manual compaction's caller, a compaction thread of
    /// the CPU's lanes (or its lowered worker, running a job whole), a
    /// remote workers' thread. Jobs run on it, at its priority.
    User,
}

/// A compaction thread's lowered worker: one thread, `nice` levels down,
/// kept for the thread's life: with a thread started per job, the jobs
/// ran slower (`docs/results/scheduler.md`, "The device's compaction
/// thread at normal priority"). `None` when it cannot be started.
fn lowered_worker(nice: u8) -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "shale-job".into())
        .start_handler(move |_| shale_compact::nice::lower_current_thread(nice))
        .build()
        .ok()
}

/// Runs `job` on `executor`, cut into up to `parts` sub-compactions by key
/// range (each itself a job, so the executor is unchanged): the others on
/// threads of their own, lowered `nice` levels, the smallest on this one
/// (from a compaction thread, on its lowered worker, unless the executor
/// lowers its own threads). Returns the combined output (tables
/// in key order) and the number of sub-compactions.
fn run_in_parts(
    executor: &dyn Executor,
    job: &CompactionJob,
    io: &dyn OutputIo,
    parts: usize,
    nice: u8,
    caller: Caller<'_>,
) -> Result<(CompactionOutput, usize)> {
    let io: &dyn shale_compact::job::JobIo = io;
    let subjobs = if parts > 1 {
        shale_compact::subcompaction::subcompactions(job, io, job.max_output_file_size, parts)?
    } else {
        Vec::new()
    };
    // Where this thread's share runs: itself, or its lowered worker.
    let run_here = |job: &CompactionJob| match caller {
        Caller::CompactionThread(worker) if !executor.lowers_its_own_threads() => {
            worker.install(|| executor.run(job, io))
        }
        _ => executor.run(job, io),
    };
    if subjobs.len() <= 1 {
        return run_here(job).map(|output| (output, 1));
    }
    let sizes: Vec<u64> = subjobs.iter().map(CompactionJob::input_bytes).collect();
    let primary = priority::primary_subtask(&sizes).unwrap_or(0);
    let results: Vec<Result<CompactionOutput>> = std::thread::scope(|scope| {
        let handles: Vec<_> = subjobs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != primary)
            .map(|(i, sub)| {
                let handle = std::thread::Builder::new()
                    .name(format!("shale-sub-{i}"))
                    .spawn_scoped(scope, move || {
                        shale_compact::nice::lower_current_thread(nice);
                        executor.run(sub, io)
                    });
                (i, handle)
            })
            .collect();
        let mut results: Vec<Option<Result<CompactionOutput>>> =
            (0..subjobs.len()).map(|_| None).collect();
        results[primary] = Some(run_here(&subjobs[primary]));
        let mut panicked = None;
        for (i, handle) in handles {
            results[i] = Some(match handle {
                Ok(handle) => match handle.join() {
                    Ok(result) => result,
                    Err(payload) => {
                        panicked.get_or_insert(payload);
                        Err(Error::executor_failed(
                            executor.name(),
                            "a sub-compaction thread panicked",
                        ))
                    }
                },
                Err(e) => Err(Error::io("starting a sub-compaction thread", e)),
            });
        }
        // A panic on a sub-compaction's thread is the executor's panic, as
        // one on this thread would be: the chain counts it as one and
        // refuses the job to the next executor.
        if let Some(payload) = panicked {
            std::panic::resume_unwind(payload);
        }
        results.into_iter().flatten().collect()
    });
    let mut combined: Option<CompactionOutput> = None;
    let mut first_error: Option<Error> = None;
    for result in results {
        match result {
            Ok(output) => match &mut combined {
                None => combined = Some(output),
                Some(all) => {
                    all.outputs.extend(output.outputs);
                    all.stats.accumulate(&output.stats);
                    if all.fallback.is_none() {
                        all.fallback = output.fallback;
                    }
                }
            },
            // Corrupt input wins: it names the file and is not retried.
            Err(err) if first_error.as_ref().is_none_or(|e| !e.is_corruption()) => {
                first_error = Some(err)
            }
            Err(_) => {}
        }
    }
    match (first_error, combined) {
        (Some(err), _) => Err(err),
        (None, Some(output)) => Ok((output, subjobs.len())),
        (None, None) => Err(Error::executor_failed(
            executor.name(),
            "no sub-compaction ran",
        )),
    }
}

/// The chain a test places a job on.
#[cfg(test)]
fn placed(executors: &[ExecutorKind]) -> Placed {
    Placed {
        chain: crate::compaction::scheduler::placement::Chain {
            executors: executors.iter().map(|&kind| kind.into()).collect(),
            reason: "test".into(),
            kept_off_device: None,
        },
        parts: 1,
    }
}

#[cfg(test)]
mod tests;
