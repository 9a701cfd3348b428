//! The clients people use, each with its default settings, against the server: the `redis`
//! crate, redis-py (through `python3`), `redis-cli` and `redis-benchmark`; and the protocol
//! handshake (`HELLO`, RESP3 replies, inline quoting) byte for byte over raw sockets.
//!
//! A client that is not installed is skipped with a notice that says how to install it
//! (CI installs them: `pip install redis`, and the `redis-tools` package).

mod support;

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use kvserver::aof::Fsync;
use kvserver::lock::LockKind;
use support::*;

/// A raw connection: requests as bytes, replies compared byte for byte.
struct Raw(TcpStream);

impl Raw {
    async fn open(addr: SocketAddr) -> Raw {
        Raw(within("connect", TcpStream::connect(addr)).await.unwrap())
    }

    /// Sends `req` and reads exactly as many bytes as `want` has, which must match.
    async fn expect(&mut self, req: &[u8], want: &[u8]) {
        self.0.write_all(req).await.unwrap();
        let got = self.read(want.len()).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "reply to {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// One line, without its CRLF.
    async fn line(&mut self) -> String {
        let mut text = Vec::new();
        loop {
            let b = self.read(1).await[0];
            if b == b'\r' {
                break;
            }
            text.push(b);
        }
        self.read(1).await;
        String::from_utf8(text).unwrap()
    }

    async fn read(&mut self, n: usize) -> Vec<u8> {
        let mut got = vec![0u8; n];
        within("raw reply", self.0.read_exact(&mut got))
            .await
            .unwrap();
        got
    }

    /// Sends `req`, reads until the server closes, returns all of it.
    async fn until_closed(mut self, req: &[u8]) -> Vec<u8> {
        self.0.write_all(req).await.unwrap();
        let mut got = Vec::new();
        within("read to close", self.0.read_to_end(&mut got))
            .await
            .unwrap();
        got
    }
}

/// A RESP request from words.
fn req(words: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        v.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
    }
    v
}

/// `HELLO`'s reply after the `proto` field: the id, then the fixed fields.
fn hello_tail(id: i64) -> String {
    format!(":{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n")
}

const HELLO_HEAD: &str =
    "$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n$5\r\nproto\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_switches_between_resp2_and_resp3() {
    let srv = start(support::config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let mut c = Raw::open(srv.addr).await;
    c.expect(&req(&["CLIENT", "ID"]), b":").await;
    let id: i64 = c.line().await.parse().unwrap();
    // RESP2 first: nulls are null bulk strings, maps flat arrays.
    c.expect(&req(&["GET", "nokey"]), b"$-1\r\n").await;
    c.expect(
        &req(&["HELLO"]),
        format!("*14\r\n{HELLO_HEAD}:2\r\n$2\r\nid\r\n{}", hello_tail(id)).as_bytes(),
    )
    .await;
    // Errors change nothing.
    c.expect(
        &req(&["HELLO", "4"]),
        b"-NOPROTO unsupported protocol version\r\n",
    )
    .await;
    c.expect(
        &req(&["HELLO", "1"]),
        b"-NOPROTO unsupported protocol version\r\n",
    )
    .await;
    c.expect(
        &req(&["HELLO", "three"]),
        b"-ERR Protocol version is not an integer or out of range\r\n",
    )
    .await;
    c.expect(
        &req(&["HELLO", "3", "AUTH", "bob", "secret"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    )
    .await;
    c.expect(
        &req(&["HELLO", "3", "AUTH", "default"]),
        b"-ERR Syntax error in HELLO option 'AUTH'\r\n",
    )
    .await;
    c.expect(
        &req(&["HELLO", "3", "SETNAME", "a b"]),
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    )
    .await;
    c.expect(
        &req(&["HELLO", "3", "FOO"]),
        b"-ERR Syntax error in HELLO option 'FOO'\r\n",
    )
    .await;
    c.expect(&req(&["GET", "nokey"]), b"$-1\r\n").await;
    c.expect(&req(&["CLIENT", "GETNAME"]), b"$-1\r\n").await;
    // HELLO 3 with both options: a map, the name set.
    c.expect(
        &req(&["HELLO", "3", "AUTH", "default", "any", "SETNAME", "conn1"]),
        format!("%7\r\n{HELLO_HEAD}:3\r\n$2\r\nid\r\n{}", hello_tail(id)).as_bytes(),
    )
    .await;
    c.expect(&req(&["CLIENT", "GETNAME"]), b"$5\r\nconn1\r\n")
        .await;
    // RESP3 replies.
    c.expect(&req(&["GET", "nokey"]), b"_\r\n").await;
    c.expect(&req(&["SET", "k", "v"]), b"+OK\r\n").await;
    c.expect(&req(&["MGET", "k", "nokey"]), b"*2\r\n$1\r\nv\r\n_\r\n")
        .await;
    c.expect(&req(&["SET", "k", "w", "NX"]), b"_\r\n").await;
    c.expect(
        &req(&["CONFIG", "GET", "maxmemory"]),
        b"%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    )
    .await;
    c.expect(&req(&["COMMAND", "INFO", "nosuch"]), b"*1\r\n_\r\n")
        .await;
    c.expect(
        &req(&["COMMAND", "INFO", "get"]),
        b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n~1\r\n+@string\r\n*0\r\n*0\r\n*0\r\n",
    )
    .await;
    // INFO is a verbatim string in RESP3.
    c.0.write_all(&req(&["INFO", "server"])).await.unwrap();
    let head = c.read(1).await;
    assert_eq!(head, b"=");
    let len: usize = c.line().await.parse().unwrap();
    let body = c.read(len + 2).await;
    assert!(
        body.starts_with(b"txt:# Server\r\nredis_version:"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    // CLIENT INFO shows the protocol and the command.
    c.0.write_all(&req(&["CLIENT", "INFO"])).await.unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"\n\r\n") {
        got.extend(c.read(1).await);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with('='), "{text}");
    assert!(text.contains(" name=conn1 "), "{text}");
    assert!(text.contains(" cmd=client|info "), "{text}");
    assert!(text.contains(" resp=3 "), "{text}");
    // Back to RESP2.
    c.expect(
        &req(&["HELLO", "2"]),
        format!("*14\r\n{HELLO_HEAD}:2\r\n$2\r\nid\r\n{}", hello_tail(id)).as_bytes(),
    )
    .await;
    c.expect(&req(&["GET", "nokey"]), b"$-1\r\n").await;
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_commands_take_quotes_as_redis_does() {
    let srv = start(support::config(LockKind::Tokio, None, Fsync::Everysec)).await;
    let mut c = Raw::open(srv.addr).await;
    c.expect(b"SET k \"hello world\"\r\n", b"+OK\r\n").await;
    c.expect(b"GET k\r\n", b"$11\r\nhello world\r\n").await;
    c.expect(b"SET k \"a\\x41b\\n\\\"\\\\\"\r\n", b"+OK\r\n")
        .await;
    c.expect(b"GET k\r\n", b"$6\r\naAb\n\"\\\r\n").await;
    c.expect(b"SET k 'it\\'s' \r\n", b"+OK\r\n").await;
    c.expect(b"GET k\r\n", b"$4\r\nit's\r\n").await;
    c.expect(b"SET k \"\"\r\n", b"+OK\r\n").await;
    c.expect(b"STRLEN k\r\n", b":0\r\n").await;
    c.expect(b"  \t PING   \r\n", b"+PONG\r\n").await;
    // Unbalanced: the error, then the connection closes; the request after it is not run.
    for bad in [
        &b"SET k \"abc\r\nPING\r\n"[..],
        b"SET \"\"\"k\"\"\" v\r\nPING\r\n",
        b"SET k 'abc\r\nPING\r\n",
        b"SET k \"a\"b\r\nPING\r\n",
    ] {
        let got = Raw::open(srv.addr).await.until_closed(bad).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            "-ERR Protocol error: unbalanced quotes in request\r\n",
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_crate_default_connection() {
    // `redis` 0.27's default connection speaks RESP2 and sends `CLIENT SETINFO LIB-NAME` and
    // `LIB-VER` (replies ignored) before the first command.
    let srv = start(support::config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let mut c = connect(srv.addr).await;
    assert_eq!(
        cmd::<String>(&mut c, &["SET", "k", "v"]).await.unwrap(),
        "OK"
    );
    assert_eq!(
        cmd::<Option<String>>(&mut c, &["GET", "k"]).await.unwrap(),
        Some("v".into())
    );
    assert_eq!(
        cmd::<Option<String>>(&mut c, &["GET", "nokey"])
            .await
            .unwrap(),
        None
    );
    let info: String = cmd(&mut c, &["CLIENT", "INFO"]).await.unwrap();
    assert!(info.contains(" lib-name=redis-rs lib-ver=0.27."), "{info}");
    assert!(info.contains(" resp=2 "), "{info}");
    assert!(info.contains(" cmd=client|info "), "{info}");
    srv.stop().await.unwrap();
}

/// Runs `program` with `args` (and `stdin`), or `None` with a notice when it is not installed.
fn run_tool(program: &str, args: &[&str], stdin: Option<&str>) -> Option<String> {
    let mut child = match Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("NOTICE: {program} not available ({e}); install redis-tools; test skipped");
            return None;
        }
    };
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_default() {
    let srv = start(support::config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let port = srv.addr.port().to_string();
    let out = tokio::task::spawn_blocking({
        move || {
            let p = port.as_str();
            let a = run_tool(
                "redis-cli",
                &["-p", p, "set", "greeting", "hello world"],
                None,
            )?;
            let b = run_tool("redis-cli", &["-p", p, "get", "greeting"], None)?;
            let c = run_tool("redis-cli", &["-p", p, "get", "nokey"], None)?;
            // Commands on stdin, one per line, as a script feeds them.
            let d = run_tool(
                "redis-cli",
                &["-p", p],
                Some("incr n\nincrby n 41\nmget greeting nokey n\n"),
            )?;
            Some((a, b, c, d))
        }
    })
    .await
    .unwrap();
    if let Some((a, b, c, d)) = out {
        assert_eq!(a, "OK\n");
        assert_eq!(b, "hello world\n");
        assert_eq!(c, "\n");
        assert_eq!(d, "1\n42\nhello world\n\n42\n");
    }
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_benchmark_default() {
    let srv = start(support::config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let port = srv.addr.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
        run_tool(
            "redis-benchmark",
            &[
                "-p",
                &port,
                "-t",
                "ping,set,get,incr,mset",
                "-n",
                "2000",
                "-c",
                "4",
                "--csv",
            ],
            None,
        )
    })
    .await
    .unwrap();
    if let Some(csv) = out {
        let tests: Vec<&str> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().trim_matches('"'))
            .collect();
        assert_eq!(
            tests,
            [
                "PING_INLINE",
                "PING_MBULK",
                "SET",
                "GET",
                "INCR",
                "MSET (10 keys)"
            ],
            "{csv}"
        );
        for line in csv.lines().skip(1) {
            let rps: f64 = line
                .split(',')
                .nth(1)
                .unwrap()
                .trim_matches('"')
                .parse()
                .unwrap();
            assert!(rps > 0.0, "{line}");
        }
        // Every INCR of the run landed on the counter key.
        let mut c = connect(srv.addr).await;
        let n: i64 = cmd(&mut c, &["GET", "counter:__rand_int__"]).await.unwrap();
        assert_eq!(n, 2000);
    }
    srv.stop().await.unwrap();
}

/// The redis-py script of [`redis_py_default_client`]: prints one line per check.
const REDIS_PY_SCRIPT: &str = r#"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
print("set", r.set("k", "v"))
print("get", r.get("k"), r.get("nokey"))
print("mget", r.mget("k", "nokey"))
print("incr", r.incr("n"), r.incrbyfloat("f", 1.5))
print("config", r.config_get("maxmemory"))
print("info", r.info("server")["redis_version"])
me = [c for c in r.client_list() if c["cmd"] == "client|list"][0]
print("client", me["resp"], me["lib-name"])
print("expire", r.expire("k", 100), r.ttl("k"))
print("scan", sorted(r.scan_iter()))
p = r.pipeline(transaction=True)
p.set("t", 1).incr("t").mget("t", "nokey").hset("h", "f", "v").hgetall("h")
print("multi", p.execute())
with r.pipeline() as p:
    p.watch("t")
    r.set("t", 100)
    p.multi()
    p.incr("t")
    try:
        p.execute()
        print("watch", "ran")
    except redis.WatchError:
        print("watch", "aborted")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_default_client() {
    let probe = Command::new("python3")
        .args(["-c", "import redis; print(redis.__version__)"])
        .output();
    let version = match probe {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => {
            eprintln!(
                "NOTICE: redis-py not available (python3 -c 'import redis' failed); install it with `pip install redis`; test skipped"
            );
            return;
        }
    };
    let srv = start(support::config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let port = srv.addr.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
        run_tool("python3", &["-c", REDIS_PY_SCRIPT, &port], None).unwrap()
    })
    .await
    .unwrap();
    let want = "set True\n\
        get b'v' None\n\
        mget [b'v', None]\n\
        incr 1 1.5\n\
        config {'maxmemory': '0'}\n\
        info 7.0.0\n\
        client 3 redis-py\n\
        expire True 100\n\
        scan [b'f', b'k', b'n']\n\
        multi [True, 2, [b'2', None], 1, {b'f': b'v'}]\n\
        watch aborted\n";
    assert_eq!(out, want, "redis-py {version}");
    srv.stop().await.unwrap();
}
