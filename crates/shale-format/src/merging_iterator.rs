//! A cursor over the union of several sorted cursors: LevelDB's
//! `table/merger.cc`. The engine merges the memtable, the immutable memtable
//! and the tables of a version through it, and the streaming compaction
//! executor merges its input runs through it.
//!
//! Children are kept in a binary heap ordered by their current key, so a step
//! costs `O(log n)` comparisons: compactions can merge 40 runs and more.
//!
//! The merge is deterministic even when two children hold equal keys: going
//! forward, equal keys come out in child order (lower index first); going
//! backward, in the reverse of that order, so a backward traversal yields
//! exactly the forward sequence reversed.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::comparator::Comparator;
use crate::error::Error;
use crate::iterator::KvIterator;

/// Which way the children are positioned relative to the current entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Every non-current child is on its first entry after the current one.
    Forward,
    /// Every non-current child is on its last entry before the current one.
    Reverse,
}

/// Merges `children` (each sorted by `comparator`) into one sorted cursor.
/// Returns the child itself when there is exactly one and an
/// [`EmptyIterator`] when there is none.
pub fn merging_iterator(
    comparator: Arc<dyn Comparator>,
    mut children: Vec<Box<dyn KvIterator + Send>>,
) -> Box<dyn KvIterator + Send> {
    match children.len() {
        0 => Box::new(EmptyIterator::new()),
        1 => match children.pop() {
            Some(only) => only,
            None => Box::new(EmptyIterator::new()),
        },
        _ => Box::new(MergingIterator::new(comparator, children)),
    }
}

/// The sorted union of several sorted cursors (see the module docs).
///
/// Unlike LevelDB's merger, a child that stops with an error stops the merged
/// cursor too (it becomes invalid and [`KvIterator::status`] reports the
/// error): going on without that child would yield a silently incomplete
/// sequence.
pub struct MergingIterator {
    comparator: Arc<dyn Comparator>,
    children: Vec<Box<dyn KvIterator + Send>>,
    /// Indices of the valid children, a binary heap ordered by
    /// [`MergingIterator::goes_before`]; `heap[0]` is the current child.
    /// Empty when the cursor is not valid.
    heap: Vec<usize>,
    direction: Direction,
    /// Holds the current key while the other children are repositioned.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for MergingIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergingIterator")
            .field("comparator", &self.comparator)
            .field("children", &self.children.len())
            .field("current", &self.heap.first())
            .field("direction", &self.direction)
            .finish()
    }
}

impl MergingIterator {
    /// Merges `children`, each sorted by `comparator`. The cursor starts
    /// unpositioned.
    pub fn new(
        comparator: Arc<dyn Comparator>,
        children: Vec<Box<dyn KvIterator + Send>>,
    ) -> MergingIterator {
        MergingIterator {
            comparator,
            heap: Vec::with_capacity(children.len()),
            children,
            direction: Direction::Forward,
            scratch: Vec::new(),
        }
    }

    /// Number of children merged.
    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// True when child `a`'s entry comes out before child `b`'s in the
    /// current direction. Both must be valid.
    #[inline]
    fn goes_before(&self, a: usize, b: usize) -> bool {
        let order = self
            .comparator
            .compare(self.children[a].key(), self.children[b].key());
        match self.direction {
            Direction::Forward => order == Ordering::Less || (order == Ordering::Equal && a < b),
            Direction::Reverse => order == Ordering::Greater || (order == Ordering::Equal && a > b),
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        let len = self.heap.len();
        loop {
            let left = 2 * pos + 1;
            if left >= len {
                return;
            }
            let right = left + 1;
            let mut best = left;
            if right < len && self.goes_before(self.heap[right], self.heap[left]) {
                best = right;
            }
            if !self.goes_before(self.heap[best], self.heap[pos]) {
                return;
            }
            self.heap.swap(pos, best);
            pos = best;
        }
    }

    /// Rebuilds the heap from every valid child; stops the cursor when a
    /// child is invalid because of an error.
    fn rebuild_heap(&mut self) {
        self.heap.clear();
        for (index, child) in self.children.iter().enumerate() {
            if child.valid() {
                self.heap.push(index);
            } else if child.status().is_err() {
                self.heap.clear();
                return;
            }
        }
        for pos in (0..self.heap.len() / 2).rev() {
            self.sift_down(pos);
        }
    }

    /// Restores the heap after the current child (the top) moved.
    fn fix_top(&mut self) {
        let Some(&top) = self.heap.first() else {
            return;
        };
        let child = &self.children[top];
        if child.valid() {
            self.sift_down(0);
        } else if child.status().is_err() {
            self.heap.clear();
        } else {
            self.heap.swap_remove(0);
            self.sift_down(0);
        }
    }

    /// Copies the current key into `scratch` and returns it (taken out of
    /// `self` so the children can be moved while it is borrowed).
    fn take_current_key(&mut self, current: usize) -> Vec<u8> {
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        key.extend_from_slice(self.children[current].key());
        key
    }

    /// Positions `child` on its first entry that goes after the current
    /// entry `key` of child `current` in forward order. An error leaves the
    /// child invalid with its status set.
    fn skip_equal_keys(&mut self, child: usize, key: &[u8]) {
        let iter = &mut self.children[child];
        while iter.valid() && self.comparator.compare(iter.key(), key) == Ordering::Equal {
            iter.next();
        }
    }

    /// Repositions every non-current child after the current entry.
    fn switch_to_forward(&mut self, current: usize) {
        let key = self.take_current_key(current);
        for child in 0..self.children.len() {
            if child == current {
                continue;
            }
            self.children[child].seek(&key);
            if child < current {
                // Equal keys of lower children come out before the current
                // entry going forward: they are behind us.
                self.skip_equal_keys(child, &key);
            }
        }
        self.scratch = key;
        self.direction = Direction::Forward;
        self.rebuild_heap();
    }

    /// Repositions every non-current child before the current entry.
    fn switch_to_reverse(&mut self, current: usize) {
        let key = self.take_current_key(current);
        for child in 0..self.children.len() {
            if child == current {
                continue;
            }
            self.children[child].seek(&key);
            if child < current {
                // Equal keys of lower children come out after the current
                // entry going backward: they are still ahead.
                self.skip_equal_keys(child, &key);
            }
            let iter = &mut self.children[child];
            if iter.valid() {
                iter.prev();
            } else if iter.status().is_ok() {
                // Every entry of this child goes before the current one.
                iter.seek_to_last();
            }
            // A memtable is written while it is read: an entry inserted
            // after the seek landed (after the current key) is where the
            // step back, or the last entry, now is. Left there, the merge
            // would come back to the current entry after it (and past an
            // iterator's upper bound). Step back until the child goes after
            // the current entry going backward (equal keys: lower children
            // only). Regression test:
            // crates/shale/tests/regression_reverse_iteration_concurrent_insert.rs
            loop {
                let iter = &mut self.children[child];
                if !iter.valid() {
                    break;
                }
                let order = self.comparator.compare(iter.key(), &key);
                if order == Ordering::Less || (order == Ordering::Equal && child < current) {
                    break;
                }
                iter.prev();
            }
        }
        self.scratch = key;
        self.direction = Direction::Reverse;
        self.rebuild_heap();
    }
}

impl KvIterator for MergingIterator {
    #[inline]
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        for child in &mut self.children {
            child.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.rebuild_heap();
    }

    fn seek_to_last(&mut self) {
        for child in &mut self.children {
            child.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.rebuild_heap();
    }

    fn seek(&mut self, target: &[u8]) {
        for child in &mut self.children {
            child.seek(target);
        }
        self.direction = Direction::Forward;
        self.rebuild_heap();
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid MergingIterator");
        let Some(&current) = self.heap.first() else {
            return;
        };
        if self.direction != Direction::Forward {
            self.switch_to_forward(current);
            // The current child is the smallest after the switch, so it is
            // still the top unless an error stopped the cursor.
            if self.heap.first() != Some(&current) {
                return;
            }
        }
        self.children[current].next();
        self.fix_top();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid MergingIterator");
        let Some(&current) = self.heap.first() else {
            return;
        };
        if self.direction != Direction::Reverse {
            self.switch_to_reverse(current);
            if self.heap.first() != Some(&current) {
                return;
            }
        }
        self.children[current].prev();
        self.fix_top();
    }

    #[inline]
    fn key(&self) -> &[u8] {
        debug_assert!(self.valid(), "key() on an invalid MergingIterator");
        match self.heap.first() {
            Some(&current) => self.children[current].key(),
            None => &[],
        }
    }

    #[inline]
    fn value(&self) -> &[u8] {
        debug_assert!(self.valid(), "value() on an invalid MergingIterator");
        match self.heap.first() {
            Some(&current) => self.children[current].value(),
            None => &[],
        }
    }

    /// The error of the first child (in child order) that has one.
    fn status(&self) -> Result<(), Error> {
        self.children.iter().try_for_each(|child| child.status())
    }
}

/// A cursor with no entries, optionally stopped by an error: what a merge of
/// nothing is, and what an opener that failed can hand back.
#[derive(Debug, Clone, Default)]
pub struct EmptyIterator {
    error: Option<Error>,
}

impl EmptyIterator {
    /// An empty cursor whose status is ok.
    pub fn new() -> EmptyIterator {
        EmptyIterator { error: None }
    }

    /// An empty cursor whose status is `error`.
    pub fn with_error(error: Error) -> EmptyIterator {
        EmptyIterator { error: Some(error) }
    }
}

impl KvIterator for EmptyIterator {
    fn valid(&self) -> bool {
        false
    }

    fn seek_to_first(&mut self) {}

    fn seek_to_last(&mut self) {}

    fn seek(&mut self, _target: &[u8]) {}

    fn next(&mut self) {
        debug_assert!(false, "next() on an EmptyIterator");
    }

    fn prev(&mut self) {
        debug_assert!(false, "prev() on an EmptyIterator");
    }

    fn key(&self) -> &[u8] {
        &[]
    }

    fn value(&self) -> &[u8] {
        &[]
    }

    fn status(&self) -> Result<(), Error> {
        match &self.error {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comparator::BytewiseComparator;
    use crate::iterator::{collect_all, Entry};
    use crate::vec_iterator::VecIterator;
    use proptest::prelude::*;

    fn bytewise() -> Arc<dyn Comparator> {
        Arc::new(BytewiseComparator)
    }

    /// One child per key list; the value of an entry names its child and key
    /// so that ties between children can be told apart.
    fn build(children: &[Vec<Vec<u8>>]) -> (MergingIterator, Vec<Entry>) {
        let mut model = Vec::new();
        let mut iters: Vec<Box<dyn KvIterator + Send>> = Vec::new();
        for (index, keys) in children.iter().enumerate() {
            let entries: Vec<(Vec<u8>, Vec<u8>)> = keys
                .iter()
                .map(|k| {
                    let mut value = format!("{index}:").into_bytes();
                    value.extend_from_slice(k);
                    (k.clone(), value)
                })
                .collect();
            for (k, v) in &entries {
                model.push((k.clone(), index, v.clone()));
            }
            iters.push(Box::new(VecIterator::new(bytewise(), entries)));
        }
        model.sort();
        let model = model.into_iter().map(|(k, _, v)| (k, v)).collect();
        (MergingIterator::new(bytewise(), iters), model)
    }

    fn current(iter: &dyn KvIterator) -> Option<(Vec<u8>, Vec<u8>)> {
        iter.valid()
            .then(|| (iter.key().to_vec(), iter.value().to_vec()))
    }

    #[derive(Debug, Clone)]
    enum Op {
        Next,
        Prev,
        Seek(Vec<u8>),
        SeekToFirst,
        SeekToLast,
    }

    fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
        // A small alphabet makes equal keys across children common.
        proptest::collection::vec(0u8..4, 0..4)
    }

    fn children_strategy(max_children: usize) -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
        proptest::collection::vec(
            proptest::collection::btree_set(key_strategy(), 0..12)
                .prop_map(|set| set.into_iter().collect::<Vec<_>>()),
            0..max_children,
        )
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::Next),
            4 => Just(Op::Prev),
            2 => key_strategy().prop_map(Op::Seek),
            1 => Just(Op::SeekToFirst),
            1 => Just(Op::SeekToLast),
        ]
    }

    proptest! {
        #[test]
        fn forward_and_backward_match_model(children in children_strategy(8)) {
            let (mut iter, model) = build(&children);
            prop_assert_eq!(collect_all(&mut iter).unwrap(), model.clone());
            let mut backward = Vec::new();
            iter.seek_to_last();
            while let Some(entry) = current(&iter) {
                backward.push(entry);
                iter.prev();
            }
            backward.reverse();
            prop_assert_eq!(backward, model);
            prop_assert!(iter.status().is_ok());
        }

        #[test]
        fn many_children_forward_and_backward(children in children_strategy(48)) {
            let (mut iter, model) = build(&children);
            prop_assert_eq!(collect_all(&mut iter).unwrap(), model.clone());
            let mut backward = Vec::new();
            iter.seek_to_last();
            while let Some(entry) = current(&iter) {
                backward.push(entry);
                iter.prev();
            }
            backward.reverse();
            prop_assert_eq!(backward, model);
        }

        #[test]
        fn seek_matches_model(children in children_strategy(8), target in key_strategy()) {
            let (mut iter, model) = build(&children);
            iter.seek(&target);
            let expected = model.iter().find(|(k, _)| *k >= target).cloned();
            prop_assert_eq!(current(&iter), expected);
        }

        #[test]
        fn mixed_moves_match_model(children in children_strategy(10),
                                   ops in proptest::collection::vec(op_strategy(), 0..60)) {
            let (mut iter, model) = build(&children);
            let mut position: Option<usize> = None;
            for op in ops {
                match op {
                    Op::Next => {
                        let Some(at) = position else { continue };
                        iter.next();
                        position = (at + 1 < model.len()).then_some(at + 1);
                    }
                    Op::Prev => {
                        let Some(at) = position else { continue };
                        iter.prev();
                        position = at.checked_sub(1);
                    }
                    Op::Seek(target) => {
                        iter.seek(&target);
                        position = model.iter().position(|(k, _)| *k >= target);
                    }
                    Op::SeekToFirst => {
                        iter.seek_to_first();
                        position = (!model.is_empty()).then_some(0);
                    }
                    Op::SeekToLast => {
                        iter.seek_to_last();
                        position = model.len().checked_sub(1);
                    }
                }
                prop_assert_eq!(current(&iter), position.map(|at| model[at].clone()));
            }
            prop_assert!(iter.status().is_ok());
        }
    }

    #[test]
    fn one_child_is_returned_as_is_and_none_is_empty() {
        let entries = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
        ];
        let child: Box<dyn KvIterator + Send> =
            Box::new(VecIterator::new(bytewise(), entries.clone()));
        let mut merged = merging_iterator(bytewise(), vec![child]);
        assert_eq!(collect_all(merged.as_mut()).unwrap(), entries);

        let mut empty = merging_iterator(bytewise(), Vec::new());
        empty.seek_to_first();
        assert!(!empty.valid());
        assert!(empty.status().is_ok());
    }

    #[test]
    fn equal_keys_come_out_in_child_order_both_ways() {
        let (mut iter, _) = build(&[
            vec![b"k".to_vec()],
            vec![b"k".to_vec()],
            vec![b"k".to_vec()],
        ]);
        iter.seek_to_first();
        assert_eq!(iter.value(), b"0:k");
        iter.next();
        assert_eq!(iter.value(), b"1:k");
        iter.prev();
        assert_eq!(iter.value(), b"0:k");
        iter.next();
        iter.next();
        assert_eq!(iter.value(), b"2:k");
        iter.prev();
        assert_eq!(iter.value(), b"1:k");
        iter.next();
        assert_eq!(iter.value(), b"2:k");
        iter.next();
        assert!(!iter.valid());
    }

    #[test]
    fn child_error_stops_the_merge() {
        let good: Box<dyn KvIterator + Send> = Box::new(VecIterator::new(
            bytewise(),
            vec![(b"a".to_vec(), b"".to_vec()), (b"z".to_vec(), b"".to_vec())],
        ));
        let bad: Box<dyn KvIterator + Send> = Box::new(
            VecIterator::new(
                bytewise(),
                vec![(b"b".to_vec(), b"".to_vec()), (b"c".to_vec(), b"".to_vec())],
            )
            .fail_at(1, Error::corruption(9, "bad block")),
        );
        let mut iter = MergingIterator::new(bytewise(), vec![good, bad]);
        iter.seek_to_first();
        assert_eq!(iter.key(), b"a");
        iter.next();
        assert_eq!(iter.key(), b"b");
        iter.next();
        assert!(!iter.valid());
        assert!(iter.status().unwrap_err().is_corruption());

        let mut empty = merging_iterator(
            bytewise(),
            vec![
                Box::new(EmptyIterator::new()),
                Box::new(EmptyIterator::with_error(Error::corruption(1, "x"))),
            ],
        );
        empty.seek_to_first();
        assert!(!empty.valid());
        assert!(empty.status().unwrap_err().is_corruption());
    }
}
