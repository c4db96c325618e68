//! What an operator scrapes from a worker: jobs by mode and outcome, bytes
//! read and staged, refusals by reason, what staging holds, and job
//! latency, in Prometheus' text format (prometheus-client), served over
//! plain HTTP on a port of its own (`--metrics_listen`) so that a scraper
//! needs neither gRPC nor the token.

use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::staging::Staging;

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

/// Serves `GET /metrics` (any path, in fact) on `listener` until the
/// returned future is dropped: one short HTTP/1.0 answer per connection.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    staging: Arc<Staging>,
) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let (metrics, staging) = (metrics.clone(), staging.clone());
        tokio::spawn(async move {
            // Read the request head (bounded), then answer and close.
            let mut head = [0u8; 4096];
            let read =
                tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut head))
                    .await;
            if !matches!(read, Ok(Ok(n)) if n > 0) {
                return;
            }
            let body = metrics.render(&staging);
            let answer = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
