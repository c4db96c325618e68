//! The protocol as the worker speaks it: the messages of
//! `shale_compact::remote::proto` and the server half, generated here over
//! them (`build.rs`).

pub use shale_compact::remote::proto::*;

/// The generated server.
#[allow(
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    reason = "generated"
)]
mod generated {
    tonic::include_proto!("shale.worker.v1");
}

pub use generated::compaction_worker_server;
