//! Whether a job fits the device, and where its gc runs there: pure
//! functions of the job, the policy and the device limits (`docs/opencl.md`,
//! "Placement"). The engine's scheduler places a job on the device by
//! [`placement`]; the executor refuses a job that does not fit by the same
//! rule, [`device_fit`], and runs gc where [`gc_site`] says. The hierarchical strategy of
//! the GPU compaction paper: upper-level jobs entirely on the device
//! (Q-Compaction), lower-level jobs with gc on the host (C-Compaction); by
//! size, the paper sends jobs of more than 40 input files or larger than the
//! device memory to the CPU. Here jobs larger than the budget run in slices,
//! and only a job with more input files than `max_device_files` (by default
//! no limit) or too large for even one slice runs on the CPU.
//!
//! Unlike the paper's Q-Compaction, gc is never skipped: every executor
//! writes the same tables, so "on the device" means the device decides the
//! drops too.

use std::fmt;
use std::str::FromStr;

use crate::job::CompactionJob;
use crate::steps::plan::grandparents_in_order;

/// Which device to use. Indices count platforms in the order the OpenCL
/// loader lists them, and devices within a platform (as `clinfo -l` shows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DeviceSelector {
    /// Platform index; `None`: every platform, GPUs first.
    pub platform: Option<usize>,
    /// Device index within the platform; `None`: its first GPU, else its
    /// first device.
    pub device: Option<usize>,
}

/// Where gc (the keep/drop decision and the grandparent cut) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcSite {
    /// On the device (Q-Compaction).
    Device,
    /// On the host, between the device's merge and pack (C-Compaction).
    Host,
}

/// How jobs are split between the device and the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PlacementPolicy {
    /// The paper's hierarchical strategy: jobs into L1 and L2 (L0→L1,
    /// L1→L2) all on the device, deeper jobs with gc on the host.
    QCompaction,
    /// Every job: unpack, merge and pack on the device, gc on the host.
    CCompaction,
    /// Every job entirely on the device.
    #[default]
    AllDevice,
}

impl PlacementPolicy {
    /// The policy's name in options.
    pub fn name(self) -> &'static str {
        match self {
            PlacementPolicy::QCompaction => "q-compaction",
            PlacementPolicy::CCompaction => "c-compaction",
            PlacementPolicy::AllDevice => "all-device",
        }
    }
}

impl fmt::Display for PlacementPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlacementPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<PlacementPolicy, String> {
        match s {
            "q-compaction" => Ok(PlacementPolicy::QCompaction),
            "c-compaction" => Ok(PlacementPolicy::CCompaction),
            "all-device" => Ok(PlacementPolicy::AllDevice),
            other => Err(format!(
                "unknown OpenCL placement policy {other:?} (q-compaction, c-compaction or all-device)"
            )),
        }
    }
}

/// Default for [`DeviceLimits::max_device_files`]: no limit.
///
/// The GPU compaction paper sends jobs of more than 40 input files to the
/// CPU because its device holds a whole job. This executor runs a job in
/// slices whose device memory the budget bounds, whatever its file count,
/// and its pipeline pays off on large jobs: a limit of 40 sent a full
/// compaction's large rounds, and cross-level jobs, to the CPU.
pub const DEFAULT_MAX_DEVICE_FILES: usize = usize::MAX;

/// Deepest output level of a Q-Compaction job (L0→L1 and L1→L2).
pub const Q_COMPACTION_MAX_OUTPUT_LEVEL: usize = 2;

/// Device bytes a job needs per input byte (file bytes), as placement and
/// slicing estimate it: the blocks as stored and their decompressed
/// contents, keys, 24 bytes of tuple per entry, the merge and gc arrays, the
/// encoded output and the Bloom byte vector, and with Snappy the compressed
/// blocks' slots, the stored blocks and the compressor's hash tables.
/// The worst case (32-byte values that Snappy shrinks) is held under it by
/// the test `a_device_job_stays_within_its_device_memory_estimate`; what
/// that test measured each time the device took on more of the work is in
/// `docs/results/opencl-pocl.md`. Uncompressed input needs far less. The
/// device path counts the real allocations too and hands a job that
/// passes the budget to the CPU.
pub const DEVICE_BYTES_PER_INPUT_BYTE: u64 = 16;

/// The device's share of the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Jobs with more input files than this run on the CPU.
    pub max_device_files: usize,
    /// Device memory one job may use, in bytes.
    pub memory_budget: u64,
}

/// Where one job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// On the device, with gc at `gc`.
    Device {
        /// Where gc runs.
        gc: GcSite,
    },
    /// On the CPU (the `parallel` executor), and why.
    Cpu {
        /// Why not on the device.
        reason: String,
    },
}

/// Estimated device bytes for `job` in one slice.
pub fn estimated_device_bytes(job: &CompactionJob) -> u64 {
    job.input_bytes()
        .saturating_mul(DEVICE_BYTES_PER_INPUT_BYTE)
}

/// Input bytes per slice when the memory budget allows more: small enough
/// that reading slice k+1, the device on slice k and writing slice k-1
/// overlap within one job (one slice per job leaves nothing to overlap),
/// large enough that the output file carried from slice to slice (up to
/// one `max_output_file_size`, 2 MiB by default) is re-packed rarely.
pub const PIPELINE_SLICE_INPUT_BYTES: u64 = 32 << 20;

/// The smallest slice worth running: below it, per-slice overheads (the
/// open output file carried into every slice, launches) dominate.
pub const MIN_SLICE_INPUT_BYTES: u64 = 16 << 10;

/// Input bytes per slice for `job` under `budget`: `None` when the whole
/// job fits in one slice, else what is left of the budget after the open
/// output file every slice may carry (up to `max_output_file_size` plus a
/// block, uncompressed), at least [`MIN_SLICE_INPUT_BYTES`] or `Err` with
/// the bytes the carried file needs.
pub fn slice_input_bytes(job: &CompactionJob, budget: u64) -> Result<Option<u64>, u64> {
    if estimated_device_bytes(job) <= budget {
        return Ok(None);
    }
    let carried = job
        .max_output_file_size
        .saturating_add(job.table.block_size as u64);
    match (budget / DEVICE_BYTES_PER_INPUT_BYTE).checked_sub(carried) {
        Some(left) if left >= MIN_SLICE_INPUT_BYTES => Ok(Some(left)),
        _ => Err(carried
            .saturating_add(MIN_SLICE_INPUT_BYTES)
            .saturating_mul(DEVICE_BYTES_PER_INPUT_BYTE)),
    }
}

/// Decides where `job` runs: on the device when it fits ([`device_fit`]),
/// with gc where `policy` puts it ([`gc_site`]), else on the CPU.
pub fn placement(job: &CompactionJob, policy: PlacementPolicy, limits: &DeviceLimits) -> Placement {
    match device_fit(job, limits) {
        Ok(_) => Placement::Device {
            gc: gc_site(job, policy),
        },
        Err(reason) => Placement::Cpu { reason },
    }
}

/// Whether `job` fits the device under `limits`: `Ok` with the input bytes
/// per slice it runs in (`None`: the whole job in one slice), or `Err`
/// saying why not (more input files than `max_device_files`, or a budget
/// too small for one slice).
pub fn device_fit(job: &CompactionJob, limits: &DeviceLimits) -> Result<Option<u64>, String> {
    let files = job.input_files();
    if files > limits.max_device_files {
        return Err(format!(
            "{files} input files, more than max_device_files ({})",
            limits.max_device_files
        ));
    }
    // Larger jobs run in key-range slices; only a budget too small for one
    // slice sends a job to the CPU.
    slice_input_bytes(job, limits.memory_budget).map_err(|needed| {
        format!(
            "a slice needs about {needed} bytes of device memory, more than the budget ({})",
            limits.memory_budget
        )
    })
}

/// Where gc runs for `job` on the device under `policy`.
pub fn gc_site(job: &CompactionJob, policy: PlacementPolicy) -> GcSite {
    let gc = match policy {
        PlacementPolicy::AllDevice => GcSite::Device,
        PlacementPolicy::CCompaction => GcSite::Host,
        PlacementPolicy::QCompaction if job.output_level <= Q_COMPACTION_MAX_OUTPUT_LEVEL => {
            GcSite::Device
        }
        PlacementPolicy::QCompaction => GcSite::Host,
    };
    // The device finds grandparent cuts by binary search, which needs the
    // grandparents in key order (a level's files always are); the host's
    // cutter does not.
    if gc == GcSite::Device && !grandparents_in_order(job) {
        GcSite::Host
    } else {
        gc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{file, level0};

    fn job(output_level: usize, files: usize, file_size: u64) -> CompactionJob {
        let inputs = level0((0..files).map(|i| file(i as u64, file_size, b"a", b"z")));
        CompactionJob {
            output_level,
            ..crate::testing::job(inputs)
        }
    }

    const LIMITS: DeviceLimits = DeviceLimits {
        max_device_files: DEFAULT_MAX_DEVICE_FILES,
        memory_budget: 1 << 30,
    };

    #[test]
    fn q_compaction_keeps_upper_levels_whole_on_the_device() {
        for (level, gc) in [
            (1, GcSite::Device),
            (2, GcSite::Device),
            (3, GcSite::Host),
            (6, GcSite::Host),
        ] {
            assert_eq!(
                placement(&job(level, 4, 1000), PlacementPolicy::QCompaction, &LIMITS),
                Placement::Device { gc }
            );
        }
        assert_eq!(
            placement(&job(5, 4, 1000), PlacementPolicy::AllDevice, &LIMITS),
            Placement::Device { gc: GcSite::Device }
        );
        assert_eq!(
            placement(&job(1, 4, 1000), PlacementPolicy::CCompaction, &LIMITS),
            Placement::Device { gc: GcSite::Host }
        );
    }

    #[test]
    fn too_many_files_or_bytes_go_to_the_cpu() {
        // No file limit by default.
        assert!(matches!(
            placement(&job(1, 1000, 1000), PlacementPolicy::AllDevice, &LIMITS),
            Placement::Device { .. }
        ));
        let forty = DeviceLimits {
            max_device_files: 40,
            ..LIMITS
        };
        assert!(matches!(
            placement(&job(1, 40, 1000), PlacementPolicy::AllDevice, &forty),
            Placement::Device { .. }
        ));
        let Placement::Cpu { reason } =
            placement(&job(1, 41, 1000), PlacementPolicy::AllDevice, &forty)
        else {
            panic!("41 files placed on the device");
        };
        assert!(reason.contains("41 input files"), "{reason}");
        // A job over the budget runs in slices...
        assert!(matches!(
            placement(&job(1, 2, 200 << 20), PlacementPolicy::AllDevice, &LIMITS),
            Placement::Device { .. }
        ));
        // ... unless the budget cannot hold one: the open output file
        // (2 MiB) carried between slices plus the smallest slice.
        let small = DeviceLimits {
            memory_budget: 8 << 20,
            ..LIMITS
        };
        let Placement::Cpu { reason } =
            placement(&job(1, 2, 200 << 20), PlacementPolicy::AllDevice, &small)
        else {
            panic!("a job no slice of which fits placed on the device");
        };
        assert!(reason.contains("budget"), "{reason}");
        // A job that fits whole needs no slice.
        assert!(matches!(
            placement(&job(1, 2, 256 << 10), PlacementPolicy::AllDevice, &small),
            Placement::Device { .. }
        ));
    }

    #[test]
    fn slices_leave_room_for_the_carried_file() {
        let j = job(1, 4, 100 << 20);
        assert_eq!(slice_input_bytes(&j, 8 << 30), Ok(None));
        let budget = 64 << 20;
        let carried = (2 << 20) + 4096;
        assert_eq!(
            slice_input_bytes(&j, budget),
            Ok(Some(budget / DEVICE_BYTES_PER_INPUT_BYTE - carried))
        );
        assert!(slice_input_bytes(&j, 4 * carried).is_err());
    }

    #[test]
    fn unordered_grandparents_move_gc_to_the_host() {
        let mut j = job(1, 2, 1000);
        j.grandparents = vec![file(1, 10, b"m", b"n"), file(2, 10, b"a", b"b")];
        assert_eq!(
            placement(&j, PlacementPolicy::AllDevice, &LIMITS),
            Placement::Device { gc: GcSite::Host }
        );
    }

    #[test]
    fn policy_names_round_trip() {
        for policy in [
            PlacementPolicy::QCompaction,
            PlacementPolicy::CCompaction,
            PlacementPolicy::AllDevice,
        ] {
            assert_eq!(policy.name().parse::<PlacementPolicy>(), Ok(policy));
        }
        assert!("gpu".parse::<PlacementPolicy>().is_err());
    }
}
