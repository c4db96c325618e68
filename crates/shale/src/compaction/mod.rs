//! Compaction: what to compact (`picker`), in which order (`priority`),
//! when and where it runs (`scheduler`, the pure core, and `service`, which
//! owns a job's whole life and its ledger), with which executors
//! (`executors`, where `auto` is defined), and the running of jobs
//! (`runner`), which reaches the engine only through `host::JobHost`.

pub(crate) mod executors;
pub(crate) mod host;
pub mod picker;
pub mod priority;
pub(crate) mod runner;
pub mod scheduler;
pub mod service;
#[cfg(test)]
pub(crate) mod test_versions;
