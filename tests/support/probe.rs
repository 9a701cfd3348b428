//! A waker whose calls panic on demand (`tests/panic_safety.rs`, and lockdep's own
//! foreign-code sites in `tests/lockdep_tasks.rs`).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

/// What a [`probe_waker`] does and has done. Each flag makes the matching waker call
/// panic (after doing its work, for `wake` and `drop`).
#[derive(Default)]
pub struct Probe {
    /// Makes every clone panic.
    pub panic_clone: AtomicBool,
    /// Makes the clone that brings `clones` to this number panic (0: none).
    pub panic_clone_at: AtomicUsize,
    /// The clones made.
    pub clones: AtomicUsize,
    pub panic_wake: AtomicBool,
    pub panic_drop: AtomicBool,
    /// As `panic_drop`, for the next drop only (a test where other copies of the waker
    /// are dropped by the unwind, which must not panic again).
    pub panic_drop_once: AtomicBool,
    pub wakes: AtomicUsize,
}

impl Probe {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn wakes(&self) -> usize {
        self.wakes.load(SeqCst)
    }
}

/// A waker over `probe` whose calls panic on demand. `Arc::strong_count(probe)` counts
/// the live clones, so a test can tell that no waker was leaked or dropped twice.
pub fn probe_waker(probe: &Arc<Probe>) -> Waker {
    let data = Arc::into_raw(Arc::clone(probe)).cast::<()>();
    // SAFETY: `data` is an `Arc<Probe>` turned into a pointer, as the vtable expects.
    unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// # Safety
/// `data` comes from `probe_waker` (an `Arc<Probe>` pointer with a count of its own).
unsafe fn probe<'a>(data: *const ()) -> &'a Probe {
    // SAFETY: the caller's contract: the pointer is a live `Arc<Probe>`.
    unsafe { &*data.cast::<Probe>() }
}

unsafe fn clone(data: *const ()) -> RawWaker {
    // SAFETY: vtable contract.
    let probe = unsafe { probe(data) };
    let nth = probe.clones.fetch_add(1, SeqCst) + 1;
    if probe.panic_clone.load(SeqCst) || probe.panic_clone_at.load(SeqCst) == nth {
        panic!("Waker::clone panics");
    }
    // SAFETY: `data` is a live `Arc<Probe>`; the clone owns one more count.
    unsafe { Arc::increment_strong_count(data.cast::<Probe>()) };
    RawWaker::new(data, &VTABLE)
}

unsafe fn wake(data: *const ()) {
    // SAFETY: vtable contract: `wake` consumes this waker's count.
    let probe = unsafe { Arc::from_raw(data.cast::<Probe>()) };
    probe.wakes.fetch_add(1, SeqCst);
    let panic_wake = probe.panic_wake.load(SeqCst);
    let panic_drop = probe.panic_drop.load(SeqCst);
    drop(probe);
    if panic_wake || panic_drop {
        panic!("Waker::wake panics");
    }
}

unsafe fn wake_by_ref(data: *const ()) {
    // SAFETY: vtable contract.
    let probe = unsafe { probe(data) };
    probe.wakes.fetch_add(1, SeqCst);
    if probe.panic_wake.load(SeqCst) {
        panic!("Waker::wake_by_ref panics");
    }
}

unsafe fn drop_waker(data: *const ()) {
    // SAFETY: vtable contract: `drop` consumes this waker's count.
    let probe = unsafe { Arc::from_raw(data.cast::<Probe>()) };
    let panic_drop = probe.panic_drop.load(SeqCst) || probe.panic_drop_once.swap(false, SeqCst);
    drop(probe);
    if panic_drop {
        panic!("Waker::drop panics");
    }
}

pub fn poll_with<F: Future>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

/// Polls and expects the poll to panic; the panic is caught.
pub fn poll_panics<F: Future>(fut: Pin<&mut F>, waker: &Waker) {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _ = poll_with(fut, waker);
    }));
    assert!(result.is_err(), "the poll was expected to panic");
}
