//! Lock tokens: the one place the typed layer takes, changes and releases a lock of the
//! raw lock.
//!
//! A [`Token<L, M>`] is the ownership of one lock of a [`RawRwLock`] in one mode `M`
//! ([`Read`], [`Write`] or [`Upgradable`]), reached through `L`: `&'a RawRwLock` for the
//! borrowed guards, `Arc<RwLock<T>>` for the owned ones. Its invariant: **a token exists
//! exactly while its lock is owned.** A token is made only by [`Token::try_lock`], which
//! takes the lock, by [`Token::new`] (unsafe) once [`lock`] has taken it,
//! and by the mode changes and upgrades below, which consume the token that owned the lock
//! without releasing it; its `Drop` is the only release. So the lock is owned by one token
//! at a time, and released once.
//!
//! Each guard is a token plus a pointer to the part of the value it gives access to, and
//! has no `Drop` of its own: dropping the guard drops the token, which releases the lock,
//! and for an owned guard only then drops the `Arc` (a struct's `Drop` runs before its
//! fields are dropped), so the lock outlives its release.

use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::ptr;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::RwLock;
use crate::raw::list::WaiterKind;
use crate::raw::{LockFuture, RawRwLock};

/// How a token reaches its raw lock.
///
/// # Safety
///
/// [`raw`](Self::raw) returns the same lock at every call, alive for as long as `self` is.
pub(crate) unsafe trait RawRef {
    /// The raw lock.
    fn raw(&self) -> &RawRwLock;
}

// SAFETY: the reference points to one lock, alive for `'a`.
unsafe impl RawRef for &RawRwLock {
    #[inline]
    fn raw(&self) -> &RawRwLock {
        self
    }
}

// SAFETY: the `Arc` points to one lock and keeps it alive.
unsafe impl<T: ?Sized> RawRef for Arc<RwLock<T>> {
    #[inline]
    fn raw(&self) -> &RawRwLock {
        &self.raw
    }
}

/// A mode a lock is owned in: how it is taken and how it is released.
pub(crate) trait Mode {
    /// The waiter kind that is granted a lock of this mode.
    const KIND: WaiterKind;

    /// Takes the lock in this mode if that needs no waiting.
    fn try_lock(raw: &RawRwLock) -> bool;

    /// The uncontended path: takes the lock in one atomic step if it can. On failure
    /// (`false`), call [`slow`](Self::slow) at once: it takes over what the fast path left
    /// (a reader's bias in the count).
    fn fast(raw: &RawRwLock) -> bool;

    /// The future that takes the lock after [`fast`](Self::fast) failed.
    ///
    /// # Safety
    ///
    /// `fast` failed just now, on `raw` (a reader's bias in the count goes to the future).
    unsafe fn slow(raw: &RawRwLock) -> LockFuture<'_>;

    /// Gives up the lock.
    ///
    /// # Safety
    ///
    /// The caller owns the lock of `raw` in this mode, and owns it no more afterwards.
    unsafe fn release(raw: &RawRwLock);
}

/// A read lock: shared with other readers and the upgradable reader.
pub(crate) struct Read;

/// The write lock: exclusive.
pub(crate) struct Write;

/// The upgradable read lock: shared with plain readers, one at a time.
pub(crate) struct Upgradable;

impl Mode for Read {
    const KIND: WaiterKind = WaiterKind::Read;

    #[inline]
    fn try_lock(raw: &RawRwLock) -> bool {
        raw.try_read()
    }

    #[inline]
    fn fast(raw: &RawRwLock) -> bool {
        raw.read_fast()
    }

    #[inline]
    unsafe fn slow(raw: &RawRwLock) -> LockFuture<'_> {
        // SAFETY: forwarded from the caller.
        unsafe { LockFuture::after_fast_path(raw, WaiterKind::Read) }
    }

    #[inline]
    unsafe fn release(raw: &RawRwLock) {
        // SAFETY: the caller owns a read lock and gives it up.
        unsafe { raw.unlock_read() }
    }
}

impl Mode for Write {
    const KIND: WaiterKind = WaiterKind::Write;

    #[inline]
    fn try_lock(raw: &RawRwLock) -> bool {
        raw.try_write()
    }

    #[inline]
    fn fast(raw: &RawRwLock) -> bool {
        raw.write_fast()
    }

    #[inline]
    unsafe fn slow(raw: &RawRwLock) -> LockFuture<'_> {
        // SAFETY: forwarded from the caller.
        unsafe { LockFuture::after_fast_path(raw, WaiterKind::Write) }
    }

    #[inline]
    unsafe fn release(raw: &RawRwLock) {
        // SAFETY: the caller owns the write lock and gives it up.
        unsafe { raw.unlock_write() }
    }
}

impl Mode for Upgradable {
    const KIND: WaiterKind = WaiterKind::UpgradableRead;

    #[inline]
    fn try_lock(raw: &RawRwLock) -> bool {
        raw.try_upgradable_read()
    }

    #[inline]
    fn fast(raw: &RawRwLock) -> bool {
        raw.try_upgradable_read()
    }

    #[inline]
    unsafe fn slow(raw: &RawRwLock) -> LockFuture<'_> {
        // SAFETY: forwarded from the caller.
        unsafe { LockFuture::after_fast_path(raw, WaiterKind::UpgradableRead) }
    }

    #[inline]
    unsafe fn release(raw: &RawRwLock) {
        // SAFETY: the caller owns the upgradable read lock and gives it up.
        unsafe { raw.unlock_upgradable() }
    }
}

/// The ownership of a lock of the raw lock reached through `L`, in mode `M`; released
/// when dropped. See the module documentation for its invariant.
pub(crate) struct Token<L: RawRef, M: Mode> {
    lock: L,
    mode: PhantomData<M>,
}

/// The token of a borrowed guard.
pub(crate) type BorrowedToken<'a, M> = Token<&'a RawRwLock, M>;

/// The token of an owned guard.
pub(crate) type OwnedToken<T, M> = Token<Arc<RwLock<T>>, M>;

impl<L: RawRef, M: Mode> Token<L, M> {
    /// The token of a lock the caller has just taken: its [`lock`]
    /// future completed. (The `async fn` that makes a guard awaits the acquire itself: an
    /// `async fn` of the token's would nest one future in the other, and make every
    /// acquire future larger.)
    ///
    /// # Safety
    ///
    /// The caller owns a lock of `lock.raw()` in mode `M`, and hands it to the token.
    #[inline]
    pub(crate) unsafe fn new(lock: L) -> Self {
        Self {
            lock,
            mode: PhantomData,
        }
    }

    /// Takes the lock in mode `M` if that needs no waiting. On failure `lock` is dropped.
    #[inline]
    pub(crate) fn try_lock(lock: L) -> Option<Self> {
        if M::try_lock(lock.raw()) {
            // SAFETY: we own the lock in mode `M` now.
            Some(unsafe { Self::new(lock) })
        } else {
            None
        }
    }

    /// How the token reaches its lock (an owned guard's `rwlock`).
    #[inline]
    pub(crate) fn lock(&self) -> &L {
        &self.lock
    }

    /// The one place a lock reference leaves a token without a release: the caller passes
    /// the lock on (to a token of another mode, or to an upgrade). Dropping the result
    /// without doing so would leak the lock, never free it twice.
    #[inline]
    pub(crate) fn into_lock(self) -> L {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so `lock` is moved out exactly once.
        unsafe { ptr::read(&this.lock) }
    }

    /// Releases the lock fairly ([`RawRwLock::unlock_fair`]): the head of the queue, if
    /// any, is handed the lock. The lock reference (an owned guard's `Arc`) is dropped
    /// after the release, as by the token's `Drop`.
    #[inline]
    pub(crate) fn unlock_fair(self) {
        let lock = self.into_lock();
        // SAFETY: the token owned the lock in mode `M` (a lock of kind `M::KIND`); it is
        // consumed without its `Drop`, so this is the one release.
        unsafe { lock.raw().unlock_fair(M::KIND) }
    }

    /// The token of the same lock in mode `N`.
    ///
    /// # Safety
    ///
    /// The caller has just turned the lock from mode `M` into mode `N`.
    #[inline]
    unsafe fn into_mode<N: Mode>(self) -> Token<L, N> {
        // SAFETY: the lock is owned in mode `N` (the caller's promise), handed over.
        unsafe { Token::new(self.into_lock()) }
    }
}

impl<L: RawRef, M: Mode> Drop for Token<L, M> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a token exists only while its lock is owned in mode `M`; the `lock`
        // field (an `Arc`, perhaps) is dropped only after this.
        unsafe { M::release(self.lock.raw()) }
    }
}

impl<L: RawRef, M: Mode> Token<L, M> {
    /// A mode change in two halves: `change` turns the lock from mode `M` into mode `N` in
    /// one atomic step and says whether waiters are queued; if so, the waiters the new
    /// mode admits are granted and woken once the token of mode `N` exists. The wake-up
    /// is foreign code: if it panics, the unwind drops the new token, which releases the
    /// lock in the mode it is now owned in, once. (Waking before the old token is gone
    /// would release the old mode, which the lock is no longer in.)
    ///
    /// # Safety
    ///
    /// `change` turns a lock owned in mode `M` into one owned in mode `N`, and returns
    /// whether [`RawRwLock::wake_after_downgrade`] is due.
    #[inline]
    unsafe fn change_mode<N: Mode>(self, change: unsafe fn(&RawRwLock) -> bool) -> Token<L, N> {
        let lock = self.into_lock();
        // SAFETY: the lock is owned in mode `M` (the consumed token's), by the caller's
        // promise `change` turns it into mode `N`. Nothing between here and the new
        // token can unwind: a release in neither mode is never run.
        let wake = unsafe { change(lock.raw()) };
        // SAFETY: the lock is owned in mode `N` now, handed to the new token.
        let token = unsafe { Token::<L, N>::new(lock) };
        if wake {
            token.lock.raw().wake_after_downgrade();
        }
        token
    }
}

impl<L: RawRef> Token<L, Write> {
    /// Atomically turns the write lock into a read lock ([`RawRwLock::downgrade`]).
    #[inline]
    pub(crate) fn downgrade(self) -> Token<L, Read> {
        // SAFETY: `downgrade` turns the write lock into a read lock.
        unsafe { self.change_mode(RawRwLock::downgrade) }
    }

    /// Atomically turns the write lock into the upgradable read lock
    /// ([`RawRwLock::downgrade_to_upgradable`]).
    #[inline]
    pub(crate) fn downgrade_to_upgradable(self) -> Token<L, Upgradable> {
        // SAFETY: `downgrade_to_upgradable` turns the write lock into the upgradable read
        // lock.
        unsafe { self.change_mode(RawRwLock::downgrade_to_upgradable) }
    }
}

impl<L: RawRef> Token<L, Upgradable> {
    /// Gives up the right to upgrade: the upgradable read lock becomes a plain read lock
    /// ([`RawRwLock::downgrade_upgradable`]).
    #[inline]
    pub(crate) fn downgrade(self) -> Token<L, Read> {
        // SAFETY: `downgrade_upgradable` turns the upgradable read lock into a read lock.
        unsafe { self.change_mode(RawRwLock::downgrade_upgradable) }
    }

    /// Trades the upgradable read lock for the write lock if no other reader holds the
    /// lock; otherwise gives the token back.
    #[inline]
    pub(crate) fn try_upgrade(self) -> Result<Token<L, Write>, Self> {
        // SAFETY: we own the upgradable read lock.
        if unsafe { self.lock.raw().try_upgrade() } {
            // SAFETY: the upgrade succeeded: we own the write lock instead.
            Ok(unsafe { self.into_mode() })
        } else {
            Err(self)
        }
    }
}

// The two upgrades that wait. The borrowed one is a named future, as the public `Upgrade`
// holds it; the owned one is an `async fn`, as its acquire future borrows the `Arc` that
// the future itself holds.

impl<'a> BorrowedToken<'a, Upgradable> {
    /// Gives the upgradable read lock to an upgrade future, which trades it for the write
    /// lock, or releases it if dropped unfinished.
    #[inline]
    pub(crate) fn upgrade(self) -> Upgrading<'a> {
        let lock = self.into_lock();
        Upgrading {
            lock,
            // SAFETY: the token's upgradable read lock goes to the acquire future.
            acquire: unsafe { LockFuture::upgrade(lock) },
        }
    }
}

impl<T: ?Sized> OwnedToken<T, Upgradable> {
    /// The owned form of [`upgrade`](BorrowedToken::upgrade): resolves to the token of the
    /// write lock. Until its first poll the future holds the token, whose drop releases
    /// the lock; from then on the acquire future owns the lock, and releases it if dropped
    /// unfinished (before the `Arc`, declared first, is dropped).
    pub(crate) async fn upgrade(self) -> OwnedToken<T, Write> {
        let lock = self.into_lock();
        // SAFETY: the token's upgradable read lock goes to the acquire future.
        unsafe { LockFuture::upgrade(&lock.raw) }.await;
        // SAFETY: the upgrade completed: we own the write lock.
        unsafe { Token::new(lock) }
    }
}

/// A borrowed upgrade in flight: owns the upgradable read lock (inside `acquire`) until it
/// resolves to the token of the write lock. Dropped unfinished, it releases the lock.
pub(crate) struct Upgrading<'a> {
    lock: &'a RawRwLock,
    /// Structurally pinned.
    acquire: LockFuture<'a>,
}

impl<'a> Future for Upgrading<'a> {
    type Output = BorrowedToken<'a, Write>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `acquire` is structurally pinned: it is never moved out of, and is only
        // reached through this projection; `lock` is plain data.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let acquire = unsafe { Pin::new_unchecked(&mut this.acquire) };
        // SAFETY: the upgrade completed: we own the write lock.
        acquire.poll(cx).map(|()| unsafe { Token::new(this.lock) })
    }
}

#[cfg(any(feature = "tokio", all(test, async_rwsem_loom)))]
impl<'a> Upgrading<'a> {
    /// Stops the upgrade (its time ran out) but keeps the upgradable read lock
    /// ([`LockFuture::stop_upgrade`]): the token of the write lock if it was granted
    /// first, else that of the upgradable read lock. The future is done afterwards.
    pub(crate) fn stop(
        self: Pin<&mut Self>,
    ) -> Result<BorrowedToken<'a, Write>, BorrowedToken<'a, Upgradable>> {
        // SAFETY: `acquire` is structurally pinned (as in `poll`).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let acquire = unsafe { Pin::new_unchecked(&mut this.acquire) };
        if acquire.stop_upgrade() {
            // SAFETY: the upgrade was granted: we own the write lock.
            Ok(unsafe { Token::new(this.lock) })
        } else {
            // SAFETY: stopped: we own the upgradable read lock again.
            Err(unsafe { Token::new(this.lock) })
        }
    }
}

/// Takes the lock of `raw` in mode `M` if its fast path can; otherwise returns the lock
/// future (with its wait-list node) to await, which goes on from where the fast path
/// stopped. So an uncontended acquire builds no future and no node. Cancel safe, as the
/// lock future is: the fast path either took the lock or hands what it holds (a reader's
/// bias) to the future, which gives it back if dropped unpolled.
#[inline]
pub(crate) fn fast_path_or_future<M: Mode>(raw: &RawRwLock) -> Option<LockFuture<'_>> {
    // SAFETY: the fast path failed just now, on `raw`.
    (!M::fast(raw)).then(|| unsafe { M::slow(raw) })
}
