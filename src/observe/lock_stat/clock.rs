//! The two clocks of `lock_stat`, both in nanoseconds from the crate's clock epoch (its
//! first use), plus one: 0 means "no time".
//!
//! - [`now_ns`], the precise one: `Instant::now()`. For the waits, the sampled holds, the
//!   holds of a lock with a "held too long" threshold, and the wait records of queued
//!   waiters.
//! - [`coarse_ns`], the coarse one: a time that a thread of its own ("async-rwsem
//!   clock") stores every [`TICK`] into one atomic, as the kernel's jiffies. Reading it
//!   is one load of a cache line that changes once a tick: for the start of every hold
//!   that is not sampled (the exclusive holder's "since when" in
//!   [`RwLock::snapshot`](crate::RwLock::snapshot)) and the end of such a hold (its
//!   length, for the longest hold and the histogram's max). It is never ahead of the
//!   precise clock: a tick stores a reading of it.
//!
//! The ticking thread starts at the first coarse reading and stops (parks) once no thread
//! has renewed its lease for [`IDLE`]: a thread renews it (at most every [`RENEW`]) when
//! it samples a hold that did not wait (one in 256 per thread and mode), not in the common
//! path, which only reads the clock. A reading that finds the clock stopped (a thread
//! that takes locks more rarely than that) reads the precise clock instead, and restarts
//! it. Where no thread can be spawned (or under Miri), every coarse reading is
//! a precise one.
//!
//! Why not the TSC: on the 2-core AMD EPYC VM these were measured on, `rdtsc` cost
//! 23 ns and `Instant::now()` 45 to 68 ns (a loaded machine), while an uncontended
//! lock+unlock costs about 8 ns: a clock read on every hold cannot fit, whichever one.
//! The precise clock is read on one hold in 256 (and on contended acquires, which wait
//! anyway).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How often the coarse clock ticks.
pub(super) const TICK: Duration = Duration::from_millis(1);

/// The coarse clock stops after this long without a reading.
const IDLE: Duration = Duration::from_secs(1);

/// A thread renews the coarse clock's lease at most this often (ns).
pub(super) const RENEW: u64 = 100_000_000;

/// The crate's clock epoch.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `at` in nanoseconds from the epoch, plus one (0 is "no time").
#[inline]
pub(crate) fn epoch_ns(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_nanos())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// The precise clock: [`epoch_ns`] of now.
#[inline]
pub(crate) fn now_ns() -> u64 {
    epoch_ns(Instant::now())
}

/// The coarse clock's last tick; 0 while it does not tick.
static COARSE: AtomicU64 = AtomicU64::new(0);

/// When a thread last renewed the lease (a coarse reading).
static LEASE: AtomicU64 = AtomicU64::new(0);

/// The coarse clock (see the module documentation): at most a tick (and whatever the
/// ticking thread was kept from running) behind the precise one. `lease`: the calling
/// thread's last renewal of the lease, if it has a place for it.
#[inline]
pub(super) fn coarse_ns(lease: Option<&std::cell::Cell<u64>>) -> u64 {
    let t = COARSE.load(Relaxed);
    if t == 0 {
        return restart();
    }
    if let Some(lease) = lease {
        if t.wrapping_sub(lease.get()) > RENEW {
            lease.set(t);
            LEASE.store(t, Relaxed);
        }
    }
    t
}

/// The coarse clock's last tick, 0 if it is stopped (no restart: the caller reads
/// [`coarse_ns`] then).
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(super) fn coarse_ticking() -> u64 {
    COARSE.load(Relaxed)
}

/// The coarse clock is stopped (or never started): a precise reading, and the ticking
/// thread (re)started.
#[cold]
#[inline(never)]
fn restart() -> u64 {
    let now = now_ns();
    #[cfg(not(miri))]
    {
        LEASE.store(now, Relaxed);
        if let Some(ticker) = ticker() {
            if COARSE.compare_exchange(0, now, Relaxed, Relaxed).is_ok() {
                ticker.unpark();
            }
        }
    }
    now
}

/// The ticking thread, spawned on first use; `None` if it could not be.
#[cfg(not(miri))]
fn ticker() -> Option<&'static std::thread::Thread> {
    static TICKER: OnceLock<Option<std::thread::Thread>> = OnceLock::new();
    TICKER
        .get_or_init(|| {
            std::thread::Builder::new()
                .name(String::from("async-rwsem clock"))
                .spawn(tick)
                .ok()
                .map(|handle| handle.thread().clone())
        })
        .as_ref()
}

/// The ticking thread's loop: a tick, or a stop (park) once the lease has expired; a
/// reading that finds the clock stopped unparks it.
#[cfg(not(miri))]
fn tick() {
    let idle = u64::try_from(IDLE.as_nanos()).unwrap_or(u64::MAX);
    loop {
        std::thread::sleep(TICK);
        let now = now_ns();
        if now.saturating_sub(LEASE.load(Relaxed)) > idle {
            COARSE.store(0, Relaxed);
            // Until a reading finds it stopped (an unpark that came first returns at once).
            std::thread::park();
            continue;
        }
        COARSE.store(now, Relaxed);
    }
}
