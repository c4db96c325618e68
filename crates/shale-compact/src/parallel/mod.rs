//! The `parallel` executor: compaction as data-parallel phases on CPU threads
//! (rayon), in key-range slices so memory stays within a budget whatever the
//! job's size.
//!
//! For each slice (cut by the rule of `crate::inputs`): **read** the input
//! blocks the slice needs (one contiguous read per file stretch), **unpack**
//! them in parallel (`crate::steps`' `unpack.rs`), then **merge** the runs
//! in key ranges in parallel, each range fused with **gc**
//! (`crate::gc::keep_entry`), the kept entries' sizes and the grandparents
//! each key passes, so every entry is decided while its key is in cache and
//! the merged order is never materialised (`merge.rs`); one sequential scan
//! over integers fixes the block and file boundaries (`crate::steps`'
//! `plan.rs`), and **pack** encodes the blocks in parallel and lays out the
//! files (`pack.rs`). The state that crosses a slice boundary is small and
//! explicit: the previous entry (for gc), the grandparent cutter, the open
//! output file and the entries of its unfinished block. Each phase stays a
//! named function with its CPU twin of the OpenCL kernel
//! (`crate::testing::twins`).
//!
//! Buffers (decompressed blocks, key arenas, entry lists, reads, encoded
//! blocks, output files) come from bounded pools reused across slices and
//! jobs (`crate::pool`), so the steady state allocates and zero-fills
//! nothing per block.
//!
//! Memory: a slice holds its input blocks decompressed, their keys, 16 bytes
//! per entry for the merge, and its encoded output blocks: about 6 bytes per
//! input byte for db_bench-like data (more for highly compressible input).
//! Slices are sized to `memory_budget / 6` input bytes, at most 2 MiB.

pub(crate) mod merge;
pub(crate) mod pack;

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use shale_format::block_builder::shared_prefix_len;
use shale_format::bloom::BloomFilterPolicy;
use shale_format::comparator::compare_internal_keys;
use shale_format::format::{BlockHandle, BLOCK_TRAILER_LEN};
use shale_format::internal_key::{ParsedInternalKey, SequenceNumber};
use shale_format::{Error, Result};

use crate::boundaries::GrandparentCutter;
use crate::inputs::{
    read_stretches, run_blocks_in_range, shared_user_key_prefix, slice_limit, InputTable, Stretch,
};
use crate::job::{CompactionJob, CompactionOutput, Executor, JobIo, PhaseStats};
use crate::pool::Pool;
use crate::steps::key_prefix::user_key_prefix;
use crate::steps::plan::{plan_boundaries_from_sizes, EntrySize, PlannedFile, ScanState};
use crate::steps::unpack::{unpack_block_into, EntryRef, ParsedBlock};
use crate::syncer::Syncer;
use merge::{item_key, merge_and_decide, Item, Kept};
use pack::{write_planned, OpenFile};

use crate::ExecutorKind;

/// Default memory budget for one job.
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;

/// Bytes of memory a slice needs per input byte, at worst (see the module
/// documentation).
const MEMORY_PER_INPUT_BYTE: usize = 6;

/// Upper bound on a slice's input, whatever the budget.
const MAX_SLICE_INPUT_BYTES: usize = 2 << 20;

/// Output files are assembled in buffers sized up front up to this many
/// bytes (a larger `max_output_file_size` grows its buffer as it fills).
const MAX_PRESIZED_FILE_BYTES: usize = 256 << 20;

/// The data-parallel CPU executor.
pub struct ParallelExecutor {
    pool: rayon::ThreadPool,
    memory_budget: usize,
    buffers: Buffers,
}

/// The buffers the executor reuses across slices and jobs (see
/// [`crate::pool`]).
pub(crate) struct Buffers {
    /// Decompressed block contents.
    pub(crate) contents: Pool<Vec<u8>>,
    /// Key arenas of parsed blocks.
    pub(crate) keys: Pool<Vec<u8>>,
    /// Entry lists of parsed blocks.
    pub(crate) entries: Pool<Vec<EntryRef>>,
    /// Stretches of input blocks as read.
    pub(crate) reads: Pool<Vec<u8>>,
    /// Output files assembled in memory.
    pub(crate) files: Pool<Vec<u8>>,
    /// A slice's runs of entries to merge.
    pub(crate) items: Pool<Vec<Item>>,
    /// Kept entries.
    pub(crate) kept: Pool<Vec<Kept>>,
    /// Kept entries' sizes for the boundary scan.
    pub(crate) sizes: Pool<Vec<EntrySize>>,
    /// Encoded output blocks.
    pub(crate) encoded: Pool<Vec<u8>>,
    /// Merge prefixes of a block's entries.
    pub(crate) prefixes: Pool<Vec<u64>>,
}

impl Buffers {
    /// Pools that keep, together, at most about a quarter of
    /// `memory_budget` (65 MiB with the default budget), and only what a
    /// job used: about what three slices in flight (one being unpacked, one
    /// packed, one waiting between them) hold of db_bench-like input.
    fn new(memory_budget: usize) -> Buffers {
        let sixteenth = memory_budget / 16;
        Buffers {
            contents: Pool::new(sixteenth * 2),
            keys: Pool::new(sixteenth / 2),
            entries: Pool::new(sixteenth / 2),
            reads: Pool::new(sixteenth / 8),
            files: Pool::new(sixteenth / 2),
            items: Pool::new(sixteenth / 16),
            kept: Pool::new(sixteenth / 16),
            sizes: Pool::new(sixteenth / 16),
            encoded: Pool::new(sixteenth / 8),
            prefixes: Pool::new(sixteenth / 8),
        }
    }

    /// A block whose vectors come from the pools.
    fn block(&self) -> ParsedBlock {
        ParsedBlock {
            contents: self.contents.take(),
            keys: self.keys.take(),
            entries: self.entries.take(),
        }
    }

    /// Gives a block's vectors back.
    fn recycle(&self, block: ParsedBlock) {
        self.contents.give(block.contents);
        self.keys.give(block.keys);
        self.entries.give(block.entries);
    }
}

impl std::fmt::Debug for ParallelExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParallelExecutor")
            .field("threads", &self.pool.current_num_threads())
            .field("memory_budget", &self.memory_budget)
            .finish()
    }
}

impl ParallelExecutor {
    /// An executor with `threads` worker threads (0: one per available core)
    /// keeping each job's memory near `memory_budget` bytes.
    pub fn new(threads: usize, memory_budget: usize) -> Result<ParallelExecutor> {
        ParallelExecutor::with_nice(threads, memory_budget, 0)
    }

    /// Like [`ParallelExecutor::new`], with worker threads `nice` levels
    /// below normal CPU priority (see [`crate::nice`]).
    pub fn with_nice(threads: usize, memory_budget: usize, nice: u8) -> Result<ParallelExecutor> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("shale-parallel-{i}"))
            .start_handler(move |_| crate::nice::lower_current_thread(nice))
            .build()
            .map_err(|e| {
                Error::io(
                    format!("starting {threads} compaction threads"),
                    std::io::Error::other(e),
                )
            })?;
        let memory_budget = memory_budget.max(MEMORY_PER_INPUT_BYTE * 4096);
        Ok(ParallelExecutor {
            pool,
            memory_budget,
            buffers: Buffers::new(memory_budget),
        })
    }

    /// Input bytes per slice: what the budget allows, but no more than
    /// `MAX_SLICE_INPUT_BYTES`. Small slices keep the working set near the
    /// caches and let the buffers be reused slice after slice.
    fn slice_input_bytes(&self) -> u64 {
        (self.memory_budget / MEMORY_PER_INPUT_BYTE).min(MAX_SLICE_INPUT_BYTES) as u64
    }
}

impl Executor for ParallelExecutor {
    fn name(&self) -> &'static str {
        ExecutorKind::Parallel.name()
    }

    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        crate::job::require_bytewise(ExecutorKind::Parallel.name(), io)?;
        // Long-lived loops run on plain threads and only short, non-blocking
        // parallel sections run in the pool: a pool thread that blocked on
        // a channel could be stolen into by the stage it waits for.
        run_job(&self.pool, &self.buffers, job, io, self.slice_input_bytes())
    }
}

/// A sorted run's position between slices.
struct RunCursor {
    /// (table, block) pairs in key order.
    blocks: Vec<(usize, usize)>,
    /// Next block not yet read.
    next: usize,
    /// Blocks read by an earlier slice whose entries (from the given index
    /// on) belong to later slices.
    leftover: Vec<(Arc<ParsedBlock>, usize)>,
}

/// What crosses from one slice to the next.
struct Carry<'a> {
    cutter: GrandparentCutter<'a>,
    /// User key and sequence of the last merged entry (kept or not).
    previous: Option<(Vec<u8>, SequenceNumber)>,
    /// A grandparent cut seen after the last kept entry.
    pending_stop: bool,
    scan: ScanState,
    /// Kept entries of the unfinished block.
    unfinished_block: Vec<(Vec<u8>, Vec<u8>)>,
}

fn run_job(
    pool: &rayon::ThreadPool,
    buffers: &Buffers,
    job: &CompactionJob,
    io: &dyn JobIo,
    slice_input_bytes: u64,
) -> Result<CompactionOutput> {
    let started = Instant::now();
    let mut stats = PhaseStats::default();
    let options = job.table.table_options();
    let bloom = job.table.bloom_bits_per_key.map(BloomFilterPolicy::new);

    // Open every input table (footers and index blocks).
    let t = Instant::now();
    let mut tables = Vec::new();
    let mut cursors = Vec::new();
    for run in &job.inputs {
        let (blocks, bytes) = run_blocks_in_range(io, job, &run.files, &mut tables)?;
        stats.bytes_read += bytes;
        cursors.push(RunCursor {
            blocks,
            next: 0,
            leftover: Vec::new(),
        });
    }
    stats.read_secs += t.elapsed().as_secs_f64();

    let mut carry = Carry {
        cutter: GrandparentCutter::new(job),
        previous: None,
        pending_stop: false,
        scan: ScanState {
            file_open: false,
            raw_data_bytes: 0,
        },
        unfinished_block: Vec::new(),
    };
    let prefix_offset = shared_user_key_prefix(job);
    let mut pack_stats = PhaseStats::default();
    // Files are assembled in memory: sized once for a full output file (a
    // file ends past `max_output_file_size` by a block, plus index and
    // filter), instead of doubling and copying its way there.
    let file_capacity = usize::try_from(job.max_output_file_size)
        .unwrap_or(usize::MAX)
        .saturating_add(usize::try_from(job.max_output_file_size / 8).unwrap_or(0))
        .min(MAX_PRESIZED_FILE_BYTES);
    // Two stages overlap (the pipeline): this thread reads, unpacks, merges
    // and decides one slice while the packer encodes and lays out the one
    // before; finished files go to the I/O thread of the syncer.
    let result = Syncer::scope(Some(&buffers.files), |syncer| {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<PackWork>(1);
        std::thread::scope(|scope| {
            let (options, bloom) = (&options, bloom.as_ref());
            let pack_stats = &mut pack_stats;
            let packer = scope.spawn(move || -> Result<Vec<crate::job::OutputTable>> {
                let mut open: Option<OpenFile> = None;
                let mut outputs = Vec::new();
                for work in receiver {
                    write_planned(
                        pool,
                        &work.blocks,
                        &work.kept,
                        work.files,
                        &mut open,
                        &mut outputs,
                        options,
                        bloom,
                        file_capacity,
                        io,
                        buffers,
                        syncer,
                        pack_stats,
                    )?;
                    // The slice's blocks are done with (but for a leftover
                    // still shared with its run): their buffers go back.
                    buffers.kept.give(work.kept);
                    for block in work.blocks {
                        if let Ok(block) = Arc::try_unwrap(block) {
                            buffers.recycle(block);
                        }
                    }
                }
                Ok(outputs)
            });
            let produced = (|| -> Result<()> {
                loop {
                    let limit = next_slice_limit(&tables, &cursors, slice_input_bytes);
                    let last = limit.is_none();
                    let slice = SliceContext {
                        job,
                        tables: &tables,
                        buffers,
                        prefix_offset,
                    };
                    let work = pool.install(|| {
                        run_slice(
                            &slice,
                            &mut cursors,
                            limit.as_deref(),
                            &mut carry,
                            &mut stats,
                        )
                    })?;
                    if sender.send(work).is_err() || last {
                        // A closed channel means the packer failed: its
                        // error is reported below.
                        return Ok(());
                    }
                }
            })();
            drop(sender);
            let packed = packer
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the pack thread panicked".into())));
            produced.and(packed)
        })
    });
    let outputs = match result {
        Ok((outputs, io)) => {
            stats.accumulate(&pack_stats);
            stats.write_secs += io.busy;
            stats.overlapped_secs += io.overlapped();
            // Waiting in the queue was counted inside pack; it was I/O.
            stats.pack_secs = (stats.pack_secs - io.waited).max(0.0);
            outputs
        }
        // The engine deletes every output of a failed job.
        Err(err) => return Err(err),
    };
    stats.total_secs = started.elapsed().as_secs_f64();
    Ok(CompactionOutput {
        executor: ExecutorKind::Parallel.to_string(),
        outputs,
        stats,
        fallback: None,
    })
}

/// The limit of the next slice, by the one slicing rule of
/// [`crate::inputs::slice_limit`]: over each run's unread blocks and the
/// entries a split block left to it.
fn next_slice_limit(
    tables: &[InputTable],
    cursors: &[RunCursor],
    slice_input_bytes: u64,
) -> Option<Vec<u8>> {
    let remaining = cursors.iter().flat_map(|c| {
        // A leftover's keys sort below the run's next block's index key (or,
        // with none left, its last one, the run's largest key).
        let leftover = c.leftover.iter().filter_map(|(block, first)| {
            let &(t, b) = c.blocks.get(c.next).or(c.blocks.last())?;
            let bytes =
                block.contents.len() * (block.entries.len() - first) / block.entries.len().max(1);
            Some((tables[t].blocks[b].0.as_slice(), bytes as u64))
        });
        let unread = c.blocks[c.next..].iter().map(|&(t, b)| {
            let (key, handle) = &tables[t].blocks[b];
            (key.as_slice(), handle.size + BLOCK_TRAILER_LEN as u64)
        });
        leftover.chain(unread)
    });
    slice_limit(remaining, slice_input_bytes)
}

/// What every slice of a job shares.
struct SliceContext<'a> {
    job: &'a CompactionJob,
    tables: &'a [InputTable],
    buffers: &'a Buffers,
    /// Bytes every user key of the job starts with (skipped by prefixes).
    prefix_offset: usize,
}

/// A slice's entries and boundaries, handed from the deciding stage to the
/// packing stage.
struct PackWork {
    blocks: Vec<Arc<ParsedBlock>>,
    kept: Vec<Kept>,
    files: Vec<PlannedFile>,
}

/// One slice: read, unpack, lay out, merge with gc, plan the pack. Entries
/// past `limit` (the whole rest of the job when `None`) wait in `cursors`
/// for a later slice.
fn run_slice(
    slice: &SliceContext<'_>,
    cursors: &mut [RunCursor],
    limit: Option<&[u8]>,
    carry: &mut Carry<'_>,
    stats: &mut PhaseStats,
) -> Result<PackWork> {
    let t = Instant::now();
    let (stretches, positions) = slice.read(cursors, limit)?;
    stats.read_secs += t.elapsed().as_secs_f64();

    let t = Instant::now();
    let unpacked = slice.unpack(&stretches, positions)?;
    for stretch in stretches.into_iter().flatten() {
        slice.buffers.reads.give(stretch.buffer);
    }
    let (mut blocks, runs) = slice.lay_out(cursors, unpacked, limit);
    stats.entries_in += runs.iter().map(|run| run.len() as u64).sum::<u64>();
    stats.unpack_secs += t.elapsed().as_secs_f64();

    // gc's time is counted as the merge's.
    let t = Instant::now();
    let pieces = slice.merge(&blocks, runs, carry)?;
    stats.merge_secs += t.elapsed().as_secs_f64();

    let t = Instant::now();
    let (kept, files) = slice.plan_pack(&mut blocks, pieces, limit, carry);
    stats.pack_secs += t.elapsed().as_secs_f64();
    Ok(PackWork {
        blocks,
        kept,
        files,
    })
}

/// Per run of a slice, its unpacked new blocks, each with the merge
/// prefixes of its entries.
type UnpackedRuns = Vec<Vec<(ParsedBlock, Vec<u64>)>>;

/// Per run, the position of its first block taken and how many blocks it
/// has: the run's first and last blocks are the edges of the job's range,
/// whose entries are filtered.
type RunPositions = Vec<(usize, usize)>;

impl SliceContext<'_> {
    /// Reads, per run, the blocks whose index key is <= `limit`, plus the
    /// first one past it (which may hold keys <= `limit`): one read per
    /// file range, runs in parallel.
    fn read(
        &self,
        cursors: &mut [RunCursor],
        limit: Option<&[u8]>,
    ) -> Result<(Vec<Vec<Stretch>>, RunPositions)> {
        let mut wanted: Vec<Vec<(usize, usize)>> = Vec::with_capacity(cursors.len());
        let mut positions = Vec::with_capacity(cursors.len());
        for cursor in cursors.iter_mut() {
            positions.push((cursor.next, cursor.blocks.len()));
            wanted.push(self.take_blocks(cursor, limit));
        }
        let stretches = wanted
            .par_iter()
            .map(|take| read_stretches(self.tables, take, Some(&self.buffers.reads)))
            .collect::<Result<_>>()?;
        Ok((stretches, positions))
    }

    /// Advances `cursor` past the blocks this slice reads, and returns them.
    fn take_blocks(&self, cursor: &mut RunCursor, limit: Option<&[u8]>) -> Vec<(usize, usize)> {
        let mut take = Vec::new();
        while let Some(&(t, b)) = cursor.blocks.get(cursor.next) {
            let index_key = &self.tables[t].blocks[b].0;
            let within = limit.is_none_or(|l| compare_internal_keys(index_key, l).is_le());
            take.push((t, b));
            cursor.next += 1;
            if !within {
                break;
            }
        }
        take
    }

    /// Unpacks every block read, in parallel, into reused buffers.
    fn unpack(&self, stretches: &[Vec<Stretch>], positions: RunPositions) -> Result<UnpackedRuns> {
        stretches
            .par_iter()
            .zip(positions)
            .map(|(run, (first_position, run_blocks))| {
                let raw: Vec<(&Stretch, &(BlockHandle, std::ops::Range<usize>))> = run
                    .iter()
                    .flat_map(|stretch| stretch.blocks.iter().map(move |b| (stretch, b)))
                    .collect();
                raw.into_par_iter()
                    .enumerate()
                    .map(|(i, (stretch, block))| {
                        self.unpack_block(stretch, block, first_position + i, run_blocks)
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect()
    }

    /// Unpacks one block (at `position` of its run's `run_blocks`), keeps
    /// only the job's range when it is at an edge of the run, and takes the
    /// merge prefixes of its entries while its keys are in cache.
    fn unpack_block(
        &self,
        stretch: &Stretch,
        (handle, bytes): &(BlockHandle, std::ops::Range<usize>),
        position: usize,
        run_blocks: usize,
    ) -> Result<(ParsedBlock, Vec<u64>)> {
        let range = &self.job.range;
        let mut block = self.buffers.block();
        unpack_block_into(
            &stretch.buffer[bytes.clone()],
            &self.tables[stretch.table].name,
            *handle,
            &mut block,
        )?;
        if (position == 0 && range.lower.is_some())
            || (position + 1 == run_blocks && range.upper.is_some())
        {
            block.retain_range(range);
        }
        let mut prefixes = self.buffers.prefixes.take();
        prefixes.clear();
        prefixes.extend(
            (0..block.entries.len()).map(|e| user_key_prefix(block.key(e), self.prefix_offset)),
        );
        Ok((block, prefixes))
    }

    /// Lays out the slice's blocks: per run, the leftovers from the
    /// previous slice, then the new blocks. Entries past `limit` wait for a
    /// later slice, together with every block after them. Returns the
    /// blocks and, per run, its items.
    fn lay_out(
        &self,
        cursors: &mut [RunCursor],
        unpacked: UnpackedRuns,
        limit: Option<&[u8]>,
    ) -> (Vec<Arc<ParsedBlock>>, Vec<Vec<Item>>) {
        let mut blocks: Vec<Arc<ParsedBlock>> = Vec::new();
        let mut runs: Vec<Vec<Item>> = Vec::with_capacity(cursors.len());
        for (cursor, new_blocks) in cursors.iter_mut().zip(unpacked) {
            let mut run = self.buffers.items.take();
            run.clear();
            // A leftover's prefixes are computed again (one block per run).
            let pending: Vec<(Arc<ParsedBlock>, usize, Option<Vec<u64>>)> =
                std::mem::take(&mut cursor.leftover)
                    .into_iter()
                    .map(|(b, first)| (b, first, None))
                    .chain(
                        new_blocks
                            .into_iter()
                            .map(|(b, prefixes)| (Arc::new(b), 0, Some(prefixes))),
                    )
                    .collect();
            for (block, first, prefixes) in pending {
                if !cursor.leftover.is_empty() {
                    cursor.leftover.push((block, first));
                    self.buffers.prefixes.give(prefixes.unwrap_or_default());
                    continue;
                }
                let index = blocks.len() as u32;
                let end = entries_within(&block, first, limit);
                run.extend((first..end).map(|e| Item {
                    prefix: prefixes.as_ref().map_or_else(
                        || user_key_prefix(block.key(e), self.prefix_offset),
                        |prefixes| prefixes[e],
                    ),
                    block: index,
                    entry: e as u32,
                }));
                self.buffers.prefixes.give(prefixes.unwrap_or_default());
                if end < block.entries.len() {
                    cursor.leftover.push((block.clone(), end));
                }
                blocks.push(block);
            }
            runs.push(run);
        }
        (blocks, runs)
    }

    /// Merge, fused with gc, the kept entries' sizes for the boundary scan
    /// and the grandparents each key passes (see `merge.rs`); remembers the
    /// last merged entry for the next slice's gc.
    fn merge(
        &self,
        blocks: &[Arc<ParsedBlock>],
        runs: Vec<Vec<Item>>,
        carry: &mut Carry<'_>,
    ) -> Result<Vec<merge::DecidedPiece>> {
        let pieces = {
            let previous = carry.previous.as_ref().map(|(k, s)| (k.as_slice(), *s));
            merge_and_decide(blocks, &runs, previous, self.job, self.buffers)?
        };
        for run in runs {
            self.buffers.items.give(run);
        }
        if let Some(last) = pieces.iter().rev().find_map(|p| p.last) {
            let parsed = ParsedInternalKey::parse(item_key(blocks, &last))?;
            carry.previous = Some((parsed.user_key.to_vec(), parsed.sequence));
        }
        Ok(pieces)
    }

    /// Pack plan: the kept list is the unfinished block from before (added
    /// to `blocks` as one more block), then this slice's kept entries,
    /// piece after piece; the files they fill, and the new unfinished block
    /// kept in `carry`. Returns the kept entries of the planned files.
    fn plan_pack(
        &self,
        blocks: &mut Vec<Arc<ParsedBlock>>,
        pieces: Vec<merge::DecidedPiece>,
        limit: Option<&[u8]>,
        carry: &mut Carry<'_>,
    ) -> (Vec<Kept>, Vec<PlannedFile>) {
        let carried = std::mem::take(&mut carry.unfinished_block);
        let carried_block = blocks.len() as u32;
        blocks.push(Arc::new(ParsedBlock::from_entries(&carried)));
        let total = carried.len() + pieces.iter().map(|p| p.kept.len()).sum::<usize>();
        let mut list = KeptList {
            kept: self.buffers.kept.take(),
            sizes: self.buffers.sizes.take(),
            stops: vec![false; total],
        };
        list.kept.clear();
        list.sizes.clear();
        list.kept.reserve(total);
        list.sizes.reserve(total);
        list.push_carried(&carried, carried_block);
        // A grandparent cut seen after the last kept entry of the slice
        // before ends the file before this slice's first kept entry.
        if carry.pending_stop && carried.len() < total {
            list.stops[carried.len()] = true;
            carry.pending_stop = false;
        }
        for piece in pieces {
            list.push_piece(piece, blocks, carry, self.buffers);
        }
        let KeptList {
            mut kept,
            sizes,
            stops,
        } = list;
        let last = limit.is_none();
        let (files, unfinished) =
            plan_boundaries_from_sizes(&sizes, &stops, &mut carry.scan, self.job, last);
        self.buffers.sizes.give(sizes);
        carry.unfinished_block = kept[unfinished.clone()]
            .iter()
            .map(|&(b, e)| {
                (
                    blocks[b as usize].key(e as usize).to_vec(),
                    blocks[b as usize].value(e as usize).to_vec(),
                )
            })
            .collect();
        kept.truncate(unfinished.start);
        (kept, files)
    }
}

/// The end of the entries of `block` from `first` on that are <= `limit`:
/// one comparison for a block that ends at or below it, a binary search
/// for the one that crosses it.
fn entries_within(block: &ParsedBlock, first: usize, limit: Option<&[u8]>) -> usize {
    let count = block.entries.len();
    match limit {
        Some(l) if count > first && compare_internal_keys(block.key(count - 1), l).is_gt() => {
            first
                + block.entries[first..]
                    .partition_point(|e| compare_internal_keys(block.entry_key(e), l).is_le())
        }
        _ => count,
    }
}

/// A slice's kept entries being listed for the boundary scan: the entries,
/// their sizes, and whether an output file must end before each.
struct KeptList {
    kept: Vec<Kept>,
    sizes: Vec<EntrySize>,
    stops: Vec<bool>,
}

impl KeptList {
    /// The unfinished block carried from the slice before, which is block
    /// `carried_block`.
    fn push_carried(&mut self, carried: &[(Vec<u8>, Vec<u8>)], carried_block: u32) {
        for (e, (key, value)) in carried.iter().enumerate() {
            self.kept.push((carried_block, e as u32));
            self.sizes.push(EntrySize {
                key_len: key.len() as u32,
                value_len: value.len() as u32,
                shared: match e {
                    0 => 0,
                    _ => shared_prefix_len(&carried[e - 1].0, key) as u32,
                },
            });
        }
    }

    /// One merged piece: its first entry's shared prefix is fixed up
    /// against the kept entry before it, and the grandparent cuts it passes
    /// become stops (a cut after its last kept entry stays pending).
    fn push_piece(
        &mut self,
        piece: merge::DecidedPiece,
        blocks: &[Arc<ParsedBlock>],
        carry: &mut Carry<'_>,
        buffers: &Buffers,
    ) {
        let base = self.kept.len();
        if let (Some(first), Some(&before)) = (piece.sizes.first(), self.kept.last()) {
            let mut first = *first;
            first.shared =
                shared_prefix_len(key_of(blocks, before), key_of(blocks, piece.kept[0])) as u32;
            self.sizes.push(first);
            self.sizes.extend_from_slice(&piece.sizes[1..]);
        } else {
            self.sizes.extend_from_slice(&piece.sizes);
        }
        self.kept.extend_from_slice(&piece.kept);
        buffers.kept.give(piece.kept);
        buffers.sizes.give(piece.sizes);
        for (kept_before, passed) in piece.passes {
            if carry.cutter.should_stop_before_position(passed as usize) {
                match self.stops.get_mut(base + kept_before as usize) {
                    Some(stop) => *stop = true,
                    None => carry.pending_stop = true,
                }
            }
        }
    }
}

/// The internal key of a kept entry.
#[inline]
fn key_of(blocks: &[Arc<ParsedBlock>], kept: Kept) -> &[u8] {
    blocks[kept.0 as usize].key(kept.1 as usize)
}
