//! Merge: sorted runs into one order. Each run is already sorted; the output
//! is split into key ranges by splitter keys (co-ranking every run by binary
//! search, as merge path does for two runs), and the ranges are merged
//! independently and concatenated. Order is by internal key, ties (which
//! distinct entries never have) by run index.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rayon::prelude::*;
use shale_format::comparator::{bytewise_window, compare_internal_keys};
use shale_format::internal_key::extract_user_key;

use super::unpack::ParsedBlock;

/// One entry of a slice: which block and entry, plus the first 8 bytes of
/// its user key (big-endian, zero-padded) so most comparisons are one
/// integer comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item {
    /// First 8 bytes of the user key.
    pub prefix: u64,
    /// Index of the block in the slice.
    pub block: u32,
    /// Index of the entry in the block.
    pub entry: u32,
}

/// 8 bytes of the user key of `internal_key` from `offset` on, big-endian,
/// padded with zeros. When every key of a job shares its first `offset`
/// bytes, `prefix(a) < prefix(b)` implies `a < b` in internal-key order; the
/// offset skips a shared prefix (such as the zeros of db_bench's padded
/// decimal keys) that would make every prefix equal.
#[inline]
pub fn user_key_prefix(internal_key: &[u8], offset: usize) -> u64 {
    bytewise_window(
        extract_user_key(internal_key)
            .get(offset..)
            .unwrap_or_default(),
    )
}

/// The internal key of an item.
#[inline]
pub fn item_key<'a>(blocks: &'a [Arc<ParsedBlock>], item: &Item) -> &'a [u8] {
    blocks[item.block as usize].key(item.entry as usize)
}

/// Internal-key order of two items.
#[inline]
pub fn compare_items(blocks: &[Arc<ParsedBlock>], a: &Item, b: &Item) -> Ordering {
    match a.prefix.cmp(&b.prefix) {
        Ordering::Equal => compare_internal_keys(item_key(blocks, a), item_key(blocks, b)),
        other => other,
    }
}

/// Order of (item, run) pairs: key, then run index.
#[inline]
fn compare_in_runs(
    blocks: &[Arc<ParsedBlock>],
    a: &Item,
    a_run: usize,
    b: &Item,
    b_run: usize,
) -> Ordering {
    compare_items(blocks, a, b).then(a_run.cmp(&b_run))
}

/// Below this many items a single sequential merge is cheaper.
const PARALLEL_MERGE_MIN: usize = 1 << 14;

/// Merges sorted `runs` into one sorted vector, in parallel key ranges.
pub fn merge_runs(blocks: &[Arc<ParsedBlock>], mut runs: Vec<Vec<Item>>) -> Vec<Item> {
    runs.retain(|r| !r.is_empty());
    let total: usize = runs.iter().map(Vec::len).sum();
    match runs.len() {
        0 => return Vec::new(),
        1 => return runs.pop().unwrap_or_default(),
        _ => {}
    }
    let parts = if total < PARALLEL_MERGE_MIN {
        1
    } else {
        (rayon::current_num_threads() * 4)
            .min(total / (PARALLEL_MERGE_MIN / 4))
            .max(1)
    };
    // Splitters: evenly spaced items of the longest run.
    let (longest, longest_len) = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (i, r.len()))
        .max_by_key(|&(_, len)| len)
        .unwrap_or((0, 0));
    let mut cuts: Vec<Vec<usize>> = vec![vec![0; runs.len()]];
    for p in 1..parts {
        let splitter = runs[longest][longest_len * p / parts];
        let positions = runs
            .iter()
            .enumerate()
            .map(|(r, run)| {
                run.partition_point(|x| {
                    compare_in_runs(blocks, x, r, &splitter, longest) == Ordering::Less
                })
            })
            .collect();
        cuts.push(positions);
    }
    cuts.push(runs.iter().map(Vec::len).collect());
    let pieces: Vec<Vec<Item>> = (0..parts)
        .into_par_iter()
        .map(|p| {
            let ranges: Vec<&[Item]> = runs
                .iter()
                .enumerate()
                .map(|(r, run)| &run[cuts[p][r]..cuts[p + 1][r]])
                .collect();
            merge_sequential(blocks, &ranges)
        })
        .collect();
    let mut out = Vec::with_capacity(total);
    for piece in pieces {
        out.extend_from_slice(&piece);
    }
    out
}

struct HeapEntry<'a> {
    blocks: &'a [Arc<ParsedBlock>],
    item: Item,
    run: usize,
    position: usize,
}

impl PartialEq for HeapEntry<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for HeapEntry<'_> {}
impl PartialOrd for HeapEntry<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapEntry<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the smallest.
        compare_in_runs(self.blocks, &other.item, other.run, &self.item, self.run)
    }
}

/// A k-way heap merge of sorted ranges.
pub fn merge_sequential(blocks: &[Arc<ParsedBlock>], runs: &[&[Item]]) -> Vec<Item> {
    let total = runs.iter().map(|r| r.len()).sum();
    let mut out = Vec::with_capacity(total);
    let mut heap: BinaryHeap<HeapEntry<'_>> = runs
        .iter()
        .enumerate()
        .filter_map(|(run, items)| {
            items.first().map(|&item| HeapEntry {
                blocks,
                item,
                run,
                position: 0,
            })
        })
        .collect();
    while let Some(mut top) = heap.peek_mut() {
        out.push(top.item);
        let next = top.position + 1;
        match runs[top.run].get(next) {
            Some(&item) => {
                top.item = item;
                top.position = next;
            }
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
    }
    out
}
