//! Damaged tables: truncated or bit-flipped anywhere. Opening and reading must
//! either fail with a `Corruption` error that names the file, or (for bytes
//! no reader looks at, such as footer padding) return exactly the entries
//! that were written. Never a panic, never other data.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use shale_format::format::{CompressionType, RandomAccess};
use shale_format::iterator::{collect_all, Entry, KvIterator};
use shale_format::options::TableOptions;
use shale_format::table::{ReadTableOptions, Table};
use shale_format::table_builder::TableBuilder;
use shale_format::Error;

fn build(entries: &[(Vec<u8>, Vec<u8>)], options: &TableOptions) -> Vec<u8> {
    let mut builder = TableBuilder::new(options.clone(), Vec::new());
    for (k, v) in entries {
        builder.add(k, v).expect("sorted input");
    }
    builder.finish().expect("in-memory write").0
}

/// Reads everything a reader can reach: a full scan forwards and backwards,
/// and point lookups of every written key.
/// With `mapped`, the table reads from shared bytes, as from a memory map:
/// uncompressed blocks are then borrowed rather than copied.
fn read_everything(
    bytes: Vec<u8>,
    options: &TableOptions,
    keys: &[Vec<u8>],
    mapped: bool,
) -> Result<Vec<Entry>, Error> {
    let size = bytes.len() as u64;
    let source: Arc<dyn RandomAccess> = if mapped {
        Arc::new(Bytes::from(bytes))
    } else {
        Arc::new(bytes)
    };
    let table = Table::open(
        source,
        size,
        "000042.ldb",
        ReadTableOptions::from_table_options(options),
    )?;
    let forward = collect_all(&mut table.iter())?;
    let mut it = table.iter();
    it.seek_to_last();
    let mut steps = 0;
    while it.valid() {
        it.prev();
        steps += 1;
        assert!(steps <= forward.len() + 1, "backward scan does not end");
    }
    it.status()?;
    for key in keys {
        table.get(key)?;
    }
    Ok(forward)
}

fn check_outcome(result: Result<Vec<Entry>, Error>, entries: &[(Vec<u8>, Vec<u8>)]) {
    match result {
        Ok(found) => assert_eq!(found, entries, "damage went unnoticed and changed the data"),
        Err(Error::Corruption { location, reason }) => {
            assert_eq!(
                location.file, "000042.ldb",
                "error without the file name: {reason}"
            );
        }
        Err(other) => panic!("expected a corruption error, got {other}"),
    }
}

fn entries_strategy() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
    proptest::collection::btree_map(
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::collection::vec(any::<u8>(), 0..100),
        1..120,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn bit_flips_are_detected(entries in entries_strategy(), snappy in any::<bool>(), mapped in any::<bool>(),
                              flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4)) {
        let options = TableOptions {
            block_size: 128,
            compression: if snappy { CompressionType::Snappy } else { CompressionType::None },
            ..TableOptions::bytewise(Some(10))
        };
        let mut bytes = build(&entries, &options);
        for (index, bit) in flips {
            let at = index.index(bytes.len());
            bytes[at] ^= 1 << bit;
        }
        let keys: Vec<Vec<u8>> = entries.iter().map(|(k, _)| k.clone()).collect();
        check_outcome(read_everything(bytes, &options, &keys, mapped), &entries);
    }

    #[test]
    fn truncation_is_detected(entries in entries_strategy(), cut in any::<prop::sample::Index>(), mapped in any::<bool>()) {
        let options = TableOptions { block_size: 128, ..TableOptions::bytewise(Some(10)) };
        let mut bytes = build(&entries, &options);
        let keep = cut.index(bytes.len());
        bytes.truncate(keep);
        let keys: Vec<Vec<u8>> = entries.iter().map(|(k, _)| k.clone()).collect();
        let result = read_everything(bytes, &options, &keys, mapped);
        prop_assert!(matches!(result, Err(Error::Corruption { .. })), "{:?}", result.map(|v| v.len()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), magic in any::<bool>(), mapped in any::<bool>()) {
        let mut bytes = bytes;
        if magic && bytes.len() >= 48 {
            // Give the garbage a valid magic number so the handles get parsed.
            let n = bytes.len();
            bytes[n - 8..].copy_from_slice(&0xdb47_7524_8b80_fb57u64.to_le_bytes());
        }
        let options = TableOptions::bytewise(Some(10));
        let _ = read_everything(bytes, &options, &[b"a".to_vec()], mapped);
    }
}

#[test]
fn corrupt_data_block_names_file_and_offset() {
    let options = TableOptions {
        block_size: 64,
        compression: CompressionType::None,
        ..TableOptions::bytewise(None)
    };
    let entries: Vec<_> = (0..100u32)
        .map(|i| (format!("key{i:05}").into_bytes(), b"value".to_vec()))
        .collect();
    let mut bytes = build(&entries, &options);
    bytes[200] ^= 0x40;
    for mapped in [false, true] {
        let err = read_everything(bytes.clone(), &options, &[], mapped).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("000042.ldb"), "{text}");
        assert!(text.contains("checksum mismatch"), "{text}");
    }
}
