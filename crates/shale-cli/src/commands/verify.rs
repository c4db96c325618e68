//! `shale verify`: checks a database without opening it (see
//! `shale::verify`), so it also works on a database in use or read-only.

use std::io::Write;

use clap::Args;

use super::Target;
use crate::error::CliResult;

/// Arguments of `shale verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    target: Target,
}

/// Prints the report, or fails with the damage found (file and offset).
pub fn run(args: &VerifyArgs) -> CliResult {
    let options = args.target.options(false)?;
    let report = shale::verify::verify_db(&args.target.db, &options)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{report}")?;
    out.flush()?;
    Ok(())
}
