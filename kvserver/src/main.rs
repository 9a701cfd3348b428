//! The `kvserver` binary: parses the flags and runs the server (see the library's docs and
//! `kvserver/README.md`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use kvserver::aof::{Fsync, LogIo};
use kvserver::lock::LockKind;
use kvserver::server::{self, Config};
use kvserver::{resp, store};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum YesNo {
    Yes,
    No,
}

/// What `kvserver --help` says first (the server's own words, not its lock's).
const ABOUT: &str = "kvserver: a Redis-protocol (RESP2 and RESP3) key-value server for strings, lists, hashes, \
sets and sorted sets, with transactions (MULTI/EXEC/WATCH), an append-only log (group commit, fsync \
always|everysec|no), snapshots (SAVE, BGSAVE) and a shard lock chosen at start (--lock \
rwsem|tokio|async-lock), the demo database of the async-rwsem lock.";

const LONG_ABOUT: &str = "kvserver: a Redis-protocol (RESP2 and RESP3) key-value server for strings, lists, hashes, \
sets and sorted sets, the demo database of the async-rwsem lock.\n\n\
Any Redis client works with its defaults (redis-cli, redis-benchmark, redis-py, the redis crate; HELLO 3 \
switches a connection to RESP3). Commands: the string, list, hash, set, sorted-set, key, server and \
connection commands Redis users type, and MULTI, EXEC, DISCARD, WATCH, UNWATCH (the full list, and \
what differs from Redis: kvserver/README.md). Data is kept in --shards maps, each behind the lock \
chosen by --lock; a transaction takes the locks of the shards it touches in index order and is one \
record in the log; with --appendonly yes every write is logged before its reply, and a write the log \
refuses is undone before anyone can read it.";

#[derive(Parser, Debug)]
#[command(name = "kvserver", version, about = ABOUT, long_about = LONG_ABOUT)]
struct Cli {
    /// TCP port (0: any free port, printed at start).
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// Address to listen on; only loopback addresses are accepted.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// The lock in front of every shard.
    #[arg(long, value_enum, default_value = "rwsem")]
    lock: LockKind,
    /// The shard locks' async-rwsem policy (with --lock rwsem): `fifo` or `default`, then
    /// `name=value` settings, e.g. `handoff-timeout=25us,pass-bound=none` (the names:
    /// `lock_adapters::policy`). Default: the crate's default policy.
    #[arg(long, value_name = "SPEC", value_parser = lock_adapters::parse_policy)]
    rwsem_policy: Option<async_rwsem::Policy>,
    /// Number of shards (1..=4096).
    #[arg(long, default_value_t = server::DEFAULT_SHARDS)]
    shards: usize,
    /// Tokio worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Keep an append-only log (and allow SAVE).
    #[arg(long, value_enum, default_value = "yes")]
    appendonly: YesNo,
    /// Directory of the log and snapshots.
    #[arg(long, default_value = "kvserver-data")]
    dir: PathBuf,
    /// When the log is fsynced.
    #[arg(long, value_enum, default_value = "everysec")]
    appendfsync: Fsync,
    /// How records reach the log file.
    #[arg(long, value_enum, default_value = "direct")]
    aof_io: LogIo,
    /// Most clients connected at once; further ones get an error and are closed. Lowered at
    /// start to what RLIMIT_NOFILE allows, 32 descriptors kept for the log and SAVE.
    #[arg(long, default_value_t = 10_000)]
    max_clients: usize,
    /// Bytes of replies a client may leave untaken before the server stops reading its requests;
    /// a client over it that takes nothing for --client-output-buffer-secs is disconnected, as
    /// with Redis' client-output-buffer-limit (0: no limit).
    #[arg(long, default_value_t = server::DEFAULT_OUTPUT_BUFFER_LIMIT)]
    client_output_buffer_limit: usize,
    /// See --client-output-buffer-limit.
    #[arg(long, default_value_t = 10)]
    client_output_buffer_secs: u64,
    /// Bytes of pub/sub messages and MONITOR lines a subscriber or monitor may leave untaken;
    /// past it the client is disconnected, as with Redis' client-output-buffer-limit pubsub
    /// hard limit (0: no limit).
    #[arg(long, default_value_t = kvserver::pubsub::DEFAULT_PUBSUB_OUTPUT_LIMIT)]
    pubsub_output_buffer_limit: usize,
    /// The password clients must give AUTH (Redis' requirepass; CONFIG SET requirepass
    /// changes it). Unset: none is needed.
    #[arg(long)]
    requirepass: Option<String>,
    /// Close a connection idle for this many seconds (0: never).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Largest bulk string in a request, in bytes.
    #[arg(long, default_value_t = resp::Limits::default().max_bulk_len)]
    max_bulk_len: usize,
    /// Most elements in a request.
    #[arg(long, default_value_t = resp::Limits::default().max_array_len)]
    max_array_len: usize,
    /// Longest inline request line, in bytes.
    #[arg(long, default_value_t = resp::Limits::default().max_inline_len)]
    max_inline_len: usize,
    /// Most bytes one request may take in all.
    #[arg(long, default_value_t = resp::Limits::default().max_request_len)]
    max_request_len: usize,
    /// Seconds shutdown waits for connections to finish.
    #[arg(long, default_value_t = 10)]
    shutdown_timeout: u64,
    /// Print only warnings and errors.
    #[arg(long)]
    quiet: bool,
    /// Memory limit for the data (bytes, or with a unit: 100mb, 1gb; 0: none), as Redis'
    /// maxmemory; the server's own estimate of its entries is compared with it.
    #[arg(long, default_value = "0", value_parser = parse_bytes)]
    maxmemory: u64,
    /// What to do when the limit is reached: noeviction (refuse writes that add data),
    /// allkeys-lru, volatile-lru, allkeys-lfu, volatile-lfu, allkeys-random, volatile-random,
    /// volatile-ttl.
    #[arg(long, default_value = "noeviction", value_parser = parse_policy)]
    maxmemory_policy: store::Policy,
    /// Keys sampled per eviction (more: closer to true LRU/LFU, slower).
    #[arg(long, default_value_t = store::DEFAULT_SAMPLES)]
    maxmemory_samples: usize,
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    store::parse_bytes(s).ok_or_else(|| format!("not a byte count: {s} (e.g. 1000000, 100mb, 1gb)"))
}

fn parse_policy(s: &str) -> Result<store::Policy, String> {
    store::Policy::parse(s).ok_or_else(|| format!("unknown policy {s}"))
}

fn main() {
    let cli = Cli::parse();
    if !cli.bind.is_loopback() {
        eprintln!(
            "kvserver: refusing to listen on {}: loopback addresses only",
            cli.bind
        );
        std::process::exit(2);
    }
    if let Some(policy) = cli.rwsem_policy {
        if cli.lock != LockKind::Rwsem {
            eprintln!("kvserver: --rwsem-policy needs --lock rwsem");
            std::process::exit(2);
        }
        // The first and only setting in this process.
        let _ = lock_adapters::set_rwsem_policy(policy);
        if !cli.quiet {
            eprintln!("kvserver: shard lock policy {policy:?}");
        }
    }
    let mut config = Config::new(SocketAddr::new(cli.bind, cli.port));
    config.lock = cli.lock;
    config.shards = cli.shards;
    config.persistence = (cli.appendonly == YesNo::Yes).then(|| store::Persistence {
        dir: cli.dir.clone(),
        fsync: cli.appendfsync,
        io: cli.aof_io,
    });
    config.limits = resp::Limits {
        max_bulk_len: cli.max_bulk_len,
        max_array_len: cli.max_array_len,
        max_inline_len: cli.max_inline_len,
        max_request_len: cli.max_request_len,
    };
    config.max_clients = cli.max_clients;
    config.output_buffer_limit = cli.client_output_buffer_limit;
    config.output_buffer_grace = Duration::from_secs(cli.client_output_buffer_secs);
    config.idle_timeout = (cli.timeout > 0).then(|| Duration::from_secs(cli.timeout));
    config.shutdown_timeout = Duration::from_secs(cli.shutdown_timeout);
    config.quiet = cli.quiet;
    config.pubsub_output_buffer_limit = cli.pubsub_output_buffer_limit;
    config.requirepass = cli
        .requirepass
        .filter(|p| !p.is_empty())
        .map(String::into_bytes);
    config.maxmemory = cli.maxmemory;
    config.maxmemory_policy = cli.maxmemory_policy;
    config.maxmemory_samples = cli.maxmemory_samples.max(1);
    let quiet = cli.quiet;

    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.threads {
        rt.worker_threads(n.max(1));
    }
    let rt = rt
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime");
    let code = rt.block_on(async move {
        let mut running = match server::start(config).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("kvserver: cannot start: {e}");
                return 1;
            }
        };
        let ended = tokio::select! {
            _ = shutdown_signal(quiet) => None,
            r = running.wait() => Some(r),
        };
        let stopped = match ended {
            Some(r) => r,
            None => running.stop().await,
        };
        match stopped {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("kvserver: {e}");
                1
            }
        }
    });
    std::process::exit(code);
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal(quiet: bool) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("cannot install a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    if !quiet {
        eprintln!("kvserver: shutting down");
    }
}
