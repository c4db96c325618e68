//! The MANIFEST: the durable history of versions. Recovery replays it; every
//! flush and compaction appends one edit, synced before the new version is
//! installed. The format is in `docs/format/manifest.md`.
//!
//! Lock rule: the engine keeps the `VersionSet` in its own mutex, separate
//! from the write path's. Code holding the version-set lock may take the
//! state lock; code holding the state lock never takes the version-set lock.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale_format::comparator::KeyOrder;
use shale_format::internal_key::{InternalKey, SequenceNumber};
use shale_format::log_reader::LogReader;
use shale_format::log_writer::LogWriter;
use shale_format::version_edit::{VersionEdit, NUM_LEVELS};
use shale_format::{Error, Result};

use crate::env::{Env, WritableFile};
use crate::filename;
use crate::version::{Version, VersionBuilder};

/// The versions, the MANIFEST writer and the counters recorded with them.
pub struct VersionSet {
    dir: PathBuf,
    env: Arc<dyn Env>,
    current: Arc<Version>,
    next_file_number: Arc<AtomicU64>,
    manifest_file_number: u64,
    /// WAL files older than this are no longer needed.
    pub log_number: u64,
    /// Kept for databases written by old LevelDB releases; 0 otherwise.
    pub prev_log_number: u64,
    /// Last sequence number recorded in the MANIFEST.
    pub last_sequence: SequenceNumber,
    /// Where the next size compaction of each level starts (internal key;
    /// empty = from the beginning): what the MANIFEST holds, and what seeds
    /// the scheduler's pick-time copy at open (see
    /// `compaction::scheduler::Scheduler::compact_pointers`).
    pub compact_pointers: [Vec<u8>; NUM_LEVELS],
    manifest: Option<LogWriter<Box<dyn WritableFile>>>,
}

impl std::fmt::Debug for VersionSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSet")
            .field("dir", &self.dir)
            .field("manifest_file_number", &self.manifest_file_number)
            .field("log_number", &self.log_number)
            .field("last_sequence", &self.last_sequence)
            .finish()
    }
}

/// Where a MANIFEST write failed.
#[derive(Debug, Clone, Copy)]
enum WriteStage {
    /// Appending or syncing the record (CURRENT untouched).
    Record,
    /// Switching CURRENT to the new MANIFEST (the rename may have happened).
    Current,
}

/// What recovery found.
#[derive(Debug)]
pub struct Recovered {
    /// Name of the MANIFEST read.
    pub manifest: String,
    /// Edits replayed.
    pub edits: usize,
}

impl VersionSet {
    /// An empty set for `dir`, whose keys are ordered by `order`; call
    /// [`VersionSet::recover`] next.
    pub fn new(dir: &Path, env: Arc<dyn Env>, order: KeyOrder) -> VersionSet {
        VersionSet {
            dir: dir.to_path_buf(),
            env,
            current: Arc::new(Version::empty(order)),
            next_file_number: Arc::new(AtomicU64::new(2)),
            manifest_file_number: 0,
            log_number: 0,
            prev_log_number: 0,
            last_sequence: 0,
            compact_pointers: Default::default(),
            manifest: None,
        }
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// The shared file-number counter (flush and compaction threads allocate
    /// from it without the version-set lock).
    pub fn file_numbers(&self) -> Arc<AtomicU64> {
        self.next_file_number.clone()
    }

    /// Allocates a file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::SeqCst)
    }

    /// Makes sure future allocations are above `number`. Saturates at
    /// `u64::MAX`, a number only a damaged directory holds (recovery
    /// refuses a log of that number rather than wrap around).
    pub fn mark_file_number_used(&self, number: u64) {
        self.next_file_number
            .fetch_max(number.saturating_add(1), Ordering::SeqCst);
    }

    /// False after a failed MANIFEST write closed the MANIFEST: the next
    /// [`VersionSet::log_and_apply`] starts a new one.
    pub fn has_manifest_writer(&self) -> bool {
        self.manifest.is_some()
    }

    /// Number of the MANIFEST being written.
    pub fn manifest_file_number(&self) -> u64 {
        self.manifest_file_number
    }

    /// Writes the MANIFEST of a new, empty database whose keys are ordered
    /// by the comparator named `comparator`, and points CURRENT at it.
    pub fn create_new_db(dir: &Path, env: &dyn Env, comparator: &str) -> Result<()> {
        let edit = VersionEdit {
            comparator: Some(comparator.to_string()),
            log_number: Some(0),
            next_file_number: Some(2),
            last_sequence: Some(0),
            ..VersionEdit::default()
        };
        Self::write_new_manifest(dir, env, 1, &edit)
    }

    /// Writes MANIFEST-`number` holding the one record `edit`, syncs it, and
    /// points CURRENT at it (a synced temporary file renamed over CURRENT,
    /// then the directory synced). When writing the MANIFEST fails it is
    /// removed; once CURRENT may have been switched to it, it stays.
    /// REQUIRES: the caller holds the database's LOCK and `edit` is a whole
    /// version (comparator, log number, next file, last sequence, files).
    pub fn write_new_manifest(
        dir: &Path,
        env: &dyn Env,
        number: u64,
        edit: &VersionEdit,
    ) -> Result<()> {
        let manifest = filename::descriptor_file_name(dir, number);
        let written = (|| {
            let mut writer = LogWriter::new(env.new_writable_file(&manifest)?);
            writer.add_record(&edit.encode())?;
            writer
                .get_mut()
                .sync()
                .map_err(|e| Error::io(format!("syncing {}", manifest.display()), e))
        })();
        if let Err(err) = written {
            let _ = env.remove_file(&manifest);
            return Err(err);
        }
        filename::set_current_file(env, dir, number)
    }

    /// Replays the MANIFEST named by CURRENT. Any damage is a corruption
    /// error naming the file: without a trustworthy MANIFEST the set of live
    /// tables is unknown, so nothing is guessed.
    pub fn recover(&mut self) -> Result<Recovered> {
        let current_path = filename::current_file_name(&self.dir);
        let mut contents = Vec::new();
        std::io::Read::read_to_end(
            &mut self.env.new_sequential_file(&current_path)?,
            &mut contents,
        )
        .map_err(|e| Error::io(format!("reading {}", current_path.display()), e))?;
        let name = manifest_name_in_current(&contents)
            .ok_or_else(|| {
                Error::corruption(0, "CURRENT file does not end with a newline").at("CURRENT", 0)
            })?
            .to_string();
        let manifest_path = self.dir.join(&name);
        let file = self
            .env
            .new_sequential_file(&manifest_path)
            .map_err(|e| match e {
                Error::NotFound(_) => {
                    Error::corruption(0, format!("CURRENT points to a missing MANIFEST {name}"))
                        .at("CURRENT", 0)
                }
                other => other,
            })?;

        let mut dropped: Option<Error> = None;
        let reporter = |bytes: u64, reason: Error| {
            dropped.get_or_insert_with(|| {
                Error::corruption(0, format!("{bytes} bytes dropped: {reason}")).at(&name, 0)
            });
        };
        let mut reader = LogReader::new(file, reporter, true, 0);
        let order = self.current.order.clone();
        let mut builder = VersionBuilder::new(Arc::new(Version::empty(order.clone())));
        let (mut log_number, mut prev_log_number, mut next_file, mut last_sequence) =
            (None, None, None, None);
        let mut edits = 0;
        let mut record = Vec::new();
        while reader.read_record_into(&mut record)? {
            let offset = reader.last_record_offset();
            let edit = replay_manifest_record(
                &mut builder,
                &record,
                &name,
                offset,
                &order,
                |comparator| {
                    Error::InvalidArgument(format!(
                        "{name}: the database's keys are ordered by comparator {comparator}, \
                         which does not match the comparator given, {}",
                        order.name()
                    ))
                },
            )?;
            for (level, key) in &edit.compact_pointers {
                self.compact_pointers[*level] = key.encoded().to_vec();
            }
            log_number = edit.log_number.or(log_number);
            prev_log_number = edit.prev_log_number.or(prev_log_number);
            next_file = edit.next_file_number.or(next_file);
            last_sequence = edit.last_sequence.or(last_sequence);
            edits += 1;
        }
        drop(reader);
        if let Some(err) = dropped {
            return Err(err);
        }
        let missing = |what: &str| {
            Error::corruption(0, format!("no {what} entry in descriptor")).at(&name, 0)
        };
        let next_file = next_file.ok_or_else(|| missing("meta-nextfile"))?;
        let log_number = log_number.ok_or_else(|| missing("meta-lognumber"))?;
        let last_sequence = last_sequence.ok_or_else(|| missing("last-sequence-number"))?;
        let prev_log_number = prev_log_number.unwrap_or(0);

        self.current = Arc::new(builder.build().map_err(|e| e.at(&name, 0))?);
        self.manifest_file_number = name
            .strip_prefix("MANIFEST-")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        self.next_file_number.store(next_file, Ordering::SeqCst);
        self.mark_file_number_used(self.manifest_file_number);
        self.log_number = log_number;
        self.prev_log_number = prev_log_number;
        self.last_sequence = last_sequence;
        self.mark_file_number_used(prev_log_number);
        self.mark_file_number_used(log_number);
        Ok(Recovered {
            manifest: name,
            edits,
        })
    }

    /// Records `edit` durably in the MANIFEST and makes the resulting version
    /// current. The first call after open starts a new MANIFEST holding a
    /// snapshot of the current version. On failure nothing is installed and
    /// the next call starts a fresh MANIFEST.
    pub fn log_and_apply(
        &mut self,
        edit: &mut VersionEdit,
        last_sequence: SequenceNumber,
    ) -> Result<Arc<Version>> {
        if edit.log_number.is_none() {
            edit.log_number = Some(self.log_number);
        }
        if edit.prev_log_number.is_none() {
            edit.prev_log_number = Some(self.prev_log_number);
        }
        edit.next_file_number = Some(self.next_file_number.load(Ordering::SeqCst));
        edit.last_sequence = Some(last_sequence);

        let mut builder = VersionBuilder::new(self.current.clone());
        builder.apply(edit)?;
        let version = Arc::new(builder.build()?);

        let mut new_manifest = None;
        if self.manifest.is_none() {
            let number = self.new_file_number();
            edit.next_file_number = Some(self.next_file_number.load(Ordering::SeqCst));
            let path = filename::descriptor_file_name(&self.dir, number);
            let mut writer = LogWriter::new(self.env.new_writable_file(&path)?);
            if let Err(err) = writer.add_record(&self.snapshot_edit().encode()) {
                let _ = self.env.remove_file(&path);
                return Err(err);
            }
            self.manifest = Some(writer);
            new_manifest = Some((number, path));
        }

        let result = self.write_edit(edit, new_manifest.as_ref().map(|(n, _)| *n));
        if let Err((err, stage)) = result {
            // Start a fresh MANIFEST next time. The new one may be deleted
            // only while CURRENT cannot name it: once the rename of CURRENT
            // may have happened, it stays (an unreferenced MANIFEST is
            // removed as obsolete later).
            self.manifest = None;
            if let (Some((_, path)), WriteStage::Record) = (new_manifest, stage) {
                let _ = self.env.remove_file(&path);
            }
            return Err(err);
        }
        if let Some((number, _)) = new_manifest {
            self.manifest_file_number = number;
        }
        for (level, key) in &edit.compact_pointers {
            self.compact_pointers[*level] = key.encoded().to_vec();
        }
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        if let Some(n) = edit.prev_log_number {
            self.prev_log_number = n;
        }
        self.last_sequence = last_sequence;
        self.current = version.clone();
        Ok(version)
    }

    /// Appends and syncs `edit`, makes the directory durable (new tables
    /// the edit names, a new MANIFEST), and points CURRENT at a new MANIFEST.
    /// On failure says which stage failed.
    fn write_edit(
        &mut self,
        edit: &VersionEdit,
        new_manifest: Option<u64>,
    ) -> std::result::Result<(), (Error, WriteStage)> {
        let record = WriteStage::Record;
        let number = new_manifest.unwrap_or(self.manifest_file_number);
        let name = format!("MANIFEST-{number:06}");
        let writer = self
            .manifest
            .as_mut()
            .ok_or_else(|| (Error::InvalidArgument("no MANIFEST open".into()), record))?;
        writer
            .add_record(&edit.encode())
            .map_err(|e| (e.in_file(&name), record))?;
        writer
            .get_mut()
            .sync()
            .map_err(|e| (Error::io(format!("syncing {name}"), e), record))?;
        // Tables named by the edit were created since the last directory
        // sync: make their names durable before anyone relies on the edit.
        self.env.sync_dir(&self.dir).map_err(|e| (e, record))?;
        if let Some(number) = new_manifest {
            crate::kill_point::maybe_kill(crate::kill_point::MANIFEST_WRITTEN_BEFORE_CURRENT);
            filename::set_current_file(&*self.env, &self.dir, number)
                .map_err(|e| (e, WriteStage::Current))?;
        }
        Ok(())
    }

    /// An edit that recreates the current version from nothing: the first
    /// record of a new MANIFEST.
    fn snapshot_edit(&self) -> VersionEdit {
        let mut edit = VersionEdit {
            comparator: Some(self.current.order.name().to_string()),
            ..VersionEdit::default()
        };
        for (level, key) in self.compact_pointers.iter().enumerate() {
            if !key.is_empty() {
                edit.set_compact_pointer(level, InternalKey::from_encoded(key.clone()));
            }
        }
        for (level, files) in self.current.files.iter().enumerate() {
            for file in files {
                edit.add_file(level, file.to_meta());
            }
        }
        edit
    }
}

/// The MANIFEST name that `CURRENT`'s contents hold: a bare file name (not
/// empty, no `/`) followed by a newline; `None` when they hold anything
/// else. Recovery ([`VersionSet::recover`]) and `verify_db` read `CURRENT`
/// by this one rule, each reporting a bad one in its own words.
pub(crate) fn manifest_name_in_current(contents: &[u8]) -> Option<&str> {
    std::str::from_utf8(contents)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .filter(|s| !s.is_empty() && !s.contains('/'))
}

/// Replays one MANIFEST record, read at `offset` of the MANIFEST called
/// `file` in errors: decodes the version edit, checks that the comparator
/// it names (if any) is `order`'s, and applies it to `builder`. A record
/// that does not decode or apply is an error at `file` and `offset`; a
/// comparator of another name is `mismatch(name)`, which recovery and
/// `verify_db` word differently. Returns the edit, for the counters it
/// carries.
pub(crate) fn replay_manifest_record(
    builder: &mut VersionBuilder,
    record: &[u8],
    file: &str,
    offset: u64,
    order: &KeyOrder,
    mismatch: impl FnOnce(&str) -> Error,
) -> Result<VersionEdit> {
    let edit = VersionEdit::decode(record).map_err(|e| e.at(file, offset))?;
    if let Some(comparator) = &edit.comparator {
        if comparator != order.name() {
            return Err(mismatch(comparator));
        }
    }
    builder.apply(&edit).map_err(|e| e.at(file, offset))?;
    Ok(edit)
}
