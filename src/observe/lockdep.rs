//! Lock-order checking for tasks (feature `lockdep`): the Linux kernel's `lockdep`, with
//! tasks in place of threads. Meant for debug builds and tests.
//!
//! A deadlock between locks needs two holders that take two locks in opposite orders;
//! a run shows it only if their steps interleave badly. Lockdep reports the possibility
//! instead: it remembers, for every pair of lock *classes*, the order in which one holder
//! held the first while it acquired the second, and reports the first acquire whose order
//! closes a cycle, even when the two orders were taken one after the other and nothing
//! waited.
//!
//! ```
//! use async_rwsem::RwLock;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! # async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Panic);
//! static ACCOUNTS: RwLock<u32> = RwLock::new(0).with_lockdep_class("doc: accounts");
//! static LEDGER: RwLock<u32> = RwLock::new(0).with_lockdep_class("doc: ledger");
//!
//! // One task takes the accounts, then the ledger...
//! tokio::spawn(async {
//!     let _accounts = ACCOUNTS.read().await;
//!     let _ledger = LEDGER.write().await;
//! })
//! .await
//! .unwrap();
//! // ...a later one the other way round: nothing deadlocks in this run, but two such
//! // tasks at once can, so lockdep reports it (a panic, by default).
//! let later = tokio::spawn(async {
//!     let _ledger = LEDGER.read().await;
//!     let _accounts = ACCOUNTS.write().await;
//! });
//! let report = later.await.unwrap_err().into_panic();
//! let report = report.downcast_ref::<String>().unwrap();
//! assert!(report.contains(r#"lock order cycle of 2 classes: "doc: ledger" -> "doc: accounts""#));
//! # }
//! ```
//!
//! # What is checked
//!
//! On every acquire that can wait (`read`, `write`, `upgradable_read`, their owned,
//! blocking and timed forms, and upgrades), before the lock is touched:
//!
//! - **Lock order**: for each lock the holder already holds, the edge "class A, then
//!   class B" is added to a process-wide graph of classes, with the locations of the two
//!   acquires the first time it was seen. An edge that closes a cycle is reported once,
//!   with every edge of the cycle and its two locations. Every mode counts: a cycle of
//!   reads deadlocks too, once a writer queues at each lock (a reader then queues behind
//!   the writer, which waits for the other reader).
//! - **Recursion**: an acquire of a lock the holder already holds, in any mode, is
//!   reported at once: a write or an upgradable read waits for the holder's own lock,
//!   and a read while holding a read (or the upgradable read) waits as soon as a writer
//!   queues in between (tokio's issue 2849). An upgrade waits for every other reader: an
//!   upgrade while the holder also holds a plain read of the lock is reported too. The
//!   upgrade of the upgradable read that the holder holds is the one legal acquire of a
//!   held lock. Each pair of locations (the held lock's acquire, this one) is reported
//!   once.
//! - **Two locks of one class**: holding a lock of a class while acquiring another of the
//!   same class is reported (the edge "A, then A"), as the kernel does: lockdep cannot
//!   order them. Locks that do nest give each level its own subclass (below).
//!
//! The `try_` acquires cannot wait, so they add no edge and are never reported; the lock
//! they take is held as any other, and orders what the holder acquires next.
//! Downgrades and upgrades change the mode of the held entry.
//!
//! # Classes
//!
//! A lock's class is where it was created (the file, line and column of the call to
//! [`RwLock::new`](crate::RwLock::new) or another constructor, `const` ones and statics
//! included), so every lock made at one place, in a loop or a generic function, is one
//! class, as the kernel's are.
//! [`RwLock::with_lockdep_class`](crate::RwLock::with_lockdep_class) names the class
//! instead: every lock given one name is one class, wherever it was made.
//! [`RwLock::with_lockdep_subclass`](crate::RwLock::with_lockdep_subclass) splits a class
//! into levels that nest: holding a lock of subclass 0 while acquiring one of subclass 1 of
//! the same class orders two different classes (the kernel's `down_read_nested`, fixed per
//! lock here rather than per acquire: a lock that is sometimes the outer and sometimes the
//! inner one needs two different classes, or is reported). Locks of one class taken in a
//! fixed order, such as the shards of a map locked by index, are the same case: give each
//! its index as its subclass: taking them by increasing index is then an order of
//! classes, and taking two against it closes a cycle, reported. Both methods are `const`,
//! and exist (doing nothing) without the feature, so that code annotated for lockdep
//! builds either way.
//!
//! ```
//! use async_rwsem::RwLock;
//!
//! # tokio_test::block_on(async {
//! let parent = RwLock::new(0).with_lockdep_class("doc: node");
//! let child = RwLock::new(0).with_lockdep_class("doc: node").with_lockdep_subclass(1);
//! let _p = parent.write().await;
//! let _c = child.write().await; // "doc: node"/0, then "doc: node"/1: no report
//! # });
//! ```
//!
//! # Holders: tasks and threads
//!
//! The holder of an acquire is the tokio task it runs in (`tokio::task::try_id`, with the
//! feature `tokio`), or else the thread (blocking acquires, other executors). A lock is
//! charged to the holder that acquired it until it is released, and the release takes it
//! off that holder's set whichever task or thread drops the guard, so a guard passed to
//! another task leaves nothing behind. While such a guard is away, the lock still counts
//! as held by the task that acquired it, not by the one that has it: that task's acquires
//! are ordered after it (a task that sends a guard to a worker and acquires the same lock
//! again before the worker drops it is reported as recursion), and the receiving task's
//! are not (an order it makes is not seen). Acquire a lock in the task that holds it.
//!
//! A guard that is never dropped (`mem::forget`, a leaked `Box`) is never released: its
//! lock stays charged to the holder that acquired it for as long as the lock lives, so
//! that holder's next acquire of it is reported as recursion (for a write, or a read
//! behind a queued writer, a real self-deadlock: the lock is never released). Lockdep
//! knows a lock by a number it is given at its first acquire (moved with it, never
//! reused), not by its address: when the lock is dropped, its holds go with it, and a new
//! lock made in its place is a new lock.
//!
//! Futures that run concurrently inside one task (`join!`, `select!`,
//! `FuturesUnordered`, the mock tasks of `tokio_test` polled on one thread) are one
//! holder: a lock that one of them holds orders the acquires of the others, and one lock
//! taken by two of them is reported as recursion, although the task can still make
//! progress (the holder is polled again and releases it). Spawn such futures as tasks,
//! or turn reports off for them.
//!
//! # Reports
//!
//! A report names the holder, the classes, modes and locations. How it is made is chosen
//! per process with [`set_report`]: [`Report::Panic`] (the default: the acquire panics
//! before it touches the lock, so the task unwinds with its guards, as at any panic),
//! [`Report::Stderr`], `Report::Tracing` (an error event, target `async_rwsem::lockdep`,
//! with the feature `tracing`) or [`Report::Off`]. The environment variable
//! `ASYNC_RWSEM_LOCKDEP` (`panic`, `stderr`, `tracing` or `off`) sets the report until
//! [`set_report`] is called, so that a test suite that takes locks in such orders on
//! purpose (or joins futures that share locks inside one task) can run with the feature on
//! and reports off. A report is made after lockdep's own mutex is released, and before the
//! lock is touched, so a panicking report (or subscriber) leaves every lock and lockdep
//! itself as they were. An acquire made while its thread unwinds (in a `Drop` run by a
//! panic) never panics: its report goes to standard error, and a subscriber's panic is
//! caught, since a second panic would abort the process.
//!
//! # Cost
//!
//! With the feature on, every acquire and every release takes one process-wide
//! `std::sync::Mutex` (the class graph and the held sets), an acquire that can wait walks
//! the holder's held locks, and a new edge searches the graph: the lock stops scaling with
//! cores. An uncontended read or write lock and unlock takes about 1,400 instructions with
//! the feature on, against 63 to 72 without it (callgrind, the repository's
//! `benches/instructions.rs`). The graph only grows, by one entry per class and per order
//! seen. With [`Report::Off`] an acquire still takes the mutex once, to register the held
//! lock (`held` must find it if reports are turned back on). Dropping a lock that was
//! ever acquired takes the mutex once too (to drop the holds of forgotten guards). Without the feature, none of
//! this is compiled: not one instruction is added to any acquire or release.

#[cfg(test)]
use std::cell::Cell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use crate::observe::Attempt;
use crate::raw::list::WaiterKind;
use crate::raw::RawRwLock;

// ---------------------------------------------------------------------------------------
// The public API: reports and the held set.

/// How lockdep reports a possible deadlock; set for the whole process by [`set_report`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Report {
    /// The acquire panics with the report as its message (a `String`), before it touches
    /// the lock. The default. On a thread that is already panicking (an acquire in a
    /// `Drop` run by an unwind), where a second panic would abort the process, the report
    /// is written to the standard error instead, as [`Report::Stderr`].
    Panic,
    /// The report is written to the standard error, and the acquire goes on.
    Stderr,
    /// An error event (target `async_rwsem::lockdep`), and the acquire goes on.
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    Tracing,
    /// Nothing is checked or reported (the held sets are still kept).
    Off,
}

/// The report not yet read from the environment.
const REPORT_UNSET: u8 = u8::MAX;

/// The report of the process, as [`Report::to_u8`] encodes it.
static REPORT: AtomicU8 = AtomicU8::new(REPORT_UNSET);

impl Report {
    fn to_u8(self) -> u8 {
        match self {
            Report::Panic => 0,
            Report::Stderr => 1,
            #[cfg(feature = "tracing")]
            Report::Tracing => 2,
            Report::Off => 3,
        }
    }

    fn from_u8(value: u8) -> Self {
        match value {
            1 => Report::Stderr,
            #[cfg(feature = "tracing")]
            2 => Report::Tracing,
            3 => Report::Off,
            _ => Report::Panic,
        }
    }

    /// The report `ASYNC_RWSEM_LOCKDEP` names; [`Report::Panic`] if unset or unknown.
    fn from_env() -> Self {
        match std::env::var("ASYNC_RWSEM_LOCKDEP").as_deref() {
            Ok("stderr") => Report::Stderr,
            #[cfg(feature = "tracing")]
            Ok("tracing") => Report::Tracing,
            Ok("off") => Report::Off,
            _ => Report::Panic,
        }
    }
}

/// Sets how lockdep reports, for the whole process, from the next acquire on.
///
/// ```
/// use async_rwsem::lockdep::{self, Report};
///
/// lockdep::set_report(Report::Stderr);
/// assert_eq!(lockdep::report(), Report::Stderr);
/// lockdep::set_report(Report::Panic);
/// ```
pub fn set_report(report: Report) {
    REPORT.store(report.to_u8(), Relaxed);
}

/// How lockdep reports now: what [`set_report`] set last, else what the environment
/// variable `ASYNC_RWSEM_LOCKDEP` says (`panic`, `stderr`, `tracing` or `off`), else
/// [`Report::Panic`].
pub fn report() -> Report {
    let value = REPORT.load(Relaxed);
    if value != REPORT_UNSET {
        return Report::from_u8(value);
    }
    let report = Report::from_env();
    // A `set_report` meanwhile wins.
    match REPORT.compare_exchange(REPORT_UNSET, report.to_u8(), Relaxed, Relaxed) {
        Ok(_) => report,
        Err(set) => Report::from_u8(set),
    }
}

/// A mode a lock is held in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A read lock.
    Read,
    /// The upgradable read lock.
    UpgradableRead,
    /// The write lock.
    Write,
}

impl Mode {
    fn of(kind: WaiterKind) -> Self {
        match kind {
            WaiterKind::Read => Mode::Read,
            WaiterKind::UpgradableRead => Mode::UpgradableRead,
            WaiterKind::Write | WaiterKind::Upgrade => Mode::Write,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Read => "read",
            Mode::UpgradableRead => "upgradable read",
            Mode::Write => "write",
        })
    }
}

/// A lock the current task (or thread) holds, as [`held`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldLock {
    /// The lock's class, as reports write it: `"name"` (with `/subclass` if not 0) or
    /// `RwLock created at file:line:column`.
    pub class: String,
    /// The mode it is held in now (after downgrades and upgrades).
    pub mode: Mode,
    /// Where it was acquired.
    pub location: &'static Location<'static>,
}

/// The locks the current task (or, outside a task, thread) holds, oldest first: those it
/// acquired and has not released, wherever their guards are now.
///
/// ```
/// use async_rwsem::lockdep::{self, Mode};
/// use async_rwsem::RwLock;
///
/// let lock = RwLock::new(0).with_lockdep_class("doc: held");
/// let guard = lock.try_read().unwrap();
/// let held = lockdep::held();
/// assert_eq!(held.len(), 1);
/// assert_eq!((held[0].class.as_str(), held[0].mode), (r#""doc: held""#, Mode::Read));
/// drop(guard);
/// assert!(lockdep::held().is_empty());
/// ```
pub fn held() -> Vec<HeldLock> {
    let holder = Holder::current();
    let state = state();
    state.held.get(&holder).map_or_else(Vec::new, |entries| {
        entries
            .iter()
            .map(|entry| HeldLock {
                class: state.classes[entry.class as usize].to_string(),
                mode: entry.mode,
                location: entry.site,
            })
            .collect()
    })
}

// ---------------------------------------------------------------------------------------
// The per-lock and per-hold state the hook layer keeps.

/// What a class is made of before it is registered: where the lock was created, or the
/// name the user gave it; and the subclass.
#[derive(Clone, Copy, Debug)]
enum Base {
    Site(&'static Location<'static>),
    Name(&'static str),
}

/// A lock's class: set when the lock is made (`const`), registered in the class table at
/// its first acquire, whose index it then caches.
#[derive(Debug)]
pub(crate) struct LockClass {
    base: Base,
    subclass: u32,
    /// The index in the class table plus one; 0 until registered.
    id: AtomicU32,
    /// The lock's number, its identity in the held sets: given at its first acquire,
    /// never reused, and moved with the lock (an address is neither); 0 until then.
    lock: AtomicU64,
}

impl LockClass {
    /// The class of a lock created at the caller's location.
    #[track_caller]
    pub(crate) const fn new() -> Self {
        Self {
            base: Base::Site(Location::caller()),
            subclass: 0,
            id: AtomicU32::new(0),
            lock: AtomicU64::new(0),
        }
    }

    /// Names the class (the lock is not shared: `&mut`).
    pub(crate) const fn set_name(&mut self, name: &'static str) {
        self.base = Base::Name(name);
        // A lock acquired before it was named was registered under its creation site.
        self.id = AtomicU32::new(0);
    }

    /// Sets the subclass (the lock is not shared: `&mut`).
    pub(crate) const fn set_subclass(&mut self, subclass: u32) {
        self.subclass = subclass;
        self.id = AtomicU32::new(0);
    }

    /// The key of the class table.
    fn key(&self) -> ClassKey {
        let base = match self.base {
            Base::Site(site) => KeyBase::Site(site.file(), site.line(), site.column()),
            Base::Name(name) => KeyBase::Name(name),
        };
        ClassKey {
            base,
            subclass: self.subclass,
        }
    }
}

impl Default for LockClass {
    #[track_caller]
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for LockClass {
    /// The lock is gone: so are its holds that no guard will ever release (guards that
    /// were `mem::forget`-ed or leaked), taken off the sets of their holders. Nothing is
    /// left to order their holders' acquires, or to match a later lock.
    fn drop(&mut self) {
        let lock = *self.lock.get_mut();
        if lock == 0 {
            return; // never acquired
        }
        let mut state = state();
        if state.holds.remove(&lock).is_none() {
            return; // every hold released
        }
        state.held.retain(|_, entries| {
            entries.retain(|entry| entry.lock != lock);
            !entries.is_empty()
        });
    }
}

/// Which holder a held lock was charged to, and its entry there (0: not charged).
#[derive(Debug)]
pub(crate) struct HeldState {
    holder: Holder,
    entry: u64,
}

// ---------------------------------------------------------------------------------------
// The calls of the hook layer.

/// An acquire of `raw` in the mode `kind` names, called at `site`, is about to start.
/// Checks it against what the current holder holds if it can wait, adds its orders, and
/// reports, with lockdep's mutex released and before the lock is touched.
pub(crate) fn acquiring(
    raw: &RawRwLock,
    kind: WaiterKind,
    site: &'static Location<'static>,
    attempt: Attempt,
) {
    if attempt == Attempt::Try {
        return;
    }
    #[cfg(test)]
    if CHECKS_OFF.try_with(Cell::get).unwrap_or(false) {
        return;
    }
    let report = report();
    if report == Report::Off {
        return;
    }
    let holder = Holder::current();
    let message = {
        let mut state = state();
        let class = state.class_id(&raw.observe.lockdep);
        let lock = state.lock_id(&raw.observe.lockdep);
        state.check(holder, lock, class, kind, site, attempt == Attempt::Upgrade)
    };
    if let Some(message) = message {
        deliver(report, &message);
    }
}

/// `raw` is owned now, in the mode `kind` names, by an acquire called at `site`: charges
/// it to the current holder. Never panics, and runs no foreign code.
pub(crate) fn acquired(
    raw: &RawRwLock,
    kind: WaiterKind,
    site: &'static Location<'static>,
) -> HeldState {
    let holder = Holder::current();
    let mut state = state();
    let class = state.class_id(&raw.observe.lockdep);
    let lock = state.lock_id(&raw.observe.lockdep);
    state.next_entry += 1;
    let entry = state.next_entry;
    state.held.entry(holder).or_default().push(Entry {
        id: entry,
        lock,
        class,
        mode: Mode::of(kind),
        site,
    });
    *state.holds.entry(lock).or_default() += 1;
    HeldState { holder, entry }
}

/// The held lock changed its mode to the one `to` names (a downgrade or an upgrade).
pub(crate) fn changed(held: &mut HeldState, to: WaiterKind) {
    if held.entry == 0 {
        return;
    }
    let mut state = state();
    if let Some(entry) = state
        .held
        .get_mut(&held.holder)
        .and_then(|entries| entries.iter_mut().find(|entry| entry.id == held.entry))
    {
        entry.mode = Mode::of(to);
    }
}

/// The held lock was released: takes it off the set of the holder it was charged to,
/// whoever releases it.
pub(crate) fn released(held: HeldState) {
    if held.entry == 0 {
        return;
    }
    let mut state = state();
    let Some(entries) = state.held.get_mut(&held.holder) else {
        return;
    };
    let Some(at) = entries.iter().position(|entry| entry.id == held.entry) else {
        return;
    };
    let lock = entries.remove(at).lock;
    if entries.is_empty() {
        state.held.remove(&held.holder);
    }
    if let Some(holds) = state.holds.get_mut(&lock) {
        *holds -= 1;
        if *holds == 0 {
            state.holds.remove(&lock);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Whether the checks are off on this thread (the crate's own tests).
    static CHECKS_OFF: Cell<bool> = const { Cell::new(false) };
}

/// Turns lockdep's checks off on this thread until the guard returned is dropped: the
/// crate's own unit tests (`cfg(test)` only; nothing of it is in a user's build), whose
/// mock tasks, polled by hand on the test's thread, are one holder to lockdep, and take
/// on purpose the orders it reports (a read while "another task" holds the write lock is
/// a recursive acquire to lockdep). The acquires are still charged to their holder and
/// released; only [`acquiring`]'s checks (and so its reports and new orders) are skipped,
/// for acquires made on this thread, whatever [`report`] says. Tests of lockdep itself
/// (`tests/lockdep.rs`) leave it on.
#[cfg(test)]
#[must_use = "the checks are back on when the guard is dropped"]
pub(crate) fn off_on_this_thread() -> ChecksOff {
    ChecksOff {
        was_off: CHECKS_OFF.with(|off| off.replace(true)),
        _not_send: std::marker::PhantomData,
    }
}

/// The guard of [`off_on_this_thread`]: the checks are as they were when it is dropped.
/// Not `Send`: it stands for its thread.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct ChecksOff {
    was_off: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

#[cfg(test)]
impl Drop for ChecksOff {
    fn drop(&mut self) {
        let _ = CHECKS_OFF.try_with(|off| off.set(self.was_off));
    }
}

/// Makes a report: foreign code (a panic, a subscriber), so never under lockdep's mutex.
///
/// An acquire may run while its thread unwinds (a `Drop` that takes a lock, in a value
/// dropped by a panic): there a panic would abort the process ("panic in a destructor
/// during cleanup"), so the report goes to standard error instead of panicking, and a
/// subscriber's panic is caught ([`crate::observe::foreign`]).
fn deliver(report: Report, message: &str) {
    match report {
        Report::Panic if std::thread::panicking() => {
            let _ = writeln!(
                std::io::stderr(),
                "{message}\n  (reported on standard error: the thread is already panicking)"
            );
        }
        Report::Panic => panic!("{message}"),
        Report::Stderr => {
            // A closed standard error loses the report; it must not panic.
            let _ = writeln!(std::io::stderr(), "{message}");
        }
        #[cfg(feature = "tracing")]
        Report::Tracing => crate::observe::foreign(|| {
            tracing::error!(target: "async_rwsem::lockdep", "{message}");
        }),
        Report::Off => {}
    }
}

// ---------------------------------------------------------------------------------------
// Holders.

/// Who holds locks: a tokio task, or else a thread (numbered by lockdep).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Holder {
    #[cfg(feature = "tokio")]
    Task(tokio::task::Id),
    Thread(u64),
}

/// The number of the next thread that acquires.
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number.
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Relaxed);
}

impl Holder {
    fn current() -> Self {
        #[cfg(feature = "tokio")]
        if let Some(task) = tokio::task::try_id() {
            return Holder::Task(task);
        }
        // In a thread-local destructor the number may be gone: a new one (the thread's
        // acquires there are not ordered with its earlier ones).
        Holder::Thread(
            THREAD
                .try_with(|thread| *thread)
                .unwrap_or_else(|_| NEXT_THREAD.fetch_add(1, Relaxed)),
        )
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "tokio")]
            Holder::Task(task) => write!(f, "task {task}"),
            Holder::Thread(thread) => write!(f, "thread #{thread}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The process-wide state: classes, the order graph, the held sets.

/// A class's identity in the table: the creation site by value (one site may have
/// several `Location` statics), or the name; and the subclass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ClassKey {
    base: KeyBase,
    subclass: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum KeyBase {
    Site(&'static str, u32, u32),
    Name(&'static str),
}

impl fmt::Display for ClassKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.base {
            KeyBase::Site(file, line, column) => {
                write!(f, "RwLock created at {file}:{line}:{column}")?;
            }
            KeyBase::Name(name) => write!(f, "\"{name}\"")?,
        }
        if self.subclass != 0 {
            write!(f, "/{}", self.subclass)?;
        }
        Ok(())
    }
}

/// A lock a holder holds.
#[derive(Debug)]
struct Entry {
    id: u64,
    /// The lock's number (`LockClass::lock`).
    lock: u64,
    class: u32,
    mode: Mode,
    site: &'static Location<'static>,
}

/// An order seen: a holder held a lock of the first class (acquired at `held_site`) and
/// acquired one of the second (at `site`), the first time it was seen.
#[derive(Debug)]
struct Edge {
    held_mode: Mode,
    held_site: &'static Location<'static>,
    mode: Mode,
    site: &'static Location<'static>,
    holder: Holder,
}

#[derive(Debug, Default)]
struct State {
    /// The classes, by index.
    classes: Vec<ClassKey>,
    ids: HashMap<ClassKey, u32>,
    /// The orders seen, and the classes each class was seen before.
    edges: HashMap<(u32, u32), Edge>,
    after: Vec<Vec<u32>>,
    held: HashMap<Holder, Vec<Entry>>,
    next_entry: u64,
    /// The number of holds in the held sets, by lock number (the locks held now).
    holds: HashMap<u64, u32>,
    /// The last lock number given.
    next_lock: u64,
    /// The recursions reported (the two locations), each reported once.
    recursions: HashSet<(&'static Location<'static>, &'static Location<'static>)>,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(Mutex::default);

/// Lockdep's state. Nothing panics while it is locked, but a poisoned mutex is taken as
/// it is: lockdep must never stop a release.
fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// The index of the class, registered if new.
    fn class_id(&mut self, class: &LockClass) -> u32 {
        let cached = class.id.load(Relaxed);
        if cached != 0 {
            return cached - 1;
        }
        let key = class.key();
        let id = match self.ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.classes.len()).expect("fewer than 2^32 classes");
                self.classes.push(key);
                self.after.push(Vec::new());
                self.ids.insert(key, id);
                id
            }
        };
        class.id.store(id + 1, Relaxed);
        id
    }

    /// The lock's number, given now if it has none (under lockdep's mutex: one each).
    fn lock_id(&mut self, class: &LockClass) -> u64 {
        let lock = class.lock.load(Relaxed);
        if lock != 0 {
            return lock;
        }
        self.next_lock += 1;
        class.lock.store(self.next_lock, Relaxed);
        self.next_lock
    }

    /// Checks an acquire that can wait against the locks `holder` holds, adds its
    /// orders, and returns the report to make, if any.
    fn check(
        &mut self,
        holder: Holder,
        lock: u64,
        class: u32,
        kind: WaiterKind,
        site: &'static Location<'static>,
        upgrade: bool,
    ) -> Option<String> {
        let mode = Mode::of(kind);
        let held: Vec<(u64, u32, Mode, &'static Location<'static>)> = self
            .held
            .get(&holder)
            .map(|entries| {
                entries
                    .iter()
                    .map(|entry| (entry.lock, entry.class, entry.mode, entry.site))
                    .collect()
            })
            .unwrap_or_default();

        // The same lock again.
        for &(held_lock, _, held_mode, held_site) in &held {
            if held_lock != lock {
                continue;
            }
            let why = match (upgrade, kind, held_mode) {
                // The one legal acquire of a held lock.
                (true, _, Mode::UpgradableRead) => continue,
                (true, _, _) => {
                    "an upgrade waits for every other reader to leave, this holder's own too"
                }
                (_, _, Mode::Write) => "the write lock it holds excludes every other acquire",
                (_, WaiterKind::Read, _) => {
                    "a reader queues behind a writer that queues in between, and the writer \
                     waits for the lock this holder holds (tokio issue 2849)"
                }
                _ => "the lock this holder holds excludes this acquire",
            };
            if !self.recursions.insert((held_site, site)) {
                return None;
            }
            let name = self.classes[class as usize];
            return Some(format!(
                "async-rwsem lockdep: possible deadlock: recursive acquire of one lock\n  \
                 {holder} acquires {name} ({mode}) at {site}\n  \
                 while it holds that lock ({held_mode}, acquired at {held_site}):\n  {why}"
            ));
        }
        if upgrade {
            // An upgrade waits only for the lock's readers; its order against the other
            // locks held is not checked.
            return None;
        }

        // The orders: each class held, then this one.
        let mut report = None;
        for &(_, held_class, held_mode, held_site) in &held {
            if self.edges.contains_key(&(held_class, class)) {
                continue;
            }
            self.edges.insert(
                (held_class, class),
                Edge {
                    held_mode,
                    held_site,
                    mode,
                    site,
                    holder,
                },
            );
            self.after[held_class as usize].push(class);
            if report.is_some() {
                continue;
            }
            report = if held_class == class {
                let name = self.classes[class as usize];
                Some(format!(
                    "async-rwsem lockdep: possible deadlock: two locks of one class held at once\n  \
                     {holder} acquires {name} ({mode}) at {site}\n  \
                     while it holds another lock of that class ({held_mode}, acquired at \
                     {held_site}):\n  lockdep cannot order them; if they nest, give the \
                     inner one another subclass (RwLock::with_lockdep_subclass)"
                ))
            } else {
                self.path(class, held_class)
                    .map(|path| self.cycle_report(held_class, class, &path))
            };
        }
        report
    }

    /// A path of orders from class `from` to class `to`, as the classes after `from`, if
    /// there is one (breadth first: the shortest).
    fn path(&self, from: u32, to: u32) -> Option<Vec<u32>> {
        let mut parent: HashMap<u32, u32> = HashMap::new();
        let mut queue = VecDeque::from([from]);
        while let Some(class) = queue.pop_front() {
            for &next in &self.after[class as usize] {
                if next == from || parent.contains_key(&next) {
                    continue;
                }
                parent.insert(next, class);
                if next == to {
                    let mut path = vec![to];
                    let mut at = to;
                    while let Some(&before) = parent.get(&at) {
                        if before == from {
                            break;
                        }
                        path.push(before);
                        at = before;
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(next);
            }
        }
        None
    }

    /// The report of the new order `first -> second` that closes a cycle back to
    /// `first` through `path` (the classes after `second`, ending with `first`).
    fn cycle_report(&self, first: u32, second: u32, path: &[u32]) -> String {
        let mut classes = vec![first, second];
        classes.extend_from_slice(path);
        let names: Vec<String> = classes
            .iter()
            .map(|&class| self.classes[class as usize].to_string())
            .collect();
        let mut report = format!(
            "async-rwsem lockdep: possible deadlock: lock order cycle of {} classes: {}\n",
            classes.len() - 1,
            names.join(" -> ")
        );
        for (i, pair) in classes.windows(2).enumerate() {
            let edge = &self.edges[&(pair[0], pair[1])];
            let when = if i == 0 { "now" } else { "seen before" };
            let _ = writeln!(
                report,
                "  {} -> {} ({when}, {}): held {} ({}, acquired at {}), then acquired {} ({}) at {}",
                names[i],
                names[i + 1],
                edge.holder,
                names[i],
                edge.held_mode,
                edge.held_site,
                names[i + 1],
                edge.mode,
                edge.site,
            );
        }
        report.pop();
        report
    }
}
