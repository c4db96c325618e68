//! The `shale` binary's front door: short and long help, sizes with units,
//! progress only on a terminal, shell completions and the man page.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::{assert_ok, shale, shale_with_input, text};

/// The subcommands that take the database option flags.
const WITH_DB_FLAGS: &[&str] = &[
    "put", "get", "delete", "load", "scan", "compact", "verify", "repair", "stats", "bench", "ycsb",
];

#[test]
fn short_help_leaves_the_database_options_to_long_help() {
    for sub in WITH_DB_FLAGS {
        let short = shale(&[sub, "-h"]);
        assert_ok(&short);
        let short = text(&short.stdout);
        assert!(
            !short.contains("--write_buffer_size <"),
            "{sub} -h: {short}"
        );
        assert!(!short.contains("--remote_tls_key"), "{sub} -h: {short}");
        assert!(
            short.contains(&format!("`shale {sub} --help` lists them")),
            "{sub} -h: {short}"
        );

        let long = shale(&[sub, "--help"]);
        assert_ok(&long);
        let long = text(&long.stdout);
        for flag in [
            "--write_buffer_size <SIZE>",
            "--cache_size <SIZE>",
            "--compaction_executor <NAME>",
            "--remote_tls_key <FILE>",
            "Database options",
        ] {
            assert!(long.contains(flag), "{sub} --help lacks {flag}: {long}");
        }
        assert!(!long.contains("--help` lists them"), "{sub} --help: {long}");
        assert!(long.contains("powers of 1024"), "{sub} --help: {long}");
    }
    // `shale get -h` fits on a screen.
    let short = text(&shale(&["get", "-h"]).stdout);
    assert!(short.lines().count() < 25, "{short}");
    assert!(
        short.contains("--db <DIR>") && short.contains("<KEY>"),
        "{short}"
    );
}

#[test]
fn size_flags_take_units_and_show_defaults_with_units() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db").display().to_string();
    let input: String = (0..2000)
        .map(|i| format!("{i:08}\t{}\n", "x".repeat(40)))
        .collect();
    assert_ok(&shale_with_input(
        &[
            "load",
            "--db",
            &db,
            "--write_buffer_size=64KiB",
            "--max_file_size=1MB",
            "--block_size=4K",
            "--cache_size=8MiB",
            "--max_bytes_for_level_base",
            "1 MiB",
        ],
        input.as_bytes(),
    ));
    assert_ok(&shale(&["compact", "--db", &db, "--cache_size=-1"]));
    assert_eq!(
        text(&shale(&["scan", "--db", &db]).stdout).lines().count(),
        2000
    );

    let help = text(&shale(&["get", "--help"]).stdout);
    for default in [
        "(default 4MiB)",
        "(default 2MiB)",
        "(default 4KiB)",
        "default 8MiB",
    ] {
        assert!(help.contains(default), "{default}: {help}");
    }
    let help = text(&shale(&["worker", "--help"]).stdout);
    assert!(help.contains("--max_staged_bytes <SIZE>"), "{help}");
    assert!(help.contains("default 64GiB"), "{help}");
}

#[test]
fn a_bad_size_names_its_flag_and_shows_an_example() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = dir.display().to_string();
    for (args, flag) in [
        (
            vec!["put", "--db", &db, "--write_buffer_size=4XB", "k", "v"],
            "--write_buffer_size",
        ),
        (
            vec!["put", "--db", &db, "--cache_size=lots", "k", "v"],
            "--cache_size",
        ),
        (
            vec!["put", "--db", &db, "--block_size=1.5", "k", "v"],
            "--block_size",
        ),
        (
            vec![
                "worker",
                "--listen=127.0.0.1:0",
                "--root",
                &db,
                "--max_staged_bytes=64GIGS",
            ],
            "--max_staged_bytes",
        ),
    ] {
        let output = shale(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(
            stderr.contains("expected bytes like 4194304, 4MiB or 64GiB"),
            "{args:?}: {stderr}"
        );
        assert!(!dir.exists(), "{args:?} created the database");
    }
}

/// No terminal escape codes and no carriage returns: a bar drawn anyway.
#[track_caller]
fn assert_no_progress(what: &str, output: &Output) {
    let stderr = text(&output.stderr);
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\r'),
        "{what}: {stderr:?}"
    );
}

#[test]
fn progress_stays_off_a_stderr_that_is_not_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db").display().to_string();
    let input: String = (0..3000)
        .map(|i| format!("{i:08}\t{}\n", "y".repeat(100)))
        .collect();
    let load = shale_with_input(
        &["load", "--db", &db, "--write_buffer_size=64KiB"],
        input.as_bytes(),
    );
    assert_ok(&load);
    assert_no_progress("load", &load);
    assert!(load.stderr.is_empty(), "{}", text(&load.stderr));
    assert!(load.stdout.is_empty(), "{}", text(&load.stdout));

    // stdin a file: the size is known, still nothing drawn.
    let file = tmp.path().join("input.tsv");
    std::fs::write(&file, &input).unwrap();
    let load = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["load", "--db", &db])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert_ok(&load);
    assert!(load.stderr.is_empty(), "{}", text(&load.stderr));

    for sub in ["compact", "verify", "repair"] {
        let output = shale(&[sub, "--db", &db]);
        assert_ok(&output);
        assert_no_progress(sub, &output);
        assert!(output.stderr.is_empty(), "{sub}: {}", text(&output.stderr));
    }
}

/// Runs `command` under `script` (util-linux), which gives it a terminal,
/// and returns everything it wrote there; `None` without `script`.
fn on_a_terminal(command: &str) -> Option<String> {
    let output = Command::new("script")
        .args(["-qfec", command, "/dev/null"])
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        eprintln!(
            "skipped: script failed: {}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
        return None;
    }
    Some(text(&output.stdout))
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[test]
fn progress_shows_on_a_terminal_and_is_cleared() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let input: String = (0..3000)
        .map(|i| format!("{i:08}\t{}\n", "y".repeat(100)))
        .collect();
    assert_ok(&shale_with_input(
        &[
            "load",
            "--db",
            &dir.display().to_string(),
            "--write_buffer_size=64KiB",
        ],
        input.as_bytes(),
    ));
    let shale = env!("CARGO_BIN_EXE_shale");
    // stdout to a file, so that what the terminal shows is stderr's.
    let out = tmp.path().join("out.txt");
    let command = format!(
        "{shale} compact --db {} --executor streaming > {}",
        quote(&dir),
        quote(&out)
    );
    let Some(terminal) = on_a_terminal(&command) else {
        eprintln!("skipped: no `script` to run shale on a terminal");
        return;
    };
    assert!(terminal.contains("compact ["), "{terminal:?}");
    // Cleared at the end: the last thing written erases the line.
    assert!(terminal.contains("\x1b[2K"), "{terminal:?}");
    // stdout is the same as without a terminal.
    let printed = std::fs::read_to_string(&out).unwrap();
    assert!(!printed.contains('\x1b'), "{printed:?}");
    assert!(
        printed.lines().last().unwrap().starts_with("compact: "),
        "{printed}"
    );

    let file = tmp.path().join("input.tsv");
    std::fs::write(&file, &input).unwrap();
    let command = format!("{shale} load --db {} < {}", quote(&dir), quote(&file));
    let terminal = on_a_terminal(&command).unwrap();
    assert!(terminal.contains("load ["), "{terminal:?}");
}

#[test]
fn completions_for_every_shell() {
    let bash = shale(&["completions", "bash"]);
    assert_ok(&bash);
    let script = text(&bash.stdout);
    assert!(script.contains("shale"), "{script}");
    for word in ["compact", "completions", "--write_buffer_size"] {
        assert!(script.contains(word), "bash completion lacks {word}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let output = shale(&["completions", shell]);
        assert_ok(&output);
        let script = text(&output.stdout);
        assert!(
            script.contains("shale") && script.contains("compact"),
            "{shell}"
        );
    }
    let bad = shale(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("bash"), "{}", text(&bad.stderr));
}

#[test]
fn man_page_lists_the_subcommands_and_renders() {
    let man = shale(&["man"]);
    assert_ok(&man);
    let page = text(&man.stdout);
    assert!(page.starts_with(".ie") || page.starts_with(".TH"), "{page}");
    assert!(page.contains(".TH shale 1"), "{page}");
    for sub in ["compact", "verify", "worker", "completions"] {
        assert!(page.contains(sub), "man page lacks {sub}");
    }

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("man1");
    assert_ok(&shale(&["man", "--dir", &dir.display().to_string()]));
    for page in [
        "shale.1",
        "shale-get.1",
        "shale-compact.1",
        "shale-worker.1",
    ] {
        assert!(dir.join(page).exists(), "{page}");
    }
    let get = std::fs::read_to_string(dir.join("shale-get.1")).unwrap();
    assert!(get.contains("write_buffer_size"), "{get}");

    // Renders, where groff is installed.
    let Ok(mut groff) = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("skipped: no groff to render the man page");
        return;
    };
    groff.stdin.take().unwrap().write_all(&man.stdout).unwrap();
    let rendered = groff.wait_with_output().unwrap();
    assert_ok(&rendered);
    let rendered = text(&rendered.stdout);
    assert!(
        rendered.contains("SUBCOMMANDS") || rendered.contains("S\x08SU"),
        "{rendered}"
    );
    assert!(rendered.contains("compact"), "{rendered}");
}
