//! Keys-only compaction (ProckStore section 3.5, key-value separation),
//! flow controlled: each side holds at most a window of keys per input
//! run, whatever the job's size.
//!
//! - The data side (the worker, which holds the tables) reads every input
//!   run forward with a [`RunCursor`](crate::steps::RunCursor) and sends
//!   its keys only as far as the key side granted credit; as the merged
//!   order comes back, a second cursor per run reaches the same entries
//!   again and packs them with their values (`data_side.rs` of the
//!   `shale-worker` crate). The order takes each run's entries in the run's
//!   own order, so a cursor per run is all the data side needs: no value is
//!   held between the two passes.
//! - The key side (the engine) merges the keys it holds ([`OrderMerge`]),
//!   decides what garbage collection drops and where the grandparent cut
//!   closes a file, returns one [`code`] per key, and tops a run's credit
//!   up as its keys run low ([`KeySide`]).
//!
//! Composed, they write exactly the tables `streaming` writes: the same
//! entries reach the same [`TablePacker`](crate::steps::TablePacker) with the
//! same cuts.
//!
//! The bound: the key side holds at most `window` keys of a run, received
//! or granted and not yet received; it sends the codes it decided before
//! any further credit, so the data side never has more than `window` keys
//! of a run sent and not yet ordered (its two cursors are at most that far
//! apart). Both are counted ([`Held`], and the worker's `DataSideReport`)
//! so tests can check the bound.

mod key_side;
mod merge;

pub use key_side::KeySide;
pub use merge::{Held, OrderMerge};

/// Name the keys-only path reports as its executor.
pub const KEYS_ONLY: &str = "keys-only";

/// The engine's window when none is set (see [`super::DEFAULT_KEYS_WINDOW`]).
pub use super::DEFAULT_KEYS_WINDOW;

/// The order code of one key: its run, whether it is kept, and whether the
/// open output file is closed before it.
pub fn code(run: usize, keep: bool, cut_before: bool) -> u32 {
    ((run as u32) << 2) | (u32::from(keep) << 1) | u32::from(cut_before)
}

/// The parts of an order code: (run, keep, cut_before).
pub fn decode(code: u32) -> (usize, bool, bool) {
    ((code >> 2) as usize, code & 2 != 0, code & 1 != 0)
}

/// The most input runs a code can name.
pub const MAX_RUNS: usize = 1 << 30;
