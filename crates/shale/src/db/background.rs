//! Background work: the flush thread (memtable to L0, never queued behind a
//! compaction) and the compaction threads (pick, run on the executor,
//! install). Manual compactions run on the caller's thread through the same
//! code.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use shale_compact::job::{CompactionJob, CompactionOutput, JobFile, JobIo, OutputSink};
use shale_format::format::RandomAccess;
use shale_format::internal_key::InternalKey;
use shale_format::iterator::KvIterator;
use shale_format::table_builder::TableBuilder;
use shale_format::version_edit::{FileMetaData, VersionEdit, NUM_LEVELS};
use shale_format::{Error, Result};

use super::DbInner;
use crate::compaction::picker::{self, CompactionPlan};
use crate::env::WritableFile;
use crate::filename;
use crate::memtable::MemTable;
use crate::version::{total_file_size, Version};

/// Starts the flush thread and `max_background_compactions` compaction
/// threads.
pub(super) fn start(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::new();
    let spawn = |name: String, body: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name)
            .spawn(body)
            .map_err(|e| Error::io("starting a background thread", e))
    };
    let flusher = inner.clone();
    threads.push(spawn(
        "shale-flush".into(),
        Box::new(move || flusher.flush_loop()),
    )?);
    for i in 0..inner.options.max_background_compactions {
        let worker = inner.clone();
        threads.push(spawn(
            format!("shale-compact-{i}"),
            Box::new(move || {
                // Not the flush thread: writers wait for flushes.
                shale_compact::priority::lower_current_thread(worker.options.compaction_nice);
                worker.compaction_loop()
            }),
        )?);
    }
    Ok(threads)
}

/// A manual compaction request for one level.
struct ManualRange<'a> {
    level: usize,
    begin: Option<&'a [u8]>,
    end: Option<&'a [u8]>,
}

/// The engine's side of a compaction job: input files through the env,
/// output files numbered and recorded as pending so cleanup leaves them.
struct EngineJobIo<'a> {
    inner: &'a DbInner,
    created: std::sync::Mutex<Vec<u64>>,
}

/// A compaction output file; its I/O errors name the file.
struct TableSink {
    file: Box<dyn WritableFile>,
    path: std::path::PathBuf,
}

impl TableSink {
    fn name_error(&self, err: std::io::Error) -> std::io::Error {
        std::io::Error::new(err.kind(), format!("{}: {err}", self.path.display()))
    }
}

impl std::io::Write for TableSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf).map_err(|e| self.name_error(e))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().map_err(|e| self.name_error(e))
    }
}

impl OutputSink for TableSink {
    fn finish(mut self: Box<Self>) -> Result<()> {
        let path = self.path.display().to_string();
        self.file
            .sync()
            .map_err(|e| Error::io(format!("syncing {path}"), e))
    }
}

impl JobIo for EngineJobIo<'_> {
    fn open_input(&self, file: &JobFile) -> Result<Arc<dyn RandomAccess>> {
        let env = &self.inner.options.env;
        let open = |path: &std::path::Path| {
            if self.inner.options.direct_io_for_compaction {
                env.new_direct_random_access_file(path)
            } else {
                env.new_random_access_file(path)
            }
        };
        match open(&filename::table_file_name(&self.inner.dir, file.number)) {
            Err(Error::NotFound(_)) => {
                open(&filename::sst_table_file_name(&self.inner.dir, file.number))
            }
            other => other,
        }
    }

    fn create_output(&self) -> Result<(u64, Box<dyn OutputSink>)> {
        let number = self.inner.new_file_number();
        self.inner.lock_state().pending_outputs.insert(number);
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(number);
        let path = filename::table_file_name(&self.inner.dir, number);
        let env = &self.inner.options.env;
        let file = if self.inner.options.direct_io_for_compaction {
            env.new_direct_writable_file(&path)?
        } else {
            env.new_writable_file(&path)?
        };
        Ok((number, Box::new(TableSink { file, path })))
    }

    fn discard_output(&self, number: u64) -> Result<()> {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&n| n != number);
        self.inner.lock_state().pending_outputs.remove(&number);
        self.inner
            .options
            .env
            .remove_file(&filename::table_file_name(&self.inner.dir, number))
    }
}

impl EngineJobIo<'_> {
    fn created(&self) -> Vec<u64> {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Forgets the outputs as pending; on failure also deletes them.
    fn release(&self, delete: bool) {
        let created = self.created();
        let mut state = self.inner.lock_state();
        for number in &created {
            state.pending_outputs.remove(number);
        }
        drop(state);
        if delete {
            for number in created {
                let _ = self
                    .inner
                    .options
                    .env
                    .remove_file(&filename::table_file_name(&self.inner.dir, number));
            }
        }
    }
}

impl DbInner {
    fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    fn flush_loop(self: Arc<Self>) {
        loop {
            let mut state = self.lock_state();
            while !self.shutting_down() && (state.imm.is_none() || state.bg_error.is_some()) {
                state = self.wait(&self.work_cv, state);
            }
            if self.shutting_down() {
                return;
            }
            state.flushing = true;
            drop(state);
            let result = self.flush_immutable();
            let mut state = self.lock_state();
            state.flushing = false;
            if let Err(err) = result {
                self.record_background_error(&mut state, &err);
            }
            self.done_cv.notify_all();
        }
    }

    /// Writes the immutable memtable to a table, records it (and the WAL
    /// that now holds everything newer) in the MANIFEST, and drops the
    /// memtable.
    fn flush_immutable(&self) -> Result<()> {
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
            let last_sequence = self.lock_state().last_sequence;
            manifest_attempted = true;
            let version = versions.log_and_apply(&mut edit, last_sequence)?;
            let mut state = self.lock_state();
            self.install_version(&mut state, version);
            state.imm = None;
            // Its WAL is obsolete now: the table holds its writes.
            state.retired_log = None;
            state.pending_outputs.remove(&number);
            let bytes = meta.as_ref().map_or(0, |m| m.file_size);
            state.level_stats[level].add(started.elapsed().as_secs_f64(), 0, bytes);
            drop(state);
            shale_log!(
                self.info_log,
                "Level-0 table #{number}: {bytes} bytes, placed at level {level}, {:.3} s",
                started.elapsed().as_secs_f64()
            );
            self.remove_obsolete_files(&versions);
            Ok(())
        })();
        if result.is_err() {
            // Once the MANIFEST write was attempted its record may be on disk
            // and name the table: keep the file (the database is in error
            // and the next open decides whether it is live).
            let mut state = self.lock_state();
            if !manifest_attempted {
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
        let path = filename::table_file_name(&self.dir, number);
        let mut iter = mem.iter();
        iter.seek_to_first();
        if !iter.valid() {
            return Ok(None);
        }
        let file = self.options.env.new_writable_file(&path)?;
        let sink = TableSink {
            file,
            path: path.clone(),
        };
        let mut builder = TableBuilder::new(self.options.table_settings().table_options(), sink);
        let smallest = iter.key().to_vec();
        let mut largest = Vec::new();
        while iter.valid() {
            builder.add(iter.key(), iter.value())?;
            largest.clear();
            largest.extend_from_slice(iter.key());
            iter.next();
        }
        iter.status()?;
        let (sink, file_size) = builder.finish()?;
        Box::new(sink).finish()?;
        // Read it back before it is recorded: a table that cannot be opened
        // must never enter the MANIFEST.
        self.table_cache.table(number, file_size)?;
        Ok(Some(FileMetaData {
            number,
            file_size,
            smallest: InternalKey::from_encoded(smallest),
            largest: InternalKey::from_encoded(largest),
        }))
    }

    fn compaction_loop(self: Arc<Self>) {
        let mut seen_epoch = 0;
        loop {
            {
                let mut state = self.lock_state();
                while !self.shutting_down()
                    && (state.work_epoch == seen_epoch || state.bg_error.is_some())
                {
                    state = self.wait(&self.work_cv, state);
                }
                if self.shutting_down() {
                    return;
                }
                seen_epoch = state.work_epoch;
            }
            match self.pick_and_register(None) {
                Some(plan) => {
                    let result = self.run_plan(&plan);
                    let mut state = self.lock_state();
                    state.running.retain(|r| r.files != plan.input_numbers());
                    if let Err(err) = result {
                        self.record_background_error(&mut state, &err);
                    }
                    // More work may be ready now.
                    seen_epoch = 0;
                    self.done_cv.notify_all();
                }
                None => self.done_cv.notify_all(),
            }
        }
    }

    /// Picks a size compaction (or the manual plan) that does not conflict
    /// with running ones and registers it as running.
    fn pick_and_register(&self, manual: Option<ManualRange<'_>>) -> Option<CompactionPlan> {
        let mut versions = self.lock_versions();
        let current = versions.current();
        let mut state = self.lock_state();
        let plan = match manual {
            Some(ManualRange { level, begin, end }) => {
                let plan = picker::plan_for_range(&current, &self.options, level, begin, end)?;
                if state.running.iter().any(|r| plan.conflicts_with(r)) {
                    return None;
                }
                plan
            }
            None => picker::pick_compaction(
                &current,
                &self.options,
                &versions.compact_pointers,
                &state.running,
            )?,
        };
        state.running.push(plan.running());
        drop(state);
        versions.compact_pointers[plan.level] = plan.compact_pointer.encoded().to_vec();
        Some(plan)
    }

    /// Runs a registered plan: a trivial move or a job on the executor, then
    /// installs the result.
    fn run_plan(&self, plan: &CompactionPlan) -> Result<()> {
        let started = Instant::now();
        let level = plan.level;
        if plan.is_trivial_move(&self.options) {
            let file = &plan.inputs[0][0];
            let mut edit = VersionEdit::default();
            edit.delete_file(level, file.number);
            edit.add_file(level + 1, file.to_meta());
            edit.set_compact_pointer(level, plan.compact_pointer.clone());
            self.apply_compaction_edit(edit, level, 0, 0, started)?;
            shale_log!(
                self.info_log,
                "Moved #{} to level-{} {} bytes",
                file.number,
                level + 1,
                file.file_size
            );
            return Ok(());
        }

        // The version is needed only to describe the job; holding it longer
        // would keep the inputs alive past the install that obsoletes them.
        let job = {
            let state = self.lock_state();
            let (version, smallest_snapshot) =
                (state.current.clone(), self.smallest_snapshot(&state));
            drop(state);
            plan.to_job(
                self.next_job_id.fetch_add(1, Ordering::SeqCst),
                &version,
                smallest_snapshot,
                &self.options,
            )
        };
        shale_log!(
            self.info_log,
            "Compaction #{} ({}): {}@{} + {}@{} files, {} bytes, executor {}",
            job.id,
            plan.reason,
            plan.inputs[0].len(),
            level,
            plan.inputs[1].len(),
            level + 1,
            job.input_bytes(),
            self.executor.name()
        );
        let io = EngineJobIo {
            inner: self,
            created: std::sync::Mutex::new(Vec::new()),
        };
        let output = match self.executor.run(&job, &io) {
            Ok(output) => output,
            Err(err) => {
                io.release(true);
                shale_log!(self.info_log, "Compaction #{} failed: {err}", job.id);
                return Err(err);
            }
        };
        let result = self.install_compaction(plan, &job, &output, started);
        // A failed install may still have written the MANIFEST record that
        // names the outputs, so they are kept while the database is in
        // error; the next open deletes them if they are not live.
        io.release(false);
        if result.is_err() {
            let mut state = self.lock_state();
            for table in &output.outputs {
                state.pending_outputs.insert(table.number);
            }
        }
        result
    }

    fn install_compaction(
        &self,
        plan: &CompactionPlan,
        job: &CompactionJob,
        output: &CompactionOutput,
        started: Instant,
    ) -> Result<()> {
        let mut edit = VersionEdit::default();
        for (which, files) in plan.inputs.iter().enumerate() {
            for file in files {
                edit.delete_file(plan.level + which, file.number);
            }
        }
        for table in &output.outputs {
            edit.add_file(
                job.output_level,
                FileMetaData {
                    number: table.number,
                    file_size: table.file_size,
                    smallest: InternalKey::from_encoded(table.smallest.clone()),
                    largest: InternalKey::from_encoded(table.largest.clone()),
                },
            );
        }
        edit.set_compact_pointer(plan.level, plan.compact_pointer.clone());
        let read = total_file_size(&plan.inputs[0]) + total_file_size(&plan.inputs[1]);
        let written = output.outputs.iter().map(|t| t.file_size).sum();
        let summary = self.apply_compaction_edit(edit, job.output_level, read, written, started)?;
        {
            let mut state = self.lock_state();
            let entry = state
                .executor_stats
                .entry(output.executor.clone())
                .or_default();
            entry.0 += 1;
            entry.1.accumulate(&output.stats);
            if let Some(reason) = &output.fallback {
                state.fallbacks.0 += 1;
                state.fallbacks.1 = Some(reason.clone());
            }
        }
        if let Some(reason) = &output.fallback {
            shale_log!(
                self.info_log,
                "Compaction #{}: fallback to the {} executor: {reason}",
                job.id,
                output.executor
            );
        }
        shale_log!(
            self.info_log,
            "Compaction #{} done by {}: read {read} bytes, wrote {written} bytes in {} files, {:.3} s; {summary}",
            job.id,
            output.executor,
            output.outputs.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Logs and applies a compaction's edit, counts it in the level stats,
    /// and cleans up obsolete files. Returns the new level summary.
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
        self.remove_obsolete_files(&versions);
        Ok(summary)
    }

    pub(super) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush_memtable()?;
        let deepest = {
            let version = self.lock_state().current.clone();
            (1..NUM_LEVELS)
                .filter(|&l| version.overlaps(l, begin, end))
                .max()
                .unwrap_or(1)
        };
        for level in 0..deepest {
            loop {
                if let Some(err) = self.lock_state().bg_error.clone() {
                    return Err(err);
                }
                if !self.lock_state().current.overlaps(level, begin, end) {
                    break;
                }
                match self.pick_and_register(Some(ManualRange { level, begin, end })) {
                    Some(plan) => {
                        let result = self.run_plan(&plan);
                        let mut state = self.lock_state();
                        state.running.retain(|r| r.files != plan.input_numbers());
                        self.done_cv.notify_all();
                        if let Err(err) = result {
                            self.record_background_error(&mut state, &err);
                            return Err(err);
                        }
                    }
                    None => {
                        // A background compaction holds some of the files:
                        // wait for it.
                        let state = self.lock_state();
                        if !state.running.is_empty() {
                            drop(self.wait(&self.done_cv, state));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn wait_for_compactions(&self) -> Result<()> {
        loop {
            let needed = {
                let versions = self.lock_versions();
                let current = versions.current();
                picker::pick_compaction(&current, &self.options, &versions.compact_pointers, &[])
                    .is_some()
            };
            let mut state = self.lock_state();
            if let Some(err) = &state.bg_error {
                return Err(err.clone());
            }
            if !needed && state.running.is_empty() && state.imm.is_none() && !state.flushing {
                return Ok(());
            }
            state.work_epoch += 1;
            self.work_cv.notify_all();
            let (guard, _) = self
                .done_cv
                .wait_timeout(state, std::time::Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner());
            drop(guard);
        }
    }

    /// Names of the table files in `dir` that the current version lists but
    /// that are missing (recovery refuses to open with any).
    pub(super) fn missing_tables(&self, version: &Version, names: &[String]) -> Vec<u64> {
        let present: HashSet<u64> = names
            .iter()
            .filter_map(|n| filename::parse_file_name(n))
            .filter(|(_, kind)| *kind == filename::FileType::Table)
            .map(|(n, _)| n)
            .collect();
        version
            .live_files()
            .filter(|n| !present.contains(n))
            .collect()
    }
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
