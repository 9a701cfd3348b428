//! Uncontended lock+unlock, one task, for this lock and its peers, in one run:
//! `cargo bench -p bench --bench uncontended`.
//!
//! The async locks are polled once with a no-op waker (an uncontended acquire completes on
//! its first poll), so the figure is the acquire future's construction, the lock and the
//! unlock: what a task pays when nobody else wants the lock. `parking_lot` is the ceiling:
//! a synchronous lock with the same atomic fast paths and no future around them.
//!
//! `read_in_a_runtime` times the same acquire awaited in a loop inside a current-thread
//! tokio runtime, where tokio's cooperative budget applies: with the feature `tokio` (on
//! here: this crate's dependencies enable it) the lock takes a unit of budget per acquire
//! and yields every 128, as tokio's lock does. The instruction counts of the same paths,
//! with and without the feature, are `scripts/instructions.sh`'s (the lock's own
//! `benches/instructions.rs`, with the lock's features).

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

/// Polls `fut` once; an uncontended acquire must be ready at once.
#[inline(always)]
fn now<F: Future>(fut: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(fut).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("uncontended acquire was pending"),
    }
}

fn read(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended_read");
    let rwsem = async_rwsem::RwLock::new(1u64);
    let tokio = tokio::sync::RwLock::new(1u64);
    let alock = async_lock::RwLock::new(1u64);
    let pl = parking_lot::RwLock::new(1u64);
    g.bench_function("async-rwsem", |b| b.iter(|| *now(black_box(&rwsem).read())));
    g.bench_function("tokio", |b| b.iter(|| *now(black_box(&tokio).read())));
    g.bench_function("async-lock", |b| b.iter(|| *now(black_box(&alock).read())));
    g.bench_function("parking_lot", |b| b.iter(|| *black_box(&pl).read()));
    g.finish();
}

fn write(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended_write");
    let rwsem = async_rwsem::RwLock::new(1u64);
    let tokio = tokio::sync::RwLock::new(1u64);
    let alock = async_lock::RwLock::new(1u64);
    let pl = parking_lot::RwLock::new(1u64);
    g.bench_function("async-rwsem", |b| {
        b.iter(|| *now(black_box(&rwsem).write()) += 1)
    });
    g.bench_function("tokio", |b| b.iter(|| *now(black_box(&tokio).write()) += 1));
    g.bench_function("async-lock", |b| {
        b.iter(|| *now(black_box(&alock).write()) += 1)
    });
    g.bench_function("parking_lot", |b| b.iter(|| *black_box(&pl).write() += 1));
    g.finish();
}

fn try_lock(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended_try_read");
    let rwsem = async_rwsem::RwLock::new(1u64);
    let tokio = tokio::sync::RwLock::new(1u64);
    let alock = async_lock::RwLock::new(1u64);
    let pl = parking_lot::RwLock::new(1u64);
    g.bench_function("async-rwsem", |b| {
        b.iter(|| *black_box(&rwsem).try_read().unwrap())
    });
    g.bench_function("tokio", |b| {
        b.iter(|| *black_box(&tokio).try_read().unwrap())
    });
    g.bench_function("async-lock", |b| {
        b.iter(|| *black_box(&alock).try_read().unwrap())
    });
    g.bench_function("parking_lot", |b| {
        b.iter(|| *black_box(&pl).try_read().unwrap())
    });
    g.finish();
}

/// Times `iters` awaits of `acquire()` (each guard dropped at once) in one `block_on` of
/// `runtime`, so that tokio's budget applies to them.
fn awaited_in<F: Future>(
    runtime: &tokio::runtime::Runtime,
    iters: u64,
    acquire: impl Fn() -> F,
) -> std::time::Duration {
    runtime.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(acquire().await);
        }
        start.elapsed()
    })
}

fn read_in_a_runtime(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("read_in_a_runtime");
    let rwsem = async_rwsem::RwLock::new(1u64);
    let tokio = tokio::sync::RwLock::new(1u64);
    g.bench_function("async-rwsem", |b| {
        b.iter_custom(|iters| awaited_in(&runtime, iters, || black_box(&rwsem).read()))
    });
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| awaited_in(&runtime, iters, || black_box(&tokio).read()))
    });
    g.finish();
}

criterion_group!(benches, read, write, try_lock, read_in_a_runtime);
criterion_main!(benches);
