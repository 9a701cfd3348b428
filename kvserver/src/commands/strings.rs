//! String commands (Redis' `t_string.c`): `GET`, `SET` and its variants, `MGET`/`MSET`,
//! ranges, counters.

use std::sync::Arc;

use super::{reply_int, reply_ok, unknown, wrong_args, Flow, NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::resp::{self, parse_int, Args};
use crate::shared::Shared;
use crate::store::{now_ms, Change, Entry, Expiry, SetOpts, Shard};
use crate::value::Value;

/// `GET key` (called by the dispatcher itself, without [`execute`]'s match: the hot read).
pub(super) async fn get<L: ShardLock<Shard>>(shared: &Shared<L>, key: &[u8], out: &mut Vec<u8>) {
    if let Err(e) = shared.store.get(key, |v| resp::opt_bulk(out, v)).await {
        resp::error(out, &e)
    }
}

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let store = &shared.store;
    let max_len = shared.config.limits.max_bulk_len as u64;
    const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    match name {
        b"GET" => get(shared, &args[1], out).await,
        b"SET" => set(shared, args, out, seq).await,
        b"INCR" | b"DECR" | b"INCRBY" | b"DECRBY" => {
            let delta = if args.len() == 3 {
                match parse_int(&args[2]) {
                    Some(d) => d,
                    None => {
                        resp::error(out, NOT_INT);
                        return Flow::Continue;
                    }
                }
            } else {
                1
            };
            let delta = if name.starts_with(b"DECR") {
                match delta.checked_neg() {
                    Some(d) => d,
                    None => {
                        resp::error(out, "ERR decrement would overflow");
                        return Flow::Continue;
                    }
                }
            } else {
                delta
            };
            reply_int(out, store.incr_by(&args[1], delta, seq).await);
        }
        b"MGET" => {
            resp::array_header(out, args.len() - 1);
            store
                .get_many(&args[1..], |_, v| {
                    resp::opt_bulk(out, v.and_then(|v| v.bytes().ok()))
                })
                .await;
        }
        b"MSET" => {
            if args.len() % 2 != 1 {
                wrong_args(out, &args[0]);
            } else {
                let mut args = std::mem::take(args);
                args.remove(0);
                reply_ok(out, store.mset(args, false, seq).await.map(|_| ()));
            }
        }
        b"STRLEN" => {
            let n = store
                .get(&args[1], |v| v.map_or(0, |v| v.len() as i64))
                .await;
            reply_int(out, n)
        }
        b"GETBIT" => {
            let Some(bit) = parse_int(&args[2]).filter(|b| (0..MAX_BIT).contains(b)) else {
                resp::error(out, BIT_OFFSET);
                return Flow::Continue;
            };
            let r = store
                .get(&args[1], |v| {
                    let byte = v
                        .and_then(|v| v.get((bit / 8) as usize))
                        .copied()
                        .unwrap_or(0);
                    ((byte >> (7 - bit % 8)) & 1) as i64
                })
                .await;
            reply_int(out, r);
        }
        b"SETBIT" => {
            let Some(bit) = parse_int(&args[2]).filter(|b| (0..MAX_BIT).contains(b)) else {
                resp::error(out, BIT_OFFSET);
                return Flow::Continue;
            };
            let on = match &args[3][..] {
                b"1" => true,
                b"0" => false,
                _ => {
                    resp::error(out, "ERR bit is not an integer or out of range");
                    return Flow::Continue;
                }
            };
            let r = store
                .update(&args[1], seq, |e, _| {
                    let (mut bytes, expire_at) = match e {
                        Some(e) => (e.value.bytes()?.to_vec(), e.expire_at),
                        None => (Vec::new(), 0),
                    };
                    let at = (bit / 8) as usize;
                    if bytes.len() <= at {
                        bytes.resize(at + 1, 0);
                    }
                    let mask = 1u8 << (7 - bit % 8);
                    let old = (bytes[at] & mask != 0) as i64;
                    if on {
                        bytes[at] |= mask;
                    } else {
                        bytes[at] &= !mask;
                    }
                    let value = Value::Str(bytes);
                    Ok((Change::Put(Entry { value, expire_at }), old))
                })
                .await;
            reply_int(out, r);
        }
        b"BITCOUNT" => {
            // As Redis 7.0: a missing key counts 0 before the arguments are read, then the
            // range's integers, then its unit.
            let range = match args.len() {
                2 => Ok(None),
                4 | 5 => match (parse_int(&args[2]), parse_int(&args[3])) {
                    (Some(a), Some(b)) => match args.get(4).map(|u| u.to_ascii_uppercase()) {
                        None => Ok(Some((a, b, false))),
                        Some(u) if u == b"BYTE" => Ok(Some((a, b, false))),
                        Some(u) if u == b"BIT" => Ok(Some((a, b, true))),
                        Some(_) => Err(SYNTAX),
                    },
                    _ => Err(NOT_INT),
                },
                _ => Err(SYNTAX),
            };
            let r = store
                .get(&args[1], |v| match v {
                    None => Ok(0),
                    Some(v) => range.map(|r| bitcount(v, r)).map_err(String::from),
                })
                .await;
            reply_int(out, r.and_then(|r| r));
        }
        b"LCS" => {
            let r = lcs_cmd(shared, args, out).await;
            if let Err(e) = r {
                resp::error(out, &e);
            }
        }
        b"SUBSTR" | b"GETRANGE" => {
            let (Some(start), Some(end)) = (parse_int(&args[2]), parse_int(&args[3])) else {
                resp::error(out, NOT_INT);
                return Flow::Continue;
            };
            let r = store
                .get(&args[1], |v| {
                    let v = v.unwrap_or(b"");
                    resp::bulk(out, getrange(v, start, end))
                })
                .await;
            if let Err(e) = r {
                resp::error(out, &e)
            }
        }
        b"APPEND" => {
            let add = &args[2];
            let r = store
                .update(&args[1], seq, |e, _| match e {
                    None => Ok((
                        Change::Put(Entry {
                            value: Value::Str(add.clone()),
                            expire_at: 0,
                        }),
                        add.len() as i64,
                    )),
                    Some(e) => {
                        let old = e.value.bytes()?;
                        if old.len() as u64 + add.len() as u64 > max_len {
                            return Err(TOO_BIG.into());
                        }
                        let mut value = Vec::with_capacity(old.len() + add.len());
                        value.extend_from_slice(old);
                        value.extend_from_slice(add);
                        let n = value.len() as i64;
                        Ok((
                            Change::Put(Entry {
                                value: Value::Str(value),
                                expire_at: e.expire_at,
                            }),
                            n,
                        ))
                    }
                })
                .await;
            reply_int(out, r)
        }
        b"SETRANGE" => {
            let Some(offset) = parse_int(&args[2]) else {
                resp::error(out, NOT_INT);
                return Flow::Continue;
            };
            if offset < 0 {
                resp::error(out, "ERR offset is out of range");
                return Flow::Continue;
            }
            let part = &args[3];
            let r = store
                .update(&args[1], seq, |e, _| {
                    let old = e.map(|e| e.value.bytes()).transpose()?;
                    let old_len = old.map_or(0, |v| v.len());
                    if part.is_empty() {
                        return Ok((Change::Keep, old_len as i64));
                    }
                    let end = (offset as u64).checked_add(part.len() as u64);
                    let end = match end {
                        Some(end) if end <= max_len => end as usize,
                        _ => return Err(TOO_BIG.into()),
                    };
                    let mut value = old.map_or_else(Vec::new, <[u8]>::to_vec);
                    if value.len() < end {
                        value.resize(end, 0);
                    }
                    value[offset as usize..end].copy_from_slice(part);
                    let n = value.len() as i64;
                    Ok((
                        Change::Put(Entry {
                            value: Value::Str(value),
                            expire_at: e.map_or(0, |e| e.expire_at),
                        }),
                        n,
                    ))
                })
                .await;
            reply_int(out, r)
        }
        b"SETNX" => {
            let opts = SetOpts {
                expiry: Expiry::None,
                nx: true,
                xx: false,
                get: false,
            };
            let (key, value) = (std::mem::take(&mut args[1]), std::mem::take(&mut args[2]));
            let r = store.set(key, value, opts, seq).await;
            reply_int(out, r.map(|r| r.stored as i64))
        }
        b"SETEX" | b"PSETEX" => {
            let lname = String::from_utf8_lossy(name).to_lowercase();
            let Some(n) = parse_int(&args[2]) else {
                resp::error(out, NOT_INT);
                return Flow::Continue;
            };
            let at = expire_at(n, name == b"SETEX", true, now_ms());
            let Some(at) = at else {
                resp::error(
                    out,
                    &format!("ERR invalid expire time in '{lname}' command"),
                );
                return Flow::Continue;
            };
            let opts = SetOpts {
                expiry: Expiry::At(at),
                nx: false,
                xx: false,
                get: false,
            };
            let (key, value) = (std::mem::take(&mut args[1]), std::mem::take(&mut args[3]));
            let r = store.set(key, value, opts, seq).await;
            reply_ok(out, r.map(|_| ()))
        }
        b"GETSET" => {
            let opts = SetOpts {
                expiry: Expiry::None,
                nx: false,
                xx: false,
                get: true,
            };
            let (key, value) = (std::mem::take(&mut args[1]), std::mem::take(&mut args[2]));
            match store.set(key, value, opts, seq).await {
                Ok(r) => resp::opt_bulk(out, r.old.as_deref()),
                Err(e) => resp::error(out, &e),
            }
        }
        b"GETDEL" => {
            let r = store
                .update(&args[1], seq, |e, _| {
                    Ok(match e {
                        Some(e) => (Change::Del, Some(e.value.bytes()?.to_vec())),
                        None => (Change::Keep, None),
                    })
                })
                .await;
            match r {
                Ok(v) => resp::opt_bulk(out, v.as_deref()),
                Err(e) => resp::error(out, &e),
            }
        }
        b"GETEX" => getex(shared, args, out, seq).await,
        b"MSETNX" => {
            if args.len() % 2 != 1 {
                wrong_args(out, &args[0]);
            } else {
                let kv = args[1..].to_vec();
                reply_int(out, store.mset(kv, true, seq).await.map(i64::from));
            }
        }
        b"INCRBYFLOAT" => {
            use crate::ldouble::{self, Parsed};
            const NOT_FLOAT: &str = "ERR value is not a valid float";
            const NOT_FINITE: &str = "ERR increment would produce NaN or Infinity";
            let Some(incr) = ldouble::parse(&args[2]) else {
                resp::error(out, NOT_FLOAT);
                return Flow::Continue;
            };
            let r = store
                .update(&args[1], seq, |e, _| {
                    let (old, at) = match e {
                        Some(e) => (
                            ldouble::parse(e.value.bytes()?).ok_or(NOT_FLOAT)?,
                            e.expire_at,
                        ),
                        None => (ldouble::parse(b"0").expect("zero"), 0),
                    };
                    let (Parsed::Finite(old), Parsed::Finite(incr)) = (old, &incr) else {
                        return Err(NOT_FINITE.into());
                    };
                    let v = ldouble::add(old, *incr).ok_or(NOT_FINITE)?;
                    let text = ldouble::format(v).into_bytes();
                    Ok((
                        Change::Put(Entry {
                            value: Value::Str(text.clone()),
                            expire_at: at,
                        }),
                        text,
                    ))
                })
                .await;
            match r {
                Ok(v) => resp::bulk(out, &v),
                Err(e) => resp::error(out, &e),
            }
        }
        _ => unknown(out, args),
    }
    Flow::Continue
}

const EX: u8 = 1;
const PX: u8 = 2;
const EXAT: u8 = 4;
const PXAT: u8 = 8;
/// The expiry options of `SET` and `GETEX`: `EX s|PX ms|EXAT s|PXAT ms` and the word that
/// excludes them (`KEEPTTL`, `PERSIST`), read as Redis reads them: a repeated expiry of the
/// same kind is allowed (the last one counts), two kinds or an expiry beside the word are a
/// syntax error.
#[derive(Default)]
struct ExpiryOpts {
    /// The kinds seen (`EX`, `PX`, ... as bits).
    kinds: u8,
    /// Where the last expiry's value is.
    value: Option<usize>,
    /// Whether the word was given.
    word: bool,
}

impl ExpiryOpts {
    /// Takes `args[*i]` if it is one of these options (moving `*i` to an expiry's value);
    /// false if it is none of them, or one that conflicts.
    fn take(&mut self, args: &Args, i: &mut usize, word: &[u8]) -> bool {
        let opt = args[*i].to_ascii_uppercase();
        if opt == word {
            self.word = self.kinds == 0;
            return self.word;
        }
        let kind = match &opt[..] {
            b"EX" => EX,
            b"PX" => PX,
            b"EXAT" => EXAT,
            b"PXAT" => PXAT,
            _ => return false,
        };
        if self.word || self.kinds & !kind != 0 || *i + 1 >= args.len() {
            return false;
        }
        self.kinds |= kind;
        *i += 1;
        self.value = Some(*i);
        true
    }

    /// The deadline the expiry asks for, if one was given: `Err` the error for `command`.
    fn deadline(&self, args: &Args, now: u64, command: &str) -> Result<Option<u64>, String> {
        let Some(at) = self.value else {
            return Ok(None);
        };
        let n = parse_int(&args[at]).ok_or(NOT_INT)?;
        let relative = self.kinds & (EX | PX) != 0;
        expire_at(n, self.kinds & (EX | EXAT) != 0, relative, now)
            .map(Some)
            .ok_or_else(|| format!("ERR invalid expire time in '{command}' command"))
    }

    /// Whether the deadline was given relative to now (`EX`, `PX`).
    fn relative(&self) -> bool {
        self.kinds & (EX | PX) != 0
    }
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`, read as Redis reads it:
/// every option first, then the expiry's value.
async fn set<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry = ExpiryOpts::default();
    let mut i = 3;
    while i < args.len() {
        match &args[i].to_ascii_uppercase()[..] {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            _ if expiry.take(args, &mut i, b"KEEPTTL") => {}
            _ => return resp::error(out, SYNTAX),
        }
        i += 1;
    }
    let mut opts = SetOpts {
        expiry: if expiry.word {
            Expiry::Keep
        } else {
            Expiry::None
        },
        nx,
        xx,
        get,
    };
    match expiry.deadline(args, now_ms(), "set") {
        Ok(Some(at)) => opts.expiry = Expiry::At(at),
        Ok(None) => {}
        Err(e) => return resp::error(out, &e),
    }
    let (key, value) = (std::mem::take(&mut args[1]), std::mem::take(&mut args[2]));
    match shared.store.set(key, value, opts, seq).await {
        Ok(r) if get => resp::opt_bulk(out, r.old.as_deref()),
        Ok(r) if r.stored => resp::ok(out),
        Ok(_) => resp::null(out),
        Err(e) => resp::error(out, &e),
    }
}

/// Redis' `GETRANGE` index rules (7.0).
fn getrange(v: &[u8], mut start: i64, mut end: i64) -> &[u8] {
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return b"";
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        return b"";
    }
    &v[start as usize..=end as usize]
}

/// The deadline for an expiry argument `n` (seconds if `secs`; relative to `now` if
/// `relative`), with Redis' checks; `None`: "invalid expire time".
fn expire_at(n: i64, secs: bool, relative: bool, now: u64) -> Option<u64> {
    if n <= 0 || (secs && n > i64::MAX / 1000) {
        return None;
    }
    let ms = if secs { n * 1000 } else { n };
    let ms = if relative {
        ms.checked_add(now as i64)?
    } else {
        ms
    };
    (ms > 0).then_some(ms as u64)
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`, checked in Redis' order: the options, the
/// key (a missing key is nil whatever the options), then the time.
async fn getex<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    args: &Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) {
    let mut expiry = ExpiryOpts::default();
    let mut i = 2;
    while i < args.len() {
        if !expiry.take(args, &mut i, b"PERSIST") {
            return resp::error(out, SYNTAX);
        }
        i += 1;
    }
    let r = shared
        .store
        .update(&args[1], seq, |e, now| {
            let Some(e) = e else {
                return Ok((Change::Keep, None));
            };
            let value = Some(e.value.bytes()?.to_vec());
            if let Some(when) = expiry.deadline(args, now, "getex")? {
                if !expiry.relative() && when <= now {
                    return Ok((Change::Del, value));
                }
                return Ok((Change::Expire(when), value));
            }
            if expiry.word && e.expire_at != 0 {
                return Ok((Change::Expire(0), value));
            }
            Ok((Change::Keep, value))
        })
        .await;
    match r {
        Ok(v) => resp::opt_bulk(out, v.as_deref()),
        Err(e) => resp::error(out, &e),
    }
}

/// Bit offsets go up to 2^32 (a 512 MiB string), as in Redis.
const MAX_BIT: i64 = 1 << 32;
const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// `BITCOUNT` over `v`, optionally in a range of bytes (or bits) with Redis' negative indexes.
fn bitcount(v: &[u8], range: Option<(i64, i64, bool)>) -> i64 {
    let Some((a, b, bits)) = range else {
        return v.iter().map(|b| b.count_ones() as i64).sum();
    };
    let total = if bits {
        v.len() as i64 * 8
    } else {
        v.len() as i64
    };
    let norm = |x: i64| if x < 0 { (total + x).max(0) } else { x };
    let (a, b) = (norm(a), norm(b).min(total - 1));
    if total == 0 || a > b {
        return 0;
    }
    if bits {
        (a..=b)
            .filter(|i| v[(i / 8) as usize] >> (7 - i % 8) & 1 == 1)
            .count() as i64
    } else {
        v[a as usize..=b as usize]
            .iter()
            .map(|b| b.count_ones() as i64)
            .sum()
    }
}

/// A common run: its range in the first string and in the second (inclusive).
type Match = ((usize, usize), (usize, usize));

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`: the longest common subsequence
/// of two strings (dynamic programming, as Redis computes it, so the same one is chosen).
async fn lcs_cmd<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    args: &Args,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    // As Redis 7.0: the keys' types first, then the options.
    let mut vals: Vec<Vec<u8>> = Vec::new();
    let mut err = None;
    shared
        .store
        .get_many(&args[1..3], |_, v| match v.map(|v| v.bytes()).transpose() {
            Ok(b) => vals.push(b.unwrap_or(b"").to_vec()),
            Err(_) => err = Some("ERR The specified keys must contain string values".to_string()),
        })
        .await;
    if let Some(e) = err {
        return Err(e);
    }
    let (mut len, mut idx, mut withlen, mut minlen) = (false, false, false, 0i64);
    let mut i = 3;
    while i < args.len() {
        match &args[i].to_ascii_uppercase()[..] {
            b"LEN" => len = true,
            b"IDX" => idx = true,
            b"WITHMATCHLEN" => withlen = true,
            b"MINMATCHLEN" if i + 1 < args.len() => {
                minlen = parse_int(&args[i + 1]).ok_or(NOT_INT)?.max(0);
                i += 1;
            }
            _ => return Err(SYNTAX.into()),
        }
        i += 1;
    }
    if len && idx {
        return Err("ERR If you want both the length and indexes, please just use IDX.".into());
    }
    let (a, b) = (&vals[0], &vals[1]);
    // dp[i][j]: the LCS length of a[..i] and b[..j].
    let w = b.len() + 1;
    let mut dp = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[a.len() * w + b.len()] as i64;
    if len {
        resp::integer(out, total);
        return Ok(());
    }
    // Walk back from the end, collecting the common string and its matching ranges.
    let (mut i, mut j) = (a.len(), b.len());
    let mut common = Vec::new();
    let mut matches: Vec<Match> = Vec::new();
    let mut current: Option<Match> = None;
    let flush = |cur: &mut Option<Match>, matches: &mut Vec<Match>| {
        if let Some(m) = cur.take() {
            if (m.0 .1 - m.0 .0 + 1) as i64 >= minlen {
                matches.push(m);
            }
        }
    };
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            common.push(a[i - 1]);
            let (ai, bj) = (i - 1, j - 1);
            match &mut current {
                Some(((a0, _), (b0, _))) if *a0 == ai + 1 && *b0 == bj + 1 => {
                    *a0 = ai;
                    *b0 = bj;
                }
                _ => {
                    flush(&mut current, &mut matches);
                    current = Some(((ai, ai), (bj, bj)));
                }
            }
            i -= 1;
            j -= 1;
        } else if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    flush(&mut current, &mut matches);
    common.reverse();
    if !idx {
        resp::bulk(out, &common);
        return Ok(());
    }
    resp::map_header(out, 2);
    resp::bulk(out, b"matches");
    resp::array_header(out, matches.len());
    for ((a0, a1), (b0, b1)) in &matches {
        resp::array_header(out, if withlen { 3 } else { 2 });
        for (x, y) in [(a0, a1), (b0, b1)] {
            resp::array_header(out, 2);
            resp::integer(out, *x as i64);
            resp::integer(out, *y as i64);
        }
        if withlen {
            resp::integer(out, (a1 - a0 + 1) as i64);
        }
    }
    resp::bulk(out, b"len");
    resp::integer(out, total);
    Ok(())
}
