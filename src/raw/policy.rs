//! The per-lock policy: how long a writer spins, how often it yields, when the head waiter
//! gets a handoff, how many readers one wake grants, and whether readers spin.

use std::time::Duration;

/// The most readers one wake-up grants at once (the kernel's `MAX_READERS_WAKEUP`).
pub const MAX_READER_WAKE_BATCH: usize = 256;

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
/// // lock to a starving waiter after 1 ms instead of the default.
/// static CONFIG: RwLock<u32> = RwLock::with_policy(
///     0,
///     Policy::new()
///         .writer_spin(Duration::from_micros(20))
///         .handoff_timeout(Duration::from_millis(1)),
/// );
/// # let _ = &CONFIG;
/// ```
///
/// See the crate documentation's "Choosing a policy" for what each knob buys and costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Policy {
    /// How long a writer that finds the lock held spins on the count word before it gives
    /// its worker thread back to the executor. `Duration::ZERO` disables spinning.
    ///
    /// When readers own the lock the budget grows with their number, as in the kernel
    /// (`10 us + 0.5 us` per reader there), up to two and a half times this value.
    pub writer_spin: Duration,
    /// How many times a writer that failed to spin yields to the executor (wakes itself and
    /// returns `Pending`) and tries again before it queues and sleeps.
    pub writer_yields: u32,
    /// How long the head of the wait queue may be passed over before the lock is handed to
    /// it: after this long, the next release grants the head the lock directly, and while
    /// it waits for that the handoff bit lets nobody else in. A head that was woken and
    /// lost the race for the lock gets the handoff at once, whatever the timeout.
    /// `Duration::MAX` disables every handoff (and with it the bound on unfairness);
    /// `Duration::ZERO` hands the lock to the head at every release, and no queued waiter
    /// passes another: first come, first served once a queue has formed, except that a
    /// task arriving in the instant between a release and its grant may take the free
    /// lock once (after which the head gets the handoff).
    pub handoff_timeout: Duration,
    /// How many queued readers one wake-up grants at once, in `1..=256`
    /// ([`MAX_READER_WAKE_BATCH`]); values outside are clamped when the lock is built.
    pub reader_wake_batch: usize,
    /// How long a reader that finds the lock write-locked spins, waiting for the writer to
    /// leave, before it queues. `Duration::ZERO` (the default) disables reader spinning,
    /// as the kernel has done since 5.11.
    pub reader_spin: Duration,
}

impl Policy {
    /// The defaults; see [`Policy::new`].
    pub const DEFAULT: Policy = Policy {
        writer_spin: Duration::from_micros(10),
        writer_yields: 1,
        handoff_timeout: Duration::from_millis(1),
        reader_wake_batch: MAX_READER_WAKE_BATCH,
        reader_spin: Duration::ZERO,
    };

    /// The default policy: writers spin up to 10 us (one at a time, only while nobody is
    /// queued) then yield once, the handoff timeout is 1 ms, a wake-up grants up to 256
    /// readers, readers do not spin.
    ///
    /// The handoff timeout was picked from the policy sweep of the `compare` example
    /// (`cargo run --release --example compare -- --sweep`): 1 ms kept the 240-writer
    /// case fair and the readers of the awaiting 8+8 case above a third of the operations,
    /// where the kernel's 4 ms did not. The README's *Performance* section has the
    /// figures; 10 us of writer spin is the kernel's figure.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::Policy;
    ///
    /// let p = Policy::new();
    /// assert_eq!(p.handoff_timeout, Duration::from_millis(1));
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

    /// The policy with every field brought into its valid range.
    pub(crate) const fn normalized(mut self) -> Self {
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
