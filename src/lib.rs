//! An async read-write lock built the way the Linux kernel builds its `rw_semaphore`, with
//! the API of `tokio::sync::RwLock`.
//!
//! # Quick start
//!
//! ```
//! use std::sync::Arc;
//! use async_rwsem::RwLock; // was: use tokio::sync::RwLock;
//!
//! # #[tokio::main]
//! # async fn main() {
//! let config = Arc::new(RwLock::new(String::from("v1")));
//!
//! let reader = {
//!     let config = Arc::clone(&config);
//!     tokio::spawn(async move { config.read().await.len() })
//! };
//! config.write().await.push_str("-patched");
//! assert!(reader.await.unwrap() >= 2);
//! assert_eq!(*config.read().await, "v1-patched");
//! # }
//! ```
//!
//! [`RwLock`] has tokio's names (`new`, `read`, `write`, `try_read`, `write_owned`,
//! `blocking_read`, guards with `map` and `downgrade`, ...), so moving a program over is a
//! change of `use`. It runs on any executor: it needs only `std` and wakers. On top of
//! tokio's API it has upgradable reads ([`RwLock::upgradable_read`]), a [`Policy`] per
//! lock, and `parking_lot`'s `is_locked`, `unlock_fair` and timed blocking acquires.
//!
//! # Feature flags
//!
//! - **`tokio`** (on by default): tokio's cooperative scheduling, and timeouts.
//!   - Inside a tokio runtime the async acquires (`read`, `write`, `upgradable_read` and
//!     their owned forms) take a unit of the task's budget once they own the lock, and a
//!     task whose budget is spent yields there: one acquire in eight of a thread under the
//!     default policy (the check costs about as much as an uncontended acquire), every
//!     acquire under `Policy::fifo()`, as tokio's own lock does. So on a
//!     current-thread runtime `while !*flag.read().await {}` lets the task that writes the
//!     flag run; without the feature that loop never yields. The `try_` and blocking
//!     acquires, upgrades and downgrades take no budget. Outside a tokio runtime the check
//!     never yields. A task that must not yield can use `tokio::task::coop::unconstrained`.
//!   - `RwLock::read_timeout`, `write_timeout` and `upgradable_read_timeout`: give up
//!     after a `Duration` (with the error `Elapsed`), with nothing held or queued; they
//!     need a tokio runtime with time enabled.
//!   - `RwLockUpgradableReadGuard::upgrade_timeout` (and the owned form): an upgrade
//!     that gives the guard back, still holding its lock, if the time runs out.
//!   - `From<tokio::sync::TryLockError>` for [`TryLockError`], so `?` works over both.
//!
//!   It is on by default so that the one-line swap from tokio's lock keeps tokio's
//!   scheduling. On another executor, turn it off: `default-features = false` (no tokio
//!   dependency at all).
//! - **`stats`**: `RwLock::stats()`, per-lock counters of the kernel's lock events.
//! - **`lock_stat`** (enables `stats`): `RwLock::lock_stat()`, the kernel's `lock_stat`
//!   per lock: log2 histograms of the wait and hold times of readers and writers (count,
//!   mean, p50, p99, max), contentions, and the longest hold with the location of the
//!   acquire that took it, printed as a table by its `Display`; and in
//!   [`RwLock::snapshot`] (always there) the writer or upgradable reader holding the lock,
//!   where it took it and for how long. It costs a clock read when a lock is taken and
//!   one when it is released. With `tracing` too: the policy's `warn_held_longer_than`
//!   and `warn_waited_longer_than` emit warnings (target `async_rwsem::lock_stat`) for
//!   guards held, and acquires waiting, past them. See the `lock_stat` module.
//! - **`tracing`**: `tracing` events (target `async_rwsem::contention`, level TRACE)
//!   named after the kernel's tracepoints: `contention_begin` when an acquire first has to
//!   wait, `contention_end` when it stops, with `wait_us` and `acquired`.
//!
//!   With it, built with `RUSTFLAGS="--cfg tokio_unstable"` as tokio's own
//!   instrumentation is, each lock is visible in
//!   [tokio-console](https://github.com/tokio-rs/console), as tokio's `RwLock` is: the
//!   spans and events tokio's lock emits for `console-subscriber` (a `runtime.resource`
//!   span with where the lock was made, `current_readers` and `write_locked`, and every
//!   async acquire, the upgrades and timed ones included, as an async operation of the
//!   task that awaits it). The constructors are `const`, so a lock's span is made at its
//!   first acquire: a lock never acquired is not listed. `examples/console.rs` (in the
//!   repository) shows the set-up.
//! - **`lockdep`**: lock-order checking for debug builds and tests, the kernel's
//!   `lockdep` with tasks for threads (and the futures a task runs at once, told apart by
//!   their wakers, each known by a number never reused): an acquire whose order of lock
//!   classes closes a cycle that two holders made is reported (a panic, by default) once,
//!   the first time it happens, even if nothing deadlocks in that run; an acquire of a
//!   lock its holder already holds is reported at once from a blocking acquire (a
//!   thread's, or one inside `spawn_blocking`), and from an async acquire once it has
//!   waited `lockdep::deadlock_timeout()` with that hold still there (the holder may be
//!   a sibling future that lets go).
//!   Upgrades are ordered as write acquisitions. See the module `lockdep` (what is and
//!   is not detected, with an example of each); `RwLock::with_lockdep_class` names a
//!   lock's class.
//!
//! # Choosing a policy
//!
//! By default arrivals may take a free lock ahead of queued waiters (throughput), once
//! between two turns of the queue, and a waiter that has waited 250 us is handed the lock
//! (fairness). Each lock carries a [`Policy`] to move that trade-off:
//!
//! - [`Policy::new()`]: the default, what [`RwLock::new`] uses.
//! - [`Policy::fifo()`]: tokio's strict first-come-first-served order (no arrival passes a
//!   queued waiter); every scenario of tokio's own `RwLock` tests passes against it.
//! - `pass_bound`: how many times running tasks may pass a non-empty queue between two of
//!   its turns (1); `u32::MAX` leaves only the timeout to bound it. A head that is a
//!   parked thread (a blocking acquire) is served by the timeout alone, whose wake-up a
//!   turn after every pass would pay for each operation.
//! - `handoff_timeout`: shorter is fairer and slower; `Duration::ZERO` hands the lock to
//!   the head at every release.
//! - `crowded_handoff`: on a tokio runtime with more worker threads than cores, while
//!   readers are queued, a head task is handed the lock at every release, as with a zero
//!   timeout (on by default; a woken task there often waits for its worker to be
//!   scheduled, and passing it cost more than it gave). A queue of writers alone, threads
//!   outside such a runtime, and parked heads keep the timeout.
//! - `writer_spin`, `reader_spin` and `writer_yields`: how long a task spins, and how often
//!   a writer yields, before it queues; the spin budgets are learned up to these caps, so
//!   sections that await stop paying for spins.
//! - `reader_wake_batch`: how many queued readers one wake-up grants.
//!
//! ```
//! use std::time::Duration;
//! use async_rwsem::{Policy, RwLock};
//!
//! let strict = RwLock::with_policy(0u32, Policy::fifo());
//! let fairer = RwLock::with_policy(0u32, Policy::new().handoff_timeout(Duration::from_micros(250)));
//! # drop((strict, fairer));
//! ```
//!
//! [`design`] has what each knob buys and costs; `cargo run --release -p bench -- --sweep`
//! (in the repository) redraws the trade-off on your machine.
//!
//! # Migrating from `tokio::sync::RwLock`
//!
//! Change the `use`. Every name of tokio's lock and guards is here, with tokio's
//! `Send`/`Sync` bounds (a borrowed read guard is `Sync` for `T: Sync`, where tokio also
//! asks `T: Send`). What differs:
//!
//! - **Cooperative budget**: as tokio's with the default features; with
//!   `default-features = false` an acquire never yields to tokio's scheduler.
//! - **Order**: arrivals may pass queued waiters, once between two turns of the queue
//!   (`Policy::pass_bound`) and until the handoff timeout (on a runtime with more workers
//!   than cores, not past a queue that holds a reader: `Policy::crowded_handoff`); tokio serves
//!   strictly in arrival order, as [`Policy::fifo()`] does (`tests/fifo.rs` runs tokio's
//!   own `RwLock` tests against it, and against the default policy, where the two that
//!   assert the queue's order see a reader pass a pending writer once). A writer that finds the lock held spins; behind a writer it
//!   then yields once before it queues (a `try_read` may succeed meanwhile), behind
//!   readers it queues at once.
//! - **`downgrade`** grants every queued reader at once when a reader heads the queue, none
//!   when a writer does (the kernel's `downgrade_write`).
//! - **`blocking_read` / `blocking_write`** cannot tell that they run inside a runtime (tokio
//!   panics there): they deadlock if the holder needs the blocked thread.
//! - **`with_max_readers`**: 0 panics with tokio's message; every `u32` is accepted on
//!   64-bit targets (tokio panics above `u32::MAX >> 3`).
//! - **`#[must_use]` on every guard**, the owned and mapped ones too: a statement that drops
//!   one at once (`lock.clone().write_owned().await;`) warns; write `drop(...)`.
//! - **`TryLockError`** is this crate's type; with the `tokio` feature it converts from
//!   tokio's.
//! - **New**: `new` is `const`; upgradable reads; `read_timeout` and friends (feature
//!   `tokio`); `blocking_read_owned` and the other owned blocking acquires.
//!
//! `tests/parity.rs` runs one scenario against both locks with only the `use` swapped.
//!
//! # Coming from `parking_lot::RwLock`
//!
//! The acquires are async (`read().await`); the `blocking_*` ones block the thread as
//! parking_lot's do. With parking_lot's names and meaning: `is_locked`,
//! `is_locked_exclusive`, `unlock_fair` on every guard, the timed blocking acquires
//! `try_read_for`, `try_write_for`, `try_upgradable_read_for`, and the timed upgrade
//! `try_upgrade_for`, with their `_until` forms. Not here: `read_recursive`, `bump`,
//! deadlock detection and raw access.
//!
//! # Design
//!
//! The whole state is one atomic count word, encoded as the kernel's: a writer bit, a
//! waiters bit, a handoff bit and the reader count. An uncontended acquire is one atomic
//! operation and takes no mutex; a waiter's queue node lives inside its pinned acquire
//! future, so nothing allocates. Readers may steal a lock whose queue is not empty, and
//! tasks spin briefly for a lock whose owner is running, for a budget each lock learns;
//! a timed handoff to the head of the queue bounds the unfairness. A release wakes a
//! queued writer alone, or grants the queued readers (up to 256) at once, past queued
//! writers while such passes prove cheap. Dropping an
//! acquire is safe in every state. A lock is 64 bytes on 64-bit targets, one cache line.
//! [`design`] has the algorithm, when not to use this lock, and a map of the source.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub,
    clippy::undocumented_unsafe_blocks
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The crate's loom models (`cfg(all(test, async_rwsem_loom))`: a cfg of this crate's own,
// set only with `RUSTFLAGS="--cfg async_rwsem_loom"` for `cargo test --lib`, so that no
// user's `--cfg loom` changes this crate) use a subset of the crate.
#![cfg_attr(all(test, async_rwsem_loom), allow(dead_code))]

pub mod design;
mod loom;
mod observe;
mod raw;
mod rwlock;

#[cfg(feature = "lock_stat")]
#[cfg_attr(docsrs, doc(cfg(feature = "lock_stat")))]
pub use crate::observe::lock_stat;
#[cfg(feature = "lock_stat")]
pub use crate::observe::lock_stat::LockStat;
#[cfg(feature = "lockdep")]
#[cfg_attr(docsrs, doc(cfg(feature = "lockdep")))]
pub use crate::observe::lockdep;
pub use crate::raw::policy::{Policy, MAX_READER_WAKE_BATCH};
#[cfg(feature = "stats")]
pub use crate::raw::stats::LockStats;
#[cfg(feature = "tokio")]
pub use crate::rwlock::Elapsed;
pub use crate::rwlock::{
    OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockUpgradableReadGuard,
    OwnedRwLockWriteGuard, RwLock, RwLockMappedWriteGuard, RwLockReadGuard,
    RwLockUpgradableReadGuard, RwLockWriteGuard, Snapshot, TryLockError, Upgrade,
};

/// What must not compile, each a `compile_fail` doctest with the error it must fail with.
///
/// A guard cannot outlive its lock:
///
/// ```compile_fail,E0597
/// use async_rwsem::RwLock;
/// let guard = {
///     let lock = RwLock::new(1);
///     lock.try_read().unwrap()
/// };
/// ```
///
/// A read guard cannot write:
///
/// ```compile_fail,E0594
/// use async_rwsem::RwLock;
/// let lock = RwLock::new(1);
/// let mut guard = lock.try_read().unwrap();
/// *guard = 2;
/// ```
///
/// A lock over a type that is not `Send` cannot be shared between threads:
///
/// ```compile_fail,E0277
/// use std::{rc::Rc, sync::Arc};
/// use async_rwsem::RwLock;
/// let lock = Arc::new(RwLock::new(Rc::new(1)));
/// std::thread::spawn(move || drop(lock));
/// ```
///
/// An owned read guard over a type that is not `Sync` cannot be sent to another thread
/// either (and, as in tokio, an owned guard needs `T: Send + Sync` to be sent at all,
/// since it may drop the last `Arc`):
///
/// ```compile_fail,E0277
/// use std::{cell::Cell, sync::Arc};
/// use async_rwsem::RwLock;
/// let lock = Arc::new(RwLock::new(Cell::new(1)));
/// let guard = lock.try_read_owned().unwrap();
/// std::thread::spawn(move || drop(guard));
/// ```
///
/// A write guard mapped to a part of the value cannot be downgraded (the unsoundness
/// tokio fixed with its separate mapped type); `RwLockWriteGuard::downgrade_map` maps
/// and downgrades in one step instead:
///
/// ```compile_fail,E0599
/// use async_rwsem::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
/// let lock = RwLock::new((1, 2));
/// let part = RwLockWriteGuard::map(lock.try_write().unwrap(), |pair| &mut pair.0);
/// let shared = RwLockMappedWriteGuard::downgrade(part);
/// ```
///
/// A read guard over a type that is not `Sync` cannot be sent to another thread:
///
/// ```compile_fail,E0277
/// use std::cell::Cell;
/// use async_rwsem::RwLock;
/// let lock: &'static RwLock<Cell<u8>> = Box::leak(Box::new(RwLock::new(Cell::new(1))));
/// let guard = lock.try_read().unwrap();
/// std::thread::spawn(move || drop(guard));
/// ```
#[cfg(doctest)]
struct MustNotCompile;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
