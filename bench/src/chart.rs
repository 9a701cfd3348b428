//! SVG charts (plotters, SVG backend: text is left to the SVG viewer, no font files needed).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::report::si;
use crate::results::{CaseResult, Status};
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

/// What "n/a" means in every chart: the sync lock in a workload that awaits in the section.
pub const NA_NOTE: &str = "n/a: parking_lot is not run where the section awaits (a sync lock \
                           cannot be held across .await)";

/// One bar group per workload, one bar per lock, on a linear axis from 0.
struct Bars<'a> {
    title: &'a str,
    y_desc: &'a str,
    groups: Vec<&'a str>,
    /// `(lock, value per group)`; `None` draws "n/a".
    series: Vec<(&'a str, Vec<Option<f64>>)>,
    /// Per series, per group: a `(low, high)` range drawn as a whisker through the bar (the
    /// lowest and highest round of a `--repeat` run). Empty: none.
    whiskers: Vec<Vec<Option<(f64, f64)>>>,
    /// The value bars grow from, up or down (1.0 for ratios: the reference; 0 otherwise).
    base: f64,
    /// A horizontal reference line and its legend entry (1.0: tokio).
    reference: Option<(f64, String)>,
    /// The top of the axis.
    y_max: f64,
    /// How a value is written at the end of its bar.
    label: fn(f64) -> String,
}

/// Tick spacing for a linear axis from 0 to `max`: 0.1, 0.25, 0.5, 1, ... so that about 8
/// to 16 ticks are labelled.
fn tick_step(max: f64) -> f64 {
    [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0]
        .into_iter()
        .find(|s| max / s <= 16.0)
        .unwrap_or(max / 10.0)
}

fn draw_bars(path: &Path, bars: &Bars<'_>) -> Result<(), String> {
    let n = bars.groups.len().max(1);
    let width = (130 * n as u32).clamp(1100, 1600);
    let root = SVGBackend::new(path, (width, 660)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(bars.title, ("sans-serif", 20)).map_err(err)?;
    let (legend_rows, body) = body.split_vertically(58);
    let has_na = bars
        .series
        .iter()
        .any(|(_, v)| v.iter().any(Option::is_none));
    let has_whiskers = bars.whiskers.iter().flatten().any(Option::is_some);
    legend(
        &legend_rows,
        bars.series.iter().map(|(l, _)| *l),
        bars.reference.as_ref().map(|(_, label)| label.as_str()),
        has_whiskers,
        has_na,
    )?;
    let step = tick_step(bars.y_max);
    let y_max = (bars.y_max / step).ceil() * step;
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .margin_top(4)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n as f64, 0f64..y_max)
        .map_err(err)?;
    // The mesh draws the axes only: every tick is labelled at the step chosen here, where
    // plotters would pick coarser ones.
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(0)
        .y_labels(0)
        .y_desc(bars.y_desc)
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    let tick_style =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    for k in 0..=(y_max / step).round() as usize {
        let t = k as f64 * step;
        chart
            .draw_series(LineSeries::new(
                [(0.0, t), (n as f64, t)],
                BLACK.mix(0.12).stroke_width(1),
            ))
            .map_err(err)?;
        let (px, py) = chart.backend_coord(&(0.0, t));
        root.draw(&PathElement::new(
            [(px - 5, py), (px, py)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
        root.draw(&Text::new(trim_number(t), (px - 8, py), tick_style.clone()))
            .map_err(err)?;
    }

    let m = bars.series.len().max(1) as f64;
    let slot = 0.84 / m;
    let above =
        TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    let below =
        TextStyle::from(("sans-serif", 11).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (k, (lock, values)) in bars.series.iter().enumerate() {
        let color = lock_color(lock);
        let mut rects = Vec::new();
        // (text, anchor in chart coordinates, above the anchor?)
        let mut labels: Vec<(String, (f64, f64), bool)> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let x0 = i as f64 + 0.08 + k as f64 * slot;
            let x1 = x0 + slot * 0.9;
            let xm = (x0 + x1) / 2.0;
            // A whisker's end, if any, so that the label clears it.
            let range = bars
                .whiskers
                .get(k)
                .and_then(|w| w.get(i).copied().flatten());
            match v {
                Some(v) => {
                    rects.push(Rectangle::new([(x0, bars.base), (x1, *v)], color.filled()));
                    if *v >= bars.base {
                        let top = range.map_or(*v, |(_, hi)| hi.max(*v));
                        labels.push(((bars.label)(*v), (xm, top), true));
                    } else {
                        let bottom = range.map_or(*v, |(lo, _)| lo.min(*v));
                        labels.push(((bars.label)(*v), (xm, bottom), false));
                    }
                }
                None => labels.push(("n/a".to_string(), (xm, bars.base), true)),
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
                let ink = BLACK.stroke_width(1);
                lines.push(PathElement::new([(xm, lo), (xm, hi)], ink));
                lines.push(PathElement::new([(xm - cap, lo), (xm + cap, lo)], ink));
                lines.push(PathElement::new([(xm - cap, hi), (xm + cap, hi)], ink));
            }
            chart.draw_series(lines).map_err(err)?;
        }
        // Drawn in pixels, 3 px clear of the bar's end or whisker.
        for (text, at, up) in labels {
            let (px, py) = chart.backend_coord(&at);
            let (py, style) = if up {
                (py - 3, &above)
            } else {
                (py + 3, &below)
            };
            root.draw(&Text::new(text, (px, py), style.clone()))
                .map_err(err)?;
        }
    }

    // The reference line last, over the bars.
    if let Some((r, _)) = bars.reference {
        chart
            .draw_series(LineSeries::new(
                [(0.0, r), (n as f64, r)],
                BLACK.stroke_width(2),
            ))
            .map_err(err)?;
    }

    // Workload names under each group.
    let name_style =
        TextStyle::from(("sans-serif", 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, g) in bars.groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
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

/// The legend: a colour swatch and the lock's name per series on the first row; on the
/// second, what the reference line, the whiskers and "n/a" mean.
fn legend<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    locks: impl Iterator<Item = &'a str>,
    reference: Option<&str>,
    whiskers: bool,
    na: bool,
) -> Result<(), String> {
    let font = ("sans-serif", 14).into_font();
    let mut x = 90;
    for lock in locks {
        let color = lock_color(lock);
        area.draw(&Rectangle::new([(x, 6), (x + 14, 20)], color.filled()))
            .map_err(err)?;
        area.draw(&Text::new(lock.to_string(), (x + 20, 6), font.clone()))
            .map_err(err)?;
        x += 40 + 8 * lock.len() as i32;
    }
    if let Some(label) = reference {
        area.draw(&PathElement::new(
            [(x, 13), (x + 24, 13)],
            BLACK.stroke_width(2),
        ))
        .map_err(err)?;
        area.draw(&Text::new(label.to_string(), (x + 30, 6), font.clone()))
            .map_err(err)?;
    }
    let mut x = 90;
    let y = 34;
    if whiskers {
        let ink = BLACK.stroke_width(1);
        area.draw(&PathElement::new([(x + 7, y), (x + 7, y + 14)], ink))
            .map_err(err)?;
        area.draw(&PathElement::new([(x + 3, y), (x + 11, y)], ink))
            .map_err(err)?;
        area.draw(&PathElement::new([(x + 3, y + 14), (x + 11, y + 14)], ink))
            .map_err(err)?;
        let text = "lowest to highest round (bars and numbers: the median)";
        area.draw(&Text::new(text, (x + 20, y), font.clone()))
            .map_err(err)?;
        x += 40 + 7 * text.len() as i32;
    }
    if na {
        area.draw(&Text::new(NA_NOTE, (x, y), font.clone()))
            .map_err(err)?;
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

/// The main chart: throughput relative to tokio's in the same workload, per workload, per
/// lock, on a linear axis. tokio is the reference line at 1.0 rather than a bar; the other
/// locks' bars grow from that line, up (faster than tokio) or down (slower). With
/// `--repeat`, a whisker spans the lowest to the highest round's ratio.
pub fn ratio_chart(path: &Path, results: &[CaseResult], subtitle: &str) -> Result<(), String> {
    let (groups, locks) = workloads_and_locks(results);
    let tokio = LockKind::Tokio.name();
    let locks: Vec<&str> = locks.into_iter().filter(|l| *l != tokio).collect();
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
                        .filter(|(lo, hi)| *lo >= 0.0 && hi.is_finite())
                })
                .collect()
        })
        .collect();
    let hi = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .chain(whiskers.iter().flatten().flatten().map(|&(_, hi)| hi))
        .fold(1.0f64, f64::max);
    let title = format!("Throughput relative to tokio::sync::RwLock ({subtitle})");
    draw_bars(
        path,
        &Bars {
            title: &title,
            y_desc: "ops/s ÷ tokio's ops/s in the same workload",
            groups,
            series,
            whiskers,
            base: 1.0,
            reference: Some((1.0, "tokio = 1.0 (above: faster, below: slower)".into())),
            y_max: hi * 1.08,
            label: |v| format!("{v:.2}"),
        },
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
            y_max: 1.1,
            label: |v| format!("{v:.2}"),
        },
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
