//! Finding a slow holder and a lock-order bug with the lock's own tools.
//!
//! `cargo run --example diagnose --features lock_stat,lockdep`
//!
//! 1. A cache whose refresh does slow work under the write lock: the live view
//!    (`snapshot`) shows who holds the lock, where and since when, and who queues behind
//!    it; `lock_stat` shows the wait and hold times and the line of the longest hold.
//! 2. Two tasks that take two locks in opposite orders, one after the other: nothing
//!    deadlocks in this run, but lockdep reports the cycle the first time it appears.
use std::sync::Arc;
use std::time::Duration;

use async_rwsem::lockdep::{self, Report};
use async_rwsem::RwLock;

#[tokio::main]
async fn main() {
    // 1. The slow holder.
    let cache = Arc::new(RwLock::new(vec![0u64; 16]));
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let cache = Arc::clone(&cache);
            tokio::spawn(async move {
                for _ in 0..50 {
                    let sum: u64 = cache.read().await.iter().sum();
                    std::hint::black_box(sum + i);
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            })
        })
        .collect();
    let refresher = {
        let cache = Arc::clone(&cache);
        tokio::spawn(async move {
            let mut entries = cache.write().await;
            // The bug: slow work (an I/O call, here a sleep) inside the write section.
            tokio::time::sleep(Duration::from_millis(30)).await;
            entries.iter_mut().for_each(|e| *e += 1);
        })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    // While it is slow: who is inside, and who waits?
    let now = cache.snapshot();
    println!("live: {now}");
    if let Some(holder) = now.holder {
        println!(
            "  {:?} holder taken at {} for {:?} so far",
            holder.access, holder.location, holder.held_for
        );
    }
    refresher.await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    // Afterwards: the times, and where the longest hold was taken.
    let stats = cache.lock_stat();
    println!("\n{stats}");
    let longest = stats.longest_hold().expect("the lock was held");
    assert!(longest.duration >= Duration::from_millis(30));
    assert_eq!(longest.location.file(), file!());

    // 2. The lock-order bug. Report by panicking (the default), so that the task that
    // closes the cycle fails where it acquires.
    lockdep::set_report(Report::Panic);
    let accounts = Arc::new(RwLock::new(0u64).with_lockdep_class("accounts"));
    let ledger = Arc::new(RwLock::new(Vec::<u64>::new()).with_lockdep_class("ledger"));
    let (a, l) = (Arc::clone(&accounts), Arc::clone(&ledger));
    // A deposit takes the accounts, then the ledger.
    tokio::spawn(async move {
        let mut balance = a.write().await;
        *balance += 10;
        l.write().await.push(10);
    })
    .await
    .unwrap();
    // An audit, later, takes the ledger, then the accounts: run beside a deposit, each
    // would wait for the other forever.
    let audit = tokio::spawn(async move {
        let entries = ledger.read().await;
        let balance = accounts.read().await;
        assert_eq!(entries.iter().sum::<u64>(), *balance);
    });
    let report = audit
        .await
        .expect_err("lockdep reports the cycle")
        .into_panic();
    let report = report
        .downcast_ref::<String>()
        .expect("a report is a message");
    // The panic hook printed the whole report above; its first line:
    println!(
        "\nthe audit task stopped with: {}",
        report.lines().next().unwrap()
    );
    assert!(report.contains(r#""ledger" -> "accounts""#));
}
