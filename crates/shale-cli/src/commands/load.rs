//! `shale load`: applies `KEY<TAB>VALUE` (put) and `KEY` (delete) lines from
//! stdin.
//!
//! With `--ack`, each record is its own write and `ok N` is printed (and
//! stdout flushed) only after the write of the N-th record returned (synced
//! first with `--sync`): crash tests rely on every acknowledged record
//! surviving. Without `--ack`, records are grouped into batches.
//!
//! Lines end with `\n`; the key runs to the first TAB and the value is the
//! rest of the line (it may hold more TABs). Empty lines are skipped. A bad
//! line (bad hex) stops the load with an error naming the line; the records
//! before it are written.
//!
//! On a terminal, stderr shows the progress: a bar over the input's bytes
//! when stdin is a file (`shale load --db DIR < dump.tsv`), else a spinner
//! counting lines.

use std::io::{BufRead, Write};
use std::os::fd::AsFd;

use clap::Args;
use shale::{WriteBatch, WriteOptions, DB};

use super::{HexFlag, Target};
use crate::error::{CliError, CliResult};
use crate::hex::Codec;
use crate::progress::{self, Progress};

/// Without `--ack`, a batch is written once it holds this many bytes.
const BATCH_BYTES: usize = 256 << 10;

/// Arguments of `shale load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    hex: HexFlag,
    /// Sync the write-ahead log after every write.
    #[arg(long)]
    sync: bool,
    /// Print `ok N` after the N-th record is written (one write per record).
    #[arg(long)]
    ack: bool,
    #[command(flatten)]
    target: Target,
}

/// One parsed input line.
enum Record {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn parse_line(codec: Codec, line_number: u64, line: &[u8]) -> Result<Record, String> {
    match line.iter().position(|&b| b == b'\t') {
        Some(tab) => Ok(Record::Put(
            codec.decode(&format!("the key on line {line_number}"), &line[..tab])?,
            codec.decode(
                &format!("the value on line {line_number}"),
                &line[tab + 1..],
            )?,
        )),
        None => Ok(Record::Delete(
            codec.decode(&format!("the key on line {line_number}"), line)?,
        )),
    }
}

/// The size of stdin when it is a regular file, else `None` (a pipe, a
/// terminal).
fn stdin_file_size() -> Option<u64> {
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let metadata = std::fs::File::from(fd).metadata().ok()?;
    metadata.is_file().then_some(metadata.len())
}

/// How far the load is, on stderr: bytes of a file, or lines of a pipe.
enum LoadProgress {
    Bytes(Progress),
    Lines(Progress),
}

impl LoadProgress {
    fn new() -> LoadProgress {
        match stdin_file_size() {
            Some(total) if progress::enabled() => {
                LoadProgress::Bytes(progress::bytes_bar("load", total))
            }
            _ => LoadProgress::Lines(progress::counter("load", "lines")),
        }
    }

    fn update(&self, bytes: u64, lines: u64) {
        match self {
            LoadProgress::Bytes(bar) => bar.set_position(bytes),
            LoadProgress::Lines(bar) => bar.set_position(lines),
        }
    }
}

/// Reads stdin to its end, writing every record.
pub fn run(args: &LoadArgs) -> CliResult {
    let options = args.target.options(true)?;
    let db = args.target.open(options)?;
    let progress = LoadProgress::new();
    let stdin = std::io::stdin().lock();
    load(&db, args, stdin, &mut std::io::stdout().lock(), &progress)
}

fn load(
    db: &DB,
    args: &LoadArgs,
    mut input: impl BufRead,
    out: &mut impl Write,
    progress: &LoadProgress,
) -> CliResult {
    let codec = args.hex.codec();
    let write_options = WriteOptions { sync: args.sync };
    let mut batch = WriteBatch::new();
    let mut line = Vec::new();
    let mut line_number = 0u64;
    let mut bytes_read = 0u64;
    let mut records = 0u64;
    loop {
        line.clear();
        let read = input
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::Failed(format!("reading stdin: {e}")))?;
        if read == 0 {
            break;
        }
        line_number += 1;
        bytes_read += read as u64;
        progress.update(bytes_read, line_number);
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line.is_empty() {
            continue;
        }
        let record = match parse_line(codec, line_number, &line) {
            Ok(record) => record,
            Err(message) => {
                // The records before the bad line are written.
                if !batch.is_empty() {
                    db.write(&write_options, batch)?;
                }
                return Err(CliError::Usage(message));
            }
        };
        match &record {
            Record::Put(key, value) => batch.put(key, value)?,
            Record::Delete(key) => batch.delete(key)?,
        }
        records += 1;
        if args.ack {
            db.write(&write_options, std::mem::take(&mut batch))?;
            writeln!(out, "ok {records}")?;
            out.flush()?;
        } else if batch.approximate_size() >= BATCH_BYTES {
            db.write(&write_options, std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        db.write(&write_options, batch)?;
    }
    Ok(())
}
