//! The workloads: who runs (readers, writers, mixed tasks), how long a section is, whether it
//! awaits inside, and how much work each task does between two sections.
//!
//! Section and think lengths are calibrated CPU work ([`crate::data::Busy`]) on top of the
//! data work every section does (a reader sums 64 cells, a writer moves a unit between two).

use clap::ValueEnum;

/// The workloads, in the order they run and are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum WorkloadId {
    /// One task taking the read lock in a loop.
    #[value(name = "uncontended-read")]
    UncontendedRead,
    /// One task taking the write lock in a loop.
    #[value(name = "uncontended-write")]
    UncontendedWrite,
    /// 64 tasks, each operation a write with probability 1%.
    #[value(name = "read-mostly")]
    ReadMostly,
    /// 64 tasks, each operation a write with probability 20%.
    #[value(name = "mixed")]
    Mixed,
    /// 240 writers, 5 us sections: the kernel's handoff benchmark.
    #[value(name = "writers-240")]
    Writers240,
    /// 40 readers and 40 writers, short sections: the kernel's mixed case.
    #[value(name = "mixed-40-40")]
    Mixed40x40,
    /// 240 writers whose sections are the data work alone (a few ns): the convoy case.
    #[value(name = "writers-240-tiny")]
    Writers240Tiny,
    /// 40 readers and 40 writers whose sections are the data work alone (a few ns).
    #[value(name = "mixed-40-40-tiny")]
    Mixed40x40Tiny,
    /// 8 readers and 8 writers that await inside the section: filebench randomrw.
    #[value(name = "randomrw-8-8")]
    RandomRw8x8,
    /// One writer per worker thread and 32 readers: the sysfs/kernfs case.
    #[value(name = "sysfs")]
    Sysfs,
    /// 64 readers, no writer.
    #[value(name = "readers-only")]
    ReadersOnly,
    /// A reader holding the lock for 10 ms across an await (a snapshot), with 4 writers and
    /// 16 short readers queuing behind it.
    #[value(name = "long-reader")]
    LongReader,
}

impl WorkloadId {
    /// Every workload, in run order.
    pub const ALL: [WorkloadId; 12] = [
        WorkloadId::UncontendedRead,
        WorkloadId::UncontendedWrite,
        WorkloadId::ReadMostly,
        WorkloadId::Mixed,
        WorkloadId::Writers240,
        WorkloadId::Mixed40x40,
        WorkloadId::Writers240Tiny,
        WorkloadId::Mixed40x40Tiny,
        WorkloadId::RandomRw8x8,
        WorkloadId::Sysfs,
        WorkloadId::ReadersOnly,
        WorkloadId::LongReader,
    ];

    /// The name used on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadId::UncontendedRead => "uncontended-read",
            WorkloadId::UncontendedWrite => "uncontended-write",
            WorkloadId::ReadMostly => "read-mostly",
            WorkloadId::Mixed => "mixed",
            WorkloadId::Writers240 => "writers-240",
            WorkloadId::Mixed40x40 => "mixed-40-40",
            WorkloadId::Writers240Tiny => "writers-240-tiny",
            WorkloadId::Mixed40x40Tiny => "mixed-40-40-tiny",
            WorkloadId::RandomRw8x8 => "randomrw-8-8",
            WorkloadId::Sysfs => "sysfs",
            WorkloadId::ReadersOnly => "readers-only",
            WorkloadId::LongReader => "long-reader",
        }
    }

    /// Looks a workload up by [`WorkloadId::name`].
    pub fn from_name(name: &str) -> Option<WorkloadId> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }

    /// Whether tasks await while holding the lock (then a sync lock does not apply).
    pub fn awaits(self) -> bool {
        matches!(self, WorkloadId::RandomRw8x8 | WorkloadId::LongReader)
    }
}

/// What one task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Read sections only.
    Reader,
    /// Write sections only.
    Writer,
    /// Each operation is a write with probability `write_permille / 1000`, else a read.
    Mixed {
        /// Writes per thousand operations.
        write_permille: u32,
    },
    /// Holds the read lock for `hold_ms` across an await, then sleeps `gap_ms`.
    LongReader {
        /// How long it holds the lock.
        hold_ms: u64,
        /// How long it waits before the next hold.
        gap_ms: u64,
    },
}

impl Role {
    /// Whether this role takes part in the reader figures (the long reader does not: its
    /// few operations would hide the short readers' fairness).
    pub fn reads(self) -> bool {
        matches!(self, Role::Reader | Role::Mixed { .. })
    }

    /// Whether this role takes part in the writer figures.
    pub fn writes(self) -> bool {
        matches!(self, Role::Writer | Role::Mixed { .. })
    }
}

/// A workload made concrete for a number of worker threads.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Which one.
    pub id: WorkloadId,
    /// Tasks to spawn: `(role, how many)`.
    pub tasks: Vec<(Role, usize)>,
    /// Extra work inside a read section, in ns.
    pub read_ns: u64,
    /// Extra work inside a write section, in ns.
    pub write_ns: u64,
    /// Work between two sections (outside the lock), in ns.
    pub think_ns: u64,
    /// Time one acquire in this many (1: every acquire). Uncontended cases time one in 16
    /// so that the clock does not dominate what is measured.
    pub time_every: u64,
}

impl Workload {
    /// The workload `id` for `threads` worker threads.
    pub fn new(id: WorkloadId, threads: usize) -> Self {
        let w = |tasks: Vec<(Role, usize)>, read_ns, write_ns, think_ns| Workload {
            id,
            tasks,
            read_ns,
            write_ns,
            think_ns,
            time_every: 1,
        };
        match id {
            WorkloadId::UncontendedRead => Workload {
                time_every: 16,
                ..w(vec![(Role::Reader, 1)], 0, 0, 0)
            },
            WorkloadId::UncontendedWrite => Workload {
                time_every: 16,
                ..w(vec![(Role::Writer, 1)], 0, 0, 0)
            },
            WorkloadId::ReadMostly => w(
                vec![(Role::Mixed { write_permille: 10 }, 64)],
                100,
                100,
                200,
            ),
            WorkloadId::Mixed => w(
                vec![(
                    Role::Mixed {
                        write_permille: 200,
                    },
                    64,
                )],
                100,
                100,
                200,
            ),
            WorkloadId::Writers240 => w(vec![(Role::Writer, 240)], 0, 5_000, 0),
            WorkloadId::Mixed40x40 => {
                w(vec![(Role::Reader, 40), (Role::Writer, 40)], 100, 100, 100)
            }
            WorkloadId::Writers240Tiny => w(vec![(Role::Writer, 240)], 0, 0, 0),
            WorkloadId::Mixed40x40Tiny => {
                w(vec![(Role::Reader, 40), (Role::Writer, 40)], 0, 0, 100)
            }
            WorkloadId::RandomRw8x8 => w(vec![(Role::Reader, 8), (Role::Writer, 8)], 500, 500, 500),
            WorkloadId::Sysfs => w(
                vec![(Role::Writer, threads.max(1)), (Role::Reader, 32)],
                200,
                1_000,
                500,
            ),
            WorkloadId::ReadersOnly => w(vec![(Role::Reader, 64)], 100, 0, 100),
            WorkloadId::LongReader => w(
                vec![
                    (
                        Role::LongReader {
                            hold_ms: 10,
                            gap_ms: 5,
                        },
                        1,
                    ),
                    (Role::Writer, 4),
                    (Role::Reader, 16),
                ],
                100,
                100,
                1_000,
            ),
        }
    }

    /// Total number of tasks.
    pub fn task_count(&self) -> usize {
        self.tasks.iter().map(|(_, n)| n).sum()
    }

    /// Whether tasks await while holding the lock.
    pub fn awaits(&self) -> bool {
        self.id.awaits()
    }
}
