//! The records: their framing, checksum, encoding (`put_*`) and decoding.

use crate::value::{Mutation, Value, ZSet};

pub(super) const AOF_MAGIC: &[u8; 8] = b"KVAOF002";
pub(super) const SNAP_MAGIC: &[u8; 8] = b"KVSNAP02";
/// The first format (strings only), still read.
pub(super) const AOF_MAGIC_V1: &[u8; 8] = b"KVAOF001";
pub(super) const SNAP_MAGIC_V1: &[u8; 8] = b"KVSNAP01";
pub const FILE_HEADER: usize = 16;
pub(super) const REC_HEADER: usize = 12;
/// No record may claim more than this (a damaged length is caught before this check, this is a
/// second line of defence against allocating absurd sizes).
pub const MAX_RECORD: usize = 1 << 31;

pub const AOF_NAME: &str = "appendonly.aof";

pub(super) const OP_SET: u8 = 1;
pub(super) const OP_DEL: u8 = 2;
pub(super) const OP_MSET: u8 = 3;
pub(super) const OP_FLUSHALL: u8 = 4;
pub(super) const OP_END: u8 = 5;
pub(super) const OP_VALUE: u8 = 6;
pub(super) const OP_EXPIRE: u8 = 7;
pub(super) const OP_MUTATE: u8 = 8;
/// A transaction (`EXEC`): the framed records of its commands, replayed together or not at all.
pub(super) const OP_MULTI: u8 = 9;

// The type bytes of `VALUE` and the kind bytes of `MUTATE`.
pub(super) const T_LIST: u8 = 1;
pub(super) const T_HASH: u8 = 2;
pub(super) const T_SET: u8 = 3;
pub(super) const T_ZSET: u8 = 4;
pub(super) const M_PUSH_LEFT: u8 = 1;
pub(super) const M_PUSH_RIGHT: u8 = 2;
pub(super) const M_POP_LEFT: u8 = 3;
pub(super) const M_POP_RIGHT: u8 = 4;
pub(super) const M_HSET: u8 = 5;
pub(super) const M_HDEL: u8 = 6;
pub(super) const M_SADD: u8 = 7;
pub(super) const M_SREM: u8 = 8;
pub(super) const M_ZADD: u8 = 9;
pub(super) const M_ZREM: u8 = 10;

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
pub(super) struct RecBuf<'a> {
    pub(super) out: &'a mut Vec<u8>,
    pub(super) start: usize,
}

impl<'a> RecBuf<'a> {
    pub(super) fn begin(out: &'a mut Vec<u8>, op: u8) -> RecBuf<'a> {
        let start = out.len();
        out.extend_from_slice(&[0; REC_HEADER]);
        out.push(op);
        RecBuf { out, start }
    }
    pub(super) fn bytes(self, b: &[u8]) -> Self {
        self.out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.out.extend_from_slice(b);
        self
    }
    pub(super) fn u8(self, v: u8) -> Self {
        self.out.push(v);
        self
    }
    pub(super) fn u32(self, v: u32) -> Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u64(self, v: u64) -> Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn finish(self) {
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
pub(super) fn crc32(bytes: &[u8]) -> u32 {
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
pub(super) static CRC_TABLES: [[u32; 256]; 8] = {
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

pub(super) fn put_end(out: &mut Vec<u8>, count: u64) {
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

pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    pub(super) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub(super) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub(super) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub(super) fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub(super) fn owned(&mut self) -> Option<Vec<u8>> {
        self.bytes().map(<[u8]>::to_vec)
    }
    /// A count of items, each at least `min_size` bytes: a damaged count cannot make it
    /// allocate more than the record holds.
    pub(super) fn count(&mut self, min_size: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.checked_mul(min_size)? <= self.0.len()).then_some(n)
    }
    pub(super) fn list(&mut self) -> Option<Vec<Vec<u8>>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.owned()).collect()
    }
    /// A score (NaN is refused: no command stores one).
    pub(super) fn score(&mut self) -> Option<f64> {
        let f = f64::from_bits(self.u64()?);
        (!f.is_nan()).then_some(f)
    }
    pub(super) fn value(&mut self) -> Option<Value> {
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
    pub(super) fn mutation(&mut self) -> Option<Mutation> {
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

pub(super) fn decode(payload: &[u8]) -> Option<Op<'_>> {
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
