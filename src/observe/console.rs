//! tokio-console instrumentation, under `cfg(all(tokio_unstable, feature = "tracing"))`:
//! the lock emits the `tracing` spans and events that tokio's own `sync::RwLock` emits
//! under the same cfg, in the shape `console-subscriber` reads, so that tokio-console
//! lists the lock as a resource, with its state and the acquires waiting on it.
//!
//! # What is emitted
//!
//! - **The resource span** (`runtime.resource`, a root span, level TRACE): `concrete_type
//!   = "RwLock"`, `kind = "Sync"`, `is_internal = false`, and `loc.file`, `loc.line`,
//!   `loc.col`: where the lock was constructed (the constructors are `#[track_caller]`
//!   under this cfg). Every constructor is `const`, and a `const fn` cannot make a span,
//!   so the span is made lazily, at the start of the lock's first acquire ([`Resource`]):
//!   the console lists a lock from its first use on (a lock never acquired is not
//!   listed). The span lives as long as the lock; dropping the lock closes it.
//! - **Its state**, events with target `runtime::resource::state_update` emitted inside
//!   the resource span: at creation `max_readers` (the lock's reader limit),
//!   `write_locked = false` and `current_readers = 0`; then `current_readers` (`u64`, `.op
//!   = "add"` or `"sub"`, the upgradable reader counted as a reader) and `write_locked`
//!   (`bool`, `.op = "override"`) at every acquire, release and mode change.
//! - **Async operations**: every async acquire (`read`, `write`, `upgradable_read`, their
//!   owned and timed forms, the upgrades) is wrapped in an async operation ([`OpSpans`]): a
//!   `runtime.resource.async_op` span (`source = "RwLock::read"` and so on,
//!   `inherits_child_attrs = false`) made inside the resource span, a
//!   `runtime.resource.async_op.poll` span made inside it, all three entered at each poll,
//!   and after each poll a `runtime::resource::poll_op` event (`op_name = "poll"`,
//!   `is_ready`), which ties the operation to the task polling it. Its own state, events
//!   with target `runtime::resource::async_op::state_update` inside its span:
//!   `readers_acquired` (`u64`: 0 when made, `1, .op = "add"` once a read or upgradable
//!   read is owned) or `write_locked` (`false` when made, `true` once the write lock is
//!   owned). A timed acquire (`read_timeout`, ...) is one operation named after it, closed
//!   without the lock if the time runs out; a blocking acquire runs the async one, and is
//!   that operation (as tokio's blocking acquires are), outside any task.
//!
//! The spans are made through [`crate::observe`]: the resource at `acquiring`, the state
//! updates at `entered`, `changed` and `released`, the operations by
//! `observe::AsyncOp` where the acquire futures are made. `tests/console.rs` checks every
//! field and the nesting, and reads a lock back through console-subscriber itself.
//!
//! # Where foreign code runs
//!
//! A `tracing` subscriber is foreign code and may panic. Every span and event here is
//! made where a panic leaves the lock consistent: the resource span at the start of an
//! acquire (nothing held or queued yet; a panic there leaves the span unmade, and the next
//! acquire tries again); the state updates once the lock token exists (a panic drops the
//! token, which releases the lock) or after the raw release; the async-op spans where the
//! acquire future is made (nothing held, or for an upgrade the guard, which a panic drops,
//! releasing the lock), their entries before the acquire is polled, and the events after
//! a poll (a panic drops what the poll returned, a guard, which releases the lock; a
//! pending acquire stays queued, and leaves the queue when dropped). No span or event is
//! made under the wait lock.
//!
//! # Order across threads
//!
//! A release is reported after the raw release, so another task's acquire may be reported
//! before it. `current_readers` is a sum of `add`s and `sub`s, which is right in any order;
//! `write_locked` at a writer's release is a snapshot of the count word (`true` if a
//! writer already took the lock again), so the last update read wins.

use std::fmt;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tracing::Span;

use crate::raw::list::WaiterKind;
use crate::raw::RawRwLock;

/// The target of the resource's state updates.
const STATE_UPDATE: &str = "runtime::resource::state_update";
/// The target of an async operation's state updates.
const OP_STATE_UPDATE: &str = "runtime::resource::async_op::state_update";
/// The target of the event after each poll of an async operation.
const POLL_OP: &str = "runtime::resource::poll_op";

/// The per-lock part: where the lock was constructed, and its resource span once made.
pub(crate) struct Resource {
    /// The constructor's caller.
    site: &'static Location<'static>,
    /// The resource span, made at the start of the first acquire.
    span: OnceLock<Span>,
}

impl Resource {
    /// The resource of a lock constructed at the caller's location (every constructor of
    /// the lock up to here is `#[track_caller]` under this cfg).
    #[track_caller]
    #[inline]
    pub(crate) const fn new() -> Self {
        Self {
            site: Location::caller(),
            span: OnceLock::new(),
        }
    }

    /// The resource span of `raw` (whose resource this is), made, with its first state
    /// updates, if this is the first call. Runs a subscriber: call it only where nothing
    /// is held or half-updated. If the subscriber panics, the span is not made, and the
    /// next call tries again.
    #[inline]
    pub(crate) fn span(&self, raw: &RawRwLock) -> &Span {
        self.span.get_or_init(|| self.make(raw.max_readers()))
    }

    #[cold]
    fn make(&self, max_readers: usize) -> Span {
        let span = tracing::trace_span!(
            parent: None,
            "runtime.resource",
            concrete_type = "RwLock",
            kind = "Sync",
            is_internal = false,
            loc.file = self.site.file(),
            loc.line = self.site.line(),
            loc.col = self.site.column(),
        );
        span.in_scope(|| {
            tracing::trace!(
                target: STATE_UPDATE,
                max_readers = max_readers as u64,
                max_readers.op = "override",
            );
            tracing::trace!(
                target: STATE_UPDATE,
                write_locked = false,
                write_locked.op = "override",
            );
            tracing::trace!(
                target: STATE_UPDATE,
                current_readers = 0u64,
                current_readers.op = "override",
            );
        });
        span
    }

    /// The resource span, if made (and enabled): the state updates go nowhere otherwise.
    #[inline]
    fn made(&self) -> Option<&Span> {
        self.span.get().filter(|span| !span.is_disabled())
    }

    /// `raw`, whose resource this is, has turned from being held in mode `from` (`None`:
    /// by this holder not at all) into mode `to` (`None`: released). Emits the state
    /// updates: what the holder gave up first, then what it took. Call it where a
    /// subscriber's panic leaves the lock consistent (see the module documentation).
    pub(crate) fn update(&self, raw: &RawRwLock, from: Option<WaiterKind>, to: Option<WaiterKind>) {
        let Some(span) = self.made() else { return };
        // A guard dropped by an unwind (perhaps the subscriber's own panic): a second
        // panic would abort the process; the update is lost if it panics then.
        crate::observe::foreign(|| Self::emit(span, raw, from, to));
    }

    fn emit(span: &Span, raw: &RawRwLock, from: Option<WaiterKind>, to: Option<WaiterKind>) {
        let (was, is) = (Hold::of(from), Hold::of(to));
        span.in_scope(|| {
            if was.write && !is.write {
                // After a release another writer may own the lock already: say what the
                // count word says. After a downgrade this holder still excludes writers.
                let write_locked = to.is_none() && raw.is_write_locked();
                tracing::trace!(
                    target: STATE_UPDATE,
                    write_locked = write_locked,
                    write_locked.op = "override",
                );
            }
            if was.reader && !is.reader {
                tracing::trace!(
                    target: STATE_UPDATE,
                    current_readers = 1u64,
                    current_readers.op = "sub",
                );
            }
            if is.write && !was.write {
                tracing::trace!(
                    target: STATE_UPDATE,
                    write_locked = true,
                    write_locked.op = "override",
                );
            }
            if is.reader && !was.reader {
                tracing::trace!(
                    target: STATE_UPDATE,
                    current_readers = 1u64,
                    current_readers.op = "add",
                );
            }
        });
    }
}

impl Default for Resource {
    /// As [`new`](Self::new): the caller's location.
    #[track_caller]
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("site", &self.site)
            .field("span", &self.span.get())
            .finish()
    }
}

/// What a holder in one mode counts as, in the resource's state.
#[derive(Clone, Copy)]
struct Hold {
    /// Counted in `current_readers` (a read or the upgradable read lock).
    reader: bool,
    /// Makes `write_locked` true (the write lock, or an upgrade's).
    write: bool,
}

impl Hold {
    fn of(kind: Option<WaiterKind>) -> Self {
        match kind {
            None => Self {
                reader: false,
                write: false,
            },
            Some(WaiterKind::Read | WaiterKind::UpgradableRead) => Self {
                reader: true,
                write: false,
            },
            Some(WaiterKind::Write | WaiterKind::Upgrade) => Self {
                reader: false,
                write: true,
            },
        }
    }
}

/// The spans of one async acquire seen by the console (see the module documentation):
/// made with [`new`](Self::new), entered at each poll by [`poll`](Self::poll).
pub(crate) struct OpSpans {
    resource: Span,
    op: Span,
    poll: Span,
    /// For the write lock (or an upgrade): its state is `write_locked`, not
    /// `readers_acquired`.
    write: bool,
}

impl OpSpans {
    /// The spans of an async acquire of `raw` in mode `kind`, called `source`
    /// (`"RwLock::read"`). Runs a subscriber: call it where nothing is held for this
    /// acquire, or where a panic drops what is (the upgradable read lock of an upgrade, in
    /// the guard the caller still owns).
    pub(crate) fn new(raw: &super::ObservedLock, kind: WaiterKind, source: &'static str) -> Self {
        let resource = raw.observe.console.span(raw).clone();
        let write = Hold::of(Some(kind)).write;
        let (op, poll) = resource.in_scope(|| {
            let op = tracing::trace_span!(
                "runtime.resource.async_op",
                source = source,
                inherits_child_attrs = false,
            );
            let poll = op.in_scope(|| {
                if write {
                    tracing::trace!(
                        target: OP_STATE_UPDATE,
                        write_locked = false,
                        write_locked.op = "override",
                    );
                } else {
                    tracing::trace!(
                        target: OP_STATE_UPDATE,
                        readers_acquired = 0u64,
                        readers_acquired.op = "override",
                    );
                }
                tracing::trace_span!("runtime.resource.async_op.poll")
            });
            (op, poll)
        });
        Self {
            resource,
            op,
            poll,
            write,
        }
    }

    /// One poll of the acquire, `poll`, inside the three spans, then the events: the
    /// operation's state once it owns the lock, and the poll's readiness. A panic of the
    /// subscriber here drops what the poll returned (a guard releases its lock).
    #[inline]
    pub(crate) fn poll<T>(&self, poll: impl FnOnce() -> Poll<T>) -> Poll<T> {
        let _resource = self.resource.enter();
        let _op = self.op.enter();
        let _poll = self.poll.enter();
        match poll() {
            Poll::Ready(output) => {
                if self.write {
                    tracing::trace!(
                        target: OP_STATE_UPDATE,
                        write_locked = true,
                        write_locked.op = "override",
                    );
                } else {
                    tracing::trace!(
                        target: OP_STATE_UPDATE,
                        readers_acquired = 1u64,
                        readers_acquired.op = "add",
                    );
                }
                tracing::trace!(target: POLL_OP, op_name = "poll", is_ready = true);
                Poll::Ready(output)
            }
            Poll::Pending => {
                tracing::trace!(target: POLL_OP, op_name = "poll", is_ready = false);
                Poll::Pending
            }
        }
    }
}

impl fmt::Debug for OpSpans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpSpans")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

/// An acquire future under its [`OpSpans`], which it enters at each poll.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub(crate) struct Instrumented<F> {
    /// Structurally pinned.
    inner: F,
    spans: OpSpans,
}

impl<F: Future> Instrumented<F> {
    /// `inner`, an acquire that ends owning the lock, under `spans`.
    #[inline]
    pub(crate) fn new(spans: OpSpans, inner: F) -> Self {
        Self { inner, spans }
    }
}

impl<F: Future> Future for Instrumented<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `inner` is structurally pinned: it is never moved out of, and reached
        // only through the projection below; `spans` is never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let inner = unsafe { Pin::new_unchecked(&mut this.inner) };
        this.spans.poll(|| inner.poll(cx))
    }
}

impl<F> fmt::Debug for Instrumented<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instrumented")
            .field("spans", &self.spans)
            .finish_non_exhaustive()
    }
}
