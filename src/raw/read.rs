//! Readers: the one-`fetch_add` fast path and its release, then the slow path in the
//! kernel's order (`rwsem_down_read_slowpath`): steal, spin (policy `reader_spin`),
//! queue.

use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::task::Waker;
use std::time::Duration;

use super::count::*;
use super::list::{NodeState, Waiter};
use super::spin::Spinner;
use super::stats::lockevent;
use super::{backoff, RawRwLock, SpinClock};

impl RawRwLock {
    /// The read fast path: one `fetch_add`. Returns `true` with a read lock owned; on
    /// `false` the bias is still in the count, and the caller must take it over as a
    /// [`ReaderBias`] at once (the lock future does: [`ReaderBias::adopt`]).
    #[inline]
    pub(crate) fn read_fast(&self) -> bool {
        let old = self.count.fetch_add(READER_BIAS, Acquire);
        // With no flag set, `old` is the readers' biases (plus, maybe, `UPGRADABLE`, which
        // is below one bias): below the limit means room for us.
        let ok = old & READ_FAILED_MASK == 0 && old < self.read_limit();
        if ok {
            lockevent!(self, rlock_fast);
        }
        ok
    }

    /// Takes a read lock if that needs no waiting: no writer, nobody queued, no handoff.
    #[inline]
    pub(crate) fn try_read(&self) -> bool {
        let mut count = self.count.load(Relaxed);
        while count & READ_FAILED_MASK == 0 && self.reader_room(readers(count)) {
            match self
                .count
                .compare_exchange_weak(count, count + READER_BIAS, Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
        false
    }

    /// Releases a read lock.
    ///
    /// # Safety
    ///
    /// The caller owns a read lock of `self` and gives it up.
    #[inline]
    pub(crate) unsafe fn unlock_read(&self) {
        let old = self
            .count
            .fetch_sub(READER_BIAS, std::sync::atomic::Ordering::Release);
        debug_assert!(old & READER_MASK != 0, "read unlock without a reader");
        let count = old.wrapping_sub(READER_BIAS);
        if count & WAITERS != 0
            && (count & LOCK_MASK == 0
                || upgrade_due(count)
                || readers(count) + 1 == self.max_readers() && count & WRITER_LOCKED == 0)
        {
            // The lock is free, or an upgrade waits for us, or we freed the one slot a
            // queued reader waits for under `max_readers`.
            self.wake();
        }
    }

    /// The read slow path up to the queue, entered with the reader's `bias` in the count:
    /// steal the lock, or spin for it (policy `reader_spin`). `Ok` with a read lock owned
    /// (the bias kept as one); `Err` with the bias, if the reader must queue (in
    /// [`read_queue`](Self::read_queue), once its waker is cloned).
    ///
    /// Every call of foreign code here (a steal's wake-up of the queued readers) runs while
    /// `bias` still owns the bias: if it panics, the unwind gives it back, and the lock
    /// future, left in `Init`, holds nothing.
    #[cold]
    #[inline(never)]
    pub(crate) fn read_slowpath<'a>(&'a self, bias: ReaderBias<'a>) -> Result<(), ReaderBias<'a>> {
        // Acquire: a steal below takes the lock on what this load saw (a writer's release).
        let count = self.count.load(Acquire);
        if count & READ_FAIL != 0 {
            drop(bias); // a read unlock
            panic!("async_rwsem::RwLock: too many readers (the reader count would overflow)");
        }
        let rcnt = readers(count);
        // To keep a stream of readers from starving a waiter, do not steal a lock that
        // readers already own. (Over `max_readers` the lock is reader-owned too.)
        let reader_owned = count & WRITER_LOCKED == 0 && (rcnt > 1 || rcnt > self.max_readers());
        // Strict order (or a pass bound of zero): nobody passes a non-empty queue.
        let may_pass = count & WAITERS == 0 || self.policy.may_pass_queue();
        if may_pass && !reader_owned && count & (WRITER_LOCKED | HANDOFF) == 0 {
            lockevent!(self, rlock_steal);
            if rcnt == 1 && count & WAITERS != 0 {
                // The first reader in: let the queued readers share the lock, and count
                // the pass of whoever it leaves at the head (foreign code: `bias` gives
                // the lock back if it panics).
                self.reader_passed_queue();
            }
            bias.into_read_lock();
            return Ok(());
        }
        if may_pass && !reader_owned && count & (WRITER_LOCKED | HANDOFF) == WRITER_LOCKED {
            let cap = self.policy.reader_spin();
            if let Some(budget) = self.spin_budget(Spinner::Reader, cap) {
                return self.read_spin(bias, budget, cap);
            }
        }
        Err(bias)
    }

    /// Queues a reader with its `bias` in the count: the bias leaves the count in the same
    /// atomic add that sets `WAITERS` (the reader now waits for the lock instead of trying
    /// to take it). If the queue turns out to be empty and the lock not write-locked, the
    /// bias is a read lock instead, and `node` is never linked. Either way the caller reads
    /// `node`'s state afterwards: [`NodeState::Granted`]
    /// means it owns the lock (granted by its own queueing, or never queued).
    ///
    /// # Safety
    ///
    /// `node` is a pinned `Idle` reader node that stays alive, and is unlinked (or its lock
    /// released) by the caller's drop, from now on.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn read_queue(
        &self,
        node: NonNull<Waiter>,
        waker: Waker,
        bias: ReaderBias<'_>,
    ) {
        // Declared before the wait lock is taken, so that a waker left unused (the queue
        // was empty and the lock free) is dropped after the wait lock is released: its
        // drop is foreign code.
        let mut waker = Some(waker);
        self.with_wait_list(|list, wakers| {
            let mut adjustment = READER_BIAS.wrapping_neg();
            if list.is_empty() {
                // Nobody waits, so no handoff is pending: without a writer (and within
                // `max_readers`) our bias is a read lock (the kernel's `rwsem_rlock_fast`).
                let now = self.count.load(Acquire);
                if now & WRITER_LOCKED == 0 && readers(now) <= self.max_readers() {
                    lockevent!(self, rlock_fast);
                    bias.into_read_lock();
                    // SAFETY: the node is ours and was never linked; `Granted` tells its
                    // future (a poll, or its drop) that it owns the read lock.
                    unsafe { node.as_ref() }.set_state(NodeState::Granted, Relaxed);
                    return;
                }
                adjustment = adjustment.wrapping_add(WAITERS);
                // A new queue: its passes count from zero.
                self.spin.reset_passes();
            }
            if list.first_reader().is_none() {
                // The first reader to queue: `READER_QUEUED` comes in our add rather than
                // at the wait lock's release (`sync_queued`). Clear until now: as of the
                // wait lock's last release it said that no reader was queued.
                debug_assert_eq!(self.count.load(Relaxed) & READER_QUEUED, 0);
                adjustment = adjustment.wrapping_add(READER_QUEUED);
            }
            let waker = waker.take().expect("the waker is used once");
            // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
            unsafe { list.enqueue(node, waker, false) };
            lockevent!(self, sleep_reader);
            // We now wait for the lock instead of trying to take it: the bias leaves the
            // count in this add.
            bias.into_queued();
            let count = self
                .count
                .fetch_add(adjustment, AcqRel)
                .wrapping_add(adjustment);
            self.cond_wake(list, count, wakers);
        });
        drop(waker);
    }

    /// A spin of up to `budget` by a reader that found the lock write-locked (the learned
    /// budget under the policy's `reader_spin` cap: [`spin`](super::spin)), with its
    /// `bias` in the count. `Ok` with a read lock owned (the bias kept as one); `Err` with
    /// the bias, for [`read_queue`](Self::read_queue). A spin that wins or runs out teaches
    /// the readers' budget; one that stops for a handoff does not.
    ///
    /// The bias stays in the count while the writer holds the lock (a transient bias, as
    /// a reader's on its way to the queue), so that the writer's release leaves the lock
    /// read-owned by the spinner at once: a spinning writer (whose CAS needs the lock
    /// free) cannot take it back first. Taking the bias out to spin, as before, let the
    /// releasing task's next acquire win nearly every race, and readers fell to 9-11% of
    /// the operations in mixed-40-40 once writers spun past the queue.
    fn read_spin<'a>(
        &'a self,
        bias: ReaderBias<'a>,
        budget: Duration,
        cap: Duration,
    ) -> Result<(), ReaderBias<'a>> {
        let mut clock = SpinClock::new();
        let mut step = 0u32;
        let mut rounds = 0u32;
        loop {
            // Acquire: if the writer has left, its section happens before ours.
            let count = self.count.load(Acquire);
            if count & WRITER_LOCKED == 0 {
                // Our bias makes this a read lock, unless a handoff is pending (the head
                // is due the lock), the order is strict and someone queued, or the
                // readers are over `max_readers`: then queue, bias and all (the queueing
                // takes it out and wakes whoever can run).
                let strict_stop = count & WAITERS != 0 && !self.policy.may_pass_queue();
                if count & HANDOFF != 0 || strict_stop || readers(count) > self.max_readers() {
                    return Err(bias);
                }
                self.spin.won(Spinner::Reader, cap, clock.elapsed());
                lockevent!(self, rlock_spin);
                if readers(count) == 1 && count & WAITERS != 0 {
                    // As a steal. Foreign code: `bias` gives the lock back if it panics.
                    self.reader_passed_queue();
                }
                bias.into_read_lock();
                return Ok(());
            }
            if count & (HANDOFF | OWNER_PENDING) != 0 {
                // The lock goes to the head next, or its owner is a granted task that is
                // not running: no use spinning.
                return Err(bias);
            }
            rounds += 1;
            if clock.over(budget, rounds) {
                self.spin.lost(Spinner::Reader, cap);
                return Err(bias);
            }
            backoff(&mut step);
        }
    }
}

/// Is a release leaving only the upgradable reader's bias, with its upgrade (most likely)
/// queued? (`HANDOFF` with `UPGRADABLE` and one reader.) Then the release must wake it.
#[inline]
fn upgrade_due(count: usize) -> bool {
    count & (LOCK_MASK | UPGRADABLE | HANDOFF) == READER_BIAS | UPGRADABLE | HANDOFF
}

/// A reader's bias in the count word, owned: added by an arriving reader (the fast path's
/// `fetch_add`) and not yet a read lock nor taken out by
/// queueing. The bias is a value so that no path can lose it: dropped (a path that gives
/// up, or an unwind through foreign code), it is given back by a read unlock, which wakes
/// whoever that release should wake; it leaves the count word's books only by
/// [`into_read_lock`](Self::into_read_lock) (the reader owns the lock now, and its guard
/// will release it) or [`into_queued`](Self::into_queued) (an atomic add takes it out).
#[must_use = "dropping a reader's bias gives it back (a read unlock)"]
#[derive(Debug)]
pub(crate) struct ReaderBias<'a>(&'a RawRwLock);

impl<'a> ReaderBias<'a> {
    /// Takes over the bias the caller has just added to `lock`'s count.
    ///
    /// # Safety
    ///
    /// The caller added one `READER_BIAS` to the count of `lock` that is no lock yet and
    /// that nothing else owns (a failed [`RawRwLock::read_fast`]), and hands it over.
    #[inline]
    pub(crate) unsafe fn adopt(lock: &'a RawRwLock) -> Self {
        Self(lock)
    }

    /// The bias is the reader's read lock now: the caller (its lock future, then its guard)
    /// releases it.
    #[inline]
    pub(crate) fn into_read_lock(self) {
        std::mem::forget(self);
    }

    /// The caller's atomic add takes the bias out of the count right after this (a reader
    /// that queues): nothing to give back.
    #[inline]
    fn into_queued(self) {
        std::mem::forget(self);
    }
}

impl Drop for ReaderBias<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the bias is ours and is no lock of anyone's: taking it back is a read
        // unlock.
        unsafe { self.0.unlock_read() }
    }
}
