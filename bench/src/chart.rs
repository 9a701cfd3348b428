//! SVG charts (plotters, SVG backend: text is left to the SVG viewer, no font files needed).

use std::path::Path;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::{si, CaseResult, Status};
use crate::LockKind;

/// One colour per lock, the same in every chart.
pub fn lock_color(lock: &str) -> RGBColor {
    match LockKind::from_name(lock) {
        Some(LockKind::AsyncRwsem) => RGBColor(31, 119, 180),
        Some(LockKind::Tokio) => RGBColor(255, 127, 14),
        Some(LockKind::AsyncLock) => RGBColor(44, 160, 44),
        Some(LockKind::ParkingLot) => RGBColor(148, 103, 189),
        None => RGBColor(127, 127, 127),
    }
}

fn err(e: impl std::fmt::Display) -> String {
    format!("chart: {e}")
}

/// One bar group per workload, one bar per lock.
struct Bars<'a> {
    title: &'a str,
    y_desc: &'a str,
    groups: Vec<&'a str>,
    /// `(lock, value per group)`; `None` draws "n/a".
    series: Vec<(&'a str, Vec<Option<f64>>)>,
    /// Per series, per group: a `(low, high)` range drawn as a whisker through the bar (the
    /// lowest and highest round of a `--repeat` run). Empty: none.
    whiskers: Vec<Vec<Option<(f64, f64)>>>,
    /// The value bars start from (the axis bottom).
    base: f64,
    /// A horizontal reference line (1.0 for ratios).
    reference: Option<f64>,
    /// How a value is written above its bar.
    label: fn(f64) -> String,
}

fn draw_bars<Y>(path: &Path, bars: &Bars<'_>, y: Y) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let n = bars.groups.len().max(1);
    let width = (140 * n as u32).clamp(700, 1600);
    let root = SVGBackend::new(path, (width, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(bars.title, ("sans-serif", 22)).map_err(err)?;
    let (legend_row, body) = body.split_vertically(34);
    legend(&legend_row, bars.series.iter().map(|(l, _)| *l))?;
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .margin_top(4)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n as f64, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|v| trim_number(*v))
        .max_light_lines(1)
        .y_desc(bars.y_desc)
        .axis_desc_style(("sans-serif", 15))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(err)?;

    if let Some(r) = bars.reference {
        chart
            .draw_series(LineSeries::new(
                [(0.0, r), (n as f64, r)],
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?;
    }

    let m = bars.series.len().max(1) as f64;
    let slot = 0.84 / m;
    let value_style =
        TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    for (k, (lock, values)) in bars.series.iter().enumerate() {
        let color = lock_color(lock);
        let mut rects = Vec::new();
        let mut labels = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let x0 = i as f64 + 0.08 + k as f64 * slot;
            let x1 = x0 + slot * 0.9;
            match v {
                Some(v) => {
                    rects.push(Rectangle::new([(x0, bars.base), (x1, *v)], color.filled()));
                    labels.push(Text::new(
                        (bars.label)(*v),
                        ((x0 + x1) / 2.0, *v),
                        value_style.clone(),
                    ));
                }
                None => labels.push(Text::new(
                    "n/a".to_string(),
                    ((x0 + x1) / 2.0, bars.base),
                    value_style.clone(),
                )),
            }
        }
        chart.draw_series(rects).map_err(err)?;
        if let Some(ranges) = bars.whiskers.get(k) {
            let mut lines = Vec::new();
            for (i, range) in ranges.iter().enumerate() {
                let Some((lo, hi)) = *range else { continue };
                let x0 = i as f64 + 0.08 + k as f64 * slot;
                let xm = x0 + slot * 0.45;
                let cap = slot * 0.2;
                let ink = BLACK.mix(0.7).stroke_width(1);
                lines.push(PathElement::new([(xm, lo), (xm, hi)], ink));
                lines.push(PathElement::new([(xm - cap, lo), (xm + cap, lo)], ink));
                lines.push(PathElement::new([(xm - cap, hi), (xm + cap, hi)], ink));
            }
            chart.draw_series(lines).map_err(err)?;
        }
        chart.draw_series(labels).map_err(err)?;
    }

    // Workload names under each group.
    let name_style =
        TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, g) in bars.groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, bars.base));
        root.draw(&Text::new(g.to_string(), (px, py + 8), name_style.clone()))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// A number without float noise: `0.6`, `2`, `0.05`.
fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A one-row legend: a colour swatch and the lock's name, left to right.
fn legend<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    locks: impl Iterator<Item = &'a str>,
) -> Result<(), String> {
    let mut x = 90;
    for lock in locks {
        let color = lock_color(lock);
        area.draw(&Rectangle::new([(x, 10), (x + 14, 24)], color.filled()))
            .map_err(err)?;
        area.draw(&Text::new(
            lock.to_string(),
            (x + 20, 10),
            ("sans-serif", 15).into_font(),
        ))
        .map_err(err)?;
        x += 40 + 9 * lock.len() as i32;
    }
    Ok(())
}

fn workloads_and_locks(results: &[CaseResult]) -> (Vec<&str>, Vec<&str>) {
    let mut groups: Vec<&str> = Vec::new();
    let mut locks: Vec<&str> = Vec::new();
    for r in results {
        if !groups.contains(&r.workload.as_str()) {
            groups.push(&r.workload);
        }
        if !locks.contains(&r.lock.as_str()) {
            locks.push(&r.lock);
        }
    }
    (groups, locks)
}

fn pick(
    results: &[CaseResult],
    w: &str,
    l: &str,
    f: fn(&CaseResult) -> Option<f64>,
) -> Option<f64> {
    results
        .iter()
        .find(|r| r.workload == w && r.lock == l && r.status == Status::Ok)
        .and_then(f)
}

/// The main chart: throughput relative to tokio, per workload, per lock (log scale).
pub fn ratio_chart(path: &Path, results: &[CaseResult], subtitle: &str) -> Result<(), String> {
    let (groups, locks) = workloads_and_locks(results);
    let series: Vec<(&str, Vec<Option<f64>>)> = locks
        .iter()
        .map(|l| {
            let v = groups
                .iter()
                .map(|w| pick(results, w, l, |r| r.ratio_to_tokio))
                .collect();
            (*l, v)
        })
        .collect();
    let whiskers: Vec<Vec<Option<(f64, f64)>>> = locks
        .iter()
        .map(|l| {
            groups
                .iter()
                .map(|w| {
                    results
                        .iter()
                        .find(|r| r.workload == *w && r.lock == *l && r.status == Status::Ok)
                        .and_then(|r| r.spread?.ratio_to_tokio_range)
                        .filter(|(lo, hi)| *lo > 0.0 && hi.is_finite())
                })
                .collect()
        })
        .collect();
    let values = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .chain(
            whiskers
                .iter()
                .flatten()
                .flatten()
                .flat_map(|&(lo, hi)| [lo, hi]),
        );
    let (lo, hi) = values.fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let base = (lo / 1.6).max(1e-3);
    let title = format!("Throughput relative to tokio::sync::RwLock ({subtitle})");
    draw_bars(
        path,
        &Bars {
            title: &title,
            y_desc: "ops/s ÷ tokio's ops/s (log scale)",
            groups,
            series,
            whiskers,
            base,
            reference: Some(1.0),
            label: |v| {
                if v >= 10.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.1}")
                }
            },
        },
        (base..hi * 1.8).log_scale(),
    )
}

/// Fairness per workload per lock: fewest operations of one task over the mean (min over
/// readers and writers).
pub fn fairness_chart(path: &Path, results: &[CaseResult], subtitle: &str) -> Result<(), String> {
    let (groups, locks) = workloads_and_locks(results);
    let groups: Vec<&str> = groups
        .into_iter()
        .filter(|w| {
            results
                .iter()
                .any(|r| r.workload == *w && r.fairness.is_some())
        })
        .collect();
    let series: Vec<(&str, Vec<Option<f64>>)> = locks
        .iter()
        .map(|l| {
            let v = groups
                .iter()
                .map(|w| pick(results, w, l, |r| r.fairness))
                .collect();
            (*l, v)
        })
        .collect();
    let title = format!("Fairness: per-task min ÷ mean operations ({subtitle})");
    draw_bars(
        path,
        &Bars {
            title: &title,
            y_desc: "min ÷ mean ops per task (1 = fair)",
            groups,
            series,
            whiskers: Vec::new(),
            base: 0.0,
            reference: None,
            label: |v| format!("{v:.2}"),
        },
        0f64..1.15,
    )
}

/// Line colours of the sweep chart, one per writer spin budget.
const SWEEP_PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
];

/// One point of the policy sweep.
#[derive(Clone, Debug)]
pub struct SweepPoint {
    /// Workload name.
    pub workload: String,
    /// The line it belongs to: the spin cap and whether the budget is learned.
    pub series: String,
    /// Handoff timeout label ("0", "250us", "4ms", "off").
    pub handoff: String,
    /// Fairness (x).
    pub fairness: f64,
    /// Throughput (y).
    pub ops_per_s: f64,
}

/// The sweep chart: one panel per workload, throughput against fairness, one line per
/// spin setting through the handoff timeouts; reference locks as single points.
pub fn sweep_chart(
    path: &Path,
    points: &[SweepPoint],
    references: &[CaseResult],
    subtitle: &str,
) -> Result<(), String> {
    let mut workloads: Vec<&str> = Vec::new();
    for p in points {
        if !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    let n = workloads.len().max(1);
    let root = SVGBackend::new(path, ((560 * n as u32).max(900), 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(64);
    top.draw(&Text::new(
        format!(
            "async-rwsem policy sweep: throughput vs fairness, points labelled with the \
             handoff timeout ({subtitle})"
        ),
        (12, 8),
        ("sans-serif", 20).into_font(),
    ))
    .map_err(err)?;
    let panels = body.split_evenly((1, n));
    let mut spins: Vec<&str> = Vec::new();
    for p in points {
        if !spins.contains(&p.series.as_str()) {
            spins.push(&p.series);
        }
    }
    let mut ref_locks: Vec<&str> = Vec::new();
    for r in references {
        if !ref_locks.contains(&r.lock.as_str()) {
            ref_locks.push(&r.lock);
        }
    }
    // One legend for all panels, under the title.
    let mut x = 12;
    for (k, spin) in spins.iter().enumerate() {
        let color = SWEEP_PALETTE[k % SWEEP_PALETTE.len()];
        top.draw(&PathElement::new(
            [(x, 46), (x + 18, 46)],
            color.stroke_width(2),
        ))
        .map_err(err)?;
        top.draw(&Circle::new((x + 9, 46), 3, color.filled()))
            .map_err(err)?;
        let text = spin.to_string();
        x += 26;
        top.draw(&Text::new(
            text.clone(),
            (x, 39),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(err)?;
        x += 8 * text.len() as i32 + 20;
    }
    for lock in &ref_locks {
        let color = lock_color(lock);
        top.draw(&TriangleMarker::new((x + 7, 46), 7, color.filled()))
            .map_err(err)?;
        x += 20;
        top.draw(&Text::new(
            lock.to_string(),
            (x, 39),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(err)?;
        x += 8 * lock.len() as i32 + 20;
    }
    for (panel, w) in panels.iter().zip(&workloads) {
        let pts: Vec<&SweepPoint> = points.iter().filter(|p| p.workload == *w).collect();
        let refs: Vec<&CaseResult> = references
            .iter()
            .filter(|r| r.workload == *w && r.status == Status::Ok)
            .collect();
        let ymax = pts
            .iter()
            .map(|p| p.ops_per_s)
            .chain(refs.iter().filter_map(|r| r.total_ops_per_s))
            .fold(1.0f64, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .caption(*w, ("sans-serif", 17))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..1.05, 0f64..ymax)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("fairness: per-task min ÷ mean")
            .y_desc("ops/s")
            .max_light_lines(1)
            .y_label_formatter(&|v| si(*v))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        for (k, spin) in spins.iter().enumerate() {
            let color = SWEEP_PALETTE[k % SWEEP_PALETTE.len()];
            let line: Vec<(f64, f64)> = pts
                .iter()
                .filter(|p| p.series == *spin)
                .map(|p| (p.fairness, p.ops_per_s))
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(err)?;
            chart
                .draw_series(
                    line.iter()
                        .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
                )
                .map_err(err)?;
            let label_style = TextStyle::from(("sans-serif", 10).into_font()).color(&color);
            chart
                .draw_series(pts.iter().filter(|p| p.series == *spin).map(|p| {
                    Text::new(
                        p.handoff.clone(),
                        (p.fairness, p.ops_per_s),
                        label_style.clone(),
                    )
                }))
                .map_err(err)?;
        }
        for r in refs {
            let (Some(f), Some(y)) = (r.fairness, r.total_ops_per_s) else {
                continue;
            };
            let color = lock_color(&r.lock);
            chart
                .draw_series(std::iter::once(TriangleMarker::new(
                    (f, y),
                    7,
                    color.filled(),
                )))
                .map_err(err)?;
        }
    }
    root.present().map_err(err)?;
    Ok(())
}
