//! Writes one table file through the env, entry by entry, and returns its
//! metadata: LevelDB's `BuildTable` (`db/builder.cc`). Flushes and
//! recovery write their level-0 tables with it, and repair its converted
//! logs and rewritten tables. Compactions write through their executors
//! instead (`job_io.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shale_format::internal_key::InternalKey;
use shale_format::iterator::KvIterator;
use shale_format::table_builder::TableBuilder;
use shale_format::version_edit::FileMetaData;
use shale_format::Result;

use super::job_io::TableSink;
use crate::env::Env;
use crate::filename;
use crate::options::Options;
use shale_compact::job::OutputSink;

/// A table being written to `NNNNNN.ldb`. Dropped before
/// [`TableWriter::finish`] succeeds (an error, an early return), it removes
/// the partly written file, as `BuildTable` does.
pub(crate) struct TableWriter {
    /// `None` once finished.
    builder: Option<TableBuilder<TableSink>>,
    env: Arc<dyn Env>,
    path: PathBuf,
    number: u64,
}

impl TableWriter {
    /// Creates table `number` in `dir`, built with the table settings of
    /// `options` (block size, restart interval, filter, compression).
    pub(crate) fn create(options: &Options, dir: &Path, number: u64) -> Result<TableWriter> {
        let path = filename::table_file_name(dir, number);
        let file = options.env.new_writable_file(&path)?;
        let sink = TableSink {
            file,
            path: path.clone(),
        };
        Ok(TableWriter {
            builder: Some(TableBuilder::new(options.table_options(), sink)),
            env: options.env.clone(),
            path,
            number,
        })
    }

    /// Adds an entry: an internal key strictly after the previous one.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        match &mut self.builder {
            Some(builder) => builder.add(key, value),
            None => Ok(()),
        }
    }

    /// Adds every entry of `iter`, from its first, in its order.
    pub(crate) fn add_all(&mut self, iter: &mut dyn KvIterator) -> Result<()> {
        iter.seek_to_first();
        while iter.valid() {
            self.add(iter.key(), iter.value())?;
            iter.next();
        }
        iter.status()
    }

    /// Writes the rest of the table and syncs it. Returns its metadata, or
    /// `None` when no entry was added (the empty file is removed).
    pub(crate) fn finish(mut self) -> Result<Option<FileMetaData>> {
        let Some(builder) = self.builder.take() else {
            return Ok(None);
        };
        let (Some(smallest), Some(largest)) = (
            builder.smallest_key().map(<[u8]>::to_vec),
            builder.largest_key().map(<[u8]>::to_vec),
        ) else {
            self.remove();
            return Ok(None);
        };
        let result = builder
            .finish()
            .and_then(|(sink, file_size)| Box::new(sink).finish().map(|()| file_size));
        match result {
            Ok(file_size) => Ok(Some(FileMetaData {
                number: self.number,
                file_size,
                smallest: InternalKey::from_encoded(smallest),
                largest: InternalKey::from_encoded(largest),
            })),
            Err(err) => {
                self.remove();
                Err(err)
            }
        }
    }

    fn remove(&self) {
        // Best effort: the file is unwanted, and any error that matters was
        // already reported by the step that failed.
        let _ = self.env.remove_file(&self.path);
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        if self.builder.take().is_some() {
            self.remove();
        }
    }
}
