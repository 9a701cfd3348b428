//! The memory limit as a client sees it: `CONFIG SET maxmemory` and its policy, `INFO memory`,
//! eviction by each policy, `OOM` under `noeviction` (also inside `MULTI`), `OBJECT FREQ` and
//! `IDLETIME`, and evictions in the log (a restart agrees).

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::support::*;
use kvserver::aof::Fsync;
use kvserver::lock::LockKind;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A field of `INFO memory` (or `stats`), as a number.
async fn info_field(c: &mut MultiplexedConnection, section: &str, field: &str) -> u64 {
    let info: String = cmd(c, &["INFO", section]).await.unwrap();
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"));
    line.trim().parse().unwrap()
}

async fn used(c: &mut MultiplexedConnection) -> u64 {
    info_field(c, "memory", "used_memory_dataset").await
        + info_field(c, "memory", "used_memory_startup").await
}

/// Sets the limit to what is used now plus `room` bytes.
async fn limit_above_now(c: &mut MultiplexedConnection, room: u64) -> u64 {
    let max = used(c).await + room;
    let _: () = cmd(c, &["CONFIG", "SET", "maxmemory", &max.to_string()])
        .await
        .unwrap();
    max
}

async fn set_policy(c: &mut MultiplexedConnection, policy: &str) {
    let _: () = cmd(c, &["CONFIG", "SET", "maxmemory-policy", policy])
        .await
        .unwrap();
}

async fn keys(c: &mut MultiplexedConnection) -> BTreeSet<String> {
    let k: Vec<String> = cmd(c, &["KEYS", "*"]).await.unwrap();
    k.into_iter().collect()
}

fn value(n: usize) -> String {
    format!("{n:0>100}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_and_its_policy_are_set_and_shown_as_redis_shows_them() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
    let mut c = connect(srv.addr).await;
    let conn = c.clone();
    let get = |name: &'static str| {
        let mut c = conn.clone();
        async move {
            let v: Vec<String> = cmd(&mut c, &["CONFIG", "GET", name]).await.unwrap();
            v[1].clone()
        }
    };
    assert_eq!(get("maxmemory").await, "0");
    assert_eq!(get("maxmemory-policy").await, "noeviction");
    assert_eq!(get("maxmemory-samples").await, "5");
    let _: () = cmd(&mut c, &["CONFIG", "SET", "maxmemory", "10mb"])
        .await
        .unwrap();
    assert_eq!(get("maxmemory").await, "10485760");
    let _: () = cmd(&mut c, &["CONFIG", "SET", "maxmemory", "2g"])
        .await
        .unwrap();
    assert_eq!(get("maxmemory").await, "2000000000");
    set_policy(&mut c, "ALLKEYS-LFU").await;
    assert_eq!(get("maxmemory-policy").await, "allkeys-lfu");
    let _: () = cmd(&mut c, &["CONFIG", "SET", "maxmemory-samples", "10"])
        .await
        .unwrap();
    assert_eq!(get("maxmemory-samples").await, "10");
    let e = cmd::<()>(&mut c, &["CONFIG", "SET", "maxmemory-policy", "lru"])
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("argument(s) must be one of the following"),
        "{e}"
    );
    let e = cmd::<()>(&mut c, &["CONFIG", "SET", "maxmemory", "ten"])
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("argument must be a memory value"),
        "{e}"
    );
    let e = cmd::<()>(&mut c, &["CONFIG", "SET", "maxmemory-samples", "0"])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("between 1 and 64"), "{e}");
    let info: String = cmd(&mut c, &["INFO", "memory"]).await.unwrap();
    for field in [
        "used_memory:",
        "used_memory_human:",
        "used_memory_rss:",
        "used_memory_peak:",
        "used_memory_dataset:",
        "used_memory_overhead:",
        "used_memory_startup:",
        "total_system_memory:",
        "maxmemory:2000000000\r\n",
        "maxmemory_human:1.86G\r\n",
        "maxmemory_policy:allkeys-lfu\r\n",
        "mem_fragmentation_ratio:",
    ] {
        assert!(info.contains(field), "no {field} in {info}");
    }
    // The dataset figure follows the data: it grows with a value and is back where it was
    // once the key is deleted.
    let before = info_field(&mut c, "memory", "used_memory_dataset").await;
    let _: () = cmd(&mut c, &["SET", "k", &"x".repeat(10_000)])
        .await
        .unwrap();
    let with = info_field(&mut c, "memory", "used_memory_dataset").await;
    assert!(with >= before + 10_000, "{before} -> {with}");
    // `MEMORY USAGE` is the same estimate, key by key.
    let usage: u64 = cmd(&mut c, &["MEMORY", "USAGE", "k"]).await.unwrap();
    assert_eq!(with, before + usage);
    let _: () = cmd(&mut c, &["RPUSH", "l", "a", "b", "c"]).await.unwrap();
    let _: () = cmd(&mut c, &["DEL", "k", "l"]).await.unwrap();
    assert_eq!(
        info_field(&mut c, "memory", "used_memory_dataset").await,
        before
    );
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// Under `noeviction`, over the limit: `denyoom` commands get Redis' `OOM` error (queued in
/// `MULTI` too, which dooms the transaction; an `EXEC` of a queued one is aborted), reads and
/// deletes still run, and once a delete made room writes are taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noeviction_refuses_writes_that_add_data_over_the_limit() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
    let mut c = connect(srv.addr).await;
    let mut other = connect(srv.addr).await;
    let _: () = cmd(&mut c, &["SET", "first", "v"]).await.unwrap();
    let _: () = cmd(&mut other, &["MULTI"]).await.unwrap();
    let _: String = cmd(&mut other, &["SET", "queued", "v"]).await.unwrap();
    limit_above_now(&mut c, 50_000).await;
    let mut n = 0;
    let err = loop {
        match cmd::<()>(&mut c, &["SET", &format!("k{n}"), &value(n)]).await {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 10_000, "no OOM after {n} keys");
    };
    assert!(n > 10, "refused after {n} keys");
    assert_eq!(err.code(), Some("OOM"), "{err}");
    assert_eq!(err.detail(), Some(&OOM["OOM ".len()..]), "{err}");
    // Not denyoom: reads, and what frees memory.
    let v: String = cmd(&mut c, &["GET", "k0"]).await.unwrap();
    assert_eq!(v, value(0));
    let e = cmd::<i64>(&mut c, &["RPUSH", "l", "x"]).await.unwrap_err();
    assert_eq!(e.code(), Some("OOM"));
    // The transaction queued before: its EXEC is aborted, saying why.
    let e = cmd::<Vec<String>>(&mut other, &["EXEC"]).await.unwrap_err();
    assert_eq!(e.code(), Some("EXECABORT"), "{e}");
    assert_eq!(
        e.detail(),
        Some(&*format!("Transaction discarded because of: {OOM}")),
    );
    // A write queued now is refused and dooms its transaction.
    let _: () = cmd(&mut c, &["MULTI"]).await.unwrap();
    let e = cmd::<String>(&mut c, &["SET", "x", "y"]).await.unwrap_err();
    assert_eq!(e.code(), Some("OOM"));
    let _: String = cmd(&mut c, &["GET", "k0"]).await.unwrap();
    let e = cmd::<Vec<String>>(&mut c, &["EXEC"]).await.unwrap_err();
    assert!(e.to_string().contains("previous errors"), "{e}");
    let dbsize: i64 = cmd(&mut c, &["DBSIZE"]).await.unwrap();
    assert_eq!(
        dbsize,
        n as i64 + 1,
        "nothing was evicted, nothing queued ran"
    );
    let gone: Vec<String> = (0..n / 2).map(|i| format!("k{i}")).collect();
    let mut del = vec!["DEL"];
    del.extend(gone.iter().map(String::as_str));
    let _: i64 = cmd(&mut c, &del).await.unwrap();
    let _: () = cmd(&mut c, &["SET", "again", "v"]).await.unwrap();
    assert_eq!(info_field(&mut c, "stats", "evicted_keys").await, 0);
    drop((c, other));
    within("stop", srv.stop()).await.unwrap();
}

/// Fills a server under `policy` well past `room` bytes of limit: the estimate stays within
/// the limit (plus one value), keys are evicted, and every write is taken.
async fn fill_past_the_limit(c: &mut MultiplexedConnection, policy: &str, prefix: &str) -> u64 {
    set_policy(c, policy).await;
    let max = limit_above_now(c, 200_000).await;
    for n in 0..4000 {
        let _: () = cmd(c, &["SET", &format!("{prefix}{n}"), &value(n)])
            .await
            .unwrap();
    }
    assert!(used(c).await <= max + 1000, "over the limit");
    let evicted = info_field(c, "stats", "evicted_keys").await;
    assert!(evicted > 1000, "{evicted} evicted");
    max
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allkeys_random_stays_within_the_limit() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
    let mut c = connect(srv.addr).await;
    fill_past_the_limit(&mut c, "allkeys-random", "r").await;
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// The volatile policies evict only keys with a deadline: the others all stay, and once no
/// key with a deadline is left, writes get `OOM`. `volatile-ttl` takes the soonest deadlines
/// first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volatile_policies_evict_only_keys_with_a_deadline() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
        let mut c = connect(srv.addr).await;
        set_policy(&mut c, policy).await;
        for n in 0..200 {
            let _: () = cmd(&mut c, &["SET", &format!("keep{n}"), &value(n)])
                .await
                .unwrap();
        }
        let max = limit_above_now(&mut c, 60_000).await;
        // Deadlines far off, later for later keys: about three times what fits.
        let n = 600;
        for i in 0..n {
            let ttl = (100_000 + i).to_string();
            let _: () = cmd(&mut c, &["SET", &format!("v{i}"), &value(i), "EX", &ttl])
                .await
                .unwrap();
        }
        assert!(used(&mut c).await <= max + 1000, "{policy}: over the limit");
        let k = keys(&mut c).await;
        let kept = k.iter().filter(|k| k.starts_with("keep")).count();
        assert_eq!(kept, 200, "{policy}: a key without a deadline was evicted");
        let volatile: Vec<usize> = k
            .iter()
            .filter_map(|k| k.strip_prefix('v')?.parse().ok())
            .collect();
        assert!(volatile.len() < n / 2, "{policy}: {} left", volatile.len());
        if policy == "volatile-ttl" {
            // The last ones written (the latest deadlines) outlived the early ones.
            let early = volatile.iter().filter(|&&i| i < n / 4).count();
            let late = volatile.iter().filter(|&&i| i >= 3 * n / 4).count();
            assert!(late > 2 * early, "{policy}: early {early}, late {late}");
        }
        // Keys without a deadline: the volatile ones are evicted for them until none is
        // left, then writes are refused.
        let mut m = 0;
        let err = loop {
            match cmd::<()>(&mut c, &["SET", &format!("p{m}"), &value(m)]).await {
                Ok(()) => m += 1,
                Err(e) => break e,
            }
            assert!(m < 10_000, "{policy}: no OOM after {m} keys");
        };
        assert_eq!(err.code(), Some("OOM"), "{policy}: {err}");
        let k = keys(&mut c).await;
        assert!(k.iter().all(|k| !k.starts_with('v')), "{policy}: {k:?}");
        assert_eq!(
            k.len(),
            200 + m,
            "{policy}: only keys with a deadline evicted"
        );
        drop(c);
        within("stop", srv.stop()).await.unwrap();
    }
}

/// `allkeys-lfu`: keys read often outlive keys written once, and `OBJECT FREQ` shows their
/// counters (`IDLETIME` is refused under an LFU policy, as in Redis).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allkeys_lfu_keeps_the_keys_read_often() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
    let mut c = connect(srv.addr).await;
    set_policy(&mut c, "allkeys-lfu").await;
    for n in 0..200 {
        let _: () = cmd(&mut c, &["SET", &format!("hot{n}"), &value(n)])
            .await
            .unwrap();
    }
    let fresh: i64 = cmd(&mut c, &["OBJECT", "FREQ", "hot0"]).await.unwrap();
    // 5 for a new key (4 if a minute began since: the counter decays by one a minute).
    assert!((4..=5).contains(&fresh), "a new key's counter: {fresh}");
    for _ in 0..30 {
        for n in 0..200 {
            let _: String = cmd(&mut c, &["GET", &format!("hot{n}")]).await.unwrap();
        }
    }
    let hot: i64 = cmd(&mut c, &["OBJECT", "FREQ", "hot0"]).await.unwrap();
    assert!(hot > 5, "counter {hot} after 30 reads");
    let e = cmd::<i64>(&mut c, &["OBJECT", "IDLETIME", "hot0"])
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("LFU maxmemory policy is selected"),
        "{e}"
    );
    fill_past_the_limit(&mut c, "allkeys-lfu", "cold").await;
    let k = keys(&mut c).await;
    let kept = k.iter().filter(|k| k.starts_with("hot")).count();
    assert!(kept >= 190, "{kept} of 200 keys read often kept");
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// `allkeys-lru`: keys read after the others were written outlive them (the LRU clock counts
/// seconds, so the test waits two), and `OBJECT IDLETIME` shows the idle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allkeys_lru_keeps_the_keys_read_last() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
    let mut c = connect(srv.addr).await;
    set_policy(&mut c, "allkeys-lru").await;
    for n in 0..3000 {
        let key = if n % 15 == 0 { "hot" } else { "cold" };
        let _: () = cmd(&mut c, &["SET", &format!("{key}{n}"), &value(n)])
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let idle: i64 = cmd(&mut c, &["OBJECT", "IDLETIME", "cold1"]).await.unwrap();
    assert!(idle >= 1, "idle {idle}s after a 2s wait");
    for n in (0..3000).step_by(15) {
        let _: String = cmd(&mut c, &["GET", &format!("hot{n}")]).await.unwrap();
    }
    let idle: i64 = cmd(&mut c, &["OBJECT", "IDLETIME", "hot0"]).await.unwrap();
    assert!(idle <= 1, "idle {idle}s just after a read");
    // Room for about a third of the cold keys more: evictions take cold keys.
    let max = limit_above_now(&mut c, 0).await;
    for n in 0..800 {
        let _: () = cmd(&mut c, &["SET", &format!("new{n}"), &value(n)])
            .await
            .unwrap();
    }
    assert!(used(&mut c).await <= max + 1000);
    let k = keys(&mut c).await;
    let kept = k.iter().filter(|k| k.starts_with("hot")).count();
    assert!(kept >= 190, "{kept} of 200 keys read last kept");
    let cold = k.iter().filter(|k| k.starts_with("cold")).count();
    assert!(cold < 2800 - 500, "{cold} cold keys left");
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// An eviction is a `DEL` in the log: a server restarted on the directory holds exactly the
/// keys that were left, not the evicted ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_agrees_with_the_evictions() {
    let tmp = TempDir::new("evictions");
    let dir = tmp.path().join("data");
    let srv = start(config(LockKind::Rwsem, Some(&dir), Fsync::Always)).await;
    let mut c = connect(srv.addr).await;
    fill_past_the_limit(&mut c, "allkeys-lru", "k").await;
    let before = keys(&mut c).await;
    assert!(before.len() < 4000, "{} keys", before.len());
    drop(c);
    within("stop", srv.stop()).await.unwrap();
    let srv = start(config(LockKind::Rwsem, Some(&dir), Fsync::Always)).await;
    let mut c = connect(srv.addr).await;
    assert_eq!(keys(&mut c).await, before, "the keys after the restart");
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// With `notify-keyspace-events` naming `e`, each eviction is published as Redis publishes
/// it: `__keyevent@0__:evicted` with the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_are_told_as_keyspace_notifications() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
    let mut c = connect(srv.addr).await;
    let _: () = cmd(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"])
        .await
        .unwrap();
    let mut sub = within("connect", tokio::net::TcpStream::connect(srv.addr))
        .await
        .unwrap();
    sub.write_all(b"SUBSCRIBE __keyevent@0__:evicted\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let has = |got: &[u8], what: &[u8], n: usize| {
        got.windows(what.len()).filter(|w| *w == what).count() >= n
    };
    while !has(&got, b"subscribe", 1) {
        let n = within("subscribed", sub.read(&mut buf)).await.unwrap();
        assert!(n > 0, "closed");
        got.extend_from_slice(&buf[..n]);
    }
    fill_past_the_limit(&mut c, "allkeys-random", "n").await;
    let evicted = info_field(&mut c, "stats", "evicted_keys").await as usize;
    let message = b"$7\r\nmessage\r\n$22\r\n__keyevent@0__:evicted\r\n$";
    while !has(&got, message, evicted) {
        let n = within("the evictions' messages", sub.read(&mut buf))
            .await
            .unwrap();
        assert!(n > 0, "closed");
        got.extend_from_slice(&buf[..n]);
    }
    // Each names a key that is gone.
    let text = String::from_utf8_lossy(&got).into_owned();
    let first = text
        .split("__keyevent@0__:evicted\r\n$")
        .nth(2)
        .and_then(|m| m.split("\r\n").nth(1))
        .expect("a message's key")
        .to_string();
    assert!(first.starts_with('n'), "{first}");
    let e: i64 = cmd(&mut c, &["EXISTS", &first]).await.unwrap();
    assert_eq!(e, 0, "{first} was evicted");
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}

/// `CONFIG SET` of the policy inside a transaction (whose `EXEC` holds every shard) and beside
/// evictions in other connections: it takes effect, and nothing waits on anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_set_inside_a_transaction_takes_effect() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::No)).await;
    let mut c = connect(srv.addr).await;
    let _: () = cmd(&mut c, &["SET", "k", "v"]).await.unwrap();
    let _: () = cmd(&mut c, &["MULTI"]).await.unwrap();
    let _: String = cmd(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    )
    .await
    .unwrap();
    let _: String = cmd(&mut c, &["GET", "k"]).await.unwrap();
    let r: Vec<String> = cmd(&mut c, &["EXEC"]).await.unwrap();
    assert_eq!(r, ["OK", "v"]);
    let freq: i64 = cmd(&mut c, &["OBJECT", "FREQ", "k"]).await.unwrap();
    assert!(freq >= 1, "{freq}");
    // Policy changes in transactions while another connection evicts.
    let mut other = connect(srv.addr).await;
    let filler = tokio::spawn(async move {
        fill_past_the_limit(&mut other, "allkeys-lru", "f").await;
    });
    for policy in ["allkeys-lfu", "allkeys-lru", "allkeys-random"].repeat(10) {
        let _: () = cmd(&mut c, &["MULTI"]).await.unwrap();
        let _: String = cmd(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy])
            .await
            .unwrap();
        let _: Vec<String> = cmd(&mut c, &["EXEC"]).await.unwrap();
    }
    within("the filler", filler).await.unwrap();
    drop(c);
    within("stop", srv.stop()).await.unwrap();
}
