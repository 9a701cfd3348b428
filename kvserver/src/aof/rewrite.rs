//! Rewriting (`SAVE`): the new snapshot and the new log written beside the live one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::files::{file_header, fsync_dir, snapshot_name};
use super::format::{put_end, AOF_MAGIC, AOF_NAME, FILE_HEADER, SNAP_MAGIC};
use super::writer::{Held, Inner, Log, RewriteFile, Writer};
use tokio::io::AsyncWriteExt;

/// Handed out by [`Log::begin_rewrite`]; the snapshot being written.
pub struct Snapshot {
    pub epoch: u64,
    pub(super) file: tokio::fs::File,
    pub(super) tmp: PathBuf,
    pub(super) keys: u64,
    /// [`Log::rollbacks`] when it began: a rollback meanwhile may have undone writes the
    /// snapshot holds.
    pub(super) rollbacks: u64,
}

impl Snapshot {
    /// Appends the `SET` records of one shard (built by the caller while it holds the shard's
    /// read lock, which it keeps across this write).
    pub async fn write_shard(&mut self, records: &[u8], keys: u64) -> Result<(), String> {
        self.file
            .write_all(records)
            .await
            .map_err(|e| format!("ERR snapshot write failed: {e}"))?;
        self.keys += keys;
        Ok(())
    }
}

impl Log {
    /// Starts a `SAVE`: creates the new log (based on the new snapshot) and the snapshot file.
    /// From now on [`Log::append`] asks its caller for the part of each record that belongs in
    /// the new log. The caller must then snapshot every shard and call [`Log::finish_rewrite`]
    /// or [`Log::abort_rewrite`].
    pub async fn begin_rewrite(&self) -> Result<Snapshot, String> {
        let inner = &self.inner;
        let mut held = Held {
            guard: Some(inner.writer.clone().lock_owned().await),
            inner: inner.clone(),
        };
        if held.rewrite.is_some() {
            return Err("ERR a SAVE is already in progress".into());
        }
        {
            let p = inner.lock_pending();
            if let Some(e) = &p.broken {
                return Err(format!("MISCONF the append-only log failed ({e})"));
            }
            if p.rollback_from.is_some() {
                return Err(
                    "MISCONF the append-only log failed; its failed writes are being undone".into(),
                );
            }
        }
        let epoch = inner.next_epoch.fetch_add(1, Ordering::Relaxed);
        let tmp_log = inner.dir.join(format!("{AOF_NAME}.tmp"));
        let tmp_snap = inner.dir.join(format!("{}.tmp", snapshot_name(epoch)));
        let io_err = |e: io::Error| format!("ERR cannot start SAVE: {e}");
        fs::write(&tmp_log, file_header(AOF_MAGIC, epoch)).map_err(io_err)?;
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&tmp_log)
            .map_err(io_err)?;
        let mut snap = tokio::fs::File::create(&tmp_snap).await.map_err(io_err)?;
        snap.write_all(&file_header(SNAP_MAGIC, epoch))
            .await
            .map_err(io_err)?;
        held.rewrite = Some(RewriteFile {
            file: Arc::new(file),
            len: FILE_HEADER as u64,
            failed: None,
        });
        let mut p = inner.lock_pending();
        p.rewrite_epoch = Some(epoch);
        p.rewrite.clear();
        Ok(Snapshot {
            epoch,
            file: snap,
            tmp: tmp_snap,
            keys: 0,
            rollbacks: self.rollbacks(),
        })
    }

    /// Completes a `SAVE` once every shard is in the snapshot: makes the snapshot durable, then
    /// atomically replaces the log with the new one (the rename is the commit point).
    ///
    /// Before the commit point any error aborts the `SAVE` (the old log got every record all
    /// along). After it the new log *is* the log whatever happens next: a failed directory
    /// fsync is reported, and writes are refused until a retry of it succeeds.
    pub async fn finish_rewrite(&self, mut snap: Snapshot) -> Result<u64, String> {
        let res: io::Result<()> = async {
            let mut end = Vec::new();
            put_end(&mut end, snap.keys);
            snap.file.write_all(&end).await?;
            snap.file.flush().await?;
            snap.file.sync_all().await
        }
        .await;
        if let Err(e) = res {
            self.abort_rewrite(&snap).await;
            return Err(format!("ERR snapshot write failed: {e}"));
        }
        // Every record whose change the snapshot holds was appended by now: it must be in the
        // old log (and its part in the new one) before the new log may replace it, or a write
        // that failed could come back through the snapshot.
        if let Err(f) = self.wait(self.last_seq()).await {
            self.abort_rewrite(&snap).await;
            return Err(f.msg);
        }
        if self.rollbacks() != snap.rollbacks {
            self.abort_rewrite(&snap).await;
            return Err(
                "ERR SAVE aborted: a log failure undid writes while the snapshot was taken".into(),
            );
        }
        let inner = self.inner.clone();
        let held = Held {
            guard: Some(inner.writer.clone().lock_owned().await),
            inner: inner.clone(),
        };
        let tmp = snap.tmp.clone();
        let epoch = snap.epoch;
        let committed = tokio::task::spawn_blocking(move || {
            let mut held = held;
            inner.commit_rewrite(&mut held, &tmp, epoch)
        })
        .await
        .unwrap_or_else(|e| Err((false, format!("ERR SAVE failed: {e}"))));
        match committed {
            Ok(()) => {
                self.inner.stats.rewrites.fetch_add(1, Ordering::Relaxed);
                Ok(snap.keys)
            }
            Err((true, e)) => {
                self.inner.stats.rewrites.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
            Err((false, e)) => {
                self.abort_rewrite(&snap).await;
                Err(e)
            }
        }
    }

    /// Gives up a `SAVE`: the old log stays authoritative (it got every write all along).
    pub async fn abort_rewrite(&self, snap: &Snapshot) {
        let inner = &self.inner;
        let mut held = Held {
            guard: Some(inner.writer.clone().lock_owned().await),
            inner: inner.clone(),
        };
        held.rewrite = None;
        {
            let mut p = inner.lock_pending();
            p.rewrite_epoch = None;
            p.rewrite.clear();
        }
        drop(held);
        let _ = fs::remove_file(&snap.tmp);
        let _ = fs::remove_file(inner.dir.join(snapshot_name(snap.epoch)));
        let _ = fs::remove_file(inner.dir.join(format!("{AOF_NAME}.tmp")));
    }
}

impl Inner {
    /// The file work of [`Log::finish_rewrite`], with the writer held (no batch is written
    /// meanwhile; appends go on into the pending batch). `Err((committed, message))`.
    pub(super) fn commit_rewrite(
        &self,
        w: &mut Writer,
        snap_tmp: &Path,
        epoch: u64,
    ) -> Result<(), (bool, String)> {
        let abort = |e: String| Err((false, e));
        let Some(rw) = w.rewrite.as_ref() else {
            return abort("ERR no SAVE in progress".into());
        };
        if let Some(e) = &rw.failed {
            return abort(format!("ERR {e}"));
        }
        if let Err(e) = rw.file.sync_data() {
            return abort(format!("ERR fsync of the new log failed: {e}"));
        }
        let final_snap = self.dir.join(snapshot_name(epoch));
        if let Err(e) = fs::rename(snap_tmp, &final_snap) {
            return abort(format!("ERR {e}"));
        }
        if let Err(e) = fsync_dir(&self.dir) {
            return abort(format!("ERR fsync of {} failed: {e}", self.dir.display()));
        }
        if let Err(e) = fs::rename(
            self.dir.join(format!("{AOF_NAME}.tmp")),
            self.dir.join(AOF_NAME),
        ) {
            return abort(format!("ERR {e}"));
        }
        // The commit point: the name now points at the new log, which builds on the new
        // snapshot. Switch to it, whatever fails below.
        let rw = w.rewrite.take().expect("checked above");
        {
            let mut p = self.lock_pending();
            // The records not written yet go to the new log only, as their new-log parts.
            p.buf = std::mem::take(&mut p.rewrite);
            p.rewrite_epoch = None;
            p.dir_unsynced = true;
        }
        let old_base = w.base;
        w.file = rw.file;
        w.len = rw.len;
        w.base = epoch;
        match fsync_dir(&self.dir) {
            Ok(()) => {
                self.lock_pending().dir_unsynced = false;
                if old_base != 0 {
                    let _ = fs::remove_file(self.dir.join(snapshot_name(old_base)));
                }
                Ok(())
            }
            Err(e) => {
                // Until the rename is durable the old snapshot stays (a crash could bring the
                // old log's name back), and no write is acknowledged.
                let msg = format!(
                    "the new log is in place but fsync of {} failed: {e}",
                    self.dir.display()
                );
                self.stats.fsync_errors.fetch_add(1, Ordering::Relaxed);
                self.lock_pending().sync_error = Some(msg.clone());
                Err((
                    true,
                    format!("ERR SAVE: {msg}; writes are refused until a retry succeeds"),
                ))
            }
        }
    }
}
