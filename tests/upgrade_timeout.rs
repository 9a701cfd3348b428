//! The timed upgrades: `try_upgrade_for` / `try_upgrade_until` (blocking) and, with the
//! feature `tokio`, `upgrade_timeout`, on both upgradable guards. On expiry the guard comes
//! back still holding the upgradable read lock, readers may share the lock with it, and
//! the waiters the upgrade held back are let in; before the deadline the upgrade succeeds;
//! an expiry that meets a release at the same instant leaves the lock consistent either way.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock, RwLockUpgradableReadGuard};

mod support;
use support::assert_idle;

const SHORT: Duration = Duration::from_millis(20);
const LONG: Duration = Duration::from_secs(60);

#[test]
fn blocking_expiry_gives_the_guard_back_and_readers_still_share() {
    support::lockdep_off();
    let lock = RwLock::new(1);
    let up = lock.try_upgradable_read().unwrap();
    let r = lock.try_read().unwrap();
    let start = Instant::now();
    let up = RwLockUpgradableReadGuard::try_upgrade_for(up, SHORT).unwrap_err();
    assert!(start.elapsed() >= SHORT, "gave up before the timeout");
    assert_eq!(*up, 1);
    // Still the upgradable reader: no other may get in, but plain readers may.
    assert!(lock.try_upgradable_read().is_err());
    let r2 = lock.try_read().unwrap();
    assert!(lock.try_write().is_err());
    drop((r, r2));
    // Nobody else inside: the guard upgrades at once, even with a past deadline.
    let mut w = RwLockUpgradableReadGuard::try_upgrade_until(up, Instant::now()).unwrap();
    *w = 2;
    drop(w);
    assert_idle(&lock);
}

#[test]
fn blocking_upgrade_succeeds_when_the_readers_leave_in_time() {
    support::lockdep_off();
    let lock = Arc::new(RwLock::new(0));
    let r = Arc::clone(&lock).try_read_owned().unwrap();
    let up = lock.try_upgradable_read().unwrap();
    let reader = thread::spawn(move || {
        thread::sleep(SHORT);
        drop(r);
    });
    let mut w = RwLockUpgradableReadGuard::try_upgrade_for(up, LONG).unwrap();
    *w = 1;
    drop(w);
    reader.join().unwrap();
    assert_eq!(*lock.try_read().unwrap(), 1);
    assert_idle(&lock);
}

/// A reader that queued behind the waiting upgrade (new readers are held off while it
/// waits) is let in when the upgrade gives up, beside the upgradable guard.
#[test]
fn blocking_expiry_lets_in_the_readers_the_upgrade_held_back() {
    support::lockdep_off();
    let lock = Arc::new(RwLock::new(5));
    let r = lock.try_read().unwrap();
    let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let queued_reader = {
        let (lock, done) = (Arc::clone(&lock), Arc::clone(&done));
        thread::spawn(move || {
            // Wait until the upgrade holds new readers off, then queue behind it.
            while lock.try_read().is_ok() {
                if done.load(SeqCst) {
                    return None;
                }
                thread::yield_now();
            }
            Some(*lock.blocking_read())
        })
    };
    let up = OwnedRwLockUpgradableReadGuard::try_upgrade_for(up, Duration::from_millis(500))
        .unwrap_err();
    done.store(true, SeqCst);
    // The reader got in while `r` and `up` are both still held.
    assert_eq!(
        queued_reader.join().unwrap(),
        Some(5),
        "the reader never saw the upgrade wait"
    );
    drop(r);
    let w = OwnedRwLockUpgradableReadGuard::try_upgrade_until(up, Instant::now()).unwrap();
    drop(w);
    assert_idle(&lock);
}

#[test]
fn blocking_owned_forms() {
    support::lockdep_off();
    let lock = Arc::new(RwLock::new(0));
    let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    let r = lock.try_read().unwrap();
    let deadline = Instant::now() + SHORT;
    let up = OwnedRwLockUpgradableReadGuard::try_upgrade_until(up, deadline).unwrap_err();
    assert!(Instant::now() >= deadline);
    drop(r);
    let mut w = OwnedRwLockUpgradableReadGuard::try_upgrade_for(up, LONG).unwrap();
    *w = 3;
    drop(w);
    assert_eq!(*lock.try_read().unwrap(), 3);
    assert_eq!(Arc::strong_count(&lock), 1);
    assert_idle(&lock);
}

#[cfg(feature = "tokio")]
mod with_tokio {
    use super::*;

    use async_rwsem::OwnedRwLockWriteGuard;
    use tokio_test::task::spawn;
    use tokio_test::{assert_pending, assert_ready, assert_ready_err, assert_ready_ok};

    #[tokio::test(start_paused = true)]
    async fn expiry_gives_the_guard_back_and_readers_still_share() {
        support::lockdep_off();
        let lock = RwLock::new(1);
        let up = lock.upgradable_read().await;
        let r = lock.read().await;
        let start = tokio::time::Instant::now();
        let up = RwLockUpgradableReadGuard::upgrade_timeout(up, SHORT)
            .await
            .unwrap_err();
        assert_eq!(start.elapsed(), SHORT);
        assert!(
            lock.try_upgradable_read().is_err(),
            "still the upgradable reader"
        );
        let r2 = lock.read().await;
        assert_eq!(*up + *r + *r2, 3);
        drop((r, r2));
        let mut w = RwLockUpgradableReadGuard::upgrade_timeout(up, Duration::ZERO)
            .await
            .unwrap();
        *w = 2;
        drop(w);
        assert_idle(&lock);
    }

    /// What `tokio::time::timeout` around `upgrade` does instead: the upgrade is dropped,
    /// and the upgradable read lock with it.
    #[tokio::test(start_paused = true)]
    async fn timeout_around_upgrade_loses_the_lock() {
        support::lockdep_off();
        let lock = RwLock::new(1);
        let up = lock.upgradable_read().await;
        let r = lock.read().await;
        let lost = tokio::time::timeout(SHORT, RwLockUpgradableReadGuard::upgrade(up)).await;
        assert!(lost.is_err());
        assert!(
            lock.try_upgradable_read().is_ok(),
            "the upgradable read lock is gone"
        );
        drop(r);
        assert_idle(&lock);
    }

    #[tokio::test(start_paused = true)]
    async fn succeeds_before_the_deadline() {
        support::lockdep_off();
        let lock = Arc::new(RwLock::new(0));
        let r = Arc::clone(&lock).read_owned().await;
        let reader = tokio::spawn(async move {
            tokio::time::sleep(SHORT).await;
            drop(r);
        });
        let up = lock.upgradable_read().await;
        let start = tokio::time::Instant::now();
        let mut w = RwLockUpgradableReadGuard::upgrade_timeout(up, LONG)
            .await
            .unwrap();
        assert_eq!(start.elapsed(), SHORT, "upgraded when the reader left");
        *w = 1;
        drop(w);
        reader.await.unwrap();
        assert_idle(&lock);
    }

    /// The upgrade queued, a reader queued behind it; the time runs out: the reader is
    /// granted beside the upgradable guard, which comes back.
    #[tokio::test(start_paused = true)]
    async fn expiry_grants_the_readers_the_upgrade_held_back() {
        support::lockdep_off();
        let lock = RwLock::new(7);
        let r = lock.read().await;
        let up = lock.upgradable_read().await;
        let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade_timeout(up, SHORT));
        assert_pending!(upgrade.poll());
        let mut reader = spawn(lock.read());
        assert_pending!(reader.poll()); // held off by the upgrade
        tokio::time::advance(SHORT).await;
        assert!(upgrade.is_woken());
        let up = assert_ready_err!(upgrade.poll());
        assert!(reader.is_woken());
        let r2 = assert_ready!(reader.poll());
        assert_eq!(*up + *r + *r2, 21);
        drop((r, r2));
        drop(
            RwLockUpgradableReadGuard::upgrade_timeout(up, Duration::ZERO)
                .await
                .unwrap(),
        );
        assert_idle(&lock);
    }

    /// A writer queued behind the upgrade keeps waiting after the expiry: it needs the
    /// upgradable guard gone too.
    #[tokio::test(start_paused = true)]
    async fn expiry_leaves_a_queued_writer_waiting_for_the_guard() {
        support::lockdep_off();
        let lock = RwLock::new(0);
        let r = lock.read().await;
        let up = lock.upgradable_read().await;
        let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade_timeout(up, SHORT));
        assert_pending!(upgrade.poll());
        let mut writer = spawn(lock.write());
        assert_pending!(writer.poll());
        assert_pending!(writer.poll());
        tokio::time::advance(SHORT).await;
        let up = assert_ready_err!(upgrade.poll());
        assert_pending!(writer.poll());
        drop(r);
        assert_pending!(writer.poll());
        drop(up);
        *assert_ready!(writer.poll()) += 1;
        assert_eq!(*lock.read().await, 1);
        assert_idle(&lock);
    }

    /// The last other reader leaves at `release`; the upgrade's time runs out at `SHORT`.
    /// Before the deadline: upgraded; after it: the guard back; at the same instant:
    /// either, with the lock consistent (every case ends idle, the value intact).
    async fn race(release: Duration) -> bool {
        let lock = Arc::new(RwLock::new(0u32));
        let r = Arc::clone(&lock).read_owned().await;
        let reader = tokio::spawn(async move {
            tokio::time::sleep(release).await;
            drop(r);
        });
        let up = Arc::clone(&lock).upgradable_read_owned().await;
        let upgraded = match OwnedRwLockUpgradableReadGuard::upgrade_timeout(up, SHORT).await {
            Ok(mut w) => {
                *w += 1;
                true
            }
            Err(up) => {
                assert_eq!(*up, 0);
                assert!(lock.try_read().is_ok(), "readers share with the guard");
                drop(up);
                false
            }
        };
        reader.await.unwrap();
        assert_eq!(*lock.read().await, u32::from(upgraded));
        assert_idle(&lock);
        upgraded
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_racing_a_release() {
        support::lockdep_off();
        assert!(race(SHORT - Duration::from_millis(1)).await);
        assert!(!race(SHORT + Duration::from_millis(1)).await);
        // The same instant: the release's wake and the expiry's are both due; whichever
        // runs first, the lock ends consistent (checked inside).
        race(SHORT).await;
    }

    #[tokio::test(start_paused = true)]
    async fn owned_forms() {
        support::lockdep_off();
        let lock = Arc::new(RwLock::new(String::from("a")));
        let up = Arc::clone(&lock).upgradable_read_owned().await;
        let r = lock.read().await;
        let up = OwnedRwLockUpgradableReadGuard::upgrade_timeout(up, SHORT)
            .await
            .unwrap_err();
        assert_eq!(*up, "a");
        assert!(Arc::ptr_eq(
            OwnedRwLockUpgradableReadGuard::rwlock(&up),
            &lock
        ));
        drop(r);
        let mut upgrade = spawn(OwnedRwLockUpgradableReadGuard::upgrade_timeout(up, SHORT));
        let mut w: OwnedRwLockWriteGuard<String> = assert_ready_ok!(upgrade.poll());
        w.push('b');
        drop(w);
        assert_eq!(*lock.read().await, "ab");
        assert_eq!(Arc::strong_count(&lock), 1);
        assert_idle(&lock);
    }

    /// Dropped while it waits, the timed upgrade releases the lock altogether (as
    /// `upgrade` does) and leaves nothing queued.
    #[tokio::test(start_paused = true)]
    async fn dropped_while_waiting_releases_the_lock() {
        support::lockdep_off();
        let lock = RwLock::new(0);
        let r = lock.read().await;
        let up = lock.upgradable_read().await;
        let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade_timeout(up, LONG));
        assert_pending!(upgrade.poll());
        assert!(
            lock.try_read().is_err(),
            "the upgrade holds new readers off"
        );
        drop(upgrade);
        assert!(lock.try_upgradable_read().is_ok());
        drop(r);
        assert_idle(&lock);
    }

    /// The futures are `Send` (for a `T` that is `Send + Sync`), so they can be spawned.
    #[test]
    fn futures_are_send() {
        fn send<F: Send>(_: &F) {}
        let lock = Arc::new(RwLock::new(0));
        let up = lock.try_upgradable_read().unwrap();
        let f = RwLockUpgradableReadGuard::upgrade_timeout(up, SHORT);
        send(&f);
        drop(f);
        let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
        let f = OwnedRwLockUpgradableReadGuard::upgrade_timeout(up, SHORT);
        send(&f);
        drop(f);
        assert_idle(&lock);
    }
}
