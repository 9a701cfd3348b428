//! The blocking commands (`BLPOP`, `BRPOP`, `BLMOVE`, `BRPOPLPUSH`, `BLMPOP`, `BZPOPMIN`,
//! `BZPOPMAX`, `BZMPOP`) and the serving of clients blocked on keys ([`crate::blocking`] keeps
//! the queues).
//!
//! A blocking command first runs as its non-blocking form; if it found nothing to take it
//! blocks (inside `MULTI`/`EXEC` it replies a null array instead, as Redis does), unless it
//! is an error. When a write made one of its keys ready, the writer's connection serves the
//! key's waiters in the order they blocked ([`serve_ready`]), each through the same attempt,
//! with the waiter's protocol; a waiter the key had nothing for keeps its place.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{list_moves, zsets, Flow};
use crate::blocking::{Blocking, Claim, Reply};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::{ClientInfo, Shared};
use crate::store::Shard;
use crate::value::parse_double;

/// What a blocking command does when it finds something.
pub(super) enum Op {
    /// `BLPOP`/`BRPOP` (`left`) on the first non-empty key.
    Pop { left: bool },
    /// `BZPOPMIN`/`BZPOPMAX` (`max`).
    ZPop { max: bool },
    /// `BLMOVE`/`BRPOPLPUSH`: `keys[0]` to `dst`.
    Move {
        dst: Vec<u8>,
        from_left: bool,
        to_left: bool,
    },
    /// `BLMPOP`.
    MPop { left: bool, count: u64 },
    /// `BZMPOP`.
    ZMPop { max: bool, count: u64 },
}

pub(super) struct Parsed {
    /// `None`: forever.
    timeout: Option<Duration>,
    keys: Vec<Vec<u8>>,
    op: Op,
}

/// A timeout in seconds as Redis reads it (a float, hexadecimal ones too, as `strtold` reads
/// them; milliseconds rounded up; 0: forever).
fn parse_timeout(a: &[u8]) -> Result<Option<Duration>, String> {
    let Some(f) = parse_double(a) else {
        return Err("ERR timeout is not a float or out of range".into());
    };
    let ms = (f * 1000.0).ceil();
    if ms > i64::MAX as f64 {
        return Err("ERR timeout is out of range".into());
    }
    if ms < 0.0 {
        return Err("ERR timeout is negative".into());
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// `LEFT`/`RIGHT` (`MIN`/`MAX` for the sorted sets: `min_max`): whether it is the first.
pub(super) fn parse_end(a: &[u8], min_max: bool) -> Result<bool, String> {
    let (first, second): (&[u8], &[u8]) = if min_max {
        (b"MIN", b"MAX")
    } else {
        (b"LEFT", b"RIGHT")
    };
    if a.eq_ignore_ascii_case(first) {
        Ok(true)
    } else if a.eq_ignore_ascii_case(second) {
        Ok(false)
    } else {
        Err(super::SYNTAX.into())
    }
}

/// `numkeys key ... LEFT|RIGHT [COUNT n]` from `args[at]` (`LMPOP`, `ZMPOP` and their blocking
/// forms): the keys, whether the first end, and the count.
pub(super) fn parse_mpop(
    args: &Args,
    at: usize,
    min_max: bool,
) -> Result<(Vec<Vec<u8>>, bool, u64), String> {
    let numkeys = match parse_int(&args[at]) {
        Some(n) if n > 0 => n as u64,
        _ => return Err("ERR numkeys should be greater than 0".into()),
    };
    let where_at = (at as u64).saturating_add(numkeys).saturating_add(1);
    if where_at >= args.len() as u64 {
        return Err(super::SYNTAX.into());
    }
    let where_at = where_at as usize;
    let first = parse_end(&args[where_at], min_max)?;
    let mut count = None;
    let mut i = where_at + 1;
    while i < args.len() {
        if count.is_none() && args[i].eq_ignore_ascii_case(b"COUNT") && i + 1 < args.len() {
            match parse_int(&args[i + 1]) {
                Some(n) if n > 0 => count = Some(n as u64),
                _ => return Err("ERR count should be greater than 0".into()),
            }
            i += 2;
        } else {
            return Err(super::SYNTAX.into());
        }
    }
    Ok((args[at + 1..where_at].to_vec(), first, count.unwrap_or(1)))
}

/// Reads a blocking command's arguments, in Redis' order of checks.
pub(super) fn parse(name: &[u8], args: &Args) -> Result<Parsed, String> {
    let n = args.len();
    Ok(match name {
        b"BLPOP" | b"BRPOP" | b"BZPOPMIN" | b"BZPOPMAX" => {
            let timeout = parse_timeout(&args[n - 1])?;
            let op = match name {
                b"BLPOP" => Op::Pop { left: true },
                b"BRPOP" => Op::Pop { left: false },
                b"BZPOPMIN" => Op::ZPop { max: false },
                _ => Op::ZPop { max: true },
            };
            Parsed {
                timeout,
                keys: args[1..n - 1].to_vec(),
                op,
            }
        }
        b"BRPOPLPUSH" => Parsed {
            timeout: parse_timeout(&args[3])?,
            keys: vec![args[1].clone()],
            op: Op::Move {
                dst: args[2].clone(),
                from_left: false,
                to_left: true,
            },
        },
        b"BLMOVE" => {
            let from_left = parse_end(&args[3], false)?;
            let to_left = parse_end(&args[4], false)?;
            Parsed {
                timeout: parse_timeout(&args[5])?,
                keys: vec![args[1].clone()],
                op: Op::Move {
                    dst: args[2].clone(),
                    from_left,
                    to_left,
                },
            }
        }
        _ => {
            // BLMPOP, BZMPOP: timeout numkeys key ... end [COUNT n]
            let timeout = parse_timeout(&args[1])?;
            let zset = name == b"BZMPOP";
            let (keys, first, count) = parse_mpop(args, 2, zset)?;
            let op = if zset {
                Op::ZMPop { max: !first, count }
            } else {
                Op::MPop { left: first, count }
            };
            Parsed { timeout, keys, op }
        }
    })
}

/// Runs the command's non-blocking form; whether it replied (`false`: nothing to take).
async fn attempt<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    p: &Parsed,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> bool {
    match &p.op {
        Op::Pop { left } => list_moves::pop_first(shared, &p.keys, *left, out, seq).await,
        Op::Move {
            dst,
            from_left,
            to_left,
        } => list_moves::lmove(shared, &p.keys[0], dst, *from_left, *to_left, out, seq).await,
        Op::MPop { left, count } => {
            list_moves::mpop(shared, &p.keys, *left, *count, out, seq).await
        }
        Op::ZPop { max } => zsets::bzpop_attempt(shared, &p.keys, *max, out, seq).await,
        Op::ZMPop { max, count } => {
            zsets::zmpop_attempt(shared, &p.keys, *max, *count, out, seq).await
        }
    }
}

/// A blocking command from a client (`nested`: run by `EXEC`, where it never blocks).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
    nested: bool,
) -> Flow {
    let p = match parse(name, args) {
        Ok(p) => p,
        Err(e) => {
            resp::error(out, &e);
            return Flow::Continue;
        }
    };
    if attempt(shared, &p, out, seq).await {
        return Flow::Continue;
    }
    if nested {
        // As the non-blocking forms reply (a timeout's reply is a null array for all).
        match p.op {
            Op::Move { .. } => resp::null(out),
            _ => resp::null_array(out),
        }
        return Flow::Continue;
    }
    *seq = 0; // no reply yet: the served one brings its own record
    let deadline = p.timeout.map(|t| Instant::now() + t);
    let blocked = shared.blocking.block(
        client.id,
        resp::protocol(),
        std::mem::take(args),
        p.keys,
        deadline,
    );
    Flow::Block(blocked)
}

/// Serves the clients blocked on the keys written since the last call, first blocked, first
/// served, including those a served command's own write made ready (a `BLMOVE` into a key
/// another client waits on).
pub(super) async fn serve_ready<L: ShardLock<Shard>>(shared: &Arc<Shared<L>>) {
    let reg: &Blocking = &shared.blocking;
    while let Some(key) = reg.next_ready() {
        while let Some(claim) = reg.claim_first(&key) {
            if Blocking::abandoned(&claim) {
                reg.discard(claim);
                continue;
            }
            match serve_one(shared, &claim, &key).await {
                Some(reply) => reg.answer(claim, reply),
                None => {
                    reg.release(claim);
                    break;
                }
            }
        }
    }
}

/// Runs a claimed waiter's command for it, if the ready `key` holds the type it waits for (a
/// key written, then deleted or replaced by another type, wakes nobody, as in Redis); `None`:
/// it found nothing.
async fn serve_one<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    claim: &Claim,
    key: &[u8],
) -> Option<Reply> {
    let w = &claim.waiter;
    let name = w.args[0].to_ascii_uppercase();
    let p = parse(&name, &w.args).ok()?;
    let wants = match p.op {
        Op::ZPop { .. } | Op::ZMPop { .. } => "zset",
        _ => "list",
    };
    let holds = shared.store.read(key, |v| v.map(|v| v.type_name())).await;
    if holds != Some(wants) {
        return None;
    }
    let mut out = Vec::new();
    let mut seq = 0;
    let served = resp::with_protocol(async {
        resp::set_protocol(w.resp);
        attempt(shared, &p, &mut out, &mut seq).await
    })
    .await;
    served.then_some(Reply { out, seq })
}

/// The keys a write command may make ready: its keys, and for `SORT ... STORE` the
/// destination.
pub(super) fn written_keys(spec: &super::Spec, args: &Args) -> Vec<Vec<u8>> {
    if spec.name == "sort" {
        let at = args
            .iter()
            .position(|a| a.eq_ignore_ascii_case(b"STORE"))
            .filter(|&i| i > 1);
        return at
            .and_then(|i| args.get(i + 1))
            .into_iter()
            .cloned()
            .collect();
    }
    super::tx::keys_of(spec, args).map(<[u8]>::to_vec).collect()
}

/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: whether client `id` was blocked (it gets the timeout
/// reply, or with `error` Redis' `UNBLOCKED` error).
pub fn unblock<L>(shared: &Shared<L>, id: u64, error: bool) -> bool {
    let Some(claim) = shared.blocking.claim_client(id) else {
        return false;
    };
    let out = if error {
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_vec()
    } else {
        claim.waiter.timeout_reply()
    };
    shared.blocking.answer(claim, Reply { out, seq: 0 });
    true
}
