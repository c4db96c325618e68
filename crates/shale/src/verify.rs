//! Offline verification of a database directory: every byte the database
//! depends on is read back and checked, without opening the database.
//!
//! [`verify_db`] reads `CURRENT`, replays the MANIFEST it names into the set
//! of live tables, reads every block of every live table with its checksum
//! checked (data blocks, index, metaindex and the meta blocks such as the
//! Bloom filter), checks that table entries are internal keys in order and
//! within the bounds the MANIFEST records, and reads every write-ahead log
//! with checksums on.
//!
//! It takes no `LOCK` and writes nothing, so it can check a database that is
//! open in another process or stored read-only. Damage is reported as the
//! first [`Error::Corruption`] found, naming the file and the offset. A log
//! record cut short at the end of a file is a write that never finished, not
//! damage (the log reader reads it as the end of the log), as in recovery.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use shale_format::block::Block;
use shale_format::comparator::{BytewiseComparator, KeyOrder};
use shale_format::format::{read_block, BlockHandle, Footer, RandomAccess, FOOTER_LEN};
use shale_format::internal_key::{InternalKey, ParsedInternalKey};
use shale_format::iterator::KvIterator;
use shale_format::log_reader::{LogReader, Reporter};
use shale_format::table::{ReadTableOptions, Table};
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use crate::env::Env;
use crate::filename::{self, FileType};
use crate::options::Options;
use crate::version::{FileMeta, Version, VersionBuilder};
use crate::version_set::{manifest_name_in_current, replay_manifest_record};

/// What [`verify_db`] read. Every count is of things found intact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Name of the MANIFEST that `CURRENT` names.
    pub manifest: String,
    /// Version edits replayed from it.
    pub edits: u64,
    /// Live tables checked.
    pub tables: u64,
    /// Live tables that disappeared while they were being checked because
    /// the database, open elsewhere, compacted them away.
    pub tables_gone: u64,
    /// Blocks read from the tables: data, index, metaindex and meta blocks.
    pub blocks: u64,
    /// Entries in the data blocks.
    pub entries: u64,
    /// Write-ahead logs read.
    pub logs: u64,
    /// Records (write batches) in the logs.
    pub records: u64,
    /// Puts and deletes in those write batches.
    pub log_entries: u64,
    /// Bytes read and checked: MANIFEST, tables and logs.
    pub bytes: u64,
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ok: {} ({} edits), {} tables, {} blocks, {} entries, {} logs, {} records ({} entries), {} bytes",
            self.manifest,
            self.edits,
            self.tables,
            self.blocks,
            self.entries,
            self.logs,
            self.records,
            self.log_entries,
            self.bytes
        )?;
        if self.tables_gone > 0 {
            write!(
                f,
                "; {} tables compacted away while verifying",
                self.tables_gone
            )?;
        }
        Ok(())
    }
}

/// Checks the database in `path` without opening it (see the module
/// documentation). Only `options.env` and `options.comparator` (the order
/// the keys must be in) are used. Returns what was read, or the first
/// damage found as an [`Error::Corruption`] naming the file and offset;
/// a directory without `CURRENT` gives [`Error::NotFound`].
pub fn verify_db(path: impl AsRef<Path>, options: &Options) -> Result<VerifyReport> {
    let dir = path.as_ref();
    let env = &*options.env;
    let order = options.key_order();
    let mut report = VerifyReport::default();

    let manifest = read_manifest(env, dir, &order)?;
    report.manifest = manifest.name.clone();
    report.edits = manifest.edits;
    report.bytes += manifest.bytes;

    let mut missing = Vec::new();
    for (level, files) in manifest.version.files.iter().enumerate() {
        for meta in files {
            match verify_table(env, dir, meta, &order, &mut report) {
                Ok(TableCheck::Checked) => report.tables += 1,
                Ok(TableCheck::Missing) => missing.push((level, meta.number)),
                Err(err) => return Err(err),
            }
        }
    }
    if !missing.is_empty() {
        // A database open elsewhere may have compacted these tables away
        // since the MANIFEST was read: only those still live are missing.
        let again = read_manifest(env, dir, &order)?;
        for (level, number) in missing {
            if again.version.files[level]
                .iter()
                .any(|f| f.number == number)
            {
                return Err(corruption_at(
                    &again.name,
                    0,
                    format!(
                        "table {number:06}.ldb (level {level}) named in the MANIFEST is missing"
                    ),
                ));
            }
            report.tables_gone += 1;
        }
    }

    // By the names found: LevelDB pads numbers to six digits, but a log
    // named otherwise is still one.
    let mut logs: Vec<(u64, String)> = env
        .children(dir)?
        .into_iter()
        .filter_map(|name| match filename::parse_file_name(&name) {
            Some((number, FileType::Log)) => Some((number, name)),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    for (_, name) in logs {
        if verify_log(env, &dir.join(name), &mut report)? {
            report.logs += 1;
        }
    }
    Ok(report)
}

/// A corruption in `file` at `offset`.
fn corruption_at(file: &str, offset: u64, reason: impl Into<String>) -> Error {
    Error::corruption(offset, reason).at(file, 0)
}

/// Keeps the first drop a log reader reports, as a corruption naming the
/// file and the offset where the dropped bytes start.
struct FirstDrop {
    file: String,
    error: Option<Error>,
}

impl Reporter for FirstDrop {
    fn corruption(&mut self, bytes: u64, reason: Error) {
        if self.error.is_some() {
            return;
        }
        let (offset, why) = match &reason {
            Error::Corruption { location, reason } => (location.offset, reason.clone()),
            other => (0, other.to_string()),
        };
        self.error = Some(corruption_at(
            &self.file,
            offset,
            format!("{bytes} bytes dropped: {why}"),
        ));
    }
}

/// Counts the bytes read through it.
struct CountingReader<R> {
    inner: R,
    count: u64,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        Ok(n)
    }
}

/// Reads every record of the log at `path` with checksums on, handing each
/// to `on_record` with its offset. Any dropped bytes are a corruption; a
/// record cut short by the end of the file ends the log. Returns the bytes
/// read, or `None` when the file does not exist.
fn read_log(
    env: &dyn Env,
    path: &Path,
    name: &str,
    mut on_record: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<Option<u64>> {
    let file = match env.new_sequential_file(path) {
        Ok(file) => file,
        Err(Error::NotFound(_)) => return Ok(None),
        Err(err) => return Err(err),
    };
    let source = CountingReader {
        inner: file,
        count: 0,
    };
    let reporter = FirstDrop {
        file: name.to_string(),
        error: None,
    };
    let mut reader = LogReader::new(source, reporter, true, 0);
    let mut record = Vec::new();
    loop {
        let more = reader.read_record_into(&mut record)?;
        // Damage reported while looking for this record comes first: it is
        // earlier in the file.
        if let Some(err) = &reader.reporter().error {
            return Err(err.clone());
        }
        if !more {
            break;
        }
        on_record(reader.last_record_offset(), &record)?;
    }
    let (source, _) = reader.into_parts();
    Ok(Some(source.count))
}

/// The live tables according to the MANIFEST named by `CURRENT`.
struct ManifestState {
    name: String,
    edits: u64,
    bytes: u64,
    version: Version,
}

/// Reads the MANIFEST that `CURRENT` names. A database open elsewhere may
/// switch to a new MANIFEST and delete the old one between the two reads:
/// then `CURRENT` is read again (a few times).
fn read_manifest(env: &dyn Env, dir: &Path, order: &KeyOrder) -> Result<ManifestState> {
    let mut attempts = 0;
    loop {
        let name = read_current(env, dir)?;
        if let Some(state) = read_manifest_named(env, dir, &name, order)? {
            return Ok(state);
        }
        attempts += 1;
        if attempts == 3 || read_current(env, dir)? == name {
            return Err(corruption_at(
                &filename::current_file_name(dir).display().to_string(),
                0,
                format!("CURRENT names a missing MANIFEST {name}"),
            ));
        }
    }
}

/// The MANIFEST name `CURRENT` holds.
fn read_current(env: &dyn Env, dir: &Path) -> Result<String> {
    let current_path = filename::current_file_name(dir);
    let contents = match crate::env::read_file(env, &current_path) {
        Ok(contents) => contents,
        Err(Error::NotFound(_)) => {
            return Err(Error::NotFound(format!(
                "{}: no CURRENT file: not a database",
                dir.display()
            )))
        }
        Err(err) => return Err(err),
    };
    let current_name = current_path.display().to_string();
    let name = manifest_name_in_current(&contents)
        .ok_or_else(|| {
            corruption_at(
                &current_name,
                0,
                "CURRENT does not hold a file name ending with a newline",
            )
        })?
        .to_string();
    if !matches!(
        filename::parse_file_name(&name),
        Some((_, FileType::Descriptor))
    ) {
        return Err(corruption_at(
            &current_name,
            0,
            format!("CURRENT names {name:?}, not a MANIFEST"),
        ));
    }
    Ok(name)
}

/// Replays MANIFEST `name`; `None` when it does not exist.
fn read_manifest_named(
    env: &dyn Env,
    dir: &Path,
    name: &str,
    order: &KeyOrder,
) -> Result<Option<ManifestState>> {
    let manifest_path = dir.join(name);
    let manifest_name = manifest_path.display().to_string();

    let mut builder = VersionBuilder::new(Arc::new(Version::empty(order.clone())));
    let mut edits = 0;
    let (mut log_number, mut next_file, mut last_sequence) = (false, false, false);
    let bytes = read_log(env, &manifest_path, &manifest_name, |offset, record| {
        let edit = replay_manifest_record(
            &mut builder,
            record,
            &manifest_name,
            offset,
            order,
            |comparator| {
                Error::NotSupported(format!(
                    "{manifest_name}: the keys are ordered by comparator {comparator}; \
                     verifying with {} (give the database's comparator)",
                    order.name()
                ))
            },
        )?;
        log_number |= edit.log_number.is_some();
        next_file |= edit.next_file_number.is_some();
        last_sequence |= edit.last_sequence.is_some();
        edits += 1;
        Ok(())
    })?;
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    for (present, what) in [
        (next_file, "meta-nextfile"),
        (log_number, "meta-lognumber"),
        (last_sequence, "last-sequence-number"),
    ] {
        if !present {
            return Err(corruption_at(
                &manifest_name,
                0,
                format!("no {what} entry in descriptor"),
            ));
        }
    }
    let version = builder.build().map_err(|e| e.at(&manifest_name, 0))?;
    Ok(Some(ManifestState {
        name: name.to_string(),
        edits,
        bytes,
        version,
    }))
}

/// Whether a live table could be checked.
enum TableCheck {
    Checked,
    /// Neither `.ldb` nor `.sst` exists.
    Missing,
}

/// An open table file: its bytes, its path, its name for errors, and its
/// size.
pub(crate) struct TableFile {
    pub(crate) source: Arc<dyn RandomAccess>,
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) size: u64,
}

/// Opens table `number` as `.ldb`, else as `.sst`; `None` when neither exists.
pub(crate) fn open_table_file(env: &dyn Env, dir: &Path, number: u64) -> Result<Option<TableFile>> {
    for path in [
        filename::table_file_name(dir, number),
        filename::sst_table_file_name(dir, number),
    ] {
        match env.new_random_access_file(&path) {
            Ok(source) => {
                let size = env.file_size(&path)?;
                return Ok(Some(TableFile {
                    source,
                    name: path.display().to_string(),
                    path,
                    size,
                }));
            }
            Err(Error::NotFound(_)) => continue,
            Err(err) => return Err(err),
        }
    }
    Ok(None)
}

/// Reads and checks every block of the live table `meta`.
fn verify_table(
    env: &dyn Env,
    dir: &Path,
    meta: &FileMeta,
    order: &KeyOrder,
    report: &mut VerifyReport,
) -> Result<TableCheck> {
    let Some(file) = open_table_file(env, dir, meta.number)? else {
        return Ok(TableCheck::Missing);
    };
    let table = TableVerifier::open(file, meta, order)?;
    table.check_meta_blocks(report)?;
    let span = table.check_index_and_data_blocks(report)?;
    table.check_manifest_bounds(span, meta)?;
    report.bytes += table.file_size;
    Ok(TableCheck::Checked)
}

/// One live table being verified: its bytes, its name for errors, its
/// footer, and the order of its keys.
struct TableVerifier<'a> {
    source: Arc<dyn RandomAccess>,
    name: String,
    file_size: u64,
    footer: Footer,
    order: &'a KeyOrder,
}

impl<'a> TableVerifier<'a> {
    /// Checks the file's size against the MANIFEST's, opens the table the
    /// way the engine does (so that whatever the engine would reject at
    /// open is rejected here too), and reads its footer.
    fn open(file: TableFile, meta: &FileMeta, order: &'a KeyOrder) -> Result<TableVerifier<'a>> {
        let TableFile {
            source,
            name,
            size: file_size,
            ..
        } = file;
        if file_size != meta.file_size {
            return Err(corruption_at(
                &name,
                0,
                format!(
                    "file is {file_size} bytes, the MANIFEST says {}",
                    meta.file_size
                ),
            ));
        }
        let options = ReadTableOptions {
            comparator: order.internal_comparator(),
            ..ReadTableOptions::internal_scan()
        };
        Table::open(source.clone(), file_size, &name, options)?;
        // Table::open checked that the file holds a footer.
        let footer_offset = file_size - FOOTER_LEN as u64;
        let mut footer_bytes = [0u8; FOOTER_LEN];
        source
            .read_exact_at(&mut footer_bytes, footer_offset)
            .map_err(|e| Error::io(format!("reading the footer of {name}"), e))?;
        let footer = Footer::decode(&footer_bytes).map_err(|e| e.at(&name, footer_offset))?;
        Ok(TableVerifier {
            source,
            name,
            file_size,
            footer,
            order,
        })
    }

    /// Reads the block at `handle`, checking its CRC.
    fn read(&self, handle: BlockHandle) -> Result<Block> {
        let bytes = read_block(&*self.source, &self.name, self.file_size, handle, true)?;
        Block::new(bytes).map_err(|e| e.at(&self.name, handle.offset))
    }

    /// The metaindex block, and every meta block it names (the filter).
    fn check_meta_blocks(&self, report: &mut VerifyReport) -> Result<()> {
        let metaindex_offset = self.footer.metaindex_handle.offset;
        let metaindex = self.read(self.footer.metaindex_handle)?;
        report.blocks += 1;
        let mut meta_iter = metaindex.iter(Arc::new(BytewiseComparator));
        meta_iter.seek_to_first();
        while meta_iter.valid() {
            let handle = BlockHandle::decode(meta_iter.value())
                .map_err(|e| e.at(&self.name, metaindex_offset))?;
            read_block(&*self.source, &self.name, self.file_size, handle, true)?;
            report.blocks += 1;
            meta_iter.next();
        }
        meta_iter
            .status()
            .map_err(|e| e.at(&self.name, metaindex_offset))
    }

    /// The index block, then each data block it points to, in order: every
    /// key an internal key, keys ascending across blocks, and each index
    /// key separating its block from the next (last key of the block <=
    /// index key < first key of the next block). The first and last key.
    fn check_index_and_data_blocks(&self, report: &mut VerifyReport) -> Result<KeySpan> {
        let index_handle = self.footer.index_handle;
        let index = self.read(index_handle)?;
        report.blocks += 1;
        // One comparator for the index and every data block.
        let comparator = self.order.internal_comparator();
        let mut index_iter = index.iter(comparator.clone());
        index_iter.seek_to_first();
        let mut walk = KeyWalk::default();
        while index_iter.valid() {
            let handle = BlockHandle::decode(index_iter.value())
                .map_err(|e| e.at(&self.name, index_handle.offset))?;
            let separator = index_iter.key();
            let data = self.read(handle)?;
            report.blocks += 1;
            let bad = |reason: String| {
                corruption_at(&self.name, handle.offset, format!("data block: {reason}"))
            };
            let mut iter = data.iter(comparator.clone());
            iter.seek_to_first();
            let mut first_in_block = true;
            while iter.valid() {
                walk.step(iter.key(), first_in_block, self.order)
                    .map_err(bad)?;
                first_in_block = false;
                report.entries += 1;
                iter.next();
            }
            iter.status().map_err(|e| e.at(&self.name, handle.offset))?;
            walk.end_block(separator, self.order).map_err(bad)?;
            index_iter.next();
        }
        index_iter
            .status()
            .map_err(|e| e.at(&self.name, index_handle.offset))?;
        match walk.first_key {
            Some(first) => Ok(KeySpan {
                first,
                last: walk.previous_key,
            }),
            None => Err(corruption_at(&self.name, 0, "live table holds no entries")),
        }
    }

    /// The bounds the MANIFEST records must cover the entries.
    fn check_manifest_bounds(&self, span: KeySpan, meta: &FileMeta) -> Result<()> {
        let order = self.order;
        if order
            .compare_internal(&span.first, meta.smallest.encoded())
            .is_lt()
            || order
                .compare_internal(&span.last, meta.largest.encoded())
                .is_gt()
        {
            return Err(corruption_at(
                &self.name,
                0,
                format!(
                    "entries span {:?} .. {:?}, outside the MANIFEST's bounds {:?} .. {:?}",
                    InternalKey::from_encoded(span.first),
                    InternalKey::from_encoded(span.last),
                    meta.smallest,
                    meta.largest
                ),
            ));
        }
        Ok(())
    }
}

/// The first and last key of a table.
struct KeySpan {
    first: Vec<u8>,
    last: Vec<u8>,
}

/// The walk over a table's keys, block after block: the key before the
/// current one (one buffer, reused), the first key, and the index key of
/// the block before.
#[derive(Default)]
struct KeyWalk {
    previous_key: Vec<u8>,
    first_key: Option<Vec<u8>>,
    previous_separator: Option<Vec<u8>>,
}

impl KeyWalk {
    /// Checks `key`: an internal key, above the previous block's index key
    /// when it is its block's first, above the key before it. The error is
    /// the reason, for the caller to place.
    fn step(
        &mut self,
        key: &[u8],
        first_in_block: bool,
        order: &KeyOrder,
    ) -> std::result::Result<(), String> {
        ParsedInternalKey::parse(key).map_err(|e| {
            format!(
                "entry {:?} is not an internal key: {e}",
                key.escape_ascii().to_string()
            )
        })?;
        if first_in_block {
            if let Some(separator) = &self.previous_separator {
                if order.compare_internal(separator, key).is_ge() {
                    return Err("first key is not above the previous block's index key".into());
                }
            }
        }
        if self.first_key.is_none() {
            self.first_key = Some(key.to_vec());
        } else if order.compare_internal(&self.previous_key, key).is_ge() {
            return Err(format!(
                "keys out of order at {:?}",
                key.escape_ascii().to_string()
            ));
        }
        self.previous_key.clear();
        self.previous_key.extend_from_slice(key);
        Ok(())
    }

    /// Checks that the block just walked ends at or below its index key
    /// `separator`, which the next block's first key must be above.
    fn end_block(&mut self, separator: &[u8], order: &KeyOrder) -> std::result::Result<(), String> {
        if self.first_key.is_some()
            && order
                .compare_internal(&self.previous_key, separator)
                .is_gt()
        {
            return Err("last key is above its index key".into());
        }
        self.previous_separator = Some(separator.to_vec());
        Ok(())
    }
}

/// Reads the write-ahead log at `path`, checking every record and the write
/// batch in it. False when the file vanished (the database, open elsewhere,
/// deleted an obsolete log).
fn verify_log(env: &dyn Env, path: &Path, report: &mut VerifyReport) -> Result<bool> {
    let name = path.display().to_string();
    let mut records = 0;
    let mut entries = 0;
    let bytes = read_log(env, path, &name, |offset, record| {
        let batch = WriteBatch::from_data(record.to_vec()).map_err(|e| e.at(&name, offset))?;
        for op in batch.iter() {
            op.map_err(|e| e.at(&name, offset))?;
            entries += 1;
        }
        records += 1;
        Ok(())
    })?;
    let Some(bytes) = bytes else {
        return Ok(false);
    };
    report.records += records;
    report.log_entries += entries;
    report.bytes += bytes;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{read_file, write_file, MemEnv};
    use crate::{ReadOptions, WriteOptions, DB};
    use std::path::PathBuf;

    fn options(env: &MemEnv) -> Options {
        Options {
            env: Arc::new(env.clone()),
            create_if_missing: true,
            write_buffer_size: 64 << 10,
            block_size: 1024,
            ..Options::default()
        }
    }

    /// A database with tables on two levels and unflushed writes in its WAL.
    fn build_db(env: &MemEnv) -> PathBuf {
        let dir = PathBuf::from("/verify-db");
        let db = DB::open(&dir, options(env)).unwrap();
        let w = WriteOptions::default();
        for i in 0..3000u32 {
            db.put(&w, format!("key{i:06}").as_bytes(), &[b'v'; 100])
                .unwrap();
        }
        db.compact_range(None, None).unwrap();
        for i in 0..500u32 {
            db.put(&w, format!("key{:06}", i * 7).as_bytes(), b"newer")
                .unwrap();
        }
        db.flush().unwrap();
        for i in 0..50u32 {
            db.delete(&w, format!("key{i:06}").as_bytes()).unwrap();
        }
        dir
    }

    fn files_of(env: &MemEnv, dir: &Path, kind: FileType) -> Vec<PathBuf> {
        let mut names: Vec<String> = env
            .children(dir)
            .unwrap()
            .into_iter()
            .filter(|n| filename::parse_file_name(n).is_some_and(|(_, k)| k == kind))
            .collect();
        names.sort();
        names.into_iter().map(|n| dir.join(n)).collect()
    }

    fn flip_byte(env: &MemEnv, path: &Path, offset: usize) {
        let mut bytes = read_file(env, path).unwrap();
        bytes[offset] ^= 0x40;
        write_file(env, path, &bytes, false).unwrap();
    }

    fn corruption_location(err: &Error) -> (String, u64) {
        match err {
            Error::Corruption { location, .. } => (location.file.clone(), location.offset),
            other => panic!("expected a corruption, got {other:?}"),
        }
    }

    #[test]
    fn good_database_is_read_entirely() {
        let env = MemEnv::new();
        let dir = build_db(&env);
        let report = verify_db(&dir, &options(&env)).unwrap();
        let tables = files_of(&env, &dir, FileType::Table);
        assert_eq!(report.tables, tables.len() as u64);
        assert!(report.tables >= 2, "{report}");
        assert_eq!(report.tables_gone, 0);
        // At least a data block, the index, the metaindex and the filter.
        assert!(report.blocks >= 4 * report.tables, "{report}");
        assert_eq!(report.entries, 3000 + 500);
        assert!(report.logs >= 1, "{report}");
        assert_eq!(report.records, 50);
        assert_eq!(report.log_entries, 50);
        assert!(report.manifest.starts_with("MANIFEST-"));
        assert!(report.edits >= 2);
        assert!(report.to_string().starts_with("ok: MANIFEST-"));
    }

    #[test]
    fn verifies_an_open_database_and_writes_nothing() {
        let env = MemEnv::new();
        let dir = PathBuf::from("/open-db");
        let db = DB::open(&dir, options(&env)).unwrap();
        for i in 0..1000u32 {
            db.put(&WriteOptions::default(), &i.to_be_bytes(), b"value")
                .unwrap();
        }
        db.flush().unwrap();
        db.put(&WriteOptions::default(), b"in the log", b"x")
            .unwrap();
        // The files and their contents, but the info log, which the
        // database's own threads may append to meanwhile.
        let snapshot = |env: &MemEnv| -> Vec<(String, Vec<u8>)> {
            let mut names = env.children(&dir).unwrap();
            names.sort();
            names
                .into_iter()
                .filter(|n| {
                    filename::parse_file_name(n).is_none_or(|(_, k)| k != FileType::InfoLog)
                })
                .filter_map(|n| {
                    // The database may delete an obsolete log meanwhile.
                    let contents = read_file(env, &dir.join(&n)).ok()?;
                    Some((n, contents))
                })
                .collect()
        };
        let before = snapshot(&env);
        // The database holds its LOCK: verification must not need it.
        let report = verify_db(&dir, &options(&env)).unwrap();
        assert_eq!(report.entries, 1000);
        // The log of the flushed memtable may not be deleted yet.
        assert!(report.records >= 1, "{report}");
        // Nothing created or changed (the database may have removed files).
        for file in snapshot(&env) {
            assert!(before.contains(&file), "{} was written", file.0);
        }
        assert_eq!(
            db.get(&ReadOptions::new(), b"in the log").unwrap(),
            Some(b"x".to_vec())
        );
    }

    #[test]
    fn flipped_table_byte_names_the_table_and_block() {
        let env = MemEnv::new();
        let dir = build_db(&env);
        let table = files_of(&env, &dir, FileType::Table)[0].clone();
        flip_byte(&env, &table, 10);
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        let (file, offset) = corruption_location(&err);
        assert_eq!(file, table.display().to_string(), "{err}");
        assert_eq!(offset, 0, "the first data block starts at 0: {err}");
        assert!(err.to_string().contains("checksum"), "{err}");
    }

    #[test]
    fn damage_in_the_index_block_is_found() {
        let env = MemEnv::new();
        let dir = build_db(&env);
        let table = files_of(&env, &dir, FileType::Table)[0].clone();
        let bytes = read_file(&env, &table).unwrap();
        let footer = Footer::decode(&bytes[bytes.len() - FOOTER_LEN..]).unwrap();
        // The index is read at open: flip a byte in it.
        flip_byte(&env, &table, footer.index_handle.offset as usize + 1);
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        let (file, offset) = corruption_location(&err);
        assert_eq!(file, table.display().to_string(), "{err}");
        assert_eq!(offset, footer.index_handle.offset, "{err}");
        // The metaindex is only read by verification (the engine ignores a
        // damaged one): flip a byte there instead.
        let env = MemEnv::new();
        let dir = build_db(&env);
        let table = files_of(&env, &dir, FileType::Table)[0].clone();
        flip_byte(&env, &table, footer.metaindex_handle.offset as usize);
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        assert_eq!(
            corruption_location(&err),
            (table.display().to_string(), footer.metaindex_handle.offset),
            "{err}"
        );
    }

    #[test]
    fn table_size_differing_from_the_manifest_is_corruption() {
        let env = MemEnv::new();
        let dir = build_db(&env);
        let table = files_of(&env, &dir, FileType::Table)[0].clone();
        let mut bytes = read_file(&env, &table).unwrap();
        bytes.push(0);
        write_file(&env, &table, &bytes, false).unwrap();
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        assert!(err.to_string().contains("the MANIFEST says"), "{err}");
    }

    #[test]
    fn missing_table_is_corruption_naming_the_manifest() {
        let env = MemEnv::new();
        let dir = build_db(&env);
        let table = files_of(&env, &dir, FileType::Table)[0].clone();
        env.remove_file(&table).unwrap();
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        let (file, _) = corruption_location(&err);
        assert!(file.contains("MANIFEST-"), "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn damaged_log_record_is_corruption_but_a_torn_tail_is_not() {
        let env = MemEnv::new();
        let dir = build_db(&env);
        let log = files_of(&env, &dir, FileType::Log).pop().unwrap();
        let original = read_file(&env, &log).unwrap();
        assert!(original.len() > 100);

        // A byte of the second record's payload.
        let second_record = original.len() / 50 + 10;
        flip_byte(&env, &log, second_record);
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        let (file, offset) = corruption_location(&err);
        assert_eq!(file, log.display().to_string(), "{err}");
        assert!(offset <= second_record as u64, "{err}");
        assert!(err.to_string().contains("checksum mismatch"), "{err}");

        // A write cut off by a crash: the end of the log, not damage.
        write_file(&env, &log, &original[..original.len() - 3], false).unwrap();
        let report = verify_db(&dir, &options(&env)).unwrap();
        assert_eq!(report.records, 49);
    }

    #[test]
    fn damaged_manifest_is_corruption_naming_it() {
        let env = MemEnv::new();
        let dir = build_db(&env);
        let manifest = files_of(&env, &dir, FileType::Descriptor).pop().unwrap();
        flip_byte(&env, &manifest, 9);
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        let (file, offset) = corruption_location(&err);
        assert_eq!(file, manifest.display().to_string(), "{err}");
        assert_eq!(offset, 0, "{err}");
    }

    #[test]
    fn bad_current_and_missing_database() {
        let env = MemEnv::new();
        let err = verify_db("/nothing-here", &options(&env)).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err:?}");

        let dir = build_db(&env);
        let current = filename::current_file_name(&dir);
        write_file(&env, &current, b"MANIFEST-000999\n", false).unwrap();
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        assert!(err.to_string().contains("missing MANIFEST"), "{err}");
        write_file(&env, &current, b"000005.log\n", false).unwrap();
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        write_file(&env, &current, b"MANIFEST-000001", false).unwrap();
        let err = verify_db(&dir, &options(&env)).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
}
