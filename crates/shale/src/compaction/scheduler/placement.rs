//! Where a job runs: the executor chain and the sub-compactions it is cut
//! into, pure functions of the job, the executors this database has, their
//! measured throughput and the cores left to the foreground. The first
//! executor of the chain runs the job; when it fails, the next one runs it
//! again (device -> `parallel` -> `streaming`). Executors never place,
//! retry or fall back on their own; the device's may only refuse a job it
//! cannot hold, by the same rule placement applies
//! ([`shale_compact::opencl::device_fit`]).
//!
//! Executors are named by type ([`ExecutorKind`], and [`ExecutorId`] in a
//! chain, where the options' custom executor may stand); their names
//! appear only in the reasons and the LOG.
//!
//! The device part is the hierarchical strategy of the GPU paper (Q- and
//! C-Compaction by level, limits by file count and device memory: the
//! device's own facts, [`shale_compact::opencl::placement`]) plus two
//! rules of the scheduler's: offload pays most for short key-value pairs
//! (X-Engine), so jobs whose entries average more than
//! [`DEVICE_MAX_AVERAGE_ENTRY_BYTES`] stay on the CPU; and a device whose
//! last jobs all failed is rested ([`DEVICE_REST_AFTER_FAILURES`]).

use shale_compact::job::CompactionJob;
use shale_compact::opencl::{placement, DeviceLimits, Placement, PlacementPolicy};
use shale_compact::ExecutorId;
use shale_compact::ExecutorKind::{self, OpenCl, Parallel, Remote, Streaming};

use super::book::ExecutorBook;
use crate::compaction::priority;
pub use crate::options::ExecutorChoice;

/// Above this average input bytes per entry a job stays on the CPU: the
/// device's advantage is per-entry work (merge, drop decision, index), and
/// long values are mostly copied.
pub const DEVICE_MAX_AVERAGE_ENTRY_BYTES: f64 = 1024.0;

/// A device that failed this many jobs in a row without completing one is
/// skipped until its executor is rebuilt (the database reopened).
pub const DEVICE_REST_AFTER_FAILURES: u64 = 3;

/// Below this many cores for one job (one part of it), `auto` runs it on
/// `streaming`, neither choosing nor measuring `parallel`: the data-parallel
/// phases pay off from three cores on, and on fewer `parallel` is slower
/// than `streaming`, its first, cold jobs far slower
/// (`docs/results/format-and-compaction.md`, "Streaming, the shared table
/// code and an I/O thread (second pass)").
pub const PARALLEL_MIN_CORES: usize = 3;

/// Under `auto`, while the foreground may want the cores, `parallel` runs a
/// job only if it costs at most this many times `streaming`'s CPU per byte
/// (measured, as threads kept busy over throughput): otherwise the
/// data-parallel phases' extra work per byte would take the CPU from the
/// writes and reads that the compaction serves
/// (`docs/results/compaction-tax.md`, "auto weighs CPU per byte").
pub const PARALLEL_CPU_ALLOWED: f64 = 1.2;

/// Every `EXPLORE_EVERY`-th job under `auto` runs on the CPU executor that
/// measured slower, so its measurement follows the machine's load.
pub const EXPLORE_EVERY: u64 = 16;

/// Under `auto`, a device at most this fraction slower than the CPU
/// executor still gets a job when it also costs the host at most
/// [`DEVICE_HOST_CPU_SHARE`] of that executor's CPU per byte: on a store
/// whose foreground wants the cores, the CPU handed back is worth a few
/// percent of compaction speed (X-Engine's point for its FPGA). Kept
/// under the 5 % by which `auto` may trail the best executor, with room
/// for the measurements' noise.
pub const DEVICE_SLOWER_ALLOWED: f64 = 0.03;

/// See [`DEVICE_SLOWER_ALLOWED`].
pub const DEVICE_HOST_CPU_SHARE: f64 = 0.5;

/// The device, when this database has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceFacts {
    /// How jobs are split between device and host.
    pub policy: PlacementPolicy,
    /// Its file-count and memory limits.
    pub limits: DeviceLimits,
}

/// The machine as the scheduler sees it when a job starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Cores of the machine.
    pub cores: usize,
    /// Other compaction jobs running now.
    pub other_jobs: usize,
    /// Sub-compactions this job runs as (1: not split).
    pub parts: usize,
    /// A number that grows with every job (for exploration).
    pub job_sequence: u64,
    /// The foreground may want the CPU: a background job, not one a caller
    /// waits for (a manual compaction). `auto` then weighs CPU per byte,
    /// and otherwise wall time.
    pub foreground: bool,
}

impl Load {
    /// Cores one part of this job can count on: one is left to the
    /// foreground, one to each other running job.
    pub fn cores_per_part(&self) -> usize {
        let free = self
            .cores
            .saturating_sub(1)
            .saturating_sub(self.other_jobs)
            .max(1);
        (free / self.parts.max(1)).max(1)
    }
}

/// The executors to try, in order, and why the first was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The executors, first choice first; always ends with `streaming`.
    pub executors: Vec<ExecutorId>,
    /// Why the first one.
    pub reason: String,
    /// Set when the job was meant for the device but placement kept it on
    /// the CPU: why (counted as a fallback).
    pub kept_off_device: Option<String>,
}

impl Chain {
    /// The executors' names, first choice first (for the LOG).
    pub fn names(&self) -> Vec<&'static str> {
        self.executors.iter().map(|id| id.name()).collect()
    }

    /// The fallback a job placed on this chain starts with: one meant for
    /// the device that placement kept on the CPU counts as a fallback.
    pub fn kept_off_device_reason(&self) -> Option<String> {
        self.kept_off_device
            .as_ref()
            .map(|why| format!("placed on the CPU: {why}"))
    }
}

/// True when a job an executor failed with `error` goes to the next
/// executor of its chain (one definition, shared with the tools' chains).
pub use shale_compact::chain::passes_to_next_executor;

/// The CPU executor for a job under `auto`: `streaming` when a part of the
/// job has fewer than [`PARALLEL_MIN_CORES`] cores; with the foreground at
/// work, `streaming` also when `parallel` measured more than
/// [`PARALLEL_CPU_ALLOWED`] times its CPU per byte; otherwise the one with
/// the higher measured throughput (each slower one still gets every
/// [`EXPLORE_EVERY`]-th job), or before both are measured, `parallel`
/// (measuring `streaming` on every other job until it has a number).
pub fn choose_cpu(book: &ExecutorBook, load: &Load) -> (ExecutorKind, String) {
    let cores = load.cores_per_part();
    if cores < PARALLEL_MIN_CORES {
        return (
            Streaming,
            format!(
                "{cores} core(s) for this job; the data-parallel phases pay off from \
                 {PARALLEL_MIN_CORES} on"
            ),
        );
    }
    match (book.throughput(Parallel), book.throughput(Streaming)) {
        (Some(parallel), Some(streaming)) => {
            let (faster, slower) = if parallel >= streaming {
                (Parallel, Streaming)
            } else {
                (Streaming, Parallel)
            };
            if load.job_sequence % EXPLORE_EVERY == 0 {
                return (
                    slower,
                    format!("re-measuring the slower CPU executor (every {EXPLORE_EVERY}th job)"),
                );
            }
            // CPU-seconds per GB: threads kept busy over bytes per second.
            let gb = 1024.0 * crate::units::MB;
            let parallel_cost = cores as f64 / parallel * gb;
            let streaming_cost = gb / streaming;
            if load.foreground && parallel_cost > PARALLEL_CPU_ALLOWED * streaming_cost {
                return (
                    Streaming,
                    format!(
                        "the foreground may want the cores: streaming costs {streaming_cost:.1} \
                         CPU-s/GB, parallel {parallel_cost:.1} on {cores} cores"
                    ),
                );
            }
            (
                faster,
                format!(
                    "measured faster: parallel {:.0} MB/s, streaming {:.0} MB/s",
                    parallel / crate::units::MB,
                    streaming / crate::units::MB
                ),
            )
        }
        (parallel, streaming) => {
            // Measure the other one once its first job is done.
            let pick = match (parallel, streaming) {
                (Some(_), None) if load.job_sequence % 2 == 0 => Streaming,
                _ => Parallel,
            };
            (
                pick,
                format!("{cores} core(s) for this job, not yet measured on both CPU executors"),
            )
        }
    }
}

/// The chain for `job`: on `device` (when there is one and this thread
/// serves it) if placement allows, then the CPU, then `streaming`.
pub fn chain(
    job: &CompactionJob,
    choice: &ExecutorChoice,
    device: Option<&DeviceFacts>,
    book: &ExecutorBook,
    load: &Load,
) -> Chain {
    let (cpu, cpu_reason) = match choice {
        ExecutorChoice::Forced(Streaming) => (Streaming, "compaction_executor=streaming".into()),
        ExecutorChoice::Forced(Parallel | OpenCl) => {
            (Parallel, "compaction_executor names it".to_string())
        }
        _ => choose_cpu(book, load),
    };
    let wants_device = match choice {
        ExecutorChoice::Forced(kind) => *kind == OpenCl,
        ExecutorChoice::Auto => true,
    };
    let Some(device) = device.filter(|_| wants_device) else {
        return Chain {
            executors: cpu_chain(cpu),
            reason: cpu_reason,
            kept_off_device: None,
        };
    };
    let off_device = |why: String| Chain {
        executors: cpu_chain(cpu),
        reason: format!("{cpu_reason}; not on the device: {why}"),
        kept_off_device: Some(why),
    };
    if let Some(average) = book.average_entry_bytes() {
        if average > DEVICE_MAX_AVERAGE_ENTRY_BYTES {
            return off_device(format!(
                "entries average {average:.0} bytes, more than {DEVICE_MAX_AVERAGE_ENTRY_BYTES:.0} (offload pays for short pairs)"
            ));
        }
    }
    if let Some(record) = book.record(OpenCl) {
        if record.jobs == 0 && record.failures >= DEVICE_REST_AFTER_FAILURES {
            return off_device(format!(
                "the device failed its last {} jobs and completed none",
                record.failures
            ));
        }
    }
    match placement(job, device.policy, &device.limits) {
        Placement::Cpu { reason } => off_device(reason),
        Placement::Device { gc } => {
            let measured = match choice {
                ExecutorChoice::Auto => device_measured(book, cpu, load),
                ExecutorChoice::Forced(_) => Ok(String::new()),
            };
            let why = match measured {
                Ok(why) => why,
                Err(why) => return off_device(why),
            };
            let mut executors = vec![OpenCl.into()];
            executors.extend(cpu_chain(cpu));
            Chain {
                executors,
                reason: format!("on the device (gc on the {gc:?} side){why}").to_lowercase(),
                kept_off_device: None,
            }
        }
    }
}

/// The CPU's part of a chain, from `first`: it, then `streaming` (the
/// reference, which runs every job) unless it is `streaming`.
fn cpu_chain(first: ExecutorKind) -> Vec<ExecutorId> {
    if first == Streaming {
        vec![Streaming.into()]
    } else {
        vec![first.into(), Streaming.into()]
    }
}

/// What decides how many sub-compactions a job is cut into, before its
/// chain is known ([`subcompactions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartsAsk {
    /// The job's input bytes.
    pub input_bytes: u64,
    /// The least a part may hold: one output file's worth, so that a part
    /// never writes less than a whole file.
    pub part_bytes: u64,
    /// The job runs whole: on a worker (its own cores split it if they
    /// like), or under a custom comparator (ranges are cut in bytewise
    /// order only).
    pub whole: bool,
    /// L0->L1 or a manual job: it may take up to `max_subcompactions`
    /// parts whatever else runs (ProckStore's fourth priority: L0 holds the
    /// writers up, a manual job a caller).
    pub urgent: bool,
    /// The cores this process may use.
    pub cores: usize,
    /// Compaction jobs running beside this one.
    pub other_jobs: usize,
    /// `Options::subcompactions()`.
    pub max_subcompactions: usize,
}

/// How many sub-compactions a job runs as: jobs of at least two output
/// files' worth, up to `max_subcompactions` when urgent, and a deeper job
/// up to the cores no one else is using (one kept for the foreground, one
/// for each other running job), so that a backlog of deep jobs uses idle
/// cores and takes none from busy ones. [`parts_on`] then caps a device
/// job.
pub fn subcompactions(ask: PartsAsk) -> usize {
    if ask.whole {
        return 1;
    }
    let most = if ask.urgent {
        ask.max_subcompactions
    } else {
        priority::idle_cores(ask.cores, ask.other_jobs).min(ask.max_subcompactions)
    };
    priority::subcompaction_parts(ask.input_bytes, ask.part_bytes, most)
}

/// Sub-compactions for a job placed on `chain` that the scheduler would cut
/// into `parts`: a job on the device at most `device_parts` (at least 1;
/// `Options::opencl.subcompactions`). The device takes few large jobs (by
/// default a job whole): its own pipeline overlaps reading, the device and
/// writing slice by slice, and many sub-compactions would only make small
/// device jobs compete for one device and the host (the GPU paper batches
/// small jobs for the same reason).
pub fn parts_on(chain: &Chain, parts: usize, device_parts: usize) -> usize {
    match chain.executors.first() {
        Some(first) if *first == OpenCl => parts.min(device_parts.max(1)),
        _ => parts,
    }
}

/// Under `auto`, whether the device's measured throughput earns it a job
/// that placement allows it: `Ok` with what was measured (for the reason),
/// or `Err` saying why the job goes to `cpu` instead. The device runs its
/// jobs until both are measured; then the faster one runs them, and every
/// [`EXPLORE_EVERY`]th job goes to the other, so that its measurement
/// follows the machine's load (as `choose_cpu` does between the CPU
/// executors).
fn device_measured(
    book: &ExecutorBook,
    cpu: ExecutorKind,
    load: &Load,
) -> std::result::Result<String, String> {
    let mb = |bytes_per_second: f64| bytes_per_second / crate::units::MB;
    let explore = load.job_sequence % EXPLORE_EVERY == 0;
    match (book.throughput(OpenCl), book.throughput(cpu)) {
        (None, _) => Ok(String::new()),
        (Some(_), None) if explore => Err(format!(
            "measuring {cpu} once beside the device (every {EXPLORE_EVERY}th job)"
        )),
        (Some(_), None) => Ok(String::new()),
        (Some(device), Some(host)) => {
            let measured = format!("opencl {:.0} MB/s, {cpu} {:.0} MB/s", mb(device), mb(host));
            let cheaper = (device >= host * (1.0 - DEVICE_SLOWER_ALLOWED))
                .then(|| host_cpu_share(book, cpu, host, load))
                .flatten()
                .filter(|&share| share <= DEVICE_HOST_CPU_SHARE);
            let wins = device >= host || cheaper.is_some();
            match (wins, explore) {
                (true, false) => match cheaper.filter(|_| device < host) {
                    Some(share) => Ok(format!(
                        "; measured within {:.0} % of {cpu} at {:.0} % of its host CPU: {measured}",
                        DEVICE_SLOWER_ALLOWED * 100.0,
                        share * 100.0
                    )),
                    None => Ok(format!("; measured faster: {measured}")),
                },
                (true, true) => Err(format!(
                    "re-measuring {cpu} (every {EXPLORE_EVERY}th job): {measured}"
                )),
                (false, false) => Err(format!("measured slower: {measured}")),
                (false, true) => Ok(format!(
                    "; re-measuring the device (every {EXPLORE_EVERY}th job): {measured}"
                )),
            }
        }
    }
}

/// The device's host CPU per byte as a share of `cpu`'s, whose throughput
/// is `host` bytes per second; `None` before the device measured any. The
/// device's is measured (its own threads' CPU time); a CPU executor's is
/// taken as its threads kept busy for the job's time: one for `streaming`,
/// the cores one part of the job has for `parallel`.
fn host_cpu_share(book: &ExecutorBook, cpu: ExecutorKind, host: f64, load: &Load) -> Option<f64> {
    let device = book.record(OpenCl)?.device_host_cpu_per_byte()?;
    let threads = if cpu == Parallel {
        load.cores_per_part()
    } else {
        1
    };
    let cpu_per_byte = threads as f64 / host;
    Some(device / cpu_per_byte)
}

/// The chain of a manual compaction that asked for executor `kind`: that
/// one, then `streaming` (the reference, which runs every job).
pub fn requested(kind: ExecutorKind) -> Chain {
    Chain {
        executors: cpu_chain(kind),
        reason: format!("compact_range asked for {kind}"),
        kept_off_device: None,
    }
}

/// `chain` for a thread that serves the remote workers: a worker first,
/// then what the CPU would run (the worker's failure costs only time).
pub fn remote_first(chain: Chain) -> Chain {
    let mut executors = vec![Remote.into()];
    executors.extend(chain.executors.iter().filter(|&&id| id != Remote));
    Chain {
        executors,
        reason: format!("on a remote worker; locally: {}", chain.reason),
        kept_off_device: None,
    }
}

/// `chain` with the options' custom executor `name` first: it is offered
/// every job; what it fails goes on as placement would have run it.
pub fn custom_first(chain: Chain, name: &'static str) -> Chain {
    let custom = ExecutorId::Custom(name);
    let mut executors = vec![custom];
    executors.extend(chain.executors.iter().filter(|&&id| id != custom));
    Chain {
        executors,
        reason: format!("on the custom executor {name}; else: {}", chain.reason),
        kept_off_device: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_compact::job::{
        CostReport, DeviceCosts, InputRun, JobFile, PhaseStats, TableSettings,
    };

    #[test]
    fn deeper_jobs_split_over_idle_cores_and_urgent_ones_over_the_maximum() {
        let ask = PartsAsk {
            input_bytes: 80 << 20,
            part_bytes: 8 << 20,
            whole: false,
            urgent: false,
            cores: 16,
            other_jobs: 0,
            max_subcompactions: 16,
        };
        // Ten files' worth on 15 idle cores (one kept for the foreground).
        assert_eq!(subcompactions(ask), 10);
        // Three other jobs running: 12 idle cores, ten parts still fit.
        assert_eq!(
            subcompactions(PartsAsk {
                other_jobs: 3,
                ..ask
            }),
            10
        );
        // On two cores with another job running, none is idle: one part.
        let two = PartsAsk {
            cores: 2,
            other_jobs: 1,
            max_subcompactions: 2,
            ..ask
        };
        assert_eq!(subcompactions(two), 1);
        // L0->L1 or manual: up to the maximum whatever else runs.
        assert_eq!(
            subcompactions(PartsAsk {
                urgent: true,
                ..two
            }),
            2
        );
        // Less than two files' worth is not split.
        assert_eq!(
            subcompactions(PartsAsk {
                input_bytes: 12 << 20,
                ..ask
            }),
            1
        );
        // Whole jobs: one part.
        assert_eq!(
            subcompactions(PartsAsk {
                whole: true,
                urgent: true,
                ..ask
            }),
            1
        );
    }

    fn ids(kinds: &[ExecutorKind]) -> Vec<ExecutorId> {
        kinds.iter().map(|&kind| kind.into()).collect()
    }

    fn job(files: usize, file_size: u64) -> CompactionJob {
        CompactionJob {
            id: 1,
            inputs: (0..files)
                .map(|i| InputRun {
                    level: 0,
                    files: vec![JobFile {
                        number: i as u64,
                        file_size,
                        smallest: b"a\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
                        largest: b"z\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
                    }],
                })
                .collect(),
            output_level: 1,
            max_output_file_size: 2 << 20,
            grandparents: vec![],
            max_grandparent_overlap_bytes: 20 << 20,
            smallest_snapshot: 0,
            deeper_levels: vec![],
            table: TableSettings::default(),
            ..CompactionJob::default()
        }
    }

    fn load(cores: usize) -> Load {
        Load {
            cores,
            other_jobs: 0,
            parts: 1,
            job_sequence: 1,
            foreground: false,
        }
    }

    const DEVICE: DeviceFacts = DeviceFacts {
        policy: PlacementPolicy::AllDevice,
        limits: DeviceLimits {
            max_device_files: 40,
            memory_budget: 1 << 30,
        },
    };

    #[test]
    fn auto_uses_streaming_on_two_cores_and_parallel_on_many() {
        let book = ExecutorBook::default();
        let two = chain(
            &job(4, 1 << 20),
            &ExecutorChoice::Auto,
            None,
            &book,
            &load(2),
        );
        assert_eq!(two.executors, ids(&[Streaming]));
        assert!(two.reason.contains("1 core(s)"), "{}", two.reason);
        let many = chain(
            &job(4, 1 << 20),
            &ExecutorChoice::Auto,
            None,
            &book,
            &load(16),
        );
        assert_eq!(many.executors, ids(&[Parallel, Streaming]));
        // Sub-compactions share the cores.
        let split = Load {
            parts: 8,
            ..load(16)
        };
        assert_eq!(choose_cpu(&book, &split).0, Streaming);
    }

    #[test]
    fn auto_keeps_jobs_with_few_cores_on_streaming_whatever_was_measured() {
        let mut book = ExecutorBook::default();
        for sequence in 0..2 * EXPLORE_EVERY {
            let few = Load {
                job_sequence: sequence,
                ..load(3)
            };
            assert_eq!(choose_cpu(&book, &few).0, Streaming, "job {sequence}");
        }
        // Even when `parallel` measured faster (on jobs with more cores).
        book.record_job(Parallel.name(), 300 << 20, 1.0, 1000);
        book.record_job(Streaming.name(), 100 << 20, 1.0, 1000);
        let (pick, reason) = choose_cpu(&book, &load(3));
        assert_eq!(pick, Streaming);
        assert!(reason.contains("pay off from 3"), "{reason}");
        assert_eq!(choose_cpu(&book, &load(4)).0, Parallel);
    }

    /// With the foreground at work, `parallel` runs only where it costs
    /// little more CPU per byte than `streaming`, however fast it is; a
    /// manual compaction (nobody else wants the cores) takes the faster.
    #[test]
    fn auto_weighs_cpu_per_byte_while_the_foreground_works() {
        let mut book = ExecutorBook::default();
        // 16 threads at 1.5x one streaming thread's speed: 10.7x its CPU
        // per byte.
        book.record_job(Parallel.name(), 150 << 20, 1.0, 1000);
        book.record_job(Streaming.name(), 100 << 20, 1.0, 1000);
        let idle = load(17);
        assert_eq!(choose_cpu(&book, &idle).0, Parallel);
        let busy = Load {
            foreground: true,
            ..idle
        };
        let (pick, reason) = choose_cpu(&book, &busy);
        assert_eq!(pick, Streaming);
        assert!(reason.contains("CPU-s/GB"), "{reason}");
        // Work-efficient: 4 threads at 3.5x the speed (1.14x the CPU).
        let mut efficient = ExecutorBook::default();
        efficient.record_job(Parallel.name(), 350 << 20, 1.0, 1000);
        efficient.record_job(Streaming.name(), 100 << 20, 1.0, 1000);
        let four = Load {
            foreground: true,
            ..load(5)
        };
        assert_eq!(choose_cpu(&efficient, &four).0, Parallel);
    }

    #[test]
    fn auto_follows_measurements_and_explores_now_and_then() {
        let mut book = ExecutorBook::default();
        book.record_job(Parallel.name(), 100 << 20, 1.0, 1000);
        book.record_job(Streaming.name(), 300 << 20, 1.0, 1000);
        let (pick, reason) = choose_cpu(&book, &load(16));
        assert_eq!(pick, Streaming, "measured faster even on many cores");
        assert!(reason.contains("measured faster"), "{reason}");
        let explore = Load {
            job_sequence: EXPLORE_EVERY * 3,
            ..load(16)
        };
        assert_eq!(choose_cpu(&book, &explore).0, Parallel);
    }

    #[test]
    fn forced_names_are_obeyed_and_streaming_ends_every_chain() {
        let book = ExecutorBook::default();
        let forced = |name| {
            chain(
                &job(2, 1 << 20),
                &ExecutorChoice::Forced(name),
                Some(&DEVICE),
                &book,
                &load(2),
            )
            .executors
        };
        assert_eq!(forced(Streaming), ids(&[Streaming]));
        assert_eq!(forced(Parallel), ids(&[Parallel, Streaming]));
        assert_eq!(forced(OpenCl), ids(&[OpenCl, Parallel, Streaming]));
    }

    #[test]
    fn executor_failures_pass_on_and_bad_input_or_disks_do_not() {
        use shale_format::Error;
        assert!(passes_to_next_executor(&Error::executor_failed(
            OpenCl.name(),
            "kernel launch failed"
        )));
        assert!(passes_to_next_executor(&Error::NotSupported("x".into())));
        assert!(!passes_to_next_executor(&Error::corruption(7, "bad block")));
        assert!(!passes_to_next_executor(&Error::io(
            "writing",
            std::io::Error::other("disk full")
        )));
    }

    #[test]
    fn the_device_is_skipped_with_a_reason() {
        let mut book = ExecutorBook::default();
        // Too many files for the device.
        let big = chain(
            &job(41, 1000),
            &ExecutorChoice::Auto,
            Some(&DEVICE),
            &book,
            &load(2),
        );
        assert_eq!(big.executors, ids(&[Streaming]));
        let why = big.kept_off_device.unwrap();
        assert!(why.contains("41 input files"), "{why}");
        // Long entries.
        book.record_job(Streaming.name(), 4 << 20, 1.0, 1000);
        let long = chain(
            &job(2, 1000),
            &ExecutorChoice::Auto,
            Some(&DEVICE),
            &book,
            &load(2),
        );
        assert!(long.kept_off_device.unwrap().contains("short pairs"));
        // A device that keeps failing is rested.
        let mut book = ExecutorBook::default();
        for _ in 0..DEVICE_REST_AFTER_FAILURES {
            book.record_failure(OpenCl, false);
        }
        let rested = chain(
            &job(2, 1000),
            &ExecutorChoice::Auto,
            Some(&DEVICE),
            &book,
            &load(2),
        );
        assert!(rested.kept_off_device.unwrap().contains("failed its last"));
        // A healthy device with short entries gets the job first.
        let fine = chain(
            &job(2, 1000),
            &ExecutorChoice::Auto,
            Some(&DEVICE),
            &ExecutorBook::default(),
            &load(2),
        );
        assert_eq!(fine.executors, ids(&[OpenCl, Streaming]));
        assert!(fine.reason.contains("device"), "{}", fine.reason);
    }

    /// The chain `auto` gives a small job on a 2-core machine with the
    /// device, as job number `sequence`.
    fn place_on_two_cores(book: &ExecutorBook, sequence: u64) -> Chain {
        let load = Load {
            job_sequence: sequence,
            ..load(2)
        };
        chain(
            &job(2, 1000),
            &ExecutorChoice::Auto,
            Some(&DEVICE),
            book,
            &load,
        )
    }

    #[test]
    fn auto_gives_the_device_jobs_while_it_measures_faster() {
        let at = |sequence: u64| Load {
            job_sequence: sequence,
            ..load(2)
        };
        let place = place_on_two_cores;
        // Nothing measured: the device first.
        let mut book = ExecutorBook::default();
        assert_eq!(place(&book, 1).executors[0], OpenCl);
        // The device measured, the CPU not: one job in EXPLORE_EVERY
        // measures the CPU.
        book.record_job(OpenCl.name(), 100 << 20, 1.0, 1_000_000);
        assert_eq!(place(&book, 1).executors[0], OpenCl);
        let measuring = place(&book, EXPLORE_EVERY);
        assert_eq!(measuring.executors, ids(&[Streaming]));
        assert!(
            measuring
                .kept_off_device
                .unwrap()
                .contains("measuring streaming"),
            "{}",
            measuring.reason
        );
        // The device faster: it keeps the jobs, saying what was measured.
        book.record_job(Streaming.name(), 50 << 20, 1.0, 1_000_000);
        let faster = place(&book, 1);
        assert_eq!(faster.executors[0], OpenCl);
        assert!(
            faster
                .reason
                .contains("measured faster: opencl 100 mb/s, streaming 50 mb/s"),
            "{}",
            faster.reason
        );
        assert_eq!(place(&book, EXPLORE_EVERY).executors, ids(&[Streaming]));
        // The device slower: the CPU takes the jobs, the device one in
        // EXPLORE_EVERY.
        let mut book = ExecutorBook::default();
        book.record_job(OpenCl.name(), 20 << 20, 1.0, 1_000_000);
        book.record_job(Streaming.name(), 50 << 20, 1.0, 1_000_000);
        let slower = place(&book, 1);
        assert_eq!(slower.executors, ids(&[Streaming]));
        assert!(
            slower.kept_off_device.unwrap().contains("measured slower"),
            "{}",
            slower.reason
        );
        let again = place(&book, EXPLORE_EVERY);
        assert_eq!(again.executors[0], OpenCl);
        assert!(
            again.reason.contains("re-measuring the device"),
            "{}",
            again.reason
        );
        // A named device ignores the measurements.
        let forced = chain(
            &job(2, 1000),
            &ExecutorChoice::Forced(OpenCl),
            Some(&DEVICE),
            &book,
            &at(1),
        );
        assert_eq!(forced.executors[0], OpenCl);
    }

    #[test]
    fn auto_gives_a_slightly_slower_device_the_jobs_when_it_spares_the_host_cpu() {
        let place = place_on_two_cores;
        // The device 2 % slower than streaming (100 MB/s, one core: 10 ms
        // of CPU per MB).
        let device_with_cpu = |cpu_secs: f64| {
            let mut book = ExecutorBook::default();
            book.record_job(OpenCl.name(), 98 << 20, 1.0, 1_000_000);
            let phases = PhaseStats {
                costs: CostReport {
                    device: Some(DeviceCosts {
                        host_thread_cpu_nanos: (cpu_secs * 1e9) as u64,
                        ..DeviceCosts::default()
                    }),
                    ..CostReport::default()
                },
                ..PhaseStats::default()
            };
            book.record_phases(OpenCl.name(), &phases);
            book.record_job(Streaming.name(), 100 << 20, 1.0, 1_000_000);
            book
        };
        // At 0.2 s of host CPU for its 98 MB, about a fifth of streaming's:
        // the device, saying why.
        let cheap = place(&device_with_cpu(0.2), 1);
        assert_eq!(cheap.executors[0], OpenCl, "{}", cheap.reason);
        assert!(
            cheap
                .reason
                .contains("within 3 % of streaming at 20 % of its host cpu"),
            "{}",
            cheap.reason
        );
        // Every EXPLORE_EVERY-th job still measures the CPU.
        assert_eq!(
            place(&device_with_cpu(0.2), EXPLORE_EVERY).executors,
            ids(&[Streaming])
        );
        // At 0.9 s, about as much as streaming: the faster CPU.
        let costly = place(&device_with_cpu(0.9), 1);
        assert_eq!(costly.executors, ids(&[Streaming]));
        assert!(
            costly.reason.contains("measured slower"),
            "{}",
            costly.reason
        );
        // Not measured (0): throughput alone decides.
        assert_eq!(place(&device_with_cpu(0.0), 1).executors, ids(&[Streaming]));
        // More than 3 % slower: the CPU, however little the device costs.
        let mut book = device_with_cpu(0.01);
        book.record_job(Streaming.name(), 200 << 20, 1.0, 1_000_000);
        assert_eq!(place(&book, 1).executors, ids(&[Streaming]));
    }

    #[test]
    fn a_device_job_is_cut_into_at_most_the_devices_parts() {
        let on = |executors: &[ExecutorKind]| Chain {
            executors: ids(executors),
            reason: String::new(),
            kept_off_device: None,
        };
        assert_eq!(parts_on(&on(&[OpenCl, Streaming]), 8, 1), 1);
        assert_eq!(parts_on(&on(&[OpenCl, Streaming]), 8, 3), 3);
        assert_eq!(parts_on(&on(&[OpenCl, Streaming]), 2, 3), 2);
        assert_eq!(parts_on(&on(&[OpenCl, Streaming]), 8, 0), 1, "0 is 1");
        assert_eq!(parts_on(&on(&[Parallel, Streaming]), 8, 1), 8);
        // The options' custom executor first: not a device job.
        let custom = custom_first(on(&[OpenCl, Streaming]), "mine");
        assert_eq!(custom.names(), ["mine", "opencl", "streaming"]);
        assert_eq!(parts_on(&custom, 8, 1), 8);
    }

    #[test]
    fn a_remote_lane_tries_a_worker_then_the_cpu_chain() {
        let book = ExecutorBook::default();
        let load = load(2);
        let cpu = chain(&job(2, 1 << 20), &ExecutorChoice::Auto, None, &book, &load);
        let remote = remote_first(cpu.clone());
        assert_eq!(remote.executors.first(), Some(&Remote.into()));
        assert_eq!(&remote.executors[1..], cpu.executors.as_slice());
        assert_eq!(remote.executors.last(), Some(&Streaming.into()));
        assert!(remote.reason.contains("remote"));
    }
}
