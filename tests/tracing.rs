//! The `tracing` feature: a `contention_begin` event when an acquire first has to wait, a
//! `contention_end` one (with the wait, and whether the lock was got) when it stops.
#![cfg(feature = "tracing")]

use std::fmt;
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Context;
use std::time::Duration;

use async_rwsem::{Policy, RwLock, RwLockUpgradableReadGuard};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

mod support;
use support::{assert_idle, panics};

/// Collects `message kind=... acquired=...` of every event; panics on the event that
/// `panic_on` names (after recording it), once.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<String>>>, Arc<Mutex<Option<&'static str>>>);

struct Fields(String);
impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.0.insert_str(0, &format!("{value:?}")),
            "acquired" | "kind" => self.0.push_str(&format!(" {}={value:?}", field.name())),
            _ => {}
        }
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push_str(&format!(" {}={value}", field.name()));
    }
}

impl Subscriber for Collect {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        // Under `--cfg tokio_unstable` the lock also emits tokio-console's events
        // (`runtime::...`, tests/console.rs checks them).
        if cfg!(tokio_unstable) && event.metadata().target().starts_with("runtime::") {
            return;
        }
        assert_eq!(event.metadata().target(), "async_rwsem::contention");
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let panic = {
            let mut panic_on = self.1.lock().unwrap();
            let hit = *panic_on == Some(fields.0.as_str());
            if hit {
                *panic_on = None;
            }
            hit
        };
        self.0.lock().unwrap().push(fields.0);
        if panic {
            panic!("the subscriber panics");
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn contention_begin_and_end_around_a_wait() {
    support::lockdep_off();
    let collect = Collect::default();
    let events = Arc::clone(&collect.0);
    tracing::subscriber::with_default(collect, || {
        let l = RwLock::with_policy(
            0,
            Policy::new().writer_spin(Duration::ZERO).writer_yields(0),
        );
        // Uncontended: no event.
        drop(l.try_write().unwrap());
        drop(assert_ready!(spawn(l.read()).poll()));
        assert!(events.lock().unwrap().is_empty());
        // A reader waits behind a writer, then gets the lock.
        let w = l.try_write().unwrap();
        let mut r = spawn(l.read());
        assert_pending!(r.poll());
        assert_pending!(r.poll());
        drop(w);
        drop(assert_ready!(r.poll()));
        // A writer waits and gives up.
        let g = l.try_read().unwrap();
        let mut w2 = spawn(l.write());
        assert_pending!(w2.poll());
        drop(w2);
        drop(g);
    });
    let events = events.lock().unwrap();
    assert_eq!(
        *events,
        [
            "contention_begin kind=Reader",
            "contention_end kind=Reader acquired=true",
            "contention_begin kind=Writer",
            "contention_end kind=Writer acquired=false",
        ]
    );
}

// ---------------------------------------------------------------------------------------
// A subscriber that panics: the lock must be left consistent, whatever event it is.

fn queue_at_once() -> Policy {
    Policy::new()
        .writer_spin(Duration::ZERO)
        .writer_yields(0)
        .handoff_timeout(Duration::MAX)
}

/// Runs `f` under a subscriber that panics on the event `panic_on`.
fn with_panicking_subscriber(panic_on: &'static str, f: impl FnOnce()) {
    let collect = Collect::default();
    *collect.1.lock().unwrap() = Some(panic_on);
    let fired = Arc::clone(&collect.1);
    tracing::subscriber::with_default(collect, f);
    assert!(
        fired.lock().unwrap().is_none(),
        "the event {panic_on:?} never came"
    );
}

#[test]
fn a_subscriber_panicking_in_a_cancelled_acquire_leaves_no_node_linked() {
    support::lockdep_off();
    with_panicking_subscriber("contention_end kind=Reader acquired=false", || {
        let l = RwLock::with_policy(0, queue_at_once());
        let w = l.try_write().unwrap();
        // The future's memory outlives its drop, so that a node left linked in it is seen
        // by the lock (it would be granted) instead of being a use after free.
        let fut = Box::into_raw(Box::new(l.read()));
        // SAFETY: the future is never moved out of its box.
        let pinned = unsafe { Pin::new_unchecked(&mut *fut) };
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        assert!(pinned.poll(&mut cx).is_pending());
        // SAFETY: dropped once, in place; the memory is freed below without a drop.
        panics(|| unsafe { std::ptr::drop_in_place(fut) });
        drop(w);
        assert_idle(&l);
        // SAFETY: the box's value was dropped above; free the memory only.
        drop(unsafe { Box::from_raw(fut.cast::<MaybeUninit<u8>>()) });
    });
}

#[test]
fn a_subscriber_panicking_after_an_acquire_releases_the_lock() {
    support::lockdep_off();
    with_panicking_subscriber("contention_end kind=Writer acquired=true", || {
        let l = RwLock::with_policy(0, queue_at_once());
        let r = l.try_read().unwrap();
        let mut w = spawn(l.write());
        assert_pending!(w.poll());
        drop(r);
        assert!(w.is_woken());
        panics(|| {
            let _ = w.poll();
        });
        drop(w);
        // The lock was got, and the guard never made: it must have been released.
        assert_idle(&l);
    });
}

#[test]
fn a_subscriber_panicking_when_an_acquire_starts_to_wait() {
    support::lockdep_off();
    with_panicking_subscriber("contention_begin kind=Reader", || {
        let l = RwLock::with_policy(0, queue_at_once());
        let w = l.try_write().unwrap();
        let mut r = spawn(l.read());
        panics(|| {
            let _ = r.poll();
        });
        drop(r);
        drop(w);
        assert_idle(&l);
    });
}

/// A timed upgrade that runs out of time: its wait ends unacquired, and the guard comes
/// back; if the subscriber panics there, the upgradable read lock is released.
#[test]
fn a_stopped_upgrade_ends_its_wait_and_a_panicking_subscriber_releases_the_lock() {
    support::lockdep_off();
    let collect = Collect::default();
    let events = Arc::clone(&collect.0);
    tracing::subscriber::with_default(collect, || {
        let l = RwLock::with_policy(0, queue_at_once());
        let r = l.try_read().unwrap();
        let up = l.try_upgradable_read().unwrap();
        let up =
            RwLockUpgradableReadGuard::try_upgrade_for(up, Duration::from_millis(1)).unwrap_err();
        drop((r, up));
        assert_idle(&l);
    });
    assert_eq!(
        *events.lock().unwrap(),
        [
            "contention_begin kind=Upgrader",
            "contention_end kind=Upgrader acquired=false",
        ]
    );
    with_panicking_subscriber("contention_end kind=Upgrader acquired=false", || {
        let l = RwLock::with_policy(0, queue_at_once());
        let r = l.try_read().unwrap();
        let up = l.try_upgradable_read().unwrap();
        panics(|| {
            let _ = RwLockUpgradableReadGuard::try_upgrade_for(up, Duration::from_millis(1));
        });
        // The guard was lost with the unwind, and its lock released.
        drop(
            l.try_upgradable_read()
                .expect("the upgradable read lock was leaked"),
        );
        drop(r);
        assert_idle(&l);
    });
}
