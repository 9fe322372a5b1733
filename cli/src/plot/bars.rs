//! Grouped bar panels: one group per category (chunk size, RAID level, configuration),
//! one bar per series in it, the paper's values as black marks across their bars.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    chart, legend, no_light_lines, series_colour, y_label, y_top, Bars, DrawResult, FONT, LABEL_FONT_PX,
    LEGEND_SAMPLE_PX, ON_WHOLE_NUMBER, PAPER_COLOUR, PAPER_LEGEND,
};

/// Share of a group's width its bars take (the rest is the gap between groups).
const GROUP_FILL: f64 = 0.8;
/// Groups beyond which their names are set smaller.
const MANY_GROUPS: usize = 8;
const SMALL_LABEL_FONT_PX: u32 = 10;
/// About how wide a character of a sans-serif font is, per pixel of font size.
const CHAR_WIDTH_PER_FONT_PX: f64 = 0.6;
/// Stroke width of the paper's marks.
const PAPER_MARK_WIDTH_PX: u32 = 3;

pub(super) fn draw<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, bars: &Bars) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let groups = bars.groups.len().max(1);
    let top = y_top(bars.series.iter().flat_map(|s| s.values.iter().chain(&s.paper).flatten().copied()));
    // Group i is centred on x = i, so that the axis labels (at whole numbers) sit under it.
    let x_range = -0.5..groups as f64 - 0.5;
    let mut chart = chart(area, &bars.caption, x_range, top)?;
    let name_of = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < ON_WHOLE_NUMBER && i >= 0.0 {
            bars.groups.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    // Names that would run into each other at the usual size are set smaller.
    let widest = bars.groups.iter().map(|g| g.chars().count()).max().unwrap_or(0) as f64;
    let room_px = f64::from(area.dim_in_pixel().0) / groups as f64;
    let crowded = widest * f64::from(LABEL_FONT_PX) * CHAR_WIDTH_PER_FONT_PX > room_px;
    let label_px = if groups > MANY_GROUPS || crowded { SMALL_LABEL_FONT_PX } else { LABEL_FONT_PX };
    let y_format = y_label(top);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups)
        .x_label_formatter(&name_of)
        .x_label_style((FONT, label_px))
        .y_desc(bars.y_label.as_str())
        .y_label_formatter(&y_format)
        .light_line_style(no_light_lines())
        .label_style((FONT, LABEL_FONT_PX))
        .draw()?;
    let series_count = bars.series.len().max(1);
    let bar_width = GROUP_FILL / series_count as f64;
    let left_of = |group: usize, s: usize| group as f64 - GROUP_FILL / 2.0 + s as f64 * bar_width;
    let mut any_paper = false;
    for (s, series) in bars.series.iter().enumerate() {
        let colour = series_colour(s);
        let rects = series.values.iter().enumerate().filter_map(|(g, v)| {
            v.map(|v| Rectangle::new([(left_of(g, s), 0.0), (left_of(g, s) + bar_width, v)], colour.filled()))
        });
        chart.draw_series(rects)?.label(series.name.as_str()).legend(move |(x, y)| {
            let half = LEGEND_SAMPLE_PX / 2;
            Rectangle::new([(x, y - half), (x + LEGEND_SAMPLE_PX, y + half)], colour.filled())
        });
        let marks: Vec<_> = series
            .paper
            .iter()
            .enumerate()
            .filter_map(|(g, p)| p.map(|p| vec![(left_of(g, s), p), (left_of(g, s) + bar_width, p)]))
            .collect();
        any_paper |= !marks.is_empty();
        chart.draw_series(
            marks.into_iter().map(|m| PathElement::new(m, PAPER_COLOUR.stroke_width(PAPER_MARK_WIDTH_PX))),
        )?;
    }
    if any_paper {
        // An empty series, for the legend entry of the marks.
        chart.draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?.label(PAPER_LEGEND).legend(|(x, y)| {
            PathElement::new(vec![(x, y), (x + LEGEND_SAMPLE_PX, y)], PAPER_COLOUR.stroke_width(PAPER_MARK_WIDTH_PX))
        });
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
