//! Keys-only compaction (ProckStore section 3.5, key-value separation) as
//! three pure steps, so that the protocol in `server` and `client` only
//! moves their results:
//!
//! 1. [`unpack`] (the data side, which holds the tables): every entry of
//!    each input run within the job's range, keys and values apart.
//! 2. [`merge_order`] (the key side): merges the runs' keys, decides what
//!    garbage collection drops and where the grandparent cut closes a file,
//!    and returns one [`code`] per key.
//! 3. [`pack`] (the data side): writes the kept entries, with their values,
//!    in that order, cutting files by size as the reference does.
//!
//! Composed, they write exactly the tables `streaming` writes: the same
//! entries reach the same [`TablePacker`] with the same cuts.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use shale_format::comparator::compare_internal_keys;
use shale_format::internal_key::{
    extract_user_key, InternalKey, ParsedInternalKey, ValueType, MAX_SEQUENCE_NUMBER,
};
use shale_format::iterator::KvIterator;
use shale_format::{Error, Result};

use crate::boundaries::GrandparentCutter;
use crate::gc::GcDecider;
use crate::job::{CompactionJob, CompactionOutput, JobIo};
use crate::streaming::{open_input_table, TablePacker};

/// Name the keys-only path reports as its executor.
pub const KEYS_ONLY: &str = "keys-only";

/// One input run's entries within the job's range, in the run's order.
#[derive(Debug, Default)]
pub struct RunEntries {
    /// The internal keys.
    pub keys: Vec<Vec<u8>>,
    /// The values, back to back; value `i` ends at `value_ends[i]`.
    values: Vec<u8>,
    value_ends: Vec<usize>,
}

impl RunEntries {
    /// The value of entry `i`.
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        let end = *self.value_ends.get(i)?;
        let start = if i == 0 { 0 } else { self.value_ends[i - 1] };
        self.values.get(start..end)
    }

    /// Entries in the run.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when the run holds no entry of the range.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Step 1: the entries of every input run (one [`RunEntries`] per run of
/// `job.inputs`, empty when none of its files is in the range).
pub fn unpack(job: &CompactionJob, io: &dyn JobIo) -> Result<Vec<RunEntries>> {
    let mut runs = Vec::with_capacity(job.inputs.len());
    for run in &job.inputs {
        let mut entries = RunEntries::default();
        for file in run.files.iter().filter(|f| job.file_in_range(f)) {
            let table = open_input_table(io, file)?;
            let mut iter = table.iter();
            match &job.range.lower {
                Some(lower) => iter.seek(
                    InternalKey::new(lower, MAX_SEQUENCE_NUMBER, ValueType::VALUE_FOR_SEEK)
                        .encoded(),
                ),
                None => iter.seek_to_first(),
            }
            while iter.valid() {
                if job.range.is_above(extract_user_key(iter.key())) {
                    break;
                }
                entries.keys.push(iter.key().to_vec());
                entries.values.extend_from_slice(iter.value());
                entries.value_ends.push(entries.values.len());
                iter.next();
            }
            iter.status()?;
        }
        runs.push(entries);
    }
    Ok(runs)
}

/// The order code of one key: its run, whether it is kept, and whether the
/// open output file is closed before it.
pub fn code(run: usize, keep: bool, cut_before: bool) -> u32 {
    ((run as u32) << 2) | (u32::from(keep) << 1) | u32::from(cut_before)
}

/// The parts of an order code: (run, keep, cut_before).
pub fn decode(code: u32) -> (usize, bool, bool) {
    ((code >> 2) as usize, code & 2 != 0, code & 1 != 0)
}

/// The most input runs a code can name.
pub const MAX_RUNS: usize = 1 << 30;

/// A run's next key in the merge; ordered so that the heap's top is the
/// smallest internal key (ties, which distinct entries never make, by run).
struct Head<'a> {
    key: &'a [u8],
    run: usize,
    index: usize,
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal_keys(other.key, self.key).then(other.run.cmp(&self.run))
    }
}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head<'_> {}

/// Step 2: merges the runs' keys (each run in order, as [`unpack`] gives
/// them) and returns one [`code`] per key in merged order. Keys that are
/// not internal keys, or a run out of order, are an error (the keys may
/// come from another process).
pub fn merge_order(job: &CompactionJob, runs: &[Vec<Vec<u8>>]) -> Result<Vec<u32>> {
    if runs.len() > MAX_RUNS {
        return Err(Error::InvalidArgument(format!("{} runs", runs.len())));
    }
    let total: usize = runs.iter().map(Vec::len).sum();
    let mut codes = Vec::with_capacity(total);
    let mut heap: BinaryHeap<Head<'_>> = runs
        .iter()
        .enumerate()
        .filter_map(|(run, keys)| keys.first().map(|key| Head { key, run, index: 0 }))
        .collect();
    let mut cutter = GrandparentCutter::new(job);
    let mut gc = GcDecider::new(job);
    while let Some(head) = heap.pop() {
        let parsed = ParsedInternalKey::parse(head.key).map_err(|e| {
            Error::corruption(
                0,
                format!("keys-only: run {} sent a bad key: {e}", head.run),
            )
        })?;
        let cut = cutter.should_stop_before(head.key);
        let keep = gc.keep(&parsed);
        codes.push(code(head.run, keep, cut));
        let next = head.index + 1;
        if let Some(key) = runs[head.run].get(next) {
            if compare_internal_keys(head.key, key) != Ordering::Less {
                return Err(Error::corruption(
                    0,
                    format!("keys-only: run {} is out of order at key {next}", head.run),
                ));
            }
            heap.push(Head {
                key,
                run: head.run,
                index: next,
            });
        }
    }
    Ok(codes)
}

/// Step 3: writes the entries `codes` keeps, in their order, through `io`.
/// The codes must name every entry of `runs` once, each run in its order.
pub fn pack(
    job: &CompactionJob,
    runs: &[RunEntries],
    codes: &[u32],
    io: &dyn JobIo,
) -> Result<CompactionOutput> {
    let started = std::time::Instant::now();
    let total: usize = runs.iter().map(RunEntries::len).sum();
    if codes.len() != total {
        return Err(Error::InvalidArgument(format!(
            "keys-only: the order has {} codes for {total} keys",
            codes.len()
        )));
    }
    let (outputs, mut stats, compute_secs) = TablePacker::run(job, io, started, |packer| {
        pack_in_order(runs, codes, packer)?;
        Ok(total as u64)
    })?;
    stats.pack_secs = compute_secs;
    Ok(CompactionOutput {
        executor: KEYS_ONLY.to_string(),
        outputs,
        stats,
        fallback: None,
    })
}

/// [`pack`]'s loop: the entries `codes` keeps into `packer`.
fn pack_in_order(runs: &[RunEntries], codes: &[u32], packer: &mut TablePacker<'_>) -> Result<()> {
    let mut cursors = vec![0usize; runs.len()];
    for &code in codes {
        let (run, keep, cut_before) = decode(code);
        let (Some(entries), Some(cursor)) = (runs.get(run), cursors.get_mut(run)) else {
            return Err(Error::InvalidArgument(format!(
                "keys-only: the order names run {run} of {}",
                runs.len()
            )));
        };
        let index = *cursor;
        let (Some(key), Some(value)) = (entries.keys.get(index), entries.value(index)) else {
            return Err(Error::InvalidArgument(format!(
                "keys-only: the order names more than the {} keys of run {run}",
                entries.len()
            )));
        };
        *cursor += 1;
        if cut_before {
            packer.cut()?;
        }
        if keep {
            packer.add(key, value)?;
        }
    }
    Ok(())
}
