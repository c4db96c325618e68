//! What the `remote` executor needs of the engine beside [`JobIo`]: the
//! database directory its worker reads the inputs in and stages the
//! outputs below, and the adoption of the staged tables it checked. No
//! other executor calls these, so they are a trait of their own, reached
//! through [`JobIo::remote`]. Built without the `remote` feature too: the
//! engine implements it whatever executors it was built with.

use std::path::{Path, PathBuf};

use shale_format::Result;

#[cfg(doc)]
use crate::job::JobIo;

/// The `remote` executor's side of a job's I/O (see the module comment).
pub trait RemoteJobIo: Send + Sync {
    /// The database directory on the file system, where the worker that
    /// shares the storage reads the inputs and stages its outputs (below
    /// it); `None`: it has no path such a worker can reach.
    fn database_dir(&self) -> Option<PathBuf>;

    /// Adopts finished tables written outside the job's
    /// [`JobIo::create_output`] (a worker's staged outputs, each checked
    /// through the descriptor it holds): gives each a file number, renames
    /// it into the database, checks that the file now installed is the one
    /// verified ([`VerifiedTable::check_installed`]), and syncs the
    /// directory. The numbers, in the order of `staged`. Adopted outputs
    /// are the job's own, as created ones: removed if the job fails.
    fn adopt_outputs(&self, staged: &[VerifiedTable]) -> Result<Vec<u64>>;
}

/// A staged table the engine checked, with the descriptor it read it
/// through and what `fstat` said of it then.
#[derive(Debug)]
pub struct VerifiedTable {
    /// Where it lies now (`DB/staging/<session>/NNNNNN.ldb`).
    pub path: PathBuf,
    /// The descriptor its bytes were read and checked through.
    pub file: std::fs::File,
    /// Its device, inode, size and modification time when checked.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// See `dev`.
    pub size: u64,
    /// See `dev`.
    pub mtime_ns: i128,
}

impl VerifiedTable {
    /// Checks that `installed` (where adoption renamed it) is the file that
    /// was verified: the same inode, with the same size and modification
    /// time as when it was checked (a worker that rewrote it since, or
    /// swapped a directory of the path for a symlink, fails here).
    pub fn check_installed(&self, installed: &Path) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let changed = |why: String| {
            shale_format::Error::executor_failed(
                crate::ExecutorKind::Remote.name(),
                format!("refused by check adoption: {} {why}", installed.display()),
            )
        };
        let now = std::fs::symlink_metadata(installed)
            .map_err(|e| changed(format!("cannot be read back: {e}")))?;
        if now.dev() != self.dev || now.ino() != self.ino {
            return Err(changed("is not the file that was verified".to_string()));
        }
        let held = self
            .file
            .metadata()
            .map_err(|e| changed(format!("fstat: {e}")))?;
        let mtime = i128::from(held.mtime()) * 1_000_000_000 + i128::from(held.mtime_nsec());
        if held.len() != self.size || mtime != self.mtime_ns {
            return Err(changed("changed after it was verified".to_string()));
        }
        Ok(())
    }
}
