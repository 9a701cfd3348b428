//! The one-line swap is safe by default: with the default features (`tokio` among them), a
//! task that loops on a free lock, waiting for a neighbour on the same current-thread
//! runtime to change the value, lets the neighbour run, as with `tokio::sync::RwLock`.
//! Without the `tokio` feature the loop never yields and the runtime hangs (no
//! `tokio::time::timeout` can fire there either), so the loop runs on a thread of its own
//! and the test waits for it with a deadline.

use std::sync::{mpsc, Arc};
use std::time::Duration;

use async_rwsem::RwLock;

/// Runs the loop of the issue on a fresh current-thread runtime, on a thread of its own:
/// `while !*flag.read().await {}` beside a task that writes the flag. Returns whether it
/// ended within `deadline`. A loop that hangs keeps its thread spinning until the test
/// binary exits.
fn reading_in_a_loop_ends_within(deadline: Duration) -> bool {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            let flag = Arc::new(RwLock::new(false));
            let looping = {
                let flag = Arc::clone(&flag);
                tokio::spawn(async move { while !*flag.read().await {} })
            };
            let writer = {
                let flag = Arc::clone(&flag);
                tokio::spawn(async move { *flag.write().await = true })
            };
            looping.await.unwrap();
            writer.await.unwrap();
        });
        let _ = done.send(());
    });
    finished.recv_timeout(deadline).is_ok()
}

/// With the default features the loop ends: every async acquire takes a unit of tokio's
/// cooperative budget, and the task yields once the budget is spent.
#[test]
#[cfg(feature = "tokio")]
fn a_read_loop_lets_the_writer_run_by_default() {
    assert!(
        reading_in_a_loop_ends_within(Duration::from_secs(30)),
        "the read loop never yielded to the writer on a current-thread runtime"
    );
}

/// With `default-features = false` (no tokio budget) the same loop never yields: what the
/// feature guards against, and what another executor's user must avoid (put a yield in such
/// a loop). Fails if an acquire starts yielding without the feature.
#[test]
#[cfg(not(feature = "tokio"))]
fn without_the_tokio_feature_a_read_loop_hangs_a_current_thread_runtime() {
    assert!(!reading_in_a_loop_ends_within(Duration::from_millis(500)));
}

/// `tokio` is a default feature, so that the test above runs in a plain `cargo test`: a
/// manifest that drops it from `default` fails here, whatever features this build has.
#[test]
fn tokio_is_a_default_feature() {
    let manifest = include_str!("../Cargo.toml");
    let default = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("default ="))
        .expect("Cargo.toml has a default feature list");
    assert!(default.contains("\"tokio\""), "Cargo.toml: {default}");
}
