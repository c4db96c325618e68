//! The key side's merge, incremental: keys of each run arrive in chunks,
//! and the merged order (one [`code`] per key) is emitted as far as the
//! keys held allow. The smallest key held is the next one only while every
//! run that has not ended holds a key: a run that holds none could still
//! send a smaller one. Drops and cuts are decided as keys are emitted, in
//! merged order, by the [`GcDecider`] and [`GrandparentCutter`] the
//! reference executor uses, so the decisions are the reference's.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use shale_format::comparator::compare_internal_keys;
use shale_format::internal_key::ParsedInternalKey;
use shale_format::{Error, Result};

use super::{code, MAX_RUNS};
use crate::boundaries::GrandparentCutter;
use crate::gc::GcDecider;
use crate::job::CompactionJob;

/// The shortest internal key: an empty user key and its 8-byte tag.
const MIN_KEY_BYTES: usize = 8;

/// Keys held: received and not yet emitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// How many.
    pub keys: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Held {
    fn add(&mut self, key: &[u8]) {
        self.keys += 1;
        self.bytes += key.len() as u64;
    }

    fn remove(&mut self, key: &[u8]) {
        self.keys = self.keys.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(key.len() as u64);
    }

    /// The larger of each count.
    pub fn max(self, other: Held) -> Held {
        Held {
            keys: self.keys.max(other.keys),
            bytes: self.bytes.max(other.bytes),
        }
    }
}

/// One run's keys as the merge sees them.
#[derive(Debug, Default)]
struct RunKeys {
    /// Received, after the run's head (which waits in the heap).
    queue: VecDeque<Vec<u8>>,
    /// Whether the run has a key in the heap.
    has_head: bool,
    /// Whether the run said it has no more keys.
    ended: bool,
    /// The run's last key emitted (empty before the first): the next must
    /// sort after it.
    previous: Vec<u8>,
    /// Keys of the run emitted so far.
    emitted: u64,
}

impl RunKeys {
    /// Keys of the run held.
    fn held(&self) -> u64 {
        self.queue.len() as u64 + u64::from(self.has_head)
    }

    /// True when nothing can be emitted until the run sends more keys.
    fn starved(&self) -> bool {
        !self.has_head && !self.ended
    }
}

/// A run's next key in the merge; ordered so that the heap's top is the
/// smallest internal key (ties, which distinct entries never make, by run).
struct Head {
    key: Vec<u8>,
    run: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal_keys(&other.key, &self.key).then(other.run.cmp(&self.run))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

/// The merge of a job's runs, fed in chunks ([`OrderMerge::push`]) and
/// drained as far as it can go ([`OrderMerge::emit`]). Keys that are not
/// internal keys, a run out of order, or keys after a run's end are
/// errors: the keys come from another process.
pub struct OrderMerge<'job> {
    runs: Vec<RunKeys>,
    heads: BinaryHeap<Head>,
    /// Runs that are [`RunKeys::starved`]: while any is, nothing is emitted.
    starved: usize,
    /// Runs that have not ended.
    open: usize,
    cutter: GrandparentCutter<'job>,
    gc: GcDecider<'job>,
    held: Held,
    peak: Held,
}

impl std::fmt::Debug for OrderMerge<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderMerge")
            .field("runs", &self.runs.len())
            .field("starved", &self.starved)
            .field("open", &self.open)
            .field("held", &self.held)
            .field("peak", &self.peak)
            .finish_non_exhaustive()
    }
}

impl<'job> OrderMerge<'job> {
    /// A merge of `job`'s runs, none received yet.
    pub fn new(job: &'job CompactionJob) -> Result<OrderMerge<'job>> {
        let runs = job.inputs.len();
        if runs > MAX_RUNS {
            return Err(Error::InvalidArgument(format!(
                "keys-only: {runs} runs, more than a code can name ({MAX_RUNS})"
            )));
        }
        Ok(OrderMerge {
            runs: (0..runs).map(|_| RunKeys::default()).collect(),
            heads: BinaryHeap::with_capacity(runs),
            starved: runs,
            open: runs,
            cutter: GrandparentCutter::new(job),
            gc: GcDecider::new(job),
            held: Held::default(),
            peak: Held::default(),
        })
    }

    /// Runs of the job.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Keys of `run` held (received and not yet emitted); 0 for a run the
    /// job does not have.
    pub fn held_keys(&self, run: usize) -> u64 {
        self.runs.get(run).map_or(0, RunKeys::held)
    }

    /// Whether `run` said it has no more keys.
    pub fn has_ended(&self, run: usize) -> bool {
        self.runs.get(run).is_some_and(|r| r.ended)
    }

    /// Keys held now.
    pub fn held(&self) -> Held {
        self.held
    }

    /// The most keys (and, apart, bytes) held at once so far.
    pub fn peak(&self) -> Held {
        self.peak
    }

    /// True when every run ended and every key was emitted.
    pub fn is_done(&self) -> bool {
        self.open == 0 && self.heads.is_empty()
    }

    /// Takes the next `keys` of `run`, in the run's order; `last`: the run
    /// has no more.
    pub fn push(&mut self, run: usize, keys: Vec<Vec<u8>>, last: bool) -> Result<()> {
        let runs = self.runs.len();
        let state = self.runs.get_mut(run).ok_or_else(|| {
            Error::InvalidArgument(format!("keys-only: keys of run {run}, of {runs}"))
        })?;
        if state.ended {
            return Err(Error::InvalidArgument(format!(
                "keys-only: keys of run {run} after its last"
            )));
        }
        if let Some(bad) = keys.iter().find(|k| k.len() < MIN_KEY_BYTES) {
            return Err(Error::InvalidArgument(format!(
                "keys-only: a key of run {run} of {} bytes is not an internal key",
                bad.len()
            )));
        }
        let was_starved = state.starved();
        for key in keys {
            self.held.add(&key);
            state.queue.push_back(key);
        }
        state.ended |= last;
        self.peak = self.peak.max(self.held);
        if last {
            self.open -= 1;
        }
        if !state.has_head {
            self.promote(run)?;
        }
        if was_starved && !self.runs[run].starved() {
            self.starved -= 1;
        }
        Ok(())
    }

    /// Appends to `codes` the code of every key that can be placed with the
    /// keys held, in merged order.
    pub fn emit(&mut self, codes: &mut Vec<u32>) -> Result<()> {
        while self.starved == 0 {
            let Some(head) = self.heads.pop() else {
                break;
            };
            let parsed = ParsedInternalKey::parse(&head.key).map_err(|e| {
                Error::corruption(
                    0,
                    format!("keys-only: run {} sent a bad key: {e}", head.run),
                )
            })?;
            let cut = self.cutter.should_stop_before(&head.key);
            let keep = self.gc.keep(&parsed);
            codes.push(code(head.run, keep, cut));
            self.held.remove(&head.key);
            let state = &mut self.runs[head.run];
            state.emitted += 1;
            state.previous = head.key;
            state.has_head = false;
            self.promote(head.run)?;
            if self.runs[head.run].starved() {
                self.starved += 1;
            }
        }
        Ok(())
    }

    /// Moves the next key of `run`, if it holds one, into the heap, after
    /// checking that it sorts after the run's key before it.
    /// REQUIRES: the run has no head in the heap.
    fn promote(&mut self, run: usize) -> Result<()> {
        let state = &mut self.runs[run];
        let Some(key) = state.queue.pop_front() else {
            return Ok(());
        };
        if !state.previous.is_empty() && compare_internal_keys(&state.previous, &key).is_ge() {
            return Err(Error::corruption(
                0,
                format!(
                    "keys-only: run {run} is out of order at key {}",
                    state.emitted
                ),
            ));
        }
        state.has_head = true;
        self.heads.push(Head { key, run });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use proptest::prelude::*;
    use shale_format::internal_key::{InternalKey, ValueType};

    use super::*;
    use crate::job::{JobFile, UserKeyRange};
    use crate::remote::keys::decode;

    fn key(user: &[u8], sequence: u64, deletion: bool) -> Vec<u8> {
        let kind = if deletion {
            ValueType::Deletion
        } else {
            ValueType::Value
        };
        InternalKey::new(user, sequence, kind).into_encoded()
    }

    /// Runs whose files the merge never looks at: it is fed keys.
    fn empty_runs(count: usize) -> Vec<crate::job::InputRun> {
        let run = crate::job::InputRun {
            level: 0,
            files: Vec::new(),
        };
        vec![run; count]
    }

    /// The twin: every key at once, sorted, then decided in one pass.
    fn whole_order(job: &CompactionJob, runs: &[Vec<Vec<u8>>]) -> Vec<u32> {
        let mut all: Vec<(&[u8], usize)> = runs
            .iter()
            .enumerate()
            .flat_map(|(run, keys)| keys.iter().map(move |k| (k.as_slice(), run)))
            .collect();
        all.sort_by(|a, b| compare_internal_keys(a.0, b.0).then(a.1.cmp(&b.1)));
        let mut cutter = GrandparentCutter::new(job);
        let mut gc = GcDecider::new(job);
        all.iter()
            .map(|&(key, run)| {
                let cut = cutter.should_stop_before(key);
                let keep = gc.keep(&ParsedInternalKey::parse(key).unwrap());
                code(run, keep, cut)
            })
            .collect()
    }

    /// Runs of distinct keys over a small key space, so that runs overlap,
    /// overwrite and delete each other's keys.
    fn runs() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
        proptest::collection::vec(
            proptest::collection::btree_set((0u32..60, 1u64..50, any::<bool>()), 0..40),
            1..8,
        )
        .prop_map(|runs| {
            let mut sequence = 0;
            runs.into_iter()
                .map(|set| {
                    let mut keys: Vec<Vec<u8>> = set
                        .into_iter()
                        .map(|(user, _, deletion)| {
                            sequence += 1;
                            key(format!("k{user:03}").as_bytes(), sequence, deletion)
                        })
                        .collect();
                    keys.sort_by(|a, b| compare_internal_keys(a, b));
                    keys.dedup_by(|a, b| a[..a.len() - 8] == b[..b.len() - 8]);
                    keys
                })
                .collect()
        })
    }

    fn job_for(snapshot: u64, deeper: bool, cut: bool) -> CompactionJob {
        let user = |s: &str| s.as_bytes().to_vec();
        CompactionJob {
            smallest_snapshot: snapshot,
            deeper_levels: if deeper {
                vec![vec![UserKeyRange {
                    smallest: user("k010"),
                    largest: user("k030"),
                }]]
            } else {
                Vec::new()
            },
            grandparents: if cut {
                (0..6)
                    .map(|i| JobFile {
                        number: 100 + i,
                        file_size: 100,
                        smallest: key(format!("k{:03}", i * 10).as_bytes(), 1, false),
                        largest: key(format!("k{:03}", i * 10 + 5).as_bytes(), 1, false),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            max_grandparent_overlap_bytes: 150,
            ..crate::testing::job(Vec::new())
        }
    }

    proptest! {
        /// However the keys arrive (chunks of any size, runs in any
        /// interleaving), the codes are those of one merge of everything.
        #[test]
        fn chunked_arrival_gives_the_order_of_the_whole(
            runs in runs(),
            chunk in 1usize..7,
            turns in proptest::collection::vec(any::<prop::sample::Index>(), 0..400),
            snapshot in 0u64..300,
            deeper in any::<bool>(),
            cut in any::<bool>(),
        ) {
            let mut job = job_for(snapshot, deeper, cut);
            job.inputs = empty_runs(runs.len());
            let expected = whole_order(&job, &runs);
            let mut merge = OrderMerge::new(&job).unwrap();
            let mut sent = vec![0usize; runs.len()];
            let mut codes = Vec::new();
            let mut turn = turns.iter();
            while !merge.is_done() {
                // The next run to send: a random one, else the first that has
                // not ended.
                let open: Vec<usize> = (0..runs.len()).filter(|&r| !merge.has_ended(r)).collect();
                let run = turn.next().map_or(open[0], |i| open[i.index(open.len())]);
                let end = (sent[run] + chunk).min(runs[run].len());
                let keys = runs[run][sent[run]..end].to_vec();
                merge.push(run, keys, end == runs[run].len()).unwrap();
                sent[run] = end;
                merge.emit(&mut codes).unwrap();
                // Nothing is emitted past a run that may still send a
                // smaller key.
                for (r, keys) in runs.iter().enumerate() {
                    let emitted = codes.iter().filter(|&&c| decode(c).0 == r).count();
                    prop_assert!(emitted <= sent[r].min(keys.len()));
                }
            }
            prop_assert_eq!(codes, expected);
            prop_assert_eq!(merge.held(), Held::default());
        }
    }

    #[test]
    fn nothing_is_emitted_while_a_run_may_send_a_smaller_key() {
        let job = CompactionJob {
            inputs: empty_runs(2),
            ..crate::testing::job(Vec::new())
        };
        let mut merge = OrderMerge::new(&job).unwrap();
        let mut codes = Vec::new();
        merge.push(0, vec![key(b"b", 2, false)], false).unwrap();
        merge.emit(&mut codes).unwrap();
        assert!(codes.is_empty(), "run 1 has sent nothing yet");
        merge.push(1, vec![key(b"a", 1, false)], false).unwrap();
        merge.emit(&mut codes).unwrap();
        assert_eq!(
            codes,
            vec![code(1, true, false)],
            "b waits for run 1's next"
        );
        assert_eq!(merge.held(), Held { keys: 1, bytes: 9 });
        merge.push(1, Vec::new(), true).unwrap();
        merge.emit(&mut codes).unwrap();
        assert_eq!(codes, vec![code(1, true, false), code(0, true, false)]);
        assert!(!merge.is_done(), "run 0 has not ended");
        merge.push(0, Vec::new(), true).unwrap();
        merge.emit(&mut codes).unwrap();
        assert!(merge.is_done());
        assert_eq!(merge.peak(), Held { keys: 2, bytes: 18 });
    }

    #[test]
    fn bad_keys_and_runs_are_errors() {
        let job = CompactionJob {
            inputs: empty_runs(1),
            ..crate::testing::job(Vec::new())
        };
        let mut merge = OrderMerge::new(&job).unwrap();
        let err = merge.push(1, Vec::new(), true).unwrap_err().to_string();
        assert!(err.contains("run 1, of 1"), "{err}");
        let err = merge.push(0, vec![b"short".to_vec()], false).unwrap_err();
        assert!(err.to_string().contains("not an internal key"), "{err}");
        merge
            .push(0, vec![key(b"b", 1, false), key(b"a", 1, false)], false)
            .unwrap();
        let err = merge.emit(&mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("out of order"), "{err}");
        let mut ended = OrderMerge::new(&job).unwrap();
        ended.push(0, Vec::new(), true).unwrap();
        let err = ended.push(0, Vec::new(), false).unwrap_err().to_string();
        assert!(err.contains("after its last"), "{err}");
    }
}
