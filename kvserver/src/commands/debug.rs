//! `DEBUG` (the subcommands Redis' test suite uses; Redis' `debug.c`) and `MEMORY` (Redis'
//! `object.c`): introspection of this server's own state, never a change to the data but
//! `DEBUG POPULATE`'s.
//!
//! What Redis does to its own memory layout has no counterpart here and is accepted as a
//! no-op: `DEBUG RELOAD` and `LOADAOF` (the data stays as it is; with persistence on, `RELOAD`
//! takes a snapshot first, as Redis saves before it loads), `QUICKLIST-PACKED-THRESHOLD`,
//! `DICT-RESIZING`, `JMAP`, `CHANGE-REPL-ID`, `REPLYBUFFER`, `PAUSE-CRON`,
//! `SET-DISABLE-DENY-SCRIPTS`, `SET-SKIP-CHECKSUM-VALIDATION`, `CONFIG-REWRITE-FORCE-ALL`,
//! `STRINGMATCH-LEN`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::server::{unknown_subcommand, wrong_sub_args};
use super::{NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{key_cost, Shard};
use crate::value::Value;

/// Runs `DEBUG` or `MEMORY` (the dispatcher checked name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    if name == b"MEMORY" {
        return memory(shared, args, out).await;
    }
    let sub = args[1].to_ascii_uppercase();
    let n = args.len();
    match &sub[..] {
        b"HELP" => help(out, DEBUG_HELP),
        b"SLEEP" if n == 3 => match std::str::from_utf8(&args[2])
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        {
            Some(secs) if secs.is_finite() => {
                // Redis stops the whole server; here the connection waits.
                if secs > 0.0 {
                    tokio::time::sleep(std::time::Duration::from_secs_f64(secs.min(1e6))).await;
                }
                resp::ok(out)
            }
            _ => resp::error(out, "ERR value is not a valid float"),
        },
        b"SET-ACTIVE-EXPIRE" if n == 3 => match parse_int(&args[2]) {
            Some(v) => {
                shared.active_expire.store(v != 0, Ordering::Relaxed);
                if v == 0 {
                    // A pass that began before is over before the reply (Redis' sweep runs
                    // between commands, so the reply means the sweep is off).
                    drop(shared.sweep_pass.lock().await);
                }
                resp::ok(out)
            }
            None => resp::error(out, NOT_INT),
        },
        b"RELOAD" => {
            if shared.store.log().is_some() {
                if let Err(e) = shared.store.save().await {
                    return resp::error(out, &format!("ERR Error trying to save the DB: {e}"));
                }
            }
            resp::ok(out)
        }
        b"LOADAOF"
        | b"QUICKLIST-PACKED-THRESHOLD"
        | b"DICT-RESIZING"
        | b"JMAP"
        | b"CHANGE-REPL-ID"
        | b"REPLYBUFFER"
        | b"PAUSE-CRON"
        | b"SET-DISABLE-DENY-SCRIPTS"
        | b"SET-SKIP-CHECKSUM-VALIDATION"
        | b"CONFIG-REWRITE-FORCE-ALL"
        | b"STRINGMATCH-LEN" => resp::ok(out),
        b"OBJECT" if n == 3 => {
            let key = &args[2];
            let text = shared
                .store
                .read(key, |v| {
                    v.map(|v| {
                        let enc = super::keys::encoding(v, |s| shared.settings.get(s));
                        format!(
                            "Value at:0x{:012x} refcount:1 encoding:{enc} serializedlength:{} lru:0 lru_seconds_idle:0",
                            fingerprint(key) & 0xffff_ffff_fff0,
                            serialized_len(v)
                        )
                    })
                })
                .await;
            match text {
                Some(t) => resp::simple(out, &t),
                None => resp::error(out, "ERR no such key"),
            }
        }
        b"DIGEST" if n == 2 => {
            let mut digest = [0u8; 20];
            for key in shared.store.keys(b"*").await {
                if let Some(d) = key_digest(shared, &key, true).await {
                    digest.iter_mut().zip(d).for_each(|(a, b)| *a ^= b);
                }
            }
            resp::simple(out, &hex(&digest));
        }
        b"DIGEST-VALUE" => {
            resp::array_header(out, n - 2);
            for key in &args[2..] {
                let d = key_digest(shared, key, false).await.unwrap_or([0; 20]);
                resp::simple(out, &hex(&d));
            }
        }
        b"PROTOCOL" if n == 3 => protocol(&args[2], out),
        b"POPULATE" if (3..=5).contains(&n) => {
            let (Some(count), prefix) = (parse_int(&args[2]), args.get(3)) else {
                return resp::error(out, NOT_INT);
            };
            let size = match args.get(4).map(|a| parse_int(a)) {
                None => None,
                Some(Some(s)) if s >= 0 => Some(s as usize),
                Some(_) => return resp::error(out, NOT_INT),
            };
            let prefix = prefix.map_or(&b"key"[..], |p| &p[..]);
            let mut kv = Vec::new();
            for i in 0..count.max(0) {
                let key = [prefix, format!(":{i}").as_bytes()].concat();
                if shared.store.read(&key, |v| v.is_some()).await {
                    continue; // existing keys are left as they are
                }
                let mut val = format!("value:{i}").into_bytes();
                if let Some(size) = size {
                    val.resize(size, 0);
                }
                kv.push(key);
                kv.push(val);
            }
            if kv.is_empty() {
                return resp::ok(out);
            }
            match shared.store.mset(kv, false, seq).await {
                Ok(_) => resp::ok(out),
                Err(e) => resp::error(out, &e),
            }
        }
        b"SLEEP" | b"SET-ACTIVE-EXPIRE" | b"OBJECT" | b"DIGEST" | b"PROTOCOL" | b"POPULATE" => {
            wrong_sub_args(out, args)
        }
        _ => unknown_subcommand(out, args),
    }
}

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "OBJECT <key>",
    "    Show low level info about the key and associated value.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type.",
    "RELOAD",
    "    Save the data to disk (with persistence on); the data in memory stays as it is.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables the expiry sweep.",
    "SLEEP <seconds>",
    "    Wait <seconds> before replying (this connection only).",
    "HELP",
    "    Print this help.",
];

fn help(out: &mut Vec<u8>, lines: &[&str]) {
    resp::array_header(out, lines.len());
    for l in lines {
        resp::simple(out, l);
    }
}

/// `DEBUG PROTOCOL <type>`: a sample reply of each RESP3 type (in RESP2 as Redis downgrades
/// it).
fn protocol(kind: &[u8], out: &mut Vec<u8>) {
    let resp3 = resp::protocol() == 3;
    match &kind.to_ascii_lowercase()[..] {
        b"string" => resp::bulk(out, b"Hello World"),
        b"integer" => resp::integer(out, 12345),
        // Redis' own sample value (not pi).
        #[allow(clippy::approx_constant)]
        b"double" => resp::double(out, 3.141),
        b"bignum" if resp3 => out.extend_from_slice(b"(1234567999999999999999999999999999999\r\n"),
        b"bignum" => resp::bulk(out, b"1234567999999999999999999999999999999"),
        b"null" => resp::null(out),
        b"array" | b"set" => {
            if kind.eq_ignore_ascii_case(b"set") {
                resp::set_header(out, 3)
            } else {
                resp::array_header(out, 3)
            }
            (0..3).for_each(|j| resp::integer(out, j));
        }
        b"map" => {
            resp::map_header(out, 3);
            for j in 0..3 {
                resp::integer(out, j);
                resp::boolean(out, j == 1);
            }
        }
        b"attrib" => {
            if resp3 {
                out.extend_from_slice(b"|1\r\n");
                resp::bulk(out, b"key-popularity");
                resp::array_header(out, 2);
                resp::bulk(out, b"key:123");
                resp::integer(out, 90);
            }
            resp::bulk(out, b"Some real reply following the attribute");
        }
        b"push" if !resp3 => resp::error(out, "ERR RESP2 is not supported by this command"),
        b"push" => {
            out.extend_from_slice(b">2\r\n");
            resp::bulk(out, b"server-cpu-usage");
            resp::integer(out, 42);
            resp::bulk(out, b"Some real reply following the push reply");
        }
        b"true" => resp::boolean(out, true),
        b"false" => resp::boolean(out, false),
        b"verbatim" => resp::verbatim(out, b"This is a verbatim\nstring"),
        _ => resp::error(out, "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"),
    }
}

/// A 64-bit FNV-1a hash (the digests' building block; stable across runs).
fn fnv(data: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ seed;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn fingerprint(data: &[u8]) -> u64 {
    fnv(data, 0)
}

/// 20 bytes (as Redis' SHA1 digests are long) mixed from the parts of a value.
struct Digest([u8; 20]);

impl Digest {
    fn mix(&mut self, data: &[u8]) {
        let mut x = [0u8; 24];
        for (i, c) in x.chunks_mut(8).enumerate() {
            let seed = u64::from_le_bytes(self.0[i * 6..i * 6 + 8].try_into().unwrap());
            c.copy_from_slice(
                &fnv(data, seed ^ (i as u64).wrapping_mul(0x9e37_79b9)).to_le_bytes(),
            );
        }
        self.0.copy_from_slice(&x[..20]);
    }
}

/// The digest of one key (`None`: absent): its type, its elements in a canonical order (set
/// members and hash fields sorted, sorted-set members with their scores) and whether it has
/// a deadline, as Redis' digest covers; `with_key`: its name too (`DEBUG DIGEST`; `DIGEST-VALUE`
/// leaves it out, so that a `COPY` digests alike).
async fn key_digest<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    key: &[u8],
    with_key: bool,
) -> Option<[u8; 20]> {
    let expires = shared.store.expire_at(key).await.is_some();
    shared
        .store
        .read(key, |v| {
            let v = v?;
            let mut d = Digest([0; 20]);
            if with_key {
                d.mix(key);
            }
            d.mix(v.type_name().as_bytes());
            match v {
                Value::Str(s) => d.mix(s),
                Value::List(l) => l.iter().for_each(|e| d.mix(e)),
                Value::Hash(h) => {
                    let mut f: Vec<_> = h.iter().collect();
                    f.sort();
                    for (k, v) in f {
                        d.mix(k);
                        d.mix(v);
                    }
                }
                Value::Set(s) => {
                    let mut m: Vec<_> = s.iter().collect();
                    m.sort();
                    m.into_iter().for_each(|e| d.mix(e));
                }
                Value::ZSet(z) => {
                    let mut m: Vec<_> = z.iter().collect();
                    m.sort_by(|a, b| a.0.cmp(b.0));
                    for (e, s) in m {
                        d.mix(e);
                        d.mix(&s.to_bits().to_le_bytes());
                    }
                }
            }
            if expires {
                d.mix(b"!!expire!!");
            }
            Some(d.0)
        })
        .await
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Roughly what Redis' snapshot would take for the value (`DEBUG OBJECT`'s
/// `serializedlength`).
fn serialized_len(v: &Value) -> usize {
    match v {
        Value::Str(s) => s.len() + 1,
        Value::List(l) => l.iter().map(|e| e.len() + 1).sum::<usize>() + 11,
        Value::Hash(h) => h.iter().map(|(k, v)| k.len() + v.len() + 2).sum::<usize>() + 11,
        Value::Set(s) => s.iter().map(|e| e.len() + 1).sum::<usize>() + 11,
        Value::ZSet(z) => z.iter().map(|(e, _)| e.len() + 9).sum::<usize>() + 11,
    }
}

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Print this help.",
];

/// `MEMORY USAGE|STATS|DOCTOR|MALLOC-STATS|PURGE|HELP`.
async fn memory<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let sub = args[1].to_ascii_uppercase();
    let n = args.len();
    match &sub[..] {
        b"HELP" if n == 2 => help(out, MEMORY_HELP),
        b"USAGE" if n == 3 || n == 5 => {
            if n == 5 {
                if !args[3].eq_ignore_ascii_case(b"SAMPLES") {
                    return resp::error(out, SYNTAX);
                }
                match parse_int(&args[4]) {
                    Some(s) if s >= 0 => {}
                    Some(_) => return resp::error(out, SYNTAX),
                    None => return resp::error(out, NOT_INT),
                }
            }
            let key = &args[2];
            match shared.store.read(key, |v| v.map(|v| key_cost(key, v))).await {
                Some(u) => resp::integer(out, u as i64),
                None => resp::null(out),
            }
        }
        b"USAGE" => resp::error(out, SYNTAX),
        b"DOCTOR" if n == 2 => resp::verbatim(
            out,
            b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.",
        ),
        b"MALLOC-STATS" if n == 2 => {
            resp::verbatim(out, b"Stats not supported for the current allocator")
        }
        b"PURGE" if n == 2 => {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only releases free memory of the allocator.
            unsafe {
                libc::malloc_trim(0);
            }
            resp::ok(out)
        }
        b"STATS" if n == 2 => {
            // The figures of `INFO memory` (the store's own estimate).
            let m = super::server::memory_figures(shared);
            let ks = shared.store.keyspace().await;
            let fields: [(&str, i64); 10] = [
                ("peak.allocated", m.peak as i64),
                ("total.allocated", m.used as i64),
                ("startup.allocated", m.startup as i64),
                ("replication.backlog", 0),
                ("clients.slaves", 0),
                ("clients.normal", m.clients as i64),
                ("aof.buffer", 0),
                ("overhead.total", (m.startup + m.clients) as i64),
                ("keys.count", ks.keys as i64),
                ("dataset.bytes", m.dataset as i64),
            ];
            resp::map_header(out, fields.len() + 1);
            for (k, v) in fields {
                resp::bulk(out, k.as_bytes());
                resp::integer(out, v);
            }
            resp::bulk(out, b"keys.bytes-per-key");
            resp::integer(
                out,
                if ks.keys == 0 {
                    0
                } else {
                    m.dataset as i64 / ks.keys as i64
                },
            );
        }
        b"DOCTOR" | b"MALLOC-STATS" | b"PURGE" | b"STATS" | b"HELP" => wrong_sub_args(out, args),
        _ => unknown_subcommand(out, args),
    }
}
