//! Lock statistics with times (feature `lock_stat`): what the kernel's `/proc/lock_stat`
//! reports for a lock class, per lock here.
//!
//! Each lock records, in relaxed atomics and without allocating:
//!
//! - four log2 histograms of times: read wait, read hold, write wait, write hold;
//! - the acquires that had to take the slow path (contentions), readers and writers;
//! - the longest hold, with the location where its guard was taken;
//! - who holds the lock exclusively (a writer or the upgradable reader) and since when,
//!   for [`RwLock::snapshot`](crate::RwLock::snapshot).
//!
//! # What is counted where
//!
//! - **Acquisitions**: every acquire that gets the lock counts once in the wait histogram
//!   of its class, `try_` acquires and uncontended ones as a wait of zero (the fast path
//!   reads no clock for the wait). An acquire whose fast path failed counts as a
//!   contention, with the time from its first slow-path poll to the grant as its wait.
//! - **Holds**: a hold lasts from the acquire to the release, or to a mode change: a
//!   downgrade ends a write hold and starts a read hold, an upgrade ends a read hold and
//!   starts a write hold. So the hold histograms may count more holds than acquisitions.
//! - **Upgradable readers** are readers: their waits and holds are in the read rows. An
//!   upgrade is a write acquisition: its wait (while the other readers leave) is a write
//!   wait, and it is a write contention if it had to wait.
//! - Times are read with `Instant::now()`: one read when a lock is taken and one when it
//!   is released (or changes mode); a contended acquire reads one more, when it starts to
//!   wait.
//!
//! # What it costs
//!
//! - Time: those clock reads, and a few relaxed atomic adds, on every acquire and release
//!   (the uncontended ones too); with `tracing`, a release with a waiting threshold set
//!   and waiters queued takes the wait list's mutex briefly to read the head's wait.
//! - Memory, on 64-bit targets: 1,680 bytes more per lock (four histograms of 48 buckets,
//!   the counters and two slots), 48 bytes more per guard (where and when its hold
//!   began).

use std::fmt;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::raw::list::WaiterKind;
use crate::raw::stats::LockStats;

/// A call site, as `Location::caller` gives it.
type Site = &'static Location<'static>;

/// Buckets of a histogram: bucket 0 holds zero, bucket `b >= 1` the times in
/// `[2^(b-1), 2^b)` ns, the last one everything from 2^46 ns (about 19.5 hours) up.
pub(crate) const BUCKETS: usize = 48;

/// The bucket of a time of `ns` nanoseconds.
#[inline]
fn bucket(ns: u64) -> usize {
    ((u64::BITS - ns.leading_zeros()) as usize).min(BUCKETS - 1)
}

/// The largest time bucket `b` holds, in nanoseconds.
fn bucket_upper(b: usize) -> u64 {
    match b {
        0 => 0,
        b if b == BUCKETS - 1 => u64::MAX,
        b => (1u64 << b) - 1,
    }
}

/// Nanoseconds from the crate's clock epoch (its first use) to `at`, plus one: 0 means
/// "no time". For the times kept in atomics (the exclusive holder's) and in wait-list
/// nodes; a hold keeps its `Instant`, so that a read lock reads the clock without this
/// subtraction when taken.
#[inline]
pub(crate) fn epoch_ns(at: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(|| at);
    u64::try_from(at.saturating_duration_since(epoch).as_nanos())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// [`epoch_ns`] of now.
#[inline]
pub(crate) fn now_ns() -> u64 {
    epoch_ns(Instant::now())
}

/// `d` in nanoseconds, saturating.
#[inline]
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// A read lock.
    Read,
    /// The upgradable read lock.
    UpgradableRead,
    /// The write lock (an upgrade's too).
    Write,
}

impl Access {
    fn of(kind: WaiterKind) -> Self {
        match kind {
            WaiterKind::Read => Self::Read,
            WaiterKind::UpgradableRead => Self::UpgradableRead,
            WaiterKind::Write | WaiterKind::Upgrade => Self::Write,
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Read,
            1 => Self::UpgradableRead,
            _ => Self::Write,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Self::Read => 0,
            Self::UpgradableRead => 1,
            Self::Write => 2,
        }
    }

    /// A readable name: `read`, `upgradable read`, `write`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::UpgradableRead => "upgradable read",
            Self::Write => "write",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------------------------------
// The recorders: relaxed atomics, written on the acquire and release paths.

/// One histogram of times, as the lock records it.
#[derive(Debug)]
struct Recorder {
    buckets: [AtomicU64; BUCKETS],
    total_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Recorder {
    const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            total_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }

    #[inline]
    fn record(&self, ns: u64) {
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        if ns != 0 {
            self.total_ns.fetch_add(ns, Ordering::Relaxed);
            if ns > self.max_ns.load(Ordering::Relaxed) {
                self.max_ns.fetch_max(ns, Ordering::Relaxed);
            }
        }
    }

    fn snapshot(&self) -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|b| self.buckets[b].load(Ordering::Relaxed)),
            total_ns: self.total_ns.load(Ordering::Relaxed),
            max_ns: self.max_ns.load(Ordering::Relaxed),
        }
    }
}

/// A location, a time and an [`Access`], written together under a sequence count (a
/// seqlock of atomics): readers retry until they see one writer's whole write. Writers
/// take the odd count with a CAS.
#[derive(Debug)]
struct Slot {
    seq: AtomicUsize,
    site: AtomicPtr<Location<'static>>,
    ns: AtomicU64,
    access: AtomicU8,
}

impl Slot {
    const fn new() -> Self {
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
    fn write(&self, want: impl Fn(u64) -> bool, f: impl FnOnce(&Self)) {
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
    fn set(&self, site: &'static Location<'static>, ns: u64, access: Access) {
        self.site
            .store(ptr::from_ref(site).cast_mut(), Ordering::Relaxed);
        self.ns.store(ns, Ordering::Relaxed);
        self.access.store(access.as_u8(), Ordering::Relaxed);
    }

    /// One consistent reading: `None` if the time field is 0 (empty).
    fn read(&self) -> Option<(&'static Location<'static>, u64, Access)> {
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
    read_wait: Recorder,
    read_hold: Recorder,
    write_wait: Recorder,
    write_hold: Recorder,
    read_contentions: AtomicU64,
    write_contentions: AtomicU64,
    /// The longest hold: its location, its length, its access.
    longest: Slot,
    /// The exclusive holder (a writer or the upgradable reader): where and when it took
    /// the lock (the time field, `epoch_ns`; 0 when nobody holds it exclusively).
    holder: Slot,
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
    site: &'static Location<'static>,
    /// When the current mode was entered.
    since: Instant,
    /// How long the lock was held in the modes before the current one (ns).
    earlier_ns: u64,
    /// When the hold became exclusive (`epoch_ns`; 0 for a plain read lock): the holder
    /// slot's key and time.
    key: u64,
    /// How long the acquire (or the upgrade) that began the current mode waited (ns; 0:
    /// not at all), for the "waited too long" warning.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    wait_ns: u64,
}

/// A contended acquire's grant: its wait, handed by its lock future to the token made
/// next ([`crate::observe::Wait`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grant {
    wait_ns: u64,
    at: Instant,
    /// Where the waiting acquire was called (for an upgrade: the `upgrade` call).
    site: Site,
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
    fn wait_of(&self, access: Access) -> (&Recorder, &AtomicU64) {
        match access {
            Access::Write => (&self.write_wait, &self.write_contentions),
            _ => (&self.read_wait, &self.read_contentions),
        }
    }

    #[inline]
    fn hold_of(&self, access: Access) -> &Recorder {
        match access {
            Access::Write => &self.write_hold,
            _ => &self.read_hold,
        }
    }

    /// Records an acquisition's wait (`grant`: a contended one's) and returns the time
    /// its hold starts. Runs no foreign code.
    #[inline]
    fn record_wait(&self, access: Access, grant: Option<Grant>) -> (Instant, u64, Option<Site>) {
        let (wait, contentions) = self.wait_of(access);
        match grant {
            Some(Grant { at, wait_ns, site }) => {
                contentions.fetch_add(1, Ordering::Relaxed);
                wait.record(wait_ns);
                (at, wait_ns, Some(site))
            }
            None => {
                wait.record(0);
                (Instant::now(), 0, None)
            }
        }
    }

    /// The lock is owned in mode `kind`, taken from `site` after `grant` (a contended
    /// acquire's): the hold. Runs no foreign code.
    #[inline]
    pub(crate) fn acquired(
        &self,
        kind: WaiterKind,
        site: &'static Location<'static>,
        grant: Option<Grant>,
    ) -> HoldStat {
        let access = Access::of(kind);
        let (now, wait, _) = self.record_wait(access, grant);
        let mut key = 0;
        if access != Access::Read {
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
    fn end_segment(&self, hold: &HoldStat, access: Access, now: Instant) -> u64 {
        let ns = nanos(now.saturating_duration_since(hold.since));
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
        hold.since = now;
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
        let ns = self.end_segment(hold, access, Instant::now());
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
    fn set_holder(&self, site: &'static Location<'static>, at: Instant, access: Access) -> u64 {
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
    fn clear_holder(&self, hold: &HoldStat) {
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

/// The "held too long" and "waited too long" warnings (features `lock_stat` and
/// `tracing`), `tracing::warn!` events of target `async_rwsem::lock_stat`. Called only
/// where foreign code may run: the lock's state is consistent, and nothing is held that
/// an unwind would leave locked.
#[cfg(feature = "tracing")]
pub(crate) mod warn {
    use super::{Access, HoldStat, Site};
    use crate::raw::list::WaiterKind;
    use crate::raw::RawRwLock;

    /// The hold's current mode began with a wait past the lock's threshold: the waiter's
    /// own report, at the grant. `site`: the waiting call's location, if not the hold's
    /// (an upgrade's).
    #[inline]
    pub(crate) fn waited(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, site: Option<Site>) {
        if hold.wait_ns != 0 && hold.wait_ns > raw.warn_waited_ns() {
            waited_too_long(raw, kind, hold, site.unwrap_or(hold.site));
        }
    }

    #[cold]
    #[inline(never)]
    fn waited_too_long(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, site: Site) {
        tracing::warn!(
            target: "async_rwsem::lock_stat",
            lock = ?std::ptr::from_ref(raw),
            access = %Access::of(kind),
            location = %site,
            waited_us = hold.wait_ns / 1000,
            "waited too long for the lock"
        );
    }

    /// The hold `hold` of `held_ns` ended (the lock is released): report it if it lasted
    /// past the lock's threshold, and the head of the queue if it has waited past its
    /// own (once per waiter), naming this holder. (Out of line but for the two checks.)
    #[inline]
    pub(crate) fn released(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, held_ns: u64) {
        if held_ns > raw.warn_held_ns() {
            held_too_long(raw, kind, hold, held_ns);
        }
        let threshold = raw.warn_waited_ns();
        if threshold != u64::MAX {
            head_waiting(raw, kind, hold, threshold);
        }
    }

    #[cold]
    #[inline(never)]
    fn held_too_long(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, held_ns: u64) {
        tracing::warn!(
            target: "async_rwsem::lock_stat",
            lock = ?std::ptr::from_ref(raw),
            access = %Access::of(kind),
            location = %hold.site,
            held_us = held_ns / 1000,
            "held the lock too long"
        );
    }

    #[cold]
    #[inline(never)]
    fn head_waiting(raw: &RawRwLock, kind: WaiterKind, hold: &HoldStat, threshold: u64) {
        if let Some(head) = raw.head_waiting_past(threshold, super::now_ns()) {
            let location = head.site.map(tracing::field::display);
            tracing::warn!(
                target: "async_rwsem::lock_stat",
                lock = ?std::ptr::from_ref(raw),
                access = %Access::of(head.kind),
                location,
                waited_us = head.waited_ns / 1000,
                holder = %hold.site,
                holder_access = %Access::of(kind),
                "waiting too long for the lock"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The snapshot types.

/// A histogram of times: how many fell in each power-of-two bucket, their total and the
/// largest. Percentiles are read from the buckets, so they are upper bounds within a
/// factor of two (and never above [`max`](Self::max)); the count, the mean and the max
/// are exact.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Histogram {
    buckets: [u64; BUCKETS],
    total_ns: u64,
    max_ns: u64,
}

impl Histogram {
    /// How many times were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// How many of them were zero (acquires that did not wait).
    pub fn zeros(&self) -> u64 {
        self.buckets[0]
    }

    /// Their sum.
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.total_ns)
    }

    /// The longest (zero if none was recorded).
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// The mean (zero if none was recorded).
    pub fn mean(&self) -> Duration {
        match self.count() {
            0 => Duration::ZERO,
            n => Duration::from_nanos(self.total_ns / n),
        }
    }

    /// The time below or at which a fraction `q` (in `0.0..=1.0`, clamped) of the recorded
    /// times fall: the upper edge of the bucket that holds the `ceil(q * count)`-th
    /// smallest, at most [`max`](Self::max). Zero if nothing was recorded.
    ///
    /// ```
    /// # #[cfg(feature = "lock_stat")] {
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(0);
    /// drop(lock.try_read());
    /// let stat = lock.lock_stat();
    /// assert_eq!(stat.read_wait().count(), 1);
    /// assert_eq!(stat.read_wait().percentile(0.99), std::time::Duration::ZERO); // no wait
    /// # }
    /// ```
    pub fn percentile(&self, q: f64) -> Duration {
        let count = self.count();
        if count == 0 {
            return Duration::ZERO;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_nanos(bucket_upper(b).min(self.max_ns));
            }
        }
        self.max()
    }

    /// The buckets that hold anything: the largest time each holds (`Duration::ZERO` for
    /// the zeros, `Duration::MAX` for the last, open bucket) and how many it holds.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &n)| n != 0)
            .map(|(b, &n)| {
                let upper = match bucket_upper(b) {
                    u64::MAX => Duration::MAX,
                    ns => Duration::from_nanos(ns),
                };
                (upper, n)
            })
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("mean", &self.mean())
            .field("p50", &self.percentile(0.5))
            .field("p99", &self.percentile(0.99))
            .field("max", &self.max())
            .finish()
    }
}

/// The longest hold of a lock so far: how long, where its guard was taken, in which mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LongestHold {
    /// Where the guard was taken (the call of the acquire method).
    pub location: &'static Location<'static>,
    /// How long the lock was held in that mode.
    pub duration: Duration,
    /// The mode.
    pub access: Access,
}

/// Who holds a lock exclusively (a writer, or the upgradable reader), in a
/// [`Snapshot`](crate::Snapshot) (feature `lock_stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Holder {
    /// Where the guard was taken (for an upgraded guard: where the upgradable read was).
    pub location: &'static Location<'static>,
    /// [`Access::Write`] or [`Access::UpgradableRead`].
    pub access: Access,
    /// How long it has held the lock when the snapshot was taken.
    pub held_for: Duration,
}

/// A lock's statistics with times (feature `lock_stat`), from
/// [`RwLock::lock_stat`](crate::RwLock::lock_stat). See the [module documentation]
/// for what is counted where.
///
/// Its `Display` prints a table:
///
/// ```text
///                  count  contended      total       mean        p50        p99        max
/// read wait            3          1    156.4µs     52.1µs          0    156.4µs    156.4µs
/// read hold            3          -      3.1ms      1.0ms      1.0ms      2.1ms      2.0ms
/// write wait           2          1      2.0ms      1.0ms          0      2.0ms      2.0ms
/// write hold           2          -      1.2ms    600.0µs    524.3µs      1.2ms      1.2ms
/// longest hold: 2.0ms (read) at src/main.rs:10:25
/// ```
///
/// (the columns as the kernel's `/proc/lock_stat` has them for waits and holds, with
/// percentiles in place of the minimum; "contended": acquires whose fast path failed).
///
/// The snapshot is read with relaxed loads: while the lock is in use it is approximate,
/// once every task is done with the lock it is exact.
///
/// [module documentation]: crate::lock_stat
#[derive(Clone, Debug)]
pub struct LockStat {
    read_wait: Histogram,
    read_hold: Histogram,
    write_wait: Histogram,
    write_hold: Histogram,
    read_contentions: u64,
    write_contentions: u64,
    longest_hold: Option<LongestHold>,
    events: LockStats,
}

impl LockStat {
    /// How long read acquires (and upgradable ones) waited: one entry per acquisition.
    pub fn read_wait(&self) -> &Histogram {
        &self.read_wait
    }

    /// How long read locks (and upgradable ones) were held.
    pub fn read_hold(&self) -> &Histogram {
        &self.read_hold
    }

    /// How long write acquires (and upgrades) waited: one entry per acquisition.
    pub fn write_wait(&self) -> &Histogram {
        &self.write_wait
    }

    /// How long the write lock was held.
    pub fn write_hold(&self) -> &Histogram {
        &self.write_hold
    }

    /// Read acquires (and upgradable ones) whose fast path failed.
    pub fn read_contentions(&self) -> u64 {
        self.read_contentions
    }

    /// Write acquires (and upgrades) whose fast path failed.
    pub fn write_contentions(&self) -> u64 {
        self.write_contentions
    }

    /// The longest hold so far, if any lock was released.
    pub fn longest_hold(&self) -> Option<LongestHold> {
        self.longest_hold
    }

    /// The lock's event counters, as [`RwLock::stats`](crate::RwLock::stats) gives them.
    pub fn events(&self) -> &LockStats {
        &self.events
    }
}

/// `{:.1?}` of a duration, as one string (so that it can be padded).
fn short(d: Duration) -> String {
    if d.is_zero() {
        String::from("0")
    } else {
        format!("{d:.1?}")
    }
}

impl fmt::Display for LockStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "", "count", "contended", "total", "mean", "p50", "p99", "max"
        )?;
        let rows = [
            ("read wait", &self.read_wait, Some(self.read_contentions)),
            ("read hold", &self.read_hold, None),
            ("write wait", &self.write_wait, Some(self.write_contentions)),
            ("write hold", &self.write_hold, None),
        ];
        for (name, h, contended) in rows {
            writeln!(
                f,
                "{:<12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                name,
                h.count(),
                contended.map_or_else(|| String::from("-"), |n| n.to_string()),
                short(h.total()),
                short(h.mean()),
                short(h.percentile(0.5)),
                short(h.percentile(0.99)),
                short(h.max()),
            )?;
        }
        match self.longest_hold {
            Some(l) => write!(
                f,
                "longest hold: {} ({}) at {}",
                short(l.duration),
                l.access,
                l.location
            ),
            None => f.write_str("longest hold: none yet"),
        }
    }
}

#[cfg(all(test, not(async_rwsem_loom)))]
mod tests {
    use super::*;

    /// The sizes the documentation gives: the per-lock state and the per-hold state.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<LockStatState>(), 1680);
        assert_eq!(std::mem::size_of::<HoldStat>(), 48);
    }

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(2), 2);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(4), 3);
        assert_eq!(bucket(1023), 10);
        assert_eq!(bucket(1024), 11);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for b in 1..BUCKETS - 1 {
            assert_eq!(bucket(bucket_upper(b)), b);
            assert_eq!(bucket(bucket_upper(b) + 1), b + 1);
        }
    }

    #[test]
    fn histogram_counts_mean_max_and_percentiles() {
        let r = Recorder::new();
        for _ in 0..90 {
            r.record(0);
        }
        for _ in 0..9 {
            r.record(1000); // bucket 10: up to 1023 ns
        }
        r.record(1_000_000); // bucket 20: up to 1_048_575 ns
        let h = r.snapshot();
        assert_eq!(h.count(), 100);
        assert_eq!(h.zeros(), 90);
        assert_eq!(h.total(), Duration::from_nanos(9 * 1000 + 1_000_000));
        assert_eq!(h.mean(), Duration::from_nanos((9 * 1000 + 1_000_000) / 100));
        assert_eq!(h.max(), Duration::from_millis(1));
        assert_eq!(h.percentile(0.5), Duration::ZERO);
        assert_eq!(h.percentile(0.9), Duration::ZERO);
        assert_eq!(h.percentile(0.91), Duration::from_nanos(1023));
        assert_eq!(h.percentile(0.99), Duration::from_nanos(1023));
        // The top bucket's edge is above the max: the max it is.
        assert_eq!(h.percentile(1.0), Duration::from_millis(1));
        assert_eq!(
            h.buckets().collect::<Vec<_>>(),
            [
                (Duration::ZERO, 90),
                (Duration::from_nanos(1023), 9),
                (Duration::from_nanos(1_048_575), 1)
            ]
        );
        let empty = Recorder::new().snapshot();
        assert_eq!(empty.count(), 0);
        assert_eq!(empty.mean(), Duration::ZERO);
        assert_eq!(empty.percentile(0.5), Duration::ZERO);
    }

    #[test]
    fn the_longest_hold_keeps_the_max_with_its_site() {
        let s = LockStatState::new();
        let here = Location::caller();
        let t0 = Instant::now();
        let hold = HoldStat {
            site: here,
            since: t0,
            earlier_ns: 0,
            key: 0,
            wait_ns: 0,
        };
        let at = |ns| t0 + Duration::from_nanos(ns);
        assert_eq!(s.end_segment(&hold, Access::Read, at(50)), 50);
        assert_eq!(s.end_segment(&hold, Access::Write, at(300)), 300);
        assert_eq!(s.end_segment(&hold, Access::Read, at(100)), 100); // not the longest
        let stat = s.snapshot(LockStats::default());
        let longest = stat.longest_hold().unwrap();
        assert_eq!(longest.duration, Duration::from_nanos(300));
        assert_eq!(longest.access, Access::Write);
        assert_eq!(longest.location, here);
        assert_eq!(stat.read_hold().count(), 2);
        assert_eq!(stat.write_hold().count(), 1);
    }

    #[test]
    fn the_holder_slot_is_cleared_only_by_its_own_hold() {
        let s = LockStatState::new();
        let here = Location::caller();
        let hold = |key| HoldStat {
            site: here,
            since: Instant::now(),
            earlier_ns: 0,
            key,
            wait_ns: 0,
        };
        let old = hold(10);
        s.holder
            .write(|_| true, |slot| slot.set(here, 20, Access::Write));
        s.clear_holder(&old); // the next holder's slot: left alone
        assert_eq!(s.holder().unwrap().access, Access::Write);
        let new = hold(20);
        s.clear_holder(&new);
        assert!(s.holder().is_none());
    }

    /// With a clock coarser than the time between a release and the next acquire, both
    /// holds start at the same reading; the next holder's slot write may come before the
    /// previous holder's clear (a release runs its observers after the raw release).
    /// That clear must leave the next holder in the slot.
    #[test]
    fn a_coarse_clock_does_not_let_a_release_clear_the_next_holder() {
        let s = LockStatState::new();
        let here = Location::caller();
        let tick = Instant::now();
        // Both holds start at the same reading: a grant with that time for each.
        let grant = || {
            Some(Grant {
                wait_ns: 0,
                at: tick,
                site: here,
            })
        };
        let first = s.acquired(WaiterKind::Write, here, grant());
        let next = s.acquired(WaiterKind::Write, here, grant());
        assert_ne!(first.key, next.key);
        s.released(WaiterKind::Write, &first);
        let holder = s.holder().expect("the next holder is still in the slot");
        assert_eq!(holder.access, Access::Write);
        s.released(WaiterKind::Write, &next);
        assert!(s.holder().is_none());
        // And the same for the upgradable reader after a writer.
        let first = s.acquired(WaiterKind::Write, here, grant());
        let next = s.acquired(WaiterKind::UpgradableRead, here, grant());
        s.released(WaiterKind::Write, &first);
        assert_eq!(s.holder().unwrap().access, Access::UpgradableRead);
        s.released(WaiterKind::UpgradableRead, &next);
        assert!(s.holder().is_none());
    }

    #[test]
    fn the_table_has_every_row() {
        let s = LockStatState::new();
        s.read_wait.record(0);
        s.write_wait.record(2_000);
        s.write_contentions.fetch_add(1, Ordering::Relaxed);
        let text = s.snapshot(LockStats::default()).to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(
            lines[0].contains("count") && lines[0].contains("p99"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("read wait") && lines[1].contains(" 1 "),
            "{text}"
        );
        assert!(lines[3].starts_with("write wait"), "{text}");
        assert!(lines[3].contains("2.0µs"), "{text}");
        assert_eq!(lines[5], "longest hold: none yet");
    }
}
