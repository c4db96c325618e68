//! Exercises every shim entry point against the real LevelDB. Each test
//! starts with `require()`, so it skips without LevelDB and fails in CI.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::fs;
use std::path::{Path, PathBuf};

use leveldb_shim::{
    bloom_create_filter, bloom_key_may_match, build_table, build_table_flat, dump_file, read_table,
    repair_db, require, Db, DbOptions, Error, FlatEntries, TableOptions,
};

/// `count` sorted entries with compressible values of varying length.
fn entries(count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let key = format!("key{i:06}").into_bytes();
            let value = format!("value-{i}-").repeat(1 + i % 7).into_bytes();
            (key, value)
        })
        .collect()
}

/// A LevelDB internal key: user key, then (sequence << 8 | type) as fixed64.
fn internal_key(user_key: &[u8], sequence: u64, value_type: u8) -> Vec<u8> {
    let mut key = user_key.to_vec();
    key.extend_from_slice(&((sequence << 8) | u64::from(value_type)).to_le_bytes());
    key
}

#[test]
fn table_round_trips_with_every_option() {
    if !require() {
        return;
    }
    let input = entries(3000);
    for snappy in [false, true] {
        for bloom_bits_per_key in [None, Some(10)] {
            for block_restart_interval in [1, 16] {
                let opts = TableOptions {
                    block_size: 1024,
                    block_restart_interval,
                    bloom_bits_per_key,
                    snappy,
                };
                let bytes = build_table(&input, &opts).unwrap();
                assert_eq!(read_table(&bytes, &opts).unwrap(), input, "{opts:?}");
                // TableBuilder is deterministic: same input, same bytes.
                assert_eq!(build_table(&input, &opts).unwrap(), bytes, "{opts:?}");
            }
        }
    }
}

#[test]
fn snappy_and_bloom_change_the_file() {
    if !require() {
        return;
    }
    let input = entries(3000);
    let plain = build_table(&input, &TableOptions::default()).unwrap();
    let snappy = TableOptions {
        snappy: true,
        ..TableOptions::default()
    };
    let bloom = TableOptions {
        bloom_bits_per_key: Some(10),
        ..TableOptions::default()
    };
    assert!(build_table(&input, &snappy).unwrap().len() < plain.len() / 2);
    // The filter block is named after the policy in the metaindex block.
    let with_filter = build_table(&input, &bloom).unwrap();
    let name = b"filter.leveldb.BuiltinBloomFilter2";
    assert!(with_filter.windows(name.len()).any(|window| window == name));
    assert!(!plain.windows(name.len()).any(|window| window == name));
}

#[test]
fn empty_table_round_trips() {
    if !require() {
        return;
    }
    let opts = TableOptions::default();
    let bytes = build_table(&[], &opts).unwrap();
    // Footer only besides the empty index and metaindex blocks.
    assert!(bytes.len() >= 48);
    assert_eq!(read_table(&bytes, &opts).unwrap(), Vec::new());
}

#[test]
fn flat_build_matches_pair_build() {
    if !require() {
        return;
    }
    let input = entries(500);
    let opts = TableOptions::default();
    let flat = FlatEntries::from_pairs(&input).unwrap();
    assert_eq!(flat.len(), 500);
    assert_eq!(
        build_table_flat(&flat, &opts).unwrap(),
        build_table(&input, &opts).unwrap()
    );
}

#[test]
fn build_table_rejects_unsorted_or_duplicate_keys() {
    if !require() {
        return;
    }
    let opts = TableOptions::default();
    for keys in [["b", "a"], ["a", "a"]] {
        let input: Vec<_> = keys
            .iter()
            .map(|key| (key.as_bytes().to_vec(), b"v".to_vec()))
            .collect();
        let err = build_table(&input, &opts).unwrap_err();
        assert!(
            matches!(&err, Error::LevelDb(text) if text.contains("strictly increasing")),
            "{err}"
        );
    }
}

#[test]
fn read_table_verifies_checksums() {
    if !require() {
        return;
    }
    let opts = TableOptions::default();
    let mut bytes = build_table(&entries(100), &opts).unwrap();
    // Byte 10 lies inside the first data block's entries.
    bytes[10] ^= 0x01;
    let err = read_table(&bytes, &opts).unwrap_err();
    assert!(
        matches!(&err, Error::LevelDb(text) if text.contains("Corruption")),
        "{err}"
    );
    assert!(read_table(b"not a table", &opts).is_err());
}

#[test]
fn bloom_filter_matches_every_inserted_key() {
    if !require() {
        return;
    }
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| format!("key{i}").into_bytes()).collect();
    let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let filter = bloom_create_filter(10, &key_refs).unwrap();
    // 10 bits per key for 1000 keys, then one byte holding k = 10 * ln 2,
    // rounded down.
    assert_eq!(filter.len(), 1000 * 10 / 8 + 1);
    assert_eq!(filter.last(), Some(&6));
    for key in &key_refs {
        assert!(bloom_key_may_match(10, key, &filter).unwrap());
    }
    // About 1% false positives at 10 bits per key; allow slack.
    let false_positives = (0..10_000)
        .filter(|i| bloom_key_may_match(10, format!("absent{i}").as_bytes(), &filter).unwrap())
        .count();
    assert!(false_positives < 300, "{false_positives} false positives");
}

#[test]
fn bloom_rejects_negative_bits_per_key() {
    if !require() {
        return;
    }
    assert!(matches!(
        bloom_create_filter(-1, &[b"key".as_slice()]),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn db_put_delete_write_get_scan_compact() {
    if !require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), &DbOptions::default()).unwrap();

    db.put(b"a", b"1", false).unwrap();
    db.put(b"b", b"2", true).unwrap();
    db.put(b"c", b"3", false).unwrap();
    db.delete(b"b", false).unwrap();
    db.write(
        &[(b"d", Some(b"4")), (b"a", None), (b"e", Some(b""))],
        false,
    )
    .unwrap();

    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.get(b"c").unwrap(), Some(b"3".to_vec()));
    assert_eq!(db.get(b"e").unwrap(), Some(Vec::new()));
    let expected = vec![
        (b"c".to_vec(), b"3".to_vec()),
        (b"d".to_vec(), b"4".to_vec()),
        (b"e".to_vec(), Vec::new()),
    ];
    assert_eq!(db.scan_all().unwrap(), expected);

    // Everything is still in the memtable. CompactRange flushes it, and
    // LevelDB places a flushed table that overlaps nothing at level 2
    // (kMaxMemCompactLevel); no deeper level holds files, so it stays there.
    let files_per_level = |db: &Db| {
        (0..7)
            .map(|level| {
                db.property(&format!("leveldb.num-files-at-level{level}"))
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(files_per_level(&db), ["0"; 7]);
    assert_eq!(table_files(dir.path()), 0);
    db.compact_range(None, None);
    assert_eq!(files_per_level(&db), ["0", "0", "1", "0", "0", "0", "0"]);
    assert_eq!(table_files(dir.path()), 1);
    let sstables = db.property("leveldb.sstables").unwrap();
    assert!(sstables.contains("--- level 2 ---\n "), "{sstables}");
    let stats = db.property("leveldb.stats").unwrap();
    assert!(stats.contains("Compactions"), "{stats}");
    assert_eq!(db.property("leveldb.no-such-property"), None);
    assert_eq!(db.scan_all().unwrap(), expected);
    db.compact_range(Some(b"c"), Some(b"d"));

    // The data survives a reopen.
    drop(db);
    let db = Db::open(dir.path(), &DbOptions::default()).unwrap();
    assert_eq!(db.scan_all().unwrap(), expected);
    drop(db);

    let err = Db::open(
        dir.path(),
        &DbOptions {
            error_if_exists: true,
            ..DbOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::LevelDb(text) if text.contains("exists")),
        "{err}"
    );
}

#[test]
fn db_open_fails_without_create_if_missing() {
    if !require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = DbOptions {
        create_if_missing: false,
        ..DbOptions::default()
    };
    assert!(matches!(
        Db::open(&dir.path().join("missing"), &opts),
        Err(Error::LevelDb(_))
    ));
}

#[test]
fn db_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Db>();
}

fn table_files(dir: &Path) -> usize {
    files_matching(dir, |name| name.ends_with(".ldb")).len()
}

fn files_matching(dir: &Path, wanted: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| wanted(path.file_name().unwrap().to_str().unwrap()))
        .collect();
    paths.sort();
    paths
}

#[test]
fn dump_file_prints_a_table() {
    if !require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input: Vec<_> = (1..=3u64)
        .map(|i| {
            let user_key = format!("k{i:03}");
            (
                internal_key(user_key.as_bytes(), i, 1),
                format!("v{i:03}").into_bytes(),
            )
        })
        .collect();
    let path = dir.path().join("000005.ldb");
    fs::write(
        &path,
        build_table(&input, &TableOptions::default()).unwrap(),
    )
    .unwrap();
    let dump = dump_file(&path).unwrap();
    assert!(dump.contains("'k002' @ 2 : val => 'v002'"), "{dump}");

    // Keys that are not internal keys still dump, as "badkey".
    let plain = dir.path().join("000006.ldb");
    fs::write(
        &plain,
        build_table(&entries(3), &TableOptions::default()).unwrap(),
    )
    .unwrap();
    let dump = dump_file(&plain).unwrap();
    assert!(dump.contains("badkey"), "{dump}");

    // DumpFile knows files only by LevelDB's names.
    let unnamed = dir.path().join("table.bin");
    fs::copy(&path, &unnamed).unwrap();
    assert!(dump_file(&unnamed).is_err());
}

#[test]
fn dump_file_prints_a_manifest_and_a_log() {
    if !require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), &DbOptions::default()).unwrap();
    db.put(b"apple", b"red", true).unwrap();
    db.write(&[(b"banana", Some(b"yellow")), (b"apple", None)], true)
        .unwrap();
    drop(db);

    let manifests = files_matching(dir.path(), |name| name.starts_with("MANIFEST-"));
    assert_eq!(manifests.len(), 1);
    let dump = dump_file(&manifests[0]).unwrap();
    assert!(dump.contains("leveldb.BytewiseComparator"), "{dump}");

    let logs = files_matching(dir.path(), |name| name.ends_with(".log"));
    assert_eq!(logs.len(), 1);
    let dump = dump_file(&logs[0]).unwrap();
    assert!(dump.contains("put 'apple' 'red'"), "{dump}");
    assert!(dump.contains("del 'apple'"), "{dump}");
    assert!(dump.contains("put 'banana' 'yellow'"), "{dump}");
}

#[test]
fn repair_db_rebuilds_a_lost_manifest() {
    if !require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), &DbOptions::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"table", false)
            .unwrap();
    }
    db.compact_range(None, None);
    db.put(b"k000", b"log", true).unwrap();
    drop(db);
    for manifest in files_matching(dir.path(), |name| name.starts_with("MANIFEST-")) {
        fs::remove_file(manifest).unwrap();
    }
    fs::remove_file(dir.path().join("CURRENT")).unwrap();

    repair_db(dir.path()).unwrap();
    // The log became a table; it and the old MANIFEST are gone to lost/.
    assert!(files_matching(dir.path(), |name| name.ends_with(".log")).is_empty());
    assert!(!files_matching(&dir.path().join("lost"), |name| name.ends_with(".log")).is_empty());
    let db = Db::open(dir.path(), &DbOptions::default()).unwrap();
    assert_eq!(db.get(b"k000").unwrap(), Some(b"log".to_vec()));
    assert_eq!(db.get(b"k099").unwrap(), Some(b"table".to_vec()));
    assert_eq!(db.scan_all().unwrap().len(), 100);
    drop(db);

    // LevelDB creates its info log before it lists the directory, so a
    // missing directory becomes an empty database rather than an error.
    let missing = dir.path().join("missing");
    repair_db(&missing).unwrap();
    let db = Db::open(&missing, &DbOptions::default()).unwrap();
    assert!(db.scan_all().unwrap().is_empty());
}

/// The one test that runs in a build without LevelDB: every call must say
/// how to install it rather than pretend to work.
#[test]
fn without_leveldb_every_call_says_how_to_install() {
    if leveldb_shim::available() {
        return;
    }
    let opts = TableOptions::default();
    assert_eq!(build_table(&entries(1), &opts), Err(Error::Unavailable));
    assert_eq!(read_table(b"", &opts), Err(Error::Unavailable));
    assert_eq!(bloom_create_filter(10, &[]), Err(Error::Unavailable));
    assert_eq!(dump_file(Path::new("000001.log")), Err(Error::Unavailable));
    assert_eq!(repair_db(Path::new("db")), Err(Error::Unavailable));
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open(dir.path(), &DbOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains(leveldb_shim::INSTALL_COMMAND),
        "{err}"
    );
}
