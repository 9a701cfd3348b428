//! Upgradable reads, one poll at a time: the count word after each step (writer 1,
//! waiters 2, handoff 4, upgradable 8, reader 256).

use std::time::Duration;

use crate::{RwLock, RwLockUpgradableReadGuard, RwLockWriteGuard};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

use crate::raw::tests::support::*;

fn lock() -> RwLock<u32> {
    RwLock::with_policy(0, queue_at_once())
}

#[test]
fn one_upgradable_beside_readers() {
    let _lockdep = lockdep_off();
    let l = lock();
    let up = assert_ready!(spawn(l.upgradable_read()).poll());
    assert_eq!(l.raw.count_word(), R | UPG);
    let r = l.try_read().unwrap();
    assert_eq!(l.raw.count_word(), (2 * R) | UPG);
    assert!(l.try_write().is_err());
    assert!(l.try_upgradable_read().is_err());
    // A second upgradable reader queues; it is granted when the first one leaves, beside
    // the plain reader still inside.
    let mut up2 = spawn(l.upgradable_read());
    assert_pending!(up2.poll());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG | WAITERS);
    drop(up);
    assert!(up2.is_woken());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG);
    let up2 = assert_ready!(up2.poll());
    drop((r, up2));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn try_upgrade_only_when_alone() {
    let l = lock();
    let up = l.try_upgradable_read().unwrap();
    let r = l.try_read().unwrap();
    let up = RwLockUpgradableReadGuard::try_upgrade(up).unwrap_err();
    assert_eq!(l.raw.count_word(), (2 * R) | UPG);
    drop(r);
    let mut w = RwLockUpgradableReadGuard::try_upgrade(up).unwrap();
    *w = 7;
    assert_eq!(l.raw.count_word(), W);
    drop(w);
    assert_eq!(*l.try_read().unwrap(), 7);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn upgrade_waits_for_readers_and_holds_new_ones_off() {
    let _lockdep = lockdep_off();
    let l = lock();
    let r1 = l.try_read().unwrap();
    let up = l.try_upgradable_read().unwrap();
    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    // Queued at the head with the handoff bit: new readers and writers queue behind it.
    assert_eq!(l.raw.count_word(), (2 * R) | UPG | WAITERS | HANDOFF);
    assert!(l.try_read().is_err());
    let mut r2 = spawn(l.read());
    let mut w2 = spawn(l.write());
    assert_pending!(r2.poll());
    assert_pending!(w2.poll());
    assert_eq!(l.raw.queue_len(), 3);
    // The last other reader leaves: the upgrade is granted the write lock.
    drop(r1);
    assert!(upgrade.is_woken());
    assert!(!r2.is_woken() && !w2.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    let mut w = assert_ready!(upgrade.poll());
    *w += 1;
    // Its release grants the next head (the reader), and the writer after it.
    drop(w);
    assert!(r2.is_woken());
    let g = assert_ready!(r2.poll());
    assert_eq!(*g, 1);
    drop(g);
    assert!(w2.is_woken());
    drop(assert_ready!(w2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn cancelled_upgrade_releases_and_lets_the_queue_in() {
    let _lockdep = lockdep_off();
    let l = lock();
    let r1 = l.try_read().unwrap();
    let up = l.try_upgradable_read().unwrap();
    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG | WAITERS | HANDOFF);
    // Dropping the pending upgrade gives up the upgradable read lock it owned; the reader
    // queued behind it inherits the head and is granted beside r1.
    drop(upgrade);
    assert!(r2.is_woken());
    assert_eq!(l.raw.count_word(), 2 * R);
    drop(assert_ready!(r2.poll()));
    drop(r1);
    assert_idle(&l);
}

#[test]
fn upgrade_dropped_unpolled_releases() {
    let l = lock();
    let up = l.try_upgradable_read().unwrap();
    let upgrade = RwLockUpgradableReadGuard::upgrade(up);
    assert_eq!(l.raw.count_word(), R | UPG);
    drop(upgrade);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn granted_upgrade_dropped_unpolled_releases_the_write_lock() {
    let _lockdep = lockdep_off();
    let l = lock();
    let r1 = l.try_read().unwrap();
    let up = l.try_upgradable_read().unwrap();
    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(r1);
    assert!(upgrade.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(upgrade);
    assert!(w2.is_woken());
    drop(assert_ready!(w2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn downgrades() {
    let _lockdep = lockdep_off();
    let l = lock();
    let w = l.try_write().unwrap();
    let mut r = spawn(l.read());
    let mut up2 = spawn(l.upgradable_read());
    let mut w2 = spawn(l.write());
    assert_pending!(r.poll());
    assert_pending!(up2.poll());
    assert_pending!(w2.poll());
    // Write -> upgradable: the reader is granted, not the writer nor the other upgradable.
    let up = RwLockWriteGuard::downgrade_to_upgradable(w);
    assert!(r.is_woken() && !up2.is_woken() && !w2.is_woken());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG | WAITERS);
    let g = assert_ready!(r.poll());
    // Upgradable -> read: the queued upgradable reader gets the slot.
    let plain = RwLockUpgradableReadGuard::downgrade(up);
    assert!(up2.is_woken());
    assert_eq!(l.raw.count_word(), (3 * R) | UPG | WAITERS);
    let up2 = assert_ready!(up2.poll());
    drop((g, plain, up2));
    assert!(w2.is_woken());
    drop(assert_ready!(w2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn two_upgraders_take_turns() {
    let _lockdep = lockdep_off();
    // Only one upgradable reader at a time: a second upgrader waits for the first's whole
    // read-upgrade-write cycle, so they can never wait for each other.
    let l = lock();
    let mut a = spawn(async {
        let up = l.upgradable_read().await;
        let mut w = RwLockUpgradableReadGuard::upgrade(up).await;
        *w += 1;
    });
    let mut b = spawn(async {
        let up = l.upgradable_read().await;
        tokio::task::yield_now().await;
        let mut w = RwLockUpgradableReadGuard::upgrade(up).await;
        *w += 10;
    });
    let r = l.try_read().unwrap();
    assert_pending!(a.poll()); // upgradable, then the upgrade waits for `r`
    assert_pending!(b.poll()); // queued for the upgradable slot
    drop(r);
    assert_ready!(a.poll());
    for _ in 0..3 {
        if b.poll().is_ready() {
            break;
        }
    }
    assert_eq!(*l.try_read().unwrap(), 11);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn blocking_upgradable_read_from_a_thread() {
    let l = std::sync::Arc::new(lock());
    let g = l.try_read().unwrap_or_else(|_| unreachable!());
    let l2 = std::sync::Arc::clone(&l);
    let t = std::thread::spawn(move || {
        let up = l2.blocking_upgradable_read();
        let mut w = super_block_on(RwLockUpgradableReadGuard::upgrade(up));
        *w += 1;
    });
    std::thread::sleep(Duration::from_millis(20));
    drop(g);
    t.join().unwrap();
    assert_eq!(*l.try_read().unwrap(), 1);
}

fn super_block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

#[test]
fn owned_upgradable_upgrade_and_cancel() {
    let _lockdep = lockdep_off();
    use crate::{OwnedRwLockUpgradableReadGuard, OwnedRwLockWriteGuard};
    use std::sync::Arc;

    let l = Arc::new(lock());
    let up = assert_ready!(spawn(Arc::clone(&l).upgradable_read_owned()).poll());
    assert_eq!(l.raw.count_word(), R | UPG);
    assert!(Arc::clone(&l).try_upgradable_read_owned().is_err());
    // An upgrade future dropped before its first poll releases the lock.
    drop(OwnedRwLockUpgradableReadGuard::upgrade(up));
    assert_eq!(l.raw.count_word(), 0);
    // Waiting for a reader, holding new readers off, then granted.
    let r = l.try_read().unwrap();
    let up = Arc::clone(&l).try_upgradable_read_owned().unwrap();
    let mut upgrade = spawn(OwnedRwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG | WAITERS | HANDOFF);
    drop(r);
    assert!(upgrade.is_woken());
    let mut w = assert_ready!(upgrade.poll());
    *w = 5;
    // Back down to upgradable, then to a plain read.
    let up = OwnedRwLockWriteGuard::downgrade_to_upgradable(w);
    assert_eq!(l.raw.count_word(), R | UPG);
    let r = OwnedRwLockUpgradableReadGuard::downgrade(up);
    assert_eq!(*r, 5);
    assert_eq!(l.raw.count_word(), R);
    drop(r);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn owned_upgradable_guard_is_static_and_send() {
    fn static_send<T: Send + 'static>(_: &T) {}
    let l = std::sync::Arc::new(RwLock::new(0u8));
    let up = std::sync::Arc::clone(&l)
        .try_upgradable_read_owned()
        .unwrap();
    static_send(&up);
    static_send(&crate::OwnedRwLockUpgradableReadGuard::upgrade(up));
}

/// The handoff a pass batch gave to a head writer stays the writer's when an upgrade goes
/// ahead of it: the upgrade, served first, must not clear it, or the readers queued
/// behind the writer pass it a second time at the upgrade's release.
#[test]
fn an_upgrade_served_ahead_of_a_writer_leaves_it_the_handoff_readers_passing_it_gave() {
    let _lockdep = lockdep_off();
    // Readers pass a head writer only where handoffs exist (a finite timeout; an hour is
    // never reached here).
    let l = RwLock::with_policy(
        0u32,
        queue_at_once().handoff_timeout(Duration::from_secs(3600)),
    );
    let up = l.try_upgradable_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    assert_eq!(l.raw.count_word(), R | UPG | WAITERS);
    // A reader queues behind the writer and passes it at once (the lock is read-owned):
    // the writer gets the handoff, due the lock next.
    let mut r1 = spawn(l.read());
    let g1 = assert_ready!(r1.poll());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG | WAITERS | HANDOFF);
    // The upgrade queues at the head, ahead of the writer.
    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    assert_eq!(l.raw.queue_len(), 2);
    // The reader leaves: the upgrade is granted the write lock. The handoff is still the
    // writer's.
    drop(g1);
    assert!(upgrade.is_woken());
    let wg = assert_ready!(upgrade.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS | HANDOFF);
    // Another reader queues behind the writer meanwhile.
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    // The upgrade's release grants the writer, due the lock: the reader does not pass it
    // again.
    drop(wg);
    assert!(w.is_woken());
    assert!(!r2.is_woken());
    drop(assert_ready!(w.poll()));
    assert!(r2.is_woken());
    drop(assert_ready!(r2.poll()));
    assert_idle(&l);
}
