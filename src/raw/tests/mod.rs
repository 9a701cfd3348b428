//! The crate's own tests of the lock's transitions, with access to the count word and the
//! wait queue: one poll at a time with `tokio-test` (`transitions`, `upgradable`), and the
//! loom models (`loom_*`, under `--cfg loom`).
//!
//! The typed layer's tests are in `crate::rwlock::tests`; both use [`support`].

#[cfg(not(loom))]
mod transitions;
#[cfg(not(loom))]
mod upgradable;

#[cfg(loom)]
mod loom_fair;
#[cfg(loom)]
mod loom_models;
#[cfg(loom)]
mod loom_spin;
#[cfg(loom)]
mod loom_support;
#[cfg(loom)]
mod loom_upgrade;

/// What every test module of the crate shares: the count word's bits under short names,
/// the policies the tests run under, and the idle check.
#[cfg_attr(loom, allow(dead_code, unused_imports))] // the loom models use a subset
pub(crate) mod support {
    use std::time::Duration;

    pub(crate) use crate::raw::count::{HANDOFF, WAITERS};
    use crate::raw::count::{OWNER_PENDING, READER_BIAS, UPGRADABLE, WRITER_LOCKED};
    use crate::{Policy, RwLock};

    /// `WRITER_LOCKED`.
    pub(crate) const W: usize = WRITER_LOCKED;
    /// `READER_BIAS`: one reader.
    pub(crate) const R: usize = READER_BIAS;
    /// `UPGRADABLE`.
    pub(crate) const UPG: usize = UPGRADABLE;
    /// `OWNER_PENDING`: the write lock was granted at a release to a task not polled since.
    pub(crate) const PENDING: usize = OWNER_PENDING;

    /// No spinning and no yielding, so that a writer (or a reader) queues on its first
    /// poll; no handoff, so that nothing depends on time: the smallest state space.
    pub(crate) fn queue_at_once() -> Policy {
        Policy::new()
            .writer_spin(Duration::ZERO)
            .reader_spin(Duration::ZERO)
            .writer_yields(0)
            .handoff_timeout(Duration::MAX)
    }

    /// The lock is unlocked and nobody waits: the count word is 0, the queue empty.
    #[track_caller]
    pub(crate) fn assert_idle<T: ?Sized>(lock: &RwLock<T>) {
        assert_eq!(lock.raw.count_word(), 0, "count word not idle");
        assert_eq!(lock.raw.queue_len(), 0, "waiters left queued");
    }
}

/// The lock's size: no larger than `tokio::sync::RwLock<()>` (48 bytes on 64-bit targets),
/// though it carries its policy, its reader limit and its learned spin budgets. The
/// `stats` feature adds its counters (8 bytes each).
#[cfg(all(not(loom), not(feature = "stats"), target_pointer_width = "64"))]
#[test]
fn a_lock_is_no_larger_than_tokios() {
    assert_eq!(std::mem::size_of::<crate::RwLock<()>>(), 48);
    assert_eq!(std::mem::size_of::<crate::RwLock<u64>>(), 56);
    assert_eq!(std::mem::size_of::<crate::raw::policy::StoredPolicy>(), 16);
}
