//! `shale`: the command-line tool for ShaleDB databases.
//!
//! This file only parses the command line and dispatches; each subcommand
//! lives in its own module under `commands/`, and the db_bench-style option
//! flags they share are in `db_flags.rs`.

mod bench;
mod commands;
mod db_flags;
mod error;
mod hex;
mod stress;
mod ycsb;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::commands::{compact, dump, get_put_delete, load, repair, scan, stats, verify, worker};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => err.report(),
    }
}
