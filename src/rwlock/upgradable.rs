//! Upgradable reads: a read lock that can become the write lock without letting a writer
//! in between. At most one upgradable reader holds the lock at a time, beside any number
//! of plain readers; so two upgraders can never wait for each other.
//!
//! Here are the guards, [`RwLockUpgradableReadGuard`] and
//! [`OwnedRwLockUpgradableReadGuard`], and the [`Upgrade`] future; the methods that make
//! them are in `src/rwlock.rs` (the acquires) and beside the write guards
//! (`downgrade_to_upgradable`).
//!
//! In the count word the upgradable reader is a reader bias plus the `UPGRADABLE` bit. An
//! upgrade that must wait queues at the *head* of the wait queue and sets the handoff bit:
//! new readers queue behind it, the readers inside drain, and the last one out grants it
//! the write lock. A timed upgrade (`try_upgrade_for`, `try_upgrade_until`,
//! `upgrade_timeout`) whose time runs out is stopped rather than dropped: its node leaves
//! the queue and the guard comes back with the upgradable read lock it held throughout.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::guard::{RwLockReadGuard, RwLockWriteGuard};
use super::owned::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard};
use super::token::{BorrowedToken, OwnedToken, Upgradable, Upgrading};
use super::RwLock;
use crate::observe::{AsyncOp, Site};
use crate::raw::list::WaiterKind;

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
    /// The upgradable read lock of the lock.
    token: BorrowedToken<'a, Upgradable>,
    /// The whole value.
    data: NonNull<T>,
    /// Invariant in `T`: the guard can become a write guard, which hands out `&mut T`.
    marker: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized> RwLockUpgradableReadGuard<'a, T> {
    /// The one constructor of an upgradable read guard.
    ///
    /// # Safety
    ///
    /// `data` points to the whole value of the lock whose upgradable read lock `token`
    /// owns (the guard can become a write guard of it).
    #[inline]
    pub(crate) unsafe fn new(token: BorrowedToken<'a, Upgradable>, data: NonNull<T>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
    }

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
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn upgrade(this: Self) -> Upgrade<'a, T> {
        Upgrade {
            upgrading: this.token.upgrade(Site::caller()),
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
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgrade(this: Self) -> Result<RwLockWriteGuard<'a, T>, Self> {
        match this.token.try_upgrade(Site::caller()) {
            // SAFETY: the whole value, under the write lock the upgradable read lock
            // became.
            Ok(token) => Ok(unsafe { RwLockWriteGuard::new(token, this.data) }),
            // SAFETY: the same token and value, given back.
            Err(token) => Err(unsafe { Self::new(token, this.data) }),
        }
    }

    /// Upgrades to the write lock from synchronous code, blocking the thread while the
    /// other readers leave, for `timeout` at most (`parking_lot`'s `try_upgrade_for`). If
    /// the time runs out the guard comes back in `Err`, still holding the upgradable read
    /// lock (no writer got in meanwhile), and the queue is as if the upgrade had never
    /// been asked for: readers it held back may share the lock with the guard again. An
    /// upgrade that can complete at once does, even with a zero `timeout`; one granted
    /// just as the time runs out is kept (`Ok`). Needs no runtime; never call it from
    /// async code (see [`RwLock::blocking_read`]'s deadlock warning): there, use
    /// `upgrade_timeout` (feature `tokio`).
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::time::Duration;
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// let lock = RwLock::new(0);
    /// let up = lock.try_upgradable_read().unwrap();
    /// let r = lock.try_read().unwrap();
    /// // `r` stays: the upgrade runs out of time, and the guard comes back.
    /// let up = RwLockUpgradableReadGuard::try_upgrade_for(up, Duration::from_millis(5)).unwrap_err();
    /// assert!(lock.try_read().is_ok()); // readers share the lock with it again
    /// drop(r);
    /// let mut w = RwLockUpgradableReadGuard::try_upgrade_for(up, Duration::from_millis(5)).unwrap();
    /// *w = 1;
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgrade_for(this: Self, timeout: Duration) -> Result<RwLockWriteGuard<'a, T>, Self> {
        Self::upgrade_until(this, Site::caller(), super::blocking::deadline_in(timeout))
    }

    /// [`try_upgrade_for`](Self::try_upgrade_for) with a deadline instead of a timeout
    /// (`parking_lot`'s `try_upgrade_until`).
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::sync::Arc;
    /// use std::time::{Duration, Instant};
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let r = Arc::clone(&lock).try_read_owned().unwrap();
    /// let reader = std::thread::spawn(move || {
    ///     std::thread::sleep(Duration::from_millis(10));
    ///     drop(r); // the upgrade gets the lock when this reader leaves
    /// });
    /// let up = lock.try_upgradable_read().unwrap();
    /// let deadline = Instant::now() + Duration::from_secs(60);
    /// let mut w = RwLockUpgradableReadGuard::try_upgrade_until(up, deadline).unwrap();
    /// *w = 1;
    /// # drop(w);
    /// reader.join().unwrap();
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgrade_until(
        this: Self,
        deadline: Instant,
    ) -> Result<RwLockWriteGuard<'a, T>, Self> {
        Self::upgrade_until(this, Site::caller(), Some(deadline))
    }

    fn upgrade_until(
        this: Self,
        site: Site,
        deadline: Option<Instant>,
    ) -> Result<RwLockWriteGuard<'a, T>, Self> {
        let data = this.data;
        match this.token.upgrade_until(site, deadline) {
            // SAFETY: the whole value, under the write lock the upgradable read lock
            // became.
            Ok(token) => Ok(unsafe { RwLockWriteGuard::new(token, data) }),
            // SAFETY: the same lock and value, its upgradable read lock kept.
            Err(token) => Err(unsafe { Self::new(token, data) }),
        }
    }

    /// Upgrades to the write lock as [`upgrade`](Self::upgrade) does, giving up after
    /// `timeout` (feature `tokio`). If the time runs out the guard comes back in `Err`,
    /// still holding the upgradable read lock, and the queue is as if the upgrade had
    /// never been asked for (readers it held back may share the lock with the guard
    /// again; a queued writer still waits for it). An upgrade that can complete at once
    /// does, even with a zero `timeout`; one granted just as the time runs out is kept
    /// (`Ok`): it got the lock in time, and giving it back would only make the caller ask
    /// again. Needs a tokio runtime with the time driver (it panics otherwise, as
    /// `tokio::time::sleep` does).
    ///
    /// Why not `tokio::time::timeout(d, RwLockUpgradableReadGuard::upgrade(guard))`: the
    /// guard is moved into the upgrade future, and when the time runs out `timeout` drops
    /// that future, which cancels the upgrade *and releases the lock*: the caller has
    /// neither guard, and a writer may get in before it locks again, so whatever it read
    /// under the upgradable guard may be stale. This function stops the upgrade instead
    /// and gives the lock back as it was.
    ///
    /// Dropping the returned future before it resolves releases the lock altogether, as
    /// dropping [`upgrade`](Self::upgrade)'s does.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// let lock = RwLock::new(0);
    /// let up = lock.upgradable_read().await;
    /// let r = lock.read().await;
    /// let up = RwLockUpgradableReadGuard::upgrade_timeout(up, Duration::from_millis(5))
    ///     .await
    ///     .unwrap_err(); // `r` stayed; the guard is back
    /// assert_eq!(*lock.read().await, 0); // and readers share the lock with it again
    /// drop(r);
    /// let mut w = RwLockUpgradableReadGuard::upgrade_timeout(up, Duration::from_millis(5))
    ///     .await
    ///     .unwrap();
    /// *w = 1;
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn upgrade_timeout(
        this: Self,
        timeout: Duration,
    ) -> impl Future<Output = Result<RwLockWriteGuard<'a, T>, Self>> {
        // Made here, so that the upgrade's site is the caller's.
        let upgrade = Self::upgrade(this);
        async move {
            // The `Sleep` outlives the stop (see `race_upgrade`).
            let sleep = std::pin::pin!(tokio::time::sleep(timeout));
            let mut upgrade = std::pin::pin!(upgrade);
            match super::timeout::race_upgrade(upgrade.as_mut(), sleep).await {
                Some(write) => Ok(write),
                None => upgrade.stop(),
            }
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
        // SAFETY: the whole value, under the read lock the upgradable read lock became.
        unsafe { RwLockReadGuard::new(this.token.downgrade(), this.data) }
    }
}

impl<T: ?Sized> RwLockUpgradableReadGuard<'_, T> {
    /// Is a writer queued for this lock? As
    /// [`RwLockReadGuard::writer_waiting`], which says what to do with the answer under
    /// each policy: one load of the count word. (An upgrade cannot be queued beside this
    /// guard: it is the one upgradable reader.)
    ///
    /// An associated function (`RwLockUpgradableReadGuard::writer_waiting(&guard)`), not
    /// a method.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    /// use tokio_test::{assert_pending, task::spawn};
    ///
    /// let lock = RwLock::new(0);
    /// let up = lock.try_upgradable_read().unwrap();
    /// let mut writer = spawn(lock.write());
    /// assert!(!RwLockUpgradableReadGuard::writer_waiting(&up));
    /// assert_pending!(writer.poll()); // behind a reader it queues at once
    /// assert!(RwLockUpgradableReadGuard::writer_waiting(&up));
    /// ```
    #[inline]
    pub fn writer_waiting(this: &Self) -> bool {
        this.token.lock().writer_queued()
    }

    /// Releases the upgradable read lock fairly: if anyone is queued, the head of the queue
    /// is handed the lock, and no task arriving meanwhile takes it first (see
    /// [`RwLockReadGuard::unlock_fair`]).
    ///
    /// An associated function (`RwLockUpgradableReadGuard::unlock_fair(guard)`), not a
    /// method, so that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// let lock = RwLock::new(1);
    /// let up = lock.try_upgradable_read().unwrap();
    /// RwLockUpgradableReadGuard::unlock_fair(up);
    /// assert!(!lock.is_locked());
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
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
    /// The upgradable read lock, then the write lock. Structurally pinned.
    upgrading: Upgrading<'a>,
    /// The whole value.
    data: NonNull<T>,
    marker: PhantomData<&'a mut T>,
}

impl<'a, T: ?Sized> Future for Upgrade<'a, T> {
    type Output = RwLockWriteGuard<'a, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `upgrading` is structurally pinned: it is never moved out of, and is
        // only reached through this projection; the other fields are plain data.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let upgrading = unsafe { Pin::new_unchecked(&mut this.upgrading) };
        match upgrading.poll(cx) {
            // SAFETY: the whole value, under the write lock the upgrade ended with.
            Poll::Ready(token) => Poll::Ready(unsafe { RwLockWriteGuard::new(token, this.data) }),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<'a, T: ?Sized> Upgrade<'a, T> {
    /// Stops the upgrade but keeps the upgradable read lock (for
    /// [`RwLockUpgradableReadGuard::upgrade_timeout`]): the write guard if the upgrade was
    /// granted first, else the upgradable guard. The future is done afterwards.
    #[cfg(any(feature = "tokio", all(test, async_rwsem_loom)))]
    pub(crate) fn stop(
        self: Pin<&mut Self>,
    ) -> Result<RwLockWriteGuard<'a, T>, RwLockUpgradableReadGuard<'a, T>> {
        // SAFETY: `upgrading` is structurally pinned (as in `poll`).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let upgrading = unsafe { Pin::new_unchecked(&mut this.upgrading) };
        match upgrading.stop() {
            // SAFETY: the whole value, under the write lock the upgrade ended with.
            Ok(token) => Ok(unsafe { RwLockWriteGuard::new(token, this.data) }),
            // SAFETY: the whole value, under the upgradable read lock kept.
            Err(token) => Err(unsafe { RwLockUpgradableReadGuard::new(token, this.data) }),
        }
    }
}

impl<T: ?Sized> fmt::Debug for Upgrade<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgrade").finish_non_exhaustive()
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
    /// The `Arc` of the lock, and its upgradable read lock.
    token: OwnedToken<T, Upgradable>,
    /// The whole value, inside the lock.
    data: NonNull<T>,
    marker: PhantomData<T>,
}

impl<T: ?Sized> OwnedRwLockUpgradableReadGuard<T> {
    /// The one constructor of an owned upgradable read guard.
    ///
    /// # Safety
    ///
    /// `data` points to the whole value of the lock whose upgradable read lock `token`
    /// owns (the guard can become a write guard of it).
    #[inline]
    pub(crate) unsafe fn new(token: OwnedToken<T, Upgradable>, data: NonNull<T>) -> Self {
        Self {
            token,
            data,
            marker: PhantomData,
        }
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
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn upgrade(this: Self) -> impl Future<Output = OwnedRwLockWriteGuard<T>> {
        let site = Site::caller();
        // While `this` holds the lock: a panic in tokio-console's subscriber releases it.
        let source = "OwnedRwLockUpgradableReadGuard::upgrade";
        let op = AsyncOp::new(&this.token.lock().raw, WaiterKind::Write, source);
        op.wrap(async move {
            // Until the first poll the future holds the guard, whose token releases the
            // lock if dropped; from there the token's upgrade owns it. (No `NonNull` is
            // held across the `.await`: the future must be `Send`.)
            let Self { token, .. } = this;
            let token = token.upgrade(site).await;
            let data = token.lock().data_ptr_mut();
            // SAFETY: the whole value of the lock whose write lock the token owns.
            unsafe { OwnedRwLockWriteGuard::new(token, data) }
        })
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
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgrade(this: Self) -> Result<OwnedRwLockWriteGuard<T>, Self> {
        match this.token.try_upgrade(Site::caller()) {
            // SAFETY: the whole value, under the write lock the upgradable read lock
            // became.
            Ok(token) => Ok(unsafe { OwnedRwLockWriteGuard::new(token, this.data) }),
            // SAFETY: the same token and value, given back.
            Err(token) => Err(unsafe { Self::new(token, this.data) }),
        }
    }

    /// Upgrades to the write lock from synchronous code, waiting for `timeout` at most, as
    /// [`RwLockUpgradableReadGuard::try_upgrade_for`]: on expiry the guard comes back in
    /// `Err`, still holding the upgradable read lock. Never call it from async code.
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// let r = lock.try_read().unwrap();
    /// let up = OwnedRwLockUpgradableReadGuard::try_upgrade_for(up, Duration::ZERO).unwrap_err();
    /// drop(r);
    /// *OwnedRwLockUpgradableReadGuard::try_upgrade_for(up, Duration::ZERO).unwrap() = 1;
    /// assert_eq!(*lock.try_read().unwrap(), 1);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgrade_for(
        this: Self,
        timeout: Duration,
    ) -> Result<OwnedRwLockWriteGuard<T>, Self> {
        Self::upgrade_until(this, Site::caller(), super::blocking::deadline_in(timeout))
    }

    /// [`try_upgrade_for`](Self::try_upgrade_for) with a deadline instead of a timeout,
    /// as [`RwLockUpgradableReadGuard::try_upgrade_until`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Instant;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// let w = OwnedRwLockUpgradableReadGuard::try_upgrade_until(up, Instant::now()).unwrap();
    /// assert!(lock.try_read().is_err()); // alone: upgraded at once
    /// # drop(w);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgrade_until(
        this: Self,
        deadline: Instant,
    ) -> Result<OwnedRwLockWriteGuard<T>, Self> {
        Self::upgrade_until(this, Site::caller(), Some(deadline))
    }

    fn upgrade_until(
        this: Self,
        site: Site,
        deadline: Option<Instant>,
    ) -> Result<OwnedRwLockWriteGuard<T>, Self> {
        let data = this.data;
        match this.token.upgrade_until(site, deadline) {
            // SAFETY: the whole value, under the write lock the upgradable read lock
            // became.
            Ok(token) => Ok(unsafe { OwnedRwLockWriteGuard::new(token, data) }),
            // SAFETY: the same lock and value, its upgradable read lock kept.
            Err(token) => Err(unsafe { Self::new(token, data) }),
        }
    }

    /// Upgrades to the write lock, giving up after `timeout` (feature `tokio`), as
    /// [`RwLockUpgradableReadGuard::upgrade_timeout`] (which says why
    /// `tokio::time::timeout` around [`upgrade`](Self::upgrade) would lose the guard): on
    /// expiry the guard comes back in `Err`, still holding the upgradable read lock.
    /// Dropping the future before it resolves releases the lock altogether.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// let lock = Arc::new(RwLock::new(0));
    /// let up = Arc::clone(&lock).upgradable_read_owned().await;
    /// let r = lock.read().await;
    /// let up = OwnedRwLockUpgradableReadGuard::upgrade_timeout(up, Duration::from_millis(5))
    ///     .await
    ///     .unwrap_err();
    /// drop(r);
    /// let w = OwnedRwLockUpgradableReadGuard::upgrade_timeout(up, Duration::from_millis(5));
    /// *w.await.unwrap() = 1;
    /// assert_eq!(*lock.read().await, 1);
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn upgrade_timeout(
        this: Self,
        timeout: Duration,
    ) -> impl Future<Output = Result<OwnedRwLockWriteGuard<T>, Self>> {
        let site = Site::caller();
        // No `NonNull` is held across the `.await` (the future must be `Send`): the data
        // pointer comes back from the lock.
        let Self { token, .. } = this;
        // Announced and watched as an async acquire of the future that polls it.
        crate::observe::in_flow(async move {
            match token.upgrade_timeout(site, timeout).await {
                Ok(token) => {
                    let data = token.lock().data_ptr_mut();
                    // SAFETY: the whole value of the lock whose write lock the token owns.
                    Ok(unsafe { OwnedRwLockWriteGuard::new(token, data) })
                }
                Err(token) => {
                    let data = token.lock().data_ptr_mut();
                    // SAFETY: the whole value of the lock whose upgradable read lock the
                    // token owns.
                    Err(unsafe { Self::new(token, data) })
                }
            }
        })
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
        // SAFETY: the whole value, under the read lock the upgradable read lock became.
        unsafe { OwnedRwLockReadGuard::new(this.token.downgrade(), this.data) }
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
        this.token.lock()
    }
}

impl<T: ?Sized> OwnedRwLockUpgradableReadGuard<T> {
    /// Is a writer queued for this lock? As
    /// [`RwLockUpgradableReadGuard::writer_waiting`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    /// use tokio_test::{assert_pending, task::spawn};
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// let mut writer = spawn(lock.write());
    /// assert_pending!(writer.poll()); // behind a reader it queues at once
    /// assert!(OwnedRwLockUpgradableReadGuard::writer_waiting(&up));
    /// ```
    #[inline]
    pub fn writer_waiting(this: &Self) -> bool {
        this.token.lock().raw.writer_queued()
    }

    /// Releases the upgradable read lock fairly: if anyone is queued, the head of the queue
    /// is handed the lock, and no task arriving meanwhile takes it first, then drops the
    /// guard's `Arc` (see [`RwLockReadGuard::unlock_fair`]).
    ///
    /// An associated function (`OwnedRwLockUpgradableReadGuard::unlock_fair(guard)`), not a
    /// method, so that it does not hide a method of the same name on the value.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{OwnedRwLockUpgradableReadGuard, RwLock};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
    /// OwnedRwLockUpgradableReadGuard::unlock_fair(up);
    /// assert!(!lock.is_locked());
    /// ```
    #[inline]
    pub fn unlock_fair(this: Self) {
        this.token.unlock_fair();
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
