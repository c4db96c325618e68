//! `shale`: the command-line tool for ShaleDB databases.
//!
//! This file only parses the command line and dispatches; each subcommand
//! lives in its own module under `commands/`, and the db_bench-style option
//! flags they share are in `db_flags.rs`.
//!
//! Those flags are left out of a subcommand's short help (`-h`), which says
//! where they are instead, and listed by its `--help`; the man page and the
//! completion scripts come from the same definition ([`cli_command`]).

mod bench;
mod commands;
mod db_flags;
mod error;
mod hex;
mod progress;
mod size;
mod stress;
mod ycsb;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::commands::{
    compact, completions, dump, get_put_delete, load, man, repair, scan, stats, verify, worker,
};

/// `shale --version`: a build with the engine's kill points says so (the
/// crash test checks it).
const VERSION: &str = if shale::kill_point::ENABLED {
    concat!(env!("CARGO_PKG_VERSION"), " (with kill points)")
} else {
    env!("CARGO_PKG_VERSION")
};

/// ShaleDB: an embeddable LSM key-value store whose files are LevelDB 1.23's.
#[derive(Debug, Parser)]
#[command(name = "shale", version = VERSION, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Set KEY to VALUE.
    Put(get_put_delete::PutArgs),
    /// Print the value of KEY (exit 3 with `not found` when absent).
    /// Opens the database read-only: works while another process has it
    /// open, and changes nothing.
    Get(get_put_delete::GetArgs),
    /// Remove KEY (not an error when it is absent).
    Delete(get_put_delete::DeleteArgs),
    /// Apply `KEY<TAB>VALUE` (put) and `KEY` (delete) lines from stdin.
    Load(load::LoadArgs),
    /// Print `KEY<TAB>VALUE` lines in key order (read-only).
    Scan(scan::ScanArgs),
    /// Compact the whole database and report the compaction speed.
    Compact(compact::CompactArgs),
    /// Check every table, the MANIFEST and the logs without opening the
    /// database.
    Verify(verify::VerifyArgs),
    /// Rebuild the MANIFEST from the tables and logs, as LevelDB's RepairDB:
    /// damaged files go to lost/.
    Repair(repair::RepairArgs),
    /// Print the per-level statistics and the list of tables (read-only).
    Stats(stats::StatsArgs),
    /// Print a table, a write-ahead log or a MANIFEST, as LevelDB's dumpfile.
    Dump(dump::DumpArgs),
    /// Run LevelDB db_bench's benchmarks (same flags, same output lines).
    Bench(bench::BenchArgs),
    /// Run a YCSB core workload (a-f): load, then run.
    Ycsb(ycsb::YcsbArgs),
    /// Random concurrent operations checked against an expected state kept
    /// outside the database; safe to kill (db_stress).
    Stress(stress::StressArgs),
    /// Serve compaction jobs over gRPC for engines whose databases lie
    /// under --root (`--remote_workers` on the engine's side).
    Worker(worker::WorkerArgs),
    /// Print the completion script for a shell (bash, zsh, fish, elvish,
    /// powershell).
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff; `shale man | man -l -`), or write one
    /// page per subcommand with --dir.
    Man(man::ManArgs),
}

/// A flag every subcommand that opens a database has (from `DbFlags`).
const DB_FLAG_PROBE: &str = "write_buffer_size";

/// `shale`'s command line: the derived one, with a note under the short
/// help (`-h`) of each subcommand that takes the database options, which
/// `-h` leaves out, and the rule for sizes under its `--help`.
fn cli_command() -> clap::Command {
    let mut command = Cli::command();
    let with_db_flags: Vec<String> = command
        .get_subcommands()
        .filter(|sub| sub.get_arguments().any(|arg| arg.get_id() == DB_FLAG_PROBE))
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in with_db_flags {
        command = command.mut_subcommand(&name, |sub| {
            let hidden = sub
                .get_arguments()
                .filter(|arg| arg.is_hide_short_help_set() && !arg.is_hide_set())
                .count();
            sub.after_help(format!(
                "Database options: {hidden} more flags (--write_buffer_size, --cache_size, \
                 --compaction_executor, ...); `shale {name} --help` lists them."
            ))
            .after_long_help(
                "SIZE: bytes (4194304), or a number with a unit: K/KiB, M/MiB, G/GiB, T/TiB \
                 are powers of 1024, kB, MB, GB, TB powers of 1000 (64MiB, 1.5GiB, 500MB).",
            )
        });
    }
    command
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&cli_command().get_matches()).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Put(args) => get_put_delete::put(&args),
        Command::Get(args) => get_put_delete::get(&args),
        Command::Delete(args) => get_put_delete::delete(&args),
        Command::Load(args) => load::run(&args),
        Command::Scan(args) => scan::run(&args),
        Command::Compact(args) => compact::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Repair(args) => repair::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::Dump(args) => dump::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Ycsb(args) => ycsb::run(&args),
        Command::Stress(args) => stress::run(&args),
        Command::Worker(args) => worker::run(&args),
        Command::Completions(args) => completions::run(&args, cli_command()),
        Command::Man(args) => man::run(&args, cli_command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => err.report(),
    }
}
