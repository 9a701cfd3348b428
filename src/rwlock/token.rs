//! Lock tokens: the one place the typed layer takes, changes and releases a lock of the
//! raw lock.
//!
//! A [`Token<L, M>`] is the ownership of one lock of a [`RawRwLock`] in one mode `M`
//! ([`Read`], [`Write`] or [`Upgradable`]), reached through `L`: `&'a ObservedLock` for the
//! borrowed guards, `Arc<RwLock<T>>` for the owned ones. Its invariant: **a token exists
//! exactly while its lock is owned.** A token is made only by [`Token::try_lock`], which
//! takes the lock, by [`Token::new`] (unsafe) once [`lock_or_wait`] (its fast path or
//! its future) has taken it, and by the mode changes and upgrades below, which consume the
//! token that owned the lock without releasing it; its `Drop` is the only release. So the
//! lock is owned by one token at a time, and released once.
//!
//! Each guard is a token plus a pointer to the part of the value it gives access to, and
//! has no `Drop` of its own: dropping the guard drops the token, which releases the lock,
//! and for an owned guard only then drops the `Arc` (a struct's `Drop` runs before its
//! fields are dropped), so the lock outlives its release.

use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::RwLock;
use crate::observe::{self, Attempt, Held, InFlight, ObservedLock, Site, Wait, Waiting};
use crate::raw::list::WaiterKind;
use crate::raw::{LockFuture, RawRwLock};

/// How a token reaches its raw lock (with the observers' state beside it), and how it
/// keeps that reference with what the observers know of the hold ([`Held`]).
///
/// A borrowed token keeps them, when the observers' features are on, in one pointer to a
/// record of a pool ([`observe::Kept`]), so that its guard stays two words (the lock and
/// the value) and is returned in registers; otherwise side by side.
///
/// # Safety
///
/// [`raw`](Self::raw) returns the same lock at every call, alive for as long as `self` is;
/// [`kept_raw`](Self::kept_raw) that lock, for as long as the kept value lives, which
/// [`unkeep`](Self::unkeep) gives back with the same hold.
pub(crate) unsafe trait RawRef: Sized {
    /// The reference as a token keeps it, with the hold.
    type Kept;

    /// The raw lock, with the observers' state.
    fn raw(&self) -> &ObservedLock;

    /// Keeps the reference and `held`.
    fn keep(self, held: Held) -> Self::Kept;

    /// The raw lock of a kept reference.
    fn kept_raw(kept: &Self::Kept) -> &ObservedLock;

    /// The raw lock and the hold kept with it (held in mode `kind`), to update.
    fn kept_split(kept: &mut Self::Kept, kind: WaiterKind) -> (&ObservedLock, &mut Held);

    /// The reference and the hold (held in mode `kind`) back.
    fn unkeep(kept: Self::Kept, kind: WaiterKind) -> (Self, Held);

    /// The raw lock of a kept reference whose hold is compact (`lock_stat` alone, a hold
    /// not timed: made again from the lock, [`observe::releasing_compact`]): `Some` only
    /// if the kept value owns nothing (its drop would do nothing, and so may be skipped).
    #[inline(always)]
    fn kept_compact(kept: &Self::Kept) -> Option<&ObservedLock> {
        let _ = kept;
        None
    }
}

// (`'a` is named for `Kept` with the observers' features: without them it is not needed.)
#[cfg_attr(
    not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")),
    allow(clippy::needless_lifetimes)
)]
// SAFETY: the reference points to one lock, alive for `'a`; `Kept` keeps that reference.
unsafe impl<'a> RawRef for &'a ObservedLock {
    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    type Kept = observe::Kept<'a>;
    #[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
    type Kept = (Self, Held);

    #[inline(always)]
    fn raw(&self) -> &ObservedLock {
        self
    }

    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    #[inline(always)]
    fn keep(self, held: Held) -> Self::Kept {
        observe::Kept::new(self, held)
    }

    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    #[inline(always)]
    fn kept_raw(kept: &Self::Kept) -> &ObservedLock {
        kept.lock()
    }

    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    #[inline(always)]
    fn kept_split(kept: &mut Self::Kept, kind: WaiterKind) -> (&ObservedLock, &mut Held) {
        (kept.lock(), kept.held_mut(kind))
    }

    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    #[inline(always)]
    fn unkeep(kept: Self::Kept, kind: WaiterKind) -> (Self, Held) {
        kept.into_parts(kind)
    }

    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    #[inline(always)]
    fn kept_compact(kept: &Self::Kept) -> Option<&ObservedLock> {
        kept.compact_lock()
    }

    #[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
    #[inline(always)]
    fn keep(self, held: Held) -> Self::Kept {
        (self, held)
    }

    #[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
    #[inline(always)]
    fn kept_raw(kept: &Self::Kept) -> &ObservedLock {
        kept.0
    }

    #[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
    #[inline(always)]
    fn kept_split(kept: &mut Self::Kept, _: WaiterKind) -> (&ObservedLock, &mut Held) {
        (kept.0, &mut kept.1)
    }

    #[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
    #[inline(always)]
    fn unkeep(kept: Self::Kept, _: WaiterKind) -> (Self, Held) {
        kept
    }
}

// SAFETY: the `Arc` points to one lock and keeps it alive; `Kept` keeps the `Arc`.
unsafe impl<T: ?Sized> RawRef for Arc<RwLock<T>> {
    type Kept = (Self, Held);

    #[inline(always)]
    fn raw(&self) -> &ObservedLock {
        &self.raw
    }

    #[inline(always)]
    fn keep(self, held: Held) -> Self::Kept {
        (self, held)
    }

    #[inline(always)]
    fn kept_raw(kept: &Self::Kept) -> &ObservedLock {
        &kept.0.raw
    }

    #[inline(always)]
    fn kept_split(kept: &mut Self::Kept, _: WaiterKind) -> (&ObservedLock, &mut Held) {
        (&kept.0.raw, &mut kept.1)
    }

    #[inline(always)]
    fn unkeep(kept: Self::Kept, _: WaiterKind) -> (Self, Held) {
        kept
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
        raw.write_fast()
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
    /// The lock reference, with what the observers ([`observe`]) know of this hold
    /// (nothing without their features). Taken only by the token's `Drop` and
    /// [`into_parts`](Self::into_parts).
    kept: ManuallyDrop<L::Kept>,
    mode: PhantomData<M>,
}

/// The token of a borrowed guard.
pub(crate) type BorrowedToken<'a, M> = Token<&'a ObservedLock, M>;

/// The token of an owned guard.
pub(crate) type OwnedToken<T, M> = Token<Arc<RwLock<T>>, M>;

impl<M: Mode> BorrowedToken<'_, M> {
    /// The lock.
    #[inline]
    pub(crate) fn lock(&self) -> &ObservedLock {
        self.raw()
    }
}

impl<T: ?Sized, M: Mode> OwnedToken<T, M> {
    /// The owned guard's `Arc` of its lock.
    #[inline]
    pub(crate) fn lock(&self) -> &Arc<RwLock<T>> {
        &self.kept.0
    }
}

impl<L: RawRef, M: Mode> Token<L, M> {
    /// The token of a lock the caller has just taken from `site` after `wait`
    /// ([`Wait::NONE`] on a fast path): its [`lock_or_wait`] completed. (The `async fn` that makes a guard awaits
    /// the acquire itself: an `async fn` of the token's would nest one future in the other,
    /// and make every acquire future larger.) Tells the observers ([`observe::acquired`], then
    /// [`observe::entered`] once the token exists, so that a panic there releases it).
    ///
    /// # Safety
    ///
    /// The caller owns a lock of `lock.raw()` in mode `M`, and hands it to the token.
    #[inline(always)]
    pub(crate) unsafe fn new(lock: L, site: Site, wait: Wait) -> Self {
        let held = observe::acquired(lock.raw(), M::KIND, site, wait);
        // SAFETY: forwarded from the caller.
        let token = unsafe { Self::from_parts(lock, held) };
        // (A copy of the hold, the token's as it is now.)
        observe::entered(token.raw(), M::KIND, &held);
        token
    }

    /// The token of a lock owned in mode `M`, with what the observers know of it.
    ///
    /// # Safety
    ///
    /// The caller owns a lock of `lock.raw()` in mode `M`, and hands it to the token.
    #[inline]
    unsafe fn from_parts(lock: L, held: Held) -> Self {
        Self {
            kept: ManuallyDrop::new(lock.keep(held)),
            mode: PhantomData,
        }
    }

    /// The raw lock, with the observers' state.
    #[inline(always)]
    fn raw(&self) -> &ObservedLock {
        L::kept_raw(&self.kept)
    }

    /// The observers have seen the lock turn from mode `from` into this token's: tells
    /// them ([`observe::changed`]; `upgrade`: an upgrade's wait and site).
    #[inline]
    fn changed(&mut self, from: WaiterKind, upgrade: Option<(Wait, Site)>) {
        // The hold kept is still the one of mode `from`.
        let (raw, held) = L::kept_split(&mut self.kept, from);
        observe::changed(raw, from, M::KIND, held, upgrade);
    }

    /// Takes the lock in mode `M` if that needs no waiting, for a `try_` acquire from
    /// `site`. On failure `lock` is dropped.
    #[inline]
    pub(crate) fn try_lock(lock: L, site: Site) -> Option<Self> {
        observe::acquiring(lock.raw(), M::KIND, site, Attempt::Try);
        if M::try_lock(lock.raw()) {
            // SAFETY: we own the lock in mode `M` now.
            Some(unsafe { Self::new(lock, site, Wait::NONE) })
        } else {
            None
        }
    }

    /// The one place a lock reference leaves a token without a release: the caller passes
    /// the lock on (to a token of another mode, or to an upgrade), with what the observers
    /// know of the hold. Dropping the result without doing so would leak the lock, never
    /// free it twice.
    #[inline]
    fn into_parts(self) -> (L, Held) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so `kept` is taken exactly once.
        L::unkeep(unsafe { ManuallyDrop::take(&mut this.kept) }, M::KIND)
    }

    /// Releases the lock fairly ([`RawRwLock::unlock_fair`]): the head of the queue, if
    /// any, is handed the lock. The lock reference (an owned guard's `Arc`) is dropped
    /// after the release, as by the token's `Drop`.
    #[inline]
    pub(crate) fn unlock_fair(self) {
        let (lock, held) = self.into_parts();
        // The observers record the release first; what they do after it runs once the
        // release is done, even if a wake-up in it panics (dropped by the unwind, after
        // the lock is released).
        let _released = observe::releasing(lock.raw(), M::KIND, held);
        // SAFETY: the token owned the lock in mode `M` (a lock of kind `M::KIND`); it is
        // consumed without its `Drop`, so this is the one release.
        unsafe { lock.raw().unlock_fair(M::KIND) }
    }

    /// The token of the same lock in mode `N`, carrying the same hold; tells the
    /// observers of the change ([`observe::changed`]).
    ///
    /// # Safety
    ///
    /// The caller has just turned the lock from mode `M` into mode `N`.
    #[inline]
    unsafe fn into_mode<N: Mode>(self) -> Token<L, N> {
        let (lock, held) = self.into_parts();
        // SAFETY: the lock is owned in mode `N` (the caller's promise), handed over.
        let mut token = unsafe { Token::<L, N>::from_parts(lock, held) };
        token.changed(M::KIND, None);
        token
    }
}

impl<L: RawRef, M: Mode> Drop for Token<L, M> {
    #[inline(always)]
    fn drop(&mut self) {
        // The common case inline (`lock_stat` alone, a hold not timed): nothing kept to
        // give back, the hold made again from the lock, no register kept across a call.
        // The others out of line.
        if let Some(lock) = L::kept_compact(&self.kept) {
            // `kept` owns nothing (`kept_compact`): not dropped, nothing lost. The
            // observers' common case has nothing to record (no call, so no register kept
            // across one); any other is recorded out of line, with the release.
            if observe::released_compact(lock, M::KIND) {
                // SAFETY: a token exists only while its lock is owned in mode `M`.
                unsafe { M::release(lock) };
            } else {
                Self::release_compact(lock);
            }
            return;
        }
        self.drop_kept();
    }
}

impl<L: RawRef, M: Mode> Token<L, M> {
    /// The release of a compact hold that [`observe::released_compact`] left to the
    /// observers' full path: out of line, the raw release included.
    #[cold]
    #[inline(never)]
    fn release_compact(lock: &ObservedLock) {
        let _released = observe::releasing_compact(lock, M::KIND);
        // SAFETY: called by the token's `Drop` (the token is gone after it), which owned
        // the lock in mode `M`.
        unsafe { M::release(lock) }
    }
}

impl<L: RawRef, M: Mode> Token<L, M> {
    /// The token's `Drop`, for a hold that is not compact: out of line in the builds
    /// that have compact holds (`lock_stat` alone), inline in the others.
    #[cfg_attr(
        all(
            feature = "lock_stat",
            not(feature = "lockdep"),
            not(feature = "tracing")
        ),
        inline(never)
    )]
    #[cfg_attr(
        not(all(
            feature = "lock_stat",
            not(feature = "lockdep"),
            not(feature = "tracing")
        )),
        inline(always)
    )]
    fn drop_kept(&mut self) {
        // SAFETY: `kept` is taken once, here, and the token is gone after this. (A
        // borrowed guard's record goes back to its pool now, before the release.)
        let (lock, held) = L::unkeep(unsafe { ManuallyDrop::take(&mut self.kept) }, M::KIND);
        // The observers record the release first (nothing there can panic); what they do
        // after it (foreign code) runs once the release is done, even if a wake-up in it
        // panics: the unwind drops this after the lock is released, and before `lock`
        // (an `Arc`, perhaps).
        let _released = observe::releasing(lock.raw(), M::KIND, held);
        // SAFETY: a token exists only while its lock is owned in mode `M`.
        unsafe { M::release(lock.raw()) }
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
        let (lock, held) = self.into_parts();
        // SAFETY: the lock is owned in mode `M` (the consumed token's), by the caller's
        // promise `change` turns it into mode `N`. Nothing between here and the new
        // token can unwind: a release in neither mode is never run.
        let wake = unsafe { change(lock.raw()) };
        // SAFETY: the lock is owned in mode `N` now, handed to the new token.
        let mut token = unsafe { Token::<L, N>::from_parts(lock, held) };
        // Foreign code may run in the observers and in the wake-up: a panic in either
        // drops the new token, whose release wakes whoever the lock now admits.
        token.changed(M::KIND, None);
        if wake {
            token.raw().wake_after_downgrade();
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
    /// lock; otherwise gives the token back. `site`: the caller's.
    #[inline]
    pub(crate) fn try_upgrade(self, site: Site) -> Result<Token<L, Write>, Self> {
        observe::acquiring(self.raw(), WaiterKind::Write, site, Attempt::Try);
        // SAFETY: we own the upgradable read lock.
        if unsafe { self.raw().try_upgrade() } {
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
    /// Gives the upgradable read lock to an upgrade future (from `site`), which trades it
    /// for the write lock, or releases it if dropped unfinished. The upgrade is announced
    /// to the observers at its first poll, in the flow of the future that polls it, as
    /// every async acquire is.
    #[inline]
    pub(crate) fn upgrade(self, site: Site) -> Upgrading<'a> {
        // While the token exists: a panic in tokio-console's subscriber releases the lock.
        let source = "RwLockUpgradableReadGuard::upgrade";
        let op = observe::AsyncOp::new(self.raw(), WaiterKind::Write, source);
        let (lock, held) = self.into_parts();
        Upgrading {
            lock,
            site,
            announced: false,
            // SAFETY: the token's upgradable read lock goes to the acquire future.
            acquire: Waiting::new(unsafe { LockFuture::upgrade(lock) }, site),
            held: InFlight::new(lock, WaiterKind::UpgradableRead, held),
            op,
        }
    }
}

impl<T: ?Sized> OwnedToken<T, Upgradable> {
    /// The owned form of [`upgrade`](BorrowedToken::upgrade) (from `site`): resolves to
    /// the token of the write lock. Until its first poll the future holds the token, whose
    /// drop releases the lock; from then on the acquire future owns the lock, and releases
    /// it if dropped unfinished (before `held` tells the observers, and before the `Arc`,
    /// declared first, is dropped).
    pub(crate) async fn upgrade(self, site: Site) -> OwnedToken<T, Write> {
        observe::acquiring(self.raw(), WaiterKind::Write, site, Attempt::Upgrade);
        let (lock, held) = self.into_parts();
        let held = InFlight::new(&lock.raw, WaiterKind::UpgradableRead, held);
        // SAFETY: the token's upgradable read lock goes to the acquire future.
        let wait = Waiting::new(unsafe { LockFuture::upgrade(&lock.raw) }, site).await;
        let held = held.into_inner();
        // SAFETY: the upgrade completed: we own the write lock.
        let mut token = unsafe { Token::<_, Write>::from_parts(lock, held) };
        token.changed(WaiterKind::UpgradableRead, Some((wait, site)));
        token
    }
}

/// A borrowed upgrade in flight: owns the upgradable read lock (inside `acquire`) until it
/// resolves to the token of the write lock. Dropped unfinished, it releases the lock, then
/// tells the observers (`held`, declared after `acquire`, is dropped after it).
pub(crate) struct Upgrading<'a> {
    lock: &'a ObservedLock,
    site: Site,
    /// Whether the observers were told of the upgrade ([`observe::acquiring`], at the
    /// first poll: a panic there, lockdep's report, drops the future, which releases the
    /// lock).
    announced: bool,
    /// Structurally pinned.
    acquire: Waiting<'a>,
    held: InFlight<'a>,
    /// The upgrade as tokio-console sees it (zero-sized without it), entered at each poll.
    op: observe::AsyncOp,
}

impl<'a> Future for Upgrading<'a> {
    type Output = BorrowedToken<'a, Write>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `acquire` is structurally pinned: it is never moved out of, and is only
        // reached through this projection; the other fields are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let acquire = unsafe { Pin::new_unchecked(&mut this.acquire) };
        let (lock, held) = (this.lock, &mut this.held);
        let (site, announced) = (this.site, &mut this.announced);
        this.op.poll(cx, |cx| {
            if !*announced {
                *announced = true;
                observe::acquiring(lock, WaiterKind::Write, site, Attempt::Upgrade);
            }
            let Poll::Ready(wait) = acquire.poll(cx) else {
                return Poll::Pending;
            };
            let held = held.take();
            // SAFETY: the upgrade completed: we own the write lock.
            let mut token = unsafe { Token::<_, Write>::from_parts(lock, held) };
            token.changed(WaiterKind::UpgradableRead, Some((wait, site)));
            Poll::Ready(token)
        })
    }
}

// The timed upgrades: an upgrade that, when its time runs out, is stopped instead of
// dropped, and gives back the token of the upgradable read lock
// ([`Waiting::stop_upgrade`]; the waiting itself is in `blocking` and `timeout`).

#[cfg(any(feature = "tokio", all(test, async_rwsem_loom)))]
impl<'a> Upgrading<'a> {
    /// Stops the upgrade (its time ran out) but keeps the upgradable read lock: the token
    /// of the write lock if it was granted first, else that of the upgradable read lock.
    /// The future is done afterwards.
    pub(crate) fn stop(
        self: Pin<&mut Self>,
    ) -> Result<BorrowedToken<'a, Write>, BorrowedToken<'a, Upgradable>> {
        // SAFETY: `acquire` is structurally pinned (as in `poll`).
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let acquire = unsafe { Pin::new_unchecked(&mut this.acquire) };
        let upgraded = acquire.stop_upgrade();
        let held = this.held.take();
        // SAFETY: the stop says which lock we own.
        unsafe { Token::after_timed_upgrade(this.lock, held, upgraded, this.site) }
    }
}

impl<L: RawRef> Token<L, Upgradable> {
    /// Upgrades to the write lock (from `site`), blocking the thread until `deadline` at
    /// most (`None`: no deadline): the token of the write lock, or, when the time ran
    /// out, that of the upgradable read lock, held throughout. Polled once more at the
    /// deadline, so an upgrade granted in time is kept. For both upgradable guards'
    /// `try_upgrade_for` and `try_upgrade_until`.
    pub(crate) fn upgrade_until(
        self,
        site: Site,
        deadline: Option<std::time::Instant>,
    ) -> Result<Token<L, Write>, Self> {
        // While the token exists: a panic in the observer releases the lock. A blocking
        // acquire: the thread's own (or the task's, blocked with it).
        observe::blocking(|| {
            observe::acquiring(self.raw(), WaiterKind::Write, site, Attempt::Upgrade);
        });
        let (lock, held) = self.into_parts();
        let (upgraded, held) = {
            // Declared before the acquire future: an unwind drops that first (it releases
            // the lock), then this, which tells the observers.
            let held = InFlight::new(lock.raw(), WaiterKind::UpgradableRead, held);
            // SAFETY: the token's upgradable read lock goes to the acquire future.
            let acquire = unsafe { LockFuture::upgrade(lock.raw()) };
            let mut acquire = std::pin::pin!(Waiting::new(acquire, site));
            let upgraded = super::blocking::poll_until(acquire.as_mut(), deadline)
                .or_else(|| acquire.as_mut().stop_upgrade());
            (upgraded, held.into_inner())
        };
        // SAFETY: the upgrade (or the stop) says which lock we own.
        unsafe { Self::after_timed_upgrade(lock, held, upgraded, site) }
    }

    /// As [`upgrade_until`](Self::upgrade_until), awaiting the upgrade for `timeout` at
    /// most (feature `tokio`), for both upgradable guards' `upgrade_timeout`. Dropped
    /// before it resolves, the future releases the lock altogether, as an upgrade's does.
    #[cfg(feature = "tokio")]
    pub(crate) async fn upgrade_timeout(
        self,
        site: Site,
        timeout: std::time::Duration,
    ) -> Result<Token<L, Write>, Self> {
        observe::acquiring(self.raw(), WaiterKind::Write, site, Attempt::Upgrade);
        let (lock, held) = self.into_parts();
        let (upgraded, held) = {
            let held = InFlight::new(lock.raw(), WaiterKind::UpgradableRead, held);
            // The `Sleep` outlives the stop (see `race_upgrade`).
            let sleep = std::pin::pin!(tokio::time::sleep(timeout));
            // SAFETY: the token's upgradable read lock goes to the acquire future.
            let acquire = unsafe { LockFuture::upgrade(lock.raw()) };
            let mut acquire = std::pin::pin!(Waiting::new(acquire, site));
            let upgraded = match super::timeout::race_upgrade(acquire.as_mut(), sleep).await {
                Some(wait) => Some(wait),
                None => acquire.as_mut().stop_upgrade(),
            };
            (upgraded, held.into_inner())
        };
        // SAFETY: the upgrade (or the stop) says which lock we own.
        unsafe { Self::after_timed_upgrade(lock, held, upgraded, site) }
    }

    /// The end of a timed upgrade called at `site`: the token of the write lock (the
    /// observers told of the change, with the upgrade's wait) if `upgraded`, else that of
    /// the upgradable read lock, with `held`.
    ///
    /// # Safety
    ///
    /// The caller owns the write lock of `lock` if `upgraded` is `Some`, else its
    /// upgradable read lock; `held` is what the observers know of that hold.
    unsafe fn after_timed_upgrade(
        lock: L,
        held: Held,
        upgraded: Option<Wait>,
        site: Site,
    ) -> Result<Token<L, Write>, Self> {
        if let Some(wait) = upgraded {
            // SAFETY: the caller's promise: we own the write lock.
            let mut token = unsafe { Token::<L, Write>::from_parts(lock, held) };
            token.changed(WaiterKind::UpgradableRead, Some((wait, site)));
            Ok(token)
        } else {
            // SAFETY: the caller's promise: we own the upgradable read lock.
            Err(unsafe { Self::from_parts(lock, held) })
        }
    }
}

/// Takes the lock of `$raw` (an `&ObservedLock`) in mode `$mode` if its fast path can;
/// otherwise awaits the lock future (with its wait-list node) of the acquire called at
/// `$site`, which goes on from where the fast path stopped, watched by the observers
/// ([`Waiting`]). Evaluates to the [`Wait`] for [`Token::new`]; use it inside the `async`
/// block of an acquire. So an uncontended acquire builds no future and no node. Cancel
/// safe, as the lock future is: the fast path either took the lock or hands what it holds
/// (a reader's bias) to the future, which gives it back if dropped unpolled.
///
/// A macro rather than a function that returns the future to await: the future is built
/// in the operand of the `.await`, so the compiler writes it once, in place, in the
/// awaiting future's state. Returned from a function (as an `Option`, before), its 120
/// bytes were built in one part of that state and copied to another at the `.await`, and
/// the copy's wide loads of fields just written by narrower stores stalled on
/// store-to-load forwarding: on the 2-core AMD EPYC machine of `docs/performance.md` the
/// read acquire's `async` block took 5.9% of the samples of 40 readers and 40 writers
/// with tiny sections at one worker (tokio's: 2.2%; 2.7% without the copy), and the
/// shapes where every acquire queues gained 4-26% ("Round eleven").
macro_rules! lock_or_wait {
    ($mode:ty, $raw:expr, $site:expr) => {{
        let raw: &$crate::observe::ObservedLock = $raw;
        if <$mode as $crate::rwlock::token::Mode>::fast(raw) {
            $crate::observe::Wait::NONE
        } else {
            $crate::observe::Waiting::new(
                // SAFETY: the fast path failed just now, on `raw`: the future takes over
                // what it left (a reader's bias).
                unsafe { <$mode as $crate::rwlock::token::Mode>::slow(raw) },
                $site,
            )
            .await
        }
    }};
}
pub(crate) use lock_or_wait;
