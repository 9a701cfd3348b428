//! Choosing a policy: the default (throughput, bounded unfairness) or strict FIFO order.
//!
//! The default lets an arriving reader join readers and a spinning writer take a lock that
//! comes free before the queue's head, and bounds what the head can lose with a timed
//! handoff. `Policy::fifo()` serves waiters strictly in arrival order, as
//! `tokio::sync::RwLock` does. Run: `cargo run --example policy`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_rwsem::{Policy, RwLock};

/// Eight tasks queue behind a writer, alternating writer and reader; returns the order in
/// which they got the lock.
async fn grant_order(policy: Policy) -> Vec<String> {
    let lock = Arc::new(RwLock::with_policy((), policy));
    let order = Arc::new(Mutex::new(Vec::new()));
    let held = lock.write().await; // everyone below queues behind this guard
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (lock, order) = (lock.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                let _w = lock.write().await;
                order.lock().unwrap().push(format!("W{i}"));
            } else {
                let _r = lock.read().await;
                order.lock().unwrap().push(format!("R{i}"));
            }
        }));
        tokio::task::yield_now().await; // task i queues before task i + 1 is spawned
    }
    drop(held);
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    order
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // A handoff after 5 ms rather than the default's 500 us; everything else as the default.
    let tuned = Policy::new().handoff_timeout(Duration::from_millis(5));
    println!("default: {:?}", grant_order(Policy::default()).await);
    println!("tuned:   {:?}", grant_order(tuned).await);

    let fifo = grant_order(Policy::fifo()).await;
    println!("fifo:    {fifo:?}");
    // Under fifo the writers got the lock in the order they queued.
    let writers: Vec<_> = fifo.iter().filter(|e| e.starts_with('W')).collect();
    assert_eq!(writers, ["W0", "W2", "W4", "W6"]);
}
