//! Sub-compactions: one large job cut by user key into sub-jobs that run in
//! parallel (ProckStore's "sub-task" priority; RocksDB's subcompactions).
//! Each sub-job is itself a [`CompactionJob`] with its
//! [`CompactionJob::range`] set, so every executor runs it unchanged, and
//! writes for it the same tables as `streaming` does.
//!
//! Two pure steps, for the scheduler to call:
//! - [`boundaries`]: where to cut. The candidates are the index-block anchors
//!   of the input tables (the upper bound of each data block, weighted by
//!   that block's size), in the spirit of RocksDB's
//!   `GenSubcompactionBoundaries`; only footers and index blocks are read.
//!   The cuts split the input bytes into roughly equal parts of at least
//!   `min_part_bytes` each.
//! - [`split`]: the sub-jobs for given cuts, each keeping only the input
//!   files, grandparents and deeper-level ranges its range can touch.
//!
//! Why the sub-jobs together do what the whole job does: bounds are user
//! keys, so every version of a user key is in exactly one sub-job, and gc
//! (which looks at an entry, the entry before it with the same user key,
//! the snapshot and the deeper levels) keeps the same entries. Output files
//! are cut afresh in each sub-job, so the files differ from the whole
//! job's; the kept entries, in order, do not.

use shale_format::format::BLOCK_TRAILER_LEN;
use shale_format::internal_key::extract_user_key;
use shale_format::Result;

use crate::inputs::{open_table, InputTable};
use crate::job::{CompactionJob, InputRun, JobFile, JobIo, KeyRange};

/// Up to `max_parts - 1` user keys, strictly increasing, that cut `job`'s
/// input into parts of roughly equal input bytes, each at least
/// `min_part_bytes` (the engine passes at least one output file's size).
/// Every boundary lies strictly inside the job's range and strictly between
/// the smallest and largest user keys of its input files within the range.
/// Empty when the job is too small to split in two (or `max_parts < 2`).
///
/// The sizes are those of the data blocks the index blocks list: reads the
/// footer and index block of each input file that overlaps the job's range,
/// no data block.
pub fn boundaries(
    job: &CompactionJob,
    io: &dyn JobIo,
    min_part_bytes: u64,
    max_parts: usize,
) -> Result<Vec<Vec<u8>>> {
    if max_parts < 2 || job.range.is_empty() {
        return Ok(Vec::new());
    }
    // Anchors: the user key closing each data block and the block's bytes.
    let files: Vec<&JobFile> = job
        .inputs
        .iter()
        .flat_map(|run| &run.files)
        .filter(|f| job.file_in_range(f))
        .collect();
    let tables = open_tables(io, &files, max_parts)?;
    let mut anchors: Vec<(&[u8], u64)> = tables
        .iter()
        .flat_map(|table| {
            table.blocks[table.blocks_in_range(&job.range)]
                .iter()
                .map(|(key, handle)| {
                    (
                        extract_user_key(key),
                        handle.size + BLOCK_TRAILER_LEN as u64,
                    )
                })
        })
        .collect();
    anchors.sort_unstable_by(|a, b| a.0.cmp(b.0));
    anchors.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 += later.1;
            true
        } else {
            false
        }
    });
    let Some((low, high)) = key_span(job) else {
        return Ok(Vec::new());
    };
    let total: u64 = anchors.iter().map(|a| a.1).sum();
    let min_part_bytes = min_part_bytes.max(1);
    let parts = (total / min_part_bytes).min(max_parts as u64);
    if parts < 2 {
        return Ok(Vec::new());
    }
    // A boundary must leave keys on both sides: strictly above the lowest
    // key the job can hold and strictly below the highest.
    let inside = |key: &[u8]| {
        key > low.as_slice()
            && key < high.as_slice()
            && !job.range.is_below(key)
            && !job.range.is_above(key)
            && job.range.lower.as_deref() != Some(key)
    };
    let mut cuts: Vec<Vec<u8>> = Vec::new();
    let (mut consumed, mut part_start) = (0u64, 0u64);
    for (key, bytes) in anchors {
        let cut = cuts.len() as u64 + 1;
        if cut >= parts {
            break;
        }
        // The block an anchor closes holds keys up to the anchor, so it
        // lies (all but its last key) before a cut at the anchor.
        consumed += bytes;
        // The k-th cut where the bytes before it reach k/parts of the
        // total: measured from the start, so errors do not add up.
        if consumed >= part_start + min_part_bytes
            && total - consumed >= min_part_bytes
            && u128::from(consumed) * u128::from(parts) >= u128::from(total) * u128::from(cut)
            && inside(key)
        {
            cuts.push(key.to_vec());
            part_start = consumed;
        }
    }
    Ok(cuts)
}

/// Input files one thread opens at least when a job's are opened on
/// several: opening one is an `open`, a footer read and an index block,
/// a fraction of a millisecond.
const FILES_PER_OPENING_THREAD: usize = 8;

/// `files` opened (footer and index block), on up to `threads` threads:
/// the cores the sub-compactions will take are idle until the boundaries
/// are known, and a full compaction's job opens a hundred files or more.
fn open_tables(io: &dyn JobIo, files: &[&JobFile], threads: usize) -> Result<Vec<InputTable>> {
    let threads = threads.min(files.len() / FILES_PER_OPENING_THREAD);
    if threads < 2 {
        return files.iter().map(|file| open_table(io, file)).collect();
    }
    let per_thread = files.len().div_ceil(threads);
    let open_part = |part: &[&JobFile]| -> Result<Vec<InputTable>> {
        part.iter().map(|file| open_table(io, file)).collect()
    };
    std::thread::scope(|scope| {
        // A part whose thread cannot start is opened here, in its turn.
        let parts: Vec<_> = files
            .chunks(per_thread)
            .map(|part| {
                let thread = std::thread::Builder::new()
                    .name("shale-open-inputs".into())
                    .spawn_scoped(scope, move || open_part(part));
                (part, thread.ok())
            })
            .collect();
        let mut tables = Vec::with_capacity(files.len());
        for (part, thread) in parts {
            let opened = match thread.map(|t| t.join()) {
                Some(Ok(opened)) => opened,
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                None => open_part(part),
            };
            tables.extend(opened?);
        }
        Ok(tables)
    })
}

/// The smallest and largest user keys of the job's input files that
/// overlap its range; `None` when there are none.
fn key_span(job: &CompactionJob) -> Option<(Vec<u8>, Vec<u8>)> {
    let files = job
        .inputs
        .iter()
        .flat_map(|run| &run.files)
        .filter(|f| job.file_in_range(f));
    let low = files.clone().map(|f| extract_user_key(&f.smallest)).min()?;
    let high = files.map(|f| extract_user_key(&f.largest)).max()?;
    Some((low.to_vec(), high.to_vec()))
}

/// The sub-jobs of `job` cut at `boundaries`, in key order: one more than
/// the boundaries used. Each has its range set, nested inside the parent's,
/// and keeps only what its range can touch: input files that can hold one
/// of its keys (runs left empty are removed), and the grandparent files and
/// deeper-level ranges that overlap it. Trimming those changes nothing an
/// executor writes: a grandparent file wholly below the range is passed
/// before the first key without counting, one wholly above is never
/// reached, and a deeper range outside holds none of the sub-job's keys.
/// The sub-jobs keep the parent's id (the engine renumbers them).
///
/// Boundaries that are not strictly increasing, or not strictly inside the
/// parent's range, are ignored.
pub fn split(job: &CompactionJob, boundaries: &[Vec<u8>]) -> Vec<CompactionJob> {
    let mut cuts: Vec<&[u8]> = Vec::with_capacity(boundaries.len());
    for boundary in boundaries {
        let increasing = cuts.last().is_none_or(|&last| last < boundary.as_slice());
        let inside = job.range.contains(boundary) && job.range.lower.as_ref() != Some(boundary);
        if increasing && inside {
            cuts.push(boundary);
        }
    }
    let mut lowers = vec![job.range.lower.clone()];
    lowers.extend(cuts.iter().map(|c| Some(c.to_vec())));
    let mut uppers: Vec<Option<Vec<u8>>> = cuts.iter().map(|c| Some(c.to_vec())).collect();
    uppers.push(job.range.upper.clone());
    lowers
        .into_iter()
        .zip(uppers)
        .map(|(lower, upper)| restrict(job, KeyRange::new(lower, upper)))
        .collect()
}

/// `job` restricted to `range` (a subrange of its own).
fn restrict(job: &CompactionJob, range: KeyRange) -> CompactionJob {
    let overlaps = |file: &JobFile| {
        range.overlaps(
            extract_user_key(&file.smallest),
            extract_user_key(&file.largest),
        )
    };
    let inputs = job
        .inputs
        .iter()
        .map(|run| InputRun {
            level: run.level,
            files: run.files.iter().filter(|f| overlaps(f)).cloned().collect(),
        })
        .filter(|run| !run.files.is_empty())
        .collect();
    let grandparents = job
        .grandparents
        .iter()
        .filter(|f| overlaps(f))
        .cloned()
        .collect();
    let deeper_levels = job
        .deeper_levels
        .iter()
        .map(|level| {
            level
                .iter()
                .filter(|r| range.overlaps(&r.smallest, &r.largest))
                .cloned()
                .collect()
        })
        .collect();
    CompactionJob {
        id: job.id,
        inputs,
        output_level: job.output_level,
        max_output_file_size: job.max_output_file_size,
        grandparents,
        max_grandparent_overlap_bytes: job.max_grandparent_overlap_bytes,
        smallest_snapshot: job.smallest_snapshot,
        deeper_levels,
        table: job.table.clone(),
        range,
    }
}

/// [`split`] at [`boundaries`]: the sub-jobs of `job`, or `job` alone when
/// it is too small to split.
pub fn subcompactions(
    job: &CompactionJob,
    io: &dyn JobIo,
    min_part_bytes: u64,
    max_parts: usize,
) -> Result<Vec<CompactionJob>> {
    let cuts = boundaries(job, io, min_part_bytes, max_parts)?;
    Ok(split(job, &cuts))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::collections::HashMap;
    use std::sync::Arc;

    use shale_format::internal_key::{InternalKey, ValueType};
    use shale_format::table_builder::TableBuilder;

    use super::*;
    use crate::inputs::open_table;
    use crate::job::{TableSettings, UserKeyRange};
    use crate::testing::MemIo;

    fn user_key(i: u32) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    fn internal(i: u32, sequence: u64) -> Vec<u8> {
        InternalKey::new(&user_key(i), sequence, ValueType::Value).into_encoded()
    }

    /// A table of user keys `keys` (sequence `sequence`), 100-byte values,
    /// 1 KiB blocks.
    fn table(number: u64, keys: std::ops::Range<u32>, sequence: u64) -> (JobFile, Vec<u8>) {
        let settings = TableSettings {
            block_size: 1024,
            ..TableSettings::default()
        };
        let mut builder = TableBuilder::new(settings.table_options(), Vec::new());
        for i in keys.clone() {
            builder.add(&internal(i, sequence), &[b'v'; 100]).unwrap();
        }
        let bytes = builder.finish().unwrap().0;
        let file = JobFile {
            number,
            file_size: bytes.len() as u64,
            smallest: internal(keys.start, sequence),
            largest: internal(keys.end - 1, sequence),
        };
        (file, bytes)
    }

    fn job(runs: Vec<Vec<JobFile>>) -> CompactionJob {
        let inputs = runs
            .into_iter()
            .map(|files| InputRun { level: 0, files })
            .collect();
        CompactionJob {
            id: 3,
            ..crate::testing::job(inputs)
        }
    }

    /// Four overlapping L0 tables over keys 0..4000 and a level run of
    /// four files over 0..4000, about 850 KiB in all.
    fn big_job() -> (CompactionJob, MemIo) {
        let mut inputs = HashMap::new();
        let mut runs = Vec::new();
        for r in 0..4u32 {
            let (file, bytes) = table(u64::from(r) + 1, r * 10..4000 - r * 10, u64::from(r) + 10);
            inputs.insert(file.number, Arc::new(bytes));
            runs.push(vec![file]);
        }
        let mut level = Vec::new();
        for f in 0..4u32 {
            let (file, bytes) = table(u64::from(f) + 10, f * 1000..(f + 1) * 1000, 1);
            inputs.insert(file.number, Arc::new(bytes));
            level.push(file);
        }
        runs.push(level);
        (job(runs), MemIo::new(inputs))
    }

    /// Bytes of each part between `cuts`, by the rule `boundaries` uses: a
    /// block counts before the first cut at or above its index key.
    fn part_bytes(job: &CompactionJob, io: &MemIo, cuts: &[Vec<u8>]) -> Vec<u64> {
        let mut parts = vec![0; cuts.len() + 1];
        for file in job.inputs.iter().flat_map(|r| &r.files) {
            let table = open_table(io, file).unwrap();
            for b in table.blocks_in_range(&job.range) {
                let (key, handle) = &table.blocks[b];
                let part = cuts.partition_point(|c| c.as_slice() < extract_user_key(key));
                parts[part] += handle.size + BLOCK_TRAILER_LEN as u64;
            }
        }
        parts
    }

    fn strictly_increasing(cuts: &[Vec<u8>]) -> bool {
        cuts.windows(2).all(|w| w[0] < w[1])
    }

    #[test]
    fn cuts_into_roughly_equal_parts() {
        let (job, io) = big_job();
        let total = job.input_bytes();
        for max_parts in [2, 3, 4, 7] {
            let cuts = boundaries(&job, &io, 1024, max_parts).unwrap();
            assert_eq!(cuts.len(), max_parts - 1, "{max_parts} parts");
            assert!(strictly_increasing(&cuts));
            let parts = part_bytes(&job, &io, &cuts);
            let average = parts.iter().sum::<u64>() / parts.len() as u64;
            for part in &parts {
                assert!(
                    part * 10 >= average * 8 && part * 10 <= average * 12,
                    "{max_parts} parts of {total} bytes: {parts:?}"
                );
            }
        }
    }

    #[test]
    fn honours_the_minimum_part_size() {
        let (job, io) = big_job();
        let all = part_bytes(&job, &io, &[])[0];
        for min_part_bytes in [all / 10, all / 3, all / 2 - 1, all / 2 + 1, all] {
            let cuts = boundaries(&job, &io, min_part_bytes, 100).unwrap();
            assert!(
                cuts.len() as u64 <= all / min_part_bytes,
                "{min_part_bytes}"
            );
            assert!(strictly_increasing(&cuts));
            for part in part_bytes(&job, &io, &cuts) {
                assert!(part >= min_part_bytes, "{part} < {min_part_bytes}");
            }
        }
    }

    #[test]
    fn honours_max_parts() {
        let (job, io) = big_job();
        for max_parts in 0..12 {
            let cuts = boundaries(&job, &io, 1, max_parts).unwrap();
            assert_eq!(cuts.len(), max_parts.saturating_sub(1), "{max_parts}");
            assert!(strictly_increasing(&cuts));
        }
    }

    #[test]
    fn nothing_when_small() {
        let (file, bytes) = table(1, 0..20, 1);
        let io = MemIo::new(HashMap::from([(1, Arc::new(bytes))]));
        let job = job(vec![vec![file]]);
        assert!(boundaries(&job, &io, job.input_bytes(), 8)
            .unwrap()
            .is_empty());
        assert!(boundaries(&job, &io, 1, 1).unwrap().is_empty());
        // One block: no key strictly inside the span closes a block.
        let (file, bytes) = table(1, 0..2, 1);
        let io = MemIo::new(HashMap::from([(1, Arc::new(bytes))]));
        let small = CompactionJob {
            inputs: vec![InputRun {
                level: 0,
                files: vec![file],
            }],
            ..job
        };
        assert!(boundaries(&small, &io, 1, 8).unwrap().is_empty());
    }

    #[test]
    fn cuts_lie_strictly_inside_the_range_and_the_span() {
        let (mut job, io) = big_job();
        for (lower, upper) in [
            (Some(500), Some(3100)),
            (None, Some(1234)),
            (Some(2999), None),
            (Some(5), Some(5)),
            (Some(100), Some(101)),
        ] {
            job.range = KeyRange::new(lower.map(user_key), upper.map(user_key));
            let cuts = boundaries(&job, &io, 1, 16).unwrap();
            assert!(strictly_increasing(&cuts));
            for cut in &cuts {
                assert!(
                    job.range.contains(cut) && job.range.lower.as_ref() != Some(cut),
                    "{cut:?} outside {:?}",
                    job.range
                );
                assert!(cut.as_slice() > b"key000000".as_slice());
                assert!(cut.as_slice() < b"key003999".as_slice());
            }
            if lower == Some(500) {
                assert_eq!(cuts.len(), 15);
            }
            if lower == upper {
                assert!(cuts.is_empty());
            }
        }
    }

    /// What the parallel and opencl executors read for a range: every
    /// block left out holds no key of the range, and only the first and
    /// last blocks kept hold keys outside it.
    #[test]
    fn blocks_in_range_leave_out_only_blocks_outside() {
        use crate::steps::unpack::unpack_block;
        let (file, bytes) = table(1, 0..600, 1);
        let io = MemIo::new(HashMap::from([(1, Arc::new(bytes.clone()))]));
        let table = open_table(&io, &file).unwrap();
        assert!(table.blocks.len() > 20);
        let keys_of = |b: usize| -> Vec<Vec<u8>> {
            let handle = table.blocks[b].1;
            let end = (handle.offset + handle.size) as usize + BLOCK_TRAILER_LEN;
            let block = unpack_block(&bytes[handle.offset as usize..end], "t", handle).unwrap();
            (0..block.entries.len())
                .map(|e| extract_user_key(block.key(e)).to_vec())
                .collect()
        };
        for (lower, upper) in [
            (None, None),
            (Some(0), Some(600)),
            (Some(100), Some(101)),
            (Some(123), Some(457)),
            (None, Some(50)),
            (Some(550), None),
            (Some(300), Some(300)),
        ] {
            let range = KeyRange::new(lower.map(user_key), upper.map(user_key));
            let kept = table.blocks_in_range(&range);
            for b in 0..table.blocks.len() {
                let keys = keys_of(b);
                if !kept.contains(&b) {
                    assert!(keys.iter().all(|k| !range.contains(k)), "{range:?} {b}");
                } else if b != kept.start && b + 1 != kept.end {
                    assert!(keys.iter().all(|k| range.contains(k)), "{range:?} {b}");
                }
            }
            if !range.is_empty() {
                let inside = (0..table.blocks.len())
                    .filter(|&b| keys_of(b).iter().any(|k| range.contains(k)))
                    .count();
                assert!(kept.len() <= inside + 2, "{range:?}: {kept:?} for {inside}");
            }
        }
    }

    #[test]
    fn split_nests_ranges_and_drops_files_outside() {
        let (mut job, _) = big_job();
        job.range = KeyRange::new(Some(user_key(100)), Some(user_key(3900)));
        let gp = |a: u32, b: u32| JobFile {
            number: 0,
            file_size: 10,
            smallest: internal(a, 1),
            largest: internal(b, 1),
        };
        job.grandparents = vec![gp(0, 900), gp(1000, 1999), gp(2100, 2500), gp(2600, 3999)];
        job.deeper_levels = vec![vec![
            UserKeyRange {
                smallest: user_key(0),
                largest: user_key(999),
            },
            UserKeyRange {
                smallest: user_key(3000),
                largest: user_key(3999),
            },
        ]];
        // Out of order, duplicate and outside boundaries are ignored.
        let cuts = [
            user_key(50),
            user_key(1000),
            user_key(1000),
            user_key(500),
            user_key(2000),
            user_key(3900),
        ];
        let subs = split(&job, &cuts);
        assert_eq!(subs.len(), 3);
        let ranges: Vec<&KeyRange> = subs.iter().map(|s| &s.range).collect();
        assert_eq!(ranges[0].lower, job.range.lower);
        assert_eq!(ranges[0].upper, Some(user_key(1000)));
        assert_eq!(ranges[1].lower, Some(user_key(1000)));
        assert_eq!(ranges[1].upper, Some(user_key(2000)));
        assert_eq!(ranges[2].lower, Some(user_key(2000)));
        assert_eq!(ranges[2].upper, job.range.upper);
        for sub in &subs {
            assert_eq!(sub.id, job.id);
            assert_eq!(sub.range.intersect(&job.range), sub.range);
            for file in sub.inputs.iter().flat_map(|r| &r.files) {
                assert!(sub.file_in_range(file));
            }
            assert!(sub.inputs.iter().all(|r| !r.files.is_empty()));
        }
        // The level run keeps one file per part; the L0 tables span all.
        let level_files = |s: &CompactionJob| -> Vec<u64> {
            s.inputs
                .iter()
                .flat_map(|r| &r.files)
                .map(|f| f.number)
                .filter(|&n| n >= 10)
                .collect()
        };
        assert_eq!(level_files(&subs[0]), vec![10]);
        assert_eq!(level_files(&subs[1]), vec![11]);
        assert_eq!(level_files(&subs[2]), vec![12, 13]);
        assert!(subs.iter().all(|s| s.inputs.len() == 5));
        // Grandparents and deeper ranges trimmed to each part.
        let gp_counts: Vec<usize> = subs.iter().map(|s| s.grandparents.len()).collect();
        assert_eq!(gp_counts, vec![1, 1, 2]);
        let deeper: Vec<usize> = subs.iter().map(|s| s.deeper_levels[0].len()).collect();
        assert_eq!(deeper, vec![1, 0, 1]);

        // No cut: the job itself.
        assert_eq!(split(&job, &[]), vec![job.clone()]);
        // A cut past the parent's range is ignored.
        assert_eq!(split(&job, &[user_key(3950)]), vec![job.clone()]);
        let two = split(&job, &[user_key(3850)]);
        assert_eq!(two.len(), 2);
        assert_eq!(
            two[1].range,
            KeyRange::new(Some(user_key(3850)), job.range.upper.clone())
        );
        // A run with no file in a part is removed from it.
        let (small, _) = table(20, 150..250, 30);
        let mut with_small = job.clone();
        with_small.inputs.insert(
            0,
            InputRun {
                level: 0,
                files: vec![small],
            },
        );
        let subs = split(&with_small, &[user_key(1000)]);
        assert_eq!(subs[0].inputs.len(), 6);
        assert_eq!(subs[1].inputs.len(), 5);
        assert_eq!(subs[1].inputs, split(&job, &[user_key(1000)])[1].inputs);
    }
}
