//! The worker side: a gRPC service that runs compaction jobs against the
//! tables under its root and stages their outputs for the engine to check
//! and adopt. Every request is checked before any file is touched (token,
//! job, paths, size, concurrency); a failing job removes its staged files;
//! a cancelled call (the engine gave up or died) cancels its job.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_format::format::RandomAccess;
use shale_format::{Error, Result};
use subtle::ConstantTimeEq;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::metadata::MetadataMap;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

use super::convert::job_from_proto;
use super::keys::{self, RunEntries, KEYS_ONLY};
use super::paths::{staging_dir, valid_session, Root, STAGING_DIR};
use super::proto::compaction_worker_server::{CompactionWorker, CompactionWorkerServer};
use super::proto::{
    compact_event, keys_only_event, keys_only_request, CompactEvent, CompactRequest, Done,
    HelloReply, HelloRequest, JobStats, KeyChunk, KeysOnlyEvent, KeysOnlyRequest, KeysSent,
    Progress, StagedTable,
};
use super::{Logger, AUTHORIZATION};
use crate::job::{CompactionJob, CompactionOutput, Executor, JobFile, JobIo, OutputSink};

/// Keys per `KeyChunk` message, at most.
const KEYS_PER_CHUNK: usize = 16 * 1024;
/// Key bytes per `KeyChunk` message, at most (one key may exceed it).
const KEY_BYTES_PER_CHUNK: usize = 1 << 20;

/// How a worker runs.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The only directory tree the worker touches.
    pub root: PathBuf,
    /// The token every call must carry (`authorization: Bearer <token>`);
    /// `None`: no authentication (loopback use only).
    pub token: Option<String>,
    /// The executor jobs run with.
    pub executor: Arc<dyn Executor>,
    /// Jobs run at once; more are refused.
    pub max_jobs: usize,
    /// The largest job taken, in input-table bytes.
    pub max_job_bytes: u64,
    /// The largest message accepted or sent.
    pub max_message_bytes: usize,
    /// How often a running job reports progress.
    pub progress_interval: Duration,
    /// Where the worker's LOG lines go.
    pub log: Logger,
}

impl fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerConfig")
            .field("root", &self.root)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("executor", &self.executor.name())
            .field("max_jobs", &self.max_jobs)
            .field("max_job_bytes", &self.max_job_bytes)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("progress_interval", &self.progress_interval)
            .finish()
    }
}

impl WorkerConfig {
    /// A worker on `root` running jobs with `executor`, with the defaults:
    /// no token, as many jobs at once as cores, jobs up to 4 GiB, messages
    /// up to 64 MiB, progress every second, no LOG.
    pub fn new(root: impl Into<PathBuf>, executor: Arc<dyn Executor>) -> WorkerConfig {
        WorkerConfig {
            root: root.into(),
            token: None,
            executor,
            max_jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            max_job_bytes: 4 << 30,
            max_message_bytes: 64 << 20,
            progress_interval: Duration::from_secs(1),
            log: Arc::new(|_| {}),
        }
    }
}

/// The compaction worker service.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<WorkerInner>,
}

struct WorkerInner {
    config: WorkerConfig,
    root: Root,
    slots: Arc<Semaphore>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.config.fmt(f)
    }
}

/// A job that passed every check, with its staging directory created.
struct Prepared {
    job: CompactionJob,
    io: Arc<StagingIo>,
    session: String,
    _permit: OwnedSemaphorePermit,
}

/// `Status` for an error a job returned.
fn status_of(err: &Error) -> Status {
    match err {
        Error::Corruption { .. } => Status::data_loss(err.to_string()),
        Error::NotFound(_) => Status::not_found(err.to_string()),
        Error::InvalidArgument(_) => Status::invalid_argument(err.to_string()),
        _ => Status::internal(err.to_string()),
    }
}

impl Worker {
    /// A worker with `config`; the root must exist.
    pub fn new(config: WorkerConfig) -> std::io::Result<Worker> {
        let root = Root::new(&config.root)?;
        let slots = Arc::new(Semaphore::new(config.max_jobs.max(1)));
        Ok(Worker {
            inner: Arc::new(WorkerInner {
                config,
                root,
                slots,
            }),
        })
    }

    fn log(&self, line: String) {
        (self.inner.config.log)(&line);
    }

    /// Checks a request and creates its staging directory.
    fn prepare(&self, request: CompactRequest) -> std::result::Result<Prepared, Status> {
        let config = &self.inner.config;
        let permit = self.inner.slots.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "the worker runs {} jobs already (--max_jobs)",
                config.max_jobs
            ))
        })?;
        if !valid_session(&request.session) {
            return Err(Status::invalid_argument(
                "the session must be 32 lowercase hex digits",
            ));
        }
        let job = request
            .job
            .ok_or_else(|| Status::invalid_argument("the request has no job"))
            .and_then(|job| job_from_proto(job).map_err(Status::invalid_argument))?;
        if job.input_bytes() > config.max_job_bytes {
            return Err(Status::resource_exhausted(format!(
                "job #{} reads {} bytes, more than this worker's --max_job_bytes {}",
                job.id,
                job.input_bytes(),
                config.max_job_bytes
            )));
        }
        let root = &self.inner.root;
        let db = root
            .database(&request.db_path)
            .map_err(Status::permission_denied)?;
        // Resolved once, here: the job opens these paths and no others.
        let inputs = job
            .inputs
            .iter()
            .flat_map(|run| &run.files)
            .map(|file| Ok((file.number, root.table(&db, file.number)?)))
            .collect::<std::result::Result<HashMap<u64, PathBuf>, String>>()
            .map_err(Status::permission_denied)?;
        let staging = db.join(STAGING_DIR);
        std::fs::create_dir_all(&staging)
            .map_err(|e| Status::internal(format!("creating {}: {e}", staging.display())))?;
        root.contain(&staging).map_err(Status::permission_denied)?;
        let dir = staging_dir(&db, &request.session);
        std::fs::create_dir(&dir)
            .map_err(|e| Status::already_exists(format!("creating {}: {e}", dir.display())))?;
        Ok(Prepared {
            job,
            io: Arc::new(StagingIo::new(inputs, dir)),
            session: request.session,
            _permit: permit,
        })
    }

    /// Runs `work` on a blocking thread, sending a progress event through
    /// `tx` every interval while it runs. A closed `tx` (the engine left)
    /// cancels the job: its next output file fails to open.
    async fn run_blocking<T: Send + 'static, E>(
        &self,
        io: &Arc<StagingIo>,
        tx: &mpsc::Sender<std::result::Result<E, Status>>,
        progress: fn(Progress) -> E,
        work: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> std::result::Result<T, Status> {
        let mut handle = tokio::task::spawn_blocking(work);
        let mut tick = tokio::time::interval(self.inner.config.progress_interval);
        tick.tick().await;
        loop {
            tokio::select! {
                result = &mut handle => {
                    return match result {
                        Ok(result) => result.map_err(|e| status_of(&e)),
                        Err(e) => Err(Status::internal(format!("the job stopped: {e}"))),
                    };
                }
                _ = tick.tick() => {
                    if let Err(mpsc::error::TrySendError::Closed(_)) =
                        tx.try_send(Ok(progress(io.progress())))
                    {
                        io.cancel();
                    }
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

    /// Sends the end of a job: `Done`, or the error after removing the
    /// staged files. A `Done` the engine cannot receive is cleaned up too.
    async fn finish<E>(
        &self,
        prepared: &Prepared,
        tx: &mpsc::Sender<std::result::Result<E, Status>>,
        result: std::result::Result<E, Status>,
        started: Instant,
    ) {
        let id = prepared.job.id;
        let session = &prepared.session;
        match result {
            Ok(done) => {
                if tx.send(Ok(done)).await.is_err() {
                    prepared.io.cleanup();
                    self.log(format!(
                        "Job #{id} ({session}): the engine left before the result; staged files removed"
                    ));
                } else {
                    self.log(format!(
                        "Job #{id} ({session}): done in {:.3} s, {} tables, {} bytes staged",
                        started.elapsed().as_secs_f64(),
                        prepared.io.tables.load(Ordering::Relaxed),
                        prepared.io.written.load(Ordering::Relaxed)
                    ));
                }
            }
            Err(status) => {
                prepared.io.cleanup();
                self.log(format!(
                    "Job #{id} ({session}): failed: {}; staged files removed",
                    status.message()
                ));
                let _ = tx.send(Err(status)).await;
            }
        }
    }

    async fn near_data(
        self,
        prepared: Prepared,
        tx: mpsc::Sender<std::result::Result<CompactEvent, Status>>,
    ) {
        let started = Instant::now();
        let executor = self.inner.config.executor.clone();
        let (job, io) = (prepared.job.clone(), prepared.io.clone());
        let result = self
            .run_blocking(&prepared.io, &tx, compact_progress, move || {
                executor.run(&job, &*io)
            })
            .await
            .map(|output| CompactEvent {
                event: Some(compact_event::Event::Done(Self::done(
                    self.inner.config.executor.name(),
                    &output,
                ))),
            });
        self.finish(&prepared, &tx, result, started).await;
    }

    async fn keys_only(
        self,
        prepared: Prepared,
        mut inbound: Streaming<KeysOnlyRequest>,
        tx: mpsc::Sender<std::result::Result<KeysOnlyEvent, Status>>,
    ) {
        let started = Instant::now();
        let result = self.keys_only_steps(&prepared, &mut inbound, &tx).await;
        self.finish(&prepared, &tx, result, started).await;
    }

    async fn keys_only_steps(
        &self,
        prepared: &Prepared,
        inbound: &mut Streaming<KeysOnlyRequest>,
        tx: &mpsc::Sender<std::result::Result<KeysOnlyEvent, Status>>,
    ) -> std::result::Result<KeysOnlyEvent, Status> {
        let event = |event| KeysOnlyEvent { event: Some(event) };
        let left = || Status::cancelled("the engine left");
        // 1. Unpack, keep the values, send the keys.
        let (job, io) = (prepared.job.clone(), prepared.io.clone());
        let runs: Vec<RunEntries> = self
            .run_blocking(&prepared.io, tx, keys_progress, move || {
                keys::unpack(&job, &*io)
            })
            .await?;
        for (run, entries) in runs.iter().enumerate() {
            let mut start = 0;
            while start < entries.len() {
                let mut end = start;
                let mut bytes = 0;
                while end < entries.len()
                    && end - start < KEYS_PER_CHUNK
                    && bytes < KEY_BYTES_PER_CHUNK
                {
                    bytes += entries.keys[end].len();
                    end += 1;
                }
                let chunk = KeyChunk {
                    run: run as u32,
                    keys: entries.keys[start..end].to_vec(),
                };
                tx.send(Ok(event(keys_only_event::Event::Keys(chunk))))
                    .await
                    .map_err(|_| left())?;
                start = end;
            }
        }
        let run_entries: Vec<u64> = runs.iter().map(|r| r.len() as u64).collect();
        tx.send(Ok(event(keys_only_event::Event::KeysSent(KeysSent {
            run_entries,
        }))))
        .await
        .map_err(|_| left())?;
        // 2. The engine merges; receive its order.
        let total: usize = runs.iter().map(RunEntries::len).sum();
        let mut codes: Vec<u32> = Vec::with_capacity(total);
        loop {
            let message = inbound.message().await?.ok_or_else(|| {
                Status::cancelled("the engine closed the stream before sending the order")
            })?;
            let Some(keys_only_request::Request::Order(chunk)) = message.request else {
                return Err(Status::invalid_argument(
                    "expected an order chunk after the keys",
                ));
            };
            if codes.len() + chunk.codes.len() > total {
                return Err(Status::invalid_argument(format!(
                    "the order has more codes than the {total} keys sent"
                )));
            }
            codes.extend_from_slice(&chunk.codes);
            if chunk.last {
                break;
            }
        }
        // 3. Pack the kept entries with their values.
        let (job, io) = (prepared.job.clone(), prepared.io.clone());
        let output = self
            .run_blocking(&prepared.io, tx, keys_progress, move || {
                keys::pack(&job, &runs, &codes, &*io)
            })
            .await?;
        Ok(event(keys_only_event::Event::Done(Self::done(
            KEYS_ONLY, &output,
        ))))
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

#[tonic::async_trait]
impl CompactionWorker for Worker {
    async fn hello(
        &self,
        _request: Request<HelloRequest>,
    ) -> std::result::Result<Response<HelloReply>, Status> {
        let config = &self.inner.config;
        let free = self.inner.slots.available_permits();
        Ok(Response::new(HelloReply {
            version: env!("CARGO_PKG_VERSION").to_string(),
            executor: config.executor.name().to_string(),
            max_jobs: config.max_jobs as u32,
            running_jobs: config.max_jobs.saturating_sub(free) as u32,
            max_job_bytes: config.max_job_bytes,
            progress_interval_ms: config.progress_interval.as_millis() as u32,
        }))
    }

    type CompactStream = EventStream<CompactEvent>;

    async fn compact(
        &self,
        request: Request<CompactRequest>,
    ) -> std::result::Result<Response<Self::CompactStream>, Status> {
        let prepared = self.prepare(request.into_inner()).inspect_err(|status| {
            self.log(format!("Refused a job: {}", status.message()));
        })?;
        self.log(format!(
            "Job #{} ({}): near-data, {} files, {} bytes, on {}",
            prepared.job.id,
            prepared.session,
            prepared.job.input_files(),
            prepared.job.input_bytes(),
            self.inner.config.executor.name()
        ));
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(self.clone().near_data(prepared, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    type CompactKeysOnlyStream = EventStream<KeysOnlyEvent>;

    async fn compact_keys_only(
        &self,
        request: Request<Streaming<KeysOnlyRequest>>,
    ) -> std::result::Result<Response<Self::CompactKeysOnlyStream>, Status> {
        let mut inbound = request.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("the stream is empty"))?;
        let Some(keys_only_request::Request::Start(start)) = first.request else {
            return Err(Status::invalid_argument(
                "the first message must start the job",
            ));
        };
        let prepared = self.prepare(start).inspect_err(|status| {
            self.log(format!("Refused a job: {}", status.message()));
        })?;
        self.log(format!(
            "Job #{} ({}): keys-only, {} files, {} bytes",
            prepared.job.id,
            prepared.session,
            prepared.job.input_files(),
            prepared.job.input_bytes()
        ));
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(self.clone().keys_only(prepared, inbound, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// Checks the bearer token in constant time.
fn check_token(
    expected: &Option<Arc<[u8]>>,
    metadata: &MetadataMap,
) -> std::result::Result<(), Status> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let given = metadata
        .get(AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or(b"");
    if bool::from(given.ct_eq(expected)) {
        Ok(())
    } else {
        Err(Status::unauthenticated("missing or wrong token"))
    }
}

/// A TLS certificate chain and key, PEM-encoded.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// The certificate chain.
    pub cert_pem: Vec<u8>,
    /// The private key.
    pub key_pem: Vec<u8>,
}

/// Serves `worker` on `listener` until `shutdown` resolves; then stops
/// taking calls and lets running jobs finish.
pub async fn serve(
    worker: Worker,
    listener: tokio::net::TcpListener,
    tls: Option<TlsIdentity>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::result::Result<(), String> {
    let max_message = worker.inner.config.max_message_bytes;
    let token: Option<Arc<[u8]>> = worker
        .inner
        .config
        .token
        .as_ref()
        .map(|t| Arc::from(t.as_bytes()));
    let service = CompactionWorkerServer::new(worker)
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message);
    let service = InterceptedService::new(service, move |request: Request<()>| {
        check_token(&token, request.metadata()).map(|()| request)
    });
    let mut builder = Server::builder()
        .concurrency_limit_per_connection(256)
        .http2_keepalive_interval(Some(Duration::from_secs(10)));
    if let Some(tls) = tls {
        builder = builder
            .tls_config(
                ServerTlsConfig::new().identity(Identity::from_pem(tls.cert_pem, tls.key_pem)),
            )
            .map_err(|e| format!("TLS: {e}"))?;
    }
    builder
        .add_service(service)
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await
        .map_err(|e| format!("serving: {e}"))
}

/// A worker serving on a thread of its own (for tests and for embedding a
/// worker in another program); stopped when dropped.
#[derive(Debug)]
pub struct LocalWorker {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LocalWorker {
    /// Starts `config` on `127.0.0.1` at a free port.
    pub fn start(config: WorkerConfig) -> std::io::Result<LocalWorker> {
        Self::start_with_tls(config, None)
    }

    /// As [`LocalWorker::start`], serving TLS with `tls` when given.
    pub fn start_with_tls(
        config: WorkerConfig,
        tls: Option<TlsIdentity>,
    ) -> std::io::Result<LocalWorker> {
        let worker = Worker::new(config)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("shale-worker")
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let address = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("shale-worker".into())
            .spawn(move || {
                let shutdown = async {
                    let _ = stopped.await;
                };
                let _ = runtime.block_on(serve(worker, listener, tls, shutdown));
            })?;
        Ok(LocalWorker {
            address,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://ADDRESS`, for `remote_workers`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Drop for LocalWorker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The worker's side of a job: its input tables (resolved under the root
/// when the job was checked), outputs in the session's staging directory,
/// numbered from 1.
struct StagingIo {
    inputs: HashMap<u64, PathBuf>,
    dir: PathBuf,
    next: AtomicU64,
    cancelled: AtomicBool,
    written: Arc<AtomicU64>,
    tables: Arc<AtomicU64>,
    started: Instant,
}

impl StagingIo {
    fn new(inputs: HashMap<u64, PathBuf>, dir: PathBuf) -> StagingIo {
        StagingIo {
            inputs,
            dir,
            next: AtomicU64::new(1),
            cancelled: AtomicBool::new(false),
            written: Arc::new(AtomicU64::new(0)),
            tables: Arc::new(AtomicU64::new(0)),
            started: Instant::now(),
        }
    }

    fn progress(&self) -> Progress {
        Progress {
            bytes_written: self.written.load(Ordering::Relaxed),
            tables: self.tables.load(Ordering::Relaxed),
            elapsed_secs: self.started.elapsed().as_secs_f64(),
        }
    }

    fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Removes the staging directory and everything in it.
    fn cleanup(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A staged output file; counts what it writes for progress.
struct StagedSink {
    file: BufWriter<File>,
    path: PathBuf,
    written: Arc<AtomicU64>,
    tables: Arc<AtomicU64>,
}

impl Write for StagedSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl OutputSink for StagedSink {
    fn finish(self: Box<Self>) -> Result<()> {
        let path = self.path.display().to_string();
        let file = self
            .file
            .into_inner()
            .map_err(|e| Error::io(format!("writing {path}"), e.into_error()))?;
        file.sync_all()
            .map_err(|e| Error::io(format!("syncing {path}"), e))?;
        self.tables.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl JobIo for StagingIo {
    fn open_input(&self, file: &JobFile) -> Result<Arc<dyn RandomAccess>> {
        let path = self.inputs.get(&file.number).ok_or_else(|| {
            Error::InvalidArgument(format!("table {} is not an input of the job", file.number))
        })?;
        let opened =
            File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        Ok(Arc::new(opened))
    }

    fn create_output(&self) -> Result<(u64, Box<dyn OutputSink>)> {
        if self.cancelled.load(Ordering::SeqCst) {
            return Err(Error::executor_failed("worker", "the job was cancelled"));
        }
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{number:06}.ldb"));
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        Ok((
            number,
            Box::new(StagedSink {
                file: BufWriter::with_capacity(1 << 20, file),
                path,
                written: self.written.clone(),
                tables: self.tables.clone(),
            }),
        ))
    }

    fn discard_output(&self, number: u64) -> Result<()> {
        let path = self.dir.join(format!("{number:06}.ldb"));
        std::fs::remove_file(&path)
            .map_err(|e| Error::io(format!("removing {}", path.display()), e))
    }
}
