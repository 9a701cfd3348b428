//! `--repeat N`: every (workload, lock) case measured in N interleaved rounds, summarised
//! per case as the median of each figure over the rounds and the spread (max ÷ min) of the
//! throughput and of the ratio to tokio.
//!
//! Round r runs every case before round r + 1 starts, so that a slow stretch of a shared
//! machine hits every lock alike instead of one lock's whole series. Within a round the lock
//! order is rotated by one per round, so that no lock always runs first (or last) after the
//! workload changes.
//!
//! Every figure is a median on its own (the median per-task minimum is the median of the
//! rounds' minimums, not the minimum of some median round). The ratio to tokio is computed
//! within each round, against tokio's throughput in that same round, and then its median is
//! taken: machine noise that hits a whole round cancels out of the ratio.

use crate::results::{CaseResult, ClassStats, Round, Spread, Status, WaitStats};

/// The median of `values` (the mean of the two middle ones for an even count); `None` when
/// empty. NaNs sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The median of integer `values`, rounded to the nearest integer for an even count.
pub fn median_u64(values: &[u64]) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        let sum = u128::from(v[n / 2 - 1]) + u128::from(v[n / 2]);
        u64::try_from(sum.div_ceil(2)).unwrap_or(u64::MAX)
    })
}

/// Highest ÷ lowest of `values`: 1 when they agree. `None` when empty, when a value is not
/// finite, or when the lowest is not positive (the ratio would not mean anything).
pub fn spread(values: &[f64]) -> Option<f64> {
    let (lo, hi) = range(values)?;
    (lo > 0.0).then(|| hi / lo)
}

/// Lowest and highest of `values`; `None` when empty or when a value is not finite.
pub fn range(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo, hi))
}

/// Medians of the values `f` gives in every round; `None` unless every round has one.
fn median_all<T>(items: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<f64> {
    let v: Option<Vec<f64>> = items.iter().map(|x| f(x)).collect();
    median(&v?)
}

fn median_all_u64<T>(items: &[&T], f: impl Fn(&T) -> Option<u64>) -> Option<u64> {
    let v: Option<Vec<u64>> = items.iter().map(|x| f(x)).collect();
    median_u64(&v?)
}

/// Per-field medians of a class's figures over the rounds; `None` unless every round has
/// the class.
fn median_class(classes: &[Option<ClassStats>]) -> Option<ClassStats> {
    let c: Option<Vec<ClassStats>> = classes.iter().copied().collect();
    let c = c?;
    let c: Vec<&ClassStats> = c.iter().collect();
    let first = c.first()?;
    let wait: Vec<&WaitStats> = c.iter().map(|c| &c.wait_ns).collect();
    Some(ClassStats {
        tasks: first.tasks,
        ops: median_all_u64(&c, |c| Some(c.ops))?,
        ops_per_s: median_all(&c, |c| Some(c.ops_per_s))?,
        share: median_all(&c, |c| c.share),
        per_task_min: median_all_u64(&c, |c| Some(c.per_task_min))?,
        per_task_mean: median_all(&c, |c| Some(c.per_task_mean))?,
        per_task_max: median_all_u64(&c, |c| Some(c.per_task_max))?,
        wait_ns: median_wait(&wait)?,
    })
}

fn median_wait(w: &[&WaitStats]) -> Option<WaitStats> {
    Some(WaitStats {
        samples: median_all_u64(w, |w| Some(w.samples))?,
        p50: median_all_u64(w, |w| Some(w.p50))?,
        p99: median_all_u64(w, |w| Some(w.p99))?,
        max: median_all_u64(w, |w| Some(w.max))?,
    })
}

/// The summary of one case from its entries in every round (`runs`, in round order).
///
/// An error in any round makes the case an error (a lock that broke once is broken), with
/// the round named; `n/a` stays `n/a`. Otherwise every figure is the median over the rounds
/// and `spread` says how far they were apart.
pub fn summarize_case(runs: &[&CaseResult]) -> Option<CaseResult> {
    let first = *runs.first()?;
    if let Some((k, e)) = runs
        .iter()
        .enumerate()
        .find(|(_, r)| r.status == Status::Error)
    {
        let mut out = (*e).clone();
        out.error = Some(format!(
            "round {}: {}",
            k + 1,
            e.error.as_deref().unwrap_or("error")
        ));
        return Some(out);
    }
    if runs.iter().any(|r| r.status != Status::Ok) {
        return Some(first.clone());
    }
    let ops: Vec<f64> = runs.iter().filter_map(|r| r.total_ops_per_s).collect();
    let ratios: Vec<f64> = runs.iter().filter_map(|r| r.ratio_to_tokio).collect();
    let fairness: Vec<f64> = runs.iter().filter_map(|r| r.fairness).collect();
    let waits: Option<Vec<&WaitStats>> = runs.iter().map(|r| r.wait_ns.as_ref()).collect();
    let readers: Vec<Option<ClassStats>> = runs.iter().map(|r| r.reader).collect();
    let writers: Vec<Option<ClassStats>> = runs.iter().map(|r| r.writer).collect();
    Some(CaseResult {
        workload: first.workload.clone(),
        lock: first.lock.clone(),
        status: Status::Ok,
        error: None,
        tasks: first.tasks,
        elapsed_s: median_all(runs, |r| r.elapsed_s),
        total_ops_per_s: median(&ops),
        reader: median_class(&readers),
        writer: median_class(&writers),
        long_reader_ops: median_all_u64(runs, |r| r.long_reader_ops),
        wait_ns: waits.and_then(|w| median_wait(&w)),
        cores_busy: median_all(runs, |r| r.cores_busy),
        fairness: median(&fairness),
        ratio_to_tokio: median(&ratios),
        spread: Some(Spread {
            rounds: runs.len(),
            total_ops_per_s: spread(&ops),
            ratio_to_tokio: spread(&ratios),
            ratio_to_tokio_range: range(&ratios),
        }),
    })
}

/// One summary per `(workload, lock)` in `keys` order, from every round's results. A case
/// that no round ran is left out.
pub fn summarize(rounds: &[Round], keys: &[(String, String)]) -> Vec<CaseResult> {
    keys.iter()
        .filter_map(|(w, l)| {
            let runs: Vec<&CaseResult> = rounds
                .iter()
                .filter_map(|r| r.results.iter().find(|c| &c.workload == w && &c.lock == l))
                .collect();
            summarize_case(&runs)
        })
        .collect()
}

/// The `(workload, lock)` keys of `rounds` in first-seen order, workloads grouped: the order
/// the summary table and the charts use.
pub fn keys_of(rounds: &[Round]) -> Vec<(String, String)> {
    let mut workloads: Vec<&str> = Vec::new();
    let mut locks: Vec<&str> = Vec::new();
    for c in rounds.iter().flat_map(|r| &r.results) {
        if !workloads.contains(&c.workload.as_str()) {
            workloads.push(&c.workload);
        }
        if !locks.contains(&c.lock.as_str()) {
            locks.push(&c.lock);
        }
    }
    // Locks in their canonical order, not in the rotated order of some round.
    locks.sort_by_key(|l| {
        crate::LockKind::from_name(l).map_or(usize::MAX, |k| {
            crate::LockKind::ALL
                .iter()
                .position(|x| *x == k)
                .unwrap_or(usize::MAX)
        })
    });
    let mut keys = Vec::new();
    for w in &workloads {
        for l in &locks {
            if rounds
                .iter()
                .flat_map(|r| &r.results)
                .any(|c| c.workload == *w && c.lock == *l)
            {
                keys.push((w.to_string(), l.to_string()));
            }
        }
    }
    keys
}

/// The lock order of round `round` (1-based): `locks` rotated left by `round - 1`.
pub fn round_order<T: Copy>(locks: &[T], round: usize) -> Vec<T> {
    let mut v = locks.to_vec();
    if !v.is_empty() {
        let k = (round.saturating_sub(1)) % v.len();
        v.rotate_left(k);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Machine, Report, Round};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn median_odd_even_and_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[2.0, 1.0]), Some(1.5));
    }

    #[test]
    fn median_u64_rounds_half_up_without_overflow() {
        assert_eq!(median_u64(&[]), None);
        assert_eq!(median_u64(&[7, 1, 4]), Some(4));
        assert_eq!(median_u64(&[1, 2]), Some(2));
        assert_eq!(median_u64(&[2, 4]), Some(3));
        assert_eq!(median_u64(&[u64::MAX, u64::MAX]), Some(u64::MAX));
    }

    #[test]
    fn spread_is_max_over_min() {
        assert_eq!(spread(&[2.0, 4.0, 3.0]), Some(2.0));
        assert_eq!(spread(&[5.0]), Some(1.0));
        assert_eq!(spread(&[]), None);
        assert_eq!(spread(&[0.0, 1.0]), None);
        assert_eq!(spread(&[1.0, f64::NAN]), None);
        assert_eq!(range(&[3.0, 1.0, 2.0]), Some((1.0, 3.0)));
    }

    #[test]
    fn round_order_rotates() {
        let l = [1, 2, 3, 4];
        assert_eq!(round_order(&l, 1), vec![1, 2, 3, 4]);
        assert_eq!(round_order(&l, 2), vec![2, 3, 4, 1]);
        assert_eq!(round_order(&l, 5), vec![1, 2, 3, 4]);
        assert_eq!(round_order::<u8>(&[], 3), Vec::<u8>::new());
    }

    fn class(ops: u64, min: u64, mean: f64, max: u64, share: f64, wait_max: u64) -> ClassStats {
        ClassStats {
            tasks: 4,
            ops,
            ops_per_s: ops as f64,
            share: Some(share),
            per_task_min: min,
            per_task_mean: mean,
            per_task_max: max,
            wait_ns: WaitStats {
                samples: ops,
                p50: 10,
                p99: 100,
                max: wait_max,
            },
        }
    }

    fn case(lock: &str, ops: f64, fairness: f64, wait_max: u64) -> CaseResult {
        let reads = (ops * 0.8) as u64;
        let writes = (ops * 0.2) as u64;
        CaseResult {
            workload: "mixed".into(),
            lock: lock.into(),
            status: Status::Ok,
            error: None,
            tasks: Some(8),
            elapsed_s: Some(1.0),
            total_ops_per_s: Some(ops),
            reader: Some(class(
                reads,
                reads / 8,
                reads as f64 / 4.0,
                reads / 2,
                0.8,
                wait_max,
            )),
            writer: Some(class(
                writes,
                1,
                writes as f64 / 4.0,
                writes / 2,
                0.2,
                wait_max,
            )),
            long_reader_ops: None,
            cores_busy: None,
            wait_ns: Some(WaitStats {
                samples: 10,
                p50: 10,
                p99: 100,
                max: wait_max,
            }),
            fairness: Some(fairness),
            ratio_to_tokio: None,
            spread: None,
        }
    }

    /// Three rounds in which the machine got slower and faster: async-rwsem at 2x tokio in
    /// every round, whatever the absolute figures.
    fn rounds() -> Vec<Round> {
        let mk = |round: usize, base: f64| {
            let mut results = vec![
                case(
                    "async-rwsem",
                    2.0 * base,
                    0.5 + round as f64 / 10.0,
                    1000 * round as u64,
                ),
                case("tokio", base, 0.9, 500),
            ];
            crate::results::fill_ratios(&mut results);
            Round {
                round,
                started_unix: 0,
                results,
            }
        };
        vec![mk(1, 1000.0), mk(2, 4000.0), mk(3, 2000.0)]
    }

    #[test]
    fn summary_takes_medians_and_ratio_within_rounds() {
        let rounds = rounds();
        let keys = keys_of(&rounds);
        assert_eq!(
            keys,
            vec![
                ("mixed".to_string(), "async-rwsem".to_string()),
                ("mixed".to_string(), "tokio".to_string())
            ]
        );
        let s = summarize(&rounds, &keys);
        let rwsem = &s[0];
        assert_eq!(rwsem.total_ops_per_s, Some(4000.0));
        // The ratio is 2 in every round, so its median is 2 and its spread 1, although
        // the throughput itself moved 4x.
        assert!(close(rwsem.ratio_to_tokio.unwrap(), 2.0));
        let sp = rwsem.spread.unwrap();
        assert_eq!(sp.rounds, 3);
        assert!(close(sp.total_ops_per_s.unwrap(), 4.0));
        assert!(close(sp.ratio_to_tokio.unwrap(), 1.0));
        // Fairness 0.6, 0.7, 0.8: median 0.7; worst wait 1000, 2000, 3000: median 2000.
        assert!(close(rwsem.fairness.unwrap(), 0.7));
        assert_eq!(rwsem.wait_ns.unwrap().max, 2000);
        assert_eq!(rwsem.writer.unwrap().wait_ns.max, 2000);
        assert!(close(rwsem.reader.unwrap().share.unwrap(), 0.8));
        assert_eq!(rwsem.reader.unwrap().ops, 3200);
        let tokio = &s[1];
        assert_eq!(tokio.ratio_to_tokio, Some(1.0));
        assert_eq!(tokio.total_ops_per_s, Some(2000.0));
    }

    #[test]
    fn an_error_in_one_round_makes_the_case_an_error() {
        let mut rounds = rounds();
        let broken = &mut rounds[1].results[0];
        broken.status = Status::Error;
        broken.error = Some("lost update".into());
        let keys = keys_of(&rounds);
        let s = summarize(&rounds, &keys);
        assert_eq!(s[0].status, Status::Error);
        assert_eq!(s[0].error.as_deref(), Some("round 2: lost update"));
        assert_eq!(s[1].status, Status::Ok);
    }

    #[test]
    fn not_applicable_stays_not_applicable() {
        let na = CaseResult::not_applicable(crate::workloads::WorkloadId::RandomRw8x8, "x");
        let s = summarize_case(&[&na, &na]).unwrap();
        assert_eq!(s.status, Status::NotApplicable);
        assert!(s.spread.is_none());
    }

    #[test]
    fn keys_put_locks_in_canonical_order_whatever_the_round_order() {
        let mut rounds = rounds();
        rounds[0].results.reverse();
        let keys = keys_of(&rounds);
        assert_eq!(keys[0].1, "async-rwsem");
        assert_eq!(keys[1].1, "tokio");
    }

    #[test]
    fn json_round_trip_keeps_rounds_and_summary() {
        let rounds = rounds();
        let keys = keys_of(&rounds);
        let report = Report {
            machine: Machine {
                cores: 2,
                threads: 8,
                cpu: None,
                os: "linux x86_64".into(),
                git_rev: None,
                started_unix: 1,
            },
            config: crate::results::Config {
                duration_s: 0.4,
                warmup_s: 0.1,
                quick: true,
                repeat: 3,
                threads_per_core: Some(4.0),
                pinned: false,
                workloads: vec!["mixed".into()],
                locks: vec!["async-rwsem".into(), "tokio".into()],
                rwsem_policy: String::new(),
                busy_iters_per_us: 1,
            },
            results: summarize(&rounds, &keys),
            rounds: rounds.clone(),
        };
        let text = serde_json::to_string_pretty(&report).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back.rounds.len(), 3);
        assert_eq!(back.config.repeat, 3);
        assert_eq!(back.config.threads_per_core, Some(4.0));
        assert_eq!(back.results.len(), 2);
        assert_eq!(back.results[0].spread, report.results[0].spread);
        assert_eq!(back.rounds[1].results[0].total_ops_per_s, Some(8000.0));
        // The summary in the file is the one the rounds give.
        let again = summarize(&back.rounds, &keys_of(&back.rounds));
        assert_eq!(again[0].total_ops_per_s, back.results[0].total_ops_per_s);
        assert_eq!(again[0].ratio_to_tokio, back.results[0].ratio_to_tokio);
        // And the file says what it is: medians with spreads, rounds kept.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v["results"][0]["spread"]["total_ops_per_s"].is_number());
        assert_eq!(v["rounds"][2]["round"], 3);
        assert!(v["rounds"][0]["results"][0]["ratio_to_tokio"].is_number());
    }

    #[test]
    fn a_file_without_rounds_still_reads() {
        // A results file written before `--repeat` existed: no rounds, no repeat, no spread,
        // no class shares.
        let old = r#"{
          "machine": {"cores": 2, "threads": 2, "cpu": null, "os": "linux x86_64",
                      "git_rev": null, "started_unix": 1},
          "config": {"duration_s": 2.0, "warmup_s": 0.4, "quick": false,
                     "workloads": ["mixed"], "locks": ["tokio"],
                     "rwsem_policy": "", "busy_iters_per_us": 1},
          "results": [{"workload": "mixed", "lock": "tokio", "status": "ok",
                       "tasks": 64, "elapsed_s": 2.0, "total_ops_per_s": 1000.0,
                       "reader": {"tasks": 64, "ops": 1600, "ops_per_s": 800.0,
                                  "per_task_min": 20, "per_task_mean": 25.0,
                                  "per_task_max": 30,
                                  "wait_ns": {"samples": 1600, "p50": 1, "p99": 2, "max": 3}},
                       "fairness": 0.8, "ratio_to_tokio": 1.0}]
        }"#;
        let r: Report = serde_json::from_str(old).unwrap();
        assert_eq!(r.config.repeat, 1);
        assert!(r.rounds.is_empty());
        assert!(r.results[0].spread.is_none());
        assert_eq!(r.results[0].reader.unwrap().share, None);
    }
}
