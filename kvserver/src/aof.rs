//! Persistence: the append-only log, snapshots, and replay.
//!
//! # Files (in `--dir`)
//! - `appendonly.aof`: a 16-byte header (`KVAOF002` + the id of the snapshot it builds on, 0 for
//!   none) followed by records.
//! - `dump-<id>.kvs`: a snapshot: header `KVSNAP02` + id, one `SET` (a string) or `VALUE` (a
//!   list, hash, set or sorted set) record per key, then an `END` record holding the key count.
//!   Only the one the log names is live.
//!
//! Format versions: `001` files (strings only: `SET`, `DEL`, `MSET`, `FLUSHALL`, `END`) are
//! read as they are; `002` adds the `VALUE`, `EXPIRE` and `MUTATE` records. A `001` log is
//! marked `002` when it is opened (its records stay valid), so that an older server, which
//! cannot read the new records, refuses it at its header instead of midway.
//!
//! # Record framing
//! `[len: u32 LE][crc32(payload): u32 LE][crc32(first 8 bytes): u32 LE][payload: len bytes]`.
//! The header checksum means a damaged length is caught as corruption instead of passing for a
//! short (truncated) file. On replay, a record that runs past the end of the file is the torn
//! last write of a crash: it is dropped with a warning and the file is cut back. Any other
//! damage (bad checksum, bad header, unparsable payload) stops the start with an error naming
//! the file and offset.
//!
//! Payload: an op byte, then fields; byte strings are `u32 LE` length + bytes, times are `u64
//! LE` unix milliseconds (0: no expiry). Writes are logged with absolute expiry times, so
//! replay needs no clock of its own: a key whose time has passed is simply dropped.
//!
//! # Writing: group commit
//! A write command encodes its record straight into the log's current batch with
//! [`Log::append`], inside its write critical section and before it changes the shard (so the
//! order of the records is the order of the critical sections, and a refused append changes
//! nothing). Before the connection replies it calls [`Log::wait`]: the first waiter takes the
//! whole batch and writes it with one `write(2)` (plus one `fsync` under `--appendfsync
//! always`), the others wait for that write. A batch that fails is cut back off the file (no
//! partial record stays), every command in it and after it gets an error reply, and the log
//! refuses writes until the store has undone their changes in memory ([`Log::rolled_back`]);
//! then, under `everysec` and `no`, until an fsync succeeds again, and under `always` until a
//! restart. If cutting the batch back fails too, the replies say that the outcome is unknown
//! and writes are refused until a restart. A failed everysec `fsync` refuses writes until a
//! later one succeeds.
//!
//! # Rewriting (`SAVE`)
//! See [`Log::begin_rewrite`]: while a snapshot is taken shard by shard, writes to shards already
//! snapshotted also go to a fresh log that starts from the new snapshot; when every shard is
//! done the new snapshot and log are renamed into place (the log's rename is the commit point).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use crate::value::{Mutation, Value, ZSet};

const AOF_MAGIC: &[u8; 8] = b"KVAOF002";
const SNAP_MAGIC: &[u8; 8] = b"KVSNAP02";
/// The first format (strings only), still read.
const AOF_MAGIC_V1: &[u8; 8] = b"KVAOF001";
const SNAP_MAGIC_V1: &[u8; 8] = b"KVSNAP01";
pub const FILE_HEADER: usize = 16;
const REC_HEADER: usize = 12;
/// No record may claim more than this (a damaged length is caught before this check, this is a
/// second line of defence against allocating absurd sizes).
pub const MAX_RECORD: usize = 1 << 31;

pub const AOF_NAME: &str = "appendonly.aof";

const OP_SET: u8 = 1;
const OP_DEL: u8 = 2;
const OP_MSET: u8 = 3;
const OP_FLUSHALL: u8 = 4;
const OP_END: u8 = 5;
const OP_VALUE: u8 = 6;
const OP_EXPIRE: u8 = 7;
const OP_MUTATE: u8 = 8;
/// A transaction (`EXEC`): the framed records of its commands, replayed together or not at all.
const OP_MULTI: u8 = 9;

// The type bytes of `VALUE` and the kind bytes of `MUTATE`.
const T_LIST: u8 = 1;
const T_HASH: u8 = 2;
const T_SET: u8 = 3;
const T_ZSET: u8 = 4;
const M_PUSH_LEFT: u8 = 1;
const M_PUSH_RIGHT: u8 = 2;
const M_POP_LEFT: u8 = 3;
const M_POP_RIGHT: u8 = 4;
const M_HSET: u8 = 5;
const M_HDEL: u8 = 6;
const M_SADD: u8 = 7;
const M_SREM: u8 = 8;
const M_ZADD: u8 = 9;
const M_ZREM: u8 = 10;

/// When the log is fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fsync {
    /// Once per batch, before the replies of the commands in it.
    Always,
    /// Once a second, from a background task.
    Everysec,
    /// Never explicitly (only at SAVE and shutdown); the OS decides.
    No,
}

/// How a record reaches the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogIo {
    /// The batch's `write(2)` right from the task that writes it, as Redis' event loop does
    /// (under `always`, the write and the fsync run in tokio's blocking pool).
    Direct,
    /// The batch's write in tokio's blocking pool, always (a round trip per batch).
    TokioFs,
}

// ---- records --------------------------------------------------------------------------------

/// A decoded record, borrowing from the file's bytes (aggregates are decoded into owned values).
#[derive(Debug, PartialEq)]
pub enum Op<'a> {
    /// A whole value of an aggregate type (a snapshot's entry, `RENAME`'s new key).
    Value {
        key: &'a [u8],
        value: Value,
        expire_at: u64,
    },
    /// A key's new deadline (0: none; due: the key is deleted).
    Expire {
        key: &'a [u8],
        at: u64,
    },
    /// A change to an aggregate (see [`crate::value`]).
    Mutate {
        key: &'a [u8],
        m: Mutation,
    },
    Set {
        key: &'a [u8],
        value: &'a [u8],
        expire_at: u64,
    },
    Del(Vec<&'a [u8]>),
    MSet(Vec<(&'a [u8], &'a [u8])>),
    FlushAll,
    End(u64),
}

/// Appends one framed record to `out`: the header is reserved first and filled in by
/// [`RecBuf::finish`], so a record is encoded straight into a log batch, with no copy.
struct RecBuf<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
}

impl<'a> RecBuf<'a> {
    fn begin(out: &'a mut Vec<u8>, op: u8) -> RecBuf<'a> {
        let start = out.len();
        out.extend_from_slice(&[0; REC_HEADER]);
        out.push(op);
        RecBuf { out, start }
    }
    fn bytes(self, b: &[u8]) -> Self {
        self.out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.out.extend_from_slice(b);
        self
    }
    fn u8(self, v: u8) -> Self {
        self.out.push(v);
        self
    }
    fn u32(self, v: u32) -> Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(self, v: u64) -> Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn finish(self) {
        let s = self.start;
        // A payload over 4 GiB would wrap here; `Log::append` refuses anything over
        // MAX_RECORD before such a record could be written.
        let len = (self.out.len() - s - REC_HEADER) as u32;
        let crc = crc32(&self.out[s + REC_HEADER..]);
        self.out[s..s + 4].copy_from_slice(&len.to_le_bytes());
        self.out[s + 4..s + 8].copy_from_slice(&crc.to_le_bytes());
        let hcrc = crc32(&self.out[s..s + 8]);
        self.out[s + 8..s + 12].copy_from_slice(&hcrc.to_le_bytes());
    }
}

/// The CRC-32 of the records (IEEE, the one `crc32fast` computes, which replay checks with):
/// short inputs, a record's 8 header bytes and a small command's payload, by tables (eight
/// bytes a step), where `crc32fast`'s setup and dispatch cost more than the bytes; long
/// ones by `crc32fast`.
fn crc32(bytes: &[u8]) -> u32 {
    if bytes.len() >= 128 {
        return crc32fast::hash(bytes);
    }
    let t = &CRC_TABLES;
    let mut c = !0u32;
    let mut chunks = bytes.chunks_exact(8);
    for ch in &mut chunks {
        let lo = c ^ u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
        let hi = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
        c = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        c = t[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// Slice-by-8 tables of the reflected polynomial 0xEDB88320: `[0]` is the byte table, `[k]`
/// a byte followed by `k` zero bytes.
static CRC_TABLES: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

pub fn put_set(out: &mut Vec<u8>, key: &[u8], value: &[u8], expire_at: u64) {
    out.reserve(REC_HEADER + 17 + key.len() + value.len());
    RecBuf::begin(out, OP_SET)
        .bytes(key)
        .bytes(value)
        .u64(expire_at)
        .finish()
}

pub fn put_del<'a>(out: &mut Vec<u8>, keys: impl ExactSizeIterator<Item = &'a [u8]>) {
    let mut r = RecBuf::begin(out, OP_DEL).u32(keys.len() as u32);
    for k in keys {
        r = r.bytes(k);
    }
    r.finish()
}

pub fn put_mset<'a>(out: &mut Vec<u8>, pairs: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>) {
    let mut r = RecBuf::begin(out, OP_MSET).u32(pairs.len() as u32);
    for (k, v) in pairs {
        r = r.bytes(k).bytes(v);
    }
    r.finish()
}

/// A whole value (`VALUE` for aggregates, `SET` for strings).
pub fn put_value(out: &mut Vec<u8>, key: &[u8], value: &Value, expire_at: u64) {
    let r = match value {
        Value::Str(v) => return put_set(out, key, v, expire_at),
        Value::List(l) => {
            let mut r = RecBuf::begin(out, OP_VALUE).bytes(key).u8(T_LIST);
            r = r.u32(l.len() as u32);
            for it in l {
                r = r.bytes(it);
            }
            r
        }
        Value::Hash(h) => {
            let mut r = RecBuf::begin(out, OP_VALUE).bytes(key).u8(T_HASH);
            r = r.u32(h.len() as u32);
            for (f, v) in h {
                r = r.bytes(f).bytes(v);
            }
            r
        }
        Value::Set(s) => {
            let mut r = RecBuf::begin(out, OP_VALUE).bytes(key).u8(T_SET);
            r = r.u32(s.len() as u32);
            for m in s {
                r = r.bytes(m);
            }
            r
        }
        Value::ZSet(z) => {
            let mut r = RecBuf::begin(out, OP_VALUE).bytes(key).u8(T_ZSET);
            r = r.u32(z.len() as u32);
            for (m, sc) in z.iter() {
                r = r.bytes(m).u64(sc.to_bits());
            }
            r
        }
    };
    r.u64(expire_at).finish()
}

/// A key's new deadline (0: none).
pub fn put_expire(out: &mut Vec<u8>, key: &[u8], at: u64) {
    RecBuf::begin(out, OP_EXPIRE).bytes(key).u64(at).finish()
}

/// A change to an aggregate.
pub fn put_mutate(out: &mut Vec<u8>, key: &[u8], m: &Mutation) {
    let r = RecBuf::begin(out, OP_MUTATE).bytes(key);
    fn list<'a>(mut r: RecBuf<'a>, items: &[Vec<u8>]) -> RecBuf<'a> {
        r = r.u32(items.len() as u32);
        for it in items {
            r = r.bytes(it);
        }
        r
    }
    let r = match m {
        Mutation::Push { left, items } => {
            list(r.u8(if *left { M_PUSH_LEFT } else { M_PUSH_RIGHT }), items)
        }
        Mutation::Pop { left, count } => r
            .u8(if *left { M_POP_LEFT } else { M_POP_RIGHT })
            .u64(*count),
        Mutation::HSet(pairs) => {
            let mut r = r.u8(M_HSET).u32(pairs.len() as u32);
            for (f, v) in pairs {
                r = r.bytes(f).bytes(v);
            }
            r
        }
        Mutation::HDel(fields) => list(r.u8(M_HDEL), fields),
        // Only an undo, never logged; were it, the same fields and values.
        Mutation::HInsertAt(items) => {
            let mut r = r.u8(M_HSET).u32(items.len() as u32);
            for (_, f, v) in items {
                r = r.bytes(f).bytes(v);
            }
            r
        }
        Mutation::SAdd(m) => list(r.u8(M_SADD), m),
        Mutation::SRem(m) => list(r.u8(M_SREM), m),
        Mutation::ZAdd(pairs) => {
            let mut r = r.u8(M_ZADD).u32(pairs.len() as u32);
            for (sc, m) in pairs {
                r = r.u64(sc.to_bits()).bytes(m);
            }
            r
        }
        Mutation::ZRem(m) => list(r.u8(M_ZREM), m),
    };
    r.finish()
}

/// A transaction's record: `records` (framed records, as the `put_*` functions write them) in
/// one record, so that a torn or failed write drops all of them and replay applies all or none.
pub fn put_multi(out: &mut Vec<u8>, records: &[u8]) {
    out.reserve(REC_HEADER + 5 + records.len());
    RecBuf::begin(out, OP_MULTI).bytes(records).finish()
}

pub fn put_flushall(out: &mut Vec<u8>) {
    RecBuf::begin(out, OP_FLUSHALL).finish()
}

fn put_end(out: &mut Vec<u8>, count: u64) {
    RecBuf::begin(out, OP_END).u64(count).finish()
}

/// One `SET` record on its own (tests and tools).
#[allow(dead_code)] // used by the tests
pub fn rec_set(key: &[u8], value: &[u8], expire_at: u64) -> Vec<u8> {
    let mut v = Vec::new();
    put_set(&mut v, key, value, expire_at);
    v
}

/// The most a request may hold (all its arguments, and how many) for its log record to stay
/// under the record limit that replay enforces; checked when the server starts.
pub fn check_request_limits(max_request_len: usize, max_array_len: usize) -> Result<(), String> {
    // payload: op byte, a count, a length prefix per argument, a deadline
    let worst = (max_request_len as u128) + 4 * (max_array_len as u128) + 64;
    if worst > MAX_RECORD as u128 {
        return Err(format!(
            "--max-request-len {max_request_len} with --max-array-len {max_array_len} allows requests whose log record would exceed the log's {} byte record limit (replay would refuse it); lower them",
            MAX_RECORD
        ));
    }
    Ok(())
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn owned(&mut self) -> Option<Vec<u8>> {
        self.bytes().map(<[u8]>::to_vec)
    }
    /// A count of items, each at least `min_size` bytes: a damaged count cannot make it
    /// allocate more than the record holds.
    fn count(&mut self, min_size: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.checked_mul(min_size)? <= self.0.len()).then_some(n)
    }
    fn list(&mut self) -> Option<Vec<Vec<u8>>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.owned()).collect()
    }
    /// A score (NaN is refused: no command stores one).
    fn score(&mut self) -> Option<f64> {
        let f = f64::from_bits(self.u64()?);
        (!f.is_nan()).then_some(f)
    }
    fn value(&mut self) -> Option<Value> {
        Some(match self.u8()? {
            T_LIST => Value::List(self.list()?.into()),
            T_HASH => {
                let n = self.count(8)?;
                let mut h = crate::value::Hash::with_capacity(n);
                for _ in 0..n {
                    h.insert(self.owned()?, self.owned()?);
                }
                Value::Hash(h)
            }
            T_SET => Value::Set(self.list()?.into_iter().collect()),
            T_ZSET => {
                let n = self.count(12)?;
                let mut z = ZSet::default();
                for _ in 0..n {
                    let m = self.owned()?;
                    z.insert(m, self.score()?);
                }
                Value::ZSet(Box::new(z))
            }
            _ => return None,
        })
    }
    fn mutation(&mut self) -> Option<Mutation> {
        Some(match self.u8()? {
            k @ (M_PUSH_LEFT | M_PUSH_RIGHT) => Mutation::Push {
                left: k == M_PUSH_LEFT,
                items: self.list()?,
            },
            k @ (M_POP_LEFT | M_POP_RIGHT) => Mutation::Pop {
                left: k == M_POP_LEFT,
                count: self.u64()?,
            },
            M_HSET => {
                let n = self.count(8)?;
                let pairs = (0..n)
                    .map(|_| Some((self.owned()?, self.owned()?)))
                    .collect::<Option<_>>()?;
                Mutation::HSet(pairs)
            }
            M_HDEL => Mutation::HDel(self.list()?),
            M_SADD => Mutation::SAdd(self.list()?),
            M_SREM => Mutation::SRem(self.list()?),
            M_ZADD => {
                let n = self.count(12)?;
                let pairs = (0..n)
                    .map(|_| Some((self.score()?, self.owned()?)))
                    .collect::<Option<_>>()?;
                Mutation::ZAdd(pairs)
            }
            M_ZREM => Mutation::ZRem(self.list()?),
            _ => return None,
        })
    }
}

fn decode(payload: &[u8]) -> Option<Op<'_>> {
    let (&op, rest) = payload.split_first()?;
    let mut r = Reader(rest);
    let op = match op {
        OP_SET => Op::Set {
            key: r.bytes()?,
            value: r.bytes()?,
            expire_at: r.u64()?,
        },
        OP_DEL => {
            let n = r.u32()? as usize;
            let mut keys = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                keys.push(r.bytes()?);
            }
            Op::Del(keys)
        }
        OP_MSET => {
            let n = r.u32()? as usize;
            let mut pairs = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                pairs.push((r.bytes()?, r.bytes()?));
            }
            Op::MSet(pairs)
        }
        OP_FLUSHALL => Op::FlushAll,
        OP_END => Op::End(r.u64()?),
        OP_VALUE => Op::Value {
            key: r.bytes()?,
            value: r.value()?,
            expire_at: r.u64()?,
        },
        OP_EXPIRE => Op::Expire {
            key: r.bytes()?,
            at: r.u64()?,
        },
        OP_MUTATE => Op::Mutate {
            key: r.bytes()?,
            m: r.mutation()?,
        },
        _ => return None,
    };
    if !r.0.is_empty() {
        return None;
    }
    Some(op)
}

/// How reading a record stream ended.
#[derive(Debug, PartialEq, Eq)]
enum StreamEnd {
    Clean,
    /// A record ran past the end of the file at this offset.
    Truncated(usize),
}

/// Calls `f` on every record of `data[start..]`; errors name `what` and the offset.
fn read_stream<'a>(
    data: &'a [u8],
    start: usize,
    what: &Path,
    mut f: impl FnMut(Op<'a>) -> Result<(), String>,
) -> Result<StreamEnd, String> {
    let mut at = start;
    while at < data.len() {
        let rest = &data[at..];
        if rest.len() < REC_HEADER {
            return Ok(StreamEnd::Truncated(at));
        }
        let len = u32::from_le_bytes(rest[0..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().unwrap());
        let hcrc = u32::from_le_bytes(rest[8..12].try_into().unwrap());
        if crc32fast::hash(&rest[0..8]) != hcrc || len > MAX_RECORD {
            return Err(format!(
                "{}: corrupt record header at offset {at}",
                what.display()
            ));
        }
        if rest.len() < REC_HEADER + len {
            return Ok(StreamEnd::Truncated(at));
        }
        let payload = &rest[REC_HEADER..REC_HEADER + len];
        if crc32fast::hash(payload) != crc {
            return Err(format!(
                "{}: corrupt record at offset {at} (checksum mismatch)",
                what.display()
            ));
        }
        let bad = || {
            format!(
                "{}: corrupt record at offset {at} (bad payload)",
                what.display()
            )
        };
        if payload.first() == Some(&OP_MULTI) {
            // A transaction: its records are checked whole before any of them is applied.
            let inner = Reader(&payload[1..])
                .bytes()
                .filter(|b| b.len() + 5 == payload.len());
            let inner = inner.ok_or_else(bad)?;
            let mut ops = Vec::new();
            let mut i = 0;
            while i < inner.len() {
                let rest = &inner[i..];
                let n = rest
                    .get(0..4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
                    .filter(|n| REC_HEADER + n <= rest.len())
                    .ok_or_else(bad)?;
                let body = &rest[REC_HEADER..REC_HEADER + n];
                if crc32fast::hash(body) != u32::from_le_bytes(rest[4..8].try_into().unwrap())
                    || body.first() == Some(&OP_MULTI)
                {
                    return Err(bad());
                }
                ops.push(decode(body).ok_or_else(bad)?);
                i += REC_HEADER + n;
            }
            for op in ops {
                f(op).map_err(|e| format!("{}: record at offset {at}: {e}", what.display()))?;
            }
            at += REC_HEADER + len;
            continue;
        }
        let op = decode(payload).ok_or_else(bad)?;
        f(op).map_err(|e| format!("{}: record at offset {at}: {e}", what.display()))?;
        at += REC_HEADER + len;
    }
    Ok(StreamEnd::Clean)
}

fn file_header(magic: &[u8; 8], id: u64) -> [u8; FILE_HEADER] {
    let mut h = [0u8; FILE_HEADER];
    h[..8].copy_from_slice(magic);
    h[8..].copy_from_slice(&id.to_le_bytes());
    h
}

fn snapshot_name(id: u64) -> String {
    format!("dump-{id}.kvs")
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Writes `data` to `path` through a temporary file, fsynced, then renamed into place.
fn write_new_file(dir: &Path, name: &str, data: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    fsync_dir(dir)
}

// ---- loading --------------------------------------------------------------------------------

/// What [`load`] found.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// The snapshot the log builds on (0: none).
    pub base: u64,
    pub snapshot_keys: u64,
    pub log_records: u64,
    /// Warnings to print (a dropped torn record, removed leftovers).
    pub warnings: Vec<String>,
}

/// Replays the snapshot and the log in `dir` through `apply` (creating an empty log if there is
/// none) and cuts a torn last record off the log. Errors describe what is wrong and where; the
/// server must not start then.
pub fn load(dir: &Path, mut apply: impl FnMut(Op<'_>)) -> Result<LoadReport, String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(AOF_NAME);
    let mut report = LoadReport::default();
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            write_new_file(dir, AOF_NAME, &file_header(AOF_MAGIC, 0))
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            file_header(AOF_MAGIC, 0).to_vec()
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if data.len() < FILE_HEADER || (&data[..8] != AOF_MAGIC && &data[..8] != AOF_MAGIC_V1) {
        return Err(format!(
            "{}: not a kvserver append-only file (bad header)",
            path.display()
        ));
    }
    let base = u64::from_le_bytes(data[8..16].try_into().unwrap());
    report.base = base;
    if base != 0 {
        let spath = dir.join(snapshot_name(base));
        let snap = fs::read(&spath).map_err(|e| {
            format!(
                "{} names snapshot {} which cannot be read: {e}",
                path.display(),
                spath.display()
            )
        })?;
        if snap.len() < FILE_HEADER
            || (&snap[..8] != SNAP_MAGIC && &snap[..8] != SNAP_MAGIC_V1)
            || snap[8..16] != base.to_le_bytes()
        {
            return Err(format!("{}: bad snapshot header", spath.display()));
        }
        let mut keys = 0u64;
        let mut end = None;
        let tail = read_stream(&snap, FILE_HEADER, &spath, |op| {
            if end.is_some() {
                return Err("data after the END record".into());
            }
            match op {
                Op::End(n) => end = Some(n),
                op @ (Op::Set { .. } | Op::Value { .. }) => {
                    keys += 1;
                    apply(op);
                }
                _ => return Err("unexpected record type in a snapshot".into()),
            }
            Ok(())
        })?;
        if tail != StreamEnd::Clean || end != Some(keys) {
            return Err(format!(
                "{}: snapshot is incomplete ({keys} keys read, END says {end:?})",
                spath.display()
            ));
        }
        report.snapshot_keys = keys;
    }
    let mut records = 0u64;
    let end = read_stream(&data, FILE_HEADER, &path, |op| {
        if matches!(op, Op::End(_)) {
            return Err("END record in the log".into());
        }
        records += 1;
        apply(op);
        Ok(())
    })?;
    report.log_records = records;
    if let StreamEnd::Truncated(at) = end {
        report.warnings.push(format!(
            "{}: dropped a truncated last record at offset {at} ({} bytes); the file is cut back to {at} bytes",
            path.display(),
            data.len() - at
        ));
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(at as u64).and_then(|_| f.sync_all()));
        f.map_err(|e| format!("cannot truncate {}: {e}", path.display()))?;
    }
    if &data[..8] == AOF_MAGIC_V1 {
        // The new records are about to be appended to it: mark it with the new version.
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.write_all_at(AOF_MAGIC, 0).and_then(|_| f.sync_all()));
        f.map_err(|e| format!("cannot update the header of {}: {e}", path.display()))?;
        report
            .warnings
            .push(format!("{}: format 001 read, marked 002", path.display()));
    }
    // Leftovers of an interrupted SAVE, and snapshots nothing refers to any more.
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale_tmp =
                name.ends_with(".tmp") && (name.starts_with("dump-") || name.starts_with(AOF_NAME));
            let stale_dump =
                name.starts_with("dump-") && name.ends_with(".kvs") && name != snapshot_name(base);
            if stale_tmp || stale_dump {
                let _ = fs::remove_file(e.path());
                report.warnings.push(format!("removed leftover {name}"));
            }
        }
    }
    Ok(report)
}

// ---- the data directory lock ------------------------------------------------------------

/// Name of the lock file in `--dir`.
pub const LOCK_NAME: &str = "kvserver.lock";

/// An exclusive `flock` on `--dir`, held as long as the server runs (the kernel drops it when
/// the process dies, however it dies).
pub struct DirLock {
    _file: fs::File,
}

/// Creates `dir` if needed and locks it, before anything in it is read or changed: a second
/// server on the same directory stops here instead of replaying, truncating or deleting the
/// files of the one that runs.
pub fn lock_dir(dir: &Path) -> Result<DirLock, String> {
    use std::os::unix::io::AsRawFd;
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(LOCK_NAME);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            format!(
                "{} is in use by another kvserver (locked: {}); each server needs its own --dir",
                dir.display(),
                path.display()
            )
        } else {
            format!("cannot lock {}: {e}", path.display())
        });
    }
    Ok(DirLock { _file: file })
}

// ---- the live log: group commit ------------------------------------------------------------

/// Records appended inside write critical sections and not yet handed to the file.
struct Pending {
    /// Whole records, in the order of the critical sections that appended them.
    buf: Vec<u8>,
    /// While a `SAVE` runs: the parts of the same records that belong in the new log.
    rewrite: Vec<u8>,
    /// `Some(epoch)` while a `SAVE` runs.
    rewrite_epoch: Option<u64>,
    /// Sequence number of the last record appended (records are numbered from 1).
    seq: u64,
    /// Writes are refused until the server is restarted: a batch failed under `always`, or
    /// cutting a failed batch back off the file failed too (what the file holds is unknown).
    broken: Option<String>,
    /// A batch failed and the changes of its records (and of every record after it) are
    /// still in memory: writes are refused until the store has undone them
    /// ([`Log::rolled_back`]).
    rollback_from: Option<u64>,
    /// The records that failed, oldest first (at most [`MAX_FAILURES`] ranges).
    failures: std::collections::VecDeque<Failure>,
    /// An fsync (of the log, or of the directory after a `SAVE`) failed: writes are refused
    /// until a retry succeeds, as Redis does.
    sync_error: Option<String>,
    /// The directory still needs an fsync to make the last `SAVE`'s renames durable.
    dir_unsynced: bool,
}

/// Records `from..=to` failed; `msg` is the error their commands get.
#[derive(Debug, Clone)]
struct Failure {
    from: u64,
    to: u64,
    msg: String,
}

/// Failed ranges remembered (a waiter checks its record within moments of appending it).
const MAX_FAILURES: usize = 10_000;

/// The file side, held by the one task that writes a batch.
struct Writer {
    file: Arc<fs::File>,
    len: u64,
    base: u64,
    rewrite: Option<RewriteFile>,
    /// An empty buffer kept for the next batch swap.
    spare: Vec<u8>,
}

struct RewriteFile {
    file: Arc<fs::File>,
    len: u64,
    failed: Option<String>,
}

/// Counters for `INFO`.
#[derive(Default)]
pub struct LogStats {
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub batches: AtomicU64,
    pub fsyncs: AtomicU64,
    pub rewrites: AtomicU64,
    pub write_errors: AtomicU64,
    pub fsync_errors: AtomicU64,
}

struct Inner {
    dir: PathBuf,
    fsync: Fsync,
    io_mode: LogIo,
    pending: std::sync::Mutex<Pending>,
    writer: Arc<tokio::sync::Mutex<Writer>>,
    /// Last sequence number appended / resolved (written, under `always` fsynced, or failed).
    appended: AtomicU64,
    durable: AtomicU64,
    /// The last sequence number of the latest failed range (0: none ever failed).
    failed_to: AtomicU64,
    /// Whether a rollback is pending (mirrors `Pending::rollback_from`, for a lock-free check).
    rollback_pending: std::sync::atomic::AtomicBool,
    /// Completed rollbacks: a read that ran across one may have seen undone writes.
    rollbacks: AtomicU64,
    /// Woken after each batch (and whenever the writer is released).
    flushed: tokio::sync::Notify,
    next_epoch: AtomicU64,
    stats: LogStats,
    _lock: DirLock,
}

/// The append-only log the server writes while it runs, with group commit:
///
/// - [`Log::append`] is called inside a write critical section; it only encodes the record
///   into the current batch (so the order of the records is the order of the critical
///   sections) and returns the record's sequence number;
/// - [`Log::wait`] is called by the connection before it replies: the first waiter takes the
///   whole batch and writes it with one `write(2)` (and, under `always`, one `fsync`), the
///   others wait for it; a failed batch is cut back off the file and fails every record in it
///   and after it.
pub struct Log {
    inner: Arc<Inner>,
}

/// Why [`Log::wait`] failed: every record from `from` on is not in the log.
#[derive(Debug, Clone)]
pub struct Failed {
    pub from: u64,
    pub msg: String,
}

/// Handed out by [`Log::begin_rewrite`]; the snapshot being written.
pub struct Snapshot {
    pub epoch: u64,
    file: tokio::fs::File,
    tmp: PathBuf,
    keys: u64,
    /// [`Log::rollbacks`] when it began: a rollback meanwhile may have undone writes the
    /// snapshot holds.
    rollbacks: u64,
}

impl Snapshot {
    /// Appends the `SET` records of one shard (built by the caller while it holds the shard's
    /// read lock, which it keeps across this write).
    pub async fn write_shard(&mut self, records: &[u8], keys: u64) -> Result<(), String> {
        self.file
            .write_all(records)
            .await
            .map_err(|e| format!("ERR snapshot write failed: {e}"))?;
        self.keys += keys;
        Ok(())
    }
}

impl Inner {
    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        // A panic while the lock is held cannot leave `Pending` half-updated in a way that
        // matters more than the panic itself; carry on with the data.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Some` once record `seq` is resolved: written, or failed (with its error).
    fn check(&self, seq: u64) -> Option<Result<(), Failed>> {
        // `fail` publishes `failed_to` before `durable`: once `durable` covers `seq`, a
        // failure that covers it is visible too. A failure sets `durable` to its last record,
        // so an unresolved record cannot have failed yet.
        if seq > self.durable.load(Ordering::Acquire) {
            return None;
        }
        if seq > self.failed_to.load(Ordering::Acquire) {
            return Some(Ok(()));
        }
        let p = self.lock_pending();
        match p
            .failures
            .iter()
            .rev()
            .find(|f| f.from <= seq && seq <= f.to)
        {
            Some(f) => Some(Err(Failed {
                from: f.from,
                msg: f.msg.clone(),
            })),
            None => Some(Ok(())),
        }
    }

    /// Fails everything after the last written record (the batch being written and the
    /// records appended since) and refuses writes until the store has undone their changes.
    /// `unknown`: the batch could not be cut back off the file, so it may be in the log.
    fn fail(&self, p: &mut Pending, msg: String, unknown: bool) {
        p.buf.clear();
        p.rewrite.clear();
        let from = self.durable.load(Ordering::Acquire) + 1;
        let to = p.seq;
        let reply = if unknown {
            format!("IOERR {msg}; the outcome of this write is unknown: it may be in the log and be back after a restart (writes are refused until the server is restarted)")
        } else {
            format!("IOERR {msg}; the write was not logged and its change was undone")
        };
        if unknown || self.fsync == Fsync::Always {
            p.broken.get_or_insert(msg);
        }
        if p.failures.len() >= MAX_FAILURES {
            p.failures.pop_front();
        }
        p.failures.push_back(Failure {
            from,
            to,
            msg: reply,
        });
        p.rollback_from.get_or_insert(from);
        self.rollback_pending.store(true, Ordering::Release);
        self.failed_to.store(to, Ordering::Release);
        self.durable.store(to, Ordering::Release);
    }

    /// Writes the current batch (one `write(2)`, plus one `fsync` under `always`). Called with
    /// the writer held; never suspends, so the caller can run it inline or in the blocking pool.
    fn write_batch(&self, w: &mut Writer) {
        let (mut buf, rewrite, upto) = {
            let mut p = self.lock_pending();
            if p.broken.is_some() || p.rollback_from.is_some() {
                p.buf.clear();
                p.rewrite.clear();
                return;
            }
            if p.seq <= self.durable.load(Ordering::Acquire) {
                return;
            }
            let buf = std::mem::replace(&mut p.buf, std::mem::take(&mut w.spare));
            let rewrite = std::mem::take(&mut p.rewrite);
            (buf, rewrite, p.seq)
        };
        let old_len = w.len;
        let mut res = (&*w.file).write_all(&buf).map_err(|e| {
            self.stats.write_errors.fetch_add(1, Ordering::Relaxed);
            format!("append-only log write failed: {e}")
        });
        if res.is_ok() && self.fsync == Fsync::Always {
            res = w.file.sync_data().map_err(|e| {
                self.stats.fsync_errors.fetch_add(1, Ordering::Relaxed);
                format!("append-only log fsync failed: {e}")
            });
            if res.is_ok() {
                self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Err(msg) = res {
            // No partial batch stays behind: cut the file back to where the batch began.
            // (After a failed fsync the pages may or may not reach the disk; cutting them
            // off means a restart never shows a write whose client got an error.)
            let (msg, unknown) = match w.file.set_len(old_len).and_then(|_| w.file.sync_data()) {
                Ok(()) => (msg, false),
                Err(e2) => (
                    format!("{msg}; cutting the batch back off the file failed too: {e2}"),
                    true,
                ),
            };
            let mut p = self.lock_pending();
            self.fail(&mut p, msg, unknown);
            return;
        }
        w.len += buf.len() as u64;
        if let Some(rw) = w.rewrite.as_mut() {
            if rw.failed.is_none() && !rewrite.is_empty() {
                match (&*rw.file).write_all(&rewrite) {
                    Ok(()) => rw.len += rewrite.len() as u64,
                    Err(e) => rw.failed = Some(format!("rewrite log write failed: {e}")),
                }
            }
        }
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.durable.store(upto, Ordering::Release);
        buf.clear();
        if buf.capacity() <= 1 << 20 {
            w.spare = buf;
        }
    }
}

/// The writer, released before the waiters are woken (a woken waiter may have to write the
/// next batch itself, so it must find the writer free).
struct Held {
    guard: Option<tokio::sync::OwnedMutexGuard<Writer>>,
    inner: Arc<Inner>,
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.inner.flushed.notify_waiters();
    }
}

impl std::ops::Deref for Held {
    type Target = Writer;
    fn deref(&self) -> &Writer {
        self.guard.as_ref().unwrap()
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Writer {
        self.guard.as_mut().unwrap()
    }
}

/// Why the log refuses records now, if it does.
fn refusal(p: &Pending) -> Result<(), String> {
    if let Some(e) = &p.broken {
        return Err(format!(
            "MISCONF the append-only log failed ({e}); writes are refused until the server is restarted"
        ));
    }
    if p.rollback_from.is_some() {
        return Err(
            "MISCONF the append-only log failed; writes are refused while the writes it refused are undone".into(),
        );
    }
    if let Some(e) = &p.sync_error {
        return Err(format!(
            "MISCONF Errors writing to the AOF file: {e}; writes are refused until an fsync succeeds"
        ));
    }
    Ok(())
}

impl Log {
    /// Opens the log that [`load`] just replayed; `lock` is the directory's lock, held as long
    /// as the log lives.
    pub fn open(
        dir: &Path,
        base: u64,
        fsync: Fsync,
        io_mode: LogIo,
        lock: DirLock,
    ) -> Result<Log, String> {
        let path = dir.join(AOF_NAME);
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
            .len();
        Ok(Log {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                fsync,
                io_mode,
                pending: std::sync::Mutex::new(Pending {
                    buf: Vec::new(),
                    rewrite: Vec::new(),
                    rewrite_epoch: None,
                    seq: 0,
                    broken: None,
                    rollback_from: None,
                    failures: std::collections::VecDeque::new(),
                    sync_error: None,
                    dir_unsynced: false,
                }),
                writer: Arc::new(tokio::sync::Mutex::new(Writer {
                    file: Arc::new(file),
                    len,
                    base,
                    rewrite: None,
                    spare: Vec::new(),
                })),
                appended: AtomicU64::new(0),
                durable: AtomicU64::new(0),
                failed_to: AtomicU64::new(0),
                rollback_pending: std::sync::atomic::AtomicBool::new(false),
                rollbacks: AtomicU64::new(0),
                flushed: tokio::sync::Notify::new(),
                next_epoch: AtomicU64::new(base + 1),
                stats: LogStats::default(),
                _lock: lock,
            }),
        })
    }

    pub fn fsync_policy(&self) -> Fsync {
        self.inner.fsync
    }

    pub fn stats(&self) -> &LogStats {
        &self.inner.stats
    }

    /// Appends one record to the current batch; called inside the write critical section of
    /// every shard the record touches, *before* the change is applied (an error means: change
    /// nothing). `rec` encodes the whole record; `rewrite`, asked only while a `SAVE` runs,
    /// encodes the part that belongs in the new log (the keys of shards already snapshotted in
    /// that epoch), or nothing. Returns the record's sequence number for [`Log::wait`].
    pub fn append(
        &self,
        rec: impl FnOnce(&mut Vec<u8>),
        rewrite: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<u64, String> {
        let mut guard = self.inner.lock_pending();
        let p = &mut *guard;
        refusal(p)?;
        let start = p.buf.len();
        rec(&mut p.buf);
        if p.buf.len() - start - REC_HEADER > MAX_RECORD {
            p.buf.truncate(start);
            return Err(format!(
                "ERR the command's log record would exceed the {MAX_RECORD} byte record limit"
            ));
        }
        if let Some(epoch) = p.rewrite_epoch {
            rewrite(epoch, &mut p.rewrite);
        }
        p.seq += 1;
        self.inner.appended.store(p.seq, Ordering::Release);
        self.inner.stats.records.fetch_add(1, Ordering::Relaxed);
        Ok(p.seq)
    }

    /// Whether [`Log::append`] would accept a record now (a transaction's commands ask before
    /// they change anything; their one record is appended at the end), and the epoch of the
    /// `SAVE` running now, if any (whose `rewrite` part a record would get).
    pub fn accepts(&self) -> Result<Option<u64>, String> {
        let p = self.inner.lock_pending();
        refusal(&p)?;
        Ok(p.rewrite_epoch)
    }

    /// Makes the log refuse records from now on, as after a failed fsync (the tests of what
    /// a refusal undoes; a later successful [`Log::sync`] lifts it).
    #[cfg(test)]
    pub(crate) fn refuse_for_test(&self) {
        self.inner.lock_pending().sync_error = Some("injected by a test".into());
    }

    /// The sequence number of the last record appended so far.
    pub fn last_seq(&self) -> u64 {
        self.inner.appended.load(Ordering::Acquire)
    }

    /// Whether writes are accepted now (`INFO persistence`: `aof_last_write_status`).
    pub fn writes_accepted(&self) -> bool {
        let p = self.inner.lock_pending();
        p.broken.is_none() && p.rollback_from.is_none() && p.sync_error.is_none()
    }

    /// Whether record `seq` (already waited for with [`Log::wait`]) failed, and its error.
    pub fn failure(&self, seq: u64) -> Option<String> {
        match self.inner.check(seq) {
            Some(Err(f)) => Some(f.msg),
            _ => None,
        }
    }

    /// Completed rollbacks so far: a read that ran while this changed may have seen a write
    /// that was undone.
    pub fn rollbacks(&self) -> u64 {
        self.inner.rollbacks.load(Ordering::Acquire)
    }

    /// `Some(from)` while the changes of the failed records `from..` are still in memory.
    pub fn rollback_from(&self) -> Option<u64> {
        if !self.inner.rollback_pending.load(Ordering::Acquire) {
            return None;
        }
        self.inner.lock_pending().rollback_from
    }

    /// Undo information of records up to this one may be dropped: they are in the log.
    pub fn undo_horizon(&self) -> u64 {
        // `fail` publishes `rollback_pending` before it moves `durable` over the failed
        // records: `durable` read first, then no rollback pending, is a horizon no failed
        // record is under (and one read after a rollback is too: the failed records' undo
        // information was taken, under every shard's write lock, before the flag was cleared).
        let durable = self.inner.durable.load(Ordering::Acquire);
        if !self.inner.rollback_pending.load(Ordering::Acquire) {
            return durable;
        }
        let p = self.inner.lock_pending();
        match p.rollback_from {
            Some(from) => from - 1,
            None => self.inner.durable.load(Ordering::Acquire),
        }
    }

    /// Called by the store once it has undone the changes of every failed record (holding
    /// every shard's write lock): writes are accepted again after the next successful fsync
    /// (under `everysec` and `no`; the once-a-second task retries it), or never again before
    /// a restart (under `always`, or when the failed batch could not be cut back off the file).
    pub fn rolled_back(&self) {
        let inner = &self.inner;
        let mut p = inner.lock_pending();
        if p.rollback_from.take().is_none() {
            return;
        }
        inner.rollback_pending.store(false, Ordering::Release);
        // A marker record, written by nobody: a read that starts from here on cannot have
        // seen an undone write, and waits on a sequence number that did not fail.
        p.seq += 1;
        inner.appended.store(p.seq, Ordering::Release);
        inner.durable.store(p.seq, Ordering::Release);
        inner.rollbacks.fetch_add(1, Ordering::AcqRel);
        if p.broken.is_none() {
            let msg = p
                .failures
                .back()
                .map_or_else(String::new, |f| f.msg.clone());
            p.sync_error.get_or_insert(format!(
                "the last batch failed ({msg}); writes resume once an fsync of the log succeeds"
            ));
        }
    }

    /// Waits until record `seq` (and every one before it) is in the file (under `always`: on
    /// disk), writing the batch itself if no one else is.
    pub async fn wait(&self, seq: u64) -> Result<(), Failed> {
        let inner = &self.inner;
        // Fast path (reads, and writes already covered by another task's batch): no waiter
        // registration, just two atomic loads.
        if let Some(r) = inner.check(seq) {
            return r;
        }
        loop {
            let notified = inner.flushed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = inner.check(seq) {
                return r;
            }
            match inner.writer.clone().try_lock_owned() {
                Ok(guard) => self.flush(guard).await,
                Err(_) => notified.await,
            }
        }
    }

    /// Writes the current batch with the writer held. Cancel-safe: a dropped caller cannot
    /// leave a batch half handled, because nothing here suspends between taking the batch and
    /// publishing its outcome (inline), or all of it runs in the blocking pool (fsync, tokio-fs).
    async fn flush(&self, guard: tokio::sync::OwnedMutexGuard<Writer>) {
        let mut held = Held {
            guard: Some(guard),
            inner: self.inner.clone(),
        };
        if self.inner.io_mode == LogIo::Direct && self.inner.fsync != Fsync::Always {
            let inner = self.inner.clone();
            inner.write_batch(&mut held);
        } else {
            let _ = tokio::task::spawn_blocking(move || {
                let inner = held.inner.clone();
                inner.write_batch(&mut held);
                drop(held);
            })
            .await;
        }
    }

    /// Writes every pending record, then fsyncs the log (and the directory if a `SAVE` left it
    /// unsynced). The everysec timer and shutdown call this; on success it clears an earlier
    /// fsync error, on failure it sets one (writes are refused meanwhile).
    pub async fn sync(&self) -> Result<(), String> {
        let inner = &self.inner;
        let _ = self.wait(self.last_seq()).await;
        let (file, dir_unsynced) = {
            let held = Held {
                guard: Some(inner.writer.clone().lock_owned().await),
                inner: inner.clone(),
            };
            (held.file.clone(), inner.lock_pending().dir_unsynced)
        };
        let dir = inner.dir.clone();
        let res = tokio::task::spawn_blocking(move || -> Result<(), String> {
            file.sync_data()
                .map_err(|e| format!("fsync of the append-only log failed: {e}"))?;
            if dir_unsynced {
                fsync_dir(&dir).map_err(|e| format!("fsync of {} failed: {e}", dir.display()))?;
            }
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        let mut p = inner.lock_pending();
        match &res {
            Ok(()) => {
                inner.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                if dir_unsynced {
                    p.dir_unsynced = false;
                }
                // A SAVE may have left the directory unsynced while this ran: its error stays
                // until a pass that synced the directory succeeds.
                if !p.dir_unsynced {
                    p.sync_error = None;
                }
            }
            Err(e) => {
                inner.stats.fsync_errors.fetch_add(1, Ordering::Relaxed);
                p.sync_error = Some(e.clone());
            }
        }
        res
    }

    /// Whether the timer task has something to retry (an fsync error, an unsynced directory).
    pub fn needs_sync(&self) -> bool {
        let p = self.inner.lock_pending();
        p.sync_error.is_some() || p.dir_unsynced
    }

    /// Current size of the log file and the snapshot it builds on.
    pub async fn size_and_base(&self) -> (u64, u64) {
        let held = Held {
            guard: Some(self.inner.writer.clone().lock_owned().await),
            inner: self.inner.clone(),
        };
        (held.len, held.base)
    }

    /// Starts a `SAVE`: creates the new log (based on the new snapshot) and the snapshot file.
    /// From now on [`Log::append`] asks its caller for the part of each record that belongs in
    /// the new log. The caller must then snapshot every shard and call [`Log::finish_rewrite`]
    /// or [`Log::abort_rewrite`].
    pub async fn begin_rewrite(&self) -> Result<Snapshot, String> {
        let inner = &self.inner;
        let mut held = Held {
            guard: Some(inner.writer.clone().lock_owned().await),
            inner: inner.clone(),
        };
        if held.rewrite.is_some() {
            return Err("ERR a SAVE is already in progress".into());
        }
        {
            let p = inner.lock_pending();
            if let Some(e) = &p.broken {
                return Err(format!("MISCONF the append-only log failed ({e})"));
            }
            if p.rollback_from.is_some() {
                return Err(
                    "MISCONF the append-only log failed; its failed writes are being undone".into(),
                );
            }
        }
        let epoch = inner.next_epoch.fetch_add(1, Ordering::Relaxed);
        let tmp_log = inner.dir.join(format!("{AOF_NAME}.tmp"));
        let tmp_snap = inner.dir.join(format!("{}.tmp", snapshot_name(epoch)));
        let io_err = |e: io::Error| format!("ERR cannot start SAVE: {e}");
        fs::write(&tmp_log, file_header(AOF_MAGIC, epoch)).map_err(io_err)?;
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&tmp_log)
            .map_err(io_err)?;
        let mut snap = tokio::fs::File::create(&tmp_snap).await.map_err(io_err)?;
        snap.write_all(&file_header(SNAP_MAGIC, epoch))
            .await
            .map_err(io_err)?;
        held.rewrite = Some(RewriteFile {
            file: Arc::new(file),
            len: FILE_HEADER as u64,
            failed: None,
        });
        let mut p = inner.lock_pending();
        p.rewrite_epoch = Some(epoch);
        p.rewrite.clear();
        Ok(Snapshot {
            epoch,
            file: snap,
            tmp: tmp_snap,
            keys: 0,
            rollbacks: self.rollbacks(),
        })
    }

    /// Completes a `SAVE` once every shard is in the snapshot: makes the snapshot durable, then
    /// atomically replaces the log with the new one (the rename is the commit point).
    ///
    /// Before the commit point any error aborts the `SAVE` (the old log got every record all
    /// along). After it the new log *is* the log whatever happens next: a failed directory
    /// fsync is reported, and writes are refused until a retry of it succeeds.
    pub async fn finish_rewrite(&self, mut snap: Snapshot) -> Result<u64, String> {
        let res: io::Result<()> = async {
            let mut end = Vec::new();
            put_end(&mut end, snap.keys);
            snap.file.write_all(&end).await?;
            snap.file.flush().await?;
            snap.file.sync_all().await
        }
        .await;
        if let Err(e) = res {
            self.abort_rewrite(&snap).await;
            return Err(format!("ERR snapshot write failed: {e}"));
        }
        // Every record whose change the snapshot holds was appended by now: it must be in the
        // old log (and its part in the new one) before the new log may replace it, or a write
        // that failed could come back through the snapshot.
        if let Err(f) = self.wait(self.last_seq()).await {
            self.abort_rewrite(&snap).await;
            return Err(f.msg);
        }
        if self.rollbacks() != snap.rollbacks {
            self.abort_rewrite(&snap).await;
            return Err(
                "ERR SAVE aborted: a log failure undid writes while the snapshot was taken".into(),
            );
        }
        let inner = self.inner.clone();
        let held = Held {
            guard: Some(inner.writer.clone().lock_owned().await),
            inner: inner.clone(),
        };
        let tmp = snap.tmp.clone();
        let epoch = snap.epoch;
        let committed = tokio::task::spawn_blocking(move || {
            let mut held = held;
            inner.commit_rewrite(&mut held, &tmp, epoch)
        })
        .await
        .unwrap_or_else(|e| Err((false, format!("ERR SAVE failed: {e}"))));
        match committed {
            Ok(()) => {
                self.inner.stats.rewrites.fetch_add(1, Ordering::Relaxed);
                Ok(snap.keys)
            }
            Err((true, e)) => {
                self.inner.stats.rewrites.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
            Err((false, e)) => {
                self.abort_rewrite(&snap).await;
                Err(e)
            }
        }
    }

    /// Gives up a `SAVE`: the old log stays authoritative (it got every write all along).
    pub async fn abort_rewrite(&self, snap: &Snapshot) {
        let inner = &self.inner;
        let mut held = Held {
            guard: Some(inner.writer.clone().lock_owned().await),
            inner: inner.clone(),
        };
        held.rewrite = None;
        {
            let mut p = inner.lock_pending();
            p.rewrite_epoch = None;
            p.rewrite.clear();
        }
        drop(held);
        let _ = fs::remove_file(&snap.tmp);
        let _ = fs::remove_file(inner.dir.join(snapshot_name(snap.epoch)));
        let _ = fs::remove_file(inner.dir.join(format!("{AOF_NAME}.tmp")));
    }
}

impl Inner {
    /// The file work of [`Log::finish_rewrite`], with the writer held (no batch is written
    /// meanwhile; appends go on into the pending batch). `Err((committed, message))`.
    fn commit_rewrite(
        &self,
        w: &mut Writer,
        snap_tmp: &Path,
        epoch: u64,
    ) -> Result<(), (bool, String)> {
        let abort = |e: String| Err((false, e));
        let Some(rw) = w.rewrite.as_ref() else {
            return abort("ERR no SAVE in progress".into());
        };
        if let Some(e) = &rw.failed {
            return abort(format!("ERR {e}"));
        }
        if let Err(e) = rw.file.sync_data() {
            return abort(format!("ERR fsync of the new log failed: {e}"));
        }
        let final_snap = self.dir.join(snapshot_name(epoch));
        if let Err(e) = fs::rename(snap_tmp, &final_snap) {
            return abort(format!("ERR {e}"));
        }
        if let Err(e) = fsync_dir(&self.dir) {
            return abort(format!("ERR fsync of {} failed: {e}", self.dir.display()));
        }
        if let Err(e) = fs::rename(
            self.dir.join(format!("{AOF_NAME}.tmp")),
            self.dir.join(AOF_NAME),
        ) {
            return abort(format!("ERR {e}"));
        }
        // The commit point: the name now points at the new log, which builds on the new
        // snapshot. Switch to it, whatever fails below.
        let rw = w.rewrite.take().expect("checked above");
        {
            let mut p = self.lock_pending();
            // The records not written yet go to the new log only, as their new-log parts.
            p.buf = std::mem::take(&mut p.rewrite);
            p.rewrite_epoch = None;
            p.dir_unsynced = true;
        }
        let old_base = w.base;
        w.file = rw.file;
        w.len = rw.len;
        w.base = epoch;
        match fsync_dir(&self.dir) {
            Ok(()) => {
                self.lock_pending().dir_unsynced = false;
                if old_base != 0 {
                    let _ = fs::remove_file(self.dir.join(snapshot_name(old_base)));
                }
                Ok(())
            }
            Err(e) => {
                // Until the rename is durable the old snapshot stays (a crash could bring the
                // old log's name back), and no write is acknowledged.
                let msg = format!(
                    "the new log is in place but fsync of {} failed: {e}",
                    self.dir.display()
                );
                self.stats.fsync_errors.fetch_add(1, Ordering::Relaxed);
                self.lock_pending().sync_error = Some(msg.clone());
                Err((
                    true,
                    format!("ERR SAVE: {msg}; writes are refused until a retry succeeds"),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_record_crc_is_crc32fast_s() {
        let data: Vec<u8> = (0..600u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in 0..data.len() {
            for start in [0, 1, 3, 7] {
                let b = &data[start.min(len)..len];
                assert_eq!(super::crc32(b), crc32fast::hash(b), "{} bytes", b.len());
            }
        }
    }

    use super::*;

    #[test]
    fn roundtrip() {
        let mut data = file_header(AOF_MAGIC, 0).to_vec();
        put_set(&mut data, b"k", b"v", 7);
        put_del(&mut data, [&b"a"[..], b"b"].into_iter());
        put_mset(&mut data, [(&b"x"[..], &b"1"[..])].into_iter());
        let before_last = data.len();
        put_flushall(&mut data);
        let mut ops = Vec::new();
        let end = read_stream(&data, FILE_HEADER, Path::new("t"), |op| {
            ops.push(format!("{op:?}"));
            Ok(())
        })
        .unwrap();
        assert_eq!(end, StreamEnd::Clean);
        assert_eq!(ops.len(), 4);
        // every cut inside the last record is a truncation, never an error
        let last = before_last;
        for cut in last + 1..data.len() {
            let end = read_stream(&data[..cut], FILE_HEADER, Path::new("t"), |_| Ok(())).unwrap();
            assert_eq!(end, StreamEnd::Truncated(last));
        }
        // any flipped byte in the first record is an error
        for i in FILE_HEADER..FILE_HEADER + rec_set(b"k", b"v", 7).len() {
            let mut bad = data.clone();
            bad[i] ^= 0x40;
            assert!(read_stream(&bad, FILE_HEADER, Path::new("t"), |_| Ok(())).is_err());
        }
    }
}
