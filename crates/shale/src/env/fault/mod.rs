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
/// **A full disk.** [`set_no_space`](Self::set_no_space) and
/// [`set_free_space`](Self::set_free_space) make writes on open files fail
/// the way they fail on a full file system: with the operating system's
/// `ENOSPC` error (so [`Error::is_no_space`] holds), after a short write
/// that stores what still fits. Creating, renaming and removing files and
/// syncs keep working, as an empty file can still be made on a full disk;
/// removing a file does not give space back, the test does that.
/// [`set_no_space_only_for`](Self::set_no_space_only_for) narrows it to
/// one kind of file (the WAL, the MANIFEST, tables).
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
    /// Bytes that may still be written before writes fail with `ENOSPC`;
    /// `None`: no limit.
    free_space: Option<u64>,
    /// Only files whose name contains this are short of space; `None`:
    /// every file.
    no_space_only_for: Option<String>,
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
            .field("free_space", &self.free_space)
            .field("no_space_only_for", &self.no_space_only_for)
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

    /// Reserves room for up to `wanted` bytes of a write to `path`: how
    /// many may be written, or the `ENOSPC` error when none.
    fn reserve_space(&mut self, path: &Path, wanted: usize) -> std::io::Result<usize> {
        let limited = match &self.no_space_only_for {
            Some(part) => path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().contains(part.as_str())),
            None => true,
        };
        let Some(free) = self.free_space.as_mut().filter(|_| limited) else {
            return Ok(wanted);
        };
        if *free == 0 && wanted > 0 {
            self.injected += 1;
            return Err(no_space_error());
        }
        let allowed = wanted.min(usize::try_from(*free).unwrap_or(usize::MAX));
        *free -= allowed as u64;
        Ok(allowed)
    }

    /// Gives back what a write reserved and did not use.
    fn release_space(&mut self, unused: usize) {
        if let Some(free) = &mut self.free_space {
            *free += unused as u64;
        }
    }
}

/// What `write(2)` says on a full file system.
fn no_space_error() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::ENOSPC)
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

    /// Turns every failure switch off (the full disk too).
    pub fn clear_failures(&self) {
        let mut state = lock(&self.state);
        state.fail_writes = false;
        state.fail_syncs = false;
        state.fail_after = None;
        state.free_space = None;
        state.no_space_only_for = None;
    }

    /// With `true` the disk is full: every write on an open file fails with
    /// `ENOSPC` and stores nothing. `false` frees space (no limit).
    pub fn set_no_space(&self, full: bool) {
        self.set_free_space(full.then_some(0));
    }

    /// Lets `bytes` more bytes be written, over all files, before the disk
    /// is full: the write that reaches the limit stores what fits and
    /// reports the short count, the next fails with `ENOSPC`, as `write(2)`
    /// does. `None`: no limit.
    pub fn set_free_space(&self, bytes: Option<u64>) {
        lock(&self.state).free_space = bytes;
    }

    /// Limits the full disk to files whose name contains `part` (".log",
    /// "MANIFEST", ".ldb"), to fail one kind of write; `None`: every file.
    pub fn set_no_space_only_for(&self, part: Option<&str>) {
        lock(&self.state).no_space_only_for = part.map(str::to_string);
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
        let allowed = lock(&self.state).reserve_space(&self.path, buf.len())?;
        let written = file.write(&buf[..allowed]);
        let mut state = lock(&self.state);
        let written = match written {
            Ok(written) => written,
            Err(err) => {
                state.release_space(allowed);
                return Err(err);
            }
        };
        state.release_space(allowed - written);
        if let Some(file) = state.files.get_mut(&self.path) {
            file.len += written as u64;
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
    /// Passed on: reserving writes no byte, and this env counts only what
    /// is written.
    fn reserve(&mut self, len: u64) -> std::io::Result<()> {
        match lock(&self.inner).as_mut() {
            Some(file) if !lock(&self.state).inactive => file.reserve(len),
            _ => Ok(()),
        }
    }

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
mod tests;
