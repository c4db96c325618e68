//! The database as the compaction runner sees it ([`JobHost`]): the
//! current version and the snapshot floor a job is described from, its
//! file I/O (`job_io.rs`), the install of its result, and the background
//! error a failed job sets. Nothing else of the database is reachable from
//! `crate::compaction`.
//!
//! Installing a finished compaction: its version edit (inputs deleted at
//! every input level, outputs added at the output level, the compact
//! pointer) is logged to the MANIFEST and applied, and files nothing refers
//! to any more are deleted after the version-set lock is released. Only a
//! completed (and for remote work, verified) job gets here: the version
//! changes with nothing else.

use std::sync::Arc;

use shale_compact::job::CompactionOutput;
use shale_format::internal_key::{InternalKey, SequenceNumber};
use shale_format::version_edit::{FileMetaData, VersionEdit};
use shale_format::{Error, Result};

use super::inner::DbInner;
use super::job_io::EngineJobIo;
use crate::compaction::host::{JobHost, OutputIo};
use crate::compaction::picker::CompactionPlan;
use crate::version::Version;

impl JobHost for DbInner {
    fn current_version(&self) -> Option<Arc<Version>> {
        let state = self.lock_state();
        state.bg_error.is_none().then(|| state.current.clone())
    }

    fn version_and_snapshot_floor(&self) -> (Arc<Version>, SequenceNumber) {
        let state = self.lock_state();
        (state.current.clone(), self.smallest_snapshot())
    }

    fn job_io(&self) -> Box<dyn OutputIo + '_> {
        Box::new(EngineJobIo::new(self))
    }

    fn install(
        &self,
        plan: &CompactionPlan,
        ran: Option<(&CompactionOutput, &dyn OutputIo)>,
    ) -> Result<String> {
        let Some((output, io)) = ran else {
            return self.apply_compaction_edit(trivial_move_edit(plan), &[]);
        };
        crate::kill_point::maybe_kill(crate::kill_point::COMPACTION_OUTPUT_WRITTEN_BEFORE_INSTALL);
        let outputs: Vec<u64> = output.outputs.iter().map(|t| t.number).collect();
        let installed = self.apply_compaction_edit(compaction_edit(plan, output), &outputs);
        if installed.is_ok() {
            // Installed, the outputs are the version's to keep.
            io.release(false);
        }
        // Not installed, they stay pending (`apply_compaction_edit`).
        installed
    }

    fn job_ended(&self, failure: Option<&Error>) {
        let mut state = self.lock_state();
        match failure {
            None => state.resume.reset_backoff(),
            Some(err) => self.record_background_error(&mut state, err),
        }
        self.signal_done(&mut state);
    }

    fn background_error(&self) -> Option<Error> {
        self.lock_state().bg_error.clone()
    }

    fn flush(&self) -> Result<()> {
        self.flush_memtable()
    }

    fn wait_for_flushes(&self) -> Result<bool> {
        let mut state = self.lock_state();
        if let Some(err) = &state.bg_error {
            return Err(err.clone());
        }
        if state.imm.is_none() && !state.flushing {
            return Ok(true);
        }
        let seen = state.done_epoch;
        while state.done_epoch == seen && state.bg_error.is_none() && !self.shutting_down() {
            state = self.wait(&self.done_cv, state);
        }
        Ok(false)
    }
}

/// The plan's files moved a level down without being rewritten.
fn trivial_move_edit(plan: &CompactionPlan) -> VersionEdit {
    let mut edit = VersionEdit::default();
    for file in &plan.inputs[0] {
        edit.delete_file(plan.level, file.number);
        edit.add_file(plan.level + 1, file.to_meta());
    }
    edit.set_compact_pointer(plan.level, plan.compact_pointer.clone());
    edit
}

/// The plan's inputs deleted at every input level and `output`'s tables
/// added at the output level.
fn compaction_edit(plan: &CompactionPlan, output: &CompactionOutput) -> VersionEdit {
    let mut edit = VersionEdit::default();
    for (offset, files) in plan.inputs.iter().enumerate() {
        for file in files {
            edit.delete_file(plan.level + offset, file.number);
        }
    }
    for table in &output.outputs {
        edit.add_file(
            plan.output_level,
            FileMetaData {
                number: table.number,
                file_size: table.file_size,
                smallest: InternalKey::from_encoded(table.smallest.clone()),
                largest: InternalKey::from_encoded(table.largest.clone()),
            },
        );
    }
    edit.set_compact_pointer(plan.level, plan.compact_pointer.clone());
    edit
}

impl DbInner {
    /// Logs and applies a compaction's edit and deletes the files it made
    /// obsolete (outside the version-set lock). Returns the new level
    /// summary.
    ///
    /// When the edit cannot be logged, its MANIFEST record may still be on
    /// disk and name `outputs`: they stay pending while the database is in
    /// error, and a resume (once a MANIFEST written whole since is current)
    /// or the next open deletes them. They are recorded as such before the
    /// version-set lock is released, so that a resume, which takes that
    /// lock, cannot pass between the failure and the record and leave them
    /// pending for good.
    fn apply_compaction_edit(&self, mut edit: VersionEdit, outputs: &[u64]) -> Result<String> {
        let mut versions = self.lock_versions();
        let last_sequence = self.visible_sequence();
        let version = match versions.log_and_apply(&mut edit, last_sequence) {
            Ok(version) => version,
            Err(err) => {
                let mut state = self.lock_state();
                for &number in outputs {
                    state.pending_outputs.insert(number);
                    state.resume.unrecorded_tables.push(number);
                }
                return Err(err);
            }
        };
        let summary = version.level_summary();
        self.install_version(&mut self.lock_state(), version);
        self.delete_obsolete_files_later(versions);
        Ok(summary)
    }
}
