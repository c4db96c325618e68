//! Model-based test: random operation sequences against a `BTreeMap`, with
//! tiny buffers and files so that flushes, compactions at several levels,
//! reopens and snapshots all happen within a few hundred operations.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::sync::Arc;

use proptest::prelude::*;
use shale::env::{Env, MemEnv};
use shale::{Options, ReadOptions, Snapshot, WriteBatch, WriteOptions, DB};
use support::Model;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    TakeSnapshot,
    ReleaseSnapshot(usize),
    CheckSnapshot(usize),
    Get(Vec<u8>),
    Scan {
        from: Option<Vec<u8>>,
        to: Option<Vec<u8>>,
        reverse: bool,
    },
    Reopen,
    CompactRange(Option<Vec<u8>>, Option<Vec<u8>>),
    Flush,
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0u32..300).prop_map(|n| format!("key{n:05}").into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40),
        (0usize..3000).prop_map(|n| vec![b'v'; n]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        10 => key().prop_map(Op::Delete),
        8 => proptest::collection::vec((key(), proptest::option::of(value())), 1..20).prop_map(Op::Batch),
        3 => Just(Op::TakeSnapshot),
        2 => (0usize..8).prop_map(Op::ReleaseSnapshot),
        4 => (0usize..8).prop_map(Op::CheckSnapshot),
        10 => key().prop_map(Op::Get),
        4 => (proptest::option::of(key()), proptest::option::of(key()), any::<bool>())
            .prop_map(|(from, to, reverse)| Op::Scan { from, to, reverse }),
        1 => Just(Op::Reopen),
        1 => (proptest::option::of(key()), proptest::option::of(key())).prop_map(|(a, b)| Op::CompactRange(a, b)),
        2 => Just(Op::Flush),
    ]
}

/// Compaction threads and executor a run uses.
#[derive(Debug, Clone, Copy)]
struct Scheduling {
    threads: usize,
    executor: &'static str,
}

const DEFAULT_SCHEDULING: Scheduling = Scheduling {
    threads: 0,
    executor: "auto",
};

fn scheduling() -> impl Strategy<Value = Scheduling> {
    (
        proptest::sample::select(vec![1usize, 2, 4]),
        proptest::sample::select(vec!["streaming", "parallel", "auto"]),
    )
        .prop_map(|(threads, executor)| Scheduling { threads, executor })
}

fn options(env: &Arc<dyn Env>) -> Options {
    options_with(env, DEFAULT_SCHEDULING)
}

/// Tiny files and levels, so that L0->L1 jobs are several output files
/// long (they run as sub-compactions) and levels overflow together (jobs
/// go cross-level).
fn options_with(env: &Arc<dyn Env>, scheduling: Scheduling) -> Options {
    Options {
        max_background_compactions: scheduling.threads,
        compaction_executor: scheduling.executor.parse().unwrap(),
        max_subcompactions: 4,
        write_buffer_size: 8 << 10,
        max_file_size: 8 << 10,
        block_size: 256,
        max_bytes_for_level_base: 32 << 10,
        l0_compaction_trigger: 2,
        l0_slowdown_writes_trigger: 4,
        l0_stop_writes_trigger: 6,
        block_cache_size: 64 << 10,
        ..support::options(env)
    }
}

fn scan(
    db: &DB,
    snapshot: Option<&Snapshot>,
    from: Option<&[u8]>,
    to: Option<&[u8]>,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let read = ReadOptions {
        snapshot: snapshot.cloned(),
        lower_bound: from.map(<[u8]>::to_vec),
        upper_bound: to.map(<[u8]>::to_vec),
        ..ReadOptions::new()
    };
    let mut iter = db.iter(&read).unwrap();
    let mut out = Vec::new();
    if reverse {
        iter.seek_to_last();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.prev();
        }
        out.reverse();
    } else {
        iter.seek_to_first();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next();
        }
    }
    iter.status().unwrap();
    out
}

fn model_range(model: &Model, from: Option<&[u8]>, to: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| {
            from.is_none_or(|f| k.as_slice() >= f) && to.is_none_or(|t| k.as_slice() < t)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn run(ops: Vec<Op>, scheduling: Scheduling) {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let options = |env: &Arc<dyn Env>| options_with(env, scheduling);
    let path = std::path::Path::new("/model-db");
    let mut db = Some(DB::open(path, options(&env)).unwrap());
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let write = WriteOptions::default();
    for op in ops {
        let handle = db.as_ref().unwrap();
        match op {
            Op::Put(k, v) => {
                handle.put(&write, &k, &v).unwrap();
                model.insert(k, v);
            }
            Op::Delete(k) => {
                handle.delete(&write, &k).unwrap();
                model.remove(&k);
            }
            Op::Batch(ops) => {
                let mut batch = WriteBatch::new();
                for (k, v) in &ops {
                    match v {
                        Some(v) => batch.put(k, v).unwrap(),
                        None => batch.delete(k).unwrap(),
                    }
                }
                handle.write(&write, batch).unwrap();
                for (k, v) in ops {
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
            Op::TakeSnapshot => snapshots.push((handle.snapshot(), model.clone())),
            Op::ReleaseSnapshot(i) => {
                if !snapshots.is_empty() {
                    let i = i % snapshots.len();
                    snapshots.remove(i);
                }
            }
            Op::CheckSnapshot(i) => {
                if !snapshots.is_empty() {
                    let (snapshot, old) = &snapshots[i % snapshots.len()];
                    assert_eq!(
                        scan(handle, Some(snapshot), None, None, false),
                        model_range(old, None, None)
                    );
                    for k in old.keys().take(5) {
                        let read = ReadOptions {
                            snapshot: Some(snapshot.clone()),
                            ..ReadOptions::new()
                        };
                        assert_eq!(handle.get(&read, k).unwrap().as_ref(), old.get(k));
                    }
                }
            }
            Op::Get(k) => assert_eq!(
                handle.get(&ReadOptions::new(), &k).unwrap().as_ref(),
                model.get(&k),
                "get {k:?}"
            ),
            Op::Scan { from, to, reverse } => {
                assert_eq!(
                    scan(handle, None, from.as_deref(), to.as_deref(), reverse),
                    model_range(&model, from.as_deref(), to.as_deref())
                );
            }
            Op::Reopen => {
                snapshots.clear();
                // Close before reopening: the LOCK is released on drop.
                drop(db.take());
                db = Some(DB::open(path, options(&env)).unwrap());
            }
            Op::CompactRange(a, b) => handle.compact_range(a.as_deref(), b.as_deref()).unwrap(),
            Op::Flush => handle.flush().unwrap(),
        }
    }
    let handle = db.as_ref().unwrap();
    assert_eq!(
        scan(handle, None, None, None, false),
        model_range(&model, None, None)
    );
    handle.compact_range(None, None).unwrap();
    assert_eq!(
        scan(handle, None, None, None, true),
        model_range(&model, None, None)
    );
    drop(snapshots);
    drop(db);
    let db = DB::open(path, options(&env)).unwrap();
    assert_eq!(
        scan(&db, None, None, None, false),
        model_range(&model, None, None)
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_match_the_model(
        ops in proptest::collection::vec(op(), 1..400),
        scheduling in scheduling(),
    ) {
        run(ops, scheduling);
    }
}

#[test]
fn many_writes_reach_deep_levels() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let path = std::path::Path::new("/deep-db");
    let db = DB::open(path, options(&env)).unwrap();
    let mut model = Model::new();
    for i in 0..20_000u32 {
        let k = format!("k{:08}", (i * 7919) % 10_000).into_bytes();
        let v = format!("value-{i}").repeat(3).into_bytes();
        db.put(&WriteOptions::default(), &k, &v).unwrap();
        model.insert(k, v);
    }
    db.wait_for_compactions().unwrap();
    let deepest = (0..7)
        .rev()
        .find(|l| {
            db.property(&format!("shale.num-files-at-level{l}"))
                .unwrap()
                != "0"
        })
        .unwrap();
    assert!(deepest >= 2, "{}", db.property("shale.stats").unwrap());
    assert_eq!(
        scan(&db, None, None, None, false),
        model_range(&model, None, None)
    );
    drop(db);
    let db = DB::open(path, options(&env)).unwrap();
    for (k, v) in model.iter().step_by(97) {
        assert_eq!(db.get(&ReadOptions::new(), k).unwrap().as_ref(), Some(v));
    }
}
