//! The histograms of times: the recorder a lock writes ([`Recorder`]), and the snapshot
//! a user reads ([`Histogram`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::observe::per_thread::{add, raise};

/// Buckets of a histogram: bucket 0 holds zero, bucket `b >= 1` the times in
/// `[2^(b-1), 2^b)` ns, the last one everything from 2^46 ns (about 19.5 hours) up.
pub(super) const BUCKETS: usize = 48;

/// The bucket of a time of `ns` nanoseconds.
#[inline]
pub(super) fn bucket(ns: u64) -> usize {
    ((u64::BITS - ns.leading_zeros()) as usize).min(BUCKETS - 1)
}

/// The largest time bucket `b` holds, in nanoseconds.
pub(super) fn bucket_upper(b: usize) -> u64 {
    match b {
        0 => 0,
        b if b == BUCKETS - 1 => u64::MAX,
        b => (1u64 << b) - 1,
    }
}

/// One histogram of times, as a thread records it for a lock (in its
/// [`LocalBlock`](super::local::LocalBlock)): written by that thread alone (`owned`) with loads and
/// stores, or by anyone with read-modify-writes (the lock's shared block).
#[derive(Debug)]
pub(super) struct Recorder {
    pub(super) buckets: [AtomicU64; BUCKETS],
    pub(super) total_ns: AtomicU64,
    pub(super) max_ns: AtomicU64,
    /// Entries counted without a time (holds not sampled): in the count only.
    pub(super) untimed: AtomicU64,
}

impl Recorder {
    pub(super) const fn new() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            total_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            untimed: AtomicU64::new(0),
        }
    }

    /// Records a time of `ns`.
    #[inline]
    pub(super) fn record(&self, ns: u64, owned: bool) {
        add(&self.buckets[bucket(ns)], 1, owned);
        if ns != 0 {
            add(&self.total_ns, ns, owned);
            raise(&self.max_ns, ns, owned);
        }
    }

    /// Records a time of zero (an acquire that did not wait).
    #[inline]
    pub(super) fn record_zero(&self, owned: bool) {
        add(&self.buckets[0], 1, owned);
    }

    /// Adds this recorder's counts into `h` (the fold of a lock's blocks).
    pub(super) fn fold_into(&self, h: &mut Histogram) {
        for (sum, b) in h.buckets.iter_mut().zip(&self.buckets) {
            *sum = sum.wrapping_add(b.load(Ordering::Relaxed));
        }
        h.total_ns = h
            .total_ns
            .wrapping_add(self.total_ns.load(Ordering::Relaxed));
        h.max_ns = h.max_ns.max(self.max_ns.load(Ordering::Relaxed));
        h.untimed = h.untimed.wrapping_add(self.untimed.load(Ordering::Relaxed));
    }

    #[cfg(test)]
    pub(super) fn snapshot(&self) -> Histogram {
        let mut h = Histogram::empty();
        self.fold_into(&mut h);
        h
    }
}

/// A histogram of times: how many fell in each power-of-two bucket, their total and the
/// largest. Percentiles are read from the buckets, so they are upper bounds within a
/// factor of two (and never above [`max`](Self::max)); the count is exact, and the mean
/// and the max are exact over the times recorded (for the holds: the sampled ones, see
/// the [module documentation](crate::lock_stat)).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Histogram {
    pub(super) buckets: [u64; BUCKETS],
    pub(super) total_ns: u64,
    pub(super) max_ns: u64,
    pub(super) untimed: u64,
}

impl Histogram {
    /// Nothing recorded.
    pub(super) const fn empty() -> Self {
        Self {
            buckets: [0; BUCKETS],
            total_ns: 0,
            max_ns: 0,
            untimed: 0,
        }
    }

    /// How many entries were counted: exact, the ones whose time was not sampled too (see
    /// the [module documentation](crate::lock_stat) for which holds are timed).
    pub fn count(&self) -> u64 {
        self.timed() + self.untimed
    }

    /// How many of the entries have a time: every wait; the sampled holds. The mean and
    /// the percentiles are over these.
    pub fn timed(&self) -> u64 {
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
        match self.timed() {
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
        let count = self.timed();
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
