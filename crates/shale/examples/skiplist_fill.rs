//! Inserts db_bench-style entries (16-byte `%016d` keys of random numbers
//! below 10 M, an 8-byte tag, 32-byte values) into fresh skip lists, one
//! inserter each, and prints the mean time of an insert. A skip list of
//! 90,000 such entries is about the memtable of `scripts/compare`'s 8 MiB
//! write buffer: far larger than a core's cache, so an insert is mostly
//! waiting for the nodes its search visits.
//!
//! Usage: cargo run --release -p shale --example skiplist_fill [ENTRIES [LISTS]]
//! (default 90000 and 20). Compare two builds by alternating them: a single
//! run on a shared machine varies by tens of percent.

use shale::skiplist::{KeyOrder, SkipList};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1).map(|arg| {
        arg.parse::<usize>()
            .unwrap_or_else(|_| panic!("not a count: {arg}"))
    });
    let entries = args.next().unwrap_or(90_000);
    let lists = args.next().unwrap_or(20);
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut sequence = 1u64;
    let mut total = Duration::ZERO;
    for _ in 0..lists {
        let list = SkipList::new(KeyOrder::Internal(
            shale_format::comparator::KeyOrder::bytewise(),
        ));
        let keys: Vec<String> = (0..entries)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                format!("{:016}", rng % 10_000_000)
            })
            .collect();
        let start = Instant::now();
        let mut inserter = list.inserter();
        for key in &keys {
            let tag = (sequence << 8) | 1;
            inserter.insert(24, 32, |entry| {
                entry[..16].copy_from_slice(key.as_bytes());
                entry[16..24].copy_from_slice(&tag.to_le_bytes());
                entry[24..].fill(b'x');
            });
            sequence += 1;
        }
        drop(inserter);
        total += start.elapsed();
    }
    println!(
        "{:.1} ns/insert",
        total.as_nanos() as f64 / (entries * lists) as f64
    );
}
