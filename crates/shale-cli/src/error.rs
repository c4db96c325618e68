//! How a subcommand fails: a message for stderr and an exit status.

use std::io;
use std::process::ExitCode;

/// The exit status of `shale get` for a key that is not in the database.
pub const NOT_FOUND_EXIT: u8 = 3;

/// A failed subcommand.
#[derive(Debug)]
pub enum CliError {
    /// Bad flags, arguments or input: printed as `error: ...`, exit 2 (as
    /// clap's own usage errors).
    Usage(String),
    /// The engine or the file system failed: `error: ...`, exit 1.
    Failed(String),
    /// What was asked for is not there (`get` of a missing key): printed
    /// as is, exit 3, so a script tells it from a failure (1) and a usage
    /// error (2).
    NotFound(String),
    /// The reader of stdout went away (`shale scan | head`): stop quietly.
    BrokenPipe,
}

impl CliError {
    /// Prints the message and returns the exit status.
    pub fn report(&self) -> ExitCode {
        match self {
            CliError::Usage(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
            CliError::Failed(message) => {
                eprintln!("error: {message}");
                ExitCode::from(1)
            }
            CliError::NotFound(message) => {
                eprintln!("{message}");
                ExitCode::from(NOT_FOUND_EXIT)
            }
            CliError::BrokenPipe => ExitCode::SUCCESS,
        }
    }
}

impl From<shale::Error> for CliError {
    fn from(err: shale::Error) -> CliError {
        CliError::Failed(err.to_string())
    }
}

impl From<io::Error> for CliError {
    /// Errors writing stdout; broken pipes end the output quietly.
    fn from(err: io::Error) -> CliError {
        if err.kind() == io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::Failed(format!("writing the output: {err}"))
        }
    }
}

/// Result of a subcommand.
pub type CliResult<T = ()> = Result<T, CliError>;
