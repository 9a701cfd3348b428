//! Hash commands (as Redis' `t_hash.c`): `HSET`, `HMSET`, `HGET`, `HMGET`, `HGETALL`, `HDEL`,
//! `HINCRBY`, `HLEN`, `HEXISTS`, `HKEYS`, `HVALS`.

use std::sync::Arc;

use super::{bulk_array, reply_err, reply_int, unknown, wrong_args, Flow, NOT_INT};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::Shard;
use crate::value::{Mutation, Value};

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
        b"HSET" | b"HMSET" => {
            if args.len() % 2 != 0 {
                wrong_args(out, &args[0]);
                return Flow::Continue;
            }
            let mut rest = args.drain(2..);
            let mut pairs = Vec::with_capacity(rest.len() / 2);
            while let (Some(f), Some(v)) = (rest.next(), rest.next()) {
                pairs.push((f, v));
            }
            drop(rest);
            let r = store
                .mutate(&args[1], seq, |v| {
                    let h = v.map(Value::hash).transpose()?;
                    let mut fresh = std::collections::HashSet::new();
                    for (f, _) in &pairs {
                        if !h.is_some_and(|h| h.contains_key(f)) {
                            fresh.insert(&f[..]);
                        }
                    }
                    let n = fresh.len() as i64;
                    Ok((Some(Mutation::HSet(pairs)), n))
                })
                .await;
            match r {
                Ok(_) if name == b"HMSET" => resp::ok(out),
                r => reply_int(out, r),
            }
        }
        b"HDEL" => {
            let fields: Vec<Vec<u8>> = args.drain(2..).collect();
            let r = store
                .mutate(&args[1], seq, |v| {
                    let Some(h) = v.map(Value::hash).transpose()? else {
                        return Ok((None, 0));
                    };
                    let mut seen = std::collections::HashSet::new();
                    let mut gone: Vec<Vec<u8>> = Vec::new();
                    for f in &fields {
                        if h.contains_key(f) && seen.insert(&f[..]) {
                            gone.push(f.clone());
                        }
                    }
                    let n = gone.len() as i64;
                    Ok(((n > 0).then_some(Mutation::HDel(gone)), n))
                })
                .await;
            reply_int(out, r)
        }
        b"HINCRBY" => {
            let Some(incr) = parse_int(&args[3]) else {
                resp::error(out, NOT_INT);
                return Flow::Continue;
            };
            let field = std::mem::take(&mut args[2]);
            let r = store
                .mutate(&args[1], seq, |v| {
                    let h = v.map(Value::hash).transpose()?;
                    let old = match h.and_then(|h| h.get(&field)) {
                        Some(old) => parse_int(old).ok_or("ERR hash value is not an integer")?,
                        None => 0,
                    };
                    let new = old
                        .checked_add(incr)
                        .ok_or("ERR increment or decrement would overflow")?;
                    let pairs = vec![(field, new.to_string().into_bytes())];
                    Ok((Some(Mutation::HSet(pairs)), new))
                })
                .await;
            reply_int(out, r)
        }
        b"HGET" | b"HEXISTS" => {
            let r = store
                .read(&args[1], |v| {
                    let item = v
                        .map(Value::hash)
                        .transpose()?
                        .and_then(|h| h.get(&args[2]));
                    if name == b"HGET" {
                        resp::opt_bulk(out, item.map(|i| &i[..]));
                    } else {
                        resp::integer(out, item.is_some() as i64);
                    }
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        b"HMGET" => {
            let r = store
                .read(&args[1], |v| {
                    let h = v.map(Value::hash).transpose()?;
                    resp::array_header(out, args.len() - 2);
                    for f in &args[2..] {
                        resp::opt_bulk(out, h.and_then(|h| h.get(f)).map(|i| &i[..]));
                    }
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        b"HGETALL" | b"HKEYS" | b"HVALS" | b"HLEN" => {
            let r = store
                .read(&args[1], |v| {
                    let h = v.map(Value::hash).transpose()?;
                    let empty = Default::default();
                    let h = h.unwrap_or(&empty);
                    match name {
                        b"HLEN" => resp::integer(out, h.len() as i64),
                        b"HKEYS" => bulk_array(out, h.keys().map(|k| &k[..])),
                        b"HVALS" => bulk_array(out, h.values().map(|k| &k[..])),
                        _ => {
                            resp::map_header(out, h.len());
                            for (k, v) in h {
                                resp::bulk(out, k);
                                resp::bulk(out, v);
                            }
                        }
                    }
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        _ => unknown(out, args),
    }
    Flow::Continue
}
