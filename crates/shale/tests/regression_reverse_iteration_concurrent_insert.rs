//! Regression (found by `shale stress`): a backward iterator bounded above
//! returned a key at or past its upper bound while other threads wrote.
//!
//! When the merging iterator turns backward it seeks every other child to
//! the current key and steps each back one entry. The memtable is written
//! while it is read: an entry inserted between a child's seek and its step
//! back (after the current key, before where the seek landed) left that
//! child positioned after the current entry. The merge then went back to
//! that new entry, which is invisible at the iterator's sequence, and from
//! there to the current entry again, so `DbIterator::seek_to_last` (a seek
//! to the upper bound, then a step back) yielded the first key at or after
//! the bound. A child that turns backward must end before the current
//! entry, whatever it gained meanwhile.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use shale::format::comparator::BytewiseComparator;
use shale::format::error::Error;
use shale::format::iterator::KvIterator;
use shale::format::merging_iterator::merging_iterator;
use shale::{Options, ReadOptions, WriteOptions, DB};

/// A sorted cursor that gains `late` right after its second seek (the
/// merge's first seek is the caller's; the second, the merge's own when it
/// turns backward), as a memtable does when a writer inserts between the
/// merge's seek and its step back.
struct GrowingChild {
    entries: Vec<Vec<u8>>,
    late: Option<Vec<u8>>,
    position: Option<usize>,
    seeks: usize,
}

impl GrowingChild {
    fn new(entries: &[&str], late: &str) -> GrowingChild {
        GrowingChild {
            entries: entries.iter().map(|e| e.as_bytes().to_vec()).collect(),
            late: Some(late.as_bytes().to_vec()),
            position: None,
            seeks: 0,
        }
    }
}

impl KvIterator for GrowingChild {
    fn valid(&self) -> bool {
        self.position.is_some()
    }
    fn seek_to_first(&mut self) {
        self.position = (!self.entries.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.position = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let at = self.entries.partition_point(|e| e.as_slice() < target);
        self.position = (at < self.entries.len()).then_some(at);
        self.seeks += 1;
        if self.seeks < 2 {
            return;
        }
        if let Some(late) = self.late.take() {
            // The concurrent insert, after the seek has landed.
            let at_late = self.entries.partition_point(|e| *e < late);
            self.entries.insert(at_late, late);
            if let Some(p) = self.position.as_mut() {
                if at_late <= *p {
                    *p += 1;
                }
            }
        }
    }
    fn next(&mut self) {
        self.position = self
            .position
            .map(|p| p + 1)
            .filter(|&p| p < self.entries.len());
    }
    fn prev(&mut self) {
        self.position = self.position.and_then(|p| p.checked_sub(1));
    }
    fn key(&self) -> &[u8] {
        self.position.map_or(&[], |p| &self.entries[p])
    }
    fn value(&self) -> &[u8] {
        b""
    }
    fn status(&self) -> Result<(), Error> {
        Ok(())
    }
}

fn keys_backward_from(children: Vec<Box<dyn KvIterator + Send>>, target: &str) -> Vec<String> {
    let mut merged = merging_iterator(Arc::new(BytewiseComparator), children);
    merged.seek(target.as_bytes());
    let mut out = vec![String::from_utf8_lossy(merged.key()).into_owned()];
    merged.prev();
    while merged.valid() {
        out.push(String::from_utf8_lossy(merged.key()).into_owned());
        merged.prev();
    }
    out
}

#[test]
fn merge_turning_backward_ignores_entries_inserted_after_the_seek() {
    // The "memtable" (child 0) gains "m" between its seek to "c" and its
    // step back; the current entry is "c" in child 1.
    let memtable = GrowingChild::new(&["a", "z"], "m");
    let table = GrowingChild {
        late: None,
        ..GrowingChild::new(&["b", "c", "d"], "")
    };
    let keys = keys_backward_from(vec![Box::new(memtable), Box::new(table)], "c");
    assert_eq!(keys, ["c", "b", "a"]);
}

#[test]
fn merge_turning_backward_from_an_exhausted_child_ignores_new_entries() {
    // The memtable child has nothing at or after "c" when it seeks, so it
    // goes to its last entry, which by then is the late "x".
    let memtable = GrowingChild::new(&["a"], "x");
    let table = GrowingChild {
        late: None,
        ..GrowingChild::new(&["b", "c", "d"], "")
    };
    let keys = keys_backward_from(vec![Box::new(memtable), Box::new(table)], "c");
    assert_eq!(keys, ["c", "b", "a"]);
}

/// The engine end to end: writers fill the memtable while readers walk
/// bounded ranges backward; no key at or past the upper bound may appear,
/// and keys must come out strictly descending.
#[test]
fn bounded_backward_iteration_under_concurrent_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(
        dir.path(),
        Options {
            create_if_missing: true,
            write_buffer_size: 1 << 20,
            ..Options::default()
        },
    )
    .unwrap();
    let key = |i: u64| format!("key{i:06}").into_bytes();
    for i in (0..2000).step_by(3) {
        db.put(&WriteOptions::default(), &key(i), b"v").unwrap();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for writer in 0..2u64 {
            let (db, stop) = (&db, &stop);
            scope.spawn(move || {
                let mut n = writer;
                while !stop.load(Ordering::Relaxed) {
                    n = n
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    db.put(&WriteOptions::default(), &key((n >> 33) % 2000), b"w")
                        .unwrap();
                }
            });
        }
        for round in 0..3000u64 {
            let first = (round * 7919) % 1990;
            let end = first + 1 + round % 9;
            let read = ReadOptions {
                lower_bound: Some(key(first)),
                upper_bound: Some(key(end)),
                ..ReadOptions::new()
            };
            let mut iter = db.iter(&read).unwrap();
            iter.seek_to_last();
            let mut previous: Option<Vec<u8>> = None;
            while iter.valid() {
                let k = iter.key().to_vec();
                assert!(
                    k < key(end) && k >= key(first),
                    "{:?} outside {first}..{end}",
                    String::from_utf8_lossy(&k)
                );
                if let Some(p) = &previous {
                    assert!(k < *p, "not descending");
                }
                previous = Some(k);
                iter.prev();
            }
            iter.status().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
}
