//! What the OpenCL executor counts of its own work, in its own terms: the
//! device time and volume of each kernel and transfer kind
//! ([`KernelTime`]), and what the device path cost the host
//! ([`DeviceCounters`]), counted where it happens (`session.rs`, `pack.rs`,
//! the executor's stages). A job hands them to the engine as the
//! executor-neutral [`CostReport`]; [`OpenClStats`](super::OpenClStats)
//! keeps them over every job.

use crate::job::{CostReport, DeviceCosts, WorkTally};

/// What the device path cost the host: kernels launched, copies each way
/// (and how much of them went through pinned memory), blocking waits,
/// device allocations, host-side copies, the executor's threads' CPU time
/// and the pinned memory it mapped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Kernels enqueued.
    pub kernel_launches: u64,
    /// Copies between host and device memory (either way).
    pub transfers: u64,
    /// Bytes copied to the device.
    pub bytes_uploaded: u64,
    /// Bytes copied back from the device.
    pub bytes_downloaded: u64,
    /// Of `bytes_uploaded`, those read from pinned host memory.
    pub bytes_uploaded_pinned: u64,
    /// Of `bytes_downloaded`, those written into pinned host memory.
    pub bytes_downloaded_pinned: u64,
    /// Times the host blocked until the device finished something.
    pub host_waits: u64,
    /// Device buffers allocated (not taken from the kept ones).
    pub device_allocations: u64,
    /// Bytes the host copied between its own buffers for the device path.
    pub host_bytes_copied: u64,
    /// CPU time, in nanoseconds, of the executor's own threads (reading,
    /// driving the device, writing, the host pool); not the OpenCL
    /// runtime's.
    pub host_thread_cpu_nanos: u64,
    /// Pinned host memory mapped for transfers (kept for later jobs).
    pub pinned_bytes_mapped: u64,
}

impl DeviceCounters {
    /// Adds `other` into `self`.
    pub fn accumulate(&mut self, other: &DeviceCounters) {
        self.kernel_launches += other.kernel_launches;
        self.transfers += other.transfers;
        self.bytes_uploaded += other.bytes_uploaded;
        self.bytes_downloaded += other.bytes_downloaded;
        self.bytes_uploaded_pinned += other.bytes_uploaded_pinned;
        self.bytes_downloaded_pinned += other.bytes_downloaded_pinned;
        self.host_waits += other.host_waits;
        self.device_allocations += other.device_allocations;
        self.host_bytes_copied += other.host_bytes_copied;
        self.host_thread_cpu_nanos += other.host_thread_cpu_nanos;
        self.pinned_bytes_mapped += other.pinned_bytes_mapped;
    }

    /// The counters as the neutral report's device costs.
    pub fn costs(&self) -> DeviceCosts {
        DeviceCosts {
            kernel_launches: self.kernel_launches,
            transfers: self.transfers,
            bytes_uploaded: self.bytes_uploaded,
            bytes_downloaded: self.bytes_downloaded,
            bytes_uploaded_pinned: self.bytes_uploaded_pinned,
            bytes_downloaded_pinned: self.bytes_downloaded_pinned,
            host_waits: self.host_waits,
            device_allocations: self.device_allocations,
            host_bytes_copied: self.host_bytes_copied,
            host_thread_cpu_nanos: self.host_thread_cpu_nanos,
            pinned_bytes_mapped: self.pinned_bytes_mapped,
        }
    }

    /// The counters in one line, as the engine prints a device job's costs
    /// ([`DeviceCosts::summary`]).
    pub fn summary(&self) -> String {
        self.costs().summary()
    }
}

/// Device time and volume of one kernel or transfer kind, summed over its
/// launches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelTime {
    /// Launches (or transfers).
    pub launches: u64,
    /// Work items (for transfers: 0).
    pub items: u64,
    /// Bytes the launches processed (their main input) or moved.
    pub bytes: u64,
    /// Device seconds from the profiling events (for transfers too, where
    /// the device reports them; else wall time).
    pub seconds: f64,
}

impl KernelTime {
    /// Adds `other` into `self`.
    pub fn accumulate(&mut self, other: &KernelTime) {
        self.launches += other.launches;
        self.items += other.items;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
    }

    /// Bytes per second, when there is a time to divide by.
    pub fn bytes_per_second(&self) -> Option<f64> {
        self.tally().bytes_per_second()
    }

    /// The kernel's time as the neutral report's tally.
    pub fn tally(&self) -> WorkTally {
        WorkTally {
            count: self.launches,
            items: self.items,
            bytes: self.bytes,
            seconds: self.seconds,
        }
    }
}

/// Adds one slice's kernel times and counters into a job's report.
pub(super) fn report_into<'a>(
    report: &mut CostReport,
    times: impl IntoIterator<Item = (&'a str, &'a KernelTime)>,
    counters: &DeviceCounters,
) {
    for (name, time) in times {
        report
            .work
            .entry(name.to_string())
            .or_default()
            .accumulate(&time.tally());
    }
    report
        .device
        .get_or_insert_default()
        .accumulate(&counters.costs());
}
