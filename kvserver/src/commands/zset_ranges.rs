//! Sorted-set commands on ranges and ranks (as Redis' `t_zset.c`): `ZRANGE` (by index,
//! `BYSCORE`, `BYLEX`, `REV`, `LIMIT`, `WITHSCORES`), `ZRANGESTORE`, `ZRANGEBYSCORE`,
//! `ZREVRANGEBYSCORE`, `ZRANGEBYLEX`, `ZREVRANGEBYLEX`, `ZREVRANGE`, `ZCOUNT`, `ZLEXCOUNT`,
//! `ZRANK`, `ZREVRANK`, `ZREMRANGEBYRANK`, `ZREMRANGEBYSCORE`, `ZREMRANGEBYLEX`, `ZMSCORE`,
//! `ZRANDMEMBER`.

use std::sync::Arc;

use rand::seq::IteratorRandom;
use rand::Rng;

use super::{index_range, read_as, reply_err, reply_int, scored_array, Flow, NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{Change, Entry, Shard};
use crate::value::{parse_range_double, Mutation, Value, ZSet};

const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";

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
        b"ZRANGE" => return zrange(shared, args, 1, Kind::Auto, None, None, out).await,
        b"ZRANGESTORE" => return zrange(shared, args, 2, Kind::Auto, None, Some(seq), out).await,
        b"ZREVRANGE" => return zrange(shared, args, 1, Kind::Rank, Some(true), None, out).await,
        b"ZRANGEBYSCORE" => {
            return zrange(shared, args, 1, Kind::Score, Some(false), None, out).await
        }
        b"ZREVRANGEBYSCORE" => {
            return zrange(shared, args, 1, Kind::Score, Some(true), None, out).await
        }
        b"ZRANGEBYLEX" => return zrange(shared, args, 1, Kind::Lex, Some(false), None, out).await,
        b"ZREVRANGEBYLEX" => {
            return zrange(shared, args, 1, Kind::Lex, Some(true), None, out).await
        }
        b"ZCOUNT" | b"ZLEXCOUNT" => {
            let range = if name == b"ZCOUNT" {
                Range::score(&args[2], &args[3])
            } else {
                Range::lex(&args[2], &args[3])
            };
            let range = match range {
                Ok(r) => r,
                Err(e) => return error(out, e),
            };
            let r = store
                .read(&args[1], |v| {
                    let z = v.map(Value::zset).transpose()?;
                    Ok(z.map_or(0, |z| range.select(z, false).len() as i64))
                })
                .await;
            reply_int(out, r)
        }
        b"ZRANK" | b"ZREVRANK" => {
            let r = store
                .read(&args[1], |v| {
                    let z = v.map(Value::zset).transpose()?;
                    let rank = z.and_then(|z| {
                        let s = z.score(&args[2])?;
                        let below = z.iter().take_while(|&(m, ms)| (ms, m) != (s, &args[2][..]));
                        let below = below.count();
                        Some(if name == b"ZRANK" {
                            below
                        } else {
                            z.len() - 1 - below
                        })
                    });
                    match rank {
                        Some(r) => resp::integer(out, r as i64),
                        None => resp::null(out),
                    }
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        b"ZREMRANGEBYRANK" | b"ZREMRANGEBYSCORE" | b"ZREMRANGEBYLEX" => {
            let range = match name {
                b"ZREMRANGEBYRANK" => match (parse_int(&args[2]), parse_int(&args[3])) {
                    (Some(a), Some(b)) => Ok(Range::Rank(a, b)),
                    _ => Err(NOT_INT),
                },
                b"ZREMRANGEBYSCORE" => Range::score(&args[2], &args[3]),
                _ => Range::lex(&args[2], &args[3]),
            };
            let range = match range {
                Ok(r) => r,
                Err(e) => return error(out, e),
            };
            let r = store
                .mutate(&args[1], seq, |v| {
                    let Some(z) = v.map(Value::zset).transpose()? else {
                        return Ok((None, 0));
                    };
                    let gone: Vec<Vec<u8>> = range
                        .select(z, false)
                        .into_iter()
                        .map(|(m, _)| m.to_vec())
                        .collect();
                    let n = gone.len() as i64;
                    Ok(((n > 0).then_some(Mutation::ZRem(gone)), n))
                })
                .await;
            reply_int(out, r)
        }
        b"ZMSCORE" => {
            read_as(shared, &args[1], Value::zset, out, |z, out| {
                resp::array_header(out, args.len() - 2);
                for m in &args[2..] {
                    match z.and_then(|z| z.score(m)) {
                        Some(s) => resp::double(out, s),
                        None => resp::null(out),
                    }
                }
            })
            .await
        }
        b"ZRANDMEMBER" => zrandmember(shared, args, out).await,
        _ => return super::zset_ops::execute(shared, name, args, out, seq).await,
    }
    Flow::Continue
}

fn error(out: &mut Vec<u8>, e: &str) -> Flow {
    resp::error(out, e);
    Flow::Continue
}

/// What a range is over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `ZRANGE`/`ZRANGESTORE`: by rank unless `BYSCORE`/`BYLEX` says otherwise.
    Auto,
    Rank,
    Score,
    Lex,
}

/// A lexicographic bound: `-`, `+`, `[m` (inclusive), `(m` (exclusive).
#[derive(Clone)]
enum Lex {
    Min,
    Max,
    At(Vec<u8>, bool),
}

impl Lex {
    fn parse(a: &[u8]) -> Option<Lex> {
        match a.first()? {
            b'-' if a.len() == 1 => Some(Lex::Min),
            b'+' if a.len() == 1 => Some(Lex::Max),
            b'[' => Some(Lex::At(a[1..].to_vec(), false)),
            b'(' => Some(Lex::At(a[1..].to_vec(), true)),
            _ => None,
        }
    }
    /// Whether `m` is at or above this bound taken as a minimum.
    fn below(&self, m: &[u8]) -> bool {
        match self {
            Lex::Min => true,
            Lex::Max => false,
            Lex::At(b, ex) => m > &b[..] || (!ex && m == &b[..]),
        }
    }
    /// Whether `m` is at or below this bound taken as a maximum.
    fn above(&self, m: &[u8]) -> bool {
        match self {
            Lex::Min => false,
            Lex::Max => true,
            Lex::At(b, ex) => m < &b[..] || (!ex && m == &b[..]),
        }
    }
}

/// A range of a sorted set, bounds in ascending order.
enum Range {
    Rank(i64, i64),
    Score((f64, bool), (f64, bool)),
    Lex(Lex, Lex),
}

/// A `BYSCORE` bound: `1.5`, `(1.5` (exclusive), `-inf`, `+inf` (read as Redis reads it:
/// [`parse_range_double`]).
pub(super) fn score_bound(a: &[u8]) -> Option<(f64, bool)> {
    match a.strip_prefix(b"(") {
        Some(rest) => parse_range_double(rest).map(|f| (f, true)),
        None => parse_range_double(a).map(|f| (f, false)),
    }
}

impl Range {
    fn score(min: &[u8], max: &[u8]) -> Result<Range, &'static str> {
        match (score_bound(min), score_bound(max)) {
            (Some(lo), Some(hi)) => Ok(Range::Score(lo, hi)),
            _ => Err(NOT_FLOAT_RANGE),
        }
    }
    fn lex(min: &[u8], max: &[u8]) -> Result<Range, &'static str> {
        match (Lex::parse(min), Lex::parse(max)) {
            (Some(lo), Some(hi)) => Ok(Range::Lex(lo, hi)),
            _ => Err(NOT_LEX_RANGE),
        }
    }

    /// The members in the range, ascending (`rev`: descending; a rank range then counts
    /// from the highest score).
    fn select<'z>(&self, z: &'z ZSet, rev: bool) -> Vec<(&'z [u8], f64)> {
        match self {
            Range::Rank(a, b) => match index_range(*a, *b, z.len()) {
                Some((a, b)) if rev => z.iter().rev().skip(a).take(b - a + 1).collect(),
                Some((a, b)) => z.iter().skip(a).take(b - a + 1).collect(),
                None => Vec::new(),
            },
            Range::Score((lo, lo_ex), (hi, hi_ex)) => {
                let mut all: Vec<_> = z.range_by_score(*lo, *lo_ex, *hi, *hi_ex).collect();
                if rev {
                    all.reverse();
                }
                all
            }
            // As Redis walks it: from the first member past the minimum while below the
            // maximum (members of one score are in lexicographic order).
            Range::Lex(lo, hi) if rev => z
                .iter()
                .rev()
                .skip_while(|(m, _)| !hi.above(m))
                .take_while(|(m, _)| lo.below(m))
                .collect(),
            Range::Lex(lo, hi) => z
                .iter()
                .skip_while(|(m, _)| !lo.below(m))
                .take_while(|(m, _)| hi.above(m))
                .collect(),
        }
    }
}

/// Redis' `zrangeGenericCommand`: `ZRANGE`, `ZRANGESTORE` (`store`: the destination is
/// `args[1]`, the source `args[2]`) and the older forms (`kind` and `rev` fixed by the name).
#[allow(clippy::too_many_arguments)]
async fn zrange<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    src_at: usize,
    mut kind: Kind,
    fixed_rev: Option<bool>,
    store: Option<&mut u64>,
    out: &mut Vec<u8>,
) -> Flow {
    let mut rev = fixed_rev.unwrap_or(false);
    let (mut withscores, mut limit) = (false, None::<(i64, i64)>);
    let mut i = src_at + 3;
    while i < args.len() {
        let a = args[i].to_ascii_uppercase();
        match &a[..] {
            b"WITHSCORES" if store.is_none() => withscores = true,
            b"LIMIT" if i + 2 < args.len() => {
                match (parse_int(&args[i + 1]), parse_int(&args[i + 2])) {
                    (Some(off), Some(cnt)) => limit = Some((off, cnt)),
                    _ => return error(out, NOT_INT),
                }
                i += 2;
            }
            b"REV" if fixed_rev.is_none() => rev = true,
            b"BYLEX" if kind == Kind::Auto => kind = Kind::Lex,
            b"BYSCORE" if kind == Kind::Auto => kind = Kind::Score,
            _ => return error(out, SYNTAX),
        }
        i += 1;
    }
    if kind == Kind::Auto {
        kind = Kind::Rank;
    }
    if limit.is_some() && kind == Kind::Rank {
        return error(
            out,
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && kind == Kind::Lex {
        return error(
            out,
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        );
    }
    let (mut lo, mut hi) = (&args[src_at + 1], &args[src_at + 2]);
    if rev && kind != Kind::Rank {
        (lo, hi) = (hi, lo); // given as max, min
    }
    let range = match kind {
        Kind::Score => Range::score(lo, hi),
        Kind::Lex => Range::lex(lo, hi),
        _ => match (parse_int(lo), parse_int(hi)) {
            (Some(a), Some(b)) => Ok(Range::Rank(a, b)),
            _ => Err(NOT_INT),
        },
    };
    let range = match range {
        Ok(r) => r,
        Err(e) => return error(out, e),
    };
    let pick = |z: &ZSet| -> Vec<(Vec<u8>, f64)> {
        let all = range.select(z, rev);
        let picked: Box<dyn Iterator<Item = (&[u8], f64)>> = match limit {
            Some((off, _)) if off < 0 => Box::new(std::iter::empty()),
            Some((off, cnt)) => {
                let cnt = if cnt < 0 { usize::MAX } else { cnt as usize };
                Box::new(all.into_iter().skip(off as usize).take(cnt))
            }
            None => Box::new(all.into_iter()),
        };
        picked.map(|(m, s)| (m.to_vec(), s)).collect()
    };
    let src = &args[src_at];
    let Some(seq) = store else {
        let r = shared
            .store
            .read(src, |v| {
                let picked = match v.map(Value::zset).transpose()? {
                    Some(z) => pick(z),
                    None => Vec::new(),
                };
                if withscores {
                    scored_array(out, picked.iter().map(|(m, s)| (&m[..], *s)));
                } else {
                    super::bulk_array(out, picked.iter().map(|(m, _)| &m[..]));
                }
                Ok(())
            })
            .await;
        reply_err(out, r);
        return Flow::Continue;
    };
    // ZRANGESTORE: read the source and replace the destination in one critical section.
    let dst = &args[1];
    let st = &shared.store;
    let shards = st.shards_of([&src[..], &dst[..]].into_iter());
    let r = st
        .transaction(&shards, false, async {
            let picked = st
                .read(src, |v| {
                    Ok::<_, String>(v.map(Value::zset).transpose()?.map(pick))
                })
                .await?
                .unwrap_or_default();
            let n = picked.len() as i64;
            let mut inner = 0;
            store_zset(st, dst, picked, &mut inner).await?;
            Ok::<_, String>(n)
        })
        .await;
    reply_int(out, super::settle(seq, r));
    Flow::Continue
}

/// Replaces `dst` with a sorted set of `members` (deletes it if there are none): the
/// `*STORE` commands' write, logged as the whole new value.
pub(super) async fn store_zset<L: ShardLock<Shard>>(
    st: &crate::store::Store<L>,
    dst: &[u8],
    members: Vec<(Vec<u8>, f64)>,
    seq: &mut u64,
) -> Result<(), String> {
    st.update(dst, seq, |_, _| {
        if members.is_empty() {
            return Ok((Change::Del, ()));
        }
        let mut z = ZSet::default();
        for (m, s) in members {
            z.insert(m, s);
        }
        Ok((
            Change::Put(Entry {
                value: Value::ZSet(Box::new(z)),
                expire_at: 0,
            }),
            (),
        ))
    })
    .await
}

/// A `count` of `ZRANDMEMBER`/`HRANDFIELD` (`pairs`: with `WITHSCORES`/`WITHVALUES`, whose
/// replies are twice as long), as Redis bounds it.
pub(super) fn parse_rand_count(a: &[u8], pairs: bool) -> Result<i64, String> {
    match parse_int(a) {
        Some(i64::MIN) => Err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
                .into(),
        ),
        Some(n) if pairs && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&n) => {
            Err("ERR value is out of range".into())
        }
        Some(n) => Ok(n),
        None => Err(NOT_INT.into()),
    }
}

/// Indexes into `0..len` for a random pick of `count` (negative: that many, repeats
/// allowed; positive: distinct, at most `len`), as `SRANDMEMBER`, `ZRANDMEMBER` and
/// `HRANDFIELD` pick.
pub(super) fn random_picks(len: usize, count: i64) -> Vec<usize> {
    let mut rng = rand::thread_rng();
    if len == 0 {
        return Vec::new();
    }
    if count < 0 {
        (0..count.unsigned_abs())
            .map(|_| rng.gen_range(0..len))
            .collect()
    } else {
        let n = (count as u64).min(len as u64) as usize;
        let mut picks = (0..len).choose_multiple(&mut rng, n);
        if n < len {
            picks.sort_unstable(); // any order; a stable one for small sets
        }
        picks
    }
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`
async fn zrandmember<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let mut count = None;
    let mut withscores = false;
    if args.len() >= 3 {
        let with = args.len() == 4;
        match parse_rand_count(&args[2], with) {
            Ok(c) => count = Some(c),
            Err(e) => return resp::error(out, &e),
        }
        if args.len() > 4 || (with && !args[3].eq_ignore_ascii_case(b"WITHSCORES")) {
            return resp::error(out, SYNTAX);
        }
        withscores = with;
    }
    let r = shared
        .store
        .read(&args[1], |v| {
            let z = v.map(Value::zset).transpose()?;
            let Some(count) = count else {
                let m = z.and_then(|z| z.iter().nth(rand::thread_rng().gen_range(0..z.len())));
                resp::opt_bulk(out, m.map(|(m, _)| m));
                return Ok(());
            };
            let Some(z) = z else {
                resp::array_header(out, 0);
                return Ok(());
            };
            let all: Vec<(&[u8], f64)> = z.iter().collect();
            let picks = random_picks(all.len(), count);
            if withscores {
                scored_array(out, picks.iter().map(|&i| all[i]));
            } else {
                super::bulk_array(out, picks.iter().map(|&i| all[i].0));
            }
            Ok(())
        })
        .await;
    reply_err(out, r)
}
