//! Persistence: the append-only log, snapshots, and replay.
//!
//! # Files (in `--dir`)
//! - `appendonly.aof`: a 16-byte header (`KVAOF001` + the id of the snapshot it builds on, 0 for
//!   none) followed by records.
//! - `dump-<id>.kvs`: a snapshot: header `KVSNAP01` + id, one `SET` record per key, then an
//!   `END` record holding the key count. Only the one the log names is live.
//!
//! # Record framing
//! `[len: u32 LE][crc32(payload): u32 LE][crc32(first 8 bytes): u32 LE][payload: len bytes]`.
//! The header checksum means a damaged length is caught as corruption instead of passing for a
//! short (truncated) file. On replay, a record that runs past the end of the file is the torn
//! last write of a crash: it is dropped with a warning and the file is cut back. Any other
//! damage (bad checksum, bad header, unparsable payload) stops the start with an error naming
//! the file and offset.
//!
//! Payload: an op byte, then fields; byte strings are `u32 LE` length + bytes, times are `u64
//! LE` unix milliseconds (0: no expiry). Writes are logged with absolute expiry times, so
//! replay needs no clock of its own: a key whose time has passed is simply dropped.
//!
//! # Writing
//! The store builds each record whole and hands it to [`Log::append`] while it holds the
//! shard's write lock; `append` takes the log's own async mutex and issues one `write_all`
//! (plus an `fsync` under `--appendfsync always`). A failed write is cut back off the file so a
//! partial record never stays behind; if even that fails the log refuses further writes.
//!
//! # Rewriting (`SAVE`)
//! See [`Log::begin_rewrite`]: while a snapshot is taken shard by shard, writes to shards already
//! snapshotted also go to a fresh log that starts from the new snapshot; when every shard is
//! done the new snapshot and log are renamed into place (the log's rename is the commit point).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

const AOF_MAGIC: &[u8; 8] = b"KVAOF001";
const SNAP_MAGIC: &[u8; 8] = b"KVSNAP01";
const FILE_HEADER: usize = 16;
const REC_HEADER: usize = 12;
/// No record may claim more than this (a damaged length is caught before this check, this is a
/// second line of defence against allocating absurd sizes).
const MAX_RECORD: usize = 1 << 31;

pub const AOF_NAME: &str = "appendonly.aof";

const OP_SET: u8 = 1;
const OP_DEL: u8 = 2;
const OP_MSET: u8 = 3;
const OP_FLUSHALL: u8 = 4;
const OP_END: u8 = 5;

/// When the log is fsynced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fsync {
    /// After every write, before the reply (and inside the write critical section).
    Always,
    /// Once a second, from a background task.
    Everysec,
    /// Never explicitly (only at SAVE and shutdown); the OS decides.
    No,
}

/// How a record reaches the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogIo {
    /// `write(2)` on a `std::fs::File` right from the task: appends to the page cache are
    /// short, as in Redis' own event loop. The lock is still held across the `.await` on the
    /// log mutex (and, under `always`, on the fsync).
    Direct,
    /// `tokio::fs::File::write_all` + `flush`: every record is a round trip through tokio's
    /// blocking pool, so the write lock is held across a real suspension.
    TokioFs,
}

// ---- records --------------------------------------------------------------------------------

/// A decoded record, borrowing from the file's bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Op<'a> {
    Set {
        key: &'a [u8],
        value: &'a [u8],
        expire_at: u64,
    },
    Del(Vec<&'a [u8]>),
    MSet(Vec<(&'a [u8], &'a [u8])>),
    FlushAll,
    End(u64),
}

/// Builds one framed record.
struct Rec(Vec<u8>);

impl Rec {
    fn new(op: u8, size_hint: usize) -> Rec {
        let mut v = Vec::with_capacity(REC_HEADER + 1 + size_hint);
        v.extend_from_slice(&[0; REC_HEADER]);
        v.push(op);
        Rec(v)
    }
    fn bytes(mut self, b: &[u8]) -> Rec {
        self.0.extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.0.extend_from_slice(b);
        self
    }
    fn u32(mut self, v: u32) -> Rec {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Rec {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn finish(mut self) -> Vec<u8> {
        let len = (self.0.len() - REC_HEADER) as u32;
        let crc = crc32fast::hash(&self.0[REC_HEADER..]);
        self.0[0..4].copy_from_slice(&len.to_le_bytes());
        self.0[4..8].copy_from_slice(&crc.to_le_bytes());
        let hcrc = crc32fast::hash(&self.0[0..8]);
        self.0[8..12].copy_from_slice(&hcrc.to_le_bytes());
        self.0
    }
}

pub fn rec_set(key: &[u8], value: &[u8], expire_at: u64) -> Vec<u8> {
    Rec::new(OP_SET, 16 + key.len() + value.len())
        .bytes(key)
        .bytes(value)
        .u64(expire_at)
        .finish()
}

pub fn rec_del<'a>(keys: impl ExactSizeIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut r = Rec::new(OP_DEL, 64).u32(keys.len() as u32);
    for k in keys {
        r = r.bytes(k);
    }
    r.finish()
}

pub fn rec_mset<'a>(pairs: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut r = Rec::new(OP_MSET, 64).u32(pairs.len() as u32);
    for (k, v) in pairs {
        r = r.bytes(k).bytes(v);
    }
    r.finish()
}

pub fn rec_flushall() -> Vec<u8> {
    Rec::new(OP_FLUSHALL, 0).finish()
}

fn rec_end(count: u64) -> Vec<u8> {
    Rec::new(OP_END, 8).u64(count).finish()
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

fn decode(payload: &[u8]) -> Option<Op<'_>> {
    let (&op, rest) = payload.split_first()?;
    let mut r = Reader(rest);
    let op = match op {
        OP_SET => Op::Set {
            key: r.bytes()?,
            value: r.bytes()?,
            expire_at: r.u64()?,
        },
        OP_DEL => {
            let n = r.u32()? as usize;
            let mut keys = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                keys.push(r.bytes()?);
            }
            Op::Del(keys)
        }
        OP_MSET => {
            let n = r.u32()? as usize;
            let mut pairs = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                pairs.push((r.bytes()?, r.bytes()?));
            }
            Op::MSet(pairs)
        }
        OP_FLUSHALL => Op::FlushAll,
        OP_END => Op::End(r.u64()?),
        _ => return None,
    };
    if !r.0.is_empty() {
        return None;
    }
    Some(op)
}

/// How reading a record stream ended.
#[derive(Debug, PartialEq, Eq)]
enum StreamEnd {
    Clean,
    /// A record ran past the end of the file at this offset.
    Truncated(usize),
}

/// Calls `f` on every record of `data[start..]`; errors name `what` and the offset.
fn read_stream<'a>(
    data: &'a [u8],
    start: usize,
    what: &Path,
    mut f: impl FnMut(Op<'a>) -> Result<(), String>,
) -> Result<StreamEnd, String> {
    let mut at = start;
    while at < data.len() {
        let rest = &data[at..];
        if rest.len() < REC_HEADER {
            return Ok(StreamEnd::Truncated(at));
        }
        let len = u32::from_le_bytes(rest[0..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().unwrap());
        let hcrc = u32::from_le_bytes(rest[8..12].try_into().unwrap());
        if crc32fast::hash(&rest[0..8]) != hcrc || len > MAX_RECORD {
            return Err(format!(
                "{}: corrupt record header at offset {at}",
                what.display()
            ));
        }
        if rest.len() < REC_HEADER + len {
            return Ok(StreamEnd::Truncated(at));
        }
        let payload = &rest[REC_HEADER..REC_HEADER + len];
        if crc32fast::hash(payload) != crc {
            return Err(format!(
                "{}: corrupt record at offset {at} (checksum mismatch)",
                what.display()
            ));
        }
        let op = decode(payload).ok_or_else(|| {
            format!(
                "{}: corrupt record at offset {at} (bad payload)",
                what.display()
            )
        })?;
        f(op).map_err(|e| format!("{}: record at offset {at}: {e}", what.display()))?;
        at += REC_HEADER + len;
    }
    Ok(StreamEnd::Clean)
}

fn file_header(magic: &[u8; 8], id: u64) -> [u8; FILE_HEADER] {
    let mut h = [0u8; FILE_HEADER];
    h[..8].copy_from_slice(magic);
    h[8..].copy_from_slice(&id.to_le_bytes());
    h
}

fn snapshot_name(id: u64) -> String {
    format!("dump-{id}.kvs")
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Writes `data` to `path` through a temporary file, fsynced, then renamed into place.
fn write_new_file(dir: &Path, name: &str, data: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    fsync_dir(dir)
}

// ---- loading --------------------------------------------------------------------------------

/// What [`load`] found.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// The snapshot the log builds on (0: none).
    pub base: u64,
    pub snapshot_keys: u64,
    pub log_records: u64,
    /// Warnings to print (a dropped torn record, removed leftovers).
    pub warnings: Vec<String>,
}

/// Replays the snapshot and the log in `dir` through `apply` (creating an empty log if there is
/// none) and cuts a torn last record off the log. Errors describe what is wrong and where; the
/// server must not start then.
pub fn load(dir: &Path, mut apply: impl FnMut(Op<'_>)) -> Result<LoadReport, String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(AOF_NAME);
    let mut report = LoadReport::default();
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            write_new_file(dir, AOF_NAME, &file_header(AOF_MAGIC, 0))
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            file_header(AOF_MAGIC, 0).to_vec()
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if data.len() < FILE_HEADER || &data[..8] != AOF_MAGIC {
        return Err(format!(
            "{}: not a kvserver append-only file (bad header)",
            path.display()
        ));
    }
    let base = u64::from_le_bytes(data[8..16].try_into().unwrap());
    report.base = base;
    if base != 0 {
        let spath = dir.join(snapshot_name(base));
        let snap = fs::read(&spath).map_err(|e| {
            format!(
                "{} names snapshot {} which cannot be read: {e}",
                path.display(),
                spath.display()
            )
        })?;
        if snap.len() < FILE_HEADER || &snap[..8] != SNAP_MAGIC || snap[8..16] != base.to_le_bytes()
        {
            return Err(format!("{}: bad snapshot header", spath.display()));
        }
        let mut keys = 0u64;
        let mut end = None;
        let tail = read_stream(&snap, FILE_HEADER, &spath, |op| {
            if end.is_some() {
                return Err("data after the END record".into());
            }
            match op {
                Op::End(n) => end = Some(n),
                op @ Op::Set { .. } => {
                    keys += 1;
                    apply(op);
                }
                _ => return Err("unexpected record type in a snapshot".into()),
            }
            Ok(())
        })?;
        if tail != StreamEnd::Clean || end != Some(keys) {
            return Err(format!(
                "{}: snapshot is incomplete ({keys} keys read, END says {end:?})",
                spath.display()
            ));
        }
        report.snapshot_keys = keys;
    }
    let mut records = 0u64;
    let end = read_stream(&data, FILE_HEADER, &path, |op| {
        if matches!(op, Op::End(_)) {
            return Err("END record in the log".into());
        }
        records += 1;
        apply(op);
        Ok(())
    })?;
    report.log_records = records;
    if let StreamEnd::Truncated(at) = end {
        report.warnings.push(format!(
            "{}: dropped a truncated last record at offset {at} ({} bytes); the file is cut back to {at} bytes",
            path.display(),
            data.len() - at
        ));
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(at as u64).and_then(|_| f.sync_all()));
        f.map_err(|e| format!("cannot truncate {}: {e}", path.display()))?;
    }
    // Leftovers of an interrupted SAVE, and snapshots nothing refers to any more.
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stale_tmp =
                name.ends_with(".tmp") && (name.starts_with("dump-") || name.starts_with(AOF_NAME));
            let stale_dump =
                name.starts_with("dump-") && name.ends_with(".kvs") && name != snapshot_name(base);
            if stale_tmp || stale_dump {
                let _ = fs::remove_file(e.path());
                report.warnings.push(format!("removed leftover {name}"));
            }
        }
    }
    Ok(report)
}

// ---- the live log ---------------------------------------------------------------------------

enum LogFile {
    Direct(Arc<fs::File>),
    Tokio {
        file: tokio::fs::File,
        sync: Arc<fs::File>,
    },
}

impl LogFile {
    /// Opens `path` for appending.
    fn open(path: &Path, io_mode: LogIo) -> io::Result<LogFile> {
        let f = fs::OpenOptions::new().append(true).open(path)?;
        Ok(match io_mode {
            LogIo::Direct => LogFile::Direct(Arc::new(f)),
            LogIo::TokioFs => {
                let sync = Arc::new(f.try_clone()?);
                LogFile::Tokio {
                    file: tokio::fs::File::from_std(f),
                    sync,
                }
            }
        })
    }

    /// One whole record, or an error (the caller cuts a partial write back off).
    async fn write_record(&mut self, rec: &[u8]) -> io::Result<()> {
        match self {
            LogFile::Direct(f) => (&**f).write_all(rec),
            LogFile::Tokio { file, .. } => {
                file.write_all(rec).await?;
                file.flush().await
            }
        }
    }

    fn sync_handle(&self) -> Arc<fs::File> {
        match self {
            LogFile::Direct(f) => f.clone(),
            LogFile::Tokio { sync, .. } => sync.clone(),
        }
    }

    async fn sync(&mut self) -> io::Result<()> {
        match self {
            LogFile::Tokio { file, .. } => file.sync_data().await,
            LogFile::Direct(f) => {
                let f = f.clone();
                tokio::task::spawn_blocking(move || f.sync_data())
                    .await
                    .map_err(io::Error::other)?
            }
        }
    }

    async fn truncate(&mut self, len: u64) -> io::Result<()> {
        match self {
            LogFile::Direct(f) => f.set_len(len),
            LogFile::Tokio { file, .. } => file.set_len(len).await,
        }
    }
}

struct Rewrite {
    epoch: u64,
    file: LogFile,
    len: u64,
    failed: Option<String>,
}

struct State {
    file: LogFile,
    len: u64,
    base: u64,
    broken: Option<String>,
    rewrite: Option<Rewrite>,
}

/// Counters for `INFO`.
#[derive(Default)]
pub struct LogStats {
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub fsyncs: AtomicU64,
    pub rewrites: AtomicU64,
}

/// The append-only log the server writes while it runs.
pub struct Log {
    dir: PathBuf,
    fsync: Fsync,
    io_mode: LogIo,
    state: tokio::sync::Mutex<State>,
    next_epoch: AtomicU64,
    pub stats: LogStats,
}

/// Handed out by [`Log::begin_rewrite`]; the snapshot being written.
pub struct Snapshot {
    pub epoch: u64,
    file: tokio::fs::File,
    tmp: PathBuf,
    keys: u64,
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
    /// Opens the log that [`load`] just replayed.
    pub fn open(dir: &Path, base: u64, fsync: Fsync, io_mode: LogIo) -> Result<Log, String> {
        let path = dir.join(AOF_NAME);
        let file = LogFile::open(&path, io_mode)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let len = fs::metadata(&path)
            .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
            .len();
        Ok(Log {
            dir: dir.to_path_buf(),
            fsync,
            io_mode,
            state: tokio::sync::Mutex::new(State {
                file,
                len,
                base,
                broken: None,
                rewrite: None,
            }),
            next_epoch: AtomicU64::new(base + 1),
            stats: LogStats::default(),
        })
    }

    pub fn fsync_policy(&self) -> Fsync {
        self.fsync
    }

    /// Appends one whole record. Called with the write lock(s) of the shards it touches held.
    ///
    /// `for_rewrite` is asked, only while a `SAVE` is under way, for the part of the record
    /// that belongs in the new log (the keys of shards already snapshotted), given the epoch.
    pub async fn append(
        &self,
        rec: &[u8],
        for_rewrite: impl FnOnce(u64) -> Option<Vec<u8>>,
    ) -> Result<(), String> {
        let mut st = self.state.lock().await;
        let st = &mut *st;
        if let Some(e) = &st.broken {
            return Err(format!("MISCONF the append-only log is unusable: {e}"));
        }
        if let Err(e) = st.file.write_record(rec).await {
            // Never leave a partial record behind.
            if let Err(e2) = st.file.truncate(st.len).await {
                st.broken = Some(format!(
                    "write failed ({e}) and could not be cut back ({e2})"
                ));
            }
            return Err(format!("IOERR append-only log write failed: {e}"));
        }
        st.len += rec.len() as u64;
        if let Some(rw) = st.rewrite.as_mut() {
            if rw.failed.is_none() {
                if let Some(part) = for_rewrite(rw.epoch) {
                    match rw.file.write_record(&part).await {
                        Ok(()) => rw.len += part.len() as u64,
                        Err(e) => rw.failed = Some(format!("rewrite log write failed: {e}")),
                    }
                }
            }
        }
        self.stats.records.fetch_add(1, Ordering::Relaxed);
        self.stats
            .bytes
            .fetch_add(rec.len() as u64, Ordering::Relaxed);
        if self.fsync == Fsync::Always {
            st.file
                .sync()
                .await
                .map_err(|e| format!("IOERR fsync failed: {e}"))?;
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// fsyncs the log (everysec timer, shutdown). Does not hold the log mutex during the fsync.
    pub async fn sync(&self) -> Result<(), String> {
        let handle = {
            let mut st = self.state.lock().await;
            if let LogFile::Tokio { file, .. } = &mut st.file {
                file.flush().await.map_err(|e| e.to_string())?;
            }
            st.file.sync_handle()
        };
        tokio::task::spawn_blocking(move || handle.sync_data())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("fsync failed: {e}"))?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Current size of the log file and the snapshot it builds on.
    pub async fn size_and_base(&self) -> (u64, u64) {
        let st = self.state.lock().await;
        (st.len, st.base)
    }

    /// Starts a `SAVE`: creates the new log (based on the new snapshot) and the snapshot file.
    /// From now on [`Log::append`] asks its caller for the part of each record that belongs in
    /// the new log. The caller must then snapshot every shard and call [`Log::finish_rewrite`]
    /// or [`Log::abort_rewrite`].
    pub async fn begin_rewrite(&self) -> Result<Snapshot, String> {
        let mut st = self.state.lock().await;
        if st.rewrite.is_some() {
            return Err("ERR a SAVE is already in progress".into());
        }
        let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed);
        let tmp_log = self.dir.join(format!("{AOF_NAME}.tmp"));
        let tmp_snap = self.dir.join(format!("{}.tmp", snapshot_name(epoch)));
        let io_err = |e: io::Error| format!("ERR cannot start SAVE: {e}");
        fs::write(&tmp_log, file_header(AOF_MAGIC, epoch)).map_err(io_err)?;
        let file = LogFile::open(&tmp_log, self.io_mode).map_err(io_err)?;
        let mut snap = tokio::fs::File::create(&tmp_snap).await.map_err(io_err)?;
        snap.write_all(&file_header(SNAP_MAGIC, epoch))
            .await
            .map_err(io_err)?;
        st.rewrite = Some(Rewrite {
            epoch,
            file,
            len: FILE_HEADER as u64,
            failed: None,
        });
        Ok(Snapshot {
            epoch,
            file: snap,
            tmp: tmp_snap,
            keys: 0,
        })
    }

    /// Completes a `SAVE` once every shard is in the snapshot: makes the snapshot durable, then
    /// atomically replaces the log with the new one.
    pub async fn finish_rewrite(&self, mut snap: Snapshot) -> Result<u64, String> {
        let res: io::Result<()> = async {
            snap.file.write_all(&rec_end(snap.keys)).await?;
            snap.file.flush().await?;
            snap.file.sync_all().await
        }
        .await;
        let res = res.map_err(|e| format!("ERR snapshot write failed: {e}"));
        if let Err(e) = res {
            self.abort_rewrite(&snap).await;
            return Err(e);
        }
        let mut st = self.state.lock().await;
        let Some(mut rw) = st.rewrite.take() else {
            return Err("ERR no SAVE in progress".into());
        };
        let committed: Result<(), String> = async {
            if let Some(e) = &rw.failed {
                return Err(format!("ERR {e}"));
            }
            rw.file.sync().await.map_err(|e| format!("ERR {e}"))?;
            let final_snap = self.dir.join(snapshot_name(rw.epoch));
            fs::rename(&snap.tmp, &final_snap).map_err(|e| format!("ERR {e}"))?;
            fsync_dir(&self.dir).map_err(|e| format!("ERR {e}"))?;
            // The commit point: from here on the log names the new snapshot.
            fs::rename(
                self.dir.join(format!("{AOF_NAME}.tmp")),
                self.dir.join(AOF_NAME),
            )
            .map_err(|e| format!("ERR {e}"))?;
            fsync_dir(&self.dir).map_err(|e| format!("ERR {e}"))?;
            Ok(())
        }
        .await;
        if let Err(e) = committed {
            drop(st);
            self.abort_rewrite(&snap).await;
            return Err(e);
        }
        let old_base = st.base;
        st.file = rw.file;
        st.len = rw.len;
        st.base = rw.epoch;
        drop(st);
        if old_base != 0 {
            let _ = fs::remove_file(self.dir.join(snapshot_name(old_base)));
        }
        self.stats.rewrites.fetch_add(1, Ordering::Relaxed);
        Ok(snap.keys)
    }

    /// Gives up a `SAVE`: the old log stays authoritative (it got every write all along).
    pub async fn abort_rewrite(&self, snap: &Snapshot) {
        self.state.lock().await.rewrite = None;
        let _ = fs::remove_file(&snap.tmp);
        let _ = fs::remove_file(self.dir.join(format!("{AOF_NAME}.tmp")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let mut data = file_header(AOF_MAGIC, 0).to_vec();
        data.extend(rec_set(b"k", b"v", 7));
        data.extend(rec_del([&b"a"[..], b"b"].into_iter()));
        data.extend(rec_mset([(&b"x"[..], &b"1"[..])].into_iter()));
        data.extend(rec_flushall());
        let mut ops = Vec::new();
        let end = read_stream(&data, FILE_HEADER, Path::new("t"), |op| {
            ops.push(format!("{op:?}"));
            Ok(())
        })
        .unwrap();
        assert_eq!(end, StreamEnd::Clean);
        assert_eq!(ops.len(), 4);
        // every cut inside the last record is a truncation, never an error
        let last = data.len() - rec_flushall().len();
        for cut in last + 1..data.len() {
            let end = read_stream(&data[..cut], FILE_HEADER, Path::new("t"), |_| Ok(())).unwrap();
            assert_eq!(end, StreamEnd::Truncated(last));
        }
        // any flipped byte in the first record is an error
        for i in FILE_HEADER..FILE_HEADER + rec_set(b"k", b"v", 7).len() {
            let mut bad = data.clone();
            bad[i] ^= 0x40;
            assert!(read_stream(&bad, FILE_HEADER, Path::new("t"), |_| Ok(())).is_err());
        }
    }
}
