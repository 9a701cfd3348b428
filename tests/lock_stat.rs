//! The `lock_stat` feature: wait and hold histograms, contentions, the longest hold and
//! where it was taken, the holder in the snapshot; with `tracing` too, the "held too
//! long" and "waited too long" warnings, and a panicking subscriber.
#![cfg(feature = "lock_stat")]

use std::thread::sleep;
use std::time::Duration;

use async_rwsem::lock_stat::Access;
use async_rwsem::{Policy, RwLock, RwLockUpgradableReadGuard, RwLockWriteGuard};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

mod support;
use support::assert_idle;

/// Every waiter queues at once: no spin, no yield, no handoff.
fn queue_at_once() -> Policy {
    Policy::new()
        .writer_spin(Duration::ZERO)
        .reader_spin(Duration::ZERO)
        .writer_yields(0)
        .handoff_timeout(Duration::MAX)
}

#[test]
fn uncontended_reads_and_writes_are_counted_exactly_with_no_wait() {
    let lock = RwLock::new(0);
    for _ in 0..5 {
        drop(assert_ready!(spawn(lock.read()).poll()));
    }
    for _ in 0..2 {
        drop(lock.try_read().unwrap());
    }
    for _ in 0..3 {
        drop(assert_ready!(spawn(lock.write()).poll()));
    }
    let stat = lock.lock_stat();
    assert_eq!(stat.read_wait().count(), 7);
    assert_eq!(stat.read_wait().zeros(), 7);
    assert_eq!(stat.read_wait().max(), Duration::ZERO);
    assert_eq!(stat.read_hold().count(), 7);
    assert_eq!(stat.write_wait().count(), 3);
    assert_eq!(stat.write_wait().zeros(), 3);
    assert_eq!(stat.write_hold().count(), 3);
    assert_eq!(stat.read_contentions(), 0);
    assert_eq!(stat.write_contentions(), 0);
    // The event counters come along: the async acquires took the fast paths.
    assert_eq!(stat.events().rlock_fast, 5);
    assert_eq!(stat.events().wlock_fast, 3);
    assert!(stat.longest_hold().is_some());
}

#[test]
fn contended_waits_are_measured_from_the_first_wait_to_the_grant() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, queue_at_once());
    let w = lock.try_write().unwrap();
    let mut r = spawn(lock.read());
    assert_pending!(r.poll());
    let mut w2 = spawn(lock.write());
    assert_pending!(w2.poll());
    sleep(Duration::from_millis(5));
    drop(w);
    // The reader heads the queue: granted at the release.
    assert!(r.is_woken());
    let g = assert_ready!(r.poll());
    assert_pending!(w2.poll());
    drop(g);
    assert!(w2.is_woken());
    drop(assert_ready!(w2.poll()));
    drop((r, w2));

    let stat = lock.lock_stat();
    assert_idle(&lock); // (a `try_write`, after the snapshot)
    assert_eq!(stat.read_contentions(), 1);
    assert_eq!(stat.read_wait().count(), 1);
    assert_eq!(stat.read_wait().zeros(), 0);
    assert!(stat.read_wait().max() >= Duration::from_millis(5), "{stat}");
    assert_eq!(stat.read_wait().total(), stat.read_wait().max());
    // The writer waited behind the writer and then the reader.
    assert_eq!(stat.write_contentions(), 1);
    assert_eq!(stat.write_wait().count(), 2); // try_write (no wait) and the queued one
    assert_eq!(stat.write_wait().zeros(), 1);
    assert!(
        stat.write_wait().max() >= Duration::from_millis(5),
        "{stat}"
    );
    assert_eq!(stat.write_hold().count(), 2);
    assert_eq!(stat.read_hold().count(), 1);
    // The percentiles bound the recorded times from above, within a factor of two.
    let p99 = stat.read_wait().percentile(0.99);
    assert!(p99 >= Duration::from_millis(5) && p99 <= stat.read_wait().max());
}

#[test]
fn a_dropped_waiter_records_no_acquisition() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, queue_at_once());
    let w = lock.try_write().unwrap();
    let mut r = spawn(lock.read());
    assert_pending!(r.poll());
    drop(r);
    drop(w);
    let stat = lock.lock_stat();
    assert_eq!(stat.read_wait().count(), 0);
    assert_eq!(stat.read_contentions(), 0);
    assert_eq!(stat.events().rlock_cancel, 1);
    assert_eq!(stat.write_hold().count(), 1);
}

/// A release whose wake-up panics (the head waiter's waker panics in `wake`) still counts
/// the hold, whether it is a plain or a fair release: the observers run even then.
#[test]
fn a_release_whose_wake_up_panics_still_counts_the_hold() {
    use std::sync::atomic::Ordering::SeqCst;
    use support::probe::{poll_with, probe_waker, Probe};
    support::lockdep_off();
    for fair in [false, true] {
        let lock = RwLock::with_policy(0, queue_at_once());
        let w = lock.try_write().unwrap();
        let probe = Probe::new();
        let mut read = std::pin::pin!(lock.read());
        assert!(poll_with(read.as_mut(), &probe_waker(&probe)).is_pending());
        probe.panic_wake.store(true, SeqCst);
        support::panics(|| {
            if fair {
                RwLockWriteGuard::unlock_fair(w);
            } else {
                drop(w);
            }
        });
        probe.panic_wake.store(false, SeqCst);
        let stat = lock.lock_stat();
        assert_eq!(stat.write_hold().count(), 1, "fair: {fair}: {stat}");
        assert_eq!(stat.write_wait().count(), 1, "fair: {fair}: {stat}");
        // The woken reader has the lock.
        let std::task::Poll::Ready(r) = poll_with(read.as_mut(), &probe_waker(&probe)) else {
            panic!("the woken reader has no lock");
        };
        drop(r);
        assert_eq!(lock.lock_stat().read_hold().count(), 1);
        assert_idle(&lock);
    }
}

#[test]
fn the_longest_hold_names_the_line_of_its_acquire() {
    let lock = RwLock::new(0);
    drop(lock.try_read().unwrap()); // short
    let (w, line) = (lock.try_write().unwrap(), line!());
    sleep(Duration::from_millis(5));
    drop(w);
    drop(assert_ready!(spawn(lock.read()).poll())); // short
    let longest = lock.lock_stat().longest_hold().unwrap();
    assert_eq!(longest.location.file(), file!());
    assert_eq!(longest.location.line(), line);
    assert_eq!(longest.access, Access::Write);
    assert!(longest.duration >= Duration::from_millis(5));
    let text = lock.lock_stat().to_string();
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("longest hold: ")
            && last.ends_with(&format!("(write) at {}", longest.location)),
        "{text}"
    );
}

#[test]
fn an_async_acquire_is_located_at_its_call() {
    let lock = RwLock::new(0);
    let (mut r, line) = (spawn(lock.read()), line!());
    let g = assert_ready!(r.poll());
    sleep(Duration::from_millis(5));
    drop(g);
    let longest = lock.lock_stat().longest_hold().unwrap();
    assert_eq!(
        (longest.location.file(), longest.location.line()),
        (file!(), line)
    );
    assert_eq!(longest.access, Access::Read);
}

#[test]
fn upgrades_and_downgrades_split_the_hold_between_the_modes() {
    let lock = RwLock::new(0);
    let up = assert_ready!(spawn(lock.upgradable_read()).poll());
    let w = assert_ready!(spawn(RwLockUpgradableReadGuard::upgrade(up)).poll());
    let r = RwLockWriteGuard::downgrade(w);
    drop(r);
    let stat = lock.lock_stat();
    // The upgradable read: a read acquisition; the upgrade: a write one.
    assert_eq!(stat.read_wait().count(), 1);
    assert_eq!(stat.write_wait().count(), 1);
    // Holds: upgradable read, then write, then read (the downgrade).
    assert_eq!(stat.read_hold().count(), 2);
    assert_eq!(stat.write_hold().count(), 1);
    assert_eq!(stat.read_contentions() + stat.write_contentions(), 0);
}

#[test]
fn a_waited_upgrade_is_a_write_contention() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, queue_at_once());
    let up = lock.try_upgradable_read().unwrap();
    let reader = lock.try_read().unwrap();
    let mut upgrade = spawn(RwLockUpgradableReadGuard::upgrade(up));
    assert_pending!(upgrade.poll());
    sleep(Duration::from_millis(2));
    drop(reader);
    assert!(upgrade.is_woken());
    drop(assert_ready!(upgrade.poll()));
    let stat = lock.lock_stat();
    assert_eq!(stat.write_contentions(), 1);
    assert_eq!(stat.write_wait().count(), 1);
    assert!(stat.write_wait().max() >= Duration::from_millis(2));
    assert_eq!(stat.write_hold().count(), 1);
    assert_eq!(stat.read_hold().count(), 2); // the reader and the upgradable read
}

#[test]
fn the_snapshot_names_the_writer_and_since_when() {
    let lock = RwLock::new(0);
    assert_eq!(lock.snapshot().holder, None);
    let (w, line) = (lock.try_write().unwrap(), line!());
    sleep(Duration::from_millis(2));
    let holder = lock.snapshot().holder.unwrap();
    assert_eq!(holder.access, Access::Write);
    assert_eq!(
        (holder.location.file(), holder.location.line()),
        (file!(), line)
    );
    assert!(holder.held_for >= Duration::from_millis(2));
    // A downgrade leaves only readers: no exclusive holder.
    let r = RwLockWriteGuard::downgrade(w);
    assert_eq!(lock.snapshot().holder, None);
    drop(r);
    let (up, line) = (lock.try_upgradable_read().unwrap(), line!());
    let s = lock.snapshot();
    assert_eq!(s.holder.unwrap().access, Access::UpgradableRead);
    assert_eq!(s.holder.unwrap().location.line(), line);
    assert!(
        s.to_string().starts_with(&format!(
            "the upgradable reader and 0 readers hold it (upgradable read at {}",
            s.holder.unwrap().location
        )),
        "{s}"
    );
    // Upgraded: the same holder, now writing.
    let w = RwLockUpgradableReadGuard::try_upgrade(up).unwrap();
    let holder = lock.snapshot().holder.unwrap();
    assert_eq!(
        (holder.access, holder.location.line()),
        (Access::Write, line)
    );
    drop(w);
    assert_eq!(lock.snapshot().holder, None);
}

#[test]
fn the_head_wait_is_known_for_a_queued_reader() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, queue_at_once());
    let w = lock.try_write().unwrap();
    let mut r = spawn(lock.read());
    assert_pending!(r.poll());
    sleep(Duration::from_millis(2));
    let s = lock.snapshot();
    assert_eq!(s.queued_readers, 1);
    assert!(s.head_waited.unwrap() >= Duration::from_millis(2));
    drop(w);
    drop(assert_ready!(r.poll()));
}

#[test]
fn a_blocking_acquire_that_waits_is_a_contention() {
    let lock = RwLock::with_policy(0, queue_at_once());
    let w = lock.try_write().unwrap();
    std::thread::scope(|s| {
        let reader = s.spawn(|| drop(lock.blocking_read()));
        while lock.snapshot().queued_readers == 0 {
            std::thread::yield_now();
        }
        sleep(Duration::from_millis(2));
        drop(w);
        reader.join().unwrap();
    });
    let stat = lock.lock_stat();
    assert_eq!(stat.read_contentions(), 1);
    assert_eq!(stat.read_wait().count(), 1);
    assert!(stat.read_wait().max() >= Duration::from_millis(2), "{stat}");
    assert_eq!(stat.read_hold().count(), 1);
}

#[test]
fn an_owned_guard_is_located_at_its_acquire() {
    let lock = std::sync::Arc::new(RwLock::new(0));
    let (mut w, line) = (spawn(std::sync::Arc::clone(&lock).write_owned()), line!());
    let g = assert_ready!(w.poll());
    sleep(Duration::from_millis(2));
    drop(g);
    let longest = lock.lock_stat().longest_hold().unwrap();
    assert_eq!(
        (longest.location.file(), longest.location.line()),
        (file!(), line)
    );
    assert_eq!(longest.access, Access::Write);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_acquire_that_times_out_records_no_acquisition() {
    support::lockdep_off();
    let lock = RwLock::with_policy(0, queue_at_once());
    let w = lock.try_write().unwrap();
    assert!(lock.read_timeout(Duration::from_millis(5)).await.is_err());
    drop(w);
    let stat = lock.lock_stat();
    assert_eq!(stat.read_wait().count(), 0);
    assert_eq!(stat.read_contentions(), 0);
    assert_eq!(stat.read_hold().count(), 0);
    assert_eq!(stat.events().rlock_cancel, 1);
    // The next acquire is not credited with the abandoned wait.
    drop(lock.read().await);
    let stat = lock.lock_stat();
    assert_eq!((stat.read_wait().count(), stat.read_wait().zeros()), (1, 1));
    assert_eq!(stat.read_contentions(), 0);
}

// ---------------------------------------------------------------------------------------
// The warnings (with `tracing`).

#[cfg(feature = "tracing")]
mod warnings {
    use std::collections::BTreeMap;
    use std::fmt;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    use super::support::panics;
    use super::*;

    /// One event's fields by name (`message` among them), as text.
    type Fields = BTreeMap<&'static str, String>;

    /// Collects the `async_rwsem::lock_stat` events (all WARN); panics on the first one
    /// whose message is `panic_on`, after recording it.
    #[derive(Clone, Default)]
    struct Collect {
        events: Arc<Mutex<Vec<Fields>>>,
        panic_on: Arc<Mutex<Option<&'static str>>>,
    }

    struct Visitor<'a>(&'a mut Fields);
    impl Visit for Visitor<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0.insert(field.name(), format!("{value:?}"));
        }
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.0.insert(field.name(), value.to_string());
        }
    }

    impl Subscriber for Collect {
        fn enabled(&self, meta: &Metadata<'_>) -> bool {
            meta.target() == "async_rwsem::lock_stat"
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            assert_eq!(*event.metadata().level(), Level::WARN);
            let mut fields = Fields::new();
            event.record(&mut Visitor(&mut fields));
            let panic = {
                let mut panic_on = self.panic_on.lock().unwrap();
                let hit = panic_on.is_some() && *panic_on == Some(fields["message"].as_str());
                if hit {
                    *panic_on = None;
                }
                hit
            };
            self.events.lock().unwrap().push(fields);
            if panic {
                panic!("the subscriber panics");
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    fn at(file: &str, line: u32) -> String {
        format!("{file}:{line}:")
    }

    fn micros(fields: &Fields, name: &str) -> u64 {
        fields[name].parse().unwrap()
    }

    #[test]
    fn a_guard_held_too_long_is_reported_when_dropped() {
        let collect = Collect::default();
        let events = Arc::clone(&collect.events);
        tracing::subscriber::with_default(collect, || {
            // Below its threshold, or with none: no warning.
            let patient = RwLock::with_policy(
                0,
                Policy::new().warn_held_longer_than(Duration::from_secs(3600)),
            );
            let unwatched = RwLock::new(0);
            let held = (patient.try_write().unwrap(), unwatched.try_write().unwrap());
            sleep(Duration::from_millis(4));
            drop(held);
            assert!(events.lock().unwrap().is_empty());

            let lock = RwLock::with_policy(
                0,
                Policy::new().warn_held_longer_than(Duration::from_millis(2)),
            );
            let (r, line) = (lock.try_read().unwrap(), line!());
            sleep(Duration::from_millis(4));
            drop(r);
            let events = events.lock().unwrap();
            assert_eq!(events.len(), 1, "{events:?}");
            let e = &events[0];
            assert_eq!(e["message"], "held the lock too long");
            assert!(e["location"].starts_with(&at(file!(), line)), "{e:?}");
            assert_eq!(e["access"], "read");
            assert!(micros(e, "held_us") >= 4000, "{e:?}");
        });
    }

    #[test]
    fn a_waiter_past_its_threshold_is_reported_at_the_release_and_at_its_grant() {
        support::lockdep_off();
        let collect = Collect::default();
        let events = Arc::clone(&collect.events);
        tracing::subscriber::with_default(collect, || {
            let lock = RwLock::with_policy(
                0,
                queue_at_once().warn_waited_longer_than(Duration::from_millis(2)),
            );
            let r1 = lock.try_read().unwrap();
            let (r2, holder_line) = (lock.try_read().unwrap(), line!());
            let (mut w, waiter_line) = (spawn(lock.write()), line!());
            assert_pending!(w.poll());
            sleep(Duration::from_millis(4));
            // The writer still waits for `r1`: reported, naming the reader that left.
            drop(r2);
            assert_pending!(w.poll());
            drop(r1); // reported once only
            assert!(w.is_woken());
            drop(assert_ready!(w.poll()));
            // Below its threshold: no warning.
            let patient = RwLock::with_policy(
                0,
                queue_at_once().warn_waited_longer_than(Duration::from_secs(3600)),
            );
            let r1 = patient.try_read().unwrap();
            let r2 = patient.try_read().unwrap();
            let mut w2 = spawn(patient.write());
            assert_pending!(w2.poll());
            sleep(Duration::from_millis(4));
            drop(r2);
            drop(r1);
            drop(assert_ready!(w2.poll()));

            let events = events.lock().unwrap();
            assert_eq!(events.len(), 2, "{events:?}");
            let (release, grant) = (&events[0], &events[1]);
            assert_eq!(release["message"], "waiting too long for the lock");
            assert!(release["location"].starts_with(&at(file!(), waiter_line)));
            assert_eq!(release["access"], "write");
            assert!(release["holder"].starts_with(&at(file!(), holder_line)));
            assert_eq!(release["holder_access"], "read");
            assert!(micros(release, "waited_us") >= 4000, "{release:?}");
            assert_eq!(grant["message"], "waited too long for the lock");
            assert!(grant["location"].starts_with(&at(file!(), waiter_line)));
            assert_eq!(grant["access"], "write");
            assert!(micros(grant, "waited_us") >= micros(release, "waited_us"));
        });
    }

    #[test]
    fn an_upgrade_that_waited_too_long_is_reported_at_its_grant() {
        support::lockdep_off();
        let collect = Collect::default();
        let events = Arc::clone(&collect.events);
        tracing::subscriber::with_default(collect, || {
            let lock = RwLock::with_policy(
                0,
                queue_at_once().warn_waited_longer_than(Duration::from_millis(2)),
            );
            let (up, up_line) = (lock.try_upgradable_read().unwrap(), line!());
            let r = lock.try_read().unwrap();
            let (mut upgrade, line) = (spawn(RwLockUpgradableReadGuard::upgrade(up)), line!());
            assert_pending!(upgrade.poll());
            sleep(Duration::from_millis(4));
            drop(r); // grants the upgrade: no one is left queued to report at the release
            drop(assert_ready!(upgrade.poll()));
            let events = events.lock().unwrap();
            assert_eq!(events.len(), 1, "{events:?}");
            let e = &events[0];
            assert_eq!(e["message"], "waited too long for the lock");
            assert_eq!(e["access"], "write");
            // The upgrade's own call, not the upgradable read's.
            assert!(e["location"].starts_with(&at(file!(), line)), "{e:?}");
            assert_ne!(up_line, line);
            assert!(micros(e, "waited_us") >= 4000, "{e:?}");
        });
    }

    /// Runs `f` under a subscriber that panics on the event with message `panic_on`.
    fn with_panicking_subscriber(panic_on: &'static str, f: impl FnOnce()) {
        let collect = Collect::default();
        *collect.panic_on.lock().unwrap() = Some(panic_on);
        let fired = Arc::clone(&collect.panic_on);
        tracing::subscriber::with_default(collect, f);
        assert!(
            fired.lock().unwrap().is_none(),
            "the event {panic_on:?} never came"
        );
    }

    fn warn_all() -> Policy {
        queue_at_once()
            .warn_held_longer_than(Duration::from_millis(1))
            .warn_waited_longer_than(Duration::from_millis(1))
    }

    #[test]
    fn a_subscriber_panicking_on_held_too_long_leaves_the_lock_free() {
        with_panicking_subscriber("held the lock too long", || {
            let lock = RwLock::with_policy(0, warn_all());
            let w = lock.try_write().unwrap();
            sleep(Duration::from_millis(2));
            panics(|| drop(w));
            assert_eq!(lock.lock_stat().write_hold().count(), 1);
            assert_eq!(lock.snapshot().holder, None);
            assert_idle(&lock);
        });
    }

    #[test]
    fn a_subscriber_panicking_on_a_waiter_at_the_release_leaves_it_the_lock() {
        support::lockdep_off();
        with_panicking_subscriber("waiting too long for the lock", || {
            let lock = RwLock::with_policy(0, warn_all());
            let r1 = lock.try_read().unwrap();
            let r2 = lock.try_read().unwrap();
            let mut w = spawn(lock.write());
            assert_pending!(w.poll());
            sleep(Duration::from_millis(2));
            // `r2` is released, then the report of the writer panics.
            panics(|| drop(r2));
            assert_eq!(lock.snapshot().readers, 1);
            drop(r1);
            assert!(w.is_woken());
            drop(assert_ready!(w.poll()));
            drop(w);
            assert_idle(&lock);
        });
    }

    #[test]
    fn a_subscriber_panicking_on_a_waiter_at_its_grant_releases_the_lock() {
        support::lockdep_off();
        with_panicking_subscriber("waited too long for the lock", || {
            let lock = RwLock::with_policy(0, warn_all());
            let w = lock.try_write().unwrap();
            let mut r = spawn(lock.write());
            assert_pending!(r.poll());
            sleep(Duration::from_millis(2));
            drop(w);
            assert!(r.is_woken());
            // The guard's token exists when the report runs: the unwind releases it.
            panics(|| {
                let _ = r.poll();
            });
            drop(r);
            let stat = lock.lock_stat();
            assert_eq!(stat.write_hold().count(), 2);
            assert_eq!(stat.write_contentions(), 1);
            assert_idle(&lock);
        });
    }
}
