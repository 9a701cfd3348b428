//! Persistence glue: opening the store from its snapshot and log, appending records, `SAVE`.

use std::collections::hash_map::RandomState;
use std::sync::atomic::{AtomicU64, Ordering};

use super::evict;
use super::txn::{in_txn, IN_TXN, TXN};
use super::{now_ms, shard_of, Clock, Entry, Persistence, SaveState, Shard, Store, StoreResult};
use crate::aof::{self, Log, Op};
use crate::lock::ShardLock;
use crate::value::Value;

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
        evict::tick();
        let mem = shards.iter().map(|s| s.mem_pub.clone()).collect();
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
                saved_seq: AtomicU64::new(log.as_ref().map_or(0, |l| l.last_seq())),
                last_bgsave_ok: true.into(),
                ..Default::default()
            },
            hasher,
            log,
            flipped: (0..nshards).map(|_| AtomicU64::new(0)).collect(),
            save_lock: tokio::sync::Mutex::new(()),
            expired: AtomicU64::new(0),
            txns: Default::default(),
            mem,
            limits: evict::Limits::new(),
            evictor: Default::default(),
        };
        Ok((store, report))
    }

    /// The part of a multi-key record that belongs in the log being rewritten: the keys of
    /// shards already snapshotted in `epoch`.
    pub(super) fn flipped(&self, shard: usize, epoch: u64) -> bool {
        self.flipped[shard].load(Ordering::Relaxed) == epoch
    }

    /// Appends a record to the log's batch (inside the caller's write section, before it
    /// changes anything) and notes its sequence number in `seq` for the reply to wait on.
    pub(super) fn log_append(
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
    pub(super) fn log_expire(
        &self,
        seq: &mut u64,
        shard: usize,
        key: &[u8],
        at: u64,
    ) -> StoreResult<()> {
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
    /// `SAVE`: snapshot shard by shard under read locks, then switch to a new log that starts
    /// from the snapshot. Returns the number of keys saved.
    pub async fn save(&self) -> StoreResult<u64> {
        let log = self
            .log
            .as_ref()
            .ok_or("ERR persistence is disabled (--appendonly no)")?;
        let _one_at_a_time = self.save_lock.lock().await;
        let mut snap = log.begin_rewrite().await?;
        let from = log.last_seq();
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
        self.saves.saved_seq.fetch_max(from, Ordering::Relaxed);
        Ok(keys)
    }
}
