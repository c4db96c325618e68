//! Crash test: a child process writes to a database with tiny memtables and
//! tables (so flushes and compactions run all the time) and is killed with
//! SIGKILL at random moments, round after round, on the same directory.
//! After every kill the database is reopened and must hold exactly every
//! write the child acknowledged, plus at most the one write it was doing
//! when it died (whole or not at all: batches are atomic), and nothing else.
//!
//! Half the rounds write with `sync`, half without: a process kill (unlike a
//! power loss) must not lose an acknowledged write even without `sync`,
//! because the write reached the operating system before it was
//! acknowledged.
//!
//! `shale::verify::verify_db` checks the files both as the kill left them
//! and after recovery.
//!
//! The child is this test binary itself, run with [`CHILD_DIR`] set and a
//! filter selecting [`crash_child`]. Kill moments come from a seeded
//! generator; the seed is printed, and `SHALE_CRASH_SEED` sets it
//! (`SHALE_CRASH_ROUNDS` sets the number of rounds).

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use shale::{Options, ReadOptions, WriteBatch, WriteOptions, DB};
use support::Model;

/// Set in the child: the database directory.
const CHILD_DIR: &str = "SHALE_CRASH_CHILD";
/// Set in the child: the round number (it decides the keys and values).
const CHILD_ROUND: &str = "SHALE_CRASH_ROUND";
/// Set in the child: `1` to write with `sync`.
const CHILD_SYNC: &str = "SHALE_CRASH_SYNC";

/// The child stops (and says `done`) after this many keys; the parent always
/// kills it long before.
const MAX_KEYS_PER_ROUND: u64 = 200_000;

const DEFAULT_ROUNDS: u64 = 30;

fn options() -> Options {
    Options {
        create_if_missing: true,
        paranoid_checks: true,
        write_buffer_size: 16 << 10,
        max_file_size: 16 << 10,
        block_size: 1024,
        l0_compaction_trigger: 2,
        l0_slowdown_writes_trigger: 4,
        l0_stop_writes_trigger: 8,
        max_bytes_for_level_base: 64 << 10,
        level_multiplier: 4.0,
        ..Options::default()
    }
}

/// SplitMix64 of `(round, n)`: the deterministic source of the workload,
/// shared by child and parent.
fn mix(round: u64, n: u64) -> u64 {
    let mut z = round
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(n)
        .wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A tiny seeded generator (xorshift64*) for the kill moments.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn round_key(round: u64, i: u64) -> Vec<u8> {
    format!("k{round}-{i:07}").into_bytes()
}

fn round_value(round: u64, i: u64) -> Vec<u8> {
    let len = 20 + (mix(round, i) % 400) as usize;
    let unit = format!("{round}.{i};");
    unit.repeat(len / unit.len() + 1).into_bytes()[..len].to_vec()
}

/// One write of the child: a batch putting keys `first..=last` of the round,
/// overwriting one of 17 "hot" keys, and (for every third op) deleting a key
/// of the previous round.
#[derive(Debug, Clone, Copy)]
struct Op {
    round: u64,
    first: u64,
    last: u64,
}

impl Op {
    /// The op that starts at key `first` of `round`.
    fn starting_at(round: u64, first: u64) -> Op {
        Op {
            round,
            first,
            last: first + mix(round, first) % 4,
        }
    }

    fn next(self) -> Op {
        Op::starting_at(self.round, self.last + 1)
    }

    fn changes(self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut changes: Vec<_> = (self.first..=self.last)
            .map(|i| (round_key(self.round, i), Some(round_value(self.round, i))))
            .collect();
        let hot = format!("hot-{:02}", self.first % 17).into_bytes();
        changes.push((
            hot,
            Some(format!("r{}-{}", self.round, self.first).into_bytes()),
        ));
        if self.round > 0 && self.first % 3 == 0 {
            changes.push((round_key(self.round - 1, self.first), None));
        }
        changes
    }

    fn batch(self) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for (key, value) in self.changes() {
            match value {
                Some(value) => batch.put(&key, &value).unwrap(),
                None => batch.delete(&key).unwrap(),
            }
        }
        batch
    }

    fn apply(self, model: &mut Model) {
        for (key, value) in self.changes() {
            match value {
                Some(value) => model.insert(key, value),
                None => model.remove(&key),
            };
        }
    }
}

/// Does nothing unless run as the child of
/// [`acknowledged_writes_survive_sigkill`]: then writes the round's ops until
/// killed, printing `ack <last key>` after each write returns.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let round: u64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let write = WriteOptions {
        sync: std::env::var(CHILD_SYNC).unwrap() == "1",
    };
    let db = DB::open(Path::new(&dir), options()).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "opened").unwrap();
    out.flush().unwrap();
    let mut op = Op::starting_at(round, 0);
    while op.last < MAX_KEYS_PER_ROUND {
        db.write(&write, op.batch()).unwrap();
        writeln!(out, "ack {}", op.last).unwrap();
        out.flush().unwrap();
        op = op.next();
    }
    writeln!(out, "done").unwrap();
    out.flush().unwrap();
}

/// When the parent kills the child.
#[derive(Debug, Clone, Copy)]
enum KillPlan {
    /// This long after starting it, acknowledged writes or not (often while
    /// it is still recovering).
    AfterDelay(Duration),
    /// Once it has acknowledged this many writes, and then this much later.
    AfterAcks(u64, Duration),
}

/// What the child said before it died.
#[derive(Debug, Default)]
struct ChildReport {
    opened: bool,
    acks: u64,
    /// The last key of the last acknowledged op.
    max_acked: Option<u64>,
}

impl ChildReport {
    fn take(&mut self, line: &str) {
        if line.contains("opened") {
            self.opened = true;
        }
        if let Some(n) = line.strip_prefix("ack ") {
            let n: u64 = n.trim().parse().unwrap();
            assert!(
                self.max_acked.is_none_or(|m| n > m),
                "acks out of order: {line}"
            );
            self.max_acked = Some(n);
            self.acks += 1;
        }
        assert!(
            !line.contains("done"),
            "the child ran out of work before it was killed"
        );
    }
}

fn spawn_child(dir: &Path, round: u64, sync: bool) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_ROUND, round.to_string())
        .env(CHILD_SYNC, if sync { "1" } else { "0" })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs one child under `plan`, kills it with SIGKILL, and returns what it
/// acknowledged (every line it printed before dying included).
fn run_and_kill(dir: &Path, round: u64, sync: bool, plan: KillPlan) -> ChildReport {
    let mut child = spawn_child(dir, round, sync);
    let stdout = child.stdout.take().unwrap();
    let (sender, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if sender.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let started = Instant::now();
    let mut report = ChildReport::default();
    // Wait for the kill moment, reading acks as they come.
    let kill_at = loop {
        let deadline = match plan {
            KillPlan::AfterDelay(delay) => Some(started + delay),
            KillPlan::AfterAcks(acks, delay) if report.acks >= acks => {
                break Instant::now() + delay
            }
            KillPlan::AfterAcks(..) => None,
        };
        let line = match deadline {
            Some(deadline) => {
                match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(line) => line,
                    Err(mpsc::RecvTimeoutError::Timeout) => break deadline,
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        panic!("the child exited on its own: {:?}", child.wait().unwrap())
                    }
                }
            }
            None => match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => line,
                Err(err) => panic!("no word from the child ({err:?}): {:?}", child.try_wait()),
            },
        };
        report.take(&line);
    };
    // Keep reading while the extra delay runs.
    while let Ok(line) = lines.recv_timeout(kill_at.saturating_duration_since(Instant::now())) {
        report.take(&line);
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    // An ack printed before the kill is an acknowledged write: read them all.
    for line in lines {
        report.take(&line);
    }
    reader.join().unwrap();
    assert!(
        !status.success(),
        "the child finished instead of being killed"
    );
    report
}

fn scan(db: &DB, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut iter = db.iter(&ReadOptions::new()).unwrap();
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

/// Reopens the database after round `round` and checks it holds `model`
/// plus every op the child acknowledged, plus possibly (whole) the op it was
/// doing, and nothing else. Updates `model` to what the database holds.
/// Returns whether the unacknowledged op was there.
fn verify_round(dir: &Path, round: u64, report: &ChildReport, model: &mut Model) -> bool {
    let db =
        DB::open(dir, options()).unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
    let (mut expected, op) = acknowledged(round, report, model);
    // The op in flight when the child died: there or not, never in part.
    let in_flight = db
        .get(&ReadOptions::new(), &round_key(round, op.first))
        .unwrap()
        .is_some();
    if in_flight {
        op.apply(&mut expected);
    }
    let want: Vec<_> = expected
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let got = scan(&db, false);
    if got != want {
        let missing: Vec<_> = expected
            .keys()
            .filter(|k| !got.iter().any(|(g, _)| g == *k))
            .take(5)
            .collect();
        let extra: Vec<_> = got
            .iter()
            .filter(|(k, _)| !expected.contains_key(k))
            .take(5)
            .collect();
        panic!(
            "round {round}: the database differs from the acknowledged writes \
             ({} entries, want {}); missing e.g. {missing:?}; unexpected e.g. {extra:?}",
            got.len(),
            want.len()
        );
    }
    assert_eq!(scan(&db, true), want, "round {round}: backward scan");
    for (key, value) in expected.iter().step_by(97) {
        assert_eq!(
            db.get(&ReadOptions::new(), key).unwrap().as_ref(),
            Some(value)
        );
    }
    for i in [op.last + 1, op.last + 2, op.last + 100] {
        assert_eq!(
            db.get(&ReadOptions::new(), &round_key(round, i)).unwrap(),
            None
        );
    }
    drop(db);
    *model = expected;
    in_flight
}

/// `model` with every op of round `round` the child acknowledged, and the
/// op it was doing when it died.
fn acknowledged(round: u64, report: &ChildReport, model: &Model) -> (Model, Op) {
    let mut expected = model.clone();
    let mut op = Op::starting_at(round, 0);
    if let Some(max_acked) = report.max_acked {
        while op.last <= max_acked {
            op.apply(&mut expected);
            op = op.next();
        }
        assert_eq!(op.first, max_acked + 1, "acks fall on op boundaries");
    }
    (expected, op)
}

/// LevelDB 1.23 opens a directory whose ShaleDB process was killed in the
/// middle of writes (its WAL memory-mapped, with a preallocated tail of
/// zeros) and finds every acknowledged write, with `sync` and without.
/// LevelDB's default options, as a user of LevelDB opens a database; its
/// recovery replays the WAL and keeps writing.
#[test]
fn leveldb_opens_a_directory_killed_mid_write() {
    if !leveldb_shim::require() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut preallocated = 0;
    for round in 0..6u64 {
        let dir = tmp.path().join(format!("db{round}"));
        let sync = round % 2 == 1;
        let acks = [300, 900, 40][round as usize % 3];
        let report = run_and_kill(
            &dir,
            round,
            sync,
            KillPlan::AfterAcks(acks, Duration::from_millis(2)),
        );
        assert!(report.acks >= acks, "round {round}: {report:?}");
        // The kill left the WAL as it was being written: preallocated
        // space, zeros past the last record.
        let wal = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "log"))
            .max()
            .unwrap();
        let bytes = std::fs::read(&wal).unwrap();
        if bytes.is_empty() {
            // Killed between a memtable switch creating the next WAL and
            // its first reservation: nothing was written to it yet.
            println!("round {round}: {} was just created (empty)", wal.display());
        } else {
            assert!(
                bytes.len() % (32 << 10) == 0 && bytes.last() == Some(&0),
                "round {round}: {} is {} bytes, not a preallocated WAL",
                wal.display(),
                bytes.len()
            );
            preallocated += 1;
        }
        let (mut expected, op) = acknowledged(round, &report, &Model::new());
        let leveldb = leveldb_shim::Db::open(&dir, &leveldb_shim::DbOptions::default())
            .unwrap_or_else(|e| panic!("round {round}: LevelDB cannot open it: {e}"));
        if leveldb.get(&round_key(round, op.first)).unwrap().is_some() {
            op.apply(&mut expected);
        }
        let got: Model = leveldb.scan_all().unwrap().into_iter().collect();
        assert_eq!(
            got.len(),
            expected.len(),
            "round {round}: LevelDB's entries against the acknowledged writes"
        );
        assert!(got == expected, "round {round}: LevelDB read other values");
        drop(leveldb);
        // And back: ShaleDB opens what LevelDB recovered and wrote.
        let db = DB::open(&dir, options()).unwrap();
        assert_eq!(scan(&db, false).len(), expected.len(), "round {round}");
        println!(
            "round {round}: sync={sync} acks={} entries={}: LevelDB read them all",
            report.acks,
            expected.len()
        );
    }
    assert!(
        preallocated > 0,
        "no round was killed with a preallocated WAL"
    );
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let seed = std::env::var("SHALE_CRASH_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        },
        |s| s.parse().unwrap(),
    );
    let rounds = std::env::var("SHALE_CRASH_ROUNDS").map_or(DEFAULT_ROUNDS, |s| s.parse().unwrap());
    println!("crash test seed {seed} (rerun with SHALE_CRASH_SEED={seed})");
    let mut rng = Rng(seed | 1);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut model = Model::new();
    let started = Instant::now();
    for round in 0..rounds {
        let sync = round % 2 == 1;
        let plan = match rng.below(10) {
            // Often while it is still opening: replaying the WAL into a
            // table, writing a new MANIFEST, switching CURRENT.
            0 => KillPlan::AfterDelay(Duration::from_micros(rng.below(40_000))),
            1 => KillPlan::AfterDelay(Duration::from_micros(rng.below(150_000))),
            _ => {
                let acks = rng.below(if sync { 400 } else { 1500 });
                KillPlan::AfterAcks(acks, Duration::from_micros(rng.below(5_000)))
            }
        };
        let round_started = Instant::now();
        let report = run_and_kill(&dir, round, sync, plan);
        // The files as the kill left them check out (a log record cut short
        // at the end is an unfinished write, not damage)...
        let checked = match shale::verify::verify_db(&dir, &options()) {
            Ok(report) => report.to_string(),
            // Killed while creating the database: there is none yet.
            Err(shale::Error::NotFound(_)) if round == 0 && !dir.join("CURRENT").exists() => {
                "no database yet".to_string()
            }
            Err(err) => panic!("round {round}: verify after the kill: {err}"),
        };
        let in_flight = verify_round(&dir, round, &report, &mut model);
        // ...and so do they after recovery.
        shale::verify::verify_db(&dir, &options())
            .unwrap_or_else(|e| panic!("round {round}: verify after recovery: {e}"));
        println!(
            "round {round:2}: sync={sync:<5} {plan:?}: opened={} acks={} max_acked={:?} \
             in-flight op present={in_flight}; {} keys; verify after kill: {checked}; {:.2} s",
            report.opened,
            report.acks,
            report.max_acked,
            model.len(),
            round_started.elapsed().as_secs_f64()
        );
    }
    println!(
        "{rounds} rounds in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
