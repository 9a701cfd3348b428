//! Integration tests of the `kvserver` example: the server runs in-process on an ephemeral
//! loopback port and is driven by the `redis` crate (a real client) and by raw sockets.
//! Every test runs once per `--lock` choice. Data directories are created under the system
//! temp dir with unique names and removed afterwards.

use kvserver::aof;
use kvserver::glob;
use kvserver::resp;
use kvserver::server;
use kvserver::store;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use kvserver::aof::{Fsync, LogIo};
use kvserver::lock::LockKind;
use kvserver::server::Config;

mod support;
use support::*;

/// The support module's server configuration, with the log fsynced every second.
fn config(lock: LockKind, dir: Option<&Path>) -> Config {
    support::config(lock, dir, Fsync::Everysec)
}

/// Every key and value (binary values shown lossily), read through the protocol.
async fn dump(con: &mut MultiplexedConnection) -> BTreeMap<String, String> {
    let mut keys: Vec<String> = cmd(con, &["KEYS", "*"]).await.unwrap();
    keys.sort();
    let mut out = BTreeMap::new();
    // in chunks: some tests run with a small request size limit
    for chunk in keys.chunks(50) {
        let vals: Vec<Vec<u8>> = within("mget", con.mget(chunk)).await.unwrap();
        for (k, v) in chunk.iter().zip(vals) {
            out.insert(k.clone(), String::from_utf8_lossy(&v).into_owned());
        }
    }
    out
}

/// Sends `bytes` on a fresh connection, optionally half-closes, and returns everything the
/// server sends until it closes (or resets) the connection.
async fn raw(addr: SocketAddr, bytes: &[u8], half_close: bool) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s.write_all(bytes).await; // the server may close before it has read everything
    if half_close {
        let _ = s.shutdown().await;
    }
    let mut got = Vec::new();
    let _ = within("raw read", s.read_to_end(&mut got)).await;
    got
}

fn for_each_lock() -> [LockKind; 3] {
    LockKind::ALL
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command() {
    for lock in for_each_lock() {
        let dir = TempDir::new("cmds");
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        let ctx = format!("lock {lock:?}");

        assert_eq!(
            cmd::<String>(&mut c, &["PING"]).await.unwrap(),
            "PONG",
            "{ctx}"
        );
        assert_eq!(cmd::<String>(&mut c, &["PING", "hi"]).await.unwrap(), "hi");
        assert_eq!(
            cmd::<String>(&mut c, &["ECHO", "a b"]).await.unwrap(),
            "a b"
        );

        // SET / GET with options
        let () = c.set("k", "v").await.unwrap();
        assert_eq!(
            c.get::<_, Option<String>>("k").await.unwrap().as_deref(),
            Some("v")
        );
        assert_eq!(c.get::<_, Option<String>>("nope").await.unwrap(), None);
        let r: Option<String> = cmd(&mut c, &["SET", "k", "w", "NX"]).await.unwrap();
        assert_eq!(r, None, "NX on an existing key does nothing");
        let r: Option<String> = cmd(&mut c, &["SET", "new", "1", "XX"]).await.unwrap();
        assert_eq!(r, None, "XX on a missing key does nothing");
        let r: Option<String> = cmd(&mut c, &["SET", "k", "w", "XX"]).await.unwrap();
        assert_eq!(r.as_deref(), Some("OK"));
        let r: Option<String> = cmd(&mut c, &["SET", "fresh", "1", "NX", "EX", "100"])
            .await
            .unwrap();
        assert_eq!(r.as_deref(), Some("OK"));
        let ttl: i64 = cmd(&mut c, &["TTL", "fresh"]).await.unwrap();
        assert!((1..=100).contains(&ttl), "ttl {ttl}");
        let pttl: i64 = cmd(&mut c, &["PTTL", "k"]).await.unwrap();
        assert_eq!(pttl, -1);
        let pttl: i64 = cmd(&mut c, &["PTTL", "missing"]).await.unwrap();
        assert_eq!(pttl, -2);
        assert!(cmd::<String>(&mut c, &["SET", "k", "v", "EX", "0"])
            .await
            .is_err());
        assert!(cmd::<String>(&mut c, &["SET", "k", "v", "EX", "x"])
            .await
            .is_err());
        assert!(cmd::<String>(&mut c, &["SET", "k", "v", "NX", "XX"])
            .await
            .is_err());
        assert!(cmd::<String>(&mut c, &["SET", "k", "v", "PX"])
            .await
            .is_err());
        let _: String = cmd(&mut c, &["SET", "k", "kept", "KEEPTTL"]).await.unwrap();

        // EXISTS / DEL
        let n: i64 = cmd(&mut c, &["EXISTS", "k", "k", "nope", "fresh"])
            .await
            .unwrap();
        assert_eq!(n, 3);
        let n: i64 = cmd(&mut c, &["DEL", "k", "k", "nope"]).await.unwrap();
        assert_eq!(n, 1);
        let n: i64 = cmd(&mut c, &["EXISTS", "k"]).await.unwrap();
        assert_eq!(n, 0);

        // INCR family
        assert_eq!(cmd::<i64>(&mut c, &["INCR", "n"]).await.unwrap(), 1);
        assert_eq!(
            cmd::<i64>(&mut c, &["INCRBY", "n", "41"]).await.unwrap(),
            42
        );
        assert_eq!(cmd::<i64>(&mut c, &["DECRBY", "n", "2"]).await.unwrap(), 40);
        assert_eq!(cmd::<i64>(&mut c, &["DECR", "n"]).await.unwrap(), 39);
        let _: () = c.set("s", "abc").await.unwrap();
        let e = cmd::<i64>(&mut c, &["INCR", "s"]).await.unwrap_err();
        assert!(e.to_string().contains("not an integer"), "{e}");
        assert!(cmd::<i64>(&mut c, &["INCRBY", "n", "1.5"]).await.is_err());
        let _: () = c.set("big", i64::MAX).await.unwrap();
        assert!(cmd::<i64>(&mut c, &["INCR", "big"]).await.is_err());

        // MSET / MGET
        let _: String = cmd(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"])
            .await
            .unwrap();
        let v: Vec<Option<String>> = cmd(&mut c, &["MGET", "a", "zz", "c"]).await.unwrap();
        assert_eq!(v, vec![Some("1".into()), None, Some("3".into())]);
        assert!(cmd::<String>(&mut c, &["MSET", "a"]).await.is_err());
        assert!(cmd::<String>(&mut c, &["MSET", "a", "1", "b"])
            .await
            .is_err());

        // DBSIZE / KEYS / SCAN
        let n: i64 = cmd(&mut c, &["DBSIZE"]).await.unwrap();
        assert_eq!(n, 7, "fresh n s big a b c");
        let mut keys: Vec<String> = cmd(&mut c, &["KEYS", "[ab]"]).await.unwrap();
        keys.sort();
        assert_eq!(keys, ["a", "b"]);
        let keys: Vec<String> = cmd(&mut c, &["KEYS", "f*h"]).await.unwrap();
        assert_eq!(keys, ["fresh"]);
        for i in 0..300 {
            let _: () = c.set(format!("scan:{i}"), i).await.unwrap();
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0u64;
        let mut rounds = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = within(
                "scan",
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg("scan:*")
                    .arg("COUNT")
                    .arg(7)
                    .query_async(&mut c),
            )
            .await
            .unwrap();
            seen.extend(batch);
            cursor = next;
            rounds += 1;
            assert!(rounds < 1000, "SCAN does not terminate");
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 300, "{ctx}");
        // the client's own SCAN iterator
        let mut it: redis::AsyncIter<String> =
            within("scan iter", c.scan_match("scan:1*")).await.unwrap();
        let mut n = 0;
        while let Some(_k) = within("scan next", it.next_item()).await {
            n += 1;
        }
        drop(it);
        assert_eq!(n, 111, "scan:1, scan:10..19, scan:100..199");
        assert!(cmd::<Vec<String>>(&mut c, &["SCAN", "x"]).await.is_err());

        // CONFIG GET, INFO, SELECT, CLIENT
        let cfg: Vec<String> = cmd(&mut c, &["CONFIG", "GET", "appendonly"]).await.unwrap();
        assert_eq!(cfg, ["appendonly", "yes"]);
        let cfg: Vec<String> = cmd(&mut c, &["CONFIG", "GET", "save"]).await.unwrap();
        assert_eq!(cfg, ["save", ""]);
        let cfg: Vec<String> = cmd(&mut c, &["CONFIG", "GET", "nosuch*"]).await.unwrap();
        assert!(cfg.is_empty());
        let info: String = cmd(&mut c, &["INFO"]).await.unwrap();
        for want in [
            "connected_clients:1",
            "total_commands_processed:",
            "db0:keys=",
            "# Lockstats",
            "aof_enabled:1",
        ] {
            assert!(info.contains(want), "INFO lacks {want}: {info}");
        }
        assert!(info.contains(&format!("lock:{}", lock.name())));
        let _: String = cmd(&mut c, &["SELECT", "0"]).await.unwrap();
        assert!(cmd::<String>(&mut c, &["SELECT", "1"]).await.is_err());

        // SAVE, FLUSHALL
        let _: String = cmd(&mut c, &["SAVE"]).await.unwrap();
        let _: String = cmd(&mut c, &["FLUSHALL"]).await.unwrap();
        assert_eq!(cmd::<i64>(&mut c, &["DBSIZE"]).await.unwrap(), 0);

        // errors keep the connection usable
        let e = cmd::<String>(&mut c, &["NOSUCHCMD", "x"])
            .await
            .unwrap_err();
        assert!(e.to_string().contains("unknown command"), "{e}");
        let e = cmd::<String>(&mut c, &["GET"]).await.unwrap_err();
        assert!(e.to_string().contains("wrong number of arguments"), "{e}");
        assert_eq!(cmd::<String>(&mut c, &["PING"]).await.unwrap(), "PONG");

        // QUIT: +OK, then the server closes
        let got = raw(srv.addr, b"PING\r\nQUIT\r\nPING\r\n", false).await;
        assert_eq!(got, b"+PONG\r\n+OK\r\n");

        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelining_in_order() {
    for lock in for_each_lock() {
        let srv = start(config(lock, None)).await;
        let mut c = connect(srv.addr).await;
        let mut p = redis::pipe();
        for i in 0..500 {
            p.cmd("SET").arg(format!("p{i}")).arg(i).ignore();
            p.cmd("INCR").arg("ctr");
            p.cmd("GET").arg(format!("p{i}"));
        }
        let out: Vec<redis::Value> = within("pipeline", p.query_async(&mut c)).await.unwrap();
        assert_eq!(out.len(), 1000);
        for i in 0..500 {
            assert_eq!(out[2 * i], redis::Value::Int(i as i64 + 1), "{lock:?}");
            assert_eq!(
                out[2 * i + 1],
                redis::Value::BulkString(i.to_string().into_bytes())
            );
        }
        // Raw pipeline, delivered in awkward pieces.
        let mut req = Vec::new();
        for i in 0..200 {
            req.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n$2\r\nrp\r\n${}\r\n{i}\r\n",
                    i.to_string().len()
                )
                .as_bytes(),
            );
            req.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$2\r\nrp\r\n");
        }
        req.extend_from_slice(b"QUIT\r\n");
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        for chunk in req.chunks(13) {
            s.write_all(chunk).await.unwrap();
        }
        let mut got = Vec::new();
        within("raw pipeline", s.read_to_end(&mut got))
            .await
            .unwrap();
        let mut want = Vec::new();
        for i in 0..200 {
            want.extend_from_slice(
                format!("+OK\r\n${}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
            );
        }
        want.extend_from_slice(b"+OK\r\n");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry() {
    for lock in for_each_lock() {
        let dir = TempDir::new("expiry");
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        let _: String = cmd(&mut c, &["SET", "short", "x", "PX", "5"])
            .await
            .unwrap();
        let _: String = cmd(&mut c, &["SET", "long", "y", "EX", "1000"])
            .await
            .unwrap();
        let _: () = c.set("plain", "z").await.unwrap();
        for i in 0..50 {
            let _: String = cmd(&mut c, &["SET", &format!("many{i}"), "v", "PX", "3"])
                .await
                .unwrap();
        }
        // lazily hidden...
        let addr = srv.addr;
        eventually("GET short -> nil", || async move {
            let mut c = connect(addr).await;
            c.get::<_, Option<String>>("short").await.unwrap().is_none()
        })
        .await;
        // ...and swept
        eventually("sweep", || async move {
            let mut c = connect(addr).await;
            cmd::<i64>(&mut c, &["DBSIZE"]).await.unwrap() == 2
        })
        .await;
        let info: String = cmd(&mut c, &["INFO", "stats"]).await.unwrap();
        assert!(!info.contains("expired_keys:0\r"), "{info}");
        // an expired key is absent for NX and INCR
        let _: String = cmd(&mut c, &["SET", "gone", "5", "PX", "1"]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let r: Option<String> = cmd(&mut c, &["SET", "gone", "new", "NX"]).await.unwrap();
        assert_eq!(r.as_deref(), Some("OK"));
        let _: String = cmd(&mut c, &["SET", "ctr", "5", "PX", "1"]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(cmd::<i64>(&mut c, &["INCR", "ctr"]).await.unwrap(), 1);
        // a deadline survives a restart; an expired key does not come back
        let _: String = cmd(&mut c, &["SET", "brief", "x", "PX", "300"])
            .await
            .unwrap();
        drop(c);
        within("stop", srv.stop()).await.unwrap();
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        let ttl: i64 = cmd(&mut c, &["TTL", "long"]).await.unwrap();
        assert!(ttl > 900, "ttl {ttl}");
        assert_eq!(c.get::<_, Option<String>>("short").await.unwrap(), None);
        assert_eq!(
            c.get::<_, Option<String>>("gone").await.unwrap().as_deref(),
            Some("new")
        );
        let addr = srv.addr;
        eventually("brief expires after restart", || async move {
            let mut c = connect(addr).await;
            c.get::<_, Option<String>>("brief").await.unwrap().is_none()
        })
        .await;
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

/// Writes a mix of commands that all end up in the log.
async fn write_mix(c: &mut MultiplexedConnection, tag: &str) {
    for i in 0..50 {
        let _: () = c.set(format!("{tag}:{i}"), format!("v{i}")).await.unwrap();
    }
    for _ in 0..7 {
        let _: i64 = c.incr(format!("{tag}:ctr"), 3).await.unwrap();
    }
    let _: String = cmd(
        c,
        &["MSET", &format!("{tag}:m1"), "x", &format!("{tag}:m2"), "y"],
    )
    .await
    .unwrap();
    let _: i64 = cmd(c, &["DEL", &format!("{tag}:0"), &format!("{tag}:1")])
        .await
        .unwrap();
    let _: String = cmd(c, &["SET", &format!("{tag}:ttl"), "t", "EX", "1000"])
        .await
        .unwrap();
    let _: () = c
        .set(format!("{tag}:bin"), b"\x00\r\n\xff".to_vec())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistence_across_restart() {
    for lock in for_each_lock() {
        for io in [LogIo::Direct, LogIo::TokioFs] {
            let dir = TempDir::new("restart");
            let mut cfg = config(lock, Some(dir.path()));
            if let Some(p) = cfg.persistence.as_mut() {
                p.io = io;
                p.fsync = Fsync::Always;
            }
            let srv = start(cfg.clone()).await;
            let mut c = connect(srv.addr).await;
            let _: () = c.set("doomed", "1").await.unwrap();
            let _: String = cmd(&mut c, &["FLUSHALL"]).await.unwrap();
            write_mix(&mut c, "a").await;
            let before = dump(&mut c).await;
            assert_eq!(before.len(), 53);
            assert_eq!(before["a:ctr"], "21");
            drop(c);
            within("stop", srv.stop()).await.unwrap();

            // a different shard count and lock on the way back is fine
            cfg.shards = 7;
            cfg.lock =
                LockKind::ALL[(LockKind::ALL.iter().position(|&l| l == lock).unwrap() + 1) % 3];
            let srv = start(cfg).await;
            let mut c = connect(srv.addr).await;
            assert_eq!(dump(&mut c).await, before, "{lock:?} {io:?}");
            let ttl: i64 = cmd(&mut c, &["TTL", "a:ttl"]).await.unwrap();
            assert!(ttl > 900);
            drop(c);
            within("stop", srv.stop()).await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_and_corrupt_logs() {
    for lock in for_each_lock() {
        let dir = TempDir::new("trunc");
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        for i in 0..10 {
            let _: () = c.set(format!("k{i}"), "x".repeat(20)).await.unwrap();
        }
        drop(c);
        within("stop", srv.stop()).await.unwrap();
        let log = dir.path().join(aof::AOF_NAME);
        let full = std::fs::read(&log).unwrap();

        // A torn last record: dropped with a warning, the rest is there, and the log is usable.
        std::fs::write(&log, &full[..full.len() - 5]).unwrap();
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        let d = dump(&mut c).await;
        assert_eq!(d.len(), 9, "{lock:?}");
        assert!(!d.contains_key("k9"));
        let _: () = c.set("after", "1").await.unwrap();
        drop(c);
        within("stop", srv.stop()).await.unwrap();
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        assert_eq!(dump(&mut c).await.len(), 10);
        drop(c);
        within("stop", srv.stop()).await.unwrap();

        // Only a record header's worth left of the last record: the same.
        let now = std::fs::read(&log).unwrap();
        let rec_len = aof::rec_set(b"after", b"1", 0).len();
        std::fs::write(&log, &now[..now.len() - rec_len + 3]).unwrap();
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        assert_eq!(dump(&mut c).await.len(), 9);
        drop(c);
        within("stop", srv.stop()).await.unwrap();

        // A damaged record in the middle: the server refuses to start, saying where.
        let mut bad = std::fs::read(&log).unwrap();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        std::fs::write(&log, &bad).unwrap();
        let err = match server::start(config(lock, Some(dir.path()))).await {
            Ok(_) => panic!("started on a corrupt log"),
            Err(e) => e,
        };
        assert!(err.contains("corrupt") && err.contains("offset"), "{err}");
        // ...and has not touched the file.
        assert_eq!(std::fs::read(&log).unwrap(), bad);

        // A damaged length field is corruption too, not a "truncation".
        let mut bad = std::fs::read(&log).unwrap();
        bad[mid] ^= 0x55; // undo
        bad[16] ^= 0x01; // first record's length
        std::fs::write(&log, &bad).unwrap();
        assert!(server::start(config(lock, Some(dir.path()))).await.is_err());

        // Not a log at all.
        std::fs::write(&log, b"hello").unwrap();
        assert!(server::start(config(lock, Some(dir.path()))).await.is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_then_restart() {
    for lock in for_each_lock() {
        let dir = TempDir::new("save");
        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        write_mix(&mut c, "pre").await;
        let _: String = cmd(&mut c, &["SAVE"]).await.unwrap();
        let log = dir.path().join(aof::AOF_NAME);
        let after_save = std::fs::metadata(&log).unwrap().len();
        assert_eq!(after_save, 16, "the new log starts empty");
        write_mix(&mut c, "post").await;
        let _: String = cmd(&mut c, &["SAVE"]).await.unwrap();
        let _: i64 = cmd(&mut c, &["DEL", "pre:5"]).await.unwrap();

        // SAVE while writers run: every acknowledged write survives.
        let addr = srv.addr;
        let mut writers = Vec::new();
        for w in 0..4 {
            writers.push(tokio::spawn(async move {
                let mut c = connect(addr).await;
                for i in 0..150 {
                    let _: i64 = c.incr(format!("w{w}:{}", i % 10), 1).await.unwrap();
                    if i % 25 == 0 {
                        let _: String = cmd(
                            &mut c,
                            &[
                                "MSET",
                                &format!("w{w}:m{i}"),
                                "a",
                                &format!("x{w}:m{i}"),
                                "b",
                            ],
                        )
                        .await
                        .unwrap();
                        let _: i64 = cmd(&mut c, &["DEL", &format!("w{w}:m{i}"), "pre:7"])
                            .await
                            .unwrap();
                    }
                }
            }));
        }
        let mut saves = 0;
        while writers.iter().any(|w| !w.is_finished()) && saves < 20 {
            let _: String = cmd(&mut c, &["SAVE"]).await.unwrap();
            saves += 1;
        }
        for w in writers {
            within("writer", w).await.unwrap();
        }
        let before = dump(&mut c).await;
        drop(c);
        within("stop", srv.stop()).await.unwrap();
        let dumps: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            dumps.iter().filter(|n| n.starts_with("dump-")).count(),
            1,
            "{dumps:?}"
        );
        assert!(!dumps.iter().any(|n| n.ends_with(".tmp")), "{dumps:?}");

        let srv = start(config(lock, Some(dir.path()))).await;
        let mut c = connect(srv.addr).await;
        let after = dump(&mut c).await;
        assert_eq!(after, before, "{lock:?}");
        assert_eq!(after["w3:9"], "15");
        assert!(!after.contains_key("pre:5"));
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_does_not_hurt_others() {
    for lock in for_each_lock() {
        let dir = TempDir::new("bad");
        let mut cfg = config(lock, Some(dir.path()));
        cfg.limits = resp::Limits {
            max_bulk_len: 4096,
            max_array_len: 64,
            max_inline_len: 1024,
            max_request_len: 16 * 1024,
        };
        let srv = start(cfg.clone()).await;
        let addr = srv.addr;

        // The good client writes and reads throughout.
        let good = tokio::spawn(async move {
            let mut c = connect(addr).await;
            let mut written = BTreeMap::new();
            for i in 0..300 {
                let (k, v) = (format!("good:{}", i % 97), format!("{i}"));
                let _: () = c.set(&k, &v).await.unwrap();
                let got: String = c.get(&k).await.unwrap();
                assert_eq!(got, v);
                written.insert(k, v);
                if i % 50 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            for (k, v) in &written {
                let got: String = c.get(k).await.unwrap();
                assert_eq!(&got, v);
            }
            written
        });

        // Frames that must end the connection with a protocol error (or at least close it).
        let big = 5000usize;
        let mut fatal: Vec<Vec<u8>> = vec![
            b"*abc\r\n".to_vec(),
            b"*2\r\n$3\r\nGET\r\n:1\r\n".to_vec(),
            b"*1\r\n$-3\r\n".to_vec(),
            b"*1\r\n$x\r\n".to_vec(),
            b"*1\r\n$3\r\nGETXX\r\n".to_vec(),
            b"*1\r\n$3\r\nGET\n".to_vec(),
            b"*1\r\n$3\r\nGET\rX".to_vec(),
            b"*99999999999999999999\r\n".to_vec(),
            b"*65\r\n".to_vec(),
            format!("*2\r\n$3\r\nGET\r\n${big}\r\n").into_bytes(),
            [
                format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${big}\r\n").into_bytes(),
                vec![b'v'; big],
                b"\r\n".to_vec(),
            ]
            .concat(),
            vec![b'A'; 2000],
            [b"*1\r\n$".to_vec(), vec![b'9'; 40], b"\r\n".to_vec()].concat(),
        ];
        // requests over the total limit: 5 x 4000 bytes
        let mut over = b"*6\r\n$3\r\nSET\r\n".to_vec();
        for _ in 0..5 {
            over.extend_from_slice(b"$4000\r\n");
            over.extend_from_slice(&[b'x'; 4000]);
            over.extend_from_slice(b"\r\n");
        }
        fatal.push(over);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        while fatal.len() < 250 {
            // '*' + garbage, or a truncated prefix of a valid frame with garbage after it
            let mut f = b"*".to_vec();
            let n = rng.gen_range(1..40);
            f.extend((0..n).map(|_| rng.gen::<u8>()));
            fatal.push(f);
        }

        let mut tasks = Vec::new();
        for chunk in fatal.chunks(25) {
            let chunk = chunk.to_vec();
            tasks.push(tokio::spawn(async move {
                for frame in chunk {
                    let got = raw(addr, &frame, true).await;
                    // An error reply (possibly after replies to good requests), or closed.
                    let text = String::from_utf8_lossy(&got);
                    assert!(
                        got.is_empty() || text.contains("-ERR"),
                        "frame {:?} got {text:?}",
                        String::from_utf8_lossy(&frame)
                    );
                }
            }));
        }
        // Errors that keep the connection open: each gets its reply, then PING works.
        tasks.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
            for i in 0..200 {
                let frame: Vec<u8> = match i % 6 {
                    0 => b"*2\r\n$7\r\nNOSUCHX\r\n$1\r\na\r\n".to_vec(),
                    1 => b"*1\r\n$3\r\nGET\r\n".to_vec(),
                    2 => b"*3\r\n$6\r\nINCRBY\r\n$1\r\nn\r\n$3\r\n1.5\r\n".to_vec(),
                    3 => b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nEX\r\n$2\r\n-1\r\n"
                        .to_vec(),
                    4 => {
                        let mut f: Vec<u8> = (0..rng.gen_range(1..60))
                            .map(|_| rng.gen_range(0x80..=0xffu8))
                            .collect();
                        f.retain(|&b| b != b'\n');
                        f.extend_from_slice(b"\r\n");
                        f
                    }
                    _ => b"*2\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n".to_vec(),
                };
                s.write_all(&frame).await.unwrap();
                s.write_all(b"*1\r\n$4\r\nPING\r\n").await.unwrap();
                let mut got = Vec::new();
                while !got.ends_with(b"+PONG\r\n") {
                    let mut buf = [0u8; 512];
                    let n = within("reply", s.read(&mut buf)).await.unwrap();
                    assert!(n > 0, "connection closed after a non-fatal error {i}");
                    got.extend_from_slice(&buf[..n]);
                }
                assert!(
                    got.starts_with(b"-"),
                    "{i}: {:?}",
                    String::from_utf8_lossy(&got)
                );
                assert_eq!(got.iter().filter(|&&b| b == b'\n').count(), 2);
            }
        }));
        for t in tasks {
            within("bad input task", t).await.unwrap();
        }
        // A bulk length line one byte over its limit, from a client that waits for the reply:
        // the error comes at once (the parser once waited for more bytes forever).
        let frame = [b"*1\r\n$".to_vec(), vec![b'1'; 33], b"\r\n".to_vec()].concat();
        assert_eq!(
            String::from_utf8_lossy(&raw(addr, &frame, false).await),
            "-ERR Protocol error: line too long\r\n"
        );
        let written = within("good client", good).await.unwrap();

        // The good client's data is all there, and the log replays to the same data.
        let mut c = connect(addr).await;
        let before = dump(&mut c).await;
        for (k, v) in &written {
            assert_eq!(before.get(k), Some(v));
        }
        let info: String = cmd(&mut c, &["INFO", "stats"]).await.unwrap();
        assert!(info.contains("protocol_errors:"));
        drop(c);
        within("stop", srv.stop()).await.unwrap();
        let srv = start(cfg).await;
        let mut c = connect(srv.addr).await;
        assert_eq!(dump(&mut c).await, before, "{lock:?}");
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_limits_and_shutdown() {
    for lock in for_each_lock() {
        let dir = TempDir::new("limits");
        let mut cfg = config(lock, Some(dir.path()));
        cfg.max_clients = 2;
        cfg.idle_timeout = Some(Duration::from_millis(300));
        let srv = start(cfg.clone()).await;
        let addr = srv.addr;

        // Two clients fit, the third is turned away with an error.
        let mut a = TcpStream::connect(addr).await.unwrap();
        let mut b = TcpStream::connect(addr).await.unwrap();
        for s in [&mut a, &mut b] {
            s.write_all(b"PING\r\n").await.unwrap();
            let mut buf = [0u8; 7];
            within("ping", s.read_exact(&mut buf)).await.unwrap();
            assert_eq!(&buf, b"+PONG\r\n");
        }
        let got = raw(addr, b"PING\r\n", false).await;
        assert!(
            String::from_utf8_lossy(&got).contains("max number of clients"),
            "{got:?}"
        );

        // Idle connections are closed; then there is room again.
        for s in [&mut a, &mut b] {
            let mut rest = Vec::new();
            within("idle close", s.read_to_end(&mut rest))
                .await
                .unwrap();
            assert!(rest.is_empty());
        }
        drop((a, b));
        eventually("room again", || async move {
            raw(addr, b"PING\r\nQUIT\r\n", false).await == b"+PONG\r\n+OK\r\n"
        })
        .await;

        // Shutdown with a client connected and writes just acknowledged: the client is
        // closed, the writes are in the log.
        let mut c = connect(addr).await;
        let mut p = redis::pipe();
        for i in 0..200 {
            p.cmd("SET").arg(format!("s{i}")).arg(i).ignore();
        }
        let () = within("pipeline", p.query_async(&mut c)).await.unwrap();
        within("stop", srv.stop()).await.unwrap();
        assert!(
            cmd::<String>(&mut c, &["PING"]).await.is_err(),
            "the connection was closed"
        );
        let srv = start(cfg).await;
        let mut c = connect(srv.addr).await;
        assert_eq!(cmd::<i64>(&mut c, &["DBSIZE"]).await.unwrap(), 200);
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

/// Store-level check of the SCAN cursor under concurrent inserts and deletes: keys present
/// for the whole scan are all returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_under_churn() {
    let srv = start(config(LockKind::Rwsem, None)).await;
    let mut c = connect(srv.addr).await;
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("SET").arg(format!("stable:{i}")).arg(1).ignore();
    }
    let () = within("fill", p.query_async(&mut c)).await.unwrap();
    let addr = srv.addr;
    let churn = tokio::spawn(async move {
        let mut c = connect(addr).await;
        for i in 0..2000 {
            let _: () = c.set(format!("churn:{i}"), 1).await.unwrap();
            if i % 2 == 0 {
                let _: i64 = c.del(format!("churn:{}", i / 2)).await.unwrap();
            }
        }
    });
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0u64;
    for round in 0.. {
        let (next, batch): (u64, Vec<String>) = within(
            "scan",
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(13)
                .query_async(&mut c),
        )
        .await
        .unwrap();
        seen.extend(batch.into_iter().filter(|k| k.starts_with("stable:")));
        cursor = next;
        assert!(round < 100_000);
        if cursor == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    within("churn", churn).await.unwrap();
    assert_eq!(seen.len(), 1000);
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

// The modules' own unit tests run here too, since examples' tests are not run by default.
#[test]
fn glob_and_resp_units_are_linked() {
    assert!(glob::matches(b"a*", b"abc"));
    assert_eq!(resp::parse_int(b"42"), Some(42));
}

/// `FLUSHALL` racing a `SAVE`, then writes: after a restart every write acknowledged after the
/// `FLUSHALL` is there (a `FLUSHALL` logged into the new log mid-`SAVE` used to wipe, at replay,
/// the keys written after it to shards snapshotted later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_during_save_loses_no_later_write() {
    let dir = TempDir::new("flush-save");
    let mut cfg = config(LockKind::Rwsem, Some(dir.path()));
    cfg.shards = 16;
    for round in 0..6 {
        let srv = start(cfg.clone()).await;
        let addr = srv.addr;
        let mut c = connect(addr).await;
        let mut p = redis::pipe();
        for i in 0..20_000 {
            p.cmd("SET")
                .arg(format!("fill:{i}"))
                .arg("x".repeat(64))
                .ignore();
        }
        let () = within("fill", p.query_async(&mut c)).await.unwrap();
        let save = tokio::spawn(async move {
            let mut c = connect(addr).await;
            cmd::<String>(&mut c, &["SAVE"]).await.unwrap()
        });
        tokio::task::yield_now().await;
        let _: String = cmd(&mut c, &["FLUSHALL"]).await.unwrap();
        let mut p = redis::pipe();
        for i in 0..300 {
            p.cmd("SET")
                .arg(format!("after:{round}:{i}"))
                .arg(i)
                .ignore();
        }
        let () = within("sets", p.query_async(&mut c)).await.unwrap();
        within("save", save).await.unwrap();
        drop(c);
        within("stop", srv.stop()).await.unwrap();

        let srv = start(cfg.clone()).await;
        let mut c = connect(srv.addr).await;
        let d = dump(&mut c).await;
        let after = d.keys().filter(|k| k.starts_with("after:")).count();
        assert_eq!(
            after, 300,
            "round {round}: acknowledged writes after FLUSHALL lost"
        );
        assert!(!d.keys().any(|k| k.starts_with("fill:")), "round {round}");
        let _: String = cmd(&mut c, &["FLUSHALL"]).await.unwrap();
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

/// A second server on the same `--dir` stops before it reads or changes anything there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_server_on_the_same_dir_is_refused_and_changes_nothing() {
    let dir = TempDir::new("dirlock");
    let cfg = config(LockKind::Rwsem, Some(dir.path()));
    let srv = start(cfg.clone()).await;
    let mut c = connect(srv.addr).await;
    let _: () = c.set("k", "1").await.unwrap();
    let _: String = cmd(&mut c, &["SAVE"]).await.unwrap();
    let _: () = c.set("k2", "2").await.unwrap();
    let files = |d: &Path| -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    };
    let before = files(dir.path());
    for port in [0, srv.addr.port()] {
        let mut second = cfg.clone();
        second.addr.set_port(port);
        let err = match server::start(second).await {
            Ok(_) => panic!("a second server started on the same directory"),
            Err(e) => e,
        };
        assert!(err.contains("in use"), "{err}");
    }
    assert_eq!(files(dir.path()), before);
    let _: () = c.set("k3", "3").await.unwrap();
    drop(c);
    within("stop", srv.stop()).await.unwrap();
    let srv = start(cfg).await;
    let mut c = connect(srv.addr).await;
    assert_eq!(dump(&mut c).await.len(), 3);
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// Request limits that would let a command's log record exceed what replay accepts are
/// refused at start (such a record could be acknowledged, and then the server could not
/// start again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_above_the_log_record_limit_are_refused_at_start() {
    let dir = TempDir::new("limits-rec");
    let three_gib = 3usize << 30;
    for (bulk, request) in [
        (three_gib, three_gib),
        (16 << 20, three_gib),
        (three_gib, 64 << 20),
    ] {
        let mut cfg = config(LockKind::Rwsem, Some(dir.path()));
        cfg.limits.max_bulk_len = bulk;
        cfg.limits.max_request_len = request;
        let err = match server::start(cfg).await {
            Ok(_) => panic!("started with --max-bulk-len {bulk} --max-request-len {request}"),
            Err(e) => e,
        };
        assert!(err.contains("record limit"), "{err}");
    }
    // Without a log there is no record limit.
    let mut cfg = config(LockKind::Rwsem, None);
    cfg.limits.max_request_len = three_gib;
    let srv = start(cfg).await;
    within("stop", srv.stop()).await.unwrap();
    // The defaults are fine.
    let srv = start(config(LockKind::Rwsem, Some(dir.path()))).await;
    within("stop", srv.stop()).await.unwrap();
}

/// A stream of short-lived keys cannot outrun the reclaiming: here the background sweep is
/// as good as off (one pass an hour), and the writes alone keep the dead keys bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_ttl_stream_keeps_memory_bounded() {
    let mut cfg = config(LockKind::Rwsem, None);
    cfg.sweep_interval = Duration::from_secs(3600);
    let srv = start(cfg).await;
    let mut c = connect(srv.addr).await;
    for batch in 0..30 {
        let mut p = redis::pipe();
        for i in 0..1000 {
            p.cmd("SET")
                .arg(format!("t:{batch}:{i}"))
                .arg("v")
                .arg("PX")
                .arg(1)
                .ignore();
        }
        let () = within("stream", p.query_async(&mut c)).await.unwrap();
    }
    // DBSIZE counts entries still in memory, expired or not.
    let n: i64 = cmd(&mut c, &["DBSIZE"]).await.unwrap();
    assert!(
        n < 3000,
        "{n} of 30000 one-millisecond keys still in memory"
    );
    let info: String = cmd(&mut c, &["INFO", "stats"]).await.unwrap();
    assert!(!info.contains("expired_keys:0\r"), "{info}");
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// The background sweep is adaptive: a pass says whether due keys remain, and passes go on
/// until none do (it used to stop at 1000 keys per shard per tick).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_passes_continue_while_keys_are_due() {
    use kvserver::store::{Expiry, SetOpts, Shard, Store};
    let (store, _) = Store::<lock_adapters::Rwsem<Shard>>::open(2, None).unwrap();
    // Far enough ahead that none is due while they are written (writes reclaim due keys too).
    let at = store::now_ms() + 1000;
    let opts = SetOpts {
        expiry: Expiry::At(at),
        nx: false,
        xx: false,
        get: false,
    };
    let mut seq = 0;
    for i in 0..10_000 {
        store
            .set(format!("k{i}").as_bytes(), b"v".to_vec(), opts, &mut seq)
            .await
            .unwrap();
    }
    assert!(store::now_ms() < at, "the writes took a second");
    assert_eq!(store.expired_keys(), 0);
    while store::now_ms() <= at + 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (first, more) = store.sweep(1000).await;
    assert!(more, "a pass of 1000 per shard cannot remove 10000 keys");
    assert!(first >= 1000);
    let mut total = first;
    loop {
        let (n, more) = store.sweep(1000).await;
        total += n;
        if !more {
            break;
        }
    }
    assert_eq!(total, 10_000);
    assert_eq!(store.expired_keys(), 10_000);
    assert_eq!(store.dbsize().await, 0);
}

/// Group commit: a pipeline of writes read in one go is logged with one batch write (one
/// `write(2)`), not one per command; with several connections writing at once, batches still
/// cover many records each; and every acknowledged record is in the log, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_writes_share_one_batch() {
    let info_field = |info: &str, name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("INFO lacks {name}"))
            .trim()
            .parse()
            .unwrap()
    };
    for fsync in [Fsync::Everysec, Fsync::Always] {
        let dir = TempDir::new("batch");
        let mut cfg = config(LockKind::Rwsem, Some(dir.path()));
        cfg.persistence.as_mut().unwrap().fsync = fsync;
        let srv = start(cfg.clone()).await;
        let mut c = connect(srv.addr).await;
        let info: String = cmd(&mut c, &["INFO", "persistence"]).await.unwrap();
        let batches0 = info_field(&info, "aof_batches_written");

        // 100 SETs in one write on a raw socket: one read, one batch (a second one if the read
        // happens to be split).
        let mut req = Vec::new();
        for i in 0..100 {
            let k = format!("p{i:03}");
            req.extend_from_slice(
                format!("*3\r\n$3\r\nSET\r\n$4\r\n{k}\r\n$1\r\nv\r\n").as_bytes(),
            );
        }
        req.extend_from_slice(b"QUIT\r\n");
        let got = raw(srv.addr, &req, false).await;
        assert_eq!(got, b"+OK\r\n".repeat(101));
        let info: String = cmd(&mut c, &["INFO", "persistence"]).await.unwrap();
        let batches = info_field(&info, "aof_batches_written") - batches0;
        assert!(
            (1..=2).contains(&batches),
            "{fsync:?}: {batches} batches for one pipeline"
        );

        // Many connections at once: fewer batches than records.
        let addr = srv.addr;
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                tokio::spawn(async move {
                    let mut c = connect(addr).await;
                    for round in 0..10 {
                        let mut p = redis::pipe();
                        for i in 0..50 {
                            p.cmd("SET")
                                .arg(format!("w{w}:{round}:{i}"))
                                .arg(i)
                                .ignore();
                        }
                        let () = within("pipe", p.query_async(&mut c)).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            within("writer", t).await.unwrap();
        }
        let info: String = cmd(&mut c, &["INFO", "persistence"]).await.unwrap();
        let records = info_field(&info, "aof_records_written");
        let batches = info_field(&info, "aof_batches_written");
        assert_eq!(records, 100 + 8 * 10 * 50);
        assert!(
            batches <= records / 10,
            "{fsync:?}: {batches} batches, {records} records"
        );
        if fsync == Fsync::Always {
            assert_eq!(
                info_field(&info, "aof_fsyncs"),
                batches,
                "one fsync per batch"
            );
        }
        drop(c);
        within("stop", srv.stop()).await.unwrap();
        let report = aof::load(dir.path(), |_| {}).unwrap();
        assert_eq!(report.log_records, records);
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    }
}

/// Sends all of `req` before reading anything (as redis-py's `pipeline.execute()` does with
/// one `sendall()`), then reads until `replies` CRLF-terminated replies came; returns them.
async fn send_all_then_read(addr: SocketAddr, req: &[u8], replies: usize) -> Vec<u8> {
    let deadline = Duration::from_secs(120);
    let mut s = TcpStream::connect(addr).await.unwrap();
    tokio::time::timeout(deadline, s.write_all(req))
        .await
        .expect("the server stopped reading the pipeline (its replies are not being taken)")
        .unwrap();
    let mut got = Vec::new();
    let mut lines = 0;
    let mut buf = vec![0u8; 1 << 16];
    while lines < replies {
        let n = tokio::time::timeout(deadline, s.read(&mut buf))
            .await
            .expect("replies stalled")
            .unwrap();
        assert!(n > 0, "closed after {lines} of {replies} replies");
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// Issue 20, defect 2: a pipeline of 1M GETs and one of 1M SETs, each sent whole before the
/// client reads a byte, are answered in full (the server reads and writes concurrently).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_pipeline_sent_before_reading_is_answered() {
    let dir = TempDir::new("huge-pipeline");
    let srv = start(config(LockKind::Rwsem, Some(dir.path()))).await;
    let mut c = connect(srv.addr).await;
    let () = cmd(&mut c, &["SET", "k", "value"]).await.unwrap();
    const N: usize = 1_000_000;
    let req = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".repeat(N);
    let got = send_all_then_read(srv.addr, &req, 2 * N).await;
    assert_eq!(got.len(), N * b"$5\r\nvalue\r\n".len());
    assert!(got.starts_with(b"$5\r\nvalue\r\n$5\r\nvalue\r\n"));
    let mut req = Vec::with_capacity(N * 40);
    for i in 0..N {
        let k = format!("s{i:07}");
        req.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n$8\r\n{k}\r\n$1\r\nv\r\n").as_bytes());
    }
    let got = send_all_then_read(srv.addr, &req, N).await;
    assert_eq!(got, b"+OK\r\n".repeat(N));
    assert_eq!(cmd::<i64>(&mut c, &["DBSIZE"]).await.unwrap(), N as i64 + 1);
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// A client that sends without ever reading is cut off once its unread replies pass the
/// output buffer limit for the grace period (Redis' `client-output-buffer-limit`), and the
/// server goes on serving the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_cut_off_at_the_output_limit() {
    let mut cfg = config(LockKind::Rwsem, None);
    cfg.output_buffer_limit = 1 << 20;
    cfg.output_buffer_grace = Duration::from_millis(500);
    let srv = start(cfg).await;
    let mut c = connect(srv.addr).await;
    let () = cmd(&mut c, &["SET", "big", &"x".repeat(100_000)])
        .await
        .unwrap();
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let req = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(100);
    let cut = within("cut off", async {
        loop {
            if s.write_all(&req).await.is_err() {
                break;
            }
            let info: String = cmd(&mut c, &["INFO", "stats"]).await.unwrap();
            if info.contains("client_output_buffer_limit_disconnections:1") {
                break;
            }
        }
    });
    cut.await;
    let info: String = cmd(&mut c, &["INFO", "stats"]).await.unwrap();
    assert!(
        info.contains("client_output_buffer_limit_disconnections:1"),
        "{info}"
    );
    assert_eq!(cmd::<String>(&mut c, &["PING"]).await.unwrap(), "PONG");
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// `SHUTDOWN`: `SAVE` writes a snapshot first, the server stops on its own with the log
/// flushed, and a restart has the data; a bad option is an error and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_command_stops_the_server() {
    for (opt, snapshot) in [("SAVE", true), ("NOSAVE", false)] {
        let dir = TempDir::new("shutdown");
        let cfg = config(LockKind::Rwsem, Some(dir.path()));
        let mut srv = start(cfg.clone()).await;
        let mut c = connect(srv.addr).await;
        let () = cmd(&mut c, &["SET", "k", "v"]).await.unwrap();
        let e = cmd::<()>(&mut c, &["SHUTDOWN", "SOON"]).await.unwrap_err();
        assert!(e.to_string().contains("syntax error"), "{e}");
        assert!(cmd::<()>(&mut c, &["SHUTDOWN", opt]).await.is_err());
        within("the server stops", srv.wait()).await.unwrap();
        let dumps = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                let n = e.as_ref().unwrap().file_name();
                let n = n.to_string_lossy();
                n.starts_with("dump-") && n.ends_with(".kvs")
            })
            .count();
        assert_eq!(dumps > 0, snapshot, "SHUTDOWN {opt}: {dumps} snapshots");
        let srv = start(cfg).await;
        let mut c = connect(srv.addr).await;
        let v: String = cmd(&mut c, &["GET", "k"]).await.unwrap();
        assert_eq!(v, "v");
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

/// `kvserver --help` starts with the server's own description.
#[test]
fn help_describes_the_server() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kvserver"))
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        text.starts_with("kvserver: a Redis-protocol (RESP2 and RESP3) key-value server"),
        "{text}"
    );
    assert!(text.contains("--client-output-buffer-limit"), "{text}");
}

/// A pipeline whose replies pass the output limit many times over, sent whole and then
/// half-closed: the server pauses reading while the client takes replies, and every request
/// is answered before the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_over_the_output_limit_is_answered_in_full() {
    let mut cfg = config(LockKind::Rwsem, None);
    cfg.output_buffer_limit = 64 << 10;
    let srv = start(cfg).await;
    let mut c = connect(srv.addr).await;
    let () = cmd(&mut c, &["SET", "v", &"y".repeat(1000)]).await.unwrap();
    let n = 5000;
    let mut req = b"*2\r\n$3\r\nGET\r\n$1\r\nv\r\n".repeat(n);
    req.extend_from_slice(b"PING\r\n");
    let got = raw(srv.addr, &req, true).await;
    let one = format!("$1000\r\n{}\r\n", "y".repeat(1000));
    assert_eq!(got.len(), n * one.len() + b"+PONG\r\n".len());
    assert!(got.ends_with(b"+PONG\r\n"));
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// `--rwsem-policy`: a policy string the server cannot read, or one given with another
/// lock, is refused before it listens; a good one is the policy it prints and runs.
#[test]
fn rwsem_policy_flag() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kvserver"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--rwsem-policy", "pass-bound=lots"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`lots`: not a number"), "{err}");
    let out = run(&["--lock", "tokio", "--rwsem-policy", "fifo"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--rwsem-policy needs --lock rwsem"), "{err}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_kvserver"))
        .args(["--port", "0", "--appendonly", "no"])
        .args(["--rwsem-policy", "fifo,writer-spin=0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let expected = format!(
        "kvserver: shard lock policy {:?}",
        async_rwsem::Policy::fifo().writer_spin(std::time::Duration::ZERO)
    );
    assert_eq!(first, expected);
    assert!(second.contains("listening on 127.0.0.1:"), "{second}");
}
