//! Waking and granting (`rwsem_wake`, `rwsem_mark_wake`), under the wait lock.
//!
//! [`RawRwLock::grant`] is the only place a node is granted, and
//! [`RawRwLock::queued_write_lock`] the only place a queued waiter (a writer, or the
//! upgrade) takes the write lock: every path that hands a waiter the lock goes through
//! them.

use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::count::*;
use super::list::{NodeState, WaitList, Waiter, WaiterKind, WakeList};
use super::stats::lockevent;
use super::RawRwLock;

/// The most queued readers granted past a head writer at once (then it is due the
/// lock). A batch of readers that do not await is as long as a section on each worker,
/// so a small batch keeps the writers' share: with every queued reader granted at once
/// (40 in mixed-40-40), writers fell to 4% of the operations; with none passing, readers
/// to 9-11%. Two rather than four since writers that meet readers queue at once: it
/// brought the 40+40 writers' tail and share closer to tokio's (`docs/performance.md`,
/// "Two readers pass a head writer, not four").
const PASS_WRITER_BATCH: usize = 2;

/// Whether queued readers may pass queued writers now, learned from what timed passes
/// cost. Kept in the wait list ([`WaitList::pass_check`]), under the wait lock.
///
/// The kernel's grant of queued readers takes the readers queued anywhere, past the writers
/// between them, and here the readers queued behind a head writer also pass it once
/// ([`PASS_WRITER_BATCH`]). That is worth it while read sections are short: the writer
/// waits a few more short sections, and the readers share one turn instead of taking one
/// each. Where readers hold the lock long (a scan of a whole shard, a snapshot written
/// under a read lock, a reader that holds this lock while it queues for another), each
/// pass makes the writer, and everyone queued behind it, wait a long section that a FIFO
/// queue would have served after it. Nothing on the fast paths says how long sections
/// are, so passes are timed: a timed pass of a head writer notes the time, and when a
/// queued writer next gets the lock (that writer, unless it was cancelled meanwhile), the
/// wait since then is what the pass cost. A pass that cost more than the handoff timeout
/// (the bound the policy puts on the head's wait for passers) turns passing off for the
/// next [`VETO_TURNS`] turns of queued writers: a grant of readers then stops at the first
/// queued writer (the queue's order, as under [`strict_order`]), and no reader passes a
/// head writer. After the veto every pass is timed (the check *watches*) until
/// [`WATCH_PASSES`] timed passes in a row were cheap; an expensive one vetoes again.
///
/// A clock read costs: two per pass under the wait lock took a twentieth of the
/// throughput of 40 readers and 40 writers with tiny sections (`docs/performance.md`,
/// "Passing that pays for itself"). So while nothing was expensive one pass in
/// [`SAMPLE_EVERY`] is timed; no clock is read anywhere else. The watch is for readers that
/// are long only now and then: one long reader among short ones (a snapshot beside a
/// stream of short reads) is one pass in hundreds, which the sample times once in eight of
/// its passes, and each untimed one keeps every writer queued waiting out its whole hold
/// (`docs/performance.md`, "Round fifteen"). Watched, its next pass is timed and vetoes
/// again; a lock whose readers are all short never pays for a watch.
///
/// One word: `[start | WATCH | TIMING | VETOED | countdown]`. The countdown (11 bits)
/// counts what the phase counts down: while [`VETOED`], the writer turns left without
/// passing; else, while [`WATCH`], the cheap timed passes left to watch; else the untimed
/// passes left before the next timed one. [`TIMING`] while a pass is timed, and above it the
/// timed pass's start in microseconds ([`Clock::micros`](crate::loom::Clock::micros), its
/// low 18 bits: an interval is measured modulo 262 ms, so a handoff timeout past a quarter
/// of that, 65 ms, never vetoes). A veto sets `WATCH` too: the watch begins when the veto ends.
///
/// [`strict_order`]: crate::Policy#structfield.strict_order
/// [`TIMING`]: PassCheck::TIMING
/// [`VETOED`]: PassCheck::VETOED
/// [`WATCH`]: PassCheck::WATCH
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PassCheck(u32);

/// Turns of queued writers without passing after a pass that cost more than the handoff
/// timeout.
pub(crate) const VETO_TURNS: u32 = 255;

/// One pass in this many is timed (while passing is on and no watch is kept).
pub(crate) const SAMPLE_EVERY: u32 = 8;

/// After a veto, every pass is timed until this many timed passes in a row were cheap:
/// more than a lock makes between two holds of a reader that comes back every few
/// milliseconds (one 10 ms reader beside 16 short readers and 4 writers: about 270 on the
/// 2-core machine of `docs/performance.md`).
pub(crate) const WATCH_PASSES: u32 = 1024;

impl PassCheck {
    /// What the phase counts down (see the type's documentation).
    const COUNTDOWN: u32 = 0b111_1111_1111;
    /// Passing is off; the countdown is the writer turns left.
    const VETOED: u32 = 0b1000_0000_0000;
    /// A pass is timed: its start is in the bits above [`WATCH`](Self::WATCH).
    const TIMING: u32 = 0b1_0000_0000_0000;
    /// Every pass is timed; the countdown (once not [`VETOED`](Self::VETOED)) is the cheap
    /// ones left to watch.
    const WATCH: u32 = 0b10_0000_0000_0000;
    /// Where the start begins.
    const START_SHIFT: u32 = 14;
    /// The start's bits, shifted down.
    const START_MASK: u32 = u32::MAX >> Self::START_SHIFT;

    pub(crate) const fn new() -> Self {
        Self(0)
    }

    /// Is passing off (a recent timed pass cost more than the handoff timeout)?
    #[inline]
    pub(crate) fn passing_off(self) -> bool {
        self.0 & Self::VETOED != 0
    }

    /// Neither timing a pass nor vetoing: a writer's turn changes nothing.
    #[inline]
    pub(crate) fn idle(self) -> bool {
        self.0 & (Self::TIMING | Self::VETOED) == 0
    }

    /// Passing off for [`VETO_TURNS`] writer turns, then watched, as after an expensive
    /// pass (the models start from it).
    #[cfg(all(test, async_rwsem_loom))]
    pub(crate) const fn vetoed() -> Self {
        Self(Self::VETOED | Self::WATCH | VETO_TURNS)
    }

    /// Is a pass being timed?
    #[cfg(test)]
    pub(crate) fn timing(self) -> bool {
        self.0 & Self::TIMING != 0
    }

    /// Cheap timed passes still to watch before sampling again (0: sampling; during a
    /// veto, all of them).
    #[cfg(test)]
    pub(crate) fn watching(self) -> u32 {
        match self.0 & (Self::WATCH | Self::VETOED) {
            0 => 0,
            Self::WATCH => self.0 & Self::COUNTDOWN,
            _ => WATCH_PASSES,
        }
    }

    /// Queued readers passed the head writer now; `now` reads the clock
    /// ([`Clock::micros`](crate::loom::Clock::micros)), if this pass is one timed.
    pub(crate) fn passed(&mut self, now: impl FnOnce() -> u32) {
        debug_assert!(!self.passing_off());
        if self.0 & Self::WATCH == 0 && self.0 & Self::COUNTDOWN != 0 {
            // Sampling, and not this one: it counts down the sample (whether or not an
            // earlier pass is still being timed).
            self.0 -= 1;
            return;
        }
        if self.0 & Self::TIMING != 0 {
            // A pass still being timed (its writer was cancelled) keeps its start.
            return;
        }
        // Timed: every pass while watched (the countdown stays), one in eight otherwise.
        let start = now() & Self::START_MASK;
        let rest = if self.0 & Self::WATCH != 0 {
            self.0 & (Self::WATCH | Self::COUNTDOWN)
        } else {
            SAMPLE_EVERY - 1
        };
        self.0 = (start << Self::START_SHIFT) | Self::TIMING | rest;
    }

    /// A queued writer got the lock: the end of a timed pass, or one turn of a veto.
    /// `now` reads the clock (only at the end of a timed pass); `timeout`: the policy's
    /// handoff timeout.
    pub(crate) fn writer_turn(&mut self, now: impl FnOnce() -> u32, timeout: std::time::Duration) {
        if self.0 & Self::TIMING != 0 {
            let start = self.0 >> Self::START_SHIFT;
            let cost = now().wrapping_sub(start) & Self::START_MASK;
            let timeout = timeout.as_micros();
            let expensive =
                timeout < u128::from(Self::START_MASK / 4) && u128::from(cost) > timeout;
            let rest = self.0 & (Self::WATCH | Self::COUNTDOWN);
            self.0 = if expensive {
                // Passing off, then watched.
                Self::VETOED | Self::WATCH | VETO_TURNS
            } else if rest & Self::WATCH == 0 {
                // Sampling: the countdown runs on.
                rest
            } else if rest == Self::WATCH | 1 {
                // The last cheap pass of the watch: sampling again, from a timed pass.
                0
            } else {
                rest - 1
            };
        } else if self.passing_off() {
            // The veto's last turn starts the watch.
            self.0 = if self.0 & Self::COUNTDOWN == 1 {
                Self::WATCH | WATCH_PASSES
            } else {
                self.0 - 1
            };
        }
    }
}

/// Why [`RawRwLock::mark_wake`] is called (the kernel's `enum rwsem_wake_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WakeType {
    /// The lock may be free: wake a head writer, or grant the head readers.
    Any,
    /// Readers own the lock: grant the head readers, leave a head writer asleep.
    Readers,
    /// The caller owns a read lock (it stole one, or downgraded): grant the head readers
    /// without taking a bias for the check.
    ReadOwned,
}

impl RawRwLock {
    /// `rwsem_wake`: the lock may be free and someone waits.
    #[cold]
    #[inline(never)]
    pub(super) fn wake(&self) {
        self.with_wait_list(|list, wakers| self.mark_wake(list, WakeType::Any, wakers));
    }

    /// The caller owns a read lock (it stole the lock, won a reader spin, or downgraded)
    /// and waiters are queued: grant the queued readers beside it.
    #[cold]
    pub(crate) fn grant_readers_beside_own(&self) {
        self.with_wait_list(|list, wakers| self.mark_wake(list, WakeType::ReadOwned, wakers));
    }

    /// `rwsem_cond_wake_waiter`: after a change that may let the head run.
    pub(super) fn cond_wake(&self, list: &mut WaitList, count: usize, wakers: &mut WakeList) {
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

    /// `rwsem_mark_wake`: wake or grant the head of the queue, under the wait lock. Wakers
    /// go to `wakers`, to be called once the wait lock is released.
    pub(super) fn mark_wake(
        &self,
        list: &mut WaitList,
        wake_type: WakeType,
        wakers: &mut WakeList,
    ) {
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
        let head_kind = unsafe { head.as_ref() }.kind;
        let mut pass_writer = false;
        match head_kind {
            WaiterKind::Write => {
                let pass = wake_type != WakeType::ReadOwned && self.readers_pass_writer(list);
                if !pass {
                    if wake_type == WakeType::Any {
                        // SAFETY: `head` is the head of `list`, which we hold.
                        unsafe { self.wake_writer(list, head, wakers) };
                    }
                    return false;
                }
                // Readers queued behind the head writer, with the lock free or reader-owned
                // and no handoff pending: they are granted now, once, and the writer is
                // given the handoff, so that it is next (below).
                pass_writer = true;
            }
            WaiterKind::Upgrade => {
                // SAFETY: `head` is the head of `list`, which we hold.
                unsafe { self.grant_upgrade(list, head, wakers) };
                return false;
            }
            WaiterKind::Read | WaiterKind::UpgradableRead => {}
        }

        // The head is the one reader queued (a plain one; writers may be queued behind
        // it) and the lock is not write-locked: its grant in one CAS (its bias in;
        // `READER_QUEUED` and `HANDOFF` out, and `WAITERS` too if it is the last waiter, as
        // the general path below and the wait lock's release would leave them), without
        // the check bias, the walks and the second read-modify-write. A writer that takes
        // the lock meanwhile fails the CAS, and the general path requests the handoff.
        // SAFETY: `head` is a reader node (plain) of `list`, which we hold.
        if head_kind == WaiterKind::Read && unsafe { list.next_reader(head) }.is_none() {
            let clear = if list.is_single() {
                WAITERS | HANDOFF | READER_QUEUED
            } else {
                HANDOFF | READER_QUEUED
            };
            let mut count = self.count.load(Relaxed);
            while count & (WRITER_LOCKED | READ_FAIL) == 0 && self.reader_room(readers(count)) {
                match self.count.compare_exchange_weak(
                    count,
                    (count + READER_BIAS) & !clear,
                    AcqRel,
                    Relaxed,
                ) {
                    Ok(_) => {
                        lockevent!(self, wake_reader);
                        // SAFETY: linked in `list`; wait lock held; its lock is in the count.
                        unsafe { self.grant(list, head, wakers) };
                        return false;
                    }
                    Err(now) => count = now,
                }
            }
        }
        // The head is a reader (or a writer that the readers behind it pass): grant
        // every queued reader (up to the batch limit) at once, and the first queued
        // upgradable reader if no upgradable reader holds the lock.
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
            oldcount = self.count.fetch_add(READER_BIAS, Acquire);
            if oldcount & WRITER_LOCKED != 0 {
                // A writer holds the lock (one that took it before this grant, or the
                // head of a queue that this grant's caller is passing the wake-up down).
                // The reader head is next: request the handoff, so that no reader
                // steals in between and the release grants it directly. (Not for readers
                // behind a woken writer head: a handoff is the head's.)
                let mut undo = READER_BIAS.wrapping_neg();
                if oldcount & HANDOFF == 0
                    && !self.policy.handoff_never()
                    && head_kind != WaiterKind::Write
                {
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
        let room = self.max_readers().saturating_sub(readers(oldcount));
        let mut batch = self
            .policy
            .reader_wake_batch()
            .min(WakeList::CAPACITY - 1)
            .min(room);
        if pass_writer {
            batch = batch.min(PASS_WRITER_BATCH);
        }
        // In a strict order (or with a handoff at every release, as on a crowded runtime's
        // thread: `Policy::crowded_handoff`) the batch is the run of
        // readers at the head: a waiter the grant cannot take (a writer, an upgradable
        // reader kept out) holds back everyone behind it. (Readers never pass a head
        // writer there: `readers_pass_writer` needs neither.) Otherwise it is taken from
        // the readers' ring: every queued reader in order, the writers between them
        // skipped without a look.
        // So does a recent pass that cost the writer more than the handoff timeout
        // (`PassCheck`): then no reader passes a queued writer for a while.
        let ordered = self.policy.strict_order()
            || self.policy.handoff_always()
            || list.pass_check.passing_off()
            || self.crowded_handoff(list);
        let walk = ReaderWalk { ordered };
        let mut pick = GrantPick::new(oldcount);
        let mut woken = 0usize;
        let mut passed = 0usize;
        let mut cursor = walk.first(list, head);
        while let Some(node) = cursor {
            if woken == batch {
                break;
            }
            // SAFETY: linked nodes are alive while we hold the wait lock.
            if pick.take(unsafe { node.as_ref() }.kind) {
                woken += 1;
            } else if ordered {
                break;
            } else {
                passed += 1;
            }
            // SAFETY: `node` is linked in `list` (a reader, unless `ordered`), which we
            // hold.
            cursor = unsafe { walk.next(list, node) };
        }
        // Every queued waiter is granted: none left behind, none past the batch (nor, when
        // `ordered`, behind the waiter the walk stopped at: `cursor` is that one), and,
        // for a walk of the readers alone, no writer queued beside them.
        let no_reader_left = cursor.is_none() && passed == 0;
        let everyone = no_reader_left && (ordered || !list.has_writer());
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
        let head_granted = GrantPick::new(oldcount).take(head_kind);
        let mut adjust = (woken * READER_BIAS).wrapping_sub(adjustment);
        if pick.upgradable_taken {
            adjust = adjust.wrapping_add(UPGRADABLE);
        }
        if no_reader_left && oldcount & READER_QUEUED != 0 {
            // The last queued readers are granted: `READER_QUEUED` goes in this add rather
            // than at the wait lock's release (`sync_queued`). (Stable under the wait
            // lock: `oldcount` has it as it is.)
            adjust = adjust.wrapping_sub(READER_QUEUED);
        }
        if everyone {
            // Everyone is granted: nobody waits any more, nobody needs a handoff.
            adjust = adjust.wrapping_sub(WAITERS);
            if oldcount & HANDOFF != 0 {
                adjust = adjust.wrapping_sub(HANDOFF);
            }
        } else if oldcount & HANDOFF != 0 && head_granted {
            // The head got the lock: the handoff it asked for is done.
            adjust = adjust.wrapping_sub(HANDOFF);
        } else if pass_writer {
            // The readers passed the head writer once: it is due the lock next, and the
            // pass is timed until a queued writer gets it.
            lockevent!(self, wlock_handoff);
            adjust = adjust.wrapping_add(HANDOFF);
            list.pass_check.passed(|| self.clock.micros());
        }
        if adjust != 0 {
            self.count.fetch_add(adjust, AcqRel);
        }

        // Pass 2: the count holds their locks now; grant them (the same walk). A batch of
        // two is granted together, the second's wake-up relayed by the first (`relay`):
        // the first is held back until the second is found.
        let mut pick = GrantPick::new(oldcount);
        let mut left = woken;
        let mut cursor = walk.first(list, head);
        let mut held: Option<NonNull<Waiter>> = None;
        while left > 0 {
            let node = cursor.expect("pass 1 counted these readers");
            // SAFETY: as in pass 1 (the next node is read before `node` is unlinked; a
            // node held back stays linked until the one after it is found).
            cursor = unsafe { walk.next(list, node) };
            // SAFETY: linked nodes are alive while we hold the wait lock.
            if !pick.take(unsafe { node.as_ref() }.kind) {
                continue;
            }
            left -= 1;
            lockevent!(self, wake_reader);
            if woken == 2 && left == 1 {
                held = Some(node);
                continue;
            }
            if let Some(first) = held.take() {
                // SAFETY: both linked in `list`, which we hold, and not granted yet.
                unsafe { relay(first, node) };
                // SAFETY: linked in `list`; wait lock held; its lock is in the count.
                unsafe { self.grant(list, first, wakers) };
            }
            // SAFETY: linked in `list`; wait lock held; its lock is in the count.
            unsafe { self.grant(list, node, wakers) };
        }
        false
    }

    /// May the readers queued behind the head writer be granted now, passing it once?
    /// Yes if no handoff is pending, no writer holds the lock, and a plain reader is
    /// queued (the readers' ring says so without a walk of the writers); never under a
    /// strict order or a handoff at every release, nor without handoffs. The
    /// grant then gives the writer the handoff: readers that arrive later queue behind
    /// it, and the release that frees the lock grants it. So the queue alternates a batch
    /// of readers and a writer (phase-fair), where the kernel grants readers only from a
    /// reader head: with writers spinning past the queue, readers queued behind a writer
    /// (its task asleep, or runnable but not yet polled) fell to 9-11% of the operations
    /// in mixed-40-40.
    ///
    /// Not past a head writer that is a parked thread (`parking.rs`): a grant of reader
    /// threads wakes each of them, and their writer is served by the handoff timeout.
    ///
    /// `list` is the locked wait list of `self`, whose head is a writer.
    fn readers_pass_writer(&self, list: &WaitList) -> bool {
        if !self.spin_past_queue()
            || self.policy.handoff_never()
            || list.pass_check.passing_off()
            || list.head_parks()
            || self.count.load(Relaxed) & (WRITER_LOCKED | HANDOFF) != 0
        {
            return false;
        }
        // A plain reader queued anywhere (upgradable readers, rarely queued, are stepped
        // over in the readers' ring).
        let mut cursor = list.first_reader();
        while let Some(node) = cursor {
            // SAFETY: a reader node of `list` (linked, hence alive), which we hold.
            if unsafe { node.as_ref() }.kind == WaiterKind::Read {
                return true;
            }
            // SAFETY: as above.
            cursor = unsafe { list.next_reader(node) };
        }
        false
    }

    /// Grants `node` the lock the count word already holds for it: unlinks it, moves its
    /// waker to `wakers`, and stores [`NodeState::Granted`] as the last touch (from then
    /// on its owner may drop it). The one place a node is granted.
    ///
    /// # Safety
    ///
    /// `node` is linked in `list`, the locked wait list of `self`, and the caller has
    /// adjusted the count word so that it holds the lock `node` waits for.
    pub(super) unsafe fn grant(
        &self,
        list: &mut WaitList,
        node: NonNull<Waiter>,
        wakers: &mut WakeList,
    ) {
        // SAFETY: linked in `list`, and we hold the wait lock.
        let waker = unsafe {
            list.remove(node);
            node.as_ref().with_inner(|inner| inner.waker.take())
        };
        if let Some(waker) = waker {
            wakers.push(waker);
        }
        // The queue's turn: the passes of it count from zero again.
        self.spin.reset_passes();
        // SAFETY: alive (not yet marked granted).
        if unsafe { node.as_ref() }.kind == WaiterKind::Write {
            self.writer_turn(list);
        }
        // Last touch of the node: from here its owner may drop it.
        // SAFETY: alive: its owner cannot drop it before it sees `Granted`.
        unsafe { node.as_ref() }.set_state(NodeState::Granted, Release);
    }

    /// The owner of `node` took the lock itself under the wait lock: unlink the node and
    /// mark it `Granted`, as a waker would have. Before the wait lock is released and the
    /// wakers collected meanwhile run (foreign code): if one panics, the owner's future
    /// still knows that it owns the lock, and its drop releases it (or its next poll
    /// completes with it).
    ///
    /// # Safety
    ///
    /// `node` is the caller's own node, linked in `list`, the locked wait list of `self`,
    /// and the count word holds the lock it waits for.
    pub(super) unsafe fn unlink_own(&self, list: &mut WaitList, node: NonNull<Waiter>) {
        // SAFETY: linked in `list`, and we hold the wait lock; the node is ours.
        unsafe {
            list.remove(node);
            node.as_ref().set_state(NodeState::Granted, Relaxed);
        }
    }

    /// A queued waiter takes the write lock, in one CAS loop: sets `taken` (`WRITER_LOCKED`,
    /// with [`OWNER_PENDING`] for a grant to a task not running), clears
    /// `HANDOFF` (a handoff is only ever the head's, and the head is served now; unless
    /// `handoff_of_next`: an upgrade that queued ahead of a head already due the handoff
    /// leaves it to that waiter), clears `WAITERS` (and `HANDOFF`) if it is the last
    /// waiter and [`WRITER_QUEUED`] if it is the last writer or upgrade queued, and takes
    /// `trade` out of the count (the upgrading reader's own bias and `UPGRADABLE`; 0 for a
    /// writer). Fails, changing nothing, while `can_take(count)` is
    /// false. The one place a queued waiter gets the write lock; the caller unlinks its
    /// node.
    pub(super) fn queued_write_lock(
        &self,
        list: &WaitList,
        taken: usize,
        trade: usize,
        handoff_of_next: bool,
        can_take: impl Fn(usize) -> bool,
    ) -> bool {
        debug_assert!(taken & WRITER_LOCKED != 0 && taken & !(WRITER_LOCKED | OWNER_PENDING) == 0);
        let last = list.is_single();
        let mut clear = match (last, handoff_of_next) {
            (true, _) => HANDOFF | WAITERS,
            (false, false) => HANDOFF,
            (false, true) => 0,
        };
        if list.single_writer() {
            // The one writer or upgrade queued takes the lock: `WRITER_QUEUED` goes in
            // this step rather than at the wait lock's release (`sync_queued`).
            clear |= WRITER_QUEUED;
        }
        self.count
            .fetch_update(Acquire, Relaxed, |count| {
                can_take(count).then(|| ((count - trade) | taken) & !clear)
            })
            .is_ok()
    }

    /// Wakes the head writer; or, with the lock free and a handoff pending or due (the head
    /// has waited past the timeout), grants it the lock directly.
    ///
    /// Granting a head that is due a handoff here, in the releasing task, is this crate's
    /// adaptation of the kernel: there a woken writer runs at once and sets `HANDOFF`
    /// itself; a woken task may wait in its executor's run queue while arrivals steal the
    /// lock, so the bound on its wait must not depend on when it is next polled. So the
    /// timeout is checked at every release that finds the lock free, for a head already
    /// woken too: a woken head not yet polled has no other way to claim the lock, and
    /// arrivals may steal it at every release until it runs (the kernel's writer, running
    /// at once, checks its own timeout on each of its wake-ups). A clock read under the
    /// wait lock, but only at a release that finds the head still waiting: after a steal,
    /// or at its first wake-up.
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
        let count = self.count.load(Relaxed);
        if count & LOCK_MASK != 0 {
            // Still owned: the owner's release will wake the head.
            return;
        }
        // SAFETY: `head` is linked and we hold the wait lock.
        let on_its_way = || unsafe {
            head.as_ref()
                .with_inner(|inner| inner.parks && inner.waker.is_none())
        };
        if count & HANDOFF == 0 && on_its_way() {
            // A parked thread woken to compete and not back yet (its waker is gone, not
            // replaced): when it runs it takes the free lock, or, finding it taken, asks
            // for the handoff at once (a lost race), as the kernel's writer does. Nothing
            // to wake, and no clock to read for a timed grant at every release meanwhile:
            // with 4 writer and 4 reader threads, a thread's wake-up spans hundreds of
            // releases, and their clock reads took 12% of the time (`docs/performance.md`,
            // "Round eleven").
            return;
        }
        // For the models' record of the timed grants (below).
        #[cfg(all(test, async_rwsem_loom))]
        // SAFETY: `head` is linked and we hold the wait lock.
        let woken = unsafe { head.as_ref().with_inner(|inner| inner.woken) };
        // SAFETY: `head` is linked and we hold the wait lock.
        if count & HANDOFF != 0 || unsafe { self.timed_out(list, head) } {
            if count & HANDOFF == 0 {
                lockevent!(self, wlock_handoff);
            }
            // Nobody but the head may take the lock now: hand it over directly, with
            // `OWNER_PENDING` in the same step (its task has not run since: spinners must
            // not wait for it; they yield, which lets it run if it waits on their worker).
            // A reader's transient bias makes this fail; its queueing re-checks.
            let taken = WRITER_LOCKED | OWNER_PENDING;
            if self.queued_write_lock(list, taken, 0, false, |count| count & LOCK_MASK == 0) {
                // SAFETY: `head` is linked in `list`; the count holds its write lock.
                unsafe { self.grant(list, head, wakers) };
                lockevent!(self, wlock_queued);
                #[cfg(all(test, async_rwsem_loom))]
                if count & HANDOFF == 0 {
                    self.clock.note_timed_grant(woken);
                }
            }
            return;
        }
        // Woken to compete (again, after a steal: then its waker is gone already, and
        // nothing is pushed).
        // SAFETY: linked, wait lock held.
        let waker = unsafe {
            head.as_ref().with_inner(|inner| {
                inner.woken = true;
                inner.waker.take()
            })
        };
        if let Some(waker) = waker {
            wakers.push(waker);
            lockevent!(self, wake_writer);
        }
    }

    /// Grants the queued upgrade at the head the write lock if only its own bias is left.
    ///
    /// # Safety
    ///
    /// `head` is the head of `list`, the locked wait list of `self`, and an upgrade.
    unsafe fn grant_upgrade(
        &self,
        list: &mut WaitList,
        head: NonNull<Waiter>,
        wakers: &mut WakeList,
    ) {
        // SAFETY: forwarded from the caller.
        if unsafe { self.upgrade_at_head(list, head) } {
            // SAFETY: linked; the count holds its write lock now.
            unsafe { self.grant(list, head, wakers) };
        }
    }

    /// A queued writer got the lock (granted, or taken by the head itself): see
    /// [`PassCheck::writer_turn`].
    #[inline]
    pub(super) fn writer_turn(&self, list: &mut WaitList) {
        if list.pass_check.idle() {
            return;
        }
        let timeout = self.policy.handoff_timeout();
        list.pass_check.writer_turn(|| self.clock.micros(), timeout);
    }

    /// Has the node waited past the handoff timeout?
    ///
    /// # Safety
    ///
    /// `node` is linked and the caller holds the wait lock.
    pub(super) unsafe fn timed_out(&self, list: &WaitList, node: NonNull<Waiter>) -> bool {
        if self.policy.handoff_never() {
            return false;
        }
        if self.policy.handoff_always() {
            return true;
        }
        // On a crowded runtime's thread a task at the head is due at every release; a
        // parked thread keeps the timed handoff (`Policy::crowded_handoff`).
        // SAFETY: caller's contract (for both reads of the node).
        if self.crowded_handoff(list) && !unsafe { node.as_ref().with_inner(|inner| inner.parks) } {
            return true;
        }
        // SAFETY: caller's contract.
        let Some(deadline) = (unsafe { node.as_ref().with_inner(|inner| inner.due) }) else {
            // SAFETY: caller's contract.
            unsafe { self.start_timeout(node) };
            return false;
        };
        let due = self.clock.reached(deadline);
        #[cfg(all(test, async_rwsem_loom))]
        if due {
            self.clock.note_due();
        }
        due
    }

    /// A writer that queued under the crowded runtime's rule, which no longer holds, is
    /// checked at the head for the first time: no clock was read when it queued
    /// (`write_queue`), so its handoff timeout starts now. (Also a deadline past what an
    /// `Instant` holds: never due, however often it is set again.) Out of line: rare, and
    /// `timed_out` stays small enough to inline into its callers.
    ///
    /// # Safety
    ///
    /// `node` is a linked writer node and the caller holds the wait lock.
    #[cold]
    #[inline(never)]
    unsafe fn start_timeout(&self, node: NonNull<Waiter>) {
        let due = self.clock.deadline(self.policy.handoff_timeout());
        // SAFETY: caller's contract.
        unsafe { node.as_ref().with_inner(|inner| inner.due = due) };
    }
}

/// Hands the waker of `second` to `first`, to be woken by `first`'s owner when it sees its
/// grant ([`WaiterInner::relay`](super::list::WaiterInner)), where both are granted in one
/// batch of two readers. So the releasing task wakes one task, not two: on a work-stealing
/// executor (tokio) the first wake-up from a running task goes to its worker's next-task
/// slot, and a second one pushes the first to the shared run queue and wakes a parked
/// worker to steal it (an `eventfd` write and a context switch, about 7 us of CPU on the
/// 2-core machine of `docs/performance.md`), for a section that takes nanoseconds. Relayed,
/// the second reader runs right after the first on the same worker. The readers that pass
/// a head writer are such a batch, at nearly every writer's release in the 40+40 shapes.
///
/// Not for larger batches (a batch of many readers is worth the parallel wake-ups, and
/// one stolen worker serves all of them), nor for a parked thread (its wake-up is an
/// unpark, slow enough to be worth overlapping), nor where `first` has no waker to be
/// woken by. A relay waits for the first reader's task to be polled: both already hold
/// the lock, so the second waits no longer than the first in the worst case (the first
/// task not polled: then the lock is not released either).
///
/// # Safety
///
/// `first` and `second` are linked in the locked wait list, and not yet granted.
unsafe fn relay(first: NonNull<Waiter>, second: NonNull<Waiter>) {
    // SAFETY: linked nodes, wait lock held (the caller's contract); `with_inner` does not
    // reach another node's fields.
    unsafe {
        let (first, second) = (first.as_ref(), second.as_ref());
        if !first.with_inner(|inner| inner.waker.is_some() && !inner.parks)
            || second.with_inner(|inner| inner.parks)
        {
            return;
        }
        let waker = second.with_inner(|inner| inner.waker.take());
        first.with_inner(|inner| inner.relay = waker);
    }
}

/// Which nodes a batch grant walks ([`RawRwLock::mark_wake`]): in a strict order the
/// list from its head (the grant stops at the first waiter it cannot take), otherwise the
/// readers' ring (every queued reader in order; the writers between them are not looked
/// at).
#[derive(Clone, Copy)]
struct ReaderWalk {
    ordered: bool,
}

impl ReaderWalk {
    /// Where the walk starts, in `list` whose head is `head`.
    #[inline]
    fn first(self, list: &WaitList, head: NonNull<Waiter>) -> Option<NonNull<Waiter>> {
        if self.ordered {
            Some(head)
        } else {
            list.first_reader()
        }
    }

    /// The node after `node`.
    ///
    /// # Safety
    ///
    /// `node` is linked in `list` (a reader, unless the walk is `ordered`), whose wait lock
    /// the caller holds.
    #[inline]
    unsafe fn next(self, list: &WaitList, node: NonNull<Waiter>) -> Option<NonNull<Waiter>> {
        if self.ordered {
            // SAFETY: caller's contract.
            unsafe { list.next(node) }
        } else {
            // SAFETY: caller's contract: a reader node.
            unsafe { list.next_reader(node) }
        }
    }
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

    fn take(&mut self, kind: WaiterKind) -> bool {
        match kind {
            WaiterKind::Read => true,
            WaiterKind::UpgradableRead if self.upgradable_free && !self.upgradable_taken => {
                self.upgradable_taken = true;
                true
            }
            _ => false,
        }
    }
}
