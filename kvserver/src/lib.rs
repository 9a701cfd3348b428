//! `kvserver`: a small Redis-protocol (RESP2) key-value server whose shard lock can be swapped,
//! to show `async_rwsem::RwLock` inside a real tokio service and to measure it against
//! `tokio::sync::RwLock` and `async_lock::RwLock` with unmodified Redis clients.
//!
//! # What it does
//! - Commands: `PING`, `ECHO`, `GET`, `SET` (`EX`/`PX`/`EXAT`/`PXAT`/`NX`/`XX`/`KEEPTTL`/`GET`,
//!   read as Redis reads them), `DEL`, `EXISTS`, `INCR`/`INCRBY`/`DECR`/`DECRBY`, `MGET`, `MSET`,
//!   `DBSIZE`, `KEYS` (Redis' glob rules), `SCAN` (cursor, `MATCH`, `COUNT`), `TTL`/`PTTL`,
//!   `EXPIRE`/`PEXPIRE`/`EXPIREAT`/`PEXPIREAT` (`NX`/`XX`/`GT`/`LT`), `PERSIST`, `FLUSHALL`,
//!   `SAVE`, `INFO`, `CONFIG GET`, `SELECT 0`, `CLIENT SETINFO`/`SETNAME`, `COMMAND`, `QUIT`.
//!   Pipelined requests are answered in order; commands of other data types get an error that
//!   says so.
//! - The data lives in `--shards` maps, each behind the lock chosen by `--lock`. Inside its
//!   write critical section a write appends its record to the log's current batch; the batch
//!   is written by group commit (one `write(2)`, and one `fsync` under `always`, for every
//!   command in it), and replies go out only once their records are in the file. `SAVE`
//!   snapshots shard by shard under read locks, then starts a new log from the snapshot. On
//!   start the directory is locked, then the snapshot and log are replayed; a torn last record
//!   is dropped with a warning, any other damage stops the start with an error.
//! - Ctrl-C / SIGTERM: stop accepting, let connections finish what they sent, fsync the log.
//!
//! # Running
//! ```text
//! cargo run --release -p kvserver -- --port 6380 --lock rwsem
//! redis-cli -p 6380 set hello world
//! redis-benchmark -p 6380 -t set,get -P 16 -c 50 -q
//! kvserver/loadtest.sh                   # every --lock vs redis-server, table on stdout
//! cargo test -p kvserver                 # its tests (in-process; the differential ones need redis-server)
//! ```
//!
//! # Flags (see `--help`)
//! `--port` (6380; 0 picks a free one), `--bind` (127.0.0.1; loopback only), `--lock`
//! (rwsem|tokio|async-lock), `--shards`, `--threads` (tokio workers; default: all cores),
//! `--appendonly yes|no`, `--dir` (data directory), `--appendfsync always|everysec|no`,
//! `--aof-io direct|tokio-fs`, `--max-clients`, `--timeout` (idle seconds, 0 = never),
//! `--max-bulk-len`, `--max-array-len`, `--max-inline-len`, `--max-request-len`,
//! `--shutdown-timeout`, `--quiet`.

pub mod aof;
pub mod commands;
pub mod glob;
pub mod lock;
pub mod resp;
pub mod server;
pub mod store;
