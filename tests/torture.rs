//! A lock torture test in the spirit of the kernel's locktorture: a seeded, reproducible
//! random mix of reads, writes, try-locks, owned guards, downgrades, cancellations at
//! random points (a pending
//! acquire dropped after 0, 1 or several polls; a timeout racing the acquire), critical
//! sections that `.await`, and sections that panic (the guard must release while
//! unwinding). Every section checks the invariants against separate atomic counters; at
//! the end every task has finished (a lost wake-up trips the deadline), the count word is
//! back to 0, the queue is empty and the data holds exactly the writes made.
//!
//! - Short version (in `cargo test`): a few seconds.
//! - Long version: `cargo test --release --test torture -- --ignored --nocapture`
//!   (`TORTURE_SECS`, default 120, sets its length).
//! - Reproduce a failure: `TORTURE_SEED=<the seed printed> cargo test --test torture`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Once};
use std::task::Poll;
use std::time::{Duration, Instant};

use async_rwsem::{Policy, RwLock, RwLockUpgradableReadGuard};
use futures::FutureExt;

mod support;
use support::{Census, Rng};

/// Only a hang comes near it.
const DEADLINE: Duration = Duration::from_secs(300);
const PLANNED: &str = "planned panic inside a critical section";

struct Shared {
    lock: Arc<RwLock<Vec<u64>>>,
    census: Census,
    writes: AtomicU64,
    ops: AtomicU64,
}

/// A reader got in: counted, and it sees no write half done.
fn check_read(s: &Shared, data: &[u64]) {
    s.census.enter_read();
    check_torn(data);
}

/// Every write adds one to every cell: a reader sees them all equal.
fn check_torn(data: &[u64]) {
    assert!(
        data.windows(2).all(|w| w[0] == w[1]),
        "torn write seen: {data:?}"
    );
}

fn silence_planned_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = info
                .payload()
                .downcast_ref::<&str>()
                .is_some_and(|m| *m == PLANNED);
            if !planned {
                default(info);
            }
        }));
    });
}

/// Polls `fut` up to `polls` times, then drops it (cancelling it unless it finished).
async fn poll_then_drop<F: Future>(fut: F, polls: u64) -> Option<F::Output> {
    let mut fut = pin!(fut);
    for _ in 0..polls {
        if let Poll::Ready(out) = futures::poll!(fut.as_mut()) {
            return Some(out);
        }
        tokio::task::yield_now().await;
    }
    None
}

async fn one_op(s: &Shared, rng: &mut Rng) {
    let choice = rng.below(100);
    let await_inside = rng.below(4) == 0;
    let panic_inside = rng.below(50) == 0;
    match choice {
        // Upgradable reads, upgraded (maybe cancelled) or not.
        0..=9 => {
            let up = match rng.below(3) {
                0 => s.lock.try_upgradable_read().ok(),
                1 => poll_then_drop(s.lock.upgradable_read(), rng.below(4)).await,
                _ => Some(s.lock.upgradable_read().await),
            };
            let Some(up) = up else { return };
            s.census.enter_upgradable();
            check_torn(&up);
            if await_inside {
                tokio::task::yield_now().await;
            }
            s.census.leave_upgradable();
            if rng.below(2) == 0 {
                drop(up);
                return;
            }
            let upgrade = RwLockUpgradableReadGuard::upgrade(up);
            let guard = if rng.below(4) == 0 {
                // Cancelled after a few polls: releases everything.
                poll_then_drop(upgrade, rng.below(3)).await
            } else {
                Some(upgrade.await)
            };
            let Some(mut guard) = guard else { return };
            s.census.enter_write();
            for v in guard.iter_mut() {
                *v += 1;
            }
            s.writes.fetch_add(1, SeqCst);
            s.census.leave_write();
            drop(guard);
        }
        // Plain and cancelled reads.
        10..=44 => {
            if rng.below(8) == 0 {
                // An owned guard, maybe cancelled, held across an await.
                let lock = Arc::clone(&s.lock);
                let Some(guard) = poll_then_drop(lock.read_owned(), 1 + rng.below(4)).await else {
                    return;
                };
                check_read(s, &guard);
                tokio::task::yield_now().await;
                s.census.leave_read();
                return;
            }
            let guard = match rng.below(6) {
                0 => poll_then_drop(s.lock.read(), rng.below(4)).await,
                1 => tokio::time::timeout(Duration::from_micros(rng.below(200)), s.lock.read())
                    .await
                    .ok(),
                2 => s.lock.try_read().ok(),
                _ => Some(s.lock.read().await),
            };
            let Some(guard) = guard else { return };
            check_read(s, &guard);
            if await_inside {
                tokio::task::yield_now().await;
            }
            s.census.leave_read();
            if panic_inside {
                std::panic::panic_any(PLANNED);
            }
            drop(guard);
        }
        // Plain and cancelled writes.
        _ => {
            let guard = match rng.below(6) {
                0 => poll_then_drop(s.lock.write(), rng.below(4)).await,
                1 => tokio::time::timeout(Duration::from_micros(rng.below(200)), s.lock.write())
                    .await
                    .ok(),
                2 => s.lock.try_write().ok(),
                _ => Some(s.lock.write().await),
            };
            let Some(mut guard) = guard else { return };
            s.census.enter_write();
            let n = guard.len();
            for (i, v) in guard.iter_mut().enumerate() {
                *v += 1;
                if await_inside && i == n / 2 {
                    tokio::task::yield_now().await;
                }
            }
            s.writes.fetch_add(1, SeqCst);
            if rng.below(4) == 0 {
                // Downgrade: from now on a reader, beside the readers it lets in.
                s.census.downgrade();
                let guard = guard.downgrade();
                assert!(
                    guard.windows(2).all(|w| w[0] == w[1]),
                    "torn after downgrade"
                );
                if await_inside {
                    tokio::task::yield_now().await;
                }
                s.census.leave_read();
                drop(guard);
                return;
            }
            s.census.leave_write();
            if panic_inside {
                std::panic::panic_any(PLANNED);
            }
            drop(guard);
        }
    }
}

fn random_policy(rng: &mut Rng) -> Policy {
    let spins = [0, 1, 10, 50];
    let timeouts = [
        Duration::ZERO,
        Duration::from_micros(100),
        Duration::from_millis(4),
        Duration::MAX,
    ];
    Policy::new()
        .writer_spin(Duration::from_micros(spins[rng.below(4) as usize]))
        .writer_yields(rng.below(3) as u32)
        .handoff_timeout(timeouts[rng.below(4) as usize])
        .reader_wake_batch([1, 3, 256][rng.below(3) as usize])
        .reader_spin(Duration::from_micros([0, 0, 5][rng.below(3) as usize]))
}

fn torture(seed: u64, run_for: Duration) {
    silence_planned_panics();
    println!("torture seed = {seed} (rerun with TORTURE_SEED={seed})");
    let mut rng = Rng(seed);
    let policy = random_policy(&mut rng);
    let workers = 2 + rng.below(3) as usize;
    let tasks = 16 + rng.below(100) as usize;
    println!("policy = {policy:?}, workers = {workers}, tasks = {tasks}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    let shared = Arc::new(Shared {
        lock: Arc::new(RwLock::with_policy(vec![0; 4], policy)),
        census: Census::default(),
        writes: AtomicU64::new(0),
        ops: AtomicU64::new(0),
    });
    let end = Instant::now() + run_for;
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|t| {
                let s = Arc::clone(&shared);
                let mut rng = Rng(seed ^ ((t as u64 + 1) << 32));
                tokio::spawn(async move {
                    let mut panics = 0u64;
                    while Instant::now() < end {
                        let op = AssertUnwindSafe(one_op(&s, &mut rng)).catch_unwind();
                        if op.await.is_err() {
                            panics += 1;
                        }
                        s.ops.fetch_add(1, SeqCst);
                        if rng.below(3) == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    panics
                })
            })
            .collect();
        let all = futures::future::join_all(handles);
        let results = tokio::time::timeout(DEADLINE, all)
            .await
            .unwrap_or_else(|_| {
                panic!("seed {seed}: tasks still waiting at the deadline (lost wake-up?)")
            });
        for r in results {
            r.unwrap_or_else(|e| panic!("seed {seed}: a task failed: {e}"));
        }
    });
    let writes = shared.writes.load(SeqCst);
    assert!(
        support::is_idle(&shared.lock),
        "seed {seed}: the lock is not idle (held, queued, or a bias left behind)"
    );
    let data = shared.lock.try_read().unwrap();
    assert_eq!(
        *data,
        vec![writes; 4],
        "seed {seed}: data does not hold exactly the writes"
    );
    println!("ops = {}, writes = {writes}", shared.ops.load(SeqCst));
}

fn seed_from_env() -> Option<u64> {
    std::env::var("TORTURE_SEED")
        .ok()
        .map(|s| s.parse().expect("TORTURE_SEED is a u64"))
}

fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    t.as_nanos() as u64 ^ u64::from(std::process::id())
}

#[test]
fn torture_short() {
    match seed_from_env() {
        Some(seed) => torture(seed, Duration::from_secs(2)),
        None => {
            // A fixed seed (always the same run) and a fresh one (new ground each time).
            torture(0x5EED_0001, Duration::from_millis(1500));
            torture(fresh_seed(), Duration::from_millis(1500));
        }
    }
}

#[test]
#[ignore = "long: minutes; run with --ignored"]
fn torture_long() {
    let secs = std::env::var("TORTURE_SECS")
        .ok()
        .map(|s| s.parse().expect("TORTURE_SECS is a number of seconds"))
        .unwrap_or(120u64);
    let seed = seed_from_env().unwrap_or_else(fresh_seed);
    let mut rng = Rng(seed);
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        torture(rng.next(), Duration::from_secs(10));
    }
}
