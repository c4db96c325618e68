//! `shale bench --json FILE`: the run as one JSON document, end to end at
//! tiny sizes (docs/benchmarks.md, "`shale bench --json`"). No timing is
//! asserted beyond "positive".

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::path::Path;

use serde_json::Value;

use support::{assert_ok, shale, text};

#[track_caller]
fn read_json(path: &Path) -> Value {
    let body = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[track_caller]
fn number(value: &Value, field: &str) -> f64 {
    value[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number in {value}"))
}

#[test]
fn json_describes_the_run_and_its_benchmarks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let path_arg = path.to_str().unwrap();
    let output = shale(&[
        "bench",
        "--benchmarks=fillrandom,readrandom",
        "--num=2000",
        "--histogram=1",
        "--compression=none",
        "--json",
        path_arg,
    ]);
    assert_ok(&output);
    let stdout = text(&output.stdout);
    let json = read_json(&path);

    assert_eq!(json["schema"], 1);
    assert_eq!(json["engine"], "ShaleDB");
    assert!(json["version"].is_string(), "{json}");
    assert!(json["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--num=2000"));
    let environment = &json["environment"];
    assert!(environment["date"].is_string(), "{environment}");
    assert!(environment["optimized"].is_boolean(), "{environment}");
    assert!(environment["warnings"].is_array(), "{environment}");

    let flags = &json["flags"];
    assert_eq!(flags["num"], 2000);
    assert_eq!(flags["reads"], 2000);
    assert_eq!(flags["threads"], 1);
    assert_eq!(flags["value_size"], 100);
    assert_eq!(flags["key_size"], 16);
    assert_eq!(flags["compression"], "none");
    assert_eq!(flags["histogram"], true);
    assert!(flags["executor"].is_string(), "{flags}");
    assert_eq!(
        flags["benchmarks"],
        serde_json::json!(["fillrandom", "readrandom"])
    );

    let benchmarks = json["benchmarks"].as_array().unwrap();
    let names: Vec<&str> = benchmarks
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fillrandom", "readrandom"]);
    for benchmark in benchmarks {
        assert_eq!(benchmark["ops"], 2000, "{benchmark}");
        assert_eq!(benchmark["threads"], 1, "{benchmark}");
        assert!(number(benchmark, "micros_per_op") > 0.0, "{benchmark}");
        assert!(number(benchmark, "seconds") > 0.0, "{benchmark}");
        let latency = &benchmark["latency"];
        assert_eq!(latency["count"], 2000, "{benchmark}");
        for field in ["average", "p50", "p99", "p999", "max"] {
            assert!(number(latency, field) > 0.0, "{field}: {benchmark}");
        }
        assert!(number(latency, "p50") <= number(latency, "p99"));
        assert!(number(latency, "p99") <= number(latency, "p999"));
        assert!(number(latency, "p999") <= number(latency, "max"));
        // The text line prints the same figures.
        let name = benchmark["name"].as_str().unwrap();
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name:<12} : ")))
            .unwrap_or_else(|| panic!("no {name} line in {stdout}"));
        let micros = format!("{:.3} micros/op;", number(benchmark, "micros_per_op"));
        assert!(line.contains(&micros), "{line} vs {micros}");
        match benchmark["mb_per_second"].as_f64() {
            Some(rate) => {
                assert!(rate > 0.0, "{benchmark}");
                let rate = format!("{rate:.1} MB/s");
                assert!(line.contains(&rate), "{line} vs {rate}");
            }
            None => assert!(!line.contains("MB/s"), "{line}"),
        }
    }
    // db_bench 1.23 counts bytes in fills, not in readrandom.
    assert!(benchmarks[0]["mb_per_second"].is_f64(), "{json}");
    assert!(benchmarks[1]["mb_per_second"].is_null(), "{json}");
    // 2000 reads of the keys the fill wrote (thread 0 is seeded alike).
    assert_eq!(benchmarks[1]["message"], "(2000 of 2000 found)");
    // 2000 entries of 16 + 100 bytes, in MB of 2^20 bytes.
    let bytes = number(&benchmarks[0], "bytes");
    assert_eq!(bytes, 2000.0 * 116.0);
    let expected = bytes / 1_048_576.0 / number(&benchmarks[0], "seconds");
    let rate = number(&benchmarks[0], "mb_per_second");
    assert!(
        (rate - expected).abs() <= expected * 1e-9,
        "{rate} vs {expected}"
    );

    let summary = &json["summary"];
    assert_eq!(summary["user_bytes"], 2000 * 116);
    assert!(summary["levels"].is_array(), "{summary}");
    assert!(summary["executors"].is_object(), "{summary}");
    assert!(summary["compaction"]["input_bytes"].is_u64(), "{summary}");
    assert!(summary["stalls"]["stop_count"].is_u64(), "{summary}");
    for cause in ["l0_slowdown", "l0_stop", "flush_slowdown", "memtable_flush"] {
        assert!(
            summary["stalls"]["causes"][cause]["count"].is_u64(),
            "{summary}"
        );
    }
    assert!(number(summary, "wall_seconds") > 0.0, "{summary}");
    assert!(summary["scheduler"]["fallbacks"].is_u64(), "{summary}");

    let statistics = &json["statistics"];
    let levels = statistics["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 7, "{statistics}");
    for (index, level) in levels.iter().enumerate() {
        assert_eq!(level["level"], index, "{level}");
    }
    for field in ["executors", "fallbacks", "scheduler", "stalls", "writes"] {
        assert!(statistics[field].is_object(), "{field}: {statistics}");
    }

    // The text on stdout says nothing of the JSON (db_bench's lines only).
    assert!(
        !stdout.contains("run.json") && !stdout.contains('{'),
        "{stdout}"
    );
}

#[test]
fn json_equals_form_and_no_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let output = shale(&[
        "bench",
        "--benchmarks=fillseq,stats,crc32c",
        "--num=500",
        &format!("--json={}", path.display()),
    ]);
    assert_ok(&output);
    let json = read_json(&path);
    let benchmarks = json["benchmarks"].as_array().unwrap();
    // `stats` prints a report, not figures: left out.
    let names: Vec<&str> = benchmarks
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fillseq", "crc32c"]);
    assert!(benchmarks[0]["latency"].is_null(), "{json}");
    assert_eq!(json["flags"]["histogram"], false);
}

#[test]
fn a_json_path_that_cannot_be_written_fails_before_the_benchmarks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-folder").join("run.json");
    let output = shale(&[
        "bench",
        "--benchmarks=fillrandom",
        "--num=1000",
        &format!("--json={}", path.display()),
    ]);
    let code = output.status.code();
    assert!(code == Some(1) || code == Some(2), "exit {code:?}");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("error: --json"), "{stderr}");
    assert!(stderr.contains("no-such-folder"), "{stderr}");
    // Nothing ran: not even the header was printed.
    assert_eq!(text(&output.stdout), "");
    assert!(!stderr.contains("micros/op"), "{stderr}");
}

#[test]
fn a_failed_run_leaves_no_json_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let missing_db = dir.path().join("no-db");
    // --use_existing_db=1 on a folder with no database: the open fails.
    let output = shale(&[
        "bench",
        "--benchmarks=readrandom",
        "--num=100",
        "--use_existing_db=1",
        &format!("--db={}", missing_db.display()),
        &format!("--json={}", path.display()),
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(!path.exists(), "an empty {} was left", path.display());
}
