//! `shale stress`: RocksDB's db_stress for ShaleDB. Several threads run
//! random puts, deletes, write batches, gets, bounded iterators, reads at
//! snapshots and `compact_range` over a key space small enough that they
//! collide, with options that keep flushes, the scheduler's concurrent
//! jobs, sub-compactions and cross-level jobs busy. Every read is checked
//! against an expected state kept in a file outside the database
//! (`expected_state.rs`), which also makes the run safe to kill at any
//! moment: the next run (or `--verify_only`) checks every key after
//! reopening. `scripts/crash-test` kills it over and over
//! (`docs/reliability.md`).

mod expected_state;
mod values;
mod verify;
mod worker;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;
use shale::{Options, DB};

use crate::commands::Target;
use crate::error::{CliError, CliResult};
use expected_state::{ExpectedState, Shape};
use values::ValueSizes;
use verify::{verify_all, VerifyReport};
use worker::{Counters, Shared, Worker};

/// Why a stress run failed.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// A key holds something its expected state does not allow.
    #[error("mismatch during {during}: key {key}: expected {expected}, found {found}")]
    Mismatch {
        key: String,
        expected: String,
        found: String,
        during: String,
    },
    /// A get and the two scans disagree on a key.
    #[error("inconsistent reads of key {key}: get {get}, forward scan {forward}, backward scan {backward}")]
    Inconsistent {
        key: String,
        get: String,
        forward: String,
        backward: String,
    },
    /// A key stress never writes.
    #[error("unexpected key in the database: {key}")]
    UnexpectedKey { key: String },
    /// An iterator went backwards (or forwards, going backward).
    #[error("iterator out of order: key {key} after {after}")]
    Order { key: String, after: String },
    #[error("expected state {}: {reason}", path.display())]
    ExpectedState { path: PathBuf, reason: String },
    #[error("expected state {}: {source}", path.display())]
    ExpectedStateIo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Db(#[from] shale::Error),
}

impl From<StressError> for CliError {
    fn from(error: StressError) -> CliError {
        CliError::Failed(error.to_string())
    }
}

/// Arguments of `shale stress`.
#[derive(Debug, Args)]
pub struct StressArgs {
    /// Seconds to run (default 10 unless --ops is given).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Operations to run (all threads together).
    #[arg(long, value_name = "N")]
    ops: Option<u64>,
    /// Run until killed (for scripts/crash-test).
    #[arg(long = "until_killed")]
    until_killed: bool,
    /// Threads running operations.
    #[arg(long, value_name = "N", default_value_t = 4)]
    threads: usize,
    /// Keys are indexes 0..N (default 10000; a new expected state only).
    #[arg(long = "max_key", value_name = "N")]
    max_key: Option<u32>,
    /// Shortest value, at least 8 bytes (default 8; a new expected state only).
    #[arg(long = "value_size_min", value_name = "BYTES")]
    value_size_min: Option<u32>,
    /// Longest value (default 100; a new expected state only).
    #[arg(long = "value_size_max", value_name = "BYTES")]
    value_size_max: Option<u32>,
    /// Sync the WAL on every write.
    #[arg(long, conflicts_with = "sync_one_in")]
    sync: bool,
    /// Sync one write in N (drawn at random), the others not: for power
    /// loss, which may drop an acknowledged write until a synced one
    /// covers it. Such a write stays pending in the expected-state file
    /// (either value passes after a crash) until its thread's next synced
    /// write is acknowledged, or another thread, about to write the same
    /// key, makes it durable with a synced empty write first.
    #[arg(long = "sync_one_in", value_name = "N")]
    sync_one_in: Option<u64>,
    /// Seed of the operation mix (default: from the clock; printed).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// The expected-state file (default: DIR/stress-expected-state).
    #[arg(long = "expected_state", value_name = "FILE")]
    expected_state: Option<PathBuf>,
    /// Open the database, verify every key against the expected state
    /// (either value for a write a kill cut short), and exit.
    #[arg(long = "verify_only")]
    verify_only: bool,
    /// Close, reopen and verify the database this many times during the
    /// run (the run is split into that many + 1 equal phases).
    #[arg(long, value_name = "N", default_value_t = 0)]
    reopen: u32,
    /// One operation in N is a compact_range over a random key range
    /// (0: never).
    #[arg(
        long = "compact_range_one_in",
        value_name = "N",
        default_value_t = 1000
    )]
    compact_range_one_in: u64,
    #[command(flatten)]
    target: Target,
}

/// Default expected-state file name inside the database directory (the
/// engine ignores files whose names it does not own).
const EXPECTED_STATE_NAME: &str = "stress-expected-state";

/// The options of a stress run: the flags given, and where a flag is left
/// out, sizes tiny enough that flushes, compactions at every level,
/// sub-compactions and cross-level jobs happen within seconds, with
/// several compaction threads at once.
fn stress_options(target: &Target) -> CliResult<Options> {
    let mut flags = target.flags.clone();
    flags.write_buffer_size.get_or_insert(64 << 10);
    flags.max_file_size.get_or_insert(32 << 10);
    flags.block_size.get_or_insert(1024);
    flags.l0_compaction_trigger.get_or_insert(2);
    flags.max_bytes_for_level_base.get_or_insert(128 << 10);
    flags.level_multiplier.get_or_insert(4.0);
    flags.max_background_compactions.get_or_insert(3);
    flags.max_subcompactions.get_or_insert(4);
    flags.compaction_threads.get_or_insert(2);
    // Damage is an error here, never skipped, unless the caller says
    // otherwise: after a power loss that tore the unsynced tail of the
    // newest log, `--paranoid_checks=false` verifies recovery as LevelDB's
    // default does it (the torn records skipped).
    flags.paranoid_checks.get_or_insert(true);
    flags.to_options().map_err(CliError::Usage)
}

/// Runs the stress test, or with `--verify_only` only verifies.
pub fn run(args: &StressArgs) -> CliResult {
    if args.threads == 0 {
        return Err(CliError::Usage("--threads must be at least 1".into()));
    }
    let sizes = match (args.value_size_min, args.value_size_max) {
        (None, None) => None,
        (min, max) => {
            let min = min.unwrap_or(expected_state::DEFAULT_SIZES.min);
            let max = max.unwrap_or(expected_state::DEFAULT_SIZES.max.max(min));
            if (min as usize) < values::VALUE_HEADER || max < min {
                return Err(CliError::Usage(format!(
                    "value sizes must satisfy {} <= --value_size_min <= --value_size_max (got {min}, {max})",
                    values::VALUE_HEADER
                )));
            }
            Some(ValueSizes { min, max })
        }
    };
    if args.max_key == Some(0) {
        return Err(CliError::Usage("--max_key must be at least 1".into()));
    }
    if let Some(seconds) = args.duration {
        if !(seconds >= 0.0 && seconds.is_finite()) {
            return Err(CliError::Usage(format!(
                "--duration={seconds} is not a number of seconds"
            )));
        }
    }
    let mut options = stress_options(&args.target)?;
    let path = args
        .expected_state
        .clone()
        .unwrap_or_else(|| args.target.db.join(EXPECTED_STATE_NAME));
    let shape = Shape {
        max_key: args.max_key,
        sizes,
    };

    if args.verify_only {
        let expected = ExpectedState::open(&path, shape, false)?;
        options.create_if_missing = false;
        let db = args.target.open(options)?;
        let report = verify_all(&db, &expected, false)?;
        println!("{report}");
        return Ok(());
    }

    std::fs::create_dir_all(&args.target.db)
        .map_err(|e| CliError::Failed(format!("creating {}: {e}", args.target.db.display())))?;
    let expected = ExpectedState::open(&path, shape, true)?;
    options.create_if_missing = true;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let duration = match (args.until_killed, args.duration, args.ops) {
        (true, _, _) => None,
        (false, Some(seconds), _) => Some(Duration::from_secs_f64(seconds)),
        (false, None, Some(_)) => None,
        (false, None, None) => Some(Duration::from_secs(10)),
    };
    let ops = if args.until_killed { None } else { args.ops };
    println!(
        "stress: seed {seed}, {} threads, {} keys, values {}-{} bytes, executor {}, sync {}, expected state {}",
        args.threads,
        expected.max_key(),
        expected.sizes().min,
        expected.sizes().max,
        options.compaction_executor,
        args.sync,
        path.display()
    );

    let started = Instant::now();
    let counters = Counters::default();
    let mut engine = EngineActivity::default();
    let phases = args.reopen + 1;
    let mut last = VerifyReport::default();
    for phase in 0..phases {
        let db = DB::open(&args.target.db, options.clone())?;
        // Settles the writes a kill cut short, and checks every key.
        let report = verify_all(&db, &expected, true)?;
        if phase == 0 {
            println!("start {report}");
        }
        let shared = Shared {
            db: &db,
            expected: &expected,
            sync: args.sync,
            sync_one_in: args.sync_one_in.unwrap_or(0),
            compact_range_one_in: args.compact_range_one_in,
            deadline: duration.map(|d| Instant::now() + d / phases),
            ops_left: AtomicU64::new(ops.map_or(u64::MAX, |n| n / u64::from(phases))),
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            counters: Counters::default(),
        };
        let phase_seed = values::mix(seed ^ u64::from(phase));
        std::thread::scope(|scope| {
            for thread in 0..args.threads {
                let shared = &shared;
                scope.spawn(move || Worker::new(shared, phase_seed, thread as u64).run());
            }
        });
        let failure = shared
            .failure
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        add_counters(&counters, &shared.counters);
        if let Some(error) = failure {
            print_counters(&counters, started.elapsed());
            return Err(error.into());
        }
        db.wait_for_compactions()?;
        last = verify_all(&db, &expected, true)?;
        engine.add(&db);
    }
    print_counters(&counters, started.elapsed());
    println!("{engine}");
    println!("end {last}");
    Ok(())
}

/// What the engine's background work did, summed over the phases: the
/// run is only worth as much as the flushes and compactions it raced.
#[derive(Debug, Default)]
struct EngineActivity {
    counts: shale::compaction::scheduler::SchedulerCounts,
    fallbacks: u64,
    /// Jobs per executor name, in name order.
    executors: std::collections::BTreeMap<String, u64>,
    /// How the writes were written.
    writes: shale::stats::Writes,
}

impl EngineActivity {
    fn add(&mut self, db: &DB) {
        let stats = db.scheduler_stats();
        self.counts.add(&stats.counts);
        self.fallbacks += stats.fallbacks;
        for (name, jobs, _) in db.executor_stats() {
            *self.executors.entry(name).or_default() += jobs;
        }
        let writes = db.statistics().writes;
        self.writes.direct += writes.direct;
        self.writes.leads_taken += writes.leads_taken;
        self.writes.direct_closed_by_sleep += writes.direct_closed_by_sleep;
    }
}

impl std::fmt::Display for EngineActivity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "compactions: {}; {} fallbacks; jobs by executor:",
            self.counts, self.fallbacks
        )?;
        if self.executors.is_empty() {
            write!(f, " none")?;
        }
        for (name, jobs) in &self.executors {
            write!(f, " {name} {jobs}")?;
        }
        write!(
            f,
            "\nwrites: {} direct, {} leads taken from sleeping writers, direct writes closed {} times by a writer that slept",
            self.writes.direct, self.writes.leads_taken, self.writes.direct_closed_by_sleep
        )
    }
}

fn add_counters(total: &Counters, phase: &Counters) {
    let pairs = [
        (&total.puts, &phase.puts),
        (&total.deletes, &phase.deletes),
        (&total.batches, &phase.batches),
        (&total.batch_writes, &phase.batch_writes),
        (&total.gets, &phase.gets),
        (&total.iterators, &phase.iterators),
        (&total.iterator_entries, &phase.iterator_entries),
        (&total.snapshots, &phase.snapshots),
        (&total.snapshot_reads, &phase.snapshot_reads),
        (&total.compact_ranges, &phase.compact_ranges),
        (&total.reads_verified, &phase.reads_verified),
    ];
    for (sum, part) in pairs {
        sum.fetch_add(part.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

fn print_counters(counters: &Counters, elapsed: Duration) {
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    println!(
        "ops: {} in {:.1} s (puts {}, deletes {}, batches {} writing {} keys, gets {}, \
         iterators {} over {} entries, snapshots {} checked over {} keys, compact_range {})",
        counters.ops(),
        elapsed.as_secs_f64(),
        n(&counters.puts),
        n(&counters.deletes),
        n(&counters.batches),
        n(&counters.batch_writes),
        n(&counters.gets),
        n(&counters.iterators),
        n(&counters.iterator_entries),
        n(&counters.snapshots),
        n(&counters.snapshot_reads),
        n(&counters.compact_ranges),
    );
    println!("reads verified: {}", n(&counters.reads_verified));
}
