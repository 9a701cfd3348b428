//! The sharded key-value store: N shards, each a map behind a [`ShardLock`].
//!
//! A key's shard comes from a 64-bit SipHash of the key (random seed per process). Inside a
//! shard, entries are kept in hash maps keyed by that hash, each holding one slice of the
//! shard's range of hashes (extendible hashing: a map that grows past 512 entries splits in
//! two), so a lookup is one hash-table probe, and the maps walked in order, each sorted, give
//! `SCAN` a cursor that survives inserts and deletes (shard index and hash prefix).
//!
//! Locking rules:
//! - single-key reads take one read lock, single-key writes one write lock;
//! - multi-key commands lock every shard they touch in ascending shard order (so they are
//!   atomic and cannot deadlock one another);
//! - every write appends its log record to the log's current batch *inside* its write critical
//!   section, before it changes the shard (so the log order is the order of the critical
//!   sections, and a refused append changes nothing); the record is written by group commit
//!   after the section ends, and the connection waits for it before it replies (see
//!   [`crate::aof::Log`]);
//! - `SAVE` holds one shard's read lock at a time, across the write of that shard's snapshot;
//!   `FLUSHALL` waits for a running `SAVE` to end.
//!
//! Expiry is by absolute unix-millisecond deadline: reads hide expired entries, writes treat
//! them as absent. Due entries are removed by the writes themselves (each write to a shard
//! removes up to two due entries of it, so a stream of short-lived keys cannot outrun the
//! reclaiming) and by an adaptive background sweep ([`Store::sweep`]) that goes on pass after
//! pass while due entries remain. Both use a per-shard heap of deadlines. Expiries are never
//! logged: records carry the deadline, so replay drops them.
//!
//! # Layout
//! `shard.rs`: a shard's map and slots; `read.rs` and `write.rs`: the store's operations;
//! `expire.rs`: deadlines, reclaiming and the sweep, and the commands that set them;
//! `undo.rs`: putting back a write whose record failed; `txn.rs`: `EXEC`'s locks and log;
//! `persist.rs`: opening from the snapshot and log, appending records, `SAVE`; `evict.rs`:
//! the memory estimate, access data and eviction under `maxmemory`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::aof::{Fsync, Log, LogIo};
use crate::lock::ShardLock;
use undo::UndoLog;

mod evict;
mod expire;
mod persist;
mod read;
mod shard;
#[cfg(test)]
mod tests;
mod txn;
mod undo;
mod write;

pub use evict::{key_cost, parse_bytes, value_cost, MemoryInfo, Policy, DEFAULT_SAMPLES, OOM};
pub use shard::{Entry, Shard};

/// Milliseconds since the unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Reads the clock at most once per command, and only if an entry has a deadline.
struct Clock(Option<u64>);

impl Clock {
    fn new() -> Clock {
        Clock(None)
    }
    fn now(&mut self) -> u64 {
        *self.0.get_or_insert_with(now_ms)
    }
    fn live(&mut self, e: &Entry) -> bool {
        e.expire_at == 0 || e.expire_at > self.now()
    }
}

/// What [`Store::update`] does to the key.
pub enum Change {
    /// Nothing (nothing is logged).
    Keep,
    /// Store this entry.
    Put(Entry),
    /// Delete the key (if it exists).
    Del,
    /// Set the deadline of the existing key (0: none).
    Expire(u64),
}

/// How `SET` treats the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Clear any deadline (plain `SET`).
    None,
    /// Keep the key's current deadline (`KEEPTTL`).
    Keep,
    /// Expire at this unix ms time.
    At(u64),
}

#[derive(Clone, Copy, Debug)]
pub struct SetOpts {
    pub expiry: Expiry,
    pub nx: bool,
    pub xx: bool,
    /// `GET`: return the old value.
    pub get: bool,
}

/// What `SET` did.
#[derive(Debug)]
pub struct SetOutcome {
    /// Whether the value was stored (`NX`/`XX` may prevent it).
    pub stored: bool,
    /// The old live value, when `GET` was given.
    pub old: Option<Vec<u8>>,
}

/// The `NX`/`XX`/`GT`/`LT` condition of `EXPIRE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireCond {
    Always,
    /// Only if the key has no deadline.
    Nx,
    /// Only if it has one.
    Xx,
    /// Only if the new deadline is later (no deadline counts as infinite).
    Gt,
    /// Only if the new deadline is earlier.
    Lt,
    /// `XX LT`: only if the key has a deadline and the new one is earlier.
    XxLt,
}

/// Persistence settings.
#[derive(Clone, Debug)]
pub struct Persistence {
    pub dir: PathBuf,
    pub fsync: Fsync,
    pub io: LogIo,
}

/// Errors a command can get from the store, as RESP error text.
pub type StoreResult<T> = Result<T, String>;

/// Keyspace figures for `INFO`.
pub struct KeyspaceInfo {
    pub keys: usize,
    pub expires: usize,
}

/// `BGSAVE` and `LASTSAVE` state.
#[derive(Default)]
pub struct SaveState {
    pub bgsave_in_progress: std::sync::atomic::AtomicBool,
    pub last_bgsave_ok: std::sync::atomic::AtomicBool,
    /// Unix seconds of the last successful `SAVE`/`BGSAVE` (the start time before one).
    pub last_save: AtomicU64,
    /// The log's last sequence number when the last successful snapshot began (at start:
    /// when the log was opened): `INFO persistence`'s `rdb_changes_since_last_save` counts
    /// the records after it.
    pub saved_seq: AtomicU64,
}

pub struct Store<L> {
    /// The shards. Commands never lock them directly but through [`Store::rlock`] and
    /// [`Store::wlock`], which hand out the shards an `EXEC` running in this task holds.
    locks: Box<[L]>,
    undo: std::sync::Mutex<UndoLog>,
    pub saves: SaveState,
    hasher: RandomState,
    log: Option<Log>,
    /// Per shard: the `SAVE` epoch whose snapshot already holds this shard.
    flipped: Box<[AtomicU64]>,
    save_lock: tokio::sync::Mutex<()>,
    /// Keys removed because their deadline passed (sweeps and writes).
    expired: AtomicU64,
    /// `EXEC`s running now: while none does, no task has shards lent or a transaction's log
    /// to write into, and the task-local is not looked at.
    txns: std::sync::atomic::AtomicUsize,
    /// Per shard: its published estimate of its entries' bytes (see [`evict`]).
    mem: Box<[std::sync::Arc<evict::MemCell>]>,
    /// `maxmemory` and its policy.
    limits: evict::Limits,
    evictor: evict::Evictor,
}

impl<L: ShardLock<Shard>> Store<L> {
    pub fn shard_count(&self) -> usize {
        self.locks.len()
    }

    pub fn log(&self) -> Option<&Log> {
        self.log.as_ref()
    }

    fn locate(&self, key: &[u8]) -> (usize, u64) {
        shard_of(&self.hasher, self.locks.len(), key)
    }

    /// The lock statistics of every shard that has any.
    pub fn lock_stats(&self) -> Vec<(usize, String)> {
        self.locks
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.stats().map(|t| (i, t)))
            .collect()
    }
}

fn shard_of(hasher: &RandomState, n: usize, key: &[u8]) -> (usize, u64) {
    // The key's bytes alone (no length prefix, as `Hash for [u8]` would add: one SipHash
    // `write` fewer); only this function hashes keys.
    let mut s = hasher.build_hasher();
    s.write(key);
    let h = s.finish();
    (((h as u128 * n as u128) >> 64) as usize, h)
}

/// The distinct shards in `located`, ascending (the lock order).
fn involved(located: &[(usize, u64)]) -> Vec<usize> {
    let mut idx: Vec<usize> = located.iter().map(|&(i, _)| i).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}
