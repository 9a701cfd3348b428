//! loom models of upgradable reads and of `max_readers` (the rest are in
//! `loom_models.rs`, whose header says how to run them).

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use crate::{RwLock, RwLockUpgradableReadGuard};
use loom::future::block_on;
use loom::thread;

use super::loom_support::{assert_idle, poll_once, queue_at_once, Data, Lock};

fn lock() -> Arc<Lock> {
    super::loom_support::lock(queue_at_once())
}

#[test]
fn upgrade_racing_a_reader() {
    loom::model(|| {
        let l = lock();
        let l2 = Arc::clone(&l);
        let reader = thread::spawn(move || block_on(async { l2.read().await.get() }));
        block_on(async {
            let up = l.upgradable_read().await;
            let w = RwLockUpgradableReadGuard::upgrade(up).await;
            w.bump();
        });
        assert!(reader.join().unwrap() <= 1);
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}

#[test]
fn upgrade_waits_for_a_reader_inside() {
    loom::model(|| {
        let l = lock();
        let r = l.try_read().unwrap();
        let l2 = Arc::clone(&l);
        let upgrader = thread::spawn(move || {
            block_on(async {
                let up = l2.upgradable_read().await;
                let w = RwLockUpgradableReadGuard::upgrade(up).await;
                w.bump();
            })
        });
        assert_eq!(r.get(), 0);
        drop(r);
        upgrader.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}

#[test]
fn cancelled_upgrade_while_reader_leaves() {
    loom::model(|| {
        let l = lock();
        let r = l.try_read().unwrap();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            let up = block_on(l2.upgradable_read());
            let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
            if let Poll::Ready(w) = poll_once(upgrade.as_mut()) {
                w.bump();
            }
            // Dropped: queued, granted or done.
        });
        let l3 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l3.write().await.bump() }));
        drop(r);
        t.join().unwrap();
        w.join().unwrap();
        assert!(l.try_read().unwrap().get() >= 1);
        assert_idle(&l);
    });
}

#[test]
fn two_upgradable_readers() {
    loom::model(|| {
        let l = lock();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            block_on(async {
                let up = l2.upgradable_read().await;
                RwLockUpgradableReadGuard::upgrade(up).await.bump();
            })
        });
        block_on(async {
            let up = l.upgradable_read().await;
            RwLockUpgradableReadGuard::upgrade(up).await.bump();
        });
        t.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
    });
}

// ---------------------------------------------------------------------------------------
// A timed upgrade whose time runs out: stopped (`LockFuture::stop_upgrade`), keeping the
// upgradable read lock, at any point of the last other reader's release.

/// Polls the upgrade once, then stops it (its time ran out): upgraded at the poll, granted
/// between the poll and the stop (the release's grant met the deadline: the write lock is
/// kept), or still queued (the guard comes back). Returns whether it upgraded, after
/// writing under the write lock or reading under the upgradable guard that came back.
fn upgrade_then_stop(up: RwLockUpgradableReadGuard<'_, Data>) -> bool {
    let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
    let write = match poll_once(upgrade.as_mut()) {
        Poll::Ready(w) => Ok(w),
        Poll::Pending => upgrade.as_mut().stop(),
    };
    match write {
        Ok(w) => {
            w.bump();
            true
        }
        Err(up) => {
            assert_eq!(up.get(), 0);
            false
        }
    }
}

#[test]
fn stopped_upgrade_racing_the_last_reader() {
    loom::model(|| {
        let l = lock();
        let r = Arc::clone(&l).try_read_owned().unwrap();
        let up = l.try_upgradable_read().unwrap();
        let leaver = thread::spawn(move || drop(r));
        let upgraded = upgrade_then_stop(up);
        leaver.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), usize::from(upgraded));
        assert_idle(&l);
    });
}

/// A reader arrives while the upgrade waits (it may queue behind it). The stopped upgrade
/// must let it in beside the upgradable guard and the reader inside: nothing else
/// releases the lock before the reader is joined, so a missed grant is a deadlock.
#[test]
fn stopped_upgrade_lets_a_queued_reader_in() {
    loom::model(|| {
        let l = lock();
        let r = l.try_read().unwrap();
        let up = l.try_upgradable_read().unwrap();
        let l2 = Arc::clone(&l);
        let reader = thread::spawn(move || block_on(async { l2.read().await.get() }));
        let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
        assert!(poll_once(upgrade.as_mut()).is_pending(), "`r` is inside");
        let Err(up) = upgrade.as_mut().stop() else {
            panic!("granted the write lock beside a reader");
        };
        assert_eq!(reader.join().unwrap(), 0);
        assert_eq!(up.get() + r.get(), 0);
        drop(up);
        drop(r);
        assert_idle(&l);
    });
}

// ---------------------------------------------------------------------------------------
// `max_readers`: the slot a queued reader waits for.

fn limited(max_readers: usize) -> Arc<Lock> {
    Arc::new(RwLock::with_policy_and_max_readers(
        Data::new(),
        queue_at_once(),
        max_readers,
    ))
}

/// One reader holds the only slot; another queues for it while the first leaves. The
/// queueing reader's grant check takes a transient bias: a release in that window must
/// not be lost (it was, before the grant looked again).
#[test]
fn max_readers_slot_freed_while_a_reader_queues() {
    loom::model(|| {
        let l = limited(1);
        let r = l.try_read().unwrap();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || block_on(async { l2.read().await.get() }));
        drop(r);
        assert_eq!(t.join().unwrap(), 0);
        assert_idle(&l);
    });
}

/// An upgrade waits for the plain reader inside while a third reader waits for a slot.
#[test]
fn upgrade_with_max_readers() {
    loom::model(|| {
        let l = limited(2);
        let up = l.try_upgradable_read().unwrap();
        let r = Arc::clone(&l).try_read_owned().unwrap();
        let l2 = Arc::clone(&l);
        let reader = thread::spawn(move || block_on(async { l2.read().await.get() }));
        let leaver = thread::spawn(move || drop(r));
        block_on(async { RwLockUpgradableReadGuard::upgrade(up).await.bump() });
        leaver.join().unwrap();
        assert!(reader.join().unwrap() <= 1);
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}
