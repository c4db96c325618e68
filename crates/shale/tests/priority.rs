//! Compaction threads at a lower CPU priority (`Options::compaction_nice`).
//! A file of its own: it looks at every thread of the test process, and the
//! databases of other tests must not be running then.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::Arc;

use shale::env::{Env, MemEnv};
use shale::{Options, WriteOptions, DB};

/// A database in memory with the compaction threads `nice` levels down.
fn niced(env: &Arc<dyn Env>, nice: u8) -> Options {
    Options {
        create_if_missing: true,
        env: env.clone(),
        write_buffer_size: 64 << 10,
        compaction_executor: "parallel".into(),
        compaction_threads: 2,
        compaction_nice: nice,
        ..Options::default()
    }
}

/// Nice value of each of this process's threads whose name starts with
/// `prefix` (field 19 of `/proc/self/task/TID/stat`).
fn thread_nice_values(prefix: &str) -> Vec<(String, i64)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        let name = name.trim_end().to_string();
        if !name.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
        // Fields after the parenthesised name: state is field 3, nice 19.
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let nice = after_name.split(' ').nth(16).unwrap().parse().unwrap();
        found.push((name, nice));
    }
    found
}

/// [`thread_nice_values`] of `prefix` once at least one such thread shows
/// and every one of them is at `nice`, or after 10 seconds as they are
/// then. A thread sets its name and then its nice level itself when it
/// starts: one spawned by `DB::open` that has not run yet (a loaded
/// machine; a database with nothing to compact) still has neither.
fn settled_nice_values(prefix: &str, nice: i64) -> Vec<(String, i64)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found = thread_nice_values(prefix);
        let settled = !found.is_empty() && found.iter().all(|(_, n)| *n == nice);
        if settled || std::time::Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn compaction_threads_run_at_the_nice_level_asked_for() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open("/db", niced(&env, 7)).unwrap();
    // Rayon starts its workers lazily; a compaction makes sure they ran.
    for i in 0..2000u32 {
        db.put(
            &WriteOptions::default(),
            format!("{i:06}").as_bytes(),
            &[7; 100],
        )
        .unwrap();
    }
    db.compact_range(None, None).unwrap();
    // SAFETY: getpriority takes no pointers; `who` 0 is this thread.
    let base = i64::from(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) });
    let compact = settled_nice_values("shale-compact", (base + 7).min(19));
    let workers = settled_nice_values("shale-parallel", (base + 7).min(19));
    let flush = settled_nice_values("shale-flush", base);
    assert!(!compact.is_empty() && !workers.is_empty() && !flush.is_empty());
    for (name, nice) in compact.iter().chain(&workers) {
        assert_eq!(*nice, (base + 7).min(19), "{name}");
    }
    for (name, nice) in &flush {
        assert_eq!(
            *nice, base,
            "{name} waits for no one but writers wait for it"
        );
    }
    assert!(DB::open("/other", niced(&env, 20))
        .is_err_and(|e| e.to_string().contains("compaction_nice")));

    // By default compaction runs at the lowest priority (nice 19, as
    // RocksDB's `CpuPriority::kLow`); the flush thread still does not.
    drop(db); // joins its threads
    let defaults = Options {
        compaction_executor: "streaming".into(),
        ..niced(&env, Options::default().compaction_nice)
    };
    assert_eq!(defaults.compaction_nice, 19);
    let db = DB::open("/defaults", defaults).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    db.compact_range(None, None).unwrap();
    let compact = settled_nice_values("shale-compact", 19);
    assert!(!compact.is_empty());
    for (name, nice) in &compact {
        assert_eq!(*nice, 19, "{name}");
    }
    for (name, nice) in &settled_nice_values("shale-flush", base) {
        assert_eq!(*nice, base, "{name}");
    }
}
