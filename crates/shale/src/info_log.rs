//! The human-readable `LOG` file in the database directory, kept as LevelDB
//! keeps it: opening a database moves the previous `LOG` to `LOG.old` and
//! starts a new one. Lines read
//!
//! ```text
//! 2024/03/09-17:05:42.123456 7f3a5c1ff640 Recovering log #12
//! ```
//!
//! (UTC time to the microsecond, the writing thread's `pthread_t` in hex,
//! the message).

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use shale_format::Result;

use crate::env::{lock, Env};
use crate::filename::{info_log_file_name, old_info_log_file_name};

/// Writes a line to an [`InfoLog`], `format!`-style:
/// `shale_log!(logger, "compacted {} files", n)`.
#[macro_export]
macro_rules! shale_log {
    ($logger:expr, $($arg:tt)+) => {
        $logger.log(::std::format_args!($($arg)+))
    };
}

/// A thread-safe handle on the human-readable log; clones share the file.
#[derive(Clone)]
pub struct InfoLog {
    /// `None` for the disabled log.
    sink: Option<Arc<Mutex<Box<dyn Write + Send>>>>,
}

impl std::fmt::Debug for InfoLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InfoLog")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl InfoLog {
    /// Starts `dir/LOG` for a database being opened: an existing `LOG`
    /// becomes `LOG.old` (replacing the one before), then a new `LOG` is
    /// created. `dir` is created when missing.
    pub fn open(env: &dyn Env, dir: &Path) -> Result<InfoLog> {
        // Any real problem with the directory shows when LOG is created.
        let _ = env.create_dir_all(dir);
        let log = info_log_file_name(dir);
        if env.file_exists(&log) {
            // LevelDB ignores a failure here too; a new LOG is made anyway.
            let _ = env.rename(&log, &old_info_log_file_name(dir));
        }
        let file = env.new_writable_file(&log)?;
        Ok(InfoLog::from_writer(file))
    }

    /// A log that writes its lines to `writer` (flushed after each line).
    pub fn from_writer(writer: Box<dyn Write + Send>) -> InfoLog {
        InfoLog {
            sink: Some(Arc::new(Mutex::new(writer))),
        }
    }

    /// A log that drops everything, for tests and for callers that want no
    /// `LOG` file.
    pub fn disabled() -> InfoLog {
        InfoLog { sink: None }
    }

    /// False for [`InfoLog::disabled`].
    pub fn is_enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// Writes one line, stamped with the time and thread, and flushes it.
    /// A message that spans lines is written as it is. Failures to write are
    /// ignored: the log is for people and must never fail the database.
    pub fn log(&self, message: std::fmt::Arguments<'_>) {
        let Some(sink) = &self.sink else {
            return;
        };
        let mut line = format_line_prefix(SystemTime::now(), current_thread_id());
        // Writing into a String cannot fail.
        let _ = std::fmt::write(&mut line, message);
        if !line.ends_with('\n') {
            line.push('\n');
        }
        let mut writer = lock(sink);
        let _ = writer.write_all(line.as_bytes());
        let _ = writer.flush();
    }
}

/// The calling thread's `pthread_t`, the id debuggers show.
fn current_thread_id() -> u64 {
    // SAFETY: pthread_self has no preconditions and cannot fail.
    let id = unsafe { libc::pthread_self() };
    #[allow(
        clippy::unnecessary_cast,
        reason = "pthread_t is an integer of platform-dependent width"
    )]
    let id = id as u64;
    id
}

/// `YYYY/MM/DD-HH:MM:SS.uuuuuu <thread> ` for `time` in UTC.
fn format_line_prefix(time: SystemTime, thread_id: u64) -> String {
    // A clock before 1970 is a broken clock; the epoch is as good as any.
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since_epoch.as_secs();
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let second_of_day = seconds % 86_400;
    format!(
        "{year:04}/{month:02}/{day:02}-{:02}:{:02}:{:02}.{:06} {thread_id:x} ",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
        since_epoch.subsec_micros(),
    )
}

/// The proleptic Gregorian date of day `days` after 1970-01-01, by Howard
/// Hinnant's `civil_from_days` (shifted so the year starts in March and the
/// leap day falls last).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{read_file, MemEnv};
    use std::time::Duration;

    fn at(seconds: u64, micros: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(seconds, micros * 1000)
    }

    #[test]
    fn prefix_format() {
        assert_eq!(
            format_line_prefix(at(0, 0), 0xab),
            "1970/01/01-00:00:00.000000 ab "
        );
        assert_eq!(
            format_line_prefix(at(951_782_400 + 3661, 7), 1),
            "2000/02/29-01:01:01.000007 1 "
        );
        assert_eq!(
            format_line_prefix(at(1_700_000_000, 999_999), 0x7f3a_5c1f_f640),
            "2023/11/14-22:13:20.999999 7f3a5c1ff640 "
        );
        assert_eq!(
            format_line_prefix(at(4_107_542_399, 0), 0),
            "2100/02/28-23:59:59.000000 0 "
        );
        assert_eq!(
            format_line_prefix(at(4_107_542_400, 0), 0),
            "2100/03/01-00:00:00.000000 0 "
        );
    }

    #[test]
    fn civil_dates_round_trip_over_four_centuries() {
        let days_in_month = |year: u64, month: u64| match month {
            2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        let (mut year, mut month, mut day) = (1970, 1, 1);
        for days in 0..146_097 {
            assert_eq!(civil_from_days(days), (year, month, day), "day {days}");
            day += 1;
            if day > days_in_month(year, month) {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
    }

    #[test]
    fn open_moves_log_to_log_old() {
        let env = MemEnv::new();
        let dir = Path::new("/db");
        let log = info_log_file_name(dir);
        let old = old_info_log_file_name(dir);

        let first = InfoLog::open(&env, dir).unwrap();
        shale_log!(first, "first open, {} files", 3);
        drop(first);
        assert!(!env.file_exists(&old));

        let second = InfoLog::open(&env, dir).unwrap();
        assert_eq!(read_file(&env, &log).unwrap(), b"");
        let old_text = String::from_utf8(read_file(&env, &old).unwrap()).unwrap();
        assert!(old_text.ends_with(" first open, 3 files\n"), "{old_text:?}");
        shale_log!(second.clone(), "second");
        drop(second);

        InfoLog::open(&env, dir).unwrap();
        let old_text = String::from_utf8(read_file(&env, &old).unwrap()).unwrap();
        assert!(old_text.ends_with(" second\n"), "{old_text:?}");
        assert_eq!(old_text.lines().count(), 1);
    }

    #[test]
    fn lines_have_time_thread_and_message() {
        let env = MemEnv::new();
        let dir = Path::new("/db");
        let logger = InfoLog::open(&env, dir).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let logger = logger.clone();
                std::thread::spawn(move || shale_log!(logger, "from thread {i}"))
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        logger.log(format_args!("already ends in newline\n"));
        let text = String::from_utf8(read_file(&env, &info_log_file_name(dir)).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text:?}");
        for line in &lines {
            let bytes = line.as_bytes();
            for (position, separator) in [
                (4, b'/'),
                (7, b'/'),
                (10, b'-'),
                (13, b':'),
                (16, b':'),
                (19, b'.'),
                (26, b' '),
            ] {
                assert_eq!(bytes[position], separator, "{line:?}");
            }
            let (thread, message) = line[27..].split_once(' ').unwrap();
            assert!(u64::from_str_radix(thread, 16).is_ok(), "{line:?}");
            assert!(message.starts_with("from thread ") || message == "already ends in newline");
        }
    }

    #[test]
    fn disabled_log_writes_nothing() {
        let logger = InfoLog::disabled();
        assert!(!logger.is_enabled());
        shale_log!(logger, "dropped {}", 1);
    }
}
