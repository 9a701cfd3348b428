//! Readers: the one-`fetch_add` fast path and its release, then the slow path in the
//! kernel's order (`rwsem_down_read_slowpath`): steal, spin (policy `reader_spin`),
//! queue.

use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::task::Waker;
use std::time::Duration;

use super::count::*;
use super::list::Waiter;
use super::spin::Spinner;
use super::stats::lockevent;
use super::{backoff, RawRwLock, SpinClock};

impl RawRwLock {
    /// The read fast path: one `fetch_add`. On failure returns the count word with our
    /// bias still in it, for [`read_slowpath`](Self::read_slowpath).
    #[inline]
    pub(crate) fn read_fast(&self) -> Result<(), usize> {
        let old = self.count.fetch_add(READER_BIAS, Acquire);
        // With no flag set, `old` is the readers' biases (plus, maybe, `UPGRADABLE`, which
        // is below one bias): below the limit means room for us.
        if old & READ_FAILED_MASK == 0 && old < self.read_limit() {
            lockevent!(self, rlock_fast);
            Ok(())
        } else {
            Err(old.wrapping_add(READER_BIAS))
        }
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

    /// The read slow path up to the queue, entered with our bias in `count`: steal the
    /// lock, or spin for it (policy `reader_spin`). Returns `true` if we own a read lock;
    /// `false` if the reader must queue, with its bias in the count (for
    /// [`read_queue`](Self::read_queue), after
    /// [`clone_waker_biased`](Self::clone_waker_biased)).
    #[cold]
    #[inline(never)]
    pub(crate) fn read_slowpath(&self, count: usize) -> bool {
        if count & READ_FAIL != 0 {
            // SAFETY: our bias is in the count; taking it back is a read unlock.
            unsafe { self.unlock_read() };
            panic!("async_rwsem::RwLock: too many readers (the reader count would overflow)");
        }
        let rcnt = readers(count);
        // To keep a stream of readers from starving a waiter, do not steal a lock that
        // readers already own. (Over `max_readers` the lock is reader-owned too.)
        let reader_owned = count & WRITER_LOCKED == 0 && (rcnt > 1 || rcnt > self.max_readers());
        // Strict order: nobody passes a non-empty queue.
        let may_pass = count & WAITERS == 0 || !self.policy.strict_order();
        if may_pass && !reader_owned && count & (WRITER_LOCKED | HANDOFF) == 0 {
            lockevent!(self, rlock_steal);
            if rcnt == 1 && count & WAITERS != 0 {
                // The first reader in: let the queued readers share the lock.
                self.wake_readers_after_steal();
            }
            return true;
        }
        if may_pass && !reader_owned && count & (WRITER_LOCKED | HANDOFF) == WRITER_LOCKED {
            let cap = self.policy.reader_spin();
            if let Some(budget) = self.spin_budget(Spinner::Reader, cap) {
                return self.read_spin(budget, cap);
            }
        }
        false
    }

    /// Clones `waker` for a reader whose bias is in the count, on its way to
    /// [`read_queue`](Self::read_queue). Cloning runs foreign code: if it panics, the bias
    /// is taken back (a read unlock, which wakes whoever that release should wake) before
    /// the panic goes on, so that nothing is left in the count.
    pub(crate) fn clone_waker_biased(&self, waker: &Waker) -> Waker {
        struct Unbias<'a>(&'a RawRwLock);
        impl Drop for Unbias<'_> {
            fn drop(&mut self) {
                // SAFETY: only reached if the clone panicked: the bias is still ours.
                unsafe { self.0.unlock_read() }
            }
        }
        let unbias = Unbias(self);
        let waker = waker.clone();
        std::mem::forget(unbias);
        waker
    }

    /// Queues a reader whose bias is in the count. Returns `true` if it turned out to own
    /// the lock without queueing; `false` if `node` was queued (and may have been granted
    /// already: the caller checks its state).
    ///
    /// # Safety
    ///
    /// Our bias is in the count. `node` is a pinned `Idle` reader node that stays alive,
    /// and is unlinked by the caller's drop, while it is `Waiting`.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn read_queue(&self, node: NonNull<Waiter>, waker: Waker) -> bool {
        self.with_wait_list(|list, wakers| {
            let mut adjustment = READER_BIAS.wrapping_neg();
            if list.is_empty() {
                // Nobody waits, so no handoff is pending: without a writer (and within
                // `max_readers`) our bias is a read lock (the kernel's `rwsem_rlock_fast`).
                let now = self.count.load(Acquire);
                if now & WRITER_LOCKED == 0 && readers(now) <= self.max_readers() {
                    lockevent!(self, rlock_fast);
                    return true;
                }
                adjustment = adjustment.wrapping_add(WAITERS);
            }
            // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
            unsafe { list.enqueue(node, waker, false) };
            lockevent!(self, sleep_reader);
            // We now wait for the lock instead of trying to take it.
            let count = self
                .count
                .fetch_add(adjustment, AcqRel)
                .wrapping_add(adjustment);
            self.cond_wake(list, count, wakers);
            false
        })
    }

    /// A spin of up to `budget` by a reader that found the lock write-locked (the learned
    /// budget under the policy's `reader_spin` cap: [`spin`](super::spin)), entered and
    /// left with its bias in the count. Returns `true` with a read lock owned; `false`
    /// with the bias still in, for [`read_queue`](Self::read_queue). A spin that wins or
    /// runs out teaches the readers' budget; one that stops for a handoff does not.
    ///
    /// The bias stays in the count while the writer holds the lock (a transient bias, as
    /// a reader's on its way to the queue), so that the writer's release leaves the lock
    /// read-owned by the spinner at once: a spinning writer (whose CAS needs the lock
    /// free) cannot take it back first. Taking the bias out to spin, as before, let the
    /// releasing task's next acquire win nearly every race, and readers fell to 9-11% of
    /// the operations in mixed-40-40 once writers spun past the queue.
    fn read_spin(&self, budget: Duration, cap: Duration) -> bool {
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
                let strict_stop = count & WAITERS != 0 && self.policy.strict_order();
                if count & HANDOFF != 0 || strict_stop || readers(count) > self.max_readers() {
                    return false;
                }
                self.spin.won(Spinner::Reader, cap, clock.elapsed());
                lockevent!(self, rlock_spin);
                if readers(count) == 1 && count & WAITERS != 0 {
                    self.wake_readers_after_steal();
                }
                return true;
            }
            if count & (HANDOFF | OWNER_PENDING) != 0 {
                // The lock goes to the head next, or its owner is a granted task that is
                // not running: no use spinning.
                return false;
            }
            rounds += 1;
            if clock.over(budget, rounds) {
                self.spin.lost(Spinner::Reader, cap);
                return false;
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
