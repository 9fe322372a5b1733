//! Figures of `zapraid bench --plot DIR`: what a figure shows (`Figure`, its panels of
//! grouped bars or lines, the paper's values to mark), drawn as SVG with `plotters`
//! (`bars`, `lines`), and the `report.md` that embeds them with the tables (`markdown`).
//!
//! SVG only: a PNG needs plotters' bitmap backend, whose text rendering needs its `ttf`
//! feature (font-kit over the system's fontconfig and freetype) and rasterises with fonts
//! found at run time; SVG leaves text to the viewer and needs no system library.

mod bars;
mod lines;
pub mod markdown;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Width of one panel, in pixels.
const PANEL_WIDTH_PX: u32 = 640;
/// Height of one panel, and of the figure's title above the panels, in pixels.
const PANEL_HEIGHT_PX: u32 = 420;
const TITLE_HEIGHT_PX: u32 = 40;
/// Font size of a figure's title.
const TITLE_FONT_PX: u32 = 20;
/// Font size of a panel's caption.
const CAPTION_FONT_PX: u32 = 16;
/// Font size of axis labels and the legend.
const LABEL_FONT_PX: u32 = 13;
const FONT: &str = "sans-serif";

/// Series colours, in order (colour-blind safe, after Okabe and Ito).
const SERIES_RGB: [(u8, u8, u8); 8] = [
    (0, 114, 178),
    (230, 159, 0),
    (0, 158, 115),
    (204, 121, 167),
    (86, 180, 233),
    (213, 94, 0),
    (240, 228, 66),
    (100, 100, 100),
];

/// The colour of series `i`.
fn series_colour(i: usize) -> RGBColor {
    let (r, g, b) = SERIES_RGB[i % SERIES_RGB.len()];
    RGBColor(r, g, b)
}

/// The paper's values are marked in black.
const PAPER_COLOUR: RGBColor = BLACK;
/// Size of a legend's sample (a bar's square, a line's length), in pixels.
const LEGEND_SAMPLE_PX: i32 = 12;
/// Closer than this to a whole number is on it (axis positions of bar groups).
const ON_WHOLE_NUMBER: f64 = 1e-6;
/// Legend text of the paper's marks.
const PAPER_LEGEND: &str = "paper";

/// One figure: a title over one or more panels side by side, like the paper's subfigures.
#[derive(Clone, Debug)]
pub struct Figure {
    /// File name without extension ("exp1"): the figure is written to DIR/<name>.svg.
    pub name: String,
    pub title: String,
    pub panels: Vec<Panel>,
}

#[derive(Clone, Debug)]
pub enum Panel {
    Bars(Bars),
    Lines(Lines),
}

/// Grouped bars: for each group (a chunk size, a RAID level), one bar per series (a
/// scheme); a black mark on a bar where the paper gives its value.
#[derive(Clone, Debug, Default)]
pub struct Bars {
    pub caption: String,
    pub y_label: String,
    pub groups: Vec<String>,
    pub series: Vec<BarSeries>,
}

#[derive(Clone, Debug, Default)]
pub struct BarSeries {
    pub name: String,
    /// One per group; `None` where nothing was measured.
    pub values: Vec<Option<f64>>,
    /// The paper's value per group, where it gives one.
    pub paper: Vec<Option<f64>>,
}

impl BarSeries {
    /// A series of `values` without paper values.
    pub fn new(name: impl Into<String>, values: Vec<Option<f64>>) -> Self {
        let paper = vec![None; values.len()];
        BarSeries { name: name.into(), values, paper }
    }
}

/// Lines over a numeric x axis (a queue depth, a reserve), with the paper's points marked.
#[derive(Clone, Debug, Default)]
pub struct Lines {
    pub caption: String,
    pub x_label: String,
    pub y_label: String,
    /// x is a power of two (queue depths): the axis is log2, labelled with the values.
    pub log2_x: bool,
    pub series: Vec<LineSeries>,
    /// The paper's points: (x, y).
    pub paper: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, Default)]
pub struct LineSeries {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Writes `figure` to `dir/<name>.svg`; returns the file's path.
pub fn write_svg(dir: &Path, figure: &Figure) -> Result<PathBuf> {
    let path = dir.join(format!("{}.svg", figure.name));
    let (columns, rows) = grid(figure.panels.len());
    let size = (PANEL_WIDTH_PX * columns as u32, TITLE_HEIGHT_PX + PANEL_HEIGHT_PX * rows as u32);
    {
        let root = SVGBackend::new(&path, size).into_drawing_area();
        draw_figure(&root, figure).map_err(|e| anyhow!("drawing figure {}: {e}", figure.name))?;
        root.present().map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    }
    // plotters reports a failed write only as a drawing error: check the file is there.
    std::fs::metadata(&path).with_context(|| format!("figure {} was not written", path.display()))?;
    Ok(path)
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw_figure<DB: DrawingBackend>(root: &DrawingArea<DB, plotters::coord::Shift>, figure: &Figure) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let inner = root.titled(&figure.title, (FONT, TITLE_FONT_PX).into_font())?;
    let (columns, rows) = grid(figure.panels.len());
    let areas = inner.split_evenly((rows, columns));
    for (area, panel) in areas.iter().zip(&figure.panels) {
        match panel {
            Panel::Bars(b) => bars::draw(area, b)?,
            Panel::Lines(l) => lines::draw(area, l)?,
        }
    }
    Ok(())
}

/// Columns and rows of the panels of a figure: as square as they go, filled row by row
/// (2 panels side by side, 4 in two rows, 5 in two rows of 3).
fn grid(panels: usize) -> (usize, usize) {
    let panels = panels.max(1);
    let columns = (1..=panels).find(|c| c * c >= panels).unwrap_or(1);
    (columns, panels.div_ceil(columns))
}

/// The top of a y axis holding `values`: room above the largest for the legend (0..1 if
/// none).
fn y_top(values: impl Iterator<Item = f64>) -> f64 {
    const HEADROOM: f64 = 1.4;
    let max = values.filter(|v| v.is_finite()).fold(0.0f64, f64::max);
    if max > 0.0 {
        max * HEADROOM
    } else {
        1.0
    }
}

/// A y axis label: whole numbers on axes that reach 10, one decimal below.
fn y_label(top: f64) -> impl Fn(&f64) -> String {
    const WHOLE_FROM: f64 = 10.0;
    move |y: &f64| if top >= WHOLE_FROM { format!("{y:.0}") } else { format!("{y:.1}") }
}

/// Left margin for the y labels, bottom margin for the x labels, margin around a panel,
/// in pixels.
const Y_LABEL_AREA_PX: u32 = 60;
const X_LABEL_AREA_PX: u32 = 40;
const MARGIN_PX: u32 = 10;

/// A panel's chart: `caption` over axes of `x` and 0..`y_top`.
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    x: std::ops::Range<f64>,
    y_top: f64,
) -> std::result::Result<Chart<'a, DB>, Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    Ok(ChartBuilder::on(area)
        .caption(caption, (FONT, CAPTION_FONT_PX))
        .margin(MARGIN_PX)
        .x_label_area_size(X_LABEL_AREA_PX)
        .y_label_area_size(Y_LABEL_AREA_PX)
        .build_cartesian_2d(x, 0.0..y_top)?)
}

/// Draws the legend of `chart`'s labelled series at `position`.
fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut Chart<'a, DB>, position: SeriesLabelPosition) -> DrawResult
where
    DB::ErrorType: 'static,
{
    const LEGEND_OPACITY: f64 = 0.8;
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(LEGEND_OPACITY))
        .border_style(BLACK)
        .label_font((FONT, LABEL_FONT_PX))
        .draw()?;
    Ok(())
}

/// Light grid lines: none (the bold ones are enough).
fn no_light_lines() -> ShapeStyle {
    WHITE.mix(0.0).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_bars_and_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut series = BarSeries::new("ZapRAID", vec![Some(1.0), None]);
        series.paper[0] = Some(1.2);
        let figure = Figure {
            name: "f".into(),
            title: "t".into(),
            panels: vec![
                Panel::Bars(Bars {
                    caption: "a".into(),
                    y_label: "MiB/s".into(),
                    groups: vec!["4 KiB".into(), "8 KiB".into()],
                    series: vec![series],
                }),
                Panel::Lines(Lines {
                    caption: "b".into(),
                    x_label: "QD".into(),
                    y_label: "MiB/s".into(),
                    log2_x: true,
                    series: vec![LineSeries { name: "x".into(), points: vec![(1.0, 2.0), (128.0, 3.0)] }],
                    paper: vec![(16.0, 2.5)],
                }),
            ],
        };
        let path = write_svg(dir.path(), &figure).unwrap();
        let svg = std::fs::read_to_string(path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("ZapRAID") && svg.contains(PAPER_LEGEND), "{svg}");
    }
}
