//! The count word: one `AtomicUsize` that holds the whole lock state, encoded as the
//! kernel encodes `rw_semaphore::count` (`kernel/locking/rwsem.c`).
//!
//! ```text
//!  usize::BITS-1          8   7      6         5         4         3          2         1         0
//! +---------------+-----------+------+---------+---------+---------+----------+---------+---------+---------------+
//! | READ_FAIL     | readers   | rsvd | RQUEUED | WQUEUED | PENDING | UPGRADBL | HANDOFF | WAITERS | WRITER_LOCKED |
//! +---------------+-----------+------+---------+---------+---------+----------+---------+---------+---------------+
//! ```
//!
//! Invariants (checked by the tests and the loom models):
//! - `WAITERS`, `HANDOFF`, `WRITER_QUEUED` and `READER_QUEUED` change only while the wait
//!   lock is held; whenever it is released, `WAITERS` is set exactly when the wait list is
//!   not empty, `HANDOFF` implies `WAITERS`, `WRITER_QUEUED` is set exactly when a writer
//!   or an upgrade is linked in it, and `READER_QUEUED` exactly when a reader or an
//!   upgradable reader is.
//! - `WRITER_LOCKED` set means exactly one writer owns the lock, and then the reader
//!   count holds only transient biases of readers on their way to the wait queue.
//! - The idle value, unlocked with nobody waiting, is `0`.
//!
//! # Where each flag is set and cleared
//!
//! As `rwsem.c` lists them at `RWSEM_FLAG_HANDOFF`, so that "where is the handoff set?"
//! has an answer here (file names are siblings of this one):
//!
//! | flag | set by | cleared by |
//! |---|---|---|
//! | `WRITER_LOCKED` | `write.rs`: the fast path (which is `try_write` too) and the spinner (one CAS from 0); `wake.rs` `queued_write_lock`: a queued writer (`try_write_lock`), the head granted under handoff (`wake_writer`), the upgrade (`upgrade_at_head`); `upgradable.rs` `try_upgrade` | `write.rs` `unlock_write`; `upgradable.rs` `downgrade`, `downgrade_to_upgradable` |
//! | `WAITERS` | the first waiter to queue, under the wait lock: `read.rs` `read_queue`, `write.rs` `write_queue`, `upgradable.rs` `upgradable_queue` and `upgrade_queue` | `wake.rs`: `queued_write_lock` (the last waiter takes the lock), `mark_wake` (every waiter granted); `waiter.rs` `unlink_waiting` (the last waiter leaves: a cancel or a stopped upgrade) |
//! | `HANDOFF` | only for the head, under the wait lock: `write.rs` `try_write_lock` (a head writer woken that lost a race, or past the timeout); `wake.rs` `mark_wake` (a reader head finds a writer holding the lock); `upgradable.rs` `upgrade_queue` (the upgrade queues at the head); `fair.rs` `handoff_to_head` (an owner's `unlock_fair`, just before its release, with waiters queued) and `handoff_to_head_locked` (a pass of the queue that reaches `Policy::pass_bound`, unless the head is a parked thread: `bound_reached`, from `writer_passed_queue`, `queued_writer_passed`, `reader_passed_queue`); `wake.rs` `mark_wake` for a head writer that queued readers pass once | `wake.rs`: `queued_write_lock` (the head takes the write lock; an upgrade served ahead of a head already due the handoff leaves it set for that head), `mark_wake` (the reader head is granted, or everyone is); `waiter.rs` `unlink_waiting` (the list empties; otherwise the next head inherits the bit) |
//! | `OWNER_PENDING` | `wake.rs` `wake_writer` (in the one CAS that sets `WRITER_LOCKED`, granting a woken head writer at a release: `queued_write_lock`) | `waiter.rs`: the granted writer's next poll (`LockFuture::poll`, or `poll_slow`), or `cancel` before it releases a grant it never polled |
//! | `WRITER_QUEUED` | the first writer or upgrade to queue, under the wait lock: `write.rs` `write_queue`, `upgradable.rs` `upgrade_queue` | `wake.rs` `queued_write_lock` (the last writer or upgrade queued takes the lock); `mod.rs` `WaitLock`'s release (`sync_queued`), once no writer or upgrade is linked (after a cancel) |
//! | `READER_QUEUED` | `read.rs` `read_queue` (the first reader to queue, in its add); `mod.rs` `WaitLock`'s release (`sync_queued`), when a reader or upgradable reader is linked (an upgradable reader queued) | `wake.rs` `mark_wake` (the last queued readers granted); `mod.rs` `WaitLock`'s release (`sync_queued`), once none is (after a cancel) |
//! | `UPGRADABLE` | `upgradable.rs` `try_upgradable_read`, `downgrade_to_upgradable`; `wake.rs` `mark_wake` (a queued upgradable reader granted) | `upgradable.rs` `unlock_upgradable`, `downgrade_upgradable`, `try_upgrade`; `wake.rs` `queued_write_lock` (the upgrade trades it in); `waiter.rs` `cancel` (a dropped upgrade) |
//!
//! Reader biases are added by every arriving reader (`read.rs` `read_fast`, taken back by
//! one that queues) and by `wake.rs` `mark_wake` for each reader it grants (plus a
//! transient check bias it keeps for the head or takes back).

/// A writer owns the lock. Set by a CAS from 0, or by a queued waiter taking the lock
/// (see the table above); cleared by the owner's unlock or downgrade.
pub(crate) const WRITER_LOCKED: usize = 0b0000_0001;

/// The wait list is not empty. Changed only under the wait lock; makes every fast path
/// fail so that arrivals go through the slow path, and every unlock check for a wake-up.
pub(crate) const WAITERS: usize = 0b0000_0010;

/// The head waiter is due the lock: nobody but the head may take it. Changed only under
/// the wait lock, set only by or for the head (it waited past the handoff timeout, lost a
/// race after a wake-up, is an upgrade, or an owner unlocks fairly), cleared when the head
/// gets the lock or the list empties; a cancelled head passes it to the next one. Also set
/// (for the head, under the wait lock) by the pass of the queue that reaches the policy's
/// pass bound. Every site is in the table above.
pub(crate) const HANDOFF: usize = 0b0000_0100;

/// An upgradable reader holds the lock (at most one at a time). Set together with that
/// reader's bias and cleared together with it (or with the bias traded for
/// `WRITER_LOCKED` by an upgrade); plain readers share the lock with it, writers and other
/// upgradable readers do not.
pub(crate) const UPGRADABLE: usize = 0b0000_1000;

/// The write lock was granted to a queued writer whose task has not run since: the owner
/// is not running, so spinning for it is pointless (the async form of the kernel's
/// `owner->on_cpu` check). Set only together with `WRITER_LOCKED`, by the grant at a
/// release (`wake.rs` `wake_writer`); cleared by that owner when its future next runs
/// (`waiter.rs`), or before the release of a grant it never polled (`cancel`).
pub(crate) const OWNER_PENDING: usize = 0b0001_0000;

/// A writer or an upgrade is linked in the wait list (queued readers alone leave it
/// clear). Changed only under the wait lock: set by a writer or upgrade that queues, cleared
/// by the last one's taking the lock, or when the wait lock is released with no writer or
/// upgrade left in the list (see the table above). No fast path looks at it; it is what the read guards' `writer_waiting` reads.
/// `WAITERS` cannot say it: it is set for queued readers too.
pub(crate) const WRITER_QUEUED: usize = 0b0010_0000;

/// A reader or an upgradable reader is linked in the wait list. Changed only under the
/// wait lock: set by the first reader to queue, in the add that takes its bias back, and
/// cleared in the grant of the last queued readers; the wait lock's release (`sync_queued`)
/// sets or clears it where a path left it wrong (an upgradable reader queued, a cancel)
/// (see the table above). No fast path looks at it: it is the
/// spinner's hint of the crowded runtime's rule (`Policy::crowded_handoff`), which hands the
/// lock to the head at every release only while readers are queued.
pub(crate) const READER_QUEUED: usize = 0b0100_0000;

/// Bit 7 is free.
#[allow(dead_code)] // documents the layout.
pub(crate) const RESERVED: usize = 0b1000_0000;

/// Shift of the reader count.
pub(crate) const READER_SHIFT: u32 = 8;

/// One reader. Added by every reader arriving (fast path), kept by a reader that gets the
/// lock, removed again by one that queues; added by the waker for each reader it grants.
pub(crate) const READER_BIAS: usize = 0b1_0000_0000;

/// Guard bit: the reader count must never reach it. A reader that sees it set backs out
/// and panics, so the count never wraps into the flag bits.
pub(crate) const READ_FAIL: usize = 1 << (usize::BITS - 1);

/// All reader bits (the count and the guard), as the kernel's `RWSEM_READER_MASK`.
pub(crate) const READER_MASK: usize = !(READER_BIAS - 1);

/// Bits that mean the lock is owned.
pub(crate) const LOCK_MASK: usize = WRITER_LOCKED | READER_MASK;

/// A reader's fast path fails if any of these is set in the value before its add.
pub(crate) const READ_FAILED_MASK: usize = WRITER_LOCKED | WAITERS | HANDOFF | READ_FAIL;

/// The number of readers (owners and transient biases) in `count`.
#[inline]
pub(crate) const fn readers(count: usize) -> usize {
    (count & READER_MASK & !READ_FAIL) >> READER_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_do_not_overlap() {
        let flags = [
            WRITER_LOCKED,
            WAITERS,
            HANDOFF,
            UPGRADABLE,
            OWNER_PENDING,
            WRITER_QUEUED,
            READER_QUEUED,
            RESERVED,
            READER_MASK,
        ];
        for (i, a) in flags.iter().enumerate() {
            for b in &flags[i + 1..] {
                assert_eq!(a & b, 0, "{a:#b} overlaps {b:#b}");
            }
        }
        assert_eq!(flags.iter().fold(0, |acc, f| acc | f), usize::MAX);
        assert_eq!(READ_FAILED_MASK & READER_BIAS, 0);
        assert_eq!(readers((3 * READER_BIAS) | WAITERS | WRITER_LOCKED), 3);
        assert_eq!(readers(READ_FAIL), 0);
    }
}
