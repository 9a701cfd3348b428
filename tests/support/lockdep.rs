//! Helpers of the lockdep suites (`tests/lockdep.rs`, `tests/lockdep_tasks.rs`).

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use async_rwsem::lockdep::{self, Report};
use async_rwsem::RwLock;

/// How long a wait for a lock of its own task lasts before lockdep reports it, in these
/// suites: short, so that they do not wait long for the reports of real deadlocks; long
/// enough for the siblings' holds of the tests that expect no report (a few ms).
pub const DEADLOCK_TIMEOUT: Duration = Duration::from_millis(300);

/// Every report a panic, whatever `ASYNC_RWSEM_LOCKDEP` says (a run may set it to `off`,
/// as a suite that takes reported orders on purpose can), and the deadlock timeout
/// [`DEADLOCK_TIMEOUT`]. Every test calls it first; they all set the same.
pub fn setup() {
    lockdep::set_report(Report::Panic);
    lockdep::set_deadlock_timeout(DEADLOCK_TIMEOUT);
}

/// A lock of the class `name`, shareable with spawned tasks.
pub fn lock(name: &'static str) -> Arc<RwLock<u32>> {
    Arc::new(RwLock::new(0).with_lockdep_class(name))
}

/// The report a panic carried.
pub fn message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => panic!("not a lockdep report: {:?}", payload.downcast_ref::<&str>()),
    }
}

/// Runs `task` as a tokio task and returns its report (its panic's message).
pub async fn report_of<F>(task: F) -> String
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let error = tokio::spawn(task).await.expect_err("no lockdep report");
    message(error.into_panic())
}

/// Runs `task` as a tokio task and fails with its report if it makes one.
pub async fn silent<F>(task: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    if let Err(error) = tokio::spawn(task).await {
        panic!("reported: {}", message(error.into_panic()));
    }
}
