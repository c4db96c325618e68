//! The names of a database's files, as LevelDB 1.23 names them
//! (`db/filename.cc`), and the atomic switch of `CURRENT` to a new MANIFEST.
//!
//! | file | name |
//! |---|---|
//! | write-ahead log | `NNNNNN.log` |
//! | table | `NNNNNN.ldb` (written), `NNNNNN.sst` (older name, still read) |
//! | MANIFEST | `MANIFEST-NNNNNN` |
//! | pointer to the live MANIFEST | `CURRENT` |
//! | lock | `LOCK` |
//! | temporary file | `NNNNNN.dbtmp` |
//! | human-readable log | `LOG`, `LOG.old` |
//!
//! `NNNNNN` is the file number in decimal, at least six digits.

use std::io::Write;
use std::path::{Path, PathBuf};

use shale_format::Result;

use crate::env::{io_error, Env};

/// What a file in the database directory is, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A write-ahead log, `NNNNNN.log`.
    Log,
    /// The lock file, `LOCK`.
    DbLock,
    /// A table, `NNNNNN.ldb` or `NNNNNN.sst`.
    Table,
    /// A MANIFEST, `MANIFEST-NNNNNN`.
    Descriptor,
    /// `CURRENT`, which names the live MANIFEST.
    Current,
    /// A temporary file, `NNNNNN.dbtmp`.
    Temp,
    /// The human-readable log, `LOG` or `LOG.old`.
    InfoLog,
}

fn numbered(dir: &Path, number: u64, suffix: &str) -> PathBuf {
    dir.join(format!("{number:06}.{suffix}"))
}

/// `dir/NNNNNN.log`: write-ahead log number `number`.
pub fn log_file_name(dir: &Path, number: u64) -> PathBuf {
    numbered(dir, number, "log")
}

/// `dir/NNNNNN.ldb`: the name tables are written under.
pub fn table_file_name(dir: &Path, number: u64) -> PathBuf {
    numbered(dir, number, "ldb")
}

/// `dir/NNNNNN.sst`: the older table name, tried when `.ldb` is missing.
pub fn sst_table_file_name(dir: &Path, number: u64) -> PathBuf {
    numbered(dir, number, "sst")
}

/// `dir/MANIFEST-NNNNNN`: MANIFEST (descriptor) number `number`.
pub fn descriptor_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(descriptor_base_name(number))
}

fn descriptor_base_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}

/// `dir/CURRENT`: names the live MANIFEST.
pub fn current_file_name(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

/// `dir/LOCK`: held while the database is open.
pub fn lock_file_name(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// `dir/NNNNNN.dbtmp`: a file being prepared before it is renamed.
pub fn temp_file_name(dir: &Path, number: u64) -> PathBuf {
    numbered(dir, number, "dbtmp")
}

/// `dir/LOG`: the human-readable log of the open database.
pub fn info_log_file_name(dir: &Path) -> PathBuf {
    dir.join("LOG")
}

/// `dir/LOG.old`: the human-readable log of the previous open.
pub fn old_info_log_file_name(dir: &Path) -> PathBuf {
    dir.join("LOG.old")
}

/// Reads a decimal number from the start of `text`, as LevelDB's
/// `ConsumeDecimalNumber`: at least one digit, no sign, and it must fit in
/// a `u64`. Returns the number and the rest of `text`.
fn consume_decimal_number(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (number, rest) = text.split_at(digits);
    Some((number.parse().ok()?, rest))
}

/// What the file called `name` (a name in the database directory, without
/// the directory) is, and its number (0 for `CURRENT`, `LOCK`, `LOG` and
/// `LOG.old`); `None` when it is not one of the database's files.
/// Exactly LevelDB's `ParseFileName`.
pub fn parse_file_name(name: &str) -> Option<(u64, FileType)> {
    match name {
        "CURRENT" => return Some((0, FileType::Current)),
        "LOCK" => return Some((0, FileType::DbLock)),
        "LOG" | "LOG.old" => return Some((0, FileType::InfoLog)),
        _ => {}
    }
    if let Some(rest) = name.strip_prefix("MANIFEST-") {
        return match consume_decimal_number(rest)? {
            (number, "") => Some((number, FileType::Descriptor)),
            _ => None,
        };
    }
    let (number, suffix) = consume_decimal_number(name)?;
    let file_type = match suffix {
        ".log" => FileType::Log,
        ".sst" | ".ldb" => FileType::Table,
        ".dbtmp" => FileType::Temp,
        _ => return None,
    };
    Some((number, file_type))
}

/// Points `dir/CURRENT` at `MANIFEST-<manifest_number>`, atomically: the
/// new contents go to a synced temporary file, which is renamed over
/// `CURRENT`, and the directory is synced so the rename survives a crash.
/// The temporary file is removed when a step fails.
pub fn set_current_file(env: &dyn Env, dir: &Path, manifest_number: u64) -> Result<()> {
    let temp = temp_file_name(dir, manifest_number);
    let contents = format!("{}\n", descriptor_base_name(manifest_number));
    let result = (|| {
        let mut file = env.new_writable_file(&temp)?;
        file.write_all(contents.as_bytes())
            .map_err(|e| io_error("writing", &temp, e))?;
        file.sync().map_err(|e| io_error("syncing", &temp, e))?;
        drop(file);
        env.rename(&temp, &current_file_name(dir))?;
        env.sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: the step that failed is the error to report, and after
        // a successful rename the temporary file is gone anyway.
        let _ = env.remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{read_file, FaultInjectionEnv, MemEnv};
    use std::sync::Arc;

    #[test]
    fn parses_valid_names() {
        let cases: &[(&str, u64, FileType)] = &[
            ("100.log", 100, FileType::Log),
            ("0.log", 0, FileType::Log),
            ("0.sst", 0, FileType::Table),
            ("0.ldb", 0, FileType::Table),
            ("CURRENT", 0, FileType::Current),
            ("LOCK", 0, FileType::DbLock),
            ("MANIFEST-2", 2, FileType::Descriptor),
            ("MANIFEST-7", 7, FileType::Descriptor),
            ("LOG", 0, FileType::InfoLog),
            ("LOG.old", 0, FileType::InfoLog),
            ("18446744073709551615.log", u64::MAX, FileType::Log),
            ("000123.dbtmp", 123, FileType::Temp),
        ];
        for &(name, number, file_type) in cases {
            assert_eq!(parse_file_name(name), Some((number, file_type)), "{name}");
        }
    }

    #[test]
    fn rejects_invalid_names() {
        let cases = [
            "",
            "foo",
            "foo-dx-100.log",
            ".log",
            "manifest",
            "CURREN",
            "CURRENTX",
            "MANIFES",
            "MANIFEST",
            "MANIFEST-",
            "XMANIFEST-3",
            "MANIFEST-3x",
            "MANIFEST--3",
            "MANIFEST-+3",
            "LOC",
            "LOCKx",
            "LO",
            "LOGx",
            "LOG.older",
            "18446744073709551616.log",
            "184467440737095516150.log",
            "100",
            "100.",
            "100.lop",
            "+100.log",
            "-1.log",
            " 1.log",
            "1.log ",
            "1.LOG",
            "١٢.log",
        ];
        for name in cases {
            assert_eq!(parse_file_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn constructed_names_parse_back() {
        let dir = Path::new("foo");
        let name_of = |path: PathBuf| {
            assert_eq!(path.parent(), Some(dir));
            path.file_name().unwrap().to_str().unwrap().to_string()
        };
        let cases = [
            (log_file_name(dir, 192), "000192.log", 192, FileType::Log),
            (
                table_file_name(dir, 200),
                "000200.ldb",
                200,
                FileType::Table,
            ),
            (
                sst_table_file_name(dir, 7),
                "000007.sst",
                7,
                FileType::Table,
            ),
            (
                descriptor_file_name(dir, 100),
                "MANIFEST-000100",
                100,
                FileType::Descriptor,
            ),
            (
                temp_file_name(dir, 999),
                "000999.dbtmp",
                999,
                FileType::Temp,
            ),
            (
                log_file_name(dir, 1234567),
                "1234567.log",
                1234567,
                FileType::Log,
            ),
            (current_file_name(dir), "CURRENT", 0, FileType::Current),
            (lock_file_name(dir), "LOCK", 0, FileType::DbLock),
            (info_log_file_name(dir), "LOG", 0, FileType::InfoLog),
            (old_info_log_file_name(dir), "LOG.old", 0, FileType::InfoLog),
        ];
        for (path, expected, number, file_type) in cases {
            let name = name_of(path);
            assert_eq!(name, expected);
            assert_eq!(parse_file_name(&name), Some((number, file_type)), "{name}");
        }
    }

    #[test]
    fn set_current_file_writes_manifest_name_and_cleans_up() {
        let env = MemEnv::new();
        let dir = Path::new("/db");
        set_current_file(&env, dir, 5).unwrap();
        assert_eq!(
            read_file(&env, &current_file_name(dir)).unwrap(),
            b"MANIFEST-000005\n"
        );
        assert_eq!(env.children(dir).unwrap(), ["CURRENT"]);
        set_current_file(&env, dir, 1234567).unwrap();
        assert_eq!(
            read_file(&env, &current_file_name(dir)).unwrap(),
            b"MANIFEST-1234567\n"
        );
        assert_eq!(env.children(dir).unwrap(), ["CURRENT"]);
    }

    #[test]
    fn set_current_file_failure_keeps_old_current_and_removes_temp() {
        let env = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
        let dir = Path::new("/db");
        set_current_file(&env, dir, 1).unwrap();
        env.set_fail_syncs(true);
        assert!(set_current_file(&env, dir, 2).is_err());
        env.set_fail_syncs(false);
        assert_eq!(
            read_file(&env, &current_file_name(dir)).unwrap(),
            b"MANIFEST-000001\n"
        );
        assert_eq!(env.children(dir).unwrap(), ["CURRENT"]);
    }

    #[test]
    fn set_current_file_survives_power_loss() {
        let env = FaultInjectionEnv::new(Arc::new(MemEnv::new()));
        let dir = Path::new("/db");
        set_current_file(&env, dir, 1).unwrap();
        set_current_file(&env, dir, 2).unwrap();
        env.drop_unsynced_data().unwrap();
        assert_eq!(
            read_file(&env, &current_file_name(dir)).unwrap(),
            b"MANIFEST-000002\n"
        );
        assert_eq!(env.children(dir).unwrap(), ["CURRENT"]);
    }
}
