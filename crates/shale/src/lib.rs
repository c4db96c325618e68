//! ShaleDB: an embeddable LSM-tree key-value store whose files are LevelDB
//! 1.23's and whose compaction is a plain-data job run by an executor (see
//! `docs/architecture.md`).
//!
//! ```no_run
//! use shale::{DB, Options, ReadOptions, WriteOptions};
//! let db = DB::open("/tmp/example-db", Options { create_if_missing: true, ..Options::default() })?;
//! db.put(&WriteOptions::default(), b"key", b"value")?;
//! assert_eq!(db.get(&ReadOptions::new(), b"key")?, Some(b"value".to_vec()));
//! # Ok::<(), shale::Error>(())
//! ```

#[macro_use]
pub mod info_log;

pub mod compaction;
pub mod db;
pub mod db_iter;
pub mod env;
pub mod filename;
pub mod kill_point;
pub(crate) mod lock_order;
pub mod memtable;
pub mod options;
pub mod range;
pub mod repair;
pub mod skiplist;
pub mod snapshot;
pub mod stats;
pub mod table_cache;
pub mod verify;
pub mod version;
pub mod version_set;

pub use db::{destroy, SchedulerStats, StallStats, DB};
pub use db_iter::DbIterator;
pub use options::{CompactRangeOptions, Options, ReadOptions, WriteOptions};
pub use range::Entries;
pub use repair::{repair, RepairReport};
pub use shale_compact;
pub use shale_format as format;
pub use shale_format::write_batch::WriteBatch;
pub use shale_format::{Error, Result};
pub use snapshot::Snapshot;
pub use stats::Statistics;

/// The README's Rust program, compiled and run as a doctest so the quick
/// start stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeQuickStart;
