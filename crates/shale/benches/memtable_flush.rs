//! Times what a flush does with a memtable: walks it in key order and
//! builds a table of its entries (internal keys, 4 KiB blocks, a 10-bit
//! Bloom filter, no compression, as `scripts/compare` configures the
//! databases it fills) into memory, so that no write to a file is timed.
//! The memtables hold db_bench-style entries (16-byte `%016d` keys of
//! random numbers below 10 M, 32-byte values) inserted in random order, as
//! a fillrandom leaves them: a walk in key order visits nodes scattered
//! over the arena, about one cache miss per entry. Prints the mean time
//! per entry of the walk and the build.
//!
//! Usage: cargo bench -p shale --bench memtable_flush -- [ENTRIES [TABLES]]
//! (defaults 90000, about the memtable of an 8 MiB write buffer, and 20).
//! Compare two builds by alternating them: a single run on a shared
//! machine varies by tens of percent.

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
    let mut total = Duration::ZERO;
    let mut table_bytes = 0;
    for _ in 0..tables {
        let mem = Arc::new(MemTable::new());
        for _ in 0..entries {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            sequence += 1;
            let key = format!("{:016}", rng % 10_000_000);
            mem.add(sequence, ValueType::Value, key.as_bytes(), &value);
        }
        let start = Instant::now();
        let options = TableOptions {
            compression: CompressionType::None,
            ..TableOptions::internal(Some(10))
        };
        let mut builder = TableBuilder::new(options, Vec::new());
        let mut iter = mem.iter();
        iter.seek_to_first();
        while iter.valid() {
            builder
                .add(iter.key(), iter.value())
                .expect("keys come in order");
            iter.next();
        }
        let (table, _) = builder.finish().expect("a table in memory");
        total += start.elapsed();
        table_bytes += table.len();
    }
    let per_entry = total.as_nanos() as f64 / (entries * tables) as f64;
    println!(
        "{per_entry:.1} ns/entry ({} KiB per table)",
        table_bytes / tables / 1024
    );
}
