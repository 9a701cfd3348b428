//! The same lock from plain threads: `blocking_read`, `blocking_write` and the timed
//! `try_*_for` acquires, beside async tasks.
//!
//! The blocking acquires park the calling thread; never call them from inside an async
//! task (on a runtime's worker thread), where they would block the executor. Run:
//! `cargo run --example blocking`.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use async_rwsem::RwLock;

fn main() {
    let counter = Arc::new(RwLock::new(0u64));

    // Plain threads: four writers, four readers.
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let counter = counter.clone();
            thread::spawn(move || {
                for _ in 0..1_000 {
                    if i % 2 == 0 {
                        *counter.blocking_write() += 1;
                    } else {
                        let v = *counter.blocking_read();
                        assert!(v <= 5_000); // 4 threads and a task write 1,000 each
                    }
                }
            })
        })
        .collect();

    // An async task on a runtime of its own takes the same lock with `.await`.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..1_000 {
            *counter.write().await += 1;
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*counter.blocking_read(), 5_000);

    // A timed acquire gives up while another thread holds the lock.
    let held = counter.blocking_write();
    let other = counter.clone();
    let waited = thread::spawn(move || other.try_read_for(Duration::from_millis(20)).is_none());
    assert!(waited.join().unwrap(), "the write guard was held");
    drop(held);
    assert_eq!(
        counter.try_read_for(Duration::from_millis(20)).map(|g| *g),
        Some(5_000)
    );
    println!("counter = 5000, from 4 threads and a task");
}
