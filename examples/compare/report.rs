//! Figures from a run: the JSON schema, the table, and the sanity check CI runs on the JSON.

use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::runner::{new_histogram, Measured, TaskOut};
use crate::workloads::{Role, Workload, WorkloadId};
use crate::LockKind;

/// The whole JSON file.
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    /// Where and how it ran.
    pub machine: Machine,
    /// What was asked for.
    pub config: Config,
    /// One entry per (workload, lock), in run order.
    pub results: Vec<CaseResult>,
}

/// The machine and the build.
#[derive(Debug, Serialize, Deserialize)]
pub struct Machine {
    /// `available_parallelism()`.
    pub cores: usize,
    /// Tokio worker threads per runtime.
    pub threads: usize,
    /// CPU model from /proc/cpuinfo, if readable.
    pub cpu: Option<String>,
    /// `std::env::consts::OS` / `ARCH`.
    pub os: String,
    /// `git rev-parse --short HEAD`, if it worked (with `-dirty` when the tree is).
    pub git_rev: Option<String>,
    /// Seconds since the epoch when the run started.
    pub started_unix: u64,
}

/// The run's settings.
#[derive(Debug, Serialize, Deserialize)]
pub struct Config {
    /// The measured window per case, seconds.
    pub duration_s: f64,
    /// Warm-up before each window, seconds.
    pub warmup_s: f64,
    /// `--quick`.
    pub quick: bool,
    /// The workloads selected.
    pub workloads: Vec<String>,
    /// The locks selected.
    pub locks: Vec<String>,
    /// async_rwsem's policy (Debug form).
    pub rwsem_policy: String,
    /// Busy-loop iterations per microsecond (the calibration sections are built from).
    pub busy_iters_per_us: u64,
}

/// `ok`, `n/a` (a sync lock and a workload that awaits in the section) or `error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Measured.
    #[serde(rename = "ok")]
    Ok,
    /// Does not apply.
    #[serde(rename = "n/a")]
    NotApplicable,
    /// The lock broke an invariant or hung.
    #[serde(rename = "error")]
    Error,
}

/// Acquire wait percentiles, ns.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct WaitStats {
    /// How many acquires were timed.
    pub samples: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Worst.
    pub max: u64,
}

impl WaitStats {
    fn of(h: &Histogram<u64>) -> Self {
        Self {
            samples: h.len(),
            p50: h.value_at_quantile(0.50),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        }
    }
}

/// Figures for one class of operations (reads or writes).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct ClassStats {
    /// Tasks that do this class of operation.
    pub tasks: usize,
    /// Operations of this class in the window.
    pub ops: u64,
    /// `ops / window`.
    pub ops_per_s: f64,
    /// Fewest operations one task did (the kernel's fairness figure: min/mean/max).
    pub per_task_min: u64,
    /// Mean operations per task.
    pub per_task_mean: f64,
    /// Most operations one task did.
    pub per_task_max: u64,
    /// Acquire waits of this class.
    pub wait_ns: WaitStats,
}

/// One (workload, lock) case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    /// Workload name.
    pub workload: String,
    /// Lock name.
    pub lock: String,
    /// Whether it was measured.
    pub status: Status,
    /// What went wrong, for `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tasks spawned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<usize>,
    /// Measured window, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// All operations per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_ops_per_s: Option<f64>,
    /// Read figures (tasks that read; the long reader is counted apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader: Option<ClassStats>,
    /// Write figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<ClassStats>,
    /// Holds completed by the long reader (long-reader workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_reader_ops: Option<u64>,
    /// All acquire waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ns: Option<WaitStats>,
    /// Lowest `per_task_min / per_task_mean` over the classes (1 = perfectly fair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<f64>,
    /// `total_ops_per_s` over tokio's in the same workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to_tokio: Option<f64>,
}

impl CaseResult {
    fn empty(workload: WorkloadId, lock: &str, status: Status) -> Self {
        Self {
            workload: workload.name().into(),
            lock: lock.into(),
            status,
            error: None,
            tasks: None,
            elapsed_s: None,
            total_ops_per_s: None,
            reader: None,
            writer: None,
            long_reader_ops: None,
            wait_ns: None,
            fairness: None,
            ratio_to_tokio: None,
        }
    }

    /// A sync lock on a workload that awaits in the section.
    pub fn not_applicable(workload: WorkloadId, lock: &str) -> Self {
        Self::empty(workload, lock, Status::NotApplicable)
    }

    /// A case that failed.
    pub fn error(workload: WorkloadId, lock: &str, error: String) -> Self {
        Self {
            error: Some(error),
            ..Self::empty(workload, lock, Status::Error)
        }
    }

    /// Figures from a measured case.
    pub fn measured(workload: &Workload, lock: &str, m: &Measured) -> Self {
        let secs = m.elapsed.as_secs_f64().max(1e-9);
        let class = |pick: fn(Role) -> bool,
                     ops: fn(&TaskOut) -> u64,
                     wait: fn(&TaskOut) -> &Histogram<u64>| {
            let tasks: Vec<&TaskOut> = m.tasks.iter().filter(|t| pick(t.role)).collect();
            if tasks.is_empty() {
                return None;
            }
            let counts: Vec<u64> = tasks.iter().map(|t| ops(t)).collect();
            let total: u64 = counts.iter().sum();
            let mut h = new_histogram();
            for t in &tasks {
                // Same bounds everywhere: adding cannot fail.
                h.add(wait(t)).expect("histograms with equal bounds");
            }
            Some(ClassStats {
                tasks: tasks.len(),
                ops: total,
                ops_per_s: total as f64 / secs,
                per_task_min: counts.iter().copied().min().unwrap_or(0),
                per_task_mean: total as f64 / tasks.len() as f64,
                per_task_max: counts.iter().copied().max().unwrap_or(0),
                wait_ns: WaitStats::of(&h),
            })
        };
        let reader = class(Role::reads, |t| t.reads, |t| &t.read_wait);
        let writer = class(Role::writes, |t| t.writes, |t| &t.write_wait);
        let long: Vec<&TaskOut> = m
            .tasks
            .iter()
            .filter(|t| matches!(t.role, Role::LongReader { .. }))
            .collect();
        let long_reader_ops = (!long.is_empty()).then(|| long.iter().map(|t| t.reads).sum());
        let mut all = new_histogram();
        for t in &m.tasks {
            all.add(&t.read_wait).expect("histograms with equal bounds");
            all.add(&t.write_wait)
                .expect("histograms with equal bounds");
        }
        let total_ops: u64 = m.tasks.iter().map(|t| t.reads + t.writes).sum();
        let fairness = [reader, writer]
            .iter()
            .flatten()
            .filter(|c| c.tasks > 1)
            .map(|c| {
                if c.per_task_mean > 0.0 {
                    c.per_task_min as f64 / c.per_task_mean
                } else {
                    0.0
                }
            })
            .reduce(f64::min);
        Self {
            tasks: Some(m.tasks.len()),
            elapsed_s: Some(secs),
            total_ops_per_s: Some(total_ops as f64 / secs),
            reader,
            writer,
            long_reader_ops,
            wait_ns: Some(WaitStats::of(&all)),
            fairness,
            ..Self::empty(workload.id, lock, Status::Ok)
        }
    }
}

/// Fills `ratio_to_tokio` from tokio's result in the same workload.
pub fn fill_ratios(results: &mut [CaseResult]) {
    let tokio_name = LockKind::Tokio.name();
    let base: Vec<(String, f64)> = results
        .iter()
        .filter(|r| r.lock == tokio_name)
        .filter_map(|r| Some((r.workload.clone(), r.total_ops_per_s?)))
        .collect();
    for r in results.iter_mut() {
        let b = base.iter().find(|(w, _)| *w == r.workload).map(|(_, b)| *b);
        r.ratio_to_tokio = match (r.total_ops_per_s, b) {
            (Some(x), Some(b)) if b > 0.0 => Some(x / b),
            _ => None,
        };
    }
}

/// `1234567.0` as `1.23M`.
pub fn si(x: f64) -> String {
    let (v, unit) = if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    if v >= 100.0 || unit.is_empty() {
        format!("{v:.0}{unit}")
    } else if v >= 10.0 {
        format!("{v:.1}{unit}")
    } else {
        format!("{v:.2}{unit}")
    }
}

/// Nanoseconds as `850ns`, `12us`, `4.1ms`, `1.2s`.
pub fn ns(x: u64) -> String {
    let f = x as f64;
    if x < 1_000 {
        format!("{x}ns")
    } else if x < 1_000_000 {
        format!("{:.0}us", f / 1e3)
    } else if x < 1_000_000_000 {
        format!("{:.1}ms", f / 1e6)
    } else {
        format!("{:.1}s", f / 1e9)
    }
}

fn class_cells(c: &Option<ClassStats>) -> (String, String) {
    match c {
        Some(c) => (
            si(c.ops_per_s),
            format!(
                "{}/{}/{}",
                si(c.per_task_min as f64),
                si(c.per_task_mean),
                si(c.per_task_max as f64)
            ),
        ),
        None => ("-".into(), "-".into()),
    }
}

/// The table printed on stdout.
pub fn table(results: &[CaseResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<18} {:<12} {:>8} {:>7} {:>8} {:>17} {:>8} {:>17} {:>22} {:>5}",
        "workload",
        "lock",
        "ops/s",
        "x tokio",
        "reads/s",
        "r/task min/mean/max",
        "writes/s",
        "w/task min/mean/max",
        "wait p50/p99/max",
        "fair"
    );
    let mut last = String::new();
    for r in results {
        if r.workload != last && !last.is_empty() {
            s.push('\n');
        }
        last.clone_from(&r.workload);
        match r.status {
            Status::Ok => {
                let (rops, rtask) = class_cells(&r.reader);
                let (wops, wtask) = class_cells(&r.writer);
                let wait = r
                    .wait_ns
                    .map(|w| format!("{}/{}/{}", ns(w.p50), ns(w.p99), ns(w.max)))
                    .unwrap_or_default();
                let _ = writeln!(
                    s,
                    "{:<18} {:<12} {:>8} {:>7} {:>8} {:>17} {:>8} {:>17} {:>22} {:>5}",
                    r.workload,
                    r.lock,
                    si(r.total_ops_per_s.unwrap_or(0.0)),
                    r.ratio_to_tokio
                        .map(|x| format!("{x:.2}x"))
                        .unwrap_or_else(|| "-".into()),
                    rops,
                    rtask,
                    wops,
                    wtask,
                    wait,
                    r.fairness
                        .map(|f| format!("{f:.2}"))
                        .unwrap_or_else(|| "-".into()),
                );
            }
            Status::NotApplicable => {
                let _ = writeln!(
                    s,
                    "{:<18} {:<12} {:>8}   (a sync lock cannot be held across .await)",
                    r.workload, r.lock, "n/a"
                );
            }
            Status::Error => {
                let _ = writeln!(
                    s,
                    "{:<18} {:<12} {:>8}   {}",
                    r.workload,
                    r.lock,
                    "ERROR",
                    r.error.as_deref().unwrap_or("")
                );
            }
        }
    }
    s
}

/// Checks a results file: every workload and lock present, numbers positive, no errors.
/// Returns the problems found (empty: the file is sane).
pub fn check(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let report: Report = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a results file: {e}", path.display()))?;
    let mut problems = Vec::new();
    if report.machine.cores == 0 || report.machine.threads == 0 {
        problems.push("machine: cores and threads must be positive".to_string());
    }
    if report.config.duration_s <= 0.0 {
        problems.push("config: duration_s must be positive".to_string());
    }
    for w in WorkloadId::ALL {
        for l in LockKind::ALL {
            let name = format!("{} / {}", w.name(), l.name());
            let Some(r) = report
                .results
                .iter()
                .find(|r| r.workload == w.name() && r.lock == l.name())
            else {
                problems.push(format!("{name}: missing"));
                continue;
            };
            if !l.is_async() && w.awaits() {
                if r.status != Status::NotApplicable {
                    problems.push(format!("{name}: should be n/a, is {:?}", r.status));
                }
                continue;
            }
            if r.status != Status::Ok {
                problems.push(format!(
                    "{name}: status {:?}{}",
                    r.status,
                    r.error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                ));
                continue;
            }
            let mut positive = |what: &str, v: Option<f64>| match v {
                Some(v) if v > 0.0 && v.is_finite() => {}
                Some(v) => problems.push(format!("{name}: {what} = {v}, not positive")),
                None => problems.push(format!("{name}: {what} missing")),
            };
            positive("total_ops_per_s", r.total_ops_per_s);
            positive("ratio_to_tokio", r.ratio_to_tokio);
            positive("wait_ns.max", r.wait_ns.map(|w| w.max as f64));
            let wl = Workload::new(w, report.machine.threads);
            let has = |f: fn(Role) -> bool| wl.tasks.iter().any(|(role, _)| f(*role));
            for (class, expected, stats) in [
                ("reader", has(Role::reads), &r.reader),
                ("writer", has(Role::writes), &r.writer),
            ] {
                if !expected {
                    continue;
                }
                positive(&format!("{class}.ops_per_s"), stats.map(|c| c.ops_per_s));
                positive(
                    &format!("{class}.per_task_mean"),
                    stats.map(|c| c.per_task_mean),
                );
                positive(
                    &format!("{class}.per_task_max"),
                    stats.map(|c| c.per_task_max as f64),
                );
            }
        }
    }
    Ok(problems)
}
