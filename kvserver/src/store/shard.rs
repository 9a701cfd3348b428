//! A shard's map: the slots of its keys, split by hash prefix (extendible hashing).

use std::cmp::Reverse;
use std::collections::{hash_map, BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::evict::{self, MemCell};
use super::undo::UndoOp;
use crate::value::{self, Mutation, Value};

#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    /// Unix ms deadline; 0 for none.
    pub expire_at: u64,
}

/// A map from a key's hash to its slot. The hash is already a SipHash of the key, so the
/// map's hasher only moves its bits: the map's own lookups read the low bits (the bucket)
/// and the top 7 (the tag), and the keys of one map share their top bits.
pub(super) type Map = HashMap<u64, Slot, BuildHasherDefault<HashBits>>;

/// The [`Hasher`] of [`Map`]: the key's hash, rotated (see there).
#[derive(Default)]
pub(super) struct HashBits(u64);

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
pub(super) struct Slot {
    pub(super) key: SlotKey,
    pub(super) entry: Entry,
    /// The access data eviction ranks by (see [`evict`]), of the slot's keys together.
    pub(super) access: AtomicU32,
    pub(super) more: Vec<(Box<[u8]>, Entry)>,
}

/// The first key of a [`Slot`]: up to [`SlotKey::INLINE`] bytes inside the slot itself, so
/// that a lookup compares them on a cache line it has just read, longer keys on the heap.
pub(super) enum SlotKey {
    Inline(u8, [u8; SlotKey::INLINE]),
    Heap(Box<[u8]>),
}

impl SlotKey {
    pub(super) const INLINE: usize = 22;

    /// `key` kept inline if it is short (then nothing is allocated for it), else moved to
    /// (or copied onto) the heap.
    pub(super) fn new(key: impl AsRef<[u8]> + Into<Box<[u8]>>) -> SlotKey {
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

/// One shard's data: what a [`ShardLock`](crate::lock::ShardLock) protects.
pub struct Shard {
    /// The entries, in hash maps that each hold one slice of this shard's range of hashes
    /// (extendible hashing): a map of depth `d` holds the hashes whose position in the range
    /// ([`Shard::position`]) has some given top `d` bits. A map that grows past
    /// [`MAP_SPLIT`] entries splits in two by its next bit, so a map stays small whatever the
    /// shard's size: a split moves one map's entries, and sorting one map by hash (as `SCAN`
    /// does from its cursor on) is cheap.
    pub(super) maps: Vec<(Map, u32)>,
    /// `dir[p]` is the index in `maps` of the map that holds the hashes whose position has
    /// top `bits` bits `p`; a map of depth `d` has the `2^(bits - d)` entries of `dir` from
    /// its prefix shifted left by `bits - d`, so the maps in the order of `dir` are in hash
    /// order.
    pub(super) dir: Vec<u32>,
    /// `dir.len()` is `1 << bits`; every map's depth is at most `bits`, which is at most
    /// [`MAX_BITS`].
    pub(super) bits: u32,
    /// This shard's index among `shards` (its range of hashes: those `shard_of` maps to it).
    pub(super) index: u64,
    pub(super) shards: u64,
    pub(super) len: usize,
    /// Entries with a deadline.
    pub(super) volatile: usize,
    /// (deadline, hash) of entries that had a deadline when set; stale ones are skipped.
    pub(super) deadlines: BinaryHeap<Reverse<(u64, u64)>>,
    /// The undo information of this shard's single-key writes whose records may still fail,
    /// oldest first (by record: the shard's write lock orders them). It belongs to the lock,
    /// not to the data: `FLUSHALL` and its undo leave it in place.
    pub(super) undo: VecDeque<(u64, UndoOp)>,
    /// The estimated bytes of the entries ([`evict::entry_cost`]), and where they are
    /// published for the limit's check, which takes no lock.
    pub(super) mem: usize,
    pub(super) mem_pub: Arc<MemCell>,
    /// Whether an access updates LFU data (an LFU policy) rather than the LRU clock.
    pub(super) lfu: bool,
}

/// A map of a [`Shard`] that reaches this many hashes splits in two...
pub(super) const MAP_SPLIT: usize = 512;

/// ... unless its depth is this: a directory of at most 2^20 entries (4 MiB), reached
/// after about 2^29 keys in a shard with SipHash's even spread (hashes crowded in one
/// slice of the range would reach it sooner: beyond it their map only grows).
pub(super) const MAX_BITS: u32 = 20;

impl Shard {
    /// Shard `index` of `shards`, empty.
    pub(super) fn new(index: usize, shards: usize) -> Shard {
        Shard::with_cell(index, shards, evict::mem_cell(), false)
    }

    fn with_cell(index: usize, shards: usize, mem_pub: Arc<MemCell>, lfu: bool) -> Shard {
        mem_pub.0.store(0, Ordering::Relaxed);
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
            mem: 0,
            mem_pub,
            lfu,
        }
    }

    /// Where hash `h` (one of this shard's) lies in the shard's range, as a 64-bit fraction:
    /// the low half of `h * shards`, whose high half is the shard (`shard_of`). Ascending
    /// with `h` inside the shard.
    pub(super) fn position(&self, h: u64) -> u64 {
        h.wrapping_mul(self.shards)
    }

    /// The top `d` bits of a position.
    pub(super) fn prefix(pos: u64, d: u32) -> usize {
        pos.checked_shr(64 - d).unwrap_or(0) as usize
    }

    /// The index in `maps` of the map of hash `h` (one of this shard's).
    pub(super) fn map_index(&self, h: u64) -> usize {
        self.dir[Shard::prefix(self.position(h), self.bits)] as usize
    }

    pub(super) fn map(&self, h: u64) -> &Map {
        &self.maps[self.map_index(h)].0
    }

    pub(super) fn map_mut(&mut self, h: u64) -> &mut Map {
        let i = self.map_index(h);
        &mut self.maps[i].0
    }

    /// Splits the map of hash `h` if it has grown past [`MAP_SPLIT`]: the hashes whose next
    /// position bit is 1 move to a new map, which takes the upper half of its `dir` entries
    /// (the directory doubles first if the map's depth is `bits`).
    pub(super) fn split_if_full(&mut self, h: u64) {
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

    /// The entry of a key, as an access (eviction's access data is updated).
    pub(super) fn get(&self, h: u64, key: &[u8]) -> Option<&Entry> {
        let s = self.map(h).get(&h)?;
        let e = Shard::in_slot(s, key)?;
        evict::touch(&s.access, self.lfu);
        Some(e)
    }

    /// The entry of a key, not counted as an access.
    pub(super) fn peek(&self, h: u64, key: &[u8]) -> Option<&Entry> {
        Shard::in_slot(self.map(h).get(&h)?, key)
    }

    /// The access data of a key live at `now`, not counted as an access.
    pub(super) fn peek_access(&self, h: u64, key: &[u8], now: u64) -> Option<u32> {
        let s = self.map(h).get(&h)?;
        let e = Shard::in_slot(s, key)?;
        (e.expire_at == 0 || e.expire_at > now).then(|| s.access.load(Ordering::Relaxed))
    }

    fn in_slot<'a>(s: &'a Slot, key: &[u8]) -> Option<&'a Entry> {
        if &*s.key == key {
            return Some(&s.entry);
        }
        s.more.iter().find(|(k, _)| &**k == key).map(|(_, e)| e)
    }

    /// The entry of a key, to change in place, as an access. Whoever changes its value
    /// through it tells [`Shard::add_mem`] the difference.
    pub(super) fn get_mut(&mut self, h: u64, key: &[u8]) -> Option<&mut Entry> {
        let lfu = self.lfu;
        let s = self.map_mut(h).get_mut(&h)?;
        evict::touch_mut(&mut s.access, lfu);
        if &*s.key == key {
            return Some(&mut s.entry);
        }
        s.more.iter_mut().find(|(k, _)| &**k == key).map(|(_, e)| e)
    }

    /// Changes the estimate of the entries' bytes by `delta`, and publishes it.
    pub(super) fn add_mem(&mut self, delta: isize) {
        self.mem = self.mem.wrapping_add_signed(delta);
        self.mem_pub.0.store(self.mem, Ordering::Relaxed);
    }

    /// Publishes the estimate again (after the shard was swapped whole).
    pub(super) fn publish_mem(&self) {
        self.mem_pub.0.store(self.mem, Ordering::Relaxed);
    }

    /// Applies a change to the aggregate of a key that exists, keeping the estimate of the
    /// bytes; returns its inverse (`None`: the key is absent or of another type).
    pub(super) fn apply(&mut self, h: u64, key: &[u8], m: Mutation) -> Option<Vec<Mutation>> {
        let cost = evict::ChangeCost::of(&m);
        let e = self.get_mut(h, key)?;
        let inverse = value::apply(&mut e.value, m)?;
        self.add_mem(cost.after(&inverse));
        Some(inverse)
    }

    /// Inserts or replaces; returns the entry replaced.
    pub(super) fn insert(&mut self, h: u64, key: &[u8], entry: Entry) -> Option<Entry> {
        if let Some(e) = self.get_mut(h, key) {
            let new_at = entry.expire_at;
            let new_cost = evict::value_cost(&entry.value);
            let old = std::mem::replace(e, entry);
            self.deadline_changed(h, old.expire_at, new_at);
            self.add_mem(new_cost as isize - evict::value_cost(&old.value) as isize);
            return Some(old);
        }
        self.insert_absent(h, key, entry);
        None
    }

    /// Inserts an entry for a key known to be absent (one lookup fewer than [`Shard::insert`]).
    /// The key is borrowed or owned: a short one is copied into its slot, a long one moved
    /// there (or copied, if borrowed).
    pub(super) fn insert_absent(
        &mut self,
        h: u64,
        key: impl AsRef<[u8]> + Into<Box<[u8]>>,
        entry: Entry,
    ) {
        if entry.expire_at != 0 {
            self.deadline_changed(h, 0, entry.expire_at);
        }
        self.len += 1;
        self.add_mem(evict::entry_cost(key.as_ref(), &entry) as isize);
        let access = AtomicU32::new(evict::new_access(self.lfu));
        match self.map_mut(h).entry(h) {
            hash_map::Entry::Vacant(v) => {
                v.insert(Slot {
                    key: SlotKey::new(key),
                    entry,
                    access,
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
    pub(super) fn load(&mut self, h: u64, key: &[u8], e: Entry, now: u64) {
        if e.expire_at != 0 && e.expire_at <= now {
            self.remove(h, key);
        } else {
            self.insert(h, key, e);
        }
    }

    /// Applies a logged change to an aggregate at replay: as the command did, a key that
    /// holds another type (only possible if its deadline passed) counts as absent, and an
    /// aggregate left empty is deleted.
    pub(super) fn replay_mutation(&mut self, h: u64, key: &[u8], m: Mutation) {
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
        self.apply(h, key, m).expect("same type");
        if self
            .peek(h, key)
            .is_some_and(|e| e.value.is_empty_aggregate())
        {
            self.remove(h, key);
        }
    }

    /// Puts back what a key held before (`None`: absent).
    pub(super) fn restore(&mut self, h: u64, key: &[u8], old: Option<Entry>) {
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
    pub(super) fn random_live(&self, now: u64) -> Option<&[u8]> {
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

    pub(super) fn remove(&mut self, h: u64, key: &[u8]) -> Option<Entry> {
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
        self.add_mem(-(evict::entry_cost(key, &removed) as isize));
        Some(removed)
    }

    pub(super) fn clear(&mut self) {
        let undo = std::mem::take(&mut self.undo);
        *self = self.emptied();
        self.undo = undo;
    }

    /// An empty shard in this one's place (its undo list empty too).
    pub(super) fn emptied(&self) -> Shard {
        Shard::with_cell(
            self.index as usize,
            self.shards as usize,
            self.mem_pub.clone(),
            self.lfu,
        )
    }

    /// The (hash, key, entry) of a slot.
    pub(super) fn slot_entries(h: u64, s: &Slot) -> impl Iterator<Item = (u64, &[u8], &Entry)> {
        std::iter::once((h, &*s.key, &s.entry)).chain(s.more.iter().map(move |(k, e)| (h, &**k, e)))
    }

    /// Every (hash, key, entry), in no particular order.
    pub(super) fn entries(&self) -> impl Iterator<Item = (u64, &[u8], &Entry)> {
        self.maps
            .iter()
            .flat_map(|(m, _)| m.iter())
            .flat_map(|(&h, s)| Shard::slot_entries(h, s))
    }

    /// Every (hash, key, entry), in hash order, from hash `from` on. Each map is sorted as
    /// the walk reaches it.
    pub(super) fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, &[u8], &Entry)> {
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

    /// Up to `n` live keys picked at random for eviction (with their access data and
    /// deadline): consecutive entries from a random position, as Redis' `dictGetSomeKeys`
    /// takes them, or (`volatile`) keys with a deadline, from random places of the heap of
    /// deadlines (a stale place is skipped).
    pub(super) fn sample(&self, n: usize, volatile: bool) -> Vec<(Vec<u8>, u32, u64)> {
        let now = super::now_ms();
        let live = |e: &Entry| e.expire_at == 0 || e.expire_at > now;
        let mut out: Vec<(Vec<u8>, u32, u64)> = Vec::with_capacity(n);
        let take = |out: &mut Vec<(Vec<u8>, u32, u64)>, k: &[u8], s: &Slot, e: &Entry| {
            if live(e) && !out.iter().any(|(o, _, _)| o == k) {
                out.push((k.to_vec(), s.access.load(Ordering::Relaxed), e.expire_at));
            }
        };
        if volatile {
            // Random places first; if they were all stale while keys with a deadline remain
            // (the heap keeps up to twice as many stale places as live ones, plus 1024), the
            // places in order from a random one.
            let heap = self.deadlines.as_slice();
            let start = rand::random::<usize>() % heap.len().max(1);
            let random = (0..heap.len().min(3 * n)).map(|_| rand::random::<usize>() % heap.len());
            let in_order = (0..heap.len()).map(|k| (start + k) % heap.len());
            let mut places = random.chain(in_order.take_while(|_| self.volatile > 0));
            while out.len() < n {
                let Some(p) = places.next() else { break };
                let Reverse((at, h)) = heap[p];
                if let Some(s) = self.map(h).get(&h) {
                    for (_, k, e) in Shard::slot_entries(h, s) {
                        if e.expire_at == at {
                            take(&mut out, k, s, e);
                        }
                    }
                }
            }
            return out;
        }
        if self.len == 0 {
            return out;
        }
        let mut skip = rand::random::<usize>() % self.len;
        let mut m = 0;
        while m + 1 < self.maps.len() && skip >= self.maps[m].0.len() {
            skip -= self.maps[m].0.len();
            m += 1;
        }
        let slots = (self.maps[m..].iter().chain(&self.maps[..m]))
            .flat_map(|(map, _)| map.iter())
            .skip(skip)
            .take(10 * n);
        for (&h, s) in slots {
            for (_, k, e) in Shard::slot_entries(h, s) {
                take(&mut out, k, s, e);
            }
            if out.len() >= n {
                break;
            }
        }
        out
    }
}
