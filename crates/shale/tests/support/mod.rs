//! Helpers shared by the engine's tests, written once: the options every
//! test starts from, the model of what was acknowledged ([`Model`]), and,
//! for the full-disk tests (`no_space.rs` over the fault-injecting env,
//! `full_disk.rs` on a real tmpfs), the check that the database holds it
//! and the check that no half-written file is left in the directory.
//! Helpers shared with other crates' tests live in `shale_compact::testing`.

#![allow(dead_code, reason = "each test binary uses its own part")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale::env::Env;
use shale::{Error, Options, ReadOptions, WriteOptions, DB};

/// The options every test starts from: a database created in `env`, the
/// rest LevelDB's defaults; each test sets what it tunes with
/// `Options { write_buffer_size: .., ..options(env) }`.
pub fn options(env: &Arc<dyn Env>) -> Options {
    Options {
        create_if_missing: true,
        env: env.clone(),
        ..Options::default()
    }
}

/// Acknowledged writes: key to value.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A database's contents, key/value pairs in its order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every key/value pair that `read` sees in `db`, in order, read forward
/// through one iterator; the iterator's error if it stops on one.
pub fn try_scan(db: &DB, read: &ReadOptions) -> shale::Result<Entries> {
    let mut iter = db.iter(read)?;
    let mut out = Vec::new();
    iter.seek_to_first();
    while iter.valid() {
        out.push((iter.key().to_vec(), iter.value().to_vec()));
        iter.next();
    }
    iter.status()?;
    Ok(out)
}

/// [`try_scan`], for a test in which the scan must not fail.
pub fn scan(db: &DB, read: &ReadOptions) -> Entries {
    try_scan(db, read).unwrap_or_else(|e| panic!("scan: {e}"))
}

/// Writes that failed, key to the value they tried to set: each may or may
/// not be there afterwards, but never with another value. Their keys are
/// never written again.
pub type Failed = BTreeMap<Vec<u8>, Vec<u8>>;

/// Checks that `db` holds every acknowledged write and nothing else but
/// some of `failed`, each with its own value: by `get` for every key and
/// by a full scan.
pub fn assert_holds(db: &DB, model: &Model, failed: &Failed, context: &str) {
    let read = ReadOptions::new();
    for (key, value) in model {
        let got = db
            .get(&read, key)
            .unwrap_or_else(|e| panic!("{context}: get {key:?}: {e}"));
        assert_eq!(
            got.as_deref(),
            Some(value.as_slice()),
            "{context}: acknowledged key {:?}",
            String::from_utf8_lossy(key)
        );
    }
    let mut iter = db
        .iter(&read)
        .unwrap_or_else(|e| panic!("{context}: iter: {e}"));
    iter.seek_to_first();
    let mut seen = 0;
    while iter.valid() {
        let (key, value) = (iter.key(), iter.value());
        match (model.get(key), failed.get(key)) {
            (Some(want), _) => {
                assert_eq!(value, want.as_slice(), "{context}: scan of {key:?}");
                seen += 1;
            }
            (None, Some(tried)) => assert_eq!(value, tried.as_slice(), "{context}: {key:?}"),
            (None, None) => panic!(
                "{context}: {:?} was never written",
                String::from_utf8_lossy(key)
            ),
        }
        iter.next();
    }
    if let Err(err) = iter.status() {
        panic!("{context}: scan: {err}");
    }
    assert_eq!(seen, model.len(), "{context}: keys missing from the scan");
}

/// The numbers of the tables of the current version.
pub fn live_tables(db: &DB) -> BTreeSet<u64> {
    let listing = db.property("shale.sstables").unwrap_or_default();
    listing
        .lines()
        .filter_map(|line| line.trim_start().split_once(':'))
        .filter_map(|(number, _)| number.parse().ok())
        .collect()
}

/// Checks that the directory holds only what an idle database needs: the
/// live tables, one WAL, the one MANIFEST CURRENT names, and CURRENT, LOCK
/// and the info logs. A half-written table, WAL, MANIFEST or temporary
/// file fails it. A background attempt that starts meanwhile (a compaction
/// retried after a full disk) holds a table of its own until it fails and
/// removes it, so the check is repeated until it passes or 5 seconds pass.
/// REQUIRES: no flush or compaction finished while a reader pinned its
/// inputs since the last flush (those are deleted at the next flush or
/// compaction, as in LevelDB).
pub fn assert_no_stray_files(env: &dyn Env, dir: &Path, db: &DB, context: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match stray_files(env, dir, db) {
            Ok(()) => return,
            Err(problem) if std::time::Instant::now() >= deadline => {
                panic!("{context}: {problem}")
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}

/// One look for [`assert_no_stray_files`]: what is wrong, if anything.
fn stray_files(env: &dyn Env, dir: &Path, db: &DB) -> Result<(), String> {
    let live = live_tables(db);
    let current =
        shale::env::read_file(env, &dir.join("CURRENT")).map_err(|e| format!("CURRENT: {e}"))?;
    let current = String::from_utf8_lossy(&current).trim_end().to_string();
    let mut names = env.children(dir).unwrap_or_default();
    names.sort();
    let mut logs = 0;
    for name in &names {
        let stray = if let Some(number) = name.strip_suffix(".ldb") {
            !number.parse().is_ok_and(|n: u64| live.contains(&n))
        } else if name.ends_with(".log") {
            logs += 1;
            false
        } else if name.starts_with("MANIFEST-") {
            *name != current
        } else {
            !matches!(name.as_str(), "CURRENT" | "LOCK" | "LOG" | "LOG.old")
        };
        if stray {
            return Err(format!(
                "stray file {name} in {names:?} (live tables {live:?})"
            ));
        }
    }
    if logs != 1 {
        return Err(format!("one WAL expected in {names:?}"));
    }
    Ok(())
}

/// Puts `key` until it works (the database resumed by itself) or `timeout`
/// passes; every refusal must be the full-disk error. Returns how long it
/// took.
pub fn put_when_resumed(db: &DB, key: &[u8], value: &[u8], timeout: Duration) -> Duration {
    let started = Instant::now();
    loop {
        match db.put(&WriteOptions::default(), key, value) {
            Ok(()) => return started.elapsed(),
            Err(err) => {
                assert!(err.is_no_space(), "a refused write while resuming: {err}");
                assert!(
                    started.elapsed() < timeout,
                    "did not resume within {timeout:?}: {err}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Checks that `err` is the full-disk error and says so.
pub fn assert_no_space(err: &Error, context: &str) {
    assert!(err.is_no_space(), "{context}: want no space, got {err:?}");
    assert!(
        err.to_string().contains("No space left on device"),
        "{context}: the message says the disk is full: {err}"
    );
}

/// Decimal numbers without leading zeros, in numeric order: shorter first,
/// then bytewise (bytewise order would put "10" before "9"). A comparator
/// the engine cannot order bytewise, for the tests of custom orders.
#[derive(Debug)]
pub struct Numeric;

impl shale::format::comparator::Comparator for Numeric {
    fn name(&self) -> &str {
        "test.Numeric"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        a.len().cmp(&b.len()).then_with(|| a.cmp(b))
    }

    // No shortening: an index key is then the block's last key, which is
    // right in any order.
    fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}

    fn find_short_successor(&self, _key: &mut Vec<u8>) {}
}
