//! What a lock records: its per-lock state ([`LockStatState`]: the histograms, the
//! contentions, the longest hold and the exclusive holder), what a hold carries
//! ([`HoldStat`]) and a contended acquire's grant ([`Grant`]).

use std::panic::Location;
use std::ptr;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::histogram::Recorder;
use super::{epoch_ns, nanos, now_ns, Access, Holder, LockStat, LongestHold, Site};
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

/// The per-lock state of `lock_stat`: the `lock_stat` field of the lock's observers.
#[derive(Debug)]
pub(crate) struct LockStatState {
    pub(super) read_wait: Recorder,
    pub(super) read_hold: Recorder,
    pub(super) write_wait: Recorder,
    pub(super) write_hold: Recorder,
    pub(super) read_contentions: AtomicU64,
    pub(super) write_contentions: AtomicU64,
    /// The longest hold: its location, its length, its access.
    pub(super) longest: Slot,
    /// The exclusive holder (a writer or the upgradable reader): where and when it took
    /// the lock (the time field, `epoch_ns`; 0 when nobody holds it exclusively).
    pub(super) holder: Slot,
}

impl Default for LockStatState {
    fn default() -> Self {
        Self::new()
    }
}

/// What `lock_stat` knows of one hold: the `lock_stat` field of a token's [`Held`].
///
/// [`Held`]: crate::observe::Held
#[derive(Debug)]
pub(crate) struct HoldStat {
    pub(super) site: &'static Location<'static>,
    /// When the current mode was entered; `None` for a read hold not sampled (its time is
    /// not measured, the hold only counted).
    pub(super) since: Option<Instant>,
    /// How long the lock was held in the modes before the current one (ns).
    pub(super) earlier_ns: u64,
    /// When the hold became exclusive (`epoch_ns`; 0 for a plain read lock): the holder
    /// slot's key and time.
    pub(super) key: u64,
    /// How long the acquire (or the upgrade) that began the current mode waited (ns; 0:
    /// not at all), for the "waited too long" warning.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(super) wait_ns: u64,
}

/// A contended acquire's grant: its wait, handed by its lock future to the token made
/// next ([`crate::observe::Wait`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grant {
    pub(super) wait_ns: u64,
    pub(super) at: Instant,
    /// Where the waiting acquire was called (for an upgrade: the `upgrade` call).
    pub(super) site: Site,
}

impl Grant {
    /// The grant, now, of an acquire from `site` that started to wait at `since`
    /// ([`now_ns`]): the hold starts at the grant's time, so no second clock read.
    #[inline]
    pub(crate) fn now(since: u64, site: Site) -> Self {
        let at = Instant::now();
        Self {
            wait_ns: epoch_ns(at).saturating_sub(since),
            at,
            site,
        }
    }
}

impl LockStatState {
    pub(crate) const fn new() -> Self {
        Self {
            read_wait: Recorder::new(),
            read_hold: Recorder::new(),
            write_wait: Recorder::new(),
            write_hold: Recorder::new(),
            read_contentions: AtomicU64::new(0),
            write_contentions: AtomicU64::new(0),
            longest: Slot::new(),
            holder: Slot::new(),
        }
    }

    #[inline]
    pub(super) fn wait_of(&self, access: Access) -> (&Recorder, &AtomicU64) {
        match access {
            Access::Write => (&self.write_wait, &self.write_contentions),
            _ => (&self.read_wait, &self.read_contentions),
        }
    }

    #[inline]
    pub(super) fn hold_of(&self, access: Access) -> &Recorder {
        match access {
            Access::Write => &self.write_hold,
            _ => &self.read_hold,
        }
    }

    /// Records an acquisition's wait (`grant`: a contended one's) and returns the time
    /// its hold starts. Runs no foreign code.
    #[inline]
    pub(super) fn record_wait(
        &self,
        access: Access,
        grant: Option<Grant>,
    ) -> (Instant, u64, Option<Site>) {
        match self.record_wait_timed(access, grant, true) {
            (Some(now), wait, site) => (now, wait, site),
            (None, ..) => unreachable!("a timed hold has a time"),
        }
    }

    /// [`record_wait`](Self::record_wait), reading the clock for an acquire that did not
    /// wait only if `timed` (a contended acquire's grant has the time already).
    #[inline]
    fn record_wait_timed(
        &self,
        access: Access,
        grant: Option<Grant>,
        timed: bool,
    ) -> (Option<Instant>, u64, Option<Site>) {
        let (wait, contentions) = self.wait_of(access);
        match grant {
            Some(Grant { at, wait_ns, site }) => {
                contentions.fetch_add(1, Ordering::Relaxed);
                wait.record(wait_ns);
                (Some(at), wait_ns, Some(site))
            }
            None => {
                wait.record(0);
                (timed.then(Instant::now), 0, None)
            }
        }
    }

    /// The lock is owned in mode `kind`, taken from `site` after `grant` (a contended
    /// acquire's): the hold. A read hold that did not wait is timed only if this thread's
    /// sample is due ([`sample`]) or `time_all` (a "held too long" threshold is set).
    /// Runs no foreign code.
    #[inline]
    pub(crate) fn acquired(
        &self,
        kind: WaiterKind,
        site: &'static Location<'static>,
        grant: Option<Grant>,
        time_all: bool,
    ) -> HoldStat {
        let access = Access::of(kind);
        let timed = access != Access::Read || time_all || grant.is_some() || sample();
        let (now, wait, _) = self.record_wait_timed(access, grant, timed);
        let mut key = 0;
        if let (Some(now), true) = (now, access != Access::Read) {
            key = self.set_holder(site, now, access);
        }
        HoldStat {
            site,
            since: now,
            earlier_ns: 0,
            key,
            wait_ns: wait,
        }
    }

    /// Ends the hold of the mode `access` at `now`: its histogram, the longest hold.
    /// Returns its length (ns).
    #[inline]
    pub(super) fn end_segment(&self, hold: &HoldStat, access: Access, now: Instant) -> u64 {
        let Some(since) = hold.since else {
            self.hold_of(access).count_untimed();
            return 0;
        };
        let ns = nanos(now.saturating_duration_since(since));
        self.hold_of(access).record(ns);
        if ns > self.longest.ns.load(Ordering::Relaxed) {
            self.longest
                .write(|max| ns > max, |slot| slot.set(hold.site, ns, access));
        }
        ns
    }

    /// The lock held as `hold` turned from `from` into `to`, after `grant` (an upgrade
    /// that waited; its wait goes into `hold`). Returns where an upgrade that waited was
    /// called. Runs no foreign code.
    #[inline]
    pub(crate) fn changed(
        &self,
        from: WaiterKind,
        to: WaiterKind,
        hold: &mut HoldStat,
        grant: Option<Grant>,
    ) -> Option<Site> {
        let (from, to) = (Access::of(from), Access::of(to));
        let (now, wait, site) = if from != Access::Write && to == Access::Write {
            // An upgrade: a write acquisition.
            self.record_wait(Access::Write, grant)
        } else {
            (Instant::now(), 0, None)
        };
        let ns = self.end_segment(hold, from, now);
        hold.earlier_ns = hold.earlier_ns.saturating_add(ns);
        hold.since = Some(now);
        hold.wait_ns = wait;
        if to == Access::Read {
            self.clear_holder(hold);
        } else {
            if hold.key == 0 {
                // (Every change into an exclusive mode starts from one: not reached.)
                hold.key = epoch_ns(now);
            }
            let (site, key) = (hold.site, hold.key);
            self.holder.write(|_| true, |slot| slot.set(site, key, to));
        }
        site
    }

    /// The lock held as `hold` in mode `kind` was released. Returns the whole hold's
    /// length (ns). Runs no foreign code.
    #[inline]
    pub(crate) fn released(&self, kind: WaiterKind, hold: &HoldStat) -> u64 {
        let access = Access::of(kind);
        let ns = match hold.since {
            Some(_) => self.end_segment(hold, access, Instant::now()),
            None => {
                self.hold_of(access).count_untimed();
                0
            }
        };
        if access != Access::Read {
            self.clear_holder(hold);
        }
        hold.earlier_ns.saturating_add(ns)
    }

    /// A new exclusive hold from `site`, taken at `at`, is the holder: returns its key
    /// (the slot's time field). The key is `at` (`epoch_ns`) unless the slot still holds
    /// the previous holder's key and `at` is not past it (a clock coarser than the time
    /// between a release and the next acquire: both read the same tick); then it is one
    /// past it, so that every key differs from the one before it, and the previous
    /// holder's [`clear_holder`](Self::clear_holder), which may come after this write,
    /// cannot empty the slot of this hold. (Exclusive holds follow one another, ordered by
    /// the lock: the previous holder's slot write happens before this one.)
    #[inline]
    pub(super) fn set_holder(
        &self,
        site: &'static Location<'static>,
        at: Instant,
        access: Access,
    ) -> u64 {
        let mut key = epoch_ns(at);
        self.holder.write(
            |_| true,
            |slot| {
                let previous = slot.ns.load(Ordering::Relaxed);
                if previous >= key {
                    key = previous.saturating_add(1);
                }
                slot.set(site, key, access);
            },
        );
        key
    }

    /// Empties the holder slot if it is still `hold`'s: after a release, the next holder
    /// may have written it already, and is left alone. One CAS of the time field, outside
    /// the sequence count: an empty slot reads as empty whatever its other fields hold,
    /// and a next holder's write (which the lock orders after this hold's own) either
    /// comes after this CAS or makes it fail. So only holders write the slot under the
    /// count, one at a time, and nobody waits for it on the acquire and release paths.
    #[inline]
    pub(super) fn clear_holder(&self, hold: &HoldStat) {
        let key = hold.key;
        if key != 0 {
            let _ = self
                .holder
                .ns
                .compare_exchange(key, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// The exclusive holder: where it took the lock, since when (`now_ns`), how.
    pub(crate) fn holder(&self) -> Option<Holder> {
        self.holder.read().map(|(location, since, access)| Holder {
            location,
            access,
            held_for: Duration::from_nanos(now_ns().saturating_sub(since)),
        })
    }

    /// A snapshot, with the lock's event counters.
    pub(crate) fn snapshot(&self, events: LockStats) -> LockStat {
        LockStat {
            read_wait: self.read_wait.snapshot(),
            read_hold: self.read_hold.snapshot(),
            write_wait: self.write_wait.snapshot(),
            write_hold: self.write_hold.snapshot(),
            read_contentions: self.read_contentions.load(Ordering::Relaxed),
            write_contentions: self.write_contentions.load(Ordering::Relaxed),
            longest_hold: self
                .longest
                .read()
                .map(|(location, ns, access)| LongestHold {
                    location,
                    duration: Duration::from_nanos(ns),
                    access,
                }),
            events,
        }
    }
}

/// Read holds that did not wait are timed one in this many per thread (the first one on
/// each thread too): the two clock reads of a timed hold cost more than the lock itself.
pub(super) const SAMPLE_EVERY: u32 = 64;

thread_local! {
    /// Read holds left on this thread until the next timed one.
    static UNTIL_SAMPLE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Is this thread's next read hold to be timed? One in [`SAMPLE_EVERY`], no atomics.
#[inline]
fn sample() -> bool {
    UNTIL_SAMPLE
        .try_with(|left| match left.get() {
            0 => {
                left.set(SAMPLE_EVERY - 1);
                true
            }
            n => {
                left.set(n - 1);
                false
            }
        })
        .unwrap_or(true)
}
