//! A cursor over the union of several sorted cursors: LevelDB's
//! `table/merger.cc`. The engine merges the memtable, the immutable memtable
//! and the tables of a version through it, and the streaming compaction
//! executor merges its input runs through it.
//!
//! Children are kept in a tournament (loser) tree over their current keys,
//! so a step costs one comparison per level of the tree (`log2 n`): a binary
//! heap costs two, and compactions merge 40 runs and more. Each child's
//! current key is copied into the merge when the child moves, so that
//! comparisons and [`KvIterator::key`] read it directly instead of going
//! down the child's cursors (a table in a level is three cursors deep).
//!
//! The merge is deterministic even when two children hold equal keys: going
//! forward, equal keys come out in child order (lower index first); going
//! backward, in the reverse of that order, so a backward traversal yields
//! exactly the forward sequence reversed.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::comparator::{compare_internal_keys, Comparator};
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
    /// `comparator` is [`crate::comparator::InternalKeyComparator`]:
    /// compare inline.
    bytewise_internal: bool,
    children: Vec<Box<dyn KvIterator + Send>>,
    /// The current key of each valid child (stale for an invalid one).
    keys: Vec<Vec<u8>>,
    /// Whether each child is valid, as of its last move.
    live: Vec<bool>,
    /// The loser tree, laid out as a binary heap over `n` leaves (child
    /// `i` is leaf `n + i`): `tree[node]` for `1 <= node < n` is the child
    /// that lost the match at that node, `tree[0]` the overall winner, the
    /// current child. Dead children lose every match they play.
    tree: Vec<usize>,
    /// Winners of each node while the tree is rebuilt (kept to reuse).
    winners: Vec<usize>,
    /// True when a child stopped with an error (the cursor is invalid).
    stopped: bool,
    /// The current child: `tree[0]` when the cursor is valid.
    winner: Option<usize>,
    direction: Direction,
    /// Holds the current key while the other children are repositioned.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for MergingIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergingIterator")
            .field("comparator", &self.comparator)
            .field("children", &self.children.len())
            .field("current", &self.winner)
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
        let n = children.len();
        MergingIterator {
            bytewise_internal: comparator.is_bytewise_internal(),
            comparator,
            keys: vec![Vec::new(); n],
            live: vec![false; n],
            tree: vec![0; n.max(1)],
            winners: Vec::with_capacity(2 * n),
            children,
            stopped: false,
            winner: None,
            direction: Direction::Forward,
            scratch: Vec::new(),
        }
    }

    /// Number of children merged.
    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// Records `tree[0]` as the current child if it is valid (a dead winner
    /// means every child is dead).
    #[inline]
    fn crown(&mut self, winner: usize) {
        self.tree[0] = winner;
        self.winner = (!self.stopped && self.live.get(winner) == Some(&true)).then_some(winner);
    }

    /// True when child `a`'s entry comes out before child `b`'s in the
    /// current direction; a valid child goes before an invalid one.
    #[inline]
    fn goes_before(&self, a: usize, b: usize) -> bool {
        match (self.live[a], self.live[b]) {
            (true, true) => {}
            (live_a, _) => return live_a,
        }
        let order = if self.bytewise_internal {
            compare_internal_keys(&self.keys[a], &self.keys[b])
        } else {
            self.comparator.compare(&self.keys[a], &self.keys[b])
        };
        match self.direction {
            Direction::Forward => order == Ordering::Less || (order == Ordering::Equal && a < b),
            Direction::Reverse => order == Ordering::Greater || (order == Ordering::Equal && a > b),
        }
    }

    /// Copies child `child`'s position into `keys` and `live`; stops the
    /// cursor when the child is invalid because of an error.
    #[inline]
    fn refresh(&mut self, child: usize) {
        let iter = &self.children[child];
        let live = iter.valid();
        self.live[child] = live;
        if live {
            let key = &mut self.keys[child];
            key.clear();
            key.extend_from_slice(iter.key());
        } else if iter.status().is_err() {
            self.stopped = true;
        }
    }

    /// Rebuilds the tree from every child's position; stops the cursor when
    /// a child is invalid because of an error.
    fn rebuild(&mut self) {
        self.stopped = false;
        let n = self.children.len();
        for child in 0..n {
            self.refresh(child);
        }
        if n <= 1 {
            self.crown(0);
            return;
        }
        let mut winners = std::mem::take(&mut self.winners);
        winners.clear();
        winners.resize(2 * n, 0);
        for child in 0..n {
            winners[n + child] = child;
        }
        for node in (1..n).rev() {
            let (left, right) = (winners[2 * node], winners[2 * node + 1]);
            if self.goes_before(left, right) {
                winners[node] = left;
                self.tree[node] = right;
            } else {
                winners[node] = right;
                self.tree[node] = left;
            }
        }
        self.winners = winners;
        self.crown(self.winners[1]);
    }

    /// Restores the tree after the current child `moved` stepped: replays
    /// its matches from its leaf up to the root.
    #[inline]
    fn replay(&mut self, moved: usize) {
        self.refresh(moved);
        let n = self.children.len();
        let mut winner = moved;
        let mut node = (n + moved) / 2;
        while node >= 1 {
            let loser = self.tree[node];
            if self.goes_before(loser, winner) {
                self.tree[node] = winner;
                winner = loser;
            }
            node /= 2;
        }
        self.crown(winner);
    }

    /// Copies the current key into `scratch` and returns it (taken out of
    /// `self` so the children can be moved while it is borrowed).
    fn take_current_key(&mut self, current: usize) -> Vec<u8> {
        let mut key = std::mem::take(&mut self.scratch);
        key.clear();
        key.extend_from_slice(&self.keys[current]);
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
        self.rebuild();
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
        self.rebuild();
    }
}

impl KvIterator for MergingIterator {
    #[inline]
    fn valid(&self) -> bool {
        self.winner.is_some()
    }

    fn seek_to_first(&mut self) {
        for child in &mut self.children {
            child.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.rebuild();
    }

    fn seek_to_last(&mut self) {
        for child in &mut self.children {
            child.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.rebuild();
    }

    fn seek(&mut self, target: &[u8]) {
        for child in &mut self.children {
            child.seek(target);
        }
        self.direction = Direction::Forward;
        self.rebuild();
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid MergingIterator");
        let Some(current) = self.winner else {
            return;
        };
        if self.direction != Direction::Forward {
            self.switch_to_forward(current);
            // The current child is the smallest after the switch, so it is
            // still the winner unless an error stopped the cursor.
            if self.winner != Some(current) {
                return;
            }
        }
        self.children[current].next();
        self.replay(current);
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid MergingIterator");
        let Some(current) = self.winner else {
            return;
        };
        if self.direction != Direction::Reverse {
            self.switch_to_reverse(current);
            if self.winner != Some(current) {
                return;
            }
        }
        self.children[current].prev();
        self.replay(current);
    }

    #[inline]
    fn key(&self) -> &[u8] {
        debug_assert!(self.valid(), "key() on an invalid MergingIterator");
        match self.winner {
            Some(current) => &self.keys[current],
            None => &[],
        }
    }

    #[inline]
    fn value(&self) -> &[u8] {
        debug_assert!(self.valid(), "value() on an invalid MergingIterator");
        match self.winner {
            Some(current) => self.children[current].value(),
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
