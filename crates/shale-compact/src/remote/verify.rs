//! The engine's checks of a worker, before anything it did is adopted:
//! what it says it is (`Hello`: the ShaleDB version, the protocol, a
//! progress promise it can keep), that its progress arrives as promised,
//! and every table it staged: its size, its footer and index, every block's
//! checksum, the entries in strictly increasing order, their count, the
//! smallest and largest keys against the metadata it returned, the keys
//! within the job's range, and the filter block: with the job's Bloom
//! settings, the filter must answer "may match" for every key of the block
//! it covers (a filter that says "no" to a key the table holds would make
//! reads miss it). A worker that fails any check loses the job; the
//! [`Refusal`] names the [`Check`] and is counted per worker.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use shale_format::comparator::compare_internal_keys;
use shale_format::format::RandomAccess;
use shale_format::internal_key::extract_user_key;
use shale_format::iterator::KvIterator;
use shale_format::table::{BlockReadOptions, ReadTableOptions, Table};

use super::proto::{HelloReply, StagedTable};
use super::PROTOCOL;
use crate::job::CompactionJob;

/// A check the engine makes of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// `Hello.version` is this engine's ShaleDB version.
    Version,
    /// `Hello.protocol` is this engine's protocol.
    Protocol,
    /// `Hello.progress_interval_ms` is a promise (not 0).
    ProgressInterval,
    /// Progress arrives within the promised interval (with slack).
    ProgressGap,
    /// The staged tables' names, order and key bounds as listed in `Done`.
    Listing,
    /// A staged file is a table of the size claimed, every block intact.
    Table,
    /// Entries in strictly increasing order, as many as claimed, within the
    /// claimed bounds and the job's range.
    Entries,
    /// The filter block answers "may match" for every key it covers.
    Filter,
    /// The file installed is the one verified (same inode, unchanged).
    Adoption,
}

impl Check {
    /// Every check, for statistics.
    pub const ALL: [Check; 9] = [
        Check::Version,
        Check::Protocol,
        Check::ProgressInterval,
        Check::ProgressGap,
        Check::Listing,
        Check::Table,
        Check::Entries,
        Check::Filter,
        Check::Adoption,
    ];

    /// The check's name in logs and statistics.
    pub fn name(self) -> &'static str {
        match self {
            Check::Version => "version",
            Check::Protocol => "protocol",
            Check::ProgressInterval => "progress-interval",
            Check::ProgressGap => "progress-gap",
            Check::Listing => "listing",
            Check::Table => "table",
            Check::Entries => "entries",
            Check::Filter => "filter",
            Check::Adoption => "adoption",
        }
    }
}

/// Why the engine refused what a worker did: the check, and what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The check that failed.
    pub check: Check,
    /// What it found.
    pub detail: String,
}

impl Refusal {
    /// A refusal by `check`.
    pub fn new(check: Check, detail: impl Into<String>) -> Refusal {
        Refusal {
            check,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused by check {}: {}", self.check.name(), self.detail)
    }
}

/// True for a staged table name: `NNNNNN.ldb`, digits only before.
pub fn valid_table_name(name: &str) -> bool {
    name.strip_suffix(".ldb")
        .is_some_and(|n| (6..=20).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The slack on a worker's progress promise: it must be heard from at
/// least every `PROGRESS_SLACK` intervals, and never less than
/// [`MIN_PROGRESS_GAP`] apart (a busy host delays a tick or two).
pub const PROGRESS_SLACK: u32 = 10;
/// See [`PROGRESS_SLACK`].
pub const MIN_PROGRESS_GAP: Duration = Duration::from_secs(1);

/// Checks a worker's `Hello`: the same version and protocol as this engine,
/// and a progress promise. Returns the longest silence the promise allows.
pub fn check_hello(reply: &HelloReply) -> Result<Duration, Refusal> {
    let version = env!("CARGO_PKG_VERSION");
    if reply.version != version {
        return Err(Refusal::new(
            Check::Version,
            format!(
                "the worker runs ShaleDB {:?}, this engine {version:?}",
                reply.version
            ),
        ));
    }
    if reply.protocol != PROTOCOL {
        return Err(Refusal::new(
            Check::Protocol,
            format!(
                "the worker speaks protocol {}, this engine {PROTOCOL}",
                reply.protocol
            ),
        ));
    }
    if reply.progress_interval_ms == 0 {
        return Err(Refusal::new(
            Check::ProgressInterval,
            "the worker promises no progress interval (0 ms)",
        ));
    }
    let interval = Duration::from_millis(u64::from(reply.progress_interval_ms));
    Ok(interval
        .saturating_mul(PROGRESS_SLACK)
        .max(MIN_PROGRESS_GAP))
}

/// Checks the staged table `data` against `meta` and `job`.
pub fn check_staged(data: Vec<u8>, meta: &StagedTable, job: &CompactionJob) -> Result<(), Refusal> {
    let name = &meta.name;
    if data.len() as u64 != meta.file_size {
        return Err(Refusal::new(
            Check::Table,
            format!(
                "staged {name} has {} bytes, the worker said {}",
                data.len(),
                meta.file_size
            ),
        ));
    }
    let table_options = job.table.table_options();
    let options = ReadTableOptions {
        comparator: table_options.comparator.clone(),
        filter_policy: table_options.filter_policy.clone(),
        verify_checksums: true,
        block_cache: None,
    };
    let comparator = table_options.comparator.clone();
    let table_error =
        |e: shale_format::Error| Refusal::new(Check::Table, format!("staged {name}: {e}"));
    let source: Arc<dyn RandomAccess> = Arc::new(data);
    let table = Table::open(source, meta.file_size, name, options).map_err(table_error)?;
    let filter = table.filter();
    if job.table.bloom_bits_per_key.is_some() && filter.is_none() {
        return Err(Refusal::new(
            Check::Filter,
            format!("staged {name} has no intact filter block, and the job asks for one"),
        ));
    }
    let mut entries = 0u64;
    let mut first: Option<Vec<u8>> = None;
    let mut last: Vec<u8> = Vec::new();
    let read = BlockReadOptions {
        verify_checksums: true,
        fill_cache: false,
    };
    for handle in table.block_handles().map_err(table_error)? {
        let block = table.read_data_block(handle, read).map_err(table_error)?;
        let mut iter = block.iter(comparator.clone());
        iter.seek_to_first();
        while iter.valid() {
            let key = iter.key();
            if first.is_some() && compare_internal_keys(&last, key) != Ordering::Less {
                return Err(Refusal::new(
                    Check::Entries,
                    format!("staged {name}: keys out of order at entry {entries}"),
                ));
            }
            if let Some(filter) = filter {
                if !filter.key_may_match(handle.offset, key) {
                    return Err(Refusal::new(
                        Check::Filter,
                        format!(
                            "staged {name}: the filter rules out entry {entries}, which the block at offset {} holds",
                            handle.offset
                        ),
                    ));
                }
            }
            if first.is_none() {
                first = Some(key.to_vec());
            }
            last.clear();
            last.extend_from_slice(key);
            entries += 1;
            iter.next();
        }
        iter.status().map_err(table_error)?;
    }
    if entries != meta.entries {
        return Err(Refusal::new(
            Check::Entries,
            format!(
                "staged {name} holds {entries} entries, the worker said {}",
                meta.entries
            ),
        ));
    }
    if first.as_deref() != Some(meta.smallest.as_slice()) || last != meta.largest {
        return Err(Refusal::new(
            Check::Entries,
            format!(
                "staged {name}: its smallest or largest key is not the one the worker returned"
            ),
        ));
    }
    if !job.range.contains(extract_user_key(&meta.smallest))
        || !job.range.contains(extract_user_key(&meta.largest))
    {
        return Err(Refusal::new(
            Check::Entries,
            format!("staged {name} holds keys outside the job's range"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn hello() -> HelloReply {
        HelloReply {
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: PROTOCOL,
            progress_interval_ms: 1000,
            ..HelloReply::default()
        }
    }

    #[test]
    fn a_worker_must_say_what_this_engine_is() {
        assert_eq!(check_hello(&hello()), Ok(Duration::from_secs(10)));
        let fast = HelloReply {
            progress_interval_ms: 5,
            ..hello()
        };
        assert_eq!(check_hello(&fast), Ok(MIN_PROGRESS_GAP));
        let other = HelloReply {
            version: "0.0.1".into(),
            ..hello()
        };
        assert_eq!(check_hello(&other).unwrap_err().check, Check::Version);
        let old = HelloReply {
            protocol: 0,
            ..hello()
        };
        assert_eq!(check_hello(&old).unwrap_err().check, Check::Protocol);
        let silent = HelloReply {
            progress_interval_ms: 0,
            ..hello()
        };
        let refusal = check_hello(&silent).unwrap_err();
        assert_eq!(refusal.check, Check::ProgressInterval);
        assert!(refusal
            .to_string()
            .starts_with("refused by check progress-interval"));
    }
}
