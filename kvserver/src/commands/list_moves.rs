//! List commands over several keys (as Redis' `t_list.c`): `LMOVE`, `RPOPLPUSH`, `LMPOP`,
//! and the attempts of the blocking forms (`BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`,
//! `BLMPOP`; see `blocking.rs`).
//!
//! A move is one critical section over both keys' shards (a store transaction: its pop and its
//! push are one log record), taken in index order like every multi-key command.

use std::sync::Arc;

use super::blocking::{parse_end, parse_mpop};
use super::{unknown, Flow};
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
    match name {
        b"LMOVE" | b"RPOPLPUSH" => {
            let ends = if name == b"LMOVE" {
                parse_end(&args[3], false).and_then(|f| Ok((f, parse_end(&args[4], false)?)))
            } else {
                Ok((false, true))
            };
            match ends {
                Ok((from_left, to_left)) => {
                    if !lmove(shared, &args[1], &args[2], from_left, to_left, out, seq).await {
                        resp::null(out);
                    }
                }
                Err(e) => resp::error(out, &e),
            }
        }
        b"LMPOP" => match parse_mpop(args, 1, false) {
            Ok((keys, left, count)) => {
                if !mpop(shared, &keys, left, count, out, seq).await {
                    resp::null_array(out);
                }
            }
            Err(e) => resp::error(out, &e),
        },
        _ => unknown(out, args),
    }
    Flow::Continue
}

/// Flags the watchers of `keys` and wakes the clients blocked on them (a write made outside
/// the dispatcher: a served blocked command's).
fn touched<L>(shared: &Shared<L>, keys: &[&[u8]]) {
    if shared.watches.any() {
        shared.watches.touch(keys.iter().copied());
    }
    if shared.blocking.any() {
        shared.blocking.signal(keys.iter().copied());
    }
}

/// Pops up to `count` items from the `left` or right end of `key`: `Ok(None)` if it holds no
/// list (`WRONGTYPE` if it holds something else).
async fn pop<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    key: &[u8],
    left: bool,
    count: u64,
    seq: &mut u64,
) -> Result<Option<Vec<Vec<u8>>>, String> {
    shared
        .store
        .mutate(key, seq, |v| {
            let Some(l) = v.map(Value::list).transpose()? else {
                return Ok((None, None));
            };
            let n = count.min(l.len() as u64) as usize;
            let items: Vec<Vec<u8>> = if left {
                l.iter().take(n).cloned().collect()
            } else {
                l.iter().rev().take(n).cloned().collect()
            };
            let m = Mutation::Pop {
                left,
                count: n as u64,
            };
            Ok((Some(m), Some(items)))
        })
        .await
}

/// `BLPOP`/`BRPOP`'s attempt: one item from the first key that holds a list, replied as
/// [key, item]; `false` if none does.
pub(super) async fn pop_first<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    keys: &[Vec<u8>],
    left: bool,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> bool {
    for k in keys {
        match pop(shared, k, left, 1, seq).await {
            Err(e) => resp::error(out, &e),
            Ok(None) => continue,
            Ok(Some(items)) => {
                touched(shared, &[k]);
                resp::array_header(out, 2);
                resp::bulk(out, k);
                resp::bulk(out, &items[0]);
            }
        }
        return true;
    }
    false
}

/// `LMPOP`'s (and `BLMPOP`'s) attempt: up to `count` items from the first key that holds a
/// list, replied as [key, [item, ...]]; `false` if none does.
pub(super) async fn mpop<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    keys: &[Vec<u8>],
    left: bool,
    count: u64,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> bool {
    for k in keys {
        match pop(shared, k, left, count, seq).await {
            Err(e) => resp::error(out, &e),
            Ok(None) => continue,
            Ok(Some(items)) => {
                touched(shared, &[k]);
                resp::array_header(out, 2);
                resp::bulk(out, k);
                super::bulk_array(out, items.iter().map(|i| &i[..]));
            }
        }
        return true;
    }
    false
}

/// `LMOVE src dst from to` (and `RPOPLPUSH`, `BLMOVE`, `BRPOPLPUSH`): the item moved is
/// replied; `false` (nothing replied) if `src` holds no list. `WRONGTYPE` if either key holds
/// something else (`dst` checked only when there is an item to move, as in Redis).
pub(super) async fn lmove<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> bool {
    let store = &shared.store;
    let shards = store.shards_of([src, dst].into_iter());
    let r = store
        .transaction(&shards, false, async {
            let item = store
                .read(src, |v| {
                    let l = v.map(Value::list).transpose()?;
                    Ok::<_, String>(l.map(|l| {
                        let it = if from_left { l.front() } else { l.back() };
                        it.expect("lists are never empty").clone()
                    }))
                })
                .await?;
            let Some(item) = item else {
                return Ok(None);
            };
            store
                .read(dst, |v| v.map(Value::list).transpose().map(|_| ()))
                .await?;
            let mut inner = 0;
            pop(shared, src, from_left, 1, &mut inner).await?;
            store
                .mutate(dst, &mut inner, |_| {
                    let items = vec![item.clone()];
                    Ok((
                        Some(Mutation::Push {
                            left: to_left,
                            items,
                        }),
                        (),
                    ))
                })
                .await?;
            Ok::<_, String>(Some(item))
        })
        .await;
    match r {
        Ok((Ok(None), _)) => return false,
        Ok((Ok(Some(item)), record)) => {
            if record != 0 {
                *seq = record;
            }
            touched(shared, &[src, dst]);
            resp::bulk(out, &item);
        }
        Ok((Err(e), _)) | Err(e) => resp::error(out, &e),
    }
    true
}
