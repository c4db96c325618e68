//! One slice's use of the device: a leased command queue, the compiled
//! kernels, buffers from the device's arena counted against the job's
//! device-memory budget and the device's largest allocation, transfers,
//! kernel launches (timed with OpenCL profiling events), the cost counters
//! and failure injection for tests.
//!
//! Two command queues (the GPU paper's streams): kernels go to the compute
//! queue, the large transfers to the transfer queue, and OpenCL events say
//! what waits for what. Nothing is waited for unless the host needs a
//! result: launches, small uploads and fills are only enqueued (the compute
//! queue is in order, so each kernel sees what came before it), and a
//! read-back on the transfer queue waits for a marker of the compute queue
//! (everything enqueued there before it). The host blocks only to read a
//! result ([`Session::download`], [`Session::finish_download`], an error
//! flag), and then sleeps until the device is done (`wait.rs`). Every
//! block is counted in [`DeviceCounters::host_waits`].
//!
//! Pending transfers own their host memory and wait for their event when
//! dropped, so no transfer can outlive the memory it reads or writes.
//! Buffers come from the device's arena and go back to it when the session
//! ends, after both queues are drained.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{cl_event, cl_mem, CL_NON_BLOCKING};

use super::arena::{only_owner, size_class, DeviceArena, Pooled};
use super::costs::{DeviceCounters, KernelTime};
use super::device::{drain, DeviceContext, QueueLease};
use super::device_error::DeviceError;
use super::pinned::{HostBytes, Pinned, StagingPool};
use super::wait::{wait_for, Waited};
use crate::inputs::GrowingBytes;

/// The kernels of one program, created once and reused by later sessions.
pub(crate) type Kernels = HashMap<&'static str, Kernel>;

/// Work-group size of kernels launched without one of their own.
pub(crate) const DEFAULT_GROUP: usize = 64;

/// A kernel argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg {
    /// A buffer.
    Mem(cl_mem),
    /// A `uint`.
    U32(u32),
    /// A `ulong`.
    U64(u64),
    /// `__local` memory of this many bytes.
    Local(usize),
}

/// Shorthand for a buffer argument.
pub(crate) fn mem<T>(buffer: &Buffer<T>) -> Arg {
    Arg::Mem(buffer.get())
}

/// Device seconds between an event's start and end (0 when the device does
/// not report them).
fn event_seconds(event: &Event) -> f64 {
    match (
        event.profiling_command_start(),
        event.profiling_command_end(),
    ) {
        (Ok(start), Ok(end)) => end.saturating_sub(start) as f64 / 1e9,
        _ => 0.0,
    }
}

/// An upload in flight: the device buffer, the event that completes it, and
/// the host data it reads (kept alive until then).
pub(crate) struct Upload<T> {
    pub(crate) buffer: Buffer<T>,
    /// `None` when there was nothing to copy.
    event: Option<Event>,
    /// The host data the transfer reads, kept alive until it is done.
    host: Vec<T>,
    /// Where the bytes come from instead, when they are pinned.
    pinned: Option<Pinned>,
    /// Bytes copied.
    bytes: u64,
}

impl<T> Upload<T> {
    /// The events to wait on before a kernel reads the buffer.
    pub(crate) fn wait_list(&self) -> Vec<cl_event> {
        self.event.iter().map(Event::get).collect()
    }
}

impl<T> Drop for Upload<T> {
    fn drop(&mut self) {
        // The host data must outlive the transfer, whatever happened.
        if let Some(event) = &self.event {
            let _ = wait_for(event);
        }
    }
}

/// A read-back in flight: finishes with [`Session::finish_download`].
pub(crate) struct Download<T> {
    what: String,
    event: Option<Event>,
    host: Vec<T>,
}

impl<T> Drop for Download<T> {
    fn drop(&mut self) {
        // The device may still be writing into `host`.
        if let Some(event) = &self.event {
            let _ = wait_for(event);
        }
    }
}

/// A read-back of bytes into pinned memory in flight: finishes with
/// [`Session::finish_bytes`].
pub(crate) struct BytesDownload {
    what: String,
    event: Option<Event>,
    host: HostBytes,
}

impl Drop for BytesDownload {
    fn drop(&mut self) {
        // The device may still be writing into `host`.
        if let Some(event) = &self.event {
            let _ = wait_for(event);
        }
    }
}

/// A kernel made to fail (tests): launches of `kernel` fail once `after`
/// launches of it have run, counted in `seen` across sessions.
#[derive(Debug, Clone)]
pub(crate) struct InjectedFailure {
    pub(crate) kernel: String,
    pub(crate) after: u64,
    pub(crate) seen: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl InjectedFailure {
    /// From the option's text: `name` (every launch fails) or `name#N`
    /// (launches after the first N fail).
    pub(crate) fn parse(text: &str) -> InjectedFailure {
        let (kernel, after) = match text.split_once('#') {
            Some((kernel, after)) => (kernel, after.parse().unwrap_or(0)),
            None => (text, 0),
        };
        InjectedFailure {
            kernel: kernel.to_string(),
            after,
            seen: Default::default(),
        }
    }
}

/// What a session measured, once it is over.
pub(crate) struct Finished {
    /// The kernels, for the next session.
    pub(crate) kernels: Kernels,
    /// `Err` when a command failed after it was enqueued.
    pub(crate) settled: Result<(), DeviceError>,
    /// Per kernel name, and "upload" / "download".
    pub(crate) times: HashMap<&'static str, KernelTime>,
    /// What the session cost the host.
    pub(crate) counters: DeviceCounters,
    /// Device bytes of the buffers the session held.
    pub(crate) allocated: u64,
}

/// A device session for one slice of a job.
pub(crate) struct Session<'d> {
    device: &'d DeviceContext,
    /// Where buffers come from and go back to.
    arena: &'d DeviceArena,
    lease: QueueLease<'d>,
    /// The queue for large transfers, beside the compute queue.
    transfer: QueueLease<'d>,
    program: std::sync::Arc<Program>,
    kernels: Kernels,
    budget: u64,
    /// Device bytes of the buffers this session holds.
    allocated: u64,
    /// The buffers this session holds, back to the arena at its end.
    held: Vec<Pooled>,
    inject_failure: Option<InjectedFailure>,
    /// Per kernel name, and "upload" / "download".
    times: HashMap<&'static str, KernelTime>,
    /// What the session cost the host.
    pub(crate) counters: DeviceCounters,
    /// Commands not waited for yet: name, items, bytes, event.
    pending: Vec<(&'static str, u64, u64, Event)>,
    /// Host memory that enqueued uploads read, kept until they are done.
    keep_alive: Vec<Box<dyn Any>>,
    /// Whether the compute queue has commands the host has not seen end.
    compute_busy: bool,
}

impl<'d> Session<'d> {
    /// A session on `device`, with buffers from `arena`, running `program`
    /// with `kernels` (created from it before, or empty), allowed `budget` bytes of device memory;
    /// a launch of kernel `inject_failure` fails (tests).
    pub(crate) fn new(
        device: &'d DeviceContext,
        arena: &'d DeviceArena,
        program: std::sync::Arc<Program>,
        kernels: Kernels,
        budget: u64,
        inject_failure: Option<InjectedFailure>,
    ) -> Result<Session<'d>, DeviceError> {
        Ok(Session {
            lease: device.lease_queue()?,
            transfer: device.lease_queue()?,
            device,
            arena,
            program,
            kernels,
            budget,
            allocated: 0,
            held: Vec::new(),
            inject_failure,
            times: HashMap::new(),
            counters: DeviceCounters::default(),
            pending: Vec::new(),
            keep_alive: Vec::new(),
            compute_busy: false,
        })
    }

    /// Waits for every command and ends the session: what it measured,
    /// and the kernels for the next session.
    pub(crate) fn finish(mut self) -> Finished {
        let settled = self.settle();
        Finished {
            kernels: std::mem::take(&mut self.kernels),
            settled,
            times: std::mem::take(&mut self.times),
            counters: self.counters,
            allocated: self.allocated,
        }
    }

    /// Counts the host waiting for the device, when it did.
    fn waited(&mut self, waited: Waited) {
        if waited == Waited::Blocked {
            self.counters.host_waits += 1;
        }
    }

    /// Checks that `bytes` more fit the job's budget and one allocation.
    fn reserve(&mut self, what: &str, bytes: u64) -> Result<(), DeviceError> {
        let max = self.device.info().max_allocation;
        if bytes > max {
            return Err(DeviceError::new(format!(
                "{what} needs {bytes} bytes, more than the device's largest allocation ({max})"
            )));
        }
        if bytes > u64::from(u32::MAX) {
            return Err(DeviceError::new(format!(
                "{what} needs {bytes} bytes, past 32-bit offsets"
            )));
        }
        // The budget holds for this job and for all jobs on the device now.
        if let Err(in_use) = self.device.reserve(bytes, self.budget) {
            return Err(DeviceError::new(format!(
                "{what} needs {bytes} bytes; with {} allocated by this job ({in_use} by every job on the device) that is over the device memory budget ({})",
                self.allocated, self.budget
            )));
        }
        Ok(())
    }

    /// An uninitialised buffer of `count` elements (at least one: OpenCL
    /// refuses empty buffers): a kept one from the arena when one fits,
    /// else a new one of the request's size class.
    pub(crate) fn alloc<T>(&mut self, what: &str, count: usize) -> Result<Buffer<T>, DeviceError> {
        let bytes = (count.max(1) * size_of::<T>()) as u64;
        let pooled = match self.arena.take(bytes) {
            Some(pooled) => pooled,
            None => {
                // The class, where it fits; the request itself where only it does.
                let limit = self.device.info().max_allocation.min(u64::from(u32::MAX));
                let capacity = size_class(bytes).min(limit).max(bytes);
                self.reserve(what, capacity)?;
                // SAFETY: no host pointer is passed; the size is in bytes.
                let buffer = unsafe {
                    Buffer::<u8>::create(
                        self.device.context(),
                        CL_MEM_READ_WRITE,
                        capacity as usize,
                        std::ptr::null_mut(),
                    )
                };
                let buffer = match buffer {
                    Ok(buffer) => buffer,
                    Err(e) => {
                        self.device.release(capacity);
                        return Err(DeviceError::cl(&format!("allocating {what}"), e));
                    }
                };
                self.counters.device_allocations += 1;
                Pooled {
                    buffer,
                    bytes: capacity,
                }
            }
        };
        // SAFETY: the memory object is valid (the arena holds it); the
        // retained reference is the returned buffer's, released on its drop.
        let retained = unsafe { opencl3::memory::retain_mem_object(pooled.buffer.get()) };
        let typed = Buffer::<T>::new(pooled.buffer.get());
        self.allocated += pooled.bytes;
        self.held.push(pooled);
        if let Err(code) = retained {
            std::mem::forget(typed);
            return Err(DeviceError::cl(
                &format!("allocating {what}"),
                opencl3::error_codes::ClError(code),
            ));
        }
        Ok(typed)
    }

    /// A zero-filled buffer of `count` elements.
    pub(crate) fn alloc_zeroed<T: Copy + Default>(
        &mut self,
        what: &str,
        count: usize,
    ) -> Result<Buffer<T>, DeviceError> {
        let mut buffer = self.alloc::<T>(what, count)?;
        let pattern = [T::default()];
        let bytes = count.max(1) * size_of::<T>();
        // SAFETY: the fill covers exactly the requested part of the buffer;
        // the pattern is copied at the call.
        let event = unsafe {
            self.lease
                .queue()
                .enqueue_fill_buffer(&mut buffer, &pattern, 0, bytes, &[])
        }
        .map_err(|e| DeviceError::cl(&format!("clearing {what}"), e))?;
        self.compute_busy = true;
        // The queue is in order: what reads the buffer runs after the fill.
        drop(event);
        Ok(buffer)
    }

    /// A buffer holding a copy of `data`. The host copies `data` once (the
    /// transfer reads the copy later), so nothing waits here.
    pub(crate) fn upload<T: Copy + 'static>(
        &mut self,
        what: &str,
        data: &[T],
    ) -> Result<Buffer<T>, DeviceError> {
        let mut buffer = self.alloc::<T>(what, data.len())?;
        if !data.is_empty() {
            let owned = data.to_vec();
            let bytes = size_of_val(data) as u64;
            self.counters.host_bytes_copied += bytes;
            // SAFETY: `owned` fits the buffer and stays alive in
            // `keep_alive` until the session has waited for every command.
            let event = unsafe {
                self.lease.queue().enqueue_write_buffer(
                    &mut buffer,
                    CL_NON_BLOCKING,
                    0,
                    &owned,
                    &[],
                )
            }
            .map_err(|e| DeviceError::cl(&format!("uploading {what}"), e))?;
            self.keep_alive.push(Box::new(owned));
            self.compute_busy = true;
            self.counters.transfers += 1;
            self.counters.bytes_uploaded += bytes;
            self.pending.push(("upload", 0, bytes, event));
        }
        Ok(buffer)
    }

    /// Starts copying `data` into a new buffer, with `room` more elements
    /// after it (for what kernels write there), on the transfer queue and
    /// returns at once; kernels that read the buffer wait on the upload's
    /// event.
    pub(crate) fn upload_async<T: Copy>(
        &mut self,
        what: &str,
        data: Vec<T>,
        room: usize,
    ) -> Result<Upload<T>, DeviceError> {
        let mut buffer = self.alloc::<T>(what, data.len() + room)?;
        // SAFETY: `data` moves into the returned Upload, which waits for
        // the event before it frees the data; moving a Vec moves no bytes.
        let event = unsafe { self.enqueue_upload(what, &mut buffer, &data) }?;
        Ok(Upload {
            buffer,
            event,
            bytes: size_of_val(data.as_slice()) as u64,
            host: data,
            pinned: None,
        })
    }

    /// [`Session::upload_async`] from pinned host memory: the device reads
    /// it directly, with no staging copy by the driver.
    pub(crate) fn upload_pinned(
        &mut self,
        what: &str,
        pinned: Pinned,
        room: usize,
    ) -> Result<Upload<u8>, DeviceError> {
        let mut buffer = self.alloc::<u8>(what, pinned.bytes().len() + room)?;
        // SAFETY: `pinned` moves into the returned Upload, which waits for
        // the event before it lets the mapping go back to its pool.
        let event = unsafe { self.enqueue_upload(what, &mut buffer, pinned.bytes()) }?;
        self.counters.bytes_uploaded_pinned += pinned.bytes().len() as u64;
        Ok(Upload {
            buffer,
            event,
            bytes: pinned.bytes().len() as u64,
            host: Vec::new(),
            pinned: Some(pinned),
        })
    }

    /// Enqueues copying `data` into `buffer` on the transfer queue, starts
    /// it and counts it; `None` when there is nothing to copy.
    ///
    /// # Safety
    /// `data` must stay where it is, alive, until the returned event is
    /// complete.
    unsafe fn enqueue_upload<T>(
        &mut self,
        what: &str,
        buffer: &mut Buffer<T>,
        data: &[T],
    ) -> Result<Option<Event>, DeviceError> {
        if data.is_empty() {
            return Ok(None);
        }
        // SAFETY: `data` fits the buffer (allocated for it), and the caller
        // keeps it until the event completes.
        let event = unsafe {
            self.transfer
                .queue()
                .enqueue_write_buffer(buffer, CL_NON_BLOCKING, 0, data, &[])
        }
        .map_err(|e| DeviceError::cl(&format!("uploading {what}"), e))?;
        // Start it now rather than at the next blocking call.
        self.transfer
            .queue()
            .flush()
            .map_err(|e| DeviceError::cl(&format!("uploading {what}"), e))?;
        self.counters.transfers += 1;
        self.counters.bytes_uploaded += size_of_val(data) as u64;
        Ok(Some(event))
    }

    /// Waits for an upload started with [`Session::upload_async`] (at once
    /// when a launch already waited for it) and counts its device time.
    ///
    /// The host memory it copied from is let go then: pinned memory goes
    /// back to its pool, where the reading stage takes it for the slice
    /// after next (so a pipeline maps two slices' worth of it, not three).
    pub(crate) fn finish_upload<T>(&mut self, upload: &mut Upload<T>) -> Result<(), DeviceError> {
        if let Some(event) = &upload.event {
            let waited = wait_for(event).map_err(|e| DeviceError::cl("uploading", e))?;
            self.waited(waited);
            self.account("upload", 0, upload.bytes, event_seconds(event));
        }
        upload.host = Vec::new();
        upload.pinned = None;
        Ok(())
    }

    /// A marker of everything enqueued on the compute queue so far, for a
    /// command on the transfer queue to wait on; `None` when the host has
    /// seen it all end.
    fn compute_marker(&mut self, what: &str) -> Result<Option<Event>, DeviceError> {
        if !self.compute_busy {
            return Ok(None);
        }
        // SAFETY: a marker with no wait list touches no memory.
        let marker = unsafe { self.lease.queue().enqueue_marker_with_wait_list(&[]) }
            .map_err(|e| DeviceError::cl(&format!("ordering {what}"), e))?;
        self.lease
            .queue()
            .flush()
            .map_err(|e| DeviceError::cl(&format!("ordering {what}"), e))?;
        Ok(Some(marker))
    }

    /// Starts reading elements `first..first + count` of `buffer` back on
    /// the transfer queue, after `wait` (events) and after everything
    /// enqueued on the compute queue so far; returns at once.
    pub(crate) fn download_async<T: Copy + Default>(
        &mut self,
        what: &str,
        buffer: &Buffer<T>,
        first: usize,
        count: usize,
        wait: &[cl_event],
    ) -> Result<Download<T>, DeviceError> {
        let mut host = vec![T::default(); count];
        // SAFETY: `host` moves into the returned Download, which waits for
        // the event before freeing it (moving a Vec leaves its heap memory
        // where it is).
        let event = unsafe { self.enqueue_download(what, buffer, first, &mut host, wait) }?;
        Ok(Download {
            what: what.to_string(),
            event,
            host,
        })
    }

    /// [`Session::download_async`] of bytes into pinned memory from
    /// `staging` (ordinary memory where none can be had): the device
    /// writes it directly, with no staging copy by the driver, and the
    /// buffer goes back to the pool, for the next download, once the
    /// bytes are written out. Finishes with [`Session::finish_bytes`].
    pub(crate) fn download_bytes_async(
        &mut self,
        what: &str,
        buffer: &Buffer<u8>,
        first: usize,
        count: usize,
        staging: &Arc<StagingPool>,
    ) -> Result<BytesDownload, DeviceError> {
        let mut host = HostBytes::pinned(staging, count);
        let event = {
            let dest = GrowingBytes::grow(&mut host, count);
            // SAFETY: `host` moves into the returned BytesDownload, which
            // waits for the event before letting it go; a pinned mapping
            // and a Vec's heap memory stay where they are when moved.
            unsafe { self.enqueue_download(what, buffer, first, dest, &[]) }?
        };
        if matches!(host, HostBytes::Pinned(_)) {
            self.counters.bytes_downloaded_pinned += count as u64;
        }
        Ok(BytesDownload {
            what: what.to_string(),
            event,
            host,
        })
    }

    /// The first `count` elements of `buffer`, as [`Session::download`]
    /// reads them, into pinned memory from `staging` (bytes in the
    /// platform's order); `None` when no pinned buffer aligned for `u32`
    /// can be had (the caller then downloads into ordinary memory).
    pub(crate) fn download_u32_pinned(
        &mut self,
        what: &str,
        buffer: &Buffer<u32>,
        count: usize,
        staging: &Arc<StagingPool>,
    ) -> Result<Option<HostBytes>, DeviceError> {
        let bytes = count * size_of::<u32>();
        let mut host = HostBytes::pinned(staging, bytes);
        if !matches!(host, HostBytes::Pinned(_)) {
            return Ok(None);
        }
        let event = {
            let dest = GrowingBytes::grow(&mut host, bytes);
            // SAFETY: any bytes are valid `u32`s; only the aligned middle
            // is used, and only when it is all of `dest`.
            let (head, words, tail) = unsafe { dest.align_to_mut::<u32>() };
            if !head.is_empty() || !tail.is_empty() {
                return Ok(None);
            }
            // SAFETY: `host` is waited for below before it is returned or
            // dropped; a pinned mapping stays where it is when moved.
            unsafe { self.enqueue_download(what, buffer, 0, words, &[]) }?
        };
        let download = BytesDownload {
            what: what.to_string(),
            event,
            host,
        };
        self.counters.bytes_downloaded_pinned += bytes as u64;
        self.finish_bytes(download).map(Some)
    }

    /// Enqueues reading `host.len()` elements of `buffer` from `first` into
    /// `host` on the transfer queue, after `wait` and after everything
    /// enqueued on the compute queue so far, starts it and counts it;
    /// `None` when there is nothing to read.
    ///
    /// # Safety
    /// `host` must stay where it is, alive, until the returned event is
    /// complete.
    unsafe fn enqueue_download<T>(
        &mut self,
        what: &str,
        buffer: &Buffer<T>,
        first: usize,
        host: &mut [T],
        wait: &[cl_event],
    ) -> Result<Option<Event>, DeviceError> {
        if host.is_empty() {
            return Ok(None);
        }
        let marker = self.compute_marker(what)?;
        let mut wait_list = wait.to_vec();
        wait_list.extend(marker.iter().map(Event::get));
        // SAFETY: `host` has room for the elements read, and the caller
        // keeps it until the event completes; the buffer's release is
        // deferred by OpenCL until the read is done.
        let event = unsafe {
            self.transfer.queue().enqueue_read_buffer(
                buffer,
                CL_NON_BLOCKING,
                first * size_of::<T>(),
                host,
                &wait_list,
            )
        }
        .map_err(|e| DeviceError::cl(&format!("downloading {what}"), e))?;
        self.transfer
            .queue()
            .flush()
            .map_err(|e| DeviceError::cl(&format!("downloading {what}"), e))?;
        self.counters.transfers += 1;
        self.counters.bytes_downloaded += size_of_val(host) as u64;
        Ok(Some(event))
    }

    /// Waits for a read-back started with [`Session::download_bytes_async`]
    /// and returns its bytes.
    pub(crate) fn finish_bytes(
        &mut self,
        mut download: BytesDownload,
    ) -> Result<HostBytes, DeviceError> {
        if let Some(event) = download.event.take() {
            let waited = wait_for(&event)
                .map_err(|e| DeviceError::cl(&format!("downloading {}", download.what), e))?;
            self.waited(waited);
            let seconds = event_seconds(&event);
            let bytes = download.host.as_slice().len() as u64;
            self.account("download", 0, bytes, seconds);
        }
        Ok(std::mem::take(&mut download.host))
    }

    /// Waits for a read-back and returns its data.
    pub(crate) fn finish_download<T>(
        &mut self,
        mut download: Download<T>,
    ) -> Result<Vec<T>, DeviceError> {
        let host = std::mem::take(&mut download.host);
        if let Some(event) = download.event.take() {
            let waited = wait_for(&event)
                .map_err(|e| DeviceError::cl(&format!("downloading {}", download.what), e))?;
            self.waited(waited);
            let seconds = event_seconds(&event);
            self.account("download", 0, size_of_val(host.as_slice()) as u64, seconds);
        }
        Ok(host)
    }

    /// The first `count` elements of `buffer`.
    pub(crate) fn download<T: Copy + Default>(
        &mut self,
        what: &str,
        buffer: &Buffer<T>,
        count: usize,
    ) -> Result<Vec<T>, DeviceError> {
        self.download_range(what, buffer, 0, count)
    }

    /// Elements `[first, first + count)` of `buffer`, once every command
    /// enqueued before on the compute queue is done (the host sleeps
    /// meanwhile).
    pub(crate) fn download_range<T: Copy + Default>(
        &mut self,
        what: &str,
        buffer: &Buffer<T>,
        first: usize,
        count: usize,
    ) -> Result<Vec<T>, DeviceError> {
        let mut out = vec![T::default(); count];
        if count > 0 {
            // SAFETY: `out` has room for `count` elements and is not touched
            // until the read's event is complete (waited for below; on an
            // error the queue is drained before the session ends, and `out`
            // outlives this call only through the returned value).
            let event = unsafe {
                self.lease.queue().enqueue_read_buffer(
                    buffer,
                    CL_NON_BLOCKING,
                    first * size_of::<T>(),
                    &mut out,
                    &[],
                )
            }
            .map_err(|e| DeviceError::cl(&format!("downloading {what}"), e))?;
            self.lease
                .queue()
                .flush()
                .map_err(|e| DeviceError::cl(&format!("downloading {what}"), e))?;
            self.counters.transfers += 1;
            self.counters.bytes_downloaded += size_of_val(out.as_slice()) as u64;
            let waited = match wait_for(&event) {
                Ok(waited) => waited,
                Err(e) => {
                    // `out` must not be freed while the read may still run.
                    let _ = drain(self.lease.queue());
                    return Err(DeviceError::cl(&format!("downloading {what}"), e));
                }
            };
            self.waited(waited);
            // The queue is in order: everything before the read is done.
            self.compute_busy = false;
            self.account(
                "download",
                0,
                size_of_val(out.as_slice()) as u64,
                event_seconds(&event),
            );
        }
        Ok(out)
    }

    /// Element `index` of `buffer`.
    pub(crate) fn read_one<T: Copy + Default>(
        &mut self,
        what: &str,
        buffer: &Buffer<T>,
        index: usize,
    ) -> Result<T, DeviceError> {
        Ok(self.download_range(what, buffer, index, 1)?[0])
    }

    fn account(&mut self, name: &'static str, items: u64, bytes: u64, seconds: f64) {
        let entry = self.times.entry(name).or_default();
        entry.launches += 1;
        entry.items += items;
        entry.bytes += bytes;
        entry.seconds += seconds;
    }

    /// The kernel `name`, created on first use.
    fn kernel(&mut self, name: &'static str) -> Result<&Kernel, DeviceError> {
        if !self.kernels.contains_key(name) {
            let kernel = Kernel::create(&self.program, name)
                .map_err(|e| DeviceError::cl(&format!("creating kernel {name}"), e))?;
            self.kernels.insert(name, kernel);
        }
        self.kernels
            .get(name)
            .ok_or_else(|| DeviceError::new(format!("kernel {name} vanished")))
    }

    /// The work-group size to use for `name`: `wanted` (a power of two) or
    /// the largest power of two the kernel allows on this device.
    pub(crate) fn group_size(
        &mut self,
        name: &'static str,
        wanted: usize,
    ) -> Result<usize, DeviceError> {
        let device = self.device.device_id();
        let limit = self
            .kernel(name)?
            .get_work_group_size(device)
            .map_err(|e| DeviceError::cl(&format!("querying the work-group size of {name}"), e))?;
        let mut size = wanted.max(1);
        while size > limit.max(1) {
            size /= 2;
        }
        Ok(size)
    }

    /// Enqueues kernel `name` over `items` work items (rounded up to a
    /// multiple of the work-group size; kernels ignore the extra items)
    /// without waiting for it: later commands on the compute queue run
    /// after it, and a read-back waits for it. `bytes` is the volume it
    /// processes, for the measurements.
    ///
    /// The work-group size is always given (`local`, else
    /// [`DEFAULT_GROUP`] or less): left to the runtime it would follow the
    /// job's size, and PoCL builds (or fetches from its disk cache) one
    /// variant of each kernel per work-group size.
    pub(crate) fn launch(
        &mut self,
        name: &'static str,
        items: usize,
        local: Option<usize>,
        bytes: u64,
        args: &[Arg],
    ) -> Result<(), DeviceError> {
        self.launch_after(name, items, local, bytes, args, &[])
    }

    /// [`Session::launch`], starting only once the events in `wait` (from
    /// the transfer queue) are complete.
    pub(crate) fn launch_after(
        &mut self,
        name: &'static str,
        items: usize,
        local: Option<usize>,
        bytes: u64,
        args: &[Arg],
        wait: &[cl_event],
    ) -> Result<(), DeviceError> {
        if let Some(event) = self.enqueue(name, 0, items, local, args, wait)? {
            self.pending.push((name, items as u64, bytes, event));
        }
        Ok(())
    }

    /// Enqueues kernel `name` over work items `first..first + items` (the
    /// global offset: `get_global_id` starts at `first`) after `wait`, and
    /// returns without waiting: the event to wait on, if anything was
    /// enqueued.
    pub(crate) fn launch_async(
        &mut self,
        name: &'static str,
        first: usize,
        items: usize,
        bytes: u64,
        args: &[Arg],
        wait: &[cl_event],
    ) -> Result<Option<cl_event>, DeviceError> {
        let Some(event) = self.enqueue(name, first, items, None, args, wait)? else {
            return Ok(None);
        };
        let handle = event.get();
        self.pending.push((name, items as u64, bytes, event));
        Ok(Some(handle))
    }

    /// Waits for every command enqueued and not waited for, and counts
    /// their device times.
    ///
    /// The last command first: every pending command is on the compute
    /// queue, which is in order, so once the last is complete the others
    /// are too, and the host sleeps once per settle rather than once per
    /// kernel still running (which, on a loaded host, was most of them).
    pub(crate) fn settle(&mut self) -> Result<(), DeviceError> {
        let mut pending = std::mem::take(&mut self.pending);
        pending.reverse();
        for (name, items, bytes, event) in pending {
            let waited =
                wait_for(&event).map_err(|e| DeviceError::cl(&format!("running {name}"), e))?;
            self.waited(waited);
            self.account(name, items, bytes, event_seconds(&event));
        }
        self.keep_alive.clear();
        self.compute_busy = false;
        Ok(())
    }

    /// Sets the arguments of `name` and enqueues it over `first..first +
    /// items` (rounded up to the work-group size; kernels ignore the extra
    /// items) on the compute queue; `None` for no items.
    fn enqueue(
        &mut self,
        name: &'static str,
        first: usize,
        items: usize,
        local: Option<usize>,
        args: &[Arg],
        wait: &[cl_event],
    ) -> Result<Option<Event>, DeviceError> {
        if let Some(inject) = self.inject_failure.as_ref().filter(|i| i.kernel == name) {
            let launched = inject
                .seen
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if launched >= inject.after {
                return Err(DeviceError::new(format!(
                    "kernel {name} failed: injected failure (test)"
                )));
            }
        }
        if items == 0 {
            return Ok(None);
        }
        let local = match local {
            Some(local) => local,
            None => self.group_size(name, DEFAULT_GROUP)?,
        };
        let global = items.div_ceil(local) * local;
        let kernel = self.kernel(name)?;
        for (index, arg) in args.iter().enumerate() {
            let index = index as u32;
            // SAFETY: each argument has the size and kind the kernel's
            // signature declares (checked by the tests of every kernel);
            // buffers may be released once enqueued: OpenCL keeps a memory
            // object until the commands that use it are done, and the
            // arena takes a buffer back only after the queues are drained.
            let set = unsafe {
                match arg {
                    Arg::Mem(m) => kernel.set_arg(index, m),
                    Arg::U32(v) => kernel.set_arg(index, v),
                    Arg::U64(v) => kernel.set_arg(index, v),
                    Arg::Local(bytes) => kernel.set_arg_local_buffer(index, *bytes),
                }
            };
            set.map_err(|e| DeviceError::cl(&format!("setting argument {index} of {name}"), e))?;
        }
        let kernel_handle = kernel.get();
        let offsets = [first];
        let global_sizes = [global];
        let local_sizes = [local];
        // SAFETY: one dimension; offsets and sizes point to live arrays;
        // every argument set above.
        let event = unsafe {
            self.lease.queue().enqueue_nd_range_kernel(
                kernel_handle,
                1,
                if first == 0 {
                    std::ptr::null()
                } else {
                    offsets.as_ptr()
                },
                global_sizes.as_ptr(),
                local_sizes.as_ptr(),
                wait,
            )
        }
        .map_err(|e| DeviceError::cl(&format!("launching {name}"), e))?;
        self.lease
            .queue()
            .flush()
            .map_err(|e| DeviceError::cl(&format!("launching {name}"), e))?;
        self.compute_busy = true;
        self.counters.kernel_launches += 1;
        Ok(Some(event))
    }

    /// Reads a one-word error flag a kernel sets; an error naming `what` when
    /// it is set.
    pub(crate) fn check_flag(&mut self, what: &str, flag: &Buffer<u32>) -> Result<(), DeviceError> {
        if self.read_one("an error flag", flag, 0)? != 0 {
            return Err(DeviceError::new(format!("{what} (found on the device)")));
        }
        Ok(())
    }
}

/// How long a finished session waits, in all, for the runtime to drop its
/// commands' references to the session's buffers before freeing those still
/// referenced instead of keeping them for the next slice.
const RELEASE_GRACE: std::time::Duration = std::time::Duration::from_millis(2);

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // Nothing may still run on a buffer that goes back to the arena,
        // nor read host memory about to be freed.
        let drained = drain(self.lease.queue()).is_ok() && drain(self.transfer.queue()).is_ok();
        self.pending.clear();
        if drained {
            self.keep_alive.clear();
        } else {
            // The device may still read it: leak it rather than free it.
            std::mem::forget(std::mem::take(&mut self.keep_alive));
        }
        let arena = self.arena;
        // An enqueued command holds a reference to its buffers, which the
        // runtime may drop just after the command completes (PoCL does, on
        // its worker thread, after the wait above returned): a buffer still
        // referenced then gets a moment to be let go.
        let grace = std::time::Instant::now() + RELEASE_GRACE;
        for pooled in self.held.drain(..) {
            let mut only = drained && only_owner(&pooled.buffer);
            while drained && !only && std::time::Instant::now() < grace {
                std::thread::yield_now();
                only = only_owner(&pooled.buffer);
            }
            // A buffer someone still holds (a kernel argument is not a
            // reference; a caller's handle is) is freed, not reused.
            if only {
                arena.give_back(pooled);
            } else {
                self.device.release(pooled.bytes);
            }
        }
    }
}
