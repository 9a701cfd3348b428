//! Unit tests of the recorders and the table.

use std::panic::Location;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::clock::{coarse_ns, now_ns};
use super::histogram::{bucket, bucket_upper, Recorder, BUCKETS};
use super::local::LocalBlock;
use super::record::{Waited, SAMPLE_EVERY};
use super::*;
use crate::observe::per_thread::{Block, Blocks};

impl LockStatState {
    /// The acquire of a lock that waited as `waited` says (exactly, where the lock's own
    /// grants read the clock).
    fn acquired_after(
        &self,
        blocks: &Blocks,
        kind: WaiterKind,
        site: Site,
        waited: Waited,
    ) -> HoldStat {
        self.acquired_slow(blocks, Access::of(kind), site, Some(waited), false)
    }
}

/// The sizes the documentation gives: the per-lock state and the per-hold state.
#[cfg(target_pointer_width = "64")]
#[test]
fn sizes() {
    assert_eq!(std::mem::size_of::<LockStatState>(), 128);
    #[cfg(feature = "tracing")]
    assert_eq!(std::mem::size_of::<HoldStat>(), 32);
    #[cfg(not(feature = "tracing"))]
    assert_eq!(std::mem::size_of::<HoldStat>(), 16);
    assert_eq!(std::mem::size_of::<LocalBlock>(), 1664);
    // With the lock's event counters (`stats`), 19 of them.
    assert_eq!(std::mem::size_of::<Block>(), 1664 + 19 * 8);
}

#[test]
fn buckets_are_powers_of_two() {
    assert_eq!(bucket(0), 0);
    assert_eq!(bucket(1), 1);
    assert_eq!(bucket(2), 2);
    assert_eq!(bucket(3), 2);
    assert_eq!(bucket(4), 3);
    assert_eq!(bucket(1023), 10);
    assert_eq!(bucket(1024), 11);
    assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    for b in 1..BUCKETS - 1 {
        assert_eq!(bucket(bucket_upper(b)), b);
        assert_eq!(bucket(bucket_upper(b) + 1), b + 1);
    }
}

#[test]
fn histogram_counts_mean_max_and_percentiles() {
    let r = Recorder::new();
    for _ in 0..90 {
        r.record(0, true);
    }
    for _ in 0..9 {
        r.record(1000, true); // bucket 10: up to 1023 ns
    }
    r.record(1_000_000, false); // bucket 20: up to 1_048_575 ns
    let h = r.snapshot();
    assert_eq!(h.count(), 100);
    assert_eq!(h.zeros(), 90);
    assert_eq!(h.total(), Duration::from_nanos(9 * 1000 + 1_000_000));
    assert_eq!(h.mean(), Duration::from_nanos((9 * 1000 + 1_000_000) / 100));
    assert_eq!(h.max(), Duration::from_millis(1));
    assert_eq!(h.percentile(0.5), Duration::ZERO);
    assert_eq!(h.percentile(0.9), Duration::ZERO);
    assert_eq!(h.percentile(0.91), Duration::from_nanos(1023));
    assert_eq!(h.percentile(0.99), Duration::from_nanos(1023));
    // The top bucket's edge is above the max: the max it is.
    assert_eq!(h.percentile(1.0), Duration::from_millis(1));
    assert_eq!(
        h.buckets().collect::<Vec<_>>(),
        [
            (Duration::ZERO, 90),
            (Duration::from_nanos(1023), 9),
            (Duration::from_nanos(1_048_575), 1)
        ]
    );
    let empty = Recorder::new().snapshot();
    assert_eq!(empty.count(), 0);
    assert_eq!(empty.mean(), Duration::ZERO);
    assert_eq!(empty.percentile(0.5), Duration::ZERO);
}

#[test]
fn the_longest_hold_keeps_the_max_with_its_site() {
    let s = LockStatState::new();
    let block = LocalBlock::new();
    let here = Location::caller();
    let hold = |start| HoldStat::new(here, start, true);
    assert_eq!(
        s.end_timed(&block, true, &hold(1000), Access::Read, 1050),
        50
    );
    assert_eq!(
        s.end_timed(&block, true, &hold(1000), Access::Write, 1300),
        300
    );
    // Not the longest.
    assert_eq!(
        s.end_timed(&block, true, &hold(1000), Access::Read, 1100),
        100
    );
    let longest = s.longest.read().unwrap();
    assert_eq!(longest, (here, 300, Access::Write));
    let read_hold = block.read_hold.snapshot();
    assert_eq!((read_hold.count(), read_hold.timed()), (2, 2));
    assert_eq!(read_hold.max(), Duration::from_nanos(100));
    assert_eq!(read_hold.total(), Duration::from_nanos(150));
    assert_eq!(block.write_hold.snapshot().count(), 1);
    // A hold not timed, by the coarse clock: the longest hold if it is. (Its start is the
    // epoch's first nanosecond: wait until the coarse clock, which may be this test's
    // first reading of the crate's clock, is past 300 ns of it.)
    while coarse_ns(None) <= 1_000 {
        std::hint::spin_loop();
    }
    let untimed = HoldStat::new(here, 1, false);
    assert!(s.end_untimed(&untimed, Access::UpgradableRead) > 300);
    assert_eq!(s.longest.read().unwrap().2, Access::UpgradableRead);
    // A read hold not timed has no start: nothing to measure.
    let read = HoldStat::new(here, 0, false);
    assert_eq!(s.end_untimed(&read, Access::Read), 0);
}

/// The holder slot is written by each exclusive holder in turn, with no read-modify-write
/// and no clearing: a release leaves it, and the snapshot reads it only while the count
/// word says an exclusive holder is in.
#[test]
fn the_holder_slot_names_the_last_exclusive_hold() {
    let s = LockStatState::new();
    let b = Blocks::new();
    let here = Location::caller();
    assert!(s.holder().is_none());
    let first = s.acquired(&b, WaiterKind::Write, here, None, false);
    assert_eq!(s.holder().unwrap().access, Access::Write);
    s.released(&b, WaiterKind::Write, &first);
    assert_eq!(s.holder().unwrap().access, Access::Write); // left for the next one
    let grant = Waited {
        wait_ns: 5,
        at: now_ns(),
        site: here,
    };
    let mut next = s.acquired_after(&b, WaiterKind::UpgradableRead, here, grant);
    let holder = s.holder().unwrap();
    assert_eq!(holder.access, Access::UpgradableRead);
    // Its start: the grant's, by the precise clock.
    assert!(next.timed() && next.start() == grant.at);
    // An upgrade: the same hold, now writing.
    s.changed(
        &b,
        WaiterKind::UpgradableRead,
        WaiterKind::Upgrade,
        &mut next,
        None,
        false,
    );
    assert_eq!(s.holder().unwrap().access, Access::Write);
    assert_eq!(s.holder.0.seq.load(Ordering::Relaxed) % 2, 0);
    s.released(&b, WaiterKind::Upgrade, &next);
}

#[test]
fn the_table_has_every_row() {
    let s = LockStatState::new();
    let b = Blocks::new();
    let here = Location::caller();
    let _read = s.acquired(&b, WaiterKind::Read, here, None, false);
    let grant = Waited {
        wait_ns: 2_000,
        at: now_ns(),
        site: here,
    };
    let _write = s.acquired_after(&b, WaiterKind::Write, here, grant);
    let text = s.snapshot(&b).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        lines[0].contains("count") && lines[0].contains("p99"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("read wait") && lines[1].contains(" 1 "),
        "{text}"
    );
    assert!(lines[3].starts_with("write wait"), "{text}");
    assert!(lines[3].contains("2.0µs"), "{text}");
    assert_eq!(lines[5], "longest hold: none yet");
}

/// Holds that did not wait are timed one in `SAMPLE_EVERY` per thread and mode, the first
/// one included; every one is counted.
#[test]
fn untimed_holds_are_counted_and_sampled_ones_timed() {
    std::thread::spawn(|| {
        let s = LockStatState::new();
        let b = Blocks::new();
        let here = Location::caller();
        let n = 2 * SAMPLE_EVERY;
        for _ in 0..n {
            let hold = s.acquired(&b, WaiterKind::Read, here, None, false);
            s.released(&b, WaiterKind::Read, &hold);
            let hold = s.acquired(&b, WaiterKind::Write, here, None, false);
            s.released(&b, WaiterKind::Write, &hold);
        }
        let stat = s.snapshot(&b);
        for (hold, wait) in [
            (stat.read_hold(), stat.read_wait()),
            (stat.write_hold(), stat.write_wait()),
        ] {
            assert_eq!(hold.count(), u64::from(n));
            assert_eq!(hold.timed(), 2);
            assert_eq!(wait.count(), u64::from(n));
            assert_eq!(wait.zeros(), u64::from(n));
        }
        // A "held too long" threshold times every hold.
        let hold = s.acquired(&b, WaiterKind::Read, here, None, true);
        s.released(&b, WaiterKind::Read, &hold);
        assert_eq!(s.snapshot(&b).read_hold().timed(), 3);
    })
    .join()
    .unwrap();
}

/// Each thread writes a block of its own; the snapshot folds them, exactly once the
/// threads are done; a thread that exits leaves its counts, and the next thread takes its
/// block over instead of adding one.
#[test]
fn threads_record_apart_and_the_snapshot_folds_them() {
    let s = LockStatState::new();
    let b = Blocks::new();
    let here = Location::caller();
    let per_thread = 1000u64;
    // Joined one by one: a join waits for the thread's thread-local destructors too
    // (the end of a scope does not).
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    for _ in 0..per_thread {
                        let hold = s.acquired(&b, WaiterKind::Read, here, None, false);
                        s.released(&b, WaiterKind::Read, &hold);
                    }
                    let grant = Waited {
                        wait_ns: 10,
                        at: now_ns(),
                        site: here,
                    };
                    let hold = s.acquired_after(&b, WaiterKind::Write, here, grant);
                    s.released(&b, WaiterKind::Write, &hold);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
    });
    let blocks = b.len();
    assert!((1..=4).contains(&blocks), "{blocks}");
    let stat = s.snapshot(&b);
    assert_eq!(stat.read_wait().count(), 4 * per_thread);
    assert_eq!(stat.read_hold().count(), 4 * per_thread);
    assert_eq!(stat.write_contentions(), 4);
    assert_eq!(stat.write_wait().total(), Duration::from_nanos(40));
    // Threads that come after the first ones ended take their blocks over.
    for _ in 0..3 {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _ = s.acquired(&b, WaiterKind::Read, here, None, false);
                })
                .join()
                .unwrap();
        });
    }
    assert_eq!(b.len(), blocks);
    assert_eq!(s.snapshot(&b).read_wait().count(), 4 * per_thread + 3);
}

/// A hold released by another thread-local's destructor, while the thread exits, is
/// counted: in the thread's block if its thread-local is still there, in the lock's
/// shared one if not.
#[test]
fn a_release_in_a_thread_local_destructor_is_counted() {
    struct ReleaseOnExit(&'static LockStatState, Option<HoldStat>);
    impl Drop for ReleaseOnExit {
        fn drop(&mut self) {
            if let Some(hold) = self.1.take() {
                self.0.released(&B, WaiterKind::Read, &hold);
                let _ = self
                    .0
                    .acquired(&B, WaiterKind::Write, Location::caller(), None, false);
            }
        }
    }
    thread_local! {
        static EXIT: std::cell::RefCell<Option<ReleaseOnExit>> = const { std::cell::RefCell::new(None) };
    }
    static S: LockStatState = LockStatState::new();
    static B: Blocks = Blocks::new();
    std::thread::spawn(|| {
        // Registered before the lock's thread-local, so destroyed after it where the
        // platform runs destructors in reverse order (the shared block's case).
        EXIT.with(|_| {});
        let hold = S.acquired(&B, WaiterKind::Read, Location::caller(), None, false);
        EXIT.with(|exit| *exit.borrow_mut() = Some(ReleaseOnExit(&S, Some(hold))));
    })
    .join()
    .unwrap();
    let stat = S.snapshot(&B);
    assert_eq!(stat.read_hold().count(), 1);
    assert_eq!(stat.write_wait().count(), 1);
    // Linux runs them in reverse order: the shared block took them.
    #[cfg(target_os = "linux")]
    assert!(B.has_shared());
}

/// The coarse clock is never ahead of the precise one, and it ticks.
#[test]
fn the_coarse_clock_trails_the_precise_one_and_ticks() {
    let first = coarse_ns(None);
    assert!(first != 0 && first <= now_ns());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let t = coarse_ns(None);
        assert!(t <= now_ns());
        if t > first {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the coarse clock stopped"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
