//! The `opencl` executor: the data-parallel phases of compaction as OpenCL
//! kernels (`kernels/*.cl`), on any OpenCL device — a GPU in production,
//! PoCL on the CPU in tests and CI. Each kernel has a CPU twin in
//! `crate::parallel` and the tables it writes are byte-identical to the
//! `streaming` reference.
//!
//! - `device.rs`: finding the device, one long-lived context per process,
//!   queues, compiled programs, limits; [`Unavailable`] when there is none.
//! - `placement.rs`: where a job runs ([`placement`], a pure function).
//! - `pipeline.rs`: read, unpack, merge and gc on the device; `pack.rs`:
//!   pack. Each file's header says which steps run on the host.
//! - `session.rs`, `scan.rs`: buffers, launches, timing; the device scan.
//!
//! **A failure never loses a compaction**: any device error (a build
//! failure, an allocation past the limits, a kernel that reports bad input,
//! an OpenCL error) makes the same job run on the CPU executor, with the
//! reason recorded in [`OpenClStats`]. No output file is created before the
//! device work is done, so the CPU run allocates the same file numbers.

mod device;
mod pack;
mod pipeline;
mod placement;
mod scan;
mod session;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use opencl3::program::Program;
use shale_format::{Error, Result};

pub use device::{
    device, list_devices, DeviceContext, DeviceError, DeviceInfo, DeviceSelector, ListedDevice,
    Unavailable,
};
pub use placement::{
    estimated_device_bytes, placement, DeviceLimits, GcSite, Placement, PlacementPolicy,
    DEFAULT_MAX_DEVICE_FILES, DEVICE_BYTES_PER_INPUT_BYTE, Q_COMPACTION_MAX_OUTPUT_LEVEL,
};
pub use session::KernelTime;

use crate::job::{CompactionJob, CompactionOutput, Executor, JobIo, OutputTable, PhaseStats};
use crate::parallel::ParallelExecutor;
use session::Session;

/// Name of this executor.
pub const OPENCL: &str = "opencl";

/// The kernels, in dependency order (helpers first).
const KERNEL_SOURCES: [&str; 9] = [
    include_str!("kernels/common.cl"),
    include_str!("kernels/scan.cl"),
    include_str!("kernels/checksum.cl"),
    include_str!("kernels/unpack.cl"),
    include_str!("kernels/merge.cl"),
    include_str!("kernels/gc.cl"),
    include_str!("kernels/pack.cl"),
    include_str!("kernels/bloom.cl"),
    include_str!("kernels/tests.cl"),
];

/// Build options of the program.
const BUILD_OPTIONS: &str = "-cl-std=CL1.2";

/// The program source: every kernel file, helpers first.
pub fn kernel_source() -> String {
    KERNEL_SOURCES.join("\n")
}

/// What to do when the device fails a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnDeviceError {
    /// Run the job on the CPU executor and record why (the default).
    #[default]
    FallBack,
    /// Fail the job with the device's error (tests that must prove the
    /// device path ran).
    Fail,
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
    /// What a device failure does.
    pub on_device_error: OnDeviceError,
    /// Threads for the host's share (Snappy, table layout) and for the CPU
    /// executor jobs fall back to (0: one per core).
    pub cpu_threads: usize,
    /// Memory budget of the CPU executor.
    pub cpu_memory_budget: usize,
    /// For tests: every launch of the kernel with this name fails.
    pub inject_kernel_failure: Option<String>,
}

impl Default for OpenClOptions {
    fn default() -> OpenClOptions {
        OpenClOptions {
            device: DeviceSelector::default(),
            policy: PlacementPolicy::default(),
            max_device_files: DEFAULT_MAX_DEVICE_FILES,
            memory_budget: None,
            on_device_error: OnDeviceError::default(),
            cpu_threads: 0,
            cpu_memory_budget: crate::parallel::DEFAULT_MEMORY_BUDGET,
            inject_kernel_failure: None,
        }
    }
}

/// What the executor did, since it was made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenClStats {
    /// Jobs that ran on the device.
    pub device_jobs: u64,
    /// Jobs placement sent to the CPU.
    pub placed_on_cpu: u64,
    /// Jobs the device failed, run again on the CPU.
    pub fallbacks: u64,
    /// Why the last job placed on the CPU went there.
    pub last_placement_reason: Option<String>,
    /// Why the device failed the last job it failed.
    pub last_fallback_reason: Option<String>,
    /// The most device memory one job allocated, in bytes.
    pub peak_job_device_bytes: u64,
    /// Device time and volume per kernel (and "upload" / "download" for
    /// transfers), over every device job.
    pub kernels: BTreeMap<String, KernelTime>,
}

/// The OpenCL executor.
pub struct OpenClExecutor {
    device: Arc<DeviceContext>,
    program: Arc<Program>,
    options: OpenClOptions,
    limits: DeviceLimits,
    cpu: ParallelExecutor,
    pool: rayon::ThreadPool,
    stats: Mutex<OpenClStats>,
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
        let program = device
            .program(&kernel_source(), BUILD_OPTIONS)
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
        let cpu = ParallelExecutor::new(options.cpu_threads, options.cpu_memory_budget)
            .map_err(|e| unavailable(format!("the CPU executor: {e}")))?;
        let threads = match options.cpu_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("shale-opencl-{i}"))
            .build()
            .map_err(|e| unavailable(format!("cannot start {threads} host threads: {e}")))?;
        Ok(OpenClExecutor {
            device,
            program,
            options,
            limits,
            cpu,
            pool,
            stats: Mutex::new(OpenClStats::default()),
        })
    }

    /// The device jobs run on.
    pub fn device_info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// The limits placement applies.
    pub fn limits(&self) -> DeviceLimits {
        self.limits
    }

    /// A snapshot of what the executor did.
    pub fn stats(&self) -> OpenClStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, update: impl FnOnce(&mut OpenClStats)) {
        update(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Runs the device part of `job`: every output file, assembled in memory.
    fn compute_on_device(
        &self,
        job: &CompactionJob,
        io: &dyn JobIo,
        gc: GcSite,
        stats: &mut PhaseStats,
    ) -> std::result::Result<Vec<pack::AssembledFile>, DeviceError> {
        let mut session = Session::new(
            &self.device,
            self.program.clone(),
            self.limits.memory_budget,
            self.options.inject_kernel_failure.clone(),
        )?;
        let result = (|| {
            let Some(entries) =
                pipeline::entries_on_device(&mut session, &self.pool, job, io, gc, stats)?
            else {
                return Ok(Vec::new());
            };
            let t = Instant::now();
            let files = pack::pack_on_device(&mut session, &self.pool, job, &entries)?;
            stats.pack_secs += t.elapsed().as_secs_f64();
            Ok(files)
        })();
        let times = std::mem::take(&mut session.times);
        let allocated = session.allocated();
        self.record(|s| {
            s.peak_job_device_bytes = s.peak_job_device_bytes.max(allocated);
            for (name, time) in times {
                s.kernels
                    .entry(name.to_string())
                    .or_default()
                    .accumulate(&time);
            }
        });
        result
    }

    fn run_on_device(
        &self,
        job: &CompactionJob,
        io: &dyn JobIo,
        gc: GcSite,
    ) -> std::result::Result<Result<CompactionOutput>, DeviceError> {
        let started = Instant::now();
        let mut stats = PhaseStats::default();
        let files = self.compute_on_device(job, io, gc, &mut stats)?;
        // Only now are output files created: a device failure above left
        // nothing behind, and the CPU run gets the same file numbers.
        let written = (|| {
            let mut outputs = Vec::with_capacity(files.len());
            for file in files {
                let t = Instant::now();
                let (number, mut sink) = io.create_output()?;
                std::io::Write::write_all(&mut sink, &file.bytes)
                    .and_then(|()| std::io::Write::flush(&mut sink))
                    .map_err(|e| Error::io("writing a compaction output", e))?;
                sink.finish()?;
                stats.write_secs += t.elapsed().as_secs_f64();
                stats.bytes_written += file.bytes.len() as u64;
                stats.entries_out += file.entries;
                outputs.push(OutputTable {
                    number,
                    file_size: file.bytes.len() as u64,
                    smallest: file.smallest,
                    largest: file.largest,
                    entries: file.entries,
                });
            }
            stats.total_secs = started.elapsed().as_secs_f64();
            Ok(CompactionOutput {
                executor: OPENCL.to_string(),
                outputs,
                stats,
                fallback: None,
            })
        })();
        Ok(written)
    }
}

impl Executor for OpenClExecutor {
    fn name(&self) -> &'static str {
        OPENCL
    }

    /// Runs `job` where [`placement`] says; a device failure runs it on the
    /// CPU executor (whose output says `parallel`) unless the options say
    /// [`OnDeviceError::Fail`].
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        let gc = match placement(job, self.options.policy, &self.limits) {
            Placement::Device { gc } => gc,
            Placement::Cpu { reason } => {
                let why = format!("placed on the CPU: {reason}");
                self.record(|s| {
                    s.placed_on_cpu += 1;
                    s.last_placement_reason = Some(reason);
                });
                return self.cpu.run(job, io).map(|output| CompactionOutput {
                    fallback: Some(why),
                    ..output
                });
            }
        };
        match self.run_on_device(job, io, gc) {
            Ok(written) => {
                if written.is_ok() {
                    self.record(|s| s.device_jobs += 1);
                }
                written
            }
            Err(error) => match self.options.on_device_error {
                OnDeviceError::Fail => Err(Error::NotSupported(format!(
                    "the OpenCL device failed job {}: {error}",
                    job.id
                ))),
                OnDeviceError::FallBack => {
                    let why = format!("the device failed: {}", error.reason);
                    self.record(|s| {
                        s.fallbacks += 1;
                        s.last_fallback_reason = Some(error.reason);
                    });
                    self.cpu.run(job, io).map(|output| CompactionOutput {
                        fallback: Some(why),
                        ..output
                    })
                }
            },
        }
    }
}
