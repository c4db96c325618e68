//! The scheduler's threaded shell: the compaction threads, manual
//! compaction and the executor fallback chain. The decisions (what is
//! queued, what runs next, on which executor, in how many sub-compactions)
//! are the pure core's (`compaction::scheduler`, `compaction::priority`);
//! this file only carries them out.
//!
//! Each compaction thread serves a lane: the device lane (when the database
//! has an OpenCL device) offers its jobs to the device first; host lanes run
//! them on CPU executors. A thread refills the queues, takes a job from the
//! end its lane's measured throughput earns (equation 3), runs it through
//! its executor chain, in sub-compactions when it is large, and installs it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use shale_compact::job::{CompactionJob, CompactionOutput, Executor};
use shale_compact::opencl::OPENCL;
use shale_compact::parallel::PARALLEL;
use shale_compact::remote::REMOTE;
use shale_compact::streaming::STREAMING;
use shale_format::version_edit::NUM_LEVELS;
use shale_format::{Error, Result};

use super::executors::Lane;
use super::job_io::EngineJobIo;
use super::DbInner;
use crate::compaction::picker;
use crate::compaction::priority::{self, QueueEnd};
use crate::compaction::scheduler::placement::{self, Chain, Load};
use crate::compaction::scheduler::{ScheduledJob, Scheduler};
use crate::options::available_cores;
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
        let lane = worker.executors.lane_of_thread(i);
        threads.push(spawn(
            format!("shale-compact-{i}"),
            Box::new(move || {
                // Not the flush thread: writers wait for flushes.
                shale_compact::nice::lower_current_thread(worker.options.compaction_nice);
                worker.compaction_loop(lane)
            }),
        )?);
    }
    // Threads that wait on remote workers, not on cores: the nice level
    // does not matter to them, and they leave the others to the CPU.
    for i in 0..inner.executors.remote_lanes() {
        let worker = inner.clone();
        threads.push(spawn(
            format!("shale-remote-{i}"),
            Box::new(move || worker.compaction_loop(Lane::Remote)),
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

    fn compaction_loop(self: Arc<Self>, lane: Lane) {
        let mut seen_epoch = 0;
        loop {
            {
                let mut state = self.lock_state();
                while !self.shutting_down()
                    && (state.work_epoch == seen_epoch || state.bg_error.is_some())
                {
                    state = self.wait(&self.work_cv, state);
                }
                if self.shutting_down() {
                    return;
                }
                seen_epoch = state.work_epoch;
            }
            match self.schedule_next(lane) {
                Some(job) => {
                    self.run_scheduled(&job, lane);
                    // More work may be ready now.
                    seen_epoch = 0;
                }
                None => self.done_cv.notify_all(),
            }
        }
    }

    /// Revalidates and refills the queues, then takes a job for `lane`.
    fn schedule_next(&self, lane: Lane) -> Option<ScheduledJob> {
        let mut scheduler = self.lock_scheduler();
        // Read under the scheduler lock: a job that installed since could
        // otherwise be finished in the scheduler but missing from the
        // version read, and a pick would overlap its outputs.
        let version = self.lock_state().current.clone();
        self.refill(&mut scheduler, &version);
        let end = self.queue_end(&scheduler, lane);
        scheduler.take(&version, &self.options, end)
    }

    /// Drops stale queued jobs and picks new ones, logging both.
    /// REQUIRES: `scheduler` is the locked scheduler.
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
        let cpu = [PARALLEL, STREAMING]
            .iter()
            .filter_map(|name| book.throughput(name))
            .reduce(f64::max);
        match lane {
            Lane::Device => priority::queue_end(book.throughput(OPENCL), &[cpu], QueueEnd::Large),
            Lane::Host if self.executors.device.is_some() => {
                priority::queue_end(cpu, &[book.throughput(OPENCL)], QueueEnd::Small)
            }
            Lane::Host => QueueEnd::Large,
            Lane::Remote => priority::queue_end(book.throughput(REMOTE), &[cpu], QueueEnd::Large),
        }
    }

    /// Runs a taken job and installs it; its failure becomes the background
    /// error. The job leaves the scheduler either way.
    fn run_scheduled(&self, job: &ScheduledJob, lane: Lane) {
        let result = self.run_job(job, lane, None);
        {
            let mut scheduler = self.lock_scheduler();
            scheduler.finish(job.ticket);
        }
        let mut state = self.lock_state();
        match &result {
            Ok(()) => state.resume.reset_backoff(),
            Err(err) => {
                let err = err.clone().during(&compaction_name(job));
                self.record_background_error(&mut state, &err);
            }
        }
        state.work_epoch += 1;
        self.work_cv.notify_all();
        self.done_cv.notify_all();
    }

    /// Runs a taken job (a trivial move, or a job on its executor chain, in
    /// sub-compactions when it is large) and installs the result.
    /// `executor`: the executor a manual compaction asked for (then
    /// `streaming` if it fails), instead of the scheduler's choice.
    fn run_job(
        &self,
        scheduled: &ScheduledJob,
        lane: Lane,
        executor: Option<&'static str>,
    ) -> Result<()> {
        let started = Instant::now();
        let plan = &scheduled.plan;
        if plan.is_trivial_move(&self.options) {
            self.install_trivial_move(plan, started)?;
            let mut scheduler = self.lock_scheduler();
            scheduler.counts.trivial_moves += 1;
            scheduler.counts.completed += 1;
            return Ok(());
        }
        // The version is needed only to describe the job; holding it longer
        // would keep the inputs alive past the install that obsoletes them.
        let job = {
            let state = self.lock_state();
            let (version, smallest_snapshot) =
                (state.current.clone(), self.smallest_snapshot(&state));
            drop(state);
            plan.to_job(
                self.next_job_id.fetch_add(1, Ordering::SeqCst),
                &version,
                smallest_snapshot,
                &self.options,
            )
        };
        // A worker runs a job whole: its own cores split it if they like.
        let parts = match (lane, executor) {
            (Lane::Remote, _) | (_, Some(REMOTE)) => 1,
            // Sub-compaction ranges are cut in bytewise order.
            _ if !self.order.is_bytewise() => 1,
            _ => self.subcompaction_parts(scheduled, &job),
        };
        let chain = if let Some(name) = executor {
            placement::requested(name)
        } else {
            let scheduler = self.lock_scheduler();
            let load = Load {
                cores: available_cores(),
                other_jobs: scheduler.running().len().saturating_sub(1),
                parts,
                job_sequence: job.id,
            };
            let device = match lane {
                Lane::Device => self.executors.device.as_ref().map(|d| &d.facts),
                Lane::Host | Lane::Remote => None,
            };
            let chain =
                placement::chain(&job, &self.executors.choice, device, &scheduler.book, &load);
            match lane {
                Lane::Remote if self.executors.remote.is_some() => placement::remote_first(chain),
                _ => chain,
            }
        };
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
        let ran = self.run_chain(&job, &chain, parts, &|name| self.executors.by_name(name))?;
        let result = self.install_compaction(plan, &ran.output, started);
        // A failed install may still have written the MANIFEST record that
        // names the outputs, so they are kept while the database is in
        // error; a resume (once a new MANIFEST is current) or the next open
        // deletes them.
        ran.io.release(false);
        let summary = match result {
            Ok(summary) => summary,
            Err(err) => {
                let mut state = self.lock_state();
                for table in &ran.output.outputs {
                    state.pending_outputs.insert(table.number);
                    state.resume.unrecorded_tables.push(table.number);
                }
                return Err(err);
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        if plan.level == 0 && seconds > 0.0 {
            let rate = job.input_bytes() as f64 / seconds;
            self.l0_drain_rate.store(rate.to_bits(), Ordering::Relaxed);
        }
        {
            let mut scheduler = self.lock_scheduler();
            scheduler.counts.completed += 1;
            scheduler.book.record_job(
                &ran.output.executor,
                job.input_bytes(),
                seconds,
                ran.output.stats.entries_in,
            );
            if plan.is_cross_level() {
                scheduler.counts.cross_level += 1;
            }
            if ran.subcompactions > 1 {
                scheduler.counts.split_jobs += 1;
                scheduler.counts.subcompactions += ran.subcompactions as u64;
            }
            if let Some(reason) = &ran.output.fallback {
                scheduler.book.record_fallback(reason.clone());
            }
        }
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
            "Compaction #{} done by {}{}: read {} bytes, wrote {written} bytes in {} files, {:.3} s; {summary}",
            job.id,
            ran.output.executor,
            if ran.subcompactions > 1 {
                format!(" in {} sub-compactions", ran.subcompactions)
            } else {
                String::new()
            },
            job.input_bytes(),
            ran.output.outputs.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
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

    /// Runs `job` on the first executor of `chain` that completes it. An
    /// executor's failure hands the job (from scratch, its files deleted) to
    /// the next one; corrupt input, an I/O error, or a failure of the last
    /// executor (the reference), is the job's failure.
    /// `executor` resolves the chain's names (the database's executors).
    fn run_chain(
        &self,
        job: &CompactionJob,
        chain: &Chain,
        parts: usize,
        executor: &dyn Fn(&str) -> Option<Arc<dyn Executor>>,
    ) -> Result<Ran<'_>> {
        let mut fallback = chain
            .kept_off_device
            .as_ref()
            .map(|why| format!("placed on the CPU: {why}"));
        for (i, name) in chain.executors.iter().enumerate() {
            let Some(executor) = executor(name) else {
                continue;
            };
            let io = EngineJobIo::new(self);
            match run_in_parts(&*executor, job, &io, parts, self.options.compaction_nice) {
                Ok((output, subcompactions)) => {
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
                Err(err) => {
                    io.release(true);
                    let last = i + 1 == chain.executors.len();
                    if !placement::passes_to_next_executor(&err) || last {
                        shale_log!(self.info_log, "Compaction #{} failed: {err}", job.id);
                        return Err(err);
                    }
                    let next = chain.executors[i + 1];
                    shale_log!(
                        self.info_log,
                        "Compaction #{}: the {name} executor failed ({err}); running it on {next}",
                        job.id
                    );
                    self.lock_scheduler().book.record_failure(name);
                    fallback = Some(match &err {
                        // Its message already names the executor.
                        Error::ExecutorFailed { .. } => err.to_string(),
                        _ => format!("the {name} executor failed: {err}"),
                    });
                }
            }
        }
        Err(Error::InvalidArgument(format!(
            "compaction #{}: no executor of the chain {:?} is available",
            job.id, chain.executors
        )))
    }

    /// Compacts the user-key range `[begin, end]` (`None`: unbounded) down
    /// through every level that holds it. Each level's plan goes through the
    /// scheduler's queue (reserving its files, visible in
    /// `shale.scheduler`) and runs on this thread, in sub-compactions.
    /// `executor`: run every job on it (then `streaming` if it fails)
    /// instead of where the scheduler would; checked to exist first.
    pub(super) fn compact_range(
        &self,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        executor: Option<&str>,
    ) -> Result<()> {
        let executor = match executor {
            None => None,
            Some(name) => self.executors.for_manual_compaction(name)?,
        };
        self.flush_memtable()?;
        let deepest = {
            let version = self.lock_state().current.clone();
            (1..NUM_LEVELS)
                .filter(|&l| version.overlaps(l, begin, end))
                .max()
                .unwrap_or(1)
        };
        for level in 0..deepest {
            loop {
                if let Some(err) = self.lock_state().bg_error.clone() {
                    return Err(err);
                }
                let mut scheduler = self.lock_scheduler();
                // Planned from the version read under the scheduler lock (see
                // `schedule_next`); not held while the job runs, where it
                // would keep the inputs alive past the install.
                let plan = {
                    let version = self.lock_state().current.clone();
                    if !version.overlaps(level, begin, end) {
                        break;
                    }
                    picker::plan_for_range(&version, &self.options, level, begin, end)
                };
                let Some(plan) = plan else {
                    break;
                };
                let taken = {
                    scheduler.enqueue_manual(plan).and_then(|ticket| {
                        match scheduler.take_ticket(ticket) {
                            Some(job) => Some(job),
                            None => {
                                scheduler.cancel(ticket);
                                None
                            }
                        }
                    })
                };
                drop(scheduler);
                match taken {
                    Some(job) => {
                        // On the device when there is one, as thread 0 would.
                        let result = self.run_job(&job, self.executors.lane_of_thread(0), executor);
                        self.lock_scheduler().finish(job.ticket);
                        let mut state = self.lock_state();
                        state.work_epoch += 1;
                        self.work_cv.notify_all();
                        self.done_cv.notify_all();
                        if let Err(err) = result {
                            let err = err.during(&compaction_name(&job));
                            self.record_background_error(&mut state, &err);
                            return Err(err);
                        }
                    }
                    None => {
                        // A queued or running job holds some of the files:
                        // wait for the next job to finish.
                        let mut state = self.lock_state();
                        state.work_epoch += 1;
                        self.work_cv.notify_all();
                        let (guard, _) = self
                            .done_cv
                            .wait_timeout(state, std::time::Duration::from_millis(20))
                            .unwrap_or_else(|e| e.into_inner());
                        drop(guard);
                    }
                }
            }
        }
        Ok(())
    }

    /// Waits until no compaction is needed, queued or running.
    pub(super) fn wait_for_compactions(&self) -> Result<()> {
        loop {
            let needed = {
                let version = self.lock_state().current.clone();
                let pointers = self.lock_scheduler().compact_pointers.clone();
                picker::pick_compaction(&version, &self.options, &pointers, &[]).is_some()
            };
            let idle = self.lock_scheduler().is_idle();
            let mut state = self.lock_state();
            if let Some(err) = &state.bg_error {
                return Err(err.clone());
            }
            if !needed && idle && state.imm.is_none() && !state.flushing {
                return Ok(());
            }
            state.work_epoch += 1;
            self.work_cv.notify_all();
            let (guard, _) = self
                .done_cv
                .wait_timeout(state, std::time::Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner());
            drop(guard);
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

    fn run(db: &DB, failure: Error) -> Result<(String, Option<String>)> {
        let inner = &db.inner;
        let version = inner.lock_state().current.clone();
        let plan = picker::plan_for_range(&version, &inner.options, 0, None, None).unwrap();
        let job = plan.to_job(1, &version, u64::MAX, &inner.options);
        drop(version);
        let chain = Chain {
            executors: vec![OPENCL, STREAMING],
            reason: "test".into(),
            kept_off_device: None,
        };
        let failing: Arc<dyn Executor> = Arc::new(Failing(failure));
        let resolve = |name: &str| -> Option<Arc<dyn Executor>> {
            match name {
                OPENCL => Some(failing.clone()),
                _ => Some(Arc::new(StreamingExecutor)),
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

    #[test]
    fn corrupt_input_and_disk_errors_are_not_passed_on() {
        let (env, db) = database();
        let before = tables(&env);
        let corrupt = run(&db, Error::corruption(7, "bad block").at("000005.ldb", 0));
        assert!(
            matches!(corrupt, Err(Error::Corruption { .. })),
            "{corrupt:?}"
        );
        let disk = run(&db, Error::io("writing", std::io::Error::other("no space")));
        assert!(matches!(disk, Err(Error::Io { .. })), "{disk:?}");
        assert_eq!(tables(&env), before, "failed attempts leave no file");
    }
}
