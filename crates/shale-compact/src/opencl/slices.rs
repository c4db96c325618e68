//! The device works on a job in key-range slices, so that one slice, not
//! the whole job, must fit the device-memory budget. This file is the host
//! side that cuts the input into slices; `mod.rs` runs them as a pipeline.
//!
//! Slices are cut by the rule `parallel` uses too ([`crate::inputs`]): a
//! slice ends at a *user key*, so all versions of a user key meet in one
//! slice, and gc, which looks only at an entry and the one before it with
//! the same user key, needs nothing from earlier slices; every slice takes
//! at least one whole block. Input tables are opened and read through the
//! same module.
//!
//! Per run, blocks whose index key is at or below the limit are read
//! whole; the first block past it may still hold entries at or below the
//! limit: the host parses that one block (`steps::unpack::unpack_block`,
//! checksum checked) and splits it into two blocks, one for this slice and
//! one kept for the next. Split blocks are re-encoded uncompressed with a
//! valid trailer, so the device treats them like any other block.
//!
//! A sub-compaction's key range (`CompactionJob::range`) is honoured here,
//! on the host, before anything goes up: each run lists only the blocks
//! that can hold keys of the range (by their index keys), and its two edge
//! blocks go through the same host split as above, which keeps only the
//! entries inside the range. A block past the range's upper bound counts
//! as past every slice limit, so the entries past the bound never reach a
//! slice.
//!
//! What else crosses a slice boundary (see `mod.rs`): the entries of the
//! output file still open at the end of a slice, as uncompressed blocks,
//! and the grandparent cutter.

use std::sync::Arc;

use shale_format::block_builder::BlockBuilder;
use shale_format::comparator::compare_internal_keys;
use shale_format::format::{block_trailer, BlockHandle, CompressionType, BLOCK_TRAILER_LEN};
use shale_format::internal_key::extract_user_key;

use super::device_error::DeviceError;
use super::pinned::{HostBytes, StagingPool};
use crate::inputs::{
    read_stretches, read_stretches_into, run_blocks_in_range, slice_limit, InputTable,
};
use crate::job::{CompactionJob, JobIo, KeyRange};
use crate::steps::unpack::unpack_block;

/// The most pinned memory a slice starts with; one larger grows into it.
const MAX_PINNED_SLICE_GUESS: u64 = 256 << 20;

/// Restart interval of the blocks the host re-encodes (split input blocks,
/// carried output blocks); any interval parses the same.
const HOST_BLOCK_RESTART_INTERVAL: usize = 16;

/// One input block of a slice, as laid out in the slice's `data` buffer.
#[derive(Debug, Clone)]
pub(crate) struct InputBlock {
    /// Index into [`SliceInput::names`] (for error messages).
    pub(crate) source: usize,
    /// Where the block was in its file (size: its stored contents).
    pub(crate) handle: BlockHandle,
    /// Offset of the block as stored (contents, type byte, CRC).
    pub(crate) raw: u32,
    /// Offset of its uncompressed contents: `raw`, or for a compressed
    /// block, once the device has decompressed it, where they were written
    /// after the stored blocks.
    pub(crate) contents: u32,
    /// Length of its contents: as stored, then, once decompressed, the
    /// uncompressed length.
    pub(crate) contents_len: u32,
}

/// The input of one slice, read and ready to upload.
#[derive(Debug, Default)]
pub(crate) struct SliceInput {
    /// The blocks as stored.
    pub(crate) data: HostBytes,
    /// The blocks, run after run, each run in key order.
    pub(crate) blocks: Vec<InputBlock>,
    /// Index in `blocks` of each run's first block, then `blocks.len()`.
    pub(crate) run_first_block: Vec<usize>,
    /// Names for error messages.
    pub(crate) names: Vec<String>,
    /// True for the job's last slice.
    pub(crate) last: bool,
    /// Bytes read from input files for this slice.
    pub(crate) bytes_read: u64,
}

impl SliceInput {
    /// Records the block whose stored bytes (contents and trailer) are
    /// `data[range]` already.
    fn add_stored(
        &mut self,
        source: usize,
        handle: BlockHandle,
        range: std::ops::Range<usize>,
    ) -> Result<(), DeviceError> {
        // A stretch's blocks are at least a trailer long (read_stretches_into).
        if range.end > u32::MAX as usize {
            return Err(DeviceError::new("input blocks past 32-bit offsets"));
        }
        self.blocks.push(InputBlock {
            source,
            handle,
            raw: range.start as u32,
            contents: range.start as u32,
            contents_len: (range.len() - BLOCK_TRAILER_LEN) as u32,
        });
        Ok(())
    }

    /// Appends a block given by its stored bytes (contents and trailer).
    fn push_stored(
        &mut self,
        source: usize,
        handle: BlockHandle,
        stored: &[u8],
    ) -> Result<(), DeviceError> {
        let raw = self.data.as_slice().len();
        if raw + stored.len() > u32::MAX as usize {
            return Err(DeviceError::new("input blocks past 32-bit offsets"));
        }
        self.data.extend_from_slice(stored);
        self.blocks.push(InputBlock {
            source,
            handle,
            raw: raw as u32,
            contents: raw as u32,
            contents_len: (stored.len() - BLOCK_TRAILER_LEN) as u32,
        });
        Ok(())
    }

    /// Appends a block made on the host: `contents`, stored uncompressed.
    pub(crate) fn push_contents(
        &mut self,
        source: usize,
        contents: &[u8],
    ) -> Result<(), DeviceError> {
        let handle = BlockHandle {
            offset: 0,
            size: contents.len() as u64,
        };
        let mut stored = Vec::with_capacity(contents.len() + BLOCK_TRAILER_LEN);
        stored.extend_from_slice(contents);
        stored.extend_from_slice(&block_trailer(contents, CompressionType::None));
        self.push_stored(source, handle, &stored)
    }

    /// A name for error messages; its index.
    pub(crate) fn name(&mut self, name: String) -> usize {
        self.names.push(name);
        self.names.len() - 1
    }
}

/// Encodes `entries` as one uncompressed block's contents.
pub(crate) fn encode_block<'e>(entries: impl Iterator<Item = (&'e [u8], &'e [u8])>) -> Vec<u8> {
    let mut builder = BlockBuilder::new(HOST_BLOCK_RESTART_INTERVAL);
    for (key, value) in entries {
        builder.add(key, value);
    }
    builder.into_contents()
}

/// A block that is part of a run but not part of a file any more: the rest
/// of a split block, stored (contents and trailer).
struct Leftover {
    stored: Vec<u8>,
    from: String,
}

/// A run's position between slices.
struct RunCursor {
    /// (table, block) pairs in key order.
    blocks: Vec<(usize, usize)>,
    /// Next block not yet read.
    next: usize,
    /// The part of a split block that belongs to later slices.
    leftover: Option<Leftover>,
}

/// Cuts a job's input into slices of about `slice_input_bytes`.
pub(crate) struct SlicePlanner {
    /// Pinned memory that slices are read into, when there is a device.
    staging: Option<Arc<StagingPool>>,
    tables: Vec<InputTable>,
    /// The job's key range.
    range: KeyRange,
    runs: Vec<RunCursor>,
    slice_input_bytes: u64,
    done: bool,
}

fn input_error(error: shale_format::Error) -> DeviceError {
    DeviceError::new(format!("input: {error}"))
}

impl SlicePlanner {
    /// Opens every input table (footer and index block). Returns the
    /// planner and the bytes of the input files.
    pub(crate) fn new(
        job: &CompactionJob,
        io: &dyn JobIo,
        slice_input_bytes: u64,
        staging: Option<Arc<StagingPool>>,
    ) -> Result<SlicePlanner, DeviceError> {
        let mut tables = Vec::new();
        let mut runs = Vec::new();
        for run in &job.inputs {
            let (blocks, _) =
                run_blocks_in_range(io, job, &run.files, &mut tables).map_err(input_error)?;
            runs.push(RunCursor {
                blocks,
                next: 0,
                leftover: None,
            });
        }
        Ok(SlicePlanner {
            staging,
            tables,
            range: job.range.clone(),
            runs,
            slice_input_bytes: slice_input_bytes.max(1),
            done: false,
        })
    }

    /// The limit of the next slice, by the one slicing rule of
    /// [`crate::inputs::slice_limit`]. `None`: the rest is the last slice.
    fn next_limit(&self) -> Option<Vec<u8>> {
        let tables = &self.tables;
        let remaining = self.runs.iter().flat_map(|run| {
            // A leftover's keys sort below the run's next block's index key;
            // with no next block, the run's last index key (its largest key)
            // bounds them.
            let leftover = run.leftover.as_ref().and_then(|leftover| {
                let &(t, b) = run.blocks.get(run.next).or(run.blocks.last())?;
                Some((
                    tables[t].blocks[b].0.as_slice(),
                    leftover.stored.len() as u64,
                ))
            });
            let unread = run.blocks[run.next..].iter().map(|&(t, b)| {
                let (key, handle) = &tables[t].blocks[b];
                (key.as_slice(), handle.size + BLOCK_TRAILER_LEN as u64)
            });
            leftover.into_iter().chain(unread)
        });
        slice_limit(remaining, self.slice_input_bytes)
    }

    /// Reads the next slice; `None` once the input is used up.
    pub(crate) fn next_slice(&mut self) -> Result<Option<SliceInput>, DeviceError> {
        if self.done {
            return Ok(None);
        }
        let limit = self.next_limit();
        // Read straight into pinned memory, which goes up as it is; sized
        // for a slice and its margin. A slice reads whole blocks up to its
        // limit and splits the one past it, so it passes the limit by a few
        // KB (at most a block per run): a sixteenth is room enough, and a
        // slice that needs more grows its buffer.
        let data = match &self.staging {
            Some(pool) => {
                let expected = self.slice_input_bytes.min(MAX_PINNED_SLICE_GUESS);
                HostBytes::pinned_exact(pool, (expected + expected / 16) as usize)
            }
            None => HostBytes::default(),
        };
        let mut slice = SliceInput {
            data,
            last: limit.is_none(),
            ..SliceInput::default()
        };
        self.done = slice.last;
        let range = &self.range;
        let within = |key: &[u8]| {
            limit
                .as_deref()
                .is_none_or(|l| compare_internal_keys(key, l).is_le())
                && !range.is_above(extract_user_key(key))
        };
        let tables = &self.tables;
        for run in &mut self.runs {
            slice.run_first_block.push(slice.blocks.len());
            // In key order: the leftover, then the unread blocks. Whole ones
            // while they are at or below the limit; one past it is split,
            // and when all of it fell below the limit the next one is tried.
            let mut take = Vec::new();
            let mut candidate = run.leftover.take();
            loop {
                let next_index_key = run
                    .blocks
                    .get(run.next)
                    .map(|&(t, b)| &tables[t].blocks[b].0);
                let stored = match candidate.take() {
                    // A leftover's keys sort below the next block's index key.
                    Some(left) if next_index_key.is_some_and(|k| within(k)) || limit.is_none() => {
                        let source = slice.name(left.from.clone());
                        let handle = BlockHandle {
                            offset: 0,
                            size: (left.stored.len() - BLOCK_TRAILER_LEN) as u64,
                        };
                        slice.push_stored(source, handle, &left.stored)?;
                        continue;
                    }
                    Some(left) => left,
                    None => {
                        let Some(&(t, b)) = run.blocks.get(run.next) else {
                            break;
                        };
                        // The run's first block may hold keys below the
                        // range: it is split like a block past the limit.
                        let lower_edge = run.next == 0 && range.lower.is_some();
                        run.next += 1;
                        if !lower_edge && within(&tables[t].blocks[b].0) {
                            take.push((t, b));
                            continue;
                        }
                        read_runs_blocks(tables, &std::mem::take(&mut take), &mut slice)?;
                        Leftover {
                            stored: read_stored(tables, t, b)?,
                            from: tables[t].name.clone(),
                        }
                    }
                };
                // Split: entries at or below the limit stay here, the rest
                // waits; entries outside the job's range go.
                let mut parsed = unpack_block(
                    &stored.stored,
                    &stored.from,
                    BlockHandle {
                        offset: 0,
                        size: (stored.stored.len() - BLOCK_TRAILER_LEN) as u64,
                    },
                )
                .map_err(input_error)?;
                if !range.is_full() {
                    parsed.retain_range(range);
                }
                let count = parsed.entries.len();
                let first_past = (0..count)
                    .find(|&e| !within(parsed.key(e)))
                    .unwrap_or(count);
                let entries = |range: std::ops::Range<usize>| {
                    let parsed = &parsed;
                    range.map(move |e| (parsed.key(e), parsed.value(e)))
                };
                if first_past > 0 {
                    let source = slice.name(format!("{} (split block)", stored.from));
                    slice.push_contents(source, &encode_block(entries(0..first_past)))?;
                }
                if first_past < count {
                    let contents = encode_block(entries(first_past..count));
                    let mut rest = contents.clone();
                    rest.extend_from_slice(&block_trailer(&contents, CompressionType::None));
                    run.leftover = Some(Leftover {
                        stored: rest,
                        from: stored.from,
                    });
                    break;
                }
            }
            read_runs_blocks(tables, &take, &mut slice)?;
        }
        slice.run_first_block.push(slice.blocks.len());
        slice.bytes_read = slice.data.as_slice().len() as u64;
        Ok(Some(slice))
    }
}

/// One block as stored (contents and trailer).
fn read_stored(tables: &[InputTable], table: usize, block: usize) -> Result<Vec<u8>, DeviceError> {
    let stretches = read_stretches(tables, &[(table, block)], None).map_err(input_error)?;
    // The block's own range: a direct read leaves slack around it.
    Ok(stretches
        .into_iter()
        .next()
        .and_then(|mut s| {
            let range = s.blocks.first()?.1.clone();
            s.buffer.truncate(range.end);
            s.buffer.drain(..range.start);
            Some(s.buffer)
        })
        .unwrap_or_default())
}

/// Reads the blocks `take` (table, block) of one run into `slice`, one read
/// per stretch of consecutive blocks of a file.
fn read_runs_blocks(
    tables: &[InputTable],
    take: &[(usize, usize)],
    slice: &mut SliceInput,
) -> Result<(), DeviceError> {
    // Straight onto the end of the slice's buffer: no copy.
    for (table, blocks) in
        read_stretches_into(tables, take, &mut slice.data).map_err(input_error)?
    {
        let source = slice.name(tables[table].name.clone());
        for (handle, range) in blocks {
            slice.add_stored(source, handle, range)?;
        }
    }
    Ok(())
}
