//! The `shale` binary, run against temporary directories.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use shale::{Options, WriteOptions, DB};
use shale_compact::testing;

use support::{assert_ok, shale, shale_with_input, stderr, stdout};

#[track_caller]
fn assert_fails(output: &Output, needle: &str) {
    assert!(
        !output.status.success(),
        "expected failure, stdout: {}",
        stdout(output)
    );
    assert!(
        stderr(output).contains(needle),
        "stderr does not mention {needle:?}: {}",
        stderr(output)
    );
}

fn db_dir(tmp: &tempfile::TempDir) -> (PathBuf, String) {
    let dir = tmp.path().join("db");
    let arg = dir.display().to_string();
    (dir, arg)
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

#[test]
fn put_get_delete_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, db) = db_dir(&tmp);
    assert_ok(&shale(&["put", "--db", &db, "apple", "red"]));
    assert_ok(&shale(&["put", "--db", &db, "--", "-dash", "-1"]));
    let got = shale(&["get", "--db", &db, "apple"]);
    assert_ok(&got);
    assert_eq!(stdout(&got), "red\n");
    assert_eq!(stdout(&shale(&["get", "--db", &db, "--", "-dash"])), "-1\n");

    assert_ok(&shale(&["delete", "--db", &db, "apple"]));
    let missing = shale(&["get", "--db", &db, "apple"]);
    // Its own exit status: not a failure (1), not a usage error (2).
    assert_eq!(missing.status.code(), Some(3));
    assert_eq!(stderr(&missing).trim(), "not found");
    assert!(missing.stdout.is_empty());
    // Deleting an absent key is fine.
    assert_ok(&shale(&["delete", "--db", &db, "never-there"]));

    let scan = shale(&["scan", "--db", &db]);
    assert_ok(&scan);
    assert_eq!(stdout(&scan), "-dash\t-1\n");
}

#[test]
fn hex_keys_and_values() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, db) = db_dir(&tmp);
    assert_ok(&shale(&["put", "--db", &db, "--hex", "00ff", "0A0b"]));
    assert_ok(&shale(&["put", "--db", &db, "--hex", "", "09"]));
    let got = shale(&["get", "--db", &db, "--hex", "00ff"]);
    assert_eq!(stdout(&got), "0a0b\n");
    let raw = shale(&["get", "--db", &db, "--hex", ""]);
    assert_eq!(stdout(&raw), "09\n");
    let scan = shale(&["scan", "--db", &db, "--hex"]);
    assert_eq!(stdout(&scan), "\t09\n00ff\t0a0b\n");
    let bounded = shale(&["scan", "--db", &db, "--hex", "--from", "00"]);
    assert_eq!(stdout(&bounded), "00ff\t0a0b\n");
    assert_ok(&shale(&["delete", "--db", &db, "--hex", "00ff"]));
    assert_eq!(
        shale(&["get", "--db", &db, "--hex", "00ff"]).status.code(),
        Some(3)
    );
}

#[test]
fn scan_bounds_and_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, db) = db_dir(&tmp);
    let input: String = (0..20).map(|i| format!("k{i:02}\tv{i}\n")).collect();
    assert_ok(&shale_with_input(&["load", "--db", &db], input.as_bytes()));
    let scan = shale(&["scan", "--db", &db, "--from", "k05", "--to", "k08"]);
    assert_eq!(stdout(&scan), "k05\tv5\nk06\tv6\nk07\tv7\n");
    let scan = shale(&["scan", "--db", &db, "--from", "k18", "--limit", "5"]);
    assert_eq!(stdout(&scan), "k18\tv18\nk19\tv19\n");
    let scan = shale(&["scan", "--db", &db, "--limit=2"]);
    assert_eq!(stdout(&scan), "k00\tv0\nk01\tv1\n");
    let scan = shale(&["scan", "--db", &db, "--limit", "0"]);
    assert_eq!(stdout(&scan), "");
}

#[test]
fn load_acknowledges_each_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, db) = db_dir(&tmp);
    let input = b"a\t1\nb\t2\twith tab\n\nc\t3\na\n";
    let load = shale_with_input(&["load", "--db", &db, "--ack", "--sync"], input);
    assert_ok(&load);
    assert_eq!(stdout(&load), "ok 1\nok 2\nok 3\nok 4\n");
    let scan = shale(&["scan", "--db", &db]);
    assert_eq!(stdout(&scan), "b\t2\twith tab\nc\t3\n");

    // Without --ack, nothing is printed.
    let load = shale_with_input(&["load", "--db", &db], b"d\t4\n");
    assert_ok(&load);
    assert_eq!(stdout(&load), "");
}

#[test]
fn load_stops_at_a_bad_line_after_writing_the_ones_before() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, db) = db_dir(&tmp);
    let load = shale_with_input(
        &["load", "--db", &db, "--hex", "--ack"],
        b"61\t31\n6g\t32\n63\t33\n",
    );
    assert_fails(&load, "line 2");
    assert_eq!(stdout(&load), "ok 1\n");
    let scan = shale(&["scan", "--db", &db, "--hex"]);
    assert_eq!(stdout(&scan), "61\t31\n");
}

/// A small deterministic generator (xorshift64*).
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn load_then_scan_returns_the_input() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, db) = db_dir(&tmp);
    let mut state = 0x1234_5678_9abc_def1u64;
    let mut entries = std::collections::BTreeMap::new();
    while entries.len() < 5000 {
        let key = format!("{:016x}", next_random(&mut state));
        let value = format!(
            "value-{}-{}",
            entries.len(),
            "x".repeat((entries.len() % 97) + 1)
        );
        entries.insert(key, value);
    }
    // Input in random (hash) order; output must come back sorted.
    let mut input = String::new();
    for (key, value) in entries.iter().rev() {
        input.push_str(&format!("{key}\t{value}\n"));
    }
    let load = shale_with_input(
        &[
            "load",
            "--db",
            &db,
            "--write_buffer_size=65536",
            "--block_size=1024",
        ],
        input.as_bytes(),
    );
    assert_ok(&load);
    let scan = shale(&["scan", "--db", &db]);
    assert_ok(&scan);
    let expected: String = entries.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect();
    assert!(stdout(&scan) == expected, "scan differs from the input");

    // Hex carries any byte, tabs and newlines included.
    let tmp = tempfile::tempdir().unwrap();
    let (_, db) = db_dir(&tmp);
    let mut binary = std::collections::BTreeMap::new();
    for i in 0..300u64 {
        let key = next_random(&mut state).to_be_bytes()[..(i % 8 + 1) as usize].to_vec();
        let value: Vec<u8> = (0..(i % 40)).map(|j| (i * 7 + j) as u8).collect();
        binary.insert(key, value);
    }
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let input: String = binary
        .iter()
        .map(|(k, v)| format!("{}\t{}\n", hex(k), hex(v)))
        .collect();
    assert_ok(&shale_with_input(
        &["load", "--db", &db, "--hex"],
        input.as_bytes(),
    ));
    let scan = shale(&["scan", "--db", &db, "--hex"]);
    assert_eq!(stdout(&scan), input);
}

/// Writes enough through the library to fill a few tables, then compacts.
fn write_compacted_db(dir: &Path) {
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        ..Options::default()
    };
    let db = DB::open(dir, options).unwrap();
    for i in 0..4000u32 {
        let value = format!("value {i} {}", "v".repeat(64));
        db.put(
            &WriteOptions::default(),
            format!("key{i:06}").as_bytes(),
            value.as_bytes(),
        )
        .unwrap();
    }
    db.compact_range(None, None).unwrap();
}

/// A database of 5,000 keys with 100-byte values loaded through `shale
/// load` with a small write buffer (several tables); returns its path.
fn db_of_5000_keys(tmp: &tempfile::TempDir) -> String {
    let (_, db) = db_dir(tmp);
    let input: String = (0..5000)
        .map(|i| format!("key{:06}\t{}\n", (i * 7919) % 5000, "v".repeat(100)))
        .collect();
    assert_ok(&shale_with_input(
        &["load", "--db", &db, "--write_buffer_size=100000"],
        input.as_bytes(),
    ));
    db
}

#[test]
fn compact_with_opencl_prints_kernel_times() {
    let tmp = tempfile::tempdir().unwrap();
    let db = db_of_5000_keys(&tmp);
    let compact = shale(&[
        "compact",
        "--db",
        &db,
        "--executor",
        "opencl",
        "--opencl_placement=c-compaction",
    ]);
    if !compact.status.success() {
        let stderr = String::from_utf8_lossy(&compact.stderr);
        testing::skip(
            "shale compact --executor opencl",
            &stderr,
            testing::PROVIDE_OPENCL,
        );
        assert!(stderr.contains("unavailable"), "{stderr}");
        return;
    }
    let text = stdout(&compact);
    assert!(
        text.lines().any(|l| l.starts_with("Executor opencl:")),
        "{text}"
    );
    for kernel in ["rank_merge", "encode_groups", "upload", "download"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("  {kernel}: ")) && l.ends_with("MB/s")),
            "{kernel} missing in {text}"
        );
    }
    assert!(text.contains("  pipeline: stages busy"), "{text}");
    assert_eq!(stdout(&shale(&["scan", "--db", &db])).lines().count(), 5000);
}

#[test]
fn compact_prints_executor_lines_and_one_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let db = db_of_5000_keys(&tmp);
    let compact = shale(&["compact", "--db", &db, "--executor", "streaming"]);
    assert_ok(&compact);
    let text = stdout(&compact);
    let lines: Vec<&str> = text.lines().collect();
    let summaries: Vec<&&str> = lines.iter().filter(|l| l.starts_with("compact:")).collect();
    assert_eq!(summaries.len(), 1, "{text}");
    assert_eq!(
        lines.last(),
        summaries.first().copied(),
        "summary comes last"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("Executor streaming:")),
        "{text}"
    );

    // compact: read <bytes> bytes, wrote <bytes> bytes, <s> s, <x> MB/s,
    //   host CPU <s> s, <x> CPU-s/GB, executor <name>
    let summary = summaries[0];
    let fields: Vec<&str> = summary
        .strip_prefix("compact: ")
        .unwrap()
        .split(", ")
        .collect();
    assert_eq!(fields.len(), 7, "{summary}");
    // A number between `prefix` and `suffix` in `field`.
    let number = |field: &str, prefix: &str, suffix: &str| -> f64 {
        field
            .strip_prefix(prefix)
            .and_then(|f| f.strip_suffix(suffix))
            .unwrap_or_else(|| panic!("{field:?} in {text}"))
            .parse()
            .unwrap_or_else(|e| panic!("{field:?} in {text}: {e}"))
    };
    let read = number(fields[0], "read ", " bytes");
    let written = number(fields[1], "wrote ", " bytes");
    let seconds = number(fields[2], "", " s");
    let speed = number(fields[3], "", " MB/s");
    let cpu = number(fields[4], "host CPU ", " s");
    let cpu_per_gb = number(fields[5], "", " CPU-s/GB");
    assert_eq!(fields[6], "executor streaming");
    assert!(read > 0.0 && written > 0.0, "{summary}");
    assert_eq!(read.fract(), 0.0);
    assert!(seconds >= 0.0 && speed >= 0.0, "{summary}");
    // The whole process's CPU time, and that time per GB of input.
    assert!(cpu > 0.0 && cpu.is_finite(), "{summary}");
    assert!(cpu_per_gb > 0.0 && cpu_per_gb.is_finite(), "{summary}");

    // The line before it counts from the open on, so at least as much.
    let whole = lines[lines.len() - 2];
    let fields: Vec<&str> = whole
        .strip_prefix("compact, open included: ")
        .unwrap_or_else(|| panic!("{text}"))
        .split(", ")
        .collect();
    assert_eq!(fields.len(), 4, "{whole}");
    assert!(number(fields[0], "read ", " bytes") >= read, "{text}");
    assert!(number(fields[1], "wrote ", " bytes") >= written, "{text}");
    assert!(number(fields[2], "", " s") >= seconds, "{text}");
    assert!(number(fields[3], "", " MB/s") >= 0.0, "{text}");

    // Everything is still there.
    let scan = shale(&["scan", "--db", &db]);
    assert_eq!(stdout(&scan).lines().count(), 5000);
    // A second compaction has nothing left to read but still prints one
    // line, with no CPU per GB of nothing.
    let again = shale(&["compact", "--db", &db]);
    assert_ok(&again);
    let text = stdout(&again);
    let summaries: Vec<&str> = text.lines().filter(|l| l.starts_with("compact:")).collect();
    assert_eq!(summaries.len(), 1, "{text}");
    assert!(
        summaries[0].contains(", - CPU-s/GB, executor auto"),
        "{text}"
    );
}

#[test]
fn compact_json_has_the_summary_and_host_cpu() {
    let tmp = tempfile::tempdir().unwrap();
    let db = db_of_5000_keys(&tmp);
    let path = tmp.path().join("compact.json");
    let compact = shale(&[
        "compact",
        "--db",
        &db,
        "--executor",
        "parallel",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_ok(&compact);
    let body = std::fs::read_to_string(&path).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(json["schema"], 1, "{json}");
    assert_eq!(json["engine"], "ShaleDB", "{json}");
    assert_eq!(json["executor"], "parallel", "{json}");
    assert!(json["compression"].is_string(), "{json}");
    let number = |span: &str, field: &str| -> f64 {
        json[span][field]
            .as_f64()
            .unwrap_or_else(|| panic!("{span}.{field} is not a number in {json}"))
    };
    for span in ["compaction", "open_included"] {
        assert!(number(span, "read_bytes") > 0.0, "{json}");
        assert!(number(span, "written_bytes") > 0.0, "{json}");
        for field in ["host_cpu_seconds", "cpu_seconds_per_gb"] {
            let value = number(span, field);
            assert!(value > 0.0 && value.is_finite(), "{span}.{field} in {json}");
        }
        let (user, system) = (
            number(span, "host_cpu_user_seconds"),
            number(span, "host_cpu_system_seconds"),
        );
        assert!(user >= 0.0 && system >= 0.0, "{json}");
        assert!((user + system - number(span, "host_cpu_seconds")).abs() < 1e-6);
        assert!(number(span, "seconds") >= 0.0 && number(span, "mb_per_second") >= 0.0);
    }
    // The same figures as the text line.
    let text = stdout(&compact);
    let line = text.lines().find(|l| l.starts_with("compact:")).unwrap();
    let read = json["compaction"]["read_bytes"].as_u64().unwrap();
    assert!(
        line.starts_with(&format!("compact: read {read} bytes, ")),
        "{line}"
    );
    assert!(
        json["executors"]["parallel"]["jobs"].as_u64().unwrap() > 0,
        "{json}"
    );

    // A path that cannot be written fails before anything is compacted.
    let bad = shale(&["compact", "--db", &db, "--json", "/nonexistent/dir/c.json"]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("--json /nonexistent/dir/c.json"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn verify_passes_then_names_a_damaged_table() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    write_compacted_db(&dir);
    let verify = shale(&["verify", "--db", &db]);
    assert_ok(&verify);
    assert!(
        stdout(&verify).starts_with("ok: MANIFEST-"),
        "{}",
        stdout(&verify)
    );

    let table = files_with_suffix(&dir, ".ldb")
        .into_iter()
        .next()
        .expect("a table");
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 0x01;
    std::fs::write(&table, &bytes).unwrap();
    let verify = shale(&["verify", "--db", &db]);
    assert_eq!(verify.status.code(), Some(1));
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    assert_fails(&verify, &name);
    assert_fails(&verify, "at offset 0");
    assert!(
        stderr(&verify).starts_with("error: "),
        "{}",
        stderr(&verify)
    );
}

#[test]
fn verify_works_while_the_database_is_open() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    write_compacted_db(&dir);
    let open = DB::open(&dir, Options::default()).unwrap();
    open.put(&WriteOptions { sync: true }, b"late", b"write")
        .unwrap();
    let verify = shale(&["verify", "--db", &db]);
    assert_ok(&verify);
    // The commands that write open the database, which is locked.
    assert_fails(&shale(&["put", "--db", &db, "k", "v"]), "in use");
    assert_fails(&shale(&["compact", "--db", &db]), "in use");
    // The ones that only read open it read-only: no lock needed.
    assert_eq!(stdout(&shale(&["get", "--db", &db, "late"])), "write\n");
    drop(open);
    assert_eq!(stdout(&shale(&["get", "--db", &db, "late"])), "write\n");
}

/// Every file of `dir` with its bytes.
fn dir_contents(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// `get`, `scan`, `stats` and `dump` only read: the directory is
/// byte-identical after them (before, a `get` left new L0 tables, a new
/// MANIFEST and LOG.old behind), and they work while another process
/// writes the database.
#[test]
fn read_commands_change_no_byte_and_work_while_another_process_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    write_compacted_db(&dir);
    assert_ok(&shale(&["put", "--db", &db, "apple", "red"]));
    assert_ok(&shale(&["put", "--db", &db, "banana", "yellow"]));
    let table = files_with_suffix(&dir, ".ldb")
        .into_iter()
        .next()
        .expect("a table");
    let table = table.display().to_string();
    let manifest = files_with_suffix(&dir, "")
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .expect("a MANIFEST")
        .display()
        .to_string();
    let reads: Vec<Vec<&str>> = vec![
        vec!["get", "--db", &db, "apple"],
        vec!["scan", "--db", &db, "--limit", "5"],
        vec!["stats", "--db", &db],
        vec!["dump", &table],
        vec!["dump", &manifest],
    ];
    let before = dir_contents(&dir);
    for args in &reads {
        assert_ok(&shale(args));
    }
    assert_eq!(stdout(&shale(&["get", "--db", &db, "banana"])), "yellow\n");
    assert_eq!(
        dir_contents(&dir),
        before,
        "a read command changed the directory"
    );
    // Again while this process holds the database open and writes to it
    // (its open wrote a new MANIFEST: `dump` reads files by name, without
    // the database, and is left out).
    let open = DB::open(&dir, Options::default()).unwrap();
    open.put(&WriteOptions { sync: true }, b"cherry", b"dark red")
        .unwrap();
    for args in &reads[..3] {
        assert_ok(&shale(args));
    }
    assert_eq!(
        stdout(&shale(&["get", "--db", &db, "cherry"])),
        "dark red\n"
    );
    open.put(&WriteOptions::default(), b"damson", b"purple")
        .unwrap();
    drop(open);
}

#[test]
fn missing_database_is_a_clear_error_and_nothing_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    for args in [
        vec!["get", "--db", &db, "k"],
        vec!["scan", "--db", &db],
        vec!["compact", "--db", &db],
        vec!["stats", "--db", &db],
        vec!["delete", "--db", &db, "k"],
    ] {
        let output = shale(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert_fails(&output, "no database");
        assert!(!dir.exists(), "{args:?} created the directory");
    }
    assert_fails(&shale(&["verify", "--db", &db]), "not a database");
    // An existing directory that is not a database is left untouched,
    // by a command that only reads even when asked to create it.
    std::fs::create_dir(&dir).unwrap();
    assert_fails(&shale(&["scan", "--db", &db]), "no database");
    assert_fails(
        &shale(&["scan", "--db", &db, "--create_if_missing"]),
        "no database",
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // A command that writes creates it when asked.
    assert_ok(&shale(&["delete", "--db", &db, "k", "--create_if_missing"]));
    assert!(dir.join("CURRENT").exists());
}

#[test]
fn bad_flags_fail_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    let cases: &[(&[&str], &str)] = &[
        (&["put", "--db", &db, "--nope", "k", "v"], "--nope"),
        (
            &["put", "--db", &db, "--block_size=abc", "k", "v"],
            "block_size",
        ),
        (
            &["put", "--db", &db, "--write_buffer_size", "-5", "k", "v"],
            "write_buffer_size",
        ),
        (
            &["put", "--db", &db, "--compression=zstd", "k", "v"],
            "zstd",
        ),
        (
            &["put", "--db", &db, "--block_size=0", "k", "v"],
            "block_size",
        ),
        (
            &["put", "--db", &db, "--level_multiplier=0.5", "k", "v"],
            "level_multiplier",
        ),
        (
            &["put", "--db", &db, "--l0_stop_writes_trigger=2", "k", "v"],
            "L0",
        ),
        (&["put", "--db", &db, "--hex", "zz", "00"], "hex"),
        (&["put", "--db", &db, "--hex", "00", "abc"], "odd"),
        (&["put", "--db", &db, "k"], "VALUE"),
        (&["put", "k", "v"], "--db"),
        (&["load", "--db", &db, "--compaction_executor=warp"], "warp"),
        (&["compact", "--db", &db, "--executor", "warp"], "warp"),
        (
            &["compact", "--db", &db, "--opencl_placement=gpu-only"],
            "gpu-only",
        ),
        (
            &["compact", "--db", &db, "--opencl_memory_budget=0"],
            "opencl_memory_budget",
        ),
        (&["compact", "--db", &db, "--opencl_device=first"], "first"),
        (&["scan", "--db", &db, "--limit=many"], "limit"),
        (
            &["compact", "--db", &db, "--compaction_threads=-1"],
            "compaction_threads",
        ),
        (
            &["compact", "--db", &db, "--compaction_nice=20"],
            "compaction_nice",
        ),
        (
            &["compact", "--db", &db, "--compaction_nice=-5"],
            "compaction_nice",
        ),
        (&["scan", "--db", &db, "--hex", "--from", "x"], "hex"),
        (&["frobnicate", "--db", &db], "frobnicate"),
    ];
    for (args, needle) in cases {
        let output = shale(args);
        assert_fails(&output, needle);
        assert!(!dir.exists(), "{args:?} created the database");
    }
    let dump = shale(&["dump", &tmp.path().join("notes.txt").display().to_string()]);
    assert_fails(&dump, "unknown file type");
}

#[test]
fn db_bench_flags_are_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    let flags = [
        "--write_buffer_size=65536",
        "--max_file_size=100000",
        "--block_size=512",
        "--block_restart_interval=8",
        "--bloom_bits=-1",
        "--compression=none",
        "--cache_size=1000000",
        "--open_files=100",
        "--l0_compaction_trigger=2",
        "--l0_slowdown_writes_trigger=4",
        "--l0_stop_writes_trigger=6",
        "--max_bytes_for_level_base=200000",
        "--level_multiplier=4",
        "--max_background_compactions=2",
        "--compaction_executor=parallel",
        "--compaction_threads=1",
        "--compaction_nice=5",
    ];
    let input: String = (0..3000)
        .map(|i| format!("{:08}\t{}\n", i, "z".repeat(50)))
        .collect();
    let mut args = vec!["load", "--db", &db];
    args.extend(flags);
    assert_ok(&shale_with_input(&args, input.as_bytes()));
    let mut args = vec!["compact", "--db", &db];
    args.extend(flags);
    assert_ok(&shale(&args));
    // Uncompressed tables: the values are visible in the files.
    let table = files_with_suffix(&dir, ".ldb").into_iter().next().unwrap();
    let bytes = std::fs::read(table).unwrap();
    assert!(bytes.windows(50).any(|w| w == "z".repeat(50).as_bytes()));
    let mut args = vec!["get", "--db", &db, "00001234"];
    args.extend(flags);
    assert_eq!(stdout(&shale(&args)), format!("{}\n", "z".repeat(50)));
    assert_ok(&shale(&["verify", "--db", &db]));
}

#[test]
fn stats_lists_levels_and_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    write_compacted_db(&dir);
    let stats = shale(&["stats", "--db", &db]);
    assert_ok(&stats);
    let text = stdout(&stats);
    assert!(text.contains("Level  Files"), "{text}");
    assert!(text.contains("--- level 0 ---"), "{text}");
    assert!(text.contains("key000000"), "{text}");
}

#[test]
fn dump_prints_tables_logs_and_manifests() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    let dump_logs = || -> String {
        files_with_suffix(&dir, ".log")
            .iter()
            .map(|log| stdout(&shale(&["dump", &log.display().to_string()])))
            .collect()
    };
    assert_ok(&shale(&["put", "--db", &db, "k\u{1}", "v"]));
    let text = dump_logs();
    assert_eq!(text, "--- offset 0; sequence 1\n  put 'k\\x01' 'v'\n");
    // Opening again replays the log into a table: the next log is new.
    assert_ok(&shale(&["delete", "--db", &db, "gone"]));
    let text = dump_logs();
    assert_eq!(text, "--- offset 0; sequence 2\n  del 'gone'\n");

    let current = std::fs::read_to_string(dir.join("CURRENT")).unwrap();
    let manifest = dir.join(current.trim_end());
    let dump = shale(&["dump", &manifest.display().to_string()]);
    assert_ok(&dump);
    let text = stdout(&dump);
    assert!(text.starts_with("--- offset 0; VersionEdit {\n"), "{text}");
    assert!(
        text.contains("\n  Comparator: leveldb.BytewiseComparator"),
        "{text}"
    );

    assert_ok(&shale(&["compact", "--db", &db]));
    // The two keys do not overlap, so each may stay in a table of its own:
    // find the table holding the first one.
    let tables = files_with_suffix(&dir, ".ldb");
    let table = tables
        .iter()
        .find(|t| {
            stdout(&shale(&["dump", &t.display().to_string()])) == "'k\\x01' @ 1 : val => 'v'\n"
        })
        .unwrap_or_else(|| panic!("no table holds k\\x01: {tables:?}"))
        .clone();

    // A damaged table: the error names it.
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[2] ^= 0x20;
    std::fs::write(&table, &bytes).unwrap();
    let dump = shale(&["dump", &table.display().to_string()]);
    assert_fails(&dump, &table.file_name().unwrap().to_string_lossy());
}

#[test]
fn repair_rebuilds_a_lost_manifest_and_says_what_was_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    write_compacted_db(&dir);
    for manifest in files_with_suffix(&dir, "") {
        if manifest
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("MANIFEST-")
        {
            std::fs::remove_file(manifest).unwrap();
        }
    }
    let table = files_with_suffix(&dir, ".ldb")
        .into_iter()
        .next()
        .expect("a table");
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 0x01;
    std::fs::write(&table, &bytes).unwrap();
    assert_fails(&shale(&["scan", "--db", &db]), "MANIFEST");

    let repair = shale(&["repair", "--db", &db]);
    assert_ok(&repair);
    let text = stdout(&repair);
    assert!(text.starts_with("repaired: MANIFEST-"), "{text}");
    assert!(text.contains("\nlost: 1 data block\n"), "{text}");
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        text.contains(&format!("moved lost/{name}: damaged")),
        "{text}"
    );
    assert!(dir.join("lost").join(&name).exists());

    // The database opens, checks clean and holds all but the lost block.
    assert_ok(&shale(&["verify", "--db", &db]));
    let scan = shale(&["scan", "--db", &db]);
    assert_ok(&scan);
    let lines = stdout(&scan).lines().count();
    assert!((3900..4000).contains(&lines), "{lines} keys");
}

#[test]
fn repair_fails_clearly_without_a_database_or_while_it_is_open() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, db) = db_dir(&tmp);
    let missing = shale(&["repair", "--db", &db]);
    assert_eq!(missing.status.code(), Some(1));
    assert_fails(&missing, "nothing to repair");
    assert!(!dir.exists());
    std::fs::create_dir(&dir).unwrap();
    assert_fails(&shale(&["repair", "--db", &db]), "no database files");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    write_compacted_db(&dir);
    let open = DB::open(&dir, Options::default()).unwrap();
    assert_fails(&shale(&["repair", "--db", &db]), "in use");
    drop(open);
    assert_ok(&shale(&["repair", "--db", &db]));
    assert_eq!(
        stdout(&shale(&["get", "--db", &db, "key000042"])),
        format!("value 42 {}\n", "v".repeat(64))
    );
}
