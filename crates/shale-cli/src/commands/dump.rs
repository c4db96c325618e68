//! `shale dump FILE`: prints a table, a write-ahead log or a MANIFEST in the
//! text LevelDB's `leveldbutil dump` (`db/dumpfile.cc`) prints, choosing by
//! the file name as it does:
//!
//! * a table (`NNNNNN.ldb` / `.sst`): `'key' @ seq : val => 'value'` per
//!   entry (`del` for a tombstone, `badkey '...' => '...'` for a key that is
//!   not an internal key);
//! * a log (`NNNNNN.log`): `--- offset N; sequence S` per record, then
//!   `  put 'k' 'v'` / `  del 'k'` per operation;
//! * a MANIFEST (`MANIFEST-NNNNNN`): `--- offset N; VersionEdit {`, one line
//!   per field, `}`.
//!
//! Bytes outside printable ASCII are written as `\xNN`. Damage is printed
//! where it is met (`corruption: N bytes; ...`) and makes the exit status 1.

use std::cell::RefCell;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::rc::Rc;

use clap::Args;
use shale::env::{default_env, Env};
use shale::filename::{parse_file_name, FileType};
use shale::format::internal_key::{InternalKey, ParsedInternalKey, ValueType};
use shale::format::iterator::KvIterator;
use shale::format::log_reader::LogReader;
use shale::format::table::{ReadTableOptions, Table};
use shale::format::version_edit::VersionEdit;
use shale::format::write_batch::{BatchOp, WriteBatch, WRITE_BATCH_HEADER_SIZE};
use shale::Error;

use crate::error::{CliError, CliResult};

/// Arguments of `shale dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// A table (`.ldb`, `.sst`), a write-ahead log (`.log`) or a
    /// `MANIFEST-NNNNNN`.
    file: PathBuf,
}

/// Appends `bytes` to `out` as LevelDB's `EscapeString` does: printable
/// ASCII as is, everything else as `\xNN`.
fn escape_into(out: &mut String, bytes: &[u8]) {
    for &byte in bytes {
        if (b' '..=b'~').contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
}

fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    escape_into(&mut out, bytes);
    out
}

/// Prints FILE; fails when it cannot be read or holds damage.
pub fn run(args: &DumpArgs) -> CliResult {
    let path = &args.file;
    let kind = path
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(parse_file_name)
        .map(|(_, kind)| kind);
    let env = default_env();
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let damage = match kind {
        Some(FileType::Table) => dump_table(&*env, path, &mut out)?,
        Some(FileType::Log) => dump_log(&*env, path, &mut out, print_batch)?,
        Some(FileType::Descriptor) => dump_log(&*env, path, &mut out, print_edit)?,
        _ => {
            return Err(CliError::Usage(format!(
                "{}: unknown file type (expected NNNNNN.ldb, NNNNNN.sst, NNNNNN.log or MANIFEST-NNNNNN)",
                path.display()
            )))
        }
    };
    out.flush()?;
    match damage {
        0 => Ok(()),
        n => Err(CliError::Failed(format!(
            "{}: {n} damaged {} found",
            path.display(),
            if n == 1 { "part" } else { "parts" }
        ))),
    }
}

/// Prints every entry of a table; returns the number of problems found.
fn dump_table(env: &dyn Env, path: &std::path::Path, out: &mut impl Write) -> CliResult<u64> {
    let name = path.display().to_string();
    let source = env.new_random_access_file(path)?;
    let size = env.file_size(path)?;
    let options = ReadTableOptions::internal_scan();
    let table = Table::open(source, size, &name, options)?;
    let mut iter = table.iter();
    iter.seek_to_first();
    let mut line = String::new();
    while iter.valid() {
        line.clear();
        match ParsedInternalKey::parse(iter.key()) {
            Ok(key) => {
                line.push('\'');
                escape_into(&mut line, key.user_key);
                line.push_str(&format!("' @ {} : ", key.sequence));
                line.push_str(match key.value_type {
                    ValueType::Deletion => "del",
                    ValueType::Value => "val",
                });
            }
            Err(_) => {
                line.push_str("badkey '");
                escape_into(&mut line, iter.key());
                line.push('\'');
            }
        }
        line.push_str(" => '");
        escape_into(&mut line, iter.value());
        line.push_str("'\n");
        out.write_all(line.as_bytes())?;
        iter.next();
    }
    match iter.status() {
        Ok(()) => Ok(0),
        Err(err) => {
            writeln!(out, "iterator error: {err}")?;
            Ok(1)
        }
    }
}

/// Prints every record of a log file with `print_record`, and the damage
/// the reader skips; returns the number of problems found.
fn dump_log(
    env: &dyn Env,
    path: &std::path::Path,
    out: &mut impl Write,
    print_record: fn(u64, &[u8], &mut String) -> bool,
) -> CliResult<u64> {
    let file = env.new_sequential_file(path)?;
    // The reporter owns its state; share it to print each drop where met.
    let dropped: Rc<RefCell<Vec<(u64, Error)>>> = Rc::default();
    let sink = dropped.clone();
    let reporter = move |bytes: u64, reason: Error| sink.borrow_mut().push((bytes, reason));
    let mut reader = LogReader::new(file, reporter, true, 0);
    let mut record = Vec::new();
    let mut problems = 0;
    let mut text = String::new();
    loop {
        let more = reader.read_record_into(&mut record)?;
        for (bytes, reason) in dropped.borrow_mut().drain(..) {
            writeln!(out, "corruption: {bytes} bytes; {reason}")?;
            problems += 1;
        }
        if !more {
            break;
        }
        text.clear();
        if !print_record(reader.last_record_offset(), &record, &mut text) {
            problems += 1;
        }
        out.write_all(text.as_bytes())?;
    }
    Ok(problems)
}

/// A write-ahead log record: a write batch. False when it is damaged.
fn print_batch(offset: u64, record: &[u8], out: &mut String) -> bool {
    out.push_str(&format!("--- offset {offset}; "));
    if record.len() < WRITE_BATCH_HEADER_SIZE {
        out.push_str(&format!(
            "log record length {} is too small\n",
            record.len()
        ));
        return false;
    }
    let batch = match WriteBatch::from_data(record.to_vec()) {
        Ok(batch) => batch,
        Err(err) => {
            out.push_str(&format!("{err}\n"));
            return false;
        }
    };
    out.push_str(&format!("sequence {}\n", batch.sequence()));
    for op in batch.iter() {
        match op {
            Ok(BatchOp::Put { key, value }) => {
                out.push_str("  put '");
                escape_into(out, key);
                out.push_str("' '");
                escape_into(out, value);
                out.push_str("'\n");
            }
            Ok(BatchOp::Delete { key }) => {
                out.push_str("  del '");
                escape_into(out, key);
                out.push_str("'\n");
            }
            Err(err) => {
                out.push_str(&format!("  error: {err}\n"));
                return false;
            }
        }
    }
    true
}

/// LevelDB's `InternalKey::DebugString`: `'user key' @ seq : type`.
fn internal_key_text(key: &InternalKey) -> String {
    match key.parse() {
        Ok(parsed) => format!(
            "'{}' @ {} : {}",
            escape(parsed.user_key),
            parsed.sequence,
            parsed.value_type as u8
        ),
        Err(_) => format!("(bad){}", escape(key.encoded())),
    }
}

/// A MANIFEST record: a version edit, as LevelDB's
/// `VersionEdit::DebugString`. False when it is damaged.
fn print_edit(offset: u64, record: &[u8], out: &mut String) -> bool {
    out.push_str(&format!("--- offset {offset}; "));
    let edit = match VersionEdit::decode(record) {
        Ok(edit) => edit,
        Err(err) => {
            out.push_str(&format!("{err}\n"));
            return false;
        }
    };
    out.push_str("VersionEdit {");
    if let Some(name) = &edit.comparator {
        out.push_str(&format!("\n  Comparator: {name}"));
    }
    if let Some(number) = edit.log_number {
        out.push_str(&format!("\n  LogNumber: {number}"));
    }
    if let Some(number) = edit.prev_log_number {
        out.push_str(&format!("\n  PrevLogNumber: {number}"));
    }
    if let Some(number) = edit.next_file_number {
        out.push_str(&format!("\n  NextFile: {number}"));
    }
    if let Some(sequence) = edit.last_sequence {
        out.push_str(&format!("\n  LastSeq: {sequence}"));
    }
    for (level, key) in &edit.compact_pointers {
        out.push_str(&format!(
            "\n  CompactPointer: {level} {}",
            internal_key_text(key)
        ));
    }
    for (level, number) in &edit.deleted_files {
        out.push_str(&format!("\n  RemoveFile: {level} {number}"));
    }
    for (level, file) in &edit.new_files {
        out.push_str(&format!(
            "\n  AddFile: {level} {} {} {} .. {}",
            file.number,
            file.file_size,
            internal_key_text(&file.smallest),
            internal_key_text(&file.largest)
        ));
    }
    out.push_str("\n}\n");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_leveldb() {
        assert_eq!(escape(b"a b~"), "a b~");
        assert_eq!(escape(b"\x00\n\x7f\xff'"), "\\x00\\x0a\\x7f\\xff'");
    }

    #[test]
    fn prints_a_batch_and_an_edit() {
        let mut batch = WriteBatch::new();
        batch.put(b"k", b"v\x01").unwrap();
        batch.delete(b"gone").unwrap();
        batch.set_sequence(7);
        let mut text = String::new();
        assert!(print_batch(32, batch.data(), &mut text));
        assert_eq!(
            text,
            "--- offset 32; sequence 7\n  put 'k' 'v\\x01'\n  del 'gone'\n"
        );
        text.clear();
        assert!(!print_batch(0, b"short", &mut text));
        assert_eq!(text, "--- offset 0; log record length 5 is too small\n");

        let mut edit = VersionEdit {
            comparator: Some("leveldb.BytewiseComparator".into()),
            log_number: Some(3),
            next_file_number: Some(5),
            last_sequence: Some(9),
            ..VersionEdit::default()
        };
        edit.add_file(
            0,
            shale::format::version_edit::FileMetaData {
                number: 4,
                file_size: 100,
                smallest: InternalKey::new(b"a", 1, ValueType::Value),
                largest: InternalKey::new(b"z", 2, ValueType::Deletion),
            },
        );
        edit.delete_file(1, 2);
        text.clear();
        assert!(print_edit(0, &edit.encode(), &mut text));
        assert_eq!(
            text,
            "--- offset 0; VersionEdit {\n  Comparator: leveldb.BytewiseComparator\n  LogNumber: 3\n  \
             NextFile: 5\n  LastSeq: 9\n  RemoveFile: 1 2\n  AddFile: 0 4 100 'a' @ 1 : 1 .. 'z' @ 2 : 0\n}\n"
        );
    }
}
