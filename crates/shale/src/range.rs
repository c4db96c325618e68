//! Range and prefix scans as a Rust [`Iterator`]: [`Entries`] yields owned
//! `(key, value)` pairs, in key order forward and (through
//! [`DoubleEndedIterator`]) backward, on top of the cursor [`DbIterator`].
//!
//! * [`entries`]: the user keys in a range, `..`, `a..b`, `a..=b`, `a..`,
//!   `..b`, or a pair of [`Bound`]s, each end a `&[u8]`.
//! * [`prefix`]: the user keys that start with a prefix (bytewise order).
//! * [`DbIterator::into_entries`] and [`DbIterator::into_range`]: from a
//!   cursor already open.
//!
//! The range is intersected with the bounds in the [`ReadOptions`], and read
//! at its snapshot (or at the moment the scan was opened), as the cursor is.
//! An error (a damaged block, an I/O error) is yielded once, as `Err`, as
//! soon as the cursor reports it, and the iterator ends after it.
//!
//! ```
//! use shale::{Options, ReadOptions, WriteOptions, DB};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
//! for key in ["apple", "banana", "blueberry", "cherry"] {
//!     db.put(&WriteOptions::default(), key.as_bytes(), b"fruit")?;
//! }
//!
//! // Keys from "b" (inclusive) to "c" (exclusive).
//! let lower: &[u8] = b"b";
//! let upper: &[u8] = b"c";
//! let mut keys = Vec::new();
//! for entry in shale::range::entries(&db, &ReadOptions::new(), lower..upper)? {
//!     let (key, _value) = entry?;
//!     keys.push(String::from_utf8(key).unwrap());
//! }
//! assert_eq!(keys, ["banana", "blueberry"]);
//!
//! // The same keys as a prefix scan, last first.
//! let last = shale::range::prefix(&db, &ReadOptions::new(), b"b")?.next_back();
//! assert_eq!(last.transpose()?, Some((b"blueberry".to_vec(), b"fruit".to_vec())));
//! # Ok::<(), shale::Error>(())
//! ```

use std::cmp::Ordering;
use std::iter::FusedIterator;
use std::ops::{Bound, RangeBounds};

use shale_format::{Error, Result};

use crate::db::DB;
use crate::db_iter::DbIterator;
use crate::options::ReadOptions;

/// The user keys of `db` in `range`, as an iterator of `(key, value)` pairs
/// in key order (and, with [`Iterator::rev`] or
/// [`DoubleEndedIterator::next_back`], backward). The range is intersected
/// with `options.lower_bound` and `options.upper_bound`; an empty or
/// inverted range yields nothing.
///
/// ```
/// use std::ops::Bound;
/// use shale::{Options, ReadOptions, WriteOptions, DB};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for key in [b"a", b"b", b"c", b"d"] {
///     db.put(&WriteOptions::default(), key, b"v")?;
/// }
/// let options = ReadOptions::new();
/// let keys = |entries: shale::range::Entries| -> shale::Result<Vec<Vec<u8>>> {
///     entries.map(|entry| entry.map(|(key, _)| key)).collect()
/// };
/// let b: &[u8] = b"b";
/// let c: &[u8] = b"c";
/// assert_eq!(keys(shale::range::entries(&db, &options, ..)?)?.len(), 4);
/// assert_eq!(keys(shale::range::entries(&db, &options, b..c)?)?, [b"b"]);
/// assert_eq!(keys(shale::range::entries(&db, &options, b..=c)?)?, [b"b", b"c"]);
/// assert_eq!(keys(shale::range::entries(&db, &options, ..b)?)?, [b"a"]);
/// let after_b = (Bound::Excluded(b), Bound::Unbounded);
/// assert_eq!(keys(shale::range::entries(&db, &options, after_b)?)?, [b"c", b"d"]);
/// # Ok::<(), shale::Error>(())
/// ```
pub fn entries<'a>(
    db: &DB,
    options: &ReadOptions,
    range: impl RangeBounds<&'a [u8]>,
) -> Result<Entries> {
    Ok(db.iter(options)?.into_range(range))
}

/// The user keys of `db` that start with `prefix`, as an iterator of `(key,
/// value)` pairs in key order (and backward). The range is `prefix`
/// (inclusive) to the prefix's successor (exclusive: `prefix` with its
/// trailing `0xff` bytes dropped and its last byte incremented; none when
/// `prefix` is empty or all `0xff`), intersected with the bounds in
/// `options`.
///
/// A prefix is a range only in bytewise order: a database opened with a
/// custom [`Options::comparator`](crate::Options::comparator) gives
/// [`Error::InvalidArgument`].
///
/// ```
/// use shale::{Options, ReadOptions, WriteOptions, DB};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for key in [&b"user/1"[..], b"user/2", b"users", b"user\xff", b"v"] {
///     db.put(&WriteOptions::default(), key, b"v")?;
/// }
/// let keys: Vec<Vec<u8>> = shale::range::prefix(&db, &ReadOptions::new(), b"user/")?
///     .map(|entry| entry.map(|(key, _)| key))
///     .collect::<shale::Result<_>>()?;
/// assert_eq!(keys, [b"user/1", b"user/2"]);
/// # Ok::<(), shale::Error>(())
/// ```
pub fn prefix(db: &DB, options: &ReadOptions, prefix: &[u8]) -> Result<Entries> {
    let cursor = db.iter(options)?;
    if !cursor.order().is_bytewise() {
        return Err(Error::InvalidArgument(format!(
            "a prefix scan needs bytewise key order, not the comparator {}",
            cursor.order().name()
        )));
    }
    let successor = prefix_successor(prefix);
    let upper = match &successor {
        Some(successor) => Bound::Excluded(successor.as_slice()),
        None => Bound::Unbounded,
    };
    Ok(cursor.into_range((Bound::Included(prefix), upper)))
}

/// The smallest byte string greater than every string that starts with
/// `prefix` (bytewise), or `None` when there is none (`prefix` empty or all
/// `0xff`).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut successor = prefix.to_vec();
    while let Some(last) = successor.last_mut() {
        if *last == 0xff {
            successor.pop();
        } else {
            *last += 1;
            return Some(successor);
        }
    }
    None
}

/// Where the cursor stands relative to what the iterator yields next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Anywhere: both ends seek before they read.
    Nowhere,
    /// On the entry [`Iterator::next`] yields next.
    OnNext,
    /// On the entry [`Iterator::next`] yielded last.
    Front,
    /// On the entry [`DoubleEndedIterator::next_back`] yielded last.
    Back,
}

/// An iterator of `(key, value)` pairs over a [`DbIterator`], from
/// [`entries`], [`prefix`], [`DbIterator::into_entries`] or
/// [`DbIterator::into_range`].
///
/// Forward it steps the cursor; backward ([`DoubleEndedIterator`]) too. The
/// two ends meet in the middle and never yield an entry twice; each switch
/// from one end to the other costs one seek. When the cursor stops with an
/// error, the error is yielded once and the iterator ends
/// ([`FusedIterator`]).
#[derive(Debug)]
pub struct Entries {
    cursor: DbIterator,
    /// Keys still to yield are after this one (the last key `next` yielded,
    /// or the start of the range).
    lower: Bound<Vec<u8>>,
    /// Keys still to yield are before this one (the last key `next_back`
    /// yielded, or the end of the range).
    upper: Bound<Vec<u8>>,
    at: At,
    /// An error found when the iterator was made, yielded first.
    pending: Option<Error>,
    done: bool,
}

impl Entries {
    /// From the current entry of `cursor`, or its first entry when it is on
    /// none (an error that stopped it is yielded first).
    pub(crate) fn from_cursor(cursor: DbIterator) -> Entries {
        let (lower, at, pending) = if cursor.valid() {
            (Bound::Included(cursor.key().to_vec()), At::OnNext, None)
        } else {
            (Bound::Unbounded, At::Nowhere, cursor.status().err())
        };
        Entries {
            cursor,
            lower,
            upper: Bound::Unbounded,
            at,
            pending,
            done: false,
        }
    }

    /// Over the keys of `range` within the bounds `cursor` has.
    pub(crate) fn from_range<'a>(
        mut cursor: DbIterator,
        range: impl RangeBounds<&'a [u8]>,
    ) -> Entries {
        let lower = range.start_bound().map(|key| key.to_vec());
        let upper = range.end_bound().map(|key| key.to_vec());
        // The cursor's own bounds stop its scan at the range's ends (without
        // one, a scan past the end could walk a long run of deleted keys
        // before it finds the key that ends the range). An inclusive end has
        // no exclusive bound to give it in an arbitrary order; the checks
        // below keep to it.
        let cursor_lower = match &lower {
            Bound::Included(key) | Bound::Excluded(key) => Some(key.as_slice()),
            Bound::Unbounded => None,
        };
        let cursor_upper = match &upper {
            Bound::Excluded(key) => Some(key.as_slice()),
            Bound::Included(_) | Bound::Unbounded => None,
        };
        cursor.narrow_bounds(cursor_lower, cursor_upper);
        Entries {
            cursor,
            lower,
            upper,
            at: At::Nowhere,
            pending: None,
            done: false,
        }
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        self.cursor.order().compare_user(a, b)
    }

    /// True when `key` is after the lower end of what is left.
    fn above_lower(&self, key: &[u8]) -> bool {
        match &self.lower {
            Bound::Unbounded => true,
            Bound::Included(lower) => self.compare(key, lower).is_ge(),
            Bound::Excluded(lower) => self.compare(key, lower).is_gt(),
        }
    }

    /// True when `key` is before the upper end of what is left.
    fn below_upper(&self, key: &[u8]) -> bool {
        match &self.upper {
            Bound::Unbounded => true,
            Bound::Included(upper) => self.compare(key, upper).is_le(),
            Bound::Excluded(upper) => self.compare(key, upper).is_lt(),
        }
    }

    /// Puts the cursor on the first key left (or past the end).
    fn seek_front(&mut self) {
        match &self.lower {
            Bound::Unbounded => self.cursor.seek_to_first(),
            Bound::Included(lower) => self.cursor.seek(lower),
            Bound::Excluded(lower) => {
                self.cursor.seek(lower);
                if self.cursor.valid()
                    && self
                        .cursor
                        .order()
                        .compare_user(self.cursor.key(), lower)
                        .is_eq()
                {
                    self.cursor.next();
                }
            }
        }
    }

    /// Puts the cursor on the last key left (or past the start).
    fn seek_back(&mut self) {
        let (upper, inclusive) = match &self.upper {
            Bound::Unbounded => {
                self.cursor.seek_to_last();
                return;
            }
            Bound::Included(upper) => (upper, true),
            Bound::Excluded(upper) => (upper, false),
        };
        self.cursor.seek(upper);
        if self.cursor.valid() {
            let on_upper = self
                .cursor
                .order()
                .compare_user(self.cursor.key(), upper)
                .is_eq();
            if !(inclusive && on_upper) {
                self.cursor.prev();
            }
        } else if self.cursor.status().is_ok() {
            // Every key is before `upper`.
            self.cursor.seek_to_last();
        }
    }

    /// Ends the iteration: the cursor's error if it has one, else nothing.
    fn finish(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        self.done = true;
        self.cursor.status().err().map(Err)
    }

    /// The error found when the iterator was made, if not yet yielded.
    fn take_pending(&mut self) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        let error = self.pending.take()?;
        self.done = true;
        Some(Err(error))
    }
}

impl Iterator for Entries {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.pending.is_some() {
            return self.take_pending();
        }
        match self.at {
            At::OnNext => {}
            // The cursor is on the key `next` yielded last.
            At::Front => self.cursor.next(),
            At::Nowhere | At::Back => self.seek_front(),
        }
        if !self.cursor.valid() || self.cursor.status().is_err() {
            // At the end, or stopped by an error. A merge of several sources
            // can stay valid after one of them failed: stop at the first
            // sign of trouble rather than hand out entries with a gap.
            return self.finish();
        }
        let key = self.cursor.key();
        if !self.below_upper(key) {
            // Past the range's end, or at a key `next_back` yielded.
            self.done = true;
            return None;
        }
        let entry = (key.to_vec(), self.cursor.value().to_vec());
        self.lower = Bound::Excluded(entry.0.clone());
        self.at = At::Front;
        Some(Ok(entry))
    }
}

impl DoubleEndedIterator for Entries {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.pending.is_some() {
            return self.take_pending();
        }
        match self.at {
            // The cursor is on the key `next_back` yielded last.
            At::Back => self.cursor.prev(),
            At::Nowhere | At::OnNext | At::Front => self.seek_back(),
        }
        if !self.cursor.valid() || self.cursor.status().is_err() {
            // At the end, or stopped by an error. A merge of several sources
            // can stay valid after one of them failed: stop at the first
            // sign of trouble rather than hand out entries with a gap.
            return self.finish();
        }
        let key = self.cursor.key();
        if !self.above_lower(key) {
            // Before the range's start, or at a key `next` yielded.
            self.done = true;
            return None;
        }
        let entry = (key.to_vec(), self.cursor.value().to_vec());
        self.upper = Bound::Excluded(entry.0.clone());
        self.at = At::Back;
        Some(Ok(entry))
    }
}

impl FusedIterator for Entries {}

/// The cursor's way into the range iterator (here, beside [`Entries`],
/// so that the cursor's module does not depend on this one).
impl DbIterator {
    /// This cursor as an [`Iterator`] of owned `(key, value)` pairs (see
    /// [`Entries`]). Iteration starts at the current entry if the cursor is
    /// on one, and otherwise (never positioned, or moved past either end) at
    /// the first entry. A cursor stopped by an error yields that error.
    ///
    /// ```
    /// use shale::{Options, ReadOptions, WriteOptions, DB};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for key in [b"a", b"b", b"c"] {
    ///     db.put(&WriteOptions::default(), key, b"v")?;
    /// }
    /// let mut cursor = db.iter(&ReadOptions::new())?;
    /// cursor.seek(b"b");
    /// let keys: Vec<Vec<u8>> = cursor
    ///     .into_entries()
    ///     .map(|entry| entry.map(|(key, _value)| key))
    ///     .collect::<shale::Result<_>>()?;
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// # Ok::<(), shale::Error>(())
    /// ```
    pub fn into_entries(self) -> Entries {
        Entries::from_cursor(self)
    }

    /// This cursor as an [`Iterator`] over the user keys in `range` (within
    /// the bounds the cursor already has), whatever its current position.
    /// See [`range::entries`](crate::range::entries), which opens the cursor
    /// too.
    ///
    /// ```
    /// use shale::{Options, ReadOptions, WriteOptions, DB};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
    /// for key in [b"a", b"b", b"c", b"d"] {
    ///     db.put(&WriteOptions::default(), key, b"v")?;
    /// }
    /// let lower: &[u8] = b"b";
    /// let upper: &[u8] = b"c";
    /// let keys: Vec<Vec<u8>> = db
    ///     .iter(&ReadOptions::new())?
    ///     .into_range(lower..=upper)
    ///     .rev()
    ///     .map(|entry| entry.map(|(key, _value)| key))
    ///     .collect::<shale::Result<_>>()?;
    /// assert_eq!(keys, [b"c".to_vec(), b"b".to_vec()]);
    /// # Ok::<(), shale::Error>(())
    /// ```
    pub fn into_range<'a>(self, range: impl RangeBounds<&'a [u8]>) -> Entries {
        Entries::from_range(self, range)
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_successor;

    #[test]
    fn successor_of_a_prefix() {
        assert_eq!(prefix_successor(b"abc"), Some(b"abd".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"a\xfe\xff\xff"), Some(b"a\xff".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }
}
