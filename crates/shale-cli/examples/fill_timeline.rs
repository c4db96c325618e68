//! The GPU paper's Fig. 12: fillrandom throughput over time, one line per
//! engine, one panel per value size, as one PNG, drawn from the `--timeline`
//! CSVs that `shale bench`, `tools/leveldb-bench` and `tools/rocksdb-bench`
//! write (`seconds,benchmark,ops,ops_per_sec,p99_micros`). A program for
//! `scripts/reproduce`, not a test.
//!
//! `fill_timeline OUT.png --font FILE.ttf [--title TEXT] [--benchmark NAME]
//!  --series PANEL LABEL FILE.csv [--series ...]`
//!
//! Each `--series` is one line: the panel it goes in (panels are drawn top
//! to bottom in the order they first appear), its legend label (one colour
//! per label, the same in every panel) and its CSV. Only the rows of
//! `--benchmark` (default `fillrandom`) are drawn, against seconds since
//! that benchmark began; its first and last intervals are left out when
//! the benchmark ran under a quarter of them (their rates are noise). As
//! `gpu_figures`, a missing font is an error rather than a PNG without
//! labels.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

/// The family name the font is registered under.
const FAMILY: &str = "sans-serif";

/// Width of the image, and height of one panel, in pixels.
const WIDTH: u32 = 1600;
const PANEL_HEIGHT: u32 = 420;
/// Height of the title above the panels.
const TITLE_HEIGHT: u32 = 50;
/// Lines of at most this many points also get a dot per point.
const MARKED_POINTS: usize = 60;
/// A first or last interval the benchmark ran less than this share of is
/// not drawn (`read_points`).
const EDGE_INTERVAL_SHARE: f64 = 0.25;

/// Line colours, in the order labels first appear (tab10's first six,
/// then greys).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(80, 80, 80),
    RGBColor(160, 160, 160),
];

/// One line: its panel, its label and its points (seconds, ops/s).
struct Series {
    panel: String,
    label: String,
    points: Vec<(f64, f64)>,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("fill_timeline: {e}");
        std::process::exit(1);
    }
}

const USAGE: &str =
    "usage: fill_timeline OUT.png --font FILE.ttf [--title TEXT] [--benchmark NAME] \
                     --series PANEL LABEL FILE.csv [--series ...]";

fn run() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let (mut png, mut font, mut title) = (None, None, None);
    let mut benchmark = "fillrandom".to_string();
    let mut specs = Vec::new();
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or(format!("{arg} needs {what}"));
        match arg.as_str() {
            "--font" => font = Some(value("a file")?),
            "--title" => title = Some(value("a text")?),
            "--benchmark" => benchmark = value("a benchmark name")?,
            "--series" => {
                let panel = value("PANEL LABEL FILE.csv")?;
                let label = value("PANEL LABEL FILE.csv")?;
                let file = value("PANEL LABEL FILE.csv")?;
                specs.push((panel, label, file));
            }
            _ if arg.starts_with("--") => {
                return Err(format!("unknown argument {arg}; {USAGE}").into())
            }
            _ if png.is_none() => png = Some(arg),
            _ => return Err(format!("unexpected argument {arg}; {USAGE}").into()),
        }
    }
    let png = png.ok_or(USAGE)?;
    if specs.is_empty() {
        return Err(format!("no --series; {USAGE}").into());
    }
    let font = font.ok_or("--font FILE.ttf is required: without a font the PNG has no labels")?;
    let bytes = std::fs::read(&font).map_err(|e| format!("--font {font}: {e}"))?;
    // plotters keeps fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| format!("--font {font}: not a TrueType font plotters can use"))?;

    let mut series = Vec::new();
    for (panel, label, file) in specs {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
        let points = read_points(&text, &benchmark).map_err(|e| format!("{file}: {e}"))?;
        series.push(Series {
            panel,
            label,
            points,
        });
    }
    let title = title.unwrap_or_else(|| format!("{benchmark} throughput over time"));
    draw(Path::new(&png), &series, &title).map_err(|e| format!("{png}: {e}"))?;
    println!("fill_timeline: wrote {png}");
    Ok(())
}

/// One row of a timeline CSV: when its interval ended, its operations and
/// their rate over the part of the interval the benchmark ran.
struct Row {
    end: f64,
    ops: f64,
    rate: f64,
}

impl Row {
    /// Seconds of the interval the benchmark ran (`None` without an
    /// operation, whose rate says nothing of it).
    fn width(&self) -> Option<f64> {
        (self.ops > 0.0 && self.rate > 0.0).then(|| self.ops / self.rate)
    }
}

/// The (seconds since the benchmark began, ops/s) of `benchmark`'s rows in
/// a timeline CSV.
///
/// The first and the last interval are cut by the benchmark's start and
/// end: one that holds no operation, or under a quarter of an interval of
/// them, is left out, since its rate (a few puts over a few milliseconds,
/// or none while the fill opens its database) would be drawn as a spike or
/// a stall that did not happen.
fn read_points(text: &str, benchmark: &str) -> Result<Vec<(f64, f64)>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty file")?.split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or(format!("no `{name}` column"))
    };
    let (seconds, name, ops, rate) = (
        column("seconds")?,
        column("benchmark")?,
        column("ops")?,
        column("ops_per_sec")?,
    );
    let mut rows = Vec::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        if cells.get(name) != Some(&benchmark) {
            continue;
        }
        let number = |i: usize| cells.get(i).and_then(|c| c.parse::<f64>().ok());
        if let (Some(end), Some(ops), Some(rate)) = (number(seconds), number(ops), number(rate)) {
            rows.push(Row { end, ops, rate });
        }
    }
    // A whole interval: no interval is longer, the cut ones are shorter.
    let interval = rows
        .windows(2)
        .map(|pair| pair[1].end - pair[0].end)
        .fold(0.0, f64::max);
    let cut = |row: &Row| {
        row.width()
            .is_none_or(|w| w < interval * EDGE_INTERVAL_SHARE)
    };
    if interval > 0.0 {
        if rows.last().is_some_and(cut) {
            rows.pop();
        }
        if rows.first().is_some_and(cut) {
            rows.remove(0);
        }
    }
    // Against the benchmark's own clock, from the start of the first
    // interval drawn.
    let origin = rows.first().map_or(0.0, |first| {
        (first.end - first.width().unwrap_or(interval)).max(0.0)
    });
    Ok(rows.iter().map(|r| (r.end - origin, r.rate)).collect())
}

fn draw(path: &Path, series: &[Series], title: &str) -> Result<(), Box<dyn Error>> {
    let mut panels: Vec<&str> = Vec::new();
    let mut labels: Vec<&str> = Vec::new();
    for s in series {
        if !panels.contains(&s.panel.as_str()) {
            panels.push(&s.panel);
        }
        if !labels.contains(&s.label.as_str()) {
            labels.push(&s.label);
        }
    }
    let height = TITLE_HEIGHT + PANEL_HEIGHT * panels.len() as u32;
    let root = BitMapBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, (FAMILY, 28))?;
    let areas = root.split_evenly((panels.len(), 1));
    for (panel, area) in panels.iter().zip(areas) {
        let lines: Vec<&Series> = series.iter().filter(|s| s.panel == *panel).collect();
        draw_panel(&area, panel, &lines, &labels)?;
    }
    root.present()?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    lines: &[&Series],
    labels: &[&str],
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let points = lines.iter().flat_map(|s| s.points.iter());
    let (right, top) = points.fold((0.0f64, 0.0f64), |(x, y), &(t, r)| (x.max(t), y.max(r)));
    let right = if right > 0.0 { right * 1.02 } else { 1.0 };
    // Thousands of ops/s, with headroom for the legend.
    let top = if top > 0.0 { top * 1e-3 * 1.25 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FAMILY, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..right, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the fill began")
        .y_desc("thousand puts per second")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FAMILY, 16))
        .axis_desc_style((FAMILY, 18))
        .draw()?;
    for s in lines {
        let index = labels.iter().position(|l| *l == s.label).unwrap_or(0);
        let colour = COLOURS[index % COLOURS.len()];
        let points = s.points.iter().map(|&(t, r)| (t, r * 1e-3));
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(3)));
        // A short fill has a few intervals, or one: a line alone would not
        // show them.
        if s.points.len() <= MARKED_POINTS {
            chart.draw_series(points.map(|p| Circle::new(p, 4, colour.filled())))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FAMILY, 16))
        .draw()?;
    Ok(())
}
