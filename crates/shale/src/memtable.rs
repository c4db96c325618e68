//! The memtable: recent writes, sorted by internal key, in insert-only
//! arena skip lists (LevelDB's `db/memtable.cc`; the lists are
//! [`crate::skiplist`]).
//!
//! Any number of writers add at once, each through an [`Inserter`] of its
//! own (the write path lets the writers of a group insert their batches in
//! parallel); any number of readers look up keys and iterate concurrently
//! with them. Entries are never removed: a memtable is dropped as
//! a whole once it is flushed.
//!
//! A memtable made for a write buffer ([`MemTable::for_buffer`]) spreads its
//! entries over [`LISTS`] skip lists filled in turn: once the list being
//! filled holds its share of the buffer, new inserters go to the next one.
//! An insert searches a list a quarter the size, whose nodes a core's
//! caches hold far more of (`docs/results/compaction-tax.md`, "what a
//! smaller skip list would save the writer"); a lookup searches each list
//! that has taken entries and whose filter does not rule the key out, and
//! a cursor merges them (RocksDB merges several memtables into one table
//! when it flushes them, its `min_write_buffer_number_to_merge`). Each
//! list's filter is a Bloom filter of one 64-bit word per key, set as keys
//! are inserted (RocksDB's memtable Bloom filter, `DynamicBloom`): a
//! lookup of a key the memtable does not hold, the common case, searches
//! a list only on a false positive (under 2 % of lookups per list in the
//! test `a_list_filter_holds_every_key_added_and_rules_out_most_others`).
//!
//! Each entry is one arena allocation holding the node's links, the internal
//! key and the value.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use shale_format::comparator::KeyOrder;
use shale_format::error::Error;
use shale_format::internal_key::{
    append_internal_key, pack_sequence_and_type, ParsedInternalKey, SequenceNumber, ValueType,
    INTERNAL_KEY_TRAILER_LEN,
};
use shale_format::iterator::KvIterator;
use shale_format::merging_iterator::MergingIterator;

use crate::skiplist::{self, Position, SkipList};

/// Internal keys up to this length are built on the stack for lookups.
pub(crate) const STACK_KEY_LEN: usize = 128;

/// Skip lists of a memtable made for a write buffer.
pub const LISTS: usize = 4;

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
    /// One list, or [`LISTS`] filled in turn.
    lists: Box<[SkipList]>,
    /// The list new inserters take. Only grows; every list after it is
    /// empty.
    filling: AtomicUsize,
    /// Entry bytes after which the list being filled passes new inserters
    /// to the next (the last takes the rest).
    list_bytes: usize,
    /// One per list when there are several (none for one list, which every
    /// lookup searches anyway).
    filters: Box<[ListFilter]>,
    order: KeyOrder,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("entries", &self.len())
            .field("lists", &self.lists.len())
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
    /// An empty memtable of bytewise-ordered keys, in one list.
    pub fn new() -> MemTable {
        MemTable::with_order(KeyOrder::bytewise())
    }

    /// An empty memtable whose user keys are ordered by `order`, in one
    /// list (for memtables of no set size: a repair's, tests').
    pub fn with_order(order: KeyOrder) -> MemTable {
        MemTable::with_lists(order, 1, usize::MAX)
    }

    /// An empty memtable for a write buffer of `buffer_bytes`: [`LISTS`]
    /// lists, each filled to a [`LISTS`]th of it in turn.
    pub fn for_buffer(order: KeyOrder, buffer_bytes: usize) -> MemTable {
        MemTable::with_lists(order, LISTS, (buffer_bytes / LISTS).max(1))
    }

    fn with_lists(order: KeyOrder, lists: usize, list_bytes: usize) -> MemTable {
        let filters = if lists > 1 {
            (0..lists).map(|_| ListFilter::new(list_bytes)).collect()
        } else {
            Box::default()
        };
        MemTable {
            lists: (0..lists)
                .map(|_| SkipList::new(skiplist::EntryOrder::Internal(order.clone())))
                .collect(),
            filling: AtomicUsize::new(0),
            list_bytes,
            filters,
            order,
        }
    }

    /// The lists that may hold entries: those up to the one being filled.
    fn used_lists(&self) -> &[SkipList] {
        &self.lists[..=self.filling.load(AtomicOrdering::Acquire)]
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
    /// same time as other inserters. The whole batch goes into one list.
    pub fn inserter(&self) -> Inserter<'_> {
        let list = self.filling.load(AtomicOrdering::Acquire);
        Inserter {
            inner: Some(self.lists[list].inserter()),
            table: self,
            list,
        }
    }

    /// Passes new inserters on from `list` once it holds its share.
    fn pass_on_if_full(&self, list: usize) {
        if list + 1 < self.lists.len() && self.lists[list].entry_bytes() >= self.list_bytes {
            // Another inserter may have passed it on already.
            let _ = self.filling.compare_exchange(
                list,
                list + 1,
                AtomicOrdering::Release,
                AtomicOrdering::Relaxed,
            );
        }
    }

    /// The newest entry for `user_key` with a sequence at or below
    /// `snapshot`: `Some(MemGet::Value)`, `Some(MemGet::Deleted)`, or `None`
    /// when the memtable holds no such entry.
    pub fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<MemGet> {
        let mut stack = [0u8; STACK_KEY_LEN];
        let mut heap = Vec::new();
        let lookup = lookup_key(user_key, snapshot, &mut stack, &mut heap);
        // Each list's first entry at or after the lookup key is its newest
        // visible version of the key; across lists the highest sequence
        // wins (writers that insert at once may land in different lists in
        // either order of their sequences).
        let mut newest: Option<(SequenceNumber, &SkipList, Position, ValueType)> = None;
        let hash = (!self.filters.is_empty()).then(|| filter_hash(user_key));
        for (index, list) in self.used_lists().iter().enumerate() {
            if let (Some(hash), Some(filter)) = (hash, self.filters.get(index)) {
                if !filter.may_hold(hash) {
                    continue;
                }
            }
            let Some(at) = list.seek(lookup) else {
                continue;
            };
            // Keys in the lists were encoded by `add`, so they always parse.
            let Ok(parsed) = ParsedInternalKey::parse(list.key(at)) else {
                continue;
            };
            if self.order.compare_user(parsed.user_key, user_key).is_ne() {
                continue;
            }
            if newest.is_none_or(|(sequence, ..)| parsed.sequence > sequence) {
                newest = Some((parsed.sequence, list, at, parsed.value_type));
            }
        }
        let (_, list, at, value_type) = newest?;
        match value_type {
            ValueType::Value => Some(MemGet::Value(list.value(at).to_vec())),
            ValueType::Deletion => Some(MemGet::Deleted),
        }
    }

    /// Bytes used by keys, values and per-entry bookkeeping, counted as
    /// entries are added. Decides when the memtable is full.
    pub fn approximate_memory_usage(&self) -> usize {
        self.lists.iter().map(SkipList::entry_bytes).sum()
    }

    /// Number of entries (versions, not distinct user keys).
    pub fn len(&self) -> usize {
        self.lists.iter().map(SkipList::len).sum()
    }

    /// True when nothing has been added.
    pub fn is_empty(&self) -> bool {
        self.lists.iter().all(SkipList::is_empty)
    }

    /// A cursor over internal keys and their values. It holds the memtable
    /// alive, and sees entries added after it was created when it moves onto
    /// them (in a list that held entries when it was made).
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        let used = self.used_lists().len();
        let cursor: Box<dyn KvIterator + Send> = if used == 1 {
            Box::new(ListIter::new(Arc::clone(self), 0))
        } else {
            Box::new(MergingIterator::new(
                self.order.internal_comparator(),
                (0..used)
                    .map(|list| {
                        Box::new(ListIter::new(Arc::clone(self), list))
                            as Box<dyn KvIterator + Send>
                    })
                    .collect(),
            ))
        };
        MemTableIter { cursor }
    }

    /// A cursor over the entries the memtable holds when it is made, for a
    /// memtable no longer written (a flush). It finds them all at once,
    /// walking many stretches of each list side by side
    /// ([`SkipList::positions`]) and merging the lists' runs, and fetches
    /// each entry ahead of its use: a walk of [`MemTable::iter`] waits for a
    /// cache miss at about every entry.
    pub fn frozen_iter(self: &Arc<Self>) -> FrozenMemTableIter {
        let mut runs: Vec<Vec<Position>> = self
            .used_lists()
            .iter()
            .map(SkipList::positions)
            .filter(|run| !run.is_empty())
            .collect();
        // Pairs of runs merged until one is left.
        while runs.len() > 1 {
            let mut merged = Vec::with_capacity(runs.len().div_ceil(2));
            let mut pairs = runs.into_iter();
            while let Some(a) = pairs.next() {
                merged.push(match pairs.next() {
                    Some(b) => self.merge_runs(&a, &b),
                    None => a,
                });
            }
            runs = merged;
        }
        let positions = runs.pop().unwrap_or_default();
        FrozenMemTableIter {
            index: positions.len(),
            positions,
            table: Arc::clone(self),
        }
    }

    /// The entries of two sorted runs of this memtable's nodes, in order.
    fn merge_runs(&self, a: &[Position], b: &[Position]) -> Vec<Position> {
        // Any list reads any node: the lists differ only in their links.
        let list = &self.lists[0];
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if let Some(&ahead) = a.get(i + FETCH_AHEAD) {
                list.prefetch_entry(ahead);
            }
            if let Some(&ahead) = b.get(j + FETCH_AHEAD) {
                list.prefetch_entry(ahead);
            }
            if self.order.compare_internal(list.key(a[i]), list.key(b[j])) == Ordering::Less {
                out.push(a[i]);
                i += 1;
            } else {
                out.push(b[j]);
                j += 1;
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        out
    }
}

/// Adds the entries of one batch to a [`MemTable`], alongside other
/// inserters.
#[derive(Debug)]
pub struct Inserter<'a> {
    /// `None` only while dropped.
    inner: Option<skiplist::Inserter<'a>>,
    table: &'a MemTable,
    list: usize,
}

impl Inserter<'_> {
    /// As [`MemTable::add`].
    pub fn add(
        &mut self,
        sequence: SequenceNumber,
        value_type: ValueType,
        user_key: &[u8],
        value: &[u8],
    ) {
        let Some(inner) = self.inner.as_mut() else {
            return;
        };
        // Set before the entry is linked: a reader whose snapshot holds the
        // entry took it after the write was published, which follows this.
        if let Some(filter) = self.table.filters.get(self.list) {
            filter.add(filter_hash(user_key));
        }
        let key_len = user_key.len() + INTERNAL_KEY_TRAILER_LEN;
        // The trailer is a little-endian fixed64, as `append_internal_key`
        // writes it.
        let trailer = pack_sequence_and_type(sequence, value_type).to_le_bytes();
        inner.insert(key_len, value.len(), |entry| {
            let (key, rest) = entry.split_at_mut(key_len);
            key[..user_key.len()].copy_from_slice(user_key);
            key[user_key.len()..].copy_from_slice(&trailer);
            rest.copy_from_slice(value);
        });
    }
}

impl Drop for Inserter<'_> {
    fn drop(&mut self) {
        // The list counts the batch's bytes when its inserter goes.
        drop(self.inner.take());
        self.table.pass_on_if_full(self.list);
    }
}

/// A Bloom filter over the user keys of one list, set as they are
/// inserted: each key sets [`FILTER_PROBES`] bits of one word (one cache
/// line per insert and per lookup; a lookup costs one load).
struct ListFilter {
    words: Box<[AtomicU64]>,
    /// `words.len() - 1` (a power of two).
    mask: u64,
}

/// Bits a key sets in its word.
const FILTER_PROBES: u32 = 4;

impl ListFilter {
    /// A filter for a list of about `list_bytes` of entries: a bit per 4
    /// bytes, about 19 per entry of a 16-byte key and a 32-byte value.
    fn new(list_bytes: usize) -> ListFilter {
        let words = (list_bytes / 256).clamp(1, 1 << 20).next_power_of_two();
        ListFilter {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            mask: words as u64 - 1,
        }
    }

    /// The word of `hash` and the bits it sets there.
    fn place(&self, hash: u64) -> (usize, u64) {
        let word = (hash & self.mask) as usize;
        let mut bits = 0u64;
        let mut h = hash >> 32;
        for _ in 0..FILTER_PROBES {
            bits |= 1 << (h & 63);
            h >>= 6;
        }
        (word, bits)
    }

    fn add(&self, hash: u64) {
        let (word, bits) = self.place(hash);
        // Relaxed: see `Inserter::add` for what orders it before readers.
        if self.words[word].load(AtomicOrdering::Relaxed) & bits != bits {
            self.words[word].fetch_or(bits, AtomicOrdering::Relaxed);
        }
    }

    fn may_hold(&self, hash: u64) -> bool {
        let (word, bits) = self.place(hash);
        self.words[word].load(AtomicOrdering::Relaxed) & bits == bits
    }
}

/// A 64-bit hash of a user key for [`ListFilter`]: words of the key mixed by
/// multiplication (the filter lives only in memory, so no format fixes it).
fn filter_hash(key: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = K ^ (key.len() as u64);
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
        h ^= h >> 29;
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
        h ^= h >> 29;
    }
    h.wrapping_mul(K) ^ (h >> 32)
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

/// A [`KvIterator`] over a memtable's internal keys and values: the cursor
/// of its one list, or the merge of its lists'. Holds the memtable alive;
/// `Send`.
pub struct MemTableIter {
    cursor: Box<dyn KvIterator + Send>,
}

impl std::fmt::Debug for MemTableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTableIter")
            .field("valid", &self.valid())
            .finish()
    }
}

impl KvIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }

    fn seek_to_first(&mut self) {
        self.cursor.seek_to_first();
    }

    fn seek_to_last(&mut self) {
        self.cursor.seek_to_last();
    }

    fn seek(&mut self, target: &[u8]) {
        self.cursor.seek(target);
    }

    fn next(&mut self) {
        self.cursor.next();
    }

    fn prev(&mut self) {
        self.cursor.prev();
    }

    fn key(&self) -> &[u8] {
        self.cursor.key()
    }

    fn value(&self) -> &[u8] {
        self.cursor.value()
    }

    fn status(&self) -> Result<(), Error> {
        self.cursor.status()
    }
}

/// A cursor over one list of a memtable.
struct ListIter {
    /// The current entry, a node of the list (valid while `table` is).
    current: Option<Position>,
    table: Arc<MemTable>,
    list: usize,
}

impl ListIter {
    fn new(table: Arc<MemTable>, list: usize) -> ListIter {
        ListIter {
            current: None,
            table,
            list,
        }
    }

    fn list(&self) -> &SkipList {
        &self.table.lists[self.list]
    }
}

impl KvIterator for ListIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.current = self.list().first();
    }

    fn seek_to_last(&mut self) {
        self.current = self.list().last();
    }

    fn seek(&mut self, target: &[u8]) {
        self.current = self.list().seek(target);
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid memtable cursor");
        self.current = self.current.and_then(|at| self.list().next(at));
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid memtable cursor");
        self.current = self.current.and_then(|at| self.list().prev(at));
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |at| self.list().key(at))
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |at| self.list().value(at))
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
    /// The entries in order, nodes of `table`'s lists (valid while `table`
    /// is).
    positions: Vec<Position>,
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
    /// Any of the memtable's lists: each reads any of its nodes.
    fn list(&self) -> &SkipList {
        &self.table.lists[0]
    }

    /// Moves to entry `index` (invalid past the end) and fetches the one
    /// [`FETCH_AHEAD`] entries on.
    fn go_to(&mut self, index: usize) {
        self.index = index.min(self.positions.len());
        if let Some(&ahead) = self.positions.get(index + FETCH_AHEAD) {
            self.list().prefetch_entry(ahead);
        }
    }
}

impl KvIterator for FrozenMemTableIter {
    fn valid(&self) -> bool {
        self.index < self.positions.len()
    }

    fn seek_to_first(&mut self) {
        for &ahead in self.positions.iter().take(FETCH_AHEAD) {
            self.list().prefetch_entry(ahead);
        }
        self.go_to(0);
    }

    fn seek_to_last(&mut self) {
        self.index = self.positions.len().saturating_sub(1);
    }

    fn seek(&mut self, target: &[u8]) {
        let (list, order) = (self.list(), &self.table.order);
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
            .map_or(&[], |&at| self.list().key(at))
    }

    fn value(&self) -> &[u8] {
        self.positions
            .get(self.index)
            .map_or(&[], |&at| self.list().value(at))
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

    /// The entries of `table` as a model: internal key to value, in order.
    fn model_of(adds: &[(u64, ValueType, String, Vec<u8>)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = adds
            .iter()
            .map(|(sequence, kind, key, value)| {
                (
                    InternalKey::new(key.as_bytes(), *sequence, *kind)
                        .encoded()
                        .to_vec(),
                    value.clone(),
                )
            })
            .collect();
        model.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        model
    }

    /// `count` writes from sequence 1 on, to keys `%05d` of random numbers
    /// below `keys`, one in eight a deletion.
    fn random_writes(seed: u64, count: u64, keys: u64) -> Vec<(u64, ValueType, String)> {
        let mut rng = seed;
        (1..=count)
            .map(|sequence| {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let kind = if rng & 7 == 0 {
                    ValueType::Deletion
                } else {
                    ValueType::Value
                };
                (sequence, kind, format!("{:05}", (rng >> 33) % keys))
            })
            .collect()
    }

    #[test]
    fn a_buffer_memtable_fills_its_lists_in_turn_and_reads_them_as_one() {
        let table = Arc::new(MemTable::for_buffer(KeyOrder::bytewise(), 64 << 10));
        let mut adds = Vec::new();
        for (sequence, kind, key) in random_writes(5, 4_000, 1_500) {
            let value = if kind == ValueType::Value {
                sequence.to_le_bytes().to_vec()
            } else {
                Vec::new()
            };
            table.add(sequence, kind, key.as_bytes(), &value);
            adds.push((sequence, kind, key, value));
        }
        // Every list took entries, the last the rest.
        assert_eq!(table.filling.load(AtomicOrdering::Relaxed), LISTS - 1);
        assert!(table.lists.iter().all(|list| !list.is_empty()));
        assert_eq!(table.len(), 4_000);
        let model = model_of(&adds);
        assert_eq!(collect_all(&mut table.iter()).unwrap(), model);
        assert_eq!(collect_all(&mut table.frozen_iter()).unwrap(), model);

        // A lookup finds the newest version at each snapshot, whichever
        // list holds it.
        for key in ["00000", "00007", "00500", "01499", "01500", "x"] {
            for snapshot in [0, 1, 999, 2_000, 3_999, MAX_SEQUENCE_NUMBER] {
                let expected = adds
                    .iter()
                    .filter(|(sequence, _, k, _)| k == key && *sequence <= snapshot)
                    .max_by_key(|(sequence, ..)| *sequence)
                    .map(|(_, kind, _, value)| match kind {
                        ValueType::Value => MemGet::Value(value.clone()),
                        ValueType::Deletion => MemGet::Deleted,
                    });
                assert_eq!(
                    table.get(key.as_bytes(), snapshot),
                    expected,
                    "{key}@{snapshot}"
                );
            }
        }

        // The merged cursor walks back as it walks forward, and seeks.
        let mut live = table.iter();
        live.seek_to_last();
        let mut backward = Vec::new();
        while live.valid() {
            backward.push((live.key().to_vec(), live.value().to_vec()));
            live.prev();
        }
        backward.reverse();
        assert_eq!(backward, model);
        let target = InternalKey::new(b"00750", 2_000, ValueType::VALUE_FOR_SEEK);
        live.seek(target.encoded());
        let at = model
            .partition_point(|(k, _)| compare_internal_keys(k, target.encoded()) == Ordering::Less);
        assert_eq!(live.key(), model[at].0.as_slice());
    }

    #[test]
    fn a_list_filter_holds_every_key_added_and_rules_out_most_others() {
        let filter = ListFilter::new(2 << 20);
        let keys: Vec<String> = (0..27_000).map(|i| format!("{:016}", i * 7_919)).collect();
        for key in &keys {
            filter.add(filter_hash(key.as_bytes()));
        }
        assert!(keys
            .iter()
            .all(|key| filter.may_hold(filter_hash(key.as_bytes()))));
        let false_positives = (0..100_000)
            .filter(|i| filter.may_hold(filter_hash(format!("{:016}", i * 7_919 + 1).as_bytes())))
            .count();
        // About 19 bits a key: well under 2 % with four bits in one word.
        assert!(false_positives < 2_000, "{false_positives} of 100000");
        // Keys of every length hash, the empty one too.
        for len in 0..40 {
            let key = vec![b'k'; len];
            filter.add(filter_hash(&key));
            assert!(filter.may_hold(filter_hash(&key)));
        }
    }

    #[test]
    fn a_newer_version_in_an_earlier_list_wins() {
        // Writers that insert at once can land in different lists with
        // their sequences either way round.
        let table = MemTable::for_buffer(KeyOrder::bytewise(), 4 << 10);
        let mut early = table.inserter();
        let mut sequence = 10;
        while table.filling.load(AtomicOrdering::Relaxed) == 0 {
            table.add(sequence, ValueType::Value, b"filler", &[0; 100]);
            sequence += 1;
        }
        let late = sequence;
        table.add(late, ValueType::Value, b"k", b"older");
        early.add(late + 1, ValueType::Value, b"k", b"newer");
        drop(early);
        assert_eq!(
            table.get(b"k", late),
            Some(MemGet::Value(b"older".to_vec()))
        );
        assert_eq!(
            table.get(b"k", MAX_SEQUENCE_NUMBER),
            Some(MemGet::Value(b"newer".to_vec()))
        );
        assert_eq!(table.get(b"k", late - 1), None);
    }

    #[test]
    fn frozen_iterator_agrees_with_the_live_one() {
        let table = Arc::new(MemTable::new());
        for (sequence, kind, key) in random_writes(11, 3_000, 2_000) {
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
