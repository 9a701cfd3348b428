//! tokio's cooperative scheduling (feature `tokio`): on a current-thread runtime, a task that
//! takes a free lock in a loop, waiting for a neighbour task to change the value, lets the
//! neighbour run, because every acquire takes a unit of the task's budget and the task
//! yields once the budget is spent. Without it the loop never yields, and the neighbour,
//! on the same thread, never runs: each loop below stops after `LIMIT` acquires and the
//! test fails instead of hanging.
#![cfg(feature = "tokio")]

use std::future::Future;
use std::sync::Arc;

use async_rwsem::{OwnedRwLockUpgradableReadGuard, Policy, RwLock, RwLockUpgradableReadGuard};

/// The default policy charges tokio's budget (128 units) once in this many async acquires
/// of a thread; `Policy::fifo()` at every acquire, as tokio's lock does.
const CHARGE_EVERY: u32 = 8;

/// Acquires after which a loop gives up: far beyond a few budgets.
const LIMIT: u32 = 100_000;

/// On a fresh current-thread runtime, spawns a task that runs `$acquire` on the lock
/// `$flag` (an `Arc` of a lock of `bool`) until it reads `true`, then a neighbour task that
/// sets the flag through `$set`. Returns how many acquires read `false`, or `None` if the
/// loop reached `LIMIT` without the neighbour having run.
macro_rules! acquires_until_the_neighbour_runs {
    ($lock:expr, |$flag:ident| $acquire:expr, |$lock2:ident| $set:expr) => {{
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let shared = Arc::new($lock);
            let looping = {
                let $flag = Arc::clone(&shared);
                tokio::spawn(async move {
                    let mut reads = 0;
                    while !*$acquire {
                        reads += 1;
                        if reads == LIMIT {
                            return None;
                        }
                    }
                    Some(reads)
                })
            };
            let neighbour = {
                let $lock2 = Arc::clone(&shared);
                tokio::spawn(async move { $set })
            };
            let reads = looping.await.unwrap();
            neighbour.await.unwrap();
            reads
        })
    }};
}

/// The loop of the documentation: `while !*flag.read().await {}`, against this lock under
/// the default policy, under `Policy::fifo()`, and against tokio's lock. Under
/// `Policy::fifo()` it ends after exactly as many reads as with tokio's lock (129 with
/// tokio 1.54: the 129th read takes the lock, finds the budget spent and yields holding
/// it; the neighbour's write queues; the next read queues behind it). The default policy
/// charges the budget once in `CHARGE_EVERY` acquires, so the loop yields after about
/// `CHARGE_EVERY` times as many reads; then one read may pass the queued writer (the pass
/// bound) before the writer is granted.
#[test]
fn a_task_reading_in_a_loop_lets_its_neighbour_write() {
    let tokio = acquires_until_the_neighbour_runs!(
        tokio::sync::RwLock::new(false),
        |flag| flag.read().await,
        |lock| *lock.write().await = true
    );
    let fifo = acquires_until_the_neighbour_runs!(
        RwLock::with_policy(false, Policy::fifo()),
        |flag| flag.read().await,
        |lock| *lock.write().await = true
    );
    let default =
        acquires_until_the_neighbour_runs!(RwLock::new(false), |flag| flag.read().await, |lock| {
            *lock.write().await = true
        });
    let tokio = tokio.expect("tokio's lock yields");
    assert_eq!(
        fifo,
        Some(tokio),
        "Policy::fifo() yields as tokio's lock does"
    );
    let default = default.expect("the loop never yielded to the writer");
    assert!(
        (128 * CHARGE_EVERY - CHARGE_EVERY..4 * 129 * CHARGE_EVERY).contains(&default),
        "{default} reads before the writer ran"
    );
}

/// Every async acquire takes budget: the owned read, the write locks and the upgradable
/// reads (each loop here takes the lock the neighbour's write waits for).
#[test]
fn every_async_acquire_takes_budget() {
    let reads = [
        acquires_until_the_neighbour_runs!(
            RwLock::new(false),
            |flag| Arc::clone(&flag).read_owned().await,
            |lock| *lock.write().await = true
        ),
        acquires_until_the_neighbour_runs!(RwLock::new(false), |flag| flag.write().await, |lock| {
            *lock.write().await = true
        }),
        acquires_until_the_neighbour_runs!(
            RwLock::new(false),
            |flag| Arc::clone(&flag).write_owned().await,
            |lock| *lock.write().await = true
        ),
        acquires_until_the_neighbour_runs!(
            RwLock::new(false),
            |flag| flag.upgradable_read().await,
            |lock| {
                let up = lock.upgradable_read().await;
                *RwLockUpgradableReadGuard::upgrade(up).await = true;
            }
        ),
        acquires_until_the_neighbour_runs!(
            RwLock::new(false),
            |flag| Arc::clone(&flag).upgradable_read_owned().await,
            |lock| {
                let up = Arc::clone(&lock).upgradable_read_owned().await;
                *OwnedRwLockUpgradableReadGuard::upgrade(up).await = true;
            }
        ),
    ];
    for (i, reads) in reads.into_iter().enumerate() {
        let reads = reads.unwrap_or_else(|| panic!("loop {i} never yielded"));
        assert!(
            reads < 4 * 129 * CHARGE_EVERY,
            "loop {i}: {reads} acquires before the writer ran"
        );
    }
}

/// Outside a runtime nothing yields: a loop of acquires on a plain thread (no tokio
/// context) runs to the end, every acquire ready at its first poll.
#[test]
fn outside_a_runtime_no_acquire_yields() {
    let lock = RwLock::new(0u32);
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    for _ in 0..1000 {
        let mut read = std::pin::pin!(lock.read());
        assert!(read.as_mut().poll(&mut cx).is_ready());
        let mut write = std::pin::pin!(lock.write());
        assert!(write.as_mut().poll(&mut cx).is_ready());
    }
}

/// A blocking acquire never waits on tokio's budget, even on a runtime's thread whose
/// budget is spent (there the blocked thread would wait for a wake-up tokio defers to the
/// end of the task's poll, which never comes). Run on a thread of its own, so that a
/// regression fails the test instead of hanging it.
#[test]
fn a_blocking_acquire_ignores_a_spent_budget() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let lock = RwLock::new(0u32);
            // Spend the budget without yielding.
            while tokio::task::coop::has_budget_remaining() {
                std::future::poll_fn(|cx| {
                    let _ = tokio::task::coop::poll_proceed(cx).map(|r| r.made_progress());
                    std::task::Poll::Ready(())
                })
                .await;
            }
            *lock.blocking_write() += 1;
            assert_eq!(*lock.blocking_read(), 1);
        });
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("a blocking acquire waited on a spent budget");
}
