//! Compaction as plain data: the [`job::CompactionJob`], the
//! [`job::Executor`] trait and which executor is which ([`ExecutorKind`],
//! [`ExecutorId`]), the one definition of output-file boundaries
//! ([`boundaries`]), the drop rules ([`gc`]) and the executors. Depends only on
//! `shale-format`: an executor never sees a version, a lock or the write path
//! (see `docs/architecture.md`).

pub mod boundaries;
pub mod chain;
pub mod executor_id;
pub mod gc;
pub(crate) mod inputs;
pub mod job;
pub mod mem_io;
pub mod nice;
pub mod opencl;
pub mod parallel;
pub(crate) mod pool;
pub mod steps;
pub mod streaming;
pub mod subcompaction;
pub(crate) mod syncer;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use executor_id::{ExecutorId, ExecutorKind};
pub use job::{CompactionJob, CompactionOutput, Executor, JobFile, JobIo, KeyRange, OutputSink};
pub use parallel::ParallelExecutor;
pub use streaming::StreamingExecutor;
pub mod remote;
