//! The file system: a pass-through to a backing directory whose file data
//! waits in [`PendingFile`]s until the file is synced (the model is in the
//! crate's documentation).
//!
//! Inodes: each backing inode gets a number of this file system's own,
//! never reused, so that a backing inode number the backing file system
//! hands out again after an unlink is never taken for the old file (whose
//! pending writes would then land in the new one). A node remembers one
//! path of its file in the backing directory; nodes are kept for the life
//! of the mount (a crash test creates a few thousand files at most).

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::pending::{apply_ops, PendingFile};
use crate::rng::SplitMix64;

/// How long the kernel may keep names and attributes: only this file
/// system changes the backing directory while it is mounted.
const TTL: Duration = Duration::from_secs(1);

/// What a crash leaves of the operations not yet synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Nothing: every file is as at its last sync.
    DropAll,
    /// A random part, drawn from the seed: each written page and each size
    /// change kept or dropped, the kept ones applied in order.
    Torn { seed: u64 },
}

/// What a crash dropped and kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Files that had operations not yet synced.
    pub files: u64,
    /// Operations dropped (for a torn crash: pages and size changes).
    pub dropped_ops: u64,
    /// Bytes of written data dropped.
    pub dropped_bytes: u64,
    /// Operations a torn crash applied anyway.
    pub kept_ops: u64,
}

/// The file system; clones share one state, so the thread that controls
/// the mount can crash it while the session serves requests.
#[derive(Debug, Clone)]
pub struct PowerLossFs {
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    nodes: HashMap<u64, Node>,
    /// Backing inode number to ours, for files that still have a name.
    by_backing: HashMap<u64, u64>,
    next_ino: u64,
    handles: HashMap<u64, File>,
    next_fh: u64,
    crashed: bool,
}

#[derive(Debug)]
struct Node {
    /// A path of the file in the backing directory; `None` once its last
    /// name is gone.
    path: Option<PathBuf>,
    /// Operations since the last sync; `None` when there are none.
    pending: Option<PendingFile>,
    /// A descriptor to the backing file that syncs write through (the file
    /// may have been closed, or lost its name, since it was written).
    writer: Option<File>,
}

type Result<T> = std::result::Result<T, Errno>;

impl PowerLossFs {
    /// A file system over `backing`, an existing directory.
    pub fn new(backing: &Path) -> io::Result<PowerLossFs> {
        let root = backing.canonicalize()?;
        let meta = std::fs::metadata(&root)?;
        if !meta.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        let mut nodes = HashMap::new();
        nodes.insert(
            INodeNo::ROOT.0,
            Node {
                path: Some(root),
                pending: None,
                writer: None,
            },
        );
        let mut by_backing = HashMap::new();
        by_backing.insert(meta.ino(), INodeNo::ROOT.0);
        Ok(PowerLossFs {
            state: Arc::new(Mutex::new(State {
                nodes,
                by_backing,
                next_ino: INodeNo::ROOT.0 + 1,
                handles: HashMap::new(),
                next_fh: 1,
                crashed: false,
            })),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, or `EIO` once crashed.
    fn live(&self) -> Result<MutexGuard<'_, State>> {
        let state = self.lock();
        if state.crashed {
            return Err(Errno::EIO);
        }
        Ok(state)
    }

    /// The simulated power loss: what was not synced is dropped (or, torn,
    /// partly applied), and from now on every request fails with `EIO`, so
    /// nothing more reaches the backing directory. The caller then
    /// unmounts.
    pub fn crash(&self, mode: CrashMode) -> CrashReport {
        let mut state = self.lock();
        state.crashed = true;
        let mut report = CrashReport::default();
        let mut rng = match mode {
            CrashMode::DropAll => None,
            CrashMode::Torn { seed } => Some(SplitMix64::new(seed)),
        };
        // In inode order, so that a torn crash is reproduced by its seed.
        let mut inos: Vec<u64> = state.nodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let Some(node) = state.nodes.get_mut(&ino) else {
                continue;
            };
            let Some(pending) = node.pending.take() else {
                continue;
            };
            report.files += 1;
            let (kept, total) = match (&mut rng, &node.writer) {
                (Some(rng), Some(writer)) => {
                    let kept = pending.torn(rng);
                    // A failure here leaves less of the file, which a
                    // power loss may do too.
                    let _ = apply_ops(&kept, writer);
                    let total = pending.torn_pieces();
                    (kept.len() as u64, total)
                }
                _ => (0, pending.ops().len() as u64),
            };
            report.kept_ops += kept;
            report.dropped_ops += total - kept;
            report.dropped_bytes += pending.bytes();
        }
        report
    }

    /// A clean shutdown: every file synced. Then every request fails.
    pub fn sync_all_and_stop(&self) -> io::Result<()> {
        let mut state = self.lock();
        state.crashed = true;
        for node in state.nodes.values_mut() {
            if let (Some(pending), Some(writer)) = (&mut node.pending, &node.writer) {
                pending.apply_to(writer)?;
            }
            node.pending = None;
        }
        Ok(())
    }
}

impl State {
    fn node(&self, ino: INodeNo) -> Result<&Node> {
        self.nodes.get(&ino.0).ok_or(Errno::ENOENT)
    }

    fn node_mut(&mut self, ino: INodeNo) -> Result<&mut Node> {
        self.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT)
    }

    fn path(&self, ino: INodeNo) -> Result<&Path> {
        self.node(ino)?.path.as_deref().ok_or(Errno::ENOENT)
    }

    fn child_path(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf> {
        Ok(self.path(parent)?.join(name))
    }

    fn handle(&self, fh: FileHandle) -> Result<&File> {
        self.handles.get(&fh.0).ok_or(Errno::EBADF)
    }

    /// Our inode number for the backing file at `path`, found or made.
    fn intern(&mut self, path: PathBuf, meta: &Metadata) -> u64 {
        if let Some(&ino) = self.by_backing.get(&meta.ino()) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.path = Some(path);
                return ino;
            }
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.by_backing.insert(meta.ino(), ino);
        self.nodes.insert(
            ino,
            Node {
                path: Some(path),
                pending: None,
                writer: None,
            },
        );
        ino
    }

    /// Removes `name` in `parent` from the backing directory with `remove`
    /// (a file's or an empty directory's), at once: a metadata operation.
    fn remove_child(
        &mut self,
        parent: INodeNo,
        name: &OsStr,
        remove: fn(&Path) -> io::Result<()>,
    ) -> Result<()> {
        let path = self.child_path(parent, name)?;
        let meta = std::fs::symlink_metadata(&path)?;
        remove(&path)?;
        self.unlinked(&meta);
        Ok(())
    }

    /// The backing file `meta` describes lost its last name: forget what
    /// was pending for it (nothing can read it after a crash) and let its
    /// backing inode number stand for a new file.
    fn unlinked(&mut self, meta: &Metadata) {
        if meta.nlink() > 1 && !meta.is_dir() {
            return;
        }
        if let Some(ino) = self.by_backing.remove(&meta.ino()) {
            if let Some(node) = self.nodes.get_mut(&ino) {
                node.path = None;
                node.pending = None;
            }
        }
    }

    /// The attributes the application sees: the backing file's, with the
    /// length the pending operations give it.
    fn attr(&self, ino: u64, meta: &Metadata) -> FileAttr {
        let size = self
            .nodes
            .get(&ino)
            .and_then(|node| node.pending.as_ref())
            .map_or(meta.len(), PendingFile::len);
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: meta.blocks(),
            atime: time(meta.atime(), meta.atime_nsec()),
            mtime: time(meta.mtime(), meta.mtime_nsec()),
            ctime: time(meta.ctime(), meta.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: kind(meta),
            perm: (meta.mode() & 0o7777) as u16,
            nlink: meta.nlink() as u32,
            uid: meta.uid(),
            gid: meta.gid(),
            rdev: meta.rdev() as u32,
            blksize: meta.blksize() as u32,
            flags: 0,
        }
    }

    /// The metadata of `ino`'s backing file, through `fh` when given (the
    /// file may have lost its name).
    fn metadata(&self, ino: INodeNo, fh: Option<FileHandle>) -> Result<Metadata> {
        if let Some(file) = fh.and_then(|fh| self.handles.get(&fh.0)) {
            return Ok(file.metadata()?);
        }
        Ok(std::fs::symlink_metadata(self.path(ino)?)?)
    }

    /// `ino`'s pending operations, started if there were none, with a
    /// descriptor for the sync that will apply them.
    fn pending(&mut self, ino: INodeNo, fh: Option<FileHandle>) -> Result<&mut PendingFile> {
        let writer = match fh.and_then(|fh| self.handles.get(&fh.0)) {
            Some(file) => Some(file.try_clone()?),
            None => None,
        };
        let node = self.node_mut(ino)?;
        if node.writer.is_none() {
            node.writer = match writer {
                Some(file) => Some(file),
                None => {
                    let path = node.path.as_deref().ok_or(Errno::ENOENT)?;
                    Some(OpenOptions::new().write(true).open(path)?)
                }
            };
        }
        if node.pending.is_none() {
            let durable_len = node.writer.as_ref().ok_or(Errno::EIO)?.metadata()?.len();
            node.pending = Some(PendingFile::new(durable_len));
        }
        node.pending.as_mut().ok_or(Errno::EIO)
    }

    /// A sync of `ino`: its pending operations onto the backing file.
    fn sync(&mut self, ino: INodeNo) -> Result<()> {
        let node = self.node_mut(ino)?;
        if let (Some(pending), Some(writer)) = (&mut node.pending, &node.writer) {
            pending.apply_to(writer)?;
        }
        node.pending = None;
        Ok(())
    }

    fn open_handle(&mut self, file: File) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.handles.insert(fh, file);
        fh
    }

    fn lookup(&mut self, parent: INodeNo, name: &OsStr) -> Result<FileAttr> {
        let path = self.child_path(parent, name)?;
        let meta = std::fs::symlink_metadata(&path)?;
        let ino = self.intern(path, &meta);
        Ok(self.attr(ino, &meta))
    }

    fn read(&self, ino: INodeNo, fh: FileHandle, offset: u64, size: u32) -> Result<Vec<u8>> {
        let file = self.handle(fh)?;
        let pending = self.node(ino)?.pending.as_ref();
        let len = match pending {
            Some(pending) => pending.len(),
            None => file.metadata()?.len(),
        };
        let n = len.saturating_sub(offset).min(u64::from(size)) as usize;
        let mut buf = vec![0u8; n];
        let mut filled = 0;
        while filled < n {
            match file.read_at(&mut buf[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(read) => filled += read,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err.into()),
            }
        }
        if let Some(pending) = pending {
            let seen = pending.overlay(offset, &mut buf);
            buf.truncate(seen);
        }
        Ok(buf)
    }

    fn rename(&mut self, from: PathBuf, to: PathBuf, flags: RenameFlags) -> Result<()> {
        let replaced = std::fs::symlink_metadata(&to).ok();
        if flags.is_empty() {
            std::fs::rename(&from, &to)?;
        } else {
            let from_c = cstring(&from)?;
            let to_c = cstring(&to)?;
            // SAFETY: two valid C strings; renameat2 reads them only.
            let rc = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    from_c.as_ptr(),
                    libc::AT_FDCWD,
                    to_c.as_ptr(),
                    flags.bits(),
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error().into());
            }
        }
        if flags.contains(RenameFlags::RENAME_EXCHANGE) {
            // Both names now point elsewhere: look them up afresh.
            for path in [&from, &to] {
                if let Ok(meta) = std::fs::symlink_metadata(path) {
                    self.intern(path.clone(), &meta);
                }
            }
            return Ok(());
        }
        if let Some(meta) = replaced {
            self.unlinked(&meta);
        }
        // The moved file, and everything under it if it is a directory.
        for node in self.nodes.values_mut() {
            if let Some(path) = &node.path {
                if let Ok(rest) = path.strip_prefix(&from) {
                    node.path = Some(if rest.as_os_str().is_empty() {
                        to.clone()
                    } else {
                        to.join(rest)
                    });
                }
            }
        }
        Ok(())
    }
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    let nsecs = nsecs.clamp(0, 999_999_999) as u32;
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(nsecs.into())
    }
}

fn kind(meta: &Metadata) -> FileType {
    FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile)
}

fn cstring(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

/// Runs `op` on the live state and sends its result or error.
macro_rules! serve {
    ($fs:expr, $reply:ident, |$state:ident| $body:expr, |$value:ident| $ok:expr) => {
        match $fs.live().and_then(|guard| {
            #[allow(unused_mut, reason = "only some operations change the state")]
            let mut $state = guard;
            $body
        }) {
            Ok($value) => $ok,
            Err(err) => $reply.error(err),
        }
    };
}

impl Filesystem for PowerLossFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        serve!(self, reply, |state| state.lookup(parent, name), |attr| {
            reply.entry(&TTL, &attr, Generation(0))
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        serve!(
            self,
            reply,
            |state| {
                let meta = state.metadata(ino, fh)?;
                Ok(state.attr(ino.0, &meta))
            },
            |attr| reply.attr(&TTL, &attr)
        );
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        serve!(
            self,
            reply,
            |state| {
                // Times are not modelled: the backing file keeps its own.
                if let Some(mode) = mode {
                    let path = state.path(ino)?;
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
                }
                if uid.is_some() || gid.is_some() {
                    std::os::unix::fs::lchown(state.path(ino)?, uid, gid)?;
                }
                if let Some(size) = size {
                    state.pending(ino, fh)?.set_len(size);
                }
                let meta = state.metadata(ino, fh)?;
                Ok(state.attr(ino.0, &meta))
            },
            |attr| reply.attr(&TTL, &attr)
        );
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        serve!(
            self,
            reply,
            |state| {
                let path = state.child_path(parent, name)?;
                std::fs::create_dir(&path)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & !umask))?;
                state.lookup(parent, name)
            },
            |attr| reply.entry(&TTL, &attr, Generation(0))
        );
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        serve!(
            self,
            reply,
            |state| state.remove_child(parent, name, |path| std::fs::remove_file(path)),
            |_done| reply.ok()
        );
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        serve!(
            self,
            reply,
            |state| state.remove_child(parent, name, |path| std::fs::remove_dir(path)),
            |_done| reply.ok()
        );
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        serve!(
            self,
            reply,
            |state| {
                let from = state.child_path(parent, name)?;
                let to = state.child_path(newparent, newname)?;
                state.rename(from, to, flags)
            },
            |_done| reply.ok()
        );
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        serve!(
            self,
            reply,
            |state| {
                let file = open_backing(state.path(ino)?, flags.0 & libc::O_NOFOLLOW)?;
                let fh = state.open_handle(file);
                if flags.0 & libc::O_TRUNC != 0 {
                    state.pending(ino, Some(FileHandle(fh)))?.set_len(0);
                }
                Ok(fh)
            },
            |fh| reply.opened(FileHandle(fh), FopenFlags::empty())
        );
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        serve!(
            self,
            reply,
            |state| {
                let path = state.child_path(parent, name)?;
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .mode(mode & !umask)
                    .custom_flags(flags & libc::O_EXCL)
                    .open(&path)?;
                let meta = file.metadata()?;
                let ino = state.intern(path, &meta);
                let fh = state.open_handle(file);
                if flags & libc::O_TRUNC != 0 && meta.len() > 0 {
                    state
                        .pending(INodeNo(ino), Some(FileHandle(fh)))?
                        .set_len(0);
                }
                Ok((state.attr(ino, &meta), fh))
            },
            |created| {
                let (attr, fh) = created;
                reply.created(
                    &TTL,
                    &attr,
                    Generation(0),
                    FileHandle(fh),
                    FopenFlags::empty(),
                )
            }
        );
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        serve!(
            self,
            reply,
            |state| state.read(ino, fh, offset, size),
            |data| reply.data(&data)
        );
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        serve!(
            self,
            reply,
            |state| {
                state.pending(ino, Some(fh))?.write(offset, data);
                Ok(data.len() as u32)
            },
            |written| reply.written(written)
        );
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        serve!(self, reply, |_state| Ok(()), |_done| reply.ok());
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Closing a file syncs nothing: its pending operations stay.
        self.lock().handles.remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // fdatasync too: the size is part of what it must make durable.
        serve!(self, reply, |state| state.sync(ino), |_done| reply.ok());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = self.live().and_then(|mut state| {
            let dir = state.path(ino)?.to_path_buf();
            let mut entries = vec![
                (ino.0, FileType::Directory, OsStr::new(".").to_owned()),
                (ino.0, FileType::Directory, OsStr::new("..").to_owned()),
            ];
            let mut listed = Vec::new();
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                listed.push(entry.file_name());
            }
            listed.sort();
            for name in listed {
                let path = dir.join(&name);
                // Gone since it was listed: leave it out.
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                let child = state.intern(path, &meta);
                entries.push((child, kind(&meta), name));
            }
            Ok(entries)
        });
        match entries {
            Ok(entries) => {
                for (i, (child, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(*child), (i + 1) as u64, *kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(err) => reply.error(err),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Directory operations are durable when they return.
        serve!(self, reply, |_state| Ok(()), |_done| reply.ok());
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        serve!(
            self,
            reply,
            |state| {
                let path = cstring(state.path(ino)?)?;
                let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
                // SAFETY: a valid C string and a buffer of the right type;
                // the buffer is read only when the call succeeded.
                let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
                if rc != 0 {
                    return Err(io::Error::last_os_error().into());
                }
                // SAFETY: filled by the successful call above.
                Ok(unsafe { stat.assume_init() })
            },
            |stat| reply.statfs(
                stat.f_blocks,
                stat.f_bfree,
                stat.f_bavail,
                stat.f_files,
                stat.f_ffree,
                stat.f_bsize as u32,
                stat.f_namemax as u32,
                stat.f_frsize as u32,
            )
        );
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        serve!(
            self,
            reply,
            |state| {
                // Space is not modelled: a reservation is a size change
                // (mode 0) or nothing (keeping the size).
                match mode {
                    0 => {
                        let pending = state.pending(ino, Some(fh))?;
                        let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
                        if end > pending.len() {
                            pending.set_len(end);
                        }
                        Ok(())
                    }
                    libc::FALLOC_FL_KEEP_SIZE => Ok(()),
                    _ => Err(Errno::EOPNOTSUPP),
                }
            },
            |_done| reply.ok()
        );
    }
}

/// Opens a backing file for reading and, where it may, writing: one
/// descriptor serves the reads of the handle and any sync after.
fn open_backing(path: &Path, extra_flags: i32) -> io::Result<File> {
    let open = |write: bool| {
        OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(extra_flags)
            .open(path)
    };
    match open(true) {
        Err(err) if err.raw_os_error() == Some(libc::EISDIR) => open(false),
        result => result,
    }
}
