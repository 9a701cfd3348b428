//! Observer hooks that run while the thread is already unwinding: a guard, an upgrade in
//! flight or a pending acquire dropped by a panic. A `tracing` subscriber that panics in
//! such a hook (on the "held too long" or "waiting too long" warning of `lock_stat`, on
//! `contention_end`) must not turn the first panic into "panic in a destructor during
//! cleanup", which aborts the process: the first panic unwinds on, the lock is released,
//! and the event is lost.
//!
//! An abort kills the whole test binary, so each scenario runs in a child process
//! (`support::in_child`): the parent asserts that the child exited normally and that its
//! test passed. Lockdep (with `--all-features`) is not what these tests look at: mock
//! tasks on one thread are one holder to it, so each child turns its reports off.
#![cfg(feature = "tracing")]

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

mod support;
use support::{assert_idle, in_child, lockdep_off};

/// Records the message of every event; panics on the first one whose message is
/// `panic_on` (after recording it).
#[derive(Clone)]
struct PanicOn {
    panic_on: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
    fired: Arc<Mutex<bool>>,
}

struct Message(String);
impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for PanicOn {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        let hit = message.0 == self.panic_on
            && !std::mem::replace(&mut *self.fired.lock().unwrap(), true);
        self.seen.lock().unwrap().push(message.0);
        if hit {
            panic!("the subscriber panics");
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Runs `f` under a subscriber that panics on the event `panic_on`; asserts that `f`
/// panicked with `"inside"` (the first panic, not the subscriber's), and that the event
/// came (the subscriber panicked in it, during the unwind).
fn under_panicking_subscriber(panic_on: &'static str, f: impl FnOnce()) {
    let subscriber = PanicOn {
        panic_on,
        seen: Arc::default(),
        fired: Arc::default(),
    };
    let fired = Arc::clone(&subscriber.fired);
    let result =
        tracing::subscriber::with_default(subscriber, || catch_unwind(AssertUnwindSafe(f)));
    let payload = result.expect_err("the scenario panics");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("inside"),
        "the first panic unwinds on"
    );
    assert!(*fired.lock().unwrap(), "the event {panic_on:?} never came");
}

/// A write guard dropped by a panic inside its section, held past the policy's
/// `warn_held_longer_than`: the warning's subscriber panics during the unwind.
#[cfg(feature = "lock_stat")]
#[test]
fn a_guard_dropped_by_a_panic_survives_a_panicking_held_too_long_warning() {
    use async_rwsem::{Policy, RwLock};
    use std::time::Duration;

    in_child(
        "a_guard_dropped_by_a_panic_survives_a_panicking_held_too_long_warning",
        || {
            lockdep_off();
            let lock = RwLock::with_policy(0, Policy::new().warn_held_longer_than(Duration::ZERO));
            under_panicking_subscriber("held the lock too long", || {
                let mut guard = lock.try_write().unwrap();
                *guard += 1;
                // The hold must last longer than zero on any clock.
                std::thread::sleep(Duration::from_millis(2));
                panic!("inside");
            });
            assert_idle(&lock);
            assert_eq!(*lock.try_read().unwrap(), 1);
        },
    );
}

/// A read guard dropped by a panic while a writer has waited past the policy's
/// `warn_waited_longer_than` behind it and another reader: the release reports the head
/// as waiting too long, and that warning's subscriber panics during the unwind.
#[cfg(feature = "lock_stat")]
#[test]
fn a_guard_dropped_by_a_panic_survives_a_panicking_head_waiting_warning() {
    use async_rwsem::{Policy, RwLock};
    use std::time::Duration;
    use tokio_test::task::spawn;
    use tokio_test::{assert_pending, assert_ready};

    in_child(
        "a_guard_dropped_by_a_panic_survives_a_panicking_head_waiting_warning",
        || {
            lockdep_off();
            let lock = RwLock::with_policy(
                0,
                Policy::new()
                    .writer_spin(Duration::ZERO)
                    .writer_yields(0)
                    .warn_waited_longer_than(Duration::ZERO),
            );
            let first = lock.try_read().unwrap();
            let second = lock.try_read().unwrap();
            let mut writer = spawn(lock.write());
            assert_pending!(writer.poll());
            // The head must have waited longer than zero on any clock.
            std::thread::sleep(Duration::from_millis(2));
            under_panicking_subscriber("waiting too long for the lock", move || {
                let _first = first;
                panic!("inside");
            });
            assert!(!writer.is_woken());
            drop(second);
            assert!(writer.is_woken());
            drop(assert_ready!(writer.poll()));
            drop(writer);
            assert_idle(&lock);
        },
    );
}

/// An upgrade in flight (queued behind another reader) dropped by a panic: it gives the
/// upgradable read lock back, and the release's warning subscriber panics during the
/// unwind.
#[cfg(feature = "lock_stat")]
#[test]
fn an_upgrade_dropped_by_a_panic_survives_a_panicking_warning() {
    use async_rwsem::{Policy, RwLock, RwLockUpgradableReadGuard};
    use std::time::Duration;
    use tokio_test::assert_pending;
    use tokio_test::task::spawn;

    in_child(
        "an_upgrade_dropped_by_a_panic_survives_a_panicking_warning",
        || {
            lockdep_off();
            let lock = RwLock::with_policy(0, Policy::new().warn_held_longer_than(Duration::ZERO));
            let up = lock.try_upgradable_read().unwrap();
            let reader = lock.try_read().unwrap();
            let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
            assert_pending!(upgrade.poll());
            std::thread::sleep(Duration::from_millis(2));
            under_panicking_subscriber("held the lock too long", move || {
                let _upgrade = upgrade;
                panic!("inside");
            });
            drop(reader);
            assert_idle(&lock);
        },
    );
}

/// A pending acquire dropped by a panic (a task that panicked while it waited): its
/// `contention_end` event's subscriber panics during the unwind.
#[test]
fn a_pending_acquire_dropped_by_a_panic_survives_a_panicking_contention_end() {
    use async_rwsem::{Policy, RwLock};
    use std::time::Duration;
    use tokio_test::assert_pending;
    use tokio_test::task::spawn;

    in_child(
        "a_pending_acquire_dropped_by_a_panic_survives_a_panicking_contention_end",
        || {
            lockdep_off();
            let lock = RwLock::with_policy(0, Policy::new().reader_spin(Duration::ZERO));
            let guard = lock.try_write().unwrap();
            under_panicking_subscriber("contention_end", || {
                let mut reader = spawn(lock.read());
                assert_pending!(reader.poll());
                panic!("inside");
            });
            drop(guard);
            assert_idle(&lock);
        },
    );
}
