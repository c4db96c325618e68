//! One slice of a job on the device, up to the kept entries: unpack, merge,
//! gc. Reading is in `slices.rs`, pack in `pack.rs`. What runs where:
//!
//! | step | where |
//! | --- | --- |
//! | open tables (footer, index block), read the slice's blocks, one read per stretch of a file | host (the reading thread) |
//! | Snappy decompression of compressed input blocks | host (the device has no Snappy) |
//! | CRC32C check of every input block | device: `check_block_crc` |
//! | restart arrays → list of restart groups | host (4 bytes per group) |
//! | parse every restart group into key arena + tuples | device: `unpack_count`, scan, `unpack_parse` |
//! | merge by rank (Algorithm 1) | device: `check_runs_sorted`, `rank_merge` |
//! | gc keep/drop per entry | device: `gc_keep` (or host, for C-Compaction) |
//! | grandparent cursor per entry | device: `grandparent_index`; the cut itself is a host scan over integers |
//! | stream compaction of kept entries | device: scan, `compact_kept` |
//!
//! Values are uploaded once with their blocks and never come back until
//! they are inside encoded output blocks (lazy value movement). One slice
//! is resident on the device at a time; an allocation past the budget
//! fails the device path (and the job runs on the CPU).
//!
//! The slice's blocks go up on the transfer queue; the checksum kernel
//! waits on that upload's event while the host lists the restart groups.
//!
//! The entries of the output file left open by the previous slice come in
//! as the slice's last run (`carried` entries). They sort before every new
//! entry, so they take merged positions `0..carried`, and gc keeps them
//! all again (an entry kept once is kept again among kept entries: what
//! dropped it would be an older version of its user key at or below the
//! smallest snapshot just before it, and kept entries have none). The
//! grandparent cutter, which carries over between slices, skips them.

use std::time::Instant;

use opencl3::memory::Buffer;
use rayon::prelude::*;
use shale_format::format::{decode_block_slice, BLOCK_TRAILER_LEN};
use shale_format::internal_key::ParsedInternalKey;

use super::device::DeviceError;
use super::placement::GcSite;
use super::scan::exclusive_scan_u32;
use super::session::{mem, Arg, Session, Upload};
use super::slices::{InputBlock, SliceInput};
use crate::boundaries::GrandparentCutter;
use crate::gc::{is_base_level_for, keep_entry};
use crate::inputs::shared_user_key_prefix;
use crate::job::{CompactionJob, PhaseStats};
use crate::parallel::unpack::restart_groups as restart_groups_of;

/// The entries of a job on the device, in structure-of-arrays form.
pub(crate) struct DeviceEntries {
    /// Input blocks as read, then decompressed contents; values point here.
    pub(crate) data: Upload<u8>,
    /// Full internal keys.
    pub(crate) keys: Buffer<u8>,
    pub(crate) key_offset: Buffer<u32>,
    pub(crate) key_len: Buffer<u32>,
    pub(crate) value_offset: Buffer<u32>,
    pub(crate) value_len: Buffer<u32>,
    /// Merged order's kept entries (entry numbers), `kept_count` of them.
    pub(crate) kept: Buffer<u32>,
    pub(crate) kept_count: usize,
    /// `stops[j]`: the output file must end before kept entry `j`.
    pub(crate) stops: Vec<bool>,
}

fn input_error(error: shale_format::Error) -> DeviceError {
    DeviceError::new(format!("input: {error}"))
}

fn corrupt(names: &[String], block: &InputBlock, what: &str) -> DeviceError {
    DeviceError::new(format!(
        "corruption in {} block at offset {}: {what}",
        names[block.source], block.handle.offset
    ))
}

/// What gc carries from one slice to the next.
pub(crate) struct GcCarry<'j> {
    /// The grandparent cut, fed every merged entry of the job in order.
    pub(crate) cutter: GrandparentCutter<'j>,
    /// A grandparent cut seen after the last kept entry.
    pub(crate) pending_stop: bool,
}

/// Runs unpack, merge and gc over one slice, whose last `carried` entries
/// (its last run) are those of the open output file; `None` when no entry
/// is kept.
#[allow(
    clippy::too_many_arguments,
    reason = "the slice, its carried state and the job's settings, named at the call"
)]
pub(crate) fn entries_on_device(
    session: &mut Session<'_>,
    pool: &rayon::ThreadPool,
    job: &CompactionJob,
    input: SliceInput,
    carried: usize,
    gc: GcSite,
    carry: &mut GcCarry<'_>,
    stats: &mut PhaseStats,
) -> Result<Option<DeviceEntries>, DeviceError> {
    // Unpack.
    let t = Instant::now();
    let SliceInput {
        mut data,
        mut blocks,
        run_first_block,
        names,
        ..
    } = input;
    decompress(pool, &names, &mut data, &mut blocks)?;
    if data.len() > u32::MAX as usize {
        return Err(DeviceError::new(format!(
            "{} bytes of input blocks: past 32-bit offsets",
            data.len()
        )));
    }
    // The blocks go up on the transfer queue; the checksum kernel waits for
    // them while the host lists the restart groups.
    let upload = session.upload_async("input blocks", data)?;
    let offsets: Vec<u32> = blocks.iter().map(|b| b.raw).collect();
    let lengths: Vec<u32> = blocks.iter().map(|b| b.handle.size as u32).collect();
    let offset_buffer = session.upload("block offsets", &offsets)?;
    let length_buffer = session.upload("block sizes", &lengths)?;
    let crc_ok = session.alloc::<u32>("checksum results", blocks.len())?;
    session.launch_after(
        "check_block_crc",
        blocks.len(),
        None,
        lengths.iter().map(|&l| u64::from(l) + 1).sum(),
        &[
            mem(&upload.buffer),
            mem(&offset_buffer),
            mem(&length_buffer),
            Arg::U32(blocks.len() as u32),
            mem(&crc_ok),
        ],
        &upload.wait_list(),
    )?;
    session.finish_upload(&upload)?;
    let crc_ok = session.download("checksum results", &crc_ok, blocks.len())?;
    if let Some(b) = crc_ok.iter().position(|&ok| ok == 0) {
        return Err(corrupt(
            &names,
            &blocks[b],
            "block checksum mismatch (found on the device)",
        ));
    }
    let data_buffer = &upload.buffer;
    let (group_start, group_limit, block_first_group) =
        restart_groups(pool, &names, upload.host(), &blocks)?;
    let groups = group_start.len();
    let group_start = session.upload("restart groups", &group_start)?;
    let group_limit = session.upload("restart groups", &group_limit)?;
    let entry_count = session.alloc::<u32>("entry counts", groups)?;
    let key_bytes = session.alloc::<u32>("key sizes", groups)?;
    let error = session.alloc_zeroed::<u32>("an error flag", 1)?;
    session.launch(
        "unpack_count",
        groups,
        None,
        u64::from(blocks.iter().map(|b| b.contents_len).sum::<u32>()),
        &[
            mem(data_buffer),
            mem(&group_start),
            mem(&group_limit),
            Arg::U32(groups as u32),
            mem(&entry_count),
            mem(&key_bytes),
            mem(&error),
        ],
    )?;
    session.check_flag("an input restart group does not parse", &error)?;
    let (entry_base, total) = exclusive_scan_u32(session, "entry offsets", &entry_count, groups)?;
    let (key_base, key_total) = exclusive_scan_u32(session, "key offsets", &key_bytes, groups)?;
    if total > u64::from(u32::MAX / 2) || key_total > u64::from(u32::MAX) {
        return Err(DeviceError::new(format!(
            "{total} entries with {key_total} key bytes: past 32-bit offsets"
        )));
    }
    let n = total as usize;
    if n < carried {
        return Err(DeviceError::new(format!(
            "the slice has {n} entries, fewer than the {carried} carried over"
        )));
    }
    stats.entries_in += total - carried as u64;
    // Where each run's entries start: runs are laid out one after another.
    let runs = run_first_block.len() - 1;
    let mut run_start = Vec::with_capacity(runs + 1);
    for &first_block in &run_first_block[..runs] {
        let first_group = block_first_group
            .get(first_block)
            .copied()
            .unwrap_or(groups);
        let start = if first_group < groups {
            session.read_one("entry offsets", &entry_base, first_group)? as u32
        } else {
            n as u32
        };
        run_start.push(start);
    }
    run_start.push(n as u32);
    if n == 0 {
        stats.unpack_secs += t.elapsed().as_secs_f64();
        return Ok(None);
    }
    let keys = session.alloc::<u8>("keys", key_total as usize)?;
    let key_offset = session.alloc::<u32>("entry tuples", n)?;
    let key_len = session.alloc::<u32>("entry tuples", n)?;
    let value_offset = session.alloc::<u32>("entry tuples", n)?;
    let value_len = session.alloc::<u32>("entry tuples", n)?;
    let prefix = session.alloc::<u64>("key prefixes", n)?;
    session.launch(
        "unpack_parse",
        groups,
        None,
        u64::from(blocks.iter().map(|b| b.contents_len).sum::<u32>()),
        &[
            mem(data_buffer),
            mem(&group_start),
            mem(&group_limit),
            Arg::U32(groups as u32),
            mem(&entry_base),
            mem(&key_base),
            Arg::U32(shared_user_key_prefix(job) as u32),
            mem(&keys),
            mem(&key_offset),
            mem(&key_len),
            mem(&value_offset),
            mem(&value_len),
            mem(&prefix),
        ],
    )?;
    stats.unpack_secs += t.elapsed().as_secs_f64();

    // Merge by rank.
    let t = Instant::now();
    let run_start_buffer = session.upload("run starts", &run_start)?;
    let entry_args = [mem(&keys), mem(&key_offset), mem(&key_len), mem(&prefix)];
    let run_args = [
        mem(&run_start_buffer),
        Arg::U32(runs as u32),
        Arg::U32(n as u32),
    ];
    let sorted_error = session.alloc_zeroed::<u32>("an error flag", 1)?;
    let mut args = entry_args.to_vec();
    args.extend_from_slice(&run_args);
    args.push(mem(&sorted_error));
    session.launch("check_runs_sorted", n, None, n as u64 * 24, &args)?;
    session.check_flag("an input run is not in key order", &sorted_error)?;
    let order = session.alloc::<u32>("the merged order", n)?;
    let mut args = entry_args.to_vec();
    args.extend_from_slice(&run_args);
    args.push(mem(&order));
    session.launch("rank_merge", n, None, n as u64 * 24, &args)?;
    drop(prefix);
    stats.merge_secs += t.elapsed().as_secs_f64();

    // GC: keep flags, the grandparent cuts, stream compaction.
    let t = Instant::now();
    let (keep, stops_by_merged) = match gc {
        GcSite::Device => gc_on_device(
            session,
            job,
            &mut carry.cutter,
            carried,
            &keys,
            &key_offset,
            &key_len,
            &order,
            n,
        )?,
        GcSite::Host => gc_on_host(
            session,
            pool,
            job,
            &mut carry.cutter,
            carried,
            &keys,
            key_total as usize,
            &key_offset,
            &key_len,
            &order,
            n,
        )?,
    };
    let (position, kept_total) = exclusive_scan_u32(session, "kept positions", &keep, n)?;
    let kept_count = kept_total as usize;
    let kept = session.alloc::<u32>("kept entries", kept_count)?;
    session.launch(
        "compact_kept",
        n,
        None,
        n as u64 * 16,
        &[
            mem(&order),
            mem(&keep),
            mem(&position),
            Arg::U32(n as u32),
            mem(&kept),
        ],
    )?;
    // The cut before kept entry j: a grandparent cut seen at or since the
    // previous kept entry.
    let stops = match stops_by_merged {
        Some((stop_before, keep)) => {
            if keep.iter().take(carried).any(|&k| k == 0) {
                return Err(DeviceError::new(
                    "gc dropped an entry carried over from the previous slice",
                ));
            }
            // Carried entries (all kept) had their stops in an earlier
            // slice; a cut pending from there belongs to the next new entry.
            let mut stops = vec![false; carried];
            for (stop, keep) in stop_before.into_iter().zip(keep).skip(carried) {
                carry.pending_stop |= stop;
                if keep != 0 {
                    stops.push(std::mem::take(&mut carry.pending_stop));
                }
            }
            stops
        }
        None => vec![false; kept_count],
    };
    stats.gc_secs += t.elapsed().as_secs_f64();
    if kept_count < carried {
        return Err(DeviceError::new(
            "gc dropped an entry carried over from the previous slice",
        ));
    }
    if kept_count == 0 {
        return Ok(None);
    }
    Ok(Some(DeviceEntries {
        data: upload,
        keys,
        key_offset,
        key_len,
        value_offset,
        value_len,
        kept,
        kept_count,
        stops,
    }))
}

/// Decompresses Snappy blocks on the host and appends their contents to
/// `data`.
fn decompress(
    pool: &rayon::ThreadPool,
    names: &[String],
    data: &mut Vec<u8>,
    blocks: &mut [InputBlock],
) -> Result<(), DeviceError> {
    let compressed: Vec<usize> = (0..blocks.len())
        .filter(|&b| data[(blocks[b].raw + blocks[b].contents_len) as usize] != 0)
        .collect();
    if compressed.is_empty() {
        return Ok(());
    }
    let shared: &Vec<u8> = data;
    let contents: Vec<Vec<u8>> = pool.install(|| {
        compressed
            .par_iter()
            .map(|&b| {
                let block = &blocks[b];
                let raw = &shared[block.raw as usize
                    ..(block.raw + block.contents_len) as usize + BLOCK_TRAILER_LEN];
                // The CRC is checked on the device; here only decompression.
                decode_block_slice(raw, &names[block.source], block.handle, false)
                    .map_err(input_error)
            })
            .collect::<Result<_, _>>()
    })?;
    for (b, contents) in compressed.into_iter().zip(contents) {
        let at = data.len();
        if at + contents.len() > u32::MAX as usize {
            return Err(DeviceError::new("decompressed input past 32-bit offsets"));
        }
        data.extend_from_slice(&contents);
        blocks[b].contents = at as u32;
        blocks[b].contents_len = contents.len() as u32;
    }
    Ok(())
}

/// The restart groups of every block, as absolute `[start, limit)` offsets
/// in `data`, with the index of each block's first group. Validates the
/// restart arrays with `parallel::unpack::restart_groups`, as
/// `parallel::unpack::unpack_block` does.
#[allow(
    clippy::type_complexity,
    reason = "three parallel arrays, named at the call"
)]
fn restart_groups(
    pool: &rayon::ThreadPool,
    names: &[String],
    data: &[u8],
    blocks: &[InputBlock],
) -> Result<(Vec<u32>, Vec<u32>, Vec<usize>), DeviceError> {
    let per_block: Vec<Vec<(u32, u32)>> = pool.install(|| {
        blocks
            .par_iter()
            .map(|block| {
                let contents =
                    &data[block.contents as usize..(block.contents + block.contents_len) as usize];
                let groups = restart_groups_of(contents)
                    .map_err(|(_, reason)| corrupt(names, block, reason))?;
                Ok(groups
                    .into_iter()
                    .map(|(start, limit)| {
                        (block.contents + start as u32, block.contents + limit as u32)
                    })
                    .collect())
            })
            .collect::<Result<_, _>>()
    })?;
    let total = per_block.iter().map(Vec::len).sum();
    let mut starts = Vec::with_capacity(total);
    let mut limits = Vec::with_capacity(total);
    let mut block_first_group = Vec::with_capacity(blocks.len());
    for groups in per_block {
        block_first_group.push(starts.len());
        for (start, limit) in groups {
            starts.push(start);
            limits.push(limit);
        }
    }
    Ok((starts, limits, block_first_group))
}

/// The result of gc: keep flags on the device and, when the job has
/// grandparents, per merged entry whether a grandparent cut falls before it
/// together with the keep flags on the host.
type GcResult = (Buffer<u32>, Option<(Vec<bool>, Vec<u32>)>);

/// Q-Compaction's gc: every decision on the device.
#[allow(
    clippy::too_many_arguments,
    reason = "the device buffers gc reads, passed explicitly"
)]
fn gc_on_device(
    session: &mut Session<'_>,
    job: &CompactionJob,
    cutter: &mut GrandparentCutter<'_>,
    carried: usize,
    keys: &Buffer<u8>,
    key_offset: &Buffer<u32>,
    key_len: &Buffer<u32>,
    order: &Buffer<u32>,
    n: usize,
) -> Result<GcResult, DeviceError> {
    // The deeper levels' user-key ranges, flattened.
    let mut range_keys = Vec::new();
    let (mut smallest_offset, mut smallest_len, mut largest_offset, mut largest_len) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut level_start = vec![0u32];
    for level in &job.deeper_levels {
        for range in level {
            smallest_offset.push(range_keys.len() as u32);
            smallest_len.push(range.smallest.len() as u32);
            range_keys.extend_from_slice(&range.smallest);
            largest_offset.push(range_keys.len() as u32);
            largest_len.push(range.largest.len() as u32);
            range_keys.extend_from_slice(&range.largest);
        }
        level_start.push(smallest_offset.len() as u32);
    }
    let buffers = [
        session.upload("deeper ranges", &smallest_offset)?,
        session.upload("deeper ranges", &smallest_len)?,
        session.upload("deeper ranges", &largest_offset)?,
        session.upload("deeper ranges", &largest_len)?,
        session.upload("deeper ranges", &level_start)?,
    ];
    let range_keys = session.upload("deeper ranges", &range_keys)?;
    let keep = session.alloc::<u32>("keep flags", n)?;
    let error = session.alloc_zeroed::<u32>("an error flag", 1)?;
    session.launch(
        "gc_keep",
        n,
        None,
        n as u64 * 16,
        &[
            mem(keys),
            mem(key_offset),
            mem(key_len),
            mem(order),
            Arg::U32(n as u32),
            Arg::U64(job.smallest_snapshot),
            mem(&range_keys),
            mem(&buffers[0]),
            mem(&buffers[1]),
            mem(&buffers[2]),
            mem(&buffers[3]),
            mem(&buffers[4]),
            Arg::U32(job.deeper_levels.len() as u32),
            mem(&keep),
            mem(&error),
        ],
    )?;
    session.check_flag("compaction input has a bad internal key", &error)?;
    if job.grandparents.is_empty() {
        return Ok((keep, None));
    }
    let mut gp_keys = Vec::new();
    let mut gp_offset = Vec::new();
    let mut gp_len = Vec::new();
    for file in &job.grandparents {
        gp_offset.push(gp_keys.len() as u32);
        gp_len.push(file.largest.len() as u32);
        gp_keys.extend_from_slice(&file.largest);
    }
    let gp_keys = session.upload("grandparent keys", &gp_keys)?;
    let gp_offset = session.upload("grandparent keys", &gp_offset)?;
    let gp_len = session.upload("grandparent keys", &gp_len)?;
    let passed = session.alloc::<u32>("grandparent positions", n)?;
    session.launch(
        "grandparent_index",
        n,
        None,
        n as u64 * 12,
        &[
            mem(keys),
            mem(key_offset),
            mem(key_len),
            mem(order),
            Arg::U32(n as u32),
            mem(&gp_keys),
            mem(&gp_offset),
            mem(&gp_len),
            Arg::U32(job.grandparents.len() as u32),
            mem(&passed),
        ],
    )?;
    let passed = session.download("grandparent positions", &passed, n)?;
    let keep_host = session.download("keep flags", &keep, n)?;
    // The cut is sequential by nature: a scan over integers. Carried
    // entries were fed to the cutter in an earlier slice.
    let stops = passed
        .iter()
        .enumerate()
        .map(|(i, &p)| i >= carried && cutter.should_stop_before_position(p as usize))
        .collect();
    Ok((keep, Some((stops, keep_host))))
}

/// C-Compaction's gc: the merged keys come back to the host, which decides
/// (with the CPU executor's own predicate) and sends the flags back.
#[allow(
    clippy::too_many_arguments,
    reason = "the device buffers gc reads, passed explicitly"
)]
fn gc_on_host(
    session: &mut Session<'_>,
    pool: &rayon::ThreadPool,
    job: &CompactionJob,
    cutter: &mut GrandparentCutter<'_>,
    carried: usize,
    keys: &Buffer<u8>,
    key_total: usize,
    key_offset: &Buffer<u32>,
    key_len: &Buffer<u32>,
    order: &Buffer<u32>,
    n: usize,
) -> Result<GcResult, DeviceError> {
    let keys = session.download("keys", keys, key_total)?;
    let key_offset = session.download("key offsets", key_offset, n)?;
    let key_len = session.download("key lengths", key_len, n)?;
    let order = session.download("the merged order", order, n)?;
    let key = |i: usize| -> Result<&[u8], DeviceError> {
        let e = *order
            .get(i)
            .ok_or_else(|| DeviceError::new("merged order out of range"))? as usize;
        let (offset, len) = (key_offset[e] as usize, key_len[e] as usize);
        keys.get(offset..offset + len)
            .ok_or_else(|| DeviceError::new("key arena out of range"))
    };
    let parse = |i: usize| -> Result<ParsedInternalKey<'_>, DeviceError> {
        ParsedInternalKey::parse(key(i)?)
            .map_err(|e| DeviceError::new(format!("compaction input has a bad internal key: {e}")))
    };
    let keep: Vec<u32> = pool.install(|| {
        (0..n)
            .into_par_iter()
            .map(|i| {
                let entry = parse(i)?;
                let previous = if i == 0 { None } else { Some(parse(i - 1)?) };
                let keep = keep_entry(
                    &entry,
                    previous.map(|p| (p.user_key, p.sequence)),
                    job.smallest_snapshot,
                    |k| is_base_level_for(&job.deeper_levels, k),
                );
                Ok(u32::from(keep))
            })
            .collect::<Result<_, DeviceError>>()
    })?;
    let stops = if job.grandparents.is_empty() {
        None
    } else {
        let stops = (0..n)
            .map(|i| Ok(i >= carried && cutter.should_stop_before(key(i)?)))
            .collect::<Result<Vec<bool>, DeviceError>>()?;
        Some((stops, keep.clone()))
    };
    let keep_buffer = session.upload("keep flags", &keep)?;
    Ok((keep_buffer, stops))
}
