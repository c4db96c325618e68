//! The memtable: recent writes, sorted by internal key, in an insert-only
//! arena skip list (LevelDB's `db/memtable.cc`; the list is
//! [`crate::skiplist`]).
//!
//! Any number of writers add at once, each through an [`Inserter`] of its
//! own (the write path lets the writers of a group insert their batches in
//! parallel); any number of readers look up keys and iterate concurrently
//! with them. Entries are never removed: a memtable is dropped as
//! a whole once it is flushed.
//!
//! Each entry is one arena allocation holding the node's links, the internal
//! key and the value.

use std::cmp::Ordering;
use std::sync::Arc;

use shale_format::comparator::KeyOrder;
use shale_format::error::Error;
use shale_format::internal_key::{
    append_internal_key, pack_sequence_and_type, ParsedInternalKey, SequenceNumber, ValueType,
    INTERNAL_KEY_TRAILER_LEN,
};
use shale_format::iterator::KvIterator;

use crate::skiplist::{self, Position, SkipList};

/// Internal keys up to this length are built on the stack for lookups.
pub(crate) const STACK_KEY_LEN: usize = 128;

/// What [`MemTable::get`] found for a user key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemGet {
    /// The newest visible entry is a value.
    Value(Vec<u8>),
    /// The newest visible entry is a tombstone: the key is deleted, and
    /// older layers must not be consulted.
    Deleted,
}

/// Recent writes, sorted by internal key. `Send + Sync`; see the module docs
/// for the concurrency rules.
pub struct MemTable {
    list: SkipList,
    order: KeyOrder,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("entries", &self.len())
            .field("memory_usage", &self.approximate_memory_usage())
            .finish()
    }
}

impl Default for MemTable {
    fn default() -> Self {
        MemTable::new()
    }
}

impl MemTable {
    /// An empty memtable of bytewise-ordered keys.
    pub fn new() -> MemTable {
        MemTable::with_order(KeyOrder::bytewise())
    }

    /// An empty memtable whose user keys are ordered by `order`.
    pub fn with_order(order: KeyOrder) -> MemTable {
        MemTable {
            list: SkipList::new(skiplist::EntryOrder::Internal(order.clone())),
            order,
        }
    }

    /// Adds an entry: a value, or a tombstone (whose `value` is normally
    /// empty). REQUIRES: no entry with the same user key and sequence exists
    /// (sequences are unique per write).
    pub fn add(
        &self,
        sequence: SequenceNumber,
        value_type: ValueType,
        user_key: &[u8],
        value: &[u8],
    ) {
        self.inserter().add(sequence, value_type, user_key, value);
    }

    /// An inserter for a batch of [`Inserter::add`]s, which may run at the
    /// same time as other inserters.
    pub fn inserter(&self) -> Inserter<'_> {
        Inserter(self.list.inserter())
    }

    /// The newest entry for `user_key` with a sequence at or below
    /// `snapshot`: `Some(MemGet::Value)`, `Some(MemGet::Deleted)`, or `None`
    /// when the memtable holds no such entry.
    pub fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<MemGet> {
        let mut stack = [0u8; STACK_KEY_LEN];
        let mut heap = Vec::new();
        let lookup = lookup_key(user_key, snapshot, &mut stack, &mut heap);
        let at = self.list.seek(lookup)?;
        // Keys in the list were encoded by `add`, so they always parse.
        let parsed = ParsedInternalKey::parse(self.list.key(at)).ok()?;
        if self.order.compare_user(parsed.user_key, user_key).is_ne() {
            return None;
        }
        match parsed.value_type {
            ValueType::Value => Some(MemGet::Value(self.list.value(at).to_vec())),
            ValueType::Deletion => Some(MemGet::Deleted),
        }
    }

    /// Bytes used by keys, values and per-entry bookkeeping, counted as
    /// entries are added. Decides when the memtable is full.
    pub fn approximate_memory_usage(&self) -> usize {
        self.list.entry_bytes()
    }

    /// Number of entries (versions, not distinct user keys).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when nothing has been added.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// A cursor over internal keys and their values. It holds the memtable
    /// alive, and sees entries added after it was created when it moves onto
    /// them.
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            current: None,
            table: Arc::clone(self),
        }
    }

    /// A cursor over the entries the memtable holds when it is made, for a
    /// memtable no longer written (a flush). It finds them all at once,
    /// walking many stretches of the list side by side
    /// ([`SkipList::positions`]), and fetches each entry ahead of its use:
    /// a walk of [`MemTable::iter`] waits for a cache miss at about every
    /// entry.
    pub fn frozen_iter(self: &Arc<Self>) -> FrozenMemTableIter {
        let positions = self.list.positions();
        FrozenMemTableIter {
            index: positions.len(),
            positions,
            table: Arc::clone(self),
        }
    }
}

/// Adds the entries of one batch to a [`MemTable`], alongside other
/// inserters.
#[derive(Debug)]
pub struct Inserter<'a>(skiplist::Inserter<'a>);

impl Inserter<'_> {
    /// As [`MemTable::add`].
    pub fn add(
        &mut self,
        sequence: SequenceNumber,
        value_type: ValueType,
        user_key: &[u8],
        value: &[u8],
    ) {
        let key_len = user_key.len() + INTERNAL_KEY_TRAILER_LEN;
        // The trailer is a little-endian fixed64, as `append_internal_key`
        // writes it.
        let trailer = pack_sequence_and_type(sequence, value_type).to_le_bytes();
        self.0.insert(key_len, value.len(), |entry| {
            let (key, rest) = entry.split_at_mut(key_len);
            key[..user_key.len()].copy_from_slice(user_key);
            key[user_key.len()..].copy_from_slice(&trailer);
            rest.copy_from_slice(value);
        });
    }
}

/// Encodes the internal key `(user_key, snapshot, VALUE_FOR_SEEK)` in
/// `stack` when it fits, else in `heap`.
pub(crate) fn lookup_key<'a>(
    user_key: &[u8],
    snapshot: SequenceNumber,
    stack: &'a mut [u8; STACK_KEY_LEN],
    heap: &'a mut Vec<u8>,
) -> &'a [u8] {
    let len = user_key.len() + INTERNAL_KEY_TRAILER_LEN;
    if len <= STACK_KEY_LEN {
        // The trailer is a little-endian fixed64, as `append_internal_key`
        // writes it.
        let trailer = pack_sequence_and_type(snapshot, ValueType::VALUE_FOR_SEEK).to_le_bytes();
        stack[..user_key.len()].copy_from_slice(user_key);
        stack[user_key.len()..len].copy_from_slice(&trailer);
        &stack[..len]
    } else {
        append_internal_key(heap, user_key, snapshot, ValueType::VALUE_FOR_SEEK);
        heap
    }
}

/// A [`KvIterator`] over a memtable's internal keys and values. Holds the
/// memtable alive; `Send`.
pub struct MemTableIter {
    /// The current entry, a node of `table`'s list (valid while `table` is).
    current: Option<Position>,
    table: Arc<MemTable>,
}

impl std::fmt::Debug for MemTableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTableIter")
            .field("valid", &self.valid())
            .field("table", &self.table)
            .finish()
    }
}

impl KvIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.current = self.table.list.first();
    }

    fn seek_to_last(&mut self) {
        self.current = self.table.list.last();
    }

    fn seek(&mut self, target: &[u8]) {
        self.current = self.table.list.seek(target);
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid MemTableIter");
        self.current = self.current.and_then(|at| self.table.list.next(at));
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid MemTableIter");
        self.current = self.current.and_then(|at| self.table.list.prev(at));
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |at| self.table.list.key(at))
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |at| self.table.list.value(at))
    }

    fn status(&self) -> Result<(), Error> {
        Ok(())
    }
}

/// How many entries ahead [`FrozenMemTableIter`] fetches.
const FETCH_AHEAD: usize = 16;

/// A [`KvIterator`] over the entries a memtable held when the cursor was
/// made ([`MemTable::frozen_iter`]). Holds the memtable alive; `Send`.
pub struct FrozenMemTableIter {
    /// The entries in order, nodes of `table`'s list (valid while `table`
    /// is).
    positions: Vec<Position>,
    /// The current entry; `positions.len()` when the cursor is invalid.
    index: usize,
    table: Arc<MemTable>,
}

impl std::fmt::Debug for FrozenMemTableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrozenMemTableIter")
            .field("entries", &self.positions.len())
            .field("valid", &self.valid())
            .finish()
    }
}

impl FrozenMemTableIter {
    /// Moves to entry `index` (invalid past the end) and fetches the one
    /// [`FETCH_AHEAD`] entries on.
    fn go_to(&mut self, index: usize) {
        self.index = index.min(self.positions.len());
        if let Some(&ahead) = self.positions.get(index + FETCH_AHEAD) {
            self.table.list.prefetch_entry(ahead);
        }
    }
}

impl KvIterator for FrozenMemTableIter {
    fn valid(&self) -> bool {
        self.index < self.positions.len()
    }

    fn seek_to_first(&mut self) {
        for &ahead in self.positions.iter().take(FETCH_AHEAD) {
            self.table.list.prefetch_entry(ahead);
        }
        self.go_to(0);
    }

    fn seek_to_last(&mut self) {
        self.index = self.positions.len().saturating_sub(1);
    }

    fn seek(&mut self, target: &[u8]) {
        let (list, order) = (&self.table.list, &self.table.order);
        let index = self
            .positions
            .partition_point(|&at| order.compare_internal(list.key(at), target) == Ordering::Less);
        self.go_to(index);
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid FrozenMemTableIter");
        self.go_to(self.index + 1);
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid FrozenMemTableIter");
        self.index = self.index.checked_sub(1).unwrap_or(self.positions.len());
    }

    fn key(&self) -> &[u8] {
        self.positions
            .get(self.index)
            .map_or(&[], |&at| self.table.list.key(at))
    }

    fn value(&self) -> &[u8] {
        self.positions
            .get(self.index)
            .map_or(&[], |&at| self.table.list.value(at))
    }

    fn status(&self) -> Result<(), Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use shale_format::comparator::compare_internal_keys;
    use shale_format::internal_key::{InternalKey, MAX_SEQUENCE_NUMBER};
    use shale_format::iterator::collect_all;
    use std::cmp::Ordering;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering as AtomicOrdering;

    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}

    #[test]
    fn memtable_is_send_and_sync_and_its_iterator_is_send() {
        assert_send_sync::<MemTable>();
        assert_send::<MemTableIter>();
    }

    #[test]
    fn get_sees_the_newest_entry_at_the_snapshot() {
        let table = MemTable::new();
        assert!(table.is_empty());
        table.add(1, ValueType::Value, b"a", b"a1");
        table.add(2, ValueType::Value, b"ab", b"ab2");
        table.add(3, ValueType::Deletion, b"a", b"");
        table.add(4, ValueType::Value, b"a", b"a4");
        assert_eq!(table.len(), 4);

        assert_eq!(table.get(b"a", 0), None);
        assert_eq!(table.get(b"a", 1), Some(MemGet::Value(b"a1".to_vec())));
        assert_eq!(table.get(b"a", 2), Some(MemGet::Value(b"a1".to_vec())));
        assert_eq!(table.get(b"a", 3), Some(MemGet::Deleted));
        assert_eq!(table.get(b"a", 4), Some(MemGet::Value(b"a4".to_vec())));
        assert_eq!(
            table.get(b"a", MAX_SEQUENCE_NUMBER),
            Some(MemGet::Value(b"a4".to_vec()))
        );
        assert_eq!(table.get(b"ab", 1), None);
        assert_eq!(table.get(b"ab", 2), Some(MemGet::Value(b"ab2".to_vec())));
        assert_eq!(table.get(b"", 9), None);
        assert_eq!(table.get(b"b", 9), None);
    }

    #[test]
    fn long_keys_are_looked_up_too() {
        let table = MemTable::new();
        let long = vec![7u8; 1000];
        table.add(5, ValueType::Value, &long, b"v");
        assert_eq!(table.get(&long, 5), Some(MemGet::Value(b"v".to_vec())));
        assert_eq!(table.get(&long, 4), None);
        assert_eq!(table.get(&long[..999], 5), None);
    }

    #[test]
    fn memory_usage_counts_keys_and_values() {
        let table = MemTable::new();
        assert_eq!(table.approximate_memory_usage(), 0);
        table.add(1, ValueType::Value, b"key", &[0u8; 1000]);
        let one = table.approximate_memory_usage();
        assert!(one >= 1000 + 3 + 8);
        table.add(2, ValueType::Value, b"key", &[0u8; 1000]);
        assert!(table.approximate_memory_usage() >= 2 * (1000 + 3 + 8));
    }

    #[test]
    fn frozen_iterator_agrees_with_the_live_one() {
        let table = Arc::new(MemTable::new());
        let mut rng = 11u64;
        for sequence in 1..=3_000u64 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("{:05}", (rng >> 33) % 2_000);
            let kind = if rng & 7 == 0 {
                ValueType::Deletion
            } else {
                ValueType::Value
            };
            table.add(sequence, kind, key.as_bytes(), &sequence.to_le_bytes());
        }
        let mut frozen = table.frozen_iter();
        assert!(!frozen.valid());
        let all = collect_all(&mut frozen).unwrap();
        assert_eq!(all, collect_all(&mut table.iter()).unwrap());
        assert_eq!(all.len(), 3_000);

        // Seeks land where the live cursor's do, and both ways walk alike.
        let mut live = table.iter();
        for target in ["", "00000", "00999", "01000", "01999", "02000", "9"] {
            for snapshot in [0, 1_500, MAX_SEQUENCE_NUMBER] {
                let key = InternalKey::new(target.as_bytes(), snapshot, ValueType::VALUE_FOR_SEEK);
                frozen.seek(key.encoded());
                live.seek(key.encoded());
                assert_eq!(frozen.valid(), live.valid(), "{target}@{snapshot}");
                if live.valid() {
                    assert_eq!(frozen.key(), live.key());
                    assert_eq!(frozen.value(), live.value());
                    frozen.prev();
                    live.prev();
                    assert_eq!(frozen.valid(), live.valid());
                    if live.valid() {
                        assert_eq!(frozen.key(), live.key());
                    }
                }
            }
        }
        frozen.seek_to_last();
        assert_eq!(frozen.key(), all[all.len() - 1].0.as_slice());
        frozen.next();
        assert!(!frozen.valid());

        // It holds what the memtable held when it was made.
        table.add(5_000, ValueType::Value, b"00500", b"late");
        let mut earlier = frozen;
        assert_eq!(collect_all(&mut earlier).unwrap(), all);
        assert_eq!(collect_all(&mut table.frozen_iter()).unwrap().len(), 3_001);
    }

    #[test]
    fn iterator_walks_both_ways_and_seeks() {
        let table = Arc::new(MemTable::new());
        table.add(1, ValueType::Value, b"b", b"b1");
        table.add(2, ValueType::Value, b"a", b"a2");
        table.add(3, ValueType::Value, b"b", b"b3");
        table.add(4, ValueType::Deletion, b"c", b"");
        let mut iter = table.iter();
        assert!(!iter.valid());
        let keys: Vec<InternalKey> = collect_all(&mut iter)
            .unwrap()
            .into_iter()
            .map(|(k, _)| InternalKey::from_encoded(k))
            .collect();
        assert_eq!(
            keys,
            vec![
                InternalKey::new(b"a", 2, ValueType::Value),
                InternalKey::new(b"b", 3, ValueType::Value),
                InternalKey::new(b"b", 1, ValueType::Value),
                InternalKey::new(b"c", 4, ValueType::Deletion),
            ]
        );
        iter.seek(InternalKey::new(b"b", 2, ValueType::VALUE_FOR_SEEK).encoded());
        assert_eq!(iter.value(), b"b1");
        iter.prev();
        assert_eq!(iter.value(), b"b3");
        iter.prev();
        assert_eq!(iter.value(), b"a2");
        iter.prev();
        assert!(!iter.valid());
        iter.seek_to_last();
        assert_eq!(
            iter.key(),
            InternalKey::new(b"c", 4, ValueType::Deletion).encoded()
        );
        iter.next();
        assert!(!iter.valid());
        iter.seek(InternalKey::new(b"d", 9, ValueType::Value).encoded());
        assert!(!iter.valid());
        assert!(iter.status().is_ok());
    }

    #[test]
    fn iterator_keeps_the_memtable_alive() {
        let table = Arc::new(MemTable::new());
        table.add(1, ValueType::Value, b"k", b"v");
        let mut iter = table.iter();
        iter.seek_to_first();
        drop(table);
        assert_eq!(iter.value(), b"v");
        let moved = std::thread::spawn(move || {
            iter.next();
            iter.valid()
        });
        assert!(!moved.join().unwrap());
    }

    #[test]
    fn readers_run_while_a_writer_adds() {
        const ENTRIES: u64 = 20_000;
        let table = Arc::new(MemTable::new());
        let published = Arc::new(AtomicU64::new(0));
        let key = |i: u64| format!("key{:08}", (i * 7919) % ENTRIES).into_bytes();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..ENTRIES {
                    let k = key(i);
                    table.add(i + 1, ValueType::Value, &k, &k);
                    published.store(i + 1, AtomicOrdering::Release);
                }
            });
            for reader in 0..2u64 {
                let table = Arc::clone(&table);
                let published = Arc::clone(&published);
                scope.spawn(move || loop {
                    let done = published.load(AtomicOrdering::Acquire);
                    // Every published key is found with its value.
                    for i in (reader..done).step_by(97) {
                        let k = key(i);
                        assert_eq!(table.get(&k, MAX_SEQUENCE_NUMBER), Some(MemGet::Value(k)));
                    }
                    // A scan is sorted and sees at least what was published.
                    let mut iter = table.iter();
                    let mut count = 0u64;
                    let mut last: Option<Vec<u8>> = None;
                    iter.seek_to_first();
                    while iter.valid() {
                        if let Some(last) = &last {
                            assert_eq!(compare_internal_keys(last, iter.key()), Ordering::Less);
                        }
                        last = Some(iter.key().to_vec());
                        count += 1;
                        iter.next();
                    }
                    assert!(count >= done);
                    if done == ENTRIES {
                        break;
                    }
                });
            }
        });
        assert_eq!(table.len() as u64, ENTRIES);
    }

    proptest! {
        #[test]
        fn matches_a_model(ops in proptest::collection::vec(
                (proptest::collection::vec(0u8..3, 0..3), any::<bool>(), any::<u8>()), 0..40),
                snapshot in 0u64..45) {
            let table = Arc::new(MemTable::new());
            let mut model: Vec<(InternalKey, Vec<u8>)> = Vec::new();
            for (i, (key, deletion, value)) in ops.iter().enumerate() {
                let sequence = i as u64 + 1;
                let value_type = if *deletion { ValueType::Deletion } else { ValueType::Value };
                let value = if *deletion { Vec::new() } else { vec![*value] };
                table.add(sequence, value_type, key, &value);
                model.push((InternalKey::new(key, sequence, value_type), value));
            }
            model.sort_by(|a, b| compare_internal_keys(a.0.encoded(), b.0.encoded()));
            let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                .iter()
                .map(|(k, v)| (k.encoded().to_vec(), v.clone()))
                .collect();
            let mut iter = table.iter();
            prop_assert_eq!(collect_all(&mut iter).unwrap(), expected.clone());
            let mut backward = Vec::new();
            iter.seek_to_last();
            while iter.valid() {
                backward.push((iter.key().to_vec(), iter.value().to_vec()));
                iter.prev();
            }
            backward.reverse();
            prop_assert_eq!(backward, expected);

            // Point lookups against the newest visible version.
            let mut newest: BTreeMap<Vec<u8>, MemGet> = BTreeMap::new();
            for (i, (key, deletion, value)) in ops.iter().enumerate() {
                if (i as u64) < snapshot {
                    let found = if *deletion { MemGet::Deleted } else { MemGet::Value(vec![*value]) };
                    newest.insert(key.clone(), found);
                }
            }
            for (key, _, _) in &ops {
                prop_assert_eq!(table.get(key, snapshot), newest.get(key).cloned());
            }
        }
    }
}
