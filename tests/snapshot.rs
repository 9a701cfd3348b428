//! `RwLock::snapshot`: who holds the lock and who waits, under contention, with exact
//! counts.

use std::thread::sleep;
use std::time::Duration;

use async_rwsem::{Policy, RwLock, RwLockUpgradableReadGuard};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

mod support;
use support::assert_idle;

/// Every contended acquire queues at once, in a strict order (no reader passes the queued
/// writer), and nobody is handed the lock: a handoff timeout (an hour) that no test
/// reaches. A timeout in time, not `Duration::MAX`, so that a queued writer keeps the
/// time the snapshot reports.
fn queue_at_once() -> Policy {
    Policy::new()
        .writer_spin(Duration::ZERO)
        .reader_spin(Duration::ZERO)
        .writer_yields(0)
        .handoff_timeout(Duration::from_secs(3600))
        .strict_order(true)
}

#[test]
fn an_idle_lock() {
    let lock = RwLock::new(0);
    let s = lock.snapshot();
    assert_eq!(
        (
            s.readers,
            s.writer,
            s.upgradable,
            s.queued(),
            s.handoff_pending
        ),
        (0, false, false, 0, false)
    );
    assert_eq!(s.head_waited, None);
    assert_eq!(s.to_string(), "free; nobody queued");
}

#[test]
fn readers_inside_and_a_writer_and_readers_queued_behind_them() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, queue_at_once());
    let r1 = lock.try_read().unwrap();
    let r2 = lock.try_read().unwrap();
    let mut w = spawn(lock.write());
    assert_pending!(w.poll());
    // Readers arriving behind a queued writer queue too.
    let mut q1 = spawn(lock.read());
    let mut q2 = spawn(lock.read());
    assert_pending!(q1.poll());
    assert_pending!(q2.poll());
    sleep(Duration::from_millis(2));

    let s = lock.snapshot();
    assert_eq!(s.readers, 2);
    assert!(!s.writer && !s.upgradable);
    assert_eq!(
        (s.queued_readers, s.queued_writers, s.queued_upgradable),
        (2, 1, 0)
    );
    assert!(!s.upgrade_pending);
    assert_eq!(s.queued(), 3);
    assert!(!s.handoff_pending);
    // The head is the writer, whose queue time the lock keeps for the handoff.
    let waited = s.head_waited.unwrap();
    assert!(waited >= Duration::from_millis(2), "{waited:?}");
    let text = s.to_string();
    assert!(
        text.starts_with("2 readers hold it; queued: 2 readers, 1 writer; the head has waited "),
        "{text}"
    );

    // The readers leave: the writer is granted; the queued readers still wait.
    drop((r1, r2));
    let g = assert_ready!(w.poll());
    let s = lock.snapshot();
    assert!(s.writer);
    assert_eq!(s.readers, 0);
    #[cfg(not(feature = "lock_stat"))] // (which names the holder too)
    assert_eq!(s.to_string(), "a writer holds it; queued: 2 readers");
    assert_eq!((s.queued_readers, s.queued_writers), (2, 0));
    drop(g);
    drop(assert_ready!(q1.poll()));
    drop(assert_ready!(q2.poll()));
    drop((w, q1, q2));
    assert_eq!(lock.snapshot().queued(), 0);
    assert_idle(&lock);
}

#[test]
fn a_handoff_is_seen_pending() {
    support::lockdep_off();
    // A zero handoff timeout: the head gets the handoff at its first wait.
    let lock = RwLock::with_policy(0, queue_at_once().handoff_timeout(Duration::ZERO));
    let r = lock.try_read().unwrap();
    let mut w = spawn(lock.write());
    assert_pending!(w.poll());
    let s = lock.snapshot();
    assert!(s.handoff_pending, "{s:?}");
    assert!(s.to_string().ends_with("; handoff pending"), "{s}");
    drop(r);
    drop(assert_ready!(w.poll()));
    assert!(!lock.snapshot().handoff_pending);
}

#[test]
fn the_upgradable_reader_and_its_upgrade() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, queue_at_once());
    let up = lock.try_upgradable_read().unwrap();
    let r = lock.try_read().unwrap();
    let mut up2 = spawn(lock.upgradable_read());
    assert_pending!(up2.poll());
    let s = lock.snapshot();
    assert!(s.upgradable && !s.writer);
    assert_eq!(s.readers, 1);
    assert_eq!(s.queued_upgradable, 1);
    // (`lock_stat` names the holder and times every waiter too.)
    #[cfg(not(feature = "lock_stat"))]
    assert_eq!(
        s.to_string(),
        "the upgradable reader and 1 reader hold it; queued: 1 upgradable reader"
    );

    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    let s = lock.snapshot();
    assert!(s.upgrade_pending && s.upgradable);
    assert_eq!((s.readers, s.queued()), (1, 2));
    assert!(
        s.to_string()
            .contains("queued: the upgrade, 1 upgradable reader"),
        "{s}"
    );

    drop(r);
    let w = assert_ready!(upgrade.poll());
    let s = lock.snapshot();
    assert!(s.writer && !s.upgradable && !s.upgrade_pending);
    assert_eq!(s.queued_upgradable, 1);
    drop(w);
    drop(assert_ready!(up2.poll()));
    drop((upgrade, up2));
    assert_idle(&lock);
}

#[test]
fn a_snapshot_never_waits_for_the_lock() {
    let lock = RwLock::new(0);
    let w = lock.try_write().unwrap();
    // Taken by the holder itself, and from another thread, while the lock is held.
    assert!(lock.snapshot().writer);
    std::thread::scope(|s| {
        s.spawn(|| assert!(lock.snapshot().writer)).join().unwrap();
    });
    drop(w);
}
