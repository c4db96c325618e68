//! A worker's graceful end. Asked to drain (SIGTERM), a worker takes no new
//! job (every call of the `CompactionWorker` service gets `UNAVAILABLE`;
//! health, served beside it, says `NOT_SERVING`), lets the jobs in flight
//! run to their end and their engines adopt what they staged, for at most
//! the drain timeout, and only then cancels what still runs and removes
//! what is still staged ([`crate::serve()`] does that part). Asked to stop
//! now, it skips the wait: running jobs are cancelled at once.

use std::time::{Duration, Instant};

use crate::state::WorkerInner;

/// How often a draining worker looks whether the engines adopted what its
/// last jobs staged. Nothing in the worker's process learns of an
/// adoption (the engine renames the tables and removes the session in its
/// own process), so this one wait is a look at the directories.
const ADOPTION_POLL: Duration = Duration::from_millis(20);
/// A drain waits for the adoption of the sessions that finish during it
/// and of those that finished this long before it began: an engine adopts
/// right after its `Done`, so one that has not within seconds is gone, and
/// waiting for it would only hold the shutdown up to the drain timeout.
const RECENTLY_FINISHED: Duration = Duration::from_secs(5);

/// How a serving worker is asked to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    /// Take no new job, let the running ones finish (at most the drain
    /// timeout), then stop: SIGTERM.
    Drain,
    /// Cancel the running jobs and stop.
    Now,
}

/// How a drain ended, for the LOG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drained {
    /// Jobs that were running when the drain began.
    pub(crate) running_at_start: usize,
    /// Jobs still running when the drain timeout ran out (0: all ended).
    pub(crate) still_running: usize,
    /// Finished sessions their engines had not adopted by then.
    pub(crate) awaiting_adoption: usize,
    /// How long the drain took.
    pub(crate) waited: Duration,
}

/// Waits, at most `timeout`, for every running job to end, and then for
/// the engines to adopt what the jobs that finished during the drain (or
/// [`RECENTLY_FINISHED`] before it) staged.
///
/// REQUIRES: the intake is closed, so no job starts while this waits for
/// the slots to come back.
pub(crate) async fn drain(inner: &WorkerInner, timeout: Duration) -> Drained {
    let started = Instant::now();
    let deadline = tokio::time::Instant::from_std(started + timeout);
    let running_at_start = inner.running_jobs();
    // Every slot back means every job ended; a job gives its slot back
    // when its call ends, which wakes this wait.
    let slots = u32::try_from(inner.config.max_jobs.max(1)).unwrap_or(u32::MAX);
    let all_ended = tokio::time::timeout_at(deadline, inner.slots.acquire_many(slots)).await;
    let still_running = match all_ended {
        // The permits go back at once: the intake is closed. (A closed
        // semaphore, which this worker never makes, holds no job either.)
        Ok(permits) => {
            drop(permits);
            0
        }
        Err(_elapsed) => inner.running_jobs(),
    };
    let since = started.checked_sub(RECENTLY_FINISHED).unwrap_or(started);
    let mut awaiting_adoption = inner.staging.awaiting_adoption(since);
    while still_running == 0 && awaiting_adoption > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(ADOPTION_POLL.min(deadline - tokio::time::Instant::now())).await;
        awaiting_adoption = inner.staging.awaiting_adoption(since);
    }
    Drained {
        running_at_start,
        still_running,
        awaiting_adoption,
        waited: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};

    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    use super::*;
    use crate::proto::compact_event::Event;
    use crate::proto::compaction_worker_client::CompactionWorkerClient;
    use crate::proto::{CompactRequest, HelloRequest};
    use crate::state::Intake;
    use crate::{LocalWorker, WorkerConfig};
    use shale_compact::job::{
        CompactionJob, CompactionOutput, Executor, InputRun, JobFile, JobIo, PhaseStats,
    };
    use shale_compact::remote::convert::job_to_proto;
    use shale_compact::remote::paths::new_session;
    use shale_compact::testing::http_get;

    #[test]
    fn a_closed_intake_answers_unavailable_saying_why() {
        let intake = Intake::default();
        assert!(intake.check().is_ok());
        intake.close();
        let Err(status) = intake.check() else {
            panic!("a closed intake took a call");
        };
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(status.message().contains("shutting down"), "{status:?}");
    }

    /// Says when a job starts, then runs until the test releases it.
    #[derive(Debug)]
    struct Gate {
        started: Mutex<mpsc::Sender<()>>,
        release: Mutex<mpsc::Receiver<()>>,
    }

    impl Executor for Gate {
        fn name(&self) -> &'static str {
            "gate"
        }
        fn run(
            &self,
            _job: &CompactionJob,
            _io: &dyn JobIo,
        ) -> shale_format::Result<CompactionOutput> {
            let _ = self.started.lock().unwrap().send(());
            let _ = self
                .release
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(60));
            Ok(CompactionOutput {
                executor: "gate".into(),
                outputs: Vec::new(),
                stats: PhaseStats::default(),
                fallback: None,
            })
        }
    }

    /// A near-data request for table 5 (admission opens and measures it;
    /// the gate reads nothing).
    fn request(db: &std::path::Path) -> CompactRequest {
        let key = b"k\x01\x01\x00\x00\x00\x00\x00\x00".to_vec();
        let job = CompactionJob {
            id: 1,
            inputs: vec![InputRun {
                level: 0,
                files: vec![JobFile {
                    number: 5,
                    file_size: 5,
                    smallest: key.clone(),
                    largest: key,
                }],
            }],
            output_level: 1,
            max_output_file_size: 1 << 20,
            ..CompactionJob::default()
        };
        CompactRequest {
            db_path: db.to_str().unwrap().to_string(),
            session: new_session(),
            job: Some(job_to_proto(&job)),
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Runs a near-data call to its end: the session of its `Done`.
    fn compact(url: String, request: CompactRequest) -> Result<String, tonic::Status> {
        let session = request.session.clone();
        runtime().block_on(async {
            let mut client = CompactionWorkerClient::connect(url).await.unwrap();
            let mut stream = client.compact(request).await?.into_inner();
            while let Some(event) = stream.message().await? {
                if let Some(Event::Done(_)) = event.event {
                    return Ok(session);
                }
            }
            Err(tonic::Status::unknown("the stream ended without Done"))
        })
    }

    #[test]
    fn the_metrics_port_serves_metrics_and_health_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let worker = LocalWorker::start(WorkerConfig::new(
            root.path(),
            Arc::new(Gate {
                started: Mutex::new(mpsc::channel().0),
                release: Mutex::new(mpsc::channel().1),
            }),
        ))
        .unwrap();
        let at = worker.metrics_address();
        let metrics = http_get(at, "/metrics");
        assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
        assert!(
            metrics.contains("content-type: text/plain; version=0.0.4"),
            "{metrics}"
        );
        assert!(
            metrics.contains("# TYPE shale_worker_running_jobs gauge"),
            "{metrics}"
        );
        let health = http_get(at, "/healthz");
        assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
        assert!(health.ends_with("\r\n\r\nok\n"), "{health}");
        for path in ["/", "/metrics/x", "/favicon.ico"] {
            let answer = http_get(at, path);
            assert!(answer.starts_with("HTTP/1.1 404 "), "{path}: {answer}");
        }
        // An HTTP/1.0 scraper (no Host, no keep-alive) is answered too.
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(at).unwrap();
        stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut old = String::new();
        stream.read_to_string(&mut old).unwrap();
        assert!(
            old.contains(" 200 OK\r\n") && old.contains("shale_worker_running_jobs 0"),
            "{old}"
        );
    }

    #[test]
    fn a_draining_worker_refuses_new_calls_and_finishes_the_running_job() {
        let root = tempfile::tempdir().unwrap();
        let db = root.path().join("db");
        std::fs::create_dir(&db).unwrap();
        std::fs::write(db.join("000005.ldb"), b"table").unwrap();
        let (started_tx, started) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let gate = Gate {
            started: Mutex::new(started_tx),
            release: Mutex::new(release_rx),
        };
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let mut config = WorkerConfig::new(root.path(), Arc::new(gate));
        config.log = {
            let log = log.clone();
            Arc::new(move |line: &str| log.lock().unwrap().push(line.to_string()))
        };
        let mut worker = LocalWorker::start(config).unwrap();
        let url = worker.url();

        let in_flight = {
            let (url, request) = (url.clone(), request(&db));
            std::thread::spawn(move || compact(url, request))
        };
        started.recv_timeout(Duration::from_secs(30)).unwrap();
        let healthz = http_get(worker.metrics_address(), "/healthz");
        assert!(healthz.starts_with("HTTP/1.1 200 OK"), "{healthz}");
        worker.begin_drain();

        let client = runtime();
        let health = client.block_on(async {
            let channel = tonic::transport::Endpoint::from_shared(url.clone())
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut health = HealthClient::new(channel);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let status = health
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .status;
                if status != ServingStatus::Serving as i32 || Instant::now() > deadline {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert_eq!(health, ServingStatus::NotServing as i32);
        // The HTTP health check agrees (the intake closed before gRPC
        // health turned NOT_SERVING).
        let healthz = http_get(worker.metrics_address(), "/healthz");
        assert!(
            healthz.starts_with("HTTP/1.1 503 Service Unavailable")
                && healthz.ends_with("draining\n"),
            "{healthz}"
        );
        let mut worker_client = client
            .block_on(CompactionWorkerClient::connect(url.clone()))
            .unwrap();
        let hello = client.block_on(worker_client.hello(HelloRequest {}));
        let refused = hello.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        assert!(refused.message().contains("shutting down"), "{refused:?}");
        let second = client
            .block_on(worker_client.compact(request(&db)))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(second.code(), tonic::Code::Unavailable, "{second:?}");

        // The job in flight finishes and its client gets the result; the
        // client then adopts the session, as the engine does.
        release.send(()).unwrap();
        let session = in_flight.join().unwrap().unwrap();
        std::fs::remove_dir(db.join("staging").join(&session)).unwrap();
        drop(worker_client);
        drop(client);
        let stopping = Instant::now();
        drop(worker);
        assert!(stopping.elapsed() < Duration::from_secs(10));
        let log = log.lock().unwrap().join("\n");
        assert!(log.contains("Draining: no new calls"), "{log}");
        assert!(
            log.contains("1 of 1 running jobs finished; 0 finished sessions not adopted"),
            "{log}"
        );
        assert!(log.contains("0 staged sessions removed"), "{log}");
    }
}
