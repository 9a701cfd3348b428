//! Helpers shared by the `kvserver_*` integration tests: temp dirs, a client, and a server in a
//! child process (the test binary started again, running [`child_main`]) that can be killed
//! with SIGKILL and started under an `LD_PRELOAD` fault-injection shim built here from C.

#![allow(dead_code)]

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use kvserver::aof::{Fsync, LogIo};
use kvserver::lock::LockKind;
use kvserver::server::{self, Config, Running};
use kvserver::store::{self, Persistence};

pub mod raw;
pub mod reference;

/// Generous: only here to turn a hang into a failure.
pub const DEADLINE: Duration = Duration::from_secs(20);

pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(DEADLINE, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no result within {DEADLINE:?} (hang?)"),
    }
}

/// Polls `f` until it is true, failing after [`DEADLINE`].
pub async fn eventually<F: Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let t0 = std::time::Instant::now();
    while !f().await {
        assert!(t0.elapsed() < DEADLINE, "{what}: not within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A unique directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "kvserver-test-{tag}-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            store::now_ms()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn config(lock: LockKind, dir: Option<&Path>, fsync: Fsync) -> Config {
    let mut c = Config::new("127.0.0.1:0".parse().unwrap());
    c.lock = lock;
    c.shards = 4;
    c.quiet = true;
    c.shutdown_timeout = Duration::from_secs(5);
    c.sweep_interval = Duration::from_millis(10);
    c.persistence = dir.map(|d| Persistence {
        dir: d.to_path_buf(),
        fsync,
        io: LogIo::Direct,
    });
    c
}

pub async fn start(c: Config) -> Running {
    within("start", server::start(c))
        .await
        .expect("server start")
}

pub async fn connect(addr: SocketAddr) -> MultiplexedConnection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    within("connect", client.get_multiplexed_async_connection())
        .await
        .expect("redis connect")
}

pub async fn cmd<T: redis::FromRedisValue>(
    con: &mut MultiplexedConnection,
    args: &[&str],
) -> redis::RedisResult<T> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    within(args[0], c.query_async(con)).await
}

// ---- the server in a child process ----------------------------------------------------------

const ENV_DIR: &str = "KVSERVER_CHILD_DIR";
const ENV_FSYNC: &str = "KVSERVER_CHILD_FSYNC";
const PORT_LINE: &str = "KVSERVER_CHILD_PORT=";

/// The body of the child process: a server on the directory and fsync mode named in the
/// environment, on a free port that it prints, until it is killed. Called by an `#[ignore]`d
/// test that the parent names on the command line.
pub fn child_main() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        // `cargo test -- --ignored` runs it too: nothing to do without a parent.
        eprintln!("child_server: not started by a crash test ({ENV_DIR} unset); nothing to do");
        return;
    };
    let fsync = match std::env::var(ENV_FSYNC).as_deref() {
        Ok("always") => Fsync::Always,
        Ok("no") => Fsync::No,
        _ => Fsync::Everysec,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let cfg = config(LockKind::Rwsem, Some(Path::new(&dir)), fsync);
        let srv = server::start(cfg).await.expect("child server start");
        println!("{PORT_LINE}{}", srv.addr.port());
        std::future::pending::<()>().await;
    });
}

/// A server in a child process. Its standard error (the server's warnings for an operator,
/// such as `--max-clients` lowered to the open files limit, and its diagnostics) is kept
/// here, not passed on to the test's: [`ChildServer::stderr`] reads it, and it is printed
/// (captured with the test's output) only if the test fails.
pub struct ChildServer {
    pub addr: SocketAddr,
    child: Child,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl ChildServer {
    /// Starts the child on `dir`; `shim`: the fault-injection library and its control file.
    pub fn start(dir: &Path, fsync: &str, shim: Option<&Shim>) -> ChildServer {
        Self::start_with(dir, fsync, shim, None)
    }

    /// [`ChildServer::start`], with `RLIMIT_NOFILE` (soft and hard) set to `nofile` in the
    /// child before it runs.
    pub fn start_with(
        dir: &Path,
        fsync: &str,
        shim: Option<&Shim>,
        nofile: Option<u64>,
    ) -> ChildServer {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "child_server",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ENV_DIR, dir)
        .env(ENV_FSYNC, fsync)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        if let Some(s) = shim {
            cmd.env("LD_PRELOAD", &s.lib).env("KVFAULT_CTL", &s.ctl);
        }
        if let Some(n) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n as libc::rlim_t,
                        rlim_max: n as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("cannot start the child server");
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_reader = {
            let stderr = Arc::clone(&stderr);
            let pipe = BufReader::new(child.stderr.take().unwrap());
            std::thread::spawn(move || {
                for line in pipe.lines().map_while(Result::ok) {
                    let mut text = stderr.lock().unwrap_or_else(|e| e.into_inner());
                    text.push_str(&line);
                    text.push('\n');
                }
            })
        };
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = loop {
            match lines.next() {
                Some(Ok(l)) => {
                    // libtest may print "test child_server ... " before it on the same line
                    if let Some(at) = l.find(PORT_LINE) {
                        break l[at + PORT_LINE.len()..].trim().parse::<u16>().unwrap();
                    }
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let _ = stderr_reader.join();
                    let text = stderr.lock().unwrap_or_else(|e| e.into_inner());
                    panic!("the child server exited before it listened; its stderr:\n{text}");
                }
            }
        };
        // Keep draining its stdout so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        ChildServer {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            stderr,
            stderr_reader: Some(stderr_reader),
        }
    }

    /// What the child wrote to its standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits (up to [`DEADLINE`]) until the child's standard error has `text`, and returns
    /// it all; panics with it if it never does.
    pub fn wait_for_stderr(&self, text: &str) -> String {
        let t0 = Instant::now();
        loop {
            let all = self.stderr();
            if all.contains(text) {
                return all;
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "no {text:?} in the child's stderr:\n{all}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait until the process is gone (its directory lock with it).
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The child is gone: its stderr ends.
        if let Some(reader) = self.stderr_reader.take() {
            let _ = reader.join();
        }
        if std::thread::panicking() {
            eprintln!("the child server's stderr:\n{}", self.stderr());
        }
    }
}

// ---- the fault-injection shim ---------------------------------------------------------------

/// `LD_PRELOAD` library that makes chosen system calls on the log fail. The fault is the word
/// in the control file (empty: none), read at every intercepted call, so a test switches
/// faults while the server runs:
///
/// - `write-eio`: `write(2)` to `appendonly.aof` fails with EIO;
/// - `write-short`: a `write(2)` to it writes half, the next one fails with ENOSPC;
/// - `fsync-eio`: `fsync`/`fdatasync` of it fail with EIO;
/// - `fsync-trunc-eio`: the same, and `ftruncate` of it (cutting a failed batch back) fails
///   with EIO too: a double fault;
/// - `dirfsync-eio-N`: `fsync` of a directory fails with EIO from the N-th one on (counted
///   from when the word was written);
/// - `diropen-emfile-N`: opening a directory fails with EMFILE from the N-th one on.
const SHIM_C: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int (*real_open)(const char *, int, ...);

static void fault(char *buf, size_t n) {
    buf[0] = 0;
    const char *ctl = getenv("KVFAULT_CTL");
    if (!ctl) return;
    if (!real_open) real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    int fd = real_open(ctl, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t r = read(fd, buf, n - 1);
    close(fd);
    if (r < 0) r = 0;
    buf[r] = 0;
    for (ssize_t i = 0; i < r; i++)
        if (buf[i] == '\n' || buf[i] == ' ') { buf[i] = 0; break; }
}

/* How many times `what` happened since the fault word last changed. */
static long count_since_change(const char *word) {
    static char seen[64];
    static long n;
    if (strcmp(seen, word) != 0) {
        strncpy(seen, word, sizeof seen - 1);
        n = 0;
    }
    return ++n;
}

static int is_log(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    const char *suffix = "/appendonly.aof";
    size_t sl = strlen(suffix);
    return (size_t)n >= sl && strcmp(path + n - sl, suffix) == 0;
}

static int is_dir_fd(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

static int nth(const char *f, const char *prefix) {
    size_t pl = strlen(prefix);
    if (strncmp(f, prefix, pl) != 0) return 0;
    long from = atol(f + pl);
    return count_since_change(f) >= from;
}

static __thread int short_pending;

ssize_t write(int fd, const void *b, size_t n) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (fd > 2) {
        char f[64];
        fault(f, sizeof f);
        if (f[0] && is_log(fd)) {
            if (!strcmp(f, "write-eio")) { errno = EIO; return -1; }
            if (!strcmp(f, "write-short")) {
                if (short_pending || n < 2) { short_pending = 0; errno = ENOSPC; return -1; }
                short_pending = 1;
                return real(fd, b, n / 2);
            }
        }
    }
    return real(fd, b, n);
}

static int sync_fault(int fd) {
    char f[64];
    fault(f, sizeof f);
    if (!f[0]) return 0;
    if ((!strcmp(f, "fsync-eio") || !strcmp(f, "fsync-trunc-eio")) && is_log(fd)) return 1;
    if (is_dir_fd(fd) && nth(f, "dirfsync-eio-")) return 1;
    return 0;
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (sync_fault(fd)) { errno = EIO; return -1; }
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (sync_fault(fd)) { errno = EIO; return -1; }
    return real(fd);
}

static int trunc_fault(int fd) {
    char f[64];
    fault(f, sizeof f);
    return !strcmp(f, "fsync-trunc-eio") && is_log(fd);
}

int ftruncate(int fd, off_t len) {
    static int (*real)(int, off_t);
    if (!real) real = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
    if (trunc_fault(fd)) { errno = EIO; return -1; }
    return real(fd, len);
}

int ftruncate64(int fd, off64_t len) {
    static int (*real)(int, off64_t);
    if (!real) real = (int (*)(int, off64_t))dlsym(RTLD_NEXT, "ftruncate64");
    if (trunc_fault(fd)) { errno = EIO; return -1; }
    return real(fd, len);
}

static int open_fault(const char *path) {
    char f[64];
    fault(f, sizeof f);
    if (strncmp(f, "diropen-emfile-", 15) != 0) return 0;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    return nth(f, "diropen-emfile-");
}

#define OPEN_WRAPPER(name)                                                     \
    int name(const char *path, int flags, ...) {                               \
        static int (*real)(const char *, int, ...);                            \
        if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
        mode_t mode = 0;                                                       \
        if (flags & (O_CREAT | O_TMPFILE)) {                                   \
            va_list ap;                                                        \
            va_start(ap, flags);                                               \
            mode = (mode_t)va_arg(ap, int);                                    \
            va_end(ap);                                                        \
        }                                                                      \
        if (open_fault(path)) { errno = EMFILE; return -1; }                   \
        return real(path, flags, mode);                                        \
    }

OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)
"#;

/// The built shim and its control file.
pub struct Shim {
    pub lib: PathBuf,
    pub ctl: PathBuf,
}

impl Shim {
    /// Builds the shim into `dir` with the system C compiler; `None` (and a notice) if there
    /// is none.
    pub fn build(dir: &Path) -> Option<Shim> {
        let src = dir.join("kvfault.c");
        let lib = dir.join("kvfault.so");
        std::fs::write(&src, SHIM_C).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O1", "-o"])
            .arg(&lib)
            .arg(&src)
            .arg("-ldl")
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "the fault shim does not compile: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => {
                eprintln!("NOTICE: no C compiler ({cc}: {e}); fault-injection test skipped");
                return None;
            }
        }
        let ctl = dir.join("kvfault.ctl");
        std::fs::write(&ctl, "").unwrap();
        Some(Shim { lib, ctl })
    }

    /// Switches the fault (`""`: none).
    pub fn set(&self, fault: &str) {
        std::fs::write(&self.ctl, fault).unwrap();
    }
}
