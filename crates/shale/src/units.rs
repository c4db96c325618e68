//! The units ShaleDB reports in, defined once: a megabyte is db_bench's
//! (2^20 bytes), a gigabyte 2^30 bytes. Re-exported by [`crate::stats`], whose document uses them.

/// A megabyte, as db_bench counts its MB/s: 2^20 bytes. Every MB and MB/s
/// ShaleDB prints or reports is this one.
pub const MB: f64 = 1_048_576.0;

/// A gigabyte: 1024 [`MB`], 2^30 bytes (`shale compact`'s CPU seconds per
/// GB of compaction input).
pub const GB: f64 = 1024.0 * MB;

/// `bytes` in `seconds` as [`MB`] per second; 0 when no time was measured.
pub fn megabytes_per_second(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / MB / seconds
    } else {
        0.0
    }
}
