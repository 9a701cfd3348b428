//! A tokio service sharing state: a cache that many tasks read and a few refresh.
//!
//! Readers take the lock shared and run side by side; a refresher takes it exclusively.
//! Owned guards (`read_owned`, `write_owned`) hold the lock through an `Arc`, so they can be
//! moved into spawned tasks with no borrow of the lock. Run: `cargo run --example cache`.

use std::collections::HashMap;
use std::sync::Arc;

use async_rwsem::RwLock;

type Cache = Arc<RwLock<HashMap<String, u64>>>;

/// A lookup: shared access, many at once.
async fn get(cache: &Cache, key: &str) -> Option<u64> {
    cache.read().await.get(key).copied()
}

/// A refresh: exclusive access, then downgraded so that the writer can go on reading
/// what it wrote without letting another writer in between.
async fn refresh(cache: Cache, key: &str, value: u64) -> u64 {
    let mut guard = cache.write_owned().await;
    *guard.entry(key.to_owned()).or_default() += value;
    let guard = guard.downgrade(); // readers may now join; no writer can
    guard[key]
}

#[tokio::main]
async fn main() {
    let cache: Cache = Arc::new(RwLock::new(HashMap::new()));

    let refreshers: Vec<_> = (1..=4)
        .map(|i| tokio::spawn(refresh(cache.clone(), "hits", i)))
        .collect();
    let readers: Vec<_> = (0..16)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { get(&cache, "hits").await.unwrap_or(0) })
        })
        .collect();

    for r in refreshers {
        r.await.unwrap();
    }
    let mut seen = Vec::new();
    for r in readers {
        seen.push(r.await.unwrap());
    }
    // Each reader saw the cache between two refreshes: a value from 0 to 1+2+3+4.
    assert!(seen.iter().all(|&v| v <= 10));
    assert_eq!(get(&cache, "hits").await, Some(10));

    // An owned read guard moves into a task of its own.
    let guard = cache.clone().read_owned().await;
    let total = tokio::spawn(async move { guard.values().sum::<u64>() })
        .await
        .unwrap();
    println!("hits = {total}; readers saw {seen:?}");
}
