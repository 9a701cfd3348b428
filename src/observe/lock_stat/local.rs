//! What `lock_stat` keeps per thread: its part of a thread's block of a lock
//! ([`LocalBlock`], in [`crate::observe::per_thread::Block`]), written by that thread alone
//! (plain loads and stores of relaxed atomics, no read-modify-write) and folded when the
//! statistics are read, as the kernel keeps `lock_stat` per CPU; and its state in the
//! thread's thread-local ([`LocalState`]): the sampling countdowns and the lease of the
//! coarse clock.

use std::cell::Cell;
use std::sync::atomic::AtomicU64;

use super::histogram::Recorder;
use super::Access;

/// One thread's counters and histograms for one lock (or the lock's shared ones).
#[derive(Debug)]
pub(crate) struct LocalBlock {
    /// Read (and upgradable read) acquisitions, and write ones, that neither waited nor
    /// were timed: each a wait of zero and a hold not timed, counted with one add.
    pub(super) fast_reads: AtomicU64,
    pub(super) fast_writes: AtomicU64,
    pub(super) read_wait: Recorder,
    pub(super) read_hold: Recorder,
    pub(super) write_wait: Recorder,
    pub(super) write_hold: Recorder,
    pub(super) read_contentions: AtomicU64,
    pub(super) write_contentions: AtomicU64,
}

impl LocalBlock {
    pub(crate) const fn new() -> Self {
        Self {
            fast_reads: AtomicU64::new(0),
            fast_writes: AtomicU64::new(0),
            read_wait: Recorder::new(),
            read_hold: Recorder::new(),
            write_wait: Recorder::new(),
            write_hold: Recorder::new(),
            read_contentions: AtomicU64::new(0),
            write_contentions: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(super) fn wait_of(&self, access: Access) -> (&Recorder, &AtomicU64) {
        match access {
            Access::Write => (&self.write_wait, &self.write_contentions),
            _ => (&self.read_wait, &self.read_contentions),
        }
    }

    #[inline(always)]
    pub(super) fn fast_of(&self, access: Access) -> &AtomicU64 {
        match access {
            Access::Write => &self.fast_writes,
            _ => &self.fast_reads,
        }
    }

    #[inline]
    pub(super) fn hold_of(&self, access: Access) -> &Recorder {
        match access {
            Access::Write => &self.write_hold,
            _ => &self.read_hold,
        }
    }
}

/// `lock_stat`'s state in a thread's thread-local.
#[derive(Debug)]
pub(crate) struct LocalState {
    /// Read (and upgradable read) holds, and write holds, left until the next timed one.
    read_left: Cell<u32>,
    write_left: Cell<u32>,
    /// Contended read (and upgradable read) waits, and write ones (upgrades included),
    /// left until the next timed one.
    read_wait_left: Cell<u32>,
    write_wait_left: Cell<u32>,
    /// This thread's last renewal of the coarse clock's lease.
    pub(super) lease: Cell<u64>,
}

impl LocalState {
    pub(crate) const fn new() -> Self {
        Self {
            read_left: Cell::new(0),
            write_left: Cell::new(0),
            read_wait_left: Cell::new(0),
            write_wait_left: Cell::new(0),
            lease: Cell::new(0),
        }
    }

    #[inline(always)]
    fn left(&self, access: Access) -> &Cell<u32> {
        match access {
            Access::Write => &self.write_left,
            _ => &self.read_left,
        }
    }

    /// Counts a hold in mode `access` (that did not wait) that is not timed, if this
    /// thread's sample is not due: `false` if it is (the hold is to be timed; then call
    /// [`sample`](Self::sample)).
    #[inline(always)]
    pub(super) fn skip(&self, access: Access) -> bool {
        let left = self.left(access);
        match left.get() {
            0 => false,
            n => {
                left.set(n - 1);
                true
            }
        }
    }

    /// Is this thread's next contended wait in mode `access` to be timed? One in `every`
    /// per thread and mode, the first one included.
    #[inline]
    pub(super) fn sample_wait(&self, access: Access, every: u32) -> bool {
        let left = match access {
            Access::Write => &self.write_wait_left,
            _ => &self.read_wait_left,
        };
        Self::countdown(left, every)
    }

    /// Is this thread's next hold in mode `access` (that did not wait) to be timed? One in
    /// `every` per thread and mode, the first one included.
    #[inline]
    pub(super) fn sample(&self, access: Access, every: u32) -> bool {
        Self::countdown(self.left(access), every)
    }

    /// Counts one down on `left`: `true` (and `left` set to `every - 1`) at 0.
    #[inline]
    fn countdown(left: &Cell<u32>, every: u32) -> bool {
        match left.get() {
            0 => {
                left.set(every - 1);
                true
            }
            n => {
                left.set(n - 1);
                false
            }
        }
    }
}
