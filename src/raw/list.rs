//! The intrusive wait list and its nodes.
//!
//! # Invariants
//!
//! - A [`Waiter`] lives inside a pinned lock future; it is `!Unpin` (`PhantomPinned`),
//!   so its address is stable from the first time it is linked until it is dropped, and
//!   the future's `Drop` unlinks it (under the wait lock) before the memory goes away.
//! - The list's pointers and every node's [`WaiterInner`] are touched only while the
//!   wait lock (the `Mutex<WaitList>` of the lock) is held. A node's owner touches its
//!   `inner` without the wait lock only while the node is [`NodeState::Idle`] (nobody
//!   else has its address).
//! - The node's state ([`NodeState`]) is written only under the wait lock (or by the owner
//!   while the node is `Idle` or `Granted`, when nobody else can see it). A node is linked
//!   exactly when its state is `Waiting`. `RawRwLock::grant` is the one place that grants
//!   a node: it stores `Granted` last, after it has unlinked the node and taken its waker
//!   (and its caller adjusted the count word for it), and never touches the node again.
//! - The wait lock is never held across foreign code (a waker's `clone`, `wake` or
//!   `drop`) nor an `.await`: wakers are cloned before it is taken, moved into a
//!   [`WakeList`] under it, and called after it is released. A waker taken out of a node
//!   (a cancel), or cloned for a queueing that turned out not to queue (the lock was
//!   free), is handed out of the wait lock's scope and dropped after it is released.
//! - The readers' ring: every linked node of a reader kind (`Read`, `UpgradableRead`) is
//!   also linked, through `rprev`/`rnext`, in a second ring of the readers alone, in the
//!   same order as in the list, entered at [`WaitList::first_reader`]; the other nodes
//!   (`Write`, `Upgrade`) are counted in `WaitList::writers`. So a grant of the queued
//!   readers walks the readers it grants, never the writers between them, and "is a
//!   writer queued?" is a load. A node's two sets of links change together, in
//!   [`WaitList::link`] and [`WaitList::remove`].

use std::marker::PhantomPinned;
use std::mem::MaybeUninit;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;
use std::task::Waker;

use std::sync::atomic::Ordering;

use super::wake::PassCheck;
use crate::loom::{AtomicU8, Instant, UnsafeCell};

/// Where a node is in the waiter protocol: who may touch it, and whether it may be
/// dropped as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum NodeState {
    /// Not linked. Only the owning future knows the node: it may touch every field
    /// without the wait lock, and may drop it. Every node starts here, and comes back
    /// here when its owner cancels.
    Idle = 0,
    /// Linked in the wait list. Its links, waker and queue time are touched only under the
    /// wait lock, by the owner (re-polls) and by wakers. The owner must unlink it, under
    /// the wait lock, before the node may be dropped (its future's `Drop` does).
    Waiting = 1,
    /// Not linked, and the count word holds the lock for the owner: a waker took it on the
    /// owner's behalf and unlinked the node (the waker's store of `Granted`, `Release`, is
    /// its last touch: an owner that loads it, `Acquire`, owns the lock and may drop the
    /// node at once); or the owner took it itself under the wait lock (a queued writer or
    /// upgrade, unlinked; a reader that found the lock free on its way to the queue, never
    /// linked), and says so here before the wait lock is released and foreign code runs.
    /// Either way the owner's future completes at its next poll, or releases the lock
    /// when dropped.
    Granted = 2,
}

impl NodeState {
    #[inline]
    fn from_u8(state: u8) -> Self {
        match state {
            0 => Self::Idle,
            1 => Self::Waiting,
            _ => Self::Granted,
        }
    }
}

/// What a waiter waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaiterKind {
    /// A plain read lock.
    Read,
    /// The write lock.
    Write,
    /// The one upgradable read lock: granted like a read lock, but only while no other
    /// upgradable reader holds the lock.
    UpgradableRead,
    /// The write lock, by the upgradable reader trading its read lock: queued at the head,
    /// with the handoff bit set, and granted when the other readers have left.
    Upgrade,
}

impl WaiterKind {
    /// Is it a reader's kind (a plain or an upgradable read), linked in the readers' ring
    /// too (see the module invariants)?
    #[inline]
    pub(crate) fn is_reader(self) -> bool {
        matches!(self, WaiterKind::Read | WaiterKind::UpgradableRead)
    }
}

/// A node of the wait list, embedded in an acquire future.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// Guarded by the wait lock (see the module invariants).
    inner: UnsafeCell<WaiterInner>,
    /// A [`NodeState`].
    state: AtomicU8,
    /// Fixed at construction.
    pub(crate) kind: WaiterKind,
    _pin: PhantomPinned,
}

/// `repr(C)`, with `due` last: every other field starts as zero bytes (`None` of a
/// pointer or a waker, `false`), so a new node is written with a few wide stores, and
/// `None` of `due` (a niche inside an `Instant`) is one store at the end. In the order
/// the compiler chose, `due` sat between the pointers, and a new node was built in a
/// zeroed buffer and copied out with loads that straddled its stores, which stalled on
/// store-to-load forwarding (`docs/performance.md`, "Round eleven").
#[derive(Debug)]
#[repr(C)]
pub(crate) struct WaiterInner {
    prev: Option<NonNull<Waiter>>,
    next: Option<NonNull<Waiter>>,
    /// A reader node's links in the readers' ring (see the module invariants); `None` for
    /// the other kinds, and while unlinked.
    rprev: Option<NonNull<Waiter>>,
    rnext: Option<NonNull<Waiter>>,
    /// The task to wake; taken out by a waker.
    pub(crate) waker: Option<Waker>,
    /// The waker of the reader granted in the same batch as this one, whose wake-up this
    /// node's owner makes when it sees its own grant (or releases the lock it was granted)
    /// rather than the releasing task (`RawRwLock::mark_wake`, *relay*). Written by the
    /// grant under the wait lock before its store of `Granted`; taken by the owner once it
    /// has loaded `Granted`, when the node is its own again. `None` otherwise.
    pub(crate) relay: Option<Waker>,
    /// A waker woke this (writer) node to compete for a free lock. If it then finds the
    /// lock taken, it lost a race, and asks for the handoff at once.
    pub(crate) woken: bool,
    /// An upgrade node (which queues at the head) found a handoff pending when it queued:
    /// the handoff is the waiter's it went ahead of, and stays that waiter's when the
    /// upgrade is served (`upgrade_at_head`, `queued_write_lock`).
    pub(crate) handoff_of_next: bool,
    /// The node was queued by a blocking acquire: its owner is a parked thread
    /// ([`parking`](super::parking)). Set at the enqueue.
    pub(crate) parks: bool,
    /// Where and since when this acquire waits, and whether it was reported as waiting
    /// too long: written by the typed layer before the node is first linked
    /// ([`LockFuture::set_record`](super::LockFuture::set_record)), read and marked by its
    /// diagnostics under the wait lock ([`RawRwLock::head_waiting_past`]). Never read by
    /// the lock's algorithm.
    ///
    /// [`RawRwLock::head_waiting_past`]: super::RawRwLock::head_waiting_past
    #[cfg(feature = "lock_stat")]
    pub(crate) record: WaitRecord,
    /// When a writer node is due the handoff: its queue time plus the policy's handoff
    /// timeout, recorded by its owner before it takes the wait lock, so that no clock is
    /// read under it, and so that "is the head due?" is one reading of the clock and a
    /// comparison. On the lock's [`Clock`](crate::loom::Clock) (logical in the loom
    /// models). `None` where the policy's timeout needs no time (zero: due at once;
    /// `Duration::MAX`: never), and for readers: a reader head is granted at every
    /// wake-up. `None` too for a writer that queued under the crowded runtime's rule (due
    /// at every release while it holds, with no clock read): the first check of it at
    /// the head once the rule has lapsed sets it, from then (`timed_out`).
    pub(crate) due: Option<Instant>,
}

/// What a node keeps for the typed layer's diagnostics (see [`WaiterInner::record`]).
#[cfg(feature = "lock_stat")]
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the warnings read it (`tracing`)
pub(crate) struct WaitRecord {
    /// When the acquire started to wait, in nanoseconds on the typed layer's clock (0:
    /// unknown).
    pub(crate) since: u64,
    /// Where the acquire was called.
    pub(crate) site: Option<&'static std::panic::Location<'static>>,
    /// A diagnostic has reported this waiter already.
    pub(crate) reported: bool,
}

// SAFETY: the raw pointers and the waker inside `inner` are only reached under the wait
// lock or by the owner while nobody else can see the node (module invariants); `state` is
// atomic and `kind` immutable. `Waker` is `Send + Sync`.
unsafe impl Send for Waiter {}
// SAFETY: as for `Send`: shared access to the node goes through the wait lock or atomics.
unsafe impl Sync for Waiter {}

impl Waiter {
    #[inline]
    pub(crate) fn new(kind: WaiterKind) -> Self {
        Self {
            inner: UnsafeCell::new(WaiterInner {
                prev: None,
                next: None,
                rprev: None,
                rnext: None,
                waker: None,
                relay: None,
                due: None,
                woken: false,
                handoff_of_next: false,
                parks: false,
                #[cfg(feature = "lock_stat")]
                record: WaitRecord::default(),
            }),
            state: AtomicU8::new(NodeState::Idle as u8),
            kind,
            _pin: PhantomPinned,
        }
    }

    /// The node's state. The owner loads it with `Acquire` to see a grant.
    #[inline]
    pub(crate) fn state(&self, order: Ordering) -> NodeState {
        NodeState::from_u8(self.state.load(order))
    }

    /// Moves the node to `state`, under the rules of [`NodeState`].
    #[inline]
    pub(crate) fn set_state(&self, state: NodeState, order: Ordering) {
        self.state.store(state as u8, order);
    }

    /// Runs `f` on the node's guarded fields.
    ///
    /// # Safety
    ///
    /// The caller holds the wait lock of the list the node is (or is about to be) linked
    /// in, or the node is `Idle` or `Granted` and the caller is its owner; and `f`
    /// does not reach the same node's fields again.
    #[inline]
    pub(crate) unsafe fn with_inner<R>(&self, f: impl FnOnce(&mut WaiterInner) -> R) -> R {
        // SAFETY: exclusive access by the caller's contract.
        self.inner.with_mut(|inner| f(unsafe { &mut *inner }))
    }
}

/// The wait list: a FIFO of [`Waiter`]s, guarded by the lock's wait lock.
///
/// A ring: the head's `prev` is the tail and the tail's `next` the head, so that the list
/// is one pointer and still links at both ends and unlinks from the middle in constant
/// time. Its reader nodes form a second ring, the same way (see the module invariants),
/// and its writer nodes are counted, so that a grant of readers costs the readers it
/// grants, whatever the writers queued between them (a walk of the whole queue per grant
/// took a fifth of the time of 40 readers and 40 writers: `docs/performance.md`).
#[derive(Debug)]
pub(crate) struct WaitList {
    head: Option<NonNull<Waiter>>,
    /// The first reader node (of the readers' ring, whose `rprev` is the last one).
    readers: Option<NonNull<Waiter>>,
    /// The linked nodes of the kinds `Write` and `Upgrade` (a `u32`: more queued writers
    /// would take more than 4 billion pinned futures).
    writers: u32,
    /// What the last pass of a queued writer by queued readers cost, and whether queued
    /// readers may pass queued writers now ([`PassCheck`]). Under the wait lock, as the
    /// list: it shares the word that `writers` leaves, so the lock stays one cache line.
    pub(crate) pass_check: PassCheck,
}

// SAFETY: the list only holds pointers to nodes that are `Send + Sync`; it is reached only
// through the `Mutex` that guards it.
unsafe impl Send for WaitList {}

impl WaitList {
    pub(crate) const fn new() -> Self {
        Self {
            head: None,
            readers: None,
            writers: 0,
            pass_check: PassCheck::new(),
        }
    }

    #[inline]
    pub(crate) fn head(&self) -> Option<NonNull<Waiter>> {
        self.head
    }

    /// Is the head a parked thread's node ([`WaiterInner::parks`])? `false` with nobody
    /// queued.
    #[inline]
    pub(crate) fn head_parks(&self) -> bool {
        // SAFETY: the head is linked, hence alive, and `&self` means the wait lock is held.
        self.head
            .is_some_and(|head| unsafe { head.as_ref().with_inner(|inner| inner.parks) })
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// Is exactly one node linked?
    #[inline]
    pub(crate) fn is_single(&self) -> bool {
        // SAFETY: the head is linked, hence alive, and `&self` means the wait lock is held.
        self.head
            .is_some_and(|head| unsafe { self.next(head) }.is_none())
    }

    /// The number of linked nodes (tests: it walks the list).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let mut len = 0;
        let mut cursor = self.head;
        while let Some(node) = cursor {
            len += 1;
            // SAFETY: linked nodes are alive and the wait lock is held.
            cursor = unsafe { self.next(node) };
        }
        len
    }

    /// Is a writer or an upgrade linked?
    #[inline]
    pub(crate) fn has_writer(&self) -> bool {
        self.writers != 0
    }

    /// Is exactly one writer or upgrade linked?
    #[inline]
    pub(crate) fn single_writer(&self) -> bool {
        self.writers == 1
    }

    /// The first reader node (`Read` or `UpgradableRead`) in the list's order, if any.
    #[inline]
    pub(crate) fn first_reader(&self) -> Option<NonNull<Waiter>> {
        self.readers
    }

    /// The reader node after `node` in the list's order (the next one of the readers'
    /// ring), or `None` after the last.
    ///
    /// # Safety
    ///
    /// `node` is a reader node linked in `self`, and the caller holds the wait lock
    /// guarding `self`.
    #[inline]
    pub(crate) unsafe fn next_reader(&self, node: NonNull<Waiter>) -> Option<NonNull<Waiter>> {
        // SAFETY: caller's contract.
        let next = unsafe { node.as_ref().with_inner(|inner| inner.rnext) };
        next.filter(|&next| Some(next) != self.readers)
    }

    /// Checks the readers' ring and the writers' count against the list itself: the ring
    /// holds exactly the list's reader nodes, in its order, and `writers` counts the rest
    /// (debug builds and the loom models, at every release of the wait lock: a walk, which
    /// allocates nothing).
    pub(crate) fn check_rings(&self) {
        let mut writers = 0;
        let mut ring = self.readers;
        let mut last_reader = None;
        let mut cursor = self.head;
        while let Some(node) = cursor {
            // SAFETY: linked nodes are alive and `&self` means the wait lock is held.
            if unsafe { node.as_ref() }.kind.is_reader() {
                assert_eq!(
                    ring,
                    Some(node),
                    "the readers' ring is not the list's readers in order"
                );
                // SAFETY: as above, a reader node linked in `self`.
                ring = unsafe { self.next_reader(node) };
                last_reader = Some(node);
            } else {
                writers += 1;
            }
            // SAFETY: as above.
            cursor = unsafe { self.next(node) };
        }
        assert_eq!(
            ring, None,
            "the readers' ring holds more than the list's readers"
        );
        assert_eq!(writers, self.writers, "the writers' count is off");
        if let Some(first) = self.readers {
            // SAFETY: as above.
            let last = unsafe { first.as_ref().with_inner(|inner| inner.rprev) };
            assert_eq!(
                last, last_reader,
                "the first reader's `rprev` is not the last"
            );
        }
    }

    /// The last node (tests).
    #[cfg(test)]
    pub(crate) fn tail(&self) -> Option<NonNull<Waiter>> {
        // SAFETY: the head is linked, hence alive, and `&self` means the wait lock is held;
        // a linked node's `prev` is set.
        self.head
            .map(|head| unsafe { head.as_ref().with_inner(|inner| inner.prev) }.unwrap())
    }

    /// Queues `node` for the task of `waker`: records the waker, then links it at the tail,
    /// or at the head for an upgrade.
    ///
    /// The waker comes in already cloned: cloning runs foreign code, which may panic, and
    /// must run before the caller changes any state (never under the wait lock).
    ///
    /// # Safety
    ///
    /// As for [`link`](Self::link).
    #[inline]
    pub(crate) unsafe fn enqueue(&mut self, node: NonNull<Waiter>, waker: Waker, at_head: bool) {
        // SAFETY: the node is alive, idle and ours under the wait lock (caller's contract).
        unsafe {
            node.as_ref().with_inner(|inner| {
                // An idle node holds no waker: replacing one would drop it here, under
                // the wait lock.
                debug_assert!(inner.waker.is_none(), "an idle node holds a waker");
                inner.waker = Some(waker);
                inner.parks = super::parking::parks();
            });
            self.link(node, at_head);
        }
    }

    /// Links `node` at the tail, or at the head (an upgrade jumps the queue), and marks it
    /// [`NodeState::Waiting`].
    ///
    /// # Safety
    ///
    /// `node` points to a pinned, `Idle` waiter that stays alive until it is unlinked,
    /// and the caller holds the wait lock guarding `self` (it has `&mut self`).
    pub(crate) unsafe fn link(&mut self, node: NonNull<Waiter>, at_head: bool) {
        match self.head {
            None => {
                // SAFETY: the node is alive and ours under the wait lock.
                unsafe {
                    node.as_ref().with_inner(|inner| {
                        inner.prev = Some(node);
                        inner.next = Some(node);
                    });
                }
                self.head = Some(node);
            }
            Some(head) => {
                // SAFETY: linked nodes are alive (they unlink themselves before they die)
                // and we hold the wait lock; the head's `prev` is the tail.
                let tail = unsafe { head.as_ref().with_inner(|inner| inner.prev) }
                    .expect("a linked node has neighbours");
                // SAFETY: `node` is alive and ours; `tail` and `head` are linked, distinct
                // from `node` (which was not linked), and each is reached by its own call.
                unsafe {
                    node.as_ref().with_inner(|inner| {
                        inner.prev = Some(tail);
                        inner.next = Some(head);
                    });
                    tail.as_ref().with_inner(|inner| inner.next = Some(node));
                    head.as_ref().with_inner(|inner| inner.prev = Some(node));
                }
                if at_head {
                    self.head = Some(node);
                }
            }
        }
        // SAFETY: alive, as above.
        if unsafe { node.as_ref() }.kind.is_reader() {
            // SAFETY: as above; a reader node goes into the readers' ring at the same end.
            unsafe { self.link_reader(node, at_head) };
        } else {
            self.writers += 1;
        }
        // SAFETY: alive, as above.
        unsafe { node.as_ref() }.set_state(NodeState::Waiting, Ordering::Relaxed);
    }

    /// Links the reader `node` into the readers' ring: at its front if it was linked at
    /// the head of the list (it is then the first reader), else at its back.
    ///
    /// # Safety
    ///
    /// As for [`link`](Self::link), which has just linked `node` in the list.
    unsafe fn link_reader(&mut self, node: NonNull<Waiter>, at_head: bool) {
        match self.readers {
            None => {
                // SAFETY: the node is alive and ours under the wait lock.
                unsafe {
                    node.as_ref().with_inner(|inner| {
                        inner.rprev = Some(node);
                        inner.rnext = Some(node);
                    });
                }
                self.readers = Some(node);
            }
            Some(first) => {
                // SAFETY: linked readers are alive and we hold the wait lock; the first
                // reader's `rprev` is the last one.
                let last = unsafe { first.as_ref().with_inner(|inner| inner.rprev) }
                    .expect("a linked reader has neighbours");
                // SAFETY: `node` is alive and ours; `last` and `first` are linked readers
                // distinct from `node`, each reached by its own call.
                unsafe {
                    node.as_ref().with_inner(|inner| {
                        inner.rprev = Some(last);
                        inner.rnext = Some(first);
                    });
                    last.as_ref().with_inner(|inner| inner.rnext = Some(node));
                    first.as_ref().with_inner(|inner| inner.rprev = Some(node));
                }
                if at_head {
                    self.readers = Some(node);
                }
            }
        }
    }

    /// Unlinks `node`. Its state is left for the caller to set.
    ///
    /// # Safety
    ///
    /// `node` is linked in `self` and the caller holds the wait lock guarding `self`.
    pub(crate) unsafe fn remove(&mut self, node: NonNull<Waiter>) {
        // SAFETY: linked nodes are alive; we hold the wait lock.
        let (prev, next) = unsafe {
            node.as_ref().with_inner(|inner| {
                let links = (inner.prev.take(), inner.next.take());
                (
                    links.0.expect("a linked node has neighbours"),
                    links.1.expect("a linked node has neighbours"),
                )
            })
        };
        if next == node {
            debug_assert_eq!(self.head, Some(node));
            self.head = None;
        } else {
            // SAFETY: linked neighbours are alive and distinct from `node` (it is not
            // alone); each is reached by its own call (`prev` and `next` may be the same
            // node).
            unsafe {
                prev.as_ref().with_inner(|inner| inner.next = Some(next));
                next.as_ref().with_inner(|inner| inner.prev = Some(prev));
            }
            if self.head == Some(node) {
                self.head = Some(next);
            }
        }
        // SAFETY: alive, as above.
        if unsafe { node.as_ref() }.kind.is_reader() {
            // SAFETY: a reader node linked in the readers' ring; wait lock held.
            unsafe { self.remove_reader(node) };
        } else {
            self.writers -= 1;
        }
    }

    /// Unlinks the reader `node` from the readers' ring.
    ///
    /// # Safety
    ///
    /// As for [`remove`](Self::remove): `node` is a reader linked in the readers' ring.
    unsafe fn remove_reader(&mut self, node: NonNull<Waiter>) {
        // SAFETY: linked readers are alive; we hold the wait lock.
        let (prev, next) = unsafe {
            node.as_ref().with_inner(|inner| {
                let links = (inner.rprev.take(), inner.rnext.take());
                (
                    links.0.expect("a linked reader has neighbours"),
                    links.1.expect("a linked reader has neighbours"),
                )
            })
        };
        if next == node {
            debug_assert_eq!(self.readers, Some(node));
            self.readers = None;
            return;
        }
        // SAFETY: linked readers, alive, distinct from `node`; each reached by its own
        // call (`prev` and `next` may be the same node).
        unsafe {
            prev.as_ref().with_inner(|inner| inner.rnext = Some(next));
            next.as_ref().with_inner(|inner| inner.rprev = Some(prev));
        }
        if self.readers == Some(node) {
            self.readers = Some(next);
        }
    }

    /// The node after `node`, or `None` at the tail.
    ///
    /// # Safety
    ///
    /// `node` is linked in `self` and the caller holds the wait lock guarding `self`.
    #[inline]
    pub(crate) unsafe fn next(&self, node: NonNull<Waiter>) -> Option<NonNull<Waiter>> {
        // SAFETY: caller's contract.
        let next = unsafe { node.as_ref().with_inner(|inner| inner.next) };
        next.filter(|&next| Some(next) != self.head)
    }
}

/// Capacity of a [`WakeList`]: a full reader batch plus one writer.
#[cfg(not(all(test, async_rwsem_loom)))]
const WAKE_LIST_CAP: usize = super::policy::MAX_READER_WAKE_BATCH + 1;
#[cfg(all(test, async_rwsem_loom))]
const WAKE_LIST_CAP: usize = 16;

/// Wakers collected under the wait lock, called after it is released. Lives on the stack:
/// no allocation.
///
/// Every waker pushed is woken, even if another one panics: the waiters behind them were
/// already granted the lock (or are the next to take it), and a lost wake-up would leave
/// them asleep beside it. Dropping the list wakes whatever it still holds, so that a
/// panic between collecting the wakers and calling them loses no wake-up either. Declare
/// the list before the wait-lock guard, so that an unwind releases the wait lock first.
pub(crate) struct WakeList {
    wakers: [MaybeUninit<Waker>; WAKE_LIST_CAP],
    len: usize,
}

impl WakeList {
    /// The most wakers a list holds; callers bound their batches by it.
    pub(crate) const CAPACITY: usize = WAKE_LIST_CAP;

    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            wakers: [const { MaybeUninit::uninit() }; WAKE_LIST_CAP],
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, waker: Waker) {
        assert!(self.len < WAKE_LIST_CAP, "wake list overflow");
        self.wakers[self.len].write(waker);
        self.len += 1;
    }

    /// Wakes every collected task, in place (the list is never moved: it is 4 KB, and
    /// a move is a `memcpy` on every wake path). Call only after the wait lock is
    /// released.
    ///
    /// If a waker panics, the others are still woken, and the first panic is then
    /// resumed.
    #[inline]
    pub(crate) fn wake_all(&mut self) {
        if self.len != 0 {
            self.wake_collected();
        }
    }

    #[inline(never)]
    fn wake_collected(&mut self) {
        if self.len == 1 && !std::thread::panicking() {
            // One task (a writer woken or granted, one reader): no other wake-up for a
            // panic of its waker to hold back, so no catch (but during an unwind, where a
            // second panic would abort: below).
            self.len = 0;
            // SAFETY: slot 0 is initialised, and `len` is 0 now: it is read exactly once.
            unsafe { self.wakers[0].assume_init_read() }.wake();
            return;
        }
        let mut panic = None;
        while self.len > 0 {
            self.len -= 1;
            // SAFETY: slots below `len` are initialised, and lowering `len` first means the
            // slot is read exactly once.
            let waker = unsafe { self.wakers[self.len].assume_init_read() };
            // Foreign code: a panic must not keep the other tasks asleep.
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| waker.wake())) {
                panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = panic {
            // Already unwinding (the list is dropped by an unwind): a second panic would
            // abort, so this one is dropped and the first goes on.
            if !std::thread::panicking() {
                panic::resume_unwind(payload);
            }
        }
    }
}

/// Wakes one task outside a [`WakeList`] (a wake-up relayed to a granted reader's owner:
/// `RawRwLock::mark_wake`). During an unwind a panic of the waker is caught and dropped,
/// as in [`WakeList::wake_all`]: a second panic would abort.
pub(crate) fn wake_one(waker: Waker) {
    if std::thread::panicking() {
        let _ = panic::catch_unwind(AssertUnwindSafe(|| waker.wake()));
    } else {
        waker.wake();
    }
}

impl Drop for WakeList {
    #[inline]
    fn drop(&mut self) {
        self.wake_all();
    }
}

#[cfg(all(test, not(async_rwsem_loom)))]
mod tests;
