//! Undo: how to put back what a write changed when its log record fails.

use std::collections::VecDeque;

use super::txn::{IN_TXN, TXN};
use super::{Entry, Shard, Store};
use crate::lock::ShardLock;
use crate::value::Mutation;

/// How to undo one change of a write whose log record may still fail.
pub(super) enum UndoOp {
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
pub(super) enum UndoKey {
    Inline {
        len: u8,
        bytes: [u8; UndoKey::INLINE],
    },
    Heap(Vec<u8>),
}

impl UndoKey {
    pub(super) const INLINE: usize = 30;

    /// Takes the request's buffer (kept only for a long key).
    pub(super) fn new(key: Vec<u8>) -> UndoKey {
        match key.len() <= Self::INLINE {
            true => Self::copy(&key),
            false => UndoKey::Heap(key),
        }
    }

    pub(super) fn copy(key: &[u8]) -> UndoKey {
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

    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            UndoKey::Inline { len, bytes } => &bytes[..*len as usize],
            UndoKey::Heap(k) => k,
        }
    }
}

pub(super) struct Undo {
    pub(super) seq: u64,
    pub(super) shard: usize,
    pub(super) op: UndoOp,
}

/// The undo information of the writes whose records are not in the log yet.
#[derive(Default)]
pub(super) struct UndoLog {
    pub(super) items: Vec<Undo>,
    /// Length at which a push prunes the records already written (amortised).
    pub(super) prune_at: usize,
}

impl Shard {
    /// Drops the undo information of the records up to `horizon` (they are in the log), at
    /// most `max` records of it.
    pub(super) fn prune_undo(&mut self, horizon: u64, max: usize) {
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
}

impl<L: ShardLock<Shard>> Store<L> {
    /// Notes how to undo the changes of the write whose record is `seq` (called inside its
    /// write critical section, right after the change): if that record fails, [`Store::recover`]
    /// puts the old state back.
    pub(super) fn push_undo(&self, seq: u64, items: impl IntoIterator<Item = (usize, UndoOp)>) {
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
    pub(super) fn push_undo_in(&self, g: &mut Shard, i: usize, seq: u64, op: UndoOp) {
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
}

pub(super) fn undo_key(hash: u64, key: &[u8], old: Option<Entry>) -> UndoOp {
    UndoOp::Key {
        hash,
        key: UndoKey::copy(key),
        old,
    }
}

pub(super) fn undo_expire(hash: u64, key: &[u8], old_at: u64) -> UndoOp {
    UndoOp::Expire {
        hash,
        key: UndoKey::copy(key),
        old_at,
    }
}

/// Puts back what one change replaced.
pub(super) fn undo(g: &mut Shard, op: UndoOp) {
    match op {
        UndoOp::Key { hash, key, old } => g.restore(hash, key.bytes(), old),
        UndoOp::Expire { hash, key, old_at } => {
            g.set_expire(hash, key.bytes(), old_at);
        }
        UndoOp::Inverse { hash, key, ops } => {
            for m in ops {
                g.apply(hash, key.bytes(), m);
            }
        }
        UndoOp::Shard(old) => {
            let undo = std::mem::take(&mut g.undo);
            let lfu = g.lfu;
            *g = *old;
            g.undo = undo;
            g.lfu = lfu;
            g.publish_mem();
        }
    }
}
