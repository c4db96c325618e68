//! Open tables, bounded in number, and decoded data blocks, bounded in bytes.
//! Both on `quick_cache` (a concurrent, scan-resistant cache).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
    /// Tables whose index, metaindex and filter blocks passed their checks
    /// in an open since the database opened: an open after an eviction
    /// reads them unchecked ([`Table::reopen`]). A point read over a
    /// database of more tables than `max_open_files` reopens a table for
    /// most lookups, and checking its filter cost more than the rest of
    /// the lookup (a 50M x 32-byte database, 100 tables open: about half
    /// of each read's 55 µs was the copy and CRC of the filter).
    checked: Mutex<HashSet<u64>>,
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
            checked: Mutex::new(HashSet::new()),
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
        let wants_filter = options.filter_policy.is_some();
        let checked_before = !self.paranoid_checks && self.checked().contains(&number);
        if checked_before {
            return Table::reopen(source, file_size, &name, options);
        }
        let table = Table::open(source, file_size, &name, options)?;
        // A table whose filter failed its check (or is missing) is checked
        // again at every open, so that an unchecked reopen never trusts a
        // damaged filter to rule keys out.
        if table.has_filter() || !wants_filter {
            self.checked().insert(number);
        }
        Ok(table)
    }

    fn checked(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.checked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets table `number` (its file is being deleted).
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
        self.checked().remove(&number);
    }

    /// The block cache shared by all tables.
    pub fn block_cache(&self) -> &Arc<SharedBlockCache> {
        &self.block_cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{read_file, write_file, MemEnv};
    use crate::Options;
    use shale_format::bloom::BloomFilterPolicy;
    use shale_format::format::{Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
    use shale_format::internal_key::{append_internal_key, ValueType};
    use shale_format::table_builder::TableBuilder;

    fn table_options() -> TableOptions {
        Options {
            filter_policy: Some(Arc::new(BloomFilterPolicy::new(10))),
            ..Options::default()
        }
        .table_options()
    }

    fn key(i: u32) -> Vec<u8> {
        let mut key = Vec::new();
        append_internal_key(
            &mut key,
            format!("key{i:06}").as_bytes(),
            1,
            ValueType::Value,
        );
        key
    }

    /// Writes table `number` of 2,000 keys; returns its size.
    fn write_table(env: &MemEnv, dir: &Path, number: u64) -> u64 {
        let mut builder = TableBuilder::new(table_options(), Vec::new());
        for i in 0..2000 {
            builder.add(&key(i), b"value").unwrap();
        }
        let (bytes, size) = builder.finish().unwrap();
        write_file(env, &filename::table_file_name(dir, number), &bytes, false).unwrap();
        size
    }

    /// Flips the last byte of the filter block of table `number` (the byte
    /// before the trailer that precedes the metaindex block).
    fn damage_filter(env: &MemEnv, dir: &Path, number: u64) {
        let path = filename::table_file_name(dir, number);
        let mut bytes = read_file(env, &path).unwrap();
        let footer = Footer::decode(&bytes[bytes.len() - FOOTER_LEN..]).unwrap();
        let at = footer.metaindex_handle.offset as usize - BLOCK_TRAILER_LEN - 1;
        bytes[at] ^= 0x40;
        write_file(env, &path, &bytes, false).unwrap();
    }

    fn cache(env: &MemEnv, dir: &Path) -> TableCache {
        TableCache::new(
            dir,
            Arc::new(env.clone()),
            16,
            Arc::new(SharedBlockCache::new(1 << 20)),
            table_options(),
            false,
        )
    }

    #[test]
    fn a_reopened_table_reads_as_the_first_open_did() {
        let env = MemEnv::default();
        let dir = Path::new("/tables");
        let size = write_table(&env, dir, 7);
        let cache = cache(&env, dir);
        for round in 0..3 {
            let table = cache.table(7, size).unwrap();
            assert!(table.has_filter(), "round {round}");
            for i in (0..2000).step_by(97) {
                let (found, value) = table.get(&key(i)).unwrap().unwrap();
                assert_eq!((found, value), (key(i), b"value".to_vec()));
            }
            // Out of the cache of open tables, but still checked.
            cache.tables.remove(&7);
            assert!(cache.checked().contains(&7));
        }
        cache.evict(7);
        assert!(!cache.checked().contains(&7));
    }

    /// Without the check at every open, the second open would skip the
    /// CRC and read with the damaged filter.
    #[test]
    fn a_table_whose_filter_fails_its_check_is_checked_at_every_open() {
        let env = MemEnv::default();
        let dir = Path::new("/tables");
        let size = write_table(&env, dir, 3);
        damage_filter(&env, dir, 3);
        let cache = cache(&env, dir);
        for round in 0..3 {
            let table = cache.table(3, size).unwrap();
            assert!(
                !table.has_filter(),
                "round {round}: the damaged filter was used"
            );
            assert!(table.get(&key(1234)).unwrap().is_some());
            cache.tables.remove(&3);
            assert!(!cache.checked().contains(&3));
        }
    }
}
