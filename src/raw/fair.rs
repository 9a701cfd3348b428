//! Fair unlocks on demand (`parking_lot`'s `unlock_fair`): a release that hands the lock to
//! the head of the queue instead of leaving it to whoever comes first.
//!
//! The owner asks for the handoff before it lets go: under the wait lock, with someone
//! queued, it sets `HANDOFF` (if the head does not have it already), then releases as
//! usual. From then on no arrival may take the lock (every fast path, steal, spin and
//! queued non-head writer fails on `HANDOFF`), and the release that leaves the lock to the
//! head grants it directly, as for a head that waited past the timeout (`wake.rs`: a head
//! writer in `wake_writer`, a head reader with the queued readers in `mark_wake`). A reader
//! that is not the last one out leaves `HANDOFF` to the last: the head is next whoever
//! that is. The head clears the bit when it gets the lock; a cancelled head passes it on
//! (`waiter.rs` `cancel`), as for any handoff.

use std::sync::atomic::Ordering::Relaxed;

use super::count::{HANDOFF, WAITERS};
use super::list::{WaitList, WaiterKind};
use super::stats::lockevent;
use super::wake::WakeType;
use super::RawRwLock;

impl RawRwLock {
    /// Releases a lock of `kind` fairly: if anyone is queued at the time, the head is
    /// handed the lock, and nobody takes it in between. With nobody queued, a plain
    /// release.
    ///
    /// # Safety
    ///
    /// As for [`unlock`](Self::unlock): the caller owns a lock of `kind` (an upgrade: the
    /// write lock) and gives it up.
    pub(crate) unsafe fn unlock_fair(&self, kind: WaiterKind) {
        if self.count.load(Relaxed) & WAITERS != 0 {
            self.handoff_to_head();
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.unlock(kind) }
    }

    /// Sets `HANDOFF` for the head, if anyone is queued, while the caller still owns the
    /// lock (so the release to come is the one that grants the head). `HANDOFF` changes
    /// only under the wait lock, and implies `WAITERS`: the list is checked under it.
    #[cold]
    fn handoff_to_head(&self) {
        let list = self.wait_lock();
        self.handoff_to_head_locked(&list);
    }

    /// [`handoff_to_head`](Self::handoff_to_head) for a caller that holds the wait lock.
    fn handoff_to_head_locked(&self, list: &WaitList) {
        if !list.is_empty() {
            self.count.fetch_or(HANDOFF, Relaxed);
        }
    }

    /// The pass bound in force: the policy's, unless handoffs are off (`handoff_timeout`
    /// `Duration::MAX`), which turns off the bound in count with the one in time.
    #[inline]
    fn pass_limit(&self) -> Option<u32> {
        if self.policy.handoff_never() {
            None
        } else {
            self.policy.pass_bound()
        }
    }

    /// The bounded passing (`Policy::pass_bound`): a writer that owns the lock now took it
    /// past queued waiters (its spin won with `WAITERS` set). Counts the pass; at the bound,
    /// the head is handed the lock at the caller's release, as an `unlock_fair` would
    /// (unless the head is a parked thread: [`bound_reached`](Self::bound_reached)).
    #[inline]
    pub(super) fn writer_passed_queue(&self) {
        if let Some(bound) = self.pass_limit() {
            if self.spin.passed(bound) {
                self.bound_reached(&self.wait_lock());
            }
        }
    }

    /// As [`writer_passed_queue`](Self::writer_passed_queue), for a queued writer that
    /// took the lock ahead of the head, under the wait lock.
    pub(super) fn queued_writer_passed(&self, list: &WaitList) {
        if let Some(bound) = self.pass_limit() {
            if self.spin.passed(bound) {
                self.bound_reached(list);
            }
        }
    }

    /// The pass bound is reached: the head is handed the lock at the owner's release. A
    /// head that is a parked thread (`parking.rs`) is not: the bound in count pauses until
    /// the queue's next turn, and the bound in time (the handoff timeout) serves it.
    /// Under the wait lock.
    #[cold]
    fn bound_reached(&self, list: &WaitList) {
        if list.head_parks() {
            lockevent!(self, pass_bound_paused);
            self.spin.pause_passes();
        } else {
            lockevent!(self, pass_bound);
            self.handoff_to_head_locked(list);
        }
    }

    /// A reader that owns the lock now took it with waiters queued (a steal, or a spin
    /// won): grants the queued readers beside it (the kernel's steal does), and if that
    /// leaves a waiter at the head that it passed (a writer, or readers past the batch),
    /// counts the pass as [`writer_passed_queue`](Self::writer_passed_queue) does. One
    /// taking of the wait lock for both. Runs foreign code (the wakers), after the wait
    /// lock is released.
    #[cold]
    pub(super) fn reader_passed_queue(&self) {
        self.with_wait_list(|list, wakers| {
            self.mark_wake(list, WakeType::ReadOwned, wakers);
            if !list.is_empty() {
                self.queued_writer_passed(list);
            }
        });
    }
}
