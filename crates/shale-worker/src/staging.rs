//! The worker's staging: every attempt writes its outputs into
//! `staging/<session>/` of its database, and every session is the
//! [`Staging`] ledger's until it is adopted or removed. A session has an
//! owner (who asked for it), a deadline (the job's while it runs, then the
//! time the engine has to adopt what it staged) and the bytes it wrote; a
//! database has a quota of staged bytes and sessions. A reaper removes what
//! outlives its deadline, and a worker starting up removes what an earlier
//! run left past its time. All file access goes through descriptors
//! ([`shale_compact::remote::fs`]): a session's directory is the one
//! opened when it was created, wherever its name points later.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use shale_compact::job::{JobFile, JobIo, OutputSink};
use shale_compact::remote::fs::Dir;
use shale_compact::remote::paths::STAGING_DIR;
use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

use crate::proto::Progress;
use crate::root::describe;

/// How deep under the root a starting worker looks for databases with
/// staging left over (`ROOT/a/b/c/db` is depth 4).
const SWEEP_DEPTH: usize = 4;
/// The most directories a starting worker looks into.
const SWEEP_DIRECTORIES: usize = 10_000;

/// Limits on what staging may hold.
#[derive(Debug, Clone, Copy)]
pub struct StagingLimits {
    /// How long staged outputs wait for the engine to adopt them after the
    /// job's `Done`; then the worker removes them.
    pub adopt_timeout: Duration,
    /// Staged bytes one database may hold (running and finished sessions).
    pub max_bytes_per_db: u64,
    /// Sessions one database may hold.
    pub max_sessions_per_db: usize,
}

impl Default for StagingLimits {
    fn default() -> StagingLimits {
        StagingLimits {
            adopt_timeout: Duration::from_secs(300),
            max_bytes_per_db: 64 << 30,
            max_sessions_per_db: 64,
        }
    }
}

/// Why a session could not be opened.
#[derive(Debug)]
pub enum StagingRefusal {
    /// The database holds its quota of staged bytes or sessions.
    Quota(String),
    /// The session exists already.
    Exists(String),
    /// The file system said no.
    Io(String),
}

/// One database's share of staging: keyed by the directory's device and
/// inode, so two paths to one database share one quota.
#[derive(Debug, Default)]
struct DbShare {
    bytes: Arc<AtomicU64>,
    sessions: usize,
}

#[derive(Debug)]
struct Session {
    db: (u64, u64),
    staging: Arc<Dir>,
    owner: String,
    deadline: Instant,
    running: bool,
    /// When its `Done` was delivered (`None` while it runs).
    finished_at: Option<Instant>,
    io: Arc<StagingIo>,
}

/// The ledger of staged sessions (shared by every call of a worker).
#[derive(Debug)]
pub struct Staging {
    limits: StagingLimits,
    state: Mutex<StagingState>,
}

#[derive(Debug, Default)]
struct StagingState {
    sessions: HashMap<String, Session>,
    dbs: HashMap<(u64, u64), DbShare>,
}

/// What staging holds now (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StagingUsage {
    /// Sessions registered (running or waiting for adoption).
    pub sessions: usize,
    /// Bytes they staged.
    pub bytes: u64,
}

impl Staging {
    /// A ledger enforcing `limits`.
    pub fn new(limits: StagingLimits) -> Staging {
        Staging {
            limits,
            state: Mutex::new(StagingState::default()),
        }
    }

    fn limits(&self) -> StagingLimits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, StagingState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens `staging/<session>/` in database `db` for a job of `owner`
    /// that must end by `deadline`; its inputs are already open.
    pub fn open(
        &self,
        db: &Dir,
        session: &str,
        owner: String,
        deadline: Instant,
        inputs: HashMap<u64, Arc<File>>,
    ) -> std::result::Result<Arc<StagingIo>, StagingRefusal> {
        let limits = self.limits();
        let id = db.id().map_err(|e| StagingRefusal::Io(e.to_string()))?;
        let key = (id.dev, id.ino);
        let mut state = self.lock();
        let share = state.dbs.entry(key).or_default();
        if share.sessions >= limits.max_sessions_per_db {
            return Err(StagingRefusal::Quota(format!(
                "the database holds {} staged sessions already (--max_staged_sessions)",
                share.sessions
            )));
        }
        let bytes = share.bytes.load(Ordering::Relaxed);
        if bytes >= limits.max_bytes_per_db {
            return Err(StagingRefusal::Quota(format!(
                "the database holds {bytes} staged bytes already (--max_staged_bytes {})",
                limits.max_bytes_per_db
            )));
        }
        let db_bytes = share.bytes.clone();
        if state.sessions.contains_key(session) {
            return Err(StagingRefusal::Exists(format!(
                "session {session} exists already"
            )));
        }
        let io_err =
            |what: &str, e: std::io::Error| StagingRefusal::Io(format!("{what}: {}", describe(&e)));
        db.create_dir(STAGING_DIR)
            .map_err(|e| io_err("creating staging", e))?;
        let staging = Arc::new(
            db.open_dir(STAGING_DIR)
                .map_err(|e| io_err("opening staging", e))?,
        );
        if !staging
            .create_dir(session)
            .map_err(|e| io_err("creating the session", e))?
        {
            return Err(StagingRefusal::Exists(format!(
                "staging/{session} exists already"
            )));
        }
        let dir = staging
            .open_dir(session)
            .map_err(|e| io_err("opening the session", e))?;
        let io = Arc::new(StagingIo {
            inputs,
            dir,
            next: AtomicU64::new(1),
            cancelled: AtomicBool::new(false),
            written: Arc::new(AtomicU64::new(0)),
            db_bytes,
            max_db_bytes: limits.max_bytes_per_db,
            tables: Arc::new(AtomicU64::new(0)),
            started: Instant::now(),
        });
        if let Some(share) = state.dbs.get_mut(&key) {
            share.sessions += 1;
        }
        state.sessions.insert(
            session.to_string(),
            Session {
                db: key,
                staging,
                owner,
                deadline,
                running: true,
                finished_at: None,
                io: io.clone(),
            },
        );
        Ok(io)
    }

    /// The job of `session` ended with `Done` delivered: its outputs wait
    /// for the engine until the adoption timeout.
    pub fn finished(&self, session: &str) {
        let timeout = self.limits().adopt_timeout;
        if let Some(entry) = self.lock().sessions.get_mut(session) {
            let now = Instant::now();
            entry.running = false;
            entry.finished_at = Some(now);
            entry.deadline = now + timeout;
        }
    }

    /// Removes `session`'s directory and forgets it.
    pub fn remove(&self, session: &str) {
        let removed = {
            let mut state = self.lock();
            let removed = state.sessions.remove(session);
            if let Some(entry) = &removed {
                Self::release(&mut state, entry);
            }
            removed
        };
        if let Some(entry) = removed {
            let _ = entry.staging.remove_tree(session);
        }
    }

    fn release(state: &mut StagingState, entry: &Session) {
        if let Some(share) = state.dbs.get_mut(&entry.db) {
            share.sessions = share.sessions.saturating_sub(1);
            let staged = entry.io.written.load(Ordering::Relaxed);
            let _ = share
                .bytes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some(b.saturating_sub(staged))
                });
            if share.sessions == 0 {
                state.dbs.remove(&entry.db);
            }
        }
    }

    /// One pass of the reaper: cancels running jobs past their deadline,
    /// forgets sessions the engine adopted (their directory is gone), and
    /// removes finished ones past the adoption timeout. Returns what it
    /// removed, as `(session, owner)`.
    pub fn reap(&self, now: Instant) -> Vec<(String, String)> {
        let mut state = self.lock();
        Self::forget_adopted(&mut state);
        let mut expired = Vec::new();
        for (name, entry) in &state.sessions {
            if entry.running {
                if entry.deadline <= now {
                    entry.io.cancel();
                }
            } else if entry.deadline <= now {
                expired.push(name.clone());
            }
        }
        let mut removed = Vec::new();
        for name in expired {
            if let Some(entry) = state.sessions.remove(&name) {
                Self::release(&mut state, &entry);
                let _ = entry.staging.remove_tree(&name);
                removed.push((name, entry.owner));
            }
        }
        removed
    }

    /// Forgets the finished sessions the engine adopted: their directory
    /// is gone (adopting a session renames its tables and removes it).
    fn forget_adopted(state: &mut StagingState) {
        let adopted: Vec<String> = state
            .sessions
            .iter()
            .filter(|(name, entry)| !entry.running && entry.staging.open_dir(name).is_err())
            .map(|(name, _)| name.clone())
            .collect();
        for name in adopted {
            if let Some(entry) = state.sessions.remove(&name) {
                Self::release(state, &entry);
            }
        }
    }

    /// Cancels every running job (shutdown) and removes every session.
    pub fn remove_all(&self) -> usize {
        let names: Vec<String> = {
            let state = self.lock();
            for entry in state.sessions.values() {
                entry.io.cancel();
            }
            state.sessions.keys().cloned().collect()
        };
        let count = names.len();
        for name in names {
            self.remove(&name);
        }
        count
    }

    /// How many sessions finished at or after `since` still wait for
    /// their engine to adopt them; sessions adopted since the last look
    /// (their directory is gone) are forgotten first. A draining worker
    /// waits for this to reach 0 before it exits, so that its last jobs'
    /// outputs are adopted rather than removed.
    pub fn awaiting_adoption(&self, since: Instant) -> usize {
        let mut state = self.lock();
        Self::forget_adopted(&mut state);
        state
            .sessions
            .values()
            .filter(|e| e.finished_at.is_some_and(|at| at >= since))
            .count()
    }

    /// Sessions and bytes held now.
    pub fn usage(&self) -> StagingUsage {
        let state = self.lock();
        StagingUsage {
            sessions: state.sessions.len(),
            bytes: state
                .dbs
                .values()
                .map(|s| s.bytes.load(Ordering::Relaxed))
                .sum(),
        }
    }

    /// A starting worker's sweep: under `root` (to `SWEEP_DEPTH`
    /// directories deep, no symlink followed), every `staging/<session>`
    /// older than the adoption timeout goes. Younger ones may belong to an
    /// engine adopting them now and are left for it (an engine removes its
    /// own staging on open). Returns how many sessions it removed.
    pub fn sweep(&self, root: &Dir) -> usize {
        let timeout = self.limits().adopt_timeout;
        let mut removed = 0;
        let mut visited = 0;
        let mut stack: Vec<(Dir, usize)> = match root.open_dir(".") {
            Ok(dir) => vec![(dir, 0)],
            Err(_) => return 0,
        };
        while let Some((dir, depth)) = stack.pop() {
            visited += 1;
            if visited > SWEEP_DIRECTORIES {
                break;
            }
            let Ok(entries) = dir.entries() else {
                continue;
            };
            for name in entries {
                let Ok(sub) = dir.open_dir(&name) else {
                    continue;
                };
                if name == STAGING_DIR {
                    removed += sweep_staging(&sub, timeout);
                    let _ = dir.remove_dir(STAGING_DIR);
                } else if depth < SWEEP_DEPTH {
                    stack.push((sub, depth + 1));
                }
            }
        }
        removed
    }
}

/// Removes the sessions in one `staging` directory older than `timeout`.
fn sweep_staging(staging: &Dir, timeout: Duration) -> usize {
    let Ok(sessions) = staging.entries() else {
        return 0;
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let mut removed = 0;
    for session in sessions {
        let old = staging
            .open_dir(&session)
            .and_then(|dir| dir.id())
            .map_or(true, |id| now - id.mtime_ns > timeout.as_nanos() as i128);
        if old && staging.remove_tree(&session).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The worker's side of a job: its input tables (opened beneath the root
/// when the job was checked), its outputs in the session's directory,
/// numbered from 1.
#[derive(Debug)]
pub struct StagingIo {
    inputs: HashMap<u64, Arc<File>>,
    dir: Dir,
    next: AtomicU64,
    cancelled: AtomicBool,
    written: Arc<AtomicU64>,
    db_bytes: Arc<AtomicU64>,
    max_db_bytes: u64,
    tables: Arc<AtomicU64>,
    started: Instant,
}

impl StagingIo {
    /// Output bytes and tables so far.
    pub fn progress(&self) -> Progress {
        Progress {
            bytes_written: self.written.load(Ordering::Relaxed),
            tables: self.tables.load(Ordering::Relaxed),
            elapsed_secs: self.started.elapsed().as_secs_f64(),
        }
    }

    /// Output bytes so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Output tables so far.
    pub fn tables(&self) -> u64 {
        self.tables.load(Ordering::Relaxed)
    }

    /// Stops the job at its next write.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// A staged output file; counts what it writes against the quota.
struct StagedSink {
    file: BufWriter<File>,
    name: String,
    io: Arc<StagingIo>,
}

impl Write for StagedSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.io.is_cancelled() {
            // Not `Interrupted`: `write_all` retries that for ever.
            return Err(std::io::Error::other("the job was cancelled"));
        }
        let total = self
            .io
            .db_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        if total.saturating_add(buf.len() as u64) > self.io.max_db_bytes {
            self.io
                .db_bytes
                .fetch_sub(buf.len() as u64, Ordering::Relaxed);
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "the database's staging quota is full (--max_staged_bytes)",
            ));
        }
        let n = match self.file.write(buf) {
            Ok(n) => n,
            Err(e) => {
                self.io
                    .db_bytes
                    .fetch_sub(buf.len() as u64, Ordering::Relaxed);
                return Err(e);
            }
        };
        self.io
            .db_bytes
            .fetch_sub((buf.len() - n) as u64, Ordering::Relaxed);
        self.io.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl OutputSink for StagedSink {
    fn finish(self: Box<Self>) -> Result<()> {
        let name = self.name;
        let file = self
            .file
            .into_inner()
            .map_err(|e| Error::io(format!("writing staged {name}"), e.into_error()))?;
        file.sync_all()
            .map_err(|e| Error::io(format!("syncing staged {name}"), e))?;
        self.io.tables.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// An input table opened at admission, shared by every reader of the job.
#[derive(Debug)]
struct SharedInput(Arc<File>);

impl RandomAccess for SharedInput {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&*self.0, buf, offset)
    }
}

/// The `JobIo` of a staged job: an `Arc` so sinks can count into it.
#[derive(Debug, Clone)]
pub struct SessionIo(pub Arc<StagingIo>);

impl JobIo for SessionIo {
    fn open_input(&self, file: &JobFile) -> Result<Arc<dyn RandomAccess>> {
        let opened = self.0.inputs.get(&file.number).ok_or_else(|| {
            Error::InvalidArgument(format!("table {} is not an input of the job", file.number))
        })?;
        Ok(Arc::new(SharedInput(opened.clone())) as Arc<dyn RandomAccess>)
    }

    fn create_output(&self) -> Result<(u64, Box<dyn OutputSink>)> {
        if self.0.is_cancelled() {
            return Err(Error::executor_failed("worker", "the job was cancelled"));
        }
        let number = self.0.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("{number:06}.ldb");
        let file = self
            .0
            .dir
            .create_file(&name)
            .map_err(|e| Error::io(format!("creating staged {name}"), e))?;
        Ok((
            number,
            Box::new(StagedSink {
                file: BufWriter::with_capacity(1 << 20, file),
                name,
                io: self.0.clone(),
            }),
        ))
    }

    fn discard_output(&self, number: u64) -> Result<()> {
        let name = format!("{number:06}.ldb");
        self.0
            .dir
            .remove_file(&name)
            .map_err(|e| Error::io(format!("removing staged {name}"), e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn limits(sessions: usize, bytes: u64) -> StagingLimits {
        StagingLimits {
            adopt_timeout: Duration::from_millis(50),
            max_bytes_per_db: bytes,
            max_sessions_per_db: sessions,
        }
    }

    fn write_table(io: &Arc<StagingIo>, bytes: usize) -> Result<()> {
        let (_, mut sink) = SessionIo(io.clone()).create_output()?;
        sink.write_all(&vec![7u8; bytes])
            .map_err(|e| Error::io("write", e))?;
        sink.finish()
    }

    #[test]
    fn sessions_are_bounded_per_database_and_reaped_after_the_timeout() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("db")).unwrap();
        let db = Dir::open(&root.path().join("db")).unwrap();
        let staging = Staging::new(limits(2, 1000));
        let far = Instant::now() + Duration::from_secs(60);
        let a = staging
            .open(&db, "a", "one".into(), far, HashMap::new())
            .unwrap();
        write_table(&a, 600).unwrap();
        let b = staging
            .open(&db, "b", "two".into(), far, HashMap::new())
            .unwrap();
        // The quota counts both sessions' bytes.
        assert!(write_table(&b, 600).is_err());
        assert!(matches!(
            staging.open(&db, "c", "three".into(), far, HashMap::new()),
            Err(StagingRefusal::Quota(_))
        ));
        assert_eq!(staging.usage().sessions, 2);
        staging.remove("b");
        staging.finished("a");
        assert!(root.path().join("db/staging/a/000001.ldb").exists());
        assert!(staging.reap(Instant::now()).is_empty());
        let removed = staging.reap(Instant::now() + Duration::from_secs(1));
        assert_eq!(removed, vec![("a".to_string(), "one".to_string())]);
        assert!(!root.path().join("db/staging/a").exists());
        assert_eq!(staging.usage(), StagingUsage::default());
    }

    #[test]
    fn an_adopted_session_is_forgotten_and_a_late_job_is_cancelled() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("db")).unwrap();
        let db = Dir::open(&root.path().join("db")).unwrap();
        let staging = Staging::new(limits(4, 1 << 20));
        let io = staging
            .open(&db, "a", "x".into(), Instant::now(), HashMap::new())
            .unwrap();
        staging.reap(Instant::now());
        assert!(write_table(&io, 10).is_err(), "cancelled past its deadline");
        staging.finished("a");
        std::fs::remove_dir_all(root.path().join("db/staging/a")).unwrap();
        assert!(staging.reap(Instant::now()).is_empty());
        assert_eq!(staging.usage().sessions, 0);
    }

    #[test]
    fn a_drain_waits_for_recent_sessions_until_they_are_adopted() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("db")).unwrap();
        let db = Dir::open(&root.path().join("db")).unwrap();
        let staging = Staging::new(limits(4, 1 << 20));
        let far = Instant::now() + Duration::from_secs(60);
        for name in ["old", "recent", "running"] {
            staging
                .open(&db, name, "x".into(), far, HashMap::new())
                .unwrap();
        }
        staging.finished("old");
        std::thread::sleep(Duration::from_millis(20));
        let since = Instant::now();
        staging.finished("recent");
        // Neither the running session nor one finished before `since`.
        assert_eq!(staging.awaiting_adoption(since), 1);
        std::fs::remove_dir(root.path().join("db/staging/recent")).unwrap();
        assert_eq!(staging.awaiting_adoption(since), 0);
        assert_eq!(staging.usage().sessions, 2, "the adopted one is forgotten");
    }

    #[test]
    fn a_starting_worker_sweeps_old_sessions_only() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("a/db/staging/old")).unwrap();
        std::fs::write(root.path().join("a/db/staging/old/000001.ldb"), b"x").unwrap();
        std::thread::sleep(Duration::from_millis(80));
        std::fs::create_dir_all(root.path().join("a/db/staging/new")).unwrap();
        let staging = Staging::new(limits(4, 1 << 20));
        let dir = Dir::open(root.path()).unwrap();
        assert_eq!(staging.sweep(&dir), 1);
        assert!(!root.path().join("a/db/staging/old").exists());
        assert!(root.path().join("a/db/staging/new").exists());
    }
}
