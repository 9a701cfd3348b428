//! Helpers shared by the loom model files (`loom_models.rs`, `loom_upgrade.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::{Policy, RwLock};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// Data guarded by the lock, tracked by loom: a missing happens-before between two
/// critical sections shows up as a causality violation.
pub(crate) struct Data(UnsafeCell<usize>);
// SAFETY: accesses are ordered by the RwLock around it (which the models check).
unsafe impl Sync for Data {}

impl Data {
    pub(crate) fn new() -> Self {
        Data(UnsafeCell::new(0))
    }
    pub(crate) fn get(&self) -> usize {
        // SAFETY: called inside a critical section of the lock around it.
        self.0.with(|p| unsafe { *p })
    }
    pub(crate) fn bump(&self) {
        // SAFETY: called inside a write critical section of the lock around it.
        self.0.with_mut(|p| unsafe { *p += 1 })
    }
}

pub(crate) type Lock = RwLock<Data>;

pub(crate) fn lock(policy: Policy) -> Arc<Lock> {
    Arc::new(RwLock::with_policy(Data::new(), policy))
}

pub(crate) use super::support::{assert_idle, queue_at_once};

/// A waker that records that it was called.
pub(crate) struct Flag(pub(crate) AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// Polls `fut` once with a flag waker.
pub(crate) fn poll_once<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag);
    fut.poll(&mut Context::from_waker(&waker))
}
