//! Blocking acquires for synchronous callers: `blocking_read`, `blocking_write`, their owned
//! forms and `blocking_upgradable_read`; and the timed ones, as `parking_lot` names them:
//! `try_read_for`, `try_write_for`, `try_upgradable_read_for` and their `_until` forms.
//! Each is the acquire future polled by a small thread-parking executor, no runtime
//! needed; a timed one drops (cancels) the future at its deadline. The poll runs inside
//! `raw::parking::parking`: the lock sees a thread that would park (it spins its whole cap
//! and its queued node is a parked thread's, `raw/parking.rs`).

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use super::guard::{RwLockReadGuard, RwLockWriteGuard};
use super::owned::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard};
use super::upgradable::RwLockUpgradableReadGuard;
use super::RwLock;

/// Wakes a thread parked in [`block_on`].
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

fn thread_waker() -> Waker {
    Waker::from(Arc::new(ThreadWaker(thread::current())))
}

thread_local! {
    /// This thread's waker, made once per thread, so that a blocking acquire does not
    /// allocate; borrowed for the whole acquire, not cloned, so that it costs no reference
    /// count either (measured: `docs/performance.md`, "Threads").
    static WAKER: Waker = thread_waker();
}

/// Polls `future` to completion on this thread, parking the thread while it is pending.
///
/// The future comes pinned by the caller (`pin!(lock.read())`), so that it is built once,
/// in the caller's frame: passed by value, the acquire's future (its state sized for the
/// lock future inside) was copied into this frame, a `memcpy` of 136 bytes at every
/// blocking acquire that missed the fast path, 9% of the time of 4 writer and 4 reader
/// threads (`docs/performance.md`, "Round eleven").
pub(crate) fn block_on<F: Future + ?Sized>(future: Pin<&mut F>) -> F::Output {
    match poll_until(future, None) {
        Some(output) => output,
        None => unreachable!("no deadline"),
    }
}

/// Polls `future` (pinned by the caller, as for [`block_on`]) on this thread, parking the
/// thread while it is pending, until it completes or `deadline` (if any) passes: then
/// `None`, and the future is left pending, for the caller to drop (which cancels it) or
/// to stop (a timed upgrade's). It is polled once more at the deadline, so an acquire
/// granted in time is not given up.
///
/// A wake-up before the park makes the park return at once (the thread's unpark token),
/// and a spurious return only costs a poll, so no wake-up is ever lost.
///
/// With the feature `tokio`, the future runs outside tokio's cooperative budget: inside a
/// runtime a spent budget would defer the wake-up until the task's poll returns, which a
/// blocked thread never does.
pub(super) fn poll_until<F: Future + ?Sized>(
    future: Pin<&mut F>,
    deadline: Option<Instant>,
) -> Option<F::Output> {
    #[cfg(feature = "tokio")]
    let future = super::coop::unconstrained(future);
    let mut future = pin!(future);
    match WAKER.try_with(|waker| poll_loop(future.as_mut(), waker, deadline)) {
        Ok(output) => output,
        // In a thread-local destructor the thread's waker may be gone: make one.
        Err(_) => poll_loop(future, &thread_waker(), deadline),
    }
}

/// The loop of [`poll_until`]: poll, park, until the future completes or the deadline
/// passes.
fn poll_loop<F: Future + ?Sized>(
    mut future: Pin<&mut F>,
    waker: &Waker,
    deadline: Option<Instant>,
) -> Option<F::Output> {
    let mut cx = Context::from_waker(waker);
    loop {
        // Lockdep charges what this thread blocks for to the thread, not to a future; the
        // lock marks a node queued here as a parked thread's (`raw/parking.rs`).
        let poll = || crate::raw::parking::parking(|| future.as_mut().poll(&mut cx));
        if let Poll::Ready(output) = crate::observe::blocking(poll) {
            return Some(output);
        }
        match deadline {
            None => thread::park(),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return None;
                }
                thread::park_timeout(deadline - now);
            }
        }
    }
}

/// Whether [`blocking_read`](RwLock::blocking_read) and
/// [`blocking_write`](RwLock::blocking_write) try the lock directly before they build the
/// acquire future: when no observer is built in, which would record a try where the
/// caller waits (lockdep's order checks, the lock events, the console's spans).
///
/// A try takes the lock exactly when the acquire future's own fast path would (a reader:
/// no flag of `READ_FAILED_MASK` set and room for one more; a writer: the idle count word),
/// so the order and the handoff are the same; it only skips the future, its poll and the
/// thread's waker: an uncontended blocking read went from about 54 to 23 ns, parking_lot's
/// taking 21 (measured: `docs/performance.md`, "Threads"). When it fails, the future
/// starts over (a reader's try leaves no bias to hand on).
const SYNC_FAST_PATH: bool = !cfg!(any(
    feature = "stats",
    feature = "lockdep",
    feature = "tracing"
));

/// The deadline `timeout` from now; `None` (no deadline) if that is past what an
/// `Instant` can hold.
pub(super) fn deadline_in(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading from synchronous code, blocking the current thread until the
    /// lock is taken. Needs no runtime: the thread parks and is woken as an async waiter
    /// would be, and the lock's queueing, stealing and handoff apply as for
    /// [`read`](Self::read). Where a task would spin before it queues, the thread spins
    /// for the policy's whole cap ([`reader_spin`](crate::Policy#structfield.reader_spin);
    /// `writer_spin` for the blocking writes), not the budget the lock has learned from
    /// spins ([`adaptive_spin`](crate::Policy#structfield.adaptive_spin)): a thread about
    /// to park has nothing else to run.
    ///
    /// # Deadlocks
    ///
    /// Do not call it from async code. Called inside a task, it blocks the executor's
    /// thread; if that task, or any task that can only run on this thread (a
    /// `current_thread` runtime, a `LocalSet`), holds the write lock or is queued ahead,
    /// it waits forever. Use [`read`](Self::read) there, or call this from
    /// `spawn_blocking`. Unlike tokio's, this method cannot detect that it runs inside a
    /// runtime, so it does not panic: it deadlocks.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let w = lock.write().await;
    /// let c = Arc::clone(&lock);
    /// let reader = std::thread::spawn(move || *c.blocking_read());
    /// drop(w); // wakes the parked thread
    /// assert_eq!(reader.join().unwrap(), 1);
    /// # }
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn blocking_read(&self) -> RwLockReadGuard<'_, T> {
        if SYNC_FAST_PATH {
            if let Ok(guard) = self.try_read() {
                return guard;
            }
        }
        block_on(pin!(self.read()))
    }

    /// Locks for writing from synchronous code, blocking the current thread until the
    /// lock is taken. Needs no runtime.
    ///
    /// # Deadlocks
    ///
    /// As for [`blocking_read`](Self::blocking_read): never call it from async code, where
    /// it blocks the executor's thread and deadlocks if a task that needs that thread
    /// holds the lock.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = Arc::new(RwLock::new(0));
    /// let threads: Vec<_> = (0..4)
    ///     .map(|_| {
    ///         let lock = Arc::clone(&lock);
    ///         std::thread::spawn(move || *lock.blocking_write() += 1)
    ///     })
    ///     .collect();
    /// for t in threads {
    ///     t.join().unwrap();
    /// }
    /// assert_eq!(*lock.blocking_read(), 4);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn blocking_write(&self) -> RwLockWriteGuard<'_, T> {
        if SYNC_FAST_PATH {
            if let Ok(guard) = self.try_write() {
                return guard;
            }
        }
        block_on(pin!(self.write()))
    }

    /// [`blocking_read`](Self::blocking_read) through an `Arc`, giving an owned guard.
    /// Same deadlock warning.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = Arc::new(RwLock::new(String::from("shared")));
    /// let guard = Arc::clone(&lock).blocking_read_owned();
    /// let len = std::thread::spawn(move || guard.len()).join().unwrap();
    /// assert_eq!(len, 6);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn blocking_read_owned(self: Arc<Self>) -> OwnedRwLockReadGuard<T> {
        block_on(pin!(self.read_owned()))
    }

    /// [`blocking_write`](Self::blocking_write) through an `Arc`, giving an owned guard.
    /// Same deadlock warning.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut guard = Arc::clone(&lock).blocking_write_owned();
    /// std::thread::spawn(move || *guard += 1).join().unwrap();
    /// assert_eq!(*lock.blocking_read(), 2);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn blocking_write_owned(self: Arc<Self>) -> OwnedRwLockWriteGuard<T> {
        block_on(pin!(self.write_owned()))
    }

    /// Locks for an upgradable read from synchronous code, blocking the current thread
    /// (see [`blocking_read`](Self::blocking_read), and its warning: calling it inside an
    /// async task can deadlock).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_rwsem::{RwLock, RwLockUpgradableReadGuard};
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let l = Arc::clone(&lock);
    /// std::thread::spawn(move || {
    ///     let up = l.blocking_upgradable_read();
    ///     if let Ok(mut w) = RwLockUpgradableReadGuard::try_upgrade(up) {
    ///         *w += 1;
    ///     }
    /// })
    /// .join()
    /// .unwrap();
    /// assert_eq!(*lock.blocking_read(), 2);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn blocking_upgradable_read(&self) -> RwLockUpgradableReadGuard<'_, T> {
        block_on(pin!(self.upgradable_read()))
    }

    /// Locks for reading from synchronous code, as [`blocking_read`](Self::blocking_read),
    /// giving up after `timeout` (`parking_lot`'s `try_read_for`). Returns `None` if the
    /// lock was not taken in time; then nothing is held, and the waiter has left the queue
    /// (passing on any wake-up it was given). A lock that can be taken at once is taken
    /// even with a zero `timeout`. Same deadlock warning as `blocking_read`: never call it
    /// from async code.
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let w = lock.try_write().unwrap();
    /// assert!(lock.try_read_for(Duration::from_millis(5)).is_none());
    /// let l = Arc::clone(&lock);
    /// let reader = std::thread::spawn(move || *l.try_read_for(Duration::from_secs(60)).unwrap());
    /// drop(w); // the waiting thread gets the lock
    /// assert_eq!(reader.join().unwrap(), 1);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_read_for(&self, timeout: Duration) -> Option<RwLockReadGuard<'_, T>> {
        poll_until(pin!(self.read()), deadline_in(timeout))
    }

    /// [`try_read_for`](Self::try_read_for) with a deadline instead of a timeout
    /// (`parking_lot`'s `try_read_until`).
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::time::{Duration, Instant};
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// let deadline = Instant::now() + Duration::from_millis(5);
    /// assert_eq!(*lock.try_read_until(deadline).unwrap(), 1);
    /// let w = lock.try_write().unwrap();
    /// assert!(lock.try_read_until(deadline).is_none());
    /// # drop(w);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_read_until(&self, deadline: Instant) -> Option<RwLockReadGuard<'_, T>> {
        poll_until(pin!(self.read()), Some(deadline))
    }

    /// Locks for writing from synchronous code, as [`blocking_write`](Self::blocking_write),
    /// giving up after `timeout` (`parking_lot`'s `try_write_for`). On `None` nothing is
    /// held and nothing is left queued. Same deadlock warning as `blocking_write`.
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::time::Duration;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// let r = lock.try_read().unwrap();
    /// assert!(lock.try_write_for(Duration::from_millis(5)).is_none());
    /// drop(r);
    /// *lock.try_write_for(Duration::from_millis(5)).unwrap() += 1;
    /// assert_eq!(*lock.try_read().unwrap(), 2);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_write_for(&self, timeout: Duration) -> Option<RwLockWriteGuard<'_, T>> {
        poll_until(pin!(self.write()), deadline_in(timeout))
    }

    /// [`try_write_for`](Self::try_write_for) with a deadline instead of a timeout
    /// (`parking_lot`'s `try_write_until`).
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::time::{Duration, Instant};
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// let r = lock.try_read().unwrap();
    /// assert!(lock.try_write_until(Instant::now()).is_none());
    /// drop(r);
    /// assert!(lock.try_write_until(Instant::now() + Duration::from_millis(5)).is_some());
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_write_until(&self, deadline: Instant) -> Option<RwLockWriteGuard<'_, T>> {
        poll_until(pin!(self.write()), Some(deadline))
    }

    /// Locks for an upgradable read from synchronous code, as
    /// [`blocking_upgradable_read`](Self::blocking_upgradable_read), giving up after
    /// `timeout` (`parking_lot`'s `try_upgradable_read_for`). On `None` nothing is held
    /// and nothing is left queued. Same deadlock warning as `blocking_read`.
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::time::Duration;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// let up = lock.try_upgradable_read().unwrap();
    /// assert!(lock.try_upgradable_read_for(Duration::from_millis(5)).is_none());
    /// drop(up);
    /// assert!(lock.try_upgradable_read_for(Duration::from_millis(5)).is_some());
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgradable_read_for(
        &self,
        timeout: Duration,
    ) -> Option<RwLockUpgradableReadGuard<'_, T>> {
        poll_until(pin!(self.upgradable_read()), deadline_in(timeout))
    }

    /// [`try_upgradable_read_for`](Self::try_upgradable_read_for) with a deadline instead
    /// of a timeout (`parking_lot`'s `try_upgradable_read_until`).
    ///
    /// ```
    /// # #[cfg(feature = "lockdep")] // this thread acquires what it holds: reported
    /// # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Off);
    /// use std::time::Instant;
    /// use async_rwsem::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// let up = lock.try_upgradable_read_until(Instant::now()).unwrap(); // free: taken
    /// assert!(lock.try_upgradable_read_until(Instant::now()).is_none());
    /// # drop(up);
    /// ```
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn try_upgradable_read_until(
        &self,
        deadline: Instant,
    ) -> Option<RwLockUpgradableReadGuard<'_, T>> {
        poll_until(pin!(self.upgradable_read()), Some(deadline))
    }
}
