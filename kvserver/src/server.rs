//! The TCP side: accepting, per-connection request loops, limits, background tasks and
//! graceful shutdown. Generic over the shard lock; [`start`] picks the lock at run time.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::aof::Fsync;
use crate::commands::{self, Flow};
use crate::lock::{LockKind, ShardLock};
use crate::resp::{self, RequestParser};
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
    let shared = Arc::new(Shared {
        settings,
        store,
        config,
        stats: Stats::new(),
        started: Instant::now(),
        port: addr.port(),
        clients: Default::default(),
        next_client_id: AtomicU64::new(1),
        shutdown_requested: tokio::sync::Notify::new(),
        watches: Default::default(),
        raw_strings: Default::default(),
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
                    conns.spawn(Box::pin(resp::with_protocol(connection(shared.clone(), sock, peer, shutdown_rx.clone()))));
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

/// Decrements the client count and unregisters the client however the connection ends.
struct ClientSlot<'a, L> {
    shared: &'a Shared<L>,
    id: u64,
}

impl<L> Drop for ClientSlot<'_, L> {
    fn drop(&mut self) {
        let info = self
            .shared
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        if let Some(info) = info {
            commands::unwatch(self.shared, &info);
        }
        self.shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
    }
}

const READ_CHUNK: usize = 16 * 1024;
/// Replies are settled and queued for writing once this much piled up within one batch of
/// requests.
const OUT_FLUSH: usize = 64 * 1024;
/// A connection whose queued replies ever passed this gives its memory back to the OS when
/// it ends (`malloc_trim`).
const BIG_OUTPUT: usize = 32 << 20;

/// The room a batch's reply buffer starts with (16 pipelined short replies fit).
const OUT_FIRST: usize = 256;

/// The reply to a data command, at `out[start..end]`: a write that may go out only once log
/// record `seq` is written, or (`seq == commands::READ`) a read that must not go out if a
/// log failure may have undone what it saw.
struct Mark {
    start: usize,
    end: usize,
    seq: u64,
}

/// Replies being built, not yet settled.
struct Batch {
    out: Vec<u8>,
    marks: Vec<Mark>,
    /// The log's rollback count before the first command of the batch ran.
    rollbacks: u64,
}

/// How a connection stops reading.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    Open,
    /// The peer closed, `QUIT`, or shutdown: send what is queued, then close.
    Done,
    /// After a protocol error: send the error, half-close, drain briefly, close.
    ProtocolError,
}

/// One client connection: reads, executes and writes concurrently, so that a client that
/// sends a whole pipeline before it reads a byte is answered; replies queue up to
/// `output_buffer_limit`, past which the connection stops reading requests (and is cut off
/// if it takes no reply for `output_buffer_grace`).
struct Conn<'a, L> {
    shared: &'a Arc<Shared<L>>,
    info: &'a ClientInfo,
    parser: RequestParser,
    inbuf: Vec<u8>,
    /// Settled replies, oldest first; `front_off` bytes of the first one are written.
    sendq: VecDeque<Vec<u8>>,
    front_off: usize,
    queued: usize,
    max_queued: usize,
    /// The marks of the last batch (empty), kept for their capacity.
    marks: Vec<Mark>,
    /// Unparsed requests are waiting in `inbuf` for the queue to drain.
    parse_pending: bool,
    reading: Reading,
}

enum Event {
    Shutdown,
    Wrote(std::io::Result<usize>),
    Read(std::io::Result<usize>),
    Deadline,
}

impl<L: ShardLock<Shard>> Conn<'_, L> {
    fn over_limit(&self) -> bool {
        let limit = self.shared.config.output_buffer_limit;
        limit != 0 && self.queued > limit
    }

    fn new_batch(&mut self) -> Batch {
        Batch {
            out: Vec::new(),
            marks: std::mem::take(&mut self.marks),
            rollbacks: self.shared.store.log().map_or(0, |l| l.rollbacks()),
        }
    }

    async fn queue(&mut self, batch: &mut Batch) {
        settle(self.shared, batch).await;
        let out = std::mem::take(&mut batch.out);
        batch.marks.clear(); // its capacity is kept for the next batch
        if !out.is_empty() {
            self.queued += out.len();
            self.max_queued = self.max_queued.max(self.queued);
            self.info.out_bytes.store(self.queued, Ordering::Relaxed);
            self.sendq.push_back(out);
        }
        batch.rollbacks = self.shared.store.log().map_or(0, |l| l.rollbacks());
    }

    /// Executes the whole requests in `inbuf`, queueing their replies; stops early when the
    /// queue passes the output limit (the rest waits in `inbuf`).
    async fn run_requests(&mut self) {
        let shared = self.shared;
        let mut pos = 0;
        let mut executed = 0u64;
        let mut batch = self.new_batch();
        self.parse_pending = false;
        loop {
            if self.over_limit() {
                self.parse_pending = true;
                break;
            }
            let request_start = pos;
            match self.parser.next(&self.inbuf, &mut pos) {
                Ok(true) => {
                    executed += 1;
                    if batch.out.capacity() == 0 {
                        batch.out.reserve(OUT_FIRST); // not grown reply by reply
                    }
                    // As Redis shows it while a command runs: the query buffer still holds it.
                    self.info
                        .in_bytes
                        .store(self.inbuf.len() - request_start, Ordering::Relaxed);
                    let start = batch.out.len();
                    let mut seq = 0;
                    let args = self.parser.args();
                    let flow =
                        commands::execute(shared, self.info, args, &mut batch.out, &mut seq).await;
                    if seq != 0 {
                        batch.marks.push(Mark {
                            start,
                            end: batch.out.len(),
                            seq,
                        });
                    }
                    if flow == Flow::Close {
                        // nothing after QUIT (or SHUTDOWN) is run
                        self.reading = Reading::Done;
                        self.inbuf.clear();
                        pos = 0;
                        break;
                    }
                    if batch.out.len() >= OUT_FLUSH {
                        self.queue(&mut batch).await;
                    }
                }
                Ok(false) => break,
                Err(e) => {
                    shared.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                    resp::error(&mut batch.out, &format!("ERR {e}"));
                    self.reading = Reading::ProtocolError;
                    self.inbuf.clear();
                    pos = 0;
                    break;
                }
            }
        }
        shared.stats.commands.fetch_add(executed, Ordering::Relaxed);
        self.inbuf.drain(..pos);
        self.info
            .in_bytes
            .store(self.inbuf.len(), Ordering::Relaxed);
        self.queue(&mut batch).await;
        self.marks = batch.marks; // cleared by queue; its capacity is kept
        if self.inbuf.is_empty() && self.inbuf.capacity() > 1 << 20 {
            self.inbuf = Vec::with_capacity(READ_CHUNK);
        }
        self.info.last_active_ms.store(
            shared.started.elapsed().as_millis() as u64,
            Ordering::Relaxed,
        );
    }
}

async fn connection<L: ShardLock<Shard>>(
    shared: Arc<Shared<L>>,
    sock: TcpStream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
) {
    use std::os::unix::io::AsRawFd;
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let info = Arc::new(ClientInfo::new(
        id,
        peer,
        sock.local_addr().unwrap_or(peer),
        sock.as_raw_fd(),
        shared.started.elapsed().as_millis() as u64,
    ));
    shared
        .clients
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, info.clone());
    let _slot = ClientSlot {
        shared: &shared,
        id,
    };
    let (mut rd, mut wr) = sock.into_split();
    let idle = shared.settings.idle_timeout();
    let grace = shared.config.output_buffer_grace;
    let mut c = Conn {
        shared: &shared,
        info: &info,
        parser: RequestParser::new(shared.config.limits),
        inbuf: Vec::with_capacity(READ_CHUNK),
        sendq: VecDeque::new(),
        front_off: 0,
        queued: 0,
        max_queued: 0,
        marks: Vec::new(),
        parse_pending: false,
        reading: Reading::Open,
    };
    // Last request read or reply taken (the idle timeout), and last reply taken (or the
    // moment the queue became non-empty: the output limit's grace period).
    let mut last_progress = Instant::now();
    let mut last_taken = Instant::now();
    loop {
        if c.parse_pending && !c.over_limit() {
            c.run_requests().await;
        }
        let over = c.over_limit();
        let want_read = c.reading == Reading::Open && !over && !c.parse_pending;
        let want_write = !c.sendq.is_empty();
        if c.reading != Reading::Open && !want_write {
            break;
        }
        let mut deadline = idle.map(|t| last_progress + t);
        if over {
            let g = last_taken + grace;
            deadline = Some(deadline.map_or(g, |d| d.min(g)));
        }
        if c.inbuf.capacity() - c.inbuf.len() < READ_CHUNK / 4 {
            c.inbuf.reserve(READ_CHUNK);
        }
        let was_empty = c.sendq.is_empty();
        let event = {
            let front: &[u8] = c.sendq.front().map_or(&[], |f| &f[c.front_off..]);
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|&s| s), if c.reading == Reading::Open => Event::Shutdown,
                r = wr.write(front), if want_write => Event::Wrote(r),
                r = rd.read_buf(&mut c.inbuf), if want_read => Event::Read(r),
                _ = sleep => Event::Deadline,
            }
        };
        match event {
            Event::Shutdown => c.reading = Reading::Done,
            Event::Wrote(Ok(n)) if n > 0 => {
                last_progress = Instant::now();
                last_taken = last_progress;
                c.front_off += n;
                c.queued -= n;
                if c.front_off == c.sendq.front().map_or(0, Vec::len) {
                    c.sendq.pop_front();
                    c.front_off = 0;
                }
                info.out_bytes.store(c.queued, Ordering::Relaxed);
            }
            Event::Wrote(_) => break,
            Event::Read(Ok(0)) => c.reading = Reading::Done,
            Event::Read(Ok(_)) => {
                last_progress = Instant::now();
                c.run_requests().await;
                if was_empty && !c.sendq.is_empty() {
                    last_taken = Instant::now();
                }
            }
            Event::Read(Err(_)) => break,
            Event::Deadline => {
                if c.over_limit() && last_taken.elapsed() >= grace {
                    shared
                        .stats
                        .output_limit_disconnections
                        .fetch_add(1, Ordering::Relaxed);
                    info!(
                        shared.config.quiet,
                        "client {id} ({peer}) closed: {} bytes of replies not taken for {grace:?} (output buffer limit {})",
                        c.queued,
                        shared.config.output_buffer_limit
                    );
                }
                break;
            }
        }
    }
    let protocol_error = c.reading == Reading::ProtocolError && c.sendq.is_empty();
    let big = c.max_queued >= BIG_OUTPUT;
    drop(c);
    if protocol_error {
        linger(&mut rd, &mut wr).await;
    } else {
        let _ = wr.shutdown().await;
    }
    drop((rd, wr));
    if big {
        give_back_memory();
    }
}

/// After a connection that queued a lot of output: hands freed memory back to the OS at once
/// (glibc keeps freed heap memory for reuse, which shows as resident memory long after).
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The reply of a read that may have seen an undone write.
const READ_UNDONE: &str = "IOERR the append-only log failed while this command ran, and writes it may have seen were undone; not sent, retry";

/// Before replies leave: waits until every log record they depend on is written (under
/// `always`: on disk): the connection's own writes, and whatever was appended before its reads
/// ran (a read may have seen a write not yet in the log; as in Redis, its reply goes out only
/// after that write's record). The replies of writes whose records failed become their errors,
/// and so do the replies of reads that ran while a failed write was in memory; then the
/// failed writes are undone (if no other connection did it first).
async fn settle<L: ShardLock<Shard>>(shared: &Shared<L>, batch: &mut Batch) {
    let Some(log) = shared.store.log() else {
        return;
    };
    if batch.marks.is_empty() {
        return;
    }
    let upto = log.last_seq();
    let reads_failed = log.wait(upto).await.is_err() || log.rollbacks() != batch.rollbacks;
    let mut fixes: Vec<(usize, usize, String)> = Vec::new();
    let mut wrote = false;
    for m in &batch.marks {
        if m.seq == commands::READ {
            if reads_failed {
                fixes.push((m.start, m.end, READ_UNDONE.into()));
            }
        } else {
            wrote = true;
            if let Some(msg) = log.failure(m.seq) {
                fixes.push((m.start, m.end, msg));
            }
        }
    }
    if !fixes.is_empty() {
        let out = &batch.out;
        let mut fixed = Vec::with_capacity(out.len());
        let mut at = 0;
        for (start, end, msg) in &fixes {
            fixed.extend_from_slice(&out[at..*start]);
            resp::error(&mut fixed, msg);
            at = *end;
        }
        fixed.extend_from_slice(&out[at..]);
        batch.out = fixed;
    }
    if reads_failed || !fixes.is_empty() || log.rollback_from().is_some() {
        shared.store.recover().await;
    } else if wrote {
        shared.store.prune_undo();
    }
}

/// After a protocol error: half-close, then read and drop what the client still sends for a
/// moment, so that closing does not reset the connection (which can destroy the error reply
/// before the client reads it).
async fn linger(rd: &mut tokio::net::tcp::OwnedReadHalf, wr: &mut tokio::net::tcp::OwnedWriteHalf) {
    let _ = wr.shutdown().await;
    let mut sink = [0u8; 8192];
    let mut total = 0usize;
    let drain = async {
        while let Ok(n @ 1..) = rd.read(&mut sink).await {
            total += n;
            if total > 1 << 20 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(200), drain).await;
}
