//! The command line: leveldb_bench's flags (db_bench spellings, `--name=value`
//! only), plus the RocksDB options that scripts/compare sets to give RocksDB
//! LevelDB's LSM shape and the write-path options that scripts/writers-bench
//! compares. A bad flag is an error message and exit status 2, never a panic.

use std::fmt;

/// Every flag, with leveldb_bench's defaults; `-1` means "the library's".
#[derive(Debug, Clone)]
pub struct Flags {
    pub benchmarks: String,
    pub num: i64,
    pub reads: i64,
    pub threads: usize,
    pub value_size: usize,
    pub key_size: usize,
    pub compression_ratio: f64,
    pub histogram: bool,
    pub db: String,
    pub use_existing_db: bool,
    pub seed: i64,
    pub readwritepercent: u32,
    pub write_buffer_size: i64,
    pub max_file_size: i64,
    pub block_size: i64,
    pub block_restart_interval: i64,
    pub bloom_bits: i64,
    pub cache_size: i64,
    pub open_files: i64,
    pub compression: Compression,
    /// Off by default, as LevelDB's `ReadOptions` (and so leveldb_bench and
    /// `shale bench`); RocksDB's `ReadOptions` and db_bench default to on.
    pub verify_checksums: bool,
    /// RocksDB's `allow_mmap_reads` (db_bench's --mmap_read); off, RocksDB's
    /// default, although LevelDB 1.23 and ShaleDB read tables through mmap.
    pub mmap_read: bool,
    /// `--timeline=FILE.csv`: operations per interval (timeline.rs).
    pub timeline: Option<String>,
    /// Seconds per --timeline interval.
    pub timeline_interval: f64,
    pub shape: LsmShape,
    pub write_path: WritePath,
}

/// The compressions leveldb_bench accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Snappy,
}

/// RocksDB options without a LevelDB flag. The defaults are LevelDB 1.23's
/// fixed shape (10 MiB level 1, x10 per level, L0 triggers 4/8/12, no
/// dynamic level sizes) and one flush plus one compaction at a time, so a
/// bare run compares like with like; RocksDB's own defaults differ (256 MiB
/// level 1, L0 triggers 4/20/36, dynamic level sizes).
#[derive(Debug, Clone)]
pub struct LsmShape {
    pub max_bytes_for_level_base: u64,
    pub max_bytes_for_level_multiplier: f64,
    pub level0_file_num_compaction_trigger: i32,
    pub level0_slowdown_writes_trigger: i32,
    pub level0_stop_writes_trigger: i32,
    pub level_compaction_dynamic_level_bytes: bool,
    pub max_background_jobs: i32,
    pub max_write_buffer_number: i32,
}

/// How concurrent writers get into the WAL and the memtable: RocksDB's
/// `DBOptions` of `db/write_thread.cc`, with db_bench's flag names and
/// defaults (which are RocksDB's). Set explicitly at every open, so that a
/// log says which write path ran whatever a RocksDB release defaults to.
#[derive(Debug, Clone)]
pub struct WritePath {
    /// Followers of a write group insert their own batches into the
    /// memtable in parallel (the leader only writes the WAL); off, the
    /// leader inserts the whole group alone, as LevelDB does.
    pub allow_concurrent_memtable_write: bool,
    /// A second queue: a group leaves the WAL queue once its WAL write is
    /// done and inserts into the memtable while the next group writes the
    /// WAL.
    pub enable_pipelined_write: bool,
    /// A waiting writer spins and yields for a while before it blocks on a
    /// mutex.
    pub enable_write_thread_adaptive_yield: bool,
}

impl Default for Flags {
    fn default() -> Flags {
        Flags {
            benchmarks: "fillrandom,readrandom".to_string(),
            num: 200_000,
            reads: -1,
            threads: 1,
            value_size: 100,
            key_size: 16,
            compression_ratio: 0.5,
            histogram: false,
            db: String::new(),
            use_existing_db: false,
            seed: 0,
            readwritepercent: 90,
            write_buffer_size: -1,
            max_file_size: -1,
            block_size: -1,
            block_restart_interval: -1,
            bloom_bits: -1,
            cache_size: -1,
            open_files: -1,
            compression: Compression::Snappy,
            verify_checksums: false,
            mmap_read: false,
            timeline: None,
            timeline_interval: 1.0,
            shape: LsmShape {
                max_bytes_for_level_base: 10 * 1048576,
                max_bytes_for_level_multiplier: 10.0,
                level0_file_num_compaction_trigger: 4,
                level0_slowdown_writes_trigger: 8,
                level0_stop_writes_trigger: 12,
                level_compaction_dynamic_level_bytes: false,
                max_background_jobs: 2,
                max_write_buffer_number: 2,
            },
            write_path: WritePath {
                allow_concurrent_memtable_write: true,
                enable_pipelined_write: false,
                enable_write_thread_adaptive_yield: true,
            },
        }
    }
}

/// Why the command line was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagError(pub String);

impl fmt::Display for FlagError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

fn invalid(name: &str, value: &str, expected: &str) -> FlagError {
    FlagError(format!("invalid value '{value}' for --{name} ({expected})"))
}

fn integer<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, FlagError> {
    value
        .parse()
        .map_err(|_| invalid(name, value, "an integer"))
}

fn number(name: &str, value: &str) -> Result<f64, FlagError> {
    value.parse().map_err(|_| invalid(name, value, "a number"))
}

fn boolean(name: &str, value: &str) -> Result<bool, FlagError> {
    match value {
        "1" | "true" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err(invalid(name, value, "0 or 1")),
    }
}

impl Flags {
    /// Parses `--name=value` arguments (the program name excluded).
    pub fn parse<I: IntoIterator<Item = String>>(arguments: I) -> Result<Flags, FlagError> {
        let mut flags = Flags::default();
        for argument in arguments {
            let Some((name, value)) = argument
                .strip_prefix("--")
                .and_then(|rest| rest.split_once('='))
            else {
                return Err(FlagError(format!(
                    "expected --name=value, got '{argument}'"
                )));
            };
            let shape = &mut flags.shape;
            let write_path = &mut flags.write_path;
            match name {
                "benchmarks" => flags.benchmarks = value.to_string(),
                "num" => flags.num = integer(name, value)?,
                "reads" => flags.reads = integer(name, value)?,
                "threads" => flags.threads = integer(name, value)?,
                "value_size" => flags.value_size = integer(name, value)?,
                "key_size" => flags.key_size = integer(name, value)?,
                "compression_ratio" => flags.compression_ratio = number(name, value)?,
                "histogram" => flags.histogram = boolean(name, value)?,
                "db" => flags.db = value.to_string(),
                "use_existing_db" => flags.use_existing_db = boolean(name, value)?,
                "seed" => flags.seed = integer(name, value)?,
                "readwritepercent" => flags.readwritepercent = integer(name, value)?,
                "write_buffer_size" => flags.write_buffer_size = integer(name, value)?,
                // RocksDB calls it target_file_size_base; both spellings work.
                "max_file_size" | "target_file_size_base" => {
                    flags.max_file_size = integer(name, value)?
                }
                "block_size" => flags.block_size = integer(name, value)?,
                "block_restart_interval" => flags.block_restart_interval = integer(name, value)?,
                "bloom_bits" => flags.bloom_bits = integer(name, value)?,
                "cache_size" => flags.cache_size = integer(name, value)?,
                "open_files" => flags.open_files = integer(name, value)?,
                "compression" | "compression_type" => {
                    flags.compression = match value {
                        "none" => Compression::None,
                        "snappy" => Compression::Snappy,
                        _ => return Err(invalid(name, value, "none or snappy")),
                    }
                }
                // LevelDB's spelling and RocksDB db_bench's.
                "verify_checksums" | "verify_checksum" => {
                    flags.verify_checksums = boolean(name, value)?
                }
                "mmap_read" => flags.mmap_read = boolean(name, value)?,
                "timeline" => flags.timeline = Some(value.to_string()),
                "timeline_interval" => flags.timeline_interval = number(name, value)?,
                "max_bytes_for_level_base" => {
                    shape.max_bytes_for_level_base = integer(name, value)?
                }
                "max_bytes_for_level_multiplier" => {
                    shape.max_bytes_for_level_multiplier = number(name, value)?
                }
                "level0_file_num_compaction_trigger" => {
                    shape.level0_file_num_compaction_trigger = integer(name, value)?
                }
                "level0_slowdown_writes_trigger" => {
                    shape.level0_slowdown_writes_trigger = integer(name, value)?
                }
                "level0_stop_writes_trigger" => {
                    shape.level0_stop_writes_trigger = integer(name, value)?
                }
                "level_compaction_dynamic_level_bytes" => {
                    shape.level_compaction_dynamic_level_bytes = boolean(name, value)?
                }
                "max_background_jobs" => shape.max_background_jobs = integer(name, value)?,
                "max_write_buffer_number" => shape.max_write_buffer_number = integer(name, value)?,
                "allow_concurrent_memtable_write" => {
                    write_path.allow_concurrent_memtable_write = boolean(name, value)?
                }
                "enable_pipelined_write" => {
                    write_path.enable_pipelined_write = boolean(name, value)?
                }
                "enable_write_thread_adaptive_yield" => {
                    write_path.enable_write_thread_adaptive_yield = boolean(name, value)?
                }
                _ => return Err(FlagError(format!("unknown flag --{name}"))),
            }
        }
        flags.check()?;
        Ok(flags)
    }

    fn check(&self) -> Result<(), FlagError> {
        let refuse = |message: &str| Err(FlagError(message.to_string()));
        if !(1..=i64::from(i32::MAX)).contains(&self.num) {
            return refuse("--num must be in 1..2^31-1");
        }
        if self.threads < 1 {
            return refuse("--threads must be at least 1");
        }
        if !(self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            return refuse("--compression_ratio must be above 0 and at most 1");
        }
        if self.readwritepercent > 100 {
            return refuse("--readwritepercent must be at most 100");
        }
        if self.db.is_empty() {
            return refuse("--db=DIR is required");
        }
        if !(self.timeline_interval > 0.0 && self.timeline_interval.is_finite()) {
            return refuse("--timeline_interval must be a positive number of seconds");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: &[&str]) -> Result<Flags, FlagError> {
        Flags::parse(arguments.iter().map(|argument| argument.to_string()))
    }

    #[test]
    fn compare_flags_parse() {
        let flags = parse(&[
            "--db=/tmp/x",
            "--num=5000000",
            "--reads=-1",
            "--histogram=1",
            "--compression=none",
            "--target_file_size_base=8388608",
            "--max_bytes_for_level_multiplier=10",
        ])
        .expect("valid flags");
        assert_eq!(flags.num, 5_000_000);
        assert_eq!(flags.reads, -1);
        assert!(flags.histogram);
        assert_eq!(flags.compression, Compression::None);
        assert_eq!(flags.max_file_size, 8_388_608);
    }

    #[test]
    fn bad_flags_are_errors_not_panics() {
        assert_eq!(
            parse(&["--db=/tmp/x", "--num=lots"]).err(),
            Some(FlagError(
                "invalid value 'lots' for --num (an integer)".into()
            ))
        );
        assert!(parse(&["--db=/tmp/x", "--threads=-1"]).is_err());
        assert!(parse(&["--db=/tmp/x", "--histogram=yes"]).is_err());
        assert!(parse(&["--db=/tmp/x", "--bogus=1"]).is_err());
        assert!(parse(&["--num=10"]).is_err());
        assert!(parse(&["-db", "/tmp/x"]).is_err());
        assert!(parse(&["--db=/tmp/x", "--num=0"]).is_err());
        assert!(parse(&["--db=/tmp/x", "--timeline_interval=0"]).is_err());
        assert!(parse(&["--db=/tmp/x", "--timeline_interval=soon"]).is_err());
    }

    #[test]
    fn timeline_flags_parse() {
        let flags = parse(&["--db=/tmp/x", "--timeline=t.csv", "--timeline_interval=0.5"])
            .expect("valid flags");
        assert_eq!(flags.timeline.as_deref(), Some("t.csv"));
        assert_eq!(flags.timeline_interval, 0.5);
        assert_eq!(parse(&["--db=/tmp/x"]).expect("valid flags").timeline, None);
    }

    #[test]
    fn write_path_defaults_are_rocksdbs() {
        let flags = parse(&["--db=/tmp/x"]).expect("valid flags");
        assert!(flags.write_path.allow_concurrent_memtable_write);
        assert!(!flags.write_path.enable_pipelined_write);
        assert!(flags.write_path.enable_write_thread_adaptive_yield);
    }

    #[test]
    fn write_path_flags_parse() {
        let flags = parse(&[
            "--db=/tmp/x",
            "--allow_concurrent_memtable_write=0",
            "--enable_pipelined_write=1",
            "--enable_write_thread_adaptive_yield=false",
        ])
        .expect("valid flags");
        assert!(!flags.write_path.allow_concurrent_memtable_write);
        assert!(flags.write_path.enable_pipelined_write);
        assert!(!flags.write_path.enable_write_thread_adaptive_yield);
        assert_eq!(
            parse(&["--db=/tmp/x", "--enable_pipelined_write=yes"]).err(),
            Some(FlagError(
                "invalid value 'yes' for --enable_pipelined_write (0 or 1)".into()
            ))
        );
        assert!(parse(&["--db=/tmp/x", "--allow_concurrent_memtable_write="]).is_err());
    }
}
