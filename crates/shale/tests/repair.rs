//! `shale::repair` (LevelDB's `RepairDB`): databases whose MANIFEST or
//! CURRENT was deleted or damaged, with damaged tables and with writes only
//! in the WAL come back holding every entry that can still be read; a
//! database written by LevelDB 1.23 is repaired too, and the result reads
//! the same as LevelDB's own `RepairDB` of a copy of the same directory.
//!
//! The LevelDB tests first ask `leveldb_shim::require()`: without LevelDB
//! they skip (and fail in CI).

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use leveldb_shim::{Db as LevelDb, DbOptions as LevelDbOptions};
use shale::env::{read_file, write_file, Env, FaultInjectionEnv, MemEnv};
use shale::filename::{self, FileType};
use shale::format::internal_key::ParsedInternalKey;
use shale::format::iterator::KvIterator;
use shale::format::table::{ReadTableOptions, Table};
use shale::repair::{LostReason, TableOrigin};
use shale::{Error, Options, ReadOptions, RepairReport, WriteBatch, WriteOptions, DB};
use support::{scan, Entries, Model};

/// Small buffers and blocks, and no automatic compaction: the tables a test
/// writes stay where it put them, so that it knows what is in each.
fn options(env: Arc<dyn Env>) -> Options {
    Options {
        write_buffer_size: 32 << 10,
        block_size: 1024,
        max_file_size: 32 << 10,
        l0_compaction_trigger: 1000,
        l0_slowdown_writes_trigger: 1000,
        l0_stop_writes_trigger: 1000,
        max_bytes_for_level_base: 1 << 40,
        seek_compaction: false,
        ..support::options(&env)
    }
}

fn mem_options() -> Options {
    options(Arc::new(MemEnv::new()))
}

fn disk_options() -> Options {
    options(shale::env::default_env())
}

fn key(n: u32) -> Vec<u8> {
    format!("key{n:06}").into_bytes()
}

fn value(tag: &str, n: u32) -> Vec<u8> {
    format!("{tag}:{n}:{}", "v".repeat(20 + (n as usize * 7) % 90)).into_bytes()
}

/// A database with tables on several levels and in L0, overwrites,
/// deletes, and the last writes only in the WAL. Returns what it holds.
fn build_db(dir: &Path, options: &Options) -> Model {
    let db = DB::open(dir, options.clone()).unwrap();
    let write = WriteOptions::default();
    let mut model = Model::new();
    for n in 0..3000 {
        db.put(&write, &key(n), &value("first", n)).unwrap();
        model.insert(key(n), value("first", n));
    }
    db.compact_range(None, None).unwrap();
    for n in (0..3000).step_by(3) {
        db.put(&write, &key(n), &value("second", n)).unwrap();
        model.insert(key(n), value("second", n));
    }
    for n in (1..3000).step_by(11) {
        db.delete(&write, &key(n)).unwrap();
        model.remove(&key(n));
    }
    db.flush().unwrap();
    // Unflushed: a batch, overwrites, a delete, and new keys.
    let mut batch = WriteBatch::new();
    for n in 2990..3010 {
        batch.put(&key(n), &value("wal", n)).unwrap();
        model.insert(key(n), value("wal", n));
    }
    db.write(&write, batch).unwrap();
    db.delete(&write, &key(5)).unwrap();
    model.remove(&key(5));
    model
}

fn entries(model: &Model) -> Entries {
    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Opens the database and checks it holds exactly `model`: a scan, and a
/// `get` of every key in it and of keys that are not.
fn assert_reads(dir: &Path, options: &Options, model: &Model) {
    let db = DB::open(
        dir,
        Options {
            create_if_missing: false,
            ..options.clone()
        },
    )
    .unwrap();
    assert_eq!(scan(&db, &ReadOptions::new()), entries(model));
    for n in (0..3100).step_by(7) {
        assert_eq!(
            db.get(&ReadOptions::new(), &key(n)).unwrap().as_ref(),
            model.get(&key(n)),
            "get {n}"
        );
    }
    // And it takes writes and keeps them across a reopen.
    db.put(&WriteOptions::default(), b"after repair", b"yes")
        .unwrap();
    drop(db);
    let db = DB::open(dir, options.clone()).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"after repair").unwrap(),
        Some(b"yes".to_vec())
    );
}

/// The names of the files of `kind` in `dir`, sorted.
fn files_of(env: &dyn Env, dir: &Path, kind: FileType) -> Vec<String> {
    let mut names: Vec<String> = env
        .children(dir)
        .unwrap()
        .into_iter()
        .filter(|n| filename::parse_file_name(n).is_some_and(|(_, k)| k == kind))
        .collect();
    names.sort();
    names
}

fn remove_all(env: &dyn Env, dir: &Path, kind: FileType) {
    for name in files_of(env, dir, kind) {
        env.remove_file(&dir.join(name)).unwrap();
    }
}

fn flip_byte(env: &dyn Env, path: &Path, offset: usize) {
    let mut bytes = read_file(env, path).unwrap();
    bytes[offset] ^= 0x5a;
    write_file(env, path, &bytes, false).unwrap();
}

/// The user keys in the first data block of table `path`.
fn first_block_keys(env: &dyn Env, path: &Path) -> Vec<Vec<u8>> {
    let source = env.new_random_access_file(path).unwrap();
    let size = env.file_size(path).unwrap();
    let options = ReadTableOptions {
        comparator: Arc::new(shale::format::comparator::InternalKeyComparator),
        filter_policy: None,
        verify_checksums: true,
        block_cache: None,
    };
    let table = Table::open(source, size, "table", options).unwrap();
    let handle = table.block_handles().unwrap()[0];
    let block = table.read_data_block(handle, Default::default()).unwrap();
    let mut iter = block.iter(Arc::new(shale::format::comparator::InternalKeyComparator));
    iter.seek_to_first();
    let mut keys = Vec::new();
    while iter.valid() {
        keys.push(
            ParsedInternalKey::parse(iter.key())
                .unwrap()
                .user_key
                .to_vec(),
        );
        iter.next();
    }
    keys
}

fn lost_names(report: &RepairReport) -> Vec<(&str, &LostReason)> {
    report
        .lost
        .iter()
        .map(|f| (f.name.as_str(), &f.reason))
        .collect()
}

#[test]
fn deleted_manifest_is_rebuilt_from_tables_and_logs() {
    let options = mem_options();
    let env = &*options.env;
    let dir = PathBuf::from("/no-manifest");
    let model = build_db(&dir, &options);
    let old_manifests = files_of(env, &dir, FileType::Descriptor);
    let logs = files_of(env, &dir, FileType::Log);
    assert!(!logs.is_empty());
    remove_all(env, &dir, FileType::Descriptor);
    // An older table name is found too.
    let tables = files_of(env, &dir, FileType::Table);
    let renamed = tables[0].replace(".ldb", ".sst");
    env.rename(&dir.join(&tables[0]), &dir.join(&renamed))
        .unwrap();
    let err = DB::open(&dir, options.clone()).unwrap_err();
    assert!(err.is_corruption(), "{err}");

    let report = shale::repair(&dir, &options).unwrap();
    println!("{report}");
    assert!(report.manifest.starts_with("MANIFEST-"));
    assert!(!old_manifests.contains(&report.manifest));
    assert_eq!(
        files_of(env, &dir, FileType::Descriptor),
        std::slice::from_ref(&report.manifest)
    );
    assert_eq!(
        read_file(env, &filename::current_file_name(&dir)).unwrap(),
        format!("{}\n", report.manifest).into_bytes()
    );
    // Every table kept; the WAL became a table and went to lost/.
    assert_eq!(report.tables.len(), tables.len() + 1, "{report}");
    assert_eq!(report.logs.len(), logs.len());
    let from_log = report
        .tables
        .iter()
        .filter(|t| matches!(t.origin, TableOrigin::FromLog { .. }))
        .count();
    assert_eq!(from_log, 1, "{report}");
    assert_eq!(report.logs.iter().map(|l| l.records).sum::<u64>(), 2);
    assert_eq!(report.logs.iter().map(|l| l.entries).sum::<u64>(), 21);
    assert!(files_of(env, &dir, FileType::Log).is_empty());
    for log in &logs {
        assert!(env.file_exists(&dir.join("lost").join(log)), "{log}");
    }
    assert!(lost_names(&report).contains(&(logs[0].as_str(), &LostReason::Converted)));
    assert!(!report.lost_data(), "{report}");
    assert!(report.to_string().contains("lost: nothing"), "{report}");
    assert!(env.file_exists(&dir.join(&renamed)));
    assert!(report.last_sequence >= 3000 + 1000 + 273 + 21);
    assert_reads(&dir, &options, &model);
}

#[test]
fn deleted_current_is_rebuilt_and_the_old_manifest_moved() {
    let options = mem_options();
    let env = &*options.env;
    let dir = PathBuf::from("/no-current");
    let model = build_db(&dir, &options);
    let old_manifests = files_of(env, &dir, FileType::Descriptor);
    env.remove_file(&filename::current_file_name(&dir)).unwrap();

    let report = shale::repair(&dir, &options).unwrap();
    for manifest in &old_manifests {
        assert!(
            lost_names(&report).contains(&(manifest.as_str(), &LostReason::Replaced)),
            "{report}"
        );
        assert!(env.file_exists(&dir.join("lost").join(manifest)));
    }
    assert_reads(&dir, &options, &model);

    // Repairing a healthy database changes nothing it holds; its MANIFEST
    // joins the old ones in lost/ (next to the first, of the same name).
    let live = files_of(env, &dir, FileType::Descriptor);
    let again = shale::repair(&dir, &options).unwrap();
    assert!(!again.lost_data(), "{again}");
    assert!(lost_names(&again).contains(&(live[0].as_str(), &LostReason::Replaced)));
    assert!(env.file_exists(&dir.join("lost").join(&live[0])));
    let mut model = model;
    model.insert(b"after repair".to_vec(), b"yes".to_vec());
    assert_reads(&dir, &options, &model);
}

#[test]
fn damaged_current_and_manifest_are_replaced() {
    let options = mem_options();
    let env = &*options.env;
    let dir = PathBuf::from("/bad-current");
    let model = build_db(&dir, &options);
    let manifest = dir.join(&files_of(env, &dir, FileType::Descriptor)[0]);
    flip_byte(env, &manifest, 20);
    write_file(
        env,
        &filename::current_file_name(&dir),
        b"\xff\x00garbage",
        false,
    )
    .unwrap();
    assert!(DB::open(&dir, options.clone()).is_err());

    let report = shale::repair(&dir, &options).unwrap();
    assert!(!report.lost_data(), "{report}");
    assert_reads(&dir, &options, &model);

    // CURRENT naming a MANIFEST that is not there.
    write_file(
        env,
        &filename::current_file_name(&dir),
        b"MANIFEST-999999\n",
        false,
    )
    .unwrap();
    assert!(DB::open(&dir, options.clone()).is_err());
    shale::repair(&dir, &options).unwrap();
    let mut model = model;
    model.insert(b"after repair".to_vec(), b"yes".to_vec());
    assert_reads(&dir, &options, &model);
}

/// On the real file system: a table with a damaged data block is rewritten
/// without that block and the original is in `lost/`; a table of which
/// nothing can be read is moved there whole.
#[test]
fn damaged_tables_keep_their_readable_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let options = disk_options();
    let env = &*options.env;
    // Only the first phase: every key has one version, in one table.
    let mut model = Model::new();
    {
        let db = DB::open(&dir, options.clone()).unwrap();
        for n in 0..3000 {
            db.put(&WriteOptions::default(), &key(n), &value("only", n))
                .unwrap();
            model.insert(key(n), value("only", n));
        }
        db.compact_range(None, None).unwrap();
    }
    let tables = files_of(env, &dir, FileType::Table);
    assert!(tables.len() >= 3, "{tables:?}");
    let damaged = dir.join(&tables[0]);
    let gone = first_block_keys(env, &damaged);
    assert!(!gone.is_empty());
    flip_byte(env, &damaged, 10);
    // The second table loses its footer: nothing in it can be found.
    let unreadable = dir.join(&tables[1]);
    let unreadable_keys: Vec<Vec<u8>> = {
        // Every key of the table, from a scan of it before the damage.
        let mut keys = Vec::new();
        let bytes = read_file(env, &unreadable).unwrap();
        let source = env.new_random_access_file(&unreadable).unwrap();
        let table = Table::open(
            source,
            bytes.len() as u64,
            "t",
            ReadTableOptions {
                comparator: Arc::new(shale::format::comparator::InternalKeyComparator),
                filter_policy: None,
                verify_checksums: true,
                block_cache: None,
            },
        )
        .unwrap();
        let mut iter = table.iter();
        iter.seek_to_first();
        while iter.valid() {
            keys.push(
                ParsedInternalKey::parse(iter.key())
                    .unwrap()
                    .user_key
                    .to_vec(),
            );
            iter.next();
        }
        write_file(env, &unreadable, &bytes[..bytes.len() - 20], false).unwrap();
        keys
    };
    std::fs::remove_file(dir.join("CURRENT")).unwrap();

    let report = shale::repair(&dir, &options).unwrap();
    println!("{report}");
    let rewritten: Vec<_> = report
        .tables
        .iter()
        .filter(|t| matches!(t.origin, TableOrigin::Rewritten { .. }))
        .collect();
    assert_eq!(rewritten.len(), 1, "{report}");
    assert_eq!(
        rewritten[0].origin,
        TableOrigin::Rewritten {
            blocks_skipped: 1,
            entries_skipped: 0
        }
    );
    assert_eq!(report.blocks_skipped(), 1);
    assert_eq!(report.tables_lost(), 1);
    assert!(report.lost_data());
    let lost = lost_names(&report);
    assert!(
        matches!(lost.iter().find(|(n, _)| *n == tables[0]), Some((_, LostReason::Rewritten(why))) if why.contains("checksum")),
        "{report}"
    );
    assert!(
        matches!(
            lost.iter().find(|(n, _)| *n == tables[1]),
            Some((_, LostReason::Unreadable(_)))
        ),
        "{report}"
    );
    // Both originals are in lost/, untouched; the rewritten table has the
    // damaged one's number.
    assert!(dir.join("lost").join(&tables[0]).exists());
    assert!(dir.join("lost").join(&tables[1]).exists());
    assert!(dir.join(&tables[0]).exists());
    assert!(!dir.join(&tables[1]).exists());
    let text = report.to_string();
    assert!(
        text.contains("lost: 1 unreadable table, 1 data block"),
        "{text}"
    );
    assert!(
        text.contains(&format!("moved lost/{}", tables[1])),
        "{text}"
    );

    for key in gone.iter().chain(&unreadable_keys) {
        model.remove(key);
    }
    assert_eq!(report.entries(), model.len() as u64);
    assert_reads(&dir, &options, &model);
    // The database checks clean now.
    shale::verify::verify_db(&dir, &options).unwrap();
}

#[test]
fn writes_only_in_the_wal_are_converted_and_a_damaged_record_skipped() {
    let options = mem_options();
    let env = &*options.env;
    let dir = PathBuf::from("/wal-only");
    let mut model = Model::new();
    {
        let db = DB::open(
            &dir,
            Options {
                write_buffer_size: 64 << 20,
                ..options.clone()
            },
        )
        .unwrap();
        for n in 0..2000 {
            db.put(&WriteOptions::default(), &key(n), &value("wal", n))
                .unwrap();
            model.insert(key(n), value("wal", n));
        }
    }
    assert!(files_of(env, &dir, FileType::Table).is_empty());
    let log = dir.join(&files_of(env, &dir, FileType::Log)[0]);
    // A byte in the middle of the log, and a write cut short at its end.
    let bytes = read_file(env, &log).unwrap();
    let middle = bytes.len() / 2;
    let mut damaged = bytes.clone();
    damaged[middle] ^= 0x01;
    damaged.truncate(bytes.len() - 5);
    write_file(env, &log, &damaged, false).unwrap();

    let report = shale::repair(&dir, &options).unwrap();
    println!("{report}");
    assert_eq!(report.logs.len(), 1);
    let converted = &report.logs[0];
    assert!(converted.records_skipped >= 1, "{report}");
    assert!(converted.bytes_skipped > 0, "{report}");
    // The write buffer of `options` (32 KiB) splits the log into tables.
    assert!(converted.tables.len() > 1, "{report}");
    assert_eq!(report.tables.len(), converted.tables.len());
    assert!(report.lost_data());

    let db = DB::open(&dir, options.clone()).unwrap();
    let found = scan(&db, &ReadOptions::new());
    // Most records survive; whatever is there is exactly what was written.
    assert!(found.len() > 1500, "{}", found.len());
    assert_eq!(found.len() as u64, converted.entries);
    for (key, value) in &found {
        assert_eq!(model.get(key), Some(value));
    }
    assert!(found.len() < model.len());
}

/// All tables go to level 0, where lookups search by file number: when a
/// table with older entries has the higher number (as a table from a deeper
/// level can), a lookup finds the older entry until a compaction merges
/// them. LevelDB's repair has the same limit; the report says when it can
/// happen.
#[test]
fn the_report_flags_tables_a_lookup_would_search_in_the_wrong_order() {
    let options = mem_options();
    let env = &*options.env;
    let dir = PathBuf::from("/order");
    {
        let db = DB::open(&dir, options.clone()).unwrap();
        let write = WriteOptions::default();
        for k in [&b"a"[..], b"m", b"z"] {
            db.put(&write, k, b"old").unwrap();
        }
        db.flush().unwrap();
        db.put(&write, b"m", b"new").unwrap();
        db.flush().unwrap();
    }
    let tables = files_of(env, &dir, FileType::Table);
    assert_eq!(tables.len(), 2);
    // The older table takes a number above the newer one's.
    env.rename(&dir.join(&tables[0]), &dir.join("000900.ldb"))
        .unwrap();
    remove_all(env, &dir, FileType::Descriptor);

    let report = shale::repair(&dir, &options).unwrap();
    assert_eq!(report.out_of_order_overlaps, 1, "{report}");
    assert!(
        report
            .to_string()
            .contains("note: 1 pair of overlapping tables"),
        "{report}"
    );
    let db = DB::open(&dir, options.clone()).unwrap();
    let newest = vec![
        (b"a".to_vec(), b"old".to_vec()),
        (b"m".to_vec(), b"new".to_vec()),
        (b"z".to_vec(), b"old".to_vec()),
    ];
    assert_eq!(scan(&db, &ReadOptions::new()), newest);
    assert_eq!(
        db.get(&ReadOptions::new(), b"m").unwrap(),
        Some(b"old".to_vec())
    );
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"m").unwrap(),
        Some(b"new".to_vec())
    );
    assert_eq!(scan(&db, &ReadOptions::new()), newest);

    drop(db);
    // After the compaction nothing overlaps out of order.
    let report = shale::repair(&dir, &options).unwrap();
    assert_eq!(report.out_of_order_overlaps, 0, "{report}");
}

/// A version held across a compaction keeps the compaction's inputs on
/// disk; closing the database deletes them once nothing holds it, so that
/// a later `repair` (which takes every table it finds as live) does not
/// bring back stale values.
#[test]
fn closing_deletes_the_tables_a_reader_kept_past_a_compaction() {
    let options = mem_options();
    let env = &*options.env;
    let dir = PathBuf::from("/held");
    let db = DB::open(&dir, options.clone()).unwrap();
    let write = WriteOptions::default();
    for value in [&b"old"[..], b"new"] {
        for k in [&b"a"[..], b"m", b"z"] {
            db.put(&write, k, value).unwrap();
        }
        db.flush().unwrap();
    }
    let inputs = files_of(env, &dir, FileType::Table);
    assert_eq!(inputs.len(), 2);
    let reader = db.iter(&ReadOptions::new()).unwrap();
    db.compact_range(None, None).unwrap();
    let held = files_of(env, &dir, FileType::Table);
    assert!(inputs.iter().all(|t| held.contains(t)), "{held:?}");
    drop(reader);
    drop(db);
    let left = files_of(env, &dir, FileType::Table);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(!inputs.contains(&left[0]), "{left:?}");
    let report = shale::repair(&dir, &options).unwrap();
    assert_eq!(report.out_of_order_overlaps, 0, "{report}");
}

#[test]
fn missing_or_empty_directories_are_clear_errors() {
    let options = mem_options();
    let env = &*options.env;
    let err = shale::repair("/nothing-here", &options).unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("no such directory"), "{err}");
    assert!(!env.file_exists(Path::new("/nothing-here")));

    env.create_dir_all(Path::new("/empty")).unwrap();
    let err = shale::repair("/empty", &options).unwrap_err();
    assert!(err.to_string().contains("no database files"), "{err}");
    // Not even a LOCK left behind.
    assert!(env.children(Path::new("/empty")).unwrap().is_empty());

    write_file(env, Path::new("/other/notes.txt"), b"hello", false).unwrap();
    let err = shale::repair("/other", &options).unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err:?}");
    assert_eq!(env.children(Path::new("/other")).unwrap(), ["notes.txt"]);
}

/// Files with a database's names and anything in them: never a panic.
#[test]
fn garbage_files_are_moved_to_lost_and_absurd_numbers_refused() {
    let options = mem_options();
    let env = &*options.env;
    let dir = PathBuf::from("/garbage");
    // Longer than a log block (32 KiB): damage inside a whole block is
    // reported, while in the last, partial block it reads as a torn write.
    let noise: Vec<u8> = (0..70_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for name in [
        "000004.ldb",
        "000005.sst",
        "000006.log",
        "MANIFEST-000002",
        "CURRENT",
    ] {
        write_file(env, &dir.join(name), &noise, false).unwrap();
    }
    write_file(env, &dir.join("000007.ldb"), b"", false).unwrap();
    write_file(env, &dir.join("000008.log"), b"", false).unwrap();

    let report = shale::repair(&dir, &options).unwrap();
    println!("{report}");
    assert!(report.tables.is_empty(), "{report}");
    assert_eq!(report.tables_lost(), 3, "{report}");
    assert_eq!(report.logs.len(), 2);
    assert!(report.records_skipped() >= 1, "{report}");
    assert_eq!(report.last_sequence, 0);
    let db = DB::open(&dir, options.clone()).unwrap();
    assert!(scan(&db, &ReadOptions::new()).is_empty());
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    drop(db);

    // A file numbered u64::MAX leaves no number for the new MANIFEST.
    write_file(env, &dir.join(format!("{}.log", u64::MAX)), &noise, false).unwrap();
    let err = shale::repair(&dir, &options).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("no file number is left"), "{err}");
    // Nothing was moved; without that file the database opens as it was.
    env.remove_file(&dir.join(format!("{}.log", u64::MAX)))
        .unwrap();
    let db = DB::open(&dir, options).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}

#[test]
fn an_open_database_is_not_repaired() {
    let options = mem_options();
    let dir = PathBuf::from("/open");
    let db = DB::open(&dir, options.clone()).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    let err = shale::repair(&dir, &options).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err:?}");
    assert!(
        err.to_string().contains("close it before repairing"),
        "{err}"
    );
    drop(db);
    shale::repair(&dir, &options).unwrap();
    let db = DB::open(&dir, options).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}

/// A disk that fails part way: the repair stops with the error and leaves
/// the database as it was (the logs and the old MANIFEST in place, no
/// table of its own left behind); once the disk works it succeeds.
#[test]
fn a_failing_disk_stops_the_repair_and_a_second_run_succeeds() {
    let mem = MemEnv::new();
    let fault = Arc::new(FaultInjectionEnv::new(Arc::new(mem.clone())));
    let options = options(fault.clone());
    let dir = PathBuf::from("/faulty");
    let model = build_db(&dir, &options);
    // The files, less the info logs (a repair writes to LOG too).
    let files = || -> Vec<String> {
        let mut names: Vec<String> = mem
            .children(&dir)
            .unwrap()
            .into_iter()
            .filter(|n| !n.starts_with("LOG"))
            .collect();
        names.sort();
        names
    };
    let before = files();
    fault.set_fail_syncs(true);
    let err = shale::repair(&dir, &options).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    fault.clear_failures();
    assert_eq!(files(), before);

    let report = shale::repair(&dir, &options).unwrap();
    assert!(!report.lost_data(), "{report}");
    assert_reads(&dir, &options, &model);
}

// ---- LevelDB 1.23, through the shim ----

fn leveldb_options() -> LevelDbOptions {
    LevelDbOptions {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        max_file_size: 64 << 10,
        block_size: 1024,
        bloom_bits_per_key: Some(10),
        ..LevelDbOptions::default()
    }
}

/// LevelDB writes a database: flushes, compactions to several levels,
/// overwrites, deletes, and the last writes only in its WAL.
fn leveldb_build_db(dir: &Path) -> Model {
    let mut db = LevelDb::open(dir, &leveldb_options()).unwrap();
    let mut model = Model::new();
    for n in 0..6000 {
        db.put(&key(n), &value("first", n), false).unwrap();
        model.insert(key(n), value("first", n));
    }
    db.compact_range(None, None);
    for n in (0..6000).step_by(4) {
        db.put(&key(n), &value("second", n), false).unwrap();
        model.insert(key(n), value("second", n));
    }
    for n in (1..6000).step_by(13) {
        db.delete(&key(n), false).unwrap();
        model.remove(&key(n));
    }
    db.compact_range(Some(&key(1000)), Some(&key(2000)));
    for n in 5990..6010 {
        db.put(&key(n), &value("wal", n), false).unwrap();
        model.insert(key(n), value("wal", n));
    }
    assert_eq!(db.scan_all().unwrap(), entries(&model));
    model
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// ShaleDB repairs a copy of `dir` and LevelDB's `RepairDB` another; both
/// results read the same, in ShaleDB and in LevelDB. Returns what they read
/// and ShaleDB's report.
fn repair_both(dir: &Path, work: &Path) -> (Entries, RepairReport) {
    let ours = work.join("shale");
    let theirs = work.join("leveldb");
    copy_dir(dir, &ours);
    copy_dir(dir, &theirs);
    let options = disk_options();
    let report = shale::repair(&ours, &options).unwrap();
    println!("{report}");
    leveldb_shim::repair_db(&theirs).unwrap();

    let leveldb_view = LevelDb::open(&theirs, &leveldb_options())
        .unwrap()
        .scan_all()
        .unwrap();
    let shale_view = scan(&DB::open(&ours, options).unwrap(), &ReadOptions::new());
    assert_eq!(shale_view, leveldb_view, "ShaleDB's repair vs LevelDB's");
    // LevelDB reads ShaleDB's repaired database the same.
    let leveldb_of_ours = LevelDb::open(&ours, &leveldb_options())
        .unwrap()
        .scan_all()
        .unwrap();
    assert_eq!(
        leveldb_of_ours, leveldb_view,
        "LevelDB reading ShaleDB's repair"
    );
    // Both moved the same files to lost/ (LevelDB names the originals of
    // rewritten tables as they were; so does ShaleDB).
    let lost = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("lost"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with("MANIFEST-"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    assert_eq!(lost(&ours), lost(&theirs));
    (shale_view, report)
}

#[test]
fn leveldb_database_with_a_lost_manifest_is_repaired() {
    if !leveldb_shim::require() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = leveldb_build_db(&dir);
    let env = shale::env::default_env();
    remove_all(&*env, &dir, FileType::Descriptor);
    std::fs::remove_file(dir.join("CURRENT")).unwrap();

    let report = shale::repair(&dir, &disk_options()).unwrap();
    println!("{report}");
    assert!(!report.lost_data(), "{report}");
    assert_eq!(report.logs.len(), 1, "{report}");
    let db = DB::open(&dir, disk_options()).unwrap();
    assert_eq!(scan(&db, &ReadOptions::new()), entries(&model));
    drop(db);
    shale::verify::verify_db(&dir, &disk_options()).unwrap();
}

#[test]
fn repair_reads_the_same_as_leveldb_repair_of_a_damaged_leveldb_database() {
    if !leveldb_shim::require() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let model = leveldb_build_db(&dir);
    let env = shale::env::default_env();
    // No MANIFEST, and a damaged data block in the largest table.
    remove_all(&*env, &dir, FileType::Descriptor);
    let largest = files_of(&*env, &dir, FileType::Table)
        .into_iter()
        .max_by_key(|n| std::fs::metadata(dir.join(n)).unwrap().len())
        .unwrap();
    flip_byte(&*env, &dir.join(&largest), 10);

    let (view, report) = repair_both(&dir, &tmp.path().join("work"));
    assert_eq!(report.blocks_skipped(), 1, "{report}");
    // A block of about 1 KiB is gone (older versions may resurface where
    // it held the newest).
    assert!(
        view.len().abs_diff(model.len()) < 100,
        "{} of {}",
        view.len(),
        model.len()
    );
}

#[test]
fn repair_reads_the_same_as_leveldb_repair_of_a_damaged_shale_database() {
    if !leveldb_shim::require() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let options = disk_options();
    let model = build_db(&dir, &options);
    let env = &*options.env;
    // CURRENT gone, and a damaged data block in the first table.
    std::fs::remove_file(dir.join("CURRENT")).unwrap();
    let first = files_of(env, &dir, FileType::Table)[0].clone();
    let gone = first_block_keys(env, &dir.join(&first));
    flip_byte(env, &dir.join(&first), 10);

    let (view, report) = repair_both(&dir, &tmp.path().join("work"));
    assert_eq!(report.blocks_skipped(), 1, "{report}");
    // The first table holds the first version of its keys: those of the
    // lost block that were never written again are gone, all else is as
    // written.
    let mut expected = model;
    for key in &gone {
        if expected.get(key).is_some_and(|v| v.starts_with(b"first:")) {
            expected.remove(key);
        }
    }
    assert!(!gone.is_empty());
    assert_eq!(view, entries(&expected));
}
