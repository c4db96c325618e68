//! The worker's defences, called through the generated gRPC client as a
//! hostile or broken peer would: a missing or wrong token, paths that leave
//! the root (`..`, absolute, symlinks), bad session names, malformed jobs,
//! oversized messages, too many jobs, too large a job, a keys-only stream
//! out of order, and keys-only credit and order that name what is not
//! there. Each gets a clear status, and the worker keeps serving. And a
//! keys-only job many windows long, whose memory stays a window per run on
//! both sides.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::Arc;
use std::time::Duration;

use shale_compact::job::{CompactionJob, CompactionOutput, Executor, JobFile, JobIo, PhaseStats};
use shale_compact::remote::convert::job_to_proto;
use shale_compact::remote::paths::new_session;
use shale_compact::testing;
use shale_worker::proto::compaction_worker_client::CompactionWorkerClient;
use shale_worker::proto::{
    keys_only_event, keys_only_request, CompactRequest, HelloRequest, KeysOnlyRequest, KeysWanted,
    OrderChunk,
};
use shale_worker::{LocalWorker, WorkerConfig};
use tonic::transport::Channel;
use tonic::{Code, Request};

/// Takes a while and writes nothing.
#[derive(Debug)]
struct Sleeper(Duration);

impl Executor for Sleeper {
    fn name(&self) -> &'static str {
        "sleeper"
    }
    fn run(&self, _job: &CompactionJob, _io: &dyn JobIo) -> shale_format::Result<CompactionOutput> {
        std::thread::sleep(self.0);
        Ok(CompactionOutput {
            executor: "sleeper".into(),
            outputs: Vec::new(),
            stats: PhaseStats::default(),
            fallback: None,
        })
    }
}

/// One level-0 file from "a" to "z" (sequence 1), compacted to level 1.
fn job(number: u64, file_size: u64) -> CompactionJob {
    CompactionJob {
        max_output_file_size: 1 << 20,
        max_grandparent_overlap_bytes: 0,
        ..testing::job(testing::level0([testing::file(
            number, file_size, b"a", b"z",
        )]))
    }
}

/// Writes table `number` (one entry) into the fixture's database; the job
/// that compacts it.
fn real_table(f: &Fixture, number: u64) -> CompactionJob {
    let key = b"k\x01\x01\x00\x00\x00\x00\x00\x00";
    let mut builder = shale_format::table_builder::TableBuilder::new(
        shale_compact::job::TableSettings::default().table_options(),
        Vec::new(),
    );
    builder.add(key, b"v").unwrap();
    let (table, _) = builder.finish().unwrap();
    std::fs::write(f.root.path().join(format!("db/{number:06}.ldb")), &table).unwrap();
    let mut one = job(number, table.len() as u64);
    one.inputs[0].files[0].smallest = key.to_vec();
    one.inputs[0].files[0].largest = key.to_vec();
    one
}

fn request(db: &str, job: &CompactionJob) -> CompactRequest {
    CompactRequest {
        db_path: db.to_string(),
        session: new_session(),
        job: Some(job_to_proto(job)),
    }
}

/// Fields drop in order: the client runtime (and its connections) before
/// the worker, whose graceful shutdown waits for connections to close.
struct Fixture {
    runtime: tokio::runtime::Runtime,
    worker: LocalWorker,
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Fixture {
    fn new(configure: impl FnOnce(&mut WorkerConfig)) -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("db")).unwrap();
        std::fs::write(root.path().join("db/000005.ldb"), b"table").unwrap();
        std::fs::write(outside.path().join("000009.ldb"), b"secret").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("000009.ldb"),
            root.path().join("db/000009.ldb"),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
        let mut config = WorkerConfig::new(root.path(), Arc::new(Sleeper(Duration::ZERO)));
        configure(&mut config);
        let worker = LocalWorker::start(config).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Fixture {
            root,
            outside,
            worker,
            runtime,
        }
    }

    fn client(&self) -> CompactionWorkerClient<Channel> {
        let url = self.worker.url();
        self.runtime
            .block_on(CompactionWorkerClient::connect(url))
            .unwrap()
    }

    /// Runs a near-data call to its end: Ok when it ends with Done.
    fn compact(&self, request: Request<CompactRequest>) -> Result<(), tonic::Status> {
        let mut client = self.client();
        self.runtime.block_on(async {
            let mut stream = client.compact(request).await?.into_inner();
            while let Some(event) = stream.message().await? {
                if let Some(shale_worker::proto::compact_event::Event::Done(_)) = event.event {
                    return Ok(());
                }
            }
            Err(tonic::Status::unknown("no result"))
        })
    }

    fn hello_works(&self) {
        let mut client = self.client();
        self.runtime
            .block_on(client.hello(HelloRequest {}))
            .unwrap();
    }

    /// A scrape of the worker's metrics port.
    fn worker_metrics(&self) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(self.worker.metrics_address()).unwrap();
        stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    }

    fn db(&self) -> String {
        self.root.path().join("db").to_str().unwrap().to_string()
    }
}

fn with_token(message: CompactRequest, token: &str) -> Request<CompactRequest> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

#[test]
fn a_job_under_the_root_runs() {
    let f = Fixture::new(|_| {});
    f.compact(Request::new(request("db", &job(5, 5)))).unwrap();
    f.compact(Request::new(request(&f.db(), &job(5, 5))))
        .unwrap();
}

#[test]
fn the_token_is_required_on_every_call() {
    let f = Fixture::new(|c| c.token = Some("sesame".into()));
    let mut client = f.client();
    let status = f
        .runtime
        .block_on(client.hello(HelloRequest {}))
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    for token in ["", "sesam", "sesame2", "SESAME"] {
        let status = f
            .compact(with_token(request("db", &job(5, 5)), token))
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{token:?}");
    }
    f.compact(with_token(request("db", &job(5, 5)), "sesame"))
        .unwrap();
}

#[test]
fn paths_that_leave_the_root_are_refused() {
    let f = Fixture::new(|_| {});
    let outside = f.outside.path().to_str().unwrap().to_string();
    std::fs::create_dir(f.root.path().join("db/inner")).unwrap();
    std::os::unix::fs::symlink("inner", f.root.path().join("db/inside")).unwrap();
    std::os::unix::fs::symlink("000005.ldb", f.root.path().join("db/000008.ldb")).unwrap();
    for (db, number, why) in [
        ("db/..", 5, ".."),
        ("../db", 5, ".."),
        (outside.as_str(), 9, "outside"),
        ("/etc", 5, "outside"),
        ("escape", 9, "symlink"),
        ("db/inside", 5, "symlink"),
        ("db", 9, "symlink"),
        ("db", 8, "symlink"),
        ("db/000005.ldb", 5, "not a directory"),
        ("", 5, "no database"),
    ] {
        let status = f
            .compact(Request::new(request(db, &job(number, 5))))
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{db}: {status:?}");
        assert!(status.message().contains(why), "{db}: {status:?}");
    }
    assert_eq!(
        std::fs::read(f.outside.path().join("000009.ldb")).unwrap(),
        b"secret"
    );
    assert!(!f.outside.path().join("staging").exists());
    f.hello_works();
}

#[test]
fn malformed_requests_get_invalid_argument() {
    let f = Fixture::new(|_| {});
    let mut bad_session = request("db", &job(5, 5));
    bad_session.session = "../../../tmp/x".into();
    let mut no_job = request("db", &job(5, 5));
    no_job.job = None;
    let mut no_table = request("db", &job(5, 5));
    if let Some(job) = no_table.job.as_mut() {
        job.table = None;
    }
    let mut bad_level = request("db", &job(5, 5));
    if let Some(job) = bad_level.job.as_mut() {
        job.output_level = 1000;
    }
    for (name, message) in [
        ("session", bad_session),
        ("job", no_job),
        ("table", no_table),
        ("level", bad_level),
    ] {
        let status = f.compact(Request::new(message)).unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{name}: {status:?}");
    }
    f.hello_works();
}

#[test]
fn oversized_messages_are_refused_and_the_worker_stays_up() {
    let f = Fixture::new(|c| c.max_message_bytes = 64 << 10);
    let mut huge = job(5, 5);
    huge.grandparents = vec![
        JobFile {
            number: 1,
            file_size: 1,
            smallest: vec![b'k'; 1024],
            largest: vec![b'k'; 1024],
        };
        100
    ];
    let status = f.compact(Request::new(request("db", &huge))).unwrap_err();
    assert!(
        matches!(status.code(), Code::OutOfRange | Code::ResourceExhausted),
        "{status:?}"
    );
    f.hello_works();
}

#[test]
fn too_many_jobs_or_too_large_a_job_is_refused() {
    let f = Fixture::new(|c| {
        c.executor = Arc::new(Sleeper(Duration::from_millis(1500)));
        c.max_jobs = 1;
        c.max_job_bytes = 1000;
    });
    std::fs::write(f.root.path().join("db/000006.ldb"), vec![0u8; 1001]).unwrap();
    let status = f
        .compact(Request::new(request("db", &job(6, 1001))))
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains("max_job_bytes"));
    // The size is the table's, not the one the job claims.
    let status = f
        .compact(Request::new(request("db", &job(6, 5))))
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("job.inputs[0].files[0].file_size"),
        "{status:?}"
    );

    let url = f.worker.url();
    let first = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut client = CompactionWorkerClient::connect(url).await.unwrap();
            let mut stream = client
                .compact(request("db", &job(5, 5)))
                .await
                .unwrap()
                .into_inner();
            while stream.message().await.unwrap().is_some() {}
        });
    });
    std::thread::sleep(Duration::from_millis(500));
    let status = f
        .compact(Request::new(request("db", &job(5, 5))))
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("max_jobs"));
    first.join().unwrap();
    f.compact(Request::new(request("db", &job(5, 5)))).unwrap();
}

#[test]
fn a_keys_only_stream_out_of_order_is_refused() {
    let f = Fixture::new(|_| {});
    let mut client = f.client();
    let order_first = KeysOnlyRequest {
        request: Some(keys_only_request::Request::Order(OrderChunk {
            codes: vec![1, 2, 3],
            last: true,
        })),
    };
    let status = f
        .runtime
        .block_on(client.compact_keys_only(tokio_stream::iter(vec![order_first])))
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let status = f
        .runtime
        .block_on(client.compact_keys_only(tokio_stream::iter(Vec::new())))
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    f.hello_works();
}

#[test]
fn unknown_tables_and_lying_sizes_are_invalid_arguments_naming_the_field() {
    let f = Fixture::new(|_| {});
    let status = f
        .compact(Request::new(request("db", &job(6, 5))))
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("job.inputs[0].files[0].number")
            && status.message().contains("not in"),
        "{status:?}"
    );
    // Two claims whose sum wraps a u64: the real sizes decide.
    let mut wrapping = job(5, u64::MAX);
    std::fs::write(f.root.path().join("db/000007.ldb"), b"table").unwrap();
    wrapping.inputs[0].files.push(JobFile {
        number: 7,
        file_size: 2,
        smallest: b"zz\x01\x01\x00\x00\x00\x00\x00\x00".to_vec(),
        largest: b"zz\x01\x01\x00\x00\x00\x00\x00\x00".to_vec(),
    });
    let status = f
        .compact(Request::new(request("db", &wrapping)))
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("file_size"), "{status:?}");
    assert!(
        !f.root.path().join("db/staging").exists()
            || std::fs::read_dir(f.root.path().join("db/staging"))
                .unwrap()
                .count()
                == 0
    );
    f.hello_works();
}

#[test]
fn a_token_reaches_only_the_databases_of_its_scope_in_both_modes() {
    let f = Fixture::new(|c| {
        c.scoped_tokens = shale_worker::parse_token_file("alpha db\nbeta other/*\n").unwrap();
    });
    f.compact(with_token(request("db", &job(5, 5)), "alpha"))
        .unwrap();
    let status = f
        .compact(with_token(request("db", &job(5, 5)), "beta"))
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("scope"), "{status:?}");
    // Keys-only obeys the same scope.
    let mut client = f.client();
    let start = KeysOnlyRequest {
        request: Some(keys_only_request::Request::Start(request("db", &job(5, 5)))),
    };
    let mut call = Request::new(tokio_stream::iter(vec![start]));
    call.metadata_mut()
        .insert("authorization", "Bearer beta".parse().unwrap());
    let status = f
        .runtime
        .block_on(client.compact_keys_only(call))
        .unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
}

#[test]
fn a_silent_keys_only_stream_loses_its_slot() {
    let f = Fixture::new(|c| {
        c.max_jobs = 1;
        c.stream_idle_timeout = Duration::from_millis(300);
    });
    let url = f.worker.url();
    let silent_job = real_table(&f, 12);
    // Starts a keys-only job and never sends the order (nor closes).
    let (hold, held) = std::sync::mpsc::channel::<()>();
    let silent = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut client = CompactionWorkerClient::connect(url).await.unwrap();
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tx.send(KeysOnlyRequest {
                request: Some(keys_only_request::Request::Start(request(
                    "db",
                    &silent_job,
                ))),
            })
            .await
            .unwrap();
            let mut stream = client
                .compact_keys_only(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await
                .unwrap()
                .into_inner();
            let mut end = Ok(());
            loop {
                match stream.message().await {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(status) => {
                        end = Err(status);
                        break;
                    }
                }
            }
            drop(hold);
            drop(tx);
            end
        })
    });
    let _ = held.recv();
    let end = silent.join().unwrap().unwrap_err();
    assert_eq!(end.code(), Code::DeadlineExceeded, "{end:?}");
    assert!(end.message().contains("stream_idle_timeout"), "{end:?}");
    // The slot is free again.
    f.compact(Request::new(request("db", &job(5, 5)))).unwrap();
}

#[test]
fn staged_outputs_nobody_adopts_are_removed_after_the_timeout() {
    let f = Fixture::new(|c| {
        c.executor = Arc::new(shale_compact::StreamingExecutor);
        c.staging.adopt_timeout = Duration::from_millis(300);
        c.staging.max_sessions_per_db = 2;
    });
    let one = real_table(&f, 11);
    f.compact(Request::new(request("db", &one))).unwrap();
    f.compact(Request::new(request("db", &one))).unwrap();
    let staged = || std::fs::read_dir(f.root.path().join("db/staging")).map_or(0, |d| d.count());
    assert_eq!(staged(), 2);
    // The quota: two sessions per database.
    let status = f.compact(Request::new(request("db", &one))).unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while staged() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(staged(), 0);
    f.compact(Request::new(request("db", &one))).unwrap();
    let metrics = f.worker_metrics();
    assert!(
        metrics.contains("shale_worker_staging_removed_sessions_total{why=\"expired\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shale_worker_refusals_total{code=\"ResourceExhausted\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("shale_worker_jobs_total{mode=\"near-data\",outcome=\"done\"} 3"),
        "{metrics}"
    );
}

#[test]
fn a_client_that_goes_away_mid_job_cancels_it_at_once() {
    let f = Fixture::new(|c| {
        c.executor = Arc::new(Sleeper(Duration::from_secs(4)));
        c.progress_interval = Duration::from_millis(50);
    });
    let message = request("db", &job(5, 5));
    let session = f.root.path().join("db/staging").join(&message.session);
    let mut client = f.client();
    f.runtime.block_on(async {
        let mut stream = client.compact(message).await.unwrap().into_inner();
        // The first progress: the job runs.
        stream.message().await.unwrap().unwrap();
        assert!(session.is_dir());
        // Gone: the runtime keeps running so the reset reaches the worker.
        drop(stream);
        let started = std::time::Instant::now();
        while session.exists() && started.elapsed() < Duration::from_secs(3) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    drop(client);
    assert!(!session.exists(), "the staged session outlived its client");
    let metrics = f.worker_metrics();
    assert!(
        metrics.contains("shale_worker_jobs_total{mode=\"near-data\",outcome=\"cancelled\"} 1"),
        "{metrics}"
    );
}

/// Writes what `streaming` writes, without the filter block the job asks
/// for: a worker that lies about its filter.
#[derive(Debug)]
struct DropsTheFilter;

impl Executor for DropsTheFilter {
    fn name(&self) -> &'static str {
        "drops-the-filter"
    }
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> shale_format::Result<CompactionOutput> {
        let mut job = job.clone();
        job.table.bloom_bits_per_key = None;
        shale_compact::StreamingExecutor.run(&job, io)
    }
}

#[test]
fn the_engine_counts_each_refusal_by_its_check() {
    use shale_compact::remote::{RemoteExecutor, RemoteOptions};
    let f = Fixture::new(|c| c.executor = Arc::new(DropsTheFilter));
    let one = real_table(&f, 13);
    let bytes = std::fs::read(f.root.path().join("db/000013.ldb")).unwrap();
    let io = shale_compact::mem_io::MemIo::new([(13u64, Arc::new(bytes))].into_iter().collect())
        .with_database_dir(f.root.path().join("db"));
    let executor = RemoteExecutor::new(RemoteOptions {
        endpoints: vec![f.worker.url()],
        ..RemoteOptions::default()
    })
    .unwrap();
    let err = executor.run(&one, &io).unwrap_err().to_string();
    assert!(err.contains("refused by check filter"), "{err}");
    let stats = executor.worker_stats();
    assert_eq!(stats[0].refusals, vec![("filter", 1)]);
    assert_eq!(stats[0].failures, 1);
    assert!(io.written().is_empty(), "nothing adopted");
}

/// Starts keys-only `job`, sends `then`, and returns how the call ended:
/// its status, or on `Done` how many keys the worker sent.
fn keys_only_call(
    f: &Fixture,
    job: &CompactionJob,
    then: Vec<keys_only_request::Request>,
) -> Result<usize, tonic::Status> {
    let mut client = f.client();
    let mut messages = vec![KeysOnlyRequest {
        request: Some(keys_only_request::Request::Start(request("db", job))),
    }];
    messages.extend(
        then.into_iter()
            .map(|r| KeysOnlyRequest { request: Some(r) }),
    );
    f.runtime.block_on(async {
        let (tx, rx) = tokio::sync::mpsc::channel(messages.len());
        for message in messages {
            tx.send(message).await.unwrap();
        }
        let mut stream = client
            .compact_keys_only(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        let mut keys = 0;
        while let Some(event) = stream.message().await? {
            match event.event {
                Some(keys_only_event::Event::Keys(chunk)) => keys += chunk.keys.len(),
                Some(keys_only_event::Event::Done(_)) => return Ok(keys),
                _ => {}
            }
        }
        drop(tx);
        Err(tonic::Status::unknown("no result"))
    })
}

#[test]
fn malformed_keys_only_credit_and_order_get_invalid_argument_naming_the_field() {
    let f = Fixture::new(|_| {});
    let one = real_table(&f, 14);
    let wanted = |run, count| keys_only_request::Request::KeysWanted(KeysWanted { run, count });
    let order =
        |codes: Vec<u32>, last| keys_only_request::Request::Order(OrderChunk { codes, last });
    let keep = shale_compact::remote::keys::code(0, true, false);
    for (then, field) in [
        (vec![wanted(1, 1)], "keys_wanted.run"),
        (vec![wanted(0, 0)], "keys_wanted.count"),
        (vec![order(vec![keep], true)], "order.codes[0]"),
        (
            vec![wanted(0, 1), order(vec![keep << 3], true)],
            "order.codes[0]",
        ),
        (vec![wanted(0, 1), order(Vec::new(), true)], "order.last"),
    ] {
        let status = keys_only_call(&f, &one, then).unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{field}: {status:?}");
        assert!(status.message().starts_with(field), "{field}: {status:?}");
    }
    // The same table, asked for and ordered as it should be.
    let keys = keys_only_call(&f, &one, vec![wanted(0, 5), order(vec![keep], true)]).unwrap();
    assert_eq!(keys, 1);
    let metrics = f.worker_metrics();
    assert!(
        metrics.contains("shale_worker_jobs_total{mode=\"keys-only\",outcome=\"invalid\"} 5"),
        "{metrics}"
    );
    f.hello_works();
}

#[test]
fn a_keys_only_job_many_windows_long_holds_a_window_per_run_and_matches_streaming() {
    use shale_compact::remote::{RemoteExecutor, RemoteMode, RemoteOptions};
    let f = Fixture::new(|_| {});
    let runs = 6;
    let window = 16;
    let shape = testing::RandomLevel0 {
        runs,
        entries: 4000,
        value_size: 100,
        key_space: 20_000,
        overwrite_percent: 20,
        settings: shale_compact::job::TableSettings::default(),
    };
    let (mut job, (inputs, _)) = shape.build();
    job.smallest_snapshot /= 2;
    job.max_output_file_size = 256 << 10;
    for (number, bytes) in &inputs {
        std::fs::write(f.root.path().join(format!("db/{number:06}.ldb")), &**bytes).unwrap();
    }
    let reference = shale_compact::mem_io::MemIo::new(inputs.clone());
    let expected = shale_compact::StreamingExecutor
        .run(&job, &reference)
        .unwrap();
    let io = shale_compact::mem_io::MemIo::new(inputs).with_database_dir(f.root.path().join("db"));
    let executor = RemoteExecutor::new(RemoteOptions {
        endpoints: vec![f.worker.url()],
        mode: RemoteMode::KeysOnly,
        keys_window: window,
        ..RemoteOptions::default()
    })
    .unwrap();
    let output = executor.run(&job, &io).unwrap();
    assert_eq!(output.outputs, expected.outputs);
    assert_eq!(io.written(), reference.written());
    let entries = output.stats.entries_in;
    let bound = runs as u64 * window;
    assert!(
        entries > 100 * bound,
        "{entries} entries, a bound of {bound}"
    );
    // The engine held at most a window per run.
    let held = executor.keys_only_peak();
    assert!(held.keys > 0 && held.keys <= bound, "{held:?}");
    // The worker never had more than that sent and not yet ordered.
    let metrics = f.worker_metrics();
    let peak: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("shale_worker_keys_only_unordered_keys_peak "))
        .unwrap_or_else(|| panic!("{metrics}"))
        .parse()
        .unwrap();
    assert!(peak > 0 && peak <= bound, "{peak} > {bound}");
}

#[test]
fn replaced_tokens_check_the_calls_that_follow() {
    let f = Fixture::new(|c| {
        c.scoped_tokens = shale_worker::parse_token_file("old\n").unwrap();
    });
    f.compact(with_token(request("db", &job(5, 5)), "old"))
        .unwrap();
    let worker = f.worker.worker();
    let now = worker
        .replace_tokens(shale_worker::parse_token_file("new db\n").unwrap())
        .unwrap();
    assert_eq!(now, 1);
    let status = f
        .compact(with_token(request("db", &job(5, 5)), "old"))
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    f.compact(with_token(request("db", &job(5, 5)), "new"))
        .unwrap();
    // No token at all would open the worker to every call: refused, and
    // the tokens stay.
    assert!(worker.replace_tokens(Vec::new()).is_err());
    let status = f
        .compact(with_token(request("db", &job(5, 5)), ""))
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    f.compact(with_token(request("db", &job(5, 5)), "new"))
        .unwrap();
}
