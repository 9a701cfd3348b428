//! The typed API, one poll at a time (`tokio-test`): owned guards, mapped
//! guards, `downgrade_map`, the blocking acquires and (feature `tokio`) the timeouts.
//!
//! The count word is checked after each step with the kernel's encoding: bit 0 writer,
//! bit 1 waiters, bit 2 handoff, readers from bit 8.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::{
    OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock,
    RwLockMappedWriteGuard, RwLockReadGuard, RwLockWriteGuard,
};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};

use crate::raw::tests::support::*;

mod conveniences;

type Pair = (u32, Vec<u32>);

fn pair_lock() -> RwLock<Pair> {
    RwLock::with_policy((1, vec![10, 20, 30]), queue_at_once())
}

fn arc_pair_lock() -> Arc<RwLock<Pair>> {
    Arc::new(pair_lock())
}

/// Waits (on this thread, really sleeping) until `lock` has `n` queued waiters.
fn wait_for_queue<T: ?Sized>(lock: &RwLock<T>, n: usize) {
    for _ in 0..10_000 {
        if lock.raw.queue_len() == n {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("queue never reached {n} (is {})", lock.raw.queue_len());
}

// ---------------------------------------------------------------------------------------
// Owned guards.

#[test]
fn owned_try_locks_and_count_words() {
    let l = arc_pair_lock();
    let r1 = Arc::clone(&l).try_read_owned().unwrap();
    let r2 = Arc::clone(&l).try_read_owned().unwrap();
    assert_eq!(l.raw.count_word(), 2 * R);
    assert!(Arc::clone(&l).try_write_owned().is_err());
    assert_eq!(
        Arc::clone(&l).try_write_owned().unwrap_err().to_string(),
        "operation would block"
    );
    assert_eq!(r1.0 + r2.0, 2);
    drop((r1, r2));
    assert_eq!(l.raw.count_word(), 0);
    let mut w = Arc::clone(&l).try_write_owned().unwrap();
    assert_eq!(l.raw.count_word(), W);
    assert!(Arc::clone(&l).try_read_owned().is_err());
    w.0 = 2;
    drop(w);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.try_read().unwrap().0, 2);
    // Every failed try gave its `Arc` back (dropped it).
    assert_eq!(Arc::strong_count(&l), 1);
}

#[test]
fn owned_acquires_queue_and_are_granted() {
    let _lockdep = lockdep_off();
    let l = arc_pair_lock();
    let w = l.try_write().unwrap();
    let mut r = spawn(Arc::clone(&l).read_owned());
    let mut w2 = spawn(Arc::clone(&l).write_owned());
    assert_pending!(r.poll());
    assert_pending!(w2.poll());
    assert_eq!(l.raw.count_word(), W | WAITERS);
    assert_eq!(l.raw.queue_len(), 2);
    drop(w);
    // The head reader is granted (the bias is in the count before it runs); the writer
    // behind it stays asleep.
    assert!(r.is_woken());
    assert!(!w2.is_woken());
    assert_eq!(l.raw.count_word(), R | WAITERS);
    let g = assert_ready!(r.poll());
    assert_eq!(g.1, [10, 20, 30]);
    drop(g);
    assert!(w2.is_woken());
    let mut g = assert_ready!(w2.poll());
    assert_eq!(l.raw.count_word(), W);
    g.1.push(40);
    drop(g);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.try_read().unwrap().1.len(), 4);
    assert_eq!(Arc::strong_count(&l), 1);
}

#[test]
fn owned_acquire_cancelled_leaves_no_trace() {
    let _lockdep = lockdep_off();
    let l = arc_pair_lock();
    let w = l.try_write().unwrap();
    let mut r = spawn(Arc::clone(&l).read_owned());
    let mut w2 = spawn(Arc::clone(&l).write_owned());
    assert_pending!(r.poll());
    assert_pending!(w2.poll());
    assert_eq!(l.raw.queue_len(), 2);
    drop(r);
    drop(w2);
    assert_eq!(l.raw.queue_len(), 0);
    assert_eq!(l.raw.count_word(), W);
    assert_eq!(Arc::strong_count(&l), 1);
    drop(w);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn owned_guard_keeps_the_lock_alive() {
    let l = Arc::new(RwLock::new(String::from("kept")));
    let g = Arc::clone(&l).try_read_owned().unwrap();
    assert!(Arc::ptr_eq(&l, OwnedRwLockReadGuard::rwlock(&g)));
    drop(l);
    // The guard holds the last `Arc`: the value is alive, and the unlock then the free
    // happen in that order on drop.
    assert_eq!(*g, "kept");
    assert_eq!(Arc::strong_count(OwnedRwLockReadGuard::rwlock(&g)), 1);
    assert_eq!(OwnedRwLockReadGuard::rwlock(&g).raw.count_word(), R);
    drop(g);

    let l = Arc::new(RwLock::new(1));
    let w = Arc::clone(&l).try_write_owned().unwrap();
    assert!(Arc::ptr_eq(&l, OwnedRwLockWriteGuard::rwlock(&w)));
    drop(l);
    assert_eq!(OwnedRwLockWriteGuard::rwlock(&w).raw.count_word(), W);
    drop(w);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_guards_across_tokio_spawn() {
    let l = Arc::new(RwLock::new(vec![0u64; 4]));
    // Owned write guards, moved into spawned tasks ('static + Send).
    let mut tasks = Vec::new();
    // Fewer rounds under Miri, which interprets every step.
    const ROUNDS: u64 = if cfg!(miri) { 10 } else { 100 };
    for i in 0..4 {
        let l = Arc::clone(&l);
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let mut g = Arc::clone(&l).write_owned().await;
                let moved = tokio::spawn(async move {
                    g[i] += 1;
                    g
                })
                .await
                .unwrap();
                drop(moved);
            }
        }));
    }
    // Owned read guards taken here and released in another task.
    for _ in 0..20 {
        let g = Arc::clone(&l).read_owned().await;
        tokio::spawn(async move { g.iter().sum::<u64>() })
            .await
            .unwrap();
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*l.read().await, [ROUNDS; 4]);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(Arc::strong_count(&l), 1);
}

#[test]
fn owned_downgrade_grants_queued_readers_not_writers() {
    let _lockdep = lockdep_off();
    let l = arc_pair_lock();
    let mut w = Arc::clone(&l).try_write_owned().unwrap();
    w.0 = 5;
    check_downgrade_grants_readers_not_writers(&l, w, |w| {
        let r = w.downgrade();
        assert_eq!(r.0, 5);
        r
    });
    assert_eq!(Arc::strong_count(&l), 1);
}

// ---------------------------------------------------------------------------------------
// Mapped guards, borrowed.

#[test]
fn read_guard_map_keeps_one_read_lock() {
    let l = pair_lock();
    let g = l.try_read().unwrap();
    let list: RwLockReadGuard<'_, Vec<u32>> = RwLockReadGuard::map(g, |p| &p.1);
    assert_eq!(l.raw.count_word(), R);
    let last: RwLockReadGuard<'_, u32> = RwLockReadGuard::map(list, |v| v.last().unwrap());
    assert_eq!(*last, 30);
    assert_eq!(format!("{last:?} {last}"), "30 30");
    assert_eq!(l.raw.count_word(), R);
    assert!(l.try_write().is_err());
    drop(last);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn read_guard_try_map_failure_returns_the_guard() {
    let l = pair_lock();
    let g = l.try_read().unwrap();
    let g = RwLockReadGuard::try_map(g, |p| p.1.get(9)).unwrap_err();
    // Still the whole value, still one read lock.
    assert_eq!(g.0, 1);
    assert_eq!(l.raw.count_word(), R);
    let second = RwLockReadGuard::try_map(g, |p| p.1.get(1)).unwrap();
    assert_eq!(*second, 20);
    assert_eq!(l.raw.count_word(), R);
    drop(second);
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn write_guard_map_and_mapped_map() {
    let l = pair_lock();
    let w = l.try_write().unwrap();
    let mut list: RwLockMappedWriteGuard<'_, Vec<u32>> = RwLockWriteGuard::map(w, |p| &mut p.1);
    assert_eq!(l.raw.count_word(), W);
    list.push(40);
    let mut last = RwLockMappedWriteGuard::map(list, |v| v.last_mut().unwrap());
    *last += 1;
    assert_eq!(format!("{last:?} {last}"), "41 41");
    assert_eq!(l.raw.count_word(), W);
    assert!(l.try_read().is_err());
    drop(last);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.try_read().unwrap().1, [10, 20, 30, 41]);
}

#[test]
fn write_guard_try_map_failure_returns_the_guard() {
    let l = pair_lock();
    let w = l.try_write().unwrap();
    let w = RwLockWriteGuard::try_map(w, |p| p.1.get_mut(9)).unwrap_err();
    assert_eq!(l.raw.count_word(), W);
    // The original guard: still a write guard of the whole value, still downgradable.
    let r = w.downgrade();
    assert_eq!(l.raw.count_word(), R);
    drop(r);

    let w = l.try_write().unwrap();
    let m = RwLockWriteGuard::try_map(w, |p| p.1.first_mut()).unwrap();
    let m = RwLockMappedWriteGuard::try_map(m, |_| None::<&mut u8>).unwrap_err();
    assert_eq!(l.raw.count_word(), W);
    let mut m = RwLockMappedWriteGuard::try_map(m, |x| Some(x)).unwrap();
    *m = 11;
    drop(m);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.try_read().unwrap().1[0], 11);
}

#[test]
fn write_guard_into_mapped() {
    let l = pair_lock();
    let mut m: RwLockMappedWriteGuard<'_, Pair> =
        RwLockWriteGuard::into_mapped(l.try_write().unwrap());
    m.0 = 7;
    assert_eq!(l.raw.count_word(), W);
    drop(m);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.try_read().unwrap().0, 7);
}

#[test]
fn map_closure_panic_releases_the_lock() {
    let l = pair_lock();
    let res = catch_unwind(AssertUnwindSafe(|| {
        let _ = RwLockReadGuard::map(l.try_read().unwrap(), |_| -> &u32 { panic!("boom") });
    }));
    assert!(res.is_err());
    assert_eq!(l.raw.count_word(), 0);
    let res = catch_unwind(AssertUnwindSafe(|| {
        let _ = RwLockWriteGuard::map(l.try_write().unwrap(), |_| -> &mut u32 { panic!("boom") });
    }));
    assert!(res.is_err());
    assert_eq!(l.raw.count_word(), 0);
    let res = catch_unwind(AssertUnwindSafe(|| {
        let _ =
            RwLockWriteGuard::downgrade_map(l.try_write().unwrap(), |_| -> &u32 { panic!("boom") });
    }));
    assert!(res.is_err());
    assert_eq!(l.raw.count_word(), 0);
    let a = arc_pair_lock();
    let res = catch_unwind(AssertUnwindSafe(|| {
        let g = Arc::clone(&a).try_write_owned().unwrap();
        let _ = OwnedRwLockWriteGuard::map(g, |_| -> &mut u32 { panic!("boom") });
    }));
    assert!(res.is_err());
    assert_eq!(a.raw.count_word(), 0);
    assert_eq!(Arc::strong_count(&a), 1);
}

#[test]
fn downgrade_map_grants_queued_readers_not_writers() {
    let _lockdep = lockdep_off();
    let l = pair_lock();
    let mut w = l.try_write().unwrap();
    w.1.push(40);
    check_downgrade_grants_readers_not_writers(&l, w, |w| {
        let list = RwLockWriteGuard::downgrade_map(w, |p| &p.1);
        assert_eq!(*list, [10, 20, 30, 40]);
        list
    });
}

#[test]
fn try_downgrade_map_failure_keeps_the_write_lock() {
    let _lockdep = lockdep_off();
    let l = pair_lock();
    let w = l.try_write().unwrap();
    let mut r1 = spawn(l.read());
    assert_pending!(r1.poll());
    let w = RwLockWriteGuard::try_downgrade_map(w, |p| p.1.get(9)).unwrap_err();
    // Nothing was downgraded: still write-locked, the reader still asleep.
    assert_eq!(l.raw.count_word(), W | WAITERS);
    assert!(!r1.is_woken());
    let first = RwLockWriteGuard::try_downgrade_map(w, |p| p.1.first()).unwrap();
    assert_eq!(*first, 10);
    assert!(r1.is_woken());
    assert_eq!(l.raw.count_word(), 2 * R);
    let g1 = assert_ready!(r1.poll());
    drop((first, g1));
    assert_eq!(l.raw.count_word(), 0);
}

// ---------------------------------------------------------------------------------------
// Mapped guards, owned.

#[test]
fn owned_read_guard_map_and_try_map() {
    let l = arc_pair_lock();
    let g = Arc::clone(&l).try_read_owned().unwrap();
    let g = OwnedRwLockReadGuard::try_map(g, |p| p.1.get(9)).unwrap_err();
    assert_eq!(l.raw.count_word(), R);
    let list: OwnedRwLockReadGuard<Pair, Vec<u32>> = OwnedRwLockReadGuard::map(g, |p| &p.1);
    let last: OwnedRwLockReadGuard<Pair, u32> =
        OwnedRwLockReadGuard::try_map(list, |v| v.last()).unwrap();
    assert_eq!(*last, 30);
    assert_eq!(format!("{last:?} {last}"), "30 30");
    assert!(Arc::ptr_eq(&l, OwnedRwLockReadGuard::rwlock(&last)));
    assert_eq!(l.raw.count_word(), R);
    assert_eq!(Arc::strong_count(&l), 2);
    drop(last);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(Arc::strong_count(&l), 1);
}

#[test]
fn owned_write_guard_map_try_map_into_mapped() {
    let l = arc_pair_lock();
    let w = Arc::clone(&l).try_write_owned().unwrap();
    let w = OwnedRwLockWriteGuard::try_map(w, |p| p.1.get_mut(9)).unwrap_err();
    assert_eq!(l.raw.count_word(), W);
    let list: OwnedRwLockMappedWriteGuard<Pair, Vec<u32>> =
        OwnedRwLockWriteGuard::map(w, |p| &mut p.1);
    let list = OwnedRwLockMappedWriteGuard::try_map(list, |v| v.get_mut(9)).unwrap_err();
    let mut first = OwnedRwLockMappedWriteGuard::try_map(list, |v| v.first_mut()).unwrap();
    *first = 1;
    let mut first = OwnedRwLockMappedWriteGuard::map(first, |x| x);
    *first += 1;
    assert_eq!(format!("{first:?} {first}"), "2 2");
    assert!(Arc::ptr_eq(&l, OwnedRwLockMappedWriteGuard::rwlock(&first)));
    assert_eq!(l.raw.count_word(), W);
    drop(first);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(l.try_read().unwrap().1[0], 2);

    let mut whole: OwnedRwLockMappedWriteGuard<Pair> =
        OwnedRwLockWriteGuard::into_mapped(Arc::clone(&l).try_write_owned().unwrap());
    whole.0 = 9;
    drop(whole);
    assert_eq!(l.try_read().unwrap().0, 9);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(Arc::strong_count(&l), 1);
}

#[test]
fn owned_downgrade_map_grants_queued_readers_not_writers() {
    let _lockdep = lockdep_off();
    let l = arc_pair_lock();
    let w = Arc::clone(&l).try_write_owned().unwrap();
    check_downgrade_grants_readers_not_writers(&l, w, |w| {
        // A failed map downgrades nothing: still write-locked, the queue untouched.
        let w = OwnedRwLockWriteGuard::try_downgrade_map(w, |p| p.1.get(9)).unwrap_err();
        assert_eq!(l.raw.count_word(), W | WAITERS);
        let zero: OwnedRwLockReadGuard<Pair, u32> =
            OwnedRwLockWriteGuard::downgrade_map(w, |p| &p.0);
        assert_eq!(*zero, 1);
        zero
    });
    let w = Arc::clone(&l).try_write_owned().unwrap();
    let last = OwnedRwLockWriteGuard::try_downgrade_map(w, |p| p.1.last()).unwrap();
    assert_eq!(*last, 30);
    assert_eq!(l.raw.count_word(), R);
    drop(last);
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(Arc::strong_count(&l), 1);
}

// ---------------------------------------------------------------------------------------
// Blocking acquires, from plain threads.

#[test]
fn blocking_read_and_write_from_plain_threads() {
    // Fewer rounds under Miri, which interprets every step.
    const ROUNDS: u64 = if cfg!(miri) { 25 } else { 250 };
    let l = Arc::new(RwLock::new(0u64));
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let l = Arc::clone(&l);
            thread::spawn(move || {
                for _ in 0..ROUNDS {
                    *l.blocking_write() += 1;
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let l = Arc::clone(&l);
            thread::spawn(move || {
                let mut last = 0;
                for _ in 0..ROUNDS {
                    let now = *l.blocking_read();
                    assert!(now >= last);
                    last = now;
                }
            })
        })
        .collect();
    for t in writers.into_iter().chain(readers) {
        t.join().unwrap();
    }
    assert_eq!(*l.blocking_read(), 4 * ROUNDS);
    assert_idle(&l);
}

#[test]
fn blocking_owned_variants() {
    let l = Arc::new(RwLock::new(1));
    let mut w = Arc::clone(&l).blocking_write_owned();
    assert_eq!(l.raw.count_word(), W);
    let c = Arc::clone(&l);
    let reader = thread::spawn(move || {
        let g = c.blocking_read_owned();
        (
            *g,
            OwnedRwLockReadGuard::rwlock(&g).raw.count_word() & !WAITERS,
        )
    });
    wait_for_queue(&l, 1);
    *w = 2;
    drop(w);
    assert_eq!(reader.join().unwrap(), (2, R));
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(Arc::strong_count(&l), 1);
}

/// A blocking reader tries the lock directly before it builds a future (without
/// observers): that try must not pass a queued writer, even while readers own the lock.
#[test]
fn blocking_reader_queues_behind_a_queued_writer() {
    let _lockdep = lockdep_off();
    let l = Arc::new(RwLock::with_policy(0, queue_at_once()));
    let r = l.try_read().unwrap();
    let c = Arc::clone(&l);
    let writer = thread::spawn(move || *c.blocking_write() += 1);
    wait_for_queue(&l, 1);
    let c = Arc::clone(&l);
    let reader = thread::spawn(move || *c.blocking_read());
    // The reader queues behind the writer instead of sharing `r`'s read lock.
    wait_for_queue(&l, 2);
    assert_eq!(l.raw.count_word(), R | WAITERS);
    drop(r);
    writer.join().unwrap();
    assert_eq!(
        reader.join().unwrap(),
        1,
        "the reader got in before the writer"
    );
    assert_eq!(l.raw.count_word(), 0);
}

#[test]
fn blocking_writer_wakes_when_async_reader_releases() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let l = Arc::new(RwLock::with_policy(0, queue_at_once()));
    let r = rt.block_on(l.read());
    let c = Arc::clone(&l);
    let writer = thread::spawn(move || {
        *c.blocking_write() += 1;
    });
    // The writer parks in the queue behind the async reader.
    wait_for_queue(&l, 1);
    assert_eq!(l.raw.count_word(), R | WAITERS);
    // Released from an async task: the waker unparks the thread.
    rt.block_on(async move {
        tokio::task::yield_now().await;
        drop(r);
    });
    writer.join().unwrap();
    assert_eq!(l.raw.count_word(), 0);
    assert_eq!(rt.block_on(async { *l.read().await }), 1);
}

#[test]
fn blocking_reader_wakes_when_async_writer_releases() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let l = Arc::new(RwLock::with_policy(0, queue_at_once()));
    let c = Arc::clone(&l);
    let (tx, rx) = std::sync::mpsc::channel();
    let task = rt.spawn(async move {
        let mut w = c.write().await;
        tx.send(()).unwrap();
        // Hold the lock across awaits until the blocking reader has queued.
        while c.raw.queue_len() == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        *w = 7;
    });
    rx.recv().unwrap();
    let c = Arc::clone(&l);
    let reader = thread::spawn(move || *c.blocking_read());
    assert_eq!(reader.join().unwrap(), 7);
    rt.block_on(task).unwrap();
    assert_eq!(l.raw.count_word(), 0);
}

// ---------------------------------------------------------------------------------------
// Timeouts (feature `tokio`).

#[cfg(feature = "tokio")]
mod timeouts {
    use super::*;
    use crate::Elapsed;

    #[tokio::test]
    async fn read_timeout_expires_with_nothing_held_or_queued() {
        let _lockdep = lockdep_off();
        let l = RwLock::with_policy(0, queue_at_once());
        let w = l.try_write().unwrap();
        let mut r = spawn(l.read_timeout(Duration::from_millis(20)));
        assert_pending!(r.poll());
        assert_eq!(l.raw.queue_len(), 1);
        assert_eq!(l.raw.count_word(), W | WAITERS);
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(r.is_woken());
        let err: Elapsed = assert_ready!(r.poll()).unwrap_err();
        assert_eq!(err.to_string(), "deadline has elapsed");
        assert_eq!(l.raw.queue_len(), 0);
        assert_eq!(l.raw.count_word(), W);
        drop(w);
        assert_eq!(l.raw.count_word(), 0);
    }

    #[tokio::test]
    async fn write_timeout_expires_with_nothing_held_or_queued() {
        let _lockdep = lockdep_off();
        let l = RwLock::with_policy(0, queue_at_once());
        let r = l.try_read().unwrap();
        let err: Elapsed = l
            .write_timeout(Duration::from_millis(10))
            .await
            .unwrap_err();
        assert_eq!(format!("{err:?}"), "Elapsed(())");
        assert_eq!(l.raw.queue_len(), 0);
        assert_eq!(l.raw.count_word(), R);
        drop(r);
        assert_eq!(l.raw.count_word(), 0);
    }

    #[tokio::test]
    async fn timeouts_succeed_when_the_lock_comes_in_time() {
        let _lockdep = lockdep_off();
        let l = Arc::new(RwLock::with_policy(0, queue_at_once()));
        // Free: taken at once, even with a zero timeout.
        drop(l.read_timeout(Duration::ZERO).await.unwrap());
        *l.write_timeout(Duration::ZERO).await.unwrap() += 1;
        // Held, released before the deadline.
        let w = l.try_write().unwrap();
        let mut r = spawn(l.read_timeout(Duration::from_secs(30)));
        assert_pending!(r.poll());
        drop(w);
        assert!(r.is_woken());
        let g = assert_ready!(r.poll()).unwrap();
        assert_eq!(*g, 1);
        let mut w = spawn(l.write_timeout(Duration::from_secs(30)));
        assert_pending!(w.poll());
        drop(g);
        assert!(w.is_woken());
        *assert_ready!(w.poll()).unwrap() += 1;
        assert_idle(&l);
    }

    #[tokio::test]
    async fn cancelled_timeout_leaves_no_queue_entry() {
        let _lockdep = lockdep_off();
        let l = RwLock::with_policy(0, queue_at_once());
        let w = l.try_write().unwrap();
        let mut r = spawn(l.read_timeout(Duration::from_secs(30)));
        let mut w2 = spawn(l.write_timeout(Duration::from_secs(30)));
        assert_pending!(r.poll());
        assert_pending!(w2.poll());
        assert_eq!(l.raw.queue_len(), 2);
        drop(r);
        drop(w2);
        assert_eq!(l.raw.queue_len(), 0);
        assert_eq!(l.raw.count_word(), W);
        drop(w);
        assert_eq!(l.raw.count_word(), 0);
    }

    #[tokio::test]
    async fn expired_head_writer_passes_the_lock_on_to_readers_behind_it() {
        let _lockdep = lockdep_off();
        let l = RwLock::with_policy(0, queue_at_once());
        let r1 = l.try_read().unwrap();
        let mut w = spawn(l.write_timeout(Duration::from_millis(20)));
        assert_pending!(w.poll());
        // A reader behind the queued writer waits (readers own the lock, a writer waits).
        let mut r2 = spawn(l.read());
        assert_pending!(r2.poll());
        assert_eq!(l.raw.queue_len(), 2);
        assert_eq!(l.raw.count_word(), R | WAITERS);
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(assert_ready!(w.poll()).is_err());
        // The expired head left the queue and let the reader behind it in.
        assert!(r2.is_woken());
        let g2 = assert_ready!(r2.poll());
        assert_eq!(l.raw.queue_len(), 0);
        assert_eq!(l.raw.count_word(), 2 * R);
        drop((r1, g2));
        assert_eq!(l.raw.count_word(), 0);
    }
}

// ---------------------------------------------------------------------------------------
// tokio's errors (feature `tokio`).

/// `?` over tokio's `try_lock`, tokio's `try_read` and this lock's `try_read` and
/// `try_write` in one function that returns this crate's error: each failure comes back
/// as `TryLockError`, whichever lock it came from.
#[cfg(feature = "tokio")]
#[test]
fn question_mark_takes_tokios_try_lock_error() {
    use crate::TryLockError;

    fn all_four(
        ours: &RwLock<u32>,
        mutex: &tokio::sync::Mutex<u32>,
        theirs: &tokio::sync::RwLock<u32>,
    ) -> Result<u32, TryLockError> {
        let a = *ours.try_read()?;
        let b = *mutex.try_lock()?;
        let c = *theirs.try_read()?;
        let mut d = ours.try_write()?;
        *d += a + b + c;
        Ok(*d)
    }

    let ours = RwLock::new(1);
    let mutex = tokio::sync::Mutex::new(2);
    let theirs = tokio::sync::RwLock::new(3);
    assert_eq!(all_four(&ours, &mutex, &theirs), Ok(7));
    let held = mutex.try_lock().unwrap();
    assert_eq!(all_four(&ours, &mutex, &theirs), Err(TryLockError(())));
    drop(held);
    let held = theirs.try_write().unwrap();
    assert_eq!(all_four(&ours, &mutex, &theirs), Err(TryLockError(())));
    drop(held);
    let held = ours.try_read().unwrap();
    // Our read lock is shared with the function's, but its `try_write` fails.
    assert_eq!(all_four(&ours, &mutex, &theirs), Err(TryLockError(())));
    drop(held);
    assert_eq!(all_four(&ours, &mutex, &theirs), Ok(7 + 7 + 2 + 3));
    assert_idle(&ours);
}

// ---------------------------------------------------------------------------------------
// Auto traits and variance of every public type (the impls and the variance table are in
// `src/rwlock.rs`, under "Auto traits and variance").

/// Compiles only if `T` is *not* `Unpin` (an `Unpin` type makes the call ambiguous).
trait AmbiguousIfUnpin<A> {}
impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
impl<T: ?Sized + Unpin> AmbiguousIfUnpin<u8> for T {}

/// Compiles only if `T` is *not* `Send`.
trait AmbiguousIfSend<A> {}
impl<T: ?Sized> AmbiguousIfSend<()> for T {}
impl<T: ?Sized + Send> AmbiguousIfSend<u8> for T {}

/// Compiles only if `T` is *not* `Sync`.
trait AmbiguousIfSync<A> {}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}

fn send<T: ?Sized + Send>() {}
fn sync<T: ?Sized + Sync>() {}
fn unpin<T: ?Sized + Unpin>() {}
fn send_sync_unpin<T: ?Sized + Send + Sync + Unpin>() {}
// The negative checks infer `A` at the call site, where `T` is concrete: both impls apply
// (an ambiguity, so a compile error) exactly when `T` has the trait.
fn not_unpin<T: ?Sized + AmbiguousIfUnpin<A>, A>() {}
fn not_send<T: ?Sized + AmbiguousIfSend<A>, A>() {}
fn not_sync<T: ?Sized + AmbiguousIfSync<A>, A>() {}
fn send_val<T: Send>(_: &T) {}
fn not_unpin_val<T: AmbiguousIfUnpin<A>, A>(_: &T) {}
fn static_val<T: 'static>(_: &T) {}

#[test]
fn bounds() {
    use std::cell::Cell;
    use std::rc::Rc;

    use crate::{
        OwnedRwLockUpgradableReadGuard, Policy, RwLockUpgradableReadGuard, TryLockError, Upgrade,
    };

    type Fn = fn();
    let checks: &[Fn] = &[
        // The lock: `Send` with `T: Send`, `Sync` with `T: Send + Sync`, as std's.
        send_sync_unpin::<RwLock<u8>>,
        send::<RwLock<Cell<u8>>>,
        not_sync::<RwLock<Cell<u8>>, _>,
        not_send::<RwLock<Rc<u8>>, _>,
        // Borrowed guards.
        send_sync_unpin::<RwLockReadGuard<'static, u8>>,
        not_send::<RwLockReadGuard<'static, Cell<u8>>, _>,
        not_sync::<RwLockReadGuard<'static, Cell<u8>>, _>,
        send_sync_unpin::<RwLockWriteGuard<'static, u8>>,
        not_send::<RwLockWriteGuard<'static, Cell<u8>>, _>,
        not_sync::<RwLockWriteGuard<'static, Cell<u8>>, _>,
        send_sync_unpin::<RwLockMappedWriteGuard<'static, u8>>,
        not_send::<RwLockMappedWriteGuard<'static, Cell<u8>>, _>,
        send_sync_unpin::<RwLockUpgradableReadGuard<'static, u8>>,
        not_send::<RwLockUpgradableReadGuard<'static, Cell<u8>>, _>,
        not_sync::<RwLockUpgradableReadGuard<'static, Cell<u8>>, _>,
        // The upgrade future holds a pinned wait-list node: `!Unpin`.
        send::<Upgrade<'static, u8>>,
        sync::<Upgrade<'static, u8>>,
        not_unpin::<Upgrade<'static, u8>, _>,
        not_send::<Upgrade<'static, Cell<u8>>, _>,
        // Owned guards.
        send_sync_unpin::<OwnedRwLockReadGuard<u8>>,
        send_sync_unpin::<OwnedRwLockReadGuard<(u8, u16), u16>>,
        not_send::<OwnedRwLockReadGuard<Cell<u8>>, _>,
        not_send::<OwnedRwLockReadGuard<(u8, u16), Cell<u8>>, _>,
        send_sync_unpin::<OwnedRwLockWriteGuard<u8>>,
        not_send::<OwnedRwLockWriteGuard<Cell<u8>>, _>,
        send_sync_unpin::<OwnedRwLockMappedWriteGuard<u8>>,
        send_sync_unpin::<OwnedRwLockMappedWriteGuard<(u8, u16), u16>>,
        not_send::<OwnedRwLockMappedWriteGuard<(u8, u16), Cell<u8>>, _>,
        send_sync_unpin::<OwnedRwLockUpgradableReadGuard<u8>>,
        not_send::<OwnedRwLockUpgradableReadGuard<Cell<u8>>, _>,
        // Plain data.
        send_sync_unpin::<TryLockError>,
        send_sync_unpin::<Policy>,
        unpin::<RwLock<u8>>,
    ];
    assert!(!checks.is_empty());

    // The acquire futures are `Send` (they can be spawned) and `!Unpin` (their wait-list
    // node is pinned); the owned ones are `'static` too.
    let lock = RwLock::new(0u8);
    send_val(&lock.read());
    send_val(&lock.write());
    send_val(&lock.upgradable_read());
    not_unpin_val(&lock.read());
    not_unpin_val(&lock.write());
    let lock = Arc::new(RwLock::new(0u8));
    let read = Arc::clone(&lock).read_owned();
    let write = Arc::clone(&lock).write_owned();
    let upgradable = Arc::clone(&lock).upgradable_read_owned();
    send_val(&read);
    static_val(&read);
    send_val(&write);
    static_val(&write);
    send_val(&upgradable);
    static_val(&upgradable);
    let guard = Arc::clone(&lock).try_read_owned().unwrap();
    static_val(&guard);
}

/// The read guards are covariant in `T` (and `U`): a guard over a longer-lived value can be
/// used where a shorter-lived one is expected. (The guards that hand out `&mut` are
/// invariant: the `compile_fail` doctests on `VARIANCE` in `src/rwlock.rs`.)
#[test]
fn read_guards_are_covariant() {
    fn shorten<'a, 'b>(g: RwLockReadGuard<'a, &'static str>) -> RwLockReadGuard<'a, &'b str> {
        g
    }
    fn shorten_owned<'b>(
        g: OwnedRwLockReadGuard<(), &'static str>,
    ) -> OwnedRwLockReadGuard<(), &'b str> {
        g
    }
    let lock = RwLock::new("static");
    let local = String::from("local");
    let mut guard = shorten(lock.try_read().unwrap());
    assert_eq!(*guard, "static");
    guard = RwLockReadGuard::map(guard, |s| s); // still usable as `&str`
    let shorter: &str = &local;
    assert!(*guard != shorter);
    let owned = Arc::new(RwLock::new(()));
    let g = OwnedRwLockReadGuard::map(Arc::clone(&owned).try_read_owned().unwrap(), |_| &"x");
    assert_eq!(*shorten_owned(g), "x");
}

/// Each guard is two pointers, to its lock (the raw lock, or an owned guard's `Arc`, held
/// in its lock token) and to its value: two words over a sized value, three over a slice;
/// and `Option` of a guard is no larger (neither pointer is ever null). The observers'
/// features keep their per-hold state (`observe::Held`) in a borrowed guard's lock pointer
/// (one pointer to a pooled record of the lock and the hold, `observe::Kept`), so a
/// borrowed guard stays two words, returned in registers; an owned guard carries it
/// beside its `Arc`.
#[test]
fn guard_sizes() {
    use std::mem::size_of;

    use crate::{OwnedRwLockUpgradableReadGuard, RwLockUpgradableReadGuard};

    const WORD: usize = size_of::<usize>();
    // What the observers keep per hold (`observe::Held`): nothing without their features;
    // an owned guard carries it.
    const HELD: usize = size_of::<crate::observe::Held>();
    assert_eq!(size_of::<RwLockReadGuard<'static, u64>>(), 2 * WORD);
    assert_eq!(size_of::<RwLockReadGuard<'static, [u8]>>(), 3 * WORD);
    assert_eq!(size_of::<Option<RwLockReadGuard<'static, u64>>>(), 2 * WORD);
    assert_eq!(size_of::<RwLockWriteGuard<'static, u64>>(), 2 * WORD);
    assert_eq!(size_of::<RwLockMappedWriteGuard<'static, u64>>(), 2 * WORD);
    assert_eq!(size_of::<RwLockMappedWriteGuard<'static, [u8]>>(), 3 * WORD);
    assert_eq!(
        size_of::<RwLockUpgradableReadGuard<'static, u64>>(),
        2 * WORD
    );
    assert_eq!(size_of::<OwnedRwLockReadGuard<u64>>(), 2 * WORD + HELD);
    assert_eq!(
        size_of::<OwnedRwLockReadGuard<Vec<u8>, [u8]>>(),
        3 * WORD + HELD
    );
    assert_eq!(
        size_of::<Option<OwnedRwLockReadGuard<u64>>>(),
        2 * WORD + HELD
    );
    assert_eq!(size_of::<OwnedRwLockWriteGuard<u64>>(), 2 * WORD + HELD);
    assert_eq!(
        size_of::<OwnedRwLockMappedWriteGuard<u64>>(),
        2 * WORD + HELD
    );
    assert_eq!(
        size_of::<OwnedRwLockUpgradableReadGuard<u64>>(),
        2 * WORD + HELD
    );
}
