//! Device memory kept between slices and jobs: the GPU paper allocates its
//! buffers once at start-up; we allocate on first need and keep them.
//!
//! A buffer a slice no longer holds goes back to its executor's free list
//! (this arena) instead of to the driver, and the next slice (of this job
//! or a later one, on any of the executor's lanes) takes the smallest free
//! buffer that fits.
//! Sizes are rounded up to one of four classes per power of two, so a
//! slice a little larger than the last still fits the buffers the last one
//! left behind, at most a quarter of the memory wasted; every request up to
//! [`MIN_CLASS`] shares one class. A small request
//! never takes a buffer more than twice its class, so one huge free buffer
//! is not spent on an error flag while the next large request allocates.
//!
//! Free buffers stay counted as in use on the device (they are allocated
//! there); a reservation that would pass the budget first frees free
//! buffers of every executor on the device, largest first
//! ([`DeviceArena::evict`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use opencl3::memory::{Buffer, ClMem};

/// A device buffer of `bytes` bytes, owned by the arena or by a session.
pub(crate) struct Pooled {
    pub(crate) buffer: Buffer<u8>,
    pub(crate) bytes: u64,
}

// SAFETY: an OpenCL memory object may be used from any thread (OpenCL 1.2,
// appendix A.2: all API calls but clSetKernelArg are thread-safe); the
// arena hands each one to one session at a time.
unsafe impl Send for Pooled {}

/// The free buffers of one executor on one device.
pub(crate) struct DeviceArena {
    free: Mutex<Vec<Pooled>>,
    /// The device's count of bytes in use, which free buffers are part of.
    in_use: Arc<AtomicU64>,
}

impl Drop for DeviceArena {
    fn drop(&mut self) {
        let freed: u64 = self.evict(u64::MAX);
        self.in_use.fetch_sub(freed, Ordering::SeqCst);
    }
}

/// The smallest buffer the arena allocates. A job holds a few dozen small
/// buffers (flags, totals, per-block and per-filter arrays) whose sizes
/// vary from job to job by a few bytes to a few KiB; classes of their own
/// made every job of a full compaction allocate new buffers, most of them
/// small, while larger classes lay free (the allocations per job before
/// and after: `docs/results/opencl-pocl.md`, "Fewer launches, files
/// written four at once, the CPU split by stage"). One class for all of
/// them costs at most a few MiB per lane and lets every later job reuse
/// them.
pub(crate) const MIN_CLASS: u64 = 64 << 10;

/// The size a request of `bytes` is allocated with: `bytes` rounded up to
/// 4, 5, 6 or 7 times a power of two, and at least [`MIN_CLASS`].
pub(crate) fn size_class(bytes: u64) -> u64 {
    let bytes = bytes.max(MIN_CLASS);
    let shift = 63 - bytes.leading_zeros() - 2;
    let step = 1u64 << shift;
    bytes.div_ceil(step) * step
}

impl DeviceArena {
    /// An empty arena on the device whose bytes in use are `in_use`.
    pub(crate) fn new(in_use: Arc<AtomicU64>) -> DeviceArena {
        DeviceArena {
            free: Mutex::new(Vec::new()),
            in_use,
        }
    }

    /// The smallest free buffer that holds `bytes` and is at most twice
    /// `bytes`' size class, taken out of the arena.
    pub(crate) fn take(&self, bytes: u64) -> Option<Pooled> {
        let limit = 2 * size_class(bytes);
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let best = free
            .iter()
            .enumerate()
            .filter(|(_, p)| p.bytes >= bytes && p.bytes <= limit)
            .min_by_key(|(_, p)| p.bytes)
            .map(|(index, _)| index)?;
        Some(free.swap_remove(best))
    }

    /// Puts a buffer no session holds any more back.
    pub(crate) fn give_back(&self, pooled: Pooled) {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(pooled);
    }

    /// Frees free buffers, largest first, until at least `needed` bytes are
    /// freed or none is left; returns the bytes freed (the caller takes
    /// them off the device's count).
    pub(crate) fn evict(&self, needed: u64) -> u64 {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        free.sort_by_key(|p| p.bytes);
        let mut freed = 0;
        while freed < needed {
            let Some(pooled) = free.pop() else { break };
            freed += pooled.bytes;
        }
        freed
    }

    /// Bytes held by free buffers.
    pub(crate) fn free_bytes(&self) -> u64 {
        let free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        free.iter().map(|p| p.bytes).sum()
    }
}

/// Whether only its owner still references `buffer` (no kernel argument,
/// no caller's handle): only then may it go back to the arena.
pub(crate) fn only_owner(buffer: &Buffer<u8>) -> bool {
    buffer.reference_count().is_ok_and(|count| count == 1)
}

#[cfg(test)]
mod tests {
    use super::{size_class, MIN_CLASS};

    #[test]
    fn size_classes_waste_at_most_a_quarter_above_the_smallest() {
        assert_eq!(size_class(1), MIN_CLASS);
        assert_eq!(size_class(MIN_CLASS), MIN_CLASS);
        assert_eq!(size_class(MIN_CLASS + 1), MIN_CLASS * 5 / 4);
        assert_eq!(size_class(1 << 20), 1 << 20);
        assert_eq!(size_class((1 << 20) + 1), 5 << 18);
        for bytes in (1..10_000_000u64).step_by(3_701) {
            let class = size_class(bytes);
            assert!(class >= bytes);
            assert!(
                class <= bytes.max(MIN_CLASS) * 5 / 4 + 1,
                "{bytes} -> {class}"
            );
        }
    }
}
