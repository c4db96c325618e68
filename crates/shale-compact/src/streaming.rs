//! The reference executor: a merging iterator over the inputs and one table
//! builder, as LevelDB compacts. Simple enough to be obviously right; every
//! other executor is checked byte for byte against it.

use std::time::Instant;

use shale_format::comparator::KeyOrder;
use shale_format::concat_iterator::ConcatIterator;
use shale_format::internal_key::{
    extract_user_key, InternalKey, ParsedInternalKey, ValueType, MAX_SEQUENCE_NUMBER,
};
use shale_format::iterator::KvIterator;
use shale_format::merging_iterator::merging_iterator;
use shale_format::options::TableOptions;
use shale_format::table::{ReadTableOptions, Table};
use shale_format::table_builder::TableBuilder;
use shale_format::{Error, Result};

use crate::boundaries::{output_file_full, GrandparentCutter};
use crate::gc::GcDecider;
use crate::job::{
    CompactionJob, CompactionOutput, Executor, JobFile, JobIo, OutputSink, OutputTable, PhaseStats,
};
use crate::syncer::Syncer;

/// Name of the reference executor.
pub const STREAMING: &str = "streaming";

/// The reference executor.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamingExecutor;

/// Opens an input table with checksums verified; no filter is needed to scan.
pub fn open_input_table(io: &dyn JobIo, file: &JobFile) -> Result<Table> {
    let source = io.open_input(file)?;
    let name = format!("{:06}.ldb", file.number);
    let options = ReadTableOptions::internal_scan();
    Table::open(source, file.file_size, &name, options)
}

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

/// An output file being filled.
struct OpenOutput {
    number: u64,
    builder: TableBuilder<Box<dyn OutputSink>>,
}

impl OpenOutput {
    /// Writes the table's last blocks and hands the file to `syncer`.
    fn finish(self, syncer: &Syncer<'_>, stats: &mut PhaseStats) -> Result<OutputTable> {
        let entries = self.builder.num_entries();
        // A file is opened at its first entry, so both keys exist.
        let smallest = self.builder.smallest_key().unwrap_or_default().to_vec();
        let largest = self.builder.largest_key().unwrap_or_default().to_vec();
        let (sink, file_size) = self.builder.finish()?;
        syncer.submit(sink, Vec::new())?;
        stats.bytes_written += file_size;
        stats.entries_out += entries;
        Ok(OutputTable {
            number: self.number,
            file_size,
            smallest,
            largest,
            entries,
        })
    }
}

/// Writes kept entries, in order, into output tables as the reference
/// does: a file opens at its first entry, closes when its data blocks reach
/// the job's size limit ([`output_file_full`]) or when the caller cuts it
/// (the grandparent cut). A closed file is flushed and synced by `syncer`'s
/// thread while the next one is filled. Shared with the keys-only remote
/// mode, whose data side packs the order the key side decided.
pub struct TablePacker<'a> {
    io: &'a dyn JobIo,
    syncer: &'a Syncer<'a>,
    options: TableOptions,
    max_output_file_size: u64,
    current: Option<OpenOutput>,
    outputs: Vec<OutputTable>,
    stats: PhaseStats,
}

impl std::fmt::Debug for TablePacker<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TablePacker")
            .field("outputs", &self.outputs.len())
            .field("open", &self.current.as_ref().map(|o| o.number))
            .finish_non_exhaustive()
    }
}

impl<'a> TablePacker<'a> {
    fn new(job: &CompactionJob, io: &'a dyn JobIo, syncer: &'a Syncer<'a>) -> TablePacker<'a> {
        let mut options = job.table.table_options_in(&io.key_order());
        if let Some(policy) = io.filter_policy() {
            options.filter_policy = Some(policy);
        }
        TablePacker {
            io,
            syncer,
            options,
            max_output_file_size: job.max_output_file_size,
            current: None,
            outputs: Vec::new(),
            stats: PhaseStats {
                bytes_read: job.input_bytes(),
                ..PhaseStats::default()
            },
        }
    }

    /// Closes the open file, if any.
    pub fn cut(&mut self) -> Result<()> {
        if let Some(output) = self.current.take() {
            self.outputs
                .push(output.finish(self.syncer, &mut self.stats)?);
        }
        Ok(())
    }

    /// Appends a kept entry.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let output = match &mut self.current {
            Some(output) => output,
            None => {
                let (number, sink) = self.io.create_output()?;
                self.current.insert(OpenOutput {
                    number,
                    builder: TableBuilder::new(self.options.clone(), sink),
                })
            }
        };
        output.builder.add(key, value)?;
        if output_file_full(output.builder.raw_data_bytes(), self.max_output_file_size) {
            self.cut()?;
        }
        Ok(())
    }

    /// Runs `fill` on a packer for `job` whose finished files an I/O thread
    /// makes durable meanwhile; `fill` returns the number of entries it
    /// read. Returns the tables (all durable), the stats (`bytes_read`,
    /// `bytes_written`, `entries_in`, `entries_out`, `write_secs`,
    /// `overlapped_secs`, and `total_secs` from `started`) and the seconds
    /// of computation: the wall time less the waits for the I/O thread.
    pub fn run(
        job: &CompactionJob,
        io: &dyn JobIo,
        started: Instant,
        fill: impl FnOnce(&mut TablePacker<'_>) -> Result<u64>,
    ) -> Result<(Vec<OutputTable>, PhaseStats, f64)> {
        let ((outputs, mut stats), io_time) = Syncer::scope(None, |syncer| {
            let mut packer = TablePacker::new(job, io, syncer);
            let entries_in = fill(&mut packer)?;
            let (outputs, mut stats) = packer.finish()?;
            stats.entries_in = entries_in;
            Ok((outputs, stats))
        })?;
        stats.write_secs = io_time.busy;
        stats.overlapped_secs = io_time.overlapped();
        stats.total_secs = started.elapsed().as_secs_f64();
        let compute_secs = stats.total_secs - io_time.waited;
        Ok((outputs, stats, compute_secs))
    }

    /// Closes the last file; the tables written and the packer's stats
    /// (`bytes_read`, `bytes_written`, `entries_out`). The files are durable
    /// once the syncer's scope has ended.
    fn finish(mut self) -> Result<(Vec<OutputTable>, PhaseStats)> {
        self.cut()?;
        Ok((self.outputs, self.stats))
    }
}

impl Executor for StreamingExecutor {
    fn name(&self) -> &'static str {
        STREAMING
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
            executor: STREAMING.to_string(),
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
