//! The GPU paper's Fig. 10 (compaction throughput) and Fig. 11 (fillrandom
//! throughput) at 32, 64, 128 and 256-byte values, per executor, as one PNG
//! with two panels of grouped bars, drawn from the `figures` rows of
//! `scripts/gpu-bench`'s `results.tsv` (docs/opencl.md, "Measuring on a GPU
//! machine"). A program for that script, not a test: no test asserts a
//! timing.
//!
//! `gpu_figures RESULTS.tsv OUT.png --font FILE.ttf [--title TEXT]`
//!
//! `scripts/gpu-bench prepare` builds it and puts it, with a font, in the
//! folder it prepares, so that the GPU host draws the PNG in the same run
//! that measures; `scripts/gpu-bench plot DIR` draws it again from the TSV
//! wherever the project builds. plotters draws text
//! only with a registered TrueType font (its `ab_glyph` renderer, no
//! fontconfig), so a missing font is an error rather than a PNG without
//! labels. Several runs of one bar are drawn as their median.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The family name the font is registered under.
const FAMILY: &str = "sans-serif";

/// Image size in pixels: two panels side by side.
const SIZE: (u32, u32) = (1600, 700);

/// The executors drawn, in bar order, and their colours.
const EXECUTORS: [(&str, RGBColor); 3] = [
    ("streaming", RGBColor(120, 120, 120)),
    ("parallel", RGBColor(31, 119, 180)),
    ("opencl", RGBColor(44, 160, 44)),
];

/// The value sizes drawn, in bytes.
const VALUE_SIZES: [u32; 4] = [32, 64, 128, 256];

/// One panel: a figure number, what its bars show, and the TSV column and
/// scale that give each bar.
struct Panel {
    caption: &'static str,
    y_desc: &'static str,
    column: &'static str,
    scale: f64,
}

const PANELS: [Panel; 2] = [
    Panel {
        caption: "Fig. 10: compaction throughput during fillrandom",
        y_desc: "compaction input, MB/s (MB = 2^20 bytes)",
        column: "compaction_mb_s",
        scale: 1.0,
    },
    Panel {
        caption: "Fig. 11: fillrandom throughput",
        y_desc: "thousand operations per second",
        column: "ops_s",
        scale: 1e-3,
    },
];

/// Median bar heights: (panel column, value size, executor) to the runs'
/// values.
type Bars = BTreeMap<(String, u32, String), Vec<f64>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("gpu_figures: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut positional = Vec::new();
    let (mut font, mut title) = (None, None);
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--font" => font = iter.next(),
            "--title" => title = iter.next(),
            _ if arg.starts_with("--") => return Err(format!("unknown argument {arg}").into()),
            _ => positional.push(arg),
        }
    }
    let [tsv, png] = positional.as_slice() else {
        return Err("usage: gpu_figures RESULTS.tsv OUT.png --font FILE.ttf [--title TEXT]".into());
    };
    let font = font.ok_or("--font FILE.ttf is required: without a font the PNG has no labels")?;
    let bytes = std::fs::read(&font).map_err(|e| format!("--font {font}: {e}"))?;
    // plotters keeps fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| format!("--font {font}: not a TrueType font plotters can use"))?;

    let text = std::fs::read_to_string(tsv).map_err(|e| format!("{tsv}: {e}"))?;
    let bars = read_bars(&text).map_err(|e| format!("{tsv}: {e}"))?;
    if bars.is_empty() {
        return Err(format!("{tsv}: no `figures` rows with numbers to draw").into());
    }
    let title = title.unwrap_or_else(|| "ShaleDB compaction executors".to_string());
    draw(Path::new(png), &bars, &title).map_err(|e| format!("{png}: {e}"))?;
    println!("gpu_figures: wrote {png}");
    Ok(())
}

/// The `figures` rows of `text` (a TSV with a header line), by column
/// name; `-` and unparsable cells are left out.
fn read_bars(text: &str) -> Result<Bars, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("empty file")?.split('\t').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or(format!("no `{name}` column"))
    };
    let (step, case, executor) = (column("step")?, column("case")?, column("executor")?);
    let panels: Vec<(&str, usize)> = PANELS
        .iter()
        .map(|p| column(p.column).map(|i| (p.column, i)))
        .collect::<Result<_, _>>()?;
    let mut bars = Bars::new();
    for line in lines {
        let cells: Vec<&str> = line.split('\t').collect();
        if cells.get(step) != Some(&"figures") {
            continue;
        }
        // Cases are `v<value size>`.
        let Some(value_size) = cells
            .get(case)
            .and_then(|c| c.strip_prefix('v'))
            .and_then(|v| v.parse::<u32>().ok())
        else {
            continue;
        };
        let Some(executor) = cells.get(executor) else {
            continue;
        };
        for (name, index) in &panels {
            if let Some(value) = cells.get(*index).and_then(|v| v.parse::<f64>().ok()) {
                if value.is_finite() {
                    bars.entry((name.to_string(), value_size, executor.to_string()))
                        .or_default()
                        .push(value);
                }
            }
        }
    }
    Ok(bars)
}

/// The median of `values` (the lower middle of an even count, as the
/// script's summary takes it).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[(sorted.len() - 1) / 2]
}

fn draw(path: &Path, bars: &Bars, title: &str) -> Result<(), Box<dyn Error>> {
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, (FAMILY, 28))?;
    let (left, right) = root.split_horizontally(SIZE.0 / 2);
    for (panel, area) in PANELS.iter().zip([left, right]) {
        draw_panel(&area, panel, bars)?;
    }
    root.present()?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    bars: &Bars,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    let height = |value_size: u32, executor: &str| {
        bars.get(&(panel.column.to_string(), value_size, executor.to_string()))
            .map(|values| median(values) * panel.scale)
    };
    let top = VALUE_SIZES
        .iter()
        .flat_map(|v| EXECUTORS.iter().filter_map(move |(e, _)| height(*v, e)))
        .fold(0.0, f64::max);
    // Headroom for the numbers above the bars and the legend.
    let top = if top > 0.0 { top * 1.3 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(panel.caption, (FAMILY, 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(VALUE_SIZES.len() as f64 - 0.5), 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(VALUE_SIZES.len())
        .x_label_formatter(&|x| {
            let index = x.round();
            if (x - index).abs() < 0.01 && index >= 0.0 {
                VALUE_SIZES
                    .get(index as usize)
                    .map_or(String::new(), |v| format!("{v} B"))
            } else {
                String::new()
            }
        })
        .x_desc("value size (16-byte keys)")
        .y_desc(panel.y_desc)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FAMILY, 16))
        .axis_desc_style((FAMILY, 18))
        .draw()?;

    // Each value size's group is 0.8 wide, one bar per executor.
    let width = 0.8 / EXECUTORS.len() as f64;
    for (slot, (executor, color)) in EXECUTORS.iter().enumerate() {
        let mut rectangles = Vec::new();
        let mut labels = Vec::new();
        for (group, value_size) in VALUE_SIZES.iter().enumerate() {
            let Some(value) = height(*value_size, executor) else {
                continue;
            };
            let x0 = group as f64 - 0.4 + slot as f64 * width;
            rectangles.push(Rectangle::new(
                [(x0, 0.0), (x0 + width * 0.92, value)],
                color.filled(),
            ));
            // The number above its bar.
            let style = (FAMILY, 13)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            labels.push(Text::new(
                format!("{value:.0}"),
                (x0 + width * 0.46, value),
                style,
            ));
        }
        let color = *color;
        chart
            .draw_series(rectangles)?
            .label(*executor)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        chart.draw_series(labels)?;
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
