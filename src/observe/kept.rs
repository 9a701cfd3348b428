//! Where a borrowed guard keeps what the observers know of its hold ([`Held`]) when their
//! features are on: in a record of a pool, so that the guard itself stays two words (its
//! lock and its value) and is returned in registers, as without the observers.
//!
//! Why: a guard of three words or more is returned through memory, and the copies of it
//! that an `async` acquire and its caller make (the acquire future's state, the output of
//! its poll, the caller's local) are stored and loaded with different widths, which the
//! processor cannot forward from one to the other: each such copy waits for the store to
//! reach the cache. On the 2-core AMD EPYC these were measured on, one word more per
//! guard took an uncontended `read().await` and its drop from 6 to 15 ns or more, more
//! than all the work of `lock_stat` itself.
//!
//! A [`Kept`] is one pointer, to a record that holds the lock's reference and the
//! [`Held`]; it owns the record, and gives it back to the pool when dropped. The pool is
//! per thread: a list of free records in a thread-local (no destructor: reaching it is one
//! address computation), taken from and given back to with a few plain loads and stores.
//! A thread that gives back more records than it takes (its guards are dropped by another
//! thread than the one that took them, as tasks move between workers) hands a batch to a
//! shared list under a mutex once it keeps [`CAP`]; a thread that runs out takes a batch
//! from there, or makes a new chunk of [`CHUNK`] records. Records are never freed: the
//! chunks are kept in a shared list for as long as the process lives (at most as many
//! records as guards held at once, plus the batches). When a thread exits, a second
//! thread-local's destructor hands its free records to the shared list; a record given
//! back after that (a guard dropped by another thread-local's destructor) goes there
//! directly.

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::{Mutex, PoisonError};

use super::{Held, ObservedLock, COMPACT};
use crate::raw::list::WaiterKind;

/// Records a thread keeps free before it hands half of them to the shared list.
const CAP: usize = 128;

/// Records made at once when no free one is left anywhere.
const CHUNK: usize = 64;

/// One hold's record: free (in a list, linked by `next`) or kept (by one [`Kept`], which
/// has written `lock` and `held`).
struct Record {
    lock: *const ObservedLock,
    held: MaybeUninit<Held>,
    next: *mut Record,
}

/// A list of free records (its length: `len`).
struct List {
    head: *mut Record,
    len: usize,
}

// SAFETY: a list is a set of free records, which nothing else points to: whoever has the
// list has them.
unsafe impl Send for List {}

/// A chunk of records, as made: kept for the life of the process.
struct Chunk(#[allow(dead_code)] NonNull<Record>);

// SAFETY: only kept (never read) so that the chunk stays reachable.
unsafe impl Send for Chunk {}

/// The shared list: batches of free records handed over by threads.
static SPARE: Mutex<Vec<List>> = Mutex::new(Vec::new());

/// Every chunk ever made (see the module documentation).
static CHUNKS: Mutex<Vec<Chunk>> = Mutex::new(Vec::new());

/// A thread's free records.
struct Pool {
    head: Cell<*mut Record>,
    /// How many: `GONE` once the thread is exiting (its list went to the shared one, and
    /// records given back go there directly from now on), so that one comparison with
    /// [`CAP`] sends them there.
    len: Cell<usize>,
}

/// [`Pool::len`] of a thread that is exiting.
const GONE: usize = usize::MAX;

/// Hands the thread's free records to the shared list when the thread exits.
struct Flush;

impl Drop for Flush {
    fn drop(&mut self) {
        POOL.with(|pool| {
            let list = List {
                head: pool.head.replace(ptr::null_mut()),
                len: pool.len.replace(GONE),
            };
            if list.len != 0 {
                spare().push(list);
            }
        });
    }
}

thread_local! {
    static POOL: Pool = const {
        Pool {
            head: Cell::new(ptr::null_mut()),
            len: Cell::new(0),
        }
    };
    static FLUSH: Flush = const { Flush };
}

fn spare() -> std::sync::MutexGuard<'static, Vec<List>> {
    SPARE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A free record: from the thread's list, else from the shared one, else a new chunk.
#[inline(always)]
fn take() -> NonNull<Record> {
    POOL.with(|pool| match NonNull::new(pool.head.get()) {
        Some(record) => {
            // SAFETY: a record in the thread's list is free, and only this thread reaches
            // the list; `next` was written when it was linked.
            pool.head.set(unsafe { (*record.as_ptr()).next });
            pool.len.set(pool.len.get() - 1);
            record
        }
        None => refill(pool),
    })
}

/// [`take`], with the thread's list empty.
#[cold]
#[inline(never)]
fn refill(pool: &Pool) -> NonNull<Record> {
    let gone = pool.len.get() == GONE;
    if !gone {
        // Registers the flush of this thread's records at its exit (fails if it is
        // exiting already: `gone` is then set by the flush, or the records of this
        // thread are left to the shared list).
        let _ = FLUSH.try_with(|_| {});
    }
    let mut list = spare().pop().unwrap_or_else(new_chunk);
    let record = NonNull::new(list.head).expect("a list of records is not empty");
    // SAFETY: the list's records are free and ours (taken off the shared list, or new).
    list.head = unsafe { (*record.as_ptr()).next };
    list.len -= 1;
    if gone {
        if list.len != 0 {
            spare().push(list);
        }
    } else {
        pool.head.set(list.head);
        pool.len.set(list.len);
    }
    record
}

/// A new chunk of free records, linked.
fn new_chunk() -> List {
    let records: Box<[Record]> = (0..CHUNK)
        .map(|_| Record {
            lock: ptr::null(),
            held: MaybeUninit::uninit(),
            next: ptr::null_mut(),
        })
        .collect();
    let first = NonNull::from(Box::leak(records)).cast::<Record>();
    let mut head = ptr::null_mut();
    for i in (0..CHUNK).rev() {
        // SAFETY: `i` is within the chunk, which nothing else reaches yet.
        unsafe {
            let record = first.as_ptr().add(i);
            (*record).next = head;
            head = record;
        }
    }
    CHUNKS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Chunk(first));
    List { head, len: CHUNK }
}

/// Gives `record`, free now, back to the thread's list (or to the shared one).
#[inline(always)]
fn give(record: NonNull<Record>) {
    POOL.with(|pool| {
        let len = pool.len.get();
        if len >= CAP {
            return spill(pool, record);
        }
        // SAFETY: the record is free, and ours to link.
        unsafe { (*record.as_ptr()).next = pool.head.get() };
        pool.head.set(record.as_ptr());
        pool.len.set(len + 1);
    });
}

/// [`give`], with the thread's list full (half of it goes to the shared list) or the
/// thread exiting (the record goes there).
#[cold]
#[inline(never)]
fn spill(pool: &Pool, record: NonNull<Record>) {
    // SAFETY: the record is free, and ours to link.
    unsafe { (*record.as_ptr()).next = ptr::null_mut() };
    if pool.len.get() == GONE {
        spare().push(List {
            head: record.as_ptr(),
            len: 1,
        });
        return;
    }
    // The first half of the thread's list goes; the record joins the rest.
    let half = pool.len.get() / 2;
    let head = pool.head.get();
    let mut last = head;
    for _ in 1..half {
        // SAFETY: the list has `len` records, linked by `next`: these are among them.
        last = unsafe { (*last).next };
    }
    // SAFETY: `last` is the list's `half`-th record.
    let rest = unsafe { (*last).next };
    // SAFETY: as above; cut there.
    unsafe { (*last).next = ptr::null_mut() };
    // SAFETY: the record is free, and ours to link.
    unsafe { (*record.as_ptr()).next = rest };
    pool.head.set(record.as_ptr());
    pool.len.set(pool.len.get() - half + 1);
    spare().push(List { head, len: half });
}

/// A borrowed guard's lock reference with what the observers know of its hold, kept in a
/// record of the pool (see the module documentation): one pointer. It owns the record,
/// and gives it back when dropped (the [`Held`] has no drop of its own).
///
/// A hold that can be made again from its lock alone ([`Held::compact`]: with `lock_stat`
/// alone among the observers, one that is not timed) takes no record: the pointer is then
/// the lock's, with its lowest bit set ([`COMPACT_BIT`]; a lock is aligned to more), and
/// the hold is made again when it is needed (`Held::remake`).
pub(crate) struct Kept<'a> {
    ptr: NonNull<u8>,
    lock: PhantomData<&'a ObservedLock>,
}

/// The bit of [`Kept`]'s pointer that says it is the lock's, for a compact hold.
const COMPACT_BIT: usize = 1;

// A lock's address leaves that bit clear; so does a record's.
const _: () = assert!(std::mem::align_of::<ObservedLock>() > COMPACT_BIT);
const _: () = assert!(std::mem::align_of::<Record>() > COMPACT_BIT);

// SAFETY: a `Kept` owns its record, as a `Box<(&'a ObservedLock, Held)>` would own its
// value (or is a `&'a ObservedLock`); both are `Send` and `Sync` (the lock is `Sync`,
// `Held` is plain data).
unsafe impl Send for Kept<'_> {}
// SAFETY: as above.
unsafe impl Sync for Kept<'_> {}

impl std::fmt::Debug for Kept<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Kept");
        out.field("lock", &std::ptr::from_ref(self.lock()));
        match self.record() {
            // SAFETY: the record is ours, with `held` written when it was taken.
            Some(record) => out.field("held", unsafe { (*record.as_ptr()).held.assume_init_ref() }),
            None => out.field("held", &"compact"),
        };
        out.finish()
    }
}

/// The compact hold of the lock of `raw` in mode `kind`, made again.
#[cfg(all(
    feature = "lock_stat",
    not(feature = "lockdep"),
    not(feature = "tracing")
))]
#[inline(always)]
pub(crate) fn remade(raw: &ObservedLock, kind: WaiterKind) -> Held {
    Held::remake(raw, kind)
}

/// See the form with `lock_stat` alone: no hold is compact in this build, so this is
/// never called.
#[cfg(not(all(
    feature = "lock_stat",
    not(feature = "lockdep"),
    not(feature = "tracing")
)))]
#[inline(always)]
pub(crate) fn remade(_: &ObservedLock, _: WaiterKind) -> Held {
    unreachable!("a compact hold in a build without compact holds")
}

impl<'a> Kept<'a> {
    /// Keeps `lock` and `held` (in a record taken from the pool, unless the hold is
    /// compact). Never panics.
    #[inline(always)]
    pub(crate) fn new(lock: &'a ObservedLock, held: Held) -> Self {
        if COMPACT && held.compact() {
            return Self {
                // SAFETY: one byte into the lock, which is larger: within its allocation.
                // (The bit is clear in a lock's address, by its alignment: this sets it.)
                ptr: unsafe { NonNull::from(lock).cast::<u8>().byte_add(COMPACT_BIT) },
                lock: PhantomData,
            };
        }
        Self {
            ptr: Self::record_of(lock, held).cast(),
            lock: PhantomData,
        }
    }

    /// A record taken from the pool, with `lock` and `held` written.
    #[inline(always)]
    fn record_of(lock: &ObservedLock, held: Held) -> NonNull<Record> {
        let record = take();
        // SAFETY: the record is free and now ours: nothing else reaches it.
        unsafe {
            let r = record.as_ptr();
            (*r).lock = lock;
            (*r).held = MaybeUninit::new(held);
        }
        record
    }

    /// The record, if the hold is not compact.
    #[inline(always)]
    fn record(&self) -> Option<NonNull<Record>> {
        if COMPACT && self.ptr.addr().get() & COMPACT_BIT != 0 {
            None
        } else {
            Some(self.ptr.cast())
        }
    }

    /// The lock.
    #[inline(always)]
    pub(crate) fn lock(&self) -> &'a ObservedLock {
        match self.record() {
            // SAFETY: the record is ours, with `lock` written from a `&'a`.
            Some(record) => unsafe { &*(*record.as_ptr()).lock },
            // SAFETY: a compact hold's pointer is one byte into a `&'a ObservedLock`
            // (`new`): back to its start, within it.
            None => unsafe {
                self.ptr
                    .byte_sub(COMPACT_BIT)
                    .cast::<ObservedLock>()
                    .as_ref()
            },
        }
    }

    /// The lock, if the hold is compact (then this owns no record: its drop does
    /// nothing).
    #[inline(always)]
    pub(crate) fn compact_lock(&self) -> Option<&'a ObservedLock> {
        match self.record() {
            Some(_) => None,
            None => Some(self.lock()),
        }
    }

    /// The hold (held in mode `kind`), to update: a compact one is given a record now.
    #[inline]
    pub(crate) fn held_mut(&mut self, kind: WaiterKind) -> &mut Held {
        let record = match self.record() {
            Some(record) => record,
            None => {
                let lock = self.lock();
                let record = Self::record_of(lock, remade(lock, kind));
                self.ptr = record.cast();
                record
            }
        };
        // SAFETY: the record is ours (and `&mut self` is the one way to it), with `held`
        // written when it was taken.
        unsafe { (*record.as_ptr()).held.assume_init_mut() }
    }

    /// The lock and the hold (held in mode `kind`) back; the record goes back to the pool.
    #[inline(always)]
    pub(crate) fn into_parts(self, kind: WaiterKind) -> (&'a ObservedLock, Held) {
        let this = std::mem::ManuallyDrop::new(self);
        let lock = this.lock();
        match this.record() {
            Some(record) => {
                // SAFETY: the record is ours, with `held` written when it was taken; read
                // once, as `this` is not dropped, and the record is given back right
                // after.
                let held = unsafe { (*record.as_ptr()).held.assume_init_read() };
                give(record);
                (lock, held)
            }
            None => (lock, remade(lock, kind)),
        }
    }
}

impl Drop for Kept<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if let Some(record) = self.record() {
            // SAFETY: the record is ours, with `held` written when it was taken; dropped
            // once (this is the drop), then the record is given back.
            unsafe { (*record.as_ptr()).held.assume_init_drop() };
            give(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's free records.
    fn len() -> usize {
        POOL.with(|pool| pool.len.get())
    }

    /// A record given back is the next one taken; a thread that gives back more than it
    /// took keeps at most `CAP` and hands the rest over, for others to take.
    #[test]
    fn records_are_reused_and_move_between_threads() {
        let first = take();
        let free = len();
        give(first);
        assert_eq!(len(), free + 1);
        assert_eq!(take(), first, "the record just given back is taken first");
        give(first);
        // More than a thread keeps, taken here, given back by another thread.
        struct Records(Vec<NonNull<Record>>);
        // SAFETY: free records, ours to hand over.
        unsafe impl Send for Records {}
        let many = Records((0..3 * CAP).map(|_| take()).collect());
        let kept = std::thread::spawn(move || {
            let many = many;
            for record in many.0 {
                give(record);
            }
            len()
        })
        .join()
        .unwrap();
        assert!((CAP / 2..=CAP).contains(&kept), "{kept}");
        // Taken again, here, from the shared list or this thread's.
        let again: Vec<_> = (0..3 * CAP).map(|_| take()).collect();
        for record in again {
            give(record);
        }
        assert!(len() <= CAP);
    }
}
