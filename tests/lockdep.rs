//! The `lockdep` feature: lock-order cycles reported the first time they appear (with no
//! deadlock in the run), recursive acquires reported at once, and no report for what
//! cannot deadlock (the same order again, `try_` acquires, downgrades, upgrades, nested
//! subclasses, guards passed between tasks, blocking acquires from threads).
//!
//! Lockdep's graph is process-wide and only grows, and the tests run in parallel: each
//! test names its own classes (its name as a prefix), and every report is the default
//! panic, its message read from the panic. A report panics before the lock is touched;
//! each test that gets one checks that the locks are idle and the holder holds nothing
//! afterwards (a report is foreign code: the panic must leave everything consistent).
// The holders are tokio tasks: the feature `tokio` too.
#![cfg(all(feature = "lockdep", feature = "tokio"))]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use async_rwsem::lockdep::{self, Mode};
use async_rwsem::{
    OwnedRwLockUpgradableReadGuard, OwnedRwLockWriteGuard, RwLock, RwLockUpgradableReadGuard,
    RwLockWriteGuard,
};

mod support;
use support::assert_idle;
use support::lockdep::{lock, message, report_of, setup};

/// `file:line:` of a line of this file, as a report writes a location.
fn at(line: u32) -> String {
    format!("{}:{line}:", file!())
}

/// Asserts that `report` has each of `lines` of this file, and returns it.
#[track_caller]
fn assert_mentions(report: &str, lines: &[u32]) {
    for &line in lines {
        assert!(
            report.contains(&at(line)),
            "line {line} missing in:\n{report}"
        );
    }
}

#[tokio::test]
async fn ab_ba_in_two_sequential_tasks_is_reported_though_nothing_deadlocks() {
    setup();
    let (a, b) = (lock("abba: a"), lock("abba: b"));
    let (a1, b1) = (Arc::clone(&a), Arc::clone(&b));
    let lines = tokio::spawn(async move {
        let (ga, line_a) = (a1.read().await, line!());
        let (gb, line_b) = (b1.write().await, line!());
        drop((ga, gb));
        (line_a, line_b)
    })
    .await
    .unwrap();
    let (a2, b2) = (Arc::clone(&a), Arc::clone(&b));
    let (line_b2, line_a2) = (line!() + 2, line!() + 3);
    let report = report_of(async move {
        let _gb = b2.read().await;
        let _ga = a2.write().await;
        unreachable!("the second acquire reports");
    })
    .await;
    assert!(
        report.contains(r#"lock order cycle of 2 classes: "abba: b" -> "abba: a" -> "abba: b""#),
        "{report}"
    );
    // Both orders, each with its two locations and modes.
    assert_mentions(&report, &[lines.0, lines.1, line_b2, line_a2]);
    assert!(report.contains(r#""abba: b" -> "abba: a" (now, task "#));
    assert!(report.contains(&format!(
        r#"held "abba: b" (read, acquired at {}"#,
        at(line_b2)
    )));
    assert!(report.contains(&format!(
        r#"then acquired "abba: a" (write) at {}"#,
        at(line_a2)
    )));
    assert!(report.contains(r#""abba: a" -> "abba: b" (seen before, task "#));
    assert!(report.contains(&format!(
        r#"held "abba: a" (read, acquired at {}"#,
        at(lines.0)
    )));
    assert_idle(&a);
    assert_idle(&b);

    // Reported once: the same reverse order again goes through.
    let _gb = b.read().await;
    let _ga = a.write().await;
    assert_eq!(lockdep::held().len(), 2);
}

#[tokio::test]
async fn a_cycle_of_three_classes_is_reported_with_its_three_orders() {
    setup();
    let (a, b, c) = (lock("three: a"), lock("three: b"), lock("three: c"));
    let mut lines = Vec::new();
    for (first, second) in [(&a, &b), (&b, &c)] {
        let (first, second) = (Arc::clone(first), Arc::clone(second));
        lines.extend(
            tokio::spawn(async move {
                let (g1, l1) = (first.write().await, line!());
                let (g2, l2) = (second.write().await, line!());
                drop((g1, g2));
                [l1, l2]
            })
            .await
            .unwrap(),
        );
    }
    let (c2, a2) = (Arc::clone(&c), Arc::clone(&a));
    lines.extend([line!() + 2, line!() + 3]);
    let report = report_of(async move {
        let _gc = c2.read().await;
        let _ga = a2.read().await;
    })
    .await;
    assert!(
        report.contains(
            r#"lock order cycle of 3 classes: "three: c" -> "three: a" -> "three: b" -> "three: c""#
        ),
        "{report}"
    );
    assert_mentions(&report, &lines);
    assert_eq!(report.lines().count(), 4, "{report}");
    for lock in [&a, &b, &c] {
        assert_idle(lock);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recursive_read_with_a_writer_queued_is_reported() {
    setup();
    // FIFO: the second read waits for the queued writer (under the default policy it
    // passes the writer until the writer's handoff timeout is due, and may get in first).
    let l = Arc::new(
        RwLock::with_policy(0, async_rwsem::Policy::fifo()).with_lockdep_class("recursive read"),
    );
    let l2 = Arc::clone(&l);
    let (line_1, line_2) = (line!() + 2, line!() + 12);
    let task = tokio::spawn(async move {
        let first = l2.read().await;
        // A writer in another task queues behind the read lock...
        let writer = {
            let l3 = Arc::clone(&l2);
            tokio::spawn(async move { *l3.write().await += 1 })
        };
        while l2.try_read().is_ok() {
            tokio::task::yield_now().await;
        }
        // ...and a second read from this task would wait for it: tokio issue 2849.
        let second = l2.read().await;
        drop((first, second, writer));
    });
    let report = message(task.await.expect_err("no report").into_panic());
    assert!(report.contains("recursive acquire of one lock"), "{report}");
    assert!(report.contains("(read) at"), "{report}");
    assert!(report.contains("tokio issue 2849"), "{report}");
    assert_mentions(&report, &[line_1, line_2]);
    // The writer got the lock when the panic released the first read.
    while *l.read().await != 1 {
        tokio::task::yield_now().await;
    }
    assert_idle(&l);
}

#[tokio::test]
async fn a_write_while_holding_a_read_is_reported_at_once() {
    setup();
    let l = lock("write while read");
    let l2 = Arc::clone(&l);
    let (line_r, line_w) = (line!() + 2, line!() + 3);
    let report = report_of(async move {
        let _r = l2.read().await;
        let _w = l2.write().await;
    })
    .await;
    assert!(report.contains("recursive acquire of one lock"), "{report}");
    assert!(
        report.contains(&format!(
            r#"acquires "write while read" (write) at {}"#,
            at(line_w)
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!("(read, acquired at {}", at(line_r))),
        "{report}"
    );
    assert_idle(&l);

    // A write while holding the write lock, from a thread (blocking).
    let line_w2 = line!() + 2;
    let report = thread::spawn(move || {
        let _w = l.blocking_write();
        let _w2 = l.blocking_write();
    })
    .join()
    .map(|()| String::new())
    .unwrap_or_else(message);
    assert!(report.contains("thread #"), "{report}");
    assert!(
        report.contains("the write lock it holds excludes every other acquire"),
        "{report}"
    );
    assert_mentions(&report, &[line_w2, line_w2 + 1]);
}

#[tokio::test]
async fn the_same_order_repeated_is_not_reported() {
    setup();
    let (a, b, c) = (lock("same: a"), lock("same: b"), lock("same: c"));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (a, b, c) = (Arc::clone(&a), Arc::clone(&b), Arc::clone(&c));
        tasks.push(tokio::spawn(async move {
            let _a = a.read().await;
            if i % 2 == 0 {
                let _b = b.write().await;
                let _c = c.read().await;
            } else {
                // A then C directly: consistent with A, B, C.
                let _c = c.write().await;
            }
            lockdep::held().len()
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        // Each task held its one or two inner locks beside A, then only A.
        assert_eq!(task.await.unwrap(), 1, "task {i}");
    }
    // B, then C, without A: a sub-order of A, B, C.
    let _b = b.read().await;
    let _c = c.read().await;
}

#[tokio::test]
async fn try_acquires_in_the_reverse_order_are_not_reported() {
    setup();
    let (a, b) = (lock("try: a"), lock("try: b"));
    {
        let _a = a.read().await;
        let _b = b.write().await;
    }
    let _b = b.try_write().unwrap();
    let _a = a.try_read().unwrap();
    let held = lockdep::held();
    assert_eq!(
        held.iter()
            .map(|h| (h.class.as_str(), h.mode))
            .collect::<Vec<_>>(),
        [(r#""try: b""#, Mode::Write), (r#""try: a""#, Mode::Read)]
    );
    // A failed try holds nothing and reports nothing, even on a held lock.
    assert!(a.try_write().is_err());
    assert!(Arc::clone(&b).try_read_owned().is_err());
    assert_eq!(lockdep::held().len(), 2);
}

#[tokio::test]
async fn downgrades_and_upgrades_change_the_held_mode_and_are_not_reported() {
    setup();
    let (a, b) = (lock("modes: a"), lock("modes: b"));

    let w = a.write().await;
    let r = RwLockWriteGuard::downgrade(w);
    assert_eq!(modes(), [Mode::Read]);
    let _b = b.read().await; // A (read) then B
    drop((r, _b));

    let w = a.write().await;
    let up = RwLockWriteGuard::downgrade_to_upgradable(w);
    assert_eq!(modes(), [Mode::UpgradableRead]);
    let w = RwLockUpgradableReadGuard::upgrade(up).await;
    assert_eq!(modes(), [Mode::Write]);
    let up = RwLockWriteGuard::downgrade_to_upgradable(w);
    let w = RwLockUpgradableReadGuard::try_upgrade(up).unwrap();
    assert_eq!(modes(), [Mode::Write]);
    let r = RwLockWriteGuard::downgrade(w);
    drop(r);
    assert!(lockdep::held().is_empty());

    // Owned forms, and the upgradable guard's downgrade.
    let up = Arc::clone(&a).upgradable_read_owned().await;
    let w = OwnedRwLockUpgradableReadGuard::upgrade(up).await;
    assert_eq!(modes(), [Mode::Write]);
    let r = OwnedRwLockWriteGuard::downgrade(w);
    assert_eq!(modes(), [Mode::Read]);
    drop(r);
    let up = a.upgradable_read().await;
    let r = RwLockUpgradableReadGuard::downgrade(up);
    assert_eq!(modes(), [Mode::Read]);
    drop(r);
    assert!(lockdep::held().is_empty());
    assert_idle(&a);
}

/// The modes of the locks the current holder holds.
fn modes() -> Vec<Mode> {
    lockdep::held().iter().map(|held| held.mode).collect()
}

#[tokio::test]
async fn an_upgrade_while_holding_another_read_of_the_lock_is_reported() {
    setup();
    let l = lock("upgrade beside read");
    let l2 = Arc::clone(&l);
    let line_r = line!() + 3;
    let report = report_of(async move {
        let up = l2.upgradable_read().await;
        let _r = l2.try_read().unwrap(); // a try: not reported
        let _w = RwLockUpgradableReadGuard::upgrade(up).await;
    })
    .await;
    assert!(
        report.contains("an upgrade waits for every other reader"),
        "{report}"
    );
    assert_mentions(&report, &[line_r]);
    assert_idle(&l);
}

#[tokio::test]
async fn two_locks_of_one_class_are_reported_unless_they_nest() {
    setup();
    // One class: made at one site.
    let locks: Vec<Arc<RwLock<u32>>> = (0..2).map(|_| Arc::new(RwLock::new(0))).collect();
    let created = format!("RwLock created at {}", at(line!() - 1));
    let nest = |(l0, l1): (Arc<RwLock<u32>>, Arc<RwLock<u32>>)| async move {
        let _first = l0.write().await;
        let _second = l1.write().await;
    };
    let both = || (Arc::clone(&locks[0]), Arc::clone(&locks[1]));
    // One task alone is one flow (as `join_all` of futures each holding its own lock
    // looks): not reported; a second holder is.
    support::lockdep::silent(nest(both())).await;
    let report = report_of(nest(both())).await;
    assert!(
        report.contains("two locks of one class held at once"),
        "{report}"
    );
    assert!(report.contains(&created), "{report}");
    // A thread, at once.
    let threads: Vec<Arc<RwLock<u32>>> = (0..2).map(|_| Arc::new(RwLock::new(0))).collect();
    let report = thread::spawn(move || {
        let _first = threads[0].blocking_write();
        let _second = threads[1].blocking_write();
    })
    .join()
    .map(|()| String::new())
    .unwrap_or_else(message);
    assert!(
        report.contains("two locks of one class held at once"),
        "{report}"
    );

    // Named, the inner one with subclass 1: two classes, ordered.
    let parent = lock("nest: node");
    let child = Arc::new(
        RwLock::new(0)
            .with_lockdep_class("nest: node")
            .with_lockdep_subclass(1),
    );
    for _ in 0..2 {
        let _p = parent.write().await;
        let _c = child.read().await;
        let held = lockdep::held();
        assert_eq!(held[0].class, r#""nest: node""#);
        assert_eq!(held[1].class, r#""nest: node"/1"#);
    }
    // Two locks of one name without a subclass are one class (taken on a thread: at
    // once).
    let other = lock("nest: node");
    let p = Arc::clone(&parent);
    let report = thread::spawn(move || {
        let _p = p.blocking_read();
        let _o = other.blocking_read();
    })
    .join()
    .map(|()| String::new())
    .unwrap_or_else(message);
    assert!(
        report.contains("two locks of one class held at once"),
        "{report}"
    );
    assert_idle(&parent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_passed_between_tasks_leave_nothing_behind() {
    setup();
    let (a, b) = (lock("passed: a"), lock("passed: b"));
    // Acquired in this task, dropped in another: off this holder's set.
    let guard = Arc::clone(&a).write_owned().await;
    assert_eq!(lockdep::held().len(), 1);
    tokio::spawn(async move { drop(guard) }).await.unwrap();
    assert!(lockdep::held().is_empty());
    // So this task acquiring A again, B then A, is no recursion and no order.
    {
        let _b = b.write().await;
        let _a = a.write().await;
    }
    // Dropped on a thread, from a thread's acquire.
    let guard = thread::spawn({
        let a = Arc::clone(&a);
        move || a.blocking_read_owned()
    })
    .join()
    .unwrap();
    drop(guard);
    {
        let _a = a.write().await;
    }

    // A task that receives a guard and acquires is not charged with it (documented): A
    // received, then B, is no order, so B then A stays unreported.
    let guard = Arc::clone(&a).read_owned().await;
    let b2 = Arc::clone(&b);
    tokio::spawn(async move {
        let _b = b2.read().await;
        drop(guard);
        let held = lockdep::held();
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].class, r#""passed: b""#);
    })
    .await
    .unwrap();
    let _b = b.read().await;
    let _a = a.read().await;
    assert_eq!(lockdep::held().len(), 2);
}

#[test]
fn blocking_acquires_from_threads_are_checked_per_thread() {
    setup();
    let (a, b) = (lock("threads: a"), lock("threads: b"));
    // The same order in four threads at once, while another thread holds A: no report.
    let outside = a.blocking_read();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (a, b) = (Arc::clone(&a), Arc::clone(&b));
            thread::spawn(move || {
                for _ in 0..50 {
                    let _a = a.blocking_read();
                    let _b = b.blocking_write();
                    assert_eq!(lockdep::held().len(), 2);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    drop(outside);
    // The reverse order in a thread: reported, on that thread.
    let line = line!() + 4;
    let report = thread::spawn({
        let (a, b) = (Arc::clone(&a), Arc::clone(&b));
        move || {
            let _b = b.try_read_for(Duration::from_secs(1)).unwrap();
            let _a = a.blocking_write();
        }
    })
    .join()
    .map(|()| String::new())
    .unwrap_or_else(message);
    assert!(
        report.contains(r#"lock order cycle of 2 classes: "threads: b" -> "threads: a""#),
        "{report}"
    );
    assert!(report.contains("(now, thread #"), "{report}");
    assert_mentions(&report, &[line, line + 1]);
    assert_idle(&a);
    assert_idle(&b);
}

#[test]
fn a_report_panics_outside_every_lock() {
    setup();
    // The panic of a report leaves lockdep usable from the same thread at once.
    let l = lock("outside");
    let r = l.try_read().unwrap();
    let panicked = catch_unwind(AssertUnwindSafe(|| l.blocking_write()));
    assert!(panicked.is_err());
    assert_eq!(lockdep::held().len(), 1);
    drop(r);
    assert!(lockdep::held().is_empty());
    assert_idle(&l);
}

static STATIC_LOCK: RwLock<u32> = RwLock::const_new(0);

#[test]
fn every_constructor_makes_its_callers_line_the_class() {
    setup();
    /// The class of `lock`, as `held` writes it.
    fn class_of(lock: &RwLock<u32>) -> String {
        let _guard = lock.try_read().unwrap();
        lockdep::held().pop().unwrap().class
    }
    let created = |line: u32| format!("RwLock created at {}", at(line));
    let line = line!() + 1;
    let (new, default, from) = (RwLock::new(0), RwLock::default(), RwLock::from(0));
    assert!(class_of(&new).starts_with(&created(line)));
    assert!(class_of(&default).starts_with(&created(line)));
    assert!(class_of(&from).starts_with(&created(line)));
    let policy = RwLock::with_policy(0, async_rwsem::Policy::fifo());
    assert!(class_of(&policy).starts_with(&created(line!() - 1)));
    let max = RwLock::with_max_readers(0, 2);
    assert!(class_of(&max).starts_with(&created(line!() - 1)));
    assert!(class_of(&STATIC_LOCK).starts_with(&created(line!() - 20)));
    // Each of the three on one line is a class of its own column.
    assert_ne!(class_of(&new), class_of(&default));
    // Named after an acquire registered it: the name from then on.
    let new = new.with_lockdep_class("renamed after an acquire");
    assert_eq!(class_of(&new), r#""renamed after an acquire""#);
    let new = new.with_lockdep_subclass(2);
    assert_eq!(class_of(&new), r#""renamed after an acquire"/2"#);
}

#[tokio::test]
async fn an_owned_upgrade_beside_a_read_of_the_lock_is_reported() {
    setup();
    let l = lock("owned upgrade beside read");
    let l2 = Arc::clone(&l);
    let line_r = line!() + 3;
    let report = report_of(async move {
        let up = Arc::clone(&l2).upgradable_read_owned().await;
        let _r = l2.try_read().unwrap();
        let _w = OwnedRwLockUpgradableReadGuard::upgrade(up).await;
    })
    .await;
    assert!(
        report.contains("an upgrade waits for every other reader"),
        "{report}"
    );
    assert_mentions(&report, &[line_r, line_r + 1]);
    assert_idle(&l);
}

#[test]
fn a_timed_upgrade_that_gives_up_keeps_the_upgradable_entry() {
    setup();
    let l = lock("timed upgrade");
    // A read held by this thread's code, acquired (and so charged) on another thread.
    let other = thread::spawn({
        let l = Arc::clone(&l);
        move || l.blocking_read_owned()
    })
    .join()
    .unwrap();
    let up = Arc::clone(&l).try_upgradable_read_owned().unwrap();
    let up = OwnedRwLockUpgradableReadGuard::try_upgrade_for(up, Duration::from_millis(10))
        .expect_err("the other reader holds the lock");
    assert_eq!(modes(), [Mode::UpgradableRead]);
    drop(other);
    let w = OwnedRwLockUpgradableReadGuard::try_upgrade_for(up, Duration::from_secs(5))
        .expect("no reader left");
    assert_eq!(modes(), [Mode::Write]);
    drop(w);
    assert!(lockdep::held().is_empty());
    assert_idle(&l);
}

#[tokio::test]
async fn shards_taken_by_index_are_ordered_by_their_subclasses() {
    setup();
    // One class (one creation site), each shard its index as subclass.
    let shards: Arc<Vec<RwLock<u32>>> = Arc::new(
        (0..3)
            .map(|i| RwLock::new(0).with_lockdep_subclass(i))
            .collect(),
    );
    for (first, second) in [(0, 1), (1, 2), (0, 2), (0, 1)] {
        let _first = shards[first].write().await;
        let _second = shards[second].write().await;
    }
    let shards2 = Arc::clone(&shards);
    let report = report_of(async move {
        let _two = shards2[2].read().await;
        let _zero = shards2[0].read().await;
    })
    .await;
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
    assert!(report.contains("/2 -> RwLock created at"), "{report}");
    for shard in shards.iter() {
        assert_idle(shard);
    }
}

/// A guard that is `mem::forget`-ed is never released: its lock stays held by the holder
/// that took it, for as long as the lock lives. Once the lock is dropped, the hold goes
/// with it: a new lock made in the same place (the same address) is a new lock to lockdep,
/// and its acquire by the same holder is no recursive acquire; nor does the dropped lock
/// order what the holder acquires next.
#[test]
fn a_forgotten_guard_leaves_nothing_behind_once_its_lock_is_dropped() {
    setup();
    let mut lock = RwLock::new(0).with_lockdep_class("forget: dropped");
    let first = std::ptr::from_ref(&lock);
    std::mem::forget(lock.blocking_write());
    assert_eq!(lockdep::held().len(), 1);
    // The assignment drops the old lock in place and moves the new one there.
    lock = RwLock::new(0).with_lockdep_class("forget: dropped");
    assert_eq!(std::ptr::from_ref(&lock), first, "not the same address");
    assert!(lockdep::held().is_empty());
    // This thread acquires the new lock: no recursion.
    *lock.blocking_write() += 1;
    let r = lock.blocking_read();
    assert_eq!(*r, 1);
    drop(r);
    assert_idle(&lock);

    // The same in a task, the lock's storage a `Box` reused in place, another class's
    // lock acquired in between: no stale order either.
    let other = RwLock::new(0).with_lockdep_class("forget: other");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::spawn(async move {
            let mut slot = Box::new(RwLock::new(0).with_lockdep_class("forget: boxed"));
            std::mem::forget(slot.read().await);
            *slot = RwLock::new(0).with_lockdep_class("forget: boxed");
            assert!(lockdep::held().is_empty());
            // Had the forgotten read stayed held, "forget: boxed" would now be ordered
            // before "forget: other", and the other order below would close a cycle.
            let _other = other.write().await;
            let _boxed = slot.write().await;
        })
        .await
        .unwrap();
    });
}

/// A guard forgotten while its lock lives: the lock stays held by the holder that took it
/// (it is, for ever), so that holder's next acquire of it is a recursive acquire, reported
/// (for a write, a real self-deadlock) wherever the lock has moved since.
#[test]
fn a_forgotten_guard_of_a_live_lock_is_still_held() {
    setup();
    let lock = RwLock::new(0).with_lockdep_class("forget: live");
    std::mem::forget(lock.try_write().unwrap());
    let held = lockdep::held();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].mode, Mode::Write);
    // Moved: lockdep's identity for the lock moves with it.
    let moved = Box::new(lock);
    let report = message(
        catch_unwind(AssertUnwindSafe(|| drop(moved.blocking_write())))
            .expect_err("no lockdep report"),
    );
    assert!(report.contains("recursive acquire of one lock"), "{report}");
    assert!(report.contains(r#""forget: live" (write)"#), "{report}");
    // Dropped (with its forgotten write lock): nothing left held.
    drop(moved);
    assert!(lockdep::held().is_empty());
}

/// A release whose wake-up panics (the woken waiter's waker panics in `wake`) still takes
/// the lock off its holder's set: the thread's next acquire of it is no recursion.
#[test]
fn a_release_whose_wake_up_panics_takes_the_lock_off_the_held_set() {
    use std::sync::atomic::Ordering::SeqCst;
    use support::probe::{poll_with, probe_waker, Probe};
    setup();
    for fair in [false, true] {
        let l = lock("release: the wake-up panics");
        let w = l.blocking_write();
        // A reader of another thread queues, with a waker that panics when woken.
        let probe = Probe::new();
        let mut read = thread::spawn({
            let (l, probe) = (Arc::clone(&l), Arc::clone(&probe));
            move || {
                let mut read = Box::pin(l.read_owned());
                assert!(poll_with(read.as_mut(), &probe_waker(&probe)).is_pending());
                read
            }
        })
        .join()
        .unwrap();
        probe.panic_wake.store(true, SeqCst);
        let released = catch_unwind(AssertUnwindSafe(|| {
            if fair {
                RwLockWriteGuard::unlock_fair(w);
            } else {
                drop(w);
            }
        }));
        assert!(released.is_err(), "the wake-up did not panic");
        probe.panic_wake.store(false, SeqCst);
        assert!(
            lockdep::held().is_empty(),
            "fair: {fair}: {:?}",
            lockdep::held()
        );
        // The reader was granted the lock; once it leaves, this thread writes again.
        let std::task::Poll::Ready(r) = poll_with(read.as_mut(), &probe_waker(&probe)) else {
            panic!("the woken reader has no lock");
        };
        drop((r, read));
        *l.blocking_write() += 1;
        assert_idle(&l);
    }
}

/// A blocking acquire of a lock the task already holds, inside `spawn_blocking`: the
/// thread blocks for ever, as on a plain thread, and is reported at once, as there.
#[test]
fn a_blocking_self_deadlock_inside_spawn_blocking_is_reported_at_once() {
    setup();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let l = lock("spawn_blocking: write, write");
    let l2 = Arc::clone(&l);
    let line = line!() + 3;
    let outcome = runtime.block_on(async move {
        let task = tokio::task::spawn_blocking(move || {
            let _w = l2.blocking_write();
            let _w2 = l2.blocking_write();
        });
        tokio::time::timeout(Duration::from_secs(20), task).await
    });
    // A hung blocking thread must not hold the test at the runtime's drop.
    runtime.shutdown_background();
    let report = message(
        outcome
            .expect("not reported: the blocking acquire hangs")
            .expect_err("no report")
            .into_panic(),
    );
    assert!(report.contains("recursive acquire of one lock"), "{report}");
    assert_mentions(&report, &[line, line + 1]);
    assert_idle(&l);
}

/// A cycle is reported once, however many holders make its orders again afterwards.
#[test]
fn a_cycle_is_reported_once_whatever_holders_make_it_again() {
    setup();
    let (a, b) = (lock("once: a"), lock("once: b"));
    let in_order = |first: &Arc<RwLock<u32>>, second: &Arc<RwLock<u32>>| {
        let (first, second) = (Arc::clone(first), Arc::clone(second));
        thread::spawn(move || {
            let _first = first.blocking_read();
            let _second = second.blocking_write();
        })
        .join()
        .map_err(message)
    };
    in_order(&a, &b).unwrap();
    let report = in_order(&b, &a).expect_err("the cycle is not reported");
    assert!(report.contains("lock order cycle of 2 classes"), "{report}");
    // New threads, both orders again: no second report.
    for _ in 0..2 {
        in_order(&a, &b).unwrap();
        in_order(&b, &a).unwrap();
    }
    assert_idle(&a);
    assert_idle(&b);
}
