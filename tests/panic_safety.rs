//! Panic safety: foreign code that the lock runs (a waker's `clone`, `wake` and `drop`,
//! the protected value's `Drop`, the closures of `map`) may panic. After the panic is
//! caught, no guard may exist beside a conflicting one, no reader bias or flag may be left
//! in the count word, every waiter that was granted the lock must have been woken (or,
//! the second of two readers granted together, have its wake-up relayed to the first
//! one's future, which makes it when it is polled or dropped), and the lock must be usable
//! and idle at the end. CI also runs this file under valgrind,
//! which catches a node left linked in freed memory, and under Miri.
//!
//! # Every call site of foreign code, with the lock's state there
//!
//! The rule: foreign code never runs under the wait lock, and runs only where an unwind
//! leaves every lock with exactly one owner that will release it (a guard, a lock token, a
//! lock future's phase or node, a reader's bias as a `ReaderBias`, `src/raw/read.rs`) and no node linked in memory
//! about to be freed. Each site, what is held when it runs, and its test (in this file
//! unless named; `raw::tests::panics` is `src/raw/tests/panics.rs`, for the instants a
//! single-threaded test cannot reach through the API, between the two halves of a
//! release):
//!
//! | site | foreign code | state of the lock there | test |
//! |---|---|---|---|
//! | a reader's slow path, before it queues | `Waker::clone` | its bias in the count, owned by a local `ReaderBias`: the unwind gives it back; the future is left in `Init` (holds nothing) | `reader_queueing_with_a_panicking_clone_leaves_no_bias`; `raw::tests::panics::a_reader_repolled_after_a_panicking_clone_starts_over` |
//! | a writer queueing (after its spin and yields) | `Waker::clone` | nothing held, not queued | `writer_queueing_with_a_panicking_clone_leaves_nothing_queued` |
//! | an upgradable reader queueing | `Waker::clone` | nothing held, not queued | `upgradable_reader_queueing_with_a_panicking_clone_leaves_nothing_queued`; `raw::tests::panics::an_upgradable_reader_repolled_after_a_panicking_clone_starts_over` |
//! | an upgrade queueing | `Waker::clone` | the upgradable read lock, owned by the future in `Init` (its drop releases it) | `upgrade_repolled_after_a_panicking_clone_still_waits_for_the_readers`, `upgrade_dropped_after_a_panicking_clone_releases_the_lock` |
//! | a queued future polled again (`poll_queued`) | `Waker::clone` of the new waker, `Waker::drop` of the old one | both after the wait lock is released; the node linked with a valid waker, or granted | `repoll_with_a_new_panicking_waker_keeps_the_node_consistent`, `queued_writer_repolled_with_a_panicking_waker_can_still_be_cancelled`, `a_panicking_drop_of_a_replaced_waker_leaves_the_node_queued` |
//! | a writer yielding | `Waker::wake_by_ref` (its own) | nothing held, not queued | `a_panicking_self_wake_of_a_yielding_writer_holds_nothing` |
//! | every release (`unlock_*`, `unlock_fair`, a granted future dropped) that wakes | `Waker::wake` of the granted or woken waiters | the lock released; every granted node unlinked and marked before the first wake; the other wakers still called | `a_panicking_wake_does_not_keep_the_other_granted_readers_asleep`, `a_panicking_wake_of_a_writer_leaves_it_able_to_take_the_lock`, `a_panicking_wake_of_a_writer_granted_at_a_release_leaves_it_owning_the_lock` (the grant sets `OWNER_PENDING`; the writer owns the lock whether it is polled again or dropped), `a_panicking_wake_of_an_upgrade_leaves_it_granted` |
//! | every downgrade (`downgrade`, `downgrade_to_upgradable`, `downgrade_map`, `try_downgrade_map`, borrowed and owned; the upgradable guards' `downgrade`) | `Waker::wake` of the readers it grants | the new mode's token exists (the old one consumed): the unwind releases the new mode once | `a_panicking_wake_in_*downgrade*` (ten tests) |
//! | a reader that steals the lock with waiters queued (slow path, and its spin) | `Waker::wake` of the readers it grants | its read lock still a `ReaderBias`: the unwind gives it back; the future in `Init` | `raw::tests::panics::a_panicking_wake_in_a_readers_steal_gives_the_stolen_lock_back`, `..._in_a_spinning_readers_steal_...` |
//! | a reader queueing (`read_queue`, its grant of the head) | `Waker::wake` | its bias out of the count; its node `Waiting`, or `Granted` (then its future's drop releases the lock) | `raw::tests::panics::a_panicking_wake_in_a_queueing_readers_grant_leaves_the_lock_to_its_future` |
//! | a writer queueing (`write_queue`, its wake-up of the head) | `Waker::wake` | if it took the lock, its node is `Granted` before the wakers run: its future's drop releases the lock, a poll completes | `raw::tests::panics::a_panicking_wake_in_a_queueing_writers_grant_releases_its_write_lock`, `..._a_queueing_writer_repolled_after_a_panicking_wake_has_the_lock_it_took` |
//! | a granted reader's future, polled or dropped, that holds the wake-up of the reader granted with it (a relay: `wake::relay`) | `Waker::wake` of that reader | polled: before the future completes, its node `Granted` (the unwind drops the lock future, which releases the lock); dropped: after its lock is released, a panic during an unwind caught | `raw::tests::panics::a_panicking_relayed_wake_leaves_the_first_readers_lock_to_its_future`, `raw::tests::panics::a_granted_reader_dropped_in_an_unwind_relays_a_panicking_wake_without_aborting` |
//! | a cancelled acquire (`cancel`) | `Waker::drop` of its own waker; `Waker::wake` of the next head it grants | its node unlinked and `Idle` first | `a_panicking_waker_drop_in_a_cancel_still_wakes_the_readers_it_granted` |
//! | a timed upgrade stopped at its deadline (`stop_upgrade`: `upgrade_timeout`, `try_upgrade_for`, `try_upgrade_until`) | `Waker::drop` of its own waker; `Waker::wake` of the readers it lets in | its node unlinked and `Idle` first, the future back in `Init` (it owns the upgradable read lock): the unwind releases that lock, and the guard is lost; then (feature `tracing`) its `contention_end` event, with the lock it ended with held by a `ReleaseOnUnwind` | `a_panicking_waker_drop_in_a_stopped_upgrade_releases_the_upgradable_lock`, `a_panicking_wake_in_a_stopped_upgrade_still_lets_the_readers_in`; `tests/tracing.rs`: `a_stopped_upgrade_ends_its_wait_and_a_panicking_subscriber_releases_the_lock` |
//! | inside a section | `T::drop` (an assignment), any user code | the guard owns the lock: the unwind releases it | `a_panicking_drop_of_the_value_inside_a_write_section_releases_the_lock`, `a_panic_inside_a_section_that_awaits_releases_the_lock` |
//! | an owned guard dropped with the last `Arc` | `T::drop` | the token releases the lock before the `Arc` (its field) is dropped | `a_panicking_drop_of_the_last_arc_after_an_owned_guard` |
//! | `map`, `try_map`, `downgrade_map`, `try_downgrade_map` (every guard kind) | the closure | the guard (its token) still owns the lock, in the old mode: the unwind releases it | `panicking_map_closures_release_the_lock` |
//! | a wait begins, ends or is given up (feature `tracing`) | the `tracing` subscriber | begin: the node linked, the future's drop unlinks it; end: the lock owned, a `ReleaseOnUnwind` releases it until the guard exists; given up: the node already unlinked | `tests/tracing.rs`: `a_subscriber_panicking_when_an_acquire_starts_to_wait`, `..._after_an_acquire_releases_the_lock`, `..._in_a_cancelled_acquire_leaves_no_node_linked` |
//! | a lock-order or recursion report (feature `lockdep`) | the report: a panic (the default), or a `tracing` subscriber | at the start of the acquire, before the lock is touched, lockdep's mutex released; an upgrade's at its first poll, its upgradable read lock owned by the upgrade future (whose drop releases it) | `tests/lockdep.rs` (every report test checks the locks idle after it; `a_report_panics_outside_every_lock`), `tests/lockdep_report.rs` (a panicking subscriber) |
//! | a deadlock's report on lockdep's watchdog thread (feature `lockdep`) | the waiting future's `Waker::wake` and `drop`, a `tracing` subscriber | nothing of the lock: the waker is taken from the watch, not cloned; each panic is caught on the watchdog's thread, which goes on | `tests/lockdep_tasks.rs`: `a_waker_whose_clone_panics_cannot_kill_the_watchdog`, `a_waker_that_panics_when_the_watchdog_wakes_it_still_gets_its_report`; `tests/lockdep_report.rs`: `a_subscriber_panicking_on_the_watchdogs_thread_does_not_stop_it` |
//! | the observers of a release (features `lockdep`, `lock_stat`) after a wake-up that panicked | `lock_stat`'s "held too long" warning (a `tracing` subscriber, caught during the unwind); the drop of a waker clone lockdep kept (caught) | run by a drop guard made before the raw release, so the unwind of a panicking wake-up runs them, the lock released | `tests/lockdep.rs`: `a_release_whose_wake_up_panics_takes_the_lock_off_the_held_set`; `tests/lock_stat.rs`: `a_release_whose_wake_up_panics_still_counts_the_hold` |
//! | a guard dropped past `warn_held_longer_than`, a release with the head waiting past `warn_waited_longer_than` (features `lock_stat` + `tracing`) | the `tracing` subscriber | the lock released (the token's `Drop`, after the raw release; the head's wait read under the wait lock, reported after it is released) | `tests/lock_stat.rs`: `a_subscriber_panicking_on_held_too_long_leaves_the_lock_free`, `..._on_a_waiter_at_the_release_leaves_it_the_lock` |
//! | an acquire (or upgrade) granted past `warn_waited_longer_than` (features `lock_stat` + `tracing`) | the `tracing` subscriber | the guard's token exists (`observe::entered`, `changed`): the unwind releases the lock | `tests/lock_stat.rs`: `a_subscriber_panicking_on_a_waiter_at_its_grant_releases_the_lock` |
//! | an async acquire completes (feature `tokio`) | tokio's cooperative budget (`coop::poll_proceed`) | the guard exists already: a `Pending` there holds the guard in the future, a panic drops it | `tests/coop.rs`: `every_async_acquire_takes_budget`, `a_task_reading_in_a_loop_lets_its_neighbour_write` |
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use async_rwsem::{OwnedRwLockWriteGuard, Policy, RwLock, RwLockUpgradableReadGuard};

mod support;
use support::probe::{poll_panics, poll_with, probe_waker, Probe};
use support::{assert_idle, panics};

/// Writers queue at once (no spin, no yield) and no handoff: every test is deterministic.
fn queue_at_once() -> Policy {
    Policy::new()
        .writer_spin(Duration::ZERO)
        .writer_yields(0)
        .handoff_timeout(Duration::MAX)
}

fn lock() -> RwLock<u32> {
    RwLock::with_policy(0, queue_at_once())
}

// ---------------------------------------------------------------------------------------
// `Waker::clone` panics where an acquire queues.

#[test]
fn reader_queueing_with_a_panicking_clone_leaves_no_bias() {
    let l = lock();
    let probe = Probe::new();
    probe.panic_clone.store(true, SeqCst);
    let waker = probe_waker(&probe);
    let w = l.try_write().unwrap();
    {
        let read = pin!(l.read());
        poll_panics(read, &waker);
        assert!(l.try_read().is_err(), "a reader got in beside the writer");
    }
    drop(w);
    // A bias left in the count would keep every writer out from now on.
    assert_idle(&l);
    drop(waker);
    assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
}

#[test]
fn writer_queueing_with_a_panicking_clone_leaves_nothing_queued() {
    let l = lock();
    let probe = Probe::new();
    probe.panic_clone.store(true, SeqCst);
    let waker = probe_waker(&probe);
    let r = l.try_read().unwrap();
    {
        let write = pin!(l.write());
        poll_panics(write, &waker);
        assert!(l.try_write().is_err());
    }
    // No `WAITERS` left behind: a new reader still takes the fast path.
    let r2 = l.try_read().unwrap();
    drop((r, r2));
    assert_idle(&l);
    drop(waker);
    assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
}

#[test]
fn upgradable_reader_queueing_with_a_panicking_clone_leaves_nothing_queued() {
    let l = lock();
    let probe = Probe::new();
    probe.panic_clone.store(true, SeqCst);
    let waker = probe_waker(&probe);
    let up = l.try_upgradable_read().unwrap();
    {
        let second = pin!(l.upgradable_read());
        poll_panics(second, &waker);
    }
    let r = l.try_read().unwrap();
    drop((up, r));
    assert_idle(&l);
    drop(waker);
    assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
}

#[test]
fn upgrade_repolled_after_a_panicking_clone_still_waits_for_the_readers() {
    support::lockdep_off();
    let l = lock();
    let probe = Probe::new();
    let waker = probe_waker(&probe);
    let up = l.try_upgradable_read().unwrap();
    let r = l.try_read().unwrap();
    let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
    probe.panic_clone.store(true, SeqCst);
    poll_panics(upgrade.as_mut(), &waker);
    probe.panic_clone.store(false, SeqCst);
    // The reader `r` is still inside: the upgrade must wait, not hand out `&mut` beside
    // `&`.
    assert!(poll_with(upgrade.as_mut(), &waker).is_pending());
    assert_eq!(*r, 0);
    drop(r);
    assert_eq!(
        probe.wakes(),
        1,
        "the last reader out must wake the upgrade"
    );
    let Poll::Ready(mut w) = poll_with(upgrade.as_mut(), &waker) else {
        panic!("the upgrade was granted and woken, yet is not ready");
    };
    *w = 1;
    assert!(l.try_read().is_err());
    drop(w);
    assert_idle(&l);
    assert_eq!(*l.try_read().unwrap(), 1);
}

#[test]
fn upgrade_dropped_after_a_panicking_clone_releases_the_lock() {
    support::lockdep_off();
    let l = lock();
    let probe = Probe::new();
    probe.panic_clone.store(true, SeqCst);
    let waker = probe_waker(&probe);
    let up = l.try_upgradable_read().unwrap();
    let r = l.try_read().unwrap();
    {
        let upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
        poll_panics(upgrade, &waker);
    }
    drop(r);
    assert_idle(&l);
}

#[test]
fn repoll_with_a_new_panicking_waker_keeps_the_node_consistent() {
    support::lockdep_off();
    // A queued upgrade (a future that may be polled again after a panic) is re-polled by
    // a task whose waker panics when cloned; then by a sound one.
    let l = lock();
    let first = Probe::new();
    let bad = Probe::new();
    bad.panic_clone.store(true, SeqCst);
    let up = l.try_upgradable_read().unwrap();
    let r = l.try_read().unwrap();
    let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
    assert!(poll_with(upgrade.as_mut(), &probe_waker(&first)).is_pending());
    poll_panics(upgrade.as_mut(), &probe_waker(&bad));
    assert!(poll_with(upgrade.as_mut(), &probe_waker(&first)).is_pending());
    drop(r);
    assert_eq!(first.wakes(), 1);
    assert!(poll_with(upgrade.as_mut(), &probe_waker(&first)).is_ready());
    assert_idle(&l);
    assert_eq!(Arc::strong_count(&first), 1, "a waker was leaked");
    assert_eq!(Arc::strong_count(&bad), 1, "a waker was leaked");
}

#[test]
fn queued_writer_repolled_with_a_panicking_waker_can_still_be_cancelled() {
    support::lockdep_off();
    let l = lock();
    let good = Probe::new();
    let bad = Probe::new();
    bad.panic_clone.store(true, SeqCst);
    let r = l.try_read().unwrap();
    {
        let mut write = pin!(l.write());
        assert!(poll_with(write.as_mut(), &probe_waker(&good)).is_pending());
        poll_panics(write, &probe_waker(&bad));
    }
    drop(r);
    assert_idle(&l);
    assert_eq!(Arc::strong_count(&good), 1, "the queued waker was leaked");
}

// ---------------------------------------------------------------------------------------
// `Waker::wake` panics where the lock wakes its waiters.

#[test]
fn a_panicking_wake_does_not_keep_the_other_granted_readers_asleep() {
    support::lockdep_off();
    let l = lock();
    let probes = [Probe::new(), Probe::new(), Probe::new()];
    let w = l.try_write().unwrap();
    let mut r0 = pin!(l.read());
    let mut r1 = pin!(l.read());
    let mut r2 = pin!(l.read());
    assert!(poll_with(r0.as_mut(), &probe_waker(&probes[0])).is_pending());
    assert!(poll_with(r1.as_mut(), &probe_waker(&probes[1])).is_pending());
    assert!(poll_with(r2.as_mut(), &probe_waker(&probes[2])).is_pending());
    probes[1].panic_wake.store(true, SeqCst);
    // The release grants all three readers, then wakes them; one wake panics.
    panics(|| drop(w));
    for (i, probe) in probes.iter().enumerate() {
        assert_eq!(probe.wakes(), 1, "granted reader {i} was not woken");
    }
    probes[1].panic_wake.store(false, SeqCst);
    assert!(l.try_write().is_err());
    let g0 = match poll_with(r0, &probe_waker(&probes[0])) {
        Poll::Ready(g) => g,
        Poll::Pending => panic!("reader 0 not granted"),
    };
    let g1 = match poll_with(r1, &probe_waker(&probes[1])) {
        Poll::Ready(g) => g,
        Poll::Pending => panic!("reader 1 not granted"),
    };
    let g2 = match poll_with(r2, &probe_waker(&probes[2])) {
        Poll::Ready(g) => g,
        Poll::Pending => panic!("reader 2 not granted"),
    };
    assert!(l.try_write().is_err());
    drop((g0, g1, g2));
    assert_idle(&l);
    for probe in &probes {
        assert_eq!(Arc::strong_count(probe), 1, "a waker was leaked");
    }
}

#[test]
fn a_panicking_wake_of_a_writer_leaves_it_able_to_take_the_lock() {
    support::lockdep_off();
    let l = lock();
    let probe = Probe::new();
    let r = l.try_read().unwrap();
    let mut write = pin!(l.write());
    assert!(poll_with(write.as_mut(), &probe_waker(&probe)).is_pending());
    probe.panic_wake.store(true, SeqCst);
    panics(|| drop(r));
    assert_eq!(probe.wakes(), 1);
    probe.panic_wake.store(false, SeqCst);
    let Poll::Ready(mut w) = poll_with(write, &probe_waker(&probe)) else {
        panic!("the woken writer could not take the free lock");
    };
    *w += 1;
    assert!(l.try_read().is_err());
    drop(w);
    assert_idle(&l);
    assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
}

/// With the handoff due at once, a release hands the write lock to the queued head writer
/// (`OWNER_PENDING`: granted, not yet polled) before waking it. A panicking wake leaves it
/// owning the lock: the next poll completes, and a drop instead releases it.
#[test]
fn a_panicking_wake_of_a_writer_granted_at_a_release_leaves_it_owning_the_lock() {
    support::lockdep_off();
    for repoll in [true, false] {
        let l = RwLock::with_policy(0u32, queue_at_once().handoff_timeout(Duration::ZERO));
        let probe = Probe::new();
        let held = l.try_write().unwrap();
        let mut write = Box::pin(l.write());
        assert!(poll_with(write.as_mut(), &probe_waker(&probe)).is_pending());
        probe.panic_wake.store(true, SeqCst);
        panics(|| drop(held));
        assert_eq!(probe.wakes(), 1);
        probe.panic_wake.store(false, SeqCst);
        assert!(l.try_read().is_err(), "the grant was lost");
        if repoll {
            let Poll::Ready(mut w) = poll_with(write.as_mut(), &probe_waker(&probe)) else {
                panic!("the granted writer did not complete");
            };
            *w += 1;
            drop(w);
        }
        drop(write);
        assert_idle(&l);
        assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
    }
}

#[test]
fn a_panicking_wake_of_an_upgrade_leaves_it_granted() {
    support::lockdep_off();
    let l = lock();
    let probe = Probe::new();
    let up = l.try_upgradable_read().unwrap();
    let r = l.try_read().unwrap();
    let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
    assert!(poll_with(upgrade.as_mut(), &probe_waker(&probe)).is_pending());
    probe.panic_wake.store(true, SeqCst);
    panics(|| drop(r));
    assert_eq!(probe.wakes(), 1);
    assert!(
        l.try_read().is_err(),
        "the upgrade holds the write lock now"
    );
    assert!(poll_with(upgrade, &probe_waker(&probe)).is_ready());
    assert_idle(&l);
}

#[test]
fn a_panicking_self_wake_of_a_yielding_writer_holds_nothing() {
    support::lockdep_off();
    let l = RwLock::with_policy(
        0,
        Policy::new().writer_spin(Duration::ZERO).writer_yields(2),
    );
    let probe = Probe::new();
    probe.panic_wake.store(true, SeqCst);
    // A writer holds the lock (with readers inside, a writer queues without yielding).
    let w = l.try_write().unwrap();
    {
        let write = pin!(l.write());
        poll_panics(write, &probe_waker(&probe));
    }
    assert_eq!(probe.wakes(), 1);
    drop(w);
    let r = l.try_read().unwrap();
    drop(r);
    assert_idle(&l);
}

#[test]
fn a_panicking_waker_drop_in_a_cancel_still_wakes_the_readers_it_granted() {
    support::lockdep_off();
    // Readers share the lock; a writer queues, then two readers queue behind it. The
    // writer's future is dropped: the cancel grants the two readers (the new head) and
    // drops the writer's waker, which panics. The readers must still be woken.
    let l = lock();
    let doomed = Probe::new();
    let readers = [Probe::new(), Probe::new()];
    let r = l.try_read().unwrap();
    let mut w = Box::pin(l.write());
    let mut r1 = pin!(l.read());
    let mut r2 = pin!(l.read());
    assert!(poll_with(w.as_mut(), &probe_waker(&doomed)).is_pending());
    assert!(poll_with(r1.as_mut(), &probe_waker(&readers[0])).is_pending());
    assert!(poll_with(r2.as_mut(), &probe_waker(&readers[1])).is_pending());
    doomed.panic_drop.store(true, SeqCst);
    panics(|| drop(w));
    doomed.panic_drop.store(false, SeqCst);
    // The first is woken; the second's wake-up is relayed to the first's future, which
    // makes it when it sees its grant.
    assert_eq!(readers[0].wakes(), 1, "granted reader 0 was not woken");
    assert_eq!(
        readers[1].wakes(),
        0,
        "granted reader 1 was woken before the relay"
    );
    let Poll::Ready(g1) = poll_with(r1, &probe_waker(&readers[0])) else {
        panic!("reader 1 not granted");
    };
    assert_eq!(readers[1].wakes(), 1, "granted reader 1 was not woken");
    let Poll::Ready(g2) = poll_with(r2, &probe_waker(&readers[1])) else {
        panic!("reader 2 not granted");
    };
    assert!(l.try_write().is_err());
    drop((r, g1, g2));
    assert_idle(&l);
}

// ---------------------------------------------------------------------------------------
// A timed upgrade stopped at its deadline (feature `tokio`, in tokio's paused time).

#[cfg(feature = "tokio")]
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[cfg(feature = "tokio")]
const DEADLINE: Duration = Duration::from_millis(5);

#[cfg(feature = "tokio")]
#[test]
fn a_panicking_waker_drop_in_a_stopped_upgrade_releases_the_upgradable_lock() {
    support::lockdep_off();
    let probe = Probe::new();
    paused_runtime().block_on(async {
        let l = lock();
        let r = l.try_read().unwrap();
        let up = l.try_upgradable_read().unwrap();
        let waker = probe_waker(&probe);
        let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade_timeout(up, DEADLINE));
        assert!(poll_with(upgrade.as_mut(), &waker).is_pending());
        tokio::time::advance(DEADLINE).await;
        // The time is up: the stop drops the queued node's copy of the waker first (the
        // timer's copy goes with the future, after it).
        probe.panic_drop_once.store(true, SeqCst);
        poll_panics(upgrade.as_mut(), &waker);
        assert!(!probe.panic_drop_once.load(SeqCst), "no waker was dropped");
        drop(waker);
        // The guard is lost with the unwind, and its lock released: another upgradable
        // reader gets in beside `r`.
        drop(
            l.try_upgradable_read()
                .expect("the upgradable read lock was leaked"),
        );
        drop(r);
        assert_idle(&l);
    });
    assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
}

#[cfg(feature = "tokio")]
#[test]
fn a_panicking_wake_in_a_stopped_upgrade_still_lets_the_readers_in() {
    support::lockdep_off();
    let (own, bad) = (Probe::new(), Probe::new());
    paused_runtime().block_on(async {
        let l = lock();
        let r = l.try_read().unwrap();
        let up = l.try_upgradable_read().unwrap();
        let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade_timeout(up, DEADLINE));
        assert!(poll_with(upgrade.as_mut(), &probe_waker(&own)).is_pending());
        // A reader queues behind the upgrade; its wake-up will panic.
        let mut reader = pin!(l.read());
        assert!(poll_with(reader.as_mut(), &probe_waker(&bad)).is_pending());
        tokio::time::advance(DEADLINE).await;
        bad.panic_wake.store(true, SeqCst);
        poll_panics(upgrade.as_mut(), &probe_waker(&own));
        bad.panic_wake.store(false, SeqCst);
        assert_eq!(bad.wakes(), 1, "the reader let in was not woken");
        let Poll::Ready(g) = poll_with(reader, &probe_waker(&bad)) else {
            panic!("the reader was not let in");
        };
        drop(
            l.try_upgradable_read()
                .expect("the upgradable read lock was leaked"),
        );
        drop((r, g));
        assert_idle(&l);
    });
    assert_eq!(Arc::strong_count(&own), 1, "a waker was leaked");
    assert_eq!(Arc::strong_count(&bad), 1, "a waker was leaked");
}

// ---------------------------------------------------------------------------------------
// The protected value's `Drop` and the `map` closures panic.

/// Panics when dropped while armed.
struct Bomb {
    armed: bool,
    id: u32,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.armed {
            self.armed = false;
            panic!("Bomb {} dropped", self.id);
        }
    }
}

#[test]
fn a_panicking_drop_of_the_value_inside_a_write_section_releases_the_lock() {
    let l = RwLock::new(Bomb { armed: true, id: 1 });
    panics(|| {
        let mut w = l.try_write().unwrap();
        *w = Bomb {
            armed: false,
            id: 2,
        }; // drops the armed one here
    });
    assert_idle(&l);
    assert_eq!(l.try_read().unwrap().id, 2);
}

#[test]
fn a_panicking_drop_of_the_last_arc_after_an_owned_guard() {
    let lock = Arc::new(RwLock::new(Bomb { armed: true, id: 1 }));
    let guard = Arc::clone(&lock).try_write_owned().unwrap();
    drop(lock);
    // The guard holds the last `Arc`: its drop releases the lock, then drops the value,
    // which panics. valgrind checks that nothing is freed twice or leaked.
    panics(|| drop(guard));
}

#[test]
fn panicking_map_closures_release_the_lock() {
    let l = RwLock::new((1, 2));
    panics(|| {
        let _ = async_rwsem::RwLockReadGuard::map(l.try_read().unwrap(), |_| -> &u32 {
            panic!("map closure")
        });
    });
    panics(|| {
        let _ = async_rwsem::RwLockWriteGuard::map(l.try_write().unwrap(), |_| -> &mut u32 {
            panic!("map closure")
        });
    });
    panics(|| {
        let _ = async_rwsem::RwLockWriteGuard::downgrade_map(l.try_write().unwrap(), |_| -> &u32 {
            panic!("map closure")
        });
    });
    let lock = Arc::new(RwLock::new((1, 2)));
    panics(|| {
        let _ = OwnedRwLockWriteGuard::map(
            Arc::clone(&lock).try_write_owned().unwrap(),
            |_| -> &mut u32 { panic!("map closure") },
        );
    });
    assert_idle(&l);
    assert_idle(&lock);
}

#[test]
fn a_panic_inside_a_section_that_awaits_releases_the_lock() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let l = Arc::new(lock());
    let l2 = Arc::clone(&l);
    let task = rt.spawn(async move {
        let _w = l2.write().await;
        tokio::task::yield_now().await;
        panic!("section panics");
    });
    assert!(rt.block_on(task).unwrap_err().is_panic());
    assert_idle(&l);
}

// ---------------------------------------------------------------------------------------
// `Waker::wake` panics in a downgrade: the downgrade grants the queued readers (or the
// queued upgradable reader) and wakes them. The lock must have changed hands, from the
// old mode's guard to the new one's, before the wakers run: the unwind then drops the new
// guard, which releases the new mode once. (Before, it dropped the old one: a downgraded
// write lock was write-unlocked, or `UPGRADABLE` taken twice.)

type Pair = Arc<RwLock<(u32, u32)>>;

fn pair() -> Pair {
    Arc::new(RwLock::with_policy((1, 2), queue_at_once()))
}

/// `hold` takes the lock (a write lock, or the upgradable read lock); then `waiter`'s
/// acquire queues behind it with a waker whose wake panics; `downgrade` downgrades the
/// guard and drops the result (the waiter is an owned acquire, so that its future does not
/// borrow the lock). The downgrade grants the waiter and panics with its wake:
/// afterwards the waiter holds its lock, the downgraded lock is released exactly once, and
/// the lock ends idle.
fn downgrade_with_a_panicking_wake<'a, G, W: Future>(
    l: &'a Pair,
    hold: impl FnOnce(&'a Pair) -> G,
    waiter: impl FnOnce(&'a Pair) -> W,
    downgrade: impl FnOnce(G),
    check_granted: impl FnOnce(&'a Pair, W::Output),
) {
    let probe = Probe::new();
    let guard = hold(l);
    let mut waiting = Box::pin(waiter(l));
    assert!(poll_with(waiting.as_mut(), &probe_waker(&probe)).is_pending());
    probe.panic_wake.store(true, SeqCst);
    panics(|| downgrade(guard));
    assert_eq!(
        probe.wakes(),
        1,
        "the downgrade granted and woke the waiter"
    );
    probe.panic_wake.store(false, SeqCst);
    let Poll::Ready(granted) = poll_with(waiting.as_mut(), &probe_waker(&probe)) else {
        panic!("the waiter was granted and woken, yet is not ready");
    };
    check_granted(l, granted);
    drop(waiting);
    assert_idle(l);
    assert_eq!(Arc::strong_count(l), 1, "an owned guard's Arc was leaked");
    assert_eq!(Arc::strong_count(&probe), 1, "a waker was leaked");
}

/// A reader was granted: only readers hold the lock now (the downgraded lock was released
/// with the unwind, and never write-unlocked), and no upgradable bit was left behind.
fn reader_alone(l: &Pair, guard: impl std::ops::Deref<Target = (u32, u32)>) {
    assert_eq!(guard.0, 1);
    assert!(l.try_write().is_err(), "the reader holds the lock");
    let up = l
        .try_upgradable_read()
        .expect("the downgraded upgradable lock was released");
    drop((up, guard));
}

fn queued_reader(l: &Pair) -> impl Future<Output = async_rwsem::OwnedRwLockReadGuard<(u32, u32)>> {
    Arc::clone(l).read_owned()
}

#[test]
fn a_panicking_wake_in_downgrade_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| l.try_write().unwrap(),
        queued_reader,
        |w| drop(w.downgrade()),
        reader_alone,
    );
}

#[test]
fn a_panicking_wake_in_downgrade_to_upgradable_releases_the_upgradable_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| l.try_write().unwrap(),
        queued_reader,
        |w| drop(async_rwsem::RwLockWriteGuard::downgrade_to_upgradable(w)),
        reader_alone,
    );
}

#[test]
fn a_panicking_wake_in_downgrade_map_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| l.try_write().unwrap(),
        queued_reader,
        |w| {
            drop(async_rwsem::RwLockWriteGuard::downgrade_map(w, |pair| {
                &pair.1
            }))
        },
        reader_alone,
    );
}

#[test]
fn a_panicking_wake_in_try_downgrade_map_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| l.try_write().unwrap(),
        queued_reader,
        |w| {
            let r = async_rwsem::RwLockWriteGuard::try_downgrade_map(w, |pair| Some(&pair.1));
            let Ok(r) = r else {
                panic!("the closure returned Some")
            };
            drop(r);
        },
        reader_alone,
    );
}

#[test]
fn a_panicking_wake_in_an_owned_downgrade_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| Arc::clone(l).try_write_owned().unwrap(),
        queued_reader,
        |w| drop(w.downgrade()),
        reader_alone,
    );
}

#[test]
fn a_panicking_wake_in_an_owned_downgrade_to_upgradable_releases_it_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| Arc::clone(l).try_write_owned().unwrap(),
        queued_reader,
        |w| drop(OwnedRwLockWriteGuard::downgrade_to_upgradable(w)),
        reader_alone,
    );
}

#[test]
fn a_panicking_wake_in_an_owned_downgrade_map_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| Arc::clone(l).try_write_owned().unwrap(),
        queued_reader,
        |w| drop(OwnedRwLockWriteGuard::downgrade_map(w, |pair| &pair.1)),
        reader_alone,
    );
}

#[test]
fn a_panicking_wake_in_an_owned_try_downgrade_map_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| Arc::clone(l).try_write_owned().unwrap(),
        queued_reader,
        |w| {
            let r = OwnedRwLockWriteGuard::try_downgrade_map(w, |pair| Some(&pair.1));
            let Ok(r) = r else {
                panic!("the closure returned Some")
            };
            drop(r);
        },
        reader_alone,
    );
}

/// An upgradable reader was granted: it holds the upgradable lock (the old one's
/// `UPGRADABLE` was not taken from it by the unwind), beside no writer.
fn upgradable_alone(l: &Pair, guard: impl std::ops::Deref<Target = (u32, u32)>) {
    assert_eq!(guard.1, 2);
    assert!(
        l.try_upgradable_read().is_err(),
        "a second upgradable reader got in beside the granted one"
    );
    assert!(l.try_write().is_err());
    let r = l.try_read().expect("plain readers share the lock");
    drop((r, guard));
}

#[test]
fn a_panicking_wake_in_an_upgradable_downgrade_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| l.try_upgradable_read().unwrap(),
        |l| Arc::clone(l).upgradable_read_owned(),
        |u| drop(RwLockUpgradableReadGuard::downgrade(u)),
        upgradable_alone,
    );
}

#[test]
fn a_panicking_wake_in_an_owned_upgradable_downgrade_releases_the_read_lock_once() {
    support::lockdep_off();
    downgrade_with_a_panicking_wake(
        &pair(),
        |l| Arc::clone(l).try_upgradable_read_owned().unwrap(),
        |l| Arc::clone(l).upgradable_read_owned(),
        |u| drop(async_rwsem::OwnedRwLockUpgradableReadGuard::downgrade(u)),
        upgradable_alone,
    );
}

#[test]
fn a_panicking_drop_of_a_replaced_waker_leaves_the_node_queued() {
    support::lockdep_off();
    // A queued writer is polled again by a task with another waker: the node takes the
    // new waker, and the old one is dropped after the wait lock is released; that drop
    // panics. The unwind drops the future (an `async fn`), which unlinks the node.
    let l = lock();
    let old = Probe::new();
    let new = Probe::new();
    let r = l.try_read().unwrap();
    {
        let mut write = pin!(l.write());
        assert!(poll_with(write.as_mut(), &probe_waker(&old)).is_pending());
        old.panic_drop.store(true, SeqCst);
        poll_panics(write, &probe_waker(&new));
    }
    assert_eq!(old.wakes(), 0);
    drop(r);
    assert_eq!(new.wakes(), 0, "the cancelled writer is not woken");
    assert_idle(&l);
    assert_eq!(Arc::strong_count(&old), 1, "a waker was leaked");
    assert_eq!(Arc::strong_count(&new), 1, "a waker was leaked");
}
