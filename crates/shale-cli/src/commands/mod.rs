//! One module per subcommand, and what they share: the database directory
//! and option flags, and opening the database only after every flag has
//! been checked.

pub mod compact;
pub mod completions;
pub mod dump;
pub mod get_put_delete;
pub mod load;
pub mod man;
pub mod repair;
pub mod scan;
pub mod stats;
pub mod verify;
pub mod worker;

use std::path::PathBuf;

use clap::Args;
use shale::{Options, DB};

use crate::db_flags::DbFlags;
use crate::error::{CliError, CliResult};
use crate::hex::Codec;

/// The database a subcommand works on, and how to open it.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// Database directory.
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    #[command(flatten)]
    pub flags: DbFlags,
}

impl Target {
    /// The checked options, with `create_if_missing` defaulting to
    /// `create_by_default`. Nothing is touched on disk.
    pub fn options(&self, create_by_default: bool) -> CliResult<Options> {
        let mut options = self.flags.to_options().map_err(CliError::Usage)?;
        options.create_if_missing = self.flags.create_if_missing_or(create_by_default);
        Ok(options)
    }

    /// Opens the database with `options`. Without `create_if_missing`, a
    /// directory that holds no database is refused before anything is
    /// written to it (opening would leave a `LOCK` and a `LOG` behind).
    pub fn open(&self, options: Options) -> CliResult<DB> {
        if !options.create_if_missing && !self.db.join("CURRENT").exists() {
            return Err(CliError::Failed(format!(
                "{}: no database here (no CURRENT file); `shale put` and `shale load` create one, \
                 other commands need --create_if_missing",
                self.db.display()
            )));
        }
        Ok(DB::open(&self.db, options)?)
    }

    /// Opens the database for reading only (`DB::open_read_only`): no
    /// LOCK, nothing written, so it works while another process has the
    /// database open and leaves the directory as it was. The commands that
    /// only read (`get`, `scan`, `stats`) open it this way.
    pub fn open_read_only(&self) -> CliResult<DB> {
        let options = self.flags.to_options().map_err(CliError::Usage)?;
        if !self.db.join("CURRENT").exists() {
            return Err(CliError::Failed(format!(
                "{}: no database here (no CURRENT file)",
                self.db.display()
            )));
        }
        Ok(DB::open_read_only(&self.db, options)?)
    }
}

/// The `--hex` flag.
#[derive(Debug, Clone, Copy, Args)]
pub struct HexFlag {
    /// Keys and values are lowercase hex in arguments, input and output.
    #[arg(long)]
    pub hex: bool,
}

impl HexFlag {
    /// The codec the flag selects.
    pub fn codec(&self) -> Codec {
        Codec { hex: self.hex }
    }
}
