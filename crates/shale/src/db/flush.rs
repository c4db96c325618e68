//! Flushes: the flush thread turns the immutable memtable into an L0 table
//! (or a deeper one nothing overlaps), records it in the MANIFEST and drops
//! the memtable. It has a thread of its own and never waits behind a
//! compaction: writers wait for it. After a no-space error it is also the
//! thread that retries (`resume.rs`).

use std::sync::Arc;
use std::time::Instant;

use shale_format::version_edit::{FileMetaData, VersionEdit, NUM_LEVELS};
use shale_format::Result;

use super::inner::{DbInner, State};
use super::table_writer::TableWriter;
use crate::compaction::picker;
use crate::filename;
use crate::kill_point;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::version::{total_file_size, Version};

/// Starts the flush thread.
pub(super) fn start_flush_thread(inner: &Arc<DbInner>) -> Result<std::thread::JoinHandle<()>> {
    let flusher = inner.clone();
    std::thread::Builder::new()
        .name("shale-flush".into())
        .spawn(move || flusher.flush_loop())
        .map_err(|e| shale_format::Error::io("starting the flush thread", e))
}

impl DbInner {
    /// Switches the memtable (if it holds anything) and waits until it is a
    /// table on disk.
    pub(super) fn flush_memtable(&self) -> Result<()> {
        self.write(&WriteOptions::default(), None)?;
        let mut state = self.lock_state();
        while state.imm.is_some() && state.bg_error.is_none() {
            state = self.wait(&self.done_cv, state);
        }
        match &state.bg_error {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }

    fn flush_loop(self: Arc<Self>) {
        loop {
            let mut state = self.lock_state();
            // Flush the immutable memtable, or, in error, attempt a resume
            // when one is due.
            let resume = loop {
                if self.shutting_down() {
                    return;
                }
                if state.bg_error.is_none() {
                    if state.imm.is_some() {
                        break false;
                    }
                    state = self.wait(&self.work_cv, state);
                    continue;
                }
                match state.resume.wait_before_attempt(Instant::now()) {
                    Some(wait) if wait.is_zero() => break true,
                    Some(wait) => {
                        state = state.wait_timeout(&self.work_cv, wait).0;
                    }
                    None => state = self.wait(&self.work_cv, state),
                }
            };
            state.flushing = true;
            state.flush_started = (!resume).then(Instant::now);
            drop(state);
            if resume {
                self.attempt_resume();
                let mut state = self.lock_state();
                state.flushing = false;
                self.signal_done(&mut state);
                continue;
            }
            let result = self.flush_immutable();
            let mut state = self.lock_state();
            state.flushing = false;
            state.flush_started = None;
            match result {
                Ok(()) => state.resume.reset_backoff(),
                Err(err) => self.record_background_error(&mut state, &err.during("flush")),
            }
            self.signal_done(&mut state);
        }
    }

    /// Writes the immutable memtable to a table, records it (and the WAL
    /// that now holds everything newer) in the MANIFEST, and drops the
    /// memtable.
    pub(super) fn flush_immutable(&self) -> Result<()> {
        let started = Instant::now();
        let (imm, log_number) = {
            let state = self.lock_state();
            match &state.imm {
                Some(imm) => (imm.clone(), state.log_number),
                None => return Ok(()),
            }
        };
        let number = self.new_file_number();
        self.lock_state().pending_outputs.insert(number);
        let mut manifest_attempted = false;
        let result = (|| {
            let meta = self.write_level0_table(&imm, number)?;
            kill_point::maybe_kill(kill_point::FLUSH_TABLE_WRITTEN_BEFORE_INSTALL);
            let mut versions = self.lock_versions();
            let mut edit = VersionEdit::default();
            let mut level = 0;
            if let Some(meta) = &meta {
                let current = versions.current();
                level = pick_level_for_memtable_output(&current, &self.options, meta);
                edit.add_file(level, meta.clone());
            }
            edit.log_number = Some(log_number);
            edit.prev_log_number = Some(0);
            let last_sequence = self.visible_sequence();
            manifest_attempted = true;
            let version = versions.log_and_apply(&mut edit, last_sequence)?;
            let mut state = self.lock_state();
            self.install_version(&mut state, version);
            state.imm = None;
            note_flush_time(
                &mut state,
                started.elapsed(),
                imm.approximate_memory_usage(),
            );
            // Its WAL is obsolete now: the table holds its writes. Closed
            // (its preallocated tail trimmed) without the state lock.
            let retired = state.retired_log.take();
            state.pending_outputs.remove(&number);
            let bytes = meta.as_ref().map_or(0, |m| m.file_size);
            drop(state);
            self.service()
                .record_flush(level, started.elapsed().as_secs_f64(), bytes);
            drop(retired);
            shale_log!(
                self.info_log,
                "Level-0 table #{number}: {bytes} bytes, placed at level {level}, {:.3} s",
                started.elapsed().as_secs_f64()
            );
            self.delete_obsolete_files_later(versions);
            Ok(())
        })();
        if result.is_err() {
            // Once the MANIFEST write was attempted its record may be on disk
            // and name the table: keep the file (the database is in error;
            // a resume or the next open decides whether it is live).
            let mut state = self.lock_state();
            if manifest_attempted {
                state.resume.unrecorded_tables.push(number);
            } else {
                state.pending_outputs.remove(&number);
                drop(state);
                let _ = self
                    .options
                    .env
                    .remove_file(&filename::table_file_name(&self.dir, number));
            }
        }
        result
    }

    /// Builds table `number` from a memtable; `None` when the memtable is
    /// empty (no file is left behind).
    pub(super) fn write_level0_table(
        &self,
        mem: &Arc<MemTable>,
        number: u64,
    ) -> Result<Option<FileMetaData>> {
        if mem.is_empty() {
            return Ok(None);
        }
        let mut writer = TableWriter::create(&self.options, &self.dir, number)?;
        writer.add_all(&mut mem.frozen_iter())?;
        let meta = writer.finish()?;
        if let Some(meta) = &meta {
            // Read it back before it is recorded: a table that cannot be
            // opened must never enter the MANIFEST.
            self.table_cache.table(number, meta.file_size)?;
        }
        Ok(meta)
    }
}

/// Folds a flush of `bytes` of memtable that took `elapsed` into the
/// average time per byte that paces writes while a flush runs
/// (`room.rs`).
fn note_flush_time(state: &mut State, elapsed: std::time::Duration, bytes: usize) {
    if bytes == 0 {
        return;
    }
    let per_byte = elapsed.as_secs_f64() / bytes as f64;
    state.flush_seconds_per_byte = if state.flush_seconds_per_byte == 0.0 {
        per_byte
    } else {
        // Recent flushes weigh most: the disk and the cores' load drift.
        0.5 * state.flush_seconds_per_byte + 0.5 * per_byte
    };
}

/// The level a flushed memtable's table goes to: L0 when it overlaps L0;
/// otherwise pushed down while the next level does not overlap and the
/// grandparent overlap stays small, at most to L2 (LevelDB's rule, which
/// spares compactions of tables nothing overlaps).
pub fn pick_level_for_memtable_output(
    version: &Version,
    options: &crate::options::Options,
    meta: &FileMetaData,
) -> usize {
    const MAX_MEM_COMPACT_LEVEL: usize = 2;
    let smallest = meta.smallest.user_key();
    let largest = meta.largest.user_key();
    let mut level = 0;
    if version.overlaps(0, Some(smallest), Some(largest)) {
        return 0;
    }
    while level < MAX_MEM_COMPACT_LEVEL {
        if version.overlaps(level + 1, Some(smallest), Some(largest)) {
            break;
        }
        if level + 2 < NUM_LEVELS {
            let overlaps = version.overlapping_inputs(level + 2, Some(smallest), Some(largest));
            if total_file_size(&overlaps) > picker::max_grandparent_overlap_bytes(options) {
                break;
            }
        }
        level += 1;
    }
    level
}
