//! A real LevelDB database: to produce logs, MANIFESTs and tables written by
//! LevelDB itself, and to read databases written by ShaleDB.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::flat::FlatBytes;
use crate::table::check_bloom_bits;
use crate::{backend, path_str, Entry, Error};

/// The `leveldb::Options` a [`Db`] is opened with. The default mirrors
/// LevelDB's own defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbOptions {
    /// Create the database if it does not exist.
    pub create_if_missing: bool,
    /// Fail if the database already exists.
    pub error_if_exists: bool,
    /// Treat any corruption LevelDB notices as an error.
    pub paranoid_checks: bool,
    /// Memtable size at which it is written out as a level-0 table.
    pub write_buffer_size: usize,
    /// Size at which compaction output is cut into a new table.
    pub max_file_size: usize,
    /// Uncompressed size at which a data block is cut.
    pub block_size: usize,
    /// Keys between restart points in a block.
    pub block_restart_interval: i32,
    /// `Some(bits)` uses `NewBloomFilterPolicy(bits)`; must not be negative.
    pub bloom_bits_per_key: Option<i32>,
    /// Snappy-compress table blocks.
    pub snappy: bool,
    /// Number of files LevelDB may keep open (its table cache size).
    pub max_open_files: i32,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            create_if_missing: true,
            error_if_exists: false,
            paranoid_checks: false,
            write_buffer_size: 4 << 20,
            max_file_size: 2 << 20,
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: None,
            snappy: true,
            max_open_files: 1000,
        }
    }
}

/// An open LevelDB database; dropping it closes the database.
///
/// Writes take `&mut self` to keep tests simple, though LevelDB itself allows
/// concurrent writers. Reads verify block checksums.
pub struct Db {
    handle: backend::DbHandle,
    path: PathBuf,
}

impl fmt::Debug for Db {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Db {
    /// Opens (or, with `create_if_missing`, creates) the database at `path`.
    pub fn open(path: &Path, opts: &DbOptions) -> Result<Db, Error> {
        check_bloom_bits(opts.bloom_bits_per_key)?;
        let handle = backend::DbHandle::open(path_str(path)?, opts)?;
        Ok(Db {
            handle,
            path: path.to_path_buf(),
        })
    }

    /// Sets `key` to `value`; with `sync`, the log is synced before returning.
    pub fn put(&mut self, key: &[u8], value: &[u8], sync: bool) -> Result<(), Error> {
        self.write(&[(key, Some(value))], sync)
    }

    /// Deletes `key` (writes a tombstone, whether or not the key exists).
    pub fn delete(&mut self, key: &[u8], sync: bool) -> Result<(), Error> {
        self.write(&[(key, None)], sync)
    }

    /// Applies `ops` as one `WriteBatch`, atomically and in order:
    /// `(key, Some(value))` puts, `(key, None)` deletes.
    pub fn write(&mut self, ops: &[(&[u8], Option<&[u8]>)], sync: bool) -> Result<(), Error> {
        let mut batch = Batch::default();
        for &(key, value) in ops {
            batch.keys.push(key)?;
            batch.values.push(value.unwrap_or_default())?;
            batch.is_put.push(u8::from(value.is_some()));
        }
        self.handle.write(&batch, sync)
    }

    /// The value of `key`, or `None` if it is absent or deleted.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.handle.get(key)
    }

    /// Every live entry in key order, by one forward iteration. Fails if the
    /// iterator stops on an error rather than at the end.
    pub fn scan_all(&self) -> Result<Vec<Entry>, Error> {
        self.handle.scan_all()
    }

    /// `DB::CompactRange(begin, end)`: compacts every level overlapping the
    /// range, `None` meaning unbounded. Returns when the compaction is done.
    pub fn compact_range(&mut self, begin: Option<&[u8]>, end: Option<&[u8]>) {
        self.handle.compact_range(begin, end);
    }

    /// `DB::GetProperty(name)`, e.g. `"leveldb.stats"`,
    /// `"leveldb.num-files-at-level0"` or `"leveldb.sstables"`; `None` for a
    /// name LevelDB does not know.
    pub fn property(&self, name: &str) -> Option<String> {
        self.handle.property(name)
    }
}

/// A write batch packed for the shim: entry `i` puts `values[i]` at `keys[i]`
/// when `is_put[i]` is 1, and deletes `keys[i]` when it is 0.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) keys: FlatBytes,
    pub(crate) values: FlatBytes,
    pub(crate) is_put: Vec<u8>,
}
