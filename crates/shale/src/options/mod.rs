//! Options for opening a database, writing and reading. Defaults are
//! LevelDB 1.23's, except a 10-bit Bloom filter (LevelDB has none by default).
//!
//! A leaf of the engine: it imports only the formats, the executors'
//! crate, the env and snapshots, never the database or the compaction
//! modules (which import it), so the crate has no import circle. Each
//! executor's own settings are one field, in a file of its own:
//! [`OpenClSettings`] (`opencl_settings.rs`) and [`RemoteSettings`]
//! (`remote_settings.rs`); what `compaction_executor` names is an
//! [`ExecutorChoice`] (`executor_choice.rs`).

use std::sync::Arc;

use shale_compact::job::TableSettings;
use shale_compact::ExecutorKind;
use shale_format::bloom::{FilterPolicy, InternalFilterPolicy};
use shale_format::comparator::{Comparator, KeyOrder};
use shale_format::options::TableOptions;

use crate::env::{Env, PosixEnv};
use crate::snapshot::Snapshot;

mod executor_choice;
mod opencl_settings;
mod remote_settings;

pub use executor_choice::ExecutorChoice;
pub use opencl_settings::OpenClSettings;
pub use remote_settings::{RemoteSettings, RemoteToken};

/// How the file to compact is chosen within a level (ProckStore's second
/// priority, beside LevelDB's rule).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PickStyle {
    /// The file with the fewest overlapping files in the next level
    /// (ProckStore's equation 2); ties go in rotation order. It rewrites
    /// less of the next level per byte moved down than LevelDB's rotation
    /// (`docs/results/scheduler.md`, "Choices measured for the defaults").
    MinOverlap,
    /// The file whose overlapping bytes in the next level are the fewest
    /// per byte of its own (RocksDB's `kMinOverlappingRatio`): the job that
    /// rewrites the least of the next level for what it moves down. Ties go
    /// in rotation order. The default: counting bytes rather than files
    /// wrote less again (`docs/results/compaction-tax.md`, "Picking by
    /// overlapping bytes").
    #[default]
    MinOverlapRatio,
    /// LevelDB's rotating compact pointer: the first file after the last
    /// compacted key.
    RoundRobin,
}

impl PickStyle {
    /// The style's name in options.
    pub fn name(self) -> &'static str {
        match self {
            PickStyle::MinOverlap => "min-overlap",
            PickStyle::MinOverlapRatio => "min-overlap-ratio",
            PickStyle::RoundRobin => "round-robin",
        }
    }
}

impl std::str::FromStr for PickStyle {
    type Err = String;

    fn from_str(s: &str) -> Result<PickStyle, String> {
        match s {
            "min-overlap" => Ok(PickStyle::MinOverlap),
            "min-overlap-ratio" => Ok(PickStyle::MinOverlapRatio),
            "round-robin" => Ok(PickStyle::RoundRobin),
            other => Err(format!(
                "unknown compaction_pick {other:?} (min-overlap, min-overlap-ratio or round-robin)"
            )),
        }
    }
}

/// How a database is opened and run.
///
/// Start from [`Options::default`] (LevelDB 1.23's defaults, plus a 10-bit
/// Bloom filter) and change the fields you need with struct update syntax.
/// [`Options::validate`] (also run by [`DB::open`](crate::db::DB::open)) says
/// what is wrong with a combination that cannot work.
///
/// ```
/// use shale::{ExecutorKind, Options, DB};
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options {
///     create_if_missing: true,
///     // A larger memtable: fewer, larger level-0 tables.
///     write_buffer_size: 16 << 20,
///     // Snappy-compress blocks (kept when it saves at least 1/8).
///     snappy: true,
///     // Compactions on the CPU executor that merges one stream at a time.
///     compaction_executor: ExecutorKind::Streaming.into(),
///     ..Options::default()
/// };
/// assert!(options.validate().is_ok());
/// let db = DB::open(dir.path(), options)?;
/// # drop(db);
/// # Ok::<(), shale::Error>(())
/// ```
///
/// Tests can keep a whole database in memory with [`MemEnv`](crate::env::MemEnv):
///
/// ```
/// use std::sync::Arc;
/// use shale::env::MemEnv;
/// use shale::{Options, ReadOptions, WriteOptions, DB};
/// let options = Options {
///     create_if_missing: true,
///     env: Arc::new(MemEnv::new()),
///     ..Options::default()
/// };
/// let db = DB::open("/in-memory", options)?;
/// db.put(&WriteOptions::default(), b"k", b"v")?;
/// assert_eq!(db.get(&ReadOptions::new(), b"k")?, Some(b"v".to_vec()));
/// # Ok::<(), shale::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Create the database when it does not exist.
    pub create_if_missing: bool,
    /// Fail when the database already exists.
    pub error_if_exists: bool,
    /// Treat any sign of corruption (a damaged WAL record, a bad block found
    /// while compacting) as an error instead of skipping what is damaged.
    pub paranoid_checks: bool,
    /// The order of user keys (LevelDB's `Options::comparator`); `None`:
    /// bytewise, LevelDB's default. Its name is recorded in the MANIFEST
    /// when the database is created, and a database opens only with a
    /// comparator of the same name. A custom order compacts on the
    /// `streaming` executor only: the data-parallel, device and remote
    /// executors compare key bytes (`compaction_executor` must be `auto`
    /// or `streaming`), and jobs are not split into sub-compactions.
    pub comparator: Option<Arc<dyn Comparator>>,
    /// File system access.
    pub env: Arc<dyn Env>,
    /// Bytes of writes buffered in the memtable before it is flushed to L0.
    pub write_buffer_size: usize,
    /// Most table files kept open at once (the table cache holds ten
    /// fewer, as LevelDB's). An open table is a read-only mapping whose
    /// descriptor is closed at once, so this bounds mappings and memory,
    /// not descriptors: each costs its index block (about 6 KiB stored for
    /// an 8 MiB table of 32 KiB blocks) and the page-table entries of the
    /// pages read.
    ///
    /// The default, 10,000, where LevelDB's is 1,000 for want of
    /// descriptors: a database of more tables than the cache holds
    /// reopens a table for most point reads, and after a fill of 50M
    /// 128-byte pairs (653 tables) readrandom took 39 µs with 240 kept
    /// open and 11 µs with all of them
    /// (`docs/results/compaction-tax.md`, "Tables kept open").
    pub max_open_files: usize,
    /// Bytes of uncompressed data blocks kept in the block cache.
    pub block_cache_size: usize,
    /// Target size of a data block before compression.
    pub block_size: usize,
    /// Entries between restart points in data blocks.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key (`None`: no filter).
    pub bloom_bits_per_key: Option<u32>,
    /// A filter policy of the caller's over user keys (LevelDB's
    /// `Options::filter_policy`, as the C API's callbacks give one), used
    /// instead of the Bloom filter: tables hold `filter.<its name>` blocks and
    /// reads consult it. Like a custom comparator it restricts compactions to
    /// the `streaming` executor (the others build Bloom filters themselves).
    /// `None` (the default): `bloom_bits_per_key` decides.
    pub filter_policy: Option<Arc<dyn FilterPolicy>>,
    /// Compress blocks with Snappy (kept when it saves 1/8).
    pub snappy: bool,
    /// Output tables of compactions are cut at about this size.
    pub max_file_size: u64,
    /// Number of L0 files that triggers a compaction: 6 (LevelDB's is 4).
    /// An L0 job rewrites the part of L1 its files overlap (with random
    /// keys, all of it), so more files per job write less per byte put;
    /// 6 wrote clearly less than 4 with reads as fast, 8 less again but
    /// with slower reads (`docs/results/compaction-tax.md`, "L0's
    /// triggers").
    pub l0_compaction_trigger: usize,
    /// Number of L0 files from which writes are throttled to the rate
    /// compactions drain L0 at (`docs/compaction.md`, "Write throttling"):
    /// 12 (LevelDB's is 8).
    pub l0_slowdown_writes_trigger: usize,
    /// Number of L0 files at which writes stop until compaction catches up:
    /// 20 (LevelDB's is 12). The room between the slowdown and the stop is
    /// what the throttle has to slow writers gradually.
    pub l0_stop_writes_trigger: usize,
    /// L0 files that the slowdown and stop triggers rise by while no read
    /// has come for a second (a load): 8. Only reads pay for L0's files,
    /// and more of them per job into L1 write less per byte put (at 50
    /// million pairs, 8 against 4 wrote 6 % less, 6.08 bytes per byte put
    /// against 6.47, and 12 or 16 less still but slowed the reads after
    /// the fill: `docs/results/compaction-tax.md`, "L0's triggers during
    /// a load" and "A load's slack of 8 L0 files"). The first read brings
    /// the triggers back down by the next memtable switch. 0 keeps them
    /// where they are.
    pub l0_load_slack: usize,
    /// The writers of a write group that are awake help its leader insert
    /// the group's batches into the memtable, at the same time, instead of
    /// the leader inserting all of them (as RocksDB's
    /// `allow_concurrent_memtable_write`; see `db/write.rs`), when the group
    /// holds at least 64 entries: smaller groups go faster inserted by the
    /// leader alone.
    pub concurrent_memtable_writes: bool,
    /// A write group hands the lead to the next one as soon as it is in the
    /// WAL, and inserts into the memtable while the next group appends
    /// (RocksDB's `enable_pipelined_write`; see `db/write.rs`). Groups
    /// publish their writes in order either way. Default off: it made
    /// four writers neither faster nor slower on 16 cores and on two, and
    /// eight on 16: a group's WAL append is short beside its insert, so
    /// there is little to overlap (`docs/results/write-path.md`,
    /// "Pipelined write groups (item 3), measured on 16 cores").
    pub pipelined_write: bool,
    /// While at most this many writers are in a write, one that needs only
    /// room (not synced, the memtable not full, no throttle, a
    /// memory-mapped WAL) is written by its own writer: it claims its
    /// sequence numbers and its place in the log under a short lock,
    /// copies its record there, inserts its batch and publishes in
    /// sequence order, instead of queueing behind a leader that writes for
    /// its group (`db/direct_writes.rs`). Past that many, writers take the queue,
    /// whose leader writes for the writers the scheduler is not running.
    /// Default: the cores less two (one for the flush and compactions, one
    /// to spare), at least 1: a lone writer always goes direct. 0: every
    /// write takes the queue.
    pub direct_writers: usize,
    /// Whether a direct writer that had to sleep until an earlier write
    /// published (the earlier writer was preempted between its claim and
    /// its publish) closes direct writes for a while, so that the queue's
    /// leader writes for the writers that are not running (default true;
    /// `db/direct_writes.rs`). False: writes go direct whenever `direct_writers`
    /// allows, preempted or not; tests of the direct path use it to keep
    /// every writer direct on a machine with few cores.
    pub direct_writers_back_off: bool,
    /// How long a writer that waits for its turn stays awake, yielding the
    /// processor, before it sleeps, in microseconds; only on a machine with
    /// a core to spare for it (more cores than the writers queued plus two;
    /// never on two cores). A sleeping writer must be woken, which takes
    /// tens of microseconds on an idle core. 0: sleep after a short spin.
    /// RocksDB's `write_thread_max_yield_usec`; default 100 (`db/write.rs`).
    pub write_thread_max_yield_usec: u64,
    /// A yield that took at least this many microseconds ran another thread:
    /// after three of them the waiting writer sleeps, the core being
    /// wanted. RocksDB's `write_thread_slow_yield_usec`; default 3.
    pub write_thread_slow_yield_usec: u64,
    /// Target size of L1; each deeper level is `level_multiplier` times larger.
    pub max_bytes_for_level_base: u64,
    /// Growth factor between levels.
    pub level_multiplier: f64,
    /// Targets of the levels between L1 and the deepest level that holds
    /// data, taken from that level's size: each level the same factor
    /// larger than the one above, from `max_bytes_for_level_base` at L1 to
    /// the deepest level's bytes, at most `level_multiplier`
    /// (`compaction/priority.rs`, `level_targets`). Off by default:
    /// LevelDB's fixed targets, `max_bytes_for_level_base` times
    /// `level_multiplier` per level, which wrote less in a growing store
    /// of LevelDB's default shape (`docs/results/compaction-tax.md`,
    /// "Level targets from the deepest level").
    pub dynamic_level_targets: bool,
    /// Compact a file that reads keep searching in vain before finding the
    /// key in a deeper file (LevelDB's seek-triggered compaction; on).
    pub seek_compaction: bool,
    /// Threads running compactions (flushes have their own thread); jobs
    /// run at once whenever their files are disjoint. 0 (the default): what
    /// the scheduler judges right for the machine,
    /// [`Options::background_compactions`].
    pub max_background_compactions: usize,
    /// Executor for compactions: `auto` (the default: the scheduler chooses
    /// per job from the executors' measured throughput and the cores left
    /// to the foreground; an OpenCL GPU when there is one and placement
    /// allows — an OpenCL device on the CPU, such as PoCL, is left out), or
    /// one executor: `parallel` (data-parallel phases on CPU threads),
    /// `streaming` (the reference), `opencl` or `remote`. A named executor
    /// still falls back along the chain (device -> `parallel` ->
    /// `streaming`) when it fails a job. Flags and other languages name it
    /// (`"streaming".parse::<ExecutorChoice>()`); an unknown name is refused
    /// where it is parsed.
    pub compaction_executor: ExecutorChoice,
    /// An executor of your own (RocksDB's `CompactionService`), offered
    /// every job before the scheduler's choice; when it fails a job (an
    /// error other than corrupt input or an I/O error, or a panic), the job
    /// goes on to `parallel`, then `streaming`, and the failure is counted
    /// under its name in `shale.executors`. It must write tables as the
    /// reference does (`../docs/compaction.md`). Its name must differ from
    /// the built-in executors'. Not used by a `compact_range` that names an
    /// executor. `None` by default.
    pub custom_executor: Option<Arc<dyn shale_compact::job::Executor>>,
    /// How the file to compact is chosen within a level: `min-overlap-ratio`
    /// (the fewest overlapping bytes below per byte of the file, the
    /// default), `min-overlap` (the fewest overlapping files below) or
    /// `round-robin` (LevelDB's rotating compact pointer).
    pub compaction_pick: PickStyle,
    /// Cross-level (triple-level) compaction: a job whose next level is
    /// itself over its target takes the overlapping files two levels down
    /// and writes there once (on by default).
    pub cross_level_compaction: bool,
    /// Most sub-compactions one job is split into (L0->L1 and manual jobs
    /// of at least two output files' worth of input); 1 turns splitting
    /// off; 0 (the default): one per core.
    pub max_subcompactions: usize,
    /// Threads of the `parallel` executor (0: one per available core).
    pub compaction_threads: usize,
    /// Nice levels (0-19) below the process's CPU priority for the
    /// compaction threads and the executors' worker threads (Linux): busy
    /// foreground threads get the CPU first, compaction every cycle they
    /// leave, as RocksDB's `LowerThreadPoolCPUPriority(kLow)`. Not lowered:
    /// the flush thread, which writers wait for, and the compaction thread
    /// that drives an OpenCL device, whose every step waits for it to wake
    /// (its jobs' CPU work is lowered; `docs/compaction.md`, "Priorities").
    /// The default, 19, made one and four writers of 32-byte puts and a
    /// compaction-bound 256-byte fill faster on two cores than 0
    /// (`docs/results/write-path.md`, "Compaction at the lowest CPU
    /// priority by default (seventh pass)"); when compaction falls behind,
    /// the L0 slowdown and stop triggers hold writers back, which frees the
    /// CPU for it. 0 leaves compaction at the process's priority (LevelDB's
    /// behaviour; `docs/results/engine-speed.md`, "Compaction threads at a
    /// lower CPU priority").
    pub compaction_nice: u8,
    /// Memory the `parallel` executor may use for one job, in bytes; larger
    /// jobs are processed in key-range slices.
    pub compaction_memory_budget: usize,
    /// The `opencl` executor's settings: its device, placement policy,
    /// memory budget and slices ([`OpenClSettings`]).
    pub opencl: OpenClSettings,
    /// Compactions read their input tables and write their output tables
    /// with direct I/O (`O_DIRECT`), bypassing the page cache; off by
    /// default. Flushes, the WAL and user reads are unchanged. The Env must
    /// support it (`PosixEnv` does) and the file system must take
    /// `O_DIRECT` (tmpfs before Linux 6.6 does not): `DB::open` checks both and fails with
    /// `NotSupported` otherwise.
    pub direct_io_for_compaction: bool,
    /// The `remote` executor's settings: the compaction workers, the
    /// token, the mode and the timeouts ([`RemoteSettings`]).
    pub remote: RemoteSettings,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            create_if_missing: false,
            error_if_exists: false,
            paranoid_checks: false,
            comparator: None,
            env: Arc::new(PosixEnv::new()),
            write_buffer_size: 4 << 20,
            max_open_files: 10_000,
            block_cache_size: 8 << 20,
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: Some(10),
            filter_policy: None,
            snappy: true,
            max_file_size: 2 << 20,
            l0_compaction_trigger: 6,
            l0_slowdown_writes_trigger: 12,
            l0_stop_writes_trigger: 20,
            l0_load_slack: 8,
            concurrent_memtable_writes: true,
            pipelined_write: false,
            direct_writers: available_cores().saturating_sub(2).max(1),
            direct_writers_back_off: true,
            write_thread_max_yield_usec: 100,
            write_thread_slow_yield_usec: 3,
            max_bytes_for_level_base: 10 << 20,
            level_multiplier: 10.0,
            dynamic_level_targets: false,
            seek_compaction: true,
            max_background_compactions: 0,
            compaction_executor: ExecutorChoice::Auto,
            custom_executor: None,
            compaction_pick: PickStyle::default(),
            cross_level_compaction: true,
            max_subcompactions: 0,
            compaction_threads: 0,
            compaction_nice: shale_compact::nice::MAX_NICE_INCREMENT,
            compaction_memory_budget: shale_compact::parallel::DEFAULT_MEMORY_BUDGET,
            opencl: OpenClSettings::default(),
            direct_io_for_compaction: false,
            remote: RemoteSettings::default(),
        }
    }
}

impl Options {
    /// The order of user keys these options give.
    pub fn key_order(&self) -> KeyOrder {
        match &self.comparator {
            Some(comparator) => KeyOrder::custom(comparator.clone()),
            None => KeyOrder::bytewise(),
        }
    }

    /// Table layout for flushes and compactions.
    pub fn table_settings(&self) -> TableSettings {
        TableSettings {
            block_size: self.block_size,
            block_restart_interval: self.block_restart_interval,
            bloom_bits_per_key: self.bloom_bits_per_key,
            snappy: self.snappy,
        }
    }

    /// Options for the tables this database writes (flushes, repair) and
    /// reads: the table settings in the database's key order, with its own
    /// filter policy in place of the Bloom filter when it has one.
    pub fn table_options(&self) -> TableOptions {
        let mut table = self.table_settings().table_options_in(&self.key_order());
        if let Some(policy) = self.internal_filter_policy() {
            table.filter_policy = Some(policy);
        }
        table
    }

    /// `filter_policy` over internal keys (it sees user keys), as tables
    /// use it; `None` without one.
    pub fn internal_filter_policy(&self) -> Option<Arc<dyn FilterPolicy>> {
        self.filter_policy.as_ref().map(|policy| {
            Arc::new(InternalFilterPolicy::new(policy.clone())) as Arc<dyn FilterPolicy>
        })
    }

    /// Compaction threads: `max_background_compactions`, or when it is 0,
    /// one per core with at least 2 and at most 4: two let an L0 job run
    /// beside a long deeper one even on a 2-core machine, and more than four
    /// rarely find disjoint work at LevelDB's level sizes.
    pub fn background_compactions(&self) -> usize {
        match self.max_background_compactions {
            0 => available_cores().clamp(2, 4),
            n => n,
        }
    }

    /// Most sub-compactions per job (see `max_subcompactions`).
    pub fn subcompactions(&self) -> usize {
        match self.max_subcompactions {
            0 => available_cores(),
            n => n,
        }
    }

    /// LevelDB's fixed target of `level` (>= 1): `max_bytes_for_level_base`
    /// times `level_multiplier` per level below L1.
    pub fn max_bytes_for_level(&self, level: usize) -> f64 {
        let mut bytes = self.max_bytes_for_level_base as f64;
        for _ in 1..level {
            bytes *= self.level_multiplier;
        }
        bytes
    }

    /// Checks values that would make the engine misbehave. Returns a message
    /// naming the option.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("write_buffer_size", self.write_buffer_size as u64),
            ("max_open_files", self.max_open_files as u64),
            ("block_size", self.block_size as u64),
            ("block_restart_interval", self.block_restart_interval as u64),
            ("max_file_size", self.max_file_size),
            ("l0_compaction_trigger", self.l0_compaction_trigger as u64),
            ("max_bytes_for_level_base", self.max_bytes_for_level_base),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if !(self.level_multiplier > 1.0 && self.level_multiplier.is_finite()) {
            return Err(format!(
                "level_multiplier must be above 1 (got {})",
                self.level_multiplier
            ));
        }
        if self.l0_slowdown_writes_trigger < self.l0_compaction_trigger
            || self.l0_stop_writes_trigger < self.l0_slowdown_writes_trigger
        {
            return Err(format!(
                "L0 triggers must satisfy compaction ({}) <= slowdown ({}) <= stop ({})",
                self.l0_compaction_trigger,
                self.l0_slowdown_writes_trigger,
                self.l0_stop_writes_trigger
            ));
        }
        if self.bloom_bits_per_key.is_some_and(|b| b > 1000) {
            return Err("bloom_bits_per_key must be at most 1000".into());
        }
        if self.opencl.memory_budget == Some(0) {
            return Err("opencl_memory_budget must be at least 1 byte".into());
        }
        if self.compaction_nice > shale_compact::nice::MAX_NICE_INCREMENT {
            return Err(format!(
                "compaction_nice must be at most {} (got {})",
                shale_compact::nice::MAX_NICE_INCREMENT,
                self.compaction_nice
            ));
        }
        if self.remote.workers.iter().any(|w| w.trim().is_empty()) {
            return Err("remote_workers holds an empty endpoint".into());
        }
        let choice = self.compaction_executor;
        if choice == ExecutorChoice::Forced(ExecutorKind::Remote) && self.remote.workers.is_empty()
        {
            return Err("compaction_executor=remote needs remote_workers".into());
        }
        if let Some(custom) = &self.custom_executor {
            if custom.name().parse::<ExecutorChoice>().is_ok() {
                return Err(format!(
                    "custom_executor is named {:?}, the name of a built-in executor; give it \
                     a name of its own",
                    custom.name()
                ));
            }
        }
        if self.remote.keys_window == 0 {
            return Err("remote_keys_window must be at least 1".into());
        }
        if self.remote.timeout.is_zero() {
            return Err("remote_timeout must be above 0".into());
        }
        let executor = choice;
        let streaming_only = matches!(
            choice,
            ExecutorChoice::Auto | ExecutorChoice::Forced(ExecutorKind::Streaming)
        );
        if let Some(comparator) = self.comparator.as_ref().filter(|_| !streaming_only) {
            return Err(format!(
                "compaction_executor={executor} compares key bytes and cannot use the \
                 custom comparator {}; use auto or streaming",
                comparator.name()
            ));
        }
        if let Some(policy) = self.filter_policy.as_ref().filter(|_| !streaming_only) {
            return Err(format!(
                "compaction_executor={executor} builds Bloom filters and cannot use the \
                 filter policy {}; use auto or streaming",
                policy.name()
            ));
        }
        Ok(())
    }
}

/// Cores this process may use.
pub fn available_cores() -> usize {
    // Looked up once: `available_parallelism` reads the cgroup's files in
    // /proc at every call, and the write path asks.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Options for one write.
///
/// ```
/// use shale::{Options, WriteOptions, DB};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// // Fast: survives a crash of this process, not of the machine.
/// db.put(&WriteOptions::default(), b"cache/entry", b"x")?;
/// // Durable: the log is synced before `put` returns.
/// db.put(&WriteOptions { sync: true }, b"ledger/1", b"paid")?;
/// # Ok::<(), shale::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Sync the WAL before acknowledging: the write survives a machine crash.
    /// Without it a write survives a process crash only.
    pub sync: bool,
}

/// Options for [`DB::compact_range_with`](crate::db::DB::compact_range_with).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactRangeOptions {
    /// The executor to run the jobs on (`streaming`, `parallel`, `opencl`,
    /// `remote`); [`ExecutorChoice::Auto`] (the default): the scheduler
    /// chooses, as for background compactions.
    pub executor: ExecutorChoice,
}

/// Options for reads and iterators.
///
/// [`ReadOptions::new`] (or `default`) reads the latest state with
/// checksums verified and the block cache filled.
///
/// ```
/// use shale::{Options, ReadOptions, WriteOptions, DB};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = DB::open(dir.path(), Options { create_if_missing: true, ..Options::default() })?;
/// for key in [b"a", b"b", b"c", b"d"] {
///     db.put(&WriteOptions::default(), key, b"v")?;
/// }
///
/// // A bulk scan of [b, d) that leaves the block cache alone.
/// let scan = ReadOptions {
///     fill_cache: false,
///     lower_bound: Some(b"b".to_vec()),
///     upper_bound: Some(b"d".to_vec()),
///     ..ReadOptions::new()
/// };
/// let mut cursor = db.iter(&scan)?;
/// cursor.seek_to_first();
/// let mut keys = Vec::new();
/// while cursor.valid() {
///     keys.push(cursor.key().to_vec());
///     cursor.next();
/// }
/// cursor.status()?;
/// assert_eq!(keys, [b"b", b"c"]);
///
/// // Reads at a snapshot.
/// let at = ReadOptions { snapshot: Some(db.snapshot()), ..ReadOptions::new() };
/// db.delete(&WriteOptions::default(), b"a")?;
/// assert_eq!(db.get(&at, b"a")?, Some(b"v".to_vec()));
/// # Ok::<(), shale::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Read as of this snapshot instead of the latest state.
    pub snapshot: Option<Snapshot>,
    /// Check the CRC of every data block read from disk. On by default
    /// (LevelDB's default is off; CRC32C costs little next to a disk read).
    /// Blocks found in the block cache were checked when they were read if
    /// the read that brought them asked for it. With `paranoid_checks`
    /// every block is checked whatever this says.
    pub verify_checksums: bool,
    /// Keep blocks read by this operation in the block cache (on by
    /// default; turn off for bulk scans).
    pub fill_cache: bool,
    /// Iterators only: first user key to return (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators only: user keys at or after this one are not returned.
    pub upper_bound: Option<Vec<u8>>,
}

impl ReadOptions {
    /// The usual read: latest state, checksums verified, cache filled.
    pub fn new() -> ReadOptions {
        ReadOptions::default()
    }
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            snapshot: None,
            verify_checksums: true,
            fill_cache: true,
            lower_bound: None,
            upper_bound: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use shale_compact::opencl::{DeviceSelector, PlacementPolicy};

    #[test]
    fn opencl_defaults_and_budget_check() {
        let options = Options::default();
        assert_eq!(options.opencl.placement, PlacementPolicy::AllDevice);
        assert_eq!(options.opencl.device, DeviceSelector::default());
        assert_eq!(options.opencl.memory_budget, None);
        assert_eq!(options.opencl.subcompactions, 1);
        assert!(options.validate().is_ok());
        let zero = Options {
            opencl: OpenClSettings {
                memory_budget: Some(0),
                ..OpenClSettings::default()
            },
            ..Options::default()
        };
        let message = zero.validate().unwrap_err();
        assert!(message.contains("opencl_memory_budget"), "{message}");
    }
}
