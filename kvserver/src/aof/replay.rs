//! Loading: the snapshot, then the log, replayed record by record.

use super::files::{file_header, snapshot_name, write_new_file};
use super::format::{
    decode, Op, Reader, AOF_MAGIC, AOF_MAGIC_V1, AOF_NAME, FILE_HEADER, MAX_RECORD, OP_MULTI,
    REC_HEADER, SNAP_MAGIC, SNAP_MAGIC_V1,
};
use std::fs;
use std::io;
use std::path::Path;

/// How reading a record stream ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum StreamEnd {
    Clean,
    /// A record ran past the end of the file at this offset.
    Truncated(usize),
}

/// Calls `f` on every record of `data[start..]`; errors name `what` and the offset.
pub(super) fn read_stream<'a>(
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
        let bad = || {
            format!(
                "{}: corrupt record at offset {at} (bad payload)",
                what.display()
            )
        };
        if payload.first() == Some(&OP_MULTI) {
            // A transaction: its records are checked whole before any of them is applied.
            let inner = Reader(&payload[1..])
                .bytes()
                .filter(|b| b.len() + 5 == payload.len());
            let inner = inner.ok_or_else(bad)?;
            let mut ops = Vec::new();
            let mut i = 0;
            while i < inner.len() {
                let rest = &inner[i..];
                let n = rest
                    .get(0..4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
                    .filter(|n| REC_HEADER + n <= rest.len())
                    .ok_or_else(bad)?;
                let body = &rest[REC_HEADER..REC_HEADER + n];
                if crc32fast::hash(body) != u32::from_le_bytes(rest[4..8].try_into().unwrap())
                    || body.first() == Some(&OP_MULTI)
                {
                    return Err(bad());
                }
                ops.push(decode(body).ok_or_else(bad)?);
                i += REC_HEADER + n;
            }
            for op in ops {
                f(op).map_err(|e| format!("{}: record at offset {at}: {e}", what.display()))?;
            }
            at += REC_HEADER + len;
            continue;
        }
        let op = decode(payload).ok_or_else(bad)?;
        f(op).map_err(|e| format!("{}: record at offset {at}: {e}", what.display()))?;
        at += REC_HEADER + len;
    }
    Ok(StreamEnd::Clean)
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
    if data.len() < FILE_HEADER || (&data[..8] != AOF_MAGIC && &data[..8] != AOF_MAGIC_V1) {
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
        if snap.len() < FILE_HEADER
            || (&snap[..8] != SNAP_MAGIC && &snap[..8] != SNAP_MAGIC_V1)
            || snap[8..16] != base.to_le_bytes()
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
                op @ (Op::Set { .. } | Op::Value { .. }) => {
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
    if &data[..8] == AOF_MAGIC_V1 {
        // The new records are about to be appended to it: mark it with the new version.
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.write_all_at(AOF_MAGIC, 0).and_then(|_| f.sync_all()));
        f.map_err(|e| format!("cannot update the header of {}: {e}", path.display()))?;
        report
            .warnings
            .push(format!("{}: format 001 read, marked 002", path.display()));
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
