//! The fault-injecting env on its own: power loss, injected failures.

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

#[test]
fn a_full_disk_fails_writes_with_enospc_after_a_short_write() {
    let env = mem_fault_env();
    let dir = Path::new("/db");
    let path = dir.join("000007.log");
    let mut file = env.new_writable_file(&path).unwrap();
    env.set_free_space(Some(5));
    let err = file.write_all(b"abcdefgh").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
    assert_eq!(contents(&env, &path), b"abcde", "what fitted was stored");
    // Files can still be made, renamed and removed; syncs work.
    let other = dir.join("000008.ldb");
    let mut empty = env.new_writable_file(&other).unwrap();
    empty.sync().unwrap();
    assert!(empty.write_all(b"x").is_err());
    env.remove_file(&other).unwrap();
    env.set_no_space(false);
    file.write_all(b"fgh").unwrap();
    assert_eq!(contents(&env, &path), b"abcdefgh");
}

#[test]
fn a_full_disk_can_be_limited_to_one_kind_of_file() {
    let env = mem_fault_env();
    let dir = Path::new("/db");
    env.set_no_space_only_for(Some("MANIFEST"));
    env.set_no_space(true);
    write_file(&env, &dir.join("000005.ldb"), b"table", true).unwrap();
    let err = write_file(&env, &dir.join("MANIFEST-000002"), b"edit", true).unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert!(!env.file_exists(&dir.join("MANIFEST-000002")));
    env.clear_failures();
    write_file(&env, &dir.join("MANIFEST-000002"), b"edit", true).unwrap();
}
