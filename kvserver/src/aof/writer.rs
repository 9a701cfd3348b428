//! The live log: batches, group commit, failures and their rollback.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::files::{fsync_dir, DirLock};
use super::format::{AOF_NAME, MAX_RECORD, REC_HEADER};
use super::{Fsync, LogIo};

// ---- the live log: group commit ------------------------------------------------------------

/// Records appended inside write critical sections and not yet handed to the file.
pub(super) struct Pending {
    /// Whole records, in the order of the critical sections that appended them.
    pub(super) buf: Vec<u8>,
    /// While a `SAVE` runs: the parts of the same records that belong in the new log.
    pub(super) rewrite: Vec<u8>,
    /// `Some(epoch)` while a `SAVE` runs.
    pub(super) rewrite_epoch: Option<u64>,
    /// Sequence number of the last record appended (records are numbered from 1).
    pub(super) seq: u64,
    /// Writes are refused until the server is restarted: a batch failed under `always`, or
    /// cutting a failed batch back off the file failed too (what the file holds is unknown).
    pub(super) broken: Option<String>,
    /// A batch failed and the changes of its records (and of every record after it) are
    /// still in memory: writes are refused until the store has undone them
    /// ([`Log::rolled_back`]).
    pub(super) rollback_from: Option<u64>,
    /// The records that failed, oldest first (at most [`MAX_FAILURES`] ranges).
    pub(super) failures: std::collections::VecDeque<Failure>,
    /// An fsync (of the log, or of the directory after a `SAVE`) failed: writes are refused
    /// until a retry succeeds, as Redis does.
    pub(super) sync_error: Option<String>,
    /// The directory still needs an fsync to make the last `SAVE`'s renames durable.
    pub(super) dir_unsynced: bool,
}

/// Records `from..=to` failed; `msg` is the error their commands get.
#[derive(Debug, Clone)]
pub(super) struct Failure {
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) msg: String,
}

/// Failed ranges remembered (a waiter checks its record within moments of appending it).
pub(super) const MAX_FAILURES: usize = 10_000;

/// The file side, held by the one task that writes a batch.
pub(super) struct Writer {
    pub(super) file: Arc<fs::File>,
    pub(super) len: u64,
    pub(super) base: u64,
    pub(super) rewrite: Option<RewriteFile>,
    /// An empty buffer kept for the next batch swap.
    pub(super) spare: Vec<u8>,
}

pub(super) struct RewriteFile {
    pub(super) file: Arc<fs::File>,
    pub(super) len: u64,
    pub(super) failed: Option<String>,
}

/// Counters for `INFO`.
#[derive(Default)]
pub struct LogStats {
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub batches: AtomicU64,
    pub fsyncs: AtomicU64,
    pub rewrites: AtomicU64,
    pub write_errors: AtomicU64,
    pub fsync_errors: AtomicU64,
}

pub(super) struct Inner {
    pub(super) dir: PathBuf,
    pub(super) fsync: Fsync,
    pub(super) io_mode: LogIo,
    pub(super) pending: std::sync::Mutex<Pending>,
    pub(super) writer: Arc<tokio::sync::Mutex<Writer>>,
    /// Last sequence number appended / resolved (written, under `always` fsynced, or failed).
    pub(super) appended: AtomicU64,
    pub(super) durable: AtomicU64,
    /// The last sequence number of the latest failed range (0: none ever failed).
    pub(super) failed_to: AtomicU64,
    /// Whether a rollback is pending (mirrors `Pending::rollback_from`, for a lock-free check).
    pub(super) rollback_pending: std::sync::atomic::AtomicBool,
    /// Completed rollbacks: a read that ran across one may have seen undone writes.
    pub(super) rollbacks: AtomicU64,
    /// Woken after each batch (and whenever the writer is released).
    pub(super) flushed: tokio::sync::Notify,
    pub(super) next_epoch: AtomicU64,
    pub(super) stats: LogStats,
    pub(super) _lock: DirLock,
}

/// The append-only log the server writes while it runs, with group commit:
///
/// - [`Log::append`] is called inside a write critical section; it only encodes the record
///   into the current batch (so the order of the records is the order of the critical
///   sections) and returns the record's sequence number;
/// - [`Log::wait`] is called by the connection before it replies: the first waiter takes the
///   whole batch and writes it with one `write(2)` (and, under `always`, one `fsync`), the
///   others wait for it; a failed batch is cut back off the file and fails every record in it
///   and after it.
pub struct Log {
    pub(super) inner: Arc<Inner>,
}

/// Why [`Log::wait`] failed: every record from `from` on is not in the log.
#[derive(Debug, Clone)]
pub struct Failed {
    pub from: u64,
    pub msg: String,
}

impl Inner {
    pub(super) fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        // A panic while the lock is held cannot leave `Pending` half-updated in a way that
        // matters more than the panic itself; carry on with the data.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Some` once record `seq` is resolved: written, or failed (with its error).
    pub(super) fn check(&self, seq: u64) -> Option<Result<(), Failed>> {
        // `fail` publishes `failed_to` before `durable`: once `durable` covers `seq`, a
        // failure that covers it is visible too. A failure sets `durable` to its last record,
        // so an unresolved record cannot have failed yet.
        if seq > self.durable.load(Ordering::Acquire) {
            return None;
        }
        if seq > self.failed_to.load(Ordering::Acquire) {
            return Some(Ok(()));
        }
        let p = self.lock_pending();
        match p
            .failures
            .iter()
            .rev()
            .find(|f| f.from <= seq && seq <= f.to)
        {
            Some(f) => Some(Err(Failed {
                from: f.from,
                msg: f.msg.clone(),
            })),
            None => Some(Ok(())),
        }
    }

    /// Fails everything after the last written record (the batch being written and the
    /// records appended since) and refuses writes until the store has undone their changes.
    /// `unknown`: the batch could not be cut back off the file, so it may be in the log.
    pub(super) fn fail(&self, p: &mut Pending, msg: String, unknown: bool) {
        p.buf.clear();
        p.rewrite.clear();
        let from = self.durable.load(Ordering::Acquire) + 1;
        let to = p.seq;
        let reply = if unknown {
            format!("IOERR {msg}; the outcome of this write is unknown: it may be in the log and be back after a restart (writes are refused until the server is restarted)")
        } else {
            format!("IOERR {msg}; the write was not logged and its change was undone")
        };
        if unknown || self.fsync == Fsync::Always {
            p.broken.get_or_insert(msg);
        }
        if p.failures.len() >= MAX_FAILURES {
            p.failures.pop_front();
        }
        p.failures.push_back(Failure {
            from,
            to,
            msg: reply,
        });
        p.rollback_from.get_or_insert(from);
        self.rollback_pending.store(true, Ordering::Release);
        self.failed_to.store(to, Ordering::Release);
        self.durable.store(to, Ordering::Release);
    }

    /// Writes the current batch (one `write(2)`, plus one `fsync` under `always`). Called with
    /// the writer held; never suspends, so the caller can run it inline or in the blocking pool.
    pub(super) fn write_batch(&self, w: &mut Writer) {
        let (mut buf, rewrite, upto) = {
            let mut p = self.lock_pending();
            if p.broken.is_some() || p.rollback_from.is_some() {
                p.buf.clear();
                p.rewrite.clear();
                return;
            }
            if p.seq <= self.durable.load(Ordering::Acquire) {
                return;
            }
            let buf = std::mem::replace(&mut p.buf, std::mem::take(&mut w.spare));
            let rewrite = std::mem::take(&mut p.rewrite);
            (buf, rewrite, p.seq)
        };
        let old_len = w.len;
        let mut res = (&*w.file).write_all(&buf).map_err(|e| {
            self.stats.write_errors.fetch_add(1, Ordering::Relaxed);
            format!("append-only log write failed: {e}")
        });
        if res.is_ok() && self.fsync == Fsync::Always {
            res = w.file.sync_data().map_err(|e| {
                self.stats.fsync_errors.fetch_add(1, Ordering::Relaxed);
                format!("append-only log fsync failed: {e}")
            });
            if res.is_ok() {
                self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Err(msg) = res {
            // No partial batch stays behind: cut the file back to where the batch began.
            // (After a failed fsync the pages may or may not reach the disk; cutting them
            // off means a restart never shows a write whose client got an error.)
            let (msg, unknown) = match w.file.set_len(old_len).and_then(|_| w.file.sync_data()) {
                Ok(()) => (msg, false),
                Err(e2) => (
                    format!("{msg}; cutting the batch back off the file failed too: {e2}"),
                    true,
                ),
            };
            let mut p = self.lock_pending();
            self.fail(&mut p, msg, unknown);
            return;
        }
        w.len += buf.len() as u64;
        if let Some(rw) = w.rewrite.as_mut() {
            if rw.failed.is_none() && !rewrite.is_empty() {
                match (&*rw.file).write_all(&rewrite) {
                    Ok(()) => rw.len += rewrite.len() as u64,
                    Err(e) => rw.failed = Some(format!("rewrite log write failed: {e}")),
                }
            }
        }
        self.stats.batches.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.durable.store(upto, Ordering::Release);
        buf.clear();
        if buf.capacity() <= 1 << 20 {
            w.spare = buf;
        }
    }
}

/// The writer, released before the waiters are woken (a woken waiter may have to write the
/// next batch itself, so it must find the writer free).
pub(super) struct Held {
    pub(super) guard: Option<tokio::sync::OwnedMutexGuard<Writer>>,
    pub(super) inner: Arc<Inner>,
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.inner.flushed.notify_waiters();
    }
}

impl std::ops::Deref for Held {
    type Target = Writer;
    fn deref(&self) -> &Writer {
        self.guard.as_ref().unwrap()
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Writer {
        self.guard.as_mut().unwrap()
    }
}

/// Why the log refuses records now, if it does.
pub(super) fn refusal(p: &Pending) -> Result<(), String> {
    if let Some(e) = &p.broken {
        return Err(format!(
            "MISCONF the append-only log failed ({e}); writes are refused until the server is restarted"
        ));
    }
    if p.rollback_from.is_some() {
        return Err(
            "MISCONF the append-only log failed; writes are refused while the writes it refused are undone".into(),
        );
    }
    if let Some(e) = &p.sync_error {
        return Err(format!(
            "MISCONF Errors writing to the AOF file: {e}; writes are refused until an fsync succeeds"
        ));
    }
    Ok(())
}

impl Log {
    /// Opens the log that [`load`](super::load) just replayed; `lock` is the directory's lock, held as long
    /// as the log lives.
    pub fn open(
        dir: &Path,
        base: u64,
        fsync: Fsync,
        io_mode: LogIo,
        lock: DirLock,
    ) -> Result<Log, String> {
        let path = dir.join(AOF_NAME);
        let file = fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
            .len();
        Ok(Log {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                fsync,
                io_mode,
                pending: std::sync::Mutex::new(Pending {
                    buf: Vec::new(),
                    rewrite: Vec::new(),
                    rewrite_epoch: None,
                    seq: 0,
                    broken: None,
                    rollback_from: None,
                    failures: std::collections::VecDeque::new(),
                    sync_error: None,
                    dir_unsynced: false,
                }),
                writer: Arc::new(tokio::sync::Mutex::new(Writer {
                    file: Arc::new(file),
                    len,
                    base,
                    rewrite: None,
                    spare: Vec::new(),
                })),
                appended: AtomicU64::new(0),
                durable: AtomicU64::new(0),
                failed_to: AtomicU64::new(0),
                rollback_pending: std::sync::atomic::AtomicBool::new(false),
                rollbacks: AtomicU64::new(0),
                flushed: tokio::sync::Notify::new(),
                next_epoch: AtomicU64::new(base + 1),
                stats: LogStats::default(),
                _lock: lock,
            }),
        })
    }

    pub fn fsync_policy(&self) -> Fsync {
        self.inner.fsync
    }

    pub fn stats(&self) -> &LogStats {
        &self.inner.stats
    }

    /// Appends one record to the current batch; called inside the write critical section of
    /// every shard the record touches, *before* the change is applied (an error means: change
    /// nothing). `rec` encodes the whole record; `rewrite`, asked only while a `SAVE` runs,
    /// encodes the part that belongs in the new log (the keys of shards already snapshotted in
    /// that epoch), or nothing. Returns the record's sequence number for [`Log::wait`].
    pub fn append(
        &self,
        rec: impl FnOnce(&mut Vec<u8>),
        rewrite: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<u64, String> {
        let mut guard = self.inner.lock_pending();
        let p = &mut *guard;
        refusal(p)?;
        let start = p.buf.len();
        rec(&mut p.buf);
        if p.buf.len() - start - REC_HEADER > MAX_RECORD {
            p.buf.truncate(start);
            return Err(format!(
                "ERR the command's log record would exceed the {MAX_RECORD} byte record limit"
            ));
        }
        if let Some(epoch) = p.rewrite_epoch {
            rewrite(epoch, &mut p.rewrite);
        }
        p.seq += 1;
        self.inner.appended.store(p.seq, Ordering::Release);
        self.inner.stats.records.fetch_add(1, Ordering::Relaxed);
        Ok(p.seq)
    }

    /// Whether [`Log::append`] would accept a record now (a transaction's commands ask before
    /// they change anything; their one record is appended at the end), and the epoch of the
    /// `SAVE` running now, if any (whose `rewrite` part a record would get).
    pub fn accepts(&self) -> Result<Option<u64>, String> {
        let p = self.inner.lock_pending();
        refusal(&p)?;
        Ok(p.rewrite_epoch)
    }

    /// Makes the log refuse records from now on, as after a failed fsync (the tests of what
    /// a refusal undoes; a later successful [`Log::sync`] lifts it).
    #[cfg(test)]
    pub(crate) fn refuse_for_test(&self) {
        self.inner.lock_pending().sync_error = Some("injected by a test".into());
    }

    /// The sequence number of the last record appended so far.
    pub fn last_seq(&self) -> u64 {
        self.inner.appended.load(Ordering::Acquire)
    }

    /// Whether writes are accepted now (`INFO persistence`: `aof_last_write_status`).
    pub fn writes_accepted(&self) -> bool {
        let p = self.inner.lock_pending();
        p.broken.is_none() && p.rollback_from.is_none() && p.sync_error.is_none()
    }

    /// Whether record `seq` (already waited for with [`Log::wait`]) failed, and its error.
    pub fn failure(&self, seq: u64) -> Option<String> {
        match self.inner.check(seq) {
            Some(Err(f)) => Some(f.msg),
            _ => None,
        }
    }

    /// Completed rollbacks so far: a read that ran while this changed may have seen a write
    /// that was undone.
    pub fn rollbacks(&self) -> u64 {
        self.inner.rollbacks.load(Ordering::Acquire)
    }

    /// `Some(from)` while the changes of the failed records `from..` are still in memory.
    pub fn rollback_from(&self) -> Option<u64> {
        if !self.inner.rollback_pending.load(Ordering::Acquire) {
            return None;
        }
        self.inner.lock_pending().rollback_from
    }

    /// Undo information of records up to this one may be dropped: they are in the log.
    pub fn undo_horizon(&self) -> u64 {
        // `fail` publishes `rollback_pending` before it moves `durable` over the failed
        // records: `durable` read first, then no rollback pending, is a horizon no failed
        // record is under (and one read after a rollback is too: the failed records' undo
        // information was taken, under every shard's write lock, before the flag was cleared).
        let durable = self.inner.durable.load(Ordering::Acquire);
        if !self.inner.rollback_pending.load(Ordering::Acquire) {
            return durable;
        }
        let p = self.inner.lock_pending();
        match p.rollback_from {
            Some(from) => from - 1,
            None => self.inner.durable.load(Ordering::Acquire),
        }
    }

    /// Called by the store once it has undone the changes of every failed record (holding
    /// every shard's write lock): writes are accepted again after the next successful fsync
    /// (under `everysec` and `no`; the once-a-second task retries it), or never again before
    /// a restart (under `always`, or when the failed batch could not be cut back off the file).
    pub fn rolled_back(&self) {
        let inner = &self.inner;
        let mut p = inner.lock_pending();
        if p.rollback_from.take().is_none() {
            return;
        }
        inner.rollback_pending.store(false, Ordering::Release);
        // A marker record, written by nobody: a read that starts from here on cannot have
        // seen an undone write, and waits on a sequence number that did not fail.
        p.seq += 1;
        inner.appended.store(p.seq, Ordering::Release);
        inner.durable.store(p.seq, Ordering::Release);
        inner.rollbacks.fetch_add(1, Ordering::AcqRel);
        if p.broken.is_none() {
            let msg = p
                .failures
                .back()
                .map_or_else(String::new, |f| f.msg.clone());
            p.sync_error.get_or_insert(format!(
                "the last batch failed ({msg}); writes resume once an fsync of the log succeeds"
            ));
        }
    }

    /// Waits until record `seq` (and every one before it) is in the file (under `always`: on
    /// disk), writing the batch itself if no one else is.
    pub async fn wait(&self, seq: u64) -> Result<(), Failed> {
        let inner = &self.inner;
        // Fast path (reads, and writes already covered by another task's batch): no waiter
        // registration, just two atomic loads.
        if let Some(r) = inner.check(seq) {
            return r;
        }
        loop {
            let notified = inner.flushed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = inner.check(seq) {
                return r;
            }
            match inner.writer.clone().try_lock_owned() {
                Ok(guard) => self.flush(guard).await,
                Err(_) => notified.await,
            }
        }
    }

    /// Writes the current batch with the writer held. Cancel-safe: a dropped caller cannot
    /// leave a batch half handled, because nothing here suspends between taking the batch and
    /// publishing its outcome (inline), or all of it runs in the blocking pool (fsync, tokio-fs).
    pub(super) async fn flush(&self, guard: tokio::sync::OwnedMutexGuard<Writer>) {
        let mut held = Held {
            guard: Some(guard),
            inner: self.inner.clone(),
        };
        if self.inner.io_mode == LogIo::Direct && self.inner.fsync != Fsync::Always {
            let inner = self.inner.clone();
            inner.write_batch(&mut held);
        } else {
            let _ = tokio::task::spawn_blocking(move || {
                let inner = held.inner.clone();
                inner.write_batch(&mut held);
                drop(held);
            })
            .await;
        }
    }

    /// Writes every pending record, then fsyncs the log (and the directory if a `SAVE` left it
    /// unsynced). The everysec timer and shutdown call this; on success it clears an earlier
    /// fsync error, on failure it sets one (writes are refused meanwhile).
    pub async fn sync(&self) -> Result<(), String> {
        let inner = &self.inner;
        let _ = self.wait(self.last_seq()).await;
        let (file, dir_unsynced) = {
            let held = Held {
                guard: Some(inner.writer.clone().lock_owned().await),
                inner: inner.clone(),
            };
            (held.file.clone(), inner.lock_pending().dir_unsynced)
        };
        let dir = inner.dir.clone();
        let res = tokio::task::spawn_blocking(move || -> Result<(), String> {
            file.sync_data()
                .map_err(|e| format!("fsync of the append-only log failed: {e}"))?;
            if dir_unsynced {
                fsync_dir(&dir).map_err(|e| format!("fsync of {} failed: {e}", dir.display()))?;
            }
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        let mut p = inner.lock_pending();
        match &res {
            Ok(()) => {
                inner.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                if dir_unsynced {
                    p.dir_unsynced = false;
                }
                // A SAVE may have left the directory unsynced while this ran: its error stays
                // until a pass that synced the directory succeeds.
                if !p.dir_unsynced {
                    p.sync_error = None;
                }
            }
            Err(e) => {
                inner.stats.fsync_errors.fetch_add(1, Ordering::Relaxed);
                p.sync_error = Some(e.clone());
            }
        }
        res
    }

    /// Whether the timer task has something to retry (an fsync error, an unsynced directory).
    pub fn needs_sync(&self) -> bool {
        let p = self.inner.lock_pending();
        p.sync_error.is_some() || p.dir_unsynced
    }

    /// Current size of the log file and the snapshot it builds on.
    pub async fn size_and_base(&self) -> (u64, u64) {
        let held = Held {
            guard: Some(self.inner.writer.clone().lock_owned().await),
            inner: self.inner.clone(),
        };
        (held.len, held.base)
    }
}
