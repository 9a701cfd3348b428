//! Set commands over several keys (as Redis' `t_set.c`): `SINTER`, `SUNION`, `SDIFF`, their
//! `*STORE` forms, `SINTERCARD`, `SMOVE`. The keys are read (and a destination written) in one
//! critical section over their shards, taken in index order.

use std::collections::HashSet;
use std::sync::Arc;

use super::{reply_int, unknown, Flow, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{Change, Entry, Shard};
use crate::value::{Mutation, Value};

type Set = HashSet<Vec<u8>>;

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    match name {
        b"SINTER" | b"SUNION" | b"SDIFF" => {
            combine(shared, &name[1..], &args[1..], None, out, seq).await
        }
        b"SINTERSTORE" | b"SUNIONSTORE" | b"SDIFFSTORE" => {
            let op = &name[1..name.len() - 5];
            combine(shared, op, &args[2..], Some(&args[1]), out, seq).await
        }
        b"SINTERCARD" => sintercard(shared, args, out).await,
        b"SMOVE" => smove(shared, args, out, seq).await,
        _ => unknown(out, args),
    }
    Flow::Continue
}

/// The sets at `keys` (`None`: absent); `WRONGTYPE` if one holds something else.
async fn read_sets<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Set>>, String> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        let s = shared
            .store
            .read(k, |v| v.map(Value::set).transpose().map(|s| s.cloned()))
            .await?;
        sets.push(s);
    }
    Ok(sets)
}

fn compute(op: &[u8], sets: Vec<Option<Set>>) -> Set {
    let mut it = sets.into_iter();
    match op {
        b"INTER" => {
            let mut all: Vec<Set> = Vec::new();
            for s in it {
                match s {
                    Some(s) => all.push(s),
                    None => return Set::new(),
                }
            }
            all.sort_by_key(|s| s.len());
            let Some((first, rest)) = all.split_first() else {
                return Set::new();
            };
            first
                .iter()
                .filter(|m| rest.iter().all(|s| s.contains(*m)))
                .cloned()
                .collect()
        }
        b"UNION" => it.flatten().flatten().collect(),
        _ => {
            let mut first = it.next().flatten().unwrap_or_default();
            for s in it.flatten() {
                if first.is_empty() {
                    break;
                }
                first.retain(|m| !s.contains(m));
            }
            first
        }
    }
}

/// `SINTER`/`SUNION`/`SDIFF key ...`, or with `dst` their `*STORE` forms.
async fn combine<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    op: &[u8],
    keys: &[Vec<u8>],
    dst: Option<&Vec<u8>>,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let st = &shared.store;
    let involved = keys.iter().chain(dst).map(|k| &k[..]);
    let shards = st.shards_of(involved);
    let r = st
        .transaction(&shards, false, async {
            let res = compute(op, read_sets(shared, keys).await?);
            if let Some(dst) = dst {
                let n = res.len();
                let mut inner = 0;
                st.update(dst, &mut inner, |_, _| {
                    if res.is_empty() {
                        return Ok((Change::Del, ()));
                    }
                    let e = Entry {
                        value: Value::Set(res),
                        expire_at: 0,
                    };
                    Ok((Change::Put(e), ()))
                })
                .await?;
                return Ok::<_, String>((Set::new(), n));
            }
            Ok((res, 0))
        })
        .await;
    match super::settle(seq, r) {
        Ok((res, n)) => {
            if dst.is_some() {
                resp::integer(out, n as i64);
            } else {
                resp::set_header(out, res.len());
                res.iter().for_each(|m| resp::bulk(out, m));
            }
        }
        Err(e) => resp::error(out, &e),
    }
}

/// `SINTERCARD numkeys key ... [LIMIT limit]`
async fn sintercard<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let n = match parse_int(&args[1]) {
        Some(n) if n > 0 => n as u64,
        _ => return resp::error(out, "ERR numkeys should be greater than 0"),
    };
    if n > (args.len() - 2) as u64 {
        return resp::error(
            out,
            "ERR Number of keys can't be greater than number of args",
        );
    }
    let n = n as usize;
    let mut limit = 0u64;
    let mut j = 2 + n;
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"LIMIT") && j + 1 < args.len() {
            limit = match parse_int(&args[j + 1]) {
                Some(l) if l >= 0 => l as u64,
                _ => return resp::error(out, "ERR LIMIT can't be negative"),
            };
            j += 2;
        } else {
            return resp::error(out, SYNTAX);
        }
    }
    let keys = &args[2..2 + n];
    let st = &shared.store;
    let shards = st.shards_of(keys.iter().map(|k| &k[..]));
    let r = st
        .transaction(&shards, false, async {
            Ok::<_, String>(compute(b"INTER", read_sets(shared, keys).await?).len())
        })
        .await;
    match r {
        Ok((Ok(c), _)) => {
            let c = c as u64;
            resp::integer(out, if limit == 0 { c } else { c.min(limit) } as i64)
        }
        Ok((Err(e), _)) | Err(e) => resp::error(out, &e),
    }
}

/// `SMOVE source destination member` (it flags the watchers of the keys it changes itself)
async fn smove<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    let st = &shared.store;
    let shards = st.shards_of([&src[..], &dst[..]].into_iter());
    let r = st
        .transaction(&shards, false, async {
            let has = st
                .read(src, |v| {
                    Ok::<_, String>(v.map(Value::set).transpose()?.map(|s| s.contains(member)))
                })
                .await?;
            let Some(has) = has else {
                return Ok(0);
            };
            let in_dst = st
                .read(dst, |v| {
                    Ok::<_, String>(
                        v.map(Value::set)
                            .transpose()?
                            .is_some_and(|s| s.contains(member)),
                    )
                })
                .await?;
            if src == dst || !has {
                return Ok(has as i64);
            }
            let mut inner = 0;
            st.mutate(src, &mut inner, |_| {
                Ok((Some(Mutation::SRem(vec![member.clone()])), ()))
            })
            .await?;
            // As Redis: a destination that has the member already is not changed (nor its
            // watchers flagged).
            let mut changed: Vec<&[u8]> = vec![src];
            if !in_dst {
                st.mutate(dst, &mut inner, |_| {
                    Ok((Some(Mutation::SAdd(vec![member.clone()])), ()))
                })
                .await?;
                changed.push(dst);
            }
            if shared.watches.any() {
                shared.watches.touch(changed.into_iter());
            }
            Ok(1)
        })
        .await;
    reply_int(out, super::settle(seq, r));
}
