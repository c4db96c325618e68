//! A forward cursor over one input run's entries within the job's range:
//! the data side's view of its tables (the worker's keys-only job). A run's
//! files are opened one at a time as the cursor reaches them, so a cursor
//! holds one table's index and one data block, whatever the run's size.
//! Tables are opened as `streaming` opens them ([`open_input_table`]).

use shale_format::internal_key::{extract_user_key, InternalKey, ValueType, MAX_SEQUENCE_NUMBER};
use shale_format::iterator::KvIterator;
use shale_format::table::{ReadTableOptions, Table, TableIter};
use shale_format::Result;

use crate::job::{CompactionJob, InputRun, JobFile, JobIo};

/// Opens an input table with checksums verified; no filter is needed to scan.
pub fn open_input_table(io: &dyn JobIo, file: &JobFile) -> Result<Table> {
    let source = io.open_input(file)?;
    let name = format!("{:06}.ldb", file.number);
    let options = ReadTableOptions::internal_scan();
    Table::open(source, file.file_size, &name, options)
}

/// The entries of one run that lie in the job's range, in the run's order
/// (the order the key side's `OrderMerge` expects them in).
pub struct RunCursor<'a> {
    job: &'a CompactionJob,
    io: &'a dyn JobIo,
    /// The run's files that can hold a key of the range, in key order.
    files: Vec<&'a JobFile>,
    /// The next of `files` to open once the current one ends.
    next_file: usize,
    /// On the current entry; `None` once the run is exhausted.
    iter: Option<TableIter>,
}

impl std::fmt::Debug for RunCursor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCursor")
            .field("files", &self.files.len())
            .field("next_file", &self.next_file)
            .field("exhausted", &self.iter.is_none())
            .finish_non_exhaustive()
    }
}

impl<'a> RunCursor<'a> {
    /// A cursor on the first entry of `run` in the job's range.
    pub fn new(job: &'a CompactionJob, io: &'a dyn JobIo, run: &'a InputRun) -> Result<Self> {
        let mut cursor = RunCursor {
            job,
            io,
            files: run.files.iter().filter(|f| job.file_in_range(f)).collect(),
            next_file: 0,
            iter: None,
        };
        cursor.settle()?;
        Ok(cursor)
    }

    /// The current entry (key, value); `None` once the run is exhausted.
    pub fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.iter.as_ref().map(|iter| (iter.key(), iter.value()))
    }

    /// Moves to the next entry.
    pub fn advance(&mut self) -> Result<()> {
        if let Some(iter) = &mut self.iter {
            iter.next();
        }
        self.settle()
    }

    /// Leaves `iter` on an entry of the range, opening the next file when
    /// one ends, or at `None` when the run has no entry left in the range.
    fn settle(&mut self) -> Result<()> {
        loop {
            if let Some(iter) = &self.iter {
                if !iter.valid() {
                    iter.status()?;
                } else if self.job.range.is_above(extract_user_key(iter.key())) {
                    // The files are in key order: every later entry is
                    // above the range too.
                    self.next_file = self.files.len();
                } else {
                    return Ok(());
                }
                self.iter = None;
            }
            let Some(file) = self.files.get(self.next_file) else {
                return Ok(());
            };
            self.next_file += 1;
            let mut iter = open_input_table(self.io, file)?.iter();
            match &self.job.range.lower {
                Some(lower) => iter.seek(
                    InternalKey::new(lower, MAX_SEQUENCE_NUMBER, ValueType::VALUE_FOR_SEEK)
                        .encoded(),
                ),
                None => iter.seek_to_first(),
            }
            self.iter = Some(iter);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::Arc;

    use super::*;
    use crate::job::KeyRange;
    use crate::testing::{self, build_table, table_file, MemIo};

    fn key(user: &str, sequence: u64) -> Vec<u8> {
        InternalKey::new(user.as_bytes(), sequence, ValueType::Value).into_encoded()
    }

    /// A level run of two files (a..e, f..j), each entry's value its user key.
    fn two_files() -> (CompactionJob, MemIo) {
        let mut files = Vec::new();
        let mut tables = Vec::new();
        for (number, users) in [
            (1u64, ["a", "b", "c", "d", "e"]),
            (2, ["f", "g", "h", "i", "j"]),
        ] {
            let entries: Vec<(Vec<u8>, Vec<u8>)> = users
                .iter()
                .map(|u| (key(u, 5), u.as_bytes().to_vec()))
                .collect();
            let bytes = build_table(&entries, &Default::default());
            files.push(table_file(number, &bytes, &entries));
            tables.push((number, Arc::new(bytes)));
        }
        let job = testing::job(vec![crate::job::InputRun { level: 1, files }]);
        (job, MemIo::new(tables.into_iter().collect()))
    }

    fn values(cursor: &mut RunCursor<'_>) -> String {
        let mut seen = String::new();
        while let Some((_, value)) = cursor.entry() {
            seen.push_str(std::str::from_utf8(value).unwrap());
            cursor.advance().unwrap();
        }
        seen
    }

    #[test]
    fn a_cursor_walks_a_run_across_its_files_within_the_range() {
        let (mut job, io) = two_files();
        let mut all = RunCursor::new(&job, &io, &job.inputs[0]).unwrap();
        assert_eq!(values(&mut all), "abcdefghij");
        job.range = KeyRange {
            lower: Some(b"c".to_vec()),
            upper: Some(b"h".to_vec()),
        };
        let mut some = RunCursor::new(&job, &io, &job.inputs[0]).unwrap();
        assert_eq!(values(&mut some), "cdefg");
        job.range = KeyRange {
            lower: Some(b"x".to_vec()),
            upper: None,
        };
        let none = RunCursor::new(&job, &io, &job.inputs[0]).unwrap();
        assert!(none.entry().is_none());
    }
}
