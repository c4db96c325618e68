//! Compatibility with the real LevelDB 1.23 (Debian's libleveldb, through the
//! `leveldb-shim` test crate). Each test first asks `leveldb_shim::require()`:
//! without the library it skips with a printed reason, unless
//! `SHALE_REQUIRE_ALL=1` (set in CI), where it fails.
//!
//! What is proven here:
//! - without compression, our table bytes equal LevelDB's `TableBuilder`
//!   bytes for the same entries and options; with Snappy, each side reads the
//!   other's tables with the same contents;
//! - our Bloom filters are byte-identical to LevelDB's and answer the same;
//! - logs, write batches, MANIFESTs and tables written by LevelDB's own
//!   database are read here with the same contents;
//! - logs, MANIFESTs and tables written here are parsed by LevelDB's
//!   `DumpFile` with the same contents.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use shale_format::bloom::{BloomFilterPolicy, FilterPolicy};
use shale_format::format::CompressionType;
use shale_format::internal_key::{InternalKey, ParsedInternalKey, ValueType};
use shale_format::iterator::collect_all;
use shale_format::log_reader::LogReader;
use shale_format::log_writer::LogWriter;
use shale_format::options::TableOptions;
use shale_format::table::{ReadTableOptions, Table};
use shale_format::table_builder::TableBuilder;
use shale_format::version_edit::{FileMetaData, VersionEdit};
use shale_format::write_batch::{BatchOp, WriteBatch};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn our_options(
    block_size: usize,
    restart_interval: usize,
    bloom: Option<u32>,
    snappy: bool,
) -> TableOptions {
    TableOptions {
        block_size,
        block_restart_interval: restart_interval,
        compression: if snappy {
            CompressionType::Snappy
        } else {
            CompressionType::None
        },
        ..TableOptions::bytewise(bloom)
    }
}

fn their_options(
    block_size: usize,
    restart_interval: usize,
    bloom: Option<u32>,
    snappy: bool,
) -> leveldb_shim::TableOptions {
    leveldb_shim::TableOptions {
        block_size,
        block_restart_interval: restart_interval as i32,
        bloom_bits_per_key: bloom.map(|b| b as i32),
        snappy,
    }
}

fn build_ours(entries: &Entries, options: &TableOptions) -> Vec<u8> {
    let mut builder = TableBuilder::new(options.clone(), Vec::new());
    for (k, v) in entries {
        builder.add(k, v).unwrap();
    }
    builder.finish().unwrap().0
}

fn read_ours(bytes: Vec<u8>, options: &TableOptions, name: &str) -> Entries {
    let size = bytes.len() as u64;
    let table = Table::open(
        Arc::new(bytes),
        size,
        name,
        ReadTableOptions::from_table_options(options),
    )
    .unwrap();
    collect_all(&mut table.iter()).unwrap()
}

/// Keys and values shaped like a real workload: shared prefixes, bytes >= 0x80,
/// empty keys and values.
fn entries_strategy(max: usize) -> impl Strategy<Value = Entries> {
    proptest::collection::btree_map(
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..30),
            (0u32..100_000).prop_map(|n| format!("{n:016}").into_bytes()),
            "user[0-9]{1,6}".prop_map(String::into_bytes),
        ],
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            (0usize..300, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        ],
        0..max,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn uncompressed_table_bytes_equal_leveldb(entries in entries_strategy(600),
                                              block_size in prop_oneof![Just(1usize), Just(4096usize), 100usize..3000],
                                              restart_interval in 1usize..20,
                                              bloom in prop_oneof![Just(None), (1u32..20).prop_map(Some)]) {
        if !leveldb_shim::require() { return Ok(()); }
        let ours = build_ours(&entries, &our_options(block_size, restart_interval, bloom, false));
        let theirs = leveldb_shim::build_table(&entries, &their_options(block_size, restart_interval, bloom, false)).unwrap();
        prop_assert!(ours == theirs, "table bytes differ ({} vs {} bytes)", ours.len(), theirs.len());
    }

    #[test]
    fn snappy_tables_cross_read(entries in entries_strategy(400), bloom in any::<bool>()) {
        if !leveldb_shim::require() { return Ok(()); }
        let bloom = bloom.then_some(10);
        let ours_opts = our_options(4096, 16, bloom, true);
        let their_opts = their_options(4096, 16, bloom, true);
        let ours = build_ours(&entries, &ours_opts);
        prop_assert_eq!(&leveldb_shim::read_table(&ours, &their_opts).unwrap(), &entries);
        let theirs = leveldb_shim::build_table(&entries, &their_opts).unwrap();
        prop_assert_eq!(&read_ours(theirs, &ours_opts, "leveldb.ldb"), &entries);
    }

    #[test]
    fn bloom_filters_equal_leveldb(keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..300),
                                   bits_per_key in 1u32..40,
                                   probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..50)) {
        if !leveldb_shim::require() { return Ok(()); }
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let policy = BloomFilterPolicy::new(bits_per_key);
        let mut ours = Vec::new();
        policy.create_filter(&refs, &mut ours);
        let theirs = leveldb_shim::bloom_create_filter(bits_per_key as i32, &refs).unwrap();
        prop_assert_eq!(&ours, &theirs);
        for key in probes.iter().chain(keys.iter()) {
            prop_assert_eq!(policy.key_may_match(key, &ours),
                            leveldb_shim::bloom_key_may_match(bits_per_key as i32, key, &theirs).unwrap());
        }
    }
}

#[test]
fn large_values_and_snappy_blocks_cross_read() {
    if !leveldb_shim::require() {
        return;
    }
    let entries: Entries = vec![
        (Vec::new(), Vec::new()),
        (b"big".to_vec(), vec![b'x'; 1 << 20]),
        (
            b"mixed\x80\xff".to_vec(),
            (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect(),
        ),
    ];
    for snappy in [false, true] {
        let ours_opts = our_options(4096, 16, Some(10), snappy);
        let their_opts = their_options(4096, 16, Some(10), snappy);
        let ours = build_ours(&entries, &ours_opts);
        assert_eq!(
            leveldb_shim::read_table(&ours, &their_opts).unwrap(),
            entries
        );
        if !snappy {
            assert_eq!(
                ours,
                leveldb_shim::build_table(&entries, &their_opts).unwrap()
            );
        }
    }
}

/// What a database should hold after a list of operations.
fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().ends_with(suffix))
        .collect();
    out.sort();
    out
}

fn read_log_records(path: &Path) -> Vec<Vec<u8>> {
    let file = fs::File::open(path).unwrap();
    let mut drops = Vec::new();
    let mut reader = LogReader::new(
        file,
        |bytes: u64, err: shale_format::Error| drops.push((bytes, err.to_string())),
        true,
        0,
    );
    let mut records = Vec::new();
    while let Some(record) = reader.read_record().unwrap() {
        records.push(record);
    }
    drop(reader);
    assert!(
        drops.is_empty(),
        "{}: corruption reported: {drops:?}",
        path.display()
    );
    records
}

#[test]
fn leveldb_database_files_read_here() {
    if !leveldb_shim::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = leveldb_shim::DbOptions {
        write_buffer_size: 64 << 10,
        bloom_bits_per_key: Some(10),
        ..leveldb_shim::DbOptions::default()
    };
    let mut model = BTreeMap::new();
    let mut all_ops = Vec::new();
    {
        let mut db = leveldb_shim::Db::open(&path, &options).unwrap();
        for round in 0..40u32 {
            let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..50u32)
                .map(|i| {
                    let key =
                        format!("key{:06}\u{00e9}", (i * 7919 + round * 31) % 1500).into_bytes();
                    if i % 9 == 4 {
                        (key, None)
                    } else {
                        (
                            key,
                            Some(
                                format!("value {round} {i} {}", "v".repeat((i % 40) as usize))
                                    .into_bytes(),
                            ),
                        )
                    }
                })
                .collect();
            let borrowed: Vec<(&[u8], Option<&[u8]>)> = ops
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            db.write(&borrowed, false).unwrap();
            apply(&mut model, &ops);
            all_ops.extend(ops);
        }
        db.put(b"large", &vec![b'L'; 1 << 20], false).unwrap();
        model.insert(b"large".to_vec(), vec![b'L'; 1 << 20]);
        all_ops.push((b"large".to_vec(), Some(vec![b'L'; 1 << 20])));
    }

    // The MANIFEST: the first edit names the comparator; replaying every edit
    // gives the live tables, whose files exist with the recorded sizes.
    let current = fs::read_to_string(path.join("CURRENT")).unwrap();
    let manifest = path.join(current.trim_end());
    let mut live: BTreeMap<u64, (usize, FileMetaData)> = BTreeMap::new();
    let mut saw_comparator = false;
    for record in read_log_records(&manifest) {
        let edit = VersionEdit::decode(&record).unwrap();
        if let Some(name) = &edit.comparator {
            assert_eq!(name, "leveldb.BytewiseComparator");
            saw_comparator = true;
        }
        for (level, number) in &edit.deleted_files {
            live.remove(number);
            let _ = level;
        }
        for (level, meta) in &edit.new_files {
            live.insert(meta.number, (*level, meta.clone()));
        }
    }
    assert!(saw_comparator);
    assert!(!live.is_empty(), "LevelDB flushed no table");

    // Every live table reads with our reader; keys are internal keys within
    // the recorded bounds. The newest version of each user key across the
    // tables and the log must give the model.
    let mut newest: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
    let mut note = |user_key: &[u8], seq: u64, value: Option<Vec<u8>>| {
        let slot = newest.entry(user_key.to_vec()).or_insert((0, None));
        if seq >= slot.0 {
            *slot = (seq, value);
        }
    };
    let table_options = TableOptions::internal(Some(10));
    for (number, (_, meta)) in &live {
        let name = format!("{number:06}.ldb");
        let bytes = fs::read(path.join(&name)).unwrap();
        assert_eq!(bytes.len() as u64, meta.file_size, "{name}");
        let entries = read_ours(bytes, &table_options, &name);
        assert_eq!(entries.first().unwrap().0, meta.smallest.encoded());
        assert_eq!(entries.last().unwrap().0, meta.largest.encoded());
        for (key, value) in entries {
            let parsed = ParsedInternalKey::parse(&key).unwrap();
            let value = (parsed.value_type == ValueType::Value).then_some(value);
            note(parsed.user_key, parsed.sequence, value);
        }
    }
    for log in files_with_suffix(&path, ".log") {
        for record in read_log_records(&log) {
            let batch = WriteBatch::from_data(record).unwrap();
            for (seq, op) in (batch.sequence()..).zip(batch.iter()) {
                match op.unwrap() {
                    BatchOp::Put { key, value } => note(key, seq, Some(value.to_vec())),
                    BatchOp::Delete { key } => note(key, seq, None),
                }
            }
        }
    }
    let rebuilt: BTreeMap<Vec<u8>, Vec<u8>> = newest
        .into_iter()
        .filter_map(|(k, (_, v))| v.map(|v| (k, v)))
        .collect();
    assert_eq!(rebuilt, model);
}

/// LevelDB's `EscapeString`: printable ASCII as is, other bytes as `\xNN`.
fn escape(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if (b' '..=b'~').contains(&b) {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

#[test]
fn our_log_is_parsed_by_leveldb_dumpfile() {
    if !leveldb_shim::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000003.log");
    let mut writer = LogWriter::new(fs::File::create(&path).unwrap());
    let mut expected = String::new();
    let mut seq = 1u64;
    for round in 0..30u32 {
        let mut batch = WriteBatch::new();
        batch.set_sequence(seq);
        let mut lines = String::new();
        for i in 0..(round % 7 + 1) {
            let key = format!("k{round}-{i}\x01\u{00ff}").into_bytes();
            if i % 3 == 2 {
                batch.delete(&key).unwrap();
                lines += &format!("  del '{}'\n", escape(&key));
            } else {
                let value = vec![b'a' + (i as u8); (round as usize * 997) % 40_000];
                batch.put(&key, &value).unwrap();
                lines += &format!("  put '{}' '{}'\n", escape(&key), escape(&value));
            }
        }
        let offset = writer.file_len();
        writer.add_record(batch.data()).unwrap();
        expected += &format!("--- offset {offset}; sequence {seq}\n{lines}");
        seq += u64::from(batch.count());
    }
    writer.flush().unwrap();
    drop(writer);
    let dumped = leveldb_shim::dump_file(&path).unwrap();
    assert_eq!(dumped, expected);
}

#[test]
fn our_manifest_is_parsed_by_leveldb_dumpfile() {
    if !leveldb_shim::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("MANIFEST-000002");
    let mut first = VersionEdit {
        comparator: Some("leveldb.BytewiseComparator".into()),
        log_number: Some(3),
        prev_log_number: Some(0),
        next_file_number: Some(7),
        last_sequence: Some(1234),
        ..VersionEdit::default()
    };
    first.add_file(
        0,
        FileMetaData {
            number: 5,
            file_size: 4096,
            smallest: InternalKey::new(b"a\x80", 10, ValueType::Value),
            largest: InternalKey::new(b"zz", 3, ValueType::Deletion),
        },
    );
    first
        .compact_pointers
        .push((1, InternalKey::new(b"mid", 99, ValueType::Value)));
    let mut second = VersionEdit::default();
    second.delete_file(0, 5);
    second.add_file(
        1,
        FileMetaData {
            number: 6,
            file_size: 8192,
            smallest: InternalKey::new(b"a\x80", 10, ValueType::Value),
            largest: InternalKey::new(b"zz", 3, ValueType::Deletion),
        },
    );
    second.next_file_number = Some(8);
    let mut writer = LogWriter::new(fs::File::create(&path).unwrap());
    let offsets: Vec<u64> = [&first, &second]
        .iter()
        .map(|edit| {
            let offset = writer.file_len();
            writer.add_record(&edit.encode()).unwrap();
            offset
        })
        .collect();
    writer.flush().unwrap();
    drop(writer);

    let dumped = leveldb_shim::dump_file(&path).unwrap();
    let expected = format!(
        "--- offset {}; VersionEdit {{\n  Comparator: leveldb.BytewiseComparator\n  LogNumber: 3\n  PrevLogNumber: 0\n  NextFile: 7\n  LastSeq: 1234\n  CompactPointer: 1 'mid' @ 99 : 1\n  AddFile: 0 5 4096 'a\\x80' @ 10 : 1 .. 'zz' @ 3 : 0\n}}\n\
         --- offset {}; VersionEdit {{\n  NextFile: 8\n  RemoveFile: 0 5\n  AddFile: 1 6 8192 'a\\x80' @ 10 : 1 .. 'zz' @ 3 : 0\n}}\n",
        offsets[0], offsets[1]
    );
    assert_eq!(dumped, expected);
}

#[test]
fn our_internal_key_table_is_parsed_by_leveldb_dumpfile() {
    if !leveldb_shim::require() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (snappy, name) in [(false, "000005.ldb"), (true, "000006.ldb")] {
        let options = TableOptions {
            compression: if snappy {
                CompressionType::Snappy
            } else {
                CompressionType::None
            },
            block_size: 512,
            ..TableOptions::internal(Some(10))
        };
        let mut builder = TableBuilder::new(options, Vec::new());
        let mut expected = String::new();
        for i in 0..500u64 {
            let user_key = format!("user\u{00e9}{:05}", i / 2).into_bytes();
            let seq = 10_000 - i;
            let (kind, word) = if i % 5 == 1 {
                (ValueType::Deletion, "del")
            } else {
                (ValueType::Value, "val")
            };
            let value = if kind == ValueType::Value {
                format!("v{i}").repeat(i as usize % 7).into_bytes()
            } else {
                Vec::new()
            };
            let key = InternalKey::new(&user_key, seq, kind);
            builder.add(key.encoded(), &value).unwrap();
            expected += &format!(
                "'{}' @ {seq} : {word} => '{}'\n",
                escape(&user_key),
                escape(&value)
            );
        }
        let (bytes, _) = builder.finish().unwrap();
        let path = dir.path().join(name);
        fs::write(&path, bytes).unwrap();
        assert_eq!(leveldb_shim::dump_file(&path).unwrap(), expected, "{name}");
    }
}
