//! Passing that pays for itself ([`PassCheck`]): a timed pass of a head writer by queued
//! readers that cost the writer more than the handoff timeout turns passing off for
//! [`VETO_TURNS`] turns of queued writers; then grants keep the queue's order. After the
//! veto every pass is timed until [`WATCH_PASSES`] in a row were cheap.
//!
//! The word itself is tested with the clock passed in (no time in these); the lock with a
//! pass made expensive by a sleep far past a short timeout: a sleep lasts at least its
//! length, so the expensive side cannot be missed. (The cheap side needs the clock to be
//! fast, which a loaded machine does not promise: it is tested on the word alone.)

use std::time::Duration;

use crate::raw::wake::{PassCheck, SAMPLE_EVERY, VETO_TURNS, WATCH_PASSES};
use crate::{Policy, RwLock};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

use crate::raw::tests::support::*;

const TIMEOUT: Duration = Duration::from_micros(250);

/// A clock that must not be read.
fn unread() -> u32 {
    panic!("the clock was read for an untimed pass")
}

#[test]
fn a_cheap_pass_keeps_passing_on_and_one_pass_in_eight_is_timed() {
    let mut p = PassCheck::new();
    assert!(!p.passing_off() && !p.timing());
    // The first pass is timed.
    p.passed(|| 1_000);
    assert!(p.timing());
    // Its writer got the lock 200 us later: under the timeout.
    p.writer_turn(|| 1_200, TIMEOUT);
    assert!(!p.passing_off() && !p.timing());
    // The next seven passes are not timed (and their turns read no clock either).
    for _ in 1..SAMPLE_EVERY {
        p.passed(unread);
        assert!(!p.timing());
        p.writer_turn(unread, TIMEOUT);
        assert!(!p.passing_off());
    }
    // The eighth is.
    let mut read = false;
    p.passed(|| {
        read = true;
        5_000
    });
    assert!(read && p.timing());
    // A pass that cost exactly the timeout is not over it.
    p.writer_turn(|| 5_250, TIMEOUT);
    assert!(!p.passing_off());
}

/// Passes made while a sampled pass is still timed (its writer not yet served: more
/// readers granted past the head, or a cancelled writer) count down the sample as untimed
/// passes do and keep the timed start: the next timed pass is still the eighth.
#[test]
fn passes_during_a_timed_one_count_down_the_sample_and_keep_its_start() {
    let mut p = PassCheck::new();
    p.passed(|| 1_000);
    assert!(p.timing());
    for _ in 1..SAMPLE_EVERY {
        p.passed(unread);
        assert!(p.timing());
    }
    // The timed start is the first pass's: 1,000 to 1,200 is under the timeout.
    p.writer_turn(|| 1_200, TIMEOUT);
    assert!(!p.passing_off() && !p.timing());
    // The sample ran down meanwhile: this pass is the next timed one.
    let mut read = false;
    p.passed(|| {
        read = true;
        2_000
    });
    assert!(read && p.timing());
}

/// A pass timed from `start` whose writer gets the lock at `end`: the clock must be read
/// at both.
fn timed_pass(p: &mut PassCheck, start: u32, end: u32) {
    let mut read = false;
    p.passed(|| {
        read = true;
        start
    });
    assert!(read && p.timing(), "the pass was not timed");
    p.writer_turn(|| end, TIMEOUT);
    assert!(!p.timing());
}

#[test]
fn an_expensive_pass_vetoes_passing_for_the_next_writer_turns_then_watches_every_pass() {
    let mut p = PassCheck::new();
    assert_eq!(p.watching(), 0);
    timed_pass(&mut p, 1_000, 1_251);
    assert!(p.passing_off());
    assert_eq!(p.watching(), WATCH_PASSES);
    for turn in 1..VETO_TURNS {
        p.writer_turn(unread, TIMEOUT);
        assert!(p.passing_off(), "still off after {turn} turns");
    }
    p.writer_turn(unread, TIMEOUT);
    assert!(!p.passing_off(), "on again after {VETO_TURNS} turns");
    // Watched: every pass is timed, each cheap one counted down...
    for left in (1..=WATCH_PASSES).rev() {
        assert_eq!(p.watching(), left);
        timed_pass(&mut p, 10_000, 10_100);
        assert!(!p.passing_off());
    }
    assert_eq!(p.watching(), 0);
    // ... then sampling again: the first pass is timed, the next seven are not.
    timed_pass(&mut p, 20_000, 20_100);
    for _ in 1..SAMPLE_EVERY {
        p.passed(unread);
        assert!(!p.timing());
        p.writer_turn(unread, TIMEOUT);
    }
    timed_pass(&mut p, 30_000, 30_100);
    assert!(!p.passing_off());
}

/// A check just out of a veto (an expensive pass, then its turns): watching.
fn watched() -> PassCheck {
    let mut p = PassCheck::new();
    timed_pass(&mut p, 0, 1_000);
    for _ in 0..VETO_TURNS {
        p.writer_turn(unread, TIMEOUT);
    }
    assert!(!p.passing_off());
    assert_eq!(p.watching(), WATCH_PASSES);
    p
}

#[test]
fn an_expensive_pass_during_the_watch_vetoes_again_and_restarts_it() {
    let mut p = watched();
    // Cheap passes, then one long reader among them.
    for _ in 0..100 {
        timed_pass(&mut p, 5_000, 5_010);
    }
    assert_eq!(p.watching(), WATCH_PASSES - 100);
    timed_pass(&mut p, 6_000, 16_000);
    assert!(p.passing_off());
    assert_eq!(p.watching(), WATCH_PASSES, "the watch starts over");
}

#[test]
fn a_watched_pass_whose_writer_was_cancelled_keeps_its_start() {
    let mut p = watched();
    // Timed from 100; its writer leaves the queue, and the next pass reads no clock: the
    // pass in flight is still timed from 100, so the next writer's turn at 400 finds it
    // expensive.
    p.passed(|| 100);
    p.passed(unread);
    assert!(p.timing());
    p.writer_turn(|| 400, TIMEOUT);
    assert!(p.passing_off());
}

#[test]
fn the_cost_is_taken_across_the_clocks_wrap_and_long_timeouts_never_veto() {
    // The start is kept in 18 bits of microseconds: a pass that starts just before they
    // wrap and ends after is still measured by its length.
    let mut p = PassCheck::new();
    p.passed(|| (1 << 18) - 100);
    p.writer_turn(|| (1 << 18) + 100, TIMEOUT);
    assert!(!p.passing_off(), "200 us, across the wrap");
    let mut p = PassCheck::new();
    p.passed(|| u32::MAX - 100);
    p.writer_turn(|| 400, TIMEOUT);
    assert!(p.passing_off(), "501 us, across the u32's wrap");
    // A timeout past a quarter of the 262 ms the start can measure never vetoes.
    let mut p = PassCheck::new();
    p.passed(|| 0);
    p.writer_turn(|| 200_000, Duration::from_millis(70));
    assert!(!p.passing_off());
    let mut p = PassCheck::new();
    p.passed(|| 0);
    p.writer_turn(|| 200_000, Duration::from_millis(60));
    assert!(p.passing_off());
}

/// A handoff timeout of 1 ms, and a bound in count that does not get in the way.
fn lock() -> RwLock<u32> {
    RwLock::with_policy(
        0,
        queue_at_once()
            .handoff_timeout(Duration::from_millis(1))
            .pass_bound(u32::MAX),
    )
}

fn passing_off(l: &RwLock<u32>) -> bool {
    l.raw
        .with_wait_list(|list, _| list.pass_check.passing_off())
}

/// One turn of a queued writer: it queues behind a held write lock and gets it at the
/// release (woken, then taking it as the head).
fn writer_turn(l: &RwLock<u32>) {
    let held = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    drop(held);
    assert!(w.is_woken());
    drop(assert_ready!(w.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn readers_that_hold_a_passed_writer_past_the_timeout_turn_passing_off() {
    let _lockdep = lockdep_off();
    let l = lock();

    // Two readers behind a head writer pass it at the release; they hold the lock far
    // past the 1 ms timeout.
    let w1 = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    let mut r1 = spawn(l.read());
    let mut r2 = spawn(l.read());
    assert_pending!(r1.poll());
    assert_pending!(r2.poll());
    drop(w1);
    assert_eq!(l.raw.count_word(), (2 * R) | WAITERS | HANDOFF);
    assert!(!w.is_woken());
    let (g1, g2) = (assert_ready!(r1.poll()), assert_ready!(r2.poll()));
    assert!(!passing_off(&l));
    std::thread::sleep(Duration::from_millis(20));
    drop((g1, g2));
    // The writer gets the lock, 20 ms after the pass: passing is off.
    assert!(w.is_woken());
    let gw = assert_ready!(w.poll());
    assert!(passing_off(&l));

    // Now a reader queued behind a head writer does not pass it...
    let mut w2 = spawn(l.write());
    assert_pending!(w2.poll());
    let mut r3 = spawn(l.read());
    assert_pending!(r3.poll());
    drop(gw);
    assert!(w2.is_woken());
    assert!(!r3.is_woken(), "the reader passed the head writer");
    // ... and a grant of readers stops at the first queued writer: `w3` queued behind the
    // write lock `w2` takes, then `r4`; `r3` (the head now) is granted at `w2`'s release,
    // `r4` is not.
    let g2 = assert_ready!(w2.poll());
    let mut w3 = spawn(l.write());
    assert_pending!(w3.poll());
    let mut r4 = spawn(l.read());
    assert_pending!(r4.poll());
    drop(g2);
    assert!(r3.is_woken());
    assert!(
        !r4.is_woken(),
        "the grant took a reader past a queued writer"
    );
    assert!(!w3.is_woken());
    drop(assert_ready!(r3.poll()));
    assert!(w3.is_woken());
    drop(assert_ready!(w3.poll()));
    assert!(r4.is_woken());
    drop(assert_ready!(r4.poll()));
    assert_eq!(l.raw.count_word(), 0);

    // Two writer turns were served (`w2`, `w3`) since the veto began at `w`'s: after the
    // rest of the veto's turns, readers pass a head writer again.
    for _ in 2..VETO_TURNS {
        assert!(passing_off(&l));
        writer_turn(&l);
    }
    assert!(!passing_off(&l));
    let w1 = l.try_write().unwrap();
    let mut w = spawn(l.write());
    assert_pending!(w.poll());
    let mut r = spawn(l.read());
    assert_pending!(r.poll());
    drop(w1);
    assert!(r.is_woken(), "passing is on again");
    assert!(!w.is_woken());
    // Watched after the veto: this pass is timed (as is every one until enough were
    // cheap; their cost needs a fast clock, which a loaded machine does not promise, so
    // that is tested on the word alone).
    assert!(l.raw.with_wait_list(|list, _| list.pass_check.timing()));
    drop(assert_ready!(r.poll()));
    drop(assert_ready!(w.poll()));
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn under_a_strict_order_or_a_handoff_at_every_release_no_pass_is_timed() {
    // No reader ever passes a writer there, so nothing is timed and nothing vetoed.
    for policy in [
        Policy::fifo(),
        queue_at_once().handoff_timeout(Duration::ZERO),
    ] {
        let _lockdep = lockdep_off();
        let l = RwLock::with_policy(0u32, policy);
        let w1 = l.try_write().unwrap();
        let mut w = spawn(l.write());
        assert_pending!(w.poll());
        let mut r = spawn(l.read());
        assert_pending!(r.poll());
        drop(w1);
        assert!(w.is_woken() && !r.is_woken());
        assert!(!l.raw.with_wait_list(|list, _| list.pass_check.timing()));
        drop(assert_ready!(w.poll()));
        drop(assert_ready!(r.poll()));
        assert_eq!(l.raw.count_word(), 0);
    }
}
