//! `shale stats`: the per-level statistics and the list of tables.

use std::io::Write;

use clap::Args;

use super::Target;
use crate::error::CliResult;

/// Arguments of `shale stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    target: Target,
}

/// Prints `shale.stats` and `shale.sstables`.
pub fn run(args: &StatsArgs) -> CliResult {
    let db = args.target.open_read_only()?;
    let mut out = std::io::stdout().lock();
    for property in ["shale.stats", "shale.sstables"] {
        if let Some(text) = db.property(property) {
            write!(out, "{text}")?;
            if !text.ends_with('\n') {
                writeln!(out)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
