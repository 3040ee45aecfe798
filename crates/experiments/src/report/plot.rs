//! SVG plots rendered in memory: line charts of time series and grouped bar charts.

use super::ReportError;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// One line of a line chart.
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

/// Turns a plotters error into a report error.
pub(crate) fn plot_err<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// The chart every plot here draws on: f64 axes starting at zero, on an SVG string.
pub(crate) type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What differs between plots in their frame.
pub(crate) struct Frame<'t> {
    /// Caption.
    pub title: &'t str,
    /// Image size in pixels.
    pub size: (u32, u32),
    /// Upper end of the x axis.
    pub x_max: f64,
    /// Upper end of the y axis.
    pub y_max: f64,
    /// Width of the y label area (wider for large numbers).
    pub y_label_area: u32,
    /// Where the legend goes.
    pub legend: SeriesLabelPosition,
}

/// The largest value, at least a tiny positive number (so an axis never has zero length).
pub(crate) fn axis_max(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0f64, f64::max).max(1e-9)
}

/// Renders one plot: white background, caption, axes from zero, then `draw` (mesh and
/// series), then the legend; returns the SVG text.
pub(crate) fn render(
    frame: Frame,
    draw: impl FnOnce(&mut Chart) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, frame.size).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(frame.title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(frame.y_label_area)
            .build_cartesian_2d(0.0..frame.x_max, 0.0..frame.y_max)
            .map_err(plot_err)?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .position(frame.legend)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// Draws `series` as lines; returns the SVG text.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<String, ReportError> {
    let frame = Frame {
        title,
        size: (900, 500),
        x_max: axis_max(series.iter().flat_map(|s| s.points.iter().map(|p| p.0))),
        y_max: axis_max(series.iter().flat_map(|s| s.points.iter().map(|p| p.1))) * 1.1,
        y_label_area: 60,
        legend: SeriesLabelPosition::MiddleRight,
    };
    render(frame, |chart| {
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(plot_err)?;
        for (i, s) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(plot_err)?
                .label(s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        Ok(())
    })
}

/// [`line_chart`] for series given as `(label, points)` pairs.
pub fn line_chart_of<L: AsRef<str>>(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(L, Vec<(f64, f64)>)],
) -> Result<String, ReportError> {
    let lines: Vec<Series> = series
        .iter()
        .map(|(label, points)| Series {
            label: label.as_ref(),
            points: points.clone(),
        })
        .collect();
    line_chart(title, x_label, y_label, &lines)
}

/// A grouped bar chart: one group per category, one bar per series within each group.
pub struct Bars<'a> {
    /// Category labels (x axis groups).
    pub categories: Vec<String>,
    /// (series label, one value per category).
    pub series: Vec<(&'a str, Vec<f64>)>,
}

/// Draws a grouped bar chart; returns the SVG text.
pub fn bar_chart(
    title: &str,
    y_label: &str,
    bars: &Bars,
    y_max: Option<f64>,
) -> Result<String, ReportError> {
    let groups = bars.categories.len().max(1);
    let per = bars.series.len().max(1);
    let frame = Frame {
        title,
        size: (1000, 520),
        x_max: groups as f64,
        y_max: y_max.unwrap_or_else(|| {
            axis_max(bars.series.iter().flat_map(|(_, v)| v.iter().copied())) * 1.1
        }),
        y_label_area: 60,
        legend: SeriesLabelPosition::MiddleRight,
    };
    render(frame, |chart| {
        let cats = bars.categories.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(groups * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 1e-6 {
                    cats.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(y_label)
            .draw()
            .map_err(plot_err)?;
        let width = 0.8 / per as f64;
        for (si, (label, values)) in bars.series.iter().enumerate() {
            let color = Palette99::pick(si).to_rgba();
            let rects = values.iter().enumerate().map(move |(gi, v)| {
                let x0 = gi as f64 + 0.1 + si as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.9, *v)], color.filled())
            });
            chart
                .draw_series(rects)
                .map_err(plot_err)?
                .label(*label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled())
                });
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_render_svg() {
        let svg = line_chart(
            "t",
            "x",
            "y",
            &[Series {
                label: "a",
                points: vec![(0.0, 1.0), (1.0, 2.0)],
            }],
        )
        .expect("renders");
        assert!(svg.starts_with("<svg") && svg.contains("polyline"));
        let bars = Bars {
            categories: vec!["uniform".into(), "overload".into()],
            series: vec![("ATP", vec![0.9, 0.8]), ("TCP", vec![0.7, 0.2])],
        };
        let svg = bar_chart("b", "fraction", &bars, Some(1.0)).expect("renders");
        assert!(svg.contains("uniform") && svg.matches("<rect").count() >= 4);
    }
}
