//! `parking_lot`'s conveniences, against the exact count word: `is_locked`,
//! `is_locked_exclusive`, the guards' `unlock_fair` and the timed blocking acquires.

use super::*;
use crate::RwLockUpgradableReadGuard;

// ---------------------------------------------------------------------------------------
// `is_locked`, `is_locked_exclusive`.

/// Both follow every mode the lock can be held in, and neither counts a waiter.
#[test]
fn is_locked_follows_every_mode() {
    let _lockdep = lockdep_off();
    let l = RwLock::with_policy(0, queue_at_once());
    let state = |l: &RwLock<i32>| (l.is_locked(), l.is_locked_exclusive());
    assert_eq!(state(&l), (false, false));
    let r = l.try_read().unwrap();
    assert_eq!(state(&l), (true, false));
    let up = l.try_upgradable_read().unwrap();
    assert_eq!(l.raw.count_word(), (2 * R) | UPG);
    assert_eq!(state(&l), (true, false));
    // The upgrade waits for `r`: still shared, with the upgrade queued.
    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG | HANDOFF | WAITERS);
    assert_eq!(state(&l), (true, false));
    drop(r);
    assert_eq!(l.raw.count_word(), W);
    assert_eq!(state(&l), (true, true));
    let w = assert_ready!(upgrade.poll());
    let mapped = RwLockWriteGuard::map(w, |v| v);
    assert_eq!(state(&l), (true, true));
    // A queued reader is no holder: once the writer leaves it is granted, and holds.
    let mut queued = spawn(l.read());
    assert_pending!(queued.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(mapped);
    assert_eq!(l.raw.count_word(), R);
    assert_eq!(state(&l), (true, false));
    drop(assert_ready!(queued.poll()));
    assert_eq!(state(&l), (false, false));
    let w = Arc::new(RwLock::new(0)).try_write_owned().unwrap();
    assert!(OwnedRwLockWriteGuard::rwlock(&w).is_locked_exclusive());
}

// ---------------------------------------------------------------------------------------
// `unlock_fair`. The lock's policy never hands off by itself (`queue_at_once`), so every
// handoff below is the fair unlock's.

/// A write guard's fair unlock grants the queued writer directly, and a reader arriving
/// next waits; a plain drop only wakes the writer, and the arrival steals the lock.
#[test]
fn write_unlock_fair_grants_the_head_writer() {
    let _lockdep = lockdep_off();
    let l = RwLock::with_policy(0, queue_at_once());
    let g = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    RwLockWriteGuard::unlock_fair(g);
    assert_eq!(l.raw.count_word(), W | PENDING);
    assert!(w.is_woken());
    let mut arrival = spawn(l.read());
    assert_pending!(arrival.poll());
    drop(assert_ready!(w.poll()));
    drop(assert_ready!(arrival.poll()));
    assert_idle(&l);

    // The same with a plain drop: the arrival passes the woken writer.
    let g = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    drop(g);
    assert_eq!(l.raw.count_word(), WAITERS);
    let mut arrival = spawn(l.read());
    let stolen = assert_ready!(arrival.poll());
    assert_eq!(l.raw.count_word(), R | WAITERS);
    drop(stolen);
    drop(assert_ready!(w.poll()));
    assert_idle(&l);
}

/// A reader head is granted with every queued reader (not the writer between them), and
/// the handoff is done.
#[test]
fn write_unlock_fair_grants_the_head_readers() {
    let _lockdep = lockdep_off();
    let l = RwLock::with_policy(0, queue_at_once());
    let g = l.try_write().unwrap();
    let mut r1 = spawn(l.read());
    let mut w = spawn(l.write());
    let mut r2 = spawn(l.read());
    assert_pending!(r1.poll());
    assert_pending!(w.poll());
    assert_pending!(r2.poll());
    RwLockWriteGuard::unlock_fair(g);
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS);
    let (g1, g2) = (assert_ready!(r1.poll()), assert_ready!(r2.poll()));
    assert_pending!(w.poll());
    drop((g1, g2));
    drop(assert_ready!(w.poll()));
    assert_idle(&l);
}

/// A reader that is not the last one out leaves the handoff to the last: the head writer
/// is granted the moment the lock is free. A head dropped meanwhile passes the handoff on.
#[test]
fn read_unlock_fair_hands_over_when_the_last_reader_leaves() {
    let _lockdep = lockdep_off();
    let l = RwLock::with_policy(0, queue_at_once());
    let r1 = l.try_read().unwrap();
    let r2 = l.try_read().unwrap();
    let mut w1 = spawn(l.write());
    let mut w2 = spawn(l.write());
    assert_pending!(w1.poll());
    assert_pending!(w2.poll());
    RwLockReadGuard::unlock_fair(r1);
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    drop(w1);
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    drop(r2);
    assert_eq!(l.raw.count_word(), W | PENDING);
    assert!(w2.is_woken());
    drop(assert_ready!(w2.poll()));
    assert_idle(&l);
}

/// With nobody queued a fair unlock is a plain one; the upgradable and mapped guards, and
/// the owned ones (which drop their `Arc` too), unlock fairly as well.
#[test]
fn unlock_fair_of_every_guard() {
    let _lockdep = lockdep_off();
    let l = Arc::new(RwLock::with_policy((1, 2), queue_at_once()));
    RwLockReadGuard::unlock_fair(l.try_read().unwrap());
    RwLockWriteGuard::unlock_fair(l.try_write().unwrap());
    RwLockUpgradableReadGuard::unlock_fair(l.try_upgradable_read().unwrap());
    RwLockMappedWriteGuard::unlock_fair(RwLockWriteGuard::map(l.try_write().unwrap(), |p| {
        &mut p.0
    }));
    OwnedRwLockReadGuard::unlock_fair(Arc::clone(&l).try_read_owned().unwrap());
    OwnedRwLockWriteGuard::unlock_fair(Arc::clone(&l).try_write_owned().unwrap());
    crate::OwnedRwLockUpgradableReadGuard::unlock_fair(
        Arc::clone(&l).try_upgradable_read_owned().unwrap(),
    );
    OwnedRwLockMappedWriteGuard::unlock_fair(OwnedRwLockWriteGuard::map(
        Arc::clone(&l).try_write_owned().unwrap(),
        |p| &mut p.1,
    ));
    assert_idle(&l);
    assert_eq!(Arc::strong_count(&l), 1);

    // The upgradable reader's fair unlock hands the lock to the writer it held off.
    let up = l.try_upgradable_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    assert_eq!(l.raw.count_word(), R | UPG | WAITERS);
    RwLockUpgradableReadGuard::unlock_fair(up);
    assert_eq!(l.raw.count_word(), W | PENDING);
    drop(assert_ready!(w.poll()));

    // So does an owned mapped write guard's.
    let g = OwnedRwLockWriteGuard::map(Arc::clone(&l).try_write_owned().unwrap(), |p| &mut p.0);
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    OwnedRwLockMappedWriteGuard::unlock_fair(g);
    assert_eq!(l.raw.count_word(), W | PENDING);
    drop(assert_ready!(w.poll()));
    assert_idle(&l);
    assert_eq!(Arc::strong_count(&l), 1);
}

// ---------------------------------------------------------------------------------------
// Timed blocking acquires.

/// A timed acquire that runs out returns `None` no sooner than its deadline, and leaves
/// nothing held or queued; one that can be taken at once is taken even with no time left.
#[test]
fn timed_acquires_give_up_with_nothing_held_or_queued() {
    let _lockdep = lockdep_off();
    let l = RwLock::with_policy(0, queue_at_once());
    let timeout = Duration::from_millis(10);
    let w = l.try_write().unwrap();
    let start = std::time::Instant::now();
    assert!(l.try_read_for(timeout).is_none());
    assert!(start.elapsed() >= timeout);
    assert!(l.try_write_for(timeout).is_none());
    assert!(l.try_upgradable_read_for(timeout).is_none());
    let past = std::time::Instant::now();
    assert!(l.try_read_until(past).is_none());
    assert!(l.try_write_until(past).is_none());
    assert!(l.try_upgradable_read_until(past).is_none());
    assert_eq!(l.raw.count_word(), W);
    assert_eq!(l.raw.queue_len(), 0);
    drop(w);

    // Free: taken at once, with a zero timeout or a deadline already past.
    let r = l.try_read_for(Duration::ZERO).unwrap();
    let up = l.try_upgradable_read_until(past).unwrap();
    assert_eq!(l.raw.count_word(), (2 * R) | UPG);
    assert!(l.try_write_for(timeout).is_none());
    assert!(l.try_upgradable_read_for(timeout).is_none());
    assert_eq!(l.raw.count_word(), (2 * R) | UPG);
    drop((r, up));
    *l.try_write_until(past).unwrap() += 1;
    // No deadline an `Instant` can hold: waits as a blocking acquire does.
    assert_eq!(*l.try_read_for(Duration::MAX).unwrap(), 1);
    assert_idle(&l);
}

/// A timed acquire waiting on another thread's lock gets it when that thread lets go in
/// time, queued as any waiter (a writer's release grants it).
#[test]
fn timed_acquires_get_the_lock_released_in_time() {
    let l = Arc::new(RwLock::with_policy(0, queue_at_once()));
    let w = l.try_write().unwrap();
    let waiter = {
        let l = Arc::clone(&l);
        thread::spawn(move || {
            let mut g = l.try_write_for(Duration::from_secs(60)).expect("in time");
            *g += 1;
            let r = RwLockWriteGuard::downgrade(g);
            *r
        })
    };
    wait_for_queue(&l, 1);
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(w);
    assert_eq!(waiter.join().unwrap(), 1);
    // An upgradable reader waits for the one inside, beside plain readers.
    let up = l.try_upgradable_read().unwrap();
    let waiter = {
        let l = Arc::clone(&l);
        thread::spawn(move || l.try_upgradable_read_for(Duration::from_secs(60)).is_some())
    };
    wait_for_queue(&l, 1);
    assert_eq!(l.raw.count_word(), R | UPG | WAITERS);
    drop(up);
    assert!(waiter.join().unwrap());
    assert_idle(&l);
}
