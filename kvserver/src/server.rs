//! The TCP side: accepting, per-connection request loops, limits, background tasks and
//! graceful shutdown. Generic over the shard lock; [`start`] picks the lock at run time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::aof::Fsync;
use crate::commands::{self, Flow};
use crate::lock::{LockKind, ShardLock};
use crate::resp::{self, Limits, RequestParser};
use crate::store::{Persistence, Shard, Store};
use lock_adapters::{AsyncLockRw, Rwsem, Tokio};

/// Everything the server can be told.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen (the CLI only allows loopback addresses).
    pub addr: SocketAddr,
    pub lock: LockKind,
    pub shards: usize,
    /// `None`: no persistence (`--appendonly no`).
    pub persistence: Option<Persistence>,
    pub limits: Limits,
    pub max_clients: usize,
    /// Close connections idle (no request, or a reply not taken) this long; `None`: never.
    pub idle_timeout: Option<Duration>,
    /// How long shutdown waits for connections to finish their requests.
    pub shutdown_timeout: Duration,
    /// How often the expiry sweep runs.
    pub sweep_interval: Duration,
    /// Print nothing but errors.
    pub quiet: bool,
}

impl Config {
    /// Defaults for a server on `addr` without persistence.
    pub fn new(addr: SocketAddr) -> Config {
        Config {
            addr,
            lock: LockKind::Tokio,
            shards: DEFAULT_SHARDS,
            persistence: None,
            limits: Limits::default(),
            max_clients: 10_000,
            idle_timeout: Some(Duration::from_secs(300)),
            shutdown_timeout: Duration::from_secs(10),
            sweep_interval: Duration::from_millis(100),
            quiet: false,
        }
    }
}

/// Shard count when `--shards` is not given (see the README for the measurement).
pub const DEFAULT_SHARDS: usize = 4;

/// Server-wide counters for `INFO`.
#[derive(Default)]
pub struct Stats {
    pub connected: AtomicUsize,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands: AtomicU64,
    pub protocol_errors: AtomicU64,
}

/// What every connection shares.
pub struct Shared<L> {
    pub store: Store<L>,
    pub config: Config,
    pub stats: Stats,
    pub started: Instant,
    pub port: u16,
}

/// A started server.
pub struct Running {
    /// The address actually bound (useful with port 0).
    #[allow(dead_code)] // read by the tests
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

impl Running {
    /// Graceful shutdown: stop accepting, let connections finish, flush the log.
    pub async fn stop(mut self) -> Result<(), String> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.wait().await
    }

    /// Waits until the server stops on its own (it does not, unless it fails).
    pub async fn wait(&mut self) -> Result<(), String> {
        (&mut self.task)
            .await
            .map_err(|e| format!("server task failed: {e}"))?
    }
}

/// Replays the data, binds the port and starts serving in a task.
pub async fn start(config: Config) -> Result<Running, String> {
    match config.lock {
        LockKind::Rwsem => start_with::<Rwsem<Shard>>(config).await,
        LockKind::Tokio => start_with::<Tokio<Shard>>(config).await,
        LockKind::AsyncLock => start_with::<AsyncLockRw<Shard>>(config).await,
    }
}

macro_rules! info {
    ($shared_or_quiet:expr, $($arg:tt)*) => {
        if !$shared_or_quiet { eprintln!("kvserver: {}", format!($($arg)*)); }
    };
}

async fn start_with<L: ShardLock<Shard>>(config: Config) -> Result<Running, String> {
    let t0 = Instant::now();
    if config.persistence.is_some() {
        // A request the log could not hold must be refused by the parser, never acknowledged.
        crate::aof::check_request_limits(
            config
                .limits
                .max_request_len
                .max(config.limits.max_bulk_len),
            config.limits.max_array_len,
        )?;
    }
    let (store, report) = Store::<L>::open(config.shards, config.persistence.as_ref())?;
    if let Some(r) = &report {
        for w in &r.warnings {
            eprintln!("kvserver: WARNING: {w}");
        }
        info!(
            config.quiet,
            "loaded {} keys from the snapshot and {} log records in {:.1?}",
            r.snapshot_keys,
            r.log_records,
            t0.elapsed()
        );
    }
    let listener = TcpListener::bind(config.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.addr))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    info!(
        config.quiet,
        "listening on {addr} (lock {}, {} shards, appendonly {})",
        L::NAME,
        store.shard_count(),
        match &config.persistence {
            Some(p) => format!("{} in {}", fsync_name(p.fsync), p.dir.display()),
            None => "off".into(),
        }
    );
    let shared = Arc::new(Shared {
        store,
        config,
        stats: Stats::default(),
        started: Instant::now(),
        port: addr.port(),
    });
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(serve(shared, listener, rx));
    Ok(Running {
        addr,
        stop: Some(tx),
        task,
    })
}

pub fn fsync_name(f: Fsync) -> &'static str {
    match f {
        Fsync::Always => "always",
        Fsync::Everysec => "everysec",
        Fsync::No => "no",
    }
}

async fn serve<L: ShardLock<Shard>>(
    shared: Arc<Shared<L>>,
    listener: TcpListener,
    mut stop: oneshot::Receiver<()>,
) -> Result<(), String> {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut background = JoinSet::new();
    background.spawn(sweeper(shared.clone(), shutdown_rx.clone()));
    if shared.store.log().is_some() {
        background.spawn(fsync_every_second(shared.clone(), shutdown_rx.clone()));
    }

    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((sock, _peer)) => {
                    let _ = sock.set_nodelay(true);
                    shared.stats.total_connections.fetch_add(1, Ordering::Relaxed);
                    if shared.stats.connected.load(Ordering::Relaxed) >= shared.config.max_clients {
                        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                        conns.spawn(reject(sock));
                        continue;
                    }
                    shared.stats.connected.fetch_add(1, Ordering::Relaxed);
                    conns.spawn(connection(shared.clone(), sock, shutdown_rx.clone()));
                }
                Err(e) => {
                    // e.g. out of file descriptors: back off instead of spinning
                    eprintln!("kvserver: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    // Graceful shutdown.
    drop(listener);
    let _ = shutdown_tx.send(true);
    let n = conns.len();
    let deadline = tokio::time::sleep(shared.config.shutdown_timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            joined = conns.join_next() => if joined.is_none() { break },
            _ = &mut deadline => {
                eprintln!("kvserver: {} connections still busy after {:?}; closing them", conns.len(), shared.config.shutdown_timeout);
                conns.shutdown().await;
                break;
            }
        }
    }
    background.shutdown().await;
    let mut result = Ok(());
    if let Some(log) = shared.store.log() {
        if let Err(e) = log.sync().await {
            result = Err(format!("final fsync of the log failed: {e}"));
        }
    }
    info!(
        shared.config.quiet,
        "shut down ({n} connections closed, log flushed)"
    );
    result
}

async fn reject(mut sock: TcpStream) {
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        sock.write_all(b"-ERR max number of clients reached\r\n"),
    )
    .await;
}

/// The adaptive expiry sweep: a pass every `sweep_interval`, and while due keys remain after a
/// pass, the next pass at once (after a yield, so connections keep running).
async fn sweeper<L: ShardLock<Shard>>(shared: Arc<Shared<L>>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(shared.config.sweep_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                while shared.store.sweep(SWEEP_CHUNK).await.1 {
                    if *shutdown.borrow() {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
            }
        }
    }
}

/// Deadlines looked at per write-lock hold in a sweep pass.
const SWEEP_CHUNK: usize = 1000;

/// Once a second: under `everysec` the log's fsync; in every mode, the retry of an fsync that
/// failed (writes are refused until it succeeds).
async fn fsync_every_second<L: ShardLock<Shard>>(
    shared: Arc<Shared<L>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                let Some(log) = shared.store.log() else { return };
                if log.fsync_policy() == Fsync::Everysec || log.needs_sync() {
                    match log.sync().await {
                        Err(e) if !failing => {
                            failing = true;
                            eprintln!("kvserver: {e}; writes are refused until an fsync succeeds");
                        }
                        Ok(()) if failing => {
                            failing = false;
                            eprintln!("kvserver: fsync succeeded again; writes are accepted");
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Decrements the client count however the connection ends.
struct ClientSlot<'a>(&'a AtomicUsize);

impl Drop for ClientSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

const READ_CHUNK: usize = 16 * 1024;
/// Replies are written out once this much has piled up within one batch of requests.
const OUT_FLUSH: usize = 64 * 1024;

async fn connection<L: ShardLock<Shard>>(
    shared: Arc<Shared<L>>,
    mut sock: TcpStream,
    mut shutdown: watch::Receiver<bool>,
) {
    let _slot = ClientSlot(&shared.stats.connected);
    let idle = shared.config.idle_timeout;
    let mut parser = RequestParser::new(shared.config.limits);
    let mut inbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut acks: Vec<Ack> = Vec::new();
    'conn: loop {
        if inbuf.capacity() - inbuf.len() < READ_CHUNK / 4 {
            inbuf.reserve(READ_CHUNK);
        }
        let read = async {
            match idle {
                Some(t) => tokio::time::timeout(t, sock.read_buf(&mut inbuf))
                    .await
                    .unwrap_or(Ok(0)),
                None => sock.read_buf(&mut inbuf).await,
            }
        };
        let n = tokio::select! {
            biased;
            _ = shutdown.wait_for(|&s| s) => break,
            r = read => r,
        };
        match n {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let mut pos = 0;
        let mut executed = 0u64;
        let mut close = false;
        let mut protocol_error = false;
        loop {
            match parser.next(&inbuf, &mut pos) {
                Ok(Some(args)) => {
                    executed += 1;
                    let start = out.len();
                    let mut seq = 0;
                    let flow = commands::execute(&shared, args, &mut out, &mut seq).await;
                    if seq != 0 {
                        acks.push(Ack {
                            start,
                            end: out.len(),
                            seq,
                        });
                    }
                    if flow == Flow::Close {
                        close = true;
                        break;
                    }
                    if out.len() >= OUT_FLUSH {
                        settle(&shared, &mut out, &mut acks).await;
                        if !write_out(&mut sock, &mut out, idle).await {
                            break 'conn;
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    shared.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                    resp::error(&mut out, &format!("ERR {e}"));
                    close = true;
                    protocol_error = true;
                    break;
                }
            }
        }
        shared.stats.commands.fetch_add(executed, Ordering::Relaxed);
        inbuf.drain(..pos);
        // One wait per batch of requests read from the socket, then one write of the replies.
        settle(&shared, &mut out, &mut acks).await;
        if !write_out(&mut sock, &mut out, idle).await || close {
            if protocol_error {
                linger(&mut sock).await;
            }
            break;
        }
        if inbuf.is_empty() && inbuf.capacity() > 1 << 20 {
            inbuf = Vec::with_capacity(READ_CHUNK);
        }
        if out.capacity() > 1 << 20 {
            out = Vec::with_capacity(READ_CHUNK);
        }
    }
    let _ = sock.shutdown().await;
}

/// The reply to a write, at `out[start..end]`, that may go out only once log record `seq` is
/// written.
struct Ack {
    start: usize,
    end: usize,
    seq: u64,
}

/// Before replies leave: waits until every log record they depend on is written (under
/// `always`: on disk): the connection's own writes, and whatever was appended before its reads
/// ran (a read may have seen a write not yet in the log; as in Redis, its reply goes out only
/// after that write's record). The replies of writes whose records failed become errors.
async fn settle<L: ShardLock<Shard>>(shared: &Shared<L>, out: &mut Vec<u8>, acks: &mut Vec<Ack>) {
    let Some(log) = shared.store.log() else {
        acks.clear();
        return;
    };
    let upto = log.last_seq();
    if let Err(failed) = log.wait(upto).await {
        if acks.iter().any(|a| a.seq >= failed.from) {
            let mut fixed = Vec::with_capacity(out.len());
            let mut at = 0;
            for a in acks.iter().filter(|a| a.seq >= failed.from) {
                fixed.extend_from_slice(&out[at..a.start]);
                resp::error(&mut fixed, &failed.msg);
                at = a.end;
            }
            fixed.extend_from_slice(&out[at..]);
            *out = fixed;
        }
    }
    acks.clear();
}

/// After a protocol error: half-close, then read and drop what the client still sends for a
/// moment, so that closing does not reset the connection (which can destroy the error reply
/// before the client reads it).
async fn linger(sock: &mut TcpStream) {
    let _ = sock.shutdown().await;
    let mut sink = [0u8; 8192];
    let mut total = 0usize;
    let drain = async {
        while let Ok(n @ 1..) = sock.read(&mut sink).await {
            total += n;
            if total > 1 << 20 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(200), drain).await;
}

/// Writes and clears `out`; false if the peer is gone or did not take the data in time.
async fn write_out(sock: &mut TcpStream, out: &mut Vec<u8>, idle: Option<Duration>) -> bool {
    if out.is_empty() {
        return true;
    }
    let ok = match idle {
        Some(t) => matches!(
            tokio::time::timeout(t, sock.write_all(out)).await,
            Ok(Ok(()))
        ),
        None => sock.write_all(out).await.is_ok(),
    };
    out.clear();
    ok
}
