//! Test support for the workspace's tests, written once: jobs with shared
//! defaults ([`job`], [`level0`], [`file`]), tables built from entries or at
//! random ([`build_table`], [`RandomLevel0`]), the in-memory [`MemIo`], and
//! whether a test that needs something of its machine may skip
//! ([`required`], [`skip`]). Compiled for this crate's own tests and,
//! through the `testing` feature that the workspace's dev-dependencies turn
//! on, for the other crates' tests, benches and examples; never part of a
//! build.

mod jobs;
mod require;
mod tables;

pub use crate::mem_io::MemIo;
pub use jobs::{file, job, level0};
pub use require::{required, skip, PROVIDE_OPENCL, REQUIRE_ALL};
pub use tables::{build_table, table_file, Level0Inputs, RandomLevel0};
