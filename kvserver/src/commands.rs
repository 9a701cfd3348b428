//! Command dispatch: checks arguments, calls the store, encodes the reply. No lock is touched
//! here directly; the store does that.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use std::sync::Arc;

use crate::glob;
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::server::{fsync_name, ClientInfo, Shared};
use crate::store::{now_ms, Change, Entry, ExpireCond, Expiry, SetOpts, Shard};

/// The `seq` a command leaves when its reply shows data but it logged nothing (a read, or a
/// write that changed nothing): the connection must not send it if a log failure may have
/// undone what it saw.
pub const READ: u64 = u64::MAX;

/// Whether the connection goes on after this command.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Close,
}

const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

/// Upper-cased command name (names longer than 16 bytes are unknown anyway).
fn upper(name: &[u8]) -> ([u8; 16], usize) {
    let mut buf = [0u8; 16];
    let n = name.len().min(16);
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_uppercase();
    }
    (buf, if name.len() > 16 { 0 } else { n })
}

fn wrong_args(out: &mut Vec<u8>, name: &[u8]) {
    resp::error(
        out,
        &format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name).to_lowercase()
        ),
    );
}

/// Redis commands on the data types this server does not have (`redis-benchmark`'s default
/// tests use several): they get an error that says so instead of "unknown command".
const OTHER_TYPES: &[&[u8]] = &[
    b"LPUSH",
    b"RPUSH",
    b"LPOP",
    b"RPOP",
    b"LRANGE",
    b"LLEN",
    b"LINDEX",
    b"SADD",
    b"SPOP",
    b"SREM",
    b"SMEMBERS",
    b"SCARD",
    b"HSET",
    b"HGET",
    b"HMSET",
    b"HGETALL",
    b"HDEL",
    b"HINCRBY",
    b"ZADD",
    b"ZPOPMIN",
    b"ZPOPMAX",
    b"ZRANGE",
    b"ZREM",
    b"ZSCORE",
    b"ZINCRBY",
    b"XADD",
];

fn unknown(out: &mut Vec<u8>, args: &Args) {
    let (name, len) = upper(&args[0]);
    if OTHER_TYPES.contains(&&name[..len]) {
        return resp::error(
            out,
            &format!(
                "ERR unsupported command '{}': this server stores strings only (GET, SET, INCR, MSET, ...)",
                String::from_utf8_lossy(&args[0]).to_lowercase()
            ),
        );
    }
    let mut msg = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&args[0][..args[0].len().min(128)])
    );
    for a in args.iter().skip(1).take(8) {
        let _ = write!(msg, "'{}' ", String::from_utf8_lossy(&a[..a.len().min(64)]));
    }
    resp::error(out, &msg);
}

/// `arity` as in Redis' command table: exact if positive, a minimum if negative.
fn arity_ok(args: &Args, arity: isize) -> bool {
    let n = args.len() as isize;
    if arity >= 0 {
        n == arity
    } else {
        n >= -arity
    }
}

/// Runs one request and appends its reply to `out`. A write sets `seq` to the sequence
/// number of its log record: the connection must not send the reply before [`crate::aof::Log::wait`]
/// says that record is written (and must replace the reply by an error if it failed).
pub async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    args: Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let (name, len) = upper(&args[0]);
    let name = &name[..len];
    let Some(spec) = spec(name) else {
        unknown(out, &args);
        return Flow::Continue;
    };
    if !arity_ok(&args, spec.arity) {
        wrong_args(out, &args[0]);
        return Flow::Continue;
    }
    if spec.data {
        *seq = READ;
    }
    if let Some(flow) = execute_more(shared, client, name, &args, out, seq).await {
        return flow;
    }
    let store = &shared.store;
    match name {
        b"PING" => match args.len() {
            1 => resp::simple(out, "PONG"),
            2 => resp::bulk(out, &args[1]),
            _ => wrong_args(out, &args[0]),
        },
        b"ECHO" => resp::bulk(out, &args[1]),
        b"QUIT" => {
            resp::ok(out);
            return Flow::Close;
        }
        b"GET" => store.get(&args[1], |v| resp::opt_bulk(out, v)).await,
        b"SET" => set(shared, args, out, seq).await,
        b"DEL" => reply_int(out, store.del(&args[1..], seq).await),
        b"EXISTS" => resp::integer(out, store.exists(&args[1..]).await),
        b"INCR" | b"DECR" | b"INCRBY" | b"DECRBY" => {
            let delta = if args.len() == 3 {
                match parse_int(&args[2]) {
                    Some(d) => d,
                    None => {
                        resp::error(out, NOT_INT);
                        return Flow::Continue;
                    }
                }
            } else {
                1
            };
            let delta = if name.starts_with(b"DECR") {
                match delta.checked_neg() {
                    Some(d) => d,
                    None => {
                        resp::error(out, "ERR decrement would overflow");
                        return Flow::Continue;
                    }
                }
            } else {
                delta
            };
            reply_int(out, store.incr_by(&args[1], delta, seq).await);
        }
        b"MGET" => {
            resp::array_header(out, args.len() - 1);
            store
                .get_many(&args[1..], |_, v| resp::opt_bulk(out, v))
                .await;
        }
        b"MSET" => {
            if args.len() % 2 != 1 {
                wrong_args(out, &args[0]);
            } else {
                let mut args = args;
                args.remove(0);
                reply_ok(out, store.mset(args, false, seq).await.map(|_| ()));
            }
        }
        b"DBSIZE" => resp::integer(out, store.dbsize().await as i64),
        b"KEYS" => {
            let keys = store.keys(&args[1]).await;
            resp::array_header(out, keys.len());
            for k in &keys {
                resp::bulk(out, k);
            }
        }
        b"SCAN" => scan(shared, &args, out).await,
        b"FLUSHALL" | b"FLUSHDB" => {
            let mode_ok = args.len() == 1
                || (args.len() == 2
                    && (args[1].eq_ignore_ascii_case(b"SYNC")
                        || args[1].eq_ignore_ascii_case(b"ASYNC")));
            if mode_ok {
                reply_ok(out, store.flushall(seq).await);
            } else {
                resp::error(out, SYNTAX);
            }
        }
        b"SAVE" => match store.save().await {
            Ok(_) => resp::ok(out),
            Err(e) => resp::error(out, &e),
        },
        b"INFO" => {
            let text = info(shared, args.get(1).map(|s| &s[..])).await;
            resp::bulk(out, text.as_bytes());
        }
        b"CONFIG" => config(shared, &args, out),
        b"TTL" | b"PTTL" => {
            let ms = store.pttl(&args[1]).await;
            let v = match ms {
                None => -2,
                Some(-1) => -1,
                Some(ms) if name == b"TTL" => (ms + 500) / 1000,
                Some(ms) => ms,
            };
            resp::integer(out, v);
        }
        b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" => {
            expire(shared, name, &args, out, seq).await
        }
        b"PERSIST" => {
            let r = store.persist(&args[1], seq).await;
            reply_int(out, r.map(i64::from));
        }
        b"SELECT" => match parse_int(&args[1]) {
            Some(0) => resp::ok(out),
            Some(_) => resp::error(out, "ERR DB index is out of range"),
            None => resp::error(out, NOT_INT),
        },
        _ => unknown(out, &args),
    }
    Flow::Continue
}

fn reply_int(out: &mut Vec<u8>, r: Result<i64, String>) {
    match r {
        Ok(n) => resp::integer(out, n),
        Err(e) => resp::error(out, &e),
    }
}

fn reply_ok(out: &mut Vec<u8>, r: Result<(), String>) {
    match r {
        Ok(()) => resp::ok(out),
        Err(e) => resp::error(out, &e),
    }
}

const EX: u8 = 1;
const PX: u8 = 2;
const EXAT: u8 = 4;
const PXAT: u8 = 8;

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`, read as Redis reads it:
/// every option first (a repeated expiry of the same kind is allowed, the last one counts;
/// conflicting ones are a syntax error), then the expiry's value.
async fn set<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    let mut kinds = 0u8;
    let mut expire: Option<usize> = None; // index of the value
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let has_next = i + 1 < args.len();
        let kind = match &opt[..] {
            b"EX" => EX,
            b"PX" => PX,
            b"EXAT" => EXAT,
            b"PXAT" => PXAT,
            _ => 0,
        };
        match &opt[..] {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if kinds == 0 => keepttl = true,
            _ if kind != 0 && !keepttl && kinds & !kind == 0 && has_next => {
                kinds |= kind;
                i += 1;
                expire = Some(i);
            }
            _ => return resp::error(out, SYNTAX),
        }
        i += 1;
    }
    let mut opts = SetOpts {
        expiry: if keepttl { Expiry::Keep } else { Expiry::None },
        nx,
        xx,
        get,
    };
    if let Some(at) = expire {
        let Some(n) = parse_int(&args[at]) else {
            return resp::error(out, NOT_INT);
        };
        let seconds = kinds & (EX | EXAT) != 0;
        if n <= 0 || (seconds && n > i64::MAX / 1000) {
            return resp::error(out, "ERR invalid expire time in 'set' command");
        }
        let ms = if seconds { n * 1000 } else { n };
        let ms = if kinds & (EX | PX) != 0 {
            ms.checked_add(now_ms() as i64)
        } else {
            Some(ms)
        };
        match ms {
            Some(ms) if ms > 0 => opts.expiry = Expiry::At(ms as u64),
            _ => return resp::error(out, "ERR invalid expire time in 'set' command"),
        }
    }
    let mut args = args;
    let value = std::mem::take(&mut args[2]);
    match shared.store.set(&args[1], value, opts, seq).await {
        Ok(r) if get => resp::opt_bulk(out, r.old.as_deref()),
        Ok(r) if r.stored => resp::ok(out),
        Ok(_) => resp::null(out),
        Err(e) => resp::error(out, &e),
    }
}

/// `EXPIRE key seconds [NX|XX|GT|LT]`, `PEXPIRE` (ms), `EXPIREAT` (unix s), `PEXPIREAT` (unix
/// ms), with Redis' checks in Redis' order: options, the integer, overflow.
async fn expire<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    name: &[u8],
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        match &a.to_ascii_uppercase()[..] {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                return resp::error(
                    out,
                    &format!("ERR Unsupported option {}", String::from_utf8_lossy(a)),
                )
            }
        }
    }
    if nx && (xx || gt || lt) {
        return resp::error(
            out,
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        );
    }
    if gt && lt {
        return resp::error(
            out,
            "ERR GT and LT options at the same time are not compatible",
        );
    }
    let Some(mut when) = parse_int(&args[2]) else {
        return resp::error(out, NOT_INT);
    };
    let lname = String::from_utf8_lossy(name).to_lowercase();
    let invalid = format!("ERR invalid expire time in '{lname}' command");
    if name == b"EXPIRE" || name == b"EXPIREAT" {
        match when.checked_mul(1000) {
            Some(ms) => when = ms,
            None => return resp::error(out, &invalid),
        }
    }
    if name == b"EXPIRE" || name == b"PEXPIRE" {
        match when.checked_add(now_ms() as i64) {
            Some(ms) => when = ms,
            None => return resp::error(out, &invalid),
        }
    }
    let cond = if nx {
        ExpireCond::Nx
    } else if xx {
        // XX with GT/LT: both must hold; GT/LT imply a deadline only for GT
        match (gt, lt) {
            (true, _) => ExpireCond::Gt,
            (_, true) => ExpireCond::XxLt,
            _ => ExpireCond::Xx,
        }
    } else if gt {
        ExpireCond::Gt
    } else if lt {
        ExpireCond::Lt
    } else {
        ExpireCond::Always
    };
    let r = shared.store.expire(&args[1], when, cond, seq).await;
    reply_int(out, r.map(i64::from));
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE string]`
async fn scan<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let Some(cursor) = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return resp::error(out, "ERR invalid cursor");
    };
    let mut pattern = None;
    let mut count = 10usize;
    let mut only_strings = true;
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return resp::error(out, SYNTAX);
        }
        let opt = args[i].to_ascii_uppercase();
        match &opt[..] {
            b"MATCH" => pattern = Some(&args[i + 1][..]),
            b"COUNT" => match parse_int(&args[i + 1]) {
                Some(n) if n >= 1 => count = (n as usize).min(100_000),
                Some(_) => return resp::error(out, SYNTAX),
                None => return resp::error(out, NOT_INT),
            },
            b"TYPE" => only_strings = args[i + 1].eq_ignore_ascii_case(b"string"),
            _ => return resp::error(out, SYNTAX),
        }
        i += 2;
    }
    let pattern = pattern.filter(|p| *p != b"*");
    let (next, keys) = shared.store.scan(cursor, pattern, count).await;
    resp::array_header(out, 2);
    resp::bulk(out, next.to_string().as_bytes());
    let keys = if only_strings { keys } else { Vec::new() };
    resp::array_header(out, keys.len());
    for k in &keys {
        resp::bulk(out, k);
    }
}

/// `CONFIG GET pattern...` over the few parameters clients ask about; `CONFIG SET`,
/// `RESETSTAT` and the rest are refused.
fn config<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    if !args[1].eq_ignore_ascii_case(b"GET") || args.len() < 3 {
        if args[1].eq_ignore_ascii_case(b"GET") {
            return wrong_args(out, b"config|get");
        }
        return resp::error(out, "ERR only CONFIG GET is supported");
    }
    let c = &shared.config;
    let persist = c.persistence.as_ref();
    let table: Vec<(&str, String)> = vec![
        ("save", String::new()),
        (
            "appendonly",
            if persist.is_some() { "yes" } else { "no" }.into(),
        ),
        (
            "appendfsync",
            persist.map_or("no", |p| fsync_name(p.fsync)).into(),
        ),
        (
            "dir",
            persist.map_or(String::new(), |p| p.dir.display().to_string()),
        ),
        ("databases", "1".into()),
        ("maxclients", c.max_clients.to_string()),
        (
            "timeout",
            c.idle_timeout.map_or(0, |t| t.as_secs()).to_string(),
        ),
        ("port", shared.port.to_string()),
        ("bind", c.addr.ip().to_string()),
        ("proto-max-bulk-len", c.limits.max_bulk_len.to_string()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        ("cluster-enabled", "no".into()),
    ];
    let mut hits: Vec<&(&str, String)> = Vec::new();
    for pat in &args[2..] {
        let pat = pat.to_ascii_lowercase();
        for entry in &table {
            if glob::matches(&pat, entry.0.as_bytes()) && !hits.iter().any(|h| h.0 == entry.0) {
                hits.push(entry);
            }
        }
    }
    resp::array_header(out, hits.len() * 2);
    for (k, v) in hits {
        resp::bulk(out, k.as_bytes());
        resp::bulk(out, v.as_bytes());
    }
}

/// `INFO [section]`: server, clients, stats, persistence, keyspace, lockstats.
async fn info<L: ShardLock<Shard>>(shared: &Shared<L>, section: Option<&[u8]>) -> String {
    let want = |s: &str| {
        section.is_none_or(|x| {
            x.eq_ignore_ascii_case(s.as_bytes())
                || x.eq_ignore_ascii_case(b"all")
                || x.eq_ignore_ascii_case(b"everything")
                || x.eq_ignore_ascii_case(b"default")
        })
    };
    let st = &shared.stats;
    let c = &shared.config;
    let mut s = String::new();
    if want("server") {
        let _ = write!(
            s,
            "# Server\r\nredis_version:7.0.0\r\nkvserver_version:{}\r\nlock:{}\r\nshards:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nprocess_id:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            L::NAME,
            shared.store.shard_count(),
            shared.port,
            shared.started.elapsed().as_secs(),
            std::process::id(),
        );
    }
    if want("clients") {
        let _ = write!(
            s,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\r\n",
            st.connected.load(Ordering::Relaxed),
            c.max_clients
        );
    }
    if want("stats") {
        let _ = write!(
            s,
            "# Stats\r\ntotal_connections_received:{}\r\nrejected_connections:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\nprotocol_errors:{}\r\nexpired_keys:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n\r\n",
            st.total_connections.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
            st.commands.load(Ordering::Relaxed),
            st.protocol_errors.load(Ordering::Relaxed),
            shared.store.expired_keys(),
            st.output_limit_disconnections.load(Ordering::Relaxed),
        );
    }
    if want("persistence") {
        let _ = write!(s, "# Persistence\r\n");
        match shared.store.log() {
            Some(log) => {
                let (size, base) = log.size_and_base().await;
                let ls = log.stats();
                let sv = &shared.store.saves;
                let _ = write!(
                    s,
                    "rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\naof_last_write_status:{}\r\naof_rollbacks:{}\r\n",
                    sv.bgsave_in_progress.load(Ordering::Acquire) as u8,
                    sv.last_save.load(Ordering::Relaxed),
                    if sv.last_bgsave_ok.load(Ordering::Relaxed) { "ok" } else { "err" },
                    if log.writes_accepted() { "ok" } else { "err" },
                    log.rollbacks(),
                );
                let _ = write!(
                    s,
                    "aof_enabled:1\r\naof_fsync:{}\r\naof_current_size:{size}\r\naof_base_snapshot:{base}\r\naof_records_written:{}\r\naof_bytes_written:{}\r\naof_batches_written:{}\r\naof_fsyncs:{}\r\naof_rewrites:{}\r\naof_write_errors:{}\r\naof_fsync_errors:{}\r\n\r\n",
                    fsync_name(log.fsync_policy()),
                    ls.records.load(Ordering::Relaxed),
                    ls.bytes.load(Ordering::Relaxed),
                    ls.batches.load(Ordering::Relaxed),
                    ls.fsyncs.load(Ordering::Relaxed),
                    ls.rewrites.load(Ordering::Relaxed),
                    ls.write_errors.load(Ordering::Relaxed),
                    ls.fsync_errors.load(Ordering::Relaxed),
                );
            }
            None => s.push_str("aof_enabled:0\r\n\r\n"),
        }
    }
    if want("keyspace") {
        let ks = shared.store.keyspace().await;
        let _ = write!(s, "# Keyspace\r\n");
        if ks.keys > 0 {
            let _ = write!(
                s,
                "db0:keys={},expires={},avg_ttl=0\r\n",
                ks.keys, ks.expires
            );
        }
        s.push_str("\r\n");
    }
    if want("lockstats") {
        let _ = write!(s, "# Lockstats\r\nlock:{}\r\n", L::NAME);
        for (i, text) in shared.store.lock_stats() {
            for line in text.lines() {
                let _ = write!(s, "shard{i}_{line}\r\n");
            }
        }
        s.push_str("\r\n");
    }
    s
}

// ---- the command table ------------------------------------------------------------------

/// One command as `COMMAND` describes it (Redis' fields) and as the dispatcher checks it.
pub struct Spec {
    pub name: &'static str,
    /// Exact if positive, a minimum if negative (Redis' convention).
    pub arity: isize,
    pub flags: &'static [&'static str],
    pub first_key: i64,
    pub last_key: i64,
    pub step: i64,
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    /// Whether its reply shows stored data (see [`READ`]).
    pub data: bool,
}

macro_rules! spec {
    ($name:literal, $arity:expr, [$($flag:literal),*], $first:expr, $last:expr, $step:expr, $group:literal, $since:literal, $cx:literal, $data:expr, $summary:literal) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: &[$($flag),*],
            first_key: $first,
            last_key: $last,
            step: $step,
            group: $group,
            summary: $summary,
            since: $since,
            complexity: $cx,
            data: $data,
        }
    };
}

/// Every command this server knows, as `COMMAND` lists them.
pub const COMMANDS: &[Spec] = &[
    spec!("append", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "2.0.0", "O(1)", true, "Append a value to a key"),
    spec!("bgsave", -1, ["admin", "noscript", "no_async_loading"], 0, 0, 0, "server", "1.0.0", "O(N)", false, "Asynchronously save the dataset to disk"),
    spec!("client", -2, [], 0, 0, 0, "connection", "2.4.0", "Depends on subcommand.", false, "A container for client connection commands"),
    spec!("command", -1, ["loading", "stale"], 0, 0, 0, "server", "2.8.13", "O(N) where N is the total number of Redis commands", false, "Get array of Redis command details"),
    spec!("config", -2, [], 0, 0, 0, "server", "2.0.0", "Depends on subcommand.", false, "A container for server configuration commands"),
    spec!("dbsize", 1, ["readonly", "fast"], 0, 0, 0, "server", "1.0.0", "O(1)", true, "Return the number of keys in the selected database"),
    spec!("decr", 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Decrement the integer value of a key by one"),
    spec!("decrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Decrement the integer value of a key by the given number"),
    spec!("del", -2, ["write"], 1, -1, 1, "generic", "1.0.0", "O(N) where N is the number of keys that will be removed.", true, "Delete a key"),
    spec!("echo", 2, ["fast"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Echo the given string"),
    spec!("exists", -2, ["readonly", "fast"], 1, -1, 1, "generic", "1.0.0", "O(N) where N is the number of keys to check.", true, "Determine if a key exists"),
    spec!("expire", -3, ["write", "fast"], 1, 1, 1, "generic", "1.0.0", "O(1)", true, "Set a key's time to live in seconds"),
    spec!("expireat", -3, ["write", "fast"], 1, 1, 1, "generic", "1.2.0", "O(1)", true, "Set the expiration for a key as a UNIX timestamp"),
    spec!("flushall", -1, ["write"], 0, 0, 0, "server", "1.0.0", "O(N) where N is the total number of keys in all databases", true, "Remove all keys from all databases"),
    spec!("flushdb", -1, ["write"], 0, 0, 0, "server", "1.0.0", "O(N) where N is the number of keys in the selected database", true, "Remove all keys from the current database"),
    spec!("get", 2, ["readonly", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Get the value of a key"),
    spec!("getdel", 2, ["write", "fast"], 1, 1, 1, "string", "6.2.0", "O(1)", true, "Get the value of a key and delete the key"),
    spec!("getex", -2, ["write", "fast"], 1, 1, 1, "string", "6.2.0", "O(1)", true, "Get the value of a key and optionally set its expiration"),
    spec!("getrange", 4, ["readonly"], 1, 1, 1, "string", "2.4.0", "O(N) where N is the length of the returned string.", true, "Get a substring of the string stored at a key"),
    spec!("getset", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Set the string value of a key and return its old value"),
    spec!("incr", 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Increment the integer value of a key by one"),
    spec!("incrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Increment the integer value of a key by the given amount"),
    spec!("incrbyfloat", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "2.6.0", "O(1)", true, "Increment the float value of a key by the given amount"),
    spec!("info", -1, ["loading", "stale"], 0, 0, 0, "server", "1.0.0", "O(1)", false, "Get information and statistics about the server"),
    spec!("keys", 2, ["readonly"], 0, 0, 0, "generic", "1.0.0", "O(N) with N being the number of keys in the database", true, "Find all keys matching the given pattern"),
    spec!("lastsave", 1, ["loading", "stale", "fast"], 0, 0, 0, "server", "1.0.0", "O(1)", false, "Get the UNIX time stamp of the last successful save to disk"),
    spec!("mget", -2, ["readonly", "fast"], 1, -1, 1, "string", "1.0.0", "O(N) where N is the number of keys to retrieve.", true, "Get the values of all the given keys"),
    spec!("mset", -3, ["write", "denyoom"], 1, -1, 2, "string", "1.0.1", "O(N) where N is the number of keys to set.", true, "Set multiple keys to multiple values"),
    spec!("msetnx", -3, ["write", "denyoom"], 1, -1, 2, "string", "1.0.1", "O(N) where N is the number of keys to set.", true, "Set multiple keys to multiple values, only if none of the keys exist"),
    spec!("persist", 2, ["write", "fast"], 1, 1, 1, "generic", "2.2.0", "O(1)", true, "Remove the expiration from a key"),
    spec!("pexpire", -3, ["write", "fast"], 1, 1, 1, "generic", "2.6.0", "O(1)", true, "Set a key's time to live in milliseconds"),
    spec!("pexpireat", -3, ["write", "fast"], 1, 1, 1, "generic", "2.6.0", "O(1)", true, "Set the expiration for a key as a UNIX timestamp specified in milliseconds"),
    spec!("ping", -1, ["fast"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Ping the server"),
    spec!("psetex", 4, ["write", "denyoom"], 1, 1, 1, "string", "2.6.0", "O(1)", true, "Set the value and expiration in milliseconds of a key"),
    spec!("pttl", 2, ["readonly", "fast"], 1, 1, 1, "generic", "2.6.0", "O(1)", true, "Get the time to live for a key in milliseconds"),
    spec!("quit", -1, ["allow_busy", "noscript", "loading", "stale", "fast", "no_auth"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Close the connection"),
    spec!("randomkey", 1, ["readonly"], 0, 0, 0, "generic", "1.0.0", "O(1)", true, "Return a random key from the keyspace"),
    spec!("rename", 3, ["write"], 1, 2, 1, "generic", "1.0.0", "O(1)", true, "Rename a key"),
    spec!("renamenx", 3, ["write", "fast"], 1, 2, 1, "generic", "1.0.0", "O(1)", true, "Rename a key, only if the new key does not exist"),
    spec!("save", 1, ["admin", "noscript", "no_async_loading", "no_multi"], 0, 0, 0, "server", "1.0.0", "O(N) where N is the total number of keys in all databases", false, "Synchronously save the dataset to disk"),
    spec!("scan", -2, ["readonly"], 0, 0, 0, "generic", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", true, "Incrementally iterate the keys space"),
    spec!("select", 2, ["loading", "stale", "fast"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Change the selected database for the current connection"),
    spec!("set", -3, ["write", "denyoom"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Set the string value of a key"),
    spec!("setex", 4, ["write", "denyoom"], 1, 1, 1, "string", "2.0.0", "O(1)", true, "Set the value and expiration of a key"),
    spec!("setnx", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Set the value of a key, only if the key does not exist"),
    spec!("setrange", 4, ["write", "denyoom"], 1, 1, 1, "string", "2.2.0", "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.", true, "Overwrite part of a string at key starting at the specified offset"),
    spec!("shutdown", -1, ["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"], 0, 0, 0, "server", "1.0.0", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)", false, "Synchronously save the dataset to disk and then shut down the server"),
    spec!("strlen", 2, ["readonly", "fast"], 1, 1, 1, "string", "2.2.0", "O(1)", true, "Get the length of the value stored in a key"),
    spec!("time", 1, ["loading", "stale", "fast"], 0, 0, 0, "server", "2.6.0", "O(1)", false, "Return the current server time"),
    spec!("touch", -2, ["readonly", "fast"], 1, -1, 1, "generic", "3.2.1", "O(N) where N is the number of keys that will be touched.", true, "Alters the last access time of a key(s). Returns the number of existing keys specified."),
    spec!("ttl", 2, ["readonly", "fast"], 1, 1, 1, "generic", "1.0.0", "O(1)", true, "Get the time to live for a key in seconds"),
    spec!("type", 2, ["readonly", "fast"], 1, 1, 1, "generic", "1.0.0", "O(1)", true, "Determine the type stored at key"),
    spec!("unlink", -2, ["write", "fast"], 1, -1, 1, "generic", "4.0.0", "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.", true, "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking."),
];

/// The table entry of an upper-cased command name.
fn spec(upper_name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(upper_name))
}

fn reply_spec(out: &mut Vec<u8>, s: &Spec) {
    resp::array_header(out, 10);
    resp::bulk(out, s.name.as_bytes());
    resp::integer(out, s.arity as i64);
    resp::array_header(out, s.flags.len());
    for f in s.flags {
        resp::simple(out, f);
    }
    resp::integer(out, s.first_key);
    resp::integer(out, s.last_key);
    resp::integer(out, s.step);
    let cat = format!("@{}", s.group);
    resp::array_header(out, 1);
    resp::simple(out, &cat);
    resp::array_header(out, 0); // tips
    resp::array_header(out, 0); // key specs
    resp::array_header(out, 0); // subcommands
}

fn reply_docs(out: &mut Vec<u8>, s: &Spec) {
    resp::bulk(out, s.name.as_bytes());
    resp::array_header(out, 8);
    for (k, v) in [
        ("summary", s.summary),
        ("since", s.since),
        ("group", s.group),
        ("complexity", s.complexity),
    ] {
        resp::bulk(out, k.as_bytes());
        resp::bulk(out, v.as_bytes());
    }
}

fn unknown_subcommand(out: &mut Vec<u8>, args: &Args) {
    resp::error(
        out,
        &format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            String::from_utf8_lossy(&args[1][..args[1].len().min(128)]),
            String::from_utf8_lossy(&args[0]).to_uppercase()
        ),
    );
}

fn wrong_sub_args(out: &mut Vec<u8>, args: &Args) {
    resp::error(
        out,
        &format!(
            "ERR wrong number of arguments for '{}|{}' command",
            String::from_utf8_lossy(&args[0]).to_lowercase(),
            String::from_utf8_lossy(&args[1]).to_lowercase()
        ),
    );
}

/// `COMMAND`, `COMMAND COUNT|LIST|INFO|DOCS`.
fn command(args: &Args, out: &mut Vec<u8>) {
    if args.len() == 1 {
        resp::array_header(out, COMMANDS.len());
        for s in COMMANDS {
            reply_spec(out, s);
        }
        return;
    }
    let sub = args[1].to_ascii_uppercase();
    match &sub[..] {
        b"COUNT" if args.len() == 2 => resp::integer(out, COMMANDS.len() as i64),
        b"LIST" if args.len() == 2 => {
            resp::array_header(out, COMMANDS.len());
            for s in COMMANDS {
                resp::bulk(out, s.name.as_bytes());
            }
        }
        b"INFO" => {
            if args.len() == 2 {
                return command(&vec![args[0].clone()], out);
            }
            resp::array_header(out, args.len() - 2);
            for a in &args[2..] {
                match spec(&a.to_ascii_uppercase()) {
                    Some(s) => reply_spec(out, s),
                    None => resp::null(out),
                }
            }
        }
        b"DOCS" => {
            let found: Vec<&Spec> = if args.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|a| spec(&a.to_ascii_uppercase()))
                    .collect()
            };
            resp::array_header(out, 2 * found.len());
            for s in found {
                reply_docs(out, s);
            }
        }
        b"COUNT" | b"LIST" => wrong_sub_args(out, args),
        _ => unknown_subcommand(out, args),
    }
}

/// `CLIENT ID|GETNAME|SETNAME|LIST|INFO|SETINFO`.
fn client_cmd<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    client: &ClientInfo,
    args: &Args,
    out: &mut Vec<u8>,
) {
    let sub = args[1].to_ascii_uppercase();
    let n = args.len();
    match &sub[..] {
        b"ID" if n == 2 => resp::integer(out, client.id as i64),
        b"GETNAME" if n == 2 => {
            let name = client.name();
            if name.is_empty() {
                resp::null(out)
            } else {
                resp::bulk(out, &name)
            }
        }
        b"SETNAME" if n == 3 => {
            if args[2].iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
                return resp::error(
                    out,
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            client.set_name(&args[2]);
            resp::ok(out)
        }
        b"SETINFO" if n == 4 => resp::ok(out),
        b"LIST" => {
            let mut i = 2;
            let mut only: Option<Vec<u64>> = None;
            while i < n {
                let opt = args[i].to_ascii_uppercase();
                match &opt[..] {
                    b"TYPE" if i + 1 < n => {
                        let t = args[i + 1].to_ascii_lowercase();
                        if !matches!(&t[..], b"normal" | b"master" | b"replica" | b"pubsub") {
                            return resp::error(
                                out,
                                &format!(
                                    "ERR Unknown client type '{}'",
                                    String::from_utf8_lossy(&args[i + 1])
                                ),
                            );
                        }
                        if t != b"normal" {
                            only = Some(Vec::new());
                        }
                        i += 2;
                    }
                    b"ID" if i + 1 < n => {
                        let mut ids = Vec::new();
                        for a in &args[i + 1..] {
                            match parse_int(a) {
                                Some(v) if v > 0 => ids.push(v as u64),
                                _ => return resp::error(out, "ERR Invalid client ID"),
                            }
                        }
                        only = Some(ids);
                        i = n;
                    }
                    _ => return resp::error(out, SYNTAX),
                }
            }
            let mut text = String::new();
            for c in shared.clients() {
                if only.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
                    text.push_str(&c.describe(shared.started));
                    text.push('\n');
                }
            }
            resp::bulk(out, text.as_bytes());
        }
        b"INFO" if n == 2 => {
            let mut text = client.describe(shared.started);
            text.push('\n');
            resp::bulk(out, text.as_bytes());
        }
        b"ID" | b"GETNAME" | b"SETNAME" | b"SETINFO" | b"INFO" => wrong_sub_args(out, args),
        _ => unknown_subcommand(out, args),
    }
}

/// The commands added for issue 20 (and `CLIENT`, `COMMAND`); `None`: not one of them.
async fn execute_more<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    name: &[u8],
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Option<Flow> {
    let store = &shared.store;
    let max_len = shared.config.limits.max_bulk_len as u64;
    const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    match name {
        b"CLIENT" => client_cmd(shared, client, args, out),
        b"COMMAND" => command(args, out),
        b"TYPE" => {
            let t = store
                .get(&args[1], |v| if v.is_some() { "string" } else { "none" })
                .await;
            resp::simple(out, t)
        }
        b"STRLEN" => {
            let n = store.get(&args[1], |v| v.map_or(0, |v| v.len())).await;
            resp::integer(out, n as i64)
        }
        b"GETRANGE" => {
            let (Some(start), Some(end)) = (parse_int(&args[2]), parse_int(&args[3])) else {
                resp::error(out, NOT_INT);
                return Some(Flow::Continue);
            };
            store
                .get(&args[1], |v| {
                    let v = v.unwrap_or(b"");
                    resp::bulk(out, getrange(v, start, end))
                })
                .await
        }
        b"TOUCH" => resp::integer(out, store.exists(&args[1..]).await),
        b"UNLINK" => reply_int(out, store.del(&args[1..], seq).await),
        b"RANDOMKEY" => resp::opt_bulk(out, store.random_key().await.as_deref()),
        b"TIME" => {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            resp::array_header(out, 2);
            resp::bulk(out, d.as_secs().to_string().as_bytes());
            resp::bulk(out, d.subsec_micros().to_string().as_bytes());
        }
        b"LASTSAVE" => resp::integer(out, store.saves.last_save.load(Ordering::Relaxed) as i64),
        b"BGSAVE" => bgsave(shared, args, out),
        b"SHUTDOWN" => return Some(shutdown(shared, args, out).await),
        b"APPEND" => {
            let add = &args[2];
            let r = store
                .update(&args[1], seq, |e, _| match e {
                    None => Ok((
                        Change::Put(Entry {
                            value: add.clone(),
                            expire_at: 0,
                        }),
                        add.len() as i64,
                    )),
                    Some(e) => {
                        if e.value.len() as u64 + add.len() as u64 > max_len {
                            return Err(TOO_BIG.into());
                        }
                        let mut value = Vec::with_capacity(e.value.len() + add.len());
                        value.extend_from_slice(&e.value);
                        value.extend_from_slice(add);
                        let n = value.len() as i64;
                        Ok((
                            Change::Put(Entry {
                                value,
                                expire_at: e.expire_at,
                            }),
                            n,
                        ))
                    }
                })
                .await;
            reply_int(out, r)
        }
        b"SETRANGE" => {
            let Some(offset) = parse_int(&args[2]) else {
                resp::error(out, NOT_INT);
                return Some(Flow::Continue);
            };
            if offset < 0 {
                resp::error(out, "ERR offset is out of range");
                return Some(Flow::Continue);
            }
            let part = &args[3];
            let r = store
                .update(&args[1], seq, |e, _| {
                    let old_len = e.map_or(0, |e| e.value.len());
                    if part.is_empty() {
                        return Ok((Change::Keep, old_len as i64));
                    }
                    let end = (offset as u64).checked_add(part.len() as u64);
                    let end = match end {
                        Some(end) if end <= max_len => end as usize,
                        _ => return Err(TOO_BIG.into()),
                    };
                    let mut value = e.map_or_else(Vec::new, |e| e.value.clone());
                    if value.len() < end {
                        value.resize(end, 0);
                    }
                    value[offset as usize..end].copy_from_slice(part);
                    let n = value.len() as i64;
                    Ok((
                        Change::Put(Entry {
                            value,
                            expire_at: e.map_or(0, |e| e.expire_at),
                        }),
                        n,
                    ))
                })
                .await;
            reply_int(out, r)
        }
        b"SETNX" => {
            let opts = SetOpts {
                expiry: Expiry::None,
                nx: true,
                xx: false,
                get: false,
            };
            let r = store.set(&args[1], args[2].clone(), opts, seq).await;
            reply_int(out, r.map(|r| r.stored as i64))
        }
        b"SETEX" | b"PSETEX" => {
            let lname = String::from_utf8_lossy(name).to_lowercase();
            let Some(n) = parse_int(&args[2]) else {
                resp::error(out, NOT_INT);
                return Some(Flow::Continue);
            };
            let at = expire_at(n, name == b"SETEX", true, now_ms());
            let Some(at) = at else {
                resp::error(
                    out,
                    &format!("ERR invalid expire time in '{lname}' command"),
                );
                return Some(Flow::Continue);
            };
            let opts = SetOpts {
                expiry: Expiry::At(at),
                nx: false,
                xx: false,
                get: false,
            };
            let r = store.set(&args[1], args[3].clone(), opts, seq).await;
            reply_ok(out, r.map(|_| ()))
        }
        b"GETSET" => {
            let opts = SetOpts {
                expiry: Expiry::None,
                nx: false,
                xx: false,
                get: true,
            };
            match store.set(&args[1], args[2].clone(), opts, seq).await {
                Ok(r) => resp::opt_bulk(out, r.old.as_deref()),
                Err(e) => resp::error(out, &e),
            }
        }
        b"GETDEL" => {
            let r = store
                .update(&args[1], seq, |e, _| {
                    Ok(match e {
                        Some(e) => (Change::Del, Some(e.value.clone())),
                        None => (Change::Keep, None),
                    })
                })
                .await;
            match r {
                Ok(v) => resp::opt_bulk(out, v.as_deref()),
                Err(e) => resp::error(out, &e),
            }
        }
        b"GETEX" => getex(shared, args, out, seq).await,
        b"MSETNX" => {
            if args.len() % 2 != 1 {
                wrong_args(out, &args[0]);
            } else {
                let kv = args[1..].to_vec();
                reply_int(out, store.mset(kv, true, seq).await.map(i64::from));
            }
        }
        b"INCRBYFLOAT" => {
            use crate::ldouble::{self, Parsed};
            const NOT_FLOAT: &str = "ERR value is not a valid float";
            const NOT_FINITE: &str = "ERR increment would produce NaN or Infinity";
            let Some(incr) = ldouble::parse(&args[2]) else {
                resp::error(out, NOT_FLOAT);
                return Some(Flow::Continue);
            };
            let r = store
                .update(&args[1], seq, |e, _| {
                    let (old, at) = match e {
                        Some(e) => (ldouble::parse(&e.value).ok_or(NOT_FLOAT)?, e.expire_at),
                        None => (ldouble::parse(b"0").expect("zero"), 0),
                    };
                    let (Parsed::Finite(old), Parsed::Finite(incr)) = (old, &incr) else {
                        return Err(NOT_FINITE.into());
                    };
                    let v = ldouble::add(old, *incr).ok_or(NOT_FINITE)?;
                    let text = ldouble::format(v).into_bytes();
                    Ok((
                        Change::Put(Entry {
                            value: text.clone(),
                            expire_at: at,
                        }),
                        text,
                    ))
                })
                .await;
            match r {
                Ok(v) => resp::bulk(out, &v),
                Err(e) => resp::error(out, &e),
            }
        }
        b"RENAME" | b"RENAMENX" => {
            let nx = name == b"RENAMENX";
            match store.rename(&args[1], &args[2], nx, seq).await {
                Ok(_) if !nx => resp::ok(out),
                Ok(moved) => resp::integer(out, moved as i64),
                Err(e) => resp::error(out, &e),
            }
        }
        _ => return None,
    }
    Some(Flow::Continue)
}

/// Redis' `GETRANGE` index rules (7.0).
fn getrange(v: &[u8], mut start: i64, mut end: i64) -> &[u8] {
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return b"";
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return b"";
    }
    &v[start as usize..=end as usize]
}

/// The deadline for an expiry argument `n` (seconds if `secs`; relative to `now` if
/// `relative`), with Redis' checks; `None`: "invalid expire time".
fn expire_at(n: i64, secs: bool, relative: bool, now: u64) -> Option<u64> {
    if n <= 0 || (secs && n > i64::MAX / 1000) {
        return None;
    }
    let ms = if secs { n * 1000 } else { n };
    let ms = if relative {
        ms.checked_add(now as i64)?
    } else {
        ms
    };
    (ms > 0).then_some(ms as u64)
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`, checked in Redis' order: the options, the
/// key (a missing key is nil whatever the options), then the time.
async fn getex<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let mut kinds = 0u8;
    let mut persist = false;
    let mut expire: Option<usize> = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let has_next = i + 1 < args.len();
        let kind = match &opt[..] {
            b"EX" => EX,
            b"PX" => PX,
            b"EXAT" => EXAT,
            b"PXAT" => PXAT,
            _ => 0,
        };
        match &opt[..] {
            b"PERSIST" if kinds == 0 => persist = true,
            _ if kind != 0 && !persist && kinds & !kind == 0 && has_next => {
                kinds |= kind;
                i += 1;
                expire = Some(i);
            }
            _ => return resp::error(out, SYNTAX),
        }
        i += 1;
    }
    let r = shared
        .store
        .update(&args[1], seq, |e, now| {
            let Some(e) = e else {
                return Ok((Change::Keep, None));
            };
            let value = Some(e.value.clone());
            if let Some(at) = expire {
                let n = parse_int(&args[at]).ok_or(NOT_INT)?;
                let relative = kinds & (EX | PX) != 0;
                let when = expire_at(n, kinds & (EX | EXAT) != 0, relative, now)
                    .ok_or("ERR invalid expire time in 'getex' command")?;
                if !relative && when <= now {
                    return Ok((Change::Del, value));
                }
                return Ok((Change::Expire(when), value));
            }
            if persist && e.expire_at != 0 {
                return Ok((Change::Expire(0), value));
            }
            Ok((Change::Keep, value))
        })
        .await;
    match r {
        Ok(v) => resp::opt_bulk(out, v.as_deref()),
        Err(e) => resp::error(out, &e),
    }
}

/// `BGSAVE [SCHEDULE]`: the `SAVE` in a task of its own (shard read locks one at a time,
/// writers to that shard queue meanwhile); `INFO persistence` shows its progress and outcome.
fn bgsave<L: ShardLock<Shard>>(shared: &Arc<Shared<L>>, args: &Args, out: &mut Vec<u8>) {
    let schedule = match args.len() {
        1 => false,
        2 if args[1].eq_ignore_ascii_case(b"SCHEDULE") => true,
        _ => return resp::error(out, SYNTAX),
    };
    if shared.store.log().is_none() {
        return resp::error(out, "ERR persistence is disabled (--appendonly no)");
    }
    let saves = &shared.store.saves;
    if saves
        .bgsave_in_progress
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        if schedule {
            return resp::simple(out, "Background saving scheduled");
        }
        return resp::error(out, "ERR Background save already in progress");
    }
    let sh = shared.clone();
    tokio::spawn(async move {
        let r = sh.store.save().await;
        if let Err(e) = &r {
            eprintln!("kvserver: BGSAVE failed: {e}");
        }
        let saves = &sh.store.saves;
        saves.last_bgsave_ok.store(r.is_ok(), Ordering::Relaxed);
        saves.bgsave_in_progress.store(false, Ordering::Release);
    });
    resp::simple(out, "Background saving started")
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: a graceful shutdown (the log is flushed
/// and fsynced whatever the options); `SAVE` takes a snapshot first, and its failure cancels
/// the shutdown unless `FORCE` is given. Replies nothing when it goes ahead (the connection
/// closes), as Redis does.
async fn shutdown<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) -> Flow {
    let (mut save, mut nosave, mut force, mut abort, mut now) = (false, false, false, false, false);
    for a in &args[1..] {
        match &a.to_ascii_uppercase()[..] {
            b"SAVE" => save = true,
            b"NOSAVE" => nosave = true,
            b"FORCE" => force = true,
            b"ABORT" => abort = true,
            b"NOW" => now = true,
            _ => {
                resp::error(out, SYNTAX);
                return Flow::Continue;
            }
        }
    }
    if (abort && (save || nosave || force || now)) || (save && nosave) {
        resp::error(out, SYNTAX);
        return Flow::Continue;
    }
    if abort {
        resp::error(out, "ERR No shutdown in progress.");
        return Flow::Continue;
    }
    if save && shared.store.log().is_some() {
        if let Err(e) = shared.store.save().await {
            eprintln!("kvserver: SHUTDOWN SAVE: {e}");
            if !force {
                resp::error(out, "ERR Errors trying to SHUTDOWN. Check logs.");
                return Flow::Continue;
            }
        }
    }
    shared.request_shutdown();
    Flow::Close
}
