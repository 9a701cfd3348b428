//! The sharded key-value store: N shards, each a map behind a [`ShardLock`].
//!
//! A key's shard comes from a 64-bit SipHash of the key (random seed per process). Inside a
//! shard, entries are kept in hash maps keyed by that hash, each holding one slice of the
//! shard's range of hashes (extendible hashing: a map that grows past 512 entries splits in
//! two), so a lookup is one hash-table probe, and the maps walked in order, each sorted, give
//! `SCAN` a cursor that survives inserts and deletes (shard index and hash prefix).
//!
//! Locking rules:
//! - single-key reads take one read lock, single-key writes one write lock;
//! - multi-key commands lock every shard they touch in ascending shard order (so they are
//!   atomic and cannot deadlock one another);
//! - every write appends its log record to the log's current batch *inside* its write critical
//!   section, before it changes the shard (so the log order is the order of the critical
//!   sections, and a refused append changes nothing); the record is written by group commit
//!   after the section ends, and the connection waits for it before it replies (see
//!   [`crate::aof::Log`]);
//! - `SAVE` holds one shard's read lock at a time, across the write of that shard's snapshot;
//!   `FLUSHALL` waits for a running `SAVE` to end.
//!
//! Expiry is by absolute unix-millisecond deadline: reads hide expired entries, writes treat
//! them as absent. Due entries are removed by the writes themselves (each write to a shard
//! removes up to two due entries of it, so a stream of short-lived keys cannot outrun the
//! reclaiming) and by an adaptive background sweep ([`Store::sweep`]) that goes on pass after
//! pass while due entries remain. Both use a per-shard heap of deadlines. Expiries are never
//! logged: records carry the deadline, so replay drops them.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::{hash_map, BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::aof::{self, Fsync, Log, LogIo, Op};
use crate::glob;
use crate::lock::ShardLock;
use crate::value::{self, Mutation, Value};

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
    pub value: Value,
    /// Unix ms deadline; 0 for none.
    pub expire_at: u64,
}

/// A map from a key's hash to its slot. The hash is already a SipHash of the key, so the
/// map's hasher only moves its bits: the map's own lookups read the low bits (the bucket)
/// and the top 7 (the tag), and the keys of one map share their top bits.
type Map = HashMap<u64, Slot, BuildHasherDefault<HashBits>>;

/// The [`Hasher`] of [`Map`]: the key's hash, rotated (see there).
#[derive(Default)]
struct HashBits(u64);

impl Hasher for HashBits {
    fn finish(&self) -> u64 {
        self.0.rotate_left(32)
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("a Map's keys are u64 hashes")
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
}

/// The keys whose hashes are equal (almost always one).
struct Slot {
    key: SlotKey,
    entry: Entry,
    more: Vec<(Box<[u8]>, Entry)>,
}

/// The first key of a [`Slot`]: up to [`SlotKey::INLINE`] bytes inside the slot itself, so
/// that a lookup compares them on a cache line it has just read, longer keys on the heap.
enum SlotKey {
    Inline(u8, [u8; SlotKey::INLINE]),
    Heap(Box<[u8]>),
}

impl SlotKey {
    const INLINE: usize = 22;

    /// `key` kept inline if it is short (then nothing is allocated for it), else moved to
    /// (or copied onto) the heap.
    fn new(key: impl AsRef<[u8]> + Into<Box<[u8]>>) -> SlotKey {
        let bytes = key.as_ref();
        if bytes.len() <= SlotKey::INLINE {
            let mut inline = [0; SlotKey::INLINE];
            inline[..bytes.len()].copy_from_slice(bytes);
            SlotKey::Inline(bytes.len() as u8, inline)
        } else {
            SlotKey::Heap(key.into())
        }
    }
}

impl std::ops::Deref for SlotKey {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SlotKey::Inline(len, bytes) => &bytes[..*len as usize],
            SlotKey::Heap(key) => key,
        }
    }
}

/// One shard's data: what a [`ShardLock`] protects.
pub struct Shard {
    /// The entries, in hash maps that each hold one slice of this shard's range of hashes
    /// (extendible hashing): a map of depth `d` holds the hashes whose position in the range
    /// ([`Shard::position`]) has some given top `d` bits. A map that grows past
    /// [`MAP_SPLIT`] entries splits in two by its next bit, so a map stays small whatever the
    /// shard's size: a split moves one map's entries, and sorting one map by hash (as `SCAN`
    /// does from its cursor on) is cheap.
    maps: Vec<(Map, u32)>,
    /// `dir[p]` is the index in `maps` of the map that holds the hashes whose position has
    /// top `bits` bits `p`; a map of depth `d` has the `2^(bits - d)` entries of `dir` from
    /// its prefix shifted left by `bits - d`, so the maps in the order of `dir` are in hash
    /// order.
    dir: Vec<u32>,
    /// `dir.len()` is `1 << bits`; every map's depth is at most `bits`, which is at most
    /// [`MAX_BITS`].
    bits: u32,
    /// This shard's index among `shards` (its range of hashes: those `shard_of` maps to it).
    index: u64,
    shards: u64,
    len: usize,
    /// Entries with a deadline.
    volatile: usize,
    /// (deadline, hash) of entries that had a deadline when set; stale ones are skipped.
    deadlines: BinaryHeap<Reverse<(u64, u64)>>,
    /// The undo information of this shard's single-key writes whose records may still fail,
    /// oldest first (by record: the shard's write lock orders them). It belongs to the lock,
    /// not to the data: `FLUSHALL` and its undo leave it in place.
    undo: VecDeque<(u64, UndoOp)>,
}

/// A map of a [`Shard`] that reaches this many hashes splits in two...
const MAP_SPLIT: usize = 512;

/// ... unless its depth is this: a directory of at most 2^20 entries (4 MiB), reached
/// after about 2^29 keys in a shard with SipHash's even spread (hashes crowded in one
/// slice of the range would reach it sooner: beyond it their map only grows).
const MAX_BITS: u32 = 20;

impl Shard {
    /// Shard `index` of `shards`, empty.
    fn new(index: usize, shards: usize) -> Shard {
        Shard {
            maps: vec![(Map::default(), 0)],
            dir: vec![0],
            bits: 0,
            index: index as u64,
            shards: shards as u64,
            len: 0,
            volatile: 0,
            deadlines: BinaryHeap::new(),
            undo: VecDeque::new(),
        }
    }

    /// Where hash `h` (one of this shard's) lies in the shard's range, as a 64-bit fraction:
    /// the low half of `h * shards`, whose high half is the shard (`shard_of`). Ascending
    /// with `h` inside the shard.
    fn position(&self, h: u64) -> u64 {
        h.wrapping_mul(self.shards)
    }

    /// The top `d` bits of a position.
    fn prefix(pos: u64, d: u32) -> usize {
        pos.checked_shr(64 - d).unwrap_or(0) as usize
    }

    /// The index in `maps` of the map of hash `h` (one of this shard's).
    fn map_index(&self, h: u64) -> usize {
        self.dir[Shard::prefix(self.position(h), self.bits)] as usize
    }

    fn map(&self, h: u64) -> &Map {
        &self.maps[self.map_index(h)].0
    }

    fn map_mut(&mut self, h: u64) -> &mut Map {
        let i = self.map_index(h);
        &mut self.maps[i].0
    }

    /// Splits the map of hash `h` if it has grown past [`MAP_SPLIT`]: the hashes whose next
    /// position bit is 1 move to a new map, which takes the upper half of its `dir` entries
    /// (the directory doubles first if the map's depth is `bits`).
    fn split_if_full(&mut self, h: u64) {
        let m = self.map_index(h);
        if self.maps[m].0.len() < MAP_SPLIT {
            return;
        }
        let d = self.maps[m].1;
        if d == MAX_BITS {
            return;
        }
        if d == self.bits {
            self.dir = self.dir.iter().flat_map(|&i| [i, i]).collect();
            self.bits += 1;
        }
        let new = self.maps.len() as u32;
        let shards = self.shards;
        let (stay, go): (Map, Map) = std::mem::take(&mut self.maps[m].0)
            .into_iter()
            .partition(|(h, _)| Shard::prefix(h.wrapping_mul(shards), d + 1) & 1 == 0);
        self.maps[m] = (stay, d + 1);
        self.maps.push((go, d + 1));
        // The map's entries of `dir`: its prefix at depth d, shifted to `bits`.
        let span = 1usize << (self.bits - d);
        let first = (Shard::prefix(self.position(h), d)) << (self.bits - d);
        for slot in &mut self.dir[first + span / 2..first + span] {
            *slot = new;
        }
    }

    fn get(&self, h: u64, key: &[u8]) -> Option<&Entry> {
        let s = self.map(h).get(&h)?;
        if &*s.key == key {
            return Some(&s.entry);
        }
        s.more.iter().find(|(k, _)| &**k == key).map(|(_, e)| e)
    }

    fn get_mut(&mut self, h: u64, key: &[u8]) -> Option<&mut Entry> {
        let s = self.map_mut(h).get_mut(&h)?;
        if &*s.key == key {
            return Some(&mut s.entry);
        }
        s.more.iter_mut().find(|(k, _)| &**k == key).map(|(_, e)| e)
    }

    /// The bookkeeping of deadlines after an entry was replaced in place (its deadline went
    /// from `old_at` to `new_at`, 0: none).
    fn deadline_changed(&mut self, h: u64, old_at: u64, new_at: u64) {
        if old_at != 0 {
            self.volatile -= 1;
        }
        if new_at != 0 {
            self.volatile += 1;
            self.deadlines.push(Reverse((new_at, h)));
            if self.deadlines.len() > 2 * self.volatile + 1024 {
                self.rebuild_deadlines();
            }
        }
    }

    /// Inserts or replaces; returns the entry replaced.
    fn insert(&mut self, h: u64, key: &[u8], entry: Entry) -> Option<Entry> {
        if let Some(e) = self.get_mut(h, key) {
            let new_at = entry.expire_at;
            let old = std::mem::replace(e, entry);
            self.deadline_changed(h, old.expire_at, new_at);
            return Some(old);
        }
        self.insert_absent(h, key, entry);
        None
    }

    /// Inserts an entry for a key known to be absent (one lookup fewer than [`Shard::insert`]).
    /// The key is borrowed or owned: a short one is copied into its slot, a long one moved
    /// there (or copied, if borrowed).
    fn insert_absent(&mut self, h: u64, key: impl AsRef<[u8]> + Into<Box<[u8]>>, entry: Entry) {
        if entry.expire_at != 0 {
            self.deadline_changed(h, 0, entry.expire_at);
        }
        self.len += 1;
        match self.map_mut(h).entry(h) {
            hash_map::Entry::Vacant(v) => {
                v.insert(Slot {
                    key: SlotKey::new(key),
                    entry,
                    more: Vec::new(),
                });
                self.split_if_full(h);
            }
            hash_map::Entry::Occupied(mut o) => {
                o.get_mut().more.push((key.into(), entry));
            }
        }
    }

    /// Stores a whole value read at replay; one whose deadline has passed is dropped.
    fn load(&mut self, h: u64, key: &[u8], e: Entry, now: u64) {
        if e.expire_at != 0 && e.expire_at <= now {
            self.remove(h, key);
        } else {
            self.insert(h, key, e);
        }
    }

    /// Applies a logged change to an aggregate at replay: as the command did, a key that
    /// holds another type (only possible if its deadline passed) counts as absent, and an
    /// aggregate left empty is deleted.
    fn replay_mutation(&mut self, h: u64, key: &[u8], m: Mutation) {
        let fresh = || Entry {
            value: m.empty_value(),
            expire_at: 0,
        };
        match self.get_mut(h, key) {
            Some(e)
                if std::mem::discriminant(&e.value) == std::mem::discriminant(&m.empty_value()) => {
            }
            _ => {
                self.insert(h, key, fresh());
            }
        }
        let e = self.get_mut(h, key).expect("inserted above");
        value::apply(&mut e.value, m).expect("same type");
        if e.value.is_empty_aggregate() {
            self.remove(h, key);
        }
    }

    /// Puts back what a key held before (`None`: absent).
    fn restore(&mut self, h: u64, key: &[u8], old: Option<Entry>) {
        match old {
            Some(e) => {
                self.insert(h, key, e);
            }
            None => {
                self.remove(h, key);
            }
        }
    }

    /// A live entry, chosen at random (`None` if there is none).
    fn random_live(&self, now: u64) -> Option<&[u8]> {
        if self.len == 0 {
            return None;
        }
        let start: u64 = rand::random();
        let live = |e: &Entry| e.expire_at == 0 || e.expire_at > now;
        self.iter_from(start)
            .chain(self.iter_from(0))
            .take(self.len + 64)
            .find(|(_, _, e)| live(e))
            .map(|(_, k, _)| k)
    }

    fn remove(&mut self, h: u64, key: &[u8]) -> Option<Entry> {
        let hash_map::Entry::Occupied(mut o) = self.map_mut(h).entry(h) else {
            return None;
        };
        let slot = o.get_mut();
        let removed = if &*slot.key == key {
            if slot.more.is_empty() {
                o.remove().entry
            } else {
                let (k, e) = slot.more.swap_remove(0);
                slot.key = SlotKey::new(k);
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
        let undo = std::mem::take(&mut self.undo);
        *self = self.emptied();
        self.undo = undo;
    }

    /// Drops the undo information of the records up to `horizon` (they are in the log), at
    /// most `max` records of it.
    fn prune_undo(&mut self, horizon: u64, max: usize) {
        for _ in 0..max {
            match self.undo.front() {
                Some((seq, _)) if *seq <= horizon => drop(self.undo.pop_front()),
                _ => break,
            }
        }
        if self.undo.is_empty() && self.undo.capacity() > 4096 {
            self.undo = VecDeque::new();
        }
    }

    /// An empty shard in this one's place (its undo list empty too).
    fn emptied(&self) -> Shard {
        Shard::new(self.index as usize, self.shards as usize)
    }

    fn rebuild_deadlines(&mut self) {
        let mut heap = BinaryHeap::with_capacity(self.volatile);
        for (h, _, e) in self.entries() {
            if e.expire_at != 0 {
                heap.push(Reverse((e.expire_at, h)));
            }
        }
        self.deadlines = heap;
    }

    /// The (hash, key, entry) of a slot.
    fn slot_entries(h: u64, s: &Slot) -> impl Iterator<Item = (u64, &[u8], &Entry)> {
        std::iter::once((h, &*s.key, &s.entry)).chain(s.more.iter().map(move |(k, e)| (h, &**k, e)))
    }

    /// Every (hash, key, entry), in no particular order.
    fn entries(&self) -> impl Iterator<Item = (u64, &[u8], &Entry)> {
        self.maps
            .iter()
            .flat_map(|(m, _)| m.iter())
            .flat_map(|(&h, s)| Shard::slot_entries(h, s))
    }

    /// Every (hash, key, entry), in hash order, from hash `from` on. Each map is sorted as
    /// the walk reaches it.
    fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, &[u8], &Entry)> {
        // The entry of `dir` `from` falls in, or all of them or none if it is outside this
        // shard's range.
        let mut next = match (((from as u128) * self.shards as u128) >> 64) as u64 {
            s if s < self.index => 0,
            s if s > self.index => self.dir.len(),
            _ => Shard::prefix(self.position(from), self.bits),
        };
        // The maps from there on, each once: a map of depth d has 2^(bits - d) entries.
        let maps = std::iter::from_fn(move || {
            let (m, d) = self.maps.get(*self.dir.get(next)? as usize)?;
            let shift = self.bits - d;
            next = ((next >> shift) + 1) << shift;
            Some(m)
        });
        maps.flat_map(move |m| {
            let mut v: Vec<(u64, &Slot)> = m
                .iter()
                .filter(|(&h, _)| h >= from)
                .map(|(&h, s)| (h, s))
                .collect();
            v.sort_unstable_by_key(|&(h, _)| h);
            v
        })
        .flat_map(|(h, s)| Shard::slot_entries(h, s))
    }

    fn next_deadline(&self) -> Option<u64> {
        self.deadlines.peek().map(|r| r.0 .0)
    }

    /// Sets or clears (0) the deadline of an existing entry; returns the old one.
    fn set_expire(&mut self, h: u64, key: &[u8], at: u64) -> u64 {
        let Some(e) = self.get_mut(h, key) else {
            return 0;
        };
        let old = std::mem::replace(&mut e.expire_at, at);
        if old != 0 {
            self.volatile -= 1;
        }
        if at != 0 {
            self.volatile += 1;
            self.deadlines.push(Reverse((at, h)));
            if self.deadlines.len() > 2 * self.volatile + 1024 {
                self.rebuild_deadlines();
            }
        }
        old
    }

    /// Looks at up to `pops` deadlines due by `now` and removes the entries that are really
    /// due (a deadline may be stale: the key was overwritten or deleted); returns how many.
    fn sweep(&mut self, now: u64, pops: usize) -> usize {
        let mut removed = 0;
        for _ in 0..pops {
            match self.deadlines.peek() {
                Some(&Reverse((t, h))) if t <= now => {
                    self.deadlines.pop();
                    let expired: Vec<Box<[u8]>> = match self.map(h).get(&h) {
                        Some(s) => Shard::slot_entries(h, s)
                            .filter(|(_, _, e)| e.expire_at != 0 && e.expire_at <= now)
                            .map(|(_, k, _)| k.into())
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

    /// Whether a deadline is due by `now`.
    fn due(&self, now: u64) -> bool {
        self.next_deadline().is_some_and(|t| t <= now)
    }
}

/// What [`Store::update`] does to the key.
pub enum Change {
    /// Nothing (nothing is logged).
    Keep,
    /// Store this entry.
    Put(Entry),
    /// Delete the key (if it exists).
    Del,
    /// Set the deadline of the existing key (0: none).
    Expire(u64),
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
    /// `GET`: return the old value.
    pub get: bool,
}

/// What `SET` did.
#[derive(Debug)]
pub struct SetOutcome {
    /// Whether the value was stored (`NX`/`XX` may prevent it).
    pub stored: bool,
    /// The old live value, when `GET` was given.
    pub old: Option<Vec<u8>>,
}

/// The `NX`/`XX`/`GT`/`LT` condition of `EXPIRE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireCond {
    Always,
    /// Only if the key has no deadline.
    Nx,
    /// Only if it has one.
    Xx,
    /// Only if the new deadline is later (no deadline counts as infinite).
    Gt,
    /// Only if the new deadline is earlier.
    Lt,
    /// `XX LT`: only if the key has a deadline and the new one is earlier.
    XxLt,
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

/// How to undo one change of a write whose log record may still fail.
enum UndoOp {
    /// The key held `old` (`None`: it was absent).
    Key {
        hash: u64,
        key: UndoKey,
        old: Option<Entry>,
    },
    /// The key's deadline was `old_at`.
    Expire {
        hash: u64,
        key: UndoKey,
        old_at: u64,
    },
    /// The changes that undo a change to the key's aggregate, applied in order.
    Inverse {
        hash: u64,
        key: UndoKey,
        ops: Vec<Mutation>,
    },
    /// The whole shard (`FLUSHALL`).
    Shard(Box<Shard>),
}

/// A key as an undo record keeps it: a short one in place (no allocation, and the request's
/// buffer is freed at once, where the allocator reuses it for the next request), a long one
/// in the request's own buffer or a copy.
enum UndoKey {
    Inline {
        len: u8,
        bytes: [u8; UndoKey::INLINE],
    },
    Heap(Vec<u8>),
}

impl UndoKey {
    const INLINE: usize = 30;

    /// Takes the request's buffer (kept only for a long key).
    fn new(key: Vec<u8>) -> UndoKey {
        match key.len() <= Self::INLINE {
            true => Self::copy(&key),
            false => UndoKey::Heap(key),
        }
    }

    fn copy(key: &[u8]) -> UndoKey {
        if key.len() > Self::INLINE {
            return UndoKey::Heap(key.to_vec());
        }
        let mut bytes = [0; Self::INLINE];
        bytes[..key.len()].copy_from_slice(key);
        UndoKey::Inline {
            len: key.len() as u8,
            bytes,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            UndoKey::Inline { len, bytes } => &bytes[..*len as usize],
            UndoKey::Heap(k) => k,
        }
    }
}

struct Undo {
    seq: u64,
    shard: usize,
    op: UndoOp,
}

/// The undo information of the writes whose records are not in the log yet.
#[derive(Default)]
struct UndoLog {
    items: Vec<Undo>,
    /// Length at which a push prunes the records already written (amortised).
    prune_at: usize,
}

/// `BGSAVE` and `LASTSAVE` state.
#[derive(Default)]
pub struct SaveState {
    pub bgsave_in_progress: std::sync::atomic::AtomicBool,
    pub last_bgsave_ok: std::sync::atomic::AtomicBool,
    /// Unix seconds of the last successful `SAVE`/`BGSAVE` (the start time before one).
    pub last_save: AtomicU64,
}

pub struct Store<L> {
    /// The shards. Commands never lock them directly but through [`Store::rlock`] and
    /// [`Store::wlock`], which hand out the shards an `EXEC` running in this task holds.
    locks: Box<[L]>,
    undo: std::sync::Mutex<UndoLog>,
    pub saves: SaveState,
    hasher: RandomState,
    log: Option<Log>,
    /// Per shard: the `SAVE` epoch whose snapshot already holds this shard.
    flipped: Box<[AtomicU64]>,
    save_lock: tokio::sync::Mutex<()>,
    /// Keys removed because their deadline passed (sweeps and writes).
    expired: AtomicU64,
    /// `EXEC`s running now: while none does, no task has shards lent or a transaction's log
    /// to write into, and the task-local is not looked at.
    txns: std::sync::atomic::AtomicUsize,
}

impl<L: ShardLock<Shard>> Store<L> {
    /// Builds the store, replaying the snapshot and log first when persistence is on.
    pub fn open(
        nshards: usize,
        persistence: Option<&Persistence>,
    ) -> Result<(Self, Option<aof::LoadReport>), String> {
        let nshards = nshards.clamp(1, 4096);
        let hasher = RandomState::new();
        let mut shards: Vec<Shard> = (0..nshards).map(|i| Shard::new(i, nshards)).collect();
        let mut report = None;
        let mut log = None;
        if let Some(p) = persistence {
            // Before anything in the directory is read or changed.
            let dir_lock = aof::lock_dir(&p.dir)?;
            let now = now_ms();
            let locate = |key: &[u8]| shard_of(&hasher, nshards, key);
            let r = aof::load(&p.dir, |op| match op {
                Op::Set {
                    key,
                    value,
                    expire_at,
                } => {
                    let (i, h) = locate(key);
                    let value = Value::Str(value.to_vec());
                    shards[i].load(h, key, Entry { value, expire_at }, now);
                }
                Op::Value {
                    key,
                    value,
                    expire_at,
                } => {
                    let (i, h) = locate(key);
                    shards[i].load(h, key, Entry { value, expire_at }, now);
                }
                Op::Expire { key, at } => {
                    let (i, h) = locate(key);
                    if at != 0 && at <= now {
                        shards[i].remove(h, key);
                    } else {
                        shards[i].set_expire(h, key, at);
                    }
                }
                Op::Mutate { key, m } => {
                    let (i, h) = locate(key);
                    shards[i].replay_mutation(h, key, m);
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
                                value: Value::Str(value.to_vec()),
                                expire_at: 0,
                            },
                        );
                    }
                }
                Op::FlushAll => shards.iter_mut().for_each(Shard::clear),
                Op::End(_) => {}
            })?;
            log = Some(Log::open(&p.dir, r.base, p.fsync, p.io, dir_lock)?);
            report = Some(r);
        }
        let store = Store {
            // Commands that take several shards take them in index order: a nesting to
            // lockdep (`AsyncRwLock::new_shard`).
            locks: shards
                .into_iter()
                .enumerate()
                .map(|(index, shard)| L::new_shard(shard, index))
                .collect(),
            undo: Default::default(),
            saves: SaveState {
                last_save: AtomicU64::new(now_ms() / 1000),
                last_bgsave_ok: true.into(),
                ..Default::default()
            },
            hasher,
            log,
            flipped: (0..nshards).map(|_| AtomicU64::new(0)).collect(),
            save_lock: tokio::sync::Mutex::new(()),
            expired: AtomicU64::new(0),
            txns: Default::default(),
        };
        Ok((store, report))
    }

    pub fn shard_count(&self) -> usize {
        self.locks.len()
    }

    pub fn log(&self) -> Option<&Log> {
        self.log.as_ref()
    }

    fn locate(&self, key: &[u8]) -> (usize, u64) {
        shard_of(&self.hasher, self.locks.len(), key)
    }

    /// The part of a multi-key record that belongs in the log being rewritten: the keys of
    /// shards already snapshotted in `epoch`.
    fn flipped(&self, shard: usize, epoch: u64) -> bool {
        self.flipped[shard].load(Ordering::Relaxed) == epoch
    }

    /// Appends a record to the log's batch (inside the caller's write section, before it
    /// changes anything) and notes its sequence number in `seq` for the reply to wait on.
    fn log_append(
        &self,
        seq: &mut u64,
        rec: impl FnOnce(&mut Vec<u8>),
        rewrite: impl FnOnce(u64, &mut Vec<u8>),
    ) -> StoreResult<()> {
        if let Some(log) = &self.log {
            if in_txn(self).is_some() {
                // Inside EXEC: into the transaction's one record, appended at its end.
                let epoch = log.accepts()?;
                TXN.with(|t| {
                    let mut l = t.log.borrow_mut();
                    rec(&mut l.rec);
                    if let Some(ep) = epoch {
                        if l.rewrite_epoch != Some(ep) {
                            l.rewrite.clear();
                            l.rewrite_epoch = Some(ep);
                        }
                        rewrite(ep, &mut l.rewrite);
                    }
                });
                *seq = IN_TXN;
                return Ok(());
            }
            *seq = log.append(rec, rewrite)?;
        }
        Ok(())
    }

    /// Logs a key's new deadline (0: none).
    fn log_expire(&self, seq: &mut u64, shard: usize, key: &[u8], at: u64) -> StoreResult<()> {
        self.log_append(
            seq,
            |out| aof::put_expire(out, key, at),
            |ep, out| {
                if self.flipped(shard, ep) {
                    aof::put_expire(out, key, at)
                }
            },
        )
    }

    /// Notes how to undo the changes of the write whose record is `seq` (called inside its
    /// write critical section, right after the change): if that record fails, [`Store::recover`]
    /// puts the old state back.
    fn push_undo(&self, seq: u64, items: impl IntoIterator<Item = (usize, UndoOp)>) {
        let Some(log) = &self.log else { return };
        if seq == 0 {
            return;
        }
        if seq == IN_TXN {
            TXN.with(|t| t.log.borrow_mut().undo.extend(items));
            return;
        }
        let mut u = self.undo.lock().unwrap_or_else(|e| e.into_inner());
        u.items
            .extend(items.into_iter().map(|(shard, op)| Undo { seq, shard, op }));
        if u.items.len() >= u.prune_at.max(64) {
            let horizon = log.undo_horizon();
            u.items.retain(|x| x.seq > horizon);
            u.prune_at = 2 * u.items.len();
        }
    }

    /// [`Store::push_undo`] for a write to one shard, `g` (shard `i`, whose write lock the
    /// caller holds): kept in the shard's own list, no other lock taken; the records of the
    /// list already in the log are dropped first.
    fn push_undo_in(&self, g: &mut Shard, i: usize, seq: u64, op: UndoOp) {
        let Some(log) = &self.log else { return };
        if seq == 0 {
            return;
        }
        if seq == IN_TXN {
            TXN.with(|t| t.log.borrow_mut().undo.push((i, op)));
            return;
        }
        if !g.undo.is_empty() {
            // Two at most: each write frees about one old value, as it would without undo,
            // instead of a batch's worth at once (which the allocator's per-thread cache
            // cannot take); the sweeper drops the rest of a shard no longer written.
            g.prune_undo(log.undo_horizon(), 2);
        }
        g.undo.push_back((seq, op));
    }

    /// Drops the undo information of records that are in the log (a connection calls it once
    /// its writes are acknowledged, so that old values are not held longer than needed).
    pub fn prune_undo(&self) {
        let Some(log) = &self.log else { return };
        let mut u = self.undo.lock().unwrap_or_else(|e| e.into_inner());
        if u.items.is_empty() {
            return;
        }
        let horizon = log.undo_horizon();
        u.items.retain(|x| x.seq > horizon);
        u.prune_at = 2 * u.items.len();
        if u.items.is_empty() && u.items.capacity() > 4096 {
            u.items = Vec::new();
        }
    }

    /// After a failed log batch: takes every shard's write lock (so no reader sees the state
    /// in between), undoes the changes of every failed record, newest first, and tells the
    /// log. Nothing to do (and no lock taken) when no failure is pending.
    pub async fn recover(&self) {
        let Some(log) = &self.log else { return };
        if log.rollback_from().is_none() {
            return;
        }
        let mut guards = Vec::with_capacity(self.locks.len());
        for s in self.locks.iter() {
            guards.push(s.write().await);
        }
        // Every writer that appended a failed record pushed its undo before it released its
        // shard; all of them are released now.
        let Some(from) = log.rollback_from() else {
            return;
        };
        let mut items =
            std::mem::take(&mut self.undo.lock().unwrap_or_else(|e| e.into_inner()).items);
        items.retain(|x| x.seq >= from);
        for (shard, g) in guards.iter_mut().enumerate() {
            let list = std::mem::take(&mut g.undo);
            items.extend(
                (list.into_iter())
                    .filter(|(seq, _)| *seq >= from)
                    .map(|(seq, op)| Undo { seq, shard, op }),
            );
        }
        // Same-key changes are ordered by their records (the shard lock orders them); undo
        // newest first, and within one record in reverse.
        items.sort_by_key(|x| x.seq);
        for x in items.into_iter().rev() {
            undo(&mut guards[x.shard], x.op);
        }
        log.rolled_back();
    }

    /// Removes up to two due entries of a shard the caller is writing anyway.
    fn reclaim(&self, g: &mut Shard, clock: &mut Clock) {
        if !g.deadlines.is_empty() && g.due(clock.now()) {
            let n = g.sweep(clock.now(), 2);
            self.expired.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Keys removed so far because their deadline passed.
    pub fn expired_keys(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

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

    // ---- writes -----------------------------------------------------------------------------
    //
    // Every write: take the write lock(s), decide, append the record to the log batch (an error
    // there changes nothing), apply. `seq` gets the record's sequence number.

    /// `SET`; see [`SetOutcome`]. The key and value are the request's own buffers, moved
    /// into the entry (a new key) or into the undo record (the key of a replaced entry).
    pub async fn set(
        &self,
        key: impl Into<Vec<u8>>,
        value: Vec<u8>,
        opts: SetOpts,
        seq: &mut u64,
    ) -> StoreResult<SetOutcome> {
        let key: Vec<u8> = key.into();
        let (i, h) = self.locate(&key);
        let mut guard = self.wlock(i).await;
        let g = &mut *guard;
        let mut clock = Clock::new();
        // One lookup: the entry found (live or not) is replaced in place below.
        let found = g.get_mut(h, &key);
        let existing = found.as_deref().filter(|e| clock.live(e));
        let old = if opts.get {
            existing
                .map(|e| e.value.bytes().map(<[u8]>::to_vec))
                .transpose()?
        } else {
            None
        };
        if (opts.nx && existing.is_some()) || (opts.xx && existing.is_none()) {
            return Ok(SetOutcome { stored: false, old });
        }
        let expire_at = match opts.expiry {
            Expiry::None => 0,
            Expiry::At(t) => t,
            Expiry::Keep => existing.map_or(0, |e| e.expire_at),
        };
        self.log_append(
            seq,
            |out| aof::put_set(out, &key, &value, expire_at),
            |ep, out| {
                if self.flipped(i, ep) {
                    aof::put_set(out, &key, &value, expire_at)
                }
            },
        )?;
        let new = Entry {
            value: Value::Str(value),
            expire_at,
        };
        match found {
            Some(e) => {
                // The old entry is moved into the undo record, not copied.
                let prev = std::mem::replace(e, new);
                g.deadline_changed(h, prev.expire_at, expire_at);
                if self.log.is_some() {
                    let key = UndoKey::new(key);
                    self.push_undo_in(
                        g,
                        i,
                        *seq,
                        UndoOp::Key {
                            hash: h,
                            key,
                            old: Some(prev),
                        },
                    );
                }
            }
            None if self.log.is_some() => {
                g.insert_absent(h, &key[..], new);
                let key = UndoKey::new(key);
                self.push_undo_in(
                    g,
                    i,
                    *seq,
                    UndoOp::Key {
                        hash: h,
                        key,
                        old: None,
                    },
                );
            }
            None => g.insert_absent(h, key, new),
        }
        self.reclaim(g, &mut clock);
        Ok(SetOutcome { stored: true, old })
    }

    /// `INCRBY`; the deadline, if any, is kept.
    pub async fn incr_by(&self, key: &[u8], delta: i64, seq: &mut u64) -> StoreResult<i64> {
        let (i, h) = self.locate(key);
        let mut g = self.wlock(i).await;
        let mut clock = Clock::new();
        let (old, expire_at) = match g.get(h, key).filter(|e| clock.live(e)) {
            Some(e) => (
                crate::resp::parse_int(e.value.bytes()?)
                    .ok_or("ERR value is not an integer or out of range")?,
                e.expire_at,
            ),
            None => (0, 0),
        };
        let new = old
            .checked_add(delta)
            .ok_or("ERR increment or decrement would overflow")?;
        let value = new.to_string().into_bytes();
        self.log_append(
            seq,
            |out| aof::put_set(out, key, &value, expire_at),
            |ep, out| {
                if self.flipped(i, ep) {
                    aof::put_set(out, key, &value, expire_at)
                }
            },
        )?;
        let prev = g.insert(
            h,
            key,
            Entry {
                value: Value::Str(value),
                expire_at,
            },
        );
        if self.log.is_some() {
            self.push_undo_in(&mut g, i, *seq, undo_key(h, key, prev));
        }
        self.reclaim(&mut g, &mut clock);
        Ok(new)
    }

    /// `EXPIRE` and friends: `when` is the new deadline in unix ms (at or before now: the key
    /// is deleted). Returns whether the key existed and the condition held.
    pub async fn expire(
        &self,
        key: &[u8],
        when: i64,
        cond: ExpireCond,
        seq: &mut u64,
    ) -> StoreResult<bool> {
        let (i, h) = self.locate(key);
        let mut g = self.wlock(i).await;
        let mut clock = Clock::new();
        let Some(e) = g.get(h, key).filter(|e| clock.live(e)) else {
            return Ok(false);
        };
        let current = e.expire_at;
        let ok = match cond {
            ExpireCond::Always => true,
            ExpireCond::Nx => current == 0,
            ExpireCond::Xx => current != 0,
            ExpireCond::Gt => current != 0 && when > current as i64,
            ExpireCond::Lt => current == 0 || when < current as i64,
            ExpireCond::XxLt => current != 0 && when < current as i64,
        };
        if !ok {
            return Ok(false);
        }
        if when <= clock.now() as i64 {
            self.log_append(
                seq,
                |out| aof::put_del(out, std::iter::once(key)),
                |ep, out| {
                    if self.flipped(i, ep) {
                        aof::put_del(out, std::iter::once(key))
                    }
                },
            )?;
            let prev = g.remove(h, key);
            if self.log.is_some() {
                self.push_undo_in(&mut g, i, *seq, undo_key(h, key, prev));
            }
        } else {
            let at = when as u64;
            self.log_expire(seq, i, key, at)?;
            let old_at = g.set_expire(h, key, at);
            if self.log.is_some() {
                self.push_undo_in(&mut g, i, *seq, undo_expire(h, key, old_at));
            }
        }
        Ok(true)
    }

    /// `PERSIST`: clears the deadline; whether the key had one.
    pub async fn persist(&self, key: &[u8], seq: &mut u64) -> StoreResult<bool> {
        let (i, h) = self.locate(key);
        let mut g = self.wlock(i).await;
        let mut clock = Clock::new();
        let Some(e) = g.get(h, key).filter(|e| clock.live(e)) else {
            return Ok(false);
        };
        if e.expire_at == 0 {
            return Ok(false);
        }
        self.log_expire(seq, i, key, 0)?;
        let old_at = g.set_expire(h, key, 0);
        if self.log.is_some() {
            self.push_undo_in(&mut g, i, *seq, undo_expire(h, key, old_at));
        }
        Ok(true)
    }

    /// `DEL`; returns how many live keys were removed.
    pub async fn del(&self, keys: &[Vec<u8>], seq: &mut u64) -> StoreResult<i64> {
        let located: Vec<(usize, u64)> = keys.iter().map(|k| self.locate(k)).collect();
        let idx = involved(&located);
        let mut guards = Vec::with_capacity(idx.len());
        for &i in &idx {
            guards.push(self.wlock(i).await);
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
        self.log_append(
            seq,
            |out| aof::put_del(out, doomed.iter().map(|&(n, _)| &keys[n][..])),
            |ep, out| {
                let part: Vec<&[u8]> = doomed
                    .iter()
                    .filter(|&&(_, i)| self.flipped(i, ep))
                    .map(|&(n, _)| &keys[n][..])
                    .collect();
                if !part.is_empty() {
                    aof::put_del(out, part.into_iter())
                }
            },
        )?;
        let mut undo = Vec::with_capacity(doomed.len());
        for &(n, i) in &doomed {
            let g = &mut guards[idx.binary_search(&i).unwrap()];
            let h = located[n].1;
            let prev = g.remove(h, &keys[n]);
            if self.log.is_some() {
                undo.push((i, undo_key(h, &keys[n], prev)));
            }
        }
        self.push_undo(*seq, undo);
        Ok(doomed.len() as i64)
    }

    /// `MSET` of `pairs` (flattened key, value, key, value...); atomic across shards. With
    /// `nx` (`MSETNX`): nothing is set if any of the keys exists; returns whether it set them.
    pub async fn mset(&self, kv: Vec<Vec<u8>>, nx: bool, seq: &mut u64) -> StoreResult<bool> {
        let located: Vec<(usize, u64)> = kv.chunks(2).map(|p| self.locate(&p[0])).collect();
        let idx = involved(&located);
        let mut guards = Vec::with_capacity(idx.len());
        for &i in &idx {
            guards.push(self.wlock(i).await);
        }
        if nx {
            let mut clock = Clock::new();
            let exists = kv.chunks(2).zip(&located).any(|(p, &(i, h))| {
                guards[idx.binary_search(&i).unwrap()]
                    .get(h, &p[0])
                    .is_some_and(|e| clock.live(e))
            });
            if exists {
                return Ok(false);
            }
        }
        self.log_append(
            seq,
            |out| aof::put_mset(out, kv.chunks(2).map(|p| (&p[0][..], &p[1][..]))),
            |ep, out| {
                let part: Vec<(&[u8], &[u8])> = kv
                    .chunks(2)
                    .zip(&located)
                    .filter(|(_, &(i, _))| self.flipped(i, ep))
                    .map(|(p, _)| (&p[0][..], &p[1][..]))
                    .collect();
                if !part.is_empty() {
                    aof::put_mset(out, part.into_iter())
                }
            },
        )?;
        let mut it = kv.into_iter();
        let mut undo = Vec::with_capacity(located.len());
        for &(i, h) in &located {
            let (key, value) = (it.next().unwrap(), it.next().unwrap());
            let g = &mut guards[idx.binary_search(&i).unwrap()];
            let prev = g.insert(
                h,
                &key,
                Entry {
                    value: Value::Str(value),
                    expire_at: 0,
                },
            );
            if self.log.is_some() {
                undo.push((i, undo_key(h, &key, prev)));
            }
        }
        self.push_undo(*seq, undo);
        let mut clock = Clock::new();
        for g in guards.iter_mut() {
            self.reclaim(g, &mut clock);
        }
        Ok(true)
    }

    /// A read-modify-write of one key under its shard's write lock: `f` gets the live entry
    /// (`None`: absent or expired) and the time, and says what to change and what to reply.
    /// The change is logged, applied and made undoable like every write.
    pub async fn update<R>(
        &self,
        key: &[u8],
        seq: &mut u64,
        f: impl FnOnce(Option<&Entry>, u64) -> StoreResult<(Change, R)>,
    ) -> StoreResult<R> {
        let (i, h) = self.locate(key);
        let mut g = self.wlock(i).await;
        let mut clock = Clock::new();
        let now = clock.now();
        let live = g
            .get(h, key)
            .filter(|e| e.expire_at == 0 || e.expire_at > now);
        let had = live.is_some();
        let (change, r) = f(live, now)?;
        match change {
            Change::Keep => {}
            Change::Put(e) => {
                self.log_append(
                    seq,
                    |out| aof::put_value(out, key, &e.value, e.expire_at),
                    |ep, out| {
                        if self.flipped(i, ep) {
                            aof::put_value(out, key, &e.value, e.expire_at)
                        }
                    },
                )?;
                let prev = g.insert(h, key, e);
                if self.log.is_some() {
                    self.push_undo_in(&mut g, i, *seq, undo_key(h, key, prev));
                }
            }
            Change::Del if had => {
                self.log_append(
                    seq,
                    |out| aof::put_del(out, std::iter::once(key)),
                    |ep, out| {
                        if self.flipped(i, ep) {
                            aof::put_del(out, std::iter::once(key))
                        }
                    },
                )?;
                let prev = g.remove(h, key);
                if self.log.is_some() {
                    self.push_undo_in(&mut g, i, *seq, undo_key(h, key, prev));
                }
            }
            Change::Del => {}
            Change::Expire(at) if had => {
                self.log_expire(seq, i, key, at)?;
                let old_at = g.set_expire(h, key, at);
                if self.log.is_some() {
                    self.push_undo_in(&mut g, i, *seq, undo_expire(h, key, old_at));
                }
            }
            Change::Expire(_) => {}
        }
        self.reclaim(&mut g, &mut clock);
        Ok(r)
    }

    /// A change to the aggregate at `key`, under its shard's write lock: `f` gets the live
    /// value (`None`: absent or expired), checks its type and says what to change (`None`:
    /// nothing, nothing is logged) and what to reply. The change is logged, applied (an
    /// absent key gets an empty value of the change's type first; an aggregate left empty is
    /// deleted) and made undoable by its inverse, so only what changed is copied.
    pub async fn mutate<R>(
        &self,
        key: &[u8],
        seq: &mut u64,
        f: impl FnOnce(Option<&Value>) -> StoreResult<(Option<Mutation>, R)>,
    ) -> StoreResult<R> {
        let (i, h) = self.locate(key);
        let mut g = self.wlock(i).await;
        let mut clock = Clock::new();
        let live = g.get(h, key).filter(|e| clock.live(e));
        let existed = live.is_some();
        let (m, r) = f(live.map(|e| &e.value))?;
        let Some(m) = m else {
            return Ok(r);
        };
        self.log_append(
            seq,
            |out| aof::put_mutate(out, key, &m),
            |ep, out| {
                if self.flipped(i, ep) {
                    aof::put_mutate(out, key, &m)
                }
            },
        )?;
        let mut undo = Vec::new();
        if !existed {
            // Absent, or expired (it goes, as for any write): the undo puts back what was.
            let fresh = Entry {
                value: m.empty_value(),
                expire_at: 0,
            };
            let prev = g.insert(h, key, fresh);
            undo.push((i, undo_key(h, key, prev)));
        }
        let e = g.get_mut(h, key).expect("live or inserted");
        let ops = value::apply(&mut e.value, m).expect("the command checked the type");
        if existed {
            undo.push((
                i,
                UndoOp::Inverse {
                    hash: h,
                    key: UndoKey::copy(key),
                    ops,
                },
            ));
        }
        if e.value.is_empty_aggregate() {
            let prev = g.remove(h, key);
            if existed {
                // Undone first: the emptied value comes back, then its inverse refills it.
                undo.push((i, undo_key(h, key, prev)));
            }
        }
        self.push_undo(*seq, undo);
        self.reclaim(&mut g, &mut clock);
        Ok(r)
    }

    /// `RENAME` (`nx`: `RENAMENX`): moves the value and its deadline; one record pair in one
    /// append (the new key's `SET`, then the old key's `DEL`). Returns whether it moved.
    pub async fn rename(
        &self,
        src: &[u8],
        dst: &[u8],
        nx: bool,
        seq: &mut u64,
    ) -> StoreResult<bool> {
        let located = [self.locate(src), self.locate(dst)];
        let idx = involved(&located);
        let mut guards = Vec::with_capacity(idx.len());
        for &i in &idx {
            guards.push(self.wlock(i).await);
        }
        let (si, sh) = located[0];
        let (di, dh) = located[1];
        let gs = idx.binary_search(&si).unwrap();
        let gd = idx.binary_search(&di).unwrap();
        let mut clock = Clock::new();
        let Some(e) = guards[gs].get(sh, src).filter(|e| clock.live(e)).cloned() else {
            return Err("ERR no such key".into());
        };
        if src == dst {
            return Ok(!nx);
        }
        if nx && guards[gd].get(dh, dst).is_some_and(|e| clock.live(e)) {
            return Ok(false);
        }
        self.log_append(
            seq,
            |out| {
                aof::put_value(out, dst, &e.value, e.expire_at);
                aof::put_del(out, std::iter::once(src));
            },
            |ep, out| {
                if self.flipped(di, ep) {
                    aof::put_value(out, dst, &e.value, e.expire_at);
                }
                if self.flipped(si, ep) {
                    aof::put_del(out, std::iter::once(src));
                }
            },
        )?;
        let prev_src = guards[gs].remove(sh, src);
        let prev_dst = guards[gd].insert(dh, dst, e);
        if self.log.is_some() {
            self.push_undo(
                *seq,
                [
                    (si, undo_key(sh, src, prev_src)),
                    (di, undo_key(dh, dst, prev_dst)),
                ],
            );
        }
        Ok(true)
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

    /// `FLUSHALL`: waits for a running `SAVE` to end, then takes all write locks, in order.
    ///
    /// Waiting matters: during a `SAVE` the new log may only hold records about shards already
    /// snapshotted. A `FLUSHALL` logged there would also wipe, at replay, the keys written
    /// after it to shards snapshotted later (they are in the snapshot, which replay loads
    /// first).
    pub async fn flushall(&self, seq: &mut u64) -> StoreResult<()> {
        // An EXEC that holds the shards took the SAVE lock before them (see `transaction`).
        let _no_save_running = match in_txn(self) {
            Some(true) => None,
            Some(false) => return Err("ERR FLUSHALL in a transaction that did not plan it".into()),
            None => Some(self.save_lock.lock().await),
        };
        let mut guards = Vec::with_capacity(self.locks.len());
        for i in 0..self.locks.len() {
            guards.push(self.wlock(i).await);
        }
        // No SAVE runs, so nothing is asked for the new log.
        self.log_append(seq, aof::put_flushall, |_, _| {})?;
        let mut undo = Vec::new();
        for (i, g) in guards.iter_mut().enumerate() {
            let empty = g.emptied();
            let mut old = std::mem::replace(&mut **g, empty);
            g.undo = std::mem::take(&mut old.undo);
            if self.log.is_some() {
                undo.push((i, UndoOp::Shard(Box::new(old))));
            }
        }
        self.push_undo(*seq, undo);
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
        for (i, shard) in self.locks.iter().enumerate() {
            let g = shard.read().await;
            let mut clock = Clock::new();
            let mut buf = Vec::new();
            let mut n = 0;
            for (_, k, e) in g.entries() {
                if clock.live(e) {
                    aof::put_value(&mut buf, k, &e.value, e.expire_at);
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
        let keys = log.finish_rewrite(snap).await?;
        self.saves
            .last_save
            .store(now_ms() / 1000, Ordering::Relaxed);
        Ok(keys)
    }

    /// One adaptive sweep pass: every shard with due entries is swept in chunks of up to
    /// `chunk` deadlines per write-lock hold (the lock is released between chunks). Returns
    /// how many keys were removed and whether due entries remain (the caller then runs
    /// another pass at once instead of waiting for its next tick).
    pub async fn sweep(&self, chunk: usize) -> (usize, bool) {
        let mut removed = 0;
        let mut more = false;
        for s in self.locks.iter() {
            let now = now_ms();
            let (due, undo) = {
                let g = s.read().await;
                (g.due(now), !g.undo.is_empty())
            };
            if !due && !undo {
                continue;
            }
            let mut g = s.write().await;
            if let Some(log) = self.log.as_ref().filter(|_| undo) {
                // Old values of a shard no longer written are not kept past a sweep.
                g.prune_undo(log.undo_horizon(), usize::MAX);
            }
            removed += g.sweep(now, chunk);
            more |= g.due(now);
        }
        self.expired.fetch_add(removed as u64, Ordering::Relaxed);
        (removed, more)
    }

    /// The lock statistics of every shard that has any.
    pub fn lock_stats(&self) -> Vec<(usize, String)> {
        self.locks
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.stats().map(|t| (i, t)))
            .collect()
    }
}

fn undo_key(hash: u64, key: &[u8], old: Option<Entry>) -> UndoOp {
    UndoOp::Key {
        hash,
        key: UndoKey::copy(key),
        old,
    }
}

fn undo_expire(hash: u64, key: &[u8], old_at: u64) -> UndoOp {
    UndoOp::Expire {
        hash,
        key: UndoKey::copy(key),
        old_at,
    }
}

/// Puts back what one change replaced.
fn undo(g: &mut Shard, op: UndoOp) {
    match op {
        UndoOp::Key { hash, key, old } => g.restore(hash, key.bytes(), old),
        UndoOp::Expire { hash, key, old_at } => {
            g.set_expire(hash, key.bytes(), old_at);
        }
        UndoOp::Inverse { hash, key, ops } => {
            if let Some(e) = g.get_mut(hash, key.bytes()) {
                for m in ops {
                    value::apply(&mut e.value, m);
                }
            }
        }
        UndoOp::Shard(old) => {
            let undo = std::mem::take(&mut g.undo);
            *g = *old;
            g.undo = undo;
        }
    }
}

fn shard_of(hasher: &RandomState, n: usize, key: &[u8]) -> (usize, u64) {
    // The key's bytes alone (no length prefix, as `Hash for [u8]` would add: one SipHash
    // `write` fewer); only this function hashes keys.
    let mut s = hasher.build_hasher();
    s.write(key);
    let h = s.finish();
    (((h as u128 * n as u128) >> 64) as usize, h)
}

/// The distinct shards in `located`, ascending (the lock order).
fn involved(located: &[(usize, u64)]) -> Vec<usize> {
    let mut idx: Vec<usize> = located.iter().map(|&(i, _)| i).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}

// ---- transactions ---------------------------------------------------------------------------
//
// `EXEC` runs its queued commands through the ordinary store methods while it holds the write
// locks of every shard they touch, taken in index order before the first command (so an
// `EXEC` is one critical section across shards, and cannot deadlock with the multi-key
// commands, which take shards in the same order). The shards it holds, and what its commands
// log, live in a task-local `Txn` while the commands run: `rlock`/`wlock` hand out the held
// shards instead of locking them again, `log_append` collects the records and `push_undo`
// the undo information. At the end the records go to the log as one `MULTI` record, and if
// the log refuses it, every change is undone before the locks are released.

tokio::task_local! {
    static TXN: Txn;
}

/// The sequence number the commands of a transaction get for their writes: their record is
/// the transaction's, appended at its end.
const IN_TXN: u64 = u64::MAX - 1;

/// Counts a running `EXEC` in [`Store::txns`] (until dropped, also when the `EXEC` is).
struct TxnCount<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> TxnCount<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        TxnCount(n)
    }
}

impl Drop for TxnCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A shard an `EXEC` holds the write lock of.
struct HeldShard {
    index: usize,
    shard: ShardPtr,
    /// Lent to a command now (a second loan while one is out would alias it: a bug, panics).
    lent: Cell<bool>,
}

/// A pointer to the data of a shard whose write guard the `EXEC` that made it holds.
struct ShardPtr(*mut Shard);

// SAFETY: the pointer is only dereferenced from the task of the `EXEC` that holds the write
// guard it points into, while that guard is held (`Store::transaction` keeps it for the whole
// scope of the task-local); the `lent` flag makes the loans exclusive.
unsafe impl Send for ShardPtr {}

struct Txn {
    /// The store it runs on (its address).
    store: usize,
    /// Ascending by index.
    held: Vec<HeldShard>,
    /// Whether it holds the `SAVE` lock (taken before the shards when it flushes).
    save_lock: bool,
    log: RefCell<TxnLog>,
}

#[derive(Default)]
struct TxnLog {
    /// The records of its commands, framed, in order.
    rec: Vec<u8>,
    /// Their parts for the log a `SAVE` is writing (see `Log::append`), for `rewrite_epoch`.
    rewrite: Vec<u8>,
    rewrite_epoch: Option<u64>,
    undo: Vec<(usize, UndoOp)>,
}

/// `Some(whether it holds the SAVE lock)` when an `EXEC` on `store` runs in this task.
fn in_txn<L>(store: &Store<L>) -> Option<bool> {
    // This task's own EXEC counted itself before its commands ran (program order: Relaxed
    // suffices); 0 means no EXEC anywhere.
    if store.txns.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let me = store as *const Store<L> as usize;
    TXN.try_with(|t| (t.store == me).then_some(t.save_lock))
        .ok()
        .flatten()
}

/// A shard's data under its read or write lock, or lent by the `EXEC` that holds it.
pub(crate) enum Guard<'a, G> {
    Locked(G),
    Lent(&'a mut Shard, usize),
}

impl<G: std::ops::Deref<Target = Shard>> std::ops::Deref for Guard<'_, G> {
    type Target = Shard;
    fn deref(&self) -> &Shard {
        match self {
            Guard::Locked(g) => g,
            Guard::Lent(s, _) => s,
        }
    }
}

impl<G: std::ops::DerefMut<Target = Shard>> std::ops::DerefMut for Guard<'_, G> {
    fn deref_mut(&mut self) -> &mut Shard {
        match self {
            Guard::Locked(g) => g,
            Guard::Lent(s, _) => s,
        }
    }
}

impl<G> Drop for Guard<'_, G> {
    fn drop(&mut self) {
        if let Guard::Lent(_, slot) = self {
            let _ = TXN.try_with(|t| t.held[*slot].lent.set(false));
        }
    }
}

impl<L: ShardLock<Shard>> Store<L> {
    /// Shard `i` lent by the `EXEC` running in this task, if it holds it.
    #[allow(clippy::mut_from_ref)] // the loan is exclusive: see `ShardPtr`
    fn lent(&self, i: usize) -> Option<(&mut Shard, usize)> {
        if self.txns.load(Ordering::Relaxed) == 0 {
            return None; // see `in_txn`
        }
        let me = self as *const Self as usize;
        let (ptr, slot) = TXN
            .try_with(|t| {
                if t.store != me {
                    return None;
                }
                let slot = t.held.binary_search_by_key(&i, |h| h.index).ok()?;
                let h = &t.held[slot];
                assert!(
                    !h.lent.replace(true),
                    "shard {i} lent twice in one transaction"
                );
                Some((h.shard.0, slot))
            })
            .ok()
            .flatten()?;
        // SAFETY: see `ShardPtr`: the EXEC of this task holds the write guard for the whole
        // scope in which `TXN` is set, and the loan is exclusive until this guard drops.
        Some((unsafe { &mut *ptr }, slot))
    }

    /// Shard `i` under its read lock (or lent by this task's `EXEC`).
    async fn rlock(&self, i: usize) -> Guard<'_, L::ReadGuard<'_>> {
        match self.lent(i) {
            Some((s, slot)) => Guard::Lent(s, slot),
            None => Guard::Locked(self.locks[i].read().await),
        }
    }

    /// Shard `i` under its write lock (or lent by this task's `EXEC`).
    async fn wlock(&self, i: usize) -> Guard<'_, L::WriteGuard<'_>> {
        match self.lent(i) {
            Some((s, slot)) => Guard::Lent(s, slot),
            None => Guard::Locked(self.locks[i].write().await),
        }
    }

    /// The shards (ascending, distinct) that the keys `keys` live in.
    pub fn shards_of<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> Vec<usize> {
        let mut idx: Vec<usize> = keys.map(|k| self.locate(k).0).collect();
        idx.sort_unstable();
        idx.dedup();
        idx
    }

    /// Runs `body` (an `EXEC`'s commands, through the ordinary store methods) as one critical
    /// section over the shards `shards` (ascending, distinct; the write locks are taken in that
    /// order), and, with `flushes`, with the `SAVE` lock taken first (a `FLUSHALL` waits for a
    /// `SAVE`; waiting for it while holding shards would deadlock with the `SAVE`). The writes
    /// of `body` become one log record; returns `body`'s result and that record's sequence
    /// number (0: none). If the log refuses the record, every change `body` made is undone
    /// before the locks are released, and the log's error is returned.
    pub async fn transaction<R>(
        &self,
        shards: &[usize],
        flushes: bool,
        body: impl std::future::Future<Output = R>,
    ) -> StoreResult<(R, u64)> {
        if in_txn(self).is_some() {
            // Inside an EXEC (a COPY queued in it): its shards are held, its record collects.
            return Ok((body.await, 0));
        }
        let _no_save = match flushes {
            true => Some(self.save_lock.lock().await),
            false => None,
        };
        let mut guards = Vec::with_capacity(shards.len());
        for &i in shards {
            guards.push(self.locks[i].write().await);
        }
        let txn = Txn {
            store: self as *const Self as usize,
            held: shards
                .iter()
                .zip(guards.iter_mut())
                .map(|(&index, g)| HeldShard {
                    index,
                    shard: ShardPtr(&mut **g),
                    lent: Cell::new(false),
                })
                .collect(),
            save_lock: flushes,
            log: Default::default(),
        };
        let counted = TxnCount::new(&self.txns);
        let (r, tlog) = TXN
            .scope(txn, async {
                let r = body.await;
                (r, TXN.with(|t| t.log.take()))
            })
            .await;
        // The loans are over: the guards are the only way to the shards again.
        drop(counted);
        let Some(log) = &self.log else {
            return Ok((r, 0));
        };
        if tlog.rec.is_empty() {
            return Ok((r, 0));
        }
        let appended = log.append(
            |out| aof::put_multi(out, &tlog.rec),
            |ep, out| {
                if tlog.rewrite_epoch == Some(ep) && !tlog.rewrite.is_empty() {
                    aof::put_multi(out, &tlog.rewrite)
                }
            },
        );
        match appended {
            Ok(seq) => {
                self.push_undo(seq, tlog.undo);
                Ok((r, seq))
            }
            Err(e) => {
                for (i, op) in tlog.undo.into_iter().rev() {
                    let slot = shards.binary_search(&i).expect("a held shard");
                    undo(&mut guards[slot], op);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    /// Issue 30: when the log refuses an `EXEC`'s record (it started refusing while the
    /// transaction's commands ran), every change of the transaction is undone before its
    /// locks go: a reader waiting for them sees none of it, the transaction gets the log's
    /// error, and a store reopened on the directory has none of it either.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transaction_whose_record_the_log_refuses_is_undone_before_its_locks_go() {
        let dir = std::env::temp_dir().join(format!(
            "kvserver-txn-refused-{}-{}",
            std::process::id(),
            now_ms()
        ));
        let persistence = Persistence {
            dir: dir.clone(),
            fsync: Fsync::Everysec,
            io: LogIo::Direct,
        };
        let open = || {
            Store::<lock_adapters::Rwsem<Shard>>::open(4, Some(&persistence))
                .unwrap()
                .0
        };
        let opts = SetOpts {
            expiry: Expiry::None,
            nx: false,
            xx: false,
            get: false,
        };
        let store = Arc::new(open());
        let keys: Vec<Vec<u8>> = (0..16).map(|i| format!("k{i}").into_bytes()).collect();
        let mut seq = 0;
        for k in &keys {
            store
                .set(k.clone(), b"1".to_vec(), opts, &mut seq)
                .await
                .unwrap();
        }
        store.log().unwrap().wait(seq).await.unwrap();
        let everything = |store: Arc<Store<lock_adapters::Rwsem<Shard>>>| async move {
            let mut all = Vec::new();
            for k in [&b"k0"[..], b"k7", b"k9", b"k15", b"fresh"] {
                all.push(store.get(k, |v| v.map(<[u8]>::to_vec)).await.unwrap());
            }
            (all, store.dbsize().await)
        };
        let before = everything(store.clone()).await;

        let mut named: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        named.push(b"fresh");
        let shards = store.shards_of(named.into_iter());
        let (running, started) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn({
            let store = store.clone();
            async move {
                started.await.unwrap();
                everything(store).await
            }
        });
        let result = store
            .transaction(&shards, false, async {
                let mut s = 0;
                for k in &keys[..8] {
                    store
                        .set(k.clone(), b"new".to_vec(), opts, &mut s)
                        .await
                        .unwrap();
                }
                store
                    .set(b"fresh".to_vec(), b"x".to_vec(), opts, &mut s)
                    .await
                    .unwrap();
                assert_eq!(store.incr_by(b"k9", 5, &mut s).await, Ok(6));
                assert_eq!(store.del(&keys[14..], &mut s).await, Ok(2));
                // A reader queues for the shards; then the log starts refusing.
                running.send(()).unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                store.log().unwrap().refuse_for_test();
            })
            .await;
        let e = result.unwrap_err();
        assert!(e.starts_with("MISCONF"), "{e}");
        assert_eq!(
            reader.await.unwrap(),
            before,
            "a reader waiting for the locks"
        );
        assert_eq!(
            everything(store.clone()).await,
            before,
            "after the transaction"
        );

        drop(store);
        let store = Arc::new(open());
        assert_eq!(everything(store.clone()).await, before, "after a reopen");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A shard's maps, one after another, are in hash order: iterating from any hash gives
    /// exactly the shard's hashes at or above it, ascending, whatever the number of shards
    /// (and so of splits), and a start outside the shard's range gives all or none.
    #[test]
    fn a_shards_maps_iterate_in_hash_order() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(30);
        for shards in [1, 3, 4, 5, 64, 4096] {
            let mut all: Vec<Shard> = (0..shards).map(|i| Shard::new(i, shards)).collect();
            let mut hashes: Vec<Vec<u64>> = vec![Vec::new(); shards];
            for n in 0..3000u64 {
                let h = match n % 3 {
                    0 => rng.gen(),
                    1 => rng.gen::<u64>() >> rng.gen_range(0..64),
                    _ => u64::MAX - (rng.gen::<u64>() >> rng.gen_range(0..64)),
                };
                let i = (((h as u128) * shards as u128) >> 64) as usize; // as shard_of
                let entry = Entry {
                    value: Value::Str(Vec::new()),
                    expire_at: 0,
                };
                if all[i].insert(h, &n.to_le_bytes(), entry).is_none() {
                    hashes[i].push(h);
                }
            }
            for (i, shard) in all.iter().enumerate() {
                let mut want = hashes[i].clone();
                want.sort_unstable();
                let mut starts = vec![0, u64::MAX, rng.gen()];
                starts.extend(
                    want.iter()
                        .step_by(97)
                        .flat_map(|&h| [h, h.wrapping_add(1)]),
                );
                for from in starts {
                    let got: Vec<u64> = shard.iter_from(from).map(|(h, _, _)| h).collect();
                    let expect: Vec<u64> = want.iter().copied().filter(|&h| h >= from).collect();
                    assert_eq!(got, expect, "{shards} shards, shard {i}, from {from:#x}");
                }
            }
        }
    }

    /// The directory of a shard's maps after many splits, dense and skewed (hashes crowded
    /// near both ends of the range, which splits the same maps over and over): every map of
    /// depth d has exactly its 2^(bits - d) aligned entries of `dir`, holds only hashes of
    /// that prefix and at most `MAP_SPLIT` of them (unless at `MAX_BITS`, which the hashes
    /// crowded near 0 reach); every key is found, short and long, and removals leave
    /// the rest found.
    #[test]
    fn a_shards_maps_split_into_a_consistent_directory() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(31);
        for shards in [1, 3, 4] {
            let mut shard = Shard::new(0, shards);
            let mut keys: Vec<(u64, Vec<u8>)> = Vec::new();
            for n in 0..20_000u64 {
                let h = match n % 3 {
                    0 => rng.gen::<u64>() / shards as u64,
                    1 => (rng.gen::<u64>() >> rng.gen_range(0..64)) / shards as u64,
                    // The same hash for two keys now and then: a slot's `more`.
                    _ => keys.last().map_or(0, |k| k.0),
                };
                // 8 to 32 bytes: kept in the slot up to `SlotKey::INLINE`, on the heap beyond.
                let key = n.to_le_bytes().repeat(1 + n as usize % 4);
                let entry = Entry {
                    value: Value::Str(key.clone()),
                    expire_at: 0,
                };
                assert!(shard.insert(h, &key, entry).is_none());
                keys.push((h, key));
            }
            let check = |shard: &Shard, keys: &[(u64, Vec<u8>)]| {
                assert_eq!(shard.dir.len(), 1 << shard.bits);
                let mut i = 0;
                while i < shard.dir.len() {
                    let m = shard.dir[i] as usize;
                    let (map, d) = &shard.maps[m];
                    let span = 1usize << (shard.bits - d);
                    assert_eq!(i % span, 0, "map {m} of depth {d} at {i}");
                    assert!(shard.dir[i..i + span].iter().all(|&x| x as usize == m));
                    assert!(map.len() <= MAP_SPLIT || *d == MAX_BITS);
                    for &h in map.keys() {
                        assert_eq!(Shard::prefix(shard.position(h), *d), i / span);
                    }
                    i += span;
                }
                let listed: usize = shard.maps.iter().map(|(m, _)| m.len()).sum();
                let slots: HashSet<u64> = keys.iter().map(|k| k.0).collect();
                assert_eq!(listed, slots.len(), "each map listed once in dir");
                assert_eq!(shard.len, keys.len());
                for (h, key) in keys {
                    let e = shard.get(*h, key).expect("every key is found");
                    assert_eq!(e.value.bytes().unwrap(), &key[..]);
                }
                let order: Vec<u64> = shard.iter_from(0).map(|(h, _, _)| h).collect();
                let mut want: Vec<u64> = keys.iter().map(|k| k.0).collect();
                want.sort_unstable();
                assert_eq!(order, want);
            };
            assert_eq!(
                shard.bits, MAX_BITS,
                "{shards} shards: the crowded hashes reach the cap"
            );
            check(&shard, &keys);
            let mut kept = Vec::new();
            for (n, (h, key)) in keys.into_iter().enumerate() {
                if n % 2 == 0 {
                    assert!(shard.remove(h, &key).is_some());
                } else {
                    kept.push((h, key));
                }
            }
            check(&shard, &kept);
        }
    }
}
