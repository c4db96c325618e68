//! The database under a failing disk, a power cut and damaged files, through
//! [`FaultInjectionEnv`] over [`MemEnv`] (LevelDB's
//! `db/fault_injection_test.cc` and `db/corruption_test.cc` are the models).
//!
//! * Injected write and sync failures, swept over every operation of a
//!   flush, of a compaction and of recovery, for a disk that dies there
//!   (`fail_after`) and for a disk that fails that one operation only (the
//!   test's own [`OneShotEnv`]): the failing operation (or the writes after
//!   it) report an error, nothing is half installed, and once the disk
//!   works again the database reopens with every acknowledged write and
//!   `shale::verify::verify_db` finds it intact.
//! * Power loss: what was synced survives.
//! * Damaged tables, MANIFESTs, CURRENT and WALs, and missing tables: a clear
//!   error that names the file, never wrong data.
//! * `Busy` for a second open, `error_if_exists`, `create_if_missing`.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale::env::{read_file, write_file, Env, FaultInjectionEnv, FileLock, MemEnv, WritableFile};
use shale::format::format::RandomAccess;
use shale::{Error, Options, ReadOptions, WriteBatch, WriteOptions, DB};
use support::{scan, try_scan, Model};

const DIR: &str = "/db";

fn dir() -> PathBuf {
    PathBuf::from(DIR)
}

/// Tiny memtables, blocks and files; automatic compactions as usual.
fn options(env: &Arc<dyn Env>) -> Options {
    Options {
        write_buffer_size: 8 << 10,
        max_file_size: 8 << 10,
        block_size: 512,
        l0_compaction_trigger: 2,
        l0_slowdown_writes_trigger: 4,
        l0_stop_writes_trigger: 8,
        max_bytes_for_level_base: 32 << 10,
        level_multiplier: 4.0,
        block_cache_size: 64 << 10,
        ..support::options(env)
    }
}

/// As [`options`], but nothing compacts unless asked (`compact_range`), so
/// the operations a flush or a manual compaction makes are the same on every
/// run and `fail_after` can walk through them one by one.
fn manual_options(env: &Arc<dyn Env>) -> Options {
    Options {
        l0_compaction_trigger: 1000,
        l0_slowdown_writes_trigger: 1000,
        l0_stop_writes_trigger: 1000,
        max_bytes_for_level_base: 1 << 40,
        ..options(env)
    }
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}{i:05}").into_bytes()
}

fn value(prefix: &str, i: usize) -> Vec<u8> {
    let unit = format!("{prefix}-{i}|");
    unit.repeat(60 / unit.len() + 1).into_bytes()
}

fn scan_backward(db: &DB) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
    let mut out = Vec::new();
    iter.seek_to_last();
    while iter.valid() {
        out.push((iter.key().to_vec(), iter.value().to_vec()));
        iter.prev();
    }
    iter.status().unwrap();
    out.reverse();
    out
}

/// A write whose outcome is unknown (it failed, so it may or may not have
/// reached the WAL): afterwards its key holds either `old` or `new`.
#[derive(Debug, Clone)]
struct Uncertain {
    key: Vec<u8>,
    old: Option<Vec<u8>>,
    new: Option<Vec<u8>>,
}

/// Checks that `db` holds exactly `model`, apart from the keys of
/// `uncertain`, each of which holds one of its two outcomes. Scans forward
/// and backward (which also proves the order) and gets every key.
fn assert_contents(db: &DB, model: &Model, uncertain: &[Uncertain], context: &str) {
    let got =
        try_scan(db, &ReadOptions::new()).unwrap_or_else(|e| panic!("{context}: scan failed: {e}"));
    assert!(
        got.windows(2).all(|w| w[0].0 < w[1].0),
        "{context}: scan out of order"
    );
    let mut got: Model = got.into_iter().collect();
    for u in uncertain {
        let now = got.remove(&u.key);
        assert!(
            now == u.old || now == u.new,
            "{context}: key {} holds {now:?}, neither its old nor its new value",
            String::from_utf8_lossy(&u.key)
        );
    }
    let mut want = model.clone();
    for u in uncertain {
        want.remove(&u.key);
    }
    if got != want {
        let missing: Vec<_> = want
            .keys()
            .filter(|k| !got.contains_key(*k))
            .take(5)
            .collect();
        let extra: Vec<_> = got
            .keys()
            .filter(|k| !want.contains_key(*k))
            .take(5)
            .collect();
        let changed: Vec<_> = want
            .iter()
            .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
            .take(5)
            .collect();
        panic!(
            "{context}: {} entries, want {}; missing e.g. {missing:?}; unexpected e.g. {extra:?}; \
             wrong value e.g. {changed:?}",
            got.len(),
            want.len()
        );
    }
    if uncertain.is_empty() {
        let forward: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(scan_backward(db), forward, "{context}: backward scan");
    }
    for (k, v) in model {
        if uncertain.iter().all(|u| &u.key != k) {
            assert_eq!(
                db.get(&ReadOptions::new(), k).unwrap().as_ref(),
                Some(v),
                "{context}: get"
            );
        }
    }
}

/// A copy of every file of the database in `env`, in a new `MemEnv`.
fn copy_db(env: &dyn Env) -> MemEnv {
    let copy = MemEnv::new();
    copy.create_dir_all(&dir()).unwrap();
    for name in env.children(&dir()).unwrap() {
        let path = dir().join(&name);
        write_file(&copy, &path, &read_file(env, &path).unwrap(), false).unwrap();
    }
    copy
}

fn files_with_suffix(env: &dyn Env, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = env
        .children(&dir())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

fn live_table_count(db: &DB) -> usize {
    (0..7)
        .map(|level| {
            db.property(&format!("shale.num-files-at-level{level}"))
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum()
}

// ---------------------------------------------------------------------------
// Two ways to break the disk at operation `k`.

/// Counts data-changing operations and fails exactly one of them.
#[derive(Debug)]
struct OneShotState {
    /// Count (and fail) only operations on table files.
    tables_only: bool,
    operations: AtomicU64,
    /// The operation to fail (counted from 0); `u64::MAX`: none.
    fail_at: AtomicU64,
    injected: AtomicU64,
    /// What the failed operation was doing, and to which file.
    failed: std::sync::Mutex<Option<String>>,
}

impl OneShotState {
    fn admit(&self, action: &str, path: &Path) -> std::io::Result<()> {
        if self.tables_only && path.extension().is_none_or(|e| e != "ldb") {
            return Ok(());
        }
        let n = self.operations.fetch_add(1, Ordering::SeqCst);
        if n == self.fail_at.load(Ordering::SeqCst) {
            self.injected.fetch_add(1, Ordering::SeqCst);
            *self.failed.lock().unwrap() = Some(format!("{action} {}", path.display()));
            return Err(std::io::Error::other("injected one-shot fault"));
        }
        Ok(())
    }

    fn check(&self, action: &str, path: &Path) -> shale::Result<()> {
        self.admit(action, path)
            .map_err(|e| Error::io(format!("{action} {}", path.display()), e))
    }
}

/// An [`Env`] whose one chosen write, sync, file creation, rename or
/// removal fails while every other works: a transient error, where
/// `FaultInjectionEnv::fail_after` is a disk that dies. The operations
/// counted are the ones `FaultInjectionEnv` counts.
#[derive(Debug, Clone)]
struct OneShotEnv {
    base: Arc<dyn Env>,
    state: Arc<OneShotState>,
}

impl OneShotEnv {
    fn new(base: Arc<dyn Env>, tables_only: bool) -> OneShotEnv {
        OneShotEnv {
            base,
            state: Arc::new(OneShotState {
                tables_only,
                operations: AtomicU64::new(0),
                fail_at: AtomicU64::new(u64::MAX),
                injected: AtomicU64::new(0),
                failed: std::sync::Mutex::new(None),
            }),
        }
    }

    fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(OneShotFile {
            path: path.to_path_buf(),
            inner,
            state: self.state.clone(),
        })
    }
}

struct OneShotFile {
    path: PathBuf,
    inner: Box<dyn WritableFile>,
    state: Arc<OneShotState>,
}

impl Write for OneShotFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.state.admit("writing", &self.path)?;
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl WritableFile for OneShotFile {
    fn sync(&mut self) -> std::io::Result<()> {
        self.state.admit("syncing", &self.path)?;
        self.inner.sync()
    }
}

impl Env for OneShotEnv {
    fn new_writable_file(&self, path: &Path) -> shale::Result<Box<dyn WritableFile>> {
        self.state.check("creating", path)?;
        Ok(self.wrap(path, self.base.new_writable_file(path)?))
    }
    fn new_appendable_file(&self, path: &Path) -> shale::Result<Box<dyn WritableFile>> {
        self.state.check("opening for append", path)?;
        Ok(self.wrap(path, self.base.new_appendable_file(path)?))
    }
    fn new_sequential_file(&self, path: &Path) -> shale::Result<Box<dyn std::io::Read + Send>> {
        self.base.new_sequential_file(path)
    }
    fn new_random_access_file(&self, path: &Path) -> shale::Result<Arc<dyn RandomAccess>> {
        self.base.new_random_access_file(path)
    }
    fn file_exists(&self, path: &Path) -> bool {
        self.base.file_exists(path)
    }
    fn children(&self, dir: &Path) -> shale::Result<Vec<String>> {
        self.base.children(dir)
    }
    fn remove_file(&self, path: &Path) -> shale::Result<()> {
        self.state.check("removing", path)?;
        self.base.remove_file(path)
    }
    fn create_dir_all(&self, dir: &Path) -> shale::Result<()> {
        self.state.check("creating directory", dir)?;
        self.base.create_dir_all(dir)
    }
    fn remove_dir(&self, dir: &Path) -> shale::Result<()> {
        self.state.check("removing directory", dir)?;
        self.base.remove_dir(dir)
    }
    fn file_size(&self, path: &Path) -> shale::Result<u64> {
        self.base.file_size(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> shale::Result<()> {
        self.state.check("renaming", from)?;
        self.base.rename(from, to)
    }
    fn lock_file(&self, path: &Path) -> shale::Result<Box<dyn FileLock>> {
        self.base.lock_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> shale::Result<()> {
        self.state.check("syncing directory", dir)?;
        self.base.sync_dir(dir)
    }
}

/// How a sweep breaks the disk at operation `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Breakage {
    /// Operation `k` and every one after it fail (`fail_after`).
    Dying,
    /// Only operation `k` fails.
    Transient,
}

/// The broken disk of one sweep point.
#[derive(Debug, Clone)]
enum Injector {
    Dying(FaultInjectionEnv),
    Transient(OneShotEnv),
}

impl Injector {
    fn new(breakage: Breakage, base: MemEnv) -> Injector {
        match breakage {
            Breakage::Dying => Injector::Dying(FaultInjectionEnv::new(Arc::new(base))),
            Breakage::Transient => Injector::Transient(OneShotEnv::new(Arc::new(base), false)),
        }
    }

    fn env(&self) -> Arc<dyn Env> {
        match self {
            Injector::Dying(fault) => Arc::new(fault.clone()),
            Injector::Transient(one_shot) => Arc::new(one_shot.clone()),
        }
    }

    /// Breaks operation `k` from now (and, dying, every one after).
    fn arm(&self, k: u64) {
        match self {
            Injector::Dying(fault) => fault.fail_after(k),
            Injector::Transient(one_shot) => {
                let now = one_shot.state.operations.load(Ordering::SeqCst);
                one_shot.state.fail_at.store(now + k, Ordering::SeqCst);
            }
        }
    }

    fn clear(&self) {
        match self {
            Injector::Dying(fault) => fault.clear_failures(),
            Injector::Transient(one_shot) => {
                one_shot.state.fail_at.store(u64::MAX, Ordering::SeqCst)
            }
        }
    }

    fn injected(&self) -> u64 {
        match self {
            Injector::Dying(fault) => fault.injected_failures(),
            Injector::Transient(one_shot) => one_shot.state.injected.load(Ordering::SeqCst),
        }
    }
}

/// After a failure: the still-open database reads everything acknowledged;
/// a write there either works or fails with the background error (and then
/// is not applied); the database reopens on a working disk with the same
/// contents and works (write, full compaction that reads every table,
/// reopen), and `verify_db` finds every file intact.
fn check_after_failure(
    injector: &Injector,
    db: DB,
    model: &mut Model,
    uncertain: &mut Vec<Uncertain>,
    context: &str,
) {
    injector.clear();
    assert_contents(&db, model, uncertain, &format!("{context}, still open"));
    let probe = b"zz-after-failure".to_vec();
    match db.put(&WriteOptions::default(), &probe, b"v") {
        Ok(()) => {
            model.insert(probe.clone(), b"v".to_vec());
        }
        Err(err) => assert!(
            matches!(err, Error::Io { .. }),
            "{context}: write after failure: {err}"
        ),
    }
    drop(db);

    let env = injector.env();
    let db =
        DB::open(dir(), options(&env)).unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    assert_contents(&db, model, uncertain, &format!("{context}, reopened"));
    // Settle the uncertain keys: they are what the database says now.
    for u in uncertain.drain(..) {
        match db.get(&ReadOptions::new(), &u.key).unwrap() {
            Some(v) => model.insert(u.key, v),
            None => model.remove(&u.key),
        };
    }
    db.put(&WriteOptions::default(), b"zz-reopened", b"w")
        .unwrap();
    model.insert(b"zz-reopened".to_vec(), b"w".to_vec());
    db.compact_range(None, None).unwrap();
    assert_contents(&db, model, &[], &format!("{context}, compacted"));
    drop(db);
    let db = DB::open(dir(), options(&env)).unwrap();
    assert_contents(&db, model, &[], &format!("{context}, reopened twice"));
    drop(db);
    shale::verify::verify_db(dir(), &options(&env))
        .unwrap_or_else(|e| panic!("{context}: verify after reopening: {e}"));
}

/// A database with tables at several levels and data in the WAL, made
/// without faults; returns the files and what they hold.
fn base_database(manual: bool, keys: usize) -> (MemEnv, Model) {
    let mem = MemEnv::new();
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let opts = if manual {
        manual_options(&env)
    } else {
        options(&env)
    };
    let db = DB::open(dir(), opts).unwrap();
    let mut model = Model::new();
    let write = WriteOptions::default();
    for round in 0..4 {
        for i in (round..keys).step_by(3) {
            let (k, v) = (key("a", i), value(&format!("r{round}"), i));
            db.put(&write, &k, &v).unwrap();
            model.insert(k, v);
        }
        for i in (round..keys).step_by(11) {
            db.delete(&write, &key("a", i)).unwrap();
            model.remove(&key("a", i));
        }
        db.flush().unwrap();
    }
    if !manual {
        db.wait_for_compactions().unwrap();
    }
    drop(db);
    (mem, model)
}

/// Writes `count` new keys `prefix…` (acknowledged, so into `model`).
fn write_keys(db: &DB, prefix: &str, count: usize, model: &mut Model) {
    for i in 0..count {
        let (k, v) = (key(prefix, i), value(prefix, i));
        db.put(&WriteOptions::default(), &k, &v).unwrap();
        model.insert(k, v);
    }
}

/// Breaks the disk at each operation `k` of `operation` in turn (run on a
/// fresh copy of `base` each time, after `prepare`), until it runs with no
/// failure injected, and checks the database after each. Returns how many
/// points were tried and how many failed the operation.
fn sweep(
    name: &str,
    breakage: Breakage,
    base: &MemEnv,
    base_model: &Model,
    prepare: impl Fn(&DB, &mut Model),
    operation: impl Fn(&DB) -> shale::Result<()>,
) -> (u64, u64) {
    let mut failed = 0;
    for k in 0..2000 {
        let injector = Injector::new(breakage, copy_db(base));
        let db = DB::open(dir(), manual_options(&injector.env())).unwrap();
        let mut model = base_model.clone();
        prepare(&db, &mut model);
        // Let a flush the preparation started finish first, so that the
        // operations of `operation` come in the same order every time.
        db.wait_for_compactions().unwrap();
        injector.arm(k);
        let result = operation(&db);
        let injected = injector.injected();
        let context = format!("{name} ({breakage:?} disk at operation {k}): {result:?}");
        if let Err(err) = &result {
            assert!(injected > 0, "{context}: failed with nothing injected");
            assert!(
                matches!(err, Error::Io { .. }),
                "{context}: want an I/O error, got {err}"
            );
            failed += 1;
            let later = db.put(&WriteOptions::default(), b"zz-later", b"x");
            match breakage {
                // Every operation fails now, so must this write.
                Breakage::Dying => assert!(
                    later.is_err(),
                    "{context}: a write after the failure succeeded"
                ),
                // The disk works again: the write may be refused (the
                // error is remembered) or succeed.
                Breakage::Transient => {
                    if later.is_ok() {
                        model.insert(b"zz-later".to_vec(), b"x".to_vec());
                    }
                }
            }
            // A refused write is not applied: it is not in the model.
        }
        check_after_failure(&injector, db, &mut model, &mut Vec::new(), &context);
        if injected == 0 {
            return (k + 1, failed);
        }
    }
    panic!("{name}: the operation never ran without a failure");
}

fn flush_sweep(breakage: Breakage) {
    let (base, model) = base_database(true, 300);
    let (points, failed) = sweep(
        "flush",
        breakage,
        &base,
        &model,
        |db, model| write_keys(db, "b", 60, model),
        |db| db.flush(),
    );
    println!("flush, {breakage:?} disk: {points} failure points, {failed} failed the flush");
    assert!(
        failed >= 5,
        "the sweep should fail the flush at many points"
    );
}

fn compaction_sweep(breakage: Breakage) {
    let (base, model) = base_database(true, 300);
    let (points, failed) = sweep(
        "compaction",
        breakage,
        &base,
        &model,
        |_, _| {},
        |db| db.compact_range(None, None),
    );
    println!(
        "compaction, {breakage:?} disk: {points} failure points, {failed} failed the compaction"
    );
    assert!(
        failed >= 5,
        "the sweep should fail the compaction at many points"
    );
}

/// A flush (memtable to table, MANIFEST edit, old WAL deleted) on a disk
/// that dies at any one of its operations leaves a consistent database.
#[test]
fn dying_disk_during_flush() {
    flush_sweep(Breakage::Dying);
}

/// The same with one failed operation and a working disk after it.
#[test]
fn transient_failure_during_flush() {
    flush_sweep(Breakage::Transient);
}

/// A manual compaction through every level on a disk that dies at any one
/// of its operations leaves a consistent database.
#[test]
fn dying_disk_during_compaction() {
    compaction_sweep(Breakage::Dying);
}

/// The same with one failed operation and a working disk after it.
#[test]
fn transient_failure_during_compaction() {
    compaction_sweep(Breakage::Transient);
}

/// Opening replays the WAL into a table and starts a new WAL and MANIFEST;
/// a failure at any point of that fails the open (or is survived), and the
/// next open on a working disk finds every write.
fn recovery_sweep(breakage: Breakage) {
    let (base, mut model) = base_database(false, 300);
    // Leave writes in the WAL for recovery to replay.
    {
        let env: Arc<dyn Env> = Arc::new(base.clone());
        let db = DB::open(dir(), options(&env)).unwrap();
        write_keys(&db, "c", 50, &mut model);
    }
    for k in 0..2000 {
        let injector = Injector::new(breakage, copy_db(&base));
        let env = injector.env();
        injector.arm(k);
        let result = DB::open(dir(), options(&env));
        let injected = injector.injected();
        let context = format!("recovery ({breakage:?} disk at operation {k})");
        let db = match result {
            Ok(db) => db,
            Err(err) => {
                assert!(matches!(err, Error::Io { .. }), "{context}: {err}");
                injector.clear();
                DB::open(dir(), options(&env)).unwrap_or_else(|e| {
                    panic!("{context}: failed with {err}; then on a working disk: {e}")
                })
            }
        };
        let mut model = model.clone();
        check_after_failure(&injector, db, &mut model, &mut Vec::new(), &context);
        if injected == 0 {
            println!("recovery, {breakage:?} disk: {} failure points", k + 1);
            return;
        }
    }
    panic!("recovery never ran without a failure");
}

#[test]
fn dying_disk_during_recovery() {
    recovery_sweep(Breakage::Dying);
}

#[test]
fn transient_failure_during_recovery() {
    recovery_sweep(Breakage::Transient);
}

/// A disk that dies at points spread over a write workload, with flushes
/// and compactions running on their threads: the first failed write may or
/// may not be applied, every write after it fails, and the reopened
/// database holds every acknowledged write. (The writers' own WAL appends
/// are usually the first to fail here; see
/// `table_failure_in_background_reaches_writers` for failures that only the
/// background threads see.)
#[test]
fn dying_disk_under_a_write_workload() {
    let workload = |db: &DB, model: &mut Model| -> Option<Uncertain> {
        for i in 0..1500 {
            let (k, v) = (key("w", i % 700), value("w", i));
            match db.put(&WriteOptions::default(), &k, &v) {
                Ok(()) => {
                    model.insert(k, v);
                }
                Err(err) => {
                    assert!(matches!(err, Error::Io { .. }), "{err}");
                    return Some(Uncertain {
                        old: model.get(&k).cloned(),
                        key: k,
                        new: Some(v),
                    });
                }
            }
        }
        None
    };
    // How many operations the writes make on a working disk (the background
    // work racing them makes this vary a little from run to run).
    let writes_operations = {
        let fault = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
        let env: Arc<dyn Env> = Arc::new(fault.clone());
        let db = DB::open(dir(), options(&env)).unwrap();
        let before = fault.operation_count();
        assert!(workload(&db, &mut Model::new()).is_none());
        fault.operation_count() - before
    };
    let mut messages = BTreeSet::new();
    let points = 40;
    for step in 0..points {
        // Spread over the first 90 %, so that a write always fails.
        let k = writes_operations * 9 / 10 * step / points + step % 7;
        let injector = Injector::new(Breakage::Dying, MemEnv::new());
        let db = DB::open(dir(), options(&injector.env())).unwrap();
        injector.arm(k);
        let mut model = Model::new();
        let context = format!("background (dying disk at operation {k})");
        let Some(failed) = workload(&db, &mut model) else {
            panic!("{context}: no write failed");
        };
        // Writes keep failing, with the first error or a new one.
        for i in 0..3 {
            let err = db
                .put(&WriteOptions::default(), &key("x", i), b"x")
                .unwrap_err();
            messages.insert(err.to_string().replace(|c: char| c.is_ascii_digit(), ""));
        }
        let mut uncertain = vec![failed];
        check_after_failure(&injector, db, &mut model, &mut uncertain, &context);
    }
    println!("background: {points} failure points; errors seen by writers:");
    for message in &messages {
        println!("  {message}");
    }
}

/// A write or sync of a table file failing once, at points spread over all
/// the flushes and compactions of a workload (the WAL and MANIFEST never
/// fail): the background error reaches the writers, which fail from then
/// on, and the reopened database holds every acknowledged write.
#[test]
fn table_failure_in_background_reaches_writers() {
    let workload = |db: &DB, model: &mut Model| -> Option<(usize, Error)> {
        for i in 0..3000 {
            let (k, v) = (key("w", i % 700), value("w", i));
            match db.put(&WriteOptions::default(), &k, &v) {
                Ok(()) => {
                    model.insert(k, v);
                }
                Err(err) => return Some((i, err)),
            }
        }
        None
    };
    let table_operations = {
        let one_shot = OneShotEnv::new(Arc::new(MemEnv::new()), true);
        let env: Arc<dyn Env> = Arc::new(one_shot.clone());
        let db = DB::open(dir(), options(&env)).unwrap();
        assert!(workload(&db, &mut Model::new()).is_none());
        one_shot.state.operations.load(Ordering::SeqCst)
    };
    let mut messages = BTreeSet::new();
    let mut harmless = BTreeSet::new();
    let points = 30;
    for step in 0..points {
        // The background work racing the writes makes the number of table
        // operations vary; a point past the writes fails a compaction that
        // runs after them, which the next write sees.
        let k = table_operations * 8 / 10 * step / points + step % 5;
        let one_shot = OneShotEnv::new(Arc::new(MemEnv::new()), true);
        one_shot.state.fail_at.store(k, Ordering::SeqCst);
        let env: Arc<dyn Env> = Arc::new(one_shot.clone());
        let db = DB::open(dir(), options(&env)).unwrap();
        let mut model = Model::new();
        let outcome = workload(&db, &mut model);
        let waited = db.wait_for_compactions();
        let failed = one_shot.state.failed.lock().unwrap().clone();
        let context = format!("background (table operation {k} fails: {failed:?})");
        let Some(failed) = failed else {
            assert!(
                outcome.is_none() && waited.is_ok(),
                "{context}: an error with nothing injected"
            );
            check_after_failure(
                &Injector::Transient(one_shot),
                db,
                &mut model,
                &mut Vec::new(),
                &context,
            );
            continue;
        };
        if failed.starts_with("removing") {
            // Deleting an obsolete table may fail: the file is garbage for
            // the next cleanup, not an error.
            harmless.insert(failed.replace(|c: char| c.is_ascii_digit(), ""));
            assert!(outcome.is_none() && waited.is_ok(), "{context}");
        } else {
            let err = match outcome {
                Some((i, err)) => {
                    assert!(i > 0, "{context}: the first write failed");
                    err
                }
                None => {
                    assert!(
                        waited.is_err(),
                        "{context}: wait_for_compactions hid the error"
                    );
                    db.put(&WriteOptions::default(), b"after", b"x")
                        .unwrap_err()
                }
            };
            assert!(matches!(err, Error::Io { .. }), "{context}: {err}");
            assert!(
                err.to_string().contains("injected"),
                "{context}: the writer sees the background error: {err}"
            );
            messages.insert(err.to_string().replace(|c: char| c.is_ascii_digit(), ""));
            // Refused writes are not applied (not in the model) and keep
            // being refused.
            for j in 0..3 {
                assert!(
                    db.put(&WriteOptions::default(), &key("x", j), b"x")
                        .is_err(),
                    "{context}"
                );
            }
        }
        check_after_failure(
            &Injector::Transient(one_shot),
            db,
            &mut model,
            &mut Vec::new(),
            &context,
        );
    }
    println!(
        "background: {points} table failure points over about {table_operations} table operations"
    );
    println!("errors seen by writers:");
    for message in &messages {
        println!("  {message}");
    }
    println!("harmless failures: {harmless:?}");
    assert!(
        messages.len() >= 2,
        "both flushes and compactions should fail: {messages:?}"
    );
}

/// Failing syncs: the background flush fails at its table sync; writers
/// then get the error; the reopened database has every acknowledged write.
#[test]
fn sync_failure_in_background_flush_is_surfaced_to_writers() {
    let fault = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
    let env: Arc<dyn Env> = Arc::new(fault.clone());
    let db = DB::open(dir(), options(&env)).unwrap();
    let mut model = Model::new();
    write_keys(&db, "s", 50, &mut model);
    fault.set_fail_syncs(true);
    let mut failed = None;
    for i in 0..5000 {
        let (k, v) = (key("t", i), value("t", i));
        match db.put(&WriteOptions::default(), &k, &v) {
            Ok(()) => {
                model.insert(k, v);
            }
            Err(err) => {
                failed = Some((i, err));
                break;
            }
        }
    }
    let (i, err) =
        failed.expect("a flush must have failed within 5000 writes of an 8 KiB memtable");
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(
        err.to_string().contains("sync"),
        "the error says what failed: {err}"
    );
    println!("flush sync failure reached the writer at write {i}: {err}");
    // A write refused on the background error is not applied.
    let err = db
        .put(&WriteOptions::default(), b"t-after", b"x")
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(db.get(&ReadOptions::new(), b"t-after").unwrap(), None);
    check_after_failure(
        &Injector::Dying(fault),
        db,
        &mut model,
        &mut Vec::new(),
        "flush sync failure",
    );
}

/// A manual compaction whose output sync fails returns the error, the
/// version is unchanged, and later writes fail.
#[test]
fn sync_failure_in_compaction() {
    let (base, mut model) = base_database(true, 400);
    let fault = FaultInjectionEnv::new(Arc::new(base));
    let env: Arc<dyn Env> = Arc::new(fault.clone());
    let db = DB::open(dir(), manual_options(&env)).unwrap();
    let before = db.property("shale.sstables").unwrap();
    fault.set_fail_syncs(true);
    let err = db.compact_range(None, None).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(
        db.property("shale.sstables").unwrap(),
        before,
        "a failed compaction changed the version"
    );
    let err = db
        .put(&WriteOptions::default(), b"after", b"x")
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    check_after_failure(
        &Injector::Dying(fault),
        db,
        &mut model,
        &mut Vec::new(),
        "compaction sync failure",
    );
}

/// A `sync` write whose WAL sync fails reports the error; the write may or
/// may not be there later, every write before it is, and later writes fail.
#[test]
fn sync_failure_on_a_sync_write() {
    let fault = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
    let env: Arc<dyn Env> = Arc::new(fault.clone());
    let db = DB::open(dir(), options(&env)).unwrap();
    let mut model = Model::new();
    write_keys(&db, "s", 30, &mut model);
    fault.set_fail_syncs(true);
    let err = db
        .put(&WriteOptions { sync: true }, b"s-failed", b"x")
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    fault.set_fail_syncs(false);
    assert!(db.put(&WriteOptions::default(), b"s-later", b"y").is_err());
    let mut uncertain = vec![Uncertain {
        key: b"s-failed".to_vec(),
        old: None,
        new: Some(b"x".to_vec()),
    }];
    check_after_failure(
        &Injector::Dying(fault),
        db,
        &mut model,
        &mut uncertain,
        "WAL sync failure",
    );
}

/// Obsolete tables go as soon as the compaction that replaced them is
/// installed, not at some later flush, compaction or open.
#[test]
fn compaction_deletes_its_input_tables() {
    let (base, _) = base_database(true, 300);
    let env: Arc<dyn Env> = Arc::new(base.clone());
    let db = DB::open(dir(), manual_options(&env)).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(
        files_with_suffix(&base, ".ldb").len(),
        live_table_count(&db),
        "files {:?}, version:\n{}",
        files_with_suffix(&base, ".ldb"),
        db.property("shale.sstables").unwrap()
    );
}

/// Simulates power loss after `writes` (key, value, sync) on a fresh
/// database in `fault`, some cycles in a row on the same files: every write
/// up to the last synced one must survive, and what survives of the rest is
/// a prefix of them (the WAL is replayed in order).
fn power_loss_cycles(
    fault: &FaultInjectionEnv,
    opts: impl Fn(&Arc<dyn Env>) -> Options,
    cycles: usize,
    writes: usize,
) {
    let env: Arc<dyn Env> = Arc::new(fault.clone());
    let mut model = Model::new();
    for cycle in 0..cycles {
        let db = DB::open(dir(), opts(&env)).unwrap_or_else(|e| panic!("cycle {cycle}: open: {e}"));
        assert_contents(
            &db,
            &model,
            &[],
            &format!("cycle {cycle}: after power loss"),
        );
        let prefix = format!("p{cycle}-");
        let mut last_synced = None;
        for i in 0..writes {
            // Every 37th write syncs, and the very last does not.
            let sync = i % 37 == 36 && i + 1 < writes;
            let mut batch = WriteBatch::new();
            batch.put(&key(&prefix, i), &value(&prefix, i)).unwrap();
            if i % 5 == 0 && cycle > 0 {
                // Overwrite an older key in the same batch, to check the
                // batch survives whole.
                batch
                    .put(&key(&format!("p{}-", cycle - 1), i), &value(&prefix, i))
                    .unwrap();
            }
            db.write(&WriteOptions { sync }, batch).unwrap();
            if sync {
                last_synced = Some(i);
            }
        }
        fault.set_filesystem_active(false);
        drop(db);
        fault.drop_unsynced_data().unwrap();
        fault.set_filesystem_active(true);
        shale::verify::verify_db(dir(), &opts(&env))
            .unwrap_or_else(|e| panic!("cycle {cycle}: verify after power loss: {e}"));

        let db = DB::open(dir(), opts(&env))
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen after power loss: {e}"));
        let survived = (0..writes)
            .take_while(|&i| {
                db.get(&ReadOptions::new(), &key(&prefix, i))
                    .unwrap()
                    .is_some()
            })
            .count();
        let synced = last_synced.map_or(0, |i| i + 1);
        assert!(
            survived >= synced,
            "cycle {cycle}: {survived} writes survived, but {synced} were synced"
        );
        for i in 0..survived {
            model.insert(key(&prefix, i), value(&prefix, i));
            if i % 5 == 0 && cycle > 0 {
                model.insert(key(&format!("p{}-", cycle - 1), i), value(&prefix, i));
            }
        }
        assert_contents(
            &db,
            &model,
            &[],
            &format!("cycle {cycle}: {survived} of {writes} writes survived"),
        );
        println!("cycle {cycle}: {survived} of {writes} writes survived, {synced} synced");
    }
}

/// Power loss with every write in the WAL of the open (no memtable switch):
/// every synced write survives.
#[test]
fn power_loss_keeps_synced_writes_in_one_wal() {
    let fault = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
    let opts = |env: &Arc<dyn Env>| Options {
        write_buffer_size: 4 << 20,
        ..options(env)
    };
    power_loss_cycles(&fault, opts, 4, 300);
}

/// Power loss while memtables are switched (new WALs), flushed and
/// compacted: every synced write survives, and the MANIFEST names only
/// tables that survived.
#[test]
fn power_loss_keeps_synced_writes_across_flushes_and_compactions() {
    let fault = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
    power_loss_cycles(&fault, options, 4, 600);
}

// ---------------------------------------------------------------------------
// Damaged files.

fn flip_byte(env: &dyn Env, path: &Path, offset: usize) {
    let mut contents = read_file(env, path).unwrap();
    contents[offset] ^= 0x5a;
    write_file(env, path, &contents, true).unwrap();
}

fn current_manifest(env: &dyn Env) -> String {
    let current = String::from_utf8(read_file(env, &dir().join("CURRENT")).unwrap()).unwrap();
    current.trim_end().to_string()
}

/// A database of `count` keys `k…` in tables (no WAL data), in `mem`.
fn table_database(mem: &MemEnv, count: usize) -> Model {
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let db = DB::open(dir(), options(&env)).unwrap();
    let mut model = Model::new();
    write_keys(&db, "k", count, &mut model);
    db.compact_range(None, None).unwrap();
    model
}

fn assert_corruption_naming(err: &Error, name: &str, context: &str) {
    assert!(
        err.is_corruption(),
        "{context}: want a corruption, got {err:?}"
    );
    assert!(
        err.to_string().contains(name),
        "{context}: the error does not name {name}: {err}"
    );
}

/// A flipped byte in a table's data block: gets and scans over it fail with
/// a corruption naming the table; nothing wrong is ever returned; the rest of
/// the database still reads.
#[test]
fn corrupt_table_block_is_reported_with_the_file_name() {
    let mem = MemEnv::new();
    let model = table_database(&mem, 1000);
    let tables = files_with_suffix(&mem, ".ldb");
    assert!(tables.len() >= 3, "{tables:?}");
    let victim = &tables[tables.len() / 2];
    // Offset 20 is inside the first data block.
    flip_byte(&mem, &dir().join(victim), 20);

    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let err = shale::verify::verify_db(dir(), &options(&env)).unwrap_err();
    assert_corruption_naming(&err, victim, "verify");
    let db = DB::open(dir(), options(&env)).unwrap();
    let mut errors = 0;
    for (k, v) in &model {
        match db.get(&ReadOptions::new(), k) {
            Ok(got) => assert_eq!(
                got.as_ref(),
                Some(v),
                "get {} returned wrong data",
                String::from_utf8_lossy(k)
            ),
            Err(err) => {
                assert_corruption_naming(&err, victim, "get");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "no get noticed the damage in {victim}");
    assert!(
        errors < model.len() / 2,
        "{errors} gets failed: the damage spread beyond one block"
    );

    // A full scan returns a correct prefix, then stops on the damage.
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
    iter.seek_to_first();
    let expected: Vec<_> = model.iter().collect();
    let mut n = 0;
    while iter.valid() {
        assert_eq!(
            (iter.key(), iter.value()),
            (expected[n].0.as_slice(), expected[n].1.as_slice())
        );
        n += 1;
        iter.next();
    }
    let err = iter.status().unwrap_err();
    assert_corruption_naming(&err, victim, "scan");
    assert!(n < model.len());
    drop(iter);
    // Keys outside the damaged table read fine.
    assert_eq!(
        db.get(&ReadOptions::new(), &key("k", 0)).unwrap().as_ref(),
        model.get(&key("k", 0))
    );
    assert_eq!(
        db.get(&ReadOptions::new(), &key("k", 999))
            .unwrap()
            .as_ref(),
        model.get(&key("k", 999))
    );
}

/// A truncated or garbled MANIFEST: open fails with a corruption naming it.
#[test]
fn damaged_manifest_is_reported_with_its_name() {
    let mem = MemEnv::new();
    let model = table_database(&mem, 300);
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let manifest = current_manifest(&mem);
    let path = dir().join(&manifest);
    let original = read_file(&mem, &path).unwrap();
    assert!(original.len() > 40);

    let damages: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("cut inside the first record", original[..10].to_vec()),
        ("flipped byte in the first record", {
            let mut bytes = original.clone();
            bytes[20] ^= 0x01;
            bytes
        }),
        (
            "all garbage",
            (0..original.len()).map(|i| (i * 7 + 3) as u8).collect(),
        ),
    ];
    for (what, contents) in damages {
        write_file(&mem, &path, &contents, true).unwrap();
        let err = DB::open(dir(), options(&env)).unwrap_err();
        assert_corruption_naming(&err, &manifest, what);
        let err = shale::verify::verify_db(dir(), &options(&env)).unwrap_err();
        assert_corruption_naming(&err, &manifest, &format!("verify, {what}"));
        println!("MANIFEST {what}: {err}");
    }
    // With the MANIFEST restored, nothing else was harmed by the attempts.
    write_file(&mem, &path, &original, true).unwrap();
    let db = DB::open(dir(), options(&env)).unwrap();
    assert_contents(&db, &model, &[], "restored MANIFEST");
}

/// CURRENT naming a MANIFEST that does not exist, or garbage: a clear error.
#[test]
fn current_pointing_nowhere_is_a_clear_error() {
    let mem = MemEnv::new();
    let model = table_database(&mem, 100);
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let current = dir().join("CURRENT");
    let original = read_file(&mem, &current).unwrap();

    write_file(&mem, &current, b"MANIFEST-999999\n", true).unwrap();
    let err = DB::open(dir(), options(&env)).unwrap_err();
    assert!(
        matches!(err, Error::Corruption { .. } | Error::NotFound(_)),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("MANIFEST-999999"),
        "the error names the missing MANIFEST: {err}"
    );

    write_file(&mem, &current, b"MANIFEST-000001", true).unwrap();
    let err = DB::open(dir(), options(&env)).unwrap_err();
    assert_corruption_naming(&err, "CURRENT", "CURRENT without a newline");

    write_file(&mem, &current, &original, true).unwrap();
    let db = DB::open(dir(), options(&env)).unwrap();
    assert_contents(&db, &model, &[], "restored CURRENT");
}

/// Where each record of a log lies, for records of the given payload sizes
/// written from offset 0: LevelDB's log format (32 KiB blocks, 7-byte
/// headers, records fragmented across blocks, block tails under 7 bytes
/// padded).
fn record_spans(payload_lengths: &[usize]) -> Vec<(usize, usize)> {
    const BLOCK: usize = 32768;
    const HEADER: usize = 7;
    let mut offset = 0;
    let mut spans = Vec::new();
    for &length in payload_lengths {
        let mut left = length;
        let mut start = None;
        loop {
            let leftover = BLOCK - offset % BLOCK;
            if leftover < HEADER {
                offset += leftover;
            }
            start.get_or_insert(offset);
            let fragment = left.min(BLOCK - offset % BLOCK - HEADER);
            offset += HEADER + fragment;
            left -= fragment;
            if left == 0 {
                break;
            }
        }
        spans.push((start.unwrap(), offset));
    }
    spans
}

/// A damaged record in the middle of a WAL: with `paranoid_checks` open
/// fails naming the log; without, open succeeds, every record before the
/// damage (and every record from the next log block on) is there, nothing is
/// wrong, and the LOG says what was dropped.
#[test]
fn damaged_wal_record() {
    let mem = MemEnv::new();
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let big_memtable = |paranoid_checks: bool| Options {
        write_buffer_size: 4 << 20,
        paranoid_checks,
        ..options(&env)
    };
    let count = 200;
    let mut model = Model::new();
    {
        let db = DB::open(dir(), big_memtable(false)).unwrap();
        // 1000-byte values: records of 1022 bytes, about 32 to a log block.
        for i in 0..count {
            let v = vec![b'a' + (i % 26) as u8; 1000];
            db.put(&WriteOptions::default(), &key("w", i), &v).unwrap();
            model.insert(key("w", i), v);
        }
    }
    let logs = files_with_suffix(&mem, ".log");
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = &logs[0];
    let log_path = dir().join(log);
    let spans = record_spans(&vec![12 + 1 + 1 + 6 + 2 + 1000; count]);
    assert_eq!(
        spans.last().unwrap().1 as u64,
        mem.file_size(&log_path).unwrap(),
        "record layout"
    );
    let damaged = 80;
    let (damage_at, _) = spans[damaged];
    let next_block = (damage_at / 32768 + 1) * 32768;
    // The first byte of the record's header: its checksum no longer matches.
    flip_byte(&mem, &log_path, damage_at);

    let err = DB::open(dir(), big_memtable(true)).unwrap_err();
    assert_corruption_naming(&err, log, "paranoid open");
    let err = shale::verify::verify_db(dir(), &big_memtable(true)).unwrap_err();
    assert_corruption_naming(&err, log, "verify");

    let db = DB::open(dir(), big_memtable(false)).unwrap();
    let mut lost = Vec::new();
    for (i, &(start, end)) in spans.iter().enumerate() {
        let got = db.get(&ReadOptions::new(), &key("w", i)).unwrap();
        if end <= damage_at || start >= next_block {
            assert_eq!(
                got.as_ref(),
                model.get(&key("w", i)),
                "record {i} ({start}..{end}) is outside the damage"
            );
        } else if let Some(got) = got {
            assert_eq!(Some(&got), model.get(&key("w", i)), "record {i}");
        } else {
            lost.push(i);
        }
    }
    assert!(lost.contains(&damaged), "the damaged record came back");
    println!("WAL damage at {damage_at}: records {lost:?} dropped");
    let info = String::from_utf8(read_file(&mem, &dir().join("LOG")).unwrap()).unwrap();
    assert!(
        info.lines()
            .any(|line| line.contains(log.as_str()) && line.contains("dropping")),
        "the LOG does not mention the dropped bytes of {log}:\n{info}"
    );
    // What was recovered is durable: reopening gives the same.
    let recovered = scan(&db, &ReadOptions::new());
    drop(db);
    let db = DB::open(dir(), big_memtable(true)).unwrap();
    assert_eq!(scan(&db, &ReadOptions::new()), recovered);
}

/// A table the MANIFEST names is gone: open fails with a corruption naming
/// it.
#[test]
fn missing_table_file_fails_open() {
    let mem = MemEnv::new();
    table_database(&mem, 500);
    let tables = files_with_suffix(&mem, ".ldb");
    let victim = &tables[tables.len() / 2];
    mem.remove_file(&dir().join(victim)).unwrap();
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let err = DB::open(dir(), options(&env)).unwrap_err();
    assert_corruption_naming(&err, victim, "missing table");
    let err = shale::verify::verify_db(dir(), &options(&env)).unwrap_err();
    assert_corruption_naming(&err, victim, "verify of a missing table");
}

// ---------------------------------------------------------------------------
// Open modes.

#[test]
fn second_open_is_busy_until_the_first_closes() {
    let mem = MemEnv::new();
    let env: Arc<dyn Env> = Arc::new(mem);
    let db = DB::open(dir(), options(&env)).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    let clone = db.clone();
    drop(db);
    // A clone keeps the database open.
    assert!(matches!(
        DB::open(dir(), options(&env)),
        Err(Error::Busy(_))
    ));
    let err = DB::open(dir(), options(&env)).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err:?}");
    assert!(
        err.to_string().contains(DIR),
        "the error names the database: {err}"
    );
    // The refused open harmed nothing.
    assert_eq!(
        clone.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
    clone.put(&WriteOptions::default(), b"k2", b"v2").unwrap();
    drop(clone);
    let db = DB::open(dir(), options(&env)).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k2").unwrap(),
        Some(b"v2".to_vec())
    );
}

#[test]
fn second_open_is_busy_on_the_real_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("db");
    let opts = Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = DB::open(&path, opts.clone()).unwrap();
    let err = DB::open(&path, opts.clone()).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err:?}");
    // Through another spelling of the same directory too.
    let err = DB::open(tmp.path().join(".").join("db"), opts.clone()).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err:?}");
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    drop(db);
    let db = DB::open(&path, opts).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}

#[test]
fn error_if_exists_and_create_if_missing() {
    let mem = MemEnv::new();
    let env: Arc<dyn Env> = Arc::new(mem.clone());

    // Missing, and not to be created: NotFound, and nothing is created.
    let err = DB::open(
        dir(),
        Options {
            create_if_missing: false,
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err:?}");
    assert!(!mem.file_exists(&dir().join("CURRENT")));

    // error_if_exists on a new database is fine.
    let db = DB::open(
        dir(),
        Options {
            error_if_exists: true,
            ..options(&env)
        },
    )
    .unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    drop(db);

    // error_if_exists on an existing database: refused, database untouched.
    let err = DB::open(
        dir(),
        Options {
            error_if_exists: true,
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("exists"), "{err}");

    // A directory that exists but holds no database, not to be created.
    let empty = PathBuf::from("/empty");
    mem.create_dir_all(&empty).unwrap();
    let err = DB::open(
        &empty,
        Options {
            create_if_missing: false,
            ..options(&env)
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotFound(_)), "{err:?}");
    assert!(!mem.file_exists(&empty.join("CURRENT")));

    // An existing database opens without create_if_missing.
    let db = DB::open(
        dir(),
        Options {
            create_if_missing: false,
            ..options(&env)
        },
    )
    .unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}
