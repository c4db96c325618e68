//! The database option flags every subcommand shares, spelled as LevelDB's
//! db_bench spells them (`--write_buffer_size=N`, `--bloom_bits=-1`, ...) so
//! that one command line works against LevelDB, RocksDB and ShaleDB. A flag
//! left out keeps the [`shale::Options`] default.

use clap::builder::BoolishValueParser;
use clap::{Args, ValueEnum};
use shale::compaction::picker::PickStyle;
use shale::options::RemoteToken;
use shale::shale_compact::opencl::PlacementPolicy;
use shale::shale_compact::remote::RemoteMode;
use shale::{ExecutorChoice, Options};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::size::{parse_size, parse_size_or_negative, parse_size_usize, size_help};

/// Block compression, as db_bench's `--compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Compression {
    /// Blocks are stored as is.
    None,
    /// Snappy, kept for a block when it saves at least 1/8.
    Snappy,
}

/// db_bench's option flags. Flatten into a subcommand with
/// `#[command(flatten)]`, then call [`DbFlags::to_options`].
///
/// Numeric flags take a value starting with `-` (`--bloom_bits -1`), so that
/// a negative size is refused with a message naming its flag rather than
/// read as an unknown flag. Size flags (`SIZE`) take bytes or a number with
/// a unit (`64MiB`, `4K`, `1GB`: [`crate::size`]).
///
/// Every flag is hidden from a subcommand's short help (`-h`) and listed by
/// its `--help`, under their own heading.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Database options (db_bench flags)")]
pub struct DbFlags {
    #[arg(
        help = size_help!(
            "Bytes buffered in the memtable before it is written to L0 (default \
             4MiB)."
        ),
        long = "write_buffer_size",
        value_name = "SIZE",
        allow_negative_numbers = true,
        value_parser = parse_size_usize,
        hide_short_help = true
    )]
    pub write_buffer_size: Option<usize>,
    #[arg(
        help = size_help!("Compaction output files are cut at about this size (default 2MiB)."),
        long = "max_file_size",
        value_name = "SIZE",
        allow_negative_numbers = true,
        value_parser = parse_size,
        hide_short_help = true
    )]
    pub max_file_size: Option<u64>,
    #[arg(
        help = size_help!("Target size of a data block before compression (default 4KiB)."),
        long = "block_size",
        value_name = "SIZE",
        allow_negative_numbers = true,
        value_parser = parse_size_usize,
        hide_short_help = true
    )]
    pub block_size: Option<usize>,
    /// Entries between restart points in a data block.
    #[arg(
        long = "block_restart_interval",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub block_restart_interval: Option<usize>,
    /// Bloom filter bits per key; 0 or negative: no filter.
    #[arg(
        long = "bloom_bits",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub bloom_bits: Option<i64>,
    /// Block compression.
    #[arg(long = "compression", value_name = "KIND", hide_short_help = true)]
    pub compression: Option<Compression>,
    #[arg(
        help = size_help!("Bytes of block cache (default 8MiB; negative: the default)."),
        long = "cache_size",
        value_name = "SIZE",
        allow_negative_numbers = true,
        value_parser = parse_size_or_negative,
        hide_short_help = true
    )]
    pub cache_size: Option<i64>,
    /// Most table files kept open at once.
    #[arg(
        long = "open_files",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub open_files: Option<usize>,
    /// Number of L0 files that triggers a compaction.
    #[arg(
        long = "l0_compaction_trigger",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub l0_compaction_trigger: Option<usize>,
    /// Number of L0 files at which writes are slowed down.
    #[arg(
        long = "l0_slowdown_writes_trigger",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub l0_slowdown_writes_trigger: Option<usize>,
    /// Number of L0 files at which writes stop.
    #[arg(
        long = "l0_stop_writes_trigger",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub l0_stop_writes_trigger: Option<usize>,
    /// L0 files the slowdown and stop triggers rise by while no read has
    /// come for a second (a load; default 8, 0 keeps them fixed).
    #[arg(
        long = "l0_load_slack",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub l0_load_slack: Option<usize>,
    #[arg(
        help = size_help!(
            "Target size of L1 (default 10MiB; each deeper level --level_multiplier \
             times more)."
        ),
        long = "max_bytes_for_level_base",
        value_name = "SIZE",
        allow_negative_numbers = true,
        value_parser = parse_size,
        hide_short_help = true
    )]
    pub max_bytes_for_level_base: Option<u64>,
    /// Size ratio between adjacent levels.
    #[arg(
        long = "level_multiplier",
        value_name = "X",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub level_multiplier: Option<f64>,
    /// Threads running compactions (0: the scheduler's choice for the
    /// machine, one per core, 2 to 4).
    #[arg(
        long = "max_background_compactions",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub max_background_compactions: Option<usize>,
    /// Compaction executor, by name: auto (the default: chosen per job by
    /// the scheduler), parallel, streaming, opencl or remote (the
    /// --remote_workers).
    #[arg(
        long = "compaction_executor",
        value_name = "NAME",
        value_parser = parse_executor,
        hide_short_help = true
    )]
    pub compaction_executor: Option<ExecutorChoice>,
    /// How the file to compact is picked within a level: min-overlap-ratio
    /// (fewest bytes below per byte of the file, the default), min-overlap
    /// (fewest files below) or round-robin (LevelDB's).
    #[arg(long = "compaction_pick", value_name = "STYLE", value_parser = parse_pick, hide_short_help = true)]
    pub compaction_pick: Option<PickStyle>,
    /// Cross-level (triple-level) compaction on or off (default on).
    #[arg(
        long = "cross_level_compaction",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub cross_level_compaction: Option<bool>,
    /// Targets of the levels between L1 and the deepest one with data
    /// taken from that level's size (default off: LevelDB's fixed
    /// targets).
    #[arg(
        long = "dynamic_level_targets",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub dynamic_level_targets: Option<bool>,
    /// The writers of a write group insert into the memtable at the same
    /// time (default on).
    #[arg(
        long = "concurrent_memtable_writes",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub concurrent_memtable_writes: Option<bool>,
    /// A write group passes the lead on once it is in the WAL and inserts
    /// into the memtable while the next group appends (default off).
    #[arg(
        long = "pipelined_write",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub pipelined_write: Option<bool>,
    /// While at most this many writers write, a write that needs only
    /// room is written by its own writer, not by a queue leader for its
    /// group (default: the cores less two, at least 1; 0: never).
    #[arg(long = "direct_writers", value_name = "N", hide_short_help = true)]
    pub direct_writers: Option<usize>,
    /// A direct writer that had to sleep until an earlier write published
    /// closes direct writes for a while, and the queue writes (default
    /// true; false: direct whenever --direct_writers allows).
    #[arg(
        long = "direct_writers_back_off",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub direct_writers_back_off: Option<bool>,
    /// Microseconds a waiting writer stays awake (yielding) before it
    /// sleeps, on a machine with a core to spare (default 100; 0: sleep
    /// after a short spin).
    #[arg(
        long = "write_thread_max_yield_usec",
        value_name = "MICROS",
        hide_short_help = true
    )]
    pub write_thread_max_yield_usec: Option<u64>,
    /// A yield at least this long (microseconds) ran another thread; after
    /// three the waiting writer sleeps (default 3).
    #[arg(
        long = "write_thread_slow_yield_usec",
        value_name = "MICROS",
        hide_short_help = true
    )]
    pub write_thread_slow_yield_usec: Option<u64>,
    /// Every block read checked against its CRC, and damage in a WAL an
    /// error at open instead of a skip (default off, as LevelDB's).
    #[arg(
        long = "paranoid_checks",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub paranoid_checks: Option<bool>,
    /// Most sub-compactions per large L0->L1 or manual job (0: one per
    /// core; 1: no splitting).
    #[arg(
        long = "max_subcompactions",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub max_subcompactions: Option<usize>,
    /// Worker threads of the `parallel` (and `opencl`) executor's CPU
    /// phases; 0: one per available core.
    #[arg(
        long = "compaction_threads",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub compaction_threads: Option<usize>,
    /// Nice levels (0-19) below normal CPU priority for compaction
    /// (Linux), so busy foreground threads get the CPU first (default 19;
    /// 0: compaction at the foreground's priority). The thread that drives
    /// an OpenCL device keeps normal priority.
    #[arg(
        long = "compaction_nice",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub compaction_nice: Option<u8>,
    /// OpenCL executor: where jobs run, `all-device` (default),
    /// `c-compaction` (gc on the host) or `q-compaction` (jobs into L1 and
    /// L2 all on the device, deeper ones with gc on the host).
    #[arg(long = "opencl_placement", value_name = "POLICY", value_parser = parse_placement, hide_short_help = true)]
    pub opencl_placement: Option<PlacementPolicy>,
    /// OpenCL executor: platform index, as `clinfo -l` lists them (default:
    /// a GPU on any platform, else the first device).
    #[arg(
        long = "opencl_platform",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub opencl_platform: Option<usize>,
    /// OpenCL executor: device index within the platform (with no
    /// --opencl_platform: within platform 0).
    #[arg(
        long = "opencl_device",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub opencl_device: Option<usize>,
    #[arg(
        help = size_help!(
            "OpenCL executor: device memory one job may use (default: half the \
             device's memory); larger jobs run on the CPU."
        ),
        long = "opencl_memory_budget",
        value_name = "SIZE",
        allow_negative_numbers = true,
        value_parser = parse_size,
        hide_short_help = true
    )]
    pub opencl_memory_budget: Option<u64>,
    /// OpenCL executor: jobs with more input files run on the CPU
    /// (default: no limit; the GPU compaction paper's is 40).
    #[arg(
        long = "opencl_max_device_files",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub opencl_max_device_files: Option<usize>,
    /// OpenCL executor: most sub-compactions a device job is cut into
    /// (default 1: the device takes a job whole).
    #[arg(
        long = "opencl_subcompactions",
        value_name = "N",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub opencl_subcompactions: Option<usize>,
    #[arg(
        help = size_help!(
            "OpenCL executor: most input bytes per slice of a device job \
             (default: 32 MiB, or less where the device memory budget says)."
        ),
        long = "opencl_slice_size",
        value_name = "SIZE",
        value_parser = parse_size,
        hide_short_help = true
    )]
    pub opencl_slice_size: Option<u64>,
    /// Compactions read and write tables with O_DIRECT (the file system
    /// must support it; tmpfs before Linux 6.6 does not). `shale bench --direct_io=1` sets it.
    #[arg(
        long = "use_direct_io_for_compaction",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub direct_io_for_compaction: Option<bool>,
    /// Create the database when it does not exist (default: true for put
    /// and load, false otherwise). `--create_if_missing` alone means true.
    #[arg(
        long = "create_if_missing",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = BoolishValueParser::new(),
        hide_short_help = true
    )]
    pub create_if_missing: Option<bool>,
    /// Compaction workers (`shale worker`) to ship compaction jobs to,
    /// comma-separated: http://HOST:PORT, https://HOST:PORT or HOST:PORT.
    #[arg(
        long = "remote_workers",
        value_name = "URL[,URL...]",
        value_delimiter = ',',
        hide_short_help = true
    )]
    pub remote_workers: Option<Vec<String>>,
    /// File holding the token the workers require (their --token_file).
    #[arg(
        long = "remote_token_file",
        value_name = "FILE",
        hide_short_help = true
    )]
    pub remote_token_file: Option<PathBuf>,
    /// What crosses the wire: near-data (default: the worker compacts
    /// beside the data) or keys-only (keys travel, the engine merges).
    #[arg(long = "remote_mode", value_name = "MODE", value_parser = parse_remote_mode, hide_short_help = true)]
    pub remote_mode: Option<RemoteMode>,
    /// Keys-only mode: keys of one input run the engine holds or has asked
    /// for at once (default 4096): its memory per job is this many keys
    /// per run.
    #[arg(
        long = "remote_keys_window",
        value_name = "KEYS",
        hide_short_help = true
    )]
    pub remote_keys_window: Option<u64>,
    /// Seconds without progress after which a worker's job runs locally
    /// (default 30).
    #[arg(
        long = "remote_timeout",
        value_name = "SECONDS",
        allow_negative_numbers = true,
        hide_short_help = true
    )]
    pub remote_timeout: Option<f64>,
    /// CA certificate (PEM) that https:// workers are checked against
    /// (default: the system's trust store).
    #[arg(long = "remote_tls_ca", value_name = "FILE", hide_short_help = true)]
    pub remote_tls_ca: Option<PathBuf>,
    /// This engine's certificate chain (PEM), for workers that require
    /// client certificates (mutual TLS); with --remote_tls_key.
    #[arg(
        long = "remote_tls_cert",
        value_name = "FILE",
        requires = "remote_tls_key",
        hide_short_help = true
    )]
    pub remote_tls_cert: Option<PathBuf>,
    /// This engine's private key (PEM); with --remote_tls_cert.
    #[arg(
        long = "remote_tls_key",
        value_name = "FILE",
        requires = "remote_tls_cert",
        hide_short_help = true
    )]
    pub remote_tls_key: Option<PathBuf>,
}

fn parse_remote_mode(value: &str) -> Result<RemoteMode, String> {
    value.parse()
}

/// The token in `path`: its contents without the trailing newline; an
/// empty or unreadable file is an error naming it.
pub fn read_token_file(path: &Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("token file {}: {e}", path.display()))?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.is_empty() {
        return Err(format!("token file {} is empty", path.display()));
    }
    if token.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        return Err(format!(
            "token file {}: the token must be printable ASCII on one line",
            path.display()
        ));
    }
    Ok(token.to_string())
}

/// `--opencl_placement`'s value, with the engine's own names.
fn parse_placement(value: &str) -> Result<PlacementPolicy, String> {
    value.parse()
}

fn parse_pick(value: &str) -> Result<PickStyle, String> {
    value.parse()
}

/// `--compaction_executor` (and `shale compact --executor`): a name from
/// [`ExecutorChoice::NAMES`]; an unknown one is refused with the list.
pub fn parse_executor(value: &str) -> Result<ExecutorChoice, String> {
    value.parse()
}

impl DbFlags {
    /// The options these flags describe, checked with
    /// [`Options::validate`], so that a bad value is reported before
    /// anything is opened or written.
    /// `create_if_missing` is the flag's value or the `Options` default
    /// (false); see [`DbFlags::create_if_missing_or`].
    pub fn to_options(&self) -> Result<Options, String> {
        let mut options = Options::default();
        if let Some(bytes) = self.write_buffer_size {
            options.write_buffer_size = bytes;
        }
        if let Some(bytes) = self.max_file_size {
            options.max_file_size = bytes;
        }
        if let Some(bytes) = self.block_size {
            options.block_size = bytes;
        }
        if let Some(n) = self.block_restart_interval {
            options.block_restart_interval = n;
        }
        if let Some(bits) = self.bloom_bits {
            // db_bench: a negative value (its default) or 0 means no filter.
            options.bloom_bits_per_key = if bits <= 0 {
                None
            } else {
                Some(u32::try_from(bits).map_err(|_| format!("--bloom_bits={bits} is too large"))?)
            };
        }
        if let Some(compression) = self.compression {
            options.snappy = compression == Compression::Snappy;
        }
        if let Some(bytes) = self.cache_size {
            // db_bench: negative means "the default cache".
            if bytes >= 0 {
                options.block_cache_size = usize::try_from(bytes)
                    .map_err(|_| format!("--cache_size={bytes} is too large"))?;
            }
        }
        if let Some(n) = self.open_files {
            options.max_open_files = n;
        }
        if let Some(n) = self.l0_compaction_trigger {
            options.l0_compaction_trigger = n;
        }
        if let Some(n) = self.l0_slowdown_writes_trigger {
            options.l0_slowdown_writes_trigger = n;
        }
        if let Some(n) = self.l0_stop_writes_trigger {
            options.l0_stop_writes_trigger = n;
        }
        if let Some(n) = self.l0_load_slack {
            options.l0_load_slack = n;
        }
        if let Some(bytes) = self.max_bytes_for_level_base {
            options.max_bytes_for_level_base = bytes;
        }
        if let Some(x) = self.level_multiplier {
            options.level_multiplier = x;
        }
        if let Some(n) = self.max_background_compactions {
            options.max_background_compactions = n;
        }
        if let Some(choice) = self.compaction_executor {
            options.compaction_executor = choice;
        }
        if let Some(n) = self.compaction_threads {
            options.compaction_threads = n;
        }
        if let Some(style) = self.compaction_pick {
            options.compaction_pick = style;
        }
        if let Some(on) = self.cross_level_compaction {
            options.cross_level_compaction = on;
        }
        if let Some(on) = self.dynamic_level_targets {
            options.dynamic_level_targets = on;
        }
        if let Some(on) = self.concurrent_memtable_writes {
            options.concurrent_memtable_writes = on;
        }
        if let Some(on) = self.pipelined_write {
            options.pipelined_write = on;
        }
        if let Some(writers) = self.direct_writers {
            options.direct_writers = writers;
        }
        if let Some(on) = self.direct_writers_back_off {
            options.direct_writers_back_off = on;
        }
        if let Some(micros) = self.write_thread_max_yield_usec {
            options.write_thread_max_yield_usec = micros;
        }
        if let Some(micros) = self.write_thread_slow_yield_usec {
            options.write_thread_slow_yield_usec = micros;
        }
        if let Some(on) = self.paranoid_checks {
            options.paranoid_checks = on;
        }
        if let Some(n) = self.max_subcompactions {
            options.max_subcompactions = n;
        }
        if let Some(n) = self.compaction_nice {
            options.compaction_nice = n;
        }
        if let Some(policy) = self.opencl_placement {
            options.opencl.placement = policy;
        }
        if self.opencl_platform.is_some() {
            options.opencl.device.platform = self.opencl_platform;
        }
        if self.opencl_device.is_some() {
            options.opencl.device.device = self.opencl_device;
        }
        if let Some(bytes) = self.opencl_memory_budget {
            options.opencl.memory_budget = Some(bytes);
        }
        if let Some(n) = self.opencl_max_device_files {
            options.opencl.max_device_files = n;
        }
        if let Some(n) = self.opencl_subcompactions {
            options.opencl.subcompactions = n;
        }
        if let Some(bytes) = self.opencl_slice_size {
            options.opencl.slice_bytes = bytes;
        }
        if let Some(direct) = self.direct_io_for_compaction {
            options.direct_io_for_compaction = direct;
        }
        if let Some(create) = self.create_if_missing {
            options.create_if_missing = create;
        }
        if let Some(workers) = &self.remote_workers {
            options.remote.workers = workers.clone();
        }
        if let Some(path) = &self.remote_token_file {
            options.remote.token = Some(RemoteToken(read_token_file(path)?));
        }
        if let Some(mode) = self.remote_mode {
            options.remote.mode = mode;
        }
        if let Some(keys) = self.remote_keys_window {
            options.remote.keys_window = keys;
        }
        if let Some(seconds) = self.remote_timeout {
            if !(seconds > 0.0 && seconds.is_finite() && seconds < 1e9) {
                return Err(format!(
                    "--remote_timeout must be a positive number of seconds (got {seconds})"
                ));
            }
            options.remote.timeout = Duration::from_secs_f64(seconds);
        }
        if let Some(path) = &self.remote_tls_ca {
            options.remote.tls_ca = Some(path.clone());
        }
        if let (Some(cert), Some(key)) = (&self.remote_tls_cert, &self.remote_tls_key) {
            options.remote.tls_identity = Some((cert.clone(), key.clone()));
        }
        options.validate()?;
        Ok(options)
    }

    /// `--create_if_missing` when given, else `default` (the subcommand's).
    pub fn create_if_missing_or(&self, default: bool) -> bool {
        self.create_if_missing.unwrap_or(default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use shale::shale_compact::opencl::DEFAULT_MAX_DEVICE_FILES;

    #[derive(Debug, Parser)]
    struct Harness {
        #[command(flatten)]
        flags: DbFlags,
        rest: Vec<String>,
    }

    fn parse(args: &[&str]) -> Result<DbFlags, clap::Error> {
        Harness::try_parse_from(std::iter::once("test").chain(args.iter().copied()))
            .map(|h| h.flags)
    }

    #[test]
    fn defaults_are_the_engine_defaults() {
        let options = parse(&[]).unwrap().to_options().unwrap();
        let default = Options::default();
        assert_eq!(options.write_buffer_size, default.write_buffer_size);
        assert_eq!(options.bloom_bits_per_key, default.bloom_bits_per_key);
        assert_eq!(options.snappy, default.snappy);
        assert!(!options.create_if_missing);
    }

    #[test]
    fn db_bench_spellings() {
        let flags = parse(&[
            "--write_buffer_size=1000000",
            "--max_file_size=3000000",
            "--block_size=512",
            "--block_restart_interval=4",
            "--bloom_bits=-1",
            "--compression=none",
            "--cache_size=0",
            "--open_files=50",
            "--l0_compaction_trigger=2",
            "--l0_slowdown_writes_trigger=3",
            "--l0_stop_writes_trigger=5",
            "--max_bytes_for_level_base=1048576",
            "--level_multiplier=8",
            "--max_background_compactions=2",
            "--create_if_missing=0",
        ])
        .unwrap();
        let o = flags.to_options().unwrap();
        assert_eq!(o.write_buffer_size, 1_000_000);
        assert_eq!(o.max_file_size, 3_000_000);
        assert_eq!(o.block_size, 512);
        assert_eq!(o.block_restart_interval, 4);
        assert_eq!(o.bloom_bits_per_key, None);
        assert!(!o.snappy);
        assert_eq!(o.block_cache_size, 0);
        assert_eq!(o.max_open_files, 50);
        assert_eq!(
            (
                o.l0_compaction_trigger,
                o.l0_slowdown_writes_trigger,
                o.l0_stop_writes_trigger
            ),
            (2, 3, 5)
        );
        assert_eq!(o.max_bytes_for_level_base, 1 << 20);
        assert_eq!(o.level_multiplier, 8.0);
        assert_eq!(o.max_background_compactions, 2);
        assert!(!flags.create_if_missing_or(true));

        let o = parse(&["--paranoid_checks"]).unwrap().to_options().unwrap();
        assert!(o.paranoid_checks);
        let o = parse(&["--paranoid_checks=0"])
            .unwrap()
            .to_options()
            .unwrap();
        assert!(!o.paranoid_checks);
        let o = parse(&["--bloom_bits", "0"]).unwrap().to_options().unwrap();
        assert_eq!(o.bloom_bits_per_key, None);
        let o = parse(&["--bloom_bits=12"]).unwrap().to_options().unwrap();
        assert_eq!(o.bloom_bits_per_key, Some(12));
        let flags = parse(&["--create_if_missing", "positional"]).unwrap();
        assert!(flags.create_if_missing_or(false));
        assert!(parse(&[]).unwrap().create_if_missing_or(true));
    }

    #[test]
    fn opencl_flags() {
        let o = parse(&[]).unwrap().to_options().unwrap();
        assert_eq!(o.opencl.placement, PlacementPolicy::AllDevice);
        assert_eq!(o.opencl.device.platform, None);
        assert_eq!(o.opencl.device.device, None);
        assert_eq!(o.opencl.memory_budget, None);
        assert_eq!(o.opencl.max_device_files, DEFAULT_MAX_DEVICE_FILES);
        let o = parse(&[
            "--opencl_placement=q-compaction",
            "--opencl_platform=1",
            "--opencl_device=2",
            "--opencl_memory_budget=1048576",
            "--opencl_max_device_files=8",
        ])
        .unwrap()
        .to_options()
        .unwrap();
        assert_eq!(o.opencl.placement, PlacementPolicy::QCompaction);
        assert_eq!(o.opencl.device.platform, Some(1));
        assert_eq!(o.opencl.device.device, Some(2));
        assert_eq!(o.opencl.memory_budget, Some(1 << 20));
        assert_eq!(o.opencl.max_device_files, 8);
        let o = parse(&["--opencl_placement", "c-compaction"])
            .unwrap()
            .to_options()
            .unwrap();
        assert_eq!(o.opencl.placement, PlacementPolicy::CCompaction);
        assert!(!o.direct_io_for_compaction);
        let o = parse(&["--use_direct_io_for_compaction"])
            .unwrap()
            .to_options()
            .unwrap();
        assert!(o.direct_io_for_compaction);
        assert!(parse(&["--use_direct_io_for_compaction=maybe"]).is_err());

        let error = parse(&["--opencl_placement=gpu-only"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("gpu-only"), "{error}");
        assert!(error.contains("q-compaction"), "{error}");
        assert!(parse(&["--opencl_device=-1"]).is_err());
        assert!(parse(&["--opencl_platform=first"]).is_err());
        let message = parse(&["--opencl_memory_budget=0"])
            .unwrap()
            .to_options()
            .unwrap_err();
        assert!(message.contains("opencl_memory_budget"), "{message}");
    }

    #[test]
    fn sizes_take_units() {
        let o = parse(&[
            "--write_buffer_size=64MiB",
            "--max_file_size=2M",
            "--block_size=16KiB",
            "--cache_size=1GiB",
            "--max_bytes_for_level_base=256MB",
            "--opencl_memory_budget",
            "1.5 GiB",
        ])
        .unwrap()
        .to_options()
        .unwrap();
        assert_eq!(o.write_buffer_size, 64 << 20);
        assert_eq!(o.max_file_size, 2 << 20);
        assert_eq!(o.block_size, 16 << 10);
        assert_eq!(o.block_cache_size, 1 << 30);
        assert_eq!(o.max_bytes_for_level_base, 256_000_000);
        assert_eq!(o.opencl.memory_budget, Some(3 << 29));
        // db_bench's plain bytes and negative cache size still work.
        assert_eq!(parse(&["--cache_size=-1"]).unwrap().cache_size, Some(-1));
        assert_eq!(parse(&["--cache_size", "-1"]).unwrap().cache_size, Some(-1));
        assert_eq!(
            parse(&["--block_size=4096"]).unwrap().block_size,
            Some(4096)
        );
        for bad in [
            "--write_buffer_size=4XB",
            "--block_size=-4K",
            "--max_file_size=1.5",
        ] {
            let error = parse(&[bad]).unwrap_err().to_string();
            let flag = bad.split('=').next().unwrap();
            assert!(error.contains(flag), "{error}");
            assert!(
                error.contains("expected bytes like 4194304, 4MiB or 64GiB"),
                "{error}"
            );
        }
    }

    #[test]
    fn size_help_states_the_engine_defaults_and_the_rule() {
        use clap::CommandFactory;
        let command = Harness::command();
        let default = Options::default();
        for (id, bytes) in [
            ("write_buffer_size", default.write_buffer_size as u64),
            ("max_file_size", default.max_file_size),
            ("block_size", default.block_size as u64),
            ("cache_size", default.block_cache_size as u64),
            ("max_bytes_for_level_base", default.max_bytes_for_level_base),
            ("opencl_memory_budget", 0),
        ] {
            let arg = command
                .get_arguments()
                .find(|arg| arg.get_id() == id)
                .unwrap();
            let help = arg.get_help().unwrap().to_string();
            if bytes > 0 {
                let default = format!("default {}", crate::size::format_size(bytes));
                assert!(help.contains(&default), "{id}: {help}");
            }
            assert!(help.contains("powers of 1024"), "{id}: {help}");
            assert_eq!(arg.get_value_names().unwrap(), ["SIZE"], "{id}");
        }
        // Every database flag is left out of the short help, none of the
        // long one.
        for arg in command.get_arguments() {
            if arg.get_id() != "rest" && arg.get_long().is_some() && arg.get_id() != "help" {
                assert!(arg.is_hide_short_help_set(), "{}", arg.get_id());
                assert!(!arg.is_hide_set(), "{}", arg.get_id());
            }
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--compression=zstd"]).is_err());
        assert!(parse(&["--block_size=big"]).is_err());
        assert!(parse(&["--block_size=-1"]).is_err());
        let message = parse(&["--block_size=0"])
            .unwrap()
            .to_options()
            .unwrap_err();
        assert!(message.contains("block_size"), "{message}");
        let message = parse(&["--l0_slowdown_writes_trigger=1"])
            .unwrap()
            .to_options()
            .unwrap_err();
        assert!(message.contains("L0"), "{message}");
        let message = parse(&["--compaction_executor=warp"])
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("unknown compaction executor \"warp\""),
            "{message}"
        );
        let message = parse(&["--level_multiplier=NaN"])
            .unwrap()
            .to_options()
            .unwrap_err();
        assert!(message.contains("level_multiplier"), "{message}");
    }
}
