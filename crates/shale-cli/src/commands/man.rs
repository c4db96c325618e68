//! `shale man`: the manual page of `shale` (roff, clap_mangen) on stdout,
//! `shale man | man -l -` to read it; or with `--dir DIR`, one page per
//! command (`shale.1`, `shale-get.1`, ...) written into DIR, for
//! `/usr/local/share/man/man1`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::error::{CliError, CliResult};

/// Arguments of `shale man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write shale.1 and one page per subcommand (shale-get.1, ...) into
    /// DIR instead of printing shale.1.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Prints or writes the pages of `command` (the whole `shale` CLI).
pub fn run(args: &ManArgs, command: clap::Command) -> CliResult {
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .and_then(|()| clap_mangen::generate_to(command, dir))
                .map_err(|e| CliError::Failed(format!("{}: {e}", dir.display())))?;
        }
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(command).render(&mut out)?;
            out.flush()?;
        }
    }
    Ok(())
}
