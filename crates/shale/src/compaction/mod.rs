//! Compaction decisions: what to compact (`picker`), in which order
//! (`priority`), and when and where it runs (`scheduler`, the pure core, and
//! `service`, which owns a job's whole life).

pub mod picker;
pub mod priority;
pub mod scheduler;
pub mod service;
#[cfg(test)]
pub(crate) mod test_versions;
