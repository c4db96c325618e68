//! The `remote` executor inside the engine, with a worker in this process
//! on loopback: jobs run remotely and land byte for byte as `streaming`
//! writes them; a worker that is down, refuses the token, stalls, or
//! returns a corrupted table loses the job to a local executor, the
//! fallback is counted, no staged file is adopted, and every acknowledged
//! write is there and verifies. TLS with a CA the engine is given works.
//! (The worker's own checks are in `crates/shale-worker/tests/worker.rs`;
//! a worker in another process in `crates/shale-cli/tests/worker.rs`.)

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shale::options::RemoteToken;
use shale::shale_compact::job::{
    CompactionJob, CompactionOutput, Executor, JobFile, JobIo, OutputSink,
};
use shale::shale_compact::remote::RemoteMode;
use shale::shale_compact::StreamingExecutor;
use shale::{Options, ReadOptions, RemoteSettings, WriteOptions, DB};
use shale_worker::{LocalWorker, TlsIdentity, WorkerConfig};

fn options(workers: Vec<String>) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 32 << 10,
        block_size: 1024,
        compaction_executor: "remote".parse().unwrap(),
        remote: RemoteSettings {
            workers,
            timeout: Duration::from_secs(20),
            ..RemoteSettings::default()
        },
        max_subcompactions: 1,
        ..Options::default()
    }
}

/// `options(workers)` with its remote settings changed by `change`.
fn options_with(workers: Vec<String>, change: impl FnOnce(&mut RemoteSettings)) -> Options {
    let mut options = options(workers);
    change(&mut options.remote);
    options
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 97) as usize)).into_bytes()
}

const KEYS: u32 = 6000;

/// Writes every key (some twice, some deleted), compacts everything, and
/// checks the contents and the files; returns the scheduler's fallbacks.
fn write_compact_check(dir: &Path, options: Options) -> (u64, Option<String>, DB) {
    let db = DB::open(dir, options).unwrap();
    for round in 0..2 {
        for i in 0..KEYS {
            if round == 1 && i % 3 != 0 {
                continue;
            }
            db.put(
                &WriteOptions::default(),
                format!("key{i:06}").as_bytes(),
                &value(i + round),
            )
            .unwrap();
        }
    }
    for i in (0..KEYS).step_by(10) {
        db.delete(&WriteOptions::default(), format!("key{i:06}").as_bytes())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    for i in 0..KEYS {
        let got = db
            .get(&ReadOptions::default(), format!("key{i:06}").as_bytes())
            .unwrap();
        let expected = if i % 10 == 0 {
            None
        } else if i % 3 == 0 {
            Some(value(i + 1))
        } else {
            Some(value(i))
        };
        assert_eq!(got, expected, "key{i:06}");
    }
    let stats = db.scheduler_stats();
    (stats.fallbacks, stats.last_fallback, db)
}

/// The database's LOG, where every fallback is written with its reason.
fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("LOG")).unwrap()
}

fn staged_files(dir: &Path) -> usize {
    let Ok(sessions) = std::fs::read_dir(dir.join("staging")) else {
        return 0;
    };
    sessions
        .map(|s| std::fs::read_dir(s.unwrap().path()).unwrap().count())
        .sum()
}

fn verify(dir: &Path) {
    let report = shale::verify::verify_db(dir, &Options::default()).unwrap();
    assert!(report.to_string().starts_with("ok"), "{report}");
}

fn worker(root: &Path, executor: Arc<dyn Executor>) -> LocalWorker {
    LocalWorker::start(WorkerConfig::new(root, executor)).unwrap()
}

fn jobs_done_by(db: &DB, name: &str) -> u64 {
    db.scheduler_stats()
        .executors
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, r)| r.jobs)
}

/// Both modes; keys-only also with a window of two keys per run, so that
/// the engine asks for keys thousands of times per job.
#[test]
fn jobs_run_on_the_worker_in_both_modes() {
    let default_window = Options::default().remote.keys_window;
    for (mode, window) in [
        (RemoteMode::NearData, default_window),
        (RemoteMode::KeysOnly, default_window),
        (RemoteMode::KeysOnly, 2),
    ] {
        let root = tempfile::tempdir().unwrap();
        let worker = worker(root.path(), Arc::new(StreamingExecutor));
        let dir = root.path().join("db");
        let (fallbacks, why, db) = write_compact_check(
            &dir,
            options_with(vec![worker.url()], |remote| {
                remote.mode = mode;
                remote.keys_window = window;
            }),
        );
        assert_eq!(fallbacks, 0, "{mode}: {why:?}");
        assert!(jobs_done_by(&db, "remote") > 0, "{mode}");
        let executors = db.property("shale.executors").unwrap();
        assert!(executors.contains("wire-sent"), "{executors}");
        drop(db);
        assert_eq!(staged_files(&dir), 0);
        verify(&dir);
    }
}

#[test]
fn auto_gives_each_worker_a_thread_beside_the_local_ones() {
    let root = tempfile::tempdir().unwrap();
    let worker = worker(root.path(), Arc::new(StreamingExecutor));
    let dir = root.path().join("db");
    let (_, _, db) = write_compact_check(
        &dir,
        Options {
            compaction_executor: "auto".parse().unwrap(),
            ..options(vec![worker.url()])
        },
    );
    let threads = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
        .filter(|name| name.trim() == "shale-remote-0")
        .count();
    assert_eq!(threads, 1, "one compaction thread serves the worker");
    drop(db);
    verify(&dir);
}

#[test]
fn a_worker_that_is_down_costs_only_time() {
    let root = tempfile::tempdir().unwrap();
    // Nothing listens on port 1 of loopback.
    let dir = root.path().join("db");
    let (fallbacks, why, db) = write_compact_check(&dir, options(vec!["127.0.0.1:1".into()]));
    assert!(fallbacks > 0);
    assert!(why.unwrap().contains("127.0.0.1:1"));
    assert_eq!(jobs_done_by(&db, "remote"), 0);
    drop(db);
    verify(&dir);
}

#[test]
fn a_wrong_token_is_refused_and_the_job_runs_locally() {
    let root = tempfile::tempdir().unwrap();
    let mut config = WorkerConfig::new(root.path(), Arc::new(StreamingExecutor));
    config.token = Some("right".into());
    let worker = LocalWorker::start(config).unwrap();
    let dir = root.path().join("db");
    let (fallbacks, why, db) = write_compact_check(
        &dir,
        options_with(vec![worker.url()], |remote| {
            remote.token = Some(RemoteToken("wrong".into()));
        }),
    );
    assert!(fallbacks > 0, "{why:?}");
    assert!(log(&dir).contains("Unauthenticated"), "{}", log(&dir));
    assert_eq!(jobs_done_by(&db, "remote"), 0);
    drop(db);
    verify(&dir);

    // The right token gets in.
    let dir = root.path().join("db2");
    let (fallbacks, why, _db) = write_compact_check(
        &dir,
        options_with(vec![worker.url()], |remote| {
            remote.token = Some(RemoteToken("right".into()));
        }),
    );
    assert_eq!(fallbacks, 0, "{why:?}");
}

/// Runs jobs with `streaming` after a pause, sending no progress.
#[derive(Debug)]
struct Stalling(Duration);

impl Executor for Stalling {
    fn name(&self) -> &'static str {
        "stalling"
    }
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> shale::Result<CompactionOutput> {
        std::thread::sleep(self.0);
        StreamingExecutor.run(job, io)
    }
}

#[test]
fn a_stalled_worker_loses_its_job_after_the_timeout() {
    let root = tempfile::tempdir().unwrap();
    let mut config = WorkerConfig::new(root.path(), Arc::new(Stalling(Duration::from_secs(2))));
    config.progress_interval = Duration::from_secs(60);
    config.max_jobs = 64;
    let worker = LocalWorker::start(config).unwrap();
    let dir = root.path().join("db");
    let (fallbacks, why, db) = write_compact_check(
        &dir,
        options_with(vec![worker.url()], |remote| {
            remote.timeout = Duration::from_millis(300);
        }),
    );
    assert!(fallbacks > 0, "{why:?}");
    assert!(log(&dir).contains("no progress for 0.3 s"), "{}", log(&dir));
    assert_eq!(jobs_done_by(&db, "remote"), 0);
    drop(db);
    // The worker finishes its stalled jobs later; the engine cleans its
    // staging at open and never adopts them.
    std::thread::sleep(Duration::from_secs(3));
    let db = DB::open(
        &dir,
        Options {
            compaction_executor: "streaming".parse().unwrap(),
            ..options(vec![])
        },
    )
    .unwrap();
    drop(db);
    assert_eq!(staged_files(&dir), 0);
    verify(&dir);
}

/// Writes each table through `streaming`, then flips a byte of it: a
/// worker that returns a damaged table.
#[derive(Debug)]
struct Corrupting;

struct FlipIo<'a>(&'a dyn JobIo);

struct FlipSink {
    inner: Box<dyn OutputSink>,
    written: usize,
}

impl std::io::Write for FlipSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut owned = buf.to_vec();
        if self.written <= 20 && self.written + owned.len() > 20 {
            owned[20 - self.written] ^= 0x40;
        }
        self.inner.write_all(&owned)?;
        self.written += owned.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl OutputSink for FlipSink {
    fn finish(self: Box<Self>) -> shale::Result<()> {
        self.inner.finish()
    }
}

impl JobIo for FlipIo<'_> {
    fn open_input(
        &self,
        file: &JobFile,
    ) -> shale::Result<Arc<dyn shale::format::format::RandomAccess>> {
        self.0.open_input(file)
    }
    fn create_output(&self) -> shale::Result<(u64, Box<dyn OutputSink>)> {
        let (number, inner) = self.0.create_output()?;
        Ok((number, Box::new(FlipSink { inner, written: 0 })))
    }
    fn discard_output(&self, number: u64) -> shale::Result<()> {
        self.0.discard_output(number)
    }
}

impl Executor for Corrupting {
    fn name(&self) -> &'static str {
        "corrupting"
    }
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> shale::Result<CompactionOutput> {
        StreamingExecutor.run(job, &FlipIo(io))
    }
}

#[test]
fn a_corrupted_output_is_caught_and_never_adopted() {
    let root = tempfile::tempdir().unwrap();
    let worker = worker(root.path(), Arc::new(Corrupting));
    let dir = root.path().join("db");
    let (fallbacks, why, db) = write_compact_check(&dir, options(vec![worker.url()]));
    assert!(fallbacks > 0, "{why:?}");
    let log = log(&dir);
    assert!(log.contains("staged") && log.contains("checksum"), "{log}");
    assert_eq!(jobs_done_by(&db, "remote"), 0);
    drop(db);
    assert_eq!(staged_files(&dir), 0);
    verify(&dir);
}

#[test]
fn tls_with_the_workers_ca() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let tls = TlsIdentity {
        cert_pem: certified.cert.pem().into_bytes(),
        key_pem: certified.signing_key.serialize_pem().into_bytes(),
        client_ca_pem: None,
    };
    let root = tempfile::tempdir().unwrap();
    let ca = root.path().join("ca.pem");
    std::fs::write(&ca, certified.cert.pem()).unwrap();
    let worker = LocalWorker::start_with_tls(
        WorkerConfig::new(root.path(), Arc::new(StreamingExecutor)),
        Some(tls),
    )
    .unwrap();
    let url = format!("https://localhost:{}", worker.address().port());
    let dir = root.path().join("db");
    let (fallbacks, why, db) = write_compact_check(
        &dir,
        options_with(vec![url.clone()], |remote| {
            remote.tls_ca = Some(ca);
        }),
    );
    assert_eq!(fallbacks, 0, "{why:?}");
    assert!(jobs_done_by(&db, "remote") > 0);
    drop(db);

    // Without the CA the worker's certificate is not trusted.
    let dir = root.path().join("db2");
    let (fallbacks, _, db) = write_compact_check(&dir, options(vec![url]));
    assert!(fallbacks > 0);
    assert_eq!(jobs_done_by(&db, "remote"), 0);
}

#[test]
fn mutual_tls_takes_only_engines_with_a_client_certificate() {
    let server = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let client = rcgen::generate_simple_self_signed(vec!["engine".to_string()]).unwrap();
    let root = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| {
        let path = root.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca = write("ca.pem", server.cert.pem());
    let cert = write("client.pem", client.cert.pem());
    let key = write("client.key", client.signing_key.serialize_pem());
    let worker = LocalWorker::start_with_tls(
        WorkerConfig::new(root.path(), Arc::new(StreamingExecutor)),
        Some(TlsIdentity {
            cert_pem: server.cert.pem().into_bytes(),
            key_pem: server.signing_key.serialize_pem().into_bytes(),
            client_ca_pem: Some(client.cert.pem().into_bytes()),
        }),
    )
    .unwrap();
    let url = format!("https://localhost:{}", worker.address().port());
    let (fallbacks, why, db) = write_compact_check(
        &root.path().join("db"),
        options_with(vec![url.clone()], |remote| {
            remote.tls_ca = Some(ca.clone());
            remote.tls_identity = Some((cert, key));
        }),
    );
    assert_eq!(fallbacks, 0, "{why:?}");
    assert!(jobs_done_by(&db, "remote") > 0);
    drop(db);
    // Without a client certificate the worker does not talk to it.
    let (fallbacks, _, db) = write_compact_check(
        &root.path().join("db2"),
        options_with(vec![url], |remote| {
            remote.tls_ca = Some(ca);
        }),
    );
    assert!(fallbacks > 0);
    assert_eq!(jobs_done_by(&db, "remote"), 0);
}

#[test]
fn bad_remote_options_are_refused_at_open() {
    let root = tempfile::tempdir().unwrap();
    let open = |options: Options| {
        DB::open(root.path().join("db"), options)
            .unwrap_err()
            .to_string()
    };
    assert!(open(options(vec![])).contains("needs remote_workers"));
    assert!(open(options(vec!["ftp://x:1".into()])).contains("http"));
    assert!(open(options(vec![" ".into()])).contains("empty"));
    assert!(
        open(options_with(vec!["https://localhost:1".into()], |remote| {
            remote.tls_ca = Some(root.path().join("missing.pem"));
        }))
        .contains("missing.pem")
    );
}

// ---------------------------------------------------------------------
// Lying workers: a real worker wrapped in a service that lies about what
// it is, how often it reports, or what it staged. Two per check the engine
// makes (version and protocol of Hello, the progress promise, the filter
// block): the engine refuses, names the check, runs the job locally, and
// loses nothing.

use std::pin::Pin;

use shale_worker::proto::compaction_worker_server::{CompactionWorker, CompactionWorkerServer};
use shale_worker::proto::{
    compact_event, CompactEvent, CompactRequest, HelloReply, HelloRequest, KeysOnlyEvent,
    KeysOnlyRequest,
};
use shale_worker::Worker;
use tokio_stream::StreamExt;

type Events<E> = Pin<Box<dyn tokio_stream::Stream<Item = Result<E, tonic::Status>> + Send>>;

/// What a lying worker lies about.
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// Claims another ShaleDB version.
    Version,
    /// Claims another protocol.
    Protocol,
    /// Promises no progress interval at all.
    NoInterval,
    /// Promises progress every 50 ms and sends none.
    SilentProgress,
    /// Tells the truth (the executor may still lie).
    None,
}

#[derive(Debug)]
struct Liar {
    inner: Worker,
    lie: Lie,
}

#[tonic::async_trait]
impl CompactionWorker for Liar {
    async fn hello(
        &self,
        request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, tonic::Status> {
        let mut reply = self.inner.hello(request).await?.into_inner();
        match self.lie {
            Lie::Version => reply.version = "0.0.1-liar".into(),
            Lie::Protocol => reply.protocol += 1,
            Lie::NoInterval => reply.progress_interval_ms = 0,
            Lie::SilentProgress => reply.progress_interval_ms = 50,
            Lie::None => {}
        }
        Ok(tonic::Response::new(reply))
    }

    type CompactStream = Events<CompactEvent>;

    async fn compact(
        &self,
        request: tonic::Request<CompactRequest>,
    ) -> Result<tonic::Response<Self::CompactStream>, tonic::Status> {
        let stream = self.inner.compact(request).await?.into_inner();
        let silent = matches!(self.lie, Lie::SilentProgress);
        let stream = stream.filter(move |event| {
            !(silent
                && matches!(
                    event,
                    Ok(CompactEvent {
                        event: Some(compact_event::Event::Progress(_))
                    })
                ))
        });
        Ok(tonic::Response::new(Box::pin(stream)))
    }

    type CompactKeysOnlyStream = Events<KeysOnlyEvent>;

    async fn compact_keys_only(
        &self,
        request: tonic::Request<tonic::Streaming<KeysOnlyRequest>>,
    ) -> Result<tonic::Response<Self::CompactKeysOnlyStream>, tonic::Status> {
        let stream = self.inner.compact_keys_only(request).await?.into_inner();
        Ok(tonic::Response::new(Box::pin(stream)))
    }
}

/// A lying worker on loopback, serving until the test process ends.
fn lying_worker(root: &Path, executor: Arc<dyn Executor>, lie: Lie) -> String {
    let mut config = WorkerConfig::new(root, executor);
    config.max_jobs = 64;
    let inner = Worker::new(config).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let served = tonic::transport::Server::builder()
            .add_service(CompactionWorkerServer::new(Liar { inner, lie }))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
        let _ = runtime.block_on(served);
    });
    url
}

/// Runs the workload against a lying worker and checks that the engine
/// refused it by `check`, ran every job elsewhere, and lost nothing.
fn refused_by(lie: Lie, executor: Arc<dyn Executor>, check: &str, timeout: Duration) {
    let root = tempfile::tempdir().unwrap();
    let url = lying_worker(root.path(), executor, lie);
    let dir = root.path().join("db");
    let (fallbacks, why, db) = write_compact_check(
        &dir,
        options_with(vec![url], |remote| {
            remote.timeout = timeout;
        }),
    );
    assert!(fallbacks > 0, "{lie:?}: {why:?}");
    // The LOG names the check (the last fallback's reason may be the
    // worker resting after the refusal).
    let log = log(&dir);
    assert!(
        log.contains(&format!("refused by check {check}")),
        "{lie:?}: {log}"
    );
    assert_eq!(jobs_done_by(&db, "remote"), 0, "{lie:?}");
    // And counts it, per worker and check.
    let executors = db.property("shale.executors").unwrap();
    let worker = executors
        .lines()
        .find(|line| line.starts_with("worker "))
        .unwrap_or_else(|| panic!("{lie:?}: no worker line in {executors}"));
    let counted = worker
        .split("refused: ")
        .nth(1)
        .and_then(|list| {
            list.split(", ")
                .find_map(|kv| kv.strip_prefix(&format!("{check}=")))
        })
        .and_then(|n| n.parse::<u64>().ok());
    assert!(counted.is_some_and(|n| n > 0), "{lie:?}: {worker}");
    drop(db);
    // Whatever the liar staged was never adopted, and is gone.
    let db = DB::open(
        &dir,
        Options {
            compaction_executor: "streaming".parse().unwrap(),
            ..options(vec![])
        },
    )
    .unwrap();
    drop(db);
    assert_eq!(staged_files(&dir), 0);
    verify(&dir);
}

#[test]
fn a_worker_that_claims_another_version_is_refused() {
    refused_by(
        Lie::Version,
        Arc::new(StreamingExecutor),
        "version",
        Duration::from_secs(20),
    );
}

#[test]
fn a_worker_that_claims_another_protocol_is_refused() {
    refused_by(
        Lie::Protocol,
        Arc::new(StreamingExecutor),
        "protocol",
        Duration::from_secs(20),
    );
}

#[test]
fn a_worker_that_promises_no_progress_is_refused() {
    refused_by(
        Lie::NoInterval,
        Arc::new(StreamingExecutor),
        "progress-interval",
        Duration::from_secs(20),
    );
}

#[test]
fn a_worker_that_breaks_its_progress_promise_loses_the_job() {
    // It promises 50 ms (the engine allows 1 s of silence) and stalls 2 s
    // without a word; the engine's own timeout (20 s) is far off.
    refused_by(
        Lie::SilentProgress,
        Arc::new(Stalling(Duration::from_secs(2))),
        "progress-gap",
        Duration::from_secs(20),
    );
}

/// Writes each table through `streaming` with another table's settings or
/// bytes than the job asks: a worker that lies about its filter.
#[derive(Debug)]
enum FilterLiar {
    /// Writes no filter block.
    Dropped,
    /// Clears the bits of the first filter and fixes the block's CRC, so
    /// the table reads back intact and its filter rules out keys it holds.
    Cleared,
}

/// Collects a table's bytes, rewrites them at `finish`, writes them out.
struct RewriteSink {
    inner: Box<dyn OutputSink>,
    bytes: Vec<u8>,
}

impl std::io::Write for RewriteSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Decodes the varint64 at the start of `bytes`.
fn varint(bytes: &[u8]) -> u64 {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            break;
        }
    }
    value
}

/// Clears the first filter's bits in the table `bytes` and recomputes the
/// filter block's CRC. The filter block (`[filters][offsets][array offset:
/// u32][base lg: u8]`, then its trailer: type and masked CRC) follows the
/// last data block and ends where the metaindex block begins (the handle
/// that opens the 48-byte footer).
fn clear_first_filter(bytes: &mut [u8]) {
    use shale::format::table::{ReadTableOptions, Table};
    let table = Table::open(
        Arc::new(bytes.to_vec()),
        bytes.len() as u64,
        "staged",
        ReadTableOptions::internal_scan(),
    )
    .unwrap();
    let last = *table.block_handles().unwrap().last().unwrap();
    let start = (last.offset + last.size) as usize + 5;
    let end = varint(&bytes[bytes.len() - 48..]) as usize - 5;
    let u32_at = |bytes: &[u8], at: usize| {
        u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize
    };
    let array = start + u32_at(bytes, end - 5);
    let (first, next) = (
        start + u32_at(bytes, array),
        start + u32_at(bytes, array + 4),
    );
    // A filter's last byte is its probe count; the bits come before it.
    assert!(next > first + 1, "the first filter holds bits");
    for byte in &mut bytes[first..next - 1] {
        *byte = 0;
    }
    let crc = shale::format::crc::mask(shale::format::crc::extend(
        shale::format::crc::value(&bytes[start..end]),
        &bytes[end..end + 1],
    ));
    bytes[end + 1..end + 5].copy_from_slice(&crc.to_le_bytes());
}

impl OutputSink for RewriteSink {
    fn finish(mut self: Box<Self>) -> shale::Result<()> {
        clear_first_filter(&mut self.bytes);
        self.inner
            .write_all(&self.bytes)
            .map_err(|e| shale::Error::io("rewrite", e))?;
        self.inner.finish()
    }
}

struct RewriteIo<'a>(&'a dyn JobIo);

impl JobIo for RewriteIo<'_> {
    fn open_input(
        &self,
        file: &JobFile,
    ) -> shale::Result<Arc<dyn shale::format::format::RandomAccess>> {
        self.0.open_input(file)
    }
    fn create_output(&self) -> shale::Result<(u64, Box<dyn OutputSink>)> {
        let (number, inner) = self.0.create_output()?;
        Ok((
            number,
            Box::new(RewriteSink {
                inner,
                bytes: Vec::new(),
            }),
        ))
    }
    fn discard_output(&self, number: u64) -> shale::Result<()> {
        self.0.discard_output(number)
    }
}

impl Executor for FilterLiar {
    fn name(&self) -> &'static str {
        "filter-liar"
    }
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> shale::Result<CompactionOutput> {
        match self {
            FilterLiar::Dropped => {
                let mut job = job.clone();
                job.table.bloom_bits_per_key = None;
                StreamingExecutor.run(&job, io)
            }
            FilterLiar::Cleared => StreamingExecutor.run(job, &RewriteIo(io)),
        }
    }
}

#[test]
fn a_worker_that_drops_the_filter_is_refused() {
    refused_by(
        Lie::None,
        Arc::new(FilterLiar::Dropped),
        "filter",
        Duration::from_secs(20),
    );
}

#[test]
fn a_worker_that_clears_filter_bits_is_refused() {
    refused_by(
        Lie::None,
        Arc::new(FilterLiar::Cleared),
        "filter",
        Duration::from_secs(20),
    );
}

#[test]
fn destroy_removes_what_workers_staged() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    drop(DB::open(&dir, options(vec!["127.0.0.1:1".into()])).unwrap());
    let session = dir.join("staging/0123456789abcdef0123456789abcdef");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::write(session.join("000001.ldb"), b"left by a worker").unwrap();
    shale::destroy(&dir, &Options::default()).unwrap();
    assert!(
        !dir.exists(),
        "{:?}",
        std::fs::read_dir(&dir).map(|d| d.count())
    );
}
