//! The engine's side of a compaction job ([`JobIo`]): input tables opened
//! through the env (directly, with `direct_io_for_compaction`), output
//! tables numbered and recorded as pending so that obsolete-file cleanup
//! leaves them alone until they are installed or discarded; and for the
//! `remote` executor ([`RemoteJobIo`]), the database directory and the
//! adoption of a worker's staged tables.

use std::sync::{Arc, Mutex};

use shale_compact::job::{JobFile, JobIo, OutputSink};
use shale_compact::remote::{RemoteJobIo, VerifiedTable};
use shale_format::format::RandomAccess;
use shale_format::{Error, Result};

use super::inner::DbInner;
use crate::compaction::host::OutputIo;
use crate::env::WritableFile;
use crate::filename;

/// The engine's side of a compaction job: input files through the env,
/// output files numbered and recorded as pending so cleanup leaves them.
pub(super) struct EngineJobIo<'a> {
    inner: &'a DbInner,
    created: Mutex<Vec<u64>>,
}

/// A compaction output file; its I/O errors name the file.
pub(super) struct TableSink {
    pub(super) file: Box<dyn WritableFile>,
    pub(super) path: std::path::PathBuf,
}

impl TableSink {
    fn name_error(&self, err: std::io::Error) -> std::io::Error {
        std::io::Error::new(err.kind(), format!("{}: {err}", self.path.display()))
    }
}

impl std::io::Write for TableSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        crate::kill_point::maybe_kill(crate::kill_point::TABLE_WRITE_MID);
        self.file.write(buf).map_err(|e| self.name_error(e))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().map_err(|e| self.name_error(e))
    }
}

impl OutputSink for TableSink {
    fn finish(mut self: Box<Self>) -> Result<()> {
        let path = self.path.display().to_string();
        self.file
            .sync()
            .map_err(|e| Error::io(format!("syncing {path}"), e))
    }

    fn reserve(&mut self, len: u64) -> Result<()> {
        self.file.reserve(len).map_err(|e| {
            Error::io(
                format!("reserving {len} bytes for {}", self.path.display()),
                e,
            )
        })
    }
}

impl OutputIo for EngineJobIo<'_> {
    fn release(&self, discard: bool) {
        let created = self.created();
        let mut state = self.inner.lock_state();
        for number in &created {
            state.pending_outputs.remove(number);
        }
        drop(state);
        if discard {
            for number in created {
                let _ = self
                    .inner
                    .options
                    .env
                    .remove_file(&filename::table_file_name(&self.inner.dir, number));
            }
        }
    }
}

impl JobIo for EngineJobIo<'_> {
    fn open_input(&self, file: &JobFile) -> Result<Arc<dyn RandomAccess>> {
        let env = &self.inner.options.env;
        let open = |path: &std::path::Path| {
            if self.inner.options.direct_io_for_compaction {
                env.new_direct_random_access_file(path)
            } else {
                env.new_random_access_file(path)
            }
        };
        match open(&filename::table_file_name(&self.inner.dir, file.number)) {
            Err(Error::NotFound(_)) => {
                open(&filename::sst_table_file_name(&self.inner.dir, file.number))
            }
            other => other,
        }
    }

    fn create_output(&self) -> Result<(u64, Box<dyn OutputSink>)> {
        let number = self.new_output_number();
        let path = filename::table_file_name(&self.inner.dir, number);
        let env = &self.inner.options.env;
        let file = if self.inner.options.direct_io_for_compaction {
            env.new_direct_writable_file(&path)?
        } else {
            env.new_writable_file(&path)?
        };
        Ok((number, Box::new(TableSink { file, path })))
    }

    fn discard_output(&self, number: u64) -> Result<()> {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&n| n != number);
        self.inner.lock_state().pending_outputs.remove(&number);
        self.inner
            .options
            .env
            .remove_file(&filename::table_file_name(&self.inner.dir, number))
    }

    fn key_order(&self) -> shale_format::comparator::KeyOrder {
        self.inner.order.clone()
    }

    fn filter_policy(&self) -> Option<Arc<dyn shale_format::bloom::FilterPolicy>> {
        self.inner.options.internal_filter_policy()
    }

    fn remote(&self) -> Option<&dyn RemoteJobIo> {
        Some(self)
    }
}

impl RemoteJobIo for EngineJobIo<'_> {
    fn database_dir(&self) -> Option<std::path::PathBuf> {
        std::path::absolute(&self.inner.dir).ok()
    }

    fn adopt_outputs(&self, staged: &[VerifiedTable]) -> Result<Vec<u64>> {
        let env = &self.inner.options.env;
        let mut numbers = Vec::with_capacity(staged.len());
        for table in staged {
            let number = self.new_output_number();
            let installed = filename::table_file_name(&self.inner.dir, number);
            env.rename(&table.path, &installed)?;
            // The file now in the database must be the one verified.
            table.check_installed(&installed)?;
            numbers.push(number);
        }
        env.sync_dir(&self.inner.dir)?;
        Ok(numbers)
    }
}

/// Removes what remote workers left in `dir/staging` (attempts that never
/// completed: an engine that died mid-job, a worker that crashed). Nothing
/// there is ever part of the database until adopted, so all of it goes.
pub(super) fn remove_staging(env: &dyn crate::env::Env, dir: &std::path::Path) {
    let staging = dir.join(shale_compact::remote::paths::STAGING_DIR);
    let Ok(sessions) = env.children(&staging) else {
        return;
    };
    for session in sessions {
        let session = staging.join(session);
        if let Ok(files) = env.children(&session) {
            for file in files {
                let _ = env.remove_file(&session.join(file));
            }
        }
        let _ = env.remove_dir(&session);
    }
    let _ = env.remove_dir(&staging);
}

impl<'a> EngineJobIo<'a> {
    pub(super) fn new(inner: &'a DbInner) -> EngineJobIo<'a> {
        EngineJobIo {
            inner,
            created: Mutex::new(Vec::new()),
        }
    }

    /// A new file number for an output of this job: pending (cleanup
    /// leaves its file alone) and the job's own (removed if it fails).
    fn new_output_number(&self) -> u64 {
        let number = self.inner.new_file_number();
        self.inner.lock_state().pending_outputs.insert(number);
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(number);
        number
    }

    fn created(&self) -> Vec<u64> {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
