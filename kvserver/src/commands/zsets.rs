//! Sorted-set commands (as Redis' `t_zset.c`): `ZADD` (`NX`/`XX`/`GT`/`LT`/`CH`/`INCR`),
//! `ZINCRBY`, `ZREM`, `ZPOPMIN`, `ZPOPMAX`, `ZRANGE` (indexes, `BYSCORE`, `REV`, `LIMIT`,
//! `WITHSCORES`), `ZSCORE`, `ZCARD`. Scores print as Redis prints doubles
//! ([`crate::value::format_double`]).

use std::sync::Arc;

use super::{index_range, parse_count, reply_err, reply_int, scored_array, unknown, Flow, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::Shard;
use crate::value::{parse_double, Mutation, Value, ZSet};

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NAN: &str = "ERR resulting score is not a number (NaN)";

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
        b"ZADD" => zadd(shared, args, out, seq).await,
        b"ZINCRBY" => {
            let Some(incr) = parse_double(&args[2]) else {
                resp::error(out, NOT_FLOAT);
                return Flow::Continue;
            };
            let opts = AddOpts {
                incr: true,
                ..Default::default()
            };
            let r = store
                .mutate(&args[1], seq, |v| {
                    let z = v.map(Value::zset).transpose()?;
                    add(z, opts, vec![(incr, args[3].clone())])
                })
                .await;
            match r {
                Ok((_, Some(score))) => resp::double(out, score),
                Ok((_, None)) => resp::null(out),
                Err(e) => resp::error(out, &e),
            }
        }
        b"ZREM" => {
            let r = store
                .mutate(&args[1], seq, |v| {
                    let Some(z) = v.map(Value::zset).transpose()? else {
                        return Ok((None, 0));
                    };
                    let mut seen = std::collections::HashSet::new();
                    let gone: Vec<Vec<u8>> = args[2..]
                        .iter()
                        .filter(|m| z.score(m).is_some() && seen.insert(&m[..]))
                        .cloned()
                        .collect();
                    let n = gone.len() as i64;
                    Ok(((n > 0).then_some(Mutation::ZRem(gone)), n))
                })
                .await;
            reply_int(out, r)
        }
        b"ZPOPMIN" | b"ZPOPMAX" => {
            if args.len() > 3 {
                resp::error(out, SYNTAX);
                return Flow::Continue;
            }
            let counted = args.len() == 3;
            let count = match args.get(2).map(|a| parse_count(a)).transpose() {
                Ok(c) => c.unwrap_or(1),
                Err(e) => {
                    resp::error(out, &e);
                    return Flow::Continue;
                }
            };
            let max = name == b"ZPOPMAX";
            let r = store
                .mutate(&args[1], seq, |v| {
                    let Some(z) = v.map(Value::zset).transpose()? else {
                        return Ok((None, Vec::new()));
                    };
                    let n = count.min(z.len() as u64) as usize;
                    let take = |it: &mut dyn Iterator<Item = (&[u8], f64)>| {
                        it.take(n).map(|(m, s)| (m.to_vec(), s)).collect::<Vec<_>>()
                    };
                    let popped = if max {
                        take(&mut z.iter().rev())
                    } else {
                        take(&mut z.iter())
                    };
                    let gone = popped.iter().map(|(m, _)| m.clone()).collect::<Vec<_>>();
                    Ok(((n > 0).then_some(Mutation::ZRem(gone)), popped))
                })
                .await;
            match r {
                // Without a count, one flat [member, score] (or nothing) in both protocols.
                Ok(popped) if !counted => {
                    resp::array_header(out, 2 * popped.len());
                    for (m, s) in &popped {
                        resp::bulk(out, m);
                        resp::double(out, *s);
                    }
                }
                Ok(popped) => scored_array(out, popped.iter().map(|(m, s)| (&m[..], *s))),
                Err(e) => resp::error(out, &e),
            }
        }
        b"ZRANGE" => zrange(shared, args, out).await,
        b"ZSCORE" => {
            let r = store
                .read(&args[1], |v| {
                    let z = v.map(Value::zset).transpose()?;
                    match z.and_then(|z| z.score(&args[2])) {
                        Some(s) => resp::double(out, s),
                        None => resp::null(out),
                    }
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        b"ZCARD" => {
            let r = store
                .read(&args[1], |v| {
                    Ok(v.map(Value::zset)
                        .transpose()?
                        .map_or(0, |z| z.len() as i64))
                })
                .await;
            reply_int(out, r)
        }
        _ => unknown(out, args),
    }
    Flow::Continue
}

#[derive(Clone, Copy, Default)]
struct AddOpts {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What `ZADD` changes in `z` (`None`: absent) for `pairs` (score, member), as Redis decides
/// it: the change (exact resulting scores, so that replay needs no arithmetic), the count to
/// reply (added, or with `CH` changed) and, with `INCR`, the member's new score (`None`: the
/// condition did not hold).
#[allow(clippy::type_complexity)]
fn add(
    z: Option<&ZSet>,
    o: AddOpts,
    pairs: Vec<(f64, Vec<u8>)>,
) -> Result<(Option<Mutation>, (i64, Option<f64>)), String> {
    let mut now: std::collections::HashMap<&[u8], f64> = std::collections::HashMap::new();
    let (mut added, mut changed) = (0, 0);
    let mut set: Vec<(f64, Vec<u8>)> = Vec::new();
    let mut last = None;
    for (score, member) in &pairs {
        let cur = match now.get(&member[..]) {
            Some(&s) => Some(s),
            None => z.and_then(|z| z.score(member)),
        };
        let mut new = *score;
        match cur {
            Some(cur) => {
                if o.nx {
                    last = None;
                    continue;
                }
                if o.incr {
                    new = cur + score;
                    if new.is_nan() {
                        return Err(NAN.into());
                    }
                }
                if (o.gt && new <= cur) || (o.lt && new >= cur) {
                    last = None;
                    continue;
                }
                last = Some(new);
                if new != cur {
                    changed += 1;
                    now.insert(member, new);
                    set.push((new, member.clone()));
                }
            }
            None => {
                if o.xx {
                    last = None;
                    continue;
                }
                added += 1;
                last = Some(new);
                now.insert(member, new);
                set.push((new, member.clone()));
            }
        }
    }
    let n = if o.ch { added + changed } else { added };
    let m = (!set.is_empty()).then_some(Mutation::ZAdd(set));
    Ok((m, (n, last)))
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`
async fn zadd<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let mut o = AddOpts::default();
    let mut i = 2;
    while i < args.len() {
        match &args[i].to_ascii_uppercase()[..] {
            b"NX" => o.nx = true,
            b"XX" => o.xx = true,
            b"GT" => o.gt = true,
            b"LT" => o.lt = true,
            b"CH" => o.ch = true,
            b"INCR" => o.incr = true,
            _ => break,
        }
        i += 1;
    }
    let rest = &args[i..];
    if rest.is_empty() || rest.len() % 2 != 0 {
        return resp::error(out, SYNTAX);
    }
    if o.nx && o.xx {
        return resp::error(
            out,
            "ERR XX and NX options at the same time are not compatible",
        );
    }
    if (o.nx && (o.gt || o.lt)) || (o.gt && o.lt) {
        return resp::error(
            out,
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        );
    }
    if o.incr && rest.len() > 2 {
        return resp::error(
            out,
            "ERR INCR option supports a single increment-element pair",
        );
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for p in rest.chunks(2) {
        let Some(score) = parse_double(&p[0]) else {
            return resp::error(out, NOT_FLOAT);
        };
        pairs.push((score, p[1].clone()));
    }
    let r = shared
        .store
        .mutate(&args[1], seq, |v| {
            let z = v.map(Value::zset).transpose()?;
            add(z, o, pairs)
        })
        .await;
    match r {
        Ok((_, Some(score))) if o.incr => resp::double(out, score),
        Ok(_) if o.incr => resp::null(out),
        Ok((n, _)) => resp::integer(out, n),
        Err(e) => resp::error(out, &e),
    }
}

/// A `BYSCORE` bound: `1.5`, `(1.5` (exclusive), `-inf`, `+inf`.
fn score_bound(a: &[u8]) -> Option<(f64, bool)> {
    match a.strip_prefix(b"(") {
        Some(rest) => parse_double(rest).map(|f| (f, true)),
        None => parse_double(a).map(|f| (f, false)),
    }
}

/// `ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES]`
async fn zrange<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let (mut byscore, mut rev, mut withscores) = (false, false, false);
    let mut limit: Option<(i64, i64)> = None;
    let mut i = 4;
    while i < args.len() {
        match &args[i].to_ascii_uppercase()[..] {
            b"BYSCORE" => byscore = true,
            b"REV" => rev = true,
            b"WITHSCORES" => withscores = true,
            b"LIMIT" if i + 2 < args.len() => {
                let (Some(off), Some(cnt)) = (parse_int(&args[i + 1]), parse_int(&args[i + 2]))
                else {
                    return resp::error(out, super::NOT_INT);
                };
                limit = Some((off, cnt));
                i += 2;
            }
            b"BYLEX" => {
                return resp::error(out, "ERR ZRANGE BYLEX is not supported by this server")
            }
            _ => return resp::error(out, SYNTAX),
        }
        i += 1;
    }
    if limit.is_some() && !byscore {
        return resp::error(
            out,
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    enum Range {
        Index(i64, i64),
        Score((f64, bool), (f64, bool)),
    }
    let range = if byscore {
        // With REV the first bound is the maximum.
        let (a, b) = if rev {
            (&args[3], &args[2])
        } else {
            (&args[2], &args[3])
        };
        match (score_bound(a), score_bound(b)) {
            (Some(lo), Some(hi)) => Range::Score(lo, hi),
            _ => return resp::error(out, "ERR min or max is not a float"),
        }
    } else {
        match (parse_int(&args[2]), parse_int(&args[3])) {
            (Some(a), Some(b)) => Range::Index(a, b),
            _ => return resp::error(out, super::NOT_INT),
        }
    };
    let r = shared
        .store
        .read(&args[1], |v| {
            let z = v.map(Value::zset).transpose()?;
            let empty = ZSet::default();
            let z = z.unwrap_or(&empty);
            let picked: Vec<(&[u8], f64)> = match range {
                Range::Index(a, b) => match index_range(a, b, z.len()) {
                    Some((a, b)) if rev => z.iter().rev().skip(a).take(b - a + 1).collect(),
                    Some((a, b)) => z.iter().skip(a).take(b - a + 1).collect(),
                    None => Vec::new(),
                },
                Range::Score((lo, lo_ex), (hi, hi_ex)) => {
                    let mut all: Vec<_> = z.range_by_score(lo, lo_ex, hi, hi_ex).collect();
                    if rev {
                        all.reverse();
                    }
                    match limit {
                        Some((off, _)) if off < 0 => Vec::new(),
                        Some((off, cnt)) => {
                            let cnt = if cnt < 0 { usize::MAX } else { cnt as usize };
                            all.into_iter().skip(off as usize).take(cnt).collect()
                        }
                        None => all,
                    }
                }
            };
            if withscores {
                scored_array(out, picked.into_iter());
            } else {
                resp::array_header(out, picked.len());
                for (m, _) in picked {
                    resp::bulk(out, m);
                }
            }
            Ok(())
        })
        .await;
    reply_err(out, r)
}
