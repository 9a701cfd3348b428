//! The one seam between the server and the lock it benchmarks: [`ShardLock`].
//!
//! Every shard of the store sits behind a `ShardLock` (the `lock-adapters` crate's
//! `AsyncRwLock`, shared with the benchmark); the server is generic over it and is
//! monomorphised once per `--lock` choice, so the three builds run exactly the same code apart
//! from the lock calls themselves.

pub use lock_adapters::AsyncRwLock as ShardLock;
use lock_adapters::{AsyncLockRw, Rwsem, Tokio};

/// The `--lock` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LockKind {
    Rwsem,
    Tokio,
    AsyncLock,
}

impl LockKind {
    pub const ALL: [LockKind; 3] = [LockKind::Rwsem, LockKind::Tokio, LockKind::AsyncLock];

    pub fn name(self) -> &'static str {
        match self {
            LockKind::Rwsem => <Rwsem<()> as ShardLock<()>>::NAME,
            LockKind::Tokio => <Tokio<()> as ShardLock<()>>::NAME,
            LockKind::AsyncLock => <AsyncLockRw<()> as ShardLock<()>>::NAME,
        }
    }
}
