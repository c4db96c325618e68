//! Writes a table entry by entry: a block builder for the data block being
//! filled, cut with LevelDB 1.23's rule, over a [`TableAssembler`] that lays
//! out the rest. For the same entries and options, uncompressed, the bytes
//! are the same as LevelDB's `TableBuilder` writes; with Snappy, data
//! blocks that compress too little are in time no longer offered to the
//! compressor ([`crate::format::CompressionGate`]). See
//! `docs/format/table.md`.

use std::cmp::Ordering;
use std::io::Write;

use crate::block_builder::BlockBuilder;
use crate::comparator::compare_internal_keys;
use crate::error::{Error, Result};
use crate::format::CompressionGate;
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
    /// Key of the last entry of the last data block written (the open
    /// block's last key is the block builder's).
    last_key: Vec<u8>,
    /// The comparator is [`crate::comparator::InternalKeyComparator`]: keys
    /// are checked in order inline.
    bytewise_internal: bool,
    first_key: Option<Vec<u8>>,
    num_entries: u64,
    /// Sum of the uncompressed sizes of the data blocks written so far.
    raw_data_bytes: u64,
    compressed_scratch: Vec<u8>,
    /// Which data blocks are offered to the compressor.
    gate: CompressionGate,
}

impl<W: Write> TableBuilder<W> {
    /// A builder writing to `dest`, which must be empty (offsets start at 0).
    pub fn new(options: TableOptions, dest: W) -> TableBuilder<W> {
        let bytewise_internal = options.comparator.is_bytewise_internal();
        TableBuilder {
            data_block: BlockBuilder::new(options.block_restart_interval),
            block_size: options.block_size,
            assembler: TableAssembler::new(options, dest),
            block_first_key: Vec::new(),
            last_key: Vec::new(),
            bytewise_internal,
            first_key: None,
            num_entries: 0,
            raw_data_bytes: 0,
            compressed_scratch: Vec::new(),
            gate: CompressionGate::default(),
        }
    }

    /// Adds an entry. An `InvalidArgument` error if `key` is not after the
    /// previous key.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.num_entries > 0 {
            let last = self.largest_key().unwrap_or_default();
            let order = if self.bytewise_internal {
                compare_internal_keys(key, last)
            } else {
                self.assembler.options().comparator.compare(key, last)
            };
            if order != Ordering::Greater {
                return Err(Error::InvalidArgument(format!(
                    "table keys out of order: {:?} after {:?}",
                    key.escape_ascii().to_string(),
                    last.escape_ascii().to_string()
                )));
            }
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
        self.last_key.clear();
        self.last_key.extend_from_slice(self.data_block.last_key());
        let compression = self.assembler.options().compression;
        let (contents, kind) = self.gate.compress(
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
        if self.num_entries == 0 {
            None
        } else if self.data_block.is_empty() {
            Some(&self.last_key)
        } else {
            Some(self.data_block.last_key())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_key::{InternalKey, ValueType};

    fn key(user_key: &str, sequence: u64) -> Vec<u8> {
        InternalKey::new(user_key.as_bytes(), sequence, ValueType::Value).into_encoded()
    }

    #[test]
    fn keys_out_of_order_are_refused_within_and_across_blocks() {
        let options = TableOptions {
            block_size: 64,
            ..TableOptions::internal(Some(10))
        };
        let mut builder = TableBuilder::new(options, Vec::new());
        builder.add(&key("a", 5), b"value").unwrap();
        // Within the open block: an equal key, an older key first.
        assert!(builder.add(&key("a", 5), b"again").is_err());
        assert!(builder.add(&key("a", 6), b"newer").is_err());
        for i in 0..20 {
            builder
                .add(&key(&format!("b{i:02}"), 1), &[b'x'; 40])
                .unwrap();
            assert_eq!(
                builder.largest_key(),
                Some(key(&format!("b{i:02}"), 1).as_slice())
            );
        }
        // The last block was just written out: the previous key is kept.
        builder.flush().unwrap();
        assert_eq!(builder.largest_key(), Some(key("b19", 1).as_slice()));
        assert!(builder.add(&key("b19", 1), b"equal").is_err());
        assert!(builder.add(&key("b00", 1), b"smaller").is_err());
        builder.add(&key("b19", 0), b"older version").unwrap();
        assert_eq!(builder.smallest_key(), Some(key("a", 5).as_slice()));
        assert_eq!(builder.num_entries(), 22);
    }
}
