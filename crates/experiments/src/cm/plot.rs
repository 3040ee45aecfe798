//! Plots the shared line and bar charts do not cover: point sets with fitted lines (Figure 3),
//! and step series (encodings over time, Figure 10).

use crate::report::ReportError;
use crate::report::plot::{Frame, axis_max, plot_err, render};
use plotters::prelude::*;

/// One point set and its least-squares line `y = slope·x + intercept`.
pub(super) struct PointSet<'a> {
    /// Legend label.
    pub label: &'a str,
    /// The points.
    pub points: Vec<(f64, f64)>,
    /// The fitted line, if any.
    pub fit: Option<(f64, f64)>,
}

/// Draws point sets as markers with their fitted lines; returns the SVG text.
pub(super) fn scatter_with_fits(
    title: &str,
    x_label: &str,
    y_label: &str,
    sets: &[PointSet],
) -> Result<String, ReportError> {
    let all = || sets.iter().flat_map(|s| s.points.iter());
    let x_max = axis_max(all().map(|p| p.0)) * 1.05;
    let frame = Frame {
        title,
        size: (900, 560),
        x_max,
        y_max: axis_max(all().map(|p| p.1)) * 1.1,
        y_label_area: 80,
        legend: SeriesLabelPosition::UpperLeft,
    };
    render(frame, |chart| {
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(plot_err)?;
        for (i, s) in sets.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(s.points.iter().map(|p| Circle::new(*p, 4, color.filled())))
                .map_err(plot_err)?
                .label(s.label)
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
            if let Some((a, b)) = s.fit {
                let line = [(0.0, b), (x_max, a * x_max + b)];
                chart
                    .draw_series(LineSeries::new(line, color.stroke_width(2)))
                    .map_err(plot_err)?;
            }
        }
        Ok(())
    })
}

/// Turns `(time, value)` changes into a step series ending at `end`.
pub(super) fn steps(changes: &[(f64, f64)], end: f64) -> Vec<(f64, f64)> {
    let mut pts = Vec::with_capacity(changes.len() * 2 + 1);
    for (i, &(t, v)) in changes.iter().enumerate() {
        if i > 0 {
            pts.push((t, changes[i - 1].1));
        }
        pts.push((t, v));
    }
    if let Some(&(_, v)) = changes.last() {
        pts.push((end, v));
    }
    pts
}

/// Least-squares line through `points`: (slope, intercept); `None` with fewer than two
/// distinct x values.
pub(super) fn fit_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}
