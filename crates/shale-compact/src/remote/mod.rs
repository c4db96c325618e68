//! Compaction on another process: the `remote` executor and `shale
//! worker`, over gRPC (`proto/worker.proto`, compiled at build time).
//!
//! The worker stands beside the storage, where ProckStore's near-data
//! device stands. In near-data mode (the default) only the job and the
//! outputs' metadata cross the wire: the worker reads the input tables from
//! the storage it shares with the engine and stages the outputs in the
//! database directory; the engine checks and adopts them. In keys-only mode
//! (ProckStore 3.5) the worker sends only keys, as far as the engine's
//! credit reaches; the engine merges them as they come and decides what is
//! dropped; the worker packs the values in that order as it arrives
//! ([`keys`]), each side holding a window of keys per run. Either way the
//! tables are byte-identical to `streaming`'s.
//!
//! - [`server`]: the worker's RPC surface (the service, a job's run).
//! - [`serve`](mod@serve): serving it until shutdown (TLS, tokens, health, the
//!   reaper, metrics).
//! - [`drain`]: the graceful end (SIGTERM): no new jobs, the running ones
//!   finish, at most the drain timeout.
//! - `admission`: what a request must pass before its job runs.
//! - [`staging`]: the staged sessions, their owners, deadlines and quotas.
//! - [`fs`]: file access confined by descriptor beneath the root.
//! - [`auth`]: tokens and the databases each may compact.
//! - [`metrics`]: what an operator scrapes.
//! - [`client`]: the [`RemoteExecutor`], which falls back by failing.
//! - [`paths`]: staging and session names.
//! - [`verify`]: the engine's check of a staged table and of a worker.
//! - [`convert`]: the job to and from its protobuf form, checked field by
//!   field.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

#[cfg(feature = "remote")]
mod admission;
#[cfg(feature = "remote")]
pub mod auth;
#[cfg(feature = "remote")]
pub mod client;
#[cfg(feature = "remote")]
pub mod convert;
#[cfg(feature = "remote")]
pub mod drain;
#[cfg(feature = "remote")]
pub mod fs;
#[cfg(feature = "remote")]
pub mod keys;
#[cfg(feature = "remote")]
pub mod metrics;
pub mod paths;
#[cfg(feature = "remote")]
pub mod serve;
#[cfg(feature = "remote")]
pub mod server;
#[cfg(feature = "remote")]
pub mod staging;
#[cfg(feature = "remote")]
mod state;
#[cfg(feature = "remote")]
pub mod verify;

/// The generated protocol: messages, client and server.
#[cfg(feature = "remote")]
#[allow(
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    reason = "generated"
)]
pub mod proto {
    tonic::include_proto!("shale.worker.v1");
}

#[cfg(feature = "remote")]
pub use auth::{parse_token_file, ScopedToken};
#[cfg(feature = "remote")]
pub use client::{RemoteExecutor, RemoteOptions, WorkerStats};
#[cfg(feature = "remote")]
pub use drain::StopRequest;
#[cfg(feature = "remote")]
pub use serve::{serve, LocalWorker, TlsIdentity};
#[cfg(feature = "remote")]
pub use server::Worker;
#[cfg(feature = "remote")]
pub use staging::StagingLimits;
#[cfg(feature = "remote")]
pub use state::WorkerConfig;

/// Name of the remote executor.
pub const REMOTE: &str = "remote";

/// The version of the worker protocol (`HelloReply.protocol`): an engine
/// sends jobs only to a worker that speaks the same one.
pub const PROTOCOL: u32 = 3;

/// The metadata key carrying `Bearer <token>`.
pub const AUTHORIZATION: &str = "authorization";

/// The engine's keys-only window when none is set: keys of one run it
/// holds or has asked for and not yet received. With keys of a hundred
/// bytes, 4096 keys are 400 KiB per run; a round trip per half window keeps
/// a loopback or LAN link busy.
pub const DEFAULT_KEYS_WINDOW: u64 = 4096;

/// Where a worker's LOG lines go.
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// What crosses the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RemoteMode {
    /// The worker runs the whole job beside the data; only the job and the
    /// outputs' metadata travel.
    #[default]
    NearData,
    /// The worker sends keys; the engine merges them and sends the order
    /// back; the worker packs the values (ProckStore 3.5).
    KeysOnly,
}

impl RemoteMode {
    /// Names `remote_mode` accepts.
    pub const NAMES: &'static [&'static str] = &["near-data", "keys-only"];
}

impl fmt::Display for RemoteMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RemoteMode::NearData => "near-data",
            RemoteMode::KeysOnly => "keys-only",
        })
    }
}

impl FromStr for RemoteMode {
    type Err = String;
    fn from_str(s: &str) -> Result<RemoteMode, String> {
        match s {
            "near-data" => Ok(RemoteMode::NearData),
            "keys-only" => Ok(RemoteMode::KeysOnly),
            other => Err(format!(
                "unknown remote mode {other:?} (available: {})",
                RemoteMode::NAMES.join(", ")
            )),
        }
    }
}
