//! Snapshots: a sequence number pinned for reads, released when the last
//! clone of its handle is dropped. Compactions keep every version a live
//! snapshot can see.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use shale_format::internal_key::SequenceNumber;

/// The sequence numbers of live snapshots, with how many handles pin each.
#[derive(Debug, Default)]
pub struct SnapshotList {
    pinned: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotList {
    /// Pins `sequence` and returns its handle.
    pub fn acquire(self: &Arc<Self>, sequence: SequenceNumber) -> Snapshot {
        *self.lock().entry(sequence).or_insert(0) += 1;
        Snapshot {
            inner: Arc::new(SnapshotInner {
                sequence,
                list: Arc::downgrade(self),
            }),
        }
    }

    /// The oldest pinned sequence, if any snapshot is live.
    pub fn oldest(&self) -> Option<SequenceNumber> {
        self.lock().keys().next().copied()
    }

    /// Number of live snapshots (distinct handles, not clones).
    #[allow(
        dead_code,
        reason = "public API until `snapshot` became crate-private; no caller in the crate yet"
    )]
    pub fn len(&self) -> usize {
        self.lock().values().sum()
    }

    /// True when no snapshot is live.
    #[allow(
        dead_code,
        reason = "public API until `snapshot` became crate-private; no caller in the crate yet"
    )]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<SequenceNumber, usize>> {
        // A panic while holding this lock cannot leave the map inconsistent
        // (single insert/remove), so a poisoned lock is still usable.
        self.pinned.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn release(&self, sequence: SequenceNumber) {
        let mut pinned = self.lock();
        if let Some(count) = pinned.get_mut(&sequence) {
            *count -= 1;
            if *count == 0 {
                pinned.remove(&sequence);
            }
        }
    }
}

struct SnapshotInner {
    sequence: SequenceNumber,
    list: Weak<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        if let Some(list) = self.list.upgrade() {
            list.release(self.sequence);
        }
    }
}

/// A consistent point-in-time view for reads. Cheap to clone; released when
/// the last clone is dropped.
///
/// Take one with [`DB::snapshot`](crate::db::DB::snapshot) and read through it
/// with [`ReadOptions::snapshot`](crate::ReadOptions::snapshot): gets and
/// iterators then see the database as it was when the snapshot was taken,
/// whatever is written after. A live snapshot keeps compactions from
/// dropping the older versions it can see, so release it when done.
///
/// ```
/// use shale::{Options, ReadOptions, WriteOptions, DB};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// db.put(&WriteOptions::default(), b"k", b"before")?;
///
/// let snapshot = db.snapshot();
/// db.put(&WriteOptions::default(), b"k", b"after")?;
/// db.put(&WriteOptions::default(), b"new", b"key")?;
///
/// let at = ReadOptions { snapshot: Some(snapshot.clone()), ..ReadOptions::new() };
/// assert_eq!(db.get(&at, b"k")?, Some(b"before".to_vec()));
/// assert_eq!(db.get(&at, b"new")?, None);
/// assert_eq!(shale::range::entries(&db, &at, ..)?.count(), 1);
/// assert_eq!(db.get(&ReadOptions::new(), b"k")?, Some(b"after".to_vec()));
///
/// // Released when its last clone (here the one in `at`) is dropped.
/// drop(snapshot);
/// drop(at);
/// # Ok::<(), shale::Error>(())
/// ```
#[derive(Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number reads through this snapshot see.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.sequence
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Snapshot({})", self.inner.sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_when_last_clone_drops() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(5);
        let b = list.acquire(9);
        let a2 = a.clone();
        assert_eq!(list.oldest(), Some(5));
        drop(a);
        assert_eq!(list.oldest(), Some(5));
        drop(a2);
        assert_eq!(list.oldest(), Some(9));
        drop(b);
        assert_eq!(list.oldest(), None);
    }
}
