//! Unions, intersections and differences of sorted sets (as Redis'
//! `zunionInterDiffGenericCommand`): `ZUNION`, `ZINTER`, `ZDIFF`, `ZUNIONSTORE`,
//! `ZINTERSTORE`, `ZDIFFSTORE`, `ZINTERCARD`. Plain sets count as sorted sets whose scores
//! are 1. The keys are read (and a destination written) in one critical section over their
//! shards, taken in index order.

use std::collections::HashMap;
use std::sync::Arc;

use super::{scored_array, unknown, Flow, NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::Shard;
use crate::value::{parse_double, Value, WRONGTYPE};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(acc: &mut f64, v: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        Aggregate::Min => *acc = acc.min(v),
        Aggregate::Max => *acc = acc.max(v),
    }
}

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let (op, store) = match name {
        b"ZUNION" => (SetOp::Union, false),
        b"ZINTER" => (SetOp::Inter, false),
        b"ZDIFF" => (SetOp::Diff, false),
        b"ZUNIONSTORE" => (SetOp::Union, true),
        b"ZINTERSTORE" => (SetOp::Inter, true),
        b"ZDIFFSTORE" => (SetOp::Diff, true),
        b"ZINTERCARD" => (SetOp::Inter, false),
        _ => {
            unknown(out, args);
            return Flow::Continue;
        }
    };
    let card = name == b"ZINTERCARD";
    combine(shared, name, args, op, store, card, out, seq).await;
    Flow::Continue
}

/// The options after the keys.
struct Opts {
    weights: Vec<f64>,
    how: Aggregate,
    withscores: bool,
    limit: u64,
}

fn parse_opts(
    rest: &[Vec<u8>],
    n: usize,
    op: SetOp,
    store: bool,
    card: bool,
) -> Result<Opts, String> {
    let mut o = Opts {
        weights: vec![1.0; n],
        how: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = 0;
    while j < rest.len() {
        let left = rest.len() - j;
        let a = rest[j].to_ascii_uppercase();
        if op != SetOp::Diff && !card && left > n && a == b"WEIGHTS" {
            for i in 0..n {
                o.weights[i] =
                    parse_double(&rest[j + 1 + i]).ok_or("ERR weight value is not a float")?;
            }
            j += 1 + n;
        } else if op != SetOp::Diff && !card && left >= 2 && a == b"AGGREGATE" {
            o.how = match &rest[j + 1].to_ascii_uppercase()[..] {
                b"SUM" => Aggregate::Sum,
                b"MIN" => Aggregate::Min,
                b"MAX" => Aggregate::Max,
                _ => return Err(SYNTAX.into()),
            };
            j += 2;
        } else if !store && !card && a == b"WITHSCORES" {
            o.withscores = true;
            j += 1;
        } else if card && left >= 2 && a == b"LIMIT" {
            o.limit = match parse_int(&rest[j + 1]) {
                Some(l) if l >= 0 => l as u64,
                _ => return Err("ERR LIMIT can't be negative".into()),
            };
            j += 2;
        } else {
            return Err(SYNTAX.into());
        }
    }
    Ok(o)
}

/// A source's members and scores (a set's scores are 1).
type Members = Vec<(Vec<u8>, f64)>;

/// Computes the result of `op` over `srcs` (each `None` if its key is absent).
fn compute(srcs: Vec<Option<Members>>, o: &Opts, op: SetOp) -> Members {
    let mut srcs: Vec<(Members, f64)> = srcs
        .into_iter()
        .zip(&o.weights)
        .map(|(s, &w)| (s.unwrap_or_default(), w))
        .collect();
    let weighted = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    match op {
        SetOp::Union => {
            srcs.sort_by_key(|(s, _)| s.len());
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            let mut order = Vec::new();
            for (s, w) in srcs {
                for (m, sc) in s {
                    let v = weighted(sc, w);
                    match acc.get_mut(&m) {
                        Some(a) => aggregate(a, v, o.how),
                        None => {
                            order.push(m.clone());
                            acc.insert(m, v);
                        }
                    }
                }
            }
            order
                .into_iter()
                .map(|m| {
                    let s = acc[&m];
                    (m, s)
                })
                .collect()
        }
        SetOp::Inter => {
            srcs.sort_by_key(|(s, _)| s.len());
            let Some(((first, w0), others)) = srcs.split_first() else {
                return Vec::new();
            };
            let maps: Vec<(HashMap<&[u8], f64>, f64)> = others
                .iter()
                .map(|(s, w)| (s.iter().map(|(m, sc)| (&m[..], *sc)).collect(), *w))
                .collect();
            let mut res = Vec::new();
            'members: for (m, sc) in first {
                let mut score = weighted(*sc, *w0);
                for (map, w) in &maps {
                    match map.get(&m[..]) {
                        Some(s) => aggregate(&mut score, s * w, o.how),
                        None => continue 'members,
                    }
                }
                res.push((m.clone(), score));
            }
            res
        }
        SetOp::Diff => {
            let Some(((first, _), others)) = srcs.split_first() else {
                return Vec::new();
            };
            let gone: std::collections::HashSet<&[u8]> = others
                .iter()
                .flat_map(|(s, _)| s.iter().map(|(m, _)| &m[..]))
                .collect();
            first
                .iter()
                .filter(|(m, _)| !gone.contains(&m[..]))
                .cloned()
                .collect()
        }
    }
}

/// Reads a key as a source: a sorted set, or a set (scores 1).
pub(super) fn as_members(v: Option<&Value>) -> Result<Option<Members>, String> {
    match v {
        None => Ok(None),
        Some(Value::ZSet(z)) => Ok(Some(z.iter().map(|(m, s)| (m.to_vec(), s)).collect())),
        Some(Value::Set(s)) => Ok(Some(s.iter().map(|m| (m.clone(), 1.0)).collect())),
        Some(_) => Err(WRONGTYPE.into()),
    }
}

#[allow(clippy::too_many_arguments)]
async fn combine<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    name: &[u8],
    args: &Args,
    op: SetOp,
    store: bool,
    card: bool,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let at = if store { 2 } else { 1 };
    let n = match parse_int(&args[at]) {
        Some(n) if n < 1 => {
            return resp::error(
                out,
                &format!(
                    "ERR at least 1 input key is needed for '{}' command",
                    String::from_utf8_lossy(name).to_lowercase()
                ),
            )
        }
        Some(n) => n as u64,
        None => return resp::error(out, NOT_INT),
    };
    if n > (args.len() - at - 1) as u64 {
        return resp::error(out, SYNTAX);
    }
    let n = n as usize;
    let keys = &args[at + 1..at + 1 + n];
    // Redis reads (and type-checks) the keys before it parses the options.
    let opts = parse_opts(&args[at + 1 + n..], n, op, store, card);
    let st = &shared.store;
    let mut involved: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    if store {
        involved.push(&args[1]);
    }
    let shards = st.shards_of(involved.into_iter());
    let r = st
        .transaction(&shards, false, async {
            let mut srcs = Vec::with_capacity(n);
            for k in keys {
                srcs.push(st.read(k, as_members).await?);
            }
            let o = opts?;
            let res = compute(srcs, &o, op);
            if store {
                let count = res.len() as i64;
                let mut inner = 0;
                super::zset_ranges::store_zset(st, &args[1], res, &mut inner).await?;
                return Ok::<_, String>((Vec::new(), count, o));
            }
            Ok((res, 0, o))
        })
        .await;
    let (res, count, o) = match super::settle(seq, r) {
        Ok(v) => v,
        Err(e) => return resp::error(out, &e),
    };
    if store {
        return resp::integer(out, count);
    }
    if card {
        let c = res.len() as u64;
        return resp::integer(out, if o.limit == 0 { c } else { c.min(o.limit) } as i64);
    }
    // As a sorted set: by score, then member.
    let mut res = res;
    res.sort_by(|a, b| {
        let by_score = a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal);
        by_score.then_with(|| a.0.cmp(&b.0))
    });
    if o.withscores {
        scored_array(out, res.iter().map(|(m, s)| (&m[..], *s)));
    } else {
        super::bulk_array(out, res.iter().map(|(m, _)| &m[..]));
    }
}
