//! `shale worker` as a real second process on loopback: `shale compact`
//! through it writes byte for byte the tables `streaming` writes, in both
//! modes; a worker killed in the middle of a job costs only time (the job
//! falls back, prints `fallback`, and the database verifies); SIGTERM lets
//! a running job finish before the worker exits, a second SIGTERM exits at
//! once, and either way nothing is lost; bad flags and unreachable workers
//! give clear errors. As a service: its flags from environment variables,
//! its LOG on stderr, SIGHUP reloading the token file, `/metrics` and
//! `/healthz` over HTTP.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shale::{Options, WriteOptions, DB};
use shale_compact::testing::http_get;

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
    /// The line it printed when it began to listen.
    line: String,
}

impl WorkerProcess {
    /// A worker on `127.0.0.1:0` under `root`, its LOG in the file only
    /// (stderr is the test's own).
    fn start(root: &Path, extra: &[&str]) -> WorkerProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_shale"));
        command
            .args(["worker", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra)
            .env("SHALE_WORKER_LOG_TO", "file")
            .stderr(Stdio::inherit());
        WorkerProcess::spawn(command)
    }

    /// Starts `command` (a `shale worker` with its settings) and waits for
    /// the line saying where it listens.
    fn spawn(mut command: Command) -> WorkerProcess {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
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
        WorkerProcess {
            child,
            address,
            line,
        }
    }

    /// The metrics address its line names (`metrics on ADDR`).
    fn metrics_address(&self) -> String {
        let at = self
            .line
            .split("metrics on ")
            .nth(1)
            .unwrap_or_else(|| panic!("no metrics address in {:?}", self.line));
        at.trim_end_matches(|c: char| c == ')' || c.is_whitespace())
            .to_string()
    }

    /// Its stderr, read on a thread of its own as it comes (the pipe never
    /// fills).
    fn collect_stderr(&mut self) -> Arc<Mutex<String>> {
        let collected = Arc::new(Mutex::new(String::new()));
        let mut stderr = self.child.stderr.take().unwrap();
        let into = collected.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        collected
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
        // Settled as a read-write open leaves it (its own compactions
        // done), so that `shale compact` has one job: the one in flight on
        // the worker. (`shale scan` used to do this as a side effect; it
        // opens the database read-only now.)
        {
            let settled = DB::open(&db, Options::default()).unwrap();
            settled.wait_for_compactions().unwrap();
        }
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

/// Waits (at most 30 s) until `read()` contains `needle`; what it read last.
fn wait_for(what: &str, needle: &str, read: impl Fn() -> String) -> String {
    let started = Instant::now();
    loop {
        let text = read();
        if text.contains(needle) {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: no {needle:?} within 30 s in:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `shale compact --executor remote` of a fresh copy of `source` named
/// `name` through `worker` with `token`: its stdout, after checking that
/// the database verifies.
fn compact_with_token(source: &Path, name: &str, worker: &str, token: &Path) -> String {
    let db = source.with_file_name(name);
    copy_db(source, &db);
    let output = compact(
        &db,
        &[
            "--executor",
            "remote",
            "--remote_workers",
            worker,
            "--remote_token_file",
            token.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    verify(&db);
    text(&output.stdout)
}

#[test]
fn a_worker_takes_every_setting_from_the_environment() {
    // `--help` names the variables.
    let help = shale(&["worker", "--help"]);
    let help_text = text(&help.stdout);
    for variable in [
        "SHALE_WORKER_LISTEN",
        "SHALE_WORKER_ROOT",
        "SHALE_WORKER_TOKEN_FILE",
        "SHALE_WORKER_LOG_TO",
        "SHALE_WORKER_METRICS_LISTEN",
    ] {
        assert!(
            help_text.contains(&format!("[env: {variable}")),
            "{variable}: {help_text}"
        );
    }

    let root = tempfile::tempdir().unwrap();
    let token = root.path().join("token");
    std::fs::write(&token, "from-env\n").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_shale"));
    command
        .arg("worker")
        .env("SHALE_WORKER_LISTEN", "127.0.0.1:0")
        .env("SHALE_WORKER_ROOT", root.path())
        .env("SHALE_WORKER_TOKEN_FILE", &token)
        .env("SHALE_WORKER_EXECUTOR", "streaming")
        .env("SHALE_WORKER_MAX_JOBS", "3")
        .env("SHALE_WORKER_METRICS_LISTEN", "127.0.0.1:0")
        .env("SHALE_WORKER_DRAIN_TIMEOUT_S", "5")
        .env("SHALE_WORKER_LOG_TO", "stderr")
        .stderr(Stdio::piped());
    let mut worker = WorkerProcess::spawn(command);
    let stderr = worker.collect_stderr();
    assert!(
        worker
            .line
            .contains("executor streaming, up to 3 jobs, 1 token")
            && worker.line.contains("metrics on 127.0.0.1:"),
        "{}",
        worker.line
    );
    // The LOG goes to stderr, and no LOG file is written.
    wait_for("stderr", "Worker listening on", || {
        stderr.lock().unwrap().clone()
    });
    assert!(!root.path().join("shale-worker.LOG").exists());

    let source = root.path().join("source");
    make_db(&source, 3_000);
    let stdout = compact_with_token(&source, "db", &worker.address, &token);
    assert!(
        stdout.contains("Executor remote") && !stdout.contains("fallback"),
        "{stdout}"
    );
    // A wrong token is refused: the token file came from the environment.
    let wrong = root.path().join("wrong");
    std::fs::write(&wrong, "not-it\n").unwrap();
    let stdout = compact_with_token(&source, "db-wrong", &worker.address, &wrong);
    assert!(stdout.contains("fallback"), "{stdout}");

    worker.signal(libc::SIGTERM);
    let status = worker.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let log = wait_for("stderr", "Worker stopped", || {
        stderr.lock().unwrap().clone()
    });
    assert!(
        log.contains("Draining: no new calls; waiting up to 5 s"),
        "{log}"
    );
    assert!(!root.path().join("shale-worker.LOG").exists());
}

#[test]
fn the_log_goes_to_stderr_and_the_file_by_default() {
    let root = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_shale"));
    command
        .args([
            "worker",
            "--listen",
            "127.0.0.1:0",
            "--executor",
            "streaming",
            "--root",
        ])
        .arg(root.path())
        .env_remove("SHALE_WORKER_LOG_TO")
        .stderr(Stdio::piped());
    let mut worker = WorkerProcess::spawn(command);
    let stderr = worker.collect_stderr();
    worker.signal(libc::SIGTERM);
    assert!(worker.child.wait().unwrap().success());
    let on_stderr = wait_for("stderr", "Worker stopped", || {
        stderr.lock().unwrap().clone()
    });
    let in_file = std::fs::read_to_string(root.path().join("shale-worker.LOG")).unwrap();
    for needle in [
        "Worker listening on",
        "Signal received: draining",
        "Worker stopped",
    ] {
        assert!(on_stderr.contains(needle), "stderr: {needle}: {on_stderr}");
        assert!(in_file.contains(needle), "file: {needle}: {in_file}");
    }
    // The same lines, whole, in both.
    for line in in_file.lines() {
        assert!(
            on_stderr.contains(line),
            "{line:?} not on stderr: {on_stderr}"
        );
    }
}

#[test]
fn sighup_reloads_the_token_file() {
    let root = tempfile::tempdir().unwrap();
    let tokens = root.path().join("tokens");
    std::fs::write(&tokens, "old-token\n").unwrap();
    let old = root.path().join("old");
    std::fs::write(&old, "old-token\n").unwrap();
    let new = root.path().join("new");
    std::fs::write(&new, "new-token\n").unwrap();
    let worker = WorkerProcess::start(
        root.path(),
        &[
            "--executor",
            "streaming",
            "--token_file",
            tokens.to_str().unwrap(),
        ],
    );
    let log_path = root.path().join("shale-worker.LOG");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let source = root.path().join("source");
    make_db(&source, 3_000);
    // Whether a compaction through the worker with `token` ran there.
    let works = |name: &str, token: &Path| {
        let stdout = compact_with_token(&source, name, &worker.address, token);
        let remote = !stdout.contains("fallback");
        assert!(
            !remote || stdout.contains("Executor remote"),
            "{name}: {stdout}"
        );
        remote
    };
    assert!(works("old-before", &old), "the old token works at first");
    assert!(
        !works("new-before", &new),
        "the new token works before SIGHUP"
    );

    // The new file, in place, then SIGHUP.
    std::fs::write(&tokens, "# rotated\nnew-token\n").unwrap();
    worker.signal(libc::SIGHUP);
    wait_for("LOG", "reloaded: 1 token;", log);
    assert!(
        works("new-after", &new),
        "the new token is refused after SIGHUP"
    );
    assert!(
        !works("old-after", &old),
        "the old token still works after SIGHUP"
    );

    // A file that does not parse keeps the tokens in use, and says why.
    std::fs::write(&tokens, "bad ../escape\n").unwrap();
    worker.signal(libc::SIGHUP);
    let text = wait_for("LOG", "not reloaded", log);
    assert!(text.contains("the tokens in use stay"), "{text}");
    assert!(text.contains(".."), "{text}");
    assert!(works("new-kept", &new), "a bad file dropped the tokens");
    // So does a file that is gone.
    std::fs::remove_file(&tokens).unwrap();
    worker.signal(libc::SIGHUP);
    wait_for("LOG", "No such file", log);
    assert!(works("new-kept-2", &new));
    // The worker is still up and serving after three SIGHUPs.
    assert!(worker.line.contains("1 token"));
}

#[test]
fn metrics_and_health_are_served_over_http_and_nothing_else() {
    let root = tempfile::tempdir().unwrap();
    let worker = WorkerProcess::start(root.path(), &["--metrics_listen", "127.0.0.1:0"]);
    let at = worker.metrics_address();
    let metrics = http_get(&at, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
    assert!(
        metrics.contains("content-type: text/plain; version=0.0.4"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE shale_worker_running_jobs gauge")
            && metrics.contains("shale_worker_running_jobs 0"),
        "{metrics}"
    );
    let health = http_get(&at, "/healthz");
    assert!(
        health.starts_with("HTTP/1.1 200 OK\r\n") && health.ends_with("\r\n\r\nok\n"),
        "{health}"
    );
    for path in ["/", "/nope", "/metricsx", "/healthz/deeper"] {
        let answer = http_get(&at, path);
        assert!(
            answer.starts_with("HTTP/1.1 404 Not Found"),
            "{path}: {answer}"
        );
    }
}
