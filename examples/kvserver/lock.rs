//! The one seam between the server and the lock it benchmarks: [`ShardLock`].
//!
//! Every shard of the store sits behind a `ShardLock`; the server is generic over it and is
//! monomorphised once per `--lock` choice, so the three builds run exactly the same code apart
//! from the lock calls themselves.

use std::future::Future;
use std::ops::{Deref, DerefMut};

/// An async read-write lock as the store needs it.
pub trait ShardLock<T: Send + Sync + 'static>: Send + Sync + Sized + 'static {
    /// The `--lock` value that selects this implementation.
    const NAME: &'static str;

    type ReadGuard<'a>: Deref<Target = T> + Send + 'a
    where
        Self: 'a;
    type WriteGuard<'a>: DerefMut<Target = T> + Send + 'a
    where
        Self: 'a;

    fn new(value: T) -> Self;
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send;
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send;

    /// The lock's own statistics as `name:value` lines for `INFO`, if it keeps any.
    fn stats(&self) -> Option<String> {
        None
    }
}

/// `--lock rwsem`: this crate's `async_rwsem::RwLock`, default policy.
pub struct RwsemLock<T>(async_rwsem::RwLock<T>);

impl<T: Send + Sync + 'static> ShardLock<T> for RwsemLock<T> {
    const NAME: &'static str = "rwsem";
    type ReadGuard<'a> = async_rwsem::RwLockReadGuard<'a, T>;
    type WriteGuard<'a> = async_rwsem::RwLockWriteGuard<'a, T>;

    fn new(value: T) -> Self {
        RwsemLock(async_rwsem::RwLock::new(value))
    }
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send {
        self.0.read()
    }
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send {
        self.0.write()
    }

    /// With the crate's `stats` feature: the lock-event counters, one `name:value` a line.
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

/// `--lock tokio`: `tokio::sync::RwLock`.
pub struct TokioLock<T>(tokio::sync::RwLock<T>);

impl<T: Send + Sync + 'static> ShardLock<T> for TokioLock<T> {
    const NAME: &'static str = "tokio";
    type ReadGuard<'a> = tokio::sync::RwLockReadGuard<'a, T>;
    type WriteGuard<'a> = tokio::sync::RwLockWriteGuard<'a, T>;

    fn new(value: T) -> Self {
        TokioLock(tokio::sync::RwLock::new(value))
    }
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send {
        self.0.read()
    }
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send {
        self.0.write()
    }
}

/// `--lock async-lock`: `async_lock::RwLock` (smol's).
pub struct AsyncLock<T>(async_lock::RwLock<T>);

impl<T: Send + Sync + 'static> ShardLock<T> for AsyncLock<T> {
    const NAME: &'static str = "async-lock";
    type ReadGuard<'a> = async_lock::RwLockReadGuard<'a, T>;
    type WriteGuard<'a> = async_lock::RwLockWriteGuard<'a, T>;

    fn new(value: T) -> Self {
        AsyncLock(async_lock::RwLock::new(value))
    }
    fn read(&self) -> impl Future<Output = Self::ReadGuard<'_>> + Send {
        self.0.read()
    }
    fn write(&self) -> impl Future<Output = Self::WriteGuard<'_>> + Send {
        self.0.write()
    }
}

/// The `--lock` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LockKind {
    Rwsem,
    Tokio,
    AsyncLock,
}

#[allow(dead_code)] // used by the tests
impl LockKind {
    pub const ALL: [LockKind; 3] = [LockKind::Rwsem, LockKind::Tokio, LockKind::AsyncLock];

    pub fn name(self) -> &'static str {
        match self {
            LockKind::Rwsem => <RwsemLock<()> as ShardLock<()>>::NAME,
            LockKind::Tokio => <TokioLock<()> as ShardLock<()>>::NAME,
            LockKind::AsyncLock => <AsyncLock<()> as ShardLock<()>>::NAME,
        }
    }
}
