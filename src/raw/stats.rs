//! Lock-event counters, named after the kernel's `lock_events_list.h` (`rwsem_*`).
//!
//! With the `stats` feature each lock counts its events per thread, as the kernel counts
//! them per CPU: each thread that uses the lock adds to a block of counters of its own
//! ([`Events`], in the lock's blocks of `crate::observe::per_thread`), with a load and a
//! store, and [`RwLock::stats`](crate::RwLock::stats) adds the blocks up. So counting an
//! event writes no cache line that another thread writes. Without the feature the
//! counters are a zero-sized type and every `lockevent!` compiles to nothing.

macro_rules! lock_events {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// A snapshot of one lock's event counters (feature `stats`).
        ///
        /// Each field counts events since the lock was created; the names follow the
        /// kernel's `rwsem_*` lock events. Each thread counts into a block of its own, and
        /// the snapshot adds the blocks up with relaxed loads, so a snapshot taken while
        /// the lock is in use is approximate, and exact once every task has finished with
        /// the lock (and the reading thread has synchronised with them, as joining them
        /// does).
        #[cfg(feature = "stats")]
        #[cfg_attr(docsrs, doc(cfg(feature = "stats")))]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub struct LockStats {
            $( $(#[$doc])* pub $name: u64, )*
        }

        #[cfg(feature = "stats")]
        impl LockStats {
            /// Every counter with its name (the field's), in declaration order: for
            /// printing or exporting without naming each field.
            ///
            /// ```
            /// use async_rwsem::RwLock;
            ///
            /// let lock = RwLock::new(0);
            /// drop(lock.try_read());
            /// let stats = lock.stats();
            /// let fast = stats.counters().find(|(name, _)| *name == "rlock_fast");
            /// assert_eq!(fast, Some(("rlock_fast", 0))); // try_read is not the fast path
            /// assert!(stats.counters().all(|(_, n)| n == 0));
            /// ```
            pub fn counters(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$( (stringify!($name), self.$name), )*].into_iter()
            }
        }

        /// One thread's counters of one lock's events (or the lock's shared ones), in its
        /// block (`crate::observe::per_thread::Block`).
        #[cfg(feature = "stats")]
        #[derive(Debug, Default)]
        pub(crate) struct Events {
            $( pub(crate) $name: std::sync::atomic::AtomicU64, )*
        }

        #[cfg(feature = "stats")]
        impl Events {
            pub(crate) const fn new() -> Self {
                Self { $( $name: std::sync::atomic::AtomicU64::new(0), )* }
            }

            /// Adds these counters into `stats` (the fold of a lock's blocks).
            pub(crate) fn fold_into(&self, stats: &mut LockStats) {
                $(
                    stats.$name = stats
                        .$name
                        .wrapping_add(self.$name.load(std::sync::atomic::Ordering::Relaxed));
                )*
            }
        }
    };
}

lock_events! {
    /// Read locks taken on the one-RMW fast path.
    rlock_fast,
    /// Read locks stolen on the slow path (no writer, no handoff pending).
    rlock_steal,
    /// Read locks taken by a spinning reader.
    rlock_spin,
    /// Readers that queued and went to sleep.
    sleep_reader,
    /// Readers granted the lock by a waker.
    wake_reader,
    /// Handoffs requested for a reader at the head of the queue (it lost a race for a
    /// released lock to a writer).
    rlock_handoff,
    /// Write locks taken on the one-CAS fast path.
    wlock_fast,
    /// Write locks taken while spinning (the kernel's `rwsem_opt_lock`).
    opt_lock,
    /// Spins that ran out of budget or met a waiter (`rwsem_opt_fail`).
    opt_fail,
    /// Writer spins skipped because the spin budget is zero (the policy's cap, or the
    /// learned budget between its probes) or another writer was spinning
    /// (`rwsem_opt_nospin`).
    opt_nospin,
    /// Write locks taken on the retry after a yield to the executor.
    wlock_yield,
    /// Writers that queued and went to sleep.
    sleep_writer,
    /// Queued writers woken to try for the lock.
    wake_writer,
    /// Write locks taken by a queued writer (woken, or granted under handoff).
    wlock_queued,
    /// Handoffs requested by or for a writer at the head of the queue (it lost a race
    /// after a wake-up, or waited past the timeout).
    wlock_handoff,
    /// Handoffs requested because running tasks passed the queue `Policy::pass_bound`
    /// times since its last turn (steals and spins won past queued waiters).
    pass_bound,
    /// Times the pass bound was reached with a parked thread (a blocking acquire) at the
    /// head: no handoff, the bound in count paused until the queue's next turn (the
    /// handoff timeout serves such a head).
    pass_bound_paused,
    /// Pending read acquires dropped while queued or granted-but-unpolled.
    rlock_cancel,
    /// Pending write acquires dropped while queued or granted-but-unpolled.
    wlock_cancel,
}

/// A lock's event counters: its blocks per thread.
#[cfg(feature = "stats")]
pub(crate) type Counters = crate::observe::per_thread::Blocks;

#[cfg(feature = "stats")]
impl Counters {
    /// The counters of every thread, added up.
    pub(crate) fn snapshot(&self) -> LockStats {
        let mut stats = LockStats::default();
        self.each(|block| block.events.fold_into(&mut stats));
        stats
    }
}

#[cfg(not(feature = "stats"))]
#[derive(Debug, Default)]
pub(crate) struct Counters;

#[cfg(not(feature = "stats"))]
impl Counters {
    pub(crate) const fn new() -> Self {
        Counters
    }
}

/// Counts one event on `$lock` (a `&RawRwLock`) when the `stats` feature is on: in the
/// calling thread's block of the lock's counters.
macro_rules! lockevent {
    ($lock:expr, $name:ident) => {{
        #[cfg(feature = "stats")]
        {
            $lock.stats.count(|events| &events.$name);
        }
    }};
}
pub(crate) use lockevent;
