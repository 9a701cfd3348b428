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
//!   acquires the first time it was seen. An edge that closes a cycle is reported with
//!   every edge of the cycle and its two locations, once: the same cycle made again
//!   later, by any holders, is not reported again, in any [`Report`] mode. Every mode
//!   of the lock counts: a cycle of
//!   reads deadlocks too, once a writer queues at each lock (a reader then queues behind
//!   the writer, which waits for the other reader).
//! - **Upgrades**: an upgrade is an acquisition of the write side: holding B while
//!   upgrading A is the edge "B, then A (write)". An upgrade waits for readers only, and
//!   one holder at a time has the upgradable read, so the cycle it closes is reported
//!   when the order out of A in it was made holding A for *reading* (a task that takes
//!   A's upgradable read, then B's read, then upgrades A, and one that takes A's read,
//!   then B's write, are reported; the first alone, in any number of tasks, is not).
//! - **Recursion**: an acquire of a lock the holder already holds, in any mode: a write
//!   or an upgradable read waits for the holder's own lock, and a read while holding a
//!   read (or the upgradable read) waits as soon as a writer queues in between (tokio's
//!   issue 2849). An upgrade waits for every other reader: an upgrade while the holder
//!   also holds a plain read of the lock is a recursion too. The upgrade of the
//!   upgradable read that the holder holds is the one legal acquire of a held lock. A
//!   blocking acquire (on a thread, or inside a task: `spawn_blocking`, `block_in_place`)
//!   is reported at once, as its thread waits for ever; an async acquire as *Futures
//!   inside one task* says. Each pair of locations (the held lock's acquire, this one) is
//!   reported once. Every hold of the lock the acquire conflicts with is checked, not
//!   only the first.
//! - **Two locks of one class**: holding a lock of a class while acquiring another of the
//!   same class is reported (the edge "A, then A"), as the kernel does: lockdep cannot
//!   order them. Locks that do nest give each level its own subclass (below). For async
//!   acquires it is a cycle of one order, and follows their rule (*Futures inside one
//!   task*): reported once two holders made it.
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
//! Lockdep never frees what it learns, as the kernel's does not: each class (a place
//! where locks are made, a name, each subclass of them) takes about 100 bytes, each order
//! between two classes about as much, each chain checked about 50. Classes are meant to
//! be few: a subclass is a nesting level, not an identity. A map of N shards given their
//! index as subclass is N classes, and its orders are the pairs of shards actually taken
//! together (for a server whose commands take shards by index, at most N(N-1)/2; 64
//! shards: 2,016 orders, a few hundred KB at most). Never give each object its own class
//! or subclass (a row's key, a connection's number): 100,000 of them cost about 10 MB,
//! and the orders between them grow with their square.
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
//! # Holders: tasks, the futures inside them, and threads
//!
//! The holder of an acquire is the tokio task it runs in (`tokio::task::try_id`, with the
//! feature `tokio`), or else the thread (blocking acquires, other executors); and, for an
//! async acquire (announced at its future's first poll, upgrades included), the future
//! that made it, told apart by the waker it is polled with. The children of a
//! `FuturesUnordered` (and so of `buffer_unordered`, and of the pools built on it) are
//! each polled with a waker of their own, as are the tasks of other executors: each is a
//! holder of its own, as a task is. The branches of `join!` and `select!` are polled with
//! their task's waker: they are one holder. A blocking or `try_` acquire is its task's or
//! thread's own, and sees the locks every future of it holds.
//!
//! In the orders lockdep remembers, each future is known by a number never reused, as a
//! task's id, not by its waker's address, which the next child of a `FuturesUnordered`
//! is often given once the one before it ended: two jobs run one after the other are two
//! holders. The number is given when the future first acquires holding a lock, and stays
//! bound to its waker's address while it is the only holder that made one of the graph's
//! orders; lockdep then keeps a clone of its waker (at most one per order of the graph),
//! which keeps the address from being given to another future. The locks a future holds
//! are known by its waker's address, which no other future can be given while the future
//! holds them; a guard that leaves its future (sent to a task, forgotten) keeps that
//! address while it lives: a new future polled with a waker at that address meanwhile
//! counts as the old one for that lock.
//!
//! A lock is charged to the holder that acquired it until it is released, and the
//! release takes it off that holder's set whichever task or thread drops the guard, so a
//! guard passed to another task leaves nothing behind. While such a guard is away, the
//! lock still counts as held by the task that acquired it, not by the one that has it:
//! that task's acquires are ordered after it (a task that sends a guard to a worker and
//! acquires the same lock again waits for the worker: reported if that wait lasts, as
//! below), and the receiving task's are not (an order it makes through that lock is not
//! seen). Acquire a lock in the task that holds it.
//!
//! A guard that is never dropped (`mem::forget`, a leaked `Box`) is never released: its
//! lock stays charged to the holder that acquired it for as long as the lock lives, so
//! that holder's next acquire of it is reported as recursion (for a write, or a read
//! behind a queued writer, a real self-deadlock: the lock is never released). Lockdep
//! knows a lock by a number it is given at its first acquire (moved with it, never
//! reused), not by its address: when the lock is dropped, its holds go with it, and a new
//! lock made in its place is a new lock.
//!
//! # Futures inside one task
//!
//! The branches of a `join!` or a `select!` share their task's waker, so lockdep cannot
//! tell a lock one branch holds across an `.await` from one the acquiring branch holds
//! itself. Of the two, only the second can deadlock: the first is released once its
//! branch is polled again. So, for a task (or any future polled with a waker):
//!
//! - **A recursive acquire is reported once it has waited [`deadlock_timeout`]** (1 s by
//!   default, [`set_deadlock_timeout`]) while one of the holds it conflicts with is still
//!   held (every one is watched: a sibling's read that came first and ended does not
//!   hide the future's own): a real self-deadlock waits forever, a sibling's hold ends.
//!   The report says `deadlock` (not `possible deadlock`) and how long the acquire
//!   waited; with [`Report::Panic`] the waiting acquire panics (a thread,
//!   `lockdep-watchdog`, wakes it at its deadline; the acquire is dropped as any
//!   cancelled one). A read while the future's task holds a read of the lock and a
//!   writer is queued (tokio issue 2849) is no exception: the read that came first may be
//!   a sibling's (`join_all` of reads), which ends on its own; the future's own is
//!   reported if the read waits (it passes the writer until the writer's handoff
//!   timeout is due, under the default policy; at once under [`Policy::fifo`](crate::Policy::fifo)).
//! - **A cycle that one holder's orders make alone is not reported**: the orders of two
//!   `join!` branches that each hold a lock look like one flow that takes both, and one
//!   flow, taking its locks one after the other, cannot deadlock with itself. A cycle is
//!   reported once two holders (two tasks, two threads, two children of a
//!   `FuturesUnordered`) made its orders. So is two locks of one class held at once (the
//!   futures of a `join_all` over per-item locks, each holding its own, look like one
//!   flow holding them all). A thread's orders, and a blocking acquire's, are one flow,
//!   and their cycles are reported as the kernel's are.
//! - **A lock an acquire owns before it completes orders nothing**: an async acquire
//!   that takes the lock and then yields (tokio's cooperative budget is spent: its next
//!   poll completes it) holds the lock, but no code of its future runs until then, so
//!   what a sibling acquires meanwhile (the other branch of a `futures::select!`) is not
//!   ordered after it.
//!
//! What this means, by example:
//!
//! | program | reported |
//! |---|---|
//! | `join!(a, b)`: `a` holds the write lock across a `sleep`, `b` reads | no |
//! | `join!` of two futures holding two locks across a `sleep`, then both taken in one order | no |
//! | a `FuturesUnordered` (or `buffer_unordered`) of jobs writing one lock across `.await`s | no |
//! | a `select!` loop whose branches write and read one lock | no |
//! | `join_all` (or `join!`) of reads of one lock, a writer of another task queued after the first | no |
//! | `join_all` over per-item locks made at one site (a `Vec<RwLock<Item>>`), each future holding its own | no |
//! | a `futures::select!` loop whose branches take one lock each (tokio's budget makes a branch yield owning it); another task takes them in either order | no |
//! | a borrowed upgrade in a `FuturesUnordered` job, waiting for another job's read | no |
//! | one future: a read, then a write, of one lock (beside a `join!` sibling's read too) | yes, after [`deadlock_timeout`] |
//! | `join!(a, b)`: `a` holds A and wants B, `b` holds B and wants A | yes, after [`deadlock_timeout`] |
//! | a read, then a read of one lock with a writer queued in between | yes, after [`deadlock_timeout`] if the read waits; a thread's at once |
//! | a blocking acquire of a lock the task holds (inside `spawn_blocking`), or a thread's | yes, at once |
//! | two tasks (or two jobs of a `FuturesUnordered`, at once or one after the other) taking A, B and B, A | yes, at once |
//! | one task taking A, B, later B, A (no other holder does) | no (two tasks are: yes) |
//! | a thread taking A, B, later B, A | yes, at once |
//! | two locks of one class nested by one task (two tasks, or a thread) | no (yes, at once) |
//! | the same cycle made again, by new tasks or threads | once, in every [`Report`] mode |
//! | `join!` branches: one holds A across an `.await` while the other takes B; another task takes B, A | yes (a false alarm) |
//! | the `join_all` over per-item locks above, run by two tasks | yes (a false alarm) |
//!
//! The last two rows are what lockdep still cannot tell, and why: the order two `join!`
//! branches make (one holds A across an `.await` while the other takes B) reaches the
//! lock exactly as a single future that holds A across an `.await` and then takes B: the
//! same task, the same waker, A acquired and not released before B. The branches are
//! polled inside one poll of the `join!`, with its waker; no acquire or release of the
//! lock sees which branch runs, and the future that holds A is not polled, so nothing of
//! it is there to see. So the task's "A, then B" is kept as an order, and another
//! holder's "B, then A" closes a cycle with it (and two tasks' `join_all` each make
//! "Item, then Item"). Spawn such branches as tasks (or poll them in a
//! `FuturesUnordered`, whose children have wakers of their own), or take their locks in
//! one order.
//!
//! Each row is a test of the repository (`tests/lockdep_tasks.rs`, `tests/lockdep.rs`,
//! `tests/lockdep_report.rs`).

//! # Reports
//!
//! A report names the holder, the classes, modes and locations. How it is made is chosen
//! per process with [`set_report`]: [`Report::Panic`] (the default: the acquire panics
//! before it touches the lock, so the task unwinds with its guards, as at any panic),
//! [`Report::Stderr`], `Report::Tracing` (an error event, target `async_rwsem::lockdep`,
//! with the feature `tracing`) or [`Report::Off`]. The environment variable
//! `ASYNC_RWSEM_LOCKDEP` (`panic`, `stderr`, `tracing` or `off`) sets the report until
//! [`set_report`] is called, so that a test suite that takes locks in such orders on
//! purpose can run with the feature on and reports off. A report is made after lockdep's
//! own mutexes are released, and before the lock is touched (a deadlock's, after the
//! acquire waited: the acquire is dropped), so a panicking report (or subscriber) leaves
//! every lock and lockdep itself as they were. A deadlock's report under
//! [`Report::Stderr`] or `Report::Tracing` is made on the watchdog's thread (a `tracing`
//! subscriber set for the task's thread only does not see it). Foreign code that runs on
//! the watchdog's thread (a waker's `wake` or `drop`, a subscriber) cannot stop it: its
//! panic is caught there, and the next deadlock is reported as any. An acquire made while
//! its thread unwinds (in a `Drop` run by a panic) never panics: its report goes to
//! standard error, and a subscriber's panic is caught, since a second panic would abort
//! the process. A release tells lockdep (and `lock_stat`) even if the wake-up of a
//! waiter in it panics.
//!
//! # Cost
//!
//! With the feature on, each thread keeps the held locks of the task (or thread) that
//! runs on it in a cache of its own: an acquire and a release made by that task on that
//! thread, the common case, write the cache with plain stores, and take no mutex. The
//! shared held sets (64 shards, picked by task or thread: two workers rarely want the
//! same one) are locked when a task charges a lock on a thread whose cache holds another
//! task's (the task moved, or another one ran there), and by other threads (a guard
//! released away from its task, the watchdog). An acquire that can wait reads its
//! holder (`tokio::task::try_id`, once per poll; an async acquire whose holder holds
//! nothing then charges its lock to the cache it found, with no second lookup) and, if
//! the holder holds any lock, walks
//! them, finds its future's number in a short list of its task's futures, hashes the
//! chain they form with the lock acquired and looks it up in a sharded table of chains
//! already checked (a read lock). Only a chain new to the process (or to a second
//! holder) takes the process-wide mutex of the class graph, adds its orders and searches
//! the graph for a cycle. So locks private to their tasks scale with workers as without
//! the feature. Measured at `4218152` on a 2-core AMD EPYC VM (`BUILDS="none lockdep"
//! scripts/observe-cost.sh 5 1`, medians of 5 interleaved runs): an uncontended
//! `read().await` + drop 21.5 ns (3.98x the build without observers), a write 20.3 ns
//! (4.23x), 8 tasks on one lock at 2 workers 1.02x, a lock per task 0.16x at 1 worker
//! and at 2, scaling x1.83 from 1 to 2 workers (x1.74 without observers). Since then the
//! uncontended acquire and release take 24% fewer instructions of lockdep's own (callgrind:
//! a read and a write 639 instructions, from 792; 147 without observers); on a 2-core
//! Intel Xeon VM, where the build without observers takes 13-14 ns, the same script at
//! `06fd842` gave a read 23.6 ns (x1.70 and x1.76 in two runs), a write 22.2 ns (x1.59,
//! x1.67), the shared lock 0.72 and 0.69, and scaling as without observers. More in the
//! repository's `docs/performance.md` (*What observing costs*). The graph only grows, by one entry
//! per class and per order seen, and the table of chains by one entry per chain. With
//! [`Report::Off`] an acquire still charges the held lock to its holder (`held` must find
//! it if reports are turned back on). Dropping a lock that still has holds (of forgotten
//! guards) walks every shard. Without the feature, none of this is compiled: not one
//! instruction is added to any acquire or release.

mod graph;
mod holders;
mod watch;

#[cfg(test)]
use std::cell::Cell;
use std::fmt;
use std::io::Write as _;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

use self::graph::ChainKey;
pub(crate) use self::holders::blocking;
use self::holders::{Caller, Entry, Holder};
use self::watch::Suspect;
pub(crate) use self::watch::Watch;
pub use self::watch::{deadlock_timeout, set_deadlock_timeout};
use crate::observe::Attempt;
use crate::raw::list::WaiterKind;

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

/// [`Report::Off`], as [`Report::to_u8`] encodes it.
const REPORT_OFF: u8 = 3;

/// The report of the process, as [`Report::to_u8`] encodes it.
static REPORT: AtomicU8 = AtomicU8::new(REPORT_UNSET);

impl Report {
    fn to_u8(self) -> u8 {
        match self {
            Report::Panic => 0,
            Report::Stderr => 1,
            #[cfg(feature = "tracing")]
            Report::Tracing => 2,
            Report::Off => REPORT_OFF,
        }
    }

    fn from_u8(value: u8) -> Self {
        match value {
            1 => Report::Stderr,
            #[cfg(feature = "tracing")]
            2 => Report::Tracing,
            REPORT_OFF => Report::Off,
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
#[inline]
pub fn report() -> Report {
    let value = REPORT.load(Relaxed);
    if value != REPORT_UNSET {
        return Report::from_u8(value);
    }
    report_from_env()
}

/// [`report`] before it was read from the environment.
#[cold]
#[inline(never)]
fn report_from_env() -> Report {
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
    /// This mode's bit in a set of modes.
    fn bit(self) -> u8 {
        match self {
            Mode::Read => 1,
            Mode::UpgradableRead => 2,
            Mode::Write => 4,
        }
    }

    /// The mode of a bit of [`Mode::bit`].
    fn from_bit(bit: u8) -> Self {
        match bit {
            1 => Mode::Read,
            2 => Mode::UpgradableRead,
            _ => Mode::Write,
        }
    }

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
    let caller = Caller::current();
    let key = caller.flow_key();
    let mut held: Vec<(u32, Mode, &'static Location<'static>)> = Vec::new();
    holders::for_each_held(caller.owner, |entry| {
        if caller.sees(entry, key) {
            held.push((entry.class, entry.mode, entry.site));
        }
    });
    held.into_iter()
        .map(|(class, mode, location)| HeldLock {
            class: graph::class_name(class),
            mode,
            location,
        })
        .collect()
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

/// A lock's class and identity: set when the lock is made (`const`), registered in the
/// class table at its first acquire, whose index it then caches.
#[derive(Debug)]
pub(crate) struct LockClass {
    base: Base,
    subclass: u32,
    /// The index in the class table plus one; 0 until registered.
    id: AtomicU32,
    /// The lock's number, its identity in the held sets: given at its first acquire,
    /// never reused, and moved with the lock (an address is neither); 0 until then.
    lock: AtomicU64,
    /// The shards of the held sets the lock was ever held in, a bit each (set with a
    /// load first: no write once set): where its forgotten holds may be.
    shards: AtomicU64,
}

/// The last lock number given.
static NEXT_LOCK: AtomicU64 = AtomicU64::new(0);

impl LockClass {
    /// The class of a lock created at the caller's location.
    #[track_caller]
    pub(crate) const fn new() -> Self {
        Self {
            base: Base::Site(Location::caller()),
            subclass: 0,
            id: AtomicU32::new(0),
            lock: AtomicU64::new(0),
            shards: AtomicU64::new(0),
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

    /// The lock's number, given now if it has none.
    #[inline]
    fn number(&self) -> u64 {
        let lock = self.lock.load(Relaxed);
        if lock != 0 {
            return lock;
        }
        self.first_number()
    }

    /// [`LockClass::number`] at the lock's first acquire.
    #[cold]
    #[inline(never)]
    fn first_number(&self) -> u64 {
        let new = NEXT_LOCK.fetch_add(1, Relaxed) + 1;
        match self.lock.compare_exchange(0, new, Relaxed, Relaxed) {
            Ok(_) => new,
            Err(first) => first,
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
        let (lock, shards) = (*self.lock.get_mut(), *self.shards.get_mut());
        if lock != 0 && shards != 0 {
            holders::forget_lock(lock, shards);
        }
    }
}

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

/// Which holder a held lock was charged to, its entry there, and where it was kept.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeldState(holders::Charge);

// ---------------------------------------------------------------------------------------
// The calls of the hook layer.

/// An acquire of the lock of `class` in the mode `kind` names, called at `site`, is about
/// to start. Checks it against what the current holder holds if it can wait, adds its
/// orders, and reports, with lockdep's locks released and before the lock is touched. An
/// async acquire's wait for a lock its own flow may hold is handed to the poll in
/// progress ([`Watch::poll`]), which watches it.
#[inline(always)]
pub(crate) fn acquiring(
    class: &LockClass,
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
    // `Report::Off` set: nothing to check. (Not read from the environment yet: `check`
    // reads it, if there is anything to check.)
    if REPORT.load(Relaxed) == REPORT_OFF {
        return;
    }
    let caller = Caller::current();
    if holders::announced_holding_nothing(&caller) {
        return; // nothing held: nothing to check
    }
    check(class, kind, site, attempt, caller);
}

/// [`acquiring`]'s checks, for a holder that holds something.
#[cold]
#[inline(never)]
fn check(
    class: &LockClass,
    kind: WaiterKind,
    site: &'static Location<'static>,
    attempt: Attempt,
    caller: Caller,
) {
    let report = report();
    if report == Report::Off {
        return;
    }
    let (class_id, lock) = (graph::class_id(class), class.number());
    let upgrade = attempt == Attempt::Upgrade;
    let mode = Mode::of(kind);

    // The holds of the same lock it conflicts with (every one, for the watch), and the
    // chain of the others.
    let mut chain = ChainKey::default();
    let mut conflicts = Vec::new();
    let mut first_conflict = None;
    let key = caller.flow_key();
    holders::for_each_held(caller.owner, |entry| {
        if !caller.sees(entry, key) {
            return;
        }
        if entry.lock == lock {
            if let Some(why) = recursion(upgrade, kind, entry.mode) {
                first_conflict.get_or_insert((entry.mode, entry.site, why));
                conflicts.push(entry.id);
            }
            return;
        }
        if entry.settled {
            chain.push(entry.class, entry.mode);
        }
    });

    if let Some((held_mode, held_site, why)) = first_conflict {
        let name = graph::class_name(class_id);
        let holder = caller.owner;
        if caller.is_async() {
            // Maybe a sibling's hold (`join!`, `select!`): reported only if the acquire
            // waits too long, one of the holds still there.
            let message = format!(
                "async-rwsem lockdep: deadlock: recursive acquire of one lock\n  \
                 {holder} acquires {name} ({mode}) at {site}, and has waited {{waited}} for it\n  \
                 while it holds that lock ({held_mode}, acquired at {held_site}):\n  {why}"
            );
            watch::set_pending(Suspect::new(holder, conflicts, lock, message));
            return;
        }
        if graph::first_recursion(held_site, site) {
            deliver(
                report,
                &format!(
                    "async-rwsem lockdep: possible deadlock: recursive acquire of one lock\n  \
                     {holder} acquires {name} ({mode}) at {site}\n  \
                     while it holds that lock ({held_mode}, acquired at {held_site}):\n  {why}"
                ),
            );
        }
        return;
    }
    if chain.is_empty() {
        return;
    }
    // The flow's number, for the graph; a future not bound to a number yet (it holds
    // nothing of its own): a new one.
    let holder = Holder {
        owner: caller.owner,
        flow: caller.flow().unwrap_or_else(holders::next_entry),
    };
    let chain_key = chain.finish(class_id, mode, upgrade);
    if graph::validated(chain_key, holder) {
        return;
    }
    // A chain not yet checked for this holder: the orders, under the graph's mutex.
    let mut held: Vec<graph::Held> = Vec::new();
    holders::for_each_held(caller.owner, |entry| {
        if caller.sees(entry, key) && entry.lock != lock && entry.settled {
            held.push((entry.class, entry.mode, entry.site));
        }
    });
    let acquire = graph::Acquire {
        holder,
        class: class_id,
        mode,
        upgrade,
        site,
    };
    let (message, sole) = graph::record(acquire, &held, chain_key);
    for (flow, delta) in sole {
        holders::sole_orders(&caller, flow, delta);
    }
    if let Some(message) = message {
        deliver(report, &message);
    }
}

/// Why an acquire (`upgrade`: an upgrade) in the mode `kind` names of a lock its holder
/// holds in `held` waits for that hold, if it does.
fn recursion(upgrade: bool, kind: WaiterKind, held: Mode) -> Option<&'static str> {
    Some(match (upgrade, kind, held) {
        // The one legal acquire of a held lock.
        (true, _, Mode::UpgradableRead) => return None,
        (true, _, _) => "an upgrade waits for every other reader to leave, this holder's own too",
        (_, _, Mode::Write) => "the write lock it holds excludes every other acquire",
        (_, WaiterKind::Read, _) => {
            "a reader queues behind a writer that queues in between, and the writer \
             waits for the lock this holder holds (tokio issue 2849)"
        }
        _ => "the lock this holder holds excludes this acquire",
    })
}

/// The lock of `class` is owned now, in the mode `kind` names, by an acquire called at
/// `site`: charges it to the current holder. Never panics, and runs no foreign code.
#[inline(always)]
pub(crate) fn acquired(
    class: &LockClass,
    kind: WaiterKind,
    site: &'static Location<'static>,
) -> HeldState {
    let (class_id, lock) = (graph::class_id(class), class.number());
    let mode = Mode::of(kind);
    // The common case: an async acquire whose announcement, in this poll, found its
    // holder holding nothing.
    if let Some(charge) = holders::charge_ready(lock, class_id, mode, site, &class.shards) {
        return HeldState(charge);
    }
    let caller = Caller::current();
    let charge = holders::charge(
        Entry {
            owner: caller.owner,
            id: 0, // given by `charge`
            lock,
            class: class_id,
            mode,
            site,
            flow: caller.flow_key(),
            settled: true,
        },
        &class.shards,
        caller.is_async(),
    );
    HeldState(charge)
}

/// The held lock changed its mode to the one `to` names (a downgrade or an upgrade).
#[inline]
pub(crate) fn changed(held: &mut HeldState, to: WaiterKind) {
    holders::set_mode(held.0, Mode::of(to));
}

/// The held lock was released: takes it off the set of the holder it was charged to,
/// whoever releases it.
#[inline(always)]
pub(crate) fn released(held: &HeldState) {
    holders::release(held.0);
}

/// Panics with `message` as the payload (a `String`), as `panic!` would, but prints it
/// itself, with the backtrace (when `RUST_BACKTRACE` asks for one) from the user's first
/// frame on: the frames of the panic machinery and of the lock are left out. The panic
/// hook is not run (`resume_unwind`): a test harness sees the payload, a `JoinError` has
/// it, `catch_unwind` catches it.
fn panic_with(message: &str) -> ! {
    let backtrace = std::backtrace::Backtrace::capture();
    let mut err = std::io::stderr().lock();
    let thread = std::thread::current();
    let _ = writeln!(
        err,
        "\nthread '{}' panicked with a lockdep report:\n{message}",
        thread.name().unwrap_or("<unnamed>")
    );
    if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
        let _ = writeln!(
            err,
            "stack backtrace (from the first frame outside async-rwsem and std):\n{}",
            user_frames(&backtrace.to_string())
        );
    }
    drop(err);
    std::panic::resume_unwind(Box::new(message.to_owned()))
}

/// The frames of a printed backtrace from the first one that is not the lock's, std's or
/// core's (a frame: its numbered line, then its `at` lines).
fn user_frames(backtrace: &str) -> String {
    let mut out = String::new();
    let mut keep = false;
    for line in backtrace.lines() {
        let frame = line.trim_start();
        let numbered = frame
            .split_once(": ")
            .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()));
        if numbered && !keep {
            let symbol = frame.split_once(": ").map_or("", |(_, symbol)| symbol);
            let symbol = symbol.trim_start_matches('<');
            keep = ![
                "async_rwsem::",
                "std::",
                "core::",
                "alloc::",
                "__rustc",
                "rust_begin_unwind",
            ]
            .iter()
            .any(|internal| symbol.starts_with(internal));
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
thread_local! {
    /// Whether the checks are off on this thread (the crate's own tests).
    static CHECKS_OFF: Cell<bool> = const { Cell::new(false) };
}

/// Turns lockdep's checks off on this thread until the guard returned is dropped: the
/// crate's own unit tests (`cfg(test)` only; nothing of it is in a user's build) that
/// take on purpose, on one thread, the orders it reports. The acquires are still charged
/// to their holder and released; only [`acquiring`]'s checks (and so its reports and new
/// orders) are skipped, for acquires made on this thread, whatever [`report`] says.
/// Tests of lockdep itself (`tests/lockdep.rs`) leave it on.
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

/// Makes a report: foreign code (a panic, a subscriber), so never under lockdep's locks.
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
        Report::Panic => panic_with(message),
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
