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

/// Bytes of stored blocks handed to the writer at once. Pieces of a
/// quarter MiB go straight from the caller's buffer into the page cache
/// (or to the disk with direct I/O); a table's whole 2 MiB in one `write`
/// cost the kernel's copy far more CPU, and pieces of 128 KiB to 1 MiB all
/// did as well (`docs/results/opencl-pocl.md`, "Files come back into
/// pinned memory and go out as they came; direct I/O without bounce
/// buffers").
const STORED_WRITE_CHUNK: usize = 256 << 10;

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

    /// Writes a run of finished data blocks stored back to back in
    /// `stored`, each followed by its trailer, exactly as the file holds
    /// them (blocks whose trailers were computed elsewhere, such as on a
    /// device). `blocks` gives, per block in order, its first and last key
    /// and its contents' length. The run goes to the writer in large
    /// pieces straight from `stored` (no copy into the writer's buffer),
    /// where [`TableAssembler::write_data_block_with_trailer`] writes two
    /// small pieces per block; the same bytes and the same index and
    /// filter offsets. An
    /// error, with nothing written, when the lengths do not add up to
    /// `stored`.
    pub fn write_stored_data_blocks<'k>(
        &mut self,
        stored: &[u8],
        blocks: impl IntoIterator<Item = (&'k [u8], &'k [u8], usize)> + Clone,
    ) -> Result<()> {
        let total: u64 = blocks
            .clone()
            .into_iter()
            .map(|(_, _, len)| (len + BLOCK_TRAILER_LEN) as u64)
            .sum();
        if total != stored.len() as u64 {
            return Err(Error::InvalidArgument(format!(
                "stored data blocks of {} bytes for blocks of {total} bytes with trailers",
                stored.len()
            )));
        }
        for piece in stored.chunks(STORED_WRITE_CHUNK) {
            self.dest
                .write_all(piece)
                .map_err(|e| Error::io("writing table blocks", e))?;
        }
        for (first_key, last_key, len) in blocks {
            if let Some((handle, mut separator)) = self.pending_index_entry.take() {
                self.options
                    .comparator
                    .find_shortest_separator(&mut separator, first_key);
                self.add_index_entry(&separator, handle);
            }
            let handle = BlockHandle::new(self.offset, len as u64);
            self.offset += (len + BLOCK_TRAILER_LEN) as u64;
            self.pending_index_entry = Some((handle, last_key.to_vec()));
            if let Some(filter) = &mut self.filter_block {
                filter.start_block(self.offset);
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_builder::BlockBuilder;

    /// Blocks of increasing keys, each with its first and last key.
    fn blocks() -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        (0..40u32)
            .map(|b| {
                let mut block = BlockBuilder::new(16);
                let keys: Vec<Vec<u8>> = (0..(b % 7 + 1))
                    .map(|i| format!("key{b:04}-{i:03}").into_bytes())
                    .collect();
                for key in &keys {
                    block.add(key, &vec![b as u8; (b as usize * 37) % 500]);
                }
                let contents = block.finish().to_vec();
                (keys[0].clone(), keys[keys.len() - 1].clone(), contents)
            })
            .collect()
    }

    fn table(bloom: Option<u32>, stored_at_once: bool) -> Vec<u8> {
        let blocks = blocks();
        let mut assembler = TableAssembler::new(TableOptions::bytewise(bloom), Vec::new());
        if stored_at_once {
            let mut stored = Vec::new();
            for (_, _, contents) in &blocks {
                stored.extend_from_slice(contents);
                stored.extend_from_slice(&block_trailer(contents, CompressionType::None));
            }
            let runs = blocks
                .iter()
                .map(|(first, last, contents)| (first.as_slice(), last.as_slice(), contents.len()));
            assembler.write_stored_data_blocks(&stored, runs).unwrap();
        } else {
            for (first, last, contents) in &blocks {
                assembler
                    .write_data_block(first, last, contents, CompressionType::None)
                    .unwrap();
            }
        }
        let filter = bloom.map(|_| b"a filter block".to_vec());
        assembler.finish_with_filter_block(filter).unwrap().0
    }

    #[test]
    fn blocks_stored_back_to_back_make_the_same_table_as_one_at_a_time() {
        for bloom in [None, Some(10)] {
            assert_eq!(table(bloom, true), table(bloom, false), "bloom {bloom:?}");
        }
    }

    #[test]
    fn stored_blocks_that_do_not_add_up_are_refused_before_anything_is_written() {
        let mut assembler = TableAssembler::new(TableOptions::bytewise(None), Vec::new());
        let blocks = [(&b"a"[..], &b"b"[..], 10usize)];
        let err = assembler
            .write_stored_data_blocks(&[0u8; 14], blocks)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(assembler.offset(), 0);
        let (written, size) = assembler.finish().unwrap();
        assert_eq!(written.len() as u64, size);
    }
}
