//! Test helpers shared by the crate's unit tests (the integration harness
//! in `tests/conformance.rs` is a separate crate and keeps its own).

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use shale_format::format::RandomAccess;

use crate::job::{JobFile, JobIo, OutputSink};

/// Input files in memory; outputs collected by number.
#[derive(Default)]
pub(crate) struct MemIo {
    pub(crate) inputs: HashMap<u64, Arc<Vec<u8>>>,
    pub(crate) next_number: Mutex<u64>,
    pub(crate) outputs: Arc<Mutex<BTreeMap<u64, Vec<u8>>>>,
}

impl MemIo {
    /// Inputs by file number; outputs numbered from 1000.
    pub(crate) fn new(inputs: HashMap<u64, Arc<Vec<u8>>>) -> MemIo {
        MemIo {
            inputs,
            next_number: Mutex::new(1000),
            outputs: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }
}

struct MemSink {
    number: u64,
    bytes: Vec<u8>,
    outputs: Arc<Mutex<BTreeMap<u64, Vec<u8>>>>,
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
    fn finish(self: Box<Self>) -> shale_format::Result<()> {
        self.outputs.lock().unwrap().insert(self.number, self.bytes);
        Ok(())
    }
}

impl JobIo for MemIo {
    fn open_input(&self, file: &JobFile) -> shale_format::Result<Arc<dyn RandomAccess>> {
        Ok(Arc::new(self.inputs[&file.number].as_ref().clone()))
    }
    fn create_output(&self) -> shale_format::Result<(u64, Box<dyn OutputSink>)> {
        let mut next = self.next_number.lock().unwrap();
        let number = *next;
        *next += 1;
        Ok((
            number,
            Box::new(MemSink {
                number,
                bytes: Vec::new(),
                outputs: self.outputs.clone(),
            }),
        ))
    }
    fn discard_output(&self, number: u64) -> shale_format::Result<()> {
        self.outputs.lock().unwrap().remove(&number);
        Ok(())
    }
}
