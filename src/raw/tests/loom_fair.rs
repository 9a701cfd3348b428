//! loom models of the fair unlock (`unlock_fair` on the guards, `raw/fair.rs`): the head of
//! the queue gets the lock before any task that arrives while the owner lets go, and a
//! head cancelled meanwhile passes the handoff on. Run as the other models are (see
//! `loom_models.rs`).
//!
//! Every lock here runs under `queue_at_once()`, which never hands off by itself: without
//! the fair unlock, the arrival in each of the first three models can take the lock before
//! the head (they fail if `unlock_fair` is made a plain release); the last one checks that
//! a cancel racing the fair unlock leaves no handoff behind.

use std::sync::Arc;

use loom::future::block_on;
use loom::thread;

use super::loom_support::*;
use crate::{RwLockReadGuard, RwLockWriteGuard};

/// A write section on `l`: returns what the writer saw, and bumps it.
async fn write_section(l: Arc<Lock>) -> usize {
    let g = l.write_owned().await;
    let seen = g.get();
    g.bump();
    seen
}

/// Queues a writer on `l`, which is held (polled once here), and finishes it on a thread
/// of its own, which returns what the writer saw.
fn queue_writer(l: &Arc<Lock>) -> thread::JoinHandle<usize> {
    let mut queued = Box::pin(write_section(Arc::clone(l)));
    assert!(
        poll_once(queued.as_mut()).is_pending(),
        "write beside a holder"
    );
    thread::spawn(move || block_on(queued))
}

/// A writer that arrives on a thread of its own; returns what it saw.
fn arrive_writer(l: &Arc<Lock>) -> thread::JoinHandle<usize> {
    let l = Arc::clone(l);
    thread::spawn(move || block_on(write_section(l)))
}

/// A writer queued behind a write guard and a writer arriving while the guard is unlocked
/// fairly: the queued writer is first.
#[test]
fn write_unlock_fair_hands_the_lock_to_the_queued_writer() {
    loom::model(|| {
        let l = lock(queue_at_once());
        let g = l.try_write().unwrap();
        let head = queue_writer(&l);
        let arrival = arrive_writer(&l);
        RwLockWriteGuard::unlock_fair(g);
        assert_eq!(head.join().unwrap(), 0, "the queued writer was passed");
        assert_eq!(arrival.join().unwrap(), 1);
        assert_idle(&l);
    });
}

/// A reader queued behind a write guard and a writer arriving while the guard is unlocked
/// fairly: the reader is first (without the handoff, the arriving writer could take the
/// lock in the instant between the release and the grant).
#[test]
fn write_unlock_fair_hands_the_lock_to_the_queued_reader() {
    loom::model(|| {
        let l = lock(queue_at_once());
        let g = l.try_write().unwrap();
        let mut queued = Box::pin(Arc::clone(&l).read_owned());
        assert!(
            poll_once(queued.as_mut()).is_pending(),
            "read beside a writer"
        );
        let head = thread::spawn(move || block_on(queued).get());
        let arrival = arrive_writer(&l);
        RwLockWriteGuard::unlock_fair(g);
        assert_eq!(head.join().unwrap(), 0, "the queued reader was passed");
        assert_eq!(arrival.join().unwrap(), 0);
        assert_idle(&l);
    });
}

/// The last reader unlocks fairly with a writer queued, while a reader arrives: the writer
/// is first (a plain release only wakes it, and the arriving reader steals the lock).
#[test]
fn read_unlock_fair_hands_the_lock_to_the_queued_writer() {
    loom::model(|| {
        let l = lock(queue_at_once());
        let g = l.try_read().unwrap();
        let head = queue_writer(&l);
        let l2 = Arc::clone(&l);
        let arrival = thread::spawn(move || block_on(l2.read()).get());
        RwLockReadGuard::unlock_fair(g);
        assert_eq!(head.join().unwrap(), 0);
        assert_eq!(arrival.join().unwrap(), 1, "the queued writer was passed");
        assert_idle(&l);
    });
}

/// The queued head is dropped while the write guard is unlocked fairly and a writer
/// arrives: whatever the order, the handoff is never left behind (the arrival gets the
/// lock, and the lock ends idle).
#[test]
fn write_unlock_fair_racing_the_heads_cancel() {
    loom::model(|| {
        let l = lock(queue_at_once());
        let g = l.try_write().unwrap();
        let mut queued = Box::pin(Arc::clone(&l).write_owned());
        assert!(
            poll_once(queued.as_mut()).is_pending(),
            "write beside a writer"
        );
        let head = thread::spawn(move || drop(queued));
        let arrival = arrive_writer(&l);
        RwLockWriteGuard::unlock_fair(g);
        head.join().unwrap();
        assert_eq!(arrival.join().unwrap(), 0);
        assert_idle(&l);
    });
}
