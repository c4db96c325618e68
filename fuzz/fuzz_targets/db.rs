//! Fuzzes the whole engine through its API against a model: arbitrary
//! sequences of puts, deletes, batches (with and without `sync`), gets,
//! bounded iterators in both directions, snapshots, flushes, range
//! compactions, clean reopens and power losses, on an in-memory env with
//! tiny memtables and tables so that flushes and compactions run all the
//! time.
//!
//! The model is a `BTreeMap` per acknowledged write. A clean reopen keeps
//! everything. A power loss (the fault-injecting env stops the disk, drops
//! what was not synced, and the database reopens) must leave exactly the
//! state after some acknowledged write at or after the last synced one:
//! LevelDB's promise, since the WAL is written in order. Every read is
//! checked against the model; any difference, error or panic is a bug.
#![no_main]

use std::collections::BTreeMap;
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use shale::env::{Env, FaultInjectionEnv, MemEnv};
use shale::{Options, ReadOptions, Snapshot, WriteBatch, WriteOptions, DB};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Arbitrary)]
enum Op {
    Put { key: u8, value: u8, sync: bool },
    Delete { key: u8, sync: bool },
    Batch { ops: Vec<(bool, u8, u8)>, sync: bool },
    Get { key: u8 },
    Scan { lower: Option<u8>, upper: Option<u8>, backward: bool },
    TakeSnapshot,
    ReadSnapshot { which: u8, key: u8 },
    ReleaseSnapshot { which: u8 },
    Flush,
    CompactRange { begin: Option<u8>, end: Option<u8> },
    Reopen,
    PowerLoss,
}

fn key(k: u8) -> Vec<u8> {
    // A small key space, so that writes collide; keys of varied lengths.
    format!("k{:0width$}", k % 64, width = 1 + (k as usize % 3)).into_bytes()
}

fn value(v: u8, counter: u64) -> Vec<u8> {
    let mut out = format!("v{counter}-").into_bytes();
    out.resize(out.len() + (v as usize % 5) * 40, b'a' + v % 26);
    out
}

fn options(env: &Arc<dyn Env>) -> Options {
    Options {
        create_if_missing: true,
        env: env.clone(),
        write_buffer_size: 4 << 10,
        max_file_size: 2 << 10,
        block_size: 256,
        max_bytes_for_level_base: 16 << 10,
        l0_compaction_trigger: 2,
        compaction_executor: "streaming".parse().unwrap(),
        paranoid_checks: true,
        ..Options::default()
    }
}

const DIR: &str = "/fuzz-db";

fn contents(db: &DB, read: &ReadOptions) -> State {
    let mut iter = db.iter(read).expect("iterator");
    let mut out = State::new();
    iter.seek_to_first();
    while iter.valid() {
        out.insert(iter.key().to_vec(), iter.value().to_vec());
        iter.next();
    }
    iter.status().expect("iteration");
    out
}

struct Harness {
    fault: FaultInjectionEnv,
    env: Arc<dyn Env>,
    db: Option<DB>,
    model: State,
    /// States after each acknowledged write since the last synced one
    /// (the first is the synced state): what a power loss may leave.
    since_sync: Vec<State>,
    snapshots: Vec<(Snapshot, State)>,
    counter: u64,
}

impl Harness {
    fn new() -> Harness {
        let fault = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
        let env: Arc<dyn Env> = Arc::new(fault.clone());
        let db = DB::open(DIR, options(&env)).expect("open");
        Harness {
            fault,
            env,
            db: Some(db),
            model: State::new(),
            since_sync: vec![State::new()],
            snapshots: Vec::new(),
            counter: 0,
        }
    }

    fn db(&self) -> &DB {
        self.db.as_ref().expect("open database")
    }

    fn write(&mut self, batch: WriteBatch, changes: Vec<(Vec<u8>, Option<Vec<u8>>)>, sync: bool) {
        self.db().write(&WriteOptions { sync }, batch).expect("write");
        for (k, v) in changes {
            match v {
                Some(v) => self.model.insert(k, v),
                None => self.model.remove(&k),
            };
        }
        if sync {
            self.since_sync.clear();
        }
        self.since_sync.push(self.model.clone());
    }

    fn apply(&mut self, op: Op) {
        self.counter += 1;
        let counter = self.counter;
        match op {
            Op::Put { key: k, value: v, sync } => {
                let (k, v) = (key(k), value(v, counter));
                let mut batch = WriteBatch::new();
                batch.put(&k, &v).expect("put");
                self.write(batch, vec![(k, Some(v))], sync);
            }
            Op::Delete { key: k, sync } => {
                let k = key(k);
                let mut batch = WriteBatch::new();
                batch.delete(&k).expect("delete");
                self.write(batch, vec![(k, None)], sync);
            }
            Op::Batch { ops, sync } => {
                let mut batch = WriteBatch::new();
                let mut changes = Vec::new();
                for (is_put, k, v) in ops.into_iter().take(32) {
                    let k = key(k);
                    if is_put {
                        let v = value(v, counter);
                        batch.put(&k, &v).expect("put");
                        changes.push((k, Some(v)));
                    } else {
                        batch.delete(&k).expect("delete");
                        changes.push((k, None));
                    }
                }
                self.write(batch, changes, sync);
            }
            Op::Get { key: k } => {
                let k = key(k);
                let got = self.db().get(&ReadOptions::new(), &k).expect("get");
                assert_eq!(got.as_ref(), self.model.get(&k), "get {k:?}");
            }
            Op::Scan { lower, upper, backward } => {
                let (lower, upper) = (lower.map(key), upper.map(key));
                let read = ReadOptions {
                    lower_bound: lower.clone(),
                    upper_bound: upper.clone(),
                    ..ReadOptions::new()
                };
                let mut expected: Vec<(Vec<u8>, Vec<u8>)> = self
                    .model
                    .iter()
                    .filter(|(k, _)| lower.as_ref().is_none_or(|l| *k >= l))
                    .filter(|(k, _)| upper.as_ref().is_none_or(|u| *k < u))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut iter = self.db().iter(&read).expect("iterator");
                let mut got = Vec::new();
                if backward {
                    expected.reverse();
                    iter.seek_to_last();
                    while iter.valid() {
                        got.push((iter.key().to_vec(), iter.value().to_vec()));
                        iter.prev();
                    }
                } else {
                    iter.seek_to_first();
                    while iter.valid() {
                        got.push((iter.key().to_vec(), iter.value().to_vec()));
                        iter.next();
                    }
                }
                iter.status().expect("iteration");
                assert_eq!(got, expected, "scan {lower:?}..{upper:?} backward={backward}");
            }
            Op::TakeSnapshot => {
                if self.snapshots.len() < 4 {
                    let snapshot = self.db().snapshot();
                    self.snapshots.push((snapshot, self.model.clone()));
                }
            }
            Op::ReadSnapshot { which, key: k } => {
                if self.snapshots.is_empty() {
                    return;
                }
                let (snapshot, state) = &self.snapshots[which as usize % self.snapshots.len()];
                let read = ReadOptions {
                    snapshot: Some(snapshot.clone()),
                    ..ReadOptions::new()
                };
                let k = key(k);
                let got = self.db().get(&read, &k).expect("get at a snapshot");
                assert_eq!(got.as_ref(), state.get(&k), "get {k:?} at a snapshot");
                assert_eq!(&contents(self.db(), &read), state, "scan at a snapshot");
            }
            Op::ReleaseSnapshot { which } => {
                if !self.snapshots.is_empty() {
                    let at = which as usize % self.snapshots.len();
                    self.snapshots.remove(at);
                }
            }
            Op::Flush => self.db().flush().expect("flush"),
            Op::CompactRange { begin, end } => {
                let (begin, end) = (begin.map(key), end.map(key));
                self.db()
                    .compact_range(begin.as_deref(), end.as_deref())
                    .expect("compact_range");
            }
            Op::Reopen => {
                self.snapshots.clear();
                self.db = None;
                self.db = Some(DB::open(DIR, options(&self.env)).expect("reopen"));
                assert_eq!(contents(self.db(), &ReadOptions::new()), self.model, "after reopen");
            }
            Op::PowerLoss => {
                self.snapshots.clear();
                self.fault.set_filesystem_active(false);
                self.db = None;
                self.fault.drop_unsynced_data().expect("dropping unsynced data");
                self.fault.set_filesystem_active(true);
                let db = DB::open(DIR, options(&self.env)).expect("reopen after power loss");
                let recovered = contents(&db, &ReadOptions::new());
                let Some(at) = self.since_sync.iter().position(|state| *state == recovered) else {
                    panic!(
                        "after a power loss the database holds {} keys, which is no state \
                         between the last synced write and the last write ({} candidates)",
                        recovered.len(),
                        self.since_sync.len()
                    );
                };
                // What survived is now the synced state.
                self.model = recovered;
                self.since_sync = vec![self.since_sync[at].clone()];
                self.db = Some(db);
            }
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut harness = Harness::new();
    for op in ops.into_iter().take(200) {
        harness.apply(op);
    }
    // Everything written is read back, then once more after a clean reopen.
    assert_eq!(contents(harness.db(), &ReadOptions::new()), harness.model, "at the end");
    harness.apply(Op::Reopen);
});
