//! Runs one (workload, lock) case: a fresh multi-thread runtime, every task spawned and held
//! at a barrier, a warm-up, a measured window ended by a shared stop flag, then the per-task
//! counts and wait histograms are collected (each task keeps its own; they are merged after
//! the run, so measuring adds no contention).

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::data::Busy;
use crate::locks::{AsyncLock, Lock};
use crate::workloads::{Role, Workload};

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// How long to warm up and to measure, and where the workers run.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Before the window: tasks run, nothing is counted.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Pin worker `i` to core `i mod cores` (`--pin`), so that the kernel's scheduler
    /// cannot move the workers onto one core in the middle of a run.
    pub pin: bool,
}

/// A wait histogram in nanoseconds (1 ns to 100 s, 3 significant digits).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// What a task did in the measured window.
#[derive(Debug)]
pub struct TaskOut {
    /// Its role.
    pub role: Role,
    /// Read sections completed in the window.
    pub reads: u64,
    /// Write sections completed in the window.
    pub writes: u64,
    /// Write sections completed in all (warm-up included): checked against the data.
    pub all_writes: u64,
    /// Read-acquire waits (timed ones), ns.
    pub read_wait: Histogram<u64>,
    /// Write-acquire waits (timed ones), ns.
    pub write_wait: Histogram<u64>,
}

impl TaskOut {
    fn new(role: Role) -> Self {
        Self {
            role,
            reads: 0,
            writes: 0,
            all_writes: 0,
            read_wait: new_histogram(),
            write_wait: new_histogram(),
        }
    }
}

/// What one task needs to know.
#[derive(Clone, Debug)]
pub struct TaskCtx {
    id: u64,
    role: Role,
    read_busy: Busy,
    write_busy: Busy,
    think: Busy,
    time_every: u64,
    phase: Arc<AtomicU8>,
    start: Arc<tokio::sync::Barrier>,
}

/// The raw outcome of a case.
#[derive(Debug)]
pub struct Measured {
    /// Length of the measured window.
    pub elapsed: Duration,
    /// The process's CPU time over the window (every thread's), where the platform says.
    pub cpu: Option<Duration>,
    /// One entry per task.
    pub tasks: Vec<TaskOut>,
}

/// The CPU time of the whole process so far (`CLOCK_PROCESS_CPUTIME_ID`): its threads'
/// user and system time together. `None` where the platform has no such clock.
pub fn process_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call's duration.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Per-op bookkeeping shared by the task bodies.
struct Op {
    measuring: bool,
    timed: bool,
    write: bool,
}

fn next_op(ctx: &TaskCtx, rng: &mut SmallRng, n: &mut u64) -> Option<Op> {
    let phase = ctx.phase.load(Ordering::Relaxed);
    if phase == STOP {
        return None;
    }
    let measuring = phase == MEASURE;
    *n += 1;
    let write = match ctx.role {
        Role::Writer => true,
        Role::Reader | Role::LongReader { .. } => false,
        Role::Mixed { write_permille } => rng.gen_range(0..1000) < write_permille,
    };
    Some(Op {
        measuring,
        timed: measuring && *n % ctx.time_every == 0,
        write,
    })
}

fn record(out: &mut TaskOut, op: &Op, wait: Option<u64>) {
    if op.write {
        out.all_writes += 1;
    }
    if !op.measuring {
        return;
    }
    let hist = if op.write {
        out.writes += 1;
        &mut out.write_wait
    } else {
        out.reads += 1;
        &mut out.read_wait
    };
    if let Some(ns) = wait {
        hist.saturating_record(ns.max(1));
    }
}

/// A task whose sections never await: works with every lock.
pub async fn sync_task<L: Lock>(lock: Arc<L>, ctx: TaskCtx) -> TaskOut {
    let mut out = TaskOut::new(ctx.role);
    let mut rng = SmallRng::seed_from_u64(ctx.id);
    let mut n = 0;
    ctx.start.wait().await;
    while let Some(op) = next_op(&ctx, &mut rng, &mut n) {
        let wait = if op.write {
            let seed = rng.gen::<u64>();
            let busy = ctx.write_busy;
            lock.write_with(op.timed, move |s| s.write_section(seed, busy))
                .await
                .1
        } else {
            let busy = ctx.read_busy;
            lock.read_with(op.timed, move |s| s.read_section(busy))
                .await
                .1
        };
        record(&mut out, &op, wait);
        ctx.think.run();
        // One unit of tokio's cooperative budget per operation: a task yields to the
        // scheduler every 128 operations even when its lock never makes it wait, the way a
        // kernel thread is preempted. Without it, a task whose lock always succeeds at once
        // would keep its worker to itself and the others would starve for reasons that have
        // nothing to do with the lock.
        tokio::task::coop::consume_budget().await;
    }
    out
}

/// A task that awaits inside its sections: async locks only.
///
/// A short section yields to the executor once in the middle (an I/O that completes at
/// once, e.g. a page-cache hit in filebench's randomrw); the long reader sleeps.
pub async fn async_task<L: AsyncLock>(lock: Arc<L>, ctx: TaskCtx) -> TaskOut {
    let mut out = TaskOut::new(ctx.role);
    let mut rng = SmallRng::seed_from_u64(ctx.id);
    let mut n = 0;
    ctx.start.wait().await;
    while let Some(op) = next_op(&ctx, &mut rng, &mut n) {
        let t0 = op.timed.then(Instant::now);
        let wait_of = |t0: Option<Instant>| {
            t0.map(|t| u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX))
        };
        let wait = if op.write {
            let seed = rng.gen::<u64>();
            let mut g = lock.write().await;
            let wait = wait_of(t0);
            let v = g.write_begin();
            g.write_work(seed);
            tokio::task::yield_now().await;
            ctx.write_busy.run();
            g.write_end(v);
            drop(g);
            wait
        } else if let Role::LongReader { hold_ms, gap_ms } = ctx.role {
            let g = lock.read().await;
            let wait = wait_of(t0);
            let v = g.read_begin();
            g.read_work();
            tokio::time::sleep(Duration::from_millis(hold_ms)).await;
            g.read_work();
            g.read_end(v);
            drop(g);
            tokio::time::sleep(Duration::from_millis(gap_ms)).await;
            wait
        } else {
            let g = lock.read().await;
            let wait = wait_of(t0);
            let v = g.read_begin();
            g.read_work();
            tokio::task::yield_now().await;
            ctx.read_busy.run();
            g.read_work();
            g.read_end(v);
            drop(g);
            wait
        };
        record(&mut out, &op, wait);
        ctx.think.run();
        tokio::task::coop::consume_budget().await;
    }
    out
}

fn panic_message(err: tokio::task::JoinError) -> String {
    if err.is_cancelled() {
        return "task cancelled".into();
    }
    let payload = err.into_panic();
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "task panicked".into()
    }
}

/// Runs `workload` on a lock built by `make`, each task running `body`, on a fresh runtime
/// with `threads` workers.
///
/// Errors (as text) when a task panicked (an invariant of [`crate::data::Shared`] broke),
/// when tasks did not stop within a grace period after the window (a hang: lost wake-up or
/// deadlock), or when the data's write count differs from the tasks' (a lost update).
pub fn run_case<L, F, Fut>(
    workload: &Workload,
    threads: usize,
    timing: Timing,
    make: impl FnOnce() -> L,
    body: F,
) -> Result<Measured, String>
where
    L: Lock,
    F: Fn(Arc<L>, TaskCtx) -> Fut,
    Fut: Future<Output = TaskOut> + Send + 'static,
{
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(threads.max(1)).enable_all();
    if timing.pin {
        // The runtime starts its workers as it is built, before any other thread of its
        // pool: the first `threads` starts are the workers (a later blocking thread, if
        // any, is left where the kernel puts it).
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        builder.on_thread_start(move || {
            let i = started.fetch_add(1, Ordering::Relaxed);
            if i < threads.max(1) {
                let core = cores.get(i % cores.len().max(1)).copied();
                if !core.is_some_and(core_affinity::set_for_current) {
                    eprintln!("compare: --pin: could not pin worker {i} to a core ({core:?})");
                }
            }
        });
    }
    let rt = builder
        .build()
        .map_err(|e| format!("cannot build the tokio runtime: {e}"))?;
    let lock = Arc::new(make());
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let start = Arc::new(tokio::sync::Barrier::new(workload.task_count() + 1));
    let read_busy = Busy::ns(workload.read_ns);
    let write_busy = Busy::ns(workload.write_ns);
    let think = Busy::ns(workload.think_ns);

    let outcome = rt.block_on(async {
        let mut handles = Vec::with_capacity(workload.task_count());
        let mut id = 0u64;
        for &(role, count) in &workload.tasks {
            for _ in 0..count {
                id += 1;
                let ctx = TaskCtx {
                    id: id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ workload.id as u64,
                    role,
                    read_busy,
                    write_busy,
                    think,
                    time_every: workload.time_every.max(1),
                    phase: phase.clone(),
                    start: start.clone(),
                };
                handles.push(tokio::spawn(body(lock.clone(), ctx)));
            }
        }
        start.wait().await;
        tokio::time::sleep(timing.warmup).await;
        phase.store(MEASURE, Ordering::Relaxed);
        let t0 = Instant::now();
        let cpu0 = process_cpu_time();
        tokio::time::sleep(timing.duration).await;
        phase.store(STOP, Ordering::Relaxed);
        let elapsed = t0.elapsed();
        let cpu = process_cpu_time()
            .zip(cpu0)
            .map(|(b, a)| b.saturating_sub(a));

        // Every task finishes its operation in progress and stops; the long reader may be
        // in a 10 ms hold or gap. Anything still running after the grace period is stuck.
        let grace = Duration::from_secs(10);
        let deadline = tokio::time::Instant::now() + grace;
        let mut tasks = Vec::with_capacity(handles.len());
        let mut panics = Vec::new();
        let mut stuck = 0usize;
        for mut h in handles {
            match tokio::time::timeout_at(deadline, &mut h).await {
                Ok(Ok(out)) => tasks.push(out),
                Ok(Err(e)) => panics.push(panic_message(e)),
                Err(_) => {
                    stuck += 1;
                    h.abort();
                }
            }
        }
        if let Some(first) = panics.first() {
            return Err(format!("{} task(s) panicked, first: {first}", panics.len()));
        }
        if stuck > 0 {
            return Err(format!(
                "hang: {stuck} of {} task(s) had not stopped {}s after the window closed",
                workload.task_count(),
                grace.as_secs()
            ));
        }
        let done: u64 = tasks.iter().map(|t| t.all_writes).sum();
        let (seen, _) = lock.read_with(false, |s| s.writes()).await;
        if seen != done {
            return Err(format!(
                "lost update: tasks completed {done} write sections, the data counts {seen}"
            ));
        }
        Ok(Measured {
            elapsed,
            cpu,
            tasks,
        })
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    // With the `stats` feature and `COMPARE_STATS=1`, async-rwsem's lock events (what spun,
    // what queued, what was handed off): `COMPARE_STATS=1 cargo run --release -p bench
    // --features stats`.
    if let (Some(stats), Some(_)) = (lock.stats(), std::env::var_os("COMPARE_STATS")) {
        let events: Vec<String> = stats
            .lines()
            .filter_map(|line| line.split_once(':'))
            .filter(|&(_, n)| n != "0")
            .map(|(name, n)| format!("{name}={n}"))
            .collect();
        eprintln!("async-rwsem lock events: {}", events.join(" "));
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::process_cpu_time;
    use std::time::{Duration, Instant};

    /// The process's CPU clock moves with work done on this thread, and only forward:
    /// spinning until it has advanced 20 ms ends well before the 10 s cap (a clock that
    /// stood still, or a constant, would hit the cap).
    #[cfg(unix)]
    #[test]
    fn the_process_cpu_clock_counts_this_threads_work() {
        let start = process_cpu_time().expect("a process CPU clock on unix");
        let wall = Instant::now();
        let mut last = start;
        let mut spins = 0u64;
        while last - start < Duration::from_millis(20) {
            assert!(
                wall.elapsed() < Duration::from_secs(10),
                "the CPU clock does not move"
            );
            spins = std::hint::black_box(spins + 1);
            let now = process_cpu_time().unwrap();
            assert!(now >= last, "the CPU clock went back: {last:?} -> {now:?}");
            last = now;
        }
        assert!(spins > 0);
    }
}
