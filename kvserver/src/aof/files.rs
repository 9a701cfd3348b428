//! The data directory's files: headers, names, durable creation, and the directory lock.

use super::format::FILE_HEADER;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub(super) fn file_header(magic: &[u8; 8], id: u64) -> [u8; FILE_HEADER] {
    let mut h = [0u8; FILE_HEADER];
    h[..8].copy_from_slice(magic);
    h[8..].copy_from_slice(&id.to_le_bytes());
    h
}

pub(super) fn snapshot_name(id: u64) -> String {
    format!("dump-{id}.kvs")
}

pub(super) fn fsync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

/// Writes `data` to `path` through a temporary file, fsynced, then renamed into place.
pub(super) fn write_new_file(dir: &Path, name: &str, data: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(name))?;
    fsync_dir(dir)
}

// ---- the data directory lock ------------------------------------------------------------

/// Name of the lock file in `--dir`.
pub const LOCK_NAME: &str = "kvserver.lock";

/// An exclusive `flock` on `--dir`, held as long as the server runs (the kernel drops it when
/// the process dies, however it dies).
pub struct DirLock {
    pub(super) _file: fs::File,
}

/// Creates `dir` if needed and locks it, before anything in it is read or changed: a second
/// server on the same directory stops here instead of replaying, truncating or deleting the
/// files of the one that runs.
pub fn lock_dir(dir: &Path) -> Result<DirLock, String> {
    use std::os::unix::io::AsRawFd;
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(LOCK_NAME);
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            format!(
                "{} is in use by another kvserver (locked: {}); each server needs its own --dir",
                dir.display(),
                path.display()
            )
        } else {
            format!("cannot lock {}: {e}", path.display())
        });
    }
    Ok(DirLock { _file: file })
}
