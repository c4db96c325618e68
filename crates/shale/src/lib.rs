//! ShaleDB: an embeddable LSM-tree key-value store whose files are LevelDB
//! 1.23's and whose compaction can run on CPU threads or an accelerator.
//!
//! Status: the engine (write path, recovery, versions, compaction scheduling)
//! arrives with the storage-engine issue. Today this crate re-exports the
//! on-disk formats so that tools can already read LevelDB files.

pub use shale_compact;
pub use shale_format as format;
