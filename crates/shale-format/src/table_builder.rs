//! Writes a table: data blocks, the filter block, the metaindex block, the
//! index block and the footer, in LevelDB 1.23's layout and with its rules for
//! where blocks end, so that for the same entries and options the bytes are
//! the same as LevelDB's `TableBuilder` writes. See `docs/format/table.md`.

use std::cmp::Ordering;
use std::io::Write;

use crate::block_builder::BlockBuilder;
use crate::error::{Error, Result};
use crate::filter_block::FilterBlockBuilder;
use crate::format::{block_trailer, maybe_compress, BlockHandle, CompressionType, Footer};
use crate::options::TableOptions;

/// Builds a table into any writer. Keys must be added in strictly increasing
/// order of `options.comparator`.
#[derive(Debug)]
pub struct TableBuilder<W: Write> {
    options: TableOptions,
    dest: W,
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter_block: Option<FilterBlockBuilder>,
    /// Key of the last entry added (the last key of the current data block).
    last_key: Vec<u8>,
    first_key: Option<Vec<u8>>,
    num_entries: u64,
    /// A data block was just written and its index entry waits for the next
    /// key, so the separator can be shortened against it.
    pending_index_entry: Option<BlockHandle>,
    /// Sum of the uncompressed sizes of the data blocks written so far.
    raw_data_bytes: u64,
    compressed_scratch: Vec<u8>,
    handle_scratch: Vec<u8>,
    closed: bool,
}

impl<W: Write> TableBuilder<W> {
    /// A builder writing to `dest`, which must be empty (offsets start at 0).
    pub fn new(options: TableOptions, dest: W) -> TableBuilder<W> {
        let filter_block = options
            .filter_policy
            .clone()
            .map(|policy| {
                let mut f = FilterBlockBuilder::new(policy);
                f.start_block(0);
                f
            });
        TableBuilder {
            data_block: BlockBuilder::new(options.block_restart_interval),
            // The index is binary-searched by exact key: no prefix sharing.
            index_block: BlockBuilder::new(1),
            filter_block,
            options,
            dest,
            offset: 0,
            last_key: Vec::new(),
            first_key: None,
            num_entries: 0,
            pending_index_entry: None,
            raw_data_bytes: 0,
            compressed_scratch: Vec::new(),
            handle_scratch: Vec::new(),
            closed: false,
        }
    }

    /// Adds an entry. An `InvalidArgument` error if `key` is not after the
    /// previous key, or the builder is finished.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.closed {
            return Err(Error::InvalidArgument("add to a finished table".into()));
        }
        if self.num_entries > 0
            && self.options.comparator.compare(key, &self.last_key) != Ordering::Greater
        {
            return Err(Error::InvalidArgument(format!(
                "table keys out of order: {:?} after {:?}",
                key.escape_ascii().to_string(),
                self.last_key.escape_ascii().to_string()
            )));
        }
        if u32::try_from(key.len()).is_err() || u32::try_from(value.len()).is_err() {
            return Err(Error::InvalidArgument("key or value of 4 GiB or more".into()));
        }
        if let Some(handle) = self.pending_index_entry.take() {
            self.options
                .comparator
                .find_shortest_separator(&mut self.last_key, key);
            self.add_index_entry(handle);
        }
        if let Some(filter) = &mut self.filter_block {
            filter.add_key(key);
        }
        if self.first_key.is_none() {
            self.first_key = Some(key.to_vec());
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.num_entries += 1;
        self.data_block.add(key, value);
        if block_is_full(self.data_block.current_size_estimate(), self.options.block_size) {
            self.flush()?;
        }
        Ok(())
    }

    fn add_index_entry(&mut self, handle: BlockHandle) {
        self.handle_scratch.clear();
        handle.encode_to(&mut self.handle_scratch);
        self.index_block.add(&self.last_key, &self.handle_scratch);
    }

    /// Ends the current data block, if it has entries. Normally called by
    /// [`TableBuilder::add`] when the block reaches `block_size`.
    pub fn flush(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        debug_assert!(self.pending_index_entry.is_none());
        self.raw_data_bytes += self.data_block.current_size_estimate() as u64;
        let handle = write_block(
            &mut self.data_block,
            self.options.compression,
            &mut self.compressed_scratch,
            &mut self.dest,
            &mut self.offset,
        )?;
        self.pending_index_entry = Some(handle);
        self.dest
            .flush()
            .map_err(|e| Error::io("flushing a table block", e))?;
        if let Some(filter) = &mut self.filter_block {
            filter.start_block(self.offset);
        }
        Ok(())
    }

    /// Writes the remaining data block, the filter, metaindex and index
    /// blocks and the footer. Returns the writer (not synced: that is the
    /// caller's policy).
    pub fn finish(mut self) -> Result<(W, u64)> {
        self.flush()?;
        self.closed = true;
        let filter_handle = match self.filter_block.take() {
            Some(filter) => {
                let contents = filter.finish();
                Some(write_raw_block(
                    &contents,
                    CompressionType::None,
                    &mut self.dest,
                    &mut self.offset,
                )?)
            }
            None => None,
        };

        let mut metaindex = BlockBuilder::new(self.options.block_restart_interval);
        if let (Some(handle), Some(policy)) = (filter_handle, &self.options.filter_policy) {
            let key = format!("filter.{}", policy.name());
            metaindex.add(key.as_bytes(), &handle.encoded());
        }
        let metaindex_handle = write_block(
            &mut metaindex,
            self.options.compression,
            &mut self.compressed_scratch,
            &mut self.dest,
            &mut self.offset,
        )?;

        if let Some(handle) = self.pending_index_entry.take() {
            self.options.comparator.find_short_successor(&mut self.last_key);
            self.add_index_entry(handle);
        }
        let index_handle = write_block(
            &mut self.index_block,
            self.options.compression,
            &mut self.compressed_scratch,
            &mut self.dest,
            &mut self.offset,
        )?;

        let footer = Footer {
            metaindex_handle,
            index_handle,
        }
        .encode();
        self.dest
            .write_all(&footer)
            .map_err(|e| Error::io("writing a table footer", e))?;
        self.offset += footer.len() as u64;
        self.dest
            .flush()
            .map_err(|e| Error::io("flushing a table", e))?;
        Ok((self.dest, self.offset))
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    /// Bytes written so far; after [`TableBuilder::finish`], the file size.
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// Size the file would have if finished now, roughly: what is written
    /// plus the open data block. Used to cut output files.
    pub fn estimated_file_size(&self) -> u64 {
        self.offset + self.data_block.current_size_estimate() as u64
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

    /// The last key added (before finish shortens it for the index).
    pub fn largest_key(&self) -> Option<&[u8]> {
        (self.num_entries > 0 && !self.closed).then_some(self.last_key.as_slice())
    }
}

/// The one rule for ending a data block: after an entry is added, the block
/// ends once its size estimate (entries plus restart array) reaches
/// `block_size`. LevelDB's rule; every executor cuts blocks with it.
#[inline]
pub fn block_is_full(size_estimate: usize, block_size: usize) -> bool {
    size_estimate >= block_size
}

/// Finishes `block`, compresses it if worthwhile, writes it with its trailer
/// and resets it.
fn write_block<W: Write>(
    block: &mut BlockBuilder,
    compression: CompressionType,
    scratch: &mut Vec<u8>,
    dest: &mut W,
    offset: &mut u64,
) -> Result<BlockHandle> {
    let raw = block.finish();
    let (contents, kind) = maybe_compress(raw, compression, scratch);
    let handle = write_raw_block(contents, kind, dest, offset)?;
    block.reset();
    Ok(handle)
}

fn write_raw_block<W: Write>(
    contents: &[u8],
    compression: CompressionType,
    dest: &mut W,
    offset: &mut u64,
) -> Result<BlockHandle> {
    let handle = BlockHandle::new(*offset, contents.len() as u64);
    dest.write_all(contents)
        .and_then(|()| dest.write_all(&block_trailer(contents, compression)))
        .map_err(|e| Error::io("writing a table block", e))?;
    *offset += (contents.len() + crate::format::BLOCK_TRAILER_LEN) as u64;
    Ok(handle)
}
