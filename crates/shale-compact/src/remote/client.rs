//! The engine side: the `remote` executor. It ships a job to the best idle
//! worker, waits for it while progress keeps coming, checks every staged
//! table and adopts them into the database. Any failure (the worker down,
//! busy, refusing, silent past the timeout, disconnected, or returning
//! tables that fail the check) removes the staged files and fails the job
//! with [`Error::ExecutorFailed`], so the scheduler runs it locally.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prost::Message;
use shale_format::comparator::compare_internal_keys;
use shale_format::internal_key::extract_user_key;
use shale_format::{Error, Result};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Request, Streaming};

use super::convert::job_to_proto;
use super::fs::{file_id, Dir};
use super::keys::{Held, KeySide, DEFAULT_KEYS_WINDOW, KEYS_ONLY};
use super::paths::{new_session, staging_dir, STAGING_DIR};
use super::proto::compaction_worker_client::CompactionWorkerClient;
use super::proto::{
    compact_event, keys_only_event, keys_only_request, CompactRequest, Done, HelloRequest,
    KeysOnlyEvent, KeysOnlyRequest,
};
use super::verify::{check_hello, check_staged, valid_table_name, Check, Refusal};
use super::{RemoteJobIo, VerifiedTable};
use super::{RemoteMode, AUTHORIZATION};
use crate::job::{
    CompactionJob, CompactionOutput, Executor, JobIo, OutputTable, PhaseStats, WorkTally,
};
use crate::ExecutorKind::Remote;

/// Jobs whose throughput a worker's record keeps.
const THROUGHPUT_WINDOW: usize = 5;
/// The longest a failing worker is left alone before it is tried again.
const MAX_REST: Duration = Duration::from_secs(60);

/// How the engine reaches its workers.
#[derive(Clone)]
pub struct RemoteOptions {
    /// Worker endpoints: `http://HOST:PORT`, `https://HOST:PORT`, or
    /// `HOST:PORT` (plain HTTP/2).
    pub endpoints: Vec<String>,
    /// The token sent with every call.
    pub token: Option<String>,
    /// Near-data (the default) or keys-only.
    pub mode: RemoteMode,
    /// A worker silent this long (no progress, no result) loses the job.
    pub progress_timeout: Duration,
    /// How long connecting to a worker may take.
    pub connect_timeout: Duration,
    /// The CA certificate (PEM) `https` workers are checked against;
    /// `None`: the system's trust store.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// The engine's own certificate chain and key (PEM), for workers that
    /// ask for client certificates (mutual TLS).
    pub tls_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The largest message sent or accepted.
    pub max_message_bytes: usize,
    /// Keys-only mode: the most keys of one input run the engine holds or
    /// has asked for and not yet received (at least 1). The engine's memory
    /// for a job is this many keys per run, whatever the job's size.
    pub keys_window: u64,
}

impl Default for RemoteOptions {
    fn default() -> RemoteOptions {
        RemoteOptions {
            endpoints: Vec::new(),
            token: None,
            mode: RemoteMode::NearData,
            progress_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            tls_ca_pem: None,
            tls_identity: None,
            max_message_bytes: 64 << 20,
            keys_window: DEFAULT_KEYS_WINDOW,
        }
    }
}

impl fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("endpoints", &self.endpoints)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("mode", &self.mode)
            .field("progress_timeout", &self.progress_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("tls_ca", &self.tls_ca_pem.is_some())
            .field("tls_identity", &self.tls_identity.is_some())
            .field("keys_window", &self.keys_window)
            .finish()
    }
}

/// What the executor knows of one worker.
#[derive(Debug, Default)]
struct Record {
    running: usize,
    /// Jobs it takes at once (from its Hello); `None` until asked.
    capacity: Option<usize>,
    throughputs: VecDeque<f64>,
    jobs: u64,
    failures: u64,
    consecutive_failures: u32,
    rest_until: Option<Instant>,
    /// The longest silence its progress promise allows (from its Hello).
    max_gap: Option<Duration>,
    /// Attempts refused, by the check that failed.
    refusals: BTreeMap<&'static str, u64>,
}

impl Record {
    fn throughput(&self) -> Option<f64> {
        let mut sorted: Vec<f64> = self.throughputs.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).copied()
    }
}

struct Link {
    endpoint: String,
    channel: Channel,
    record: Mutex<Record>,
}

/// A worker's state as the engine sees it (for statistics).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerStats {
    /// The endpoint.
    pub endpoint: String,
    /// Jobs it completed.
    pub jobs: u64,
    /// Jobs it failed.
    pub failures: u64,
    /// Jobs running on it now.
    pub running: usize,
    /// Median input bytes per second of its last jobs.
    pub throughput: Option<f64>,
    /// Attempts the engine refused, by the check that failed
    /// ([`Check::name`]).
    pub refusals: Vec<(&'static str, u64)>,
}

/// The `remote` executor.
pub struct RemoteExecutor {
    runtime: tokio::runtime::Runtime,
    links: Vec<Link>,
    options: RemoteOptions,
    /// The most keys a keys-only job held at once, over the jobs so far.
    keys_peak: Mutex<Held>,
}

impl fmt::Debug for RemoteExecutor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteExecutor")
            .field("options", &self.options)
            .finish()
    }
}

/// The failure of a remote attempt, with its reason.
fn failed(reason: impl Into<String>) -> Error {
    Error::executor_failed(Remote.name(), reason)
}

/// `endpoint` as a URL tonic accepts (`HOST:PORT` becomes `http://HOST:PORT`).
fn endpoint_url(endpoint: &str) -> Result<String> {
    let url = if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("http://{endpoint}")
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Error::InvalidArgument(format!(
            "remote worker {endpoint:?}: only http:// and https:// endpoints are supported"
        )));
    }
    Ok(url)
}

impl RemoteExecutor {
    /// An executor for `options.endpoints`. Nothing is connected yet; a bad
    /// endpoint or certificate is an error here.
    pub fn new(options: RemoteOptions) -> Result<RemoteExecutor> {
        if options.endpoints.is_empty() {
            return Err(Error::InvalidArgument(
                "the remote executor needs at least one worker endpoint".to_string(),
            ));
        }
        if let Some(token) = &options.token {
            MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
                Error::InvalidArgument(
                    "the remote token holds characters a gRPC header cannot carry".to_string(),
                )
            })?;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("shale-remote")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the remote executor's runtime", e))?;
        let mut links = Vec::with_capacity(options.endpoints.len());
        {
            let _entered = runtime.enter();
            for endpoint in &options.endpoints {
                let url = endpoint_url(endpoint)?;
                let bad = |e: tonic::transport::Error| {
                    Error::InvalidArgument(format!("remote worker {endpoint:?}: {e}"))
                };
                let mut builder = Endpoint::from_shared(url.clone())
                    .map_err(bad)?
                    .connect_timeout(options.connect_timeout)
                    .tcp_nodelay(true)
                    .http2_keep_alive_interval(Duration::from_secs(10))
                    .keep_alive_timeout(options.progress_timeout)
                    .keep_alive_while_idle(true);
                if url.starts_with("https://") {
                    // Named CA: only it. Else the system's trust store, as
                    // any other TLS client on the host would use.
                    let mut tls = match &options.tls_ca_pem {
                        Some(ca) => {
                            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca))
                        }
                        None => ClientTlsConfig::new().with_native_roots(),
                    };
                    if let Some((cert, key)) = &options.tls_identity {
                        tls = tls.identity(Identity::from_pem(cert, key));
                    }
                    builder = builder.tls_config(tls).map_err(bad)?;
                }
                links.push(Link {
                    endpoint: endpoint.clone(),
                    channel: builder.connect_lazy(),
                    record: Mutex::new(Record::default()),
                });
            }
        }
        if options.keys_window == 0 {
            return Err(Error::InvalidArgument(
                "the remote executor's keys window must hold at least one key".to_string(),
            ));
        }
        Ok(RemoteExecutor {
            runtime,
            links,
            options,
            keys_peak: Mutex::new(Held::default()),
        })
    }

    /// The mode jobs run in.
    pub fn mode(&self) -> RemoteMode {
        self.options.mode
    }

    /// The most keys (and, apart, key bytes) one keys-only job held at once
    /// on this side, over the jobs so far: at most `keys_window` per input
    /// run.
    pub fn keys_only_peak(&self) -> Held {
        *self.keys_peak.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many workers it has.
    pub fn workers(&self) -> usize {
        self.links.len()
    }

    /// What the executor knows of each worker.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        self.links
            .iter()
            .map(|link| {
                let record = link.record.lock().unwrap_or_else(|e| e.into_inner());
                WorkerStats {
                    endpoint: link.endpoint.clone(),
                    jobs: record.jobs,
                    failures: record.failures,
                    running: record.running,
                    throughput: record.throughput(),
                    refusals: record.refusals.iter().map(|(k, v)| (*k, *v)).collect(),
                }
            })
            .collect()
    }

    fn client(&self, link: &Link) -> CompactionWorkerClient<Channel> {
        CompactionWorkerClient::new(link.channel.clone())
            .max_decoding_message_size(self.options.max_message_bytes)
            .max_encoding_message_size(self.options.max_message_bytes)
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(token) = &self.options.token {
            if let Ok(value) = MetadataValue::try_from(format!("Bearer {token}")) {
                request.metadata_mut().insert(AUTHORIZATION, value);
            }
        }
        request
    }

    /// The worker to send the next job to ([`choose_worker`]); its slot is
    /// taken.
    fn pick(&self) -> Result<&Link> {
        let now = Instant::now();
        let records: Vec<_> = self
            .links
            .iter()
            .map(|link| link.record.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let chosen = choose_worker(&records, now).map_err(|why| {
            let why: Vec<String> = why
                .iter()
                .zip(&self.links)
                .map(|(why, link)| format!("{} {why}", link.endpoint))
                .collect();
            failed(format!("no worker free: {}", why.join(", ")))
        });
        drop(records);
        let link = &self.links[chosen?];
        link.record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .running += 1;
        Ok(link)
    }

    fn release(&self, link: &Link, outcome: std::result::Result<f64, Option<Check>>) {
        let mut record = link.record.lock().unwrap_or_else(|e| e.into_inner());
        record.running = record.running.saturating_sub(1);
        match outcome {
            Ok(throughput) => {
                record.jobs += 1;
                record.consecutive_failures = 0;
                record.rest_until = None;
                if record.throughputs.len() == THROUGHPUT_WINDOW {
                    record.throughputs.pop_front();
                }
                record.throughputs.push_back(throughput);
            }
            Err(refused) => {
                if let Some(check) = refused {
                    *record.refusals.entry(check.name()).or_default() += 1;
                }
                // Ask again before the next job: a restarted worker may be
                // another version, or promise another interval.
                record.capacity = None;
                record.failures += 1;
                record.consecutive_failures += 1;
                let rest = Duration::from_millis(250)
                    .saturating_mul(1 << record.consecutive_failures.min(8))
                    .min(MAX_REST);
                record.rest_until = Some(Instant::now() + rest);
            }
        }
    }

    /// Asks a worker what it is and how many jobs it takes, the first time
    /// and after a failure, and checks the answer ([`check_hello`]).
    async fn hello(&self, link: &Link) -> std::result::Result<(), Attempt> {
        if link
            .record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .capacity
            .is_some()
        {
            return Ok(());
        }
        let reply = tokio::time::timeout(
            self.options.progress_timeout,
            self.client(link).hello(self.request(HelloRequest {})),
        )
        .await
        .map_err(|_| "no answer to hello".to_string())?
        .map_err(|s| describe(&s))?
        .into_inner();
        let max_gap = check_hello(&reply)?;
        let mut record = link.record.lock().unwrap_or_else(|e| e.into_inner());
        record.capacity = Some((reply.max_jobs as usize).max(1));
        record.max_gap = Some(max_gap);
        Ok(())
    }

    /// Waits for the next message of `stream`, at most the progress timeout
    /// and at most the silence the worker's progress promise allows.
    async fn next<T>(
        &self,
        link: &Link,
        stream: &mut Streaming<T>,
    ) -> std::result::Result<T, Attempt> {
        let promised = link
            .record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .max_gap;
        let timeout = self.options.progress_timeout;
        let wait = promised.map_or(timeout, |gap| gap.min(timeout));
        match tokio::time::timeout(wait, stream.message()).await {
            Err(_) if wait < timeout => Err(Attempt::Refused(Refusal::new(
                Check::ProgressGap,
                format!(
                    "the worker promised progress and sent nothing for {:.1} s",
                    wait.as_secs_f64()
                ),
            ))),
            Err(_) => Err(Attempt::Failed(format!(
                "no progress for {:.1} s",
                timeout.as_secs_f64()
            ))),
            Ok(Err(status)) => Err(describe(&status).into()),
            Ok(Ok(None)) => Err("the worker closed the stream without a result".into()),
            Ok(Ok(Some(message))) => Ok(message),
        }
    }

    async fn near_data(
        &self,
        link: &Link,
        request: CompactRequest,
        wire: &mut Wire,
    ) -> std::result::Result<Done, Attempt> {
        wire.sent(request.encoded_len());
        let mut stream = self
            .client(link)
            .compact(self.request(request))
            .await
            .map_err(|s| describe(&s))?
            .into_inner();
        loop {
            let event = self.next(link, &mut stream).await?;
            wire.received(event.encoded_len());
            match event.event {
                Some(compact_event::Event::Progress(_)) => {}
                Some(compact_event::Event::Done(done)) => return Ok(done),
                None => return Err("the worker sent an empty event".into()),
            }
        }
    }

    /// Runs a keys-only job: the merge here ([`KeySide`]), the data on the
    /// worker. Reading the worker's keys never waits on sending to it (the
    /// requests queue here, at most a window of codes per run), so neither
    /// side can block the other with both streams full.
    async fn keys_only(
        &self,
        link: &Link,
        request: CompactRequest,
        job: &CompactionJob,
        wire: &mut Wire,
    ) -> std::result::Result<Done, Attempt> {
        let mut side = KeySide::new(job, self.options.keys_window)
            .map_err(|e| Attempt::Failed(e.to_string()))?;
        let (tx, rx) = mpsc::unbounded_channel::<KeysOnlyRequest>();
        send(&tx, wire, keys_only_request::Request::Start(request))?;
        for request in side.start() {
            send(&tx, wire, request)?;
        }
        let mut stream = self
            .client(link)
            .compact_keys_only(self.request(UnboundedReceiverStream::new(rx)))
            .await
            .map_err(|s| describe(&s))?
            .into_inner();
        let merged = self
            .merge_keys(link, &mut stream, &mut side, &tx, wire)
            .await;
        self.record_keys_peak(side.peak());
        merged?;
        loop {
            let event = self.next(link, &mut stream).await?;
            wire.received(event.encoded_len());
            match event.event {
                Some(keys_only_event::Event::Progress(_)) => {}
                Some(keys_only_event::Event::Done(done)) => return Ok(done),
                _ => return Err("the worker sent keys after the whole order".into()),
            }
        }
    }

    /// Keeps the most keys a job held, for [`RemoteExecutor::keys_only_peak`].
    fn record_keys_peak(&self, held: Held) {
        let mut peak = self.keys_peak.lock().unwrap_or_else(|e| e.into_inner());
        *peak = peak.max(held);
    }

    /// Takes the worker's keys and answers with the order and credit until
    /// the last order chunk has gone.
    async fn merge_keys(
        &self,
        link: &Link,
        stream: &mut Streaming<KeysOnlyEvent>,
        side: &mut KeySide<'_>,
        tx: &mpsc::UnboundedSender<KeysOnlyRequest>,
        wire: &mut Wire,
    ) -> std::result::Result<(), Attempt> {
        while !side.is_finished() {
            let event = self.next(link, stream).await?;
            wire.received(event.encoded_len());
            match event.event {
                Some(keys_only_event::Event::Progress(_)) => {}
                Some(keys_only_event::Event::Keys(chunk)) => {
                    let answer = side
                        .on_keys(chunk)
                        .map_err(|e| Attempt::Failed(e.to_string()))?;
                    for request in answer {
                        send(tx, wire, request)?;
                    }
                }
                Some(keys_only_event::Event::Done(_)) | None => {
                    return Err("the worker ended before the whole order".into());
                }
            }
        }
        Ok(())
    }

    /// Checks the staged tables of `done` and adopts them. Each is opened
    /// without following a symlink, through the database directory the
    /// engine owns, read and checked through that descriptor, and adopted
    /// as that file ([`VerifiedTable`]).
    fn adopt(
        &self,
        job: &CompactionJob,
        done: &Done,
        db: &Path,
        session: &str,
        io: &dyn RemoteJobIo,
    ) -> std::result::Result<Vec<OutputTable>, Attempt> {
        let listing = |detail: String| Attempt::Refused(Refusal::new(Check::Listing, detail));
        let table_refusal = |detail: String| Attempt::Refused(Refusal::new(Check::Table, detail));
        let mut verified: Vec<VerifiedTable> = Vec::with_capacity(done.tables.len());
        let mut previous: Option<&[u8]> = None;
        let (low, high) = input_bounds(job);
        let staged = if done.tables.is_empty() {
            None
        } else {
            let opened = Dir::open(db)
                .and_then(|db| db.open_dir(STAGING_DIR))
                .and_then(|staging| staging.open_dir(session))
                .map_err(|e| table_refusal(format!("opening staging/{session}: {e}")))?;
            Some(opened)
        };
        for table in &done.tables {
            if !valid_table_name(&table.name) {
                return Err(listing(format!(
                    "the worker named a staged table {:?}",
                    table.name
                )));
            }
            if verified.iter().any(|v| v.path.ends_with(&table.name)) {
                return Err(listing(format!("the worker named {} twice", table.name)));
            }
            if previous.is_some_and(|p| compare_internal_keys(p, &table.smallest).is_ge()) {
                return Err(listing(format!(
                    "staged {} overlaps the table before it",
                    table.name
                )));
            }
            previous = Some(&table.largest);
            let user = |key: &[u8]| extract_user_key(key).to_vec();
            if low.as_ref().is_some_and(|l| user(&table.smallest) < *l)
                || high.as_ref().is_some_and(|h| user(&table.largest) > *h)
            {
                return Err(listing(format!(
                    "staged {} holds keys no input holds",
                    table.name
                )));
            }
            let Some(dir) = &staged else {
                return Err(listing("no staging directory".to_string()));
            };
            let file = dir
                .open_file(&table.name)
                .map_err(|e| table_refusal(format!("opening staged {}: {e}", table.name)))?;
            let before = file_id(&file)
                .map_err(|e| table_refusal(format!("fstat of staged {}: {e}", table.name)))?;
            if !before.regular || before.size != table.file_size {
                return Err(table_refusal(format!(
                    "staged {} is {} bytes{}, the worker said {}",
                    table.name,
                    before.size,
                    if before.regular {
                        ""
                    } else {
                        " and not a regular file"
                    },
                    table.file_size
                )));
            }
            let mut data = vec![0u8; before.size as usize];
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut data, 0)
                .map_err(|e| table_refusal(format!("reading staged {}: {e}", table.name)))?;
            check_staged(data, table, job)?;
            verified.push(VerifiedTable {
                path: staging_dir(db, session).join(&table.name),
                file,
                dev: before.dev,
                ino: before.ino,
                size: before.size,
                mtime_ns: before.mtime_ns,
            });
        }
        let numbers = io.adopt_outputs(&verified).map_err(|e| {
            let text = e.to_string();
            match text.find("refused by check adoption: ") {
                Some(at) => Attempt::Refused(Refusal::new(
                    Check::Adoption,
                    text[at + "refused by check adoption: ".len()..].to_string(),
                )),
                None => Attempt::Failed(format!("adopting: {text}")),
            }
        })?;
        Ok(done
            .tables
            .iter()
            .zip(numbers)
            .map(|(t, number)| OutputTable {
                number,
                file_size: t.file_size,
                smallest: t.smallest.clone(),
                largest: t.largest.clone(),
                entries: t.entries,
            })
            .collect())
    }
}

/// Why an attempt on a worker failed: a check the worker did not pass
/// (counted by check), or anything else (down, busy, refusing, silent).
#[derive(Debug)]
enum Attempt {
    Refused(Refusal),
    Failed(String),
}

impl From<String> for Attempt {
    fn from(reason: String) -> Attempt {
        Attempt::Failed(reason)
    }
}

impl From<&str> for Attempt {
    fn from(reason: &str) -> Attempt {
        Attempt::Failed(reason.to_string())
    }
}

impl From<Refusal> for Attempt {
    fn from(refusal: Refusal) -> Attempt {
        Attempt::Refused(refusal)
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attempt::Refused(refusal) => refusal.fmt(f),
            Attempt::Failed(reason) => f.write_str(reason),
        }
    }
}

/// Which worker takes the next job: among those not resting after failures
/// and with a free slot (a worker not yet asked counts one), one not yet
/// measured first, else the best median throughput. `Err`: why each
/// worker cannot, in order.
fn choose_worker(
    records: &[impl std::ops::Deref<Target = Record>],
    now: Instant,
) -> std::result::Result<usize, Vec<String>> {
    let mut best: Option<(usize, Option<f64>)> = None;
    let mut why = Vec::new();
    for (i, record) in records.iter().enumerate() {
        if record.rest_until.is_some_and(|until| until > now) {
            why.push(format!(
                "failed its last {} jobs",
                record.consecutive_failures
            ));
            continue;
        }
        if record.running >= record.capacity.unwrap_or(1) {
            why.push("is busy".to_string());
            continue;
        }
        let throughput = record.throughput();
        let better = match (best, throughput) {
            (None, _) => true,
            (Some((_, Some(_))), None) => true,
            (Some((_, Some(b))), Some(t)) => t > b,
            (Some((_, None)), _) => false,
        };
        if better {
            best = Some((i, throughput));
        }
    }
    best.map(|(i, _)| i).ok_or(why)
}

/// The smallest and largest user keys of the job's inputs.
fn input_bounds(job: &CompactionJob) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let files = job.inputs.iter().flat_map(|r| &r.files);
    let low = files
        .clone()
        .map(|f| extract_user_key(&f.smallest).to_vec())
        .min();
    let high = files.map(|f| extract_user_key(&f.largest).to_vec()).max();
    (low, high)
}

/// Queues one keys-only request, counting its bytes.
fn send(
    tx: &mpsc::UnboundedSender<KeysOnlyRequest>,
    wire: &mut Wire,
    request: keys_only_request::Request,
) -> std::result::Result<(), Attempt> {
    let message = KeysOnlyRequest {
        request: Some(request),
    };
    wire.sent(message.encoded_len());
    tx.send(message)
        .map_err(|_| Attempt::Failed("the call ended".to_string()))
}

/// A gRPC status in a line: the code and the worker's message.
fn describe(status: &tonic::Status) -> String {
    if status.message().is_empty() {
        format!("{:?}", status.code())
    } else {
        format!("{:?}: {}", status.code(), status.message())
    }
}

/// Protobuf bytes that crossed the wire, each way.
#[derive(Debug, Default)]
struct Wire {
    sent: WorkTally,
    received: WorkTally,
}

impl Wire {
    fn sent(&mut self, bytes: usize) {
        self.sent.count += 1;
        self.sent.bytes += bytes as u64;
    }
    fn received(&mut self, bytes: usize) {
        self.received.count += 1;
        self.received.bytes += bytes as u64;
    }
}

/// `stats.costs.work` kinds of the messages sent to and received from the
/// worker.
pub const WIRE_SENT: &str = "wire-sent";
/// See [`WIRE_SENT`].
pub const WIRE_RECEIVED: &str = "wire-received";

impl Executor for RemoteExecutor {
    fn name(&self) -> &'static str {
        Remote.name()
    }

    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        crate::job::require_bytewise(Remote.name(), io)?;
        let started = Instant::now();
        // A sub-job whose range falls between the input files, or an empty
        // range (lower at or above upper), has nothing to read or write; the
        // worker refuses such a job (a range with lower above upper is
        // malformed there), so it never leaves.
        if job.inputs.iter().all(|run| run.files.is_empty()) || job.range.is_empty() {
            return Ok(CompactionOutput {
                executor: Remote.to_string(),
                outputs: Vec::new(),
                stats: PhaseStats {
                    total_secs: started.elapsed().as_secs_f64(),
                    ..PhaseStats::default()
                },
                fallback: None,
            });
        }
        let no_dir = || failed("this database has no directory a worker can reach");
        let remote_io = io.remote().ok_or_else(no_dir)?;
        let db = remote_io.database_dir().ok_or_else(no_dir)?;
        let db_path = db
            .to_str()
            .ok_or_else(|| failed(format!("{} is not UTF-8", db.display())))?
            .to_string();
        let link = self.pick()?;
        let session = new_session();
        let staging = staging_dir(&db, &session);
        let request = CompactRequest {
            db_path,
            session: session.clone(),
            job: Some(job_to_proto(job)),
        };
        let mut wire = Wire::default();
        let done = self.runtime.block_on(async {
            self.hello(link).await?;
            match self.options.mode {
                RemoteMode::NearData => self.near_data(link, request, &mut wire).await,
                RemoteMode::KeysOnly => self.keys_only(link, request, job, &mut wire).await,
            }
        });
        let result = done.and_then(|done| {
            let outputs = self.adopt(job, &done, &db, &session, remote_io)?;
            Ok((done, outputs))
        });
        // Adopted tables were renamed out; whatever is left is not wanted.
        let _ = std::fs::remove_dir_all(&staging);
        match result {
            Ok((done, outputs)) => {
                let total_secs = started.elapsed().as_secs_f64();
                self.release(link, Ok(job.input_bytes() as f64 / total_secs.max(1e-9)));
                let remote = done.stats.unwrap_or_default();
                let mut stats = PhaseStats {
                    bytes_read: job.input_bytes(),
                    bytes_written: outputs.iter().map(|t| t.file_size).sum(),
                    entries_in: remote.entries_in,
                    entries_out: outputs.iter().map(|t| t.entries).sum(),
                    total_secs,
                    ..PhaseStats::default()
                };
                stats.costs.work.insert(WIRE_SENT.to_string(), wire.sent);
                stats
                    .costs
                    .work
                    .insert(WIRE_RECEIVED.to_string(), wire.received);
                stats
                    .stage_busy_secs
                    .insert(format!("worker ({})", done.executor), remote.total_secs);
                Ok(CompactionOutput {
                    executor: Remote.to_string(),
                    outputs,
                    stats,
                    fallback: None,
                })
            }
            Err(reason) => {
                self.release(
                    link,
                    Err(match &reason {
                        Attempt::Refused(refusal) => Some(refusal.check),
                        Attempt::Failed(_) => None,
                    }),
                );
                let mode = match self.options.mode {
                    RemoteMode::NearData => "near-data",
                    RemoteMode::KeysOnly => KEYS_ONLY,
                };
                Err(failed(format!(
                    "worker {} ({mode}): {reason}",
                    link.endpoint
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn record(running: usize, capacity: usize, throughputs: &[f64]) -> Box<Record> {
        Box::new(Record {
            running,
            capacity: Some(capacity),
            throughputs: throughputs.iter().copied().collect(),
            ..Record::default()
        })
    }

    #[test]
    fn the_fastest_free_worker_takes_the_job() {
        let now = Instant::now();
        let fast = record(0, 2, &[90.0, 100.0, 110.0]);
        let slow = record(0, 2, &[10.0, 20.0, 30.0]);
        assert_eq!(choose_worker(&[slow, fast], now), Ok(1));
        // Busy: the next best.
        let fast = record(2, 2, &[100.0]);
        let slow = record(0, 2, &[10.0]);
        assert_eq!(choose_worker(&[slow, fast], now), Ok(0));
        // Not yet measured goes first.
        let fast = record(0, 2, &[100.0]);
        let new = record(0, 2, &[]);
        assert_eq!(choose_worker(&[fast, new], now), Ok(1));
        // Resting after failures, or busy: none, with the reasons.
        let mut resting = record(0, 2, &[100.0]);
        resting.rest_until = Some(now + Duration::from_secs(5));
        resting.consecutive_failures = 3;
        let busy = record(1, 1, &[]);
        let why = choose_worker(&[resting, busy], now).unwrap_err();
        assert_eq!(why, vec!["failed its last 3 jobs", "is busy"]);
        // A worker never asked takes one job at a time.
        let mut unasked = record(1, 1, &[]);
        unasked.capacity = None;
        assert!(choose_worker(&[unasked], now).is_err());
    }
}
