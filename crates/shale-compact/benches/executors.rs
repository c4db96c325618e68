//! Executors on one job in memory (no file system, no fsync): the pure
//! compaction work, `streaming` vs `parallel`, side by side in one run.
//! A job like an L0->L1 compaction of db_bench data: `--runs` overlapping
//! L0 tables of `--entries` random 16-byte keys each, values of
//! `--value-size` bytes, half compressible, Snappy on (`--snappy 0`: off,
//! as in the LevelDB-written database of the compaction bench).
//!
//! `cargo bench -p shale-compact --bench executors -- [--runs 5] [--entries 200000] [--value-size 128] [--snappy 1] [--repeats 5] [--only parallel-1]`

#![allow(clippy::unwrap_used, reason = "benchmark program")]
#![allow(clippy::print_stdout, reason = "benchmark program")]

use std::time::Instant;

use shale_compact::job::{Executor, TableSettings};
use shale_compact::testing::{MemIo, RandomLevel0};
use shale_compact::{ParallelExecutor, StreamingExecutor};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn arg(name: &str, default: usize) -> usize {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    let (runs, entries, value_size, repeats) = (
        arg("--runs", 5),
        arg("--entries", 200_000),
        arg("--value-size", 128),
        arg("--repeats", 5),
    );
    let settings = TableSettings {
        snappy: arg("--snappy", 1) != 0,
        ..TableSettings::default()
    };
    let (job, (inputs, input_bytes)) = RandomLevel0 {
        runs,
        entries,
        value_size,
        key_space: entries as u64 * runs as u64,
        overwrite_percent: 0,
        settings: settings.clone(),
    }
    .build();
    let io = MemIo::discarding(inputs);
    println!(
        "job: {runs} runs x {entries} entries, {value_size}-byte values, snappy {}, {:.1} MB of input, {} threads available",
        settings.snappy,
        input_bytes as f64 / 1e6,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let executors: Vec<(String, Box<dyn Executor>)> = vec![
        ("streaming".into(), Box::new(StreamingExecutor)),
        (
            "parallel-1".into(),
            Box::new(ParallelExecutor::new(1, 256 << 20).unwrap()),
        ),
        (
            "parallel".into(),
            Box::new(ParallelExecutor::new(0, 256 << 20).unwrap()),
        ),
        (
            "par-6MiB".into(),
            Box::new(ParallelExecutor::new(0, 6 << 20).unwrap()),
        ),
    ];
    // `--only NAME` keeps one executor (for a profiler).
    let argv: Vec<String> = std::env::args().collect();
    let only = argv
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| argv.get(i + 1).cloned());
    let mut executors = executors;
    if let Some(only) = &only {
        executors.retain(|(name, _)| name == only);
        assert!(!executors.is_empty(), "no executor named {only}");
    }
    // Rounds alternate the executors (each round runs every executor once,
    // starting one further along), so a change in the machine's load
    // touches them all alike; the median of the rounds is reported.
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); executors.len()];
    let mut last: Vec<Option<shale_compact::job::CompactionOutput>> =
        executors.iter().map(|_| None).collect();
    for round in 0..repeats {
        for k in 0..executors.len() {
            let e = (round + k) % executors.len();
            let started = Instant::now();
            let output = executors[e].1.run(&job, &io).unwrap();
            times[e].push(started.elapsed().as_secs_f64());
            last[e] = Some(output);
        }
    }
    let mut medians = Vec::new();
    for (((name, _), mut times), output) in executors.iter().zip(times).zip(last) {
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = times[times.len() / 2];
        let output = output.unwrap();
        let moved = (output.stats.bytes_read + output.stats.bytes_written) as f64 / 1e6;
        let s = &output.stats;
        println!(
            "{name:>11}: {median:.3} s median of {repeats} ({:.0} MB/s); last run phases: read {:.3} unpack {:.3} merge {:.3} gc {:.3} pack {:.3} write {:.3}",
            moved / median, s.read_secs, s.unpack_secs, s.merge_secs, s.gc_secs, s.pack_secs, s.write_secs
        );
        medians.push((name.clone(), median));
    }
    let Some(&(_, streaming)) = medians.iter().find(|(name, _)| name == "streaming") else {
        return;
    };
    for (name, median) in medians.iter().filter(|(name, _)| name != "streaming") {
        println!("{name} / streaming speed: {:.2}x", streaming / median);
    }
}
