//! The handoff at every release on a crowded runtime (`Policy::crowded_handoff`): on a
//! thread of a tokio runtime with more workers than cores, while readers are queued, a
//! release hands the lock to a head task, the queued readers are granted in the queue's
//! order, and no writer spins past the queue; a queue of writers alone, other threads, a
//! parked head, and the rule off keep the timed handoff.
//!
//! One poll at a time (`tokio-test`), from a task on a worker of a runtime with one worker
//! more than the machine has cores (or as many), with the count word checked after each
//! step (see `transitions.rs`). The handoff timeout is an hour and the bound in count off,
//! so that only the crowding can hand the lock over.

use std::time::Duration;

use crate::raw::parking::parking;
use crate::{Policy, RwLock};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

#[cfg(feature = "tokio")]
use super::panics::{poll_with, Probe};
use crate::raw::tests::support::*;

/// Queue at once (no spin, no yield), no timed handoff or bound in count here, and the
/// crowded rule `on` or off.
fn lock(on: bool) -> RwLock<u32> {
    RwLock::with_policy(
        0,
        queue_at_once()
            .handoff_timeout(Duration::from_secs(3600))
            .pass_bound(u32::MAX)
            .crowded_handoff(on),
    )
}

#[test]
fn the_rule_is_on_by_default_and_off_in_fifo_where_every_release_hands_off() {
    assert!(Policy::new().crowded_handoff);
    assert!(Policy::fifo().handoff_timeout.is_zero());
}

/// On a crowded runtime, with a reader queued behind the head writer, the release grants
/// the head writer; the reader stays queued until the writer's release.
#[cfg(feature = "tokio")]
fn crowded_release_grants_the_head() {
    let _lockdep = lockdep_off();
    let l = lock(true);
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    assert!(l.raw.crowded_handoff_hint(), "a reader is queued");
    assert!(!l.raw.spin_past_queue(), "no spinner passes the queue");
    drop(w1);
    assert!(w2.is_woken());
    assert!(!r.is_woken());
    assert_eq!(
        l.raw.count_word(),
        W | PENDING | WAITERS,
        "granted at the release, its task not yet run"
    );
    let g = assert_ready!(w2.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(g);
    assert!(r.is_woken());
    drop(assert_ready!(r.poll()));
    assert_idle(&l);
}

/// With the rule off (or on a runtime that is not crowded, or for a parked head, or with
/// no reader queued) the release only wakes the head writer, and a reader arriving before
/// it runs steals the free lock past it. `park` polls the head as a blocking acquire
/// would.
fn release_wakes_the_head_and_a_reader_steals(l: RwLock<u32>, park: bool) {
    let _lockdep = lockdep_off();
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    if park {
        assert_pending!(parking(|| w2.poll()));
    } else {
        assert_pending!(w2.poll());
    }
    assert!(!l.raw.crowded_handoff_hint(), "no reader is queued");
    drop(w1);
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), WAITERS, "woken, not granted");
    let r = assert_ready!(spawn(l.read()).poll());
    assert_eq!(
        l.raw.count_word(),
        R | WAITERS,
        "the reader passed the head"
    );
    drop(r);
    let g = assert_ready!(w2.poll());
    drop(g);
    assert_idle(&l);
}

/// A writer queued between two readers: on a crowded runtime the release that frees the
/// lock grants the first reader alone (the queue's order); the second waits for the
/// writer. With the rule off both readers are granted, past the writer.
fn readers_granted_in_order(on: bool) {
    let _lockdep = lockdep_off();
    let l = lock(on);
    let w1 = l.try_write().unwrap();
    let mut r1 = spawn(l.read());
    assert_pending!(r1.poll());
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    let mut r3 = spawn(l.read());
    assert_pending!(r3.poll());
    drop(w1);
    assert!(r1.is_woken());
    let g1 = assert_ready!(r1.poll());
    if on {
        assert!(!r3.is_woken(), "the second reader waits for the writer");
        assert_eq!(l.raw.count_word(), R | WAITERS);
        assert_eq!(l.raw.queue_len(), 2);
        drop(g1);
        let g2 = assert_ready!(w2.poll());
        drop(g2);
        drop(assert_ready!(r3.poll()));
    } else {
        assert!(r3.is_woken(), "the second reader passed the writer");
        let g3 = assert_ready!(r3.poll());
        assert_eq!(l.raw.queue_len(), 1);
        drop(g1);
        drop(g3);
        drop(assert_ready!(w2.poll()));
    }
    assert_idle(&l);
}

#[cfg(feature = "tokio")]
#[test]
fn on_a_crowded_runtime_a_release_grants_the_head_task() {
    on_worker(cores() + 1, crowded_release_grants_the_head);
}

#[cfg(feature = "tokio")]
#[test]
fn on_a_crowded_runtime_readers_do_not_pass_a_queued_writer() {
    on_worker(cores() + 1, || readers_granted_in_order(true));
}

/// Without the `tokio` feature no runtime is crowded: the rule never applies.
#[cfg(not(feature = "tokio"))]
#[test]
fn without_tokio_a_crowded_runtime_keeps_the_timed_handoff() {
    on_worker(cores() + 1, || {
        release_wakes_the_head_and_a_reader_steals(lock(true), false)
    });
    on_worker(cores() + 1, || readers_granted_in_order(false));
}

/// The rule hands the lock over only while readers are queued: a queue of writers alone
/// keeps the timed handoff (and its spinners pass it), on a crowded runtime too.
#[test]
fn on_a_crowded_runtime_a_queue_of_writers_keeps_the_timed_handoff() {
    on_worker(cores() + 1, || {
        let l = lock(true);
        assert!(l.raw.spin_past_queue());
        release_wakes_the_head_and_a_reader_steals(l, false)
    });
}

#[test]
fn with_the_rule_off_readers_pass_a_queued_writer() {
    on_worker(cores() + 1, || readers_granted_in_order(false));
}

#[test]
fn with_the_rule_off_a_crowded_runtime_keeps_the_timed_handoff() {
    on_worker(cores() + 1, || {
        release_wakes_the_head_and_a_reader_steals(lock(false), false)
    });
}

#[test]
fn a_runtime_with_a_worker_per_core_keeps_the_timed_handoff() {
    on_worker(cores(), || {
        release_wakes_the_head_and_a_reader_steals(lock(true), false)
    });
}

#[test]
fn outside_a_runtime_the_timed_handoff_stays() {
    release_wakes_the_head_and_a_reader_steals(lock(true), false);
}

#[test]
fn a_parked_head_keeps_the_timed_handoff_on_a_crowded_runtime() {
    on_worker(cores() + 1, || {
        release_wakes_the_head_and_a_reader_steals(lock(true), true)
    });
}

/// Drops `guard`, whose release grants a waiter whose waker (`probe`'s) panics in `wake`:
/// the release unwinds, after that one wake.
#[cfg(feature = "tokio")]
fn release_runs_the_panicking_wake<G>(guard: G, probe: &super::panics::Probe) {
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(guard))).is_err();
    assert!(unwound, "the release ran the panicking wake");
    assert_eq!(probe.wakes(), 1);
}

/// The release's grant on a crowded runtime (a reader queued behind the head writer) wakes
/// the head writer after the wait lock is released (the grant is the timed handoff's,
/// taken at every release here); a panicking wake unwinds out of the release and leaves
/// the writer owning the lock, granted: its next poll completes.
#[cfg(feature = "tokio")]
#[test]
fn on_a_crowded_runtime_a_panicking_wake_of_the_granted_head_leaves_it_the_lock() {
    on_worker(cores() + 1, || {
        let _lockdep = lockdep_off();
        let l = lock(true);
        let w1 = l.try_write().unwrap();
        let mut w2 = std::pin::pin!(l.write());
        let probe = Probe::new(true);
        assert!(poll_with(w2.as_mut(), &probe.waker()).is_pending());
        let mut r = spawn(l.read());
        assert_pending!(r.poll());
        release_runs_the_panicking_wake(w1, &probe);
        assert_eq!(
            l.raw.count_word(),
            W | PENDING | WAITERS,
            "the grant was kept"
        );
        assert!(!r.is_woken());
        let g = assert_ready!(spawn(w2).poll());
        drop(g);
        assert!(r.is_woken());
        drop(assert_ready!(r.poll()));
        assert_idle(&l);
    });
}

/// The same with the queued readers granted in order: the head reader's wake panics; it
/// holds its read lock, the reader queued behind the writer is still queued, and the
/// queue then runs in order.
#[cfg(feature = "tokio")]
#[test]
fn on_a_crowded_runtime_a_panicking_wake_of_a_granted_reader_keeps_the_order() {
    on_worker(cores() + 1, || {
        let _lockdep = lockdep_off();
        let l = lock(true);
        let w1 = l.try_write().unwrap();
        let mut r1 = std::pin::pin!(l.read());
        let probe = Probe::new(true);
        assert!(poll_with(r1.as_mut(), &probe.waker()).is_pending());
        let mut w2 = spawn(l.write());
        assert_pending!(w2.poll());
        let mut r3 = spawn(l.read());
        assert_pending!(r3.poll());
        release_runs_the_panicking_wake(w1, &probe);
        assert_eq!(
            l.raw.count_word(),
            R | WAITERS,
            "the head reader holds its grant"
        );
        assert_eq!(l.raw.queue_len(), 2);
        assert!(!r3.is_woken());
        let g1 = assert_ready!(spawn(r1).poll());
        drop(g1);
        drop(assert_ready!(w2.poll()));
        drop(assert_ready!(r3.poll()));
        assert_idle(&l);
    });
}

/// A writer that queues on a crowded runtime while a reader is queued reads no clock (it
/// is due at every release while the rule holds): its handoff timeout starts at the
/// first release that finds it at the head once the readers have left, so that release
/// wakes it to compete and a reader may still steal the lock. A writer queued beside no
/// reader (the rule not holding) is timed from its queueing: past its timeout the release
/// grants it directly.
#[cfg(feature = "tokio")]
fn writer_queued_under_the_rule_is_timed_from_its_first_turn_at_the_head() {
    let _lockdep = lockdep_off();
    let timeout = Duration::from_millis(1);
    let l = RwLock::with_policy(
        0,
        queue_at_once()
            .handoff_timeout(timeout)
            .pass_bound(u32::MAX)
            .crowded_handoff(true),
    );
    let w1 = l.try_write().unwrap();
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    // The reader leaves: the writer heads a queue of writers alone, with no deadline.
    drop(r);
    assert!(!l.raw.crowded_handoff_hint());
    assert_eq!(
        l.raw.snapshot().head_waited,
        None,
        "no clock was read for it"
    );
    std::thread::sleep(3 * timeout);
    drop(w1);
    assert!(w2.is_woken());
    assert_eq!(
        l.raw.count_word(),
        WAITERS,
        "woken to compete, not granted: its timeout started at this release"
    );
    assert!(l.raw.snapshot().head_waited.is_some(), "timed from now on");
    let stolen = assert_ready!(spawn(l.read()).poll());
    assert_eq!(
        l.raw.count_word(),
        R | WAITERS,
        "no handoff pending: a reader stole the lock past the head"
    );
    drop(stolen);
    drop(assert_ready!(w2.poll()));
    assert_idle(&l);

    // Queued with no reader queued: timed from its queueing, granted at the release.
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    std::thread::sleep(3 * timeout);
    drop(w1);
    assert_eq!(
        l.raw.count_word(),
        W | PENDING,
        "past its timeout: granted at the release"
    );
    drop(assert_ready!(w2.poll()));
    assert_idle(&l);
}

#[cfg(feature = "tokio")]
#[test]
fn on_a_crowded_runtime_a_writer_queued_beside_readers_reads_no_clock() {
    on_worker(
        cores() + 1,
        writer_queued_under_the_rule_is_timed_from_its_first_turn_at_the_head,
    );
}
