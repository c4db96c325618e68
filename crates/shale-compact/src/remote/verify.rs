//! The engine's check of a table a worker staged, before it is adopted:
//! its size, its footer and index, every block's checksum, the entries in
//! strictly increasing order, their count, and the smallest and largest
//! keys against the metadata the worker returned, all within the job's key
//! range. A worker that lies about any of these loses the job.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use shale_format::comparator::compare_internal_keys;
use shale_format::format::RandomAccess;
use shale_format::internal_key::extract_user_key;
use shale_format::iterator::KvIterator;
use shale_format::table::{ReadTableOptions, Table};

use super::proto::StagedTable;
use crate::job::CompactionJob;

/// True for a staged table name: `NNNNNN.ldb`, digits only before.
pub fn valid_table_name(name: &str) -> bool {
    name.strip_suffix(".ldb")
        .is_some_and(|n| (6..=20).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Checks the staged table at `path` against `meta` and `job`.
pub fn check_staged(path: &Path, meta: &StagedTable, job: &CompactionJob) -> Result<(), String> {
    let name = &meta.name;
    let data = std::fs::read(path).map_err(|e| format!("reading staged {name}: {e}"))?;
    if data.len() as u64 != meta.file_size {
        return Err(format!(
            "staged {name} has {} bytes, the worker said {}",
            data.len(),
            meta.file_size
        ));
    }
    let options = ReadTableOptions::internal_scan();
    let source: Arc<dyn RandomAccess> = Arc::new(data);
    let table = Table::open(source, meta.file_size, name, options)
        .map_err(|e| format!("staged {name}: {e}"))?;
    let mut iter = table.iter();
    iter.seek_to_first();
    let mut entries = 0u64;
    let mut first: Option<Vec<u8>> = None;
    let mut last: Vec<u8> = Vec::new();
    while iter.valid() {
        let key = iter.key();
        if first.is_some() && compare_internal_keys(&last, key) != Ordering::Less {
            return Err(format!(
                "staged {name}: keys out of order at entry {entries}"
            ));
        }
        if first.is_none() {
            first = Some(key.to_vec());
        }
        last.clear();
        last.extend_from_slice(key);
        entries += 1;
        iter.next();
    }
    iter.status().map_err(|e| format!("staged {name}: {e}"))?;
    if entries != meta.entries {
        return Err(format!(
            "staged {name} holds {entries} entries, the worker said {}",
            meta.entries
        ));
    }
    if first.as_deref() != Some(meta.smallest.as_slice()) || last != meta.largest {
        return Err(format!(
            "staged {name}: its smallest or largest key is not the one the worker returned"
        ));
    }
    if !job.range.contains(extract_user_key(&meta.smallest))
        || !job.range.contains(extract_user_key(&meta.largest))
    {
        return Err(format!("staged {name} holds keys outside the job's range"));
    }
    Ok(())
}
