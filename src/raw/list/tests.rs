//! Unit tests of the intrusive wait list and of the wake list (a child module of
//! `list`, so that they see its private fields).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::Wake;

use super::*;

fn node() -> Pin<Box<Waiter>> {
    Box::pin(Waiter::new(WaiterKind::Read))
}

fn ptr(node: &Pin<Box<Waiter>>) -> NonNull<Waiter> {
    NonNull::from(&**node)
}

/// The list from head to tail, following `next`, checked against `len` and `tail`.
fn order(list: &WaitList) -> Vec<NonNull<Waiter>> {
    let mut out = Vec::new();
    let mut cursor = list.head();
    while let Some(node) = cursor {
        out.push(node);
        // SAFETY: the test's nodes are alive and linked; the test owns the list.
        cursor = unsafe { list.next(node) };
    }
    assert_eq!(out.len(), list.len());
    assert_eq!(out.last().copied(), list.tail());
    assert_eq!(list.is_single(), out.len() == 1);
    assert_eq!(list.is_empty(), out.is_empty());
    out
}

#[test]
fn push_back_keeps_arrival_order_and_remove_relinks_the_neighbours() {
    let (a, b, c) = (node(), node(), node());
    let mut list = WaitList::new();
    assert!(list.is_empty());
    // SAFETY: pinned idle nodes that outlive their time in the list.
    unsafe {
        list.link(ptr(&a), false);
        list.link(ptr(&b), false);
        list.link(ptr(&c), false);
    }
    assert_eq!(order(&list), [ptr(&a), ptr(&b), ptr(&c)]);
    for n in [&a, &b, &c] {
        assert_eq!(n.state(Ordering::Relaxed), NodeState::Waiting);
    }
    // SAFETY: linked nodes of this list.
    unsafe { list.remove(ptr(&b)) };
    assert_eq!(order(&list), [ptr(&a), ptr(&c)]);
    // SAFETY: as above.
    unsafe { list.remove(ptr(&a)) };
    assert_eq!(order(&list), [ptr(&c)]);
    assert_eq!(list.head(), Some(ptr(&c)));
    // SAFETY: as above.
    unsafe { list.remove(ptr(&c)) };
    assert!(order(&list).is_empty());
    assert_eq!(list.head(), None);
}

#[test]
fn push_front_jumps_the_queue_and_the_tail_is_kept() {
    let (a, b, up) = (node(), node(), node());
    let mut list = WaitList::new();
    // SAFETY: pinned idle nodes that outlive their time in the list.
    unsafe {
        list.link(ptr(&a), true);
        list.link(ptr(&b), false);
        list.link(ptr(&up), true);
    }
    assert_eq!(order(&list), [ptr(&up), ptr(&a), ptr(&b)]);
    // SAFETY: linked nodes of this list.
    unsafe { list.remove(ptr(&b)) };
    assert_eq!(order(&list), [ptr(&up), ptr(&a)]);
    // A removed node can be linked again (a node is reused by its future only after
    // it is `Idle` again, but the list does not care).
    // SAFETY: `b` is unlinked and alive.
    unsafe { list.link(ptr(&b), false) };
    assert_eq!(order(&list), [ptr(&up), ptr(&a), ptr(&b)]);
    // SAFETY: linked nodes of this list.
    unsafe {
        list.remove(ptr(&up));
        list.remove(ptr(&b));
        list.remove(ptr(&a));
    }
    assert!(order(&list).is_empty());
}

fn node_of(kind: WaiterKind) -> Pin<Box<Waiter>> {
    Box::pin(Waiter::new(kind))
}

/// The readers' ring from its first node, following `rnext`.
fn readers(list: &WaitList) -> Vec<NonNull<Waiter>> {
    let mut out = Vec::new();
    let mut cursor = list.first_reader();
    while let Some(node) = cursor {
        out.push(node);
        // SAFETY: the test's reader nodes are alive and linked; the test owns the list.
        cursor = unsafe { list.next_reader(node) };
    }
    out
}

#[test]
fn the_readers_ring_keeps_the_readers_in_list_order_and_the_writers_are_counted() {
    use WaiterKind::*;
    let (w1, r1, w2, u1, r2, up) = (
        node_of(Write),
        node_of(Read),
        node_of(Write),
        node_of(UpgradableRead),
        node_of(Read),
        node_of(Upgrade),
    );
    let mut list = WaitList::new();
    assert!(!list.has_writer() && list.first_reader().is_none());
    // SAFETY: pinned idle nodes that outlive their time in the list.
    unsafe {
        for n in [&w1, &r1, &w2, &u1, &r2] {
            list.link(ptr(n), false);
        }
        // An upgrade jumps the queue.
        list.link(ptr(&up), true);
    }
    list.check_rings();
    assert_eq!(
        order(&list),
        [ptr(&up), ptr(&w1), ptr(&r1), ptr(&w2), ptr(&u1), ptr(&r2)]
    );
    assert_eq!(readers(&list), [ptr(&r1), ptr(&u1), ptr(&r2)]);
    assert_eq!(list.writers, 3);
    // Out of the middle of both rings, then the first reader, then the writers.
    // SAFETY: linked nodes of this list.
    unsafe { list.remove(ptr(&u1)) };
    list.check_rings();
    assert_eq!(readers(&list), [ptr(&r1), ptr(&r2)]);
    // SAFETY: as above.
    unsafe { list.remove(ptr(&r1)) };
    list.check_rings();
    assert_eq!(readers(&list), [ptr(&r2)]);
    // SAFETY: as above.
    unsafe {
        list.remove(ptr(&up));
        list.remove(ptr(&w1));
        list.remove(ptr(&w2));
    }
    list.check_rings();
    assert!(!list.has_writer());
    assert_eq!(order(&list), [ptr(&r2)]);
    // A reader linked at the head is the first reader.
    // SAFETY: `r1` is unlinked and alive.
    unsafe { list.link(ptr(&r1), true) };
    list.check_rings();
    assert_eq!(readers(&list), [ptr(&r1), ptr(&r2)]);
    // SAFETY: linked nodes of this list.
    unsafe {
        list.remove(ptr(&r2));
        list.remove(ptr(&r1));
    }
    list.check_rings();
    assert!(list.is_empty() && list.first_reader().is_none() && !list.has_writer());
}

#[test]
fn enqueue_records_the_waker() {
    let a = node();
    let mut list = WaitList::new();
    let waker = futures::task::noop_waker();
    // SAFETY: a pinned idle node that outlives its time in the list.
    unsafe { list.enqueue(ptr(&a), waker, false) };
    // SAFETY: linked, and the test owns the list.
    let (has_waker, has_time) =
        unsafe { a.with_inner(|inner| (inner.waker.is_some(), inner.due.is_some())) };
    assert!(
        has_waker && !has_time,
        "the time is the writer's to record, before the lock"
    );
    // SAFETY: as above.
    unsafe { list.remove(ptr(&a)) };
}

struct Count(AtomicUsize, bool);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
        if self.1 {
            panic!("wake panics");
        }
    }
}

#[test]
fn wake_list_wakes_every_waker_even_when_one_panics() {
    let good = Arc::new(Count(AtomicUsize::new(0), false));
    let bad = Arc::new(Count(AtomicUsize::new(0), true));
    let mut wakers = WakeList::new();
    wakers.push(Waker::from(Arc::clone(&good)));
    wakers.push(Waker::from(Arc::clone(&bad)));
    wakers.push(Waker::from(Arc::clone(&good)));
    let result = panic::catch_unwind(AssertUnwindSafe(|| wakers.wake_all()));
    assert!(result.is_err(), "the panic is resumed after the last wake");
    assert_eq!(good.0.load(SeqCst), 2);
    assert_eq!(bad.0.load(SeqCst), 1);
    assert_eq!(Arc::strong_count(&good), 1, "every waker was consumed");
    assert_eq!(Arc::strong_count(&bad), 1, "every waker was consumed");
}

#[test]
fn one_panicking_waker_panics_through_but_not_during_an_unwind() {
    // Alone in the list, its panic is the caller's (nothing else to wake).
    let bad = Arc::new(Count(AtomicUsize::new(0), true));
    let mut wakers = WakeList::new();
    wakers.push(Waker::from(Arc::clone(&bad)));
    let result = panic::catch_unwind(AssertUnwindSafe(|| wakers.wake_all()));
    assert!(result.is_err());
    assert_eq!(bad.0.load(SeqCst), 1);
    assert_eq!(Arc::strong_count(&bad), 1, "the waker was consumed");
    // Dropped by an unwind: woken, and its panic dropped (a second panic would abort).
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let mut wakers = WakeList::new();
        wakers.push(Waker::from(Arc::clone(&bad)));
        panic!("the first panic");
    }));
    let payload = result.expect_err("the first panic goes on");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the first panic"));
    assert_eq!(bad.0.load(SeqCst), 2);
    assert_eq!(Arc::strong_count(&bad), 1);
}

#[test]
fn a_dropped_wake_list_wakes_what_it_holds() {
    let good = Arc::new(Count(AtomicUsize::new(0), false));
    let mut wakers = WakeList::new();
    for _ in 0..WakeList::CAPACITY {
        wakers.push(Waker::from(Arc::clone(&good)));
    }
    drop(wakers);
    assert_eq!(good.0.load(SeqCst), WakeList::CAPACITY);
    assert_eq!(Arc::strong_count(&good), 1);
}
