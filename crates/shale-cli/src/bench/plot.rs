//! `--plot=FILE.png`: throughput over time (top) and the latency CDF of each
//! benchmark (bottom), drawn with `plotters` on its bitmap backend.
//!
//! Text needs a font. To stay free of fontconfig and freetype, plotters is
//! built with its pure-Rust `ab_glyph` renderer, which draws only fonts
//! registered by the program: the plot looks for a TrueType font at
//! `$SHALE_PLOT_FONT` or at the usual Debian paths (DejaVu, Liberation).
//! Without one the plot is drawn without any text (no title, tick labels or
//! legend; the series keep their colours) and a note says so.

use std::path::Path;
use std::sync::OnceLock;

use hdrhistogram::Histogram;
use plotters::prelude::*;

use super::timeline::TimelineRow;

/// Font files tried in order when `$SHALE_PLOT_FONT` is not set.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// The family name fonts are registered under.
const FAMILY: &str = "sans-serif";

/// Image size in pixels.
const SIZE: (u32, u32) = (1280, 960);

/// Registers a font once per process; returns whether one is available.
fn font_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let candidates: Vec<String> = match std::env::var("SHALE_PLOT_FONT") {
            Ok(path) if path == "none" => return false,
            Ok(path) => vec![path],
            Err(_) => FONT_CANDIDATES.iter().map(|p| p.to_string()).collect(),
        };
        for path in candidates {
            if let Ok(bytes) = std::fs::read(&path) {
                // plotters keeps fonts for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// One line of the latency CDF: (latency in microseconds, fraction of
/// operations at or below it).
pub fn cdf_points(histogram: &Histogram<u64>) -> Vec<(f64, f64)> {
    histogram
        .iter_recorded()
        .map(|v| {
            (
                (v.value_iterated_to() as f64 / 1000.0).max(0.001),
                v.quantile_iterated_to(),
            )
        })
        .collect()
}

/// Draws the plot into `path`. `latencies` holds each benchmark's latency
/// histogram (nanoseconds). Returns a note for the user when the plot had
/// to be drawn without text.
pub fn draw(
    path: &Path,
    rows: &[TimelineRow],
    latencies: &[(String, Histogram<u64>)],
) -> Result<Option<String>, String> {
    let with_text = font_available();
    draw_inner(path, rows, latencies, with_text)
        .map_err(|e| format!("{}: drawing the plot: {e}", path.display()))?;
    Ok((!with_text).then(|| {
        format!(
            "{}: drawn without text (no TrueType font found; set SHALE_PLOT_FONT=/path/to/font.ttf \
             or install fonts-dejavu-core): top, ops/s over time; bottom, latency CDF (log x axis)",
            path.display()
        )
    }))
}

fn draw_inner(
    path: &Path,
    rows: &[TimelineRow],
    latencies: &[(String, Histogram<u64>)],
    with_text: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(SIZE.1 / 2);

    // Throughput: one line per benchmark, in run order. A benchmark's last
    // interval may be a sliver whose rate is noise: drop those shorter than a
    // fifth of the longest interval.
    let full = rows.iter().map(|r| r.window_secs).fold(0.0, f64::max);
    let rows: Vec<&TimelineRow> = rows
        .iter()
        .filter(|r| r.window_secs >= full / 5.0)
        .collect();
    let mut benchmarks: Vec<&str> = Vec::new();
    for row in &rows {
        if !benchmarks.contains(&row.benchmark.as_str()) {
            benchmarks.push(&row.benchmark);
        }
    }
    let max_seconds = rows.iter().map(|r| r.seconds).fold(1e-3, f64::max);
    let max_rate = rows.iter().map(|r| r.ops_per_sec).fold(1.0, f64::max) * 1.05;
    let mut builder = ChartBuilder::on(&upper);
    builder.margin(15);
    if with_text {
        builder
            .caption("Throughput over time", (FAMILY, 22))
            .x_label_area_size(40)
            .y_label_area_size(80);
    }
    let mut chart = builder.build_cartesian_2d(0f64..max_seconds, 0f64..max_rate)?;
    let mut mesh = chart.configure_mesh();
    if with_text {
        mesh.x_desc("seconds since start")
            .y_desc("ops/s")
            .y_label_formatter(&|v| format!("{v:.0}"));
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw()?;
    for (index, name) in benchmarks.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.benchmark == *name)
            .map(|r| (r.seconds, r.ops_per_sec))
            .collect();
        let series = chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
        if with_text {
            series.label(*name).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
    }
    if with_text && !benchmarks.is_empty() {
        chart
            .configure_series_labels()
            .label_font((FAMILY, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }

    // Latency CDF, log-scaled latency.
    let curves: Vec<(&str, Vec<(f64, f64)>)> = latencies
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(name, h)| (name.as_str(), cdf_points(h)))
        .collect();
    let max_micros = curves
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.0))
        .fold(1.0, f64::max)
        * 1.2;
    let min_micros = curves
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.0))
        .fold(max_micros / 1.5, f64::min)
        .max(0.001)
        / 1.2;
    let mut builder = ChartBuilder::on(&lower);
    builder.margin(15);
    if with_text {
        builder
            .caption("Latency CDF", (FAMILY, 22))
            .x_label_area_size(40)
            .y_label_area_size(80);
    }
    let mut chart = builder.build_cartesian_2d((min_micros..max_micros).log_scale(), 0f64..1.0)?;
    let mut mesh = chart.configure_mesh();
    if with_text {
        mesh.x_desc("latency (microseconds, log scale)")
            .y_desc("fraction of operations");
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw()?;
    for (index, (name, points)) in curves.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        let series = chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?;
        if with_text {
            series.label(*name).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
    }
    if with_text && !curves.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FAMILY, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::bench::latency::new_histogram;

    fn sample() -> (Vec<TimelineRow>, Vec<(String, Histogram<u64>)>) {
        let rows = (1..=5)
            .map(|s| TimelineRow {
                seconds: f64::from(s),
                benchmark: if s < 3 { "fillrandom" } else { "readrandom" }.to_string(),
                ops: 1000 * u64::from(s as u32),
                ops_per_sec: 1000.0 * f64::from(s),
                p99_micros: 3.0,
                window_secs: 1.0,
            })
            .collect();
        let mut histogram = new_histogram();
        for nanos in 1..10_000u64 {
            histogram.record(nanos * 100).unwrap();
        }
        (rows, vec![("fillrandom".to_string(), histogram)])
    }

    #[test]
    fn cdf_rises_to_one() {
        let (_, latencies) = sample();
        let points = cdf_points(&latencies[0].1);
        assert!(points
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!((points.last().unwrap().1 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn draws_with_and_without_text() {
        let (rows, latencies) = sample();
        let dir = tempfile::tempdir().unwrap();
        for with_text in [false, font_available()] {
            let path = dir.path().join(format!("plot-{with_text}.png"));
            draw_inner(&path, &rows, &latencies, with_text).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(&bytes[1..4], b"PNG");
        }
        // Empty inputs still give a picture.
        let path = dir.path().join("empty.png");
        draw_inner(&path, &[], &[], false).unwrap();
        assert!(path.exists());
    }
}
