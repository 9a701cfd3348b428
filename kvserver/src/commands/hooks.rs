//! What the dispatcher checks and adds around a command: authentication (`requirepass`), the
//! RESP2 subscribed state's restrictions, and keyspace notifications.

use std::sync::Arc;

use super::{
    arity_ok, command_id, last_command_name, run, spec, spec_index_packed, tx, Flow, Spec,
};
use crate::lock::ShardLock;
use crate::resp::{self, Args};
use crate::shared::{ClientInfo, Shared};
use crate::store::Shard;

/// Whether the request is refused before it runs (its error is in `out`): not authenticated
/// while a password is set, or a command RESP2's subscribed state does not allow.
#[inline]
pub(super) fn refused<L>(
    shared: &Shared<L>,
    client: &ClientInfo,
    name: &[u8],
    packed: u128,
    args: &Args,
    out: &mut Vec<u8>,
) -> bool {
    // Every command of an authenticated client that is not subscribed: two loads, inlined.
    if client
        .authenticated
        .load(std::sync::atomic::Ordering::Relaxed)
        && !client.outbox.subscribed()
    {
        return false;
    }
    refused_checked(shared, client, name, packed, args, out)
}

/// [`refused`]'s checks, for a client not authenticated or subscribed.
#[inline(never)]
fn refused_checked<L>(
    shared: &Shared<L>,
    client: &ClientInfo,
    name: &[u8],
    packed: u128,
    args: &Args,
    out: &mut Vec<u8>,
) -> bool {
    if !client
        .authenticated
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        // As Redis: an unknown command or a wrong arity is told first.
        if spec(name).is_some_and(|s| !s.flags.contains(&"no_auth") && arity_ok(args, s.arity)) {
            if shared.password().is_some() {
                if client.multi.load(std::sync::atomic::Ordering::Relaxed)
                    != crate::shared::NOT_IN_MULTI
                {
                    client.tx.lock().unwrap_or_else(|e| e.into_inner()).refused = true;
                }
                resp::error(out, "NOAUTH Authentication required.");
                return true;
            }
            // The password was removed since this client connected.
            client
                .authenticated
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    if client.resp() == 2
        && client.outbox.subscribed()
        && !crate::pubsub::allowed_when_subscribed(name)
    {
        if let Some(index) = spec_index_packed(packed, args[0].len()) {
            let full = last_command_name(command_id(index, args));
            resp::error(
                out,
                &format!("ERR Can't execute '{full}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"),
            );
            return true;
        }
    }
    false
}

/// [`run`] with keyspace notifications: each key the command names is fingerprinted before
/// and after; the changed ones get their events ([`crate::notify::event`]).
#[allow(clippy::too_many_arguments)]
pub(super) async fn notifying<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    spec: &Spec,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
    flags: u32,
) -> Flow {
    let mut keys: Vec<Vec<u8>> = if spec.name == "sort" {
        // SORT writes only its STORE destination.
        args.iter()
            .position(|a| a.eq_ignore_ascii_case(b"STORE"))
            .and_then(|i| args.get(i + 1))
            .into_iter()
            .cloned()
            .collect()
    } else {
        tx::keys_of(spec, args).map(<[u8]>::to_vec).collect()
    };
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    let mut before = Vec::with_capacity(keys.len());
    for k in &keys {
        before.push(shared.store.fingerprint(k).await);
    }
    let saved = args.clone();
    let start = out.len();
    let flow = run(shared, client, spec, name, args, out, seq).await;
    let forced = crate::notify::writes_anyway(spec.name, &saved, &out[start..]);
    for (pos, (k, b)) in keys.iter().zip(before).enumerate() {
        let a = shared.store.fingerprint(k).await;
        if a != b || (forced && a.is_some()) {
            for (class, event) in
                crate::notify::event(spec.name, &saved, pos, b.is_some(), a.is_some())
            {
                crate::notify::notify(&shared.pubsub, flags, class, event, k);
            }
        }
    }
    flow
}
