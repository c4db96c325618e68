//! Finding and holding the OpenCL device: discovery and choice (a GPU when
//! there is one, else any device, or an explicit platform/device index), one
//! long-lived context per device per process with its command queues and
//! compiled programs, and the device's memory limits.
//!
//! The OpenCL library is loaded at run time (the `opencl3` crate's `dynamic`
//! feature), so ShaleDB builds and runs on a machine with no OpenCL at all;
//! there [`device`] answers [`Unavailable`] with the reason.
//!
//! Contexts are created once and never dropped: PoCL fails intermittently
//! (`CL_INVALID_BUFFER_SIZE`) when several contexts are created and dropped
//! concurrently, and a context is expensive anyway. Command queues are
//! leased to one job at a time and returned to a pool; programs are loaded
//! once per source and kept, from the on-disk cache of compiled kernels
//! when it has them (`program_cache.rs`).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::arena::DeviceArena;
use super::device_error::DeviceError;
use super::device_fit::DeviceSelector;
use super::program_cache::{self, ProgramCache, ProgramOrigin};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU};
use opencl3::platform::{get_platforms, Platform};
use opencl3::program::Program;

/// Why no OpenCL device can be used: no library, no platform, no device,
/// or the chosen one cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// What is missing, for logs and error messages.
    pub reason: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no OpenCL device: {}", self.reason)
    }
}

impl std::error::Error for Unavailable {}

fn unavailable(reason: impl Into<String>) -> Unavailable {
    Unavailable {
        reason: reason.into(),
    }
}

/// What the executor knows of its device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Platform name.
    pub platform: String,
    /// Device name.
    pub name: String,
    /// OpenCL version string of the device.
    pub version: String,
    /// True for a GPU.
    pub is_gpu: bool,
    /// Bytes of global memory.
    pub global_memory: u64,
    /// The largest single buffer the device allows.
    pub max_allocation: u64,
    /// Compute units.
    pub compute_units: u32,
}

/// One device with its long-lived context, queue pool and program cache.
pub struct DeviceContext {
    info: DeviceInfo,
    device: Device,
    context: Context,
    queues: Mutex<Vec<CommandQueue>>,
    programs: Mutex<HashMap<String, (Arc<Program>, ProgramOrigin)>>,
    /// Bytes allocated on the device: by the jobs running now, and free
    /// buffers kept for the next ones.
    in_use: Arc<AtomicU64>,
    /// Every executor's free buffers, freed first when memory runs short.
    arenas: Mutex<Vec<Weak<DeviceArena>>>,
}

impl fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceContext")
            .field("info", &self.info)
            .finish()
    }
}

/// The devices opened so far (or why they could not be), by selector.
type Registry = Mutex<HashMap<DeviceSelector, Result<Arc<DeviceContext>, Unavailable>>>;

/// The devices opened so far. Never emptied (see the module documentation).
fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The device `selector` names, opened once per process; later calls return
/// the same context (or the same reason it is unavailable).
pub fn device(selector: DeviceSelector) -> Result<Arc<DeviceContext>, Unavailable> {
    let mut registry = registry()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    registry
        .entry(selector)
        .or_insert_with(|| open(selector).map(Arc::new))
        .clone()
}

/// One device as [`list_devices`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedDevice {
    /// Index of its platform ([`DeviceSelector::platform`]).
    pub platform_index: usize,
    /// Index within the platform ([`DeviceSelector::device`]).
    pub device_index: usize,
    /// Platform name.
    pub platform: String,
    /// Device name.
    pub name: String,
    /// True for a GPU.
    pub is_gpu: bool,
}

/// The device `selector` would open, described without opening it (no
/// context, no program build): what `compaction_executor=auto` needs to
/// know to leave a device that is not a GPU alone, cheaply.
pub fn chosen_device(selector: DeviceSelector) -> Result<(String, String, bool), Unavailable> {
    // Under the registry's lock, as every open: an OpenCL runtime (PoCL)
    // initialising in two threads at once crashes.
    let _opening = registry()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (platform, device) = choose(selector)?;
    Ok((
        platform.name().unwrap_or_default(),
        device.name().unwrap_or_default(),
        device.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_GPU != 0),
    ))
}

/// Lists every platform and device, for `shale` to print and for choosing
/// indices.
pub fn list_devices() -> Result<Vec<ListedDevice>, Unavailable> {
    let _opening = registry()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut out = Vec::new();
    for (p, platform) in platforms()?.iter().enumerate() {
        let name = platform.name().unwrap_or_default();
        for (d, id) in platform
            .get_devices(CL_DEVICE_TYPE_ALL)
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let device = Device::new(id);
            let is_gpu = device.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_GPU != 0);
            out.push(ListedDevice {
                platform_index: p,
                device_index: d,
                platform: name.clone(),
                name: device.name().unwrap_or_default(),
                is_gpu,
            });
        }
    }
    Ok(out)
}

fn platforms() -> Result<Vec<Platform>, Unavailable> {
    if let Err(e) = cl3::load_library() {
        return Err(unavailable(format!(
            "cannot load the OpenCL library (libOpenCL.so.1): {e}"
        )));
    }
    let platforms = get_platforms()
        .map_err(|e| unavailable(format!("listing OpenCL platforms failed: {e}")))?;
    if platforms.is_empty() {
        return Err(unavailable(
            "the OpenCL library lists no platform (no ICD installed)",
        ));
    }
    Ok(platforms)
}

fn choose(selector: DeviceSelector) -> Result<(Platform, Device), Unavailable> {
    let platforms = platforms()?;
    let candidates: Vec<(usize, &Platform)> = match selector.platform {
        Some(p) => vec![(
            p,
            platforms.get(p).ok_or_else(|| {
                unavailable(format!(
                    "no OpenCL platform {p} (there are {})",
                    platforms.len()
                ))
            })?,
        )],
        None => platforms.iter().enumerate().collect(),
    };
    if let Some(d) = selector.device {
        let (p, platform) = candidates
            .first()
            .ok_or_else(|| unavailable("no OpenCL platform"))?;
        let ids = platform.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default();
        let id = ids.get(d).ok_or_else(|| {
            unavailable(format!(
                "OpenCL platform {p} has no device {d} (it has {})",
                ids.len()
            ))
        })?;
        return Ok((**platform, Device::new(*id)));
    }
    // A GPU on any candidate platform first, then any device.
    for device_type in [CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ALL] {
        for (_, platform) in &candidates {
            if let Some(&id) = platform
                .get_devices(device_type)
                .unwrap_or_default()
                .first()
            {
                return Ok((**platform, Device::new(id)));
            }
        }
    }
    Err(unavailable("no OpenCL device on any platform"))
}

fn open(selector: DeviceSelector) -> Result<DeviceContext, Unavailable> {
    let (platform, device) = choose(selector)?;
    let describe =
        |what: &str, e: opencl3::error_codes::ClError| unavailable(format!("{what}: {e}"));
    if !device.available().unwrap_or(false) {
        return Err(unavailable(format!(
            "device {} is not available",
            device.name().unwrap_or_default()
        )));
    }
    if !device.compiler_available().unwrap_or(false) {
        return Err(unavailable(format!(
            "device {} has no OpenCL C compiler",
            device.name().unwrap_or_default()
        )));
    }
    let info = DeviceInfo {
        platform: platform.name().unwrap_or_default(),
        name: device
            .name()
            .map_err(|e| describe("reading the device name", e))?,
        version: device.version().unwrap_or_default(),
        is_gpu: device.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_GPU != 0),
        global_memory: device
            .global_mem_size()
            .map_err(|e| describe("reading the device memory size", e))?,
        max_allocation: device
            .max_mem_alloc_size()
            .map_err(|e| describe("reading the largest device allocation", e))?,
        compute_units: device.max_compute_units().unwrap_or(1),
    };
    let context =
        Context::from_device(&device).map_err(|e| describe("creating an OpenCL context", e))?;
    Ok(DeviceContext {
        info,
        device,
        context,
        queues: Mutex::new(Vec::new()),
        programs: Mutex::new(HashMap::new()),
        in_use: Arc::new(AtomicU64::new(0)),
        arenas: Mutex::new(Vec::new()),
    })
}

impl DeviceContext {
    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The OpenCL context.
    pub(crate) fn context(&self) -> &Context {
        &self.context
    }

    /// The device id.
    pub(crate) fn device_id(&self) -> opencl3::types::cl_device_id {
        self.device.id()
    }

    /// Counts `bytes` more of device memory as in use, unless that would take
    /// the jobs running now past `budget` together; free buffers kept in
    /// the arena are freed first when that makes room. Returns the total in
    /// use before, as the error.
    pub(crate) fn reserve(&self, bytes: u64, budget: u64) -> Result<(), u64> {
        let before = self.in_use.fetch_add(bytes, Ordering::SeqCst);
        if before + bytes <= budget {
            return Ok(());
        }
        let mut freed = 0;
        let mut arenas = self.arenas.lock().unwrap_or_else(|p| p.into_inner());
        arenas.retain(|arena| arena.strong_count() > 0);
        for arena in arenas.iter().filter_map(Weak::upgrade) {
            if before + bytes - freed <= budget {
                break;
            }
            freed += arena.evict(before + bytes - budget - freed);
        }
        drop(arenas);
        self.in_use.fetch_sub(freed, Ordering::SeqCst);
        if before + bytes - freed > budget {
            let in_use = self.in_use.fetch_sub(bytes, Ordering::SeqCst) - bytes;
            return Err(in_use);
        }
        Ok(())
    }

    /// A new arena for one executor's free buffers on this device.
    pub(crate) fn new_arena(&self) -> Arc<DeviceArena> {
        let arena = Arc::new(DeviceArena::new(self.in_use.clone()));
        let mut arenas = self.arenas.lock().unwrap_or_else(|p| p.into_inner());
        arenas.retain(|arena| arena.strong_count() > 0);
        arenas.push(Arc::downgrade(&arena));
        arena
    }

    /// Returns `bytes` reserved with [`DeviceContext::reserve`].
    pub(crate) fn release(&self, bytes: u64) {
        self.in_use.fetch_sub(bytes, Ordering::SeqCst);
    }

    /// A command queue (with profiling) for one job, from the pool or new.
    pub(crate) fn lease_queue(&self) -> Result<QueueLease<'_>, DeviceError> {
        let pooled = self.queues.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let queue = match pooled {
            Some(queue) => queue,
            None => {
                // OpenCL 2.0's call first; 1.2 platforms only have the older one.
                match CommandQueue::create_default_with_properties(
                    &self.context,
                    CL_QUEUE_PROFILING_ENABLE,
                    0,
                ) {
                    Ok(queue) => queue,
                    Err(_) => {
                        CommandQueue::create_default(&self.context, CL_QUEUE_PROFILING_ENABLE)
                            .map_err(|e| DeviceError::cl("creating a command queue", e))?
                    }
                }
            }
        };
        Ok(QueueLease {
            owner: self,
            queue: Some(queue),
        })
    }

    /// The program built from `source` with `options`, loaded on first use
    /// (from the on-disk `cache` when it holds the program for this device,
    /// else compiled) and kept for the life of the process, with where it
    /// came from then. A build failure carries the compiler's log.
    pub(crate) fn program(
        &self,
        source: &str,
        options: &str,
        cache: &ProgramCache,
    ) -> Result<(Arc<Program>, ProgramOrigin), DeviceError> {
        let key = format!("{options}\u{0}{source}");
        let mut programs = self.programs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((program, origin)) = programs.get(&key) {
            return Ok((program.clone(), *origin));
        }
        let (program, origin) = program_cache::load_or_build(
            &self.context,
            self.device.id(),
            source,
            options,
            cache.directory().as_deref(),
        )?;
        let program = Arc::new(program);
        programs.insert(key, (program.clone(), origin));
        Ok((program, origin))
    }
}

/// A command queue held by one job; back to the pool on drop.
pub(crate) struct QueueLease<'a> {
    owner: &'a DeviceContext,
    queue: Option<CommandQueue>,
}

impl QueueLease<'_> {
    /// The queue.
    pub(crate) fn queue(&self) -> &CommandQueue {
        // Present until drop.
        self.queue
            .as_ref()
            .unwrap_or_else(|| unreachable!("queue taken before drop"))
    }
}

impl Drop for QueueLease<'_> {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.take() {
            // Only a queue with no work left goes back to the pool. Sleep
            // until its work is done first: `clFinish` may spin.
            if drain(&queue).is_ok() {
                self.owner
                    .queues
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(queue);
            }
        }
    }
}

/// Waits, without spinning, until every command enqueued on `queue` is
/// complete.
pub(crate) fn drain(queue: &CommandQueue) -> Result<(), DeviceError> {
    // SAFETY: a marker with no wait list touches no memory.
    let marker = unsafe { queue.enqueue_marker_with_wait_list(&[]) }
        .map_err(|e| DeviceError::cl("draining a command queue", e))?;
    queue
        .flush()
        .map_err(|e| DeviceError::cl("draining a command queue", e))?;
    super::wait::wait_for(&marker).map_err(|e| DeviceError::cl("draining a command queue", e))?;
    // Returns at once now; it also reports an error of the queue itself.
    queue
        .finish()
        .map_err(|e| DeviceError::cl("draining a command queue", e))
}
