//! Latency histograms, shared by the per-thread statistics (`stats.rs`),
//! the per-interval timeline (`timeline.rs`) and `shale ycsb`: both of the
//! first two record into histograms made here, so this module sits below
//! them and imports neither.

use hdrhistogram::Histogram;

/// Significant decimal digits kept by latency histograms.
const SIGNIFICANT_DIGITS: u8 = 3;

/// An empty latency histogram (nanoseconds, growing as needed).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is within 0..=5")
}

/// Records `nanos` (at least 1) in `histogram`, growing it as needed.
/// (`saturating_record` would clamp to the current, small, range instead.)
#[inline]
pub fn record_latency(histogram: &mut Histogram<u64>, nanos: u64) {
    // Only fails when the histogram cannot grow (a count overflowing usize).
    let _ = histogram.record(nanos.max(1));
}
