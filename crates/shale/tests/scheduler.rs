//! The scheduler in a running database: sub-compactions and cross-level
//! jobs happen and keep every write; several compaction threads under
//! writers, readers, iterators, snapshots and `compact_range` with every CPU
//! executor; the `shale.scheduler` property and the LOG say what ran.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;
use std::sync::Arc;

use shale::env::{Env, MemEnv};
use shale::{OpenClSettings, Options, ReadOptions, WriteOptions, DB};
use shale_compact::testing;

fn small_options(env: &Arc<dyn Env>) -> Options {
    Options {
        create_if_missing: true,
        env: env.clone(),
        write_buffer_size: 16 << 10,
        max_file_size: 8 << 10,
        block_size: 512,
        max_bytes_for_level_base: 32 << 10,
        level_multiplier: 4.0,
        l0_compaction_trigger: 2,
        l0_slowdown_writes_trigger: 6,
        l0_stop_writes_trigger: 10,
        max_subcompactions: 4,
        ..Options::default()
    }
}

fn contents(db: &DB) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
    iter.seek_to_first();
    let mut out = BTreeMap::new();
    while iter.valid() {
        out.insert(iter.key().to_vec(), iter.value().to_vec());
        iter.next();
    }
    iter.status().unwrap();
    out
}

/// The number after `label` in the `Jobs:` line of `shale.scheduler`.
fn counter(db: &DB, label: &str) -> u64 {
    let text = db.property("shale.scheduler").unwrap();
    let line = text.lines().find(|l| l.starts_with("Jobs:")).unwrap();
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let at = words
        .iter()
        .position(|w| *w == label)
        .unwrap_or_else(|| panic!("{label} in {line}"));
    words[at - 1].parse().unwrap()
}

fn write_rounds(db: &DB, rounds: u32, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for round in 0..rounds {
        for i in 0..2000u32 {
            let key = format!("key{:06}", (i * 7919 + round * 31) % 6000).into_bytes();
            if i % 13 == 5 {
                db.delete(&WriteOptions::default(), &key).unwrap();
                model.remove(&key);
            } else {
                let value = format!("{round}-{i}-{}", "v".repeat((i % 40) as usize)).into_bytes();
                db.put(&WriteOptions::default(), &key, &value).unwrap();
                model.insert(key, value);
            }
        }
    }
}

#[test]
fn a_manual_compaction_runs_as_sub_compactions_and_keeps_every_write() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let options = Options {
        // Only the manual compaction under test.
        l0_compaction_trigger: 1000,
        l0_slowdown_writes_trigger: 1000,
        l0_stop_writes_trigger: 1000,
        ..small_options(&env)
    };
    let db = DB::open("/db", options.clone()).unwrap();
    let mut model = BTreeMap::new();
    write_rounds(&db, 6, &mut model);
    db.compact_range(None, None).unwrap();
    assert!(
        counter(&db, "split") >= 1,
        "{}",
        db.property("shale.scheduler").unwrap()
    );
    assert!(counter(&db, "sub-compactions") >= 2);
    assert_eq!(contents(&db), model);
    let log =
        String::from_utf8(shale::env::read_file(&*env, std::path::Path::new("/db/LOG")).unwrap())
            .unwrap();
    assert!(log.contains("sub-compactions"), "{log}");
    drop(db);
    // The same data compacted without splitting reads the same.
    let db = DB::open("/db", options).unwrap();
    assert_eq!(contents(&db), model);
}

#[test]
fn cross_level_jobs_write_once_and_keep_every_write() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open("/db", small_options(&env)).unwrap();
    let mut model = BTreeMap::new();
    write_rounds(&db, 12, &mut model);
    db.wait_for_compactions().unwrap();
    assert!(
        counter(&db, "cross-level") >= 1,
        "{}",
        db.property("shale.stats").unwrap()
    );
    assert_eq!(contents(&db), model);
    let log =
        String::from_utf8(shale::env::read_file(&*env, std::path::Path::new("/db/LOG")).unwrap())
            .unwrap();
    assert!(log.contains("cross-level"), "{log}");

    // Off: no cross-level job, same contents.
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let off = Options {
        cross_level_compaction: false,
        ..small_options(&env)
    };
    let db = DB::open("/db", off).unwrap();
    let mut model_off = BTreeMap::new();
    write_rounds(&db, 12, &mut model_off);
    db.wait_for_compactions().unwrap();
    assert_eq!(counter(&db, "cross-level"), 0);
    assert_eq!(contents(&db), model_off);
}

/// Writers on disjoint key ranges, readers checking what their writer
/// acknowledged, iterators and snapshots that must stay consistent, and
/// `compact_range`, with 1, 2 and 4 compaction threads and every executor
/// (`opencl` with 2 threads, when there is a device).
#[test]
fn concurrent_work_with_several_compaction_threads_and_every_executor() {
    // OpenCL (PoCL in CI) when this machine has a device.
    let opencl = match shale::db::executor_by_name("opencl", &Options::default()) {
        Ok(_) => true,
        Err(err) => {
            let missing = format!("{err}; leaving opencl out");
            testing::skip("the opencl executor", &missing, testing::PROVIDE_OPENCL);
            false
        }
    };
    for threads in [1usize, 2, 4] {
        let mut executors = vec!["streaming", "parallel", "auto"];
        if opencl && threads == 2 {
            executors.push("opencl");
        }
        for executor in executors {
            let env: Arc<dyn Env> = Arc::new(MemEnv::new());
            let options = Options {
                max_background_compactions: threads,
                compaction_executor: executor.parse().unwrap(),
                ..small_options(&env)
            };
            let db = DB::open("/db", options.clone()).unwrap();
            std::thread::scope(|scope| {
                for writer in 0..3u32 {
                    let db = db.clone();
                    scope.spawn(move || {
                        for i in 0..1500u32 {
                            let key = format!("w{writer}-{:05}", (i * 37) % 700);
                            let value = format!("{i}-{}", "x".repeat((i % 60) as usize));
                            db.put(&WriteOptions::default(), key.as_bytes(), value.as_bytes())
                                .unwrap();
                            // A reader sees its own acknowledged write.
                            let read = db.get(&ReadOptions::new(), key.as_bytes()).unwrap();
                            assert_eq!(read.as_deref(), Some(value.as_bytes()));
                        }
                    });
                }
                let snapshots = db.clone();
                scope.spawn(move || {
                    for _ in 0..20 {
                        let snapshot = snapshots.snapshot();
                        let read = ReadOptions {
                            snapshot: Some(snapshot),
                            ..ReadOptions::new()
                        };
                        let scan = |db: &DB| {
                            let mut iter = db.iter(&read).unwrap();
                            iter.seek_to_first();
                            let mut n = Vec::new();
                            while iter.valid() {
                                n.push((iter.key().to_vec(), iter.value().to_vec()));
                                iter.next();
                            }
                            n
                        };
                        let first = scan(&snapshots);
                        std::thread::yield_now();
                        assert_eq!(scan(&snapshots), first, "a snapshot changed");
                    }
                });
                let compactor = db.clone();
                scope.spawn(move || {
                    for _ in 0..3 {
                        compactor.compact_range(Some(b"w1"), Some(b"w2")).unwrap();
                    }
                });
            });
            db.wait_for_compactions().unwrap();
            let mut expected = BTreeMap::new();
            for writer in 0..3u32 {
                for i in 0..1500u32 {
                    let key = format!("w{writer}-{:05}", (i * 37) % 700);
                    let value = format!("{i}-{}", "x".repeat((i % 60) as usize));
                    expected.insert(key.into_bytes(), value.into_bytes());
                }
            }
            assert_eq!(contents(&db), expected, "{threads} threads, {executor}");
            drop(db);
            let db = DB::open("/db", options).unwrap();
            assert_eq!(
                contents(&db),
                expected,
                "{threads} threads, {executor}, reopened"
            );
        }
    }
}

#[test]
fn the_scheduler_property_shows_queues_executors_and_counts() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open("/db", small_options(&env)).unwrap();
    let mut model = BTreeMap::new();
    write_rounds(&db, 4, &mut model);
    db.wait_for_compactions().unwrap();
    let text = db.property("shale.scheduler").unwrap();
    assert!(text.starts_with("Scheduler queues: L0 0, L1 0"), "{text}");
    assert!(text.contains("Running: 0 jobs"), "{text}");
    assert!(text.contains("Executor "), "{text}");
    assert!(text.contains("MB/s"), "{text}");
    assert!(counter(&db, "completed") >= 1);
    assert_eq!(db.property("leveldb.scheduler"), Some(text.clone()));
    let stats = db.property("shale.stats").unwrap();
    assert!(stats.contains("Scheduler queues"), "{stats}");
    let log =
        String::from_utf8(shale::env::read_file(&*env, std::path::Path::new("/db/LOG")).unwrap())
            .unwrap();
    for needle in ["Scheduler: queued", "scores trigger", "executor chain"] {
        assert!(log.contains(needle), "{needle}: {log}");
    }
}

#[test]
fn a_device_job_runs_whole_unless_told_to_split() {
    // PoCL in CI: the opencl executor runs there as on a GPU.
    for (device_parts, splits) in [(1, false), (3, true)] {
        let env: Arc<dyn Env> = Arc::new(MemEnv::new());
        let options = Options {
            l0_compaction_trigger: 1000,
            l0_slowdown_writes_trigger: 1000,
            l0_stop_writes_trigger: 1000,
            compaction_executor: "opencl".parse().unwrap(),
            opencl: OpenClSettings {
                subcompactions: device_parts,
                // However many L0 files the flushes left, the job stays on
                // the device (the default limit is 40 files).
                max_device_files: 10_000,
                ..OpenClSettings::default()
            },
            ..small_options(&env)
        };
        let db = match DB::open("/db", options) {
            Ok(db) => db,
            Err(err) => {
                let why = err.to_string();
                testing::skip("an opencl database", &why, testing::PROVIDE_OPENCL);
                return;
            }
        };
        let mut model = BTreeMap::new();
        write_rounds(&db, 6, &mut model);
        db.compact_range(None, None).unwrap();
        let log = String::from_utf8(
            shale::env::read_file(&*env, std::path::Path::new("/db/LOG")).unwrap(),
        )
        .unwrap();
        let manual = log
            .lines()
            .find(|l| l.contains("manual") && l.contains("executor chain opencl"))
            .unwrap_or_else(|| panic!("no manual device job in {log}"));
        assert_eq!(manual.contains("sub-compactions"), splits, "{manual}");
        if splits {
            assert!(manual.contains("up to 3 sub-compactions"), "{manual}");
        }
        assert_eq!(contents(&db), model);
    }
}
