//! The same scenario code run against `tokio::sync::RwLock` and `async_rwsem::RwLock`:
//! the macro below expands one module per lock, and the only difference between the two
//! expansions is the path in the `use`. What compiles and passes against both is the
//! part of the API (names, signatures, auto traits and observable behaviour) that moving
//! from tokio to this crate keeps.
//!
//! Behaviour the two locks do not share on purpose (the fairness model: tokio queues a
//! writer at once and serves strictly in arrival order, this lock lets arrivals steal
//! and bounds it with a timed handoff) is left out: each step here is one that both
//! guarantee.

mod support;

macro_rules! parity {
    ($name:ident, $($krate:ident)::+) => {
        mod $name {
            use std::sync::Arc;
            use std::thread;

            use $($krate)::+::{
                OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard,
                RwLock, RwLockMappedWriteGuard, RwLockReadGuard, RwLockWriteGuard,
                TryLockError,
            };
            use tokio_test::task::spawn;
            use tokio_test::{assert_pending, assert_ready};

            fn is_send<T: Send>(_: &T) {}
            fn is_static<T: 'static>(_: &T) {}

            #[test]
            fn constructors_and_plain_access() {
                static GLOBAL: RwLock<u32> = RwLock::const_new(3);
                assert_eq!(*GLOBAL.try_read().unwrap(), 3);
                let mut l = RwLock::new(1);
                *l.get_mut() += 1;
                assert_eq!(l.into_inner(), 2);
                assert_eq!(RwLock::<u8>::default().into_inner(), 0);
                assert_eq!(RwLock::from(5).into_inner(), 5);
            }

            #[test]
            fn try_locks_share_readers_and_exclude_writers() {
                let l = RwLock::new(1);
                let r1 = l.try_read().unwrap();
                let r2 = l.try_read().unwrap();
                let err: TryLockError = l.try_write().unwrap_err();
                assert_eq!(err.to_string(), "operation would block");
                assert_eq!(*r1 + *r2, 2);
                assert_eq!(format!("{r1:?} {r2}"), "1 1");
                drop((r1, r2));
                let mut w = l.try_write().unwrap();
                assert!(l.try_read().is_err());
                assert!(l.try_write().is_err());
                *w = 2;
                assert_eq!(format!("{w:?} {w}"), "2 2");
                drop(w);
                assert_eq!(*l.try_read().unwrap(), 2);
            }

            #[test]
            fn debug_prints_the_value_or_locked() {
                let l = RwLock::new(7);
                assert_eq!(format!("{l:?}"), "RwLock { data: 7 }");
                let w = l.try_write().unwrap();
                assert_eq!(format!("{l:?}"), "RwLock { data: <locked> }");
                drop(w);
                let r = l.try_read().unwrap();
                assert_eq!(format!("{l:?}"), "RwLock { data: 7 }");
                drop(r);
            }

            #[test]
            #[should_panic(expected = "a RwLock may not be created with 0 readers")]
            fn zero_max_readers_panics_with_the_same_message() {
                let _ = RwLock::with_max_readers((), 0);
            }

            #[test]
            fn writer_waits_for_reader_and_reader_for_writer() {
                let l = RwLock::new(0);
                let r = l.try_read().unwrap();
                let mut w = spawn(l.write());
                assert_pending!(w.poll());
                drop(r);
                assert!(w.is_woken());
                let mut g = assert_ready!(w.poll());
                *g += 1;
                let mut r = spawn(l.read());
                assert_pending!(r.poll());
                drop(g);
                assert!(r.is_woken());
                assert_eq!(*assert_ready!(r.poll()), 1);
                // Dropping a pending acquire leaves the lock usable.
                let g = l.try_write().unwrap();
                let mut r = spawn(l.read());
                let mut w = spawn(l.write());
                assert_pending!(r.poll());
                assert_pending!(w.poll());
                drop((r, w, g));
                drop(l.try_write().unwrap());
            }

            #[test]
            fn downgrade_lets_readers_in_and_keeps_writers_out() {
                crate::support::lockdep_off();
                let l = RwLock::new(1);
                let mut w = l.try_write().unwrap();
                *w = 2;
                let mut r1 = spawn(l.read());
                assert_pending!(r1.poll());
                let r = w.downgrade();
                assert!(r1.is_woken());
                assert_eq!(*assert_ready!(r1.poll()), 2);
                assert_eq!(*l.try_read().unwrap(), 2);
                assert!(l.try_write().is_err());
                assert_eq!(*r, 2);
            }

            #[test]
            fn mapped_guards() {
                let l = RwLock::new((1, vec![10, 20]));
                let first = RwLockReadGuard::map(l.try_read().unwrap(), |p| &p.0);
                assert_eq!(*first, 1);
                drop(first);
                let g = RwLockReadGuard::try_map(l.try_read().unwrap(), |p| p.1.get(5))
                    .unwrap_err();
                assert_eq!(*RwLockReadGuard::try_map(g, |p| p.1.get(1)).unwrap(), 20);

                let w = RwLockWriteGuard::try_map(l.try_write().unwrap(), |p| p.1.get_mut(5))
                    .unwrap_err();
                let mut list: RwLockMappedWriteGuard<'_, Vec<i32>> =
                    RwLockWriteGuard::map(w, |p| &mut p.1);
                list.push(30);
                let list = RwLockMappedWriteGuard::try_map(list, |v| v.get_mut(9)).unwrap_err();
                *RwLockMappedWriteGuard::map(list, |v| &mut v[0]) = 11;
                assert!(l.try_read().is_ok());
                *RwLockWriteGuard::into_mapped(l.try_write().unwrap()) = (2, vec![]);
                let mut m = RwLockWriteGuard::try_map(l.try_write().unwrap(), |p| Some(&mut p.0))
                    .unwrap();
                *m += 1;
                drop(m);
                assert_eq!(*l.try_read().unwrap(), (3, vec![]));

                let w = l.try_write().unwrap();
                let w = RwLockWriteGuard::try_downgrade_map(w, |p| p.1.first()).unwrap_err();
                assert!(l.try_read().is_err());
                let zero = RwLockWriteGuard::downgrade_map(w, |p| &p.0);
                assert_eq!(*zero, 3);
                assert!(l.try_read().is_ok());
                assert!(l.try_write().is_err());
                drop(zero);
                let zero =
                    RwLockWriteGuard::try_downgrade_map(l.try_write().unwrap(), |p| Some(&p.0))
                        .unwrap();
                assert!(l.try_read().is_ok());
                drop(zero);
                assert!(l.try_write().is_ok());
            }

            #[test]
            fn owned_guards() {
                let l = Arc::new(RwLock::new((1, vec![10, 20])));
                let r = Arc::clone(&l).try_read_owned().unwrap();
                is_send(&r);
                is_static(&r);
                assert!(Arc::ptr_eq(&l, OwnedRwLockReadGuard::rwlock(&r)));
                assert!(Arc::clone(&l).try_write_owned().is_err());
                let r = OwnedRwLockReadGuard::try_map(r, |p| p.1.get(9)).unwrap_err();
                let r: OwnedRwLockReadGuard<(i32, Vec<i32>), i32> =
                    OwnedRwLockReadGuard::map(r, |p| &p.0);
                let r = OwnedRwLockReadGuard::try_map(r, |x| Some(x)).unwrap();
                assert!(Arc::ptr_eq(&l, OwnedRwLockReadGuard::rwlock(&r)));
                assert_eq!(*r, 1);
                drop(r);

                let w = Arc::clone(&l).try_write_owned().unwrap();
                is_send(&w);
                is_static(&w);
                assert!(Arc::ptr_eq(&l, OwnedRwLockWriteGuard::rwlock(&w)));
                let w = OwnedRwLockWriteGuard::try_map(w, |p| p.1.get_mut(9)).unwrap_err();
                let list: OwnedRwLockMappedWriteGuard<(i32, Vec<i32>), Vec<i32>> =
                    OwnedRwLockWriteGuard::map(w, |p| &mut p.1);
                assert!(Arc::ptr_eq(&l, OwnedRwLockMappedWriteGuard::rwlock(&list)));
                let list = OwnedRwLockMappedWriteGuard::try_map(list, |v| v.get_mut(9))
                    .unwrap_err();
                let mut first = OwnedRwLockMappedWriteGuard::map(list, |v| &mut v[0]);
                *first += 1;
                let mut first = OwnedRwLockMappedWriteGuard::try_map(first, |x| Some(x)).unwrap();
                *first += 1;
                drop(first);
                let mut whole: OwnedRwLockMappedWriteGuard<(i32, Vec<i32>)> =
                    OwnedRwLockWriteGuard::into_mapped(Arc::clone(&l).try_write_owned().unwrap());
                whole.0 = 2;
                drop(whole);
                let mut m =
                    OwnedRwLockWriteGuard::try_map(Arc::clone(&l).try_write_owned().unwrap(), |p| {
                        Some(&mut p.0)
                    })
                    .unwrap();
                *m += 1;
                drop(m);

                let w = Arc::clone(&l).try_write_owned().unwrap();
                let r = w.downgrade();
                assert_eq!(*r, (3, vec![12, 20]));
                assert!(l.try_read().is_ok());
                assert!(l.try_write().is_err());
                drop(r);
                let w = Arc::clone(&l).try_write_owned().unwrap();
                let w = OwnedRwLockWriteGuard::try_downgrade_map(w, |p| p.1.get(9)).unwrap_err();
                assert!(l.try_read().is_err());
                let list = OwnedRwLockWriteGuard::downgrade_map(w, |p| &p.1);
                assert!(l.try_read().is_ok());
                assert_eq!(*list, [12, 20]);
                drop(list);
                let last = OwnedRwLockWriteGuard::try_downgrade_map(
                    Arc::clone(&l).try_write_owned().unwrap(),
                    |p| p.1.last(),
                )
                .unwrap();
                assert_eq!(*last, 20);
                assert!(l.try_write().is_err());
                drop(last);
                assert_eq!(Arc::strong_count(&l), 1);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn owned_guards_across_tasks() {
                let l = Arc::new(RwLock::new(0u64));
                let mut tasks = Vec::new();
                // Fewer rounds under Miri (it interprets every step).
                const ROUNDS: u64 = if cfg!(miri) { 5 } else { 50 };
                for _ in 0..4 {
                    let l = Arc::clone(&l);
                    tasks.push(tokio::spawn(async move {
                        for _ in 0..ROUNDS {
                            let mut w = Arc::clone(&l).write_owned().await;
                            *w += 1;
                            let r = w.downgrade();
                            tokio::spawn(async move { assert!(*r > 0) }).await.unwrap();
                            let r = Arc::clone(&l).read_owned().await;
                            tokio::task::yield_now().await;
                            drop(r);
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
                assert_eq!(*l.read().await, 4 * ROUNDS);
                assert!(l.try_write().is_ok());
            }

            #[test]
            fn blocking_from_plain_threads() {
                let l = Arc::new(RwLock::new(0u64));
                let threads: Vec<_> = (0..4)
                    .map(|_| {
                        let l = Arc::clone(&l);
                        thread::spawn(move || {
                            for _ in 0..100 {
                                *l.blocking_write() += 1;
                                assert!(*l.blocking_read() > 0);
                            }
                        })
                    })
                    .collect();
                for t in threads {
                    t.join().unwrap();
                }
                assert_eq!(*l.blocking_read(), 400);
            }

            #[test]
            fn blocking_writer_woken_by_async_reader() {
                let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
                let l = Arc::new(RwLock::new(0));
                let r = rt.block_on(l.read());
                let c = Arc::clone(&l);
                let writer = thread::spawn(move || *c.blocking_write() += 1);
                thread::sleep(std::time::Duration::from_millis(20));
                assert!(!writer.is_finished());
                rt.block_on(async move { drop(r) });
                writer.join().unwrap();
                assert_eq!(*l.try_read().unwrap(), 1);
            }
        }
    };
}

parity!(tokio_rwlock, tokio::sync);
parity!(rwsem_rwlock, async_rwsem);
