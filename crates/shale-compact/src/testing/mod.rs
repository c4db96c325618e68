//! Test support for the workspace's tests, written once: whether a test
//! that needs something of its machine may skip ([`required`], [`skip`]).
//! Compiled for this crate's own tests and, through the `testing` feature
//! that the workspace's dev-dependencies turn on, for the other crates'
//! tests; never part of a build.

mod require;

pub use require::{required, skip, PROVIDE_OPENCL, REQUIRE_ALL};
