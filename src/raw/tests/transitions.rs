//! Deterministic tests of every transition of the lock, one poll at a time (`tokio-test`).
//!
//! The count word is checked after each step with the kernel's encoding: bit 0 writer,
//! bit 1 waiters, bit 2 handoff, readers from bit 8.

use std::time::Duration;

use crate::{Policy, RwLock};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

use crate::raw::tests::support::*;

fn lock(policy: Policy) -> RwLock<u32> {
    RwLock::with_policy(0, policy)
}

#[test]
fn fast_paths_and_idle_value() {
    let _lockdep = lockdep_off();
    let l = lock(Policy::new());
    assert_eq!(l.raw.count_word(), 0);
    let r1 = assert_ready!(spawn(l.read()).poll());
    let r2 = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.count_word(), 2 * R);
    drop((r1, r2));
    assert_eq!(l.raw.count_word(), 0);
    let mut w = assert_ready!(spawn(l.write()).poll());
    *w += 1;
    assert_eq!(l.raw.count_word(), W);
    drop(w);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(*l.try_read().unwrap(), 1);
}

#[test]
fn try_locks() {
    let l = lock(Policy::new());
    let r = l.try_read().unwrap();
    assert!(l.try_write().is_err());
    let r2 = l.try_read().unwrap();
    drop((r, r2));
    let w = l.try_write().unwrap();
    assert!(l.try_read().is_err());
    assert!(l.try_write().is_err());
    assert_eq!(
        l.try_write().unwrap_err().to_string(),
        "operation would block"
    );
    drop(w);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn reader_queues_behind_writer_and_is_granted() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let w = l.try_write().unwrap();
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    assert_eq!(l.raw.queue_len(), 1);
    assert!(!r.is_woken());
    drop(w);
    // The unlock granted the reader before waking it: the bias is already in the count.
    assert!(r.is_woken());
    assert_eq!(l.raw.count_word(), R);
    assert_eq!(l.raw.queue_len(), 0);
    let g = assert_ready!(r.poll());
    drop(g);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn writer_spins_then_yields_then_queues() {
    let _lockdep = lockdep_off();
    let l = lock(
        Policy::new()
            .writer_spin(Duration::from_micros(1))
            .writer_yields(2),
    );
    let w1 = l.try_write().unwrap();
    let mut w = spawn(l.write());
    // Spin fails (a writer holds the lock), then the writer yields: it wakes itself.
    assert_pending!(w.poll());
    assert!(w.is_woken());
    assert_eq!(l.raw.queue_len(), 0);
    assert_pending!(w.poll());
    assert!(w.is_woken());
    assert_eq!(l.raw.queue_len(), 0);
    // Out of yields: it queues and sleeps.
    assert_pending!(w.poll());
    assert!(!w.is_woken());
    assert_eq!(l.raw.queue_len(), 1);
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(w1);
    assert!(w.is_woken());
    let g = assert_ready!(w.poll());
    assert_eq!(l.raw.count_word(), W);
    drop(g);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn writer_finding_readers_inside_queues_without_yielding() {
    let _lockdep = lockdep_off();
    // Yields left, but readers own the lock: arriving readers would keep joining them
    // until a writer queues (their fast path fails only on `WAITERS`), so a yield cannot
    // win. The writer queues at its first poll, and readers arriving after it queue
    // behind it.
    let l = lock(
        Policy::new()
            .writer_spin(Duration::from_micros(1))
            .writer_yields(2),
    );
    let r = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    assert!(!w.is_woken(), "it yielded instead of queueing");
    assert_eq!(l.raw.queue_len(), 1);
    assert_eq!(l.raw.count_word(), R | WAITERS);
    // A reader arriving now queues; being behind the writer with the lock reader-owned,
    // it passes it once (the batch of readers that passes a head writer), and the
    // writer gets the handoff: the next reader waits.
    let r2 = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS | HANDOFF);
    let mut r3 = spawn(l.read());
    assert_pending!(r3.poll());
    drop((r, r2));
    assert!(w.is_woken());
    let g = assert_ready!(w.poll());
    assert!(!r3.is_woken());
    drop(g);
    assert!(r3.is_woken());
    drop(assert_ready!(r3.poll()));
    assert_eq!(l.raw.count_word(), 0);

    // The same under an upgradable reader.
    let u = l.try_upgradable_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    assert!(!w.is_woken(), "it yielded instead of queueing");
    assert_eq!(l.raw.queue_len(), 1);
    drop(u);
    drop(assert_ready!(w.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn writer_takes_the_lock_during_a_yield() {
    let _lockdep = lockdep_off();
    let l = lock(Policy::new().writer_spin(Duration::ZERO).writer_yields(3));
    let r = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    drop(r);
    let g = assert_ready!(w.poll());
    assert_eq!(l.raw.queue_len(), 0);
    drop(g);
}

#[test]
fn reader_steals_after_writer_leaves() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    // The head writer is woken, not granted: the lock is free until it runs.
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), WAITERS);
    // A reader arriving now steals the lock (no writer, no handoff).
    let r = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.count_word(), R | WAITERS);
    assert_pending!(w2.poll());
    assert_eq!(l.raw.queue_len(), 1);
    drop(r);
    assert!(w2.is_woken());
    let g = assert_ready!(w2.poll());
    assert_eq!(l.raw.count_word(), W);
    drop(g);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn try_write_fails_while_a_writer_is_queued() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    assert!(w2.is_woken());
    // The lock is free but a writer is queued: like the kernel's down_write_trylock (one
    // CAS from idle), try_write does not jump the queue.
    assert_eq!(l.raw.count_word(), WAITERS);
    assert!(l.try_write().is_err());
    drop(assert_ready!(w2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

/// `WRITER_QUEUED` and `READER_QUEUED` say, as of each release of the wait lock, whether a
/// writer and whether a reader is queued: set as each queues, cleared as the last of its
/// kind leaves, by a grant or a cancel.
#[test]
fn the_queued_bits_follow_the_queue() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let w1 = l.try_write().unwrap();
    assert_eq!(l.raw.queued_bits(), (false, false));
    let mut r1 = spawn(l.read());
    assert_pending!(r1.poll());
    assert_eq!(l.raw.queued_bits(), (false, true), "a reader queued");
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    assert_eq!(
        l.raw.queued_bits(),
        (true, true),
        "a writer queued behind it"
    );
    let mut r3 = spawn(l.read());
    assert_pending!(r3.poll());
    drop(r1);
    assert_eq!(
        l.raw.queued_bits(),
        (true, true),
        "the other reader is still queued"
    );
    drop(r3);
    assert_eq!(l.raw.queued_bits(), (true, false), "both readers cancelled");
    let mut r4 = spawn(l.read());
    assert_pending!(r4.poll());
    assert_eq!(l.raw.queued_bits(), (true, true));
    drop(w1);
    // The head writer is woken; the reader behind it stays queued.
    let g2 = assert_ready!(w2.poll());
    assert_eq!(
        l.raw.queued_bits(),
        (false, true),
        "the writer took the lock"
    );
    drop(g2);
    assert!(r4.is_woken());
    assert_eq!(
        l.raw.queued_bits(),
        (false, false),
        "the reader was granted"
    );
    drop(assert_ready!(r4.poll()));
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.raw.queued_bits(), (false, false));
}

#[test]
fn readers_queue_behind_reader_owned_lock_when_a_writer_waits() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let r1 = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    // A new reader must not join the owning readers while a writer waits.
    assert!(l.try_read().is_err());
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    assert_eq!(l.raw.queue_len(), 2);
    assert_eq!(l.raw.count_word(), R | WAITERS);
    drop(r1);
    assert!(w.is_woken());
    assert!(!r2.is_woken());
    let g = assert_ready!(w.poll());
    assert_pending!(r2.poll());
    drop(g);
    assert!(r2.is_woken());
    let _held = assert_ready!(r2.poll());
    assert_eq!(l.raw.count_word(), R);
}

#[test]
fn all_queued_readers_granted_in_one_wake_writers_skipped() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let w = l.try_write().unwrap();
    let mut r1 = spawn(l.read());
    let mut w2 = spawn(l.write());
    let mut r2 = spawn(l.read());
    let mut r3 = spawn(l.read());
    assert_pending!(r1.poll());
    assert_pending!(w2.poll());
    assert_pending!(r2.poll());
    assert_pending!(r3.poll());
    assert_eq!(l.raw.queue_len(), 4);
    drop(w);
    assert!(r1.is_woken() && r2.is_woken() && r3.is_woken());
    assert!(!w2.is_woken());
    assert_eq!(l.raw.count_word(), (3 * R) | WAITERS);
    assert_eq!(l.raw.queue_len(), 1);
    let g1 = assert_ready!(r1.poll());
    let g2 = assert_ready!(r2.poll());
    let g3 = assert_ready!(r3.poll());
    drop((g1, g2));
    assert!(!w2.is_woken());
    drop(g3);
    assert!(w2.is_woken());
    drop(assert_ready!(w2.poll()));
    #[cfg(feature = "stats")]
    {
        let s = l.stats();
        assert_eq!(s.wake_reader, 3);
        assert_eq!(s.sleep_reader, 3);
        assert_eq!(s.sleep_writer, 1);
    }
}

#[test]
fn reader_wake_batch_limits_one_grant() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().reader_wake_batch(2));
    let w = l.try_write().unwrap();
    let mut rs: Vec<_> = (0..5).map(|_| spawn(l.read())).collect();
    for r in &mut rs {
        assert_pending!(r.poll());
    }
    drop(w);
    // Two granted: the first woken, the second's wake-up relayed through the first.
    let woken = rs.iter().filter(|r| r.is_woken()).count();
    assert_eq!(woken, 1);
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS);
    // The lock is reader-owned, the rest are readers: the next release grants the next batch.
    let g0 = assert_ready!(rs[0].poll());
    assert!(rs[1].is_woken());
    let g1 = assert_ready!(rs[1].poll());
    drop((g0, g1));
    assert!(rs[2].is_woken() && !rs[3].is_woken() && !rs[4].is_woken());
    let g2 = assert_ready!(rs[2].poll());
    assert!(rs[3].is_woken() && !rs[4].is_woken());
    let g3 = assert_ready!(rs[3].poll());
    drop((g2, g3));
    assert!(rs[4].is_woken());
    drop(assert_ready!(rs[4].poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn a_granted_reader_dropped_unpolled_relays_the_wake_up_of_the_one_granted_with_it() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let w = l.try_write().unwrap();
    let mut r1 = spawn(l.read());
    let mut r2 = spawn(l.read());
    assert_pending!(r1.poll());
    assert_pending!(r2.poll());
    drop(w);
    assert!(r1.is_woken() && !r2.is_woken());
    assert_eq!(l.raw.count_word(), 2 * R);
    // Cancelled before its task ran: its drop releases its lock and passes the wake-up on.
    drop(r1);
    assert!(r2.is_woken());
    assert_eq!(l.raw.count_word(), R);
    drop(assert_ready!(r2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn three_readers_granted_together_are_all_woken_by_the_release() {
    let _lockdep = lockdep_off();
    // The relay is for a batch of two; a larger batch is woken at once, to run in parallel.
    let l = lock(queue_at_once());
    let w = l.try_write().unwrap();
    let mut rs: Vec<_> = (0..3).map(|_| spawn(l.read())).collect();
    for r in &mut rs {
        assert_pending!(r.poll());
    }
    drop(w);
    assert!(rs.iter().all(|r| r.is_woken()));
    assert_eq!(l.raw.count_word(), 3 * R);
    for r in &mut rs {
        drop(assert_ready!(r.poll()));
    }
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn handoff_is_set_after_the_timeout_and_honoured() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::from_millis(1)));
    let r = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    assert_eq!(l.raw.count_word(), R | WAITERS);
    std::thread::sleep(Duration::from_millis(3));
    // The head is polled (woken for any reason), finds the lock held and has waited past
    // the timeout: it sets HANDOFF.
    assert_pending!(w.poll());
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    // Now nobody but the head gets in: readers queue, writers and try-locks fail.
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    assert!(l.try_write().is_err());
    assert!(l.try_read().is_err());
    assert_eq!(l.raw.queue_len(), 2);
    // The release grants the head writer directly and clears HANDOFF.
    drop(r);
    assert!(w.is_woken());
    assert!(!r2.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS | PENDING);
    let g = assert_ready!(w.poll());
    drop(g);
    assert!(r2.is_woken());
    let _held = assert_ready!(r2.poll());
    assert_eq!(l.raw.count_word(), R);
}

#[test]
fn timed_out_head_writer_is_granted_at_release() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::from_millis(1)));
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    std::thread::sleep(Duration::from_millis(3));
    // The head has waited past the timeout but was not polled since: the release grants
    // it the lock directly, leaving no window for a steal while it is being scheduled.
    drop(w1);
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), W | PENDING);
    assert!(l.try_read().is_err());
    assert!(l.try_write().is_err());
    #[cfg(feature = "stats")]
    assert_eq!(l.stats().wlock_handoff, 1);
    drop(assert_ready!(w2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn woken_head_writer_that_loses_a_race_gets_the_handoff() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::from_secs(3600)));
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    drop(w1);
    // Within the timeout the head is woken to compete, not granted.
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), WAITERS);
    // A reader arriving first steals the lock (no writer, no handoff).
    let r = assert_ready!(spawn(l.read()).poll());
    // The woken head finds the lock taken: it lost a race, and asks for the handoff at
    // once, whatever the timeout.
    assert_pending!(w2.poll());
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    drop(r);
    // The release grants the head directly: a head loses at most one race per wake-up.
    assert!(w2.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS | PENDING);
    drop(assert_ready!(w2.poll()));
    assert!(r2.is_woken());
    drop(assert_ready!(r2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn reader_head_requests_handoff_when_a_writer_holds_the_lock() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::from_millis(1)));
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    let mut r = spawn(l.read());
    assert_pending!(w2.poll());
    assert_pending!(r.poll());
    std::thread::sleep(Duration::from_millis(3));
    // The head writer goes away while w1 still holds the lock: the wake passes to the
    // reader head, whose grant finds the writer bit; it has waited past the timeout, so
    // it asks for a handoff instead.
    drop(w2);
    assert!(!r.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS | HANDOFF);
    assert!(l.try_read().is_err());
    #[cfg(feature = "stats")]
    assert_eq!(l.stats().rlock_handoff, 1);
    // The release grants the reader and clears both bits.
    drop(w1);
    assert!(r.is_woken());
    assert_eq!(l.raw.count_word(), R);
    let _held = assert_ready!(r.poll());
}

/// The one reader queued, at the head, with a writer behind it and the handoff it asked
/// for pending: the release grants it in one step (`wake.rs`, the lone reader's grant):
/// its bias in; `HANDOFF` and `READER_QUEUED` out; `WAITERS` and `WRITER_QUEUED` kept for
/// the writer, whose turn comes at the reader's release.
#[test]
fn lone_reader_head_is_granted_with_a_writer_behind_it() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::from_millis(1)));
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    let mut r = spawn(l.read());
    let mut w3 = spawn(l.write());
    assert_pending!(w2.poll());
    assert_pending!(r.poll());
    assert_pending!(w3.poll());
    std::thread::sleep(Duration::from_millis(3));
    // The head writer goes away: the reader, now the head, asks for the handoff.
    drop(w2);
    assert_eq!(l.raw.count_word(), W | WAITERS | HANDOFF);
    assert_eq!(l.raw.queued_bits(), (true, true));
    drop(w1);
    assert!(r.is_woken());
    assert!(!w3.is_woken());
    assert_eq!(l.raw.count_word(), R | WAITERS);
    assert_eq!(
        l.raw.queued_bits(),
        (true, false),
        "the writer is still queued"
    );
    let held = assert_ready!(r.poll());
    assert!(l.try_read().is_err(), "a writer waits: no steal past it");
    drop(held);
    assert!(w3.is_woken());
    drop(assert_ready!(w3.poll()));
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.raw.queued_bits(), (false, false));
}

#[test]
fn handoff_disabled_never_sets_the_bit() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::MAX));
    let w1 = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    std::thread::sleep(Duration::from_millis(2));
    drop(w1);
    let r = assert_ready!(spawn(l.read()).poll());
    assert_pending!(w2.poll());
    assert_eq!(l.raw.count_word() & HANDOFF, 0);
    drop(r);
    drop(assert_ready!(w2.poll()));
}

#[test]
fn cancel_before_first_poll_and_while_yielding() {
    let _lockdep = lockdep_off();
    let l = lock(Policy::new().writer_spin(Duration::ZERO).writer_yields(5));
    drop(l.read());
    drop(l.write());
    let r = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    drop(w);
    assert_eq!(l.raw.count_word(), R);
    assert_eq!(l.raw.queue_len(), 0);
    drop(r);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn cancel_queued_reader_and_writer() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let g = l.try_write().unwrap();
    let mut r = spawn(l.read());
    let mut w = spawn(l.write());
    assert_pending!(r.poll());
    assert_pending!(w.poll());
    drop(w);
    assert_eq!(l.raw.queue_len(), 1);
    assert_eq!(l.raw.count_word(), W | WAITERS);
    drop(r);
    assert_eq!(l.raw.queue_len(), 0);
    assert_eq!(l.raw.count_word(), W);
    drop(g);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn cancel_head_passes_the_wake_up_on() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let g = l.try_write().unwrap();
    let mut w2 = spawn(l.write());
    let mut w3 = spawn(l.write());
    assert_pending!(w2.poll());
    assert_pending!(w3.poll());
    drop(g);
    assert!(w2.is_woken());
    assert!(!w3.is_woken());
    // The woken head is dropped before it runs: the wake-up must reach the next head.
    drop(w2);
    assert!(w3.is_woken());
    let _held = assert_ready!(w3.poll());
    assert_eq!(l.raw.count_word(), W);
}

#[test]
fn cancel_head_with_handoff_passes_handoff_to_next_writer() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::from_millis(1)));
    let r = l.try_read().unwrap();
    let mut w2 = spawn(l.write());
    let mut w3 = spawn(l.write());
    assert_pending!(w2.poll());
    assert_pending!(w3.poll());
    std::thread::sleep(Duration::from_millis(3));
    // A spurious re-poll of the head: lock held, timed out: HANDOFF.
    assert_pending!(w2.poll());
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    drop(w2);
    // The next head inherits the handoff.
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    assert_eq!(l.raw.queue_len(), 1);
    assert!(l.try_write().is_err());
    drop(r);
    // ... and is granted the lock directly at the release.
    assert!(w3.is_woken());
    assert_eq!(l.raw.count_word(), W | PENDING);
    drop(assert_ready!(w3.poll()));
}

#[test]
fn cancel_head_with_handoff_grants_next_reader() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::from_millis(1)));
    let r = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    std::thread::sleep(Duration::from_millis(3));
    assert_pending!(w.poll());
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    drop(w);
    // The reader head is granted beside the owning reader; the queue is empty, so both
    // bits go.
    assert!(r2.is_woken());
    assert_eq!(l.raw.count_word(), 2 * R);
    drop(assert_ready!(r2.poll()));
    drop(r);
}

#[test]
fn cancel_granted_but_unpolled_reader_releases() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let g = l.try_write().unwrap();
    let mut r = spawn(l.read());
    let mut w2 = spawn(l.write());
    assert_pending!(r.poll());
    assert_pending!(w2.poll());
    drop(g);
    assert!(r.is_woken());
    assert_eq!(l.raw.count_word(), R | WAITERS);
    // Granted, never polled: dropping it releases the read lock and wakes the writer.
    drop(r);
    assert!(w2.is_woken());
    let _held = assert_ready!(w2.poll());
    assert_eq!(l.raw.count_word(), W);
}

#[test]
fn cancel_granted_but_unpolled_writer_releases() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once().handoff_timeout(Duration::ZERO));
    let r = l.try_read().unwrap();
    let mut w = spawn(l.write());
    let mut r2 = spawn(l.read());
    assert_pending!(w.poll());
    assert_pending!(r2.poll());
    // Timeout zero: the head's next poll sets HANDOFF.
    assert_pending!(w.poll());
    drop(r);
    // Granted directly under handoff.
    assert!(w.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS | PENDING);
    drop(w);
    assert!(r2.is_woken());
    let _held = assert_ready!(r2.poll());
    assert_eq!(l.raw.count_word(), R);
}

#[test]
fn repoll_keeps_one_queue_entry_and_latest_waker() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let g = l.try_write().unwrap();
    let mut r = spawn(l.read());
    for _ in 0..5 {
        assert_pending!(r.poll());
    }
    assert_eq!(l.raw.queue_len(), 1);
    drop(g);
    assert!(r.is_woken());
    drop(assert_ready!(r.poll()));
}

#[test]
fn debug_and_display() {
    let l = RwLock::new(7);
    assert_eq!(format!("{l:?}"), "RwLock { data: 7 }");
    let w = l.try_write().unwrap();
    assert_eq!(format!("{l:?}"), "RwLock { data: <locked> }");
    assert_eq!(format!("{w} {w:?}"), "7 7");
    drop(w);
    let r = l.try_read().unwrap();
    assert_eq!(format!("{r} {r:?}"), "7 7");
}

#[test]
fn default_from_get_mut_into_inner() {
    let mut l: RwLock<Vec<u8>> = RwLock::default();
    l.get_mut().push(1);
    let l2 = RwLock::from(5u8);
    assert_eq!(*l2.try_read().unwrap(), 5);
    assert_eq!(l.into_inner(), vec![1]);
    let unsized_lock: &RwLock<[u8]> = &RwLock::new([1u8, 2, 3]);
    assert_eq!(unsized_lock.try_read().unwrap().len(), 3);
}

#[test]
fn policy_is_clamped() {
    assert_eq!(Policy::new().reader_wake_batch(0).reader_wake_batch, 1);
    assert_eq!(
        Policy::new().reader_wake_batch(10_000).reader_wake_batch,
        256
    );
    let mut p = Policy::new();
    p.reader_wake_batch = 0;
    // A policy built by field assignment is clamped when the lock is made.
    assert_eq!(RwLock::with_policy((), p).policy().reader_wake_batch, 1);
}

#[test]
fn downgrade_grants_queued_readers_not_writers() {
    let _lockdep = lockdep_off();
    let l = lock(queue_at_once());
    let mut w = l.try_write().unwrap();
    *w = 5;
    check_downgrade_grants_readers_not_writers(&l, w, |w| {
        let r = w.downgrade();
        assert_eq!(*r, 5);
        r
    });
}

#[test]
fn downgrade_with_nobody_waiting() {
    let l = lock(Policy::new());
    let w = l.try_write().unwrap();
    let r = w.downgrade();
    assert_eq!(l.raw.count_word(), R);
    let r2 = l.try_read().unwrap();
    drop((r, r2));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn max_readers_queues_the_extra_reader_and_grants_it_a_freed_slot() {
    let _lockdep = lockdep_off();
    let l: RwLock<u32> = RwLock::with_policy_and_max_readers(0, queue_at_once(), 2);
    let a = assert_ready!(spawn(l.read()).poll());
    let b = assert_ready!(spawn(l.read()).poll());
    assert!(l.try_read().is_err());
    let mut c = spawn(l.read());
    assert_pending!(c.poll());
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS);
    assert_eq!(l.raw.queue_len(), 1);
    // One reader leaves: the slot goes to the queued one.
    drop(a);
    assert!(c.is_woken());
    assert_eq!(l.raw.count_word(), 2 * R);
    let c = assert_ready!(c.poll());
    drop((b, c));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn max_readers_limits_a_batch_grant() {
    let _lockdep = lockdep_off();
    let l: RwLock<u32> = RwLock::with_policy_and_max_readers(0, queue_at_once(), 3);
    let w = l.try_write().unwrap();
    let mut rs: Vec<_> = (0..5).map(|_| spawn(l.read())).collect();
    for r in &mut rs {
        assert_pending!(r.poll());
    }
    drop(w);
    assert_eq!(rs.iter().filter(|r| r.is_woken()).count(), 3);
    assert_eq!(l.raw.count_word(), (3 * R) | WAITERS);
    let g0 = assert_ready!(rs[0].poll());
    drop(g0);
    assert!(rs[3].is_woken() && !rs[4].is_woken());
    assert_eq!(l.raw.count_word(), (3 * R) | WAITERS);
}

#[test]
#[should_panic(expected = "a RwLock may not be created with 0 readers")]
fn max_readers_zero_is_rejected() {
    let _ = RwLock::with_max_readers(0u8, 0);
}

#[test]
fn reader_overflow_is_a_clear_panic_not_a_wrap() {
    let _lockdep = lockdep_off();
    // Put the reader count one below the guard bit, as if 2^55 - 1 readers were inside
    // (the most the count word holds): the next reader gets in, the one after panics, and
    // the count word is left as it was (no wrap into the flag bits).
    let l = lock(Policy::new());
    let full = (usize::MAX >> 1) & !(R - 1); // every reader bit below the guard
    let top = full - R;
    l.raw.set_count_for_tests(top);
    let last = assert_ready!(spawn(l.read()).poll());
    assert_eq!(l.raw.count_word(), full);
    let l = std::panic::AssertUnwindSafe(&l);
    let panic = std::panic::catch_unwind(|| {
        let _ = spawn(l.read()).poll();
    })
    .unwrap_err();
    let msg = panic.downcast_ref::<&str>().copied().unwrap_or_default();
    assert!(msg.contains("too many readers"), "unexpected panic: {msg}");
    assert_eq!(
        l.raw.count_word(),
        full,
        "the failed reader left its bias behind"
    );
    drop(last);
    assert_eq!(l.raw.count_word(), top);
}

#[test]
fn a_lock_future_dropped_unpolled_after_a_failed_fast_path_gives_the_bias_back() {
    // The typed layer polls the future in the same poll as the fast path, so this drop
    // cannot happen through the API; the future still owns the bias and must not leak it.
    use crate::raw::list::WaiterKind;
    use crate::raw::LockFuture;
    let l = lock(queue_at_once());
    let w = l.try_write().unwrap();
    assert!(!l.raw.read_fast());
    assert_eq!(l.raw.count_word(), W | R);
    // SAFETY: the fast path failed just now.
    drop(unsafe { LockFuture::after_fast_path(&l.raw, WaiterKind::Read) });
    assert_eq!(l.raw.count_word(), W);
    drop(w);
    assert_idle(&l);
}

/// Handoffs on (an hour: never due inside a test), nothing spinning: the rules for
/// readers behind a writer head apply (they need a handoff to bound them).
fn queue_with_handoff() -> Policy {
    queue_at_once().handoff_timeout(Duration::from_secs(3600))
}

#[test]
fn readers_behind_a_writer_head_pass_it_once_and_it_is_next() {
    let _lockdep = lockdep_off();
    let l = lock(queue_with_handoff());
    let w1 = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    // The release grants the reader behind the head writer and gives the writer the
    // handoff (it is due next), without waking it.
    drop(w1);
    assert!(r.is_woken());
    assert!(!w.is_woken());
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    let r = assert_ready!(r.poll());
    // Later readers queue behind the writer.
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    drop(r);
    assert!(w.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS | PENDING);
    drop(assert_ready!(w.poll()));
    assert!(r2.is_woken());
    drop(assert_ready!(r2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn a_reader_joins_readers_past_a_writer_head_in_a_bounded_batch() {
    let _lockdep = lockdep_off();
    let l = lock(queue_with_handoff());
    let r1 = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    // A reader arriving behind the writer, the lock reader-owned: it queues and is granted
    // at once beside `r1`; the writer is due next.
    let r2 = assert_ready!(spawn(l.read()).poll());
    assert!(!w.is_woken());
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS | HANDOFF);
    let mut r3 = spawn(l.read());
    assert_pending!(r3.poll());
    drop((r1, r2));
    assert!(w.is_woken());
    assert_eq!(l.raw.count_word(), W | WAITERS | PENDING);
    drop(assert_ready!(w.poll()));
    drop(assert_ready!(r3.poll()));
    assert_eq!(l.raw.count_word(), 0);

    // At most a few readers pass at once: the rest wait behind the writer, and after it.
    let w1 = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    let mut rs: Vec<_> = (0..6).map(|_| spawn(l.read())).collect();
    for r in &mut rs {
        assert_pending!(r.poll());
    }
    drop(w1);
    // A batch of two readers passes the writer, the first ones in order: both are granted
    // (the count holds both locks), and the release wakes the first alone, which relays
    // the wake-up to the second when it sees its grant.
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS | HANDOFF);
    assert!(rs[0].is_woken());
    assert!(rs[1..].iter().all(|r| !r.is_woken()));
    let g0 = assert_ready!(rs[0].poll());
    assert!(rs[1].is_woken(), "the first reader relays the wake-up");
    assert!(rs[2..].iter().all(|r| !r.is_woken()));
    let g1 = assert_ready!(rs[1].poll());
    drop((g0, g1));
    assert!(w.is_woken());
    assert!(!rs[2].is_woken());
    drop(assert_ready!(w.poll()));
    for r in &mut rs[2..] {
        assert!(r.is_woken());
        drop(assert_ready!(r.poll()));
    }
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn a_reader_between_queued_writers_passes_the_head_writer_and_the_writers_are_not_walked() {
    let _lockdep = lockdep_off();
    let l = lock(queue_with_handoff());
    let w1 = l.try_write().unwrap();
    // Writers, a reader in their middle, writers again: the readers' ring finds the reader
    // without a look at the writers around it.
    let mut ws: Vec<_> = (0..4).map(|_| spawn(l.write())).collect();
    for w in &mut ws[..2] {
        assert_pending!(w.poll());
    }
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    for w in &mut ws[2..] {
        assert_pending!(w.poll());
    }
    drop(w1);
    assert!(r.is_woken(), "the reader passes the head writer once");
    assert!(ws.iter().all(|w| !w.is_woken()));
    assert_eq!(l.raw.count_word(), R | WAITERS | HANDOFF);
    drop(assert_ready!(r.poll()));
    // Then the writers, in their order.
    for (i, w) in ws.iter_mut().enumerate() {
        assert!(w.is_woken(), "writer {i} is next");
        drop(assert_ready!(w.poll()));
    }
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn under_fifo_readers_never_pass_a_writer_head() {
    let _lockdep = lockdep_off();
    let l = lock(Policy::fifo());
    let r1 = l.try_read().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    let mut r2 = spawn(l.read());
    assert_pending!(r2.poll());
    assert!(!w.is_woken());
    drop(r1);
    assert!(w.is_woken());
    assert!(!r2.is_woken());
    drop(assert_ready!(w.poll()));
    drop(assert_ready!(r2.poll()));
    assert_eq!(l.raw.count_word(), 0);
}
