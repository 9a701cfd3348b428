//! Waits for a lock the waiting future's own task may hold: reported once they last.
//!
//! A future that acquires a lock its task (its holder, see [`super::holders`]) holds may
//! be the holder itself, which then waits forever, or a sibling of the future that holds
//! it (`join!`, `select!`), which gets the lock once that one moves on. Lockdep cannot
//! tell them apart when the acquire starts, so it reports neither then: if the acquire
//! has to wait, it is watched, and reported if it still waits [`deadlock_timeout`] later
//! while the hold it conflicts with is still there. A thread (`lockdep-watchdog`,
//! started at the first such wait) keeps the deadlines. Under [`Report::Panic`] it wakes
//! the waiting future, which panics at that poll (dropping the acquire, as any
//! cancellation); other reports are made from the watchdog's thread.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Condvar, LazyLock, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::holders::{self, Owner};
use super::{deliver, report, Report};

/// The default of [`deadlock_timeout`].
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// [`deadlock_timeout`] in nanoseconds; 0: the default.
static TIMEOUT_NS: AtomicU64 = AtomicU64::new(0);

/// Sets how long an async acquire may wait for a lock its own task holds before it is
/// reported as a deadlock (1 s by default), for the whole process, from the next wait
/// on. See the module documentation's *Futures inside one task*.
///
/// ```
/// use std::time::Duration;
/// use async_rwsem::lockdep;
///
/// lockdep::set_deadlock_timeout(Duration::from_millis(250));
/// assert_eq!(lockdep::deadlock_timeout(), Duration::from_millis(250));
/// # lockdep::set_deadlock_timeout(Duration::from_secs(1));
/// ```
pub fn set_deadlock_timeout(timeout: Duration) {
    let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX).max(1);
    TIMEOUT_NS.store(ns, Relaxed);
}

/// How long an async acquire may wait for a lock its own task holds before it is
/// reported: what [`set_deadlock_timeout`] set last, else 1 s.
pub fn deadlock_timeout() -> Duration {
    match TIMEOUT_NS.load(Relaxed) {
        0 => DEFAULT_TIMEOUT,
        ns => Duration::from_nanos(ns),
    }
}

/// A suspect's state.
const WAITING: u8 = 0;
/// Confirmed, its report to be made by its future (a panic).
const CONFIRMED: u8 = 1;
/// Done: acquired, dropped, reported, or its hold released.
const DONE: u8 = 2;

/// An acquire of a lock its holder's task holds: what to check, and the report.
#[derive(Debug)]
pub(crate) struct Suspect {
    /// The conflicting holds: their owner, their entries, and the lock's number. Every
    /// one is watched: the acquire is reported if any is still held at its deadline (a
    /// sibling's hold that ended says nothing of the holder's own).
    owner: Owner,
    entries: Vec<u64>,
    lock: u64,
    /// The report, with `{waited}` where the wait goes.
    message: String,
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
}

impl Suspect {
    pub(super) fn new(owner: Owner, entries: Vec<u64>, lock: u64, message: String) -> Self {
        Self {
            owner,
            entries,
            lock,
            message,
            state: AtomicU8::new(WAITING),
            waker: Mutex::new(None),
        }
    }

    fn message(&self, waited: Duration) -> String {
        self.message.replace("{waited}", &format!("{waited:?}"))
    }
}

thread_local! {
    /// The suspect the acquire being polled on this thread found (see [`Watch::poll`]).
    static PENDING: Cell<Option<Box<Suspect>>> = const { Cell::new(None) };
    /// Whether [`PENDING`] holds one: the one word every poll reads.
    static HAS_PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Hands `suspect` to the poll in progress ([`Watch::poll`] takes it).
pub(super) fn set_pending(suspect: Suspect) {
    let _ = PENDING.try_with(|pending| pending.set(Some(Box::new(suspect))));
    let _ = HAS_PENDING.try_with(|has| has.set(true));
}

#[inline]
fn take_pending() -> Option<Box<Suspect>> {
    if !HAS_PENDING
        .try_with(|has| has.replace(false))
        .unwrap_or(false)
    {
        return None;
    }
    take_pending_slow()
}

#[cold]
#[inline(never)]
fn take_pending_slow() -> Option<Box<Suspect>> {
    PENDING.try_with(Cell::take).ok().flatten()
}

/// What lockdep keeps in an async acquire future (feature `lockdep`): its suspect, if
/// its announcement found one, and whether the watchdog has it; the entry of a lock it
/// owns but has not returned yet (a `Pending` after the lock was taken: tokio's budget).
#[derive(Debug, Default)]
pub(crate) struct Watch {
    suspect: Option<Arc<Suspect>>,
    watched: bool,
    unsettled: Option<holders::Charge>,
}

impl Watch {
    /// One poll of the acquire, `poll`, in the context of the waker of `cx`: reports a
    /// confirmed deadlock (panics), and watches a suspect acquire that waits. A lock
    /// taken by a poll that returns `Pending` orders nothing until the acquire completes
    /// ([`holders::Entry::settled`]).
    #[inline]
    pub(crate) fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        if self.suspect.is_some() {
            self.report_confirmed();
        }
        drop(take_pending());
        let waker = cx.waker();
        let (result, charged) = holders::polling(waker, || poll(cx));
        if let Some(suspect) = take_pending() {
            self.suspect = Some(Arc::new(*suspect));
        }
        if result.is_pending() {
            if let Some(entry) = charged {
                holders::set_settled(entry, false);
                self.unsettled = Some(entry);
            }
        } else if self.unsettled.is_some() {
            if let Some(entry) = self.unsettled.take() {
                holders::set_settled(entry, true);
            }
        }
        if self.suspect.is_some() {
            self.watch_suspect(cx, result.is_pending());
        }
        result
    }

    /// Reports the suspect if the watchdog confirmed it (panics).
    #[cold]
    #[inline(never)]
    fn report_confirmed(&mut self) {
        if let Some(suspect) = &self.suspect {
            if suspect.state.load(Relaxed) == CONFIRMED {
                let message = suspect.message(deadlock_timeout());
                suspect.state.store(DONE, Relaxed);
                self.suspect = None;
                deliver(Report::Panic, &message);
            }
        }
    }

    /// After a poll of a suspect acquire: watches it while it waits (`pending`), else
    /// lets it go.
    #[cold]
    #[inline(never)]
    fn watch_suspect(&mut self, cx: &Context<'_>, pending: bool) {
        if let Some(suspect) = &self.suspect {
            if pending {
                let mut slot = suspect.waker.lock().unwrap_or_else(PoisonError::into_inner);
                match &mut *slot {
                    Some(old) if old.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
                drop(slot);
                if !self.watched {
                    self.watched = true;
                    watch(Arc::clone(suspect));
                }
            } else {
                suspect.state.store(DONE, Relaxed);
                self.suspect = None;
            }
        }
    }
}

impl Drop for Watch {
    #[inline(always)]
    fn drop(&mut self) {
        if self.suspect.is_some() {
            self.let_go();
        }
    }
}

impl Watch {
    /// [`Watch`]'s drop with a suspect (out of line: the common drop, with none, is one
    /// test, and leaves nothing for the field's own drop to do).
    #[cold]
    #[inline(never)]
    fn let_go(&mut self) {
        if let Some(suspect) = self.suspect.take() {
            suspect.state.store(DONE, Relaxed);
        }
    }
}

/// The suspects the watchdog has, with their deadlines.
type Watched = Mutex<Vec<(Instant, Arc<Suspect>)>>;

/// The watchdog's list, and the condition variable that tells it of a new suspect.
static WATCHED: LazyLock<(Watched, Condvar)> = LazyLock::new(|| {
    let started = std::thread::Builder::new()
        .name("lockdep-watchdog".into())
        .spawn(watchdog);
    if started.is_err() {
        let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"async-rwsem lockdep: no watchdog thread: waits for a lock the task holds are not reported\n",
            );
    }
    (Mutex::new(Vec::new()), Condvar::new())
});

fn watch(suspect: Arc<Suspect>) {
    let (list, wake) = &*WATCHED;
    let deadline = Instant::now() + deadlock_timeout();
    list.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((deadline, suspect));
    wake.notify_one();
}

/// The watchdog thread: at each deadline, reports the suspects still waiting while
/// their conflicting hold is still held. A panic of foreign code anywhere in it (a waker
/// dropped with its suspect, say) is caught, and the watch goes on.
fn watchdog() {
    loop {
        let _ = catch_unwind(watch_deadlines);
    }
}

/// The watchdog's loop; never returns.
fn watch_deadlines() {
    let (list, wake) = &*WATCHED;
    let mut watched = list.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let now = Instant::now();
        let mut due = Vec::new();
        watched.retain(|(deadline, suspect)| {
            if suspect.state.load(Relaxed) != WAITING {
                return false;
            }
            if *deadline <= now {
                due.push(Arc::clone(suspect));
                return false;
            }
            true
        });
        let next = watched.iter().map(|(deadline, _)| *deadline).min();
        drop(watched);
        for suspect in due {
            // Foreign code runs here (the waker's wake and drop, a `tracing` subscriber):
            // its panic loses that one report, never the watchdog.
            let _ = catch_unwind(AssertUnwindSafe(move || confirm(&suspect)));
        }
        watched = list.lock().unwrap_or_else(PoisonError::into_inner);
        watched = match next {
            Some(next) => {
                let wait = next.saturating_duration_since(Instant::now());
                wake.wait_timeout(watched, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None if watched.is_empty() => {
                wake.wait(watched).unwrap_or_else(PoisonError::into_inner)
            }
            None => watched,
        };
    }
}

/// A suspect's deadline passed: reports it if one of its conflicting holds is still
/// held.
fn confirm(suspect: &Suspect) {
    if !holders::holds_any(suspect.owner, &suspect.entries, suspect.lock) {
        suspect.state.store(DONE, Relaxed);
        return;
    }
    match report() {
        Report::Off => suspect.state.store(DONE, Relaxed),
        Report::Panic => {
            if suspect
                .state
                .compare_exchange(WAITING, CONFIRMED, Relaxed, Relaxed)
                .is_ok()
            {
                // Taken, not cloned (a clone is foreign code too); the future's next
                // poll reports.
                let waker = suspect
                    .waker
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some(waker) = waker {
                    // Foreign code: the watchdog outlives its panic.
                    let _ = catch_unwind(AssertUnwindSafe(|| waker.wake()));
                }
            }
        }
        other => {
            if suspect
                .state
                .compare_exchange(WAITING, DONE, Relaxed, Relaxed)
                .is_ok()
            {
                deliver(other, &suspect.message(deadlock_timeout()));
            }
        }
    }
}
