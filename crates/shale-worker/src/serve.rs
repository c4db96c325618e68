//! Serving a [`Worker`] until shutdown: TLS (mutual TLS as an option), the
//! token check that puts each call's `Scope` on it, the standard gRPC
//! health service, the reaper of staged sessions, the metrics port
//! (`/metrics` and `/healthz`), and
//! the end: drained ([`crate::drain`]) or at once. [`LocalWorker`] runs all
//! that on a thread of its own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_compact::remote::AUTHORIZATION;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Status};

use crate::auth::authenticate;
use crate::drain::{drain, StopRequest};
use crate::metrics::{serve_metrics, Serving};
use crate::proto::compaction_worker_server::CompactionWorkerServer;
use crate::rpc::Worker;
use crate::state::WorkerConfig;

/// A TLS certificate chain and key, PEM-encoded.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// The certificate chain.
    pub cert_pem: Vec<u8>,
    /// The private key.
    pub key_pem: Vec<u8>,
    /// With a CA (PEM), every client must present a certificate it signed
    /// (mutual TLS).
    pub client_ca_pem: Option<Vec<u8>>,
}

/// How long connections may stay open once the worker has stopped its
/// jobs: a cancelled job's executor notices at its next write, and an
/// engine that holds an idle connection (or is stopped, SIGSTOP) must not
/// keep the worker from exiting.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The connections `listener` accepts, with Nagle's algorithm off: a
/// keys-only job is a conversation of small messages (keys for credit),
/// and each would otherwise wait for the acknowledgement of the one before.
fn without_nagle(
    listener: tokio::net::TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    TcpListenerStream::new(listener).map(|accepted| {
        let stream = accepted?;
        // A connection that keeps Nagle is slower, not wrong.
        let _ = stream.set_nodelay(true);
        Ok(stream)
    })
}

/// Serves `worker` on `listener` until `shutdown` resolves, with the
/// standard gRPC health service beside it (`grpc.health.v1`, unauthenticated,
/// as probes are) and, when `metrics` is given, Prometheus text on that
/// listener. When `shutdown` resolves, health turns NOT_SERVING and every
/// new call gets UNAVAILABLE; with [`StopRequest::Drain`] the running jobs
/// may finish and their engines adopt their outputs, for at most the
/// config's `drain_timeout`. Then whatever still runs is cancelled and
/// every staged session is removed (their engines fall back to a local
/// executor), and connections get `CLOSE_GRACE` to close.
pub async fn serve(
    worker: Worker,
    listener: tokio::net::TcpListener,
    tls: Option<TlsIdentity>,
    metrics: Option<tokio::net::TcpListener>,
    shutdown: impl std::future::Future<Output = StopRequest>,
) -> std::result::Result<(), String> {
    let inner = worker.inner.clone();
    let max_message = inner.config.max_message_bytes;
    let service = CompactionWorkerServer::new(worker.clone())
        .max_decoding_message_size(max_message)
        .max_encoding_message_size(max_message);
    let checker = inner.clone();
    let service = InterceptedService::new(service, move |mut request: Request<()>| {
        // The tokens as of this call: SIGHUP may have replaced them.
        let tokens = checker.tokens.current();
        if tokens.is_empty() {
            return Ok(request);
        }
        let given = request
            .metadata()
            .get(AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or(b"");
        let scope = authenticate(&tokens, given)
            .ok_or_else(|| Status::unauthenticated("missing or wrong token"))?;
        request.extensions_mut().insert(scope);
        Ok(request)
    });
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<CompactionWorkerServer<Worker>>().await;
    let mut builder = Server::builder()
        .concurrency_limit_per_connection(256)
        .http2_keepalive_interval(Some(Duration::from_secs(10)));
    if let Some(tls) = tls {
        let mut config =
            ServerTlsConfig::new().identity(Identity::from_pem(tls.cert_pem, tls.key_pem));
        if let Some(ca) = tls.client_ca_pem {
            config = config.client_ca_root(Certificate::from_pem(ca));
        }
        builder = builder
            .tls_config(config)
            .map_err(|e| format!("TLS: {e}"))?;
    }
    // The reaper: deadlines of running jobs, staged outputs never adopted.
    let reaper = {
        let inner = inner.clone();
        let every = (inner.config.staging.adopt_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let removed = inner.staging.reap(Instant::now());
                for (session, owner) in &removed {
                    (inner.config.log)(&format!(
                        "Staged session {session} ({owner}) was not adopted within {:.0} s; removed",
                        inner.config.staging.adopt_timeout.as_secs_f64()
                    ));
                }
                if !removed.is_empty() {
                    inner
                        .metrics
                        .staging_removed("expired", removed.len() as u64);
                }
            }
        })
    };
    let scraper = metrics.map(|listener| {
        let serving = {
            let inner = inner.clone();
            Arc::new(move || inner.intake.is_open()) as Serving
        };
        tokio::spawn(serve_metrics(
            listener,
            inner.metrics.clone(),
            inner.staging.clone(),
            serving,
        ))
    });
    let stopped = Arc::new(tokio::sync::Notify::new());
    let stop = {
        let inner = inner.clone();
        let stopped = stopped.clone();
        async move {
            let request = shutdown.await;
            inner.intake.close();
            health
                .set_not_serving::<CompactionWorkerServer<Worker>>()
                .await;
            health
                .set_service_status("", tonic_health::ServingStatus::NotServing)
                .await;
            if request == StopRequest::Drain {
                let timeout = inner.config.drain_timeout;
                (inner.config.log)(&format!(
                    "Draining: no new calls; waiting up to {:.0} s for {} running jobs to finish and their outputs to be adopted",
                    timeout.as_secs_f64(),
                    inner.running_jobs()
                ));
                let drained = drain(&inner, timeout).await;
                (inner.config.log)(&format!(
                    "Drained in {:.3} s: {} of {} running jobs finished; {} finished sessions not adopted",
                    drained.waited.as_secs_f64(),
                    drained.running_at_start.saturating_sub(drained.still_running),
                    drained.running_at_start,
                    drained.awaiting_adoption
                ));
            }
            let running = inner.running_jobs();
            let removed = inner.staging.remove_all();
            (inner.config.log)(&format!(
                "Shutting down: no new calls; {running} running jobs cancelled; {removed} staged sessions removed"
            ));
            inner.metrics.staging_removed("shutdown", removed as u64);
            stopped.notify_one();
        }
    };
    let serving = builder
        .add_service(health_service)
        .add_service(service)
        .serve_with_incoming_shutdown(without_nagle(listener), stop);
    let served = tokio::select! {
        served = serving => served.map_err(|e| format!("serving: {e}")),
        () = async {
            stopped.notified().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        } => {
            (inner.config.log)(&format!(
                "Connections still open {:.0} s after shutdown: closed",
                CLOSE_GRACE.as_secs_f64()
            ));
            Ok(())
        }
    };
    reaper.abort();
    if let Some(scraper) = scraper {
        scraper.abort();
    }
    // Whatever a job staged while the connections drained goes too.
    inner.staging.remove_all();
    served
}

/// A worker serving on a thread of its own (for tests and for embedding a
/// worker in another program); stopped when dropped: at once, or after its
/// drain when [`LocalWorker::begin_drain`] was called.
#[derive(Debug)]
pub struct LocalWorker {
    address: SocketAddr,
    metrics_address: SocketAddr,
    worker: Worker,
    stop: Option<tokio::sync::oneshot::Sender<StopRequest>>,
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
        let metrics = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let address = listener.local_addr()?;
        let metrics_address = metrics.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<StopRequest>();
        let serving = worker.clone();
        let thread = std::thread::Builder::new()
            .name("shale-worker".into())
            .spawn(move || {
                let shutdown = async { stopped.await.unwrap_or(StopRequest::Now) };
                let _ = runtime.block_on(serve(serving, listener, tls, Some(metrics), shutdown));
            })?;
        Ok(LocalWorker {
            address,
            metrics_address,
            worker,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The address its metrics are served on (plain HTTP).
    pub fn metrics_address(&self) -> SocketAddr {
        self.metrics_address
    }

    /// The worker it serves (to replace its tokens, say).
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// `http://ADDRESS`, for `remote_workers`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Begins the drain SIGTERM begins in `shale worker`, and returns at
    /// once: new calls get UNAVAILABLE, running jobs go on. Dropping the
    /// worker then waits for the drain to end.
    pub fn begin_drain(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(StopRequest::Drain);
        }
    }
}

impl Drop for LocalWorker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(StopRequest::Now);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
