//! The TCP side: accepting (the connections themselves are `connection.rs`'s), the
//! background tasks and graceful shutdown. Generic over the shard lock; [`start`] picks the
//! lock at run time.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::aof::Fsync;
use crate::lock::{LockKind, ShardLock};
use crate::resp;
pub use crate::shared::{
    fsync_name, ClientInfo, Config, Shared, Stats, DEFAULT_OUTPUT_BUFFER_LIMIT, DEFAULT_SHARDS,
};
use crate::store::{Shard, Store};
use lock_adapters::{AsyncLockRw, Rwsem, Tokio};

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

/// Descriptors kept out of `--max-clients` for the log, `SAVE`'s files, the directory, the
/// listener and the runtime (Redis keeps 32 too).
pub const RESERVED_FDS: u64 = 32;

/// Raises `RLIMIT_NOFILE` towards what `max_clients` needs (as far as the hard limit allows)
/// and returns the number of clients the limit leaves room for, with [`RESERVED_FDS`] kept
/// aside; as Redis does with `maxclients`.
// rlim_t is u64 on 64-bit Linux, not everywhere.
#[allow(clippy::unnecessary_cast)]
pub fn fit_max_clients(max_clients: usize) -> Result<usize, String> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on a local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Ok(max_clients);
    }
    let want = (max_clients as u64).saturating_add(RESERVED_FDS);
    if (lim.rlim_cur as u64) < want {
        let raised = libc::rlimit {
            rlim_cur: want.min(lim.rlim_max as u64) as libc::rlim_t,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = raised.rlim_cur;
        }
    }
    let room = (lim.rlim_cur as u64).saturating_sub(RESERVED_FDS);
    if room == 0 {
        return Err(format!(
            "RLIMIT_NOFILE is {}: no descriptor left for clients after the {RESERVED_FDS} reserved ones",
            lim.rlim_cur
        ));
    }
    Ok((max_clients as u64).min(room) as usize)
}

async fn start_with<L: ShardLock<Shard>>(mut config: Config) -> Result<Running, String> {
    let t0 = Instant::now();
    let fitted = fit_max_clients(config.max_clients)?;
    if fitted < config.max_clients {
        eprintln!(
            "kvserver: WARNING: --max-clients {} lowered to {fitted}: the open files limit (RLIMIT_NOFILE) leaves room for no more ({RESERVED_FDS} descriptors kept for the log and SAVE)",
            config.max_clients
        );
        config.max_clients = fitted;
    }
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
    store.set_maxmemory(config.maxmemory);
    store.set_policy(config.maxmemory_policy).await;
    store.set_samples(config.maxmemory_samples);
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
    let settings = crate::shared::Settings::new(&config);
    let pubsub = crate::pubsub::PubSub::new(config.pubsub_output_buffer_limit);
    let password = std::sync::Mutex::new(config.requirepass.clone());
    let shared = Arc::new(Shared {
        settings,
        store,
        config,
        stats: Stats::new(crate::commands::COMMANDS.len()),
        started: Instant::now(),
        port: addr.port(),
        clients: Default::default(),
        next_client_id: AtomicU64::new(1),
        shutdown_requested: tokio::sync::Notify::new(),
        watches: Default::default(),
        raw_strings: Default::default(),
        blocking: Default::default(),
        pubsub,
        password,
        active_expire: std::sync::atomic::AtomicBool::new(true),
        sweep_pass: Default::default(),
        notify_flags: Default::default(),
    });
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(serve(shared, listener, rx));
    Ok(Running {
        addr,
        stop: Some(tx),
        task,
    })
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
    let mut accept_errors = 0u64;
    let mut last_accept_warning: Option<Instant> = None;
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => break,
            _ = shared.shutdown_requested.notified() => {
                info!(shared.config.quiet, "SHUTDOWN requested by a client");
                break;
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((sock, peer)) => {
                    let _ = sock.set_nodelay(true);
                    shared.stats.total_connections.fetch_add(1, Ordering::Relaxed);
                    if shared.stats.connected.load(Ordering::Relaxed) >= shared.settings.max_clients() {
                        shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                        // Without a task: the descriptor is given back at once. A plain write:
                        // a fresh socket's send buffer has room, whatever tokio's readiness says.
                        if let Ok(std_sock) = sock.into_std() {
                            use std::io::Write;
                            let _ = (&std_sock).write(b"-ERR max number of clients reached\r\n");
                        }
                        continue;
                    }
                    shared.stats.connected.fetch_add(1, Ordering::Relaxed);
                    // Boxed: the task then moves a pointer, not the connection's whole state
                    // (tens of kilobytes copied a few times per connection otherwise).
                    conns.spawn(Box::pin(resp::with_protocol(crate::connection::connection(shared.clone(), sock, peer, shutdown_rx.clone()))));
                }
                Err(e) => {
                    // e.g. out of file descriptors: back off instead of spinning, and say so
                    // once in a while, not 20 times a second
                    accept_errors += 1;
                    if last_accept_warning.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(10)) {
                        eprintln!("kvserver: accept failed: {e} ({accept_errors} failures so far)");
                        last_accept_warning = Some(Instant::now());
                    }
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

/// The adaptive expiry sweep: a pass every `sweep_interval`, and while due keys remain after a
/// pass, the next pass at once (after a yield, so connections keep running).
async fn sweeper<L: ShardLock<Shard>>(shared: Arc<Shared<L>>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(shared.config.sweep_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {
                let _pass = shared.sweep_pass.lock().await;
                if !shared.active_expire.load(Ordering::Relaxed) {
                    continue;
                }
                loop {
                    // `expired` keyspace notifications want the keys.
                    let flags = shared.notify_flags.load(Ordering::Relaxed);
                    let mut expired = Vec::new();
                    let want = flags & crate::notify::EXPIRED != 0;
                    let (_, more) = shared
                        .store
                        .sweep_collecting(SWEEP_CHUNK, want.then_some(&mut expired))
                        .await;
                    for k in &expired {
                        crate::notify::notify(&shared.pubsub, flags, crate::notify::EXPIRED, "expired", k);
                    }
                    if !more {
                        break;
                    }
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
                // Undo a failed batch nobody's connection has undone yet.
                shared.store.recover().await;
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
