//! What the count word and the wait list know at one instant, for
//! [`RwLock::snapshot`](crate::RwLock::snapshot); and what the typed layer's diagnostics
//! read of the lock's own state (the warning thresholds, the head's wait record).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::count::{readers, HANDOFF, UPGRADABLE, WRITER_LOCKED};
use super::list::WaiterKind;
use super::RawRwLock;

/// The raw lock's part of a snapshot.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawSnapshot {
    pub(crate) readers: usize,
    pub(crate) writer: bool,
    pub(crate) upgradable: bool,
    pub(crate) queued_readers: usize,
    pub(crate) queued_upgradable: usize,
    pub(crate) queued_writers: usize,
    pub(crate) queued_upgrade: bool,
    /// How long the head has been queued (a writer's queue time, the handoff clock).
    pub(crate) head_waited: Option<Duration>,
    /// The head's [`WaitRecord`](super::list::WaitRecord) `since` (0: none).
    #[cfg(feature = "lock_stat")]
    pub(crate) head_since: u64,
    pub(crate) handoff: bool,
}

/// The head of the queue, waiting past a threshold.
#[cfg(all(feature = "lock_stat", feature = "tracing"))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadWait {
    pub(crate) kind: WaiterKind,
    pub(crate) site: Option<&'static std::panic::Location<'static>>,
    pub(crate) waited_ns: u64,
}

impl RawRwLock {
    /// The count word and the wait list, read together under the wait lock (taken for the
    /// walk of the list, then released: nothing else is waited for).
    pub(crate) fn snapshot(&self) -> RawSnapshot {
        let list = self.wait_lock();
        let count = self.count.load(Relaxed);
        let writer = count & WRITER_LOCKED != 0;
        let upgradable = count & UPGRADABLE != 0;
        let mut snap = RawSnapshot {
            // Beside a writer the reader count holds only passing readers' biases.
            readers: if writer {
                0
            } else {
                readers(count).saturating_sub(usize::from(upgradable))
            },
            writer,
            upgradable,
            handoff: count & HANDOFF != 0,
            ..RawSnapshot::default()
        };
        let now = self.clock.now();
        if let Some(head) = list.head() {
            // SAFETY: linked nodes are alive and we hold the wait lock; the closure
            // touches this node only.
            unsafe {
                head.as_ref().with_inner(|inner| {
                    snap.head_waited = inner
                        .due
                        .and_then(|due| due.checked_sub(self.policy.handoff_timeout()))
                        .map(|queued_at| now.saturating_duration_since(queued_at));
                    #[cfg(feature = "lock_stat")]
                    {
                        snap.head_since = inner.record.since;
                    }
                });
            }
        }
        let mut cursor = list.head();
        while let Some(node) = cursor {
            // SAFETY: linked nodes are alive; `kind` is immutable.
            match unsafe { node.as_ref() }.kind {
                WaiterKind::Read => snap.queued_readers += 1,
                WaiterKind::UpgradableRead => snap.queued_upgradable += 1,
                WaiterKind::Write => snap.queued_writers += 1,
                WaiterKind::Upgrade => snap.queued_upgrade = true,
            }
            // SAFETY: linked, and we hold the wait lock.
            cursor = unsafe { list.next(node) };
        }
        drop(list);
        snap
    }

    /// The "warn when held longer than" threshold, in nanoseconds (`u64::MAX`: never).
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[inline]
    pub(crate) fn warn_held_ns(&self) -> u64 {
        self.policy.warn_held_ns()
    }

    /// The "warn when waited longer than" threshold, in nanoseconds (`u64::MAX`: never).
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    #[inline]
    pub(crate) fn warn_waited_ns(&self) -> u64 {
        self.policy.warn_waited_ns()
    }

    /// The head of the queue, if it has waited longer than `threshold_ns` at `now` (both
    /// on the clock of its [`WaitRecord`](super::list::WaitRecord)) and was not reported
    /// yet (it is marked reported). Takes the wait lock only if waiters are queued; runs
    /// no foreign code.
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    pub(crate) fn head_waiting_past(&self, threshold_ns: u64, now: u64) -> Option<HeadWait> {
        if self.count.load(Relaxed) & super::count::WAITERS == 0 {
            return None;
        }
        let list = self.wait_lock();
        let head = list.head()?;
        // SAFETY: linked nodes are alive and we hold the wait lock.
        let waiter = unsafe { head.as_ref() };
        let kind = waiter.kind;
        // SAFETY: as above; the closure touches this node only.
        let report = unsafe {
            waiter.with_inner(|inner| {
                let record = &mut inner.record;
                let waited = now.saturating_sub(record.since);
                if record.since == 0 || record.reported || waited <= threshold_ns {
                    return None;
                }
                record.reported = true;
                Some((record.site, waited))
            })
        };
        drop(list);
        report.map(|(site, waited_ns)| HeadWait {
            kind,
            site,
            waited_ns,
        })
    }
}
