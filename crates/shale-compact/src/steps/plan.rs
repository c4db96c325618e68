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

/// Where a block starting at some kept entry would end, and its size: what
/// the OpenCL executor's `block_ends` kernel computes for every kept entry
/// at once, so that choosing the blocks and files of a slice takes one step
/// per block instead of one per entry. `repr(C)`: read back as two `u32`
/// per entry, in this order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct BlockEnd {
    /// The block's end (exclusive): just after the first entry at which it
    /// is full ([`block_is_full`]), else at the first stop after its start,
    /// else at the end of the slice.
    pub end: u32,
    /// Its size at that end, as [`BlockSizer::estimate`] gives it.
    pub len: u32,
}

/// [`plan_boundaries_from_sizes`]'s plan, from every kept entry's
/// [`BlockEnd`] and the sorted kept entries a file must end before
/// (`stops`): the same rules, applied once per block. `None` when `ends`
/// cannot be what the rules give (an end before its start or past the
/// slice, a block cut where no stop is).
pub fn plan_boundaries_from_block_ends(
    ends: &[BlockEnd],
    stops: &[u32],
    state: &mut ScanState,
    job: &CompactionJob,
    last: bool,
) -> Option<(Vec<PlannedFile>, Range<usize>)> {
    let total = ends.len();
    let mut files = Vec::new();
    let mut current = PlannedFile::default();
    let mut stops = stops.iter().map(|&s| s as usize).peekable();
    let mut start = 0;
    while start < total {
        while stops.next_if(|&stop| stop < start).is_some() {}
        if stops.next_if_eq(&start).is_some() && state.file_open {
            current.finish = true;
            files.push(std::mem::take(&mut current));
            state.file_open = false;
            state.raw_data_bytes = 0;
        }
        state.file_open = true;
        let BlockEnd { end, len } = ends[start];
        let end = end as usize;
        if end <= start || end > total {
            return None;
        }
        if block_is_full(len as usize, job.table.block_size) {
            current.blocks.push(start..end);
            state.raw_data_bytes += u64::from(len);
            start = end;
            if output_file_full(state.raw_data_bytes, job.max_output_file_size) {
                current.finish = true;
                files.push(std::mem::take(&mut current));
                state.file_open = false;
                state.raw_data_bytes = 0;
            }
        } else if end < total {
            // Cut by a stop, which then ends the file.
            if stops.peek() != Some(&end) {
                return None;
            }
            current.blocks.push(start..end);
            start = end;
        } else {
            break;
        }
    }
    let mut carry = start..total;
    if last {
        if !carry.is_empty() {
            current.blocks.push(carry.clone());
            carry = total..total;
        }
        current.finish = state.file_open;
        state.file_open = false;
    }
    files.push(current);
    files.retain(|f| !f.blocks.is_empty() || f.finish);
    Some((files, carry))
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

    /// Asserts that two plans (files and carried entries, and the state
    /// each left) are the same.
    pub(crate) fn assert_same_plan(
        a: (&(Vec<PlannedFile>, Range<usize>), &ScanState),
        b: (&(Vec<PlannedFile>, Range<usize>), &ScanState),
    ) {
        let (((files_a, carry_a), state_a), ((files_b, carry_b), state_b)) = (a, b);
        assert_eq!(carry_a, carry_b);
        assert_eq!(
            (state_a.file_open, state_a.raw_data_bytes),
            (state_b.file_open, state_b.raw_data_bytes)
        );
        let shape = |files: &[PlannedFile]| -> Vec<(Vec<Range<usize>>, bool)> {
            files.iter().map(|f| (f.blocks.clone(), f.finish)).collect()
        };
        assert_eq!(shape(files_a), shape(files_b));
    }

    /// CPU twin of the device's `block_ends`: one [`BlockSizer`] per
    /// possible start.
    pub(crate) fn block_ends(
        sizes: &[EntrySize],
        stops: &[u32],
        job: &CompactionJob,
    ) -> Vec<BlockEnd> {
        let interval = job.table.block_restart_interval.max(1);
        (0..sizes.len())
            .map(|start| {
                let limit = stops
                    .iter()
                    .map(|&s| s as usize)
                    .find(|&s| s > start)
                    .unwrap_or(sizes.len());
                let mut block = BlockSizer::new();
                let mut end = start;
                while end < limit {
                    let size = sizes[end];
                    block.add(
                        interval,
                        size.shared as usize,
                        size.key_len as usize,
                        size.value_len as usize,
                    );
                    end += 1;
                    if block_is_full(block.estimate(), job.table.block_size) {
                        break;
                    }
                }
                BlockEnd {
                    end: end as u32,
                    len: block.estimate() as u32,
                }
            })
            .collect()
    }

    /// Random kept-entry sizes and stops (sorted kept indices).
    pub(crate) fn sizes_and_stops(state: &mut u64) -> (Vec<EntrySize>, Vec<u32>) {
        let n = (next(state) % 400) as usize;
        let sizes: Vec<EntrySize> = (0..n)
            .map(|j| {
                let key_len = 8 + (next(state) % 40) as u32;
                EntrySize {
                    key_len,
                    value_len: (next(state) % [4, 40, 300][(next(state) % 3) as usize]) as u32,
                    shared: if j == 0 {
                        0
                    } else {
                        (next(state) % u64::from(key_len + 1)) as u32
                    },
                }
            })
            .collect();
        let stops: Vec<u32> = (0..n as u32).filter(|_| next(state) % 23 == 0).collect();
        (sizes, stops)
    }

    #[test]
    fn block_ends_plan_equals_the_entry_scan() {
        let mut state = 17;
        for _ in 0..400 {
            let job = job(&mut state);
            let (sizes, stops) = sizes_and_stops(&mut state);
            let stop_flags: Vec<bool> = (0..sizes.len() as u32)
                .map(|j| stops.binary_search(&j).is_ok())
                .collect();
            let ends = block_ends(&sizes, &stops, &job);
            for last in [false, true] {
                for open in [false, true] {
                    let raw = if open { next(&mut state) % 3000 } else { 0 };
                    let mut a = ScanState {
                        file_open: open,
                        raw_data_bytes: raw,
                    };
                    let mut b = ScanState {
                        file_open: open,
                        raw_data_bytes: raw,
                    };
                    let plan_a =
                        plan_boundaries_from_sizes(&sizes, &stop_flags, &mut a, &job, last);
                    let plan_b = plan_boundaries_from_block_ends(&ends, &stops, &mut b, &job, last)
                        .expect("a well-formed plan");
                    assert_same_plan((&plan_a, &a), (&plan_b, &b));
                }
            }
        }
    }

    #[test]
    fn malformed_block_ends_are_refused() {
        let job = crate::testing::job(vec![]);
        let mut state = ScanState {
            file_open: false,
            raw_data_bytes: 0,
        };
        let backwards = [BlockEnd { end: 0, len: 10 }];
        assert!(plan_boundaries_from_block_ends(&backwards, &[], &mut state, &job, true).is_none());
        let past = [BlockEnd { end: 5, len: 10 }];
        assert!(plan_boundaries_from_block_ends(&past, &[], &mut state, &job, true).is_none());
        // A short block cut where no stop is.
        let cut = [BlockEnd { end: 1, len: 10 }, BlockEnd { end: 2, len: 10 }];
        assert!(plan_boundaries_from_block_ends(&cut, &[], &mut state, &job, true).is_none());
        assert!(plan_boundaries_from_block_ends(&cut, &[1], &mut state, &job, true).is_some());
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
