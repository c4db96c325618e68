//! Reads a table: footer, index, metaindex and filter at open; data blocks on
//! demand, through an optional block cache. See `docs/format/table.md`.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use crate::block::{Block, BlockIter};
use crate::bloom::FilterPolicy;
use crate::comparator::Comparator;
use crate::error::{Error, Result};
use crate::filter_block::FilterBlockReader;
use crate::format::{
    mapped_block_is_uncompressed, prefetch_mapped_block, read_block_shared, BlockHandle, Footer,
    RandomAccess, FOOTER_LEN,
};
use crate::iterator::KvIterator;

/// A shared cache of decoded data blocks, keyed by (table id, block offset).
/// The engine provides one; the table only asks and offers.
pub trait BlockCache: Send + Sync {
    /// A cached block.
    fn get(&self, table_id: u64, offset: u64) -> Option<Block>;
    /// Offers a block just read.
    fn insert(&self, table_id: u64, offset: u64, block: Block);
}

/// Per-read choices for data blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockReadOptions {
    /// Check each block's CRC (in addition to the table's own setting).
    pub verify_checksums: bool,
    /// Offer blocks read from disk to the block cache.
    pub fill_cache: bool,
}

impl Default for BlockReadOptions {
    fn default() -> BlockReadOptions {
        BlockReadOptions {
            verify_checksums: false,
            fill_cache: true,
        }
    }
}

/// How to open and read a table.
#[derive(Clone)]
pub struct ReadTableOptions {
    /// Must be the order the table was written in.
    pub comparator: Arc<dyn Comparator>,
    /// Used when the table has a filter of the same name.
    pub filter_policy: Option<Arc<dyn FilterPolicy>>,
    /// Check the CRC of every data block, whatever a read asks. (The index,
    /// metaindex and filter blocks are checked by [`Table::open`], not by
    /// [`Table::reopen`].)
    pub verify_checksums: bool,
    /// Cache for data blocks, with this table's id in it.
    pub block_cache: Option<(Arc<dyn BlockCache>, u64)>,
}

impl fmt::Debug for ReadTableOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadTableOptions")
            .field("comparator", &self.comparator.name())
            .field(
                "filter_policy",
                &self.filter_policy.as_ref().map(|p| p.name()),
            )
            .field("verify_checksums", &self.verify_checksums)
            .field("block_cache", &self.block_cache.as_ref().map(|(_, id)| id))
            .finish()
    }
}

impl ReadTableOptions {
    /// For reading an internal-key table whole (compaction inputs, `verify`,
    /// `repair`, `dump`, a remote worker's staged output): every block's
    /// checksum verified, no filter (a scan never asks one), no cache.
    pub fn internal_scan() -> ReadTableOptions {
        ReadTableOptions {
            comparator: Arc::new(crate::comparator::InternalKeyComparator),
            filter_policy: None,
            verify_checksums: true,
            block_cache: None,
        }
    }

    /// Read options matching the build options of a table.
    pub fn from_table_options(options: &crate::options::TableOptions) -> ReadTableOptions {
        ReadTableOptions {
            comparator: options.comparator.clone(),
            filter_policy: options.filter_policy.clone(),
            verify_checksums: true,
            block_cache: None,
        }
    }
}

/// Point lookups a table serves before its index block gets a search index
/// (see `TableInner::searchable_index`): building one costs about as much
/// as a dozen binary searches of an index of 256 blocks save.
const SEARCH_INDEX_AFTER_LOOKUPS: u32 = 16;

struct TableInner {
    source: Arc<dyn RandomAccess>,
    name: String,
    file_size: u64,
    options: ReadTableOptions,
    /// The index block as stored.
    index: Block,
    /// The index block with its search index, built once the table has
    /// served [`SEARCH_INDEX_AFTER_LOOKUPS`] point lookups. Building it
    /// decodes every restart key, which cost more than the one lookup a
    /// table opened for a single read serves (a database with more tables
    /// than the table cache holds reopens one for most reads).
    searchable_index: OnceLock<Block>,
    /// Point lookups served with `index` so far.
    index_lookups: AtomicU32,
    metaindex_handle: BlockHandle,
    filter: Option<FilterBlockReader>,
}

/// An open table. Cheap to clone; every clone shares the index and filter.
#[derive(Clone)]
pub struct Table {
    inner: Arc<TableInner>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.inner.name)
            .field("file_size", &self.inner.file_size)
            .finish()
    }
}

impl Table {
    /// Opens the table of `file_size` bytes in `source`; `name` appears in
    /// errors. Reads the footer, the index block, and the filter block when
    /// `options.filter_policy` names the table's filter, and checks the
    /// CRCs of all three.
    pub fn open(
        source: Arc<dyn RandomAccess>,
        file_size: u64,
        name: &str,
        options: ReadTableOptions,
    ) -> Result<Table> {
        Self::open_checking(source, file_size, name, options, true)
    }

    /// [`Table::open`] for a table whose index, metaindex and filter blocks
    /// passed their CRC checks when the caller opened it before (tables
    /// never change once written): the blocks are read without checking
    /// again. On a mapped source the filter is then not read at all when
    /// the table opens, only the pages a lookup probes, where a check
    /// would read all of it (about 300 KiB for an 8 MiB table of 32-byte
    /// values). LevelDB checks these blocks only under `paranoid_checks`.
    pub fn reopen(
        source: Arc<dyn RandomAccess>,
        file_size: u64,
        name: &str,
        options: ReadTableOptions,
    ) -> Result<Table> {
        Self::open_checking(source, file_size, name, options, false)
    }

    /// Whether this table reads with a filter: false where none was asked
    /// for, the table has none under the policy's name, or its filter or
    /// metaindex block failed its check (then every read goes to the data
    /// blocks).
    pub fn has_filter(&self) -> bool {
        self.inner.filter.is_some()
    }

    fn open_checking(
        source: Arc<dyn RandomAccess>,
        file_size: u64,
        name: &str,
        options: ReadTableOptions,
        verify: bool,
    ) -> Result<Table> {
        if file_size < FOOTER_LEN as u64 {
            return Err(Error::corruption(
                0,
                format!("file of {file_size} bytes is too short to be a table"),
            )
            .at(name, 0));
        }
        let footer_offset = file_size - FOOTER_LEN as u64;
        let mut footer_bytes = [0u8; FOOTER_LEN];
        source
            .read_exact_at(&mut footer_bytes, footer_offset)
            .map_err(|e| Error::io(format!("reading the footer of {name}"), e))?;
        let footer = Footer::decode(&footer_bytes).map_err(|e| e.at(name, footer_offset))?;

        let index_bytes =
            read_block_shared(&*source, name, file_size, footer.index_handle, verify)?;
        let index = Block::new(index_bytes).map_err(|e| e.at(name, footer.index_handle.offset))?;

        let mut table = TableInner {
            source,
            name: name.to_string(),
            file_size,
            options,
            index,
            searchable_index: OnceLock::new(),
            index_lookups: AtomicU32::new(0),
            metaindex_handle: footer.metaindex_handle,
            filter: None,
        };
        table.filter = table.read_filter(verify)?;
        Ok(Table {
            inner: Arc::new(table),
        })
    }

    /// The filter block, when `options.filter_policy` names the table's
    /// filter and the block reads back intact (`None` otherwise: a table
    /// without a filter, or with a damaged one, answers every read from
    /// its data blocks).
    pub fn filter(&self) -> Option<&FilterBlockReader> {
        self.inner.filter.as_ref()
    }

    /// The name given at open.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.inner.file_size
    }

    /// A cursor over every entry.
    pub fn iter(&self) -> TableIter {
        self.iter_with(BlockReadOptions::default())
    }

    /// A cursor over every entry, reading blocks as `read` says.
    pub fn iter_with(&self, read: BlockReadOptions) -> TableIter {
        TableIter {
            read,
            table: self.clone(),
            index: self
                .inner
                .index_block()
                .iter(self.inner.options.comparator.clone()),
            data: None,
            data_handle: None,
            error: None,
        }
    }

    /// Looks up the first entry with key `>= key` in the block that may hold
    /// it, skipping the block read when the filter rules the key out. Returns
    /// that entry (the caller checks whether its user key matches).
    pub fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.get_with(key, BlockReadOptions::default())
    }

    /// [`Table::get`], reading blocks as `read` says.
    pub fn get_with(
        &self,
        key: &[u8],
        read: BlockReadOptions,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.get_entry(key, read, |k, v| (k.to_vec(), v.to_vec()))
    }

    /// [`Table::get_with`] without copies: `found` sees the entry's key and
    /// value in place (LevelDB's `InternalGet` callback).
    pub fn get_entry<R>(
        &self,
        key: &[u8],
        read: BlockReadOptions,
        found: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>> {
        let mut index = self
            .inner
            .index_for_lookup()
            .iter(self.inner.options.comparator.clone());
        index.seek(key);
        if !index.valid() {
            index.status()?;
            return Ok(None);
        }
        let handle = BlockHandle::decode(index.value()).map_err(|e| self.index_error(e))?;
        if let Some(filter) = &self.inner.filter {
            if let Some(map) = self.inner.source.mapped() {
                // The block's lines load while the filter is probed.
                prefetch_mapped_block(map, handle);
            }
            if !filter.key_may_match(handle.offset, key) {
                return Ok(None);
            }
        }
        let block = self.read_data_block(handle, read)?;
        let mut iter = block.iter(self.inner.options.comparator.clone());
        iter.seek(key);
        if iter.valid() {
            return Ok(Some(found(iter.key(), iter.value())));
        }
        iter.status()
            .map_err(|e| e.at(&self.inner.name, handle.offset))?;
        Ok(None)
    }

    /// Offset in the file where the data for `key` would begin: for
    /// approximate sizes of key ranges.
    pub fn approximate_offset_of(&self, key: &[u8]) -> u64 {
        let mut index = self
            .inner
            .index_block()
            .iter(self.inner.options.comparator.clone());
        index.seek(key);
        if index.valid() {
            if let Ok(handle) = BlockHandle::decode(index.value()) {
                return handle.offset;
            }
        }
        // Past the last key (or unreadable index): the data ends near the
        // metaindex block.
        self.inner.metaindex_handle.offset
    }

    /// The handles of the table's data blocks, in order, from the index.
    pub fn block_handles(&self) -> Result<Vec<BlockHandle>> {
        let mut handles = Vec::new();
        let mut index = self.inner.index.iter(self.inner.options.comparator.clone());
        index.seek_to_first();
        while index.valid() {
            handles.push(BlockHandle::decode(index.value()).map_err(|e| self.index_error(e))?);
            index.next();
        }
        index.status().map_err(|e| self.index_error(e))?;
        Ok(handles)
    }

    /// Reads and decodes a data block, through the cache when there is one.
    pub fn read_data_block(&self, handle: BlockHandle, read: BlockReadOptions) -> Result<Block> {
        let inner = &self.inner;
        let verify = inner.options.verify_checksums || read.verify_checksums;
        // An uncompressed block of a mapped file is borrowed from the
        // mapping; caching it would only copy what the page cache holds
        // (LevelDB does not cache such blocks either).
        if let Some(map) = inner.source.mapped() {
            if mapped_block_is_uncompressed(map, handle) {
                let bytes = read_block_shared(
                    &*inner.source,
                    &inner.name,
                    inner.file_size,
                    handle,
                    verify,
                )?;
                return Block::new(bytes).map_err(|e| e.at(&inner.name, handle.offset));
            }
        }
        if let Some((cache, id)) = &inner.options.block_cache {
            if let Some(block) = cache.get(*id, handle.offset) {
                return Ok(block);
            }
        }
        // From a mapped file a compressed block is decompressed straight
        // out of the mapping, without first copying it into a buffer.
        let bytes =
            read_block_shared(&*inner.source, &inner.name, inner.file_size, handle, verify)?;
        let block = Block::new(bytes).map_err(|e| e.at(&inner.name, handle.offset))?;
        if let (Some((cache, id)), true) = (&inner.options.block_cache, read.fill_cache) {
            cache.insert(*id, handle.offset, block.clone());
        }
        Ok(block)
    }

    fn index_error(&self, err: Error) -> Error {
        err.at(&self.inner.name, self.inner.metaindex_handle.offset)
    }
}

impl TableInner {
    /// The filter block, if the table has one our policy can read. A damaged
    /// metaindex or filter is not fatal: LevelDB ignores it and so do we,
    /// since the filter only saves reads.
    /// The index block, with its search index once it is built.
    fn index_block(&self) -> &Block {
        self.searchable_index.get().unwrap_or(&self.index)
    }

    /// The index block for one more point lookup, building the search
    /// index at the lookup that makes [`SEARCH_INDEX_AFTER_LOOKUPS`].
    fn index_for_lookup(&self) -> &Block {
        if let Some(block) = self.searchable_index.get() {
            return block;
        }
        if self.index_lookups.fetch_add(1, Ordering::Relaxed) + 1 < SEARCH_INDEX_AFTER_LOOKUPS {
            return &self.index;
        }
        self.searchable_index.get_or_init(|| {
            self.index
                .clone()
                .with_search_index(&self.options.comparator)
        })
    }

    fn read_filter(&self, verify: bool) -> Result<Option<FilterBlockReader>> {
        let Some(policy) = &self.options.filter_policy else {
            return Ok(None);
        };
        let Ok(bytes) = read_block_shared(
            &*self.source,
            &self.name,
            self.file_size,
            self.metaindex_handle,
            verify,
        ) else {
            return Ok(None);
        };
        let Ok(meta) = Block::new(bytes) else {
            return Ok(None);
        };
        let key = format!("filter.{}", policy.name());
        let mut iter = meta.iter(Arc::new(crate::comparator::BytewiseComparator));
        iter.seek(key.as_bytes());
        if !iter.valid() || iter.key() != key.as_bytes() {
            return Ok(None);
        }
        let Ok(handle) = BlockHandle::decode(iter.value()) else {
            return Ok(None);
        };
        match read_block_shared(&*self.source, &self.name, self.file_size, handle, verify) {
            Ok(contents) => Ok(Some(FilterBlockReader::new(policy.clone(), contents))),
            Err(_) => Ok(None),
        }
    }
}

/// A cursor over a table: the index block picks the data block, a block
/// cursor walks it (LevelDB's two-level iterator).
#[derive(Debug)]
pub struct TableIter {
    read: BlockReadOptions,
    table: Table,
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: Option<BlockHandle>,
    error: Option<Error>,
}

impl TableIter {
    fn set_error(&mut self, err: Error) {
        if self.error.is_none() {
            self.error = Some(err);
        }
        self.data = None;
        self.data_handle = None;
    }

    /// Opens the data block the index cursor points at.
    fn init_data_block(&mut self) {
        if !self.index.valid() {
            self.data = None;
            self.data_handle = None;
            if let Err(err) = self.index.status() {
                let err = self.table.index_error(err);
                self.set_error(err);
            }
            return;
        }
        let handle = match BlockHandle::decode(self.index.value()) {
            Ok(h) => h,
            Err(err) => {
                let err = self.table.index_error(err);
                self.set_error(err);
                return;
            }
        };
        if self.data.is_some() && self.data_handle == Some(handle) {
            return;
        }
        match self.table.read_data_block(handle, self.read) {
            Ok(block) => {
                self.data = Some(block.iter(self.table.inner.options.comparator.clone()));
                self.data_handle = Some(handle);
            }
            Err(err) => self.set_error(err),
        }
    }

    fn check_data_status(&mut self) {
        if let (Some(data), Some(handle)) = (&self.data, self.data_handle) {
            if let Err(err) = data.status() {
                let err = err.at(&self.table.inner.name, handle.offset);
                self.set_error(err);
            }
        }
    }

    fn skip_empty_blocks_forward(&mut self) {
        loop {
            self.check_data_status();
            if self.error.is_some() {
                return;
            }
            if self.data.as_ref().is_some_and(|d| d.valid()) {
                return;
            }
            if !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.next();
            self.init_data_block();
            if let Some(data) = &mut self.data {
                data.seek_to_first();
            }
        }
    }

    fn skip_empty_blocks_backward(&mut self) {
        loop {
            self.check_data_status();
            if self.error.is_some() {
                return;
            }
            if self.data.as_ref().is_some_and(|d| d.valid()) {
                return;
            }
            if !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.prev();
            self.init_data_block();
            if let Some(data) = &mut self.data {
                data.seek_to_last();
            }
        }
    }
}

impl KvIterator for TableIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        self.error = None;
        self.index.seek_to_first();
        self.init_data_block();
        if let Some(data) = &mut self.data {
            data.seek_to_first();
        }
        self.skip_empty_blocks_forward();
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        self.index.seek_to_last();
        self.init_data_block();
        if let Some(data) = &mut self.data {
            data.seek_to_last();
        }
        self.skip_empty_blocks_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        self.index.seek(target);
        self.init_data_block();
        if let Some(data) = &mut self.data {
            data.seek(target);
        }
        self.skip_empty_blocks_forward();
    }

    fn next(&mut self) {
        if let Some(data) = &mut self.data {
            data.next();
            // Within a block (the common case) there is nothing to skip: a
            // block cursor that stopped on an error is not valid.
            if data.valid() {
                return;
            }
        }
        self.skip_empty_blocks_forward();
    }

    fn prev(&mut self) {
        if let Some(data) = &mut self.data {
            data.prev();
        }
        self.skip_empty_blocks_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(err) => Err(err.clone()),
            None => self.index.status(),
        }
    }
}
