//! The typed lock, [`RwLock<T>`], and its guards, on top of the raw lock in [`crate::raw`].
//!
//! # Where things are
//!
//! - This file: [`RwLock`] itself; its state queries (`is_locked`,
//!   `is_locked_exclusive`, `policy`, `stats`) and its access without locking
//!   (`into_inner`, `get_mut`); and, under "Auto traits and variance", the `Send`/`Sync`
//!   impls of every public type and the variance of each.
//! - `acquire`: the constructors, then every async and `try_` acquire: `read`, `write`,
//!   `try_read`, `try_write`, their owned forms (`*_owned`, through an `Arc`), then the
//!   upgradable reads. The methods are spread over `acquire`, `timeout`, `blocking` and
//!   this file, declared in that order, because rustdoc lists a type's methods in that
//!   order (see the module list below): as a user looks for them.
//! - [`blocking`]: the blocking acquires, `blocking_read`, `blocking_write`, their owned
//!   forms and `blocking_upgradable_read`, and the timed ones, `try_read_for`,
//!   `try_write_for`, `try_upgradable_read_for` and their `_until` forms; and the
//!   blocking half of the upgradable guards' `try_upgrade_for` and `try_upgrade_until`.
//! - `timeout` (feature `tokio`): the timed acquires, `*_timeout`, and the tokio half of
//!   the upgradable guards' `upgrade_timeout`.
//! - `coop` (feature `tokio`): tokio's cooperative budget, taken once an async acquire
//!   owns the lock.
//! - [`guard`]: the borrowed guards, [`RwLockReadGuard`], [`RwLockWriteGuard`] and
//!   [`RwLockMappedWriteGuard`].
//! - [`owned`]: the owned guards, [`OwnedRwLockReadGuard`], [`OwnedRwLockWriteGuard`] and
//!   [`OwnedRwLockMappedWriteGuard`].
//! - [`upgradable`]: the upgradable guards, [`RwLockUpgradableReadGuard`] and
//!   [`OwnedRwLockUpgradableReadGuard`], and the [`Upgrade`] future.
//! - [`snapshot`]: `snapshot` (who holds the lock, who waits) and, under `lock_stat`,
//!   `lock_stat`.
//! - [`token`]: the lock tokens, which take, change and release a lock of the raw lock.
//!
//! A guard's methods are next to its type, whatever guard they return (so
//! `RwLockWriteGuard::downgrade_to_upgradable` is in [`guard`]).
//!
//! # One way to hold a lock
//!
//! Every guard is a lock token ([`token::Token`]) plus a pointer to the part of the value
//! it gives access to (plus a marker that sets its variance). The token is the ownership
//! of the lock, and its invariant is that **a token exists exactly while its lock is
//! owned**: the token's `Drop` is the only release, and the mode changes (downgrades,
//! upgrades) consume one token and make the next, in [`token`] only. So no guard has a
//! `Drop` of its own, and each guard kind has one constructor, `new(token, data)`, used by
//! every path that makes that guard (the acquires, `map`, `try_map`, the downgrades and
//! upgrades).

use std::error::Error;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

// rustdoc lists a type's methods in the order of the modules whose impls define them,
// a module's own impls after its submodules': so `acquire` (the constructors and the
// async and `try_` acquires), then `timeout`, then `blocking`, and last this file's
// state queries, `into_inner` and `get_mut`, in the order a user looks for them. A blank
// line between the three keeps rustfmt from sorting them.
mod acquire;

#[cfg(feature = "tokio")]
pub(crate) mod timeout;

pub(crate) mod blocking;

#[cfg(feature = "tokio")]
pub(crate) mod coop;
pub(crate) mod guard;
pub(crate) mod owned;
pub(crate) mod snapshot;
pub(crate) mod token;
pub(crate) mod upgradable;

#[cfg(all(test, not(async_rwsem_loom)))]
mod tests;

pub use self::guard::{RwLockMappedWriteGuard, RwLockReadGuard, RwLockWriteGuard};
pub use self::owned::{OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard};
pub use self::snapshot::Snapshot;
#[cfg(feature = "tokio")]
pub use self::timeout::Elapsed;
pub use self::upgradable::{OwnedRwLockUpgradableReadGuard, RwLockUpgradableReadGuard, Upgrade};

use self::token::{Read, Token, Upgradable, Write};
use crate::loom::{cell_ptr, cell_ptr_shared, UnsafeCell};
use crate::observe::ObservedLock;
use crate::raw::policy::Policy;

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
    /// The raw lock (the count word, the wait list and the policy), with the observers'
    /// per-lock state beside it; derefs to the raw lock.
    pub(crate) raw: ObservedLock,
    /// The value, reached through a guard that owns a lock of `raw`.
    pub(crate) data: UnsafeCell<T>,
}

/// The error of [`RwLock::try_read`], [`RwLock::try_write`] and their owned forms: the
/// lock could not be taken without waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TryLockError(pub(crate) ());

impl fmt::Display for TryLockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("operation would block")
    }
}

impl Error for TryLockError {}

/// Lets `?` take tokio's error in a function that returns this crate's (feature `tokio`),
/// so that code moved over from tokio can try this lock and a `tokio::sync::Mutex` (or
/// `RwLock`) in one function:
///
/// ```
/// use async_rwsem::{RwLock, TryLockError};
///
/// fn sum(a: &RwLock<u32>, b: &tokio::sync::Mutex<u32>) -> Result<u32, TryLockError> {
///     Ok(*a.try_read()? + *b.try_lock()?)
/// }
///
/// let (a, b) = (RwLock::new(1), tokio::sync::Mutex::new(2));
/// assert_eq!(sum(&a, &b), Ok(3));
/// let held = b.try_lock().unwrap();
/// assert!(sum(&a, &b).is_err());
/// # drop(held);
/// ```
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
impl From<tokio::sync::TryLockError> for TryLockError {
    fn from(_: tokio::sync::TryLockError) -> Self {
        TryLockError(())
    }
}

// ---------------------------------------------------------------------------------------
// State queries.

impl<T: ?Sized> RwLock<T> {
    /// Whether the lock is held at this instant, in any mode (as `parking_lot`'s
    /// `is_locked`): by a reader, the upgradable reader or a writer. Only a snapshot,
    /// for assertions and diagnostics: by the time it returns the lock may have changed
    /// hands, and for an instant a reader on its way to the queue counts as a holder.
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// assert!(!lock.is_locked());
    /// let r = lock.try_read().unwrap();
    /// assert!(lock.is_locked());
    /// assert!(!lock.is_locked_exclusive());
    /// drop(r);
    /// assert!(!lock.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.raw.is_locked()
    }

    /// Whether a writer holds the lock at this instant (as `parking_lot`'s
    /// `is_locked_exclusive`): a write guard, mapped or not, or the upgrade of an
    /// upgradable read. A snapshot, as for [`is_locked`](Self::is_locked).
    ///
    /// ```
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// let w = lock.try_write().unwrap();
    /// assert!(lock.is_locked_exclusive());
    /// assert!(lock.is_locked());
    /// drop(w);
    /// assert!(!lock.is_locked_exclusive());
    /// ```
    pub fn is_locked_exclusive(&self) -> bool {
        self.raw.is_write_locked()
    }

    /// The policy this lock runs by, as the lock stores it (compactly: the durations to the
    /// nanosecond up to 2.1 s for the handoff and 4.29 s for the spin caps, the handoff to
    /// the microsecond above; see [`Policy`]).
    ///
    /// ```
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// assert_eq!(RwLock::new(()).policy(), Policy::default());
    /// ```
    pub fn policy(&self) -> Policy {
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
}

// ---------------------------------------------------------------------------------------
// Access without locking: `into_inner`, `get_mut` (last, as a user looks for them).

impl<T> RwLock<T> {
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

    /// A pointer to the value, for a guard that reads it (under loom, a read access).
    #[inline]
    fn data_ptr(&self) -> NonNull<T> {
        // SAFETY: a pointer into a live cell is not null.
        unsafe { NonNull::new_unchecked(cell_ptr_shared(&self.data)) }
    }

    /// A pointer to the value, for a guard that writes it (under loom, a write access).
    #[inline]
    fn data_ptr_mut(&self) -> NonNull<T> {
        // SAFETY: a pointer into a live cell is not null.
        unsafe { NonNull::new_unchecked(cell_ptr(&self.data)) }
    }
}

/// Prints what `tokio::sync::RwLock` prints: `RwLock { data: 7 }`, or
/// `RwLock { data: <locked> }` when a read lock cannot be taken without waiting (the policy
/// is not printed; [`RwLock::policy`] gives it).
impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(guard) => d.field("data", &&*guard),
            Err(_) => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

impl<T: Default> Default for RwLock<T> {
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

// ---------------------------------------------------------------------------------------
// Auto traits and variance: every `Send`/`Sync` impl of the lock, its guards and its
// futures, with its reason; the variance of each, below. The bounds are tokio's where
// tokio has the type (one is looser: a borrowed read guard is `Sync` for `T: Sync`, where
// tokio also asks `T: Send`), async-lock's for the upgradable guards. `crate::rwlock::tests`
// asserts every one of them (and `Unpin`) in `bounds()`. A guard's fields (its lock token,
// a `NonNull` to the value and a variance marker) decide none of them: the `NonNull` alone
// makes a type neither `Send` nor `Sync`, so each impl below is the type's whole bound.

// SAFETY: the lock owns a `T`; moving the lock moves the `T`, which needs `T: Send`.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: through `&RwLock<T>` readers on several threads get `&T` at once (`T: Sync`)
// and a writer gets `&mut T` on any thread (`T: Send`), as for `std::sync::RwLock`.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

// SAFETY: the guard gives `&T` to whichever thread holds it: sending it is sharing `T`.
unsafe impl<T: ?Sized + Sync> Send for RwLockReadGuard<'_, T> {}
// SAFETY: `&guard` gives `&T`.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

// SAFETY: the guard gives `&mut T` (needs `Send`) and `&T` (needs `Sync`) to whichever
// thread holds it.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockWriteGuard<'_, T> {}
// SAFETY: `&guard` gives `&T`; `Send + Sync` as tokio asks.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockWriteGuard<'_, T> {}

// SAFETY: as for `RwLockWriteGuard`.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockMappedWriteGuard<'_, T> {}
// SAFETY: as for `RwLockWriteGuard`.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockMappedWriteGuard<'_, T> {}

// SAFETY: the guard gives `&T` to whichever thread holds it, and can become a write guard
// there (`&mut T`): `T: Send + Sync`.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockUpgradableReadGuard<'_, T> {}
// SAFETY: `&guard` gives `&T` only.
unsafe impl<T: ?Sized + Sync> Sync for RwLockUpgradableReadGuard<'_, T> {}

// SAFETY: it resolves to a write guard, which is `Send` for `T: Send + Sync`; what it holds
// until then (`token::Upgrading`: the raw lock's acquire future and a reference to the raw
// lock) is `Send`.
unsafe impl<T: ?Sized + Send + Sync> Send for Upgrade<'_, T> {}
// SAFETY: `&Upgrade` gives no access to the value.
unsafe impl<T: ?Sized + Send + Sync> Sync for Upgrade<'_, T> {}

// SAFETY: the guard gives `&U` to whichever thread holds it (`U: Sync`), and may drop the
// last `Arc`, dropping `T` there (`T: Send`) after other threads shared it (`T: Sync`).
unsafe impl<T, U> Send for OwnedRwLockReadGuard<T, U>
where
    T: ?Sized + Send + Sync,
    U: ?Sized + Sync,
{
}
// SAFETY: `&guard` gives `&U` and `&Arc<RwLock<T>>`.
unsafe impl<T, U> Sync for OwnedRwLockReadGuard<T, U>
where
    T: ?Sized + Send + Sync,
    U: ?Sized + Send + Sync,
{
}

// SAFETY: the guard gives `&mut T` and `&T` to whichever thread holds it, and may drop the
// last `Arc` there.
unsafe impl<T: ?Sized + Send + Sync> Send for OwnedRwLockWriteGuard<T> {}
// SAFETY: `&guard` gives `&T`.
unsafe impl<T: ?Sized + Send + Sync> Sync for OwnedRwLockWriteGuard<T> {}

// SAFETY: the guard gives `&mut U`/`&U` to whichever thread holds it, and may drop the
// last `Arc` (and the `T`) there.
unsafe impl<T, U> Send for OwnedRwLockMappedWriteGuard<T, U>
where
    T: ?Sized + Send + Sync,
    U: ?Sized + Send + Sync,
{
}
// SAFETY: `&guard` gives `&U` and `&Arc<RwLock<T>>`.
unsafe impl<T, U> Sync for OwnedRwLockMappedWriteGuard<T, U>
where
    T: ?Sized + Send + Sync,
    U: ?Sized + Send + Sync,
{
}

// SAFETY: as the borrowed upgradable guard's: it may become a write guard on the thread
// it is sent to, and may drop the last `Arc` there.
unsafe impl<T: ?Sized + Send + Sync> Send for OwnedRwLockUpgradableReadGuard<T> {}
// SAFETY: `&guard` gives `&T` only.
unsafe impl<T: ?Sized + Send + Sync> Sync for OwnedRwLockUpgradableReadGuard<T> {}

/// The variance of every public type, and the proof for those that hand out `&mut`.
///
/// | type | in `'a` | in `T` | in `U` |
/// |---|---|---|---|
/// | `RwLock<T>` | | invariant (`UnsafeCell<T>`) | |
/// | `RwLockReadGuard<'a, T>` | covariant | covariant | |
/// | `RwLockWriteGuard<'a, T>` | covariant | invariant | |
/// | `RwLockMappedWriteGuard<'a, T>` | covariant | invariant | |
/// | `RwLockUpgradableReadGuard<'a, T>` | covariant | invariant (it can become a write guard) | |
/// | `Upgrade<'a, T>` | covariant | invariant | |
/// | `OwnedRwLockReadGuard<T, U>` | | invariant (`Arc<RwLock<T>>`) | covariant |
/// | `OwnedRwLockWriteGuard<T>` | | invariant | |
/// | `OwnedRwLockMappedWriteGuard<T, U>` | | invariant | invariant |
/// | `OwnedRwLockUpgradableReadGuard<T>` | | invariant | |
///
/// A type that hands out `&mut` to its value must be invariant in it: if a guard over a
/// `&'static str` could be seen as one over a `&'short str`, safe code could store a
/// short-lived reference in the lock and read it after it is freed. None of these
/// compile (each is a `compile_fail` doctest):
///
/// ```compile_fail
/// use async_rwsem::RwLockWriteGuard;
/// fn shorten<'a, 'b>(g: RwLockWriteGuard<'a, &'static str>) -> RwLockWriteGuard<'a, &'b str> {
///     g
/// }
/// ```
///
/// ```compile_fail
/// use async_rwsem::RwLockMappedWriteGuard;
/// fn shorten<'a, 'b>(
///     g: RwLockMappedWriteGuard<'a, &'static str>,
/// ) -> RwLockMappedWriteGuard<'a, &'b str> {
///     g
/// }
/// ```
///
/// ```compile_fail
/// use async_rwsem::RwLockUpgradableReadGuard;
/// fn shorten<'a, 'b>(
///     g: RwLockUpgradableReadGuard<'a, &'static str>,
/// ) -> RwLockUpgradableReadGuard<'a, &'b str> {
///     g
/// }
/// ```
///
/// ```compile_fail
/// use async_rwsem::Upgrade;
/// fn shorten<'a, 'b>(g: Upgrade<'a, &'static str>) -> Upgrade<'a, &'b str> {
///     g
/// }
/// ```
///
/// ```compile_fail
/// use async_rwsem::OwnedRwLockWriteGuard;
/// fn shorten<'b>(g: OwnedRwLockWriteGuard<&'static str>) -> OwnedRwLockWriteGuard<&'b str> {
///     g
/// }
/// ```
///
/// ```compile_fail
/// use async_rwsem::OwnedRwLockMappedWriteGuard;
/// fn shorten<'b>(
///     g: OwnedRwLockMappedWriteGuard<(), &'static str>,
/// ) -> OwnedRwLockMappedWriteGuard<(), &'b str> {
///     g
/// }
/// ```
///
/// ```compile_fail
/// use async_rwsem::OwnedRwLockUpgradableReadGuard;
/// fn shorten<'b>(
///     g: OwnedRwLockUpgradableReadGuard<&'static str>,
/// ) -> OwnedRwLockUpgradableReadGuard<&'b str> {
///     g
/// }
/// ```
///
/// The read guards stay covariant, so that a guard over a longer-lived value can be
/// passed where a shorter one is expected; `bounds()` in the tests compiles that.
#[allow(dead_code)] // carries the documentation and the doctests above
const VARIANCE: () = ();
