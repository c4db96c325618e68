//! `shale worker` as a real second process on loopback: `shale compact`
//! through it writes byte for byte the tables `streaming` writes, in both
//! modes; a worker killed in the middle of a job costs only time (the job
//! falls back, prints `fallback`, and the database verifies); SIGTERM lets
//! a running job finish before the worker exits, a second SIGTERM exits at
//! once, and either way nothing is lost; bad flags and unreachable workers
//! give clear errors.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use shale::{Options, WriteOptions, DB};

fn shale(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `shale worker` child, killed when dropped.
struct WorkerProcess {
    child: Child,
    address: String,
}

impl WorkerProcess {
    fn start(root: &Path, extra: &[&str]) -> WorkerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .args(["worker", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        WorkerProcess { child, address }
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// No automatic compactions: only `shale compact`'s, one job at a time, so
/// that file numbers match across executors.
const QUIET: &[&str] = &[
    "--l0_compaction_trigger=1000",
    "--l0_slowdown_writes_trigger=1000",
    "--l0_stop_writes_trigger=1000",
    "--max_subcompactions=1",
];

/// A database of several overlapping L0 tables under `dir`.
fn make_db(dir: &Path, keys: u32) {
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 256 << 10,
        l0_compaction_trigger: 1000,
        l0_slowdown_writes_trigger: 1000,
        l0_stop_writes_trigger: 1000,
        ..Options::default()
    };
    let db = DB::open(dir, options).unwrap();
    for round in 0..3u32 {
        for i in (0..keys).filter(|i| (i + round) % 3 != 0) {
            let key = format!("key{:08}", (i * 7919) % keys);
            db.put(
                &WriteOptions::default(),
                key.as_bytes(),
                format!("v{round}-{i}").as_bytes(),
            )
            .unwrap();
        }
    }
}

fn copy_db(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() && entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn tables(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".ldb"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn compact(db: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["compact", "--db", db.to_str().unwrap()];
    args.extend_from_slice(QUIET);
    args.extend_from_slice(extra);
    shale(&args)
}

fn staged_files(db: &Path) -> usize {
    let Ok(sessions) = std::fs::read_dir(db.join("staging")) else {
        return 0;
    };
    sessions
        .map(|s| std::fs::read_dir(s.unwrap().path()).map_or(0, |d| d.count()))
        .sum()
}

fn verify(db: &Path) {
    let output = shale(&["verify", "--db", db.to_str().unwrap()]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).starts_with("ok"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn a_worker_process_writes_what_streaming_writes_in_both_modes() {
    let root = tempfile::tempdir().unwrap();
    let token = root.path().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let worker = WorkerProcess::start(
        root.path(),
        &[
            "--executor",
            "streaming",
            "--token_file",
            token.to_str().unwrap(),
        ],
    );
    let source = root.path().join("source");
    make_db(&source, 30_000);
    let reference = root.path().join("reference");
    copy_db(&source, &reference);
    let output = compact(&reference, &["--executor", "streaming"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let expected = tables(&reference);
    assert!(!expected.is_empty());
    for mode in ["near-data", "keys-only"] {
        let db = root.path().join(mode);
        copy_db(&source, &db);
        let output = compact(
            &db,
            &[
                "--executor",
                "remote",
                "--remote_workers",
                &worker.address,
                "--remote_token_file",
                token.to_str().unwrap(),
                "--remote_mode",
                mode,
            ],
        );
        let stdout = text(&output.stdout);
        assert!(output.status.success(), "{mode}: {}", text(&output.stderr));
        assert!(!stdout.contains("fallback"), "{mode}: {stdout}");
        assert!(
            stdout.contains("Executor remote") && stdout.contains("wire-sent"),
            "{stdout}"
        );
        assert_eq!(
            tables(&db),
            expected,
            "{mode}: tables differ from streaming's"
        );
        assert_eq!(staged_files(&db), 0);
        verify(&db);
    }
}

/// A database of 60,000 keys under a new worker's root, and `shale
/// compact --executor remote` running on it in a thread, returned once the
/// worker has begun its first job (its staging directory exists), with
/// the database's `shale scan` from before.
struct JobInFlight {
    root: tempfile::TempDir,
    worker: WorkerProcess,
    db: std::path::PathBuf,
    before: String,
    compactor: std::thread::JoinHandle<Output>,
}

impl JobInFlight {
    fn start() -> JobInFlight {
        Self::start_with(&[])
    }

    /// As [`JobInFlight::start`], with more worker flags.
    fn start_with(extra: &[&str]) -> JobInFlight {
        let root = tempfile::tempdir().unwrap();
        let mut args = vec!["--executor", "streaming"];
        args.extend_from_slice(extra);
        let worker = WorkerProcess::start(root.path(), &args);
        let db = root.path().join("db");
        make_db(&db, 60_000);
        let before = shale(&["scan", "--db", db.to_str().unwrap()]);
        assert!(before.status.success());
        let compactor = {
            let db = db.clone();
            let address = worker.address.clone();
            std::thread::spawn(move || {
                compact(&db, &["--executor", "remote", "--remote_workers", &address])
            })
        };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60)
            && !std::fs::read_dir(db.join("staging")).is_ok_and(|mut d| d.next().is_some())
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        JobInFlight {
            root,
            worker,
            db,
            before: text(&before.stdout),
            compactor,
        }
    }

    /// Waits for `shale compact`; checks that it succeeded, left nothing
    /// staged, and that the database verifies and reads as before. Its
    /// stdout.
    fn finish_without_loss(self) -> String {
        let output = self.compactor.join().unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert_eq!(staged_files(&self.db), 0);
        verify(&self.db);
        let after = shale(&["scan", "--db", self.db.to_str().unwrap()]);
        assert_eq!(text(&after.stdout), self.before);
        text(&output.stdout)
    }
}

#[test]
fn a_worker_killed_mid_job_costs_only_time() {
    let job = JobInFlight::start();
    job.worker.signal(libc::SIGKILL);
    let stdout = job.finish_without_loss();
    assert!(stdout.contains("fallback"), "{stdout}");
}

#[test]
fn sigterm_in_the_middle_of_a_job_lets_it_finish() {
    let mut job = JobInFlight::start();
    job.worker.signal(libc::SIGTERM);
    // The worker drains: the running job finishes on the worker, its
    // engine adopts the outputs, and only then does the worker exit 0.
    let status = job.worker.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let log = std::fs::read_to_string(job.root.path().join("shale-worker.LOG")).unwrap();
    assert!(
        log.contains("waiting up to 30 s for 1 running jobs")
            && log.contains("1 of 1 running jobs finished; 0 finished sessions not adopted")
            && log.contains("Shutting down: no new calls; 0 running jobs cancelled")
            && log.contains("Worker stopped"),
        "{log}"
    );
    let stdout = job.finish_without_loss();
    assert!(!stdout.contains("fallback"), "{stdout}");
    assert!(stdout.contains("Executor remote"), "{stdout}");
}

#[test]
fn a_drain_that_runs_out_cancels_what_is_left() {
    let mut job = JobInFlight::start_with(&["--drain_timeout_s", "0"]);
    job.worker.signal(libc::SIGTERM);
    let status = job.worker.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let log = std::fs::read_to_string(job.root.path().join("shale-worker.LOG")).unwrap();
    assert!(
        log.contains("0 of 1 running jobs finished")
            && log.contains("1 running jobs cancelled; 1 staged sessions removed"),
        "{log}"
    );
    let stdout = job.finish_without_loss();
    assert!(stdout.contains("fallback"), "{stdout}");
}

#[test]
fn a_second_sigterm_exits_at_once_and_loses_nothing() {
    let mut job = JobInFlight::start();
    job.worker.signal(libc::SIGTERM);
    let log_path = job.root.path().join("shale-worker.LOG");
    let started = Instant::now();
    while !std::fs::read_to_string(&log_path).is_ok_and(|log| log.contains("Draining"))
        && started.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    job.worker.signal(libc::SIGTERM);
    let status = job.worker.child.wait().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    // 128 + SIGTERM: the running job was cancelled, its staging removed.
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGTERM),
        "{status:?}\n{log}"
    );
    assert!(log.contains("Second signal"), "{log}");
    let stdout = job.finish_without_loss();
    assert!(stdout.contains("fallback"), "{stdout}");
}

#[test]
fn sigterm_stops_the_worker_cleanly() {
    let root = tempfile::tempdir().unwrap();
    let mut worker = WorkerProcess::start(root.path(), &[]);
    worker.signal(libc::SIGTERM);
    let status = worker.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let log = std::fs::read_to_string(root.path().join("shale-worker.LOG")).unwrap();
    assert!(
        log.contains("listening on") && log.contains("Worker stopped"),
        "{log}"
    );
}

#[test]
fn bad_flags_and_unreachable_workers_say_what() {
    let root = tempfile::tempdir().unwrap();
    let root_arg = root.path().to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["worker", "--root", root_arg], "--listen"),
        (
            &[
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--root",
                "/nonexistent/x",
            ],
            "not a directory",
        ),
        (
            &["worker", "--listen", "nowhere", "--root", root_arg],
            "cannot listen",
        ),
        (
            &[
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--root",
                root_arg,
                "--executor",
                "remote",
            ],
            "remote",
        ),
        (
            &[
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--root",
                root_arg,
                "--executor",
                "warp",
            ],
            "warp",
        ),
        (
            &[
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--root",
                root_arg,
                "--token_file",
                "/nonexistent",
            ],
            "token file",
        ),
        (
            &[
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--root",
                root_arg,
                "--max_jobs",
                "0",
            ],
            "max_jobs",
        ),
        (
            &[
                "worker",
                "--listen",
                "127.0.0.1:0",
                "--root",
                root_arg,
                "--tls_cert",
                "x",
            ],
            "tls_key",
        ),
    ];
    for (args, needle) in cases {
        let output = shale(args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let db = root.path().join("db");
    make_db(&db, 100);
    let empty = root.path().join("empty-token");
    std::fs::write(&empty, "").unwrap();
    let db_arg = db.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--executor", "remote"], "needs remote_workers"),
        (&["--remote_workers", "ftp://host:1"], "http"),
        (
            &[
                "--remote_mode",
                "sideways",
                "--remote_workers",
                "127.0.0.1:1",
            ],
            "sideways",
        ),
        (
            &["--remote_timeout", "0", "--remote_workers", "127.0.0.1:1"],
            "remote_timeout",
        ),
        (
            &[
                "--remote_token_file",
                empty.to_str().unwrap(),
                "--remote_workers",
                "127.0.0.1:1",
            ],
            "empty",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["compact", "--db", db_arg];
        args.extend_from_slice(extra);
        let output = shale(&args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    // Nothing listens on port 1: every job falls back, and says so.
    let output = compact(
        &db,
        &["--executor", "remote", "--remote_workers", "127.0.0.1:1"],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("fallback") && stdout.contains("127.0.0.1:1"),
        "{stdout}"
    );
    verify(&db);
}
