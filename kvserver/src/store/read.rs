//! The store's reads.

use std::hash::BuildHasher;

use super::{involved, now_ms, Clock, Entry, KeyspaceInfo, Shard, Store, StoreResult};
use crate::aof;
use crate::glob;
use crate::lock::ShardLock;
use crate::value::Value;

impl<L: ShardLock<Shard>> Store<L> {
    // ---- reads ------------------------------------------------------------------------------

    /// Calls `f` with the live string value of `key`, under the shard's read lock;
    /// `WRONGTYPE` if the key holds another type.
    pub async fn get<R>(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> StoreResult<R> {
        let (i, h) = self.locate(key);
        let g = self.rlock(i).await;
        let mut clock = Clock::new();
        let v = g.get(h, key).filter(|e| clock.live(e));
        Ok(f(v.map(|e| e.value.bytes()).transpose()?))
    }

    /// Calls `f` with the live value of `key` (any type), under the shard's read lock.
    pub async fn read<R>(&self, key: &[u8], f: impl FnOnce(Option<&Value>) -> R) -> R {
        let (i, h) = self.locate(key);
        let g = self.rlock(i).await;
        let mut clock = Clock::new();
        f(g.get(h, key).filter(|e| clock.live(e)).map(|e| &e.value))
    }

    /// What `WATCH` remembers of a key: a hash of its live value and deadline (`None`: absent
    /// or expired). `EXEC` compares it again under its locks.
    pub async fn fingerprint(&self, key: &[u8]) -> Option<u64> {
        let (i, h) = self.locate(key);
        let g = self.rlock(i).await;
        let mut clock = Clock::new();
        let e = g.get(h, key).filter(|e| clock.live(e))?;
        let mut buf = Vec::new();
        aof::put_value(&mut buf, key, &e.value, e.expire_at);
        Some(self.hasher.hash_one(&buf))
    }

    /// Calls `f` with the live entry of `key` (any type), under the shard's read lock.
    pub async fn read_entry<R>(&self, key: &[u8], f: impl FnOnce(Option<&Entry>) -> R) -> R {
        let (i, h) = self.locate(key);
        let g = self.rlock(i).await;
        let mut clock = Clock::new();
        f(g.get(h, key).filter(|e| clock.live(e)))
    }

    /// The deadline of a live key in unix ms (`Some(0)`: none; `None`: no such key).
    pub async fn expire_at(&self, key: &[u8]) -> Option<u64> {
        let (i, h) = self.locate(key);
        let g = self.rlock(i).await;
        let mut clock = Clock::new();
        g.get(h, key).filter(|e| clock.live(e)).map(|e| e.expire_at)
    }

    /// Remaining time to live in ms: `None` if the key is missing, `Some(-1)` if it has none.
    pub async fn pttl(&self, key: &[u8]) -> Option<i64> {
        let (i, h) = self.locate(key);
        let g = self.rlock(i).await;
        let mut clock = Clock::new();
        let e = g.get(h, key).filter(|e| clock.live(e))?;
        Some(if e.expire_at == 0 {
            -1
        } else {
            (e.expire_at - clock.now()) as i64
        })
    }

    /// Calls `f(index, value)` for each key, all read under one consistent set of read locks.
    pub async fn get_many(&self, keys: &[Vec<u8>], mut f: impl FnMut(usize, Option<&Value>)) {
        let located: Vec<(usize, u64)> = keys.iter().map(|k| self.locate(k)).collect();
        let idx = involved(&located);
        let mut guards = Vec::with_capacity(idx.len());
        for &i in &idx {
            guards.push(self.rlock(i).await);
        }
        let mut clock = Clock::new();
        for (n, (key, &(i, h))) in keys.iter().zip(&located).enumerate() {
            let g = &guards[idx.binary_search(&i).unwrap()];
            f(n, g.get(h, key).filter(|e| clock.live(e)).map(|e| &e.value));
        }
    }

    pub async fn exists(&self, keys: &[Vec<u8>]) -> i64 {
        let mut n = 0;
        self.get_many(keys, |_, v| n += v.is_some() as i64).await;
        n
    }

    pub async fn dbsize(&self) -> usize {
        let mut n = 0;
        for i in 0..self.locks.len() {
            n += self.rlock(i).await.len;
        }
        n
    }

    pub async fn keyspace(&self) -> KeyspaceInfo {
        let mut info = KeyspaceInfo {
            keys: 0,
            expires: 0,
        };
        for i in 0..self.locks.len() {
            let g = self.rlock(i).await;
            info.keys += g.len;
            info.expires += g.volatile;
        }
        info
    }

    /// Every live key matching `pattern`.
    pub async fn keys(&self, pattern: &[u8]) -> Vec<Vec<u8>> {
        let all = pattern == b"*";
        let mut out = Vec::new();
        for i in 0..self.locks.len() {
            let g = self.rlock(i).await;
            let mut clock = Clock::new();
            for (_, k, e) in g.entries() {
                if clock.live(e) && (all || glob::matches(pattern, k)) {
                    out.push(k.to_vec());
                }
            }
        }
        out
    }

    /// One `SCAN` step: visits about `count` entries from `cursor` on; returns the next cursor
    /// (0 when done) and the live keys visited that match `pattern` (and hold the type `kind`,
    /// if given: a name as `TYPE` prints it). The cursor is the shard
    /// index (top 16 bits) and a 48-bit prefix of the next hash to visit, so every key present
    /// for the whole scan is returned at least once, whatever is inserted or deleted meanwhile.
    pub async fn scan(
        &self,
        cursor: u64,
        pattern: Option<&[u8]>,
        kind: Option<&[u8]>,
        count: usize,
    ) -> (u64, Vec<Vec<u8>>) {
        const LOW: u32 = 16;
        let mut shard = (cursor >> 48) as usize;
        let mut from = (cursor & ((1 << 48) - 1)) << LOW;
        let mut visited = 0usize;
        let mut keys = Vec::new();
        let count = count.max(1);
        while shard < self.locks.len() {
            let g = self.rlock(shard).await;
            let mut clock = Clock::new();
            let mut last_prefix = None;
            for (h, k, e) in g.iter_from(from) {
                let prefix = h >> LOW;
                if visited >= count && last_prefix != Some(prefix) {
                    return (((shard as u64) << 48) | prefix, keys);
                }
                visited += 1;
                last_prefix = Some(prefix);
                if clock.live(e)
                    && pattern.is_none_or(|p| glob::matches(p, k))
                    && kind.is_none_or(|t| t.eq_ignore_ascii_case(e.value.type_name().as_bytes()))
                {
                    keys.push(k.to_vec());
                }
            }
            drop(g);
            shard += 1;
            from = 0;
            if visited >= count && shard < self.locks.len() {
                return ((shard as u64) << 48, keys);
            }
        }
        (0, keys)
    }

    /// A live key chosen at random, or `None` if there is none.
    pub async fn random_key(&self) -> Option<Vec<u8>> {
        let n = self.locks.len();
        let first = rand::random::<usize>() % n;
        for k in 0..n {
            let g = self.rlock((first + k) % n).await;
            if let Some(key) = g.random_live(now_ms()) {
                return Some(key.to_vec());
            }
        }
        None
    }
}
