//! The owned guards, over an `Arc<RwLock<T>>`: [`OwnedRwLockReadGuard`],
//! [`OwnedRwLockWriteGuard`] and [`OwnedRwLockMappedWriteGuard`], and the `*_owned`
//! methods that make them.
//!
//! An owned guard holds a clone of the `Arc`, so it has no lifetime: it is `'static`
//! whenever `T` is, and can be moved into a spawned task. The guard releases the lock in
//! its `Drop`, before the `Arc` field is dropped, so the lock outlives its release.

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use super::{RwLock, TryLockError};
use crate::loom::{cell_ptr, cell_ptr_shared};
use crate::raw::LockFuture;

impl<T: ?Sized> RwLock<T> {
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
    pub async fn read_owned(self: Arc<Self>) -> OwnedRwLockReadGuard<T> {
        LockFuture::read(&self.raw).await;
        // SAFETY: we own a read lock of `self`, handed to the guard.
        unsafe { OwnedRwLockReadGuard::new(self) }
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
    pub async fn write_owned(self: Arc<Self>) -> OwnedRwLockWriteGuard<T> {
        LockFuture::write(&self.raw).await;
        // SAFETY: we own the write lock of `self`, handed to the guard.
        unsafe { OwnedRwLockWriteGuard::new(self) }
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
    pub fn try_read_owned(self: Arc<Self>) -> Result<OwnedRwLockReadGuard<T>, TryLockError> {
        if self.raw.try_read() {
            // SAFETY: we own a read lock of `self`, handed to the guard.
            Ok(unsafe { OwnedRwLockReadGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
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
    pub fn try_write_owned(self: Arc<Self>) -> Result<OwnedRwLockWriteGuard<T>, TryLockError> {
        if self.raw.try_write() {
            // SAFETY: we own the write lock of `self`, handed to the guard.
            Ok(unsafe { OwnedRwLockWriteGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
    }
}

/// Shared access to the value of a [`RwLock`] in an `Arc` (or to a part `U` of it, after
/// [`map`](Self::map)), released when dropped.
///
/// Made by [`RwLock::read_owned`], [`RwLock::try_read_owned`],
/// [`RwLock::blocking_read_owned`] and the downgrades of [`OwnedRwLockWriteGuard`]. It
/// holds the `Arc`, so it is `'static` when `T` and `U` are.
///
/// It is `Send` only when `T: Send + Sync` and `U: Sync` (as tokio's): unlike a borrowed
/// guard it may be the last owner of the `Arc`, and so drop the `T` on whatever thread
/// it is sent to. This does not compile:
///
/// ```compile_fail,E0277
/// use std::{cell::Cell, sync::Arc};
/// use async_rwsem::RwLock;
///
/// let lock = Arc::new(RwLock::new(Cell::new(1))); // `Cell` is `Send` but not `Sync`
/// let guard = lock.try_read_owned().unwrap();
/// std::thread::spawn(move || drop(guard));
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct OwnedRwLockReadGuard<T: ?Sized, U: ?Sized = T> {
    /// The lock, owned; a read lock of it is owned too.
    pub(crate) lock: Arc<RwLock<T>>,
    /// The value (or the part of it this guard was mapped to), inside `lock`.
    pub(crate) data: NonNull<U>,
    pub(crate) marker: PhantomData<T>,
}

impl<T: ?Sized> OwnedRwLockReadGuard<T> {
    /// # Safety
    ///
    /// The caller owns a read lock of `lock` and hands it to the guard.
    pub(crate) unsafe fn new(lock: Arc<RwLock<T>>) -> Self {
        // SAFETY: a pointer into a live cell is not null.
        let data = unsafe { NonNull::new_unchecked(cell_ptr_shared(&lock.data)) };
        Self {
            lock,
            data,
            marker: PhantomData,
        }
    }
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockReadGuard<T, U> {
    /// Takes the `Arc` out of a guard whose drop must not run (its lock is passed on).
    pub(crate) fn into_lock(this: Self) -> Arc<RwLock<T>> {
        let this = ManuallyDrop::new(this);
        // SAFETY: `this` is never dropped, so the `Arc` is moved out exactly once.
        unsafe { ptr::read(&this.lock) }
    }

    /// Makes a read guard for a part of the locked value. Cannot fail.
    ///
    /// An associated function (`OwnedRwLockReadGuard::map(guard, f)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockReadGuard, RwLock};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new((1, String::from("one"))));
    /// let name: OwnedRwLockReadGuard<(i32, String), String> =
    ///     OwnedRwLockReadGuard::map(lock.read_owned().await, |pair| &pair.1);
    /// assert_eq!(*name, "one");
    /// # });
    /// ```
    #[inline]
    pub fn map<F, V: ?Sized>(this: Self, f: F) -> OwnedRwLockReadGuard<T, V>
    where
        F: FnOnce(&U) -> &V,
    {
        let data = NonNull::from(f(&*this));
        OwnedRwLockReadGuard {
            lock: Self::into_lock(this),
            data,
            marker: PhantomData,
        }
    }

    /// Tries to make a read guard for a part of the locked value. If `f` returns `None`,
    /// the original guard is given back in `Err`, still holding the lock.
    ///
    /// An associated function (`OwnedRwLockReadGuard::try_map(guard, f)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockReadGuard, RwLock};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new(vec![1, 2, 3]));
    /// let guard = lock.read_owned().await;
    /// let guard = OwnedRwLockReadGuard::try_map(guard, |v| v.get(7)).unwrap_err();
    /// let third = OwnedRwLockReadGuard::try_map(guard, |v| v.get(2)).unwrap();
    /// assert_eq!(*third, 3);
    /// # });
    /// ```
    #[inline]
    pub fn try_map<F, V: ?Sized>(this: Self, f: F) -> Result<OwnedRwLockReadGuard<T, V>, Self>
    where
        F: FnOnce(&U) -> Option<&V>,
    {
        let data = match f(&*this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        Ok(OwnedRwLockReadGuard {
            lock: Self::into_lock(this),
            data,
            marker: PhantomData,
        })
    }

    /// The `Arc` of the lock this guard holds.
    ///
    /// An associated function (`OwnedRwLockReadGuard::rwlock(&guard)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let guard = Arc::clone(&lock).try_read_owned().unwrap();
    /// assert!(Arc::ptr_eq(&lock, OwnedRwLockReadGuard::rwlock(&guard)));
    /// ```
    #[inline]
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        &this.lock
    }
}

impl<T: ?Sized, U: ?Sized> Deref for OwnedRwLockReadGuard<T, U> {
    type Target = U;

    #[inline]
    fn deref(&self) -> &U {
        // SAFETY: the guard owns a read lock and the `Arc`: no writer exists while it
        // lives, and the value is alive.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized, U: ?Sized> Drop for OwnedRwLockReadGuard<T, U> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard owns a read lock and gives it up; the `Arc` field is dropped
        // only after this.
        unsafe { self.lock.raw.unlock_read() }
    }
}

impl<T: ?Sized, U: ?Sized + fmt::Debug> fmt::Debug for OwnedRwLockReadGuard<T, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized, U: ?Sized + fmt::Display> fmt::Display for OwnedRwLockReadGuard<T, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// Exclusive access to the value of a [`RwLock`] in an `Arc`, released when dropped.
///
/// Made by [`RwLock::write_owned`], [`RwLock::try_write_owned`] and
/// [`RwLock::blocking_write_owned`]. It holds the `Arc`, so it is `'static` when `T` is.
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct OwnedRwLockWriteGuard<T: ?Sized> {
    /// The lock, owned; its write lock is owned too.
    pub(crate) lock: Arc<RwLock<T>>,
    /// The whole value, inside `lock` (a write guard is never mapped: see
    /// [`RwLockWriteGuard`](crate::RwLockWriteGuard)).
    pub(crate) data: NonNull<T>,
    pub(crate) marker: PhantomData<T>,
}

impl<T: ?Sized> OwnedRwLockWriteGuard<T> {
    /// # Safety
    ///
    /// The caller owns the write lock of `lock` and hands it to the guard.
    pub(crate) unsafe fn new(lock: Arc<RwLock<T>>) -> Self {
        // SAFETY: a pointer into a live cell is not null.
        let data = unsafe { NonNull::new_unchecked(cell_ptr(&lock.data)) };
        Self {
            lock,
            data,
            marker: PhantomData,
        }
    }

    /// Takes the `Arc` out of a guard whose drop must not run (its lock is passed on).
    pub(crate) fn into_lock(this: Self) -> Arc<RwLock<T>> {
        let this = ManuallyDrop::new(this);
        // SAFETY: `this` is never dropped, so the `Arc` is moved out exactly once.
        unsafe { ptr::read(&this.lock) }
    }

    /// Atomically turns the write lock into a read lock, as [`RwLockWriteGuard::downgrade`]
    /// (the queued readers get in beside it if a reader heads the queue, none if a writer
    /// does).
    ///
    /// [`RwLockWriteGuard::downgrade`]: crate::RwLockWriteGuard::downgrade
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut w = Arc::clone(&lock).write_owned().await;
    /// *w = 2;
    /// let r = w.downgrade();
    /// assert_eq!(*lock.read().await, 2);
    /// assert!(lock.try_write().is_err());
    /// assert_eq!(*r, 2);
    /// # });
    /// ```
    pub fn downgrade(self) -> OwnedRwLockReadGuard<T> {
        let data = self.data;
        let lock = Self::into_lock(self);
        // SAFETY: we own the write lock; after the call we own a read lock, which the new
        // guard takes over (the write guard's drop did not run).
        unsafe { lock.raw.downgrade() };
        OwnedRwLockReadGuard {
            lock,
            data,
            marker: PhantomData,
        }
    }

    /// Makes a write guard for a part of the locked value. Cannot fail. The new guard, an
    /// [`OwnedRwLockMappedWriteGuard`], cannot be downgraded (see
    /// [`RwLockWriteGuard::map`](crate::RwLockWriteGuard::map) for why); use
    /// [`downgrade_map`](Self::downgrade_map) for that.
    ///
    /// An associated function (`OwnedRwLockWriteGuard::map(guard, f)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockWriteGuard, RwLock};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new((1, 2)));
    /// let mut second = OwnedRwLockWriteGuard::map(Arc::clone(&lock).write_owned().await, |p| &mut p.1);
    /// *second = 20;
    /// drop(second);
    /// assert_eq!(*lock.read().await, (1, 20));
    /// # });
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(mut this: Self, f: F) -> OwnedRwLockMappedWriteGuard<T, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        let data = NonNull::from(f(&mut *this));
        OwnedRwLockMappedWriteGuard {
            lock: Self::into_lock(this),
            data,
            marker: PhantomData,
        }
    }

    /// Tries to make a write guard for a part of the locked value. If `f` returns `None`,
    /// the original guard is given back in `Err`, still holding the lock.
    ///
    /// An associated function (`OwnedRwLockWriteGuard::try_map(guard, f)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockWriteGuard, RwLock};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new(vec![1, 2, 3]));
    /// let w = Arc::clone(&lock).write_owned().await;
    /// let w = OwnedRwLockWriteGuard::try_map(w, |v| v.get_mut(7)).unwrap_err();
    /// *OwnedRwLockWriteGuard::try_map(w, |v| v.get_mut(0)).unwrap() = 10;
    /// assert_eq!(*lock.read().await, [10, 2, 3]);
    /// # });
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(
        mut this: Self,
        f: F,
    ) -> Result<OwnedRwLockMappedWriteGuard<T, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        let data = match f(&mut *this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        Ok(OwnedRwLockMappedWriteGuard {
            lock: Self::into_lock(this),
            data,
            marker: PhantomData,
        })
    }

    /// Turns the guard into an [`OwnedRwLockMappedWriteGuard`] of the whole value.
    ///
    /// An associated function (`OwnedRwLockWriteGuard::into_mapped(guard)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let w = Arc::clone(&lock).try_write_owned().unwrap();
    /// let mut m: OwnedRwLockMappedWriteGuard<i32> = OwnedRwLockWriteGuard::into_mapped(w);
    /// *m += 1;
    /// drop(m);
    /// assert_eq!(*lock.try_read().unwrap(), 2);
    /// ```
    #[inline]
    pub fn into_mapped(this: Self) -> OwnedRwLockMappedWriteGuard<T> {
        Self::map(this, |value| value)
    }

    /// Maps the guard to a part of the value and downgrades it to a read guard of that
    /// part in one atomic step, as
    /// [`RwLockWriteGuard::downgrade_map`](crate::RwLockWriteGuard::downgrade_map).
    ///
    /// An associated function (`OwnedRwLockWriteGuard::downgrade_map(guard, f)`), not a
    /// method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockWriteGuard, RwLock};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new((1, 2)));
    /// let w = Arc::clone(&lock).write_owned().await;
    /// let second = OwnedRwLockWriteGuard::downgrade_map(w, |p| &p.1);
    /// assert_eq!(*second, 2);
    /// assert_eq!(lock.read().await.0, 1);
    /// assert!(lock.try_write().is_err());
    /// # });
    /// ```
    #[inline]
    pub fn downgrade_map<F, U: ?Sized>(this: Self, f: F) -> OwnedRwLockReadGuard<T, U>
    where
        F: FnOnce(&T) -> &U,
    {
        let data = NonNull::from(f(&*this));
        let lock = Self::into_lock(this);
        // SAFETY: we own the write lock; after the call we own a read lock, which the new
        // guard takes over (the write guard's drop did not run).
        unsafe { lock.raw.downgrade() };
        OwnedRwLockReadGuard {
            lock,
            data,
            marker: PhantomData,
        }
    }

    /// As [`downgrade_map`](Self::downgrade_map) if `f` returns `Some`; if it returns
    /// `None` the write guard is given back in `Err`, still holding the write lock.
    ///
    /// An associated function (`OwnedRwLockWriteGuard::try_downgrade_map(guard, f)`), not
    /// a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockWriteGuard, RwLock};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = Arc::new(RwLock::new(vec![1, 2, 3]));
    /// let w = Arc::clone(&lock).write_owned().await;
    /// let w = OwnedRwLockWriteGuard::try_downgrade_map(w, |v| v.get(7)).unwrap_err();
    /// assert!(lock.try_read().is_err());
    /// let last = OwnedRwLockWriteGuard::try_downgrade_map(w, |v| v.last()).unwrap();
    /// assert_eq!(*last, 3);
    /// assert!(lock.try_read().is_ok());
    /// # });
    /// ```
    #[inline]
    pub fn try_downgrade_map<F, U: ?Sized>(
        this: Self,
        f: F,
    ) -> Result<OwnedRwLockReadGuard<T, U>, Self>
    where
        F: FnOnce(&T) -> Option<&U>,
    {
        let data = match f(&*this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        let lock = Self::into_lock(this);
        // SAFETY: as in `downgrade_map`.
        unsafe { lock.raw.downgrade() };
        Ok(OwnedRwLockReadGuard {
            lock,
            data,
            marker: PhantomData,
        })
    }

    /// The `Arc` of the lock this guard holds.
    ///
    /// An associated function (`OwnedRwLockWriteGuard::rwlock(&guard)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let guard = Arc::clone(&lock).try_write_owned().unwrap();
    /// assert!(Arc::ptr_eq(&lock, OwnedRwLockWriteGuard::rwlock(&guard)));
    /// ```
    #[inline]
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        &this.lock
    }
}

impl<T: ?Sized> Deref for OwnedRwLockWriteGuard<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard owns the write lock and the `Arc`.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> DerefMut for OwnedRwLockWriteGuard<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard owns the write lock and the `Arc`; `&mut self` is unique.
        unsafe { self.data.as_mut() }
    }
}

impl<T: ?Sized> Drop for OwnedRwLockWriteGuard<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard owns the write lock and gives it up; the `Arc` field is
        // dropped only after this.
        unsafe { self.lock.raw.unlock_write() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for OwnedRwLockWriteGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for OwnedRwLockWriteGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// Exclusive access to a part `U` of the value of a [`RwLock`] in an `Arc`, made by
/// [`OwnedRwLockWriteGuard::map`] and released when dropped. Like
/// [`RwLockMappedWriteGuard`](crate::RwLockMappedWriteGuard) it has no `downgrade`.
///
/// ```compile_fail,E0599
/// use std::sync::Arc;
/// use async_rwsem::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
///
/// let lock = Arc::new(RwLock::new((1, 2)));
/// let part = OwnedRwLockWriteGuard::map(lock.try_write_owned().unwrap(), |p| &mut p.0);
/// let shared = OwnedRwLockMappedWriteGuard::downgrade(part);
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct OwnedRwLockMappedWriteGuard<T: ?Sized, U: ?Sized = T> {
    /// The lock, owned; its write lock is owned too.
    pub(crate) lock: Arc<RwLock<T>>,
    /// The part of the value this guard was mapped to, inside `lock`.
    pub(crate) data: NonNull<U>,
    /// Invariant in `U` (the guard hands out `&mut U`); `T` is invariant through `lock`.
    pub(crate) marker: PhantomData<*mut U>,
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockMappedWriteGuard<T, U> {
    /// Takes the `Arc` out of a guard whose drop must not run (its lock is passed on).
    pub(crate) fn into_lock(this: Self) -> Arc<RwLock<T>> {
        let this = ManuallyDrop::new(this);
        // SAFETY: `this` is never dropped, so the `Arc` is moved out exactly once.
        unsafe { ptr::read(&this.lock) }
    }

    /// Maps the guard further, to a part of its part. Cannot fail.
    ///
    /// An associated function (`OwnedRwLockMappedWriteGuard::map(guard, f)`), not a method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(((1, 2), 3)));
    /// let outer = OwnedRwLockWriteGuard::map(Arc::clone(&lock).try_write_owned().unwrap(), |v| &mut v.0);
    /// *OwnedRwLockMappedWriteGuard::map(outer, |v| &mut v.0) = 10;
    /// assert_eq!(*lock.try_read().unwrap(), ((10, 2), 3));
    /// ```
    #[inline]
    pub fn map<F, V: ?Sized>(mut this: Self, f: F) -> OwnedRwLockMappedWriteGuard<T, V>
    where
        F: FnOnce(&mut U) -> &mut V,
    {
        let data = NonNull::from(f(&mut *this));
        OwnedRwLockMappedWriteGuard {
            lock: Self::into_lock(this),
            data,
            marker: PhantomData,
        }
    }

    /// Tries to map the guard further. If `f` returns `None`, the original guard is given
    /// back in `Err`, still holding the lock.
    ///
    /// An associated function (`OwnedRwLockMappedWriteGuard::try_map(guard, f)`), not a
    /// method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new((vec![1, 2], 3)));
    /// let list = OwnedRwLockWriteGuard::map(Arc::clone(&lock).try_write_owned().unwrap(), |v| &mut v.0);
    /// let list = OwnedRwLockMappedWriteGuard::try_map(list, |l| l.get_mut(9)).unwrap_err();
    /// *OwnedRwLockMappedWriteGuard::try_map(list, |l| l.first_mut()).unwrap() = 5;
    /// assert_eq!(lock.try_read().unwrap().0, [5, 2]);
    /// ```
    #[inline]
    pub fn try_map<F, V: ?Sized>(
        mut this: Self,
        f: F,
    ) -> Result<OwnedRwLockMappedWriteGuard<T, V>, Self>
    where
        F: FnOnce(&mut U) -> Option<&mut V>,
    {
        let data = match f(&mut *this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        Ok(OwnedRwLockMappedWriteGuard {
            lock: Self::into_lock(this),
            data,
            marker: PhantomData,
        })
    }

    /// The `Arc` of the lock this guard holds.
    ///
    /// An associated function (`OwnedRwLockMappedWriteGuard::rwlock(&guard)`), not a
    /// method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new((1, 2)));
    /// let w = OwnedRwLockWriteGuard::map(Arc::clone(&lock).try_write_owned().unwrap(), |p| &mut p.1);
    /// assert!(Arc::ptr_eq(&lock, OwnedRwLockMappedWriteGuard::rwlock(&w)));
    /// ```
    #[inline]
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        &this.lock
    }
}

impl<T: ?Sized, U: ?Sized> Deref for OwnedRwLockMappedWriteGuard<T, U> {
    type Target = U;

    #[inline]
    fn deref(&self) -> &U {
        // SAFETY: the guard owns the write lock and the `Arc`.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized, U: ?Sized> DerefMut for OwnedRwLockMappedWriteGuard<T, U> {
    #[inline]
    fn deref_mut(&mut self) -> &mut U {
        // SAFETY: the guard owns the write lock and the `Arc`; `&mut self` is unique.
        unsafe { self.data.as_mut() }
    }
}

impl<T: ?Sized, U: ?Sized> Drop for OwnedRwLockMappedWriteGuard<T, U> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard owns the write lock and gives it up; the `Arc` field is
        // dropped only after this.
        unsafe { self.lock.raw.unlock_write() }
    }
}

impl<T: ?Sized, U: ?Sized + fmt::Debug> fmt::Debug for OwnedRwLockMappedWriteGuard<T, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized, U: ?Sized + fmt::Display> fmt::Display for OwnedRwLockMappedWriteGuard<T, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
