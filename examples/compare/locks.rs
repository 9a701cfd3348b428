//! One adapter per lock under test, behind two small traits, so that the workloads are
//! written once.
//!
//! - [`Lock`]: take the lock, run a closure that does not await, release. Every lock has it,
//!   `parking_lot` included (the "sync lock in async code" choice: it blocks the worker
//!   thread while it waits, and is never held across an `.await`).
//! - [`AsyncLock`]: guards that may be held across an `.await`. The async locks only.
//!
//! Each acquire can be timed: the wait is the time from asking for the lock to holding it.

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::time::Instant;

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
}

/// An async lock: its guards may be held across an `.await`.
pub trait AsyncLock: Lock {
    /// The read guard.
    type ReadGuard<'a>: Deref<Target = Shared> + Send + Sync
    where
        Self: 'a;
    /// The write guard.
    type WriteGuard<'a>: DerefMut<Target = Shared> + Send + Sync
    where
        Self: 'a;

    /// Takes the read lock.
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send;
    /// Takes the write lock.
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send;
}

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
                let guard = AsyncLock::read(self).await;
                let wait = waited(t0);
                (f(&guard), wait)
            }

            async fn write_with<R, F>(&self, timed: bool, f: F) -> (R, Option<u64>)
            where
                F: FnOnce(&mut Shared) -> R + Send,
                R: Send,
            {
                let t0 = timed.then(Instant::now);
                let mut guard = AsyncLock::write(self).await;
                let wait = waited(t0);
                (f(&mut guard), wait)
            }
        }
    };
}

/// `tokio::sync::RwLock`: fair (FIFO) and write-preferring, a semaphore underneath.
#[derive(Debug, Default)]
pub struct Tokio(tokio::sync::RwLock<Shared>);

impl Tokio {
    /// A lock around fresh data.
    pub fn new() -> Self {
        Self(tokio::sync::RwLock::new(Shared::new()))
    }
}

impl AsyncLock for Tokio {
    type ReadGuard<'a> = tokio::sync::RwLockReadGuard<'a, Shared>;
    type WriteGuard<'a> = tokio::sync::RwLockWriteGuard<'a, Shared>;

    async fn read(&self) -> Self::ReadGuard<'_> {
        self.0.read().await
    }

    async fn write(&self) -> Self::WriteGuard<'_> {
        self.0.write().await
    }
}

lock_from_async!(Tokio);

/// `async_lock::RwLock` (smol): event-listener based, writer-preferring.
#[derive(Debug, Default)]
pub struct AsyncLockRw(async_lock::RwLock<Shared>);

impl AsyncLockRw {
    /// A lock around fresh data.
    pub fn new() -> Self {
        Self(async_lock::RwLock::new(Shared::new()))
    }
}

impl AsyncLock for AsyncLockRw {
    type ReadGuard<'a> = async_lock::RwLockReadGuard<'a, Shared>;
    type WriteGuard<'a> = async_lock::RwLockWriteGuard<'a, Shared>;

    async fn read(&self) -> Self::ReadGuard<'_> {
        self.0.read().await
    }

    async fn write(&self) -> Self::WriteGuard<'_> {
        self.0.write().await
    }
}

lock_from_async!(AsyncLockRw);

/// `parking_lot::RwLock` taken from async tasks: blocks the worker thread while it waits,
/// never held across an `.await`.
#[derive(Debug, Default)]
pub struct ParkingLot(parking_lot::RwLock<Shared>);

impl ParkingLot {
    /// A lock around fresh data.
    pub fn new() -> Self {
        Self(parking_lot::RwLock::new(Shared::new()))
    }
}

impl Lock for ParkingLot {
    async fn read_with<R, F>(&self, timed: bool, f: F) -> (R, Option<u64>)
    where
        F: FnOnce(&Shared) -> R + Send,
        R: Send,
    {
        let t0 = timed.then(Instant::now);
        let guard = self.0.read();
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
        let mut guard = self.0.write();
        let wait = waited(t0);
        let r = f(&mut guard);
        drop(guard);
        (r, wait)
    }
}

/// `async_rwsem::RwLock`, this crate, with a given policy.
#[derive(Debug, Default)]
pub struct Rwsem(async_rwsem::RwLock<Shared>);

impl Rwsem {
    /// A lock with `policy` around fresh data.
    pub fn with_policy(policy: async_rwsem::Policy) -> Self {
        Self(async_rwsem::RwLock::with_policy(Shared::new(), policy))
    }
}

/// With the crate's `stats` feature and `COMPARE_STATS=1`, each async-rwsem case prints
/// its lock events to stderr when its lock is dropped (what spun, what queued, what was
/// handed off): `COMPARE_STATS=1 cargo run --release --features stats --example compare`.
#[cfg(feature = "stats")]
impl Drop for Rwsem {
    fn drop(&mut self) {
        if std::env::var_os("COMPARE_STATS").is_some() {
            let stats = self.0.stats();
            let events: Vec<String> = stats
                .counters()
                .filter(|&(_, n)| n > 0)
                .map(|(name, n)| format!("{name}={n}"))
                .collect();
            eprintln!("async-rwsem lock events: {}", events.join(" "));
        }
    }
}

impl AsyncLock for Rwsem {
    type ReadGuard<'a> = async_rwsem::RwLockReadGuard<'a, Shared>;
    type WriteGuard<'a> = async_rwsem::RwLockWriteGuard<'a, Shared>;

    async fn read(&self) -> Self::ReadGuard<'_> {
        self.0.read().await
    }

    async fn write(&self) -> Self::WriteGuard<'_> {
        self.0.write().await
    }
}

lock_from_async!(Rwsem);
