//! The reference: Debian's `redis-server` on a free loopback port, for the tests that compare
//! this server's replies with Redis'. Where it is not installed, [`redis_server`] says so and
//! the test is skipped (CI installs it).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{TempDir, DEADLINE};

/// A `redis-server` without persistence, killed on drop.
pub struct Redis {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a `redis-server` on 127.0.0.1 with `extra` settings (`["--enable-debug-command",
/// "yes"]`, say) and waits until it answers `PING`; `None`, with a notice, where there is no
/// `redis-server` to run.
pub async fn redis_server(tag: &str, extra: &[&str]) -> Option<Redis> {
    let dir = TempDir::new(tag);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--daemonize", "no", "--logfile", ""])
        .args(extra)
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("NOTICE: redis-server not available ({e}); differential test skipped");
            return None;
        }
    };
    let r = Redis {
        child,
        port,
        _dir: dir,
    };
    let t0 = Instant::now();
    loop {
        if answers_ping(port).await {
            return Some(r);
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "redis-server did not come up on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Whether a server on `port` answers an inline `PING` with `+PONG` within a second.
async fn answers_ping(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ping = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(b"PING\r\n").await?;
        let mut got = [0u8; 7];
        s.read_exact(&mut got).await?;
        Ok::<_, std::io::Error>(&got == b"+PONG\r\n")
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Ok(true))
    )
}

/// Whether `python3` can import redis-py; prints a notice (the test is skipped) when not.
pub fn redis_py_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("NOTICE: redis-py not available (pip install redis); test skipped");
    }
    ok
}

/// Runs the redis-py program `script` against the server on `port` (its one argument) in the
/// blocking pool, and returns what it printed; fails with its standard error if it fails.
pub async fn run_redis_py(script: &'static str, port: u16) -> String {
    tokio::task::spawn_blocking(move || {
        let o = Command::new("python3")
            .args(["-c", script, &port.to_string()])
            // the order of Python's sets and dicts of bytes, reproducible
            .env("PYTHONHASHSEED", "0")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    })
    .await
    .unwrap()
}
