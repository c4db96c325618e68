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
/// The CPU twins of the OpenCL kernels that no executor runs (this crate's
/// device tests only).
#[cfg(test)]
pub(crate) mod twins;

pub use crate::mem_io::MemIo;
pub use jobs::{file, job, level0};
pub use require::{required, skip, PROVIDE_OPENCL, REQUIRE_ALL};
pub use tables::{build_table, table_file, Level0Inputs, RandomLevel0};

/// `GET path` over HTTP/1.1 from `at` (a worker's metrics port): the whole
/// answer, head and body.
#[allow(clippy::unwrap_used, reason = "test support")]
pub fn http_get(at: impl std::fmt::Display, path: &str) -> String {
    use std::io::{Read, Write};
    let at = at.to_string();
    let mut stream = std::net::TcpStream::connect(&at).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}
