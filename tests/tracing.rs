//! The `tracing` feature: a `contention_begin` event when an acquire first has to wait, a
//! `contention_end` one (with the wait, and whether the lock was got) when it stops.
#![cfg(all(feature = "tracing", not(loom)))]

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_rwsem::{Policy, RwLock};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Collects `message acquired=...` of every event.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<String>>>);

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
        assert_eq!(event.metadata().target(), "async_rwsem::contention");
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn contention_begin_and_end_around_a_wait() {
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
