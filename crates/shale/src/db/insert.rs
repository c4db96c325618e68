//! A write batch into the memtable: each record at its sequence number,
//! the batch checked whole first. Shared by the write path (the leader and
//! the followers that help it) and recovery (the WAL's batches).

use std::panic::{catch_unwind, AssertUnwindSafe};

use shale_format::internal_key::ValueType;
use shale_format::write_batch::{BatchOp, WriteBatch};
use shale_format::{Error, Result};

use crate::memtable::MemTable;

/// Applies a whole batch to the memtable, assigning consecutive sequence
/// numbers from the batch's. The batch is checked completely first so a
/// damaged batch is never half applied.
#[inline]
pub(crate) fn insert_into(mem: &MemTable, batch: &WriteBatch) -> Result<()> {
    // Two passes rather than collecting the records: no allocation per write.
    for op in batch.iter() {
        op?;
    }
    let mut inserter = mem.inserter();
    for (sequence, op) in (batch.sequence()..).zip(batch.iter()) {
        match op? {
            BatchOp::Put { key, value } => inserter.add(sequence, ValueType::Value, key, value),
            BatchOp::Delete { key } => inserter.add(sequence, ValueType::Deletion, key, b""),
        }
    }
    Ok(())
}

/// [`insert_into`], with a panic in it made the write's error: a writer
/// that panicked while leading would leave the lead taken and every later
/// writer waiting.
#[inline]
pub(super) fn insert_caught(mem: &MemTable, batch: &WriteBatch) -> Result<()> {
    catch_unwind(AssertUnwindSafe(|| insert_into(mem, batch)))
        .unwrap_or_else(|panic| Err(Error::panicked("a memtable insert", &*panic)))
}
