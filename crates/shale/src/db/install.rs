//! Installing a finished compaction: its version edit (inputs deleted at
//! every input level, outputs added at the output level, the compact
//! pointer) is logged to the MANIFEST and applied, the level statistics
//! count it, and files nothing refers to any more are deleted after the
//! version-set lock is released. Only a completed (and for remote work,
//! verified) job gets here: the version changes with nothing else.

use std::time::Instant;

use shale_compact::job::CompactionOutput;
use shale_format::internal_key::InternalKey;
use shale_format::version_edit::{FileMetaData, VersionEdit};
use shale_format::Result;

use super::DbInner;
use crate::compaction::picker::CompactionPlan;

impl DbInner {
    /// Moves the plan's one file down a level without rewriting it.
    pub(super) fn install_trivial_move(
        &self,
        plan: &CompactionPlan,
        started: Instant,
    ) -> Result<()> {
        let file = &plan.inputs[0][0];
        let mut edit = VersionEdit::default();
        edit.delete_file(plan.level, file.number);
        edit.add_file(plan.level + 1, file.to_meta());
        edit.set_compact_pointer(plan.level, plan.compact_pointer.clone());
        self.apply_compaction_edit(edit, plan.level + 1, 0, 0, started)?;
        shale_log!(
            self.info_log,
            "Moved #{} to level-{} {} bytes",
            file.number,
            plan.level + 1,
            file.file_size
        );
        Ok(())
    }

    /// Installs the outputs of `plan`'s job. Returns the new level summary.
    pub(super) fn install_compaction(
        &self,
        plan: &CompactionPlan,
        output: &CompactionOutput,
        started: Instant,
    ) -> Result<String> {
        crate::kill_point::maybe_kill(crate::kill_point::COMPACTION_OUTPUT_WRITTEN_BEFORE_INSTALL);
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
        let read = plan.input_bytes();
        let written = output.outputs.iter().map(|t| t.file_size).sum();
        self.apply_compaction_edit(edit, plan.output_level, read, written, started)
    }

    /// Logs and applies a compaction's edit, counts it in the level stats,
    /// and deletes the files it made obsolete (outside the version-set
    /// lock). Returns the new level summary.
    fn apply_compaction_edit(
        &self,
        mut edit: VersionEdit,
        output_level: usize,
        read: u64,
        written: u64,
        started: Instant,
    ) -> Result<String> {
        let mut versions = self.lock_versions();
        let last_sequence = self.lock_state().last_sequence;
        let version = versions.log_and_apply(&mut edit, last_sequence)?;
        let summary = version.level_summary();
        {
            let mut state = self.lock_state();
            self.install_version(&mut state, version);
            state.level_stats[output_level].add(started.elapsed().as_secs_f64(), read, written);
        }
        self.delete_obsolete_files(versions);
        Ok(summary)
    }
}
