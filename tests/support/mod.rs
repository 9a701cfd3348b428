//! Helpers shared by the integration tests, through the public API only.

#![allow(dead_code)] // each test file uses its own subset

use async_rwsem::RwLock;

/// Is the lock idle: unlocked, nobody queued, no bias or flag left in the count word?
///
/// `try_write` is one compare-and-swap from the idle value 0, so it succeeds exactly when
/// the whole count word is 0 (no reader, no writer, no waiter, no handoff).
pub fn is_idle<T: ?Sized>(lock: &RwLock<T>) -> bool {
    lock.try_write().is_ok()
}

/// Asserts [`is_idle`].
#[track_caller]
pub fn assert_idle<T: ?Sized>(lock: &RwLock<T>) {
    assert!(
        is_idle(lock),
        "the lock is not idle (held, queued, or a bias left behind)"
    );
}
