//! Where output files end: the one definition every executor uses. (Where
//! data blocks end is [`shale_format::table_builder::block_is_full`].)
//!
//! An output file ends
//! - before a key whose file would otherwise overlap more than
//!   `max_grandparent_overlap_bytes` of the level below the output level
//!   (LevelDB's `ShouldStopBefore`, so a later compaction of that file stays
//!   small), and
//! - after a key once the uncompressed bytes of the file's finished data
//!   blocks reach `max_output_file_size`. LevelDB compares the compressed
//!   file size; we use uncompressed sizes so that the cut does not depend on
//!   the compressor, which lets data-parallel executors fix every cut before
//!   any block is compressed.

use std::cmp::Ordering;

use shale_format::comparator::KeyOrder;

use crate::job::{CompactionJob, JobFile};

/// Tracks overlap with the grandparent level as keys go by in order.
#[derive(Debug)]
pub struct GrandparentCutter<'a> {
    grandparents: &'a [JobFile],
    max_overlap: u64,
    index: usize,
    seen_key: bool,
    overlapped_bytes: u64,
    order: KeyOrder,
}

impl<'a> GrandparentCutter<'a> {
    /// A cutter for `job`'s grandparents, keys in bytewise order.
    pub fn new(job: &'a CompactionJob) -> GrandparentCutter<'a> {
        GrandparentCutter::with_order(job, KeyOrder::bytewise())
    }

    /// A cutter for `job`'s grandparents, user keys in `order`.
    pub fn with_order(job: &'a CompactionJob, order: KeyOrder) -> GrandparentCutter<'a> {
        GrandparentCutter {
            order,
            grandparents: &job.grandparents,
            max_overlap: job.max_grandparent_overlap_bytes,
            index: 0,
            seen_key: false,
            overlapped_bytes: 0,
        }
    }

    /// Called with every merged input key in order, dropped or not: true when
    /// the current output file must end before `internal_key`.
    pub fn should_stop_before(&mut self, internal_key: &[u8]) -> bool {
        let mut passed = self.index;
        while passed < self.grandparents.len()
            && self
                .order
                .compare_internal(internal_key, &self.grandparents[passed].largest)
                == Ordering::Greater
        {
            passed += 1;
        }
        self.should_stop_before_position(passed)
    }

    /// [`GrandparentCutter::should_stop_before`] for a key that sorts after
    /// the largest keys of exactly `passed` grandparent files (for executors
    /// that find that position elsewhere, by binary search on a device).
    pub fn should_stop_before_position(&mut self, passed: usize) -> bool {
        while self.index < passed.min(self.grandparents.len()) {
            if self.seen_key {
                self.overlapped_bytes += self.grandparents[self.index].file_size;
            }
            self.index += 1;
        }
        self.seen_key = true;
        if self.overlapped_bytes > self.max_overlap {
            self.overlapped_bytes = 0;
            true
        } else {
            false
        }
    }
}

/// True when an output file whose finished data blocks hold
/// `raw_data_bytes` uncompressed bytes must end after the current entry.
#[inline]
pub fn output_file_full(raw_data_bytes: u64, max_output_file_size: u64) -> bool {
    raw_data_bytes >= max_output_file_size
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{file, job};
    use shale_format::internal_key::{InternalKey, ValueType};

    #[test]
    fn stops_after_overlapping_too_much() {
        let job = CompactionJob {
            max_output_file_size: 1 << 20,
            grandparents: vec![
                file(1, 100, b"a", b"b"),
                file(2, 100, b"c", b"d"),
                file(3, 100, b"e", b"f"),
            ],
            max_grandparent_overlap_bytes: 150,
            ..job(vec![])
        };
        let mut cutter = GrandparentCutter::new(&job);
        let key = |k: &[u8]| InternalKey::new(k, 5, ValueType::Value).into_encoded();
        assert!(!cutter.should_stop_before(&key(b"a")));
        assert!(!cutter.should_stop_before(&key(b"c"))); // passed file 1: 100
        assert!(cutter.should_stop_before(&key(b"e"))); // passed file 2: 200 > 150
        assert!(!cutter.should_stop_before(&key(b"e1")));
    }

    #[test]
    fn file_full_rule() {
        assert!(!output_file_full(99, 100));
        assert!(output_file_full(100, 100));
    }
}
