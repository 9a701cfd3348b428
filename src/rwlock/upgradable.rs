//! Upgradable reads: a read lock that can become the write lock without letting a writer
//! in between. At most one upgradable reader holds the lock at a time, beside any number
//! of plain readers; so two upgraders can never wait for each other.
//!
//! In the count word the upgradable reader is a reader bias plus the `UPGRADABLE` bit. An
//! upgrade that must wait queues at the *head* of the wait queue and sets the handoff bit:
//! new readers queue behind it, the readers inside drain, and the last one out grants it
//! the write lock.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::guard::{RwLockReadGuard, RwLockWriteGuard};
use super::owned::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard};
use super::{RwLock, TryLockError};
use crate::loom::cell_ptr_shared;
use crate::raw::{LockFuture, RawRwLock};

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
    pub async fn upgradable_read(&self) -> RwLockUpgradableReadGuard<'_, T> {
        LockFuture::upgradable_read(&self.raw).await;
        // SAFETY: we own the upgradable read lock, handed to the guard.
        unsafe { self.upgradable_guard() }
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
    pub fn try_upgradable_read(&self) -> Result<RwLockUpgradableReadGuard<'_, T>, TryLockError> {
        if self.raw.try_upgradable_read() {
            // SAFETY: we own the upgradable read lock, handed to the guard.
            Ok(unsafe { self.upgradable_guard() })
        } else {
            Err(TryLockError(()))
        }
    }

    /// Locks for an upgradable read from synchronous code, blocking the current thread
    /// (see [`blocking_read`](Self::blocking_read), and its warning: calling it inside an
    /// async task can deadlock).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let l = Arc::clone(&lock);
    /// std::thread::spawn(move || {
    ///     let up = l.blocking_upgradable_read();
    ///     if let Ok(mut w) = RwLockUpgradableReadGuard::try_upgrade(up) {
    ///         *w += 1;
    ///     }
    /// })
    /// .join()
    /// .unwrap();
    /// assert_eq!(*lock.blocking_read(), 2);
    /// ```
    pub fn blocking_upgradable_read(&self) -> RwLockUpgradableReadGuard<'_, T> {
        super::blocking::block_on(self.upgradable_read())
    }

    /// # Safety
    ///
    /// The caller owns the upgradable read lock of `self` and hands it to the guard.
    unsafe fn upgradable_guard(&self) -> RwLockUpgradableReadGuard<'_, T> {
        RwLockUpgradableReadGuard {
            raw: &self.raw,
            // SAFETY: a pointer into a live cell is not null.
            data: unsafe { NonNull::new_unchecked(cell_ptr_shared(&self.data)) },
            marker: PhantomData,
        }
    }
}

/// Shared access to the value of a [`RwLock`] that can be upgraded to exclusive access
/// without letting a writer in between; released when dropped.
///
/// Made by [`RwLock::upgradable_read`], [`RwLock::try_upgradable_read`],
/// [`RwLock::blocking_upgradable_read`] and [`RwLockWriteGuard::downgrade_to_upgradable`].
/// Its methods are associated functions (`RwLockUpgradableReadGuard::upgrade(guard)`),
/// so that they do not hide methods of the value.
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockUpgradableReadGuard<'a, T: ?Sized> {
    raw: &'a RawRwLock,
    data: NonNull<T>,
    /// Invariant in `T`: the guard can become a write guard, which hands out `&mut T`.
    marker: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized> RwLockUpgradableReadGuard<'a, T> {
    /// Upgrades to the write lock, waiting for the other readers to leave. New readers and
    /// writers are held off meanwhile (they queue behind the upgrade), so the wait is
    /// bounded by the sections of the readers already inside.
    ///
    /// Cancel safe: dropping the returned future before it completes releases the lock
    /// altogether (the upgradable guard was moved into it) and leaves the queue as if
    /// the upgrade had never been asked for.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(0));
    /// let reader = lock.read().await;
    /// let l = Arc::clone(&lock);
    /// let upgrade = tokio::spawn(async move {
    ///     let up = l.upgradable_read().await;
    ///     let mut w = RwLockUpgradableReadGuard::upgrade(up).await;
    ///     *w += 1;
    /// });
    /// // Once the upgrade waits for `reader`, new readers are held off.
    /// while lock.try_read().is_ok() {
    ///     tokio::task::yield_now().await;
    /// }
    /// drop(reader);
    /// upgrade.await.unwrap();
    /// assert_eq!(*lock.read().await, 1);
    /// # }
    /// ```
    pub fn upgrade(this: Self) -> Upgrade<'a, T> {
        let this = ManuallyDrop::new(this);
        Upgrade {
            raw: this.raw,
            // SAFETY: the guard's upgradable read lock goes to the future (the guard's
            // drop does not run).
            acquire: unsafe { LockFuture::upgrade(this.raw) },
            data: this.data,
            marker: PhantomData,
        }
    }

    /// Upgrades to the write lock if no other reader holds the lock; otherwise gives the
    /// guard back.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// let lock = RwLock::new(0);
    /// let up = lock.try_upgradable_read().unwrap();
    /// let r = lock.try_read().unwrap();
    /// let up = RwLockUpgradableReadGuard::try_upgrade(up).unwrap_err(); // `r` is inside
    /// drop(r);
    /// let mut w = RwLockUpgradableReadGuard::try_upgrade(up).unwrap();
    /// *w = 1;
    /// ```
    pub fn try_upgrade(this: Self) -> Result<RwLockWriteGuard<'a, T>, Self> {
        // SAFETY: the guard owns the upgradable read lock.
        if unsafe { this.raw.try_upgrade() } {
            let this = ManuallyDrop::new(this);
            Ok(RwLockWriteGuard {
                raw: this.raw,
                data: this.data,
                marker: PhantomData,
            })
        } else {
            Err(this)
        }
    }

    /// Gives up the right to upgrade: the guard becomes a plain read guard, and a queued
    /// upgradable reader may get in.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// let lock = RwLock::new(0);
    /// let up = lock.try_upgradable_read().unwrap();
    /// let r = RwLockUpgradableReadGuard::downgrade(up);
    /// let up2 = lock.try_upgradable_read().unwrap(); // the upgradable slot is free again
    /// assert_eq!(*r + *up2, 0);
    /// ```
    pub fn downgrade(this: Self) -> RwLockReadGuard<'a, T> {
        let this = ManuallyDrop::new(this);
        // SAFETY: the guard owns the upgradable read lock; the read lock it becomes goes to
        // the new guard.
        unsafe { this.raw.downgrade_upgradable() };
        RwLockReadGuard {
            raw: this.raw,
            data: this.data,
            marker: PhantomData,
        }
    }
}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Atomically turns the write lock into the upgradable read lock, letting the queued
    /// plain readers in beside it (not writers, nor other upgradable readers).
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard, RwLockWriteGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(1);
    /// let mut w = lock.write().await;
    /// *w = 2;
    /// let up = RwLockWriteGuard::downgrade_to_upgradable(w);
    /// assert_eq!(*lock.read().await, 2); // readers share the lock now
    /// let w = RwLockUpgradableReadGuard::upgrade(up).await;
    /// assert_eq!(*w, 2);
    /// # });
    /// ```
    pub fn downgrade_to_upgradable(this: Self) -> RwLockUpgradableReadGuard<'a, T> {
        let this = ManuallyDrop::new(this);
        // SAFETY: the guard owns the write lock; the upgradable read lock it becomes goes
        // to the new guard.
        unsafe { this.raw.downgrade_to_upgradable() };
        RwLockUpgradableReadGuard {
            raw: this.raw,
            data: this.data,
            marker: PhantomData,
        }
    }
}

impl<T: ?Sized> Deref for RwLockUpgradableReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard owns a read lock: no writer exists while it lives.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> Drop for RwLockUpgradableReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard owns the upgradable read lock and gives it up.
        unsafe { self.raw.unlock_upgradable() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockUpgradableReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockUpgradableReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// The future of [`RwLockUpgradableReadGuard::upgrade`]: resolves to the write guard.
///
/// It owns the upgradable read lock until then: dropping it unfinished releases the lock.
#[must_use = "futures do nothing unless you `.await` or poll them; dropping this one releases the lock"]
pub struct Upgrade<'a, T: ?Sized> {
    raw: &'a RawRwLock,
    /// Structurally pinned.
    acquire: LockFuture<'a>,
    data: NonNull<T>,
    marker: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized> Future for Upgrade<'a, T> {
    type Output = RwLockWriteGuard<'a, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `acquire` is structurally pinned: it is never moved out of, and is
        // only reached through this projection; the other fields are plain data.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let acquire = unsafe { Pin::new_unchecked(&mut this.acquire) };
        match acquire.poll(cx) {
            Poll::Ready(()) => Poll::Ready(RwLockWriteGuard {
                raw: this.raw,
                data: this.data,
                marker: PhantomData,
            }),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: ?Sized> fmt::Debug for Upgrade<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgrade").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------
// Owned upgradable reads.

impl<T: ?Sized> RwLock<T> {
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
    pub async fn upgradable_read_owned(self: Arc<Self>) -> OwnedRwLockUpgradableReadGuard<T> {
        LockFuture::upgradable_read(&self.raw).await;
        // SAFETY: we own the upgradable read lock, handed to the guard.
        unsafe { OwnedRwLockUpgradableReadGuard::new(self) }
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
    pub fn try_upgradable_read_owned(
        self: Arc<Self>,
    ) -> Result<OwnedRwLockUpgradableReadGuard<T>, TryLockError> {
        if self.raw.try_upgradable_read() {
            // SAFETY: we own the upgradable read lock, handed to the guard.
            Ok(unsafe { OwnedRwLockUpgradableReadGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
    }
}

/// An owned [`RwLockUpgradableReadGuard`]: holds the `Arc` of its lock, so it can outlive
/// the scope that took it (and be `'static`).
///
/// Made by [`RwLock::upgradable_read_owned`], [`RwLock::try_upgradable_read_owned`] and
/// [`OwnedRwLockWriteGuard::downgrade_to_upgradable`].
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct OwnedRwLockUpgradableReadGuard<T: ?Sized> {
    lock: Arc<RwLock<T>>,
    data: NonNull<T>,
    marker: PhantomData<T>,
}

impl<T: ?Sized> OwnedRwLockUpgradableReadGuard<T> {
    /// # Safety
    ///
    /// The caller owns the upgradable read lock of `lock` and hands it to the guard.
    unsafe fn new(lock: Arc<RwLock<T>>) -> Self {
        // SAFETY: a pointer into a live cell is not null.
        let data = unsafe { NonNull::new_unchecked(cell_ptr_shared(&lock.data)) };
        Self {
            lock,
            data,
            marker: PhantomData,
        }
    }

    /// Takes the `Arc` out of a guard whose drop must not run (its lock is passed on).
    fn into_lock(this: Self) -> Arc<RwLock<T>> {
        let this = ManuallyDrop::new(this);
        // SAFETY: `this` is never dropped, so the `Arc` is moved out exactly once.
        unsafe { ptr::read(&this.lock) }
    }

    /// Upgrades to the write lock, as [`RwLockUpgradableReadGuard::upgrade`]. Cancel safe:
    /// dropping the future unfinished releases the lock altogether.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new(String::new()));
    /// let up = Arc::clone(&lock).upgradable_read_owned().await;
    /// OwnedRwLockUpgradableReadGuard::upgrade(up).await.push('x');
    /// assert_eq!(*lock.read().await, "x");
    /// # });
    /// ```
    pub async fn upgrade(this: Self) -> OwnedRwLockWriteGuard<T> {
        // Until the first poll the future holds the guard, whose drop releases the lock;
        // from here the acquire future owns it (and releases it if dropped unfinished).
        let lock = Self::into_lock(this);
        // SAFETY: the upgradable read lock goes to the acquire future.
        unsafe { LockFuture::upgrade(&lock.raw) }.await;
        // SAFETY: we own the write lock now, handed to the guard.
        unsafe { OwnedRwLockWriteGuard::new(lock) }
    }

    /// Upgrades to the write lock if no other reader holds the lock; otherwise gives the
    /// guard back.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// let mut w = OwnedRwLockUpgradableReadGuard::try_upgrade(up).unwrap();
    /// *w = 1;
    /// ```
    pub fn try_upgrade(this: Self) -> Result<OwnedRwLockWriteGuard<T>, Self> {
        // SAFETY: the guard owns the upgradable read lock.
        if unsafe { this.lock.raw.try_upgrade() } {
            let lock = Self::into_lock(this);
            // SAFETY: we own the write lock now, handed to the guard.
            Ok(unsafe { OwnedRwLockWriteGuard::new(lock) })
        } else {
            Err(this)
        }
    }

    /// Gives up the right to upgrade, as [`RwLockUpgradableReadGuard::downgrade`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// let r = OwnedRwLockUpgradableReadGuard::downgrade(up);
    /// assert!(lock.try_upgradable_read().is_ok());
    /// # drop(r);
    /// ```
    pub fn downgrade(this: Self) -> OwnedRwLockReadGuard<T> {
        let lock = Self::into_lock(this);
        // SAFETY: we own the upgradable read lock; the read lock it becomes goes to the
        // new guard.
        unsafe {
            lock.raw.downgrade_upgradable();
            OwnedRwLockReadGuard::new(lock)
        }
    }

    /// The lock this guard holds.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// assert!(Arc::ptr_eq(&lock, OwnedRwLockUpgradableReadGuard::rwlock(&up)));
    /// ```
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        &this.lock
    }
}

impl<T: ?Sized> OwnedRwLockWriteGuard<T> {
    /// Atomically turns the write lock into the upgradable read lock, as
    /// [`RwLockWriteGuard::downgrade_to_upgradable`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let w = Arc::clone(&lock).try_write_owned().unwrap();
    /// let up = OwnedRwLockWriteGuard::downgrade_to_upgradable(w);
    /// assert!(lock.try_read().is_ok());
    /// # drop(up);
    /// ```
    pub fn downgrade_to_upgradable(this: Self) -> OwnedRwLockUpgradableReadGuard<T> {
        let lock = OwnedRwLockWriteGuard::into_lock(this);
        // SAFETY: we own the write lock; the upgradable read lock it becomes goes to the
        // new guard.
        unsafe {
            lock.raw.downgrade_to_upgradable();
            OwnedRwLockUpgradableReadGuard::new(lock)
        }
    }
}

impl<T: ?Sized> Deref for OwnedRwLockUpgradableReadGuard<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard owns a read lock: no writer exists while it lives.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> Drop for OwnedRwLockUpgradableReadGuard<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard owns the upgradable read lock and gives it up; the `Arc` is
        // dropped only after this.
        unsafe { self.lock.raw.unlock_upgradable() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for OwnedRwLockUpgradableReadGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for OwnedRwLockUpgradableReadGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
