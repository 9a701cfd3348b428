//! The shared data every critical section works on, and the calibrated busy work that gives
//! a section (or the think time between two sections) its length.
//!
//! Sections do real work on real data and check an invariant, so that a lock that lets a
//! writer in beside anybody else is caught, not just measured:
//! - `cells` always sum to zero (wrapping): a writer moves a unit from one cell to another
//!   in two separate stores, so a reader that runs beside a writer can see a sum that is off;
//! - `version` is even outside a write section: a writer makes it odd on entry and even on
//!   exit with two `fetch_add`s whose results it checks, so two writers inside at once are
//!   seen; readers check that it is even and unchanged across their section;
//! - `writes` counts the write sections; the runner compares it with the number of write
//!   operations the tasks did, so a lost update is seen.
//!
//! A violation panics with a message naming the invariant; the runner reports it as an error
//! for that lock and the process exits non-zero at the end.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Number of cells in [`Shared`]: a reader sums all of them (a short scan of 512 bytes).
pub const CELLS: usize = 64;

/// The data protected by every lock under test.
#[derive(Debug)]
pub struct Shared {
    version: AtomicU64,
    cells: Vec<u64>,
    writes: u64,
}

impl Default for Shared {
    fn default() -> Self {
        Self::new()
    }
}

impl Shared {
    /// Fresh data: all cells zero, no writes.
    pub fn new() -> Self {
        Self {
            version: AtomicU64::new(0),
            cells: vec![0; CELLS],
            writes: 0,
        }
    }

    /// Number of completed write sections.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Start of a read section: the version a reader saw (must be even: no writer inside).
    pub fn read_begin(&self) -> u64 {
        let v = self.version.load(Ordering::Acquire);
        assert!(
            v % 2 == 0,
            "lock broken: a reader entered while a writer was inside (version {v} is odd)"
        );
        v
    }

    /// The read work: sum every cell; the sum must be zero.
    pub fn read_work(&self) -> u64 {
        let sum = black_box(&self.cells)
            .iter()
            .fold(0u64, |a, &c| a.wrapping_add(c));
        assert!(
            sum == 0,
            "lock broken: a reader saw a half-done write (cells sum to {sum}, not 0)"
        );
        sum
    }

    /// End of a read section: the version must not have moved since [`Shared::read_begin`].
    pub fn read_end(&self, begun: u64) {
        let v = self.version.load(Ordering::Acquire);
        assert!(
            v == begun,
            "lock broken: a writer ran inside a read section (version {begun} -> {v})"
        );
    }

    /// Start of a write section: the version goes odd; it must have been even.
    pub fn write_begin(&self) -> u64 {
        let old = self.version.fetch_add(1, Ordering::AcqRel);
        assert!(
            old % 2 == 0,
            "lock broken: two writers inside at once (version {old} was odd on entry)"
        );
        old
    }

    /// The write work: move one unit from one cell to another (two separate stores) and count
    /// the write. `seed` picks the cells.
    pub fn write_work(&mut self, seed: u64) {
        let from = (seed as usize) % CELLS;
        let to = (seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % CELLS;
        let to = if to == from { (to + 1) % CELLS } else { to };
        let cells = black_box(&mut self.cells);
        cells[from] = cells[from].wrapping_sub(1);
        cells[to] = cells[to].wrapping_add(1);
        self.writes += 1;
    }

    /// End of a write section: the version goes even again; nobody may have touched it.
    pub fn write_end(&self, begun: u64) {
        let old = self.version.fetch_add(1, Ordering::AcqRel);
        assert!(
            old == begun + 1,
            "lock broken: another writer ran inside a write section (version {} -> {old})",
            begun + 1
        );
    }

    /// A whole read section without an await: begin, work, `busy` more work, end.
    pub fn read_section(&self, busy: Busy) -> u64 {
        let v = self.read_begin();
        let s = self.read_work();
        busy.run();
        self.read_end(v);
        s
    }

    /// A whole write section without an await.
    pub fn write_section(&mut self, seed: u64, busy: Busy) {
        let v = self.write_begin();
        self.write_work(seed);
        busy.run();
        self.write_end(v);
    }
}

/// A calibrated amount of CPU work that does not touch shared memory (a dependent chain of
/// multiply-adds, so the compiler cannot fold it and the CPU cannot overlap it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Busy {
    iters: u64,
}

impl Busy {
    /// Work that takes about `ns` nanoseconds on this machine (see [`calibrate`]).
    pub fn ns(ns: u64) -> Self {
        let per_us = iters_per_us();
        Busy {
            iters: ns.saturating_mul(per_us) / 1000,
        }
    }

    /// Does the work. Never inlined, and `black_box` in the loop keeps the compiler from
    /// folding steps together, so that the calibration holds wherever it is called.
    #[inline(never)]
    pub fn run(self) {
        if self.iters == 0 {
            return;
        }
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..self.iters {
            x = black_box(x)
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
        }
        black_box(x);
    }
}

static ITERS_PER_US: OnceLock<u64> = OnceLock::new();

/// Busy-loop iterations per microsecond, measured once per process.
pub fn iters_per_us() -> u64 {
    *ITERS_PER_US.get_or_init(calibrate)
}

/// Measures how many [`Busy`] iterations make a microsecond here: the fastest of a few
/// rounds of 200,000 iterations (the fastest, because other work may share the machine).
pub fn calibrate() -> u64 {
    const N: u64 = 200_000;
    let mut best = Duration::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        Busy { iters: N }.run();
        best = best.min(t.elapsed());
    }
    let ns = best.as_nanos().max(1) as u64;
    (N * 1000 / ns).max(1)
}
