//! The snapshot a user reads: [`LockStat`] (with its table), [`LongestHold`] and
//! [`Holder`].

use std::fmt;
use std::panic::Location;
use std::time::Duration;

use super::histogram::Histogram;
use super::Access;
use crate::raw::stats::LockStats;

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
    pub(super) read_wait: Histogram,
    pub(super) read_hold: Histogram,
    pub(super) write_wait: Histogram,
    pub(super) write_hold: Histogram,
    pub(super) read_contentions: u64,
    pub(super) write_contentions: u64,
    pub(super) longest_hold: Option<LongestHold>,
    pub(super) events: LockStats,
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
pub(super) fn short(d: Duration) -> String {
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
