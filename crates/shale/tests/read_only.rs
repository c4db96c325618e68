//! `DB::open_read_only`: it changes no byte of the directory (no LOCK
//! taken, no info LOG, no new WAL, MANIFEST or table, nothing deleted),
//! sees the tables and the WALs (replayed into memory), works while
//! another handle holds the database open, and refuses writes.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use shale::{Error, Options, ReadOptions, WriteOptions, DB};

/// Every file of `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(entry.path()).unwrap())
        })
        .collect()
}

fn create(path: &Path) -> DB {
    let options = Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        ..Options::default()
    };
    DB::open(path, options).unwrap()
}

/// Some writes in tables (flushed and compacted) and the last ones only in
/// the WAL.
fn fill(db: &DB) {
    for i in 0..3000u32 {
        db.put(
            &WriteOptions::default(),
            format!("key{i:05}").as_bytes(),
            format!("table{i}").as_bytes(),
        )
        .unwrap();
    }
    db.compact_range(None, None).unwrap();
    for i in 0..100u32 {
        db.put(
            &WriteOptions::default(),
            format!("key{i:05}").as_bytes(),
            b"wal",
        )
        .unwrap();
    }
    db.delete(&WriteOptions::default(), b"key00100").unwrap();
}

fn check_reads(db: &DB) {
    let read = ReadOptions::new();
    assert_eq!(db.get(&read, b"key00007").unwrap(), Some(b"wal".to_vec()));
    assert_eq!(db.get(&read, b"key00100").unwrap(), None);
    assert_eq!(
        db.get(&read, b"key02999").unwrap(),
        Some(b"table2999".to_vec())
    );
    let entries = support::scan(db, &read);
    assert_eq!(entries.len(), 2999);
    assert!(db.property("shale.stats").is_some());
    assert!(db.property("shale.sstables").is_some());
}

#[test]
fn a_read_only_open_changes_no_byte_of_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let db = create(&path);
        fill(&db);
    }
    let before = contents(&path);
    {
        let db = DB::open_read_only(&path, Options::default()).unwrap();
        check_reads(&db);
        let snapshot = db.snapshot();
        let read = ReadOptions {
            snapshot: Some(snapshot),
            ..ReadOptions::new()
        };
        assert_eq!(db.get(&read, b"key00007").unwrap(), Some(b"wal".to_vec()));
        db.wait_for_compactions().unwrap();
    }
    assert_eq!(
        contents(&path),
        before,
        "a read-only open and close changed the directory"
    );
}

#[test]
fn a_read_only_open_works_while_a_writer_holds_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let writer = create(&path);
    fill(&writer);
    // A second read-write open is refused: the writer holds the LOCK.
    assert!(matches!(
        DB::open(&path, Options::default()),
        Err(Error::Busy(_))
    ));
    let reader = DB::open_read_only(&path, Options::default()).unwrap();
    check_reads(&reader);
    // It sees the database as of its open.
    writer
        .put(&WriteOptions::default(), b"later", b"x")
        .unwrap();
    assert_eq!(reader.get(&ReadOptions::new(), b"later").unwrap(), None);
    let again = DB::open_read_only(&path, Options::default()).unwrap();
    assert_eq!(
        again.get(&ReadOptions::new(), b"later").unwrap(),
        Some(b"x".to_vec())
    );
    // The writer goes on writing.
    writer
        .put(&WriteOptions::default(), b"after", b"y")
        .unwrap();
    writer.flush().unwrap();
}

#[test]
fn a_read_only_handle_refuses_writes_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(create(&path));
    let db = DB::open_read_only(&path, Options::default()).unwrap();
    let refused = |result: shale::Result<()>| {
        assert!(
            matches!(&result, Err(Error::NotSupported(why)) if why.contains("read-only")),
            "{result:?}"
        );
    };
    refused(db.put(&WriteOptions::default(), b"k", b"v"));
    refused(db.delete(&WriteOptions::default(), b"k"));
    refused(db.flush());
    refused(db.compact_range(None, None));
}

#[test]
fn a_read_only_open_of_nothing_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let missing = DB::open_read_only(dir.path().join("absent"), Options::default());
    assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");
    // An existing directory that is not a database: not created.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let not_db = DB::open_read_only(
        &empty,
        Options {
            create_if_missing: true,
            ..Options::default()
        },
    );
    assert!(matches!(not_db, Err(Error::NotFound(_))), "{not_db:?}");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}
