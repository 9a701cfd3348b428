//! The JSON schema: every figure a run writes (a case, its classes, its waits, the rounds of
//! `--repeat` and their spread), and how one measured case becomes those figures.
//!
//! The modules that read the figures depend on this one and never on each other's types:
//! [`crate::repeat`] summarises rounds into cases, [`crate::report`] prints and checks them
//! (and calls the summary to check a file's summary against its rounds).

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
    /// One entry per (workload, lock), in run order. With `--repeat N` (N > 1): the
    /// summary of the rounds, one entry per case, each figure the median over the rounds,
    /// with its `spread`.
    pub results: Vec<CaseResult>,
    /// With `--repeat N` (N > 1): every round as it ran. Absent from a single run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
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
    /// `--repeat`: rounds run (1 when the file predates the flag).
    #[serde(default = "one")]
    pub repeat: usize,
    /// Tokio worker threads per core (above 1: more workers than cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_per_core: Option<f64>,
    /// `--pin`: each worker pinned to a core of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// The workloads selected.
    pub workloads: Vec<String>,
    /// The locks selected.
    pub locks: Vec<String>,
    /// async_rwsem's policy (Debug form).
    pub rwsem_policy: String,
    /// Busy-loop iterations per microsecond (the calibration sections are built from).
    pub busy_iters_per_us: u64,
}

fn one() -> usize {
    1
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
    /// This class's share of the operations of both classes (0 to 1; the long reader's
    /// holds are not counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
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
    /// The cores the case kept busy on average over its window: the process's CPU time
    /// (every thread's, user and system) over the window's length. Near 1 on a 2-core
    /// machine where every acquire queues: the granted tasks run one after the other on
    /// one worker while the others park (`docs/performance.md`, round twelve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_busy: Option<f64>,
    /// Lowest `per_task_min / per_task_mean` over the classes (1 = perfectly fair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<f64>,
    /// `total_ops_per_s` over tokio's in the same workload (with `--repeat`: the median of
    /// the ratios computed within each round).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to_tokio: Option<f64>,
    /// With `--repeat`: how far the rounds were apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
}

impl CaseResult {
    pub(crate) fn empty(workload: WorkloadId, lock: &str, status: Status) -> Self {
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
            cores_busy: None,
            fairness: None,
            ratio_to_tokio: None,
            spread: None,
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
                share: None,
                per_task_min: counts.iter().copied().min().unwrap_or(0),
                per_task_mean: total as f64 / tasks.len() as f64,
                per_task_max: counts.iter().copied().max().unwrap_or(0),
                wait_ns: WaitStats::of(&h),
            })
        };
        let mut reader = class(Role::reads, |t| t.reads, |t| &t.read_wait);
        let mut writer = class(Role::writes, |t| t.writes, |t| &t.write_wait);
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
        // Shares of the two classes' operations (the long reader's few holds left out).
        let class_ops: u64 = [reader, writer].iter().flatten().map(|c| c.ops).sum();
        for c in [&mut reader, &mut writer].into_iter().flatten() {
            c.share = (class_ops > 0).then(|| c.ops as f64 / class_ops as f64);
        }
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
            cores_busy: m.cpu.map(|cpu| cpu.as_secs_f64() / secs),
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

/// One round of a `--repeat` run, as it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Round {
    /// 1-based round number.
    pub round: usize,
    /// Seconds since the epoch when the round started.
    pub started_unix: u64,
    /// One entry per (workload, lock), in run order, `ratio_to_tokio` filled from this round.
    pub results: Vec<CaseResult>,
}

/// How far the rounds of one case were apart.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Rounds that measured the case.
    pub rounds: usize,
    /// Highest ÷ lowest `total_ops_per_s` over the rounds (1 = identical rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_ops_per_s: Option<f64>,
    /// Highest ÷ lowest `ratio_to_tokio` over the rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to_tokio: Option<f64>,
    /// Lowest and highest `ratio_to_tokio` over the rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to_tokio_range: Option<(f64, f64)>,
}
