//! The store's writes.

use std::collections::HashSet;

use super::evict;
use super::txn::in_txn;
use super::undo::{undo_expire, undo_key, UndoKey, UndoOp};
use super::{
    involved, Change, Clock, Entry, Expiry, SetOpts, SetOutcome, Shard, Store, StoreResult,
};
use crate::aof;
use crate::lock::ShardLock;
use crate::value::{Mutation, Value};

impl<L: ShardLock<Shard>> Store<L> {
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
                let new_cost = evict::value_cost(&new.value);
                let prev = std::mem::replace(e, new);
                g.deadline_changed(h, prev.expire_at, expire_at);
                g.add_mem(new_cost as isize - evict::value_cost(&prev.value) as isize);
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

    /// Deletes `key` (hash `h`) from shard `i`, whose write lock the caller holds (`g`), as a
    /// `DEL` in the log, undone if its record fails.
    pub(super) fn del_logged(
        &self,
        g: &mut Shard,
        i: usize,
        h: u64,
        key: &[u8],
        seq: &mut u64,
    ) -> StoreResult<()> {
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
            self.push_undo_in(g, i, *seq, undo_key(h, key, prev));
        }
        Ok(())
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
                self.del_logged(&mut g, i, h, key, seq)?;
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
        let ops = g.apply(h, key, m).expect("the command checked the type");
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
        if g.peek(h, key).is_some_and(|e| e.value.is_empty_aggregate()) {
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
}
