//! `shale repair`: rebuilds a database whose MANIFEST or CURRENT is lost or
//! damaged, or whose tables are damaged, from the files in its directory
//! (see `shale::repair`, LevelDB's `RepairDB`), and prints what was
//! recovered and what was moved to `lost/`. On a terminal, stderr shows a
//! spinner with the time so far meanwhile (`repair` reports no progress of
//! its own).

use std::io::Write;

use clap::Args;

use super::Target;
use crate::error::CliResult;
use crate::progress;

/// Arguments of `shale repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The table flags (block size, Bloom bits, compression) and
    /// `--write_buffer_size` shape the tables written from the logs.
    #[command(flatten)]
    target: Target,
}

/// Repairs the database and prints the report; fails (exit 1) when the
/// directory holds no database, the database is open, or a write fails.
pub fn run(args: &RepairArgs) -> CliResult {
    let options = args.target.options(false)?;
    let bar = progress::spinner("repair");
    bar.set_message(args.target.db.display().to_string());
    let report = shale::repair(&args.target.db, &options)?;
    drop(bar);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{report}")?;
    out.flush()?;
    Ok(())
}
