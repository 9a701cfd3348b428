//! `kvserver`: a small Redis-protocol (RESP2 and RESP3) key-value server whose shard lock can
//! be swapped, to show `async_rwsem::RwLock` inside a real tokio service and to measure it
//! against `tokio::sync::RwLock` and `async_lock::RwLock` with unmodified Redis clients.
//!
//! # What it does
//! - Commands (the table is [`commands::COMMANDS`]; `kvserver/README.md` lists them): strings
//!   (`GET`, `SET` with every option, `SETNX`, `SETEX`, `PSETEX`, `GETSET`, `GETDEL`, `GETEX`,
//!   `MGET`, `MSET`, `MSETNX`, `APPEND`, `STRLEN`, `GETRANGE`, `SETRANGE`, `INCR`/`INCRBY`/
//!   `DECR`/`DECRBY`, `INCRBYFLOAT`), lists (`LPUSH`, `RPUSH`, `LPOP`, `RPOP`, `LRANGE`,
//!   `LLEN`, `LINDEX`), hashes (`HSET`, `HGET`, `HGETALL`, `HDEL`, `HINCRBY`, ...), sets
//!   (`SADD`, `SREM`, `SPOP`, `SMEMBERS`, ...), sorted sets (`ZADD`, `ZRANGE`, `ZPOPMIN`,
//!   `ZSCORE`, ...), keys (`DEL`, `UNLINK`, `EXISTS`, `TOUCH`, `TYPE`,
//!   `RENAME`, `RENAMENX`, `KEYS`, `SCAN`, `RANDOMKEY`, `EXPIRE` and friends, `TTL`/`PTTL`,
//!   `PERSIST`), server (`DBSIZE`, `FLUSHALL`, `SAVE`, `BGSAVE`, `LASTSAVE`, `SHUTDOWN`, `INFO`,
//!   `CONFIG GET`, `TIME`, `COMMAND`), connection (`PING`, `ECHO`, `QUIT`, `SELECT 0`, `CLIENT`); the blocking pops (`BLPOP`,
//!   `BLMOVE`, `BZPOPMIN`, ...: [`blocking`]).
//!   Pipelined requests of any size are answered in order while the client is still sending.
//! - The data lives in `--shards` maps, each behind the lock chosen by `--lock`. Inside its
//!   write critical section a write appends its record to the log's current batch; the batch
//!   is written by group commit (one `write(2)`, and one `fsync` under `always`, for every
//!   command in it), and replies go out only once their records are in the file. `SAVE`
//!   snapshots shard by shard under read locks, then starts a new log from the snapshot. On
//!   start the directory is locked, then the snapshot and log are replayed; a torn last record
//!   is dropped with a warning, any other damage stops the start with an error. A write whose
//!   record fails is undone in memory before anyone can read it (see the README's *After a
//!   log failure*).
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
//! (rwsem|tokio|async-lock), `--rwsem-policy` (the shard locks' `Policy` with `--lock rwsem`:
//! `fifo` or `default`, then `name=value` settings; `lock_adapters::policy`), `--shards`,
//! `--threads` (tokio workers; default: all cores),
//! `--appendonly yes|no`, `--dir` (data directory), `--appendfsync always|everysec|no`,
//! `--aof-io direct|tokio-fs`, `--max-clients` (lowered to what `RLIMIT_NOFILE` allows),
//! `--client-output-buffer-limit`, `--client-output-buffer-secs`, `--timeout` (idle seconds, 0 = never),
//! `--max-bulk-len`, `--max-array-len`, `--max-inline-len`, `--max-request-len`,
//! `--shutdown-timeout`, `--maxmemory` (bytes; `100mb`, `1gb`), `--maxmemory-policy`, `--maxmemory-samples`,
//! `--quiet`.

pub mod aof;
pub mod blocking;
pub mod commands;
mod connection;
pub mod glob;
pub mod ldouble;
pub mod lock;
pub mod notify;
pub mod pubsub;
pub mod resp;
pub mod server;
pub mod shared;
pub mod store;
pub mod value;
