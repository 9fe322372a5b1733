//! Line panels: one line per series over a numeric x axis (log2 for queue depths), the
//! paper's points as black crosses.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    chart, legend, no_light_lines, series_colour, y_label, y_top, DrawResult, Lines, FONT, LABEL_FONT_PX,
    LEGEND_SAMPLE_PX, PAPER_COLOUR, PAPER_LEGEND,
};

/// Sizes of the points on the lines and of the paper's crosses, in pixels.
const POINT_PX: u32 = 3;
const CROSS_PX: u32 = 6;
const LINE_WIDTH_PX: u32 = 2;
const CROSS_WIDTH_PX: u32 = 2;
/// Labels on the x axis at most (an axis of whole numbers gets one per number up to this).
const MAX_X_LABELS: usize = 12;

pub(super) fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, lines: &Lines) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let x_of = |x: f64| if lines.log2_x { x.max(f64::MIN_POSITIVE).log2() } else { x };
    let xs = lines.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).chain(lines.paper.iter().map(|p| p.0));
    let (lo, hi) = xs.map(x_of).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo, hi) } else { (0.0, 1.0) };
    let top =
        y_top(lines.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).chain(lines.paper.iter().map(|p| p.1)));
    let mut chart = chart(area, &lines.caption, lo..hi, top)?;
    let label = |x: &f64| {
        if lines.log2_x {
            format!("{:.0}", x.exp2())
        } else {
            format!("{x:.0}")
        }
    };
    let whole_numbers = ((hi - lo).round() as usize + 1).min(MAX_X_LABELS);
    let y_format = y_label(top);
    chart
        .configure_mesh()
        .x_labels(whole_numbers)
        .x_label_formatter(&label)
        .x_desc(lines.x_label.as_str())
        .y_desc(lines.y_label.as_str())
        .y_label_formatter(&y_format)
        .light_line_style(no_light_lines())
        .label_style((FONT, LABEL_FONT_PX))
        .draw()?;
    for (s, series) in lines.series.iter().enumerate() {
        let colour = series_colour(s);
        let points: Vec<(f64, f64)> = series.points.iter().map(|&(x, y)| (x_of(x), y)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(LINE_WIDTH_PX)))?
            .label(series.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + LEGEND_SAMPLE_PX, y)], colour.stroke_width(LINE_WIDTH_PX))
            });
        chart.draw_series(points.into_iter().map(|p| Circle::new(p, POINT_PX, colour.filled())))?;
    }
    if !lines.paper.is_empty() {
        let crosses = lines
            .paper
            .iter()
            .map(|&(x, y)| Cross::new((x_of(x), y), CROSS_PX, PAPER_COLOUR.stroke_width(CROSS_WIDTH_PX)));
        chart.draw_series(crosses)?.label(PAPER_LEGEND).legend(|(x, y)| {
            Cross::new((x + LEGEND_SAMPLE_PX / 2, y), CROSS_PX, PAPER_COLOUR.stroke_width(CROSS_WIDTH_PX))
        });
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}
