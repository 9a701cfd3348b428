//! The per-lock policy: how long a writer spins, how often it yields, when the head waiter
//! gets a handoff, how many readers one wake grants, and whether readers spin.

use std::time::Duration;

/// The most readers one wake-up grants at once (the kernel's `MAX_READERS_WAKEUP`).
pub const MAX_READER_WAKE_BATCH: usize = 256;

/// The largest [`Policy::pass_bound`] short of none (`u32::MAX`): larger values are cut to
/// it.
const MAX_PASS_BOUND: u32 = 62;

/// How a [`RwLock`](crate::RwLock) trades throughput against fairness.
///
/// Every knob of the algorithm that the kernel hard-codes is a field here, so that a lock
/// can be tuned for its workload. Build one with [`Policy::new`] (the defaults) and the
/// builder methods, which are `const` so that a policy can be used in a `static` lock:
///
/// ```
/// use std::time::Duration;
/// use async_rwsem::{Policy, RwLock};
///
/// // A lock for short sections shared by many writers: spin a little longer, and hand the
/// // lock to a starving waiter after 100 us instead of the default 250 us.
/// static CONFIG: RwLock<u32> = RwLock::with_policy(
///     0,
///     Policy::new()
///         .writer_spin(Duration::from_micros(20))
///         .handoff_timeout(Duration::from_micros(100)),
/// );
/// # let _ = &CONFIG;
/// ```
///
/// See the crate documentation's "Choosing a policy" for what each knob buys and costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Policy {
    /// The most a writer that finds the lock held spins on the count word before it gives
    /// its worker thread back to the executor. `Duration::ZERO` disables writer spinning.
    ///
    /// Within this cap the lock learns the budget from how its writers' spins turn out
    /// (the crate documentation's *Adaptive spinning*): it stays near the sections' length
    /// while owners run, and falls to zero, with a short probe now and then, while spins
    /// run out (owners suspended in an `.await`, or worker threads descheduled). One
    /// writer spins at a time, past queued waiters, until a handoff is pending or the
    /// owner is a queued task granted the lock and not yet running.
    pub writer_spin: Duration,
    /// How many times a writer that failed to spin yields to the executor (wakes itself and
    /// returns `Pending`) and tries again before it queues and sleeps. A writer that finds
    /// readers inside (or a handoff pending) queues without yielding: readers keep joining
    /// a reader-owned lock until a writer queues, so a retry could not win, and the yield
    /// only made the writer wait a turn of the executor's whole run queue.
    pub writer_yields: u32,
    /// How long the head of the wait queue may be passed over before the lock is handed to
    /// it: after this long, the next release grants the head the lock directly, and while
    /// it waits for that the handoff bit lets nobody else in. A head that was woken and
    /// lost the race for the lock gets the handoff at once, whatever the timeout.
    /// `Duration::MAX` disables every handoff (and with it the bound on unfairness);
    /// `Duration::ZERO` hands the lock to the head at every release, and no queued waiter
    /// passes another (a grant of the queued readers stops at the first writer): first
    /// come, first served once a queue has formed, except that a
    /// task arriving in the instant between a release and its grant may take the free
    /// lock once (after which the head gets the handoff).
    ///
    /// It is also what a pass of queued writers by queued readers may cost: one that made
    /// its writer wait longer keeps the queue's order for the next 255 turns of queued
    /// writers, and every pass after those is timed until a thousand in a row were cheap
    /// (the crate documentation's *Passing that pays for itself*; a timeout over 65 ms
    /// never vetoes).
    pub handoff_timeout: Duration,
    /// How many queued readers one wake-up grants at once, in `1..=256`
    /// ([`MAX_READER_WAKE_BATCH`]); values outside are clamped when the lock is built.
    pub reader_wake_batch: usize,
    /// The most a reader that finds the lock write-locked spins, waiting for the writer to
    /// leave, before it queues; the budget within it is learned as for
    /// [`writer_spin`](Policy#structfield.writer_spin). `Duration::ZERO` disables reader
    /// spinning, as the kernel has done since 5.11.
    pub reader_spin: Duration,
    /// Whether the spin budgets are learned (the default) or always the caps
    /// (`writer_spin`, `reader_spin`), as fixed budgets: a spin then lasts its whole cap
    /// whatever the spins before it taught. A blocking acquire (`blocking_write` and the
    /// rest) spins its cap either way: a thread about to park has nothing else to run.
    pub adaptive_spin: bool,
    /// No arrival passes a non-empty queue: with waiters queued, no reader steals the lock
    /// (or spins for it) and no writer takes it (even while a woken head has not run yet);
    /// each queues behind them. Nor does a queued waiter pass another: a grant of the
    /// queued readers stops at the first writer (a pending writer holds back the readers
    /// queued after it). Off by default
    /// (stealing is where the throughput comes from, and the handoff bounds its
    /// unfairness); [`Policy::fifo`] turns it on with the rest of a strict order.
    pub strict_order: bool,
    /// How many times running tasks may pass a non-empty queue between two turns of the
    /// queue: a pass is a reader that steals the lock (or wins a spin) while a writer
    /// heads the queue, a writer that wins its spin past queued waiters, or a queued writer
    /// that takes the lock ahead of the head. At the bound the lock is handed to the head
    /// at its next release (as at the handoff timeout), so while anyone waits the queue
    /// gets at least one turn in `pass_bound + 1`, and the head's wait stays near
    /// `pass_bound + 1` times what a first-come-first-served queue would make it wait.
    /// The count restarts whenever the queue gets the lock. `0`: nobody passes a non-empty
    /// queue; `u32::MAX`: no bound in count (the handoff timeout alone bounds the passing).
    /// Values from 63 to `u32::MAX - 1` are cut to 62. With handoffs off (a
    /// `handoff_timeout` of `Duration::MAX`) no bound applies but zero's.
    pub pass_bound: u32,
    /// Whether a tokio runtime with more worker threads than the machine has cores
    /// (`available_parallelism`) gets a handoff at every release while readers are queued,
    /// as under a zero [`handoff_timeout`](Policy#structfield.handoff_timeout): while a
    /// task heads a queue that holds a reader, a release on such a runtime's thread grants
    /// the head the lock, the queued readers are granted in the queue's order (none passes
    /// a queued writer), and no writer spins past the queue. A queue of writers alone keeps
    /// the timed handoff and its spinners, and so does a release on any other thread (a
    /// thread outside tokio, a runtime with at most one worker per core) and a head that
    /// is a parked thread (a blocking acquire: its turn is a wake-up away, which is what
    /// the timed handoff is for). Each thread answers once, at its first contended acquire
    /// or release inside a runtime, and keeps the answer (feature `tokio`; without it, and
    /// with a `handoff_timeout` of zero or `Duration::MAX`, this does nothing). A writer
    /// task that queues while the rule holds reads no clock: its handoff timeout starts at
    /// the first release that finds it at the head after the rule has lapsed (the readers
    /// left the queue).
    ///
    /// On by default: where workers outnumber cores, a woken head's worker is often not
    /// running, and the passes made meanwhile cost the queue more than they give the
    /// passers, except among writers alone, whose spinners keep a lock of tiny sections
    /// busy while the woken head waits for its worker. On the 2-core machine of the
    /// repository's `docs/performance.md` ("Round nine" and "Round ten"), at 4 and 8
    /// workers, mixed (20% writes) ran at 0.87-0.93x tokio's throughput without the rule
    /// and 0.92-0.98x with it, its writers' p99 wait 1.4-1.6x tokio's without and
    /// 1.0-1.1x with it; 240 writers with sections of a few nanoseconds, whose spinners
    /// the rule leaves alone, ran at 0.98-1.08x tokio (0.81-0.86x when the handoff at every
    /// release applied to them too). Turn it off where passing queued readers is what your
    /// workload wants.
    pub crowded_handoff: bool,
    /// Dropping a guard that held the lock longer than this emits a `tracing` warning
    /// (features `lock_stat` and `tracing`; see
    /// [`warn_held_longer_than`](Policy::warn_held_longer_than)). `None` (the default):
    /// never.
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "lock_stat", feature = "tracing"))))]
    pub warn_held_longer_than: Option<Duration>,
    /// A waiter that has waited longer than this is reported with a `tracing` warning
    /// (features `lock_stat` and `tracing`; see
    /// [`warn_waited_longer_than`](Policy::warn_waited_longer_than)). `None` (the
    /// default): never.
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "lock_stat", feature = "tracing"))))]
    pub warn_waited_longer_than: Option<Duration>,
}

impl Policy {
    /// The defaults; see [`Policy::new`].
    pub const DEFAULT: Policy = Policy {
        writer_spin: Duration::from_micros(10),
        writer_yields: 1,
        handoff_timeout: Duration::from_micros(250),
        reader_wake_batch: MAX_READER_WAKE_BATCH,
        reader_spin: Duration::from_micros(10),
        adaptive_spin: true,
        strict_order: false,
        pass_bound: 1,
        crowded_handoff: true,
        #[cfg(all(feature = "lock_stat", feature = "tracing"))]
        warn_held_longer_than: None,
        #[cfg(all(feature = "lock_stat", feature = "tracing"))]
        warn_waited_longer_than: None,
    };

    /// The default policy: readers and writers spin for a learned budget of at most 10 us
    /// (writers one at a time, past the queue), writers behind a writer then yield once,
    /// the handoff timeout is 250 us, a wake-up grants up to 256 readers, arrivals may
    /// pass the queue once between two of its turns (`pass_bound` 1) and until the
    /// handoff timeout.
    ///
    /// The handoff timeout was picked from the policy sweep of the `compare` example
    /// (`cargo run --release -p bench -- --sweep`): 1 ms kept the 240-writer
    /// case fair and the readers of the awaiting 8+8 case above a third of the operations,
    /// where the kernel's 4 ms did not; 500 us then halved the tail wait of 240 writers
    /// with tiny sections and kept them fair, for a sixth of their throughput; and once
    /// writers that meet readers queue at once, 250 us brought that tail within 2x
    /// tokio's and shortened the mixed writers' by a third, with no loss of throughput
    /// beyond the noise. 10 us of spin is the kernel's writer figure; one yield measured
    /// better than none. The figures are in the repository's `docs/performance.md`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::Policy;
    ///
    /// let p = Policy::new();
    /// assert_eq!(p.handoff_timeout, Duration::from_micros(250));
    /// assert_eq!(p, Policy::default());
    /// ```
    pub const fn new() -> Self {
        Self::DEFAULT
    }

    /// Sets [`writer_spin`](Policy#structfield.writer_spin).
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// // Sections that always await: spinning cannot win, so do not.
    /// let lock = RwLock::with_policy((), Policy::new().writer_spin(Duration::ZERO));
    /// assert!(lock.policy().writer_spin.is_zero());
    /// ```
    #[must_use]
    pub const fn writer_spin(mut self, budget: Duration) -> Self {
        self.writer_spin = budget;
        self
    }

    /// Sets [`writer_yields`](Policy#structfield.writer_yields).
    ///
    /// ```
    /// use async_rwsem::Policy;
    ///
    /// // Queue at once instead of giving the executor a turn first.
    /// assert_eq!(Policy::new().writer_yields(0).writer_yields, 0);
    /// ```
    #[must_use]
    pub const fn writer_yields(mut self, yields: u32) -> Self {
        self.writer_yields = yields;
        self
    }

    /// Sets [`handoff_timeout`](Policy#structfield.handoff_timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::Policy;
    ///
    /// let fair = Policy::new().handoff_timeout(Duration::ZERO); // the head at every release
    /// let greedy = Policy::new().handoff_timeout(Duration::from_millis(16));
    /// assert!(fair.handoff_timeout < greedy.handoff_timeout);
    /// ```
    #[must_use]
    pub const fn handoff_timeout(mut self, timeout: Duration) -> Self {
        self.handoff_timeout = timeout;
        self
    }

    /// Sets [`reader_wake_batch`](Policy#structfield.reader_wake_batch), clamped to
    /// `1..=256`.
    ///
    /// ```
    /// use async_rwsem::Policy;
    ///
    /// assert_eq!(Policy::new().reader_wake_batch(32).reader_wake_batch, 32);
    /// assert_eq!(Policy::new().reader_wake_batch(0).reader_wake_batch, 1);
    /// assert_eq!(Policy::new().reader_wake_batch(1000).reader_wake_batch, 256);
    /// ```
    #[must_use]
    pub const fn reader_wake_batch(mut self, batch: usize) -> Self {
        self.reader_wake_batch = batch;
        self.normalized()
    }

    /// Sets [`reader_spin`](Policy#structfield.reader_spin).
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::Policy;
    ///
    /// // Short mixed sections: let readers wait a little for a writer to leave.
    /// let p = Policy::new().reader_spin(Duration::from_micros(5));
    /// assert_eq!(p.reader_spin, Duration::from_micros(5));
    /// ```
    #[must_use]
    pub const fn reader_spin(mut self, budget: Duration) -> Self {
        self.reader_spin = budget;
        self
    }

    /// A strict first-come-first-served order, as `tokio::sync::RwLock` keeps it: every
    /// acquire that has returned `Pending` keeps its place in the queue, a pending writer
    /// holds back the readers that come after it, and no arrival passes a non-empty queue.
    ///
    /// It is the default policy with [`strict_order`](Policy#structfield.strict_order)
    /// on, a zero [`handoff_timeout`](Policy#structfield.handoff_timeout) (the head gets
    /// the lock at every release) and no writer yields (a writer's first `Pending` queues
    /// it). Acquires that need not wait still take the fast paths, and a task that finds
    /// the lock held with nobody queued may still spin for it. What the order costs in
    /// throughput is in the repository's `docs/performance.md`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// let lock = RwLock::with_policy(0, Policy::fifo());
    /// assert!(lock.policy().strict_order);
    /// assert_eq!(lock.policy().handoff_timeout, Duration::ZERO);
    /// ```
    pub const fn fifo() -> Self {
        Self::new()
            .strict_order(true)
            .handoff_timeout(Duration::ZERO)
            .writer_yields(0)
            .pass_bound(0)
    }

    /// Sets [`pass_bound`](Policy#structfield.pass_bound).
    ///
    /// ```
    /// use async_rwsem::Policy;
    ///
    /// // Let running tasks pass the queue up to four times between its turns.
    /// assert_eq!(Policy::new().pass_bound(4).pass_bound, 4);
    /// // No bound in count: only the handoff timeout bounds the passing.
    /// assert_eq!(Policy::new().pass_bound(u32::MAX).pass_bound, u32::MAX);
    /// ```
    #[must_use]
    pub const fn pass_bound(mut self, passes: u32) -> Self {
        self.pass_bound = passes;
        self.normalized()
    }

    /// Sets [`crowded_handoff`](Policy#structfield.crowded_handoff).
    ///
    /// ```
    /// use async_rwsem::Policy;
    ///
    /// // The timed handoff on every runtime, however many workers it has.
    /// assert!(!Policy::new().crowded_handoff(false).crowded_handoff);
    /// assert!(Policy::new().crowded_handoff);
    /// ```
    #[must_use]
    pub const fn crowded_handoff(mut self, on: bool) -> Self {
        self.crowded_handoff = on;
        self
    }

    /// Sets [`strict_order`](Policy#structfield.strict_order).
    ///
    /// ```
    /// use async_rwsem::Policy;
    ///
    /// assert!(Policy::new().strict_order(true).strict_order);
    /// ```
    #[must_use]
    pub const fn strict_order(mut self, strict: bool) -> Self {
        self.strict_order = strict;
        self
    }

    /// Sets [`adaptive_spin`](Policy#structfield.adaptive_spin).
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::Policy;
    ///
    /// // Always spin the full 2 us, whatever earlier spins taught.
    /// let p = Policy::new().reader_spin(Duration::from_micros(2)).adaptive_spin(false);
    /// assert!(!p.adaptive_spin);
    /// ```
    #[must_use]
    pub const fn adaptive_spin(mut self, adaptive: bool) -> Self {
        self.adaptive_spin = adaptive;
        self
    }

    /// Warns when a guard of the lock is dropped after holding it longer than `limit`
    /// (features `lock_stat` and `tracing`): a `tracing::warn!` event of target
    /// `async_rwsem::lock_stat`, message `held the lock too long`, with the fields
    /// `location` (where the guard was taken), `access` (`read`, `upgradable read` or
    /// `write`), `held_us` and `lock` (the lock's address). The hold is the guard's whole
    /// life, across downgrades and upgrades. Emitted after the release: the lock is free
    /// by then, whatever the subscriber does.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// let lock = RwLock::with_policy(0, Policy::new().warn_held_longer_than(Duration::from_millis(10)));
    /// assert_eq!(lock.policy().warn_held_longer_than, Some(Duration::from_millis(10)));
    /// ```
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "lock_stat", feature = "tracing"))))]
    #[must_use]
    pub const fn warn_held_longer_than(mut self, limit: Duration) -> Self {
        self.warn_held_longer_than = Some(limit);
        self
    }

    /// Reports acquires that wait longer than `limit` (features `lock_stat` and
    /// `tracing`), with `tracing::warn!` events of target `async_rwsem::lock_stat`:
    ///
    /// - `waiting too long for the lock`, when a holder releases the lock and the head of
    ///   the queue, still waiting after that release, has waited past `limit` (once per
    ///   waiter): `location` and `access` are the waiter's, `waited_us` its wait so far,
    ///   `holder` and `holder_access` the releasing holder's (a waiter that the release
    ///   itself grants the lock is reported at its grant only);
    /// - `waited too long for the lock`, when such an acquire finally gets the lock:
    ///   `location` (the acquire's call; for an upgrade, the `upgrade` call), `access` and
    ///   `waited_us` (its whole wait).
    ///
    /// Both are emitted where the lock is consistent (after the release; once the new
    /// guard exists), so a panicking subscriber leaves the lock usable. With a limit set,
    /// a release that leaves waiters queued takes the wait list's mutex briefly, to read
    /// the head's wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::{Policy, RwLock};
    ///
    /// let policy = Policy::new().warn_waited_longer_than(Duration::from_millis(50));
    /// assert_eq!(policy.warn_waited_longer_than, Some(Duration::from_millis(50)));
    /// # drop(RwLock::with_policy((), policy));
    /// ```
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[cfg_attr(docsrs, doc(cfg(all(feature = "lock_stat", feature = "tracing"))))]
    #[must_use]
    pub const fn warn_waited_longer_than(mut self, limit: Duration) -> Self {
        self.warn_waited_longer_than = Some(limit);
        self
    }

    /// The policy with every field brought into its valid range.
    pub(crate) const fn normalized(mut self) -> Self {
        if self.pass_bound > MAX_PASS_BOUND && self.pass_bound != u32::MAX {
            self.pass_bound = MAX_PASS_BOUND;
        }
        if self.reader_wake_batch == 0 {
            self.reader_wake_batch = 1;
        } else if self.reader_wake_batch > MAX_READER_WAKE_BATCH {
            self.reader_wake_batch = MAX_READER_WAKE_BATCH;
        }
        self
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A [`Policy`] as a lock stores it: 16 bytes instead of 64, since every lock carries one.
///
/// Spin caps are kept to the nanosecond up to 4.29 s (longer caps are cut there); the
/// handoff timeout to the nanosecond up to 2.1 s, to the microsecond up to 35 minutes
/// (longer ones are cut there; `Duration::MAX`, never, is kept); `writer_yields` up to
/// 32,767. [`RwLock::policy`](crate::RwLock::policy) gives back what is stored.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StoredPolicy {
    writer_spin_ns: u32,
    reader_spin_ns: u32,
    handoff: u32,
    writer_yields: u16,
    /// `reader_wake_batch - 1`.
    reader_wake_batch: u8,
    /// [`ADAPTIVE_SPIN`] and [`STRICT_ORDER`] in the low two bits, the pass bound in the
    /// six above them ([`PASS_UNBOUNDED`] for none).
    flags: u8,
    /// The warning thresholds in nanoseconds, `u64::MAX` for none (features `lock_stat`
    /// and `tracing`).
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    warn_held_ns: u64,
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    warn_waited_ns: u64,
}

/// `StoredPolicy::flags`: `Policy::adaptive_spin`.
const ADAPTIVE_SPIN: u8 = 0b01;
/// `StoredPolicy::flags`: `Policy::strict_order`.
const STRICT_ORDER: u8 = 0b10;

/// `StoredPolicy::flags`: shift of the pass bound.
const PASS_SHIFT: u32 = 2;
/// The stored pass bound of `u32::MAX` (no bound in count).
const PASS_UNBOUNDED: u8 = 0b11_1111;

/// `StoredPolicy::writer_yields`: `Policy::crowded_handoff`, above the yields.
const CROWDED_HANDOFF: u16 = 0b1000_0000_0000_0000;
/// The most writer yields stored (the bits below [`CROWDED_HANDOFF`]).
const MAX_WRITER_YIELDS: u16 = 0b0111_1111_1111_1111;

/// `handoff` value of `Duration::MAX` (no handoff).
const HANDOFF_NEVER: u32 = u32::MAX;
/// `handoff` flag: the rest is microseconds, not nanoseconds.
const HANDOFF_MICROS: u32 = 1 << 31;

impl StoredPolicy {
    pub(crate) const fn new(policy: Policy) -> Self {
        let policy = policy.normalized();
        Self {
            writer_spin_ns: saturating_nanos(policy.writer_spin),
            reader_spin_ns: saturating_nanos(policy.reader_spin),
            handoff: encode_handoff(policy.handoff_timeout),
            writer_yields: if policy.writer_yields > MAX_WRITER_YIELDS as u32 {
                MAX_WRITER_YIELDS
            } else {
                policy.writer_yields as u16
            } | if policy.crowded_handoff {
                CROWDED_HANDOFF
            } else {
                0
            },
            reader_wake_batch: (policy.reader_wake_batch - 1) as u8,
            flags: if policy.adaptive_spin {
                ADAPTIVE_SPIN
            } else {
                0
            } | if policy.strict_order { STRICT_ORDER } else { 0 }
                | (if policy.pass_bound == u32::MAX {
                    PASS_UNBOUNDED
                } else {
                    policy.pass_bound as u8
                }) << PASS_SHIFT,
            #[cfg(all(feature = "lock_stat", feature = "tracing"))]
            warn_held_ns: threshold_ns(policy.warn_held_longer_than),
            #[cfg(all(feature = "lock_stat", feature = "tracing"))]
            warn_waited_ns: threshold_ns(policy.warn_waited_longer_than),
        }
    }

    /// The policy as stored.
    pub(crate) fn policy(&self) -> Policy {
        Policy {
            writer_spin: self.writer_spin(),
            writer_yields: self.writer_yields(),
            handoff_timeout: self.handoff_timeout(),
            reader_wake_batch: self.reader_wake_batch(),
            reader_spin: self.reader_spin(),
            adaptive_spin: self.adaptive_spin(),
            strict_order: self.strict_order(),
            pass_bound: self.pass_bound().unwrap_or(u32::MAX),
            crowded_handoff: self.crowded_handoff(),
            #[cfg(all(feature = "lock_stat", feature = "tracing"))]
            warn_held_longer_than: threshold(self.warn_held_ns),
            #[cfg(all(feature = "lock_stat", feature = "tracing"))]
            warn_waited_longer_than: threshold(self.warn_waited_ns),
        }
    }

    /// [`Policy::warn_held_longer_than`] in nanoseconds (`u64::MAX`: none).
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[inline]
    pub(crate) fn warn_held_ns(&self) -> u64 {
        self.warn_held_ns
    }

    /// [`Policy::warn_waited_longer_than`] in nanoseconds (`u64::MAX`: none).
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[inline]
    pub(crate) fn warn_waited_ns(&self) -> u64 {
        self.warn_waited_ns
    }

    /// The learned spin budgets are used (else the caps).
    #[inline]
    pub(crate) fn adaptive_spin(&self) -> bool {
        self.flags & ADAPTIVE_SPIN != 0
    }

    /// No arrival passes a non-empty queue.
    #[inline]
    pub(crate) fn strict_order(&self) -> bool {
        self.flags & STRICT_ORDER != 0
    }

    /// The most passes of a non-empty queue between two of its turns; `None`: no bound in
    /// count.
    #[inline]
    pub(crate) fn pass_bound(&self) -> Option<u32> {
        let bound = self.flags >> PASS_SHIFT;
        (bound != PASS_UNBOUNDED).then_some(u32::from(bound))
    }

    /// May running tasks pass a non-empty queue at all? Not under a strict order, nor
    /// with a pass bound of zero.
    #[inline]
    pub(crate) fn may_pass_queue(&self) -> bool {
        !self.strict_order() && self.flags >> PASS_SHIFT != 0
    }

    #[inline]
    pub(crate) fn writer_spin(&self) -> Duration {
        Duration::from_nanos(u64::from(self.writer_spin_ns))
    }

    #[inline]
    pub(crate) fn reader_spin(&self) -> Duration {
        Duration::from_nanos(u64::from(self.reader_spin_ns))
    }

    #[inline]
    pub(crate) fn writer_yields(&self) -> u32 {
        u32::from(self.writer_yields & MAX_WRITER_YIELDS)
    }

    /// A handoff at every release on a crowded runtime's threads
    /// ([`Policy::crowded_handoff`]), with a timed handoff: the rule applies.
    #[inline]
    pub(crate) fn crowded_handoff(&self) -> bool {
        self.writer_yields & CROWDED_HANDOFF != 0
    }

    #[inline]
    pub(crate) fn reader_wake_batch(&self) -> usize {
        usize::from(self.reader_wake_batch) + 1
    }

    /// `Duration::MAX`: no handoff ever.
    #[inline]
    pub(crate) fn handoff_never(&self) -> bool {
        self.handoff == HANDOFF_NEVER
    }

    /// Zero: the head is handed the lock at every release.
    #[inline]
    pub(crate) fn handoff_always(&self) -> bool {
        self.handoff == 0
    }

    /// Is the handoff timeout a time to wait (neither zero nor `Duration::MAX`)? Then a
    /// queued writer records when it is due.
    #[inline]
    pub(crate) fn handoff_timed(&self) -> bool {
        self.handoff != 0 && self.handoff != HANDOFF_NEVER
    }

    pub(crate) fn handoff_timeout(&self) -> Duration {
        match self.handoff {
            HANDOFF_NEVER => Duration::MAX,
            h if h & HANDOFF_MICROS != 0 => Duration::from_micros(u64::from(h & !HANDOFF_MICROS)),
            h => Duration::from_nanos(u64::from(h)),
        }
    }
}

/// A warning threshold as stored: nanoseconds, cut at `u64::MAX - 1` (584 years);
/// `u64::MAX` for none.
#[cfg(all(feature = "lock_stat", feature = "tracing"))]
const fn threshold_ns(limit: Option<Duration>) -> u64 {
    match limit {
        None => u64::MAX,
        Some(d) => {
            let nanos = d.as_nanos();
            if nanos >= u64::MAX as u128 {
                u64::MAX - 1
            } else {
                nanos as u64
            }
        }
    }
}

/// The threshold back from [`threshold_ns`].
#[cfg(all(feature = "lock_stat", feature = "tracing"))]
const fn threshold(ns: u64) -> Option<Duration> {
    if ns == u64::MAX {
        None
    } else {
        Some(Duration::from_nanos(ns))
    }
}

const fn saturating_nanos(d: Duration) -> u32 {
    let nanos = d.as_nanos();
    if nanos > u32::MAX as u128 {
        u32::MAX
    } else {
        nanos as u32
    }
}

const fn encode_handoff(d: Duration) -> u32 {
    if d.as_secs() == u64::MAX && d.subsec_nanos() == 999_999_999 {
        return HANDOFF_NEVER;
    }
    let nanos = d.as_nanos();
    if nanos < HANDOFF_MICROS as u128 {
        return nanos as u32;
    }
    let micros = d.as_micros();
    // The largest microsecond value that stays clear of `HANDOFF_NEVER`.
    let most = (HANDOFF_NEVER & !HANDOFF_MICROS) as u128 - 1;
    HANDOFF_MICROS
        | if micros > most {
            most as u32
        } else {
            micros as u32
        }
}

#[cfg(all(test, not(async_rwsem_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_stored_policy_gives_back_what_it_was_given() {
        let policies = [
            Policy::new(),
            Policy::new()
                .writer_spin(Duration::ZERO)
                .reader_spin(Duration::from_nanos(1))
                .writer_yields(0)
                .handoff_timeout(Duration::ZERO)
                .reader_wake_batch(1),
            Policy::new()
                .writer_spin(Duration::from_secs(4))
                .writer_yields(32_767)
                .crowded_handoff(false)
                .handoff_timeout(Duration::MAX)
                .reader_wake_batch(256)
                .adaptive_spin(false)
                .strict_order(true)
                .pass_bound(u32::MAX),
            Policy::fifo(),
            Policy::new().pass_bound(0),
            Policy::new().pass_bound(62),
            Policy::new().handoff_timeout(Duration::from_nanos(2_147_483_647)),
            Policy::new().handoff_timeout(Duration::from_secs(60)),
        ];
        for policy in policies {
            assert_eq!(StoredPolicy::new(policy).policy(), policy);
        }
    }

    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[test]
    fn the_warning_thresholds_are_kept() {
        let policy = Policy::new()
            .warn_held_longer_than(Duration::from_micros(1500))
            .warn_waited_longer_than(Duration::ZERO);
        let stored = StoredPolicy::new(policy);
        assert_eq!(stored.policy(), policy);
        assert_eq!(stored.warn_held_ns(), 1_500_000);
        assert_eq!(stored.warn_waited_ns(), 0);
        let none = StoredPolicy::new(Policy::new());
        assert_eq!(
            (none.warn_held_ns(), none.warn_waited_ns()),
            (u64::MAX, u64::MAX)
        );
        assert_eq!(none.policy().warn_held_longer_than, None);
        // Past what `u64` nanoseconds hold: cut, not "never".
        let huge = StoredPolicy::new(Policy::new().warn_held_longer_than(Duration::MAX));
        assert_eq!(huge.warn_held_ns(), u64::MAX - 1);
    }

    #[test]
    fn out_of_range_values_are_cut_at_the_documented_limits() {
        let stored = StoredPolicy::new(
            Policy::new()
                .writer_spin(Duration::from_secs(10))
                .writer_yields(1_000_000)
                .handoff_timeout(Duration::from_secs(3 * 3600))
                .reader_wake_batch(1000),
        )
        .policy();
        assert_eq!(
            stored.writer_spin,
            Duration::from_nanos(u64::from(u32::MAX))
        );
        assert_eq!(stored.writer_yields, 32_767);
        assert_eq!(stored.reader_wake_batch, 256);
        assert_eq!(Policy::new().pass_bound(63).pass_bound, 62);
        assert_eq!(Policy::new().pass_bound(u32::MAX - 1).pass_bound, 62);
        let most = Duration::from_micros(u64::from((HANDOFF_NEVER & !HANDOFF_MICROS) - 1));
        assert_eq!(stored.handoff_timeout, most);
        assert!(most > Duration::from_secs(35 * 60));
        // Sub-microsecond parts of long timeouts are dropped.
        let long = Duration::from_secs(3) + Duration::from_nanos(999);
        let stored = StoredPolicy::new(Policy::new().handoff_timeout(long)).policy();
        assert_eq!(stored.handoff_timeout, Duration::from_secs(3));
    }
}
