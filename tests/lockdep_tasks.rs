//! Lockdep and the futures one task runs at once (`join!`, `select!`,
//! `FuturesUnordered`, `buffer_unordered`): the idioms that cannot deadlock are not
//! reported, the deadlocks among them are, and an upgrade is ordered as a write.
//!
//! Every test sets the report to a panic and the deadlock timeout to
//! [`DEADLOCK_TIMEOUT`]; the holds of the tests that expect no report last a few
//! milliseconds, a small fraction of it.

use std::pin::pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use async_rwsem::lockdep;
use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
use futures::stream::{self, FuturesUnordered, StreamExt};
use tokio::time::sleep;

mod support;
use support::assert_idle;
use support::lockdep::{lock, report_of, setup, silent, DEADLOCK_TIMEOUT};
use support::probe::{poll_panics, poll_with, probe_waker, Probe};

/// How long the holds of the idioms last: a few ms, far below [`DEADLOCK_TIMEOUT`].
const HOLD: Duration = Duration::from_millis(5);

// ---------------------------------------------------------------------------------------
// The idioms: no report.

#[tokio::test]
async fn join_of_a_writer_holding_across_a_sleep_and_a_reader_is_silent() {
    setup();
    let l = lock("join: writer, reader");
    let l2 = Arc::clone(&l);
    silent(async move {
        let writer = async {
            let mut w = l2.write().await;
            sleep(HOLD).await;
            *w += 1;
        };
        let reader = async {
            tokio::task::yield_now().await;
            assert_eq!(*l2.read().await, 1);
        };
        tokio::join!(writer, reader);
    })
    .await;
    assert_idle(&l);
}

#[tokio::test]
async fn join_of_two_holders_then_one_ordered_acquire_is_silent() {
    setup();
    let (a, b) = (lock("join order: a"), lock("join order: b"));
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    silent(async move {
        // The first polled holds b while the second acquires a: not an order.
        tokio::join!(
            async {
                let _b = b2.write().await;
                sleep(HOLD).await;
            },
            async {
                let _a = a2.write().await;
                sleep(HOLD).await;
            }
        );
        let _a = a2.write().await;
        let _b = b2.write().await;
    })
    .await;
    assert_idle(&a);
    assert_idle(&b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn futures_unordered_jobs_writing_one_lock_are_silent() {
    setup();
    let l = lock("futures unordered: jobs");
    let l2 = Arc::clone(&l);
    silent(async move {
        let jobs: FuturesUnordered<_> = (0..8)
            .map(|_| {
                let l = Arc::clone(&l2);
                async move {
                    let mut w = l.write().await;
                    sleep(Duration::from_millis(1)).await;
                    *w += 1;
                }
            })
            .collect();
        jobs.collect::<Vec<()>>().await;
    })
    .await;
    assert_eq!(*l.read().await, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffer_unordered_requests_on_one_cache_are_silent() {
    setup();
    let cache = lock("buffer unordered: cache");
    let cache2 = Arc::clone(&cache);
    silent(async move {
        let served: Vec<u32> = stream::iter(0..32u32)
            .map(|request| {
                let cache = Arc::clone(&cache2);
                async move {
                    if request % 4 == 0 {
                        let mut entry = cache.write().await;
                        sleep(Duration::from_millis(1)).await;
                        *entry += 1;
                    } else {
                        let entry = cache.read().await;
                        sleep(Duration::from_millis(1)).await;
                        let _ = *entry;
                    }
                    request
                }
            })
            .buffer_unordered(8)
            .collect()
            .await;
        assert_eq!(served.len(), 32);
    })
    .await;
    assert_eq!(*cache.read().await, 8);
}

#[tokio::test]
async fn a_select_loop_whose_branches_hold_and_read_one_lock_is_silent() {
    setup();
    let l = lock("select: loop");
    let l2 = Arc::clone(&l);
    silent(async move {
        let mut reads = 0;
        let mut writes = 0;
        while reads + writes < 6 {
            tokio::select! {
                biased;
                () = async {
                    let mut w = l2.write().await;
                    sleep(HOLD).await;
                    *w += 1;
                } => writes += 1,
                value = async { *l2.read().await } => {
                    assert!(value <= 6);
                    reads += 1;
                }
            }
        }
    })
    .await;
    assert_idle(&l);
}

#[tokio::test]
async fn join_of_two_writers_of_one_lock_is_silent() {
    setup();
    let l = lock("join: writers");
    let l2 = Arc::clone(&l);
    silent(async move {
        let one = async {
            let mut w = l2.write().await;
            sleep(HOLD).await;
            *w += 1;
        };
        let two = async {
            let mut w = l2.write().await;
            *w += 1;
        };
        tokio::join!(one, two);
        assert_eq!(*l2.read().await, 2);
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// The deadlocks among them: reported.

#[tokio::test]
async fn a_write_after_a_read_in_one_future_is_reported_once_it_has_waited() {
    setup();
    let l = lock("one future: read, write");
    let l2 = Arc::clone(&l);
    let line = line!() + 3;
    let report = report_of(async move {
        let _r = l2.read().await;
        let _w = l2.write().await;
    })
    .await;
    assert!(
        report.contains("deadlock: recursive acquire of one lock"),
        "{report}"
    );
    assert!(report.contains(&format!("{}:{line}:", file!())), "{report}");
    assert!(
        report.contains(&format!("and has waited {DEADLOCK_TIMEOUT:?} for it")),
        "{report}"
    );
    assert_idle(&l);
}

#[tokio::test]
async fn join_siblings_that_deadlock_are_reported() {
    setup();
    let (a, b) = (lock("join deadlock: a"), lock("join deadlock: b"));
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    let report = report_of(async move {
        tokio::join!(
            async {
                let _a = a2.write().await;
                sleep(HOLD).await;
                let _b = b2.write().await;
            },
            async {
                let _b = b2.write().await;
                sleep(HOLD).await;
                let _a = a2.write().await;
            }
        );
    })
    .await;
    assert!(
        report.contains("deadlock: recursive acquire of one lock"),
        "{report}"
    );
    assert!(report.contains("join deadlock"), "{report}");
    assert_idle(&a);
    assert_idle(&b);
}

#[tokio::test]
async fn an_ab_ba_between_two_jobs_of_a_futures_unordered_is_reported() {
    setup();
    let (a, b) = (lock("unordered cycle: a"), lock("unordered cycle: b"));
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    let report = report_of(async move {
        let jobs: FuturesUnordered<_> = [(Arc::clone(&a2), Arc::clone(&b2)), (b2, a2)]
            .into_iter()
            .enumerate()
            .map(|(i, (first, second))| async move {
                // One after the other: nothing waits, but the jobs order the two locks
                // both ways.
                sleep(Duration::from_millis(10 * i as u64)).await;
                let _first = first.write().await;
                let _second = second.write().await;
            })
            .collect();
        jobs.collect::<Vec<()>>().await;
    })
    .await;
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
}

// ---------------------------------------------------------------------------------------
// Upgrades: an acquisition of the write side.

/// Task 1's orders: the upgradable read of `a`, a read of `b`, then the upgrade of `a`.
async fn upgrade_under_b(a: Arc<RwLock<u32>>, b: Arc<RwLock<u32>>) {
    let up = a.upgradable_read().await;
    let _b = b.read().await;
    let _w = RwLockUpgradableReadGuard::upgrade(up).await;
}

/// Task 2's orders: a read of `a`, then the write lock of `b`.
async fn read_a_write_b(a: Arc<RwLock<u32>>, b: Arc<RwLock<u32>>) {
    let _a = a.read().await;
    let _b = b.write().await;
}

#[tokio::test]
async fn an_upgrade_under_another_lock_closes_a_cycle_with_a_reader_of_the_first() {
    setup();
    // Upgrade first, then the reader.
    let (a, b) = (lock("upgrade cycle 1: a"), lock("upgrade cycle 1: b"));
    tokio::spawn(upgrade_under_b(Arc::clone(&a), Arc::clone(&b)))
        .await
        .unwrap();
    let report = report_of(read_a_write_b(Arc::clone(&a), Arc::clone(&b))).await;
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
    assert!(report.contains("upgraded to"), "{report}");

    // The reader first, then the upgrade.
    let (a, b) = (lock("upgrade cycle 2: a"), lock("upgrade cycle 2: b"));
    tokio::spawn(read_a_write_b(Arc::clone(&a), Arc::clone(&b)))
        .await
        .unwrap();
    let report = report_of(upgrade_under_b(Arc::clone(&a), Arc::clone(&b))).await;
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
    assert!(report.contains("upgraded to"), "{report}");
    assert_idle(&a);
    assert_idle(&b);
}

#[tokio::test]
async fn an_upgrade_under_another_lock_alone_is_not_a_cycle() {
    setup();
    // Only one holder has the upgradable read: two tasks taking these orders cannot
    // deadlock each other.
    let (a, b) = (lock("upgrade alone: a"), lock("upgrade alone: b"));
    for _ in 0..2 {
        silent(upgrade_under_b(Arc::clone(&a), Arc::clone(&b))).await;
    }
    assert_idle(&a);
}

// ---------------------------------------------------------------------------------------
// An owned guard sent to another task.

#[tokio::test]
async fn an_owned_guard_received_from_another_task_stays_its_acquirers() {
    // Documented: the hold stays charged to the task that acquired it, so the orders
    // the receiving task makes through it are not seen (no report here), and the
    // acquiring task's own acquires are ordered after it until the guard is dropped.
    setup();
    let (a, b) = (lock("sent guard: a"), lock("sent guard: b"));
    let guard = tokio::spawn({
        let a = Arc::clone(&a);
        async move {
            let guard = a.write_owned().await;
            assert_eq!(lockdep::held().len(), 1);
            guard
        }
    })
    .await
    .unwrap();
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    silent(async move {
        assert!(lockdep::held().is_empty(), "the receiver does not hold it");
        let _b = b2.write().await; // a -> b, not seen
        drop(guard);
        let _ = a2;
    })
    .await;
    // The reverse order: no cycle to close.
    silent(async move {
        let _b = b.write().await;
        let _a = a.write().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// One flow's own cycle, and what is left.

#[tokio::test]
async fn one_task_taking_two_locks_both_ways_is_silent_but_a_thread_is_reported() {
    setup();
    let (a, b) = (lock("one flow: a"), lock("one flow: b"));
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    silent(async move {
        {
            let _a = a2.write().await;
            let _b = b2.write().await;
        }
        let _b = b2.write().await;
        let _a = a2.write().await;
    })
    .await;

    let (a, b) = (lock("one thread: a"), lock("one thread: b"));
    let report = std::thread::spawn(move || {
        {
            let _a = a.blocking_write();
            let _b = b.blocking_write();
        }
        let _b = b.blocking_write();
        let _a = a.blocking_write();
    })
    .join()
    .map(|()| String::new())
    .unwrap_or_else(support::lockdep::message);
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
}

#[tokio::test]
async fn join_branches_ordering_two_locks_then_another_task_reversing_them_is_reported() {
    // The false alarm lockdep cannot avoid (see the module documentation).
    setup();
    let (a, b) = (lock("join then task: a"), lock("join then task: b"));
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    silent(async move {
        tokio::join!(
            async {
                let _a = a2.write().await;
                sleep(HOLD).await;
            },
            async {
                let _b = b2.write().await;
                sleep(HOLD).await;
            }
        );
    })
    .await;
    let report = report_of(async move {
        let _b = b.write().await;
        let _a = a.write().await;
    })
    .await;
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
}

// ---------------------------------------------------------------------------------------
// Foreign code in lockdep's watch: the waiting future's waker (cloned by the watch, woken
// by the watchdog) may panic.

#[test]
fn a_waker_clone_that_panics_in_the_watch_leaves_nothing_behind() {
    setup();
    let l = lock("watch: clone panics");
    let probe = Probe::new();
    let waker = probe_waker(&probe);
    let mut write = pin!(l.write());
    let Poll::Ready(guard) = poll_with(write.as_mut(), &waker) else {
        panic!("an idle lock");
    };
    {
        // One future's read of the lock it writes: a suspect. The raw lock's clone (the
        // first) queues it; the watch's (the second) panics.
        probe
            .panic_clone_at
            .store(probe.clones.load(SeqCst) + 2, SeqCst);
        let mut read = pin!(l.read());
        poll_panics(read.as_mut(), &waker);
    } // dropped: the cancelled read leaves the queue
    drop(guard);
    assert_idle(&l);
    drop(waker);
    assert_eq!(
        Arc::strong_count(&probe),
        1,
        "a waker leaked or dropped twice"
    );
}

#[test]
fn a_waker_that_panics_when_the_watchdog_wakes_it_still_gets_its_report() {
    setup();
    let l = lock("watch: wake panics");
    let probe = Probe::new();
    probe.panic_wake.store(true, SeqCst);
    let waker = probe_waker(&probe);
    let mut write = pin!(l.write());
    let Poll::Ready(guard) = poll_with(write.as_mut(), &waker) else {
        panic!("an idle lock");
    };
    let report = {
        let mut read = pin!(l.read());
        assert!(poll_with(read.as_mut(), &waker).is_pending());
        // The watchdog's wake panics on its thread, is caught there, and the report
        // waits for the next poll.
        while probe.wakes() == 0 {
            std::thread::sleep(DEADLOCK_TIMEOUT / 10);
        }
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = poll_with(read.as_mut(), &waker);
        }))
        .map(|()| String::new())
        .unwrap_or_else(support::lockdep::message)
    }; // the read, dropped: it leaves the queue, and its waker is not woken
    assert!(
        report.contains("deadlock: recursive acquire of one lock"),
        "{report}"
    );
    drop(guard);
    assert_idle(&l);
    // The watchdog lives on: the next deadlock is reported too.
    let l2 = lock("watch: after a panicking wake");
    let mut write = pin!(l2.write());
    let Poll::Ready(guard) = poll_with(write.as_mut(), &waker) else {
        panic!("an idle lock");
    };
    probe.panic_wake.store(false, SeqCst);
    {
        let mut read = pin!(l2.read());
        assert!(poll_with(read.as_mut(), &waker).is_pending());
        while probe.wakes() < 2 {
            std::thread::sleep(DEADLOCK_TIMEOUT / 10);
        }
        poll_panics(read.as_mut(), &waker);
    }
    drop(guard);
    assert_idle(&l2);
}

// ---------------------------------------------------------------------------------------
// Round three (the observers' own bugs and false alarms): each shape as a user writes it.

/// How long a test waits for what should come at once or after [`DEADLOCK_TIMEOUT`]
/// (a report, a wake-up) before it calls it a hang: far longer than either.
const HANG: Duration = Duration::from_secs(20);

/// Waits, on this thread, until `probe`'s waker has been woken `n` times; fails after
/// [`HANG`] (the watchdog never woke it).
#[track_caller]
fn wait_for_wakes(probe: &Probe, n: usize) {
    let start = std::time::Instant::now();
    while probe.wakes() < n {
        assert!(
            start.elapsed() < HANG,
            "the watchdog never woke the waiting acquire"
        );
        std::thread::sleep(DEADLOCK_TIMEOUT / 10);
    }
}

/// Runs `task` as a tokio task and returns its report, failing if it hangs instead.
async fn report_or_hang<F>(task: F) -> String
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::time::timeout(HANG, report_of(task))
        .await
        .expect("no report: the acquire hangs")
}

#[tokio::test]
async fn join_all_of_reads_with_a_writer_queued_between_them_is_silent() {
    setup();
    // FIFO: no reader passes the queued writer, so the second read does wait for it.
    let l = Arc::new(
        RwLock::with_policy(0, async_rwsem::Policy::fifo())
            .with_lockdep_class("join_all: reads, writer between"),
    );
    let l2 = Arc::clone(&l);
    silent(async move {
        let first = async {
            let r = l2.read().await;
            // A writer of another task queues behind this read...
            let writer = {
                let l = Arc::clone(&l2);
                tokio::spawn(async move { *l.write().await += 1 })
            };
            while l2.try_read().is_ok() {
                tokio::task::yield_now().await;
            }
            sleep(HOLD).await;
            drop(r);
            writer.await.unwrap();
        };
        let second = async {
            tokio::task::yield_now().await;
            while l2.try_read().is_ok() {
                tokio::task::yield_now().await;
            }
            // ...and this read queues behind it: it waits for the sibling's read, which
            // ends on its own.
            *l2.read().await
        };
        let ((), value) = tokio::join!(first, second);
        assert_eq!(value, 1);
    })
    .await;
    assert_idle(&l);
}

#[tokio::test]
async fn join_all_over_per_item_locks_made_at_one_site_is_silent() {
    setup();
    // One class: every item's lock is made on the same line.
    let items: Arc<Vec<RwLock<u32>>> = Arc::new((0..4).map(|_| RwLock::new(0)).collect());
    let items2 = Arc::clone(&items);
    silent(async move {
        let updates = items2.iter().map(|item| async move {
            let mut item = item.write().await;
            sleep(HOLD).await; // each future holds only its own item
            *item += 1;
        });
        futures::future::join_all(updates).await;
    })
    .await;
    for item in items.iter() {
        assert_eq!(*item.read().await, 1);
    }
}

#[tokio::test]
async fn a_futures_select_loop_taking_one_lock_per_branch_is_silent() {
    use futures::FutureExt;
    setup();
    let (a, b) = (lock("futures select: a"), lock("futures select: b"));
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    silent(async move {
        // More acquires than tokio's budget lets one poll make (128 units, charged once in
        // eight acquires under the default policy): a branch that owns its
        // lock yields when the budget is spent, and `select!` polls the other one.
        for _ in 0..5000 {
            futures::select! {
                () = async { *a2.write().await += 1 }.fuse() => {}
                () = async { *b2.write().await += 1 }.fuse() => {}
            }
        }
    })
    .await;
    // No order between the two was ever made: another task's is no cycle.
    silent(async move {
        let _b = b.write().await;
        let _a = a.write().await;
    })
    .await;
}

#[tokio::test]
async fn a_write_after_a_read_is_reported_though_a_siblings_earlier_read_ended() {
    setup();
    let l = lock("one future: read, write, beside a sibling's read");
    let l2 = Arc::clone(&l);
    let report = report_or_hang(async move {
        tokio::join!(
            async {
                let _r = l2.read().await;
                sleep(HOLD).await; // this read ends
            },
            async {
                let _r = l2.read().await;
                let _w = l2.write().await; // waits for its own read: for ever
            }
        );
    })
    .await;
    assert!(
        report.contains("deadlock: recursive acquire of one lock"),
        "{report}"
    );
    assert_idle(&l);
}

/// The job of [`an_ab_ba_between_two_jobs_run_one_after_the_other_is_reported`].
async fn take_in_order(first: Arc<RwLock<u32>>, second: Arc<RwLock<u32>>) {
    let _first = first.write().await;
    let _second = second.write().await;
}

#[tokio::test]
async fn an_ab_ba_between_two_jobs_run_one_after_the_other_is_reported() {
    setup();
    let (a, b) = (
        lock("unordered, one after the other: a"),
        lock("unordered, one after the other: b"),
    );
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    let report = report_of(async move {
        let mut jobs = FuturesUnordered::new();
        // The second job is pushed once the first is done: its waker may reuse the first
        // one's address; it is another holder all the same.
        jobs.push(take_in_order(Arc::clone(&a2), Arc::clone(&b2)));
        jobs.next().await;
        jobs.push(take_in_order(b2, a2));
        jobs.next().await;
    })
    .await;
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
    assert_idle(&a);
    assert_idle(&b);
}

#[tokio::test]
async fn a_borrowed_upgrade_waiting_for_another_jobs_read_is_silent() {
    setup();
    let l = lock("unordered: upgrade, another job's read");
    let l2 = Arc::clone(&l);
    silent(async move {
        let read_started = tokio::sync::Notify::new();
        let jobs: FuturesUnordered<
            std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>,
        > = FuturesUnordered::new();
        jobs.push(Box::pin(async {
            let _r = l2.read().await;
            read_started.notify_one();
            // Longer than the deadlock timeout: the upgrade waits all that time.
            sleep(DEADLOCK_TIMEOUT * 2).await;
        }));
        jobs.push(Box::pin(async {
            read_started.notified().await;
            let up = l2.upgradable_read().await;
            let mut w = RwLockUpgradableReadGuard::upgrade(up).await;
            *w += 1;
        }));
        jobs.collect::<Vec<()>>().await;
    })
    .await;
    assert_eq!(*l.read().await, 1);
}

#[test]
fn a_waker_whose_clone_panics_cannot_kill_the_watchdog() {
    setup();
    for round in 0..2 {
        let l = lock("watchdog: clone panics");
        let probe = Probe::new();
        let waker = probe_waker(&probe);
        let mut write = pin!(l.write());
        let Poll::Ready(guard) = poll_with(write.as_mut(), &waker) else {
            panic!("an idle lock");
        };
        {
            let mut read = pin!(l.read());
            assert!(poll_with(read.as_mut(), &waker).is_pending());
            // From now on every clone of the waker panics (the watchdog's too, if it
            // makes one): the deadlock is still reported, in both rounds.
            probe.panic_clone.store(true, SeqCst);
            wait_for_wakes(&probe, 1);
            let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = poll_with(read.as_mut(), &waker);
            }))
            .map(|()| String::new())
            .unwrap_or_else(support::lockdep::message);
            assert!(
                report.contains("deadlock: recursive acquire of one lock"),
                "round {round}: {report}"
            );
        }
        drop(guard);
        assert_idle(&l);
        drop(waker);
        assert_eq!(Arc::strong_count(&probe), 1, "a waker leaked");
    }
}
