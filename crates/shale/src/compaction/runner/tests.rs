//! The executor chain on a real database (in memory) with an executor
//! that fails: the job goes on to the next executor, the failed
//! attempt's files are deleted, the failure and the fallback are
//! counted; corrupt input and the last executor's failure are not
//! passed on.

use std::sync::Arc;

use shale_compact::job::{CompactionJob, CompactionOutput, Executor, JobIo};
use shale_compact::streaming::StreamingExecutor;
use shale_compact::ExecutorId;
use shale_compact::ExecutorKind::{self, OpenCl, Streaming};
use shale_format::{Error, Result};

use crate::compaction::host::JobHost;
use crate::compaction::picker;
use crate::compaction::service::{Outcome, Refusal};
use crate::env::{Env, MemEnv};
use crate::options::{Options, WriteOptions};
use crate::DB;

/// Writes one output file, then fails with `error`.
#[derive(Debug)]
struct Failing(Error);

impl Executor for Failing {
    fn name(&self) -> &'static str {
        OpenCl.name()
    }
    fn run(&self, _job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        let (_number, mut sink) = io.create_output()?;
        std::io::Write::write_all(&mut sink, b"half a table")
            .map_err(|e| Error::io("writing", e))?;
        Err(self.0.clone())
    }
}

fn database() -> (Arc<dyn Env>, DB) {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let options = Options {
        create_if_missing: true,
        env: env.clone(),
        l0_compaction_trigger: 100,
        l0_slowdown_writes_trigger: 100,
        l0_stop_writes_trigger: 100,
        ..Options::default()
    };
    let db = DB::open("/chain", options).unwrap();
    for round in 0..3 {
        for i in 0..200u32 {
            let key = format!("key{i:04}");
            db.put(
                &WriteOptions::default(),
                key.as_bytes(),
                format!("{round}").as_bytes(),
            )
            .unwrap();
        }
        db.flush().unwrap();
    }
    (env, db)
}

fn tables(env: &Arc<dyn Env>) -> Vec<String> {
    let mut names: Vec<String> = env
        .children(std::path::Path::new("/chain"))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".ldb"))
        .collect();
    names.sort();
    names
}

type Ended = std::result::Result<(String, Option<String>), Outcome>;

fn run(db: &DB, failure: Error) -> Ended {
    run_on(db, &[OpenCl, Streaming], failure, true)
}

/// Runs a level-0 job on `executors`, where `opencl` fails with
/// `failure`, `streaming` runs it, and nothing else is available (nor
/// anything at all unless `available`).
fn run_on(db: &DB, executors: &[ExecutorKind], failure: Error, available: bool) -> Ended {
    let inner = &db.inner;
    let version = inner.current_version().unwrap();
    let plan = picker::plan_for_range(&version, inner.options(), 0, None, None).unwrap();
    let job = plan.to_job(1, &version, u64::MAX, inner.options());
    drop(version);
    let failing: Arc<dyn Executor> = Arc::new(Failing(failure));
    let resolve = |id: ExecutorId| -> Option<Arc<dyn Executor>> {
        match id.kind() {
            _ if !available => None,
            Some(OpenCl) => Some(failing.clone()),
            Some(Streaming) => Some(Arc::new(StreamingExecutor)),
            _ => None,
        }
    };
    let ran = inner.compaction.run_chain(
        &**inner,
        &job,
        &super::placed(executors),
        &resolve,
        super::Caller::User,
    )?;
    ran.io.release(true);
    Ok((ran.output.executor, ran.output.fallback))
}

#[test]
fn a_failing_executor_hands_the_job_to_the_next() {
    let (env, db) = database();
    let before = tables(&env);
    let (executor, fallback) = run(
        &db,
        Error::executor_failed(OpenCl.name(), "the device fell off the bus"),
    )
    .unwrap();
    assert_eq!(executor, Streaming.name());
    let fallback = fallback.unwrap();
    assert!(fallback.contains("fell off the bus"), "{fallback}");
    // The failed attempt's file is gone; the streaming outputs were
    // released (deleted) by the test: the directory is as before.
    assert_eq!(tables(&env), before);
    let scheduler = db.scheduler_stats();
    let (_, record) = scheduler
        .executors
        .iter()
        .find(|(name, _)| name == OpenCl.name())
        .unwrap();
    assert_eq!(record.failures, 1);
}

/// Levels 1 and deeper hold files in key order that do not overlap.
fn assert_levels_disjoint(db: &DB) {
    let version = db.inner.current_version().unwrap();
    for level in 1..shale_format::version_edit::NUM_LEVELS {
        let mut files = version.files[level].clone();
        files.sort_by(|a, b| a.smallest.user_key().cmp(b.smallest.user_key()));
        for pair in files.windows(2) {
            assert!(
                pair[0].largest.user_key() < pair[1].smallest.user_key(),
                "L{level}: #{} [{:?}..{:?}] overlaps #{} [{:?}..{:?}]",
                pair[0].number,
                String::from_utf8_lossy(pair[0].smallest.user_key()),
                String::from_utf8_lossy(pair[0].largest.user_key()),
                pair[1].number,
                String::from_utf8_lossy(pair[1].smallest.user_key()),
                String::from_utf8_lossy(pair[1].largest.user_key()),
            );
        }
    }
}

/// Can a flush place its table (at L1 or L2,
/// where LevelDB's rule pushes a memtable that overlaps nothing) inside
/// the key gap that a running manual compaction's outputs will cover?
/// It cannot: the flush picks its level under the version-set lock
/// from a version that still holds every input of the running job, and
/// any key a job's outputs cover lies within some input file's range at
/// a level the flush checks. Driven here: manual compactions of ranges
/// with a gap while another thread flushes small memtables into that
/// gap, the levels checked all along.
#[test]
fn a_flush_never_lands_in_the_gap_a_running_manual_compaction_fills() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let options = Options {
        create_if_missing: true,
        env,
        write_buffer_size: 8 << 10,
        max_file_size: 4 << 10,
        block_size: 256,
        ..Options::default()
    };
    let db = DB::open("/gap", options).unwrap();
    let write = |prefix: &str, round: u32, n: u32| {
        for i in 0..n {
            let key = format!("{prefix}{i:05}");
            db.put(
                &WriteOptions::default(),
                key.as_bytes(),
                format!("{round}").as_bytes(),
            )
            .unwrap();
        }
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let checker = scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                assert_levels_disjoint(&db);
                std::thread::yield_now();
            }
        });
        for round in 0..20 {
            // Two clusters with a gap between them, compacted down.
            write("a", round, 300);
            write("z", round, 300);
            db.flush().unwrap();
            let db = &db;
            let flusher = scope.spawn(move || {
                for i in 0..10u32 {
                    let key = format!("m{round:03}{i:03}");
                    db.put(&WriteOptions::default(), key.as_bytes(), b"gap")
                        .unwrap();
                    db.flush().unwrap();
                }
            });
            db.compact_range(None, None).unwrap();
            flusher.join().unwrap();
            assert_levels_disjoint(db);
        }
        stop.store(true, Ordering::Relaxed);
        checker.join().unwrap();
    });
    db.wait_for_compactions().unwrap();
    assert_levels_disjoint(&db);
    for round in 0..20u32 {
        let key = format!("m{round:03}009");
        assert_eq!(
            db.get(&crate::options::ReadOptions::new(), key.as_bytes())
                .unwrap(),
            Some(b"gap".to_vec())
        );
    }
}

#[test]
fn corrupt_input_and_disk_errors_are_not_passed_on() {
    let (env, db) = database();
    let before = tables(&env);
    let corrupt = run(&db, Error::corruption(7, "bad block").at("000005.ldb", 0));
    assert!(
        matches!(corrupt, Err(Outcome::Failed(Error::Corruption { .. }))),
        "{corrupt:?}"
    );
    let disk = run(&db, Error::io("writing", std::io::Error::other("no space")));
    assert!(
        matches!(disk, Err(Outcome::Failed(Error::Io { .. }))),
        "{disk:?}"
    );
    assert_eq!(tables(&env), before, "failed attempts leave no file");
}

#[test]
fn the_last_executor_of_a_chain_fails_the_job_and_no_executor_refuses_it() {
    let (env, db) = database();
    let before = tables(&env);
    // The last of its chain: nothing to hand the job to.
    let last = run_on(
        &db,
        &[OpenCl],
        Error::executor_failed(OpenCl.name(), "no memory"),
        true,
    );
    assert!(
        matches!(&last, Err(Outcome::Failed(Error::ExecutorFailed { .. }))),
        "{last:?}"
    );
    // No executor of the chain exists here: refused, not failed.
    let none = run_on(
        &db,
        &[OpenCl, Streaming],
        Error::NotFound("x".into()),
        false,
    );
    match none {
        Err(Outcome::Refused(refusal)) => {
            assert!(refusal.to_string().contains("no executor"), "{refusal:?}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(tables(&env), before);
}

/// A job ends refused: its files are released and counted, no
/// background error is set, and writes go on.
#[test]
fn a_refused_job_is_released_without_stopping_the_database() {
    let (_env, db) = database();
    let inner = &db.inner;
    let version = inner.current_version().unwrap();
    let plan = picker::plan_for_range(&version, inner.options(), 0, None, None).unwrap();
    drop(version);
    let service = inner.compaction.service();
    let claim = service.manual_claim();
    let job = service
        .plan_manual(&|| inner.current_version(), &claim, |_| Some((plan, ())))
        .unwrap()
        .0
        .unwrap();
    let refusal = Refusal::new(OpenCl, "busy");
    let result = inner
        .compaction
        .finish_job(&**inner, &job, Outcome::Refused(refusal));
    assert!(matches!(result, Err(Error::Refused { .. })), "{result:?}");
    let scheduler = db.scheduler_stats();
    assert_eq!((scheduler.counts.refused, scheduler.counts.failed), (1, 0));
    db.put(&WriteOptions::default(), b"after", b"refusal")
        .unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.get(&Default::default(), b"after").unwrap().unwrap(),
        b"refusal"
    );
}
