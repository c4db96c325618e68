//! [`MemIo`], the in-memory [`JobIo`]: input tables held as bytes, output
//! tables collected by number (or dropped, for benchmarks that only time
//! the work). The one in-memory `JobIo` of the workspace: the unit tests,
//! the conformance harness, the benches and the examples use it. With a
//! database directory ([`MemIo::with_database_dir`]) it also serves the
//! `remote` executor: the worker reads the inputs as files there, and the
//! tables it stages are adopted into memory.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use shale_format::comparator::KeyOrder;
use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

use crate::job::{JobFile, JobIo, OutputSink};
use crate::remote::{RemoteJobIo, VerifiedTable};

/// Output tables by file number.
pub type Outputs = Arc<Mutex<BTreeMap<u64, Vec<u8>>>>;

/// Input files in memory; outputs numbered from 1000.
#[derive(Debug, Default)]
pub struct MemIo {
    /// The input tables by file number.
    pub inputs: HashMap<u64, Arc<Vec<u8>>>,
    /// The output tables written so far (empty when discarding).
    pub outputs: Outputs,
    next_number: Mutex<u64>,
    discard: bool,
    dir: Option<PathBuf>,
    order: KeyOrder,
}

impl MemIo {
    /// Inputs by file number; outputs kept.
    pub fn new(inputs: HashMap<u64, Arc<Vec<u8>>>) -> MemIo {
        MemIo {
            inputs,
            next_number: Mutex::new(1000),
            ..MemIo::default()
        }
    }

    /// Inputs by file number; outputs written and dropped (benchmarks).
    pub fn discarding(inputs: HashMap<u64, Arc<Vec<u8>>>) -> MemIo {
        MemIo {
            discard: true,
            ..MemIo::new(inputs)
        }
    }

    /// Reports `dir` as the database directory (where the inputs must also
    /// be written as `NNNNNN.ldb` files for a remote worker to read them).
    pub fn with_database_dir(mut self, dir: PathBuf) -> MemIo {
        self.dir = Some(dir);
        self
    }

    /// Reports `order` as the order of the user keys.
    pub fn with_key_order(mut self, order: KeyOrder) -> MemIo {
        self.order = order;
        self
    }

    /// A copy of the outputs written so far.
    pub fn written(&self) -> BTreeMap<u64, Vec<u8>> {
        lock(&self.outputs).clone()
    }

    fn next(&self) -> u64 {
        let mut next = lock(&self.next_number);
        let number = *next;
        *next += 1;
        number
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

struct MemSink {
    number: u64,
    bytes: Vec<u8>,
    outputs: Option<Outputs>,
}

impl std::io::Write for MemSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl OutputSink for MemSink {
    fn finish(self: Box<Self>) -> Result<()> {
        if let Some(outputs) = self.outputs {
            lock(&outputs).insert(self.number, self.bytes);
        }
        Ok(())
    }
}

impl JobIo for MemIo {
    fn open_input(&self, file: &JobFile) -> Result<Arc<dyn RandomAccess>> {
        let bytes = self
            .inputs
            .get(&file.number)
            .ok_or_else(|| Error::NotFound(format!("no input table {}", file.number)))?;
        // Shared, not copied: opening an input costs what opening a file
        // does, whatever its size.
        Ok(Arc::new(Arc::clone(bytes)))
    }

    fn create_output(&self) -> Result<(u64, Box<dyn OutputSink>)> {
        let number = self.next();
        let (bytes, outputs) = if self.discard {
            // Sized for a default-sized table, as a file's page cache would
            // be: the benchmarks time the executor, not vector growth.
            (Vec::with_capacity(3 << 20), None)
        } else {
            (Vec::new(), Some(self.outputs.clone()))
        };
        Ok((
            number,
            Box::new(MemSink {
                number,
                bytes,
                outputs,
            }),
        ))
    }

    fn discard_output(&self, number: u64) -> Result<()> {
        lock(&self.outputs).remove(&number);
        Ok(())
    }

    fn key_order(&self) -> KeyOrder {
        self.order.clone()
    }

    fn remote(&self) -> Option<&dyn RemoteJobIo> {
        self.dir.is_some().then_some(self as &dyn RemoteJobIo)
    }
}

/// With a database directory only ([`MemIo::with_database_dir`]).
impl RemoteJobIo for MemIo {
    fn database_dir(&self) -> Option<PathBuf> {
        self.dir.clone()
    }

    fn adopt_outputs(&self, staged: &[VerifiedTable]) -> Result<Vec<u64>> {
        let mut numbers = Vec::with_capacity(staged.len());
        for table in staged {
            // Read through the verified descriptor: what was checked is
            // what is kept.
            let path = &table.path;
            let mut bytes = vec![0u8; table.size as usize];
            std::os::unix::fs::FileExt::read_exact_at(&table.file, &mut bytes, 0)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            std::fs::remove_file(path)
                .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
            let number = self.next();
            if !self.discard {
                lock(&self.outputs).insert(number, bytes);
            }
            numbers.push(number);
        }
        Ok(numbers)
    }
}
