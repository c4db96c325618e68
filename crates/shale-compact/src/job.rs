//! A compaction as plain data. The picker in the engine fills a
//! [`CompactionJob`]; an [`Executor`] turns it into output tables and returns
//! a [`CompactionOutput`]; only the engine installs the result. A job holds
//! everything an executor needs, so the same job can run on a thread, a GPU
//! or another process.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shale_format::bloom::FilterPolicy;
use shale_format::comparator::{compare_bytes, KeyOrder};
use shale_format::format::{CompressionType, RandomAccess};
use shale_format::internal_key::{extract_user_key, SequenceNumber};
use shale_format::options::TableOptions;
use shale_format::Result;

use crate::remote::RemoteJobIo;

/// How output tables are laid out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSettings {
    /// Target uncompressed size of a data block.
    pub block_size: usize,
    /// Entries between restart points.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; `None` for no filter.
    pub bloom_bits_per_key: Option<u32>,
    /// Snappy per block (kept only when it saves 1/8).
    pub snappy: bool,
}

impl Default for TableSettings {
    fn default() -> TableSettings {
        TableSettings {
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: Some(10),
            snappy: true,
        }
    }
}

impl TableSettings {
    /// Table options for internal-key tables with these settings, user keys
    /// in bytewise order.
    pub fn table_options(&self) -> TableOptions {
        self.table_options_in(&KeyOrder::bytewise())
    }

    /// Table options for internal-key tables with these settings, user keys
    /// in `order` (which orders the keys and shortens the index keys).
    pub fn table_options_in(&self, order: &KeyOrder) -> TableOptions {
        TableOptions {
            comparator: order.internal_comparator(),
            block_size: self.block_size,
            block_restart_interval: self.block_restart_interval,
            compression: if self.snappy {
                CompressionType::Snappy
            } else {
                CompressionType::None
            },
            ..TableOptions::internal(self.bloom_bits_per_key)
        }
    }
}

/// One table file: its number, size and key bounds (encoded internal keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFile {
    /// File number (the file is `NNNNNN.ldb` in the database directory).
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
}

/// A sorted run: one L0 table, or all chosen tables of a level >= 1 in key
/// order (their ranges do not overlap).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRun {
    /// Level the files come from.
    pub level: usize,
    /// The files, in key order.
    pub files: Vec<JobFile>,
}

/// An inclusive range of user keys held by one file of a deeper level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserKeyRange {
    /// Smallest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
}

/// A half-open range of user keys, `lower <= k < upper` in bytewise order;
/// a `None` bound is unbounded on that side. The default is every key.
///
/// A sub-compaction is a [`CompactionJob`] restricted to such a range (see
/// [`crate::subcompaction`]). Bounds are on user keys, never internal keys,
/// so every version of a user key lands in the same sub-job and gc decides
/// exactly as it would for the whole job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyRange {
    /// Smallest user key in the range (inclusive); `None`: no lower bound.
    pub lower: Option<Vec<u8>>,
    /// First user key past the range (exclusive); `None`: no upper bound.
    pub upper: Option<Vec<u8>>,
}

impl KeyRange {
    /// Every user key.
    pub const FULL: KeyRange = KeyRange {
        lower: None,
        upper: None,
    };

    /// The range `lower <= k < upper`.
    pub fn new(lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> KeyRange {
        KeyRange { lower, upper }
    }

    /// True when neither side is bounded.
    pub fn is_full(&self) -> bool {
        self.lower.is_none() && self.upper.is_none()
    }

    /// True when `user_key` sorts before the range (`user_key < lower`).
    #[inline]
    pub fn is_below(&self, user_key: &[u8]) -> bool {
        self.lower.as_deref().is_some_and(|l| user_key < l)
    }

    /// True when `user_key` sorts after the range (`user_key >= upper`).
    #[inline]
    pub fn is_above(&self, user_key: &[u8]) -> bool {
        // Inlined: asked for every entry of a sub-compaction.
        self.upper
            .as_deref()
            .is_some_and(|u| compare_bytes(user_key, u).is_ge())
    }

    /// True when `lower <= user_key < upper`.
    #[inline]
    pub fn contains(&self, user_key: &[u8]) -> bool {
        !self.is_below(user_key) && !self.is_above(user_key)
    }

    /// True when no user key is in the range (`lower >= upper`).
    pub fn is_empty(&self) -> bool {
        match (&self.lower, &self.upper) {
            (Some(lower), Some(upper)) => lower >= upper,
            _ => false,
        }
    }

    /// True when some key of the inclusive range `[smallest, largest]` of
    /// user keys is in this range.
    pub fn overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        !self.is_below(largest) && !self.is_above(smallest)
    }

    /// The keys in both ranges.
    pub fn intersect(&self, other: &KeyRange) -> KeyRange {
        let lower = match (&self.lower, &other.lower) {
            (Some(a), Some(b)) => Some(a.max(b).clone()),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        let upper = match (&self.upper, &other.upper) {
            (Some(a), Some(b)) => Some(a.min(b).clone()),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        KeyRange { lower, upper }
    }
}

/// Everything needed to run one compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionJob {
    /// Identifies the job in logs and statistics.
    pub id: u64,
    /// The inputs. Order matters only for ties (none occur between distinct
    /// entries, whose sequence numbers differ), and is by run index.
    pub inputs: Vec<InputRun>,
    /// Level the outputs go to.
    pub output_level: usize,
    /// An output file is closed once its data blocks reach this many
    /// uncompressed bytes (see [`crate::boundaries`]).
    pub max_output_file_size: u64,
    /// Files of the level below the output level, in key order: an output
    /// file is also closed before it would overlap too many of them.
    pub grandparents: Vec<JobFile>,
    /// The overlap limit with `grandparents`, in bytes.
    pub max_grandparent_overlap_bytes: u64,
    /// Oldest sequence number a live snapshot can see; older hidden versions
    /// and tombstones at or below it may be dropped.
    pub smallest_snapshot: SequenceNumber,
    /// For each level below the output level, the user-key ranges of its
    /// files in key order: a tombstone is dropped only when no deeper file
    /// can hold its key.
    pub deeper_levels: Vec<Vec<UserKeyRange>>,
    /// Layout of the output tables.
    pub table: TableSettings,
    /// Only entries whose user key is in this range are compacted and
    /// written; the others belong to a sibling sub-job and are skipped as if
    /// absent (they do not feed gc or the grandparent cut either). Input runs
    /// still list whole files: an executor reads only the blocks that can
    /// hold keys of the range (by their index keys) and filters the entries
    /// of the blocks at its edges. A range holding no entry produces no
    /// file. [`KeyRange::FULL`] (the default) is the whole job.
    #[serde(default)]
    pub range: KeyRange,
}

impl CompactionJob {
    /// Total size of the input files.
    pub fn input_bytes(&self) -> u64 {
        self.inputs
            .iter()
            .flat_map(|r| &r.files)
            .map(|f| f.file_size)
            .fold(0u64, u64::saturating_add)
    }

    /// Number of input files.
    pub fn input_files(&self) -> usize {
        self.inputs.iter().map(|r| r.files.len()).sum()
    }

    /// True when entries of `user_key` belong to this job (see
    /// [`CompactionJob::range`]).
    #[inline]
    pub fn in_range(&self, user_key: &[u8]) -> bool {
        self.range.contains(user_key)
    }

    /// True when `file` can hold a key of the job's range.
    pub fn file_in_range(&self, file: &JobFile) -> bool {
        self.range.overlaps(
            extract_user_key(&file.smallest),
            extract_user_key(&file.largest),
        )
    }
}

/// One table written by a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputTable {
    /// File number the engine allocated for it.
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Entries in the table.
    pub entries: u64,
}

/// Time and bytes spent in each phase of a job. The streaming executor fills
/// `read` + `merge` (+ `gc`) + `pack` as one interleaved loop and reports the
/// whole loop as `merge`; the data-parallel executors report each phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    /// Bytes of input files read.
    pub bytes_read: u64,
    /// Bytes of output files written.
    pub bytes_written: u64,
    /// Entries read from the inputs.
    pub entries_in: u64,
    /// Entries written to the outputs.
    pub entries_out: u64,
    /// Seconds reading input files.
    pub read_secs: f64,
    /// Seconds decoding blocks into entries.
    pub unpack_secs: f64,
    /// Seconds merging runs.
    pub merge_secs: f64,
    /// Seconds deciding what to drop.
    pub gc_secs: f64,
    /// Seconds encoding output blocks and tables.
    pub pack_secs: f64,
    /// Seconds writing and syncing output files.
    pub write_secs: f64,
    /// Of the I/O seconds, those that ran while computation went on (the
    /// pipeline hid them); 0 for executors that do I/O in line.
    pub overlapped_secs: f64,
    /// Wall-clock seconds for the whole job.
    pub total_secs: f64,
    /// Pipelined executors: seconds each pipeline stage was busy (`read`,
    /// `upload`, `device`, `host`, `write`, ...). Their sum above
    /// `total_secs` is work that ran at the same time as other work.
    #[serde(default)]
    pub stage_busy_secs: BTreeMap<String, f64>,
    /// Pipelined executors: CPU seconds of each stage's own threads (`read`,
    /// `device`: the thread that drives it, `write`, `host pool`), from the
    /// threads' CPU clocks. Beside `stage_busy_secs` it says whether a
    /// stage worked or waited (on a GPU, for the device or the disk).
    #[serde(default)]
    pub stage_cpu_secs: BTreeMap<String, f64>,
    /// What the job cost beside its time, as the executor counted it.
    #[serde(default)]
    pub costs: CostReport,
}

/// What a job cost beside the time of its phases, in the executor-neutral
/// terms the engine's ledger sums and its statistics print: work tallied
/// by kind (any executor that counts some), and the device's costs to the
/// host (device executors only). An executor keeps its own counters in its
/// own terms and reports them here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    /// Work tallied by kind: a device executor's kernels (by name) and its
    /// transfers (`upload`, `download`), the `remote` executor's messages
    /// each way (`wire-sent`, `wire-received`). Empty for executors that
    /// tally none.
    #[serde(default)]
    pub work: BTreeMap<String, WorkTally>,
    /// Device executors: what the job cost the host; `None` for the others.
    #[serde(default)]
    pub device: Option<DeviceCosts>,
}

impl CostReport {
    /// Adds `other` into `self`.
    pub fn accumulate(&mut self, other: &CostReport) {
        for (kind, tally) in &other.work {
            self.work.entry(kind.clone()).or_default().accumulate(tally);
        }
        if let Some(device) = &other.device {
            self.device.get_or_insert_default().accumulate(device);
        }
    }

    /// The device's costs, when there are any to show: `None` for a CPU
    /// executor, or a device executor that counted nothing.
    pub fn nonzero_device(&self) -> Option<&DeviceCosts> {
        self.device
            .as_ref()
            .filter(|device| **device != DeviceCosts::default())
    }
}

/// What a device job cost the host: the numbers that say whether data
/// crossed the bus once and the host slept while the device worked. Their
/// names are the statistics document's (`executors.NAME.device`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCosts {
    /// Kernels enqueued.
    pub kernel_launches: u64,
    /// Copies between host and device memory (either way).
    pub transfers: u64,
    /// Bytes copied to the device.
    pub bytes_uploaded: u64,
    /// Bytes copied back from the device.
    pub bytes_downloaded: u64,
    /// Of `bytes_uploaded`, those read from pinned host memory (the device
    /// reads them directly; the rest the driver copies into pinned memory
    /// of its own first, on the host).
    #[serde(default)]
    pub bytes_uploaded_pinned: u64,
    /// Of `bytes_downloaded`, those written into pinned host memory.
    #[serde(default)]
    pub bytes_downloaded_pinned: u64,
    /// Times the host blocked until the device finished something.
    pub host_waits: u64,
    /// Device buffers allocated (not taken from the kept ones).
    pub device_allocations: u64,
    /// Bytes the host copied between its own buffers for the device path
    /// (staging copies, blocks gathered into one buffer, results cut out).
    pub host_bytes_copied: u64,
    /// CPU time, in nanoseconds, of the executor's own threads while they
    /// ran the job: reading, driving the device, writing, and its host
    /// pool (decompression, compression). The OpenCL runtime's threads are
    /// not in it, so on PoCL, whose kernels run on the runtime's threads,
    /// it is what the host spends beside a GPU; the process's CPU time
    /// (`shale compact`'s host CPU) counts every thread.
    #[serde(default)]
    pub host_thread_cpu_nanos: u64,
    /// Pinned host memory mapped for the job's transfers (and touched
    /// once): an executor keeps what it maps, so the first jobs pay this
    /// and later ones map none. With several jobs on one executor at once,
    /// each counts what was mapped during its run.
    #[serde(default)]
    pub pinned_bytes_mapped: u64,
}

impl DeviceCosts {
    /// Adds `other` into `self`.
    pub fn accumulate(&mut self, other: &DeviceCosts) {
        self.kernel_launches += other.kernel_launches;
        self.transfers += other.transfers;
        self.bytes_uploaded += other.bytes_uploaded;
        self.bytes_downloaded += other.bytes_downloaded;
        self.bytes_uploaded_pinned += other.bytes_uploaded_pinned;
        self.bytes_downloaded_pinned += other.bytes_downloaded_pinned;
        self.host_waits += other.host_waits;
        self.device_allocations += other.device_allocations;
        self.host_bytes_copied += other.host_bytes_copied;
        self.host_thread_cpu_nanos += other.host_thread_cpu_nanos;
        self.pinned_bytes_mapped += other.pinned_bytes_mapped;
    }

    /// [`DeviceCosts::host_thread_cpu_nanos`] in seconds.
    pub fn host_thread_cpu_secs(&self) -> f64 {
        self.host_thread_cpu_nanos as f64 / 1e9
    }

    /// The costs in one line: `12 launches, 3 transfers (1.0 MB up,
    /// 0.9 from pinned memory; 0.5 MB down, 0.4 into pinned memory), 4
    /// waits, 0 allocations, 0.1 MB copied on the host, 0.012 CPU-s in the
    /// executor's threads, 64.0 MB of pinned memory mapped`.
    pub fn summary(&self) -> String {
        // MB is 2^20 bytes, as everywhere in ShaleDB.
        let mb = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
        format!(
            "{} launches, {} transfers ({:.1} MB up, {:.1} from pinned memory; {:.1} MB down, {:.1} into pinned memory), {} waits, {} allocations, {:.1} MB copied on the host, {:.3} CPU-s in the executor's threads, {:.1} MB of pinned memory mapped",
            self.kernel_launches,
            self.transfers,
            mb(self.bytes_uploaded),
            mb(self.bytes_uploaded_pinned),
            mb(self.bytes_downloaded),
            mb(self.bytes_downloaded_pinned),
            self.host_waits,
            self.device_allocations,
            mb(self.host_bytes_copied),
            self.host_thread_cpu_secs(),
            mb(self.pinned_bytes_mapped),
        )
    }
}

/// One kind of work of a job, summed: a kernel's launches, a transfer
/// kind's copies or the messages sent one way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkTally {
    /// Launches, transfers or messages.
    pub count: u64,
    /// Work items (0 where there are none: transfers, messages).
    pub items: u64,
    /// Bytes processed (a kernel's main input) or moved.
    pub bytes: u64,
    /// Seconds the work took (a device's profiled time, where it reports
    /// one; 0 where it is not timed).
    pub seconds: f64,
}

impl WorkTally {
    /// Adds `other` into `self`.
    pub fn accumulate(&mut self, other: &WorkTally) {
        self.count += other.count;
        self.items += other.items;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
    }

    /// Bytes per second, when there is a time to divide by.
    pub fn bytes_per_second(&self) -> Option<f64> {
        (self.seconds > 0.0 && self.bytes > 0).then(|| self.bytes as f64 / self.seconds)
    }
}

impl PhaseStats {
    /// Adds `other` into `self`.
    pub fn accumulate(&mut self, other: &PhaseStats) {
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.entries_in += other.entries_in;
        self.entries_out += other.entries_out;
        self.read_secs += other.read_secs;
        self.unpack_secs += other.unpack_secs;
        self.merge_secs += other.merge_secs;
        self.gc_secs += other.gc_secs;
        self.pack_secs += other.pack_secs;
        self.write_secs += other.write_secs;
        self.overlapped_secs += other.overlapped_secs;
        self.total_secs += other.total_secs;
        for (stage, secs) in &other.stage_busy_secs {
            *self.stage_busy_secs.entry(stage.clone()).or_default() += secs;
        }
        for (stage, secs) in &other.stage_cpu_secs {
            *self.stage_cpu_secs.entry(stage.clone()).or_default() += secs;
        }
        self.costs.accumulate(&other.costs);
    }

    /// Seconds of work that ran concurrently with other work: the stages'
    /// busy seconds summed, minus the wall-clock seconds (0 when there are
    /// no stages, or nothing overlapped).
    pub fn concurrent_secs(&self) -> f64 {
        let busy: f64 = self.stage_busy_secs.values().sum();
        (busy - self.total_secs).max(0.0)
    }

    /// The pipeline's stage times in one line, `stages busy device 0.291 s,
    /// read 0.039 s = 0.330 s in 0.317 s wall (0.013 s ran concurrently)`,
    /// then the stages' CPU where it was counted (`; CPU device 0.101 s,
    /// read 0.020 s`); `None` when the executor reported no stages.
    pub fn pipeline_summary(&self) -> Option<String> {
        if self.stage_busy_secs.is_empty() {
            return None;
        }
        let busy: f64 = self.stage_busy_secs.values().sum();
        let stages: Vec<String> = self
            .stage_busy_secs
            .iter()
            .map(|(stage, secs)| format!("{stage} {secs:.3} s"))
            .collect();
        let mut line = format!(
            "stages busy {} = {busy:.3} s in {:.3} s wall ({:.3} s ran concurrently)",
            stages.join(", "),
            self.total_secs,
            self.concurrent_secs()
        );
        if !self.stage_cpu_secs.is_empty() {
            let cpu: Vec<String> = self
                .stage_cpu_secs
                .iter()
                .map(|(stage, secs)| format!("{stage} {secs:.3} s"))
                .collect();
            line.push_str(&format!("; CPU {}", cpu.join(", ")));
        }
        Some(line)
    }
}

/// What a job produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionOutput {
    /// Name of the executor that ran the job.
    pub executor: String,
    /// The tables, in key order.
    pub outputs: Vec<OutputTable>,
    /// Where the time went.
    pub stats: PhaseStats,
    /// Set when the job was meant for a device but ran on the CPU: why.
    #[serde(default)]
    pub fallback: Option<String>,
}

/// A file being written by an executor.
pub trait OutputSink: std::io::Write + Send {
    /// Makes the file durable and closes it.
    fn finish(self: Box<Self>) -> Result<()>;

    /// Says the file will hold at least `len` bytes (an executor that has
    /// a whole file's blocks before it writes them), so that their disk
    /// space may be reserved at once. By default nothing.
    fn reserve(&mut self, len: u64) -> Result<()> {
        let _ = len;
        Ok(())
    }
}

/// The engine's side of a job: access to input files and new output files.
/// Executors see nothing else of the engine.
pub trait JobIo: Send + Sync {
    /// Opens an input table for reading.
    fn open_input(&self, file: &JobFile) -> Result<Arc<dyn RandomAccess>>;
    /// Allocates a file number and creates the output table file. The engine
    /// removes every file created by a job that fails.
    fn create_output(&self) -> Result<(u64, Box<dyn OutputSink>)>;
    /// Deletes an output this job created and will not report: a device
    /// executor whose device failed after some files were written runs the
    /// job again on the CPU, with new files.
    fn discard_output(&self, number: u64) -> Result<()>;
    /// The order of the database's user keys. Bytewise (the default) is the
    /// only order executors other than `streaming` accept; they fail a job
    /// in another order with [`shale_format::Error::NotSupported`].
    fn key_order(&self) -> KeyOrder {
        KeyOrder::bytewise()
    }
    /// A filter policy of the database's own (over internal keys) that
    /// replaces the Bloom filter of the job's [`TableSettings`]; `None` (the
    /// default): the settings decide. Like a custom key order, only
    /// `streaming` accepts it ([`require_bytewise`]): the other executors
    /// build Bloom filters themselves.
    fn filter_policy(&self) -> Option<Arc<dyn FilterPolicy>> {
        None
    }
    /// The I/O only the `remote` executor needs (the database directory
    /// its worker reaches, the adoption of the tables it staged there);
    /// `None` (the default): this job's files are not where a worker can
    /// reach them, and the `remote` executor fails the job.
    fn remote(&self) -> Option<&dyn RemoteJobIo> {
        None
    }
}

/// The error an executor that compares key bytes fails a job with when
/// `io`'s keys are in a custom order, or when the database has a filter
/// policy of its own (such an executor builds Bloom filters); `Ok` for
/// bytewise order and the job's own filter settings.
pub fn require_bytewise(executor: &str, io: &dyn JobIo) -> Result<()> {
    let order = io.key_order();
    if !order.is_bytewise() {
        return Err(shale_format::Error::NotSupported(format!(
            "the {executor} executor compares key bytes and cannot use the custom comparator {}",
            order.name()
        )));
    }
    if let Some(policy) = io.filter_policy() {
        return Err(shale_format::Error::NotSupported(format!(
            "the {executor} executor builds Bloom filters and cannot use the filter policy {}",
            policy.name()
        )));
    }
    Ok(())
}

/// Turns a job into output tables. Every executor must write byte-identical
/// tables for the same job (the conformance harness checks it).
pub trait Executor: Send + Sync + Debug {
    /// Name used in options, logs and statistics: a built-in executor's
    /// [`ExecutorKind::name`](crate::ExecutorKind::name) (`streaming`,
    /// `parallel`, ...); an executor of the caller's has one of its own
    /// ([`ExecutorId::Custom`](crate::ExecutorId::Custom)).
    fn name(&self) -> &'static str;
    /// Runs the job to completion.
    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput>;
    /// Whether the executor's CPU work runs on threads it lowers to its own
    /// nice level (see [`crate::nice`]), so that the thread calling
    /// [`Executor::run`] mostly waits and may keep its priority. The
    /// engine's compaction thread that drives a device runs at normal
    /// priority and calls such an executor itself; any other executor's
    /// job it runs on a worker lowered to `compaction_nice`. Default: false.
    fn lowers_its_own_threads(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(lower: Option<&[u8]>, upper: Option<&[u8]>) -> KeyRange {
        KeyRange::new(lower.map(<[u8]>::to_vec), upper.map(<[u8]>::to_vec))
    }

    #[test]
    fn key_range_bounds_are_half_open() {
        let r = range(Some(b"b"), Some(b"d"));
        assert!(r.is_below(b"a") && !r.is_below(b"b"));
        assert!(r.contains(b"b") && r.contains(b"c") && r.contains(b"cz"));
        assert!(!r.contains(b"d") && r.is_above(b"d") && !r.is_above(b"c"));
        assert!(KeyRange::FULL.contains(b"") && KeyRange::FULL.is_full());
        assert!(range(Some(b"b"), None).contains(b"zzz"));
        assert!(range(None, Some(b"b")).contains(b""));
        assert!(range(Some(b"b"), Some(b"b")).is_empty());
        assert!(!range(Some(b"b"), None).is_empty());
    }

    #[test]
    fn key_range_overlaps_and_intersects() {
        let r = range(Some(b"b"), Some(b"d"));
        assert!(r.overlaps(b"a", b"b"));
        assert!(!r.overlaps(b"a", b"az"));
        assert!(r.overlaps(b"c", b"z"));
        assert!(!r.overlaps(b"d", b"z"));
        assert_eq!(
            r.intersect(&range(Some(b"c"), None)),
            range(Some(b"c"), Some(b"d"))
        );
        assert_eq!(
            r.intersect(&range(None, Some(b"bb"))),
            range(Some(b"b"), Some(b"bb"))
        );
        assert_eq!(KeyRange::FULL.intersect(&r), r);
        assert!(r.intersect(&range(Some(b"x"), None)).is_empty());
    }
}
