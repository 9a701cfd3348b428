//! Contended lock+unlock for this lock and its peers, in one run:
//! `cargo bench -p bench --bench contended`.
//!
//! Each case spawns a fixed set of tasks on a tokio multi-thread runtime (one worker per
//! core) and times, through `iter_custom`, how long they take to do `iters` operations
//! between them; criterion reports the time per operation. The sections are those of the
//! `compare` benchmark (`bench/src/data.rs`): a reader sums 64 cells and checks the
//! writers' invariant, a writer moves a unit between two cells. Every task spends one unit
//! of tokio's cooperative budget per operation (it yields every 128), as in `compare`.
//!
//! Cases: `readers` (8 readers), `mixed_20pct` (8 tasks, every fifth operation a write),
//! `writers` (16 writers), and `await_4r4w` (4 readers and 4 writers that yield to the
//! executor inside the section; async locks only). `parking_lot` is used without an
//! `.await` in the section and is left out of the last case.
//!
//! For the figures across every workload, with fairness and wait percentiles, run
//! `cargo run --release -p bench`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};

// The lock adapters and the shared data of `compare`, so that both measure the same sections.
use bench::data::{Busy, Shared};
use bench::locks::{
    AsyncLock, AsyncLockRw, AsyncRwLock, Lock, ParkingLot, Rwsem, SyncRwLock, Tokio,
};

/// What one task does: `writes` out of every `period` operations are writes.
#[derive(Clone, Copy)]
struct Mix {
    period: u64,
    writes: u64,
}

const READ: Mix = Mix {
    period: 1,
    writes: 0,
};
const WRITE: Mix = Mix {
    period: 1,
    writes: 1,
};
const MIXED_20: Mix = Mix {
    period: 5,
    writes: 1,
};

impl Mix {
    fn is_write(self, i: u64) -> bool {
        i % self.period < self.writes
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Spawns one task per entry of `tasks`, `ops` operations each, started together; returns
/// the time from the start to the last task's end.
fn run_tasks<L, F, Fut>(
    rt: &tokio::runtime::Runtime,
    lock: &Arc<L>,
    tasks: &[Mix],
    ops: u64,
    body: F,
) -> Duration
where
    L: Send + Sync + 'static,
    F: Fn(Arc<L>, Mix, u64, Arc<tokio::sync::Barrier>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    rt.block_on(async {
        let start = Arc::new(tokio::sync::Barrier::new(tasks.len() + 1));
        let handles: Vec<_> = tasks
            .iter()
            .map(|&mix| tokio::spawn(body(lock.clone(), mix, ops, start.clone())))
            .collect();
        start.wait().await;
        let t0 = Instant::now();
        for h in handles {
            h.await
                .expect("a benchmark task panicked (lock invariant broken?)");
        }
        t0.elapsed()
    })
}

async fn sync_body<L: Lock>(lock: Arc<L>, mix: Mix, ops: u64, start: Arc<tokio::sync::Barrier>) {
    start.wait().await;
    for i in 0..ops {
        if mix.is_write(i) {
            lock.write_with(false, |s| s.write_section(i, Busy::default()))
                .await;
        } else {
            lock.read_with(false, |s| s.read_section(Busy::default()))
                .await;
        }
        tokio::task::coop::consume_budget().await;
    }
}

async fn await_body<L: AsyncLock>(
    lock: Arc<L>,
    mix: Mix,
    ops: u64,
    start: Arc<tokio::sync::Barrier>,
) {
    start.wait().await;
    for i in 0..ops {
        if mix.is_write(i) {
            let mut g = lock.write().await;
            let v = g.write_begin();
            g.write_work(i);
            tokio::task::yield_now().await;
            g.write_end(v);
        } else {
            let g = lock.read().await;
            let v = g.read_begin();
            g.read_work();
            tokio::task::yield_now().await;
            g.read_end(v);
        }
        tokio::task::coop::consume_budget().await;
    }
}

/// `iters` operations spread over `tasks`; the time is scaled to exactly `iters`.
fn per_iters(iters: u64, tasks: usize, run: impl FnOnce(u64) -> Duration) -> Duration {
    let n = tasks.max(1) as u64;
    let ops = iters.div_ceil(n).max(1);
    let took = run(ops);
    took.mul_f64(iters as f64 / (ops * n) as f64)
}

fn sync_case<L: Lock>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    make: fn() -> L,
    tasks: &[Mix],
) {
    let rt = runtime();
    let lock = Arc::new(make());
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            per_iters(iters, tasks.len(), |ops| {
                run_tasks(&rt, &lock, tasks, ops, sync_body::<L>)
            })
        })
    });
}

fn await_case<L: AsyncLock>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    make: fn() -> L,
    tasks: &[Mix],
) {
    let rt = runtime();
    let lock = Arc::new(make());
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            per_iters(iters, tasks.len(), |ops| {
                run_tasks(&rt, &lock, tasks, ops, await_body::<L>)
            })
        })
    });
}

fn rwsem() -> Rwsem<Shared> {
    Rwsem::new(Shared::new())
}

fn tokio() -> Tokio<Shared> {
    Tokio::new(Shared::new())
}

fn async_lock() -> AsyncLockRw<Shared> {
    AsyncLockRw::new(Shared::new())
}

fn parking_lot() -> ParkingLot<Shared> {
    ParkingLot::new(Shared::new())
}

fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(name);
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    g
}

fn sync_cases(c: &mut Criterion, name: &str, tasks: &[Mix]) {
    let mut g = group(c, name);
    sync_case(&mut g, "async-rwsem", rwsem, tasks);
    sync_case(&mut g, "tokio", tokio, tasks);
    sync_case(&mut g, "async-lock", async_lock, tasks);
    sync_case(&mut g, "parking_lot", parking_lot, tasks);
    g.finish();
}

fn readers(c: &mut Criterion) {
    sync_cases(c, "contended_readers", &[READ; 8]);
}

fn mixed(c: &mut Criterion) {
    sync_cases(c, "contended_mixed_20pct", &[MIXED_20; 8]);
}

fn writers(c: &mut Criterion) {
    sync_cases(c, "contended_writers", &[WRITE; 16]);
}

fn await_in_section(c: &mut Criterion) {
    let tasks = [READ, READ, READ, READ, WRITE, WRITE, WRITE, WRITE];
    let mut g = group(c, "contended_await_4r4w");
    await_case(&mut g, "async-rwsem", rwsem, &tasks);
    await_case(&mut g, "tokio", tokio, &tasks);
    await_case(&mut g, "async-lock", async_lock, &tasks);
    g.finish();
}

criterion_group!(benches, readers, mixed, writers, await_in_section);
criterion_main!(benches);
