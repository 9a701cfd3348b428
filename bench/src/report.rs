//! Figures from a run, printed and checked: the table, the Markdown report, and the sanity
//! check CI runs on the JSON (the schema itself is [`crate::results`]).

use std::fmt::Write as _;
use std::path::Path;

use crate::results::{CaseResult, ClassStats, Report, Status};
use crate::workloads::{Role, Workload, WorkloadId};
use crate::LockKind;

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

fn wait_cell(c: &Option<ClassStats>) -> String {
    c.map_or_else(
        || "-".into(),
        |c| format!("{}/{}", ns(c.wait_ns.p50), ns(c.wait_ns.p99)),
    )
}

fn share_cell(r: &CaseResult) -> String {
    match (
        r.reader.and_then(|c| c.share),
        r.writer.and_then(|c| c.share),
    ) {
        (Some(rs), Some(ws)) => format!("{:.0}/{:.0}", rs * 100.0, ws * 100.0),
        _ => "-".into(),
    }
}

fn ratio_cell(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.2}"))
}

/// Why a case has no figures, in the table and the report.
fn missing_cell(r: &CaseResult) -> Option<String> {
    match r.status {
        Status::Ok => None,
        Status::NotApplicable => Some("n/a (a sync lock cannot be held across .await)".into()),
        Status::Error => Some(format!("ERROR {}", r.error.as_deref().unwrap_or(""))),
    }
}

/// The table printed on stdout, at most 100 columns wide: per case the throughput, its
/// ratio to tokio's, the acquire wait (median and 99th percentile) of reads and of writes,
/// the classes' shares of the operations and the fairness. With `--repeat` results (they
/// carry a `spread`) every figure is a median over the rounds, and one more column gives
/// the spread (max ÷ min over the rounds) of the ratio to tokio. Every other figure is in
/// the JSON and in [`markdown`].
pub fn table(results: &[CaseResult]) -> String {
    let repeated = results.iter().any(|r| r.spread.is_some());
    // (header, width, left-aligned, shown)
    let cols: [(&str, usize, bool, bool); 9] = [
        ("workload", 18, true, true),
        ("lock", 11, true, true),
        ("ops/s", 7, false, true),
        ("x tokio", 7, false, true),
        ("spread", 6, false, repeated),
        ("read wait", 13, false, true),
        ("write wait", 13, false, true),
        ("r/w %", 5, false, true),
        ("fair", 4, false, true),
    ];
    let line = |cells: &[String]| {
        let mut out = Vec::new();
        for (c, &(_, w, left, shown)) in cells.iter().zip(cols.iter()) {
            if shown {
                out.push(if left {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                });
            }
        }
        out.join(" ").trim_end().to_string()
    };
    let mut s = String::new();
    if repeated {
        let rounds = results
            .iter()
            .filter_map(|r| r.spread.map(|sp| sp.rounds))
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            s,
            "medians of {rounds} rounds; spread: highest / lowest ratio to tokio over the rounds"
        );
    }
    let header: Vec<String> = cols.iter().map(|c| c.0.to_string()).collect();
    let _ = writeln!(s, "{}", line(&header));
    let mut last = String::new();
    for r in results {
        if r.workload != last && !last.is_empty() {
            s.push('\n');
        }
        last.clone_from(&r.workload);
        if let Some(why) = missing_cell(r) {
            let _ = writeln!(s, "{:<18} {:<11} {why}", r.workload, r.lock);
            continue;
        }
        let cells = [
            r.workload.clone(),
            r.lock.clone(),
            si(r.total_ops_per_s.unwrap_or(0.0)),
            r.ratio_to_tokio
                .map_or_else(|| "-".into(), |x| format!("{x:.2}x")),
            ratio_cell(r.spread.and_then(|sp| sp.ratio_to_tokio)),
            wait_cell(&r.reader),
            wait_cell(&r.writer),
            share_cell(r),
            r.fairness.map_or_else(|| "-".into(), |f| format!("{f:.2}")),
        ];
        let _ = writeln!(s, "{}", line(&cells));
    }
    let _ = writeln!(
        s,
        "\nwait: the time from asking for the lock to holding it, p50/p99; r/w %: the \
         classes' shares of\nthe operations; fair: per-task min / mean operations (the \
         lower class); every figure: results.md"
    );
    s
}

/// The Markdown report (`results.md`): the run's machine and settings, then one row per
/// case with every figure of the JSON's summary.
pub fn markdown(report: &Report) -> String {
    let m = &report.machine;
    let c = &report.config;
    let mut s = String::new();
    let _ = writeln!(s, "# compare: results\n");
    let _ = writeln!(
        s,
        "{} worker thread(s){} on {} core(s) ({}, {}), commit {}; {:.2} s window and {:.2} s \
         warm-up per case{}; async-rwsem policy `{}`.\n",
        m.threads,
        if c.pinned {
            ", each pinned to a core,"
        } else {
            ""
        },
        m.cores,
        m.cpu.as_deref().unwrap_or("unknown CPU"),
        m.os,
        m.git_rev.as_deref().unwrap_or("unknown"),
        c.duration_s,
        c.warmup_s,
        if c.repeat > 1 {
            format!(
                ", {} interleaved rounds: every figure is the median over the rounds, and \
                 spread is the highest / lowest round",
                c.repeat
            )
        } else {
            String::new()
        },
        c.rwsem_policy
    );
    let _ = writeln!(
        s,
        "| workload | lock | ops/s | spread | x tokio | spread | reads/s | r/task min/mean/max \
         | writes/s | w/task min/mean/max | r/w % | read wait p50/p99/max \
         | write wait p50/p99/max | fairness |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let class_wait = |c: &Option<ClassStats>| {
        c.map_or_else(
            || "-".into(),
            |c| {
                format!(
                    "{} / {} / {}",
                    ns(c.wait_ns.p50),
                    ns(c.wait_ns.p99),
                    ns(c.wait_ns.max)
                )
            },
        )
    };
    for r in &report.results {
        if let Some(why) = missing_cell(r) {
            let _ = writeln!(
                s,
                "| {} | {} | {why} | | | | | | | | | | | |",
                r.workload, r.lock
            );
            continue;
        }
        let (rops, rtask) = class_cells(&r.reader);
        let (wops, wtask) = class_cells(&r.writer);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {rops} | {rtask} | {wops} | {wtask} | {} | {} | {} | {} |",
            r.workload,
            r.lock,
            si(r.total_ops_per_s.unwrap_or(0.0)),
            ratio_cell(r.spread.and_then(|sp| sp.total_ops_per_s)),
            ratio_cell(r.ratio_to_tokio),
            ratio_cell(r.spread.and_then(|sp| sp.ratio_to_tokio)),
            share_cell(r),
            class_wait(&r.reader),
            class_wait(&r.writer),
            r.fairness.map_or_else(|| "-".into(), |f| format!("{f:.2}")),
        );
    }
    let _ = writeln!(
        s,
        "\nwait: the time from asking for the lock to holding it; r/w %: each class's share \
         of the operations; fairness: per-task min / mean operations (the lower of readers' \
         and writers'); n/a: parking_lot is not run where the section awaits (a sync lock \
         cannot be held across `.await`)."
    );
    s
}

/// Checks a results file: every workload and lock present, numbers positive, no errors.
/// A file from `--repeat` is checked round by round too, and its summary against its
/// rounds. Returns the problems found (empty: the file is sane).
pub fn check(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let report: Report = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a results file: {e}", path.display()))?;
    Ok(check_report(&report))
}

/// The checks of [`check`] on a parsed report.
pub fn check_report(report: &Report) -> Vec<String> {
    let mut problems = Vec::new();
    if report.machine.cores == 0 || report.machine.threads == 0 {
        problems.push("machine: cores and threads must be positive".to_string());
    }
    if report.config.duration_s <= 0.0 {
        problems.push("config: duration_s must be positive".to_string());
    }
    let threads = report.machine.threads;
    check_results(&report.results, threads, "", &mut problems);
    if report.rounds.is_empty() {
        if report.config.repeat > 1 {
            problems.push(format!(
                "config: repeat is {} but the file has no rounds",
                report.config.repeat
            ));
        }
        return problems;
    }
    if report.rounds.len() != report.config.repeat {
        problems.push(format!(
            "config: repeat is {} but the file has {} round(s)",
            report.config.repeat,
            report.rounds.len()
        ));
    }
    for (k, round) in report.rounds.iter().enumerate() {
        if round.round != k + 1 {
            problems.push(format!("round {}: numbered {}", k + 1, round.round));
        }
        check_results(
            &round.results,
            threads,
            &format!("round {}: ", k + 1),
            &mut problems,
        );
    }
    // The summary must be the one the rounds give.
    let keys: Vec<(String, String)> = report
        .results
        .iter()
        .map(|r| (r.workload.clone(), r.lock.clone()))
        .collect();
    let again = crate::repeat::summarize(&report.rounds, &keys);
    let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
        (None, None) => true,
        _ => false,
    };
    for (r, a) in report.results.iter().zip(&again) {
        let name = format!("{} / {}", r.workload, r.lock);
        if r.status != a.status
            || !same(r.total_ops_per_s, a.total_ops_per_s)
            || !same(r.ratio_to_tokio, a.ratio_to_tokio)
            || !same(r.fairness, a.fairness)
        {
            problems.push(format!(
                "{name}: the summary is not the median of the rounds"
            ));
        }
        if r.status != Status::Ok {
            continue;
        }
        match r.spread {
            None => problems.push(format!("{name}: spread missing")),
            Some(sp) => {
                if sp.rounds != report.rounds.len() {
                    problems.push(format!(
                        "{name}: spread over {} round(s), the file has {}",
                        sp.rounds,
                        report.rounds.len()
                    ));
                }
                for (what, v) in [
                    ("total_ops_per_s", sp.total_ops_per_s),
                    ("ratio_to_tokio", sp.ratio_to_tokio),
                ] {
                    match v {
                        Some(v) if v.is_finite() && v >= 1.0 => {}
                        Some(v) => problems.push(format!("{name}: spread.{what} = {v}, not >= 1")),
                        None => problems.push(format!("{name}: spread.{what} missing")),
                    }
                }
            }
        }
    }
    problems
}

/// Every workload and lock present in `results`, numbers positive, no errors; problems are
/// pushed with `prefix`.
fn check_results(results: &[CaseResult], threads: usize, prefix: &str, problems: &mut Vec<String>) {
    for w in WorkloadId::ALL {
        for l in LockKind::ALL {
            let name = format!("{prefix}{} / {}", w.name(), l.name());
            let Some(r) = results
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
            let wl = Workload::new(w, threads);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repeat::{keys_of, summarize};
    use crate::results::{fill_ratios, Config, Machine, Round, WaitStats};

    fn class(ops: u64) -> ClassStats {
        ClassStats {
            tasks: 8,
            ops,
            ops_per_s: ops as f64,
            share: Some(0.5),
            per_task_min: ops / 16,
            per_task_mean: ops as f64 / 8.0,
            per_task_max: ops / 4,
            wait_ns: WaitStats {
                samples: ops,
                p50: 100,
                p99: 1_000,
                max: 10_000,
            },
        }
    }

    /// A round with every workload on every lock, throughput scaled by `scale`.
    fn full_round(round: usize, scale: f64) -> Round {
        let mut results = Vec::new();
        for w in WorkloadId::ALL {
            for (k, l) in LockKind::ALL.into_iter().enumerate() {
                if !l.is_async() && w.awaits() {
                    results.push(CaseResult::not_applicable(w, l.name()));
                    continue;
                }
                let ops = scale * (1000.0 + 100.0 * k as f64);
                let mut r = CaseResult::empty(w, l.name(), Status::Ok);
                r.tasks = Some(16);
                r.elapsed_s = Some(1.0);
                r.total_ops_per_s = Some(ops);
                r.reader = Some(class(ops as u64 / 2));
                r.writer = Some(class(ops as u64 / 2));
                r.wait_ns = Some(class(1).wait_ns);
                r.fairness = Some(0.5);
                results.push(r);
            }
        }
        fill_ratios(&mut results);
        Round {
            round,
            started_unix: 0,
            results,
        }
    }

    fn report(rounds: Vec<Round>) -> Report {
        let repeat = rounds.len().max(1);
        let (results, rounds) = if rounds.len() == 1 {
            (rounds[0].results.clone(), Vec::new())
        } else {
            (summarize(&rounds, &keys_of(&rounds)), rounds)
        };
        Report {
            machine: Machine {
                cores: 2,
                threads: 2,
                cpu: None,
                os: "linux x86_64".into(),
                git_rev: None,
                started_unix: 0,
            },
            config: Config {
                duration_s: 0.4,
                warmup_s: 0.1,
                quick: true,
                repeat,
                threads_per_core: Some(1.0),
                pinned: false,
                workloads: Vec::new(),
                locks: Vec::new(),
                rwsem_policy: String::new(),
                busy_iters_per_us: 1,
            },
            results,
            rounds,
        }
    }

    #[test]
    fn a_single_run_passes_the_check() {
        let r = report(vec![full_round(1, 1.0)]);
        assert_eq!(check_report(&r), Vec::<String>::new());
    }

    #[test]
    fn a_repeated_run_passes_the_check_and_round_trips() {
        let r = report(vec![
            full_round(1, 1.0),
            full_round(2, 3.0),
            full_round(3, 2.0),
        ]);
        assert_eq!(check_report(&r), Vec::<String>::new());
        let text = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(check_report(&back), Vec::<String>::new());
        assert_eq!(back.rounds.len(), 3);
    }

    #[test]
    fn a_pinned_run_says_so_in_its_json_and_its_report() {
        let mut r = report(vec![full_round(1, 1.0)]);
        let unpinned = serde_json::to_string(&r).unwrap();
        assert!(!unpinned.contains("pinned"), "{unpinned}");
        assert!(!markdown(&r).contains("pinned"));
        r.config.pinned = true;
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"pinned\":true"), "{text}");
        let back: Report = serde_json::from_str(&text).unwrap();
        assert!(back.config.pinned);
        assert!(markdown(&r).starts_with(
            "# compare: results\n\n2 worker thread(s), each pinned to a core, on 2 core(s)"
        ));
        // A file from before the flag reads as unpinned.
        let old: Report = serde_json::from_str(&unpinned).unwrap();
        assert!(!old.config.pinned);
    }

    #[test]
    fn the_check_catches_a_summary_that_is_not_the_rounds_median() {
        let mut r = report(vec![full_round(1, 1.0), full_round(2, 3.0)]);
        r.results[0].total_ops_per_s = Some(1.0);
        let problems = check_report(&r);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("not the median of the rounds")),
            "{problems:?}"
        );
    }

    #[test]
    fn the_check_catches_a_missing_round_and_a_broken_one() {
        let mut r = report(vec![full_round(1, 1.0), full_round(2, 3.0)]);
        r.config.repeat = 3;
        r.rounds[1].results[0].status = Status::Error;
        r.rounds[1].results[0].error = Some("hang".into());
        let problems = check_report(&r);
        assert!(problems.iter().any(|p| p.contains("has 2 round(s)")));
        assert!(problems
            .iter()
            .any(|p| p.starts_with("round 2: ") && p.contains("hang")));
    }

    #[test]
    fn shares_and_spreads_appear_in_the_table() {
        let r = report(vec![full_round(1, 1.0), full_round(2, 2.0)]);
        let t = table(&r.results);
        assert!(t.starts_with("medians of 2 rounds"));
        assert!(t.contains("spread"));
        assert!(t.contains("50/50"));
        let single = table(&report(vec![full_round(1, 1.0)]).results);
        assert!(!single.contains("spread"));
    }

    #[test]
    fn the_table_fits_100_columns_and_the_report_has_every_figure() {
        let r = report(vec![full_round(1, 1.0), full_round(2, 2.0)]);
        let t = table(&r.results);
        for line in t.lines() {
            assert!(
                line.chars().count() <= 100,
                "{} columns: {line}",
                line.len()
            );
        }
        assert!(t.contains("100ns/1us"), "{t}");
        let md = markdown(&r);
        assert!(md.contains("| 100ns / 1us / 10us |"), "{md}");
        assert!(md.contains("n/a"));
        let rows = md.lines().filter(|l| l.starts_with("| ")).count();
        assert_eq!(rows, 1 + r.results.len());
    }
}
