//! Open tables, bounded in number, and decoded data blocks, bounded in bytes.
//! Both on `quick_cache` (a concurrent, scan-resistant cache).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;
use shale_format::block::Block;
use shale_format::options::TableOptions;
use shale_format::table::{BlockCache, ReadTableOptions, Table};
use shale_format::{Error, Result};

use crate::env::Env;
use crate::filename;

#[derive(Clone)]
struct BlockWeighter;

impl Weighter<(u64, u64), Block> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Block) -> u64 {
        block.size() as u64 + 64
    }
}

/// Decoded data blocks keyed by (table number, block offset).
pub struct SharedBlockCache {
    cache: Cache<(u64, u64), Block, BlockWeighter>,
}

impl SharedBlockCache {
    /// A cache holding about `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: usize) -> SharedBlockCache {
        let estimated_items = (capacity_bytes / 4096).max(16);
        SharedBlockCache {
            cache: Cache::with_weighter(
                estimated_items,
                capacity_bytes.max(1) as u64,
                BlockWeighter,
            ),
        }
    }

    /// Bytes currently cached.
    pub fn usage(&self) -> u64 {
        self.cache.weight()
    }
}

impl BlockCache for SharedBlockCache {
    fn get(&self, table_id: u64, offset: u64) -> Option<Block> {
        self.cache.get(&(table_id, offset))
    }

    fn insert(&self, table_id: u64, offset: u64, block: Block) {
        self.cache.insert((table_id, offset), block);
    }
}

impl std::fmt::Debug for SharedBlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBlockCache")
            .field("usage", &self.usage())
            .finish()
    }
}

/// Open tables by file number.
pub struct TableCache {
    dir: PathBuf,
    env: Arc<dyn Env>,
    tables: Cache<u64, Table>,
    block_cache: Arc<SharedBlockCache>,
    /// How the tables are read: the key order and the filter policy.
    table_options: TableOptions,
    paranoid_checks: bool,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("dir", &self.dir)
            .field("open", &self.tables.len())
            .finish()
    }
}

impl TableCache {
    /// A cache of at most `max_open` tables of the database in `dir`, read
    /// with `table_options`' key order and filter policy
    /// ([`Options::table_options`](crate::Options::table_options)).
    pub fn new(
        dir: &Path,
        env: Arc<dyn Env>,
        max_open: usize,
        block_cache: Arc<SharedBlockCache>,
        table_options: TableOptions,
        paranoid_checks: bool,
    ) -> TableCache {
        TableCache {
            dir: dir.to_path_buf(),
            env,
            tables: Cache::new(max_open.max(1)),
            block_cache,
            table_options,
            paranoid_checks,
        }
    }

    /// The table `number` of `file_size` bytes, opened if needed. Tables
    /// written by older LevelDB releases as `.sst` are found too.
    pub fn table(&self, number: u64, file_size: u64) -> Result<Table> {
        if let Some(table) = self.tables.get(&number) {
            return Ok(table);
        }
        let table = self.open(number, file_size)?;
        self.tables.insert(number, table.clone());
        Ok(table)
    }

    fn open(&self, number: u64, file_size: u64) -> Result<Table> {
        let mut path = filename::table_file_name(&self.dir, number);
        let source = match self.env.new_random_access_file(&path) {
            Ok(source) => source,
            Err(Error::NotFound(_)) => {
                path = filename::sst_table_file_name(&self.dir, number);
                self.env
                    .new_random_access_file(&path)
                    .map_err(|e| match e {
                        Error::NotFound(_) => {
                            Error::corruption(0, "table file named in the MANIFEST is missing").at(
                                &filename::table_file_name(&self.dir, number)
                                    .display()
                                    .to_string(),
                                0,
                            )
                        }
                        other => other,
                    })?
            }
            Err(other) => return Err(other),
        };
        let name = path.display().to_string();
        let mut options = ReadTableOptions::from_table_options(&self.table_options);
        // Data blocks are checked as each read asks (ReadOptions), and
        // always with paranoid checks; the table checks its index and
        // filter blocks when it opens.
        options.verify_checksums = self.paranoid_checks;
        options.block_cache = Some((self.block_cache.clone() as Arc<dyn BlockCache>, number));
        Table::open(source, file_size, &name, options)
    }

    /// Forgets table `number` (its file is being deleted).
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
    }

    /// The block cache shared by all tables.
    pub fn block_cache(&self) -> &Arc<SharedBlockCache> {
        &self.block_cache
    }
}
