//! The read-write locks that the demo server (`kvserver`) and the side-by-side benchmark
//! (`bench`) compare, each behind one small trait, so that both are written once against
//! the trait and monomorphised once per lock: the builds run the same code apart from the
//! lock calls themselves.
//!
//! - [`AsyncRwLock`]: guards that may be held across an `.await`: [`Rwsem`] (this
//!   repository's `async_rwsem::RwLock`), [`Tokio`] (`tokio::sync::RwLock`) and
//!   [`AsyncLockRw`] (`async_lock::RwLock`, smol's).
//! - [`SyncRwLock`]: [`ParkingLot`] (`parking_lot::RwLock`), the "sync lock in async code"
//!   choice: it blocks the worker thread while it waits, and is never held across an
//!   `.await`.

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

pub mod policy;
pub use policy::{parse_pass_bound, parse_policy};

/// An async read-write lock around a `T`.
pub trait AsyncRwLock<T: Send + Sync + 'static>: Send + Sync + Sized + 'static {
    /// A short name for reports and command lines (`rwsem`, `tokio`, `async-lock`).
    const NAME: &'static str;

    /// The read guard.
    type ReadGuard<'a>: Deref<Target = T> + Send + Sync + 'a
    where
        Self: 'a;
    /// The write guard.
    type WriteGuard<'a>: DerefMut<Target = T> + Send + Sync + 'a
    where
        Self: 'a;

    /// A lock around `value`, with the lock's default settings.
    fn new(value: T) -> Self;
    /// The lock of shard `index` of a sharded structure whose holders take several shards
    /// at once, in increasing index order: for async-rwsem's lockdep (feature
    /// `async-rwsem/lockdep`), one class whose subclass is the index, so that that order
    /// is a nesting and not "two locks of one class". The others: [`new`](Self::new).
    fn new_shard(value: T, index: usize) -> Self {
        let _ = index;
        Self::new(value)
    }
    /// Takes the read lock.
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send;
    /// Takes the write lock.
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send;

    /// The lock's own event counters as `name:value` lines, if it keeps any (the
    /// `stats` feature, for [`Rwsem`]).
    fn stats(&self) -> Option<String> {
        None
    }
}

/// A blocking read-write lock around a `T`, taken from async tasks without an `.await`.
pub trait SyncRwLock<T: Send + Sync + 'static>: Send + Sync + Sized + 'static {
    /// A short name for reports and command lines (`parking_lot`).
    const NAME: &'static str;

    /// The read guard.
    type ReadGuard<'a>: Deref<Target = T> + 'a
    where
        Self: 'a;
    /// The write guard.
    type WriteGuard<'a>: DerefMut<Target = T> + 'a
    where
        Self: 'a;

    /// A lock around `value`.
    fn new(value: T) -> Self;
    /// Takes the read lock, blocking the thread while it waits.
    fn read(&self) -> Self::ReadGuard<'_>;
    /// Takes the write lock, blocking the thread while it waits.
    fn write(&self) -> Self::WriteGuard<'_>;
}

/// `async_rwsem::RwLock`, with a policy of the caller's choice ([`Rwsem::with_policy`]).
/// [`AsyncRwLock::new`] and [`AsyncRwLock::new_shard`] take the process's policy
/// ([`set_rwsem_policy`], the crate's default until it is set).
pub struct Rwsem<T>(async_rwsem::RwLock<T>);

/// The policy of every [`Rwsem`] made by [`AsyncRwLock::new`] or
/// [`AsyncRwLock::new_shard`] after it in this process (the demo server's
/// `--rwsem-policy`). Set once: a second call returns its policy in the `Err`.
pub fn set_rwsem_policy(policy: async_rwsem::Policy) -> Result<(), async_rwsem::Policy> {
    RWSEM_POLICY.set(policy)
}

static RWSEM_POLICY: OnceLock<async_rwsem::Policy> = OnceLock::new();

fn rwsem_policy() -> async_rwsem::Policy {
    RWSEM_POLICY.get().copied().unwrap_or_default()
}

impl<T> Rwsem<T> {
    /// A lock around `value` with `policy`.
    pub fn with_policy(value: T, policy: async_rwsem::Policy) -> Self {
        Self(async_rwsem::RwLock::with_policy(value, policy))
    }

    /// The lock itself.
    pub fn inner(&self) -> &async_rwsem::RwLock<T> {
        &self.0
    }
}

impl<T: Send + Sync + 'static> AsyncRwLock<T> for Rwsem<T> {
    const NAME: &'static str = "rwsem";
    type ReadGuard<'a> = async_rwsem::RwLockReadGuard<'a, T>;
    type WriteGuard<'a> = async_rwsem::RwLockWriteGuard<'a, T>;

    fn new(value: T) -> Self {
        Self(async_rwsem::RwLock::with_policy(value, rwsem_policy()))
    }
    fn new_shard(value: T, index: usize) -> Self {
        let subclass = u32::try_from(index).expect("a shard index fits in a u32");
        Self(
            async_rwsem::RwLock::with_policy(value, rwsem_policy())
                .with_lockdep_class("shard")
                .with_lockdep_subclass(subclass),
        )
    }
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send {
        self.0.read()
    }
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send {
        self.0.write()
    }

    #[cfg(feature = "stats")]
    fn stats(&self) -> Option<String> {
        Some(
            self.0
                .stats()
                .counters()
                .map(|(name, value)| format!("{name}:{value}\n"))
                .collect(),
        )
    }
}

/// `tokio::sync::RwLock`: fair (FIFO) and write-preferring, a semaphore underneath.
pub struct Tokio<T>(tokio::sync::RwLock<T>);

impl<T: Send + Sync + 'static> AsyncRwLock<T> for Tokio<T> {
    const NAME: &'static str = "tokio";
    type ReadGuard<'a> = tokio::sync::RwLockReadGuard<'a, T>;
    type WriteGuard<'a> = tokio::sync::RwLockWriteGuard<'a, T>;

    fn new(value: T) -> Self {
        Self(tokio::sync::RwLock::new(value))
    }
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send {
        self.0.read()
    }
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send {
        self.0.write()
    }
}

/// `async_lock::RwLock` (smol's): event-listener based, writer-preferring.
pub struct AsyncLockRw<T>(async_lock::RwLock<T>);

impl<T: Send + Sync + 'static> AsyncRwLock<T> for AsyncLockRw<T> {
    const NAME: &'static str = "async-lock";
    type ReadGuard<'a> = async_lock::RwLockReadGuard<'a, T>;
    type WriteGuard<'a> = async_lock::RwLockWriteGuard<'a, T>;

    fn new(value: T) -> Self {
        Self(async_lock::RwLock::new(value))
    }
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send {
        self.0.read()
    }
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send {
        self.0.write()
    }
}

/// `parking_lot::RwLock` taken from async tasks: blocks the worker thread while it waits.
pub struct ParkingLot<T>(parking_lot::RwLock<T>);

impl<T: Send + Sync + 'static> SyncRwLock<T> for ParkingLot<T> {
    const NAME: &'static str = "parking_lot";
    type ReadGuard<'a> = parking_lot::RwLockReadGuard<'a, T>;
    type WriteGuard<'a> = parking_lot::RwLockWriteGuard<'a, T>;

    fn new(value: T) -> Self {
        Self(parking_lot::RwLock::new(value))
    }
    fn read(&self) -> Self::ReadGuard<'_> {
        self.0.read()
    }
    fn write(&self) -> Self::WriteGuard<'_> {
        self.0.write()
    }
}

/// Implements `Debug` by the lock's own `Debug` (what it shows of its state).
macro_rules! debug_by_inner {
    ($($adapter:ident),*) => {$(
        impl<T: fmt::Debug> fmt::Debug for $adapter<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    )*};
}

debug_by_inner!(Rwsem, Tokio, AsyncLockRw, ParkingLot);
