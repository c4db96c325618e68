//! Makes output files durable on a thread of its own, so that file I/O
//! overlaps the computation of later files (the pipeline mechanism): the
//! `parallel` executor hands over whole files assembled in memory, the
//! `streaming` one files its table builder has written through the sink
//! and only needs flushed and synced. A job's outputs are all durable
//! before the executor returns, so before the engine records them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::Instant;

use shale_format::{Error, Result};

use crate::job::OutputSink;
use crate::pool::Pool;

/// Files waiting to be written and synced. Bounds the memory of files
/// assembled in memory and the number of open output files.
const WRITE_QUEUE_FILES: usize = 4;

/// The sending side of the I/O thread (see the module docs).
pub struct Syncer<'p> {
    sender: SyncSender<(Box<dyn OutputSink>, Vec<u8>)>,
    /// Nanoseconds the computation waited for a place in the queue.
    blocked_nanos: AtomicU64,
    /// Where the buffers of written files go back to.
    files: Option<&'p Pool<Vec<u8>>>,
}

/// What the I/O thread did.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoTime {
    /// Seconds writing and syncing.
    pub busy: f64,
    /// Seconds the computation waited for it (queue full, or at the end).
    pub waited: f64,
}

impl IoTime {
    /// Seconds of I/O that ran while the computation went on.
    pub fn overlapped(&self) -> f64 {
        (self.busy - self.waited).max(0.0)
    }
}

impl<'p> Syncer<'p> {
    /// Runs `body` with a syncer; returns the first error of either and the
    /// time spent writing and syncing. Buffers of written files go back to
    /// `files`, when given.
    pub fn scope<T>(
        files: Option<&'p Pool<Vec<u8>>>,
        body: impl FnOnce(&Syncer<'p>) -> Result<T>,
    ) -> Result<(T, IoTime)> {
        let (sender, receiver) =
            std::sync::mpsc::sync_channel::<(Box<dyn OutputSink>, Vec<u8>)>(WRITE_QUEUE_FILES);
        std::thread::scope(|scope| {
            let worker = scope.spawn(move || -> Result<f64> {
                let mut seconds = 0.0;
                let mut first_error = None;
                for (mut sink, bytes) in receiver {
                    let started = Instant::now();
                    let written = std::io::Write::write_all(&mut sink, &bytes)
                        .and_then(|()| std::io::Write::flush(&mut sink))
                        .map_err(|e| Error::io("writing a compaction output", e));
                    if let Err(err) = written.and_then(|()| sink.finish()) {
                        first_error.get_or_insert(err);
                    }
                    if let Some(files) = files {
                        files.give(bytes);
                    }
                    seconds += started.elapsed().as_secs_f64();
                }
                first_error.map_or(Ok(seconds), Err)
            });
            let syncer = Syncer {
                sender,
                blocked_nanos: AtomicU64::new(0),
                files,
            };
            let result = body(&syncer);
            let blocked = syncer.blocked_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            drop(syncer);
            let joined = Instant::now();
            let busy = worker
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the sync thread panicked".into())));
            let waited = blocked + joined.elapsed().as_secs_f64();
            let value = result?;
            Ok((
                value,
                IoTime {
                    busy: busy?,
                    waited,
                },
            ))
        })
    }

    /// An empty buffer for a file assembled in memory, with room for
    /// `capacity` bytes.
    pub fn file_buffer(&self, capacity: usize) -> Vec<u8> {
        let mut buffer = self.files.map(Pool::take).unwrap_or_default();
        buffer.clear();
        buffer.reserve(capacity);
        buffer
    }

    /// Queues `sink` to have `bytes` appended, then to be flushed, synced
    /// and closed; waits while the queue is full.
    pub fn submit(&self, sink: Box<dyn OutputSink>, bytes: Vec<u8>) -> Result<()> {
        let started = Instant::now();
        let sent = self
            .sender
            .send((sink, bytes))
            .map_err(|_| Error::Internal("the sync thread stopped".into()));
        self.blocked_nanos
            .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A sink that records what reached it and fails its sync on demand.
    struct Sink {
        written: Arc<std::sync::Mutex<Vec<u8>>>,
        fail_sync: bool,
    }

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl OutputSink for Sink {
        fn finish(self: Box<Self>) -> Result<()> {
            if self.fail_sync {
                return Err(Error::io(
                    "syncing 000007.ldb",
                    std::io::Error::other("injected"),
                ));
            }
            Ok(())
        }
    }

    fn sink(fail_sync: bool) -> (Box<dyn OutputSink>, Arc<std::sync::Mutex<Vec<u8>>>) {
        let written = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Sink {
            written: written.clone(),
            fail_sync,
        };
        (Box::new(sink), written)
    }

    #[test]
    fn files_are_written_and_their_buffers_come_back() {
        let pool = Pool::<Vec<u8>>::new(1 << 20);
        let (first, first_bytes) = sink(false);
        let (second, second_bytes) = sink(false);
        let (value, io) = Syncer::scope(Some(&pool), |syncer| {
            let mut buffer = syncer.file_buffer(16);
            buffer.extend_from_slice(b"table one");
            syncer.submit(first, buffer)?;
            syncer.submit(second, b"table two".to_vec())?;
            Ok(7)
        })
        .unwrap();
        assert_eq!(value, 7);
        assert!(io.busy >= 0.0 && io.overlapped() >= 0.0);
        assert_eq!(*first_bytes.lock().unwrap(), b"table one");
        assert_eq!(*second_bytes.lock().unwrap(), b"table two");
        // Both buffers went back to the pool, emptied by the next taker.
        assert!(pool.take().capacity() >= 9);
    }

    #[test]
    fn a_failed_sync_fails_the_scope_and_the_body_error_wins() {
        let (good, _) = sink(false);
        let (bad, _) = sink(true);
        let err = Syncer::scope(None, |syncer| {
            syncer.submit(bad, Vec::new())?;
            syncer.submit(good, Vec::new())?;
            Ok(())
        })
        .unwrap_err();
        assert!(err.to_string().contains("000007.ldb"), "{err}");

        let (bad, _) = sink(true);
        let err = Syncer::scope(None, |syncer| -> Result<()> {
            syncer.submit(bad, Vec::new())?;
            Err(Error::corruption(0, "bad input block".to_string()))
        })
        .unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
}
