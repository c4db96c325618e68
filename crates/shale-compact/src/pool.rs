//! Buffers reused across slices and jobs. The data-parallel executors fill
//! many buffers per slice (decompressed blocks, key arenas, reads, output
//! files) and drop them a stage later, often on another thread; fresh
//! allocations of that size cost page faults and zeroing in the kernel, and
//! frees from another thread keep the allocator from reusing the memory at
//! once (where a profile of the `parallel` executor found much of its time:
//! `docs/results/format-and-compaction.md`, "Where the time goes"). A pool
//! hands the same allocations back instead.
//!
//! A pool keeps at most `max_bytes` of capacity; what does not fit is
//! freed. Taking from an empty pool gives a new, empty value.

use std::sync::Mutex;
/// A value whose allocation a pool can keep.
pub(crate) trait Reusable: Default {
    /// Bytes of capacity it holds.
    fn capacity_bytes(&self) -> usize;
}

impl<T> Reusable for Vec<T> {
    fn capacity_bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>()
    }
}

/// Free values, and the bytes they hold.
#[derive(Default)]
struct Free<T> {
    items: Vec<T>,
    bytes: usize,
}

/// A bounded pool of reusable values.
pub(crate) struct Pool<T> {
    free: Mutex<Free<T>>,
    max_bytes: usize,
}

impl<T: Reusable> Pool<T> {
    /// A pool that keeps at most `max_bytes` of capacity.
    pub(crate) fn new(max_bytes: usize) -> Pool<T> {
        Pool {
            free: Mutex::new(Free {
                items: Vec::new(),
                bytes: 0,
            }),
            max_bytes,
        }
    }

    /// A value from the pool (its contents are stale: the caller clears
    /// or overwrites them), or a new one.
    pub(crate) fn take(&self) -> T {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        match free.items.pop() {
            Some(item) => {
                free.bytes -= item.capacity_bytes();
                item
            }
            None => T::default(),
        }
    }

    /// Returns a value to the pool, or frees it when the pool is full.
    pub(crate) fn give(&self, item: T) {
        let bytes = item.capacity_bytes();
        if bytes == 0 {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.bytes + bytes <= self.max_bytes {
            free.bytes += bytes;
            free.items.push(item);
        }
    }

    /// Bytes of capacity held now.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

/// `buffer` with exactly `len` bytes, reusing its allocation: only bytes
/// past its old length are zeroed (for a buffer about to be overwritten by
/// a read).
pub(crate) fn set_len_for_overwrite(buffer: &mut Vec<u8>, len: usize) {
    if buffer.len() < len {
        buffer.resize(len, 0);
    } else {
        buffer.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_allocations_up_to_its_bound() {
        let pool: Pool<Vec<u8>> = Pool::new(100);
        let a = Vec::with_capacity(60);
        let pointer = a.as_ptr();
        pool.give(a);
        pool.give(Vec::with_capacity(60)); // over the bound: freed
        assert_eq!(pool.held_bytes(), 60);
        let again = pool.take();
        assert_eq!(again.as_ptr(), pointer);
        assert_eq!(pool.held_bytes(), 0);
        assert_eq!(pool.take().capacity(), 0);
        pool.give(Vec::new()); // nothing to keep
        assert_eq!(pool.held_bytes(), 0);
    }

    #[test]
    fn overwrite_length_zeroes_only_new_bytes() {
        let mut buffer = vec![7u8; 4];
        set_len_for_overwrite(&mut buffer, 2);
        assert_eq!(buffer, [7, 7]);
        set_len_for_overwrite(&mut buffer, 5);
        assert_eq!(buffer, [7, 7, 0, 0, 0]);
    }
}
