//! The conformance harness: every executor, on random jobs, must write the
//! same tables byte for byte as the `streaming` reference, with the same
//! file numbers, key ranges and entry counts (so the engine's version edits
//! are the same too).
//!
//! Jobs have 1 to 40 input runs (overlapping L0 tables plus level runs of
//! several files), overwrites and deletions across runs, a random smallest
//! snapshot, deeper-level ranges that decide tombstone drops, grandparent
//! files that cut outputs, keys of 0 to 1000 bytes with bytes >= 0x80,
//! values of 0 bytes to 64 KiB, tiny blocks and file limits, with and
//! without Snappy and Bloom filters.
//!
//! Sub-compactions (jobs restricted to a key range, `shale_compact::
//! subcompaction`) go through the same harness: a job given a random range,
//! then split at random cuts and at the cuts `boundaries` picks; every
//! sub-job must match `streaming` on every executor, and the sub-jobs'
//! outputs, concatenated, must hold the whole job's entries in order.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use shale_compact::job::{
    CompactionJob, CompactionOutput, Executor, InputRun, JobFile, KeyRange, TableSettings,
    UserKeyRange,
};
use shale_compact::remote::keys::DEFAULT_KEYS_WINDOW;
use shale_compact::remote::{RemoteExecutor, RemoteMode, RemoteOptions};
use shale_compact::subcompaction::{boundaries, split};
use shale_compact::testing::{self, build_table, table_file, MemIo};
use shale_compact::{ExecutorKind, ParallelExecutor, StreamingExecutor};
use shale_format::comparator::compare_internal_keys;
use shale_format::internal_key::{InternalKey, ValueType};
use shale_worker::{LocalWorker, WorkerConfig};

/// A generated job with its input files.
#[derive(Debug, Clone)]
struct Case {
    job: CompactionJob,
    files: Vec<(u64, Vec<u8>)>,
}

fn user_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => (0u32..400).prop_map(|n| format!("user{n:06}").into_bytes()),
        2 => proptest::collection::vec(any::<u8>(), 0..16),
        1 => (0usize..1000, any::<u8>()).prop_map(|(n, b)| vec![b | 0x80; n]),
    ]
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        10 => proptest::collection::vec(any::<u8>(), 0..64),
        3 => (0usize..600, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        1 => (0usize..(64 << 10), any::<u8>()).prop_map(|(n, b)| (0..n).map(|i| b.wrapping_add((i / 7) as u8)).collect()),
    ]
}

fn settings() -> impl Strategy<Value = TableSettings> {
    (
        prop_oneof![Just(64usize), Just(256), Just(1024), Just(4096)],
        1usize..17,
        proptest::option::of(1u32..20),
        any::<bool>(),
    )
        .prop_map(
            |(block_size, block_restart_interval, bloom_bits_per_key, snappy)| TableSettings {
                block_size,
                block_restart_interval,
                bloom_bits_per_key,
                snappy,
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(
            proptest::collection::vec((user_key(), any::<bool>(), value()), 1..60),
            1..36,
        ),
        0usize..5,
        proptest::collection::vec((user_key(), user_key(), 1u64..5000), 0..12),
        proptest::collection::vec(
            proptest::collection::vec((user_key(), user_key()), 0..6),
            0..4,
        ),
        settings(),
        settings(),
        prop_oneof![Just(512u64), Just(4096), Just(1 << 20)],
        0u64..1000,
        1u64..(1 << 14),
    )
        .prop_map(
            |(
                runs,
                level_files,
                grandparents,
                deeper,
                input_settings,
                settings,
                max_file,
                snapshot_at,
                overlap,
            )| {
                let mut sequence = 1u64;
                let mut number = 1u64;
                let mut files = Vec::new();
                let mut inputs = Vec::new();
                let total_runs = runs.len();
                for (r, entries) in runs.into_iter().enumerate() {
                    let mut table: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                    for (user_key, deletion, value) in entries {
                        let kind = if deletion {
                            ValueType::Deletion
                        } else {
                            ValueType::Value
                        };
                        let value = if deletion { Vec::new() } else { value };
                        table.insert(
                            InternalKey::new(&user_key, sequence, kind).into_encoded(),
                            value,
                        );
                        sequence += 1;
                    }
                    let mut sorted: Vec<(Vec<u8>, Vec<u8>)> = table.into_iter().collect();
                    sorted.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
                    // The last run is a level run cut into several files when asked.
                    let pieces = if r + 1 == total_runs && level_files > 1 {
                        level_files.min(sorted.len())
                    } else {
                        1
                    };
                    let per = sorted.len().div_ceil(pieces);
                    let mut run_files = Vec::new();
                    for chunk in sorted.chunks(per.max(1)) {
                        let bytes = build_table(chunk, &input_settings);
                        run_files.push(table_file(number, &bytes, chunk));
                        files.push((number, bytes));
                        number += 1;
                    }
                    inputs.push(InputRun {
                        level: if pieces > 1 { 1 } else { 0 },
                        files: run_files,
                    });
                }
                let mut grandparent_files: Vec<JobFile> = grandparents
                    .into_iter()
                    .map(|(a, b, size)| {
                        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                        JobFile {
                            number: 0,
                            file_size: size,
                            smallest: InternalKey::new(&lo, 1, ValueType::Value).into_encoded(),
                            largest: InternalKey::new(&hi, 1, ValueType::Value).into_encoded(),
                        }
                    })
                    .collect();
                grandparent_files.sort_by(|a, b| compare_internal_keys(&a.smallest, &b.smallest));
                // Grandparents of one level do not overlap: keep a disjoint subset.
                let mut disjoint: Vec<JobFile> = Vec::new();
                for file in grandparent_files {
                    if disjoint.last().is_none_or(|last| {
                        compare_internal_keys(&last.largest, &file.smallest).is_lt()
                    }) {
                        disjoint.push(file);
                    }
                }
                let deeper_levels = deeper
                    .into_iter()
                    .map(|ranges| {
                        let mut ranges: Vec<UserKeyRange> = ranges
                            .into_iter()
                            .map(|(a, b)| {
                                if a <= b {
                                    UserKeyRange {
                                        smallest: a,
                                        largest: b,
                                    }
                                } else {
                                    UserKeyRange {
                                        smallest: b,
                                        largest: a,
                                    }
                                }
                            })
                            .collect();
                        ranges.sort_by(|a, b| a.smallest.cmp(&b.smallest));
                        let mut disjoint: Vec<UserKeyRange> = Vec::new();
                        for range in ranges {
                            if disjoint
                                .last()
                                .is_none_or(|last| last.largest < range.smallest)
                            {
                                disjoint.push(range);
                            }
                        }
                        disjoint
                    })
                    .collect();
                let job = CompactionJob {
                    id: 7,
                    max_output_file_size: max_file,
                    grandparents: disjoint,
                    max_grandparent_overlap_bytes: overlap,
                    smallest_snapshot: sequence * snapshot_at / 1000,
                    deeper_levels,
                    table: settings,
                    ..testing::job(inputs)
                };
                Case { job, files }
            },
        )
}

/// The case's input files; outputs numbered from 1000.
fn mem_io(case: &Case) -> MemIo {
    MemIo::new(
        case.files
            .iter()
            .map(|(n, b)| (*n, Arc::new(b.clone())))
            .collect(),
    )
}

/// The in-process worker the `remote` executors talk to, on loopback, and
/// its root.
fn test_worker() -> &'static (tempfile::TempDir, LocalWorker) {
    static WORKER: OnceLock<(tempfile::TempDir, LocalWorker)> = OnceLock::new();
    WORKER.get_or_init(|| {
        let root = tempfile::tempdir().unwrap();
        let mut config = WorkerConfig::new(root.path(), Arc::new(StreamingExecutor));
        config.max_jobs = 64;
        let worker = LocalWorker::start(config).unwrap();
        (root, worker)
    })
}

fn run(executor: &dyn Executor, case: &Case) -> (CompactionOutput, BTreeMap<u64, Vec<u8>>) {
    let io = mem_io(case);
    // The remote executor's worker reads the inputs from the storage it
    // shares with the engine: a database directory under its root.
    let db = (executor.name() == ExecutorKind::Remote.name()).then(|| {
        let db = tempfile::tempdir_in(test_worker().0.path()).unwrap();
        for (number, bytes) in &case.files {
            std::fs::write(db.path().join(format!("{number:06}.ldb")), bytes).unwrap();
        }
        db
    });
    let io = match &db {
        Some(db) => io.with_database_dir(db.path().to_path_buf()),
        None => io,
    };
    let output = executor.run(&case.job, &io).unwrap();
    let files = io.written();
    (output, files)
}

/// Runs `executor` and the reference on `case` and demands identical output.
fn check_against_reference(executor: &dyn Executor, case: &Case) {
    let (expected, expected_files) = run(&StreamingExecutor, case);
    let (actual, actual_files) = run(executor, case);
    if actual.outputs != expected.outputs {
        let summary = |o: &CompactionOutput| -> Vec<(u64, u64, u64)> {
            o.outputs
                .iter()
                .map(|t| (t.number, t.file_size, t.entries))
                .collect()
        };
        let first = actual
            .outputs
            .iter()
            .zip(&expected.outputs)
            .position(|(a, e)| a != e);
        panic!(
            "{:?}: output tables differ (first at {first:?})\n  actual:   {:?}\n  expected: {:?}",
            executor,
            summary(&actual),
            summary(&expected)
        );
    }
    assert_eq!(actual_files.len(), expected_files.len());
    for (number, bytes) in &expected_files {
        assert!(
            actual_files[number] == *bytes,
            "{}: table {number} differs ({} vs {} bytes)",
            executor.name(),
            actual_files[number].len(),
            bytes.len()
        );
    }
    assert_eq!(actual.stats.entries_out, expected.stats.entries_out);
    assert_eq!(actual.stats.bytes_written, expected.stats.bytes_written);
}

fn executors() -> Vec<Box<dyn Executor>> {
    use shale_compact::chain::FallbackChain;
    use shale_compact::opencl::{OpenClExecutor, OpenClOptions, PlacementPolicy};
    use std::sync::Arc;
    let mut executors: Vec<Box<dyn Executor>> = vec![
        Box::new(ParallelExecutor::new(1, 256 << 20).unwrap()),
        Box::new(ParallelExecutor::new(2, 256 << 20).unwrap()),
        // A tiny budget: every job is cut into many slices.
        Box::new(ParallelExecutor::new(3, 6 * 4096).unwrap()),
    ];
    // The OpenCL executor (PoCL in CI). Without a device its variants are
    // skipped, unless SHALE_REQUIRE_ALL=1 makes that a failure.
    let opencl = |options: OpenClOptions| {
        OpenClExecutor::new(OpenClOptions {
            cpu_threads: 2,
            ..options
        })
    };
    let strict = OpenClOptions {
        max_device_files: usize::MAX,
        ..OpenClOptions::default()
    };
    match opencl(strict.clone()) {
        Ok(all_device) => {
            executors.push(Box::new(all_device));
            // Everything on the device, gc on the host (C-Compaction).
            executors.push(Box::new(
                opencl(OpenClOptions {
                    policy: PlacementPolicy::CCompaction,
                    ..strict.clone()
                })
                .unwrap(),
            ));
            // Many small key-range slices: split input blocks, the open
            // output file carried from slice to slice, both gc sites.
            for policy in [PlacementPolicy::AllDevice, PlacementPolicy::CCompaction] {
                executors.push(Box::new(
                    opencl(OpenClOptions {
                        policy,
                        max_slice_input_bytes: Some(2048),
                        ..strict.clone()
                    })
                    .unwrap(),
                ));
            }
            // Forced fallbacks, as the worker and the tools chain it:
            // placement on the CPU, a failing kernel, and a budget small
            // jobs pass at placement and may then run past.
            let with_cpu = |options: OpenClOptions| -> Box<dyn Executor> {
                Box::new(FallbackChain::new(vec![
                    Arc::new(opencl(options).unwrap()),
                    Arc::new(ParallelExecutor::new(2, 256 << 20).unwrap()),
                ]))
            };
            executors.push(with_cpu(OpenClOptions {
                max_device_files: 0,
                ..OpenClOptions::default()
            }));
            executors.push(with_cpu(OpenClOptions {
                inject_kernel_failure: Some("rank_merge".into()),
                ..OpenClOptions::default()
            }));
            executors.push(with_cpu(OpenClOptions {
                memory_budget: Some(64 << 10),
                ..OpenClOptions::default()
            }));
        }
        Err(reason) => testing::skip(
            "conformance of the opencl executor",
            &format!("no OpenCL device: {reason}"),
            testing::PROVIDE_OPENCL,
        ),
    }
    // A worker on loopback, in both modes.
    for executor in remote_executors(&test_worker().1.url()) {
        executors.push(Box::new(executor));
    }
    executors
}

/// The `remote` executor on `endpoint`, in near-data and in keys-only mode,
/// and keys-only with a window of 3 keys per run: every job then takes many
/// credit round trips, and the merge waits on runs that run dry.
fn remote_executors(endpoint: &str) -> Vec<RemoteExecutor> {
    let options = |mode, keys_window| RemoteOptions {
        endpoints: vec![endpoint.to_string()],
        mode,
        keys_window,
        ..RemoteOptions::default()
    };
    [
        options(RemoteMode::NearData, DEFAULT_KEYS_WINDOW),
        options(RemoteMode::KeysOnly, DEFAULT_KEYS_WINDOW),
        options(RemoteMode::KeysOnly, 3),
    ]
    .into_iter()
    .map(|options| RemoteExecutor::new(options).unwrap())
    .collect()
}

/// Random cases per property: `SHALE_CONFORMANCE_CASES`, default 48.
fn conformance_cases() -> u32 {
    std::env::var("SHALE_CONFORMANCE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(conformance_cases()))]

    #[test]
    fn every_executor_matches_streaming(case in case()) {
        for executor in executors() {
            check_against_reference(executor.as_ref(), &case);
        }
    }
}

/// A `shale worker` process (the workspace's own binary, beside this test
/// in the target directory), killed when dropped.
struct WorkerProcess(std::process::Child);

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The random jobs again, through a worker in another process, in both
/// modes. `cargo test --workspace` builds the `shale` binary; run alone,
/// without it, the test says so and passes, unless `SHALE_REQUIRE_ALL=1`.
#[test]
fn a_worker_process_matches_streaming() {
    use std::io::BufRead;
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("shale")))
        .filter(|path| path.exists());
    let Some(binary) = binary else {
        testing::skip(
            "conformance of a worker process",
            "the shale binary is not built beside this test",
            "cargo build -p shale-cli, or cargo test --workspace",
        );
        return;
    };
    let root = test_worker().0.path();
    let mut child = std::process::Command::new(binary)
        .args([
            "worker",
            "--listen",
            "127.0.0.1:0",
            "--executor",
            "streaming",
            "--max_jobs",
            "4",
        ])
        .arg("--root")
        .arg(root)
        .arg("--log")
        .arg(root.join("process-worker.LOG"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let worker = WorkerProcess(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap();
    let address = line
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let executors = remote_executors(&address);
    let cases = conformance_cases().div_ceil(3);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
    runner
        .run(&case(), |case| {
            for executor in &executors {
                check_against_reference(executor, &case);
            }
            Ok(())
        })
        .unwrap();
    drop(worker);
    let log = std::fs::read_to_string(root.join("process-worker.LOG")).unwrap();
    assert!(
        log.contains("keys-only") && log.contains("done in"),
        "{log}"
    );
}

#[test]
fn single_run_without_drops_rewrites_the_same_entries() {
    let settings = TableSettings::default();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..5000u32)
        .map(|i| {
            (
                InternalKey::new(
                    format!("{i:016}").as_bytes(),
                    10_000 + u64::from(i),
                    ValueType::Value,
                )
                .into_encoded(),
                vec![b'x'; 100],
            )
        })
        .collect();
    let bytes = build_table(&entries, &settings);
    let job = CompactionJob {
        max_output_file_size: 64 << 10,
        table: settings,
        ..testing::job(testing::level0([table_file(1, &bytes, &entries)]))
    };
    let case = Case {
        job,
        files: vec![(1, bytes)],
    };
    let (output, _) = run(&StreamingExecutor, &case);
    assert_eq!(output.outputs.iter().map(|o| o.entries).sum::<u64>(), 5000);
    assert!(
        output.outputs.len() > 5,
        "file limit cuts outputs: {}",
        output.outputs.len()
    );
    for executor in executors() {
        check_against_reference(executor.as_ref(), &case);
    }
}

// ---- Sub-compactions: jobs restricted to a key range ----

/// The entries of a job's output tables, in order.
fn output_entries(
    output: &CompactionOutput,
    files: &BTreeMap<u64, Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    use shale_format::comparator::InternalKeyComparator;
    use shale_format::iterator::KvIterator;
    use shale_format::table::{ReadTableOptions, Table};
    let mut entries = Vec::new();
    for table in &output.outputs {
        let bytes = files[&table.number].clone();
        let size = bytes.len() as u64;
        let options = ReadTableOptions {
            comparator: Arc::new(InternalKeyComparator),
            filter_policy: None,
            verify_checksums: true,
            block_cache: None,
        };
        let table = Table::open(Arc::new(bytes), size, "output", options).unwrap();
        let mut iter = table.iter();
        iter.seek_to_first();
        while iter.valid() {
            entries.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next();
        }
        iter.status().unwrap();
    }
    entries
}

/// `case` with another job over the same files.
fn with_job(case: &Case, job: CompactionJob) -> Case {
    Case {
        job,
        files: case.files.clone(),
    }
}

/// Every sub-job of `case` against the reference on every executor; their
/// ranges tile the parent's; their outputs, concatenated, hold the parent's
/// entries in order; a sub-job with nothing to keep writes no file.
fn check_sub_jobs(case: &Case, subs: &[CompactionJob], executors: &[Box<dyn Executor>]) {
    let parent = &case.job.range;
    assert_eq!(subs.first().unwrap().range.lower, parent.lower);
    assert_eq!(subs.last().unwrap().range.upper, parent.upper);
    for pair in subs.windows(2) {
        assert!(pair[0].range.upper.is_some());
        assert_eq!(pair[0].range.upper, pair[1].range.lower);
    }
    let (whole, whole_files) = run(&StreamingExecutor, case);
    let mut concatenated = Vec::new();
    for sub in subs {
        assert_eq!(sub.range.intersect(parent), sub.range);
        let sub_case = with_job(case, sub.clone());
        for executor in executors {
            check_against_reference(executor.as_ref(), &sub_case);
        }
        let (output, files) = run(&StreamingExecutor, &sub_case);
        let entries = output_entries(&output, &files);
        assert_eq!(output.outputs.is_empty(), entries.is_empty());
        for (key, _) in &entries {
            assert!(sub.in_range(shale_format::internal_key::extract_user_key(key)));
        }
        concatenated.extend(entries);
    }
    assert!(
        concatenated == output_entries(&whole, &whole_files),
        "the sub-jobs' entries differ from the whole job's ({} vs {})",
        concatenated.len(),
        whole.stats.entries_out
    );
}

/// A range from two optional bounds, in order.
fn key_range(a: Option<Vec<u8>>, b: Option<Vec<u8>>) -> KeyRange {
    match (a, b) {
        (Some(a), Some(b)) if b < a => KeyRange::new(Some(b), Some(a)),
        (a, b) => KeyRange::new(a, b),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(conformance_cases().div_ceil(3)))]

    #[test]
    fn sub_jobs_match_streaming_and_the_whole_job(
        case in case(),
        bounds in (proptest::option::weighted(0.3, user_key()), proptest::option::weighted(0.3, user_key())),
        cuts in proptest::collection::vec(user_key(), 0..4),
        min_part_bytes in prop_oneof![Just(1u64), 1u64..8192, Just(1 << 20)],
        max_parts in 1usize..6,
    ) {
        let executors = executors();
        // The parent itself may be a sub-job (nested splits).
        let mut parent = case.job.clone();
        parent.range = key_range(bounds.0, bounds.1);
        let case = with_job(&case, parent);
        for executor in &executors {
            check_against_reference(executor.as_ref(), &case);
        }
        // Random cuts (split ignores those outside the parent's range).
        let mut cuts = cuts;
        cuts.sort();
        cuts.dedup();
        check_sub_jobs(&case, &split(&case.job, &cuts), &executors);
        // The cuts boundaries() picks.
        let io = mem_io(&case);
        let picked = boundaries(&case.job, &io, min_part_bytes, max_parts).unwrap();
        prop_assert!(picked.len() < max_parts.max(1));
        prop_assert!(picked.windows(2).all(|w| w[0] < w[1]));
        let subs = split(&case.job, &picked);
        prop_assert_eq!(subs.len(), picked.len() + 1);
        check_sub_jobs(&case, &subs, &executors);
    }
}

/// Ranges holding no entry (between two keys, before or after every key,
/// empty) write no file on any executor, without error.
#[test]
fn a_range_without_entries_writes_nothing() {
    let settings = TableSettings {
        block_size: 256,
        ..TableSettings::default()
    };
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..400u32)
        .map(|i| {
            (
                InternalKey::new(
                    format!("key{:06}", i * 2).as_bytes(),
                    1 + u64::from(i),
                    ValueType::Value,
                )
                .into_encoded(),
                vec![b'x'; 40],
            )
        })
        .collect();
    let bytes = build_table(&entries, &settings);
    let job = CompactionJob {
        max_output_file_size: 4 << 10,
        table: settings,
        ..testing::job(testing::level0([table_file(1, &bytes, &entries)]))
    };
    let case = Case {
        job,
        files: vec![(1, bytes)],
    };
    let key = |s: &str| Some(s.as_bytes().to_vec());
    let executors = executors();
    for range in [
        KeyRange::new(key("key000101"), key("key000102")),
        KeyRange::new(None, key("key000000")),
        KeyRange::new(key("key000799"), None),
        KeyRange::new(key("key000300"), key("key000300")),
        KeyRange::new(key("key000500"), key("key000300")),
    ] {
        let mut job = case.job.clone();
        job.range = range.clone();
        let empty = with_job(&case, job);
        let (output, files) = run(&StreamingExecutor, &empty);
        assert!(output.outputs.is_empty() && files.is_empty(), "{range:?}");
        for executor in &executors {
            check_against_reference(executor.as_ref(), &empty);
        }
    }
    // A sub-job cut past the last file keeps no input file at all (the
    // remote executor once sent that to its worker, which refused it).
    let subs = split(&case.job, &[b"key000799".to_vec()]);
    assert!(subs[1].inputs.is_empty());
    for executor in &executors {
        check_against_reference(executor.as_ref(), &with_job(&case, subs[1].clone()));
    }
    // A one-key range in the middle of a block: exactly that key.
    let mut job = case.job.clone();
    job.range = KeyRange::new(key("key000100"), key("key000101"));
    let one = with_job(&case, job);
    let (output, files) = run(&StreamingExecutor, &one);
    assert_eq!(output_entries(&output, &files).len(), 1);
    for executor in &executors {
        check_against_reference(executor.as_ref(), &one);
    }
}
