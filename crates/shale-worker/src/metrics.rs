//! What an operator scrapes from a worker: jobs by mode and outcome, bytes
//! read and staged, refusals by reason, what staging holds, and job
//! latency, in Prometheus' text format (prometheus-client), served over
//! plain HTTP on a port of its own (`--metrics_listen`) so that a scraper
//! needs neither gRPC nor the token. The same port answers `/healthz`
//! (200 `ok` while the worker takes calls, 503 `draining` once it stops),
//! for a probe or load balancer that speaks HTTP rather than gRPC.

use std::convert::Infallible;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::staging::Staging;

type Labels = Vec<(&'static str, String)>;

/// Job latency buckets: 5 ms doubling to about 11 minutes.
fn job_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 18))
}

/// The worker's counters.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    jobs: Family<Labels, Counter>,
    refusals: Family<Labels, Counter>,
    input_bytes: Counter,
    staged_bytes_total: Counter,
    staging_removed: Family<Labels, Counter>,
    running: Gauge<i64, AtomicI64>,
    staged_bytes: Gauge<i64, AtomicI64>,
    staged_sessions: Gauge<i64, AtomicI64>,
    job_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    keys_only_unordered: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Fresh counters, registered under `shale_worker_`.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("shale_worker");
        let jobs = Family::<Labels, Counter>::default();
        registry.register("jobs", "Jobs by mode and outcome", jobs.clone());
        let refusals = Family::<Labels, Counter>::default();
        registry.register(
            "refusals",
            "Calls refused before a job ran, by gRPC status",
            refusals.clone(),
        );
        let input_bytes = Counter::default();
        registry.register(
            "input_bytes",
            "Input table bytes of the jobs taken (from fstat)",
            input_bytes.clone(),
        );
        let staged_bytes_total = Counter::default();
        registry.register(
            "staged_bytes",
            "Output bytes staged by finished jobs",
            staged_bytes_total.clone(),
        );
        let staging_removed = Family::<Labels, Counter>::default();
        registry.register(
            "staging_removed_sessions",
            "Staged sessions the worker removed, by why",
            staging_removed.clone(),
        );
        let running = Gauge::<i64, AtomicI64>::default();
        registry.register("running_jobs", "Jobs running now", running.clone());
        let staged_bytes = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "staging_bytes",
            "Bytes in staging now (running jobs and outputs awaiting adoption)",
            staged_bytes.clone(),
        );
        let staged_sessions = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "staging_sessions",
            "Staged sessions now",
            staged_sessions.clone(),
        );
        let job_seconds: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(job_histogram);
        registry.register(
            "job_seconds",
            "Job latency from the request to the last message, by mode and outcome",
            job_seconds.clone(),
        );
        let keys_only_unordered = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "keys_only_unordered_keys_peak",
            "The most keys a keys-only job had sent and not yet received the order for at once, over the jobs so far: how far its second pass over the inputs trailed the first (at most the engine's window times the job's runs)",
            keys_only_unordered.clone(),
        );
        Metrics {
            registry,
            jobs,
            refusals,
            input_bytes,
            staged_bytes_total,
            staging_removed,
            running,
            staged_bytes,
            staged_sessions,
            job_seconds,
            keys_only_unordered,
        }
    }

    /// A job ended: `mode` near-data or keys-only; `outcome` done, failed,
    /// cancelled, timeout.
    pub fn job(&self, mode: &str, outcome: &str, seconds: f64, input: u64, staged: u64) {
        let labels = vec![("mode", mode.to_string()), ("outcome", outcome.to_string())];
        self.jobs.get_or_create(&labels).inc();
        self.job_seconds.get_or_create(&labels).observe(seconds);
        self.input_bytes.inc_by(input);
        if outcome == "done" {
            self.staged_bytes_total.inc_by(staged);
        }
    }

    /// A call refused before its job ran, by its status code.
    pub fn refused(&self, code: tonic::Code) {
        self.refusals
            .get_or_create(&vec![("code", format!("{code:?}"))])
            .inc();
    }

    /// Staged sessions removed by the worker (`expired`, `failed`,
    /// `shutdown`, `sweep`).
    pub fn staging_removed(&self, why: &str, sessions: u64) {
        self.staging_removed
            .get_or_create(&vec![("why", why.to_string())])
            .inc_by(sessions);
    }

    /// A keys-only job's data side ended with at most `keys` sent and not
    /// yet ordered at once.
    pub fn keys_only_unordered(&self, keys: u64) {
        let keys = i64::try_from(keys).unwrap_or(i64::MAX);
        self.keys_only_unordered
            .inner()
            .fetch_max(keys, std::sync::atomic::Ordering::Relaxed);
    }

    /// A job started (`+1`) or ended (`-1`).
    pub fn running(&self, delta: i64) {
        self.running.inc_by(delta);
    }

    /// The text a scrape gets, with staging's usage as of now.
    pub fn render(&self, staging: &Staging) -> String {
        let usage = staging.usage();
        self.staged_bytes
            .set(i64::try_from(usage.bytes).unwrap_or(i64::MAX));
        self.staged_sessions
            .set(i64::try_from(usage.sessions).unwrap_or(i64::MAX));
        let mut text = String::new();
        if encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

/// Whether the worker takes calls now (`/healthz`).
pub type Serving = Arc<dyn Fn() -> bool + Send + Sync>;

/// How long a client may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a connection to the metrics port stays open.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The Prometheus text format's content type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The answer to one request: `/metrics`, `/healthz`, or 404.
fn answer(
    request: &Request<Incoming>,
    metrics: &Metrics,
    staging: &Staging,
    serving: &Serving,
) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &'static str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    };
    let text = "text/plain; charset=utf-8";
    let path = request.uri().path();
    if !matches!(path, "/metrics" | "/healthz") {
        return reply(
            StatusCode::NOT_FOUND,
            text,
            "not found: this port serves /metrics and /healthz\n".into(),
        );
    }
    if !matches!(*request.method(), Method::GET | Method::HEAD) {
        let mut response = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            "only GET and HEAD\n".into(),
        );
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if path == "/metrics" {
        reply(StatusCode::OK, PROMETHEUS_TEXT, metrics.render(staging))
    } else if serving() {
        reply(StatusCode::OK, text, "ok\n".into())
    } else {
        reply(StatusCode::SERVICE_UNAVAILABLE, text, "draining\n".into())
    }
}

/// Serves HTTP/1 on `listener` until the returned future is dropped:
/// `GET /metrics` (Prometheus text), `GET /healthz` (200 `ok` while
/// `serving` says so, else 503 `draining`); any other path gets 404.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    staging: Arc<Staging>,
    serving: Serving,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, say: wait rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (metrics, staging, serving) = (metrics.clone(), staging.clone(), serving.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = answer(&request, &metrics, &staging, &serving);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
        });
    }
}
