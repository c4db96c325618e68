//! Fuzzes `WriteBatch::from_data` and `WriteBatch::iter`: arbitrary bytes
//! must wrap or fail, and iterate to an end or an error, without panicking.
//! A batch whose records all decode is rebuilt with `put`/`delete` (and
//! copied with `append`); the rebuilt batch must decode to the same records,
//! and be byte-for-byte the input when it is as long (so every varint in the
//! input was minimal).
#![no_main]

use libfuzzer_sys::fuzz_target;
use shale_format::write_batch::{BatchOp, WriteBatch};

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = WriteBatch::from_data(data.to_vec()) else {
        assert!(data.len() < 12);
        return;
    };
    let _ = (
        batch.count(),
        batch.sequence(),
        batch.is_empty(),
        batch.approximate_size(),
    );

    let mut ops = Vec::new();
    let mut failed = false;
    for op in &batch {
        match op {
            Ok(op) => ops.push(op),
            Err(_) => failed = true,
        }
        // Every record takes at least 2 bytes after the 12-byte header.
        assert!(ops.len() <= data.len().saturating_sub(12) / 2 + 1);
    }
    // The iterator is fused after its end or its error.
    let mut iter = batch.iter();
    for _ in iter.by_ref() {}
    assert!(iter.next().is_none());

    if failed {
        return;
    }
    assert_eq!(ops.len() as u64, u64::from(batch.count()));

    let mut rebuilt = WriteBatch::new();
    rebuilt.set_sequence(batch.sequence());
    for op in &ops {
        match *op {
            BatchOp::Put { key, value } => rebuilt.put(key, value).expect("put"),
            BatchOp::Delete { key } => rebuilt.delete(key).expect("delete"),
        }
    }
    assert_eq!(rebuilt.count(), batch.count());
    assert_eq!(rebuilt.sequence(), batch.sequence());
    assert!(rebuilt.data().len() <= data.len());
    if rebuilt.data().len() == data.len() {
        assert_eq!(rebuilt.data(), data, "same length but different bytes");
    }
    let reread = WriteBatch::from_data(rebuilt.data().to_vec()).expect("rebuilt batch");
    let reread_ops: Vec<BatchOp<'_>> = reread
        .iter()
        .collect::<Result<_, _>>()
        .expect("rebuilt batch does not decode");
    assert_eq!(reread_ops, ops);

    let mut appended = WriteBatch::new();
    appended.append(&batch).expect("append");
    assert_eq!(appended.count(), batch.count());
    let appended_ops: Vec<BatchOp<'_>> = appended
        .iter()
        .collect::<Result<_, _>>()
        .expect("appended batch does not decode");
    assert_eq!(appended_ops, ops);
});
