//! The input side every executor that works in slices shares (`parallel`,
//! `opencl`, and the boundaries of sub-compactions): opening a job's input
//! tables (footer and index), the blocks of a run that can hold keys of the
//! job's range, reading stretches of consecutive blocks with one read each,
//! and the one rule that cuts a job into slices.
//!
//! The slicing rule: a slice ends at a *user key* `u`, and takes every
//! entry whose user key is at most `u` (the limit is the internal key
//! `(u, sequence 0)`, the last one `u` can have). `u` is the user key of
//! the index key of the block at which the unread input, taken in key
//! order over all runs, passes the slice size; so every slice takes at
//! least one whole block, and all versions of a user key meet in one slice.

use std::ops::Range;
use std::sync::Arc;

use shale_format::block::Block;
use shale_format::comparator::compare_internal_keys;
use shale_format::format::{BlockHandle, Footer, RandomAccess, BLOCK_TRAILER_LEN, FOOTER_LEN};
use shale_format::internal_key::{extract_user_key, InternalKey, ValueType};
use shale_format::iterator::KvIterator;
use shale_format::{Error, Result};

use crate::job::{CompactionJob, JobFile, JobIo, KeyRange};
use crate::pool::{set_len_for_overwrite, Pool};

/// One input table: its source and data block handles with index keys.
pub(crate) struct InputTable {
    pub(crate) name: String,
    pub(crate) source: Arc<dyn RandomAccess>,
    /// (upper bound of the block's keys, handle) per data block: the index
    /// separator, or the file's largest key for the last block.
    pub(crate) blocks: Vec<(Vec<u8>, BlockHandle)>,
}

impl InputTable {
    /// The blocks that can hold a key of `range`, by their index keys: from
    /// the first whose upper bound is not below the range to the first
    /// whose upper bound is at or past its end (that one may still hold
    /// keys inside). Only the first can hold keys below the range and only
    /// the last keys past it. REQUIRES: the table's file overlaps `range`
    /// (its first block has no lower bound here but the file's smallest
    /// key).
    pub(crate) fn blocks_in_range(&self, range: &KeyRange) -> std::ops::Range<usize> {
        let count = self.blocks.len();
        let start = match range.lower {
            Some(_) => self
                .blocks
                .partition_point(|(key, _)| range.is_below(extract_user_key(key))),
            None => 0,
        };
        let end = match range.upper {
            Some(_) => (self
                .blocks
                .partition_point(|(key, _)| !range.is_above(extract_user_key(key)))
                + 1)
            .min(count),
            None => count,
        };
        start..end.max(start)
    }
}

/// The blocks of one run that can hold a key of the job's range, as
/// (table, block) pairs in key order, opening the run's tables that overlap
/// the range into `tables`. Returns the pairs and the bytes of the files
/// opened.
pub(crate) fn run_blocks_in_range(
    io: &dyn JobIo,
    job: &CompactionJob,
    files: &[JobFile],
    tables: &mut Vec<InputTable>,
) -> Result<(Vec<(usize, usize)>, u64)> {
    let mut blocks = Vec::new();
    let mut bytes = 0;
    for file in files.iter().filter(|f| job.file_in_range(f)) {
        let table = open_table(io, file)?;
        bytes += file.file_size;
        let index = tables.len();
        blocks.extend(table.blocks_in_range(&job.range).map(|b| (index, b)));
        tables.push(table);
    }
    Ok((blocks, bytes))
}

pub(crate) fn open_table(io: &dyn JobIo, file: &JobFile) -> Result<InputTable> {
    let name = format!("{:06}.ldb", file.number);
    let source = io.open_input(file)?;
    if file.file_size < FOOTER_LEN as u64 {
        return Err(Error::corruption(0, "file too short to be a table").at(&name, 0));
    }
    let mut footer = [0u8; FOOTER_LEN];
    let footer_offset = file.file_size - FOOTER_LEN as u64;
    source
        .read_exact_at(&mut footer, footer_offset)
        .map_err(|e| Error::io(format!("reading the footer of {name}"), e))?;
    let footer = Footer::decode(&footer).map_err(|e| e.at(&name, footer_offset))?;
    let index = shale_format::format::read_block(
        &*source,
        &name,
        file.file_size,
        footer.index_handle,
        true,
    )?;
    let index = Block::new(index).map_err(|e| e.at(&name, footer.index_handle.offset))?;
    let mut iter = index.iter(Arc::new(shale_format::comparator::InternalKeyComparator));
    let mut blocks = Vec::new();
    iter.seek_to_first();
    while iter.valid() {
        let handle = BlockHandle::decode(iter.value())
            .map_err(|e| e.at(&name, footer.index_handle.offset))?;
        blocks.push((iter.key().to_vec(), handle));
        iter.next();
    }
    iter.status()
        .map_err(|e| e.at(&name, footer.index_handle.offset))?;
    // The index key of a file's last block is a short successor that may
    // sort after the next file's first keys; slicing needs upper bounds
    // that increase along a run, so use the file's largest key instead.
    if let Some(last) = blocks.last_mut() {
        last.0 = file.largest.clone();
    }
    Ok(InputTable {
        name,
        source,
        blocks,
    })
}

/// Length of the user-key prefix every key of `job` shares: that of its
/// smallest and largest input keys, since every key sorts between them.
pub(crate) fn shared_user_key_prefix(job: &CompactionJob) -> usize {
    let files = job.inputs.iter().flat_map(|run| &run.files);
    let smallest = files.clone().map(|f| extract_user_key(&f.smallest)).min();
    let largest = files.map(|f| extract_user_key(&f.largest)).max();
    match (smallest, largest) {
        (Some(a), Some(b)) => shale_format::block_builder::shared_prefix_len(a, b),
        _ => 0,
    }
}

/// The limit of the next slice (see the module documentation): `(u, 0)`
/// for the user key `u` of the index key of the block at which the unread
/// input passes `slice_input_bytes`, given as (index key, bytes) per unread
/// block in any order. `None`: the rest fits in one slice.
pub(crate) fn slice_limit<'a>(
    remaining: impl IntoIterator<Item = (&'a [u8], u64)>,
    slice_input_bytes: u64,
) -> Option<Vec<u8>> {
    let mut remaining: Vec<(&[u8], u64)> = remaining.into_iter().collect();
    let total: u64 = remaining.iter().map(|r| r.1).sum();
    if total <= slice_input_bytes {
        return None;
    }
    remaining.sort_by(|a, b| compare_internal_keys(a.0, b.0));
    let mut sum = 0;
    for (key, size) in remaining {
        sum += size;
        if sum >= slice_input_bytes {
            let user_key = extract_user_key(key);
            return Some(InternalKey::new(user_key, 0, ValueType::Deletion).into_encoded());
        }
    }
    None
}

/// Consecutive blocks of one input table, read with one read.
pub(crate) struct Stretch {
    /// Index of the table.
    pub(crate) table: usize,
    /// The bytes read: from the first block's offset to the last one's
    /// trailer (with direct I/O, some slack before and after).
    pub(crate) buffer: Vec<u8>,
    /// Per block: its handle in the file and the range of `buffer` holding
    /// its contents and trailer.
    pub(crate) blocks: Vec<(BlockHandle, Range<usize>)>,
}

/// Where one read goes: a stretch of consecutive blocks of one table.
struct StretchPlan {
    table: usize,
    /// File offsets of its first byte and one past its last.
    start: u64,
    end: u64,
    /// Per block: its handle and its range relative to `start`.
    blocks: Vec<(BlockHandle, Range<usize>)>,
}

/// The stretches of `take` ((table, block) pairs in key order): runs of
/// consecutive blocks of a table. Checks that the index's handles are in
/// order, do not overlap and stay inside the stretch.
fn plan_stretches(tables: &[InputTable], take: &[(usize, usize)]) -> Result<Vec<StretchPlan>> {
    let mut plans = Vec::new();
    let mut i = 0;
    while i < take.len() {
        let table_index = take[i].0;
        let table = &tables[table_index];
        let mut j = i;
        while j + 1 < take.len() && take[j + 1].0 == table_index && take[j + 1].1 == take[j].1 + 1 {
            j += 1;
        }
        let start = table.blocks[take[i].1].1.offset;
        let last = table.blocks[take[j].1].1;
        let end = last
            .offset
            .checked_add(last.size)
            .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64))
            .filter(|&e| e >= start && e - start <= u64::from(u32::MAX))
            .ok_or_else(|| {
                Error::corruption(last.offset, "bad block handle in the index").at(&table.name, 0)
            })?;
        let mut blocks = Vec::with_capacity(j + 1 - i);
        let mut previous_end = start;
        for &(_, b) in &take[i..=j] {
            let handle = table.blocks[b].1;
            let block_end = handle
                .offset
                .checked_add(handle.size)
                .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64))
                .filter(|&e| e <= end && handle.offset >= previous_end)
                .ok_or_else(|| {
                    Error::corruption(handle.offset, "block handles overlap or run backwards")
                        .at(&table.name, 0)
                })?;
            previous_end = block_end;
            blocks.push((
                handle,
                (handle.offset - start) as usize..(block_end - start) as usize,
            ));
        }
        plans.push(StretchPlan {
            table: table_index,
            start,
            end,
            blocks,
        });
        i = j + 1;
    }
    Ok(plans)
}

/// Reads `[start, start + into.len())` of `table` into `into`.
fn read_at(table: &InputTable, into: &mut [u8], start: u64) -> Result<()> {
    table
        .source
        .read_exact_at(into, start)
        .map_err(|e| Error::io(format!("reading {} at offset {start}", table.name), e))
}

/// Reads the blocks `take` ((table, block) pairs in key order), one read per
/// stretch of consecutive blocks of a table, into buffers from `buffers`
/// when given; checks that the index's handles are in order, do not
/// overlap and stay inside the stretch.
pub(crate) fn read_stretches(
    tables: &[InputTable],
    take: &[(usize, usize)],
    buffers: Option<&Pool<Vec<u8>>>,
) -> Result<Vec<Stretch>> {
    let mut stretches = Vec::new();
    for plan in plan_stretches(tables, take)? {
        let mut buffer = buffers.map(Pool::take).unwrap_or_default();
        let table = &tables[plan.table];
        let blocks = match table.source.direct_alignment() {
            Some(alignment) => {
                let mut reused = Reused {
                    buffer: &mut buffer,
                    len: 0,
                };
                let base = read_aligned_into(table, &plan, alignment, &mut reused)?;
                let len = reused.len;
                buffer.truncate(len);
                plan.blocks
                    .into_iter()
                    .map(|(handle, range)| (handle, base + range.start..base + range.end))
                    .collect()
            }
            None => {
                set_len_for_overwrite(&mut buffer, (plan.end - plan.start) as usize);
                read_at(table, &mut buffer, plan.start)?;
                plan.blocks
            }
        };
        stretches.push(Stretch {
            table: plan.table,
            buffer,
            blocks,
        });
    }
    Ok(stretches)
}

/// A buffer that stretches are read onto the end of.
pub(crate) trait GrowingBytes {
    /// Bytes in it.
    fn len(&self) -> usize;
    /// `extra` more bytes at its end, to be overwritten.
    fn grow(&mut self, extra: usize) -> &mut [u8];
}

impl GrowingBytes for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn grow(&mut self, extra: usize) -> &mut [u8] {
        let base = Vec::len(self);
        self.resize(base + extra, 0);
        &mut self[base..]
    }
}

/// A kept buffer written again from its start: its bytes are overwritten,
/// not zeroed first (they are read over, as `set_len_for_overwrite` does).
struct Reused<'a> {
    buffer: &'a mut Vec<u8>,
    len: usize,
}

impl GrowingBytes for Reused<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn grow(&mut self, extra: usize) -> &mut [u8] {
        let base = self.len;
        self.len += extra;
        if self.buffer.len() < self.len {
            self.buffer.resize(self.len, 0);
        }
        &mut self.buffer[base..self.len]
    }
}

/// Reads a stretch of a file read with direct I/O straight from the disk
/// onto the end of `dest`: the read widened to `alignment` and placed at an
/// aligned address, so no bounce buffer and no copy. The slack before and
/// after the stretch stays in `dest` (at most two alignments plus one); the
/// stretch's offset in `dest` comes back.
fn read_aligned_into(
    table: &InputTable,
    plan: &StretchPlan,
    alignment: usize,
    dest: &mut impl GrowingBytes,
) -> Result<usize> {
    let skip = (plan.start % alignment as u64) as usize;
    let wanted = skip + (plan.end - plan.start) as usize;
    let len = wanted.div_ceil(alignment) * alignment;
    let first = dest.len();
    let region = dest.grow(len + alignment);
    let pad = (alignment - region.as_ptr() as usize % alignment) % alignment;
    let start = plan.start - skip as u64;
    let read = table
        .source
        .read_up_to(&mut region[pad..pad + len], start)
        .and_then(|read| {
            if read >= wanted {
                Ok(())
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            }
        })
        .map_err(|e| Error::io(format!("reading {} at offset {start}", table.name), e));
    read.map(|()| first + pad + skip)
}

/// [`read_stretches`], each stretch read straight onto the end of `dest`
/// (no buffer of its own, no copy): per stretch, its table and per block
/// its handle and its range in `dest`.
#[allow(
    clippy::type_complexity,
    reason = "a table index and its blocks, named where it is used"
)]
pub(crate) fn read_stretches_into(
    tables: &[InputTable],
    take: &[(usize, usize)],
    dest: &mut impl GrowingBytes,
) -> Result<Vec<(usize, Vec<(BlockHandle, Range<usize>)>)>> {
    let mut read = Vec::new();
    for plan in plan_stretches(tables, take)? {
        let table = &tables[plan.table];
        let base = match table.source.direct_alignment() {
            Some(alignment) => read_aligned_into(table, &plan, alignment, dest)?,
            None => {
                let base = dest.len();
                let into = dest.grow((plan.end - plan.start) as usize);
                read_at(table, into, plan.start)?;
                base
            }
        };
        let blocks = plan
            .blocks
            .into_iter()
            .map(|(handle, range)| (handle, base + range.start..base + range.end))
            .collect();
        read.push((plan.table, blocks));
    }
    Ok(read)
}
