//! The boundary scan: where output blocks and files end, over integers
//! only, with the same rules the table builder applies one entry at a time.
//! Fed per kept entry with its key length, value length and bytes shared
//! with the previous kept key, so it serves executors whose keys live
//! elsewhere too (the OpenCL executor's keys stay on the device);
//! `parallel`'s pack computes those sizes from its keys. The tests check
//! the scan against the table builder's key-based form (in `pack.rs`), and
//! the grandparent cut fed with positions against its key-based form.

use std::ops::Range;

use shale_format::coding::varint_length;
use shale_format::table_builder::block_is_full;

use crate::boundaries::output_file_full;
use crate::job::CompactionJob;

/// What the boundary scan needs of one kept entry. `repr(C)`: the device
/// path reads these back as three `u32` per entry, in this order, and
/// takes the downloaded array as they are (`opencl::pack`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct EntrySize {
    /// Length of the internal key.
    pub key_len: u32,
    /// Length of the value.
    pub value_len: u32,
    /// Bytes the key shares with the previous kept entry's key (0 for the
    /// first entry).
    pub shared: u32,
}

/// The size bookkeeping of a `BlockBuilder`, without the bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockSizer {
    buffer: usize,
    restarts: usize,
    since_restart: usize,
    pub(crate) entries: usize,
}

impl BlockSizer {
    pub(crate) fn new() -> BlockSizer {
        BlockSizer {
            buffer: 0,
            restarts: 1,
            since_restart: 0,
            entries: 0,
        }
    }

    /// Adds an entry whose key shares `shared_with_previous` bytes with the
    /// previous entry of the stream.
    #[inline]
    pub(crate) fn add(
        &mut self,
        restart_interval: usize,
        shared_with_previous: usize,
        key_len: usize,
        value_len: usize,
    ) {
        let shared = if self.since_restart >= restart_interval {
            self.restarts += 1;
            self.since_restart = 0;
            0
        } else if self.entries == 0 {
            0
        } else {
            shared_with_previous
        };
        let non_shared = key_len - shared;
        self.buffer += varint_length(shared as u64)
            + varint_length(non_shared as u64)
            + varint_length(value_len as u64)
            + non_shared
            + value_len;
        self.since_restart += 1;
        self.entries += 1;
    }

    #[inline]
    pub(crate) fn estimate(&self) -> usize {
        self.buffer + self.restarts * 4 + 4
    }
}

/// One output file's share of a slice: complete blocks (ranges into the
/// kept list) and whether the file ends in this slice.
#[derive(Debug, Default)]
pub struct PlannedFile {
    /// Data blocks, as ranges of the kept list.
    pub blocks: Vec<Range<usize>>,
    /// The file ends after these blocks.
    pub finish: bool,
}

/// The block/file state carried from one slice to the next.
#[derive(Debug)]
pub struct ScanState {
    /// A file is open (it has at least one entry).
    pub file_open: bool,
    /// Uncompressed bytes of the open file's finished data blocks.
    pub raw_data_bytes: u64,
}

/// Where blocks and files end, from the kept entries' sizes.
/// `stops[j]` is true when the file must end before kept entry `j`.
pub fn plan_boundaries_from_sizes(
    sizes: &[EntrySize],
    stops: &[bool],
    state: &mut ScanState,
    job: &CompactionJob,
    last: bool,
) -> (Vec<PlannedFile>, Range<usize>) {
    let restart_interval = job.table.block_restart_interval.max(1);
    let block_size = job.table.block_size;
    let mut files = Vec::new();
    let mut current = PlannedFile::default();
    let mut block = BlockSizer::new();
    let mut block_start = 0;
    for (j, size) in sizes.iter().enumerate() {
        if stops[j] && state.file_open {
            if block.entries > 0 {
                current.blocks.push(block_start..j);
            }
            current.finish = true;
            files.push(std::mem::take(&mut current));
            state.file_open = false;
            state.raw_data_bytes = 0;
            block = BlockSizer::new();
            block_start = j;
        }
        state.file_open = true;
        block.add(
            restart_interval,
            size.shared as usize,
            size.key_len as usize,
            size.value_len as usize,
        );
        if block_is_full(block.estimate(), block_size) {
            current.blocks.push(block_start..j + 1);
            state.raw_data_bytes += block.estimate() as u64;
            block = BlockSizer::new();
            block_start = j + 1;
            if output_file_full(state.raw_data_bytes, job.max_output_file_size) {
                current.finish = true;
                files.push(std::mem::take(&mut current));
                state.file_open = false;
                state.raw_data_bytes = 0;
            }
        }
    }
    let mut carry = block_start..sizes.len();
    if last {
        if block.entries > 0 {
            current.blocks.push(carry.clone());
            carry = sizes.len()..sizes.len();
        }
        current.finish = state.file_open;
        state.file_open = false;
    }
    files.push(current);
    files.retain(|f| !f.blocks.is_empty() || f.finish);
    (files, carry)
}

/// True when the job's grandparent files are in increasing order of their
/// largest keys, which [`crate::boundaries::GrandparentCutter::should_stop_before_position`]
/// needs to agree with its key-based form (files of one level always are).
pub fn grandparents_in_order(job: &CompactionJob) -> bool {
    job.grandparents.windows(2).all(|w| {
        shale_format::comparator::compare_internal_keys(&w[0].largest, &w[1].largest).is_lt()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::boundaries::GrandparentCutter;
    use crate::job::{JobFile, TableSettings};
    use shale_format::comparator::compare_internal_keys;
    use shale_format::internal_key::{InternalKey, ValueType};

    pub(crate) fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// A random job shape: grandparents, file and block sizes.
    pub(crate) fn job(state: &mut u64) -> CompactionJob {
        let mut grandparents = Vec::new();
        let mut at = 0;
        for _ in 0..next(state) % 8 {
            at += 1 + next(state) % 30;
            let smallest = format!("k{at:04}");
            at += next(state) % 20;
            let largest = format!("k{at:04}");
            grandparents.push(JobFile {
                number: 0,
                file_size: 1 + next(state) % 3000,
                smallest: InternalKey::new(smallest.as_bytes(), 1, ValueType::Value).into_encoded(),
                largest: InternalKey::new(largest.as_bytes(), 1, ValueType::Value).into_encoded(),
            });
        }
        CompactionJob {
            max_output_file_size: [256, 2048, 1 << 20][(next(state) % 3) as usize],
            grandparents,
            max_grandparent_overlap_bytes: next(state) % 5000,
            table: TableSettings {
                block_size: [64, 256, 4096][(next(state) % 3) as usize],
                block_restart_interval: 1 + (next(state) % 16) as usize,
                bloom_bits_per_key: None,
                snappy: false,
            },
            ..crate::testing::job(vec![])
        }
    }

    #[test]
    fn index_cutter_equals_the_key_cutter() {
        let mut state = 5;
        for _ in 0..300 {
            let job = job(&mut state);
            assert!(grandparents_in_order(&job));
            let mut keys: Vec<Vec<u8>> = (0..next(&mut state) % 100)
                .map(|i| {
                    InternalKey::new(
                        format!("k{:04}", next(&mut state) % 300).as_bytes(),
                        i + 1,
                        ValueType::Value,
                    )
                    .into_encoded()
                })
                .collect();
            keys.sort_by(|a, b| compare_internal_keys(a, b));
            let mut by_key = GrandparentCutter::new(&job);
            let mut by_index = GrandparentCutter::new(&job);
            for key in &keys {
                let passed = job
                    .grandparents
                    .partition_point(|g| compare_internal_keys(key, &g.largest).is_gt());
                assert_eq!(
                    by_key.should_stop_before(key),
                    by_index.should_stop_before_position(passed)
                );
            }
        }
    }
}
