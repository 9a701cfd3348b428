//! The owned guards, over an `Arc<RwLock<T>>`: [`OwnedRwLockReadGuard`],
//! [`OwnedRwLockWriteGuard`] and [`OwnedRwLockMappedWriteGuard`], with the same methods as
//! the borrowed ones and `rwlock` (the `*_owned` methods that make them are beside the
//! borrowed acquires, in `src/rwlock.rs`).
//!
//! An owned guard's [token](super::token) holds a clone of the `Arc`, so the guard has no
//! lifetime: it is `'static` whenever `T` is, and can be moved into a spawned task. The
//! token releases the lock before it drops the `Arc`, so the lock outlives its release.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

use super::token::{OwnedToken, Read, Write};
use super::upgradable::OwnedRwLockUpgradableReadGuard;
use super::RwLock;

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
    /// The `Arc` of the lock, and a read lock of it.
    token: OwnedToken<T, Read>,
    /// The value (or the part of it this guard was mapped to), inside the lock.
    data: NonNull<U>,
    marker: PhantomData<T>,
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockReadGuard<T, U> {
    /// The one constructor of an owned read guard.
    ///
    /// # Safety
    ///
    /// `data` can be read for as long as `token` owns its read lock: it points to the
    /// value of that lock, or to a part of it, or to something that outlives the lock.
    #[inline]
    pub(crate) unsafe fn new(token: OwnedToken<T, Read>, data: NonNull<U>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
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
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; the lock stays owned, by the token that moves to the new guard.
        unsafe { OwnedRwLockReadGuard::new(this.token, data) }
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
        // SAFETY: as in `map`.
        Ok(unsafe { OwnedRwLockReadGuard::new(this.token, data) })
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
        this.token.lock()
    }
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockReadGuard<T, U> {
    /// Is a writer (or an upgrade) queued for this lock? As
    /// [`RwLockReadGuard::writer_waiting`](crate::RwLockReadGuard::writer_waiting), which
    /// says what to do with the answer under each policy: one load of the count word.
    ///
    /// An associated function (`OwnedRwLockReadGuard::writer_waiting(&guard)`), not a
    /// method.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockReadGuard, RwLock};
    /// use tokio_test::{assert_pending, task::spawn};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let guard = Arc::clone(&lock).try_read_owned().unwrap();
    /// let mut writer = spawn(lock.write());
    /// assert!(!OwnedRwLockReadGuard::writer_waiting(&guard));
    /// assert_pending!(writer.poll()); // behind a reader it queues at once
    /// assert!(OwnedRwLockReadGuard::writer_waiting(&guard));
    /// ```
    #[inline]
    pub fn writer_waiting(this: &Self) -> bool {
        this.token.lock().raw.writer_queued()
    }

    /// Releases the read lock fairly: if anyone is queued, the head of the queue is handed
    /// the lock, and no task arriving meanwhile takes it first, then drops the guard's
    /// `Arc` (see [`RwLockReadGuard::unlock_fair`](crate::RwLockReadGuard::unlock_fair)).
    ///
    /// An associated function (`OwnedRwLockReadGuard::unlock_fair(guard)`), not a method,
    /// so that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let guard = Arc::clone(&lock).try_read_owned().unwrap();
    /// OwnedRwLockReadGuard::unlock_fair(guard);
    /// assert!(!lock.is_locked());
    /// assert_eq!(Arc::strong_count(&lock), 1); // the guard's `Arc` is gone too
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
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
    /// The `Arc` of the lock, and its write lock.
    token: OwnedToken<T, Write>,
    /// The whole value, inside the lock (a write guard is never mapped: see
    /// [`RwLockWriteGuard`](crate::RwLockWriteGuard)).
    data: NonNull<T>,
    marker: PhantomData<T>,
}

impl<T: ?Sized> OwnedRwLockWriteGuard<T> {
    /// The one constructor of an owned write guard.
    ///
    /// # Safety
    ///
    /// `data` points to the whole value of the lock whose write lock `token` owns.
    #[inline]
    pub(crate) unsafe fn new(token: OwnedToken<T, Write>, data: NonNull<T>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
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
        // SAFETY: the whole value, under the read lock the write lock became.
        unsafe { OwnedRwLockReadGuard::new(self.token.downgrade(), self.data) }
    }

    /// Atomically turns the write lock into the upgradable read lock, as
    /// [`RwLockWriteGuard::downgrade_to_upgradable`].
    ///
    /// [`RwLockWriteGuard::downgrade_to_upgradable`]:
    ///     crate::RwLockWriteGuard::downgrade_to_upgradable
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
        // SAFETY: the whole value, under the upgradable read lock the write lock became.
        unsafe {
            OwnedRwLockUpgradableReadGuard::new(this.token.downgrade_to_upgradable(), this.data)
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
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; the lock stays owned, by the token that moves to the new guard.
        unsafe { OwnedRwLockMappedWriteGuard::new(this.token, data) }
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
        // SAFETY: as in `map`.
        Ok(unsafe { OwnedRwLockMappedWriteGuard::new(this.token, data) })
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
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; readable under the read lock the write lock became.
        unsafe { OwnedRwLockReadGuard::new(this.token.downgrade(), data) }
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
        // SAFETY: as in `downgrade_map`.
        Ok(unsafe { OwnedRwLockReadGuard::new(this.token.downgrade(), data) })
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
        this.token.lock()
    }
}

impl<T: ?Sized> OwnedRwLockWriteGuard<T> {
    /// Releases the write lock fairly: if anyone is queued, the head of the queue is handed
    /// the lock, and no task arriving meanwhile takes it first, then drops the guard's
    /// `Arc` (see [`RwLockWriteGuard::unlock_fair`](crate::RwLockWriteGuard::unlock_fair)).
    ///
    /// An associated function (`OwnedRwLockWriteGuard::unlock_fair(guard)`), not a method,
    /// so that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let guard = Arc::clone(&lock).try_write_owned().unwrap();
    /// OwnedRwLockWriteGuard::unlock_fair(guard);
    /// assert!(!lock.is_locked());
    /// assert_eq!(Arc::strong_count(&lock), 1);
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
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
    /// The `Arc` of the lock, and its write lock.
    token: OwnedToken<T, Write>,
    /// The part of the value this guard was mapped to, inside the lock.
    data: NonNull<U>,
    /// Invariant in `U` (the guard hands out `&mut U`); `T` is invariant through the
    /// token's `Arc`.
    marker: PhantomData<*mut U>,
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockMappedWriteGuard<T, U> {
    /// The one constructor of an owned mapped write guard.
    ///
    /// # Safety
    ///
    /// `data` can be read and written for as long as `token` owns its write lock: it
    /// points to the value of that lock, or to a part of it, or to something that outlives
    /// the lock.
    #[inline]
    pub(crate) unsafe fn new(token: OwnedToken<T, Write>, data: NonNull<U>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
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
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; the lock stays owned, by the token that moves to the new guard.
        unsafe { OwnedRwLockMappedWriteGuard::new(this.token, data) }
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
        // SAFETY: as in `map`.
        Ok(unsafe { OwnedRwLockMappedWriteGuard::new(this.token, data) })
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
        this.token.lock()
    }
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockMappedWriteGuard<T, U> {
    /// Releases the write lock fairly: if anyone is queued, the head of the queue is handed
    /// the lock, and no task arriving meanwhile takes it first, then drops the guard's
    /// `Arc` (see [`RwLockWriteGuard::unlock_fair`](crate::RwLockWriteGuard::unlock_fair)).
    ///
    /// An associated function (`OwnedRwLockMappedWriteGuard::unlock_fair(guard)`), not a
    /// method, so that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new((1, 2)));
    /// let guard = Arc::clone(&lock).try_write_owned().unwrap();
    /// let second = OwnedRwLockWriteGuard::map(guard, |pair| &mut pair.1);
    /// OwnedRwLockMappedWriteGuard::unlock_fair(second);
    /// assert!(!lock.is_locked());
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
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
