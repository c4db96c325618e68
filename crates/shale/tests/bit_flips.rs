//! Every bit of a small table, WAL and MANIFEST flipped in turn
//! (`docs/reliability.md`, "Corruption"): opening and reading the database
//! either gives the right data or a `Corruption` error that names the file,
//! never wrong data and never a panic. For a WAL, records after the damage
//! may be skipped as LevelDB skips them, unless `paranoid_checks` is on:
//! then the open fails naming the WAL, or only a torn tail (what a crash
//! mid-write leaves, which no reader can tell from damage) is dropped.
//!
//! Each flip runs on a fresh in-memory copy of the database.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};

use shale::env::{read_file, write_file, Env, MemEnv};
use shale::{Error, Options, ReadOptions, WriteOptions, DB};
use support::Model;

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

/// Panics anywhere in the process, background threads included.
static PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// Nothing compacts by itself: each flip sees the same files.
fn options(env: &Arc<dyn Env>, paranoid_checks: bool) -> Options {
    Options {
        paranoid_checks,
        write_buffer_size: 1 << 20,
        block_size: 256,
        l0_compaction_trigger: 1000,
        l0_slowdown_writes_trigger: 1000,
        l0_stop_writes_trigger: 1000,
        ..support::options(env)
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("v{i}").into_bytes()
}

/// A copy of every file in `base`, with bit `bit` of `file` flipped.
fn flipped_copy(base: &MemEnv, file: &str, bit: usize) -> Arc<dyn Env> {
    let copy = MemEnv::new();
    for name in base.children(&dir()).unwrap() {
        let mut contents = read_file(base, &dir().join(&name)).unwrap();
        if name == file {
            contents[bit / 8] ^= 1 << (bit % 8);
        }
        write_file(&copy, &dir().join(&name), &contents, false).unwrap();
    }
    Arc::new(copy)
}

fn file_named(env: &dyn Env, suffix: &str) -> String {
    let mut names: Vec<String> = env
        .children(&dir())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix) || n.starts_with(suffix))
        .collect();
    names.sort();
    assert_eq!(names.len(), 1, "one {suffix} file expected: {names:?}");
    names.remove(0)
}

fn assert_corruption_naming(err: &Error, file: &str, context: &str) {
    assert!(
        err.is_corruption(),
        "{context}: want a corruption, got {err:?}"
    );
    assert!(
        err.to_string().contains(file),
        "{context}: the error does not name {file}: {err}"
    );
}

/// What the flips did, counted.
#[derive(Debug, Default)]
struct Outcomes {
    /// Every read gave the right data and nothing was reported.
    harmless: usize,
    /// A read or the open failed with a corruption naming the file.
    reported: usize,
    /// Records skipped (a WAL without `paranoid_checks`), nothing wrong.
    skipped: usize,
    /// Of the harmless flips (tables), those `verify_db` still reports.
    found_by_verify: usize,
    /// Bytes where a flip changed nothing anyone reads.
    unread_bytes: BTreeSet<usize>,
}

/// Reads every key and scans: each answer is the right one or a
/// corruption naming `file`. Returns whether an error was seen, and the
/// keys found missing (which only a WAL skip may cause: `missing_ok`).
fn read_all(db: &DB, model: &Model, file: &str, missing_ok: bool, context: &str) -> (bool, usize) {
    let read = ReadOptions::new();
    let (mut reported, mut missing) = (false, 0);
    for (k, v) in model {
        match db.get(&read, k) {
            Ok(Some(got)) => assert_eq!(&got, v, "{context}: wrong value for {k:?}"),
            Ok(None) => {
                assert!(missing_ok, "{context}: {k:?} is missing without an error");
                missing += 1;
            }
            Err(err) => {
                assert_corruption_naming(&err, file, &format!("{context}: get"));
                reported = true;
            }
        }
    }
    let mut iter = match db.iter(&read) {
        Ok(iter) => iter,
        Err(err) => {
            assert_corruption_naming(&err, file, &format!("{context}: iter"));
            return (true, missing);
        }
    };
    iter.seek_to_first();
    let mut seen = 0;
    while iter.valid() {
        let want = model.get(iter.key());
        assert_eq!(
            want.map(Vec::as_slice),
            Some(iter.value()),
            "{context}: scan"
        );
        seen += 1;
        iter.next();
    }
    match iter.status() {
        Err(err) => {
            assert_corruption_naming(&err, file, &format!("{context}: scan"));
            reported = true;
        }
        Ok(()) => assert_eq!(seen + missing, model.len(), "{context}: scan missed keys"),
    }
    (reported, missing)
}

/// Flips every bit of the one file whose name ends with (or starts with)
/// `suffix` in `base` in turn and checks each with `check`, which gets a
/// maker of fresh damaged copies (an open may rewrite the directory), the
/// file name and a context for messages.
fn flip_every_bit(
    base: &MemEnv,
    suffix: &str,
    check: impl Fn(&dyn Fn() -> Arc<dyn Env>, &str, &str) -> Outcomes,
) -> Outcomes {
    count_panics();
    let file = file_named(base, suffix);
    let bits = read_file(base, &dir().join(&file)).unwrap().len() * 8;
    let mut total = Outcomes::default();
    for bit in 0..bits {
        let copy = || flipped_copy(base, &file, bit);
        let context = format!("{file} bit {bit} of {bits}");
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| check(&copy, &file, &context)))
            .unwrap_or_else(|_| panic!("{context}: panicked"));
        total.harmless += outcome.harmless;
        total.reported += outcome.reported;
        total.skipped += outcome.skipped;
        total.found_by_verify += outcome.found_by_verify;
        if outcome.harmless > outcome.found_by_verify {
            total.unread_bytes.insert(bit / 8);
        }
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
    println!("{file}: {bits} bits flipped one at a time: {total:?}");
    assert_eq!(
        total.harmless + total.reported + total.skipped,
        bits,
        "one outcome per flip"
    );
    total
}

fn one(reported: bool, missing: usize) -> Outcomes {
    Outcomes {
        reported: usize::from(reported),
        skipped: usize::from(!reported && missing > 0),
        harmless: usize::from(!reported && missing == 0),
        found_by_verify: 0,
        unread_bytes: BTreeSet::new(),
    }
}

/// A database of `count` keys, written by one handle and closed.
fn database(count: usize, flush: bool) -> (MemEnv, Model) {
    let mem = MemEnv::new();
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let db = DB::open(dir(), options(&env, false)).unwrap();
    let mut model = Model::new();
    for i in 0..count {
        db.put(&WriteOptions::default(), &key(i), &value(i))
            .unwrap();
        model.insert(key(i), value(i));
    }
    if flush {
        db.flush().unwrap();
    }
    drop(db);
    (mem, model)
}

#[test]
fn every_bit_of_a_table() {
    let (base, model) = database(40, true);
    let size = read_file(&base, &dir().join(file_named(&base, ".ldb")))
        .unwrap()
        .len();
    let total = flip_every_bit(&base, ".ldb", |copy, file, context| {
        let env = copy();
        let db = DB::open(dir(), options(&env, false)).unwrap();
        let (reported, missing) = read_all(&db, &model, file, false, context);
        drop(db);
        // `shale verify` finds every flip the reads found, and more: the
        // filter and metaindex blocks, which reads do without when damaged.
        let verified = shale::verify::verify_db(dir(), &options(&env, false));
        if let Err(err) = &verified {
            assert_corruption_naming(err, file, &format!("{context}: verify"));
        }
        assert!(
            !reported || verified.is_err(),
            "{context}: verify missed it"
        );
        Outcomes {
            found_by_verify: usize::from(!reported && verified.is_err()),
            ..one(reported, missing)
        }
    });
    assert!(total.reported > 0);
    // What nobody notices is the footer's padding after the two block
    // handles (LevelDB reads it no more than we do): the last 48 bytes,
    // less the 8-byte magic number.
    let footer = size - 48..size - 8;
    assert!(
        total.unread_bytes.iter().all(|b| footer.contains(b)),
        "unread bytes outside the footer padding {footer:?}: {:?}",
        total.unread_bytes
    );
}

#[test]
fn every_bit_of_a_wal() {
    let (base, model) = database(25, false);
    let skipped_by_default = AtomicU64::new(0);
    let total = flip_every_bit(&base, ".log", |copy, file, context| {
        let env = copy();
        // LevelDB's default: damaged records are skipped, never misread.
        let db = DB::open(dir(), options(&env, false))
            .unwrap_or_else(|e| panic!("{context}: open without paranoid checks: {e}"));
        let (reported, skipped) = read_all(&db, &model, file, true, context);
        assert!(!reported, "{context}: the WAL is in tables now");
        if skipped > 0 {
            skipped_by_default.fetch_add(1, Ordering::Relaxed);
        }
        drop(db);
        // Paranoid: an error naming the WAL, or at most a torn tail lost.
        let env = copy();
        match DB::open(dir(), options(&env, true)) {
            Err(err) => {
                assert_corruption_naming(&err, file, &format!("{context}: paranoid open"));
                Outcomes {
                    reported: 1,
                    ..Outcomes::default()
                }
            }
            Ok(db) => {
                let (_, missing) = read_all(&db, &model, file, true, context);
                // Keys were written in order, one record each: a torn
                // tail loses the last ones only.
                for i in 0..model.len() - missing {
                    let got = db.get(&ReadOptions::new(), &key(i)).unwrap();
                    assert_eq!(got, Some(value(i)), "{context}: paranoid, not a tail");
                }
                one(false, missing)
            }
        }
    });
    // No torn tail here: with paranoid checks every flip is reported.
    // (Without them, LevelDB's skip: some records lost, none misread.)
    assert_eq!(total.harmless + total.skipped, 0, "{total:?}");
    let skipped = skipped_by_default.load(Ordering::Relaxed);
    println!("without paranoid_checks, {skipped} flips lost records (never a wrong value)");
    assert!(skipped > 0);
}

#[test]
fn every_bit_of_a_manifest() {
    // Tables from two flushes, and a MANIFEST rewritten by a reopen.
    let (base, mut model) = database(20, true);
    let env: Arc<dyn Env> = Arc::new(base.clone());
    let db = DB::open(dir(), options(&env, false)).unwrap();
    for i in 20..30 {
        db.put(&WriteOptions::default(), &key(i), &value(i))
            .unwrap();
        model.insert(key(i), value(i));
    }
    db.flush().unwrap();
    drop(db);
    let total = flip_every_bit(&base, "MANIFEST-", |copy, file, context| {
        let env = copy();
        match DB::open(dir(), options(&env, false)) {
            Err(err) => {
                assert_corruption_naming(&err, file, &format!("{context}: open"));
                Outcomes {
                    reported: 1,
                    ..Outcomes::default()
                }
            }
            Ok(db) => {
                let (reported, missing) = read_all(&db, &model, file, false, context);
                one(reported, missing)
            }
        }
    });
    // Every byte of a MANIFEST is covered by a checksum or a length the
    // reader now checks: every flip is reported.
    assert_eq!(
        total.reported,
        total.harmless + total.reported + total.skipped
    );
}
