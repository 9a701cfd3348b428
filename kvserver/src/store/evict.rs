//! The memory limit: the store's own estimate of the bytes its entries take, the access data
//! eviction ranks keys by, and eviction itself, after Redis' `evict.c`.
//!
//! # Accounting
//! Each shard keeps the estimated bytes of its entries ([`entry_cost`]: the slot in its map,
//! the key when it does not fit inline, the value's heap bytes with a fixed cost per element)
//! and publishes the figure in an atomic of its own cache line, so that the check before a
//! command reads `shards` atomics and takes no lock. The figure changes where the shard's
//! entries do (insert, replace, remove, and [`Shard::apply`] for a change to an aggregate,
//! whose cost follows from the elements the change and its inverse name), so it is exact for
//! its own model and never drifts. It is an estimate of the heap, not the allocator's count.
//!
//! # Access data
//! A slot holds 24 bits of access data as a Redis object does: under an LRU policy (and
//! `noeviction`, the random and TTL ones) the LRU clock of its last access (seconds, 24 bits),
//! under an LFU one the minute of its last access (16 bits) and a logarithmic counter (8 bits)
//! that an access increments with probability `1 / ((counter - 5) * 10 + 1)` and that loses
//! one per minute without access (`lfu-log-factor` 10, `lfu-decay-time` 1: Redis' defaults). A
//! new key starts at 5. A read that finds the clock unchanged stores nothing.
//!
//! # Eviction
//! Before each command, while `maxmemory` is set and the estimate is over it, keys are
//! evicted by the policy: the LRU, LFU and TTL policies sample `maxmemory-samples` keys of a
//! random shard (all keys, or those with a deadline) into a pool of the 16 best candidates kept
//! across calls, and evict the best that still exists; the random ones take a random key.
//! An eviction is a `DEL` in the log, so a restart agrees. When nothing can be evicted (or the
//! policy is `noeviction`) the command is refused if it is flagged `denyoom`.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use super::shard::{Entry, Shard, Slot};
use super::txn::in_txn;
use super::{Store, StoreResult};
use crate::lock::ShardLock;
use crate::value::{Mutation, Value};

/// `-OOM`, as Redis words it.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllkeysLru,
    VolatileLru,
    AllkeysLfu,
    VolatileLfu,
    AllkeysRandom,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub const ALL: [Policy; 8] = [
        Policy::NoEviction,
        Policy::AllkeysLru,
        Policy::VolatileLru,
        Policy::AllkeysLfu,
        Policy::VolatileLfu,
        Policy::AllkeysRandom,
        Policy::VolatileRandom,
        Policy::VolatileTtl,
    ];

    /// The name `CONFIG` and `INFO` use.
    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllkeysLru => "allkeys-lru",
            Policy::VolatileLru => "volatile-lru",
            Policy::AllkeysLfu => "allkeys-lfu",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::AllkeysRandom => "allkeys-random",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }

    /// The policy of a name (any case).
    pub fn parse(name: &str) -> Option<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }

    fn lfu(self) -> bool {
        matches!(self, Policy::AllkeysLfu | Policy::VolatileLfu)
    }

    /// Whether it evicts only keys with a deadline.
    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
}

/// A byte count as Redis reads `maxmemory`: a number, optionally with a unit (`k`, `m`, `g`:
/// powers of 1000; `kb`, `mb`, `gb`: of 1024; any case).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.to_ascii_lowercase();
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let mul: u64 = match &s[digits.len()..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

/// `maxmemory-samples`' default, as Redis'.
pub const DEFAULT_SAMPLES: usize = 5;

/// The eviction pool's size (Redis' `EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

/// Keys evicted by one call at most before the command goes on (the next command evicts
/// more): Redis bounds an eviction cycle by time instead.
const MAX_PER_CALL: usize = 1024;

/// The limit and its policy (`CONFIG SET` changes them).
pub(super) struct Limits {
    pub(super) maxmemory: AtomicU64,
    policy: AtomicU8,
    pub(super) samples: AtomicUsize,
}

impl Limits {
    pub(super) fn new() -> Limits {
        Limits {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(0),
            samples: AtomicUsize::new(DEFAULT_SAMPLES),
        }
    }

    fn policy(&self) -> Policy {
        Policy::ALL[self.policy.load(Ordering::Relaxed) as usize]
    }
}

/// A shard's published memory figure, on a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct MemCell(pub(super) AtomicUsize);

/// One candidate of the eviction pool: a higher `score` is a better candidate.
struct Candidate {
    score: u64,
    shard: usize,
    key: Vec<u8>,
}

/// The candidates, ranked under the policy `policy` (an index of [`Policy::ALL`]).
#[derive(Default)]
struct Pool {
    policy: u8,
    candidates: Vec<Candidate>,
}

/// The pool (kept across calls, as Redis keeps it) and what the evictions did.
#[derive(Default)]
pub(super) struct Evictor {
    pool: tokio::sync::Mutex<Pool>,
    pub(super) evicted: AtomicU64,
    /// The most `used_memory` seen (by `INFO` and the sweep).
    peak: AtomicU64,
}

// ---- the clock ------------------------------------------------------------------------------

/// Unix seconds, as the store's background sweep last read them (Redis' cached
/// `server.unixtime`, from which its LRU clock and LFU minutes come).
static NOW_SECS: AtomicU64 = AtomicU64::new(0);

/// Reads the clock into [`NOW_SECS`] (the sweep calls it on each pass).
pub(super) fn tick() {
    NOW_SECS.store(super::now_ms() / 1000, Ordering::Relaxed);
}

const LRU_BITS: u32 = 24;
const LRU_MAX: u32 = (1 << LRU_BITS) - 1;
const LFU_INIT: u32 = 5;
const LFU_LOG_FACTOR: f64 = 10.0;

fn lru_clock() -> u32 {
    NOW_SECS.load(Ordering::Relaxed) as u32 & LRU_MAX
}

fn lfu_minutes() -> u32 {
    (NOW_SECS.load(Ordering::Relaxed) / 60) as u32 & 0xffff
}

/// The access data of a new key.
pub(super) fn new_access(lfu: bool) -> u32 {
    if lfu {
        (lfu_minutes() << 8) | LFU_INIT
    } else {
        lru_clock()
    }
}

/// The access data after an access to a key whose data was `old`.
fn accessed(old: u32, lfu: bool) -> u32 {
    if !lfu {
        return lru_clock();
    }
    let mut counter = lfu_decayed(old);
    if counter < 255 {
        let base = counter.saturating_sub(LFU_INIT) as f64;
        if rand::random::<f64>() < 1.0 / (base * LFU_LOG_FACTOR + 1.0) {
            counter += 1;
        }
    }
    (lfu_minutes() << 8) | counter
}

/// Records an access to a slot read under a read lock: nothing is stored when the data did
/// not change (the same second, under LRU).
pub(super) fn touch(access: &AtomicU32, lfu: bool) {
    let old = access.load(Ordering::Relaxed);
    let new = accessed(old, lfu);
    if new != old {
        access.store(new, Ordering::Relaxed);
    }
}

/// [`touch`] for a slot under the write lock.
pub(super) fn touch_mut(access: &mut AtomicU32, lfu: bool) {
    let a = access.get_mut();
    *a = accessed(*a, lfu);
}

/// The LFU counter of access data, less one per minute since the last access.
fn lfu_decayed(access: u32) -> u32 {
    let (ldt, counter) = (access >> 8, access & 255);
    let now = lfu_minutes();
    let elapsed = if now >= ldt {
        now - ldt
    } else {
        0xffff - ldt + now
    };
    counter.saturating_sub(elapsed)
}

/// Milliseconds since the access recorded in LRU access data (Redis' estimate: the clock
/// wraps once).
fn lru_idle_ms(access: u32) -> u64 {
    let now = lru_clock();
    let secs = if now >= access {
        now - access
    } else {
        now + (LRU_MAX - access)
    };
    secs as u64 * 1000
}

/// `OBJECT IDLETIME` (seconds) or `OBJECT FREQ` of a slot's access data.
pub(super) fn idle_secs(access: u32) -> u64 {
    lru_idle_ms(access) / 1000
}

pub(super) fn freq(access: u32) -> u64 {
    lfu_decayed(access) as u64
}

// ---- costs ----------------------------------------------------------------------------------

/// Heap bytes of an allocation of `n` bytes (glibc's malloc: 8 bytes of header, 16-byte
/// chunks, 32 at least).
fn alloc(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

/// A slot's share of its map: the bucket and its control byte, at hashbrown's load of 7/8.
const SLOT: usize = (std::mem::size_of::<(u64, Slot)>() + 1) * 8 / 7;
/// Per element: a list's `Vec` header in its ring buffer, a hash's entry (hash, field, value)
/// and index, a set's bucket, a sorted set's map bucket and tree entry (the member twice).
const LIST_ELEM: usize = 24;
const HASH_ELEM: usize = 56 + 9;
const SET_ELEM: usize = (24 + 1) * 8 / 7;
const ZSET_ELEM: usize = (32 + 1) * 8 / 7 + 40;

fn list_elem(item: &[u8]) -> usize {
    LIST_ELEM + alloc(item.len())
}

fn hash_elem(field: &[u8], value: &[u8]) -> usize {
    HASH_ELEM + alloc(field.len()) + alloc(value.len())
}

fn set_elem(member: &[u8]) -> usize {
    SET_ELEM + alloc(member.len())
}

fn zset_elem(member: &[u8]) -> usize {
    ZSET_ELEM + 2 * alloc(member.len())
}

/// The estimated bytes of a value.
pub fn value_cost(v: &Value) -> usize {
    match v {
        Value::Str(s) => alloc(s.len()),
        Value::List(l) => l.iter().map(|i| list_elem(i)).sum(),
        Value::Hash(h) => h.iter().map(|(f, v)| hash_elem(f, v)).sum(),
        Value::Set(s) => s.iter().map(|m| set_elem(m)).sum(),
        Value::ZSet(z) => {
            alloc(std::mem::size_of::<crate::value::ZSet>())
                + z.iter().map(|(m, _)| zset_elem(m)).sum::<usize>()
        }
    }
}

/// The estimated bytes of an entry of key `key`.
pub(super) fn entry_cost(key: &[u8], e: &Entry) -> usize {
    key_cost(key, &e.value)
}

/// The estimated bytes of key `key` holding `v` (what `MEMORY USAGE` answers): its slot, the
/// key unless it fits in the slot, the value.
pub fn key_cost(key: &[u8], v: &Value) -> usize {
    let key = if key.len() > super::shard::SlotKey::INLINE {
        alloc(key.len())
    } else {
        0
    };
    SLOT + key + value_cost(v)
}

/// The elements a change carries, at their cost (fields and members only where values are
/// not named).
fn carried(m: &Mutation) -> usize {
    match m {
        Mutation::Push { items, .. } => items.iter().map(|i| list_elem(i)).sum(),
        Mutation::Pop { .. } | Mutation::HDel(_) => 0,
        Mutation::HSet(pairs) => pairs.iter().map(|(f, v)| hash_elem(f, v)).sum(),
        Mutation::HInsertAt(items) => items.iter().map(|(_, f, v)| hash_elem(f, v)).sum(),
        Mutation::SAdd(ms) | Mutation::SRem(ms) => ms.iter().map(|m| set_elem(m)).sum(),
        Mutation::ZAdd(pairs) => pairs.iter().map(|(_, m)| zset_elem(m)).sum(),
        Mutation::ZRem(ms) => ms.iter().map(|m| zset_elem(m)).sum(),
    }
}

/// What a change will do to its value's cost, read before it is applied (the change is
/// consumed then): its kind and the cost of what it carries.
pub(super) struct ChangeCost {
    kind: ChangeKind,
    carried: usize,
}

#[derive(Clone, Copy)]
enum ChangeKind {
    /// Adds all it carries (`Push`, `HInsertAt`: the undo of an `HDEL`).
    Adds,
    /// Adds what it carries less the old elements it replaced, which its inverse of the same
    /// kind puts back (`HSET`'s old values, `ZADD`'s old scores).
    Replaces,
    /// Adds what its inverse would remove (`SADD`: the members it did not have).
    AddsNew,
    /// Takes off what its inverse puts back.
    Removes,
}

impl ChangeCost {
    pub(super) fn of(m: &Mutation) -> ChangeCost {
        let kind = match m {
            Mutation::Push { .. } | Mutation::HInsertAt(_) => ChangeKind::Adds,
            Mutation::HSet(_) | Mutation::ZAdd(_) => ChangeKind::Replaces,
            Mutation::SAdd(_) => ChangeKind::AddsNew,
            Mutation::Pop { .. } | Mutation::HDel(_) | Mutation::SRem(_) | Mutation::ZRem(_) => {
                ChangeKind::Removes
            }
        };
        let carried = match kind {
            ChangeKind::Adds | ChangeKind::Replaces => carried(m),
            ChangeKind::AddsNew | ChangeKind::Removes => 0,
        };
        ChangeCost { kind, carried }
    }

    /// The change in bytes, given the change's inverse.
    pub(super) fn after(self, inverse: &[Mutation]) -> isize {
        let same =
            |u: &Mutation| matches!(u, Mutation::HSet(_) | Mutation::ZAdd(_) | Mutation::SRem(_));
        let sum = |f: &dyn Fn(&Mutation) -> bool| -> isize {
            inverse
                .iter()
                .filter(|u| f(u))
                .map(|u| carried(u) as isize)
                .sum()
        };
        match self.kind {
            ChangeKind::Adds => self.carried as isize,
            ChangeKind::Replaces => self.carried as isize - sum(&same),
            ChangeKind::AddsNew => sum(&same),
            ChangeKind::Removes => -sum(&|_| true),
        }
    }
}

// ---- the store's side -----------------------------------------------------------------------

/// What `INFO memory` shows.
pub struct MemoryInfo {
    /// The estimate of the entries' bytes.
    pub dataset: usize,
    /// The shards' own structures.
    pub startup: usize,
    pub maxmemory: u64,
    pub policy: Policy,
    pub samples: usize,
    pub evicted: u64,
}

impl<L: ShardLock<Shard>> Store<L> {
    /// The estimated bytes of every entry, from the shards' published figures.
    pub fn dataset_bytes(&self) -> usize {
        self.mem.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }

    /// The bytes the limit is compared with: the entries and the shards' own structures.
    pub fn used_memory(&self) -> usize {
        self.startup_bytes() + self.dataset_bytes()
    }

    fn startup_bytes(&self) -> usize {
        self.locks.len() * std::mem::size_of::<Shard>()
    }

    pub fn memory_info(&self) -> MemoryInfo {
        MemoryInfo {
            dataset: self.dataset_bytes(),
            startup: self.startup_bytes(),
            maxmemory: self.limits.maxmemory.load(Ordering::Relaxed),
            policy: self.limits.policy(),
            samples: self.limits.samples.load(Ordering::Relaxed),
            evicted: self.evictor.evicted.load(Ordering::Relaxed),
        }
    }

    /// Notes `used` (bytes) for `used_memory_peak`; returns the peak.
    pub fn note_peak(&self, used: u64) -> u64 {
        self.evictor
            .peak
            .fetch_max(used, Ordering::Relaxed)
            .max(used)
    }

    /// `maxmemory` (0: none).
    pub fn maxmemory(&self) -> u64 {
        self.limits.maxmemory.load(Ordering::Relaxed)
    }

    pub fn set_maxmemory(&self, bytes: u64) {
        self.limits.maxmemory.store(bytes, Ordering::Relaxed);
    }

    pub fn set_samples(&self, n: usize) {
        self.limits.samples.store(n.max(1), Ordering::Relaxed);
    }

    /// Sets the policy; the shards switch their access data between LRU and LFU (as in
    /// Redis, the old data reads as the other kind until keys are accessed again), and the
    /// pool, ranked under the old policy, is emptied by the next eviction. Inside `EXEC` the
    /// shards are the ones it holds.
    pub async fn set_policy(&self, p: Policy) {
        let i = Policy::ALL.iter().position(|&q| q == p).expect("a policy") as u8;
        self.limits.policy.store(i, Ordering::Relaxed);
        for s in 0..self.locks.len() {
            self.wlock(s).await.lfu = p.lfu();
        }
    }

    /// `OBJECT IDLETIME` (under an LRU policy) or `OBJECT FREQ` (under an LFU one) of a live
    /// key: `Err` names the policy's mismatch, `Ok(None)` no such key.
    pub async fn access_info(&self, key: &[u8], freq: bool) -> Result<Option<u64>, ()> {
        let (i, h) = self.locate(key);
        let g = self.rlock(i).await;
        let now = super::now_ms();
        // As Redis: a missing key is a null reply whatever the policy.
        let Some(a) = g.peek_access(h, key, now) else {
            return Ok(None);
        };
        if freq != self.limits.policy().lfu() {
            return Err(());
        }
        Ok(Some(match freq {
            true => self::freq(a),
            false => idle_secs(a),
        }))
    }

    /// Redis' `performEvictions`: while the estimate is over `maxmemory`, evicts keys by the
    /// policy. `false`: over the limit with nothing (more) to evict, so a `denyoom` command is
    /// refused. Inside `EXEC` it does nothing (Redis evicts before the `EXEC`, not within).
    pub async fn evict(&self) -> bool {
        self.evict_collecting(None).await
    }

    /// [`Store::evict`], adding the evicted keys to `keys` if given (for `evicted`
    /// notifications).
    pub async fn evict_collecting(&self, mut keys: Option<&mut Vec<Vec<u8>>>) -> bool {
        let max = self.maxmemory();
        if max == 0 || self.used_memory() as u64 <= max || in_txn(self).is_some() {
            return true;
        }
        let policy = self.limits.policy();
        if policy == Policy::NoEviction {
            return false;
        }
        let mut pool = self.evictor.pool.lock().await;
        let index = Policy::ALL
            .iter()
            .position(|&q| q == policy)
            .expect("a policy") as u8;
        if pool.policy != index {
            pool.candidates.clear();
            pool.policy = index;
        }
        for _ in 0..MAX_PER_CALL {
            if self.used_memory() as u64 <= max {
                return true;
            }
            let Some((shard, key)) = self.pick(policy, &mut pool.candidates).await else {
                return false;
            };
            let mut seq = 0;
            match self
                .evict_key(shard, &key, policy.volatile(), &mut seq)
                .await
            {
                Ok(true) => {
                    self.evictor.evicted.fetch_add(1, Ordering::Relaxed);
                    if let Some(keys) = keys.as_deref_mut() {
                        keys.push(key);
                    }
                }
                Ok(false) => {}
                // The log refuses writes: nothing can be evicted now.
                Err(_) => return false,
            }
        }
        true
    }

    /// The next key to evict (`None`: no key the policy may evict).
    async fn pick(&self, policy: Policy, pool: &mut Vec<Candidate>) -> Option<(usize, Vec<u8>)> {
        let n = self.locks.len();
        let samples = self.limits.samples.load(Ordering::Relaxed).max(1);
        let random = matches!(policy, Policy::AllkeysRandom | Policy::VolatileRandom);
        // A random shard first, then the next ones if it has no candidate.
        let first = rand::random::<usize>() % n;
        if random {
            for k in 0..n {
                let i = (first + k) % n;
                let g = self.rlock(i).await;
                if let Some((key, _, _)) = g.sample(1, policy.volatile()).into_iter().next() {
                    return Some((i, key));
                }
            }
            return None;
        }
        // One shard's sample into the pool (the next shards' if it has no candidate), which
        // keeps the best; then the best, whose existence the eviction checks (a ghost, deleted
        // since, is skipped there).
        for k in 0..n {
            let i = (first + k) % n;
            let found = self.rlock(i).await.sample(samples, policy.volatile());
            let any = !found.is_empty();
            for (key, access, expire_at) in found {
                let score = match policy {
                    Policy::VolatileTtl => u64::MAX - expire_at,
                    Policy::AllkeysLfu | Policy::VolatileLfu => 255 - freq(access),
                    _ => lru_idle_ms(access),
                };
                insert_candidate(
                    pool,
                    Candidate {
                        score,
                        shard: i,
                        key,
                    },
                );
            }
            if any {
                break;
            }
        }
        pool.pop().map(|c| (c.shard, c.key))
    }

    /// Deletes one key as an eviction: a `DEL` in the log (undone with the rest if its record
    /// fails). `false`: the key is gone (or, for a volatile policy, has no deadline now).
    async fn evict_key(
        &self,
        i: usize,
        key: &[u8],
        volatile: bool,
        seq: &mut u64,
    ) -> StoreResult<bool> {
        let h = self.locate(key).1;
        let mut g = self.wlock(i).await;
        let now = super::now_ms();
        let live = g
            .peek(h, key)
            .filter(|e| e.expire_at == 0 || e.expire_at > now);
        match live {
            Some(e) if !volatile || e.expire_at != 0 => {}
            _ => return Ok(false),
        }
        self.del_logged(&mut g, i, h, key, seq)?;
        Ok(true)
    }
}

/// Puts a candidate in the pool (ascending by score, at most [`POOL_SIZE`]): when the pool is
/// full, one no better than the worst is dropped, else the worst goes.
fn insert_candidate(pool: &mut Vec<Candidate>, c: Candidate) {
    if let Some(old) = pool
        .iter()
        .position(|p| p.shard == c.shard && p.key == c.key)
    {
        pool.remove(old);
    }
    if pool.len() == POOL_SIZE {
        if c.score <= pool[0].score {
            return;
        }
        pool.remove(0);
    }
    let at = pool.partition_point(|p| p.score < c.score);
    pool.insert(at, c);
}

/// A shard's published memory figure, shared with its store.
pub(super) fn mem_cell() -> Arc<MemCell> {
    Arc::new(MemCell::default())
}
