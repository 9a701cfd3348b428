//! The locks under test (the `lock-adapters` crate, shared with the demo server) behind the
//! two traits the workloads are written against.
//!
//! - [`Lock`]: take the lock, run a closure that does not await, release. Every lock has it,
//!   `parking_lot` included (the "sync lock in async code" choice: it blocks the worker
//!   thread while it waits, and is never held across an `.await`).
//! - [`AsyncLock`]: guards that may be held across an `.await`. The async locks only.
//!
//! Each acquire can be timed: the wait is the time from asking for the lock to holding it.

use std::future::Future;
use std::time::Instant;

pub use lock_adapters::{AsyncLockRw, AsyncRwLock, ParkingLot, Rwsem, SyncRwLock, Tokio};

use crate::data::Shared;

/// Nanoseconds since `t0`, if the acquire was timed.
#[inline]
fn waited(t0: Option<Instant>) -> Option<u64> {
    t0.map(|t| u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

/// A lock under test, used with sections that never await while holding it.
pub trait Lock: Send + Sync + 'static {
    /// Takes the read lock, runs `f`, releases the lock. Returns what `f` returned and, when
    /// `timed`, the nanoseconds spent acquiring.
    fn read_with<R, F>(&self, timed: bool, f: F) -> impl Future<Output = (R, Option<u64>)> + Send
    where
        F: FnOnce(&Shared) -> R + Send,
        R: Send;

    /// Takes the write lock, runs `f`, releases the lock; as [`Lock::read_with`].
    fn write_with<R, F>(&self, timed: bool, f: F) -> impl Future<Output = (R, Option<u64>)> + Send
    where
        F: FnOnce(&mut Shared) -> R + Send,
        R: Send;

    /// The lock's own event counters, `name:value` a line, if it keeps any.
    fn stats(&self) -> Option<String> {
        None
    }
}

/// An async lock: its guards may be held across an `.await`.
pub trait AsyncLock: Lock + AsyncRwLock<Shared> {}

impl<L: Lock + AsyncRwLock<Shared>> AsyncLock for L {}

/// Implements [`Lock`] for an adapter from its [`AsyncLock`] impl.
macro_rules! lock_from_async {
    ($adapter:ty) => {
        impl Lock for $adapter {
            async fn read_with<R, F>(&self, timed: bool, f: F) -> (R, Option<u64>)
            where
                F: FnOnce(&Shared) -> R + Send,
                R: Send,
            {
                let t0 = timed.then(Instant::now);
                let guard = AsyncRwLock::read(self).await;
                let wait = waited(t0);
                (f(&guard), wait)
            }

            async fn write_with<R, F>(&self, timed: bool, f: F) -> (R, Option<u64>)
            where
                F: FnOnce(&mut Shared) -> R + Send,
                R: Send,
            {
                let t0 = timed.then(Instant::now);
                let mut guard = AsyncRwLock::write(self).await;
                let wait = waited(t0);
                (f(&mut guard), wait)
            }

            fn stats(&self) -> Option<String> {
                AsyncRwLock::stats(self)
            }
        }
    };
}

lock_from_async!(Tokio<Shared>);
lock_from_async!(AsyncLockRw<Shared>);
lock_from_async!(Rwsem<Shared>);

impl Lock for ParkingLot<Shared> {
    async fn read_with<R, F>(&self, timed: bool, f: F) -> (R, Option<u64>)
    where
        F: FnOnce(&Shared) -> R + Send,
        R: Send,
    {
        let t0 = timed.then(Instant::now);
        let guard = SyncRwLock::read(self);
        let wait = waited(t0);
        let r = f(&guard);
        drop(guard);
        (r, wait)
    }

    async fn write_with<R, F>(&self, timed: bool, f: F) -> (R, Option<u64>)
    where
        F: FnOnce(&mut Shared) -> R + Send,
        R: Send,
    {
        let t0 = timed.then(Instant::now);
        let mut guard = SyncRwLock::write(self);
        let wait = waited(t0);
        let r = f(&mut guard);
        drop(guard);
        (r, wait)
    }
}
