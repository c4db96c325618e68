//! `shale worker`: a compaction worker serving gRPC (the protocol is
//! `crates/shale-compact/proto/worker.proto`). It stands beside the
//! storage: the databases whose jobs it runs must lie under `--root`, and
//! it touches nothing else. It prints the address it listens on, keeps a
//! LOG, serves the standard gRPC health service and (with
//! `--metrics_listen`) Prometheus metrics, and refuses to listen beyond
//! loopback without a token unless `--insecure`. Every flag may also come
//! from an environment variable, `SHALE_WORKER_` and the flag's name in
//! capitals (`SHALE_WORKER_TOKEN_FILE`); a flag given wins. The LOG goes to
//! the file and stderr (`--log_to`). SIGHUP reloads the token file (one
//! that fails to read or parse leaves the tokens in use). SIGTERM or SIGINT drains
//! it: new calls get UNAVAILABLE and health says NOT_SERVING, the running
//! jobs finish and their engines adopt the outputs (at most
//! `--drain_timeout_s`), then what is left is cancelled and removed, and
//! the worker exits 0. A second SIGTERM or SIGINT exits at once (status
//! 128 + the signal's number), cancelling the running jobs and removing
//! what they staged.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::Args;
use shale::info_log::InfoLog;
use shale::options::ExecutorChoice;
use shale::shale_compact::ExecutorKind;
use shale::Options;
use shale_worker::{
    parse_token_file, serve, ScopedToken, StagingLimits, StopRequest, TlsIdentity, Worker,
    WorkerConfig,
};

use crate::error::{CliError, CliResult};
use crate::size::{parse_size, parse_size_usize, size_help};

/// Arguments of `shale worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Address to listen on, HOST:PORT (port 0: any free port; the one
    /// taken is printed).
    #[arg(long, value_name = "ADDR", env = "SHALE_WORKER_LISTEN")]
    listen: String,
    /// The only directory tree the worker reads and writes; the databases
    /// it compacts must lie under it.
    #[arg(long, value_name = "DIR", env = "SHALE_WORKER_ROOT")]
    root: PathBuf,
    /// File of tokens: one per line, `TOKEN [PATTERN...]`, the patterns
    /// naming the databases (relative to --root, `*` within a component,
    /// `**` for any depth) the token may compact; a token without patterns
    /// may compact any database under the root (a one-line file with just
    /// a token is that). Every call must carry one. Without it the worker
    /// listens on loopback only, unless --insecure.
    #[arg(
        long = "token_file",
        value_name = "FILE",
        env = "SHALE_WORKER_TOKEN_FILE"
    )]
    token_file: Option<PathBuf>,
    /// Listen beyond loopback without a token (anyone who reaches the
    /// worker may compact every database under the root).
    #[arg(
        long,
        env = "SHALE_WORKER_INSECURE",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    insecure: bool,
    /// Serve Prometheus metrics at /metrics and a health check at /healthz
    /// (200 while serving, 503 while draining) over plain HTTP on
    /// HOST:PORT.
    #[arg(
        long = "metrics_listen",
        value_name = "ADDR",
        env = "SHALE_WORKER_METRICS_LISTEN"
    )]
    metrics_listen: Option<String>,
    /// Longest a job may run, in seconds (default 3600).
    #[arg(
        long = "job_timeout_s",
        value_name = "SECONDS",
        env = "SHALE_WORKER_JOB_TIMEOUT_S"
    )]
    job_timeout_s: Option<u64>,
    /// Longest a keys-only stream may stay silent while the worker waits
    /// for it (the job, credit, the order), or leave keys unread, in
    /// seconds (default 60); then its job is cancelled and its slot freed.
    #[arg(
        long = "stream_idle_timeout_s",
        value_name = "SECONDS",
        env = "SHALE_WORKER_STREAM_IDLE_TIMEOUT_S"
    )]
    stream_idle_timeout_s: Option<u64>,
    /// How long staged outputs wait for the engine to adopt them after the
    /// job is done, in seconds (default 300); then they are removed. At
    /// start, sessions older than this under the root are removed too.
    #[arg(
        long = "staging_timeout_s",
        value_name = "SECONDS",
        env = "SHALE_WORKER_STAGING_TIMEOUT_S"
    )]
    staging_timeout_s: Option<u64>,
    /// How long SIGTERM lets running jobs finish and their outputs be
    /// adopted before cancelling what is left, in seconds (default 30; 0:
    /// cancel at once). New calls are refused meanwhile.
    #[arg(
        long = "drain_timeout_s",
        value_name = "SECONDS",
        env = "SHALE_WORKER_DRAIN_TIMEOUT_S"
    )]
    drain_timeout_s: Option<u64>,
    #[arg(
        help = size_help!(
            "Staged bytes one database may hold (default 64GiB); more are refused \
             with RESOURCE_EXHAUSTED."
        ),
        long = "max_staged_bytes",
        value_name = "SIZE",
        value_parser = parse_size,
        env = "SHALE_WORKER_MAX_STAGED_BYTES"
    )]
    max_staged_bytes: Option<u64>,
    /// Staged sessions one database may hold (default 64).
    #[arg(
        long = "max_staged_sessions",
        value_name = "N",
        env = "SHALE_WORKER_MAX_STAGED_SESSIONS"
    )]
    max_staged_sessions: Option<usize>,
    /// Executor the jobs run with: auto (opencl on a GPU, else parallel),
    /// parallel, streaming or opencl.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "auto",
        env = "SHALE_WORKER_EXECUTOR"
    )]
    executor: String,
    /// Threads of the parallel executor (0: one per core).
    #[arg(
        long = "compaction_threads",
        value_name = "N",
        env = "SHALE_WORKER_COMPACTION_THREADS"
    )]
    compaction_threads: Option<usize>,
    /// Jobs run at once; more are refused (the engine runs them locally).
    /// Default: one per core.
    #[arg(long = "max_jobs", value_name = "N", env = "SHALE_WORKER_MAX_JOBS")]
    max_jobs: Option<usize>,
    #[arg(
        help = size_help!("Largest job taken, in bytes of input tables (default 4GiB)."),
        long = "max_job_bytes",
        value_name = "SIZE",
        value_parser = parse_size,
        env = "SHALE_WORKER_MAX_JOB_BYTES"
    )]
    max_job_bytes: Option<u64>,
    #[arg(
        help = size_help!("Largest gRPC message accepted or sent (default 64MiB; at least 4KiB)."),
        long = "max_message_bytes",
        value_name = "SIZE",
        value_parser = parse_size_usize,
        env = "SHALE_WORKER_MAX_MESSAGE_BYTES"
    )]
    max_message_bytes: Option<usize>,
    /// How often a running job reports progress, in milliseconds (default
    /// 1000).
    #[arg(
        long = "progress_interval_ms",
        value_name = "MS",
        env = "SHALE_WORKER_PROGRESS_INTERVAL_MS"
    )]
    progress_interval_ms: Option<u64>,
    /// TLS certificate chain (PEM); with --tls_key, the worker speaks TLS.
    #[arg(
        long = "tls_cert",
        value_name = "FILE",
        requires = "tls_key",
        env = "SHALE_WORKER_TLS_CERT"
    )]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(
        long = "tls_key",
        value_name = "FILE",
        requires = "tls_cert",
        env = "SHALE_WORKER_TLS_KEY"
    )]
    tls_key: Option<PathBuf>,
    /// CA (PEM) client certificates must be signed by: mutual TLS.
    #[arg(
        long = "tls_client_ca",
        value_name = "FILE",
        requires = "tls_cert",
        env = "SHALE_WORKER_TLS_CLIENT_CA"
    )]
    tls_client_ca: Option<PathBuf>,
    /// The LOG file (default: ROOT/shale-worker.LOG).
    #[arg(long, value_name = "FILE", env = "SHALE_WORKER_LOG")]
    log: Option<PathBuf>,
    /// Where the LOG lines go: the LOG file, stderr (for journald or
    /// `kubectl logs`), or both.
    #[arg(
        long = "log_to",
        value_name = "WHERE",
        value_enum,
        default_value_t = LogTo::Both,
        env = "SHALE_WORKER_LOG_TO"
    )]
    log_to: LogTo,
}

/// Where `shale worker` writes its LOG lines (`--log_to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogTo {
    /// The LOG file only (`--log`).
    File,
    /// Standard error only: no file is written.
    Stderr,
    /// The LOG file and standard error. The default: a service manager
    /// collects stderr (journald, `kubectl logs`), while the file under the
    /// root outlives the process and its container.
    Both,
}

/// The LOG's writer: each line goes whole to the file, stderr or both.
/// [`InfoLog`] flushes after each line, so a line is written to each with
/// one call and lines of other writers to stderr cannot split it.
struct LogSink {
    file: Option<std::fs::File>,
    stderr: bool,
    line: Vec<u8>,
}

impl Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let line = std::mem::take(&mut self.line);
        // A closed stderr must not stop the file's lines, nor the reverse.
        let to_stderr = if self.stderr {
            std::io::stderr().lock().write_all(&line)
        } else {
            Ok(())
        };
        let to_file = match &mut self.file {
            Some(file) => file.write_all(&line),
            None => Ok(()),
        };
        to_file.and(to_stderr)
    }
}

fn usage(message: impl Into<String>) -> CliError {
    CliError::Usage(message.into())
}

/// What the second SIGTERM or SIGINT does before the process exits: set
/// once the worker exists.
type Abandon = Arc<OnceLock<Box<dyn Fn(i32) + Send + Sync>>>;

/// What SIGHUP does (reload the token file): set once the worker exists;
/// a SIGHUP before that is ignored.
type Reload = Arc<OnceLock<Box<dyn Fn() + Send + Sync>>>;

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread and in every thread
/// started after it, and waits for them with `sigwait` on a thread of its
/// own: SIGHUP runs the reload action, if set, each time; the first SIGTERM
/// or SIGINT fires the returned receiver (drain), the second runs the
/// abandon action, if set, and exits the process at once with status
/// 128 + the signal's number. Blocking rather than a handler: the OpenCL
/// runtime (PoCL) installs handlers of its own that end the process, and a
/// blocked signal reaches no handler at all.
/// Must run before any other thread is started.
fn wait_for_signals() -> std::io::Result<(tokio::sync::oneshot::Receiver<()>, Abandon, Reload)> {
    // SAFETY: a zeroed sigset_t is valid storage; sigemptyset initialises
    // it and sigaddset only adds valid signal numbers to it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
    }
    // SAFETY: `set` is initialised; the old mask is not asked for.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let abandon: Abandon = Arc::new(OnceLock::new());
    let reload: Reload = Arc::new(OnceLock::new());
    let (on_second, on_hangup) = (abandon.clone(), reload.clone());
    std::thread::Builder::new()
        .name("shale-signals".into())
        .spawn(move || {
            let mut drain = Some(tx);
            loop {
                let mut signal = 0;
                // SAFETY: `set` is initialised; sigwait writes `signal`.
                if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                    continue;
                }
                if signal == libc::SIGHUP {
                    if let Some(reload) = on_hangup.get() {
                        reload();
                    }
                    continue;
                }
                if let Some(tx) = drain.take() {
                    let _ = tx.send(());
                    continue;
                }
                if let Some(abandon) = on_second.get() {
                    abandon(signal);
                }
                std::process::exit(128 + signal);
            }
        })?;
    Ok((rx, abandon, reload))
}

/// Reads and parses the token file.
fn read_tokens(path: &std::path::Path) -> Result<Vec<ScopedToken>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse_token_file(&text)
}

/// How the LOG and stdout describe a list of tokens.
fn describe_tokens(tokens: &[ScopedToken]) -> String {
    let scoped = tokens.iter().any(|t| !t.patterns.is_empty());
    match (tokens.len(), scoped) {
        (0, _) => "no token".to_string(),
        (n, true) => format!("{n} tokens, scoped"),
        (n, false) => format!("{n} token{}", if n == 1 { "" } else { "s" }),
    }
}

/// Serves until SIGTERM or SIGINT; SIGHUP reloads the token file.
pub fn run(args: &WorkerArgs) -> CliResult {
    if args.executor.parse() == Ok(ExecutorChoice::Forced(ExecutorKind::Remote)) {
        return Err(usage("a worker cannot run its jobs on the remote executor"));
    }
    if !args.root.is_dir() {
        return Err(usage(format!(
            "--root {}: not a directory",
            args.root.display()
        )));
    }
    if args.max_jobs == Some(0) {
        return Err(usage("--max_jobs must be at least 1"));
    }
    if args.max_message_bytes.is_some_and(|n| n < 4096) {
        return Err(usage("--max_message_bytes must be at least 4096"));
    }
    if args.progress_interval_ms == Some(0) {
        return Err(usage("--progress_interval_ms must be at least 1"));
    }
    for (flag, value) in [
        ("--job_timeout_s", args.job_timeout_s),
        ("--stream_idle_timeout_s", args.stream_idle_timeout_s),
        ("--staging_timeout_s", args.staging_timeout_s),
    ] {
        if value == Some(0) {
            return Err(usage(format!("{flag} must be at least 1")));
        }
    }
    let tokens = match &args.token_file {
        Some(path) => {
            read_tokens(path).map_err(|e| usage(format!("token file {}: {e}", path.display())))?
        }
        None => Vec::new(),
    };
    let read =
        |path: &PathBuf| std::fs::read(path).map_err(|e| usage(format!("{}: {e}", path.display())));
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsIdentity {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            client_ca_pem: args.tls_client_ca.as_ref().map(read).transpose()?,
        }),
        _ => None,
    };
    // Before the executor and the runtime start their threads.
    let (terminated, abandon, reload) = wait_for_signals()?;
    let mut options = Options::default();
    if let Some(n) = args.compaction_threads {
        options.compaction_threads = n;
    }
    // `auto` is the engine's: the device when it is a GPU (with `parallel`
    // and `streaming` behind it), else `parallel`.
    let executor = shale::db::executor_by_name(&args.executor, &options)?;
    let log_path = args
        .log
        .clone()
        .unwrap_or_else(|| args.root.join("shale-worker.LOG"));
    let log_file = match args.log_to {
        LogTo::Stderr => None,
        LogTo::File | LogTo::Both => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(|e| CliError::Failed(format!("LOG {}: {e}", log_path.display())))?,
        ),
    };
    let info_log = InfoLog::from_writer(Box::new(LogSink {
        file: log_file,
        stderr: args.log_to != LogTo::File,
        line: Vec::new(),
    }));

    let mut config = WorkerConfig::new(&args.root, executor);
    let token_count = tokens.len();
    let tokens_described = describe_tokens(&tokens);
    config.scoped_tokens = tokens;
    if let Some(s) = args.job_timeout_s {
        config.job_timeout = Duration::from_secs(s);
    }
    if let Some(s) = args.stream_idle_timeout_s {
        config.stream_idle_timeout = Duration::from_secs(s);
    }
    let mut staging = StagingLimits::default();
    if let Some(s) = args.staging_timeout_s {
        staging.adopt_timeout = Duration::from_secs(s);
    }
    if let Some(n) = args.max_staged_bytes {
        staging.max_bytes_per_db = n;
    }
    if let Some(n) = args.max_staged_sessions {
        staging.max_sessions_per_db = n;
    }
    config.staging = staging;
    if let Some(s) = args.drain_timeout_s {
        config.drain_timeout = Duration::from_secs(s);
    }
    if let Some(n) = args.max_jobs {
        config.max_jobs = n;
    }
    if let Some(n) = args.max_job_bytes {
        config.max_job_bytes = n;
    }
    if let Some(n) = args.max_message_bytes {
        config.max_message_bytes = n;
    }
    if let Some(ms) = args.progress_interval_ms {
        config.progress_interval = Duration::from_millis(ms);
    }
    let logger = info_log.clone();
    config.log = Arc::new(move |line: &str| logger.log(format_args!("{line}")));
    let description = format!(
        "root {}, executor {}, up to {} jobs, {}, {}",
        args.root.display(),
        config.executor.name(),
        config.max_jobs,
        tokens_described,
        if tls.is_some() { "TLS" } else { "plain HTTP/2" }
    );
    let worker = Worker::new(config).map_err(|e| usage(e.to_string()))?;
    {
        let (worker, info_log) = (worker.clone(), info_log.clone());
        let _ = abandon.set(Box::new(move |signal| {
            let removed = worker.abandon();
            info_log.log(format_args!(
                "Second signal ({signal}) during the drain: running jobs cancelled, {removed} staged sessions removed; exiting now"
            ));
        }));
    }
    {
        let (worker, info_log) = (worker.clone(), info_log.clone());
        let token_file = args.token_file.clone();
        let _ = reload.set(Box::new(move || {
            let Some(path) = &token_file else {
                info_log.log(format_args!(
                    "SIGHUP: no --token_file to reload; the worker goes on without tokens"
                ));
                return;
            };
            let outcome = read_tokens(path).and_then(|tokens| {
                let described = describe_tokens(&tokens);
                worker.replace_tokens(tokens).map(|_| described)
            });
            match outcome {
                Ok(described) => info_log.log(format_args!(
                    "SIGHUP: token file {} reloaded: {described}; calls from now on are checked against them",
                    path.display()
                )),
                Err(e) => info_log.log(format_args!(
                    "SIGHUP: token file {} not reloaded ({e}); the tokens in use stay",
                    path.display()
                )),
            }
        }));
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("shale-worker")
        .enable_all()
        .build()?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(&args.listen))
        .map_err(|e| CliError::Failed(format!("cannot listen on {}: {e}", args.listen)))?;
    let address = listener.local_addr()?;
    if token_count == 0 && !address.ip().is_loopback() && !args.insecure {
        return Err(usage(format!(
            "refusing to listen on {address} without --token_file: anyone who reaches it could compact every database under the root (give --insecure to do so anyway)"
        )));
    }
    let metrics = match &args.metrics_listen {
        Some(at) => Some(
            runtime
                .block_on(tokio::net::TcpListener::bind(at))
                .map_err(|e| CliError::Failed(format!("cannot listen on {at}: {e}")))?,
        ),
        None => None,
    };
    let metrics_note = match &metrics {
        Some(m) => format!(", metrics on {}", m.local_addr()?),
        None => String::new(),
    };
    info_log.log(format_args!(
        "Worker listening on {address}: {description}{metrics_note}"
    ));
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "shale worker: listening on {address} ({description}{metrics_note})"
    )?;
    out.flush()?;
    drop(out);
    let shutdown = {
        let info_log = info_log.clone();
        async move {
            let _ = terminated.await;
            info_log.log(format_args!(
                "Signal received: draining (a second signal exits at once)"
            ));
            StopRequest::Drain
        }
    };
    let served = runtime.block_on(serve(worker, listener, tls, metrics, shutdown));
    // A job cancelled at the end of the drain may still be running on a
    // blocking thread: the process does not wait for it.
    runtime.shutdown_timeout(Duration::from_secs(1));
    served.map_err(CliError::Failed)?;
    info_log.log(format_args!("Worker stopped"));
    // Whoever started the worker may have stopped reading its output.
    let _ = writeln!(std::io::stdout(), "shale worker: stopped");
    Ok(())
}
