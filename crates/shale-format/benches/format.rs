//! One criterion benchmark per component of the format: blocks, tables (with
//! LevelDB's own `TableBuilder` measured in the same run for comparison),
//! Bloom filters and logs. Keys are db_bench's: 16-byte zero-padded decimals.
//!
//! `cargo bench -p shale-format --bench format`

#![allow(clippy::unwrap_used, reason = "benchmark setup")]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use shale_format::block::Block;
use shale_format::block_builder::BlockBuilder;
use shale_format::bloom::{BloomFilterPolicy, FilterPolicy};
use shale_format::comparator::BytewiseComparator;
use shale_format::format::CompressionType;
use shale_format::iterator::KvIterator;
use shale_format::log_reader::{IgnoreCorruption, LogReader};
use shale_format::log_writer::LogWriter;
use shale_format::options::TableOptions;
use shale_format::table_builder::TableBuilder;

const VALUE_SIZES: [usize; 2] = [32, 256];

/// `n` sorted entries with db_bench-style keys and pseudo-random values.
fn entries(n: usize, value_size: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut keys: Vec<u64> = (0..n).map(|_| next() % 100_000_000).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let value: Vec<u8> = (0..value_size)
                .map(|_| b' ' + (next() % 95) as u8)
                .collect();
            (format!("{k:016}").into_bytes(), value)
        })
        .collect()
}

fn total_bytes(entries: &[(Vec<u8>, Vec<u8>)]) -> u64 {
    entries
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum()
}

fn block(c: &mut Criterion) {
    for value_size in VALUE_SIZES {
        // About one 4 KiB block's worth of entries.
        let data = entries(4096 / (16 + value_size) + 1, value_size);
        let mut group = c.benchmark_group(format!("block/value{value_size}"));
        group.throughput(Throughput::Bytes(total_bytes(&data)));
        group.bench_function("build", |b| {
            let mut builder = BlockBuilder::new(16);
            b.iter(|| {
                builder.reset();
                for (k, v) in &data {
                    builder.add(k, v);
                }
                black_box(builder.finish().len())
            })
        });
        let mut builder = BlockBuilder::new(16);
        for (k, v) in &data {
            builder.add(k, v);
        }
        let block = Block::new(builder.finish().to_vec()).unwrap();
        group.bench_function("parse", |b| {
            b.iter(|| {
                let mut it = block.iter(Arc::new(BytewiseComparator));
                it.seek_to_first();
                let mut n = 0;
                while it.valid() {
                    n += it.key().len() + it.value().len();
                    it.next();
                }
                black_box(n)
            })
        });
        group.finish();
    }
}

fn table(c: &mut Criterion) {
    let leveldb = leveldb_shim::available();
    if !leveldb {
        eprintln!("LevelDB not available: the leveldb comparison is skipped");
    }
    for value_size in VALUE_SIZES {
        let data = entries(20_000, value_size);
        let mut group = c.benchmark_group(format!("table_build/value{value_size}"));
        group.throughput(Throughput::Bytes(total_bytes(&data)));
        group.sample_size(20);
        for (name, compression) in [
            ("none", CompressionType::None),
            ("snappy", CompressionType::Snappy),
        ] {
            let options = TableOptions {
                compression,
                ..TableOptions::bytewise(Some(10))
            };
            group.bench_function(format!("shale/{name}"), |b| {
                b.iter(|| {
                    let mut builder =
                        TableBuilder::new(options.clone(), Vec::with_capacity(1 << 20));
                    for (k, v) in &data {
                        builder.add(k, v).unwrap();
                    }
                    black_box(builder.finish().unwrap().1)
                })
            });
            if leveldb {
                let flat = leveldb_shim::FlatEntries::from_pairs(&data).unwrap();
                let shim_options = leveldb_shim::TableOptions {
                    bloom_bits_per_key: Some(10),
                    snappy: compression == CompressionType::Snappy,
                    ..leveldb_shim::TableOptions::default()
                };
                group.bench_function(format!("leveldb/{name}"), |b| {
                    b.iter(|| {
                        black_box(
                            leveldb_shim::build_table_flat(&flat, &shim_options)
                                .unwrap()
                                .len(),
                        )
                    })
                });
            }
        }
        group.finish();
    }
}

fn bloom(c: &mut Criterion) {
    let policy = BloomFilterPolicy::new(10);
    let data = entries(10_000, 0);
    let keys: Vec<&[u8]> = data.iter().map(|(k, _)| k.as_slice()).collect();
    let mut group = c.benchmark_group("bloom");
    group.throughput(Throughput::Elements(keys.len() as u64));
    group.bench_function("build", |b| {
        b.iter_batched_ref(
            Vec::new,
            |filter| policy.create_filter(&keys, filter),
            BatchSize::SmallInput,
        )
    });
    let mut filter = Vec::new();
    policy.create_filter(&keys, &mut filter);
    group.bench_function("probe", |b| {
        b.iter(|| {
            keys.iter()
                .filter(|k| policy.key_may_match(k, &filter))
                .count()
        })
    });
    group.finish();
}

fn log(c: &mut Criterion) {
    for value_size in VALUE_SIZES {
        let data = entries(20_000, value_size);
        let records: Vec<Vec<u8>> = data
            .iter()
            .map(|(k, v)| {
                let mut batch = shale_format::write_batch::WriteBatch::new();
                batch.put(k, v).unwrap();
                batch.data().to_vec()
            })
            .collect();
        let bytes: u64 = records.iter().map(|r| r.len() as u64).sum();
        let mut group = c.benchmark_group(format!("log/value{value_size}"));
        group.throughput(Throughput::Bytes(bytes));
        group.sample_size(20);
        group.bench_function("write", |b| {
            b.iter(|| {
                let mut writer = LogWriter::new(Vec::with_capacity(8 << 20));
                for r in &records {
                    writer.add_record(r).unwrap();
                }
                black_box(writer.into_inner().len())
            })
        });
        let mut writer = LogWriter::new(Vec::new());
        for r in &records {
            writer.add_record(r).unwrap();
        }
        let log = writer.into_inner();
        group.bench_function("read", |b| {
            b.iter(|| {
                let mut reader = LogReader::new(&log[..], IgnoreCorruption, true, 0);
                let mut n = 0;
                while let Some(record) = reader.read_record().unwrap() {
                    n += record.len();
                }
                black_box(n)
            })
        });
        group.finish();
    }
}

criterion_group!(benches, block, table, bloom, log);
criterion_main!(benches);
