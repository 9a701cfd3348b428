//! No waker is cloned, woken or dropped under the wait lock (the rule of `raw/list.rs`):
//! a waker's drop is foreign code, and one that reaches the same lock (its `snapshot`,
//! the cancel of another acquire of it) would deadlock the thread on the wait lock, and
//! one that panics would unwind through it.
//!
//! The window is the queueing that finds the lock free: the fast path fails, the lock
//! future clones its waker, the holder releases meanwhile, and the queueing, under the
//! wait lock, takes the lock instead of queueing, so that the clone is not used. Here the
//! clone itself releases the holder (foreign code may do anything), which makes that
//! interleaving deterministic on one thread. Every drop of the waker then checks, with
//! `try_lock`, that the wait lock is free: on this one thread, held means held by the
//! caller of the drop.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, TryLockError};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use crate::raw::tests::support::*;
use crate::{RwLock, RwLockUpgradableReadGuard};

/// What the hooked waker does: its first clone drops `held` (a guard: the holder's
/// release); every drop of a waker of it records whether the wait lock of `lock` was held.
struct Hooks {
    lock: Arc<RwLock<u32>>,
    held: Mutex<Option<Box<dyn Send>>>,
    clones: AtomicUsize,
    drops: AtomicUsize,
    drops_under_wait_lock: AtomicUsize,
    /// Every drop also reads the lock's snapshot, as a user's waker might (it takes the
    /// wait lock).
    snapshot_on_drop: AtomicBool,
    /// The first drop panics (after it is counted).
    panic_on_first_drop: AtomicBool,
}

impl Hooks {
    /// Hooks for a waker of an acquire of `lock` whose first clone releases `held`.
    fn new(lock: &Arc<RwLock<u32>>, held: impl Send + 'static) -> Arc<Self> {
        Arc::new(Self {
            lock: Arc::clone(lock),
            held: Mutex::new(Some(Box::new(held))),
            clones: AtomicUsize::new(0),
            drops: AtomicUsize::new(0),
            drops_under_wait_lock: AtomicUsize::new(0),
            snapshot_on_drop: AtomicBool::new(false),
            panic_on_first_drop: AtomicBool::new(false),
        })
    }

    fn waker(self: &Arc<Self>) -> Waker {
        let data = Arc::into_raw(Arc::clone(self)).cast::<()>();
        // SAFETY: the vtable's functions keep the contract of `RawWaker` for this data (an
        // `Arc<Hooks>` reference, counted once per waker).
        unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
    }

    /// Has the first clone released what was held?
    fn released(&self) -> bool {
        self.held.lock().unwrap().is_none()
    }

    fn wait_lock_held(&self) -> bool {
        matches!(
            self.lock.raw.wait_list.try_lock(),
            Err(TryLockError::WouldBlock)
        )
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// # Safety
///
/// `data` is a live waker's `Arc<Hooks>`.
unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: the waker's reference keeps the `Arc` alive; one more for the clone.
    let hooks = unsafe {
        Arc::increment_strong_count(data.cast::<Hooks>());
        &*data.cast::<Hooks>()
    };
    hooks.clones.fetch_add(1, SeqCst);
    let held = hooks.held.lock().unwrap().take();
    drop(held);
    RawWaker::new(data, &VTABLE)
}

/// # Safety
///
/// As for [`clone`]; consumes the waker's reference.
unsafe fn wake(data: *const ()) {
    // SAFETY: forwarded.
    unsafe {
        wake_by_ref(data);
        drop_waker(data);
    }
}

/// # Safety
///
/// As for [`clone`].
unsafe fn wake_by_ref(_data: *const ()) {}

/// # Safety
///
/// As for [`clone`]; consumes the waker's reference.
unsafe fn drop_waker(data: *const ()) {
    // SAFETY: the waker's reference, given back.
    let hooks = unsafe { Arc::from_raw(data.cast::<Hooks>()) };
    hooks.drops.fetch_add(1, SeqCst);
    if hooks.wait_lock_held() {
        hooks.drops_under_wait_lock.fetch_add(1, SeqCst);
    }
    if hooks.snapshot_on_drop.load(SeqCst) {
        let _ = hooks.lock.snapshot();
    }
    if hooks.panic_on_first_drop.swap(false, SeqCst) {
        panic!("Waker::drop panics");
    }
}

/// A reader behind a writer: its waker's clone releases the writer, so that the queueing
/// finds the queue empty and the lock free, and takes the read lock with the bias it came
/// with. The clone it did not need is dropped after the wait lock is released.
#[test]
fn a_reader_that_finds_the_lock_free_on_its_way_to_the_queue_drops_its_waker_outside_the_wait_lock()
{
    let _lockdep = lockdep_off();
    let lock = Arc::new(RwLock::with_policy(0u32, queue_at_once()));
    let hooks = Hooks::new(&lock, Arc::clone(&lock).try_write_owned().unwrap());
    let waker = hooks.waker();
    {
        let mut read = pin!(lock.read());
        let guard = match read.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(guard) => guard,
            Poll::Pending => panic!("the lock was free when the reader queued"),
        };
        assert!(hooks.released(), "the clone released the writer");
        assert_eq!(lock.raw.count_word(), R);
        assert_eq!(lock.raw.queue_len(), 0);
        drop(guard);
    }
    drop(waker);
    assert_eq!(hooks.clones.load(SeqCst), 1);
    assert_eq!(hooks.drops.load(SeqCst), 2, "the clone and the original");
    assert_eq!(
        hooks.drops_under_wait_lock.load(SeqCst),
        0,
        "a waker was dropped under the wait lock"
    );
    assert_idle(&lock);
}

/// An upgrade behind another reader: its waker's clone releases that reader, so that the
/// queueing finds only the upgradable reader's own bias and takes the write lock at once.
/// The clone it did not need is dropped after the wait lock is released.
#[test]
fn an_upgrade_that_finds_the_other_readers_gone_on_its_way_to_the_queue_drops_its_waker_outside_the_wait_lock(
) {
    let _lockdep = lockdep_off();
    let lock = Arc::new(RwLock::with_policy(0u32, queue_at_once()));
    let up = lock.try_upgradable_read().unwrap();
    let hooks = Hooks::new(&lock, Arc::clone(&lock).try_read_owned().unwrap());
    let waker = hooks.waker();
    {
        let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
        let mut guard = match upgrade.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(guard) => guard,
            Poll::Pending => panic!("the other reader had left when the upgrade queued"),
        };
        assert!(hooks.released(), "the clone released the reader");
        assert_eq!(lock.raw.count_word(), W);
        assert_eq!(lock.raw.queue_len(), 0);
        *guard += 1;
    }
    drop(waker);
    assert_eq!(hooks.clones.load(SeqCst), 1);
    assert_eq!(hooks.drops.load(SeqCst), 2, "the clone and the original");
    assert_eq!(
        hooks.drops_under_wait_lock.load(SeqCst),
        0,
        "a waker was dropped under the wait lock"
    );
    assert_idle(&lock);
    assert_eq!(*lock.try_read().unwrap(), 1);
}

/// The symptom a user meets: a waker whose drop reads the lock's snapshot (which takes the
/// wait lock). Dropped under the wait lock, it deadlocks the thread on itself; the poll
/// runs on a thread of its own so that the test fails instead of hanging. The bound is
/// generous: the poll takes microseconds when it completes at all.
#[test]
fn a_waker_whose_drop_reads_the_snapshot_does_not_deadlock_the_queueing_reader() {
    let _lockdep = lockdep_off();
    use std::sync::mpsc;
    use std::time::Duration;

    let lock = Arc::new(RwLock::with_policy(0u32, queue_at_once()));
    let (done_tx, done_rx) = mpsc::channel();
    let thread_lock = Arc::clone(&lock);
    std::thread::spawn(move || {
        // Lockdep's checks are per thread: off on this one too.
        let _lockdep = lockdep_off();
        let lock = thread_lock;
        let hooks = Hooks::new(&lock, Arc::clone(&lock).try_write_owned().unwrap());
        hooks.snapshot_on_drop.store(true, SeqCst);
        let waker = hooks.waker();
        {
            let mut read = pin!(lock.read());
            let polled = read.as_mut().poll(&mut Context::from_waker(&waker));
            assert!(polled.is_ready());
        }
        drop(waker);
        done_tx.send(hooks.drops.load(SeqCst)).unwrap();
    });
    match done_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(drops) => assert_eq!(drops, 2, "the clone and the original"),
        Err(_) => panic!("the queueing reader deadlocked (a waker dropped under the wait lock)"),
    }
    assert_idle(&lock);
}

/// A waker whose drop panics in that window: the unwind starts after the wait lock is
/// released, with the read lock the queueing took already the lock future's (its node
/// `Granted`); the `async` block of `read` drops that future on its way out, which
/// releases the lock. Nothing is leaked, nothing is left linked.
#[test]
fn a_waker_drop_that_panics_after_the_queueing_took_the_lock_releases_it_on_the_way_out() {
    let _lockdep = lockdep_off();
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let lock = Arc::new(RwLock::with_policy(0u32, queue_at_once()));
    let hooks = Hooks::new(&lock, Arc::clone(&lock).try_write_owned().unwrap());
    hooks.panic_on_first_drop.store(true, SeqCst);
    let waker = hooks.waker();
    {
        let mut read = pin!(lock.read());
        let polled = catch_unwind(AssertUnwindSafe(|| {
            let _ = read.as_mut().poll(&mut Context::from_waker(&waker));
        }));
        assert!(
            polled.is_err(),
            "the waker's drop panicked through the poll"
        );
        assert_eq!(
            hooks.drops_under_wait_lock.load(SeqCst),
            0,
            "a waker was dropped under the wait lock"
        );
        assert_idle(&lock);
    }
    // The lock works on.
    drop(lock.try_write().unwrap());
    drop(waker);
    assert_eq!(hooks.drops.load(SeqCst), 2, "the clone and the original");
    assert_idle(&lock);
}

/// As the reader's case, for the upgrade: a waker whose drop panics after the upgrade's
/// queueing took the write lock. The unwind starts after the wait lock is released; the
/// upgrade future, left with its node `Granted`, releases the write lock when dropped.
#[test]
fn a_waker_drop_that_panics_after_the_upgrade_took_the_lock_leaves_it_to_the_future() {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let _lockdep = lockdep_off();
    let lock = Arc::new(RwLock::with_policy(0u32, queue_at_once()));
    let up = lock.try_upgradable_read().unwrap();
    let hooks = Hooks::new(&lock, Arc::clone(&lock).try_read_owned().unwrap());
    hooks.panic_on_first_drop.store(true, SeqCst);
    let waker = hooks.waker();
    {
        let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
        let polled = catch_unwind(AssertUnwindSafe(|| {
            let _ = upgrade.as_mut().poll(&mut Context::from_waker(&waker));
        }));
        assert!(
            polled.is_err(),
            "the waker's drop panicked through the poll"
        );
        assert_eq!(
            hooks.drops_under_wait_lock.load(SeqCst),
            0,
            "a waker was dropped under the wait lock"
        );
        assert!(hooks.released(), "the clone released the reader");
        // The write lock is the future's: nobody else gets in.
        assert_eq!(lock.raw.count_word(), W);
        assert!(lock.try_read().is_err());
    }
    assert_idle(&lock);
    drop(waker);
    assert_eq!(hooks.drops.load(SeqCst), 2, "the clone and the original");
}
