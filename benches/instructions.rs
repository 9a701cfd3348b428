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
//! `scripts/instructions.sh` does exactly that for every op and prints a table. Without
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
];

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
