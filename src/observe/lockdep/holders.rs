//! Holders, and the locks each holds.
//!
//! A holder is an *owner* (a tokio task, or else a thread) and, inside it, a *flow*: the
//! future that made the acquire, told apart from the owner's other futures by the waker
//! its poll was given. Futures of one task that are polled with wakers of their own (the
//! children of a `FuturesUnordered`, and so of `buffer_unordered`, `JoinSet`-like pools,
//! the mock tasks of `tokio_test`) are different flows; those polled with the task's own
//! waker (`join!`, `select!`) are one. A blocking or `try_` acquire has no waker: it is
//! the owner's own (flow 0), and sees (and is seen by) every flow of its owner.
//!
//! The locks a flow holds are told by its waker (its data and vtable addresses, kept in
//! each entry): while a future holds a lock it is alive, and so is the allocation its
//! waker points to, which no other future can be given meanwhile. (A guard that leaves
//! its future, sent away or forgotten, keeps its waker's address in its entry while it is
//! held; a new future polled with a waker at that address meanwhile is taken for the old
//! one.) The graph's orders outlive the holds, so there a flow is known by a number,
//! never reused (as a task's id, not as a waker's address: the next child of a
//! `FuturesUnordered` is often given the address of the one that just ended). The number
//! is given when the flow first forms a chain of held locks, and stays bound to its
//! waker's address while the flow is the only one that made one of the graph's orders:
//! lockdep then keeps a clone of its waker, which keeps that address from being given to
//! another future. Once no such order is left the binding is dropped, and the future's
//! next chain gets a new number: harmless, as every order it made has been made by
//! another flow too (the graph asks nothing more of a number).
//!
//! Each owner's held locks live in one shard of a table of mutexes, picked by the
//! owner: two owners rarely share one, so an acquire and a release take a mutex no other
//! worker is likely to want, never a process-wide one. A shard is a flat list of the
//! entries of its owners, oldest first, and of their flows bound to a number: once it has
//! grown, an acquire and a release allocate nothing.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Waker;

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

/// Who makes an acquire, as the graph remembers it: its owner, and its flow (0: the
/// owner itself, see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Holder {
    pub(super) owner: Owner,
    pub(super) flow: u64,
}

impl Holder {
    /// Whether a lock held by flow `flow` of this holder's owner can keep this holder's
    /// acquire waiting: one held by this flow, or by the owner itself (flow 0), or any,
    /// for an acquire of the owner itself.
    fn sees(self, flow: u64) -> bool {
        self.flow == 0 || flow == 0 || flow == self.flow
    }

    /// Whether this holder may be one of several futures that one owner runs at once
    /// (an async acquire, polled with a waker): lockdep cannot tell its siblings' holds
    /// from its own. A blocking acquire blocks its thread, and with it every future the
    /// thread runs: it is one flow, as a thread is.
    pub(super) fn concurrent(self) -> bool {
        self.flow != 0
    }

    /// Whether the two may be one flow of acquires, one after the other: one owner, and
    /// one flow (or the owner itself).
    pub(super) fn same_flow(self, other: Holder) -> bool {
        self.owner == other.owner && self.sees(other.flow)
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.owner, f)
    }
}

/// A flow's waker, as a flow is found again: the data and vtable addresses.
pub(super) type WakerKey = (usize, usize);

/// The key of the owner itself: no waker (a blocking or `try_` acquire).
pub(super) const NO_FLOW: WakerKey = (0, 0);

/// The acquire made now, on this thread: its owner, and the waker of the poll it is made
/// in, if any.
#[derive(Clone, Copy, Debug)]
pub(super) struct Caller {
    pub(super) owner: Owner,
    /// The waker of the poll of the async acquire being made ([`polling`]): valid for
    /// that poll, which this value does not outlive; null for a blocking acquire, or one
    /// made outside such a poll (a `try_` acquire).
    waker: *const Waker,
}

/// The number of the next thread that acquires.
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number.
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Relaxed);
    /// The waker of the async acquire being polled on this thread (null: none).
    static CONTEXT: Cell<*const Waker> = const { Cell::new(std::ptr::null()) };
    /// Whether this thread is blocked in a blocking acquire (its polls have no waker).
    static BLOCKING: Cell<bool> = const { Cell::new(false) };
    /// The next entry (and flow) number this thread gives: its thread number in the high
    /// bits, so that numbers are unique without a shared counter.
    static NEXT_ENTRY: Cell<u64> = Cell::new(thread_number() << 32);
    /// The entry the last async acquire on this thread was charged (see
    /// [`take_last_charged`]).
    static LAST_CHARGED: Cell<Option<(Owner, u64)>> = const { Cell::new(None) };
}

fn thread_number() -> u64 {
    // In a thread-local destructor the number may be gone: a new one (the thread's
    // acquires there are not ordered with its earlier ones).
    THREAD
        .try_with(|thread| *thread)
        .unwrap_or_else(|_| NEXT_THREAD.fetch_add(1, Relaxed))
}

impl Caller {
    /// The acquire made now, on this thread.
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
            waker: CONTEXT.try_with(Cell::get).unwrap_or(std::ptr::null()),
        }
    }

    /// Whether it is an async acquire, made in the poll of a future (a flow of its own).
    pub(super) fn is_async(&self) -> bool {
        !self.waker.is_null()
    }

    /// The waker of its poll.
    fn waker(&self) -> Option<&Waker> {
        // SAFETY: `waker` is null or the waker of the poll in progress (`polling`), which
        // outlives this value.
        unsafe { self.waker.as_ref() }
    }

    fn key(&self) -> Option<WakerKey> {
        self.waker()
            .map(|waker| (waker.data() as usize, waker.vtable() as *const _ as usize))
    }

    /// The key of its flow: [`NO_FLOW`] for the owner itself (no waker).
    pub(super) fn flow_key(&self) -> WakerKey {
        self.key().unwrap_or(NO_FLOW)
    }

    /// Its flow's number in `shard`: 0 for the owner itself (no waker), `None` for a
    /// future not bound to a number now (see the module documentation).
    pub(super) fn flow(&self, shard: &ShardData) -> Option<u64> {
        let Some(key) = self.key() else {
            return Some(0);
        };
        shard
            .flows
            .iter()
            .find(|flow| flow.owner == self.owner && flow.key == key)
            .map(|flow| flow.id)
    }

    /// Whether a lock held as `entry` can keep this acquire waiting, or orders it: one of
    /// its owner's, held by its own flow or by the owner itself; or any of its owner's,
    /// for the owner itself.
    pub(super) fn sees(&self, entry: &Entry, key: WakerKey) -> bool {
        entry.owner == self.owner && (key == NO_FLOW || entry.flow == NO_FLOW || entry.flow == key)
    }

    /// A clone of the waker of its poll, which keeps the waker's address from being
    /// given to another future (see the module documentation). Foreign code: a clone that
    /// panics is caught, and leaves no clone.
    fn pin(&self) -> Option<Waker> {
        let waker = self.waker()?;
        catch_unwind(AssertUnwindSafe(|| waker.clone())).ok()
    }
}

/// Runs `poll`, the poll of an async acquire given `waker`, as the flow of the acquires
/// it makes (none if the thread is blocked in a blocking acquire: [`blocking`]).
pub(super) fn polling<R>(waker: &Waker, poll: impl FnOnce() -> R) -> R {
    let context: *const Waker = if BLOCKING.try_with(Cell::get).unwrap_or(false) {
        std::ptr::null()
    } else {
        waker
    };
    let outer = CONTEXT
        .try_with(|cell| cell.replace(context))
        .unwrap_or(std::ptr::null());
    let _restore = Restore(&CONTEXT, outer);
    poll()
}

/// Runs `f`, a blocking acquire's polls (or its announcement): the acquires it makes
/// have no waker, as the thread's own.
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

/// A new entry (or flow) number, unique in the process.
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

/// Remembers that the async acquire being polled was charged `entry` of `owner`.
pub(super) fn set_last_charged(owner: Owner, entry: u64) {
    let _ = LAST_CHARGED.try_with(|last| last.set(Some((owner, entry))));
}

/// The entry the async acquire polled last on this thread was charged since the last
/// call, if any (an acquire that returns `Pending` holding its lock: tokio's budget).
pub(super) fn take_last_charged() -> Option<(Owner, u64)> {
    LAST_CHARGED.try_with(Cell::take).ok().flatten()
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
    /// The waker of the acquire's flow ([`NO_FLOW`]: the owner itself).
    pub(super) flow: WakerKey,
    /// Whether its acquire has returned the guard: an async acquire that owns the lock
    /// but yields before it completes (tokio's budget spent) holds it, but orders
    /// nothing, as no code of its future runs until it completes (a sibling's acquire
    /// meanwhile is not made holding it).
    pub(super) settled: bool,
}

/// A flow bound to its number (see the module documentation).
#[derive(Debug)]
pub(super) struct Flow {
    owner: Owner,
    key: WakerKey,
    id: u64,
    /// The orders of the graph it alone made: not 0.
    sole: u32,
    /// A clone of its waker (none if its clone panicked).
    pin: Option<Waker>,
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

/// What a shard holds: the entries of its owners, oldest first, and their bound flows.
#[derive(Debug)]
pub(super) struct ShardData {
    pub(super) entries: Vec<Entry>,
    flows: Vec<Flow>,
}

/// One shard of the held sets, on a cache line pair of its own.
#[repr(align(128))]
struct Shard {
    data: Mutex<ShardData>,
    /// How many entries it has, written under the mutex (by [`ShardGuard`]'s drop): an
    /// acquire whose owner's shard is empty has nothing to check, and takes no lock.
    len: AtomicUsize,
}

static HELD: [Shard; SHARDS] = [const {
    Shard {
        data: Mutex::new(ShardData {
            entries: Vec::new(),
            flows: Vec::new(),
        }),
        len: AtomicUsize::new(0),
    }
}; SHARDS];

/// A shard, locked; its length is published when it is unlocked.
pub(super) struct ShardGuard {
    data: MutexGuard<'static, ShardData>,
    len: &'static AtomicUsize,
}

impl std::ops::Deref for ShardGuard {
    type Target = ShardData;

    fn deref(&self) -> &ShardData {
        &self.data
    }
}

impl std::ops::DerefMut for ShardGuard {
    fn deref_mut(&mut self) -> &mut ShardData {
        &mut self.data
    }
}

impl Drop for ShardGuard {
    fn drop(&mut self) {
        self.len.store(self.data.entries.len(), Relaxed);
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

/// The shard of `owner` (of its other owners too: filter by owner). Nothing panics while
/// it is locked, but a poisoned mutex is taken as it is: lockdep must never stop a
/// release.
pub(super) fn shard(owner: Owner) -> ShardGuard {
    let shard = &HELD[shard_of(owner)];
    ShardGuard {
        data: shard.data.lock().unwrap_or_else(PoisonError::into_inner),
        len: &shard.len,
    }
}

impl ShardData {
    /// Takes the entry `id` of `owner` off the set.
    pub(super) fn release(&mut self, owner: Owner, id: u64) {
        if let Some(at) = self
            .entries
            .iter()
            .rposition(|entry| entry.id == id && entry.owner == owner)
        {
            self.entries.remove(at);
        }
    }
}

/// Drops a waker's clone that lockdep kept: foreign code, whose panic is caught (it may
/// run in a release, during an unwind).
pub(super) fn drop_pin(pin: Option<Waker>) {
    if let Some(pin) = pin {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(pin)));
    }
}

/// The graph's orders that `holder`'s flow alone made changed by `delta` (one made, or
/// one made by a second flow too). A flow that alone made some order stays bound to its
/// number, with a clone of its waker (taken here: an order is made by `caller`'s flow);
/// one left with none is unbound.
pub(super) fn sole_orders(caller: &Caller, holder: Holder, delta: i32) {
    if holder.flow == 0 {
        return; // the owner itself: its number is its owner's, never reused
    }
    let mut shard = shard(holder.owner);
    let at = shard
        .flows
        .iter()
        .position(|f| f.owner == holder.owner && f.id == holder.flow);
    match at {
        Some(at) => {
            let flow = &mut shard.flows[at];
            flow.sole = flow.sole.saturating_add_signed(delta);
            let pin = if flow.sole == 0 {
                shard.flows.swap_remove(at).pin
            } else {
                None
            };
            drop(shard);
            drop_pin(pin);
        }
        None if delta > 0 => {
            // The acquiring flow, bound now.
            let Some(key) = caller.key().filter(|_| caller.owner == holder.owner) else {
                return;
            };
            drop(shard);
            let pin = caller.pin();
            let mut shard = self::shard(holder.owner);
            shard.flows.push(Flow {
                owner: holder.owner,
                key,
                id: holder.flow,
                sole: delta.unsigned_abs(),
                pin,
            });
        }
        None => {}
    }
}

/// Marks the entry `id` of `owner` settled or not (see [`Entry::settled`]).
pub(super) fn set_settled((owner, id): (Owner, u64), settled: bool) {
    if let Some(entry) = shard(owner)
        .entries
        .iter_mut()
        .find(|entry| entry.id == id && entry.owner == owner)
    {
        entry.settled = settled;
    }
}

/// Whether `owner` still holds one of the entries `ids` of lock `lock`.
pub(super) fn holds_any(owner: Owner, ids: &[u64], lock: u64) -> bool {
    shard(owner)
        .entries
        .iter()
        .any(|e| e.owner == owner && e.lock == lock && ids.contains(&e.id))
}

/// Takes every entry of lock `lock` off the held sets of the shards of `shards` (a set
/// of shard bits: where it was ever held), for a lock dropped while forgotten guards may
/// still hold it.
pub(super) fn forget_lock(lock: u64, shards: u64) {
    for (i, shard) in HELD.iter().enumerate() {
        if shards & (1 << i) == 0 {
            continue;
        }
        let mut data = shard.data.lock().unwrap_or_else(PoisonError::into_inner);
        data.entries.retain(|entry| entry.lock != lock);
        shard.len.store(data.entries.len(), Relaxed);
    }
}
