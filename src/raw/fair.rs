//! Fair unlocks on demand (`parking_lot`'s `unlock_fair`): a release that hands the lock to
//! the head of the queue instead of leaving it to whoever comes first.
//!
//! The owner asks for the handoff before it lets go: under the wait lock, with someone
//! queued, it sets `HANDOFF` (if the head does not have it already), then releases as
//! usual. From then on no arrival may take the lock (every fast path, steal, spin and
//! queued non-head writer fails on `HANDOFF`), and the release that leaves the lock to the
//! head grants it directly, as for a head that waited past the timeout (`wake.rs`: a head
//! writer in `wake_writer`, a head reader with the queued readers in `mark_wake`). A reader
//! that is not the last one out leaves `HANDOFF` to the last: the head is next whoever
//! that is. The head clears the bit when it gets the lock; a cancelled head passes it on
//! (`waiter.rs` `cancel`), as for any handoff.

use std::sync::atomic::Ordering::Relaxed;

use super::count::{HANDOFF, WAITERS};
use super::list::WaiterKind;
use super::RawRwLock;

impl RawRwLock {
    /// Releases a lock of `kind` fairly: if anyone is queued at the time, the head is
    /// handed the lock, and nobody takes it in between. With nobody queued, a plain
    /// release.
    ///
    /// # Safety
    ///
    /// As for [`unlock`](Self::unlock): the caller owns a lock of `kind` (an upgrade: the
    /// write lock) and gives it up.
    pub(crate) unsafe fn unlock_fair(&self, kind: WaiterKind) {
        if self.count.load(Relaxed) & WAITERS != 0 {
            self.handoff_to_head();
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.unlock(kind) }
    }

    /// Sets `HANDOFF` for the head, if anyone is queued, while the caller still owns the
    /// lock (so the release to come is the one that grants the head). `HANDOFF` changes
    /// only under the wait lock, and implies `WAITERS`: the list is checked under it.
    #[cold]
    fn handoff_to_head(&self) {
        let list = self.wait_lock();
        if !list.is_empty() {
            self.count.fetch_or(HANDOFF, Relaxed);
        }
    }
}
