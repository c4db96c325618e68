//! One job's use of the device: a leased command queue, the compiled
//! kernels, buffers counted against the job's device-memory budget and the
//! device's largest allocation, transfers, kernel launches (timed with
//! OpenCL profiling events) and failure injection for tests.
//!
//! Two command queues (the GPU paper's streams): kernels go to the compute
//! queue, the large transfers to the transfer queue, and OpenCL events say
//! what waits for what. [`Session::upload_async`] and
//! [`Session::download_async`] return at once with the event; a launch can
//! wait on events ([`Session::launch_after`]), so a kernel starts the
//! moment its input has arrived while the host goes on preparing the next
//! arguments, and a read-back of finished output runs while later kernels
//! compute. Launches themselves wait for their kernel: the pipeline needs
//! most results (sizes, flags) on the host before it can plan the next step.
//! Pending transfers own their host memory and wait for their event when
//! dropped, so no transfer can outlive the memory it reads or writes.

use std::collections::HashMap;
use std::time::Instant;

use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{cl_event, cl_mem, CL_BLOCKING, CL_NON_BLOCKING};

use super::device::{DeviceContext, DeviceError, QueueLease};
use crate::job::KernelTime;

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
    host: Vec<T>,
}

impl<T> Upload<T> {
    /// The data being uploaded (the host may read it meanwhile).
    pub(crate) fn host(&self) -> &[T] {
        &self.host
    }

    /// The events to wait on before a kernel reads the buffer.
    pub(crate) fn wait_list(&self) -> Vec<cl_event> {
        self.event.iter().map(Event::get).collect()
    }
}

impl<T> Drop for Upload<T> {
    fn drop(&mut self) {
        // The host data must outlive the transfer, whatever happened.
        if let Some(event) = &self.event {
            let _ = event.wait();
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
            let _ = event.wait();
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

/// A device session for one slice of a job.
pub(crate) struct Session<'d> {
    device: &'d DeviceContext,
    lease: QueueLease<'d>,
    /// The queue for large transfers, beside the compute queue.
    transfer: QueueLease<'d>,
    program: std::sync::Arc<Program>,
    kernels: HashMap<&'static str, Kernel>,
    budget: u64,
    allocated: u64,
    inject_failure: Option<InjectedFailure>,
    /// Per kernel name, and "upload" / "download".
    pub(crate) times: HashMap<&'static str, KernelTime>,
    /// Launches not waited for yet: name, items, bytes, event.
    pending_launches: Vec<(&'static str, u64, u64, Event)>,
}

impl<'d> Session<'d> {
    /// A session on `device` running `program`, allowed `budget` bytes of
    /// device memory; a launch of kernel `inject_failure` fails (tests).
    pub(crate) fn new(
        device: &'d DeviceContext,
        program: std::sync::Arc<Program>,
        budget: u64,
        inject_failure: Option<InjectedFailure>,
    ) -> Result<Session<'d>, DeviceError> {
        Ok(Session {
            lease: device.lease_queue()?,
            transfer: device.lease_queue()?,
            device,
            program,
            kernels: HashMap::new(),
            budget,
            allocated: 0,
            inject_failure,
            times: HashMap::new(),
            pending_launches: Vec::new(),
        })
    }

    /// Device bytes allocated so far by this job.
    pub(crate) fn allocated(&self) -> u64 {
        self.allocated
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
        self.allocated += bytes;
        Ok(())
    }

    /// An uninitialised buffer of `count` elements (at least one: OpenCL
    /// refuses empty buffers).
    pub(crate) fn alloc<T>(&mut self, what: &str, count: usize) -> Result<Buffer<T>, DeviceError> {
        let count = count.max(1);
        self.reserve(what, (count * size_of::<T>()) as u64)?;
        // SAFETY: no host pointer is passed; the buffer is sized in elements of T.
        unsafe {
            Buffer::<T>::create(
                self.device.context(),
                CL_MEM_READ_WRITE,
                count,
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| DeviceError::cl(&format!("allocating {what}"), e))
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
        // SAFETY: the fill covers exactly the buffer; blocking on the event below.
        let event = unsafe {
            self.lease
                .queue()
                .enqueue_fill_buffer(&mut buffer, &pattern, 0, bytes, &[])
        }
        .map_err(|e| DeviceError::cl(&format!("clearing {what}"), e))?;
        event
            .wait()
            .map_err(|e| DeviceError::cl(&format!("clearing {what}"), e))?;
        Ok(buffer)
    }

    /// A buffer holding a copy of `data`.
    pub(crate) fn upload<T: Copy>(
        &mut self,
        what: &str,
        data: &[T],
    ) -> Result<Buffer<T>, DeviceError> {
        let mut buffer = self.alloc::<T>(what, data.len())?;
        if !data.is_empty() {
            let started = Instant::now();
            // SAFETY: `data` fits the buffer, and the write is blocking.
            unsafe {
                self.lease
                    .queue()
                    .enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, data, &[])
            }
            .map_err(|e| DeviceError::cl(&format!("uploading {what}"), e))?;
            self.account(
                "upload",
                0,
                size_of_val(data) as u64,
                started.elapsed().as_secs_f64(),
            );
        }
        Ok(buffer)
    }

    /// Starts copying `data` into a new buffer on the transfer queue and
    /// returns at once; kernels that read the buffer wait on the upload's
    /// event.
    pub(crate) fn upload_async<T: Copy>(
        &mut self,
        what: &str,
        data: Vec<T>,
    ) -> Result<Upload<T>, DeviceError> {
        let mut buffer = self.alloc::<T>(what, data.len())?;
        if data.is_empty() {
            return Ok(Upload {
                buffer,
                event: None,
                host: data,
            });
        }
        // SAFETY: `data` fits the buffer; it moves into the returned Upload,
        // which waits for the event before it frees the data.
        let event = unsafe {
            self.transfer
                .queue()
                .enqueue_write_buffer(&mut buffer, CL_NON_BLOCKING, 0, &data, &[])
        }
        .map_err(|e| DeviceError::cl(&format!("uploading {what}"), e))?;
        // Start it now rather than at the next blocking call.
        self.transfer
            .queue()
            .flush()
            .map_err(|e| DeviceError::cl(&format!("uploading {what}"), e))?;
        Ok(Upload {
            buffer,
            event: Some(event),
            host: data,
        })
    }

    /// Waits for an upload started with [`Session::upload_async`] (a no-op
    /// when a launch already waited for it) and counts its device time.
    pub(crate) fn finish_upload<T>(&mut self, upload: &Upload<T>) -> Result<(), DeviceError> {
        if let Some(event) = &upload.event {
            event.wait().map_err(|e| DeviceError::cl("uploading", e))?;
            let bytes = size_of_val(upload.host.as_slice()) as u64;
            self.account("upload", 0, bytes, event_seconds(event));
        }
        Ok(())
    }

    /// Starts reading elements `first..first + count` of `buffer` back on
    /// the transfer queue, after `wait` (events); returns at once.
    pub(crate) fn download_async<T: Copy + Default>(
        &mut self,
        what: &str,
        buffer: &Buffer<T>,
        first: usize,
        count: usize,
        wait: &[cl_event],
    ) -> Result<Download<T>, DeviceError> {
        let mut host = vec![T::default(); count];
        if count == 0 {
            return Ok(Download {
                what: what.to_string(),
                event: None,
                host,
            });
        }
        // SAFETY: `host` has room for `count` elements and moves into the
        // returned Download, which waits for the event before freeing it;
        // the buffer's release is deferred by OpenCL until the read is done.
        let event = unsafe {
            self.transfer.queue().enqueue_read_buffer(
                buffer,
                CL_NON_BLOCKING,
                first * size_of::<T>(),
                &mut host,
                wait,
            )
        }
        .map_err(|e| DeviceError::cl(&format!("downloading {what}"), e))?;
        self.transfer
            .queue()
            .flush()
            .map_err(|e| DeviceError::cl(&format!("downloading {what}"), e))?;
        Ok(Download {
            what: what.to_string(),
            event: Some(event),
            host,
        })
    }

    /// Waits for a read-back and returns its data.
    pub(crate) fn finish_download<T>(
        &mut self,
        mut download: Download<T>,
    ) -> Result<Vec<T>, DeviceError> {
        let host = std::mem::take(&mut download.host);
        if let Some(event) = download.event.take() {
            event
                .wait()
                .map_err(|e| DeviceError::cl(&format!("downloading {}", download.what), e))?;
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

    /// Elements `[first, first + count)` of `buffer`.
    pub(crate) fn download_range<T: Copy + Default>(
        &mut self,
        what: &str,
        buffer: &Buffer<T>,
        first: usize,
        count: usize,
    ) -> Result<Vec<T>, DeviceError> {
        let mut out = vec![T::default(); count];
        if count > 0 {
            let started = Instant::now();
            // SAFETY: `out` has room for `count` elements; the read is blocking.
            unsafe {
                self.lease.queue().enqueue_read_buffer(
                    buffer,
                    CL_BLOCKING,
                    first * size_of::<T>(),
                    &mut out,
                    &[],
                )
            }
            .map_err(|e| DeviceError::cl(&format!("downloading {what}"), e))?;
            self.account(
                "download",
                0,
                size_of_val(out.as_slice()) as u64,
                started.elapsed().as_secs_f64(),
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

    /// Runs kernel `name` over `items` work items (rounded up to a multiple
    /// of the work-group size; kernels ignore the extra items) and waits for
    /// it. `bytes` is the volume it processes, for the measurements.
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
            event
                .wait()
                .map_err(|e| DeviceError::cl(&format!("running {name}"), e))?;
            self.account(name, items as u64, bytes, event_seconds(&event));
        }
        Ok(())
    }

    /// Enqueues kernel `name` over work items `first..first + items` (the
    /// global offset: `get_global_id` starts at `first`) after `wait`, and
    /// returns without waiting: the event to wait on, if anything was
    /// enqueued. The buffers in `args` must live until
    /// [`Session::settle`], which waits for every such launch and counts
    /// its time.
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
        self.pending_launches
            .push((name, items as u64, bytes, event));
        Ok(Some(handle))
    }

    /// Waits for every [`Session::launch_async`] launch and counts them.
    pub(crate) fn settle(&mut self) -> Result<(), DeviceError> {
        for (name, items, bytes, event) in std::mem::take(&mut self.pending_launches) {
            event
                .wait()
                .map_err(|e| DeviceError::cl(&format!("running {name}"), e))?;
            self.account(name, items, bytes, event_seconds(&event));
        }
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
            // buffers outlive the launch (blocking, or settled before the
            // caller drops them).
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

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // Every buffer of the job is gone by now: they are created by and
        // dropped within the job, before its session.
        self.device.release(self.allocated);
    }
}
