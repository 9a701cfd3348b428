//! String commands (Redis' `t_string.c`): `GET`, `SET` and its variants, `MGET`/`MSET`,
//! ranges, counters.

use std::sync::Arc;

use super::{reply_int, reply_ok, unknown, wrong_args, Flow, NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{now_ms, Change, Entry, Expiry, SetOpts, Shard};
use crate::value::Value;

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let store = &shared.store;
    let max_len = shared.config.limits.max_bulk_len as u64;
    const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    match name {
        b"GET" => {
            if let Err(e) = store.get(&args[1], |v| resp::opt_bulk(out, v)).await {
                resp::error(out, &e)
            }
        }
        b"SET" => set(shared, args, out, seq).await,
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
                .get_many(&args[1..], |_, v| {
                    resp::opt_bulk(out, v.and_then(|v| v.bytes().ok()))
                })
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
        b"STRLEN" => {
            let n = store
                .get(&args[1], |v| v.map_or(0, |v| v.len() as i64))
                .await;
            reply_int(out, n)
        }
        b"GETRANGE" => {
            let (Some(start), Some(end)) = (parse_int(&args[2]), parse_int(&args[3])) else {
                resp::error(out, NOT_INT);
                return Flow::Continue;
            };
            let r = store
                .get(&args[1], |v| {
                    let v = v.unwrap_or(b"");
                    resp::bulk(out, getrange(v, start, end))
                })
                .await;
            if let Err(e) = r {
                resp::error(out, &e)
            }
        }
        b"APPEND" => {
            let add = &args[2];
            let r = store
                .update(&args[1], seq, |e, _| match e {
                    None => Ok((
                        Change::Put(Entry {
                            value: Value::Str(add.clone()),
                            expire_at: 0,
                        }),
                        add.len() as i64,
                    )),
                    Some(e) => {
                        let old = e.value.bytes()?;
                        if old.len() as u64 + add.len() as u64 > max_len {
                            return Err(TOO_BIG.into());
                        }
                        let mut value = Vec::with_capacity(old.len() + add.len());
                        value.extend_from_slice(old);
                        value.extend_from_slice(add);
                        let n = value.len() as i64;
                        Ok((
                            Change::Put(Entry {
                                value: Value::Str(value),
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
                return Flow::Continue;
            };
            if offset < 0 {
                resp::error(out, "ERR offset is out of range");
                return Flow::Continue;
            }
            let part = &args[3];
            let r = store
                .update(&args[1], seq, |e, _| {
                    let old = e.map(|e| e.value.bytes()).transpose()?;
                    let old_len = old.map_or(0, |v| v.len());
                    if part.is_empty() {
                        return Ok((Change::Keep, old_len as i64));
                    }
                    let end = (offset as u64).checked_add(part.len() as u64);
                    let end = match end {
                        Some(end) if end <= max_len => end as usize,
                        _ => return Err(TOO_BIG.into()),
                    };
                    let mut value = old.map_or_else(Vec::new, <[u8]>::to_vec);
                    if value.len() < end {
                        value.resize(end, 0);
                    }
                    value[offset as usize..end].copy_from_slice(part);
                    let n = value.len() as i64;
                    Ok((
                        Change::Put(Entry {
                            value: Value::Str(value),
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
                return Flow::Continue;
            };
            let at = expire_at(n, name == b"SETEX", true, now_ms());
            let Some(at) = at else {
                resp::error(
                    out,
                    &format!("ERR invalid expire time in '{lname}' command"),
                );
                return Flow::Continue;
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
                        Some(e) => (Change::Del, Some(e.value.bytes()?.to_vec())),
                        None => (Change::Keep, None),
                    })
                })
                .await;
            match r {
                Ok(v) => resp::opt_bulk(out, v.as_deref()),
                Err(e) => resp::error(out, &e),
            }
        }
        b"GETEX" => getex(shared, &args, out, seq).await,
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
                return Flow::Continue;
            };
            let r = store
                .update(&args[1], seq, |e, _| {
                    let (old, at) = match e {
                        Some(e) => (
                            ldouble::parse(e.value.bytes()?).ok_or(NOT_FLOAT)?,
                            e.expire_at,
                        ),
                        None => (ldouble::parse(b"0").expect("zero"), 0),
                    };
                    let (Parsed::Finite(old), Parsed::Finite(incr)) = (old, &incr) else {
                        return Err(NOT_FINITE.into());
                    };
                    let v = ldouble::add(old, *incr).ok_or(NOT_FINITE)?;
                    let text = ldouble::format(v).into_bytes();
                    Ok((
                        Change::Put(Entry {
                            value: Value::Str(text.clone()),
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
        _ => unknown(out, &args),
    }
    Flow::Continue
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
            let value = Some(e.value.bytes()?.to_vec());
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
