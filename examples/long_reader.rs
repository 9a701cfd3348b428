//! A long scan under a read lock that lets writers in: every `CHECK_EVERY` items it asks
//! `RwLockReadGuard::writer_waiting`, and if a writer is queued it releases the lock
//! fairly (the writer is handed the lock at once), locks again, and goes on from the item
//! it had reached. Run: `cargo run --example long_reader`.

use std::sync::Arc;

use async_rwsem::{RwLock, RwLockReadGuard};

const CHECK_EVERY: usize = 1024;

/// Sums every entry of `log`, from the read lock `guard` holds on, the ones appended during
/// the scan included. Returns the sum and how many times the scan stepped aside.
async fn scan<'a>(
    log: &'a RwLock<Vec<u64>>,
    mut guard: RwLockReadGuard<'a, Vec<u64>>,
) -> (u64, usize) {
    let (mut sum, mut next, mut pauses) = (0, 0, 0);
    while next < guard.len() {
        sum += guard[next];
        next += 1;
        if next % CHECK_EVERY == 0 && RwLockReadGuard::writer_waiting(&guard) {
            // `unlock_fair` hands the queued writer the lock whatever the policy; the new
            // `read` queues behind it. Writers only append, so `next` stays valid.
            RwLockReadGuard::unlock_fair(guard);
            guard = log.read().await;
            pauses += 1;
        }
    }
    (sum, pauses)
}

#[tokio::main]
async fn main() {
    let log = Arc::new(RwLock::new((1..=1_000_000).collect::<Vec<u64>>()));
    let guard = log.read().await; // the scan starts first: the writers queue behind it
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let log = Arc::clone(&log);
            tokio::spawn(async move { log.write().await.push(1) })
        })
        .collect();
    let (sum, pauses) = scan(&log, guard).await;
    for writer in writers {
        writer.await.unwrap();
    }
    let base = 1_000_000 * 1_000_001 / 2;
    // Each writer's entry was either seen by the scan or appended after it ended.
    let seen = sum - base;
    assert!(seen <= 4);
    assert_eq!(log.read().await.len(), 1_000_004);
    println!(
        "scanned {} items; stepped aside {pauses} times; saw {seen} of the 4 writes",
        1_000_000 + seen
    );
}
