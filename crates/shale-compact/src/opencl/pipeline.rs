//! One slice of a job on the device, up to the kept entries: unpack, merge,
//! gc. Reading is in `slices.rs`, pack in `pack.rs`. What runs where:
//!
//! | step | where |
//! | --- | --- |
//! | open tables (footer, index block), read the slice's blocks, one read per stretch of a file | host (the reading thread) |
//! | the size of each compressed input block's contents, from its Snappy header | host |
//! | CRC32C check of every input block as stored | device: `check_block_crc` |
//! | Snappy decompression of compressed input blocks, once their CRC32C is good | device: `snappy_decompress` |
//! | restart arrays → list of restart groups | device: `restart_counts`, then `restart_groups` from their prefix sums (kept by the host, per block) |
//! | parse every restart group into key arena + tuples | device: `unpack_count`, scan, `unpack_parse` |
//! | merge by rank (Algorithm 1) | device: `check_runs_sorted`, `rank_merge` |
//! | gc keep/drop per entry | device: `gc_keep` (or host, for C-Compaction) |
//! | grandparent cursor per entry | device: `grandparent_index`; the cut itself is a host scan over integers |
//! | stream compaction of kept entries | device: scan, `compact_kept` |
//!
//! The blocks go up as stored (a compressed block's contents are written
//! on the device, after the stored blocks, in room left for them). Values are
//! uploaded once with their blocks and never come back until
//! they are inside encoded output blocks (lazy value movement). One slice
//! is resident on the device at a time; an allocation past the budget
//! fails the device path (and the job runs on the CPU).
//!
//! The slice's blocks go up on the transfer queue; the checksum kernel
//! waits on that upload's event.
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
use shale_format::format::{decoded_block_len, BLOCK_TRAILER_LEN};
use shale_format::internal_key::ParsedInternalKey;

use super::device_error::DeviceError;
use super::device_fit::GcSite;
use super::pinned::HostBytes;
use super::scan::exclusive_scan_u32;
use super::session::{mem, Arg, Session, Upload};
use super::slices::{InputBlock, SliceInput};
use crate::boundaries::GrandparentCutter;
use crate::gc::{is_base_level_for, keep_entry};
use crate::inputs::shared_user_key_prefix;
use crate::job::{CompactionJob, PhaseStats};

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
    /// The kept entries the output file must end before, in order (the
    /// grandparent cuts).
    pub(crate) stops: Vec<u32>,
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

/// One slice on its way through unpack, merge and gc: the device session,
/// the job, and what carries over between slices.
pub(crate) struct SliceRun<'a, 's, 'c> {
    pub(crate) session: &'a mut Session<'s>,
    pub(crate) pool: &'a rayon::ThreadPool,
    pub(crate) job: &'a CompactionJob,
    /// Entries of the open output file, the slice's last run.
    pub(crate) carried: usize,
    /// Where gc decides.
    pub(crate) gc: GcSite,
    /// The grandparent cut and a cut pending from the previous slice.
    pub(crate) carry: &'a mut GcCarry<'c>,
    pub(crate) stats: &'a mut PhaseStats,
}

/// The slice's input blocks on the device, decompressed and checked.
struct CheckedBlocks {
    upload: Upload<u8>,
    blocks: Vec<InputBlock>,
    names: Vec<String>,
    /// Per run, its first block; then the block count.
    run_first_block: Vec<usize>,
}

/// Every restart group's start and limit in the slice's data (on the
/// device), the index of each block's first group, and the group count.
type RestartGroups = (Buffer<u32>, Buffer<u32>, Vec<usize>, usize);

/// The slice's restart groups on the device, and per group where its
/// entries and key bytes go.
struct CountedGroups {
    groups: usize,
    group_start: Buffer<u32>,
    group_limit: Buffer<u32>,
    /// Per block, its first restart group.
    block_first_group: Vec<usize>,
    entry_base: Buffer<u64>,
    key_base: Buffer<u64>,
    /// Entries in the slice, carried ones included.
    entries: usize,
    key_bytes: usize,
}

/// The slice's entries parsed on the device, in input order.
struct Unpacked {
    data: Upload<u8>,
    keys: Buffer<u8>,
    key_bytes: usize,
    key_offset: Buffer<u32>,
    key_len: Buffer<u32>,
    value_offset: Buffer<u32>,
    value_len: Buffer<u32>,
    /// Where each run's entries start, then the entry count.
    run_start: Vec<u32>,
    entries: usize,
}

/// The kept entries in merged order, and the cut before each.
struct Kept {
    kept: Buffer<u32>,
    count: usize,
    /// Kept entries a file must end before, in order.
    stops: Vec<u32>,
}

impl SliceRun<'_, '_, '_> {
    /// Unpack, merge by rank, gc: the slice's kept entries, `None` when
    /// none is kept.
    pub(crate) fn entries(
        mut self,
        input: SliceInput,
    ) -> Result<Option<DeviceEntries>, DeviceError> {
        let t = Instant::now();
        let unpacked = self.unpack(input)?;
        self.stats.unpack_secs += t.elapsed().as_secs_f64();
        let Some((unpacked, prefix)) = unpacked else {
            return Ok(None);
        };
        let t = Instant::now();
        let order = self.merge(&unpacked, prefix)?;
        self.stats.merge_secs += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let kept = self.collect_kept(&unpacked, &order)?;
        self.stats.gc_secs += t.elapsed().as_secs_f64();
        if kept.count < self.carried {
            return Err(DeviceError::new(
                "gc dropped an entry carried over from the previous slice",
            ));
        }
        if kept.count == 0 {
            return Ok(None);
        }
        Ok(Some(DeviceEntries {
            data: unpacked.data,
            keys: unpacked.keys,
            key_offset: unpacked.key_offset,
            key_len: unpacked.key_len,
            value_offset: unpacked.value_offset,
            value_len: unpacked.value_len,
            kept: kept.kept,
            kept_count: kept.count,
            stops: kept.stops,
        }))
    }

    /// Checks the blocks, counts the entries of every restart group, then
    /// parses them into the key arena and the entry tuples (with each
    /// entry's key prefix, for the merge); `None` when the slice has no
    /// entry.
    fn unpack(
        &mut self,
        input: SliceInput,
    ) -> Result<Option<(Unpacked, Buffer<u64>)>, DeviceError> {
        let checked = self.upload_and_check(input)?;
        let counted = self.count_entries(&checked)?;
        let n = counted.entries;
        if n < self.carried {
            return Err(DeviceError::new(format!(
                "the slice has {n} entries, fewer than the {} carried over",
                self.carried
            )));
        }
        self.stats.entries_in += (n - self.carried) as u64;
        let run_start = self.run_starts(&checked, &counted)?;
        if n == 0 {
            return Ok(None);
        }
        self.parse(checked, &counted, run_start).map(Some)
    }

    /// Uploads the blocks as stored on the transfer queue, with room after
    /// them for the contents of the compressed ones; checks every block's
    /// CRC32C on the device, then decompresses the compressed blocks there
    /// (`snappy_decompress`) into that room. The host reads only each
    /// compressed block's header, for its size. Fails on the first block
    /// whose CRC32C is wrong or whose Snappy data does not decode.
    fn upload_and_check(&mut self, input: SliceInput) -> Result<CheckedBlocks, DeviceError> {
        let session = &mut *self.session;
        let SliceInput {
            data,
            mut blocks,
            run_first_block,
            names,
            ..
        } = input;
        let stored = data.as_slice();
        // The compressed blocks, each with where its contents go and their size.
        let mut compressed = Vec::new();
        let mut end = stored.len();
        for (b, block) in blocks.iter().enumerate() {
            let trailer = (block.raw + block.contents_len) as usize;
            if stored[trailer] != 0 {
                let raw = &stored[block.raw as usize..trailer + BLOCK_TRAILER_LEN];
                let len = decoded_block_len(raw, &names[block.source], block.handle, false)
                    .map_err(input_error)?;
                compressed.push((b, end, len));
                end += len;
            }
        }
        if end > u32::MAX as usize {
            return Err(DeviceError::new(format!(
                "{end} bytes of input blocks and their contents: past 32-bit offsets"
            )));
        }
        let room = end - stored.len();
        let mut upload = match data {
            HostBytes::Pinned(pinned) => session.upload_pinned("input blocks", pinned, room)?,
            HostBytes::Heap(bytes) => session.upload_async("input blocks", bytes, room)?,
        };
        let offsets: Vec<u32> = blocks.iter().map(|b| b.raw).collect();
        let lengths: Vec<u32> = blocks.iter().map(|b| b.contents_len).collect();
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
        session.finish_upload(&mut upload)?;
        if !compressed.is_empty() {
            // Compressed offsets and sizes, then where the contents go and
            // their sizes: one upload.
            let k = compressed.len();
            let mut plan = vec![0u32; 5 * k];
            for (i, &(b, at, len)) in compressed.iter().enumerate() {
                plan[i] = blocks[b].raw;
                plan[k + i] = blocks[b].contents_len;
                plan[2 * k + i] = at as u32;
                plan[3 * k + i] = len as u32;
                plan[4 * k + i] = b as u32;
            }
            let plan = session.upload("blocks to decompress", &plan)?;
            // In order after the checksums: a block is decoded only once
            // its bytes are known good, and one that does not decode fails
            // its checksum result (one read-back for both).
            session.launch(
                "snappy_decompress",
                k,
                None,
                room as u64,
                &[
                    mem(&upload.buffer),
                    mem(&plan),
                    Arg::U32(k as u32),
                    mem(&crc_ok),
                ],
            )?;
        }
        let crc_ok = session.download("checksum results", &crc_ok, blocks.len())?;
        if let Some(b) = crc_ok.iter().position(|&ok| ok == 0) {
            let what = if compressed.iter().any(|&(c, _, _)| c == b) {
                "block checksum mismatch or bad Snappy data (found on the device)"
            } else {
                "block checksum mismatch (found on the device)"
            };
            return Err(corrupt(&names, &blocks[b], what));
        }
        for &(b, at, len) in &compressed {
            let block = &mut blocks[b];
            block.contents = at as u32;
            block.contents_len = len as u32;
        }
        Ok(CheckedBlocks {
            upload,
            blocks,
            names,
            run_first_block,
        })
    }

    /// Lists every block's restart groups on the device (`restart_counts`,
    /// then `restart_groups` from the counts' prefix sums, which the host
    /// also keeps per block), with the rules of
    /// `steps::unpack::restart_groups_into`.
    fn restart_groups(
        &mut self,
        checked: &CheckedBlocks,
        error: &Buffer<u32>,
    ) -> Result<RestartGroups, DeviceError> {
        let session = &mut *self.session;
        let blocks = &checked.blocks;
        let m = blocks.len();
        let mut plan: Vec<u32> = blocks.iter().map(|b| b.contents).collect();
        plan.extend(blocks.iter().map(|b| b.contents_len));
        let plan = session.upload("blocks' contents", &plan)?;
        let counts = session.alloc::<u32>("restart counts", m)?;
        session.launch(
            "restart_counts",
            m,
            None,
            m as u64 * 4,
            &[
                mem(&checked.upload.buffer),
                mem(&plan),
                Arg::U32(m as u32),
                mem(&counts),
            ],
        )?;
        let counts = session.download("restart counts", &counts, m)?;
        let mut first = Vec::with_capacity(m);
        let mut groups = 0usize;
        for (block, &count) in blocks.iter().zip(&counts) {
            if count == 0 {
                let reason = if block.contents_len < 4 {
                    "block too short for its restart count"
                } else {
                    "bad restart count"
                };
                return Err(corrupt(&checked.names, block, reason));
            }
            first.push(groups);
            groups += count as usize;
        }
        if groups > u32::MAX as usize {
            return Err(DeviceError::new("restart groups past 32-bit counts"));
        }
        let first_buffer: Vec<u32> = first.iter().map(|&f| f as u32).collect();
        let first_buffer = session.upload("restart groups", &first_buffer)?;
        let group_start = session.alloc::<u32>("restart groups", groups)?;
        let group_limit = session.alloc::<u32>("restart groups", groups)?;
        session.launch(
            "restart_groups",
            m,
            None,
            groups as u64 * 8,
            &[
                mem(&checked.upload.buffer),
                mem(&plan),
                Arg::U32(m as u32),
                mem(&first_buffer),
                mem(&group_start),
                mem(&group_limit),
                mem(error),
            ],
        )?;
        Ok((group_start, group_limit, first, groups))
    }

    /// Lists the restart groups, counts each one's entries and key bytes on
    /// the device, and scans the counts into offsets.
    fn count_entries(&mut self, checked: &CheckedBlocks) -> Result<CountedGroups, DeviceError> {
        // One flag for restart arrays out of order and groups that do not
        // parse: one read-back.
        let error = self.session.alloc_zeroed::<u32>("an error flag", 1)?;
        let (group_start, group_limit, block_first_group, groups) =
            self.restart_groups(checked, &error)?;
        let session = &mut *self.session;
        let blocks = &checked.blocks;
        let entry_count = session.alloc::<u32>("entry counts", groups)?;
        let key_bytes = session.alloc::<u32>("key sizes", groups)?;
        session.launch(
            "unpack_count",
            groups,
            None,
            u64::from(blocks.iter().map(|b| b.contents_len).sum::<u32>()),
            &[
                mem(&checked.upload.buffer),
                mem(&group_start),
                mem(&group_limit),
                Arg::U32(groups as u32),
                mem(&entry_count),
                mem(&key_bytes),
                mem(&error),
            ],
        )?;
        session.check_flag(
            "an input block's restart points are out of order, or a restart group does not parse",
            &error,
        )?;
        let (entry_base, total) =
            exclusive_scan_u32(session, "entry offsets", &entry_count, groups)?;
        let (key_base, key_total) = exclusive_scan_u32(session, "key offsets", &key_bytes, groups)?;
        if total > u64::from(u32::MAX / 2) || key_total > u64::from(u32::MAX) {
            return Err(DeviceError::new(format!(
                "{total} entries with {key_total} key bytes: past 32-bit offsets"
            )));
        }
        Ok(CountedGroups {
            groups,
            group_start,
            group_limit,
            block_first_group,
            entry_base,
            key_base,
            entries: total as usize,
            key_bytes: key_total as usize,
        })
    }

    /// Where each run's entries start: runs are laid out one after another.
    fn run_starts(
        &mut self,
        checked: &CheckedBlocks,
        counted: &CountedGroups,
    ) -> Result<Vec<u32>, DeviceError> {
        let (groups, n) = (counted.groups, counted.entries);
        let runs = checked.run_first_block.len() - 1;
        // One read-back per run, all in flight before the host waits once.
        let mut reads = Vec::with_capacity(runs);
        for &first_block in &checked.run_first_block[..runs] {
            let first_group = counted
                .block_first_group
                .get(first_block)
                .copied()
                .unwrap_or(groups);
            reads.push(if first_group < groups {
                Some(self.session.download_async(
                    "entry offsets",
                    &counted.entry_base,
                    first_group,
                    1,
                    &[],
                )?)
            } else {
                None
            });
        }
        let mut run_start = Vec::with_capacity(runs + 1);
        for read in reads {
            run_start.push(match read {
                Some(read) => self.session.finish_download(read)?[0] as u32,
                None => n as u32,
            });
        }
        run_start.push(n as u32);
        Ok(run_start)
    }

    /// Parses every restart group into the key arena, the entry tuples and
    /// the entries' 8-byte user-key prefixes.
    fn parse(
        &mut self,
        checked: CheckedBlocks,
        counted: &CountedGroups,
        run_start: Vec<u32>,
    ) -> Result<(Unpacked, Buffer<u64>), DeviceError> {
        let session = &mut *self.session;
        let n = counted.entries;
        let keys = session.alloc::<u8>("keys", counted.key_bytes)?;
        let key_offset = session.alloc::<u32>("entry tuples", n)?;
        let key_len = session.alloc::<u32>("entry tuples", n)?;
        let value_offset = session.alloc::<u32>("entry tuples", n)?;
        let value_len = session.alloc::<u32>("entry tuples", n)?;
        let prefix = session.alloc::<u64>("key prefixes", n)?;
        session.launch(
            "unpack_parse",
            counted.groups,
            None,
            u64::from(checked.blocks.iter().map(|b| b.contents_len).sum::<u32>()),
            &[
                mem(&checked.upload.buffer),
                mem(&counted.group_start),
                mem(&counted.group_limit),
                Arg::U32(counted.groups as u32),
                mem(&counted.entry_base),
                mem(&counted.key_base),
                Arg::U32(shared_user_key_prefix(self.job) as u32),
                mem(&keys),
                mem(&key_offset),
                mem(&key_len),
                mem(&value_offset),
                mem(&value_len),
                mem(&prefix),
            ],
        )?;
        let unpacked = Unpacked {
            data: checked.upload,
            keys,
            key_bytes: counted.key_bytes,
            key_offset,
            key_len,
            value_offset,
            value_len,
            run_start,
            entries: n,
        };
        Ok((unpacked, prefix))
    }

    /// Checks that every run is in key order, then merges by rank
    /// (Algorithm 1): the entry numbers in merged order. The prefixes are
    /// freed once the merge is queued.
    fn merge(
        &mut self,
        unpacked: &Unpacked,
        prefix: Buffer<u64>,
    ) -> Result<Buffer<u32>, DeviceError> {
        let session = &mut *self.session;
        let n = unpacked.entries;
        let runs = unpacked.run_start.len() - 1;
        let run_start_buffer = session.upload("run starts", &unpacked.run_start)?;
        let entry_args = [
            mem(&unpacked.keys),
            mem(&unpacked.key_offset),
            mem(&unpacked.key_len),
            mem(&prefix),
        ];
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
        Ok(order)
    }

    /// GC: keep flags (on the device or the host), the grandparent cuts,
    /// then stream compaction of the kept entries.
    fn collect_kept(
        &mut self,
        unpacked: &Unpacked,
        order: &Buffer<u32>,
    ) -> Result<Kept, DeviceError> {
        let n = unpacked.entries;
        let (keep, stops_by_merged) = match self.gc {
            GcSite::Device => self.gc_on_device(unpacked, order)?,
            GcSite::Host => self.gc_on_host(unpacked, order)?,
        };
        let session = &mut *self.session;
        let (position, kept_total) = exclusive_scan_u32(session, "kept positions", &keep, n)?;
        let count = kept_total as usize;
        let kept = session.alloc::<u32>("kept entries", count)?;
        session.launch(
            "compact_kept",
            n,
            None,
            n as u64 * 16,
            &[
                mem(order),
                mem(&keep),
                mem(&position),
                Arg::U32(n as u32),
                mem(&kept),
            ],
        )?;
        let stops = match stops_by_merged {
            GrandparentStops::None => Vec::new(),
            GrandparentStops::PerEntry(stop_before, keep) => {
                self.stops_of_kept(stop_before, &keep)?
            }
            GrandparentStops::Positions(passed) => {
                self.stops_from_positions(&passed, &position, n, count)?
            }
        };
        Ok(Kept { kept, count, stops })
    }

    /// [`SliceRun::stops_of_kept`] from the grandparent positions on the
    /// device: only the entries where the position changes (at most one
    /// more than there are grandparents) come back, each with the number of
    /// kept entries before it, and the cutter runs over those. `position`
    /// is the kept entries' prefix sum, `count` its total.
    fn stops_from_positions(
        &mut self,
        passed: &Buffer<u32>,
        position: &Buffer<u64>,
        n: usize,
        count: usize,
    ) -> Result<Vec<u32>, DeviceError> {
        let carried = self.carried;
        if n <= carried {
            return Ok(Vec::new());
        }
        let capacity = self.job.grandparents.len() + 1;
        let session = &mut *self.session;
        let changes = session.alloc_zeroed::<u32>("grandparent cuts", 1 + 3 * capacity)?;
        session.launch(
            "grandparent_changes",
            n,
            None,
            n as u64 * 8,
            &[
                mem(passed),
                mem(position),
                Arg::U32(carried as u32),
                Arg::U32(n as u32),
                Arg::U32(capacity as u32),
                mem(&changes),
            ],
        )?;
        let changes = session.download("grandparent cuts", &changes, 1 + 3 * capacity)?;
        let found = changes[0] as usize;
        if found == 0 || found > capacity {
            return Err(DeviceError::new(format!(
                "{found} grandparent position changes for {} grandparents: the positions do not grow in key order",
                capacity - 1
            )));
        }
        let mut changes: Vec<&[u32]> = changes[1..1 + 3 * found].chunks_exact(3).collect();
        changes.sort_unstable_by_key(|change| change[0]);
        if changes[0][0] as usize != carried || changes[0][2] as usize != carried {
            return Err(DeviceError::new(
                "gc dropped an entry carried over from the previous slice",
            ));
        }
        // A cut belongs to the first kept entry at or after it; past the
        // slice's last kept entry, to the next slice's first new one.
        let was_pending = std::mem::take(&mut self.carry.pending_stop);
        let cutter = &mut self.carry.cutter;
        let mut stops: Vec<u32> = Vec::new();
        let mut pending = false;
        let mut cut_before = |kept: usize| {
            if kept >= count {
                pending = true;
            } else if stops.last() != Some(&(kept as u32)) {
                stops.push(kept as u32);
            }
        };
        if was_pending {
            cut_before(carried);
        }
        for change in changes {
            if cutter.should_stop_before_position(change[1] as usize) {
                cut_before(change[2] as usize);
            }
        }
        self.carry.pending_stop = pending;
        Ok(stops)
    }

    /// The kept entries with a cut before them, in order: kept entry j has
    /// one when a grandparent cut was seen at or since the previous kept
    /// entry. Carried entries (all kept) had their stops in an earlier
    /// slice; a cut pending from there belongs to the next new entry.
    fn stops_of_kept(
        &mut self,
        stop_before: Vec<bool>,
        keep: &[u32],
    ) -> Result<Vec<u32>, DeviceError> {
        let carried = self.carried;
        if keep.iter().take(carried).any(|&k| k == 0) {
            return Err(DeviceError::new(
                "gc dropped an entry carried over from the previous slice",
            ));
        }
        let mut stops = Vec::new();
        let mut kept = carried as u32;
        for (stop, &keep) in stop_before.into_iter().zip(keep).skip(carried) {
            self.carry.pending_stop |= stop;
            if keep != 0 {
                if std::mem::take(&mut self.carry.pending_stop) {
                    stops.push(kept);
                }
                kept += 1;
            }
        }
        Ok(stops)
    }
    /// Q-Compaction's gc: every decision on the device.
    fn gc_on_device(
        &mut self,
        unpacked: &Unpacked,
        order: &Buffer<u32>,
    ) -> Result<GcResult, DeviceError> {
        let (session, job, n) = (&mut *self.session, self.job, unpacked.entries);
        let (keys, key_offset, key_len) = (&unpacked.keys, &unpacked.key_offset, &unpacked.key_len);
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
            return Ok((keep, GrandparentStops::None));
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
        Ok((keep, GrandparentStops::Positions(passed)))
    }

    /// C-Compaction's gc: the merged keys come back to the host, which decides
    /// (with the CPU executor's own predicate) and sends the flags back.
    fn gc_on_host(
        &mut self,
        unpacked: &Unpacked,
        order: &Buffer<u32>,
    ) -> Result<GcResult, DeviceError> {
        let (session, pool, job) = (&mut *self.session, self.pool, self.job);
        let (carried, n, key_total) = (self.carried, unpacked.entries, unpacked.key_bytes);
        let cutter = &mut self.carry.cutter;
        let (keys, key_offset, key_len) = (&unpacked.keys, &unpacked.key_offset, &unpacked.key_len);
        let keys = session.download("keys", keys, key_total)?;
        let key_offset = session.download("key offsets", key_offset, n)?;
        let key_len = session.download("key lengths", key_len, n)?;
        let order = session.download("the merged order", order, n)?;
        let key = |i: usize| -> Result<&[u8], DeviceError> {
            let e = *order
                .get(i)
                .ok_or_else(|| DeviceError::new("merged order out of range"))?
                as usize;
            let (offset, len) = (key_offset[e] as usize, key_len[e] as usize);
            keys.get(offset..offset + len)
                .ok_or_else(|| DeviceError::new("key arena out of range"))
        };
        let parse = |i: usize| -> Result<ParsedInternalKey<'_>, DeviceError> {
            ParsedInternalKey::parse(key(i)?).map_err(|e| {
                DeviceError::new(format!("compaction input has a bad internal key: {e}"))
            })
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
            GrandparentStops::None
        } else {
            let stops = (0..n)
                .map(|i| Ok(i >= carried && cutter.should_stop_before(key(i)?)))
                .collect::<Result<Vec<bool>, DeviceError>>()?;
            GrandparentStops::PerEntry(stops, keep.clone())
        };
        let keep_buffer = session.upload("keep flags", &keep)?;
        Ok((keep_buffer, stops))
    }
}

/// The result of gc: keep flags on the device, and what the grandparent
/// cuts are found from.
type GcResult = (Buffer<u32>, GrandparentStops);

/// What gc leaves for the grandparent cuts.
enum GrandparentStops {
    /// The job has no grandparents.
    None,
    /// On the host (C-Compaction's gc): per merged entry whether a cut
    /// falls before it, and the keep flags.
    PerEntry(Vec<bool>, Vec<u32>),
    /// On the device: per merged entry, how many grandparents' largest keys
    /// sort before it.
    Positions(Buffer<u32>),
}
