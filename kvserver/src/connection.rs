//! One client connection: its request loop (reads, executes and writes concurrently), the
//! output-buffer limit, the settling of replies against the log, and what is pushed to the
//! client from elsewhere (pub/sub messages, `MONITOR` lines, `CLIENT KILL`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::commands::{self, Flow};
use crate::lock::ShardLock;
use crate::pubsub::Kill;
use crate::resp::{self, RequestParser};
use crate::shared::{ClientInfo, Shared, REPLY_ON, REPLY_SKIPPING, REPLY_SKIP_NEXT};
use crate::store::Shard;

macro_rules! info {
    ($shared_or_quiet:expr, $($arg:tt)*) => {
        if !$shared_or_quiet { eprintln!("kvserver: {}", format!($($arg)*)); }
    };
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
            self.shared.pubsub.forget(&info.outbox);
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

/// The most a blocked client's unrun requests may take before the connection stops reading.
const BLOCKED_INBUF: usize = 1 << 20;

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
    /// The blocking command this client waits in (`BLPOP`): nothing more of `inbuf` runs
    /// until its reply comes.
    blocked: Option<crate::blocking::Blocked>,
}

enum Event {
    Shutdown,
    /// Its outbox has bytes, or it is killed.
    Pushed,
    Wrote(std::io::Result<usize>),
    Read(std::io::Result<usize>),
    Deadline,
    Unblocked(crate::blocking::Reply),
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
            self.info
                .outbox
                .out_bytes
                .store(self.queued, Ordering::Relaxed);
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
                    let reply = &self.info.reply;
                    // Only `CLIENT REPLY` turns the replies off, and it is no confirmation:
                    // while they are on, the name need not be read.
                    let confirmation = reply.load(Ordering::Relaxed) != REPLY_ON
                        && crate::pubsub::is_confirmation(&args[0]);
                    if reply.load(Ordering::Relaxed) == REPLY_SKIP_NEXT {
                        reply.store(REPLY_SKIPPING, Ordering::Relaxed);
                    }
                    let flow =
                        commands::execute(shared, self.info, args, &mut batch.out, &mut seq).await;
                    // CLIENT REPLY OFF|SKIP: the reply is dropped (pub/sub confirmations
                    // stay, as in Redis); a SKIP applies to the command after its own.
                    let silenced = match reply.load(Ordering::Relaxed) {
                        REPLY_ON => false,
                        REPLY_SKIPPING => {
                            reply.store(REPLY_ON, Ordering::Relaxed);
                            true
                        }
                        _ => true,
                    };
                    if silenced && !confirmation {
                        batch.out.truncate(start);
                        seq = 0;
                    }
                    // What other connections sent it meanwhile (and what it published to
                    // itself) comes after this reply.
                    if self.info.outbox.has_pending() {
                        self.info.outbox.take_into(&mut batch.out);
                    }
                    if self.info.outbox.killed().is_some() {
                        // CLIENT KILL of itself: the replies so far go out, then it closes.
                        self.reading = Reading::Done;
                        self.inbuf.clear();
                        pos = 0;
                        break;
                    }
                    if seq != 0 {
                        batch.marks.push(Mark {
                            start,
                            end: batch.out.len(),
                            seq,
                        });
                    }
                    match flow {
                        Flow::Continue => {}
                        Flow::Close => {
                            // nothing after QUIT (or SHUTDOWN) is run
                            self.reading = Reading::Done;
                            self.inbuf.clear();
                            pos = 0;
                            break;
                        }
                        Flow::Block(b) => {
                            // the rest waits in `inbuf` until the reply comes
                            self.blocked = Some(b);
                            break;
                        }
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

pub(crate) async fn connection<L: ShardLock<Shard>>(
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
    if shared.password().is_some() {
        info.authenticated.store(false, Ordering::Relaxed);
    }
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
        blocked: None,
    };
    // Last request read or reply taken (the idle timeout), and last reply taken (or the
    // moment the queue became non-empty: the output limit's grace period).
    let mut last_progress = Instant::now();
    let mut last_taken = Instant::now();
    loop {
        if c.parse_pending && !c.over_limit() && c.blocked.is_none() {
            c.run_requests().await;
        }
        let over = c.over_limit();
        // A blocked client is still read (so that its going away is seen), up to a bound.
        let want_read = c.reading == Reading::Open
            && !over
            && !c.parse_pending
            && (c.blocked.is_none() || c.inbuf.len() < BLOCKED_INBUF);
        let want_write = !c.sendq.is_empty();
        if c.reading != Reading::Open && !want_write {
            break;
        }
        // As Redis: subscribers, monitors and blocked clients are not closed for being idle.
        let listening =
            info.outbox.subscribed() || info.monitor.load(Ordering::Relaxed) || c.blocked.is_some();
        let mut deadline = idle.filter(|_| !listening).map(|t| last_progress + t);
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
            let is_blocked = c.blocked.is_some();
            let blocked = &mut c.blocked;
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
                _ = info.outbox.notify.notified() => Event::Pushed,
                r = rd.read_buf(&mut c.inbuf), if want_read => Event::Read(r),
                r = async { blocked.as_mut().expect("blocked").wait().await }, if is_blocked => Event::Unblocked(r),
                _ = sleep => Event::Deadline,
            }
        };
        match event {
            Event::Shutdown => c.reading = Reading::Done,
            Event::Pushed => match info.outbox.killed() {
                Some(why) => {
                    if why == Kill::OutputLimit {
                        shared
                            .stats
                            .output_limit_disconnections
                            .fetch_add(1, Ordering::Relaxed);
                        info!(
                                shared.config.quiet,
                                "client {id} ({peer}) closed: its unsent pub/sub output passed the limit ({} bytes)",
                                shared.config.pubsub_output_buffer_limit
                            );
                    }
                    break;
                }
                None => {
                    let mut pushed = Vec::new();
                    let n = info.outbox.take_into(&mut pushed);
                    if n > 0 {
                        if c.sendq.is_empty() {
                            last_taken = Instant::now();
                        }
                        c.queued += n;
                        c.max_queued = c.max_queued.max(c.queued);
                        info.outbox.out_bytes.store(c.queued, Ordering::Relaxed);
                        c.sendq.push_back(pushed);
                    }
                }
            },
            Event::Wrote(Ok(n)) if n > 0 => {
                last_progress = Instant::now();
                last_taken = last_progress;
                c.front_off += n;
                c.queued -= n;
                if c.front_off == c.sendq.front().map_or(0, Vec::len) {
                    c.sendq.pop_front();
                    c.front_off = 0;
                }
                info.outbox.out_bytes.store(c.queued, Ordering::Relaxed);
            }
            Event::Wrote(_) => break,
            Event::Read(Ok(0)) => c.reading = Reading::Done,
            // Kept in `inbuf` until the blocked command's reply comes.
            Event::Read(Ok(_)) if c.blocked.is_some() => last_progress = Instant::now(),
            Event::Read(Ok(_)) => {
                last_progress = Instant::now();
                c.run_requests().await;
                if was_empty && !c.sendq.is_empty() {
                    last_taken = Instant::now();
                }
            }
            Event::Read(Err(_)) => break,
            Event::Unblocked(reply) => {
                c.blocked = None;
                last_progress = Instant::now();
                let mut batch = c.new_batch();
                batch.out = reply.out;
                if reply.seq != 0 {
                    batch.marks.push(Mark {
                        start: 0,
                        end: batch.out.len(),
                        seq: reply.seq,
                    });
                }
                c.queue(&mut batch).await;
                c.marks = batch.marks;
                c.parse_pending = !c.inbuf.is_empty();
                if was_empty && !c.sendq.is_empty() {
                    last_taken = Instant::now();
                }
            }
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
