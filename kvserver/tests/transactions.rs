//! `MULTI`/`EXEC`/`DISCARD`/`WATCH`/`UNWATCH`: Redis' semantics (exact replies), atomicity
//! across shards under concurrent readers, and the transaction as one record of the log
//! (replayed whole; a torn one dropped whole). Every test runs once per `--lock` choice; with
//! `--features lockdep` the crate's lockdep checks the order in which `EXEC` takes the shards.

mod support;

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use kvserver::aof::Fsync;
use kvserver::lock::LockKind;
use support::*;

/// A reply as text, for exact comparisons (errors as `ERR ...`).
async fn r(c: &mut MultiplexedConnection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match within(args[0], cmd.query_async::<Value>(c)).await {
        Ok(v) => show(&v),
        Err(e) => format!(
            "{} {}",
            e.code().unwrap_or("?"),
            e.detail().unwrap_or_default()
        ),
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Int(i) => i.to_string(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::ServerError(e) => format!("{} {}", e.code(), e.details().unwrap_or_default()),
        other => format!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_exec_discard_reply_as_redis() {
    for lock in LockKind::ALL {
        let srv = start(support::config(lock, None, Fsync::Everysec)).await;
        let mut c = connect(srv.addr).await;
        let mut other = connect(srv.addr).await;
        // Queued, then run in order; a run-time error does not stop the others (raw bytes: the
        // client library would turn the whole array into its error).
        assert_eq!(r(&mut c, &["SET", "s", "text"]).await, "OK");
        let mut raw = within("connect", TcpStream::connect(srv.addr))
            .await
            .unwrap();
        let req = b"MULTI\r\nSET a 1\r\nINCR a\r\nINCR s\r\nMGET a s nokey\r\n";
        raw.write_all(req).await.unwrap();
        let want: &[u8] = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n";
        let mut got = vec![0u8; want.len()];
        within("queued", raw.read_exact(&mut got)).await.unwrap();
        assert_eq!(got, want);
        // Another client sees nothing of a queued transaction, and its CLIENT LIST line.
        assert_eq!(r(&mut other, &["GET", "a"]).await, "nil");
        let list = r(&mut other, &["CLIENT", "LIST"]).await;
        assert!(
            list.contains(" flags=x db=0 sub=0 psub=0 ssub=0 multi=4 "),
            "{list}"
        );
        raw.write_all(b"EXEC\r\n").await.unwrap();
        let want: &[u8] = b"*4\r\n+OK\r\n:2\r\n-ERR value is not an integer or out of range\r\n*3\r\n$1\r\n2\r\n$4\r\ntext\r\n$-1\r\n";
        let mut got = vec![0u8; want.len()];
        within("exec", raw.read_exact(&mut got)).await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "{lock:?}"
        );
        let list = r(&mut other, &["CLIENT", "LIST"]).await;
        assert!(!list.contains("multi=4"), "{list}");
        // An error while queueing (unknown command, wrong arity, a command not allowed in a
        // transaction) dooms it: EXECABORT, nothing run.
        for bad in [&["NOSUCH", "x"][..], &["GET"], &["SAVE"]] {
            assert_eq!(r(&mut c, &["MULTI"]).await, "OK");
            assert_eq!(r(&mut c, &["SET", "doomed", "1"]).await, "QUEUED");
            let e = r(&mut c, bad).await;
            assert!(e.starts_with("ERR "), "{bad:?}: {e}");
            assert_eq!(r(&mut c, &["SET", "doomed", "2"]).await, "QUEUED");
            assert_eq!(
                r(&mut c, &["EXEC"]).await,
                "EXECABORT Transaction discarded because of previous errors.",
                "{bad:?}"
            );
            assert_eq!(r(&mut c, &["GET", "doomed"]).await, "nil");
        }
        // The errors of the commands themselves.
        assert_eq!(r(&mut c, &["EXEC"]).await, "ERR EXEC without MULTI");
        assert_eq!(r(&mut c, &["DISCARD"]).await, "ERR DISCARD without MULTI");
        assert_eq!(r(&mut c, &["MULTI"]).await, "OK");
        assert_eq!(
            r(&mut c, &["MULTI"]).await,
            "ERR MULTI calls can not be nested"
        );
        assert_eq!(
            r(&mut c, &["WATCH", "a"]).await,
            "ERR WATCH inside MULTI is not allowed"
        );
        assert_eq!(r(&mut c, &["SET", "d", "1"]).await, "QUEUED");
        assert_eq!(r(&mut c, &["DISCARD"]).await, "OK");
        assert_eq!(r(&mut c, &["GET", "d"]).await, "nil");
        assert_eq!(r(&mut c, &["MULTI"]).await, "OK");
        assert_eq!(r(&mut c, &["EXEC"]).await, "[]");
        // FLUSHALL, KEYS and DBSIZE (every shard) in a transaction.
        assert_eq!(r(&mut c, &["MULTI"]).await, "OK");
        for w in [
            &["FLUSHALL"][..],
            &["SET", "k1", "v"],
            &["DBSIZE"],
            &["KEYS", "*"],
        ] {
            assert_eq!(r(&mut c, w).await, "QUEUED");
        }
        assert_eq!(r(&mut c, &["EXEC"]).await, "[OK, OK, 1, [k1]]");
        srv.stop().await.unwrap();
    }
}

/// A `WATCH` case: the key's setup, what another client does, whether `EXEC` then runs.
type Case<'a> = (&'a [&'a str], &'a [&'a [&'a str]], bool);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_aborts_exec_on_any_change() {
    for lock in LockKind::ALL {
        let srv = start(support::config(lock, None, Fsync::Everysec)).await;
        let mut c = connect(srv.addr).await;
        let mut other = connect(srv.addr).await;
        let ctx = format!("{lock:?}");
        // (what the other client does, whether EXEC runs)
        let cases: &[Case] = &[
            (&["SET", "w", "1"], &[&["SET", "w", "2"]], false),
            (&["SET", "w", "1"], &[&["SET", "w", "1"]], false), // the same value: still a change
            (&["SET", "w", "1"], &[&["SET", "other", "1"]], true),
            (&["SET", "w", "1"], &[&["EXPIRE", "w", "100"]], false),
            (&["SET", "w", "1"], &[&["DEL", "w"]], false),
            (&["SET", "w", "1"], &[&["RENAME", "w", "v"]], false),
            (&["SET", "w", "1"], &[&["FLUSHALL"]], false),
            (&["DEL", "w"], &[&["FLUSHALL"]], true), // nothing to flush: not touched
            (&["DEL", "w"], &[&["SET", "w", "x"]], false),
            (&["DEL", "w"], &[&["MSET", "a", "1", "w", "2"]], false),
            (&["DEL", "w"], &[&["LPUSH", "w", "x"]], false),
            (
                &["SET", "w", "1"],
                &[&["MULTI"], &["SET", "w", "3"], &["EXEC"]],
                false,
            ),
            (&["SET", "w", "1"], &[&["GET", "w"]], true),
            // SMOVE changes the destination only when the member is new there (as Redis)
            (
                &["SADD", "w", "a"],
                &[&["SADD", "src", "a"], &["SMOVE", "src", "w", "a"]],
                true,
            ),
            (
                &["SADD", "w", "a"],
                &[&["SADD", "src", "b"], &["SMOVE", "src", "w", "b"]],
                false,
            ),
        ];
        for (setup, change, runs) in cases {
            r(&mut c, &["FLUSHALL"]).await;
            r(&mut c, setup).await;
            assert_eq!(r(&mut c, &["WATCH", "w", "x"]).await, "OK");
            for w in *change {
                r(&mut other, w).await;
            }
            assert_eq!(r(&mut c, &["MULTI"]).await, "OK");
            assert_eq!(r(&mut c, &["SET", "done", "yes"]).await, "QUEUED");
            let want = if *runs { "[OK]" } else { "nil" };
            assert_eq!(r(&mut c, &["EXEC"]).await, want, "{ctx} {change:?}");
            assert_eq!(
                r(&mut c, &["EXISTS", "done"]).await,
                if *runs { "1" } else { "0" }
            );
        }
        // After EXEC (run or aborted) nothing is watched any more.
        r(&mut c, &["WATCH", "w"]).await;
        r(&mut other, &["SET", "w", "again"]).await;
        r(&mut c, &["MULTI"]).await;
        assert_eq!(r(&mut c, &["EXEC"]).await, "nil");
        r(&mut other, &["SET", "w", "again2"]).await;
        r(&mut c, &["MULTI"]).await;
        assert_eq!(r(&mut c, &["EXEC"]).await, "[]");
        // UNWATCH and DISCARD forget the watches.
        for forget in [&["UNWATCH"][..], &["DISCARD"]] {
            r(&mut c, &["WATCH", "w"]).await;
            if forget == ["DISCARD"] {
                r(&mut c, &["MULTI"]).await;
            }
            assert_eq!(r(&mut c, forget).await, "OK");
            r(&mut other, &["SET", "w", "changed"]).await;
            r(&mut c, &["MULTI"]).await;
            assert_eq!(r(&mut c, &["EXEC"]).await, "[]", "{forget:?}");
        }
        // A watched key that expires meanwhile aborts; one already expired does not.
        r(&mut c, &["SET", "w", "1", "PX", "60"]).await;
        r(&mut c, &["WATCH", "w"]).await;
        tokio::time::sleep(Duration::from_millis(120)).await;
        r(&mut c, &["MULTI"]).await;
        assert_eq!(r(&mut c, &["EXEC"]).await, "nil", "{ctx} expiry");
        r(&mut c, &["SET", "w", "1", "PX", "10"]).await;
        tokio::time::sleep(Duration::from_millis(40)).await;
        r(&mut c, &["WATCH", "w"]).await;
        r(&mut c, &["MULTI"]).await;
        assert_eq!(r(&mut c, &["EXEC"]).await, "[]", "{ctx} stale");
        srv.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_is_atomic_across_shards() {
    // Transfers between keys of different shards, while another client reads them all with
    // separate GETs inside its own transactions and with MGET: the sum never moves.
    for lock in LockKind::ALL {
        let mut cfg = support::config(lock, None, Fsync::Everysec);
        cfg.shards = 8;
        let srv = start(cfg).await;
        let keys: Vec<String> = (0..16).map(|i| format!("acct{i}")).collect();
        let mut c = connect(srv.addr).await;
        for k in &keys {
            r(&mut c, &["SET", k, "100"]).await;
        }
        let addr = srv.addr;
        let writers: Vec<_> = (0..3u64)
            .map(|w| {
                let keys = keys.clone();
                tokio::spawn(async move {
                    let mut c = connect(addr).await;
                    for i in 0..150u64 {
                        let a = &keys[((i * 7 + w * 3) % 16) as usize];
                        let b = &keys[((i * 5 + w + 1) % 16) as usize];
                        let mut p = redis::pipe();
                        p.atomic()
                            .cmd("DECRBY")
                            .arg(a)
                            .arg(3)
                            .cmd("INCRBY")
                            .arg(b)
                            .arg(3);
                        let _: Vec<i64> = within("exec", p.query_async(&mut c)).await.unwrap();
                    }
                })
            })
            .collect();
        let mut reader = connect(addr).await;
        let mut checks = 0;
        while !writers.iter().all(|w| w.is_finished()) {
            let mut p = redis::pipe();
            p.atomic();
            for k in &keys {
                p.cmd("GET").arg(k);
            }
            let vals: Vec<i64> = within("read", p.query_async(&mut reader)).await.unwrap();
            assert_eq!(vals.iter().sum::<i64>(), 1600, "{lock:?}: {vals:?}");
            let vals: Vec<i64> = within(
                "mget",
                redis::cmd("MGET").arg(&keys).query_async(&mut reader),
            )
            .await
            .unwrap();
            assert_eq!(vals.iter().sum::<i64>(), 1600, "{lock:?}: {vals:?}");
            checks += 1;
        }
        for w in writers {
            w.await.unwrap();
        }
        assert!(checks > 0);
        srv.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_is_one_record_replayed_whole() {
    for lock in LockKind::ALL {
        let dir = TempDir::new("tx-log");
        let srv = start(support::config(lock, Some(dir.path()), Fsync::Always)).await;
        let mut c = connect(srv.addr).await;
        r(&mut c, &["SET", "before", "1"]).await;
        let size_before = std::fs::metadata(dir.path().join("appendonly.aof"))
            .unwrap()
            .len();
        // Two transactions over several shards and types; the last one is torn below.
        for (tag, n) in [("t1", 1), ("t2", 2)] {
            let mut p = redis::pipe();
            p.atomic();
            for i in 0..12 {
                p.cmd("SET").arg(format!("{tag}-k{i}")).arg(n);
            }
            p.cmd("RPUSH").arg(format!("{tag}-list")).arg("a").arg("b");
            p.cmd("INCR").arg("before");
            p.cmd("EXPIRE").arg(format!("{tag}-k0")).arg(1000);
            let _: Value = within("exec", p.query_async(&mut c)).await.unwrap();
        }
        srv.stop().await.unwrap();
        let aof = dir.path().join("appendonly.aof");
        let data = std::fs::read(&aof).unwrap();
        // Each transaction is one record: the log grew by exactly two records' worth of
        // framing after `before`... and the last one can be cut anywhere inside.
        let len = data.len() as u64;
        assert!(len > size_before);
        // Replayed whole.
        let srv = start(support::config(lock, Some(dir.path()), Fsync::Always)).await;
        let mut c = connect(srv.addr).await;
        assert_eq!(r(&mut c, &["GET", "before"]).await, "3");
        assert_eq!(r(&mut c, &["GET", "t2-k11"]).await, "2");
        assert_eq!(r(&mut c, &["LRANGE", "t2-list", "0", "-1"]).await, "[a, b]");
        let ttl: i64 = r(&mut c, &["TTL", "t2-k0"]).await.parse().unwrap();
        assert!((990..=1000).contains(&ttl), "{ttl}");
        srv.stop().await.unwrap();
        // The last record torn at several points: the whole transaction goes, nothing of it
        // stays; the one before it stays whole.
        let last_len = {
            // the last transaction's record is the last thing in the file: find it by
            // replaying the framing
            let mut at = 16usize;
            let mut last = 0usize;
            while at < data.len() {
                last = at;
                let n = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
                at += 12 + n;
            }
            data.len() - last
        };
        for cut in [1, last_len / 2, last_len - 13] {
            std::fs::write(&aof, &data[..data.len() - cut]).unwrap();
            let srv = start(support::config(lock, Some(dir.path()), Fsync::Always)).await;
            let mut c = connect(srv.addr).await;
            assert_eq!(
                r(&mut c, &["GET", "before"]).await,
                "2",
                "{lock:?} cut {cut}"
            );
            assert_eq!(r(&mut c, &["GET", "t1-k11"]).await, "1");
            for i in 0..12 {
                assert_eq!(r(&mut c, &["EXISTS", &format!("t2-k{i}")]).await, "0");
            }
            assert_eq!(r(&mut c, &["EXISTS", "t2-list"]).await, "0");
            srv.stop().await.unwrap();
        }
    }
}
