//! What to compact, as pure functions of a [`Version`]: LevelDB's leveled
//! picking (level scores, rotating compact pointers, L0 overlap expansion,
//! boundary inputs, growing the input level when it does not change the
//! output level's inputs, grandparent files) and the plan-to-job conversion.
//! Nothing here touches a disk or a lock, so it is tested on versions built
//! in memory.

use std::cmp::Ordering;
use std::sync::Arc;

use shale_compact::job::{CompactionJob, InputRun, JobFile, UserKeyRange};
use shale_format::comparator::compare_internal_keys;
use shale_format::internal_key::{InternalKey, SequenceNumber};
use shale_format::version_edit::NUM_LEVELS;

use crate::options::Options;
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

/// A chosen compaction: inputs at `level` and `level + 1`.
#[derive(Debug, Clone)]
pub struct CompactionPlan {
    /// The input level; outputs go to `level + 1`.
    pub level: usize,
    /// Files at `level` and at `level + 1`.
    pub inputs: [Vec<Arc<FileMeta>>; 2],
    /// Files at `level + 2` overlapping the inputs.
    pub grandparents: Vec<Arc<FileMeta>>,
    /// Why.
    pub reason: PickReason,
    /// User-key range covered by all inputs.
    pub smallest_user_key: Vec<u8>,
    /// See `smallest_user_key`.
    pub largest_user_key: Vec<u8>,
    /// The compact pointer to record for `level` (largest input key).
    pub compact_pointer: InternalKey,
}

/// Bytes of grandparent overlap after which an output file is cut.
pub fn max_grandparent_overlap_bytes(options: &Options) -> u64 {
    10 * options.max_file_size
}

/// Largest input size a compaction grows to when expanding its input level.
fn expanded_compaction_byte_limit(options: &Options) -> u64 {
    25 * options.max_file_size
}

/// The score of each level but the last: >= 1 means it needs compacting.
pub fn level_scores(version: &Version, options: &Options) -> Vec<f64> {
    (0..NUM_LEVELS - 1)
        .map(|level| {
            if level == 0 {
                version.num_files(0) as f64 / options.l0_compaction_trigger as f64
            } else {
                version.level_bytes(level) as f64 / options.max_bytes_for_level(level)
            }
        })
        .collect()
}

/// A running compaction, as far as picking another one is concerned.
#[derive(Debug, Clone)]
pub struct RunningCompaction {
    /// Its input level (outputs at `level + 1`).
    pub level: usize,
    /// User-key range it covers.
    pub smallest_user_key: Vec<u8>,
    /// See `smallest_user_key`.
    pub largest_user_key: Vec<u8>,
    /// Its input file numbers.
    pub files: Vec<u64>,
}

impl CompactionPlan {
    /// Every input file number.
    pub fn input_numbers(&self) -> Vec<u64> {
        self.inputs.iter().flatten().map(|f| f.number).collect()
    }

    /// Whether this plan can run beside `running`: no shared file, and no
    /// shared level with an overlapping key range.
    pub fn conflicts_with(&self, running: &RunningCompaction) -> bool {
        let mine = self.input_numbers();
        if running.files.iter().any(|f| mine.contains(f)) {
            return true;
        }
        let levels_touch = self.level.abs_diff(running.level) <= 1;
        let disjoint = self.largest_user_key < running.smallest_user_key
            || running.largest_user_key < self.smallest_user_key;
        levels_touch && !disjoint
    }

    /// As a [`RunningCompaction`] record.
    pub fn running(&self) -> RunningCompaction {
        RunningCompaction {
            level: self.level,
            smallest_user_key: self.smallest_user_key.clone(),
            largest_user_key: self.largest_user_key.clone(),
            files: self.input_numbers(),
        }
    }

    /// A single file moving down a level unchanged: nothing overlaps it
    /// below and it would not make a later compaction too big.
    pub fn is_trivial_move(&self, options: &Options) -> bool {
        self.reason != PickReason::Manual
            && self.inputs[0].len() == 1
            && self.inputs[1].is_empty()
            && total_file_size(&self.grandparents) <= max_grandparent_overlap_bytes(options)
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
        if self.level == 0 {
            for file in &self.inputs[0] {
                inputs.push(InputRun {
                    level: 0,
                    files: vec![job_file(file)],
                });
            }
        } else if !self.inputs[0].is_empty() {
            inputs.push(InputRun {
                level: self.level,
                files: self.inputs[0].iter().map(job_file).collect(),
            });
        }
        if !self.inputs[1].is_empty() {
            inputs.push(InputRun {
                level: self.level + 1,
                files: self.inputs[1].iter().map(job_file).collect(),
            });
        }
        // Only deeper files within the job's key range can matter.
        let deeper_levels = (self.level + 2..NUM_LEVELS)
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
            output_level: self.level + 1,
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

/// The compaction to run next: a size compaction when a level scores >= 1
/// (levels tried by descending score), else the version's seek compaction;
/// never one that conflicts with `running`.
pub fn pick_compaction(
    version: &Version,
    options: &Options,
    compact_pointers: &[Vec<u8>; NUM_LEVELS],
    running: &[RunningCompaction],
) -> Option<CompactionPlan> {
    if let Some(plan) = pick_size_compaction(version, options, compact_pointers, running) {
        return Some(plan);
    }
    let (level, file) = version.seek_compaction.get()?;
    if level + 1 >= NUM_LEVELS {
        return None;
    }
    let mut first = vec![file.clone()];
    if *level == 0 {
        let (smallest, largest) = user_range(&first);
        first = version.overlapping_inputs(0, Some(&smallest), Some(&largest));
    }
    let plan = setup_other_inputs(version, options, *level, first, PickReason::Seek);
    running
        .iter()
        .all(|r| !plan.conflicts_with(r))
        .then_some(plan)
}

fn pick_size_compaction(
    version: &Version,
    options: &Options,
    compact_pointers: &[Vec<u8>; NUM_LEVELS],
    running: &[RunningCompaction],
) -> Option<CompactionPlan> {
    let scores = level_scores(version, options);
    let mut levels: Vec<usize> = (0..scores.len()).filter(|&l| scores[l] >= 1.0).collect();
    levels.sort_by(|&a, &b| scores[b].partial_cmp(&scores[a]).unwrap_or(Ordering::Equal));
    for level in levels {
        let files = &version.files[level];
        // Files in rotation order after the compact pointer; L0 has one
        // candidate (the expansion takes every overlapping L0 file).
        let start = if compact_pointers[level].is_empty() {
            0
        } else {
            files
                .iter()
                .position(|f| {
                    compare_internal_keys(f.largest.encoded(), &compact_pointers[level])
                        == Ordering::Greater
                })
                .unwrap_or(0)
        };
        let candidates = if level == 0 {
            files.len().min(1)
        } else {
            files.len()
        };
        for i in 0..candidates {
            let file = files[(start + i) % files.len()].clone();
            let mut first = vec![file];
            if level == 0 {
                let (smallest, largest) = user_range(&first);
                first = version.overlapping_inputs(0, Some(&smallest), Some(&largest));
            }
            let plan = setup_other_inputs(
                version,
                options,
                level,
                first,
                PickReason::Size {
                    score: scores_at(&scores, level),
                },
            );
            if running.iter().all(|r| !plan.conflicts_with(r)) {
                return Some(plan);
            }
        }
    }
    None
}

fn scores_at(scores: &[f64], level: usize) -> f64 {
    scores.get(level).copied().unwrap_or(0.0)
}

/// A manual compaction of `level` over the user-key range `[begin, end]`
/// (`None`: unbounded), limited for levels >= 1 to about one output file's
/// worth of inputs per round, as LevelDB does so that a huge manual
/// compaction proceeds in pieces. `None` when nothing at `level` overlaps.
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
        let limit = options.max_file_size;
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
fn user_range(files: &[Arc<FileMeta>]) -> (Vec<u8>, Vec<u8>) {
    let (smallest, largest) = internal_range(files);
    (
        shale_format::internal_key::extract_user_key(&smallest).to_vec(),
        shale_format::internal_key::extract_user_key(&largest).to_vec(),
    )
}

/// Smallest and largest internal key of `files`.
fn internal_range<'a>(files: impl IntoIterator<Item = &'a Arc<FileMeta>>) -> (Vec<u8>, Vec<u8>) {
    let mut smallest: Option<&[u8]> = None;
    let mut largest: Option<&[u8]> = None;
    for f in files {
        if smallest.is_none_or(|s| compare_internal_keys(f.smallest.encoded(), s) == Ordering::Less)
        {
            smallest = Some(f.smallest.encoded());
        }
        if largest
            .is_none_or(|l| compare_internal_keys(f.largest.encoded(), l) == Ordering::Greater)
        {
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
pub fn add_boundary_inputs(level_files: &[Arc<FileMeta>], inputs: &mut Vec<Arc<FileMeta>>) {
    loop {
        let (_, largest) = internal_range(inputs.iter());
        if largest.is_empty() {
            return;
        }
        let largest_user = shale_format::internal_key::extract_user_key(&largest);
        let boundary = level_files
            .iter()
            .filter(|f| {
                f.smallest.user_key() == largest_user
                    && compare_internal_keys(f.smallest.encoded(), &largest) == Ordering::Greater
            })
            .min_by(|a, b| compare_internal_keys(a.smallest.encoded(), b.smallest.encoded()));
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
    add_boundary_inputs(&version.files[level], &mut first);
    let (smallest, largest) = user_range(&first);
    let mut second = version.overlapping_inputs(level + 1, Some(&smallest), Some(&largest));
    add_boundary_inputs(&version.files[level + 1], &mut second);
    let (mut all_smallest, mut all_largest) = user_range(&[first.clone(), second.clone()].concat());

    if !second.is_empty() {
        let mut expanded0 =
            version.overlapping_inputs(level, Some(&all_smallest), Some(&all_largest));
        add_boundary_inputs(&version.files[level], &mut expanded0);
        let expanded0_size = total_file_size(&expanded0);
        let second_size = total_file_size(&second);
        if expanded0.len() > first.len()
            && second_size + expanded0_size < expanded_compaction_byte_limit(options)
        {
            let (new_smallest, new_largest) = user_range(&expanded0);
            let mut expanded1 =
                version.overlapping_inputs(level + 1, Some(&new_smallest), Some(&new_largest));
            add_boundary_inputs(&version.files[level + 1], &mut expanded1);
            if expanded1.len() == second.len() {
                first = expanded0;
                second = expanded1;
                (all_smallest, all_largest) = user_range(&[first.clone(), second.clone()].concat());
            }
        }
    }

    let grandparents = if level + 2 < NUM_LEVELS {
        version.overlapping_inputs(level + 2, Some(&all_smallest), Some(&all_largest))
    } else {
        Vec::new()
    };
    let (_, largest_internal) = internal_range(first.iter());
    CompactionPlan {
        level,
        inputs: [first, second],
        grandparents,
        reason,
        smallest_user_key: all_smallest,
        largest_user_key: all_largest,
        compact_pointer: InternalKey::from_encoded(largest_internal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::VersionBuilder;
    use shale_format::internal_key::ValueType;
    use shale_format::version_edit::{FileMetaData, VersionEdit};

    fn version(files: &[(usize, u64, &str, &str, u64)]) -> Version {
        let mut edit = VersionEdit::default();
        for &(level, number, smallest, largest, size) in files {
            edit.add_file(
                level,
                FileMetaData {
                    number,
                    file_size: size,
                    smallest: InternalKey::new(smallest.as_bytes(), 100, ValueType::Value),
                    largest: InternalKey::new(largest.as_bytes(), 100, ValueType::Value),
                },
            );
        }
        let mut builder = VersionBuilder::new(Arc::new(Version::default()));
        builder.apply(&edit).unwrap();
        builder.build().unwrap()
    }

    fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
        let mut n: Vec<u64> = files.iter().map(|f| f.number).collect();
        n.sort();
        n
    }

    #[test]
    fn l0_trigger_picks_all_overlapping_l0_and_l1() {
        let options = Options::default();
        let v = version(&[
            (0, 10, "a", "c", 100),
            (0, 11, "b", "d", 100),
            (0, 12, "c", "e", 100),
            (0, 13, "x", "z", 100),
            (1, 5, "a", "b", 100),
            (1, 6, "d", "f", 100),
            (1, 7, "m", "n", 100),
        ]);
        let plan = pick_compaction(&v, &options, &Default::default(), &[]).unwrap();
        assert_eq!(plan.level, 0);
        assert!(numbers(&plan.inputs[0]).len() >= 3);
        assert_eq!(numbers(&plan.inputs[1]), vec![5, 6]);
        assert!(!plan.is_trivial_move(&options));
    }

    #[test]
    fn a_file_out_of_seeks_is_compacted_when_no_level_needs_it() {
        let options = Options::default();
        let v = version(&[
            (1, 5, "a", "f", 100),
            (1, 6, "g", "k", 100),
            (2, 7, "b", "c", 100),
            (2, 8, "d", "e", 100),
            (2, 9, "h", "i", 100),
        ]);
        assert!(pick_compaction(&v, &options, &Default::default(), &[]).is_none());
        let file = v.files[1][0].clone();
        // The allowance is at least 100 seeks; only the last one reports.
        let charged: Vec<bool> = (0..100).map(|_| file.charge_seek()).collect();
        assert_eq!(charged.iter().filter(|&&out| out).count(), 1);
        assert!(charged[99]);
        v.seek_compaction.set((1, file)).unwrap();
        let plan = pick_compaction(&v, &options, &Default::default(), &[]).unwrap();
        assert_eq!(plan.reason, PickReason::Seek);
        assert_eq!(plan.level, 1);
        assert_eq!(numbers(&plan.inputs[0]), vec![5]);
        assert_eq!(numbers(&plan.inputs[1]), vec![7, 8]);
        // Not while a conflicting compaction runs.
        assert!(pick_compaction(&v, &options, &Default::default(), &[plan.running()]).is_none());
    }

    #[test]
    fn nothing_to_do_below_the_triggers() {
        let v = version(&[(0, 10, "a", "c", 100), (1, 5, "a", "b", 100)]);
        assert!(pick_compaction(&v, &Options::default(), &Default::default(), &[]).is_none());
    }

    #[test]
    fn big_level_rotates_through_compact_pointer_and_moves_trivially() {
        let options = Options {
            max_bytes_for_level_base: 100,
            ..Options::default()
        };
        let v = version(&[
            (1, 1, "a", "b", 100),
            (1, 2, "c", "d", 100),
            (1, 3, "e", "f", 100),
        ]);
        let mut pointers: [Vec<u8>; NUM_LEVELS] = Default::default();
        let plan = pick_compaction(&v, &options, &pointers, &[]).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![1]);
        assert!(plan.is_trivial_move(&options));
        pointers[1] = plan.compact_pointer.encoded().to_vec();
        let plan = pick_compaction(&v, &options, &pointers, &[]).unwrap();
        assert_eq!(numbers(&plan.inputs[0]), vec![2]);
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
        add_boundary_inputs(&v.files[1], &mut inputs);
        assert_eq!(numbers(&inputs), vec![1, 2]);
    }

    #[test]
    fn conflicting_plans_are_skipped() {
        let options = Options::default();
        let v = version(&[
            (0, 10, "a", "c", 100),
            (0, 11, "b", "d", 100),
            (0, 12, "c", "e", 100),
            (0, 13, "c", "d", 100),
        ]);
        let plan = pick_compaction(&v, &options, &Default::default(), &[]).unwrap();
        assert!(pick_compaction(&v, &options, &Default::default(), &[plan.running()]).is_none());
    }

    #[test]
    fn job_has_runs_grandparents_and_deeper_ranges() {
        let options = Options::default();
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
}
