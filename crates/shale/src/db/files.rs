//! File lifetime: new file numbers, the files no version, pending output
//! or needed log refers to any more and their deletion, and destroying a
//! whole database.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Weak;

use shale_format::{Error, Result};

use super::inner::DbInner;
use super::job_io;
use crate::filename;
use crate::lock_order;
use crate::options::Options;
use crate::version_set::VersionSet;

/// Deletes the database in `path`: every file the database owns, then the
/// directory if it is empty. Fails with [`Error::Busy`] when it is open.
pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
    let dir = path.as_ref();
    let env = &options.env;
    let names = match env.children(dir) {
        Ok(names) => names,
        Err(Error::NotFound(_)) => return Ok(()),
        Err(err) => return Err(err),
    };
    let lock_path = filename::lock_file_name(dir);
    let lock = env.lock_file(&lock_path)?;
    // What remote workers staged is the database's too.
    job_io::remove_staging(&**env, dir);
    for name in names {
        if let Some((_, kind)) = filename::parse_file_name(&name) {
            if kind != filename::FileType::DbLock {
                env.remove_file(&dir.join(&name))?;
            }
        }
    }
    drop(lock);
    let _ = env.remove_file(&lock_path);
    let _ = env.remove_dir(dir);
    Ok(())
}

impl DbInner {
    pub(super) fn new_file_number(&self) -> u64 {
        self.file_numbers.fetch_add(1, Ordering::SeqCst)
    }

    /// The files no version, pending output or needed log refers to, with
    /// their kinds and numbers. REQUIRES: the version-set lock is held by
    /// the caller, so the set of live files cannot change underneath. A
    /// number once obsolete never becomes live again (numbers are not
    /// reused), so the caller deletes them after releasing the lock
    /// ([`DbInner::delete_obsolete_files`]).
    pub(super) fn obsolete_files(
        &self,
        versions: &VersionSet,
    ) -> Vec<(String, u64, filename::FileType)> {
        // List first, then read the live set: a file being created already
        // has its number in `pending_outputs` (or is the WAL whose number is
        // already in `log_number`) before it appears in a listing.
        let Ok(names) = self.options.env.children(&self.dir) else {
            return Vec::new();
        };
        let (live, log_number) = {
            let mut state = self.lock_state();
            if state.bg_error.is_some() {
                // After an error the state of the directory is uncertain:
                // keep everything.
                return Vec::new();
            }
            state.live_versions.retain(|v| v.strong_count() > 0);
            let mut live: HashSet<u64> = state.pending_outputs.clone();
            live.extend(state.current.live_files());
            for version in state.live_versions.iter().filter_map(Weak::upgrade) {
                live.extend(version.live_files());
            }
            (live, state.log_number)
        };
        let mut obsolete = Vec::new();
        for name in names {
            let Some((number, kind)) = filename::parse_file_name(&name) else {
                continue;
            };
            use filename::FileType;
            let keep = match kind {
                FileType::Log => {
                    number >= versions.log_number.min(log_number)
                        || number == versions.prev_log_number
                }
                FileType::Descriptor => number >= versions.manifest_file_number(),
                FileType::Table | FileType::Temp => live.contains(&number),
                FileType::Current | FileType::DbLock | FileType::InfoLog => true,
            };
            if !keep {
                obsolete.push((name, number, kind));
            }
        }
        obsolete
    }

    /// Lists the files no live version names while `versions` is held,
    /// releases it, and deletes them before it returns: a resume, a close,
    /// an open, and the waits that promise the files are gone. They go
    /// through the deleter, so that a file it already holds is deleted
    /// once, and a large batch (a full compaction's inputs) is shared by
    /// its threads.
    pub(super) fn delete_obsolete_files(&self, versions: lock_order::Guard<'_, VersionSet>) {
        self.delete_obsolete_files_later(versions);
        self.deleter.wait();
    }

    /// [`DbInner::delete_obsolete_files`] for the end of a flush or a
    /// compaction's install: the tables leave the table cache now, and
    /// the deleter unlinks the files while the thread goes on
    /// (`deleter.rs`).
    pub(super) fn delete_obsolete_files_later(&self, versions: lock_order::Guard<'_, VersionSet>) {
        let obsolete = self.obsolete_files(&versions);
        drop(versions);
        for (_, number, kind) in &obsolete {
            if *kind == filename::FileType::Table {
                self.table_cache.evict(*number);
            }
        }
        self.deleter.submit(obsolete);
    }
}
