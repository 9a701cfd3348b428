//! Side-by-side benchmark: `async_rwsem::RwLock` against `tokio::sync::RwLock`,
//! `async_lock::RwLock` and `parking_lot::RwLock` (taken from async tasks, never held across
//! an `.await`), on workloads drawn from the Linux kernel's rw_semaphore threads
//! (summarised, with their figures and addresses, in `docs/background.md`).
//!
//! ```text
//! cargo run --release -p bench                    # every workload, every lock
//! cargo run --release -p bench -- --quick           # the same in under a minute
//! cargo run --release -p bench -- --quick --check target/compare/results.json
//! cargo run --release -p bench -- --repeat 3        # 3 interleaved rounds: medians
//! cargo run --release -p bench -- --threads 4x      # 4 worker threads per core
//! cargo run --release -p bench -- --pin             # worker i on core i, whatever else runs
//! cargo run --release -p bench -- --sweep           # async-rwsem policy sweep
//! cargo run --release -p bench -- --fifo            # async-rwsem under Policy::fifo()
//! cargo run --release -p bench -- --handoff-timeout 500us   # another handoff timeout
//! cargo run --release -p bench -- --workload mixed,writers-240 --lock tokio
//! ```
//!
//! Each (workload, lock) case runs on a fresh tokio multi-thread runtime with `--threads`
//! workers (default: one per core; `--threads 4x` gives four per core, more workers than
//! cores, where a lock that spins on a descheduled owner shows it). All tasks are spawned and
//! held at a barrier, run a warm-up, then a measured window that a shared stop flag ends.
//! Each task counts its operations and records the wait of every acquire (the time from
//! asking for the lock to holding it) in its own HDR histogram; they are merged after the
//! run. Every section does real work on shared data and checks that writers are alone (see
//! `data.rs`): a broken lock is reported as an error, not as a fast one. A hang (tasks that
//! do not stop after the window) is reported too.
//!
//! Every task spends one unit of tokio's cooperative budget per operation, so it yields every
//! 128 operations even when its lock never makes it wait, as a kernel thread is preempted;
//! without it the per-task fairness figures would show the executor, not the lock.
//!
//! # Workloads
//!
//! | name | tasks | section | what it models (see `docs/background.md`) |
//! |---|---|---|---|
//! | `uncontended-read` | 1 reader | sum of 64 cells | the fast path: one atomic per acquire and per release (the 2013 optimisation thread: read the count before the cmpxchg) |
//! | `uncontended-write` | 1 writer | move a unit between 2 cells | the writer fast path, `cmpxchg(0, WRITER_LOCKED)` (the 2013 thread) |
//! | `read-mostly` | 64 tasks, 1% writes | +100 ns, 200 ns outside | the case an rwsem exists for: i_mmap as an rwsem under aim7 (the 2013 thread), lookups with rare updates |
//! | `mixed` | 64 tasks, 20% writes | +100 ns, 200 ns outside | a read/update mix like MongoDB/YCSB's workload A (the 2023 backport: reader spinning removed, +13% x86_64, +27% aarch64) |
//! | `writers-240` | 240 writers | 5 us | the handoff benchmark: 240 writers, 5 us section, min/mean/max ops per thread 1/7,792/173,696 without handoff, 5,842/6,542/7,458 with it (the 2019 handoff patch) |
//! | `mixed-40-40` | 40 readers + 40 writers | +100 ns, 100 ns outside | the same patch's mixed case: readers 1,793/1,794/1,796, writers 1,793/34,956/86,081; handoff at once collapsed it to 43/44/46 |
//! | `writers-240-tiny` | 240 writers | the data work alone (a few ns) | the convoy: sections so short that a task should never sleep on the lock, and a woken task should not lose the lock it was woken for |
//! | `mixed-40-40-tiny` | 40 readers + 40 writers | the data work alone, 100 ns outside | the mixed case with sections of a few ns |
//! | `randomrw-8-8` | 8 readers + 8 writers | awaits inside (one yield), +500 ns | filebench randomrw (8 readers, 8 writers) on a 2-CPU VM: on XFS, whose buffered reads take the file's rwsem shared, 435 reads/s beside 14,202 writes/s; on ext4, 2,031 beside 14,459 (the 2019 XFS thread) |
//! | `sysfs` | 1 writer per worker + 32 readers | readers +200 ns, writers +1 us, 500 ns outside | sysfs_bench: kernfs_activate (down_write) against kernfs_dop_revalidate (down_read), writers = CPUs; up to 50% lost in production, and ~6% (x86, 128 vCPUs) and ~23% (AArch64, 192 vCPUs) regained by restoring reader spinning (the 2025 report) |
//! | `readers-only` | 64 readers | +100 ns, 100 ns outside | read scaling with no writer at all: the count word's cache line is the only cost |
//! | `long-reader` | 1 reader holding 10 ms across an await, 4 writers, 16 readers | short | a snapshot or backup walking the data: writers queue behind it, and new readers must not starve them (the reason an rwsem queues new readers behind a waiting writer) |
//!
//! "+N ns" is calibrated busy work inside the section on top of the data work; "outside" is
//! the work a task does between two sections. `parking_lot` is skipped ("n/a") in the two
//! workloads that await inside the section. In the long-reader workload the long reader's
//! holds are counted apart (`long_reader_ops`), not in the reader figures.
//!
//! # Figures
//!
//! Per case: total ops/s; reads/s and writes/s with per-task min/mean/max operations (the
//! kernel's fairness figure) and each class's share of the operations (`r/w %`); acquire
//! wait p50/p99/max; `fairness` = per-task min ÷ mean (the lower of readers' and writers');
//! ratio of throughput to tokio's in the same workload. Printed as a table on stdout,
//! written as JSON (`results.json`), a Markdown report with every figure (`results.md`) and SVG
//! charts (`compare.svg`: ratio to tokio; `fairness.svg`) under `--out` (default: `compare/`
//! in the target folder, `$CARGO_TARGET_DIR/compare` when that is set; the absolute paths
//! are printed). The stdout table keeps to 100 columns: throughput, ratio to tokio, the
//! acquire wait p50/p99 of reads and of writes, the shares and the fairness. `--sweep` runs
//! async-rwsem alone over a grid of handoff timeouts and writer spin budgets and writes `sweep.json` and
//! `sweep.svg` (throughput against fairness).
//!
//! After the table come async-rwsem's cells against its goal (module [`goals`]): in every
//! workload at least tokio's throughput, each class's p99 wait at most 2x tokio's (or under
//! 10 us), each class at least a third of its fair share. The terminal gets the workloads
//! that miss it, `results.md` the whole table; `--replot FILE` gives both for an earlier run.
//!
//! # Repeated runs
//!
//! One run of a case is one sample of a noisy machine. `--repeat N` runs every case N times,
//! interleaved: round 1 runs every workload on every lock, then round 2, and so on (with the
//! lock order rotated by one per round), so that a slow stretch of the machine hits all locks
//! alike. The table then shows, per case, the median of each figure over the rounds and two
//! spreads (highest ÷ lowest over the rounds): of the throughput, and of the ratio to tokio,
//! which is computed within each round before its median is taken. The JSON keeps every
//! round as it ran (`rounds`) next to the summary (`results`, each entry with its
//! `spread`); `--check` checks both, and the summary against the rounds. Without
//! `--repeat` (or with `--repeat 1`) the JSON has the single-run form, without `rounds`.
//!
//! Exit status: 0; 1 when `--check` finds a problem; 2 when a lock broke an invariant or hung.

pub mod chart;
pub mod data;
pub mod goals;
pub mod locks;
pub mod repeat;
pub mod report;
pub mod results;
pub mod runner;
pub mod sweep;
pub mod workloads;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use crate::data::Shared;
use crate::locks::{AsyncRwLock as _, SyncRwLock as _};
use crate::results::{fill_ratios, CaseResult, Config, Machine, Report, Round, Status};
use crate::runner::{async_task, run_case, sync_task, Timing};
use crate::workloads::{Workload, WorkloadId};

/// The locks under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum LockKind {
    /// `async_rwsem::RwLock`, this crate.
    #[value(name = "async-rwsem", alias = "rwsem")]
    AsyncRwsem,
    /// `tokio::sync::RwLock`.
    #[value(name = "tokio")]
    Tokio,
    /// `async_lock::RwLock`.
    #[value(name = "async-lock")]
    AsyncLock,
    /// `parking_lot::RwLock`, used without an `.await` in the section.
    #[value(name = "parking_lot", alias = "parking-lot")]
    ParkingLot,
}

impl LockKind {
    /// Every lock, in run order.
    pub const ALL: [LockKind; 4] = [
        LockKind::AsyncRwsem,
        LockKind::Tokio,
        LockKind::AsyncLock,
        LockKind::ParkingLot,
    ];

    /// The name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::AsyncRwsem => "async-rwsem",
            LockKind::Tokio => "tokio",
            LockKind::AsyncLock => "async-lock",
            LockKind::ParkingLot => "parking_lot",
        }
    }

    /// Looks a lock up by [`LockKind::name`].
    pub fn from_name(name: &str) -> Option<LockKind> {
        Self::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Whether its guard may be held across an `.await`.
    pub fn is_async(self) -> bool {
        self != LockKind::ParkingLot
    }
}

/// Parses `2`, `1.5s`, `500ms`, `250us` into a duration.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (try 2, 1.5s, 500ms)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("`{s}`: the duration must be positive"));
    }
    Duration::try_from_secs_f64(v * scale).map_err(|e| format!("`{s}`: {e}"))
}

/// Parses a worker thread count: `8`, or `4x` for four per core.
fn parse_threads(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let n = match s.strip_suffix(['x', 'X']) {
        Some(k) => k
            .trim()
            .parse::<usize>()
            .ok()
            .map(|k| k.saturating_mul(cores())),
        None => s.parse::<usize>().ok(),
    };
    match n {
        Some(n) if (1..=1024).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{s}`: give a thread count from 1 to 1024, or `Nx` for N per core (e.g. 4x)"
        )),
    }
}

/// Side-by-side benchmark of async-rwsem against tokio, async-lock and parking_lot.
#[derive(Debug, Parser)]
#[command(name = "compare", long_about = None)]
pub struct Cli {
    /// Measured window per case (e.g. 2, 1.5s, 500ms). Default 2s; 0.4s with --quick;
    /// 1s per point with --sweep.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Warm-up before each window. Default: a fifth of the window, at most 500ms.
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,

    /// Tokio worker threads per runtime: a number, or Nx for N per core (4x: more workers
    /// than cores). Default: one per core.
    #[arg(long, visible_alias = "workers", value_name = "N|Nx", value_parser = parse_threads)]
    pub threads: Option<usize>,

    /// Pin each tokio worker to a core of its own (worker i on core i mod cores). Without
    /// it the kernel places the workers, and beside other runnable work (a busy loop per
    /// core) it moves them onto one core and back at random moments: two workers on one
    /// core run these workloads up to twice as fast as on two (no cache line crosses
    /// cores), which swings a run's ratio to another lock's run by more than the locks
    /// differ (`docs/performance.md`, round twelve).
    #[arg(long)]
    pub pin: bool,

    /// Workloads to run (repeat the flag or separate with commas). Default: all.
    #[arg(long = "workload", value_enum, value_delimiter = ',')]
    pub workloads: Vec<WorkloadId>,

    /// Locks to run (repeat the flag or separate with commas). Default: all.
    #[arg(long = "lock", value_enum, value_delimiter = ',')]
    pub locks: Vec<LockKind>,

    /// Short windows: the whole comparison in under a minute on two cores.
    #[arg(long)]
    pub quick: bool,

    /// Run every case N times, interleaved (every case of round 1, then round 2, ...), and
    /// report per case the median of each figure and the spread (max/min) of the
    /// throughput and of the ratio to tokio. The JSON keeps every round.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=1000),
        conflicts_with = "sweep"
    )]
    pub repeat: u32,

    /// Run the async-rwsem policy sweep (handoff timeout x writer spin) instead.
    #[arg(long)]
    pub sweep: bool,

    /// Run async-rwsem under `Policy::fifo()` (tokio's strict order) instead of the default
    /// policy: what the strict order costs, as the ratio to tokio against a run without it.
    #[arg(long, conflicts_with = "sweep")]
    pub fifo: bool,

    /// Run async-rwsem with this handoff timeout (e.g. `500us`) instead of the default
    /// policy's: one side of an A/B of the timeout, the other a run without the flag.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        conflicts_with_all = ["sweep", "fifo"]
    )]
    pub handoff_timeout: Option<Duration>,

    /// Run async-rwsem with this `Policy::pass_bound` (a number, or `none` for no bound in
    /// count) instead of the default policy's: one side of an A/B of the bound.
    #[arg(
        long,
        value_name = "N|none",
        value_parser = lock_adapters::parse_pass_bound,
        conflicts_with_all = ["sweep", "fifo"]
    )]
    pub pass_bound: Option<u32>,

    /// Run async-rwsem under this policy: `fifo` or `default`, then `name=value` settings
    /// (e.g. `handoff-timeout=25us,pass-bound=none,writer-spin=0`; the names:
    /// `lock_adapters::policy`). --handoff-timeout and --pass-bound apply on top of it.
    #[arg(
        long,
        value_name = "SPEC",
        value_parser = lock_adapters::parse_policy,
        conflicts_with_all = ["sweep", "fifo"]
    )]
    pub policy: Option<sweep::RwsemPolicy>,

    /// Where to write the JSON results. Default: <out>/results.json (<out>/sweep.json).
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Folder for the JSON, the Markdown report and the SVG charts. Default: `compare/`
    /// in the target folder (`$CARGO_TARGET_DIR` when set).
    #[arg(long, value_name = "DIR", default_value_os_t = default_out_dir())]
    pub out: PathBuf,

    /// Check a results file for sanity (every workload and lock present, numbers positive,
    /// no errors) after the run; the run writes its JSON there unless --json says otherwise.
    #[arg(long, value_name = "PATH")]
    pub check: Option<PathBuf>,

    /// Only check the file given with --check; run nothing.
    #[arg(long, requires = "check")]
    pub check_only: bool,

    /// Time one acquire in N (1: every acquire). Default: every acquire, one in 16 in the
    /// uncontended workloads (two clock reads cost about 40 ns).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub time_every: Option<u64>,

    /// Run nothing: print the table and redraw the charts (into --out) from a results file
    /// (or a sweep file).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["sweep", "check_only"])]
    pub replot: Option<PathBuf>,
}

impl Cli {
    /// The window and warm-up, from the flags and the mode.
    pub fn timing(&self, default: Duration, quick: Duration) -> Timing {
        let duration = self
            .duration
            .unwrap_or(if self.quick { quick } else { default });
        let warmup = self.warmup.unwrap_or_else(|| {
            if self.quick {
                Duration::from_millis(100).min(duration)
            } else {
                (duration / 5).min(Duration::from_millis(500))
            }
        });
        Timing {
            warmup,
            duration,
            pin: self.pin,
        }
    }

    /// The workload `id` for `threads` workers, with the flags applied.
    pub fn workload(&self, id: WorkloadId, threads: usize) -> Workload {
        let mut w = Workload::new(id, threads);
        if let Some(n) = self.time_every {
            w.time_every = n;
        }
        w
    }

    /// The async-rwsem policy of a comparison run: `None` for the default.
    pub fn policy(&self) -> Option<sweep::RwsemPolicy> {
        let base = self
            .policy
            .or_else(|| self.fifo.then(sweep::RwsemPolicy::fifo));
        let policy = match self.handoff_timeout {
            Some(t) => Some(base.unwrap_or_default().handoff_timeout(t)),
            None => base,
        };
        match self.pass_bound {
            Some(bound) => Some(policy.unwrap_or_default().pass_bound(bound)),
            None => policy,
        }
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.threads.unwrap_or_else(cores)
    }

    /// The selected workloads, in run order.
    pub fn selected_workloads(&self, default: &[WorkloadId]) -> Vec<WorkloadId> {
        let mut w = if self.workloads.is_empty() {
            default.to_vec()
        } else {
            self.workloads.clone()
        };
        w.sort();
        w.dedup();
        w
    }

    /// The selected locks, in run order.
    pub fn selected_locks(&self) -> Vec<LockKind> {
        let mut l = if self.locks.is_empty() {
            LockKind::ALL.to_vec()
        } else {
            self.locks.clone()
        };
        l.sort();
        l.dedup();
        l
    }
}

/// `--out`'s default: `$CARGO_TARGET_DIR/compare` when that is set, else `compare/` in the
/// target folder this binary was built into (`<target>/release/compare` is the binary),
/// else `target/compare`; absolute.
pub fn default_out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.to_path_buf())
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    absolute(&target.join("compare"))
}

/// `path` made absolute against the current folder (as given when that fails).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `available_parallelism`, or 1.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
}

fn git_rev() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut rev = String::from_utf8(out.stdout).ok()?.trim().to_string();
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    if dirty {
        rev.push_str("-dirty");
    }
    Some(rev)
}

/// Machine description for the JSON.
pub fn machine(threads: usize) -> Machine {
    Machine {
        cores: cores(),
        threads,
        cpu: cpu_model(),
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
        git_rev: git_rev(),
        started_unix: now_unix(),
    }
}

/// Seconds since the epoch.
fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Progress on stderr: a bar on a terminal, one line per case otherwise (CI logs).
pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    done: u64,
}

impl Progress {
    /// `total` cases.
    pub fn new(total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{bar:30.cyan/blue} {pos}/{len} [{elapsed_precise}, ~{eta} left] {msg}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Self {
            bar,
            total,
            done: 0,
        }
    }

    /// A case starts.
    pub fn start(&self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(what.to_string());
        }
    }

    /// A case ended with `summary`.
    pub fn finish(&mut self, what: &str, summary: &str) {
        self.done += 1;
        let line = format!("[{}/{}] {what}: {summary}", self.done, self.total);
        match &self.bar {
            Some(bar) => {
                bar.println(line);
                bar.inc(1);
            }
            None => eprintln!("{line}"),
        }
    }

    /// All done.
    pub fn close(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// One-line summary of a case for the progress output.
pub fn summary(r: &CaseResult) -> String {
    match r.status {
        Status::Ok => format!(
            "{} ops/s, fairness {}{}",
            report::si(r.total_ops_per_s.unwrap_or(0.0)),
            r.fairness
                .map(|f| format!("{f:.2}"))
                .unwrap_or_else(|| "-".into()),
            r.cores_busy
                .map(|c| format!(", {c:.2} cores busy"))
                .unwrap_or_default()
        ),
        Status::NotApplicable => "n/a".into(),
        Status::Error => format!("ERROR: {}", r.error.as_deref().unwrap_or("")),
    }
}

/// Runs one (workload, lock) case and returns its figures.
pub fn run_one(
    w: &Workload,
    lock: LockKind,
    threads: usize,
    timing: Timing,
    policy: Option<sweep::RwsemPolicy>,
) -> CaseResult {
    let name = lock.name();
    let measured = match (lock, w.awaits()) {
        (LockKind::ParkingLot, true) => return CaseResult::not_applicable(w.id, name),
        (LockKind::ParkingLot, false) => run_case(
            w,
            threads,
            timing,
            || locks::ParkingLot::new(Shared::new()),
            sync_task,
        ),
        (LockKind::Tokio, false) => run_case(
            w,
            threads,
            timing,
            || locks::Tokio::new(Shared::new()),
            sync_task,
        ),
        (LockKind::Tokio, true) => run_case(
            w,
            threads,
            timing,
            || locks::Tokio::new(Shared::new()),
            async_task,
        ),
        (LockKind::AsyncLock, false) => run_case(
            w,
            threads,
            timing,
            || locks::AsyncLockRw::new(Shared::new()),
            sync_task,
        ),
        (LockKind::AsyncLock, true) => run_case(
            w,
            threads,
            timing,
            || locks::AsyncLockRw::new(Shared::new()),
            async_task,
        ),
        (LockKind::AsyncRwsem, awaits) => sweep::run_rwsem(w, threads, timing, policy, awaits),
    };
    match measured {
        Ok(m) => CaseResult::measured(w, name, &m),
        Err(e) => CaseResult::error(w.id, name, e),
    }
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| format!("JSON: {e}"))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn compare(cli: &Cli) -> Result<bool, String> {
    let threads = cli.threads();
    let timing = cli.timing(Duration::from_secs(2), Duration::from_millis(400));
    let workloads = cli.selected_workloads(&WorkloadId::ALL);
    let locks = cli.selected_locks();
    let iters = data::iters_per_us();
    let t = std::time::Instant::now();
    data::Busy::ns(5_000).run();
    eprintln!(
        "compare: busy work calibrated at {iters} iterations/us (a 5 us section took {:.1} us)",
        t.elapsed().as_secs_f64() * 1e6
    );
    let repeat = cli.repeat as usize;
    let over = if threads > cores() {
        let per_core = format!("{:.2}", threads as f64 / cores() as f64);
        let per_core = per_core.trim_end_matches('0').trim_end_matches('.');
        format!(" ({per_core} per core: more workers than cores)")
    } else {
        String::new()
    };
    eprintln!(
        "compare: {} workload(s) x {} lock(s){}, {} worker thread(s) on {} core(s){over}, \
         {:.2}s window + {:.2}s warm-up per case",
        workloads.len(),
        locks.len(),
        if repeat > 1 {
            format!(" x {repeat} interleaved rounds")
        } else {
            String::new()
        },
        threads,
        cores(),
        timing.duration.as_secs_f64(),
        timing.warmup.as_secs_f64()
    );
    let mut progress = Progress::new((repeat * workloads.len() * locks.len()) as u64);
    let mut rounds = Vec::with_capacity(repeat);
    for round in 1..=repeat {
        let started_unix = now_unix();
        let order = repeat::round_order(&locks, round);
        let mut results = Vec::new();
        for &wid in &workloads {
            let w = cli.workload(wid, threads);
            for &lock in &order {
                let what = if repeat > 1 {
                    format!("round {round}/{repeat}: {} / {}", wid.name(), lock.name())
                } else {
                    format!("{} / {}", wid.name(), lock.name())
                };
                progress.start(&what);
                let r = run_one(&w, lock, threads, timing, cli.policy());
                progress.finish(&what, &summary(&r));
                results.push(r);
            }
        }
        fill_ratios(&mut results);
        rounds.push(Round {
            round,
            started_unix,
            results,
        });
    }
    progress.close();
    let (results, rounds) = if repeat == 1 {
        (
            rounds.pop().map(|r| r.results).unwrap_or_default(),
            Vec::new(),
        )
    } else {
        let keys = repeat::keys_of(&rounds);
        (repeat::summarize(&rounds, &keys), rounds)
    };
    let failed = results.iter().any(|r| r.status == Status::Error);

    println!("{}", report::table(&results));
    if let Some(g) = goals::summary(&results, LockKind::AsyncRwsem.name(), threads) {
        println!("{g}");
    }
    if timing.duration < Duration::from_secs(1) {
        println!(
            "note: windows under 1 s (--quick) check that the tool and the locks work; the \
             per-task figures\nneed the full run (in writers-240 one scheduling round of \
             240 tasks takes a sizeable part of\na short window)."
        );
    }
    let report = Report {
        machine: machine(threads),
        config: Config {
            duration_s: timing.duration.as_secs_f64(),
            warmup_s: timing.warmup.as_secs_f64(),
            quick: cli.quick,
            repeat,
            threads_per_core: Some(threads as f64 / cores() as f64),
            pinned: cli.pin,
            workloads: workloads.iter().map(|w| w.name().to_string()).collect(),
            locks: locks.iter().map(|l| l.name().to_string()).collect(),
            rwsem_policy: format!("{:?}", cli.policy().unwrap_or_default()),
            busy_iters_per_us: iters,
        },
        results,
        rounds,
    };
    let json = cli
        .json
        .clone()
        .or_else(|| cli.check.clone())
        .unwrap_or_else(|| cli.out.join("results.json"));
    write_json(&json, &report)?;
    let (ratio, fair, md) = draw_charts(&report, &cli.out)?;
    eprintln!("wrote {}", absolute(&json).display());
    eprintln!(
        "  and {}, {}, {}",
        md.display(),
        ratio.display(),
        fair.display()
    );
    Ok(!failed)
}

/// Writes `results.md` (every figure) and draws `compare.svg` and `fairness.svg` for
/// `report` into `out`; returns their absolute paths.
fn draw_charts(report: &Report, out: &Path) -> Result<(PathBuf, PathBuf, PathBuf), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let out = &absolute(out);
    let cpu = report
        .machine
        .cpu
        .as_deref()
        .map(|c| format!(", {c}"))
        .unwrap_or_default();
    let rounds = if report.rounds.is_empty() {
        ", one run (--repeat N shows the spread)".to_string()
    } else {
        format!(", medians of {} rounds", report.rounds.len())
    };
    let subtitle = format!(
        "{} threads on {} cores{cpu}, {:.1}s per case{rounds}",
        report.machine.threads, report.machine.cores, report.config.duration_s
    );
    let ratio = out.join("compare.svg");
    let fair = out.join("fairness.svg");
    chart::ratio_chart(&ratio, &report.results, &subtitle)?;
    chart::fairness_chart(&fair, &report.results, &subtitle)?;
    let md = out.join("results.md");
    let mut text = report::markdown(report);
    if let Some(g) = goals::markdown(
        &report.results,
        LockKind::AsyncRwsem.name(),
        report.machine.threads,
    ) {
        text.push('\n');
        text.push_str(&g);
    }
    std::fs::write(&md, text).map_err(|e| format!("cannot write {}: {e}", md.display()))?;
    Ok((ratio, fair, md))
}

fn replot(path: &Path, out: &Path) -> Result<bool, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let report: Report = match serde_json::from_str(&text) {
        Ok(report) => report,
        Err(e) => {
            return match serde_json::from_str::<sweep::SweepReport>(&text) {
                Ok(s) => sweep::replot(&s, out),
                Err(_) => Err(format!(
                    "{} is neither a results nor a sweep file: {e}",
                    path.display()
                )),
            };
        }
    };
    println!("{}", report::table(&report.results));
    if let Some(g) = goals::summary(
        &report.results,
        LockKind::AsyncRwsem.name(),
        report.machine.threads,
    ) {
        println!("{g}");
    }
    let (ratio, fair, md) = draw_charts(&report, out)?;
    eprintln!(
        "wrote {}, {} and {}",
        md.display(),
        ratio.display(),
        fair.display()
    );
    Ok(true)
}

fn run_check(path: &Path) -> ExitCode {
    match report::check(path) {
        Ok(problems) if problems.is_empty() => {
            eprintln!("check: {} is sane", path.display());
            ExitCode::SUCCESS
        }
        Ok(problems) => {
            for p in &problems {
                eprintln!("check: {p}");
            }
            eprintln!("check: {} problem(s) in {}", problems.len(), path.display());
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("check: {e}");
            ExitCode::from(1)
        }
    }
}

/// The `compare` binary: parses the command line and runs what it asks for.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.check_only {
        if let Some(path) = &cli.check {
            return run_check(path);
        }
    }
    let ran = if let Some(path) = &cli.replot {
        replot(path, &cli.out)
    } else if cli.sweep {
        sweep::sweep(&cli)
    } else {
        compare(&cli)
    };
    let healthy = match ran {
        Ok(healthy) => healthy,
        Err(e) => {
            eprintln!("compare: {e}");
            return ExitCode::from(1);
        }
    };
    if let (Some(path), false) = (&cli.check, cli.sweep) {
        let code = run_check(path);
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    if healthy {
        ExitCode::SUCCESS
    } else {
        eprintln!("compare: a lock broke an invariant or hung (see ERROR above)");
        ExitCode::from(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_take_a_count_or_a_multiple_of_the_cores() {
        assert_eq!(parse_threads("8"), Ok(8));
        assert_eq!(parse_threads("4x"), Ok(4 * cores()));
        assert!(parse_threads("0").is_err());
        assert!(parse_threads("0x").is_err());
        assert!(parse_threads("x").is_err());
        assert!(parse_threads("2000").is_err());
    }

    #[test]
    fn repeat_and_workers_parse() {
        let cli = Cli::try_parse_from(["compare", "--quick", "--repeat", "3", "--workers", "4x"])
            .unwrap();
        assert_eq!(cli.repeat, 3);
        assert!(cli.quick);
        assert_eq!(cli.threads(), 4 * cores());
        assert_eq!(Cli::try_parse_from(["compare"]).unwrap().repeat, 1);
        assert!(Cli::try_parse_from(["compare", "--repeat", "0"]).is_err());
        assert!(Cli::try_parse_from(["compare", "--repeat", "2", "--sweep"]).is_err());
        // --sweep alone is not in conflict with the default of --repeat.
        assert!(Cli::try_parse_from(["compare", "--sweep"]).is_ok());
    }
}
