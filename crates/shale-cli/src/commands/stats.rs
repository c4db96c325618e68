//! `shale stats`: the per-level statistics and the list of tables.

use std::io::Write;

use clap::Args;

use super::Target;
use crate::error::CliResult;

/// Arguments of `shale stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Print the statistics as one JSON document (the schema of
    /// `shale::stats`, as the C API and Python's `DB.stats()` give it)
    /// instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

/// Prints `shale.stats` and `shale.sstables`, or with `--json` the
/// statistics document. The database is opened read-only: the counters
/// since open are this command's own (zero), the levels' files and bytes
/// are the database's.
pub fn run(args: &StatsArgs) -> CliResult {
    let db = args.target.open_read_only()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", db.statistics().to_json())?;
        out.flush()?;
        return Ok(());
    }
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
