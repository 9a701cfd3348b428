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
//! - Times are read with `Instant::now()`. **Exact**: every count (acquisitions,
//!   contentions, holds), every wait, and the times of write, upgradable and contended
//!   holds. **Sampled**: the times of read holds that did not wait, one in 64 per thread
//!   (the first one on each thread included), unless a "held too long" threshold is set
//!   (`Policy::warn_held_longer_than`, with `tracing`), which times every hold. So the
//!   read-hold histogram's [`count`](Histogram::count) is exact, and its mean,
//!   percentiles and max (and the longest hold) are over the
//!   [`timed`](Histogram::timed) ones.
//!
//! # What it costs
//!
//! Measured on a 2-core AMD EPYC VM (release, `bench/src/bin/observe_cost.rs`, medians of
//! 3 interleaved runs; `scripts/observe-cost.sh` runs the same with lockdep too):
//!
//! | | `read().await` + drop | `write().await` + drop | 8 tasks, one lock, tiny sections, 2 workers |
//! |---|---|---|---|
//! | without `lock_stat` | 11.8 ns | 6.9 ns | 10.1 M acquires/s |
//! | with `lock_stat` | 25.6 ns (2.2x) | 97 ns (14x) | 5.5 M acquires/s (0.57x) |
//!
//! - Time: an uncontended read, two relaxed adds (its wait and its hold counted) and a
//!   thread-local countdown; a write or upgradable read, two clock reads and the
//!   exclusive-holder slot (a CAS and a few stores); a contended acquire, one clock read
//!   when it starts to wait and one at the grant. With `tracing`, a release with a waiting
//!   threshold set and waiters queued takes the wait list's mutex briefly to read the
//!   head's wait.
//! - Memory, on 64-bit targets: 1,712 bytes more per lock (four histograms of 48 buckets,
//!   the counters and two slots), 48 bytes more per guard (where and when its hold
//!   began).
//!
//! ```text
//! for b in none lock_stat; do f=(); [ $b != none ] && f=(--features $b)
//!   CARGO_TARGET_DIR=target/observe-$b cargo build --release -p bench --bin observe_cost "${f[@]}"; done
//! for r in 1 2 3; do for b in none lock_stat; do
//!   target/observe-$b/release/observe_cost --secs 0.5 --iterations 1000000; done; done
//! ```

mod clock;
mod histogram;
mod local;
mod record;
mod report;
#[cfg(all(test, not(async_rwsem_loom)))]
mod tests;
#[cfg(feature = "tracing")]
pub(crate) mod warn;

use std::fmt;
use std::panic::Location;

pub(crate) use self::clock::now_ns;
pub use self::histogram::Histogram;
pub(crate) use self::record::{Grant, HoldStat, LockStatState};
pub use self::report::{Holder, LockStat, LongestHold};
use crate::raw::list::WaiterKind;

/// A call site, as `Location::caller` gives it.
type Site = &'static Location<'static>;

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
