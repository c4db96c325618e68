//! The power-loss file system itself, mounted for real: what a crash keeps
//! and what it drops. Mounting needs /dev/fuse and root (or fusermount3);
//! without them each test prints why it skipped and passes, except with
//! `SHALE_REQUIRE_ALL=1` (set in CI), where it fails.

#![allow(clippy::unwrap_used, reason = "tests fail by panicking")]

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use tempfile::TempDir;

/// A mounted `powerloss-fs` over a backing directory of its own.
struct Mounted {
    _dirs: TempDir,
    backing: PathBuf,
    mount: PathBuf,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

fn required() -> bool {
    std::env::var_os("SHALE_REQUIRE_ALL").is_some_and(|v| v == "1")
}

impl Mounted {
    /// Mounts a fresh file system, or `None` (after saying why) where this
    /// machine cannot and nothing requires it.
    fn new() -> Option<Mounted> {
        let dirs = tempfile::tempdir().unwrap();
        let backing = dirs.path().join("backing");
        let mount = dirs.path().join("mount");
        std::fs::create_dir(&backing).unwrap();
        std::fs::create_dir(&mount).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_powerloss-fs"))
            .arg("--backing")
            .arg(&backing)
            .arg("--mount")
            .arg(&mount)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if line.trim() != "mounted" {
            let output = child.wait_with_output().unwrap();
            let why = String::from_utf8_lossy(&output.stderr).into_owned();
            assert!(
                !required(),
                "SHALE_REQUIRE_ALL=1 but FUSE cannot mount: {why}"
            );
            println!("skipped: FUSE cannot mount here: {why}");
            return None;
        }
        Some(Mounted {
            _dirs: dirs,
            backing,
            mount,
            child,
            stdin,
            stdout,
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.mount.join(name)
    }

    /// Sends a command that ends the file system; returns its last line.
    fn end(mut self, command: &str) -> (PathBuf, String, TempDir) {
        let mut stdin = self.stdin.take().unwrap();
        writeln!(stdin, "{command}").unwrap();
        drop(stdin);
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "powerloss-fs exited with {status}");
        (self.backing, line.trim().to_owned(), self._dirs)
    }

    /// The power loss; the backing directory as it left it.
    fn crash(self) -> (PathBuf, String, TempDir) {
        self.end("crash")
    }
}

fn create(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap()
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn written_but_unsynced_data_is_gone_after_a_crash() {
    let Some(fs) = Mounted::new() else { return };
    let file = create(&fs.path("a"));
    file.write_all_at(b"never synced", 0).unwrap();
    // The application reads its own writes.
    assert_eq!(read(&fs.path("a")), b"never synced");
    drop(file);
    let (backing, report, _dirs) = fs.crash();
    assert!(report.starts_with("crashed: 1 files"), "{report}");
    // Created at once (metadata is durable), empty (its data was not).
    assert_eq!(read(&backing.join("a")), b"");
}

#[test]
fn fsynced_and_fdatasynced_data_survives() {
    let Some(fs) = Mounted::new() else { return };
    let a = create(&fs.path("a"));
    a.write_all_at(b"fsynced", 0).unwrap();
    a.sync_all().unwrap();
    let b = create(&fs.path("b"));
    b.write_all_at(b"fdatasynced", 0).unwrap();
    b.sync_data().unwrap();
    let (backing, report, _dirs) = fs.crash();
    assert!(report.starts_with("crashed: 0 files"), "{report}");
    assert_eq!(read(&backing.join("a")), b"fsynced");
    assert_eq!(read(&backing.join("b")), b"fdatasynced");
}

#[test]
fn a_write_after_the_last_fsync_is_gone() {
    let Some(fs) = Mounted::new() else { return };
    let file = create(&fs.path("a"));
    file.write_all_at(b"first version", 0).unwrap();
    file.sync_all().unwrap();
    file.write_all_at(b"FIRST", 0).unwrap();
    file.write_all_at(b" and more", 13).unwrap();
    file.set_len(30).unwrap();
    assert_eq!(&read(&fs.path("a"))[..22], b"FIRST version and more");
    // Closing and reopening syncs nothing.
    drop(file);
    let _reopened = File::open(fs.path("a")).unwrap();
    let (backing, _, _dirs) = fs.crash();
    assert_eq!(read(&backing.join("a")), b"first version");
}

#[test]
fn an_mmap_write_with_msync_and_fsync_survives_and_one_without_is_gone() {
    let Some(fs) = Mounted::new() else { return };
    let file = create(&fs.path("log"));
    // As the WAL does: space reserved with fallocate, then written
    // through a shared mapping.
    let rc = fallocate(&file, 3 * 4096);
    assert_eq!(rc, 0, "fallocate: {}", std::io::Error::last_os_error());
    // SAFETY: the file is this test's alone and is not resized while mapped.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&file).unwrap() };
    map[..7].copy_from_slice(b"durable");
    map.flush().unwrap();
    file.sync_data().unwrap();
    // msync(MS_SYNC) is a sync on Linux (the kernel calls the file
    // system's fsync for the range); MS_ASYNC is not. The second page is
    // written and flushed asynchronously, the third written only.
    map[4096..4103].copy_from_slice(b"flushed");
    map.flush_async_range(4096, 4096).unwrap();
    map[8192..8199].copy_from_slice(b"written");
    drop(map);
    let (backing, _, _dirs) = fs.crash();
    let bytes = read(&backing.join("log"));
    assert_eq!(bytes.len(), 3 * 4096, "the synced size");
    assert_eq!(&bytes[..7], b"durable");
    assert!(
        bytes[7..].iter().all(|&b| b == 0),
        "unsynced pages reached the disk"
    );
}

fn fallocate(file: &File, len: i64) -> i32 {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on a descriptor the caller keeps open.
    unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) }
}

#[test]
fn renames_and_unlinks_are_durable_at_once_and_data_follows_its_file() {
    let Some(fs) = Mounted::new() else { return };
    // As CURRENT is written: a temporary file synced, then renamed.
    let tmp = create(&fs.path("CURRENT.tmp"));
    tmp.write_all_at(b"MANIFEST-000002\n", 0).unwrap();
    tmp.sync_data().unwrap();
    drop(tmp);
    std::fs::rename(fs.path("CURRENT.tmp"), fs.path("CURRENT")).unwrap();
    // Written, renamed, then synced under its new name.
    let moved = create(&fs.path("moved.tmp"));
    moved.write_all_at(b"synced after the rename", 0).unwrap();
    std::fs::rename(fs.path("moved.tmp"), fs.path("moved")).unwrap();
    moved.sync_all().unwrap();
    let gone = create(&fs.path("gone"));
    gone.write_all_at(b"x", 0).unwrap();
    gone.sync_all().unwrap();
    std::fs::remove_file(fs.path("gone")).unwrap();
    let (backing, _, _dirs) = fs.crash();
    assert_eq!(read(&backing.join("CURRENT")), b"MANIFEST-000002\n");
    assert_eq!(read(&backing.join("moved")), b"synced after the rename");
    assert!(!backing.join("CURRENT.tmp").exists());
    assert!(!backing.join("gone").exists());
}

#[test]
fn a_torn_crash_keeps_some_unsynced_pages_and_never_loses_synced_ones() {
    let Some(fs) = Mounted::new() else { return };
    let file = create(&fs.path("a"));
    file.write_all_at(&[1u8; 4096], 0).unwrap();
    file.sync_all().unwrap();
    for page in 1..64u64 {
        file.write_all_at(&[page as u8 + 1; 4096], page * 4096)
            .unwrap();
    }
    drop(file);
    let (backing, report, _dirs) = fs.end("crash-torn 7");
    assert!(report.contains("kept"), "{report}");
    let bytes = read(&backing.join("a"));
    assert!(bytes[..4096].iter().all(|&b| b == 1), "the synced page");
    let kept = (1..64usize)
        .filter(|&page| {
            bytes.len() >= (page + 1) * 4096
                && bytes[page * 4096..(page + 1) * 4096]
                    .iter()
                    .all(|&b| b == page as u8 + 1)
        })
        .count();
    assert!(kept > 0 && kept < 63, "{kept} of 63 unsynced pages kept");
}

#[test]
fn a_clean_unmount_keeps_everything() {
    let Some(fs) = Mounted::new() else { return };
    let file = create(&fs.path("a"));
    file.write_all_at(b"written, never synced", 0).unwrap();
    drop(file);
    let (backing, report, _dirs) = fs.end("unmount");
    assert_eq!(report, "unmounted");
    assert_eq!(read(&backing.join("a")), b"written, never synced");
}
