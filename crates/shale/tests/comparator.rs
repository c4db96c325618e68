//! A database whose user keys are in a custom order (`Options::comparator`):
//! every read path and the compactions follow that order, through flushes,
//! compactions of every level, reopen, verify and repair; the comparator's
//! name guards the database; and the executors that compare key bytes are
//! refused with a clear error while `streaming` runs every job.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use shale::env::{Env, MemEnv};
use shale::{CompactRangeOptions, Error, Options, ReadOptions, WriteBatch, WriteOptions, DB};
use support::{scan, Numeric};

/// The model: keys sorted in numeric order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct NumericKey(u64);

fn key(n: u64) -> Vec<u8> {
    n.to_string().into_bytes()
}

fn options(env: &Arc<dyn Env>) -> Options {
    Options {
        comparator: Some(Arc::new(Numeric)),
        // Small memtables and tables: flushes, L0 compactions and deeper
        // ones all happen.
        write_buffer_size: 16 << 10,
        max_file_size: 8 << 10,
        max_bytes_for_level_base: 64 << 10,
        block_size: 512,
        ..support::options(env)
    }
}

fn scan_backward(db: &DB) -> Vec<Vec<u8>> {
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
    let mut out = Vec::new();
    iter.seek_to_last();
    while iter.valid() {
        out.push(iter.key().to_vec());
        iter.prev();
    }
    out
}

fn expected(model: &BTreeMap<NumericKey, Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model.iter().map(|(k, v)| (key(k.0), v.clone())).collect()
}

#[test]
fn a_custom_order_is_followed_by_reads_flushes_and_compactions() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let mut model = BTreeMap::new();
    {
        let db = DB::open("/numeric", options(&env)).unwrap();
        let write = WriteOptions::default();
        let mut state = 7u64;
        for round in 0..8u64 {
            for _ in 0..1500 {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = (state >> 33) % 3000;
                if state % 7 == 0 {
                    db.delete(&write, &key(n)).unwrap();
                    model.remove(&NumericKey(n));
                } else {
                    let value = format!("{round}:{n}:{}", "v".repeat((n % 40) as usize));
                    let mut batch = WriteBatch::new();
                    batch.put(&key(n), value.as_bytes()).unwrap();
                    db.write(&write, batch).unwrap();
                    model.insert(NumericKey(n), value.into_bytes());
                }
            }
            db.wait_for_compactions().unwrap();
        }
        assert_eq!(scan(&db, &ReadOptions::new()), expected(&model));
        db.compact_range(None, None).unwrap();
        assert_eq!(scan(&db, &ReadOptions::new()), expected(&model));

        let deeper: u64 = (1..7)
            .map(|level| {
                db.property(&format!("shale.num-files-at-level{level}"))
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum();
        assert!(deeper > 1, "compactions should have filled the levels");
        // Only `streaming` knows the order: no other executor ran a job,
        // and none was tried and failed.
        let stats = db.executor_stats();
        assert!(
            stats.iter().all(|(name, _, _)| name == "streaming"),
            "{stats:?}"
        );
        assert!(stats.iter().any(|(_, jobs, _)| *jobs > 0), "{stats:?}");
        assert_eq!(db.scheduler_stats().fallbacks, 0);
        let executors = db.property("shale.executors").unwrap();
        assert!(executors.contains("streaming"), "{executors}");
    }

    let db = DB::open("/numeric", options(&env)).unwrap();
    let all = scan(&db, &ReadOptions::new());
    assert_eq!(all, expected(&model));
    // Numeric order, not bytewise: "9" before "10".
    let numbers: Vec<u64> = all
        .iter()
        .map(|(k, _)| std::str::from_utf8(k).unwrap().parse().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]));
    let mut backward = scan_backward(&db);
    backward.reverse();
    assert_eq!(
        backward,
        all.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
    );

    for n in [0, 9, 10, 99, 100, 999, 1000, 2999, 3000, 12345] {
        assert_eq!(
            db.get(&ReadOptions::new(), &key(n)).unwrap(),
            model.get(&NumericKey(n)).cloned(),
            "key {n}"
        );
    }

    // Bounds and seeks in numeric order: [90, 1000) holds 95 and 999 but
    // not 1000, and bytewise would have put "100" below "90".
    let bounded = ReadOptions {
        lower_bound: Some(key(90)),
        upper_bound: Some(key(1000)),
        ..ReadOptions::new()
    };
    let inside: Vec<(Vec<u8>, Vec<u8>)> = model
        .range(NumericKey(90)..NumericKey(1000))
        .map(|(k, v)| (key(k.0), v.clone()))
        .collect();
    assert_eq!(scan(&db, &bounded), inside);
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
    iter.seek(&key(1000));
    let first_from_1000 = model.range(NumericKey(1000)..).next().unwrap();
    assert_eq!(iter.key(), key(first_from_1000.0 .0));

    // A range compaction in numeric order keeps everything.
    db.compact_range(Some(&key(500)), Some(&key(1500))).unwrap();
    assert_eq!(scan(&db, &ReadOptions::new()), expected(&model));
    drop(iter);
    drop(db);

    // verify reads the tables in the same order.
    let report = shale::verify::verify_db("/numeric", &options(&env)).unwrap();
    assert!(report.entries > 0);
    let err = shale::verify::verify_db(
        "/numeric",
        &Options {
            comparator: None,
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("test.Numeric"), "{err}");

    // Repair rebuilds the MANIFEST with the comparator's name.
    shale::repair("/numeric", &options(&env)).unwrap();
    let db = DB::open("/numeric", options(&env)).unwrap();
    assert_eq!(scan(&db, &ReadOptions::new()), expected(&model));
}

#[test]
fn the_comparator_name_guards_the_database() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open("/guarded", options(&env)).unwrap();
    db.put(&WriteOptions::default(), b"1", b"one").unwrap();
    drop(db);

    let err = DB::open(
        "/guarded",
        Options {
            comparator: None,
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("test.Numeric") && message.contains("leveldb.BytewiseComparator"),
        "{message}"
    );

    // And a bytewise database refuses a custom comparator.
    let db = DB::open(
        "/bytewise",
        Options {
            comparator: None,
            ..options(&env)
        },
    )
    .unwrap();
    drop(db);
    let err = DB::open("/bytewise", options(&env)).unwrap_err();
    assert!(err.to_string().contains("test.Numeric"), "{err}");
}

#[test]
fn executors_that_compare_bytes_are_refused() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    for executor in ["parallel", "opencl"] {
        let err = DB::open(
            "/refused",
            Options {
                compaction_executor: executor.parse().unwrap(),
                ..options(&env)
            },
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&format!("compaction_executor={executor}"))
                && message.contains("test.Numeric")
                && message.contains("auto or streaming"),
            "{message}"
        );
    }

    let db = DB::open(
        "/refused",
        Options {
            compaction_executor: "streaming".parse().unwrap(),
            ..options(&env)
        },
    )
    .unwrap();
    for n in 0..2000 {
        db.put(&WriteOptions::default(), &key(n), b"value").unwrap();
    }
    let ask = |executor: &str| CompactRangeOptions {
        executor: executor.parse().unwrap(),
    };
    let err = db
        .compact_range_with(None, None, &ask("parallel"))
        .unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err:?}");
    assert!(err.to_string().contains("test.Numeric"), "{err}");
    db.compact_range_with(None, None, &ask("streaming"))
        .unwrap();
    db.compact_range_with(None, None, &ask("auto")).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), &key(1999)).unwrap().as_deref(),
        Some(&b"value"[..])
    );
}

#[test]
fn the_parallel_executor_fails_a_job_in_a_custom_order() {
    use shale::shale_compact::job::CompactionJob;
    use shale::shale_compact::mem_io::MemIo;
    let io = MemIo::new(Default::default()).with_key_order(
        shale::format::comparator::KeyOrder::custom(Arc::new(Numeric)),
    );
    let executor = shale::db::executor_by_name("parallel", &Options::default()).unwrap();
    let err = executor.run(&CompactionJob::default(), &io).unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("the parallel executor compares key bytes"),
        "{err}"
    );
}
