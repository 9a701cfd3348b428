//! Adaptive spinning: how long a task that finds the lock held may spin for it before it
//! gives its worker back to the executor, learned per lock from how its spins turned out.
//!
//! The kernel spins only while the lock's owner runs on a CPU (`owner->on_cpu`). A task
//! holding a guard may instead be suspended in an `.await`, and nothing in an executor
//! says so; but the outcomes do. A spin that ends with the lock within its budget means
//! the owner was running, and how long it took says how long sections are; a spin that
//! runs out means the owner was most likely suspended (or its worker thread descheduled,
//! with more workers than cores), and spinning again soon would waste the worker the same
//! way. So each lock keeps, for readers and for writers apart, a budget between zero and
//! the policy's cap:
//!
//! - a spin that wins after `t` moves the budget halfway to `2t + 1 us` (glibc's adaptive
//!   mutex aims at twice its moving average the same way): room for the sections seen;
//! - a spin that runs out halves it, and below an eighth of a microsecond (or of the cap)
//!   it is zero: sections that await stop paying for spins within a few misses;
//! - at zero, one contended acquire in [`PROBE_EVERY`] spins anyway for a short probe
//!   budget, so that the lock notices within milliseconds when owners run again.
//!
//! A thread that would park (a blocking acquire) is given the cap instead of the learned
//! budget (`RawRwLock::spin_budget`, and `parking.rs` for why); its spins teach the budget
//! as any spin does.
//!
//! Nothing here runs on the uncontended paths: no clock is read unless a task spins. Nothing
//! here reads a clock at all: the spinners pass in how long they spun.
//!
//! The state is one `AtomicU32`: `[probe count | reader budget | writer budget | passes,
//! flag]`, a byte each. A budget byte `b` means `cap * b / 255`, so every cap keeps 255
//! steps. The low byte holds the writer-spinner flag and, above it, the passes of the queue
//! since its last turn (`Policy::pass_bound`: the spins and steals won past queued
//! waiters; see [`SpinState::passed`]) and the flag that pauses their count while a parked
//! thread heads the queue ([`SpinState::pause_passes`]). Updates are relaxed read-modify-writes on the
//! slow path only: they steer a heuristic, never the lock's correctness (the count word
//! decides who holds the lock; a pass bound reached is made a handoff under the wait
//! lock, as any handoff).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::Duration;

use crate::loom::AtomicU32;

/// One contended acquire in this many spins when the budget is zero (a probe).
pub(crate) const PROBE_EVERY: u32 = 32;

/// The budget of a probe (at most the cap).
const PROBE_BUDGET: Duration = Duration::from_micros(2);

/// Below this a budget is zero (or below an eighth of the cap, if that is more).
const MIN_BUDGET: Duration = Duration::from_nanos(128);

/// Set while a writer spins: one writer spins at a time (the kernel's OSQ, one slot).
const WRITER_SPINNING: u32 = 0b1;

/// One pass of the queue (bits 1 to 6: the count, at most [`PASSES_MAX`]).
const PASS: u32 = 0b10;
/// The pass count's bits.
const PASS_COUNT: u32 = 0b0111_1110;
/// The highest pass count (the count saturates there; above every bound:
/// `MAX_PASS_BOUND` is 62).
const PASSES_MAX: u32 = PASS_COUNT >> 1;
/// The bound in count is paused until the queue's next turn: its head is a parked thread
/// (`parking.rs`), served by the bound in time alone. Passes are not counted meanwhile.
const PASSES_PAUSED: u32 = 0b1000_0000;
/// The passes' state: the count and the pause, cleared together at the queue's turn.
const PASSES: u32 = PASS_COUNT | PASSES_PAUSED;

/// Who spins: the two budgets are learned apart (readers wait for writers' sections,
/// writers for anyone's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spinner {
    Reader,
    Writer,
}

impl Spinner {
    const fn shift(self) -> u32 {
        match self {
            Spinner::Writer => 8,
            Spinner::Reader => 16,
        }
    }
}

const PROBE_SHIFT: u32 = 24;

/// The learned spin budgets of one lock (see the module documentation).
#[derive(Debug)]
pub(crate) struct SpinState(AtomicU32);

impl SpinState {
    /// Both budgets start at their cap: a lock assumes its owners run until a spin says
    /// otherwise.
    #[cfg(not(all(test, async_rwsem_loom)))]
    pub(crate) const fn new() -> Self {
        Self(AtomicU32::new(0x00ff_ff00))
    }

    /// As the `const` constructor (loom's atomics are not `const`).
    #[cfg(all(test, async_rwsem_loom))]
    pub(crate) fn new() -> Self {
        Self(AtomicU32::new(0x00ff_ff00))
    }

    fn budget_byte(word: u32, who: Spinner) -> u32 {
        (word >> who.shift()) & 0xff
    }

    /// How long `who` may spin now, under `cap`; `None`: do not spin (the budget is zero
    /// and this is not a probe, or the cap is zero).
    #[inline]
    pub(crate) fn budget(&self, who: Spinner, cap: Duration) -> Option<Duration> {
        if cap.is_zero() {
            return None;
        }
        let byte = Self::budget_byte(self.0.load(Relaxed), who);
        if byte != 0 {
            return Some(scale(cap, byte));
        }
        // Zero: count the skip, and probe once in `PROBE_EVERY`.
        let old = self.0.fetch_add(1 << PROBE_SHIFT, Relaxed) >> PROBE_SHIFT;
        (old % PROBE_EVERY == 0).then(|| PROBE_BUDGET.min(cap))
    }

    /// A spin of `who` won the lock after `took`. In the loom models `took` is always
    /// zero (their spins count rounds and read no clock: `SpinClock` in `raw/mod.rs`), so
    /// what a model's budgets learn depends on its interleaving alone.
    pub(crate) fn won(&self, who: Spinner, cap: Duration, took: Duration) {
        let target = to_byte(
            cap,
            took.saturating_mul(2)
                .saturating_add(Duration::from_micros(1)),
        );
        self.update(who, |old| {
            if old == 0 {
                target
            } else if target >= old {
                old + (target - old).div_ceil(2)
            } else {
                old - (old - target) / 2
            }
        });
    }

    /// A spin of `who` used up its budget.
    pub(crate) fn lost(&self, who: Spinner, cap: Duration) {
        let floor = to_byte(cap, MIN_BUDGET).max(255 / 8);
        self.update(who, |old| {
            let half = old / 2;
            if half < floor {
                0
            } else {
                half
            }
        });
    }

    fn update(&self, who: Spinner, f: impl Fn(u32) -> u32) {
        let shift = who.shift();
        let _ = self.0.fetch_update(Relaxed, Relaxed, |word| {
            let old = (word >> shift) & 0xff;
            let new = f(old).min(0xff);
            (new != old).then_some((word & !(0xff << shift)) | (new << shift))
        });
    }

    /// Takes the writer-spinner slot; `false` if another writer spins.
    #[inline]
    pub(crate) fn start_writer_spin(&self) -> bool {
        self.0.fetch_or(WRITER_SPINNING, Acquire) & WRITER_SPINNING == 0
    }

    /// A running task passed the queue (it took the lock while waiters were queued, ahead
    /// of them). Returns `true` when that makes `bound` passes since the queue's last
    /// turn: then the caller hands the lock to the head at its next release. The count
    /// saturates (no bound is above [`PASSES_MAX`]). While the bound is paused
    /// ([`pause_passes`](Self::pause_passes)) nothing is counted and the answer is `false`.
    #[inline]
    pub(crate) fn passed(&self, bound: u32) -> bool {
        let old = match self.0.fetch_update(Relaxed, Relaxed, |word| {
            (word & PASSES_PAUSED == 0 && (word & PASS_COUNT) >> 1 < PASSES_MAX)
                .then_some(word + PASS)
        }) {
            Ok(word) | Err(word) => word,
        };
        old & PASSES_PAUSED == 0 && ((old & PASS_COUNT) >> 1) + 1 >= bound
    }

    /// The bound was reached with a parked thread at the head: stop counting until the
    /// queue's next turn ([`reset_passes`](Self::reset_passes)), so that the passes
    /// go on without a handoff and without the wait lock, and the head is served by the
    /// bound in time (`parking.rs`).
    pub(crate) fn pause_passes(&self) {
        self.0.fetch_or(PASSES_PAUSED, Relaxed);
    }

    /// The queue had its turn (a queued waiter got the lock), or has just formed: the
    /// passes count from zero again. A load, and a write only if the count is not zero.
    #[inline]
    pub(crate) fn reset_passes(&self) {
        if self.0.load(Relaxed) & PASSES != 0 {
            self.0.fetch_and(!PASSES, Relaxed);
        }
    }

    /// The passes since the queue's last turn (tests).
    #[cfg(test)]
    pub(crate) fn passes(&self) -> u32 {
        (self.0.load(Relaxed) & PASS_COUNT) >> 1
    }

    /// Is the bound in count paused (tests)?
    #[cfg(test)]
    pub(crate) fn passes_paused(&self) -> bool {
        self.0.load(Relaxed) & PASSES_PAUSED != 0
    }

    /// Gives the writer-spinner slot back.
    #[inline]
    pub(crate) fn end_writer_spin(&self) {
        self.0.fetch_and(!WRITER_SPINNING, Release);
    }

    /// The current budget of `who` under `cap` (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn current(&self, who: Spinner, cap: Duration) -> Duration {
        scale(cap, Self::budget_byte(self.0.load(Relaxed), who))
    }
}

/// `cap * byte / 255`.
fn scale(cap: Duration, byte: u32) -> Duration {
    let nanos = cap.as_nanos().saturating_mul(u128::from(byte)) / 255;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The byte of `budget` under `cap`, rounded up, at most 255.
fn to_byte(cap: Duration, budget: Duration) -> u32 {
    let cap = cap.as_nanos().max(1);
    let byte = (budget.as_nanos().saturating_mul(255)).div_ceil(cap);
    u32::try_from(byte.min(255)).unwrap_or(255)
}

#[cfg(all(test, not(async_rwsem_loom)))]
mod tests {
    use super::*;

    const CAP: Duration = Duration::from_micros(10);

    #[test]
    fn budgets_start_at_the_cap_and_are_apart() {
        let s = SpinState::new();
        assert_eq!(s.budget(Spinner::Writer, CAP), Some(CAP));
        assert_eq!(s.budget(Spinner::Reader, CAP), Some(CAP));
        assert_eq!(s.budget(Spinner::Reader, Duration::ZERO), None);
        s.lost(Spinner::Writer, CAP);
        assert!(s.current(Spinner::Writer, CAP) < CAP);
        assert_eq!(s.current(Spinner::Reader, CAP), CAP);
    }

    #[test]
    fn misses_take_the_budget_to_zero_then_probes_bring_it_back() {
        let s = SpinState::new();
        // Halving from the cap to below an eighth of it: four misses.
        for _ in 0..3 {
            s.lost(Spinner::Reader, CAP);
            assert!(s.current(Spinner::Reader, CAP) > Duration::ZERO);
        }
        s.lost(Spinner::Reader, CAP);
        assert_eq!(s.current(Spinner::Reader, CAP), Duration::ZERO);
        assert_eq!(
            s.current(Spinner::Writer, CAP),
            CAP,
            "the writers' budget is apart"
        );
        // At zero, one in `PROBE_EVERY` contended acquires probes, with a short budget.
        let probes: Vec<_> = (0..PROBE_EVERY * 4)
            .filter_map(|_| s.budget(Spinner::Reader, CAP))
            .collect();
        assert_eq!(probes, [PROBE_BUDGET; 4]);
        // A probe that wins brings the budget back at once.
        s.won(Spinner::Reader, CAP, Duration::from_nanos(500));
        let now = s.current(Spinner::Reader, CAP);
        assert!(
            now >= Duration::from_nanos(2000) && now < Duration::from_nanos(2100),
            "{now:?}"
        );
    }

    #[test]
    fn wins_move_the_budget_toward_twice_the_wait_plus_a_microsecond() {
        let s = SpinState::new();
        for _ in 0..20 {
            s.won(Spinner::Writer, CAP, Duration::from_micros(1));
        }
        let now = s.current(Spinner::Writer, CAP);
        assert!(
            now >= Duration::from_micros(3) && now < Duration::from_nanos(3100),
            "{now:?}"
        );
        // Longer sections raise it again, up to the cap.
        for _ in 0..20 {
            s.won(Spinner::Writer, CAP, Duration::from_micros(30));
        }
        assert_eq!(s.current(Spinner::Writer, CAP), CAP);
    }

    #[test]
    fn passes_count_to_the_bound_saturate_and_reset() {
        let s = SpinState::new();
        assert!(!s.passed(3));
        assert!(!s.passed(3));
        assert!(s.passed(3), "the third pass reaches a bound of 3");
        assert_eq!(s.passes(), 3);
        s.reset_passes();
        assert_eq!(s.passes(), 0);
        assert!(s.passed(1));
        for _ in 0..200 {
            s.passed(62);
        }
        assert_eq!(s.passes(), PASSES_MAX, "the count saturates");
        assert_eq!(
            s.current(Spinner::Writer, CAP),
            CAP,
            "and leaves the budgets alone"
        );
        assert!(s.start_writer_spin(), "and the spinner flag");
        s.end_writer_spin();
        s.reset_passes();
        assert_eq!(s.passes(), 0);
        assert_eq!(s.current(Spinner::Writer, CAP), CAP);
    }

    #[test]
    fn a_paused_bound_counts_nothing_until_the_queues_turn() {
        let s = SpinState::new();
        assert!(!s.passed(2));
        s.pause_passes();
        assert!(s.passes_paused());
        for _ in 0..100 {
            assert!(!s.passed(2), "no pass reaches the bound while it is paused");
        }
        assert_eq!(s.passes(), 1, "and none is counted");
        assert!(
            s.start_writer_spin(),
            "the pause leaves the spinner flag alone"
        );
        s.end_writer_spin();
        assert_eq!(s.current(Spinner::Writer, CAP), CAP, "and the budgets");
        s.reset_passes();
        assert!(!s.passes_paused(), "the queue's turn ends the pause");
        assert_eq!(s.passes(), 0);
        assert!(!s.passed(2));
        assert!(s.passed(2));
    }

    #[test]
    fn one_writer_spins_at_a_time_and_the_flag_leaves_the_budgets_alone() {
        let s = SpinState::new();
        assert!(s.start_writer_spin());
        assert!(!s.start_writer_spin());
        assert_eq!(s.current(Spinner::Writer, CAP), CAP);
        s.end_writer_spin();
        assert!(s.start_writer_spin());
        s.end_writer_spin();
    }
}
