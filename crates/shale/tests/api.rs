//! The public API beyond the model test: concurrent writers (group commit),
//! `DB: Send + Sync`, `destroy`, the info log, properties and approximate
//! sizes.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::sync::Arc;

use shale::env::{Env, MemEnv};
use shale::{Options, ReadOptions, WriteOptions, DB};

fn options(env: &Arc<dyn Env>) -> Options {
    Options {
        write_buffer_size: 32 << 10,
        max_file_size: 16 << 10,
        ..support::options(env)
    }
}

/// The two write paths the concurrency tests run on, with a database
/// name: the write queue alone (an in-memory env, whose WAL is not
/// mapped), and direct writes (a real directory, its WAL mapped, and more
/// direct writers allowed than the tests start, whatever the cores).
fn write_paths(name: &str) -> Vec<(std::path::PathBuf, Options, Option<tempfile::TempDir>)> {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let dir = tempfile::tempdir().unwrap();
    // A memtable of 256 KiB, still switched several times by each test:
    // after a switch, writes go direct again only once 16 queue groups
    // ended (`db/direct_writes.rs`), which a memtable of a few batches never sees.
    // Every writer direct, preempted or not (no back-off to the queue),
    // so that the tests below check direct writes on two cores too.
    let direct = Options {
        env: Arc::new(shale::env::PosixEnv),
        direct_writers: 64,
        direct_writers_back_off: false,
        write_buffer_size: 256 << 10,
        ..options(&env)
    };
    vec![
        (
            std::path::PathBuf::from(format!("/{name}")),
            options(&env),
            None,
        ),
        (dir.path().join(name), direct, Some(dir)),
    ]
}

#[test]
fn db_is_send_sync_and_cheap_to_share() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<DB>();
}

#[test]
fn concurrent_writers_all_land() {
    for (path, options, _dir) in write_paths("concurrent") {
        for pipelined_write in [true, false] {
            let _ = shale::destroy(&path, &options);
            writers_all_land(
                &path,
                Options {
                    pipelined_write,
                    ..options.clone()
                },
            );
        }
    }
}

fn writers_all_land(path: &std::path::Path, options: Options) {
    let db = DB::open(path, options).unwrap();
    std::thread::scope(|scope| {
        for t in 0..8u32 {
            let db = db.clone();
            scope.spawn(move || {
                for i in 0..500u32 {
                    let sync = i % 50 == 0;
                    db.put(
                        &WriteOptions { sync },
                        format!("t{t}-{i:04}").as_bytes(),
                        &i.to_le_bytes(),
                    )
                    .unwrap();
                }
            });
        }
    });
    for t in 0..8u32 {
        for i in (0..500u32).step_by(37) {
            let got = db
                .get(&ReadOptions::new(), format!("t{t}-{i:04}").as_bytes())
                .unwrap();
            assert_eq!(got, Some(i.to_le_bytes().to_vec()));
        }
    }
    assert_eq!(count_keys(&db, &ReadOptions::new()), 8 * 500);
}

/// Writers whose batches go into the memtable in parallel (the default
/// `concurrent_memtable_writes`; batches of 64 entries, so that every group
/// is large enough to share) still publish each batch whole: a reader's
/// snapshot sees every key of a writer's batch at the same batch number,
/// never some keys of a batch and not the others.
#[test]
fn batches_inserted_in_parallel_are_seen_whole() {
    assert!(Options::default().concurrent_memtable_writes);
    for (path, options, dir) in write_paths("whole") {
        let db = DB::open(path, options).unwrap();
        batches_are_seen_whole(&db);
        // On the real directory most writes went direct.
        let direct = db.statistics().writes.direct;
        assert_eq!(direct > 1_000, dir.is_some(), "{direct} writes went direct");
    }
}

fn batches_are_seen_whole(db: &DB) {
    const WRITERS: u32 = 6;
    const KEYS: u32 = 64;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut checks = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || checks == 0 {
                let snapshot = db.snapshot();
                let read = ReadOptions {
                    snapshot: Some(snapshot),
                    ..ReadOptions::new()
                };
                for t in 0..WRITERS {
                    let values: Vec<Option<Vec<u8>>> = (0..KEYS)
                        .map(|k| db.get(&read, format!("w{t}/k{k}").as_bytes()).unwrap())
                        .collect();
                    assert!(
                        values.windows(2).all(|pair| pair[0] == pair[1]),
                        "writer {t}: a batch seen in part: {values:?}"
                    );
                }
                checks += 1;
            }
            checks
        });
        for t in 0..WRITERS {
            let db = &db;
            scope.spawn(move || {
                for i in 0..400u32 {
                    let mut batch = shale::WriteBatch::new();
                    for k in 0..KEYS {
                        batch
                            .put(format!("w{t}/k{k}").as_bytes(), &i.to_le_bytes())
                            .unwrap();
                    }
                    db.write(&WriteOptions::default(), batch).unwrap();
                }
            });
        }
        // The scope joins the writers first only at its end: wait here.
        while db
            .get(
                &ReadOptions::new(),
                format!("w{}/k0", WRITERS - 1).as_bytes(),
            )
            .unwrap()
            != Some(399u32.to_le_bytes().to_vec())
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    for t in 0..WRITERS {
        for k in 0..KEYS {
            let got = db
                .get(&ReadOptions::new(), format!("w{t}/k{k}").as_bytes())
                .unwrap();
            assert_eq!(got, Some(399u32.to_le_bytes().to_vec()));
        }
    }
}

/// A snapshot never sees a later write without an earlier one. Writer `t`
/// writes `w{t}/{i}` in order, and before each write reads how far writer
/// `t + 1` has been acknowledged, and records that in the value: that
/// write happened before this one. A reader's snapshot, scanned whole, must
/// hold a prefix of each writer's keys, and with every key it holds, the
/// key of the other writer its value names. Many writers share write
/// groups and insert into the memtable in parallel, and the memtable is
/// small, so that flushes and compactions run beneath.
#[test]
fn a_snapshot_never_sees_a_later_write_without_an_earlier_one() {
    for (path, options, dir) in write_paths("causal") {
        let db = DB::open(path, options).unwrap();
        later_writes_are_never_seen_first(&db);
        let direct = db.statistics().writes.direct;
        assert_eq!(
            direct > 10_000,
            dir.is_some(),
            "{direct} writes went direct"
        );
    }
}

fn later_writes_are_never_seen_first(db: &DB) {
    use std::sync::atomic::{AtomicI64, Ordering};
    const WRITERS: usize = 4;
    const WRITES: i64 = 5_000;
    let acknowledged: Vec<AtomicI64> = (0..WRITERS).map(|_| AtomicI64::new(-1)).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    let key = |t: usize, i: i64| format!("w{t}/{i:06}").into_bytes();
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut checks = 0u64;
            while !done.load(Ordering::Acquire) || checks == 0 {
                let snapshot = db.snapshot();
                let read = ReadOptions {
                    snapshot: Some(snapshot),
                    ..ReadOptions::new()
                };
                let mut seen: Vec<Vec<(i64, usize, i64)>> = vec![Vec::new(); WRITERS];
                let mut iter = db.iter(&read).unwrap();
                iter.seek_to_first();
                while iter.valid() {
                    let name = std::str::from_utf8(iter.key()).unwrap();
                    let (writer, index) = name[1..].split_once('/').unwrap();
                    let value = std::str::from_utf8(iter.value()).unwrap();
                    let (other, before) = value.split_once(':').unwrap();
                    seen[writer.parse::<usize>().unwrap()].push((
                        index.parse().unwrap(),
                        other.parse().unwrap(),
                        before.parse().unwrap(),
                    ));
                    iter.next();
                }
                iter.status().unwrap();
                let count: Vec<i64> = seen.iter().map(|s| s.len() as i64).collect();
                for (t, writes) in seen.iter().enumerate() {
                    for (n, &(index, other, before)) in writes.iter().enumerate() {
                        assert_eq!(index, n as i64, "writer {t}: not a prefix: {writes:?}");
                        assert!(
                            before < count[other],
                            "w{t}/{index} is seen, but not w{other}/{before}, written before it"
                        );
                    }
                }
                checks += 1;
            }
            checks
        });
        let (key, acknowledged) = (&key, &acknowledged);
        for t in 0..WRITERS {
            let db = &db;
            scope.spawn(move || {
                let other = (t + 1) % WRITERS;
                for i in 0..WRITES {
                    let before = acknowledged[other].load(Ordering::Acquire);
                    if before < 0 {
                        // Nothing of the other writer yet: name nothing.
                        db.put(
                            &WriteOptions::default(),
                            &key(t, i),
                            format!("{t}:-1").as_bytes(),
                        )
                        .unwrap();
                    } else {
                        db.put(
                            &WriteOptions::default(),
                            &key(t, i),
                            format!("{other}:{before}").as_bytes(),
                        )
                        .unwrap();
                    }
                    acknowledged[t].store(i, Ordering::Release);
                }
            });
        }
        while acknowledged
            .iter()
            .any(|a| a.load(Ordering::Acquire) < WRITES - 1)
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        done.store(true, Ordering::Release);
        assert!(reader.join().unwrap() > 0);
    });
    let read = ReadOptions::new();
    for t in 0..WRITERS {
        assert!(db.get(&read, &key(t, WRITES - 1)).unwrap().is_some());
    }
}

/// The keys `read` sees, counted by a scan.
fn count_keys(db: &DB, read: &ReadOptions) -> usize {
    let mut iter = db.iter(read).unwrap();
    iter.seek_to_first();
    let mut count = 0;
    while iter.valid() {
        count += 1;
        iter.next();
    }
    count
}

/// Pipelined write groups (`pipelined_write`) insert into the
/// memtable while later groups append to the WAL, and publish their writes
/// in the order they took their sequence numbers. A later group published
/// before an earlier one had inserted would let a snapshot gain the
/// earlier group's write after it was taken: each writer overwrites a key
/// of its own, and a reader reads every key twice through one snapshot,
/// which must give the same values. The memtable is small, so it is
/// switched many times while groups insert (a switch waits for them), and
/// every acknowledged write is there, before a reopen and after it.
#[test]
fn pipelined_groups_publish_in_order() {
    const WRITERS: u32 = 6;
    const PUTS: u32 = 5000;
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let options = |env| Options {
        pipelined_write: true,
        ..options(env)
    };
    let db = DB::open("/pipelined", options(&env)).unwrap();
    let read_all = |read: &ReadOptions| -> Vec<Option<Vec<u8>>> {
        (0..WRITERS)
            .map(|t| db.get(read, format!("writer{t}").as_bytes()).unwrap())
            .collect()
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut checks = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || checks == 0 {
                let read = ReadOptions {
                    snapshot: Some(db.snapshot()),
                    ..ReadOptions::new()
                };
                let first = read_all(&read);
                std::thread::yield_now();
                assert_eq!(
                    read_all(&read),
                    first,
                    "a snapshot gained a write after it was taken"
                );
                checks += 1;
            }
            checks
        });
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let db = &db;
                scope.spawn(move || {
                    for i in 0..PUTS {
                        let key = format!("writer{t}");
                        db.put(&WriteOptions::default(), key.as_bytes(), &i.to_le_bytes())
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    let last = Some((PUTS - 1).to_le_bytes().to_vec());
    assert!(read_all(&ReadOptions::new()).iter().all(|v| *v == last));
    drop(db);
    let db = DB::open("/pipelined", options(&env)).unwrap();
    for t in 0..WRITERS {
        let got = db.get(&ReadOptions::new(), format!("writer{t}").as_bytes());
        assert_eq!(got.unwrap(), last);
    }
}

#[test]
fn destroy_removes_the_database_and_refuses_an_open_one() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");
    let opts = Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = DB::open(&path, opts.clone()).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    assert!(matches!(
        shale::destroy(&path, &opts),
        Err(shale::Error::Busy(_))
    ));
    drop(db);
    // The info log is kept in the directory, with the previous one as LOG.old.
    let db = DB::open(&path, opts.clone()).unwrap();
    drop(db);
    assert!(path.join("LOG").exists());
    assert!(path.join("LOG.old").exists());
    let log = std::fs::read_to_string(path.join("LOG")).unwrap();
    assert!(log.contains("Recovering log"), "{log}");
    shale::destroy(&path, &opts).unwrap();
    assert!(!path.exists());
    // Destroying what is not there is fine.
    shale::destroy(&path, &opts).unwrap();
}

#[test]
fn properties_and_approximate_sizes() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open("/props", options(&env)).unwrap();
    // Keys in scattered order, so flushed tables overlap and compactions run.
    for i in 0..5000u32 {
        let k = (i * 7919) % 5000;
        db.put(
            &WriteOptions::default(),
            format!("key{k:06}").as_bytes(),
            &[b'x'; 100],
        )
        .unwrap();
    }
    db.compact_range(None, None).unwrap();
    let stats = db.property("shale.stats").unwrap();
    assert!(stats.contains("Level  Files"), "{stats}");
    // `auto` (the default) picks a CPU executor for this machine.
    assert!(
        stats.contains("Executor streaming") || stats.contains("Executor parallel"),
        "{stats}"
    );
    assert_eq!(db.property("leveldb.num-files-at-level0").unwrap(), "0");
    assert!(db
        .property("shale.sstables")
        .unwrap()
        .contains("--- level 6 ---"));
    assert_eq!(
        db.get(&ReadOptions::new(), b"key000042").unwrap(),
        Some(vec![b'x'; 100])
    );
    // The block just read is in the block cache.
    assert!(
        db.property("shale.approximate-memory-usage")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert!(db.property("shale.nosuch").is_none());
    assert!(db.property("shale.num-files-at-level9").is_none());
    let sizes = db.approximate_sizes(&[
        (b"key000000", b"key002500"),
        (b"key002500", b"key005000"),
        (b"zzz", b"zzzz"),
    ]);
    // Values compress well with Snappy: about 15 bytes per entry on disk.
    assert!(sizes[0] > 20_000 && sizes[1] > 20_000, "{sizes:?}");
    assert_eq!(sizes[2], 0);
}

#[test]
fn iterators_honour_bounds_and_snapshots() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open("/iter", options(&env)).unwrap();
    for i in 0..100u32 {
        db.put(
            &WriteOptions::default(),
            format!("k{i:03}").as_bytes(),
            b"old",
        )
        .unwrap();
    }
    let snapshot = db.snapshot();
    for i in 0..100u32 {
        db.put(
            &WriteOptions::default(),
            format!("k{i:03}").as_bytes(),
            b"new",
        )
        .unwrap();
    }
    db.flush().unwrap();
    let read = ReadOptions {
        snapshot: Some(snapshot),
        lower_bound: Some(b"k010".to_vec()),
        upper_bound: Some(b"k020".to_vec()),
        ..ReadOptions::new()
    };
    let mut iter = db.iter(&read).unwrap();
    iter.seek_to_last();
    assert_eq!(iter.key(), b"k019");
    assert_eq!(iter.value(), b"old");
    iter.seek(b"k000");
    assert_eq!(iter.key(), b"k010");
    let mut n = 0;
    while iter.valid() {
        n += 1;
        iter.next();
    }
    assert_eq!(n, 10);
}

/// Reads that keep searching a file in vain before finding their key deeper
/// make that file compact (LevelDB's seek compaction), and only when the
/// option is on.
#[test]
fn reads_that_search_a_file_in_vain_trigger_its_compaction() {
    for seek_compaction in [true, false] {
        let env: Arc<dyn Env> = Arc::new(MemEnv::new());
        let db = DB::open(
            "/seeks",
            Options {
                seek_compaction,
                ..options(&env)
            },
        )
        .unwrap();
        let w = WriteOptions::default();
        for key in [b"b", b"m", b"y"] {
            db.put(&w, key, b"deep").unwrap();
        }
        db.compact_range(None, None).unwrap();
        // A newer file whose key range covers "m" without holding it.
        db.put(&w, b"a", b"shallow").unwrap();
        db.put(&w, b"z", b"shallow").unwrap();
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let files = |db: &DB| -> Vec<String> {
            (0..7)
                .map(|l| {
                    db.property(&format!("shale.num-files-at-level{l}"))
                        .unwrap()
                })
                .collect()
        };
        let before = files(&db);
        assert_eq!(
            before.iter().filter(|n| *n != "0").count(),
            2,
            "two levels hold files: {before:?}"
        );
        // The allowance of a small file is 100 seeks.
        for _ in 0..100 {
            assert_eq!(
                db.get(&ReadOptions::new(), b"m").unwrap().as_deref(),
                Some(&b"deep"[..])
            );
        }
        db.wait_for_compactions().unwrap();
        let after = files(&db);
        if seek_compaction {
            assert_eq!(
                after.iter().filter(|n| *n != "0").count(),
                1,
                "the shallow file was compacted into the deep one: {before:?} -> {after:?}"
            );
        } else {
            assert_eq!(after, before);
        }
        for (key, value) in [
            (b"a", b"shallow" as &[u8]),
            (b"m", b"deep"),
            (b"z", b"shallow"),
        ] {
            assert_eq!(
                db.get(&ReadOptions::new(), key).unwrap().as_deref(),
                Some(value)
            );
        }
    }
}

/// Throttled and stopped writes are counted in all and by cause, and the
/// statistics document says the same as `stall_stats`, after a fill of
/// tiny memtables with L0's triggers at their lowest (which makes the
/// writer wait for flushes, and at times for L0).
#[test]
fn stalls_are_counted_by_cause() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open(
        "/stalls",
        Options {
            write_buffer_size: 8 << 10,
            l0_compaction_trigger: 1,
            l0_slowdown_writes_trigger: 1,
            l0_stop_writes_trigger: 2,
            ..options(&env)
        },
    )
    .unwrap();
    for i in 0..20_000u32 {
        db.put(&WriteOptions::default(), &i.to_be_bytes(), &[b'v'; 100])
            .unwrap();
    }
    let stalls = db.stall_stats();
    assert_eq!(
        stalls.stop_count,
        stalls.stop_for_l0.count + stalls.stop_for_flush.count,
        "{stalls:?}"
    );
    assert_eq!(
        stalls.stop_micros,
        stalls.stop_for_l0.micros + stalls.stop_for_flush.micros,
        "{stalls:?}"
    );
    // No write runs now, so nothing is added between the two reads.
    let causes = db.statistics().stalls.causes;
    assert_eq!(
        causes.l0_slowdown.count + causes.flush_slowdown.count,
        stalls.slowdown_count
    );
    assert_eq!(causes.flush_slowdown.count, stalls.slowdown_for_flush.count);
    assert_eq!(causes.l0_stop.count, stalls.stop_for_l0.count);
    assert_eq!(causes.memtable_flush.count, stalls.stop_for_flush.count);
    assert_eq!(
        causes.memtable_flush.seconds,
        stalls.stop_for_flush.micros as f64 / 1e6
    );
}
