//! The borrowed guards: [`RwLockReadGuard`], [`RwLockWriteGuard`] and
//! [`RwLockMappedWriteGuard`], with their `map`, `try_map`, `downgrade`, `downgrade_map`
//! and `downgrade_to_upgradable`.
//!
//! Every guard is a [lock token](super::token), which owns the lock, and a pointer to the
//! part of the value it gives access to. Mapping changes the pointer only: the token moves
//! to the new guard, and the lock is released once, when the last guard in the chain
//! drops it.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::token::{BorrowedToken, Read, Write};
use super::upgradable::RwLockUpgradableReadGuard;

/// Shared access to the value of a [`RwLock`](crate::RwLock) (or a part of it, after
/// [`map`](RwLockReadGuard::map)), released when dropped.
///
/// Made by [`RwLock::read`](crate::RwLock::read),
/// [`RwLock::try_read`](crate::RwLock::try_read),
/// [`RwLock::blocking_read`](crate::RwLock::blocking_read),
/// [`RwLockWriteGuard::downgrade`] and [`RwLockWriteGuard::downgrade_map`].
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    /// A read lock of the lock.
    token: BorrowedToken<'a, Read>,
    /// The value (or the part of it this guard was mapped to), readable while the read
    /// lock is owned.
    data: NonNull<T>,
    marker: PhantomData<&'a T>,
}

impl<'a, T: ?Sized> RwLockReadGuard<'a, T> {
    /// The one constructor of a read guard.
    ///
    /// # Safety
    ///
    /// `data` can be read for as long as `token` owns its read lock: it points to the
    /// value of that lock, or to a part of it, or to something that outlives the lock.
    #[inline]
    pub(crate) unsafe fn new(token: BorrowedToken<'a, Read>, data: NonNull<T>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
    }

    /// Makes a read guard for a part of the locked value. Cannot fail: the lock is already
    /// held, and stays held by the new guard.
    ///
    /// An associated function (`RwLockReadGuard::map(guard, f)`), not a method, so that it
    /// does not hide a method of the same name on the value.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockReadGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new((1, String::from("one")));
    /// let name = RwLockReadGuard::map(lock.read().await, |pair| &pair.1);
    /// assert_eq!(*name, "one");
    /// assert!(lock.try_write().is_err()); // still locked for reading
    /// drop(name);
    /// assert!(lock.try_write().is_ok());
    /// # });
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(this: Self, f: F) -> RwLockReadGuard<'a, U>
    where
        F: FnOnce(&T) -> &U,
    {
        let data = NonNull::from(f(&*this));
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; the lock stays owned, by the token that moves to the new guard.
        unsafe { RwLockReadGuard::new(this.token, data) }
    }

    /// Tries to make a read guard for a part of the locked value. If `f` returns `None`,
    /// the original guard is given back in `Err`, still holding the lock.
    ///
    /// An associated function (`RwLockReadGuard::try_map(guard, f)`), not a method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockReadGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(vec![1, 2, 3]);
    /// let guard = lock.read().await;
    /// let guard = RwLockReadGuard::try_map(guard, |v| v.get(7)).unwrap_err();
    /// let third = RwLockReadGuard::try_map(guard, |v| v.get(2)).unwrap();
    /// assert_eq!(*third, 3);
    /// # });
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(this: Self, f: F) -> Result<RwLockReadGuard<'a, U>, Self>
    where
        F: FnOnce(&T) -> Option<&U>,
    {
        let data = match f(&*this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        // SAFETY: as in `map`.
        Ok(unsafe { RwLockReadGuard::new(this.token, data) })
    }
}

impl<T: ?Sized> RwLockReadGuard<'_, T> {
    /// Is a writer (or an upgrade of the upgradable read lock) queued for this lock? For a
    /// long section under a read lock that can stop and go on later: check it every so
    /// often, and on `true` release the guard, let the writer in, and lock again
    /// (`examples/long_reader.rs` resumes a scan where it stopped).
    ///
    /// One relaxed load of the lock's count word, whose `WRITER_QUEUED` bit the wait queue
    /// keeps (set by the first writer or upgrade to queue, cleared when the last one
    /// leaves the queue; queued readers alone leave it clear): a snapshot, perhaps stale
    /// by the time it is used. A writer on its way to the queue, spinning or yielding to
    /// its executor (the policy's `writer_spin` and `writer_yields`: microseconds and a
    /// few polls), is not seen until it queues.
    ///
    /// How the writer gets in once told (the tests in `tests/writer_waiting.rs` show each):
    /// - [`unlock_fair`](Self::unlock_fair), then lock again: the queue's head is handed
    ///   the lock as soon as the last reader is out, and the new acquire queues behind
    ///   it, whatever the policy.
    /// - A plain drop, then lock again, under the default [`Policy`](crate::Policy): the
    ///   release of the last reader wakes the writer; an acquire that comes before the
    ///   woken writer runs takes the lock back (a reader steals a free lock when no
    ///   handoff is pending), and the writer, finding it taken, asks for the handoff at
    ///   once: the next release hands it the lock. So it gets in at the second release at
    ///   the latest.
    /// - A plain drop under `strict_order(true)` or a zero `handoff_timeout` (as in
    ///   [`Policy::fifo`](crate::Policy::fifo)): the new acquire queues behind the writer,
    ///   which gets in at the first release.
    /// - A plain drop with the handoff off (`handoff_timeout(Duration::MAX)`): an acquire
    ///   may take the lock back at every release, and the writer may never get in. Use
    ///   `unlock_fair` there.
    ///
    /// An associated function (`RwLockReadGuard::writer_waiting(&guard)`), not a method,
    /// so that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockReadGuard};
    /// use tokio_test::{assert_pending, assert_ready, task::spawn};
    ///
    /// let lock = RwLock::new(0);
    /// let guard = lock.try_read().unwrap();
    /// assert!(!RwLockReadGuard::writer_waiting(&guard));
    /// let mut writer = spawn(lock.write());
    /// // It spins, then queues behind the reader at once: a yield could not win while
    /// // readers own the lock (see `Policy::writer_yields`).
    /// assert_pending!(writer.poll());
    /// assert!(RwLockReadGuard::writer_waiting(&guard));
    /// RwLockReadGuard::unlock_fair(guard); // hands the writer the lock
    /// *assert_ready!(writer.poll()) += 1;
    /// ```
    #[inline]
    pub fn writer_waiting(this: &Self) -> bool {
        this.token.lock().writer_queued()
    }

    /// Releases the read lock fairly, as `parking_lot`'s `unlock_fair`: if anyone is
    /// queued, the head of the queue is handed the lock as soon as it is free (at once if
    /// this was the last reader), and no task arriving meanwhile takes it first, whatever
    /// the lock's policy. Dropping the guard instead releases it as usual: arrivals may
    /// take the lock before the woken head runs, within the policy's handoff timeout.
    ///
    /// An associated function (`RwLockReadGuard::unlock_fair(guard)`), not a method, so
    /// that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{Policy, RwLock, RwLockReadGuard};
    /// use tokio_test::{assert_pending, assert_ready, task::spawn};
    ///
    /// // A policy that never hands the lock off by itself.
    /// let policy = Policy::new().writer_yields(0).handoff_timeout(Duration::MAX);
    /// let lock = RwLock::with_policy(0, policy);
    /// let guard = lock.try_read().unwrap();
    /// let mut writer = spawn(lock.write());
    /// assert_pending!(writer.poll()); // queued behind the reader
    /// RwLockReadGuard::unlock_fair(guard);
    /// // The queued writer owns the lock: a reader arriving now waits behind it.
    /// let mut reader = spawn(lock.read());
    /// assert_pending!(reader.poll());
    /// *assert_ready!(writer.poll()) += 1;
    /// assert_eq!(*assert_ready!(reader.poll()), 1);
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard owns a read lock: no writer exists while it lives.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// Exclusive access to the value of a [`RwLock`](crate::RwLock), released when dropped.
///
/// Made by [`RwLock::write`](crate::RwLock::write),
/// [`RwLock::try_write`](crate::RwLock::try_write) and
/// [`RwLock::blocking_write`](crate::RwLock::blocking_write).
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    /// The write lock of the lock.
    token: BorrowedToken<'a, Write>,
    /// The whole value: a write guard is never mapped (mapping makes a
    /// [`RwLockMappedWriteGuard`]), so that [`downgrade`](Self::downgrade) can only ever
    /// share what nobody else holds exclusively.
    data: NonNull<T>,
    marker: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// The one constructor of a write guard.
    ///
    /// # Safety
    ///
    /// `data` points to the whole value of the lock whose write lock `token` owns.
    #[inline]
    pub(crate) unsafe fn new(token: BorrowedToken<'a, Write>, data: NonNull<T>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
    }

    /// Atomically turns the write lock into a read lock. Nobody can take the write lock in
    /// between.
    ///
    /// Which waiters get in beside it depends on the head of the queue, as in the
    /// kernel's `downgrade_write`: if the head is a reader, every queued reader (up to the
    /// policy's `reader_wake_batch`) is granted the read lock at once, skipping queued
    /// writers (and at most one queued upgradable reader); if the head is a writer,
    /// nobody is: the readers queued behind it stay behind it, and it takes the lock when
    /// the read locks are released.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut w = lock.write().await;
    /// *w = 2;
    /// let r = w.downgrade();
    /// // Other readers get in now; a writer would wait for `r`.
    /// assert_eq!(*lock.read().await, 2);
    /// assert!(lock.try_write().is_err());
    /// assert_eq!(*r, 2);
    /// # }
    /// ```
    ///
    /// With a writer at the head of the queue, the readers behind it wait for it:
    ///
    /// ```
    /// use async_rwsem::{Policy, RwLock};
    /// use tokio_test::{assert_pending, task::spawn};
    ///
    /// // Writers queue on their first poll (no yield), to keep the example short.
    /// let lock = RwLock::with_policy(0, Policy::new().writer_yields(0));
    /// let w = lock.try_write().unwrap();
    /// let mut writer = spawn(lock.write());
    /// let mut reader = spawn(lock.read());
    /// assert_pending!(writer.poll());
    /// assert_pending!(reader.poll());
    /// let r = w.downgrade();
    /// assert!(!reader.is_woken()); // behind the queued writer
    /// drop(r);
    /// // The free lock lets a few queued readers pass the writer once; the writer is next.
    /// assert!(reader.is_woken() && !writer.is_woken());
    /// drop(reader.poll());
    /// assert!(writer.is_woken());
    /// # drop(writer.poll());
    /// ```
    pub fn downgrade(self) -> RwLockReadGuard<'a, T> {
        // SAFETY: the whole value, under the read lock the write lock became.
        unsafe { RwLockReadGuard::new(self.token.downgrade(), self.data) }
    }

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
        // SAFETY: the whole value, under the upgradable read lock the write lock became.
        unsafe { RwLockUpgradableReadGuard::new(this.token.downgrade_to_upgradable(), this.data) }
    }

    /// Makes a write guard for a part of the locked value. Cannot fail: the lock is
    /// already held, and stays held by the new guard.
    ///
    /// The new guard is a [`RwLockMappedWriteGuard`], which cannot be downgraded: the
    /// closure sees `&mut T`, and may reach a part that only exclusive access may see
    /// without synchronisation (`Cell::get_mut`, `Mutex::get_mut`); downgraded, other
    /// readers could change that part through `&T` while this guard reads it (the
    /// unsoundness tokio fixed with the same separate type). To map and downgrade, use
    /// [`downgrade_map`](Self::downgrade_map), whose closure sees `&T` only.
    ///
    /// An associated function (`RwLockWriteGuard::map(guard, f)`), not a method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockWriteGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new((1, String::from("one")));
    /// {
    ///     let mut name = RwLockWriteGuard::map(lock.write().await, |pair| &mut pair.1);
    ///     name.push_str("-and-a-bit");
    /// }
    /// assert_eq!(lock.read().await.1, "one-and-a-bit");
    /// # });
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(mut this: Self, f: F) -> RwLockMappedWriteGuard<'a, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        let data = NonNull::from(f(&mut *this));
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; the lock stays owned, by the token that moves to the new guard.
        unsafe { RwLockMappedWriteGuard::new(this.token, data) }
    }

    /// Tries to make a write guard for a part of the locked value. If `f` returns `None`,
    /// the original guard is given back in `Err`, still holding the lock (and still able
    /// to [`downgrade`](Self::downgrade)).
    ///
    /// An associated function (`RwLockWriteGuard::try_map(guard, f)`), not a method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockWriteGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(vec![1, 2, 3]);
    /// let guard = lock.write().await;
    /// let guard = RwLockWriteGuard::try_map(guard, |v| v.get_mut(7)).unwrap_err();
    /// let mut third = RwLockWriteGuard::try_map(guard, |v| v.get_mut(2)).unwrap();
    /// *third = 30;
    /// drop(third);
    /// assert_eq!(*lock.read().await, [1, 2, 30]);
    /// # });
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(
        mut this: Self,
        f: F,
    ) -> Result<RwLockMappedWriteGuard<'a, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        let data = match f(&mut *this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        // SAFETY: as in `map`.
        Ok(unsafe { RwLockMappedWriteGuard::new(this.token, data) })
    }

    /// Turns the guard into a [`RwLockMappedWriteGuard`] of the whole value (for code that
    /// takes mapped guards only).
    ///
    /// An associated function (`RwLockWriteGuard::into_mapped(guard)`), not a method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
    ///
    /// fn bump(mut g: RwLockMappedWriteGuard<'_, u32>) {
    ///     *g += 1;
    /// }
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(1);
    /// bump(RwLockWriteGuard::into_mapped(lock.write().await));
    /// assert_eq!(*lock.read().await, 2);
    /// # });
    /// ```
    #[inline]
    pub fn into_mapped(this: Self) -> RwLockMappedWriteGuard<'a, T> {
        Self::map(this, |value| value)
    }

    /// Maps the guard to a part of the value and downgrades it to a read guard of that
    /// part, in one atomic step: nobody can take the write lock in between, and the queued
    /// readers get in beside it as for [`downgrade`](Self::downgrade) (all of them if a
    /// reader heads the queue, none if a writer does).
    ///
    /// The closure sees the value shared (`&T`), so no exclusive borrow can outlive the
    /// downgrade.
    ///
    /// An associated function (`RwLockWriteGuard::downgrade_map(guard, f)`), not a
    /// method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockWriteGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new((0, String::new()));
    /// let mut w = lock.write().await;
    /// w.1.push_str("ready");
    /// let name = RwLockWriteGuard::downgrade_map(w, |pair| &pair.1);
    /// assert_eq!(*name, "ready");
    /// assert_eq!(lock.read().await.1, "ready"); // readers share the lock now
    /// assert!(lock.try_write().is_err());
    /// # });
    /// ```
    #[inline]
    pub fn downgrade_map<F, U: ?Sized>(this: Self, f: F) -> RwLockReadGuard<'a, U>
    where
        F: FnOnce(&T) -> &U,
    {
        let data = NonNull::from(f(&*this));
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; readable under the read lock the write lock became.
        unsafe { RwLockReadGuard::new(this.token.downgrade(), data) }
    }

    /// As [`downgrade_map`](Self::downgrade_map), if `f` returns `Some`. If it returns
    /// `None`, the write guard is given back in `Err`, still holding the write lock, and
    /// nothing is downgraded.
    ///
    /// An associated function (`RwLockWriteGuard::try_downgrade_map(guard, f)`), not a
    /// method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockWriteGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(vec![1, 2, 3]);
    /// let w = lock.write().await;
    /// let w = RwLockWriteGuard::try_downgrade_map(w, |v| v.get(7)).unwrap_err();
    /// assert!(lock.try_read().is_err()); // still write-locked
    /// let first = RwLockWriteGuard::try_downgrade_map(w, |v| v.first()).unwrap();
    /// assert_eq!(*first, 1);
    /// assert!(lock.try_read().is_ok());
    /// # });
    /// ```
    #[inline]
    pub fn try_downgrade_map<F, U: ?Sized>(this: Self, f: F) -> Result<RwLockReadGuard<'a, U>, Self>
    where
        F: FnOnce(&T) -> Option<&U>,
    {
        let data = match f(&*this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        // SAFETY: as in `downgrade_map`.
        Ok(unsafe { RwLockReadGuard::new(this.token.downgrade(), data) })
    }
}

impl<T: ?Sized> RwLockWriteGuard<'_, T> {
    /// Releases the write lock fairly, as `parking_lot`'s `unlock_fair`: if anyone is
    /// queued, the head of the queue is handed the lock at once (a reader head with every
    /// queued reader), and no task arriving meanwhile takes it first, whatever the lock's
    /// policy. Dropping the guard instead releases it as usual: arrivals may take the lock
    /// before the woken head runs, within the policy's handoff timeout.
    ///
    /// An associated function (`RwLockWriteGuard::unlock_fair(guard)`), not a method, so
    /// that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{Policy, RwLock, RwLockWriteGuard};
    /// use tokio_test::{assert_pending, assert_ready, task::spawn};
    ///
    /// // A policy that never hands the lock off by itself.
    /// let policy = Policy::new().writer_yields(0).handoff_timeout(Duration::MAX);
    /// let lock = RwLock::with_policy(0, policy);
    /// let guard = lock.try_write().unwrap();
    /// let mut queued = spawn(lock.write());
    /// assert_pending!(queued.poll()); // queued behind the guard
    /// RwLockWriteGuard::unlock_fair(guard);
    /// // The queued writer owns the lock already: a reader arriving now waits for it.
    /// let mut arrival = spawn(lock.read());
    /// assert_pending!(arrival.poll());
    /// *assert_ready!(queued.poll()) += 1;
    /// assert_eq!(*assert_ready!(arrival.poll()), 1);
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard owns the write lock: nobody else reaches the value.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard owns the write lock and `&mut self` is unique.
        unsafe { self.data.as_mut() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// Exclusive access to a part of the value of a [`RwLock`](crate::RwLock), made by
/// [`RwLockWriteGuard::map`] and released when dropped.
///
/// Unlike [`RwLockWriteGuard`] it has no `downgrade`: the part was reached through
/// `&mut T`, perhaps past a synchronisation that exclusive access may skip
/// (`Cell::get_mut`, `Mutex::get_mut`), and once readers shared the lock they could change
/// it through `&T` (`Cell::set`, `Mutex::lock`) under a read guard of it. Use
/// [`RwLockWriteGuard::downgrade_map`] to map and downgrade in one step. This does not
/// compile:
///
/// ```compile_fail,E0599
/// use async_rwsem::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
///
/// let lock = RwLock::new((1, 2));
/// let part = RwLockWriteGuard::map(lock.try_write().unwrap(), |pair| &mut pair.0);
/// let shared = RwLockMappedWriteGuard::downgrade(part);
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockMappedWriteGuard<'a, T: ?Sized> {
    /// The write lock of the lock.
    token: BorrowedToken<'a, Write>,
    /// The part of the value this guard was mapped to.
    data: NonNull<T>,
    marker: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized> RwLockMappedWriteGuard<'a, T> {
    /// The one constructor of a mapped write guard.
    ///
    /// # Safety
    ///
    /// `data` can be read and written for as long as `token` owns its write lock: it
    /// points to the value of that lock, or to a part of it, or to something that outlives
    /// the lock.
    #[inline]
    pub(crate) unsafe fn new(token: BorrowedToken<'a, Write>, data: NonNull<T>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
    }

    /// Maps the guard further, to a part of its part. Cannot fail.
    ///
    /// An associated function (`RwLockMappedWriteGuard::map(guard, f)`), not a method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new(((1, 2), 3));
    /// let outer = RwLockWriteGuard::map(lock.write().await, |v| &mut v.0);
    /// let mut inner = RwLockMappedWriteGuard::map(outer, |v| &mut v.1);
    /// *inner = 20;
    /// drop(inner);
    /// assert_eq!(*lock.read().await, ((1, 20), 3));
    /// # });
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(mut this: Self, f: F) -> RwLockMappedWriteGuard<'a, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        let data = NonNull::from(f(&mut *this));
        // SAFETY: `f` can only return a part of the value it was given, or something that
        // outlives it; the lock stays owned, by the token that moves to the new guard.
        unsafe { RwLockMappedWriteGuard::new(this.token, data) }
    }

    /// Tries to map the guard further. If `f` returns `None`, the original guard is given
    /// back in `Err`, still holding the lock.
    ///
    /// An associated function (`RwLockMappedWriteGuard::try_map(guard, f)`), not a method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
    ///
    /// # tokio_test::block_on(async {
    /// let lock = RwLock::new((vec![1, 2], 3));
    /// let list = RwLockWriteGuard::map(lock.write().await, |v| &mut v.0);
    /// let list = RwLockMappedWriteGuard::try_map(list, |l| l.get_mut(9)).unwrap_err();
    /// *RwLockMappedWriteGuard::try_map(list, |l| l.last_mut()).unwrap() = 5;
    /// assert_eq!(lock.read().await.0, [1, 5]);
    /// # });
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(
        mut this: Self,
        f: F,
    ) -> Result<RwLockMappedWriteGuard<'a, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        let data = match f(&mut *this) {
            Some(data) => NonNull::from(data),
            None => return Err(this),
        };
        // SAFETY: as in `map`.
        Ok(unsafe { RwLockMappedWriteGuard::new(this.token, data) })
    }
}

impl<T: ?Sized> RwLockMappedWriteGuard<'_, T> {
    /// Releases the write lock fairly: if anyone is queued, the head of the queue is handed
    /// the lock, and no task arriving meanwhile takes it first (see
    /// [`RwLockWriteGuard::unlock_fair`]).
    ///
    /// An associated function (`RwLockMappedWriteGuard::unlock_fair(guard)`), not a method,
    /// so that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
    ///
    /// let lock = RwLock::new((1, 2));
    /// let first = RwLockWriteGuard::map(lock.try_write().unwrap(), |pair| &mut pair.0);
    /// RwLockMappedWriteGuard::unlock_fair(first);
    /// assert!(!lock.is_locked());
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
    }
}

impl<T: ?Sized> Deref for RwLockMappedWriteGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard owns the write lock: nobody else reaches the value.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> DerefMut for RwLockMappedWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard owns the write lock and `&mut self` is unique.
        unsafe { self.data.as_mut() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockMappedWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for RwLockMappedWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}
