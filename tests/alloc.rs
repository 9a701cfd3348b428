//! No allocation on any acquire path: a counting global allocator around uncontended
//! lock/unlock, queueing, batch grants, handoff and cancellation. (Not with the feature
//! `lockdep`, a debug tool whose held sets and class graph allocate.)
#![cfg(not(feature = "lockdep"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use async_rwsem::{Policy, RwLock};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

mod support;
use support::assert_idle;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while running `f`.
fn allocations<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (r, ALLOCS.with(Cell::get) - before)
}

#[test]
fn uncontended_paths_do_not_allocate() {
    let lock = RwLock::new(0u64);
    // With the features `stats` and `lock_stat`, a thread's first use of a lock makes its
    // block of counters (and the thread's owner record): once per thread and lock, before
    // what is counted here, the paths every later acquire takes.
    #[cfg(feature = "stats")]
    drop(lock.try_write().unwrap());
    // Mock tasks box their futures when spawned: spawn first, count the polls and drops.
    let mut r = spawn(lock.read());
    let ((), n) = allocations(|| {
        let g = assert_ready!(r.poll());
        drop(g);
    });
    assert_eq!(n, 0);
    let mut w = spawn(lock.write());
    let ((), n) = allocations(|| {
        *assert_ready!(w.poll()) += 1;
        drop(lock.try_read().unwrap());
        drop(lock.try_write().unwrap());
    });
    assert_eq!(n, 0);
}

#[test]
fn waiting_granting_and_cancelling_do_not_allocate() {
    let lock = RwLock::with_policy(
        0u64,
        Policy::new()
            .writer_spin(Duration::from_micros(1))
            .writer_yields(1)
            .handoff_timeout(Duration::ZERO),
    );
    let g = lock.try_write().unwrap();
    let mut readers: Vec<_> = (0..8).map(|_| spawn(lock.read())).collect();
    let mut w2 = spawn(lock.write());
    let mut w3 = spawn(lock.write());
    let mut cancelled = spawn(lock.read());
    let ((), n) = allocations(|| {
        for r in &mut readers {
            assert_pending!(r.poll());
        }
        assert_pending!(w2.poll()); // spin, then yield
        assert_pending!(w2.poll()); // queue
        assert_pending!(w3.poll());
        assert_pending!(w3.poll());
        assert_pending!(cancelled.poll());
        drop(g); // batch grant of 9 readers
        for r in &mut readers {
            drop(assert_ready!(r.poll()));
        }
    });
    assert_eq!(n, 0, "queueing and granting allocated");
    let ((), n) = allocations(|| {
        // The reader granted with the batch is dropped unpolled: releases its lock.
        drop(cancelled);
        // Handoff timeout 0: the head writer sets HANDOFF and is granted at once.
        let g2 = assert_ready!(w2.poll());
        drop(g2);
        drop(w3); // woken (or granted) writer cancelled: passes the lock on
    });
    assert_eq!(n, 0, "handoff and cancellation allocated");
    assert_idle(&lock);
}
