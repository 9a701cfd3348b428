//! Which waiters are parked threads. A blocking acquire (`blocking_read`, `try_write_for`
//! and the rest) polls its acquire future inside [`parking`], and a node queued during such
//! a poll is marked ([`WaiterInner::parks`](super::list::WaiterInner::parks)).
//!
//! The flag changes two things. A thread that would park spins for the policy's whole cap
//! (`writer_spin`, `reader_spin`) whatever the lock's spins taught (`spin.rs`): the learned
//! budget keeps a task from holding a worker its executor could give to other tasks, and
//! a thread about to park has nothing else to run, while its park costs a wake-up. The
//! writer of 1 writer and 4 reader threads on 2 cores had learned a budget of zero (its
//! spins on a lock readers keep taking run out), and every write was a park and one or two
//! wake-ups; spinning its cap, it wins at a moment the readers leave (the figures:
//! `docs/performance.md`, "Round sixteen").
//!
//! And a node queued by such a poll is marked: the bound in count on passing
//! (`Policy::pass_bound`) does not serve a head that is a parked thread, and queued readers
//! are not granted past such a head writer (`fair.rs`, `wake.rs`). A turn of the queue
//! given to a parked thread costs that thread's wake-up, and the lock sits idle until the
//! thread runs, which on a busy machine is a scheduler's time slice away; given after
//! every pass, as to a task, it made every operation of 4 writer and 4 reader threads a
//! wake-up (about 100k operations/s on 2 cores, against 7M without the bound). Such a head is served by the
//! bound in time, `Policy::handoff_timeout`, as the kernel serves its threads and
//! `parking_lot` its (eventual fairness, every 0.5 ms). Once a release has woken it to
//! compete, it is left to claim the lock when it runs, as the kernel's writer does: it
//! takes a free lock, or asks for the handoff at once (a lost race); until then no
//! release wakes it again or reads the clock for a timed grant (`wake_writer`).
//!
//! The mark is a thread-local flag read at the enqueue, under the wait lock: no foreign
//! code, no allocation. In the loom models it is always off (loom's threads share one
//! OS thread, and none parks).

#[cfg(not(all(test, async_rwsem_loom)))]
use std::cell::Cell;

#[cfg(not(all(test, async_rwsem_loom)))]
thread_local! {
    /// Set while this thread polls an acquire future for a blocking acquire.
    static PARKING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `poll` as a blocking acquire's poll: a node it queues is marked as a parked
/// thread's. The flag is restored on the way out, panics included.
#[cfg(not(all(test, async_rwsem_loom)))]
pub(crate) fn parking<R>(poll: impl FnOnce() -> R) -> R {
    /// Restores the flag as it was (a blocking acquire inside a waker's `wake`, say).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = PARKING.try_with(|flag| flag.set(self.0));
        }
    }
    // In a thread-local destructor the flag may be gone: then nothing is marked.
    let _restore = PARKING
        .try_with(|flag| flag.replace(true))
        .ok()
        .map(Restore);
    poll()
}

/// As above; the loom models park no thread.
#[cfg(all(test, async_rwsem_loom))]
pub(crate) fn parking<R>(poll: impl FnOnce() -> R) -> R {
    poll()
}

/// Is this thread inside [`parking`]?
#[inline]
pub(crate) fn parks() -> bool {
    #[cfg(not(all(test, async_rwsem_loom)))]
    {
        PARKING.try_with(Cell::get).unwrap_or(false)
    }
    #[cfg(all(test, async_rwsem_loom))]
    {
        false
    }
}

#[cfg(all(test, not(async_rwsem_loom)))]
mod tests {
    use super::{parking, parks};

    #[test]
    fn the_flag_is_set_inside_and_restored_after_nesting_and_panics() {
        assert!(!parks());
        parking(|| {
            assert!(parks());
            parking(|| assert!(parks()));
            assert!(parks());
        });
        assert!(!parks());
        let caught = std::panic::catch_unwind(|| parking(|| panic!("inside")));
        assert!(caught.is_err());
        assert!(!parks());
    }
}
