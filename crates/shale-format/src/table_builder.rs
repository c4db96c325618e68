//! Writes a table entry by entry: a block builder for the data block being
//! filled, cut with LevelDB 1.23's rule, over a [`TableAssembler`] that lays
//! out the rest. For the same entries and options the bytes are the same as
//! LevelDB's `TableBuilder` writes. See `docs/format/table.md`.

use std::cmp::Ordering;
use std::io::Write;

use crate::block_builder::BlockBuilder;
use crate::error::{Error, Result};
use crate::format::maybe_compress;
use crate::options::TableOptions;
use crate::table_assembler::TableAssembler;

/// The one rule for ending a data block: after an entry is added, the block
/// ends once its size estimate (entries plus restart array) reaches
/// `block_size`. LevelDB's rule; every executor cuts blocks with it.
#[inline]
pub fn block_is_full(size_estimate: usize, block_size: usize) -> bool {
    size_estimate >= block_size
}

/// Builds a table into any writer. Keys must be added in strictly increasing
/// order of `options.comparator`.
#[derive(Debug)]
pub struct TableBuilder<W: Write> {
    assembler: TableAssembler<W>,
    block_size: usize,
    data_block: BlockBuilder,
    /// First key of the data block being filled.
    block_first_key: Vec<u8>,
    /// Key of the last entry added.
    last_key: Vec<u8>,
    first_key: Option<Vec<u8>>,
    num_entries: u64,
    /// Sum of the uncompressed sizes of the data blocks written so far.
    raw_data_bytes: u64,
    compressed_scratch: Vec<u8>,
}

impl<W: Write> TableBuilder<W> {
    /// A builder writing to `dest`, which must be empty (offsets start at 0).
    pub fn new(options: TableOptions, dest: W) -> TableBuilder<W> {
        TableBuilder {
            data_block: BlockBuilder::new(options.block_restart_interval),
            block_size: options.block_size,
            assembler: TableAssembler::new(options, dest),
            block_first_key: Vec::new(),
            last_key: Vec::new(),
            first_key: None,
            num_entries: 0,
            raw_data_bytes: 0,
            compressed_scratch: Vec::new(),
        }
    }

    /// Adds an entry. An `InvalidArgument` error if `key` is not after the
    /// previous key.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.num_entries > 0
            && self
                .assembler
                .options()
                .comparator
                .compare(key, &self.last_key)
                != Ordering::Greater
        {
            return Err(Error::InvalidArgument(format!(
                "table keys out of order: {:?} after {:?}",
                key.escape_ascii().to_string(),
                self.last_key.escape_ascii().to_string()
            )));
        }
        if u32::try_from(key.len()).is_err() || u32::try_from(value.len()).is_err() {
            return Err(Error::InvalidArgument(
                "key or value of 4 GiB or more".into(),
            ));
        }
        self.assembler.add_filter_key(key);
        if self.first_key.is_none() {
            self.first_key = Some(key.to_vec());
        }
        if self.data_block.is_empty() {
            self.block_first_key.clear();
            self.block_first_key.extend_from_slice(key);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.num_entries += 1;
        self.data_block.add(key, value);
        if block_is_full(self.data_block.current_size_estimate(), self.block_size) {
            self.flush()?;
        }
        Ok(())
    }

    /// Ends the current data block, if it has entries. Normally called by
    /// [`TableBuilder::add`] when the block reaches `block_size`.
    pub fn flush(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        self.raw_data_bytes += self.data_block.current_size_estimate() as u64;
        let compression = self.assembler.options().compression;
        let (contents, kind) = maybe_compress(
            self.data_block.finish(),
            compression,
            &mut self.compressed_scratch,
        );
        self.assembler
            .write_data_block(&self.block_first_key, &self.last_key, contents, kind)?;
        self.data_block.reset();
        Ok(())
    }

    /// Writes the remaining data block, the filter, metaindex and index
    /// blocks and the footer. Returns the writer (not synced: that is the
    /// caller's policy) and the file size.
    pub fn finish(mut self) -> Result<(W, u64)> {
        self.flush()?;
        self.assembler.finish()
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    /// Bytes written so far; after [`TableBuilder::finish`], the file size.
    pub fn file_size(&self) -> u64 {
        self.assembler.offset()
    }

    /// Size the file would have if finished now, roughly: what is written
    /// plus the open data block.
    pub fn estimated_file_size(&self) -> u64 {
        self.assembler.offset() + self.data_block.current_size_estimate() as u64
    }

    /// Uncompressed bytes of the data blocks written so far (the open block
    /// not included). Output files of a compaction are cut on this number, so
    /// the cut does not depend on how well blocks compress.
    pub fn raw_data_bytes(&self) -> u64 {
        self.raw_data_bytes
    }

    /// The first key added.
    pub fn smallest_key(&self) -> Option<&[u8]> {
        self.first_key.as_deref()
    }

    /// The last key added.
    pub fn largest_key(&self) -> Option<&[u8]> {
        (self.num_entries > 0).then_some(self.last_key.as_slice())
    }
}
