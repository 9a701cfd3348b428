//! The raw lock: the count word, the wait list, the lock futures and the policy. Nothing
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
//!   readers from bit 8. Its documentation lists every place that sets or clears a flag.
//! - **Readers** ([`read`]) add [`READER_BIAS`](count::READER_BIAS) in one `fetch_add`
//!   and own the lock if none of `READ_FAILED_MASK` was set (and `max_readers` leaves
//!   room). Otherwise (the bias still in the count) they *steal* the lock if neither a
//!   writer nor a handoff is pending and readers do not already own it; else they queue,
//!   and are *granted* the lock by a waker, which adds their bias before it wakes them.
//! - **Writers** ([`write`](mod@write)) CAS `0 -> WRITER_LOCKED`; else one of them at a time spins
//!   on the count word for the learned budget, past a non-empty queue, and takes a free
//!   lock unless a handoff is pending; then, unless readers own the lock (whom arriving
//!   readers keep joining), they yield to the executor a bounded number of times; then
//!   they queue. One that has just queued takes the lock only if it is free at
//!   that instant and no handoff is pending (the kernel's `rwsem_try_write_lock`). A woken
//!   writer takes the lock itself under the wait lock; if it is taken, the head asks for
//!   the handoff and spins for the owner (`head_spin`, the kernel's handoff waiter on
//!   `rwsem_spin_on_owner`), and the release grants it.
//! - **The convoy rule** (the async form of the kernel's "spin while the owner is on a
//!   CPU"): an executor runs as many tasks as it has workers, so if every task whose
//!   section does not await spins while the owner runs, at most `workers` tasks contend
//!   and the queue holds only tasks whose owner was suspended. A rule "do not spin while
//!   anyone is queued" instead turns every acquire into a sleep and a wake-up once one
//!   task has queued (measured: 240 writers with tiny sections, 0.42x tokio, every
//!   acquire asleep). So spins ignore the queue, and stop only for a pending handoff
//!   (which bounds what the queued lose, as in the kernel) or for an owner that is not
//!   running: a queued writer granted the lock at a release and not yet polled
//!   (`OWNER_PENDING`, set with the grant, cleared by the owner's next poll). A reader
//!   spins with its bias in the count, so that the writer's release leaves it the lock.
//! - **Upgradable reads, upgrades and downgrades** ([`upgradable`]): one upgradable reader
//!   beside plain readers; an upgrade queues at the head with `HANDOFF` set and is granted
//!   the write lock when the other readers have left. A timed upgrade whose time runs out
//!   is stopped: it leaves the queue and keeps the upgradable read lock.
//! - **Handoff**: when the head waiter has waited longer than the policy's handoff timeout,
//!   or was woken and lost the race, `HANDOFF` is set and the next release grants the head
//!   the lock directly; meanwhile nobody else may take it. This bounds the unfairness that
//!   stealing buys throughput with.
//! - **Bounded passing** ([`fair`], `Policy::pass_bound`): while the queue is not empty,
//!   each pass of it (a reader's steal or won spin with a writer at the head, a writer's
//!   won spin with waiters queued, a queued writer taking the lock ahead of the head) is
//!   counted in [`spin`]'s word; the pass that reaches the bound sets `HANDOFF` for the
//!   head under the wait lock, so the passer's release grants the head. Any grant to the
//!   queue, or a new queue, starts the count again. A head that is a parked thread
//!   ([`parking`]: a blocking acquire's node) is served by the handoff timeout alone: at
//!   the bound the count pauses until the queue's next turn, and queued readers are not
//!   granted past such a head writer.
//! - **Fair unlocks** ([`fair`], `parking_lot`'s `unlock_fair`): an owner sets `HANDOFF`
//!   for the head before it releases, so that the release grants the head directly.
//! - **Waking** ([`wake`], the kernel's `rwsem_mark_wake`): a head writer is woken alone
//!   (or granted the lock directly under handoff), unless readers are queued behind it
//!   and the lock is free or reader-owned: then at most two of them pass it and it gets
//!   the handoff (the queue alternates a few readers and a writer; with every reader
//!   granted, writers fell to 4% of the operations of mixed-40-40, with none, readers to
//!   9-11%); a head reader means every queued reader,
//!   skipping writers, up to the batch limit, is granted in one atomic add (with at most
//!   one queued upgradable reader; under `strict_order` or a zero handoff timeout only the
//!   run of readers at the head, up to the first waiter it cannot take; so too, and no
//!   reader passes a head writer, while a timed pass that cost its writer more than the
//!   handoff timeout vetoes passing, after which every pass is timed for a while:
//!   `PassCheck`); a head upgrade is granted the write lock when only its
//!   own read bias is left. [`RawRwLock::grant`] is the one place a node is granted.
//! - **The waiter's side** ([`waiter`]): the lock future ([`LockFuture`]), its re-polls,
//!   and cancellation: dropping a pending acquire unlinks its node; if it was the head the
//!   next head is woken (and inherits `HANDOFF`); a granted node releases the lock.
//!
//! # Walkthroughs
//!
//! The call chains of the four main paths, as a reader of the code follows them.
//!
//! **A reader behind a writer.**
//! 1. `RwLock::read` takes `token::lock_or_wait!`, which calls
//!    [`read_fast`](RawRwLock::read_fast). Its `fetch_add` finds `WRITER_LOCKED`, so it
//!    fails with the bias left in the count.
//! 2. [`LockFuture::after_fast_path`] takes the bias over (phase `FastFailed`). Its first
//!    poll calls [`read_slowpath`](RawRwLock::read_slowpath): the reader spins for the
//!    writer if the learned budget allows, else it goes on with its bias.
//! 3. [`read_queue`](RawRwLock::read_queue), under the wait lock, links the node and takes
//!    the bias out in the same add that sets `WAITERS` (and `READER_QUEUED`); then the
//!    poll returns `Pending`.
//! 4. The writer's guard drops: `unlock_write` sees `WAITERS` and calls
//!    [`wake`](RawRwLock::wake), then `mark_wake`. There the head is a reader. The one
//!    reader queued takes its lock in one CAS (its bias in, `READER_QUEUED` and `HANDOFF`
//!    out, and `WAITERS` if nobody else waits) and is granted. With more readers queued: a
//!    check bias, pass 1 counts the readers to grant, one add takes their locks, and pass 2
//!    calls [`grant`](RawRwLock::grant) on each (unlink, take the waker, `Granted`).
//! 5. The wakers run once the wait lock is released. The reader's next poll,
//!    [`poll_queued`](RawRwLock::poll_queued), sees `Granted` and completes.
//!
//! **A writer behind readers.**
//! 1. `RwLock::write`: [`write_fast`](RawRwLock::write_fast), a CAS from 0, fails.
//! 2. The future's first poll calls [`write_spin`](RawRwLock::write_spin): one spinner at
//!    a time, the learned budget, stopping at `HANDOFF` or `OWNER_PENDING`.
//! 3. With readers inside it queues at once (`yield_in_vain`); behind a writer it yields
//!    (`writer_yields` times, retrying `write_fast` after each).
//! 4. [`write_queue`](RawRwLock::write_queue) reads the clock before taking the wait lock,
//!    links the node, sets `WAITERS | WRITER_QUEUED`, and tries `try_write_lock` once.
//! 5. The last reader's `unlock_read` finds the lock free with `WAITERS` set and calls
//!    `wake`, then `mark_wake`. The head writer is woken (`wake_writer`), or granted under
//!    a handoff (`queued_write_lock`, `grant`, `OWNER_PENDING`). Or up to two readers
//!    queued behind it pass it once, and it gets the handoff.
//! 6. The woken writer's `poll_queued` calls `writer_wait_state` and `try_write_lock`. It
//!    takes the lock, or, as a head that lost the race, sets `HANDOFF` and spins for the
//!    owner (`head_spin`). Once it owns the lock, `owner_runs` clears `OWNER_PENDING`.
//!
//! **A release with waiters.**
//! 1. `unlock_read`, `unlock_write` or an upgradable unlock calls `wake`.
//! 2. `with_wait_list` takes the wait lock and lends a `WakeList` that collects the wakers.
//! 3. `mark_wake` runs `mark_wake_once` again while a check bias hid a freed `max_readers`
//!    slot.
//! 4. The wait lock's release syncs `WRITER_QUEUED` and `READER_QUEUED` where a path left
//!    them wrong (`sync_queued`). Only then does
//!    `WakeList::wake_all` call every waker, even when one of them panics.
//!
//! **A cancel** (a pending acquire dropped).
//! 1. `LockFuture`'s drop in phase `Queued` calls [`cancel`](RawRwLock::cancel).
//! 2. A `Granted` node owns the lock: `owner_runs` (for a writer), then `unlock`.
//! 3. A `Waiting` node is unlinked under the wait lock and its waker taken out; the node
//!    becomes `Idle`, and an upgrade gives back its bias and `UPGRADABLE`.
//! 4. If the list is empty, `WAITERS` and `HANDOFF` are cleared. If the node was the head,
//!    `mark_wake` runs for the next head, which inherits `HANDOFF`.
//! 5. The waker is dropped once the wait lock is released.
//!
//! # Invariants
//!
//! The count word's are in [`count`], the wait list's and the nodes' in [`list`]. The
//! ones that tie them together: `WAITERS`, `HANDOFF`, `WRITER_QUEUED` and `READER_QUEUED`
//! change only under the wait lock; under it `WAITERS` is set exactly when the list is not
//! empty (and `WRITER_QUEUED`, at each release of the wait lock, exactly when a writer or
//! an upgrade is in it, `READER_QUEUED` when a reader is); every release that leaves
//! the lock free (or, for a writer or an upgradable reader, any release; or a reader's
//! release that leaves only a pending upgrader, or frees a `max_readers` slot) with
//! `WAITERS` set calls [`RawRwLock::wake`], so a waiter is never left asleep beside a
//! lock it could take. Foreign code (a waker's `clone`, `wake` or `drop`, a `tracing`
//! subscriber) never runs under the wait lock, and runs only where a panic leaves no node
//! linked in memory about to be freed and no count half-updated.

pub(crate) mod count;
mod crowd;
mod fair;
pub(crate) mod list;
pub(crate) mod parking;
pub(crate) mod policy;
pub(crate) mod stats;

mod read;
pub(crate) mod snapshot;
pub(crate) mod spin;
mod upgradable;
mod waiter;
mod wake;
mod write;

#[cfg(test)]
pub(crate) mod tests;

pub(crate) use waiter::LockFuture;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use self::count::{
    HANDOFF, LOCK_MASK, OWNER_PENDING, READER_QUEUED, READER_SHIFT, READ_FAIL, RESERVED,
    UPGRADABLE, WAITERS, WRITER_LOCKED, WRITER_QUEUED,
};
use self::list::{WaitList, WaiterKind, WakeList};
use self::policy::{Policy, StoredPolicy};
use self::spin::SpinState;
use self::stats::Counters;
#[cfg(not(all(test, async_rwsem_loom)))]
use crate::loom::Instant;
use crate::loom::{lock, spin_loop, AtomicUsize, Clock, Mutex, MutexGuard};

/// Defines `RawRwLock::new`, `const` or not.
macro_rules! define_new {
    ($($const:tt)?) => {
        pub(crate) $($const)? fn new(policy: Policy, max_readers: usize) -> Self {
            // The first message is tokio's, word for word.
            assert!(max_readers > 0, "a RwLock may not be created with 0 readers");
            assert!(
                max_readers <= Self::MAX_READERS,
                "a RwLock may not be created with more readers than its count word can count \
                 (2^55 - 1 on 64-bit targets, 2^23 - 1 on 32-bit ones)"
            );
            Self {
                count: AtomicUsize::new(0),
                wait_list: Mutex::new(WaitList::new()),
                policy: StoredPolicy::new(policy),
                max_readers: if max_readers >= NO_READER_LIMIT as usize {
                    NO_READER_LIMIT
                } else {
                    max_readers as u32
                },
                spin: SpinState::new(),
                clock: Clock::new(),
                stats: Counters::new(),
            }
        }
    };
}

/// `RawRwLock::max_readers` when no limit was asked for: the count word's own limit
/// (`MAX_READERS`) applies.
const NO_READER_LIMIT: u32 = u32::MAX;

/// The raw lock. See the module documentation.
///
/// 64 bytes on 64-bit targets (without the `stats` feature), one cache line: the count
/// word, the wait lock with its list (the head of the queue, the first queued reader and
/// the number of queued writers), the stored policy, the reader limit and the learned spin
/// budgets (a test asserts it).
#[derive(Debug)]
pub(crate) struct RawRwLock {
    count: AtomicUsize,
    wait_list: Mutex<WaitList>,
    policy: StoredPolicy,
    /// The most readers that may hold the lock at once (`with_max_readers`); more wait.
    /// [`NO_READER_LIMIT`] for none.
    max_readers: u32,
    /// The learned spin budgets and the writer-spinner slot ([`spin`]).
    pub(crate) spin: SpinState,
    /// The clock of the handoff timeout (`write_queue`, `timed_out`) and of the
    /// diagnostics: zero-sized, `Instant::now()`; a logical clock in the loom models
    /// ([`crate::loom`]).
    pub(crate) clock: Clock,
    #[cfg_attr(not(feature = "stats"), allow(dead_code))] // read by `lockevent!` only
    pub(crate) stats: Counters,
}

impl RawRwLock {
    /// The most readers the count word can hold: the next one would reach `READ_FAIL`.
    pub(crate) const MAX_READERS: usize = (READ_FAIL >> READER_SHIFT) - 1;

    // `new`, once: `const` where the atomics allow it (loom's cannot be built in a
    // `const fn`).
    #[cfg(not(all(test, async_rwsem_loom)))]
    define_new!(const);
    #[cfg(all(test, async_rwsem_loom))]
    define_new!();

    /// The policy, as stored (see [`StoredPolicy`]).
    #[inline]
    pub(crate) fn policy(&self) -> Policy {
        self.policy.policy()
    }

    /// Does the policy keep a strict order (`Policy::fifo`)? One load of the stored
    /// policy, for the typed layer (tokio's budget is charged at every acquire then).
    #[cfg(feature = "tokio")]
    #[inline]
    pub(crate) fn policy_strict_order(&self) -> bool {
        self.policy.strict_order()
    }

    /// Does a release on this thread hand the lock to a head task at every release, though
    /// the policy's handoff is timed? Under `Policy::crowded_handoff`, while a reader is
    /// queued in `list` (the locked wait list), on a thread of a runtime with more workers
    /// than cores ([`crowd`]). A look at the list, a policy load, then (if the rule is on)
    /// one thread-local read.
    #[inline]
    fn crowded_handoff(&self, list: &WaitList) -> bool {
        list.first_reader().is_some() && self.crowded_rule()
    }

    /// As [`crowded_handoff`](Self::crowded_handoff), without the wait lock: the readers'
    /// presence from [`READER_QUEUED`] (a snapshot, as of the last release of the wait lock).
    #[inline]
    fn crowded_handoff_hint(&self) -> bool {
        self.count.load(Relaxed) & READER_QUEUED != 0 && self.crowded_rule()
    }

    /// The rule's conditions but the queue's: on, with a timed handoff, on a crowded
    /// runtime's thread.
    #[inline]
    fn crowded_rule(&self) -> bool {
        self.policy.crowded_handoff() && self.policy.handoff_timed() && crowd::crowded()
    }

    /// How long `who` may spin now, under `cap` (the policy's): the learned budget, or the
    /// cap itself when the policy's spin is not adaptive or the spinner is a thread that
    /// would park (a blocking acquire, [`parking`]). `None`: do not spin.
    #[inline]
    fn spin_budget(&self, who: spin::Spinner, cap: Duration) -> Option<Duration> {
        if self.policy.adaptive_spin() && !parking::parks() {
            self.spin.budget(who, cap)
        } else {
            (!cap.is_zero()).then_some(cap)
        }
    }

    /// The most readers that may hold the lock at once.
    #[inline]
    pub(crate) fn max_readers(&self) -> usize {
        if self.max_readers == NO_READER_LIMIT {
            Self::MAX_READERS
        } else {
            self.max_readers as usize
        }
    }

    /// `max_readers` in count-word units: a fast-path reader gets in only below it (which
    /// also keeps the reader count clear of `READ_FAIL` without a limit).
    #[inline]
    fn read_limit(&self) -> usize {
        self.max_readers() << READER_SHIFT
    }

    /// Room for one more reader beside the `readers` counted?
    #[inline]
    fn reader_room(&self, readers: usize) -> bool {
        readers < self.max_readers()
    }

    /// Takes the wait lock, runs `f` on the list, releases the wait lock, then wakes the
    /// tasks `f` collected: the one shape of every slow path that changes the queue. The
    /// wake list is made before the wait-lock guard, so that an unwind releases the wait
    /// lock first and still wakes them (see [`WakeList`]).
    #[inline]
    fn with_wait_list<R>(&self, f: impl FnOnce(&mut WaitList, &mut WakeList) -> R) -> R {
        let mut wakers = WakeList::new();
        let result = f(&mut self.wait_lock(), &mut wakers);
        wakers.wake_all();
        result
    }

    /// Takes the wait lock. Every path takes it here, so that its release checks the
    /// invariants that tie the count word to the list ([`WaitLock`]).
    #[inline]
    fn wait_lock(&self) -> WaitLock<'_> {
        WaitLock {
            raw: self,
            list: lock(&self.wait_list),
        }
    }

    /// The invariants of the count word (`count.rs`) and of the wait list that hold
    /// whenever the wait lock is released: `WAITERS` is set exactly when the list is not
    /// empty; `HANDOFF` implies `WAITERS`; `WRITER_LOCKED` and `UPGRADABLE` are never both
    /// set (a writer excludes the upgradable reader, whose upgrade trades one bit for the
    /// other in one step); `UPGRADABLE` comes with its reader's bias; the reserved bits
    /// are clear. (`WAITERS` and `HANDOFF` change only under the wait lock, so the first
    /// two are exact here; the others hold at every instant.)
    fn check_invariants(&self, list: &WaitList) {
        let count = self.count.load(Relaxed);
        assert_eq!(
            count & WAITERS != 0,
            !list.is_empty(),
            "WAITERS must be set exactly when the wait list is not empty (count {count:#x})"
        );
        assert!(
            count & HANDOFF == 0 || count & WAITERS != 0,
            "HANDOFF without WAITERS (count {count:#x})"
        );
        assert!(
            count & (WRITER_LOCKED | UPGRADABLE) != WRITER_LOCKED | UPGRADABLE,
            "a writer beside the upgradable reader (count {count:#x})"
        );
        assert!(
            count & UPGRADABLE == 0 || count::readers(count) > 0,
            "UPGRADABLE without its reader's bias (count {count:#x})"
        );
        assert!(
            count & OWNER_PENDING == 0 || count & WRITER_LOCKED != 0,
            "OWNER_PENDING without a writer (count {count:#x})"
        );
        assert_eq!(count & RESERVED, 0, "reserved bits set (count {count:#x})");
        list.check_rings();
        assert_eq!(
            count & WRITER_QUEUED != 0,
            list.has_writer(),
            "WRITER_QUEUED must be set exactly when a writer or upgrade is queued (count {count:#x})"
        );
        assert_eq!(
            count & READER_QUEUED != 0,
            list.first_reader().is_some(),
            "READER_QUEUED must be set exactly when a reader is queued (count {count:#x})"
        );
    }

    /// Clears [`WRITER_QUEUED`] if it is set and no writer or upgrade is linked any more,
    /// and sets or clears [`READER_QUEUED`] to say whether a reader is: at every release
    /// of the wait lock ([`WaitLock`]), so that the paths that link or unlink a waiter
    /// rarely (an upgradable reader queueing, a cancel, a stopped upgrade) need not. The
    /// frequent ones fold the bits into a read-modify-write of the count they make anyway,
    /// and leave nothing to flip here: the queueing reader's add (`read_queue`), the grant
    /// of the last queued readers (`mark_wake`), the last queued writer's taking the lock
    /// (`queued_write_lock`); setting `WRITER_QUEUED` is the queueing writer's
    /// (`write_queue`, `upgrade_queue`). Costs a load per release of the wait lock (the
    /// list counts its writers and links its readers in a ring), and one atomic `xor` where
    /// a bit is wrong; nothing on the fast paths.
    #[inline]
    fn sync_queued(&self, list: &WaitList) {
        // Both bits change only under the wait lock, which we hold: the ones that are
        // wrong are flipped in one step.
        let count = self.count.load(Relaxed);
        let mut flip = 0;
        if count & WRITER_QUEUED != 0 && !list.has_writer() {
            flip |= WRITER_QUEUED;
        }
        if (count & READER_QUEUED != 0) != list.first_reader().is_some() {
            flip |= READER_QUEUED;
        }
        if flip != 0 {
            self.count.fetch_xor(flip, Relaxed);
        }
    }

    /// Is a writer or an upgrade queued for the lock? One load of the count word (see
    /// [`WRITER_QUEUED`]); a snapshot.
    #[inline]
    pub(crate) fn writer_queued(&self) -> bool {
        self.count.load(Relaxed) & WRITER_QUEUED != 0
    }

    /// Releases the lock on behalf of a waiter of `kind` that owns it.
    ///
    /// # Safety
    ///
    /// The caller owns the lock a waiter of that kind is granted (an upgrade owns the
    /// write lock) and gives it up.
    #[inline]
    pub(crate) unsafe fn unlock(&self, kind: WaiterKind) {
        match kind {
            // SAFETY: forwarded from the caller.
            WaiterKind::Read => unsafe { self.unlock_read() },
            // SAFETY: forwarded from the caller.
            WaiterKind::Write | WaiterKind::Upgrade => unsafe { self.unlock_write() },
            // SAFETY: forwarded from the caller.
            WaiterKind::UpgradableRead => unsafe { self.unlock_upgradable() },
        }
    }

    /// Is the lock owned in any mode? A snapshot of the count word: a reader on its way to
    /// the queue (whose bias is in the count for an instant) counts as an owner.
    #[inline]
    pub(crate) fn is_locked(&self) -> bool {
        self.count.load(Relaxed) & LOCK_MASK != 0
    }

    /// Does a writer own the lock (a write lock, or an upgrade's)? A snapshot of the count
    /// word.
    #[inline]
    pub(crate) fn is_write_locked(&self) -> bool {
        self.count.load(Relaxed) & WRITER_LOCKED != 0
    }

    /// Starts the count word at `count` (tests only: a lock with readers already "inside"
    /// to reach the overflow guard without billions of guards).
    #[cfg(all(test, not(async_rwsem_loom)))]
    pub(crate) fn set_count_for_tests(&self, count: usize) {
        self.count
            .store(count, std::sync::atomic::Ordering::Release);
    }

    /// The count word (tests), without [`WRITER_QUEUED`]: the transition tests spell the
    /// words in the kernel's bits, and `writer_queued` (whose tests check the bit) reads
    /// that one; the invariant checks at every release of the wait lock tie it to the list.
    #[cfg(test)]
    pub(crate) fn count_word(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::Acquire) & !(WRITER_QUEUED | READER_QUEUED)
    }

    /// The [`WRITER_QUEUED`] and [`READER_QUEUED`] bits of the count word (tests).
    #[cfg(test)]
    pub(crate) fn queued_bits(&self) -> (bool, bool) {
        let count = self.count.load(std::sync::atomic::Ordering::Acquire);
        (count & WRITER_QUEUED != 0, count & READER_QUEUED != 0)
    }

    /// The number of queued waiters (tests).
    #[cfg(test)]
    pub(crate) fn queue_len(&self) -> usize {
        lock(&self.wait_list).len()
    }
}

/// The wait lock, held (from [`RawRwLock::wait_lock`]): the list, and the lock whose
/// invariants its release checks ([`RawRwLock::check_invariants`]) in debug builds and in
/// the loom models (built with optimisations, hence checked apart), so that every
/// interleaving a model explores and every debug test checks them at every release of
/// the wait lock. Not while unwinding: a second panic would abort.
pub(crate) struct WaitLock<'a> {
    raw: &'a RawRwLock,
    list: MutexGuard<'a, WaitList>,
}

impl std::ops::Deref for WaitLock<'_> {
    type Target = WaitList;

    #[inline]
    fn deref(&self) -> &WaitList {
        &self.list
    }
}

impl std::ops::DerefMut for WaitLock<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut WaitList {
        &mut self.list
    }
}

impl Drop for WaitLock<'_> {
    #[inline]
    fn drop(&mut self) {
        // Also while unwinding: the bits must not outlive the last queued writer or reader.
        self.raw.sync_queued(&self.list);
        if cfg!(any(debug_assertions, all(test, async_rwsem_loom))) && !std::thread::panicking() {
            self.raw.check_invariants(&self.list);
        }
    }
}

/// A spin's clock. The first rounds of a spin are short (1 to 8 pauses of the backoff,
/// well under a microsecond together), so the clock is first read after them: a spin that
/// wins at once (the common case with sections of a few nanoseconds) reads no clock at
/// all, where a clock read per round was a sixth of the time of 240 writers with tiny
/// sections. In the loom models a spin is bounded by rounds instead of time, and reads no
/// clock: the models' clock is logical and moves only when a model advances it, so a
/// spin on it could go on for ever (and a clock read per round would multiply the
/// interleavings to explore).
struct SpinClock {
    #[cfg(not(all(test, async_rwsem_loom)))]
    start: Option<Instant>,
}

impl SpinClock {
    /// Rounds before the clock is first read: the backoff's short ones.
    #[cfg(not(all(test, async_rwsem_loom)))]
    const FREE_ROUNDS: u32 = 4;

    /// Rounds of a spin in the loom models: one spin that fails, then a backoff, then a
    /// last look.
    #[cfg(all(test, async_rwsem_loom))]
    const LOOM_ROUNDS: u32 = 2;

    #[inline]
    fn new() -> Self {
        Self {
            #[cfg(not(all(test, async_rwsem_loom)))]
            start: None,
        }
    }

    /// Has the spin used up `budget` after `rounds` rounds?
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[inline]
    fn over(&mut self, budget: Duration, rounds: u32) -> bool {
        rounds >= Self::FREE_ROUNDS
            && self.start.get_or_insert_with(Instant::now).elapsed() >= budget
    }

    /// Has the spin used up its budget after `rounds` rounds? (Loom: rounds only.)
    #[cfg(all(test, async_rwsem_loom))]
    #[inline]
    fn over(&mut self, _budget: Duration, rounds: u32) -> bool {
        rounds >= Self::LOOM_ROUNDS
    }

    /// How long the spin took, as far as the clock knows (zero for a spin that ended in
    /// its first rounds, and in the loom models).
    #[inline]
    fn elapsed(&self) -> Duration {
        #[cfg(not(all(test, async_rwsem_loom)))]
        return self.start.map_or(Duration::ZERO, |start| start.elapsed());
        #[cfg(all(test, async_rwsem_loom))]
        return Duration::ZERO;
    }
}

/// Exponential backoff for the spin loops: 1, 2, 4 ... 16 pause instructions. The cap
/// keeps a spinner from noticing a release late: a pause costs up to 140 cycles on recent
/// x86, so 16 are about a microsecond, the order of the sections worth spinning for.
#[inline]
fn backoff(step: &mut u32) {
    for _ in 0..(1u32 << *step) {
        spin_loop();
    }
    if *step < 4 {
        *step += 1;
    }
}
