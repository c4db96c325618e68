//! A full disk, through [`FaultInjectionEnv`]'s `ENOSPC` writes over
//! [`MemEnv`], for each writer of the database in turn: the WAL, a flush,
//! a compaction and the MANIFEST (`docs/reliability.md`, "A full disk and
//! I/O errors"). Each time the error says the disk is full, every
//! acknowledged write stays readable, the half-written file is gone, the
//! database resumes writing by itself once space is freed, and it reopens
//! with everything. `full_disk.rs` does the same on a real tmpfs.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shale::env::{Env, FaultInjectionEnv, MemEnv};
use shale::{Error, Options, ReadOptions, WriteOptions, DB};
use support::{assert_holds, assert_no_space, assert_no_stray_files, put_when_resumed};
use support::{Failed, Model};

const RESUME_TIMEOUT: Duration = Duration::from_secs(20);

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

/// Tiny memtables and files, so flushes and compactions come quickly;
/// `auto`: compactions run by themselves, otherwise only when asked.
fn options(env: &Arc<dyn Env>, auto: bool) -> Options {
    let trigger = |n: usize| if auto { n } else { 1000 };
    Options {
        write_buffer_size: 8 << 10,
        max_file_size: 8 << 10,
        block_size: 512,
        l0_compaction_trigger: trigger(2),
        l0_slowdown_writes_trigger: trigger(4),
        l0_stop_writes_trigger: trigger(8),
        max_bytes_for_level_base: if auto { 32 << 10 } else { 1 << 40 },
        level_multiplier: 4.0,
        ..support::options(env)
    }
}

fn fault_env() -> (FaultInjectionEnv, Arc<dyn Env>) {
    let fault = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
    let env: Arc<dyn Env> = Arc::new(fault.clone());
    (fault, env)
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}{i:06}").into_bytes()
}

fn value(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}-value-{i}-").repeat(3).into_bytes()
}

/// Writes keys `prefix…` until one fails or `limit` were written; returns
/// the failure (its key in `failed`, the others in `model`).
fn write_until_error(
    db: &DB,
    prefix: &str,
    limit: usize,
    model: &mut Model,
    failed: &mut Failed,
) -> Option<Error> {
    for i in 0..limit {
        let (k, v) = (key(prefix, i), value(prefix, i));
        // Every seventh write synced: the WAL's sync path too.
        let options = WriteOptions { sync: i % 7 == 0 };
        match db.put(&options, &k, &v) {
            Ok(()) => {
                model.insert(k, v);
            }
            Err(err) => {
                failed.insert(k, v);
                return Some(err);
            }
        }
    }
    None
}

/// After space came back: the database resumes by itself, takes new
/// writes, leaves no stray file, and reopens with everything.
fn check_resumes_and_reopens(
    fault: &FaultInjectionEnv,
    db: DB,
    model: &mut Model,
    failed: &Failed,
    context: &str,
) {
    let took = put_when_resumed(&db, b"resumed", b"yes", RESUME_TIMEOUT);
    model.insert(b"resumed".to_vec(), b"yes".to_vec());
    println!("{context}: resumed by itself after {took:?}");
    assert!(db.background_error().is_none(), "{context}");
    assert_holds(&db, model, failed, &format!("{context}, resumed"));
    for i in 0..200 {
        let (k, v) = (key("after", i), value("after", i));
        db.put(&WriteOptions::default(), &k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_no_stray_files(fault, &dir(), &db, &format!("{context}, resumed"));
    let options = options(&(Arc::new(fault.clone()) as Arc<dyn Env>), true);
    drop(db);
    let db = DB::open(dir(), options.clone()).unwrap();
    assert_holds(&db, model, failed, &format!("{context}, reopened"));
    // The reads may have started a seek compaction, whose inputs stay while
    // the scan pinned them: the next flush deletes them (as in LevelDB).
    db.wait_for_compactions().unwrap();
    db.put(&WriteOptions::default(), b"reopened", b"yes")
        .unwrap();
    model.insert(b"reopened".to_vec(), b"yes".to_vec());
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_no_stray_files(fault, &dir(), &db, &format!("{context}, reopened"));
    drop(db);
    shale::verify::verify_db(dir(), &options).unwrap();
}

/// The WAL hits the full disk: the writer gets the error, naming the WAL;
/// the WAL is left alone (it may end in a torn record) and the next writes
/// are refused until a new WAL is started and the memtable flushed.
#[test]
fn a_full_disk_under_the_wal() {
    let (fault, env) = fault_env();
    let db = DB::open(dir(), options(&env, true)).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    assert!(write_until_error(&db, "a", 300, &mut model, &mut failed).is_none());
    // Room for part of a record: the WAL gets a torn one.
    fault.set_no_space_only_for(Some(".log"));
    fault.set_free_space(Some(20));
    let err = write_until_error(&db, "b", 100, &mut model, &mut failed).expect("a write fails");
    assert_no_space(&err, "the failed write");
    assert!(err.to_string().contains(".log"), "names the WAL: {err}");
    println!("WAL: {err}");
    // The whole disk full now: the automatic attempts (a new WAL, a flush)
    // fail too, and writes stay refused, with a message that says it passes.
    fault.set_no_space_only_for(None);
    fault.set_no_space(true);
    // (A resume may have slipped in before the whole disk was full; the
    // write below then fails in the new WAL, alike.)
    let resumed_before = db.resumed_count();
    let later = db
        .put(&WriteOptions::default(), b"later", b"x")
        .unwrap_err();
    assert_no_space(&later, "a later write");
    let refused = db
        .put(&WriteOptions::default(), b"later", b"x")
        .unwrap_err();
    assert!(refused.to_string().contains("resume"), "{refused}");
    assert!(db.get(&ReadOptions::new(), b"later").unwrap().is_none());
    assert_holds(&db, &model, &failed, "WAL full, still open");
    std::thread::sleep(Duration::from_millis(400));
    assert!(db.background_error().is_some_and(|e| e.is_no_space()));
    assert_eq!(db.resumed_count(), resumed_before);
    fault.set_no_space(false);
    let took = put_when_resumed(&db, b"resumed", b"yes", RESUME_TIMEOUT);
    println!("WAL: writes resumed {took:?} after space came back");
    assert_eq!(db.resumed_count(), resumed_before + 1);
    check_resumes_and_reopens(&fault, db, &mut model, &failed, "WAL");
}

/// A reopen while the WAL's disk is full replays the torn record as the
/// end of the log: no error, nothing acknowledged lost.
#[test]
fn a_torn_wal_record_from_a_full_disk_is_the_end_of_the_log() {
    let (fault, env) = fault_env();
    let db = DB::open(dir(), options(&env, true)).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    assert!(write_until_error(&db, "a", 100, &mut model, &mut failed).is_none());
    fault.set_no_space_only_for(Some(".log"));
    fault.set_free_space(Some(30));
    assert!(write_until_error(&db, "b", 100, &mut model, &mut failed).is_some());
    drop(db);
    fault.set_no_space(false);
    let paranoid = Options {
        paranoid_checks: true,
        ..options(&env, true)
    };
    let db = DB::open(dir(), paranoid).unwrap();
    assert_holds(&db, &model, &failed, "reopened after a torn WAL record");
    db.wait_for_compactions().unwrap();
    assert_no_stray_files(&fault, &dir(), &db, "reopened after a torn WAL record");
}

/// A flush hits the full disk: the writer that waits for it gets the
/// error, "during flush"; the half-written table is removed; the memtable
/// stays readable; the flush is retried until it works.
#[test]
fn a_full_disk_under_a_flush() {
    let (fault, env) = fault_env();
    let db = DB::open(dir(), options(&env, false)).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    assert!(write_until_error(&db, "a", 300, &mut model, &mut failed).is_none());
    db.flush().unwrap();
    let tables_before = support::live_tables(&db);
    fault.set_no_space_only_for(Some(".ldb"));
    fault.set_free_space(Some(3000));
    let err = write_until_error(&db, "b", 5000, &mut model, &mut failed)
        .expect("the writers get the flush's error");
    assert_no_space(&err, "writer after the flush failed");
    assert!(err.to_string().contains("during flush"), "{err}");
    println!("flush: {err}");
    assert_no_space(&db.flush().unwrap_err(), "flush while full");
    assert_holds(&db, &model, &failed, "flush failed, still open");
    // The attempts' tables are gone (one may be in the making while the
    // listing is read): only the live ones are there.
    let tables = || -> Vec<u64> {
        let mut names: Vec<u64> = fault
            .children(&dir())
            .unwrap()
            .iter()
            .filter_map(|n| n.strip_suffix(".ldb")?.parse().ok())
            .collect();
        names.sort_unstable();
        names
    };
    let want: Vec<u64> = support::live_tables(&db).into_iter().collect();
    assert!(want.len() > tables_before.len(), "a flush worked before");
    let mut listings = Vec::new();
    while listings.len() < 50 && listings.last() != Some(&want) {
        std::thread::sleep(Duration::from_millis(20));
        listings.push(tables());
    }
    assert_eq!(listings.last(), Some(&want), "{listings:?}");
    assert!(db.resumed_count() == 0 && db.background_error().is_some());
    fault.set_no_space(false);
    check_resumes_and_reopens(&fault, db, &mut model, &failed, "flush");
}

/// A compaction hits the full disk: `compact_range` returns the error
/// naming the compaction, its outputs are removed, the version is
/// unchanged; once space is back writes resume and the compaction runs.
#[test]
fn a_full_disk_under_a_compaction() {
    let (fault, env) = fault_env();
    let db = DB::open(dir(), options(&env, false)).unwrap();
    let (mut model, failed) = (Model::new(), Failed::new());
    // Overlapping tables, so the compaction writes (no trivial move).
    for round in 0..4 {
        for i in (round..400).step_by(2) {
            let (k, v) = (key("k", i), value(&format!("r{round}"), i));
            db.put(&WriteOptions::default(), &k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
    }
    let before = db.property("shale.sstables").unwrap();
    fault.set_no_space_only_for(Some(".ldb"));
    fault.set_free_space(Some(10_000));
    let err = db.compact_range(None, None).unwrap_err();
    assert_no_space(&err, "compact_range");
    // L0 into L1, or into L2 with L1 in one job when the first flush
    // went to L2 (`picker::manual_cross_level`).
    assert!(err.to_string().contains("during compaction L0->L"), "{err}");
    println!("compaction: {err}");
    assert_eq!(db.property("shale.sstables").unwrap(), before);
    // Writes are refused until the next attempt, which has nothing to
    // flush and lets them go on: the compaction's outputs were removed.
    if let Err(refused) = db.put(&WriteOptions::default(), b"x", b"y") {
        assert_no_space(&refused, "a write after the compaction failed");
        put_when_resumed(&db, b"x", b"y", RESUME_TIMEOUT);
    }
    model.insert(b"x".to_vec(), b"y".to_vec());
    assert_holds(&db, &model, &failed, "compaction failed, still open");
    assert_no_stray_files(&fault, &dir(), &db, "compaction failed");
    // Still full: the compaction fails again, alike.
    assert_no_space(&db.compact_range(None, None).unwrap_err(), "again");
    fault.set_no_space(false);
    put_when_resumed(&db, b"x2", b"y", RESUME_TIMEOUT);
    model.insert(b"x2".to_vec(), b"y".to_vec());
    db.compact_range(None, None).unwrap();
    check_resumes_and_reopens(&fault, db, &mut model, &failed, "compaction");
}

/// The MANIFEST hits the full disk: the flush fails naming it; the record
/// may be torn, so the MANIFEST is closed and the next edit starts a new
/// one. A reopen while the disk is still full fails with the full-disk
/// error and changes nothing; with space it opens with everything.
#[test]
fn a_full_disk_under_the_manifest() {
    let (fault, env) = fault_env();
    let db = DB::open(dir(), options(&env, false)).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    assert!(write_until_error(&db, "a", 100, &mut model, &mut failed).is_none());
    fault.set_no_space_only_for(Some("MANIFEST"));
    fault.set_free_space(Some(10));
    let err = db.flush().unwrap_err();
    assert_no_space(&err, "flush");
    assert!(
        err.to_string().contains("MANIFEST-"),
        "names the MANIFEST: {err}"
    );
    println!("MANIFEST: {err}");
    assert_holds(&db, &model, &failed, "MANIFEST failed, still open");
    // Space back: the next attempt writes a new MANIFEST and the flush.
    fault.set_no_space(false);
    put_when_resumed(&db, b"first-resume", b"1", RESUME_TIMEOUT);
    model.insert(b"first-resume".to_vec(), b"1".to_vec());
    db.wait_for_compactions().unwrap();
    assert_no_stray_files(&fault, &dir(), &db, "MANIFEST, resumed");

    // Full again, then closed: the reopen cannot write its MANIFEST.
    assert!(write_until_error(&db, "c", 100, &mut model, &mut failed).is_none());
    fault.set_no_space(true);
    assert!(db.flush().is_err());
    drop(db);
    let err = DB::open(dir(), options(&env, false)).unwrap_err();
    assert_no_space(&err, "reopen on a full disk");
    fault.set_no_space(false);
    let db = DB::open(dir(), options(&env, false)).unwrap();
    assert_holds(&db, &model, &failed, "MANIFEST, reopened");
    check_resumes_and_reopens(&fault, db, &mut model, &failed, "MANIFEST");
}

/// A disk with a few kilobytes left at chosen points of a workload with
/// flushes and compactions running by themselves: whichever write hits the
/// end of the space, the error says so, nothing acknowledged is lost, and
/// the database resumes by itself when space comes back, round after round.
#[test]
fn a_disk_that_fills_up_again_and_again() {
    let (fault, env) = fault_env();
    let db = DB::open(dir(), options(&env, true)).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    let mut errors = std::collections::BTreeSet::new();
    for round in 0..12 {
        fault.set_free_space(Some(2_000 + 7_919 * round as u64));
        let prefix = format!("w{round:02}-");
        let err = write_until_error(&db, &prefix, 20_000, &mut model, &mut failed)
            .expect("the disk fills up");
        assert_no_space(&err, &format!("round {round}"));
        errors.insert(err.to_string().replace(|c: char| c.is_ascii_digit(), ""));
        assert_holds(&db, &model, &failed, &format!("round {round}, full"));
        fault.set_no_space(false);
        put_when_resumed(
            &db,
            format!("resumed{round}").as_bytes(),
            b"r",
            RESUME_TIMEOUT,
        );
        model.insert(format!("resumed{round}").into_bytes(), b"r".to_vec());
    }
    println!("errors seen:");
    for err in &errors {
        println!("  {err}");
    }
    check_resumes_and_reopens(&fault, db, &mut model, &failed, "fill-ups");
}

/// Any other I/O error stays: writes are refused until reopen, with a
/// message that says so, and the reopened database has everything.
#[test]
fn an_io_error_other_than_no_space_waits_for_a_reopen() {
    let (fault, env) = fault_env();
    let db = DB::open(dir(), options(&env, false)).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    assert!(write_until_error(&db, "a", 100, &mut model, &mut failed).is_none());
    fault.set_fail_syncs(true);
    let err = db
        .put(&WriteOptions { sync: true }, b"s", b"1")
        .unwrap_err();
    failed.insert(b"s".to_vec(), b"1".to_vec());
    assert!(!err.is_no_space(), "{err}");
    let err = db.put(&WriteOptions::default(), b"x", b"y").unwrap_err();
    assert!(err.to_string().contains("reopened"), "{err}");
    fault.clear_failures();
    std::thread::sleep(Duration::from_millis(500));
    let still = db.put(&WriteOptions::default(), b"x", b"y").unwrap_err();
    assert!(matches!(still, Error::Io { .. }), "{still}");
    assert_eq!(db.resumed_count(), 0);
    drop(db);
    let db = DB::open(dir(), options(&env, false)).unwrap();
    assert_holds(&db, &model, &failed, "reopened after EIO");
    db.put(&WriteOptions::default(), b"x", b"y").unwrap();
}
