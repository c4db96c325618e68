//! The cursor interface shared by blocks, tables and (in the engine) the
//! memtable and merging iterators: LevelDB's `Iterator`, in Rust.

use crate::error::Error;

/// A cursor over sorted key/value entries.
///
/// After any positioning call the cursor is either valid (on an entry) or not
/// (before the first or after the last entry, or stopped by an error, which
/// [`KvIterator::status`] then returns).
pub trait KvIterator {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions on the first entry.
    fn seek_to_first(&mut self);
    /// Positions on the last entry.
    fn seek_to_last(&mut self);
    /// Positions on the first entry with key `>= target`.
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry. REQUIRES: `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self);
    /// The current key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
    /// The error that stopped the cursor, if any.
    fn status(&self) -> Result<(), Error>;
}

/// A key and its value, owned.
pub type Entry = (Vec<u8>, Vec<u8>);

/// Collects every entry from the first one on, stopping at the first error.
/// Meant for tests and tools; the engine streams instead.
pub fn collect_all(iter: &mut dyn KvIterator) -> Result<Vec<Entry>, Error> {
    let mut out = Vec::new();
    iter.seek_to_first();
    while iter.valid() {
        out.push((iter.key().to_vec(), iter.value().to_vec()));
        iter.next();
    }
    iter.status()?;
    Ok(out)
}
