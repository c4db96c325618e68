//! Opening a database: create or check it, replay the MANIFEST, check that
//! every live table exists, replay the WALs newer than the MANIFEST's log
//! number into tables, start a fresh WAL and MANIFEST, and delete what is
//! obsolete.

use std::sync::Arc;

use shale_format::log_reader::LogReader;
use shale_format::log_writer::LogWriter;
use shale_format::version_edit::VersionEdit;
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use super::inner::DbInner;
use super::insert::insert_into;
use crate::filename::{self, FileType};
use crate::memtable::MemTable;
use crate::version_set::VersionSet;

impl DbInner {
    pub(super) fn recover(&self) -> Result<()> {
        let env = &*self.options.env;
        let current = filename::current_file_name(&self.dir);
        if !env.file_exists(&current) {
            if !self.options.create_if_missing {
                return Err(Error::NotFound(format!(
                    "{}: no CURRENT file: not a database (create_if_missing is false)",
                    self.dir.display()
                )));
            }
            shale_log!(
                self.info_log,
                "Creating a new database in {}",
                self.dir.display()
            );
            VersionSet::create_new_db(&self.dir, env, self.options.key_order().name())?;
        } else if self.options.error_if_exists {
            return Err(Error::InvalidArgument(format!(
                "{}: database exists (error_if_exists is true)",
                self.dir.display()
            )));
        }

        let mut versions = self.lock_versions();
        let recovered = versions.recover()?;
        shale_log!(
            self.info_log,
            "Recovered {} ({} edits): {}, last sequence {}",
            recovered.manifest,
            recovered.edits,
            versions.current().level_summary(),
            versions.last_sequence
        );

        let names = env.children(&self.dir)?;
        self.check_tables_exist(&versions, &names, &recovered.manifest)?;

        let logs = self.logs_to_replay(&versions, &names);
        if logs.last() == Some(&u64::MAX) {
            // Replaying it would need file numbers above it.
            let name = filename::log_file_name(&self.dir, u64::MAX);
            return Err(Error::corruption(
                0,
                "a log numbered u64::MAX leaves no file number for new files",
            )
            .at(&name.display().to_string(), 0));
        }

        let mut last_sequence = versions.last_sequence;
        let mut edit = VersionEdit::default();
        for &number in &logs {
            versions.mark_file_number_used(number);
            self.replay_log(&versions, number, &mut edit, &mut last_sequence)?;
        }

        // A fresh WAL; every older one is now reflected in tables.
        let log_number = versions.new_file_number();
        let log_file = env.new_log_file(
            &filename::log_file_name(&self.dir, log_number),
            self.options.write_buffer_size as u64,
        )?;
        edit.log_number = Some(log_number);
        edit.prev_log_number = Some(0);
        let version = versions.log_and_apply(&mut edit, last_sequence)?;
        {
            let mut state = self.lock_state();
            state.log = Some(LogWriter::new(log_file));
            state.log_number = log_number;
            state.last_sequence = last_sequence;
            self.published_sequence
                .store(last_sequence, std::sync::atomic::Ordering::Release);
            self.install_version(&mut state, version);
        }
        env.sync_dir(&self.dir)?;
        let summary = versions.current().level_summary();
        self.delete_obsolete_files(versions);
        shale_log!(
            self.info_log,
            "Opened: {summary}, WAL #{log_number}, last sequence {last_sequence}"
        );
        Ok(())
    }

    /// Opens for reading only: the MANIFEST replayed, every live table
    /// checked to exist, and the WALs newer than the MANIFEST's log number
    /// replayed into the memtable, in memory. Writes nothing.
    pub(super) fn recover_read_only(&self) -> Result<()> {
        let env = &*self.options.env;
        if !env.file_exists(&filename::current_file_name(&self.dir)) {
            return Err(Error::NotFound(format!(
                "{}: no CURRENT file: not a database",
                self.dir.display()
            )));
        }
        let mut versions = self.lock_versions();
        let recovered = versions.recover()?;
        let names = env.children(&self.dir)?;
        self.check_tables_exist(&versions, &names, &recovered.manifest)?;
        let mut last_sequence = versions.last_sequence;
        let mut edit = VersionEdit::default();
        for number in self.logs_to_replay(&versions, &names) {
            self.replay_log(&versions, number, &mut edit, &mut last_sequence)?;
        }
        let mut state = self.lock_state();
        state.last_sequence = last_sequence;
        self.published_sequence
            .store(last_sequence, std::sync::atomic::Ordering::Release);
        self.install_version(&mut state, versions.current());
        Ok(())
    }

    /// Replays WAL `number` into memtables, writing each full memtable (and
    /// the rest at the end) as an L0 table recorded in `edit`; read-only,
    /// into the one memtable, in memory.
    fn replay_log(
        &self,
        versions: &VersionSet,
        number: u64,
        edit: &mut VersionEdit,
        last_sequence: &mut u64,
    ) -> Result<()> {
        let path = filename::log_file_name(&self.dir, number);
        let name = path.display().to_string();
        shale_log!(self.info_log, "Recovering log #{number}");
        let file = self.options.env.new_sequential_file(&path)?;
        let paranoid = self.options.paranoid_checks;
        let mut first_error: Option<Error> = None;
        let info_log = self.info_log.clone();
        let report_name = name.clone();
        let reporter = |bytes: u64, reason: Error| {
            shale_log!(info_log, "{report_name}: dropping {bytes} bytes; {reason}");
            if paranoid && first_error.is_none() {
                first_error = Some(
                    Error::corruption(0, format!("{bytes} bytes dropped: {reason}"))
                        .at(&report_name, 0),
                );
            }
        };
        let mut reader = LogReader::new(file, reporter, true, 0);
        let in_memory = self.read_only.then(|| self.lock_state().mem.clone());
        let mut mem = match &in_memory {
            Some(mem) => mem.clone(),
            None => Arc::new(MemTable::for_buffer(
                self.order.clone(),
                self.options.write_buffer_size,
            )),
        };
        let mut record = Vec::new();
        let mut skipped = Vec::new();
        while reader.read_record_into(&mut record)? {
            let offset = reader.last_record_offset();
            let applied = WriteBatch::from_data(record.clone()).and_then(|batch| {
                insert_into(&mem, &batch)?;
                Ok(batch.sequence() + u64::from(batch.count()).saturating_sub(1))
            });
            match applied {
                Ok(last) => *last_sequence = (*last_sequence).max(last),
                Err(err) => {
                    let err = err.at(&name, offset);
                    if paranoid {
                        return Err(err);
                    }
                    skipped.push(err);
                }
            }
            if in_memory.is_none()
                && mem.approximate_memory_usage() > self.options.write_buffer_size
            {
                self.flush_recovered(versions, &mem, edit)?;
                mem = Arc::new(MemTable::for_buffer(
                    self.order.clone(),
                    self.options.write_buffer_size,
                ));
            }
        }
        drop(reader);
        if let Some(err) = first_error {
            return Err(err);
        }
        for err in skipped {
            shale_log!(self.info_log, "Ignoring a damaged write batch: {err}");
        }
        if in_memory.is_none() && !mem.is_empty() {
            self.flush_recovered(versions, &mem, edit)?;
        }
        Ok(())
    }

    fn flush_recovered(
        &self,
        versions: &VersionSet,
        mem: &Arc<MemTable>,
        edit: &mut VersionEdit,
    ) -> Result<()> {
        let number = versions.new_file_number();
        self.lock_state().pending_outputs.insert(number);
        let meta = self.write_level0_table(mem, number)?;
        if let Some(meta) = meta {
            shale_log!(
                self.info_log,
                "Level-0 table #{number}: {} bytes (recovery)",
                meta.file_size
            );
            edit.add_file(0, meta);
        }
        Ok(())
    }

    /// Fails when a table the current version lists is not in `names`.
    fn check_tables_exist(
        &self,
        versions: &VersionSet,
        names: &[String],
        manifest: &str,
    ) -> Result<()> {
        let missing = self.missing_tables(&versions.current(), names);
        match missing.first() {
            Some(first) => Err(Error::corruption(
                0,
                format!(
                    "{} table files named in the MANIFEST are missing, e.g. {first:06}.ldb",
                    missing.len()
                ),
            )
            .at(manifest, 0)),
            None => Ok(()),
        }
    }

    /// The WALs in `names` that hold writes newer than the MANIFEST, oldest
    /// first.
    fn logs_to_replay(&self, versions: &VersionSet, names: &[String]) -> Vec<u64> {
        let mut logs: Vec<u64> = names
            .iter()
            .filter_map(|n| filename::parse_file_name(n))
            .filter(|&(number, kind)| {
                kind == FileType::Log
                    && (number >= versions.log_number || number == versions.prev_log_number)
            })
            .map(|(number, _)| number)
            .collect();
        logs.sort_unstable();
        logs
    }

    /// Names of the table files in `dir` that the current version lists but
    /// that are missing (recovery refuses to open with any).
    fn missing_tables(&self, version: &crate::version::Version, names: &[String]) -> Vec<u64> {
        let present: std::collections::HashSet<u64> = names
            .iter()
            .filter_map(|n| filename::parse_file_name(n))
            .filter(|(_, kind)| *kind == FileType::Table)
            .map(|(n, _)| n)
            .collect();
        version
            .live_files()
            .filter(|n| !present.contains(n))
            .collect()
    }
}
