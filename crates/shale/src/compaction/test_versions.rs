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

/// The files' numbers, sorted.
pub(crate) fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
    let mut n: Vec<u64> = files.iter().map(|f| f.number).collect();
    n.sort_unstable();
    n
}
