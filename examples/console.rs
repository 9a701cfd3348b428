//! A small service whose shared state is behind this crate's lock, to watch in
//! [tokio-console](https://github.com/tokio-rs/console): the lock is listed as a resource
//! (`RwLock`, kind `Sync`, where it was made), with `current_readers` and `write_locked`,
//! and each task's waits on it as async operations (`RwLock::read`, `RwLock::write`, ...).
//!
//! The lock emits what tokio's own `RwLock` emits, under the same switches: the cfg
//! `tokio_unstable` and the crate feature `tracing`. Run the example, then the console in
//! another terminal:
//!
//! ```text
//! RUSTFLAGS="--cfg tokio_unstable" cargo run --example console --features tracing
//! tokio-console        # cargo install --locked tokio-console
//! ```
//!
//! It serves for 60 seconds (`CONSOLE_SECS=600` for longer). In a program of your own:
//! depend on `async-rwsem` with `features = ["tracing"]` and on `console-subscriber`,
//! call `console_subscriber::init()` first thing in `main`, and build with
//! `RUSTFLAGS="--cfg tokio_unstable"` (tokio's `tracing` feature, which
//! `console-subscriber` turns on, makes tokio report its tasks).
//!
//! Built without the cfg, the example runs the same workload for a moment, says how to
//! run it under the console, and exits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_rwsem::{RwLock, RwLockUpgradableReadGuard};

/// A configuration store: many readers, an occasional writer that holds the lock long
/// enough for the readers to queue (so the console shows them waiting).
type Config = Arc<RwLock<HashMap<String, u64>>>;

#[tokio::main]
async fn main() {
    #[cfg(tokio_unstable)]
    console_subscriber::init();

    let run_for = if cfg!(tokio_unstable) {
        let secs = std::env::var("CONSOLE_SECS")
            .ok()
            .and_then(|s| s.parse().ok());
        Duration::from_secs(secs.unwrap_or(60))
    } else {
        Duration::from_millis(200)
    };
    if cfg!(tokio_unstable) {
        println!(
            "serving for {run_for:?}: run `tokio-console` in another terminal to watch the lock"
        );
    }

    let config: Config = Arc::new(RwLock::new(HashMap::new()));
    let reads = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + run_for;

    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (config, reads) = (Arc::clone(&config), Arc::clone(&reads));
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                if config.read().await.contains_key("key-1") {
                    reads.fetch_add(1, Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    // The writer: one key more every 100 ms, holding the lock for 20 ms.
    let writer = {
        let config = Arc::clone(&config);
        tokio::spawn(async move {
            let mut version = 0;
            while Instant::now() < deadline {
                let mut map = config.write().await;
                version += 1;
                map.insert(format!("key-{version}"), version);
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(map);
                tokio::time::sleep(Duration::from_millis(80)).await;
            }
            version
        })
    };
    // A task that checks, then fixes, without letting a writer in between (an upgradable
    // read, then its upgrade: the console shows `RwLockUpgradableReadGuard::upgrade`).
    let fixer = {
        let config = Arc::clone(&config);
        tokio::spawn(async move {
            let mut fixes = 0;
            while Instant::now() < deadline {
                let view = config.upgradable_read().await;
                if !view.contains_key("default") {
                    let mut map = RwLockUpgradableReadGuard::upgrade(view).await;
                    map.insert("default".into(), 0);
                    fixes += 1;
                } else {
                    drop(view);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                config.write().await.remove("default");
            }
            fixes
        })
    };

    for task in tasks {
        task.await.unwrap();
    }
    let writes = writer.await.unwrap();
    let fixes = fixer.await.unwrap();
    let entries = config.read().await.len();
    println!(
        "{} reads that saw key-1, {writes} writes, {fixes} fixes; {entries} entries at the end",
        reads.load(Relaxed)
    );
    assert!(writes > 0 && fixes > 0, "every task ran");
    if !cfg!(tokio_unstable) {
        println!(
            "to watch the lock in tokio-console: \
             RUSTFLAGS=\"--cfg tokio_unstable\" cargo run --example console --features tracing"
        );
    }
}
