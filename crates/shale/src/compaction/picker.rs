//! What to compact, as pure functions of a [`Version`]: LevelDB's leveled
//! picking (level scores, rotating compact pointers, L0 overlap expansion,
//! boundary inputs, growing the input level when it does not change the
//! output level's inputs, grandparent files), ProckStore's cross-level
//! (triple-level) extension, and the plan-to-job conversion. Which level and
//! which file come first is the scheduler's priority
//! (`compaction::priority`); this file builds a plan around a chosen file.
//! Nothing here touches a disk or a lock, so it is tested on versions built
//! in memory.

use std::sync::Arc;

use shale_compact::job::{CompactionJob, InputRun, JobFile, UserKeyRange};
use shale_format::comparator::KeyOrder;
use shale_format::internal_key::{InternalKey, SequenceNumber};
use shale_format::version_edit::NUM_LEVELS;

use crate::compaction::priority;
use crate::options::Options;
pub use crate::options::PickStyle;
use crate::version::{total_file_size, FileMeta, Version};

/// Why a compaction was chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PickReason {
    /// The level's score reached 1 (L0: file count; others: bytes).
    Size {
        /// The score that triggered it.
        score: f64,
    },
    /// Reads kept searching a file in vain (LevelDB's seek compaction).
    Seek,
    /// Asked for by `compact_range`.
    Manual,
}

impl std::fmt::Display for PickReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PickReason::Size { score } => write!(f, "size, score {score:.2}"),
            PickReason::Seek => f.write_str("seek"),
            PickReason::Manual => f.write_str("manual"),
        }
    }
}

/// A chosen compaction: inputs at `level`, `level + 1` and, for a
/// cross-level job, `level + 2`; outputs at `output_level`, the deepest
/// input level.
#[derive(Debug, Clone)]
pub struct CompactionPlan {
    /// The input level the job was picked at.
    pub level: usize,
    /// Where the outputs go: `level + 1`, or `level + 2` for a cross-level
    /// job.
    pub output_level: usize,
    /// `inputs[i]`: the files at `level + i` (two entries, or three for a
    /// cross-level job).
    pub inputs: Vec<Vec<Arc<FileMeta>>>,
    /// Files at `output_level + 1` overlapping the inputs.
    pub grandparents: Vec<Arc<FileMeta>>,
    /// Why.
    pub reason: PickReason,
    /// User-key range covered by all inputs.
    pub smallest_user_key: Vec<u8>,
    /// See `smallest_user_key`.
    pub largest_user_key: Vec<u8>,
    /// The compact pointer to record for `level` (largest input key).
    pub compact_pointer: InternalKey,
    /// The order of user keys (the database's).
    pub order: KeyOrder,
}

/// Bytes of grandparent overlap after which an output file is cut.
pub fn max_grandparent_overlap_bytes(options: &Options) -> u64 {
    10 * options.max_file_size
}

/// Largest input size a compaction grows to when expanding its input level.
fn expanded_compaction_byte_limit(options: &Options) -> u64 {
    options.max_file_size.saturating_mul(25)
}

/// A queued or running compaction, as far as picking another one is
/// concerned.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningCompaction {
    /// Its input level.
    pub level: usize,
    /// Its output level.
    pub output_level: usize,
    /// User-key range it covers.
    pub smallest_user_key: Vec<u8>,
    /// See `smallest_user_key`.
    pub largest_user_key: Vec<u8>,
    /// Its input file numbers.
    pub files: Vec<u64>,
    /// The order of user keys its range is in.
    pub order: KeyOrder,
}

impl RunningCompaction {
    /// Whether the two cannot run at once: a shared file, or a shared level
    /// (their spans `level..=output_level` intersect) with overlapping key
    /// ranges.
    pub fn conflicts_with(&self, other: &RunningCompaction) -> bool {
        if other.files.iter().any(|f| self.files.contains(f)) {
            return true;
        }
        let levels_touch = self.level <= other.output_level && other.level <= self.output_level;
        let order = &self.order;
        let disjoint = order
            .compare_user(&self.largest_user_key, &other.smallest_user_key)
            .is_lt()
            || order
                .compare_user(&other.largest_user_key, &self.smallest_user_key)
                .is_lt();
        levels_touch && !disjoint
    }
}

impl CompactionPlan {
    /// Every input file number.
    pub fn input_numbers(&self) -> Vec<u64> {
        self.inputs.iter().flatten().map(|f| f.number).collect()
    }

    /// Total size of the input files.
    pub fn input_bytes(&self) -> u64 {
        self.inputs.iter().map(|files| total_file_size(files)).sum()
    }

    /// Number of input files.
    pub fn input_files(&self) -> usize {
        self.inputs.iter().map(Vec::len).sum()
    }

    /// True when the job merges three levels into the deepest.
    pub fn is_cross_level(&self) -> bool {
        self.output_level > self.level + 1
    }

    /// Whether this plan can run beside `running`: no shared file, and no
    /// shared level with an overlapping key range.
    pub fn conflicts_with(&self, running: &RunningCompaction) -> bool {
        self.running().conflicts_with(running)
    }

    /// As a [`RunningCompaction`] record.
    pub fn running(&self) -> RunningCompaction {
        RunningCompaction {
            level: self.level,
            output_level: self.output_level,
            smallest_user_key: self.smallest_user_key.clone(),
            largest_user_key: self.largest_user_key.clone(),
            files: self.input_numbers(),
            order: self.order.clone(),
        }
    }

    /// Files moving down a level unchanged: nothing overlaps them below,
    /// and none would make a later compaction too big. One file, or at
    /// levels past 0 (whose files never overlap one another) a run of
    /// neighbours (`batched_move`).
    pub fn is_trivial_move(&self, options: &Options) -> bool {
        let limit = max_grandparent_overlap_bytes(options);
        self.reason != PickReason::Manual
            && !self.is_cross_level()
            && !self.inputs[0].is_empty()
            && (self.level > 0 || self.inputs[0].len() == 1)
            && self.inputs[1].is_empty()
            && self.inputs[0]
                .iter()
                .all(|f| overlap_bytes(&self.order, &self.grandparents, f) <= limit)
    }

    /// The plain-data job an executor runs.
    pub fn to_job(
        &self,
        id: u64,
        version: &Version,
        smallest_snapshot: SequenceNumber,
        options: &Options,
    ) -> CompactionJob {
        let job_file = |f: &Arc<FileMeta>| JobFile {
            number: f.number,
            file_size: f.file_size,
            smallest: f.smallest.encoded().to_vec(),
            largest: f.largest.encoded().to_vec(),
        };
        let mut inputs = Vec::new();
        for (offset, files) in self.inputs.iter().enumerate() {
            let level = self.level + offset;
            if level == 0 {
                // L0 tables overlap: each is a run of its own.
                for file in files {
                    inputs.push(InputRun {
                        level,
                        files: vec![job_file(file)],
                    });
                }
            } else if !files.is_empty() {
                inputs.push(InputRun {
                    level,
                    files: files.iter().map(job_file).collect(),
                });
            }
        }
        // Only deeper files within the job's key range can matter.
        let deeper_levels = (self.output_level + 1..NUM_LEVELS)
            .map(|level| {
                version
                    .overlapping_inputs(
                        level,
                        Some(&self.smallest_user_key),
                        Some(&self.largest_user_key),
                    )
                    .iter()
                    .map(|f| UserKeyRange {
                        smallest: f.smallest.user_key().to_vec(),
                        largest: f.largest.user_key().to_vec(),
                    })
                    .collect()
            })
            .collect();
        CompactionJob {
            id,
            inputs,
            output_level: self.output_level,
            max_output_file_size: options.max_file_size,
            grandparents: self.grandparents.iter().map(job_file).collect(),
            max_grandparent_overlap_bytes: max_grandparent_overlap_bytes(options),
            smallest_snapshot,
            deeper_levels,
            table: options.table_settings(),
            range: Default::default(),
        }
    }
}

/// The files of `level` in rotation order: from the first file past
/// `compact_pointer` (an encoded internal key; empty: from the start).
fn rotation_order(
    order: &KeyOrder,
    files: &[Arc<FileMeta>],
    compact_pointer: &[u8],
) -> Vec<Arc<FileMeta>> {
    let start = if compact_pointer.is_empty() {
        0
    } else {
        files
            .iter()
            .position(|f| {
                order
                    .compare_internal(f.largest.encoded(), compact_pointer)
                    .is_gt()
            })
            .unwrap_or(0)
    };
    (0..files.len())
        .map(|i| files[(start + i) % files.len()].clone())
        .collect()
}

/// ProckStore's second score of `file` at `level`: the number of files of
/// the next level its key range overlaps.
pub fn overlap_score(version: &Version, level: usize, file: &FileMeta) -> usize {
    if level + 1 >= NUM_LEVELS {
        return 0;
    }
    version
        .overlapping_inputs(
            level + 1,
            Some(file.smallest.user_key()),
            Some(file.largest.user_key()),
        )
        .len()
}

/// The files of `level` to start a compaction from, best first, leaving
/// out `excluded` ones. L0 always goes in rotation order (a pick takes
/// every overlapping L0 file anyway).
pub fn candidate_files(
    version: &Version,
    level: usize,
    compact_pointer: &[u8],
    style: PickStyle,
    excluded: &dyn Fn(u64) -> bool,
) -> Vec<Arc<FileMeta>> {
    let mut files: Vec<Arc<FileMeta>> =
        rotation_order(&version.order, &version.files[level], compact_pointer)
            .into_iter()
            .filter(|f| !excluded(f.number))
            .collect();
    if level > 0 {
        // Stable sorts: equal scores stay in rotation order.
        match style {
            PickStyle::MinOverlap => files.sort_by_cached_key(|f| overlap_score(version, level, f)),
            PickStyle::MinOverlapRatio => {
                files.sort_by_cached_key(|f| overlap_ratio_key(version, level, f));
            }
            PickStyle::RoundRobin => {}
        }
    }
    files
}

/// The bytes of the next level that `file`'s key range overlaps, per byte
/// of `file` (RocksDB's overlapping ratio), as a sort key: scaled to an
/// integer so that ties compare equal and keep the rotation order.
pub fn overlap_ratio_key(version: &Version, level: usize, file: &FileMeta) -> u64 {
    if level + 1 >= NUM_LEVELS {
        return 0;
    }
    let below = total_file_size(&version.overlapping_inputs(
        level + 1,
        Some(file.smallest.user_key()),
        Some(file.largest.user_key()),
    ));
    // A thousandth of a byte per byte is finer than any two files differ
    // by; u128 keeps terabytes of overlap from overflowing.
    ((below as u128 * 1024) / file.file_size.max(1) as u128) as u64
}

/// The plan that starts from `file` at `level`: every overlapping L0 file
/// for L0, boundary inputs, the overlapping files below; a trivial move
/// past level 0 takes the neighbours that can move with it
/// (`batched_move`).
pub fn plan_from_file(
    version: &Version,
    options: &Options,
    level: usize,
    file: Arc<FileMeta>,
    reason: PickReason,
) -> CompactionPlan {
    let mut first = vec![file];
    if level == 0 {
        let (smallest, largest) = user_range(&version.order, &first);
        first = version.overlapping_inputs(0, Some(&smallest), Some(&largest));
    }
    let plan = setup_other_inputs(version, options, level, first, reason);
    if level > 0 && plan.is_trivial_move(options) {
        return batched_move(version, options, plan);
    }
    plan
}

/// Bytes of `files` (sorted, disjoint: one level's) whose key ranges
/// overlap `file`'s.
fn overlap_bytes(order: &KeyOrder, files: &[Arc<FileMeta>], file: &FileMeta) -> u64 {
    files
        .iter()
        .filter(|g| {
            order
                .compare_user(g.largest.user_key(), file.smallest.user_key())
                .is_ge()
                && order
                    .compare_user(g.smallest.user_key(), file.largest.user_key())
                    .is_le()
        })
        .map(|g| g.file_size)
        .sum()
}

/// `plan`, a trivial move of one file at `level` > 0, grown by the files
/// that follow it at its level while each could move on its own too
/// (nothing below overlaps it, its overlap two levels down is within the
/// limit) and the level stays above its target by the bytes taken. One
/// version edit then moves them all: after a full compaction has written
/// a level past its target, fifteen files moved one at a time took 40 ms
/// of MANIFEST writes and syncs after a 0.31 s job. The run stops before a
/// file that starts with the user key the previous one ends with (moving
/// the newer entries of a key below the older ones would hide them).
fn batched_move(version: &Version, options: &Options, plan: CompactionPlan) -> CompactionPlan {
    let level = plan.level;
    let files = &version.files[level];
    let order = &version.order;
    let Some(start) = files
        .iter()
        .position(|f| f.number == plan.inputs[0][0].number)
    else {
        return plan;
    };
    let level_bytes = total_file_size(files) as f64;
    let target = priority::version_level_targets(version, options)[level];
    let limit = max_grandparent_overlap_bytes(options);
    let below = |f: &FileMeta| {
        version.overlapping_inputs(
            level + 1,
            Some(f.smallest.user_key()),
            Some(f.largest.user_key()),
        )
    };
    let two_below = |f: &FileMeta| {
        if level + 2 < NUM_LEVELS {
            version.overlapping_inputs(
                level + 2,
                Some(f.smallest.user_key()),
                Some(f.largest.user_key()),
            )
        } else {
            Vec::new()
        }
    };
    let mut taken = files[start].file_size as f64;
    let mut end = start + 1;
    while end < files.len() && level_bytes - taken > target {
        let next = &files[end];
        if !below(next).is_empty() || total_file_size(&two_below(next)) > limit {
            break;
        }
        taken += next.file_size as f64;
        end += 1;
    }
    // The run must not end inside one user key's entries.
    while end > start + 1
        && end < files.len()
        && order
            .compare_user(
                files[end - 1].largest.user_key(),
                files[end].smallest.user_key(),
            )
            .is_eq()
    {
        end -= 1;
    }
    if end == start + 1 {
        return plan;
    }
    let moved: Vec<Arc<FileMeta>> = files[start..end].to_vec();
    let (smallest, largest) = user_range(order, &moved);
    let grandparents = if level + 2 < NUM_LEVELS {
        version.overlapping_inputs(level + 2, Some(&smallest), Some(&largest))
    } else {
        Vec::new()
    };
    let (_, largest_internal) = internal_range(order, moved.iter());
    CompactionPlan {
        inputs: vec![moved, Vec::new()],
        grandparents,
        smallest_user_key: smallest,
        largest_user_key: largest,
        compact_pointer: InternalKey::from_encoded(largest_internal),
        ..plan
    }
}

/// The version's seek compaction as a plan, if it has one.
pub fn seek_plan(version: &Version, options: &Options) -> Option<CompactionPlan> {
    let (level, file) = version.seek_compaction.get()?;
    if level + 1 >= NUM_LEVELS
        || !version.files[*level]
            .iter()
            .any(|f| f.number == file.number)
    {
        return None;
    }
    Some(plan_from_file(
        version,
        options,
        *level,
        file.clone(),
        PickReason::Seek,
    ))
}

/// Largest input of a cross-level job, in bytes.
pub fn cross_level_byte_limit(options: &Options) -> u64 {
    2 * expanded_compaction_byte_limit(options)
}

/// ProckStore's triple-level compaction: when the next level is itself over
/// its target (`next_level_score > 1`), the plan also takes the files two
/// levels down that overlap it and writes there, so the data moved is
/// written once instead of twice (`grown_to_deepest`). `None` when the plan
/// does not qualify: a trivial move, the last levels, or the grown job over
/// [`cross_level_byte_limit`].
pub fn cross_level(
    version: &Version,
    options: &Options,
    plan: &CompactionPlan,
    next_level_score: f64,
) -> Option<CompactionPlan> {
    if plan.is_cross_level()
        || next_level_score <= 1.0
        || plan.level + 2 >= NUM_LEVELS
        || plan.is_trivial_move(options)
    {
        return None;
    }
    let grown = grown_to_deepest(version, plan);
    let total: u64 = grown.inputs.iter().map(|f| total_file_size(f)).sum();
    (total <= cross_level_byte_limit(options)).then_some(grown)
}

/// A manual compaction of level 0 that writes two levels down: the L0
/// files, every L1 file that overlaps them (there may be none) and every
/// L2 file that overlaps those, merged into L2 in one job. Level by level,
/// the data of L0 and L1 would be written into L1 and then read and
/// written again into L2; a full compaction (`shale compact`) does a fifth less work this way
/// (`docs/results/compaction-tax.md`, "Full compaction in fewer passes").
/// Only from level 0, whose manual job takes every overlapping file
/// whatever its size anyway; deeper levels keep their rounds. `None` when
/// cross-level jobs are off, there is nothing at L2 to write into, or the
/// L2 files to take exceed twice L2's target (a tree far out of shape
/// keeps level-by-level jobs, whose rounds bound what one job holds).
pub fn manual_cross_level(
    version: &Version,
    options: &Options,
    plan: &CompactionPlan,
) -> Option<CompactionPlan> {
    if !options.cross_level_compaction || plan.level != 0 || plan.is_cross_level() {
        return None;
    }
    let grown = grown_to_deepest(version, plan);
    let deepest_bytes = total_file_size(&grown.inputs[2]);
    let fits = deepest_bytes > 0
        && deepest_bytes as f64 <= 2.0 * priority::version_level_targets(version, options)[2];
    fits.then_some(grown)
}

/// `plan` (inputs at `level` and `level + 1`) grown into a cross-level job
/// writing at `level + 2`: every file of the two lower levels that
/// overlaps the grown key range joins (a file left behind at the middle
/// level could hide newer data of the deepest; one left at the deepest
/// would overlap the outputs), repeated until stable.
fn grown_to_deepest(version: &Version, plan: &CompactionPlan) -> CompactionPlan {
    let (middle, deepest) = (plan.level + 1, plan.level + 2);
    let first = plan.inputs[0].clone();
    let mut second = plan.inputs[1].clone();
    let mut third: Vec<Arc<FileMeta>> = Vec::new();
    loop {
        let (smallest, largest) =
            user_range(&version.order, &[first.clone(), second.clone()].concat());
        let mut grown_third = version.overlapping_inputs(deepest, Some(&smallest), Some(&largest));
        add_boundary_inputs(&version.order, &version.files[deepest], &mut grown_third);
        let (smallest, largest) = user_range(
            &version.order,
            &[first.clone(), second.clone(), grown_third.clone()].concat(),
        );
        let mut grown_second = version.overlapping_inputs(middle, Some(&smallest), Some(&largest));
        add_boundary_inputs(&version.order, &version.files[middle], &mut grown_second);
        let stable = grown_second.len() == second.len() && grown_third.len() == third.len();
        second = grown_second;
        third = grown_third;
        if stable {
            break;
        }
    }
    let inputs = vec![first, second, third];
    let (smallest, largest) = user_range(&version.order, &inputs.concat());
    let grandparents = if deepest + 1 < NUM_LEVELS {
        version.overlapping_inputs(deepest + 1, Some(&smallest), Some(&largest))
    } else {
        Vec::new()
    };
    CompactionPlan {
        output_level: deepest,
        inputs,
        grandparents,
        smallest_user_key: smallest,
        largest_user_key: largest,
        ..plan.clone()
    }
}

/// A manual compaction of `level` over the user-key range `[begin, end]`
/// (`None`: unbounded), limited for levels >= 1 to about
/// `25 x max_file_size` of `level`'s inputs per round (the size a
/// compaction grows its input level to anyway), so that a huge manual
/// compaction proceeds in pieces. `None` when nothing at `level` overlaps.
///
/// LevelDB takes one output file's worth per round. That makes a full
/// compaction hundreds of jobs of a few MB, and an executor that overlaps
/// reading, computing and writing within a job (the OpenCL executor's
/// slices of 32 MiB, `parallel`'s sub-compactions) gets nothing to overlap
/// (`docs/results/compaction-runner.md`, "Manual compactions in rounds of
/// 25 files").
pub fn plan_for_range(
    version: &Version,
    options: &Options,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<CompactionPlan> {
    if level + 1 >= NUM_LEVELS {
        return None;
    }
    let mut inputs = version.overlapping_inputs(level, begin, end);
    if inputs.is_empty() {
        return None;
    }
    if level > 0 {
        let limit = expanded_compaction_byte_limit(options);
        let mut total = 0;
        if let Some(cut) = inputs.iter().position(|f| {
            total += f.file_size;
            total >= limit
        }) {
            inputs.truncate(cut + 1);
        }
    }
    Some(setup_other_inputs(
        version,
        options,
        level,
        inputs,
        PickReason::Manual,
    ))
}

/// User-key range of `files`.
fn user_range(order: &KeyOrder, files: &[Arc<FileMeta>]) -> (Vec<u8>, Vec<u8>) {
    let (smallest, largest) = internal_range(order, files);
    (
        shale_format::internal_key::extract_user_key(&smallest).to_vec(),
        shale_format::internal_key::extract_user_key(&largest).to_vec(),
    )
}

/// Smallest and largest internal key of `files`.
fn internal_range<'a>(
    order: &KeyOrder,
    files: impl IntoIterator<Item = &'a Arc<FileMeta>>,
) -> (Vec<u8>, Vec<u8>) {
    let mut smallest: Option<&[u8]> = None;
    let mut largest: Option<&[u8]> = None;
    for f in files {
        if smallest.is_none_or(|s| order.compare_internal(f.smallest.encoded(), s).is_lt()) {
            smallest = Some(f.smallest.encoded());
        }
        if largest.is_none_or(|l| order.compare_internal(f.largest.encoded(), l).is_gt()) {
            largest = Some(f.largest.encoded());
        }
    }
    (
        smallest.unwrap_or_default().to_vec(),
        largest.unwrap_or_default().to_vec(),
    )
}

/// Adds files of `level_files` whose smallest key has the same user key as
/// the largest key of `inputs` (and sorts after it), so that a user key is
/// never split between a compacted file and one left behind; repeats until
/// stable (LevelDB's `AddBoundaryInputs`).
pub fn add_boundary_inputs(
    order: &KeyOrder,
    level_files: &[Arc<FileMeta>],
    inputs: &mut Vec<Arc<FileMeta>>,
) {
    loop {
        let (_, largest) = internal_range(order, inputs.iter());
        if largest.is_empty() {
            return;
        }
        let largest_user = shale_format::internal_key::extract_user_key(&largest);
        let boundary = level_files
            .iter()
            .filter(|f| {
                order
                    .compare_user(f.smallest.user_key(), largest_user)
                    .is_eq()
                    && order
                        .compare_internal(f.smallest.encoded(), &largest)
                        .is_gt()
            })
            .min_by(|a, b| order.compare_internal(a.smallest.encoded(), b.smallest.encoded()));
        match boundary {
            Some(file) if !inputs.iter().any(|f| f.number == file.number) => {
                inputs.push(file.clone())
            }
            _ => return,
        }
    }
}

fn setup_other_inputs(
    version: &Version,
    options: &Options,
    level: usize,
    mut first: Vec<Arc<FileMeta>>,
    reason: PickReason,
) -> CompactionPlan {
    add_boundary_inputs(&version.order, &version.files[level], &mut first);
    let (smallest, largest) = user_range(&version.order, &first);
    let mut second = version.overlapping_inputs(level + 1, Some(&smallest), Some(&largest));
    add_boundary_inputs(&version.order, &version.files[level + 1], &mut second);
    let (mut all_smallest, mut all_largest) =
        user_range(&version.order, &[first.clone(), second.clone()].concat());

    if !second.is_empty() {
        let mut expanded0 =
            version.overlapping_inputs(level, Some(&all_smallest), Some(&all_largest));
        add_boundary_inputs(&version.order, &version.files[level], &mut expanded0);
        let expanded0_size = total_file_size(&expanded0);
        let second_size = total_file_size(&second);
        if expanded0.len() > first.len()
            && second_size + expanded0_size < expanded_compaction_byte_limit(options)
        {
            let (new_smallest, new_largest) = user_range(&version.order, &expanded0);
            let mut expanded1 =
                version.overlapping_inputs(level + 1, Some(&new_smallest), Some(&new_largest));
            add_boundary_inputs(&version.order, &version.files[level + 1], &mut expanded1);
            if expanded1.len() == second.len() {
                first = expanded0;
                second = expanded1;
                (all_smallest, all_largest) =
                    user_range(&version.order, &[first.clone(), second.clone()].concat());
            }
        }
    }

    let grandparents = if level + 2 < NUM_LEVELS {
        version.overlapping_inputs(level + 2, Some(&all_smallest), Some(&all_largest))
    } else {
        Vec::new()
    };
    let (_, largest_internal) = internal_range(&version.order, first.iter());
    CompactionPlan {
        level,
        output_level: level + 1,
        inputs: vec![first, second],
        grandparents,
        reason,
        smallest_user_key: all_smallest,
        largest_user_key: all_largest,
        compact_pointer: InternalKey::from_encoded(largest_internal),
        order: version.order.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::priority::QueueEnd;
    use crate::compaction::scheduler::Scheduler;
    use crate::compaction::test_versions::{numbers, version};
    use crate::version::VersionBuilder;
    use shale_format::internal_key::ValueType;
    use shale_format::version_edit::{FileMetaData, VersionEdit};

    /// The scheduler with LevelDB's round-robin picks and no cross-level
    /// jobs, its compact pointers `pointers`.
    fn scheduler(options: &Options, pointers: &[Vec<u8>; NUM_LEVELS]) -> Scheduler {
        let mut scheduler = Scheduler::new(&Options {
            compaction_pick: PickStyle::RoundRobin,
            cross_level_compaction: false,
            ..options.clone()
        });
        scheduler.compact_pointers = pointers.clone();
        scheduler
    }

    /// The job the scheduler runs first on `v`.
    fn first_job(s: &mut Scheduler, v: &Version, options: &Options) -> Option<CompactionPlan> {
        s.refill(v, options);
        s.take(v, options, QueueEnd::Small).map(|job| job.plan)
    }

    fn pick_compaction(
        v: &Version,
        options: &Options,
        pointers: &[Vec<u8>; NUM_LEVELS],
    ) -> Option<CompactionPlan> {
        first_job(&mut scheduler(options, pointers), v, options)
    }

    /// Two L1 files each overlap one L2 file: `min-overlap` cannot tell
    /// them apart and keeps the rotation order; `min-overlap-ratio` takes
    /// the one whose overlap below is the smaller share of its own bytes.
    #[test]
    fn overlap_ratio_weighs_the_bytes_below() {
        let v = version(&[
            (1, 5, "a", "c", 100),
            (1, 6, "m", "o", 100),
            (2, 7, "b", "b", 900),
            (2, 8, "n", "n", 100),
        ]);
        let none = |_: u64| false;
        let in_order = |files: &[Arc<FileMeta>]| files.iter().map(|f| f.number).collect::<Vec<_>>();
        let by_count = candidate_files(&v, 1, &[], PickStyle::MinOverlap, &none);
        assert_eq!(in_order(&by_count), vec![5, 6]);
        let by_ratio = candidate_files(&v, 1, &[], PickStyle::MinOverlapRatio, &none);
        assert_eq!(in_order(&by_ratio), vec![6, 5]);
        assert_eq!(overlap_ratio_key(&v, 1, &by_ratio[0]), 1024);
        assert_eq!(overlap_ratio_key(&v, 1, &by_ratio[1]), 9 * 1024);
        assert_eq!("min-overlap-ratio".parse(), Ok(PickStyle::MinOverlapRatio));
    }

    #[test]
    fn l0_trigger_picks_all_overlapping_l0_and_l1() {
        let options = crate::compaction::test_versions::leveldb_triggers();
        let v = version(&[
            (0, 10, "a", "c", 100),
            (0, 11, "b", "d", 100),
            (0, 12, "c", "e", 100),
            (0, 13, "x", "z", 100),
            (1, 5, "a", "b", 100),
            (1, 6, "d", "f", 100),
            (1, 7, "m", "n", 100),
        ]);
        let plan = pick_compaction(&v, &options, &Default::default()).unwrap();
        assert_eq!(plan.level, 0);
        assert!(numbers(&plan.inputs[0]).len() >= 3);
        assert_eq!(numbers(&plan.inputs[1]), vec![5, 6]);
        assert!(!plan.is_trivial_move(&options));
    }

    #[test]
    fn a_file_out_of_seeks_is_compacted_when_no_level_needs_it() {
        let options = crate::compaction::test_versions::leveldb_triggers();
        let v = version(&[
            (1, 5, "a", "f", 100),
            (1, 6, "g", "k", 100),
            (2, 7, "b", "c", 100),
            (2, 8, "d", "e", 100),
            (2, 9, "h", "i", 100),
        ]);
        assert!(pick_compaction(&v, &options, &Default::default()).is_none());
        let file = v.files[1][0].clone();
        // The allowance is at least 100 seeks; only the last one reports.
        let charged: Vec<bool> = (0..100).map(|_| file.charge_seek()).collect();
        assert_eq!(charged.iter().filter(|&&out| out).count(), 1);
        assert!(charged[99]);
        v.seek_compaction.set((1, file)).unwrap();
        let mut s = scheduler(&options, &Default::default());
        let plan = first_job(&mut s, &v, &options).unwrap();
        assert_eq!(plan.reason, PickReason::Seek);
        assert_eq!(plan.level, 1);
        assert_eq!(numbers(&plan.inputs[0]), vec![5]);
        assert_eq!(numbers(&plan.inputs[1]), vec![7, 8]);
        // Not while a conflicting compaction runs (this one).
        assert!(first_job(&mut s, &v, &options).is_none());
    }

    #[test]
    fn nothing_to_do_below_the_triggers() {
        let v = version(&[(0, 10, "a", "c", 100), (1, 5, "a", "b", 100)]);
        assert!(pick_compaction(
            &v,
            &crate::compaction::test_versions::leveldb_triggers(),
            &Default::default()
        )
        .is_none());
    }

    #[test]
    fn big_level_rotates_through_compact_pointer_and_moves_trivially() {
        // One file over: each move takes one file.
        let options = Options {
            max_bytes_for_level_base: 250,
            ..crate::compaction::test_versions::leveldb_triggers()
        };
        let v = version(&[
            (1, 1, "a", "b", 100),
            (1, 2, "c", "d", 100),
            (1, 3, "e", "f", 100),
        ]);
        let mut pointers: [Vec<u8>; NUM_LEVELS] = Default::default();
        let plan = pick_compaction(&v, &options, &pointers).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![1]);
        assert!(plan.is_trivial_move(&options));
        pointers[1] = plan.compact_pointer.encoded().to_vec();
        let plan = pick_compaction(&v, &options, &pointers).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![2]);
    }

    /// A move takes the files after its own while the level stays above
    /// its target by the bytes taken, and stops before a file that has
    /// something below it or too much two levels down.
    #[test]
    fn a_move_takes_its_neighbours_while_the_level_is_over_its_target() {
        let options = Options {
            max_bytes_for_level_base: 250,
            max_file_size: 10,
            ..crate::compaction::test_versions::leveldb_triggers()
        };
        let files = [
            (1, 1, "a", "b", 100),
            (1, 2, "c", "d", 100),
            (1, 3, "e", "f", 100),
            (1, 4, "g", "h", 100),
            (1, 5, "i", "j", 100),
        ];
        let v = version(&files);
        let plan = pick_compaction(&v, &options, &Default::default()).unwrap();
        // 500 bytes, 250 allowed: after three files 200 stay.
        assert_eq!(numbers(&plan.inputs[0]), vec![1, 2, 3]);
        assert!(plan.is_trivial_move(&options));
        assert_eq!(plan.smallest_user_key, b"a");
        assert_eq!(plan.largest_user_key, b"f");
        assert_eq!(plan.compact_pointer.user_key(), b"f");

        // A file of L2 under file 3 ends the run before it.
        let mut with_below = files.to_vec();
        with_below.push((2, 9, "e", "e", 100));
        let v = version(&with_below);
        let plan = pick_compaction(&v, &options, &Default::default()).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![1, 2]);

        // So does more than ten files' worth two levels down under file 2.
        let mut with_grandparents = files.to_vec();
        with_grandparents.push((3, 9, "c", "c", 101));
        let v = version(&with_grandparents);
        let plan = pick_compaction(&v, &options, &Default::default()).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![1]);
        assert!(plan.is_trivial_move(&options));
    }

    /// A run of moved files never ends between two files that share a
    /// user key: the newer entries would move below the older ones.
    #[test]
    fn a_batched_move_does_not_split_a_user_key() {
        let options = Options {
            max_bytes_for_level_base: 150,
            ..crate::compaction::test_versions::leveldb_triggers()
        };
        let file = |number, smallest: (&[u8], u64), largest: (&[u8], u64)| FileMetaData {
            number,
            file_size: 100,
            smallest: InternalKey::new(smallest.0, smallest.1, ValueType::Value),
            largest: InternalKey::new(largest.0, largest.1, ValueType::Value),
        };
        let mut edit = VersionEdit::default();
        edit.add_file(1, file(1, (b"a", 50), (b"b", 50)));
        // Files 2 and 3 both hold entries of "k", the newer in file 2.
        edit.add_file(1, file(2, (b"c", 50), (b"k", 40)));
        edit.add_file(1, file(3, (b"k", 30), (b"m", 50)));
        edit.add_file(1, file(4, (b"n", 50), (b"p", 50)));
        let mut builder = VersionBuilder::new(Arc::new(Version::default()));
        builder.apply(&edit).unwrap();
        let v = builder.build().unwrap();
        // 400 bytes, 150 allowed: the bytes ask for three files (1-3), and
        // 3 ends cleanly before 4.
        let plan = pick_compaction(&v, &options, &Default::default()).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![1, 2, 3]);
        // With 250 allowed they ask for two, which would end inside "k":
        // the run falls back to file 1 alone.
        let options = Options {
            max_bytes_for_level_base: 250,
            ..options
        };
        let plan = pick_compaction(&v, &options, &Default::default()).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![1]);
        assert!(plan.is_trivial_move(&options));
    }

    #[test]
    fn boundary_inputs_keep_a_user_key_together() {
        // File 2 starts with an older version of file 1's last user key.
        let mut edit = VersionEdit::default();
        edit.add_file(
            1,
            FileMetaData {
                number: 1,
                file_size: 100,
                smallest: InternalKey::new(b"a", 50, ValueType::Value),
                largest: InternalKey::new(b"k", 40, ValueType::Value),
            },
        );
        edit.add_file(
            1,
            FileMetaData {
                number: 2,
                file_size: 100,
                smallest: InternalKey::new(b"k", 30, ValueType::Value),
                largest: InternalKey::new(b"p", 30, ValueType::Value),
            },
        );
        let mut builder = VersionBuilder::new(Arc::new(Version::default()));
        builder.apply(&edit).unwrap();
        let v = builder.build().unwrap();
        let mut inputs = vec![v.files[1][0].clone()];
        add_boundary_inputs(&v.order, &v.files[1], &mut inputs);
        assert_eq!(numbers(&inputs), vec![1, 2]);
    }

    #[test]
    fn conflicting_plans_are_skipped() {
        let options = crate::compaction::test_versions::leveldb_triggers();
        let v = version(&[
            (0, 10, "a", "c", 100),
            (0, 11, "b", "d", 100),
            (0, 12, "c", "e", 100),
            (0, 13, "c", "d", 100),
        ]);
        let mut s = scheduler(&options, &Default::default());
        let plan = first_job(&mut s, &v, &options).unwrap();
        assert_eq!(plan.level, 0);
        // While it runs, no other job takes any of its files.
        assert!(first_job(&mut s, &v, &options).is_none());
    }

    #[test]
    fn job_has_runs_grandparents_and_deeper_ranges() {
        let options = crate::compaction::test_versions::leveldb_triggers();
        let v = version(&[
            (0, 10, "a", "c", 100),
            (0, 11, "b", "d", 100),
            (1, 5, "a", "b", 100),
            (2, 6, "a", "z", 100),
            (3, 7, "c", "c", 100),
            (3, 8, "x", "y", 100),
        ]);
        let plan = plan_for_range(&v, &options, 0, None, None).unwrap();
        let job = plan.to_job(1, &v, 77, &options);
        assert_eq!(job.inputs.len(), 3);
        assert_eq!(job.output_level, 1);
        assert_eq!(job.grandparents.len(), 1);
        assert_eq!(job.smallest_snapshot, 77);
        assert_eq!(job.deeper_levels[0].len(), 1);
        assert_eq!(
            job.deeper_levels[1].len(),
            1,
            "level 3 file x..y is outside a..d"
        );
    }

    #[test]
    fn a_manual_level_0_job_writes_into_level_2_when_level_2_holds_the_range() {
        let options = crate::compaction::test_versions::leveldb_triggers();
        let mb = 1 << 20;
        let v = version(&[
            (0, 1, "b", "f", mb),
            (0, 2, "c", "h", mb),
            (1, 10, "a", "d", 2 * mb),
            (1, 11, "e", "g", 2 * mb),
            (1, 12, "x", "y", 2 * mb),
            (2, 20, "a", "c", 10 * mb),
            (2, 21, "d", "j", 10 * mb),
            (2, 22, "k", "m", 10 * mb),
            (3, 30, "a", "z", 50 * mb),
        ]);
        let plan = plan_for_range(&v, &options, 0, None, None).unwrap();
        let cross = manual_cross_level(&v, &options, &plan).unwrap();
        assert_eq!(cross.output_level, 2);
        assert_eq!(numbers(&cross.inputs[0]), [1, 2]);
        // L1's files over the L0 range, and L2's over theirs.
        assert_eq!(numbers(&cross.inputs[1]), [10, 11]);
        assert_eq!(numbers(&cross.inputs[2]), [20, 21]);
        assert_eq!(numbers(&cross.grandparents), [30]);
        assert_eq!(cross.reason, PickReason::Manual);

        // Nothing at L2 under the range: level by level.
        let no_l2 = version(&[
            (0, 1, "b", "f", mb),
            (1, 10, "a", "d", 2 * mb),
            (2, 22, "k", "m", mb),
        ]);
        let plan = plan_for_range(&no_l2, &options, 0, None, None).unwrap();
        assert!(manual_cross_level(&no_l2, &options, &plan).is_none());
        // L2's part over twice its target (100 MiB): level by level.
        let big = version(&[(0, 1, "b", "f", mb), (2, 20, "a", "z", 201 * mb)]);
        let plan = plan_for_range(&big, &options, 0, None, None).unwrap();
        assert!(manual_cross_level(&big, &options, &plan).is_none());
        // An empty L1 between them is no obstacle.
        let skip = version(&[(0, 1, "b", "f", mb), (2, 20, "a", "z", 20 * mb)]);
        let plan = plan_for_range(&skip, &options, 0, None, None).unwrap();
        let cross = manual_cross_level(&skip, &options, &plan).unwrap();
        assert!(cross.inputs[1].is_empty());
        assert_eq!(numbers(&cross.inputs[2]), [20]);
        // Deeper levels keep their rounds; off with cross-level jobs.
        let plan = plan_for_range(&v, &options, 1, None, None).unwrap();
        assert!(manual_cross_level(&v, &options, &plan).is_none());
        let off = Options {
            cross_level_compaction: false,
            ..options.clone()
        };
        let plan = plan_for_range(&v, &off, 0, None, None).unwrap();
        assert!(manual_cross_level(&v, &off, &plan).is_none());
    }

    #[test]
    fn a_manual_round_takes_up_to_25_files_worth_of_its_level() {
        let options = crate::compaction::test_versions::leveldb_triggers();
        let size = options.max_file_size;
        let keys: Vec<String> = (0..60).map(|i| format!("k{i:03}")).collect();
        let files: Vec<(usize, u64, &str, &str, u64)> = (0..30)
            .map(|i| {
                (
                    1,
                    100 + i as u64,
                    keys[2 * i].as_str(),
                    keys[2 * i + 1].as_str(),
                    size,
                )
            })
            .collect();
        let v = version(&files);
        // The round ends with the file that reaches 25 x max_file_size.
        let plan = plan_for_range(&v, &options, 1, None, None).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), (100..125).collect::<Vec<_>>());
        // From a later start, what is left.
        let plan = plan_for_range(&v, &options, 1, Some(b"k050"), None).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), (125..130).collect::<Vec<_>>());
        // Level 0 is taken whole, whatever its size.
        let l0: Vec<_> = files
            .iter()
            .map(|&(_, n, a, b, s)| (0, n, a, b, 4 * s))
            .collect();
        let plan = plan_for_range(&version(&l0), &options, 0, None, None).unwrap();
        assert_eq!(plan.inputs[0].len(), 30);
    }
}
