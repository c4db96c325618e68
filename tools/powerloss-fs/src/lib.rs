//! A FUSE file system that loses, on a simulated power loss, everything
//! not made durable: it passes every operation through to a backing
//! directory, except file data, which it keeps in memory from a write until
//! that file's next `fsync` or `fdatasync` (the idea of LazyFS, which
//! Jepsen puts under databases). The power-loss test
//! (`scripts/power-loss-test`, `docs/reliability.md`) runs ShaleDB's
//! stress writer on it, crashes it, and checks the backing directory.
//!
//! The model, in full:
//!
//! * **File data and file size are durable only at a sync of that file.**
//!   `write`, `ftruncate` and a growing `fallocate` are kept per file
//!   ([`pending::PendingFile`]); `fsync` and `fdatasync` replay them onto
//!   the backing file, in order. Reads see them (an application sees its
//!   own writes). Pages written through a shared mapping reach the file
//!   system when the kernel writes them back (`msync`, `fsync`, or memory
//!   pressure) and are then kept like any write.
//! * **Metadata operations are durable at once**, as on a journaling file
//!   system that commits them in order: create, mkdir, rename, unlink and
//!   rmdir reach the backing directory when they return, and a directory
//!   fsync does nothing. A file created and never synced is there after a
//!   crash, empty (or as long as at its last sync).
//! * **A crash** ([`PowerLossFs::crash`]) either drops every pending
//!   operation ([`CrashMode::DropAll`]) or keeps a random part of them
//!   ([`CrashMode::Torn`]: each written page and each size change kept or
//!   dropped at random, the kept ones applied in order, as a writeback cut
//!   short by the power loss can leave). After it every request fails with
//!   `EIO` and nothing more reaches the backing directory.
//!
//! Not modelled: lost directory entries (a rename or create undone by a
//! power loss before a directory fsync), metadata reordered against data
//! beyond the above, times and extended attributes (passed through or
//! not supported), symbolic and hard links (not supported).

pub mod fs;
pub mod pending;
pub mod rng;

pub use fs::{CrashMode, CrashReport, PowerLossFs};
