//! tokio's cooperative scheduling (feature `tokio`): every async acquire takes one unit of
//! the task's budget, as tokio's own lock does, so that a task which keeps taking a free
//! lock still yields to its neighbours once its budget is spent.
//!
//! The budget is taken once the lock is owned, as tokio's semaphore has taken it since
//! tokio 1.54: a task whose budget is spent yields *holding* the lock, and the acquire
//! completes at its next poll. Taking it before the acquire instead would yield before
//! queueing, and let later arrivals pass a task that has already returned `Pending`,
//! against [`Policy::fifo`](crate::Policy::fifo)'s promise.
//!
//! Outside a tokio runtime (another executor, or a thread that blocks on the acquire),
//! tokio's budget is unconstrained: the check is one thread-local read and never yields.
//! The blocking acquires run their futures unconstrained, so that a blocked thread never
//! waits for a wake-up that tokio defers to the end of a task's poll.
//!
//! # One acquire in [`CHARGE_EVERY`]
//!
//! tokio's budget check (`coop::poll_proceed`: its thread-local context, the budget's
//! decrement and its restore guard) costs about as much as the uncontended acquire itself
//! (the figures: `docs/performance.md`, "The budget once in eight"). So the default policy charges it
//! once every [`CHARGE_EVERY`] async acquires of a thread, counted in a thread-local
//! integer: the other acquires cost an increment. A task that loops on a free lock still
//! yields to its neighbours, after `CHARGE_EVERY` times as many acquires as with tokio's
//! lock (`tests/coop.rs`). Under [`Policy::fifo`](crate::Policy::fifo) (`strict_order`)
//! every acquire is charged, as tokio's lock charges it, so that a loop yields after the
//! same acquire as with tokio's lock.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::coop;

use crate::raw::RawRwLock;

/// The default policy charges tokio's budget once in this many async acquires of a
/// thread (see the module documentation).
pub(crate) const CHARGE_EVERY: u32 = 8;

thread_local! {
    /// Async acquires on this thread since tokio's budget was last charged.
    static UNCHARGED: Cell<u32> = const { Cell::new(0) };
}

/// Is this acquire of `raw` to be charged to tokio's budget ([`Proceed`])? Every acquire
/// of a lock under a strict order; else one in [`CHARGE_EVERY`] async acquires of this
/// thread, counted here. A plain function, not a future, so that the acquires not charged
/// await nothing more.
#[inline]
pub(crate) fn charge_due(raw: &RawRwLock) -> bool {
    raw.policy_strict_order()
        || UNCHARGED.with(|n| {
            let next = n.get() + 1;
            let due = next >= CHARGE_EVERY;
            n.set(if due { 0 } else { next });
            due
        })
}

/// Takes one unit of the task's budget, yielding first if it is spent (an acquire that
/// [`charge_due`] picked, once the lock is owned: a task whose budget is spent yields
/// holding the lock, as with tokio's semaphore).
#[derive(Debug)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub(crate) struct Proceed;

impl Future for Proceed {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match coop::poll_proceed(cx) {
            Poll::Ready(restore) => {
                // The lock is owned: this is progress, and the unit stays spent.
                restore.made_progress();
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// `future`, run outside tokio's budget (see the module documentation).
#[inline]
pub(crate) fn unconstrained<F: Future>(future: F) -> coop::Unconstrained<F> {
    coop::unconstrained(future)
}
