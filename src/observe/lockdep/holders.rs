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
//! Each thread keeps a cache of the held locks of one owner, the one that last charged a
//! lock there ([`Local`]): in the common case (a task acquires and releases on the worker
//! that polls it) an acquire and a release touch that cache alone, with plain loads and
//! stores, no mutex and no read-modify-write. An async acquire whose announcement finds
//! its owner holding nothing, with the thread's cache bound to it, leaves that cache
//! *ready* for the rest of its poll: if the lock is owned in that same poll (nothing ran
//! in between but the lock's own code), its charge goes to the cache's first slot with
//! no second lookup of the owner or of the binding ([`charge_ready`]). The shared table is used only when an
//! owner charges a lock on a thread whose cache is bound to another (another task ran
//! there: the cache's entries move to its owner's shard; the task moved: the cache it
//! left, on the other thread, is frozen, its entries found through the shard until they
//! are released or that thread moves them), when a cache is full, and by other threads
//! (a guard released away from its thread, the watchdog, a dropped lock). The table is a
//! set of shards, mutexes picked by owner: two owners rarely share one, never a
//! process-wide one. A shard holds the entries of its owners that left their caches,
//! oldest first, the caches bound to its owners, and their flows bound to a number: once
//! it has grown, nothing allocates.
//!
//! Another thread that reads a live cache (under its owner's shard mutex: the watchdog, a
//! report) may meet a slot that the cache's own thread is rewriting at that moment, as
//! the owner writes without the mutex: every field is an atomic and every stored site a
//! `&'static Location`, so such a read is sound, but its entry may mix two holds (a
//! hold's identity, its entry number, is checked against the guard's charge before a
//! slot is freed, so a free never takes another hold's slot).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
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

/// What a thread keeps for lockdep, in one thread-local without a destructor (reached
/// with no lazy-initialisation check): read and written by its thread alone.
struct ThreadState {
    /// This thread's number (0: not given yet).
    thread: Cell<u64>,
    /// The waker of the async acquire being polled on this thread (null: none).
    context: Cell<*const Waker>,
    /// The owner of the async acquire being polled on this thread, once looked up in
    /// that poll (it cannot change during the poll: no user code runs in it).
    owner: Cell<Option<Owner>>,
    /// Whether this thread is blocked in a blocking acquire (its polls have no waker).
    blocking: Cell<bool>,
    /// The next entry (and flow) number this thread gives: its thread number in the high
    /// bits, so that numbers are unique without a shared counter (0: not started).
    next_entry: Cell<u64>,
    /// The entry the async acquire being polled on this thread was charged (see
    /// [`polling`]).
    last_charged: Cell<Option<Charge>>,
    /// This thread's cache, bound to the owner of the async acquire being polled on this
    /// thread, when that acquire's announcement found it holding nothing (in this poll):
    /// its charge goes there with no more checks ([`charge_ready`]). Cleared when the
    /// poll ends, and by that charge.
    ready: Cell<Option<&'static Local>>,
    /// This thread's cache of held entries, once it has one.
    local: Cell<Option<&'static Local>>,
    /// The owner this thread's cache is bound to (see [`Local`]).
    bound: Cell<Option<Owner>>,
    /// The shard of the owner it is bound to.
    bound_shard: Cell<usize>,
}

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            thread: Cell::new(0),
            context: Cell::new(std::ptr::null()),
            owner: Cell::new(None),
            blocking: Cell::new(false),
            next_entry: Cell::new(0),
            last_charged: Cell::new(None),
            ready: Cell::new(None),
            local: Cell::new(None),
            bound: Cell::new(None),
            bound_shard: Cell::new(0),
        }
    };
    /// Gives this thread's cache back when the thread ends (registered at its first
    /// binding): its entries go to the shared table, and the cache to the free list.
    static EXIT: ExitGuard = const { ExitGuard };
}

fn thread_number() -> u64 {
    THREAD
        .try_with(|state| match state.thread.get() {
            0 => {
                let thread = NEXT_THREAD.fetch_add(1, Relaxed);
                state.thread.set(thread);
                thread
            }
            thread => thread,
        })
        // Never gone (no destructor); a fresh number if it were.
        .unwrap_or_else(|_| NEXT_THREAD.fetch_add(1, Relaxed))
}

/// The owner of what runs now on this thread: its tokio task, or else the thread.
#[inline(always)]
fn look_up_owner(state: Option<&ThreadState>) -> Owner {
    #[cfg(feature = "tokio")]
    if let Some(task) = tokio::task::try_id() {
        return Owner::Task(task);
    }
    Owner::Thread(match state {
        Some(state) if state.thread.get() != 0 => state.thread.get(),
        _ => thread_number(),
    })
}

impl ThreadState {
    /// The owner of what runs now on this thread, kept for the rest of the poll of an
    /// async acquire.
    #[inline(always)]
    fn owner(&self) -> Owner {
        if let Some(owner) = self.owner.get() {
            return owner;
        }
        let owner = look_up_owner(Some(self));
        if !self.context.get().is_null() {
            self.owner.set(Some(owner));
        }
        owner
    }

    /// This thread's cache, if it is bound to `owner` and still valid.
    #[inline(always)]
    fn bound_to(&self, owner: Owner) -> Option<&'static Local> {
        if self.bound.get() != Some(owner) {
            return None;
        }
        self.local.get().filter(|local| local.valid.load(Relaxed))
    }

    /// A new entry (or flow) number, unique in the process.
    #[inline(always)]
    fn next_entry(&self) -> u64 {
        let id = match self.next_entry.get() {
            0 => (thread_number() << 32) + 1,
            next => next + 1,
        };
        self.next_entry.set(id);
        id
    }
}

impl Caller {
    /// The acquire made now, on this thread.
    #[inline(always)]
    pub(super) fn current() -> Self {
        THREAD
            .try_with(|state| Self {
                owner: state.owner(),
                waker: state.context.get(),
            })
            .unwrap_or_else(|_| Self {
                owner: look_up_owner(None),
                waker: std::ptr::null(),
            })
    }

    /// Whether it is an async acquire, made in the poll of a future (a flow of its own).
    #[inline]
    pub(super) fn is_async(&self) -> bool {
        !self.waker.is_null()
    }

    /// The waker of its poll.
    #[inline]
    fn waker(&self) -> Option<&Waker> {
        // SAFETY: `waker` is null or the waker of the poll in progress (`polling`), which
        // outlives this value.
        unsafe { self.waker.as_ref() }
    }

    #[inline]
    fn key(&self) -> Option<WakerKey> {
        self.waker()
            .map(|waker| (waker.data() as usize, waker.vtable() as *const _ as usize))
    }

    /// The key of its flow: [`NO_FLOW`] for the owner itself (no waker).
    #[inline]
    pub(super) fn flow_key(&self) -> WakerKey {
        self.key().unwrap_or(NO_FLOW)
    }

    /// Its flow's number: 0 for the owner itself (no waker), `None` for a future not
    /// bound to a number now (see the module documentation).
    pub(super) fn flow(&self) -> Option<u64> {
        let Some(key) = self.key() else {
            return Some(0);
        };
        shard(self.owner)
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
/// it makes (none if the thread is blocked in a blocking acquire: [`blocking`]). Returns
/// its result, and the entry it charged, if any (see [`charge`]).
#[inline]
pub(super) fn polling<R>(waker: &Waker, poll: impl FnOnce() -> R) -> (R, Option<Charge>) {
    let outer = THREAD
        .try_with(|state| {
            let context: *const Waker = if state.blocking.get() {
                std::ptr::null()
            } else {
                waker
            };
            state.last_charged.set(None);
            state.owner.set(None);
            state.context.replace(context)
        })
        .unwrap_or(std::ptr::null());
    let restore = RestoreContext(outer);
    let result = poll();
    drop(restore);
    (result, take_last_charged())
}

/// Runs `f`, a blocking acquire's polls (or its announcement): the acquires it makes
/// have no waker, as the thread's own.
pub(crate) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let outer = THREAD
        .try_with(|state| state.blocking.replace(true))
        .unwrap_or(false);
    let _restore = RestoreBlocking(outer);
    f()
}

/// Puts the thread's poll context back as it was, on the way out (an unwind too). The
/// owner kept for the poll is dropped: an acquire polled inside another's (an upgrade
/// polled by a future of ours) leaves the outer one to look its owner up again.
struct RestoreContext(*const Waker);

impl Drop for RestoreContext {
    #[inline]
    fn drop(&mut self) {
        let _ = THREAD.try_with(|state| {
            state.context.set(self.0);
            state.owner.set(None);
            state.ready.set(None);
        });
    }
}

/// Puts the thread's blocking flag back as it was, on the way out (an unwind too).
struct RestoreBlocking(bool);

impl Drop for RestoreBlocking {
    fn drop(&mut self) {
        let _ = THREAD.try_with(|state| state.blocking.set(self.0));
    }
}

/// A new entry (or flow) number, unique in the process.
pub(super) fn next_entry() -> u64 {
    THREAD
        .try_with(ThreadState::next_entry)
        // Never gone (no destructor); a number of a fresh thread number's range if it were.
        .unwrap_or_else(|_| NEXT_THREAD.fetch_add(1, Relaxed) << 32)
}

/// The entry the async acquire polled last on this thread was charged, if any (an
/// acquire that returns `Pending` holding its lock: tokio's budget).
#[inline]
fn take_last_charged() -> Option<Charge> {
    THREAD
        .try_with(|state| state.last_charged.take())
        .ok()
        .flatten()
}

/// A lock a holder holds.
#[derive(Clone, Copy, Debug)]
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

/// What a shard holds: the entries of its owners that left their thread's cache (moved
/// when a cache is unbound or full, or charged where no cache is), oldest first; the
/// caches bound to its owners; and their flows bound to a number.
#[derive(Debug)]
pub(super) struct ShardData {
    entries: Vec<Entry>,
    flows: Vec<Flow>,
    /// The thread caches bound to owners of this shard: one at most per owner.
    bound: Vec<(Owner, &'static Local)>,
}

impl ShardData {
    /// The caches bound to `owner`: its frozen ones, oldest first, then its live one
    /// (see [`Local`]).
    fn caches_of(&self, owner: Owner) -> impl Iterator<Item = &'static Local> + '_ {
        let of = move |frozen: bool| {
            self.bound
                .iter()
                .filter(move |(bound, local)| {
                    *bound == owner && local.valid.load(Relaxed) != frozen
                })
                .map(|(_, local)| *local)
        };
        of(true).chain(of(false))
    }

    /// Takes the entry of `charge` off the set.
    fn release(&mut self, charge: Charge) {
        if let Some(at) = self.entries.iter().rposition(|entry| charge.is(entry.id)) {
            self.entries.remove(at);
        }
    }
}

/// One shard of the held sets, on a cache line pair of its own.
#[repr(align(128))]
struct Shard {
    data: Mutex<ShardData>,
    /// How many entries it has, written under the mutex (by [`ShardGuard`]'s drop).
    entries: AtomicUsize,
    /// How many caches are bound to its owners, written likewise: an acquire whose
    /// owner's shard has neither has nothing to check, and takes no lock.
    bound: AtomicUsize,
    /// How many of them are frozen (see [`Local`]), written likewise: an owner whose
    /// cache is live looks at the shard only if it has entries or frozen caches.
    frozen: AtomicUsize,
}

static HELD: [Shard; SHARDS] = [const {
    Shard {
        data: Mutex::new(ShardData {
            entries: Vec::new(),
            flows: Vec::new(),
            bound: Vec::new(),
        }),
        entries: AtomicUsize::new(0),
        bound: AtomicUsize::new(0),
        frozen: AtomicUsize::new(0),
    }
}; SHARDS];

/// A shard, locked; its counts are published when it is unlocked.
pub(super) struct ShardGuard {
    data: MutexGuard<'static, ShardData>,
    shard: &'static Shard,
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
        self.shard.entries.store(self.data.entries.len(), Relaxed);
        self.shard.bound.store(self.data.bound.len(), Relaxed);
        let frozen = self.data.bound.iter();
        let frozen = frozen.filter(|(_, local)| !local.valid.load(Relaxed));
        self.shard.frozen.store(frozen.count(), Relaxed);
    }
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
        shard,
    }
}

// ---------------------------------------------------------------------------------------
// The thread caches.

/// How many entries a thread's cache holds; more go to the shared table.
const LOCAL_SLOTS: usize = 8;

/// A slot's state: free.
const FREE: u8 = 0;
/// A slot's state: an entry.
const TAKEN: u8 = 1;

/// The bit of [`Slot::meta`] that says settled.
const SETTLED: u32 = 40;

/// The slot of a charge kept in no cache.
pub(super) const NO_SLOT: u32 = 0xf;

/// An entry in a thread's cache: written field by field (atomics, each a plain store),
/// the state last, with `Release`; a reader loads the state with `Acquire` first.
#[derive(Debug)]
struct Slot {
    state: AtomicU8,
    id: AtomicU64,
    lock: AtomicU64,
    /// The class (low 32 bits), the mode's bit (bits 32 to 39) and whether settled (bit
    /// 40): one store.
    meta: AtomicU64,
    /// A `&'static Location` (null until the slot is first used).
    site: AtomicPtr<Location<'static>>,
    flow_data: AtomicUsize,
    flow_vtable: AtomicUsize,
}

impl Slot {
    const fn new() -> Self {
        Self {
            state: AtomicU8::new(FREE),
            id: AtomicU64::new(0),
            lock: AtomicU64::new(0),
            meta: AtomicU64::new(0),
            site: AtomicPtr::new(std::ptr::null_mut()),
            flow_data: AtomicUsize::new(0),
            flow_vtable: AtomicUsize::new(0),
        }
    }

    #[inline(always)]
    fn store(&self, entry: &Entry) {
        self.id.store(entry.id, Relaxed);
        self.lock.store(entry.lock, Relaxed);
        self.meta.store(
            u64::from(entry.class)
                | u64::from(entry.mode.bit()) << 32
                | u64::from(entry.settled) << SETTLED,
            Relaxed,
        );
        self.site
            .store(std::ptr::from_ref(entry.site).cast_mut(), Relaxed);
        self.flow_data.store(entry.flow.0, Relaxed);
        self.flow_vtable.store(entry.flow.1, Relaxed);
        self.state.store(TAKEN, Release);
    }

    /// Its entry, charged to `owner` (the owner its cache is bound to), if it has one.
    fn load(&self, owner: Owner) -> Option<Entry> {
        if self.state.load(Acquire) != TAKEN {
            return None;
        }
        // SAFETY: `site` holds null or a pointer made from a `&'static Location`
        // (`store`), valid for ever; a slot seen `TAKEN` (`Acquire`) has had one stored
        // before its state (`Release`).
        let site = unsafe { self.site.load(Relaxed).as_ref() }?;
        let meta = self.meta.load(Relaxed);
        Some(Entry {
            owner,
            id: self.id.load(Relaxed),
            lock: self.lock.load(Relaxed),
            class: meta as u32,
            mode: Mode::from_bit((meta >> 32) as u8),
            site,
            flow: (self.flow_data.load(Relaxed), self.flow_vtable.load(Relaxed)),
            settled: meta & (1 << SETTLED) != 0,
        })
    }

    /// Sets the mode (only its holder does, or a thread that holds its owner's shard
    /// mutex while the owner runs elsewhere: no other write races it).
    fn set_mode(&self, mode: Mode) {
        let meta = self.meta.load(Relaxed) & !(0xff << 32);
        self.meta.store(meta | u64::from(mode.bit()) << 32, Relaxed);
    }

    /// Sets whether it is settled (as [`Slot::set_mode`]).
    fn set_settled(&self, settled: bool) {
        let meta = self.meta.load(Relaxed) & !(1 << SETTLED);
        self.meta
            .store(meta | u64::from(settled) << SETTLED, Relaxed);
    }

    /// Whether it holds the entry of `charge`.
    #[inline(always)]
    fn is(&self, charge: Charge) -> bool {
        self.state.load(Acquire) == TAKEN && charge.is(self.id.load(Relaxed))
    }
}

/// A thread's cache of the entries of the owner it is *bound* to: the owner that last
/// charged a lock on this thread. While that owner runs on the thread (the common case:
/// a task acquires and releases on the worker that polls it), its acquires and releases
/// touch this cache alone, with plain stores and no read-modify-write.
///
/// Only the cache's thread adds entries, moves them out (to the owner's shard: when it
/// is full, when another owner charges a lock on the thread, when the thread ends), and
/// writes `len`. Other threads find the cache in the bound owner's shard
/// ([`ShardData::bound`]) and reach it under that shard's mutex only, to read it or to
/// free one slot: a release of a guard sent away, a dropped lock's forgotten holds.
/// When the owner runs on another thread (a task that moved), that thread *freezes* the
/// cache (clears `valid`, under the mutex) and binds its own: the frozen cache keeps the
/// owner's older entries, still found through the shard, until they are released (a
/// release on the cache's thread frees its slot there, as any) or the cache's thread
/// moves them to the shard at its next binding. The cache's thread reads `valid` before
/// its next fast path: the scheduler's hand-off orders the two.
#[derive(Debug)]
pub(super) struct Local {
    slots: [Slot; LOCAL_SLOTS],
    /// The slots in use: `0..len`, some freed (a release out of order, or from another
    /// thread). Written by the cache's thread alone.
    len: AtomicUsize,
    /// Whether it is live: cleared when another thread froze it (or at its unbinding).
    valid: AtomicBool,
}

/// The caches of ended threads, for new ones.
static FREE_LOCALS: Mutex<Vec<&'static Local>> = Mutex::new(Vec::new());

impl Local {
    const fn new() -> Self {
        Self {
            slots: [const { Slot::new() }; LOCAL_SLOTS],
            len: AtomicUsize::new(0),
            valid: AtomicBool::new(false),
        }
    }

    /// A cache for this thread: a free one, or a new one (never freed: under a kilobyte
    /// for each thread that ever ran at once).
    fn take() -> &'static Local {
        let free = FREE_LOCALS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        free.unwrap_or_else(|| Box::leak(Box::new(Local::new())))
    }

    fn slots(&self) -> &[Slot] {
        &self.slots[..self.len.load(Acquire).min(LOCAL_SLOTS)]
    }

    /// Adds `entry` (on its thread, bound to its owner): its slot, if one is left.
    #[inline(always)]
    fn push(&self, entry: &Entry) -> Option<u32> {
        let len = self.len.load(Relaxed);
        let slot = self.slots.get(len)?;
        slot.store(entry);
        self.len.store(len + 1, Release);
        Some(len as u32)
    }

    /// Whether the slot of `charge` holds its entry.
    #[inline(always)]
    fn holds(&self, charge: Charge) -> bool {
        self.slots
            .get(charge.slot() as usize)
            .is_some_and(|slot| slot.is(charge))
    }

    /// Frees the slot of `charge` if it holds its entry (on its thread, live or frozen:
    /// only this thread moves its entries), and the free slots at the end.
    #[inline(always)]
    fn free(&self, charge: Charge) -> bool {
        let at = charge.slot() as usize;
        match self.slots.get(at) {
            Some(slot) if slot.is(charge) => slot.state.store(FREE, Release),
            _ => return false,
        }
        let mut len = self.len.load(Relaxed);
        if at + 1 == len {
            // The last one (the common case: released in the order taken), just freed.
            len = at;
        }
        while len > 0 && self.slots[len - 1].state.load(Relaxed) == FREE {
            len -= 1;
        }
        self.len.store(len, Release);
        true
    }

    /// The slot holding the entry of `charge`: the one it gave, else found by a search.
    fn find(&self, charge: Charge) -> Option<&Slot> {
        match self.slots.get(charge.slot() as usize) {
            Some(slot) if slot.is(charge) => Some(slot),
            _ => self.slots().iter().find(|slot| slot.is(charge)),
        }
    }

    /// Moves its entries, charged to `owner`, to the end of `entries` (under `owner`'s
    /// shard mutex).
    fn drain_into(&self, owner: Owner, entries: &mut Vec<Entry>) {
        for slot in self.slots() {
            if let Some(entry) = slot.load(owner) {
                entries.push(entry);
                slot.state.store(FREE, Release);
            }
        }
        self.len.store(0, Release);
    }
}

/// The guard of a thread's cache: gives it back when the thread ends.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let _ = THREAD.try_with(|state| {
            if let Some(local) = state.local.take() {
                if let Some(owner) = state.bound.take() {
                    unbind(owner, local);
                }
                FREE_LOCALS
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(local);
            }
        });
    }
}

/// This thread's cache, if it is bound to `owner` (the owner that runs now) and still
/// valid.
fn bound_local(owner: Owner) -> Option<&'static Local> {
    THREAD
        .try_with(|state| state.bound_to(owner))
        .ok()
        .flatten()
}

/// Binds this thread's cache to `owner`, the owner that runs now: unbinds it from the
/// owner it was bound to (its entries to that owner's shard), and freezes the cache of
/// another thread bound to `owner`, if any (its entries stay there, see [`Local`]).
/// `None` in a thread that is ending (no cache: its charges go to the shard).
fn bind(owner: Owner) -> Option<&'static Local> {
    THREAD
        .try_with(|state| {
            let local = match state.local.get() {
                Some(local) => local,
                None => {
                    // Registers the guard that gives the cache back: none if the thread
                    // is ending.
                    EXIT.try_with(|_| ()).ok()?;
                    let local = Local::take();
                    state.local.set(Some(local));
                    local
                }
            };
            if let Some(previous) = state.bound.take() {
                unbind(previous, local);
            }
            let index = shard_of(owner);
            let mut shard = self::shard(owner);
            for (bound, other) in &shard.bound {
                if *bound == owner {
                    // It ran on another thread last: that cache is frozen, its entries
                    // left there (only its thread moves them).
                    other.valid.store(false, Relaxed);
                }
            }
            local.valid.store(true, Relaxed);
            shard.bound.push((owner, local));
            drop(shard);
            state.bound.set(Some(owner));
            state.bound_shard.set(index);
            Some(local)
        })
        .ok()
        .flatten()
}

/// Unbinds `local`, this thread's cache (live or frozen), from `owner`: its entries
/// move to `owner`'s shard.
fn unbind(owner: Owner, local: &'static Local) {
    let mut shard = shard(owner);
    local.valid.store(false, Relaxed);
    local.drain_into(owner, &mut shard.entries);
    if let Some(at) = shard
        .bound
        .iter()
        .position(|(bound, other)| *bound == owner && std::ptr::eq(*other, local))
    {
        // In order: the frozen caches are found oldest first.
        shard.bound.remove(at);
    }
}

// ---------------------------------------------------------------------------------------
// The held sets: charges, releases and lookups.

/// A lock charged to an owner, in one word (kept in every guard, and passed in a
/// register): the slot of the cache it went to (4 bits, [`NO_SLOT`]: the shard), its
/// owner's shard, where that cache is bound or the entry is (6 bits), and the low 54
/// bits of its entry number (unique among the entries held at once: two entries'
/// numbers that agree there are given by threads 2^22 apart, with as many entries
/// given by each).
#[derive(Clone, Copy, Debug)]
pub(super) struct Charge(u64);

impl Charge {
    #[inline(always)]
    fn new(id: u64, slot: u32, shard: usize) -> Self {
        Charge(id << 10 | (shard as u64 % SHARDS as u64) << 4 | u64::from(slot & 0xf))
    }

    /// The slot of the cache its entry went to.
    #[inline(always)]
    fn slot(self) -> u32 {
        (self.0 & 0xf) as u32
    }

    /// Its owner's shard.
    #[inline(always)]
    fn shard(self) -> usize {
        (self.0 >> 4) as usize % SHARDS
    }

    /// Whether `id` is its entry's number.
    #[inline(always)]
    fn is(self, id: u64) -> bool {
        id << 10 == self.0 & !0x3ff
    }
}

/// Charges `entry` to its owner, the owner that runs now, under a new entry number:
/// in this thread's cache, bound to it if it was not; in the shard if the cache is full
/// (its entries first, to keep the order) or the thread has none. Marks the owner's
/// shard in `shards` (the lock's: see [`forget_lock`]), and remembers the charge for the
/// poll in progress if `in_poll` (an async acquire).
#[inline(always)]
pub(super) fn charge(mut entry: Entry, shards: &AtomicU64, in_poll: bool) -> Charge {
    let owner = entry.owner;
    let fast = THREAD.try_with(|state| {
        let local = state.bound_to(owner)?;
        entry.id = state.next_entry();
        let slot = local.push(&entry)?;
        let index = state.bound_shard.get();
        let charge = Charge::new(entry.id, slot, index);
        if in_poll {
            state.last_charged.set(Some(charge));
        }
        Some((charge, index))
    });
    let (charge, index) = match fast {
        Ok(Some(fast)) => fast,
        _ => charge_slow(entry, in_poll),
    };
    let bit = 1 << index;
    if shards.load(Relaxed) & bit == 0 {
        shards.fetch_or(bit, Relaxed);
    }
    charge
}

/// [`charge`] for an async acquire whose announcement, in the poll in progress on this
/// thread, found its owner holding nothing, with this thread's cache bound to it
/// ([`announced_holding_nothing`]): the entry of lock `lock` (of class `class`, in
/// `mode`, acquired at `site`) goes to the first slot of that cache, with no more checks
/// (nothing ran in between but the lock's own code: the owner, its binding and its empty
/// cache are as they were). `None` otherwise: call [`charge`].
#[inline(always)]
pub(super) fn charge_ready(
    lock: u64,
    class: u32,
    mode: Mode,
    site: &'static Location<'static>,
    shards: &AtomicU64,
) -> Option<Charge> {
    let (charge, index) = THREAD
        .try_with(|state| {
            let local = state.ready.take()?;
            // Set in this poll by its announcement (`Caller::current`): the same owner.
            let owner = state.owner.get()?;
            let caller = Caller {
                owner,
                waker: state.context.get(),
            };
            let entry = Entry {
                owner,
                id: state.next_entry(),
                lock,
                class,
                mode,
                site,
                flow: caller.flow_key(),
                settled: true,
            };
            let slot = local.push(&entry)?;
            let index = state.bound_shard.get();
            let charge = Charge::new(entry.id, slot, index);
            state.last_charged.set(Some(charge));
            Some((charge, index))
        })
        .ok()
        .flatten()?;
    let bit = 1 << index;
    if shards.load(Relaxed) & bit == 0 {
        shards.fetch_or(bit, Relaxed);
    }
    Some(charge)
}

/// [`charge`], binding this thread's cache, or with a full cache, or none.
#[cold]
#[inline(never)]
fn charge_slow(mut entry: Entry, in_poll: bool) -> (Charge, usize) {
    let owner = entry.owner;
    if entry.id == 0 {
        entry.id = next_entry();
    }
    let slot = match bound_local(owner).or_else(|| bind(owner)) {
        Some(local) => local.push(&entry).or_else(|| {
            let mut shard = shard(owner);
            local.drain_into(owner, &mut shard.entries);
            drop(shard);
            local.push(&entry)
        }),
        None => None,
    };
    let slot = slot.unwrap_or_else(|| {
        shard(owner).entries.push(entry);
        NO_SLOT
    });
    let index = shard_of(owner);
    let charge = Charge::new(entry.id, slot, index);
    if in_poll {
        let _ = THREAD.try_with(|state| state.last_charged.set(Some(charge)));
    }
    (charge, index)
}

/// Whether `owner`, the owner that runs now, holds nothing: no lock to check an acquire
/// against.
#[inline(always)]
pub(super) fn holds_nothing(owner: Owner) -> bool {
    holds_nothing_for(owner, false)
}

/// [`holds_nothing`], for the announcement of an acquire by `caller`: an async one
/// whose owner holds nothing, with this thread's cache bound to it, is *ready* (see
/// [`charge_ready`]).
#[inline(always)]
pub(super) fn announced_holding_nothing(caller: &Caller) -> bool {
    holds_nothing_for(caller.owner, caller.is_async())
}

#[inline(always)]
fn holds_nothing_for(owner: Owner, in_poll: bool) -> bool {
    let fast = THREAD.try_with(|state| {
        let local = state.bound_to(owner)?;
        let shard = &HELD[state.bound_shard.get() % SHARDS];
        let nothing = local.len.load(Relaxed) == 0
            && shard.entries.load(Relaxed) == 0
            && shard.frozen.load(Relaxed) == 0;
        if nothing && in_poll {
            state.ready.set(Some(local));
        }
        Some(nothing)
    });
    if let Ok(Some(nothing)) = fast {
        return nothing;
    }
    // Its own entries (and its binding) were published before it moved on, to this
    // thread or another: the scheduler's hand-off orders them.
    let shard = &HELD[shard_of(owner)];
    shard.entries.load(Relaxed) == 0 && shard.bound.load(Relaxed) == 0
}

/// Calls `f` with each entry of `owner`, the owner that runs now, oldest first (but
/// for the entries a frozen cache gave the shard after newer ones).
pub(super) fn for_each_held(owner: Owner, mut f: impl FnMut(&Entry)) {
    let each = |local: &Local, f: &mut dyn FnMut(&Entry)| {
        for slot in local.slots() {
            if let Some(entry) = slot.load(owner) {
                f(&entry);
            }
        }
    };
    let live = bound_local(owner);
    if live.is_some() || !holds_nothing(owner) {
        let index = shard_of(owner);
        let shared = &HELD[index];
        if live.is_none() || shared.entries.load(Relaxed) != 0 || shared.frozen.load(Relaxed) != 0 {
            let shard = self::shard(owner);
            shard
                .entries
                .iter()
                .filter(|entry| entry.owner == owner)
                .for_each(&mut f);
            // Caches of other threads (or this one's, frozen): their threads only free
            // slots of theirs while the shard is locked.
            for local in shard.caches_of(owner) {
                if live.is_none_or(|live| !std::ptr::eq(live, local)) {
                    each(local, &mut f);
                }
            }
        }
    }
    if let Some(local) = live {
        each(local, &mut f);
    }
}

/// This thread's cache, if it holds the entry of `charge` (live or frozen: only this
/// thread moves its entries).
#[inline(always)]
fn own_slot(state: &ThreadState, charge: Charge) -> Option<&'static Local> {
    let local = state.local.get()?;
    local.holds(charge).then_some(local)
}

/// The shard of `charge` with the slot that holds its entry, if a cache has it.
fn shard_of_charge(charge: Charge) -> (ShardGuard, Option<&'static Slot>) {
    let shard = &HELD[charge.shard()];
    let data = shard.data.lock().unwrap_or_else(PoisonError::into_inner);
    let slot = data.bound.iter().find_map(|(_, local)| local.find(charge));
    (ShardGuard { data, shard }, slot)
}

/// Edits the entry of `charge`: `in_slot` if it is in a cache, else `in_shard`.
fn edit(charge: Charge, in_slot: impl FnOnce(&Slot), in_shard: impl FnOnce(&mut Entry)) {
    if charge.slot() != NO_SLOT {
        let own = THREAD
            .try_with(|state| own_slot(state, charge))
            .ok()
            .flatten();
        if let Some(local) = own {
            return in_slot(&local.slots[charge.slot() as usize]);
        }
    }
    let (mut shard, slot) = shard_of_charge(charge);
    if let Some(slot) = slot {
        return in_slot(slot);
    }
    if let Some(entry) = shard.entries.iter_mut().find(|entry| charge.is(entry.id)) {
        in_shard(entry);
    }
}

/// Takes the entry of `charge` off its owner's set, on whichever thread.
#[inline(always)]
pub(super) fn release(charge: Charge) {
    // The common case: released by its owner, on the thread whose cache has it.
    let fast = charge.slot() != NO_SLOT
        && THREAD
            .try_with(|state| state.local.get().is_some_and(|local| local.free(charge)))
            .unwrap_or(false);
    if !fast {
        release_slow(charge);
    }
}

/// [`release`] from the shard.
#[cold]
#[inline(never)]
fn release_slow(charge: Charge) {
    let (mut shard, slot) = shard_of_charge(charge);
    match slot {
        // Freed, left in place: the cache's thread drops it from its end.
        Some(slot) => slot.state.store(FREE, Release),
        None => shard.release(charge),
    }
}

/// Sets the mode of the entry of `charge`.
pub(super) fn set_mode(charge: Charge, mode: Mode) {
    edit(
        charge,
        |slot| slot.set_mode(mode),
        |entry| entry.mode = mode,
    );
}

/// Marks the entry of `charge` settled or not (see [`Entry::settled`]).
pub(super) fn set_settled(charge: Charge, settled: bool) {
    edit(
        charge,
        |slot| slot.set_settled(settled),
        |entry| entry.settled = settled,
    );
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

/// Whether `owner` still holds one of the entries `ids` of lock `lock` (the watchdog).
pub(super) fn holds_any(owner: Owner, ids: &[u64], lock: u64) -> bool {
    let shard = shard(owner);
    let held =
        |entry: &Entry| entry.owner == owner && entry.lock == lock && ids.contains(&entry.id);
    shard.entries.iter().any(held)
        || shard.caches_of(owner).any(|local| {
            local
                .slots()
                .iter()
                .any(|slot| slot.load(owner).is_some_and(|entry| held(&entry)))
        })
}

/// Takes every entry of lock `lock` off the held sets of the shards of `shards` (a set
/// of shard bits: where its holders' entries were ever charged), and off the caches bound
/// to their owners, for a lock dropped while forgotten guards may still hold it.
pub(super) fn forget_lock(lock: u64, shards: u64) {
    for (i, shard) in HELD.iter().enumerate() {
        if shards & (1 << i) == 0 {
            continue;
        }
        let mut data = shard.data.lock().unwrap_or_else(PoisonError::into_inner);
        data.entries.retain(|entry| entry.lock != lock);
        for (_, local) in &data.bound {
            for slot in local.slots() {
                if slot.state.load(Acquire) == TAKEN && slot.lock.load(Relaxed) == lock {
                    slot.state.store(FREE, Release);
                }
            }
        }
        shard.entries.store(data.entries.len(), Relaxed);
    }
}
