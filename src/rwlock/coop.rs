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

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::coop;

/// Takes one unit of the task's budget, yielding first if it is spent.
#[inline]
pub(crate) fn proceed() -> Proceed {
    Proceed
}

/// The future of [`proceed`].
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
