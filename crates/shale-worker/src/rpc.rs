//! The worker's RPC surface: the `CompactionWorker` service and how a job
//! runs through it. What a request must pass before its job runs is
//! `crate::admission`; where a job writes and how long its outputs may
//! stay is [`crate::staging`]; every file is reached through [`crate::root`];
//! serving it until shutdown is [`crate::serve()`].
//!
//! Every job has a deadline (`job_timeout`); a keys-only stream silent for
//! `stream_idle_timeout` is cancelled; a client that goes away cancels its
//! job at once (its next write fails) and its staged files are removed.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_compact::job::CompactionOutput;
use shale_compact::remote::keys::KEYS_ONLY;
use shale_compact::remote::PROTOCOL;
use shale_format::Result;
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::admission::{admit, Admitted};
use crate::auth::{Scope, ScopedToken, TokenSet};
use crate::data_side::{self, Conversation};
use crate::metrics::Metrics;
use crate::proto::compaction_worker_server::CompactionWorker;
use crate::proto::{
    compact_event, keys_only_event, keys_only_request, CompactEvent, CompactRequest, Done,
    HelloReply, HelloRequest, JobStats, KeyChunk, KeysOnlyEvent, KeysOnlyRequest, Progress,
    StagedTable,
};
use crate::root::Root;
use crate::staging::{SessionIo, Staging};
use crate::state::{status_of, Intake, WorkerConfig, WorkerInner};

/// Events a call's stream buffers before the job waits for the client to
/// read them: what bounds the key chunks a keys-only job has on its way
/// out to a few.
const EVENTS_BUFFERED: usize = 4;

/// The compaction worker service.
#[derive(Clone)]
pub struct Worker {
    pub(crate) inner: Arc<WorkerInner>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.config.fmt(f)
    }
}

/// The outcome label of a failed job, for the metrics.
fn outcome_of(status: &Status) -> &'static str {
    match status.code() {
        tonic::Code::Cancelled => "cancelled",
        tonic::Code::DeadlineExceeded => "timeout",
        tonic::Code::InvalidArgument => "invalid",
        _ => "failed",
    }
}

impl Worker {
    /// A worker with `config`; the root must exist. Staging an earlier run
    /// left under the root past the adoption timeout is removed here.
    pub fn new(config: WorkerConfig) -> std::io::Result<Worker> {
        let root = Root::open(&config.root)?;
        let slots = Arc::new(Semaphore::new(config.max_jobs.max(1)));
        let staging = Arc::new(Staging::new(config.staging));
        let metrics = Arc::new(Metrics::new());
        let swept = staging.sweep(root.dir());
        if swept > 0 {
            (config.log)(&format!(
                "Removed {swept} staged sessions an earlier run left under {}",
                root.path().display()
            ));
            metrics.staging_removed("sweep", swept as u64);
        }
        let tokens = TokenSet::new(config.tokens());
        Ok(Worker {
            inner: Arc::new(WorkerInner {
                tokens,
                config,
                root,
                slots,
                staging,
                metrics,
                intake: Intake::default(),
            }),
        })
    }

    /// The worker's metrics, as a scrape sees them.
    pub fn metrics_text(&self) -> String {
        self.inner.metrics.render(&self.inner.staging)
    }

    /// Replaces the scoped tokens while the worker serves (the config's
    /// single `token`, if any, stays): calls that arrive from now on are
    /// checked against the new list, and the ones running keep their
    /// scope. Refuses, keeping the tokens as they are, to leave a worker
    /// that checks tokens without any (which would let every call in).
    /// Returns how many tokens the worker now accepts.
    pub fn replace_tokens(&self, scoped: Vec<ScopedToken>) -> std::result::Result<usize, String> {
        let mut tokens = scoped;
        if let Some(token) = &self.inner.config.token {
            tokens.push(ScopedToken {
                token: token.clone(),
                patterns: Vec::new(),
            });
        }
        if tokens.is_empty() {
            return Err("no token: a worker cannot be left open to every call".to_string());
        }
        let count = tokens.len();
        self.inner.tokens.replace(tokens);
        Ok(count)
    }

    fn log(&self, line: String) {
        (self.inner.config.log)(&line);
    }

    /// Admits a request or refuses it (logged and counted).
    fn admit(
        &self,
        scope: &Scope,
        request: CompactRequest,
    ) -> std::result::Result<Admitted, Status> {
        let deadline = Instant::now() + self.inner.config.job_timeout;
        self.accepting()
            .and_then(|()| admit(&self.inner, scope, request, deadline))
            .inspect_err(|status| self.refused(status))
    }

    /// `UNAVAILABLE` once the worker has begun to stop (a call that was
    /// already past this check when the drain began runs to its end).
    fn accepting(&self) -> std::result::Result<(), Status> {
        self.inner.intake.check()
    }

    /// Cancels every running job and removes every staged session, at
    /// once: what a worker does when it must exit now (a second SIGTERM
    /// during a drain). Returns how many sessions it removed.
    pub fn abandon(&self) -> usize {
        let removed = self.inner.staging.remove_all();
        self.inner
            .metrics
            .staging_removed("shutdown", removed as u64);
        removed
    }

    fn refused(&self, status: &Status) {
        self.inner.metrics.refused(status.code());
        self.log(format!(
            "Refused a call: {:?}: {}",
            status.code(),
            status.message()
        ));
    }

    /// Runs `work` on a blocking thread, sending a progress event through
    /// `tx` every interval while it runs. A client that goes away (`tx`
    /// closed) cancels the job at once, and so does its deadline: the
    /// job's next write fails, and the call ends here without waiting.
    async fn run_blocking<T: Send + 'static, E>(
        &self,
        admitted: &Admitted,
        tx: &mpsc::Sender<std::result::Result<E, Status>>,
        progress: fn(Progress) -> E,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> std::result::Result<T, Status> {
        let io = &admitted.io;
        let mut handle = tokio::task::spawn_blocking(work);
        let mut tick = tokio::time::interval(self.inner.config.progress_interval);
        tick.tick().await;
        let deadline = tokio::time::sleep_until(admitted.deadline.into());
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                result = &mut handle => {
                    return match result {
                        Ok(result) => result.map_err(|e| status_of(&e)),
                        Err(e) => Err(Status::internal(format!("the job stopped: {e}"))),
                    };
                }
                () = tx.closed() => {
                    io.cancel();
                    return Err(Status::cancelled("the engine left"));
                }
                () = &mut deadline => {
                    io.cancel();
                    return Err(Status::deadline_exceeded(format!(
                        "the job ran past --job_timeout ({:.0} s)",
                        self.inner.config.job_timeout.as_secs_f64()
                    )));
                }
                _ = tick.tick() => {
                    // Full: the client reads slowly; the next tick tries again.
                    let _ = tx.try_send(Ok(progress(io.progress())));
                }
            }
        }
    }

    /// The `Done` message for a finished job.
    fn done(executor: &str, output: &CompactionOutput) -> Done {
        Done {
            executor: executor.to_string(),
            tables: output
                .outputs
                .iter()
                .map(|t| StagedTable {
                    name: format!("{:06}.ldb", t.number),
                    file_size: t.file_size,
                    smallest: t.smallest.clone(),
                    largest: t.largest.clone(),
                    entries: t.entries,
                })
                .collect(),
            stats: Some(JobStats {
                bytes_read: output.stats.bytes_read,
                bytes_written: output.stats.bytes_written,
                entries_in: output.stats.entries_in,
                entries_out: output.stats.entries_out,
                total_secs: output.stats.total_secs,
            }),
        }
    }

    /// Sends the end of a job: `Done` (its outputs then wait in staging for
    /// the adoption timeout), or the error after removing the staged files.
    /// A `Done` the engine cannot receive is cleaned up too.
    async fn finish<E>(
        &self,
        admitted: &Admitted,
        mode: &str,
        tx: &mpsc::Sender<std::result::Result<E, Status>>,
        result: std::result::Result<E, Status>,
        started: Instant,
    ) {
        let id = admitted.job.id;
        let session = &admitted.session;
        let staging = &self.inner.staging;
        let secs = started.elapsed().as_secs_f64();
        let written = admitted.io.written();
        let outcome = match result {
            Ok(done) => {
                if tx.send(Ok(done)).await.is_err() {
                    staging.remove(session);
                    self.inner.metrics.staging_removed("failed", 1);
                    self.log(format!(
                        "Job #{id} ({session}, {}): the engine left before the result; staged files removed",
                        admitted.owner
                    ));
                    "cancelled"
                } else {
                    staging.finished(session);
                    self.log(format!(
                        "Job #{id} ({session}, {}): done in {secs:.3} s, {} tables, {written} bytes staged",
                        admitted.owner,
                        admitted.io.tables(),
                    ));
                    "done"
                }
            }
            Err(status) => {
                staging.remove(session);
                self.inner.metrics.staging_removed("failed", 1);
                self.log(format!(
                    "Job #{id} ({session}, {}): failed: {:?}: {}; staged files removed",
                    admitted.owner,
                    status.code(),
                    status.message()
                ));
                let outcome = outcome_of(&status);
                let _ = tx.send(Err(status)).await;
                outcome
            }
        };
        self.inner
            .metrics
            .job(mode, outcome, secs, admitted.input_bytes, written);
        self.inner.metrics.running(-1);
    }

    async fn near_data(
        self,
        admitted: Admitted,
        tx: mpsc::Sender<std::result::Result<CompactEvent, Status>>,
    ) {
        let started = Instant::now();
        let executor = self.inner.config.executor.clone();
        let (job, io) = (admitted.job.clone(), SessionIo(admitted.io.clone()));
        let result = self
            .run_blocking(&admitted, &tx, compact_progress, move || {
                executor.run(&job, &io)
            })
            .await
            .map(|output| CompactEvent {
                event: Some(compact_event::Event::Done(Self::done(
                    self.inner.config.executor.name(),
                    &output,
                ))),
            });
        self.finish(&admitted, "near-data", &tx, result, started)
            .await;
    }

    async fn keys_only(
        self,
        admitted: Admitted,
        inbound: Streaming<KeysOnlyRequest>,
        tx: mpsc::Sender<std::result::Result<KeysOnlyEvent, Status>>,
    ) {
        let started = Instant::now();
        let result = self.keys_only_steps(&admitted, inbound, &tx).await;
        self.finish(&admitted, KEYS_ONLY, &tx, result, started)
            .await;
    }

    /// Waits for the client's next message, at most the idle timeout and
    /// never past the job's deadline.
    async fn receive(
        &self,
        inbound: &mut Streaming<KeysOnlyRequest>,
        deadline: Instant,
    ) -> std::result::Result<Option<KeysOnlyRequest>, Status> {
        let idle = self.inner.config.stream_idle_timeout;
        let limit = (Instant::now() + idle).min(deadline);
        match tokio::time::timeout_at(limit.into(), inbound.message()).await {
            Ok(message) => message,
            Err(_) => Err(client_silent(idle)),
        }
    }

    /// Runs the data side of a keys-only job ([`data_side`]) on a blocking
    /// thread that talks to the client through `inbound` and `tx`.
    async fn keys_only_steps(
        &self,
        admitted: &Admitted,
        inbound: Streaming<KeysOnlyRequest>,
        tx: &mpsc::Sender<std::result::Result<KeysOnlyEvent, Status>>,
    ) -> std::result::Result<KeysOnlyEvent, Status> {
        let mut conversation = StreamConversation {
            inbound,
            tx: tx.clone(),
            runtime: tokio::runtime::Handle::current(),
            idle: self.inner.config.stream_idle_timeout,
            deadline: admitted.deadline,
        };
        let (job, io) = (admitted.job.clone(), SessionIo(admitted.io.clone()));
        let report = self
            .run_blocking(admitted, tx, keys_progress, move || {
                Ok(data_side::run(&job, &io, &mut conversation))
            })
            .await??;
        self.inner
            .metrics
            .keys_only_unordered(report.unordered_peak);
        Ok(KeysOnlyEvent {
            event: Some(keys_only_event::Event::Done(Self::done(
                KEYS_ONLY,
                &report.output,
            ))),
        })
    }
}

/// `DEADLINE_EXCEEDED` for a keys-only client that sent nothing while the
/// worker waited for it.
fn client_silent(idle: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "keys-only: the client sent nothing for {:.1} s (--stream_idle_timeout)",
        idle.as_secs_f64()
    ))
}

/// The data side's conversation over the call's stream, from its blocking
/// thread: every wait for the client (a message, or room for keys) lasts
/// at most the idle timeout, and never past the job's deadline.
struct StreamConversation {
    inbound: Streaming<KeysOnlyRequest>,
    tx: mpsc::Sender<std::result::Result<KeysOnlyEvent, Status>>,
    runtime: tokio::runtime::Handle,
    idle: Duration,
    deadline: Instant,
}

impl Conversation for StreamConversation {
    fn receive(&mut self) -> std::result::Result<Option<KeysOnlyRequest>, Status> {
        let limit = (Instant::now() + self.idle).min(self.deadline);
        // The timer is made inside `block_on`: it needs the runtime.
        let inbound = &mut self.inbound;
        self.runtime
            .block_on(async { tokio::time::timeout_at(limit.into(), inbound.message()).await })
            .unwrap_or_else(|_| Err(client_silent(self.idle)))
    }

    fn send(&mut self, chunk: KeyChunk) -> std::result::Result<(), Status> {
        let event = KeysOnlyEvent {
            event: Some(keys_only_event::Event::Keys(chunk)),
        };
        let limit = (Instant::now() + self.idle).min(self.deadline);
        let tx = &self.tx;
        let sent = async { tokio::time::timeout_at(limit.into(), tx.send(Ok(event))).await };
        match self.runtime.block_on(sent) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Status::cancelled("the engine left")),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "keys-only: the client read nothing for {:.1} s (--stream_idle_timeout)",
                self.idle.as_secs_f64()
            ))),
        }
    }
}

fn compact_progress(progress: Progress) -> CompactEvent {
    CompactEvent {
        event: Some(compact_event::Event::Progress(progress)),
    }
}

fn keys_progress(progress: Progress) -> KeysOnlyEvent {
    KeysOnlyEvent {
        event: Some(keys_only_event::Event::Progress(progress)),
    }
}

type EventStream<E> = ReceiverStream<std::result::Result<E, Status>>;

/// The scope the token interceptor put on a request.
fn scope_of<T>(request: &Request<T>) -> Scope {
    request
        .extensions()
        .get::<Scope>()
        .cloned()
        .unwrap_or_else(Scope::everything)
}

#[tonic::async_trait]
impl CompactionWorker for Worker {
    async fn hello(
        &self,
        _request: Request<HelloRequest>,
    ) -> std::result::Result<Response<HelloReply>, Status> {
        self.accepting()
            .inspect_err(|status| self.refused(status))?;
        let config = &self.inner.config;
        Ok(Response::new(HelloReply {
            version: env!("CARGO_PKG_VERSION").to_string(),
            executor: config.executor.name().to_string(),
            max_jobs: config.max_jobs as u32,
            running_jobs: self.inner.running_jobs() as u32,
            max_job_bytes: config.max_job_bytes,
            progress_interval_ms: u32::try_from(config.progress_interval.as_millis())
                .unwrap_or(u32::MAX),
            protocol: PROTOCOL,
        }))
    }

    type CompactStream = EventStream<CompactEvent>;

    async fn compact(
        &self,
        request: Request<CompactRequest>,
    ) -> std::result::Result<Response<Self::CompactStream>, Status> {
        let scope = scope_of(&request);
        let admitted = self.admit(&scope, request.into_inner())?;
        self.log(format!(
            "Job #{} ({}, {}): near-data, {} files, {} bytes, on {}",
            admitted.job.id,
            admitted.session,
            admitted.owner,
            admitted.job.input_files(),
            admitted.input_bytes,
            self.inner.config.executor.name()
        ));
        self.inner.metrics.running(1);
        let (tx, rx) = mpsc::channel(EVENTS_BUFFERED);
        tokio::spawn(self.clone().near_data(admitted, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    type CompactKeysOnlyStream = EventStream<KeysOnlyEvent>;

    async fn compact_keys_only(
        &self,
        request: Request<Streaming<KeysOnlyRequest>>,
    ) -> std::result::Result<Response<Self::CompactKeysOnlyStream>, Status> {
        let scope = scope_of(&request);
        self.accepting()
            .inspect_err(|status| self.refused(status))?;
        let mut inbound = request.into_inner();
        let deadline = Instant::now() + self.inner.config.job_timeout;
        let first = self
            .receive(&mut inbound, deadline)
            .await
            .inspect_err(|status| self.refused(status))?
            .ok_or_else(|| Status::invalid_argument("request: the stream is empty"))
            .inspect_err(|status| self.refused(status))?;
        let Some(keys_only_request::Request::Start(start)) = first.request else {
            let status = Status::invalid_argument("request: the first message must start the job");
            self.refused(&status);
            return Err(status);
        };
        let admitted = self.admit(&scope, start)?;
        self.log(format!(
            "Job #{} ({}, {}): keys-only, {} files, {} bytes",
            admitted.job.id,
            admitted.session,
            admitted.owner,
            admitted.job.input_files(),
            admitted.input_bytes
        ));
        self.inner.metrics.running(1);
        let (tx, rx) = mpsc::channel(EVENTS_BUFFERED);
        tokio::spawn(self.clone().keys_only(admitted, inbound, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
