//! [`FaultInjectionEnv`]: an [`Env`] that fails on command and can lose
//! power, after LevelDB's `db/fault_injection_test.cc`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

use super::{io_error, lock, read_file, Env, FileLock, WritableFile};

/// Wraps another [`Env`] to test what the engine does when the disk fails or
/// the power goes.
///
/// **Injected errors.** [`set_fail_writes`](Self::set_fail_writes) makes
/// every data-changing operation fail with [`Error::Io`]: writes on open
/// files, creating files, rename, remove, creating and removing directories.
/// [`set_fail_syncs`](Self::set_fail_syncs) does the same for
/// [`WritableFile::sync`] and [`Env::sync_dir`]. [`fail_after`](Self::fail_after)
/// lets the next `n` of all those operations succeed and fails every one
/// after. A failed operation changes nothing. Flushes and reads are never
/// failed.
///
/// **Power loss.** The env tracks, for every file written through it, how
/// many bytes were last synced, and which directory entries (files created,
/// renames) were not yet made durable by [`Env::sync_dir`] of their
/// directory. [`drop_unsynced_data`](Self::drop_unsynced_data) then does to
/// the underlying files what a power cut would: renames not made durable are
/// undone (the old target comes back with the contents it had), files whose
/// creation was not made durable disappear, and every other file is cut back
/// to its synced length. Files the env never wrote through are durable as
/// they are. Removing a file is taken as durable at once, as LevelDB's test
/// env takes it (a removed file coming back would only be garbage to delete
/// again).
///
/// To stop the database at a chosen moment, call
/// [`set_filesystem_active(false)`](Self::set_filesystem_active) first: from
/// then on writes and syncs on open files succeed without reaching the disk
/// (the machine is dead), and other changes fail, so closing the database
/// changes nothing. Then `drop_unsynced_data()`, then reactivate and reopen.
#[derive(Debug, Clone)]
pub struct FaultInjectionEnv {
    base: Arc<dyn Env>,
    state: Arc<Mutex<FaultState>>,
}

/// The write end of a file, shared between its handle and the env so that a
/// power loss can close it.
type SharedWriter = Arc<WriterSlot>;

/// The base env's writer, `None` once a power loss closed it.
type WriterSlot = Mutex<Option<Box<dyn WritableFile>>>;

/// Which failure switch governs an operation.
#[derive(Debug, Clone, Copy)]
enum OperationKind {
    Write,
    Sync,
}

/// How much of a file was written and how much of that is durable.
#[derive(Debug, Default, Clone, Copy)]
struct FileState {
    len: u64,
    synced_len: u64,
}

/// A change to a directory that a power loss would undo.
#[derive(Debug)]
enum DirectoryChange {
    /// `path` did not exist before.
    Created(PathBuf),
    /// `from` was renamed to `to`; `replaced` holds what `to` durably held
    /// before, when it existed.
    Renamed {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<Vec<u8>>,
    },
}

#[derive(Debug)]
struct PendingChange {
    change: DirectoryChange,
    /// The directories whose sync makes the change durable; it is durable
    /// once this is empty.
    unsynced_dirs: Vec<PathBuf>,
}

#[derive(Default)]
struct FaultState {
    fail_writes: bool,
    fail_syncs: bool,
    /// How many more operations succeed before every one fails.
    fail_after: Option<u64>,
    operations: u64,
    injected: u64,
    inactive: bool,
    files: HashMap<PathBuf, FileState>,
    pending: Vec<PendingChange>,
    writers: Vec<Weak<WriterSlot>>,
}

impl std::fmt::Debug for FaultState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultState")
            .field("fail_writes", &self.fail_writes)
            .field("fail_syncs", &self.fail_syncs)
            .field("fail_after", &self.fail_after)
            .field("operations", &self.operations)
            .field("injected", &self.injected)
            .field("inactive", &self.inactive)
            .field("files", &self.files)
            .field("pending", &self.pending)
            .field("open_writers", &self.writers.len())
            .finish()
    }
}

impl FaultState {
    /// Counts one operation of `kind` and says whether it must fail.
    fn should_fail(&mut self, kind: OperationKind) -> bool {
        self.operations += 1;
        let exhausted = match &mut self.fail_after {
            Some(0) => true,
            Some(remaining) => {
                *remaining -= 1;
                false
            }
            None => false,
        };
        let switched_off = match kind {
            OperationKind::Write => self.fail_writes,
            OperationKind::Sync => self.fail_syncs,
        };
        let fail = exhausted || switched_off;
        if fail {
            self.injected += 1;
        }
        fail
    }
}

fn injected_io_error() -> std::io::Error {
    std::io::Error::other("injected fault")
}

/// The directory whose sync makes an entry of `path` durable.
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

impl FaultInjectionEnv {
    /// Wraps `base`; nothing fails until told to.
    pub fn new(base: Arc<dyn Env>) -> FaultInjectionEnv {
        FaultInjectionEnv {
            base,
            state: Arc::default(),
        }
    }

    /// The wrapped env, to look at files without counting or tracking.
    pub fn base(&self) -> &Arc<dyn Env> {
        &self.base
    }

    /// Makes writes, file creation, renames and removals fail (or succeed
    /// again).
    pub fn set_fail_writes(&self, fail: bool) {
        lock(&self.state).fail_writes = fail;
    }

    /// Makes file syncs and directory syncs fail (or succeed again).
    pub fn set_fail_syncs(&self, fail: bool) {
        lock(&self.state).fail_syncs = fail;
    }

    /// Lets the next `operations` writes, syncs and directory changes succeed
    /// and fails every one after, until [`clear_failures`](Self::clear_failures).
    pub fn fail_after(&self, operations: u64) {
        lock(&self.state).fail_after = Some(operations);
    }

    /// Turns every failure switch off.
    pub fn clear_failures(&self) {
        let mut state = lock(&self.state);
        state.fail_writes = false;
        state.fail_syncs = false;
        state.fail_after = None;
    }

    /// How many writes, syncs and directory changes were attempted so far,
    /// failed ones included: run a workload once to learn the number, then
    /// sweep [`fail_after`](Self::fail_after) over it.
    pub fn operation_count(&self) -> u64 {
        lock(&self.state).operations
    }

    /// How many operations were failed on purpose so far.
    pub fn injected_failures(&self) -> u64 {
        lock(&self.state).injected
    }

    /// With `false`, the disk stops: writes and syncs on open files succeed
    /// but store nothing, and creating, renaming or removing files fails.
    /// `true` restarts it.
    pub fn set_filesystem_active(&self, active: bool) {
        lock(&self.state).inactive = !active;
    }

    /// Simulates a power loss: undoes renames and file creations not made
    /// durable by a directory sync, and cuts every file written through this
    /// env back to the length it had at its last sync. Files still open for
    /// writing are closed: their later writes go nowhere.
    ///
    /// Afterwards every remaining file counts as durable. The failure
    /// switches and the active flag are left as they are.
    pub fn drop_unsynced_data(&self) -> Result<()> {
        // Close open writers first, outside the state lock (a writer takes
        // its own lock, then the state's), so what they buffered reaches the
        // base file before it is cut.
        let writers = std::mem::take(&mut lock(&self.state).writers);
        for writer in writers.iter().filter_map(Weak::upgrade) {
            drop(lock(&writer).take());
        }

        let mut state = lock(&self.state);
        let pending = std::mem::take(&mut state.pending);
        for PendingChange { change, .. } in pending.into_iter().rev() {
            match change {
                DirectoryChange::Created(path) => {
                    state.files.remove(&path);
                    ignore_not_found(self.base.remove_file(&path))?;
                }
                DirectoryChange::Renamed { from, to, replaced } => {
                    if let Some(file) = state.files.remove(&to) {
                        state.files.insert(from.clone(), file);
                    }
                    ignore_not_found(self.base.rename(&to, &from))?;
                    if let Some(contents) = replaced {
                        self.rewrite(&to, &contents)?;
                    }
                }
            }
        }
        let files = std::mem::take(&mut state.files);
        for (path, file) in files {
            if !self.base.file_exists(&path) {
                continue;
            }
            if self.base.file_size(&path)? > file.synced_len {
                let mut contents = read_file(&*self.base, &path)?;
                contents.truncate(usize::try_from(file.synced_len).unwrap_or(usize::MAX));
                self.rewrite(&path, &contents)?;
            }
        }
        Ok(())
    }

    /// Replaces the contents of `path` in the base env, durably.
    fn rewrite(&self, path: &Path, contents: &[u8]) -> Result<()> {
        let mut file = self.base.new_writable_file(path)?;
        file.write_all(contents)
            .and_then(|()| file.sync())
            .map_err(|e| io_error("rewriting", path, e))
    }

    /// Counts a data-changing operation on `path`; an injected error when it
    /// must fail or the file system is inactive.
    fn check(&self, kind: OperationKind, action: &str, path: &Path) -> Result<()> {
        let mut state = lock(&self.state);
        if state.inactive {
            return Err(Error::io(
                format!("{action} {}", path.display()),
                std::io::Error::other("file system inactive (simulated power loss)"),
            ));
        }
        if state.should_fail(kind) {
            return Err(Error::io(
                format!("{action} {}", path.display()),
                injected_io_error(),
            ));
        }
        Ok(())
    }

    fn wrap_writer(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        let shared: SharedWriter = Arc::new(Mutex::new(Some(inner)));
        let mut state = lock(&self.state);
        state.writers.retain(|writer| writer.strong_count() > 0);
        state.writers.push(Arc::downgrade(&shared));
        Box::new(FaultWritableFile {
            path: path.to_path_buf(),
            inner: shared,
            state: Arc::clone(&self.state),
        })
    }
}

fn ignore_not_found(result: Result<()>) -> Result<()> {
    match result {
        Err(Error::NotFound(_)) => Ok(()),
        other => other,
    }
}

/// A file written through a [`FaultInjectionEnv`].
struct FaultWritableFile {
    path: PathBuf,
    /// `None` once a power loss closed it.
    inner: SharedWriter,
    state: Arc<Mutex<FaultState>>,
}

impl FaultWritableFile {
    /// Whether the operation goes to the disk: `Ok(false)` when the file
    /// system is inactive, an error when it must fail.
    fn admit(&self, kind: OperationKind) -> std::io::Result<bool> {
        let mut state = lock(&self.state);
        if state.inactive {
            return Ok(false);
        }
        if state.should_fail(kind) {
            return Err(injected_io_error());
        }
        Ok(true)
    }
}

impl Write for FaultWritableFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut inner = lock(&self.inner);
        let Some(file) = inner.as_mut() else {
            return Ok(buf.len()); // closed by a power loss: the bytes are lost
        };
        if !self.admit(OperationKind::Write)? {
            return Ok(buf.len());
        }
        let written = file.write(buf)?;
        if let Some(state) = lock(&self.state).files.get_mut(&self.path) {
            state.len += written as u64;
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match lock(&self.inner).as_mut() {
            Some(file) if !lock(&self.state).inactive => file.flush(),
            _ => Ok(()),
        }
    }
}

impl WritableFile for FaultWritableFile {
    fn sync(&mut self) -> std::io::Result<()> {
        let mut inner = lock(&self.inner);
        let Some(file) = inner.as_mut() else {
            return Ok(());
        };
        if !self.admit(OperationKind::Sync)? {
            return Ok(());
        }
        file.sync()?;
        if let Some(state) = lock(&self.state).files.get_mut(&self.path) {
            state.synced_len = state.len;
        }
        Ok(())
    }
}

impl Env for FaultInjectionEnv {
    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OperationKind::Write, "creating", path)?;
        let existed = self.base.file_exists(path);
        let inner = self.base.new_writable_file(path)?;
        {
            let mut state = lock(&self.state);
            state.files.insert(path.to_path_buf(), FileState::default());
            if !existed {
                state.pending.push(PendingChange {
                    change: DirectoryChange::Created(path.to_path_buf()),
                    unsynced_dirs: vec![parent_dir(path)],
                });
            }
        }
        Ok(self.wrap_writer(path, inner))
    }

    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OperationKind::Write, "opening for append", path)?;
        let existed = self.base.file_exists(path);
        let size = if existed {
            self.base.file_size(path)?
        } else {
            0
        };
        let inner = self.base.new_appendable_file(path)?;
        {
            let mut state = lock(&self.state);
            if !existed {
                state.pending.push(PendingChange {
                    change: DirectoryChange::Created(path.to_path_buf()),
                    unsynced_dirs: vec![parent_dir(path)],
                });
            }
            // An untracked existing file is durable as it is.
            state.files.entry(path.to_path_buf()).or_insert(FileState {
                len: size,
                synced_len: size,
            });
        }
        Ok(self.wrap_writer(path, inner))
    }

    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn Read + Send>> {
        self.base.new_sequential_file(path)
    }

    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccess>> {
        self.base.new_random_access_file(path)
    }

    fn file_exists(&self, path: &Path) -> bool {
        self.base.file_exists(path)
    }

    fn children(&self, dir: &Path) -> Result<Vec<String>> {
        self.base.children(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        self.check(OperationKind::Write, "removing", path)?;
        self.base.remove_file(path)?;
        lock(&self.state).files.remove(path);
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.check(OperationKind::Write, "creating directory", dir)?;
        self.base.create_dir_all(dir)
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.check(OperationKind::Write, "removing directory", dir)?;
        self.base.remove_dir(dir)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.base.file_size(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(OperationKind::Write, "renaming", from)?;
        // What `to` durably holds now is what a power loss brings back.
        let replaced = if self.base.file_exists(to) {
            let mut contents = read_file(&*self.base, to)?;
            if let Some(file) = lock(&self.state).files.get(to) {
                contents.truncate(usize::try_from(file.synced_len).unwrap_or(usize::MAX));
            }
            Some(contents)
        } else {
            None
        };
        self.base.rename(from, to)?;
        let mut state = lock(&self.state);
        state.files.remove(to);
        if let Some(file) = state.files.remove(from) {
            state.files.insert(to.to_path_buf(), file);
        }
        let mut unsynced_dirs = vec![parent_dir(from)];
        if parent_dir(to) != unsynced_dirs[0] {
            unsynced_dirs.push(parent_dir(to));
        }
        state.pending.push(PendingChange {
            change: DirectoryChange::Renamed {
                from: from.to_path_buf(),
                to: to.to_path_buf(),
                replaced,
            },
            unsynced_dirs,
        });
        Ok(())
    }

    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.base.lock_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.check(OperationKind::Sync, "syncing directory", dir)?;
        self.base.sync_dir(dir)?;
        let mut state = lock(&self.state);
        for pending in &mut state.pending {
            pending.unsynced_dirs.retain(|unsynced| unsynced != dir);
        }
        state
            .pending
            .retain(|pending| !pending.unsynced_dirs.is_empty());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{write_file, MemEnv, PosixEnv};

    fn mem_fault_env() -> FaultInjectionEnv {
        FaultInjectionEnv::new(Arc::new(MemEnv::new()))
    }

    fn contents(env: &dyn Env, path: &Path) -> Vec<u8> {
        read_file(env, path).unwrap()
    }

    #[test]
    fn power_loss_keeps_synced_bytes_only() {
        let env = mem_fault_env();
        let dir = Path::new("/db");
        let path = dir.join("000003.log");
        let mut file = env.new_writable_file(&path).unwrap();
        env.sync_dir(dir).unwrap();
        file.write_all(b"abc").unwrap();
        file.sync().unwrap();
        file.write_all(b"def").unwrap();
        assert_eq!(contents(&env, &path), b"abcdef");
        env.drop_unsynced_data().unwrap();
        assert_eq!(contents(&env, &path), b"abc");

        // The handle is dead now; its writes go nowhere.
        file.write_all(b"ghi").unwrap();
        file.sync().unwrap();
        drop(file);
        assert_eq!(contents(&env, &path), b"abc");
    }

    #[test]
    fn power_loss_over_posix_cuts_buffered_and_flushed_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let env = FaultInjectionEnv::new(Arc::new(PosixEnv::new()));
        let path = tmp.path().join("f");
        let mut file = env.new_writable_file(&path).unwrap();
        env.sync_dir(tmp.path()).unwrap();
        file.write_all(b"durable").unwrap();
        file.sync().unwrap();
        file.write_all(b"-flushed").unwrap();
        file.flush().unwrap();
        file.write_all(b"-buffered").unwrap();
        env.drop_unsynced_data().unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), b"durable");
    }

    #[test]
    fn files_created_without_dir_sync_disappear() {
        let env = mem_fault_env();
        let dir = Path::new("/db");
        let kept = dir.join("kept");
        let lost = dir.join("lost");
        write_file(&env, &kept, b"k", true).unwrap();
        env.sync_dir(dir).unwrap();
        write_file(&env, &lost, b"l", true).unwrap();
        // Syncing another directory does not make `lost` durable.
        let elsewhere = Path::new("/elsewhere");
        env.create_dir_all(elsewhere).unwrap();
        env.sync_dir(elsewhere).unwrap();
        env.drop_unsynced_data().unwrap();
        assert_eq!(contents(&env, &kept), b"k");
        assert!(!env.file_exists(&lost));
    }

    #[test]
    fn appends_to_an_existing_file_are_lost_unless_synced() {
        let env = mem_fault_env();
        let path = Path::new("/db/MANIFEST-000001");
        env.base()
            .new_writable_file(path)
            .unwrap()
            .write_all(b"old")
            .unwrap();
        let mut file = env.new_appendable_file(path).unwrap();
        file.write_all(b"+new").unwrap();
        drop(file);
        env.drop_unsynced_data().unwrap();
        assert_eq!(contents(&env, path), b"old");
    }

    #[test]
    fn rename_without_dir_sync_is_undone() {
        let env = mem_fault_env();
        let dir = Path::new("/db");
        let current = dir.join("CURRENT");
        write_file(&env, &current, b"MANIFEST-000001\n", true).unwrap();
        env.sync_dir(dir).unwrap();

        let temp = dir.join("000002.dbtmp");
        write_file(&env, &temp, b"MANIFEST-000002\n", true).unwrap();
        env.rename(&temp, &current).unwrap();
        assert_eq!(contents(&env, &current), b"MANIFEST-000002\n");
        env.drop_unsynced_data().unwrap();
        assert_eq!(contents(&env, &current), b"MANIFEST-000001\n");
        assert!(!env.file_exists(&temp), "the temp file was never durable");

        // The same rename followed by a directory sync survives.
        write_file(&env, &temp, b"MANIFEST-000002\n", true).unwrap();
        env.rename(&temp, &current).unwrap();
        env.sync_dir(dir).unwrap();
        env.drop_unsynced_data().unwrap();
        assert_eq!(contents(&env, &current), b"MANIFEST-000002\n");
        assert_eq!(env.children(dir).unwrap(), ["CURRENT"]);
    }

    #[test]
    fn durable_file_renamed_without_dir_sync_returns_to_its_name() {
        let env = mem_fault_env();
        let dir = Path::new("/db");
        let (from, to) = (dir.join("a"), dir.join("b"));
        write_file(&env, &from, b"data", true).unwrap();
        env.sync_dir(dir).unwrap();
        env.rename(&from, &to).unwrap();
        env.drop_unsynced_data().unwrap();
        assert_eq!(contents(&env, &from), b"data");
        assert!(!env.file_exists(&to));
    }

    #[test]
    fn injected_write_and_sync_failures() {
        let env = mem_fault_env();
        let path = Path::new("/db/f");
        let mut file = env.new_writable_file(path).unwrap();
        env.set_fail_writes(true);
        assert!(file.write_all(b"x").is_err());
        assert!(matches!(
            env.new_writable_file(Path::new("/db/g")),
            Err(Error::Io { .. })
        ));
        assert!(matches!(
            env.rename(path, Path::new("/db/g")),
            Err(Error::Io { .. })
        ));
        assert!(matches!(env.remove_file(path), Err(Error::Io { .. })));
        file.sync().unwrap();
        env.set_fail_writes(false);
        file.write_all(b"y").unwrap();
        env.set_fail_syncs(true);
        assert!(file.sync().is_err());
        assert!(matches!(
            env.sync_dir(Path::new("/db")),
            Err(Error::Io { .. })
        ));
        assert_eq!(env.injected_failures(), 6);
        env.clear_failures();
        file.sync().unwrap();
        assert_eq!(contents(&env, path), b"y");

        let err = env.base().remove_file(Path::new("/db/none")).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)));
    }

    #[test]
    fn fail_after_counts_operations() {
        let env = mem_fault_env();
        let path = Path::new("/db/f");
        let before = env.operation_count();
        env.fail_after(2);
        let mut file = env.new_writable_file(path).unwrap(); // 1
        file.write_all(b"a").unwrap(); // 2
        assert!(file.write_all(b"b").is_err());
        assert!(file.sync().is_err());
        assert!(env.sync_dir(Path::new("/db")).is_err());
        assert_eq!(env.operation_count() - before, 5);
        assert_eq!(env.injected_failures(), 3);
        env.clear_failures();
        file.write_all(b"c").unwrap();
        assert_eq!(contents(&env, path), b"ac");
    }

    #[test]
    fn inactive_file_system_stores_nothing() {
        let env = mem_fault_env();
        let dir = Path::new("/db");
        let path = dir.join("f");
        let mut file = env.new_writable_file(&path).unwrap();
        env.sync_dir(dir).unwrap();
        file.write_all(b"kept").unwrap();
        file.sync().unwrap();
        env.set_filesystem_active(false);
        file.write_all(b"gone").unwrap();
        file.sync().unwrap();
        assert!(env.new_writable_file(&dir.join("g")).is_err());
        assert!(env.remove_file(&path).is_err());
        drop(file);
        env.drop_unsynced_data().unwrap();
        env.set_filesystem_active(true);
        assert_eq!(contents(&env, &path), b"kept");
    }
}
