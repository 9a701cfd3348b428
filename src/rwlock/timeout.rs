//! Acquires with a time limit (feature `tokio`): the acquire future under
//! `tokio::time::timeout`. The acquire is cancel safe, so an expired one holds nothing and
//! leaves nothing queued. The upgrades with a time limit (`upgrade_timeout`, beside the
//! upgradable guards) race the upgrade against a `tokio::time::Sleep` here
//! ([`race_upgrade`]), and stop the upgrade instead of dropping it when the time runs
//! out, so that the upgradable guard comes back.

use std::error::Error;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use super::guard::{RwLockReadGuard, RwLockWriteGuard};
use super::upgradable::RwLockUpgradableReadGuard;
use super::RwLock;
use crate::observe::Site;

/// The error of [`RwLock::read_timeout`], [`RwLock::write_timeout`] and
/// [`RwLock::upgradable_read_timeout`]: the time ran out before the lock was taken. Nothing is held and nothing is left queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl Error for Elapsed {}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading as [`read`](Self::read) does, giving up after `timeout`
    /// (feature `tokio`).
    ///
    /// Returns `Err(Elapsed)` if the lock was not taken in time; then nothing is held and
    /// the waiter has left the queue (passing on any wake-up it was given). A lock that
    /// can be taken at once is taken even with a zero `timeout`. Must be called in a tokio
    /// runtime with the time driver enabled (it panics otherwise, as
    /// `tokio::time::timeout` does). Cancel safe.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(1);
    /// let w = lock.write().await;
    /// assert!(lock.read_timeout(Duration::from_millis(5)).await.is_err());
    /// drop(w);
    /// let r = lock.read_timeout(Duration::from_millis(5)).await.unwrap();
    /// assert_eq!(*r, 1);
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn read_timeout(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<RwLockReadGuard<'_, T>, Elapsed>> + '_ {
        // Made here, so that the acquire's site is the caller's.
        let acquire = self.read_as(Site::caller(), "RwLock::read_timeout");
        async move {
            tokio::time::timeout(timeout, acquire)
                .await
                .map_err(|_| Elapsed(()))
        }
    }

    /// Locks for writing as [`write`](Self::write) does, giving up after `timeout`
    /// (feature `tokio`). On `Err(Elapsed)` nothing is held and nothing is left queued.
    /// As for [`read_timeout`](Self::read_timeout), needs a tokio runtime with the time
    /// driver. Cancel safe.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(1);
    /// let r = lock.read().await;
    /// let err = lock.write_timeout(Duration::from_millis(5)).await.unwrap_err();
    /// assert_eq!(err.to_string(), "deadline has elapsed");
    /// drop(r);
    /// *lock.write_timeout(Duration::from_millis(5)).await.unwrap() += 1;
    /// assert_eq!(*lock.read().await, 2);
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn write_timeout(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<RwLockWriteGuard<'_, T>, Elapsed>> + '_ {
        // Made here, so that the acquire's site is the caller's.
        let acquire = self.write_as(Site::caller(), "RwLock::write_timeout");
        async move {
            tokio::time::timeout(timeout, acquire)
                .await
                .map_err(|_| Elapsed(()))
        }
    }

    /// Locks for an upgradable read as [`upgradable_read`](Self::upgradable_read) does,
    /// giving up after `timeout` (feature `tokio`). On `Err(Elapsed)` nothing is held and
    /// nothing is left queued. Needs a tokio runtime with the time driver. Cancel safe.
    ///
    /// ```
    /// use std::time::Duration;
    /// use async_rwsem::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(1);
    /// let up = lock.upgradable_read().await;
    /// assert!(lock.upgradable_read_timeout(Duration::from_millis(5)).await.is_err());
    /// drop(up);
    /// assert!(lock.upgradable_read_timeout(Duration::from_millis(5)).await.is_ok());
    /// assert!(lock.try_write().is_ok()); // nothing held, nothing left queued
    /// # }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[cfg_attr(
        any(feature = "lock_stat", feature = "lockdep", feature = "tracing"),
        track_caller
    )]
    pub fn upgradable_read_timeout(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<RwLockUpgradableReadGuard<'_, T>, Elapsed>> + '_ {
        // Made here, so that the acquire's site is the caller's.
        let acquire = self.upgradable_read_as(Site::caller(), "RwLock::upgradable_read_timeout");
        async move {
            tokio::time::timeout(timeout, acquire)
                .await
                .map_err(|_| Elapsed(()))
        }
    }
}

/// Polls `upgrade` until it completes (`Some`) or `sleep` has elapsed (`None`, the upgrade
/// left pending for the caller to stop). The upgrade is polled first, as
/// `tokio::time::timeout` polls its future first: one that can complete at once does,
/// even with a zero timeout. The caller keeps the `Sleep` alive until the upgrade is
/// stopped: dropping it drops a waker (foreign code), which must not run while the
/// upgrade may still be stopped instead of cancelled.
pub(super) async fn race_upgrade<F: Future + ?Sized>(
    mut upgrade: Pin<&mut F>,
    mut sleep: Pin<&mut tokio::time::Sleep>,
) -> Option<F::Output> {
    poll_fn(|cx| {
        if let Poll::Ready(done) = upgrade.as_mut().poll(cx) {
            return Poll::Ready(Some(done));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}
