//! `writer_waiting` on the read guards and the upgradable guards: false alone and with only
//! readers queued, true once a writer or an upgrade queues, false again when it has gone;
//! and how a queued writer gets in when a long reader lets go and locks again, under each
//! policy (the claims of `RwLockReadGuard::writer_waiting`'s documentation).
//!
//! The futures are polled one step at a time (`tokio-test`). Under the default policy a
//! writer that finds the lock read-held spins and queues at its first poll.

use std::sync::Arc;
use std::time::Duration;

use async_rwsem::{
    OwnedRwLockReadGuard, OwnedRwLockUpgradableReadGuard, Policy, RwLock, RwLockReadGuard,
    RwLockUpgradableReadGuard,
};
use tokio_test::task::{spawn, Spawn};
use tokio_test::{assert_pending, assert_ready};

mod support;
use support::assert_idle;

/// Polls a writer of a read-held lock until it is queued: it spins, then queues at once
/// (with readers inside a yield could not win); a second poll leaves it queued.
fn queue<F: std::future::Future>(writer: &mut Spawn<F>)
where
    F::Output: std::fmt::Debug,
{
    assert_pending!(writer.poll()); // spins, queues
    assert_pending!(writer.poll()); // still queued
}

/// A lock whose head writer is not handed the lock by the clock during a test (its
/// handoff timeout is a minute): only a woken writer that loses a race asks for it.
fn patient<T>(value: T) -> RwLock<T> {
    RwLock::with_policy(
        value,
        Policy::new().handoff_timeout(Duration::from_secs(60)),
    )
}

#[test]
fn false_alone() {
    let lock = Arc::new(RwLock::new(0));
    let r = lock.try_read().unwrap();
    let owned = Arc::clone(&lock).try_read_owned().unwrap();
    let up = lock.try_upgradable_read().unwrap();
    assert!(!RwLockReadGuard::writer_waiting(&r));
    assert!(!OwnedRwLockReadGuard::writer_waiting(&owned));
    assert!(!RwLockUpgradableReadGuard::writer_waiting(&up));
    drop(up);
    let owned_up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    assert!(!OwnedRwLockUpgradableReadGuard::writer_waiting(&owned_up));
}

/// Readers queued for want of room (`max_readers`), and an upgradable reader queued behind
/// the one that holds the lock: someone waits, but no writer.
#[test]
fn false_with_only_readers_queued() {
    support::lockdep_off();
    let lock = RwLock::with_max_readers(0, 2);
    let up = lock.try_upgradable_read().unwrap();
    let r = lock.try_read().unwrap();
    let mut third = spawn(lock.read());
    assert_pending!(third.poll()); // no room
    let mut up2 = spawn(lock.upgradable_read());
    assert_pending!(up2.poll()); // the upgradable slot is taken
    assert!(lock.try_read().is_err(), "readers are queued");
    assert!(!RwLockReadGuard::writer_waiting(&r));
    assert!(!RwLockUpgradableReadGuard::writer_waiting(&up));
    drop(r);
    assert_eq!(*assert_ready!(third.poll()), 0);
    drop(up);
    drop(assert_ready!(up2.poll()));
    assert_idle(&lock);
}

#[test]
fn true_with_a_writer_queued_false_when_it_has_gone() {
    support::lockdep_off();
    let lock = Arc::new(RwLock::new(0));
    let r = lock.try_read().unwrap();
    let owned = Arc::clone(&lock).try_read_owned().unwrap();
    let mut writer = spawn(lock.write());
    queue(&mut writer);
    assert!(RwLockReadGuard::writer_waiting(&r));
    assert!(OwnedRwLockReadGuard::writer_waiting(&owned));
    // Cancelled: nobody waits for the readers any more.
    drop(writer);
    assert!(!RwLockReadGuard::writer_waiting(&r));
    assert!(!OwnedRwLockReadGuard::writer_waiting(&owned));

    // Queued again, then served.
    let mut writer = spawn(lock.write());
    queue(&mut writer);
    assert!(RwLockReadGuard::writer_waiting(&r));
    drop(owned);
    RwLockReadGuard::unlock_fair(r);
    *assert_ready!(writer.poll()) += 1;
    let r = lock.try_read().unwrap();
    assert!(!RwLockReadGuard::writer_waiting(&r));
    assert_eq!(*r, 1);
    drop(r);
    assert_idle(&lock);
}

/// Two writers queued: the bit stays while either is queued.
#[test]
fn stays_true_while_any_writer_is_queued() {
    support::lockdep_off();
    let lock = RwLock::new(0);
    let up = lock.try_upgradable_read().unwrap();
    let mut w1 = spawn(lock.write());
    queue(&mut w1);
    let mut w2 = spawn(lock.write());
    queue(&mut w2);
    drop(w1); // the head leaves; the second writer is still queued
    assert!(RwLockUpgradableReadGuard::writer_waiting(&up));
    drop(w2);
    assert!(!RwLockUpgradableReadGuard::writer_waiting(&up));
    drop(up);
    assert_idle(&lock);
}

/// A writer queued behind readers that are themselves queued (behind the head writer): the
/// bit is set by the writer that is not first in the queue too.
#[test]
fn true_with_a_writer_queued_behind_readers() {
    support::lockdep_off();
    let lock = RwLock::with_max_readers(0, 1);
    let r = lock.try_read().unwrap();
    let mut reader = spawn(lock.read());
    assert_pending!(reader.poll()); // no room: queued
    let mut writer = spawn(lock.write());
    queue(&mut writer);
    assert!(RwLockReadGuard::writer_waiting(&r));
    drop(writer);
    assert!(!RwLockReadGuard::writer_waiting(&r));
    drop(r);
    let r2 = assert_ready!(reader.poll());
    assert!(!RwLockReadGuard::writer_waiting(&r2));
}

#[test]
fn true_with_an_upgrade_waiting() {
    support::lockdep_off();
    let lock = Arc::new(RwLock::new(0));
    let r = lock.try_read().unwrap();
    let owned = Arc::clone(&lock).try_read_owned().unwrap();
    let up = lock.try_upgradable_read().unwrap();
    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll()); // waits for `r` and `owned`
    assert!(RwLockReadGuard::writer_waiting(&r));
    assert!(OwnedRwLockReadGuard::writer_waiting(&owned));
    drop(owned);
    drop(r);
    *assert_ready!(upgrade.poll()) = 2;
    let r = lock.try_read().unwrap();
    assert!(!RwLockReadGuard::writer_waiting(&r));
    assert_eq!(*r, 2);
}

/// The owned upgrade, cancelled: the bit goes with it.
#[test]
fn false_after_a_cancelled_owned_upgrade() {
    support::lockdep_off();
    let lock = Arc::new(RwLock::new(0));
    let r = lock.try_read().unwrap();
    let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    let mut upgrade = spawn(OwnedRwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    assert!(RwLockReadGuard::writer_waiting(&r));
    drop(upgrade);
    assert!(!RwLockReadGuard::writer_waiting(&r));
    drop(r);
    assert_idle(&lock);
}

/// `unlock_fair`, then a new acquire: the writer is handed the lock, the acquire queues.
#[test]
fn unlock_fair_then_lock_again_lets_the_writer_in_first() {
    support::lockdep_off();
    let lock = patient(0);
    let r = lock.try_read().unwrap();
    let mut writer = spawn(lock.write());
    queue(&mut writer);
    RwLockReadGuard::unlock_fair(r);
    let mut again = spawn(lock.read());
    assert_pending!(again.poll());
    *assert_ready!(writer.poll()) += 1;
    assert!(again.is_woken());
    assert_eq!(*assert_ready!(again.poll()), 1);
}

/// A plain drop, then a new acquire, under the default policy (its timeout kept out of
/// the way): the acquire takes the lock back before the woken writer runs; the writer
/// asks for the handoff, and the next release hands it the lock.
#[test]
fn drop_then_lock_again_lets_the_writer_in_at_the_second_release() {
    support::lockdep_off();
    let lock = patient(0);
    let r = lock.try_read().unwrap();
    let mut writer = spawn(lock.write());
    queue(&mut writer);
    drop(r);
    assert!(writer.is_woken());
    let r = assert_ready!(spawn(lock.read()).poll()); // taken back first
    assert_pending!(writer.poll()); // lost the race: asks for the handoff
    assert!(RwLockReadGuard::writer_waiting(&r));
    drop(r);
    let mut again = spawn(lock.read());
    assert_pending!(again.poll()); // the writer owns the lock now
    *assert_ready!(writer.poll()) += 1;
    assert_eq!(*assert_ready!(again.poll()), 1);
}

/// Under a strict order the new acquire queues behind the writer at once.
#[test]
fn drop_then_lock_again_under_strict_order_lets_the_writer_in_at_once() {
    support::lockdep_off();
    let policy = Policy::new()
        .strict_order(true)
        .handoff_timeout(Duration::from_secs(60));
    let lock = RwLock::with_policy(0, policy);
    let r = lock.try_read().unwrap();
    let mut writer = spawn(lock.write());
    queue(&mut writer);
    drop(r);
    let mut again = spawn(lock.read());
    assert_pending!(again.poll());
    *assert_ready!(writer.poll()) += 1;
    assert_eq!(*assert_ready!(again.poll()), 1);
}

/// With the handoff off, a reader that drops and locks again takes the lock back at every
/// release: the writer stays out (hence `unlock_fair` there).
#[test]
fn drop_then_lock_again_without_handoff_can_keep_the_writer_out() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, Policy::new().handoff_timeout(Duration::MAX));
    let mut r = lock.try_read().unwrap();
    let mut writer = spawn(lock.write());
    queue(&mut writer);
    for _ in 0..3 {
        drop(r);
        r = assert_ready!(spawn(lock.read()).poll());
        assert_pending!(writer.poll());
        assert!(RwLockReadGuard::writer_waiting(&r));
    }
    RwLockReadGuard::unlock_fair(r);
    drop(assert_ready!(writer.poll()));
}
