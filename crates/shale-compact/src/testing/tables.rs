//! Tables for tests and benchmarks: built from given entries, or random
//! overlapping level-0 tables of fixed-size values.

use std::collections::HashMap;
use std::sync::Arc;

use shale_format::internal_key::{InternalKey, ValueType};
use shale_format::table_builder::TableBuilder;

use crate::job::{CompactionJob, InputRun, JobFile, TableSettings};

/// A table of `entries` (internal key, value), already in order.
///
/// # Panics
/// When the entries are out of order.
pub fn build_table(entries: &[(Vec<u8>, Vec<u8>)], settings: &TableSettings) -> Vec<u8> {
    let mut builder = TableBuilder::new(settings.table_options(), Vec::new());
    for (key, value) in entries {
        builder.add(key, value).expect("entries in order");
    }
    builder.finish().expect("a table in memory").0
}

/// The job file of table `number`, `bytes` long, holding `entries`.
///
/// # Panics
/// When `entries` is empty.
pub fn table_file(number: u64, bytes: &[u8], entries: &[(Vec<u8>, Vec<u8>)]) -> JobFile {
    JobFile {
        number,
        file_size: bytes.len() as u64,
        smallest: entries.first().expect("entries").0.clone(),
        largest: entries.last().expect("entries").0.clone(),
    }
}

/// Random overlapping level-0 tables, one run each, compacted to level 1:
/// the job of the executor benchmarks. The same shape always gives the
/// same tables.
#[derive(Debug, Clone)]
pub struct RandomLevel0 {
    /// Tables (and runs).
    pub runs: usize,
    /// Keys drawn per table (duplicates within a table are dropped).
    pub entries: usize,
    /// Bytes per value.
    pub value_size: usize,
    /// User keys are drawn from `0..key_space` (16 decimal digits).
    pub key_space: u64,
    /// The chance, in percent, that a table's i-th key repeats the
    /// previous table's i-th key (an overwrite).
    pub overwrite_percent: u64,
    /// The input tables' layout, and the job's output layout.
    pub settings: TableSettings,
}

/// A random job's input tables by file number, and their total size.
pub type Level0Inputs = (HashMap<u64, Arc<Vec<u8>>>, u64);

impl RandomLevel0 {
    /// The job and its input tables (numbered from 1), with their total
    /// size in bytes.
    pub fn build(&self) -> (CompactionJob, Level0Inputs) {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let piece: Vec<u8> = (0..self.value_size / 2 + 1)
            .map(|_| b' ' + (next() % 95) as u8)
            .collect();
        let mut inputs = HashMap::new();
        let mut runs = Vec::new();
        let mut sequence = 1;
        let mut input_bytes = 0;
        let mut previous: Vec<u64> = Vec::new();
        for number in 1..=self.runs as u64 {
            let keys = self.keys(&previous, &mut next);
            let mut builder = TableBuilder::new(self.settings.table_options(), Vec::new());
            let (mut smallest, mut largest) = (Vec::new(), Vec::new());
            for &k in &keys {
                let key =
                    InternalKey::new(format!("{k:016}").as_bytes(), sequence, ValueType::Value)
                        .into_encoded();
                sequence += 1;
                let mut value = piece.clone();
                value.extend_from_slice(&piece);
                value.truncate(self.value_size);
                value[0] = (next() % 256) as u8;
                builder.add(&key, &value).expect("keys in order");
                if smallest.is_empty() {
                    smallest = key.clone();
                }
                largest = key;
            }
            let (bytes, size) = builder.finish().expect("a table in memory");
            input_bytes += size;
            inputs.insert(number, Arc::new(bytes));
            runs.push(InputRun {
                level: 0,
                files: vec![JobFile {
                    number,
                    file_size: size,
                    smallest,
                    largest,
                }],
            });
            previous = keys;
        }
        let job = CompactionJob {
            smallest_snapshot: sequence,
            table: self.settings.clone(),
            ..super::job(runs)
        };
        (job, (inputs, input_bytes))
    }

    /// One table's keys, sorted and distinct: each repeats `previous`'s
    /// key at its index with `overwrite_percent` chance, else is random.
    fn keys(&self, previous: &[u64], next: &mut impl FnMut() -> u64) -> Vec<u64> {
        let mut keys: Vec<u64> = (0..self.entries)
            .map(|i| match previous.get(i) {
                // No draw without overwrites: the stream of random numbers
                // (and so the tables) stays what it was before they existed.
                Some(&k) if self.overwrite_percent > 0 && next() % 100 < self.overwrite_percent => {
                    k
                }
                _ => next() % self.key_space,
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// A xorshift64 generator from `state`.
fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
