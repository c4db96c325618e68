//! Running a job on the first of several executors that completes it, for
//! callers outside the engine (`shale worker`, the tools): the engine's
//! compaction service places and falls back itself, and executors never
//! do (`../docs/compaction.md`, "Placement and the executor chain").

use std::sync::Arc;

use shale_format::{Error, Result};

use crate::job::{CompactionJob, CompactionOutput, Executor, JobIo};

/// True when a job an executor failed with `error` goes to the next
/// executor of a chain: a refusal ([`Error::Refused`]) or any failure of
/// the executor itself ([`Error::ExecutorFailed`], an internal error). Corrupt input (it names
/// the file) and I/O errors (the disk fails every executor alike; retrying
/// on a full disk only doubles what is written) fail the job.
pub fn passes_to_next_executor(error: &Error) -> bool {
    !matches!(error, Error::Corruption { .. } | Error::Io { .. })
}

/// Why a job left `executor` for the next one of its chain, after it
/// returned `error`: the one wording of a fallback, used by the engine's
/// service and by [`FallbackChain`]. A refusal or an executor failure
/// already names its executor.
pub fn fallback_reason(executor: &str, error: &Error) -> String {
    match error {
        Error::Refused { .. } | Error::ExecutorFailed { .. } => error.to_string(),
        _ => format!("the {executor} executor failed: {error}"),
    }
}

/// Executors tried in order: the first that completes a job writes it, and
/// its output says why the ones before it did not (`fallback`). A refused
/// attempt's files are the job I/O's to delete (as with any failed job).
#[derive(Debug)]
pub struct FallbackChain {
    executors: Vec<Arc<dyn Executor>>,
}

impl FallbackChain {
    /// A chain of `executors`, first choice first; at least one.
    pub fn new(executors: Vec<Arc<dyn Executor>>) -> FallbackChain {
        assert!(!executors.is_empty(), "a chain of no executor");
        FallbackChain { executors }
    }
}

impl Executor for FallbackChain {
    fn name(&self) -> &'static str {
        self.executors[0].name()
    }

    fn run(&self, job: &CompactionJob, io: &dyn JobIo) -> Result<CompactionOutput> {
        let mut why: Option<String> = None;
        let last = self.executors.len() - 1;
        for (i, executor) in self.executors.iter().enumerate() {
            match executor.run(job, io) {
                Ok(output) => {
                    return Ok(CompactionOutput {
                        fallback: why.or(output.fallback),
                        ..output
                    })
                }
                Err(error) if i < last && passes_to_next_executor(&error) => {
                    why = Some(fallback_reason(executor.name(), &error));
                }
                Err(error) => return Err(error),
            }
        }
        unreachable!("the last executor's result is returned")
    }
}
