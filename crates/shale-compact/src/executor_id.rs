//! Which executor: [`ExecutorKind`], the four built into ShaleDB, and
//! [`ExecutorId`], a built-in kind or an executor of the caller's by its
//! own name. Options, the LOG, `shale.executors` and the statistics name
//! an executor by [`ExecutorId::name`]; the code compares the types.

use std::fmt;
use std::str::FromStr;

/// One of ShaleDB's executors.
///
/// ```
/// use shale_compact::ExecutorKind;
/// assert_eq!(ExecutorKind::OpenCl.name(), "opencl");
/// assert_eq!("parallel".parse::<ExecutorKind>(), Ok(ExecutorKind::Parallel));
/// assert!("auto".parse::<ExecutorKind>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutorKind {
    /// The reference: one merge stream, the tables every other executor
    /// must match byte for byte (`streaming.rs`).
    Streaming,
    /// Data-parallel phases on CPU threads (`parallel/`).
    Parallel,
    /// The data-parallel phases as OpenCL kernels on a device (`opencl/`).
    OpenCl,
    /// A compaction worker (`shale worker`) over gRPC (`remote/`).
    Remote,
}

impl ExecutorKind {
    /// Every built-in executor, in the order ShaleDB lists them.
    pub const ALL: [ExecutorKind; 4] = [
        ExecutorKind::Parallel,
        ExecutorKind::Streaming,
        ExecutorKind::OpenCl,
        ExecutorKind::Remote,
    ];

    /// The executor's name in options, the LOG and the statistics.
    pub const fn name(self) -> &'static str {
        match self {
            ExecutorKind::Streaming => "streaming",
            ExecutorKind::Parallel => "parallel",
            ExecutorKind::OpenCl => "opencl",
            ExecutorKind::Remote => "remote",
        }
    }
}

impl fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExecutorKind {
    type Err = String;

    fn from_str(s: &str) -> Result<ExecutorKind, String> {
        ExecutorKind::ALL
            .into_iter()
            .find(|kind| kind.name() == s)
            .ok_or_else(|| {
                format!("unknown executor {s:?} (parallel, streaming, opencl or remote)")
            })
    }
}

/// An executor a job may run on: a built-in kind, or an executor of the
/// caller's (`Options::custom_executor` in the engine), by the name its
/// [`Executor::name`](crate::job::Executor::name) gives.
///
/// ```
/// use shale_compact::{ExecutorId, ExecutorKind};
/// let chain = [ExecutorId::Custom("my-service"), ExecutorKind::Streaming.into()];
/// assert_eq!(chain[1], ExecutorKind::Streaming);
/// assert_eq!(chain.map(ExecutorId::name), ["my-service", "streaming"]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutorId {
    /// One of ShaleDB's executors.
    Builtin(ExecutorKind),
    /// An executor of the caller's, by its name (which differs from every
    /// built-in one's: the engine refuses one that does not).
    Custom(&'static str),
}

impl ExecutorId {
    /// The executor's name in the LOG and the statistics.
    pub fn name(self) -> &'static str {
        match self {
            ExecutorId::Builtin(kind) => kind.name(),
            ExecutorId::Custom(name) => name,
        }
    }

    /// The built-in kind; `None` for an executor of the caller's.
    pub fn kind(self) -> Option<ExecutorKind> {
        match self {
            ExecutorId::Builtin(kind) => Some(kind),
            ExecutorId::Custom(_) => None,
        }
    }
}

impl From<ExecutorKind> for ExecutorId {
    fn from(kind: ExecutorKind) -> ExecutorId {
        ExecutorId::Builtin(kind)
    }
}

impl PartialEq<ExecutorKind> for ExecutorId {
    fn eq(&self, kind: &ExecutorKind) -> bool {
        self.kind() == Some(*kind)
    }
}

impl fmt::Display for ExecutorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in ExecutorKind::ALL {
            assert_eq!(kind.name().parse::<ExecutorKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
            assert_eq!(ExecutorId::from(kind).name(), kind.name());
        }
        let unknown = "warp".parse::<ExecutorKind>().unwrap_err();
        assert!(unknown.contains("\"warp\""), "{unknown}");
    }

    #[test]
    fn a_custom_executor_is_no_built_in_kind() {
        let custom = ExecutorId::Custom("opencl-service");
        assert_eq!(custom.kind(), None);
        assert_ne!(custom, ExecutorKind::OpenCl);
        assert_eq!(custom.to_string(), "opencl-service");
        assert_eq!(ExecutorId::from(ExecutorKind::OpenCl), ExecutorKind::OpenCl);
    }
}
