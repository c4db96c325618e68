//! Tables built by `TableBuilder` read back through `Table`, over random
//! entries and options: every entry, in both directions, with seeks and point
//! lookups through the filter.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use shale_format::format::{CompressionType, RandomAccess};
use shale_format::internal_key::{InternalKey, ValueType};
use shale_format::iterator::{collect_all, KvIterator};
use shale_format::options::TableOptions;
use shale_format::table::{ReadTableOptions, Table};
use shale_format::table_builder::TableBuilder;

fn build(entries: &[(Vec<u8>, Vec<u8>)], options: &TableOptions) -> Vec<u8> {
    let mut builder = TableBuilder::new(options.clone(), Vec::new());
    for (k, v) in entries {
        builder.add(k, v).expect("sorted input");
    }
    let (bytes, size) = builder.finish().expect("in-memory write");
    assert_eq!(bytes.len() as u64, size);
    bytes
}

/// With `mapped`, the table reads from shared bytes, as from a memory map:
/// uncompressed blocks are then borrowed rather than copied.
fn open_source(bytes: Vec<u8>, options: &TableOptions, mapped: bool) -> Table {
    let size = bytes.len() as u64;
    let source: Arc<dyn RandomAccess> = if mapped {
        Arc::new(Bytes::from(bytes))
    } else {
        Arc::new(bytes)
    };
    Table::open(
        source,
        size,
        "test.ldb",
        ReadTableOptions::from_table_options(options),
    )
    .expect("valid table")
}

fn open(bytes: Vec<u8>, options: &TableOptions) -> Table {
    open_source(bytes, options, false)
}

fn options(block_size: usize, restart_interval: usize, snappy: bool, bloom: bool) -> TableOptions {
    TableOptions {
        block_size,
        block_restart_interval: restart_interval,
        compression: if snappy {
            CompressionType::Snappy
        } else {
            CompressionType::None
        },
        ..TableOptions::bytewise(bloom.then_some(10))
    }
}

fn user_entries() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
    proptest::collection::btree_map(
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            "[a-c]{0,12}".prop_map(String::into_bytes),
        ],
        proptest::collection::vec(any::<u8>(), 0..300),
        0..400,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn user_key_tables_round_trip(entries in user_entries(), block_size in prop_oneof![Just(1usize), 64usize..8192],
                                  interval in 1usize..24, snappy in any::<bool>(), bloom in any::<bool>(), mapped in any::<bool>(),
                                  probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20)) {
        let opts = options(block_size, interval, snappy, bloom);
        let table = open_source(build(&entries, &opts), &opts, mapped);
        let mut it = table.iter();
        prop_assert_eq!(collect_all(&mut it).unwrap(), entries.clone());

        let mut backwards = Vec::new();
        it.seek_to_last();
        while it.valid() {
            backwards.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        backwards.reverse();
        prop_assert_eq!(&backwards, &entries);

        let probe_keys = probes.iter().chain(entries.iter().map(|(k, _)| k));
        for probe in probe_keys {
            let expected = entries.iter().find(|(k, _)| k >= probe);
            it.seek(probe);
            match expected {
                Some((k, v)) => {
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), k.as_slice());
                    prop_assert_eq!(it.value(), v.as_slice());
                }
                None => prop_assert!(!it.valid()),
            }
            // Present keys are always found by get, whatever the filter says.
            if let Some((k, v)) = entries.iter().find(|(k, _)| k == probe) {
                let got = table.get(probe).unwrap();
                prop_assert_eq!(got, Some((k.clone(), v.clone())));
            }
        }
    }

    #[test]
    fn internal_key_tables_round_trip(user_keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 0..20), 1..200),
                                      versions in 1u64..4, snappy in any::<bool>()) {
        let mut entries = Vec::new();
        let mut seq = 1000;
        for key in &user_keys {
            for v in 0..versions {
                let kind = if v % 2 == 1 { ValueType::Deletion } else { ValueType::Value };
                entries.push((InternalKey::new(key, seq - v, kind).into_encoded(), format!("{seq}-{v}").into_bytes()));
            }
            seq += 10;
        }
        let opts = TableOptions { compression: if snappy { CompressionType::Snappy } else { CompressionType::None }, block_size: 256, ..TableOptions::internal(Some(10)) };
        let table = open(build(&entries, &opts), &opts);
        prop_assert_eq!(collect_all(&mut table.iter()).unwrap(), entries.clone());
        // A lookup at the newest sequence lands on the newest version.
        for (key, _) in entries.iter().step_by(versions as usize) {
            let parsed = shale_format::internal_key::ParsedInternalKey::parse(key).unwrap();
            let lookup = InternalKey::new(parsed.user_key, shale_format::internal_key::MAX_SEQUENCE_NUMBER, ValueType::Value);
            let (found, _) = table.get(lookup.encoded()).unwrap().unwrap();
            prop_assert_eq!(&found, key);
        }
    }
}

#[test]
fn empty_table() {
    let opts = options(4096, 16, true, true);
    let table = open(build(&[], &opts), &opts);
    let mut it = table.iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    assert_eq!(table.get(b"x").unwrap(), None);
}

#[test]
fn one_mebibyte_values() {
    let opts = options(4096, 16, true, true);
    let big: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    let entries = vec![
        (b"".to_vec(), big.clone()),
        (b"\x80\xff".to_vec(), vec![7u8; 1 << 20]),
        (b"\xff\xff\xff".to_vec(), Vec::new()),
    ];
    let table = open(build(&entries, &opts), &opts);
    assert_eq!(collect_all(&mut table.iter()).unwrap(), entries);
}

#[test]
fn out_of_order_keys_are_rejected() {
    let mut builder = TableBuilder::new(options(4096, 16, false, false), Vec::new());
    builder.add(b"b", b"").unwrap();
    assert!(builder.add(b"a", b"").is_err());
    assert!(builder.add(b"b", b"").is_err());
}

#[test]
fn approximate_offsets_grow_with_keys() {
    let opts = options(1024, 16, false, false);
    let entries: Vec<_> = (0..1000u32)
        .map(|i| (format!("{i:08}").into_bytes(), vec![b'v'; 100]))
        .collect();
    let table = open(build(&entries, &opts), &opts);
    let a = table.approximate_offset_of(b"00000000");
    let b = table.approximate_offset_of(b"00000500");
    let c = table.approximate_offset_of(b"99999999");
    assert_eq!(a, 0);
    assert!((45_000..60_000).contains(&b), "{b}");
    assert!(c > 100_000, "{c}");
}
