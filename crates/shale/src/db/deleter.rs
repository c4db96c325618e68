//! Obsolete files deleted off the thread that made them obsolete.
//!
//! Unlinking a table is not free: ext4 frees its extents and, mounted with
//! `discard`, trims them, and the call waits on the journal. An 8 MiB table
//! took 1.9-2.8 ms of wall time and about 0.4 ms of CPU on a virtual disk;
//! one 200M-pair fill deleted 55,000 of them, about 90 s its compaction
//! threads spent waiting in `unlink` instead of merging. So a compaction
//! or a flush hands the files its install made obsolete to this deleter and
//! goes on (RocksDB purges in the background the same way); a large batch,
//! as a full compaction leaves, is shared by a few threads. Nothing waits
//! for a deletion except what promises that the files are gone: an open,
//! a close, [`DB::flush`](crate::DB::flush),
//! [`DB::wait_for_compactions`](crate::DB::wait_for_compactions) and
//! [`DB::compact_range`](crate::DB::compact_range) ([`Deleter::wait`]).
//!
//! An obsolete file can never become live again (numbers are not reused),
//! so when it goes does not matter for correctness; a file still queued at
//! a crash is deleted by the next open, as any obsolete file is.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::env::Env;
use crate::filename::FileType;
use crate::info_log::InfoLog;

/// A file to delete: its name in the database directory, number and kind.
pub(super) type ObsoleteFile = (String, u64, FileType);

/// Files one deleting thread takes at a time; a thread more is started
/// for each such batch waiting, up to the cores or [`MAX_THREADS`]. Unlinks
/// on ext4 wait mostly on the journal, and several in flight overlap: 40
/// unlinks of 2 MiB tables took 58-60 ms on one thread and 34-37 ms on
/// four. More threads than cores did not pay: the 74 inputs of a full
/// compaction took 38 ms on two threads of a 2-core machine and 37 ms on
/// eight (the journal serialises them).
const BATCH: usize = 8;
const MAX_THREADS: usize = 4;

/// Deletes files on threads started when there is work and ended when
/// there is none: a database that compacts nothing keeps no thread for it.
pub(super) struct Deleter {
    shared: Arc<Shared>,
    max_threads: usize,
}

struct Shared {
    env: Arc<dyn Env>,
    dir: PathBuf,
    info_log: InfoLog,
    queue: Mutex<Queue>,
    /// Signalled when a batch of deletions is done.
    progress: Condvar,
}

#[derive(Default)]
struct Queue {
    /// Waiting files, each with its place in the order of submission.
    files: VecDeque<(u64, ObsoleteFile)>,
    /// Names queued or being deleted: a listing of the directory finds
    /// them until they are gone, and each is deleted once.
    names: HashSet<String>,
    /// Files queued since the start: the next file's place.
    submitted: u64,
    /// The place of the first file of each batch being deleted (a batch's
    /// places follow one another).
    in_flight: BTreeSet<u64>,
    /// Deleting threads that run.
    threads: usize,
}

impl Deleter {
    pub(super) fn new(env: Arc<dyn Env>, dir: PathBuf, info_log: InfoLog) -> Deleter {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Deleter {
            shared: Arc::new(Shared {
                env,
                dir,
                info_log,
                queue: Mutex::new(Queue::default()),
                progress: Condvar::new(),
            }),
            max_threads: cores.clamp(1, MAX_THREADS),
        }
    }

    /// Queues `files` for deletion; those already queued are left out.
    /// Deletes them on the calling thread when no thread can be started.
    pub(super) fn submit(&self, files: Vec<ObsoleteFile>) {
        let mut queue = self.shared.lock();
        for file in files {
            if queue.names.insert(file.0.clone()) {
                let place = queue.submitted;
                queue.files.push_back((place, file));
                queue.submitted += 1;
            }
        }
        while queue.threads < self.max_threads && queue.files.len() > BATCH * queue.threads {
            queue.threads += 1;
            let shared = self.shared.clone();
            let started = std::thread::Builder::new()
                .name("shale-delete".into())
                .spawn(move || shared.drain());
            if started.is_err() {
                queue.threads -= 1;
                if queue.threads == 0 {
                    // Nothing else would delete them.
                    queue.threads = 1;
                    drop(queue);
                    self.shared.drain();
                }
                return;
            }
        }
    }

    /// Whether `name` waits for deletion (or is being deleted).
    #[cfg(test)]
    pub(super) fn is_queued(&self, name: &str) -> bool {
        self.shared.lock().names.contains(name)
    }

    /// Waits until every file submitted so far is deleted; files submitted
    /// meanwhile do not draw the wait out.
    pub(super) fn wait(&self) {
        let mut queue = self.shared.lock();
        let target = queue.submitted;
        while queue.oldest().is_some_and(|place| place < target) {
            queue = self
                .shared
                .progress
                .wait(queue)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Queue {
    /// The place of the earliest file not yet deleted.
    fn oldest(&self) -> Option<u64> {
        let queued = self.files.front().map(|&(place, _)| place);
        let deleting = self.in_flight.first().copied();
        match (queued, deleting) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deletes a batch at a time until the queue is empty, then ends.
    /// Waiters are woken after each batch.
    fn drain(&self) {
        loop {
            let (first, files) = {
                let mut queue = self.lock();
                let Some(&(first, _)) = queue.files.front() else {
                    queue.threads -= 1;
                    return;
                };
                let take = queue.files.len().min(BATCH);
                let files: Vec<ObsoleteFile> =
                    queue.files.drain(..take).map(|(_, file)| file).collect();
                queue.in_flight.insert(first);
                (first, files)
            };
            for (name, number, kind) in &files {
                // A file that cannot be deleted stays obsolete; the next
                // cleanup or open tries again. A panic in the env is caught
                // too: the batch must still be marked done, or a close
                // would wait for it for ever.
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    crate::shale_log!(self.info_log, "Delete type={kind:?} #{number}");
                    self.env.remove_file(&self.dir.join(name))
                }));
            }
            let mut queue = self.lock();
            for (name, _, _) in &files {
                queue.names.remove(name);
            }
            queue.in_flight.remove(&first);
            self.progress.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{FileLock, PosixEnv, WritableFile};
    use shale_format::format::RandomAccess;
    use shale_format::Result;
    use std::path::Path;

    /// The real file system, except that removing a file panics.
    #[derive(Debug)]
    struct PanickingRemove(PosixEnv);

    impl Env for PanickingRemove {
        fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            self.0.new_writable_file(path)
        }
        fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            self.0.new_appendable_file(path)
        }
        fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn std::io::Read + Send>> {
            self.0.new_sequential_file(path)
        }
        fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccess>> {
            self.0.new_random_access_file(path)
        }
        fn file_exists(&self, path: &Path) -> bool {
            self.0.file_exists(path)
        }
        fn children(&self, dir: &Path) -> Result<Vec<String>> {
            self.0.children(dir)
        }
        fn remove_file(&self, path: &Path) -> Result<()> {
            panic!("removing {}", path.display())
        }
        fn create_dir_all(&self, dir: &Path) -> Result<()> {
            self.0.create_dir_all(dir)
        }
        fn remove_dir(&self, dir: &Path) -> Result<()> {
            self.0.remove_dir(dir)
        }
        fn file_size(&self, path: &Path) -> Result<u64> {
            self.0.file_size(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            self.0.rename(from, to)
        }
        fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
            self.0.lock_file(path)
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            self.0.sync_dir(dir)
        }
    }

    #[test]
    fn a_panic_while_deleting_ends_neither_the_wait_nor_later_deletions() {
        let dir = tempfile::tempdir().unwrap();
        let deleter = Deleter::new(
            Arc::new(PanickingRemove(PosixEnv::new())),
            dir.path().to_path_buf(),
            InfoLog::from_writer(Box::new(std::io::sink())),
        );
        let files: Vec<ObsoleteFile> = (0..20)
            .map(|n| (format!("{n:06}.ldb"), n, FileType::Table))
            .collect();
        deleter.submit(files.clone());
        // Returns: every batch is marked done although each unlink panicked.
        deleter.wait();
        assert!(!deleter.is_queued("000003.ldb"));
        // The threads ended cleanly, so the same names can be queued again.
        deleter.submit(files);
        deleter.wait();
    }

    #[test]
    fn submitted_files_are_gone_after_wait_and_each_is_deleted_once() {
        let dir = tempfile::tempdir().unwrap();
        let env: Arc<dyn Env> = Arc::new(PosixEnv::new());
        let deleter = Deleter::new(
            env,
            dir.path().to_path_buf(),
            InfoLog::from_writer(Box::new(std::io::sink())),
        );
        // Enough for several deleting threads at once (BATCH files each).
        let names: Vec<String> = (0..100).map(|n| format!("{n:06}.ldb")).collect();
        for name in &names {
            std::fs::write(dir.path().join(name), b"table").unwrap();
        }
        let files = |range: std::ops::Range<usize>| -> Vec<ObsoleteFile> {
            names[range]
                .iter()
                .enumerate()
                .map(|(n, name)| (name.clone(), n as u64, FileType::Table))
                .collect()
        };
        // Overlapping submissions, as two cleanups listing the same
        // directory make them.
        deleter.submit(files(0..60));
        deleter.submit(files(40..100));
        deleter.wait();
        assert!(!deleter.is_queued(&names[25]));
        for name in &names {
            assert!(!dir.path().join(name).exists(), "{name} is still there");
        }
        // A later submission starts a thread again.
        std::fs::write(dir.path().join("000099.ldb"), b"table").unwrap();
        deleter.submit(vec![("000099.ldb".into(), 99, FileType::Table)]);
        deleter.wait();
        assert!(!dir.path().join("000099.ldb").exists());
    }
}
