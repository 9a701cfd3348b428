//! The bound in count on passing the queue (`Policy::pass_bound`): running tasks may take
//! the lock ahead of queued waiters (a reader's steal, a writer's spin, a queued writer
//! ahead of the head) at most `pass_bound` times between two turns of the queue; the pass
//! that reaches the bound sets `HANDOFF`, so that nobody else gets in and the passer's
//! release grants the head.
//!
//! One poll at a time (`tokio-test`), with the count word checked after each step (see
//! `transitions.rs`). The handoff timeout is an hour, so that only the count decides.

use std::time::Duration;

use crate::{Policy, RwLock};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

use crate::raw::tests::support::*;

/// Queue at once (no spin, no yield), a timeout that never runs out here, and `bound`.
fn lock(bound: u32) -> RwLock<u32> {
    RwLock::with_policy(
        0,
        queue_at_once()
            .handoff_timeout(Duration::from_secs(3600))
            .pass_bound(bound),
    )
}

#[test]
fn the_default_bound_is_one_pass() {
    assert_eq!(Policy::new().pass_bound, 1);
    assert_eq!(Policy::fifo().pass_bound, 0);
}

/// A writer queued behind a writer is woken by its release (not granted); readers arriving
/// before it runs steal the free lock, `bound` of them; the last steal sets the handoff,
/// the next reader queues, and the release grants the head.
fn steals_up_to_the_bound(bound: u32) {
    let _lockdep = lockdep_off();
    let l = lock(bound);
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), WAITERS);
    for pass in 1..bound {
        let r = assert_ready!(spawn(l.read()).poll());
        assert_eq!(l.raw.count_word(), R | WAITERS, "pass {pass} of {bound}");
        drop(r);
        assert_eq!(l.raw.count_word(), WAITERS);
        assert_eq!(l.raw.spin.passes(), pass);
    }
    let last = assert_ready!(spawn(l.read()).poll());
    assert_eq!(
        l.raw.count_word(),
        R | WAITERS | HANDOFF,
        "the pass that reaches the bound hands the lock to the head"
    );
    #[cfg(feature = "stats")]
    assert_eq!(l.stats().pass_bound, 1);
    // Nobody passes any more: a reader and a writer arriving now queue behind the head.
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    assert!(l.try_write().is_err());
    assert_eq!(l.raw.queue_len(), 2);
    // The stealer's release grants the head writer directly (its task has not run yet).
    drop(last);
    assert_eq!(l.raw.count_word(), W | PENDING | WAITERS);
    assert_eq!(
        l.raw.spin.passes(),
        0,
        "the queue's turn restarts the count"
    );
    let g = assert_ready!(w2.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(g);
    assert!(r2.is_woken());
    drop(assert_ready!(r2.poll()));
    assert_idle(&l);
}

#[test]
fn one_steal_past_a_woken_head_writer_then_the_head_is_granted() {
    steals_up_to_the_bound(1);
}

#[test]
fn three_steals_past_a_woken_head_writer_then_the_head_is_granted() {
    steals_up_to_the_bound(3);
}

#[test]
fn a_bound_of_zero_lets_no_reader_steal_past_the_queue() {
    let _lockdep = lockdep_off();
    let l = lock(0);
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    assert!(w2.is_woken());
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    assert_eq!(l.raw.queue_len(), 2);
    let g = assert_ready!(w2.poll());
    drop(g);
    drop(assert_ready!(r.poll()));
    assert_idle(&l);
}

#[test]
fn no_bound_lets_readers_steal_as_long_as_the_head_is_not_due() {
    let _lockdep = lockdep_off();
    let l = lock(u32::MAX);
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    for _ in 0..100 {
        let r = assert_ready!(spawn(l.read()).poll());
        assert_eq!(l.raw.count_word(), R | WAITERS);
        drop(r);
    }
    drop(assert_ready!(w2.poll()));
    assert_idle(&l);
}

/// A writer that queues behind a woken head and finds the lock free takes it ahead of the
/// head (the kernel's `rwsem_try_write_lock` for a waiter not first): a pass, which at the
/// bound hands the lock to the head at its release.
#[test]
fn a_queued_writer_ahead_of_the_head_is_a_pass() {
    let _lockdep = lockdep_off();
    let l = lock(1);
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    assert!(w2.is_woken());
    let g3 = assert_ready!(spawn(l.write()).poll());
    assert_eq!(l.raw.count_word(), W | WAITERS | HANDOFF);
    drop(g3);
    assert_eq!(l.raw.count_word(), W | PENDING);
    drop(assert_ready!(w2.poll()));
    assert_idle(&l);
}

/// The count is of passes since the queue's last turn: a head that gets the lock (here it
/// runs and takes the free lock itself) restarts it, so a bound of two allows two passes
/// per turn however many turns there are.
#[test]
fn each_turn_of_the_queue_restarts_the_count() {
    let _lockdep = lockdep_off();
    let l = lock(2);
    let w0 = l.try_write().unwrap();
    let mut w1 = spawn(l.write());
    let mut w2 = spawn(l.write());
    assert_pending!(w1.poll());
    assert_pending!(w2.poll());
    drop(w0);
    assert!(w1.is_woken());
    // One pass by a reader, then the woken head runs and takes the free lock.
    drop(assert_ready!(spawn(l.read()).poll()));
    assert_eq!(l.raw.spin.passes(), 1);
    let g1 = assert_ready!(w1.poll());
    assert_eq!(l.raw.spin.passes(), 0);
    drop(g1);
    assert!(w2.is_woken());
    // The next head may be passed once without a handoff again.
    drop(assert_ready!(spawn(l.read()).poll()));
    assert_eq!(l.raw.count_word(), WAITERS);
    assert_eq!(l.raw.spin.passes(), 1);
    drop(assert_ready!(w2.poll()));
    assert_idle(&l);
}

/// Passes with nobody queued are not counted, and a new queue starts from zero.
#[test]
fn a_new_queue_counts_from_zero() {
    let _lockdep = lockdep_off();
    let l = lock(2);
    let w0 = l.try_write().unwrap();
    let mut w1 = spawn(l.write());
    assert_pending!(w1.poll());
    drop(w0);
    drop(assert_ready!(spawn(l.read()).poll()));
    assert_eq!(l.raw.spin.passes(), 1);
    // The queued writer gives up (a cancel): the queue empties with a pass counted.
    drop(w1);
    assert_idle(&l);
    let w0 = l.try_write().unwrap();
    let mut w1 = spawn(l.write());
    assert_pending!(w1.poll());
    assert_eq!(l.raw.spin.passes(), 0);
    drop(w0);
    drop(assert_ready!(spawn(l.read()).poll()));
    assert_eq!(
        l.raw.count_word(),
        WAITERS,
        "one pass of a new queue is below 2"
    );
    drop(assert_ready!(w1.poll()));
    assert_idle(&l);
}

/// A grant of queued readers is a turn of the queue too: readers queued behind a head
/// writer that are granted at a release (passing it once, which gives it the handoff)
/// restart the count.
#[test]
fn a_grant_of_queued_readers_restarts_the_count() {
    let _lockdep = lockdep_off();
    let l = lock(3);
    let w0 = l.try_write().unwrap();
    let mut w1 = spawn(l.write());
    assert_pending!(w1.poll());
    drop(w0);
    // One steal past the woken head writer; a second reader finds the lock reader-owned,
    // queues behind the writer, and is granted at once, passing it (once: the writer gets
    // the handoff).
    let r = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.spin.passes(), 1);
    let r2 = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS | HANDOFF);
    assert_eq!(
        l.raw.spin.passes(),
        0,
        "the readers' grant restarts the count"
    );
    drop(r);
    drop(r2);
    assert_eq!(l.raw.count_word(), W | PENDING);
    drop(assert_ready!(w1.poll()));
    assert_idle(&l);
}
