//! Plain threads on one lock: W writer and R reader threads, each taking the lock in a loop
//! around one pass over a small array (16 `u64`), through `blocking_write`/`blocking_read`
//! for the async locks and `write`/`read` for `parking_lot`. What the issue 31 harness
//! measures: whether a writer starves among reader threads, whether each class gets its
//! share, and how far the lock is from a sync lock.
//!
//! ```text
//! cargo run --release -p bench --bin threads -- --writers 1 --readers 4
//! cargo run --release -p bench --bin threads -- --writers 4 --readers 4 --lock async-rwsem
//! ```
//!
//! `--lock all` (the default) runs `--runs` rounds (default 3), each round every lock once,
//! the lock order rotated by one per round, so that a slow stretch of a shared machine hits
//! every lock alike. Per lock it prints the median over the rounds of writes/s, reads/s,
//! total ops/s and each class's share of the operations, and the ratios of its total to
//! tokio's and to parking_lot's, computed within each round before the median is taken. The
//! load average is printed before and after: quote it with the figures.
//!
//! Every writer adds one to every cell, so a reader that sees two cells differ saw a
//! writer beside it: the run stops with exit status 2.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use bench::repeat::{median, round_order};
use bench::report::si;
use clap::{Parser, ValueEnum};

/// Cells in the shared array: a section is one pass over them.
const CELLS: usize = 16;

/// W writer and R reader threads on one lock; per-class throughput and shares.
#[derive(Parser, Debug)]
struct Args {
    /// Writer threads.
    #[arg(long, default_value_t = 1)]
    writers: usize,
    /// Reader threads.
    #[arg(long, default_value_t = 4)]
    readers: usize,
    /// The measured window of one run, seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// The lock, or `all`: every lock, in interleaved rounds.
    #[arg(long, value_enum, default_value_t = LockArg::All)]
    lock: LockArg,
    /// Rounds (each runs every selected lock once).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// async-rwsem's `Policy::pass_bound` (a number, or `none`): one side of an A/B of
    /// the bound from threads. Default: the default policy's.
    #[arg(long, value_name = "N|none", value_parser = lock_adapters::parse_pass_bound)]
    pass_bound: Option<u32>,
    /// async-rwsem's `Policy::handoff_timeout`, microseconds: one side of an A/B of the
    /// timeout that serves a parked head. Default: the default policy's.
    #[arg(long, value_name = "US")]
    handoff_us: Option<u64>,
    /// async-rwsem's policy: `fifo` or `default`, then `name=value` settings (the names:
    /// `lock_adapters::policy`); --pass-bound and --handoff-us apply on top of it.
    #[arg(long, value_name = "SPEC", value_parser = lock_adapters::parse_policy)]
    policy: Option<async_rwsem::Policy>,
}

/// async-rwsem's policy for this run (`--policy`, `--pass-bound`, `--handoff-us`), set once
/// by `main`.
static RWSEM_POLICY: std::sync::OnceLock<async_rwsem::Policy> = std::sync::OnceLock::new();

/// Which lock to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LockArg {
    /// `async_rwsem::RwLock` (default policy), `blocking_read`/`blocking_write`.
    #[value(name = "async-rwsem")]
    AsyncRwsem,
    /// `tokio::sync::RwLock`, `blocking_read`/`blocking_write`.
    Tokio,
    /// `parking_lot::RwLock`.
    #[value(name = "parking_lot")]
    ParkingLot,
    /// All three.
    All,
}

impl LockArg {
    /// The locks in their canonical order.
    const LOCKS: [LockArg; 3] = [LockArg::AsyncRwsem, LockArg::Tokio, LockArg::ParkingLot];

    fn name(self) -> &'static str {
        match self {
            LockArg::AsyncRwsem => "async-rwsem",
            LockArg::Tokio => "tokio",
            LockArg::ParkingLot => "parking_lot",
            LockArg::All => "all",
        }
    }
}

/// A lock taken from plain threads, the section passed in.
trait ThreadLock: Send + Sync + 'static {
    fn new() -> Self;
    fn read<R>(&self, f: impl FnOnce(&[u64; CELLS]) -> R) -> R;
    fn write(&self, f: impl FnOnce(&mut [u64; CELLS]));
    /// The lock's events, where it counts them (async-rwsem with the feature `stats`).
    fn events(&self) -> Option<String> {
        None
    }
}

impl ThreadLock for async_rwsem::RwLock<[u64; CELLS]> {
    fn new() -> Self {
        async_rwsem::RwLock::with_policy(
            [0; CELLS],
            RWSEM_POLICY.get().copied().unwrap_or_default(),
        )
    }
    fn read<R>(&self, f: impl FnOnce(&[u64; CELLS]) -> R) -> R {
        f(&self.blocking_read())
    }
    fn write(&self, f: impl FnOnce(&mut [u64; CELLS])) {
        f(&mut self.blocking_write());
    }
    #[cfg(feature = "stats")]
    fn events(&self) -> Option<String> {
        let events: Vec<String> = self
            .stats()
            .counters()
            .filter(|&(_, n)| n != 0)
            .map(|(name, n)| format!("{name}={n}"))
            .collect();
        Some(events.join(" "))
    }
}

impl ThreadLock for tokio::sync::RwLock<[u64; CELLS]> {
    fn new() -> Self {
        tokio::sync::RwLock::new([0; CELLS])
    }
    fn read<R>(&self, f: impl FnOnce(&[u64; CELLS]) -> R) -> R {
        f(&self.blocking_read())
    }
    fn write(&self, f: impl FnOnce(&mut [u64; CELLS])) {
        f(&mut self.blocking_write());
    }
}

impl ThreadLock for parking_lot::RwLock<[u64; CELLS]> {
    fn new() -> Self {
        parking_lot::RwLock::new([0; CELLS])
    }
    fn read<R>(&self, f: impl FnOnce(&[u64; CELLS]) -> R) -> R {
        f(&self.read())
    }
    fn write(&self, f: impl FnOnce(&mut [u64; CELLS])) {
        f(&mut self.write());
    }
}

/// One run of one lock.
#[derive(Clone, Copy, Debug)]
struct Run {
    writes_per_s: f64,
    reads_per_s: f64,
    /// Fewest operations one writer thread did.
    writer_min: u64,
    /// Fewest operations one reader thread did.
    reader_min: u64,
}

impl Run {
    fn total(&self) -> f64 {
        self.writes_per_s + self.reads_per_s
    }

    fn write_share(&self) -> f64 {
        if self.total() > 0.0 {
            self.writes_per_s / self.total()
        } else {
            0.0
        }
    }
}

fn run<L: ThreadLock>(writers: usize, readers: usize, window: Duration) -> Run {
    let lock = Arc::new(L::new());
    let stop = Arc::new(AtomicBool::new(false));
    let torn = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(writers + readers + 1));
    let counts: Arc<Vec<AtomicU64>> =
        Arc::new((0..writers + readers).map(|_| AtomicU64::new(0)).collect());
    let handles: Vec<_> = (0..writers + readers)
        .map(|i| {
            let (lock, stop, torn, barrier, counts) = (
                lock.clone(),
                stop.clone(),
                torn.clone(),
                barrier.clone(),
                counts.clone(),
            );
            thread::spawn(move || {
                barrier.wait();
                let mut ops = 0u64;
                while !stop.load(Relaxed) {
                    if i < writers {
                        lock.write(|cells| {
                            for c in cells.iter_mut() {
                                *c = black_box(*c + 1);
                            }
                        });
                    } else {
                        let sum_ok = lock.read(|cells| {
                            let first = cells[0];
                            let mut same = true;
                            for c in cells.iter() {
                                same &= black_box(*c) == first;
                            }
                            same
                        });
                        if !sum_ok {
                            torn.store(true, Relaxed);
                        }
                    }
                    ops += 1;
                }
                counts[i].store(ops, Relaxed);
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    thread::sleep(window);
    stop.store(true, Relaxed);
    for h in handles {
        h.join().expect("a thread panicked");
    }
    // With the feature `stats` and `THREADS_STATS=1`: async-rwsem's lock events over the
    // run (`THREADS_STATS=1 cargo run --release -p bench --features stats --bin threads`).
    if let (Some(events), Some(_)) = (lock.events(), std::env::var_os("THREADS_STATS")) {
        eprintln!("async-rwsem lock events: {events}");
    }
    let secs = start.elapsed().as_secs_f64();
    if torn.load(Relaxed) {
        eprintln!("a reader saw a writer beside it: the lock is broken");
        std::process::exit(2);
    }
    let ops: Vec<u64> = counts.iter().map(|c| c.load(Relaxed)).collect();
    let (w, r) = ops.split_at(writers);
    Run {
        writes_per_s: w.iter().sum::<u64>() as f64 / secs,
        reads_per_s: r.iter().sum::<u64>() as f64 / secs,
        writer_min: w.iter().copied().min().unwrap_or(0),
        reader_min: r.iter().copied().min().unwrap_or(0),
    }
}

fn run_lock(lock: LockArg, args: &Args) -> Run {
    let window = Duration::from_secs_f64(args.seconds);
    match lock {
        LockArg::AsyncRwsem => {
            run::<async_rwsem::RwLock<[u64; CELLS]>>(args.writers, args.readers, window)
        }
        LockArg::Tokio => {
            run::<tokio::sync::RwLock<[u64; CELLS]>>(args.writers, args.readers, window)
        }
        LockArg::ParkingLot => {
            run::<parking_lot::RwLock<[u64; CELLS]>>(args.writers, args.readers, window)
        }
        LockArg::All => unreachable!("expanded by main"),
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let args = Args::parse();
    if args.pass_bound.is_some() || args.handoff_us.is_some() || args.policy.is_some() {
        let mut policy = args.policy.unwrap_or_default();
        if let Some(bound) = args.pass_bound {
            policy = policy.pass_bound(bound);
        }
        if let Some(us) = args.handoff_us {
            policy = policy.handoff_timeout(Duration::from_micros(us));
        }
        let _ = RWSEM_POLICY.set(policy);
    }
    let locks: Vec<LockArg> = if args.lock == LockArg::All {
        LockArg::LOCKS.to_vec()
    } else {
        vec![args.lock]
    };
    println!(
        "{} writer(s) + {} reader(s), {} s per run, {} round(s); load average {}",
        args.writers,
        args.readers,
        args.seconds,
        args.runs,
        loadavg()
    );
    // rounds[r][k]: round r's run of locks[k].
    let mut rounds: Vec<Vec<Run>> = Vec::new();
    for round in 1..=args.runs.max(1) {
        let mut runs: Vec<Option<Run>> = vec![None; locks.len()];
        for lock in round_order(&locks, round) {
            let k = locks
                .iter()
                .position(|l| *l == lock)
                .expect("a selected lock");
            let r = run_lock(lock, &args);
            println!(
                "round {round} {:12} writes/s {:>8} reads/s {:>8} writes {:5.1}% (min per thread: w {}, r {})",
                lock.name(),
                si(r.writes_per_s),
                si(r.reads_per_s),
                100.0 * r.write_share(),
                r.writer_min,
                r.reader_min
            );
            runs[k] = Some(r);
        }
        rounds.push(
            runs.into_iter()
                .map(|r| r.expect("every lock ran"))
                .collect(),
        );
    }
    let pos = |l: LockArg| locks.iter().position(|x| *x == l);
    let med = |f: &dyn Fn(&[Run]) -> Option<f64>| -> Option<f64> {
        let v: Option<Vec<f64>> = rounds.iter().map(|r| f(r)).collect();
        median(&v?)
    };
    let cell = |x: Option<f64>, fmt: &dyn Fn(f64) -> String| x.map_or("-".into(), fmt);
    println!(
        "\nmedians of {} round(s); load average {}",
        rounds.len(),
        loadavg()
    );
    println!(
        "{:12} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "lock", "writes/s", "reads/s", "total/s", "writes%", "reads%", "x tokio", "x p_lot"
    );
    for (k, lock) in locks.iter().enumerate() {
        let ratio = |base: Option<usize>| {
            base.and_then(|b| med(&|r: &[Run]| Some(r[k].total() / r[b].total())))
        };
        let wshare = med(&|r: &[Run]| Some(100.0 * r[k].write_share()));
        println!(
            "{:12} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8}",
            lock.name(),
            si(med(&|r: &[Run]| Some(r[k].writes_per_s)).unwrap_or(0.0)),
            si(med(&|r: &[Run]| Some(r[k].reads_per_s)).unwrap_or(0.0)),
            si(med(&|r: &[Run]| Some(r[k].total())).unwrap_or(0.0)),
            cell(wshare, &|x| format!("{x:.1}")),
            cell(wshare.map(|w| 100.0 - w), &|x| format!("{x:.1}")),
            cell(ratio(pos(LockArg::Tokio)), &|x| format!("{x:.3}")),
            cell(ratio(pos(LockArg::ParkingLot)), &|x| format!("{x:.3}")),
        );
    }
}
