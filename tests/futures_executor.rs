//! The lock on `futures`' executor, no tokio in sight: readers, writers and upgradable
//! readers on one thread's `LocalPool`, sections that yield while holding the lock (so that
//! every other task queues), and plain threads blocking on acquires with
//! `futures::executor::block_on`. Runs with and without the `tokio` feature
//! (`cargo test --no-default-features --test futures_executor`): outside a tokio runtime the
//! feature's budget never yields.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
use futures::executor::{block_on, LocalPool};
use futures::task::LocalSpawnExt;

mod support;

/// Returns `Pending` once (waking itself at once), as a section that awaits something.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

fn yield_once() -> YieldOnce {
    YieldOnce(false)
}

#[test]
fn tasks_on_a_local_pool_queue_and_finish() {
    support::lockdep_off();
    const TASKS: u64 = 8;
    const ROUNDS: u64 = 200;
    let lock = Arc::new(RwLock::new((0u64, 0u64)));
    let mut pool = LocalPool::new();
    let spawner = pool.spawner();
    for t in 0..TASKS {
        let lock = Arc::clone(&lock);
        spawner
            .spawn_local(async move {
                for i in 0..ROUNDS {
                    match (t + i) % 3 {
                        0 => {
                            let mut g = lock.write().await;
                            g.0 += 1;
                            yield_once().await;
                            g.1 += 1;
                        }
                        1 => {
                            let g = lock.read().await;
                            yield_once().await;
                            assert_eq!(g.0, g.1, "a reader saw a writer's half-done update");
                        }
                        _ => {
                            let up = lock.upgradable_read().await;
                            yield_once().await;
                            let mut g = RwLockUpgradableReadGuard::upgrade(up).await;
                            g.0 += 1;
                            g.1 += 1;
                        }
                    }
                }
            })
            .unwrap();
    }
    pool.run();
    let writes = (0..TASKS)
        .map(|t| (0..ROUNDS).filter(|i| (t + i) % 3 != 1).count() as u64)
        .sum::<u64>();
    let lock = Arc::try_unwrap(lock).unwrap();
    assert_eq!(lock.into_inner(), (writes, writes));
}

#[test]
fn threads_block_on_acquires() {
    let lock = Arc::new(RwLock::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    block_on(async {
                        *lock.write().await += 1;
                        let _ = *lock.read().await;
                    });
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*block_on(lock.read()), 4_000);
}
