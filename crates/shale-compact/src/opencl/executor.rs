//! The OpenCL executor itself (see the module above): its options, its
//! statistics, and the three-stage pipeline that runs a job's slices on
//! the device. Built with the `opencl` feature only.

use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use opencl3::program::Program;
use shale_format::{Error, Result};

use super::pack::{AssembledFile, FileParts};
use super::pipeline::GcCarry;
use super::session::Session;
use super::slices::{SliceInput, SlicePlanner};
#[allow(
    clippy::wildcard_imports,
    reason = "the executor is this module's body"
)]
use super::*;
use crate::boundaries::GrandparentCutter;
use crate::job::{
    CompactionJob, CompactionOutput, Executor, JobIo, OutputSink, OutputTable, PhaseStats,
};
use crate::ExecutorKind;

/// The kernels, in dependency order (helpers first).
const KERNEL_SOURCES: [&str; 11] = [
    include_str!("kernels/common.cl"),
    include_str!("kernels/scan.cl"),
    include_str!("kernels/checksum.cl"),
    include_str!("kernels/unpack.cl"),
    include_str!("kernels/merge.cl"),
    include_str!("kernels/gc.cl"),
    include_str!("kernels/pack.cl"),
    include_str!("kernels/plan.cl"),
    include_str!("kernels/bloom.cl"),
    include_str!("kernels/snappy.cl"),
    include_str!("kernels/tests.cl"),
];

/// Build options of the program.
pub(super) const BUILD_OPTIONS: &str = "-cl-std=CL1.2";

/// The program source: every kernel file, helpers first.
pub fn kernel_source() -> String {
    KERNEL_SOURCES.join("\n")
}

/// Settings of the OpenCL executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenClOptions {
    /// Which device.
    pub device: DeviceSelector,
    /// How jobs are split between device and host.
    pub policy: PlacementPolicy,
    /// Jobs with more input files run on the CPU.
    pub max_device_files: usize,
    /// Device memory one job may use; `None`: half the device's global memory.
    pub memory_budget: Option<u64>,
    /// Threads for the host's share (Snappy, table layout; 0: one per core).
    pub cpu_threads: usize,
    /// Nice levels below normal for the host threads (see [`crate::nice`]).
    pub cpu_nice: u8,
    /// For tests: every launch of the kernel with this name fails; with
    /// `name#N`, every launch after its first N.
    pub inject_kernel_failure: Option<String>,
    /// At most this many input bytes per slice (`None`:
    /// [`PIPELINE_SLICE_INPUT_BYTES`], or less where the memory budget
    /// says so). Small values force many slices (tests).
    pub max_slice_input_bytes: Option<u64>,
    /// Where compiled kernels are kept between processes.
    pub program_cache: ProgramCache,
}

impl Default for OpenClOptions {
    fn default() -> OpenClOptions {
        OpenClOptions {
            device: DeviceSelector::default(),
            policy: PlacementPolicy::default(),
            max_device_files: DEFAULT_MAX_DEVICE_FILES,
            memory_budget: None,
            cpu_threads: 0,
            cpu_nice: 0,
            inject_kernel_failure: None,
            max_slice_input_bytes: None,
            program_cache: ProgramCache::default(),
        }
    }
}

/// What the device did, since the executor was made: its memory, slices
/// and kernel times. Jobs, refusals and fallbacks are not counted here but
/// where the job was given out: the engine's compaction service (its
/// ledger), or a [`crate::chain::FallbackChain`]'s output (`fallback`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenClStats {
    /// The most device memory one slice of a job allocated, in bytes.
    pub peak_job_device_bytes: u64,
    /// Slices the device jobs were cut into (1 per job that fit whole).
    pub slices: u64,
    /// Device time and volume per kernel (and "upload" / "download" for
    /// transfers), over every device job.
    pub kernels: BTreeMap<String, KernelTime>,
    /// What the device jobs cost the host, over every device job.
    pub device: DeviceCounters,
    /// Device memory kept for the next jobs now (allocated, held by no job).
    pub kept_device_bytes: u64,
    /// Pinned host memory the executor has mapped for its transfers, kept
    /// for the next jobs: mapping it (and touching every page once) is a
    /// host cost the first jobs pay, not every job.
    pub pinned_host_bytes: u64,
}

/// The OpenCL executor.
pub struct OpenClExecutor {
    device: Arc<DeviceContext>,
    program: Arc<Program>,
    program_origin: ProgramOrigin,
    options: OpenClOptions,
    limits: DeviceLimits,
    pool: rayon::ThreadPool,
    stats: Mutex<OpenClStats>,
    injected_failure: Option<session::InjectedFailure>,
    /// Kernels created by earlier slices, one set per session at a time
    /// (a kernel's arguments are its own state, so two sessions never
    /// share one).
    kernel_sets: Mutex<Vec<session::Kernels>>,
    /// Device buffers kept between slices and jobs.
    arena: Arc<arena::DeviceArena>,
    /// Pinned host buffers that input goes up from.
    staging: Arc<pinned::StagingPool>,
}

impl std::fmt::Debug for OpenClExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClExecutor")
            .field("device", self.device.info())
            .field("options", &self.options)
            .field("limits", &self.limits)
            .finish()
    }
}

impl OpenClExecutor {
    /// Opens the device and compiles the kernels (once per process; later
    /// executors share them). [`Unavailable`] when there is no usable
    /// device or the kernels do not build for it.
    pub fn new(options: OpenClOptions) -> std::result::Result<OpenClExecutor, Unavailable> {
        let device = device::device(options.device)?;
        let (program, program_origin) = device
            .program(&kernel_source(), BUILD_OPTIONS, &options.program_cache)
            .map_err(|e| Unavailable {
                reason: format!("the kernels do not build for {}: {e}", device.info().name),
            })?;
        let memory_budget = options
            .memory_budget
            .unwrap_or(device.info().global_memory / 2);
        let limits = DeviceLimits {
            max_device_files: options.max_device_files,
            memory_budget,
        };
        let unavailable = |reason: String| Unavailable { reason };
        let threads = match options.cpu_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("shale-opencl-{i}"))
            .start_handler({
                let nice = options.cpu_nice;
                move |_| crate::nice::lower_current_thread(nice)
            })
            .build()
            .map_err(|e| unavailable(format!("cannot start {threads} host threads: {e}")))?;
        let injected_failure = options
            .inject_kernel_failure
            .as_deref()
            .map(session::InjectedFailure::parse);
        let arena = device.new_arena();
        let staging = pinned::StagingPool::new(device.clone());
        Ok(OpenClExecutor {
            device,
            program,
            program_origin,
            options,
            limits,
            pool,
            stats: Mutex::new(OpenClStats::default()),
            injected_failure,
            kernel_sets: Mutex::new(Vec::new()),
            arena,
            staging,
        })
    }

    /// CPU time of the host pool's threads so far, in nanoseconds.
    fn pool_cpu_nanos(&self) -> u64 {
        self.pool
            .broadcast(|_| thread_cpu_nanos())
            .into_iter()
            .sum()
    }

    /// The device jobs run on.
    pub fn device_info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// Where the kernels came from when this process first loaded them.
    pub fn program_origin(&self) -> ProgramOrigin {
        self.program_origin
    }

    /// The limits placement applies.
    pub fn limits(&self) -> DeviceLimits {
        self.limits
    }

    /// A snapshot of what the executor did.
    pub fn stats(&self) -> OpenClStats {
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        stats.kept_device_bytes = self.arena.free_bytes();
        stats.pinned_host_bytes = self.staging.mapped_bytes();
        stats
    }

    fn record(&self, update: impl FnOnce(&mut OpenClStats)) {
        update(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Runs one slice on the device: its finished files, and the open file
    /// for the next slice.
    fn slice_on_device(
        &self,
        job: &CompactionJob,
        mut input: SliceInput,
        carried: pack::PackedSlice,
        gc: GcSite,
        gc_carry: &mut GcCarry<'_>,
        stats: &mut PhaseStats,
    ) -> Result<pack::PackedSlice, DeviceError> {
        // The open file's entries come in as the slice's last run.
        let source = input.name("the open output file".to_string());
        for block in &carried.open_blocks {
            input.push_contents(source, block)?;
        }
        input.run_first_block.push(input.blocks.len());
        let last = input.last;
        let kernels = self
            .kernel_sets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default();
        let mut session = Session::new(
            &self.device,
            &self.arena,
            self.program.clone(),
            kernels,
            self.limits.memory_budget,
            self.injected_failure.clone(),
        )?;
        let result = (|| {
            let slice = pipeline::SliceRun {
                session: &mut session,
                pool: &self.pool,
                job,
                carried: carried.open_entries,
                gc,
                carry: gc_carry,
                stats,
            };
            let Some(entries) = slice.entries(input)? else {
                return Ok(pack::PackedSlice::default());
            };
            let t = Instant::now();
            let packed = pack::pack_on_device(&mut session, &self.staging, job, &entries, last)?;
            stats.pack_secs += t.elapsed().as_secs_f64();
            Ok(packed)
        })();
        let finished = session.finish();
        self.kernel_sets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(finished.kernels);
        let result = result.and_then(|packed| finished.settled.map(|()| packed));
        let (times, allocated) = (finished.times, finished.allocated);
        costs::report_into(
            &mut stats.costs,
            times.iter().map(|(name, time)| (*name, time)),
            &finished.counters,
        );
        self.record(|s| {
            s.peak_job_device_bytes = s.peak_job_device_bytes.max(allocated);
            s.slices += 1;
            s.device.accumulate(&finished.counters);
            for (name, time) in times {
                s.kernels
                    .entry(name.to_string())
                    .or_default()
                    .accumulate(&time);
            }
        });
        result
    }

    /// The device pipeline: a reading thread, the device (this thread) and
    /// a writing thread, slice after slice. `Err` is a device failure (the
    /// files written so far are discarded); `Ok(Err)` a failure to write.
    /// `slice_bytes`: what [`device_fit`] said of the job (`None`: one
    /// slice).
    fn run_on_device(
        &self,
        job: &CompactionJob,
        io: &dyn JobIo,
        gc: GcSite,
        slice_bytes: Option<u64>,
    ) -> std::result::Result<Result<CompactionOutput>, DeviceError> {
        let started = Instant::now();
        let slice_bytes = slice_bytes.unwrap_or(u64::MAX).min(
            self.options
                .max_slice_input_bytes
                .unwrap_or(PIPELINE_SLICE_INPUT_BYTES),
        );
        let mut stats = PhaseStats::default();
        let (read_sender, read_receiver) = sync_channel::<Result<SliceInput, DeviceError>>(1);
        let (write_sender, write_receiver) = sync_channel::<Vec<FileParts>>(1);
        let pool_cpu_before = self.pool_cpu_nanos();
        let mapped_before = self.staging.mapped_bytes();
        let own_cpu_before = thread_cpu_nanos();
        let (device_result, read_busy, written, stage_cpu) = std::thread::scope(|scope| {
            let staging = self.staging.clone();
            let nice = self.options.cpu_nice;
            let reader = std::thread::Builder::new()
                .name("shale-opencl-read".into())
                .spawn_scoped(scope, move || {
                    crate::nice::lower_current_thread(nice);
                    let busy = read_slices(job, io, slice_bytes, staging, read_sender);
                    (busy, thread_cpu_nanos())
                });
            let writer = std::thread::Builder::new()
                .name("shale-opencl-write".into())
                .spawn_scoped(scope, move || {
                    // Its helpers start from it, at its priority.
                    crate::nice::lower_current_thread(nice);
                    let written = write_files(io, write_receiver);
                    let cpu = thread_cpu_nanos() + written.helper_cpu_nanos;
                    (written, cpu)
                });
            let device_result = self.device_stage(job, gc, read_receiver, write_sender, &mut stats);
            // Both channels are closed now (moved into device_stage): the
            // reader stops at its next send, the writer after the last file.
            let (read_busy, read_cpu) = reader
                .map_err(|_| ())
                .and_then(|reader| reader.join().map_err(|_| ()))
                .unwrap_or((0.0, 0));
            let written = writer
                .map_err(|e| Error::Internal(format!("cannot start the writing thread: {e}")))
                .and_then(|writer| {
                    writer
                        .join()
                        .map_err(|_| Error::Internal("the writing thread panicked".into()))
                });
            let (written, write_cpu) = written.unwrap_or_else(|error| {
                let written = Written {
                    outputs: Vec::new(),
                    bytes: 0,
                    entries: 0,
                    busy: 0.0,
                    helper_cpu_nanos: 0,
                    error: Some(error),
                };
                (written, 0)
            });
            let drive_cpu = thread_cpu_nanos().saturating_sub(own_cpu_before);
            (
                device_result,
                read_busy,
                written,
                [read_cpu, drive_cpu, write_cpu],
            )
        });
        // The stage threads lived for this job only: their whole CPU time
        // is the job's. The pool's threads outlive it; with several jobs on
        // this executor at once, each counts the pool's time during its run.
        let [read_cpu, drive_cpu, write_cpu] = stage_cpu;
        let pool_cpu = self.pool_cpu_nanos().saturating_sub(pool_cpu_before);
        let host_thread_cpu_nanos = read_cpu + drive_cpu + write_cpu + pool_cpu;
        let (device_busy, wait_read) = match device_result {
            Ok(times) => times,
            Err(error) => {
                // Nothing of a failed device job may stay behind.
                for table in &written.outputs {
                    let _ = io.discard_output(table.number);
                }
                return Err(error);
            }
        };
        if let Some(error) = written.error {
            return Ok(Err(error));
        }
        stats.read_secs += read_busy;
        stats.write_secs += written.busy;
        stats.bytes_written += written.bytes;
        let mapped = self.staging.mapped_bytes().saturating_sub(mapped_before);
        let device = stats.costs.device.get_or_insert_default();
        device.host_thread_cpu_nanos += host_thread_cpu_nanos;
        device.pinned_bytes_mapped += mapped;
        self.record(|s| {
            s.device.host_thread_cpu_nanos += host_thread_cpu_nanos;
            s.device.pinned_bytes_mapped += mapped;
        });
        stats.entries_out += written.entries;
        stats.total_secs = started.elapsed().as_secs_f64();
        stats.stage_busy_secs.insert("read".into(), read_busy);
        stats.stage_busy_secs.insert("device".into(), device_busy);
        stats.stage_busy_secs.insert("write".into(), written.busy);
        for (stage, nanos) in [
            ("read", read_cpu),
            ("device", drive_cpu),
            ("write", write_cpu),
            ("host pool", pool_cpu),
        ] {
            stats
                .stage_cpu_secs
                .insert(stage.into(), nanos as f64 / 1e9);
        }
        // I/O the device did not wait for: reading it waited `wait_read`
        // for; writing after the device finished is not hidden.
        let write_tail = (stats.total_secs - device_busy - wait_read).max(0.0);
        stats.overlapped_secs =
            (read_busy - wait_read).max(0.0) + (written.busy - write_tail).max(0.0);
        stats.bytes_read = job.input_bytes();
        Ok(Ok(CompactionOutput {
            executor: ExecutorKind::OpenCl.to_string(),
            outputs: written.outputs,
            stats,
            fallback: None,
        }))
    }

    /// The device's stage: every slice from `slices`, finished files to
    /// `files`. Returns its busy seconds and the seconds it waited for input.
    fn device_stage(
        &self,
        job: &CompactionJob,
        gc: GcSite,
        slices: Receiver<Result<SliceInput, DeviceError>>,
        files: SyncSender<Vec<FileParts>>,
        stats: &mut PhaseStats,
    ) -> std::result::Result<(f64, f64), DeviceError> {
        let mut gc_carry = GcCarry {
            cutter: GrandparentCutter::new(job),
            pending_stop: false,
        };
        let mut carried = pack::PackedSlice::default();
        let (mut busy, mut waited) = (0.0, 0.0);
        loop {
            let t = Instant::now();
            let Ok(input) = slices.recv() else {
                return Err(DeviceError::new("the reading thread stopped"));
            };
            waited += t.elapsed().as_secs_f64();
            let t = Instant::now();
            let input = input?;
            let last = input.last;
            let mut packed = self.slice_on_device(job, input, carried, gc, &mut gc_carry, stats)?;
            carried = pack::PackedSlice {
                files: Vec::new(),
                open_blocks: std::mem::take(&mut packed.open_blocks),
                open_entries: packed.open_entries,
            };
            busy += t.elapsed().as_secs_f64();
            if !packed.files.is_empty() && files.send(packed.files).is_err() {
                // The writer failed; its error is the job's.
                return Ok((busy, waited));
            }
            if last {
                if carried.open_entries != 0 {
                    return Err(DeviceError::new("entries left over after the last slice"));
                }
                return Ok((busy, waited));
            }
        }
    }
}

/// CPU time of the calling thread so far, in nanoseconds (0 where the
/// clock is missing).
fn thread_cpu_nanos() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return 0;
    }
    (now.tv_sec as u64) * 1_000_000_000 + now.tv_nsec as u64
}

/// The reading stage: slices of `job` into `slices` until the input is
/// used up, an error, or the device stage stops. Returns its busy seconds.
fn read_slices(
    job: &CompactionJob,
    io: &dyn JobIo,
    slice_bytes: u64,
    staging: Arc<pinned::StagingPool>,
    slices: SyncSender<Result<SliceInput, DeviceError>>,
) -> f64 {
    let t = Instant::now();
    let mut planner = match SlicePlanner::new(job, io, slice_bytes, Some(staging)) {
        Ok(planner) => planner,
        Err(error) => {
            let _ = slices.send(Err(error));
            return t.elapsed().as_secs_f64();
        }
    };
    let mut busy = t.elapsed().as_secs_f64();
    loop {
        let t = Instant::now();
        let next = planner.next_slice();
        busy += t.elapsed().as_secs_f64();
        match next {
            Ok(Some(slice)) => {
                let last = slice.last;
                if slices.send(Ok(slice)).is_err() || last {
                    return busy;
                }
            }
            Ok(None) => return busy,
            Err(error) => {
                let _ = slices.send(Err(error));
                return busy;
            }
        }
    }
}

/// What the writing stage wrote.
struct Written {
    outputs: Vec<OutputTable>,
    bytes: u64,
    entries: u64,
    /// Seconds spent writing and syncing (the stage's wall time).
    busy: f64,
    /// CPU time of the threads that helped the writing thread.
    helper_cpu_nanos: u64,
    /// Why it stopped early.
    error: Option<Error>,
}

/// Most files of a slice written and synced at once. One thread writing
/// and syncing files one after another was the slowest stage of a device
/// job on PoCL, and what a GPU leaves of a job is reading and writing:
/// files are independent, and an SSD syncs several at once in the time of
/// one (four at once against one: `docs/results/opencl-pocl.md`, "Fewer
/// launches, files written four at once, the CPU split by stage").
const PARALLEL_OUTPUT_FILES: usize = 4;

/// The writing stage: creates every file that arrives (numbers in key
/// order, as every executor gives them), then lays out, writes and syncs
/// a slice's files, up to [`PARALLEL_OUTPUT_FILES`] at once.
/// On an error it stops taking files (the device stage then sees the
/// channel closed) and keeps the error; `outputs` lists every file it
/// created, so that a device failure can discard them.
fn write_files(io: &dyn JobIo, files: Receiver<Vec<FileParts>>) -> Written {
    let mut written = Written {
        outputs: Vec::new(),
        bytes: 0,
        entries: 0,
        busy: 0.0,
        helper_cpu_nanos: 0,
        error: None,
    };
    for batch in files {
        let t = Instant::now();
        let mut work = Vec::with_capacity(batch.len());
        for parts in batch {
            match io.create_output() {
                Ok((number, sink)) => {
                    // Listed at once, so that a failure below discards it.
                    written.outputs.push(OutputTable {
                        number,
                        file_size: 0,
                        smallest: Vec::new(),
                        largest: Vec::new(),
                        entries: 0,
                    });
                    work.push(Mutex::new(Some((parts, sink))));
                }
                Err(error) => {
                    written.error = Some(error);
                    written.busy += t.elapsed().as_secs_f64();
                    return written;
                }
            }
        }
        let first = written.outputs.len() - work.len();
        let (results, helper_cpu) = write_in_parallel(&work);
        written.helper_cpu_nanos += helper_cpu;
        written.busy += t.elapsed().as_secs_f64();
        for (output, result) in written.outputs[first..].iter_mut().zip(results) {
            match result {
                Ok(file) => {
                    written.bytes += file.size;
                    written.entries += file.entries;
                    output.file_size = file.size;
                    output.smallest = file.smallest;
                    output.largest = file.largest;
                    output.entries = file.entries;
                }
                Err(error) => {
                    written.error.get_or_insert(error);
                }
            }
        }
        if written.error.is_some() {
            return written;
        }
    }
    written
}

/// A file to write: its parts and its sink, taken by whichever thread
/// gets to it first.
type FileWork = Mutex<Option<(FileParts, Box<dyn OutputSink>)>>;

/// Writes and syncs every file of `work`, on this thread and up to
/// [`PARALLEL_OUTPUT_FILES`]` - 1` more; each file's result in order, and
/// the CPU time of the threads started for it.
fn write_in_parallel(work: &[FileWork]) -> (Vec<Result<AssembledFile>>, u64) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<AssembledFile>>>> =
        work.iter().map(|_| Mutex::new(None)).collect();
    let write_some = || loop {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(slot) = work.get(i) else { break };
        let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some((parts, sink)) = taken else { continue };
        let result = write_one(parts, sink);
        *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
    };
    let helpers = PARALLEL_OUTPUT_FILES.min(work.len()).saturating_sub(1);
    let helper_cpu = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..helpers)
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("shale-opencl-write".into())
                    .spawn_scoped(scope, || {
                        write_some();
                        thread_cpu_nanos()
                    })
                    .ok()
            })
            .collect();
        write_some();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap_or(0))
            .sum::<u64>()
    });
    let results = results
        .into_iter()
        .map(|result| {
            result
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Err(Error::Internal("an output file was not written".into())))
        })
        .collect();
    (results, helper_cpu)
}

/// Lays one file out into its sink, then flushes and syncs it.
fn write_one(parts: FileParts, mut sink: Box<dyn OutputSink>) -> Result<AssembledFile> {
    // The data blocks are all here: their space is reserved in one call,
    // not block by block as the page cache writes them back.
    sink.reserve(parts.data_len())?;
    let (mut sink, file) = parts.assemble_into(sink)?;
    std::io::Write::flush(&mut sink).map_err(|e| Error::io("writing a compaction output", e))?;
    sink.finish()?;
    Ok(file)
}

impl Executor for OpenClExecutor {
    fn name(&self) -> &'static str {
        ExecutorKind::OpenCl.name()
    }

    /// True: the reading and writing threads and the host pool are lowered
    /// to [`OpenClOptions::cpu_nice`]; the calling thread drives the device
    /// and mostly waits for it. It blocks many times per job, and each
    /// wake-up of a lowered thread waits for a core behind the foreground
    /// (`docs/results/scheduler.md`, "The device's compaction thread at
    /// normal priority").
    fn lowers_its_own_threads(&self) -> bool {
        true
    }

    /// Runs `job` on the device, with gc where [`gc_site`] puts it. The
    /// caller placed it (the engine's scheduler by [`placement`], which asks
    /// [`device_fit`] under this executor's [`limits`](Self::limits));
    /// a job that does not fit the device (a caller that does not place,
    /// such as a [`crate::chain::FallbackChain`]) is refused by that same
    /// rule ([`Error::Refused`]), and one that the device fails ends with
    /// [`Error::ExecutorFailed`], both saying why: the caller runs it
    /// elsewhere. The executor never falls back on its own.
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        let name = ExecutorKind::OpenCl.name();
        crate::job::require_bytewise(name, io)?;
        let slice_bytes = device_fit(job, &self.limits)
            .map_err(|reason| Error::refused(name, format!("placed on the CPU: {reason}")))?;
        let gc = gc_site(job, self.options.policy);
        self.run_on_device(job, io, gc, slice_bytes)
            .unwrap_or_else(|error| {
                let why = format!("the device failed job {}: {}", job.id, error.reason);
                Err(Error::executor_failed(name, why))
            })
    }
}
