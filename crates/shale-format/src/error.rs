//! The error type shared by every decoder and encoder in this crate.

use std::fmt;
use std::sync::Arc;

/// Where a piece of bad data was found: a file (or another named source such
/// as "block" when the decoder does not know the file) and a byte offset in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    /// File name, or a description of the source when no file is known.
    pub file: String,
    /// Byte offset from the start of `file`.
    pub offset: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.file.is_empty() {
            write!(f, "offset {}", self.offset)
        } else {
            write!(f, "{} at offset {}", self.file, self.offset)
        }
    }
}

/// Everything that can go wrong while encoding or decoding the on-disk formats.
/// Cloneable so that an iterator can keep reporting the error it stopped on.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes that do not follow the format: a bad checksum, a length that runs
    /// past the end, an unknown tag. `file` and `offset` say where.
    #[error("corruption in {location}: {reason}")]
    Corruption {
        /// Where the bad bytes are.
        location: Location,
        /// What is wrong with them.
        reason: String,
    },
    /// An operating-system I/O error, with what was being done.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A caller passed something this crate cannot accept (out-of-order keys
    /// to a builder, an option out of range).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The data is well formed but uses a feature we do not implement (an
    /// unknown compression type, a different comparator).
    #[error("not supported: {0}")]
    NotSupported(String),
    /// Something that was asked for does not exist (a database directory
    /// without `create_if_missing`, a file named in the MANIFEST).
    #[error("not found: {0}")]
    NotFound(String),
    /// A resource is held by someone else: the database `LOCK` file is
    /// locked by another process or another handle in this one.
    #[error("busy: {0}")]
    Busy(String),
    /// A compaction executor could not run a job: a device that failed, a
    /// remote worker that died or lied. Not a fault of the data or of the
    /// caller: the scheduler hands the job to the next executor of its
    /// chain, and only the reference executor's failure stops the database.
    #[error("the {executor} executor failed: {reason}")]
    ExecutorFailed {
        /// Name of the executor (`opencl`, `parallel`, ...).
        executor: String,
        /// What went wrong.
        reason: String,
    },
    /// A compaction executor declined a job it was offered: "not me,
    /// because ..." (RocksDB's "use local"). The executor ran nothing that
    /// counts; the job goes to the next executor of its chain. Placement on
    /// the device refuses a job too large for its memory, a remote
    /// engine's check refuses a file it cannot adopt.
    #[error("the {executor} executor refused the job: {reason}")]
    Refused {
        /// Name of the executor that declined.
        executor: String,
        /// Why.
        reason: String,
    },
    /// A fault of ShaleDB itself, not of the data, the disk or the caller:
    /// a panic caught on a background or executor thread, a broken
    /// invariant. The message says where; please report it.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A corruption at `offset` of an unnamed source; callers that know the
    /// file attach it with [`Error::at`].
    pub fn corruption(offset: u64, reason: impl Into<String>) -> Error {
        Error::Corruption {
            location: Location {
                file: String::new(),
                offset,
            },
            reason: reason.into(),
        }
    }

    /// Re-anchors a corruption found inside a sub-range (a block, a record)
    /// to a file: the file name is set when it was unknown and `base` is added
    /// to the offset. Other errors pass through unchanged.
    #[must_use]
    pub fn at(self, file: &str, base: u64) -> Error {
        match self {
            Error::Corruption {
                mut location,
                reason,
            } => {
                if location.file.is_empty() {
                    location.file = file.to_string();
                    location.offset = location.offset.saturating_add(base);
                }
                Error::Corruption { location, reason }
            }
            other => other,
        }
    }

    /// Names the file an error happened in: an I/O error's context gets
    /// "in FILE" appended, a corruption without a file gets `file`.
    #[must_use]
    pub fn in_file(self, file: &str) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: format!("{context} in {file}"),
                source,
            },
            other => other.at(file, 0),
        }
    }

    /// An I/O error with the action that failed.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    /// An executor failure (see [`Error::ExecutorFailed`]).
    pub fn executor_failed(executor: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::ExecutorFailed {
            executor: executor.into(),
            reason: reason.into(),
        }
    }

    /// An executor's refusal of a job (see [`Error::Refused`]).
    pub fn refused(executor: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::Refused {
            executor: executor.into(),
            reason: reason.into(),
        }
    }

    /// An internal error for a panic caught while doing `what`, with the
    /// panic's message when it has one.
    pub fn panicked(what: &str, payload: &(dyn std::any::Any + Send)) -> Error {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Error::Internal(format!("{what} panicked: {message}"))
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// The kind of the operating-system error behind an [`Error::Io`]
    /// (`None` for the other variants).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Error::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }

    /// The raw OS error number behind an [`Error::Io`] (`errno`), when the
    /// error came straight from the operating system.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// True for an [`Error::Io`] that says the disk or the user's quota is
    /// full (`ENOSPC`, `EDQUOT`). The engine treats these apart from other
    /// I/O errors: the operation can succeed once space is freed, so it
    /// retries them by itself, where any other I/O error stops writes until
    /// the database is reopened. Decided on the error kind, which survives
    /// the wrapping that adds a file name to the message.
    pub fn is_no_space(&self) -> bool {
        matches!(
            self.io_kind(),
            Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
        )
    }

    /// Says what the failed I/O was part of: an I/O error's context gets
    /// " during `what`" appended ("writing a table block during flush").
    /// Other errors pass through unchanged.
    #[must_use]
    pub fn during(self, what: &str) -> Error {
        match self {
            Error::Io { context, source } => Error::Io {
                context: format!("{context} during {what}"),
                source,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_fills_file_and_shifts_offset_once() {
        let err = Error::corruption(7, "bad").at("000005.ldb", 100);
        let again = err.at("other", 1000);
        match again {
            Error::Corruption { location, reason } => {
                assert_eq!(location.file, "000005.ldb");
                assert_eq!(location.offset, 107);
                assert_eq!(reason, "bad");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn no_space_is_told_apart_from_other_io_errors() {
        // ENOSPC and EDQUOT on Linux; the kind is what is checked, so a
        // message rewrapped with the file name keeps it.
        for errno in [28, 122] {
            let os = std::io::Error::from_raw_os_error(errno);
            let rewrapped = std::io::Error::new(os.kind(), format!("000123.ldb: {os}"));
            for source in [os, rewrapped] {
                let err = Error::io("writing a table block", source).during("flush");
                assert!(err.is_no_space(), "{err}");
                assert!(err.to_string().contains("during flush"), "{err}");
            }
        }
        let eio = Error::io("syncing", std::io::Error::from_raw_os_error(5));
        assert!(!eio.is_no_space());
        assert_eq!(eio.raw_os_error(), Some(5));
        assert!(!Error::corruption(0, "bad").is_no_space());
        let full = Error::io("appending to log", std::io::Error::from_raw_os_error(28));
        assert!(
            full.to_string().contains("No space left on device"),
            "{full}"
        );
    }

    #[test]
    fn display_names_file_and_offset() {
        let err = Error::corruption(3, "checksum mismatch").at("x.log", 0);
        assert_eq!(
            err.to_string(),
            "corruption in x.log at offset 3: checksum mismatch"
        );
    }
}
