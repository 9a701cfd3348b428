//! An async read-write lock built the way the Linux kernel builds its `rw_semaphore`.
//!
//! ```
//! use std::sync::Arc;
//! use async_rwsem::RwLock;
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
//! [`RwLock`] has the names of `tokio::sync::RwLock` (`new`, `read`, `write`,
//! `try_read`, `try_write`, `get_mut`, `into_inner`, guards that deref to the value), so
//! moving a program over is a change of `use`. It runs on any executor: it needs only
//! `std` and wakers.
//!
//! # When not to use it
//!
//! - If no critical section holds the lock across an `.await`, a synchronous lock
//!   (`parking_lot::RwLock`, `std::sync::RwLock`) used from async code is simpler, and
//!   still faster on short contended sections (the README's *Performance* section has
//!   the figures): it is the ceiling this lock is measured against.
//! - If every waiter must be served in arrival order whatever it costs, and you want no
//!   knobs: by default this lock lets arrivals steal the lock from the queue for
//!   throughput, and bounds the unfairness with a timed handoff instead. It keeps
//!   `tokio::sync::RwLock`'s strict order when built with [`Policy::fifo`] (every scenario
//!   of tokio's own `RwLock` tests passes against that), at the cost in throughput the
//!   README's *Performance* section gives; `tokio::sync::RwLock` itself is the simpler
//!   choice if that order is all you need.
//!
//! # Design
//!
//! **The count word.** The whole lock state is one `AtomicUsize`, encoded as the kernel
//! encodes `rw_semaphore::count`: bit 0 says a writer owns the lock, bit 1 that the wait
//! queue is not empty, bit 2 that a *handoff* is pending, and the reader count starts at
//! bit 8, with the top bit as an overflow guard (too many readers is a panic, never a
//! wrap-around). Zero means unlocked and idle. A reader's uncontended lock is one
//! `fetch_add` of the reader bias and its unlock one `fetch_sub`; a writer's lock is one
//! compare-and-swap from zero and its unlock one `fetch_sub`. Nothing else is touched
//! unless someone waits: no mutex on the uncontended paths, and no allocation on any path,
//! because each waiter's queue node lives inside its own pinned acquire future.
//!
//! **Stealing and spinning.** A reader whose `fetch_add` finds the waiters bit set does
//! not queue at once: if no writer holds the lock, no handoff is pending and readers do
//! not already own it, it keeps its bias and so *steals* the lock, and then grants the
//! queued readers too. A reader never joins readers that own the lock while someone
//! waits, so a stream of readers cannot starve a queued writer. A reader that finds a
//! writer inside spins on the count word, and takes the lock the moment the writer
//! leaves. A writer that finds the lock held spins the same way, then gives its worker
//! thread back to the executor once (the owner may be a task on the same thread), and
//! only then queues. A woken queued writer is not handed the lock: it competes for it,
//! so the lock stays busy while woken tasks are still being scheduled, which is where a
//! strictly first-come-first-served lock loses its throughput.
//!
//! **Adaptive spinning.** The kernel spins only while the owner runs on a CPU. A task
//! holding a guard may instead be suspended in an `.await`, which nothing in an executor
//! reports; but the spins' outcomes do. So each lock learns, for readers and for writers
//! apart, how long a spin may last: a spin that wins after `t` moves the budget halfway to
//! `2t + 1 us`, one that runs out halves it, and at zero one contended acquire in 32
//! probes with a short spin. Sections that never await keep a budget near their length;
//! sections that await (or worker threads descheduled, with more workers than cores) stop
//! paying for spins after a few misses, and the lock notices within milliseconds when the
//! workload changes. No clock is read on the uncontended paths. The policy's
//! `reader_spin` and `writer_spin` cap the budgets (`adaptive_spin(false)` makes the caps
//! fixed budgets).
//!
//! **What differs from the kernel.** A woken thread runs within microseconds; a woken
//! task waits in its executor's run queue behind every other ready task. The kernel's
//! answer to a convoy is to keep spinning while the owner runs, whatever the queue holds
//! (the handoff bounds what the queued waiters lose); this lock does the same, with the
//! async form of its rule "spin only while the owner is on a CPU": a task spins (one
//! writer at a time, for the learned budget) past a non-empty queue unless a handoff is
//! pending or the owner is a queued task just granted the lock and not yet polled (the
//! count word's `OWNER_PENDING`), so a task whose section does not await almost never
//! sleeps on the lock. A woken head writer that finds the lock taken asks for the handoff
//! at once and spins for the owner (the kernel's handoff waiter does), and is granted the
//! lock at the next release. A spinning reader keeps its bias in the count, so that the
//! writer's release leaves the lock to it. Readers queued behind a head writer pass it
//! once, a batch of at most four, and the writer gets the handoff: the queue alternates a
//! few readers and a writer instead of starving either class, all chosen by measurement
//! (the `compare` example, README).
//!
//! **Handoff.** The rest of the unfairness is bounded by a timer. Each queued node
//! records when it queued; once the head of the queue has waited longer than the policy's
//! handoff timeout (1 ms by default, chosen from the policy sweep; the kernel uses 4 ms),
//! or has lost a race after a wake-up, the handoff bit is set and the next release grants
//! the head the lock directly (a reader head with every queued reader), while every fast
//! path and every steal fails meanwhile. A guard's `unlock_fair` (`parking_lot`'s name)
//! asks for the handoff on demand: its release hands the lock to the head at once. The
//! kernel's measurement of this bound (240
//! writers, 5 us sections) took per-thread operations from 1/7,792/173,696 min/mean/max to
//! 5,842/6,542/7,458; this lock's own figures for the same shape are in the README's
//! *Performance* section. A cancelled head passes the bit to the next one.
//!
//! **Waking.** A release that leaves the lock free with waiters queued takes the wait
//! lock (a small `Mutex`, never held across a waker call or an `.await`) and looks at the
//! head: a writer is woken alone; a reader means every queued reader, skipping writers,
//! up to the batch limit (256), is granted in one atomic add before any of them is woken.
//!
//! **Cancellation.** Dropping a pending acquire in any state is safe: a queued node
//! unlinks itself and, if it was the head, wakes the next head; a node that was granted
//! the lock but never polled releases it.
//!
//! **Size.** A lock is 48 bytes on 64-bit targets, as `tokio::sync::RwLock<()>`: the count
//! word, the wait lock with its one-pointer (ring) wait list, the policy stored in 16
//! bytes, the reader limit and the learned spin budgets. The `stats` feature adds 8 bytes
//! per counter.
//!
//! # Map of the source
//!
//! | file | what lives there |
//! |---|---|
//! | `src/raw/count.rs` | the count word's bits, their invariants, and every place that sets or clears a flag |
//! | `src/raw/list.rs` | the wait-list node and its states, the intrusive ring list, the list of wakers to call |
//! | `src/raw/read.rs` | readers: fast path, release, steal, spin, queue |
//! | `src/raw/write.rs` | writers: fast path, release, spin, queue, `try_write_lock` |
//! | `src/raw/upgrade.rs` | upgradable reads, upgrades, downgrades |
//! | `src/raw/wake.rs` | waking and granting: `mark_wake`, the one grant, the one queued write lock |
//! | `src/raw/waiter.rs` | the lock future, its re-polls and its cancellation |
//! | `src/raw/spin.rs` | the learned spin budgets |
//! | `src/raw/policy.rs`, `src/raw/stats.rs` | the policy and how a lock stores it; the lock-event counters |
//! | `src/raw/tests/` | the transition tests against the count word, the list's tests, the loom models |
//! | `src/rwlock.rs` | `RwLock<T>`: construction and every acquire, grouped by guard kind; the `Send`/`Sync` impls and the variance table |
//! | `src/rwlock/token.rs` | lock tokens: the one place the typed layer takes, changes and releases a lock |
//! | `src/rwlock/guard.rs`, `owned.rs`, `upgradable.rs` | the guards (borrowed, owned, upgradable) and the `Upgrade` future |
//! | `src/rwlock/blocking.rs`, `timeout.rs` | the blocking acquires; the timed ones (feature `tokio`) |
//! | `src/loom.rs` | where the atomics, the mutex and `UnsafeCell` come from (std or loom) |
//!
//! # Choosing a policy
//!
//! Each lock carries a [`Policy`]: the caps of the learned reader and writer spin budgets
//! and the writers' yield count (throughput for short sections; the learning keeps
//! sections that await from paying), the handoff timeout (shorter is fairer and slower;
//! `Duration::MAX` turns the bound off), the reader wake batch, and whether arrivals may
//! pass a non-empty queue at all. The defaults follow the kernel where the measurements
//! agree and the measurements where they do not: `Policy::new`'s documentation says
//! where they come from, the README's *Performance* section has the figures, and
//! `cargo run --release -p bench -- --sweep` redraws the trade-off curve
//! (throughput against fairness, per handoff timeout and spin budget) on your machine.
//!
//! | knob | raise it when | lower it when |
//! |---|---|---|
//! | `handoff_timeout` | throughput matters more than the worst wait | a class of tasks (readers, or writers) falls behind; `ZERO` hands the lock to the head at every release, and queued waiters never pass each other |
//! | `writer_spin` (the cap of the learned budget) | sections are short and never await, and queues are rare | workers are few and busy (it only ever spins with an empty queue) |
//! | `writer_yields` | owners are often tasks on the same worker | writers should queue at once |
//! | `reader_wake_batch` | many readers queue behind writers | a burst of granted readers delays a writer too long |
//! | `reader_spin` (the cap of the learned budget) | short mixed sections, writers leave quickly | readers should queue (the kernel dropped reader spinning in 5.11); `ZERO` turns it off |
//! | `strict_order` ([`Policy::fifo`]) | code relies on tokio's first-come-first-served order | throughput matters (stealing is off) |
//!
//! # Feature flags
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `stats` | off | `RwLock::stats()`: per-lock counters of the kernel's lock events |
//! | `tracing` | off | `tracing` events (target `async_rwsem::contention`, level TRACE) named after the kernel's tracepoints: `contention_begin` when an acquire first has to wait, `contention_end` when it stops waiting, with `wait_us` and `acquired` (false: the acquire was dropped) |
//! | `tokio` | off | tokio's cooperative scheduling: inside a tokio runtime every async acquire takes a unit of the task's budget, as tokio's own lock does (see below); `RwLock::read_timeout`, `write_timeout` and `upgradable_read_timeout`, which give up after a `Duration` (with the error `Elapsed`) and leave nothing held or queued, on tokio's timer (they need a tokio runtime with time enabled); `From<tokio::sync::TryLockError>` for `TryLockError` |
//!
//! **Cooperative scheduling** (feature `tokio`). Inside a tokio runtime a task gets a
//! budget of operations per turn, and tokio's own resources make it yield once the budget
//! is spent, so that a task whose awaits are always ready still lets its neighbours run.
//! With the feature on, every async acquire (`read`, `write`, `upgradable_read` and their
//! owned forms) takes one unit once it owns the lock, and a task whose budget is spent
//! yields there, holding the lock, as tokio's lock does since tokio 1.54: so on a
//! current-thread runtime `while !*flag.read().await {}` lets the task that writes the flag
//! run (without the feature that loop never yields, and spins forever). The `try_`
//! acquires take no budget (they cannot yield), nor do upgrades and downgrades (they take
//! no new lock), nor the blocking acquires (a blocked thread cannot yield to tokio).
//! Outside a tokio runtime the check is one thread-local read and never yields: about 2 to
//! 3 ns an acquire on the bench machine (`cargo bench --features tokio --bench uncontended`).
//! A task that must not yield can opt out with `tokio::task::coop::unconstrained`.
//!
//! It is part of the `tokio` feature rather than a feature of its own because the budget
//! only matters inside a tokio runtime, where the users of that feature already are (its
//! timeouts run on tokio's timer), and because a flag of its own would leave the endless
//! polling loop above to everyone who does not know to turn it on.
//!
//! # Migrating from `tokio::sync::RwLock`
//!
//! Change the `use`; the names are tokio's, and so are the guards' `Send`/`Sync` bounds
//! (one is looser: a borrowed read guard is `Sync` for `T: Sync`, where tokio also asks
//! `T: Send`):
//!
//! | `tokio::sync` | `async_rwsem` | what differs |
//! |---|---|---|
//! | `RwLock::new`, `RwLock::const_new` | the same (`new` is `const` too) | the lock is fair only within a bound: arrivals may steal it from queued waiters, and a queued waiter is handed the lock once it has waited the policy's `handoff_timeout`; tokio serves waiters strictly in arrival order, as this lock does when built with `RwLock::with_policy(value, Policy::fifo())` (the crate's `tests/fifo.rs` runs every scenario of tokio's own `RwLock` tests against that) |
//! | `RwLock::with_max_readers`, `const_with_max_readers` | the same (both `const`), plus `with_policy_and_max_readers` | 0 panics with tokio's message (`a RwLock may not be created with 0 readers`); tokio also panics above `u32::MAX >> 3` readers, where this lock accepts every `u32` on 64-bit targets (the count word holds 2^55 - 1 readers; on 32-bit ones 2^23 - 1, past which it panics); without a limit the count word bounds the readers (one more is a panic, never a wrap) |
//! | `read`, `write`, `try_read`, `try_write` | the same | a writer that finds the lock held spins and yields before it queues, so a `try_read` may still succeed beside a writer that has been polled but not queued yet; tokio's writer queues at once |
//! | `read_owned`, `write_owned`, `try_read_owned`, `try_write_owned` | the same | |
//! | `blocking_read`, `blocking_write` | the same, plus `blocking_read_owned`, `blocking_write_owned` | tokio's panic when called inside a runtime; these cannot tell, and deadlock if the lock's holder needs the blocked thread |
//! | `get_mut`, `into_inner`, `Default`, `From<T>`, `Debug` | the same (`Debug` prints `RwLock { data: 7 }`, or `RwLock { data: <locked> }` when a read lock cannot be taken without waiting, as tokio's) | |
//! | inside a tokio runtime, every acquire takes a unit of the task's cooperative budget | the same with the feature `tokio` | without the feature an acquire never yields to tokio's scheduler: a loop whose acquires are always ready keeps its worker until it ends |
//! | `#[must_use]` on `RwLockReadGuard` and `RwLockWriteGuard` | on every guard: also `RwLockMappedWriteGuard`, `OwnedRwLockReadGuard`, `OwnedRwLockWriteGuard` and `OwnedRwLockMappedWriteGuard` | a statement that drops one of those four at once (`lock.clone().write_owned().await;`, to wait for the lock) warns here, and fails to build under `#![deny(warnings)]`: write `drop(...)` or `let _ = ...`. Kept on purpose: such a statement takes the lock and lets it go at once, almost always a bug, which tokio's own borrowed guards already warn about |
//! | `TryLockError` | the same name, this crate's type | with the feature `tokio` it converts from tokio's (`From<tokio::sync::TryLockError>`), so `?` over tokio's `try_lock` and this lock's `try_read` works in one function that returns this crate's error; not the other way (tokio's cannot be built outside tokio) |
//! | `RwLockReadGuard::{map, try_map}` | the same | |
//! | `RwLockWriteGuard::{map, try_map, into_mapped, downgrade, downgrade_map, try_downgrade_map}` | the same | `downgrade` and `downgrade_map` grant every queued reader at once (never a queued writer) when a reader heads the queue, and none when a writer does (the kernel's `downgrade_write`); tokio's queue is strictly ordered |
//! | `RwLockMappedWriteGuard::{map, try_map}` | the same | |
//! | `OwnedRwLockReadGuard<T, U = T>`, `OwnedRwLockWriteGuard<T>`, `OwnedRwLockMappedWriteGuard<T, U = T>`, with `map`, `try_map`, `downgrade*` and `rwlock` | the same | |
//! | `tokio::time::timeout(d, lock.read())` | that, or `lock.read_timeout(d)` (feature `tokio`) | |
//! | (not in tokio) | `upgradable_read`, `try_upgradable_read`, `blocking_upgradable_read`; `RwLockUpgradableReadGuard::{upgrade, try_upgrade, downgrade}`; `RwLockWriteGuard::downgrade_to_upgradable`; owned variants; `upgradable_read_timeout` (feature `tokio`) | one upgradable reader at a time beside plain readers; an upgrade holds new readers off while the readers inside leave, and a dropped upgrade releases the lock |
//!
//! A scenario written once against both locks, with only the `use` swapped, is in the
//! crate's `tests/parity.rs`.
//!
//! # Coming from `parking_lot::RwLock`
//!
//! The acquires are async (`read().await`); the `blocking_*` ones block the thread as
//! parking_lot's do. These have parking_lot's names and meaning: `is_locked`,
//! `is_locked_exclusive`; `unlock_fair` on every guard (the head of the queue gets the
//! lock at once, and no arrival passes it); the timed blocking acquires `try_read_for`,
//! `try_write_for`, `try_upgradable_read_for` and their `_until` forms, which return
//! `None` at the deadline with nothing held or queued. Not here: `read_recursive`, `bump`,
//! `try_upgrade_for`, the eventual-fairness timer of every unlock (the handoff timeout
//! plays that part), deadlock detection, and the raw access (`data_ptr`,
//! `force_unlock_*`).
//!
//! # What must not compile
//!
//! A guard cannot outlive its lock:
//!
//! ```compile_fail
//! use async_rwsem::RwLock;
//! let guard = {
//!     let lock = RwLock::new(1);
//!     lock.try_read().unwrap()
//! };
//! ```
//!
//! A read guard cannot write:
//!
//! ```compile_fail
//! use async_rwsem::RwLock;
//! let lock = RwLock::new(1);
//! let mut guard = lock.try_read().unwrap();
//! *guard = 2;
//! ```
//!
//! A lock over a type that is not `Send` cannot be shared between threads:
//!
//! ```compile_fail
//! use std::{rc::Rc, sync::Arc};
//! use async_rwsem::RwLock;
//! let lock = Arc::new(RwLock::new(Rc::new(1)));
//! std::thread::spawn(move || drop(lock));
//! ```
//!
//! An owned read guard over a type that is not `Sync` cannot be sent to another thread
//! either (and, as in tokio, an owned guard needs `T: Send + Sync` to be sent at all,
//! since it may drop the last `Arc`):
//!
//! ```compile_fail,E0277
//! use std::{cell::Cell, sync::Arc};
//! use async_rwsem::RwLock;
//! let lock = Arc::new(RwLock::new(Cell::new(1)));
//! let guard = lock.try_read_owned().unwrap();
//! std::thread::spawn(move || drop(guard));
//! ```
//!
//! A write guard mapped to a part of the value cannot be downgraded (the unsoundness
//! tokio fixed with its separate mapped type); `RwLockWriteGuard::downgrade_map` maps
//! and downgrades in one step instead:
//!
//! ```compile_fail,E0599
//! use async_rwsem::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
//! let lock = RwLock::new((1, 2));
//! let part = RwLockWriteGuard::map(lock.try_write().unwrap(), |pair| &mut pair.0);
//! let shared = RwLockMappedWriteGuard::downgrade(part);
//! ```
//!
//! A read guard over a type that is not `Sync` cannot be sent to another thread:
//!
//! ```compile_fail
//! use std::cell::Cell;
//! use async_rwsem::RwLock;
//! let lock: &'static RwLock<Cell<u8>> = Box::leak(Box::new(RwLock::new(Cell::new(1))));
//! let guard = lock.try_read().unwrap();
//! std::thread::spawn(move || drop(guard));
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub,
    clippy::undocumented_unsafe_blocks
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Under `--cfg loom` only the crate's own models build locks (loom's atomics cannot be
// built in a `const fn`, so the public constructors are left out there).
#![cfg_attr(loom, allow(dead_code))]

mod loom;
mod raw;
mod rwlock;

pub use crate::raw::policy::{Policy, MAX_READER_WAKE_BATCH};
#[cfg(feature = "stats")]
pub use crate::raw::stats::LockStats;
#[cfg(feature = "tokio")]
pub use crate::rwlock::Elapsed;
pub use crate::rwlock::{
    OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockUpgradableReadGuard,
    OwnedRwLockWriteGuard, RwLock, RwLockMappedWriteGuard, RwLockReadGuard,
    RwLockUpgradableReadGuard, RwLockWriteGuard, TryLockError, Upgrade,
};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
