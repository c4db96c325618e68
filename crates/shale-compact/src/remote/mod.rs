//! Compaction on another process: the `remote` executor's side of it, and
//! the protocol it speaks with `shale worker` over gRPC
//! (`proto/worker.proto`, compiled at build time). The worker's side (its
//! service, serving, staging, tokens, metrics, the drain) is the
//! `shale-worker` crate.
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
//! - [`client`]: the [`RemoteExecutor`], which falls back by failing.
//! - `adoption.rs`: what it needs of the engine beside `JobIo`
//!   ([`RemoteJobIo`]: the database directory, adopting staged tables).
//! - [`verify`]: the engine's check of a staged table and of a worker.
//! - [`keys`]: the key side of keys-only mode, and the order codes both
//!   sides share.
//! - [`convert`]: the job to and from its protobuf form, checked field by
//!   field.
//! - [`paths`]: staging and session names.
//! - [`fs`]: file access confined by descriptor (the worker beneath its
//!   root, the engine in a staging directory).

use std::fmt;
use std::str::FromStr;

mod adoption;
#[cfg(feature = "remote")]
pub mod client;
#[cfg(feature = "remote")]
pub mod convert;
#[cfg(feature = "remote")]
pub mod fs;
#[cfg(feature = "remote")]
pub mod keys;
pub mod paths;
#[cfg(feature = "remote")]
pub mod verify;

/// The generated protocol: the messages and the client (the worker crate
/// generates the server half over these messages).
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

pub use adoption::{RemoteJobIo, VerifiedTable};
#[cfg(feature = "remote")]
pub use client::{RemoteExecutor, RemoteOptions, WorkerStats};

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
