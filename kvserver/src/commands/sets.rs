//! Set commands (as Redis' `t_set.c`) on one key: `SADD`, `SREM`, `SPOP` (with a count),
//! `SMEMBERS`, `SISMEMBER`, `SMISMEMBER`, `SCARD`, `SRANDMEMBER`; those over several keys are
//! in `set_ops.rs`.

use std::sync::Arc;

use rand::seq::IteratorRandom;

use super::{parse_count, read_as, reply_err, reply_int, Flow, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, Args};
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
        b"SADD" | b"SREM" => {
            let members: Vec<Vec<u8>> = args.drain(2..).collect();
            let add = name == b"SADD";
            let r = store
                .mutate(&args[1], seq, |v| {
                    let s = v.map(Value::set).transpose()?;
                    let mut seen = std::collections::HashSet::new();
                    let mut picked: Vec<Vec<u8>> = Vec::new();
                    for m in &members {
                        let present = s.is_some_and(|s| s.contains(m));
                        if present != add && seen.insert(&m[..]) {
                            picked.push(m.clone());
                        }
                    }
                    let n = picked.len() as i64;
                    let m = match (n, add) {
                        (0, _) => None,
                        (_, true) => Some(Mutation::SAdd(picked)),
                        (_, false) => Some(Mutation::SRem(picked)),
                    };
                    Ok((m, n))
                })
                .await;
            reply_int(out, r)
        }
        b"SPOP" => {
            if args.len() > 3 {
                resp::error(out, SYNTAX);
                return Flow::Continue;
            }
            let count = match args.get(2).map(|a| parse_count(a)).transpose() {
                Ok(c) => c,
                Err(e) => {
                    resp::error(out, &e);
                    return Flow::Continue;
                }
            };
            // The members are chosen here and logged by name, so replay removes the same ones.
            let r = store
                .mutate(&args[1], seq, |v| {
                    let Some(s) = v.map(Value::set).transpose()? else {
                        return Ok((None, Vec::new()));
                    };
                    let n = count.unwrap_or(1).min(s.len() as u64) as usize;
                    let picked: Vec<Vec<u8>> = s
                        .iter()
                        .cloned()
                        .choose_multiple(&mut rand::thread_rng(), n);
                    let m = (!picked.is_empty()).then(|| Mutation::SRem(picked.clone()));
                    Ok((m, picked))
                })
                .await;
            match (r, count) {
                (Err(e), _) => resp::error(out, &e),
                (Ok(picked), None) => resp::opt_bulk(out, picked.first().map(|m| &m[..])),
                (Ok(picked), Some(_)) => {
                    resp::set_header(out, picked.len());
                    picked.iter().for_each(|m| resp::bulk(out, m));
                }
            }
        }
        b"SMEMBERS" | b"SCARD" => {
            read_as(shared, &args[1], Value::set, out, |s, out| {
                if name == b"SCARD" {
                    resp::integer(out, s.map_or(0, |s| s.len() as i64));
                } else {
                    let empty = Default::default();
                    let s = s.unwrap_or(&empty);
                    resp::set_header(out, s.len());
                    s.iter().for_each(|m| resp::bulk(out, m));
                }
            })
            .await
        }
        b"SISMEMBER" | b"SMISMEMBER" => {
            read_as(shared, &args[1], Value::set, out, |s, out| {
                let one = name == b"SISMEMBER";
                if !one {
                    resp::array_header(out, args.len() - 2);
                }
                for m in &args[2..] {
                    resp::integer(out, s.is_some_and(|s| s.contains(m)) as i64);
                }
            })
            .await
        }
        b"SRANDMEMBER" => {
            if args.len() > 3 {
                resp::error(out, SYNTAX);
                return Flow::Continue;
            }
            let count = match args.get(2) {
                Some(a) => match super::zset_ranges::parse_rand_count(a, false) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        resp::error(out, &e);
                        return Flow::Continue;
                    }
                },
                None => None,
            };
            let r = store
                .read(&args[1], |v| {
                    let s = v.map(Value::set).transpose()?;
                    let Some(count) = count else {
                        let m = s.and_then(|s| s.iter().choose(&mut rand::thread_rng()));
                        resp::opt_bulk(out, m.map(|m| &m[..]));
                        return Ok(());
                    };
                    let all: Vec<&Vec<u8>> = s.map(|s| s.iter().collect()).unwrap_or_default();
                    let picks = super::zset_ranges::random_picks(all.len(), count);
                    super::bulk_array(out, picks.iter().map(|&i| &all[i][..]));
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        _ => return super::set_ops::execute(shared, name, args, out, seq).await,
    }
    Flow::Continue
}
