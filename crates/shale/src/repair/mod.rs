//! Rebuilding a database whose MANIFEST or CURRENT is lost or damaged, or
//! whose tables are damaged, from the files in its directory: LevelDB 1.23's
//! `RepairDB` (`db/repair.cc`). The result opens with [`DB::open`](crate::db::DB::open) and holds
//! every entry that could still be read.
//!
//! [`repair`] takes the database's `LOCK`, then:
//!
//! 1. lists the directory: write-ahead logs, tables (`.ldb` and `.sst`) and
//!    MANIFESTs; the next file number is above every number found;
//! 2. turns each log into level-0 tables: its records are replayed into a
//!    memtable (a new table whenever it reaches `write_buffer_size`);
//!    damaged stretches are skipped and counted, as recovery does without
//!    `paranoid_checks`;
//! 3. scans every table with checksums verified (`table_scan.rs`), taking
//!    its entry count, smallest and largest key and largest sequence
//!    number. A table of which nothing can be read is moved to `lost/`; a
//!    table with unreadable blocks has its readable entries copied into a
//!    new table, which takes the number of the original, moved to `lost/`
//!    (LevelDB's `RepairTable`: the number keeps its place in the order in
//!    which level-0 tables are searched);
//! 4. writes a new MANIFEST listing every table at level 0, as LevelDB
//!    does, with the next file number, the largest sequence number found,
//!    log number 0 and the comparator's name, and points CURRENT at it
//!    (temporary file, rename, directory sync);
//! 5. moves the old MANIFESTs and the converted logs to `lost/`.
//!
//! Nothing is deleted: whatever is not in the new MANIFEST is in `lost/`.
//!
//! As with LevelDB's repair, a lookup may find an older entry of a key than
//! a scan does, until a compaction has merged the overlapping level-0
//! tables (`search_order.rs` says why); the report counts the tables for
//! which that can happen, and `DB::compact_range(None, None)` puts it right.
//! A failure to write (a full disk, say) stops the repair with the error;
//! running it again once the cause is fixed is safe, since the logs and
//! old MANIFESTs are only moved once the new MANIFEST is in place.
//!
//! Where ShaleDB differs from LevelDB 1.23: log records are read with their
//! checksums verified (LevelDB's repair reads them without, so a damaged
//! record can bring garbage into a table), table blocks are always read
//! with checksums verified (LevelDB: only under `paranoid_checks`), the new
//! MANIFEST takes a fresh file number rather than reusing 1, and files
//! moved to `lost/` never replace one an earlier repair put there.

mod report;
mod search_order;
mod table_scan;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use shale_format::internal_key::{InternalKey, SequenceNumber};
use shale_format::log_reader::LogReader;
use shale_format::version_edit::{FileMetaData, VersionEdit};
use shale_format::write_batch::WriteBatch;
use shale_format::{Error, Result};

use crate::db::{insert_into, TableWriter};
use crate::env::Env;
use crate::filename::{self, FileType};
use crate::info_log::InfoLog;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::verify::open_table_file;
use crate::version::{Version, VersionBuilder};
use crate::version_set::VersionSet;

pub use report::{ConvertedLog, LostFile, LostReason, RecoveredTable, RepairReport, TableOrigin};

/// The folder, inside the database directory, that files are moved to.
pub const LOST_DIR: &str = "lost";

/// Repairs the database in `path` (see the module documentation) and
/// returns what was recovered and what was lost. Uses `options.env`, and
/// the table settings and `write_buffer_size` for the tables it writes.
///
/// Errors: [`Error::InvalidArgument`] for options `DB::open` would refuse;
/// [`Error::NotFound`] when the directory does not exist or holds no
/// database file; [`Error::Busy`] when the database is open; any error
/// writing the new files.
pub fn repair(path: impl AsRef<Path>, options: &Options) -> Result<RepairReport> {
    options.validate().map_err(Error::InvalidArgument)?;
    let dir = path.as_ref();
    let env = &*options.env;
    let names = match env.children(dir) {
        Ok(names) => names,
        Err(Error::NotFound(_)) => {
            return Err(Error::NotFound(format!(
                "{}: no such directory: nothing to repair",
                dir.display()
            )))
        }
        Err(err) => return Err(err),
    };
    if !names.iter().any(|name| {
        matches!(
            filename::parse_file_name(name),
            Some((
                _,
                FileType::Log | FileType::Table | FileType::Descriptor | FileType::Current
            ))
        )
    }) {
        // Checked before taking the lock, which would create a LOCK file in
        // a directory that is not a database.
        return Err(Error::NotFound(format!(
            "{}: no database files (CURRENT, MANIFEST-*, *.log, *.ldb, *.sst): nothing to repair",
            dir.display()
        )));
    }
    let _lock = env
        .lock_file(&filename::lock_file_name(dir))
        .map_err(|e| match e {
            Error::Busy(_) => Error::Busy(format!(
                "{}: database is in use by another handle or process: close it before repairing",
                dir.display()
            )),
            other => other,
        })?;
    let info_log = InfoLog::open(env, dir)?;
    let mut repairer = Repairer {
        dir,
        options,
        env,
        info_log,
        next_file_number: Some(1),
        created: Vec::new(),
        from_log: HashMap::new(),
        report: RepairReport::default(),
    };
    let result = repairer.run();
    if let Err(err) = &result {
        shale_log!(repairer.info_log, "Repair failed: {err}");
        // Tables this run wrote and did not install: a second run would
        // write them again from the same logs.
        for number in std::mem::take(&mut repairer.created) {
            let _ = env.remove_file(&filename::table_file_name(dir, number));
        }
    }
    result
}

/// A table for the new MANIFEST.
struct TableInfo {
    meta: FileMetaData,
    min_sequence: SequenceNumber,
    max_sequence: SequenceNumber,
}

/// A log read, to be moved to `lost/` once the new MANIFEST is in place.
struct ReadLog {
    log: ConvertedLog,
    /// Its file name.
    name: String,
    /// Why it could not be opened, if it could not.
    unreadable: Option<String>,
}

/// The files found in the directory.
#[derive(Default)]
struct Found {
    manifests: Vec<String>,
    logs: Vec<u64>,
    tables: Vec<u64>,
}

/// One repair. REQUIRES: the database's LOCK is held for its whole life.
struct Repairer<'a> {
    dir: &'a Path,
    options: &'a Options,
    env: &'a dyn Env,
    info_log: InfoLog,
    /// `None` once a file numbered `u64::MAX` is found.
    next_file_number: Option<u64>,
    /// Tables written from logs and not yet in a MANIFEST.
    created: Vec<u64>,
    /// The log each of those tables was written from.
    from_log: HashMap<u64, u64>,
    report: RepairReport,
}

impl Repairer<'_> {
    fn run(&mut self) -> Result<RepairReport> {
        shale_log!(self.info_log, "Repairing {}", self.dir.display());
        let found = self.find_files()?;
        let mut table_numbers = found.tables.clone();
        let mut logs = Vec::new();
        for &number in &found.logs {
            let read = self.convert_log(number)?;
            table_numbers.extend(&read.log.tables);
            logs.push(read);
        }
        let mut tables = Vec::new();
        for number in table_numbers {
            if let Some(table) = self.scan_table(number)? {
                tables.push(table);
            }
        }
        tables.sort_unstable_by_key(|t| t.meta.number);
        self.report.out_of_order_overlaps =
            search_order::out_of_order_overlaps(&tables, &self.options.key_order());
        self.write_descriptor(&tables)?;
        self.created.clear();

        // The new MANIFEST is in place: what it replaced can go.
        for name in &found.manifests {
            self.archive(name, LostReason::Replaced)?;
        }
        for read in logs {
            let reason = match read.unreadable {
                Some(err) => LostReason::Unreadable(err),
                None => LostReason::Converted,
            };
            self.report.logs.push(read.log);
            self.archive(&read.name, reason)?;
        }
        self.env.sync_dir(self.dir)?;
        shale_log!(
            self.info_log,
            "Repaired {}: {} tables, {} bytes; {} files moved to {LOST_DIR}/",
            self.dir.display(),
            self.report.tables.len(),
            self.report.bytes(),
            self.report.lost.len()
        );
        Ok(std::mem::take(&mut self.report))
    }

    /// Lists the directory: LevelDB's `FindFiles`.
    fn find_files(&mut self) -> Result<Found> {
        let mut found = Found::default();
        for name in self.env.children(self.dir)? {
            let Some((number, kind)) = filename::parse_file_name(&name) else {
                continue;
            };
            // Above MANIFEST numbers too (LevelDB leaves them out, since it
            // reuses MANIFEST-000001), so that the new MANIFEST never takes
            // the name of an old one.
            self.next_file_number = match (self.next_file_number, number.checked_add(1)) {
                (Some(next), Some(above)) => Some(next.max(above)),
                _ => None,
            };
            match kind {
                FileType::Descriptor => found.manifests.push(name),
                FileType::Log => found.logs.push(number),
                FileType::Table => found.tables.push(number),
                _ => {}
            }
        }
        found.manifests.sort_unstable();
        found.logs.sort_unstable();
        found.tables.sort_unstable();
        // A number found both as `.ldb` and `.sst` is one table (`.ldb`).
        found.tables.dedup();
        Ok(found)
    }

    /// A file number above every one found or allocated.
    fn new_file_number(&mut self) -> Result<u64> {
        let number = self.next_file_number()?;
        self.next_file_number = number.checked_add(1);
        Ok(number)
    }

    /// The next file number, or an error when a file found is numbered
    /// `u64::MAX` (no number is left above it).
    fn next_file_number(&self) -> Result<u64> {
        self.next_file_number.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: a file is numbered {}: no file number is left for new files",
                self.dir.display(),
                u64::MAX
            ))
        })
    }

    /// Replays log `number` into memtables and writes them as tables:
    /// LevelDB's `ConvertLogToTable`.
    fn convert_log(&mut self, number: u64) -> Result<ReadLog> {
        let path = filename::log_file_name(self.dir, number);
        let name = file_name(&path);
        let mut log = ConvertedLog {
            number,
            ..ConvertedLog::default()
        };
        let file = match self.env.new_sequential_file(&path) {
            Ok(file) => file,
            Err(err) => {
                shale_log!(self.info_log, "Log #{number}: cannot be read: {err}");
                return Ok(ReadLog {
                    log,
                    name,
                    unreadable: Some(err.to_string()),
                });
            }
        };
        let info_log = self.info_log.clone();
        let (mut dropped, mut dropped_bytes) = (0u64, 0u64);
        let reporter = |bytes: u64, reason: Error| {
            shale_log!(info_log, "Log #{number}: dropping {bytes} bytes; {reason}");
            dropped += 1;
            dropped_bytes += bytes;
        };
        let mut reader = LogReader::new(file, reporter, true, 0);
        let mut mem = Arc::new(MemTable::with_order(self.options.key_order()));
        let mut record = Vec::new();
        loop {
            match reader.read_record_into(&mut record) {
                Ok(true) => {}
                Ok(false) => break,
                Err(err) => {
                    // The rest of the log stays in lost/ with it.
                    shale_log!(
                        self.info_log,
                        "Log #{number}: read error, rest skipped: {err}"
                    );
                    log.records_skipped += 1;
                    break;
                }
            }
            let applied = WriteBatch::from_data(record.clone()).and_then(|batch| {
                insert_into(&mem, &batch)?;
                Ok(u64::from(batch.count()))
            });
            match applied {
                Ok(entries) => {
                    log.records += 1;
                    log.entries += entries;
                }
                Err(err) => {
                    let offset = reader.last_record_offset();
                    shale_log!(
                        self.info_log,
                        "Log #{number}: ignoring the record at offset {offset}: {err}"
                    );
                    log.records_skipped += 1;
                }
            }
            if mem.approximate_memory_usage() > self.options.write_buffer_size {
                self.write_log_table(&mem, &mut log)?;
                mem = Arc::new(MemTable::with_order(self.options.key_order()));
            }
        }
        drop(reader);
        log.records_skipped += dropped;
        log.bytes_skipped += dropped_bytes;
        self.write_log_table(&mem, &mut log)?;
        shale_log!(
            self.info_log,
            "Log #{number}: {} records ({} entries) saved to tables {:?}; {} skipped",
            log.records,
            log.entries,
            log.tables,
            log.records_skipped
        );
        Ok(ReadLog {
            log,
            name,
            unreadable: None,
        })
    }

    /// Writes the entries of `mem` (when there are any) as a new table.
    fn write_log_table(&mut self, mem: &Arc<MemTable>, log: &mut ConvertedLog) -> Result<()> {
        if mem.is_empty() {
            return Ok(());
        }
        let number = self.new_file_number()?;
        self.created.push(number);
        let mut writer = TableWriter::create(self.options, self.dir, number)?;
        writer.add_all(&mut mem.frozen_iter())?;
        if writer.finish()?.is_some() {
            log.tables.push(number);
            self.from_log.insert(number, log.number);
        }
        Ok(())
    }

    /// Reads table `number` and decides its fate: LevelDB's `ScanTable`.
    /// `None` when it is not in the new MANIFEST (moved to `lost/`).
    fn scan_table(&mut self, number: u64) -> Result<Option<TableInfo>> {
        let file = match open_table_file(self.env, self.dir, number) {
            Ok(Some(file)) => file,
            // Listed a moment ago and the LOCK is held: nobody removed it.
            Ok(None) => return Ok(None),
            Err(err) => {
                let path = filename::table_file_name(self.dir, number);
                return self.lose_table(&file_name(&path), err.to_string());
            }
        };
        let name = file_name(&file.path);
        let table = match table_scan::open_table(&file, &self.options.key_order()) {
            Ok(table) => table,
            Err(err) => return self.lose_table(&name, err.to_string()),
        };
        let scan = table_scan::scan_table(&table, &self.options.key_order(), |_, _| Ok(()))?;
        shale_log!(
            self.info_log,
            "Table #{number}: {} entries, {} blocks skipped, {} entries skipped",
            scan.entries,
            scan.blocks_skipped,
            scan.entries_skipped
        );
        let first_error = || {
            scan.first_error
                .as_ref()
                .map_or_else(|| "no entries".to_string(), Error::to_string)
        };
        if scan.entries == 0 {
            return self.lose_table(&name, first_error());
        }
        let origin = self.from_log.get(&number).copied();
        if !scan.is_damaged() {
            let info = table_info(number, file.size, &scan);
            self.report.tables.push(RecoveredTable {
                number,
                entries: scan.entries,
                file_size: file.size,
                origin: origin.map_or(TableOrigin::Kept, |log| TableOrigin::FromLog { log }),
            });
            return Ok(info);
        }
        let damage = first_error();
        self.rewrite_table(number, &name, &table, damage)
    }

    /// Copies the readable entries of the damaged `table` into a new table,
    /// moves the original to `lost/` and gives the copy its number:
    /// LevelDB's `RepairTable`.
    fn rewrite_table(
        &mut self,
        number: u64,
        name: &str,
        table: &shale_format::table::Table,
        damage: String,
    ) -> Result<Option<TableInfo>> {
        let copy_number = self.new_file_number()?;
        let mut writer = TableWriter::create(self.options, self.dir, copy_number)?;
        let scan = table_scan::scan_table(table, &self.options.key_order(), |key, value| {
            writer.add(key, value)
        })?;
        let Some(meta) = writer.finish()? else {
            return self.lose_table(name, damage);
        };
        self.archive(name, LostReason::Rewritten(damage))?;
        let copy = filename::table_file_name(self.dir, copy_number);
        let target = filename::table_file_name(self.dir, number);
        if let Err(err) = self.env.rename(&copy, &target) {
            let _ = self.env.remove_file(&copy);
            return Err(err);
        }
        shale_log!(
            self.info_log,
            "Table #{number}: {} entries rewritten, {} blocks and {} entries left out",
            scan.entries,
            scan.blocks_skipped,
            scan.entries_skipped
        );
        self.report.tables.push(RecoveredTable {
            number,
            entries: scan.entries,
            file_size: meta.file_size,
            origin: TableOrigin::Rewritten {
                blocks_skipped: scan.blocks_skipped,
                entries_skipped: scan.entries_skipped,
            },
        });
        Ok(table_info(number, meta.file_size, &scan))
    }

    /// Moves table `name`, of which nothing can be read, to `lost/`.
    fn lose_table(&mut self, name: &str, why: String) -> Result<Option<TableInfo>> {
        shale_log!(self.info_log, "Table {name}: dropped: {why}");
        self.archive(name, LostReason::Unreadable(why))?;
        Ok(None)
    }

    /// Writes the new MANIFEST and points CURRENT at it: LevelDB's
    /// `WriteDescriptor`.
    fn write_descriptor(&mut self, tables: &[TableInfo]) -> Result<()> {
        let manifest_number = self.new_file_number()?;
        let last_sequence = tables.iter().map(|t| t.max_sequence).max().unwrap_or(0);
        let mut edit = VersionEdit {
            comparator: Some(self.options.key_order().name().to_string()),
            log_number: Some(0),
            next_file_number: Some(self.next_file_number()?),
            last_sequence: Some(last_sequence),
            ..VersionEdit::default()
        };
        for table in tables {
            edit.add_file(0, table.meta.clone());
        }
        // What the engine will do with it at open, checked before it is
        // written.
        let mut builder = VersionBuilder::new(Arc::new(Version::empty(self.options.key_order())));
        builder.apply(&edit)?;
        builder.build()?;
        VersionSet::write_new_manifest(self.dir, self.env, manifest_number, &edit)?;
        let name = file_name(&filename::descriptor_file_name(self.dir, manifest_number));
        shale_log!(
            self.info_log,
            "Wrote {name}: {} tables at level 0, last sequence {last_sequence}",
            tables.len()
        );
        self.report.manifest = name;
        self.report.last_sequence = last_sequence;
        Ok(())
    }

    /// Moves `name` from the database directory into `lost/`, under a name
    /// no earlier repair used: LevelDB's `ArchiveFile`.
    fn archive(&mut self, name: &str, reason: LostReason) -> Result<()> {
        let lost = self.dir.join(LOST_DIR);
        self.env.create_dir_all(&lost)?;
        let mut target = name.to_string();
        let mut suffix = 0;
        while self.env.file_exists(&lost.join(&target)) {
            suffix += 1;
            target = format!("{name}.{suffix}");
        }
        self.env.rename(&self.dir.join(name), &lost.join(&target))?;
        self.env.sync_dir(&lost)?;
        shale_log!(self.info_log, "Moved {name} to {LOST_DIR}/{target}");
        self.report.lost.push(LostFile {
            name: name.to_string(),
            path: format!("{LOST_DIR}/{target}"),
            reason,
        });
        Ok(())
    }
}

/// The MANIFEST entry for table `number` of `file_size` bytes.
fn table_info(number: u64, file_size: u64, scan: &table_scan::TableScan) -> Option<TableInfo> {
    Some(TableInfo {
        meta: FileMetaData {
            number,
            file_size,
            smallest: InternalKey::from_encoded(scan.smallest.clone()?),
            largest: InternalKey::from_encoded(scan.largest.clone()),
        },
        min_sequence: scan.min_sequence,
        max_sequence: scan.max_sequence,
    })
}

/// The last component of `path`.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
