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
//! A flow is known by a number, given the first time it holds a lock and never reused
//! (as a task's id, not as a waker's address: the next child of a `FuturesUnordered` is
//! often given the address of the one that just ended). The number stays bound to its
//! waker's address while the flow holds a lock (the future is alive then, and so is the
//! allocation its waker points to) and while it is the only flow that made one of the
//! graph's orders: then lockdep keeps a clone of its waker, which keeps that allocation,
//! and so the address, from being given to another future. Once neither is true the
//! binding is dropped, and a future polled with a waker at that address later is a new
//! flow. (A guard that leaves its future, sent away or forgotten, keeps the binding while
//! it is held; a new future at that address meanwhile is taken for the old one.)
//!
//! Each owner's held locks live in one shard of a table of mutexes, picked by the
//! owner: two owners rarely share one, so an acquire and a release take a mutex no other
//! worker is likely to want, never a process-wide one. A shard is a flat list of the
//! entries of its owners, oldest first, and of their flows: once it has grown, an acquire
//! and a release allocate nothing.

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
type WakerKey = (usize, usize);

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

    /// Its flow's number in `shard`: 0 for the owner itself (no waker), `None` for a
    /// future not bound to a number now.
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

    /// Whether a lock held as `entry` can keep this acquire, whose flow is `flow` (as
    /// [`flow`](Self::flow) found it), waiting, or orders it: one of its owner's, held by
    /// its own flow or by the owner itself; or any of its owner's, for the owner itself.
    pub(super) fn sees(&self, entry: &Entry, flow: Option<u64>) -> bool {
        entry.owner == self.owner
            && (!self.is_async() || entry.flow == 0 || Some(entry.flow) == flow)
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
    /// The flow of the acquire (0: the owner itself).
    pub(super) flow: u64,
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
    /// The entries it holds.
    holds: u32,
    /// The orders of the graph it alone made.
    sole: u32,
    /// A clone of its waker, while `sole` is not 0.
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
    /// One more hold of `caller`'s flow: its number, bound now if it was not.
    pub(super) fn hold(&mut self, caller: &Caller) -> u64 {
        let Some(key) = caller.key() else {
            return 0;
        };
        let owner = caller.owner;
        if let Some(flow) = self
            .flows
            .iter_mut()
            .find(|flow| flow.owner == owner && flow.key == key)
        {
            flow.holds += 1;
            return flow.id;
        }
        let id = next_entry();
        self.flows.push(Flow {
            owner,
            key,
            id,
            holds: 1,
            sole: 0,
            pin: None,
        });
        id
    }

    /// The flow `flow` of `owner` holds one entry less: unbound if that was the last
    /// reason to keep it, with its waker's clone returned (to drop with [`drop_pin`],
    /// outside the shard's mutex).
    fn unhold(&mut self, owner: Owner, flow: u64) -> Option<Waker> {
        let at = self
            .flows
            .iter()
            .position(|f| f.owner == owner && f.id == flow)?;
        let f = &mut self.flows[at];
        f.holds = f.holds.saturating_sub(1);
        if f.holds == 0 && f.sole == 0 {
            return self.flows.swap_remove(at).pin;
        }
        None
    }

    /// Takes the entry `id` of `owner` off the set, and its hold off its flow; returns
    /// the waker's clone to drop (see [`unhold`](Self::unhold)).
    pub(super) fn release(&mut self, owner: Owner, id: u64) -> Option<Waker> {
        let at = self
            .entries
            .iter()
            .rposition(|entry| entry.id == id && entry.owner == owner)?;
        let entry = self.entries.remove(at);
        match entry.flow {
            0 => None,
            flow => self.unhold(owner, flow),
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
/// number, with a clone of its waker (taken here if `holder` is `caller`'s flow, which
/// is the one that makes orders); one bound for no reason left is unbound.
pub(super) fn sole_orders(caller: &Caller, holder: Holder, delta: i32) {
    if holder.flow == 0 {
        return; // the owner itself: its number is its owner's, never reused
    }
    let mut shard = shard(holder.owner);
    let at = shard
        .flows
        .iter()
        .position(|f| f.owner == holder.owner && f.id == holder.flow);
    if delta < 0 {
        let Some(at) = at else { return };
        let flow = &mut shard.flows[at];
        flow.sole = flow.sole.saturating_sub(1);
        let pin = if flow.sole != 0 {
            None
        } else if flow.holds == 0 {
            shard.flows.swap_remove(at).pin
        } else {
            // Still held: the future, and so its waker's address, lives.
            flow.pin.take()
        };
        drop(shard);
        drop_pin(pin);
        return;
    }
    let mine = caller.owner == holder.owner && caller.is_async();
    if let Some(at) = at {
        let flow = &mut shard.flows[at];
        flow.sole += 1;
        if flow.pin.is_some() || !mine {
            return;
        }
        drop(shard);
        let pin = caller.pin();
        let mut shard = self::shard(holder.owner);
        let spare = match shard
            .flows
            .iter_mut()
            .find(|f| f.owner == holder.owner && f.id == holder.flow)
        {
            Some(flow) if flow.pin.is_none() && flow.sole != 0 => {
                flow.pin = pin;
                None
            }
            _ => pin,
        };
        drop(shard);
        drop_pin(spare);
        return;
    }
    // Not bound: the acquiring flow, which holds nothing of its own yet.
    let Some(key) = caller.key().filter(|_| mine) else {
        return;
    };
    drop(shard);
    let pin = caller.pin();
    shard = self::shard(holder.owner);
    shard.flows.push(Flow {
        owner: holder.owner,
        key,
        id: holder.flow,
        holds: 0,
        sole: 1,
        pin,
    });
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
    let mut pins = Vec::new();
    for (i, shard) in HELD.iter().enumerate() {
        if shards & (1 << i) == 0 {
            continue;
        }
        let mut data = shard.data.lock().unwrap_or_else(PoisonError::into_inner);
        let forgotten: Vec<(Owner, u64)> = data
            .entries
            .iter()
            .filter(|entry| entry.lock == lock)
            .map(|entry| (entry.owner, entry.id))
            .collect();
        for (owner, id) in forgotten {
            pins.push(data.release(owner, id));
        }
        shard.len.store(data.entries.len(), Relaxed);
    }
    for pin in pins {
        drop_pin(pin);
    }
}
