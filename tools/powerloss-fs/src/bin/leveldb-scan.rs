//! `leveldb-scan DIR`: opens DIR with LevelDB 1.23 (Debian's libleveldb,
//! through `leveldb-shim`) and prints every entry as `shale scan --hex`
//! does, `KEY<TAB>VALUE` in hex, in key order. The power-loss test compares
//! it with what ShaleDB reads after its own recovery of the same directory.
//! Opening recovers the directory (LevelDB writes a new MANIFEST and log):
//! run it on a copy.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir] = args.as_slice() else {
        eprintln!("usage: leveldb-scan DIR");
        return ExitCode::from(2);
    };
    if !leveldb_shim::available() {
        eprintln!(
            "leveldb-scan: built without LevelDB 1.23; install it ({}) and rebuild",
            leveldb_shim::INSTALL_COMMAND
        );
        return ExitCode::FAILURE;
    }
    let entries = leveldb_shim::Db::open(&PathBuf::from(dir), &leveldb_shim::DbOptions::default())
        .and_then(|db| db.scan_all());
    let entries = match entries {
        Ok(entries) => entries,
        Err(err) => {
            eprintln!("leveldb-scan: LevelDB cannot read {dir}: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = String::new();
    for (key, value) in entries {
        hex(&mut out, &key);
        out.push('\t');
        hex(&mut out, &value);
        out.push('\n');
    }
    if std::io::stdout().write_all(out.as_bytes()).is_err() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
}
