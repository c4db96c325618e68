//! Compaction as plain data: the `CompactionJob`, the `Executor` trait, the one
//! definition of block and file boundaries, and the executors (`streaming`,
//! `parallel`, `opencl`). Depends only on `shale-format`; it never sees a
//! version, a lock or the write path (see `../shared/DESIGN.md`).
//!
//! Status: the job and the executors arrive with the compaction issues; this
//! crate exists now so that the dependency graph
//! `shale-format <- shale-compact <- shale <- shale-cli` is fixed from the start.
