//! The reference executor: a merging iterator over the inputs and one table
//! builder (`crate::steps::TablePacker`), as LevelDB compacts. Simple enough to be obviously right; every
//! other executor is checked byte for byte against it.

use std::time::Instant;

use shale_format::comparator::KeyOrder;
use shale_format::concat_iterator::ConcatIterator;
use shale_format::internal_key::{
    extract_user_key, InternalKey, ParsedInternalKey, ValueType, MAX_SEQUENCE_NUMBER,
};
use shale_format::iterator::KvIterator;
use shale_format::merging_iterator::merging_iterator;
use shale_format::table::Table;
use shale_format::{Error, Result};

use crate::boundaries::GrandparentCutter;
use crate::gc::GcDecider;
use crate::job::{CompactionJob, CompactionOutput, Executor, JobFile, JobIo};
use crate::steps::{open_input_table, TablePacker};
use crate::ExecutorKind;

/// The reference executor.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamingExecutor;

/// One cursor per input run: a table cursor for a single file, a
/// concatenation for a level's files. Tables are opened up front (that reads
/// only footers and index blocks); their data blocks are read as the merge
/// reaches them. Files that cannot hold a key of the job's range are left
/// out.
fn run_iterators(
    job: &CompactionJob,
    io: &dyn JobIo,
    order: &KeyOrder,
) -> Result<Vec<Box<dyn KvIterator + Send>>> {
    let mut children: Vec<Box<dyn KvIterator + Send>> = Vec::with_capacity(job.inputs.len());
    for run in &job.inputs {
        let files: Vec<&JobFile> = run.files.iter().filter(|f| job.file_in_range(f)).collect();
        let tables = files
            .iter()
            .map(|file| open_input_table(io, file))
            .collect::<Result<Vec<Table>>>()?;
        if tables.is_empty() {
            continue;
        }
        if let [table] = tables.as_slice() {
            children.push(Box::new(table.iter()));
            continue;
        }
        let largest = files.iter().map(|f| f.largest.clone()).collect();
        children.push(Box::new(ConcatIterator::new(
            order.internal_comparator(),
            largest,
            Box::new(move |i| {
                let table = tables
                    .get(i)
                    .ok_or_else(|| Error::InvalidArgument(format!("no input table {i}")))?;
                Ok(Box::new(table.iter()) as Box<dyn KvIterator + Send>)
            }),
        )));
    }
    Ok(children)
}

impl Executor for StreamingExecutor {
    fn name(&self) -> &'static str {
        ExecutorKind::Streaming.name()
    }

    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        let started = Instant::now();
        // The one executor that takes any order of keys: the others compare
        // key bytes.
        let order = io.key_order();
        if !order.is_bytewise() && !job.range.is_full() {
            // Sub-compaction ranges are cut in bytewise order.
            return Err(Error::NotSupported(format!(
                "a sub-compaction range cannot be used with the custom comparator {}",
                order.name()
            )));
        }
        let (outputs, mut stats, compute_secs) = TablePacker::run(job, io, started, |packer| {
            merge_into(job, io, &order, packer)
        })?;
        stats.merge_secs = compute_secs;
        Ok(CompactionOutput {
            executor: ExecutorKind::Streaming.to_string(),
            outputs,
            stats,
            fallback: None,
        })
    }
}

/// The reference compaction: merges the inputs, drops what gc drops, cuts
/// files where the grandparent rule says, and writes the rest through
/// `packer`. Returns the number of entries read.
fn merge_into(
    job: &CompactionJob,
    io: &dyn JobIo,
    order: &KeyOrder,
    packer: &mut TablePacker<'_>,
) -> Result<u64> {
    let mut iter = merging_iterator(order.internal_comparator(), run_iterators(job, io, order)?);
    let mut cutter = GrandparentCutter::with_order(job, order.clone());
    let mut gc = GcDecider::with_order(job, order.clone());
    let mut entries_in = 0;

    // The job's range: from the first entry of its lower bound (the
    // newest version sorts first) to the first user key at or past its
    // upper bound.
    match &job.range.lower {
        Some(lower) => iter.seek(
            InternalKey::new(lower, MAX_SEQUENCE_NUMBER, ValueType::VALUE_FOR_SEEK).encoded(),
        ),
        None => iter.seek_to_first(),
    }
    while iter.valid() {
        let key = iter.key();
        if job.range.is_above(extract_user_key(key)) {
            break;
        }
        entries_in += 1;
        if cutter.should_stop_before(key) {
            packer.cut()?;
        }
        let parsed = ParsedInternalKey::parse(key).map_err(|e| {
            Error::corruption(0, format!("compaction input has a bad internal key: {e}"))
        })?;
        if gc.keep(&parsed) {
            packer.add(key, iter.value())?;
        }
        iter.next();
    }
    iter.status()?;
    Ok(entries_in)
}
