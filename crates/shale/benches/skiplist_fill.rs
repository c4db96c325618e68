//! Inserts db_bench-style entries (16-byte `%016d` keys of random numbers
//! below 10 M, an 8-byte tag, 32-byte values) into fresh skip lists and
//! prints the mean time of an insert. A skip list of 90,000 such entries is
//! about the memtable of `scripts/compare`'s 8 MiB write buffer: far larger
//! than a core's cache, so an insert is mostly waiting for the nodes its
//! search visits.
//!
//! Without THREADS one inserter fills each list. With THREADS (1 or more)
//! that many threads fill each list at once, each inserting its share of
//! the entries as one-entry batches (an inserter per entry, as the write
//! path inserts single `Put`s); the time printed is then the wall time per
//! entry, so that 1 / it is the list's insert throughput and thread counts
//! compare directly.
//!
//! Usage: cargo bench -p shale --bench skiplist_fill -- [ENTRIES [LISTS [THREADS]]]
//! (defaults 90000 and 20, and one inserter). Compare two builds by
//! alternating them: a single run on a shared machine varies by tens of
//! percent.

use shale::skiplist::{EntryOrder, SkipList};
use std::sync::Barrier;
use std::time::{Duration, Instant};

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
    let lists = args.next().unwrap_or(20);
    // Given, even as 1: one-entry batches from that many threads.
    let threads = args.next().map(|threads| threads.max(1));
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut sequence = 1u64;
    let mut total = Duration::ZERO;
    for _ in 0..lists {
        let list = SkipList::new(EntryOrder::Internal(
            shale_format::comparator::KeyOrder::bytewise(),
        ));
        let keys: Vec<(String, u64)> = (0..entries)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                sequence += 1;
                (format!("{:016}", rng % 10_000_000), sequence)
            })
            .collect();
        let Some(threads) = threads else {
            let start = Instant::now();
            let mut inserter = list.inserter();
            for (key, sequence) in &keys {
                inserter.insert(24, 32, |entry| fill(entry, key, *sequence));
            }
            drop(inserter);
            total += start.elapsed();
            continue;
        };
        let parts = keys.chunks(entries.div_ceil(threads).max(1));
        // Fewer parts than threads when there are fewer entries.
        let barrier = Barrier::new(parts.len() + 1);
        let start = std::thread::scope(|scope| {
            for part in parts {
                let (list, barrier) = (&list, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    for (key, sequence) in part {
                        list.inserter()
                            .insert(24, 32, |entry| fill(entry, key, *sequence));
                    }
                });
            }
            // Every thread is started: time from the moment they all go.
            barrier.wait();
            // The scope joins the threads as it ends.
            Instant::now()
        });
        total += start.elapsed();
        assert_eq!(list.len(), entries);
    }
    let per_insert = total.as_nanos() as f64 / (entries * lists) as f64;
    match threads {
        None => println!("{per_insert:.1} ns/insert"),
        Some(threads) => {
            println!("{per_insert:.1} ns/insert, wall ({threads} thread(s), one-entry batches)")
        }
    }
}

/// An entry: the key, its tag (sequence, type value) and the value.
fn fill(entry: &mut [u8], key: &str, sequence: u64) {
    let tag = (sequence << 8) | 1;
    entry[..16].copy_from_slice(key.as_bytes());
    entry[16..24].copy_from_slice(&tag.to_le_bytes());
    entry[24..].fill(b'x');
}
