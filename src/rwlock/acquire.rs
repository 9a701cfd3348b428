//! `RwLock`'s constructors, then its async and `try_` acquires (read and write locks,
//! borrowed and owned; then upgradable reads), in the order the documentation lists them.
//! The timed acquires are in `timeout.rs`, the blocking ones in `blocking.rs`; the state
//! queries, `into_inner` and `get_mut` in `rwlock.rs` (see the module list there for why).

use super::*;
use std::future::Future;

use crate::observe::{self, Attempt, Site};
use crate::raw::list::WaiterKind;

// ---------------------------------------------------------------------------------------
// Construction.

impl<T> RwLock<T> {
    /// Creates an unlocked lock holding `value`, with the default [`Policy`].
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// static COUNTER: RwLock<u64> = RwLock::new(0);
    /// let lock = RwLock::new(vec![1, 2, 3]);
    /// # let _ = (&COUNTER, lock);
    /// ```
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub const fn new(value: T) -> Self {
        Self::with_policy(value, Policy::DEFAULT)
    }

    // The crate's own loom build (`cfg(all(test, async_rwsem_loom))`, which no user of the
    // crate ever compiles) has the same constructors, not `const`: loom's atomics cannot
    // be built in a `const fn`.

    /// See the `const` [`new`](Self::new) (loom build).
    #[cfg(all(test, async_rwsem_loom))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub fn new(value: T) -> Self {
        Self::with_policy(value, Policy::DEFAULT)
    }

    /// The same as [`new`](Self::new), under the name `tokio::sync::RwLock` gives its
    /// `const` constructor, so that moving over is a change of `use`.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// static NAMES: RwLock<Vec<String>> = RwLock::const_new(Vec::new());
    /// assert!(NAMES.try_read().unwrap().is_empty());
    /// ```
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub const fn const_new(value: T) -> Self {
        Self::new(value)
    }

    /// See the `const` [`const_new`](Self::const_new) (loom build).
    #[cfg(all(test, async_rwsem_loom))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub fn const_new(value: T) -> Self {
        Self::new(value)
    }

    /// Creates an unlocked lock holding `value`, run by `policy`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// let lock = RwLock::with_policy(0u32, Policy::new().handoff_timeout(Duration::from_millis(1)));
    /// assert_eq!(lock.policy().handoff_timeout, Duration::from_millis(1));
    /// ```
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub const fn with_policy(value: T, policy: Policy) -> Self {
        Self::with_policy_and_max_readers(value, policy, crate::raw::RawRwLock::MAX_READERS)
    }

    /// See the `const` [`with_policy`](Self::with_policy) (loom build).
    #[cfg(all(test, async_rwsem_loom))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub fn with_policy(value: T, policy: Policy) -> Self {
        Self::with_policy_and_max_readers(value, policy, crate::raw::RawRwLock::MAX_READERS)
    }

    /// Creates an unlocked lock holding `value` that lets at most `max_readers` readers
    /// hold it at once; more readers wait (as `tokio::sync::RwLock::with_max_readers`).
    /// Without a limit, the reader count is bounded by the count word (2^55 - 1 readers on
    /// 64-bit targets).
    ///
    /// # Panics
    ///
    /// If `max_readers` is 0 (no reader could ever get in), or more than the count word
    /// can count (only possible on 32-bit targets, where the limit is 2^23 - 1).
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::with_max_readers(0, 2);
    /// let a = lock.try_read().unwrap();
    /// let b = lock.try_read().unwrap();
    /// assert!(lock.try_read().is_err()); // a third reader would wait
    /// drop(a);
    /// assert!(lock.try_read().is_ok());
    /// # drop(b);
    /// ```
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub const fn with_max_readers(value: T, max_readers: u32) -> Self {
        Self::with_policy_and_max_readers(value, Policy::DEFAULT, max_readers as usize)
    }

    /// See the `const` [`with_max_readers`](Self::with_max_readers) (loom build).
    #[cfg(all(test, async_rwsem_loom))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub fn with_max_readers(value: T, max_readers: u32) -> Self {
        Self::with_policy_and_max_readers(value, Policy::DEFAULT, max_readers as usize)
    }

    /// The same as [`with_max_readers`](Self::with_max_readers) (which is `const` too),
    /// under tokio's name.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// static POOL: RwLock<()> = RwLock::const_with_max_readers((), 8);
    /// # let _ = &POOL;
    /// ```
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub const fn const_with_max_readers(value: T, max_readers: u32) -> Self {
        Self::with_max_readers(value, max_readers)
    }

    /// See the `const` [`const_with_max_readers`](Self::const_with_max_readers) (loom
    /// build).
    #[cfg(all(test, async_rwsem_loom))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub fn const_with_max_readers(value: T, max_readers: u32) -> Self {
        Self::with_max_readers(value, max_readers)
    }

    /// Creates an unlocked lock holding `value`, run by `policy`, with at most
    /// `max_readers` readers at once.
    ///
    /// # Panics
    ///
    /// If `max_readers` is 0, or more than the count word can count.
    ///
    /// ```
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// let lock = RwLock::with_policy_and_max_readers(0, Policy::new(), 4);
    /// assert!(lock.try_read().is_ok());
    /// ```
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub const fn with_policy_and_max_readers(value: T, policy: Policy, max_readers: usize) -> Self {
        Self {
            raw: ObservedLock::new(policy, max_readers),
            data: UnsafeCell::new(value),
        }
    }

    /// See the `const`
    /// [`with_policy_and_max_readers`](Self::with_policy_and_max_readers) (loom build).
    #[cfg(all(test, async_rwsem_loom))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub fn with_policy_and_max_readers(value: T, policy: Policy, max_readers: usize) -> Self {
        Self {
            raw: ObservedLock::new(policy, max_readers),
            data: UnsafeCell::new(value),
        }
    }

    /// Names the lock's class for the feature `lockdep` (see its module, `lockdep`): every
    /// lock given the same name is one class, wherever it was made. Without it, a lock's
    /// class is where it was created. Without the feature, it does nothing (so code
    /// annotated for lockdep builds either way).
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// static SESSIONS: RwLock<Vec<u32>> = RwLock::new(Vec::new()).with_lockdep_class("sessions");
    /// # let _ = &SESSIONS;
    /// ```
    #[cfg_attr(not(feature = "lockdep"), allow(unused_mut, unused_variables))]
    pub const fn with_lockdep_class(mut self, name: &'static str) -> Self {
        #[cfg(feature = "lockdep")]
        self.raw.observe.lockdep.set_name(name);
        self
    }

    /// Sets the lock's lockdep subclass (see the module `lockdep`): locks of one class that
    /// nest take different subclasses, the outer one 0 (the default), so that holding one
    /// while acquiring the other is an order between two classes, not two locks of one
    /// class. Without the feature `lockdep`, it does nothing.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let parent = RwLock::new(0).with_lockdep_class("node");
    /// let child = RwLock::new(0).with_lockdep_class("node").with_lockdep_subclass(1);
    /// let (_p, _c) = (parent.try_write().unwrap(), child.try_write().unwrap());
    /// ```
    #[cfg_attr(not(feature = "lockdep"), allow(unused_mut, unused_variables))]
    pub const fn with_lockdep_subclass(mut self, subclass: u32) -> Self {
        #[cfg(feature = "lockdep")]
        self.raw.observe.lockdep.set_subclass(subclass);
        self
    }
}

// ---------------------------------------------------------------------------------------
// Read and write locks: the async acquires, the `try_` ones, then the owned forms.

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, waiting while a writer holds the lock (or is due it).
    ///
    /// Returns a guard that releases the read lock when dropped. Cancel safe: dropping the
    /// future before it completes takes nothing, and leaves no trace in the queue.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let c = Arc::clone(&lock);
    /// let n = lock.read().await;
    /// // Another reader gets in while we hold ours.
    /// let other = tokio::spawn(async move { *c.read().await }).await.unwrap();
    /// assert_eq!(*n, other);
    /// # }
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn read(&self) -> impl Future<Output = RwLockReadGuard<'_, T>> + '_ {
        self.read_as(Site::caller(), "RwLock::read")
    }

    /// [`read`](Self::read) from `site`, an async operation called `source` in
    /// tokio-console (the timed acquire names its own).
    #[inline]
    pub(crate) fn read_as(
        &self,
        site: Site,
        source: &'static str,
    ) -> impl Future<Output = RwLockReadGuard<'_, T>> + '_ {
        observe::AsyncOp::new(&self.raw, WaiterKind::Read, source).wrap(async move {
            observe::acquiring(&self.raw, WaiterKind::Read, site, Attempt::Wait);
            let wait = token::lock_or_wait!(Read, &self.raw, site);
            // SAFETY: the acquire completed: we own a read lock of `self`, whose value `data_ptr`
            // points to.
            let guard =
                unsafe { RwLockReadGuard::new(Token::new(&self.raw, site, wait), self.data_ptr()) };
            #[cfg(feature = "tokio")]
            if coop::charge_due(&self.raw) {
                coop::Proceed.await;
            }
            guard
        })
    }

    /// Locks for writing, waiting until no reader or writer holds the lock.
    ///
    /// A writer that finds the lock held first spins for a short time (the policy's
    /// `writer_spin`), then, if a writer holds it, yields to the executor (`writer_yields`
    /// times), then queues.
    /// Returns a guard that releases the write lock when dropped. Cancel safe.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(1);
    /// *lock.write().await += 1;
    /// assert_eq!(*lock.read().await, 2);
    /// # });
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn write(&self) -> impl Future<Output = RwLockWriteGuard<'_, T>> + '_ {
        self.write_as(Site::caller(), "RwLock::write")
    }

    /// [`write`](Self::write) from `site`, an async operation called `source` in
    /// tokio-console (the timed acquire names its own).
    #[inline]
    pub(crate) fn write_as(
        &self,
        site: Site,
        source: &'static str,
    ) -> impl Future<Output = RwLockWriteGuard<'_, T>> + '_ {
        observe::AsyncOp::new(&self.raw, WaiterKind::Write, source).wrap(async move {
            observe::acquiring(&self.raw, WaiterKind::Write, site, Attempt::Wait);
            let wait = token::lock_or_wait!(Write, &self.raw, site);
            // SAFETY: the acquire completed: we own the write lock of `self`, whose value
            // `data_ptr_mut` points to.
            let guard = unsafe {
                RwLockWriteGuard::new(Token::new(&self.raw, site, wait), self.data_ptr_mut())
            };
            #[cfg(feature = "tokio")]
            if coop::charge_due(&self.raw) {
                coop::Proceed.await;
            }
            guard
        })
    }

    /// Locks for reading if that needs no waiting: no writer holds the lock, nobody is
    /// queued and no handoff is pending.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// let r = lock.try_read().unwrap();
    /// assert_eq!(*r, 1);
    /// assert!(lock.try_write().is_err());
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_read(&self) -> Result<RwLockReadGuard<'_, T>, TryLockError> {
        let token = Token::try_lock(&self.raw, Site::caller()).ok_or(TryLockError(()))?;
        // SAFETY: the token owns a read lock of `self`, whose value `data_ptr` points to.
        Ok(unsafe { RwLockReadGuard::new(token, self.data_ptr()) })
    }

    /// Locks for writing if the lock is idle: no reader or writer inside and nobody queued
    /// (one compare-and-swap from the idle count word, as the kernel's
    /// `down_write_trylock`). It fails whenever a waiter is queued, even if the lock is
    /// free at that instant.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// *lock.try_write().unwrap() = 2;
    /// let r = lock.try_read().unwrap();
    /// assert!(lock.try_write().is_err());
    /// assert_eq!(*r, 2);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_write(&self) -> Result<RwLockWriteGuard<'_, T>, TryLockError> {
        let token = Token::try_lock(&self.raw, Site::caller()).ok_or(TryLockError(()))?;
        // SAFETY: the token owns the write lock of `self`, whose value `data_ptr_mut` points to.
        Ok(unsafe { RwLockWriteGuard::new(token, self.data_ptr_mut()) })
    }

    /// Locks for reading, as [`read`](Self::read), through an `Arc`: the guard holds the
    /// `Arc` instead of borrowing the lock, so it can outlive the scope (and be moved into
    /// a spawned task). Cancel safe.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let guard = Arc::clone(&lock).read_owned().await;
    /// let n = tokio::spawn(async move { *guard + 1 }).await.unwrap();
    /// assert_eq!(n, 2);
    /// assert!(lock.try_write().is_ok()); // the guard was dropped in the task
    /// # }
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn read_owned(self: Arc<Self>) -> impl Future<Output = OwnedRwLockReadGuard<T>> {
        let site = Site::caller();
        let op = observe::AsyncOp::new(&self.raw, WaiterKind::Read, "RwLock::read_owned");
        op.wrap(async move {
            observe::acquiring(&self.raw, WaiterKind::Read, site, Attempt::Wait);
            let wait = token::lock_or_wait!(Read, &self.raw, site);
            let data = self.data_ptr();
            // Asked before the guard takes `self` over.
            #[cfg(feature = "tokio")]
            let charge = coop::charge_due(&self.raw);
            // SAFETY: the acquire completed: we own a read lock of `self`, whose value `data`
            // points to.
            let guard = unsafe { OwnedRwLockReadGuard::new(Token::new(self, site, wait), data) };
            #[cfg(feature = "tokio")]
            if charge {
                coop::Proceed.await;
            }
            guard
        })
    }

    /// Locks for writing, as [`write`](Self::write), through an `Arc`. Cancel safe.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut guard = Arc::clone(&lock).write_owned().await;
    /// tokio::spawn(async move { *guard += 1 }).await.unwrap();
    /// assert_eq!(*lock.read().await, 2);
    /// # }
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn write_owned(self: Arc<Self>) -> impl Future<Output = OwnedRwLockWriteGuard<T>> {
        let site = Site::caller();
        let op = observe::AsyncOp::new(&self.raw, WaiterKind::Write, "RwLock::write_owned");
        op.wrap(async move {
            observe::acquiring(&self.raw, WaiterKind::Write, site, Attempt::Wait);
            let wait = token::lock_or_wait!(Write, &self.raw, site);
            let data = self.data_ptr_mut();
            // Asked before the guard takes `self` over.
            #[cfg(feature = "tokio")]
            let charge = coop::charge_due(&self.raw);
            // SAFETY: the acquire completed: we own the write lock of `self`, whose value `data`
            // points to.
            let guard = unsafe { OwnedRwLockWriteGuard::new(Token::new(self, site, wait), data) };
            #[cfg(feature = "tokio")]
            if charge {
                coop::Proceed.await;
            }
            guard
        })
    }

    /// Locks for reading through an `Arc` if that needs no waiting, as
    /// [`try_read`](Self::try_read).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let r = Arc::clone(&lock).try_read_owned().unwrap();
    /// assert_eq!(*r, 1);
    /// assert!(Arc::clone(&lock).try_write_owned().is_err());
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_read_owned(self: Arc<Self>) -> Result<OwnedRwLockReadGuard<T>, TryLockError> {
        let token = Token::try_lock(self, Site::caller()).ok_or(TryLockError(()))?;
        let data = token.lock().data_ptr();
        // SAFETY: the token owns a read lock of the lock whose value `data` points to.
        Ok(unsafe { OwnedRwLockReadGuard::new(token, data) })
    }

    /// Locks for writing through an `Arc` if the lock is free, as
    /// [`try_write`](Self::try_write).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// *Arc::clone(&lock).try_write_owned().unwrap() = 2;
    /// let r = lock.try_read().unwrap();
    /// assert!(Arc::clone(&lock).try_write_owned().is_err());
    /// assert_eq!(*r, 2);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_write_owned(self: Arc<Self>) -> Result<OwnedRwLockWriteGuard<T>, TryLockError> {
        let token = Token::try_lock(self, Site::caller()).ok_or(TryLockError(()))?;
        let data = token.lock().data_ptr_mut();
        // SAFETY: the token owns the write lock of the lock whose value `data` points to.
        Ok(unsafe { OwnedRwLockWriteGuard::new(token, data) })
    }
}

// ---------------------------------------------------------------------------------------
// Upgradable reads: `upgradable_read`, `try_upgradable_read` and their owned forms.

impl<T: ?Sized> RwLock<T> {
    /// Locks for an upgradable read: shared access beside plain readers, which can later
    /// become exclusive with [`RwLockUpgradableReadGuard::upgrade`] without letting a
    /// writer in between. Waits while a writer or another upgradable reader holds the
    /// lock. Cancel safe.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(vec![1, 2]);
    /// let up = lock.upgradable_read().await;
    /// let r = lock.read().await; // plain readers still get in
    /// assert!(lock.try_upgradable_read().is_err()); // but not a second upgradable one
    /// drop(r);
    /// if !up.contains(&3) {
    ///     let mut w = RwLockUpgradableReadGuard::upgrade(up).await;
    ///     w.push(3);
    /// }
    /// assert_eq!(*lock.read().await, [1, 2, 3]);
    /// # });
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn upgradable_read(&self) -> impl Future<Output = RwLockUpgradableReadGuard<'_, T>> + '_ {
        self.upgradable_read_as(Site::caller(), "RwLock::upgradable_read")
    }

    /// [`upgradable_read`](Self::upgradable_read) from `site`, an async operation called
    /// `source` in tokio-console (the timed acquire names its own).
    #[inline]
    pub(crate) fn upgradable_read_as(
        &self,
        site: Site,
        source: &'static str,
    ) -> impl Future<Output = RwLockUpgradableReadGuard<'_, T>> + '_ {
        observe::AsyncOp::new(&self.raw, WaiterKind::UpgradableRead, source).wrap(async move {
            observe::acquiring(&self.raw, WaiterKind::UpgradableRead, site, Attempt::Wait);
            let wait = token::lock_or_wait!(Upgradable, &self.raw, site);
            // SAFETY: the acquire completed: we own the upgradable read lock of `self`, whose value
            // `data_ptr` points to.
            let guard = unsafe {
                RwLockUpgradableReadGuard::new(Token::new(&self.raw, site, wait), self.data_ptr())
            };
            #[cfg(feature = "tokio")]
            if coop::charge_due(&self.raw) {
                coop::Proceed.await;
            }
            guard
        })
    }

    /// Locks for an upgradable read if that needs no waiting: no writer, no other
    /// upgradable reader, nobody queued.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// let up = lock.try_upgradable_read().unwrap();
    /// assert!(lock.try_upgradable_read().is_err());
    /// assert!(lock.try_read().is_ok());
    /// assert!(lock.try_write().is_err());
    /// drop(up);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgradable_read(&self) -> Result<RwLockUpgradableReadGuard<'_, T>, TryLockError> {
        let token = Token::try_lock(&self.raw, Site::caller()).ok_or(TryLockError(()))?;
        // SAFETY: the token owns the upgradable read lock of `self`, whose value `data_ptr` points
        // to.
        Ok(unsafe { RwLockUpgradableReadGuard::new(token, self.data_ptr()) })
    }

    /// Locks for an upgradable read, as [`upgradable_read`](Self::upgradable_read),
    /// through an `Arc`: the guard keeps the lock alive and is `'static` when `T` is.
    /// Cancel safe.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let up = Arc::clone(&lock).upgradable_read_owned().await;
    /// let task = tokio::spawn(async move {
    ///     let mut w = OwnedRwLockUpgradableReadGuard::upgrade(up).await;
    ///     *w += 1;
    /// });
    /// task.await.unwrap();
    /// assert_eq!(*lock.read().await, 2);
    /// # }
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn upgradable_read_owned(
        self: Arc<Self>,
    ) -> impl Future<Output = OwnedRwLockUpgradableReadGuard<T>> {
        let site = Site::caller();
        let op = observe::AsyncOp::new(
            &self.raw,
            WaiterKind::UpgradableRead,
            "RwLock::upgradable_read_owned",
        );
        op.wrap(async move {
            observe::acquiring(&self.raw, WaiterKind::UpgradableRead, site, Attempt::Wait);
            let wait = token::lock_or_wait!(Upgradable, &self.raw, site);
            let data = self.data_ptr();
            // Asked before the guard takes `self` over.
            #[cfg(feature = "tokio")]
            let charge = coop::charge_due(&self.raw);
            // SAFETY: the acquire completed: we own the upgradable read lock of `self`, whose value
            // `data` points to.
            let guard =
                unsafe { OwnedRwLockUpgradableReadGuard::new(Token::new(self, site, wait), data) };
            #[cfg(feature = "tokio")]
            if charge {
                coop::Proceed.await;
            }
            guard
        })
    }

    /// Locks for an upgradable read through an `Arc` if that needs no waiting, as
    /// [`try_upgradable_read`](Self::try_upgradable_read).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// assert!(Arc::clone(&lock).try_upgradable_read_owned().is_err());
    /// drop(up);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgradable_read_owned(
        self: Arc<Self>,
    ) -> Result<OwnedRwLockUpgradableReadGuard<T>, TryLockError> {
        let token = Token::try_lock(self, Site::caller()).ok_or(TryLockError(()))?;
        let data = token.lock().data_ptr();
        // SAFETY: the token owns the upgradable read lock of the lock whose value `data` points to.
        Ok(unsafe { OwnedRwLockUpgradableReadGuard::new(token, data) })
    }
}
