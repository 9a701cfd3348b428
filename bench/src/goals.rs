//! The lock's goal against tokio, cell by cell: in every workload, throughput at least
//! tokio's, each class's p99 wait at most twice tokio's (or under 10 us), and each class at
//! least a third of its fair share of the operations.
//!
//! It reads only the figures of a run ([`crate::results`]), so that it can be printed for a
//! run that just ended and for a results file (`compare --replot FILE`) alike. With
//! `--repeat` results the throughput ratio is the median of the ratios taken within each
//! round, and a p99 is the median of the rounds' p99s (the ratio is of those medians).

use std::fmt::Write as _;

use crate::results::{CaseResult, ClassStats, Status};
use crate::workloads::{Role, Workload, WorkloadId};
use crate::LockKind;

/// The lowest throughput ratio to tokio that meets the goal.
pub const MIN_RATIO: f64 = 1.0;
/// The highest ratio of a class's p99 wait to tokio's that meets the goal.
pub const MAX_P99_RATIO: f64 = 2.0;
/// A p99 wait under this meets the goal whatever tokio's is, in ns.
pub const P99_FLOOR_NS: u64 = 10_000;
/// The least share of the operations, as a part of the class's fair share, that meets it.
pub const MIN_FAIR_PART: f64 = 1.0 / 3.0;

/// The readers' and writers' fair shares of the operations in `w`: every task counts as
/// much as another, a mixed task for its write probability (the long reader, whose few
/// holds the figures leave out, does not count). `None` for a class the workload lacks.
pub fn fair_shares(w: &Workload) -> (Option<f64>, Option<f64>) {
    let mut tasks = 0.0;
    let mut writes = 0.0;
    let (mut has_reads, mut has_writes) = (false, false);
    for &(role, n) in &w.tasks {
        let n = n as f64;
        match role {
            Role::Reader => {
                tasks += n;
                has_reads = true;
            }
            Role::Writer => {
                tasks += n;
                writes += n;
                has_writes = true;
            }
            Role::Mixed { write_permille } => {
                tasks += n;
                writes += n * f64::from(write_permille) / 1000.0;
                has_reads = true;
                has_writes = true;
            }
            Role::LongReader { .. } => {}
        }
    }
    if tasks == 0.0 {
        return (None, None);
    }
    let w = writes / tasks;
    (has_reads.then_some(1.0 - w), has_writes.then_some(w))
}

/// One class of one workload against the goal.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassCell {
    /// This lock's p99 wait, ns.
    pub p99_ns: u64,
    /// tokio's p99 wait, ns.
    pub tokio_p99_ns: u64,
    /// The class's share of the operations (0 to 1), when the workload has both classes.
    pub share: Option<f64>,
    /// Its fair share (0 to 1), when the workload has both classes.
    pub fair: Option<f64>,
}

impl ClassCell {
    /// `p99 / tokio's p99` (infinite when tokio's is 0 and this one is not).
    pub fn p99_ratio(&self) -> f64 {
        if self.tokio_p99_ns == 0 {
            if self.p99_ns == 0 {
                1.0
            } else {
                f64::INFINITY
            }
        } else {
            self.p99_ns as f64 / self.tokio_p99_ns as f64
        }
    }

    /// Whether the p99 meets the goal.
    pub fn p99_ok(&self) -> bool {
        self.p99_ns < P99_FLOOR_NS || self.p99_ratio() <= MAX_P99_RATIO
    }

    /// The share as a part of the fair share, when both are known.
    pub fn fair_part(&self) -> Option<f64> {
        match (self.share, self.fair) {
            (Some(s), Some(f)) if f > 0.0 => Some(s / f),
            _ => None,
        }
    }

    /// Whether the share meets the goal (a workload of one class has nothing to share).
    pub fn share_ok(&self) -> bool {
        self.fair_part().is_none_or(|p| p >= MIN_FAIR_PART)
    }
}

/// One workload: `lock` against tokio.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The workload's name.
    pub workload: String,
    /// Throughput over tokio's.
    pub ratio: f64,
    /// Readers, when the workload has them.
    pub reads: Option<ClassCell>,
    /// Writers, when the workload has them.
    pub writes: Option<ClassCell>,
}

impl Row {
    /// How many cells the row has: the throughput, and per class its p99 and, where the
    /// workload has two classes, its share.
    pub fn cells(&self) -> usize {
        1 + [&self.reads, &self.writes]
            .into_iter()
            .flatten()
            .map(|c| 1 + usize::from(c.fair_part().is_some()))
            .sum::<usize>()
    }

    /// The cells that miss the goal, each with by how much (empty: the row meets it).
    pub fn misses(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.ratio < MIN_RATIO {
            out.push(format!("throughput {:.2}x", self.ratio));
        }
        for (name, c) in [("read", &self.reads), ("write", &self.writes)] {
            let Some(c) = c else { continue };
            if !c.p99_ok() {
                out.push(format!("{name} p99 {:.2}x", c.p99_ratio()));
            }
            if !c.share_ok() {
                out.push(format!(
                    "{name}s {:.1}% of the operations, under a third of {:.1}%",
                    c.share.unwrap_or(0.0) * 100.0,
                    c.fair.unwrap_or(0.0) * 100.0
                ));
            }
        }
        out
    }
}

fn find<'a>(results: &'a [CaseResult], workload: &str, lock: &str) -> Option<&'a CaseResult> {
    results
        .iter()
        .find(|r| r.workload == workload && r.lock == lock && r.status == Status::Ok)
}

fn cell(
    this: &Option<ClassStats>,
    tokio: &Option<ClassStats>,
    fair: Option<f64>,
) -> Option<ClassCell> {
    let (this, tokio) = (this.as_ref()?, tokio.as_ref()?);
    // A workload of one class has nothing to share.
    let fair = fair.filter(|&f| f < 1.0);
    Some(ClassCell {
        p99_ns: this.wait_ns.p99,
        tokio_p99_ns: tokio.wait_ns.p99,
        share: fair.and(this.share),
        fair,
    })
}

/// The rows of `lock` against tokio, one per workload where both were measured, in the
/// results' order; `threads` is the run's worker count (the sysfs workload has a writer per
/// worker).
pub fn rows(results: &[CaseResult], lock: &str, threads: usize) -> Vec<Row> {
    let tokio = LockKind::Tokio.name();
    let mut out = Vec::new();
    for this in results
        .iter()
        .filter(|r| r.lock == lock && r.status == Status::Ok)
    {
        let (Some(base), Some(ratio)) = (find(results, &this.workload, tokio), this.ratio_to_tokio)
        else {
            continue;
        };
        let (fair_r, fair_w) = WorkloadId::from_name(&this.workload)
            .map(|id| fair_shares(&Workload::new(id, threads)))
            .unwrap_or((None, None));
        out.push(Row {
            workload: this.workload.clone(),
            ratio,
            reads: cell(&this.reader, &base.reader, fair_r),
            writes: cell(&this.writer, &base.writer, fair_w),
        });
    }
    out
}

fn class_text(c: &Option<ClassCell>) -> (String, String) {
    let Some(c) = c else {
        return ("-".into(), "-".into());
    };
    let p99 = format!(
        "{} / {} = {}{}",
        crate::report::ns(c.p99_ns),
        crate::report::ns(c.tokio_p99_ns),
        if c.p99_ratio().is_finite() {
            format!("{:.2}x", c.p99_ratio())
        } else {
            "-".into()
        },
        if c.p99_ok() { "" } else { " **miss**" }
    );
    let share = match (c.share, c.fair) {
        (Some(s), Some(f)) => format!(
            "{:.1}% of {:.1}%{}",
            s * 100.0,
            f * 100.0,
            if c.share_ok() { "" } else { " **miss**" }
        ),
        _ => "-".into(),
    };
    (p99, share)
}

/// The goal table of `lock` (async-rwsem in `compare`) against tokio in Markdown, with a
/// closing line that counts the cells missed; `None` when the results hold no workload
/// that both ran.
pub fn markdown(results: &[CaseResult], lock: &str, threads: usize) -> Option<String> {
    let rows = rows(results, lock, threads);
    if rows.is_empty() {
        return None;
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## {lock} against the goal\n\nIn every workload: throughput at least {MIN_RATIO:.1}x \
         tokio's, each class's p99 wait at most {MAX_P99_RATIO:.0}x tokio's (or under {} us), \
         each class at least a third of its fair share of the operations (by tasks; a mixed \
         task by its write probability).\n",
        P99_FLOOR_NS / 1000
    );
    let _ = writeln!(
        s,
        "| workload | x tokio | read p99: this / tokio | write p99: this / tokio | reads' share of fair | writes' share of fair | missed |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    let (mut missed, mut cells, mut rows_missing) = (0, 0, 0);
    for r in &rows {
        let (rp, rs) = class_text(&r.reads);
        let (wp, ws) = class_text(&r.writes);
        let misses = r.misses();
        missed += misses.len();
        cells += r.cells();
        rows_missing += usize::from(!misses.is_empty());
        let _ = writeln!(
            s,
            "| {} | {:.2}{} | {rp} | {wp} | {rs} | {ws} | {} |",
            r.workload,
            r.ratio,
            if r.ratio < MIN_RATIO { " **miss**" } else { "" },
            if misses.is_empty() {
                "-".to_string()
            } else {
                misses.join("; ")
            }
        );
    }
    let _ = writeln!(
        s,
        "\n{missed} of {cells} cells missed, in {rows_missing} of {} workloads.",
        rows.len()
    );
    Some(s)
}

/// The same goal as a few plain lines for the terminal: one per workload that misses it.
pub fn summary(results: &[CaseResult], lock: &str, threads: usize) -> Option<String> {
    let rows = rows(results, lock, threads);
    if rows.is_empty() {
        return None;
    }
    let mut s = String::new();
    let missing: Vec<(&Row, Vec<String>)> = rows
        .iter()
        .map(|r| (r, r.misses()))
        .filter(|(_, m)| !m.is_empty())
        .collect();
    let _ = writeln!(
        s,
        "{lock} against the goal: {} of {} workloads meet it\n(throughput >= {MIN_RATIO:.1}x \
         tokio, p99 <= {MAX_P99_RATIO:.0}x tokio's or < {} us, each class >= 1/3 of \
         its fair share)",
        rows.len() - missing.len(),
        rows.len(),
        P99_FLOOR_NS / 1000,
    );
    for (r, misses) in missing {
        let _ = writeln!(s, "  {:<18} {}", r.workload, misses.join("; "));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::WaitStats;

    fn class(ops: u64, share: f64, p99: u64) -> ClassStats {
        ClassStats {
            tasks: 1,
            ops,
            ops_per_s: ops as f64,
            share: Some(share),
            per_task_min: ops,
            per_task_mean: ops as f64,
            per_task_max: ops,
            wait_ns: WaitStats {
                samples: ops,
                p50: 1,
                p99,
                max: p99,
            },
        }
    }

    fn case(
        workload: WorkloadId,
        lock: LockKind,
        ratio: f64,
        r: ClassStats,
        w: ClassStats,
    ) -> CaseResult {
        let mut c = CaseResult::empty(workload, lock.name(), Status::Ok);
        c.total_ops_per_s = Some(1000.0 * ratio);
        c.ratio_to_tokio = Some(ratio);
        c.reader = Some(r);
        c.writer = Some(w);
        c
    }

    #[test]
    fn fair_shares_follow_tasks_and_write_probability() {
        let share = |id, threads| fair_shares(&Workload::new(id, threads));
        // 64 mixed tasks writing 20% of the time.
        let (r, w) = share(WorkloadId::Mixed, 2);
        assert!((r.unwrap() - 0.8).abs() < 1e-12 && (w.unwrap() - 0.2).abs() < 1e-12);
        // sysfs: one writer per worker beside 32 readers.
        assert!((share(WorkloadId::Sysfs, 2).1.unwrap() - 2.0 / 34.0).abs() < 1e-12);
        assert!((share(WorkloadId::Sysfs, 8).1.unwrap() - 8.0 / 40.0).abs() < 1e-12);
        // The long reader does not count: 4 writers, 16 readers.
        assert!((share(WorkloadId::LongReader, 2).1.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(share(WorkloadId::Writers240, 2), (None, Some(1.0)));
        assert_eq!(share(WorkloadId::ReadersOnly, 2), (Some(1.0), None));
    }

    #[test]
    fn each_kind_of_miss_is_named_with_its_size() {
        let results = vec![
            case(
                WorkloadId::Mixed,
                LockKind::AsyncRwsem,
                0.95,
                class(900, 0.9, 300_000),
                class(100, 0.05, 15_000),
            ),
            case(
                WorkloadId::Mixed,
                LockKind::Tokio,
                1.0,
                class(800, 0.8, 100_000),
                class(200, 0.2, 9_000),
            ),
        ];
        let rows = rows(&results, "async-rwsem", 2);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0].misses(),
            vec![
                "throughput 0.95x".to_string(),
                "read p99 3.00x".to_string(),
                // 15 us against 9 us is under 2x: no miss; 5% of a 20% fair share is a
                // quarter of it: a miss.
                "writes 5.0% of the operations, under a third of 20.0%".to_string(),
            ]
        );
        let md = markdown(&results, "async-rwsem", 2).unwrap();
        assert!(
            md.contains("| mixed | 0.95 **miss** | 300us / 100us = 3.00x **miss** |"),
            "{md}"
        );
        assert!(
            md.contains("3 of 5 cells missed, in 1 of 1 workloads."),
            "{md}"
        );
        let s = summary(&results, "async-rwsem", 2).unwrap();
        assert!(s.contains("0 of 1 workloads meet it"), "{s}");
    }

    #[test]
    fn a_short_tail_and_a_fair_share_meet_the_goal() {
        let results = vec![
            case(
                WorkloadId::Mixed40x40,
                LockKind::AsyncRwsem,
                1.2,
                // 8 us against 1 us: 8x, but under the 10 us floor.
                class(700, 0.7, 8_000),
                // 20% of a 50% fair share: above a third of it.
                class(300, 0.2, 40_000),
            ),
            case(
                WorkloadId::Mixed40x40,
                LockKind::Tokio,
                1.0,
                class(500, 0.5, 1_000),
                class(500, 0.5, 20_000),
            ),
        ];
        let rows = rows(&results, "async-rwsem", 2);
        assert_eq!(rows[0].misses(), Vec::<String>::new());
        assert!(summary(&results, "async-rwsem", 2)
            .unwrap()
            .contains("1 of 1 workloads meet it"));
    }

    #[test]
    fn nothing_to_compare_without_tokio() {
        let results = vec![case(
            WorkloadId::Mixed,
            LockKind::AsyncRwsem,
            1.0,
            class(1, 0.5, 1),
            class(1, 0.5, 1),
        )];
        assert!(markdown(&results, "async-rwsem", 2).is_none());
        assert!(summary(&results, "async-rwsem", 2).is_none());
    }
}
