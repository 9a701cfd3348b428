//! The scenarios of tokio's own `RwLock` test file (`tokio/tests/sync_rwlock.rs`) and of
//! maitake-sync's (`maitake-sync/src/rwlock/tests/sequential.rs`: the same scenarios, a
//! subset), each written again, against a lock built with [`Policy::fifo`]
//! (`under_fifo::*`) and with the default policy (`under_default::*`). The names are
//! tokio's test names; a scenario that goes beyond tokio's file says so.
//!
//! Under `Policy::fifo()` this lock keeps the order tokio's keeps, so each step that
//! tokio's tests assert holds here too. Under the default policy every scenario holds as
//! well but two, which assert the order of the queue: `write_read_shared_pending` and
//! `write_read_shared_drop_pending` (a reader that arrives behind a pending writer while
//! readers hold the lock waits). Under the default such a reader is granted at once,
//! passing the pending writer once (`Policy::pass_bound`'s bounded passing: the writer is
//! then due the lock, and the readers after it wait); `under_default` asserts that instead,
//! step by step, in the tests of the same names.
//!
//! Where tokio's file asserts a panic message, the message is the same here.

use std::sync::Arc;
use std::task::Poll;

use async_rwsem::{Policy, RwLock, RwLockWriteGuard};
use futures::future::FutureExt;
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

mod support;
use support::assert_idle;

/// A lock in strict first-come-first-served order.
fn fifo<T>(value: T) -> RwLock<T> {
    RwLock::with_policy(value, Policy::fifo())
}

/// The scenarios that hold under both policies, against the locks of `$policy`.
macro_rules! scenarios {
    ($policy:expr) => {
        use super::*;

        const POLICY: Policy = $policy;

        fn new<T>(value: T) -> RwLock<T> {
            RwLock::with_policy(value, POLICY)
        }

        #[test]
        fn into_inner() {
            let rwlock = new(42);
            assert_eq!(rwlock.into_inner(), 42);
        }

        /// Several readers hold the lock at once.
        #[test]
        fn read_shared() {
            support::lockdep_off();
            let rwlock = new(100);
            let mut t1 = spawn(rwlock.read());
            let g1 = assert_ready!(t1.poll());
            let mut t2 = spawn(rwlock.read());
            let g2 = assert_ready!(t2.poll());
            assert_eq!(*g1 + *g2, 200);
        }

        /// A reader holds the lock: a writer waits.
        #[test]
        fn write_shared_pending() {
            support::lockdep_off();
            let rwlock = new(100);
            let mut t1 = spawn(rwlock.read());
            let _g1 = assert_ready!(t1.poll());
            let mut t2 = spawn(rwlock.write());
            assert_pending!(t2.poll());
        }

        /// A writer holds the lock: a reader waits.
        #[test]
        fn read_exclusive_pending() {
            support::lockdep_off();
            let rwlock = new(100);
            let mut t1 = spawn(rwlock.write());
            let _g1 = assert_ready!(t1.poll());
            let mut t2 = spawn(rwlock.read());
            assert_pending!(t2.poll());
        }

        /// With `max_readers` readers inside, the next one waits, and gets in as soon as
        /// one of them leaves.
        #[test]
        fn exhaust_reading() {
            support::lockdep_off();
            let rwlock = RwLock::with_policy_and_max_readers(100, POLICY, 1024);
            let mut reads = Vec::new();
            loop {
                let mut t = spawn(rwlock.read());
                match t.poll() {
                    Poll::Ready(guard) => reads.push(guard),
                    // `t` is dropped here, while queued: it leaves the queue.
                    Poll::Pending => break,
                }
            }
            assert_eq!(reads.len(), 1024);

            let mut t1 = spawn(rwlock.read());
            assert_pending!(t1.poll());
            drop(reads.pop().unwrap());
            assert!(t1.is_woken());
            let _g1 = assert_ready!(t1.poll());
        }

        #[test]
        #[should_panic(expected = "a RwLock may not be created with 0 readers")]
        fn zero_max_readers() {
            RwLock::with_policy_and_max_readers(100, POLICY, 0);
        }

        /// A writer holds the lock: another writer waits.
        #[test]
        fn write_exclusive_pending() {
            support::lockdep_off();
            let rwlock = new(100);
            let mut t1 = spawn(rwlock.write());
            let _g1 = assert_ready!(t1.poll());
            let mut t2 = spawn(rwlock.write());
            assert_pending!(t2.poll());
        }

        /// A reader holds the lock: a writer waits, and is woken with the lock when the
        /// reader leaves.
        #[test]
        fn write_shared_drop() {
            support::lockdep_off();
            let rwlock = new(100);
            let mut t1 = spawn(rwlock.read());
            let g1 = assert_ready!(t1.poll());
            let mut t2 = spawn(rwlock.write());
            assert_pending!(t2.poll());
            drop(g1);
            assert!(t2.is_woken());
            let _g2 = assert_ready!(t2.poll());
        }

        #[tokio::test]
        async fn read_uncontested() {
            let rwlock = new(100);
            let result = *rwlock.read().await;
            assert_eq!(result, 100);
        }

        #[tokio::test]
        async fn write_uncontested() {
            let rwlock = new(100);
            let mut result = rwlock.write().await;
            *result += 50;
            assert_eq!(*result, 150);
        }

        /// The lock is taken in the order the futures are awaited, not the order they were
        /// made.
        #[tokio::test]
        async fn write_order() {
            let rwlock = new(Vec::<u32>::new());
            let fut2 = rwlock.write().map(|mut guard| guard.push(2));
            let fut1 = rwlock.write().map(|mut guard| guard.push(1));
            fut1.await;
            fut2.await;
            assert_eq!(*rwlock.read().await, [1, 2]);
        }

        /// One lock written by four tasks on eight worker threads, 1,000 times each (25
        /// under Miri, which interprets every step).
        #[tokio::test(flavor = "multi_thread", worker_threads = 8)]
        async fn multithreaded() {
            const ROUNDS: u32 = if cfg!(miri) { 25 } else { 1000 };
            use futures::stream::{self, StreamExt};
            use tokio::sync::Barrier;

            let barrier = Arc::new(Barrier::new(5));
            let rwlock = Arc::new(new(0u32));
            for add in [2, 3, 5, 7] {
                let rwlock = Arc::clone(&rwlock);
                let barrier = Arc::clone(&barrier);
                tokio::spawn(async move {
                    stream::iter(0..ROUNDS)
                        .for_each(|_| {
                            let rwlock = Arc::clone(&rwlock);
                            async move { *rwlock.write().await += add }
                        })
                        .await;
                    barrier.wait().await;
                });
            }
            barrier.wait().await;
            assert_eq!(*rwlock.read().await, 17 * ROUNDS);
            assert_idle(&rwlock);
        }

        #[tokio::test]
        async fn try_write() {
            let lock = new(0);
            let read_guard = lock.read().await;
            assert!(lock.try_write().is_err());
            drop(read_guard);
            assert!(lock.try_write().is_ok());
        }

        #[test]
        fn try_read_try_write() {
            let lock = new(15usize);
            {
                let rg1 = lock.try_read().unwrap();
                assert_eq!(*rg1, 15);
                assert!(lock.try_write().is_err());
                let rg2 = lock.try_read().unwrap();
                assert_eq!(*rg2, 15);
            }
            {
                let mut wg = lock.try_write().unwrap();
                *wg = 1515;
                assert!(lock.try_read().is_err());
            }
            assert_eq!(*lock.try_read().unwrap(), 1515);
        }

        /// A reader waiting on the writer gets in only once `downgrade_map` has
        /// downgraded, not while its closure runs; both read guards then point at the same
        /// value.
        #[tokio::test]
        async fn downgrade_map() {
            support::lockdep_off();
            let lock = new(0);
            let write_guard = lock.write().await;
            let mut read_t = spawn(lock.read());
            assert_pending!(read_t.poll());
            let read_guard1 = RwLockWriteGuard::downgrade_map(write_guard, |v| {
                assert_pending!(read_t.poll());
                v
            });
            let read_guard2 = assert_ready!(read_t.poll());
            assert!(std::ptr::eq(&*read_guard1, &*read_guard2));
        }

        /// As `downgrade_map`, with a closure that first declines (the writer keeps the
        /// lock and the reader still waits), then accepts.
        #[tokio::test]
        async fn try_downgrade_map() {
            support::lockdep_off();
            let lock = new(0);
            let write_guard = lock.write().await;
            let mut read_t = spawn(lock.read());
            assert_pending!(read_t.poll());
            let write_guard = RwLockWriteGuard::try_downgrade_map(write_guard, |_| {
                assert_pending!(read_t.poll());
                None::<&()>
            })
            .expect_err("the closure declined");
            assert_pending!(read_t.poll());
            let read_guard1 = RwLockWriteGuard::try_downgrade_map(write_guard, |v| Some(v))
                .expect("the closure accepted");
            let read_guard2 = assert_ready!(read_t.poll());
            assert!(std::ptr::eq(&*read_guard1, &*read_guard2));
        }
    };
}

/// tokio's (and maitake-sync's) scenarios under `Policy::fifo()`, with the two that assert
/// the order of the queue as tokio's file has them.
mod under_fifo {
    scenarios!(Policy::fifo());

    /// Readers hold the lock and a writer waits: a new reader waits behind the writer.
    #[test]
    fn write_read_shared_pending() {
        support::lockdep_off();
        let rwlock = new(100);
        let mut t1 = spawn(rwlock.read());
        let _g1 = assert_ready!(t1.poll());
        let mut t2 = spawn(rwlock.read());
        let _g2 = assert_ready!(t2.poll());
        let mut t3 = spawn(rwlock.write());
        assert_pending!(t3.poll());
        let mut t4 = spawn(rwlock.read());
        assert_pending!(t4.poll());
    }

    /// A reader holds the lock, a writer waits and a reader waits behind it: when the
    /// waiting writer is dropped, the reader behind it gets in.
    #[test]
    fn write_read_shared_drop_pending() {
        support::lockdep_off();
        let rwlock = new(100);
        let mut t1 = spawn(rwlock.read());
        let _g1 = assert_ready!(t1.poll());
        let mut t2 = spawn(rwlock.write());
        assert_pending!(t2.poll());
        let mut t3 = spawn(rwlock.read());
        assert_pending!(t3.poll());
        drop(t2);
        assert!(t3.is_woken());
        let _g3 = assert_ready!(t3.poll());
    }
}

/// tokio's (and maitake-sync's) scenarios under the default policy. The two that assert
/// the order of the queue assert the default's instead: the reader that arrives behind the
/// pending writer passes it once, and the writer is due the lock next.
mod under_default {
    scenarios!(Policy::DEFAULT);

    /// Readers hold the lock and a writer waits: a new reader is granted beside them,
    /// passing the writer once; the writer is due next, so a reader after that one waits
    /// behind it, and the writer gets the lock when the readers leave.
    #[test]
    fn write_read_shared_pending() {
        support::lockdep_off();
        let rwlock = new(100);
        let mut t1 = spawn(rwlock.read());
        let g1 = assert_ready!(t1.poll());
        let mut t2 = spawn(rwlock.read());
        let g2 = assert_ready!(t2.poll());
        let mut t3 = spawn(rwlock.write());
        assert_pending!(t3.poll());
        let mut t4 = spawn(rwlock.read());
        let g4 = assert_ready!(t4.poll());
        assert!(!t3.is_woken());
        let mut t5 = spawn(rwlock.read());
        assert_pending!(t5.poll());
        drop((g1, g2, g4));
        assert!(t3.is_woken());
        let g3 = assert_ready!(t3.poll());
        assert_pending!(t5.poll());
        drop(g3);
        assert!(t5.is_woken());
        drop(assert_ready!(t5.poll()));
        assert_idle(&rwlock);
    }

    /// A reader holds the lock and a writer waits: a reader arriving behind it is granted
    /// beside the reader (one pass of the writer). When the waiting writer is dropped, the
    /// lock is the readers' alone, and a reader arriving then gets in at once.
    #[test]
    fn write_read_shared_drop_pending() {
        support::lockdep_off();
        let rwlock = new(100);
        let mut t1 = spawn(rwlock.read());
        let _g1 = assert_ready!(t1.poll());
        let mut t2 = spawn(rwlock.write());
        assert_pending!(t2.poll());
        let mut t3 = spawn(rwlock.read());
        let _g3 = assert_ready!(t3.poll());
        drop(t2);
        let mut t4 = spawn(rwlock.read());
        let _g4 = assert_ready!(t4.poll());
    }
}

/// tokio's `zero_max_readers`, through the constructors that take no policy, which tokio
/// has too (the message is tokio's).
#[test]
#[should_panic(expected = "a RwLock may not be created with 0 readers")]
fn zero_max_readers_tokio_constructor() {
    RwLock::with_max_readers(100, 0);
}

#[test]
#[should_panic(expected = "a RwLock may not be created with 0 readers")]
fn zero_max_readers_const() {
    RwLock::const_with_max_readers(100, 0);
}

/// Beyond tokio's file: `write_order` with the lock held, so that both writers queue. They
/// get the lock in the order of their first polls, readers and writers alike, and a
/// writer that arrives after the release (while the queue is not empty) waits its turn.
#[test]
fn contended_order_is_the_order_of_first_polls() {
    support::lockdep_off();
    let rwlock = fifo(Vec::<u32>::new());
    let held = rwlock.try_write().unwrap();
    let mut second = spawn(rwlock.write().map(|mut guard| guard.push(2)));
    let mut first = spawn(rwlock.write().map(|mut guard| guard.push(1)));
    let mut reader = spawn(rwlock.read().map(|guard| guard.clone()));
    let mut third = spawn(rwlock.write().map(|mut guard| guard.push(3)));
    assert_pending!(first.poll());
    assert_pending!(second.poll());
    assert_pending!(reader.poll());
    assert_pending!(third.poll());
    drop(held);
    // A writer arriving now waits behind the queue.
    let mut late = spawn(rwlock.write().map(|mut guard| guard.push(4)));
    assert_pending!(late.poll());
    // Only the head was granted; polling the others first changes nothing.
    assert_pending!(third.poll());
    assert_pending!(second.poll());
    assert_pending!(reader.poll());
    assert!(first.is_woken());
    assert_ready!(first.poll());
    assert!(second.is_woken());
    assert_pending!(reader.poll());
    assert_ready!(second.poll());
    assert!(reader.is_woken());
    assert_eq!(assert_ready!(reader.poll()), [1, 2]);
    assert_pending!(late.poll());
    assert!(third.is_woken());
    assert_ready!(third.poll());
    assert!(late.is_woken());
    assert_ready!(late.poll());
    assert_eq!(*rwlock.try_read().unwrap(), [1, 2, 3, 4]);
    assert_idle(&rwlock);
}

// ---------------------------------------------------------------------------------------
// Beyond tokio's file: a reader queued behind a pending writer. The batch grant that lets
// every queued reader in at once must stop at the writer, under `Policy::fifo()` and
// under a plain zero handoff timeout (whose docs promise that no queued waiter passes
// another).

/// The policies that promise the order of the queue.
fn ordered_policies() -> [(&'static str, Policy); 2] {
    [
        ("Policy::fifo()", Policy::fifo()),
        (
            "handoff_timeout(ZERO)",
            Policy::new()
                .handoff_timeout(std::time::Duration::ZERO)
                .writer_spin(std::time::Duration::ZERO)
                .writer_yields(0),
        ),
    ]
}

/// `[R1, W, R2]` queued behind a writer; `release` lets the writer go (a plain release,
/// or a downgrade, which keeps a read lock: `keep`). R1 is granted; R2 waits for W; W gets
/// the lock when R1 (and the downgraded reader) leave, R2 when W leaves.
fn reader_behind_a_pending_writer_waits(
    release: impl Fn(RwLockWriteGuard<'_, u32>) -> Option<async_rwsem::RwLockReadGuard<'_, u32>>,
) {
    for (name, policy) in ordered_policies() {
        let rwlock = RwLock::with_policy(0u32, policy);
        let held = rwlock.try_write().unwrap();
        let mut r1 = spawn(rwlock.read());
        let mut w = spawn(rwlock.write());
        let mut r2 = spawn(rwlock.read());
        assert_pending!(r1.poll());
        assert_pending!(w.poll());
        assert_pending!(r2.poll());
        let kept = release(held);
        assert!(r1.is_woken(), "{name}: the head reader is granted");
        let g1 = assert_ready!(r1.poll());
        assert!(
            !r2.is_woken(),
            "{name}: the reader behind the writer was granted"
        );
        assert_pending!(r2.poll());
        assert_pending!(w.poll());
        drop((g1, kept));
        assert!(w.is_woken(), "{name}");
        let gw = assert_ready!(w.poll());
        assert!(!r2.is_woken(), "{name}");
        assert_pending!(r2.poll());
        drop(gw);
        assert!(r2.is_woken(), "{name}");
        drop(assert_ready!(r2.poll()));
        assert_idle(&rwlock);
    }
}

#[test]
fn a_reader_queued_behind_a_pending_writer_is_not_granted_with_the_head() {
    support::lockdep_off();
    reader_behind_a_pending_writer_waits(|held| {
        drop(held);
        None
    });
}

#[test]
fn a_downgrade_grants_the_head_reader_not_the_one_behind_a_pending_writer() {
    support::lockdep_off();
    reader_behind_a_pending_writer_waits(|held| Some(held.downgrade()));
}

/// `strict_order(true)` with a handoff timeout that is not zero: a writer that arrives
/// while the head writer has been woken (the lock free, not yet taken) queues behind it
/// instead of taking the lock.
#[test]
fn strict_order_keeps_an_arriving_writer_behind_a_woken_head() {
    support::lockdep_off();
    let policy = Policy::new()
        .strict_order(true)
        .handoff_timeout(std::time::Duration::from_secs(3600))
        .writer_spin(std::time::Duration::ZERO)
        .writer_yields(0);
    let rwlock = RwLock::with_policy(Vec::<u32>::new(), policy);
    let held = rwlock.try_read().unwrap();
    let mut first = spawn(rwlock.write().map(|mut guard| guard.push(1)));
    assert_pending!(first.poll());
    drop(held);
    // Woken, not granted: the head has not waited for the handoff timeout.
    assert!(first.is_woken());
    let mut late = spawn(rwlock.write().map(|mut guard| guard.push(2)));
    assert_pending!(late.poll());
    let mut late_reader = spawn(rwlock.read().map(|guard| guard.clone()));
    assert_pending!(late_reader.poll());
    assert_ready!(first.poll());
    assert!(late.is_woken());
    assert_ready!(late.poll());
    assert_eq!(assert_ready!(late_reader.poll()), [1, 2]);
    assert_idle(&rwlock);
}

// ---------------------------------------------------------------------------------------
// Beyond tokio's file: the never-polled waiter (polled once, then neither polled nor
// dropped; async-lock issue 91). Under `Policy::fifo()` the release grants it the lock at
// once (a zero handoff timeout), and everyone waits for it, as with tokio's lock, until it
// is polled or dropped. (Under the default policy others pass it until its handoff is due:
// `tests/starvation.rs`.)

#[test]
fn under_fifo_a_never_polled_waiter_holds_the_others_until_dropped() {
    support::lockdep_off();
    let rwlock = fifo(0u32);
    let held = rwlock.try_write().unwrap();
    let mut stuck = spawn(rwlock.write());
    assert_pending!(stuck.poll());
    drop(held);
    // Granted at the release: it owns the lock, though it is never polled again.
    assert!(stuck.is_woken());
    assert!(rwlock.try_read().is_err());
    let mut reader = spawn(rwlock.read());
    let mut writer = spawn(rwlock.write());
    assert_pending!(reader.poll());
    assert_pending!(writer.poll());
    // Dropping it releases the lock it was granted, and the queue goes on.
    drop(stuck);
    assert!(reader.is_woken());
    drop(assert_ready!(reader.poll()));
    assert!(writer.is_woken());
    drop(assert_ready!(writer.poll()));
    assert_idle(&rwlock);
}
