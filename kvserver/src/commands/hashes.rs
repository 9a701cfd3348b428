//! Hash commands (as Redis' `t_hash.c`): `HSET`, `HMSET`, `HSETNX`, `HGET`, `HMGET`,
//! `HGETALL`, `HDEL`, `HINCRBY`, `HINCRBYFLOAT`, `HLEN`, `HSTRLEN`, `HEXISTS`, `HKEYS`,
//! `HVALS`, `HRANDFIELD`.

use std::sync::Arc;

use super::{bulk_array, read_as, reply_err, reply_int, unknown, wrong_args, Flow, NOT_INT};
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
            read_as(shared, &args[1], Value::hash, out, |h, out| {
                let item = h.and_then(|h| h.get(&args[2]));
                if name == b"HGET" {
                    resp::opt_bulk(out, item.map(|i| &i[..]));
                } else {
                    resp::integer(out, item.is_some() as i64);
                }
            })
            .await
        }
        b"HMGET" => {
            read_as(shared, &args[1], Value::hash, out, |h, out| {
                resp::array_header(out, args.len() - 2);
                for f in &args[2..] {
                    resp::opt_bulk(out, h.and_then(|h| h.get(f)).map(|i| &i[..]));
                }
            })
            .await
        }
        b"HGETALL" | b"HKEYS" | b"HVALS" | b"HLEN" => {
            read_as(shared, &args[1], Value::hash, out, |h, out| {
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
            })
            .await
        }
        b"HSETNX" => {
            let (field, value) = (std::mem::take(&mut args[2]), std::mem::take(&mut args[3]));
            let r = store
                .mutate(&args[1], seq, |v| {
                    let h = v.map(Value::hash).transpose()?;
                    if h.is_some_and(|h| h.contains_key(&field)) {
                        return Ok((None, 0));
                    }
                    Ok((Some(Mutation::HSet(vec![(field, value)])), 1))
                })
                .await;
            reply_int(out, r)
        }
        b"HINCRBYFLOAT" => {
            use crate::ldouble::{self, Parsed};
            let incr = match ldouble::parse(&args[3]) {
                Some(Parsed::Finite(x)) => x,
                Some(_) => {
                    resp::error(out, "ERR value is NaN or Infinity");
                    return Flow::Continue;
                }
                None => {
                    resp::error(out, "ERR value is not a valid float");
                    return Flow::Continue;
                }
            };
            let field = std::mem::take(&mut args[2]);
            let r = store
                .mutate(&args[1], seq, |v| {
                    let h = v.map(Value::hash).transpose()?;
                    let old = match h.and_then(|h| h.get(&field)) {
                        Some(old) => match ldouble::parse(old) {
                            Some(Parsed::Finite(x)) => x,
                            Some(_) => {
                                return Err("ERR increment would produce NaN or Infinity".into())
                            }
                            None => return Err("ERR hash value is not a float".into()),
                        },
                        None => match ldouble::parse(b"0") {
                            Some(Parsed::Finite(z)) => z,
                            _ => unreachable!("zero parses"),
                        },
                    };
                    let new = ldouble::add(old, incr)
                        .ok_or("ERR increment would produce NaN or Infinity")?;
                    let text = ldouble::format(new).into_bytes();
                    Ok((Some(Mutation::HSet(vec![(field, text.clone())])), text))
                })
                .await;
            match r {
                Ok(text) => resp::bulk(out, &text),
                Err(e) => resp::error(out, &e),
            }
        }
        b"HSTRLEN" => {
            read_as(shared, &args[1], Value::hash, out, |h, out| {
                let len = h.and_then(|h| h.get(&args[2])).map_or(0, |v| v.len());
                resp::integer(out, len as i64)
            })
            .await
        }
        b"HRANDFIELD" => hrandfield(shared, args, out).await,
        _ => unknown(out, args),
    }
    Flow::Continue
}

/// `HRANDFIELD key [count [WITHVALUES]]`
async fn hrandfield<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let mut count = None;
    let mut withvalues = false;
    if args.len() >= 3 {
        let with = args.len() == 4;
        match super::zset_ranges::parse_rand_count(&args[2], with) {
            Ok(c) => count = Some(c),
            Err(e) => return resp::error(out, &e),
        }
        if args.len() > 4 || (with && !args[3].eq_ignore_ascii_case(b"WITHVALUES")) {
            return resp::error(out, super::SYNTAX);
        }
        withvalues = with;
    }
    let r = shared
        .store
        .read(&args[1], |v| {
            let h = v.map(Value::hash).transpose()?;
            let Some(count) = count else {
                let f = h.and_then(|h| {
                    let i = rand::Rng::gen_range(&mut rand::thread_rng(), 0..h.len());
                    h.get_index(i)
                });
                resp::opt_bulk(out, f.map(|(f, _)| &f[..]));
                return Ok(());
            };
            let Some(h) = h else {
                resp::array_header(out, 0);
                return Ok(());
            };
            let picks = super::zset_ranges::random_picks(h.len(), count);
            let pairs = withvalues && resp::protocol() == 3;
            let per = if withvalues && !pairs { 2 } else { 1 };
            resp::array_header(out, picks.len() * per);
            for i in picks {
                let (f, v) = h.get_index(i).expect("in range");
                if pairs {
                    resp::array_header(out, 2);
                }
                resp::bulk(out, f);
                if withvalues {
                    resp::bulk(out, v);
                }
            }
            Ok(())
        })
        .await;
    reply_err(out, r)
}
