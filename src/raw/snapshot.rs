//! What the count word and the wait list know at one instant, for
//! [`RwLock::snapshot`](crate::RwLock::snapshot); and, under `lock_stat`, what the
//! observers read of the lock's own state (the warning thresholds, the head's wait).

use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use super::count::{readers, HANDOFF, UPGRADABLE, WRITER_LOCKED};
use super::list::{Waiter, WaiterKind};
use super::RawRwLock;
use crate::loom::Instant;

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
    pub(crate) head_waited: Option<Duration>,
    pub(crate) handoff: bool,
}

/// The head of the queue, waiting past a threshold (features `lock_stat` and `tracing`).
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
            // SAFETY: linked nodes are alive and we hold the wait lock.
            snap.head_waited = unsafe { head_waited(head, now) };
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

    /// The head of the queue, if it has waited longer than `threshold_ns` and was not
    /// reported yet (it is marked reported). Takes the wait lock only if waiters are
    /// queued; runs no foreign code.
    #[cfg(all(feature = "lock_stat", feature = "tracing"))]
    pub(crate) fn head_waiting_past(&self, threshold_ns: u64) -> Option<HeadWait> {
        if self.count.load(Relaxed) & super::count::WAITERS == 0 {
            return None;
        }
        let now = crate::lock_stat::now_ns();
        let list = self.wait_lock();
        let head = list.head()?;
        // SAFETY: linked nodes are alive and we hold the wait lock.
        let waiter = unsafe { head.as_ref() };
        let kind = waiter.kind;
        // SAFETY: as above; the closure touches this node only.
        let report = unsafe {
            waiter.with_inner(|inner| {
                let waited = now.saturating_sub(inner.stat.since);
                if inner.stat.since == 0 || inner.stat.reported || waited <= threshold_ns {
                    return None;
                }
                inner.stat.reported = true;
                Some((inner.stat.site, waited))
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

/// How long the linked `node` has waited at `now`: a writer's queue time (the handoff
/// clock); any node's wait start under `lock_stat`. `None` if unknown.
///
/// # Safety
///
/// `node` is linked and the caller holds the wait lock.
unsafe fn head_waited(node: NonNull<Waiter>, now: Instant) -> Option<Duration> {
    // SAFETY: caller's contract; the closure touches this node only.
    unsafe {
        node.as_ref().with_inner(|inner| {
            #[cfg(feature = "lock_stat")]
            if inner.stat.since != 0 {
                let waited = crate::lock_stat::now_ns().saturating_sub(inner.stat.since);
                return Some(Duration::from_nanos(waited));
            }
            inner.queued_at.map(|t| now.saturating_duration_since(t))
        })
    }
}
