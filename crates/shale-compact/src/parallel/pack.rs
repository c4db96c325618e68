//! Pack: kept entries into output tables. A cheap sequential scan over entry
//! sizes fixes every block and file boundary with the same rules the table
//! builder applies one entry at a time; blocks are then encoded, compressed
//! and checksummed in parallel, their keys hashed for the Bloom filter in
//! parallel, and each file is laid out by the same `TableAssembler` the
//! table builder uses.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use shale_format::block_builder::{shared_prefix_len, BlockBuilder};
use shale_format::bloom::{bloom_hash, BloomFilterPolicy};
use shale_format::coding::varint_length;
use shale_format::filter_block::{assemble_filters, plan_filters};
use shale_format::format::{maybe_compress_owned, CompressionType, BLOCK_TRAILER_LEN};
use shale_format::internal_key::extract_user_key;
use shale_format::options::TableOptions;
use shale_format::table_assembler::TableAssembler;
use shale_format::Result;

use super::plan::{plan_boundaries_from_sizes, EntrySize};
use super::unpack::ParsedBlock;
use crate::job::{CompactionJob, JobIo, OutputSink, OutputTable, PhaseStats};

/// A kept entry: block and entry index in the slice.
pub type Kept = (u32, u32);

#[inline]
fn key(blocks: &[Arc<ParsedBlock>], k: Kept) -> &[u8] {
    blocks[k.0 as usize].key(k.1 as usize)
}

#[inline]
fn value(blocks: &[Arc<ParsedBlock>], k: Kept) -> &[u8] {
    blocks[k.0 as usize].value(k.1 as usize)
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

/// Where blocks and files end. `kept` lists the entries to write in order;
/// `stops[j]` is true when the file must end before kept entry `j` (a
/// grandparent cut seen since the previous kept entry). Returns the planned
/// files and the range of kept entries left in an unfinished block (carried
/// to the next slice unless `last`).
pub fn plan_boundaries(
    blocks: &[Arc<ParsedBlock>],
    kept: &[Kept],
    stops: &[bool],
    state: &mut ScanState,
    job: &CompactionJob,
    last: bool,
) -> (Vec<PlannedFile>, Range<usize>) {
    // Sizes and shared prefixes with the previous kept entry, in parallel;
    // then the one sequential scan over integers.
    let sizes: Vec<EntrySize> = (0..kept.len())
        .into_par_iter()
        .map(|j| {
            let k = key(blocks, kept[j]);
            EntrySize {
                key_len: k.len() as u32,
                value_len: value(blocks, kept[j]).len() as u32,
                shared: if j == 0 {
                    0
                } else {
                    shared_prefix_len(key(blocks, kept[j - 1]), k) as u32
                },
            }
        })
        .collect();
    plan_boundaries_from_sizes(&sizes, stops, state, job, last)
}

/// A data block ready to be written.
#[derive(Debug)]
struct EncodedBlock {
    contents: Vec<u8>,
    compression: CompressionType,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
    entries: u64,
    /// Bloom hashes of the user keys, when the table has a filter.
    hashes: Vec<u32>,
}

fn encode_block(
    blocks: &[Arc<ParsedBlock>],
    kept: &[Kept],
    range: Range<usize>,
    options: &TableOptions,
    bloom: bool,
) -> EncodedBlock {
    // A block ends at the first entry that takes it to `block_size`.
    let mut builder =
        BlockBuilder::with_capacity(options.block_restart_interval, options.block_size * 5 / 4);
    let mut hashes = Vec::with_capacity(if bloom { range.len() } else { 0 });
    for &k in &kept[range.clone()] {
        let key = key(blocks, k);
        builder.add(key, value(blocks, k));
        if bloom {
            hashes.push(bloom_hash(extract_user_key(key)));
        }
    }
    let (contents, compression) =
        maybe_compress_owned(builder.into_contents(), options.compression);
    EncodedBlock {
        contents,
        compression,
        first_key: key(blocks, kept[range.start]).to_vec(),
        last_key: key(blocks, kept[range.end - 1]).to_vec(),
        entries: range.len() as u64,
        hashes,
    }
}

/// An output file being written across slices.
pub struct OpenFile {
    number: u64,
    sink: Box<dyn OutputSink>,
    /// The file is assembled in memory and written when finished.
    assembler: TableAssembler<Vec<u8>>,
    smallest: Vec<u8>,
    largest: Vec<u8>,
    entries: u64,
    block_ranges: Vec<(u64, u64)>,
    block_hashes: Vec<Vec<u32>>,
}

/// Files assembled in memory, waiting to be written and synced.
const WRITE_QUEUE_FILES: usize = 4;

/// Writes finished output files and makes them durable on a thread of its
/// own, so file I/O overlaps the computation of later files (the pipeline
/// mechanism). At most a few files wait, which bounds the memory it holds.
pub struct Syncer {
    sender: std::sync::mpsc::SyncSender<(Box<dyn OutputSink>, Vec<u8>)>,
    /// Nanoseconds the computation waited for a place in the queue.
    blocked_nanos: std::sync::atomic::AtomicU64,
}

/// What the I/O thread did.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoTime {
    /// Seconds writing and syncing.
    pub busy: f64,
    /// Seconds the computation waited for it (queue full, or at the end).
    pub waited: f64,
}

impl Syncer {
    /// Runs `body` with a syncer; returns the first error of either and the
    /// time spent writing and syncing.
    pub fn scope<T>(body: impl FnOnce(&Syncer) -> Result<T>) -> Result<(T, IoTime)> {
        let (sender, receiver) =
            std::sync::mpsc::sync_channel::<(Box<dyn OutputSink>, Vec<u8>)>(WRITE_QUEUE_FILES);
        std::thread::scope(|scope| {
            let worker = scope.spawn(move || -> Result<f64> {
                let mut seconds = 0.0;
                let mut first_error = None;
                for (mut sink, bytes) in receiver {
                    let started = Instant::now();
                    let written = std::io::Write::write_all(&mut sink, &bytes)
                        .and_then(|()| std::io::Write::flush(&mut sink))
                        .map_err(|e| shale_format::Error::io("writing a compaction output", e));
                    if let Err(err) = written.and_then(|()| sink.finish()) {
                        first_error.get_or_insert(err);
                    }
                    seconds += started.elapsed().as_secs_f64();
                }
                first_error.map_or(Ok(seconds), Err)
            });
            let syncer = Syncer {
                sender,
                blocked_nanos: std::sync::atomic::AtomicU64::new(0),
            };
            let result = body(&syncer);
            let blocked = syncer
                .blocked_nanos
                .load(std::sync::atomic::Ordering::Relaxed) as f64
                / 1e9;
            drop(syncer);
            let joined = Instant::now();
            let busy = worker.join().unwrap_or_else(|_| {
                Err(shale_format::Error::InvalidArgument(
                    "the sync thread panicked".into(),
                ))
            });
            let waited = blocked + joined.elapsed().as_secs_f64();
            let value = result?;
            Ok((
                value,
                IoTime {
                    busy: busy?,
                    waited,
                },
            ))
        })
    }

    fn submit(&self, sink: Box<dyn OutputSink>, bytes: Vec<u8>) -> Result<()> {
        let started = Instant::now();
        let sent = self
            .sender
            .send((sink, bytes))
            .map_err(|_| shale_format::Error::InvalidArgument("the sync thread stopped".into()));
        self.blocked_nanos.fetch_add(
            started.elapsed().as_nanos() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        sent
    }
}

/// Encodes the planned blocks in parallel and writes them, finishing files
/// as planned. `open` is the file carried between slices.
#[allow(
    clippy::too_many_arguments,
    reason = "the phases' shared state, passed explicitly"
)]
pub fn write_planned(
    pool: &rayon::ThreadPool,
    blocks: &[Arc<ParsedBlock>],
    kept: &[Kept],
    files: Vec<PlannedFile>,
    open: &mut Option<OpenFile>,
    outputs: &mut Vec<OutputTable>,
    options: &TableOptions,
    bloom: Option<&BloomFilterPolicy>,
    file_capacity: usize,
    io: &dyn JobIo,
    syncer: &Syncer,
    stats: &mut PhaseStats,
) -> Result<()> {
    // All of this is pack time; waiting for the I/O thread is accounted by
    // the syncer.
    let started = Instant::now();
    let ranges: Vec<Range<usize>> = files
        .iter()
        .flat_map(|f| f.blocks.iter().cloned())
        .collect();
    let mut encoded: Vec<EncodedBlock> = pool.install(|| {
        ranges
            .into_par_iter()
            .map(|range| encode_block(blocks, kept, range, options, bloom.is_some()))
            .collect()
    });

    let mut encoded = encoded.drain(..);
    for planned in files {
        for _ in 0..planned.blocks.len() {
            let Some(block) = encoded.next() else { break };
            let file = match open {
                Some(file) => file,
                None => {
                    let (number, sink) = io.create_output()?;
                    open.insert(OpenFile {
                        number,
                        sink,
                        assembler: TableAssembler::new(
                            options.clone(),
                            Vec::with_capacity(file_capacity),
                        ),
                        smallest: block.first_key.clone(),
                        largest: Vec::new(),
                        entries: 0,
                        block_ranges: Vec::new(),
                        block_hashes: Vec::new(),
                    })
                }
            };
            let handle = file.assembler.write_data_block(
                &block.first_key,
                &block.last_key,
                &block.contents,
                block.compression,
            )?;
            file.block_ranges.push((
                handle.offset,
                handle.offset + handle.size + BLOCK_TRAILER_LEN as u64,
            ));
            file.block_hashes.push(block.hashes);
            file.largest = block.last_key;
            file.entries += block.entries;
        }
        if planned.finish {
            if let Some(file) = open.take() {
                outputs.push(finish_file(pool, file, bloom, syncer, stats)?);
            }
        }
    }
    stats.pack_secs += started.elapsed().as_secs_f64();
    Ok(())
}

/// Builds the filters (in parallel, one per filter range), writes the
/// trailing blocks and syncs the file.
fn finish_file(
    pool: &rayon::ThreadPool,
    file: OpenFile,
    bloom: Option<&BloomFilterPolicy>,
    syncer: &Syncer,
    stats: &mut PhaseStats,
) -> Result<OutputTable> {
    let filter = bloom.map(|policy| {
        let plan = plan_filters(&file.block_ranges);
        let filters: Vec<Vec<u8>> = pool.install(|| {
            plan.into_par_iter()
                .map(|range| {
                    let hashes: Vec<u32> =
                        file.block_hashes[range].iter().flatten().copied().collect();
                    let mut filter = Vec::new();
                    if !hashes.is_empty() {
                        policy.create_filter_from_hashes(&hashes, &mut filter);
                    }
                    filter
                })
                .collect()
        });
        assemble_filters(&filters)
    });
    let (bytes, file_size) = file.assembler.finish_with_filter_block(filter)?;
    syncer.submit(file.sink, bytes)?;
    stats.bytes_written += file_size;
    stats.entries_out += file.entries;
    Ok(OutputTable {
        number: file.number,
        file_size,
        smallest: file.smallest,
        largest: file.largest,
        entries: file.entries,
    })
}
