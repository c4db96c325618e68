//! One stress thread: random operations, each read checked against the
//! expected state under the locks of the keys it reads, each write recorded
//! there (pending, then committed) under the locks of the keys it writes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use shale::{ReadOptions, Snapshot, WriteBatch, WriteOptions, DB};

use super::expected_state::{Expected, ExpectedState};
use super::values::{self, mix};
use super::verify::{matches, mismatch};
use super::StressError;

/// Operation counters, summed over the threads.
#[derive(Debug, Default)]
pub struct Counters {
    pub puts: AtomicU64,
    pub deletes: AtomicU64,
    pub batches: AtomicU64,
    pub batch_writes: AtomicU64,
    pub gets: AtomicU64,
    pub iterators: AtomicU64,
    pub iterator_entries: AtomicU64,
    pub snapshots: AtomicU64,
    pub snapshot_reads: AtomicU64,
    pub compact_ranges: AtomicU64,
    /// Values compared with the expected state (gets, iterator positions,
    /// reads at snapshots).
    pub reads_verified: AtomicU64,
}

impl Counters {
    /// Operations of every kind.
    pub fn ops(&self) -> u64 {
        [
            &self.puts,
            &self.deletes,
            &self.batches,
            &self.gets,
            &self.iterators,
            &self.snapshots,
            &self.compact_ranges,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// What every thread shares.
#[derive(Debug)]
pub struct Shared<'a> {
    pub db: &'a DB,
    pub expected: &'a ExpectedState,
    pub sync: bool,
    /// One write in this many is synced, the others not, and an
    /// acknowledged write stays pending in the expected-state file until
    /// a synced write covers it (0: every write as `sync` says).
    pub sync_one_in: u64,
    /// One in this many operations is a `compact_range` (0: none).
    pub compact_range_one_in: u64,
    pub deadline: Option<Instant>,
    /// Operations left to start in this phase (`u64::MAX`: no limit).
    pub ops_left: AtomicU64,
    pub stop: AtomicBool,
    /// The first failure; every thread stops when it is set.
    pub failure: Mutex<Option<StressError>>,
    pub counters: Counters,
}

impl Shared<'_> {
    fn fail(&self, error: StressError) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert(error);
        self.stop.store(true, Ordering::Relaxed);
    }

    fn take_op(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        self.ops_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// Most keys one batch writes.
const MAX_BATCH_KEYS: u64 = 6;
/// Most keys an iterator's bounds span.
const MAX_ITERATOR_SPAN: u64 = 100;
/// Most keys a snapshot check covers.
const MAX_SNAPSHOT_SPAN: u64 = 16;
/// Snapshots a thread keeps alive before checking the oldest: they outlive
/// other threads' writes, flushes and compactions.
const SNAPSHOTS_HELD: usize = 4;

/// A snapshot and what the keys it covers held when it was taken.
struct HeldSnapshot {
    snapshot: Snapshot,
    first: u32,
    values: Vec<Expected>,
}

/// One thread's state.
pub struct Worker<'s, 'a> {
    shared: &'s Shared<'a>,
    random: u64,
    snapshots: VecDeque<HeldSnapshot>,
    /// With `sync_one_in`: this thread's thread number (from 1), and the
    /// keys of its acknowledged writes that no sync covers yet.
    id: u32,
    unsynced: Vec<u32>,
}

impl<'s, 'a> Worker<'s, 'a> {
    pub fn new(shared: &'s Shared<'a>, seed: u64, thread: u64) -> Worker<'s, 'a> {
        Worker {
            shared,
            random: mix(seed ^ mix(thread + 1)),
            snapshots: VecDeque::new(),
            id: thread as u32 + 1,
            unsynced: Vec::new(),
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.random = mix(self.random);
        self.random % n.max(1)
    }

    /// Runs operations until the phase ends or a thread fails.
    pub fn run(mut self) {
        while self.shared.take_op() {
            if let Err(error) = self.one_op() {
                self.shared.fail(error);
                return;
            }
        }
        while let Some(held) = self.snapshots.pop_front() {
            if let Err(error) = self.check_snapshot(held) {
                self.shared.fail(error);
                return;
            }
        }
    }

    fn one_op(&mut self) -> Result<(), StressError> {
        let one_in = self.shared.compact_range_one_in;
        if one_in > 0 && self.below(one_in) == 0 {
            return self.compact_range();
        }
        match self.below(100) {
            0..30 => self.get(),
            30..55 => self.put_or_delete(true),
            55..63 => self.put_or_delete(false),
            63..75 => self.batch(),
            75..88 => self.iterate(),
            _ => self.snapshot(),
        }
    }

    fn random_key(&mut self) -> u32 {
        self.below(u64::from(self.shared.expected.max_key())) as u32
    }

    /// A random range `first..first + len` of at most `span` keys.
    fn random_range(&mut self, span: u64) -> (u32, u32) {
        let max_key = self.shared.expected.max_key();
        let first = self.random_key();
        let len = 1 + self.below(span.min(u64::from(max_key - first))) as u32;
        (first, len)
    }

    /// Locks `first..first + len`, in ascending order.
    fn lock_range(&self, first: u32, len: u32) -> Vec<MutexGuard<'a, ()>> {
        let expected: &'a ExpectedState = self.shared.expected;
        (first..first + len).map(|i| expected.lock(i)).collect()
    }

    /// The options of the next write: synced with `sync`, or one in
    /// `sync_one_in`.
    fn write_options(&mut self) -> WriteOptions {
        let one_in = self.shared.sync_one_in;
        WriteOptions {
            sync: self.shared.sync || (one_in > 0 && self.below(one_in) == 0),
        }
    }

    /// With `sync_one_in`, before writing `keys` (locked): a key whose
    /// last write is acknowledged but not yet synced is made durable
    /// first, by a synced empty write (a sync covers every write
    /// acknowledged before it), so that a key never has more than the
    /// durable value and one pending value.
    fn make_durable(&mut self, keys: &[u32]) -> Result<(), StressError> {
        let expected = self.shared.expected;
        if !keys
            .iter()
            .any(|&index| expected.unsynced_owner(index) != 0)
        {
            return Ok(());
        }
        self.shared
            .db
            .write(&WriteOptions { sync: true }, WriteBatch::new())?;
        for &index in keys {
            expected.commit_durable(index, None)?;
        }
        Ok(())
    }

    /// Records the acknowledged write of locked key `index`: committed, or
    /// with `sync_one_in` and not synced, committed here but left pending
    /// in the file.
    fn commit(&mut self, index: u32, synced: bool) -> Result<(), StressError> {
        let expected = self.shared.expected;
        if self.shared.sync_one_in == 0 || synced {
            return expected.commit(index);
        }
        expected.commit_unsynced(index, self.id);
        self.unsynced.push(index);
        Ok(())
    }

    /// After a synced write of this thread is acknowledged: its earlier
    /// writes are durable; those still its own are committed in the file.
    fn synced(&mut self) -> Result<(), StressError> {
        let expected = self.shared.expected;
        for index in std::mem::take(&mut self.unsynced) {
            let _lock = expected.lock(index);
            expected.commit_durable(index, Some(self.id))?;
        }
        Ok(())
    }

    fn get(&mut self) -> Result<(), StressError> {
        let index = self.random_key();
        let expected = self.shared.expected;
        let _lock = expected.lock(index);
        let found = self
            .shared
            .db
            .get(&ReadOptions::new(), &values::key(index))?;
        let committed = expected.slot(index).committed;
        if !matches(index, committed, found.as_deref(), expected.sizes()) {
            return Err(mismatch(index, &[committed], found.as_deref(), "get"));
        }
        bump(&self.shared.counters.gets, 1);
        bump(&self.shared.counters.reads_verified, 1);
        Ok(())
    }

    fn put_or_delete(&mut self, put: bool) -> Result<(), StressError> {
        let index = self.random_key();
        let expected = self.shared.expected;
        let lock = expected.lock(index);
        self.make_durable(&[index])?;
        let next = expected.next(index, put)?;
        expected.mark_pending(index, next)?;
        let key = values::key(index);
        let options = self.write_options();
        if put {
            let value = values::value(index, next.generation, expected.sizes());
            self.shared.db.put(&options, &key, &value)?;
            bump(&self.shared.counters.puts, 1);
        } else {
            self.shared.db.delete(&options, &key)?;
            bump(&self.shared.counters.deletes, 1);
        }
        self.commit(index, options.sync)?;
        drop(lock);
        if options.sync {
            self.synced()?;
        }
        Ok(())
    }

    /// Puts and deletes of several distinct keys in one atomic batch.
    fn batch(&mut self) -> Result<(), StressError> {
        let count = 2 + self.below(MAX_BATCH_KEYS - 1);
        let mut keys: Vec<u32> = (0..count).map(|_| self.random_key()).collect();
        keys.sort_unstable();
        keys.dedup();
        let expected = self.shared.expected;
        let locks: Vec<_> = keys.iter().map(|&i| expected.lock(i)).collect();
        self.make_durable(&keys)?;
        let mut batch = WriteBatch::new();
        for &index in &keys {
            let put = self.below(4) != 0;
            let next = expected.next(index, put)?;
            expected.mark_pending(index, next)?;
            let key = values::key(index);
            if put {
                batch.put(
                    &key,
                    &values::value(index, next.generation, expected.sizes()),
                )?;
            } else {
                batch.delete(&key)?;
            }
        }
        let options = self.write_options();
        self.shared.db.write(&options, batch)?;
        for &index in &keys {
            self.commit(index, options.sync)?;
        }
        drop(locks);
        if options.sync {
            self.synced()?;
        }
        bump(&self.shared.counters.batches, 1);
        bump(&self.shared.counters.batch_writes, keys.len() as u64);
        Ok(())
    }

    /// An iterator bounded to a locked range, forward, backward or from a
    /// seek in the middle: it must return exactly the live keys, in order,
    /// with their values.
    fn iterate(&mut self) -> Result<(), StressError> {
        let (first, len) = self.random_range(MAX_ITERATOR_SPAN);
        let _locks = self.lock_range(first, len);
        let expected: Vec<Expected> = (first..first + len)
            .map(|i| self.shared.expected.slot(i).committed)
            .collect();
        let entries = self.check_range(None, first, &expected, "iterator")?;
        bump(&self.shared.counters.iterators, 1);
        bump(&self.shared.counters.iterator_entries, entries);
        Ok(())
    }

    /// Takes a snapshot of a locked range and keeps it; checks the oldest
    /// held snapshot once enough are held.
    fn snapshot(&mut self) -> Result<(), StressError> {
        let (first, len) = self.random_range(MAX_SNAPSHOT_SPAN);
        let held = {
            let _locks = self.lock_range(first, len);
            HeldSnapshot {
                snapshot: self.shared.db.snapshot(),
                first,
                values: (first..first + len)
                    .map(|i| self.shared.expected.slot(i).committed)
                    .collect(),
            }
        };
        self.snapshots.push_back(held);
        bump(&self.shared.counters.snapshots, 1);
        if self.snapshots.len() > SNAPSHOTS_HELD {
            if let Some(oldest) = self.snapshots.pop_front() {
                self.check_snapshot(oldest)?;
            }
        }
        Ok(())
    }

    /// Gets and an iterator at the snapshot must see what the keys held
    /// when it was taken, whatever was written since.
    fn check_snapshot(&mut self, held: HeldSnapshot) -> Result<(), StressError> {
        let read = ReadOptions {
            snapshot: Some(held.snapshot.clone()),
            ..ReadOptions::new()
        };
        let sizes = self.shared.expected.sizes();
        for (index, &then) in (held.first..).zip(&held.values) {
            let found = self.shared.db.get(&read, &values::key(index))?;
            if !matches(index, then, found.as_deref(), sizes) {
                return Err(mismatch(
                    index,
                    &[then],
                    found.as_deref(),
                    "get at a snapshot",
                ));
            }
        }
        let keys = held.values.len() as u64;
        self.check_range(
            Some(held.snapshot),
            held.first,
            &held.values,
            "iterator at a snapshot",
        )?;
        bump(&self.shared.counters.snapshot_reads, keys);
        bump(&self.shared.counters.reads_verified, keys);
        Ok(())
    }

    /// Iterates `first..first + expected.len()` (bounds set to exactly that
    /// range) at `snapshot` or now, in a random direction, and compares
    /// every position with `expected`. Returns the entries seen.
    fn check_range(
        &mut self,
        snapshot: Option<Snapshot>,
        first: u32,
        expected: &[Expected],
        during: &str,
    ) -> Result<u64, StressError> {
        let end = first + expected.len() as u32;
        let read = ReadOptions {
            snapshot,
            lower_bound: Some(values::key(first)),
            upper_bound: Some(values::key(end)),
            ..ReadOptions::new()
        };
        let sizes = self.shared.expected.sizes();
        let mut iter = self.shared.db.iter(&read)?;
        let direction = self.below(3);
        // The live keys the iterator must return, in the order it returns
        // them.
        let mut want: Vec<u32> = (first..end)
            .filter(|&i| expected[(i - first) as usize].exists)
            .collect();
        match direction {
            0 => iter.seek_to_first(),
            1 => {
                iter.seek_to_last();
                want.reverse();
            }
            _ => {
                let from = first + self.below(u64::from(end - first)) as u32;
                iter.seek(&values::key(from));
                want.retain(|&i| i >= from);
            }
        }
        let mut seen = 0u64;
        for &index in &want {
            if !iter.valid() {
                iter.status()?;
                let then = expected[(index - first) as usize];
                return Err(mismatch(index, &[then], None, during));
            }
            let found_index = values::key_index(iter.key());
            if found_index != Some(index) {
                let shown = found_index.filter(|i| (first..end).contains(i));
                // Past the wanted key: the wanted key is missing. Before
                // it: the key shown should not be there.
                let skipped =
                    shown.is_some_and(|i| if direction == 1 { i < index } else { i > index });
                return Err(match shown {
                    _ if skipped => {
                        mismatch(index, &[expected[(index - first) as usize]], None, during)
                    }
                    Some(other) => mismatch(
                        other,
                        &[expected[(other - first) as usize]],
                        Some(iter.value()),
                        during,
                    ),
                    None => StressError::UnexpectedKey {
                        key: format!(
                            "{} from {during} bounded to {}..{} ({}), wanting {}",
                            String::from_utf8_lossy(iter.key()),
                            first,
                            end,
                            ["forward", "backward", "after a seek"][direction as usize],
                            values::describe_key(index)
                        ),
                    },
                });
            }
            let then = expected[(index - first) as usize];
            if !matches(index, then, Some(iter.value()), sizes) {
                return Err(mismatch(index, &[then], Some(iter.value()), during));
            }
            seen += 1;
            if direction == 1 {
                iter.prev();
            } else {
                iter.next();
            }
        }
        if iter.valid() {
            return Err(match values::key_index(iter.key()) {
                Some(extra) if (first..end).contains(&extra) => mismatch(
                    extra,
                    &[expected[(extra - first) as usize]],
                    Some(iter.value()),
                    during,
                ),
                _ => StressError::UnexpectedKey {
                    key: format!(
                        "{} from {during} bounded to {}..{} ({}), after the last key",
                        String::from_utf8_lossy(iter.key()),
                        first,
                        end,
                        ["forward", "backward", "after a seek"][direction as usize],
                    ),
                },
            });
        }
        iter.status()?;
        bump(&self.shared.counters.reads_verified, seen);
        Ok(seen)
    }

    fn compact_range(&mut self) -> Result<(), StressError> {
        let (first, len) = self.random_range(u64::from(self.shared.expected.max_key()) / 4 + 1);
        let begin = values::key(first);
        let end = values::key(first + len - 1);
        self.shared.db.compact_range(Some(&begin), Some(&end))?;
        bump(&self.shared.counters.compact_ranges, 1);
        Ok(())
    }
}
