//! Expiry: the per-shard heap of deadlines, the writes' reclaiming, the background sweep,
//! and the commands that set or clear a deadline.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

use super::evict;
use super::undo::undo_expire;
use super::{now_ms, Clock, ExpireCond, Shard, Store, StoreResult};
use crate::lock::ShardLock;

impl Shard {
    /// The bookkeeping of deadlines after an entry was replaced in place (its deadline went
    /// from `old_at` to `new_at`, 0: none).
    pub(super) fn deadline_changed(&mut self, h: u64, old_at: u64, new_at: u64) {
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

    pub(super) fn rebuild_deadlines(&mut self) {
        let mut heap = BinaryHeap::with_capacity(self.volatile);
        for (h, _, e) in self.entries() {
            if e.expire_at != 0 {
                heap.push(Reverse((e.expire_at, h)));
            }
        }
        self.deadlines = heap;
    }

    pub(super) fn next_deadline(&self) -> Option<u64> {
        self.deadlines.peek().map(|r| r.0 .0)
    }

    /// Sets or clears (0) the deadline of an existing entry; returns the old one.
    pub(super) fn set_expire(&mut self, h: u64, key: &[u8], at: u64) -> u64 {
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
    /// With `keys`, the removed keys are added to it (for `expired` keyspace notifications).
    pub(super) fn sweep(
        &mut self,
        now: u64,
        pops: usize,
        mut keys: Option<&mut Vec<Vec<u8>>>,
    ) -> usize {
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
                        if let Some(keys) = keys.as_deref_mut() {
                            keys.push(k.into());
                        }
                    }
                }
                _ => break,
            }
        }
        removed
    }

    /// Whether a deadline is due by `now`.
    pub(super) fn due(&self, now: u64) -> bool {
        self.next_deadline().is_some_and(|t| t <= now)
    }
}

impl<L: ShardLock<Shard>> Store<L> {
    /// Removes up to two due entries of a shard the caller is writing anyway.
    pub(super) fn reclaim(&self, g: &mut Shard, clock: &mut Clock) {
        if !g.deadlines.is_empty() && g.due(clock.now()) {
            let n = g.sweep(clock.now(), 2, None);
            self.expired.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Keys removed so far because their deadline passed.
    pub fn expired_keys(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
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
            self.del_logged(&mut g, i, h, key, seq)?;
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

    /// One adaptive sweep pass: every shard with due entries is swept in chunks of up to
    /// `chunk` deadlines per write-lock hold (the lock is released between chunks). Returns
    /// how many keys were removed and whether due entries remain (the caller then runs
    /// another pass at once instead of waiting for its next tick).
    pub async fn sweep(&self, chunk: usize) -> (usize, bool) {
        self.sweep_collecting(chunk, None).await
    }

    /// [`Store::sweep`], adding the removed keys to `keys` if given.
    pub async fn sweep_collecting(
        &self,
        chunk: usize,
        mut keys: Option<&mut Vec<Vec<u8>>>,
    ) -> (usize, bool) {
        evict::tick();
        self.note_peak(self.used_memory() as u64);
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
            removed += g.sweep(now, chunk, keys.as_deref_mut());
            more |= g.due(now);
        }
        self.expired.fetch_add(removed as u64, Ordering::Relaxed);
        (removed, more)
    }
}
