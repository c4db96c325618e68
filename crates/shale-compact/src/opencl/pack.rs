//! Pack on the device: kept entries into finished table files. What runs
//! where:
//!
//! | step | where |
//! | --- | --- |
//! | key/value lengths, shared prefixes and encoded lengths of kept entries | device: `kept_sizes` |
//! | prefix sums of the encoded lengths | device: `scan_groups_u32` (`scan.rs`) |
//! | where a block starting at each kept entry would end, and its size: a binary search per entry over the prefix sums | device: `block_ends` |
//! | which of those blocks are the slice's, and where files end: one step per block | host: `steps::plan::plan_boundaries_from_block_ends` |
//! | every restart group's first entry and output offset | device: `layout_groups` |
//! | data block encoding, one work item per restart group | device: `encode_groups` |
//! | first/last keys of each block (index entries, file bounds) | device: `gather_keys` |
//! | Snappy compression, byte for byte the `snap` encoder's, and LevelDB's rule for keeping a block compressed | device: `snappy_compress`; the host reads the compressed lengths back and decides |
//! | blocks laid out as their files store them, with trailers, when compressed | device: `place_stored_blocks` |
//! | Bloom filters: byte vector, then folded into bits (Algorithm 2) | device: `bloom_set`, `bloom_fold` |
//! | block trailers (masked CRC32C) of blocks stored uncompressed | device: `block_trailers` |
//! | index block, filter block layout, metaindex, footer | host: `TableAssembler`, as every executor |
//!
//! The finished blocks come back file by file, as the file stores them,
//! on the transfer queue while the compute queue gathers the blocks' first
//! and last keys; then, per file, the host waits for that file's blocks and
//! starts its Bloom kernels without waiting (`Session::launch_async`), so
//! the device builds file f's filters while file f+1's blocks arrive.
//!
//! Per slice only finished files are packed; the blocks of the file still
//! open at the end of a slice (and the entries of its unfinished block, as
//! one more block) come back uncompressed and are carried into the next
//! slice, where they are packed again together with that slice's entries:
//! block and file boundaries are then decided from the open file's first
//! entry, exactly as one pass over the whole job decides them.
//!
//! Why the host still takes one step per block: a block's end depends on
//! where it starts, so the slice's blocks are a chain through the block
//! ends, and following it is one dependent read per block, which a single
//! device thread does no faster than the host. The host reads back 8
//! bytes per kept entry (into pinned memory: on a GPU, a copy by the
//! device alone) and touches the ends of only the slice's blocks.
//!
//! Output trailers (masked CRC32C of the block as stored and its type
//! byte) come from the device: written in place after each encoded block
//! (`block_trailers`) when the table stores blocks uncompressed, or after
//! each block as stored (`place_stored_blocks`) with Snappy. Either way a
//! file's data blocks come back exactly as the file holds them, and the
//! host writes them in one piece. Snappy on the device takes what was the
//! host's largest cost off it: compressing on the host pool was about half
//! of the executor's own CPU (`docs/results/opencl-pocl.md`, "Snappy on
//! the device").

use std::ops::Range;
use std::sync::Arc;

use opencl3::memory::Buffer;
use shale_format::bloom::{filter_bits, probes_for_bits_per_key};
use shale_format::filter_block::{assemble_filters, plan_filters};
use shale_format::format::{
    compression_pays, snappy_max_compressed_len, CompressionGate, CompressionType,
    BLOCK_TRAILER_LEN,
};
use shale_format::options::TableOptions;
use shale_format::table_assembler::TableAssembler;

use super::device_error::DeviceError;
use super::pinned::{HostBytes, StagingPool};
use super::pipeline::DeviceEntries;
use super::scan::exclusive_scan_u32_on_device;
use super::session::{mem, Arg, BytesDownload, Download, Session};
use crate::job::CompactionJob;
use crate::steps::plan::{plan_boundaries_from_block_ends, BlockEnd, PlannedFile, ScanState};

/// What laying out a finished table wrote.
pub(crate) struct AssembledFile {
    /// Bytes written.
    pub(crate) size: u64,
    pub(crate) smallest: Vec<u8>,
    pub(crate) largest: Vec<u8>,
    pub(crate) entries: u64,
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
    staging: &Arc<StagingPool>,
    job: &CompactionJob,
    entries: &DeviceEntries,
    last: bool,
) -> Result<PackedSlice, DeviceError> {
    let mut packer = Packer {
        session,
        staging,
        job,
        entries,
    };
    let sizes = packer.kept_sizes()?;
    let ends = packer.block_ends(&sizes)?;
    let plan = packer.plan_blocks(&ends, last)?;
    // The block ends' pinned buffer goes back to the pool.
    drop(ends);
    let (out, key_lengths) = packer.encode(&sizes, &plan)?;
    packer.write_trailers(&plan, &out)?;
    let compressed = packer.compress(&plan, &out)?;
    let downloads = packer.start_downloads(&plan, &out, compressed.as_ref())?;
    let boundary_keys = packer.boundary_keys(&key_lengths, &plan)?;
    let open_blocks = packer.open_blocks(&plan, downloads.open, downloads.open_range)?;
    let files = packer.finish_files(&plan, downloads.files, &boundary_keys, compressed.as_ref())?;
    drop(compressed);
    drop(out);
    Ok(PackedSlice {
        files,
        open_blocks,
        open_entries: entries.kept_count - plan.finished_entries,
    })
}

/// Packing one slice: the device session and the kept entries it packs.
struct Packer<'a, 's> {
    session: &'a mut Session<'s>,
    /// Pinned memory the finished files' blocks come back into.
    staging: &'a Arc<StagingPool>,
    job: &'a CompactionJob,
    entries: &'a DeviceEntries,
}

/// The kept entries on the device: three `u32` per entry (key and value
/// lengths, shared prefix) for encoding, and the prefix sums of their
/// encoded lengths that the block plan is made from (`kernels/plan.cl`).
struct KeptSizes {
    device: Buffer<u32>,
    sums: Buffer<u64>,
    /// The restart interval, and the length of each of its residue
    /// classes' runs in `sums`.
    interval: u32,
    per_class: u32,
}

/// Every kept entry's [`BlockEnd`] on the host: read back into pinned
/// memory from the executor's pool and taken where it lies, or, where
/// pinned memory cannot be had, an array of its own.
enum HostEnds {
    Pinned(HostBytes),
    Heap(Vec<BlockEnd>),
}

impl std::ops::Deref for HostEnds {
    type Target = [BlockEnd];

    fn deref(&self) -> &[BlockEnd] {
        match self {
            HostEnds::Pinned(bytes) => {
                // SAFETY: `BlockEnd` is `repr(C)` of two `u32` (no
                // padding; every bit pattern is one), and `Pinned` is made
                // only of bytes whose alignment and length `as_block_ends`
                // checked.
                let (_, ends, _) = unsafe { bytes.as_slice().align_to::<BlockEnd>() };
                ends
            }
            HostEnds::Heap(ends) => ends,
        }
    }
}

/// `bytes` as whole [`BlockEnd`]s, when they are aligned for them and
/// their length is a multiple of one.
fn as_block_ends(bytes: &[u8]) -> bool {
    // SAFETY: only looked at: whether the bytes split evenly.
    let (head, _, tail) = unsafe { bytes.align_to::<BlockEnd>() };
    head.is_empty() && tail.is_empty()
}

/// Block ends as read back into ordinary memory, two `u32` per entry (end,
/// size), taken as [`BlockEnd`]s where they lie rather than copied. A
/// trailing partial entry (never what the kernel writes) is dropped.
fn block_ends_of(mut flat: Vec<u32>) -> Vec<BlockEnd> {
    const {
        assert!(size_of::<BlockEnd>() == 2 * size_of::<u32>());
        assert!(align_of::<BlockEnd>() == align_of::<u32>());
    }
    flat.truncate(flat.len() / 2 * 2);
    let flat = flat.into_boxed_slice();
    let entries = flat.len() / 2;
    let pointer = Box::into_raw(flat).cast::<BlockEnd>();
    // SAFETY: `BlockEnd` is `repr(C)` of two `u32` (size and alignment
    // checked above, no padding), so the allocation of `2 * entries` u32
    // (exactly that many: a boxed slice) is one of `entries` BlockEnd of the
    // same size and alignment, every bit pattern of which is valid; end and
    // size are the fields' order and the kernel's.
    unsafe { Vec::from_raw_parts(pointer, entries, entries) }
}

/// Where the slice's output blocks go.
struct BlockPlan {
    /// Every block as a range of kept entries: the finished files' blocks,
    /// then the open file's (its unfinished block last).
    ranges: Vec<Range<usize>>,
    /// How many of `ranges` belong to finished files.
    finished_blocks: usize,
    /// Kept entries in finished files.
    finished_entries: usize,
    /// Per finished file, its blocks (indices into `ranges`).
    file_blocks: Vec<Range<usize>>,
    /// Per block (as `ranges`): its bytes in the output buffer.
    blocks: Vec<Range<usize>>,
    /// Per block, its first kept entry, output offset and first restart
    /// group, then one more record (kept entries, output bytes, groups):
    /// what `layout_groups` places the groups from.
    records: Vec<u32>,
    /// Restart groups in all blocks.
    groups: usize,
    /// Bytes of encoded blocks (with their trailers, when in place).
    out_len: usize,
    /// Bytes after each block for its trailer: [`BLOCK_TRAILER_LEN`] when
    /// the device writes trailers in place (blocks stored uncompressed),
    /// else 0.
    trailer_gap: usize,
}

impl BlockPlan {
    /// The bytes of `blocks` (indices into `ranges`) in the output buffer,
    /// the last one's trailer included when it is in place.
    fn bytes_of(&self, blocks: Range<usize>) -> Range<usize> {
        span(&self.blocks, blocks, self.trailer_gap, self.out_len)
    }
}

/// The bytes of `blocks` (indices into `layout`, each block's bytes in its
/// buffer), from the first one's start to the last one's end and `trailer`
/// bytes after it; empty at `empty_at` when `blocks` is.
fn span(
    layout: &[Range<usize>],
    blocks: Range<usize>,
    trailer: usize,
    empty_at: usize,
) -> Range<usize> {
    let start = layout.get(blocks.start).map_or(empty_at, |b| b.start);
    let end = blocks
        .end
        .checked_sub(1)
        .and_then(|b| layout.get(b))
        .map_or(start, |b| (b.end + trailer).max(start));
    start..end
}

/// The encoded blocks coming back: one read per finished file, and one for
/// the open file's blocks.
struct BlockDownloads {
    files: Vec<BytesDownload>,
    open: Download<u8>,
    open_range: Range<usize>,
}

/// The first and last key of every finished block, read back.
struct BoundaryKeys {
    gathered: Vec<u8>,
    /// Where key `w` starts in `gathered` (then the end).
    key_at: Vec<usize>,
}

impl BoundaryKeys {
    /// Key `w`: the first key of block `w / 2` when even, its last when odd.
    fn key(&self, w: usize) -> &[u8] {
        &self.gathered[self.key_at[w]..self.key_at[w + 1]]
    }
}

impl Packer<'_, '_> {
    /// Computes the kept entries' sizes and the prefix sums of their
    /// encoded lengths on the device; nothing comes back.
    fn kept_sizes(&mut self) -> Result<KeptSizes, DeviceError> {
        let entries = self.entries;
        let m = entries.kept_count;
        // An interval past the slice's entries places restarts as the
        // slice's count does (only at a block's first entry), without
        // residue classes of empty places.
        let interval = self.job.table.block_restart_interval.clamp(1, m.max(1));
        let per_class = m.div_ceil(interval);
        let classes = interval * per_class;
        // The entries' lengths, a zero, every residue class's run, a zero.
        let lengths = m + 1 + classes + 1;
        let too_large = || {
            DeviceError::new(format!(
                "{m} kept entries in restart groups of {interval}: past 32-bit indices"
            ))
        };
        let to_u32 = |n: usize| u32::try_from(n).map_err(|_| too_large());
        let (interval, per_class) = (to_u32(interval)?, to_u32(per_class)?);
        // The kernels index the sizes (3 per entry) and the lengths in u32.
        to_u32(lengths)?;
        to_u32(3 * m)?;
        let sizes = self.session.alloc::<u32>("kept sizes", 3 * m)?;
        let encoded = self.session.alloc::<u32>("encoded lengths", lengths)?;
        self.session.launch(
            "kept_sizes",
            classes + 1,
            None,
            m as u64 * 24,
            &[
                mem(&entries.keys),
                mem(&entries.key_offset),
                mem(&entries.key_len),
                mem(&entries.value_len),
                mem(&entries.kept),
                Arg::U32(m as u32),
                Arg::U32(interval),
                Arg::U32(per_class),
                mem(&sizes),
                mem(&encoded),
            ],
        )?;
        let sums =
            exclusive_scan_u32_on_device(self.session, "encoded lengths", &encoded, lengths)?;
        Ok(KeptSizes {
            device: sizes,
            sums,
            interval,
            per_class,
        })
    }

    /// For every kept entry, where a block starting there would end and
    /// its size (a binary search per entry on the device), read back.
    fn block_ends(&mut self, sizes: &KeptSizes) -> Result<HostEnds, DeviceError> {
        let m = self.entries.kept_count;
        let stops = &self.entries.stops;
        // OpenCL has no empty buffers; with no stop, one the kernel never reads.
        let stops_buffer = if stops.is_empty() {
            self.session.upload("output file cuts", &[0u32])?
        } else {
            self.session.upload("output file cuts", stops)?
        };
        let block_size = self.job.table.block_size.min(u32::MAX as usize);
        // A block of this many entries is full: each encodes to 3 bytes or more.
        let max_entries = block_size.div_ceil(3).max(1);
        let ends = self.session.alloc::<u32>("block ends", 2 * m)?;
        self.session.launch(
            "block_ends",
            m,
            None,
            m as u64 * 8,
            &[
                mem(&sizes.sums),
                Arg::U32(m as u32),
                Arg::U32(sizes.interval),
                Arg::U32(sizes.per_class),
                mem(&stops_buffer),
                Arg::U32(stops.len() as u32),
                Arg::U32(block_size as u32),
                Arg::U32(max_entries as u32),
                mem(&ends),
            ],
        )?;
        let pinned = self
            .session
            .download_u32_pinned("block ends", &ends, 2 * m, self.staging)?;
        Ok(match pinned {
            Some(bytes) if as_block_ends(bytes.as_slice()) => HostEnds::Pinned(bytes),
            _ => HostEnds::Heap(block_ends_of(self.session.download(
                "block ends",
                &ends,
                2 * m,
            )?)),
        })
    }

    /// Block and file boundaries, one step per block over the block ends,
    /// and where each block goes: finished files first; only the last
    /// planned file may still be open.
    fn plan_blocks(&self, ends: &[BlockEnd], last: bool) -> Result<BlockPlan, DeviceError> {
        let malformed = || DeviceError::new("the device's block plan is malformed");
        let mut state = ScanState {
            file_open: false,
            raw_data_bytes: 0,
        };
        let (planned, unfinished_block) =
            plan_boundaries_from_block_ends(ends, &self.entries.stops, &mut state, self.job, last)
                .ok_or_else(malformed)?;
        let finished: Vec<&PlannedFile> = planned.iter().filter(|f| f.finish).collect();
        let mut ranges: Vec<Range<usize>> = finished
            .iter()
            .flat_map(|f| f.blocks.iter().cloned())
            .collect();
        let finished_blocks = ranges.len();
        let finished_entries = ranges.last().map_or(0, |b| b.end);
        ranges.extend(
            planned
                .iter()
                .filter(|f| !f.finish)
                .flat_map(|f| f.blocks.iter().cloned()),
        );
        if !unfinished_block.is_empty() {
            ranges.push(unfinished_block);
        }
        if ranges.last().map_or(0, |b| b.end) != self.entries.kept_count {
            return Err(DeviceError::new(
                "the boundary plan does not cover every kept entry",
            ));
        }
        let trailer_gap = if self.trailers_in_place() {
            BLOCK_TRAILER_LEN
        } else {
            0
        };
        let interval = self.job.table.block_restart_interval.max(1);
        let mut blocks = Vec::with_capacity(ranges.len());
        let mut records = Vec::with_capacity(3 * ranges.len() + 3);
        let (mut out_len, mut groups) = (0usize, 0usize);
        for range in &ranges {
            let end = ends.get(range.start).ok_or_else(malformed)?;
            if end.end as usize != range.end {
                return Err(malformed());
            }
            records.extend([range.start as u32, out_len as u32, groups as u32]);
            blocks.push(out_len..out_len + end.len as usize);
            out_len += end.len as usize + trailer_gap;
            groups += range.len().div_ceil(interval);
            if out_len > u32::MAX as usize {
                return Err(DeviceError::new(format!(
                    "{out_len} bytes of output blocks: past 32-bit offsets"
                )));
            }
        }
        records.extend([
            self.entries.kept_count as u32,
            out_len as u32,
            groups as u32,
        ]);
        let mut file_blocks = Vec::with_capacity(finished.len());
        let mut next_block = 0;
        for file in &finished {
            file_blocks.push(next_block..next_block + file.blocks.len());
            next_block += file.blocks.len();
        }
        Ok(BlockPlan {
            ranges,
            finished_blocks,
            finished_entries,
            file_blocks,
            blocks,
            records,
            groups,
            out_len,
            trailer_gap,
        })
    }

    /// Whether the device writes each finished block's trailer in place
    /// after it: when blocks are stored uncompressed (a compressed block's
    /// trailer covers bytes only the host has). A file then comes back as
    /// its data blocks exactly as the file holds them, and goes out as it
    /// came, with no copy into the file's write buffer.
    fn trailers_in_place(&self) -> bool {
        self.job.table.table_options().compression == CompressionType::None
    }

    /// Places every restart group of every planned block, then encodes
    /// them, on the device. Returns the encoded blocks, and the lengths of
    /// the finished blocks' first and last keys.
    fn encode(
        &mut self,
        sizes: &KeptSizes,
        plan: &BlockPlan,
    ) -> Result<(Buffer<u8>, Buffer<u32>), DeviceError> {
        let (session, entries, groups) = (&mut *self.session, self.entries, plan.groups);
        let records = session.upload("output blocks' plan", &plan.records)?;
        let key_lengths = session.alloc::<u32>("boundary keys", 2 * plan.finished_blocks)?;
        let group_buffers = [
            session.alloc::<u32>("output groups", groups)?,
            session.alloc::<u32>("output groups", groups)?,
            session.alloc::<u32>("output groups", groups)?,
            session.alloc::<u32>("output groups", groups)?,
        ];
        let group_last = session.alloc::<u8>("output groups", groups)?;
        session.launch(
            "layout_groups",
            groups,
            None,
            groups as u64 * 17,
            &[
                mem(&sizes.sums),
                Arg::U32(entries.kept_count as u32),
                Arg::U32(sizes.interval),
                Arg::U32(sizes.per_class),
                mem(&records),
                Arg::U32(plan.ranges.len() as u32),
                Arg::U32(groups as u32),
                mem(&group_buffers[0]),
                mem(&group_buffers[1]),
                mem(&group_buffers[2]),
                mem(&group_buffers[3]),
                mem(&group_last),
                mem(&sizes.device),
                Arg::U32(plan.finished_blocks as u32),
                mem(&key_lengths),
            ],
        )?;
        let out = session.alloc::<u8>("output blocks", plan.out_len)?;
        session.launch(
            "encode_groups",
            groups,
            None,
            plan.out_len as u64,
            &[
                mem(&entries.keys),
                mem(&entries.key_offset),
                mem(&entries.data.buffer),
                mem(&entries.value_offset),
                mem(&entries.kept),
                mem(&sizes.device),
                mem(&group_buffers[0]),
                mem(&group_buffers[1]),
                mem(&group_buffers[2]),
                mem(&group_buffers[3]),
                mem(&group_last),
                Arg::U32(groups as u32),
                mem(&out),
            ],
        )?;
        Ok((out, key_lengths))
    }

    /// When blocks are stored uncompressed, has the device write every
    /// finished block's trailer (type byte and masked CRC32C) in place
    /// after it, before the blocks are read back.
    fn write_trailers(&mut self, plan: &BlockPlan, out: &Buffer<u8>) -> Result<(), DeviceError> {
        let blocks = plan.finished_blocks;
        if plan.trailer_gap == 0 || blocks == 0 {
            return Ok(());
        }
        let session = &mut *self.session;
        let finished = &plan.blocks[..blocks];
        let offsets: Vec<u32> = finished.iter().map(|b| b.start as u32).collect();
        let lengths: Vec<u32> = finished.iter().map(|b| b.len() as u32).collect();
        let offsets = session.upload("block offsets", &offsets)?;
        let lengths = session.upload("block sizes", &lengths)?;
        session.launch(
            "block_trailers",
            blocks,
            None,
            plan.bytes_of(0..blocks).len() as u64,
            &[
                mem(out),
                mem(&offsets),
                mem(&lengths),
                Arg::U32(blocks as u32),
            ],
        )?;
        Ok(())
    }

    /// With Snappy, compresses every finished block on the device
    /// (`snappy_compress`, byte for byte the `snap` encoder), reads the
    /// compressed lengths back, keeps each block compressed where each
    /// file's `CompressionGate` tried it and that saves an eighth (LevelDB's
    /// rule, `compression_pays`), and has the device
    /// lay the blocks out as their files store them, trailers included
    /// (`place_stored_blocks`). `None` without compression (the trailers
    /// are then in place in `out`) or without finished blocks.
    fn compress(
        &mut self,
        plan: &BlockPlan,
        out: &Buffer<u8>,
    ) -> Result<Option<StoredBlocks>, DeviceError> {
        let blocks = plan.finished_blocks;
        if plan.trailer_gap > 0 || blocks == 0 {
            return Ok(None);
        }
        let finished = &plan.blocks[..blocks];
        let too_large = || DeviceError::new("compressed blocks past 32-bit offsets");
        let mut slots = Vec::with_capacity(blocks);
        let mut room = 0usize;
        for block in finished {
            slots.push(u32::try_from(room).map_err(|_| too_large())?);
            room += snappy_max_compressed_len(block.len());
        }
        u32::try_from(room).map_err(|_| too_large())?;
        let largest = finished.iter().map(Range::len).max().unwrap_or(0);
        let stride = snappy_table_entries(largest);
        // Each work item compresses about four blocks in turn: its table is
        // then half a byte per byte compressed, and 16 MiB at most.
        let workers = blocks
            .div_ceil(4)
            .min((SNAPPY_TABLES_BYTES / (2 * stride)).max(1));
        let session = &mut *self.session;
        // Offsets, lengths and slots, in one upload.
        let mut blocks_plan: Vec<u32> = finished.iter().map(|b| b.start as u32).collect();
        blocks_plan.extend(finished.iter().map(|b| b.len() as u32));
        blocks_plan.extend_from_slice(&slots);
        let blocks_plan = session.upload("blocks to compress", &blocks_plan)?;
        let compressed = session.alloc::<u8>("compressed blocks", room)?;
        let tables = session.alloc::<u16>("Snappy hash tables", workers * stride)?;
        let compressed_len = session.alloc::<u32>("compressed sizes", blocks)?;
        session.launch(
            "snappy_compress",
            workers,
            None,
            plan.bytes_of(0..blocks).len() as u64,
            &[
                mem(out),
                mem(&blocks_plan),
                Arg::U32(blocks as u32),
                mem(&compressed),
                mem(&tables),
                Arg::U32(stride as u32),
                Arg::U32(workers as u32),
                mem(&compressed_len),
            ],
        )?;
        let compressed_len = session.download("compressed sizes", &compressed_len, blocks)?;
        // Sources, lengths with the kind in the top bit, places: one upload.
        let mut places = vec![0u32; 3 * blocks];
        let mut stored_blocks = Vec::with_capacity(blocks);
        let mut stored_len = 0usize;
        // Each file's blocks in order, under the file's own gate (as the
        // table builder's): the file stores the same bytes as `streaming`'s.
        for file in &plan.file_blocks {
            let mut gate = CompressionGate::default();
            for b in file.clone() {
                let block = &finished[b];
                let packed = compressed_len[b] as usize;
                if packed > snappy_max_compressed_len(block.len()) {
                    return Err(DeviceError::new(format!(
                        "block {b}: {packed} compressed bytes from {}, more than Snappy writes",
                        block.len()
                    )));
                }
                let tried = gate.next_block(CompressionType::Snappy);
                let (from, bytes, stored_as) =
                    if tried == CompressionType::Snappy && compression_pays(block.len(), packed) {
                        (slots[b], packed, CompressionType::Snappy)
                    } else {
                        (block.start as u32, block.len(), CompressionType::None)
                    };
                gate.record(tried, stored_as);
                places[b] = from;
                // The top bit carries the kind: a block must be under 2 GiB.
                if bytes >= 1 << 31 {
                    return Err(too_large());
                }
                places[blocks + b] = bytes as u32 | (stored_as as u32) << 31;
                places[2 * blocks + b] = u32::try_from(stored_len).map_err(|_| too_large())?;
                stored_blocks.push(stored_len..stored_len + bytes);
                stored_len += bytes + BLOCK_TRAILER_LEN;
            }
        }
        u32::try_from(stored_len).map_err(|_| too_large())?;
        let places = session.upload("stored blocks' places", &places)?;
        let stored = session.alloc::<u8>("stored blocks", stored_len)?;
        session.launch(
            "place_stored_blocks",
            blocks,
            None,
            stored_len as u64,
            &[
                mem(out),
                mem(&compressed),
                mem(&places),
                Arg::U32(blocks as u32),
                mem(&stored),
            ],
        )?;
        Ok(Some(StoredBlocks {
            buffer: stored,
            blocks: stored_blocks,
        }))
    }

    /// Starts reading the finished files' blocks back file by file on the
    /// transfer queue, as their files store them (from `compressed` when
    /// there is compression, else from `out`, trailers in place), while the
    /// compute queue gathers the boundary keys and later builds the filters.
    fn start_downloads(
        &mut self,
        plan: &BlockPlan,
        out: &Buffer<u8>,
        compressed: Option<&StoredBlocks>,
    ) -> Result<BlockDownloads, DeviceError> {
        let mut files = Vec::with_capacity(plan.file_blocks.len());
        for blocks in &plan.file_blocks {
            let (buffer, range) = match compressed {
                Some(stored) => (&stored.buffer, stored.bytes_of(blocks.clone())),
                None => (out, plan.bytes_of(blocks.clone())),
            };
            files.push(self.session.download_bytes_async(
                "output blocks",
                buffer,
                range.start,
                range.len(),
                self.staging,
            )?);
        }
        let open_range = plan.bytes_of(plan.finished_blocks..plan.ranges.len());
        let open = self.session.download_async(
            "output blocks",
            out,
            open_range.start,
            open_range.len(),
            &[],
        )?;
        Ok(BlockDownloads {
            files,
            open,
            open_range,
        })
    }

    /// Gathers the first and last key of every finished block on the device
    /// and reads them back (their lengths first, to place them).
    fn boundary_keys(
        &mut self,
        key_lengths: &Buffer<u32>,
        plan: &BlockPlan,
    ) -> Result<BoundaryKeys, DeviceError> {
        let (session, entries) = (&mut *self.session, self.entries);
        let which: Vec<u32> = plan.ranges[..plan.finished_blocks]
            .iter()
            .flat_map(|range| [range.start as u32, range.end as u32 - 1])
            .collect();
        let which_buffer = session.upload("boundary keys", &which)?;
        let lengths = session.download("boundary keys", key_lengths, which.len())?;
        let mut key_at = Vec::with_capacity(which.len() + 1);
        let mut key_bytes = 0usize;
        for &len in &lengths {
            key_at.push(key_bytes);
            key_bytes += len as usize;
        }
        key_at.push(key_bytes);
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
        Ok(BoundaryKeys { gathered, key_at })
    }

    /// The open file's blocks, uncompressed, for the next slice.
    fn open_blocks(
        &mut self,
        plan: &BlockPlan,
        open: Download<u8>,
        open_range: Range<usize>,
    ) -> Result<Vec<Vec<u8>>, DeviceError> {
        let open_bytes = self.session.finish_download(open)?;
        self.session.counters.host_bytes_copied += open_bytes.len() as u64;
        Ok(plan.blocks[plan.finished_blocks..]
            .iter()
            .map(|range| {
                open_bytes[range.start - open_range.start..range.end - open_range.start].to_vec()
            })
            .collect())
    }

    /// Per finished file: waits for its blocks, then starts its filters on
    /// the device without waiting; finally waits for every file's filters.
    fn finish_files(
        &mut self,
        plan: &BlockPlan,
        downloads: Vec<BytesDownload>,
        boundary_keys: &BoundaryKeys,
        compressed: Option<&StoredBlocks>,
    ) -> Result<Vec<FileParts>, DeviceError> {
        let options = self.job.table.table_options();
        let mut files = Vec::with_capacity(plan.file_blocks.len());
        let mut stored_sizes = Vec::with_capacity(plan.file_blocks.len());
        for (blocks, download) in plan.file_blocks.iter().zip(downloads) {
            let stored = self.session.finish_bytes(download)?;
            let sizes: Vec<usize> = match compressed {
                Some(layout) => layout.blocks[blocks.clone()]
                    .iter()
                    .map(Range::len)
                    .collect(),
                None => plan.blocks[blocks.clone()].iter().map(Range::len).collect(),
            };
            files.push(FileParts {
                blocks: blocks
                    .clone()
                    .zip(&sizes)
                    .map(|(b, &len)| StoredBlock {
                        len,
                        first_key: boundary_keys.key(2 * b).to_vec(),
                        last_key: boundary_keys.key(2 * b + 1).to_vec(),
                    })
                    .collect(),
                stored,
                filters: None,
                entries: blocks.clone().map(|b| plan.ranges[b].len() as u64).sum(),
                options: options.clone(),
            });
            if self.job.table.bloom_bits_per_key.is_some() {
                stored_sizes.push(sizes);
            }
        }
        if let Some(bits_per_key) = self.job.table.bloom_bits_per_key {
            let pending = bloom_for_files(
                self.session,
                self.entries,
                &plan.ranges,
                &plan.file_blocks,
                &stored_sizes,
                bits_per_key,
            )?;
            self.session.settle()?;
            for (file, filters) in files.iter_mut().zip(pending.finish(self.session)?) {
                file.filters = Some(filters);
            }
        } else {
            self.session.settle()?;
        }
        Ok(files)
    }
}

/// One output data block: its stored length (without the trailer) and
/// its first and last key.
#[derive(Debug)]
pub(crate) struct StoredBlock {
    len: usize,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
}

/// The finished blocks of a slice as their files store them, laid out on
/// the device after compression: per block, its stored bytes in `buffer`
/// (its trailer, which says how it is stored, right after them).
struct StoredBlocks {
    buffer: Buffer<u8>,
    blocks: Vec<Range<usize>>,
}

impl StoredBlocks {
    /// The bytes of `blocks` with their trailers.
    fn bytes_of(&self, blocks: Range<usize>) -> Range<usize> {
        span(&self.blocks, blocks, BLOCK_TRAILER_LEN, 0)
    }
}

/// Entries of the hash table `snappy_compress` uses for a block of `len`
/// bytes: that of its largest fragment (64 KiB at most), a power of two
/// from 256 to 16,384, as the `snap` encoder sizes it.
fn snappy_table_entries(len: usize) -> usize {
    len.min(1 << 16).next_power_of_two().clamp(256, 1 << 14)
}

/// Device memory for the Snappy hash tables of one slice: it bounds the
/// work items (each compresses blocks one after another with its table),
/// so the scratch does not grow with the blocks.
const SNAPPY_TABLES_BYTES: usize = 16 << 20;

/// A finished output file in parts: its data blocks (encoded, compressed
/// and given their trailers on the device) and its Bloom filters.
#[derive(Debug)]
pub(crate) struct FileParts {
    blocks: Vec<StoredBlock>,
    /// The file's data blocks exactly as the file holds them, blocks and
    /// trailers back to back, written in one piece.
    stored: HostBytes,
    /// The filters `plan_filters` asks for, when the table has a filter.
    filters: Option<Vec<Vec<u8>>>,
    entries: u64,
    options: TableOptions,
}

impl FileParts {
    /// Bytes of the file's data blocks as stored, trailers included: the
    /// file's size less its index, filter and footer.
    pub(crate) fn data_len(&self) -> u64 {
        self.stored.as_slice().len() as u64
    }

    /// Lays the file out into `dest`: data blocks with trailers, filter
    /// block, metaindex, index block, footer (`TableAssembler`, as every
    /// executor). The blocks go from the buffer they came back into
    /// straight to `dest`, which buffers; no copy of the whole file is made
    /// first.
    pub(crate) fn assemble_into<W: std::io::Write>(
        self,
        dest: W,
    ) -> shale_format::Result<(W, AssembledFile)> {
        let (Some(first), Some(last)) = (self.blocks.first(), self.blocks.last()) else {
            return Err(shale_format::Error::InvalidArgument(
                "an output file without data blocks".into(),
            ));
        };
        let (smallest, largest) = (first.first_key.clone(), last.last_key.clone());
        let mut assembler = TableAssembler::new(self.options, dest);
        assembler.write_stored_data_blocks(
            self.stored.as_slice(),
            self.blocks.iter().map(|block| {
                (
                    block.first_key.as_slice(),
                    block.last_key.as_slice(),
                    block.len,
                )
            }),
        )?;
        let filter = self.filters.as_deref().map(assemble_filters);
        let (dest, size) = assembler.finish_with_filter_block(filter)?;
        let file = AssembledFile {
            size,
            smallest,
            largest,
            entries: self.entries,
        };
        Ok((dest, file))
    }
}

/// The Bloom filters of a slice's files, being built on the device.
struct PendingFilters {
    /// Per file, per filter `plan_filters` asks for: `None` (empty) or its
    /// offset and length in the bit arrays.
    plans: Vec<Vec<Option<(usize, usize)>>>,
    probes: u8,
    /// The bit arrays coming back (`None`: no file has filter data).
    bits: Option<FilterBuffers>,
}

/// The read-back of the bit arrays, and the buffers the kernels use (kept
/// until they are done).
struct FilterBuffers {
    download: Download<u8>,
    _ranges: [Buffer<u32>; 3],
    _byte_vector: Buffer<u8>,
    _bit_arrays: Buffer<u8>,
}

impl PendingFilters {
    /// Waits for the bit arrays; per file, its filters, each with its
    /// probe count.
    fn finish(self, session: &mut Session<'_>) -> Result<Vec<Vec<Vec<u8>>>, DeviceError> {
        let bit_arrays = match self.bits {
            Some(buffers) => session.finish_download(buffers.download)?,
            None => Vec::new(),
        };
        let probes = self.probes;
        self.plans
            .into_iter()
            .map(|plan| {
                plan.into_iter()
                    .map(|filter| match filter {
                        None => Ok(Vec::new()),
                        Some((start, bytes)) => {
                            let mut filter = bit_arrays
                                .get(start..start + bytes)
                                .ok_or_else(|| DeviceError::new("Bloom filter out of range"))?
                                .to_vec();
                            filter.push(probes);
                            Ok(filter)
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// Starts building the Bloom filters of a slice's files on the device,
/// all files in one pair of launches (file `f` has the blocks
/// `file_blocks[f]`, whose stored sizes are `stored[f]`): the filters
/// `plan_filters` asks for from the blocks' places in each file, each
/// empty or over the keys of its blocks. Returns without waiting.
///
/// One pair of launches, three uploads and one download per slice, not per
/// file: a file's filters cover its entries one after another and the
/// files follow one another in the kept entries, so the filters of all of
/// them are one list of consecutive ranges. Five buffers per file, held
/// until the slice ends, made a slice's buffers grow with its files, and a
/// job with more files than the arena held allocate.
fn bloom_for_files(
    session: &mut Session<'_>,
    entries: &DeviceEntries,
    block_ranges: &[Range<usize>],
    file_blocks: &[Range<usize>],
    stored: &[Vec<usize>],
    bits_per_key: u32,
) -> Result<PendingFilters, DeviceError> {
    let probes = probes_for_bits_per_key(bits_per_key);
    let mut plans = Vec::with_capacity(file_blocks.len());
    let mut filter_first = Vec::new();
    let mut filter_bits_list = Vec::new();
    let mut filter_out = Vec::new();
    let mut out_bytes = 0usize;
    let mut covered: Option<usize> = None;
    for (blocks, stored) in file_blocks.iter().zip(stored) {
        let mut offset = 0u64;
        let places: Vec<(u64, u64)> = stored
            .iter()
            .map(|&size| {
                let start = offset;
                offset += (size + BLOCK_TRAILER_LEN) as u64;
                (start, offset)
            })
            .collect();
        let mut plan = Vec::new();
        for range in plan_filters(&places) {
            if range.is_empty() {
                plan.push(None);
                continue;
            }
            let first = block_ranges[blocks.start + range.start].start;
            let end = block_ranges[blocks.start + range.end - 1].end;
            // The kernel finds an entry's filter by searching the starts:
            // the ranges must follow one another with no gap.
            if covered.is_some_and(|covered| covered != first) {
                return Err(DeviceError::new(format!(
                    "Bloom filter ranges are not consecutive: one ends at entry {covered:?}, the next starts at {first}"
                )));
            }
            covered = Some(end);
            let bits = filter_bits(end - first, bits_per_key);
            plan.push(Some((out_bytes, bits / 8)));
            filter_first.push(first as u32);
            filter_bits_list.push(bits as u32);
            filter_out.push(out_bytes as u32);
            out_bytes += bits / 8;
        }
        plans.push(plan);
    }
    let (Some(&first_entry), Some(end_entry)) = (filter_first.first(), covered) else {
        return Ok(PendingFilters {
            plans,
            probes,
            bits: None,
        });
    };
    let filters = filter_first.len();
    // Close the list at the last entry.
    filter_first.push(end_entry as u32);
    let first_entry = first_entry as usize;
    if out_bytes.saturating_mul(8) > u32::MAX as usize {
        return Err(DeviceError::new("Bloom filters past 32-bit offsets"));
    }
    let first_buffer = session.upload("filter ranges", &filter_first)?;
    let bits_buffer = session.upload("filter sizes", &filter_bits_list)?;
    let out_buffer = session.upload("filter offsets", &filter_out)?;
    let byte_vector = session.alloc_zeroed::<u8>("the Bloom byte vector", out_bytes * 8)?;
    let bit_arrays = session.alloc::<u8>("Bloom filters", out_bytes)?;
    // Work items are the kept entries the filters cover: the global offset
    // starts them at the first.
    session.launch_async(
        "bloom_set",
        first_entry,
        end_entry - first_entry,
        (end_entry - first_entry) as u64 * u64::from(probes),
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
        &[],
    )?;
    // The compute queue is in order: the fold runs after the set.
    let folded = session.launch_async(
        "bloom_fold",
        0,
        out_bytes,
        out_bytes as u64 * 8,
        &[
            mem(&byte_vector),
            Arg::U32(out_bytes as u32),
            mem(&bit_arrays),
        ],
        &[],
    )?;
    let wait: Vec<_> = folded.into_iter().collect();
    let download = session.download_async("Bloom filters", &bit_arrays, 0, out_bytes, &wait)?;
    Ok(PendingFilters {
        plans,
        probes,
        bits: Some(FilterBuffers {
            download,
            _ranges: [first_buffer, bits_buffer, out_buffer],
            _byte_vector: byte_vector,
            _bit_arrays: bit_arrays,
        }),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::steps::plan::EntrySize;
    use shale_format::coding::varint_length;

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
    /// array, then `gap` bytes (room for its trailer, when the device writes
    /// it in place). Offsets follow from the sizes exactly as `BlockBuilder`
    /// writes.
    pub(crate) fn group_layout(
        sizes: &[EntrySize],
        blocks: &[Range<usize>],
        restart_interval: usize,
        gap: usize,
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
            cursor += gap;
        }
        layout
    }

    #[test]
    fn downloaded_block_ends_are_taken_in_the_kernels_order() {
        let flat = vec![1, 2, 40, 50];
        assert_eq!(
            block_ends_of(flat),
            vec![BlockEnd { end: 1, len: 2 }, BlockEnd { end: 40, len: 50 }]
        );
        assert!(block_ends_of(Vec::new()).is_empty());
        // An uneven array (never the kernel's) is cut, not misread.
        assert_eq!(block_ends_of(vec![7, 8, 9]).len(), 1);
        // Spare capacity is let go of first: the allocation's size is then
        // exactly the entries'.
        let mut spare = Vec::with_capacity(100);
        spare.extend_from_slice(&[4, 5]);
        let ends = block_ends_of(spare);
        assert_eq!(ends, vec![BlockEnd { end: 4, len: 5 }]);
    }

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
            let layout = group_layout(&sizes, &blocks, interval, 0);
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
