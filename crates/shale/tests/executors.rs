//! The same database, fully compacted by each executor, gives identical
//! files: same names, same bytes. Automatic compactions are switched off so
//! that the only compactions are the manual ones under test.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;
use std::path::Path;

use shale::{OpenClSettings, Options, ReadOptions, RemoteSettings, WriteOptions, DB};
use shale_compact::testing;

fn options(executor: &str) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 32 << 10,
        block_size: 1024,
        l0_compaction_trigger: 1000,
        l0_slowdown_writes_trigger: 1000,
        l0_stop_writes_trigger: 1000,
        max_bytes_for_level_base: 1 << 40,
        compaction_executor: executor.parse().unwrap(),
        compaction_memory_budget: 64 << 10,
        // Sub-compactions number their outputs in the order they finish;
        // one job at a time keeps the file names comparable.
        max_subcompactions: 1,
        ..Options::default()
    }
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
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

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn full_compaction_is_identical_with_every_executor() {
    let tmp = tempfile::tempdir().unwrap();
    let source = tmp.path().join("source");
    {
        let db = DB::open(&source, options("streaming")).unwrap();
        let write = WriteOptions::default();
        for round in 0..6u32 {
            for i in 0..3000u32 {
                let key = format!("key{:06}", (i * 7919 + round * 13) % 9000);
                if i % 11 == 3 {
                    db.delete(&write, key.as_bytes()).unwrap();
                } else {
                    db.put(
                        &write,
                        key.as_bytes(),
                        format!("{round}:{i}:{}", "v".repeat((i % 50) as usize)).as_bytes(),
                    )
                    .unwrap();
                }
            }
            db.flush().unwrap();
        }
        assert!(
            db.property("shale.num-files-at-level0")
                .unwrap()
                .parse::<u32>()
                .unwrap()
                >= 6
        );
    }

    // The remote executor's worker, in this process on loopback, beside
    // the databases (its root holds them).
    let worker = shale_worker::LocalWorker::start(shale_worker::WorkerConfig::new(
        tmp.path(),
        std::sync::Arc::new(shale::shale_compact::StreamingExecutor),
    ))
    .unwrap();
    let options = |executor: &str| Options {
        remote: RemoteSettings {
            workers: if executor == "remote" {
                vec![worker.url()]
            } else {
                Vec::new()
            },
            ..RemoteSettings::default()
        },
        ..options(executor)
    };
    let mut results = Vec::new();
    for executor in shale::options::ExecutorChoice::NAMES {
        if let Err(err) = shale::db::executor_by_name(executor, &options(executor)) {
            // Only opencl can be missing: no OpenCL platform on this machine.
            assert_eq!(executor, "opencl", "{err}");
            testing::skip(
                "the opencl executor",
                &err.to_string(),
                testing::PROVIDE_OPENCL,
            );
            continue;
        }
        let dir = tmp.path().join(executor);
        copy_dir(&source, &dir);
        let db = DB::open(&dir, options(executor)).unwrap();
        db.compact_range(None, None).unwrap();
        // `auto` runs as opencl or parallel; opencl may hand a job to parallel.
        let jobs: u64 = db.executor_stats().iter().map(|(_, jobs, _)| jobs).sum();
        assert!(jobs > 0, "{executor} ran no job");
        if executor == "remote" {
            let stats = db.executor_stats();
            assert!(
                stats
                    .iter()
                    .any(|(name, jobs, _)| name == "remote" && *jobs > 0),
                "no job ran on the worker: {stats:?}"
            );
        }
        let contents: Vec<(Vec<u8>, Vec<u8>)> = {
            let mut iter = db.iter(&ReadOptions::new()).unwrap();
            let mut out = Vec::new();
            iter.seek_to_first();
            while iter.valid() {
                out.push((iter.key().to_vec(), iter.value().to_vec()));
                iter.next();
            }
            out
        };
        drop(db);
        results.push((executor, files(&dir), contents));
    }
    let (reference_name, reference_files, reference_contents) = &results[0];
    assert!(
        reference_files.len() > 3,
        "compaction should cut several files"
    );
    for (name, files, contents) in &results[1..] {
        assert_eq!(
            contents, reference_contents,
            "{name} vs {reference_name}: contents"
        );
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            reference_files.keys().collect::<Vec<_>>(),
            "{name}: file names"
        );
        for (file, bytes) in files {
            assert!(
                bytes == &reference_files[file],
                "{name}: {file} differs from {reference_name}'s"
            );
        }
    }
}

/// Opens a database with an `opencl` executor; `None` (the test skips)
/// when this machine has no OpenCL and the test is not required
/// ([`testing::skip`]).
fn open_opencl_or_skip(dir: &Path, options: Options) -> Option<DB> {
    match DB::open(dir, options) {
        Ok(db) => Some(db),
        Err(err) => {
            testing::skip(
                "an opencl database",
                &err.to_string(),
                testing::PROVIDE_OPENCL,
            );
            None
        }
    }
}

/// 3,000 keys in three flushed tables, then one full compaction.
fn fill_three_tables_and_compact(db: &DB) {
    for i in 0..3000u32 {
        let key = format!("key{:06}", (i * 7919) % 3000);
        db.put(&WriteOptions::default(), key.as_bytes(), b"value")
            .unwrap();
        if i % 1000 == 999 {
            db.flush().unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
}

#[test]
fn jobs_the_device_cannot_take_are_reported_as_fallbacks() {
    let tmp = tempfile::tempdir().unwrap();
    let options = Options {
        opencl: OpenClSettings {
            // No job fits: every compaction is placed on the CPU.
            max_device_files: 0,
            ..OpenClSettings::default()
        },
        ..options("opencl")
    };
    let Some(db) = open_opencl_or_skip(&tmp.path().join("db"), options) else {
        return;
    };
    fill_three_tables_and_compact(&db);
    let executors = db.property("shale.executors").unwrap();
    assert!(executors.contains("Executor parallel"), "{executors}");
    assert!(executors.contains("fallback:"), "{executors}");
    assert!(executors.contains("placed on the CPU"), "{executors}");
    let log = std::fs::read_to_string(tmp.path().join("db").join("LOG")).unwrap();
    assert!(log.contains("fallback to the parallel executor"), "{log}");
}

#[test]
fn opencl_options_reach_the_executor_and_its_times_reach_the_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let options = Options {
        opencl: OpenClSettings {
            placement: shale::shale_compact::opencl::PlacementPolicy::CCompaction,
            memory_budget: Some(256 << 20),
            ..OpenClSettings::default()
        },
        ..options("opencl")
    };
    let Some(db) = open_opencl_or_skip(&tmp.path().join("db"), options) else {
        return;
    };
    fill_three_tables_and_compact(&db);
    let stats = db.property("shale.stats").unwrap();
    assert!(stats.contains("Executor opencl:"), "{stats}");
    assert!(!stats.contains("fallback:"), "{stats}");
    // C-Compaction: gc on the host, so no gc_keep kernel ran.
    assert!(!stats.contains("  gc_keep:"), "{stats}");
    for kernel in ["unpack_parse", "rank_merge", "encode_groups", "bloom_set"] {
        assert!(
            stats.contains(&format!("  {kernel}: ")),
            "{kernel}: {stats}"
        );
    }
    assert!(stats.contains("  pipeline: stages busy"), "{stats}");
    assert_eq!(
        db.property("shale.executors")
            .map(|e| e.contains("  rank_merge: ")),
        Some(true)
    );
    let value = db
        .get(&ReadOptions::default(), b"key001234")
        .unwrap()
        .unwrap();
    assert_eq!(value, b"value");
}

#[test]
fn direct_io_compaction_writes_the_same_tables() {
    // Under the current directory: /tmp may be tmpfs, which refuses O_DIRECT.
    let tmp = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let source = tmp.path().join("source");
    {
        let db = DB::open(&source, options("streaming")).unwrap();
        for round in 0..4u32 {
            for i in 0..3000u32 {
                let key = format!("key{:06}", (i * 7919 + round) % 5000);
                let value = format!("value-{round}-{i}-{}", "x".repeat((i % 50) as usize));
                db.put(&WriteOptions::default(), key.as_bytes(), value.as_bytes())
                    .unwrap();
            }
            db.flush().unwrap();
        }
    }
    // Each executor reads its inputs its own way (block by block through
    // the readahead window, or whole stretches straight into aligned
    // places), so each is compared with and without direct I/O.
    let mut executors = vec!["parallel", "streaming"];
    if cfg!(feature = "opencl") {
        executors.push("opencl");
    }
    // Without compression the device writes each file's data blocks in
    // one piece, straight from pinned memory with direct I/O.
    for executor in executors {
        for snappy in [true, false] {
            direct_io_writes_the_same_tables(tmp.path(), &source, executor, snappy);
        }
    }
}

fn direct_io_writes_the_same_tables(tmp: &Path, source: &Path, executor: &str, snappy: bool) {
    let mut compacted = Vec::new();
    for direct in [false, true] {
        let dir = tmp.join(format!("{executor}-snappy-{snappy}-direct-{direct}"));
        copy_dir(source, &dir);
        let direct_options = Options {
            direct_io_for_compaction: direct,
            snappy,
            opencl: OpenClSettings {
                placement: shale::shale_compact::opencl::PlacementPolicy::AllDevice,
                ..OpenClSettings::default()
            },
            ..options(executor)
        };
        let db = match DB::open(&dir, direct_options) {
            Ok(db) => db,
            Err(shale::Error::NotSupported(reason)) if direct => {
                testing::skip(
                    "direct I/O compaction",
                    &reason,
                    "run it on a file system that takes O_DIRECT (ext4, xfs, tmpfs on Linux 6.6+)",
                );
                return;
            }
            Err(e) => panic!("{e}"),
        };
        db.compact_range(None, None).unwrap();
        let value = db.get(&ReadOptions::default(), b"key001234").unwrap();
        assert!(value.is_some());
        // The executor named ran the jobs (no fallback hid its reads).
        let ran: u64 = db
            .executor_stats()
            .iter()
            .filter(|(name, _, _)| name == executor)
            .map(|(_, jobs, _)| *jobs)
            .sum();
        assert!(ran > 0, "{executor}: {:?}", db.property("shale.executors"));
        drop(db);
        // Reopened, every key reads back (the files were synced whole).
        let db = DB::open(&dir, options("parallel")).unwrap();
        let mut iter = db.iter(&ReadOptions::default()).unwrap();
        iter.seek_to_first();
        let mut count = 0;
        while iter.valid() {
            count += 1;
            iter.next();
        }
        assert_eq!(count, 5000);
        drop(iter);
        drop(db);
        compacted.push(files(&dir));
    }
    assert!(!compacted[0].is_empty());
    assert_eq!(
        compacted[0].keys().collect::<Vec<_>>(),
        compacted[1].keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &compacted[0] {
        assert!(
            bytes == &compacted[1][name],
            "{executor}: {name} differs with direct I/O"
        );
    }
}

#[test]
fn direct_io_on_an_env_without_it_is_refused_at_open() {
    let env: std::sync::Arc<dyn shale::env::Env> = std::sync::Arc::new(shale::env::MemEnv::new());
    let options = Options {
        env,
        direct_io_for_compaction: true,
        ..options("parallel")
    };
    let error = DB::open("/db", options).unwrap_err();
    assert!(matches!(error, shale::Error::NotSupported(_)), "{error}");
    assert!(error.to_string().contains("direct I/O"), "{error}");
}

/// `compact_range_with` runs the jobs on the executor it names, whatever
/// the database's own choice, and refuses, before anything runs, an
/// executor the database does not have or does not know.
#[test]
fn compact_range_runs_on_the_executor_it_asks_for() {
    let tmp = tempfile::tempdir().unwrap();
    // Opened with `streaming`: the database has streaming and parallel, no
    // device, no workers.
    let db = DB::open(tmp.path(), options("streaming")).unwrap();
    let ask = |executor: &str| shale::CompactRangeOptions {
        executor: executor.parse().unwrap(),
    };
    for i in 0..3000u32 {
        let key = format!("key{:06}", (i * 7919) % 3000);
        db.put(&WriteOptions::default(), key.as_bytes(), b"value")
            .unwrap();
        if i % 1000 == 999 {
            db.flush().unwrap();
        }
    }
    db.compact_range_with(None, None, &ask("parallel")).unwrap();
    let stats = db.executor_stats();
    assert!(
        stats
            .iter()
            .any(|(name, jobs, _)| name == "parallel" && *jobs > 0),
        "{stats:?}"
    );
    assert!(
        !stats.iter().any(|(name, _, _)| name == "streaming"),
        "{stats:?}"
    );

    for (executor, expected) in [
        (
            "opencl",
            "compact_range cannot run on opencl: this database has no OpenCL device",
        ),
        (
            "remote",
            "compact_range cannot run on remote: this database has no remote workers",
        ),
    ] {
        let err = db
            .compact_range_with(None, None, &ask(executor))
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{executor}: {err}");
    }

    // `auto` is the scheduler's choice, as for compact_range.
    db.put(&WriteOptions::default(), b"key000001", b"again")
        .unwrap();
    db.compact_range_with(None, None, &ask("auto")).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"key000001")
            .unwrap()
            .as_deref(),
        Some(&b"again"[..])
    );
}

/// `auto` looks for its OpenCL device beside the database without holding
/// the open up; whoever first sees the answer tells the compaction service,
/// and the LOG says what was found. A manual compaction that names `opencl`
/// waits for the answer. Where the device is not a GPU (PoCL in CI) or
/// there is none, the answer is "no device", saying why, and jobs run on
/// the CPU.
#[test]
fn auto_looks_for_its_device_beside_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let db = DB::open(tmp.path(), options("auto")).unwrap();
    for i in 0..2000u32 {
        db.put(&WriteOptions::default(), &i.to_be_bytes(), &[7; 100])
            .unwrap();
    }
    let named = db.compact_range_with(
        None,
        None,
        &shale::CompactRangeOptions {
            executor: "opencl".parse().unwrap(),
        },
    );
    let found = match named {
        Ok(()) => true,
        Err(shale::Error::NotSupported(why)) => {
            assert!(why.contains("no OpenCL device"), "{why}");
            false
        }
        Err(other) => panic!("{other}"),
    };
    db.compact_range(None, None).unwrap();
    let log = std::fs::read_to_string(tmp.path().join("LOG")).unwrap();
    let said = if found {
        "the OpenCL device probe is over: jobs may run on"
    } else {
        "the OpenCL device probe is over: no device ("
    };
    assert_eq!(log.matches(said).count(), 1, "{log}");
    let read = ReadOptions::new();
    assert_eq!(
        db.get(&read, &1999u32.to_be_bytes()).unwrap().unwrap(),
        vec![7; 100]
    );
}
