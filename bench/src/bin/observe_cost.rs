//! What the observers cost (`lockdep`, `lock_stat`): the same four measurements in
//! whatever build this is, for a script to compare builds with and without the features
//! (`scripts/observe-cost.sh` builds each into its own target folder and interleaves the
//! runs).
//!
//! - `read` / `write`: an uncontended `read().await` (`write().await`) and its drop, in
//!   one task on a current-thread runtime, ns per lock+unlock.
//! - `one-lock`: 8 tasks on one lock, each taking the write lock (1 in 8 acquires) or a
//!   read lock for a tiny section, on 2 workers: acquires per second.
//! - `private-1w`, `private-2w`: 8 tasks, each with a lock of its own, taking it in turn
//!   with another lock held first (a chain of two: what lockdep checks), on 1 and on 2
//!   workers: acquires per second; their ratio is how the build scales.
//!
//! Output: one line per measurement, `name value`, for the script.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_rwsem::RwLock;
use clap::Parser;

/// Measures what this build of async-rwsem costs per acquire.
#[derive(Parser, Debug)]
struct Args {
    /// Seconds per throughput measurement.
    #[arg(long, default_value_t = 1.0)]
    secs: f64,
    /// Lock+unlock pairs per uncontended measurement.
    #[arg(long, default_value_t = 2_000_000)]
    iterations: u64,
    /// Only the two uncontended measurements (`read`, `write`): one thread, for a quick
    /// look on a machine other work shares.
    #[arg(long)]
    uncontended: bool,
}

fn main() {
    let args = Args::parse();
    #[cfg(feature = "lockdep")]
    async_rwsem::lockdep::set_report(async_rwsem::lockdep::Report::Panic);
    let duration = Duration::from_secs_f64(args.secs);
    println!("read {:.1}", uncontended(args.iterations, false));
    println!("write {:.1}", uncontended(args.iterations, true));
    if args.uncontended {
        return;
    }
    println!("one-lock {:.0}", one_lock(duration));
    println!("private-1w {:.0}", private_locks(1, duration));
    println!("private-2w {:.0}", private_locks(2, duration));
}

/// ns per uncontended lock+unlock.
fn uncontended(iterations: u64, write: bool) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let lock = RwLock::new(0u64);
        // Warm up: the first acquire registers the lock's class.
        drop(lock.read().await);
        let start = Instant::now();
        for _ in 0..iterations {
            if write {
                *lock.write().await += 1;
            } else {
                std::hint::black_box(*lock.read().await);
            }
        }
        start.elapsed().as_nanos() as f64 / iterations as f64
    })
}

/// Runs `tasks` made by `task` on `workers` workers for `duration`: acquires per second.
fn run<F, Fut>(workers: usize, tasks: usize, duration: Duration, task: F) -> f64
where
    F: Fn(usize, Arc<AtomicBool>, Arc<AtomicU64>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_time()
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|i| tokio::spawn(task(i, Arc::clone(&stop), Arc::clone(&done))))
            .collect();
        tokio::time::sleep(duration).await;
        stop.store(true, Relaxed);
        for handle in handles {
            handle.await.unwrap();
        }
    });
    done.load(Relaxed) as f64 / duration.as_secs_f64()
}

/// 8 tasks on one lock, tiny sections, 1 write in 8.
fn one_lock(duration: Duration) -> f64 {
    let lock = Arc::new(RwLock::new(0u64));
    run(2, 8, duration, move |_, stop, done| {
        let lock = Arc::clone(&lock);
        async move {
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                for i in 0..64u64 {
                    if i % 8 == 0 {
                        *lock.write().await += 1;
                    } else {
                        std::hint::black_box(*lock.read().await);
                    }
                }
                n += 64;
            }
            done.fetch_add(n, Relaxed);
        }
    })
}

/// 8 tasks, a lock of their own each, taken while holding an outer lock of their own.
fn private_locks(workers: usize, duration: Duration) -> f64 {
    run(workers, 8, duration, |_, stop, done| async move {
        let outer = RwLock::new(0u64);
        let inner = RwLock::new(0u64);
        let mut n = 0u64;
        while !stop.load(Relaxed) {
            for _ in 0..64 {
                let _outer = outer.read().await;
                *inner.write().await += 1;
            }
            n += 64;
            tokio::task::yield_now().await;
        }
        done.fetch_add(n, Relaxed);
    })
}
