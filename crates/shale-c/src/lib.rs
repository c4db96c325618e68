//! libshaledb: LevelDB 1.23's C API (`include/leveldb/c.h`) over ShaleDB,
//! so a program written for LevelDB's C API relinks with `-lshaledb` and
//! runs unchanged; ShaleDB's own options are `shaledb_*` functions in a
//! second header. The headers in `include/` are generated from these
//! declarations by `scripts/gen-capi-headers` (cbindgen); the reference,
//! the differences from LevelDB and the threading rules are in
//! `docs/c-api.md`.
//!
//! Every entry point catches a Rust panic: one with an `errptr` reports it
//! there, one without returns a harmless default. A NULL handle is treated
//! the same way, where LevelDB would crash.

// The C names are LevelDB's, and every function's contract is the one
// documented in LevelDB's c.h and docs/c-api.md rather than in a `# Safety`
// section per function.
#![allow(non_camel_case_types, reason = "the C API's type names are LevelDB's")]
#![allow(
    clippy::missing_safety_doc,
    reason = "the contracts are LevelDB's c.h, restated in docs/c-api.md"
)]

pub mod allocator;
pub mod comparator;
pub mod db;
pub mod extensions;
pub mod filter_policy;
mod handles;
pub mod iterator;
pub mod options;
pub mod snapshot;
pub mod status;
pub mod unused_types;
pub mod write_batch;

/// Everything libshaledb allocates comes from C's `malloc`, so that the
/// buffers `leveldb_get` returns are the engine's own (see [`allocator`]).
/// The rlib is for this crate's tests; a Rust program with a global
/// allocator of its own links the engine (`shale`), not this crate.
#[global_allocator]
static MALLOC: allocator::Malloc = allocator::Malloc;
