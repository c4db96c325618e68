//! `shale stress`: a short run passes and leaves a database that verifies;
//! a value changed behind its back, or a key it never wrote, is found and
//! named; a run killed at a white-box kill point verifies after reopening.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn shale(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_shale"));
    command.args(args).stdin(Stdio::null());
    // Only the kill points a test arms.
    command.env_remove("SHALE_KILL_POINT");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run shale")
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn db_arg(dir: &Path) -> String {
    dir.to_str().unwrap().to_string()
}

/// A short run on a small key space, every operation kind included.
fn short_run(db: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "stress",
        "--db",
        db,
        "--ops",
        "3000",
        "--threads",
        "3",
        "--max_key",
        "300",
        "--seed",
        "7",
        "--compact_range_one_in",
        "200",
    ];
    args.extend_from_slice(extra);
    shale(&args, &[])
}

#[test]
fn a_short_run_passes_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(&dir.path().join("db"));
    let output = short_run(&db, &["--reopen", "1", "--compaction_executor=streaming"]);
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "ops: 3000",
        "reads verified",
        "compactions:",
        "writes: ",
        "end verify: keys=300",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing: {stdout}");
    }

    let output = shale(&["stress", "--db", &db, "--verify_only"], &[]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("verify: keys=300"));
    // The expected state keeps its key count: another is refused.
    let output = shale(
        &["stress", "--db", &db, "--ops", "10", "--max_key", "301"],
        &[],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("max_key=300"), "{}", text(&output));
}

#[test]
fn a_value_changed_behind_its_back_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(&dir.path().join("db"));
    let output = short_run(&db, &[]);
    assert!(output.status.success(), "{}", text(&output));

    let output = shale(
        &["put", "--db", &db, "key0000000042", "not what stress wrote"],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output));
    let output = shale(&["stress", "--db", &db, "--verify_only"], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("mismatch"), "{stderr}");
    assert!(stderr.contains("key0000000042 (index 42)"), "{stderr}");
    assert!(stderr.contains("found 21 bytes"), "{stderr}");

    // A run refuses to start on it too.
    let output = short_run(&db, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("key0000000042"), "{}", text(&output));
}

#[test]
fn a_key_it_never_wrote_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(&dir.path().join("db"));
    let output = short_run(&db, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let output = shale(&["put", "--db", &db, "stranger", "x"], &[]);
    assert!(output.status.success(), "{}", text(&output));
    let output = shale(&["stress", "--db", &db, "--verify_only"], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("unexpected key in the database: stranger"),
        "{}",
        text(&output)
    );
}

/// Needs a `shale` with kill points: `cargo test -p shale-cli --features
/// kill-points --test stress` (the test command runs it so).
#[cfg(feature = "kill-points")]
#[test]
fn killed_at_a_kill_point_it_verifies_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(&dir.path().join("db"));
    // Every write group passes the point; one in 50 kills.
    let output = shale(
        &[
            "stress",
            "--db",
            &db,
            "--until_killed",
            "--max_key",
            "500",
            "--seed",
            "3",
        ],
        &[
            ("SHALE_KILL_POINT", "wal-written-before-memtable"),
            ("SHALE_KILL_ODDS", "50"),
        ],
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(output.status.signal(), Some(9), "{}", text(&output));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("shale: kill point wal-written-before-memtable"),
        "{stderr}"
    );

    let output = shale(&["verify", "--db", &db], &[]);
    assert!(output.status.success(), "{}", text(&output));
    let output = shale(&["stress", "--db", &db, "--verify_only"], &[]);
    assert!(output.status.success(), "{}", text(&output));
    // Every group was killed before its writers were told: the write in
    // flight is reported, whether it landed or not.
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("pending=0 "), "{stdout}");
}

/// A default build ignores SHALE_KILL_POINT: a program that embeds the
/// engine cannot be made to kill itself by its environment.
#[cfg(not(feature = "kill-points"))]
#[test]
fn a_default_build_ignores_kill_points() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(&dir.path().join("db"));
    let output = shale(
        &[
            "stress",
            "--db",
            &db,
            "--ops",
            "2000",
            "--max_key",
            "500",
            "--seed",
            "4",
        ],
        &[("SHALE_KILL_POINT", "all"), ("SHALE_KILL_ODDS", "1")],
    );
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("kill point"), "{stderr}");
    let version = shale(&["--version"], &[]);
    assert!(
        !String::from_utf8_lossy(&version.stdout).contains("kill points"),
        "{}",
        text(&version)
    );
}

#[test]
fn bad_flags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(&dir.path().join("db"));
    for (flag, needle) in [
        ("--threads=0", "threads"),
        ("--value_size_min=4", "value_size_min"),
        ("--max_key=0", "max_key"),
    ] {
        let output = shale(&["stress", "--db", &db, "--ops", "1", flag], &[]);
        assert_eq!(output.status.code(), Some(2), "{flag}: {}", text(&output));
        assert!(text(&output).contains(needle), "{flag}: {}", text(&output));
    }
    // Nothing to verify in a directory stress never ran in.
    let output = shale(&["stress", "--db", &db, "--verify_only"], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("expected state"),
        "{}",
        text(&output)
    );
}
