//! A head that is a parked thread (`raw/parking.rs`): a node queued by a blocking acquire's
//! poll (inside `parking`) is not served by the bound in count on passing, nor passed by
//! the queued readers behind it; the bound pauses until the queue's next turn, and the
//! handoff timeout serves the head as it serves any head, until a release wakes it to
//! compete: then it claims the lock itself when it runs.
//!
//! One poll at a time (`tokio-test`), the polls of the "thread" inside `parking`, with the
//! count word checked after each step (see `transitions.rs`).

use std::time::Duration;

use crate::raw::parking::parking;
use crate::raw::spin::Spinner;
use crate::Policy;
use crate::RwLock;
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

use crate::raw::tests::support::*;

/// Queue at once (no spin, no yield), a bound of one pass, and a handoff timeout that
/// never runs out here, so that only the count could hand the lock over.
fn lock() -> RwLock<u32> {
    RwLock::with_policy(
        0,
        queue_at_once()
            .handoff_timeout(Duration::from_secs(3600))
            .pass_bound(1),
    )
}

#[test]
fn the_bound_in_count_pauses_for_a_parked_head_until_the_queues_turn() {
    let _lockdep = lockdep_off();
    let l = lock();
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(parking(|| w2.poll()));
    drop(w1);
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), WAITERS);
    // With a task at the head the first steal would set HANDOFF (`bounded_passing.rs`);
    // with a parked thread there, steals go on without the wait lock or a handoff.
    for pass in 0..10 {
        let r = assert_ready!(spawn(l.read()).poll());
        assert_eq!(l.raw.count_word(), R | WAITERS, "pass {pass}: no handoff");
        drop(r);
        assert_eq!(l.raw.count_word(), WAITERS);
    }
    assert!(l.raw.spin.passes_paused());
    assert_eq!(
        l.raw.spin.passes(),
        1,
        "the pass that reached the bound, then none"
    );
    #[cfg(feature = "stats")]
    {
        assert_eq!(l.stats().pass_bound, 0);
        assert_eq!(l.stats().pass_bound_paused, 1);
    }
    // The head's turn ends the pause.
    let g = assert_ready!(parking(|| w2.poll()));
    assert!(!l.raw.spin.passes_paused());
    assert_eq!(l.raw.spin.passes(), 0);
    assert_eq!(l.raw.count_word(), W);
    drop(g);
    assert_idle(&l);
}

#[test]
fn a_task_behind_a_parked_head_counts_again_after_the_heads_turn() {
    let _lockdep = lockdep_off();
    let l = lock();
    let w1 = l.try_write().unwrap();
    let mut parked = spawn(l.write());
    assert_pending!(parking(|| parked.poll()));
    let mut task = spawn(l.write());
    assert_pending!(task.poll());
    drop(w1);
    // A steal past the parked head: the bound pauses.
    drop(assert_ready!(spawn(l.read()).poll()));
    assert!(l.raw.spin.passes_paused());
    drop(assert_ready!(parking(|| parked.poll())));
    // Now the task is the head: the next steal reaches the bound and hands it the lock.
    assert!(task.is_woken());
    let r = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    assert!(!l.raw.spin.passes_paused());
    drop(r);
    assert_eq!(
        l.raw.count_word(),
        W | PENDING,
        "granted: the queue is empty"
    );
    drop(assert_ready!(task.poll()));
    assert_idle(&l);
}

#[test]
fn queued_readers_do_not_pass_a_parked_head_writer() {
    let _lockdep = lockdep_off();
    let l = RwLock::with_policy(0, queue_at_once());
    let w1 = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(parking(|| w.poll()));
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    drop(w1);
    // Behind a task, the reader would be granted past it once (`transitions.rs`,
    // `a_reader_between_queued_writers_passes_the_head_writer...`).
    assert!(w.is_woken(), "the parked head writer is next");
    assert!(!r.is_woken(), "the reader does not pass it");
    assert_eq!(l.raw.count_word(), WAITERS);
    drop(assert_ready!(parking(|| w.poll())));
    assert!(r.is_woken());
    drop(assert_ready!(r.poll()));
    assert_idle(&l);
}

/// A parked head woken to compete and not back yet (its waker taken, not replaced) is
/// left to claim the lock itself: a release neither wakes it again nor reads the clock
/// for a timed grant, even past its timeout; when it runs and finds the lock taken, it
/// lost a race and asks for the handoff at once, and the next release grants it.
#[test]
fn a_parked_head_woken_to_compete_claims_the_handoff_itself() {
    let _lockdep = lockdep_off();
    // Long enough that the first release comes before it, under Miri too (whose clock
    // advances with the code it runs: 1 ms passed between the queueing and the release).
    let timeout = Duration::from_millis(200);
    let l = RwLock::with_policy(0, queue_at_once().handoff_timeout(timeout));
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(parking(|| w2.poll()));
    drop(w1);
    assert!(w2.is_woken(), "not due yet: woken to compete");
    assert_eq!(l.raw.count_word(), WAITERS);
    std::thread::sleep(3 * timeout);
    // Past its timeout, still not back: a steal's release leaves it be (a task head would
    // be granted here: `transitions.rs`, the woken head past its timeout).
    drop(assert_ready!(spawn(l.read()).poll()));
    assert_eq!(
        l.raw.count_word(),
        WAITERS,
        "no timed grant to a thread on its way"
    );
    // It runs while a reader holds the lock: a lost race, so it asks for the handoff.
    let r = assert_ready!(spawn(l.read()).poll());
    assert_pending!(parking(|| w2.poll()));
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    drop(r);
    assert_eq!(l.raw.count_word(), W | PENDING, "granted at the release");
    drop(assert_ready!(parking(|| w2.poll())));
    assert_idle(&l);
}

/// A thread that would park spins for the policy's whole cap, whatever the lock's spins
/// taught (why: `raw/parking.rs`); a task on the same lock still gets the learned budget:
/// no spin, or one probe in 32.
#[test]
fn a_thread_that_would_park_spins_for_the_whole_cap() {
    let cap = Duration::from_micros(10);
    let l = RwLock::with_policy(0, Policy::new().writer_spin(cap).reader_spin(cap));
    for who in [Spinner::Writer, Spinner::Reader] {
        for _ in 0..8 {
            l.raw.spin.lost(who, cap);
        }
        assert_eq!(l.raw.spin.current(who, cap), Duration::ZERO);
        let mut probes = 0;
        for _ in 0..64 {
            match l.raw.spin_budget(who, cap) {
                None => {}
                Some(budget) => {
                    assert!(budget < cap, "{who:?}: a task gets a probe at most");
                    probes += 1;
                }
            }
        }
        assert_eq!(probes, 2, "{who:?}: one task acquire in 32 probes");
        for _ in 0..64 {
            assert_eq!(
                parking(|| l.raw.spin_budget(who, cap)),
                Some(cap),
                "{who:?}"
            );
        }
        // Asking for a thread's budget leaves the learned one as it was.
        assert_eq!(l.raw.spin.current(who, cap), Duration::ZERO);
    }
    // A cap of zero is no spin, for a thread too.
    assert_eq!(
        parking(|| l.raw.spin_budget(Spinner::Writer, Duration::ZERO)),
        None
    );
}
