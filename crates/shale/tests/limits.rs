//! Limits a user can reach: a 64 MiB value and a 1 MiB key go through the
//! WAL, the memtable, a flush, a compaction and a reopen intact; a small
//! `max_open_files` holds under many tables and concurrent readers.

#![allow(clippy::unwrap_used, reason = "tests")]

use shale::{Options, ReadOptions, WriteOptions, DB};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// `db` holds the big value under "big-value" and "big-key" under the big key.
fn reads_both(db: &DB, big_key: &[u8], big_value: &[u8]) {
    assert_eq!(
        db.get(&ReadOptions::new(), b"big-value").unwrap().unwrap(),
        big_value
    );
    assert_eq!(
        db.get(&ReadOptions::new(), big_key).unwrap().as_deref(),
        Some(&b"big-key"[..])
    );
}

#[test]
fn a_64_mib_value_and_a_1_mib_key_survive_flush_compaction_and_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let options = || Options {
        create_if_missing: true,
        ..Options::default()
    };
    let big_value = pattern(64 << 20, 7);
    let big_key = pattern(1 << 20, 3);
    {
        let db = DB::open(tmp.path(), options()).unwrap();
        db.put(&WriteOptions { sync: true }, b"big-value", &big_value)
            .unwrap();
        db.put(&WriteOptions::default(), &big_key, b"big-key")
            .unwrap();
        db.put(&WriteOptions::default(), b"small", b"s").unwrap();
        assert_eq!(
            db.get(&ReadOptions::new(), b"big-value").unwrap().unwrap(),
            big_value
        );
    }
    // Reopen: both come back from the WAL.
    {
        let db = DB::open(tmp.path(), options()).unwrap();
        reads_both(&db, &big_key, &big_value);
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let mut iter = db.iter(&ReadOptions::new()).unwrap();
        iter.seek_to_first();
        let mut keys = Vec::new();
        while iter.valid() {
            keys.push(iter.key().len());
            if iter.key() == b"big-value" {
                assert_eq!(iter.value(), &big_value[..]);
            }
            iter.next();
        }
        iter.status().unwrap();
        assert_eq!(keys, vec![1 << 20, 9, 5]);
    }
    // Reopen: both come back from the tables.
    let db = DB::open(tmp.path(), options()).unwrap();
    reads_both(&db, &big_key, &big_value);
    drop(db);
    shale::verify::verify_db(tmp.path(), &options()).unwrap();
}

#[test]
fn a_small_max_open_files_holds_under_many_tables_and_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let db = DB::open(
        tmp.path(),
        Options {
            create_if_missing: true,
            max_open_files: 20,
            write_buffer_size: 32 << 10,
            max_file_size: 16 << 10,
            ..Options::default()
        },
    )
    .unwrap();
    let value = |i: u32| format!("value-{i}-{}", "x".repeat((i % 64) as usize));
    for i in 0..40_000u32 {
        let key = format!("key{:06}", (i * 7919) % 40_000);
        db.put(
            &WriteOptions::default(),
            key.as_bytes(),
            value((i * 7919) % 40_000).as_bytes(),
        )
        .unwrap();
    }
    db.wait_for_compactions().unwrap();
    let tables: usize = (0..7)
        .map(|level| {
            db.property(&format!("shale.num-files-at-level{level}"))
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert!(
        tables > 40,
        "only {tables} tables: the cache is not under pressure"
    );
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let db = db.clone();
            scope.spawn(move || {
                for n in 0..3000u32 {
                    let i = (n * 104_729 + t * 7) % 40_000;
                    let got = db
                        .get(&ReadOptions::new(), format!("key{i:06}").as_bytes())
                        .unwrap();
                    assert_eq!(got.as_deref(), Some(value(i).as_bytes()), "key {i}");
                }
                // The writer adds keys from key040000 on: not counted.
                let below_late = ReadOptions {
                    upper_bound: Some(b"key040000".to_vec()),
                    ..ReadOptions::new()
                };
                let mut iter = db.iter(&below_late).unwrap();
                iter.seek_to_first();
                let mut count = 0;
                while iter.valid() {
                    count += 1;
                    iter.next();
                }
                iter.status().unwrap();
                assert_eq!(count, 40_000);
            });
        }
        // A writer and a compaction beside the readers.
        let db = db.clone();
        scope.spawn(move || {
            for i in 40_000..45_000u32 {
                db.put(
                    &WriteOptions::default(),
                    format!("key{i:06}").as_bytes(),
                    b"late",
                )
                .unwrap();
            }
            db.compact_range(None, None).unwrap();
        });
    });
    assert_eq!(
        db.get(&ReadOptions::new(), b"key044999")
            .unwrap()
            .as_deref(),
        Some(&b"late"[..])
    );
}
