//! The `remote` executor inside the engine, with a worker in this process
//! on loopback: jobs run remotely and land byte for byte as `streaming`
//! writes them; a worker that is down, refuses the token, stalls, or
//! returns a corrupted table loses the job to a local executor, the
//! fallback is counted, no staged file is adopted, and every acknowledged
//! write is there and verifies. TLS with a CA the engine is given works.
//! (The worker's own checks are in `crates/shale-compact/tests/worker.rs`;
//! a worker in another process in `crates/shale-cli/tests/worker.rs`.)

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use shale::options::RemoteToken;
use shale::shale_compact::job::{
    CompactionJob, CompactionOutput, Executor, JobFile, JobIo, OutputSink,
};
use shale::shale_compact::remote::{LocalWorker, RemoteMode, TlsIdentity, WorkerConfig};
use shale::shale_compact::StreamingExecutor;
use shale::{Options, ReadOptions, WriteOptions, DB};

fn options(workers: Vec<String>) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 32 << 10,
        block_size: 1024,
        compaction_executor: "remote".to_string(),
        remote_workers: workers,
        remote_timeout: Duration::from_secs(20),
        max_subcompactions: 1,
        ..Options::default()
    }
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

#[test]
fn jobs_run_on_the_worker_in_both_modes() {
    for mode in [RemoteMode::NearData, RemoteMode::KeysOnly] {
        let root = tempfile::tempdir().unwrap();
        let worker = worker(root.path(), Arc::new(StreamingExecutor));
        let dir = root.path().join("db");
        let (fallbacks, why, db) = write_compact_check(
            &dir,
            Options {
                remote_mode: mode,
                ..options(vec![worker.url()])
            },
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
            compaction_executor: "auto".to_string(),
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
        Options {
            remote_token: Some(RemoteToken("wrong".into())),
            ..options(vec![worker.url()])
        },
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
        Options {
            remote_token: Some(RemoteToken("right".into())),
            ..options(vec![worker.url()])
        },
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
        Options {
            remote_timeout: Duration::from_millis(300),
            ..options(vec![worker.url()])
        },
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
            compaction_executor: "streaming".into(),
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
        Options {
            remote_tls_ca: Some(ca),
            ..options(vec![url.clone()])
        },
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
    assert!(open(Options {
        remote_tls_ca: Some(root.path().join("missing.pem")),
        ..options(vec!["https://localhost:1".into()])
    })
    .contains("missing.pem"));
}
