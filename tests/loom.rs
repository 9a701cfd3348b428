//! loom models of the lock's transitions. Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom`.
//!
//! Every model protects data in a loom `UnsafeCell`, so loom checks that the lock orders
//! the accesses (a missing acquire/release shows up as a data race), and ends by checking
//! that the count word is idle and the queue empty. Handoff timeouts in models are 0 or
//! `Duration::MAX` only, so that each execution is deterministic.
#![cfg(loom)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use async_rwsem::{Policy, RwLock};
use loom::cell::UnsafeCell;
use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use loom::thread;

/// Data guarded by the lock, tracked by loom.
struct Data(UnsafeCell<usize>);
// SAFETY: accesses are ordered by the RwLock around it (which the models check).
unsafe impl Sync for Data {}

impl Data {
    fn new() -> Self {
        Data(UnsafeCell::new(0))
    }
    fn get(&self) -> usize {
        self.0.with(|p| unsafe { *p })
    }
    fn bump(&self) {
        self.0.with_mut(|p| unsafe { *p += 1 })
    }
}

type Lock = RwLock<Data>;

fn lock(policy: Policy) -> Arc<Lock> {
    Arc::new(RwLock::with_policy(Data::new(), policy))
}

/// Writers queue at once (no spin, no yield): the smallest state space.
fn queueing() -> Policy {
    Policy::new()
        .writer_spin(Duration::ZERO)
        .writer_yields(0)
        .handoff_timeout(Duration::MAX)
}

fn assert_idle(l: &Lock) {
    assert_eq!(l.__count_word(), 0, "count word not idle");
    assert_eq!(l.__queue_len(), 0, "waiters left queued");
}

/// A waker that records that it was called.
struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

/// Polls `fut` once with a flag waker.
fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    let waker = Waker::from(flag);
    fut.poll(&mut Context::from_waker(&waker))
}

#[test]
fn two_writers() {
    loom::model(|| {
        let l = lock(queueing());
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || block_on(async { l2.write().await.bump() }));
        block_on(async { l.write().await.bump() });
        t.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
    });
}

#[test]
fn two_writers_spinning_and_yielding() {
    loom::model(|| {
        let l = lock(
            Policy::new()
                .writer_yields(1)
                .handoff_timeout(Duration::MAX),
        );
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || block_on(async { l2.write().await.bump() }));
        block_on(async { l.write().await.bump() });
        t.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
    });
}

#[test]
fn reader_and_writer() {
    loom::model(|| {
        let l = lock(queueing());
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || block_on(async { l2.read().await.get() }));
        block_on(async { l.write().await.bump() });
        let seen = t.join().unwrap();
        assert!(seen <= 1);
        assert_idle(&l);
    });
}

#[test]
fn two_readers_and_a_writer() {
    loom::model(|| {
        let l = lock(queueing());
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let l = Arc::clone(&l);
                thread::spawn(move || block_on(async { l.read().await.get() }))
            })
            .collect();
        block_on(async { l.write().await.bump() });
        for t in ts {
            assert!(t.join().unwrap() <= 1);
        }
        assert_idle(&l);
    });
}

#[test]
fn queued_writer_cancelled_while_lock_released() {
    loom::model(|| {
        let l = lock(queueing());
        let g = l.try_write().unwrap();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            let mut fut = pin!(l2.write());
            if let Poll::Ready(g) = poll_once(fut.as_mut()) {
                g.bump();
            }
            // Dropped here: queued (or granted, or done).
        });
        drop(g);
        t.join().unwrap();
        assert_idle(&l);
    });
}

#[test]
fn queued_reader_cancelled_while_lock_released_wakes_next() {
    loom::model(|| {
        let l = lock(queueing());
        let g = l.try_write().unwrap();
        // A reader queued first, then a writer behind it (on this thread).
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            let mut fut = pin!(l2.read());
            let _ = poll_once(fut.as_mut());
        });
        let l3 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l3.write().await.bump() }));
        drop(g);
        t.join().unwrap();
        w.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}

#[test]
fn granted_reader_dropped_before_polled() {
    loom::model(|| {
        let l = lock(queueing());
        let g = l.try_write().unwrap();
        let l2 = Arc::clone(&l);
        // Queued while `g` is held (in most executions), then dropped without a second
        // poll: in the executions where the grant in `drop(g)` lands in between, the
        // dropped future owns a read lock that it must release.
        let t = thread::spawn(move || {
            let mut fut = pin!(l2.read());
            let _ = poll_once(fut.as_mut());
        });
        let l3 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l3.write().await.bump() }));
        drop(g);
        t.join().unwrap();
        w.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}

#[test]
fn handoff_granted_to_head_writer() {
    loom::model(|| {
        let l = lock(queueing().handoff_timeout(Duration::ZERO));
        let g = l.try_read().unwrap();
        let l2 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l2.write().await.bump() }));
        let l3 = Arc::clone(&l);
        let r = thread::spawn(move || block_on(async { l3.read().await.get() }));
        drop(g);
        w.join().unwrap();
        assert!(r.join().unwrap() <= 1);
        assert_idle(&l);
    });
}

#[test]
fn handoff_head_cancelled_passes_on() {
    loom::model(|| {
        let l = lock(queueing().handoff_timeout(Duration::ZERO));
        let g = l.try_read().unwrap();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            let mut fut = pin!(l2.write());
            // Two polls: queue, then (lock held, timeout 0) set HANDOFF.
            if poll_once(fut.as_mut()).is_pending() {
                let _ = poll_once(fut.as_mut());
            }
        });
        let l3 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l3.write().await.bump() }));
        drop(g);
        t.join().unwrap();
        w.join().unwrap();
        assert_idle(&l);
    });
}

#[test]
fn woken_writer_cancelled_passes_the_wake_up_on() {
    loom::model(|| {
        let l = lock(queueing());
        let g = l.try_write().unwrap();
        let l2 = Arc::clone(&l);
        // The head writer: queued, maybe woken by `drop(g)`, then dropped unpolled.
        let t = thread::spawn(move || {
            let mut fut = pin!(l2.write());
            let _ = poll_once(fut.as_mut());
        });
        let l3 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l3.write().await.bump() }));
        drop(g);
        t.join().unwrap();
        w.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}
