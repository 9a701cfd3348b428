//! Where a lock's counters live: one [`Block`] per thread that uses the lock, written by
//! that thread alone (plain loads and stores of relaxed atomics, no read-modify-write),
//! and folded when the statistics are read, as the kernel keeps `lock_stat` per CPU.
//!
//! - A lock ([`Blocks`]) keeps its blocks in a list under a mutex, taken only when a
//!   thread first uses the lock (or has lost its entry in the cache below) and when the
//!   statistics are read. It frees them when it is dropped.
//! - A thread ([`Local`], a thread-local) keeps a small cache from lock to block, keyed by
//!   the lock's id (unique in the process, never reused: an entry of a lock since dropped
//!   never matches again), its sampling countdowns and its lease of the coarse clock.
//! - A block has an owner, the thread that writes it. When a thread exits, its
//!   thread-local's destructor marks it gone; its blocks stay with their locks, counts and
//!   all, and the next thread that uses such a lock takes one over (its owner's last
//!   writes happen before). So no count is lost, and a lock has no more blocks than
//!   threads that used it at once.
//! - A thread whose thread-local is gone (a guard dropped by another thread-local's
//!   destructor) records into the lock's shared block, with read-modify-writes.

use std::cell::{Cell, OnceCell};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::histogram::Recorder;
use super::Access;

/// One thread's counters for one lock (or the lock's shared ones).
#[derive(Debug)]
pub(super) struct Block {
    /// Read (and upgradable read) acquisitions, and write ones, that neither waited nor
    /// were timed: each a wait of zero and a hold not timed, counted with one add.
    pub(super) fast_reads: AtomicU64,
    pub(super) fast_writes: AtomicU64,
    pub(super) read_wait: Recorder,
    pub(super) read_hold: Recorder,
    pub(super) write_wait: Recorder,
    pub(super) write_hold: Recorder,
    pub(super) read_contentions: AtomicU64,
    pub(super) write_contentions: AtomicU64,
}

impl Block {
    pub(super) const fn new() -> Self {
        Self {
            fast_reads: AtomicU64::new(0),
            fast_writes: AtomicU64::new(0),
            read_wait: Recorder::new(),
            read_hold: Recorder::new(),
            write_wait: Recorder::new(),
            write_hold: Recorder::new(),
            read_contentions: AtomicU64::new(0),
            write_contentions: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(super) fn wait_of(&self, access: Access) -> (&Recorder, &AtomicU64) {
        match access {
            Access::Write => (&self.write_wait, &self.write_contentions),
            _ => (&self.read_wait, &self.read_contentions),
        }
    }

    #[inline]
    pub(super) fn fast_of(&self, access: Access) -> &AtomicU64 {
        match access {
            Access::Write => &self.fast_writes,
            _ => &self.fast_reads,
        }
    }

    #[inline]
    pub(super) fn hold_of(&self, access: Access) -> &Recorder {
        match access {
            Access::Write => &self.write_hold,
            _ => &self.read_hold,
        }
    }
}

/// Adds `n` to `counter`: by its one writer (`owned`: a load and a store), or by anyone
/// (a read-modify-write: the shared block).
#[inline]
pub(super) fn add(counter: &AtomicU64, n: u64, owned: bool) {
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
#[inline]
pub(super) fn raise(counter: &AtomicU64, n: u64, owned: bool) {
    if n > counter.load(Ordering::Relaxed) {
        if owned {
            counter.store(n, Ordering::Relaxed);
        } else {
            counter.fetch_max(n, Ordering::Relaxed);
        }
    }
}

/// A thread, as the owner of blocks: alive until its thread-local is destroyed.
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

/// A lock's blocks.
#[derive(Debug)]
pub(super) struct Blocks {
    /// The lock's id (0: not yet given one, at its first use).
    id: AtomicU64,
    list: Mutex<Vec<Entry>>,
    /// For threads without their thread-local (made on first use).
    shared: OnceLock<Box<Block>>,
}

/// Ids of locks, from 1 (0: none given yet; `u64::MAX`: a fresh cache entry's).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Entries in a thread's cache (a power of two).
const CACHE: usize = 32;

/// A thread's cached block of a lock.
#[derive(Clone, Copy)]
struct Cached {
    id: u64,
    block: *const Block,
}

/// A thread's state (see the module documentation).
pub(super) struct Local {
    cache: [Cell<Cached>; CACHE],
    owner: OnceCell<Arc<Owner>>,
    /// Read (and upgradable read) holds, and write holds, left until the next timed one.
    read_left: Cell<u32>,
    write_left: Cell<u32>,
    /// This thread's last renewal of the coarse clock's lease.
    pub(super) lease: Cell<u64>,
}

impl Local {
    const fn new() -> Self {
        Self {
            cache: [const {
                Cell::new(Cached {
                    id: u64::MAX,
                    block: ptr::null(),
                })
            }; CACHE],
            owner: OnceCell::new(),
            read_left: Cell::new(0),
            write_left: Cell::new(0),
            lease: Cell::new(0),
        }
    }

    /// Is this thread's next hold in mode `access` (that did not wait) to be timed? One in
    /// `every` per thread and mode, the first one included.
    #[inline]
    pub(super) fn sample(&self, access: Access, every: u32) -> bool {
        let left = match access {
            Access::Write => &self.write_left,
            _ => &self.read_left,
        };
        match left.get() {
            0 => {
                left.set(every - 1);
                true
            }
            n => {
                left.set(n - 1);
                false
            }
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        // Its blocks may be taken over: after its last writes (`Release`).
        if let Some(owner) = self.owner.get() {
            owner.alive.store(false, Ordering::Release);
        }
    }
}

thread_local! {
    static LOCAL: Local = const { Local::new() };
}

impl Blocks {
    pub(super) const fn new() -> Self {
        Self {
            id: AtomicU64::new(0),
            list: Mutex::new(Vec::new()),
            shared: OnceLock::new(),
        }
    }

    /// Runs `f` with this thread's block of the lock and its thread-local (`None`, with the
    /// shared block: the thread-local is gone; write it with read-modify-writes).
    #[inline(always)]
    pub(super) fn with<R>(&self, mut f: impl FnMut(&Block, Option<&Local>) -> R) -> R {
        let id = self.id.load(Ordering::Relaxed);
        let done = LOCAL.try_with(|local| {
            let cached = local.cache[(id as usize) & (CACHE - 1)].get();
            let block = if cached.id == id {
                // SAFETY: the entry was made (in `find`) for this lock, by its id, which no
                // other lock ever has (and no entry has before it is given one: a fresh
                // entry's id is `u64::MAX`, never given), from a block in this lock's
                // list; a lock frees its blocks only when it is dropped, and it is alive
                // (`self`). And the block is still this thread's: blocks are taken over
                // only from threads gone.
                unsafe { &*cached.block }
            } else {
                self.find(local)
            };
            f(block, Some(local))
        });
        match done {
            Ok(r) => r,
            Err(_) => f(self.shared(), None),
        }
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
    /// from a thread gone, or made; then cached.
    #[cold]
    #[inline(never)]
    fn find<'a>(&'a self, local: &Local) -> &'a Block {
        let id = match self.id.load(Ordering::Relaxed) {
            0 => self.assign_id(),
            id => id,
        };
        let me = local.owner.get_or_init(|| {
            Arc::new(Owner {
                alive: AtomicBool::new(true),
            })
        });
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        let at = match list.iter().position(|e| Arc::ptr_eq(&e.owner, me)) {
            Some(at) => at,
            // A thread gone: its last writes happen before ours (`Acquire`).
            None => match list
                .iter()
                .position(|e| !e.owner.alive.load(Ordering::Acquire))
            {
                Some(at) => {
                    list[at].owner = Arc::clone(me);
                    at
                }
                None => {
                    list.push(Entry {
                        block: Arc::new(Block::new()),
                        owner: Arc::clone(me),
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
        unsafe { &*block }
    }

    /// The block of threads without their thread-local.
    #[cold]
    fn shared(&self) -> &Block {
        self.shared.get_or_init(|| Box::new(Block::new()))
    }

    /// Runs `f` on every block of the lock.
    pub(super) fn each(&self, mut f: impl FnMut(&Block)) {
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

#[cfg(test)]
impl Blocks {
    /// How many thread blocks the lock has.
    pub(super) fn len(&self) -> usize {
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Has the shared block been made (a thread without its thread-local recorded)?
    pub(super) fn has_shared(&self) -> bool {
        self.shared.get().is_some()
    }
}
