//! The `curve` scenario's charts: SVG files of panels, one measured figure per panel, drawn
//! against a logarithmic axis of scale (operations in flight, resources stored).

use std::path::Path;

use plotters::prelude::*;

/// One panel: a figure measured at each point of the sweep.
pub struct Panel<'a> {
    pub title: &'a str,
    /// (scale, value) in the order measured.
    pub points: Vec<(f64, f64)>,
}

/// Draws `panels` side by side in rows of two into `path`, `x_label` under each.
pub fn panels(path: &Path, caption: &str, x_label: &str, panels: &[Panel<'_>]) -> Result<(), String> {
    let rows = panels.len().div_ceil(2).max(1);
    let root = SVGBackend::new(path, (960, 360 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root.titled(caption, ("sans-serif", 22)).map_err(|e| e.to_string())?;
    for (area, panel) in root.split_evenly((rows, 2)).iter().zip(panels) {
        draw(area, x_label, panel)?;
    }
    root.present().map_err(|e| e.to_string())
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    x_label: &str,
    panel: &Panel<'_>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let xs = panel.points.iter().map(|p| p.0);
    let (x_min, x_max) = (xs.clone().fold(f64::INFINITY, f64::min), xs.fold(0.0, f64::max));
    let y_max = panel.points.iter().map(|p| p.1).fold(0.0, f64::max).max(f64::MIN_POSITIVE) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(panel.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d((x_min * 0.8..x_max * 1.25).log_scale(), 0.0..y_max)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(LineSeries::new(panel.points.iter().copied(), BLUE.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    chart.draw_series(panel.points.iter().map(|p| Circle::new(*p, 4, BLUE.filled()))).map_err(|e| e.to_string())?;
    Ok(())
}
