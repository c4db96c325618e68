//! Byte strings packed into one buffer plus a length per item: the layout the
//! C++ shim takes, so a whole batch crosses the FFI boundary in one call.

use crate::Error;

/// A list of byte strings stored back to back, with a `u32` length each.
#[derive(Clone, Debug, Default)]
pub(crate) struct FlatBytes {
    pub(crate) bytes: Vec<u8>,
    pub(crate) lens: Vec<u32>,
}

impl FlatBytes {
    /// Appends one byte string; fails if it is 4 GiB or longer, which the
    /// shim's `u32` lengths cannot express.
    pub(crate) fn push(&mut self, item: &[u8]) -> Result<(), Error> {
        let len = u32::try_from(item.len()).map_err(|_| {
            Error::InvalidArgument(format!("item of {} bytes is too long", item.len()))
        })?;
        self.bytes.extend_from_slice(item);
        self.lens.push(len);
        Ok(())
    }

    /// Packs all items, e.g. keys for a bloom filter.
    pub(crate) fn from_items<T: AsRef<[u8]>>(items: &[T]) -> Result<Self, Error> {
        let mut flat = FlatBytes {
            bytes: Vec::with_capacity(items.iter().map(|item| item.as_ref().len()).sum()),
            lens: Vec::with_capacity(items.len()),
        };
        for item in items {
            flat.push(item.as_ref())?;
        }
        Ok(flat)
    }

    pub(crate) fn len(&self) -> usize {
        self.lens.len()
    }
}

/// Key/value entries packed for [`build_table_flat`](crate::build_table_flat).
///
/// Packing happens once, outside a benchmark's timed loop; building the table
/// then costs one FFI call with no per-entry conversion.
#[derive(Clone, Debug, Default)]
pub struct FlatEntries {
    pub(crate) keys: FlatBytes,
    pub(crate) values: FlatBytes,
}

impl FlatEntries {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Packs `pairs` in order. Fails if a key or value is 4 GiB or longer.
    pub fn from_pairs<K: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(K, V)]) -> Result<Self, Error> {
        let mut entries = FlatEntries::new();
        entries.keys.lens.reserve(pairs.len());
        entries.values.lens.reserve(pairs.len());
        for (key, value) in pairs {
            entries.push(key.as_ref(), value.as_ref())?;
        }
        Ok(entries)
    }

    /// Appends one entry. Fails if the key or value is 4 GiB or longer.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        // Check both before appending either, so a failure leaves the list as
        // it was.
        if u32::try_from(value.len()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes is too long",
                value.len()
            )));
        }
        self.keys.push(key)?;
        self.values.push(value)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
