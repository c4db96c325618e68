//! The error of the device path of one job: what every part of the
//! executor that talks to the device returns (`device.rs`,
//! `program_cache.rs`, the sessions, the kernels' steps), and what makes a
//! job run on the CPU instead.

use std::fmt;

/// A failure of the device path of one job (a build error, an allocation
/// over the limits, a kernel that reported bad input, an OpenCL error). The
/// job then runs on the CPU; `reason` is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceError {
    /// What went wrong, naming the step.
    pub reason: String,
}

impl DeviceError {
    /// An error for `step`.
    pub fn new(reason: impl Into<String>) -> DeviceError {
        DeviceError {
            reason: reason.into(),
        }
    }

    /// An OpenCL error code returned by `step`.
    pub fn cl(step: &str, error: opencl3::error_codes::ClError) -> DeviceError {
        DeviceError::new(format!("{step}: {error} ({})", error.0))
    }
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for DeviceError {}
