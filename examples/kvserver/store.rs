//! The sharded key-value store: N shards, each a map behind a [`ShardLock`].
//!
//! A key's shard comes from a 64-bit SipHash of the key (random seed per process). Inside a
//! shard, entries are kept in a `BTreeMap` ordered by that hash, which gives `SCAN` a cursor
//! that survives inserts and deletes (shard index and hash prefix).
//!
//! Locking rules:
//! - single-key reads take one read lock, single-key writes one write lock;
//! - multi-key commands lock every shard they touch in ascending shard order (so they are
//!   atomic and cannot deadlock one another);
//! - every write appends its log record *inside* its write critical section, holding the write
//!   guard across the `.await`s of the log (see [`crate::aof`]);
//! - `SAVE` holds one shard's read lock at a time, across the write of that shard's snapshot.
//!
//! Expiry is by absolute unix-millisecond deadline: reads hide expired entries, writes treat
//! them as absent, and a periodic sweep ([`Store::sweep`]) removes them using a per-shard heap
//! of deadlines. Expiries are never logged: records carry the deadline, so replay drops them.

use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::aof::{self, Fsync, Log, LogIo, Op};
use crate::glob;
use crate::lock::ShardLock;

/// Milliseconds since the unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Reads the clock at most once per command, and only if an entry has a deadline.
struct Clock(Option<u64>);

impl Clock {
    fn new() -> Clock {
        Clock(None)
    }
    fn now(&mut self) -> u64 {
        *self.0.get_or_insert_with(now_ms)
    }
    fn live(&mut self, e: &Entry) -> bool {
        e.expire_at == 0 || e.expire_at > self.now()
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Vec<u8>,
    /// Unix ms deadline; 0 for none.
    pub expire_at: u64,
}

/// The keys whose hashes are equal (almost always one).
struct Slot {
    key: Box<[u8]>,
    entry: Entry,
    more: Vec<(Box<[u8]>, Entry)>,
}

/// One shard's data: what a [`ShardLock`] protects.
#[derive(Default)]
pub struct Shard {
    map: BTreeMap<u64, Slot>,
    len: usize,
    /// Entries with a deadline.
    volatile: usize,
    /// (deadline, hash) of entries that had a deadline when set; stale ones are skipped.
    deadlines: BinaryHeap<Reverse<(u64, u64)>>,
}

impl Shard {
    fn get(&self, h: u64, key: &[u8]) -> Option<&Entry> {
        let s = self.map.get(&h)?;
        if &*s.key == key {
            return Some(&s.entry);
        }
        s.more.iter().find(|(k, _)| &**k == key).map(|(_, e)| e)
    }

    fn get_mut(&mut self, h: u64, key: &[u8]) -> Option<&mut Entry> {
        let s = self.map.get_mut(&h)?;
        if &*s.key == key {
            return Some(&mut s.entry);
        }
        s.more.iter_mut().find(|(k, _)| &**k == key).map(|(_, e)| e)
    }

    fn insert(&mut self, h: u64, key: &[u8], entry: Entry) {
        if entry.expire_at != 0 {
            self.volatile += 1;
            self.deadlines.push(Reverse((entry.expire_at, h)));
            if self.deadlines.len() > 2 * self.volatile + 1024 {
                self.rebuild_deadlines();
            }
        }
        if let Some(old) = self.get_mut(h, key) {
            let old = std::mem::replace(old, entry);
            if old.expire_at != 0 {
                self.volatile -= 1;
            }
            return;
        }
        self.len += 1;
        match self.map.entry(h) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Slot {
                    key: key.into(),
                    entry,
                    more: Vec::new(),
                });
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                o.get_mut().more.push((key.into(), entry));
            }
        }
    }

    fn remove(&mut self, h: u64, key: &[u8]) -> Option<Entry> {
        let std::collections::btree_map::Entry::Occupied(mut o) = self.map.entry(h) else {
            return None;
        };
        let slot = o.get_mut();
        let removed = if &*slot.key == key {
            if slot.more.is_empty() {
                o.remove().entry
            } else {
                let (k, e) = slot.more.swap_remove(0);
                slot.key = k;
                std::mem::replace(&mut slot.entry, e)
            }
        } else {
            let i = slot.more.iter().position(|(k, _)| &**k == key)?;
            slot.more.swap_remove(i).1
        };
        self.len -= 1;
        if removed.expire_at != 0 {
            self.volatile -= 1;
        }
        Some(removed)
    }

    fn clear(&mut self) {
        *self = Shard::default();
    }

    fn rebuild_deadlines(&mut self) {
        let mut heap = BinaryHeap::with_capacity(self.volatile);
        for (&h, s) in &self.map {
            for (_, e) in
                std::iter::once((&s.key, &s.entry)).chain(s.more.iter().map(|(k, e)| (k, e)))
            {
                if e.expire_at != 0 {
                    heap.push(Reverse((e.expire_at, h)));
                }
            }
        }
        self.deadlines = heap;
    }

    /// Every (hash, key, entry), in hash order, from hash `from` on.
    fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, &[u8], &Entry)> {
        self.map.range(from..).flat_map(|(&h, s)| {
            std::iter::once((h, &*s.key, &s.entry))
                .chain(s.more.iter().map(move |(k, e)| (h, &**k, e)))
        })
    }

    fn next_deadline(&self) -> Option<u64> {
        self.deadlines.peek().map(|r| r.0 .0)
    }

    /// Removes up to `budget` expired entries; returns how many.
    fn sweep(&mut self, now: u64, budget: usize) -> usize {
        let mut removed = 0;
        while removed < budget {
            match self.deadlines.peek() {
                Some(&Reverse((t, h))) if t <= now => {
                    self.deadlines.pop();
                    let expired: Vec<Box<[u8]>> = match self.map.get(&h) {
                        Some(s) => std::iter::once((&s.key, &s.entry))
                            .chain(s.more.iter().map(|(k, e)| (k, e)))
                            .filter(|(_, e)| e.expire_at != 0 && e.expire_at <= now)
                            .map(|(k, _)| k.clone())
                            .collect(),
                        None => continue,
                    };
                    for k in expired {
                        self.remove(h, &k);
                        removed += 1;
                    }
                }
                _ => break,
            }
        }
        removed
    }
}

/// How `SET` treats the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Clear any deadline (plain `SET`).
    None,
    /// Keep the key's current deadline (`KEEPTTL`).
    Keep,
    /// Expire at this unix ms time.
    At(u64),
}

#[derive(Clone, Copy, Debug)]
pub struct SetOpts {
    pub expiry: Expiry,
    pub nx: bool,
    pub xx: bool,
}

/// Persistence settings.
#[derive(Clone, Debug)]
pub struct Persistence {
    pub dir: PathBuf,
    pub fsync: Fsync,
    pub io: LogIo,
}

/// Errors a command can get from the store, as RESP error text.
pub type StoreResult<T> = Result<T, String>;

/// Keyspace figures for `INFO`.
pub struct KeyspaceInfo {
    pub keys: usize,
    pub expires: usize,
}

pub struct Store<L> {
    shards: Box<[L]>,
    hasher: RandomState,
    log: Option<Log>,
    /// Per shard: the `SAVE` epoch whose snapshot already holds this shard.
    flipped: Box<[AtomicU64]>,
    save_lock: tokio::sync::Mutex<()>,
}

impl<L: ShardLock<Shard>> Store<L> {
    /// Builds the store, replaying the snapshot and log first when persistence is on.
    pub fn open(
        nshards: usize,
        persistence: Option<&Persistence>,
    ) -> Result<(Self, Option<aof::LoadReport>), String> {
        let nshards = nshards.clamp(1, 4096);
        let hasher = RandomState::new();
        let mut shards: Vec<Shard> = (0..nshards).map(|_| Shard::default()).collect();
        let mut report = None;
        let mut log = None;
        if let Some(p) = persistence {
            let now = now_ms();
            let locate = |key: &[u8]| shard_of(&hasher, nshards, key);
            let r = aof::load(&p.dir, |op| match op {
                Op::Set {
                    key,
                    value,
                    expire_at,
                } => {
                    let (i, h) = locate(key);
                    if expire_at != 0 && expire_at <= now {
                        shards[i].remove(h, key);
                    } else {
                        shards[i].insert(
                            h,
                            key,
                            Entry {
                                value: value.to_vec(),
                                expire_at,
                            },
                        );
                    }
                }
                Op::Del(keys) => {
                    for key in keys {
                        let (i, h) = locate(key);
                        shards[i].remove(h, key);
                    }
                }
                Op::MSet(pairs) => {
                    for (key, value) in pairs {
                        let (i, h) = locate(key);
                        shards[i].insert(
                            h,
                            key,
                            Entry {
                                value: value.to_vec(),
                                expire_at: 0,
                            },
                        );
                    }
                }
                Op::FlushAll => shards.iter_mut().for_each(Shard::clear),
                Op::End(_) => {}
            })?;
            log = Some(Log::open(&p.dir, r.base, p.fsync, p.io)?);
            report = Some(r);
        }
        let store = Store {
            shards: shards.into_iter().map(L::new).collect(),
            hasher,
            log,
            flipped: (0..nshards).map(|_| AtomicU64::new(0)).collect(),
            save_lock: tokio::sync::Mutex::new(()),
        };
        Ok((store, report))
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub fn log(&self) -> Option<&Log> {
        self.log.as_ref()
    }

    fn locate(&self, key: &[u8]) -> (usize, u64) {
        shard_of(&self.hasher, self.shards.len(), key)
    }

    /// The part of a multi-key record that belongs in the log being rewritten: the keys of
    /// shards already snapshotted in `epoch`.
    fn flipped(&self, shard: usize, epoch: u64) -> bool {
        self.flipped[shard].load(Ordering::Relaxed) == epoch
    }

    async fn log_append(
        &self,
        rec: Vec<u8>,
        for_rewrite: impl FnOnce(u64) -> Option<Vec<u8>>,
    ) -> StoreResult<()> {
        match &self.log {
            Some(log) => log.append(&rec, for_rewrite).await,
            None => Ok(()),
        }
    }

    // ---- reads ------------------------------------------------------------------------------

    /// Calls `f` with the live value of `key`, under the shard's read lock.
    pub async fn get<R>(&self, key: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        let (i, h) = self.locate(key);
        let g = self.shards[i].read().await;
        let mut clock = Clock::new();
        f(g.get(h, key)
            .filter(|e| clock.live(e))
            .map(|e| &e.value[..]))
    }

    /// Remaining time to live in ms: `None` if the key is missing, `Some(-1)` if it has none.
    pub async fn pttl(&self, key: &[u8]) -> Option<i64> {
        let (i, h) = self.locate(key);
        let g = self.shards[i].read().await;
        let mut clock = Clock::new();
        let e = g.get(h, key).filter(|e| clock.live(e))?;
        Some(if e.expire_at == 0 {
            -1
        } else {
            (e.expire_at - clock.now()) as i64
        })
    }

    /// Calls `f(index, value)` for each key, all read under one consistent set of read locks.
    pub async fn get_many(&self, keys: &[Vec<u8>], mut f: impl FnMut(usize, Option<&[u8]>)) {
        let located: Vec<(usize, u64)> = keys.iter().map(|k| self.locate(k)).collect();
        let idx = involved(&located);
        let mut guards = Vec::with_capacity(idx.len());
        for &i in &idx {
            guards.push(self.shards[i].read().await);
        }
        let mut clock = Clock::new();
        for (n, (key, &(i, h))) in keys.iter().zip(&located).enumerate() {
            let g = &guards[idx.binary_search(&i).unwrap()];
            f(
                n,
                g.get(h, key)
                    .filter(|e| clock.live(e))
                    .map(|e| &e.value[..]),
            );
        }
    }

    pub async fn exists(&self, keys: &[Vec<u8>]) -> i64 {
        let mut n = 0;
        self.get_many(keys, |_, v| n += v.is_some() as i64).await;
        n
    }

    pub async fn dbsize(&self) -> usize {
        let mut n = 0;
        for s in self.shards.iter() {
            n += s.read().await.len;
        }
        n
    }

    pub async fn keyspace(&self) -> KeyspaceInfo {
        let mut info = KeyspaceInfo {
            keys: 0,
            expires: 0,
        };
        for s in self.shards.iter() {
            let g = s.read().await;
            info.keys += g.len;
            info.expires += g.volatile;
        }
        info
    }

    /// Every live key matching `pattern`.
    pub async fn keys(&self, pattern: &[u8]) -> Vec<Vec<u8>> {
        let all = pattern == b"*";
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let g = s.read().await;
            let mut clock = Clock::new();
            for (_, k, e) in g.iter_from(0) {
                if clock.live(e) && (all || glob::matches(pattern, k)) {
                    out.push(k.to_vec());
                }
            }
        }
        out
    }

    /// One `SCAN` step: visits about `count` entries from `cursor` on; returns the next cursor
    /// (0 when done) and the live keys visited that match `pattern`. The cursor is the shard
    /// index (top 16 bits) and a 48-bit prefix of the next hash to visit, so every key present
    /// for the whole scan is returned at least once, whatever is inserted or deleted meanwhile.
    pub async fn scan(
        &self,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
    ) -> (u64, Vec<Vec<u8>>) {
        const LOW: u32 = 16;
        let mut shard = (cursor >> 48) as usize;
        let mut from = (cursor & ((1 << 48) - 1)) << LOW;
        let mut visited = 0usize;
        let mut keys = Vec::new();
        let count = count.max(1);
        while shard < self.shards.len() {
            let g = self.shards[shard].read().await;
            let mut clock = Clock::new();
            let mut last_prefix = None;
            for (h, k, e) in g.iter_from(from) {
                let prefix = h >> LOW;
                if visited >= count && last_prefix != Some(prefix) {
                    return (((shard as u64) << 48) | prefix, keys);
                }
                visited += 1;
                last_prefix = Some(prefix);
                if clock.live(e) && pattern.map_or(true, |p| glob::matches(p, k)) {
                    keys.push(k.to_vec());
                }
            }
            drop(g);
            shard += 1;
            from = 0;
            if visited >= count && shard < self.shards.len() {
                return ((shard as u64) << 48, keys);
            }
        }
        (0, keys)
    }

    // ---- writes -----------------------------------------------------------------------------

    /// `SET`; returns whether the value was stored (`NX`/`XX` may prevent it).
    pub async fn set(&self, key: &[u8], value: Vec<u8>, opts: SetOpts) -> StoreResult<bool> {
        let (i, h) = self.locate(key);
        let mut g = self.shards[i].write().await;
        let mut clock = Clock::new();
        let existing = g.get(h, key).filter(|e| clock.live(e));
        if (opts.nx && existing.is_some()) || (opts.xx && existing.is_none()) {
            return Ok(false);
        }
        let expire_at = match opts.expiry {
            Expiry::None => 0,
            Expiry::At(t) => t,
            Expiry::Keep => existing.map_or(0, |e| e.expire_at),
        };
        if self.log.is_some() {
            let rec = aof::rec_set(key, &value, expire_at);
            self.log_append(rec, |ep| {
                self.flipped(i, ep)
                    .then(|| aof::rec_set(key, &value, expire_at))
            })
            .await?;
        }
        g.insert(h, key, Entry { value, expire_at });
        Ok(true)
    }

    /// `INCRBY`; the deadline, if any, is kept.
    pub async fn incr_by(&self, key: &[u8], delta: i64) -> StoreResult<i64> {
        let (i, h) = self.locate(key);
        let mut g = self.shards[i].write().await;
        let mut clock = Clock::new();
        let (old, expire_at) = match g.get(h, key).filter(|e| clock.live(e)) {
            Some(e) => (
                crate::resp::parse_int(&e.value)
                    .ok_or("ERR value is not an integer or out of range")?,
                e.expire_at,
            ),
            None => (0, 0),
        };
        let new = old
            .checked_add(delta)
            .ok_or("ERR increment or decrement would overflow")?;
        let value = new.to_string().into_bytes();
        if self.log.is_some() {
            let rec = aof::rec_set(key, &value, expire_at);
            self.log_append(rec, |ep| {
                self.flipped(i, ep)
                    .then(|| aof::rec_set(key, &value, expire_at))
            })
            .await?;
        }
        g.insert(h, key, Entry { value, expire_at });
        Ok(new)
    }

    /// `DEL`; returns how many live keys were removed.
    pub async fn del(&self, keys: &[Vec<u8>]) -> StoreResult<i64> {
        let located: Vec<(usize, u64)> = keys.iter().map(|k| self.locate(k)).collect();
        let idx = involved(&located);
        let mut guards = Vec::with_capacity(idx.len());
        for &i in &idx {
            guards.push(self.shards[i].write().await);
        }
        let mut clock = Clock::new();
        let mut seen = HashSet::new();
        let mut doomed: Vec<(usize, usize)> = Vec::new(); // (key index, shard)
        for (n, (key, &(i, h))) in keys.iter().zip(&located).enumerate() {
            let g = &guards[idx.binary_search(&i).unwrap()];
            if g.get(h, key).is_some_and(|e| clock.live(e)) && seen.insert(&key[..]) {
                doomed.push((n, i));
            }
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        if self.log.is_some() {
            let rec = aof::rec_del(doomed.iter().map(|&(n, _)| &keys[n][..]));
            self.log_append(rec, |ep| {
                let part: Vec<&[u8]> = doomed
                    .iter()
                    .filter(|&&(_, i)| self.flipped(i, ep))
                    .map(|&(n, _)| &keys[n][..])
                    .collect();
                (!part.is_empty()).then(|| aof::rec_del(part.into_iter()))
            })
            .await?;
        }
        for &(n, i) in &doomed {
            let g = &mut guards[idx.binary_search(&i).unwrap()];
            g.remove(located[n].1, &keys[n]);
        }
        Ok(doomed.len() as i64)
    }

    /// `MSET` of `pairs` (flattened key, value, key, value...); atomic across shards.
    pub async fn mset(&self, kv: Vec<Vec<u8>>) -> StoreResult<()> {
        let located: Vec<(usize, u64)> = kv.chunks(2).map(|p| self.locate(&p[0])).collect();
        let idx = involved(&located);
        let mut guards = Vec::with_capacity(idx.len());
        for &i in &idx {
            guards.push(self.shards[i].write().await);
        }
        if self.log.is_some() {
            let rec = aof::rec_mset(kv.chunks(2).map(|p| (&p[0][..], &p[1][..])));
            self.log_append(rec, |ep| {
                let part: Vec<(&[u8], &[u8])> = kv
                    .chunks(2)
                    .zip(&located)
                    .filter(|(_, &(i, _))| self.flipped(i, ep))
                    .map(|(p, _)| (&p[0][..], &p[1][..]))
                    .collect();
                (!part.is_empty()).then(|| aof::rec_mset(part.into_iter()))
            })
            .await?;
        }
        let mut it = kv.into_iter();
        for &(i, h) in &located {
            let (key, value) = (it.next().unwrap(), it.next().unwrap());
            let g = &mut guards[idx.binary_search(&i).unwrap()];
            g.insert(
                h,
                &key,
                Entry {
                    value,
                    expire_at: 0,
                },
            );
        }
        Ok(())
    }

    /// `FLUSHALL`: all write locks, in order.
    pub async fn flushall(&self) -> StoreResult<()> {
        let mut guards = Vec::with_capacity(self.shards.len());
        for s in self.shards.iter() {
            guards.push(s.write().await);
        }
        if self.log.is_some() {
            let rec = aof::rec_flushall();
            // In the log being rewritten this also (rightly) wipes the shards snapshotted so
            // far; the others are snapshotted after it, empty.
            self.log_append(rec.clone(), |_| Some(rec)).await?;
        }
        for g in guards.iter_mut() {
            g.clear();
        }
        Ok(())
    }

    /// `SAVE`: snapshot shard by shard under read locks, then switch to a new log that starts
    /// from the snapshot. Returns the number of keys saved.
    pub async fn save(&self) -> StoreResult<u64> {
        let log = self
            .log
            .as_ref()
            .ok_or("ERR persistence is disabled (--appendonly no)")?;
        let _one_at_a_time = self.save_lock.lock().await;
        let mut snap = log.begin_rewrite().await?;
        for (i, shard) in self.shards.iter().enumerate() {
            let g = shard.read().await;
            let mut clock = Clock::new();
            let mut buf = Vec::new();
            let mut n = 0;
            for (_, k, e) in g.iter_from(0) {
                if clock.live(e) {
                    buf.extend_from_slice(&aof::rec_set(k, &e.value, e.expire_at));
                    n += 1;
                }
            }
            // The read lock is held across this write: the shard cannot change until its
            // snapshot is written and it is marked as part of the new log.
            if let Err(e) = snap.write_shard(&buf, n).await {
                drop(g);
                log.abort_rewrite(&snap).await;
                return Err(e);
            }
            self.flipped[i].store(snap.epoch, Ordering::Relaxed);
            drop(g);
        }
        log.finish_rewrite(snap).await
    }

    /// Removes expired entries, at most `budget` per shard; returns how many.
    pub async fn sweep(&self, budget: usize) -> usize {
        let mut removed = 0;
        for s in self.shards.iter() {
            let now = now_ms();
            let due = s.read().await.next_deadline().is_some_and(|t| t <= now);
            if due {
                removed += s.write().await.sweep(now, budget);
            }
        }
        removed
    }

    /// The lock statistics of every shard that has any.
    pub fn lock_stats(&self) -> Vec<(usize, String)> {
        self.shards
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.stats().map(|t| (i, t)))
            .collect()
    }
}

fn shard_of(hasher: &RandomState, n: usize, key: &[u8]) -> (usize, u64) {
    let h = hasher.hash_one(key);
    (((h as u128 * n as u128) >> 64) as usize, h)
}

/// The distinct shards in `located`, ascending (the lock order).
fn involved(located: &[(usize, u64)]) -> Vec<usize> {
    let mut idx: Vec<usize> = located.iter().map(|&(i, _)| i).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}
