//! Commands on keys whatever their type (Redis' `db.c`/`expire.c`): `DEL`, `EXISTS`, `TYPE`,
//! `RENAME`, `KEYS`, `SCAN`, `RANDOMKEY`, expiry and TTLs.

use std::sync::Arc;

use super::{reply_int, unknown, Flow, NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{now_ms, ExpireCond, Shard};

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: Args,
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
        b"SCAN" => scan(shared, &args, out).await,
        b"RANDOMKEY" => resp::opt_bulk(out, store.random_key().await.as_deref()),
        b"EXPIRE" | b"PEXPIRE" | b"EXPIREAT" | b"PEXPIREAT" => {
            expire(shared, name, &args, out, seq).await
        }
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
        _ => unknown(out, &args),
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
    let Some(cursor) = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
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
