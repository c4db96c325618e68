//! Versions built in memory for the compaction modules' unit tests.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::Arc;

use shale_format::internal_key::{InternalKey, ValueType};
use shale_format::version_edit::{FileMetaData, VersionEdit};

use crate::version::{FileMeta, Version, VersionBuilder};

/// A version of files given as (level, number, smallest, largest, size),
/// every key at sequence 100.
pub(crate) fn version(files: &[(usize, u64, &str, &str, u64)]) -> Version {
    let mut edit = VersionEdit::default();
    for &(level, number, smallest, largest, size) in files {
        edit.add_file(
            level,
            FileMetaData {
                number,
                file_size: size,
                smallest: InternalKey::new(smallest.as_bytes(), 100, ValueType::Value),
                largest: InternalKey::new(largest.as_bytes(), 100, ValueType::Value),
            },
        );
    }
    let mut builder = VersionBuilder::new(Arc::new(Version::default()));
    builder.apply(&edit).unwrap();
    builder.build().unwrap()
}

/// Default options with LevelDB's L0 triggers (4 files to compact, 8 to
/// slow writes, 12 to stop them), which the unit tests' versions are
/// drawn for.
pub(crate) fn leveldb_triggers() -> crate::options::Options {
    crate::options::Options {
        l0_compaction_trigger: 4,
        l0_slowdown_writes_trigger: 8,
        l0_stop_writes_trigger: 12,
        ..crate::options::Options::default()
    }
}

/// The files' numbers, sorted.
pub(crate) fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
    let mut n: Vec<u64> = files.iter().map(|f| f.number).collect();
    n.sort_unstable();
    n
}
