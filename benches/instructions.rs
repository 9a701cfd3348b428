//! Instruction counts of the uncontended paths, for `valgrind --tool=callgrind`: counts of
//! instructions do not move with the machine's load, where times do.
//!
//! ```text
//! cargo bench --no-run --bench instructions
//! INSTRUCTIONS_OP=rwsem-read INSTRUCTIONS_N=1000000 \
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/deps/instructions-*
//! ```
//!
//! Each op is run `INSTRUCTIONS_N` times; the per-operation count is the difference between
//! a run of 2N and a run of N, divided by N (the start-up cancels out).
//! `scripts/instructions.sh` does exactly that for every op and prints a table. The
//! `*-queued-*` ops count the queue path instead: acquires that queue and are granted. Without
//! the variables (as `cargo bench` runs it) each op runs once, as a smoke test.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll};

/// Polls `fut` once; an uncontended acquire must be ready at once.
#[inline(always)]
fn now<F: Future>(fut: F) -> F::Output {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    match pin!(fut).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("uncontended acquire was pending"),
    }
}

const OPS: &[&str] = &[
    "rwsem-read",
    "rwsem-write",
    "rwsem-try-read",
    "tokio-read",
    "tokio-write",
    "async-lock-read",
    "async-lock-write",
    "parking_lot-read",
    "parking_lot-write",
    "rwsem-queued-rw",
    "rwsem-fifo-queued-rw",
    "tokio-queued-rw",
    "rwsem-queued-ww",
    "rwsem-fifo-queued-ww",
    "tokio-queued-ww",
];

/// Polls `fut` once and expects it to be pending (it queued).
#[inline(always)]
fn pending<F: std::future::Future>(fut: std::pin::Pin<&mut F>) {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert!(
        fut.poll(&mut cx).is_pending(),
        "a contended acquire was ready"
    );
}

/// Polls `fut` once and expects it to be ready (it was granted the lock).
#[inline(always)]
fn ready<F: std::future::Future>(fut: std::pin::Pin<&mut F>) -> F::Output {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    match fut.poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("a granted acquire was pending"),
    }
}

/// The queue path, one handoff at a time: a writer holds the lock, a reader queues, the
/// writer's release grants it; a writer queues behind that reader, whose release grants
/// it. Two acquires per iteration, each queued and granted (the regime of the 40+40
/// shapes, where every acquire sleeps), without the spins (a spin's length is time, not
/// instructions). The locks hold a `u32` where the uncontended ops' hold a `u64`, so
/// that the typed layer's code for these is a copy of its own and the uncontended ops are
/// compiled (inlined) as they were without these.
macro_rules! queued_rw {
    ($lock:expr, $n:expr) => {{
        let lock = $lock;
        let mut held = Some(now(lock.write()));
        repeat($n, || {
            let mut r = pin!(lock.read());
            pending(r.as_mut());
            drop(held.take());
            let g = ready(r.as_mut());
            let mut w = pin!(lock.write());
            pending(w.as_mut());
            drop(g);
            held = Some(ready(w.as_mut()));
            1
        })
    }};
}

/// As [`queued_rw`], writers only: each release hands the lock to the one queued writer.
macro_rules! queued_ww {
    ($lock:expr, $n:expr) => {{
        let lock = $lock;
        let mut held = Some(now(lock.write()));
        repeat($n, || {
            let mut w = pin!(lock.write());
            pending(w.as_mut());
            drop(held.take());
            held = Some(ready(w.as_mut()));
            1
        })
    }};
}

/// The default policy without its spins and yields (see [`queued_rw`]).
fn no_spin(policy: async_rwsem::Policy) -> async_rwsem::Policy {
    policy
        .writer_spin(std::time::Duration::ZERO)
        .reader_spin(std::time::Duration::ZERO)
        .writer_yields(0)
}

/// Runs `f` `n` times; the loop is monomorphised per op, so that only the op is counted.
#[inline(never)]
fn repeat(n: u64, mut f: impl FnMut() -> u64) -> u64 {
    let mut sum = 0u64;
    for _ in 0..n {
        sum += f();
    }
    sum
}

fn run(op: &str, n: u64) -> u64 {
    let rwsem = async_rwsem::RwLock::new(1u64);
    let tokio = tokio::sync::RwLock::new(1u64);
    let alock = async_lock::RwLock::new(1u64);
    let pl = parking_lot::RwLock::new(1u64);
    match op {
        "rwsem-read" => repeat(n, || *now(black_box(&rwsem).read())),
        "rwsem-write" => repeat(n, || *now(black_box(&rwsem).write())),
        "rwsem-try-read" => repeat(n, || *black_box(&rwsem).try_read().unwrap()),
        "tokio-read" => repeat(n, || *now(black_box(&tokio).read())),
        "tokio-write" => repeat(n, || *now(black_box(&tokio).write())),
        "async-lock-read" => repeat(n, || *now(black_box(&alock).read())),
        "async-lock-write" => repeat(n, || *now(black_box(&alock).write())),
        "parking_lot-read" => repeat(n, || *black_box(&pl).read()),
        "parking_lot-write" => repeat(n, || *black_box(&pl).write()),
        "rwsem-queued-rw" => queued_rw!(
            async_rwsem::RwLock::with_policy(1u32, no_spin(async_rwsem::Policy::new())),
            n
        ),
        "rwsem-fifo-queued-rw" => queued_rw!(
            async_rwsem::RwLock::with_policy(1u32, no_spin(async_rwsem::Policy::fifo())),
            n
        ),
        "tokio-queued-rw" => queued_rw!(tokio::sync::RwLock::new(1u32), n),
        "rwsem-queued-ww" => queued_ww!(
            async_rwsem::RwLock::with_policy(1u32, no_spin(async_rwsem::Policy::new())),
            n
        ),
        "rwsem-fifo-queued-ww" => queued_ww!(
            async_rwsem::RwLock::with_policy(1u32, no_spin(async_rwsem::Policy::fifo())),
            n
        ),
        "tokio-queued-ww" => queued_ww!(tokio::sync::RwLock::new(1u32), n),
        other => panic!("unknown op {other:?}; one of {OPS:?}"),
    }
}

fn main() {
    match (
        std::env::var("INSTRUCTIONS_OP"),
        std::env::var("INSTRUCTIONS_N"),
    ) {
        (Ok(op), Ok(n)) => {
            let n = n.parse().expect("INSTRUCTIONS_N: a number");
            black_box(run(&op, n));
        }
        _ => {
            for op in OPS {
                assert_eq!(run(op, 1), 1);
            }
        }
    }
}
