//! The boundary scan over integers only, for executors whose keys live
//! elsewhere (the OpenCL executor's keys stay on the device): the same block
//! and file rules as [`super::pack::plan_boundaries`], fed per kept entry
//! with its key length, value length and bytes shared with the previous
//! kept key. The tests check it, and the grandparent cut fed with
//! positions instead of keys, against their key-based forms.

use std::ops::Range;

use shale_format::table_builder::block_is_full;

use super::pack::{BlockSizer, PlannedFile, ScanState};
use crate::boundaries::output_file_full;
use crate::job::CompactionJob;

/// What the boundary scan needs of one kept entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntrySize {
    /// Length of the internal key.
    pub key_len: u32,
    /// Length of the value.
    pub value_len: u32,
    /// Bytes the key shares with the previous kept entry's key (0 for the
    /// first entry).
    pub shared: u32,
}

/// [`super::pack::plan_boundaries`] from sizes: where blocks and files end.
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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::boundaries::GrandparentCutter;
    use crate::job::{JobFile, TableSettings};
    use crate::parallel::pack::plan_boundaries;
    use crate::parallel::unpack::ParsedBlock;
    use shale_format::block_builder::shared_prefix_len;
    use shale_format::comparator::compare_internal_keys;
    use shale_format::internal_key::{InternalKey, ValueType};

    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn job(state: &mut u64) -> CompactionJob {
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
            id: 1,
            inputs: vec![],
            output_level: 1,
            max_output_file_size: [256, 2048, 1 << 20][(next(state) % 3) as usize],
            grandparents,
            max_grandparent_overlap_bytes: next(state) % 5000,
            smallest_snapshot: 0,
            deeper_levels: vec![],
            table: TableSettings {
                block_size: [64, 256, 4096][(next(state) % 3) as usize],
                block_restart_interval: 1 + (next(state) % 16) as usize,
                bloom_bits_per_key: None,
                snappy: false,
            },
            range: Default::default(),
        }
    }

    #[test]
    fn sizes_plan_equals_the_key_plan() {
        let mut state = 99;
        for _ in 0..300 {
            let job = job(&mut state);
            let n = (next(&mut state) % 300) as usize;
            let mut keys: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    InternalKey::new(
                        format!("k{:04}", next(&mut state) % 200).as_bytes(),
                        i as u64 + 1,
                        ValueType::Value,
                    )
                    .into_encoded()
                })
                .collect();
            keys.sort_by(|a, b| compare_internal_keys(a, b));
            let entries: Vec<(Vec<u8>, Vec<u8>)> = keys
                .iter()
                .map(|k| (k.clone(), vec![7; (next(&mut state) % 200) as usize]))
                .collect();
            let blocks = vec![Arc::new(ParsedBlock::from_entries(&entries))];
            let kept: Vec<(u32, u32)> = (0..n as u32).map(|e| (0, e)).collect();
            let stops: Vec<bool> = (0..n).map(|_| next(&mut state) % 17 == 0).collect();
            let sizes: Vec<EntrySize> = (0..n)
                .map(|j| EntrySize {
                    key_len: entries[j].0.len() as u32,
                    value_len: entries[j].1.len() as u32,
                    shared: if j == 0 {
                        0
                    } else {
                        shared_prefix_len(&entries[j - 1].0, &entries[j].0) as u32
                    },
                })
                .collect();
            for last in [false, true] {
                let mut a = ScanState {
                    file_open: false,
                    raw_data_bytes: 0,
                };
                let mut b = ScanState {
                    file_open: false,
                    raw_data_bytes: 0,
                };
                let (files_a, carry_a) =
                    plan_boundaries(&blocks, &kept, &stops, &mut a, &job, last);
                let (files_b, carry_b) =
                    plan_boundaries_from_sizes(&sizes, &stops, &mut b, &job, last);
                assert_eq!(carry_a, carry_b);
                assert_eq!(
                    (a.file_open, a.raw_data_bytes),
                    (b.file_open, b.raw_data_bytes)
                );
                let shape = |files: &[PlannedFile]| -> Vec<(Vec<Range<usize>>, bool)> {
                    files.iter().map(|f| (f.blocks.clone(), f.finish)).collect()
                };
                assert_eq!(shape(&files_a), shape(&files_b));
            }
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
