//! Writers: the one-CAS fast path and its release, then the slow path in the kernel's
//! order (`rwsem_down_write_slowpath`): spin, then (in the lock future) yield, then queue;
//! and [`try_write_lock`](RawRwLock::try_write_lock), by which a queued writer takes the
//! lock or asks for the handoff.

use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::task::Waker;
use std::time::Duration;

use super::count::*;
use super::list::{NodeState, WaitList, Waiter};
use super::spin::Spinner;
use super::stats::lockevent;
use super::{backoff, RawRwLock, SpinClock};

/// Where a queued writer stands when it tries for the lock (the kernel's
/// `enum writer_wait_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WriterWaitState {
    /// Not the head: it may take a lock that is free with no handoff pending, unless the
    /// policy hands the lock to the head at every release (`handoff_timeout` zero) or
    /// keeps a strict order (`strict_order`: no waiter passes the queue).
    NotFirst,
    /// The head, not due a handoff: it takes the lock if it is free.
    First,
    /// The head, due a handoff (it was woken and lost a race, or waited past the
    /// timeout): it takes the lock if it is free, and otherwise sets `HANDOFF`.
    Handoff,
}

/// How a [`head_spin`](RawRwLock::head_spin) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HeadSpin {
    /// The release granted the spinning head the lock (its node is `Granted`).
    Granted,
    /// The lock is free: try for it again under the wait lock.
    Free,
    /// The owner did not leave within the budget (or is a granted task not running yet):
    /// sleep until woken.
    GaveUp,
}

impl RawRwLock {
    /// The write fast path, and the whole of `try_write` (the kernel's
    /// `down_write_trylock`): one CAS from idle, so it fails whenever the lock is owned or
    /// anyone is queued.
    #[inline]
    pub(crate) fn write_fast(&self) -> bool {
        let ok = self.write_fast_cas();
        if ok {
            lockevent!(self, wlock_fast);
        }
        ok
    }

    #[inline]
    fn write_fast_cas(&self) -> bool {
        self.count
            .compare_exchange(0, WRITER_LOCKED, Acquire, Relaxed)
            .is_ok()
    }

    /// Releases the write lock.
    ///
    /// # Safety
    ///
    /// The caller owns the write lock of `self` and gives it up.
    #[inline]
    pub(crate) unsafe fn unlock_write(&self) {
        let old = self.count.fetch_sub(WRITER_LOCKED, Release);
        debug_assert!(
            old & WRITER_LOCKED != 0,
            "write unlock of a lock not write-locked"
        );
        if old & WAITERS != 0 {
            self.wake();
        }
    }

    /// A granted writer's task runs now (it completed its acquire, or releases a grant it
    /// never polled): clears [`OWNER_PENDING`] if the grant set it. Only the owner of the
    /// write lock calls this, so a bit it sees set is its own.
    #[inline]
    pub(crate) fn owner_runs(&self) {
        if self.count.load(Relaxed) & OWNER_PENDING != 0 {
            self.count.fetch_and(!OWNER_PENDING, Relaxed);
        }
    }

    /// Would a writer's yield (a retry of the fast path once the executor has run its
    /// other tasks) be in vain? A snapshot, after a spin that failed. Yes when the lock is
    /// promised to a queued waiter (a handoff pending) or held by one whose task has not
    /// run since its grant; and when readers own it: arriving readers keep taking it
    /// beside them (its fast path needs `WAITERS` to fail), so only queueing, which sets
    /// `WAITERS`, lets their number fall to zero. A yield there cost the writer a turn of
    /// the whole run queue, every task ahead of it running up to its whole cooperative
    /// budget of reads (the measurement: `docs/performance.md`, "A pending writer and
    /// later readers").
    #[inline]
    pub(crate) fn yield_in_vain(&self) -> bool {
        let count = self.count.load(Relaxed);
        count & (HANDOFF | OWNER_PENDING) != 0
            || (count & WRITER_LOCKED == 0 && count & READER_MASK != 0)
    }

    /// May a spinner pass the queue? Not under a strict order or a pass bound of zero,
    /// nor when every release hands the lock to the head (then nobody but the head may
    /// take it), as on a crowded runtime's threads while readers are queued
    /// (`Policy::crowded_handoff`; [`READER_QUEUED`] says whether they are, as of the last
    /// release of the wait lock).
    #[inline]
    pub(super) fn spin_past_queue(&self) -> bool {
        self.policy.may_pass_queue()
            && !self.policy.handoff_always()
            && !self.crowded_handoff_hint()
    }

    /// The writer's bounded optimistic spin (`rwsem_optimistic_spin`). Returns `true`
    /// with the write lock owned.
    ///
    /// The budget is learned ([`spin`](super::spin)), under the policy's `writer_spin`
    /// cap. The async adaptations of the kernel's spin, measured (see the CHANGELOG):
    /// - One spinner at a time (the kernel queues its spinners on the OSQ lock): a second
    ///   writer goes straight on to yield or queue instead of burning another worker.
    /// - As the kernel, spin whatever the queue holds while the owner runs, and take a
    ///   free lock past the queue unless a handoff is pending: the handoff bounds what the
    ///   queued waiters lose. The owner does not run when the lock was just granted to a
    ///   queued writer whose task has not been polled since ([`OWNER_PENDING`]): then the
    ///   spinner stops, and its yield lets that task run if it waits on the same worker.
    ///   Under a strict order (or a handoff at every release) a spinner stops as soon as
    ///   anyone queues.
    pub(crate) fn write_spin(&self) -> bool {
        let count = self.count.load(Relaxed);
        let stop = if self.spin_past_queue() {
            HANDOFF | OWNER_PENDING
        } else {
            WAITERS
        };
        if count & stop != 0 {
            return false;
        }
        let cap = self.policy.writer_spin();
        let Some(budget) = self.spin_budget(Spinner::Writer, cap) else {
            lockevent!(self, opt_nospin);
            return false;
        };
        if !self.spin.start_writer_spin() {
            lockevent!(self, opt_nospin);
            return false;
        }
        let won = self.spin_as_the_spinner(budget, cap, stop);
        self.spin.end_writer_spin();
        won
    }

    /// The spin itself, by the one writer that holds the spinner slot. A spin that wins or
    /// runs out teaches the writers' budget; one that stops for a queue does not.
    fn spin_as_the_spinner(&self, budget: Duration, cap: Duration, stop: usize) -> bool {
        let mut clock = SpinClock::new();
        let mut step = 0u32;
        let mut rounds = 0u32;
        loop {
            let count = self.count.load(Relaxed);
            if count & stop != 0 {
                // A handoff is pending (or, under a strict order, someone queued): the lock
                // is theirs next. Or its owner is a granted task not running yet.
                break;
            }
            if count & (LOCK_MASK | HANDOFF) == 0 {
                // Free (maybe with waiters queued, whom we pass: the handoff bounds that).
                if self
                    .count
                    .compare_exchange(count, count | WRITER_LOCKED, Acquire, Relaxed)
                    .is_ok()
                {
                    self.spin.won(Spinner::Writer, cap, clock.elapsed());
                    lockevent!(self, opt_lock);
                    if count & WAITERS != 0 {
                        // Past the queue: bounded (`Policy::pass_bound`).
                        self.writer_passed_queue();
                    }
                    return true;
                }
                continue;
            }
            rounds += 1;
            if clock.over(budget, rounds) {
                // The owner kept the lock for the whole budget: most likely it is a task
                // suspended inside its section, which no spinning will hurry.
                self.spin.lost(Spinner::Writer, cap);
                break;
            }
            backoff(&mut step);
        }
        lockevent!(self, opt_fail);
        false
    }

    /// The head writer, polled (so its task runs) and finding the lock taken, spins for
    /// a running owner instead of going back to sleep at once: the kernel's handoff waiter
    /// spinning on the owner (`rwsem_spin_on_owner` in `rwsem_down_write_slowpath`).
    /// Entered without the wait lock, with the node's waker registered and, when it lost a
    /// race after a wake-up, `HANDOFF` set for it (so that the release grants it).
    pub(super) fn head_spin(&self, waiter: &Waiter) -> HeadSpin {
        if !self.spin_past_queue() {
            return HeadSpin::GaveUp;
        }
        let cap = self.policy.writer_spin();
        let Some(budget) = self.spin_budget(Spinner::Writer, cap) else {
            return HeadSpin::GaveUp;
        };
        let mut clock = SpinClock::new();
        let mut step = 0u32;
        let mut rounds = 0u32;
        loop {
            if waiter.state(Acquire) != NodeState::Waiting {
                return HeadSpin::Granted;
            }
            let count = self.count.load(Relaxed);
            if count & OWNER_PENDING != 0 {
                return HeadSpin::GaveUp;
            }
            if count & LOCK_MASK == 0 {
                return HeadSpin::Free;
            }
            rounds += 1;
            if clock.over(budget, rounds) {
                return HeadSpin::GaveUp;
            }
            backoff(&mut step);
        }
    }

    /// Queues a writer and tries for the lock once under the wait lock. Returns `true`
    /// with the write lock owned (and the node unlinked again and marked `Granted`, before
    /// the wakers collected here run: a panic in one leaves the lock to the caller's
    /// future, whose drop releases it).
    ///
    /// # Safety
    ///
    /// `node` is a pinned `Idle` writer node that stays alive, and is unlinked by the
    /// caller's drop, while it is `Waiting`.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn write_queue(&self, node: NonNull<Waiter>, waker: Waker) -> bool {
        // When the handoff timeout makes it due, read before the wait lock is taken (the
        // node is still `Idle`, ours alone); no clock at all under a timeout of zero or
        // `Duration::MAX`. Nor while the crowded runtime's rule hands the lock to the head
        // at every release (readers are queued; a task, not a parked thread): there the
        // writer is due without a clock, and where the rule has lapsed by the time it is
        // the head, `timed_out` starts its timeout then. Where every acquire queues (40+40
        // at 8 workers) this clock read was 3.6% of the run's time.
        if self.policy.handoff_timed() && (!self.crowded_handoff_hint() || super::parking::parks())
        {
            let due = self.clock.deadline(self.policy.handoff_timeout());
            // SAFETY: the node is idle and ours (caller's contract).
            unsafe { node.as_ref().with_inner(|inner| inner.due = due) };
        }
        self.with_wait_list(|list, wakers| {
            let first = list.is_empty();
            // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
            unsafe { list.enqueue(node, waker, false) };
            lockevent!(self, sleep_writer);
            if first {
                self.count.fetch_or(WAITERS | WRITER_QUEUED, Relaxed);
                // A new queue: its passes count from zero.
                self.spin.reset_passes();
            } else {
                let mut count = self.count.load(Relaxed);
                if count & WRITER_QUEUED == 0 {
                    // The first writer behind queued readers.
                    count = self.count.fetch_or(WRITER_QUEUED, Relaxed);
                }
                // Others wait already: readers at the head may be grantable now.
                self.cond_wake(list, count, wakers);
            }
            // Just queued: the head only if nobody else waits, and not yet due a handoff
            // unless the policy hands the lock over at every release (no clock needed).
            let state = if !first {
                WriterWaitState::NotFirst
            } else if self.policy.handoff_always()
                || self.crowded_handoff(list) && !super::parking::parks()
            {
                WriterWaitState::Handoff
            } else {
                WriterWaitState::First
            };
            // SAFETY: the node is linked and we hold the wait lock.
            unsafe { self.try_write_lock(list, node, state) }
        })
    }

    /// Where the queued writer `node` stands (see [`WriterWaitState`]).
    ///
    /// # Safety
    ///
    /// `node` is linked in `list`, which is the locked wait list of `self`.
    pub(super) unsafe fn writer_wait_state(
        &self,
        list: &WaitList,
        node: NonNull<Waiter>,
    ) -> WriterWaitState {
        if list.head() != Some(node) {
            return WriterWaitState::NotFirst;
        }
        // A head that was woken and finds the lock taken lost a race: it asks for the
        // handoff at once. Otherwise the timeout decides.
        // SAFETY: linked node, wait lock held.
        let lost = unsafe { node.as_ref().with_inner(|inner| inner.woken) };
        // SAFETY: as above.
        if lost && !self.policy.handoff_never() || unsafe { self.timed_out(list, node) } {
            WriterWaitState::Handoff
        } else {
            WriterWaitState::First
        }
    }

    /// `rwsem_try_write_lock`, for a queued writer under the wait lock: take the lock if it
    /// is free (and no handoff is pending for another waiter), unlinking the node; or, as
    /// the head due a handoff, set `HANDOFF`.
    ///
    /// # Safety
    ///
    /// `node` is the caller's own writer node, linked in `list`, the locked wait list of
    /// `self`; `state` is [`writer_wait_state`](Self::writer_wait_state)'s for it.
    pub(super) unsafe fn try_write_lock(
        &self,
        list: &mut WaitList,
        node: NonNull<Waiter>,
        state: WriterWaitState,
    ) -> bool {
        if state == WriterWaitState::NotFirst
            && (self.policy.handoff_always()
                || !self.policy.may_pass_queue()
                || self.crowded_handoff(list))
        {
            // Handoff at every release, or a strict order: a queued waiter never passes the
            // head, even when it is polled in the instant between a release and its grant
            // (or, with a timeout, while a woken head has not yet been polled).
            return false;
        }
        loop {
            let free = |count: usize| {
                count & LOCK_MASK == 0
                    && (count & HANDOFF == 0 || state != WriterWaitState::NotFirst)
            };
            if self.queued_write_lock(list, WRITER_LOCKED, 0, false, free) {
                // SAFETY: `node` is ours, linked in `list`; wait lock held.
                unsafe { self.unlink_own(list, node) };
                lockevent!(self, wlock_queued);
                if state == WriterWaitState::NotFirst {
                    // Ahead of the head: a pass, bounded (`Policy::pass_bound`).
                    self.queued_writer_passed(list);
                } else {
                    // The head's turn.
                    self.spin.reset_passes();
                    self.writer_turn(list);
                }
                return true;
            }
            if state != WriterWaitState::Handoff {
                return false;
            }
            // The lock is taken: nobody but us may take it next.
            match self.count.fetch_update(Relaxed, Relaxed, |count| {
                (count & LOCK_MASK != 0 && count & HANDOFF == 0).then_some(count | HANDOFF)
            }) {
                Ok(_) => {
                    lockevent!(self, wlock_handoff);
                    return false;
                }
                // Freed in between: try again to take it.
                Err(count) if count & LOCK_MASK == 0 => continue,
                // Still taken, with the handoff already ours.
                Err(_) => return false,
            }
        }
    }
}
