//! Pinned host memory for uploads: the GPU's DMA engine reads it directly.
//!
//! An upload from an ordinary (pageable) buffer is two copies: the driver
//! first copies it into pinned memory of its own, on the calling host
//! thread, then the device copies that across the bus. A buffer made with
//! `CL_MEM_ALLOC_HOST_PTR` is pinned by the driver, and mapped once its
//! pointer stays valid: the host writes the data there in the first place
//! (the input blocks are decompressed straight into it), and the upload
//! from it is the device's copy alone (NVIDIA's OpenCL best practices, on
//! pinned staging buffers). On a CPU device (PoCL) it is ordinary memory,
//! and nothing changes but the path.
//!
//! Buffers are kept in a pool per executor and handed out by size; one is
//! unmapped and freed only when the pool goes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use opencl3::memory::{Buffer, ClMem, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR};
use opencl3::types::CL_BLOCKING;

use super::device::DeviceContext;
use super::device_error::DeviceError;

/// Alignment of every pinned buffer's start: a page, so that direct I/O
/// (`O_DIRECT`) reads into it and writes from it with no copy. A GPU
/// driver's pinned memory is page-aligned already; PoCL's is not.
const PINNED_ALIGNMENT: usize = 4096;

/// One pinned, mapped host buffer.
struct Mapped {
    buffer: Buffer<u8>,
    /// Where the buffer is mapped (unmapped from there).
    mapped: *mut u8,
    /// Its first byte at a [`PINNED_ALIGNMENT`] boundary.
    pointer: *mut u8,
    capacity: usize,
}

// SAFETY: the mapping is plain host memory owned by this value alone; the
// OpenCL buffer may be used from any thread.
unsafe impl Send for Mapped {}
// SAFETY: through a shared reference the mapping is only read
// (`Pinned::bytes`); writing it takes `&mut`.
unsafe impl Sync for Mapped {}

/// The pinned buffers of one executor.
pub(crate) struct StagingPool {
    device: Arc<DeviceContext>,
    free: Mutex<Vec<Mapped>>,
    /// Bytes of pinned memory mapped so far (none is unmapped before the
    /// pool goes).
    mapped_bytes: AtomicU64,
}

impl StagingPool {
    /// An empty pool on `device`.
    pub(crate) fn new(device: Arc<DeviceContext>) -> Arc<StagingPool> {
        Arc::new(StagingPool {
            device,
            free: Mutex::new(Vec::new()),
            mapped_bytes: AtomicU64::new(0),
        })
    }

    /// A pinned buffer of at least `len` bytes, from the pool or new (the
    /// new one a little larger, so that the next file, a little larger
    /// perhaps, fits it too); its
    /// first `len` bytes are what [`Pinned::bytes`] shows. A kept buffer
    /// far larger than `len` is left for a request of its size: a file's
    /// download of a few MB must not take a slice's buffer of tens of MB
    /// and make the next slice map a new one.
    pub(crate) fn take(self: &Arc<Self>, len: usize) -> Result<Pinned, DeviceError> {
        self.take_mapping(len, len + len / 4 + 4096)
    }

    /// A pinned buffer of at least `len` bytes, from the pool or new, the
    /// new one of exactly `len` bytes: for requests that repeat the same
    /// size (a slice's input), where a margin is pinned memory never used.
    pub(crate) fn take_exact(self: &Arc<Self>, len: usize) -> Result<Pinned, DeviceError> {
        self.take_mapping(len, len)
    }

    fn take_mapping(
        self: &Arc<Self>,
        len: usize,
        new_capacity: usize,
    ) -> Result<Pinned, DeviceError> {
        let kept = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, m)| m.capacity >= len && m.capacity <= 4 * len + (1 << 20))
                .min_by_key(|(_, m)| m.capacity)
                .map(|(index, _)| index);
            best.map(|index| free.swap_remove(index))
        };
        let mapped = match kept {
            Some(mapped) => mapped,
            None => self.map_new(new_capacity)?,
        };
        Ok(Pinned {
            mapped: Some(mapped),
            len,
            pool: self.clone(),
        })
    }

    fn map_new(&self, capacity: usize) -> Result<Mapped, DeviceError> {
        // Room to start at an aligned address, whatever the runtime gives.
        let size = capacity + PINNED_ALIGNMENT;
        // SAFETY: no host pointer is given; the runtime allocates it.
        let buffer = unsafe {
            Buffer::<u8>::create(
                self.device.context(),
                CL_MEM_ALLOC_HOST_PTR,
                size,
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| DeviceError::cl("allocating pinned host memory", e))?;
        let lease = self.device.lease_queue()?;
        let mut pointer: opencl3::types::cl_mem = std::ptr::null_mut();
        // SAFETY: a blocking map of the whole buffer; the pointer stays
        // valid until it is unmapped (when the pool drops it).
        unsafe {
            lease.queue().enqueue_map_buffer(
                &buffer,
                CL_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                size,
                &mut pointer,
                &[],
            )
        }
        .map_err(|e| DeviceError::cl("mapping pinned host memory", e))?;
        if pointer.is_null() {
            return Err(DeviceError::new(
                "mapping pinned host memory gave no pointer",
            ));
        }
        let mapped = pointer.cast::<u8>();
        let pad = (PINNED_ALIGNMENT - mapped as usize % PINNED_ALIGNMENT) % PINNED_ALIGNMENT;
        // SAFETY: `pad < PINNED_ALIGNMENT`, so `pad + capacity` bytes lie
        // in the mapping of `size`; they are writable, and zeroed once so
        // that no byte of them is ever read uninitialised.
        let pointer = unsafe { mapped.add(pad) };
        prefault(pointer, capacity);
        unsafe { std::ptr::write_bytes(pointer, 0, capacity) };
        self.mapped_bytes.fetch_add(size as u64, Ordering::Relaxed);
        Ok(Mapped {
            buffer,
            mapped,
            pointer,
            capacity,
        })
    }

    /// Bytes of pinned memory the pool has mapped (and zeroed once), all
    /// of which it keeps until it goes.
    pub(crate) fn mapped_bytes(&self) -> u64 {
        self.mapped_bytes.load(Ordering::Relaxed)
    }

    /// Unmaps and frees `mapped`.
    fn unmap(&self, mapped: Mapped) {
        if let Ok(lease) = self.device.lease_queue() {
            // SAFETY: `mapped` is the mapping of `buffer`, used by no one
            // now; the queue is drained before the buffer is released.
            let unmapped = unsafe {
                lease.queue().enqueue_unmap_mem_object(
                    mapped.buffer.get(),
                    mapped.mapped.cast(),
                    &[],
                )
            };
            if unmapped.is_ok() {
                let _ = super::device::drain(lease.queue());
            }
        }
        drop(mapped);
    }
}

/// Gives `len` bytes at `start` their pages in one call before they are
/// first written. A page touched for the first time otherwise costs a
/// fault: for a slice's buffer of tens of MB, thousands of them, where one
/// `MADV_POPULATE_WRITE` (Linux 5.14) over the range costs the host
/// markedly less CPU (`docs/results/opencl-pocl.md`, "Two slices of pinned
/// input, faulted in at once"). Memory the driver pinned has its pages
/// already, and the call does nothing there. Elsewhere, or where it fails,
/// the zeroing that follows touches the pages as before.
fn prefault(start: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        // madvise wants a page-aligned start (`start` is one); whole pages
        // only, so that nothing past the buffer is touched.
        debug_assert_eq!(start as usize % PINNED_ALIGNMENT, 0);
        let len = len / PINNED_ALIGNMENT * PINNED_ALIGNMENT;
        // SAFETY: the range lies in a live mapping owned by the caller;
        // MADV_POPULATE_WRITE only faults its pages in (as writing would)
        // and changes no byte.
        let _ = unsafe { libc::madvise(start.cast(), len, libc::MADV_POPULATE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, len);
}

impl Drop for StagingPool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|p| p.into_inner()));
        for mapped in free {
            self.unmap(mapped);
        }
    }
}

/// A pinned buffer lent by a [`StagingPool`], back to it when dropped.
pub(crate) struct Pinned {
    mapped: Option<Mapped>,
    len: usize,
    pool: Arc<StagingPool>,
}

impl Pinned {
    /// Its first `len` bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.mapped {
            // SAFETY: the mapping holds `capacity >= len` initialised bytes
            // (zeroed when mapped).
            Some(m) => unsafe { std::slice::from_raw_parts(m.pointer, self.len) },
            None => &[],
        }
    }

    /// Its first `len` bytes, to write.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.mapped {
            // SAFETY: as in `bytes`, and `&mut self` makes it exclusive.
            Some(m) => unsafe { std::slice::from_raw_parts_mut(m.pointer, self.len) },
            None => &mut [],
        }
    }
}

impl Pinned {
    /// Bytes the buffer can hold.
    fn capacity(&self) -> usize {
        self.mapped.as_ref().map_or(0, |m| m.capacity)
    }
}

/// Bytes on their way to or from the device (a slice's input as it is
/// read, a file's blocks as they come back): in a pinned buffer from the
/// pool, which grows into a larger one as needed, or, where pinned memory
/// cannot be had, in ordinary memory.
pub(crate) enum HostBytes {
    /// Ordinary memory (the default; tests, and no pinned memory).
    Heap(Vec<u8>),
    /// Pinned memory.
    Pinned(Pinned),
}

impl std::fmt::Debug for HostBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, len) = match self {
            HostBytes::Heap(bytes) => ("heap", bytes.len()),
            HostBytes::Pinned(pinned) => ("pinned", pinned.len),
        };
        write!(f, "HostBytes({kind}, {len} bytes)")
    }
}

impl Default for HostBytes {
    fn default() -> HostBytes {
        HostBytes::Heap(Vec::new())
    }
}

impl HostBytes {
    /// Empty, in a pinned buffer of about `capacity` bytes from `pool` when
    /// one can be had.
    pub(crate) fn pinned(pool: &Arc<StagingPool>, capacity: usize) -> HostBytes {
        HostBytes::empty_in(pool.take(capacity))
    }

    /// Empty, in a pinned buffer of `capacity` bytes (none more where a
    /// new one is mapped) from `pool` when one can be had.
    pub(crate) fn pinned_exact(pool: &Arc<StagingPool>, capacity: usize) -> HostBytes {
        HostBytes::empty_in(pool.take_exact(capacity))
    }

    fn empty_in(taken: Result<Pinned, DeviceError>) -> HostBytes {
        match taken {
            Ok(mut pinned) => {
                pinned.len = 0;
                HostBytes::Pinned(pinned)
            }
            Err(_) => HostBytes::default(),
        }
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            HostBytes::Heap(bytes) => bytes,
            HostBytes::Pinned(pinned) => pinned.bytes(),
        }
    }

    /// Appends `bytes`.
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        crate::inputs::GrowingBytes::grow(self, bytes.len()).copy_from_slice(bytes);
    }
}

impl crate::inputs::GrowingBytes for HostBytes {
    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn grow(&mut self, extra: usize) -> &mut [u8] {
        if let HostBytes::Pinned(pinned) = self {
            let len = pinned.len;
            if len + extra > pinned.capacity() {
                // Into a larger pinned buffer, or into ordinary memory.
                let wanted = (2 * pinned.capacity()).max(len + extra);
                let moved = match pinned.pool.take(wanted) {
                    Ok(mut larger) => {
                        larger.bytes_mut()[..len].copy_from_slice(pinned.bytes());
                        larger.len = len;
                        HostBytes::Pinned(larger)
                    }
                    Err(_) => HostBytes::Heap(pinned.bytes().to_vec()),
                };
                *self = moved;
            }
        }
        match self {
            HostBytes::Heap(bytes) => bytes.grow(extra),
            HostBytes::Pinned(pinned) => {
                let base = pinned.len;
                pinned.len += extra;
                &mut pinned.bytes_mut()[base..]
            }
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(mapped) = self.mapped.take() {
            self.pool
                .free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(mapped);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StagingPool;

    #[test]
    fn pinned_buffers_are_written_read_and_kept_for_the_next_slice() {
        let Some(device) = super::super::tests::test_device() else {
            return;
        };
        let pool = StagingPool::new(device);
        let mut first = pool.take(10_000).unwrap();
        assert_eq!(first.bytes().len(), 10_000);
        // Page-aligned, for direct I/O straight into and out of it.
        assert_eq!(first.bytes().as_ptr() as usize % 4096, 0);
        first.bytes_mut().fill(7);
        assert!(first.bytes().iter().all(|&b| b == 7));
        let address = first.bytes().as_ptr();
        drop(first);
        // A smaller request takes the kept buffer, contents and all.
        let again = pool.take(9_000).unwrap();
        assert_eq!(again.bytes().as_ptr(), address);
        assert_eq!(again.bytes().len(), 9_000);
        // While it is lent, a second request maps a new one.
        let other = pool.take(100).unwrap();
        assert_ne!(other.bytes().as_ptr(), address);
        assert!(
            other.bytes().iter().all(|&b| b == 0),
            "new mappings start zeroed"
        );
    }

    #[test]
    fn a_slice_buffer_is_mapped_without_a_margin() {
        let Some(device) = super::super::tests::test_device() else {
            return;
        };
        let pool = StagingPool::new(device);
        // Large enough for its pages to be faulted in ahead (`prefault`).
        let len = (8 << 20) + 123;
        let mut exact = pool.take_exact(len).unwrap();
        // The buffer and the room to align its start; nothing more.
        assert_eq!(pool.mapped_bytes(), (len + super::PINNED_ALIGNMENT) as u64);
        assert!(exact.bytes().iter().all(|&b| b == 0), "zeroed");
        exact.bytes_mut().fill(3);
        assert!(exact.bytes().iter().all(|&b| b == 3));
        drop(exact);
        // The next slice's request takes it, with no new mapping.
        let again = pool.take_exact(len - 5000).unwrap();
        assert_eq!(again.bytes().len(), len - 5000);
        assert_eq!(pool.mapped_bytes(), (len + super::PINNED_ALIGNMENT) as u64);
        // Other requests keep their margin, for files of other sizes.
        let before = pool.mapped_bytes();
        let other = pool.take(10_000).unwrap();
        assert_eq!(other.bytes().len(), 10_000);
        assert_eq!(
            pool.mapped_bytes() - before,
            (10_000 + 10_000 / 4 + 4096 + super::PINNED_ALIGNMENT) as u64
        );
    }

    #[test]
    fn slice_bytes_grow_into_larger_pinned_buffers() {
        use super::HostBytes;
        let Some(device) = super::super::tests::test_device() else {
            return;
        };
        let pool = StagingPool::new(device);
        let mut bytes = HostBytes::pinned(&pool, 100);
        let mut expected = Vec::new();
        for round in 0..50u8 {
            let chunk = vec![round; 37 + usize::from(round) * 11];
            bytes.extend_from_slice(&chunk);
            expected.extend_from_slice(&chunk);
        }
        assert!(matches!(bytes, HostBytes::Pinned(_)), "{bytes:?}");
        assert_eq!(bytes.as_slice(), expected.as_slice());
        // Ordinary memory grows the same way.
        let mut heap = HostBytes::default();
        heap.extend_from_slice(&expected);
        assert_eq!(heap.as_slice(), expected.as_slice());
    }
}
