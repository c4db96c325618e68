//! A cursor over entries held in memory: the stand-in for a table or a
//! memtable in tests of everything built on [`KvIterator`] (merging, the
//! user-facing iterator, compaction), and a way for tools to feed sorted
//! data to the same code.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::comparator::Comparator;
use crate::error::Error;
use crate::iterator::{Entry, KvIterator};

/// A [`KvIterator`] over an owned, sorted vector of entries. It can be told
/// to fail when it reaches a given entry, to exercise error paths.
pub struct VecIterator {
    comparator: Arc<dyn Comparator>,
    entries: Vec<Entry>,
    /// Index of the current entry; `None` when not valid.
    position: Option<usize>,
    /// Landing on this entry stops the cursor with this error.
    fail_at: Option<(usize, Error)>,
    error: Option<Error>,
}

impl std::fmt::Debug for VecIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VecIterator")
            .field("comparator", &self.comparator)
            .field("entries", &self.entries.len())
            .field("position", &self.position)
            .field("error", &self.error)
            .finish()
    }
}

impl VecIterator {
    /// A cursor over `entries`, which are sorted by `comparator` here (a
    /// stable sort: entries with equal keys keep their order). The cursor
    /// starts unpositioned.
    pub fn new(comparator: Arc<dyn Comparator>, mut entries: Vec<Entry>) -> VecIterator {
        entries.sort_by(|a, b| comparator.compare(&a.0, &b.0));
        VecIterator {
            comparator,
            entries,
            position: None,
            fail_at: None,
            error: None,
        }
    }

    /// Makes every move that lands on entry `index` (in sorted order) stop
    /// the cursor with `error` instead, as a damaged block would.
    #[must_use]
    pub fn fail_at(mut self, index: usize, error: Error) -> VecIterator {
        self.fail_at = Some((index, error));
        self
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn land(&mut self, position: Option<usize>) {
        self.error = None;
        self.position = position.filter(|&at| at < self.entries.len());
        if let (Some(at), Some((fail, error))) = (self.position, &self.fail_at) {
            if at == *fail {
                self.error = Some(error.clone());
                self.position = None;
            }
        }
    }

    fn current(&self) -> Option<&Entry> {
        self.position.and_then(|at| self.entries.get(at))
    }
}

impl KvIterator for VecIterator {
    fn valid(&self) -> bool {
        self.position.is_some()
    }

    fn seek_to_first(&mut self) {
        self.land(Some(0));
    }

    fn seek_to_last(&mut self) {
        self.land(self.entries.len().checked_sub(1));
    }

    fn seek(&mut self, target: &[u8]) {
        let at = self
            .entries
            .partition_point(|(key, _)| self.comparator.compare(key, target) == Ordering::Less);
        self.land(Some(at));
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next() on an invalid VecIterator");
        self.land(self.position.map(|at| at + 1));
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev() on an invalid VecIterator");
        self.land(self.position.and_then(|at| at.checked_sub(1)));
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], |(key, _)| key)
    }

    fn value(&self) -> &[u8] {
        self.current().map_or(&[], |(_, value)| value)
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
    use crate::iterator::collect_all;

    #[test]
    fn sorts_seeks_and_fails_on_request() {
        let entries = vec![
            (b"c".to_vec(), b"3".to_vec()),
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
        ];
        let mut iter = VecIterator::new(Arc::new(BytewiseComparator), entries);
        let all = collect_all(&mut iter).unwrap();
        assert_eq!(all[0].0, b"a");
        assert_eq!(all[2].0, b"c");
        iter.seek(b"bb");
        assert_eq!(iter.key(), b"c");
        iter.prev();
        assert_eq!(iter.value(), b"2");
        iter.seek(b"d");
        assert!(!iter.valid());

        let mut failing = iter.fail_at(1, Error::corruption(0, "injected"));
        failing.seek_to_first();
        failing.next();
        assert!(!failing.valid());
        assert!(failing.status().unwrap_err().is_corruption());
        failing.seek_to_last();
        assert_eq!(failing.key(), b"c");
        assert!(failing.status().is_ok());
    }
}
