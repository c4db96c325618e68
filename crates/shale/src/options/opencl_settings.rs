//! The `opencl` executor's settings, one field of [`Options`]
//! ([`Options::opencl`]).

use shale_compact::opencl::{DeviceSelector, PlacementPolicy};

#[cfg(doc)]
use super::Options;

/// The `opencl` executor's settings: which device, how jobs are split
/// between it and the host, and how much of it one job may use. Read
/// only when the database has the executor (`compaction_executor=opencl`,
/// or `auto` on a machine with a GPU).
///
/// Python's keyword arguments and the command line's flags that set a
/// field keep a flat name: `opencl_` and the field's name
/// (`opencl_memory_budget`, `opencl_placement`, ...; the selector's two
/// halves are `--opencl_platform` and `--opencl_device`, and `slice_bytes`
/// is `--opencl_slice_size` on the command line).
///
/// ```
/// use shale::shale_compact::opencl::PlacementPolicy;
/// use shale::{ExecutorChoice, OpenClSettings, Options};
/// let options = Options {
///     compaction_executor: ExecutorChoice::Auto,
///     opencl: OpenClSettings {
///         // gc on the host, unpack, merge and pack on the device.
///         placement: PlacementPolicy::CCompaction,
///         // At most 1 GiB of device memory per job; larger jobs run in
///         // slices of it.
///         memory_budget: Some(1 << 30),
///         ..OpenClSettings::default()
///     },
///     ..Options::default()
/// };
/// assert!(options.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenClSettings {
    /// Jobs with more input files than this run on the CPU (`parallel`),
    /// reported as a fallback. Default: no limit (the executor slices a
    /// large job; the GPU compaction paper's limit is 40).
    pub max_device_files: usize,
    /// Most sub-compactions a job placed on the device is cut into
    /// (default 1: the device takes it whole, and its own pipeline
    /// overlaps reading, device and writing slice by slice).
    pub subcompactions: usize,
    /// Most input bytes per slice of a device job (0, the default: 32 MiB,
    /// or less where the device memory budget says).
    pub slice_bytes: u64,
    /// How jobs are split between device and host (`all-device`, the
    /// default; `c-compaction`: gc on the host; `q-compaction`: jobs into
    /// L1 and L2 all on the device, deeper jobs with gc on the host).
    pub placement: PlacementPolicy,
    /// Which device, by platform and device index in the order `clinfo -l`
    /// lists them. Left unset: a GPU on any platform when there is one,
    /// else the first device.
    pub device: DeviceSelector,
    /// Device memory one job may use, in bytes (`None`: half the device's
    /// global memory). Larger jobs run on the CPU.
    pub memory_budget: Option<u64>,
}

impl Default for OpenClSettings {
    fn default() -> OpenClSettings {
        OpenClSettings {
            max_device_files: shale_compact::opencl::DEFAULT_MAX_DEVICE_FILES,
            subcompactions: 1,
            slice_bytes: 0,
            placement: PlacementPolicy::default(),
            device: DeviceSelector::default(),
            memory_budget: None,
        }
    }
}
