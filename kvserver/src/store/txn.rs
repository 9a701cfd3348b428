//! Transactions: `EXEC` as one critical section across the shards it touches.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

use super::undo::{undo, UndoOp};
use super::{Shard, Store, StoreResult};
use crate::aof;
use crate::lock::ShardLock;

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
    pub(super) static TXN: Txn;
}

/// The sequence number the commands of a transaction get for their writes: their record is
/// the transaction's, appended at its end.
pub(super) const IN_TXN: u64 = u64::MAX - 1;

/// Counts a running `EXEC` in [`Store::txns`] (until dropped, also when the `EXEC` is).
pub(super) struct TxnCount<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> TxnCount<'a> {
    pub(super) fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
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
pub(super) struct HeldShard {
    pub(super) index: usize,
    pub(super) shard: ShardPtr,
    /// Lent to a command now (a second loan while one is out would alias it: a bug, panics).
    pub(super) lent: Cell<bool>,
}

/// A pointer to the data of a shard whose write guard the `EXEC` that made it holds.
pub(super) struct ShardPtr(*mut Shard);

// SAFETY: the pointer is only dereferenced from the task of the `EXEC` that holds the write
// guard it points into, while that guard is held (`Store::transaction` keeps it for the whole
// scope of the task-local); the `lent` flag makes the loans exclusive.
unsafe impl Send for ShardPtr {}

pub(super) struct Txn {
    /// The store it runs on (its address).
    pub(super) store: usize,
    /// Ascending by index.
    pub(super) held: Vec<HeldShard>,
    /// Whether it holds the `SAVE` lock (taken before the shards when it flushes).
    pub(super) save_lock: bool,
    pub(super) log: RefCell<TxnLog>,
}

#[derive(Default)]
pub(super) struct TxnLog {
    /// The records of its commands, framed, in order.
    pub(super) rec: Vec<u8>,
    /// Their parts for the log a `SAVE` is writing (see `Log::append`), for `rewrite_epoch`.
    pub(super) rewrite: Vec<u8>,
    pub(super) rewrite_epoch: Option<u64>,
    pub(super) undo: Vec<(usize, UndoOp)>,
}

/// `Some(whether it holds the SAVE lock)` when an `EXEC` on `store` runs in this task.
pub(super) fn in_txn<L>(store: &Store<L>) -> Option<bool> {
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
    pub(super) fn lent(&self, i: usize) -> Option<(&mut Shard, usize)> {
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
    pub(super) async fn rlock(&self, i: usize) -> Guard<'_, L::ReadGuard<'_>> {
        match self.lent(i) {
            Some((s, slot)) => Guard::Lent(s, slot),
            None => Guard::Locked(self.locks[i].read().await),
        }
    }

    /// Shard `i` under its write lock (or lent by this task's `EXEC`).
    pub(super) async fn wlock(&self, i: usize) -> Guard<'_, L::WriteGuard<'_>> {
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
