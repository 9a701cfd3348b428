//! The feature `lockdep`'s reports other than the default panic: `Report::Stderr` and
//! `Report::Off` let the acquire go on, `Report::Tracing` (with the feature `tracing`) is
//! an error event, and a subscriber that panics on it leaves the locks and lockdep as they
//! were. One test, in a binary of its own: the report is process-wide; and a report made
//! while the thread unwinds, which must not panic, in a child process.
#![cfg(feature = "lockdep")]

#[cfg(feature = "tracing")]
use std::fmt;
#[cfg(feature = "tracing")]
use std::panic::{catch_unwind, AssertUnwindSafe};
#[cfg(feature = "tracing")]
use std::sync::{Arc, Mutex};

use async_rwsem::lockdep::{self, Report};
use async_rwsem::RwLock;

mod support;
#[cfg(feature = "tracing")]
use support::assert_idle;

/// Takes `first` then `second` with blocking acquires on this thread.
fn in_order(first: &RwLock<u32>, second: &RwLock<u32>) {
    let _first = first.blocking_read();
    let _second = second.blocking_write();
}

#[test]
fn reports_that_do_not_panic() {
    // Stderr: reported (not checked here: the standard error of a test is captured) and
    // the acquire goes on.
    lockdep::set_report(Report::Stderr);
    assert_eq!(lockdep::report(), Report::Stderr);
    let (a, b) = (
        RwLock::new(0).with_lockdep_class("stderr: a"),
        RwLock::new(0).with_lockdep_class("stderr: b"),
    );
    in_order(&a, &b);
    in_order(&b, &a);
    assert!(lockdep::held().is_empty());

    // Off: nothing checked, the acquires go on, the held set is kept.
    lockdep::set_report(Report::Off);
    let (c, d) = (
        RwLock::new(0).with_lockdep_class("off: c"),
        RwLock::new(0).with_lockdep_class("off: d"),
    );
    in_order(&c, &d);
    {
        let _d = d.blocking_read();
        let _c = c.blocking_read();
        assert_eq!(lockdep::held().len(), 2);
    }
    // The order seen while off is not in the graph: back on, c then d is no cycle.
    lockdep::set_report(Report::Panic);
    in_order(&c, &d);

    #[cfg(feature = "tracing")]
    tracing_reports();
}

/// Collects the lockdep events (target, level, message); panics on the first one if
/// `panic` is set.
#[cfg(feature = "tracing")]
#[derive(Clone, Default)]
struct Collect {
    events: Arc<Mutex<Vec<(String, tracing::Level, String)>>>,
    panic: bool,
}

#[cfg(feature = "tracing")]
struct Message(String);

#[cfg(feature = "tracing")]
impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

#[cfg(feature = "tracing")]
impl tracing::Subscriber for Collect {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let target = event.metadata().target();
        if target != "async_rwsem::lockdep" {
            return; // the contention events
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        self.events
            .lock()
            .unwrap()
            .push((target.to_owned(), *event.metadata().level(), message.0));
        if self.panic {
            panic!("the subscriber panics");
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[cfg(feature = "tracing")]
fn tracing_reports() {
    lockdep::set_report(Report::Tracing);
    let collect = Collect::default();
    let events = Arc::clone(&collect.events);
    let (a, b) = (
        RwLock::new(0).with_lockdep_class("tracing: a"),
        RwLock::new(0).with_lockdep_class("tracing: b"),
    );
    tracing::subscriber::with_default(collect, || {
        in_order(&a, &b);
        in_order(&b, &a); // reported, and goes on
        in_order(&b, &a); // once
    });
    {
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1, "{events:?}");
        let (target, level, message) = &events[0];
        assert_eq!(
            (target.as_str(), *level),
            ("async_rwsem::lockdep", tracing::Level::ERROR)
        );
        assert!(
            message.contains(r#"lock order cycle of 2 classes: "tracing: b" -> "tracing: a""#),
            "{message}"
        );
        // The two orders: both are made in `in_order`, called from the lines above.
        assert_eq!(
            message.matches(&format!("{}:", file!())).count(),
            4,
            "{message}"
        );
    }

    // The same cycle made again by new holders (threads, each with the subscriber):
    // still one report.
    let collect = Collect::default();
    let (e, f) = (
        RwLock::new(0).with_lockdep_class("tracing once: e"),
        RwLock::new(0).with_lockdep_class("tracing once: f"),
    );
    for (first, second) in [(&e, &f), (&f, &e), (&e, &f), (&f, &e), (&e, &f)] {
        let collect = collect.clone();
        std::thread::scope(|scope| {
            scope.spawn(|| tracing::subscriber::with_default(collect, || in_order(first, second)));
        });
    }
    let events = collect.events.lock().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    drop(events);

    // A subscriber that panics on the report: the acquire unwinds before it touches the
    // lock, with lockdep's mutex free; the lock held before is released by the unwind.
    let collect = Collect {
        panic: true,
        ..Collect::default()
    };
    let (c, d) = (
        RwLock::new(0).with_lockdep_class("tracing panic: c"),
        RwLock::new(0).with_lockdep_class("tracing panic: d"),
    );
    in_order(&c, &d);
    let unwound = tracing::subscriber::with_default(collect.clone(), || {
        catch_unwind(AssertUnwindSafe(|| in_order(&d, &c)))
    });
    assert!(unwound.is_err());
    assert_eq!(collect.events.lock().unwrap().len(), 1);
    assert!(lockdep::held().is_empty());
    assert_idle(&c);
    assert_idle(&d);
    in_order(&c, &d);
    lockdep::set_report(Report::Panic);
}

/// Takes `lock` for reading when dropped: an acquire in a `Drop`.
struct ReadOnDrop<'a>(&'a RwLock<u32>);

impl Drop for ReadOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.blocking_read();
    }
}

/// A report made while the thread unwinds (an acquire in a `Drop` run by a panic) does
/// not panic: a second panic would abort the process. It goes to standard error, and the
/// first panic unwinds on. In a child process, where the report is the default panic.
#[test]
fn a_report_during_an_unwind_goes_to_stderr_instead_of_aborting() {
    let stderr = support::in_child(
        "a_report_during_an_unwind_goes_to_stderr_instead_of_aborting",
        || {
            lockdep::set_report(Report::Panic);
            let (a, b) = (
                RwLock::new(0).with_lockdep_class("unwind: a"),
                RwLock::new(0).with_lockdep_class("unwind: b"),
            );
            in_order(&a, &b);
            let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _b = b.blocking_read();
                // Dropped first, with `b` held: takes `a` after `b`, the other order.
                let _a_on_drop = ReadOnDrop(&a);
                panic!("inside");
            }));
            let payload = unwound.expect_err("the scenario panics");
            assert_eq!(payload.downcast_ref::<&str>().copied(), Some("inside"));
            assert!(lockdep::held().is_empty());
            assert!(a.try_write().is_ok() && b.try_write().is_ok());
        },
    );
    // The parent (the child's stderr is empty in the child itself).
    if std::env::var("ASYNC_RWSEM_TEST_CHILD").is_err() {
        assert!(
            stderr.contains("lock order cycle") && stderr.contains("already panicking"),
            "no report on the child's standard error:\n{stderr}"
        );
    }
}

/// Each report is made once under `Report::Stderr` too: the same cycle made again by new
/// threads is not reported again. In a child process, whose standard error the parent
/// reads.
#[test]
fn a_cycle_is_reported_once_on_stderr_whatever_holders_make_it_again() {
    let stderr = support::in_child(
        "a_cycle_is_reported_once_on_stderr_whatever_holders_make_it_again",
        || {
            lockdep::set_report(Report::Stderr);
            let (a, b) = (
                RwLock::new(0).with_lockdep_class("stderr once: a"),
                RwLock::new(0).with_lockdep_class("stderr once: b"),
            );
            for (first, second) in [(&a, &b), (&b, &a), (&a, &b), (&b, &a), (&a, &b)] {
                std::thread::scope(|scope| {
                    scope.spawn(|| in_order(first, second));
                });
            }
        },
    );
    if std::env::var("ASYNC_RWSEM_TEST_CHILD").is_err() {
        assert_eq!(
            stderr.matches("lock order cycle of 2 classes").count(),
            1,
            "{stderr}"
        );
    }
}

/// A `tracing` subscriber that panics on a deadlock's report, made on lockdep's watchdog
/// thread, does not kill the watchdog: the next deadlock of a future is reported too. In a
/// child process: the subscriber is the global one (the watchdog's thread sees no other).
#[cfg(feature = "tracing")]
#[test]
fn a_subscriber_panicking_on_the_watchdogs_thread_does_not_stop_it() {
    use std::sync::atomic::Ordering::SeqCst;
    use std::task::Poll;
    use std::time::{Duration, Instant};
    use support::probe::{poll_with, probe_waker, Probe};

    /// A future's read of the lock it writes: a deadlock, watched; returns once the
    /// watchdog has woken it, with the result of the poll that follows.
    fn deadlock(name: &'static str) -> Result<(), String> {
        let l = RwLock::new(0).with_lockdep_class(name);
        let probe = Probe::new();
        let waker = probe_waker(&probe);
        let mut write = std::pin::pin!(l.write());
        let Poll::Ready(guard) = poll_with(write.as_mut(), &waker) else {
            panic!("an idle lock");
        };
        let mut read = std::pin::pin!(l.read());
        assert!(poll_with(read.as_mut(), &waker).is_pending());
        let start = Instant::now();
        while probe.wakes() == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{name}: the watchdog never woke the waiting read"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let polled = catch_unwind(AssertUnwindSafe(|| {
            let _ = poll_with(read.as_mut(), &waker);
        }));
        drop(guard);
        polled.map_err(|payload| *payload.downcast::<String>().unwrap())
    }

    support::in_child(
        "a_subscriber_panicking_on_the_watchdogs_thread_does_not_stop_it",
        || {
            let collect = Collect {
                panic: true,
                ..Collect::default()
            };
            tracing::subscriber::set_global_default(collect.clone()).unwrap();
            lockdep::set_deadlock_timeout(Duration::from_millis(100));
            // Reported through the subscriber, on the watchdog's thread, which panics.
            lockdep::set_report(Report::Tracing);
            let l = RwLock::new(0).with_lockdep_class("watchdog: tracing");
            let probe = Probe::new();
            let waker = probe_waker(&probe);
            let mut write = std::pin::pin!(l.write());
            let Poll::Ready(guard) = poll_with(write.as_mut(), &waker) else {
                panic!("an idle lock");
            };
            {
                let mut read = std::pin::pin!(l.read());
                assert!(poll_with(read.as_mut(), &waker).is_pending());
                let start = Instant::now();
                while collect.events.lock().unwrap().is_empty() {
                    assert!(start.elapsed() < Duration::from_secs(20), "never reported");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            drop(guard);
            assert_eq!(probe.wakes.load(SeqCst), 0);
            // The watchdog lives on: the next deadlock is reported (a panic now).
            lockdep::set_report(Report::Panic);
            let report = deadlock("watchdog: after the subscriber's panic").unwrap_err();
            assert!(
                report.contains("deadlock: recursive acquire of one lock"),
                "{report}"
            );
        },
    );
}
