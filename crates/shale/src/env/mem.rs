//! [`MemEnv`]: a file system held in memory, for fast tests.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

use super::{lock, read_lock, write_lock, Env, FileLock, WritableFile};

/// The bytes of one file, shared by every handle open on it.
type FileData = Arc<RwLock<Vec<u8>>>;

/// Files and directories in memory. Clones share the same file system.
///
/// Directories are implicit: a file can be created in any directory, and a
/// directory exists when it was created or holds a file. Writes go straight
/// to the shared bytes (nothing is buffered) and `sync` does nothing, so
/// everything is always "durable"; wrap it in a
/// [`FaultInjectionEnv`](super::FaultInjectionEnv) to test durability.
#[derive(Debug, Default, Clone)]
pub struct MemEnv {
    fs: Arc<Mutex<MemFs>>,
    locks: Arc<Mutex<HashSet<PathBuf>>>,
}

#[derive(Debug, Default)]
struct MemFs {
    files: HashMap<PathBuf, FileData>,
    dirs: HashSet<PathBuf>,
}

impl MemFs {
    fn file(&self, path: &Path) -> Result<FileData> {
        self.files.get(path).cloned().ok_or_else(|| not_found(path))
    }

    /// True when `dir` was created or holds a file or directory.
    fn dir_exists(&self, dir: &Path) -> bool {
        self.dirs.contains(dir) || self.entries_under(dir).next().is_some()
    }

    /// Files and directories strictly below `dir`.
    fn entries_under<'a>(&'a self, dir: &'a Path) -> impl Iterator<Item = &'a PathBuf> + 'a {
        self.files
            .keys()
            .chain(self.dirs.iter())
            .filter(move |path| path.as_path() != dir && path.starts_with(dir))
    }
}

fn not_found(path: &Path) -> Error {
    Error::NotFound(path.display().to_string())
}

impl MemEnv {
    /// An empty file system.
    pub fn new() -> MemEnv {
        MemEnv::default()
    }

    fn writer(data: FileData) -> Box<dyn WritableFile> {
        Box::new(MemWritableFile { data })
    }
}

struct MemWritableFile {
    data: FileData,
}

impl Write for MemWritableFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_lock(&self.data).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl WritableFile for MemWritableFile {
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Reads from the shared bytes, so it sees appends made after it opened.
struct MemSequentialFile {
    data: FileData,
    position: usize,
}

impl Read for MemSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let data = read_lock(&self.data);
        let rest = data.get(self.position..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.position += n;
        Ok(n)
    }
}

struct MemRandomAccessFile {
    data: FileData,
}

impl RandomAccess for MemRandomAccessFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        read_lock(&self.data).read_exact_at(buf, offset)
    }
}

#[derive(Debug)]
struct MemFileLock {
    locks: Arc<Mutex<HashSet<PathBuf>>>,
    path: PathBuf,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        lock(&self.locks).remove(&self.path);
    }
}

impl Env for MemEnv {
    fn new_writable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        // A new buffer rather than a truncated one, so readers that opened
        // the old file keep seeing it, as an unlinked file stays readable.
        let data = FileData::default();
        lock(&self.fs)
            .files
            .insert(path.to_path_buf(), Arc::clone(&data));
        Ok(MemEnv::writer(data))
    }

    fn new_appendable_file(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let data = Arc::clone(lock(&self.fs).files.entry(path.to_path_buf()).or_default());
        Ok(MemEnv::writer(data))
    }

    fn new_sequential_file(&self, path: &Path) -> Result<Box<dyn Read + Send>> {
        let data = lock(&self.fs).file(path)?;
        Ok(Box::new(MemSequentialFile { data, position: 0 }))
    }

    fn new_random_access_file(&self, path: &Path) -> Result<Arc<dyn RandomAccess>> {
        let data = lock(&self.fs).file(path)?;
        Ok(Arc::new(MemRandomAccessFile { data }))
    }

    fn file_exists(&self, path: &Path) -> bool {
        let fs = lock(&self.fs);
        fs.files.contains_key(path) || fs.dir_exists(path)
    }

    fn children(&self, dir: &Path) -> Result<Vec<String>> {
        let fs = lock(&self.fs);
        if !fs.dir_exists(dir) {
            return Err(not_found(dir));
        }
        let names: BTreeSet<String> = fs
            .entries_under(dir)
            .filter_map(|path| path.strip_prefix(dir).ok()?.iter().next())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        Ok(names.into_iter().collect())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        match lock(&self.fs).files.remove(path) {
            Some(_) => Ok(()),
            None => Err(not_found(path)),
        }
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut fs = lock(&self.fs);
        for ancestor in dir.ancestors() {
            if !ancestor.as_os_str().is_empty() {
                fs.dirs.insert(ancestor.to_path_buf());
            }
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        let mut fs = lock(&self.fs);
        if !fs.dir_exists(dir) {
            return Err(not_found(dir));
        }
        if fs.entries_under(dir).next().is_some() {
            return Err(Error::io(
                format!("removing directory {}", dir.display()),
                std::io::ErrorKind::DirectoryNotEmpty.into(),
            ));
        }
        fs.dirs.remove(dir);
        Ok(())
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let data = lock(&self.fs).file(path)?;
        let len = read_lock(&data).len();
        Ok(len as u64)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut fs = lock(&self.fs);
        let data = fs.files.remove(from).ok_or_else(|| not_found(from))?;
        fs.files.insert(to.to_path_buf(), data);
        Ok(())
    }

    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut locks = lock(&self.locks);
        if locks.contains(path) {
            return Err(Error::Busy(format!(
                "{} is locked by another handle",
                path.display()
            )));
        }
        // Like the real LOCK file, the file exists while (and after) it is held.
        lock(&self.fs).files.entry(path.to_path_buf()).or_default();
        locks.insert(path.to_path_buf());
        Ok(Box::new(MemFileLock {
            locks: Arc::clone(&self.locks),
            path: path.to_path_buf(),
        }))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        if lock(&self.fs).dir_exists(dir) {
            Ok(())
        } else {
            Err(not_found(dir))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_see_appends_and_keep_replaced_contents() {
        let env = MemEnv::new();
        let path = Path::new("/d/f");
        let mut writer = env.new_writable_file(path).unwrap();
        writer.write_all(b"one").unwrap();
        let mut reader = env.new_sequential_file(path).unwrap();
        let random = env.new_random_access_file(path).unwrap();
        writer.write_all(b"two").unwrap();
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"onetwo");

        env.new_writable_file(path)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        let mut buf = [0u8; 6];
        random.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"onetwo");
        assert_eq!(env.file_size(path).unwrap(), 1);
    }

    #[test]
    fn directories_are_implicit() {
        let env = MemEnv::new();
        env.new_writable_file(Path::new("/a/b/c/f")).unwrap();
        assert!(env.file_exists(Path::new("/a/b")));
        assert_eq!(env.children(Path::new("/a")).unwrap(), ["b"]);
        assert_eq!(env.children(Path::new("/a/b/c")).unwrap(), ["f"]);
        assert!(env.remove_dir(Path::new("/a/b/c")).is_err());
        env.sync_dir(Path::new("/a/b/c")).unwrap();
    }

    #[test]
    fn clones_share_files_and_locks() {
        let env = MemEnv::new();
        let other = env.clone();
        env.new_writable_file(Path::new("/x")).unwrap();
        assert!(other.file_exists(Path::new("/x")));
        let _held = env.lock_file(Path::new("/LOCK")).unwrap();
        assert!(matches!(
            other.lock_file(Path::new("/LOCK")),
            Err(Error::Busy(_))
        ));
        let separate = MemEnv::new();
        assert!(separate.lock_file(Path::new("/LOCK")).is_ok());
    }
}
