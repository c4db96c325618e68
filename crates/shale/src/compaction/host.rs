//! What the compaction runner needs of the engine, and nothing more
//! (Pebble's `DBForCompaction`): the current version and the snapshot
//! floor to describe a job, the job's file I/O, the install of its
//! result, and the background error a failed job sets. The database
//! (`db/`) implements [`JobHost`]; the runner (`compaction::runner`) and
//! the service (`compaction::service`) never see its locks, its memtables
//! or its write path, and a test can run jobs against a host of its own.

use std::sync::Arc;

use shale_compact::job::{CompactionOutput, JobIo};
use shale_format::internal_key::SequenceNumber;
use shale_format::{Error, Result};

use crate::compaction::picker::CompactionPlan;
use crate::version::Version;

/// One job's file I/O on the engine's side: inputs opened through the
/// engine's env, outputs numbered and kept safe from obsolete-file cleanup
/// until [`OutputIo::release`].
pub(crate) trait OutputIo: JobIo {
    /// Forgets the job's outputs as pending; `discard`: also deletes them
    /// (an attempt that did not complete).
    fn release(&self, discard: bool);
}

/// The engine as the compaction runner sees it.
pub(crate) trait JobHost: Send + Sync {
    /// The current version, or `None` while a background error stands (no
    /// job starts then).
    fn current_version(&self) -> Option<Arc<Version>>;

    /// The current version and the smallest sequence a live snapshot (or
    /// the present) can read, taken together.
    fn version_and_snapshot_floor(&self) -> (Arc<Version>, SequenceNumber);

    /// A fresh I/O context for one attempt at a job.
    fn job_io(&self) -> Box<dyn OutputIo + '_>;

    /// Installs a finished job: the output its I/O wrote replaces the
    /// plan's inputs (and the I/O is released), or with `None` the plan's
    /// one file moves down a level unchanged. Logs the edit to the
    /// MANIFEST and applies it. Returns the new level summary. When it
    /// fails, the outputs stay pending until the database recovers (the
    /// MANIFEST may already name them).
    fn install(
        &self,
        plan: &CompactionPlan,
        ran: Option<(&CompactionOutput, &dyn OutputIo)>,
    ) -> Result<String>;

    /// A job ended: with `failure`, that becomes the background error;
    /// without, a full disk's retry back-off starts over. Either way
    /// whoever waits for background work looks again.
    fn job_ended(&self, failure: Option<&Error>);

    /// The background error, if one stands.
    fn background_error(&self) -> Option<Error>;

    /// Flushes the memtable and waits for it (a manual compaction starts
    /// with what was written before it).
    fn flush(&self) -> Result<()>;

    /// Waits until no memtable flush is due or running. `Ok(true)` when
    /// none was; `Ok(false)` after waiting for one to end (it may have made
    /// compaction work: look again). An error when a background error
    /// stands or the database closes.
    fn wait_for_flushes(&self) -> Result<bool>;
}
