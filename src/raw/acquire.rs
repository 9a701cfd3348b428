//! The acquire future: one type for readers and writers, holding its wait-list node.
//!
//! # States
//!
//! | phase | node | meaning |
//! |---|---|---|
//! | `Init` | [`IDLE`](super::list::IDLE) | not polled yet |
//! | `Yielding(n)` | idle | a writer that spun in vain, yielding to the executor `n` more times |
//! | `Queued` | [`WAITING`](super::list::WAITING), linked | waiting; a re-poll checks for a grant or (a writer) tries for the lock |
//! | `Queued` | [`GRANTED`](super::list::GRANTED), unlinked | a waker took the lock for us; the next poll completes |
//! | `Queued` | idle, unlinked | a writer took the lock under the wait lock; completes at once |
//! | `Done` | idle | the lock was handed to the caller (a guard owns it now) |
//!
//! Dropping the future in `Queued` calls [`RawRwLock::cancel`], which unlinks a waiting
//! node (passing the wake-up on) or releases a granted lock. In every other phase the
//! node is not linked and nothing needs undoing: the future is cancel safe in every state.

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use std::sync::atomic::Ordering;

use super::list::{Kind, Waiter, GRANTED};
use super::stats::lockevent;
use super::RawRwLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Init,
    Yielding(u32),
    Queued,
    Done,
}

/// Resolves once the caller owns the lock in the node's kind. The node makes it `!Unpin`.
///
/// Pinning is projected by hand (not with `pin-project-lite`) so that the `Drop` that
/// runs after every completed acquire is a plain, inlinable phase check.
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub(crate) struct Acquire<'a> {
    lock: &'a RawRwLock,
    phase: Phase,
    /// When this acquire first had to wait (feature `tracing`).
    #[cfg(feature = "tracing")]
    waiting_since: Option<std::time::Instant>,
    /// Structurally pinned: never moved out of, only reached through `&`.
    node: Waiter,
}

impl Drop for Acquire<'_> {
    #[inline]
    fn drop(&mut self) {
        match self.phase {
            Phase::Queued => self.cancel(),
            // An upgrade not yet polled still owns the upgradable read lock.
            Phase::Init if self.node.kind == Kind::Upgrader => self.release_upgradable(),
            _ => {}
        }
    }
}

impl<'a> Acquire<'a> {
    /// A pending read acquire of `lock`.
    #[inline]
    pub(crate) fn read(lock: &'a RawRwLock) -> Self {
        Self::new(lock, Kind::Reader)
    }

    /// A pending write acquire of `lock`.
    #[inline]
    pub(crate) fn write(lock: &'a RawRwLock) -> Self {
        Self::new(lock, Kind::Writer)
    }

    /// A pending upgradable-read acquire of `lock`.
    #[inline]
    pub(crate) fn upgradable_read(lock: &'a RawRwLock) -> Self {
        Self::new(lock, Kind::Upgradable)
    }

    /// A pending upgrade of the upgradable read lock the caller owns on `lock`. The future
    /// owns that lock from now on: it trades it for the write lock, or releases it when
    /// dropped unfinished.
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock of `lock` and hands it to the future.
    #[inline]
    pub(crate) unsafe fn upgrade(lock: &'a RawRwLock) -> Self {
        Self::new(lock, Kind::Upgrader)
    }

    #[inline]
    fn new(lock: &'a RawRwLock, kind: Kind) -> Self {
        Self {
            lock,
            phase: Phase::Init,
            #[cfg(feature = "tracing")]
            waiting_since: None,
            node: Waiter::new(kind),
        }
    }
}

impl Future for Acquire<'_> {
    type Output = ();

    /// The fast paths, inlined into the caller: one `fetch_add` for a reader, one CAS for
    /// a writer. Everything else is in [`Acquire::poll_slow`].
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `node` is never moved out of (only `&` to it is taken, in `poll_slow`
        // and `cancel`); the other fields are not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if this.phase == Phase::Init {
            let fast = match this.node.kind {
                Kind::Reader => this.lock.read_fast(),
                Kind::Writer if this.lock.write_fast() => Ok(()),
                Kind::Upgradable if this.lock.try_upgradable_read() => Ok(()),
                // SAFETY: an upgrader in phase `Init` owns the upgradable read lock.
                Kind::Upgrader if unsafe { this.lock.try_upgrade() } => Ok(()),
                // The other slow paths reload the count.
                Kind::Writer | Kind::Upgradable | Kind::Upgrader => Err(0),
            };
            return match fast {
                Ok(()) => done(&mut this.phase),
                Err(count) => this.poll_slow_traced(cx, count),
            };
        }
        this.poll_slow_traced(cx, 0)
    }
}

impl Acquire<'_> {
    /// [`poll_slow`](Self::poll_slow), with the kernel's `contention_begin` /
    /// `contention_end` as `tracing` events when the feature is on: one when the task
    /// first has to wait, one when it gets the lock (or gives up), with the wait time.
    #[inline]
    fn poll_slow_traced(&mut self, cx: &mut Context<'_>, count: usize) -> Poll<()> {
        let poll = self.poll_slow(cx, count);
        #[cfg(feature = "tracing")]
        match (&poll, self.waiting_since) {
            (Poll::Pending, None) => {
                self.waiting_since = Some(std::time::Instant::now());
                tracing::trace!(
                    target: "async_rwsem::contention",
                    lock = ?std::ptr::from_ref(self.lock),
                    kind = ?self.node.kind,
                    "contention_begin"
                );
            }
            (Poll::Ready(()), Some(since)) => {
                // We own the lock, and the caller makes its guard only once we return: if
                // the subscriber panics, release the lock on the way out.
                let release = ReleaseOnUnwind(self.lock, self.node.kind);
                tracing::trace!(
                    target: "async_rwsem::contention",
                    lock = ?std::ptr::from_ref(self.lock),
                    kind = ?self.node.kind,
                    wait_us = since.elapsed().as_micros() as u64,
                    acquired = true,
                    "contention_end"
                );
                std::mem::forget(release);
            }
            _ => {}
        }
        poll
    }

    /// Everything but the fast paths. `count` is the count word the failed fast path saw
    /// (with a reader's bias in it) when called in phase `Init`.
    ///
    /// Called on a pinned future only (from `poll`): `self.node` does not move.
    #[cold]
    #[inline(never)]
    fn poll_slow(&mut self, cx: &mut Context<'_>, count: usize) -> Poll<()> {
        let this = self;
        let lock = this.lock;
        let kind = this.node.kind;
        let node = NonNull::from(&this.node);
        match this.phase {
            // Every path to the queue clones the waker first, before the phase or the count
            // changes: the clone is foreign code, and a panic in it must leave the future
            // in a phase whose drop undoes exactly what is held.
            Phase::Init => match kind {
                Kind::Upgradable => {
                    let waker = cx.waker().clone();
                    this.phase = Phase::Queued;
                    // SAFETY: as for the reader below.
                    unsafe { lock.upgradable_queue(node, waker) };
                    if this.node.state.load(Ordering::Acquire) == GRANTED {
                        return done(&mut this.phase);
                    }
                    return Poll::Pending;
                }
                Kind::Upgrader => {
                    // In phase `Init` a panic here leaves the upgradable read lock to our
                    // drop, which releases it.
                    let waker = cx.waker().clone();
                    this.phase = Phase::Queued;
                    // SAFETY: as for the reader below; the future owns the upgradable
                    // read lock (phase `Init` until now).
                    if unsafe { lock.upgrade_queue(node, waker) } {
                        return done(&mut this.phase);
                    }
                    return Poll::Pending;
                }
                Kind::Reader => {
                    if lock.read_slowpath(count) {
                        return done(&mut this.phase);
                    }
                    // Our bias is in the count: a panicking clone takes it back.
                    let waker = lock.clone_waker_biased(cx.waker());
                    this.phase = Phase::Queued;
                    // SAFETY: our bias is in the count; the node is pinned in this future,
                    // idle, and unlinked by our drop while queued (phase `Queued` is set
                    // before it can be linked).
                    if unsafe { lock.read_queue(node, waker) } {
                        return done(&mut this.phase);
                    }
                    // Queued with our waker registered; our own queueing may have granted us.
                    if this.node.state.load(Ordering::Acquire) == GRANTED {
                        return done(&mut this.phase);
                    }
                    return Poll::Pending;
                }
                Kind::Writer => {
                    if lock.write_spin() {
                        return done(&mut this.phase);
                    }
                    let yields = lock.policy().writer_yields;
                    if yields > 0 {
                        this.phase = Phase::Yielding(yields - 1);
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    let waker = cx.waker().clone();
                    this.phase = Phase::Queued;
                    // SAFETY: as for the reader.
                    if unsafe { lock.write_queue(node, waker) } {
                        return done(&mut this.phase);
                    }
                    return Poll::Pending;
                }
            },
            Phase::Yielding(left) => {
                if lock.write_fast() {
                    lockevent!(lock, wlock_yield);
                    return done(&mut this.phase);
                }
                if left > 0 {
                    this.phase = Phase::Yielding(left - 1);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                let waker = cx.waker().clone();
                this.phase = Phase::Queued;
                // SAFETY: as for the reader.
                if unsafe { lock.write_queue(node, waker) } {
                    return done(&mut this.phase);
                }
                return Poll::Pending;
            }
            Phase::Queued => {}
            Phase::Done => panic!("`Acquire` polled after completion"),
        }
        // SAFETY: the node is ours, pinned, and was queued on `lock`.
        if unsafe { lock.poll_queued(node, cx.waker()) } {
            done(&mut this.phase)
        } else {
            Poll::Pending
        }
    }
}

impl Acquire<'_> {
    /// Dropped before its first poll: an upgrade gives up the upgradable read lock.
    #[cold]
    #[inline(never)]
    fn release_upgradable(&mut self) {
        // SAFETY: an upgrader in phase `Init` owns the upgradable read lock.
        unsafe { self.lock.unlock_upgradable() };
        lockevent!(self.lock, wlock_cancel);
    }

    /// Dropped while queued: unlink the node or release a granted lock.
    #[cold]
    #[inline(never)]
    fn cancel(&mut self) {
        let node = NonNull::from(&self.node);
        // SAFETY: the node is ours and was queued on this lock; a future in phase `Queued`
        // has been polled, hence pinned, so the node has not moved since it was linked;
        // it is not touched again after this call.
        unsafe { self.lock.cancel(node) };
        // Only now, with the node unlinked: a panicking subscriber must not unwind out of
        // this drop while the node is still in the list.
        #[cfg(feature = "tracing")]
        if let Some(since) = self.waiting_since {
            tracing::trace!(
                target: "async_rwsem::contention",
                lock = ?std::ptr::from_ref(self.lock),
                kind = ?self.node.kind,
                wait_us = since.elapsed().as_micros() as u64,
                acquired = false,
                "contention_end"
            );
        }
    }
}

#[inline]
fn done(phase: &mut Phase) -> Poll<()> {
    *phase = Phase::Done;
    Poll::Ready(())
}

/// Releases a lock of `kind` if dropped: armed while foreign code runs between the moment
/// an acquire owns the lock and the moment its guard exists.
#[cfg(feature = "tracing")]
struct ReleaseOnUnwind<'a>(&'a RawRwLock, Kind);

#[cfg(feature = "tracing")]
impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        // SAFETY: armed only while the acquire owns a lock of this kind (a granted upgrade
        // owns the write lock), and disarmed (forgotten) when the guard takes it over.
        unsafe { self.0.unlock(self.1) }
    }
}
