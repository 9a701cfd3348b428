//! Never wait forever: `try_*` (no wait at all) and the `_timeout` acquires.
//!
//! `read_timeout`, `write_timeout` and `upgradable_read_timeout` need the `tokio` feature
//! (they use tokio's timer); `tokio::time::timeout(d, lock.write())` works with any feature
//! set, since every acquire is cancel safe. Run: `cargo run --example timeouts` (`tokio` is a
//! default feature).

use std::sync::Arc;
use std::time::Duration;

use async_rwsem::{RwLock, TryLockError};

#[tokio::main]
async fn main() {
    let config = Arc::new(RwLock::new(String::from("v1")));

    // A writer holds the lock for a while (a slow reload, say).
    let slow = config.clone().write_owned().await;
    let reload = tokio::spawn(async move {
        let mut slow = slow;
        tokio::time::sleep(Duration::from_millis(200)).await;
        *slow = String::from("v2");
    });

    // try_read: fails at once rather than waiting.
    match config.try_read() {
        Ok(_) => unreachable!("the writer holds it"),
        Err(TryLockError { .. }) => println!("try_read: busy, serving the cached copy"),
    }

    // read_timeout: waits at most 20 ms, then gives up; the queued acquire is withdrawn.
    match config.read_timeout(Duration::from_millis(20)).await {
        Ok(_) => unreachable!("the writer holds it for 200 ms"),
        Err(elapsed) => println!("read_timeout: {elapsed}"),
    }

    // tokio's own timeout around any acquire: the same, with no feature needed.
    let r = tokio::time::timeout(Duration::from_millis(20), config.write()).await;
    assert!(r.is_err(), "still held");

    // A long enough timeout gets the lock once the reload is done.
    let value = config
        .read_timeout(Duration::from_secs(5))
        .await
        .expect("the reload ends in 200 ms");
    assert_eq!(*value, "v2");
    println!("read after the reload: {}", *value);
    drop(value);
    reload.await.unwrap();

    // With nobody inside, try_write succeeds.
    *config.try_write().expect("free") = String::from("v3");
    assert_eq!(*config.read().await, "v3");
}
