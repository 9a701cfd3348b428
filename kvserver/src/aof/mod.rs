//! Persistence: the append-only log, snapshots, and replay.
//!
//! # Files (in `--dir`)
//! - `appendonly.aof`: a 16-byte header (`KVAOF002` + the id of the snapshot it builds on, 0 for
//!   none) followed by records.
//! - `dump-<id>.kvs`: a snapshot: header `KVSNAP02` + id, one `SET` (a string) or `VALUE` (a
//!   list, hash, set or sorted set) record per key, then an `END` record holding the key count.
//!   Only the one the log names is live.
//!
//! Format versions: `001` files (strings only: `SET`, `DEL`, `MSET`, `FLUSHALL`, `END`) are
//! read as they are; `002` adds the `VALUE`, `EXPIRE` and `MUTATE` records. A `001` log is
//! marked `002` when it is opened (its records stay valid), so that an older server, which
//! cannot read the new records, refuses it at its header instead of midway.
//!
//! # Record framing
//! `[len: u32 LE][crc32(payload): u32 LE][crc32(first 8 bytes): u32 LE][payload: len bytes]`.
//! The header checksum means a damaged length is caught as corruption instead of passing for a
//! short (truncated) file. On replay, a record that runs past the end of the file is the torn
//! last write of a crash: it is dropped with a warning and the file is cut back. Any other
//! damage (bad checksum, bad header, unparsable payload) stops the start with an error naming
//! the file and offset.
//!
//! Payload: an op byte, then fields; byte strings are `u32 LE` length + bytes, times are `u64
//! LE` unix milliseconds (0: no expiry). Writes are logged with absolute expiry times, so
//! replay needs no clock of its own: a key whose time has passed is simply dropped.
//!
//! # Writing: group commit
//! A write command encodes its record straight into the log's current batch with
//! [`Log::append`], inside its write critical section and before it changes the shard (so the
//! order of the records is the order of the critical sections, and a refused append changes
//! nothing). Before the connection replies it calls [`Log::wait`]: the first waiter takes the
//! whole batch and writes it with one `write(2)` (plus one `fsync` under `--appendfsync
//! always`), the others wait for that write. A batch that fails is cut back off the file (no
//! partial record stays), every command in it and after it gets an error reply, and the log
//! refuses writes until the store has undone their changes in memory ([`Log::rolled_back`]);
//! then, under `everysec` and `no`, until an fsync succeeds again, and under `always` until a
//! restart. If cutting the batch back fails too, the replies say that the outcome is unknown
//! and writes are refused until a restart. A failed everysec `fsync` refuses writes until a
//! later one succeeds.
//!
//! # Rewriting (`SAVE`)
//! See [`Log::begin_rewrite`]: while a snapshot is taken shard by shard, writes to shards already
//! snapshotted also go to a fresh log that starts from the new snapshot; when every shard is
//! done the new snapshot and log are renamed into place (the log's rename is the commit point).
//!
//! # Layout
//! `format.rs`: the records (framing, checksum, encoding and decoding); `files.rs`: file
//! headers and names, durable creation, the directory lock; `replay.rs`: loading at start;
//! `writer.rs`: the live log and its group commit; `rewrite.rs`: `SAVE`'s new snapshot and log.

mod files;
mod format;
mod replay;
mod rewrite;
#[cfg(test)]
mod tests;
mod writer;

pub use files::{lock_dir, DirLock, LOCK_NAME};
pub use format::{
    check_request_limits, put_del, put_expire, put_flushall, put_mset, put_multi, put_mutate,
    put_set, put_value, rec_set, Op, AOF_NAME, FILE_HEADER, MAX_RECORD,
};
pub use replay::{load, LoadReport};
pub use rewrite::Snapshot;
pub use writer::{Failed, Log, LogStats};

/// When the log is fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fsync {
    /// Once per batch, before the replies of the commands in it.
    Always,
    /// Once a second, from a background task.
    Everysec,
    /// Never explicitly (only at SAVE and shutdown); the OS decides.
    No,
}

/// How a record reaches the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogIo {
    /// The batch's `write(2)` right from the task that writes it, as Redis' event loop does
    /// (under `always`, the write and the fsync run in tokio's blocking pool).
    Direct,
    /// The batch's write in tokio's blocking pool, always (a round trip per batch).
    TokioFs,
}
