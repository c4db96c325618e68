//! Compaction decisions: what to compact (`picker`).

pub mod picker;
