//! Times what a flush does with a memtable: walks it in key order and
//! builds a table of its entries (internal keys, 4 KiB blocks, a 10-bit
//! Bloom filter, no compression, as `scripts/compare` configures the
//! databases it fills) into memory, so that no write to a file is timed.
//! The memtables hold db_bench-style entries (16-byte `%016d` keys of
//! random numbers below 10 M, 32-byte values) inserted in random order, as
//! a fillrandom leaves them: a walk in key order visits nodes scattered
//! over the arena, about one cache miss per entry.
//!
//! Each memtable is built into a table twice, through the cursor that walks
//! the list (`MemTable::iter`) and through the one a flush uses, which
//! gathers the entries first (`MemTable::frozen_iter`), in turns (which
//! goes first alternates), with the caches emptied of the memtable before
//! each. Prints the mean time per entry of each.
//!
//! Usage: cargo bench -p shale --bench memtable_flush -- [ENTRIES [TABLES]]
//! (defaults 90000, about the memtable of an 8 MiB write buffer, and 20).

use std::sync::Arc;
use std::time::{Duration, Instant};

use shale::format::format::CompressionType;
use shale::format::internal_key::ValueType;
use shale::format::iterator::KvIterator;
use shale::format::options::TableOptions;
use shale::format::table_builder::TableBuilder;
use shale::memtable::MemTable;

fn main() {
    // `cargo bench` passes `--bench`, which is not a count.
    let mut args = std::env::args()
        .skip(1)
        .filter(|arg| arg != "--bench")
        .map(|arg| {
            arg.parse::<usize>()
                .unwrap_or_else(|_| panic!("not a count: {arg}"))
        });
    let entries = args.next().unwrap_or(90_000);
    let tables = args.next().unwrap_or(20);
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut sequence = 0u64;
    let value = [b'x'; 32];
    // Larger than the last-level cache: writing it pushes the memtable out.
    let mut evict = vec![0u8; 64 << 20];
    let mut totals = [Duration::ZERO; 2];
    let mut table_bytes = [0; 2];
    for round in 0..tables {
        let mem = Arc::new(MemTable::new());
        for _ in 0..entries {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            sequence += 1;
            let key = format!("{:016}", rng % 10_000_000);
            mem.add(sequence, ValueType::Value, key.as_bytes(), &value);
        }
        for turn in 0..2 {
            let frozen = (round + turn) % 2;
            for byte in evict.iter_mut().step_by(64) {
                *byte = byte.wrapping_add(1);
            }
            std::hint::black_box(&evict);
            let start = Instant::now();
            let mut iter: Box<dyn KvIterator> = if frozen == 1 {
                Box::new(mem.frozen_iter())
            } else {
                Box::new(mem.iter())
            };
            let table = build(iter.as_mut());
            totals[frozen] += start.elapsed();
            table_bytes[frozen] += table.len();
        }
    }
    assert_eq!(
        table_bytes[0], table_bytes[1],
        "both cursors build the same tables"
    );
    let per_entry = |total: Duration| total.as_nanos() as f64 / (entries * tables) as f64;
    println!(
        "walk: {:.1} ns/entry, gathered: {:.1} ns/entry ({} KiB per table)",
        per_entry(totals[0]),
        per_entry(totals[1]),
        table_bytes[0] / tables / 1024
    );
}

/// Builds a table of `iter`'s entries in memory.
fn build(iter: &mut dyn KvIterator) -> Vec<u8> {
    let options = TableOptions {
        compression: CompressionType::None,
        ..TableOptions::internal(Some(10))
    };
    let mut builder = TableBuilder::new(options, Vec::new());
    iter.seek_to_first();
    while iter.valid() {
        builder
            .add(iter.key(), iter.value())
            .expect("keys come in order");
        iter.next();
    }
    let (table, _) = builder.finish().expect("a table in memory");
    table
}
