//! Whether the database is read while it is written: L0's write triggers
//! sit `l0_load_slack` files higher while it is not (a load).
//!
//! L0's files cost nothing but reads: every point read that misses the
//! memtables looks at each of them, and every iterator merges them. So
//! while no read comes, L0 may hold more files before the write throttle
//! holds writes back, and each job into L1 takes more of them: fewer jobs,
//! each rewriting L1 once, so less is written per byte put (at 50 million
//! pairs, `docs/results/compaction-tax.md`, "L0's triggers during a
//! load"). RocksDB leaves this to the user (`PrepareForBulkLoad`); here the
//! engine sees the reads.
//!
//! Readers mark a flag (a load first, so that readers do not write a
//! shared cache line once it is set); the write path samples it at every
//! memtable switch, under the state lock, which is where L0 can next grow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

/// How long after the last read seen the database counts as loading.
pub(super) const LOAD_AFTER: Duration = Duration::from_secs(1);

/// The readers' mark (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ReadMark {
    seen: CachePadded<AtomicBool>,
}

impl ReadMark {
    /// A read came (a get or a new iterator).
    #[inline]
    pub(super) fn note(&self) {
        if !self.seen.load(Ordering::Relaxed) {
            self.seen.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a read came since the last take, clearing the mark.
    fn take(&self) -> bool {
        self.seen.load(Ordering::Relaxed) && self.seen.swap(false, Ordering::Relaxed)
    }
}

/// What the write path knows of reads (part of the state, under its lock).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ReadActivity {
    /// When a sample last found a read (`None`: none since the open).
    last_read: Option<Instant>,
    /// No read for [`LOAD_AFTER`] as of the last sample.
    pub(super) loading: bool,
}

impl ReadActivity {
    /// Samples `mark` at `now`; true when that changed `loading`.
    pub(super) fn sample(&mut self, mark: &ReadMark, now: Instant) -> bool {
        if mark.take() {
            self.last_read = Some(now);
        }
        let loading = self
            .last_read
            .is_none_or(|read| now.saturating_duration_since(read) >= LOAD_AFTER);
        let changed = loading != self.loading;
        self.loading = loading;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_loads_until_a_read_comes_and_again_a_second_after_the_last() {
        let mark = ReadMark::default();
        let mut activity = ReadActivity::default();
        let start = Instant::now();
        assert!(activity.sample(&mark, start));
        assert!(activity.loading, "no read since the open");
        mark.note();
        mark.note();
        assert!(activity.sample(&mark, start + Duration::from_millis(10)));
        assert!(!activity.loading);
        // The mark was taken: later samples count from that read.
        assert!(!activity.sample(&mark, start + Duration::from_millis(900)));
        assert!(!activity.loading);
        assert!(activity.sample(&mark, start + Duration::from_millis(1010)));
        assert!(activity.loading);
    }
}
