//! Multi-threaded stress: many tasks on a tokio multi-thread runtime (and plain threads
//! under `futures::executor::block_on`) hammer one lock under several policies, with
//! random cancellations. Inside every critical section the invariants are checked with
//! separate atomics; at the end the counts are exact, the count word is back to 0 and
//! the wait queue is empty. A lost wake-up shows up as the generous deadline expiring.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use async_rwsem::{Policy, RwLock};

mod support;
use support::{assert_idle, Census, Rng};

/// Far above any healthy run (a few seconds at most); only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(120);

struct Shared {
    lock: RwLock<(u64, u64)>,
    census: Census,
    cancelled: AtomicUsize,
}

fn run_tokio(policy: Policy, tasks: usize, iters: usize, workers: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    let shared = Arc::new(Shared {
        lock: RwLock::with_policy((0, 0), policy),
        census: Census::default(),
        cancelled: AtomicUsize::new(0),
    });
    let writes = rt.block_on(async {
        tokio::time::timeout(DEADLINE, async {
            let mut handles = Vec::new();
            for t in 0..tasks {
                let s = Arc::clone(&shared);
                handles.push(tokio::spawn(async move {
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1));
                    let mut writes = 0u64;
                    for _ in 0..iters {
                        let r = rng.next();
                        let write = r % 4 == 0;
                        let cancel = r % 7 == 0;
                        let await_inside = r % 5 == 0;
                        if write {
                            let guard = if cancel {
                                match tokio::time::timeout(
                                    Duration::from_micros(r % 50),
                                    s.lock.write(),
                                )
                                .await
                                {
                                    Ok(g) => g,
                                    Err(_) => {
                                        s.cancelled.fetch_add(1, SeqCst);
                                        continue;
                                    }
                                }
                            } else {
                                s.lock.write().await
                            };
                            let mut guard = guard;
                            s.census.enter_write();
                            assert_eq!(guard.0, guard.1, "torn write seen by a writer");
                            guard.0 += 1;
                            if await_inside {
                                tokio::task::yield_now().await;
                            }
                            guard.1 += 1;
                            writes += 1;
                            s.census.leave_write();
                        } else {
                            let guard = if cancel {
                                match tokio::time::timeout(
                                    Duration::from_micros(r % 50),
                                    s.lock.read(),
                                )
                                .await
                                {
                                    Ok(g) => g,
                                    Err(_) => {
                                        s.cancelled.fetch_add(1, SeqCst);
                                        continue;
                                    }
                                }
                            } else {
                                s.lock.read().await
                            };
                            s.census.enter_read();
                            assert_eq!(guard.0, guard.1, "torn write seen by a reader");
                            if await_inside {
                                tokio::task::yield_now().await;
                            }
                            s.census.leave_read();
                            drop(guard);
                        }
                        if r % 3 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    writes
                }));
            }
            let mut total = 0;
            for h in handles {
                total += h.await.expect("a task panicked");
            }
            total
        })
        .await
        .expect("deadline passed: a task never got the lock (lost wake-up?)")
    });
    let value = *shared.lock.try_read().unwrap();
    assert_eq!(value, (writes, writes), "lost or doubled writes");
    assert_idle(&shared.lock);
}

fn policy() -> Policy {
    Policy::new()
}

#[test]
fn default_policy() {
    run_tokio(policy(), 64, 400, 4);
}

#[test]
fn no_spin_no_yield() {
    run_tokio(
        policy().writer_spin(Duration::ZERO).writer_yields(0),
        64,
        400,
        4,
    );
}

#[test]
fn handoff_at_every_release() {
    run_tokio(policy().handoff_timeout(Duration::ZERO), 48, 300, 3);
}

#[test]
fn handoff_disabled() {
    run_tokio(policy().handoff_timeout(Duration::MAX), 48, 300, 3);
}

#[test]
fn reader_spin_and_small_batches() {
    run_tokio(
        policy()
            .reader_spin(Duration::from_micros(5))
            .reader_wake_batch(2)
            .handoff_timeout(Duration::from_micros(200)),
        64,
        300,
        4,
    );
}

#[test]
fn many_readers_grant_batches() {
    // Mostly readers behind occasional writers: exercises batch grants of many readers.
    run_tokio(policy().writer_yields(0).reader_wake_batch(256), 300, 60, 2);
}

#[test]
fn plain_threads_with_futures_executor() {
    let lock = Arc::new(RwLock::new(0u64));
    let census = Arc::new(Census::default());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let lock = Arc::clone(&lock);
            let census = Arc::clone(&census);
            std::thread::spawn(move || {
                futures::executor::block_on(async {
                    for i in 0..2_000 {
                        if (i + t) % 3 == 0 {
                            let mut g = lock.write().await;
                            census.enter_write();
                            *g += 1;
                            census.leave_write();
                        } else {
                            let g = lock.read().await;
                            census.enter_read();
                            std::hint::black_box(*g);
                            census.leave_read();
                        }
                    }
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let expected: u64 = (0..8u64)
        .map(|t| (0..2_000u64).filter(|i| (i + t) % 3 == 0).count() as u64)
        .sum();
    assert_eq!(*lock.try_read().unwrap(), expected);
    assert_idle(&lock);
}

#[test]
fn readers_share_the_lock() {
    // Readers that wait on each other inside the section can only finish if they hold the
    // lock at the same time.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let lock = Arc::new(RwLock::new(()));
        let barrier = Arc::new(tokio::sync::Barrier::new(16));
        let hs: Vec<_> = (0..16)
            .map(|_| {
                let (l, b) = (Arc::clone(&lock), Arc::clone(&barrier));
                tokio::spawn(async move {
                    let _g = l.read().await;
                    b.wait().await;
                })
            })
            .collect();
        tokio::time::timeout(DEADLINE, futures::future::join_all(hs))
            .await
            .expect("readers did not share the lock");
    });
}

/// `max_readers = 1`: one thread takes and drops the slot with `try_read` while another
/// keeps queueing for it with `blocking_read`. A release that lands while the queued
/// reader's grant check holds its transient bias must still wake it (it did not, once:
/// about one lost wake-up in 50,000 rounds). A reader asleep beside a free lock stops the
/// rounds; the watchdog turns that into a failure instead of a hang.
#[test]
fn max_readers_slot_freed_while_a_reader_queues() {
    const ROUNDS: usize = 200_000;
    let lock = Arc::new(RwLock::with_max_readers(0u32, 1));
    let progress = Arc::new(AtomicUsize::new(0));
    let taker = {
        let lock = Arc::clone(&lock);
        let progress = Arc::clone(&progress);
        std::thread::spawn(move || {
            while progress.load(SeqCst) < ROUNDS {
                drop(lock.try_read());
            }
        })
    };
    let queuer = {
        let lock = Arc::clone(&lock);
        let progress = Arc::clone(&progress);
        std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                drop(lock.blocking_read());
                progress.fetch_add(1, SeqCst);
            }
        })
    };
    let mut last = 0;
    let mut still = 0;
    while progress.load(SeqCst) < ROUNDS {
        std::thread::sleep(Duration::from_millis(100));
        let now = progress.load(SeqCst);
        if now == last {
            still += 1;
            // Generous: 20 s without a single round on a busy machine is a lost wake-up,
            // not slowness.
            assert!(
                still < 200,
                "reader asleep beside a free lock after {now} rounds"
            );
        } else {
            still = 0;
            last = now;
        }
    }
    queuer.join().unwrap();
    taker.join().unwrap();
    assert_idle(&lock);
}
