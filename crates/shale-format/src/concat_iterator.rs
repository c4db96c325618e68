//! A cursor over several sorted, non-overlapping sources laid end to end: the
//! tables of one level (L1 and deeper), where file i holds only keys below
//! those of file i+1. Sources are opened lazily, so a scan of one key range
//! touches only the files it needs (LevelDB's level-file two-level iterator).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::comparator::Comparator;
use crate::error::{Error, Result};
use crate::iterator::KvIterator;

/// Opens source `index`.
pub type OpenSource = Box<dyn FnMut(usize) -> Result<Box<dyn KvIterator + Send>> + Send>;

/// Concatenation of sources whose key ranges do not overlap and are in order.
pub struct ConcatIterator {
    comparator: Arc<dyn Comparator>,
    /// Largest key of each source, in order.
    largest: Vec<Vec<u8>>,
    open: OpenSource,
    current: Option<(usize, Box<dyn KvIterator + Send>)>,
    error: Option<Error>,
}

impl fmt::Debug for ConcatIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcatIterator")
            .field("sources", &self.largest.len())
            .field("current", &self.current.as_ref().map(|(i, _)| *i))
            .finish()
    }
}

impl ConcatIterator {
    /// `largest[i]` is the largest key of source `i`; `open(i)` opens it.
    pub fn new(
        comparator: Arc<dyn Comparator>,
        largest: Vec<Vec<u8>>,
        open: OpenSource,
    ) -> ConcatIterator {
        ConcatIterator {
            comparator,
            largest,
            open,
            current: None,
            error: None,
        }
    }

    /// Makes source `index` current (reusing it when it already is).
    fn select(&mut self, index: usize) -> bool {
        if index >= self.largest.len() {
            self.current = None;
            return false;
        }
        if self.current.as_ref().is_some_and(|(i, _)| *i == index) {
            return true;
        }
        match (self.open)(index) {
            Ok(iter) => {
                self.current = Some((index, iter));
                true
            }
            Err(err) => {
                self.error.get_or_insert(err);
                self.current = None;
                false
            }
        }
    }

    /// Records a source error and stops.
    fn check_current(&mut self) -> bool {
        if let Some((_, iter)) = &self.current {
            if let Err(err) = iter.status() {
                self.error.get_or_insert(err);
                self.current = None;
                return false;
            }
        }
        true
    }

    fn skip_forward(&mut self) {
        while self.check_current() {
            let Some((index, iter)) = &self.current else {
                return;
            };
            if iter.valid() {
                return;
            }
            let next = *index + 1;
            if !self.select(next) {
                return;
            }
            if let Some((_, iter)) = &mut self.current {
                iter.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while self.check_current() {
            let Some((index, iter)) = &self.current else {
                return;
            };
            if iter.valid() {
                return;
            }
            if *index == 0 {
                self.current = None;
                return;
            }
            let prev = *index - 1;
            if !self.select(prev) {
                return;
            }
            if let Some((_, iter)) = &mut self.current {
                iter.seek_to_last();
            }
        }
    }
}

impl KvIterator for ConcatIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|(_, it)| it.valid())
    }

    fn seek_to_first(&mut self) {
        if self.select(0) {
            if let Some((_, iter)) = &mut self.current {
                iter.seek_to_first();
            }
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        let Some(last) = self.largest.len().checked_sub(1) else {
            self.current = None;
            return;
        };
        if self.select(last) {
            if let Some((_, iter)) = &mut self.current {
                iter.seek_to_last();
            }
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        // The first source whose largest key is >= target.
        let index = self
            .largest
            .partition_point(|largest| self.comparator.compare(largest, target) == Ordering::Less);
        if self.select(index) {
            if let Some((_, iter)) = &mut self.current {
                iter.seek(target);
            }
        }
        self.skip_forward();
    }

    fn next(&mut self) {
        if let Some((_, iter)) = &mut self.current {
            iter.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if let Some((_, iter)) = &mut self.current {
            iter.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, it)| it.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, it)| it.value())
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::Block;
    use crate::block_builder::BlockBuilder;
    use crate::comparator::BytewiseComparator;
    use crate::iterator::collect_all;

    fn source(keys: &[&str]) -> Block {
        let mut builder = BlockBuilder::new(2);
        for k in keys {
            builder.add(k.as_bytes(), b"v");
        }
        Block::new(builder.finish().to_vec()).unwrap()
    }

    fn concat(parts: Vec<Vec<&str>>) -> ConcatIterator {
        let blocks: Vec<Block> = parts.iter().map(|p| source(p)).collect();
        let largest = parts
            .iter()
            .map(|p| p.last().map(|k| k.as_bytes().to_vec()).unwrap_or_default())
            .collect();
        ConcatIterator::new(
            Arc::new(BytewiseComparator),
            largest,
            Box::new(move |i| {
                Ok(Box::new(blocks[i].iter(Arc::new(BytewiseComparator)))
                    as Box<dyn KvIterator + Send>)
            }),
        )
    }

    #[test]
    fn walks_all_sources_both_ways() {
        let mut it = concat(vec![vec!["a", "b"], vec!["c"], vec!["d", "e", "f"]]);
        let keys: Vec<Vec<u8>> = collect_all(&mut it)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            vec![
                b"a".to_vec(),
                b"b".to_vec(),
                b"c".to_vec(),
                b"d".to_vec(),
                b"e".to_vec(),
                b"f".to_vec()
            ]
        );
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.key().to_vec());
            it.prev();
        }
        assert_eq!(back.len(), 6);
        assert_eq!(back[0], b"f");
        it.seek(b"bb");
        assert_eq!(it.key(), b"c");
        it.seek(b"g");
        assert!(!it.valid());
        it.seek(b"");
        assert_eq!(it.key(), b"a");
    }

    #[test]
    fn open_errors_stop_the_scan() {
        let mut it = ConcatIterator::new(
            Arc::new(BytewiseComparator),
            vec![b"a".to_vec()],
            Box::new(|_| Err(Error::corruption(0, "broken"))),
        );
        it.seek_to_first();
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());
    }
}
