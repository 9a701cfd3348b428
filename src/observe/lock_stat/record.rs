//! What a lock records: its per-lock state ([`LockStatState`]: the longest hold and the
//! exclusive holder; its threads' blocks of histograms and contentions are the raw lock's
//! blocks of counters, [`Blocks`]), what a hold carries ([`HoldStat`]) and a contended
//! acquire's grant ([`Grant`]).

use std::num::NonZeroU64;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

#[cfg(not(feature = "tracing"))]
use super::clock::coarse_ticking;
use super::clock::{coarse_ns, now_ns};
use super::histogram::Histogram;
use super::local::LocalBlock;
use super::{Access, Holder, LockStat, LongestHold, Site};
use crate::observe::per_thread::{self, add, Blocks, Local};
use crate::raw::list::WaiterKind;
use crate::raw::stats::LockStats;

/// A location, a time and an [`Access`], written together under a sequence count (a
/// seqlock of atomics): readers retry until they see one writer's whole write. Writers
/// take the odd count with a CAS.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) seq: AtomicUsize,
    pub(super) site: AtomicPtr<Location<'static>>,
    pub(super) ns: AtomicU64,
    pub(super) access: AtomicU8,
}

impl Slot {
    pub(super) const fn new() -> Self {
        Self {
            seq: AtomicUsize::new(0),
            site: AtomicPtr::new(ptr::null_mut()),
            ns: AtomicU64::new(0),
            access: AtomicU8::new(0),
        }
    }

    /// Takes the slot for writing if `want` (given the current time field) still says so,
    /// waiting for another writer to finish (a few instructions, unless its thread was
    /// preempted: then this one yields its thread between tries).
    #[inline]
    pub(super) fn write(&self, want: impl Fn(u64) -> bool, f: impl FnOnce(&Self)) {
        let mut spins = 0u32;
        loop {
            let seq = self.seq.load(Ordering::Relaxed);
            if seq & 1 != 0 {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            if !want(self.ns.load(Ordering::Relaxed)) {
                return;
            }
            if self
                .seq
                .compare_exchange_weak(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // The data stores below must not become visible before the odd count.
            fence(Ordering::Release);
            if want(self.ns.load(Ordering::Relaxed)) {
                f(self);
            }
            self.seq.store(seq + 2, Ordering::Release);
            return;
        }
    }

    /// Writes the slot as its one writer at this time (the exclusive holder): the count
    /// made odd, the data, the count made even, with no read-modify-write. (The count is
    /// even between writes: a slot written this way is written only this way, by one
    /// writer at a time.)
    #[inline]
    pub(super) fn write_alone(&self, f: impl FnOnce(&Self)) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // The data stores below must not become visible before the odd count.
        fence(Ordering::Release);
        f(self);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    #[inline]
    pub(super) fn set(&self, site: &'static Location<'static>, ns: u64, access: Access) {
        self.site
            .store(ptr::from_ref(site).cast_mut(), Ordering::Relaxed);
        self.ns.store(ns, Ordering::Relaxed);
        self.access.store(access.as_u8(), Ordering::Relaxed);
    }

    /// One consistent reading: `None` if the time field is 0 (empty).
    pub(super) fn read(&self) -> Option<(&'static Location<'static>, u64, Access)> {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let site = self.site.load(Ordering::Relaxed);
            let ns = self.ns.load(Ordering::Relaxed);
            let access = self.access.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != s1 {
                continue;
            }
            if ns == 0 || site.is_null() {
                return None;
            }
            // SAFETY: the slot only ever stores pointers made from `&'static Location`.
            let site = unsafe { &*site };
            return Some((site, ns, Access::from_u8(access)));
        }
    }
}

/// The exclusive holder's slot: written by each exclusive holder in turn (the lock
/// orders them), read by [`RwLock::snapshot`](crate::RwLock::snapshot), on a cache line of
/// its own so that its writes do not evict the fields every acquire reads.
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct HolderSlot(pub(super) Slot);

/// The per-lock state of `lock_stat`: the `lock_stat` field of the lock's observers. Its
/// counters and histograms are in the raw lock's blocks per thread ([`Blocks`], the
/// `stats` field), which every method takes.
#[derive(Debug)]
pub(crate) struct LockStatState {
    /// The longest hold: its location, its length, its access. Written only by a hold
    /// longer than every one before it.
    pub(super) longest: Slot,
    /// The exclusive holder (a writer or the upgradable reader): where and when it took
    /// the lock (the time field: its hold's start, 0 before the first). Not emptied when
    /// the holder leaves: the snapshot reads it only while the count word says an
    /// exclusive holder is in.
    pub(super) holder: HolderSlot,
}

impl Default for LockStatState {
    fn default() -> Self {
        Self::new()
    }
}

/// What `lock_stat` knows of one hold: the `lock_stat` field of a token's [`Held`].
///
/// [`Held`]: crate::observe::Held
#[derive(Clone, Copy, Debug)]
pub(crate) struct HoldStat {
    /// Where the guard was taken; `None` for a read hold not timed made again from its
    /// lock (`LockStatState::remake`), which needs none.
    pub(super) site: Option<Site>,
    /// When the current mode was entered: by the precise clock if it is timed (then with
    /// [`TIMED`] set), else by the coarse one; 0 (no time, not timed) for a read hold not
    /// timed (only counted, when it began), so that its release tests one word.
    start: u64,
    /// How long the lock was held in the modes before the current one (ns), for the
    /// "held too long" warning (feature `tracing`).
    #[cfg(feature = "tracing")]
    pub(super) earlier_ns: u64,
    /// How long the acquire (or the upgrade) that began the current mode waited (ns; 0:
    /// not at all), for the "waited too long" warning (feature `tracing`).
    #[cfg(feature = "tracing")]
    pub(super) wait_ns: u64,
}

/// The bit of [`HoldStat`]'s start that says the hold is timed with the precise clock
/// (sampled, contended, or every hold of a lock with a "held too long" threshold). Times
/// are nanoseconds from the crate's clock epoch: they never reach it.
const TIMED: u64 = 1 << 63;

impl HoldStat {
    /// A hold from `site` that started at `start` (0: a read hold not timed), `timed` or
    /// not, that did not wait.
    #[inline(always)]
    pub(super) fn new(site: Site, start: u64, timed: bool) -> Self {
        Self {
            site: Some(site),
            start: start | if timed { TIMED } else { 0 },
            #[cfg(feature = "tracing")]
            earlier_ns: 0,
            #[cfg(feature = "tracing")]
            wait_ns: 0,
        }
    }

    /// When the current mode was entered (0: a read hold not timed).
    #[inline(always)]
    pub(super) fn start(&self) -> u64 {
        self.start & !TIMED
    }

    /// Is the current mode's hold timed with the precise clock?
    #[inline(always)]
    pub(super) fn timed(&self) -> bool {
        self.start & TIMED != 0
    }

    /// Can the hold be made again from its lock alone (`LockStatState::remake`)? One
    /// that is not timed: a read hold has nothing to keep, an exclusive one's site and
    /// start are the holder slot's.
    #[cfg(not(feature = "tracing"))]
    #[inline(always)]
    pub(crate) fn compact(&self) -> bool {
        !self.timed()
    }

    /// The current mode begins, at `start`, `timed` or not.
    #[inline]
    fn restart(&mut self, start: u64, timed: bool) {
        self.start = start | if timed { TIMED } else { 0 };
    }
}

/// A contended acquire's grant, handed by its lock future to the token made next
/// ([`crate::observe::Wait`]): when it started to wait ([`wait_starts`]). A timed wait
/// ends, and its hold starts, when the token is made (one clock reading); one that is not
/// timed ([`UNTIMED_WAIT`] set) reads no clock there. One word, so that it is passed in a
/// register.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grant {
    since: NonZeroU64,
}

/// The bit of a [`Grant`]'s start that says its wait is not timed (only counted): its
/// start is then the coarse clock's, for the wait record alone. Times are nanoseconds
/// from the crate's clock epoch: they never reach it.
const UNTIMED_WAIT: u64 = 1 << 63;

/// Contended waits are timed with the precise clock one in this many per thread and mode
/// (read or write; the first one on each thread too), or all of them on a lock with a "held too long" or
/// "waited too long" threshold (feature `tracing`). The others are counted (a contention,
/// a wait and a hold not timed). Each timed one reads the precise clock when it starts to
/// wait, at its grant (its hold's start) and at its release: three readings, which would
/// lengthen the critical sections of a contended lock and so its contention.
pub(super) const WAIT_SAMPLE_EVERY: u32 = 16;

/// A contended acquire in mode `kind` starts to wait, on a lock whose waits are all to be
/// timed (`time_all`) or not: returns its grant's start (for [`Grant::since`]) and when it
/// started to wait (for the wait record of its node: the precise clock's if the wait is
/// timed, else the coarse clock's, which is never ahead of it).
#[inline]
pub(crate) fn wait_starts(kind: WaiterKind, time_all: bool) -> (u64, u64) {
    let timed = time_all
        || per_thread::with_local(|local| {
            let timed = local
                .lock_stat
                .sample_wait(Access::of(kind), WAIT_SAMPLE_EVERY);
            if timed {
                // The coarse clock's lease, renewed here too (see `clock`).
                coarse_ns(Some(&local.lock_stat.lease));
            }
            timed
        });
    if timed {
        let now = now_ns();
        (now, now)
    } else {
        let now = coarse_ns(None);
        (now | UNTIMED_WAIT, now)
    }
}

impl Grant {
    /// The grant of an acquire that started to wait at `since` ([`wait_starts`]; 0: it
    /// never started to, `None`).
    #[inline]
    pub(crate) fn since(since: u64) -> Option<Self> {
        NonZeroU64::new(since).map(|since| Self { since })
    }

    /// The wait ends now, for the acquire called at `site`: if it is timed, one clock
    /// reading, which is also its hold's start; else none (`at` 0).
    #[inline]
    fn ends(self, site: Site) -> Waited {
        let since = self.since.get();
        if since & UNTIMED_WAIT != 0 {
            return Waited {
                wait_ns: 0,
                at: 0,
                site,
            };
        }
        let at = now_ns();
        Waited {
            wait_ns: at.saturating_sub(since),
            at,
            site,
        }
    }
}

/// A contended acquire's wait, ended ([`Grant::ends`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Waited {
    /// How long it waited (0 if it is not timed).
    pub(super) wait_ns: u64,
    /// When it ended ([`now_ns`]): the hold's start; 0 if it is not timed (then neither
    /// is its hold: both are counted).
    pub(super) at: u64,
    /// Where the waiting acquire was called (for an upgrade: the `upgrade` call).
    pub(super) site: Site,
}

/// Holds that did not wait are timed with the precise clock one in this many per thread
/// and mode (read or write; the first one on each thread too): its two readings cost more
/// than the lock itself. The others are counted, and an exclusive one timed by the
/// coarse clock.
pub(super) const SAMPLE_EVERY: u32 = 256;

impl LockStatState {
    pub(crate) const fn new() -> Self {
        Self {
            longest: Slot::new(),
            holder: HolderSlot(Slot::new()),
        }
    }

    /// Records an acquisition in mode `access` in `block`: its wait (`waited`: a
    /// contended one's), and its hold's count if the hold is not timed. Returns when its hold starts, whether that is timed, the wait and the waiting
    /// call's site.
    #[inline(always)]
    fn record_acquire(
        block: &LocalBlock,
        local: Option<&Local>,
        access: Access,
        waited: Option<Waited>,
        time_all: bool,
    ) -> (u64, bool, u64, Option<Site>) {
        let owned = local.is_some();
        match waited {
            Some(Waited { wait_ns, at, site }) => {
                let (wait, contentions) = block.wait_of(access);
                add(contentions, 1, owned);
                if at == 0 {
                    // A wait not timed: it and its hold are counted now, the hold
                    // started as one that did not wait and is not timed.
                    add(&wait.untimed, 1, owned);
                    add(&block.hold_of(access).untimed, 1, owned);
                    (Self::untimed_start(local, access), false, 0, Some(site))
                } else {
                    wait.record(wait_ns, owned);
                    (at, true, wait_ns, Some(site))
                }
            }
            None if time_all || local.is_none_or(|l| l.lock_stat.sample(access, SAMPLE_EVERY)) => {
                block.wait_of(access).0.record_zero(owned);
                // The coarse clock's lease is renewed here, in the slow path (see
                // `clock`): the common path only reads the clock.
                if let Some(local) = local {
                    coarse_ns(Some(&local.lock_stat.lease));
                }
                (now_ns(), true, 0, None)
            }
            None => {
                // The common case: one add counts the wait (zero) and the hold.
                add(block.fast_of(access), 1, owned);
                (Self::untimed_start(local, access), false, 0, None)
            }
        }
    }

    /// The start of a hold in mode `access` that is not timed: the coarse clock's for an
    /// exclusive hold (the snapshot's "since when"), none (0) for a read hold.
    #[inline(always)]
    fn untimed_start(local: Option<&Local>, access: Access) -> u64 {
        if access == Access::Read {
            0
        } else {
            coarse_ns(local.map(|l| &l.lock_stat.lease))
        }
    }

    /// The lock is owned in mode `kind`, taken from `site` after `grant` (a contended
    /// acquire's): the hold, counted in this thread's block of `blocks` (the lock's). A
    /// hold that did not wait is timed with the precise clock only if this thread's sample
    /// is due or `time_all` (a "held too long" threshold is set); one that is not is
    /// counted now. Runs no foreign code.
    ///
    /// Inline, the common case: an acquire that did not wait, not timed, on a thread whose
    /// cache has the lock's block (one add and a countdown; for an exclusive hold, the
    /// coarse clock and the holder slot too).
    #[inline(always)]
    pub(crate) fn acquired(
        &self,
        blocks: &Blocks,
        kind: WaiterKind,
        site: &'static Location<'static>,
        grant: Option<Grant>,
        time_all: bool,
    ) -> HoldStat {
        let access = Access::of(kind);
        if grant.is_none() && !time_all {
            let fast = per_thread::with_local(|local| {
                blocks.cached(
                    local,
                    |block| {
                        if !local.lock_stat.skip(access) {
                            return None; // this thread's sample is due
                        }
                        // One add counts the wait (zero) and the hold.
                        add(block.lock_stat.fast_of(access), 1, true);
                        Some(if access == Access::Read {
                            0
                        } else {
                            coarse_ns(None)
                        })
                    },
                    || None,
                )
            });
            if let Some(start) = fast {
                if access != Access::Read {
                    self.set_holder(site, start, access);
                }
                return HoldStat::new(site, start, false);
            }
        }
        let waited = grant.map(|grant| grant.ends(site));
        self.acquired_slow(blocks, access, site, waited, time_all)
    }

    /// [`acquired`](Self::acquired), but for its common case: after `waited` (a
    /// contended acquire's wait, ended).
    #[cold]
    #[inline(never)]
    pub(super) fn acquired_slow(
        &self,
        blocks: &Blocks,
        access: Access,
        site: &'static Location<'static>,
        waited: Option<Waited>,
        time_all: bool,
    ) -> HoldStat {
        #[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
        let (start, timed, wait_ns, _) = blocks.with(|block, local| {
            Self::record_acquire(&block.lock_stat, local, access, waited, time_all)
        });
        if access != Access::Read {
            self.set_holder(site, start, access);
        }
        #[cfg_attr(not(feature = "tracing"), allow(unused_mut))]
        let mut hold = HoldStat::new(site, start, timed);
        #[cfg(feature = "tracing")]
        {
            hold.wait_ns = wait_ns;
        }
        hold
    }

    /// Ends the hold `hold` in mode `access` at `now` (`now_ns`) if it is timed: its
    /// histogram, in `block`, and the longest hold. Returns its length (ns).
    #[inline]
    pub(super) fn end_timed(
        &self,
        block: &LocalBlock,
        owned: bool,
        hold: &HoldStat,
        access: Access,
        now: u64,
    ) -> u64 {
        let ns = now.saturating_sub(hold.start());
        block.hold_of(access).record(ns, owned);
        self.longest_check(hold, ns, access);
        ns
    }

    /// Ends the hold `hold`, not timed (counted when it started): by the coarse clock, for
    /// the longest hold, if it has a start (an exclusive hold). Returns its length by
    /// that clock (ns; 0 without a start).
    #[inline(always)]
    pub(super) fn end_untimed(&self, hold: &HoldStat, access: Access) -> u64 {
        if hold.start == 0 {
            return 0;
        }
        let ns = coarse_ns(None).saturating_sub(hold.start());
        self.longest_check(hold, ns, access);
        ns
    }

    /// Is `ns` the longest hold so far? (A load of a cache line written only when it is.)
    #[inline(always)]
    fn longest_check(&self, hold: &HoldStat, ns: u64, access: Access) {
        if ns > self.longest.ns.load(Ordering::Relaxed) {
            self.longest_hold(hold, ns, access);
        }
    }

    /// A hold longer than every one before it.
    #[cold]
    #[inline(never)]
    fn longest_hold(&self, hold: &HoldStat, ns: u64, access: Access) {
        self.longest.write(
            |max| ns > max,
            |slot| {
                if let Some(site) = hold.site {
                    slot.set(site, ns, access);
                }
            },
        );
    }

    /// The lock held as `hold` turned from `from` into `to`, after `grant` (an upgrade
    /// that waited, called at the site given; its wait goes into `hold`). Returns where an
    /// upgrade that waited was called. Runs no foreign code.
    #[inline]
    pub(crate) fn changed(
        &self,
        blocks: &Blocks,
        from: WaiterKind,
        to: WaiterKind,
        hold: &mut HoldStat,
        grant: Option<(Grant, Site)>,
        time_all: bool,
    ) -> Option<Site> {
        let (from, to) = (Access::of(from), Access::of(to));
        let waited = grant.map(|(grant, site)| grant.ends(site));
        let site = blocks.with(|block, local| {
            let block = &block.lock_stat;
            let owned = local.is_some();
            let (start, timed, wait, site) = if from != Access::Write && to == Access::Write {
                // An upgrade: a write acquisition.
                Self::record_acquire(block, local, Access::Write, waited, time_all)
            } else if time_all || local.is_none_or(|l| l.lock_stat.sample(to, SAMPLE_EVERY)) {
                (now_ns(), true, 0, None)
            } else {
                // Not timed: counted now.
                add(&block.hold_of(to).untimed, 1, owned);
                (Self::untimed_start(local, to), false, 0, None)
            };
            // The segment that ends, by its own clock.
            let ns = if hold.timed() {
                let now = if timed { start } else { now_ns() };
                self.end_timed(block, owned, hold, from, now)
            } else {
                self.end_untimed(hold, from)
            };
            #[cfg(feature = "tracing")]
            {
                hold.earlier_ns = hold.earlier_ns.saturating_add(ns);
                hold.wait_ns = wait;
            }
            #[cfg(not(feature = "tracing"))]
            let _ = (ns, wait);
            hold.restart(start, timed);
            site
        });
        if to != Access::Read {
            // Still the exclusive holder (an upgrade, or a downgrade to the upgradable
            // read): the slot is still this hold's to write. A downgrade to a read lock
            // leaves it: the count word says nobody holds the lock exclusively.
            if let Some(site) = hold.site {
                self.set_holder(site, hold.start(), to);
            }
        }
        site
    }

    /// The lock held as `hold` in mode `kind` was released. Returns the whole hold's
    /// length (ns; by the coarse clock for a hold not timed; with `tracing`, for its
    /// warning: else only the last mode's). Runs no foreign code. Inline but for a timed
    /// hold's end: a read hold not timed has nothing to do, an exclusive one reads the
    /// coarse clock.
    #[inline(always)]
    pub(crate) fn released(&self, blocks: &Blocks, kind: WaiterKind, hold: &HoldStat) -> u64 {
        // One test for the common case: a read hold not timed (no start).
        let ns = if hold.start == 0 {
            0
        } else if !hold.timed() {
            // An exclusive hold not timed: by the coarse clock.
            self.end_untimed(hold, Access::of(kind))
        } else {
            self.released_timed(blocks, Access::of(kind), hold)
        };
        #[cfg(feature = "tracing")]
        return hold.earlier_ns.saturating_add(ns);
        #[cfg(not(feature = "tracing"))]
        ns
    }

    /// The end of a timed hold, in this thread's block.
    #[inline(never)]
    fn released_timed(&self, blocks: &Blocks, access: Access, hold: &HoldStat) -> u64 {
        blocks.with(|block, local| {
            self.end_timed(&block.lock_stat, local.is_some(), hold, access, now_ns())
        })
    }

    /// A new exclusive hold from `site`, taken at `at`, is the holder. Exclusive holds
    /// follow one another, ordered by the lock, and each writes the slot only while it
    /// holds the lock exclusively: one writer at a time, so no read-modify-write.
    #[inline]
    pub(super) fn set_holder(&self, site: &'static Location<'static>, at: u64, access: Access) {
        self.holder.0.write_alone(|slot| slot.set(site, at, access));
    }

    /// The release of a hold in mode `kind` that was not timed ([`HoldStat::compact`]):
    /// `true` if there is nothing to record (a read hold; an exclusive one, by the coarse
    /// clock while it ticks, no longer than the longest hold), with no call; else `false`
    /// (then [`released`](Self::released) records it). A load of the holder slot's start
    /// (this hold's: it writes the slot while it lasts), of the clock and of the longest.
    #[cfg(not(feature = "tracing"))]
    #[inline(always)]
    pub(crate) fn released_compact(&self, kind: WaiterKind) -> bool {
        if Access::of(kind) == Access::Read {
            return true;
        }
        let start = self.holder.0.ns.load(Ordering::Relaxed);
        let now = coarse_ticking();
        now != 0 && now.saturating_sub(start) <= self.longest.ns.load(Ordering::Relaxed)
    }

    /// A hold in mode `kind` that was not timed ([`HoldStat::compact`]), made again while
    /// it lasts: a read hold has no start; an exclusive one is the holder slot's, which
    /// only it writes while it lasts (its site and its start, by the coarse clock).
    #[cfg(not(feature = "tracing"))]
    #[inline(always)]
    pub(crate) fn remake(&self, kind: WaiterKind) -> HoldStat {
        match Access::of(kind) {
            Access::Read => HoldStat {
                site: None,
                start: 0,
            },
            _ => {
                let slot = &self.holder.0;
                let site = slot.site.load(Ordering::Relaxed);
                HoldStat {
                    // SAFETY: the slot only ever stores pointers made from `&'static
                    // Location`; this hold's, written when it began.
                    site: unsafe { site.as_ref() },
                    start: slot.ns.load(Ordering::Relaxed),
                }
            }
        }
    }

    /// The exclusive holder: where it took the lock, since when, how. Call it only while
    /// the count word says an exclusive holder is in (else it names the last one).
    pub(crate) fn holder(&self) -> Option<Holder> {
        self.holder
            .0
            .read()
            .map(|(location, since, access)| Holder {
                location,
                access,
                held_for: Duration::from_nanos(now_ns().saturating_sub(since)),
            })
    }

    /// A snapshot of the lock whose blocks are `blocks`, with its event counters: every
    /// thread's block folded.
    pub(crate) fn snapshot(&self, blocks: &Blocks) -> LockStat {
        let mut stat = LockStat {
            read_wait: Histogram::empty(),
            read_hold: Histogram::empty(),
            write_wait: Histogram::empty(),
            write_hold: Histogram::empty(),
            read_contentions: 0,
            write_contentions: 0,
            longest_hold: self
                .longest
                .read()
                .map(|(location, ns, access)| LongestHold {
                    location,
                    duration: Duration::from_nanos(ns),
                    access,
                }),
            events: LockStats::default(),
        };
        blocks.each(|block| {
            block.events.fold_into(&mut stat.events);
            let block = &block.lock_stat;
            // The holds not timed were counted with their acquire's wait of zero.
            for (fast, wait, hold) in [
                (&block.fast_reads, &mut stat.read_wait, &mut stat.read_hold),
                (
                    &block.fast_writes,
                    &mut stat.write_wait,
                    &mut stat.write_hold,
                ),
            ] {
                let n = fast.load(Ordering::Relaxed);
                wait.buckets[0] = wait.buckets[0].wrapping_add(n);
                hold.untimed = hold.untimed.wrapping_add(n);
            }
            block.read_wait.fold_into(&mut stat.read_wait);
            block.read_hold.fold_into(&mut stat.read_hold);
            block.write_wait.fold_into(&mut stat.write_wait);
            block.write_hold.fold_into(&mut stat.write_hold);
            stat.read_contentions = stat
                .read_contentions
                .wrapping_add(block.read_contentions.load(Ordering::Relaxed));
            stat.write_contentions = stat
                .write_contentions
                .wrapping_add(block.write_contentions.load(Ordering::Relaxed));
        });
        stat
    }
}
