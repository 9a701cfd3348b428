//! loom models of the bound in count on passing the queue (`Policy::pass_bound`, the
//! counting in `raw/fair.rs` and `raw/spin.rs`): a head writer that a release woke but
//! that has not run yet may be passed by arrivals at most `pass_bound` times before it
//! gets the lock, however the arrivals, the passer's release and the head's own attempt
//! interleave; and the lock ends idle. Run as the other models are (see
//! `loom_models.rs`).
//!
//! The timeout is an hour of the models' logical clock, which never moves here, so only
//! the count hands the lock to the head. With `pass_bound(u32::MAX)` both arrivals can pass
//! the head (the models fail if the bound is not applied).
//!
//! The last model is of the pass check (`raw/wake.rs`): with passing vetoed, queued readers
//! do not pass a queued writer, and nobody is left waiting.

use std::sync::Arc;
use std::time::Duration;

use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::thread;

use super::loom_support::*;

/// The bound of the models (`u32::MAX` makes them fail: both arrivals then pass the head).
const BOUND: u32 = 1;

/// The head writer's section ran: arrivals after it did not pass it.
struct Order {
    head_ran: AtomicBool,
    passed: AtomicUsize,
}

impl Order {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            head_ran: AtomicBool::new(false),
            passed: AtomicUsize::new(0),
        })
    }

    /// Inside an arrival's critical section: did it pass the head?
    fn arrival(&self) {
        if !self.head_ran.load(SeqCst) {
            self.passed.fetch_add(1, SeqCst);
        }
    }
}

/// A writer queued behind a write lock that is then released (so the head is woken, not
/// granted); `arrivals` on threads of their own; then the head finishes on this thread.
fn passing_model(arrivals: [bool; 2]) {
    loom::model(move || {
        let l = lock(
            queue_at_once()
                .handoff_timeout(Duration::from_secs(3600))
                .pass_bound(BOUND),
        );
        let order = Order::new();
        let g = l.try_write().unwrap();
        let mut head = Box::pin({
            let (l, order) = (Arc::clone(&l), Arc::clone(&order));
            async move {
                let g = l.write_owned().await;
                g.bump();
                order.head_ran.store(true, SeqCst);
            }
        });
        assert!(
            poll_once(head.as_mut()).is_pending(),
            "write beside a writer"
        );
        drop(g);
        let threads: Vec<_> = arrivals
            .into_iter()
            .map(|writer| {
                let (l, order) = (Arc::clone(&l), Arc::clone(&order));
                thread::spawn(move || {
                    block_on(async {
                        if writer {
                            let g = l.write().await;
                            order.arrival();
                            g.bump();
                        } else {
                            let g = l.read().await;
                            order.arrival();
                            drop(g);
                        }
                    })
                })
            })
            .collect();
        // The head runs on this thread, after the arrivals have started.
        block_on(head);
        for t in threads {
            t.join().unwrap();
        }
        assert!(
            order.passed.load(SeqCst) <= 1,
            "two arrivals passed the head under a bound of one"
        );
        assert_idle(&l);
    });
}

/// Two writers arrive: each that finds the lock free takes it ahead of the head (a queued
/// writer that is not first); the first such pass hands the lock to the head next.
#[test]
fn two_arriving_writers_pass_a_woken_head_at_most_once() {
    passing_model([true, true]);
}

/// A reader (whose steal is a pass) and a writer arrive.
#[test]
fn an_arriving_reader_and_writer_pass_a_woken_head_at_most_once() {
    passing_model([false, true]);
}

/// With passing vetoed ([`PassCheck`](crate::raw::wake::PassCheck): a timed pass cost its
/// writer more than the handoff timeout), a reader queued behind a head writer is not
/// granted past it, whether the release that wakes the head or an arriving reader's steal
/// (a pass of arrivals, which the veto leaves alone) comes first; and everyone completes,
/// the lock ending idle. (Without the veto the release grants the queued reader past the
/// head: the model fails.)
#[test]
fn vetoed_passing_keeps_a_queued_reader_behind_the_head_writer() {
    loom::model(|| {
        // A finite timeout, so that readers may pass a head writer but for the veto; the
        // models' clock never moves, so the head is never due by time.
        let l = lock(
            queue_at_once()
                .handoff_timeout(Duration::from_millis(1))
                .pass_bound(BOUND),
        );
        l.raw
            .with_wait_list(|list, _| list.pass_check = crate::raw::wake::PassCheck::vetoed());
        let order = Order::new();
        let g = l.try_write().unwrap();
        let mut head = Box::pin({
            let (l, order) = (Arc::clone(&l), Arc::clone(&order));
            async move {
                let g = l.write_owned().await;
                g.bump();
                order.head_ran.store(true, SeqCst);
            }
        });
        assert!(poll_once(head.as_mut()).is_pending());
        let mut queued = Box::pin({
            let (l, order) = (Arc::clone(&l), Arc::clone(&order));
            async move {
                let g = l.read_owned().await;
                assert!(
                    order.head_ran.load(SeqCst),
                    "the queued reader passed the head writer"
                );
                drop(g);
            }
        });
        assert!(poll_once(queued.as_mut()).is_pending());
        // The queued reader finishes on a thread of its own, so that its order against
        // the head is the lock's alone.
        let queued = thread::spawn(move || block_on(queued));
        let arrival = {
            let l = Arc::clone(&l);
            thread::spawn(move || block_on(async { drop(l.read().await) }))
        };
        drop(g);
        block_on(head);
        queued.join().unwrap();
        arrival.join().unwrap();
        assert_idle(&l);
    });
}
