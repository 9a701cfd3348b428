//! Helpers shared by the loom model files (`tests/loom.rs`, `tests/loom_upgrade.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use async_rwsem::{Policy, RwLock};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// Data guarded by the lock, tracked by loom: a missing happens-before between two
/// critical sections shows up as a causality violation.
pub struct Data(UnsafeCell<usize>);
// SAFETY: accesses are ordered by the RwLock around it (which the models check).
unsafe impl Sync for Data {}

impl Data {
    pub fn new() -> Self {
        Data(UnsafeCell::new(0))
    }
    pub fn get(&self) -> usize {
        // SAFETY: called inside a critical section of the lock around it.
        self.0.with(|p| unsafe { *p })
    }
    pub fn bump(&self) {
        // SAFETY: called inside a write critical section of the lock around it.
        self.0.with_mut(|p| unsafe { *p += 1 })
    }
}

pub type Lock = RwLock<Data>;

pub fn lock(policy: Policy) -> Arc<Lock> {
    Arc::new(RwLock::with_policy(Data::new(), policy))
}

/// Writers queue at once (no spin, no yield), no handoff: the smallest state space.
pub fn queueing() -> Policy {
    Policy::new()
        .writer_spin(Duration::ZERO)
        .writer_yields(0)
        .handoff_timeout(Duration::MAX)
}

pub fn assert_idle(l: &Lock) {
    assert_eq!(l.__count_word(), 0, "count word not idle");
    assert_eq!(l.__queue_len(), 0, "waiters left queued");
}

/// A waker that records that it was called.
pub struct Flag(pub AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// Polls `fut` once with a flag waker.
pub fn poll_once<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag);
    fut.poll(&mut Context::from_waker(&waker))
}
