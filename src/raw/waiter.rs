//! The waiter's side of the protocol: the lock future, which holds its wait-list node, its
//! re-polls ([`RawRwLock::poll_queued`]) and its cancellation ([`RawRwLock::cancel`]).
//!
//! # States
//!
//! | phase | node | meaning |
//! |---|---|---|
//! | `FastFailed(bias)` | `Idle` | a reader whose fast path failed, not polled yet: the future owns its bias ([`ReaderBias`]) |
//! | `Init` | `Idle` | the slow path from its start: holds nothing (an upgrade owns the upgradable read lock here); a reader takes a new bias |
//! | `Yielding(n)` | `Idle` | a writer that spun in vain, yielding to the executor `n` more times |
//! | `Queued` | `Waiting`, linked | waiting; a re-poll checks for a grant or (a writer, an upgrade) tries for the lock |
//! | `Queued` | `Granted`, unlinked | the count holds the lock for us (a waker granted it, or we took it ourselves under the wait lock); the next poll completes |
//! | `Queued` | `Idle`, unlinked | cancelled (only inside [`RawRwLock::cancel`]) |
//! | `Done` | `Idle` | the lock was handed to the caller (a guard owns it now) |
//!
//! Dropping the future in `Queued` calls [`RawRwLock::cancel`], which unlinks a waiting
//! node (passing the wake-up on) or releases a granted lock. In `FastFailed` the bias goes
//! back with the phase (its drop); in every other phase the node is not linked and nothing
//! needs undoing (but the upgrade's read lock in `Init`): the future is cancel safe in
//! every state.
//!
//! Foreign code (the waker's clone, another task's wake-up) runs only where an unwind
//! leaves the future in a phase whose drop (or next poll) undoes or completes exactly
//! what is held: the waker is cloned before the phase moves to `Queued` (a reader's bias
//! is a local [`ReaderBias`] then, given back by the unwind, and the future is left in
//! `Init`, which starts over); a queueing acquire that takes the lock itself marks its
//! node `Granted` before the wait lock is released and the collected wakers run.

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::task::{Context, Poll, Waker};

use super::count::{HANDOFF, READER_BIAS, UPGRADABLE, WAITERS};
use super::list::{NodeState, WaitList, Waiter, WaiterKind, WakeList};
use super::read::ReaderBias;
use super::stats::lockevent;
use super::wake::WakeType;
use super::write::{HeadSpin, WriterWaitState};
use super::RawRwLock;

#[derive(Debug)]
enum Phase<'a> {
    Init,
    /// Made by [`LockFuture::after_fast_path`] for a reader: its fast path failed, and the
    /// future owns the bias that path left in the count (given back if it is dropped
    /// here; the first poll takes it on to the slow path).
    FastFailed(ReaderBias<'a>),
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
    phase: Phase<'a>,
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
            // In `FastFailed` the phase owns the reader's bias: dropped with the field.
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
    /// [`RawRwLock::write_fast`] or [`RawRwLock::try_upgradable_read`] take it) has just
    /// failed: it goes on with the slow path. The typed layer tries the fast path first,
    /// so that an uncontended acquire never builds the future (and its node).
    ///
    /// # Safety
    ///
    /// `kind` is not an upgrade, and that fast path failed just now, on `lock`: for a
    /// reader, its bias is in the count, and the future takes it over (it keeps it as a
    /// lock, queues it, or gives it back when dropped).
    #[inline]
    pub(crate) unsafe fn after_fast_path(lock: &'a RawRwLock, kind: WaiterKind) -> Self {
        debug_assert!(kind != WaiterKind::Upgrade);
        let mut future = Self::new(lock, kind);
        if kind == WaiterKind::Read {
            // SAFETY: the failed fast path's bias, handed over by the caller.
            future.phase = Phase::FastFailed(unsafe { ReaderBias::adopt(lock) });
        }
        future
    }

    #[inline]
    fn new(lock: &'a RawRwLock, kind: WaiterKind) -> Self {
        Self {
            lock,
            phase: Phase::Init,
            node: Waiter::new(kind),
        }
    }

    /// The kind of lock this future acquires.
    #[cfg(any(feature = "tracing", feature = "lock_stat"))]
    #[inline]
    pub(crate) fn kind(&self) -> WaiterKind {
        self.node.kind
    }

    /// The lock this future acquires.
    #[cfg(feature = "tracing")]
    #[inline]
    pub(crate) fn lock(&self) -> &'a RawRwLock {
        self.lock
    }

    /// Writes the node's [`WaitRecord`](super::list::WaitRecord) (where and since when the
    /// acquire waits, for the typed layer's diagnostics): before the first poll, while
    /// nobody else can see the node.
    #[cfg(feature = "lock_stat")]
    #[inline]
    pub(crate) fn set_record(&mut self, record: super::list::WaitRecord) {
        assert!(
            matches!(self.phase, Phase::Init | Phase::FastFailed(_)),
            "a wait record written after the first poll"
        );
        // SAFETY: before the first poll the node is `Idle` (never linked) and ours alone.
        unsafe { self.node.with_inner(|inner| inner.record = record) };
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
        match this.phase {
            // A re-poll of a granted node (a grant at a release, or the lock taken under
            // the wait lock) completes here, without the slow path: the grant's store of
            // `Granted` was its last touch of the node.
            Phase::Queued if this.node.state(Acquire) == NodeState::Granted => {
                if this.node.kind == WaiterKind::Write {
                    this.lock.owner_runs();
                } else {
                    this.wake_relay();
                }
                return done(&mut this.phase);
            }
            Phase::FastFailed(_) => {
                // From here on as in phase `Init`, the bias held by this poll: if it
                // unwinds, the bias goes back and the future, in `Init`, holds nothing.
                let Phase::FastFailed(bias) = std::mem::replace(&mut this.phase, Phase::Init)
                else {
                    unreachable!()
                };
                return this.poll_slow(cx, Some(bias));
            }
            _ => {}
        }
        if this.upgrade_fast() {
            return Poll::Ready(());
        }
        this.poll_slow(cx, None)
    }
}

impl LockFuture<'_> {
    /// Our node is `Granted`: wakes the reader granted in the same batch, if its wake-up
    /// was relayed to us (`wake::relay`). Before the phase moves on: if the waker panics,
    /// the future, still `Queued` with its node `Granted`, releases the lock when dropped
    /// (the waker is taken out first, so it is never woken twice).
    #[inline]
    fn wake_relay(&self) {
        // SAFETY: the node is `Granted` and ours: the grant's store of `Granted` (loaded
        // by us with `Acquire`) was the last touch of anyone else.
        if let Some(waker) = unsafe { self.node.with_inner(|inner| inner.relay.take()) } {
            super::list::wake_one(waker);
        }
    }

    /// An upgrade's own fast path, before its first poll: takes the write lock if no other
    /// reader holds the lock, and then the future is done (`true`). `false` for every
    /// other future and state: poll it. Lets a caller tell an upgrade that never waited
    /// from one that did.
    #[inline]
    pub(crate) fn upgrade_fast(&mut self) -> bool {
        if matches!(self.phase, Phase::Init) && self.node.kind == WaiterKind::Upgrade {
            // SAFETY: an upgrade in phase `Init` owns the upgradable read lock.
            if unsafe { self.lock.try_upgrade() } {
                self.phase = Phase::Done;
                return true;
            }
        }
        false
    }
}

impl LockFuture<'_> {
    /// Everything but the fast paths. `bias` is a reader's, from its failed fast path, on
    /// the first poll (phase `Init`).
    ///
    /// Called on a pinned future only (from `poll`): `self.node` does not move.
    #[cold]
    #[inline(never)]
    fn poll_slow(&mut self, cx: &mut Context<'_>, bias: Option<ReaderBias<'_>>) -> Poll<()> {
        let this = self;
        let lock = this.lock;
        let kind = this.node.kind;
        let node = NonNull::from(&this.node);
        debug_assert!(bias.is_none() || kind == WaiterKind::Read);
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
                        this.wake_relay();
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
                    let bias = match bias {
                        Some(bias) => bias,
                        // Polled in `Init` again (an earlier poll unwound and gave its bias
                        // back): from the fast path.
                        None if lock.read_fast() => return done(&mut this.phase),
                        // SAFETY: the fast path failed just now: its bias is ours.
                        None => unsafe { ReaderBias::adopt(lock) },
                    };
                    let bias = match lock.read_slowpath(bias) {
                        Ok(()) => return done(&mut this.phase),
                        Err(bias) => bias,
                    };
                    // A panicking clone drops `bias` (a read unlock) on its way out.
                    let waker = cx.waker().clone();
                    this.phase = Phase::Queued;
                    // SAFETY: the node is pinned in this future, idle, and unlinked (or its
                    // lock released) by our drop from now on (phase `Queued`).
                    unsafe { lock.read_queue(node, waker, bias) };
                    // Queued with our waker registered, or never queued; either way our
                    // own queueing may have granted us the lock.
                    if this.node.state(Acquire) == NodeState::Granted {
                        this.wake_relay();
                        return done(&mut this.phase);
                    }
                    return Poll::Pending;
                }
                WaiterKind::Write => {
                    if lock.write_spin() {
                        return done(&mut this.phase);
                    }
                    // A yield buys a retry; with a handoff pending the lock is promised to
                    // the head (or granted to a task not yet run), and with readers inside
                    // new readers keep joining them, so the retry cannot win: queue at
                    // once. Yielded tasks also sit in the run queue ahead of the granted
                    // one, which is where 240 writers lost most of their time.
                    let yields = if lock.yield_in_vain() {
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
            } else {
                this.wake_relay();
            }
            done(&mut this.phase)
        } else {
            Poll::Pending
        }
    }
}

impl LockFuture<'_> {
    /// Stops an upgrade before it completes, keeping the upgradable read lock: for a
    /// timed upgrade whose time ran out. Returns `true` if the write lock was granted
    /// first (then the caller owns it), `false` if the caller owns the upgradable read
    /// lock again. Either way the future is done: its drop releases nothing.
    ///
    /// Cancel safe and unwind safe: [`RawRwLock::stop_upgrade`] runs foreign code only
    /// once the node is unlinked, and meanwhile the phase is `Init`, whose drop releases
    /// the upgradable read lock; so an unwind leaves nothing linked and nothing held.
    pub(crate) fn stop_upgrade(self: Pin<&mut Self>) -> bool {
        // SAFETY: nothing is moved out; the node stays where it is.
        let this = unsafe { self.get_unchecked_mut() };
        debug_assert_eq!(this.node.kind, WaiterKind::Upgrade);
        match this.phase {
            // Never polled: it still holds the upgradable read lock, and nothing else.
            Phase::Init => {
                this.phase = Phase::Done;
                false
            }
            Phase::Queued => {
                let node = NonNull::from(&this.node);
                let upgraded = this.node.state(Acquire) == NodeState::Granted || {
                    // An unwind out of the call finds the node unlinked and the upgradable
                    // read lock held (`stop_upgrade` runs foreign code only then), which
                    // `Init`'s drop releases; if the upgrade was granted, none runs.
                    this.phase = Phase::Init;
                    // SAFETY: the node is ours, pinned (we were polled), queued on this
                    // lock; the phase no longer says `Queued`, so our drop will not touch
                    // it again.
                    unsafe { this.lock.stop_upgrade(node) }
                };
                this.phase = Phase::Done;
                upgraded
            }
            Phase::Done => panic!("an upgrade stopped after it completed"),
            Phase::Yielding(_) | Phase::FastFailed(_) => unreachable!("not an upgrade's phase"),
        }
    }

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
    }
}

#[inline]
fn done(phase: &mut Phase<'_>) -> Poll<()> {
    *phase = Phase::Done;
    Poll::Ready(())
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
            let mut list = self.wait_lock();
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
                    WaiterKind::Upgrade => self.upgrade_own_at_head(&mut list, node),
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
                    // A dropped upgrade gives up the upgradable read lock it held too.
                    let give_back = if kind == WaiterKind::Upgrade {
                        READER_BIAS + UPGRADABLE
                    } else {
                        0
                    };
                    // SAFETY: `Waiting` means linked in `list`, which we hold.
                    (false, unsafe {
                        self.unlink_waiting(list, node, give_back, wakers)
                    })
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
            // A wake-up relayed to us (`wake::relay`) is passed on after the unlock, so
            // that a panicking waker leaves no lock held.
            // SAFETY: the node is `Granted` (loaded with `Acquire`, or under the wait
            // lock) and ours again.
            let relay = unsafe { waiter.with_inner(|inner| inner.relay.take()) };
            if kind == WaiterKind::Write {
                self.owner_runs();
            }
            // SAFETY: a granted node's owner holds the lock; it gives it up.
            unsafe { self.unlock(kind) };
            self.count_cancel(kind);
            if let Some(relay) = relay {
                // A drop may run during an unwind: no second panic there.
                super::list::wake_one(relay);
            }
        }
    }

    /// Unlinks the `Waiting` node of an acquire that gives up (a cancel, a stopped
    /// upgrade) and returns its waker, for the caller to drop once the wait lock is
    /// released (foreign code). The node becomes `Idle`; `give_back` leaves the count
    /// first (what the waiter held while queued: an upgrade's upgradable read lock, or 0).
    /// Then the queue goes on as if the node had never queued: an empty list clears
    /// `WAITERS` and `HANDOFF`, and a new head inherits any handoff and is woken if it can
    /// run.
    ///
    /// # Safety
    ///
    /// `node` is `Waiting`, linked in `list`, the locked wait list of `self`, and the
    /// caller's own.
    pub(super) unsafe fn unlink_waiting(
        &self,
        list: &mut WaitList,
        node: NonNull<Waiter>,
        give_back: usize,
        wakers: &mut WakeList,
    ) -> Option<Waker> {
        let was_head = list.head() == Some(node);
        // SAFETY: linked in `list`, which we hold; the node is the caller's.
        let waiter = unsafe {
            list.remove(node);
            node.as_ref()
        };
        // SAFETY: unlinked just now, wait lock held.
        let waker = unsafe { waiter.with_inner(|inner| inner.waker.take()) };
        waiter.set_state(NodeState::Idle, Relaxed);
        if give_back != 0 {
            self.count.fetch_sub(give_back, Release);
        }
        if list.is_empty() {
            self.count.fetch_and(!(WAITERS | HANDOFF), Relaxed);
        } else if was_head {
            self.mark_wake(list, WakeType::Any, wakers);
        }
        waker
    }

    #[inline]
    fn count_cancel(&self, kind: WaiterKind) {
        match kind {
            WaiterKind::Read | WaiterKind::UpgradableRead => lockevent!(self, rlock_cancel),
            WaiterKind::Write | WaiterKind::Upgrade => lockevent!(self, wlock_cancel),
        }
    }
}
