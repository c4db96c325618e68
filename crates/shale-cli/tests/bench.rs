//! `shale bench` and `shale ycsb` end to end, at tiny sizes. No timing is
//! asserted: only that the runs complete and print what they promise.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use support::{assert_ok, shale, shale_with_env, stderr, stdout};

/// The report line of `name`, checked against db_bench's layout:
/// `name` padded to 12, ` : `, micros/op as `%11.3f`, ` micros/op;`.
#[track_caller]
fn report_line<'a>(text: &'a str, name: &str) -> &'a str {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name:<12} : ")))
        .unwrap_or_else(|| panic!("no {name} line in:\n{text}"));
    let rest = &line[format!("{name:<12} : ").len()..];
    let (micros, tail) = rest.split_at(11);
    assert!(
        micros.trim().parse::<f64>().is_ok(),
        "micros/op field {micros:?} in {line:?}"
    );
    assert!(tail.starts_with(" micros/op;"), "{line:?}");
    line
}

#[test]
fn bench_runs_db_bench_s_benchmarks() {
    let output = shale(&[
        "bench",
        "--num=1000",
        "--benchmarks=fillrandom,readrandom,stats",
    ]);
    assert_ok(&output);
    let text = stdout(&output);
    assert!(text.contains("Keys:       16 bytes each"), "{text}");
    assert!(
        text.contains("Values:     100 bytes each (50 bytes after compression)"),
        "{text}"
    );
    assert!(text.contains("Entries:    1000"), "{text}");
    let fill = report_line(&text, "fillrandom");
    assert!(fill.ends_with(" MB/s"), "{fill}");
    let read = report_line(&text, "readrandom");
    // db_bench 1.23 seeds every benchmark's thread 0 alike: the reads
    // draw the keys the fill wrote.
    assert!(read.ends_with("(1000 of 1000 found)"), "{read}");
    assert!(
        text.contains("Compactions"),
        "stats property missing:\n{text}"
    );
    assert!(text.contains("Write amplification: "), "{text}");
    assert!(text.contains("Compaction speed: "), "{text}");
    assert!(text.contains("Stalls: "), "{text}");
    assert!(text.contains("CPU: "), "{text}");
}

#[test]
fn bench_every_benchmark_once() {
    let output = shale(&[
        "bench",
        "--num=300",
        "--threads=2",
        "--benchmarks=fillseq,overwrite,fillsync,readrandom,readmissing,readhot,readseq,readreverse,\
         seekrandom,readwhilewriting,readrandomwriterandom,waitforcompaction,compact,sstables,\
         deleterandom,deleteseq,fill100K",
        "--compaction_executor=streaming",
    ]);
    assert_ok(&output);
    let text = stdout(&output);
    for name in [
        "fillseq",
        "overwrite",
        "fillsync",
        "readrandom",
        "readmissing",
        "readhot",
        "readseq",
        "readreverse",
        "seekrandom",
        "readwhilewriting",
        "readrandomwriterandom",
        "waitforcompaction",
        "compact",
        "deleterandom",
        "deleteseq",
        "fill100K",
    ] {
        report_line(&text, name);
    }
    assert!(
        text.contains("--- level 0 ---"),
        "sstables missing:\n{text}"
    );
    assert!(text.contains("Executor:   streaming"), "{text}");
}

#[test]
fn bench_histogram_timeline_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let csv = dir.path().join("timeline.csv");
    let png = dir.path().join("plot.png");
    let output = shale_with_env(
        &[
            "bench",
            "--num=2000",
            "--benchmarks=fillrandom,readrandom",
            "--histogram=1",
            &format!("--db={}", db.display()),
            &format!("--timeline={}", csv.display()),
            "--timeline_interval=0.05",
            &format!("--plot={}", png.display()),
            "--cpu_stress=20",
        ],
        &[("SHALE_PLOT_FONT", "none")],
    );
    assert_ok(&output);
    let text = stdout(&output);
    assert!(
        text.contains("Microseconds per op:\nCount: 2000  Average: "),
        "{text}"
    );
    assert!(text.contains("Percentiles: P50: "), "{text}");
    assert!(text.contains("P99.9: "), "{text}");
    assert!(
        text.contains("not counting"),
        "cpu_stress CPU not reported:\n{text}"
    );
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("seconds,benchmark,ops,ops_per_sec,p99_micros")
    );
    let mut ops_by_benchmark = std::collections::BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), 5, "{line}");
        assert!(fields[0].parse::<f64>().is_ok(), "{line}");
        *ops_by_benchmark.entry(fields[1].to_string()).or_insert(0) +=
            fields[2].parse::<u64>().unwrap();
        assert!(fields[3].parse::<f64>().is_ok(), "{line}");
        assert!(fields[4].parse::<f64>().is_ok(), "{line}");
    }
    assert_eq!(ops_by_benchmark.get("fillrandom"), Some(&2000));
    assert_eq!(ops_by_benchmark.get("readrandom"), Some(&2000));
    let png = std::fs::read(&png).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(
        stderr(&output).contains("drawn without text"),
        "{}",
        stderr(&output)
    );

    // The database stays in --db: read it again without refilling.
    let output = shale(&[
        "bench",
        "--num=2000",
        "--benchmarks=fillrandom,readrandom",
        "--use_existing_db=1",
        &format!("--db={}", db.display()),
    ]);
    assert_ok(&output);
    let text = stdout(&output);
    assert!(
        text.contains("fillrandom   : skipped (--use_existing_db is true)"),
        "{text}"
    );
    assert!(
        report_line(&text, "readrandom").ends_with("(2000 of 2000 found)"),
        "{text}"
    );
}

#[test]
fn bad_bench_flags_fail_with_a_message() {
    for (args, expected) in [
        (&["--benchmarks=nosuch"][..], "unknown benchmark 'nosuch'"),
        (&["--num=abc"], "--num"),
        (&["--compression_ratio=2"], "--compression_ratio"),
        (&["--threads=0"], "--threads"),
        (&["--block_size=0"], "block_size"),
        (&["--compaction_executor=warp"], "warp"),
    ] {
        let mut full = vec!["bench", "--num=10"];
        full.extend_from_slice(args);
        let output = shale(&full);
        assert!(!output.status.success(), "{args:?} succeeded");
        let message = stderr(&output);
        assert!(
            message.contains(expected),
            "{args:?}: no {expected:?} in {message}"
        );
        assert!(
            stdout(&output).is_empty(),
            "{args:?} printed {}",
            stdout(&output)
        );
    }
}

#[test]
fn bench_with_direct_io() {
    // Under the current directory: /tmp may be tmpfs, which refuses O_DIRECT
    // before Linux 6.6.
    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let db = dir.path().join("db").display().to_string();
    let output = shale(&[
        "bench",
        "--direct_io=1",
        &format!("--db={db}"),
        "--num=5000",
        "--write_buffer_size=200000",
        "--benchmarks=fillrandom,compact,readrandom",
    ]);
    if !output.status.success() && stderr(&output).contains("refuses direct I/O") {
        shale_compact::testing::skip(
            "shale bench --direct_io=1",
            &stderr(&output),
            "run it from a file system that takes O_DIRECT (ext4, xfs)",
        );
        return;
    }
    assert_ok(&output);
    let text = stdout(&output);
    assert!(
        report_line(&text, "readrandom").ends_with("(5000 of 5000 found)"),
        "{text}"
    );
    // A file system without O_DIRECT is named in a clear error.
    if std::path::Path::new("/dev/shm").is_dir() {
        if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
            let db = shm.path().join("db").display().to_string();
            let output = shale(&["bench", "--direct_io=1", &format!("--db={db}"), "--num=10"]);
            if !output.status.success() {
                assert!(
                    stderr(&output).contains("refuses direct I/O"),
                    "{}",
                    stderr(&output)
                );
            }
        }
    }
}

#[test]
fn ycsb_workload_a_loads_and_runs() {
    let output = shale(&[
        "ycsb",
        "--workload",
        "a",
        "--records",
        "1000",
        "--operations",
        "1000",
    ]);
    assert_ok(&output);
    let text = stdout(&output);
    assert!(text.contains("[LOAD] 1000 operations in "), "{text}");
    assert!(text.contains("[RUN] 1000 operations in "), "{text}");
    assert!(text.contains(" ops/s (1 threads)"), "{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} row in:\n{text}"))
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse::<f64>().unwrap())
            .collect::<Vec<f64>>()
    };
    let read = row("READ");
    let update = row("UPDATE");
    // count, avg, p50, p99, p99.9, max
    assert_eq!(read.len(), 6);
    assert_eq!(read[0] + update[0], 1000.0);
    assert!(read[0] > 300.0 && update[0] > 300.0, "{read:?} {update:?}");
    assert!(read[2] <= read[3] && read[3] <= read[4] && read[4] <= read[5]);
    assert!(text.contains("Write amplification: "), "{text}");
}

#[test]
fn ycsb_other_workloads_run() {
    for (workload, operation) in [
        ("b", "UPDATE"),
        ("c", "READ"),
        ("d", "INSERT"),
        ("e", "SCAN"),
        ("f", "READ-MODIFY-WRITE"),
    ] {
        let output = shale(&[
            "ycsb",
            "--workload",
            workload,
            "--records",
            "300",
            "--operations",
            "400",
            "--threads",
            "2",
            "--value_size",
            "64",
        ]);
        assert_ok(&output);
        let text = stdout(&output);
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{operation} "))),
            "workload {workload}: no {operation} row in\n{text}"
        );
        assert!(
            !text.contains("found no record"),
            "workload {workload}:\n{text}"
        );
    }
}

#[test]
fn bad_ycsb_flags_fail() {
    for args in [
        &["ycsb", "--workload", "g"][..],
        &["ycsb", "--records", "abc"],
        &["ycsb", "--records", "0"],
        &["ycsb", "--value_size", "9999999"],
    ] {
        let output = shale(args);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(!stderr(&output).is_empty());
    }
}
