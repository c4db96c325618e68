//! What every part of a running worker shares, and nothing else: its
//! configuration, its state (the root, the job slots, staging, metrics,
//! whether it takes new calls), and how a job's error becomes a gRPC
//! status. The RPC surface ([`crate::rpc`]), admission
//! ([`crate::admission`]), the keys-only data side and the drain all read
//! it; it imports none of them.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shale_compact::job::Executor;
use shale_format::Error;
use tokio::sync::Semaphore;
use tonic::Status;

use crate::auth::{ScopedToken, TokenSet};
use crate::metrics::Metrics;
use crate::root::Root;
use crate::staging::{Staging, StagingLimits};

/// Where a worker's LOG lines go.
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// How a worker runs.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The only directory tree the worker touches.
    pub root: PathBuf,
    /// A token every call may carry for any database under the root
    /// (`authorization: Bearer <token>`).
    pub token: Option<String>,
    /// Tokens scoped to database paths ([`crate::auth`]). With neither
    /// `token` nor scoped tokens the worker authenticates nobody (loopback
    /// use only).
    pub scoped_tokens: Vec<ScopedToken>,
    /// The executor jobs run with.
    pub executor: Arc<dyn Executor>,
    /// Jobs run at once; more are refused.
    pub max_jobs: usize,
    /// The largest job taken, in input-table bytes (from `fstat`).
    pub max_job_bytes: u64,
    /// The largest message accepted or sent.
    pub max_message_bytes: usize,
    /// How often a running job reports progress.
    pub progress_interval: Duration,
    /// The longest a job may run, from its request to its last message.
    pub job_timeout: Duration,
    /// The longest a keys-only stream may stay silent while the worker
    /// waits for it (its first message, credit, the order), or leave a key
    /// chunk unread.
    pub stream_idle_timeout: Duration,
    /// What staging may hold and for how long.
    pub staging: StagingLimits,
    /// How long a draining worker (SIGTERM) waits for its running jobs to
    /// end and their outputs to be adopted before it cancels what is left.
    pub drain_timeout: Duration,
    /// Where the worker's LOG lines go.
    pub log: Logger,
}

impl fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerConfig")
            .field("root", &self.root)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("scoped_tokens", &self.scoped_tokens)
            .field("executor", &self.executor.name())
            .field("max_jobs", &self.max_jobs)
            .field("max_job_bytes", &self.max_job_bytes)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("progress_interval", &self.progress_interval)
            .field("job_timeout", &self.job_timeout)
            .field("stream_idle_timeout", &self.stream_idle_timeout)
            .field("staging", &self.staging)
            .field("drain_timeout", &self.drain_timeout)
            .finish()
    }
}

impl WorkerConfig {
    /// A worker on `root` running jobs with `executor`, with the defaults:
    /// no token, as many jobs at once as cores, jobs up to 4 GiB, messages
    /// up to 64 MiB, progress every second, jobs up to an hour, keys-only
    /// streams silent up to 60 s, staging as [`StagingLimits::default`], a
    /// drain of up to 30 s, no LOG.
    pub fn new(root: impl Into<PathBuf>, executor: Arc<dyn Executor>) -> WorkerConfig {
        WorkerConfig {
            root: root.into(),
            token: None,
            scoped_tokens: Vec::new(),
            executor,
            max_jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            max_job_bytes: 4 << 30,
            max_message_bytes: 64 << 20,
            progress_interval: Duration::from_secs(1),
            job_timeout: Duration::from_secs(3600),
            stream_idle_timeout: Duration::from_secs(60),
            staging: StagingLimits::default(),
            drain_timeout: Duration::from_secs(30),
            log: Arc::new(|_| {}),
        }
    }

    /// Every token the worker accepts at start, with its scope.
    pub(crate) fn tokens(&self) -> Vec<ScopedToken> {
        let mut tokens = self.scoped_tokens.clone();
        if let Some(token) = &self.token {
            tokens.push(ScopedToken {
                token: token.clone(),
                patterns: Vec::new(),
            });
        }
        tokens
    }
}

/// A running worker's state, shared by every call.
pub(crate) struct WorkerInner {
    pub(crate) config: WorkerConfig,
    pub(crate) root: Root,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) staging: Arc<Staging>,
    pub(crate) metrics: Arc<Metrics>,
    /// The tokens calls are checked against: the config's at start,
    /// replaced by [`crate::rpc::Worker::replace_tokens`].
    pub(crate) tokens: TokenSet,
    /// Closed when the worker begins to stop: new calls are refused.
    pub(crate) intake: Intake,
}

impl WorkerInner {
    /// Jobs running now: each holds one of the worker's slots until its
    /// call ends.
    pub(crate) fn running_jobs(&self) -> usize {
        self.config
            .max_jobs
            .max(1)
            .saturating_sub(self.slots.available_permits())
    }
}

/// Whether the worker takes new calls: open from the start, closed for
/// good when it begins to stop.
#[derive(Debug, Default)]
pub(crate) struct Intake {
    closed: AtomicBool,
}

impl Intake {
    /// Whether new calls are taken (not yet stopping).
    pub(crate) fn is_open(&self) -> bool {
        !self.closed.load(Ordering::SeqCst)
    }

    /// From now on every new call is refused.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// `UNAVAILABLE` once the intake is closed: the engine runs the job
    /// elsewhere (another worker, or locally), as for a worker that is down.
    pub(crate) fn check(&self) -> Result<(), Status> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Status::unavailable(
                "the worker is shutting down: it finishes the jobs it runs and takes no new ones; run this one elsewhere",
            ));
        }
        Ok(())
    }
}

/// `Status` for an error a job returned.
pub(crate) fn status_of(err: &Error) -> Status {
    match err {
        Error::Corruption { .. } => Status::data_loss(err.to_string()),
        Error::NotFound(_) => Status::not_found(err.to_string()),
        Error::InvalidArgument(_) => Status::invalid_argument(err.to_string()),
        _ => Status::internal(err.to_string()),
    }
}
