//! `shale scan`: prints `KEY<TAB>VALUE` lines in key order.

use std::ffi::OsString;
use std::io::{BufWriter, Write};

use clap::Args;
use shale::ReadOptions;

use super::{HexFlag, Target};
use crate::error::{CliError, CliResult};

/// Arguments of `shale scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    hex: HexFlag,
    /// First key to print (inclusive).
    #[arg(long, value_name = "KEY")]
    from: Option<OsString>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    to: Option<OsString>,
    /// Print at most this many entries.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    #[command(flatten)]
    target: Target,
}

/// Prints the entries between the bounds.
pub fn run(args: &ScanArgs) -> CliResult {
    let codec = args.hex.codec();
    let decode = |what: &str, arg: &Option<OsString>| -> CliResult<Option<Vec<u8>>> {
        arg.as_ref()
            .map(|a| codec.decode_arg(what, a).map_err(CliError::Usage))
            .transpose()
    };
    let from = decode("--from", &args.from)?;
    let to = decode("--to", &args.to)?;
    let db = args.target.open_read_only()?;

    let mut iter = db.iter(&ReadOptions {
        // A bulk read: do not push the hot blocks out of the cache.
        fill_cache: false,
        lower_bound: from,
        upper_bound: to,
        ..ReadOptions::new()
    })?;
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut line = Vec::new();
    let mut printed = 0u64;
    iter.seek_to_first();
    while iter.valid() && args.limit.is_none_or(|limit| printed < limit) {
        line.clear();
        codec.encode_into(&mut line, iter.key());
        line.push(b'\t');
        codec.encode_into(&mut line, iter.value());
        line.push(b'\n');
        out.write_all(&line)?;
        printed += 1;
        iter.next();
    }
    out.flush()?;
    iter.status()?;
    Ok(())
}
