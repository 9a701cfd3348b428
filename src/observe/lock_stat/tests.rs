//! Unit tests of the recorders and the table.

use std::panic::Location;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::histogram::{bucket, bucket_upper, Recorder, BUCKETS};
use super::record::Grant;
use super::*;
use crate::raw::stats::LockStats;

/// The sizes the documentation gives: the per-lock state and the per-hold state.
#[cfg(target_pointer_width = "64")]
#[test]
fn sizes() {
    assert_eq!(std::mem::size_of::<LockStatState>(), 1712);
    assert_eq!(std::mem::size_of::<HoldStat>(), 48);
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
        r.record(0);
    }
    for _ in 0..9 {
        r.record(1000); // bucket 10: up to 1023 ns
    }
    r.record(1_000_000); // bucket 20: up to 1_048_575 ns
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
    let here = Location::caller();
    let t0 = Instant::now();
    let hold = HoldStat {
        site: here,
        since: Some(t0),
        earlier_ns: 0,
        key: 0,
        wait_ns: 0,
    };
    let at = |ns| t0 + Duration::from_nanos(ns);
    assert_eq!(s.end_segment(&hold, Access::Read, at(50)), 50);
    assert_eq!(s.end_segment(&hold, Access::Write, at(300)), 300);
    assert_eq!(s.end_segment(&hold, Access::Read, at(100)), 100); // not the longest
    let stat = s.snapshot(LockStats::default());
    let longest = stat.longest_hold().unwrap();
    assert_eq!(longest.duration, Duration::from_nanos(300));
    assert_eq!(longest.access, Access::Write);
    assert_eq!(longest.location, here);
    assert_eq!(stat.read_hold().count(), 2);
    assert_eq!(stat.write_hold().count(), 1);
}

#[test]
fn the_holder_slot_is_cleared_only_by_its_own_hold() {
    let s = LockStatState::new();
    let here = Location::caller();
    let hold = |key| HoldStat {
        site: here,
        since: Some(Instant::now()),
        earlier_ns: 0,
        key,
        wait_ns: 0,
    };
    let old = hold(10);
    s.holder
        .write(|_| true, |slot| slot.set(here, 20, Access::Write));
    s.clear_holder(&old); // the next holder's slot: left alone
    assert_eq!(s.holder().unwrap().access, Access::Write);
    let new = hold(20);
    s.clear_holder(&new);
    assert!(s.holder().is_none());
}

/// With a clock coarser than the time between a release and the next acquire, both
/// holds start at the same reading; the next holder's slot write may come before the
/// previous holder's clear (a release runs its observers after the raw release).
/// That clear must leave the next holder in the slot.
#[test]
fn a_coarse_clock_does_not_let_a_release_clear_the_next_holder() {
    let s = LockStatState::new();
    let here = Location::caller();
    let tick = Instant::now();
    // Both holds start at the same reading: a grant with that time for each.
    let grant = || {
        Some(Grant {
            wait_ns: 0,
            at: tick,
            site: here,
        })
    };
    let first = s.acquired(WaiterKind::Write, here, grant(), false);
    let next = s.acquired(WaiterKind::Write, here, grant(), false);
    assert_ne!(first.key, next.key);
    s.released(WaiterKind::Write, &first);
    let holder = s.holder().expect("the next holder is still in the slot");
    assert_eq!(holder.access, Access::Write);
    s.released(WaiterKind::Write, &next);
    assert!(s.holder().is_none());
    // And the same for the upgradable reader after a writer.
    let first = s.acquired(WaiterKind::Write, here, grant(), false);
    let next = s.acquired(WaiterKind::UpgradableRead, here, grant(), false);
    s.released(WaiterKind::Write, &first);
    assert_eq!(s.holder().unwrap().access, Access::UpgradableRead);
    s.released(WaiterKind::UpgradableRead, &next);
    assert!(s.holder().is_none());
}

#[test]
fn the_table_has_every_row() {
    let s = LockStatState::new();
    s.read_wait.record(0);
    s.write_wait.record(2_000);
    s.write_contentions.fetch_add(1, Ordering::Relaxed);
    let text = s.snapshot(LockStats::default()).to_string();
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

/// Read holds that did not wait are timed one in `SAMPLE_EVERY` per thread, the first one
/// included; every one is counted.
#[test]
fn untimed_read_holds_are_counted_and_sampled_ones_timed() {
    std::thread::spawn(|| {
        let s = LockStatState::new();
        let here = Location::caller();
        let n = 2 * super::record::SAMPLE_EVERY;
        for _ in 0..n {
            let hold = s.acquired(WaiterKind::Read, here, None, false);
            s.released(WaiterKind::Read, &hold);
        }
        let stat = s.snapshot(LockStats::default());
        assert_eq!(stat.read_hold().count(), u64::from(n));
        assert_eq!(stat.read_hold().timed(), 2);
        assert_eq!(stat.read_wait().count(), u64::from(n));
        assert_eq!(stat.read_wait().zeros(), u64::from(n));
        // A "held too long" threshold times every hold.
        let hold = s.acquired(WaiterKind::Read, here, None, true);
        s.released(WaiterKind::Read, &hold);
        assert_eq!(s.snapshot(LockStats::default()).read_hold().timed(), 3);
    })
    .join()
    .unwrap();
}
