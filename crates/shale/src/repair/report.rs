//! What a repair recovered and what it lost ([`RepairReport`]).

use std::fmt;

use shale_format::internal_key::SequenceNumber;

use crate::filename::{parse_file_name, FileType};

/// What [`repair`](crate::repair()) did: the tables the new MANIFEST lists,
/// the logs it turned into tables, and every file it moved to `lost/`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Name of the MANIFEST written (`MANIFEST-NNNNNN`).
    pub manifest: String,
    /// The last sequence number it records: the largest found in a table.
    pub last_sequence: SequenceNumber,
    /// The tables it lists (all at level 0), by number.
    pub tables: Vec<RecoveredTable>,
    /// The write-ahead logs read, by number.
    pub logs: Vec<ConvertedLog>,
    /// Files moved to `lost/`, with why.
    pub lost: Vec<LostFile>,
    /// Pairs of tables whose key ranges overlap while the higher-numbered
    /// one holds entries older than the other's newest: a lookup, which
    /// searches level-0 tables by number, may find an older entry of a key
    /// held in both than a scan does, until a compaction merges them
    /// (`DB::compact_range(None, None)`, `shale compact`). LevelDB's repair
    /// has the same limit.
    pub out_of_order_overlaps: u64,
}

/// A table of the repaired database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredTable {
    /// Its file number (`NNNNNN.ldb`, or `.sst` as found).
    pub number: u64,
    /// Entries in it (puts and tombstones).
    pub entries: u64,
    /// Its size in bytes.
    pub file_size: u64,
    /// Where it came from.
    pub origin: TableOrigin,
}

/// Where a table of the repaired database came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableOrigin {
    /// Found intact and kept as it was.
    Kept,
    /// Rewritten from a damaged table of the same number, without what
    /// could not be read (the original is in `lost/`).
    Rewritten {
        /// Data blocks left out.
        blocks_skipped: u64,
        /// Entries left out (keys that are not internal keys or out of order).
        entries_skipped: u64,
    },
    /// Written from the records of write-ahead log `log`.
    FromLog {
        /// The log's number.
        log: u64,
    },
}

/// A write-ahead log read by the repair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertedLog {
    /// Its number (`NNNNNN.log`).
    pub number: u64,
    /// Records (write batches) turned into table entries.
    pub records: u64,
    /// Puts and deletes in them.
    pub entries: u64,
    /// Damaged stretches the log reader skipped (a bad checksum, a bad
    /// fragment), and records that held no valid write batch.
    pub records_skipped: u64,
    /// Bytes the log reader skipped in those stretches.
    pub bytes_skipped: u64,
    /// The tables written from it (none when it held no valid record).
    pub tables: Vec<u64>,
}

/// A file the repair moved into `lost/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostFile {
    /// Its name before the move, e.g. `000005.ldb`.
    pub name: String,
    /// Its path in the database directory, e.g. `lost/000005.ldb` (a
    /// `.N` suffix is added when an earlier repair left a file of that name).
    pub path: String,
    /// Why.
    pub reason: LostReason,
}

/// Why a file was moved to `lost/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostReason {
    /// A table or log of which nothing could be read; the error.
    Unreadable(String),
    /// A damaged table: its readable entries are in a new table of the
    /// same number, this is the original. The first damage found.
    Rewritten(String),
    /// A write-ahead log whose records are now in tables.
    Converted,
    /// A MANIFEST replaced by the new one.
    Replaced,
}

impl RepairReport {
    /// Entries in the repaired database's tables.
    pub fn entries(&self) -> u64 {
        self.tables.iter().map(|t| t.entries).sum()
    }

    /// Bytes in the repaired database's tables.
    pub fn bytes(&self) -> u64 {
        self.tables.iter().map(|t| t.file_size).sum()
    }

    /// Tables of which nothing could be read (moved to `lost/`).
    pub fn tables_lost(&self) -> usize {
        self.lost
            .iter()
            .filter(|f| {
                matches!(f.reason, LostReason::Unreadable(_))
                    && matches!(parse_file_name(&f.name), Some((_, FileType::Table)))
            })
            .count()
    }

    /// Data blocks left out of rewritten tables.
    pub fn blocks_skipped(&self) -> u64 {
        self.rewritten().map(|(blocks, _)| blocks).sum()
    }

    /// Entries left out of rewritten tables.
    pub fn entries_skipped(&self) -> u64 {
        self.rewritten().map(|(_, entries)| entries).sum()
    }

    /// Damaged stretches and records skipped in the logs.
    pub fn records_skipped(&self) -> u64 {
        self.logs.iter().map(|l| l.records_skipped).sum()
    }

    /// Whether anything readable was left out or any file could not be
    /// read at all.
    pub fn lost_data(&self) -> bool {
        self.blocks_skipped() > 0
            || self.entries_skipped() > 0
            || self.records_skipped() > 0
            || self
                .lost
                .iter()
                .any(|f| matches!(f.reason, LostReason::Unreadable(_)))
    }

    fn rewritten(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.tables.iter().filter_map(|t| match t.origin {
            TableOrigin::Rewritten {
                blocks_skipped,
                entries_skipped,
            } => Some((blocks_skipped, entries_skipped)),
            _ => None,
        })
    }
}

impl fmt::Display for RepairReport {
    /// A few lines: what the new MANIFEST holds, what was left out, then
    /// one line per file moved to `lost/`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let from_logs = self
            .tables
            .iter()
            .filter(|t| matches!(t.origin, TableOrigin::FromLog { .. }))
            .count();
        write!(
            f,
            "repaired: {} lists {} ({} from {} read, {} rewritten), {}, {} bytes, last sequence {}",
            self.manifest,
            counted(self.tables.len() as u64, "table"),
            from_logs,
            counted(self.logs.len() as u64, "log"),
            self.rewritten().count(),
            counted(self.entries(), "entry"),
            self.bytes(),
            self.last_sequence
        )?;
        let log_bytes: u64 = self.logs.iter().map(|l| l.bytes_skipped).sum();
        let unreadable_logs = self.lost.iter().filter(|f| {
            matches!(f.reason, LostReason::Unreadable(_))
                && matches!(parse_file_name(&f.name), Some((_, FileType::Log)))
        });
        let parts: Vec<String> = [
            (self.tables_lost() as u64, "unreadable table", String::new()),
            (
                unreadable_logs.count() as u64,
                "unreadable log",
                String::new(),
            ),
            (self.blocks_skipped(), "data block", String::new()),
            (self.entries_skipped(), "bad table entry", String::new()),
            (
                self.records_skipped(),
                "damaged log stretch",
                format!(" ({log_bytes} bytes)"),
            ),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, noun, more)| format!("{}{more}", counted(n, noun)))
        .collect();
        if parts.is_empty() {
            write!(f, "\nlost: nothing")?;
        } else {
            write!(f, "\nlost: {}", parts.join(", "))?;
        }
        for file in &self.lost {
            let why = match &file.reason {
                LostReason::Unreadable(err) => format!("unreadable: {err}"),
                LostReason::Rewritten(err) => {
                    format!("damaged, readable entries rewritten: {err}")
                }
                LostReason::Converted => "log converted to tables".to_string(),
                LostReason::Replaced => "old MANIFEST".to_string(),
            };
            write!(f, "\nmoved {}: {why}", file.path)?;
        }
        if self.out_of_order_overlaps > 0 {
            write!(
                f,
                "\nnote: {} of overlapping tables not in sequence order: until a full compaction \
                 (`shale compact`), a lookup may find an older value than a scan",
                counted(self.out_of_order_overlaps, "pair")
            )?;
        }
        Ok(())
    }
}

/// `n` and `noun`, plural unless `n` is 1 ("1 table", "2 entries").
fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = noun.strip_suffix('y') {
        format!("{n} {stem}ies")
    } else if noun.ends_with("ch") {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}
