//! What `shale bench` and `shale ycsb` share around the benchmarks: where
//! the database lives, and db_bench's header lines.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{CliError, CliResult};

/// Where the database lives: a given directory or a temporary one.
#[derive(Debug)]
pub enum DbLocation {
    /// `--db`.
    Given(PathBuf),
    /// A fresh temporary directory, removed when dropped.
    Temporary(tempfile::TempDir),
}

impl DbLocation {
    /// `dir`, or a new temporary directory named after `prefix`.
    pub fn new(dir: Option<&Path>, prefix: &str) -> CliResult<DbLocation> {
        match dir {
            Some(dir) => Ok(DbLocation::Given(dir.to_path_buf())),
            None => tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map(DbLocation::Temporary)
                .map_err(|e| CliError::Failed(format!("creating a temporary directory: {e}"))),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        match self {
            DbLocation::Given(path) => path,
            DbLocation::Temporary(dir) => dir.path(),
        }
    }
}

/// The machine facts db_bench prints before its benchmarks, kept for
/// `shale bench --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// The local time, as C's `ctime` writes it.
    pub date: String,
    /// Processors listed in `/proc/cpuinfo` (`None` where it cannot be read).
    pub cpus: Option<usize>,
    /// Their model name.
    pub cpu_model: Option<String>,
    /// Their cache size, as `/proc/cpuinfo` writes it (`"32768 KB"`).
    pub cpu_cache: Option<String>,
    /// Whether this `shale` was built with optimizations and without
    /// debug assertions (a release build); see `warnings`.
    pub optimized: bool,
    /// db_bench's warnings for an unoptimized build.
    pub warnings: Vec<&'static str>,
}

impl Environment {
    /// Reads the date and `/proc/cpuinfo`.
    pub fn probe() -> Environment {
        let mut environment = Environment {
            date: ctime_now(),
            cpus: None,
            cpu_model: None,
            cpu_cache: None,
            optimized: !cfg!(debug_assertions),
            warnings: build_warnings(),
        };
        if let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") {
            let mut cpus = 0;
            let (mut model, mut cache) = (String::new(), String::new());
            for line in cpuinfo.lines() {
                let Some((key, value)) = line.split_once(':') else {
                    continue;
                };
                match key.trim() {
                    "model name" => {
                        cpus += 1;
                        model = value.trim().to_string();
                    }
                    "cache size" => cache = value.trim().to_string(),
                    _ => {}
                }
            }
            environment.cpus = Some(cpus);
            environment.cpu_model = Some(model);
            environment.cpu_cache = Some(cache);
        }
        environment
    }

    /// db_bench's environment lines (stderr): version, date, CPU.
    pub fn print(&self, engine: &str) {
        eprintln!("{engine}:    version {}", env!("CARGO_PKG_VERSION"));
        eprintln!("Date:       {}", self.date);
        if let (Some(cpus), Some(model), Some(cache)) =
            (self.cpus, &self.cpu_model, &self.cpu_cache)
        {
            eprintln!("CPU:        {cpus} * {model}");
            eprintln!("CPUCache:   {cache}");
        }
    }
}

/// db_bench's environment lines (stderr): version, date, CPU.
pub fn print_environment(engine: &str) {
    Environment::probe().print(engine);
}

/// The local time as C's `ctime` writes it, without the newline.
fn ctime_now() -> String {
    let mut buffer = [0 as libc::c_char; 64];
    // SAFETY: `time` accepts a null pointer; `ctime_r` writes at most 26
    // bytes (NUL included) into the 64-byte buffer and returns null or a
    // pointer into it.
    let text = unsafe {
        let now = libc::time(std::ptr::null_mut());
        let result = libc::ctime_r(&now, buffer.as_mut_ptr());
        if result.is_null() {
            return String::from("?");
        }
        std::ffi::CStr::from_ptr(buffer.as_ptr())
    };
    text.to_string_lossy().trim_end().to_string()
}

/// The warnings db_bench prints for an unoptimized build.
pub fn build_warnings() -> Vec<&'static str> {
    if cfg!(debug_assertions) {
        vec![
            "WARNING: Optimization is disabled: benchmarks unnecessarily slow",
            "WARNING: Assertions are enabled; benchmarks unnecessarily slow",
        ]
    } else {
        Vec::new()
    }
}
