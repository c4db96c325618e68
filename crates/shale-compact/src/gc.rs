//! What a compaction drops: LevelDB's rules, as one sequential decider for
//! the streaming executor and as a per-element predicate for the
//! data-parallel ones. Both must agree entry for entry.
//!
//! An entry is dropped when
//! 1. a newer entry of the same user key exists whose sequence is at or below
//!    the smallest snapshot (no reader can see this older one), or
//! 2. it is a tombstone at or below the smallest snapshot and no level below
//!    the output level can hold its user key (nothing left for it to hide).

use std::cmp::Ordering;

use shale_format::comparator::{compare_bytes, KeyOrder};
use shale_format::internal_key::{ParsedInternalKey, SequenceNumber, ValueType};

use crate::job::{CompactionJob, UserKeyRange};

/// Answers "could a level below the output level hold this user key?" for
/// keys asked in increasing order, advancing one cursor per level (LevelDB's
/// `IsBaseLevelForKey` with its `level_ptrs_`).
#[derive(Debug)]
pub struct DeeperLevels<'a> {
    levels: &'a [Vec<UserKeyRange>],
    cursors: Vec<usize>,
    order: KeyOrder,
}

impl<'a> DeeperLevels<'a> {
    /// Cursors at the start of every deeper level of `job`, keys in
    /// bytewise order.
    pub fn new(job: &'a CompactionJob) -> DeeperLevels<'a> {
        DeeperLevels::with_order(job, KeyOrder::bytewise())
    }

    /// Cursors at the start of every deeper level of `job`, user keys in
    /// `order`.
    pub fn with_order(job: &'a CompactionJob, order: KeyOrder) -> DeeperLevels<'a> {
        DeeperLevels {
            levels: &job.deeper_levels,
            cursors: vec![0; job.deeper_levels.len()],
            order,
        }
    }

    /// True when no deeper file's range contains `user_key`.
    /// REQUIRES: successive calls pass non-decreasing keys.
    pub fn is_base_level_for(&mut self, user_key: &[u8]) -> bool {
        for (level, cursor) in self.levels.iter().zip(self.cursors.iter_mut()) {
            while let Some(range) = level.get(*cursor) {
                if self.order.compare_user(user_key, &range.largest) != Ordering::Greater {
                    if self.order.compare_user(user_key, &range.smallest) != Ordering::Less {
                        return false;
                    }
                    break;
                }
                *cursor += 1;
            }
        }
        true
    }
}

/// Random-access form of [`DeeperLevels::is_base_level_for`] (binary search),
/// for executors that decide entries independently.
pub fn is_base_level_for(levels: &[Vec<UserKeyRange>], user_key: &[u8]) -> bool {
    levels.iter().all(|level| {
        let at = level.partition_point(|r| r.largest.as_slice() < user_key);
        level
            .get(at)
            .is_none_or(|r| user_key < r.smallest.as_slice())
    })
}

/// The keep/drop decision for entry `i` of the merged order, from the entry
/// itself and the one before it: `previous` is `(user_key, sequence)` of
/// entry `i - 1`, or `None` for the first entry.
pub fn keep_entry(
    entry: &ParsedInternalKey<'_>,
    previous: Option<(&[u8], SequenceNumber)>,
    smallest_snapshot: SequenceNumber,
    is_base_level: impl FnOnce(&[u8]) -> bool,
) -> bool {
    if let Some((prev_user_key, prev_sequence)) = previous {
        if prev_sequence <= smallest_snapshot
            && compare_bytes(prev_user_key, entry.user_key).is_eq()
        {
            return false;
        }
    }
    !(entry.value_type == ValueType::Deletion
        && entry.sequence <= smallest_snapshot
        && is_base_level(entry.user_key))
}

/// The sequential decider: feed entries in merged order.
#[derive(Debug)]
pub struct GcDecider<'a> {
    smallest_snapshot: SequenceNumber,
    deeper: DeeperLevels<'a>,
    previous_user_key: Vec<u8>,
    previous_sequence: Option<SequenceNumber>,
    order: KeyOrder,
}

impl<'a> GcDecider<'a> {
    /// A decider for `job`, keys in bytewise order.
    pub fn new(job: &'a CompactionJob) -> GcDecider<'a> {
        GcDecider::with_order(job, KeyOrder::bytewise())
    }

    /// A decider for `job`, user keys in `order`: two keys are the same
    /// user key when `order` finds them equal, as LevelDB's compaction
    /// asks its user comparator.
    pub fn with_order(job: &'a CompactionJob, order: KeyOrder) -> GcDecider<'a> {
        GcDecider {
            smallest_snapshot: job.smallest_snapshot,
            deeper: DeeperLevels::with_order(job, order.clone()),
            previous_user_key: Vec::new(),
            previous_sequence: None,
            order,
        }
    }

    /// True when `entry` goes to the output.
    pub fn keep(&mut self, entry: &ParsedInternalKey<'_>) -> bool {
        // `keep_entry` compares bytes; an order that finds two different
        // byte strings equal makes them one user key here.
        let previous = self.previous_sequence.map(|seq| {
            if self.order.is_bytewise()
                || self
                    .order
                    .compare_user(&self.previous_user_key, entry.user_key)
                    .is_ne()
            {
                (self.previous_user_key.as_slice(), seq)
            } else {
                (entry.user_key, seq)
            }
        });
        let deeper = &mut self.deeper;
        let keep = keep_entry(entry, previous, self.smallest_snapshot, |k| {
            deeper.is_base_level_for(k)
        });
        self.previous_user_key.clear();
        self.previous_user_key.extend_from_slice(entry.user_key);
        self.previous_sequence = Some(entry.sequence);
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(a: &[u8], b: &[u8]) -> UserKeyRange {
        UserKeyRange {
            smallest: a.to_vec(),
            largest: b.to_vec(),
        }
    }

    #[test]
    fn base_level_sequential_and_random_agree() {
        let levels = vec![
            vec![range(b"b", b"d"), range(b"m", b"p")],
            vec![range(b"x", b"z")],
        ];
        let job = CompactionJob {
            deeper_levels: levels.clone(),
            ..crate::testing::job(vec![])
        };
        let mut seq = DeeperLevels::new(&job);
        for key in [&b"a"[..], b"b", b"c", b"e", b"m", b"q", b"y", b"zz"] {
            assert_eq!(
                seq.is_base_level_for(key),
                is_base_level_for(&levels, key),
                "{key:?}"
            );
        }
        assert!(is_base_level_for(&levels, b"a"));
        assert!(!is_base_level_for(&levels, b"p"));
    }

    #[test]
    fn drops_hidden_versions_and_base_tombstones() {
        let p = |k: &'static [u8], s: u64, t: ValueType| ParsedInternalKey {
            user_key: k,
            sequence: s,
            value_type: t,
        };
        // Newer version at 5 <= snapshot 10 hides the version at 3.
        assert!(!keep_entry(
            &p(b"k", 3, ValueType::Value),
            Some((b"k", 5)),
            10,
            |_| true
        ));
        // Newer version at 15 > snapshot: a reader at 10 still needs 3.
        assert!(keep_entry(
            &p(b"k", 3, ValueType::Value),
            Some((b"k", 15)),
            10,
            |_| true
        ));
        // Tombstone at the base level, visible to no snapshot: dropped.
        assert!(!keep_entry(
            &p(b"k", 3, ValueType::Deletion),
            None,
            10,
            |_| true
        ));
        // Tombstone that may hide something deeper: kept.
        assert!(keep_entry(
            &p(b"k", 3, ValueType::Deletion),
            None,
            10,
            |_| false
        ));
        // Tombstone newer than the snapshot: kept.
        assert!(keep_entry(
            &p(b"k", 30, ValueType::Deletion),
            None,
            10,
            |_| true
        ));
    }
}
