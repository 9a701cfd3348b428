//! Commands on keys whatever their type (Redis' `db.c`/`expire.c`): `DEL`, `EXISTS`, `TYPE`,
//! `RENAME`, `KEYS`, `SCAN`, `RANDOMKEY`, expiry and TTLs.

use std::sync::Arc;

use super::{reply_int, unknown, Flow, NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{now_ms, Change, ExpireCond, Shard};
use crate::value::Value;

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let store = &shared.store;
    match name {
        b"DEL" => reply_int(out, store.del(&args[1..], seq).await),
        b"UNLINK" => reply_int(out, store.del(&args[1..], seq).await),
        b"EXISTS" => resp::integer(out, store.exists(&args[1..]).await),
        b"TOUCH" => resp::integer(out, store.exists(&args[1..]).await),
        b"TYPE" => {
            let t = store
                .read(&args[1], |v| v.map_or("none", |v| v.type_name()))
                .await;
            resp::simple(out, t)
        }
        b"RENAME" | b"RENAMENX" => {
            let nx = name == b"RENAMENX";
            match store.rename(&args[1], &args[2], nx, seq).await {
                Ok(_) if !nx => resp::ok(out),
                Ok(moved) => resp::integer(out, moved as i64),
                Err(e) => resp::error(out, &e),
            }
        }
        b"KEYS" => {
            let keys = store.keys(&args[1]).await;
            resp::array_header(out, keys.len());
            for k in &keys {
                resp::bulk(out, k);
            }
        }
        b"SCAN" => scan(shared, args, out).await,
        b"RANDOMKEY" => resp::opt_bulk(out, store.random_key().await.as_deref()),
        b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" => {
            expire(shared, name, args, out, seq).await
        }
        b"EXPIRETIME" | b"PEXPIRETIME" => {
            let v = match store.expire_at(&args[1]).await {
                None => -2,
                Some(0) => -1,
                Some(ms) if name == b"EXPIRETIME" => (ms / 1000) as i64,
                Some(ms) => ms as i64,
            };
            resp::integer(out, v);
        }
        b"OBJECT" => object(shared, args, out).await,
        b"SSCAN" | b"HSCAN" | b"ZSCAN" => scan_members(shared, name, args, out).await,
        b"COPY" => copy(shared, args, out, seq).await,
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
        b"PERSIST" => {
            let r = store.persist(&args[1], seq).await;
            reply_int(out, r.map(i64::from));
        }
        _ => unknown(out, args),
    }
    Flow::Continue
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
    let Some(cursor) = parse_cursor(&args[1]) else {
        return resp::error(out, "ERR invalid cursor");
    };
    let mut pattern = None;
    let mut count = 10usize;
    let mut kind = None;
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
            b"TYPE" => kind = Some(&args[i + 1][..]),
            _ => return resp::error(out, SYNTAX),
        }
        i += 2;
    }
    let pattern = pattern.filter(|p| *p != b"*");
    let (next, keys) = shared.store.scan(cursor, pattern, kind, count).await;
    resp::array_header(out, 2);
    resp::bulk(out, next.to_string().as_bytes());
    resp::array_header(out, keys.len());
    for k in &keys {
        resp::bulk(out, k);
    }
}

/// `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT|HELP`. There is one representation per type here;
/// `ENCODING` names the one Redis 7.0 would use for the value as it is now (by its size and the
/// thresholds `CONFIG SET` changes), not by its history (Redis keeps `raw` after an `APPEND` to
/// a small string, for one). `FREQ` (under an LFU policy) and `IDLETIME` (under the others)
/// read the access data eviction ranks keys by, as Redis does, without counting an access.
async fn object<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let sub = args[1].to_ascii_uppercase();
    match (&sub[..], args.len()) {
        (b"HELP", 2) => {
            let lines = [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation the value of <key> would have in Redis.",
                "FREQ <key>",
                "    Return the access frequency index of the key <key>.",
                "IDLETIME <key>",
                "    Return the idle time of the key <key>.",
                "REFCOUNT <key>",
                "    Always 1.",
                "HELP",
                "    Print this help.",
            ];
            resp::array_header(out, lines.len());
            for l in lines {
                resp::simple(out, l);
            }
        }
        (b"FREQ" | b"IDLETIME", 3) => {
            let freq = &sub[..] == b"FREQ";
            match shared.store.access_info(&args[2], freq).await {
                Ok(Some(n)) => resp::integer(out, n as i64),
                Ok(None) => resp::null(out),
                Err(()) if freq => resp::error(
                    out,
                    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
                ),
                Err(()) => resp::error(
                    out,
                    "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
                ),
            }
        }
        (b"ENCODING" | b"REFCOUNT", 3) => {
            let s = &shared.settings;
            let enc = shared
                .store
                .read(&args[2], |v| v.map(|v| encoding(v, |n| s.get(n))))
                .await;
            match (enc, &sub[..]) {
                (None, _) => resp::null(out),
                (Some("int" | "embstr"), b"ENCODING") if shared.raw_strings.contains(&args[2]) => {
                    resp::bulk(out, b"raw")
                }
                (Some(e), b"ENCODING") => resp::bulk(out, e.as_bytes()),
                (Some(_), _) => resp::integer(out, 1),
            }
        }
        (b"ENCODING" | b"FREQ" | b"IDLETIME" | b"REFCOUNT", _) => resp::error(
            out,
            &format!(
                "ERR wrong number of arguments for 'object|{}' command",
                String::from_utf8_lossy(&args[1]).to_lowercase()
            ),
        ),
        _ => resp::error(
            out,
            &format!(
                "ERR unknown subcommand '{}'. Try OBJECT HELP.",
                String::from_utf8_lossy(&args[1])
            ),
        ),
    }
}

/// The bytes an element takes in a listpack, as Redis encodes it: an integer in 1 to 9
/// bytes, a string after a 1, 2 or 5-byte header; then the entry's length backwards in 1 to 5
/// bytes.
fn listpack_entry_size(e: &[u8]) -> usize {
    let body = match parse_int(e).filter(|_| e.len() <= 20) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..4096).contains(&v) => 2,
        Some(v) if i16::try_from(v).is_ok() => 3,
        Some(v) if (-(1 << 23)..1 << 23).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None if e.len() < 64 => 1 + e.len(),
        None if e.len() < 4096 => 2 + e.len(),
        None => 5 + e.len(),
    };
    let back = match body {
        0..=127 => 1,
        128..=16383 => 2,
        16384..=2097151 => 3,
        2097152..=268435455 => 4,
        _ => 5,
    };
    body + back
}

/// The encoding Redis 7.0 would give `v` as it is now; `setting` reads a threshold.
pub(super) fn encoding(v: &Value, setting: impl Fn(&str) -> i64) -> &'static str {
    let small = |n: usize, longest: usize, kind: &str| {
        n as i64 <= setting(&format!("{kind}-max-listpack-entries"))
            && longest as i64 <= setting(&format!("{kind}-max-listpack-value"))
    };
    match v {
        Value::Str(b) if b.len() <= 20 && parse_int(b).is_some() => "int",
        Value::Str(b) if b.len() <= 44 => "embstr",
        Value::Str(_) => "raw",
        // Redis 7.2 and later (the test suite's): small lists and sets are listpacks.
        Value::List(l) => {
            let bytes: usize = 7 + l.iter().map(|e| listpack_entry_size(e)).sum::<usize>();
            let max = setting("list-max-listpack-size");
            // As Redis' quicklist limits: a count (0 taken as 1; at most 8 KiB still), or
            // -1..-5 for 4, 8, 16, 32, 64 KiB (below -5 as -5).
            let fits = if max >= 0 {
                l.len() as i64 <= max.max(1) && bytes <= 8192
            } else {
                bytes <= 4096 << ((-max).min(5) - 1)
            };
            if fits {
                "listpack"
            } else {
                "quicklist"
            }
        }
        Value::Hash(h) => {
            let longest = h
                .iter()
                .map(|(k, v)| k.len().max(v.len()))
                .max()
                .unwrap_or(0);
            if small(h.len(), longest, "hash") {
                "listpack"
            } else {
                "hashtable"
            }
        }
        Value::Set(s) => {
            let longest = s.iter().map(|m| m.len()).max().unwrap_or(0);
            if s.len() as i64 <= setting("set-max-intset-entries")
                && s.iter().all(|m| parse_int(m).is_some())
            {
                "intset"
            } else if small(s.len(), longest, "set") {
                "listpack"
            } else {
                "hashtable"
            }
        }
        Value::ZSet(z) => {
            let longest = z.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
            if small(z.len(), longest, "zset") {
                "listpack"
            } else {
                "skiplist"
            }
        }
    }
}

/// `COPY source destination [DB 0] [REPLACE]`: the value and its deadline, in one critical
/// section over both shards (a transaction of the store: one log record).
async fn copy<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        match &args[i].to_ascii_uppercase()[..] {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < args.len() => {
                match parse_int(&args[i + 1]) {
                    Some(0) => {}
                    Some(_) => return resp::error(out, "ERR DB index is out of range"),
                    None => return resp::error(out, NOT_INT),
                }
                i += 1;
            }
            _ => return resp::error(out, SYNTAX),
        }
        i += 1;
    }
    let (src, dst) = (&args[1], &args[2]);
    if src == dst {
        return resp::error(out, "ERR source and destination objects are the same");
    }
    let store = &shared.store;
    let shards = store.shards_of([&src[..], &dst[..]].into_iter());
    let r = store
        .transaction(&shards, false, async {
            let Some(entry) = store.read_entry(src, |e| e.cloned()).await else {
                return Ok(0);
            };
            let mut inner = 0;
            store
                .update(dst, &mut inner, |old, _| {
                    if old.is_some() && !replace {
                        return Ok((Change::Keep, 0));
                    }
                    Ok((Change::Put(entry), 1))
                })
                .await
        })
        .await;
    reply_int(out, super::settle(seq, r));
}

/// A scan cursor as Redis reads it (`strtoul`): a negative one wraps around (`SCAN -1` is a
/// cursor past the end: the scan is over).
fn parse_cursor(a: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(a).ok()?;
    s.parse::<u64>()
        .ok()
        .or_else(|| s.parse::<i64>().ok().map(|v| v as u64))
}

/// `SSCAN`/`HSCAN`/`ZSCAN key cursor [MATCH pattern] [COUNT n]` (`HSCAN`: `NOVALUES`): every
/// matching element in one step, with cursor 0, whatever the cursor and `COUNT` (a hint in
/// Redis too; it does the same for its small encodings). The elements of one call are read
/// under one read lock, so they are a consistent view.
async fn scan_members<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    name: &[u8],
    args: &Args,
    out: &mut Vec<u8>,
) {
    let cursor = std::str::from_utf8(&args[2]).ok();
    if cursor
        .and_then(|s| {
            s.parse::<u64>()
                .ok()
                .or_else(|| s.parse::<i64>().ok().map(|v| v as u64))
        })
        .is_none()
    {
        return resp::error(out, "ERR invalid cursor");
    }
    let (mut pattern, mut novalues) = (None, false);
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match &opt[..] {
            b"NOVALUES" if name == b"HSCAN" => {
                novalues = true;
                i += 1;
                continue;
            }
            _ if i + 1 >= args.len() => return resp::error(out, SYNTAX),
            b"MATCH" => pattern = Some(&args[i + 1][..]),
            b"COUNT" => match parse_int(&args[i + 1]) {
                Some(n) if n >= 1 => {}
                Some(_) => return resp::error(out, SYNTAX),
                None => return resp::error(out, NOT_INT),
            },
            _ => return resp::error(out, SYNTAX),
        }
        i += 2;
    }
    let keep = |m: &[u8]| pattern.is_none_or(|p| crate::glob::matches(p, m));
    let r = shared
        .store
        .read(&args[1], |v| -> Result<Vec<Vec<u8>>, String> {
            let mut items = Vec::new();
            match (v, name) {
                (None, _) => {}
                (Some(Value::Set(s)), b"SSCAN") => {
                    items.extend(s.iter().filter(|m| keep(m)).cloned())
                }
                (Some(Value::Hash(h)), b"HSCAN") => {
                    for (f, v) in h.iter().filter(|(f, _)| keep(f)) {
                        items.push(f.clone());
                        if !novalues {
                            items.push(v.clone());
                        }
                    }
                }
                (Some(Value::ZSet(z)), b"ZSCAN") => {
                    for (m, sc) in z.iter().filter(|(m, _)| keep(m)) {
                        items.push(m.to_vec());
                        items.push(crate::value::format_double(sc).into_bytes());
                    }
                }
                _ => return Err(crate::value::WRONGTYPE.into()),
            }
            Ok(items)
        })
        .await;
    match r {
        Ok(items) => {
            resp::array_header(out, 2);
            resp::bulk(out, b"0");
            resp::array_header(out, items.len());
            for it in &items {
                resp::bulk(out, it);
            }
        }
        Err(e) => resp::error(out, &e),
    }
}
