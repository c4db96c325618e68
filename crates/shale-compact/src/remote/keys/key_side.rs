//! The key side's flow control (the engine): what to ask the worker for and
//! what to tell it, around an [`OrderMerge`]. Pure: it takes the worker's
//! key chunks and returns the messages to send, so the protocol's rules
//! are tested without a network.
//!
//! Credit: a run may have at most `window` keys held here or granted and
//! not yet received. A run is topped up to the window once that falls to
//! half, so its next keys are on their way before the merge runs out of
//! them. The codes decided go out at once, and always before any credit:
//! so when the worker takes a grant, it has every code decided before it,
//! and never has more than `window` keys of a run sent and not yet
//! ordered.

use shale_format::{Error, Result};

use super::merge::{Held, OrderMerge};
use crate::job::CompactionJob;
use crate::remote::convert::MAX_KEY_BYTES;
use crate::remote::proto::keys_only_request::Request;
use crate::remote::proto::{KeyChunk, KeysWanted, OrderChunk};

/// Order codes per `OrderChunk`, at most.
const CODES_PER_CHUNK: usize = 64 * 1024;
/// The most key bytes a job may receive, as a multiple of its input
/// tables' size (compressed blocks hold more than their bytes): a worker
/// that sends more is lying, and is stopped.
const KEY_BUDGET_FACTOR: u64 = 8;

/// The engine's half of a keys-only job.
#[derive(Debug)]
pub struct KeySide<'job> {
    merge: OrderMerge<'job>,
    window: u64,
    /// Per run: keys granted and not yet received.
    granted: Vec<u64>,
    /// Codes decided and not yet sent.
    pending: Vec<u32>,
    /// Whether the last order chunk went out.
    finished: bool,
    key_bytes: u64,
    key_budget: u64,
}

impl<'job> KeySide<'job> {
    /// The key side of `job`, holding at most `window` keys per run (at
    /// least 1).
    pub fn new(job: &'job CompactionJob, window: u64) -> Result<KeySide<'job>> {
        if window == 0 {
            return Err(Error::InvalidArgument(
                "keys-only: the window must hold at least one key".to_string(),
            ));
        }
        let merge = OrderMerge::new(job)?;
        Ok(KeySide {
            granted: vec![0; merge.runs()],
            merge,
            window,
            pending: Vec::new(),
            finished: false,
            key_bytes: 0,
            key_budget: job.input_bytes().saturating_mul(KEY_BUDGET_FACTOR),
        })
    }

    /// The first messages: a window of credit for every run.
    pub fn start(&mut self) -> Vec<Request> {
        let mut out = Vec::new();
        for run in 0..self.merge.runs() {
            self.top_up(run, &mut out);
        }
        out
    }

    /// Takes a chunk of keys from the worker and returns what to send it,
    /// in order: the codes decided, then credit for the runs that ran low.
    pub fn on_keys(&mut self, chunk: KeyChunk) -> Result<Vec<Request>> {
        let run = chunk.run as usize;
        let count = chunk.keys.len() as u64;
        let Some(granted) = self.granted.get_mut(run) else {
            return Err(Error::InvalidArgument(format!(
                "keys-only: the worker sent keys of run {run}, of {}",
                self.merge.runs()
            )));
        };
        if count > *granted {
            return Err(Error::InvalidArgument(format!(
                "keys-only: the worker sent {count} keys of run {run}, {} were asked for",
                *granted
            )));
        }
        *granted -= count;
        if chunk.last {
            *granted = 0;
        }
        self.spend_key_budget(&chunk.keys)?;
        let before = self.pending.len();
        self.merge.push(run, chunk.keys, chunk.last)?;
        self.merge.emit(&mut self.pending)?;
        let mut low: Vec<usize> = self.pending[before..]
            .iter()
            .map(|&code| super::decode(code).0)
            .collect();
        low.sort_unstable();
        low.dedup();
        let mut out = Vec::new();
        self.flush(&mut out);
        for run in low {
            self.top_up(run, &mut out);
        }
        Ok(out)
    }

    /// Whether the last order chunk went out: only the worker's `Done` is
    /// left to wait for.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The most keys held at once so far.
    pub fn peak(&self) -> Held {
        self.merge.peak()
    }

    /// Checks each key's size and the job's key budget.
    fn spend_key_budget(&mut self, keys: &[Vec<u8>]) -> Result<()> {
        for key in keys {
            if key.len() > MAX_KEY_BYTES {
                return Err(Error::InvalidArgument(format!(
                    "keys-only: the worker sent a key of {} bytes",
                    key.len()
                )));
            }
            self.key_bytes += key.len() as u64;
        }
        if self.key_bytes > self.key_budget {
            return Err(Error::InvalidArgument(format!(
                "keys-only: the worker sent {} bytes of keys, more than {KEY_BUDGET_FACTOR} times the job's input bytes",
                self.key_bytes
            )));
        }
        Ok(())
    }

    /// Sends the codes decided, in chunks; the last one says so once the
    /// merge is done.
    fn flush(&mut self, out: &mut Vec<Request>) {
        let done = self.merge.is_done();
        if self.pending.is_empty() && !done {
            return;
        }
        let mut codes = std::mem::take(&mut self.pending);
        loop {
            let rest = codes.split_off(codes.len().min(CODES_PER_CHUNK));
            let last = done && rest.is_empty();
            out.push(Request::Order(OrderChunk { codes, last }));
            if rest.is_empty() {
                break;
            }
            codes = rest;
        }
        self.finished = done;
    }

    /// Grants `run` credit up to the window once what it holds and was
    /// granted falls to half the window.
    fn top_up(&mut self, run: usize, out: &mut Vec<Request>) {
        if self.merge.has_ended(run) {
            return;
        }
        let Some(granted) = self.granted.get_mut(run) else {
            return;
        };
        let taken = self.merge.held_keys(run) + *granted;
        if taken > self.window / 2 {
            return;
        }
        let count = self.window - taken;
        *granted += count;
        out.push(Request::KeysWanted(KeysWanted {
            run: run as u32,
            count,
        }));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use shale_format::internal_key::{InternalKey, ValueType};

    use super::*;
    use crate::remote::keys::code;

    fn key(user: &str) -> Vec<u8> {
        InternalKey::new(user.as_bytes(), 1, ValueType::Value).into_encoded()
    }

    fn job(runs: usize) -> CompactionJob {
        let files = (0..runs as u64)
            .map(|n| crate::testing::file(n + 1, 1 << 20, b"a", b"z"))
            .collect::<Vec<_>>();
        crate::testing::job(crate::testing::level0(files))
    }

    fn chunk(run: u32, keys: &[&str], last: bool) -> KeyChunk {
        KeyChunk {
            run,
            keys: keys.iter().map(|k| key(k)).collect(),
            last,
        }
    }

    fn credit(run: u32, count: u64) -> Request {
        Request::KeysWanted(KeysWanted { run, count })
    }

    fn order(codes: Vec<u32>, last: bool) -> Request {
        Request::Order(OrderChunk { codes, last })
    }

    #[test]
    fn credit_is_topped_up_at_half_the_window_after_the_codes() {
        let job = job(2);
        let mut side = KeySide::new(&job, 4).unwrap();
        assert_eq!(side.start(), vec![credit(0, 4), credit(1, 4)]);
        // Run 1 sends all it has; nothing placed yet: run 0 may hold less.
        let out = side.on_keys(chunk(1, &["b", "d"], true)).unwrap();
        assert_eq!(out, vec![]);
        // Run 0's keys: a, b, c, d, e all go (run 1 has ended), and run 0
        // is left waiting for its next key.
        let out = side.on_keys(chunk(0, &["a", "c", "e"], false)).unwrap();
        let placed = vec![
            code(0, true, false),
            code(1, true, false),
            code(0, true, false),
            code(1, true, false),
            code(0, true, false),
        ];
        // Run 0 holds nothing and has 1 more granted: 1 <= 4 / 2, topped
        // up by 3, after the codes.
        assert_eq!(out, vec![order(placed, false), credit(0, 3)]);
        let out = side.on_keys(chunk(0, &["f"], true)).unwrap();
        assert_eq!(out, vec![order(vec![code(0, true, false)], true)]);
        assert!(side.is_finished());
        assert_eq!(side.peak().keys, 5);
    }

    #[test]
    fn a_worker_that_sends_more_than_asked_or_unknown_runs_is_stopped() {
        let job = job(1);
        let mut side = KeySide::new(&job, 2).unwrap();
        side.start();
        let err = side.on_keys(chunk(0, &["a", "b", "c"], false)).unwrap_err();
        assert!(err.to_string().contains("2 were asked for"), "{err}");
        let err = side.on_keys(chunk(3, &[], true)).unwrap_err();
        assert!(err.to_string().contains("run 3, of 1"), "{err}");
        let big = KeyChunk {
            run: 0,
            keys: vec![vec![b'k'; MAX_KEY_BYTES + 1]],
            last: false,
        };
        let err = side.on_keys(big).unwrap_err();
        assert!(err.to_string().contains("a key of"), "{err}");
        assert!(KeySide::new(&job, 0).is_err());
    }

    #[test]
    fn a_job_whose_runs_hold_nothing_ends_with_one_empty_last_chunk() {
        let job = job(2);
        let mut side = KeySide::new(&job, 8).unwrap();
        side.start();
        assert_eq!(side.on_keys(chunk(0, &[], true)).unwrap(), vec![]);
        let out = side.on_keys(chunk(1, &[], true)).unwrap();
        assert_eq!(out, vec![order(Vec::new(), true)]);
        assert!(side.is_finished());
    }

    #[test]
    fn held_keys_never_pass_the_window_per_run() {
        let job = job(3);
        let window = 6;
        let mut side = KeySide::new(&job, window).unwrap();
        let mut next = [0u32; 3];
        let mut credit_left = [0u64; 3];
        let mut queue = side.start();
        // A worker with 40 keys per run, sending a credit's keys in two
        // chunks, runs in turn.
        while !side.is_finished() {
            for request in queue.drain(..) {
                if let Request::KeysWanted(w) = request {
                    credit_left[w.run as usize] += w.count;
                }
            }
            let run = (0..3).find(|&r| credit_left[r] > 0).unwrap();
            let take = credit_left[run].div_ceil(2).min(40 - u64::from(next[run]));
            let keys: Vec<String> = (0..take)
                .map(|i| format!("k{:04}", (next[run] + i as u32) * 3 + run as u32))
                .collect();
            next[run] += take as u32;
            credit_left[run] -= take;
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let last = next[run] == 40;
            if last {
                credit_left[run] = 0;
            }
            queue = side.on_keys(chunk(run as u32, &keys, last)).unwrap();
        }
        assert!(side.peak().keys <= 3 * window, "{:?}", side.peak());
    }
}
