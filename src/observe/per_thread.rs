//! Where a lock's counters live (features `stats` and `lock_stat`): one [`Block`] per
//! thread that uses the lock, written by that thread alone (plain loads and stores of
//! relaxed atomics, no read-modify-write), and folded when the counters are read, as the
//! kernel keeps `lock_stat` and its lock events per CPU (and tokio its worker metrics per
//! worker).
//!
//! - A lock ([`Blocks`], the raw lock's `stats` field) keeps its blocks in a list under a
//!   mutex, taken only when a thread first uses the lock (or has lost its entry in the
//!   cache below) and when the counters are read. It frees them when it is dropped.
//! - A thread ([`Local`], a thread-local without a destructor, so that reaching it is one
//!   address computation) keeps a small cache from lock to block, keyed by the lock's id
//!   (unique in the process, never reused: an entry of a lock since dropped never matches
//!   again), and the state of `lock_stat` (its sampling countdowns, its lease of the
//!   coarse clock).
//! - A block has an owner, the thread that writes it, alive while a second thread-local
//!   (one with a destructor, made at the thread's first miss in the cache) is. When a
//!   thread exits, that destructor marks it gone and empties the cache; its blocks stay
//!   with their locks, counts and all, and the next thread that uses such a lock takes
//!   one over (its owner's last writes happen before). So no count is lost, and a lock
//!   has no more blocks than threads that used it at once.
//! - A thread whose owner thread-local is gone (a guard dropped by another thread-local's
//!   destructor) records into the lock's shared block, with read-modify-writes.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// One thread's counters for one lock (or the lock's shared ones).
#[derive(Debug)]
pub(crate) struct Block {
    /// The lock events (`RwLock::stats`).
    pub(crate) events: crate::raw::stats::Events,
    /// The counts and histograms of `lock_stat`.
    #[cfg(feature = "lock_stat")]
    pub(crate) lock_stat: crate::lock_stat::LocalBlock,
}

impl Block {
    pub(crate) const fn new() -> Self {
        Self {
            events: crate::raw::stats::Events::new(),
            #[cfg(feature = "lock_stat")]
            lock_stat: crate::lock_stat::LocalBlock::new(),
        }
    }
}

/// Adds `n` to `counter`: by its one writer (`owned`: a load and a store), or by anyone
/// (a read-modify-write: the shared block).
#[inline(always)]
pub(crate) fn add(counter: &AtomicU64, n: u64, owned: bool) {
    if owned {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    } else {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Raises `counter` to `n` if below.
#[cfg(feature = "lock_stat")]
#[inline]
pub(crate) fn raise(counter: &AtomicU64, n: u64, owned: bool) {
    if n > counter.load(Ordering::Relaxed) {
        if owned {
            counter.store(n, Ordering::Relaxed);
        } else {
            counter.fetch_max(n, Ordering::Relaxed);
        }
    }
}

/// A thread, as the owner of blocks: alive until its owner thread-local is destroyed.
#[derive(Debug)]
struct Owner {
    alive: AtomicBool,
}

/// A lock's block in its list, with the thread that writes it.
#[derive(Debug)]
struct Entry {
    block: Arc<Block>,
    owner: Arc<Owner>,
}

/// A lock's blocks: the raw lock's `stats` field.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    /// The lock's id (0: not yet given one, at its first use).
    id: AtomicU64,
    list: Mutex<Vec<Entry>>,
    /// For threads without their owner thread-local (made on first use).
    shared: OnceLock<Box<Block>>,
}

/// Ids of locks, from 1 (0: none given yet; `u64::MAX`: an empty cache entry's).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Entries in a thread's cache (a power of two).
const CACHE: usize = 32;

/// A thread's cached block of a lock.
#[derive(Clone, Copy)]
struct Cached {
    id: u64,
    block: *const Block,
}

impl Cached {
    const EMPTY: Self = Self {
        id: u64::MAX,
        block: ptr::null(),
    };
}

/// A thread's state (see the module documentation). No destructor: reaching it never
/// fails, and costs no check of its state.
pub(crate) struct Local {
    cache: [Cell<Cached>; CACHE],
    /// The state of `lock_stat` on this thread.
    #[cfg(feature = "lock_stat")]
    pub(crate) lock_stat: crate::lock_stat::LocalState,
}

impl Local {
    const fn new() -> Self {
        Self {
            cache: [const { Cell::new(Cached::EMPTY) }; CACHE],
            #[cfg(feature = "lock_stat")]
            lock_stat: crate::lock_stat::LocalState::new(),
        }
    }
}

/// The owner of this thread's blocks: its destructor marks them free to take over, and
/// empties the cache (no block of this thread is written through it again).
struct OwnerSlot(Arc<Owner>);

impl Drop for OwnerSlot {
    fn drop(&mut self) {
        LOCAL.with(|local| {
            for entry in &local.cache {
                entry.set(Cached::EMPTY);
            }
        });
        // Its blocks may be taken over: after its last writes (`Release`).
        self.0.alive.store(false, Ordering::Release);
    }
}

thread_local! {
    static LOCAL: Local = const { Local::new() };
    static OWNER: OwnerSlot = OwnerSlot(Arc::new(Owner {
        alive: AtomicBool::new(true),
    }));
}

/// Runs `f` with this thread's [`Local`].
#[cfg(feature = "lock_stat")]
#[inline(always)]
pub(crate) fn with_local<R>(f: impl FnOnce(&Local) -> R) -> R {
    LOCAL.with(f)
}

impl Blocks {
    pub(crate) const fn new() -> Self {
        Self {
            id: AtomicU64::new(0),
            list: Mutex::new(Vec::new()),
            shared: OnceLock::new(),
        }
    }

    /// Runs `hit` with this thread's block of the lock if `local`'s cache has it (the
    /// common case: a load of the lock's id and of one cache entry), else `miss`.
    #[inline(always)]
    pub(crate) fn cached<'a, R>(
        &'a self,
        local: &Local,
        hit: impl FnOnce(&'a Block) -> R,
        miss: impl FnOnce() -> R,
    ) -> R {
        let id = self.id.load(Ordering::Relaxed);
        let cached = local.cache[(id as usize) & (CACHE - 1)].get();
        if cached.id == id {
            // SAFETY: the entry was made (in `find`) for this lock, by its id, which no
            // other lock ever has (and no entry has before it is given one: an empty
            // entry's id is `u64::MAX`, never given), from a block in this lock's list; a
            // lock frees its blocks only when it is dropped, and it is alive (`self`). And
            // the block is still this thread's: blocks are taken over only from threads
            // gone, and a thread's cache is emptied when it goes.
            hit(unsafe { &*cached.block })
        } else {
            miss()
        }
    }

    /// Runs `f` with this thread's block of the lock and its thread-local (`None`, with
    /// the shared block: the thread's owner thread-local is gone; write it with
    /// read-modify-writes).
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Block, Option<&Local>) -> R) -> R {
        LOCAL.with(|local| {
            let (block, owned) = self.cached(local, |block| (block, true), || self.find(local));
            f(block, owned.then_some(local))
        })
    }

    /// Counts one event (a field of [`Block::events`]) on this thread's block.
    #[inline(always)]
    pub(crate) fn count(&self, event: impl FnOnce(&crate::raw::stats::Events) -> &AtomicU64) {
        self.with(|block, local| add(event(&block.events), 1, local.is_some()));
    }

    /// The lock's id, given now.
    #[cold]
    fn assign_id(&self) -> u64 {
        let new = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        match self
            .id
            .compare_exchange(0, new, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => new,
            Err(id) => id,
        }
    }

    /// This thread's block of the lock, not in its cache: found in the list, taken over
    /// from a thread gone, or made; then cached (`true`). The lock's shared block
    /// (`false`) if the thread's owner thread-local is gone (or cannot be made: the thread
    /// is exiting).
    #[cold]
    #[inline(never)]
    fn find<'a>(&'a self, local: &Local) -> (&'a Block, bool) {
        let Ok(me) = OWNER.try_with(|owner| Arc::clone(&owner.0)) else {
            return (self.shared(), false);
        };
        let id = match self.id.load(Ordering::Relaxed) {
            0 => self.assign_id(),
            id => id,
        };
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        let at = match list.iter().position(|e| Arc::ptr_eq(&e.owner, &me)) {
            Some(at) => at,
            // A thread gone: its last writes happen before ours (`Acquire`).
            None => match list
                .iter()
                .position(|e| !e.owner.alive.load(Ordering::Acquire))
            {
                Some(at) => {
                    list[at].owner = me;
                    at
                }
                None => {
                    list.push(Entry {
                        block: Arc::new(Block::new()),
                        owner: me,
                    });
                    list.len() - 1
                }
            },
        };
        let block = Arc::as_ptr(&list[at].block);
        local.cache[(id as usize) & (CACHE - 1)].set(Cached { id, block });
        drop(list);
        // SAFETY: the block is in this lock's list (`self`), which keeps it until the lock
        // is dropped.
        (unsafe { &*block }, true)
    }

    /// The block of threads without their owner thread-local.
    #[cold]
    fn shared(&self) -> &Block {
        self.shared.get_or_init(|| Box::new(Block::new()))
    }

    /// Runs `f` on every block of the lock.
    pub(crate) fn each(&self, mut f: impl FnMut(&Block)) {
        {
            let list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
            for entry in list.iter() {
                f(&entry.block);
            }
        }
        if let Some(shared) = self.shared.get() {
            f(shared);
        }
    }
}

#[cfg(all(test, feature = "lock_stat"))]
impl Blocks {
    /// How many thread blocks the lock has.
    pub(crate) fn len(&self) -> usize {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Has the shared block been made (a thread without its owner thread-local recorded)?
    pub(crate) fn has_shared(&self) -> bool {
        self.shared.get().is_some()
    }
}
