//! Transactions (Redis' `multi.c`): `MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH`.
//!
//! Between `MULTI` and `EXEC` a client's commands are checked (name, arity, whether they may
//! run in a transaction) and queued; one refused there makes `EXEC` fail with `EXECABORT`.
//! `EXEC` runs the queue as one critical section: [`crate::store::Store::transaction`] takes
//! the write locks of every shard the queued commands (and the watched keys) live in, in
//! index order, runs the commands through the ordinary dispatch, and logs their writes as one
//! record. Errors of single commands at run time do not stop the others, as in Redis.
//!
//! `WATCH`: a write command flags the clients that watch one of its keys before it runs, and
//! `EXEC` compares, under its locks, each watched key with the state `WATCH` saw (so a key
//! that expired meanwhile, or a change that raced with the flagging, is caught too); either
//! makes `EXEC` reply with a null array and run nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{arity_ok, dispatch, spec, unknown, wrong_args, Flow, Spec};
use crate::lock::ShardLock;
use crate::resp::{self, Args};
use crate::shared::{ClientInfo, Shared, NOT_IN_MULTI};
use crate::store::Shard;

/// The commands that run at once inside `MULTI` instead of being queued.
pub(super) fn runs_in_multi(upper_name: &[u8]) -> bool {
    matches!(
        upper_name,
        b"EXEC" | b"DISCARD" | b"MULTI" | b"WATCH" | b"QUIT" | b"UNWATCH" | b"RESET"
    )
}

/// Queues a command sent inside `MULTI` (or refuses it, which dooms the transaction).
pub(super) fn queue(client: &ClientInfo, upper_name: &[u8], args: Args, out: &mut Vec<u8>) {
    let mut tx = client.tx.lock().unwrap_or_else(|e| e.into_inner());
    match spec(upper_name) {
        None => {
            tx.refused = true;
            unknown(out, &args);
        }
        Some(s) if !arity_ok(&args, s.arity) => {
            tx.refused = true;
            wrong_args(out, &args[0]);
        }
        Some(s) if s.flags.contains(&"no_multi") => {
            tx.refused = true;
            resp::error(out, "ERR Command not allowed inside a transaction");
        }
        Some(_) => {
            tx.queued.push(args);
            client.multi.store(tx.queued.len(), Ordering::Relaxed);
            resp::simple(out, "QUEUED");
        }
    }
}

/// Where the key count of a command whose keys follow a count stands (`ZUNIONSTORE dst
/// numkeys key ...`, `LMPOP numkeys key ...`, `BLMPOP timeout numkeys key ...`), and whether a
/// destination key comes first.
fn counted_keys(s: &Spec) -> Option<(usize, bool)> {
    match s.name {
        "zunionstore" | "zinterstore" | "zdiffstore" => Some((2, true)),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            Some((1, false))
        }
        "blmpop" | "bzmpop" => Some((2, false)),
        _ => None,
    }
}

/// The keys of a request, by its command's key positions (`first_key`, `last_key`, `step`),
/// or for the commands whose keys follow a count by that count.
pub(super) fn keys_of<'a>(s: &Spec, args: &'a Args) -> impl Iterator<Item = &'a [u8]> {
    let n = args.len() as i64;
    let (mut first, mut last, step) = (s.first_key, s.last_key, s.step.max(1));
    let mut dst = None;
    if let Some((at, with_dst)) = counted_keys(s) {
        if with_dst {
            dst = args.get(1).map(|a| &a[..]);
        }
        let count = args
            .get(at)
            .and_then(|a| crate::resp::parse_int(a))
            .filter(|&c| c > 0 && c < n)
            .unwrap_or(0);
        first = if count == 0 { 0 } else { at as i64 + 1 };
        last = (at as i64 + count).min(n - 1);
    }
    let last = if last < 0 { n + last } else { last.min(n - 1) };
    dst.into_iter().chain(
        (first..=last)
            .step_by(step as usize)
            .filter(move |_| first > 0)
            .map(move |i| &args[i as usize][..]),
    )
}

/// Before a write command runs: flags the clients watching its keys (`FLUSHALL`/`FLUSHDB`:
/// the watched keys that exist).
pub(super) async fn touch<L: ShardLock<Shard>>(shared: &Shared<L>, s: &Spec, args: &Args) {
    if s.name == "flushall" || s.name == "flushdb" {
        let mut existing = Vec::new();
        for k in shared.watches.keys() {
            if shared.store.fingerprint(&k).await.is_some() {
                existing.push(k);
            }
        }
        shared.watches.touch(existing.iter().map(|k| &k[..]));
    } else {
        shared.watches.touch(keys_of(s, args));
    }
}

/// Forgets the client's watched keys (after `EXEC`, `DISCARD`, `UNWATCH`, or when it leaves).
pub fn unwatch<L>(shared: &Shared<L>, client: &ClientInfo) {
    let mut tx = client.tx.lock().unwrap_or_else(|e| e.into_inner());
    for (k, _) in std::mem::take(&mut tx.watched) {
        shared.watches.remove(&k, &tx.dirty);
    }
    tx.dirty.store(false, Ordering::Release);
}

/// `MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH`.
pub(super) async fn execute_tx<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let in_multi = client.multi.load(Ordering::Relaxed) != NOT_IN_MULTI;
    match name {
        b"MULTI" if in_multi => resp::error(out, "ERR MULTI calls can not be nested"),
        b"MULTI" => {
            client.multi.store(0, Ordering::Relaxed);
            resp::ok(out)
        }
        b"DISCARD" if !in_multi => resp::error(out, "ERR DISCARD without MULTI"),
        b"DISCARD" => {
            end_multi(client);
            unwatch(shared, client);
            resp::ok(out)
        }
        b"EXEC" if !in_multi => resp::error(out, "ERR EXEC without MULTI"),
        b"EXEC" => exec(shared, client, out, seq).await,
        b"WATCH" if in_multi => resp::error(out, "ERR WATCH inside MULTI is not allowed"),
        b"WATCH" => {
            let flag = client
                .tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .dirty
                .clone();
            for k in &args[1..] {
                let known = client
                    .tx
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .watched
                    .iter()
                    .any(|(w, _)| w == k);
                if known {
                    continue;
                }
                // Registered first: a write from now on flags it; one before shows in the state.
                shared.watches.add(k, &flag);
                let state = shared.store.fingerprint(k).await;
                client
                    .tx
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .watched
                    .push((k.clone(), state));
            }
            resp::ok(out)
        }
        _ => {
            // UNWATCH
            unwatch(shared, client);
            resp::ok(out)
        }
    }
}

/// Leaves `MULTI` if in it and forgets the watches (`RESET`).
pub(super) fn discard<L>(shared: &Shared<L>, client: &ClientInfo) {
    end_multi(client);
    unwatch(shared, client);
}

/// Leaves `MULTI`: returns the queue and whether a command was refused while queueing.
/// Refuses a command sent inside `MULTI` with `error` (which dooms the transaction).
pub(super) fn refuse(client: &ClientInfo, error: &str, out: &mut Vec<u8>) {
    client.tx.lock().unwrap_or_else(|e| e.into_inner()).refused = true;
    resp::error(out, error);
}

/// Whether a queued command is flagged `denyoom` (then so is the `EXEC`, as in Redis).
pub(super) fn queued_deny_oom(client: &ClientInfo) -> bool {
    let tx = client.tx.lock().unwrap_or_else(|e| e.into_inner());
    tx.queued
        .iter()
        .any(|a| spec(&a[0].to_ascii_uppercase()).is_some_and(|s| s.deny_oom))
}

/// Refuses an `EXEC` before it runs: the transaction is discarded, and the reply says why, as
/// Redis' `execCommandAbort`.
pub(super) fn abort<L>(shared: &Shared<L>, client: &ClientInfo, error: &str, out: &mut Vec<u8>) {
    end_multi(client);
    unwatch(shared, client);
    resp::error(
        out,
        &format!("EXECABORT Transaction discarded because of: {error}"),
    );
}

fn end_multi(client: &ClientInfo) -> (Vec<Args>, bool) {
    let mut tx = client.tx.lock().unwrap_or_else(|e| e.into_inner());
    client.multi.store(NOT_IN_MULTI, Ordering::Relaxed);
    (
        std::mem::take(&mut tx.queued),
        std::mem::take(&mut tx.refused),
    )
}

/// One queued command, boxed: `EXEC` runs inside the dispatcher it calls.
fn run_one<'a, L: ShardLock<Shard>>(
    shared: &'a Arc<Shared<L>>,
    client: &'a ClientInfo,
    args: &'a mut Args,
    out: &'a mut Vec<u8>,
) -> Pin<Box<dyn Future<Output = Flow> + Send + 'a>> {
    Box::pin(async move {
        let mut seq = 0;
        dispatch(shared, client, args, out, &mut seq, true).await
    })
}

async fn exec<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let (queued, refused) = end_multi(client);
    if refused {
        unwatch(shared, client);
        return resp::error(
            out,
            "EXECABORT Transaction discarded because of previous errors.",
        );
    }
    let (watched, dirty) = {
        let tx = client.tx.lock().unwrap_or_else(|e| e.into_inner());
        (tx.watched.clone(), tx.dirty.clone())
    };
    // The shards to hold: those of every key named; all of them for a command whose keys are
    // not in its arguments (KEYS, SCAN, DBSIZE, FLUSHALL, INFO, ...) or not only at its key
    // positions (SORT's BY and GET patterns).
    let store = &shared.store;
    let mut all = false;
    let mut flushes = false;
    let mut keys: Vec<&[u8]> = watched.iter().map(|(k, _)| &k[..]).collect();
    for args in &queued {
        let s = spec(&args[0].to_ascii_uppercase()).expect("checked when queued");
        if (s.first_key > 0 && !s.flags.contains(&"movablekeys")) || counted_keys(s).is_some() {
            keys.extend(keys_of(s, args));
        } else if s.group != "connection" && s.group != "pubsub" {
            all = true;
        }
        flushes |= s.name == "flushall" || s.name == "flushdb";
    }
    let shards = if all {
        (0..store.shard_count()).collect()
    } else {
        store.shards_of(keys.into_iter())
    };
    let n = queued.len();
    let result = store
        .transaction(&shards, flushes, async {
            let mut changed = dirty.load(Ordering::Acquire);
            for (k, state) in &watched {
                if changed {
                    break;
                }
                changed = store.fingerprint(k).await != *state;
            }
            if changed {
                return None;
            }
            let mut replies = Vec::new();
            for mut args in queued {
                run_one(shared, client, &mut args, &mut replies).await;
            }
            Some(replies)
        })
        .await;
    unwatch(shared, client);
    match result {
        Ok((None, _)) => resp::null_array(out),
        Ok((Some(replies), record)) => {
            resp::array_header(out, n);
            out.extend_from_slice(&replies);
            if record != 0 {
                *seq = record;
            }
        }
        Err(e) => resp::error(out, &e),
    }
}
