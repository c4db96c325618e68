//! Pack on the device: kept entries into finished table files. What runs
//! where:
//!
//! | step | where |
//! | --- | --- |
//! | key/value lengths and shared prefixes of kept entries | device: `kept_sizes` |
//! | block and file boundaries (one sequential scan over integers), restart-group output offsets | host: `parallel::plan::plan_boundaries_from_sizes`, `group_layout` |
//! | data block encoding, one work item per restart group | device: `encode_groups` |
//! | first/last keys of each block (index entries, file bounds) | device: `gather_keys` |
//! | Snappy compression | host (the device has no Snappy) |
//! | Bloom filters: byte vector, then folded into bits (Algorithm 2) | device: `bloom_set`, `bloom_fold` |
//! | index block, filter block layout, metaindex, footer, block trailers (CRC32C) | host: `TableAssembler`, as every executor |
//!
//! The encoded blocks come back on the transfer queue while the device
//! gathers the blocks' first and last keys on the compute queue.
//!
//! Per slice only finished files are packed; the blocks of the file still
//! open at the end of a slice (and the entries of its unfinished block, as
//! one more block) come back uncompressed and are carried into the next
//! slice, where they are packed again together with that slice's entries:
//! block and file boundaries are then decided from the open file's first
//! entry, exactly as one pass over the whole job decides them.
//!
//! The device has a `block_checksum` kernel for output trailers, tested
//! against `block_checksum`, but the pipeline does not use it:
//! `TableAssembler::write_data_block` computes the trailer of the block as
//! stored (compressed by the host or not), so a device CRC of the
//! uncompressed block would not be the one written.

use std::ops::Range;

use rayon::prelude::*;
use shale_format::bloom::{filter_bits, probes_for_bits_per_key};
use shale_format::coding::varint_length;
use shale_format::filter_block::{assemble_filters, plan_filters};
use shale_format::format::{maybe_compress_owned, CompressionType, BLOCK_TRAILER_LEN};
use shale_format::options::TableOptions;
use shale_format::table_assembler::TableAssembler;

use super::device::DeviceError;
use super::pipeline::DeviceEntries;
use super::session::{mem, Arg, Session};
use crate::job::CompactionJob;
use crate::parallel::pack::{PlannedFile, ScanState};
use crate::parallel::plan::{plan_boundaries_from_sizes, EntrySize};

/// A finished table, in memory, before it has a file number.
#[derive(Debug)]
pub(crate) struct AssembledFile {
    pub(crate) bytes: Vec<u8>,
    pub(crate) smallest: Vec<u8>,
    pub(crate) largest: Vec<u8>,
    pub(crate) entries: u64,
}

/// Where every restart group of every output block goes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct GroupLayout {
    /// Per group: first kept entry, entry count, output offset, first group
    /// of its block, 1 for the last group of a block.
    pub(crate) first: Vec<u32>,
    pub(crate) count: Vec<u32>,
    pub(crate) offset: Vec<u32>,
    pub(crate) block_first_group: Vec<u32>,
    pub(crate) last: Vec<u8>,
    /// Per block: its bytes in the output buffer.
    pub(crate) blocks: Vec<Range<usize>>,
}

/// Lays out the planned blocks (ranges of kept entries) back to back: each
/// block's restart groups of `restart_interval` entries, then its restart
/// array. Offsets follow from the sizes exactly as `BlockBuilder` writes.
pub(crate) fn group_layout(
    sizes: &[EntrySize],
    blocks: &[Range<usize>],
    restart_interval: usize,
) -> GroupLayout {
    let interval = restart_interval.max(1);
    let mut layout = GroupLayout::default();
    let mut cursor = 0usize;
    for block in blocks {
        let block_start = cursor;
        let first_group = layout.first.len() as u32;
        let mut group = block.start;
        while group < block.end {
            let end = (group + interval).min(block.end);
            layout.first.push(group as u32);
            layout.count.push((end - group) as u32);
            layout.offset.push(cursor as u32);
            layout.block_first_group.push(first_group);
            layout.last.push(0);
            for (j, size) in sizes.iter().enumerate().take(end).skip(group) {
                let shared = if j == group { 0 } else { size.shared as usize };
                let non_shared = size.key_len as usize - shared;
                cursor += varint_length(shared as u64)
                    + varint_length(non_shared as u64)
                    + varint_length(u64::from(size.value_len))
                    + non_shared
                    + size.value_len as usize;
            }
            group = end;
        }
        if let Some(last) = layout.last.last_mut() {
            *last = 1;
        }
        let groups = layout.first.len() - first_group as usize;
        cursor += 4 * groups + 4;
        layout.blocks.push(block_start..cursor);
    }
    layout
}

/// What packing one slice produced.
#[derive(Debug, Default)]
pub(crate) struct PackedSlice {
    /// Finished files, in key order, to be laid out.
    pub(crate) files: Vec<FileParts>,
    /// The file still open: its blocks' uncompressed contents, for the next
    /// slice (empty after the last slice).
    pub(crate) open_blocks: Vec<Vec<u8>>,
    /// Entries in `open_blocks`.
    pub(crate) open_entries: usize,
}

/// Packs the kept entries of a slice into finished files; the open file's
/// entries come back as blocks for the next slice unless `last`.
pub(crate) fn pack_on_device(
    session: &mut Session<'_>,
    pool: &rayon::ThreadPool,
    job: &CompactionJob,
    entries: &DeviceEntries,
    last: bool,
) -> Result<PackedSlice, DeviceError> {
    let m = entries.kept_count;
    let sizes = session.alloc::<u32>("kept sizes", 3 * m)?;
    session.launch(
        "kept_sizes",
        m,
        None,
        m as u64 * 16,
        &[
            mem(&entries.keys),
            mem(&entries.key_offset),
            mem(&entries.key_len),
            mem(&entries.value_len),
            mem(&entries.kept),
            Arg::U32(m as u32),
            mem(&sizes),
        ],
    )?;
    let flat = session.download("kept sizes", &sizes, 3 * m)?;
    let host_sizes: Vec<EntrySize> = flat
        .chunks_exact(3)
        .map(|s| EntrySize {
            key_len: s[0],
            value_len: s[1],
            shared: s[2],
        })
        .collect();

    // Boundaries: the one sequential scan, over integers.
    let mut state = ScanState {
        file_open: false,
        raw_data_bytes: 0,
    };
    let (planned, unfinished_block) =
        plan_boundaries_from_sizes(&host_sizes, &entries.stops, &mut state, job, last);
    // Finished files first; only the last planned file may still be open.
    let finished: Vec<&PlannedFile> = planned.iter().filter(|f| f.finish).collect();
    let mut block_ranges: Vec<Range<usize>> = finished
        .iter()
        .flat_map(|f| f.blocks.iter().cloned())
        .collect();
    let finished_blocks = block_ranges.len();
    let finished_entries = block_ranges.last().map_or(0, |b| b.end);
    block_ranges.extend(
        planned
            .iter()
            .filter(|f| !f.finish)
            .flat_map(|f| f.blocks.iter().cloned()),
    );
    if !unfinished_block.is_empty() {
        block_ranges.push(unfinished_block);
    }
    if block_ranges.last().map_or(0, |b| b.end) != m {
        return Err(DeviceError::new(
            "the boundary plan does not cover every kept entry",
        ));
    }
    let layout = group_layout(&host_sizes, &block_ranges, job.table.block_restart_interval);
    let out_len = layout.blocks.last().map_or(0, |b| b.end);
    if out_len > u32::MAX as usize {
        return Err(DeviceError::new(format!(
            "{out_len} bytes of output blocks: past 32-bit offsets"
        )));
    }

    // Encode every restart group.
    let groups = layout.first.len();
    let group_buffers = [
        session.upload("output groups", &layout.first)?,
        session.upload("output groups", &layout.count)?,
        session.upload("output groups", &layout.offset)?,
        session.upload("output groups", &layout.block_first_group)?,
    ];
    let group_last = session.upload("output groups", &layout.last)?;
    let out = session.alloc::<u8>("output blocks", out_len)?;
    session.launch(
        "encode_groups",
        groups,
        None,
        out_len as u64,
        &[
            mem(&entries.keys),
            mem(&entries.key_offset),
            mem(&entries.data.buffer),
            mem(&entries.value_offset),
            mem(&entries.kept),
            mem(&sizes),
            mem(&group_buffers[0]),
            mem(&group_buffers[1]),
            mem(&group_buffers[2]),
            mem(&group_buffers[3]),
            mem(&group_last),
            Arg::U32(groups as u32),
            mem(&out),
        ],
    )?;
    // The blocks come back on the transfer queue while the device gathers
    // the boundary keys.
    let encoded = session.download_async("output blocks", &out, out_len, &[])?;

    // The first and last key of every finished block.
    let mut which = Vec::with_capacity(2 * finished_blocks);
    let mut key_at = Vec::with_capacity(2 * finished_blocks + 1);
    let mut key_bytes = 0usize;
    for range in &block_ranges[..finished_blocks] {
        for j in [range.start, range.end - 1] {
            which.push(j as u32);
            key_at.push(key_bytes);
            key_bytes += host_sizes[j].key_len as usize;
        }
    }
    key_at.push(key_bytes);
    let which_buffer = session.upload("boundary keys", &which)?;
    let at: Vec<u32> = key_at.iter().map(|&a| a as u32).collect();
    let at_buffer = session.upload("boundary keys", &at)?;
    let gathered = session.alloc::<u8>("boundary keys", key_bytes)?;
    session.launch(
        "gather_keys",
        which.len(),
        None,
        key_bytes as u64,
        &[
            mem(&entries.keys),
            mem(&entries.key_offset),
            mem(&entries.key_len),
            mem(&entries.kept),
            mem(&which_buffer),
            mem(&at_buffer),
            Arg::U32(which.len() as u32),
            mem(&gathered),
        ],
    )?;
    let gathered = session.download("boundary keys", &gathered, key_bytes)?;
    let boundary_key = |w: usize| &gathered[key_at[w]..key_at[w + 1]];
    let encoded = session.finish_download(encoded)?;
    drop(out);
    let open_blocks: Vec<Vec<u8>> = layout.blocks[finished_blocks..]
        .iter()
        .map(|range| encoded[range.clone()].to_vec())
        .collect();
    let open_entries = m - finished_entries;
    if finished_blocks == 0 {
        return Ok(PackedSlice {
            files: Vec::new(),
            open_blocks,
            open_entries,
        });
    }

    // Snappy on the host, block by block in parallel.
    let compression = job.table.table_options().compression;
    let compressed: Vec<(Vec<u8>, CompressionType)> = pool.install(|| {
        layout.blocks[..finished_blocks]
            .par_iter()
            .map(|range| maybe_compress_owned(encoded[range.clone()].to_vec(), compression))
            .collect()
    });
    drop(encoded);

    // Files: their blocks (indices into block_ranges) and filter plans.
    let mut file_blocks = Vec::with_capacity(finished.len());
    let mut next_block = 0;
    for file in &finished {
        file_blocks.push(next_block..next_block + file.blocks.len());
        next_block += file.blocks.len();
    }
    let filters = match job.table.bloom_bits_per_key {
        Some(bits_per_key) => Some(bloom_on_device(
            session,
            entries,
            &block_ranges,
            &compressed,
            &file_blocks,
            finished_entries,
            bits_per_key,
        )?),
        None => None,
    };

    // The parts of each file; the writing thread lays them out (as every
    // executor does, with TableAssembler) while the device goes on.
    let options = job.table.table_options();
    let mut filters = filters.map(|f| f.into_iter());
    let mut compressed = compressed.into_iter();
    let files = file_blocks
        .iter()
        .map(|blocks| FileParts {
            blocks: blocks
                .clone()
                .zip(compressed.by_ref())
                .map(|(b, (contents, kind))| StoredBlock {
                    contents,
                    kind,
                    first_key: boundary_key(2 * b).to_vec(),
                    last_key: boundary_key(2 * b + 1).to_vec(),
                })
                .collect(),
            filters: filters.as_mut().and_then(Iterator::next),
            entries: blocks.clone().map(|b| block_ranges[b].len() as u64).sum(),
            options: options.clone(),
        })
        .collect();
    Ok(PackedSlice {
        files,
        open_blocks,
        open_entries,
    })
}

/// One output data block as stored, with its first and last key.
#[derive(Debug)]
pub(crate) struct StoredBlock {
    contents: Vec<u8>,
    kind: CompressionType,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
}

/// A finished output file in parts: its data blocks (encoded on the
/// device, compressed on the host) and its Bloom filters.
#[derive(Debug)]
pub(crate) struct FileParts {
    blocks: Vec<StoredBlock>,
    /// The filters `plan_filters` asks for, when the table has a filter.
    filters: Option<Vec<Vec<u8>>>,
    entries: u64,
    options: TableOptions,
}

impl FileParts {
    /// Lays the file out: data blocks with trailers, filter block,
    /// metaindex, index block, footer (`TableAssembler`, as every executor).
    pub(crate) fn assemble(self) -> shale_format::Result<AssembledFile> {
        let (Some(first), Some(last)) = (self.blocks.first(), self.blocks.last()) else {
            return Err(shale_format::Error::InvalidArgument(
                "an output file without data blocks".into(),
            ));
        };
        let (smallest, largest) = (first.first_key.clone(), last.last_key.clone());
        let mut assembler = TableAssembler::new(self.options, Vec::new());
        for block in &self.blocks {
            assembler.write_data_block(
                &block.first_key,
                &block.last_key,
                &block.contents,
                block.kind,
            )?;
        }
        let filter = self.filters.as_deref().map(assemble_filters);
        let (bytes, _) = assembler.finish_with_filter_block(filter)?;
        Ok(AssembledFile {
            bytes,
            smallest,
            largest,
            entries: self.entries,
        })
    }
}

/// Builds every filter of every file on the device: per file, the filters
/// `plan_filters` asks for (from the blocks' places in the file), each
/// empty or over the keys of its blocks.
fn bloom_on_device(
    session: &mut Session<'_>,
    entries: &DeviceEntries,
    block_ranges: &[Range<usize>],
    compressed: &[(Vec<u8>, CompressionType)],
    file_blocks: &[Range<usize>],
    finished_entries: usize,
    bits_per_key: u32,
) -> Result<Vec<Vec<Vec<u8>>>, DeviceError> {
    let probes = probes_for_bits_per_key(bits_per_key);
    // Per file, per filter: None (empty) or (index among device filters, bytes).
    let mut plans: Vec<Vec<Option<(usize, usize)>>> = Vec::with_capacity(file_blocks.len());
    let mut filter_first = Vec::new();
    let mut filter_bits_list = Vec::new();
    let mut filter_out = Vec::new();
    let mut out_bytes = 0usize;
    for blocks in file_blocks {
        let mut offset = 0u64;
        let places: Vec<(u64, u64)> = blocks
            .clone()
            .map(|b| {
                let start = offset;
                offset += (compressed[b].0.len() + BLOCK_TRAILER_LEN) as u64;
                (start, offset)
            })
            .collect();
        let mut file_plan = Vec::new();
        for range in plan_filters(&places) {
            if range.is_empty() {
                file_plan.push(None);
                continue;
            }
            let first = block_ranges[blocks.start + range.start].start;
            let end = block_ranges[blocks.start + range.end - 1].end;
            let bits = filter_bits(end - first, bits_per_key);
            file_plan.push(Some((filter_first.len(), bits / 8)));
            filter_first.push(first as u32);
            filter_bits_list.push(bits as u32);
            filter_out.push(out_bytes as u32);
            out_bytes += bits / 8;
        }
        plans.push(file_plan);
    }
    let filters = filter_first.len();
    // Filters cover the finished files' entries one after another: close
    // the list there (the open file's entries get no filter yet).
    filter_first.push(finished_entries as u32);
    if out_bytes.saturating_mul(8) > u32::MAX as usize {
        return Err(DeviceError::new("Bloom filters past 32-bit offsets"));
    }
    let first_buffer = session.upload("filter ranges", &filter_first)?;
    let bits_buffer = session.upload("filter sizes", &filter_bits_list)?;
    let out_buffer = session.upload("filter offsets", &filter_out)?;
    let byte_vector = session.alloc_zeroed::<u8>("the Bloom byte vector", out_bytes * 8)?;
    session.launch(
        "bloom_set",
        finished_entries,
        None,
        finished_entries as u64 * u64::from(probes),
        &[
            mem(&entries.keys),
            mem(&entries.key_offset),
            mem(&entries.key_len),
            mem(&entries.kept),
            mem(&first_buffer),
            Arg::U32(filters as u32),
            mem(&bits_buffer),
            mem(&out_buffer),
            Arg::U32(u32::from(probes)),
            mem(&byte_vector),
        ],
    )?;
    let bit_arrays = session.alloc::<u8>("Bloom filters", out_bytes)?;
    session.launch(
        "bloom_fold",
        out_bytes,
        None,
        out_bytes as u64 * 8,
        &[
            mem(&byte_vector),
            Arg::U32(out_bytes as u32),
            mem(&bit_arrays),
        ],
    )?;
    let bit_arrays = session.download("Bloom filters", &bit_arrays, out_bytes)?;
    Ok(plans
        .into_iter()
        .map(|file_plan| {
            file_plan
                .into_iter()
                .map(|filter| match filter {
                    None => Vec::new(),
                    Some((f, bytes)) => {
                        let start = filter_out[f] as usize;
                        let mut filter = bit_arrays[start..start + bytes].to_vec();
                        filter.push(probes);
                        filter
                    }
                })
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_format::block_builder::{shared_prefix_len, BlockBuilder};

    #[test]
    fn layout_matches_the_block_builder() {
        let keys: Vec<Vec<u8>> = (0..100u32)
            .map(|i| format!("key{:05}", i * 7).into_bytes())
            .collect();
        let values: Vec<Vec<u8>> = (0..100usize).map(|i| vec![1; i * 3 % 150]).collect();
        let sizes: Vec<EntrySize> = (0..100)
            .map(|j| EntrySize {
                key_len: keys[j].len() as u32,
                value_len: values[j].len() as u32,
                shared: if j == 0 {
                    0
                } else {
                    shared_prefix_len(&keys[j - 1], &keys[j]) as u32
                },
            })
            .collect();
        for interval in [1, 2, 5, 16] {
            let blocks = vec![0..1, 1..40, 40..41, 41..100];
            let layout = group_layout(&sizes, &blocks, interval);
            for (b, range) in blocks.iter().enumerate() {
                let mut builder = BlockBuilder::new(interval);
                for j in range.clone() {
                    builder.add(&keys[j], &values[j]);
                }
                assert_eq!(
                    builder.current_size_estimate(),
                    layout.blocks[b].len(),
                    "interval {interval} block {b}"
                );
            }
            assert_eq!(
                layout.last.iter().filter(|&&l| l == 1).count(),
                blocks.len()
            );
        }
    }
}
