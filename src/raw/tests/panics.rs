//! Foreign code that panics at the raw lock's own call sites, in the instants a public
//! test cannot reach one poll at a time: between the two halves of a release (its
//! `fetch_sub` on the count word, then its `wake`, which takes the wait lock), where a
//! task on another thread may arrive. The tests play that release by hand: the first half
//! with the count word, the second with [`RawRwLock::wake`](crate::raw::RawRwLock::wake).
//!
//! Each arrival grants or wakes a queued waiter whose `Waker::wake` panics, after the
//! arrival took the lock itself; the unwind must take that lock with it (the acquire
//! failed), or leave it to a future that may still be polled or dropped, never leak it.
//! `tests/panic_safety.rs` (through the public API) lists every call site of foreign code.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::sync::atomic::Ordering::{Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::raw::tests::support::*;
use crate::raw::LockFuture;
use crate::rwlock::token::{Mode, Read, Upgradable, Write};
use crate::{Policy, RwLock};

/// A waker that counts its wakes and panics in them (after counting) while armed (also
/// `crowded.rs`'s).
#[derive(Default)]
pub(super) struct Probe {
    wakes: AtomicUsize,
    panic_wake: AtomicBool,
    panic_clone: AtomicBool,
}

impl Wake for Probe {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, SeqCst);
        if self.panic_wake.load(SeqCst) {
            panic!("Waker::wake panics");
        }
    }
}

impl Probe {
    pub(super) fn new(panic_wake: bool) -> Arc<Self> {
        let probe = Arc::new(Self::default());
        probe.panic_wake.store(panic_wake, SeqCst);
        probe
    }

    pub(super) fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(Arc::clone(self))
    }

    pub(super) fn wakes(&self) -> usize {
        self.wakes.load(SeqCst)
    }
}

/// A waker whose `clone` panics while `probe.panic_clone` is set (`std::task::Wake`
/// cannot make one: its clone is the `Arc`'s).
fn cloning_waker(probe: &Arc<Probe>) -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);
    unsafe fn clone(data: *const ()) -> RawWaker {
        // SAFETY: `data` is a live `Arc<Probe>` (vtable contract).
        let probe = unsafe { &*data.cast::<Probe>() };
        if probe.panic_clone.load(SeqCst) {
            panic!("Waker::clone panics");
        }
        // SAFETY: as above; the clone owns one more count.
        unsafe { Arc::increment_strong_count(data.cast::<Probe>()) };
        RawWaker::new(data, &VTABLE)
    }
    unsafe fn wake(data: *const ()) {
        // SAFETY: `wake` consumes this waker's count (vtable contract).
        let probe = unsafe { Arc::from_raw(data.cast::<Probe>()) };
        probe.wake_by_ref();
    }
    unsafe fn wake_by_ref(data: *const ()) {
        // SAFETY: `data` is a live `Arc<Probe>`, and stays one (no count taken).
        let probe = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(data.cast::<Probe>()) });
        Wake::wake_by_ref(&*probe);
    }
    unsafe fn drop_waker(data: *const ()) {
        // SAFETY: `drop` consumes this waker's count (vtable contract).
        drop(unsafe { Arc::from_raw(data.cast::<Probe>()) });
    }
    let data = Arc::into_raw(Arc::clone(probe)).cast::<()>();
    // SAFETY: `data` is an `Arc<Probe>` pointer with a count of its own, as the vtable
    // expects.
    unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
}

pub(super) fn poll_with<F: Future>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

#[track_caller]
fn poll_panics<F: Future>(fut: Pin<&mut F>, waker: &Waker) {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _ = poll_with(fut, waker);
    }));
    assert!(result.is_err(), "the poll was expected to panic");
}

fn lock(policy: Policy) -> RwLock<u32> {
    RwLock::with_policy(0, policy)
}

/// The raw lock future of an acquire in mode `M` whose fast path fails (the public
/// futures are `async fn`s, which refuse a poll after a panic; the raw future must stay
/// consistent for the ones that are not, such as `Upgrade`, and for the typed layer).
fn raw_acquire<M: Mode>(l: &RwLock<u32>) -> LockFuture<'_> {
    assert!(!M::fast(&l.raw), "the fast path was to fail");
    // SAFETY: the fast path failed just now, on this lock.
    unsafe { M::slow(&l.raw) }
}

/// The first half of the release of a write lock the test holds (`guard`, forgotten):
/// `unlock_write`'s `fetch_sub`, without its `wake`.
fn write_release_first_half<G>(l: &RwLock<u32>, guard: G) {
    std::mem::forget(guard);
    l.raw.count.fetch_sub(W, Release);
}

#[test]
fn a_panicking_wake_in_a_readers_steal_gives_the_stolen_lock_back() {
    let _lockdep = lockdep_off();
    // A reader queues behind a writer; the writer's release has done its `fetch_sub`; a
    // reader arriving then steals the free lock (its future still in `Init`) and grants
    // the queued reader, whose wake panics.
    let l = lock(queue_at_once());
    let queued = Probe::new(true);
    let w = l.try_write().unwrap();
    let mut r1 = pin!(l.read());
    assert!(poll_with(r1.as_mut(), &queued.waker()).is_pending());
    write_release_first_half(&l, w);
    assert_eq!(l.raw.count_word(), WAITERS);
    {
        let stealer = pin!(l.read());
        poll_panics(stealer, &Probe::new(false).waker());
    }
    assert_eq!(queued.wakes(), 1, "the queued reader was granted and woken");
    // The stealer's read lock went with the unwind: only the granted reader holds it.
    assert_eq!(l.raw.count_word(), R, "the stolen read lock leaked");
    l.raw.wake(); // the release's second half: nobody is left to wake
    queued.panic_wake.store(false, SeqCst);
    let Poll::Ready(g) = poll_with(r1, &queued.waker()) else {
        panic!("the granted reader is not ready");
    };
    drop(g);
    assert_idle(&l);
}

#[test]
fn a_panicking_wake_in_a_spinning_readers_steal_gives_the_stolen_lock_back() {
    let _lockdep = lockdep_off();
    // As above, but the arriving reader finds the lock still write-locked and spins; the
    // release's first half comes from another thread while it spins. (If that thread is
    // first, the reader steals in its slow path instead: the same site, as above.)
    let l = lock(
        queue_at_once()
            .reader_spin(Duration::from_secs(3600))
            .adaptive_spin(false),
    );
    let queued = Probe::new(true);
    let w = l.try_write().unwrap();
    let mut r1 = pin!(l.read());
    assert!(poll_with(r1.as_mut(), &queued.waker()).is_pending());
    std::thread::scope(|s| {
        let l = &l;
        s.spawn(move || {
            if !cfg!(miri) {
                std::thread::sleep(Duration::from_millis(20));
            }
            write_release_first_half(l, w);
        });
        let stealer = pin!(l.read());
        poll_panics(stealer, &Probe::new(false).waker());
    });
    assert_eq!(queued.wakes(), 1, "the queued reader was granted and woken");
    assert_eq!(l.raw.count_word(), R, "the stolen read lock leaked");
    l.raw.wake();
    queued.panic_wake.store(false, SeqCst);
    let Poll::Ready(g) = poll_with(r1, &queued.waker()) else {
        panic!("the granted reader is not ready");
    };
    drop(g);
    assert_idle(&l);
}

#[test]
fn a_panicking_wake_in_a_queueing_writers_grant_releases_its_write_lock() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let mut w1 = pin!(l.write());
    let first = Probe::new(true);
    let w0 = l.try_write().unwrap();
    assert!(poll_with(w1.as_mut(), &first.waker()).is_pending());
    write_release_first_half(&l, w0);
    {
        let w2 = pin!(l.write());
        poll_panics(w2, &Probe::new(false).waker());
        assert_eq!(first.wakes(), 1, "the head writer was woken");
        // The unwind dropped the lock future (the `async fn`'s state): it gave the write
        // lock it took back.
    }
    assert_eq!(
        l.raw.count_word(),
        WAITERS,
        "the queueing writer's lock leaked"
    );
    l.raw.wake();
    first.panic_wake.store(false, SeqCst);
    let Poll::Ready(g) = poll_with(w1, &first.waker()) else {
        panic!("the woken head writer cannot take the free lock");
    };
    drop(g);
    assert_idle(&l);
}

#[test]
fn a_queueing_writer_repolled_after_a_panicking_wake_has_the_lock_it_took() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let mut w1 = pin!(l.write());
    let first = Probe::new(true);
    let w0 = l.try_write().unwrap();
    assert!(poll_with(w1.as_mut(), &first.waker()).is_pending());
    write_release_first_half(&l, w0);
    let mut w2 = pin!(raw_acquire::<Write>(&l));
    poll_panics(w2.as_mut(), &Probe::new(false).waker());
    assert_eq!(first.wakes(), 1, "the head writer was woken");
    l.raw.wake();
    // Polled again, the future completes with the write lock it took.
    assert!(
        poll_with(w2, &Probe::new(false).waker()).is_ready(),
        "the writer took the lock, yet its future is not ready"
    );
    assert_eq!(l.raw.count_word(), W | WAITERS);
    assert!(l.try_read().is_err());
    first.panic_wake.store(false, SeqCst);
    // SAFETY: the completed future handed us the write lock.
    unsafe { l.raw.unlock_write() };
    // The release wakes the head writer (whose waker went to the first wake: nothing to
    // call); the lock is free for it.
    assert_eq!(l.raw.count_word(), WAITERS);
    let Poll::Ready(g) = poll_with(w1, &first.waker()) else {
        panic!("the head writer cannot take the free lock");
    };
    drop(g);
    assert_idle(&l);
}

#[test]
fn a_reader_repolled_after_a_panicking_clone_starts_over() {
    // The reader's bias goes back with the unwind of the panicking clone; polled again,
    // the future must not think it still holds one (nor, as an upgrade would, that it
    // owns a lock to trade).
    let l = lock(queue_at_once());
    let probe = Probe::new(false);
    let w = l.try_write().unwrap();
    let mut r = pin!(raw_acquire::<Read>(&l));
    probe.panic_clone.store(true, SeqCst);
    poll_panics(r.as_mut(), &cloning_waker(&probe));
    assert_eq!(l.raw.count_word(), W, "the bias went back with the unwind");
    probe.panic_clone.store(false, SeqCst);
    assert!(poll_with(r.as_mut(), &cloning_waker(&probe)).is_pending());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(w);
    assert_eq!(probe.wakes(), 1);
    assert_eq!(l.raw.count_word(), R);
    assert!(poll_with(r, &cloning_waker(&probe)).is_ready());
    // SAFETY: the completed future handed us the read lock.
    unsafe { l.raw.unlock_read() };
    assert_idle(&l);
    assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
}

#[test]
fn an_upgradable_reader_repolled_after_a_panicking_clone_starts_over() {
    let l = lock(queue_at_once());
    let probe = Probe::new(false);
    let w = l.try_write().unwrap();
    let mut u = pin!(raw_acquire::<Upgradable>(&l));
    probe.panic_clone.store(true, SeqCst);
    poll_panics(u.as_mut(), &cloning_waker(&probe));
    assert_eq!(l.raw.count_word(), W);
    probe.panic_clone.store(false, SeqCst);
    assert!(poll_with(u.as_mut(), &cloning_waker(&probe)).is_pending());
    drop(w);
    assert_eq!(l.raw.count_word(), R | UPG);
    assert!(poll_with(u, &cloning_waker(&probe)).is_ready());
    // SAFETY: the completed future handed us the upgradable read lock.
    unsafe { l.raw.unlock_upgradable() };
    assert_idle(&l);
}

#[test]
fn a_panicking_wake_in_a_queueing_readers_grant_leaves_the_lock_to_its_future() {
    let _lockdep = lockdep_off();
    // Strict order: a reader that arrives in the window of a release queues (it may not
    // pass the queue), and its queueing grants the head readers and itself; its own wake
    // panics. Its node is `Granted`: the unwind drops its future, which releases the lock.
    // (Three readers: a batch of two would relay the second's wake-up to the first.)
    let l = lock(queue_at_once().strict_order(true));
    let first = Probe::new(false);
    let second = Probe::new(false);
    let w = l.try_write().unwrap();
    let mut r1 = pin!(l.read());
    assert!(poll_with(r1.as_mut(), &first.waker()).is_pending());
    let mut r1b = pin!(l.read());
    assert!(poll_with(r1b.as_mut(), &second.waker()).is_pending());
    write_release_first_half(&l, w);
    let own = Probe::new(true);
    {
        let r2 = pin!(l.read());
        poll_panics(r2, &own.waker());
    }
    assert_eq!(first.wakes(), 1, "the head reader was granted and woken");
    assert_eq!(second.wakes(), 1, "the second reader was granted and woken");
    assert_eq!(own.wakes(), 1, "the queueing reader granted itself");
    assert_eq!(
        l.raw.count_word(),
        2 * R,
        "only the head readers hold the lock"
    );
    l.raw.wake();
    for (r, probe) in [(r1, &first), (r1b, &second)] {
        let Poll::Ready(g) = poll_with(r, &probe.waker()) else {
            panic!("a granted reader is not ready");
        };
        drop(g);
    }
    assert_idle(&l);
}

/// The one reader queued, with a writer queued behind it, is granted at the write lock's
/// release in one compare-and-swap (`wake.rs`, the lone reader's grant); its wake panics
/// out of the release, once the wait lock is released. The count holds its lock and its
/// node is `Granted`: its next poll completes, and its release serves the writer.
#[test]
fn a_panicking_wake_of_the_one_reader_granted_leaves_it_the_lock() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let reader = Probe::new(true);
    let writer = Probe::new(false);
    let w = l.try_write().unwrap();
    let mut r = pin!(l.read());
    assert!(poll_with(r.as_mut(), &reader.waker()).is_pending());
    let mut w2 = pin!(l.write());
    assert!(poll_with(w2.as_mut(), &writer.waker()).is_pending());
    let unwound = catch_unwind(AssertUnwindSafe(|| drop(w))).is_err();
    assert!(unwound, "the release ran the panicking wake");
    assert_eq!(reader.wakes(), 1);
    assert_eq!(writer.wakes(), 0);
    assert_eq!(l.raw.count_word(), R | WAITERS, "the reader holds the lock");
    assert_eq!(
        l.raw.queued_bits(),
        (true, false),
        "the writer is still queued"
    );
    let Poll::Ready(g) = poll_with(r.as_mut(), &reader.waker()) else {
        panic!("the granted reader is not ready");
    };
    drop(g);
    assert_eq!(writer.wakes(), 1, "the reader's release served the writer");
    let Poll::Ready(g) = poll_with(w2.as_mut(), &writer.waker()) else {
        panic!("the woken writer is not ready");
    };
    drop(g);
    assert_idle(&l);
}

/// Two readers queued behind a write lock, granted together at its release under the
/// default policy's rule (they pass the head writer queued after them): the first reader's
/// future holds the second's wake-up (a relay). Returns the head writer's future, queued
/// behind them and due the handoff; the first reader was woken, the second not yet.
fn two_readers_granted_with_a_relay<'l, F: Future>(
    l: &'l RwLock<u32>,
    r1: Pin<&mut F>,
    first: &Arc<Probe>,
    r2: Pin<&mut F>,
    second: &Arc<Probe>,
) -> Pin<Box<impl Future + 'l>> {
    let w = l.try_write().unwrap();
    let mut writer = Box::pin(l.write());
    assert!(poll_with(writer.as_mut(), &Probe::new(false).waker()).is_pending());
    assert!(poll_with(r1, &first.waker()).is_pending());
    assert!(poll_with(r2, &second.waker()).is_pending());
    drop(w);
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS | HANDOFF);
    assert_eq!(first.wakes(), 1, "the first reader was woken");
    assert_eq!(second.wakes(), 0, "the second one's wake-up is relayed");
    writer
}

/// After the first reader of [`two_readers_granted_with_a_relay`] is gone (its lock
/// released, the relayed wake-up made by a waker that panicked): the second reader holds
/// its lock alone and completes, then the head writer, and the lock ends idle.
#[track_caller]
fn second_reader_then_writer_served<F: Future, W: Future>(
    l: &RwLock<u32>,
    r2: Pin<&mut F>,
    second: &Arc<Probe>,
    mut writer: Pin<Box<W>>,
) {
    assert_eq!(second.wakes(), 1, "the relayed wake-up was made");
    assert_eq!(
        l.raw.count_word(),
        R | WAITERS | HANDOFF,
        "the first lock leaked"
    );
    second.panic_wake.store(false, SeqCst);
    let Poll::Ready(g) = poll_with(r2, &second.waker()) else {
        panic!("the second granted reader is not ready");
    };
    drop(g);
    let Poll::Ready(g) = poll_with(writer.as_mut(), &Probe::new(false).waker()) else {
        panic!("the head writer is not ready after the readers left");
    };
    drop(g);
    drop(writer);
    assert_idle(l);
}

fn relay_policy() -> Policy {
    queue_at_once().handoff_timeout(Duration::from_secs(3600))
}

#[test]
fn a_panicking_relayed_wake_leaves_the_first_readers_lock_to_its_future() {
    let _lockdep = lockdep_off();
    // The first reader's poll sees its grant and wakes the second, whose waker panics: the
    // poll unwinds with the first reader's lock still owned by its lock future, which the
    // unwind drops (the `async fn`'s state), releasing it; the second reader holds its own.
    let l = lock(relay_policy());
    let (first, second) = (Probe::new(false), Probe::new(true));
    let mut r1 = pin!(l.read());
    let mut r2 = pin!(l.read());
    let writer = two_readers_granted_with_a_relay(&l, r1.as_mut(), &first, r2.as_mut(), &second);
    poll_panics(r1.as_mut(), &first.waker());
    second_reader_then_writer_served(&l, r2, &second, writer);
}

#[test]
fn a_granted_reader_dropped_in_an_unwind_relays_a_panicking_wake_without_aborting() {
    let _lockdep = lockdep_off();
    // The first reader's future is dropped by an unwind before it is polled: its drop
    // releases its lock and makes the relayed wake-up, whose panic (a second one, during
    // the unwind) is caught rather than aborting the process.
    let l = lock(relay_policy());
    let (first, second) = (Probe::new(false), Probe::new(true));
    let mut r2 = pin!(l.read());
    let writer = {
        let mut r1 = Box::pin(l.read());
        let writer =
            two_readers_granted_with_a_relay(&l, r1.as_mut(), &first, r2.as_mut(), &second);
        let result = catch_unwind(AssertUnwindSafe(move || {
            let _r1 = r1;
            panic!("the first reader's task panics");
        }));
        assert!(result.is_err());
        writer
    };
    second_reader_then_writer_served(&l, r2, &second, writer);
}
