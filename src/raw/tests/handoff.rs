//! The handoff timeout of a head writer that was woken and not yet polled: its task sits
//! in the executor's run queue while arrivals take the lock at every release. The bound
//! on its wait must not depend on when it is next polled: once it has waited past the
//! timeout, the next release grants it the lock directly, as for a head not woken yet.
//!
//! One poll at a time (`tokio-test`), with the count word checked after each step (see
//! `transitions.rs`).

use std::time::Duration;

use crate::RwLock;
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

use crate::raw::tests::support::*;

/// Long enough that the first release, a few statements after the writer queued, comes
/// well within it even under valgrind on a loaded machine (a preempted test thread); the
/// test then sleeps past it.
const TIMEOUT: Duration = Duration::from_millis(250);

/// The timeout alone (no bound in count on the passing: the tests below pass the woken head
/// more than once; `bounded_passing.rs` tests the bound).
fn lock() -> RwLock<u32> {
    RwLock::with_policy(
        0,
        queue_at_once()
            .handoff_timeout(TIMEOUT)
            .pass_bound(u32::MAX),
    )
}

#[test]
fn woken_head_writer_past_the_timeout_is_granted_at_the_next_release() {
    let _lockdep = lockdep_off();
    let l = lock();
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    // Within the timeout the release wakes the head to compete; it does not grant it.
    drop(w1);
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), WAITERS);
    // Its task is not polled (the executor is busy elsewhere) until the timeout has passed.
    std::thread::sleep(TIMEOUT + Duration::from_millis(10));
    // Meanwhile a reader arrives and steals the free lock (no writer, no handoff).
    let r = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.count_word(), R | WAITERS);
    // Its release finds the head, woken and still not polled, past the timeout: the lock
    // goes to the head directly, not back up for grabs.
    drop(r);
    assert_eq!(
        l.raw.count_word(),
        W | PENDING,
        "a woken head past its timeout was left to compete with the next arrival"
    );
    #[cfg(feature = "stats")]
    assert_eq!(l.stats().wlock_handoff, 1);
    // Nobody else gets in before the head has run.
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    assert!(l.try_write().is_err());
    let g = assert_ready!(w2.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(g);
    assert!(r2.is_woken());
    drop(assert_ready!(r2.poll()));
    assert_idle(&l);
}

#[test]
fn woken_head_writer_within_the_timeout_still_competes() {
    let _lockdep = lockdep_off();
    // The other side of the rule: before the timeout a woken head that is not polled is
    // not granted; an arrival may take the lock at each release (stealing is where the
    // throughput comes from), and the head asks for the handoff once it runs and loses.
    let l = RwLock::with_policy(
        0u32,
        queue_at_once()
            .handoff_timeout(Duration::from_secs(3600))
            .pass_bound(u32::MAX),
    );
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    assert!(w2.is_woken());
    for _ in 0..3 {
        let r = assert_ready!(spawn(l.read()).poll());
        assert_eq!(l.raw.count_word(), R | WAITERS);
        drop(r);
        assert_eq!(l.raw.count_word(), WAITERS);
    }
    let g = assert_ready!(w2.poll());
    assert_eq!(l.raw.count_word(), W);
    drop(g);
    assert_idle(&l);
}
