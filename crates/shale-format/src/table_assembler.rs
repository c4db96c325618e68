//! Lays out a table from finished data blocks: writes each block with its
//! trailer, keeps the index entries (shortened separators between blocks, a
//! short successor after the last), the filter block, the metaindex block and
//! the footer. [`crate::table_builder::TableBuilder`] feeds it one block at a
//! time; data-parallel compaction feeds it blocks encoded elsewhere. Both
//! therefore produce the same bytes for the same blocks.

use std::io::Write;

use crate::block_builder::BlockBuilder;
use crate::error::{Error, Result};
use crate::filter_block::FilterBlockBuilder;
use crate::format::{
    block_trailer, maybe_compress, BlockHandle, CompressionType, Footer, BLOCK_TRAILER_LEN,
};
use crate::options::TableOptions;

/// Writes blocks and the table's trailing structures to `W`.
#[derive(Debug)]
pub struct TableAssembler<W: Write> {
    options: TableOptions,
    dest: W,
    offset: u64,
    index_block: BlockBuilder,
    /// Filter built key by key (when the caller does not build it).
    filter_block: Option<FilterBlockBuilder>,
    /// The last data block waits for the next block's first key so that its
    /// index separator can be shortened against it.
    pending_index_entry: Option<(BlockHandle, Vec<u8>)>,
    compressed_scratch: Vec<u8>,
    handle_scratch: Vec<u8>,
}

impl<W: Write> TableAssembler<W> {
    /// An assembler writing to `dest`, which must be empty.
    pub fn new(options: TableOptions, dest: W) -> TableAssembler<W> {
        let filter_block = options.filter_policy.clone().map(|policy| {
            let mut f = FilterBlockBuilder::new(policy);
            f.start_block(0);
            f
        });
        TableAssembler {
            // The index is binary-searched by exact key: no prefix sharing.
            index_block: BlockBuilder::new(1),
            filter_block,
            options,
            dest,
            offset: 0,
            pending_index_entry: None,
            compressed_scratch: Vec::new(),
            handle_scratch: Vec::new(),
        }
    }

    /// The options the table is written with.
    pub fn options(&self) -> &TableOptions {
        &self.options
    }

    /// Bytes written so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Adds a key of the data block being built to the key-by-key filter.
    /// Call for every key of a block before [`TableAssembler::write_data_block`].
    #[inline]
    pub fn add_filter_key(&mut self, key: &[u8]) {
        if let Some(filter) = &mut self.filter_block {
            filter.add_key(key);
        }
    }

    /// Writes a finished data block (`contents` already compressed as
    /// `compression` says) whose entries run from `first_key` to `last_key`.
    pub fn write_data_block(
        &mut self,
        first_key: &[u8],
        last_key: &[u8],
        contents: &[u8],
        compression: CompressionType,
    ) -> Result<BlockHandle> {
        let trailer = block_trailer(contents, compression);
        self.write_data_block_with_trailer(first_key, last_key, contents, &trailer)
    }

    /// [`TableAssembler::write_data_block`] with the block's trailer
    /// (`block_trailer(contents, compression)`) computed by the caller, who
    /// may checksum blocks in parallel before laying them out in order.
    pub fn write_data_block_with_trailer(
        &mut self,
        first_key: &[u8],
        last_key: &[u8],
        contents: &[u8],
        trailer: &[u8; BLOCK_TRAILER_LEN],
    ) -> Result<BlockHandle> {
        if let Some((handle, mut separator)) = self.pending_index_entry.take() {
            self.options
                .comparator
                .find_shortest_separator(&mut separator, first_key);
            self.add_index_entry(&separator, handle);
        }
        let handle = self.write_stored_block(contents, trailer)?;
        self.pending_index_entry = Some((handle, last_key.to_vec()));
        if let Some(filter) = &mut self.filter_block {
            filter.start_block(self.offset);
        }
        Ok(handle)
    }

    fn add_index_entry(&mut self, key: &[u8], handle: BlockHandle) {
        self.handle_scratch.clear();
        handle.encode_to(&mut self.handle_scratch);
        self.index_block.add(key, &self.handle_scratch);
    }

    /// Writes the filter block built key by key, the metaindex and index
    /// blocks and the footer. Returns the writer and the file size.
    pub fn finish(mut self) -> Result<(W, u64)> {
        let filter = self.filter_block.take().map(FilterBlockBuilder::finish);
        self.finish_with_filter_block(filter)
    }

    /// Like [`TableAssembler::finish`], with a filter block built by the
    /// caller (`None`: no filter; ignored when the options have no policy).
    pub fn finish_with_filter_block(mut self, filter: Option<Vec<u8>>) -> Result<(W, u64)> {
        let filter_handle = match (filter, &self.options.filter_policy) {
            (Some(contents), Some(_)) => {
                Some(self.write_raw_block(&contents, CompressionType::None)?)
            }
            _ => None,
        };

        let mut metaindex = BlockBuilder::new(self.options.block_restart_interval);
        if let (Some(handle), Some(policy)) = (filter_handle, &self.options.filter_policy) {
            let key = format!("filter.{}", policy.name());
            metaindex.add(key.as_bytes(), &handle.encoded());
        }
        let metaindex_handle = self.write_block(&mut metaindex)?;

        if let Some((handle, mut successor)) = self.pending_index_entry.take() {
            self.options.comparator.find_short_successor(&mut successor);
            self.add_index_entry(&successor, handle);
        }
        let mut index_block = std::mem::replace(&mut self.index_block, BlockBuilder::new(1));
        let index_handle = self.write_block(&mut index_block)?;

        let footer = Footer {
            metaindex_handle,
            index_handle,
        }
        .encode();
        self.dest
            .write_all(&footer)
            .and_then(|()| self.dest.flush())
            .map_err(|e| Error::io("writing a table footer", e))?;
        self.offset += footer.len() as u64;
        Ok((self.dest, self.offset))
    }

    /// Finishes `block`, compresses it if worthwhile and writes it.
    fn write_block(&mut self, block: &mut BlockBuilder) -> Result<BlockHandle> {
        let mut scratch = std::mem::take(&mut self.compressed_scratch);
        let (contents, kind) =
            maybe_compress(block.finish(), self.options.compression, &mut scratch);
        let result = self.write_raw_block(contents, kind);
        self.compressed_scratch = scratch;
        result
    }

    fn write_raw_block(
        &mut self,
        contents: &[u8],
        compression: CompressionType,
    ) -> Result<BlockHandle> {
        self.write_stored_block(contents, &block_trailer(contents, compression))
    }

    fn write_stored_block(
        &mut self,
        contents: &[u8],
        trailer: &[u8; BLOCK_TRAILER_LEN],
    ) -> Result<BlockHandle> {
        let handle = BlockHandle::new(self.offset, contents.len() as u64);
        // No flush per block (LevelDB flushes its own buffer here): the
        // writer's buffering decides, and `finish` flushes.
        self.dest
            .write_all(contents)
            .and_then(|()| self.dest.write_all(trailer))
            .map_err(|e| Error::io("writing a table block", e))?;
        self.offset += (contents.len() + BLOCK_TRAILER_LEN) as u64;
        Ok(handle)
    }
}
