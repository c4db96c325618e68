//! Background errors, and resuming after a full disk (`docs/reliability.md`,
//! "A full disk and I/O errors").
//!
//! A failed WAL write, flush, compaction or MANIFEST update becomes the
//! background error (`State::bg_error`): every write is refused with it, so
//! nothing is built on a state the disk did not take. What follows depends
//! on the error:
//!
//! * **No space** (`ENOSPC`, `EDQUOT`, [`Error::is_no_space`]): the write
//!   can succeed once space is freed, so the flush thread retries by itself
//!   (RocksDB's auto-resume), after 100 ms, then twice as long each time up
//!   to 5 s. An attempt writes a new MANIFEST when the last MANIFEST write
//!   failed, replaces a failed WAL by a new one, and flushes the memtables;
//!   when all of that works the error is cleared and writes go on.
//! * **Anything else** (`EIO`, a corruption): the error stays until the
//!   database is reopened, as in LevelDB: a disk that fails that way cannot
//!   be trusted with what comes next.
//!
//! A WAL whose write or sync failed may end in a torn record (a short write
//! on a full disk) or hold a record nobody acknowledged: nothing more is
//! ever appended to it, since a record after a torn one would be read as
//! damage and LevelDB's reader drops the rest of its block with it. Its
//! good records stay where they are until the memtable they fed is a table.
//! The sequence numbers of the failed group are used up all the same, so a
//! later write never shares one with a record that may be in that WAL.

use std::time::Instant;

use shale_format::version_edit::VersionEdit;
use shale_format::{Error, Result};

use super::inner::{DbInner, State};

impl DbInner {
    /// Records a background failure: writes fail with it from now on. A
    /// no-space error plans an automatic attempt; any other error replaces
    /// a no-space one and stays until reopen.
    pub(super) fn record_background_error(&self, state: &mut State, err: &Error) {
        let retried = err.is_no_space();
        if let Some(existing) = &state.bg_error {
            if !existing.is_no_space() || retried {
                return;
            }
        }
        let shown = writers_error(err);
        if retried {
            let wait = state.resume.schedule(Instant::now());
            shale_log!(
                self.info_log,
                "Background error (no space; retrying in {} ms): {err}",
                wait.as_millis()
            );
        } else {
            state.resume.next_attempt = None;
            shale_log!(
                self.info_log,
                "Background error (writes stop until reopen): {err}"
            );
        }
        state.bg_error = Some(shown);
        // Writes meet the error in the queue.
        self.direct.close();
        self.signal_done(state);
        self.service().error_recorded();
        // The flush thread plans the attempt.
        self.work_cv.notify_all();
    }

    /// A write group's WAL append or sync failed with `err`: the WAL is not
    /// used again (see the module comment) and `err` becomes the background
    /// error.
    pub(super) fn record_wal_error(&self, state: &mut State, err: &Error) {
        state.resume.wal_broken = true;
        self.record_background_error(state, err);
    }

    /// One automatic attempt, on the flush thread: a new MANIFEST if the
    /// last MANIFEST write failed, the immutable memtable flushed, a new WAL
    /// for a failed one (its memtable flushed too). Clears the background
    /// error when all of that works; otherwise plans the next attempt (or,
    /// for an error other than no space, stops trying).
    pub(super) fn attempt_resume(&self) {
        match self.resume_steps() {
            Ok(()) => self.clear_background_error(),
            Err(err) => {
                let mut state = self.lock_state();
                if !state.bg_error.as_ref().is_some_and(Error::is_no_space) {
                    // An error that waits for a reopen arrived during the
                    // attempt: it stands, whatever the attempt found.
                    return;
                }
                if err.is_no_space() {
                    let wait = state.resume.schedule(Instant::now());
                    shale_log!(
                        self.info_log,
                        "Resume failed (no space; retrying in {} ms): {err}",
                        wait.as_millis()
                    );
                    state.bg_error = Some(writers_error(&err));
                } else {
                    // Not a full disk after all: wait for a reopen.
                    state.bg_error = None;
                    self.record_background_error(&mut state, &err);
                }
            }
        }
    }

    fn resume_steps(&self) -> Result<()> {
        {
            let mut versions = self.lock_versions();
            if !versions.has_manifest_writer() {
                // A failed MANIFEST write closed it (LevelDB's rule): the
                // next edit starts a new one; write it now, with no change.
                let last_sequence = self.visible_sequence();
                let version = versions
                    .log_and_apply(&mut VersionEdit::default(), last_sequence)
                    .map_err(|e| e.during("writing a new MANIFEST"))?;
                self.install_version(&mut self.lock_state(), version);
            }
            // CURRENT names a MANIFEST written whole since any failed edit,
            // and none of the failed edits' tables is in it.
            let mut state = self.lock_state();
            for number in std::mem::take(&mut state.resume.unrecorded_tables) {
                state.pending_outputs.remove(&number);
            }
        }
        let (has_imm, wal_broken) = {
            let state = self.lock_state();
            (state.imm.is_some(), state.resume.wal_broken)
        };
        if has_imm {
            self.flush_immutable().map_err(|e| e.during("flush"))?;
        }
        if wal_broken {
            // Writers are refused while the error stands, so none is leading
            // or switching memtables now (groups already past the WAL may
            // still insert: see below).
            let number = self.new_file_number();
            let file = self.create_wal(number)?;
            // A pipelined group logged before the failure may still be
            // inserting into the memtable being retired.
            let mut state = self.wait_for_inserts(self.lock_state());
            self.settle_direct(&mut state);
            self.switch_memtable(&mut state, number, file);
            state.resume.wal_broken = false;
            drop(state);
            // The memtable the failed WAL logged becomes a table, so every
            // write acknowledged before the failure is durable before a new
            // one is taken (a later synced write must not outlive it).
            self.flush_immutable().map_err(|e| e.during("flush"))?;
        }
        Ok(())
    }

    /// Writes go on: the error is gone, the compaction threads look for
    /// work, and the files the failed attempts left are deleted.
    /// Only a no-space error is cleared: one that waits for a reopen (a
    /// corruption, `EIO`) may have arrived while the attempt ran, and
    /// stands.
    fn clear_background_error(&self) {
        let mut state = self.lock_state();
        match state.bg_error.take() {
            Some(err) if err.is_no_space() => {
                shale_log!(self.info_log, "Resumed after: {err}");
            }
            Some(other) => {
                shale_log!(
                    self.info_log,
                    "Resume attempt worked, but a later error stands: {other}"
                );
                state.bg_error = Some(other);
                return;
            }
            None => {}
        }
        state.resume.next_attempt = None;
        state.resume.resumed += 1;
        self.work_cv.notify_all();
        self.signal_done(&mut state);
        drop(state);
        self.service().work_available();
        self.delete_obsolete_files(self.lock_versions());
    }
}

/// The error writers get for background error `err`: an I/O error says
/// whether writes come back by themselves or need a reopen.
fn writers_error(err: &Error) -> Error {
    match err {
        Error::Io { context, source } => Error::Io {
            context: if err.is_no_space() {
                format!("{context} (writes resume by themselves once space is freed)")
            } else {
                format!("{context} (writes are refused until the database is reopened)")
            },
            source: source.clone(),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::retry::{Resume, FIRST_RETRY};
    use super::*;
    use crate::env::{Env, MemEnv};
    use crate::options::{Options, WriteOptions};
    use crate::DB;
    use std::sync::Arc;

    #[test]
    fn an_error_that_arrives_while_a_full_disk_is_retried_stands() {
        let env: Arc<dyn Env> = Arc::new(MemEnv::new());
        let options = Options {
            create_if_missing: true,
            env,
            ..Options::default()
        };
        let db = DB::open("/resume", options).unwrap();
        let inner = &db.inner;
        let full = Error::io("writing a table", std::io::Error::from_raw_os_error(28));
        let corrupt = Error::corruption(3, "bad block").at("000007.ldb", 0);
        {
            let mut state = inner.lock_state();
            inner.record_background_error(&mut state, &full);
            // While the attempt's steps run (nothing to do here: they
            // succeed), a compaction finds corrupt input.
            inner.record_background_error(&mut state, &corrupt);
        }
        inner.attempt_resume();
        let err = inner.lock_state().bg_error.clone();
        assert!(matches!(err, Some(Error::Corruption { .. })), "{err:?}");
        let refused = db.put(&WriteOptions::default(), b"k", b"v").unwrap_err();
        assert!(refused.is_corruption(), "{refused}");
    }

    #[test]
    fn attempts_back_off_from_100_ms_doubling_to_5_s_and_start_over() {
        let mut resume = Resume::default();
        let now = Instant::now();
        assert_eq!(resume.wait_before_attempt(now), None);
        let waits: Vec<u128> = (0..9).map(|_| resume.schedule(now).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(
            resume.wait_before_attempt(now),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            resume.wait_before_attempt(now + Duration::from_secs(6)),
            Some(Duration::ZERO)
        );
        resume.reset_backoff();
        assert_eq!(resume.schedule(now), FIRST_RETRY);
    }
}
