//! `shale put`, `shale get` and `shale delete`: one key at a time.

use std::ffi::OsString;
use std::io::Write;

use clap::Args;
use shale::{ReadOptions, WriteOptions};

use super::{HexFlag, Target};
use crate::error::{CliError, CliResult};

/// Arguments of `shale put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    hex: HexFlag,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    sync: bool,
    /// The key.
    key: OsString,
    /// The value.
    value: OsString,
    #[command(flatten)]
    target: Target,
}

/// Arguments of `shale get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    hex: HexFlag,
    /// The key.
    key: OsString,
    #[command(flatten)]
    target: Target,
}

/// Arguments of `shale delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    hex: HexFlag,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    sync: bool,
    /// The key.
    key: OsString,
    #[command(flatten)]
    target: Target,
}

/// Sets KEY to VALUE, creating the database unless told not to.
pub fn put(args: &PutArgs) -> CliResult {
    let codec = args.hex.codec();
    let key = codec
        .decode_arg("KEY", &args.key)
        .map_err(CliError::Usage)?;
    let value = codec
        .decode_arg("VALUE", &args.value)
        .map_err(CliError::Usage)?;
    let options = args.target.options(true)?;
    let db = args.target.open(options)?;
    db.put(&WriteOptions { sync: args.sync }, &key, &value)?;
    Ok(())
}

/// Prints the value of KEY; `not found` on stderr and exit 3 when absent.
/// Opens the database read-only.
pub fn get(args: &GetArgs) -> CliResult {
    let codec = args.hex.codec();
    let key = codec
        .decode_arg("KEY", &args.key)
        .map_err(CliError::Usage)?;
    let db = args.target.open_read_only()?;
    let Some(value) = db.get(&ReadOptions::new(), &key)? else {
        return Err(CliError::NotFound("not found".into()));
    };
    let mut line = Vec::with_capacity(value.len() * 2 + 1);
    codec.encode_into(&mut line, &value);
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    out.write_all(&line)?;
    out.flush()?;
    Ok(())
}

/// Removes KEY (not an error when it is absent).
pub fn delete(args: &DeleteArgs) -> CliResult {
    let codec = args.hex.codec();
    let key = codec
        .decode_arg("KEY", &args.key)
        .map_err(CliError::Usage)?;
    let options = args.target.options(false)?;
    let db = args.target.open(options)?;
    db.delete(&WriteOptions { sync: args.sync }, &key)?;
    Ok(())
}
