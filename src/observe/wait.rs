//! The waits, as the observers see them: [`Waiting`] wraps the raw lock future of an
//! acquire whose fast path failed, and turns its polls into the kernel's contention
//! events (`contention_begin` at the first poll that returns `Pending`, `contention_end`
//! when the acquire gets the lock or gives up, as `tracing` events) and into the wait
//! that `lock_stat` records ([`Wait`], the future's output, which the token made next
//! takes). The raw lock knows none of this: it only keeps the wait record the wrapper
//! writes into its node (feature `lock_stat`), for the "waiting too long" report of a
//! release.
//!
//! Without the features `tracing` and `lock_stat` the wrapper adds nothing to the future:
//! its watch is zero-sized, and its `poll` is the raw future's.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Site;
use crate::raw::LockFuture;

#[cfg(feature = "tracing")]
use crate::raw::list::WaiterKind;
#[cfg(feature = "tracing")]
use crate::raw::RawRwLock;

/// What an acquire waited, handed from its [`Waiting`] future to the token made next
/// ([`super::acquired`], or [`super::changed`] for an upgrade). Zero-sized without the
/// feature `lock_stat`; one word with it (so that it is passed in a register).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wait {
    /// The contended acquire's wait, from its start (`None`: it did not wait).
    #[cfg(feature = "lock_stat")]
    pub(crate) lock_stat: Option<crate::lock_stat::Grant>,
}

impl Wait {
    /// An acquire that did not wait: a fast path, a `try_` acquire, a mode change.
    pub(crate) const NONE: Self = Self {
        #[cfg(feature = "lock_stat")]
        lock_stat: None,
    };
}

/// The raw lock future of an acquire that takes the slow path, watched: resolves to the
/// [`Wait`] once the caller owns the lock. `!Unpin`, as the raw future.
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub(crate) struct Waiting<'a> {
    /// Structurally pinned: never moved out of.
    acquire: LockFuture<'a>,
    /// Declared after `acquire`: a cancelled acquire's `contention_end` runs once the raw
    /// future's drop has unlinked its node.
    watch: Watch<'a>,
}

/// What [`Waiting`] keeps of the wait: zero-sized without `tracing` and `lock_stat`.
#[derive(Debug)]
struct Watch<'a> {
    /// The lock and the kind, for the contention events.
    #[cfg(feature = "tracing")]
    lock: &'a RawRwLock,
    #[cfg(feature = "tracing")]
    kind: WaiterKind,
    /// When the acquire first had to wait (`Pending`), until its `contention_end`.
    #[cfg(feature = "tracing")]
    waiting_since: Option<crate::loom::Instant>,
    /// When the slow path began (`lock_stat::now_ns`; 0: not yet polled).
    #[cfg(feature = "lock_stat")]
    since: u64,
    /// Where the acquire was called.
    #[cfg(feature = "lock_stat")]
    site: Site,
    lifetime: PhantomData<&'a ()>,
}

impl<'a> Waiting<'a> {
    /// `acquire`, the lock future of an acquire called at `site`, watched.
    #[inline]
    #[cfg_attr(not(feature = "lock_stat"), allow(unused_variables))]
    pub(crate) fn new(acquire: LockFuture<'a>, site: Site) -> Self {
        Self {
            watch: Watch {
                #[cfg(feature = "tracing")]
                lock: acquire.lock(),
                #[cfg(feature = "tracing")]
                kind: acquire.kind(),
                #[cfg(feature = "tracing")]
                waiting_since: None,
                #[cfg(feature = "lock_stat")]
                since: 0,
                #[cfg(feature = "lock_stat")]
                site,
                lifetime: PhantomData,
            },
            acquire,
        }
    }

    /// Stops an upgrade before it completes, keeping the upgradable read lock
    /// ([`LockFuture::stop_upgrade`]): the [`Wait`] if the write lock was granted first
    /// (then the caller owns it), `None` if the caller owns the upgradable read lock
    /// again.
    pub(crate) fn stop_upgrade(self: Pin<&mut Self>) -> Option<Wait> {
        // SAFETY: `acquire` is structurally pinned: only reached through this projection.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let upgraded = unsafe { Pin::new_unchecked(&mut this.acquire) }.stop_upgrade();
        #[cfg(feature = "tracing")]
        if let Some(since) = this.watch.waiting_since.take() {
            // The subscriber is foreign code: if it panics, release what we hold.
            let held = if upgraded {
                WaiterKind::Upgrade
            } else {
                WaiterKind::UpgradableRead
            };
            let release = ReleaseOnUnwind(this.watch.lock, held);
            contention_end(this.watch.lock, this.watch.kind, since, upgraded);
            std::mem::forget(release);
        }
        upgraded.then(|| this.watch.granted())
    }
}

impl Watch<'_> {
    /// The wait of an acquire granted now.
    #[inline]
    fn granted(&self) -> Wait {
        Wait {
            #[cfg(feature = "lock_stat")]
            lock_stat: crate::lock_stat::Grant::since(self.since),
        }
    }
}

impl Future for Waiting<'_> {
    type Output = Wait;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Wait> {
        // SAFETY: `acquire` is structurally pinned: never moved out of, only reached
        // through this projection; `watch` is not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // An upgrade tries its own fast path first: it did not wait if that takes the lock.
        if this.acquire.upgrade_fast() {
            return Poll::Ready(Wait::NONE);
        }
        #[cfg(feature = "lock_stat")]
        if this.watch.since == 0 {
            // The wait starts: the first poll, the node not yet linked. Timed if sampled,
            // or if a threshold of the lock's warnings needs every wait's and hold's time.
            #[cfg(feature = "tracing")]
            let time_all = {
                let lock = this.acquire.lock();
                lock.warn_held_ns() != u64::MAX || lock.warn_waited_ns() != u64::MAX
            };
            #[cfg(not(feature = "tracing"))]
            let time_all = false;
            let (since, record) = crate::lock_stat::wait_starts(this.acquire.kind(), time_all);
            this.watch.since = since;
            this.acquire.set_record(crate::raw::list::WaitRecord {
                since: record,
                site: Some(this.watch.site.location()),
                reported: false,
            });
        }
        // SAFETY: as above.
        let poll = unsafe { Pin::new_unchecked(&mut this.acquire) }.poll(cx);
        #[cfg(feature = "tracing")]
        match (&poll, this.watch.waiting_since) {
            (Poll::Pending, None) => {
                let watch = &mut this.watch;
                watch.waiting_since = Some(watch.lock.clock.now());
                super::foreign(|| {
                    tracing::trace!(
                        target: "async_rwsem::contention",
                        lock = ?std::ptr::from_ref(watch.lock),
                        kind = %event_name(watch.kind),
                        "contention_begin"
                    );
                });
            }
            (Poll::Ready(()), Some(since)) => {
                this.watch.waiting_since = None;
                // We own the lock, and the caller makes its token only once we return: if
                // the subscriber panics, release the lock on the way out.
                let release = ReleaseOnUnwind(this.watch.lock, this.watch.kind);
                contention_end(this.watch.lock, this.watch.kind, since, true);
                std::mem::forget(release);
            }
            _ => {}
        }
        match poll {
            Poll::Ready(()) => Poll::Ready(this.watch.granted()),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(feature = "tracing")]
impl Drop for Watch<'_> {
    fn drop(&mut self) {
        // After the raw future's drop (a cancel): its node is unlinked. The drop may be an
        // unwind's (a task that panicked while it waited): `contention_end` goes through
        // `foreign`, which keeps a second panic from aborting the process.
        if let Some(since) = self.waiting_since {
            contention_end(self.lock, self.kind, since, false);
        }
    }
}

/// The `kind` field of the `tracing` events (their values since the first release).
#[cfg(feature = "tracing")]
fn event_name(kind: WaiterKind) -> &'static str {
    match kind {
        WaiterKind::Read => "Reader",
        WaiterKind::Write => "Writer",
        WaiterKind::UpgradableRead => "Upgradable",
        WaiterKind::Upgrade => "Upgrader",
    }
}

/// The kernel's `contention_end`, as a `tracing` event: the acquire of `lock` in mode
/// `kind` that first had to wait at `since` stops waiting, with the lock (`acquired`) or
/// without it. Through [`super::foreign`]: it may run during an unwind (a dropped
/// acquire).
#[cfg(feature = "tracing")]
fn contention_end(lock: &RawRwLock, kind: WaiterKind, since: crate::loom::Instant, acquired: bool) {
    super::foreign(|| {
        tracing::trace!(
            target: "async_rwsem::contention",
            lock = ?std::ptr::from_ref(lock),
            kind = %event_name(kind),
            wait_us = lock.clock.elapsed(since).as_micros() as u64,
            acquired,
            "contention_end"
        );
    });
}

/// Releases a lock of `kind` if dropped: armed while foreign code runs between the moment
/// an acquire owns the lock and the moment its token exists.
#[cfg(feature = "tracing")]
struct ReleaseOnUnwind<'a>(&'a RawRwLock, WaiterKind);

#[cfg(feature = "tracing")]
impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        // SAFETY: armed only while the acquire owns a lock of this kind (a granted upgrade
        // owns the write lock), and disarmed (forgotten) when the token takes it over.
        unsafe { self.0.unlock(self.1) }
    }
}
