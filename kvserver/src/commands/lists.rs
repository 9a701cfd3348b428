//! List commands (as Redis' `t_list.c`): `LPUSH`, `RPUSH`, `LPOP`, `RPOP` (with a count),
//! `LRANGE`, `LLEN`, `LINDEX`.

use std::sync::Arc;

use super::{
    bulk_array, index_range, null_array, parse_count, reply_err, reply_int, unknown, wrong_args,
    Flow, NOT_INT,
};
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
        b"LPUSH" | b"RPUSH" => {
            let items: Vec<Vec<u8>> = args.drain(2..).collect();
            let left = name == b"LPUSH";
            let r = store
                .mutate(&args[1], seq, |v| {
                    let len = v.map(Value::list).transpose()?.map_or(0, |l| l.len());
                    let n = (len + items.len()) as i64;
                    Ok((Some(Mutation::Push { left, items }), n))
                })
                .await;
            reply_int(out, r)
        }
        b"LPOP" | b"RPOP" => {
            if args.len() > 3 {
                wrong_args(out, &args[0]);
                return Flow::Continue;
            }
            let count = match args.get(2).map(|a| parse_count(a)).transpose() {
                Ok(c) => c,
                Err(e) => {
                    resp::error(out, &e);
                    return Flow::Continue;
                }
            };
            let left = name == b"LPOP";
            let r = store
                .mutate(&args[1], seq, |v| {
                    let Some(l) = v.map(Value::list).transpose()? else {
                        return Ok((None, None));
                    };
                    let n = count.unwrap_or(1).min(l.len() as u64) as usize;
                    let items: Vec<Vec<u8>> = if left {
                        l.iter().take(n).cloned().collect()
                    } else {
                        l.iter().rev().take(n).cloned().collect()
                    };
                    let m = (n > 0).then_some(Mutation::Pop {
                        left,
                        count: n as u64,
                    });
                    Ok((m, Some(items)))
                })
                .await;
            match (r, count) {
                (Err(e), _) => resp::error(out, &e),
                (Ok(None), None) => resp::null(out),
                (Ok(None), Some(_)) => null_array(out),
                (Ok(Some(items)), None) => resp::bulk(out, &items[0]),
                (Ok(Some(items)), Some(_)) => bulk_array(out, items.iter().map(|i| &i[..])),
            }
        }
        b"LRANGE" => {
            let (Some(start), Some(stop)) = (parse_int(&args[2]), parse_int(&args[3])) else {
                resp::error(out, NOT_INT);
                return Flow::Continue;
            };
            let r = store
                .read(&args[1], |v| {
                    let Some(l) = v.map(Value::list).transpose()? else {
                        resp::array_header(out, 0);
                        return Ok(());
                    };
                    match index_range(start, stop, l.len()) {
                        Some((a, b)) => bulk_array(out, l.range(a..=b).map(|i| &i[..])),
                        None => resp::array_header(out, 0),
                    }
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        b"LLEN" => {
            let r = store
                .read(&args[1], |v| {
                    Ok(v.map(Value::list)
                        .transpose()?
                        .map_or(0, |l| l.len() as i64))
                })
                .await;
            reply_int(out, r)
        }
        b"LINDEX" => {
            let Some(index) = parse_int(&args[2]) else {
                resp::error(out, NOT_INT);
                return Flow::Continue;
            };
            let r = store
                .read(&args[1], |v| {
                    let l = v.map(Value::list).transpose()?;
                    let len = l.map_or(0, |l| l.len() as i64);
                    let i = if index < 0 { index + len } else { index };
                    let item = l.and_then(|l| usize::try_from(i).ok().and_then(|i| l.get(i)));
                    resp::opt_bulk(out, item.map(|i| &i[..]));
                    Ok(())
                })
                .await;
            reply_err(out, r)
        }
        _ => unknown(out, args),
    }
    Flow::Continue
}
