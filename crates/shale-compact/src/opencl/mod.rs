//! The `opencl` executor: the data-parallel phases of compaction as OpenCL
//! kernels (`kernels/*.cl`), on any OpenCL device — a GPU in production,
//! PoCL on the CPU in tests and CI. Each kernel has a CPU twin, in the
//! steps it shares with `parallel` (`crate::steps`) or under the tests
//! (`crate::testing::twins`), and the tables it writes are byte-identical
//! to the `streaming` reference.
//!
//! Only the names, the settings types and placement (a pure function) are
//! built without the `opencl` cargo feature; the executor needs it.
//!
//! - `device.rs`: finding the device, one long-lived context per process,
//!   queues, compiled programs, limits; [`Unavailable`] when there is none.
//! - `program_cache.rs`: compiled kernels kept on disk between processes.
//! - `device_fit.rs`: whether a job fits the device and where its gc runs
//!   ([`device_fit`], [`gc_site`], [`placement`]: pure functions the
//!   engine's scheduler and the executor share).
//! - `slices.rs`: cutting a job into key-range slices that fit the
//!   device-memory budget, and reading them.
//! - `pipeline.rs`: unpack, merge and gc of one slice on the device;
//!   `pack.rs`: pack. Each file's header says which steps run on the host.
//! - `session.rs`, `scan.rs`: buffers, two queues and events, launches,
//!   timing, the cost counters; the device scan.
//! - `costs.rs`: the cost counters and kernel times, and how a job reports
//!   them to the engine (the neutral `CostReport`).
//! - `arena.rs`: device buffers kept between slices and jobs;
//!   `pinned.rs`: pinned host buffers that input goes up from; `wait.rs`:
//!   waiting for the device by callback, never by spinning.
//!
//! **The pipeline** (the GPU paper's, in three stages on three threads): a
//! reading thread reads and decompresses slice k+1 while the device works
//! on slice k, and a writing thread writes and syncs the files of slice k-1.
//! Within a slice, uploads and read-backs run on a transfer queue beside
//! the compute queue (see `session.rs`). Each stage's busy time goes into
//! the job's `PhaseStats::stage_busy_secs`; their sum above the wall time
//! is work the pipeline overlapped.
//!
//! **A failure never loses a compaction**: any device error (a build
//! failure, an allocation past the limits, a kernel that reports bad input,
//! an OpenCL error) makes the same job run on the CPU executor, with the
//! reason recorded in [`OpenClStats`]. Files of finished slices may already
//! be written then: they are discarded (`JobIo::discard_output`) before
//! the CPU run, which allocates new file numbers. A failure in the first
//! slice (where bad input and injected failures show) leaves nothing
//! behind.

#[cfg(feature = "opencl")]
mod arena;
#[cfg(feature = "opencl")]
mod costs;
#[cfg(feature = "opencl")]
mod device;
#[cfg(feature = "opencl")]
mod device_error;
mod device_fit;
#[cfg(feature = "opencl")]
mod executor;
#[cfg(feature = "opencl")]
mod pack;
#[cfg(feature = "opencl")]
mod pinned;
#[cfg(feature = "opencl")]
mod pipeline;
#[cfg(feature = "opencl")]
mod program_cache;
#[cfg(feature = "opencl")]
mod scan;
#[cfg(feature = "opencl")]
mod session;
#[cfg(feature = "opencl")]
mod slices;
#[cfg(all(test, feature = "opencl"))]
mod tests;
#[cfg(feature = "opencl")]
mod wait;

#[cfg(feature = "opencl")]
pub use costs::{DeviceCounters, KernelTime};
#[cfg(feature = "opencl")]
pub use device::{
    chosen_device, device, list_devices, DeviceContext, DeviceInfo, ListedDevice, Unavailable,
};
#[cfg(feature = "opencl")]
pub use device_error::DeviceError;
pub use device_fit::{
    device_fit, estimated_device_bytes, gc_site, placement, slice_input_bytes, DeviceLimits,
    DeviceSelector, GcSite, Placement, PlacementPolicy, DEFAULT_MAX_DEVICE_FILES,
    DEVICE_BYTES_PER_INPUT_BYTE, MIN_SLICE_INPUT_BYTES, PIPELINE_SLICE_INPUT_BYTES,
    Q_COMPACTION_MAX_OUTPUT_LEVEL,
};

#[cfg(feature = "opencl")]
pub use executor::{kernel_source, OpenClExecutor, OpenClOptions, OpenClStats};
#[cfg(feature = "opencl")]
pub use program_cache::{ProgramCache, ProgramOrigin, PROGRAM_CACHE_VARIABLE};
