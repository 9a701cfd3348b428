//! Sorted-set commands (as Redis' `t_zset.c`): `ZADD` (`NX`/`XX`/`GT`/`LT`/`CH`/`INCR`),
//! `ZINCRBY`, `ZREM`, `ZPOPMIN`, `ZPOPMAX`, `ZMPOP`, `ZSCORE`, `ZCARD`, and the attempts of
//! `BZPOPMIN`, `BZPOPMAX`, `BZMPOP` (see `blocking.rs`); the ranges are in `zset_ranges.rs`,
//! the unions, intersections and differences in `zset_ops.rs`. Scores print as Redis prints
//! doubles ([`crate::value::format_double`]).

use std::sync::Arc;

use super::{parse_count, read_as, reply_int, scored_array, Flow, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, Args};
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
            let r = zpop(shared, &args[1], max, count, seq)
                .await
                .map(Option::unwrap_or_default);
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
        b"ZSCORE" => {
            read_as(shared, &args[1], Value::zset, out, |z, out| {
                match z.and_then(|z| z.score(&args[2])) {
                    Some(s) => resp::double(out, s),
                    None => resp::null(out),
                }
            })
            .await
        }
        b"ZCARD" => {
            read_as(shared, &args[1], Value::zset, out, |z, out| {
                resp::integer(out, z.map_or(0, |z| z.len() as i64))
            })
            .await
        }
        b"ZMPOP" => match super::blocking::parse_mpop(args, 1, true) {
            Ok((keys, min, count)) => {
                if !zmpop_attempt(shared, &keys, !min, count, out, seq).await {
                    resp::null_array(out);
                }
            }
            Err(e) => resp::error(out, &e),
        },
        _ => return super::zset_ranges::execute(shared, name, args, out, seq).await,
    }
    Flow::Continue
}

/// Pops up to `count` members of `key` (`max`: the highest scores): `Ok(None)` if it holds
/// no sorted set (`WRONGTYPE` if it holds something else).
async fn zpop<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    key: &[u8],
    max: bool,
    count: u64,
    seq: &mut u64,
) -> Result<Option<Vec<(Vec<u8>, f64)>>, String> {
    shared
        .store
        .mutate(key, seq, |v| {
            let Some(z) = v.map(Value::zset).transpose()? else {
                return Ok((None, None));
            };
            let popped = pick_ends(z, max, count);
            let gone = popped.iter().map(|(m, _)| m.clone()).collect::<Vec<_>>();
            let m = (!gone.is_empty()).then_some(Mutation::ZRem(gone));
            Ok((m, Some(popped)))
        })
        .await
}

/// The `count` members with the lowest (`max`: highest) scores, in that order.
fn pick_ends(z: &ZSet, max: bool, count: u64) -> Vec<(Vec<u8>, f64)> {
    let n = count.min(z.len() as u64) as usize;
    let take = |it: &mut dyn Iterator<Item = (&[u8], f64)>| {
        it.take(n).map(|(m, s)| (m.to_vec(), s)).collect::<Vec<_>>()
    };
    if max {
        take(&mut z.iter().rev())
    } else {
        take(&mut z.iter())
    }
}

/// Flags the watchers of `key` (a served blocked command's write, made outside the dispatcher).
fn touched<L>(shared: &Shared<L>, key: &[u8]) {
    if shared.watches.any() {
        shared.watches.touch(std::iter::once(key));
    }
}

/// `BZPOPMIN`/`BZPOPMAX`'s attempt: the member of the first key that holds a sorted set,
/// replied as [key, member, score]; `false` if none does.
pub(super) async fn bzpop_attempt<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    keys: &[Vec<u8>],
    max: bool,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> bool {
    for k in keys {
        match zpop(shared, k, max, 1, seq).await {
            Err(e) => resp::error(out, &e),
            Ok(None) => continue,
            Ok(Some(popped)) => {
                touched(shared, k);
                resp::array_header(out, 3);
                resp::bulk(out, k);
                resp::bulk(out, &popped[0].0);
                resp::double(out, popped[0].1);
            }
        }
        return true;
    }
    false
}

/// `ZMPOP`'s (and `BZMPOP`'s) attempt: up to `count` members of the first key that holds a
/// sorted set, replied as [key, [[member, score], ...]]; `false` if none does.
pub(super) async fn zmpop_attempt<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    keys: &[Vec<u8>],
    max: bool,
    count: u64,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> bool {
    for k in keys {
        match zpop(shared, k, max, count, seq).await {
            Err(e) => resp::error(out, &e),
            Ok(None) => continue,
            Ok(Some(popped)) => {
                touched(shared, k);
                resp::array_header(out, 2);
                resp::bulk(out, k);
                resp::array_header(out, popped.len());
                for (m, s) in &popped {
                    resp::array_header(out, 2);
                    resp::bulk(out, m);
                    resp::double(out, *s);
                }
            }
        }
        return true;
    }
    false
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
