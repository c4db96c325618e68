//! Reads every entry of a table that can still be read: data block by data
//! block, each block's checksum verified, a block that cannot be read
//! skipped and the next one read. That is what LevelDB's repair gets from a
//! table's two-level iterator (`ScanTable` and `RepairTable` in
//! `db/repair.cc`), which moves past a block it cannot read and keeps the
//! error.

use shale_format::comparator::KeyOrder;
use shale_format::internal_key::{ParsedInternalKey, SequenceNumber};
use shale_format::iterator::KvIterator;
use shale_format::table::{BlockReadOptions, ReadTableOptions, Table};
use shale_format::{Error, Result};

use crate::verify::TableFile;

/// What a scan of one table read and what it had to leave out.
#[derive(Debug, Default)]
pub(super) struct TableScan {
    /// Entries read: each handed to the visitor, in order.
    pub entries: u64,
    /// Data blocks read in full.
    pub blocks: u64,
    /// Data blocks not read in full: a bad checksum, an I/O error, or an
    /// entry that does not decode (the entries before it are kept).
    pub blocks_skipped: u64,
    /// Entries left out: keys that are not internal keys, or not after the
    /// previous key.
    pub entries_skipped: u64,
    /// The first thing that went wrong, naming the file and offset.
    pub first_error: Option<Error>,
    /// The first key read.
    pub smallest: Option<Vec<u8>>,
    /// The last key read.
    pub largest: Vec<u8>,
    /// The smallest and largest sequence numbers read.
    pub min_sequence: SequenceNumber,
    pub max_sequence: SequenceNumber,
}

impl TableScan {
    /// Whether anything was left out: the table needs rewriting.
    pub(super) fn is_damaged(&self) -> bool {
        self.blocks_skipped > 0 || self.entries_skipped > 0
    }

    fn skip_block(&mut self, err: Error) {
        self.blocks_skipped += 1;
        self.first_error.get_or_insert(err);
    }

    fn skip_entry(&mut self, err: Error) {
        self.entries_skipped += 1;
        self.first_error.get_or_insert(err);
    }
}

/// Opens `file` as a table, reading its footer and index block with their
/// checksums verified. An error means nothing in it can be found.
pub(super) fn open_table(file: &TableFile, order: &KeyOrder) -> Result<Table> {
    let options = ReadTableOptions {
        comparator: order.internal_comparator(),
        ..ReadTableOptions::internal_scan()
    };
    Table::open(file.source.clone(), file.size, &file.name, options)
}

/// Reads every readable entry of `table` in order, handing each to `visit`
/// (internal key, value). Damage is counted in the result, never returned;
/// an error from `visit` stops the scan and is returned. An index entry
/// that does not decode ends the scan there (the index passed its checksum
/// at open, so only a bad writer makes one).
pub(super) fn scan_table(
    table: &Table,
    order: &KeyOrder,
    mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<TableScan> {
    let mut scan = TableScan::default();
    let handles = match table.block_handles() {
        Ok(handles) => handles,
        Err(err) => {
            scan.skip_block(err);
            return Ok(scan);
        }
    };
    let read = BlockReadOptions {
        verify_checksums: true,
        fill_cache: false,
    };
    let comparator = order.internal_comparator();
    for handle in handles {
        let block = match table.read_data_block(handle, read) {
            Ok(block) => block,
            Err(err) => {
                scan.skip_block(err);
                continue;
            }
        };
        let mut iter = block.iter(comparator.clone());
        iter.seek_to_first();
        while iter.valid() {
            let key = iter.key();
            let bad = |reason: String| Error::corruption(handle.offset, reason).at(table.name(), 0);
            match ParsedInternalKey::parse(key) {
                Err(err) => scan.skip_entry(bad(format!(
                    "entry {:?} is not an internal key: {err}",
                    key.escape_ascii().to_string()
                ))),
                Ok(_)
                    if scan.smallest.is_some()
                        && order.compare_internal(&scan.largest, key).is_ge() =>
                {
                    scan.skip_entry(bad(format!(
                        "entry {:?} is out of order",
                        key.escape_ascii().to_string()
                    )))
                }
                Ok(parsed) => {
                    visit(key, iter.value())?;
                    scan.max_sequence = scan.max_sequence.max(parsed.sequence);
                    if scan.smallest.is_none() {
                        scan.smallest = Some(key.to_vec());
                        scan.min_sequence = parsed.sequence;
                    }
                    scan.min_sequence = scan.min_sequence.min(parsed.sequence);
                    scan.largest.clear();
                    scan.largest.extend_from_slice(key);
                    scan.entries += 1;
                }
            }
            iter.next();
        }
        match iter.status() {
            Ok(()) => scan.blocks += 1,
            Err(err) => scan.skip_block(err.at(table.name(), handle.offset)),
        }
    }
    Ok(scan)
}
