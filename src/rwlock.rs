//! The typed lock, [`RwLock<T>`], and its guards, on top of the raw lock in [`crate::raw`].

use std::error::Error;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::loom::{cell_ptr, cell_ptr_shared, UnsafeCell};
use crate::raw::policy::Policy;
use crate::raw::{Acquire, RawRwLock};

/// An async read-write lock built like the Linux kernel's `rw_semaphore`.
///
/// Any number of readers or one writer hold the lock at a time. The API follows
/// [`tokio::sync::RwLock`]'s names, so moving over is a change of `use`; the behaviour
/// differs where the algorithm does (see the crate documentation): readers may *steal*
/// the lock from queued waiters and writers spin and yield before they queue, for
/// throughput, and a timed *handoff* to the head of the queue bounds the unfairness.
///
/// Acquiring is cancel safe: dropping a pending [`read`](RwLock::read) or
/// [`write`](RwLock::write) future at any point leaves the lock consistent, passes on any
/// wake-up it was given, and releases the lock if it had already been granted.
///
/// ```
/// use async_rwsem::RwLock;
///
/// # tokio_test::block_on(async {
/// let lock = RwLock::new(5);
/// {
///     let r1 = lock.read().await;
///     let r2 = lock.read().await; // readers share the lock
///     assert_eq!(*r1 + *r2, 10);
/// }
/// {
///     let mut w = lock.write().await; // a writer is alone
///     *w += 1;
/// }
/// assert_eq!(*lock.read().await, 6);
/// # });
/// ```
///
/// [`tokio::sync::RwLock`]: https://docs.rs/tokio/latest/tokio/sync/struct.RwLock.html
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
    data: UnsafeCell<T>,
}

// SAFETY: the lock owns a `T`; moving the lock moves the `T`, which needs `T: Send`.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: through `&RwLock<T>` readers on several threads get `&T` at once (`T: Sync`)
// and a writer gets `&mut T` on any thread (`T: Send`), as for `std::sync::RwLock`.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// The error of [`RwLock::try_read`] and [`RwLock::try_write`]: the lock could not be
/// taken without waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TryLockError(());

impl fmt::Display for TryLockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("operation would block")
    }
}

impl Error for TryLockError {}

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
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        Self::with_policy(value, Policy::DEFAULT)
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
    #[cfg(not(loom))]
    pub const fn with_policy(value: T, policy: Policy) -> Self {
        Self {
            raw: RawRwLock::new(policy),
            data: UnsafeCell::new(value),
        }
    }

    /// Creates an unlocked lock holding `value` (loom build: not `const`).
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        Self::with_policy(value, Policy::DEFAULT)
    }

    /// Creates an unlocked lock holding `value`, run by `policy` (loom build).
    #[cfg(loom)]
    pub fn with_policy(value: T, policy: Policy) -> Self {
        Self {
            raw: RawRwLock::new(policy),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the lock and returns the value. No locking is needed: the lock is owned.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(String::from("hello"));
    /// assert_eq!(lock.into_inner(), "hello");
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

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
    pub async fn read(&self) -> RwLockReadGuard<'_, T> {
        Acquire::read(&self.raw).await;
        // SAFETY: we own a read lock, handed to the guard.
        unsafe { self.read_guard() }
    }

    /// Locks for writing, waiting until no reader or writer holds the lock.
    ///
    /// A writer that finds the lock held first spins for a short time (the policy's
    /// `writer_spin`), then yields to the executor (`writer_yields` times), then queues.
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
    pub async fn write(&self) -> RwLockWriteGuard<'_, T> {
        Acquire::write(&self.raw).await;
        // SAFETY: we own the write lock, handed to the guard.
        unsafe { self.write_guard() }
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
    pub fn try_read(&self) -> Result<RwLockReadGuard<'_, T>, TryLockError> {
        if self.raw.try_read() {
            // SAFETY: we own a read lock, handed to the guard.
            Ok(unsafe { self.read_guard() })
        } else {
            Err(TryLockError(()))
        }
    }

    /// Locks for writing if the lock is free and no handoff to a waiter is pending.
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
    pub fn try_write(&self) -> Result<RwLockWriteGuard<'_, T>, TryLockError> {
        if self.raw.try_write() {
            // SAFETY: we own the write lock, handed to the guard.
            Ok(unsafe { self.write_guard() })
        } else {
            Err(TryLockError(()))
        }
    }

    /// Returns a mutable reference to the value. No locking is needed: `&mut self`
    /// proves nobody else holds the lock.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let mut lock = RwLock::new(1);
    /// *lock.get_mut() = 2;
    /// assert_eq!(lock.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` excludes every guard and every other access.
        unsafe { &mut *cell_ptr(&self.data) }
    }

    /// The policy this lock runs by.
    ///
    /// ```
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// assert_eq!(*RwLock::new(()).policy(), Policy::default());
    /// ```
    pub fn policy(&self) -> &Policy {
        self.raw.policy()
    }

    /// A snapshot of this lock's event counters (feature `stats`).
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// drop(lock.try_read());
    /// drop(lock.try_write());
    /// # #[cfg(feature = "stats")]
    /// assert_eq!(lock.stats().wlock_fast, 1);
    /// ```
    #[cfg(feature = "stats")]
    #[cfg_attr(docsrs, doc(cfg(feature = "stats")))]
    pub fn stats(&self) -> crate::LockStats {
        self.raw.stats.snapshot()
    }

    /// The raw count word. Diagnostics for this crate's own tests; not a stable API.
    #[doc(hidden)]
    pub fn __count_word(&self) -> usize {
        self.raw.count_word()
    }

    /// The number of queued waiters. Diagnostics for this crate's own tests; not a stable
    /// API.
    #[doc(hidden)]
    pub fn __queue_len(&self) -> usize {
        self.raw.queue_len()
    }

    /// # Safety
    ///
    /// The caller owns a read lock of `self` and hands it to the guard.
    unsafe fn read_guard(&self) -> RwLockReadGuard<'_, T> {
        RwLockReadGuard {
            raw: &self.raw,
            // SAFETY: a pointer into a live cell is not null.
            data: unsafe { NonNull::new_unchecked(cell_ptr_shared(&self.data)) },
            marker: PhantomData,
        }
    }

    /// # Safety
    ///
    /// The caller owns the write lock of `self` and hands it to the guard.
    unsafe fn write_guard(&self) -> RwLockWriteGuard<'_, T> {
        RwLockWriteGuard {
            raw: &self.raw,
            // SAFETY: a pointer into a live cell is not null.
            data: unsafe { NonNull::new_unchecked(cell_ptr(&self.data)) },
            marker: PhantomData,
        }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(guard) => d.field("data", &&*guard),
            Err(_) => d.field("data", &format_args!("<locked>")),
        };
        d.finish_non_exhaustive()
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

/// Shared access to the value of a [`RwLock`], released when dropped.
///
/// Made by [`RwLock::read`] and [`RwLock::try_read`].
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    raw: &'a RawRwLock,
    data: NonNull<T>,
    marker: PhantomData<&'a T>,
}

// SAFETY: the guard gives `&T` to whichever thread holds it: sending it is sharing `T`.
unsafe impl<T: ?Sized + Sync> Send for RwLockReadGuard<'_, T> {}
// SAFETY: `&guard` gives `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard owns a read lock: no writer exists while it lives.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard owns a read lock and gives it up.
        unsafe { self.raw.unlock_read() }
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

/// Exclusive access to the value of a [`RwLock`], released when dropped.
///
/// Made by [`RwLock::write`] and [`RwLock::try_write`].
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    raw: &'a RawRwLock,
    data: NonNull<T>,
    marker: PhantomData<&'a mut T>,
}

// SAFETY: as tokio's: the guard gives `&mut T` (needs `Send`) and `&T` (needs `Sync`) to
// whichever thread holds it.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockWriteGuard<'_, T> {}
// SAFETY: `&guard` gives `&T`; required `Send + Sync` as tokio does.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Atomically turns the write lock into a read lock, and lets the queued readers in
    /// beside it (not the queued writers). Nobody can take the write lock in between.
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
    pub fn downgrade(self) -> RwLockReadGuard<'a, T> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: we own the write lock; after the call we own a read lock, which the new
        // guard takes over (the write guard's drop does not run).
        unsafe { this.raw.downgrade() };
        RwLockReadGuard {
            raw: this.raw,
            data: this.data,
            marker: PhantomData,
        }
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

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard owns the write lock and gives it up.
        unsafe { self.raw.unlock_write() }
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

/// Compile-time proof of the auto traits, matching `tokio::sync::RwLock`'s.
#[allow(dead_code)]
fn assert_auto_traits() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    fn send_val<T: Send>(_: &T) {}

    send::<RwLock<u8>>();
    sync::<RwLock<u8>>();
    send::<RwLockReadGuard<'_, u8>>();
    sync::<RwLockReadGuard<'_, u8>>();
    send::<RwLockWriteGuard<'_, u8>>();
    sync::<RwLockWriteGuard<'_, u8>>();
    send::<TryLockError>();
    sync::<TryLockError>();

    let lock = RwLock::new(0u8);
    send_val(&lock.read());
    send_val(&lock.write());
}
