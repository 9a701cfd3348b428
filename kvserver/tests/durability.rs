//! Durability of the `kvserver` example under faults and crashes: the server runs in a child
//! process (this test binary, started again) that is killed with SIGKILL, some runs under an
//! `LD_PRELOAD` shim that makes the log's `write(2)`, `fsync` or the directory's `fsync`/open
//! fail. After each, a server restarted on the same directory must hold every write that was
//! acknowledged, and none whose client got an error.

use kvserver::aof;
mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;
use kvserver::aof::Fsync;
use kvserver::lock::LockKind;

/// Not a test: the server process that the tests below start (and kill).
#[test]
#[ignore = "the crash tests' child process; started by them"]
fn child_server() {
    child_main();
}

/// Restarts a server on `dir` in this process and reads `keys` back (None: absent).
async fn read_back(dir: &Path, keys: &[String]) -> Vec<Option<String>> {
    let srv = start(config(LockKind::Tokio, Some(dir), Fsync::Everysec)).await;
    let mut c = connect(srv.addr).await;
    let mut out = Vec::new();
    for chunk in keys.chunks(100) {
        let v: Vec<Option<String>> = within("mget", c.mget(chunk)).await.unwrap();
        out.extend(v);
    }
    drop(c);
    within("stop", srv.stop()).await.unwrap();
    out
}

async fn set(
    c: &mut redis::aio::MultiplexedConnection,
    k: &str,
    v: &str,
) -> redis::RedisResult<()> {
    within("set", c.set(k, v)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_a_failed_fsync_is_an_error_and_never_durable() {
    let tmp = TempDir::new("fsync-always");
    let Some(shim) = Shim::build(tmp.path()) else {
        return;
    };
    let data = tmp.path().join("data");
    let srv = ChildServer::start(&data, "always", Some(&shim));
    let mut c = connect(srv.addr).await;
    set(&mut c, "before", "1").await.unwrap();

    shim.set("fsync-eio");
    let e = set(&mut c, "doomed", "1").await.unwrap_err();
    assert!(e.to_string().contains("fsync"), "{e}");
    shim.set("");
    // Memory may hold the failed write; the log does not: writes stay refused until restart.
    let e = set(&mut c, "after", "1").await.unwrap_err();
    assert!(e.to_string().contains("MISCONF"), "{e}");
    drop(c);
    srv.kill9();

    let got = read_back(&data, &["before".into(), "doomed".into(), "after".into()]).await;
    assert_eq!(got, [Some("1".into()), None, None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everysec_a_failed_fsync_refuses_writes_until_one_succeeds() {
    let tmp = TempDir::new("fsync-everysec");
    let Some(shim) = Shim::build(tmp.path()) else {
        return;
    };
    let data = tmp.path().join("data");
    let srv = ChildServer::start(&data, "everysec", Some(&shim));
    let mut c = connect(srv.addr).await;
    let mut acked = Vec::new();
    set(&mut c, "k0", "v").await.unwrap();
    acked.push("k0".to_string());

    // The background fsync (once a second) fails: from then on writes are refused.
    shim.set("fsync-eio");
    let t0 = Instant::now();
    let refused = loop {
        let k = format!("during:{}", acked.len());
        match set(&mut c, &k, "v").await {
            Ok(()) => acked.push(k),
            Err(e) => break e.to_string(),
        }
        assert!(
            t0.elapsed() < DEADLINE,
            "writes still accepted after the failed fsyncs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(refused.contains("MISCONF"), "{refused}");

    // The next fsync that succeeds lifts it.
    shim.set("");
    let t0 = Instant::now();
    loop {
        let k = format!("after:{}", acked.len());
        if set(&mut c, &k, "v").await.is_ok() {
            acked.push(k);
            break;
        }
        assert!(t0.elapsed() < DEADLINE, "writes still refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(c);
    srv.kill9();

    let got = read_back(&data, &acked).await;
    let lost: Vec<_> = acked
        .iter()
        .zip(&got)
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| k)
        .collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

/// Sends `n` pipelined `SET`s in one write on a raw socket; returns the `n` reply lines.
async fn raw_sets(addr: SocketAddr, prefix: &str, n: usize) -> Vec<String> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = Vec::new();
    for i in 0..n {
        let k = format!("{prefix}:{i}");
        req.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$1\r\nv\r\n", k.len()).as_bytes(),
        );
    }
    s.write_all(&req).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.iter().filter(|&&b| b == b'\n').count() < n {
        let r = within("replies", s.read(&mut buf)).await.unwrap();
        assert!(r > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..r]);
    }
    String::from_utf8(got)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_fails_every_command_in_it_and_leaves_no_partial_record() {
    let tmp = TempDir::new("batch-fail");
    let Some(shim) = Shim::build(tmp.path()) else {
        return;
    };
    let data = tmp.path().join("data");
    let srv = ChildServer::start(&data, "everysec", Some(&shim));
    let ok = raw_sets(srv.addr, "ok", 20).await;
    assert!(ok.iter().all(|l| l == "+OK"), "{ok:?}");

    // The batch's write(2) writes half of it, the rest fails with ENOSPC.
    shim.set("write-short");
    let bad = raw_sets(srv.addr, "bad", 64).await;
    assert!(
        bad.iter().all(|l| l.starts_with('-')),
        "every command of the failed batch gets an error: {bad:?}"
    );
    shim.set("");
    let later = raw_sets(srv.addr, "later", 3).await;
    assert!(later.iter().all(|l| l.starts_with("-MISCONF")), "{later:?}");
    srv.kill9();

    // The file holds whole records only: replay finds no torn one to drop.
    let report = aof::load(&data, |_| {}).unwrap();
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(report.log_records, 20);
    let keys: Vec<String> = (0..20)
        .map(|i| format!("ok:{i}"))
        .chain((0..64).map(|i| format!("bad:{i}")))
        .collect();
    let got = read_back(&data, &keys).await;
    assert!(got[..20].iter().all(|v| v.as_deref() == Some("v")));
    assert!(got[20..].iter().all(Option::is_none), "{:?}", &got[20..]);
}

/// A `SAVE` whose directory fsync (or the directory's open) fails *after* the new log was
/// renamed into place: the new log is the log from then on, so writes acknowledged afterwards
/// must be in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_failing_after_its_commit_point_loses_no_acknowledged_write() {
    for fault in ["dirfsync-eio-2", "diropen-emfile-2"] {
        let tmp = TempDir::new("save-commit");
        let Some(shim) = Shim::build(tmp.path()) else {
            return;
        };
        let data = tmp.path().join("data");
        let srv = ChildServer::start(&data, "everysec", Some(&shim));
        let mut c = connect(srv.addr).await;
        let mut acked = Vec::new();
        for i in 0..20 {
            let k = format!("pre:{i}");
            set(&mut c, &k, "v").await.unwrap();
            acked.push(k);
        }
        shim.set(fault);
        let e = cmd::<String>(&mut c, &["SAVE"]).await.unwrap_err();
        assert!(e.to_string().contains("SAVE"), "{fault}: {e}");
        let mut refused = 0;
        for i in 0..100 {
            let k = format!("post:{i}");
            match set(&mut c, &k, "v").await {
                Ok(()) => acked.push(k),
                Err(_) => refused += 1,
            }
        }
        assert_eq!(
            refused, 100,
            "{fault}: writes are refused while the directory is unsynced"
        );
        shim.set("");
        let t0 = Instant::now();
        loop {
            let k = format!("healed:{}", acked.len());
            if set(&mut c, &k, "v").await.is_ok() {
                acked.push(k);
                break;
            }
            assert!(t0.elapsed() < DEADLINE, "{fault}: writes still refused");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for i in 0..20 {
            let k = format!("last:{i}");
            set(&mut c, &k, "v").await.unwrap();
            acked.push(k);
        }
        drop(c);
        srv.kill9();

        let got = read_back(&data, &acked).await;
        let lost: Vec<_> = acked
            .iter()
            .zip(&got)
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k)
            .collect();
        assert!(
            lost.is_empty(),
            "{fault}: acknowledged writes lost: {lost:?}"
        );
    }
}

/// Per key: the last value acknowledged and the last one sent (values only grow).
#[derive(Default)]
struct Track {
    acked: BTreeMap<String, u64>,
    sent: BTreeMap<String, u64>,
}

/// One writer: pipelines of `SET`s with growing values and `INCR`s, until the server dies.
async fn writer(addr: SocketAddr, id: usize, progress: Arc<AtomicU64>) -> Track {
    let mut t = Track::default();
    let Ok(client) = redis::Client::open(format!("redis://{addr}/")) else {
        return t;
    };
    let Ok(mut c) = client.get_multiplexed_async_connection().await else {
        return t;
    };
    let ctr = format!("w{id}:ctr");
    for n in 1u64.. {
        let mut p = redis::pipe();
        let mut keys = Vec::new();
        for j in 0..16u64 {
            let k = format!("w{id}:k{}", (n * 16 + j) % 40);
            let v = n * 16 + j;
            p.cmd("SET").arg(&k).arg(v).ignore();
            t.sent.insert(k.clone(), v);
            keys.push((k, v));
        }
        p.cmd("INCR").arg(&ctr);
        t.sent.insert(ctr.clone(), n);
        let r: Result<redis::RedisResult<(u64,)>, _> =
            tokio::time::timeout(DEADLINE, p.query_async(&mut c)).await;
        match r {
            Ok(Ok((v,))) => {
                assert_eq!(v, n, "INCR");
                for (k, v) in keys {
                    t.acked.insert(k, v);
                }
                t.acked.insert(ctr.clone(), n);
                progress.fetch_add(17, Ordering::Relaxed);
            }
            _ => break,
        }
    }
    t
}

/// Acknowledge, kill -9 (while writers and `SAVE`s run), restart, read back: every key holds
/// its last acknowledged value or a later one that was sent, under both fsync modes (a killed
/// process loses nothing the page cache has; `always` also covers a power cut, which a test
/// cannot make).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_keeps_every_acknowledged_write() {
    for fsync in ["always", "everysec"] {
        let tmp = TempDir::new("kill9");
        let data = tmp.path().join("data");
        let srv = ChildServer::start(&data, fsync, None);
        let addr = srv.addr;
        let progress = Arc::new(AtomicU64::new(0));
        let writers: Vec<_> = (0..3)
            .map(|id| tokio::spawn(writer(addr, id, progress.clone())))
            .collect();
        let saver = tokio::spawn(async move {
            let mut saves = 0u32;
            if let Ok(client) = redis::Client::open(format!("redis://{addr}/")) {
                if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                    while let Ok(Ok(())) =
                        tokio::time::timeout(DEADLINE, redis::cmd("SAVE").query_async::<()>(&mut c))
                            .await
                    {
                        saves += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            saves
        });
        let p = progress.clone();
        eventually("writers make progress", || {
            std::future::ready(p.load(Ordering::Relaxed) >= 3000)
        })
        .await;
        srv.kill9();
        let mut tracks = Vec::new();
        for w in writers {
            tracks.push(within("writer", w).await.unwrap());
        }
        let saves = within("saver", saver).await.unwrap();
        assert!(saves > 0, "{fsync}: no SAVE ran before the kill");

        let keys: Vec<String> = tracks.iter().flat_map(|t| t.sent.keys().cloned()).collect();
        let got = read_back(&data, &keys).await;
        let got: BTreeMap<&String, Option<u64>> = keys
            .iter()
            .zip(got)
            .map(|(k, v)| (k, v.map(|v| v.parse().unwrap())))
            .collect();
        for t in &tracks {
            for (k, &sent) in &t.sent {
                let acked = t.acked.get(k).copied();
                match (acked, got[k]) {
                    (Some(a), Some(v)) => assert!(
                        a <= v && v <= sent,
                        "{fsync}: {k} = {v}, acknowledged {a}, last sent {sent}"
                    ),
                    (Some(a), None) => panic!("{fsync}: {k} lost (acknowledged {a})"),
                    (None, Some(v)) => assert!(v <= sent, "{fsync}: {k} = {v} never sent"),
                    (None, None) => {}
                }
            }
        }
    }
}
