//! `parking_lot`'s conveniences, against the exact count word: `is_locked`,
//! `is_locked_exclusive`, the guards' `unlock_fair` and the timed blocking acquires.

use super::*;
use crate::RwLockUpgradableReadGuard;

// ---------------------------------------------------------------------------------------
// `is_locked`, `is_locked_exclusive`.

/// Both follow every mode the lock can be held in, and neither counts a waiter.
#[test]
fn is_locked_follows_every_mode() {
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
