//! The plan of automatic attempts to get over a background error: a full
//! disk is retried from 100 ms, the wait doubling up to 5 s, and starts
//! over once a flush or compaction works (`resume.rs` carries it out).

use std::time::{Duration, Instant};

/// The wait before the first automatic attempt after a no-space error.
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between attempts: the delay doubles up to this.
pub(super) const MAX_RETRY: Duration = Duration::from_secs(5);

/// How the database gets over its background error.
#[derive(Debug)]
pub(crate) struct Resume {
    /// The WAL failed: the next attempt starts a new one.
    pub(super) wal_broken: bool,
    /// When the flush thread tries again; `None` while there is no error or
    /// the error waits for a reopen.
    pub(super) next_attempt: Option<Instant>,
    /// The wait after the next failed attempt.
    backoff: Duration,
    /// Tables whose MANIFEST edit failed: the record may be on disk and name
    /// them, so they stay (pending) until a MANIFEST written whole since
    /// then is current, which they are not in.
    pub(super) unrecorded_tables: Vec<u64>,
    /// Times the database resumed by itself since open.
    pub(super) resumed: u64,
}

impl Default for Resume {
    fn default() -> Resume {
        Resume {
            wal_broken: false,
            next_attempt: None,
            backoff: FIRST_RETRY,
            unrecorded_tables: Vec::new(),
            resumed: 0,
        }
    }
}

impl Resume {
    /// Plans the next attempt one backoff from `now` and doubles the
    /// backoff; returns the wait.
    pub(super) fn schedule(&mut self, now: Instant) -> Duration {
        let wait = self.backoff;
        self.next_attempt = Some(now + wait);
        self.backoff = (self.backoff * 2).min(MAX_RETRY);
        wait
    }

    /// How long the flush thread waits before the next attempt: `Some(0)`
    /// when it is due, `None` when no attempt is planned.
    pub(super) fn wait_before_attempt(&self, now: Instant) -> Option<Duration> {
        self.next_attempt
            .map(|at| at.saturating_duration_since(now))
    }

    /// A flush or compaction worked: the disk has room again, so the next
    /// failure is retried soon.
    pub(super) fn reset_backoff(&mut self) {
        self.backoff = FIRST_RETRY;
    }
}
