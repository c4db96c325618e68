//! A real full disk: an 8 MiB tmpfs mounted for the test, filled by the
//! database until the kernel says `ENOSPC` (`docs/reliability.md`, "A full
//! disk and I/O errors"). The error says so, every acknowledged write
//! stays readable, and when a filler file is deleted the database resumes
//! writing by itself; it then reopens with everything and no stray file.
//!
//! Mounting needs root. Without it (or when the mount fails) the test says
//! why and passes, unless `SHALE_REQUIRE_ALL=1` (set in CI): then it fails.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use shale::env::{default_env, Env};
use shale::{Options, WriteOptions, DB};
use shale_compact::testing;
use support::{assert_holds, assert_no_space, assert_no_stray_files, put_when_resumed};
use support::{Failed, Model};

/// The file system's size, and the filler's: the database gets what is
/// left (about 2 MiB), and deleting the filler gives it three times that,
/// room for its compactions.
const TMPFS_SIZE: &str = "size=8m";
const FILLER_BYTES: usize = 6 << 20;

/// A tmpfs mounted on a temporary directory, unmounted on drop.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount() -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
        let path = dir.path().to_path_buf();
        let target = CString::new(path.as_os_str().as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let (source, kind, data) = (c"tmpfs", c"tmpfs", CString::new(TMPFS_SIZE));
        let data = data.map_err(|e| e.to_string())?;
        // SAFETY: every pointer is a NUL-terminated string that outlives
        // the call; tmpfs reads `data` as its option string.
        let rc = unsafe {
            libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                kind.as_ptr(),
                0,
                data.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "mount -t tmpfs -o {TMPFS_SIZE} tmpfs {} failed: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(Tmpfs { path, _dir: dir })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Ok(target) = CString::new(self.path.as_os_str().as_bytes()) {
            // SAFETY: `target` is a NUL-terminated path that outlives the
            // call. Lazy: a file still open does not keep it mounted.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// The tmpfs, or `None` after printing why the test cannot run here;
/// panics instead when it is required ([`testing::skip`]).
fn tmpfs_or_skip() -> Option<Tmpfs> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let reason = if unsafe { libc::geteuid() } != 0 {
        "not running as root (mounting a tmpfs needs it)".to_string()
    } else {
        match Tmpfs::mount() {
            Ok(tmpfs) => return Some(tmpfs),
            Err(reason) => reason,
        }
    };
    testing::skip(
        "full_disk",
        &reason,
        "run it as root with mount(2) allowed (a container needs CAP_SYS_ADMIN)",
    );
    None
}

fn options(env: &Arc<dyn Env>) -> Options {
    Options {
        write_buffer_size: 128 << 10,
        max_file_size: 128 << 10,
        max_bytes_for_level_base: 512 << 10,
        ..support::options(env)
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 100_000_000).into_bytes()
}

/// 512 bytes that do not compress (xorshift from the index).
fn value(i: usize) -> Vec<u8> {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..64)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect()
}

/// Writes new keys from `*next` on until one fails; returns its error.
fn write_until_full(db: &DB, next: &mut usize, model: &mut Model, failed: &mut Failed) -> String {
    let limit = *next + 100_000;
    while *next < limit {
        let i = *next;
        *next += 1;
        let (k, v) = (key(i), value(i));
        if model.contains_key(&k) || failed.contains_key(&k) {
            continue;
        }
        match db.put(&WriteOptions { sync: i % 50 == 0 }, &k, &v) {
            Ok(()) => {
                model.insert(k, v);
            }
            Err(err) => {
                assert_no_space(&err, "the write that found the disk full");
                failed.insert(k, v);
                return err.to_string();
            }
        }
    }
    panic!("100000 writes of 512 bytes fitted in an 8 MiB file system");
}

/// No stray file: after a flush (which deletes what the reads kept pinned)
/// and with nothing running.
fn check_directory(env: &dyn Env, dir: &Path, db: &DB, model: &mut Model, context: &str) {
    db.put(&WriteOptions::default(), context.as_bytes(), b"x")
        .unwrap();
    model.insert(context.as_bytes().to_vec(), b"x".to_vec());
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_no_stray_files(env, dir, db, context);
}

#[test]
fn a_real_full_disk_is_survived() {
    let Some(tmpfs) = tmpfs_or_skip() else {
        return;
    };
    let filler = tmpfs.path.join("filler");
    std::fs::write(&filler, vec![0xA5u8; FILLER_BYTES]).unwrap();
    let dir = tmpfs.path.join("db");
    let env = default_env();
    let db = DB::open(&dir, options(&env)).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    let mut next = 0;

    let err = write_until_full(&db, &mut next, &mut model, &mut failed);
    println!(
        "full after {} acknowledged writes of 512 bytes: {err}",
        model.len()
    );
    assert_holds(&db, &model, &failed, "disk full, still open");
    // A write now is refused while the disk is full, or works if the
    // database found room (a compaction deleted its inputs).
    match db.put(&WriteOptions::default(), b"probe", b"p") {
        Ok(()) => {
            model.insert(b"probe".to_vec(), b"p".to_vec());
        }
        Err(err) => assert_no_space(&err, "a write while full"),
    }

    // Room again: the database resumes by itself.
    std::fs::remove_file(&filler).unwrap();
    let took = put_when_resumed(&db, b"resumed", b"yes", Duration::from_secs(30));
    model.insert(b"resumed".to_vec(), b"yes".to_vec());
    println!(
        "writes resumed {took:?} after the filler was deleted ({} automatic resumes)",
        db.resumed_count()
    );
    // A compaction that ran out of space before the filler went may still
    // fail after the resume: writes stop again, saying the disk was full,
    // and resume by themselves. So each write may wait for that.
    for _ in 0..200 {
        let (k, v) = (key(next), value(next));
        next += 1;
        if failed.contains_key(&k) {
            continue;
        }
        put_when_resumed(&db, &k, &v, Duration::from_secs(30));
        model.insert(k, v);
    }
    settle(&db, Duration::from_secs(30));
    assert_holds(&db, &model, &failed, "resumed");
    check_directory(&*env, &dir, &db, &mut model, "resumed");
    drop(db);

    let db = DB::open(&dir, options(&env)).unwrap();
    assert_holds(&db, &model, &failed, "reopened");
    check_directory(&*env, &dir, &db, &mut model, "reopened");
    drop(db);
    shale::verify::verify_db(&dir, &options(&env)).unwrap();
}

/// The disk fills while the WAL grows: the WAL reserves its space ahead
/// (`fallocate`), so the write that needs more is refused whole, saying the
/// disk is full, before any byte of it is written; nothing acknowledged is
/// lost, and writes resume once there is room. The memtable is larger than
/// the file system, so nothing but the WAL writes.
#[test]
fn a_disk_that_fills_while_the_wal_grows() {
    let Some(tmpfs) = tmpfs_or_skip() else {
        return;
    };
    // About 3 MiB left: far less than the log of a 64 MiB memtable, which
    // the WAL tries to reserve whole, so it reserves smaller stretches
    // until none fits.
    let filler = tmpfs.path.join("filler");
    std::fs::write(&filler, vec![0xA5u8; 5 << 20]).unwrap();
    let dir = tmpfs.path.join("db");
    let env = default_env();
    let options = || Options {
        write_buffer_size: 64 << 20,
        ..options(&env)
    };
    let db = DB::open(&dir, options()).unwrap();
    let (mut model, mut failed) = (Model::new(), Failed::new());
    let mut next = 0;
    let err = write_until_full(&db, &mut next, &mut model, &mut failed);
    assert!(err.contains("reserving log space"), "{err}");
    // The smaller stretches took writes into most of the room left.
    assert!(next > 4_000, "only {next} writes before the disk was full");
    println!(
        "the WAL found the disk full after {} acknowledged writes: {err}",
        model.len()
    );
    assert_holds(&db, &model, &failed, "WAL full, still open");

    std::fs::remove_file(&filler).unwrap();
    put_when_resumed(&db, b"resumed", b"yes", Duration::from_secs(30));
    model.insert(b"resumed".to_vec(), b"yes".to_vec());
    assert_holds(&db, &model, &failed, "resumed");
    drop(db);
    let db = DB::open(&dir, options()).unwrap();
    assert_holds(&db, &model, &failed, "reopened");
    check_directory(&*env, &dir, &db, &mut model, "reopened");
}

/// Flushes and waits for the compactions, through the full-disk errors of
/// jobs that ran out of space before there was room again (the database
/// resumes by itself after them).
fn settle(db: &DB, timeout: Duration) {
    let started = std::time::Instant::now();
    loop {
        match db.flush().and_then(|()| db.wait_for_compactions()) {
            Ok(()) => return,
            Err(err) => {
                assert!(err.is_no_space(), "settling after the resume: {err}");
                assert!(started.elapsed() < timeout, "did not settle: {err}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
