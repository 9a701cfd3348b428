//! The one place the crate takes its atomics, its mutex and its `UnsafeCell` from.
//!
//! In the loom models (`cfg(all(test, async_rwsem_loom))`) they come from `loom`, which
//! explores every interleaving of the models in `src/raw/tests/loom_*.rs`; otherwise from
//! `std`. Nothing else in the crate names `std::sync::atomic` or `std::cell::UnsafeCell`
//! directly, so a model checks the code that ships, with two exceptions: the `stats`
//! feature's event counters (`raw/stats.rs`) and the `lock_stat` feature's histograms and
//! slots (`lock_stat.rs`) are `std` atomics under every cfg, since they order nothing of
//! the lock's (relaxed counts and diagnostics, read only by `RwLock::stats`,
//! `RwLock::lock_stat` and `RwLock::snapshot`).
//!
//! The lock's clock comes from here too ([`Clock`], [`Instant`]): the real one
//! (`std::time::Instant`) in the code that ships, a logical one in the models, where time
//! is an input of the model like the interleavings. A model's branches must not depend on
//! how fast the machine runs (loom replays each execution and stops with "Reached
//! unexpected exploration state" if one takes another branch), and the handoff's "has the
//! head waited past the timeout?" must be explored both ways. The spins are bounded by
//! rounds in the models instead (`SpinClock` in `raw/mod.rs`), so that no model spins for
//! ever on a clock that only it could advance.

#[cfg(all(test, async_rwsem_loom))]
pub(crate) use self::logical_clock::{Clock, Instant};
#[cfg(not(all(test, async_rwsem_loom)))]
pub(crate) use self::std_clock::{Clock, Instant};

#[cfg(all(test, async_rwsem_loom))]
pub(crate) use loom::{
    cell::UnsafeCell,
    hint::spin_loop,
    sync::{
        atomic::{AtomicU32, AtomicU8, AtomicUsize},
        Mutex, MutexGuard,
    },
};

#[cfg(not(all(test, async_rwsem_loom)))]
pub(crate) use self::std_cell::UnsafeCell;
#[cfg(not(all(test, async_rwsem_loom)))]
pub(crate) use std::{
    hint::spin_loop,
    sync::{
        atomic::{AtomicU32, AtomicU8, AtomicUsize},
        Mutex, MutexGuard,
    },
};

#[cfg(not(all(test, async_rwsem_loom)))]
mod std_cell {
    /// `std::cell::UnsafeCell` with loom's closure-based access API, so that the same code
    /// compiles against both.
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T: ?Sized>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        pub(crate) fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    impl<T: ?Sized> UnsafeCell<T> {
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

/// Locks a `Mutex` whose critical sections never panic; a poisoned guard is taken as is.
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A raw pointer to the contents of `cell`, for guards that outlive a closure: the write
/// guard's (loom records a write access). Beyond the call loom does not track the access;
/// the models track the data with cells of their own.
#[inline(always)]
pub(crate) fn cell_ptr<T: ?Sized>(cell: &UnsafeCell<T>) -> *mut T {
    cell.with_mut(|ptr| ptr)
}

/// As [`cell_ptr`], for shared access (a read guard: loom records a read access).
#[inline(always)]
pub(crate) fn cell_ptr_shared<T: ?Sized>(cell: &UnsafeCell<T>) -> *mut T {
    cell.with(|ptr| ptr.cast_mut())
}

/// The lock's clock in the code that ships: `std::time::Instant`. Zero-sized.
#[cfg(not(all(test, async_rwsem_loom)))]
mod std_clock {
    use std::time::Duration;

    pub(crate) use std::time::Instant;

    /// The clock of one lock: reads `Instant::now()` (see the logical clock of the loom
    /// models, whose methods these are).
    #[derive(Debug)]
    pub(crate) struct Clock;

    impl Clock {
        #[inline(always)]
        pub(crate) const fn new() -> Self {
            Self
        }

        /// Now.
        #[inline(always)]
        pub(crate) fn now(&self) -> Instant {
            Instant::now()
        }

        /// How long since `earlier` (the contention events of `tracing`).
        #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
        #[inline(always)]
        pub(crate) fn elapsed(&self, earlier: Instant) -> Duration {
            earlier.elapsed()
        }

        /// `after` from now (`None` if an `Instant` cannot hold it).
        #[inline(always)]
        pub(crate) fn deadline(&self, after: Duration) -> Option<Instant> {
            Instant::now().checked_add(after)
        }

        /// Is it `deadline` or later?
        #[inline(always)]
        pub(crate) fn reached(&self, deadline: Instant) -> bool {
            Instant::now() >= deadline
        }

        /// Microseconds since this process first asked, cut to 32 bits: for intervals
        /// kept in a few bits of a word (the pass check of `raw::wake`), which take their
        /// differences with wrapping arithmetic.
        #[inline]
        pub(crate) fn micros(&self) -> u32 {
            static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            let epoch = *EPOCH.get_or_init(Instant::now);
            // Truncation intended: only differences of readings are used.
            #[allow(clippy::cast_possible_truncation)]
            let micros = epoch.elapsed().as_micros() as u32;
            micros
        }
    }
}

/// The lock's clock in the loom models: logical time, which the model advances.
///
/// Each lock has a clock of its own: a loom `AtomicU64` of nanoseconds since the lock was
/// made, which nothing but a model's [`Clock::advance`] moves (a section that "takes"
/// that long, a task that sleeps). The lock reads it with relaxed loads and the model
/// advances it with relaxed adds, so that the clock orders nothing of the lock's (no
/// happens-before that the lock's own atomics do not make) and loom explores every place
/// an advance can fall relative to the lock's reads: before a writer's queue time, between
/// it and a release's "is the head due?", after it. Time is monotonic for every thread
/// (the loads of one location are coherent), and every execution is deterministic. A model
/// that never advances its lock's clock runs with time standing still: no handoff timeout
/// (other than zero) ever expires there.
#[cfg(all(test, async_rwsem_loom))]
mod logical_clock {
    use std::sync::atomic::Ordering::Relaxed;
    use std::time::Duration;

    /// A reading of a logical [`Clock`]: nanoseconds since its lock was made.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    pub(crate) struct Instant(u64);

    impl Instant {
        /// As `std::time::Instant::saturating_duration_since`.
        pub(crate) fn saturating_duration_since(self, earlier: Instant) -> Duration {
            Duration::from_nanos(self.0.saturating_sub(earlier.0))
        }

        /// As `std::time::Instant::checked_sub`.
        pub(crate) fn checked_sub(self, by: Duration) -> Option<Instant> {
            let by = u64::try_from(by.as_nanos()).ok()?;
            self.0.checked_sub(by).map(Instant)
        }
    }

    /// The logical clock of one lock (see the module documentation), and what the models
    /// count of the lock's timed decisions.
    #[derive(Debug)]
    pub(crate) struct Clock {
        now: loom::sync::atomic::AtomicU64,
        /// Head writers granted the lock at a release because they had waited past the
        /// handoff timeout (`wake_writer`). A `std` atomic, invisible to loom: read by the
        /// models after an execution, to show that the path was explored.
        timed_grants: std::sync::atomic::AtomicUsize,
        /// Those of `timed_grants` whose head had been woken before (to compete, at an
        /// earlier release) and not yet polled since.
        woken_timed_grants: std::sync::atomic::AtomicUsize,
        /// Answers "due" of the handoff timeout (`timed_out`) that the clock gave, under a
        /// timeout neither zero nor `Duration::MAX`. As `timed_grants`.
        dues: std::sync::atomic::AtomicUsize,
    }

    impl Clock {
        pub(crate) fn new() -> Self {
            Self {
                now: loom::sync::atomic::AtomicU64::new(0),
                timed_grants: std::sync::atomic::AtomicUsize::new(0),
                woken_timed_grants: std::sync::atomic::AtomicUsize::new(0),
                dues: std::sync::atomic::AtomicUsize::new(0),
            }
        }

        /// Now: one relaxed load, which loom may answer with any time the clock has shown
        /// since the last one this thread saw (time never runs backwards for a thread).
        pub(crate) fn now(&self) -> Instant {
            Instant(self.now.load(Relaxed))
        }

        /// How long since `earlier` (zero if this thread still sees an earlier time).
        pub(crate) fn elapsed(&self, earlier: Instant) -> Duration {
            self.now().saturating_duration_since(earlier)
        }

        /// `after` from now (`None` past what the clock counts).
        pub(crate) fn deadline(&self, after: Duration) -> Option<Instant> {
            let after = u64::try_from(after.as_nanos()).ok()?;
            self.now().0.checked_add(after).map(Instant)
        }

        /// Is it `deadline` or later?
        pub(crate) fn reached(&self, deadline: Instant) -> bool {
            self.now() >= deadline
        }

        /// Microseconds of the model's time, cut to 32 bits (as the shipped clock's).
        pub(crate) fn micros(&self) -> u32 {
            // Truncation intended: only differences of readings are used.
            #[allow(clippy::cast_possible_truncation)]
            let micros = (self.now().0 / 1_000) as u32;
            micros
        }

        /// Time passes by `by`: one relaxed add, which this thread's readings see at once
        /// and the other threads' from a point that loom chooses.
        pub(crate) fn advance(&self, by: Duration) {
            let nanos = u64::try_from(by.as_nanos()).expect("a model's time fits in u64");
            self.now.fetch_add(nanos, Relaxed);
        }

        /// A head writer was granted the lock at a release, due by its timeout; `woken`:
        /// an earlier release had woken it, and it was not polled since.
        pub(crate) fn note_timed_grant(&self, woken: bool) {
            self.timed_grants.fetch_add(1, Relaxed);
            if woken {
                self.woken_timed_grants.fetch_add(1, Relaxed);
            }
        }

        /// The clock said that a waiter has waited past the handoff timeout.
        pub(crate) fn note_due(&self) {
            self.dues.fetch_add(1, Relaxed);
        }

        /// How many times [`note_timed_grant`](Self::note_timed_grant) was called.
        pub(crate) fn timed_grants(&self) -> usize {
            self.timed_grants.load(Relaxed)
        }

        /// How many of [`timed_grants`](Self::timed_grants) went to a woken head.
        pub(crate) fn woken_timed_grants(&self) -> usize {
            self.woken_timed_grants.load(Relaxed)
        }

        /// How many times [`note_due`](Self::note_due) was called.
        pub(crate) fn dues(&self) -> usize {
            self.dues.load(Relaxed)
        }
    }
}
