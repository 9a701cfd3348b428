//! The crate's own tests of the lock's transitions, with access to the count word and the
//! wait queue: one poll at a time with `tokio-test` (`transitions`, `upgradable`), and the
//! loom models (`loom_*`, under `--cfg async_rwsem_loom`).
//!
//! The typed layer's tests are in `crate::rwlock::tests`; both use [`support`].

#[cfg(not(all(test, async_rwsem_loom)))]
mod bounded_passing;
#[cfg(not(all(test, async_rwsem_loom)))]
mod crowded;
#[cfg(not(all(test, async_rwsem_loom)))]
mod handoff;
#[cfg(not(all(test, async_rwsem_loom)))]
mod panics;
#[cfg(not(all(test, async_rwsem_loom)))]
mod parked;
#[cfg(not(all(test, async_rwsem_loom)))]
mod pass_check;
#[cfg(not(all(test, async_rwsem_loom)))]
mod transitions;
#[cfg(not(all(test, async_rwsem_loom)))]
mod upgradable;
#[cfg(not(all(test, async_rwsem_loom)))]
mod wait_lock;

#[cfg(all(test, async_rwsem_loom))]
mod loom_default;
#[cfg(all(test, async_rwsem_loom))]
mod loom_fair;
#[cfg(all(test, async_rwsem_loom))]
mod loom_models;
#[cfg(all(test, async_rwsem_loom))]
mod loom_passing;
#[cfg(all(test, async_rwsem_loom))]
mod loom_spin;
#[cfg(all(test, async_rwsem_loom))]
mod loom_support;
#[cfg(all(test, async_rwsem_loom))]
mod loom_upgrade;

/// What every test module of the crate shares: the count word's bits under short names,
/// the policies the tests run under, and the idle check.
#[cfg_attr(all(test, async_rwsem_loom), allow(dead_code, unused_imports))] // the loom models use a subset
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

    /// The machine's cores, as the lock's crowding rule counts them
    /// (`Policy::crowded_handoff`).
    #[cfg(not(async_rwsem_loom))]
    pub(crate) fn cores() -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }

    /// Runs `f` in a task on a worker of a new multi-thread runtime of `workers` workers
    /// (a thread of its own each time: the crowding answer is kept per thread), and
    /// returns what it returned.
    #[cfg(not(async_rwsem_loom))]
    pub(crate) fn on_worker<T: Send + 'static>(workers: usize, f: fn() -> T) -> T {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .build()
            .unwrap();
        rt.block_on(async move { tokio::spawn(async move { f() }).await.unwrap() })
    }

    /// The downgrade scenario: behind a write lock `w` of `lock` a reader, a writer and a
    /// reader queue; `downgrade(w)` turns the write lock into a read lock and returns
    /// what now holds it. Both readers are granted with it (the writer between them does
    /// not hold them back under this policy) and the writer stays queued until every
    /// reader has left; then it gets the lock, and the lock ends idle.
    #[cfg(not(async_rwsem_loom))]
    #[track_caller]
    pub(crate) fn check_downgrade_grants_readers_not_writers<T: ?Sized + std::fmt::Debug, W, G>(
        lock: &RwLock<T>,
        w: W,
        downgrade: impl FnOnce(W) -> G,
    ) {
        use tokio_test::task::spawn;
        use tokio_test::{assert_pending, assert_ready};

        let mut r1 = spawn(lock.read());
        let mut w2 = spawn(lock.write());
        let mut r2 = spawn(lock.read());
        assert_pending!(r1.poll());
        assert_pending!(w2.poll());
        assert_pending!(r2.poll());
        assert_eq!(lock.raw.count_word(), W | WAITERS);
        let r = downgrade(w);
        // Both queued readers are granted in the same step; the writer stays queued. The
        // first is woken, and relays the wake-up to the second when it sees its grant.
        assert!(r1.is_woken() && !r2.is_woken());
        assert!(!w2.is_woken());
        assert_eq!(lock.raw.count_word(), (3 * R) | WAITERS);
        assert_eq!(lock.raw.queue_len(), 1);
        let g1 = assert_ready!(r1.poll());
        assert!(r2.is_woken(), "the first reader relays the wake-up");
        let g2 = assert_ready!(r2.poll());
        assert!(lock.try_write().is_err());
        drop((r, g1, g2));
        assert!(w2.is_woken());
        drop(assert_ready!(w2.poll()));
        assert_idle(lock);
    }

    /// The lock is unlocked and nobody waits: the count word is 0, the queue empty.
    #[track_caller]
    pub(crate) fn assert_idle<T: ?Sized>(lock: &RwLock<T>) {
        assert_eq!(lock.raw.count_word(), 0, "count word not idle");
        assert_eq!(lock.raw.queue_len(), 0, "waiters left queued");
    }

    /// Lockdep's checks off on this test's thread until the value returned is dropped
    /// (`let _lockdep = lockdep_off();` first in a test), with the feature `lockdep`
    /// (`cargo test --all-features`); nothing without it. For the tests whose mock tasks
    /// (`tokio_test::task::spawn`, polled by hand on the test's thread: one holder to
    /// lockdep) take on purpose what lockdep reports, such as a reader queueing behind
    /// another "task"'s write lock (a recursive acquire to lockdep). The other tests keep
    /// lockdep's checks: a report there is a failure.
    #[must_use = "lockdep's checks are back on when it is dropped"]
    pub(crate) fn lockdep_off() -> impl Sized {
        #[cfg(feature = "lockdep")]
        let off = crate::lockdep::off_on_this_thread();
        #[cfg(not(feature = "lockdep"))]
        let off = ();
        off
    }
}

/// The lock's size: one cache line (64 bytes on 64-bit targets; `tokio::sync::RwLock<()>`
/// is 48), with its policy, its reader limit, its learned spin budgets and a wait list
/// that keeps its readers in a ring of their own and counts its writers (so that a grant
/// never walks the writers queued between the readers it grants). The `stats` feature
/// adds its counters (8 bytes each), `lockdep` the lock's class.
#[cfg(all(
    not(async_rwsem_loom),
    not(feature = "stats"),
    not(feature = "lockdep"),
    // tokio-console's resource (as tokio's own lock grows under this cfg).
    not(all(tokio_unstable, feature = "tracing")),
    target_pointer_width = "64"
))]
#[test]
fn a_lock_is_one_cache_line() {
    assert_eq!(std::mem::size_of::<crate::RwLock<()>>(), 64);
    assert_eq!(std::mem::size_of::<crate::RwLock<u64>>(), 72);
    assert_eq!(std::mem::size_of::<tokio::sync::RwLock<()>>(), 48);
    assert_eq!(std::mem::size_of::<crate::raw::policy::StoredPolicy>(), 16);
}
