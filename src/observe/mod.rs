//! The hook layer: the points where the typed lock tells its observers (the features
//! `lock_stat`, `lockdep` and `tracing`) that a lock is being acquired, is owned, changes
//! mode or is released. With every one of those features off, each type here is
//! zero-sized and each function an empty `#[inline]` one: not one instruction is added to
//! any path.
//!
//! # The calls, and what may run in them
//!
//! - [`acquiring`]: at the start of every acquire, before the lock is touched (the async
//!   acquires at their first poll, the blocking and `try_` ones when called, a waiting
//!   upgrade when it is made). Nothing is held or half-updated for this acquire, so it may
//!   run foreign code (a `tracing` subscriber) and may panic (lockdep's report).
//! - [`acquired`]: once the lock is owned, to make the [`Held`] its token carries. **It
//!   runs no foreign code and never panics**: it runs before the token exists, and a
//!   panic there would leave the lock owned by nobody, never released.
//! - [`entered`]: right after, once the token exists: foreign code may run here, since a
//!   panic drops the token, which releases the lock (and calls [`released`]).
//! - [`changed`]: after a mode change (a downgrade, an upgrade), once the token of the new
//!   mode exists: update the [`Held`] first, then run any foreign code.
//! - [`releasing`]: just before the raw release, the records (lockdep takes the lock off
//!   its holder's set, `lock_stat` ends the hold): **no foreign code, never a panic**, so
//!   that nothing is skipped whatever the release does. It returns the guard of what runs
//!   after the raw release ([`AfterRelease`], with `tracing` only: the lock may already be
//!   someone else's; the token's lock reference, an owned guard's `Arc`, is still alive),
//!   where foreign code may run: dropped after the release, by an unwind too (a release
//!   whose wake-up panics, a waiter's `Waker::wake`). [`released`] is both at once, for a
//!   hold handed over ([`InFlight`]) whose lock was released by a future's drop.
//!
//! A release (and an acquire's end, its `contention_end` event) may run while the thread
//! is already unwinding: a guard or a lock future dropped by a panic. A second panic
//! there aborts the process, so every hook runs its foreign code through [`foreign`],
//! which catches a panic while the thread unwinds (and loses that event) and lets it
//! unwind to the caller otherwise.
//!
//! `kind` is the mode the lock is acquired or held in ([`WaiterKind`]).

// Each feature adds its own field to `LockObserve` and `Held` and its own code to the
// functions below, and reads the parameters it needs: each combination of features leaves
// some of them unread.
#![allow(unused_variables)]

#[cfg(all(tokio_unstable, feature = "tracing"))]
pub(crate) mod console;
#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
mod kept;
#[cfg(feature = "lock_stat")]
pub mod lock_stat;
#[cfg(feature = "lockdep")]
pub mod lockdep;
#[cfg(feature = "stats")]
pub(crate) mod per_thread;
mod wait;

use std::future::Future;
use std::task::{Context, Poll};

#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
pub(crate) use self::kept::Kept;
pub(crate) use self::wait::{Wait, Waiting};
use crate::raw::list::WaiterKind;
use crate::raw::policy::Policy;
use crate::raw::RawRwLock;

/// The raw lock with the observers' per-lock state beside it: what the typed lock holds
/// and its tokens reach. It derefs to the raw lock, so that the typed layer calls the raw
/// lock's methods on it as they are; the raw lock itself knows nothing of the observers.
#[derive(Debug)]
pub(crate) struct ObservedLock {
    /// The raw lock: the count word, the wait list and the policy.
    pub(crate) raw: RawRwLock,
    /// The observers' per-lock state; zero-sized without their features.
    #[allow(dead_code)] // read by the observers of those features
    pub(crate) observe: LockObserve,
}

impl ObservedLock {
    /// A new lock (see [`RawRwLock::new`]), created at the caller's location
    /// (`#[track_caller]` with the features whose observers report it: the lock's class
    /// under `lockdep`, where tokio-console says it was made).
    #[cfg(not(all(test, async_rwsem_loom)))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    #[inline]
    pub(crate) const fn new(policy: Policy, max_readers: usize) -> Self {
        Self {
            raw: RawRwLock::new(policy, max_readers),
            observe: LockObserve::new(),
        }
    }

    /// See the `const` form (loom build: loom's atomics cannot be built in a `const fn`).
    #[cfg(all(test, async_rwsem_loom))]
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    pub(crate) fn new(policy: Policy, max_readers: usize) -> Self {
        Self {
            raw: RawRwLock::new(policy, max_readers),
            observe: LockObserve::new(),
        }
    }
}

impl std::ops::Deref for ObservedLock {
    type Target = RawRwLock;

    #[inline]
    fn deref(&self) -> &RawRwLock {
        &self.raw
    }
}

/// Where the user called the acquire method: the caller of a public acquire method,
/// which is `#[track_caller]` when one of the features that report it (`lock_stat`,
/// `lockdep`, `tracing`) is on. Zero-sized otherwise.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site {
    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    location: &'static std::panic::Location<'static>,
}

impl Site {
    /// The caller's site: the location of the call to the first function up the stack
    /// that is not `#[track_caller]`.
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    #[inline]
    pub(crate) fn caller() -> Self {
        Self {
            #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
            location: std::panic::Location::caller(),
        }
    }

    /// The source location of the call.
    #[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
    #[allow(dead_code)] // until a feature's observer reads it
    #[inline]
    pub(crate) fn location(self) -> &'static std::panic::Location<'static> {
        self.location
    }
}

/// Runs `emit`, foreign code (a `tracing` subscriber), from a hook that may run while the
/// thread is already unwinding (a guard or a future dropped by a panic): there a panic in
/// it is caught and dropped, with its event, since a second panic would abort the
/// process. Otherwise it runs as is, and its panic unwinds to the caller, which has left
/// nothing half-done (see the module documentation).
#[cfg(feature = "tracing")]
#[inline]
pub(crate) fn foreign(emit: impl FnOnce()) {
    if std::thread::panicking() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(emit));
    } else {
        emit();
    }
}

/// What kind of acquire [`acquiring`] announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // the variants each feature reads
pub(crate) enum Attempt {
    /// An acquire that can wait: the async, blocking and timed ones.
    Wait,
    /// A `try_` acquire or `try_upgrade`: it never waits, so it cannot deadlock.
    Try,
    /// An upgrade that can wait, by a holder of the lock's upgradable read lock (`kind`
    /// is [`WaiterKind::Write`]).
    Upgrade,
}

/// Per-lock state of the observers: the `observe` field of [`ObservedLock`].
#[derive(Debug, Default)]
pub(crate) struct LockObserve {
    /// The lock's class (feature `lockdep`): where it was created, or the name given.
    #[cfg(feature = "lockdep")]
    pub(crate) lockdep: crate::lockdep::LockClass,
    /// The lock's tokio-console resource (`cfg(all(tokio_unstable, feature = "tracing"))`).
    #[cfg(all(tokio_unstable, feature = "tracing"))]
    pub(crate) console: crate::observe::console::Resource,
    /// Times, the longest hold and the exclusive holder (feature `lock_stat`).
    #[cfg(feature = "lock_stat")]
    pub(crate) lock_stat: crate::lock_stat::LockStatState,
}

impl LockObserve {
    /// The state of a new lock, created at the caller's location (`#[track_caller]` with
    /// the feature `lockdep`, for the lock's class, and under
    /// `cfg(all(tokio_unstable, feature = "tracing"))`, for tokio-console; as every public
    /// constructor).
    #[cfg_attr(
        any(feature = "lockdep", all(tokio_unstable, feature = "tracing")),
        track_caller
    )]
    #[inline]
    pub(crate) const fn new() -> Self {
        Self {
            #[cfg(feature = "lockdep")]
            lockdep: crate::lockdep::LockClass::new(),
            #[cfg(all(tokio_unstable, feature = "tracing"))]
            console: crate::observe::console::Resource::new(),
            #[cfg(feature = "lock_stat")]
            lock_stat: crate::lock_stat::LockStatState::new(),
        }
    }
}

/// Per-hold state of the observers: carried by every lock token, from [`acquired`] to
/// [`released`], across mode changes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    /// Which holder's held set the lock is in (feature `lockdep`).
    #[cfg(feature = "lockdep")]
    lockdep: crate::lockdep::HeldState,
    /// Where and when the hold began (feature `lock_stat`).
    #[cfg(feature = "lock_stat")]
    lock_stat: crate::lock_stat::HoldStat,
}

/// Whether a [`Held`] can be given up and made again from its lock alone
/// (`Held::remake`), so that a borrowed token keeps no record for it ([`Kept`]): with
/// `lock_stat` alone among the observers (no `lockdep`, no `tracing`), a hold that is not
/// timed.
#[cfg(all(
    feature = "lock_stat",
    not(feature = "lockdep"),
    not(feature = "tracing")
))]
pub(crate) const COMPACT: bool = true;

/// See the form with `lock_stat` alone.
#[cfg(all(
    any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
    not(all(
        feature = "lock_stat",
        not(feature = "lockdep"),
        not(feature = "tracing")
    ))
))]
pub(crate) const COMPACT: bool = false;

#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
impl Held {
    /// Whether this hold can be made again from its lock (`Held::remake`): see
    /// [`COMPACT`].
    #[inline(always)]
    pub(crate) fn compact(&self) -> bool {
        #[cfg(all(
            feature = "lock_stat",
            not(feature = "lockdep"),
            not(feature = "tracing")
        ))]
        return self.lock_stat.compact();
        #[cfg(not(all(
            feature = "lock_stat",
            not(feature = "lockdep"),
            not(feature = "tracing")
        )))]
        false
    }

    /// The hold of the lock of `raw` in mode `kind` that was [`compact`](Self::compact),
    /// made again. Call it only while the hold lasts (before the raw release).
    #[cfg(all(
        feature = "lock_stat",
        not(feature = "lockdep"),
        not(feature = "tracing")
    ))]
    #[inline(always)]
    pub(crate) fn remake(raw: &ObservedLock, kind: WaiterKind) -> Self {
        Self {
            lock_stat: raw.observe.lock_stat.remake(kind),
        }
    }
}

/// An acquire of `raw` in mode `kind` starts, from `site`. See the module documentation.
/// Lockdep checks it against what its holder holds: an async acquire's (one made inside
/// the poll of its future, [`AsyncOp`]) as a flow of its task, any other as its thread's
/// (or task's) own, a blocking one blocked with it.
#[inline(always)]
pub(crate) fn acquiring(raw: &ObservedLock, kind: WaiterKind, site: Site, attempt: Attempt) {
    // Lockdep's report may panic: nothing is held for this acquire yet.
    #[cfg(feature = "lockdep")]
    crate::lockdep::acquiring(&raw.observe.lockdep, kind, site.location(), attempt);
    // tokio-console's resource span, made at the lock's first acquire (its constructors
    // are `const`): a panic leaves it unmade, with nothing held.
    #[cfg(all(tokio_unstable, feature = "tracing"))]
    raw.observe.console.span(raw);
}

/// The lock of `raw` is now owned in mode `kind`, taken from `site` after `wait`: the
/// state its token carries. Runs no foreign code (see the module documentation).
#[inline]
pub(crate) fn acquired(raw: &ObservedLock, kind: WaiterKind, site: Site, wait: Wait) -> Held {
    Held {
        #[cfg(feature = "lockdep")]
        lockdep: crate::lockdep::acquired(&raw.observe.lockdep, kind, site.location()),
        #[cfg(feature = "lock_stat")]
        lock_stat: raw.observe.lock_stat.acquired(
            &raw.raw.stats,
            kind,
            site.location(),
            wait.lock_stat,
            time_all(raw),
        ),
    }
}

/// Must every hold of `raw` be timed (`lock_stat`)? Only when its "held too long"
/// warning is on (features `lock_stat` and `tracing`), which needs each hold's length.
#[cfg(feature = "lock_stat")]
#[inline]
fn time_all(raw: &ObservedLock) -> bool {
    #[cfg(feature = "tracing")]
    return raw.warn_held_ns() != u64::MAX;
    #[cfg(not(feature = "tracing"))]
    return false;
}

/// The token of the lock just [`acquired`] exists: foreign code may run.
#[inline]
pub(crate) fn entered(raw: &ObservedLock, kind: WaiterKind, held: &Held) {
    #[cfg(all(tokio_unstable, feature = "tracing"))]
    raw.observe.console.update(raw, None, Some(kind));
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    foreign(|| crate::lock_stat::warn::waited(raw, kind, &held.lock_stat, None));
}

/// The lock of `raw` held as `held` has turned from mode `from` into mode `to`: by an
/// upgrade that could wait, called at the site given with its `wait` (`upgrade`), or by
/// a mode change that cannot (`None`: a downgrade, `try_upgrade`).
#[inline]
pub(crate) fn changed(
    raw: &ObservedLock,
    from: WaiterKind,
    to: WaiterKind,
    held: &mut Held,
    upgrade: Option<(Wait, Site)>,
) {
    // Lockdep, then `lock_stat`, first: they update the hold; lockdep runs no foreign
    // code, `lock_stat` none but its warning.
    #[cfg(feature = "lockdep")]
    crate::lockdep::changed(&mut held.lockdep, to);
    #[cfg(feature = "lock_stat")]
    {
        let (grant, site) = match upgrade {
            Some((wait, site)) => (wait.lock_stat, Some(site.location())),
            None => (None, None),
        };
        let site = raw.observe.lock_stat.changed(
            &raw.raw.stats,
            from,
            to,
            &mut held.lock_stat,
            grant.zip(site),
            time_all(raw),
        );
        #[cfg(feature = "tracing")]
        foreign(|| crate::lock_stat::warn::waited(raw, to, &held.lock_stat, site));
        #[cfg(not(feature = "tracing"))]
        let _ = site;
    }
    #[cfg(all(tokio_unstable, feature = "tracing"))]
    raw.observe.console.update(raw, Some(from), Some(to));
}

/// The lock of `raw` held in mode `kind` as `held` is being released, just before the
/// raw release: the records of lockdep (takes the lock off its holder's set) and of
/// `lock_stat` (the hold's end), which run no foreign code and never panic. Returns the
/// guard of what runs after the raw release ([`AfterRelease`]): keep it until then.
#[inline(always)]
pub(crate) fn releasing(raw: &ObservedLock, kind: WaiterKind, held: Held) -> AfterRelease<'_> {
    #[cfg(feature = "lockdep")]
    crate::lockdep::released(&held.lockdep);
    #[cfg(feature = "lock_stat")]
    let held_ns = raw
        .observe
        .lock_stat
        .released(&raw.raw.stats, kind, &held.lock_stat);
    #[cfg(all(feature = "lock_stat", not(feature = "tracing")))]
    let _ = held_ns;
    #[cfg(feature = "tracing")]
    return AfterRelease {
        raw,
        kind,
        held,
        #[cfg(feature = "lock_stat")]
        held_ns,
    };
    #[cfg(not(feature = "tracing"))]
    AfterRelease(std::marker::PhantomData)
}

/// The release of a compact hold (one [`Held::compact`], kept in no record) of the lock
/// of `raw` in mode `kind`, just before the raw release: `true` if the observers have
/// nothing to record (a read hold; an exclusive one not the longest by the coarse clock,
/// which ticks), with no call; `false` if they have, then call [`releasing_compact`].
/// Only with `lock_stat` alone (no hold is compact in the other builds: `false`).
#[inline(always)]
pub(crate) fn released_compact(raw: &ObservedLock, kind: WaiterKind) -> bool {
    #[cfg(all(
        feature = "lock_stat",
        not(feature = "lockdep"),
        not(feature = "tracing")
    ))]
    return raw.observe.lock_stat.released_compact(kind);
    #[cfg(not(all(
        feature = "lock_stat",
        not(feature = "lockdep"),
        not(feature = "tracing")
    )))]
    false
}

/// [`releasing`] for a compact hold, made again from the lock.
#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
#[inline]
pub(crate) fn releasing_compact(raw: &ObservedLock, kind: WaiterKind) -> AfterRelease<'_> {
    releasing(raw, kind, kept::remade(raw, kind))
}

/// See the observers' form: no hold is compact without them.
#[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
#[inline]
pub(crate) fn releasing_compact(raw: &ObservedLock, kind: WaiterKind) -> AfterRelease<'_> {
    releasing(raw, kind, Held {})
}

/// The lock of `raw` held in mode `kind` as `held` has been released (a hold handed over,
/// [`InFlight`]): [`releasing`] and what runs after the raw release, at once.
#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
#[inline]
pub(crate) fn released(raw: &ObservedLock, kind: WaiterKind, held: Held) {
    // Dropped at the end of this call: what runs after the release (zero-sized, with no
    // `Drop`, without `tracing`).
    let _after = releasing(raw, kind, held);
}

/// What the observers do once a lock has been released (the lock may already be someone
/// else's; a token's lock reference, an owned guard's `Arc`, is still alive), which may
/// run foreign code: `tracing`'s events (tokio-console's update, `lock_stat`'s "held too
/// long" warning). Made by [`releasing`] before the raw release, it runs when dropped,
/// after it, by an unwind too (a release whose wake-up panics). Zero-sized, with no
/// `Drop`, without the feature `tracing`.
#[cfg(feature = "tracing")]
pub(crate) struct AfterRelease<'a> {
    raw: &'a ObservedLock,
    kind: WaiterKind,
    held: Held,
    /// The hold's length, for its warning.
    #[cfg(feature = "lock_stat")]
    held_ns: u64,
}

/// See the form with `tracing`.
#[cfg(not(feature = "tracing"))]
pub(crate) struct AfterRelease<'a>(std::marker::PhantomData<&'a ObservedLock>);

#[cfg(feature = "tracing")]
impl Drop for AfterRelease<'_> {
    fn drop(&mut self) {
        let (raw, kind, held) = (self.raw, self.kind, &self.held);
        #[cfg(all(tokio_unstable, feature = "tracing"))]
        raw.observe.console.update(raw, Some(kind), None);
        // Also from a guard (or an upgrade in flight) dropped by an unwind: `foreign`.
        #[cfg(feature = "lock_stat")]
        foreign(|| crate::lock_stat::warn::released(raw, kind, &held.lock_stat, self.held_ns));
    }
}

/// The [`Held`] of a lock handed to a future that may be dropped unfinished (an upgrade in
/// flight), or of a lock being released: if it is dropped still holding it, it tells the
/// observers that the lock was released in mode `kind`. The future, or the release, goes
/// first: this is dropped after it (a local declared before it, a field declared after
/// it), by an unwind too, so that a release whose wake-up panics still tells the
/// observers. Zero-sized, with no `Drop`, without the observers' features.
#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
#[derive(Debug)]
pub(crate) struct InFlight<'a> {
    raw: &'a ObservedLock,
    kind: WaiterKind,
    held: Option<Held>,
}

/// See the observers' form.
#[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
#[derive(Debug)]
pub(crate) struct InFlight<'a>(std::marker::PhantomData<&'a ObservedLock>);

#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
impl<'a> InFlight<'a> {
    /// `held`, the hold of a lock of `raw` in mode `kind`, in flight.
    #[inline]
    pub(crate) fn new(raw: &'a ObservedLock, kind: WaiterKind, held: Held) -> Self {
        Self {
            raw,
            kind,
            held: Some(held),
        }
    }

    /// The hold back, for the token of the lock's next mode: the future completed.
    ///
    /// # Panics
    ///
    /// If taken twice (a future polled after it completed).
    #[inline]
    pub(crate) fn take(&mut self) -> Held {
        self.held
            .take()
            .expect("an upgrade polled after it completed")
    }

    /// [`take`](Self::take), by value.
    #[inline]
    pub(crate) fn into_inner(mut self) -> Held {
        self.take()
    }
}

#[cfg(not(any(feature = "lock_stat", feature = "lockdep", feature = "tracing")))]
impl<'a> InFlight<'a> {
    /// `held`, the hold of a lock of `raw` in mode `kind`, in flight.
    #[inline]
    pub(crate) fn new(raw: &'a ObservedLock, kind: WaiterKind, held: Held) -> Self {
        Self(std::marker::PhantomData)
    }

    /// The hold back, for the token of the lock's next mode: the future completed.
    #[inline]
    pub(crate) fn take(&mut self) -> Held {
        Held {}
    }

    /// [`take`](Self::take), by value.
    #[inline]
    pub(crate) fn into_inner(mut self) -> Held {
        self.take()
    }
}

#[cfg(any(feature = "lock_stat", feature = "lockdep", feature = "tracing"))]
impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(held) = self.held {
            released(self.raw, self.kind, held);
        }
    }
}

/// An async acquire as its observers follow it: under
/// `cfg(all(tokio_unstable, feature = "tracing"))`, an async operation of the lock's
/// resource for tokio-console (`console::OpSpans`), made with the acquire future, entered
/// at each of its polls; under `lockdep`, its context (the waker it is polled with) and
/// the watch of a wait for a lock of its own task ([`lockdep::Watch`]). Zero-sized, and
/// [`wrap`](Self::wrap) and [`poll`](Self::poll) the identity, otherwise.
#[derive(Debug)]
pub(crate) struct AsyncOp {
    #[cfg(all(tokio_unstable, feature = "tracing"))]
    console: crate::observe::console::OpSpans,
    #[cfg(feature = "lockdep")]
    lockdep: crate::lockdep::Watch,
}

impl AsyncOp {
    /// The operation of an async acquire of `raw` in mode `kind`, named `source` after
    /// the public method (`"RwLock::read"`). May run foreign code (a `tracing`
    /// subscriber): call it where nothing is held for this acquire, or where a panic
    /// drops what is (the guard of an upgrade).
    #[inline]
    pub(crate) fn new(raw: &ObservedLock, kind: WaiterKind, source: &'static str) -> Self {
        Self {
            #[cfg(all(tokio_unstable, feature = "tracing"))]
            console: crate::observe::console::OpSpans::new(raw, kind, source),
            #[cfg(feature = "lockdep")]
            lockdep: crate::lockdep::Watch::default(),
        }
    }

    /// `acquire`, the future of the acquire, under this operation.
    #[inline]
    pub(crate) fn wrap<F: Future>(self, acquire: F) -> impl Future<Output = F::Output> {
        #[cfg(all(tokio_unstable, feature = "tracing"))]
        let acquire = crate::observe::console::Instrumented::new(self.console, acquire);
        #[cfg(feature = "lockdep")]
        let acquire = Watched {
            watch: self.lockdep,
            acquire,
        };
        acquire
    }

    /// One poll of the acquire, `poll`, under this operation (for a named future, which
    /// cannot be wrapped).
    #[inline]
    pub(crate) fn poll<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        #[cfg(all(tokio_unstable, feature = "tracing"))]
        let poll = {
            let console = &self.console;
            move |cx: &mut Context<'_>| console.poll(|| poll(cx))
        };
        #[cfg(feature = "lockdep")]
        return self.lockdep.poll(cx, poll);
        #[cfg(not(feature = "lockdep"))]
        poll(cx)
    }
}

/// An async acquire's future under lockdep's [`Watch`](crate::lockdep::Watch).
#[cfg(feature = "lockdep")]
#[derive(Debug)]
struct Watched<F> {
    watch: crate::lockdep::Watch,
    /// Structurally pinned.
    acquire: F,
}

#[cfg(feature = "lockdep")]
impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `acquire` is structurally pinned: never moved out of, reached only
        // through this projection; `watch` is not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let acquire = unsafe { std::pin::Pin::new_unchecked(&mut this.acquire) };
        this.watch.poll(cx, |cx| acquire.poll(cx))
    }
}

/// `acquire`, an async acquire that is not an [`AsyncOp`] of its own (an owned timed
/// upgrade), polled as one for lockdep: its announcement and its wait are those of the
/// future that polls it (its waker's flow). The identity without `lockdep`.
#[cfg(feature = "tokio")]
#[inline]
pub(crate) fn in_flow<F: Future>(acquire: F) -> impl Future<Output = F::Output> {
    #[cfg(feature = "lockdep")]
    return Watched {
        watch: crate::lockdep::Watch::default(),
        acquire,
    };
    #[cfg(not(feature = "lockdep"))]
    acquire
}

/// Runs `f`, the polls of a blocking acquire (or its announcement): under `lockdep`, its
/// acquires are the thread's own (no flow: they block every future the thread runs).
#[inline]
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(feature = "lockdep")]
    return crate::lockdep::blocking(f);
    #[cfg(not(feature = "lockdep"))]
    f()
}
