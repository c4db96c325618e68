//! Compaction threads at a lower CPU priority (`Options::compaction_nice`).
//! A file of its own: it looks at every thread of the test process, and the
//! databases of other tests must not be running then.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::{Arc, Mutex};

use shale::env::{Env, MemEnv};
use shale::{Options, WriteOptions, DB};
use shale_compact::job::{CompactionJob, CompactionOutput, Executor, JobIo};
use shale_compact::streaming::StreamingExecutor;
use shale_format::Result;

/// A database in memory with the compaction threads `nice` levels down.
fn niced(env: &Arc<dyn Env>, nice: u8) -> Options {
    Options {
        create_if_missing: true,
        env: env.clone(),
        write_buffer_size: 64 << 10,
        compaction_executor: "parallel".parse().unwrap(),
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

/// The tests of this file one at a time: each looks at every thread.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// This thread's nice value.
fn own_nice() -> i64 {
    // SAFETY: getpriority takes no pointers; `who` 0 is this thread.
    i64::from(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) })
}

/// Runs jobs as `streaming` does, noting the nice value of the thread
/// each ran on.
#[derive(Debug, Default)]
struct NotesItsPriority {
    /// Per job: whether its thread is one of the engine's, and its nice.
    seen: Mutex<Vec<(bool, i64)>>,
}

impl Executor for NotesItsPriority {
    fn name(&self) -> &'static str {
        "notes-its-priority"
    }
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        let engines = std::thread::current()
            .name()
            .is_some_and(|name| name.starts_with("shale-"));
        self.seen.lock().unwrap().push((engines, own_nice()));
        StreamingExecutor.run(job, io)
    }
}

#[test]
fn compaction_threads_run_at_the_nice_level_asked_for() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
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
    let base = own_nice();
    let lowered = (base + 7).min(19);
    let compact = settled_nice_values("shale-compact", lowered);
    let workers = settled_nice_values("shale-parallel", lowered);
    let flush = settled_nice_values("shale-flush", base);
    assert!(!compact.is_empty() && !workers.is_empty() && !flush.is_empty());
    for (name, nice) in compact.iter().chain(&workers) {
        assert_eq!(*nice, lowered, "{name}");
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
        compaction_executor: "streaming".parse().unwrap(),
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

#[test]
fn a_background_job_runs_lowered_and_a_manual_one_at_its_callers_priority() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for executor in ["parallel", "opencl"] {
        background_and_manual_jobs(executor);
    }
}

/// A database compacting with `executor` and a custom executor that
/// takes every job: its background jobs run lowered, its manual ones at
/// the caller's priority. With a device (`opencl`, PoCL in CI) the
/// compaction threads themselves keep normal priority (they drive it) and
/// run a job's CPU work on a lowered worker; the executor's host threads
/// are lowered.
fn background_and_manual_jobs(compaction_executor: &str) {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let executor = Arc::new(NotesItsPriority::default());
    let db = DB::open(
        "/noted",
        Options {
            custom_executor: Some(executor.clone()),
            compaction_executor: compaction_executor.parse().unwrap(),
            ..niced(&env, 7)
        },
    )
    .unwrap();
    // Flushes enough for background compactions of level 0, with keys in
    // no order, so that the flushed files overlap (no trivial moves).
    for i in 0..20_000u32 {
        db.put(
            &WriteOptions::default(),
            format!("{:06}", i * 7919 % 20_000).as_bytes(),
            &[5; 100],
        )
        .unwrap();
    }
    db.wait_for_compactions().unwrap();
    let base = own_nice();
    let lowered = (base + 7).min(19);
    let background = std::mem::take(&mut *executor.seen.lock().unwrap());
    assert!(!background.is_empty(), "no background compaction ran");
    for (engines, nice) in &background {
        assert!(engines, "a background job on a thread not the engine's");
        assert_eq!(*nice, lowered, "a background job's thread");
    }
    let compact = settled_nice_values(
        "shale-compact",
        if compaction_executor == "opencl" {
            base
        } else {
            lowered
        },
    );
    assert!(!compact.is_empty());
    for (name, nice) in &compact {
        if compaction_executor == "opencl" {
            assert_eq!(*nice, base, "{name} drives the device");
        } else {
            assert_eq!(*nice, lowered, "{name}");
        }
    }
    if compaction_executor == "opencl" {
        let host_pool = settled_nice_values("shale-opencl", lowered);
        assert!(!host_pool.is_empty());
        for (name, nice) in host_pool
            .iter()
            .chain(&settled_nice_values("shale-job", lowered))
        {
            assert_eq!(*nice, lowered, "{name}");
        }
    }
    // A manual compaction runs on the calling thread, at its priority
    // (the background jobs its installs may start run lowered, as above).
    db.compact_range(None, None).unwrap();
    let seen = std::mem::take(&mut *executor.seen.lock().unwrap());
    let manual: Vec<i64> = seen.iter().filter(|(e, _)| !e).map(|(_, n)| *n).collect();
    assert!(!manual.is_empty(), "the manual compaction ran no job");
    assert!(manual.iter().all(|&nice| nice == base), "{manual:?}");
    for (_, nice) in seen.iter().filter(|(e, _)| *e) {
        assert_eq!(*nice, lowered, "a background job's thread");
    }
}
