//! loom models of the spins past a non-empty queue: a writer spinning past queued waiters,
//! the head writer spinning for a running owner (and granted while it spins), a grant to a
//! task not polled since (`OWNER_PENDING`) cancelled, and a reader spinning past a queue.
//! Run as the other models (`loom_models.rs`). Spins are bounded by rounds under loom.
//!
//! Invariants checked by every model: no lost wake-up (every `block_on` returns), no lock
//! leak (the count word is idle and the queue empty at the end: `OWNER_PENDING` cleared
//! too), the data ordered by the lock.

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::Policy;
use loom::future::block_on;
use loom::thread;

use super::loom_support::*;

/// Writers spin (bounded by rounds under loom) and then queue at once; the handoff timeout
/// never expires inside a model (whose logical clock does not move), so the handoffs are
/// the lost races' only.
fn spin_then_queue() -> Policy {
    queue_at_once()
        .writer_spin(Duration::from_micros(1))
        .handoff_timeout(Duration::from_secs(3600))
}

#[test]
fn spinning_writer_passes_a_queued_writer() {
    loom::model(|| {
        let l = lock(spin_then_queue());
        let g = l.try_write().unwrap();
        // Queued from `main` (its spin runs out against `g`).
        let mut queued = Box::pin(Arc::clone(&l).write_owned());
        assert!(poll_once(queued.as_mut()).is_pending());
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || block_on(async { l2.write().await.bump() }));
        drop(g);
        block_on(queued).bump();
        t.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
    });
}

#[test]
fn head_writer_spins_against_a_spinner_and_is_served() {
    loom::model(|| {
        // Two writers behind `g`, both spinning; whichever queues is woken at the
        // release, may lose the race to the other, asks for the handoff, spins for the
        // owner and is granted at its release (`OWNER_PENDING` set, cleared as it runs).
        let l = lock(spin_then_queue());
        let g = l.try_write().unwrap();
        let ts: Vec<_> = (0..2)
            .map(|_| {
                let l = Arc::clone(&l);
                thread::spawn(move || block_on(async { l.write().await.bump() }))
            })
            .collect();
        drop(g);
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
    });
}

#[test]
fn pending_grant_cancelled_releases_the_lock() {
    loom::model(|| {
        // A queued writer polled twice and dropped: in the executions where a release
        // granted it the lock in between (with `OWNER_PENDING`), its drop releases the
        // lock and clears the bit; the other writer is served either way.
        let l = lock(spin_then_queue());
        let g = l.try_write().unwrap();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            let mut fut = pin!(l2.write());
            for _ in 0..2 {
                if let Poll::Ready(g) = poll_once(fut.as_mut()) {
                    g.bump();
                    return;
                }
            }
        });
        let l3 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l3.write().await.bump() }));
        drop(g);
        t.join().unwrap();
        w.join().unwrap();
        let n = l.try_read().unwrap().get();
        assert!(n == 1 || n == 2, "data {n}");
        assert_idle(&l);
    });
}

#[test]
fn reader_spins_past_a_queued_writer() {
    loom::model(|| {
        // A reader spinning on a write-locked lock with a writer queued: it may take the
        // lock past the queue (no handoff pending) or queue; both are served.
        let l = lock(queue_at_once().reader_spin(Duration::from_micros(1)));
        let g = l.try_write().unwrap();
        g.bump();
        let mut queued = Box::pin(Arc::clone(&l).write_owned());
        assert!(poll_once(queued.as_mut()).is_pending());
        let l2 = Arc::clone(&l);
        let r = thread::spawn(move || block_on(async { l2.read().await.get() }));
        drop(g);
        block_on(queued).bump();
        let seen = r.join().unwrap();
        assert!(seen == 1 || seen == 2, "reader saw {seen}");
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
    });
}

#[test]
fn readers_pass_a_writer_head_once() {
    loom::model(|| {
        // A writer queued behind a writer, a reader arriving from another thread: at the
        // release the reader may pass the head writer (which then gets the handoff), steal
        // the free lock, or wait behind it; every path serves both.
        let l = lock(queue_at_once().handoff_timeout(Duration::from_secs(3600)));
        let g = l.try_write().unwrap();
        g.bump();
        let mut queued = Box::pin(Arc::clone(&l).write_owned());
        assert!(poll_once(queued.as_mut()).is_pending());
        let l2 = Arc::clone(&l);
        let r = thread::spawn(move || block_on(async { l2.read().await.get() }));
        drop(g);
        block_on(queued).bump();
        let seen = r.join().unwrap();
        assert!(seen == 1 || seen == 2, "reader saw {seen}");
        assert_idle(&l);
    });
}

#[test]
fn reader_joins_readers_past_a_writer_head() {
    loom::model(|| {
        // Readers own the lock with a writer queued: an arriving reader joins them past the
        // writer (giving it the handoff) or waits; the writer is served when both leave.
        let l = lock(queue_at_once().handoff_timeout(Duration::from_secs(3600)));
        let r1 = l.try_read().unwrap();
        let mut queued = Box::pin(Arc::clone(&l).write_owned());
        assert!(poll_once(queued.as_mut()).is_pending());
        let l2 = Arc::clone(&l);
        let r = thread::spawn(move || block_on(async { l2.read().await.get() }));
        drop(r1);
        block_on(queued).bump();
        let seen = r.join().unwrap();
        assert!(seen <= 1, "reader saw {seen}");
        assert_idle(&l);
    });
}
