//! Whole databases shared with the real LevelDB 1.23 (through the
//! `leveldb-shim` test crate): a database LevelDB wrote opens in ShaleDB and
//! reads the same, a database ShaleDB wrote opens in LevelDB, which keeps
//! writing and compacting it, and ShaleDB then reads what LevelDB last saw.
//! And the two refuse to open one database at the same time.
//!
//! Every test first asks `leveldb_shim::require()`: without LevelDB it skips
//! (and fails in CI).

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use leveldb_shim::{Db as LevelDb, DbOptions as LevelDbOptions};
use shale::{Error, Options, ReadOptions, WriteBatch, WriteOptions, DB};
use support::Model;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A tiny deterministic generator (xorshift64*), so the data is the same on
/// every run.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn key(n: u64) -> Vec<u8> {
    format!("key{n:06}").into_bytes()
}

/// A value that says where it came from, of a length that varies (so blocks
/// and files are cut at many different places) and compresses somewhat.
fn value(rng: &mut Rng, tag: &str, n: u64) -> Vec<u8> {
    let len = 20 + rng.below(300) as usize;
    let mut value = format!("{tag}:{n}:").into_bytes();
    while value.len() < len {
        value.push(b'a' + (rng.below(16) as u8));
    }
    value
}

fn leveldb_options() -> LevelDbOptions {
    LevelDbOptions {
        create_if_missing: true,
        paranoid_checks: true,
        write_buffer_size: 64 << 10,
        max_file_size: 64 << 10,
        block_size: 1024,
        bloom_bits_per_key: Some(10),
        snappy: true,
        ..LevelDbOptions::default()
    }
}

/// Small buffers and files so that a few megabytes reach several levels.
fn shale_options() -> Options {
    Options {
        create_if_missing: true,
        paranoid_checks: true,
        write_buffer_size: 16 << 10,
        max_file_size: 16 << 10,
        block_size: 1024,
        l0_compaction_trigger: 2,
        l0_slowdown_writes_trigger: 6,
        l0_stop_writes_trigger: 10,
        max_bytes_for_level_base: 64 << 10,
        level_multiplier: 4.0,
        bloom_bits_per_key: Some(10),
        snappy: true,
        ..Options::default()
    }
}

fn shale_scan(db: &DB, reverse: bool) -> Entries {
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
    let mut out = Vec::new();
    if reverse {
        iter.seek_to_last();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.prev();
        }
        out.reverse();
    } else {
        iter.seek_to_first();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next();
        }
    }
    iter.status().unwrap();
    out
}

fn model_entries(model: &Model) -> Entries {
    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Keys worth a `get`: every key ever written (live or deleted) and keys
/// that never existed, before, between and after the written ones.
fn probe_keys(model: &Model, deleted: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    keys.extend(deleted.iter().cloned());
    keys.extend([
        b"".to_vec(),
        b"a".to_vec(),
        b"key".to_vec(),
        b"zzz".to_vec(),
    ]);
    keys.extend((0..50).map(|i| format!("key{:06}x", i * 97).into_bytes()));
    keys
}

/// Checks that ShaleDB reads exactly `expected` (forward and backward scan,
/// a `get` of every probe key, and a few seeks).
fn assert_shale_reads(db: &DB, expected: &Model, deleted: &[Vec<u8>]) {
    let entries = model_entries(expected);
    assert_eq!(shale_scan(db, false), entries, "ShaleDB forward scan");
    assert_eq!(shale_scan(db, true), entries, "ShaleDB backward scan");
    for key in probe_keys(expected, deleted) {
        assert_eq!(
            db.get(&ReadOptions::new(), &key).unwrap().as_ref(),
            expected.get(&key),
            "ShaleDB get {}",
            String::from_utf8_lossy(&key)
        );
    }
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
    for target in probe_keys(expected, deleted).iter().step_by(37) {
        iter.seek(target);
        let want = expected.range(target.clone()..).next();
        let got = iter
            .valid()
            .then(|| (iter.key().to_vec(), iter.value().to_vec()));
        assert_eq!(
            got.as_ref().map(|(k, v)| (k, v)),
            want,
            "seek {}",
            String::from_utf8_lossy(target)
        );
    }
    iter.status().unwrap();
}

/// Checks that LevelDB reads exactly `expected` (scan and a `get` of every
/// probe key).
fn assert_leveldb_reads(db: &LevelDb, expected: &Model, deleted: &[Vec<u8>]) {
    assert_eq!(
        db.scan_all().unwrap(),
        model_entries(expected),
        "LevelDB scan_all"
    );
    for key in probe_keys(expected, deleted) {
        assert_eq!(
            db.get(&key).unwrap().as_ref(),
            expected.get(&key),
            "LevelDB get {}",
            String::from_utf8_lossy(&key)
        );
    }
}

fn leveldb_files_per_level(db: &LevelDb) -> Vec<usize> {
    (0..7)
        .map(|level| {
            db.property(&format!("leveldb.num-files-at-level{level}"))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

fn shale_files_per_level(db: &DB) -> Vec<usize> {
    (0..7)
        .map(|level| {
            db.property(&format!("shale.num-files-at-level{level}"))
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

fn nonempty_levels(files: &[usize]) -> usize {
    files.iter().filter(|&&n| n > 0).count()
}

/// Random puts, overwrites and deletes over keys `0..key_space`, through
/// LevelDB, mirrored in `model`.
fn leveldb_random_writes(
    db: &mut LevelDb,
    model: &mut Model,
    deleted: &mut Vec<Vec<u8>>,
    rng: &mut Rng,
    ops: usize,
    key_space: u64,
    tag: &str,
) {
    for i in 0..ops {
        let n = rng.below(key_space);
        let k = key(n);
        match rng.below(10) {
            0 | 1 => {
                db.delete(&k, false).unwrap();
                model.remove(&k);
                deleted.push(k);
            }
            2 => {
                // A batch: a put and a delete of a neighbour, atomically.
                let v = value(rng, tag, i as u64);
                let other = key((n + 1) % key_space);
                db.write(
                    &[(k.as_slice(), Some(v.as_slice())), (other.as_slice(), None)],
                    false,
                )
                .unwrap();
                model.insert(k, v);
                model.remove(&other);
                deleted.push(other);
            }
            _ => {
                let v = value(rng, tag, i as u64);
                db.put(&k, &v, false).unwrap();
                model.insert(k, v);
            }
        }
    }
}

/// The same through ShaleDB.
fn shale_random_writes(
    db: &DB,
    model: &mut Model,
    deleted: &mut Vec<Vec<u8>>,
    rng: &mut Rng,
    ops: usize,
    key_space: u64,
    tag: &str,
) {
    let write = WriteOptions::default();
    for i in 0..ops {
        let n = rng.below(key_space);
        let k = key(n);
        match rng.below(10) {
            0 | 1 => {
                db.delete(&write, &k).unwrap();
                model.remove(&k);
                deleted.push(k);
            }
            2 => {
                let v = value(rng, tag, i as u64);
                let other = key((n + 1) % key_space);
                let mut batch = WriteBatch::new();
                batch.put(&k, &v).unwrap();
                batch.delete(&other).unwrap();
                db.write(&write, batch).unwrap();
                model.insert(k, v);
                model.remove(&other);
                deleted.push(other);
            }
            _ => {
                let v = value(rng, tag, i as u64);
                db.put(&write, &k, &v).unwrap();
                model.insert(k, v);
            }
        }
    }
}

/// LevelDB writes a database with flushes, compactions (automatic and
/// manual) to several levels, deletes, overwrites and a WAL still holding
/// the last writes; ShaleDB opens it and reads exactly what LevelDB read.
#[test]
fn leveldb_database_reads_identically_in_shale() {
    if !leveldb_shim::require() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");
    let mut rng = Rng::new(0x5eed_0001);
    let mut model = Model::new();
    let mut deleted = Vec::new();

    let leveldb_view = {
        let mut db = LevelDb::open(&path, &leveldb_options()).unwrap();
        // Phase 1: enough random writes for many flushes; push everything
        // down once.
        leveldb_random_writes(
            &mut db,
            &mut model,
            &mut deleted,
            &mut rng,
            12000,
            10000,
            "p1",
        );
        db.compact_range(None, None);
        // Phase 2: overwrites and deletes on top (new L0 and L1 files), one
        // sub-range pushed all the way down.
        leveldb_random_writes(
            &mut db,
            &mut model,
            &mut deleted,
            &mut rng,
            5000,
            10000,
            "p2",
        );
        db.compact_range(Some(&key(2000)), Some(&key(3000)));
        // Phase 3: about three memtables more (LevelDB places the first
        // flush in L1 and the next ones in L0; it keeps at least 1 MiB per
        // table, so the 64 KiB memtables are what makes small levels), the
        // last part left in the memtable and so only in LevelDB's WAL when it
        // closes.
        leveldb_random_writes(
            &mut db,
            &mut model,
            &mut deleted,
            &mut rng,
            1000,
            11000,
            "p3",
        );
        let files = leveldb_files_per_level(&db);
        println!("LevelDB files per level: {files:?}");
        assert!(
            nonempty_levels(&files) >= 2,
            "want several levels, got {files:?}"
        );
        assert_leveldb_reads(&db, &model, &deleted);
        db.scan_all().unwrap()
    };
    assert_eq!(leveldb_view, model_entries(&model));
    // ShaleDB's offline check accepts every file LevelDB wrote.
    let report = shale::verify::verify_db(&path, &shale_options()).unwrap();
    println!("verify of LevelDB's database: {report}");

    let db = DB::open(&path, shale_options()).unwrap();
    assert_shale_reads(&db, &model, &deleted);
    // Reading again after a full compaction by ShaleDB changes nothing.
    db.compact_range(None, None).unwrap();
    assert_shale_reads(&db, &model, &deleted);
}

/// ShaleDB writes a database (flushes, compactions to several levels,
/// deletes, overwrites); LevelDB opens it, reads the same, writes and
/// compacts it; ShaleDB reopens it and reads exactly what LevelDB last saw.
/// The round trip runs twice over the same directory.
#[test]
fn shale_database_round_trips_through_leveldb() {
    if !leveldb_shim::require() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");
    let mut rng = Rng::new(0x5eed_0002);
    let mut model = Model::new();
    let mut deleted = Vec::new();

    for round in 0..2 {
        // ShaleDB writes.
        {
            let db = DB::open(&path, shale_options()).unwrap();
            if round > 0 {
                assert_shale_reads(&db, &model, &deleted);
            }
            shale_random_writes(
                &db,
                &mut model,
                &mut deleted,
                &mut rng,
                4000,
                5000,
                &format!("s{round}"),
            );
            db.wait_for_compactions().unwrap();
            let files = shale_files_per_level(&db);
            println!("round {round}: ShaleDB files per level: {files:?}");
            assert!(
                nonempty_levels(&files) >= 2,
                "want several levels, got {files:?}"
            );
            // A few writes after the last flush stay in ShaleDB's WAL only.
            shale_random_writes(
                &db,
                &mut model,
                &mut deleted,
                &mut rng,
                30,
                6000,
                &format!("s{round}w"),
            );
            assert_shale_reads(&db, &model, &deleted);
        }
        shale::verify::verify_db(&path, &shale_options())
            .unwrap_or_else(|e| panic!("round {round}: verify after ShaleDB: {e}"));

        // LevelDB reads, writes and compacts.
        let leveldb_view = {
            let mut db = LevelDb::open(&path, &leveldb_options()).unwrap();
            assert_leveldb_reads(&db, &model, &deleted);
            leveldb_random_writes(
                &mut db,
                &mut model,
                &mut deleted,
                &mut rng,
                1500,
                5000,
                &format!("l{round}"),
            );
            db.compact_range(Some(&key(1000)), Some(&key(2500)));
            leveldb_random_writes(
                &mut db,
                &mut model,
                &mut deleted,
                &mut rng,
                1500,
                5000,
                &format!("m{round}"),
            );
            if round == 1 {
                db.compact_range(None, None);
            }
            // Left in LevelDB's WAL.
            leveldb_random_writes(
                &mut db,
                &mut model,
                &mut deleted,
                &mut rng,
                50,
                6000,
                &format!("n{round}"),
            );
            println!(
                "round {round}: LevelDB files per level: {:?}",
                leveldb_files_per_level(&db)
            );
            assert_leveldb_reads(&db, &model, &deleted);
            db.scan_all().unwrap()
        };
        assert_eq!(leveldb_view, model_entries(&model));
        shale::verify::verify_db(&path, &shale_options())
            .unwrap_or_else(|e| panic!("round {round}: verify after LevelDB: {e}"));

        // ShaleDB reads exactly what LevelDB last saw.
        let db = DB::open(&path, shale_options()).unwrap();
        assert_eq!(
            shale_scan(&db, false),
            leveldb_view,
            "round {round}: ShaleDB after LevelDB"
        );
        assert_shale_reads(&db, &model, &deleted);
    }
}

/// Set in the child process of the lock test: what the child does with
/// LevelDB (`try:<path>` or `hold:<path>`).
const LOCK_CHILD: &str = "SHALE_INTEROP_LOCK_CHILD";

/// Does nothing unless run as the child of
/// [`leveldb_and_shale_refuse_each_others_open_database`]. `try:<path>`
/// opens the database with LevelDB and prints the outcome; `hold:<path>`
/// opens it, says so, and keeps it open until stdin closes.
#[test]
fn lock_child() {
    let Ok(request) = std::env::var(LOCK_CHILD) else {
        return;
    };
    let options = LevelDbOptions {
        create_if_missing: false,
        ..LevelDbOptions::default()
    };
    let mut out = std::io::stdout();
    if let Some(path) = request.strip_prefix("try:") {
        match LevelDb::open(Path::new(path), &options) {
            Ok(_db) => writeln!(out, "CHILD-RESULT:opened").unwrap(),
            Err(err) => writeln!(out, "CHILD-RESULT:error {err}").unwrap(),
        }
    } else if let Some(path) = request.strip_prefix("hold:") {
        let db = LevelDb::open(Path::new(path), &options).unwrap();
        writeln!(out, "CHILD-RESULT:held").unwrap();
        out.flush().unwrap();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        drop(db);
        writeln!(out, "CHILD-RESULT:released").unwrap();
    }
    out.flush().unwrap();
}

fn spawn_lock_child(request: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "lock_child", "--nocapture", "--test-threads=1"])
        .env(LOCK_CHILD, request)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The next `CHILD-RESULT:` line of the child's output (the test harness
/// may print the test's name on the same line).
fn next_child_result(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> String {
    for line in lines {
        let line = line.unwrap();
        if let Some((_, result)) = line.split_once("CHILD-RESULT:") {
            return result.to_string();
        }
    }
    panic!("the child printed no result");
}

fn leveldb_try_open_in_child(path: &Path) -> String {
    let mut child = spawn_lock_child(&format!("try:{}", path.display()));
    drop(child.stdin.take());
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let result = next_child_result(&mut lines);
    assert!(child.wait().unwrap().success());
    result
}

/// LOCK is an `fcntl` lock on both sides, so LevelDB in another process
/// cannot open a database ShaleDB holds, and ShaleDB gets `Busy` for one
/// LevelDB holds. (Within one process POSIX locks do not exclude each
/// other, hence the child process.)
#[test]
fn leveldb_and_shale_refuse_each_others_open_database() {
    if !leveldb_shim::require() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");

    // ShaleDB holds it: LevelDB is refused.
    let db = DB::open(&path, shale_options()).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    let result = leveldb_try_open_in_child(&path);
    assert!(
        result.starts_with("error") && result.to_lowercase().contains("lock"),
        "LevelDB opened a database ShaleDB holds: {result}"
    );
    // ShaleDB still holds it after LevelDB's failed attempt, and still works.
    assert!(matches!(
        DB::open(&path, shale_options()),
        Err(Error::Busy(_))
    ));
    db.put(&WriteOptions::default(), b"k2", b"v2").unwrap();
    drop(db);
    // Released: LevelDB opens it.
    assert_eq!(leveldb_try_open_in_child(&path), "opened");

    // LevelDB holds it: ShaleDB is refused.
    let mut child = spawn_lock_child(&format!("hold:{}", path.display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(next_child_result(&mut lines), "held");
    for _ in 0..2 {
        match DB::open(&path, shale_options()) {
            Err(Error::Busy(message)) => assert!(message.contains("db"), "{message}"),
            other => panic!("ShaleDB opened a database LevelDB holds: {other:?}"),
        }
    }
    drop(child.stdin.take()); // the child reads EOF and closes the database
    assert_eq!(next_child_result(&mut lines), "released");
    assert!(child.wait().unwrap().success());

    // Released: ShaleDB opens it, and the data is intact.
    let db = DB::open(&path, shale_options()).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(
        db.get(&ReadOptions::new(), b"k2").unwrap(),
        Some(b"v2".to_vec())
    );
}
