//! The user-facing iterator: turns a cursor over internal keys (a merge of
//! the memtables and tables) into a cursor over the user keys visible at a
//! snapshot. LevelDB's `db/db_iter.cc`, with optional bounds on user keys.
//!
//! For each user key, the newest entry at or below the snapshot decides: a
//! value is yielded, a tombstone hides the key. Entries newer than the
//! snapshot and older versions are skipped.
//!
//! User keys are ordered by the database's [`KeyOrder`]: bytewise, or a
//! custom comparator's order.

use shale_format::comparator::KeyOrder;
use shale_format::error::Error;
use shale_format::internal_key::{
    append_internal_key, extract_user_key, ParsedInternalKey, SequenceNumber, ValueType,
    MAX_SEQUENCE_NUMBER,
};
use shale_format::iterator::KvIterator;

/// Above this much spare capacity the saved value buffer is released rather
/// than reused, so one huge value does not pin memory for the whole scan.
const SAVED_VALUE_SLACK: usize = 1 << 20;

/// How the internal cursor is placed relative to the current entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// The internal cursor is on the entry that is yielded.
    Forward,
    /// The internal cursor is just before every entry of the current user
    /// key, which (with its value) is kept in `saved_key` and `saved_value`.
    Reverse,
}

/// A cursor over the user keys and values visible at a snapshot, between
/// an optional inclusive lower bound and exclusive upper bound.
///
/// A corrupt internal key stops the cursor: it becomes invalid and
/// [`DbIterator::status`] returns a corruption (LevelDB skips such keys; we
/// do not hand out data past a sign of damage). An error from the internal
/// cursor stops it too. Every seek starts afresh and clears a previous error.
///
/// [`DB::iter`](crate::db::DB::iter) opens one, bounded by
/// [`ReadOptions::lower_bound`](crate::ReadOptions::lower_bound) and
/// [`ReadOptions::upper_bound`](crate::ReadOptions::upper_bound) and reading
/// at [`ReadOptions::snapshot`](crate::ReadOptions::snapshot) (or at the
/// moment it was opened): writes made after that are not seen. It keeps the
/// files and memtables it reads alive, so drop it when done. For a Rust
/// [`Iterator`] of owned pairs, see [`DbIterator::into_entries`] and
/// [`crate::range`].
///
/// ```
/// use shale::{Options, ReadOptions, WriteOptions, DB};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for (key, value) in [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")] {
///     db.put(&WriteOptions::default(), key, value)?;
/// }
///
/// // Forward from the first key.
/// let mut cursor = db.iter(&ReadOptions::new())?;
/// let mut seen = Vec::new();
/// cursor.seek_to_first();
/// while cursor.valid() {
///     seen.push((cursor.key().to_vec(), cursor.value().to_vec()));
///     cursor.next();
/// }
/// cursor.status()?; // Invalid because of an error, or at the end?
/// assert_eq!(seen.len(), 3);
///
/// // Backward from the last key below `c`.
/// cursor.seek(b"c");
/// cursor.prev();
/// assert!(cursor.valid());
/// assert_eq!(cursor.key(), b"b");
/// assert_eq!(cursor.value(), b"2");
/// # Ok::<(), shale::Error>(())
/// ```
pub struct DbIterator {
    iter: Box<dyn KvIterator + Send>,
    /// The order of user keys (the bounds and the skipping compare in it).
    order: KeyOrder,
    sequence: SequenceNumber,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Forward: the user key whose older entries are being skipped (or
    /// scratch space). Reverse: the current user key.
    saved_key: Vec<u8>,
    /// Reverse: the current value.
    saved_value: Vec<u8>,
    error: Option<Error>,
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("sequence", &self.sequence)
            .field("lower_bound", &self.lower_bound)
            .field("upper_bound", &self.upper_bound)
            .field("direction", &self.direction)
            .field("valid", &self.valid)
            .field("error", &self.error)
            .finish()
    }
}

impl DbIterator {
    /// A cursor over the user entries of `iter` (a cursor over internal keys
    /// in internal-key order, user keys bytewise) visible at sequence
    /// `snapshot`. It starts unpositioned.
    pub fn new(iter: Box<dyn KvIterator + Send>, snapshot: SequenceNumber) -> DbIterator {
        DbIterator::with_order(iter, snapshot, KeyOrder::bytewise())
    }

    /// [`DbIterator::new`] for internal keys whose user keys are ordered by
    /// `order`.
    pub fn with_order(
        iter: Box<dyn KvIterator + Send>,
        snapshot: SequenceNumber,
        order: KeyOrder,
    ) -> DbIterator {
        DbIterator {
            iter,
            order,
            sequence: snapshot.min(MAX_SEQUENCE_NUMBER),
            lower_bound: None,
            upper_bound: None,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            error: None,
        }
    }

    /// Restricts the cursor to user keys `>= lower_bound`.
    #[must_use]
    pub fn with_lower_bound(mut self, lower_bound: Vec<u8>) -> DbIterator {
        self.lower_bound = Some(lower_bound);
        self
    }

    /// Restricts the cursor to user keys `< upper_bound`.
    #[must_use]
    pub fn with_upper_bound(mut self, upper_bound: Vec<u8>) -> DbIterator {
        self.upper_bound = Some(upper_bound);
        self
    }

    /// The snapshot sequence the cursor reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.sequence
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// Positions on the first visible entry (at or after the lower bound).
    pub fn seek_to_first(&mut self) {
        if let Some(lower_bound) = self.lower_bound.take() {
            self.seek(&lower_bound);
            self.lower_bound = Some(lower_bound);
            return;
        }
        self.error = None;
        self.direction = Direction::Forward;
        self.saved_value.clear();
        self.iter.seek_to_first();
        self.find_next_user_entry(false);
    }

    /// Positions on the last visible entry (before the upper bound).
    pub fn seek_to_last(&mut self) {
        self.error = None;
        self.direction = Direction::Reverse;
        self.saved_value.clear();
        match &self.upper_bound {
            Some(upper_bound) => {
                // The first internal key of the bound's user key: everything
                // before it is below the bound.
                self.saved_key.clear();
                append_internal_key(
                    &mut self.saved_key,
                    upper_bound,
                    MAX_SEQUENCE_NUMBER,
                    ValueType::VALUE_FOR_SEEK,
                );
                self.iter.seek(&self.saved_key);
                if self.iter.valid() {
                    self.iter.prev();
                } else if self.iter.status().is_ok() {
                    self.iter.seek_to_last();
                }
            }
            None => self.iter.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Positions on the first visible entry with user key `>= target` (and
    /// at or after the lower bound).
    pub fn seek(&mut self, target: &[u8]) {
        self.error = None;
        self.direction = Direction::Forward;
        self.saved_value.clear();
        let user_key = match &self.lower_bound {
            Some(lower_bound) if self.order.compare_user(target, lower_bound).is_lt() => {
                lower_bound.as_slice()
            }
            _ => target,
        };
        self.saved_key.clear();
        append_internal_key(
            &mut self.saved_key,
            user_key,
            self.sequence,
            ValueType::VALUE_FOR_SEEK,
        );
        self.iter.seek(&self.saved_key);
        self.find_next_user_entry(false);
    }

    /// Moves to the next visible entry. REQUIRES: `valid()`.
    pub fn next(&mut self) {
        debug_assert!(self.valid, "next() on an invalid DbIterator");
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The internal cursor is just before the entries of the current
            // user key (or before everything): step into them; `saved_key`
            // already holds the key to skip.
            if self.iter.valid() {
                self.iter.next();
            } else {
                self.iter.seek_to_first();
            }
        } else {
            // Skip the rest of the current user key's entries.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(extract_user_key(self.iter.key()));
            self.iter.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous visible entry. REQUIRES: `valid()`.
    pub fn prev(&mut self) {
        debug_assert!(self.valid, "prev() on an invalid DbIterator");
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // The internal cursor is on the current entry: back up past every
            // entry of its user key, then scan backward as usual.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(extract_user_key(self.iter.key()));
            loop {
                self.iter.prev();
                if !self.iter.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.clear_saved_value();
                    return;
                }
                match ParsedInternalKey::parse(self.iter.key()) {
                    Ok(parsed)
                        if self
                            .order
                            .compare_user(parsed.user_key, &self.saved_key)
                            .is_lt() =>
                    {
                        break
                    }
                    Ok(_) => {}
                    Err(error) => {
                        self.stop_on_corrupt_key(error);
                        return;
                    }
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    /// The current user key. REQUIRES: `valid()`.
    pub fn key(&self) -> &[u8] {
        debug_assert!(self.valid, "key() on an invalid DbIterator");
        match self.direction {
            Direction::Forward => extract_user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value. REQUIRES: `valid()`.
    pub fn value(&self) -> &[u8] {
        debug_assert!(self.valid, "value() on an invalid DbIterator");
        match self.direction {
            Direction::Forward => self.iter.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The error that stopped the cursor: a corrupt internal key, or the
    /// internal cursor's error.
    pub fn status(&self) -> Result<(), Error> {
        match &self.error {
            Some(error) => Err(error.clone()),
            None => self.iter.status(),
        }
    }

    /// The order of user keys the cursor walks in.
    pub(crate) fn order(&self) -> &KeyOrder {
        &self.order
    }

    /// Tightens the bounds to user keys `>= lower` and `< upper` too (each
    /// `None`: unchanged). Call before positioning the cursor.
    pub(crate) fn narrow_bounds(&mut self, lower: Option<&[u8]>, upper: Option<&[u8]>) {
        if let Some(lower) = lower {
            match &self.lower_bound {
                Some(current) if self.order.compare_user(current, lower).is_ge() => {}
                _ => self.lower_bound = Some(lower.to_vec()),
            }
        }
        if let Some(upper) = upper {
            match &self.upper_bound {
                Some(current) if self.order.compare_user(current, upper).is_le() => {}
                _ => self.upper_bound = Some(upper.to_vec()),
            }
        }
    }

    /// Moves forward from the internal cursor's position to the first entry
    /// to yield. With `skipping`, entries of user keys `<= saved_key` are
    /// hidden (they are older versions of, or keys before, a yielded or
    /// deleted key).
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        debug_assert_eq!(self.direction, Direction::Forward);
        while self.iter.valid() {
            let parsed = match ParsedInternalKey::parse(self.iter.key()) {
                Ok(parsed) => parsed,
                Err(error) => {
                    self.stop_on_corrupt_key(error);
                    return;
                }
            };
            if let Some(upper_bound) = &self.upper_bound {
                if self
                    .order
                    .compare_user(parsed.user_key, upper_bound)
                    .is_ge()
                {
                    break;
                }
            }
            if parsed.sequence <= self.sequence {
                match parsed.value_type {
                    ValueType::Deletion => {
                        // Every older entry of this key is hidden by the
                        // tombstone.
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                        skipping = true;
                    }
                    ValueType::Value => {
                        if !skipping
                            || self
                                .order
                                .compare_user(parsed.user_key, &self.saved_key)
                                .is_gt()
                        {
                            self.valid = true;
                            self.saved_key.clear();
                            return;
                        }
                    }
                }
            }
            self.iter.next();
        }
        self.saved_key.clear();
        self.valid = false;
    }

    /// Moves backward from the internal cursor's position until the entries
    /// of the previous visible user key have all been seen, leaving that key
    /// and its value in `saved_key` and `saved_value` and the internal cursor
    /// just before them.
    fn find_prev_user_entry(&mut self) {
        debug_assert_eq!(self.direction, Direction::Reverse);
        let mut value_type = ValueType::Deletion;
        while self.iter.valid() {
            let parsed = match ParsedInternalKey::parse(self.iter.key()) {
                Ok(parsed) => parsed,
                Err(error) => {
                    self.stop_on_corrupt_key(error);
                    return;
                }
            };
            if let Some(lower_bound) = &self.lower_bound {
                if self
                    .order
                    .compare_user(parsed.user_key, lower_bound)
                    .is_lt()
                {
                    break;
                }
            }
            if parsed.sequence <= self.sequence {
                if value_type != ValueType::Deletion
                    && self
                        .order
                        .compare_user(parsed.user_key, &self.saved_key)
                        .is_lt()
                {
                    // A visible entry of an earlier key: the newest visible
                    // entry of the saved key has been seen, and it is a value.
                    break;
                }
                value_type = parsed.value_type;
                match value_type {
                    ValueType::Deletion => {
                        self.saved_key.clear();
                        self.clear_saved_value();
                    }
                    ValueType::Value => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                        let value = self.iter.value();
                        if self.saved_value.capacity() > value.len() + SAVED_VALUE_SLACK {
                            self.saved_value = Vec::new();
                        }
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(value);
                    }
                }
            }
            self.iter.prev();
        }
        if value_type == ValueType::Deletion || self.iter.status().is_err() {
            // Nothing visible before, or the internal cursor failed (its
            // status says why).
            self.valid = false;
            self.saved_key.clear();
            self.clear_saved_value();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
        }
    }

    fn stop_on_corrupt_key(&mut self, error: Error) {
        let reason = match &error {
            Error::Corruption { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        self.error = Some(Error::corruption(
            0,
            format!("corrupted internal key in DbIterator: {reason}"),
        ));
        self.valid = false;
        self.saved_key.clear();
        self.clear_saved_value();
        self.direction = Direction::Forward;
    }

    fn clear_saved_value(&mut self) {
        if self.saved_value.capacity() > SAVED_VALUE_SLACK {
            self.saved_value = Vec::new();
        } else {
            self.saved_value.clear();
        }
    }
}

impl KvIterator for DbIterator {
    fn valid(&self) -> bool {
        DbIterator::valid(self)
    }

    fn seek_to_first(&mut self) {
        DbIterator::seek_to_first(self);
    }

    fn seek_to_last(&mut self) {
        DbIterator::seek_to_last(self);
    }

    fn seek(&mut self, target: &[u8]) {
        DbIterator::seek(self, target);
    }

    fn next(&mut self) {
        DbIterator::next(self);
    }

    fn prev(&mut self) {
        DbIterator::prev(self);
    }

    fn key(&self) -> &[u8] {
        DbIterator::key(self)
    }

    fn value(&self) -> &[u8] {
        DbIterator::value(self)
    }

    fn status(&self) -> Result<(), Error> {
        DbIterator::status(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::MemTable;
    use proptest::prelude::*;
    use shale_format::comparator::{Comparator, InternalKeyComparator};
    use shale_format::internal_key::InternalKey;
    use shale_format::merging_iterator::merging_iterator;
    use shale_format::vec_iterator::VecIterator;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// One write: user key, tombstone or not, value. Its sequence is its
    /// index + 1.
    type Write = (Vec<u8>, bool, Vec<u8>);

    fn internal_comparator() -> Arc<dyn Comparator> {
        Arc::new(InternalKeyComparator)
    }

    /// The writes spread over a memtable and two in-memory runs by `run`,
    /// merged as the engine merges its layers.
    fn internal_iter(writes: &[Write], runs: &[u8]) -> Box<dyn KvIterator + Send> {
        let memtable = Arc::new(MemTable::new());
        let mut vec_runs: [Vec<(Vec<u8>, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
        for (i, (key, deletion, value)) in writes.iter().enumerate() {
            let sequence = i as u64 + 1;
            let value_type = if *deletion {
                ValueType::Deletion
            } else {
                ValueType::Value
            };
            match runs.get(i).copied().unwrap_or(0) % 3 {
                0 => memtable.add(sequence, value_type, key, value),
                run => vec_runs[usize::from(run) - 1].push((
                    InternalKey::new(key, sequence, value_type).into_encoded(),
                    value.clone(),
                )),
            }
        }
        let mut children: Vec<Box<dyn KvIterator + Send>> = vec![Box::new(memtable.iter())];
        for run in vec_runs {
            children.push(Box::new(VecIterator::new(internal_comparator(), run)));
        }
        merging_iterator(internal_comparator(), children)
    }

    fn model(
        writes: &[Write],
        snapshot: SequenceNumber,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut map = BTreeMap::new();
        for (i, (key, deletion, value)) in writes.iter().enumerate() {
            if i as u64 + 1 > snapshot {
                break;
            }
            if *deletion {
                map.remove(key);
            } else {
                map.insert(key.clone(), value.clone());
            }
        }
        map.into_iter()
            .filter(|(k, _)| lower.is_none_or(|l| k.as_slice() >= l))
            .filter(|(k, _)| upper.is_none_or(|u| k.as_slice() < u))
            .collect()
    }

    fn db_iter(
        writes: &[Write],
        runs: &[u8],
        snapshot: SequenceNumber,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> DbIterator {
        let mut iter = DbIterator::new(internal_iter(writes, runs), snapshot);
        if let Some(lower) = lower {
            iter = iter.with_lower_bound(lower.to_vec());
        }
        if let Some(upper) = upper {
            iter = iter.with_upper_bound(upper.to_vec());
        }
        iter
    }

    fn current(iter: &DbIterator) -> Option<(Vec<u8>, Vec<u8>)> {
        iter.valid()
            .then(|| (iter.key().to_vec(), iter.value().to_vec()))
    }

    fn forward(iter: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        iter.seek_to_first();
        while let Some(entry) = current(iter) {
            out.push(entry);
            iter.next();
        }
        out
    }

    fn backward(iter: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        iter.seek_to_last();
        while let Some(entry) = current(iter) {
            out.push(entry);
            iter.prev();
        }
        out.reverse();
        out
    }

    fn write(key: &str, value: Option<&str>) -> Write {
        match value {
            Some(value) => (key.as_bytes().to_vec(), false, value.as_bytes().to_vec()),
            None => (key.as_bytes().to_vec(), true, Vec::new()),
        }
    }

    fn pairs(entries: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        entries
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn db_iterator_is_send() {
        fn assert_send<T: Send>() {}
        assert_send::<DbIterator>();
    }

    #[test]
    fn snapshots_hide_newer_writes_and_tombstones_hide_older_ones() {
        let writes = vec![
            write("a", Some("a1")),
            write("b", Some("b2")),
            write("a", None),
            write("c", Some("c4")),
            write("b", Some("b5")),
        ];
        let runs = [1, 2, 0, 1, 0];
        for (snapshot, expected) in [
            (0, pairs(&[])),
            (1, pairs(&[("a", "a1")])),
            (2, pairs(&[("a", "a1"), ("b", "b2")])),
            (3, pairs(&[("b", "b2")])),
            (4, pairs(&[("b", "b2"), ("c", "c4")])),
            (5, pairs(&[("b", "b5"), ("c", "c4")])),
        ] {
            let mut iter = db_iter(&writes, &runs, snapshot, None, None);
            assert_eq!(forward(&mut iter), expected, "snapshot {snapshot}");
            assert_eq!(backward(&mut iter), expected, "snapshot {snapshot}");
            assert!(iter.status().is_ok());
        }

        let mut iter = db_iter(&writes, &runs, 5, None, None);
        iter.seek(b"a");
        assert_eq!(current(&iter), Some((b"b".to_vec(), b"b5".to_vec())));
        iter.prev();
        assert!(!iter.valid());
        iter.seek_to_last();
        assert_eq!(iter.key(), b"c");
        iter.prev();
        assert_eq!(iter.value(), b"b5");
        iter.next();
        assert_eq!(iter.value(), b"c4");
        iter.next();
        assert!(!iter.valid());
    }

    #[test]
    fn bounds_limit_both_directions() {
        let writes: Vec<Write> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| write(k, Some(k)))
            .collect();
        let runs = [0, 1, 2, 0, 1];
        let mut iter = db_iter(&writes, &runs, 9, Some(b"b"), Some(b"d"));
        assert_eq!(forward(&mut iter), pairs(&[("b", "b"), ("c", "c")]));
        assert_eq!(backward(&mut iter), pairs(&[("b", "b"), ("c", "c")]));
        iter.seek(b"a");
        assert_eq!(iter.key(), b"b");
        iter.seek(b"d");
        assert!(!iter.valid());
        let mut empty = db_iter(&writes, &runs, 9, Some(b"c"), Some(b"c"));
        assert!(forward(&mut empty).is_empty());
        assert!(backward(&mut empty).is_empty());
    }

    #[test]
    fn corrupt_internal_key_stops_with_corruption() {
        let mut bad_key = b"m".to_vec();
        bad_key.extend_from_slice(&((5u64 << 8) | 7).to_le_bytes());
        let entries = vec![
            (
                InternalKey::new(b"a", 1, ValueType::Value).into_encoded(),
                b"1".to_vec(),
            ),
            (bad_key, b"?".to_vec()),
            (
                InternalKey::new(b"y", 2, ValueType::Value).into_encoded(),
                b"2".to_vec(),
            ),
            (
                InternalKey::new(b"z", 3, ValueType::Value).into_encoded(),
                b"3".to_vec(),
            ),
        ];
        let internal = VecIterator::new(internal_comparator(), entries);
        let mut iter = DbIterator::new(Box::new(internal), 10);
        iter.seek_to_first();
        assert_eq!(iter.key(), b"a");
        iter.next();
        assert!(!iter.valid());
        assert!(iter.status().unwrap_err().is_corruption());
        iter.seek_to_last();
        assert_eq!(iter.key(), b"z");
        assert!(iter.status().is_ok());
        // Yielding "y" backward needs a look at the entry before it.
        iter.prev();
        assert!(!iter.valid());
        assert!(iter.status().unwrap_err().is_corruption());
        iter.seek(b"n");
        assert_eq!(iter.key(), b"y");
        assert!(iter.status().is_ok());
    }

    #[test]
    fn corrupt_key_met_while_turning_backward_stops_with_corruption() {
        // A version of "b" with an unknown type, sorted before b@3.
        let mut bad_key = b"b".to_vec();
        bad_key.extend_from_slice(&((20u64 << 8) | 7).to_le_bytes());
        let entries = vec![
            (
                InternalKey::new(b"a", 1, ValueType::Value).into_encoded(),
                b"1".to_vec(),
            ),
            (bad_key, b"?".to_vec()),
            (
                InternalKey::new(b"b", 3, ValueType::Value).into_encoded(),
                b"3".to_vec(),
            ),
        ];
        let internal = VecIterator::new(internal_comparator(), entries);
        let mut iter = DbIterator::new(Box::new(internal), 10);
        iter.seek(b"b");
        assert_eq!(iter.value(), b"3");
        iter.prev();
        assert!(!iter.valid());
        assert!(iter.status().unwrap_err().is_corruption());
    }

    #[test]
    fn internal_error_stops_the_iterator() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..5u8)
            .map(|i| {
                let key = InternalKey::new(&[b'a' + i], u64::from(i) + 1, ValueType::Value);
                (key.into_encoded(), vec![i])
            })
            .collect();
        let internal = VecIterator::new(internal_comparator(), entries)
            .fail_at(2, Error::corruption(3, "bad block"));
        let mut iter = DbIterator::new(Box::new(internal), 10);
        iter.seek_to_first();
        iter.next();
        assert_eq!(iter.key(), b"b");
        iter.next();
        assert!(!iter.valid());
        assert!(iter.status().unwrap_err().is_corruption());
        iter.seek_to_last();
        assert_eq!(iter.key(), b"e");
        // Yielding "d" backward needs a look at the failing entry before it.
        iter.prev();
        assert!(!iter.valid());
        assert!(iter.status().unwrap_err().is_corruption());
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
        proptest::collection::vec(b'a'..b'e', 0..3)
    }

    fn writes_strategy() -> impl Strategy<Value = Vec<Write>> {
        proptest::collection::vec(
            (
                key_strategy(),
                proptest::bool::weighted(0.3),
                proptest::collection::vec(any::<u8>(), 0..3),
            )
                .prop_map(|(k, deletion, v)| (k, deletion, if deletion { Vec::new() } else { v })),
            0..50,
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

    fn bound_strategy() -> impl Strategy<Value = Option<Vec<u8>>> {
        proptest::option::weighted(0.4, key_strategy())
    }

    proptest! {
        #[test]
        fn traversals_match_model(writes in writes_strategy(),
                                  runs in proptest::collection::vec(any::<u8>(), 50),
                                  lower in bound_strategy(), upper in bound_strategy(),
                                  targets in proptest::collection::vec(key_strategy(), 4)) {
            let snapshots = [0, 1, writes.len() as u64 / 3, writes.len() as u64 / 2,
                             writes.len() as u64, MAX_SEQUENCE_NUMBER];
            for snapshot in snapshots {
                let expected = model(&writes, snapshot, lower.as_deref(), upper.as_deref());
                let mut iter = db_iter(&writes, &runs, snapshot, lower.as_deref(), upper.as_deref());
                prop_assert_eq!(forward(&mut iter), expected.clone());
                prop_assert_eq!(backward(&mut iter), expected.clone());
                for target in &targets {
                    iter.seek(target);
                    let want = expected.iter().find(|(k, _)| k >= target).cloned();
                    prop_assert_eq!(current(&iter), want);
                }
                prop_assert!(iter.status().is_ok());
            }
        }

        #[test]
        fn mixed_moves_match_model(writes in writes_strategy(),
                                   runs in proptest::collection::vec(any::<u8>(), 50),
                                   lower in bound_strategy(), upper in bound_strategy(),
                                   snapshot_fraction in 0u64..=4,
                                   ops in proptest::collection::vec(op_strategy(), 0..60)) {
            let snapshot = writes.len() as u64 * snapshot_fraction / 4;
            let expected = model(&writes, snapshot, lower.as_deref(), upper.as_deref());
            let mut iter = db_iter(&writes, &runs, snapshot, lower.as_deref(), upper.as_deref());
            let mut position: Option<usize> = None;
            for op in ops {
                match op {
                    Op::Next => {
                        let Some(at) = position else { continue };
                        iter.next();
                        position = (at + 1 < expected.len()).then_some(at + 1);
                    }
                    Op::Prev => {
                        let Some(at) = position else { continue };
                        iter.prev();
                        position = at.checked_sub(1);
                    }
                    Op::Seek(target) => {
                        iter.seek(&target);
                        position = expected.iter().position(|(k, _)| *k >= target);
                    }
                    Op::SeekToFirst => {
                        iter.seek_to_first();
                        position = (!expected.is_empty()).then_some(0);
                    }
                    Op::SeekToLast => {
                        iter.seek_to_last();
                        position = expected.len().checked_sub(1);
                    }
                }
                prop_assert_eq!(current(&iter), position.map(|at| expected[at].clone()));
            }
            prop_assert!(iter.status().is_ok());
        }
    }
}
