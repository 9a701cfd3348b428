//! Upgradable reads, upgrades and downgrades.
//!
//! The upgradable reader is a read lock plus the `UPGRADABLE` bit, at most one at a time,
//! beside any number of plain readers. Its upgrade queues at the *head* of the wait queue
//! and sets `HANDOFF`, so that no new reader gets in while the others leave; the last one
//! out grants it the write lock. A timed upgrade that runs out of time is stopped
//! ([`stop_upgrade`](RawRwLock::stop_upgrade)): the node leaves the queue and the
//! upgradable read lock stays with its owner. Downgrades turn the write lock into a read lock (or the
//! upgradable one) in one atomic add, and grant the queued readers beside it.

use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::task::Waker;

use super::count::*;
use super::list::{NodeState, WaitList, Waiter};
use super::stats::lockevent;
use super::RawRwLock;

impl RawRwLock {
    /// Takes the upgradable read lock if that needs no waiting: no writer, no other
    /// upgradable reader, nobody queued.
    #[inline]
    pub(crate) fn try_upgradable_read(&self) -> bool {
        let mut count = self.count.load(Relaxed);
        while count & (READ_FAILED_MASK | UPGRADABLE) == 0 && self.reader_room(readers(count)) {
            match self.count.compare_exchange_weak(
                count,
                count + READER_BIAS + UPGRADABLE,
                Acquire,
                Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
        false
    }

    /// Releases the upgradable read lock.
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock of `self` and gives it up.
    pub(crate) unsafe fn unlock_upgradable(&self) {
        let old = self.count.fetch_sub(READER_BIAS + UPGRADABLE, Release);
        debug_assert!(old & UPGRADABLE != 0 && readers(old) > 0);
        if old & WAITERS != 0 {
            // The lock may be free, or a queued upgradable reader may now get in beside the
            // remaining readers.
            self.wake();
        }
    }

    /// Turns the write lock into a read lock in one atomic step (`__downgrade_write`).
    /// Returns `true` if waiters are queued: the caller then calls
    /// [`wake_after_downgrade`](Self::wake_after_downgrade), which grants the queued
    /// readers (not the queued writers) the lock beside it, once the new mode's owner
    /// (its token) exists: the wake-up runs foreign code, and a panic there must release
    /// the new mode, not the old one.
    ///
    /// # Safety
    ///
    /// The caller owns the write lock of `self`; afterwards it owns a read lock instead.
    #[must_use = "waiters queued: call `wake_after_downgrade`"]
    pub(crate) unsafe fn downgrade(&self) -> bool {
        let old = self
            .count
            .fetch_add(READER_BIAS.wrapping_sub(WRITER_LOCKED), AcqRel);
        debug_assert!(
            old & WRITER_LOCKED != 0,
            "downgrade of a lock not write-locked"
        );
        old & WAITERS != 0
    }

    /// Turns the upgradable read lock into a plain read lock; returns `true` if the caller
    /// must then call [`wake_after_downgrade`](Self::wake_after_downgrade) (as for
    /// [`downgrade`](Self::downgrade)): a queued upgradable reader may get in now.
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock; afterwards it owns a read lock instead.
    #[must_use = "waiters queued: call `wake_after_downgrade`"]
    pub(crate) unsafe fn downgrade_upgradable(&self) -> bool {
        let old = self.count.fetch_sub(UPGRADABLE, AcqRel);
        debug_assert!(old & UPGRADABLE != 0);
        old & WAITERS != 0
    }

    /// Turns the write lock into the upgradable read lock in one atomic step; returns
    /// `true` if the caller must then call
    /// [`wake_after_downgrade`](Self::wake_after_downgrade), which grants the queued
    /// readers (not writers, nor upgradable readers) beside it, as for
    /// [`downgrade`](Self::downgrade).
    ///
    /// # Safety
    ///
    /// The caller owns the write lock; afterwards it owns the upgradable read lock.
    #[must_use = "waiters queued: call `wake_after_downgrade`"]
    pub(crate) unsafe fn downgrade_to_upgradable(&self) -> bool {
        let old = self.count.fetch_add(
            (READER_BIAS + UPGRADABLE).wrapping_sub(WRITER_LOCKED),
            AcqRel,
        );
        debug_assert!(old & WRITER_LOCKED != 0 && old & UPGRADABLE == 0);
        old & WAITERS != 0
    }

    /// The second half of a downgrade that found waiters queued: grants the queued readers
    /// beside the caller's read lock (or upgradable read lock). Runs foreign code (the
    /// wakers): call it once the new mode's owner exists, so that a panic releases that.
    #[cold]
    pub(crate) fn wake_after_downgrade(&self) {
        self.grant_readers_beside_own();
    }

    /// Trades the upgradable read lock for the write lock if no other reader holds the
    /// lock. Does not wait.
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock; on `true` it owns the write lock instead.
    pub(crate) unsafe fn try_upgrade(&self) -> bool {
        self.count
            .fetch_update(Acquire, Relaxed, |count| {
                debug_assert!(count & UPGRADABLE != 0);
                // Only our bias is left: trade it (and the bit) for the writer bit. A
                // pending handoff stays for the head to take when we release.
                (readers(count) == 1).then(|| (count - READER_BIAS - UPGRADABLE) | WRITER_LOCKED)
            })
            .is_ok()
    }

    /// Queues an upgradable reader (its bias is not in the count). The node may have been
    /// granted already when this returns: the caller checks its state.
    ///
    /// # Safety
    ///
    /// `node` is a pinned `Idle` upgradable-reader node that stays alive, and is unlinked
    /// by the caller's drop, while it is `Waiting`.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn upgradable_queue(&self, node: NonNull<Waiter>, waker: Waker) {
        self.with_wait_list(|list, wakers| {
            let first = list.is_empty();
            // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
            unsafe { list.enqueue(node, waker, false) };
            lockevent!(self, sleep_reader);
            if first {
                self.count.fetch_or(WAITERS, Relaxed);
                self.spin.reset_passes();
            }
            // The lock may have changed since the fast path failed: grant what can be.
            let count = self.count.load(Relaxed);
            self.cond_wake(list, count, wakers);
        })
    }

    /// Queues the upgradable reader's upgrade at the head of the queue and sets `HANDOFF`,
    /// so that no new reader gets in while the others leave. Returns `true` with the write
    /// lock owned (the node unlinked again).
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock; `node` is a pinned `Idle` upgrade node
    /// that stays alive, and is unlinked by the caller's drop, while it is `Waiting`.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn upgrade_queue(&self, node: NonNull<Waiter>, waker: Waker) -> bool {
        // Declared before the wait lock is taken, so that a waker left unused (the other
        // readers had left: the upgrade took the lock at once) is dropped after the wait
        // lock is released: its drop is foreign code.
        let mut waker = Some(waker);
        let upgraded = self.with_wait_list(|list, _| {
            // SAFETY: we own the upgradable read lock.
            if unsafe { self.try_upgrade() } {
                // SAFETY: the node is ours and was never linked; `Granted` tells its future
                // that it owns the write lock, as for every other way it gets it.
                unsafe { node.as_ref() }.set_state(super::list::NodeState::Granted, Relaxed);
                return true;
            }
            let waker = waker.take().expect("the waker is used once");
            // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
            unsafe { list.enqueue(node, waker, true) };
            lockevent!(self, sleep_writer);
            let old = self
                .count
                .fetch_or(WAITERS | HANDOFF | WRITER_QUEUED, Relaxed);
            // A handoff already pending is the head's we went ahead of (a writer that
            // readers passed, or one past its timeout): it stays that waiter's.
            // SAFETY: the node is ours and linked in `list`, which we hold.
            unsafe {
                node.as_ref()
                    .with_inner(|inner| inner.handoff_of_next = old & HANDOFF != 0);
            }
            // The other readers may have left before the bits were set (their unlock saw
            // no waiters): look again.
            // SAFETY: the node is ours and linked in `list`, which we hold.
            unsafe { self.upgrade_own_at_head(list, node) }
        });
        drop(waker);
        upgraded
    }

    /// Under the wait lock, for the queued upgrade at the head: take the write lock if only
    /// the upgradable reader's own bias is left. The node stays linked: the caller unlinks
    /// it, by [`grant`](Self::grant) (a waker) or [`unlink_own`](Self::unlink_own) (the
    /// owner).
    ///
    /// # Safety
    ///
    /// `node` is the linked upgrade node at the head of `list`, the locked wait list of
    /// `self`.
    pub(super) unsafe fn upgrade_at_head(&self, list: &WaitList, node: NonNull<Waiter>) -> bool {
        debug_assert_eq!(list.head(), Some(node));
        // A handoff the upgrade found pending when it queued ahead of the next head is
        // that waiter's, and stays set for it.
        // SAFETY: `node` is linked in `list`, which we hold.
        let of_next = unsafe { node.as_ref().with_inner(|inner| inner.handoff_of_next) };
        let taken = self.queued_write_lock(
            list,
            WRITER_LOCKED,
            READER_BIAS + UPGRADABLE,
            of_next,
            |count| count & WRITER_LOCKED == 0 && readers(count) == 1,
        );
        if taken {
            lockevent!(self, wlock_queued);
        }
        taken
    }

    /// [`upgrade_at_head`](Self::upgrade_at_head) by the upgrading reader itself.
    ///
    /// # Safety
    ///
    /// As for `upgrade_at_head`; the caller owns the node.
    pub(super) unsafe fn upgrade_own_at_head(
        &self,
        list: &mut WaitList,
        node: NonNull<Waiter>,
    ) -> bool {
        // SAFETY: forwarded from the caller.
        let won = unsafe { self.upgrade_at_head(list, node) };
        if won {
            // SAFETY: the caller owns the node, linked in `list`.
            unsafe { self.unlink_own(list, node) };
        }
        won
    }

    /// Stops a queued upgrade but keeps the upgradable read lock (a timed upgrade whose
    /// time ran out). Returns `true` if the upgrade was granted the write lock first (the
    /// grant and the deadline crossed): the caller owns the write lock, and may keep it
    /// (it asked for it, and got it in time). Otherwise the node is unlinked, the caller
    /// owns the upgradable read lock, as before the upgrade, and the queue is as if the
    /// upgrade had never been asked for: the `HANDOFF` it set passes to the next head, as
    /// for a cancelled head, and the waiters it held back are granted if they may go now
    /// (readers beside the upgradable reader; a writer still waits for it).
    ///
    /// Runs foreign code (the node's waker is dropped, the granted readers' wakers are
    /// woken) only once the node is unlinked and the count word holds the upgradable read
    /// lock again: the caller must be ready for an unwind that leaves it owning that lock.
    ///
    /// # Safety
    ///
    /// `node` is the caller's own upgrade node, queued on `self` (linked or granted since),
    /// and pinned; the caller owned the upgradable read lock when it queued it. After this
    /// call the node is not linked and may be freed.
    pub(crate) unsafe fn stop_upgrade(&self, node: NonNull<Waiter>) -> bool {
        // SAFETY: the node is alive (the caller owns it).
        let waiter = unsafe { node.as_ref() };
        debug_assert_eq!(waiter.kind, super::list::WaiterKind::Upgrade);
        if waiter.state(Acquire) == NodeState::Granted {
            return true;
        }
        let (granted, waker) = self.with_wait_list(|list, wakers| {
            match waiter.state(Relaxed) {
                // Granted meanwhile, under the wait lock we then took.
                NodeState::Granted => return (true, None),
                NodeState::Idle => unreachable!("a queued upgrade node is never idle"),
                NodeState::Waiting => {}
            }
            // The upgradable read lock stays ours. A new head inherits the handoff, and
            // readers behind the upgrade may share the lock with the upgradable reader now.
            // SAFETY: `Waiting` means linked in `list`, which we hold; the node is ours.
            (false, unsafe { self.unlink_waiting(list, node, 0, wakers) })
        });
        // Foreign code, with nothing linked and the wait lock released.
        drop(waker);
        if !granted {
            lockevent!(self, wlock_cancel);
        }
        granted
    }
}
