//! `shale completions SHELL`: the shell's completion script for `shale`,
//! on stdout (clap_complete). Install, for example:
//!
//! ```text
//! shale completions bash > ~/.local/share/bash-completion/completions/shale
//! shale completions zsh > ~/.zfunc/_shale        # with fpath+=~/.zfunc
//! shale completions fish > ~/.config/fish/completions/shale.fish
//! ```

use std::io::Write;

use clap::Args;
use clap_complete::Shell;

use crate::error::CliResult;

/// Arguments of `shale completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: Shell,
}

/// Prints the completion script for `command` (the whole `shale` CLI).
pub fn run(args: &CompletionsArgs, mut command: clap::Command) -> CliResult {
    let name = command.get_name().to_string();
    // Into memory first: clap_complete panics on a failed write, and a
    // closed pipe (`shale completions bash | head`) must end quietly.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, name, &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}
