//! ShaleDB: an embeddable LSM-tree key-value store whose files are LevelDB
//! 1.23's and whose compaction is a plain-data job run by an executor (see
//! `docs/architecture.md`).
//!
//! Keys and values are byte strings. Keys are ordered bytewise unless
//! [`Options::comparator`] names another order. A [`DB`] is cheap to clone
//! and safe to share between threads; it closes when the last clone is
//! dropped.
//!
//! # A guided tour
//!
//! Every example below runs as a doctest, in a temporary directory.
//!
//! ## Open, put, get, delete
//!
//! [`DB::open`] opens a database directory ([`Options::create_if_missing`]
//! creates it). [`DB::put`], [`DB::get`] and [`DB::delete`] work on single
//! keys; [`WriteOptions::sync`] makes a write survive a machine crash, not
//! only a process crash.
//!
//! ```
//! use shale::{Options, ReadOptions, WriteOptions, DB};
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("db");
//! let db = DB::open(&path, Options { create_if_missing: true, ..Options::default() })?;
//!
//! db.put(&WriteOptions::default(), b"apple", b"red")?;
//! assert_eq!(db.get(&ReadOptions::new(), b"apple")?, Some(b"red".to_vec()));
//!
//! db.delete(&WriteOptions { sync: true }, b"apple")?;
//! assert_eq!(db.get(&ReadOptions::new(), b"apple")?, None);
//!
//! // Closing is dropping the last handle; the data stays.
//! drop(db);
//! let db = DB::open(&path, Options::default())?;
//! assert_eq!(db.get(&ReadOptions::new(), b"apple")?, None);
//! # Ok::<(), shale::Error>(())
//! ```
//!
//! ## Atomic batches
//!
//! A [`WriteBatch`] applied with [`DB::write`] lands all at once or not at
//! all, and its operations apply in order.
//!
//! ```
//! use shale::{Options, ReadOptions, WriteBatch, WriteOptions, DB};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
//! db.put(&WriteOptions::default(), b"balance/alice", b"10")?;
//!
//! let mut batch = WriteBatch::new();
//! batch.delete(b"balance/alice")?;
//! batch.put(b"balance/bob", b"10")?;
//! db.write(&WriteOptions::default(), batch)?;
//!
//! assert_eq!(db.get(&ReadOptions::new(), b"balance/alice")?, None);
//! assert_eq!(db.get(&ReadOptions::new(), b"balance/bob")?, Some(b"10".to_vec()));
//! # Ok::<(), shale::Error>(())
//! ```
//!
//! ## Iterating
//!
//! [`DB::iter`] opens a [`DbIterator`], a LevelDB-style cursor (seek, step
//! forward or back, read the key and value in place). [`range::entries`],
//! [`range::prefix`] and [`DbIterator::into_entries`] give a Rust
//! [`Iterator`] of owned `(key, value)` pairs instead.
//!
//! ```
//! use shale::{Options, ReadOptions, WriteOptions, DB};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
//! for (key, value) in [(b"k1", b"a"), (b"k2", b"b"), (b"k3", b"c")] {
//!     db.put(&WriteOptions::default(), key, value)?;
//! }
//!
//! // The cursor.
//! let mut cursor = db.iter(&ReadOptions::new())?;
//! cursor.seek(b"k2");
//! assert!(cursor.valid());
//! assert_eq!((cursor.key(), cursor.value()), (&b"k2"[..], &b"b"[..]));
//! cursor.next();
//! assert_eq!(cursor.key(), b"k3");
//! cursor.next();
//! assert!(!cursor.valid());
//! cursor.status()?; // at the end, not stopped by an error
//!
//! // An iterator of owned pairs, here backward over [k1, k3).
//! let lower: &[u8] = b"k1";
//! let upper: &[u8] = b"k3";
//! let pairs = shale::range::entries(&db, &ReadOptions::new(), lower..upper)?
//!     .rev()
//!     .collect::<shale::Result<Vec<_>>>()?;
//! assert_eq!(pairs, [(b"k2".to_vec(), b"b".to_vec()), (b"k1".to_vec(), b"a".to_vec())]);
//! # Ok::<(), shale::Error>(())
//! ```
//!
//! ## Snapshots
//!
//! [`DB::snapshot`] pins the database as it is now; reads through
//! [`ReadOptions::snapshot`] see that state whatever is written after.
//!
//! ```
//! use shale::{Options, ReadOptions, WriteOptions, DB};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
//! db.put(&WriteOptions::default(), b"version", b"1")?;
//!
//! let snapshot = db.snapshot();
//! db.put(&WriteOptions::default(), b"version", b"2")?;
//!
//! let at_snapshot = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::new() };
//! assert_eq!(db.get(&at_snapshot, b"version")?, Some(b"1".to_vec()));
//! assert_eq!(db.get(&ReadOptions::new(), b"version")?, Some(b"2".to_vec()));
//! # Ok::<(), shale::Error>(())
//! ```
//!
//! ## Compaction and properties
//!
//! Compaction runs in the background. [`DB::compact_range`] compacts a key
//! range (`None`: unbounded) down through the levels now, for example after
//! a bulk delete; [`DB::property`] and [`DB::statistics`] report on the
//! tree.
//!
//! ```
//! use shale::{Options, WriteOptions, DB};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
//! for i in 0..1000u32 {
//!     db.put(&WriteOptions::default(), format!("key{i:04}").as_bytes(), b"value")?;
//! }
//! db.compact_range(None, None)?;
//!
//! // After a full compaction nothing is left in level 0.
//! assert_eq!(db.property("shale.num-files-at-level0").as_deref(), Some("0"));
//! let table_files: usize = db.statistics().levels.iter().map(|level| level.files).sum();
//! assert!(table_files > 0);
//! assert!(db.property("shale.stats").is_some());
//! assert_eq!(db.property("no.such.property"), None);
//! # Ok::<(), shale::Error>(())
//! ```
//!
//! ## Errors and recovery
//!
//! Every fallible call returns [`Result`], whose [`Error`] says what went
//! wrong ([`Error::Corruption`], [`Error::Busy`] for a database held open
//! elsewhere, I/O errors, ...). [`repair()`] salvages what it can of a damaged
//! database, [`verify::verify_db`] checks one without opening it, and
//! [`destroy`] deletes one.
//!
//! ```
//! use shale::{Options, DB};
//! # let dir = tempfile::tempdir().unwrap();
//! let options = Options { create_if_missing: true, ..Options::default() };
//! let db = DB::open(dir.path(), options.clone())?;
//! // A second handle on the same directory is refused while the first lives.
//! assert!(matches!(DB::open(dir.path(), options.clone()), Err(shale::Error::Busy(_))));
//! drop(db);
//!
//! shale::verify::verify_db(dir.path(), &options)?;
//! shale::destroy(dir.path(), &options)?;
//! # Ok::<(), shale::Error>(())
//! ```
//!
//! # Modules
//!
//! The items above are at the crate root. [`options`], [`range`], [`env`](mod@env)
//! (the file system the engine uses, [`env::MemEnv`] for tests), [`stats`],
//! [`verify`] and [`repair`](mod@repair) hold the rest of the public API.
//! [`format`](mod@format) re-exports `shale-format` (the file formats) and
//! [`shale_compact`] the compaction executors. The hidden modules are
//! internals that the workspace's other crates (the CLI, the C and Python
//! bindings) and the benchmarks reach into; they are not a stable API.

#![warn(missing_docs)]

// Hidden modules: internals, public only because another crate of the
// workspace (or a benchmark of this one) uses them. Not a stable API.

// The info log (`LOG`). Hidden: shale-cli opens one (`InfoLog`).
#[doc(hidden)]
#[macro_use]
pub mod info_log;

// Compaction: the picker and the scheduler. Hidden: shale-cli reads
// `compaction::picker::PickStyle` and `compaction::scheduler::SchedulerCounts`.
#[doc(hidden)]
pub mod compaction;
// The database. Hidden: `DB` is re-exported at the root; shale-cli and
// this crate's tests use `db::executor_by_name` and `db::LevelStats`.
#[doc(hidden)]
pub mod db;
// File names in a database directory. Hidden: shale-cli and this crate's
// tests (`tests/repair.rs`) use them.
#[doc(hidden)]
pub mod filename;
// Crash-test kill points. Hidden: shale-cli reads `kill_point::ENABLED`.
#[doc(hidden)]
pub mod kill_point;
// The memtable. Hidden: this crate's `memtable_flush` benchmark uses it.
#[doc(hidden)]
pub mod memtable;
// The version (the set of live tables). Hidden: nothing outside the crate
// uses it, but `compaction::picker`'s public docs link to `Version`.
#[doc(hidden)]
pub mod version;
// The skip list under the memtable. Hidden: this crate's `skiplist_fill`
// benchmark uses it.
#[doc(hidden)]
pub mod skiplist;

pub(crate) mod db_iter;
pub mod env;
pub(crate) mod lock_order;
pub mod options;
pub mod range;
pub mod repair;
pub(crate) mod snapshot;
pub mod stats;
pub(crate) mod table_cache;
pub(crate) mod units;
pub mod verify;
pub(crate) mod version_set;

pub use db::{destroy, LevelStats, SchedulerStats, StallStats, StallTime, DB};
pub use db_iter::DbIterator;
pub use options::{
    CompactRangeOptions, ExecutorChoice, OpenClSettings, Options, ReadOptions, RemoteSettings,
    WriteOptions,
};
pub use range::Entries;
pub use repair::{repair, RepairReport};
pub use shale_compact;
pub use shale_compact::ExecutorKind;
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
