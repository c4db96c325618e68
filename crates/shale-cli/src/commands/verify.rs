//! `shale verify`: checks a database without opening it (see
//! `shale::verify`), so it also works on a database in use or read-only.
//! On a terminal, stderr shows a spinner with the time so far meanwhile
//! (`verify_db` reports no progress of its own).

use std::io::Write;

use clap::Args;

use super::Target;
use crate::error::CliResult;
use crate::progress;

/// Arguments of `shale verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    target: Target,
}

/// Prints the report, or fails with the damage found (file and offset).
pub fn run(args: &VerifyArgs) -> CliResult {
    let options = args.target.options(false)?;
    let bar = progress::spinner("verify");
    bar.set_message(args.target.db.display().to_string());
    let report = shale::verify::verify_db(&args.target.db, &options)?;
    drop(bar);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{report}")?;
    out.flush()?;
    Ok(())
}
