//! The `opencl` executor against `parallel` on the same jobs in memory (no
//! file system), and the device time of every kernel. A benchmark program,
//! not a test: no test asserts a timing. Jobs like the executors benchmark's:
//! `--runs` overlapping L0 tables of `--entries` random 16-byte keys,
//! `--value-size`-byte values (half compressible), Snappy and Bloom on;
//! `--overwrite-percent` of each run's keys also appear in the next run.
//!
//! `cargo run --release -p shale-compact --example opencl_bench -- [--runs 5] [--entries 100000] [--value-size 128] [--repeats 3] [--threads 0] [--slice-mib 8]`
//!
//! Prints, per executor, the median wall time and input MB/s; for the
//! OpenCL executor the phase times of the last run and, over the measured
//! runs, each kernel's device time, launches and bytes/s (from OpenCL
//! profiling events), and the host<->device transfer rates. `opencl-sl`
//! runs the job in slices of `--slice-mib` input MiB and shows what the
//! pipeline overlapped.
//!
//! `opencl_bench open` (or `--open-only`) only opens the executor, as a
//! process starting up does, and prints one line,
//! `opencl open: <milliseconds> ms (cache hit|built from source|cache off)`:
//! run twice, the second shows what the on-disk cache of compiled kernels
//! saves (`SHALE_OPENCL_CACHE` names its directory; `off` turns it off).

#![allow(clippy::unwrap_used, reason = "benchmark program")]
#![allow(clippy::print_stdout, reason = "benchmark program")]

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

use shale_compact::job::{CompactionOutput, Executor, TableSettings};
use shale_compact::opencl::{KernelTime, OpenClExecutor, OpenClOptions, PlacementPolicy};
use shale_compact::testing::{MemIo, RandomLevel0};
use shale_compact::ParallelExecutor;

/// MB and GB are 2^20 and 2^30 bytes, as everywhere in ShaleDB.
const MB: f64 = (1u64 << 20) as f64;
const GB: f64 = (1u64 << 30) as f64;

/// User and system CPU seconds of this process so far, all threads.
fn process_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid start.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage for RUSAGE_SELF.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn arg(name: &str, default: usize) -> usize {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|a| a == name)
        .and_then(|i| argv.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

/// Opens the executor once and says how long it took and where the
/// kernels came from.
fn open_only() -> ExitCode {
    let started = Instant::now();
    match OpenClExecutor::new(OpenClOptions::default()) {
        Ok(executor) => {
            println!(
                "opencl open: {} ms ({})",
                started.elapsed().as_millis(),
                executor.program_origin()
            );
            ExitCode::SUCCESS
        }
        Err(reason) => {
            println!("no OpenCL device: {reason}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    if std::env::args()
        .skip(1)
        .any(|a| a == "open" || a == "--open-only")
    {
        return open_only();
    }
    let (runs, entries, value_size, repeats, threads, overwrite) = (
        arg("--runs", 5),
        arg("--entries", 100_000),
        arg("--value-size", 128),
        arg("--repeats", 3),
        arg("--threads", 0),
        arg("--overwrite-percent", 30),
    );
    let slice_mib = arg("--slice-mib", 8) as u64;
    let (job, (inputs, input_bytes)) = RandomLevel0 {
        runs,
        entries,
        value_size,
        key_space: entries as u64 * runs as u64 * 4,
        overwrite_percent: overwrite as u64,
        settings: TableSettings::default(),
    }
    .build();
    let new_io = || MemIo::new(inputs.clone());
    let opencl = |policy, max_slice_input_bytes| {
        OpenClExecutor::new(OpenClOptions {
            policy,
            cpu_threads: threads,
            max_device_files: usize::MAX,
            max_slice_input_bytes,
            ..OpenClOptions::default()
        })
    };
    let all_device = match opencl(PlacementPolicy::AllDevice, None) {
        Ok(executor) => executor,
        Err(reason) => {
            println!("no OpenCL device: {reason}");
            return ExitCode::SUCCESS;
        }
    };
    let info = all_device.device_info().clone();
    println!(
        "job: {runs} runs x {entries} entries, {value_size}-byte values, {overwrite}% overwritten, {:.1} MB of input; device: {} ({}, {} compute units); host threads: {}",
        input_bytes as f64 / MB,
        info.name,
        info.platform,
        info.compute_units,
        if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads }
    );
    let parallel = ParallelExecutor::new(threads, 256 << 20).unwrap();
    let c_compaction = opencl(PlacementPolicy::CCompaction, None).unwrap();
    // The whole job in slices of --slice-mib: the three-stage pipeline
    // (read | device | write) has something to overlap.
    let sliced = opencl(PlacementPolicy::AllDevice, Some(slice_mib << 20)).unwrap();
    let executors: Vec<(&str, &dyn Executor, Option<&OpenClExecutor>)> = vec![
        ("parallel", &parallel, None),
        ("opencl", &all_device, Some(&all_device)),
        ("opencl-c", &c_compaction, Some(&c_compaction)),
        ("opencl-sl", &sliced, Some(&sliced)),
    ];
    let mut reference: Option<BTreeMap<u64, Vec<u8>>> = None;
    for &(name, executor, device) in &executors {
        // One warm-up run (PoCL builds each kernel's work-group function on
        // first use), then the measured ones.
        let io = new_io();
        let warm: CompactionOutput = executor.run(&job, &io).unwrap();
        let written = io.written();
        match &reference {
            None => reference = Some(written),
            Some(expected) => assert!(written == *expected, "{name} wrote different tables"),
        }
        assert_eq!(
            warm.executor,
            if name.starts_with("opencl") {
                "opencl"
            } else {
                "parallel"
            },
            "{name} ran where expected"
        );
        let kernels_before = device.map(|d| d.stats().kernels);
        let cpu_before = process_cpu_seconds();
        let mut times = Vec::new();
        let mut last = warm;
        for _ in 0..repeats {
            let io = new_io();
            let started = Instant::now();
            last = executor.run(&job, &io).unwrap();
            times.push(started.elapsed().as_secs_f64());
        }
        // The process's CPU time over the measured runs: every thread, the
        // OpenCL runtime's included (on PoCL that is the kernels too).
        let cpu_per_run = (process_cpu_seconds() - cpu_before) / repeats as f64;
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = times[times.len() / 2];
        let s = &last.stats;
        println!(
            "{name:>9}: {median:.3} s median of {repeats} ({:.1} MB/s of input); last run: read {:.3} unpack {:.3} merge {:.3} gc {:.3} pack {:.3} write {:.3}; {} -> {} entries",
            input_bytes as f64 / MB / median,
            s.read_secs,
            s.unpack_secs,
            s.merge_secs,
            s.gc_secs,
            s.pack_secs,
            s.write_secs,
            s.entries_in,
            s.entries_out
        );
        println!(
            "    host CPU: {cpu_per_run:.3} s per run, {:.2} s per GB of input",
            cpu_per_run / (input_bytes as f64 / GB)
        );
        if let Some(device) = s.costs.nonzero_device() {
            println!("    host cost (last run): {}", device.summary());
        }
        if let Some(pipeline) = s.pipeline_summary() {
            println!(
                "    pipeline (last run): {} slices; {pipeline}; {:.3} s of I/O hidden",
                device.map_or(0, |d| d.stats().slices) / (repeats as u64 + 1),
                s.overlapped_secs
            );
        }
        if let (Some(before), Some(device)) = (kernels_before, device) {
            let after = device.stats().kernels;
            println!(
                "    {:<24} {:>9} {:>12} {:>14} {:>10}",
                "kernel / transfer", "launches", "device ms", "MB processed", "MB/s"
            );
            let mut rows: Vec<(String, KernelTime)> = after
                .into_iter()
                .map(|(k, mut t)| {
                    if let Some(b) = before.get(&k) {
                        t.launches -= b.launches;
                        t.items -= b.items;
                        t.bytes -= b.bytes;
                        t.seconds -= b.seconds;
                    }
                    (k, t)
                })
                .filter(|(_, t)| t.launches > 0)
                .collect();
            rows.sort_by(|a, b| b.1.seconds.partial_cmp(&a.1.seconds).unwrap());
            let per_run = repeats as f64;
            for (kernel, t) in rows {
                println!(
                    "    {kernel:<24} {:>9.0} {:>12.2} {:>14.1} {:>10.0}",
                    t.launches as f64 / per_run,
                    t.seconds * 1e3 / per_run,
                    t.bytes as f64 / MB / per_run,
                    if t.seconds > 0.0 {
                        t.bytes as f64 / MB / t.seconds
                    } else {
                        0.0
                    }
                );
            }
        }
    }
    ExitCode::SUCCESS
}
