//! Merge: sorted runs into one order. Each run is already sorted; the output
//! is split into key ranges by splitter keys (co-ranking every run by binary
//! search, as merge path does for two runs), and the ranges are merged
//! independently and concatenated. Order is by internal key, ties (which
//! distinct entries never have) by run index.
//!
//! The executor fuses the phases that follow the merge into it
//! ([`merge_and_decide`]): as each entry comes out of the heap, while its
//! key is in cache, the gc decision (`crate::gc::keep_entry`), its size for
//! the boundary scan and the grandparents it passes are taken, so the
//! merged order is never materialised.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rayon::prelude::*;
use shale_format::block_builder::shared_prefix_len;
use shale_format::comparator::compare_internal_keys;
use shale_format::internal_key::{ParsedInternalKey, SequenceNumber};
use shale_format::{Error, Result};

use super::Buffers;
use crate::gc::{is_base_level_for, keep_entry};
use crate::job::CompactionJob;
use crate::steps::plan::EntrySize;
use crate::steps::unpack::ParsedBlock;

/// A kept entry: block and entry index in the slice.
pub type Kept = (u32, u32);

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

/// A k-way heap merge of sorted ranges into one vector (the reference the
/// twins' tests check the device's rank merge against).
#[cfg(test)]
pub fn merge_sequential(blocks: &[Arc<ParsedBlock>], runs: &[&[Item]]) -> Vec<Item> {
    let total = runs.iter().map(|r| r.len()).sum();
    let mut out = Vec::with_capacity(total);
    merge_visit(blocks, runs, |item| {
        out.push(item);
        Ok(())
    })
    .unwrap_or_default();
    out
}

/// A k-way heap merge of sorted ranges, handing each item to `visit` in
/// order; stops at `visit`'s first error.
fn merge_visit(
    blocks: &[Arc<ParsedBlock>],
    runs: &[&[Item]],
    mut visit: impl FnMut(Item) -> Result<()>,
) -> Result<()> {
    if let [run] = runs {
        return run.iter().try_for_each(|&item| visit(item));
    }
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
        visit(top.item)?;
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
    Ok(())
}

/// What [`merge_and_decide`] makes of one key range of a slice.
#[derive(Debug, Default)]
pub struct DecidedPiece {
    /// The entries gc keeps, in order.
    pub kept: Vec<Kept>,
    /// Their sizes for the boundary scan; the first one's `shared` is with
    /// the piece's own previous kept entry only (0 here), and is fixed up
    /// by the caller, who knows the kept entries before the piece.
    pub sizes: Vec<EntrySize>,
    /// For the grandparent cut: (kept entries of the piece before the
    /// merged entry, grandparent files its key is past), for the piece's
    /// first merged entry and each one that passes another grandparent
    /// (the cutter can only stop where that count changes).
    pub passes: Vec<(u32, u32)>,
    /// The last merged entry, kept or not.
    pub last: Option<Item>,
}

fn parse_key(key: &[u8]) -> Result<ParsedInternalKey<'_>> {
    ParsedInternalKey::parse(key)
        .map_err(|e| Error::corruption(0, format!("compaction input has a bad internal key: {e}")))
}

/// The merge fused with gc, the boundary scan's sizes and the grandparent
/// positions: merges `runs` in key ranges in parallel and, per range,
/// decides each entry as it comes out of the heap.
/// `previous` is the entry before the first one (from the slice before),
/// as `(user key, sequence)`.
pub fn merge_and_decide(
    blocks: &[Arc<ParsedBlock>],
    runs: &[Vec<Item>],
    previous: Option<(&[u8], SequenceNumber)>,
    job: &CompactionJob,
    buffers: &Buffers,
) -> Result<Vec<DecidedPiece>> {
    let runs: Vec<&[Item]> = runs
        .iter()
        .filter(|r| !r.is_empty())
        .map(Vec::as_slice)
        .collect();
    let total: usize = runs.iter().map(|r| r.len()).sum();
    if total == 0 {
        return Ok(Vec::new());
    }
    let cuts = piece_cuts(blocks, &runs, total);
    let parts = cuts.len() - 1;
    (0..parts)
        .into_par_iter()
        .map(|p| {
            let ranges: Vec<&[Item]> = runs
                .iter()
                .enumerate()
                .map(|(r, run)| &run[cuts[p][r]..cuts[p + 1][r]])
                .collect();
            // The entry before the piece: the largest of those before its
            // start in every run.
            let before = if p == 0 {
                previous
            } else {
                runs.iter()
                    .enumerate()
                    .filter(|&(r, _)| cuts[p][r] > 0)
                    .map(|(r, run)| (run[cuts[p][r] - 1], r))
                    .max_by(|a, b| compare_in_runs(blocks, &a.0, a.1, &b.0, b.1))
                    .map(|(item, _)| {
                        let key = item_key(blocks, &item);
                        let parsed = parse_key(key)?;
                        Ok::<_, Error>((parsed.user_key, parsed.sequence))
                    })
                    .transpose()?
            };
            decide_piece(blocks, &ranges, before, job, buffers)
        })
        .collect()
}

/// Per run, where each piece starts (and, last, the run lengths): pieces
/// split at evenly spaced items of the longest run.
fn piece_cuts(blocks: &[Arc<ParsedBlock>], runs: &[&[Item]], total: usize) -> Vec<Vec<usize>> {
    let parts = if total < PARALLEL_MERGE_MIN {
        1
    } else {
        (rayon::current_num_threads() * 4)
            .min(total / (PARALLEL_MERGE_MIN / 4))
            .max(1)
    };
    let (longest, longest_len) = runs
        .iter()
        .enumerate()
        .map(|(i, r)| (i, r.len()))
        .max_by_key(|&(_, len)| len)
        .unwrap_or((0, 0));
    let mut cuts: Vec<Vec<usize>> = vec![vec![0; runs.len()]];
    for p in 1..parts {
        let splitter = runs[longest][longest_len * p / parts];
        cuts.push(
            runs.iter()
                .enumerate()
                .map(|(r, run)| {
                    run.partition_point(|x| {
                        compare_in_runs(blocks, x, r, &splitter, longest) == Ordering::Less
                    })
                })
                .collect(),
        );
    }
    cuts.push(runs.iter().map(|r| r.len()).collect());
    cuts
}

/// Merges one piece and decides each entry (see [`DecidedPiece`]).
fn decide_piece<'b>(
    blocks: &'b [Arc<ParsedBlock>],
    ranges: &[&[Item]],
    mut previous: Option<(&'b [u8], SequenceNumber)>,
    job: &CompactionJob,
    buffers: &Buffers,
) -> Result<DecidedPiece> {
    let total: usize = ranges.iter().map(|r| r.len()).sum();
    let mut piece = DecidedPiece {
        kept: buffers.kept.take(),
        sizes: buffers.sizes.take(),
        ..DecidedPiece::default()
    };
    piece.kept.clear();
    piece.sizes.clear();
    piece.kept.reserve(total);
    piece.sizes.reserve(total);
    let grandparents = &job.grandparents;
    let mut passed: Option<usize> = None;
    let mut previous_kept: &[u8] = &[];
    merge_visit(blocks, ranges, |item| {
        let key = item_key(blocks, &item);
        let entry = parse_key(key)?;
        // Grandparents: a binary search for the piece's first entry, then
        // a cursor that only moves forward.
        let at = match passed {
            None => {
                grandparents.partition_point(|g| compare_internal_keys(key, &g.largest).is_gt())
            }
            Some(mut at) => {
                while at < grandparents.len()
                    && compare_internal_keys(key, &grandparents[at].largest).is_gt()
                {
                    at += 1;
                }
                at
            }
        };
        if passed != Some(at) {
            piece.passes.push((piece.kept.len() as u32, at as u32));
            passed = Some(at);
        }
        if keep_entry(&entry, previous, job.smallest_snapshot, |k| {
            is_base_level_for(&job.deeper_levels, k)
        }) {
            let block = &blocks[item.block as usize];
            piece.sizes.push(EntrySize {
                key_len: key.len() as u32,
                value_len: block.entries[item.entry as usize].value_len,
                shared: if piece.kept.is_empty() {
                    0
                } else {
                    shared_prefix_len(previous_kept, key) as u32
                },
            });
            piece.kept.push((item.block, item.entry));
            previous_kept = key;
        }
        previous = Some((entry.user_key, entry.sequence));
        piece.last = Some(item);
        Ok(())
    })?;
    Ok(piece)
}
