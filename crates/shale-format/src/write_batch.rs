//! LevelDB's write batch (`db/write_batch.cc`): a group of puts and deletes
//! applied atomically, and the payload of every write-ahead-log record.
//! See `docs/format/log.md` ("The WAL payload: write batches").
//!
//! ```text
//! sequence (fixed64) | count (fixed32) | record*
//! record := 1 (Value)    | key (length-prefixed) | value (length-prefixed)
//!         | 0 (Deletion) | key (length-prefixed)
//! ```
//!
//! The records take consecutive sequence numbers starting at `sequence`.

use crate::coding::{decode_fixed32, decode_fixed64, put_length_prefixed, Decoder};
use crate::error::{Error, Result};
use crate::internal_key::{SequenceNumber, ValueType};

/// Size of the header: sequence number (8) and record count (4). Frozen.
pub const WRITE_BATCH_HEADER_SIZE: usize = 12;

/// One operation in a batch, borrowing the batch's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The user key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Remove `key`.
    Delete {
        /// The user key.
        key: &'a [u8],
    },
}

/// An encoded batch of puts and deletes. Always holds at least the header.
///
/// A database applies a batch atomically, its records in order (in
/// ShaleDB, `DB::write`). The batch itself is plain bytes: it can be built,
/// read back, appended to another, and sent as [`WriteBatch::data`].
///
/// ```
/// use shale_format::write_batch::{BatchOp, WriteBatch};
///
/// let mut batch = WriteBatch::new();
/// batch.put(b"apple", b"red")?;
/// batch.put(b"banana", b"yellow")?;
/// batch.delete(b"apple")?;
/// assert_eq!(batch.count(), 3);
///
/// // The records, in the order they were added.
/// let ops = batch.iter().collect::<shale_format::Result<Vec<_>>>()?;
/// assert_eq!(ops[0], BatchOp::Put { key: b"apple", value: b"red" });
/// assert_eq!(ops[2], BatchOp::Delete { key: b"apple" });
///
/// // Batches are bytes: decode one again, or append one to another.
/// let copy = WriteBatch::from_data(batch.data().to_vec())?;
/// assert_eq!(copy, batch);
/// let mut combined = WriteBatch::new();
/// combined.append(&copy)?;
/// assert_eq!(combined.count(), 3);
/// # Ok::<(), shale_format::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
}

impl Default for WriteBatch {
    fn default() -> WriteBatch {
        WriteBatch::new()
    }
}

impl WriteBatch {
    /// An empty batch with sequence number 0.
    pub fn new() -> WriteBatch {
        WriteBatch {
            rep: vec![0; WRITE_BATCH_HEADER_SIZE],
        }
    }

    /// An empty batch with room for `bytes` of records (a single put of a
    /// known size needs no reallocation).
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(WRITE_BATCH_HEADER_SIZE + bytes);
        rep.resize(WRITE_BATCH_HEADER_SIZE, 0);
        WriteBatch { rep }
    }

    /// Bytes a put of `key` and `value` (or a delete of `key`, with an
    /// empty `value`) adds to a batch, at most: the lengths are counted as
    /// five-byte varints.
    pub fn record_size(key: &[u8], value: &[u8]) -> usize {
        1 + 5 + key.len() + 5 + value.len()
    }

    /// Wraps encoded bytes, as read from a log record. Only the header length
    /// is checked here; [`WriteBatch::iter`] checks the records.
    pub fn from_data(data: Vec<u8>) -> Result<WriteBatch> {
        if data.len() < WRITE_BATCH_HEADER_SIZE {
            return Err(Error::corruption(0, "malformed WriteBatch (too small)"));
        }
        Ok(WriteBatch { rep: data })
    }

    /// Adds a put of `key` to `value`. An `InvalidArgument` error when the key
    /// or value is longer than the format's 32-bit length prefix allows, or
    /// the batch already holds `u32::MAX` records.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        check_length("key", key)?;
        check_length("value", value)?;
        self.bump_count(1)?;
        self.rep.push(ValueType::Value as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        Ok(())
    }

    /// Adds a delete of `key`. Errors as for [`WriteBatch::put`].
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        check_length("key", key)?;
        self.bump_count(1)?;
        self.rep.push(ValueType::Deletion as u8);
        put_length_prefixed(&mut self.rep, key);
        Ok(())
    }

    /// Removes every record and resets the sequence number to 0.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(WRITE_BATCH_HEADER_SIZE, 0);
    }

    /// Number of records, as the header says.
    pub fn count(&self) -> u32 {
        decode_fixed32(&self.rep[8..]).unwrap_or_default()
    }

    /// True when the header says there are no records.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Sequence number of the first record.
    pub fn sequence(&self) -> SequenceNumber {
        decode_fixed64(&self.rep).unwrap_or_default()
    }

    /// Sets the sequence number of the first record.
    pub fn set_sequence(&mut self, sequence: SequenceNumber) {
        self.rep[..8].copy_from_slice(&sequence.to_le_bytes());
    }

    /// Appends the records of `other` (LevelDB's `WriteBatchInternal::Append`);
    /// this batch keeps its sequence number. An `InvalidArgument` error when
    /// the combined count would not fit in 32 bits.
    pub fn append(&mut self, other: &WriteBatch) -> Result<()> {
        self.bump_count(other.count())?;
        self.rep
            .extend_from_slice(other.rep.get(WRITE_BATCH_HEADER_SIZE..).unwrap_or_default());
        Ok(())
    }

    /// Size of the encoding in bytes.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// The encoding, as written to the log.
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Consumes the batch, returning its encoding.
    pub fn into_data(self) -> Vec<u8> {
        self.rep
    }

    /// The records in order. Like LevelDB's `Iterate`, a malformed record or
    /// a count that disagrees with the records is an error at the point it is
    /// found, after the records before it were yielded; the iterator ends
    /// after an error.
    pub fn iter(&self) -> WriteBatchIter<'_> {
        WriteBatchIter {
            decoder: Decoder::new(&self.rep),
            header_checked: false,
            expected: self.count(),
            found: 0,
            done: false,
        }
    }

    fn bump_count(&mut self, added: u32) -> Result<()> {
        let count = self.count().checked_add(added).ok_or_else(|| {
            Error::InvalidArgument("WriteBatch would hold more than 2^32-1 records".to_string())
        })?;
        self.rep[8..WRITE_BATCH_HEADER_SIZE].copy_from_slice(&count.to_le_bytes());
        Ok(())
    }
}

fn check_length(what: &str, bytes: &[u8]) -> Result<()> {
    if u32::try_from(bytes.len()).is_err() {
        return Err(Error::InvalidArgument(format!(
            "WriteBatch {what} of {} bytes is longer than 2^32-1",
            bytes.len()
        )));
    }
    Ok(())
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = Result<BatchOp<'a>>;
    type IntoIter = WriteBatchIter<'a>;

    fn into_iter(self) -> WriteBatchIter<'a> {
        self.iter()
    }
}

/// Iterator over the records of a [`WriteBatch`]; see [`WriteBatch::iter`].
#[derive(Debug, Clone)]
pub struct WriteBatchIter<'a> {
    decoder: Decoder<'a>,
    header_checked: bool,
    expected: u32,
    found: u64,
    done: bool,
}

impl<'a> WriteBatchIter<'a> {
    fn next_op(&mut self) -> Result<Option<BatchOp<'a>>> {
        if !self.header_checked {
            self.header_checked = true;
            if self
                .decoder
                .bytes(WRITE_BATCH_HEADER_SIZE, "WriteBatch header")
                .is_err()
            {
                return Err(Error::corruption(0, "malformed WriteBatch (too small)"));
            }
        }
        if self.decoder.is_empty() {
            if self.found != u64::from(self.expected) {
                return Err(Error::corruption(8, "WriteBatch has wrong count"));
            }
            return Ok(None);
        }

        let start = self.decoder.position() as u64;
        self.found += 1;
        let tag = self.decoder.u8("WriteBatch tag")?;
        let op = match ValueType::from_u8(tag) {
            Some(ValueType::Value) => {
                let put = self.decoder.length_prefixed("key").and_then(|key| {
                    let value = self.decoder.length_prefixed("value")?;
                    Ok(BatchOp::Put { key, value })
                });
                put.map_err(|_| Error::corruption(start, "bad WriteBatch Put"))?
            }
            Some(ValueType::Deletion) => {
                let key = self
                    .decoder
                    .length_prefixed("key")
                    .map_err(|_| Error::corruption(start, "bad WriteBatch Delete"))?;
                BatchOp::Delete { key }
            }
            None => return Err(Error::corruption(start, "unknown WriteBatch tag")),
        };
        Ok(Some(op))
    }
}

impl<'a> Iterator for WriteBatchIter<'a> {
    type Item = Result<BatchOp<'a>>;

    fn next(&mut self) -> Option<Result<BatchOp<'a>>> {
        if self.done {
            return None;
        }
        let next = self.next_op();
        if !matches!(next, Ok(Some(_))) {
            self.done = true;
        }
        next.transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ops(batch: &WriteBatch) -> Result<Vec<BatchOp<'_>>> {
        batch.iter().collect()
    }

    fn reason(err: &Error) -> &str {
        match err {
            Error::Corruption { reason, .. } => reason,
            other => panic!("not a corruption: {other:?}"),
        }
    }

    #[test]
    fn empty_batch_is_just_a_header() {
        let batch = WriteBatch::new();
        assert_eq!(batch.data(), &[0; WRITE_BATCH_HEADER_SIZE]);
        assert_eq!(batch.count(), 0);
        assert!(batch.is_empty());
        assert_eq!(ops(&batch).expect("valid"), vec![]);
    }

    #[test]
    fn encoding_matches_leveldb_layout() {
        let mut batch = WriteBatch::new();
        batch.put(b"foo", b"bar").expect("put");
        batch.delete(b"box").expect("delete");
        batch.set_sequence(0x0102_0304_0506_0708);
        let mut expected = vec![8, 7, 6, 5, 4, 3, 2, 1, 2, 0, 0, 0];
        expected.extend_from_slice(b"\x01\x03foo\x03bar\x00\x03box");
        assert_eq!(batch.data(), &expected[..]);
        assert_eq!(batch.sequence(), 0x0102_0304_0506_0708);
        assert_eq!(batch.approximate_size(), expected.len());
        assert_eq!(
            ops(&batch).expect("valid"),
            vec![
                BatchOp::Put {
                    key: b"foo",
                    value: b"bar"
                },
                BatchOp::Delete { key: b"box" },
            ]
        );
    }

    #[test]
    fn clear_resets_records_and_sequence() {
        let mut batch = WriteBatch::new();
        batch.put(b"k", b"v").expect("put");
        batch.set_sequence(9);
        batch.clear();
        assert_eq!(batch, WriteBatch::new());
    }

    #[test]
    fn append_keeps_destination_sequence_and_adds_counts() {
        let mut dst = WriteBatch::new();
        dst.set_sequence(200);
        let mut src = WriteBatch::new();
        src.set_sequence(100);
        src.put(b"a", b"va").expect("put");
        dst.append(&src).expect("append");
        assert_eq!(dst.sequence(), 200);
        assert_eq!(dst.count(), 1);
        src.clear();
        src.put(b"b", b"vb").expect("put");
        src.delete(b"foo").expect("delete");
        dst.append(&src).expect("append");
        dst.append(&WriteBatch::new()).expect("append");
        assert_eq!(
            ops(&dst).expect("valid"),
            vec![
                BatchOp::Put {
                    key: b"a",
                    value: b"va"
                },
                BatchOp::Put {
                    key: b"b",
                    value: b"vb"
                },
                BatchOp::Delete { key: b"foo" },
            ]
        );
    }

    #[test]
    fn from_data_rejects_short_header() {
        let err = WriteBatch::from_data(vec![0; 11]).expect_err("too short");
        assert_eq!(reason(&err), "malformed WriteBatch (too small)");
        assert!(WriteBatch::from_data(vec![0; 12]).is_ok());
    }

    #[test]
    fn wrong_count_is_corruption_after_the_records() {
        let mut batch = WriteBatch::new();
        batch.put(b"k", b"v").expect("put");
        let mut data = batch.into_data();
        data[8] = 2;
        let batch = WriteBatch::from_data(data).expect("header present");
        let results: Vec<_> = batch.iter().collect();
        assert_eq!(results.len(), 2);
        assert!(results[0].is_ok());
        let err = results[1].as_ref().expect_err("count mismatch");
        assert_eq!(reason(err), "WriteBatch has wrong count");
    }

    #[test]
    fn unknown_tag_and_truncated_records_are_corruption() {
        let mut batch = WriteBatch::new();
        batch.put(b"key", b"value").expect("put");
        let good = batch.into_data();

        let mut bad_tag = good.clone();
        bad_tag[WRITE_BATCH_HEADER_SIZE] = 7;
        let batch = WriteBatch::from_data(bad_tag).expect("header present");
        let err = ops(&batch).expect_err("bad tag");
        assert_eq!(reason(&err), "unknown WriteBatch tag");

        for cut in 1..good.len() - WRITE_BATCH_HEADER_SIZE {
            let batch = WriteBatch::from_data(good[..good.len() - cut].to_vec()).expect("header");
            let err = ops(&batch).expect_err("truncated");
            assert_eq!(reason(&err), "bad WriteBatch Put", "cut {cut}");
        }

        let mut delete = WriteBatch::new();
        delete.delete(b"key").expect("delete");
        let data = delete.into_data();
        let batch = WriteBatch::from_data(data[..data.len() - 1].to_vec()).expect("header");
        assert_eq!(
            reason(&ops(&batch).expect_err("truncated")),
            "bad WriteBatch Delete"
        );
    }

    #[test]
    fn iterator_stops_after_an_error() {
        let batch =
            WriteBatch::from_data(vec![0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9]).expect("header");
        let mut iter = batch.iter();
        assert!(iter.next().expect("one item").is_err());
        assert!(iter.next().is_none());
    }

    fn arb_op() -> impl Strategy<Value = (bool, Vec<u8>, Vec<u8>)> {
        (
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
    }

    fn build(ops: &[(bool, Vec<u8>, Vec<u8>)]) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for (is_put, key, value) in ops {
            if *is_put {
                batch.put(key, value).expect("put");
            } else {
                batch.delete(key).expect("delete");
            }
        }
        batch
    }

    fn expected<'a>(ops: &'a [(bool, Vec<u8>, Vec<u8>)]) -> Vec<BatchOp<'a>> {
        ops.iter()
            .map(|(is_put, key, value)| {
                if *is_put {
                    BatchOp::Put { key, value }
                } else {
                    BatchOp::Delete { key }
                }
            })
            .collect()
    }

    proptest! {
        #[test]
        fn round_trip(
            first in proptest::collection::vec(arb_op(), 0..20),
            second in proptest::collection::vec(arb_op(), 0..20),
            sequence in any::<u64>(),
        ) {
            let mut batch = build(&first);
            batch.set_sequence(sequence);
            let reread = WriteBatch::from_data(batch.data().to_vec()).expect("header");
            prop_assert_eq!(reread.sequence(), sequence);
            prop_assert_eq!(reread.count() as usize, first.len());
            prop_assert_eq!(ops(&reread).expect("valid"), expected(&first));

            batch.append(&build(&second)).expect("append");
            let all: Vec<_> = first.iter().chain(&second).cloned().collect();
            prop_assert_eq!(batch.sequence(), sequence);
            let mut rebuilt = build(&all);
            rebuilt.set_sequence(sequence);
            prop_assert_eq!(&batch, &rebuilt);
            prop_assert_eq!(ops(&batch).expect("valid"), expected(&all));
        }

        #[test]
        fn damaged_batches_never_panic(
            ops_in in proptest::collection::vec(arb_op(), 0..10),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            keep in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            let mut data = build(&ops_in).into_data();
            for (at, mask) in flips {
                let at = at.index(data.len());
                data[at] ^= mask;
            }
            if let Some(keep) = keep {
                data.truncate(keep.index(data.len() + 1));
            }
            if let Ok(batch) = WriteBatch::from_data(data) {
                let results: Vec<_> = batch.iter().collect();
                // At most one error, and only at the end.
                let errors = results.iter().filter(|r| r.is_err()).count();
                prop_assert!(errors <= 1);
                if errors == 1 {
                    prop_assert!(results.last().is_some_and(|r| r.is_err()));
                }
                prop_assert!(results.len() <= batch.approximate_size());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(batch) = WriteBatch::from_data(data) {
                for result in &batch {
                    let _ = result;
                }
            }
        }
    }
}
