//! Writing kept entries, in order, into output tables one entry at a time,
//! as the reference does: `streaming` through its merge, and the data side
//! of a keys-only job (the worker) through the order the key side decided.
//! The same entries with the same cuts give the same tables.

use std::time::Instant;

use shale_format::options::TableOptions;
use shale_format::table_builder::TableBuilder;
use shale_format::Result;

use crate::boundaries::output_file_full;
use crate::job::{CompactionJob, JobIo, OutputSink, OutputTable, PhaseStats};
use crate::syncer::Syncer;

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
