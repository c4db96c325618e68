//! Compaction decisions: what to compact (`picker`), in which order
//! (`priority`), and when and where it runs (`scheduler`).

pub mod picker;
pub mod priority;
pub mod scheduler;
#[cfg(test)]
pub(crate) mod test_versions;
