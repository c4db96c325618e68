//! The executors a database has, built once at open from the options: the
//! reference (`streaming`), the data-parallel CPU executor (`parallel`) and,
//! when the options ask for it or leave the choice to the scheduler and a
//! device is usable, the OpenCL executor. The scheduler chooses among them
//! per job (`compaction::scheduler::placement`).
//!
//! `auto` is defined here once, for the engine and for a process that runs
//! one executor for every job (`shale worker`, the tools): the OpenCL
//! device when it is a GPU (`device_for`), else the CPU. The engine then
//! places each job (device, `parallel` or `streaming`); a lone executor
//! ([`executor_by_name`]) is the device with `parallel` and `streaming`
//! behind it, or `parallel`.
//!
//! Under `auto` the device is looked for beside the database, not before
//! it opens: asking the OpenCL loader which device there is loads every
//! vendor's driver (PoCL loads LLVM; a GPU driver's context takes
//! longer), which takes as long as replaying the MANIFEST of a large
//! database (`docs/results/compaction-service.md`, "The compaction
//! service: unchanged speed, and manual compaction under writers").
//! A machine without a GPU's device node is answered at once, with no
//! OpenCL loaded (`GPU_DEVICE_NODES`).
//! Nothing waits for the answer: until it comes, jobs are placed on the
//! CPU, and the first compaction thread to see it tells the compaction
//! service (`Runner::note_device`). Only a manual compaction that names
//! `opencl` waits for it.

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use shale_compact::chain::FallbackChain;
use shale_compact::job::Executor;
#[cfg(feature = "opencl")]
use shale_compact::opencl::{chosen_device, OpenClExecutor, OpenClOptions};
use shale_compact::parallel::ParallelExecutor;
#[cfg(feature = "remote")]
use shale_compact::remote::{RemoteExecutor, RemoteOptions};
use shale_compact::streaming::StreamingExecutor;
use shale_compact::ExecutorId;
use shale_compact::ExecutorKind::{self, OpenCl, Parallel, Streaming};
use shale_format::{Error, Result};

use crate::compaction::scheduler::placement::DeviceFacts;
pub use crate::compaction::service::Lane;
pub use crate::options::ExecutorChoice;
use crate::options::Options;

/// The OpenCL executor and what placement needs to know of its device.
#[derive(Debug)]
pub(crate) struct DeviceExecutor {
    pub(crate) executor: Arc<dyn Executor>,
    /// The device's name, for the LOG.
    pub(crate) name: String,
    pub(crate) facts: DeviceFacts,
}

/// Every executor of one database.
#[derive(Debug)]
pub(crate) struct Executors {
    pub(crate) choice: ExecutorChoice,
    streaming: Arc<dyn Executor>,
    parallel: Arc<dyn Executor>,
    device: DeviceSlot,
    /// The remote workers, when the options name some.
    pub(crate) remote: Option<Arc<Remote>>,
    /// The options' `custom_executor`, offered every job first.
    pub(crate) custom: Option<Arc<dyn Executor>>,
    /// What only `streaming` can honour, when the database has it: "the
    /// custom comparator NAME" or "the filter policy NAME". Only `streaming`
    /// runs jobs then.
    custom_order: Option<String>,
}

/// The OpenCL executor a database has: found at open, or still being
/// looked for by `auto`'s probe (see the module comment).
#[derive(Debug)]
struct DeviceSlot {
    /// The device, or why there is none (`None`: none was asked for).
    found: OnceLock<Result<DeviceExecutor, Option<String>>>,
    probe: Mutex<Option<JoinHandle<std::result::Result<DeviceExecutor, String>>>>,
}

impl DeviceSlot {
    fn found(found: Result<DeviceExecutor, Option<String>>) -> DeviceSlot {
        DeviceSlot {
            found: OnceLock::from(found),
            probe: Mutex::new(None),
        }
    }

    /// Starts `auto`'s probe on a thread of its own (or runs it here when
    /// no thread can be started). A machine with no GPU device node is
    /// answered at once, without loading OpenCL at all.
    fn probe(options: &Options) -> DeviceSlot {
        if let Err(why) = gpu_device_node() {
            return DeviceSlot::found(Err(Some(why)));
        }
        let owned = options.clone();
        match std::thread::Builder::new()
            .name("shale-device-probe".into())
            .spawn(move || device_for(&ExecutorChoice::Auto, &owned))
        {
            Ok(probe) => DeviceSlot {
                found: OnceLock::new(),
                probe: Mutex::new(Some(probe)),
            },
            Err(_) => DeviceSlot::found(device_for(&ExecutorChoice::Auto, options).map_err(Some)),
        }
    }

    /// The answer if the probe is over, without waiting.
    fn known(&self) -> Option<&Result<DeviceExecutor, Option<String>>> {
        if let Some(found) = self.found.get() {
            return Some(found);
        }
        let over = self
            .probe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_none_or(JoinHandle::is_finished);
        over.then(|| self.get())
    }

    /// The answer, waiting for the probe if it still runs.
    fn get(&self) -> &Result<DeviceExecutor, Option<String>> {
        self.found.get_or_init(|| {
            let probe = self.probe.lock().unwrap_or_else(|p| p.into_inner()).take();
            match probe.map(JoinHandle::join) {
                Some(Ok(found)) => found.map_err(Some),
                Some(Err(_)) => Err(Some("the OpenCL device probe panicked".to_string())),
                None => Err(None),
            }
        })
    }
}

impl Drop for DeviceSlot {
    /// An open that fails after starting the probe waits for it, so that
    /// no OpenCL call runs on past the database that asked for it.
    fn drop(&mut self) {
        let probe = self
            .probe
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(probe) = probe {
            let _ = probe.join();
        }
    }
}

/// The settings of the `opencl` executor the engine builds from `options`.
#[cfg(feature = "opencl")]
pub fn opencl_options(options: &Options) -> OpenClOptions {
    let settings = &options.opencl;
    OpenClOptions {
        device: settings.device,
        policy: settings.placement,
        max_device_files: settings.max_device_files,
        memory_budget: settings.memory_budget,
        cpu_threads: options.compaction_threads,
        cpu_nice: options.compaction_nice,
        max_slice_input_bytes: (settings.slice_bytes > 0).then_some(settings.slice_bytes),
        ..OpenClOptions::default()
    }
}

/// The settings of the `remote` executor the engine builds from
/// `options` (the CA certificate read from its file).
#[cfg(feature = "remote")]
pub fn remote_options(options: &Options) -> Result<RemoteOptions> {
    let settings = &options.remote;
    let tls_ca_pem = match &settings.tls_ca {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            Error::InvalidArgument(format!("remote_tls_ca {}: {e}", path.display()))
        })?),
        None => None,
    };
    let read = |what: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Error::InvalidArgument(format!("{what} {}: {e}", path.display())))
    };
    let tls_identity = match &settings.tls_identity {
        Some((cert, key)) => Some((read("remote_tls_cert", cert)?, read("remote_tls_key", key)?)),
        None => None,
    };
    Ok(RemoteOptions {
        tls_identity,
        endpoints: settings.workers.clone(),
        token: settings.token.as_ref().map(|t| t.0.clone()),
        mode: settings.mode,
        progress_timeout: settings.timeout,
        keys_window: settings.keys_window,
        tls_ca_pem,
        ..RemoteOptions::default()
    })
}

fn parallel_executor(options: &Options) -> Result<ParallelExecutor> {
    ParallelExecutor::with_nice(
        options.compaction_threads,
        options.compaction_memory_budget,
        options.compaction_nice,
    )
}

/// Builds the executor named `name` (an [`ExecutorChoice`]'s name) on its
/// own, as a tool or `shale worker` runs it: `opencl` on a device, falling
/// back to `parallel` then `streaming` for what the device refuses (as the
/// engine's chain does); `auto` the same when the device is a GPU (the
/// engine's rule, `device_for`), else `parallel`. `opencl` on a machine
/// without a usable OpenCL device is an error that says why.
pub fn executor_by_name(name: &str, options: &Options) -> Result<Arc<dyn Executor>> {
    let on_device = |device: DeviceExecutor| -> Result<Arc<dyn Executor>> {
        Ok(Arc::new(FallbackChain::new(vec![
            device.executor,
            Arc::new(parallel_executor(options)?),
            Arc::new(StreamingExecutor),
        ])))
    };
    let choice = name
        .parse::<ExecutorChoice>()
        .map_err(Error::InvalidArgument)?;
    match choice {
        ExecutorChoice::Forced(Streaming) => Ok(Arc::new(StreamingExecutor)),
        ExecutorChoice::Forced(Parallel) => Ok(Arc::new(parallel_executor(options)?)),
        ExecutorChoice::Forced(OpenCl) => match device_for(&choice, options) {
            Ok(device) => on_device(device),
            Err(reason) => Err(Error::NotSupported(format!(
                "the opencl executor is unavailable: {reason}"
            ))),
        },
        ExecutorChoice::Forced(ExecutorKind::Remote) => Ok(new_remote(options)?),
        ExecutorChoice::Auto => match device_for(&choice, options) {
            Ok(device) => on_device(device),
            Err(_) => Ok(Arc::new(parallel_executor(options)?)),
        },
    }
}

/// Where GPU drivers put the device nodes their OpenCL runtimes open:
/// NVIDIA, AMD's ROCm, the kernel's DRM render nodes (Intel, AMD and
/// Mesa's runtimes), Arm Mali and Qualcomm Adreno.
const GPU_DEVICE_NODES: &[&str] = &[
    "nvidiactl",
    "nvidia0",
    "kfd",
    "dri/renderD",
    "mali0",
    "kgsl-3d0",
];

/// Ok when `/dev` holds a GPU's device node, else why not. Without one no
/// OpenCL runtime can reach a GPU, and asking the OpenCL loader would load
/// every installed runtime for nothing: on a machine with only PoCL, its
/// LLVM made most of the time and memory of opening and closing a small
/// database (`docs/results/format-and-compaction.md`, "auto's device
/// probe"). `compaction_executor=opencl` still takes any device.
fn gpu_device_node() -> std::result::Result<(), String> {
    let found = GPU_DEVICE_NODES
        .iter()
        .any(|node| match node.rsplit_once('/') {
            // A prefix in a folder: the render nodes are renderD128 and on.
            Some((folder, prefix)) => {
                std::fs::read_dir(format!("/dev/{folder}")).is_ok_and(|entries| {
                    entries
                        .flatten()
                        .any(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
                })
            }
            None => std::path::Path::new("/dev").join(node).exists(),
        });
    if found {
        Ok(())
    } else {
        Err("no GPU device node in /dev (nvidia, kfd, dri/renderD*, mali, kgsl);              auto offloads only to a GPU"
            .to_string())
    }
}

/// The OpenCL executor `choice` calls for. An OpenCL device on the CPU
/// (PoCL) competes with the CPU executors for the same cores, so `auto`
/// takes only a GPU, and leaves any other device alone before anything is
/// built for it (building the kernels for PoCL made every open slower:
/// `docs/results/compaction-service.md`); `opencl` named takes any device.
/// The error says why not.
fn device_for(
    choice: &ExecutorChoice,
    options: &Options,
) -> std::result::Result<DeviceExecutor, String> {
    #[cfg(feature = "opencl")]
    {
        if *choice == ExecutorChoice::Auto {
            let (platform, name, is_gpu) =
                chosen_device(options.opencl.device).map_err(|u| u.to_string())?;
            if !is_gpu {
                return Err(format!(
                    "the OpenCL device {name} ({platform}) is not a GPU; auto offloads only to a GPU"
                ));
            }
        }
        // The compaction service places and falls back itself: the executor
        // only runs jobs on the device or refuses them.
        let executor = OpenClExecutor::new(opencl_options(options)).map_err(|u| u.to_string())?;
        let facts = DeviceFacts {
            policy: options.opencl.placement,
            limits: executor.limits(),
        };
        Ok(DeviceExecutor {
            name: executor.device_info().name.clone(),
            executor: Arc::new(executor),
            facts,
        })
    }
    #[cfg(not(feature = "opencl"))]
    {
        let _ = (choice, options);
        Err("this build of ShaleDB has no OpenCL support (the shale crate's `opencl` feature is off)"
            .to_string())
    }
}

/// The remote executor, or with the `remote` feature off, a type with no
/// value: a database then has no workers.
#[cfg(feature = "remote")]
pub(crate) type Remote = RemoteExecutor;

/// The remote executor `options` name workers for.
#[cfg(feature = "remote")]
fn new_remote(options: &Options) -> Result<Arc<Remote>> {
    Ok(Arc::new(RemoteExecutor::new(remote_options(options)?)?))
}

/// With the `remote` feature off: an error that says why.
#[cfg(not(feature = "remote"))]
fn new_remote(_options: &Options) -> Result<Arc<Remote>> {
    Err(Error::NotSupported(
        "remote compaction workers: this build of ShaleDB has no remote support \
         (the shale crate's `remote` feature is off)"
            .to_string(),
    ))
}

/// With the `remote` feature off there are no workers: naming one is an
/// error that says why.
#[cfg(not(feature = "remote"))]
#[derive(Debug)]
pub(crate) enum Remote {}

#[cfg(not(feature = "remote"))]
impl Remote {
    pub(crate) fn workers(&self) -> usize {
        match *self {}
    }

    pub(crate) fn mode(&self) -> &'static str {
        match *self {}
    }

    pub(crate) fn worker_stats(&self) -> Vec<WorkerLine> {
        match *self {}
    }
}

#[cfg(not(feature = "remote"))]
impl Executor for Remote {
    fn name(&self) -> &'static str {
        ExecutorKind::Remote.name()
    }
    fn run(
        &self,
        _job: &shale_compact::job::CompactionJob,
        _io: &dyn shale_compact::job::JobIo,
    ) -> Result<shale_compact::job::CompactionOutput> {
        match *self {}
    }
}

/// What a worker line of `shale.executors` shows (the `remote` feature's
/// `WorkerStats`).
#[cfg(not(feature = "remote"))]
#[derive(Debug)]
pub(crate) struct WorkerLine {
    pub(crate) endpoint: String,
    pub(crate) jobs: u64,
    pub(crate) failures: u64,
    pub(crate) running: u64,
    pub(crate) refusals: Vec<(String, u64)>,
}

impl Executors {
    /// The executors `options` call for. `opencl` named but unusable is an
    /// error; under `auto` a missing device is only noted.
    pub(crate) fn from_options(options: &Options) -> Result<Executors> {
        let custom_order = match (&options.comparator, &options.filter_policy) {
            (Some(comparator), _) => Some(format!("the custom comparator {}", comparator.name())),
            (None, Some(policy)) => Some(format!("the filter policy {}", policy.name())),
            (None, None) => None,
        };
        let choice = match options.compaction_executor {
            // The other executors compare key bytes and build Bloom filters
            // (`Options::validate` refuses them by name with a custom
            // comparator or filter policy).
            ExecutorChoice::Auto if custom_order.is_some() => ExecutorChoice::Forced(Streaming),
            choice => choice,
        };
        let remote = match choice {
            ExecutorChoice::Auto | ExecutorChoice::Forced(ExecutorKind::Remote)
                if !options.remote.workers.is_empty() =>
            {
                Some(new_remote(options)?)
            }
            _ => None,
        };
        let device = match choice {
            ExecutorChoice::Auto => DeviceSlot::probe(options),
            // Named, it must work: the open fails before it touches the
            // database if it does not.
            ExecutorChoice::Forced(OpenCl) => match device_for(&choice, options) {
                Ok(device) => DeviceSlot::found(Ok(device)),
                Err(why) => {
                    return Err(Error::NotSupported(format!(
                        "the opencl executor is unavailable: {why}"
                    )))
                }
            },
            ExecutorChoice::Forced(_) => DeviceSlot::found(Err(None)),
        };
        Ok(Executors {
            choice,
            streaming: Arc::new(StreamingExecutor),
            parallel: Arc::new(parallel_executor(options)?),
            device,
            remote,
            custom: options.custom_executor.clone(),
            custom_order,
        })
    }

    /// What placement needs to know of these executors, the device
    /// excepted (see [`Executors::device`]).
    pub(crate) fn facts(&self) -> crate::compaction::service::PlacementFacts {
        crate::compaction::service::PlacementFacts {
            choice: self.choice,
            remote: self.remote.is_some(),
            custom: self.custom.as_ref().map(|c| c.name()),
        }
    }

    /// What placement needs to know of the device, once the database knows
    /// it has one.
    pub(crate) fn device_facts(&self) -> Option<DeviceFacts> {
        self.device().map(|d| d.facts)
    }

    /// The device for the LOG: its name, or why there is none.
    pub(crate) fn describe_device(&self) -> String {
        match (self.device(), self.device_unavailable()) {
            (Some(d), _) => format!("jobs may run on {}", d.name),
            (None, Some(why)) => format!("no device ({why})"),
            (None, None) => "no device".to_string(),
        }
    }

    /// The OpenCL executor, when the database has one and knows it: `None`
    /// while `auto`'s probe runs.
    pub(crate) fn device(&self) -> Option<&DeviceExecutor> {
        self.device.known()?.as_ref().ok()
    }

    /// Whether `auto`'s probe is over (always, for the other choices).
    pub(crate) fn device_known(&self) -> bool {
        self.device.known().is_some()
    }

    /// Why the database has no device, once that is known: `auto` found
    /// none usable (for the LOG and errors).
    pub(crate) fn device_unavailable(&self) -> Option<&str> {
        self.device.known()?.as_ref().err()?.as_deref()
    }

    /// The executor `id` names, when this database has it.
    pub(crate) fn by_id(&self, id: ExecutorId) -> Option<Arc<dyn Executor>> {
        match id {
            ExecutorId::Custom(name) => self.custom.clone().filter(|c| c.name() == name),
            ExecutorId::Builtin(Streaming) => Some(self.streaming.clone()),
            ExecutorId::Builtin(Parallel) => Some(self.parallel.clone()),
            ExecutorId::Builtin(OpenCl) => self.device().map(|d| d.executor.clone()),
            ExecutorId::Builtin(ExecutorKind::Remote) => {
                self.remote.as_ref().map(|r| r.clone() as Arc<dyn Executor>)
            }
        }
    }

    /// The executor a manual compaction asked for: `None` for `auto` (the
    /// scheduler chooses), else its kind if this database has that
    /// executor; an error that says why not otherwise.
    pub(crate) fn for_manual_compaction(
        &self,
        choice: ExecutorChoice,
    ) -> Result<Option<ExecutorKind>> {
        let known = match choice {
            ExecutorChoice::Auto => return Ok(None),
            ExecutorChoice::Forced(kind) => kind,
        };
        if let Some(comparator) = self.custom_order.as_ref().filter(|_| known != Streaming) {
            return Err(Error::NotSupported(format!(
                "compact_range cannot run on {known}: it compares key bytes and builds \
                 Bloom filters, and this database uses {comparator}"
            )));
        }
        if known == OpenCl {
            // Named, the device is worth waiting for.
            self.device.get();
        }
        if self.by_id(known.into()).is_none() {
            let why = match known {
                OpenCl => match self.device_unavailable() {
                    Some(reason) => format!("this database has no OpenCL device: {reason}"),
                    None => "this database has no OpenCL device (open it with \
                             compaction_executor=opencl, or auto on a machine with a GPU)"
                        .to_string(),
                },
                _ => "this database has no remote workers (set remote_workers)".to_string(),
            };
            return Err(Error::NotSupported(format!(
                "compact_range cannot run on {known}: {why}"
            )));
        }
        Ok(Some(known))
    }

    /// Compaction threads added for the remote workers: one per worker
    /// under `auto` (each waits on its worker, not on a core); none when
    /// `remote` is named (every thread then serves the workers).
    pub(crate) fn remote_lanes(&self) -> usize {
        match (&self.remote, &self.choice) {
            (Some(remote), ExecutorChoice::Auto) => remote.workers(),
            _ => 0,
        }
    }

    /// Whether compaction thread `index` may serve the device's lane
    /// ([`Executors::lane_of_thread`]): the device is found, or `auto`'s
    /// probe still looks for it, and the thread is the one that serves it.
    pub(crate) fn may_serve_the_device(&self, index: usize) -> bool {
        let no_device = self.device_known() && self.device().is_none();
        !no_device && self.device_thread(index)
    }

    /// Whether thread `index` serves the device when there is one: thread
    /// 0, or every thread when `opencl` is named.
    fn device_thread(&self, index: usize) -> bool {
        index == 0 || self.choice == ExecutorChoice::Forced(OpenCl)
    }

    /// The lane of compaction thread `index`: with a device, thread 0
    /// serves it (every thread when `opencl` is named); the others the
    /// host. Every thread serves the remote workers when `remote` is named.
    pub(crate) fn lane_of_thread(&self, index: usize) -> Lane {
        match (self.device(), &self.choice) {
            (_, ExecutorChoice::Forced(ExecutorKind::Remote)) => Lane::Remote,
            (None, _) => Lane::Host,
            (Some(_), _) if self.device_thread(index) => Lane::Device,
            (Some(_), _) => Lane::Host,
        }
    }

    /// One line for the LOG at open.
    pub(crate) fn describe(&self) -> String {
        let device = match (self.device(), self.device_unavailable()) {
            (Some(d), _) => format!("opencl on {}", d.name),
            (None, Some(why)) => format!("no device ({why})"),
            (None, None) if !self.device_known() => "the OpenCL device probe runs".to_string(),
            (None, None) => "no device".to_string(),
        };
        let remote = match &self.remote {
            Some(remote) => format!(
                ", remote ({}) on {}",
                remote.mode(),
                remote
                    .worker_stats()
                    .iter()
                    .map(|w| w.endpoint.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        };
        let order = match &self.custom_order {
            Some(what) => format!("; {what}: streaming only"),
            None => String::new(),
        };
        let custom = match &self.custom {
            Some(custom) => format!(", custom {} first", custom.name()),
            None => String::new(),
        };
        // The choice as the LOG has always shown it: `Auto` or
        // `Forced("opencl")`.
        let choice = match self.choice {
            ExecutorChoice::Auto => "Auto".to_string(),
            ExecutorChoice::Forced(kind) => format!("Forced({:?})", kind.name()),
        };
        format!("executors: {choice}, streaming, parallel, {device}{remote}{custom}{order}")
    }
}
