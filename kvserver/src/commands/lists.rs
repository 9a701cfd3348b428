//! List commands (as Redis' `t_list.c`) on one key: `LPUSH`, `RPUSH`, `LPUSHX`, `RPUSHX`,
//! `LPOP`, `RPOP` (with a count), `LRANGE`, `LLEN`, `LINDEX`, `LPOS`, `LSET`, `LINSERT`,
//! `LREM`, `LTRIM`. The moves and the pops over several keys are in `list_moves.rs`.
//!
//! `LSET`, `LINSERT` and `LREM` change the list in its middle: they log the whole new list
//! (and keep the old one as undo). `LTRIM` logs pops from its ends.

use std::sync::Arc;

use std::collections::VecDeque;

use super::{
    bulk_array, index_range, null_array, parse_count, read_as, reply_err, reply_int, wrong_args,
    Flow, NOT_INT, SYNTAX,
};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{Change, Entry, Shard};
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
        b"LPUSH" | b"RPUSH" | b"LPUSHX" | b"RPUSHX" => {
            let items: Vec<Vec<u8>> = args.drain(2..).collect();
            let left = name[0] == b'L';
            let only_existing = name.len() == 6;
            let r = store
                .mutate(&args[1], seq, |v| {
                    let l = v.map(Value::list).transpose()?;
                    if only_existing && l.is_none() {
                        return Ok((None, 0));
                    }
                    let n = (l.map_or(0, |l| l.len()) + items.len()) as i64;
                    Ok((Some(Mutation::Push { left, items }), n))
                })
                .await;
            reply_int(out, r)
        }
        b"LSET" => lset(shared, args, out, seq).await,
        b"LINSERT" => linsert(shared, args, out, seq).await,
        b"LREM" => lrem(shared, args, out, seq).await,
        b"LTRIM" => ltrim(shared, args, out, seq).await,
        b"LPOS" => lpos(shared, args, out).await,
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
            read_as(shared, &args[1], Value::list, out, |l, out| {
                match l.and_then(|l| Some((l, index_range(start, stop, l.len())?))) {
                    Some((l, (a, b))) => bulk_array(out, l.range(a..=b).map(|i| &i[..])),
                    None => resp::array_header(out, 0),
                }
            })
            .await
        }
        b"LLEN" => {
            read_as(shared, &args[1], Value::list, out, |l, out| {
                resp::integer(out, l.map_or(0, |l| l.len() as i64))
            })
            .await
        }
        b"LINDEX" => {
            // As Redis: a missing key is nil and another type WRONGTYPE before the index is read.
            read_as(shared, &args[1], Value::list, out, |l, out| {
                let Some(l) = l else {
                    return resp::null(out);
                };
                let Some(index) = parse_int(&args[2]) else {
                    return resp::error(out, NOT_INT);
                };
                let i = if index < 0 {
                    index + l.len() as i64
                } else {
                    index
                };
                resp::opt_bulk(
                    out,
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| l.get(i))
                        .map(|i| &i[..]),
                );
            })
            .await
        }
        _ => return super::list_moves::execute(shared, name, args, out, seq).await,
    }
    Flow::Continue
}

/// Stores `l` at `key` with the deadline `e` had (deletes the key if `l` is empty).
fn put_list(l: VecDeque<Vec<u8>>, expire_at: u64) -> Change {
    if l.is_empty() {
        Change::Del
    } else {
        Change::Put(Entry {
            value: Value::List(l),
            expire_at,
        })
    }
}

/// `LSET key index element`
async fn lset<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let index = parse_int(&args[2]);
    let r = shared
        .store
        .update(&args[1], seq, |e, _| {
            let Some(e) = e else {
                return Err("ERR no such key".into());
            };
            let l = e.value.list()?;
            let index = index.ok_or(NOT_INT)?;
            let len = l.len() as i64;
            let i = if index < 0 { index + len } else { index };
            if i < 0 || i >= len {
                return Err("ERR index out of range".into());
            }
            let mut l = l.clone();
            l[i as usize] = args[3].clone();
            Ok((put_list(l, e.expire_at), ()))
        })
        .await;
    super::reply_ok(out, r)
}

/// `LINSERT key BEFORE|AFTER pivot element`
async fn linsert<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let after = if args[2].eq_ignore_ascii_case(b"AFTER") {
        true
    } else if args[2].eq_ignore_ascii_case(b"BEFORE") {
        false
    } else {
        return resp::error(out, SYNTAX);
    };
    let r = shared
        .store
        .update(&args[1], seq, |e, _| {
            let Some(e) = e else {
                return Ok((Change::Keep, 0));
            };
            let l = e.value.list()?;
            let Some(at) = l.iter().position(|x| *x == args[3]) else {
                return Ok((Change::Keep, -1));
            };
            let mut l = l.clone();
            l.insert(at + after as usize, args[4].clone());
            let n = l.len() as i64;
            Ok((put_list(l, e.expire_at), n))
        })
        .await;
    reply_int(out, r)
}

/// `LREM key count element`: `count` > 0 from the head, < 0 from the tail, 0 all.
async fn lrem<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let Some(count) = parse_int(&args[2]) else {
        return resp::error(out, NOT_INT);
    };
    let r = shared
        .store
        .update(&args[1], seq, |e, _| {
            let Some(e) = e else {
                return Ok((Change::Keep, 0));
            };
            let l = e.value.list()?;
            let limit = if count == 0 {
                u64::MAX
            } else {
                count.unsigned_abs()
            };
            let mut gone = vec![false; l.len()];
            let mut n = 0u64;
            let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
                Box::new((0..l.len()).rev())
            } else {
                Box::new(0..l.len())
            };
            for i in order {
                if n == limit {
                    break;
                }
                if l[i] == args[3] {
                    gone[i] = true;
                    n += 1;
                }
            }
            if n == 0 {
                return Ok((Change::Keep, 0));
            }
            let kept: VecDeque<Vec<u8>> = l
                .iter()
                .zip(&gone)
                .filter(|(_, g)| !**g)
                .map(|(x, _)| x.clone())
                .collect();
            Ok((put_list(kept, e.expire_at), n as i64))
        })
        .await;
    reply_int(out, r)
}

/// `LTRIM key start stop`: pops from the head and the tail, in one record.
async fn ltrim<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let (Some(start), Some(stop)) = (parse_int(&args[2]), parse_int(&args[3])) else {
        return resp::error(out, NOT_INT);
    };
    let store = &shared.store;
    let key = &args[1];
    let shards = store.shards_of(std::iter::once(&key[..]));
    let r = store
        .transaction(&shards, false, async {
            let mut inner = 0;
            let len = store
                .read(key, |v| {
                    Ok::<_, String>(v.map(Value::list).transpose()?.map(|l| l.len()))
                })
                .await?;
            let Some(len) = len else {
                return Ok(());
            };
            let (head, tail) = match index_range(start, stop, len) {
                Some((a, b)) => (a, len - 1 - b),
                None => (len, 0),
            };
            for (left, count) in [(true, head), (false, tail)] {
                if count > 0 {
                    store
                        .mutate(key, &mut inner, |_| {
                            Ok((
                                Some(Mutation::Pop {
                                    left,
                                    count: count as u64,
                                }),
                                (),
                            ))
                        })
                        .await?;
                }
            }
            Ok(())
        })
        .await;
    match r {
        Ok((r, record)) => {
            if record != 0 {
                *seq = record;
            }
            super::reply_ok(out, r)
        }
        Err(e) => resp::error(out, &e),
    }
}

/// `LPOS key element [RANK rank] [COUNT num] [MAXLEN len]`
async fn lpos<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<u64>, 0u64);
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        let opt = args[i].to_ascii_uppercase();
        match &opt[..] {
            b"RANK" if more => {
                rank = match parse_int(&args[i + 1]) {
                    Some(i64::MIN) => {
                        return resp::error(
                            out,
                            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                        )
                    }
                    Some(0) => return resp::error(
                        out,
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    ),
                    Some(r) => r,
                    None => return resp::error(out, NOT_INT),
                };
            }
            b"COUNT" | b"MAXLEN" if more => {
                let v = match parse_int(&args[i + 1]) {
                    Some(v) if v >= 0 => v as u64,
                    _ if opt == b"COUNT" => return resp::error(out, "ERR COUNT can't be negative"),
                    _ => return resp::error(out, "ERR MAXLEN can't be negative"),
                };
                if opt == b"COUNT" {
                    count = Some(v);
                } else {
                    maxlen = v;
                }
            }
            _ => return resp::error(out, SYNTAX),
        }
        i += 2;
    }
    let r = shared
        .store
        .read(&args[1], |v| {
            let Some(l) = v.map(Value::list).transpose()? else {
                match count {
                    Some(_) => resp::array_header(out, 0),
                    None => resp::null(out),
                }
                return Ok(());
            };
            let want = match count {
                Some(0) => usize::MAX,
                Some(c) => c as usize,
                None => 1,
            };
            let scan = if maxlen == 0 {
                usize::MAX
            } else {
                maxlen as usize
            };
            let mut skip = rank.unsigned_abs() - 1;
            let mut found = Vec::new();
            let order: Box<dyn Iterator<Item = usize>> = if rank < 0 {
                Box::new((0..l.len()).rev())
            } else {
                Box::new(0..l.len())
            };
            for i in order.take(scan) {
                if found.len() >= want {
                    break;
                }
                if l[i] == args[2] {
                    if skip > 0 {
                        skip -= 1;
                    } else {
                        found.push(i as i64);
                    }
                }
            }
            match count {
                Some(_) => {
                    resp::array_header(out, found.len());
                    found.iter().for_each(|&i| resp::integer(out, i));
                }
                None => match found.first() {
                    Some(&i) => resp::integer(out, i),
                    None => resp::null(out),
                },
            }
            Ok(())
        })
        .await;
    reply_err(out, r)
}
