//! The data side of a keys-only job (the worker): sends each run's keys as
//! far as the key side's credit reaches, and packs the entries the order
//! names, with their values, as the order arrives. Two forward cursors per
//! run: one ahead, whose keys go out; one behind, on the run's next entry
//! to pack. The order takes each run's entries in the run's own order, so
//! the cursor behind always holds the entry a code names, and nothing is
//! kept between the two passes: the values are read where they lie when
//! their turn comes. Memory is two cursors per run and the chunk being
//! sent, whatever the job's size.
//!
//! Every message is checked: credit for a run the job does not have, a
//! code naming a run with no key sent and not yet ordered, an order that
//! ends before every key was ordered are refused with `INVALID_ARGUMENT`
//! naming the field.

use std::time::Instant;

use shale_compact::job::{CompactionJob, CompactionOutput, JobIo};
use shale_compact::remote::keys::{decode, KEYS_ONLY};
use shale_compact::steps::{RunCursor, TablePacker};
use shale_format::{Error, Result};
use tonic::Status;

use crate::proto::keys_only_request::Request;
use crate::proto::{KeyChunk, KeysOnlyRequest, KeysWanted};
use crate::state::status_of;

/// Keys per `KeyChunk` message, at most.
const KEYS_PER_CHUNK: usize = 16 * 1024;
/// Key bytes per `KeyChunk` message, at most (one key may exceed it).
const KEY_BYTES_PER_CHUNK: usize = 1 << 20;

/// How the data side talks to the key side: the gRPC stream in the worker,
/// a script in tests.
pub trait Conversation {
    /// The key side's next message; `None` once it closed its half.
    fn receive(&mut self) -> std::result::Result<Option<KeysOnlyRequest>, Status>;
    /// Sends keys to the key side.
    fn send(&mut self, chunk: KeyChunk) -> std::result::Result<(), Status>;
}

/// A finished data side: the tables and how far its passes drifted apart.
#[derive(Debug)]
pub struct DataSideReport {
    /// The tables written.
    pub output: CompactionOutput,
    /// The most keys sent and not yet ordered at once, over all runs: how
    /// far the cursors behind trailed the cursors ahead. At most the key
    /// side's window times the runs.
    pub unordered_peak: u64,
}

/// Runs the data side of `job` through `conversation` until the last order
/// chunk, and writes the tables through `io`.
/// REQUIRES: the job's start message was taken; what follows is credit and
/// order.
pub fn run(
    job: &CompactionJob,
    io: &dyn JobIo,
    conversation: &mut dyn Conversation,
) -> std::result::Result<DataSideReport, Status> {
    let started = Instant::now();
    let mut refused = None;
    let mut unordered_peak = 0;
    let packed = TablePacker::run(job, io, started, |packer| {
        let mut side = DataSide::open(job, io)?;
        let served = side.serve(conversation, packer);
        unordered_peak = side.unordered_peak;
        served.map_err(|stop| match stop {
            Stop::Refused(status) => {
                let error = Error::InvalidArgument(status.message().to_string());
                refused = Some(status);
                error
            }
            Stop::Failed(error) => error,
        })
    });
    let (outputs, mut stats, compute_secs) =
        packed.map_err(|error| refused.unwrap_or_else(|| status_of(&error)))?;
    stats.pack_secs = compute_secs;
    Ok(DataSideReport {
        output: CompactionOutput {
            executor: KEYS_ONLY.to_string(),
            outputs,
            stats,
            fallback: None,
        },
        unordered_peak,
    })
}

/// Why the data side stopped early: the conversation broke or the key side
/// sent something wrong (a status for the client as it is), or the job
/// itself failed.
enum Stop {
    Refused(Status),
    Failed(Error),
}

impl From<Status> for Stop {
    fn from(status: Status) -> Stop {
        Stop::Refused(status)
    }
}

impl From<Error> for Stop {
    fn from(error: Error) -> Stop {
        Stop::Failed(error)
    }
}

fn invalid(message: String) -> Stop {
    Stop::Refused(Status::invalid_argument(message))
}

/// One run on the data side.
struct RunSide<'a> {
    /// On the next key to send.
    keys: RunCursor<'a>,
    /// On the next entry to pack.
    values: RunCursor<'a>,
    /// Keys the key side asked for and was not sent yet.
    credit: u64,
    sent: u64,
    ordered: u64,
    /// Whether the run's last chunk went out.
    ended: bool,
}

impl RunSide<'_> {
    /// The next chunk of keys: as many as the credit and a message allow,
    /// `last` once the cursor ahead has passed the run's last entry.
    fn next_chunk(&mut self, run: usize) -> Result<KeyChunk> {
        let mut keys = Vec::new();
        let mut bytes = 0;
        while self.credit > 0 && keys.len() < KEYS_PER_CHUNK && bytes < KEY_BYTES_PER_CHUNK {
            let Some((key, _)) = self.keys.entry() else {
                break;
            };
            bytes += key.len();
            keys.push(key.to_vec());
            self.keys.advance()?;
            self.credit -= 1;
            self.sent += 1;
        }
        self.ended = self.keys.entry().is_none();
        Ok(KeyChunk {
            run: run as u32,
            keys,
            last: self.ended,
        })
    }
}

struct DataSide<'a> {
    runs: Vec<RunSide<'a>>,
    /// Keys sent and not yet ordered, over all runs.
    unordered: u64,
    unordered_peak: u64,
}

impl<'a> DataSide<'a> {
    /// Both cursors of every run on its first entry in the job's range.
    fn open(job: &'a CompactionJob, io: &'a dyn JobIo) -> Result<DataSide<'a>> {
        let runs = job
            .inputs
            .iter()
            .map(|run| {
                Ok(RunSide {
                    keys: RunCursor::new(job, io, run)?,
                    values: RunCursor::new(job, io, run)?,
                    credit: 0,
                    sent: 0,
                    ordered: 0,
                    ended: false,
                })
            })
            .collect::<Result<_>>()?;
        Ok(DataSide {
            runs,
            unordered: 0,
            unordered_peak: 0,
        })
    }

    /// Answers credit with keys and packs the order, up to its last chunk.
    /// Returns the entries read.
    fn serve(
        &mut self,
        conversation: &mut dyn Conversation,
        packer: &mut TablePacker<'_>,
    ) -> std::result::Result<u64, Stop> {
        loop {
            let message = conversation.receive()?.ok_or_else(|| {
                Status::cancelled("keys-only: the engine closed the stream before the whole order")
            })?;
            match message.request {
                Some(Request::KeysWanted(wanted)) => self.grant(&wanted, conversation)?,
                Some(Request::Order(chunk)) => {
                    self.pack(&chunk.codes, packer)?;
                    if chunk.last {
                        self.check_all_ordered()?;
                        return Ok(self.runs.iter().map(|r| r.ordered).sum());
                    }
                }
                Some(Request::Start(_)) => {
                    return Err(invalid(
                        "request.start: the job has already started".to_string(),
                    ))
                }
                None => return Err(invalid("request: an empty message".to_string())),
            }
        }
    }

    /// Adds credit to a run and sends what it allows.
    fn grant(
        &mut self,
        wanted: &KeysWanted,
        conversation: &mut dyn Conversation,
    ) -> std::result::Result<(), Stop> {
        let run = wanted.run as usize;
        let runs = self.runs.len();
        let Some(side) = self.runs.get_mut(run) else {
            return Err(invalid(format!(
                "keys_wanted.run: run {run}, the job has {runs}"
            )));
        };
        if wanted.count == 0 {
            return Err(invalid(format!("keys_wanted.count: 0 keys of run {run}")));
        }
        // Credit may cross the run's last chunk on the wire.
        if side.ended {
            return Ok(());
        }
        side.credit = side.credit.saturating_add(wanted.count);
        while let Some(side) = self.runs.get_mut(run).filter(|s| s.credit > 0 && !s.ended) {
            let chunk = side.next_chunk(run)?;
            self.unordered += chunk.keys.len() as u64;
            self.unordered_peak = self.unordered_peak.max(self.unordered);
            conversation.send(chunk)?;
        }
        Ok(())
    }

    /// Packs the entries `codes` name, each the next of its run.
    fn pack(
        &mut self,
        codes: &[u32],
        packer: &mut TablePacker<'_>,
    ) -> std::result::Result<(), Stop> {
        let runs = self.runs.len();
        for (i, &code) in codes.iter().enumerate() {
            let (run, keep, cut_before) = decode(code);
            let Some(side) = self.runs.get_mut(run) else {
                return Err(invalid(format!(
                    "order.codes[{i}]: code {code} names run {run}, the job has {runs}"
                )));
            };
            if side.ordered == side.sent {
                return Err(invalid(format!(
                    "order.codes[{i}]: code {code} names run {run}, which has no key sent and not yet ordered ({} sent)",
                    side.sent
                )));
            }
            let Some((key, value)) = side.values.entry() else {
                return Err(Stop::Failed(Error::corruption(
                    0,
                    format!(
                        "keys-only: run {run} ended after {} entries on its second pass, {} on its first",
                        side.ordered, side.sent
                    ),
                )));
            };
            if cut_before {
                packer.cut()?;
            }
            if keep {
                packer.add(key, value)?;
            }
            side.values.advance()?;
            side.ordered += 1;
            self.unordered -= 1;
        }
        Ok(())
    }

    /// At the last order chunk: every key of every run went out and was
    /// ordered.
    fn check_all_ordered(&self) -> std::result::Result<(), Stop> {
        for (run, side) in self.runs.iter().enumerate() {
            if !side.ended {
                return Err(invalid(format!(
                    "order.last: run {run} still has keys to send ({} sent)",
                    side.sent
                )));
            }
            if side.ordered < side.sent {
                return Err(invalid(format!(
                    "order.last: {} keys of run {run} were sent and never ordered",
                    side.sent - side.ordered
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::collections::VecDeque;

    use super::*;
    use shale_compact::job::{Executor, TableSettings};
    use shale_compact::remote::keys::{code, KeySide};
    use shale_compact::testing::{MemIo, RandomLevel0};
    use shale_compact::StreamingExecutor;

    /// The key side in the same thread: every chunk sent is answered at
    /// once, and the answers wait in a queue for the data side to take.
    struct Loopback<'job> {
        side: KeySide<'job>,
        queue: VecDeque<KeysOnlyRequest>,
    }

    impl<'job> Loopback<'job> {
        fn new(job: &'job CompactionJob, window: u64) -> Loopback<'job> {
            let mut side = KeySide::new(job, window).unwrap();
            let queue = side.start().into_iter().map(request).collect();
            Loopback { side, queue }
        }
    }

    fn request(request: Request) -> KeysOnlyRequest {
        KeysOnlyRequest {
            request: Some(request),
        }
    }

    impl Conversation for Loopback<'_> {
        fn receive(&mut self) -> std::result::Result<Option<KeysOnlyRequest>, Status> {
            Ok(self.queue.pop_front())
        }

        fn send(&mut self, chunk: KeyChunk) -> std::result::Result<(), Status> {
            let answer = self
                .side
                .on_keys(chunk)
                .map_err(|e| Status::internal(e.to_string()))?;
            self.queue.extend(answer.into_iter().map(request));
            Ok(())
        }
    }

    /// Plays `requests` in order and takes whatever is sent.
    struct Script(VecDeque<KeysOnlyRequest>);

    impl Conversation for Script {
        fn receive(&mut self) -> std::result::Result<Option<KeysOnlyRequest>, Status> {
            Ok(self.0.pop_front())
        }

        fn send(&mut self, _chunk: KeyChunk) -> std::result::Result<(), Status> {
            Ok(())
        }
    }

    fn random_job(runs: usize, entries: usize) -> (CompactionJob, MemIo) {
        let shape = RandomLevel0 {
            runs,
            entries,
            value_size: 40,
            key_space: (runs * entries) as u64,
            overwrite_percent: 30,
            settings: TableSettings {
                block_size: 512,
                ..TableSettings::default()
            },
        };
        let (mut job, (inputs, _)) = shape.build();
        // Some versions hidden, some kept for a snapshot.
        job.smallest_snapshot /= 2;
        job.max_output_file_size = 16 << 10;
        (job, MemIo::new(inputs))
    }

    #[test]
    fn tiny_windows_write_what_streaming_writes_holding_a_window_per_run() {
        for (runs, entries, window) in [(1, 50, 1), (3, 400, 2), (5, 2000, 7), (8, 1000, 64)] {
            let (job, io) = random_job(runs, entries);
            let expected = StreamingExecutor.run(&job, &io).unwrap();
            let expected_files = io.written();
            let io = MemIo::new(io.inputs.clone());
            let mut loopback = Loopback::new(&job, window);
            let report = run(&job, &io, &mut loopback).unwrap();
            assert_eq!(report.output.outputs, expected.outputs, "{runs} runs");
            assert_eq!(io.written(), expected_files, "{runs} runs");
            let bound = runs as u64 * window;
            assert!(report.unordered_peak <= bound, "{}", report.unordered_peak);
            assert!(loopback.side.peak().keys <= bound);
            assert!(loopback.side.is_finished());
        }
    }

    /// The status `requests` end the data side with.
    fn refusal(requests: Vec<Request>) -> Status {
        let (job, io) = random_job(2, 20);
        let mut script = Script(requests.into_iter().map(request).collect());
        run(&job, &io, &mut script).unwrap_err()
    }

    fn wanted(run: u32, count: u64) -> Request {
        Request::KeysWanted(KeysWanted { run, count })
    }

    fn order(codes: Vec<u32>, last: bool) -> Request {
        Request::Order(crate::proto::OrderChunk { codes, last })
    }

    #[test]
    fn malformed_credit_and_order_are_refused_naming_the_field() {
        let one = code(0, true, false);
        for (requests, field, why) in [
            (
                vec![wanted(2, 1)],
                "keys_wanted.run:",
                "run 2, the job has 2",
            ),
            (vec![wanted(0, 0)], "keys_wanted.count:", "0 keys"),
            (
                vec![order(vec![one], false)],
                "order.codes[0]:",
                "no key sent",
            ),
            (
                vec![wanted(0, 1), order(vec![one, one], false)],
                "order.codes[1]:",
                "no key sent",
            ),
            (
                vec![wanted(0, 1), order(vec![code(7, true, false)], false)],
                "order.codes[0]:",
                "names run 7",
            ),
            (
                vec![wanted(0, 1), order(vec![one], true)],
                "order.last:",
                "run 0 still has keys to send",
            ),
            (
                vec![wanted(0, 100), wanted(1, 100), order(vec![one], true)],
                "order.last:",
                "were sent and never ordered",
            ),
            (
                vec![Request::Start(Default::default())],
                "request.start:",
                "already started",
            ),
        ] {
            let status = refusal(requests);
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
            let message = status.message();
            assert!(
                message.starts_with(field) && message.contains(why),
                "{field}: {status:?}"
            );
        }
        let status = refusal(vec![wanted(0, 1)]);
        assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    }
}
