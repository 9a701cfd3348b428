//! Command dispatch: checks arguments, calls the store, encodes the reply. No lock is touched
//! here directly; the store does that.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::glob;
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::server::{fsync_name, Shared};
use crate::store::{now_ms, ExpireCond, Expiry, SetOpts, Shard};

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
    shared: &Shared<L>,
    args: Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let (name, len) = upper(&args[0]);
    let name = &name[..len];
    let arity: isize = match name {
        b"PING" => -1,
        b"ECHO" => 2,
        b"GET" => 2,
        b"SET" => -3,
        b"DEL" => -2,
        b"EXISTS" => -2,
        b"INCR" | b"DECR" => 2,
        b"INCRBY" | b"DECRBY" => 3,
        b"MGET" => -2,
        b"MSET" => -3,
        b"DBSIZE" => 1,
        b"KEYS" => 2,
        b"SCAN" => -2,
        b"FLUSHALL" | b"FLUSHDB" => -1,
        b"SAVE" => 1,
        b"INFO" => -1,
        b"CONFIG" => -2,
        b"QUIT" => -1,
        b"TTL" | b"PTTL" => 2,
        b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" => -3,
        b"PERSIST" => 2,
        b"SELECT" => 2,
        b"CLIENT" => -2,
        b"COMMAND" => -1,
        _ => {
            unknown(out, &args);
            return Flow::Continue;
        }
    };
    if !arity_ok(&args, arity) {
        wrong_args(out, &args[0]);
        return Flow::Continue;
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
                reply_ok(out, store.mset(args, seq).await);
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
        b"CLIENT" => {
            let sub = args[1].to_ascii_uppercase();
            match &sub[..] {
                b"SETINFO" | b"SETNAME" if args.len() >= 3 => resp::ok(out),
                b"GETNAME" => resp::null(out),
                b"ID" => resp::integer(out, 1),
                _ => resp::error(out, "ERR unknown CLIENT subcommand"),
            }
        }
        // redis-cli asks for command docs at start; an empty table is a valid answer.
        b"COMMAND" => resp::array_header(out, 0),
        _ => unreachable!("every name in the arity table is handled"),
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
            "# Stats\r\ntotal_connections_received:{}\r\nrejected_connections:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\nprotocol_errors:{}\r\nexpired_keys:{}\r\n\r\n",
            st.total_connections.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
            st.commands.load(Ordering::Relaxed),
            st.protocol_errors.load(Ordering::Relaxed),
            shared.store.expired_keys(),
        );
    }
    if want("persistence") {
        let _ = write!(s, "# Persistence\r\n");
        match shared.store.log() {
            Some(log) => {
                let (size, base) = log.size_and_base().await;
                let ls = log.stats();
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
