//! The raw lock: the count word, the wait list, the acquire futures and the policy. Nothing
//! here knows the protected type `T`, so the algorithm is compiled once, not once per `T`.
//!
//! # The algorithm
//!
//! This is the Linux kernel's `rw_semaphore` (`kernel/locking/rwsem.c`, v5.12 to v6.x)
//! with tasks in place of threads; the names below follow the kernel's, so that a reader
//! of `rwsem.c` finds their way (`docs/background.md` summarises the kernel threads the
//! design comes from).
//!
//! - **Count word** ([`count`]): writer bit, waiters bit, handoff bit, upgradable bit,
//!   readers from bit 8.
//! - **Readers** add [`READER_BIAS`](count::READER_BIAS) in one `fetch_add` and own the lock
//!   if none of `READ_FAILED_MASK` was set (and `max_readers` leaves room). Otherwise (the
//!   bias still in the count) they *steal* the lock if neither a writer nor a handoff is
//!   pending and readers do not already own it; else they queue, and are *granted* the
//!   lock by a waker, which adds their bias before it wakes them.
//! - **Writers** CAS `0 -> WRITER_LOCKED`; else, while nobody is queued, one of them at a
//!   time spins on the count word for a bounded time; then they yield to the executor a
//!   bounded number of times, then queue. A writer neither spins nor retries against a
//!   non-empty queue; one that has just queued takes the lock only if it is free at that
//!   instant and no handoff is pending (the kernel's `rwsem_try_write_lock`). A
//!   woken writer takes the lock itself under the wait lock (a reader may steal it first).
//! - **Handoff**: when the head waiter has waited longer than the policy's handoff timeout,
//!   or was woken and lost the race, `HANDOFF` is set and the next release grants the head
//!   the lock directly; meanwhile nobody else may take it. This bounds the unfairness that
//!   stealing buys throughput with.
//! - **Waking** ([`RawRwLock::mark_wake`]): a head writer is woken alone (or granted the
//!   lock directly under handoff); a head reader means every queued reader, skipping
//!   writers, up to the batch limit, is granted in one atomic add (with at most one queued
//!   upgradable reader); a head upgrade is granted the write lock when only its own read
//!   bias is left.
//! - **Cancellation**: dropping a pending acquire unlinks its node; if it was the head the
//!   next head is woken (and inherits `HANDOFF`); a granted node releases the lock.
//!
//! # Invariants
//!
//! The count word's are in [`count`], the wait list's and the nodes' in [`list`]. The
//! ones that tie them together: `WAITERS` and `HANDOFF` change only under the wait lock;
//! under it `WAITERS` is set exactly when the list is not empty; every release that leaves
//! the lock free (or, for a writer or an upgradable reader, any release; or a reader's
//! release that leaves only a pending upgrader, or frees a `max_readers` slot) with
//! `WAITERS` set calls [`RawRwLock::mark_wake`], so a waiter is never left asleep beside
//! a lock it could take.

pub(crate) mod count;
pub(crate) mod list;
pub(crate) mod policy;
pub(crate) mod stats;

#[cfg(test)]
pub(crate) mod tests;

mod acquire;

pub(crate) use acquire::Acquire;

use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire as Acq, Relaxed, Release};
use std::task::Waker;
use std::time::{Duration, Instant};

use self::count::*;
use self::list::{Kind, WaitList, Waiter, WakeList, GRANTED, IDLE, WAITING};
use self::policy::Policy;
use self::stats::{lockevent, Counters};
use crate::loom::{lock, spin_loop, AtomicBool, AtomicU8, AtomicUsize, Mutex};

/// Why [`RawRwLock::mark_wake`] is called (the kernel's `enum rwsem_wake_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WakeType {
    /// The lock may be free: wake a head writer, or grant the head readers.
    Any,
    /// Readers own the lock: grant the head readers, leave a head writer asleep.
    Readers,
    /// The caller stole a read lock: grant the head readers without taking a bias for
    /// the check.
    ReadOwned,
}

/// The raw lock. See the module documentation.
#[derive(Debug)]
pub(crate) struct RawRwLock {
    count: AtomicUsize,
    wait_list: Mutex<WaitList>,
    /// A writer is spinning (the kernel's OSQ, reduced to one slot).
    spinner: AtomicBool,
    /// How many more writers skip the spin because the last one ran out of budget (the
    /// owner was most likely suspended, not running: the kernel's "nonspinnable").
    spin_skip: AtomicU8,
    /// The most readers that may hold the lock at once (`with_max_readers`); more wait.
    max_readers: usize,
    /// `max_readers` in count-word units: a fast-path reader gets in only below it.
    read_limit: usize,
    policy: Policy,
    #[cfg_attr(not(feature = "stats"), allow(dead_code))] // read by `lockevent!` only
    pub(crate) stats: Counters,
}

impl RawRwLock {
    /// The most readers the count word can hold: the next one would reach `READ_FAIL`.
    pub(crate) const MAX_READERS: usize = (READ_FAIL >> READER_SHIFT) - 1;

    #[cfg(not(loom))]
    pub(crate) const fn new(policy: Policy, max_readers: usize) -> Self {
        assert!(max_readers > 0, "max_readers must be at least 1");
        assert!(max_readers <= Self::MAX_READERS, "max_readers is too large");
        Self {
            count: AtomicUsize::new(0),
            wait_list: Mutex::new(WaitList::new()),
            spinner: AtomicBool::new(false),
            spin_skip: AtomicU8::new(0),
            max_readers,
            read_limit: max_readers << READER_SHIFT,
            policy: policy.normalized(),
            stats: Counters::new(),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new(policy: Policy, max_readers: usize) -> Self {
        assert!(max_readers > 0, "max_readers must be at least 1");
        assert!(max_readers <= Self::MAX_READERS, "max_readers is too large");
        Self {
            count: AtomicUsize::new(0),
            wait_list: Mutex::new(WaitList::new()),
            spinner: AtomicBool::new(false),
            spin_skip: AtomicU8::new(0),
            max_readers,
            read_limit: max_readers << READER_SHIFT,
            policy: policy.normalized(),
            stats: Counters::new(),
        }
    }

    /// Room for one more reader beside the `readers` counted?
    #[inline]
    fn reader_room(&self, readers: usize) -> bool {
        readers < self.max_readers
    }

    /// Starts the count word at `count` (tests only: a lock with readers already "inside"
    /// to reach the overflow guard without billions of guards).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn set_count_for_tests(&self, count: usize) {
        self.count.store(count, Release);
    }

    #[inline]
    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The count word (tests).
    #[cfg(test)]
    pub(crate) fn count_word(&self) -> usize {
        self.count.load(Acq)
    }

    /// The number of queued waiters (tests).
    #[cfg(test)]
    pub(crate) fn queue_len(&self) -> usize {
        lock(&self.wait_list).len()
    }

    // ------------------------------------------------------------------------------------
    // Try-locks and releases.

    /// Takes a read lock if that needs no waiting: no writer, nobody queued, no handoff.
    #[inline]
    pub(crate) fn try_read(&self) -> bool {
        let mut count = self.count.load(Relaxed);
        while count & READ_FAILED_MASK == 0 && self.reader_room(readers(count)) {
            match self
                .count
                .compare_exchange_weak(count, count + READER_BIAS, Acq, Relaxed)
            {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
        false
    }

    /// Takes the write lock if it is free and nobody waits for it (the kernel's
    /// `down_write_trylock`: one CAS from idle).
    #[inline]
    pub(crate) fn try_write(&self) -> bool {
        self.write_fast()
    }

    /// Releases a read lock.
    ///
    /// # Safety
    ///
    /// The caller owns a read lock of `self` and gives it up.
    #[inline]
    pub(crate) unsafe fn unlock_read(&self) {
        let old = self.count.fetch_sub(READER_BIAS, Release);
        debug_assert!(old & READER_MASK != 0, "read unlock without a reader");
        let count = old.wrapping_sub(READER_BIAS);
        if count & WAITERS != 0
            && (count & LOCK_MASK == 0
                || upgrade_due(count)
                || readers(count) + 1 == self.max_readers && count & WRITER_LOCKED == 0)
        {
            // The lock is free, or an upgrade waits for us, or we freed the one slot a
            // queued reader waits for under `max_readers`.
            self.wake();
        }
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

    /// Turns the write lock into a read lock in one atomic step and, if a reader heads the
    /// queue, grants the queued readers (not the queued writers) the lock beside it; a
    /// writer at the head keeps its place and the readers behind it (`__downgrade_write`).
    ///
    /// # Safety
    ///
    /// The caller owns the write lock of `self`; afterwards it owns a read lock instead.
    pub(crate) unsafe fn downgrade(&self) {
        let old = self
            .count
            .fetch_add(READER_BIAS.wrapping_sub(WRITER_LOCKED), AcqRel);
        debug_assert!(
            old & WRITER_LOCKED != 0,
            "downgrade of a lock not write-locked"
        );
        if old & WAITERS != 0 {
            self.wake_readers_after_steal();
        }
    }

    /// Releases the lock on behalf of a granted waiter of `kind`.
    ///
    /// # Safety
    ///
    /// The caller owns the lock a waiter of that kind is granted (a granted upgrader owns
    /// the write lock) and gives it up.
    #[inline]
    pub(crate) unsafe fn unlock(&self, kind: Kind) {
        match kind {
            // SAFETY: forwarded from the caller.
            Kind::Reader => unsafe { self.unlock_read() },
            // SAFETY: forwarded from the caller.
            Kind::Writer | Kind::Upgrader => unsafe { self.unlock_write() },
            // SAFETY: forwarded from the caller.
            Kind::Upgradable => unsafe { self.unlock_upgradable() },
        }
    }

    // ------------------------------------------------------------------------------------
    // Upgradable readers: a read lock plus the `UPGRADABLE` bit, at most one at a time.

    /// Takes the upgradable read lock if that needs no waiting: no writer, no other
    /// upgradable reader, nobody queued.
    #[inline]
    pub(crate) fn try_upgradable_read(&self) -> bool {
        let mut count = self.count.load(Relaxed);
        while count & (READ_FAILED_MASK | UPGRADABLE) == 0 && self.reader_room(readers(count)) {
            match self.count.compare_exchange_weak(
                count,
                count + READER_BIAS + UPGRADABLE,
                Acq,
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

    /// Turns the upgradable read lock into a plain read lock.
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock; afterwards it owns a read lock instead.
    pub(crate) unsafe fn downgrade_upgradable(&self) {
        let old = self.count.fetch_sub(UPGRADABLE, AcqRel);
        debug_assert!(old & UPGRADABLE != 0);
        if old & WAITERS != 0 {
            self.wake_readers_after_steal();
        }
    }

    /// Turns the write lock into the upgradable read lock in one atomic step, granting the
    /// queued readers (not writers, nor upgradable readers) beside it.
    ///
    /// # Safety
    ///
    /// The caller owns the write lock; afterwards it owns the upgradable read lock.
    pub(crate) unsafe fn downgrade_to_upgradable(&self) {
        let old = self.count.fetch_add(
            (READER_BIAS + UPGRADABLE).wrapping_sub(WRITER_LOCKED),
            AcqRel,
        );
        debug_assert!(old & WRITER_LOCKED != 0 && old & UPGRADABLE == 0);
        if old & WAITERS != 0 {
            self.wake_readers_after_steal();
        }
    }

    /// Trades the upgradable read lock for the write lock if no other reader holds the
    /// lock. Does not wait.
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock; on `true` it owns the write lock instead.
    pub(crate) unsafe fn try_upgrade(&self) -> bool {
        let mut count = self.count.load(Relaxed);
        loop {
            debug_assert!(count & UPGRADABLE != 0);
            if readers(count) != 1 {
                return false;
            }
            // Only our bias is left: trade it (and the bit) for the writer bit. A pending
            // handoff stays for the head to take when we release.
            let new = (count - READER_BIAS - UPGRADABLE) | WRITER_LOCKED;
            match self.count.compare_exchange_weak(count, new, Acq, Relaxed) {
                Ok(_) => return true,
                Err(now) => count = now,
            }
        }
    }

    /// Queues an upgradable reader (its bias is not in the count). Returns `false`; the
    /// node may have been granted already (the caller checks its state).
    ///
    /// # Safety
    ///
    /// As for [`write_queue`](Self::write_queue), for an upgradable-reader node.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn upgradable_queue(&self, node: NonNull<Waiter>, waker: Waker) {
        let mut wakers = WakeList::new();
        let mut list = lock(&self.wait_list);
        let first = list.is_empty();
        // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
        unsafe { list.enqueue(node, waker, false) };
        lockevent!(self, sleep_reader);
        if first {
            self.count.fetch_or(WAITERS, Relaxed);
        }
        // The lock may have changed since the fast path failed: grant what can be.
        let count = self.count.load(Relaxed);
        self.cond_wake(&mut list, count, &mut wakers);
        drop(list);
        wakers.wake_all();
    }

    /// Queues the upgradable reader's upgrade at the head of the queue and sets `HANDOFF`,
    /// so that no new reader gets in while the others leave. Returns `true` with the write
    /// lock owned (the node unlinked again).
    ///
    /// # Safety
    ///
    /// The caller owns the upgradable read lock; `node` is as for
    /// [`write_queue`](Self::write_queue), an upgrader node.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn upgrade_queue(&self, node: NonNull<Waiter>, waker: Waker) -> bool {
        let mut list = lock(&self.wait_list);
        // SAFETY: we own the upgradable read lock.
        if unsafe { self.try_upgrade() } {
            return true;
        }
        // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
        unsafe { list.enqueue(node, waker, true) };
        lockevent!(self, sleep_writer);
        self.count.fetch_or(WAITERS | HANDOFF, Relaxed);
        // The other readers may have left before the bits were set (their unlock saw no
        // waiters): look again.
        // SAFETY: the node is linked in `list`, which we hold.
        unsafe { self.try_upgrade_own(&mut list, node) }
    }

    /// Under the wait lock, for a queued upgrader: take the write lock if only its own
    /// bias is left, unlinking the node. The node's state is the caller's to set: `IDLE`
    /// by its owner, `GRANTED` (last) by a waker.
    ///
    /// # Safety
    ///
    /// `node` is a linked upgrader node of `list`, the locked wait list of `self`.
    unsafe fn try_upgrade_locked(&self, list: &mut WaitList, node: NonNull<Waiter>) -> bool {
        debug_assert_eq!(list.head(), Some(node));
        let mut count = self.count.load(Relaxed);
        loop {
            if count & WRITER_LOCKED != 0 || readers(count) != 1 {
                return false;
            }
            let mut new = (count - READER_BIAS - UPGRADABLE) | WRITER_LOCKED;
            new &= !HANDOFF;
            if list.len() == 1 {
                new &= !WAITERS;
            }
            match self.count.compare_exchange_weak(count, new, Acq, Relaxed) {
                Ok(_) => break,
                Err(now) => count = now,
            }
        }
        // SAFETY: linked in `list`, wait lock held.
        unsafe { list.remove(node) };
        lockevent!(self, wlock_queued);
        true
    }

    /// [`try_upgrade_locked`](Self::try_upgrade_locked) by the upgrader itself.
    ///
    /// # Safety
    ///
    /// As for `try_upgrade_locked`; the caller owns the node.
    unsafe fn try_upgrade_own(&self, list: &mut WaitList, node: NonNull<Waiter>) -> bool {
        // SAFETY: forwarded from the caller.
        let won = unsafe { self.try_upgrade_locked(list, node) };
        if won {
            // SAFETY: the caller owns the node.
            unsafe { node.as_ref() }.state.store(IDLE, Relaxed);
        }
        won
    }

    /// `rwsem_wake`: the lock may be free and someone waits.
    #[cold]
    #[inline(never)]
    fn wake(&self) {
        let mut wakers = WakeList::new();
        let mut list = lock(&self.wait_list);
        if !list.is_empty() {
            self.mark_wake(&mut list, WakeType::Any, &mut wakers);
        }
        drop(list);
        wakers.wake_all();
    }

    // ------------------------------------------------------------------------------------
    // Readers.

    /// The read fast path: one `fetch_add`. On failure returns the count word with our
    /// bias still in it, for [`read_slowpath`](Self::read_slowpath).
    #[inline]
    pub(crate) fn read_fast(&self) -> Result<(), usize> {
        let old = self.count.fetch_add(READER_BIAS, Acq);
        // With no flag set, `old` is the readers' biases (plus, maybe, `UPGRADABLE`, which
        // is below one bias): below the limit means room for us.
        if old & READ_FAILED_MASK == 0 && old < self.read_limit {
            lockevent!(self, rlock_fast);
            Ok(())
        } else {
            Err(old.wrapping_add(READER_BIAS))
        }
    }

    /// The read slow path (`rwsem_down_read_slowpath`) up to the queue, entered with our
    /// bias in `count`: steal the lock, or spin for it (policy `reader_spin`). Returns
    /// `true` if we own a read lock; `false` if the reader must queue, with its bias in the
    /// count (for [`read_queue`](Self::read_queue), after
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
        let reader_owned = count & WRITER_LOCKED == 0 && (rcnt > 1 || rcnt > self.max_readers);
        if !reader_owned && count & (WRITER_LOCKED | HANDOFF) == 0 {
            lockevent!(self, rlock_steal);
            if rcnt == 1 && count & WAITERS != 0 {
                // The first reader in: let the queued readers share the lock.
                self.wake_readers_after_steal();
            }
            return true;
        }
        if !reader_owned
            && count & (WRITER_LOCKED | HANDOFF) == WRITER_LOCKED
            && !self.policy.reader_spin.is_zero()
        {
            // SAFETY: our bias is in the count; taking it back is a read unlock.
            unsafe { self.unlock_read() };
            if self.read_spin() {
                return true;
            }
            self.count.fetch_add(READER_BIAS, Acq);
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
    /// Our bias is in the count. `node` is a pinned [`IDLE`] reader node that stays alive,
    /// and is unlinked by the caller's drop, while it is [`WAITING`].
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn read_queue(&self, node: NonNull<Waiter>, waker: Waker) -> bool {
        let mut adjustment = READER_BIAS.wrapping_neg();
        let mut wakers = WakeList::new();
        let mut list = lock(&self.wait_list);
        if list.is_empty() {
            // Nobody waits, so no handoff is pending: without a writer (and within
            // `max_readers`) our bias is a read lock (the kernel's `rwsem_rlock_fast`).
            let now = self.count.load(Acq);
            if now & WRITER_LOCKED == 0 && readers(now) <= self.max_readers {
                drop(list);
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
        self.cond_wake(&mut list, count, &mut wakers);
        drop(list);
        wakers.wake_all();
        false
    }

    /// A bounded spin of a reader that found the lock write-locked (policy
    /// `reader_spin`), entered without a bias in the count. Returns `true` with a read
    /// lock owned.
    fn read_spin(&self) -> bool {
        let budget = self.policy.reader_spin;
        let start = Instant::now();
        let mut step = 0u32;
        let mut rounds = 0u32;
        loop {
            let count = self.count.load(Relaxed);
            if count & HANDOFF != 0 {
                return false;
            }
            if count & WRITER_LOCKED == 0 {
                let old = self.count.fetch_add(READER_BIAS, Acq);
                let stealable = old & (WRITER_LOCKED | HANDOFF | READ_FAIL) == 0
                    && (readers(old) == 0 || old & WAITERS == 0)
                    && self.reader_room(readers(old));
                if stealable {
                    lockevent!(self, rlock_spin);
                    if readers(old) == 0 && old & WAITERS != 0 {
                        self.wake_readers_after_steal();
                    }
                    return true;
                }
                // SAFETY: we just added this bias; taking it back is a read unlock.
                unsafe { self.unlock_read() };
                if old & (HANDOFF | WAITERS) != 0 {
                    return false;
                }
            }
            rounds += 1;
            if spin_over(start, budget, rounds) {
                return false;
            }
            backoff(&mut step);
        }
    }

    /// After a reader stole the lock (or a writer downgraded) with waiters queued, grant
    /// the queued readers.
    #[cold]
    fn wake_readers_after_steal(&self) {
        let mut wakers = WakeList::new();
        let mut list = lock(&self.wait_list);
        if !list.is_empty() {
            self.mark_wake(&mut list, WakeType::ReadOwned, &mut wakers);
        }
        drop(list);
        wakers.wake_all();
    }

    // ------------------------------------------------------------------------------------
    // Writers.

    /// The write fast path: one CAS from idle.
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
            .compare_exchange(0, WRITER_LOCKED, Acq, Relaxed)
            .is_ok()
    }

    /// The writer's bounded optimistic spin (`rwsem_optimistic_spin`). Returns `true`
    /// with the write lock owned.
    ///
    /// Two async adaptations of the kernel's spin, both measured (see the CHANGELOG):
    /// - One spinner at a time (the kernel queues its spinners on the OSQ lock): a second
    ///   writer goes straight on to yield or queue instead of burning another worker.
    /// - Spin only while nobody is queued. With waiters the lock goes to a woken task,
    ///   which may sit in its executor's run queue for a long time: a spinner would steal
    ///   from it (starving readers queued behind) or burn its worker waiting for a task
    ///   that is not running. The kernel spins only while the owner runs on a CPU; "the
    ///   queue is empty" is the nearest thing a lock can see from inside an executor.
    pub(crate) fn write_spin(&self) -> bool {
        let base = self.policy.writer_spin;
        if base.is_zero() || self.count.load(Relaxed) & WAITERS != 0 {
            return false;
        }
        if self.spin_skip.load(Relaxed) != 0 {
            // A recent spin ran out of budget: skip this one (and count down).
            let _ = self
                .spin_skip
                .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
            lockevent!(self, opt_nospin);
            return false;
        }
        if self.spinner.swap(true, Acq) {
            lockevent!(self, opt_nospin);
            return false;
        }
        let won = self.write_spin_owned(base);
        self.spinner.store(false, Release);
        won
    }

    /// The spin itself, by the one spinner.
    fn write_spin_owned(&self, base: Duration) -> bool {
        let start = Instant::now();
        let mut step = 0u32;
        let mut rounds = 0u32;
        loop {
            let count = self.count.load(Relaxed);
            if count == 0 {
                if self.write_fast_cas() {
                    lockevent!(self, opt_lock);
                    return true;
                }
                continue;
            }
            if count & WAITERS != 0 {
                break; // someone queued: the lock is theirs next.
            }
            // Readers hold the lock longer in aggregate: spin longer for more of them, as
            // the kernel does (10 us + 0.5 us per reader, at most 25 us).
            let budget = if count & WRITER_LOCKED == 0 {
                let extra = base.saturating_mul(readers(count).min(u32::MAX as usize) as u32) / 20;
                base.saturating_add(extra).min(base.saturating_mul(5) / 2)
            } else {
                base
            };
            rounds += 1;
            if spin_over(start, budget, rounds) {
                // The owner kept the lock for the whole budget: most likely it is a task
                // suspended inside its section, which no spinning will hurry. Let the
                // next few writers go straight on to yield and queue.
                self.spin_skip.store(SPIN_SKIP_AFTER_FAIL, Relaxed);
                break;
            }
            backoff(&mut step);
        }
        lockevent!(self, opt_fail);
        false
    }

    /// Queues a writer and tries for the lock once under the wait lock. Returns `true`
    /// with the write lock owned (and the node unlinked again).
    ///
    /// # Safety
    ///
    /// `node` is a pinned [`IDLE`] writer node that stays alive, and is unlinked by the
    /// caller's drop, while it is [`WAITING`].
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn write_queue(&self, node: NonNull<Waiter>, waker: Waker) -> bool {
        let mut wakers = WakeList::new();
        let mut list = lock(&self.wait_list);
        let first = list.is_empty();
        // SAFETY: the node is pinned, idle and ours, and we hold the wait lock.
        unsafe { list.enqueue(node, waker, false) };
        lockevent!(self, sleep_writer);
        if first {
            self.count.fetch_or(WAITERS, Relaxed);
        } else {
            // Others wait already: readers at the head may be grantable now.
            let count = self.count.load(Relaxed);
            self.cond_wake(&mut list, count, &mut wakers);
        }
        // SAFETY: the node is linked and we hold the wait lock.
        let acquired = unsafe { self.try_write_lock(&mut list, node) };
        drop(list);
        wakers.wake_all();
        acquired
    }

    /// `rwsem_try_write_lock`, for a queued writer under the wait lock: take the lock if it
    /// is free (and no handoff is pending for another waiter), unlinking the node; or, as
    /// the head that has waited past the timeout, set `HANDOFF`.
    ///
    /// # Safety
    ///
    /// `node` is linked in `list`, which is the locked wait list of `self`.
    unsafe fn try_write_lock(&self, list: &mut WaitList, node: NonNull<Waiter>) -> bool {
        let is_head = list.head() == Some(node);
        if !is_head && self.policy.handoff_timeout.is_zero() {
            // Handoff at every release: a queued waiter never passes the head, even when
            // it is polled in the instant between a release and its grant.
            return false;
        }
        let mut due = None;
        let mut count = self.count.load(Relaxed);
        loop {
            if count & HANDOFF != 0 && !is_head {
                return false;
            }
            let new = if count & LOCK_MASK != 0 {
                if count & HANDOFF != 0 || !is_head {
                    return false;
                }
                // A head that was woken and found the lock taken lost a race: it asks
                // for the handoff at once. Otherwise the timeout decides.
                // SAFETY: linked node, wait lock held.
                let due = *due.get_or_insert_with(|| unsafe {
                    let lost = node.as_ref().with_inner(|inner| inner.woken);
                    lost && self.policy.handoff_timeout != Duration::MAX || self.timed_out(node)
                });
                if !due {
                    return false;
                }
                count | HANDOFF
            } else {
                let mut new = (count | WRITER_LOCKED) & !HANDOFF;
                if list.len() == 1 {
                    new &= !WAITERS;
                }
                new
            };
            match self.count.compare_exchange_weak(count, new, Acq, Relaxed) {
                Ok(_) if new & HANDOFF != 0 => {
                    lockevent!(self, wlock_handoff);
                    return false;
                }
                Ok(_) => break,
                Err(now) => count = now,
            }
        }
        // SAFETY: linked in `list`, wait lock held.
        unsafe { list.remove(node) };
        // SAFETY: the node is alive (linked until just now) and ours.
        unsafe { node.as_ref() }.state.store(IDLE, Relaxed);
        lockevent!(self, wlock_queued);
        true
    }

    // ------------------------------------------------------------------------------------
    // Queued waiters: re-polls and cancellation.

    /// A re-poll of a queued node. Returns `true` when the owner now holds the lock (the
    /// node is unlinked and no longer [`WAITING`]).
    ///
    /// # Safety
    ///
    /// `node` belongs to the caller, was queued on `self` and is pinned.
    pub(crate) unsafe fn poll_queued(&self, node: NonNull<Waiter>, waker: &Waker) -> bool {
        // SAFETY: the node is alive (the caller owns it).
        let waiter = unsafe { node.as_ref() };
        if waiter.state.load(Acq) != WAITING {
            return true;
        }
        // A new waker, cloned without the wait lock held (foreign code may panic).
        let mut new_waker = None;
        loop {
            let mut list = lock(&self.wait_list);
            if waiter.state.load(Relaxed) != WAITING {
                return true;
            }
            // SAFETY: linked (WAITING) and we hold the wait lock.
            let acquired = unsafe {
                match waiter.kind {
                    Kind::Writer => self.try_write_lock(&mut list, node),
                    Kind::Upgrader => self.try_upgrade_own(&mut list, node),
                    Kind::Reader | Kind::Upgradable => false,
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
        let state = waiter.state.load(Acq);
        if state == GRANTED {
            // SAFETY: a granted node's owner holds the lock; it gives it up.
            unsafe { self.unlock(kind) };
            self.count_cancel(kind);
            return;
        }
        if state == IDLE {
            return;
        }
        let mut wakers = WakeList::new();
        let mut list = lock(&self.wait_list);
        match waiter.state.load(Relaxed) {
            GRANTED => {
                drop(list);
                // SAFETY: as above; the grant happened under the wait lock we then took.
                unsafe { self.unlock(kind) };
                self.count_cancel(kind);
                return;
            }
            IDLE => return,
            _ => {}
        }
        let was_head = list.head() == Some(node);
        // SAFETY: WAITING means linked; we hold the wait lock.
        let waker = unsafe {
            list.remove(node);
            waiter.with_inner(|inner| inner.waker.take())
        };
        waiter.state.store(IDLE, Relaxed);
        if kind == Kind::Upgrader {
            // A dropped upgrade gives up the upgradable read lock it was holding too.
            self.count.fetch_sub(READER_BIAS + UPGRADABLE, Release);
        }
        if list.is_empty() {
            self.count.fetch_and(!(WAITERS | HANDOFF), Relaxed);
        } else if was_head {
            // The next head inherits any handoff, and may be able to run now.
            self.mark_wake(&mut list, WakeType::Any, &mut wakers);
        }
        drop(list);
        drop(waker);
        wakers.wake_all();
        self.count_cancel(kind);
    }

    #[inline]
    fn count_cancel(&self, kind: Kind) {
        match kind {
            Kind::Reader | Kind::Upgradable => lockevent!(self, rlock_cancel),
            Kind::Writer | Kind::Upgrader => lockevent!(self, wlock_cancel),
        }
    }

    // ------------------------------------------------------------------------------------
    // Waking.

    /// `rwsem_cond_wake_waiter`: after a change that may let the head run.
    fn cond_wake(&self, list: &mut WaitList, count: usize, wakers: &mut WakeList) {
        if count & WRITER_LOCKED != 0 {
            return;
        }
        let wake_type = if count & READER_MASK != 0 {
            WakeType::Readers
        } else {
            WakeType::Any
        };
        self.mark_wake(list, wake_type, wakers);
    }

    /// Has the node waited past the handoff timeout?
    ///
    /// # Safety
    ///
    /// `node` is linked and the caller holds the wait lock.
    unsafe fn timed_out(&self, node: NonNull<Waiter>) -> bool {
        let timeout = self.policy.handoff_timeout;
        if timeout == Duration::MAX {
            return false;
        }
        // SAFETY: caller's contract.
        let queued_at = unsafe { node.as_ref().with_inner(|inner| inner.queued_at) };
        timeout.is_zero() || queued_at.is_some_and(|t| t.elapsed() >= timeout)
    }

    /// `rwsem_mark_wake`: wake or grant the head of the queue, under the wait lock. Wakers
    /// go to `wakers`, to be called once the wait lock is released.
    fn mark_wake(&self, list: &mut WaitList, wake_type: WakeType, wakers: &mut WakeList) {
        while self.mark_wake_once(list, wake_type, wakers) {}
    }

    /// One pass of [`mark_wake`](Self::mark_wake). Returns `true` if it must look again:
    /// its check bias filled the last `max_readers` slot while a reader left, so that
    /// reader's release woke nobody, and the slot is free now.
    fn mark_wake_once(
        &self,
        list: &mut WaitList,
        wake_type: WakeType,
        wakers: &mut WakeList,
    ) -> bool {
        let Some(head) = list.head() else {
            return false;
        };
        // SAFETY: linked nodes are alive while we hold the wait lock.
        let head_ref = unsafe { head.as_ref() };
        match head_ref.kind {
            Kind::Writer => {
                if wake_type == WakeType::Any {
                    // SAFETY: `head` is linked in `list`, which we hold.
                    unsafe { self.wake_writer(list, head, wakers) };
                }
                return false;
            }
            Kind::Upgrader => {
                // SAFETY: `head` is linked in `list`, which we hold.
                unsafe { self.grant_upgrader(list, head, wakers) };
                return false;
            }
            Kind::Reader | Kind::Upgradable => {}
        }

        // The head is a reader: grant every queued reader (up to the batch limit) at once,
        // and the first queued upgradable reader if no upgradable reader holds the lock.
        let oldcount;
        let mut adjustment = 0usize;
        if wake_type == WakeType::ReadOwned {
            // Our caller owns a read lock, so no writer can get in. HANDOFF is stable
            // under the wait lock.
            oldcount = self.count.load(Relaxed);
        } else {
            if self.count.load(Relaxed) & READ_FAIL != 0 {
                return false; // Too many readers already: the unlocks will wake again.
            }
            // Take a read lock for the head first, to keep writers out while we grant.
            adjustment = READER_BIAS;
            oldcount = self.count.fetch_add(READER_BIAS, Acq);
            if oldcount & WRITER_LOCKED != 0 {
                // A writer holds the lock (one that took it before this grant, or the
                // head of a queue that this grant's caller is passing the wake-up down).
                // The reader head is next: request the handoff, so that no reader
                // steals in between and the release grants it directly.
                let mut undo = READER_BIAS.wrapping_neg();
                if oldcount & HANDOFF == 0 && self.policy.handoff_timeout != Duration::MAX {
                    undo = undo.wrapping_add(HANDOFF);
                    lockevent!(self, rlock_handoff);
                }
                self.count.fetch_add(undo, Release);
                return false;
            }
        }

        // Pass 1: how many readers to grant. The count must hold all their biases before
        // any of them is marked granted, or one could run, unlock and let a writer in
        // beside readers that are still to be marked.
        // `UPGRADABLE` can be cleared meanwhile (its holder leaves) but not set: setting it
        // needs an empty queue or the wait lock. So a clear bit here stays clear.
        // Within `max_readers`: the readers already inside (our check bias, if any, is
        // the head's and counts as granted below) leave this much room.
        let room = self.max_readers.saturating_sub(readers(oldcount));
        let batch = self
            .policy
            .reader_wake_batch
            .min(WakeList::CAPACITY - 1)
            .min(room);
        let mut pick = GrantPick::new(oldcount);
        let mut woken = 0usize;
        let mut cursor = Some(head);
        while let Some(node) = cursor {
            if woken == batch {
                break;
            }
            // SAFETY: linked nodes are alive while we hold the wait lock.
            if pick.take(unsafe { node.as_ref() }.kind) {
                woken += 1;
            }
            // SAFETY: `node` is linked in `list`, which we hold.
            cursor = unsafe { list.next(node) };
        }
        if woken == 0 {
            // Nobody can be granted now: only an upgradable reader waits at the head while
            // another holds the lock, or `max_readers` readers are inside. Their release
            // wakes the queue again.
            if adjustment != 0 {
                let now = self
                    .count
                    .fetch_sub(adjustment, Release)
                    .wrapping_sub(adjustment);
                // Our check bias was in the count: a reader that left meanwhile saw the
                // last slot still taken (by it) and woke nobody. If that left room, the
                // wake-up is ours to make.
                return room == 0 && now & WRITER_LOCKED == 0 && self.reader_room(readers(now));
            }
            return false;
        }
        let head_granted = GrantPick::new(oldcount).take(head_ref.kind);
        let mut adjust = (woken * READER_BIAS).wrapping_sub(adjustment);
        if pick.upgradable_taken {
            adjust = adjust.wrapping_add(UPGRADABLE);
        }
        if woken == list.len() {
            // Everyone is granted: nobody waits any more, nobody needs a handoff.
            adjust = adjust.wrapping_sub(WAITERS);
            if oldcount & HANDOFF != 0 {
                adjust = adjust.wrapping_sub(HANDOFF);
            }
        } else if oldcount & HANDOFF != 0 && head_granted {
            // The head got the lock: the handoff it asked for is done.
            adjust = adjust.wrapping_sub(HANDOFF);
        }
        if adjust != 0 {
            self.count.fetch_add(adjust, AcqRel);
        }

        // Pass 2: unlink them, take their wakers, and only then mark them granted.
        let mut pick = GrantPick::new(oldcount);
        let mut left = woken;
        let mut cursor = Some(head);
        while left > 0 {
            let node = cursor.expect("pass 1 counted these readers");
            // SAFETY: `node` is linked in `list`, which we hold.
            cursor = unsafe { list.next(node) };
            // SAFETY: linked nodes are alive while we hold the wait lock.
            let waiter = unsafe { node.as_ref() };
            if !pick.take(waiter.kind) {
                continue;
            }
            // SAFETY: linked in `list`; wait lock held.
            let waker = unsafe {
                list.remove(node);
                waiter.with_inner(|inner| inner.waker.take())
            };
            if let Some(waker) = waker {
                wakers.push(waker);
            }
            // Last touch of the node: from here its owner may drop it.
            waiter.state.store(GRANTED, Release);
            lockevent!(self, wake_reader);
            left -= 1;
        }
        false
    }

    /// Grants the queued upgrade at the head the write lock if only its own bias is left.
    ///
    /// # Safety
    ///
    /// `head` is the head of `list`, the locked wait list of `self`, and an upgrader.
    unsafe fn grant_upgrader(
        &self,
        list: &mut WaitList,
        head: NonNull<Waiter>,
        wakers: &mut WakeList,
    ) {
        // SAFETY: forwarded from the caller.
        if !unsafe { self.try_upgrade_locked(list, head) } {
            return;
        }
        // SAFETY: the node was linked until just now and its owner cannot drop it before
        // it sees GRANTED, which is stored last.
        let waiter = unsafe { head.as_ref() };
        // SAFETY: as above; we hold the wait lock.
        if let Some(waker) = unsafe { waiter.with_inner(|inner| inner.waker.take()) } {
            wakers.push(waker);
        }
        waiter.state.store(GRANTED, Release);
    }

    /// Wakes the head writer; or, with the lock free and a handoff pending or due (the head
    /// has waited past the timeout), grants it the lock directly.
    ///
    /// Granting a head that is due a handoff here, in the releasing task, is this crate's
    /// adaptation of the kernel: there a woken writer runs at once and sets `HANDOFF`
    /// itself; a woken task may wait in its executor's run queue while arrivals steal the
    /// lock, so the bound on its wait must not depend on when it is next polled.
    ///
    /// # Safety
    ///
    /// `head` is the head of `list`, which is the locked wait list of `self`.
    unsafe fn wake_writer(
        &self,
        list: &mut WaitList,
        head: NonNull<Waiter>,
        wakers: &mut WakeList,
    ) {
        // SAFETY: linked nodes are alive while we hold the wait lock.
        let waiter = unsafe { head.as_ref() };
        let mut count = self.count.load(Relaxed);
        if count & LOCK_MASK != 0 {
            // Still owned: the owner's release will wake the head.
            return;
        }
        // SAFETY: `head` is linked and we hold the wait lock.
        if count & HANDOFF != 0 || unsafe { self.timed_out(head) } {
            if count & HANDOFF == 0 {
                lockevent!(self, wlock_handoff);
            }
            // Nobody but the head may take the lock now: hand it over directly.
            loop {
                if count & LOCK_MASK != 0 {
                    return; // a reader's transient bias; its queueing re-checks.
                }
                let mut new = (count | WRITER_LOCKED) & !HANDOFF;
                if list.len() == 1 {
                    new &= !WAITERS;
                }
                match self.count.compare_exchange_weak(count, new, Acq, Relaxed) {
                    Ok(_) => break,
                    Err(now) => count = now,
                }
            }
            // SAFETY: `head` is linked in `list`; wait lock held.
            let waker = unsafe {
                list.remove(head);
                waiter.with_inner(|inner| inner.waker.take())
            };
            if let Some(waker) = waker {
                wakers.push(waker);
            }
            // Last touch of the node: from here its owner may drop it.
            waiter.state.store(GRANTED, Release);
            lockevent!(self, wlock_queued);
            return;
        }
        // SAFETY: linked, wait lock held.
        let waker = unsafe {
            waiter.with_inner(|inner| {
                inner.woken = true;
                inner.waker.take()
            })
        };
        if let Some(waker) = waker {
            wakers.push(waker);
            lockevent!(self, wake_writer);
        }
    }
}

/// Is a release leaving only the upgradable reader's bias, with its upgrade (most likely)
/// queued? (`HANDOFF` with `UPGRADABLE` and one reader.) Then the release must wake it.
#[inline]
fn upgrade_due(count: usize) -> bool {
    count & (LOCK_MASK | UPGRADABLE | HANDOFF) == READER_BIAS | UPGRADABLE | HANDOFF
}

/// Which queued waiters one batch grant takes: every reader, and the first upgradable
/// reader if no upgradable reader holds the lock.
struct GrantPick {
    upgradable_free: bool,
    upgradable_taken: bool,
}

impl GrantPick {
    fn new(count: usize) -> Self {
        Self {
            upgradable_free: count & UPGRADABLE == 0,
            upgradable_taken: false,
        }
    }

    fn take(&mut self, kind: Kind) -> bool {
        match kind {
            Kind::Reader => true,
            Kind::Upgradable if self.upgradable_free && !self.upgradable_taken => {
                self.upgradable_taken = true;
                true
            }
            _ => false,
        }
    }
}

/// How many writers skip the spin after one ran out of budget (adaptive spinning: a lock
/// whose owners suspend inside their sections stops paying for spins that cannot win).
const SPIN_SKIP_AFTER_FAIL: u8 = 8;

/// Has a spin that started at `start` used up `budget`? Under loom, whose models must be
/// deterministic, a spin is bounded by rounds instead of time.
#[inline]
fn spin_over(start: Instant, budget: Duration, rounds: u32) -> bool {
    if cfg!(loom) {
        rounds >= 2
    } else {
        start.elapsed() >= budget
    }
}

/// Exponential backoff for the spin loops: 1, 2, 4 ... 64 pause instructions.
#[inline]
fn backoff(step: &mut u32) {
    for _ in 0..(1u32 << *step) {
        spin_loop();
    }
    if *step < 6 {
        *step += 1;
    }
}
