//! The waiter's side of the protocol: the lock future, which holds its wait-list node, its
//! re-polls ([`RawRwLock::poll_queued`]) and its cancellation ([`RawRwLock::cancel`]).
//!
//! # States
//!
//! | phase | node | meaning |
//! |---|---|---|
//! | `Init` | `Idle` | not polled yet (an upgrade owns the upgradable read lock here) |
//! | `Yielding(n)` | `Idle` | a writer that spun in vain, yielding to the executor `n` more times |
//! | `Queued` | `Waiting`, linked | waiting; a re-poll checks for a grant or (a writer, an upgrade) tries for the lock |
//! | `Queued` | `Granted`, unlinked | a waker took the lock for us; the next poll completes |
//! | `Queued` | `Idle`, unlinked | we took the lock ourselves under the wait lock; completes at once |
//! | `Done` | `Idle` | the lock was handed to the caller (a guard owns it now) |
//!
//! Dropping the future in `Queued` calls [`RawRwLock::cancel`], which unlinks a waiting
//! node (passing the wake-up on) or releases a granted lock. In every other phase the
//! node is not linked and nothing needs undoing (but the upgrade's read lock in `Init`):
//! the future is cancel safe in every state. The waker is cloned before the phase moves
//! to `Queued`, so that a panicking clone leaves the future in a phase whose drop undoes
//! exactly what is held.

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::task::{Context, Poll, Waker};

use super::count::{HANDOFF, READER_BIAS, UPGRADABLE, WAITERS};
use super::list::{NodeState, Waiter, WaiterKind};
use super::stats::lockevent;
use super::wake::WakeType;
use super::write::{HeadSpin, WriterWaitState};
use super::RawRwLock;
use crate::loom::lock;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Init,
    /// Made by [`LockFuture::after_fast_path`]: the fast path failed, seeing this count
    /// word (for a reader, with its bias in it, which the future owns until it queues).
    FastFailed(usize),
    Yielding(u32),
    Queued,
    Done,
}

/// Resolves once the caller owns the lock of the node's kind. The node makes it `!Unpin`.
///
/// Pinning is projected by hand (not with `pin-project-lite`) so that the `Drop` that
/// runs after every completed acquire is a plain, inlinable phase check.
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub(crate) struct LockFuture<'a> {
    lock: &'a RawRwLock,
    phase: Phase,
    /// When this acquire first had to wait (feature `tracing`).
    #[cfg(feature = "tracing")]
    waiting_since: Option<std::time::Instant>,
    /// Structurally pinned: never moved out of, only reached through `&`.
    node: Waiter,
}

impl Drop for LockFuture<'_> {
    #[inline]
    fn drop(&mut self) {
        match self.phase {
            Phase::Queued => self.cancel(),
            // An upgrade not yet polled still owns the upgradable read lock.
            Phase::Init if self.node.kind == WaiterKind::Upgrade => self.release_upgradable(),
            // Never polled after its fast path failed: a reader gives its bias back.
            Phase::FastFailed(_) if self.node.kind == WaiterKind::Read => {
                // SAFETY: the bias the failed fast path added is ours.
                unsafe { self.lock.unlock_read() }
            }
            _ => {}
        }
    }
}

impl<'a> LockFuture<'a> {
    /// A pending upgrade of the upgradable read lock the caller owns on `lock`. The future
    /// owns that lock from now on: it trades it for the write lock, or releases it when
    /// dropped unfinished.
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock of `lock` and hands it to the future.
    #[inline]
    pub(crate) unsafe fn upgrade(lock: &'a RawRwLock) -> Self {
        Self::new(lock, WaiterKind::Upgrade)
    }

    /// The lock future of an acquire whose fast path (as [`RawRwLock::read_fast`],
    /// [`RawRwLock::write_fast`] or [`RawRwLock::try_upgradable_read`] take it) failed
    /// with `seen`: it goes on with the slow path. The typed layer tries the fast path
    /// first, so that an uncontended acquire never builds the future (and its node).
    ///
    /// # Safety
    ///
    /// `kind` is not an upgrade, and `seen` is what that fast path returned just now: for a
    /// reader, the count word with the reader's bias in it, which the future takes over
    /// (it keeps it as a lock, queues it, or gives it back when dropped).
    #[inline]
    pub(crate) unsafe fn after_fast_path(
        lock: &'a RawRwLock,
        kind: WaiterKind,
        seen: usize,
    ) -> Self {
        debug_assert!(kind != WaiterKind::Upgrade);
        let mut future = Self::new(lock, kind);
        future.phase = Phase::FastFailed(seen);
        future
    }

    #[inline]
    fn new(lock: &'a RawRwLock, kind: WaiterKind) -> Self {
        Self {
            lock,
            phase: Phase::Init,
            #[cfg(feature = "tracing")]
            waiting_since: None,
            node: Waiter::new(kind),
        }
    }
}

impl Future for LockFuture<'_> {
    type Output = ();

    /// Moves on from a failed fast path (or, for an upgrade, tries its own); everything
    /// else is in [`LockFuture::poll_slow`].
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `node` is never moved out of (only `&` to it is taken, in `poll_slow`
        // and `cancel`); the other fields are not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Phase::FastFailed(seen) = this.phase {
            // From here on, as after a failed fast path in phase `Init`.
            this.phase = Phase::Init;
            return this.poll_slow_traced(cx, seen);
        }
        if this.phase == Phase::Init {
            // Only an upgrade starts here (the other kinds start after their fast path):
            // its own fast path.
            debug_assert_eq!(this.node.kind, WaiterKind::Upgrade);
            // SAFETY: an upgrade in phase `Init` owns the upgradable read lock.
            if unsafe { this.lock.try_upgrade() } {
                return done(&mut this.phase);
            }
        }
        this.poll_slow_traced(cx, 0)
    }
}

impl LockFuture<'_> {
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
                    kind = %self.node.kind.event_name(),
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
                    kind = %self.node.kind.event_name(),
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
                WaiterKind::UpgradableRead => {
                    let waker = cx.waker().clone();
                    this.phase = Phase::Queued;
                    // SAFETY: as for the reader below.
                    unsafe { lock.upgradable_queue(node, waker) };
                    if this.node.state(Acquire) == NodeState::Granted {
                        return done(&mut this.phase);
                    }
                    return Poll::Pending;
                }
                WaiterKind::Upgrade => {
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
                WaiterKind::Read => {
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
                    if this.node.state(Acquire) == NodeState::Granted {
                        return done(&mut this.phase);
                    }
                    return Poll::Pending;
                }
                WaiterKind::Write => {
                    if lock.write_spin() {
                        return done(&mut this.phase);
                    }
                    // A yield buys a retry; with a handoff pending the lock is promised to
                    // the head (or granted to a task not yet run), so the retry cannot win:
                    // queue at once. Yielded tasks also sit in the run queue ahead of the
                    // granted one, which is where 240 writers lost most of their time.
                    let yields = if lock.handoff_pending() {
                        0
                    } else {
                        lock.policy.writer_yields()
                    };
                    return this.yield_or_queue(cx, yields);
                }
            },
            Phase::Yielding(left) => {
                if lock.write_fast() {
                    lockevent!(lock, wlock_yield);
                    return done(&mut this.phase);
                }
                return this.yield_or_queue(cx, left);
            }
            Phase::Queued => {}
            Phase::FastFailed(_) => unreachable!("`poll` moves on from `FastFailed`"),
            Phase::Done => panic!("a lock future polled after completion"),
        }
        // SAFETY: the node is ours, pinned, and was queued on `lock`.
        if unsafe { lock.poll_queued(node, cx.waker()) } {
            if kind == WaiterKind::Write {
                lock.owner_runs();
            }
            done(&mut this.phase)
        } else {
            Poll::Pending
        }
    }
}

impl LockFuture<'_> {
    /// A writer that could not take the lock: it yields to the executor (wakes itself and
    /// returns `Pending`) while `yields` last, then queues.
    fn yield_or_queue(&mut self, cx: &mut Context<'_>, yields: u32) -> Poll<()> {
        if yields > 0 {
            self.phase = Phase::Yielding(yields - 1);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let waker = cx.waker().clone();
        self.phase = Phase::Queued;
        let node = NonNull::from(&self.node);
        // SAFETY: the node is pinned in this future (we are called from `poll`), idle, and
        // unlinked by our drop while queued (phase `Queued` is set before it is linked).
        if unsafe { self.lock.write_queue(node, waker) } {
            done(&mut self.phase)
        } else {
            Poll::Pending
        }
    }

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
                kind = %self.node.kind.event_name(),
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
struct ReleaseOnUnwind<'a>(&'a RawRwLock, WaiterKind);

#[cfg(feature = "tracing")]
impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        // SAFETY: armed only while the acquire owns a lock of this kind (a granted upgrade
        // owns the write lock), and disarmed (forgotten) when the guard takes it over.
        unsafe { self.0.unlock(self.1) }
    }
}

impl RawRwLock {
    /// A re-poll of a queued node. Returns `true` when the owner now holds the lock (the
    /// node is unlinked and no longer `Waiting`).
    ///
    /// # Safety
    ///
    /// `node` belongs to the caller, was queued on `self` and is pinned.
    pub(crate) unsafe fn poll_queued(&self, node: NonNull<Waiter>, waker: &Waker) -> bool {
        // SAFETY: the node is alive (the caller owns it).
        let waiter = unsafe { node.as_ref() };
        if waiter.state(Acquire) != NodeState::Waiting {
            return true;
        }
        // A new waker, cloned without the wait lock held (foreign code may panic).
        let mut new_waker = None;
        // A head writer spins once per poll for a running owner (see `head_spin`).
        let mut spun = false;
        loop {
            let mut list = lock(&self.wait_list);
            if waiter.state(Relaxed) != NodeState::Waiting {
                return true;
            }
            let mut head_writer = false;
            // SAFETY: linked (`Waiting`) and we hold the wait lock.
            let acquired = unsafe {
                match waiter.kind {
                    WaiterKind::Write => {
                        let state: WriterWaitState = self.writer_wait_state(&list, node);
                        head_writer = state != WriterWaitState::NotFirst;
                        self.try_write_lock(&mut list, node, state)
                    }
                    WaiterKind::Upgrade => self.try_upgrade_own(&mut list, node),
                    WaiterKind::Read | WaiterKind::UpgradableRead => false,
                }
            };
            if acquired {
                return true;
            }
            // SAFETY: linked and we hold the wait lock.
            let old = unsafe {
                waiter.with_inner(|inner| {
                    if inner.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        return Ok(None);
                    }
                    // If a waker took the old one since we last looked (a woken writer),
                    // the attempt above answered that wake-up; the new one is next.
                    new_waker
                        .take()
                        .map(|new| inner.waker.replace(new))
                        .ok_or(())
                })
            };
            drop(list);
            match old {
                Ok(old) => {
                    drop(old);
                    if head_writer && !spun {
                        spun = true;
                        match self.head_spin(waiter) {
                            HeadSpin::Granted => return true,
                            HeadSpin::Free => continue,
                            HeadSpin::GaveUp => {}
                        }
                    }
                    return false;
                }
                Err(()) => new_waker = Some(waker.clone()),
            }
        }
    }

    /// A pending acquire is dropped (`rwsem_del_wake_waiter`): unlink the node, pass the
    /// wake-up (and any handoff) on to the next head, or release a lock already granted.
    ///
    /// # Safety
    ///
    /// `node` belongs to the caller, was queued on `self` and is pinned; after this call it
    /// is unlinked and may be freed.
    pub(crate) unsafe fn cancel(&self, node: NonNull<Waiter>) {
        // SAFETY: the node is alive (the caller owns it).
        let waiter = unsafe { node.as_ref() };
        let kind = waiter.kind;
        let granted = match waiter.state(Acquire) {
            NodeState::Granted => true,
            NodeState::Idle => false,
            NodeState::Waiting => {
                let (granted, waker) = self.with_wait_list(|list, wakers| {
                    match waiter.state(Relaxed) {
                        // Granted meanwhile, under the wait lock we then took.
                        NodeState::Granted => return (true, None),
                        NodeState::Idle => return (false, None),
                        NodeState::Waiting => {}
                    }
                    let was_head = list.head() == Some(node);
                    // SAFETY: `Waiting` means linked; we hold the wait lock.
                    let waker = unsafe {
                        list.remove(node);
                        waiter.with_inner(|inner| inner.waker.take())
                    };
                    waiter.set_state(NodeState::Idle, Relaxed);
                    if kind == WaiterKind::Upgrade {
                        // A dropped upgrade gives up the upgradable read lock it held too.
                        self.count.fetch_sub(READER_BIAS + UPGRADABLE, Release);
                    }
                    if list.is_empty() {
                        self.count.fetch_and(!(WAITERS | HANDOFF), Relaxed);
                    } else if was_head {
                        // The next head inherits any handoff, and may be able to run now.
                        self.mark_wake(list, WakeType::Any, wakers);
                    }
                    (false, waker)
                });
                // Foreign code, with nothing linked and the wait lock released.
                drop(waker);
                if !granted {
                    self.count_cancel(kind);
                    return;
                }
                true
            }
        };
        if granted {
            if kind == WaiterKind::Write {
                self.owner_runs();
            }
            // SAFETY: a granted node's owner holds the lock; it gives it up.
            unsafe { self.unlock(kind) };
            self.count_cancel(kind);
        }
    }

    #[inline]
    fn count_cancel(&self, kind: WaiterKind) {
        match kind {
            WaiterKind::Read | WaiterKind::UpgradableRead => lockevent!(self, rlock_cancel),
            WaiterKind::Write | WaiterKind::Upgrade => lockevent!(self, wlock_cancel),
        }
    }
}
