//! SVG plots rendered in memory: line charts of time series and grouped bar charts.

use super::ReportError;
use plotters::prelude::*;

/// One line of a line chart.
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

fn plot_err<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// Draws `series` as lines; returns the SVG text.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 500)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let x_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold(0.0f64, f64::max)
            .max(1e-9);
        let y_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(plot_err)?;
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
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let groups = bars.categories.len().max(1);
        let per = bars.series.len().max(1);
        let top = y_max.unwrap_or_else(|| {
            bars.series
                .iter()
                .flat_map(|(_, v)| v.iter().copied())
                .fold(0.0f64, f64::max)
                .max(1e-9)
                * 1.1
        });
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..groups as f64, 0.0..top)
            .map_err(plot_err)?;
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
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
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
