//! Lock statistics with times (feature `lock_stat`): what the kernel's `/proc/lock_stat`
//! reports for a lock class, per lock here.
//!
//! Each lock records:
//!
//! - four log2 histograms of times: read wait, read hold, write wait, write hold;
//! - the acquires that had to take the slow path (contentions), readers and writers;
//! - the longest hold, with the location where its guard was taken;
//! - who holds the lock exclusively (a writer or the upgradable reader) and since when,
//!   for [`RwLock::snapshot`](crate::RwLock::snapshot).
//!
//! # Where it is kept
//!
//! As the kernel keeps `lock_stat` per CPU: the counters and histograms of a lock are kept
//! per thread, in a block that only that thread writes (plain loads and stores of relaxed
//! atomics, no read-modify-write), and [`RwLock::lock_stat`](crate::RwLock::lock_stat)
//! adds the blocks up. A thread finds its block through a small thread-local cache; the
//! first use of a lock on a thread allocates the block (1,664 bytes on 64-bit targets)
//! and takes the lock's list mutex once. When a thread exits, its blocks stay with their
//! locks, every count kept, and the next thread to use such a lock takes one over: a lock
//! has no more blocks than threads that used it at the same time. A hold released by a
//! thread whose thread-locals are already gone (a guard dropped in a thread-local's
//! destructor) goes into the lock's shared block, with read-modify-writes.
//!
//! The snapshot is read with relaxed loads: while the lock is in use it is approximate,
//! once every task is done with the lock (and the reading thread has synchronised with
//! them, as joining them does) it is exact.
//!
//! # What is counted where
//!
//! - **Acquisitions**: every acquire that gets the lock counts once in the wait histogram
//!   of its class, `try_` acquires and uncontended ones as a wait of zero (the fast path
//!   reads no clock for the wait). An acquire whose fast path failed counts as a
//!   contention, with the time from its first slow-path poll to the grant as its wait
//!   when that wait is timed (see **Sampled** below).
//! - **Holds**: a hold lasts from the acquire to the release, or to a mode change: a
//!   downgrade ends a write hold and starts a read hold, an upgrade ends a read hold and
//!   starts a write hold. So the hold histograms may count more holds than acquisitions.
//! - **Upgradable readers** are readers: their waits and holds are in the read rows. An
//!   upgrade is a write acquisition: its wait (while the other readers leave) is a write
//!   wait, and it is a write contention if it had to wait.
//! - **Exact**: every count (acquisitions, contentions, waits, holds), and every wait of
//!   zero (an acquire that did not wait).
//!   **Sampled**: the times of holds that did not wait, one in 256 per thread and mode
//!   (read or write, the first one on each thread included), timed with `Instant::now()`;
//!   the times of contended waits, one in 16 per thread and mode (the first one on each
//!   thread included), with the hold that follows each timed one. Every wait and hold of
//!   a lock with a "held too long" or "waited too long" threshold
//!   (`Policy::warn_held_longer_than`, `Policy::warn_waited_longer_than`, with
//!   `tracing`) is timed. So each histogram's [`count`](Histogram::count) is exact, and
//!   its mean, percentiles and max are over the [`timed`](Histogram::timed) ones (with
//!   the waits of zero). A wait or hold not timed is counted when the lock is taken (a
//!   timed hold when it ends). Why contended waits too: each timed one reads the precise
//!   clock three times (when it starts to wait, at the grant, at the release), two of
//!   them while it holds the lock; on a contended lock that lengthened the critical
//!   sections enough to cut its throughput by a third.
//! - **The coarse clock**: an exclusive hold (write or upgradable read) that is not timed
//!   takes its start from a clock that a thread of the crate ("async-rwsem clock") ticks
//!   every millisecond, as the kernel's jiffies (one load to read; the thread parks after a
//!   second without readers); its release reads it again. So the
//!   [`longest hold`](LockStat::longest_hold) includes every exclusive hold, measured
//!   within a tick (and however long the ticking thread was kept from running), and the
//!   snapshot's [`held_for`](Holder::held_for) is never short of the truth. Read holds
//!   not timed have no time: a long one that was not sampled is missing from the longest
//!   hold. A contended wait that is not timed takes its start from the coarse clock too,
//!   for the snapshot's [`head_waited`](crate::Snapshot::head_waited) (never short of the
//!   truth either).
//!
//! # What it costs
//!
//! Measured on a 2-core AMD EPYC VM (other sessions idle during the measurement),
//! release, `bench/src/bin/observe_cost.rs`, medians of 5 interleaved runs
//! (`BUILDS="none stats lock_stat lockdep" scripts/observe-cost.sh 5 1`, at `390ab48`;
//! `stats`: the event counters alone, which `lock_stat` builds on):
//!
//! | | `read().await` + drop | `write().await` + drop | 8 tasks, one lock, tiny sections, 2 workers | a lock per task, 2 workers / 1 |
//! |---|---|---|---|---|
//! | without observers | 5.6 ns | 4.9 ns | 5.27 M acquires/s | x1.72 |
//! | `stats` | 6.3 ns (1.12x) | 4.8 ns (0.98x) | 5.14 M acquires/s (0.98x) | x1.80 |
//! | `lock_stat` | 7.9 ns (1.41x) | 6.9 ns (1.41x) | 5.02 M acquires/s (0.95x) | x1.78 |
//!
//! (Before the blocks per thread, on a loaded machine: 3.38x, 8.14x and 0.49x.)
//!
//! - Time: an uncontended read, the thread-local cache, one add and a countdown at the
//!   acquire, nothing at the release (its guard keeps no record: the token is the lock's
//!   address with a bit set); a write or upgradable read, that, two loads of the coarse
//!   clock and the exclusive-holder slot (a few plain stores: exclusive holders follow
//!   one another, so no read-modify-write), and at the release the slot's start, the
//!   clock and the longest hold read back and compared, with no call; one hold in 256, two precise clock reads; a contended acquire, one precise
//!   clock read when it starts to wait, one at the grant and one at the release if its
//!   wait is one of the 16 timed, else a load of the coarse clock. No cache line is
//!   written by every acquire of every thread (the holder slot, on a line of its own, by
//!   every exclusive acquire; the longest hold only by a hold longer than all before
//!   it). With `tracing`, a release with a waiting threshold set and waiters queued
//!   takes the wait list's mutex briefly to read the head's wait.
//! - Memory, on 64-bit targets: 192 bytes more per lock and a block of 1,664 bytes per
//!   thread that uses it (four histograms of 48 buckets and the counters), a thread-local
//!   of about 550 bytes per thread, no more per borrowed guard (still two words: a timed
//!   hold's state is in a record of a per-thread pool), 16 bytes more per owned guard (32
//!   with `tracing`), and the ticking thread.

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
pub(crate) use self::local::{LocalBlock, LocalState};
pub(crate) use self::record::{wait_starts, Grant, HoldStat, LockStatState};
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
