//! Compactions a caller asks for and waits on: `compact_range` (each
//! level's plan reserved through the service's queue and run on the
//! calling thread, in sub-compactions) and waiting until no compaction is
//! needed.

use shale_compact::ExecutorKind;
use shale_format::version_edit::NUM_LEVELS;
use shale_format::{Error, Result};

use super::{Caller, Runner};
use crate::compaction::host::JobHost;
use crate::compaction::picker;
use crate::options::ExecutorChoice;
use crate::version::Version;

impl Runner {
    /// Compacts the user-key range `[begin, end]` (`None`: unbounded) down
    /// through every level that holds it. Each level's plan goes through the
    /// scheduler's queue (reserving its files, visible in
    /// `shale.scheduler`) and runs on this thread, in sub-compactions.
    /// `executor` other than `auto`: run every job on it (then `streaming`
    /// if it fails) instead of where the scheduler would; checked to exist
    /// first.
    ///
    /// It compacts what the database holds when it is called, as LevelDB
    /// and RocksDB do, and does not chase writes that arrive meanwhile:
    /// level 0 is done once the files it held at the call have left it, a
    /// deeper level is swept once, from a cursor that only moves forward,
    /// and an open end stops at the largest key held at the call.
    pub(crate) fn compact_range(
        &self,
        host: &dyn JobHost,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        executor: ExecutorChoice,
    ) -> Result<()> {
        let executor = self.executors.for_manual_compaction(executor);
        // Naming `opencl` waited for `auto`'s probe: the service learns the
        // answer now, whatever this call does next.
        self.note_device();
        let executor = executor?;
        host.flush()?;
        let at_call = {
            let (version, _) = host.version_and_snapshot_floor();
            RangeAtCall::new(&version, begin, end)
        };
        let end = at_call.end.as_deref();
        let l0_at_call = &at_call.l0_files;
        self.compact_level_manually(host, 0, begin, end, executor, &|version| {
            version.files[0]
                .iter()
                .any(|f| l0_at_call.contains(&f.number))
        })?;
        let order = self.options.key_order();
        for level in 1..at_call.deepest {
            let mut cursor = begin.map(<[u8]>::to_vec);
            loop {
                let from = cursor.clone();
                let ran = self.compact_level_manually(
                    host,
                    level,
                    from.as_deref(),
                    end,
                    executor,
                    &|_| true,
                )?;
                let Some(largest) = ran else {
                    break;
                };
                // Forward only: a sweep that does not advance has reached
                // the end of what it can compact at this level.
                let advanced = from
                    .as_deref()
                    .is_none_or(|from| order.compare_user(&largest, from).is_gt());
                if !advanced || end.is_some_and(|end| order.compare_user(&largest, end).is_ge()) {
                    break;
                }
                cursor = Some(largest);
            }
        }
        Ok(())
    }

    /// One manual job at `level` over `[begin, end]`, run on this thread
    /// once no running job holds its files (waiting for one to end, never
    /// polling). Returns the largest user key of its `level` inputs, or
    /// `None` when there is nothing (more) to compact there: no overlap, or
    /// `pending` says the work is done (level 0: its files of the call are
    /// gone, compacted by the scheduler's own jobs).
    fn compact_level_manually(
        &self,
        host: &dyn JobHost,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        executor: Option<ExecutorKind>,
        pending: &dyn Fn(&Version) -> bool,
    ) -> Result<Option<Vec<u8>>> {
        let current = || host.current_version();
        let order = self.options.key_order();
        // Held while this waits for running jobs, let go when it returns.
        let claim = self.service.manual_claim();
        loop {
            if let Some(err) = host.background_error() {
                return Err(err);
            }
            let planned = self.service.plan_manual(&current, &claim, |version| {
                if !pending(version) {
                    return None;
                }
                let plan = picker::plan_for_range(version, &self.options, level, begin, end)?;
                let plan =
                    picker::manual_cross_level(version, &self.options, &plan).unwrap_or(plan);
                let largest = plan.inputs[0]
                    .iter()
                    .map(|f| f.largest.user_key().to_vec())
                    .max_by(|a, b| order.compare_user(a, b))
                    .unwrap_or_default();
                Some((plan, largest))
            });
            match planned {
                None => {
                    // Nothing to do, or a background error.
                    if let Some(err) = host.background_error() {
                        return Err(err);
                    }
                    return Ok(None);
                }
                Some((Ok(job), largest)) => {
                    // On the device when there is one, as thread 0 would.
                    let lane = self.executors.lane_of_thread(0);
                    let outcome = self.run_job_caught(host, &job, lane, executor, Caller::User);
                    self.finish_job(host, &job, outcome)?;
                    return Ok(Some(largest));
                }
                Some((Err(ended), _)) => {
                    // A running job holds some of the files: wait for a job
                    // to end.
                    if !self.service.wait_for_job_end(ended) {
                        return Err(closing());
                    }
                }
            }
        }
    }

    /// Waits until no compaction is needed, queued or running, and no flush
    /// is waiting or running.
    pub(crate) fn wait_for_compactions(&self, host: &dyn JobHost) -> Result<()> {
        let current = || host.current_version();
        loop {
            let idle = self.service.wait_idle(&current);
            if let Some(err) = host.background_error() {
                return Err(err);
            }
            if !idle {
                // No background error: the database closes.
                return Err(closing());
            }
            // A flush that was due or running may have made work.
            if host.wait_for_flushes()? {
                return Ok(());
            }
        }
    }
}

/// The error of a wait the database's closing ended.
pub(crate) fn closing() -> Error {
    Error::Busy("the database is closing".into())
}

/// What a manual compaction compacts, taken when it is called: the level-0
/// files in its range, the deepest level holding the range, and the end of
/// its range (an open end closed at the largest key held then).
struct RangeAtCall {
    l0_files: std::collections::HashSet<u64>,
    deepest: usize,
    end: Option<Vec<u8>>,
}

impl RangeAtCall {
    fn new(version: &Version, begin: Option<&[u8]>, end: Option<&[u8]>) -> RangeAtCall {
        let deepest = (1..NUM_LEVELS)
            .filter(|&l| version.overlaps(l, begin, end))
            .max()
            .unwrap_or(1);
        let l0_files = version
            .overlapping_inputs(0, begin, end)
            .iter()
            .map(|f| f.number)
            .collect();
        let end = match end {
            Some(end) => Some(end.to_vec()),
            None => version
                .files
                .iter()
                .flatten()
                .map(|f| f.largest.user_key())
                .max_by(|a, b| version.order.compare_user(a, b))
                .map(<[u8]>::to_vec),
        };
        RangeAtCall {
            l0_files,
            deepest,
            end,
        }
    }
}
