//! The compaction service's threads and the engine's side of a job: the
//! compaction threads, manual compaction, running a job on the chain the
//! service placed it on, and installing it. Every decision (what is queued,
//! what runs next, where, what a failure leads to) and every record of a
//! job's life is the service's (`compaction::service`); this file carries
//! them out.
//!
//! Each compaction thread serves a lane: the device lane (when the database
//! has an OpenCL device) offers its jobs to the device first; host lanes run
//! them on CPU executors; remote lanes on a worker. A thread asks the
//! service for a job, runs it on its chain, in sub-compactions when it is
//! large, installs it, and tells the service how it ended.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use shale_compact::job::{CompactionJob, CompactionOutput, Executor};
use shale_compact::remote::REMOTE;
use shale_format::version_edit::NUM_LEVELS;
use shale_format::{Error, Result};

use super::job_io::EngineJobIo;
use super::DbInner;
use crate::compaction::picker;
use crate::compaction::priority;
use crate::compaction::scheduler::placement::{Chain, ExecutorChoice};
use crate::compaction::scheduler::ScheduledJob;
use crate::compaction::service::{Installed, Lane, Outcome, Refusal};
use crate::version::Version;

/// Starts the flush thread and the compaction threads.
pub(super) fn start(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::new();
    let spawn = |name: String, body: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name)
            .spawn(body)
            .map_err(|e| Error::io("starting a background thread", e))
    };
    let flusher = inner.clone();
    threads.push(spawn(
        "shale-flush".into(),
        Box::new(move || flusher.flush_loop()),
    )?);
    for i in 0..inner.options.background_compactions() {
        let worker = inner.clone();
        threads.push(spawn(
            format!("shale-compact-{i}"),
            Box::new(move || {
                // Not the flush thread: writers wait for flushes.
                shale_compact::nice::lower_current_thread(worker.options.compaction_nice);
                worker.compaction_loop(Some(i))
            }),
        )?);
    }
    // Threads that wait on remote workers, not on cores: the nice level
    // does not matter to them, and they leave the others to the CPU.
    for i in 0..inner.executors.remote_lanes() {
        let worker = inner.clone();
        threads.push(spawn(
            format!("shale-remote-{i}"),
            Box::new(move || worker.compaction_loop(None)),
        )?);
    }
    Ok(threads)
}

/// A job that ran: its output and the executor I/O whose pending outputs
/// are released once the job is installed.
struct Ran<'a> {
    output: CompactionOutput,
    io: EngineJobIo<'a>,
    subcompactions: usize,
}

impl DbInner {
    pub(super) fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// The current version, or `None` while a background error stands (no
    /// job starts then): what the service plans from.
    fn version_for_compaction(&self) -> Option<Arc<Version>> {
        let state = self.lock_state();
        state.bg_error.is_none().then(|| state.current.clone())
    }

    /// Takes jobs until the database closes. `thread`: the compaction
    /// thread's index, whose lane may change once `auto` knows its device;
    /// `None` for a thread of the remote workers.
    fn compaction_loop(self: Arc<Self>, thread: Option<usize>) {
        let mut seen = 0;
        let current = || self.version_for_compaction();
        loop {
            // The service learns the device in `run_job`, before placing.
            let lane = match thread {
                Some(index) => self.executors.lane_of_thread(index),
                None => Lane::Remote,
            };
            let Some(job) = self.service.next(lane, &mut seen, &current) else {
                return;
            };
            let result = self.run_job_caught(&job, lane, None);
            let _ = self.finish_job(&job, result);
        }
    }

    /// Tells the service the database's OpenCL device (or that it has
    /// none) once that is known and the service does not know it yet:
    /// `auto`'s probe may end after the open.
    pub(super) fn note_device(&self) {
        if !self.executors.device_known() {
            return;
        }
        let device = self.executors.device().map(|d| d.facts);
        if self.service.set_device(device) && self.executors.choice == ExecutorChoice::Auto {
            shale_log!(
                self.info_log,
                "Executors: the OpenCL device probe is over: {}",
                match (self.executors.device(), self.executors.device_unavailable()) {
                    (Some(d), _) => format!("jobs may run on {}", d.executor.device_info().name),
                    (None, Some(why)) => format!("no device ({why})"),
                    (None, None) => "no device".to_string(),
                }
            );
        }
    }

    /// `run_job`, with a panic outside the executors (planning, install)
    /// caught and turned into an internal error, so that the job still
    /// ends and its files are released.
    fn run_job_caught(
        &self,
        job: &ScheduledJob,
        lane: Lane,
        executor: Option<&'static str>,
    ) -> Outcome {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.run_job(job, lane, executor)
        }))
        .unwrap_or_else(|payload| Err(Error::panicked(&compaction_name(job), &*payload)));
        match ran {
            Ok(Outcome::Failed(err)) | Err(err) => {
                Outcome::Failed(err.during(&compaction_name(job)))
            }
            Ok(outcome) => outcome,
        }
    }

    /// Tells the service how a job ended (the ledger, its files released,
    /// waiters woken) and makes a failure the background error. Returns
    /// the job's result, named: a refused job is an error for the manual
    /// compaction that ran it, not the background error.
    fn finish_job(&self, job: &ScheduledJob, outcome: Outcome) -> Result<()> {
        self.service.finish(job, &outcome);
        let mut state = self.lock_state();
        let result = match outcome {
            Outcome::Installed(_) => {
                state.resume.reset_backoff();
                Ok(())
            }
            Outcome::Refused(refusal) => {
                Err(Error::executor_failed(refusal.executor, refusal.reason))
            }
            Outcome::Failed(err) => {
                self.record_background_error(&mut state, &err);
                Err(err)
            }
        };
        self.signal_done(&mut state);
        result
    }

    /// Runs a taken job (a trivial move, or a job on the executor chain the
    /// service places it on, in sub-compactions when it is large) and
    /// installs the result. `executor`: the executor a manual compaction
    /// asked for (then `streaming` if it fails), instead of placement's.
    fn run_job(
        &self,
        scheduled: &ScheduledJob,
        lane: Lane,
        executor: Option<&'static str>,
    ) -> Result<Outcome> {
        let started = Instant::now();
        let plan = &scheduled.plan;
        if plan.is_trivial_move(&self.options) {
            self.install_trivial_move(plan, started)?;
            return Ok(Outcome::Installed(Box::new(Installed {
                trivial_move: true,
                seconds: started.elapsed().as_secs_f64(),
                ..Installed::default()
            })));
        }
        let job = self.describe_job(scheduled);
        let parts = self.parts_for(scheduled, &job, lane, executor);
        self.note_device();
        let chain = self.service.place(&job, lane, parts, executor);
        self.log_placed(scheduled, &job, &chain, parts);
        let ran = match self.run_chain(&job, &chain, parts, &|name| self.executors.by_name(name)) {
            Ok(ran) => ran,
            Err(ended) => return Ok(ended),
        };
        let summary = self.install_ran(scheduled, &ran, started)?;
        let seconds = started.elapsed().as_secs_f64();
        if plan.level == 0 && seconds > 0.0 {
            let rate = job.input_bytes() as f64 / seconds;
            self.l0_drain_rate.store(rate.to_bits(), Ordering::Relaxed);
        }
        self.log_done(&job, &ran, seconds, &summary);
        Ok(Outcome::Installed(Box::new(Installed {
            executor: ran.output.executor.clone(),
            input_bytes: job.input_bytes(),
            seconds,
            entries: ran.output.stats.entries_in,
            subcompactions: ran.subcompactions,
            trivial_move: false,
            fallback: ran.output.fallback.clone(),
            phases: ran.output.stats.clone(),
        })))
    }

    /// The plan as a job executors can run from nothing else. The version
    /// is needed only to describe it; holding it longer would keep the
    /// inputs alive past the install that obsoletes them.
    fn describe_job(&self, scheduled: &ScheduledJob) -> CompactionJob {
        let state = self.lock_state();
        let (version, smallest_snapshot) = (state.current.clone(), self.smallest_snapshot(&state));
        drop(state);
        scheduled.plan.to_job(
            self.next_job_id.fetch_add(1, Ordering::SeqCst),
            &version,
            smallest_snapshot,
            &self.options,
        )
    }

    /// How many sub-compactions `job` runs as on `lane`.
    fn parts_for(
        &self,
        scheduled: &ScheduledJob,
        job: &CompactionJob,
        lane: Lane,
        executor: Option<&'static str>,
    ) -> usize {
        match (lane, executor) {
            // A worker runs a job whole: its own cores split it if they like.
            (Lane::Remote, _) | (_, Some(REMOTE)) => 1,
            // Sub-compaction ranges are cut in bytewise order.
            _ if !self.order.is_bytewise() => 1,
            _ => self.subcompaction_parts(scheduled, job),
        }
    }

    fn log_placed(
        &self,
        scheduled: &ScheduledJob,
        job: &CompactionJob,
        chain: &Chain,
        parts: usize,
    ) {
        shale_log!(
            self.info_log,
            "Compaction #{}: {}; executor chain {} ({}){}",
            job.id,
            scheduled.describe(),
            chain.executors.join(" -> "),
            chain.reason,
            if parts > 1 {
                format!(", up to {parts} sub-compactions")
            } else {
                String::new()
            }
        );
    }

    /// Installs what `ran` wrote. A failed install may still have written
    /// the MANIFEST record that names the outputs, so they are kept while
    /// the database is in error; a resume (once a new MANIFEST is current)
    /// or the next open deletes them.
    fn install_ran(
        &self,
        scheduled: &ScheduledJob,
        ran: &Ran<'_>,
        started: Instant,
    ) -> Result<String> {
        let result = self.install_compaction(&scheduled.plan, &ran.output, started);
        ran.io.release(false);
        if result.is_err() {
            let mut state = self.lock_state();
            for table in &ran.output.outputs {
                state.pending_outputs.insert(table.number);
                state.resume.unrecorded_tables.push(table.number);
            }
        }
        result
    }

    fn log_done(&self, job: &CompactionJob, ran: &Ran<'_>, seconds: f64, summary: &str) {
        if let Some(reason) = &ran.output.fallback {
            shale_log!(
                self.info_log,
                "Compaction #{}: fallback to the {} executor: {reason}",
                job.id,
                ran.output.executor
            );
        }
        let written: u64 = ran.output.outputs.iter().map(|t| t.file_size).sum();
        shale_log!(
            self.info_log,
            "Compaction #{} done by {}{}: read {} bytes, wrote {written} bytes in {} files, {seconds:.3} s; {summary}",
            job.id,
            ran.output.executor,
            if ran.subcompactions > 1 {
                format!(" in {} sub-compactions", ran.subcompactions)
            } else {
                String::new()
            },
            job.input_bytes(),
            ran.output.outputs.len(),
        );
    }

    /// How many sub-compactions `scheduled` may run as: L0->L1 and manual
    /// jobs of at least two output files' worth, up to
    /// `max_subcompactions` (ProckStore's fourth priority).
    fn subcompaction_parts(&self, scheduled: &ScheduledJob, job: &CompactionJob) -> usize {
        let eligible = scheduled.plan.level == 0 || scheduled.manual;
        if !eligible {
            return 1;
        }
        priority::subcompaction_parts(
            job.input_bytes(),
            job.max_output_file_size,
            self.options.subcompactions(),
        )
    }

    /// Runs `job` on the first executor of `chain` that completes it. When
    /// one does not (an error, or a panic, caught here so that the job
    /// still ends and its reservation is released), the service judges
    /// ([`Service::judge`]) whether the next executor redoes it from
    /// scratch (its files deleted) or the job fails. `executor` resolves
    /// the chain's names (the database's executors). `Err`: how the job
    /// ended without outputs, refused or failed.
    fn run_chain(
        &self,
        job: &CompactionJob,
        chain: &Chain,
        parts: usize,
        executor: &dyn Fn(&str) -> Option<Arc<dyn Executor>>,
    ) -> std::result::Result<Ran<'_>, Outcome> {
        let mut fallback = chain
            .kept_off_device
            .as_ref()
            .map(|why| format!("placed on the CPU: {why}"));
        let mut refused = None;
        for (i, name) in chain.executors.iter().enumerate() {
            let Some(executor) = executor(name) else {
                continue;
            };
            let io = EngineJobIo::new(self);
            let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_in_parts(&*executor, job, &io, parts, self.options.compaction_nice)
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
                    Error::panicked(&format!("the {name} executor"), &*payload),
                    true,
                ),
            };
            io.release(true);
            match self.service.judge(job.id, chain, i, error, panicked) {
                Outcome::Refused(refusal) => {
                    fallback = Some(refusal.reason.clone());
                    refused = Some(refusal);
                }
                ended => return Err(ended),
            }
        }
        Err(Outcome::Refused(refused.unwrap_or_else(|| Refusal {
            executor: chain.executors[0],
            reason: format!(
                "compaction #{}: no executor of the chain {:?} is available",
                job.id, chain.executors
            ),
            panicked: false,
        })))
    }

    /// Compacts the user-key range `[begin, end]` (`None`: unbounded) down
    /// through every level that holds it. Each level's plan goes through the
    /// scheduler's queue (reserving its files, visible in
    /// `shale.scheduler`) and runs on this thread, in sub-compactions.
    /// `executor`: run every job on it (then `streaming` if it fails)
    /// instead of where the scheduler would; checked to exist first.
    ///
    /// It compacts what the database holds when it is called, as LevelDB
    /// and RocksDB do, and does not chase writes that arrive meanwhile:
    /// level 0 is done once the files it held at the call have left it, a
    /// deeper level is swept once, from a cursor that only moves forward,
    /// and an open end stops at the largest key held at the call.
    pub(super) fn compact_range(
        &self,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        executor: Option<&str>,
    ) -> Result<()> {
        let executor = executor.map(|name| self.executors.for_manual_compaction(name));
        // Naming `opencl` waited for `auto`'s probe: the service learns the
        // answer now, whatever this call does next.
        self.note_device();
        let executor = executor.transpose()?.flatten();
        self.flush_memtable()?;
        let at_call = {
            let version = self.lock_state().current.clone();
            RangeAtCall::new(&version, begin, end)
        };
        let end = at_call.end.as_deref();
        let l0_at_call = &at_call.l0_files;
        self.compact_level_manually(0, begin, end, executor, &|version, _| {
            version.files[0]
                .iter()
                .any(|f| l0_at_call.contains(&f.number))
        })?;
        for level in 1..at_call.deepest {
            let mut cursor = begin.map(<[u8]>::to_vec);
            loop {
                let from = cursor.clone();
                let ran =
                    self.compact_level_manually(level, from.as_deref(), end, executor, &|_, _| {
                        true
                    })?;
                let Some(largest) = ran else {
                    break;
                };
                // Forward only: a sweep that does not advance has reached
                // the end of what it can compact at this level.
                let advanced = from
                    .as_deref()
                    .is_none_or(|from| self.order.compare_user(&largest, from).is_gt());
                if !advanced
                    || end.is_some_and(|end| self.order.compare_user(&largest, end).is_ge())
                {
                    break;
                }
                cursor = Some(largest);
            }
        }
        Ok(())
    }

    /// One manual job at `level` over `[begin, end]`, run on this thread
    /// once no running job holds its files (waiting for one to end, never
    /// polling). Returns the largest user key of its `level` inputs, or
    /// `None` when there is nothing (more) to compact there: no overlap, or
    /// `pending` says the work is done (level 0: its files of the call are
    /// gone, compacted by the scheduler's own jobs).
    fn compact_level_manually(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        executor: Option<&'static str>,
        pending: &dyn Fn(&Version, usize) -> bool,
    ) -> Result<Option<Vec<u8>>> {
        let current = || self.version_for_compaction();
        loop {
            if let Some(err) = self.lock_state().bg_error.clone() {
                return Err(err);
            }
            let planned = self.service.plan_manual(&current, |version| {
                if !pending(version, level) {
                    return None;
                }
                let plan = picker::plan_for_range(version, &self.options, level, begin, end)?;
                let largest = plan.inputs[0]
                    .iter()
                    .map(|f| f.largest.user_key().to_vec())
                    .max_by(|a, b| self.order.compare_user(a, b))
                    .unwrap_or_default();
                Some((plan, largest))
            });
            match planned {
                None => {
                    // Nothing to do, or a background error (checked above
                    // on the next round).
                    if let Some(err) = self.lock_state().bg_error.clone() {
                        return Err(err);
                    }
                    return Ok(None);
                }
                Some((Ok(job), largest)) => {
                    // On the device when there is one, as thread 0 would.
                    let lane = self.executors.lane_of_thread(0);
                    let result = self.run_job_caught(&job, lane, executor);
                    self.finish_job(&job, result)?;
                    return Ok(Some(largest));
                }
                Some((Err(ended), _)) => {
                    // A running job holds some of the files: wait for a job
                    // to end.
                    if !self.service.wait_for_job_end(ended) {
                        return Err(closing());
                    }
                }
            }
        }
    }

    /// Waits until no compaction is needed, queued or running, and no flush
    /// is waiting or running.
    pub(super) fn wait_for_compactions(&self) -> Result<()> {
        let current = || self.version_for_compaction();
        loop {
            let idle = self.service.wait_idle(&current);
            let mut state = self.lock_state();
            if let Some(err) = &state.bg_error {
                return Err(err.clone());
            }
            if self.shutting_down() {
                return Err(closing());
            }
            if !idle {
                continue;
            }
            if state.imm.is_none() && !state.flushing {
                return Ok(());
            }
            // A flush is due or running: it may make work; wait for it.
            let seen = state.done_epoch;
            while state.done_epoch == seen && state.bg_error.is_none() && !self.shutting_down() {
                state = self.wait(&self.done_cv, state);
            }
        }
    }
}

/// The error of a wait the database's closing ended.
fn closing() -> Error {
    Error::Busy("the database is closing".into())
}

/// What a manual compaction compacts, taken when it is called: the level-0
/// files in its range, the deepest level holding the range, and the end of
/// its range (an open end closed at the largest key held then).
struct RangeAtCall {
    l0_files: std::collections::HashSet<u64>,
    deepest: usize,
    end: Option<Vec<u8>>,
}

impl RangeAtCall {
    fn new(version: &Version, begin: Option<&[u8]>, end: Option<&[u8]>) -> RangeAtCall {
        let deepest = (1..NUM_LEVELS)
            .filter(|&l| version.overlaps(l, begin, end))
            .max()
            .unwrap_or(1);
        let l0_files = version
            .overlapping_inputs(0, begin, end)
            .iter()
            .map(|f| f.number)
            .collect();
        let end = match end {
            Some(end) => Some(end.to_vec()),
            None => version
                .files
                .iter()
                .flatten()
                .map(|f| f.largest.user_key())
                .max_by(|a, b| version.order.compare_user(a, b))
                .map(<[u8]>::to_vec),
        };
        RangeAtCall {
            l0_files,
            deepest,
            end,
        }
    }
}

/// How errors name a compaction: "compaction L0->L1".
fn compaction_name(job: &ScheduledJob) -> String {
    format!("compaction L{}->L{}", job.plan.level, job.plan.output_level)
}

/// Runs `job` on `executor`, cut into up to `parts` sub-compactions by key
/// range (each itself a job, so the executor is unchanged): the others on
/// threads of their own, the smallest on this one. Returns the combined
/// output (tables in key order) and the number of sub-compactions.
fn run_in_parts(
    executor: &dyn Executor,
    job: &CompactionJob,
    io: &EngineJobIo<'_>,
    parts: usize,
    nice: u8,
) -> Result<(CompactionOutput, usize)> {
    let subjobs = if parts > 1 {
        let boundaries =
            shale_compact::subcompaction::boundaries(job, io, job.max_output_file_size, parts)?;
        shale_compact::subcompaction::split(job, &boundaries)
    } else {
        Vec::new()
    };
    if subjobs.len() <= 1 {
        return executor.run(job, io).map(|output| (output, 1));
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
        results[primary] = Some(executor.run(&subjobs[primary], io));
        for (i, handle) in handles {
            results[i] = Some(match handle {
                Ok(handle) => handle.join().unwrap_or_else(|_| {
                    Err(Error::executor_failed(
                        executor.name(),
                        "a sub-compaction thread panicked",
                    ))
                }),
                Err(e) => Err(Error::io("starting a sub-compaction thread", e)),
            });
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

#[cfg(test)]
mod tests {
    //! The executor chain on a real database (in memory) with an executor
    //! that fails: the job goes on to the next executor, the failed
    //! attempt's files are deleted, the failure and the fallback are
    //! counted; corrupt input and the last executor's failure are not
    //! passed on.

    use std::sync::Arc;

    use shale_compact::job::{CompactionJob, CompactionOutput, Executor, JobIo};
    use shale_compact::opencl::OPENCL;
    use shale_compact::streaming::{StreamingExecutor, STREAMING};
    use shale_format::{Error, Result};

    use crate::compaction::picker;
    use crate::compaction::scheduler::placement::Chain;
    use crate::compaction::service::{Outcome, Refusal};
    use crate::env::{Env, MemEnv};
    use crate::options::{Options, WriteOptions};
    use crate::DB;

    /// Writes one output file, then fails with `error`.
    #[derive(Debug)]
    struct Failing(Error);

    impl Executor for Failing {
        fn name(&self) -> &'static str {
            OPENCL
        }
        fn run(&self, _job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
            let (_number, mut sink) = io.create_output()?;
            std::io::Write::write_all(&mut sink, b"half a table")
                .map_err(|e| Error::io("writing", e))?;
            Err(self.0.clone())
        }
    }

    fn database() -> (Arc<dyn Env>, DB) {
        let env: Arc<dyn Env> = Arc::new(MemEnv::new());
        let options = Options {
            create_if_missing: true,
            env: env.clone(),
            l0_compaction_trigger: 100,
            l0_slowdown_writes_trigger: 100,
            l0_stop_writes_trigger: 100,
            ..Options::default()
        };
        let db = DB::open("/chain", options).unwrap();
        for round in 0..3 {
            for i in 0..200u32 {
                let key = format!("key{i:04}");
                db.put(
                    &WriteOptions::default(),
                    key.as_bytes(),
                    format!("{round}").as_bytes(),
                )
                .unwrap();
            }
            db.flush().unwrap();
        }
        (env, db)
    }

    fn tables(env: &Arc<dyn Env>) -> Vec<String> {
        let mut names: Vec<String> = env
            .children(std::path::Path::new("/chain"))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".ldb"))
            .collect();
        names.sort();
        names
    }

    type Ended = std::result::Result<(String, Option<String>), Outcome>;

    fn run(db: &DB, failure: Error) -> Ended {
        run_on(db, vec![OPENCL, STREAMING], failure, true)
    }

    /// Runs a level-0 job on `executors`, where `opencl` fails with
    /// `failure`, `streaming` runs it, and nothing else is available (nor
    /// anything at all unless `available`).
    fn run_on(db: &DB, executors: Vec<&'static str>, failure: Error, available: bool) -> Ended {
        let inner = &db.inner;
        let version = inner.lock_state().current.clone();
        let plan = picker::plan_for_range(&version, &inner.options, 0, None, None).unwrap();
        let job = plan.to_job(1, &version, u64::MAX, &inner.options);
        drop(version);
        let chain = Chain {
            executors,
            reason: "test".into(),
            kept_off_device: None,
        };
        let failing: Arc<dyn Executor> = Arc::new(Failing(failure));
        let resolve = |name: &str| -> Option<Arc<dyn Executor>> {
            match name {
                _ if !available => None,
                OPENCL => Some(failing.clone()),
                STREAMING => Some(Arc::new(StreamingExecutor)),
                _ => None,
            }
        };
        let ran = inner.run_chain(&job, &chain, 1, &resolve)?;
        ran.io.release(true);
        Ok((ran.output.executor, ran.output.fallback))
    }

    #[test]
    fn a_failing_executor_hands_the_job_to_the_next() {
        let (env, db) = database();
        let before = tables(&env);
        let (executor, fallback) = run(
            &db,
            Error::executor_failed(OPENCL, "the device fell off the bus"),
        )
        .unwrap();
        assert_eq!(executor, STREAMING);
        let fallback = fallback.unwrap();
        assert!(fallback.contains("fell off the bus"), "{fallback}");
        // The failed attempt's file is gone; the streaming outputs were
        // released (deleted) by the test: the directory is as before.
        assert_eq!(tables(&env), before);
        let scheduler = db.scheduler_stats();
        let (_, record) = scheduler
            .executors
            .iter()
            .find(|(name, _)| name == OPENCL)
            .unwrap();
        assert_eq!(record.failures, 1);
    }

    /// Levels 1 and deeper hold files in key order that do not overlap.
    fn assert_levels_disjoint(db: &DB) {
        let version = db.inner.lock_state().current.clone();
        for level in 1..shale_format::version_edit::NUM_LEVELS {
            let mut files = version.files[level].clone();
            files.sort_by(|a, b| a.smallest.user_key().cmp(b.smallest.user_key()));
            for pair in files.windows(2) {
                assert!(
                    pair[0].largest.user_key() < pair[1].smallest.user_key(),
                    "L{level}: #{} [{:?}..{:?}] overlaps #{} [{:?}..{:?}]",
                    pair[0].number,
                    String::from_utf8_lossy(pair[0].smallest.user_key()),
                    String::from_utf8_lossy(pair[0].largest.user_key()),
                    pair[1].number,
                    String::from_utf8_lossy(pair[1].smallest.user_key()),
                    String::from_utf8_lossy(pair[1].largest.user_key()),
                );
            }
        }
    }

    /// Issue 23, question 4: can a flush place its table (at L1 or L2,
    /// where LevelDB's rule pushes a memtable that overlaps nothing) inside
    /// the key gap that a running manual compaction's outputs will cover?
    /// It cannot: the flush picks its level under the version-set lock
    /// from a version that still holds every input of the running job, and
    /// any key a job's outputs cover lies within some input file's range at
    /// a level the flush checks. Driven here: manual compactions of ranges
    /// with a gap while another thread flushes small memtables into that
    /// gap, the levels checked all along.
    #[test]
    fn a_flush_never_lands_in_the_gap_a_running_manual_compaction_fills() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let env: Arc<dyn Env> = Arc::new(MemEnv::new());
        let options = Options {
            create_if_missing: true,
            env,
            write_buffer_size: 8 << 10,
            max_file_size: 4 << 10,
            block_size: 256,
            ..Options::default()
        };
        let db = DB::open("/gap", options).unwrap();
        let write = |prefix: &str, round: u32, n: u32| {
            for i in 0..n {
                let key = format!("{prefix}{i:05}");
                db.put(
                    &WriteOptions::default(),
                    key.as_bytes(),
                    format!("{round}").as_bytes(),
                )
                .unwrap();
            }
        };
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let checker = scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    assert_levels_disjoint(&db);
                    std::thread::yield_now();
                }
            });
            for round in 0..20 {
                // Two clusters with a gap between them, compacted down.
                write("a", round, 300);
                write("z", round, 300);
                db.flush().unwrap();
                let db = &db;
                let flusher = scope.spawn(move || {
                    for i in 0..10u32 {
                        let key = format!("m{round:03}{i:03}");
                        db.put(&WriteOptions::default(), key.as_bytes(), b"gap")
                            .unwrap();
                        db.flush().unwrap();
                    }
                });
                db.compact_range(None, None).unwrap();
                flusher.join().unwrap();
                assert_levels_disjoint(db);
            }
            stop.store(true, Ordering::Relaxed);
            checker.join().unwrap();
        });
        db.wait_for_compactions().unwrap();
        assert_levels_disjoint(&db);
        for round in 0..20u32 {
            let key = format!("m{round:03}009");
            assert_eq!(
                db.get(&crate::options::ReadOptions::new(), key.as_bytes())
                    .unwrap(),
                Some(b"gap".to_vec())
            );
        }
    }

    #[test]
    fn corrupt_input_and_disk_errors_are_not_passed_on() {
        let (env, db) = database();
        let before = tables(&env);
        let corrupt = run(&db, Error::corruption(7, "bad block").at("000005.ldb", 0));
        assert!(
            matches!(corrupt, Err(Outcome::Failed(Error::Corruption { .. }))),
            "{corrupt:?}"
        );
        let disk = run(&db, Error::io("writing", std::io::Error::other("no space")));
        assert!(
            matches!(disk, Err(Outcome::Failed(Error::Io { .. }))),
            "{disk:?}"
        );
        assert_eq!(tables(&env), before, "failed attempts leave no file");
    }

    #[test]
    fn the_last_executor_of_a_chain_fails_the_job_and_no_executor_refuses_it() {
        let (env, db) = database();
        let before = tables(&env);
        // The last of its chain: nothing to hand the job to.
        let last = run_on(
            &db,
            vec![OPENCL],
            Error::executor_failed(OPENCL, "no memory"),
            true,
        );
        assert!(
            matches!(&last, Err(Outcome::Failed(Error::ExecutorFailed { .. }))),
            "{last:?}"
        );
        // No executor of the chain exists here: refused, not failed.
        let none = run_on(
            &db,
            vec![OPENCL, STREAMING],
            Error::NotFound("x".into()),
            false,
        );
        match none {
            Err(Outcome::Refused(refusal)) => {
                assert!(refusal.reason.contains("no executor"), "{refusal:?}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(tables(&env), before);
    }

    /// A job ends refused: its files are released and counted, no
    /// background error is set, and writes go on.
    #[test]
    fn a_refused_job_is_released_without_stopping_the_database() {
        let (_env, db) = database();
        let inner = &db.inner;
        let version = inner.lock_state().current.clone();
        let plan = picker::plan_for_range(&version, &inner.options, 0, None, None).unwrap();
        drop(version);
        let job = inner
            .service
            .plan_manual(&|| Some(inner.lock_state().current.clone()), |_| {
                Some((plan, ()))
            })
            .unwrap()
            .0
            .unwrap();
        let refusal = Refusal {
            executor: OPENCL,
            reason: "the opencl executor failed: busy".into(),
            panicked: false,
        };
        let result = inner.finish_job(&job, Outcome::Refused(refusal));
        assert!(
            matches!(result, Err(Error::ExecutorFailed { .. })),
            "{result:?}"
        );
        let scheduler = db.scheduler_stats();
        assert_eq!((scheduler.counts.refused, scheduler.counts.failed), (1, 0));
        db.put(&WriteOptions::default(), b"after", b"refusal")
            .unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(
            db.get(&Default::default(), b"after").unwrap().unwrap(),
            b"refusal"
        );
    }
}
