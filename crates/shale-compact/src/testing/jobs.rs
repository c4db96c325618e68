//! Jobs for tests: one set of defaults, changed field by field with
//! struct-update syntax (`CompactionJob { output_level: 2, ..job(inputs) }`).

use shale_format::internal_key::{InternalKey, ValueType};

use crate::job::{CompactionJob, InputRun, JobFile};

/// A job over `inputs` writing level 1 with LevelDB's defaults (2 MiB
/// output files, 20 MiB of grandparent overlap): no grandparent, no
/// snapshot, no deeper level, default table settings, the whole key range.
pub fn job(inputs: Vec<InputRun>) -> CompactionJob {
    CompactionJob {
        id: 1,
        inputs,
        output_level: 1,
        max_output_file_size: 2 << 20,
        max_grandparent_overlap_bytes: 20 << 20,
        ..CompactionJob::default()
    }
}

/// Each file a level-0 run of its own, in order.
pub fn level0(files: impl IntoIterator<Item = JobFile>) -> Vec<InputRun> {
    files
        .into_iter()
        .map(|file| InputRun {
            level: 0,
            files: vec![file],
        })
        .collect()
}

/// File `number` of `size` bytes from user key `smallest` to `largest`,
/// both at sequence 1.
pub fn file(number: u64, size: u64, smallest: &[u8], largest: &[u8]) -> JobFile {
    JobFile {
        number,
        file_size: size,
        smallest: InternalKey::new(smallest, 1, ValueType::Value).into_encoded(),
        largest: InternalKey::new(largest, 1, ValueType::Value).into_encoded(),
    }
}
