//! The compaction worker, `shale worker`: the server side of remote
//! compaction. The engine's side (the `remote` executor, its checks) and
//! the protocol they share (`crates/shale-compact/proto/worker.proto`, the
//! job's protobuf form, the staging paths) are `shale_compact::remote`.
//!
//! - [`rpc`]: the worker's RPC surface (the service, a job's run).
//! - [`serve`](mod@serve): serving it until shutdown (TLS, tokens, health, the
//!   reaper, metrics).
//! - [`drain`]: the graceful end (SIGTERM): no new jobs, the running ones
//!   finish, at most the drain timeout.
//! - `admission`: what a request must pass before its job runs.
//! - [`staging`]: the staged sessions, their owners, deadlines and quotas.
//! - [`root`]: the root every file is reached beneath.
//! - [`auth`]: tokens and the databases each may compact.
//! - [`metrics`]: what an operator scrapes.
//! - [`data_side`]: the data side of a keys-only job.

mod admission;
pub mod auth;
pub mod data_side;
pub mod drain;
pub mod metrics;
pub mod proto;
pub mod root;
pub mod rpc;
pub mod serve;
pub mod staging;
mod state;

pub use auth::{parse_token_file, ScopedToken};
pub use drain::StopRequest;
pub use rpc::Worker;
pub use serve::{serve, LocalWorker, TlsIdentity};
pub use staging::StagingLimits;
pub use state::{Logger, WorkerConfig};
