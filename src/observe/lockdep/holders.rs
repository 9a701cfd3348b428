//! Holders, and the locks each holds.
//!
//! A holder is an *owner* (a tokio task, or else a thread) and, inside it, the future
//! that made the acquire: the data address of the waker its poll was given (the
//! *context*). Futures of one task that are polled with wakers of their own (the children
//! of a `FuturesUnordered`, and so of `buffer_unordered`, `JoinSet`-like pools, the mock
//! tasks of `tokio_test`) are different holders; those polled with the task's own waker
//! (`join!`, `select!`) share its context. A blocking or `try_` acquire has no context
//! (0): it is the owner's.
//!
//! Each owner's held locks live in one shard of a table of mutexes, picked by the
//! owner: two owners rarely share one, so an acquire and a release take a mutex no other
//! worker is likely to want, never a process-wide one. A shard is a flat list of the
//! entries of its owners, oldest first: once it has grown, an acquire and a release
//! allocate nothing.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::panic::Location;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::Mode;

/// What runs acquires one after the other: a tokio task, or else a thread (numbered by
/// lockdep).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Owner {
    #[cfg(feature = "tokio")]
    Task(tokio::task::Id),
    Thread(u64),
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "tokio")]
            Owner::Task(task) => write!(f, "task {task}"),
            Owner::Thread(thread) => write!(f, "thread #{thread}"),
        }
    }
}

/// Who makes an acquire: its owner, and the future inside it (see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Holder {
    pub(super) owner: Owner,
    /// The data address of the waker of the acquire's poll; 0 for a blocking or `try_`
    /// acquire, or one made outside a poll.
    pub(super) context: usize,
}

/// The number of the next thread that acquires.
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number.
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Relaxed);
    /// The context of the async acquire being polled on this thread (0: none).
    static CONTEXT: Cell<usize> = const { Cell::new(0) };
    /// Whether this thread is blocked in a blocking acquire (its polls have no context).
    static BLOCKING: Cell<bool> = const { Cell::new(false) };
    /// The next entry number this thread gives: its thread number in the high bits, so
    /// that numbers are unique without a shared counter.
    static NEXT_ENTRY: Cell<u64> = Cell::new(thread_number() << 32);
}

fn thread_number() -> u64 {
    // In a thread-local destructor the number may be gone: a new one (the thread's
    // acquires there are not ordered with its earlier ones).
    THREAD
        .try_with(|thread| *thread)
        .unwrap_or_else(|_| NEXT_THREAD.fetch_add(1, Relaxed))
}

impl Holder {
    /// The holder of an acquire made now, on this thread.
    pub(super) fn current() -> Self {
        let owner = {
            #[cfg(feature = "tokio")]
            match tokio::task::try_id() {
                Some(task) => Owner::Task(task),
                None => Owner::Thread(thread_number()),
            }
            #[cfg(not(feature = "tokio"))]
            Owner::Thread(thread_number())
        };
        Self {
            owner,
            context: CONTEXT.try_with(Cell::get).unwrap_or(0),
        }
    }

    /// Whether a lock held in `context` by this holder's owner can keep this holder's
    /// acquire waiting: one held by this future, or by the owner itself (no context),
    /// or any, for an acquire of the owner itself.
    pub(super) fn sees(self, context: usize) -> bool {
        self.context == 0 || context == 0 || context == self.context
    }

    /// Whether this holder may be one of several futures that one owner runs at once
    /// (inside a task, or under a waker): lockdep cannot tell its siblings' holds from
    /// its own.
    pub(super) fn concurrent(self) -> bool {
        #[cfg(feature = "tokio")]
        if matches!(self.owner, Owner::Task(_)) {
            return true;
        }
        self.context != 0
    }

    /// Whether the two may be one flow of acquires, one after the other: one owner, and
    /// one future (or the owner itself).
    pub(super) fn same_flow(self, other: Holder) -> bool {
        self.owner == other.owner && self.sees(other.context)
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.owner, f)
    }
}

/// Runs `poll`, the poll of an async acquire given a waker with data address `waker`,
/// as the context of the acquires it makes (none if the thread is blocked in a
/// blocking acquire: [`blocking`]).
pub(super) fn polling<R>(waker: usize, poll: impl FnOnce() -> R) -> R {
    let context = if BLOCKING.try_with(Cell::get).unwrap_or(false) {
        0
    } else {
        waker
    };
    let outer = CONTEXT.try_with(|cell| cell.replace(context)).unwrap_or(0);
    let _restore = Restore(&CONTEXT, outer);
    poll()
}

/// Runs `f`, a blocking acquire's polls: the acquires it makes have no context, as the
/// thread's own.
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let outer = BLOCKING
        .try_with(|cell| cell.replace(true))
        .unwrap_or(false);
    let _restore = Restore(&BLOCKING, outer);
    f()
}

/// Puts a thread-local back as it was, on the way out (an unwind too).
struct Restore<T: Copy + 'static>(&'static std::thread::LocalKey<Cell<T>>, T);

impl<T: Copy + 'static> Drop for Restore<T> {
    fn drop(&mut self) {
        let _ = self.0.try_with(|cell| cell.set(self.1));
    }
}

/// A new entry number, unique in the process.
pub(super) fn next_entry() -> u64 {
    NEXT_ENTRY
        .try_with(|next| {
            let id = next.get() + 1;
            next.set(id);
            id
        })
        // In a thread-local destructor: a number of a fresh thread number's range.
        .unwrap_or_else(|_| NEXT_THREAD.fetch_add(1, Relaxed) << 32)
}

/// A lock a holder holds.
#[derive(Debug)]
pub(super) struct Entry {
    /// The owner it is charged to.
    pub(super) owner: Owner,
    pub(super) id: u64,
    /// The lock's number (`LockClass::lock`).
    pub(super) lock: u64,
    pub(super) class: u32,
    pub(super) mode: Mode,
    pub(super) site: &'static Location<'static>,
    /// The context of the acquire (see [`Holder`]).
    pub(super) context: usize,
}

/// A hasher for the small keys of lockdep's tables (task and thread numbers, lock and
/// class numbers): one multiply and rotate per word, as rustc's `FxHasher`.
#[derive(Default)]
pub(super) struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
}

/// A map with [`WordHasher`] keys.
pub(super) type WordMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// The number of shards of the held sets (and of the validated chains).
pub(super) const SHARDS: usize = 64;

/// One shard of the held sets, on a cache line pair of its own: the entries of its
/// owners, oldest first.
#[repr(align(128))]
struct Shard {
    entries: Mutex<Vec<Entry>>,
    /// How many entries it has, written under the mutex (by [`ShardGuard`]'s drop): an
    /// acquire whose owner's shard is empty has nothing to check, and takes no lock.
    len: AtomicUsize,
}

static HELD: [Shard; SHARDS] = [const {
    Shard {
        entries: Mutex::new(Vec::new()),
        len: AtomicUsize::new(0),
    }
}; SHARDS];

/// The entries of a shard, locked; its length is published when it is unlocked.
pub(super) struct ShardGuard {
    entries: MutexGuard<'static, Vec<Entry>>,
    len: &'static AtomicUsize,
}

impl std::ops::Deref for ShardGuard {
    type Target = Vec<Entry>;

    fn deref(&self) -> &Vec<Entry> {
        &self.entries
    }
}

impl std::ops::DerefMut for ShardGuard {
    fn deref_mut(&mut self) -> &mut Vec<Entry> {
        &mut self.entries
    }
}

impl Drop for ShardGuard {
    fn drop(&mut self) {
        self.len.store(self.entries.len(), Relaxed);
    }
}

/// Whether the shard of `owner` may hold entries of `owner`: `false` means it holds
/// nothing (its own entries were published before the owner moved on, to this thread or
/// another: the scheduler's hand-off orders them).
pub(super) fn may_hold(owner: Owner) -> bool {
    HELD[shard_of(owner)].len.load(Relaxed) != 0
}

/// The shard of `key`'s hash.
pub(super) fn shard_of(key: impl Hash) -> usize {
    let mut hasher = WordHasher::default();
    key.hash(&mut hasher);
    // The high bits: the multiply mixes into them.
    (hasher.finish() >> 58) as usize % SHARDS
}

/// The entries of the shard of `owner` (of its other owners too: filter by owner).
/// Nothing panics while it is locked, but a poisoned mutex is taken as it is: lockdep
/// must never stop a release.
pub(super) fn shard(owner: Owner) -> ShardGuard {
    let shard = &HELD[shard_of(owner)];
    ShardGuard {
        entries: shard.entries.lock().unwrap_or_else(PoisonError::into_inner),
        len: &shard.len,
    }
}

/// Whether `owner` still holds the entry `id` of lock `lock`.
pub(super) fn holds(owner: Owner, id: u64, lock: u64) -> bool {
    shard(owner)
        .iter()
        .any(|e| e.owner == owner && e.id == id && e.lock == lock)
}

/// Takes every entry of lock `lock` off the held sets of the shards of `shards` (a set
/// of shard bits: where it was ever held), for a lock dropped while forgotten guards may
/// still hold it.
pub(super) fn forget_lock(lock: u64, shards: u64) {
    for (i, shard) in HELD.iter().enumerate() {
        if shards & (1 << i) == 0 {
            continue;
        }
        let mut entries = shard.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|entry| entry.lock != lock);
        shard.len.store(entries.len(), Relaxed);
    }
}
