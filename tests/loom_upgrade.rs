//! loom models of upgradable reads (the rest are in `tests/loom.rs`). Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom_upgrade`.
#![cfg(loom)]

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use async_rwsem::{Policy, RwLock, RwLockUpgradableReadGuard};
use loom::future::block_on;
use loom::thread;

#[path = "support/loom.rs"]
#[allow(dead_code)] // each model file uses its own subset
mod support;

use support::{assert_idle, poll_once, Data, Lock};

fn lock() -> Arc<Lock> {
    Arc::new(RwLock::with_policy(
        Data::new(),
        Policy::new()
            .writer_spin(Duration::ZERO)
            .writer_yields(0)
            .handoff_timeout(Duration::MAX),
    ))
}

#[test]
fn upgrade_racing_a_reader() {
    loom::model(|| {
        let l = lock();
        let l2 = Arc::clone(&l);
        let reader = thread::spawn(move || block_on(async { l2.read().await.get() }));
        block_on(async {
            let up = l.upgradable_read().await;
            let w = RwLockUpgradableReadGuard::upgrade(up).await;
            w.bump();
        });
        assert!(reader.join().unwrap() <= 1);
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}

#[test]
fn upgrade_waits_for_a_reader_inside() {
    loom::model(|| {
        let l = lock();
        let r = l.try_read().unwrap();
        let l2 = Arc::clone(&l);
        let upgrader = thread::spawn(move || {
            block_on(async {
                let up = l2.upgradable_read().await;
                let w = RwLockUpgradableReadGuard::upgrade(up).await;
                w.bump();
            })
        });
        assert_eq!(r.get(), 0);
        drop(r);
        upgrader.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 1);
        assert_idle(&l);
    });
}

#[test]
fn cancelled_upgrade_while_reader_leaves() {
    loom::model(|| {
        let l = lock();
        let r = l.try_read().unwrap();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            let up = block_on(l2.upgradable_read());
            let mut upgrade = pin!(RwLockUpgradableReadGuard::upgrade(up));
            if let Poll::Ready(w) = poll_once(upgrade.as_mut()) {
                w.bump();
            }
            // Dropped: queued, granted or done.
        });
        let l3 = Arc::clone(&l);
        let w = thread::spawn(move || block_on(async { l3.write().await.bump() }));
        drop(r);
        t.join().unwrap();
        w.join().unwrap();
        assert!(l.try_read().unwrap().get() >= 1);
        assert_idle(&l);
    });
}

#[test]
fn two_upgradable_readers() {
    loom::model(|| {
        let l = lock();
        let l2 = Arc::clone(&l);
        let t = thread::spawn(move || {
            block_on(async {
                let up = l2.upgradable_read().await;
                RwLockUpgradableReadGuard::upgrade(up).await.bump();
            })
        });
        block_on(async {
            let up = l.upgradable_read().await;
            RwLockUpgradableReadGuard::upgrade(up).await.bump();
        });
        t.join().unwrap();
        assert_eq!(l.try_read().unwrap().get(), 2);
        assert_idle(&l);
    });
}
