//! `--sweep`: async-rwsem alone over a grid of handoff timeouts and spin settings, on the
//! workloads where the policy matters (by default the kernel's two handoff measurements
//! and filebench's randomrw), with reference locks as single points. A spin setting is a
//! cap for both readers and writers, learned within it (the default rule) or spent whole
//! every time (a fixed budget, `adaptive_spin(false)`: the rule the learning replaced).
//! Written as `sweep.json` and `sweep.svg` (throughput against fairness, one line per spin
//! setting).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::chart::{self, SweepPoint};
use crate::data::Shared;
use crate::report;
use crate::results::{CaseResult, ClassStats, Machine, Status};
use crate::runner::{async_task, run_case, sync_task, Measured, Timing};
use crate::workloads::{Workload, WorkloadId};
use crate::{locks, machine, run_one, summary, write_json, Cli, LockKind, Progress};

/// The policy type of the lock under test.
pub type RwsemPolicy = async_rwsem::Policy;

/// The default policy, for the JSON.
pub fn default_policy_text() -> String {
    format!("{:?}", RwsemPolicy::default())
}

/// Runs a workload on async-rwsem with `policy` (default when `None`).
pub fn run_rwsem(
    w: &Workload,
    threads: usize,
    timing: Timing,
    policy: Option<RwsemPolicy>,
    awaits: bool,
) -> Result<Measured, String> {
    let policy = policy.unwrap_or_default();
    let make = move || locks::Rwsem::with_policy(Shared::new(), policy);
    if awaits {
        run_case(w, threads, timing, make, async_task)
    } else {
        run_case(w, threads, timing, make, sync_task)
    }
}

/// Handoff timeouts swept (`Duration::MAX`: handoff off).
const HANDOFFS: [Duration; 7] = [
    Duration::ZERO,
    Duration::from_micros(250),
    Duration::from_micros(500),
    Duration::from_millis(1),
    Duration::from_millis(4),
    Duration::from_millis(16),
    Duration::MAX,
];

/// Spin caps swept (readers' and writers'), each learned and fixed.
const SPINS: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_micros(5),
    Duration::from_micros(10),
    Duration::from_micros(25),
];

fn handoff_label(d: Duration) -> String {
    if d == Duration::MAX {
        "off".into()
    } else if d.is_zero() {
        "0".into()
    } else if d < Duration::from_millis(1) {
        format!("{}us", d.as_micros())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// One grid point.
#[derive(Debug, Serialize, Deserialize)]
pub struct SweepRecord {
    /// Workload name.
    pub workload: String,
    /// `Policy::writer_spin` and `Policy::reader_spin`, microseconds.
    pub writer_spin_us: u64,
    /// `Policy::adaptive_spin` (absent in older files: learned).
    #[serde(default = "learned")]
    pub adaptive_spin: bool,
    /// `Policy::handoff_timeout`, microseconds; `null` = off (`Duration::MAX`).
    pub handoff_timeout_us: Option<u64>,
    /// The figures.
    pub result: CaseResult,
}

fn learned() -> bool {
    true
}

/// The line a point belongs to.
fn series(spin_us: u64, adaptive: bool) -> String {
    match (spin_us, adaptive) {
        (0, _) => "no spin".into(),
        (us, true) => format!("spin {us} us, learned"),
        (us, false) => format!("spin {us} us, fixed"),
    }
}

/// The spin settings of the grid: every cap learned, and every non-zero cap fixed.
fn spin_settings() -> Vec<(Duration, bool)> {
    SPINS
        .iter()
        .flat_map(|&spin| {
            let fixed = (!spin.is_zero()).then_some((spin, false));
            std::iter::once((spin, true)).chain(fixed)
        })
        .collect()
}

/// The whole sweep file.
#[derive(Debug, Serialize, Deserialize)]
pub struct SweepReport {
    /// Where it ran.
    pub machine: Machine,
    /// Window per point, seconds.
    pub duration_s: f64,
    /// Warm-up per point, seconds.
    pub warmup_s: f64,
    /// async-rwsem's default policy (Debug form), the base of every point.
    pub base_policy: String,
    /// The grid.
    pub points: Vec<SweepRecord>,
    /// Reference locks on the same workloads.
    pub references: Vec<CaseResult>,
}

/// Runs the sweep; `Ok(false)` when some point broke an invariant or hung.
pub fn sweep(cli: &Cli) -> Result<bool, String> {
    let threads = cli.threads();
    let timing = cli.timing(Duration::from_secs(1), Duration::from_millis(300));
    let workloads = cli.selected_workloads(&[
        WorkloadId::Writers240,
        WorkloadId::Mixed40x40,
        WorkloadId::RandomRw8x8,
    ]);
    let refs: Vec<LockKind> = if cli.locks.is_empty() {
        vec![LockKind::Tokio, LockKind::ParkingLot]
    } else {
        cli.selected_locks()
            .into_iter()
            .filter(|l| *l != LockKind::AsyncRwsem)
            .collect()
    };
    let grid = HANDOFFS.len() * spin_settings().len();
    eprintln!(
        "sweep: {} workload(s) x {grid} policies (+{} reference lock(s)), {threads} worker \
         thread(s), {:.2}s window + {:.2}s warm-up per point",
        workloads.len(),
        refs.len(),
        timing.duration.as_secs_f64(),
        timing.warmup.as_secs_f64()
    );
    let mut progress = Progress::new((workloads.len() * (grid + refs.len())) as u64);
    let mut points = Vec::new();
    let mut references = Vec::new();
    for &wid in &workloads {
        let w = cli.workload(wid, threads);
        for &lock in &refs {
            let what = format!("{} / {}", wid.name(), lock.name());
            progress.start(&what);
            let r = run_one(&w, lock, threads, timing, None);
            progress.finish(&what, &summary(&r));
            references.push(r);
        }
        for (spin, adaptive) in spin_settings() {
            for handoff in HANDOFFS {
                let what = format!(
                    "{} / {} handoff {}",
                    wid.name(),
                    series(spin.as_micros() as u64, adaptive),
                    handoff_label(handoff)
                );
                progress.start(&what);
                let policy = RwsemPolicy::new()
                    .writer_spin(spin)
                    .reader_spin(spin)
                    .adaptive_spin(adaptive)
                    .handoff_timeout(handoff);
                let r = run_one(&w, LockKind::AsyncRwsem, threads, timing, Some(policy));
                progress.finish(&what, &summary(&r));
                points.push(SweepRecord {
                    workload: wid.name().into(),
                    writer_spin_us: spin.as_micros() as u64,
                    adaptive_spin: adaptive,
                    handoff_timeout_us: (handoff != Duration::MAX)
                        .then_some(handoff.as_micros() as u64),
                    result: r,
                });
            }
        }
    }
    progress.close();
    let failed = points.iter().any(|p| p.result.status == Status::Error)
        || references.iter().any(|r| r.status == Status::Error);

    println!(
        "{:<14} {:>20} {:>8} {:>9} {:>6} {:>17} {:>17} {:>22}",
        "workload",
        "spin",
        "handoff",
        "ops/s",
        "fair",
        "r/task min/mean/max",
        "w/task min/mean/max",
        "wait p50/p99/max"
    );
    let row = |label: &str, spin: &str, handoff: &str, r: &CaseResult| {
        let task = |c: &Option<ClassStats>| {
            c.map(|c| {
                format!(
                    "{}/{}/{}",
                    report::si(c.per_task_min as f64),
                    report::si(c.per_task_mean),
                    report::si(c.per_task_max as f64)
                )
            })
            .unwrap_or_else(|| "-".into())
        };
        if r.status != Status::Ok {
            println!("{label:<14} {spin:>20} {handoff:>8} {}", summary(r));
            return;
        }
        println!(
            "{:<14} {:>20} {:>8} {:>9} {:>6} {:>17} {:>17} {:>22}",
            label,
            spin,
            handoff,
            report::si(r.total_ops_per_s.unwrap_or(0.0)),
            r.fairness
                .map(|f| format!("{f:.2}"))
                .unwrap_or_else(|| "-".into()),
            task(&r.reader),
            task(&r.writer),
            r.wait_ns
                .map(|w| format!(
                    "{}/{}/{}",
                    report::ns(w.p50),
                    report::ns(w.p99),
                    report::ns(w.max)
                ))
                .unwrap_or_default()
        );
    };
    for &wid in &workloads {
        for r in references.iter().filter(|r| r.workload == wid.name()) {
            row(wid.name(), &r.lock, "", r);
        }
        for p in points.iter().filter(|p| p.workload == wid.name()) {
            let handoff = p
                .handoff_timeout_us
                .map(|us| handoff_label(Duration::from_micros(us)))
                .unwrap_or_else(|| "off".into());
            row(
                wid.name(),
                &series(p.writer_spin_us, p.adaptive_spin),
                &handoff,
                &p.result,
            );
        }
        println!();
    }

    let report = SweepReport {
        machine: machine(threads),
        duration_s: timing.duration.as_secs_f64(),
        warmup_s: timing.warmup.as_secs_f64(),
        base_policy: default_policy_text(),
        points,
        references,
    };
    let json = cli
        .json
        .clone()
        .unwrap_or_else(|| cli.out.join("sweep.json"));
    write_json(&json, &report)?;
    let svg = draw(&report, &cli.out)?;
    eprintln!("wrote {} and {}", json.display(), svg.display());
    Ok(!failed)
}

/// Draws `sweep.svg` into `out`.
fn draw(report: &SweepReport, out: &Path) -> Result<PathBuf, String> {
    let chart_points: Vec<SweepPoint> = report
        .points
        .iter()
        .filter_map(|p| {
            Some(SweepPoint {
                workload: p.workload.clone(),
                series: series(p.writer_spin_us, p.adaptive_spin),
                handoff: p
                    .handoff_timeout_us
                    .map(|us| handoff_label(Duration::from_micros(us)))
                    .unwrap_or_else(|| "off".into()),
                fairness: p.result.fairness?,
                ops_per_s: p.result.total_ops_per_s?,
            })
        })
        .collect();
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let svg = out.join("sweep.svg");
    let subtitle = format!(
        "{} threads, {:.1}s per point",
        report.machine.threads, report.duration_s
    );
    chart::sweep_chart(&svg, &chart_points, &report.references, &subtitle)?;
    Ok(svg)
}

/// `--replot` of a sweep file: redraws `sweep.svg`.
pub fn replot(report: &SweepReport, out: &Path) -> Result<bool, String> {
    let svg = draw(report, out)?;
    eprintln!("wrote {}", svg.display());
    Ok(true)
}
