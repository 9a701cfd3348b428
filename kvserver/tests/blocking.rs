//! The blocking commands through real connections: clients blocked on a key are served first
//! blocked, first served, by the write that makes the key ready (before that writer's next
//! command); timeouts; `MULTI`/`EXEC`; a client that goes away while blocked; no shard lock
//! held while blocked; `CLIENT UNBLOCK`; `WATCH`; each client's protocol.

mod support;

use std::net::SocketAddr;

use kvserver::aof::Fsync;
use kvserver::lock::LockKind;
use support::raw::{encode, Raw};
use support::{config, start, within, DEADLINE};

/// `INFO clients`' `blocked_clients`.
async fn blocked(c: &mut Raw) -> usize {
    let info = c.call(&["INFO", "clients"]).await;
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .expect("blocked_clients in INFO clients");
    line.trim().parse().unwrap()
}

/// Waits until `n` clients are blocked.
async fn until_blocked(c: &mut Raw, n: usize) {
    let t0 = std::time::Instant::now();
    while blocked(c).await != n {
        assert!(
            t0.elapsed() < DEADLINE,
            "{n} blocked clients: not within {DEADLINE:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn server(shards: usize) -> (kvserver::server::Running, SocketAddr) {
    let mut c = config(LockKind::Rwsem, None, Fsync::No);
    c.shards = shards;
    let srv = start(c).await;
    let addr = srv.addr;
    (srv, addr)
}

fn pop_reply(key: &str, item: &str) -> String {
    format!(
        "*2\r\n${}\r\n{key}\r\n${}\r\n{item}\r\n",
        key.len(),
        item.len()
    )
}

const NULL_ARRAY: &str = "*-1\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_clients_are_served_first_blocked_first() {
    let (srv, addr) = server(4).await;
    let mut w = Raw::open(addr).await;
    let mut a = Raw::open(addr).await;
    let mut b = Raw::open(addr).await;
    let mut c = Raw::open(addr).await;
    a.send(&["BLPOP", "nothing", "k", "0"]).await;
    until_blocked(&mut w, 1).await;
    b.send(&["BRPOP", "k", "0"]).await;
    until_blocked(&mut w, 2).await;
    c.send(&["BLPOP", "k", "other", "0"]).await;
    until_blocked(&mut w, 3).await;
    // One push of three items serves the three in the order they blocked, each its end.
    assert_eq!(w.call(&["RPUSH", "k", "x", "y", "z", "q"]).await, ":4\r\n");
    assert_eq!(a.reply().await, pop_reply("k", "x"));
    assert_eq!(b.reply().await, pop_reply("k", "q"));
    assert_eq!(c.reply().await, pop_reply("k", "y"));
    assert_eq!(
        w.call(&["LRANGE", "k", "0", "-1"]).await,
        "*1\r\n$1\r\nz\r\n"
    );
    assert_eq!(blocked(&mut w).await, 0);
    // The commands after a blocking one wait for its reply, then run.
    a.send(&["BLPOP", "k2", "0"]).await;
    a.send(&["PING"]).await;
    until_blocked(&mut w, 1).await;
    w.call(&["LPUSH", "k2", "v"]).await;
    assert_eq!(a.reply().await, pop_reply("k2", "v"));
    assert_eq!(a.reply().await, "+PONG\r\n");
    within("stop", srv.stop()).await.unwrap();
}

/// Redis' "Unblock fairness is kept while pipelining": a push and a blocking pop sent in one
/// pipeline serve the client blocked before, then block the sender.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_serves_the_blocked_client_before_the_pushers_next_command() {
    let (srv, addr) = server(4).await;
    let mut w = Raw::open(addr).await;
    let mut a = Raw::open(addr).await;
    let mut b = Raw::open(addr).await;
    a.send(&["BLPOP", "l", "0"]).await;
    until_blocked(&mut w, 1).await;
    let mut both = encode(&["LPUSH", "l", "1"]);
    both.extend(encode(&["BLPOP", "l", "0"]));
    b.send_bytes(&both).await;
    assert_eq!(a.reply().await, pop_reply("l", "1"));
    assert_eq!(b.reply().await, ":1\r\n");
    until_blocked(&mut w, 1).await;
    w.call(&["RPUSH", "l", "2"]).await;
    assert_eq!(b.reply().await, pop_reply("l", "2"));
    within("stop", srv.stop()).await.unwrap();
}

/// `BLMOVE` chains (a served move makes the next key ready), a wrong-typed destination is the
/// first client's error and the item goes to the next, and `WATCH` sees the served push but
/// not a client merely blocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_chain_and_a_wrong_destination_is_an_error() {
    let (srv, addr) = server(4).await;
    let mut w = Raw::open(addr).await;
    let mut a = Raw::open(addr).await;
    let mut b = Raw::open(addr).await;
    a.send(&["BLMOVE", "l1", "l2", "RIGHT", "LEFT", "0"]).await;
    until_blocked(&mut w, 1).await;
    b.send(&["BLMOVE", "l2", "l3", "LEFT", "RIGHT", "0"]).await;
    until_blocked(&mut w, 2).await;
    w.call(&["RPUSH", "l1", "foo"]).await;
    assert_eq!(a.reply().await, "$3\r\nfoo\r\n");
    assert_eq!(b.reply().await, "$3\r\nfoo\r\n");
    assert_eq!(
        w.call(&["LRANGE", "l3", "0", "-1"]).await,
        "*1\r\n$3\r\nfoo\r\n"
    );
    assert_eq!(w.call(&["EXISTS", "l1", "l2"]).await, ":0\r\n");

    w.call(&["SET", "target", "nolist"]).await;
    a.send(&["BRPOPLPUSH", "blist", "target", "0"]).await;
    until_blocked(&mut w, 1).await;
    b.send(&["BRPOPLPUSH", "blist", "target2", "0"]).await;
    until_blocked(&mut w, 2).await;
    w.call(&["LPUSH", "blist", "foo"]).await;
    assert!(a.reply().await.starts_with("-WRONGTYPE"));
    assert_eq!(b.reply().await, "$3\r\nfoo\r\n");
    assert_eq!(
        w.call(&["LRANGE", "target2", "0", "-1"]).await,
        "*1\r\n$3\r\nfoo\r\n"
    );

    // WATCH: a blocked BRPOPLPUSH does not touch its keys; the push that serves it does.
    let mut t = Raw::open(addr).await;
    a.send(&["BRPOPLPUSH", "wsrc", "wdst", "0"]).await;
    until_blocked(&mut w, 1).await;
    t.call(&["WATCH", "wdst"]).await;
    t.call(&["MULTI"]).await;
    t.call(&["PING"]).await;
    assert_eq!(t.call(&["EXEC"]).await, "*1\r\n+PONG\r\n");
    t.call(&["WATCH", "wdst"]).await;
    w.call(&["LPUSH", "wsrc", "v"]).await;
    assert_eq!(a.reply().await, "$1\r\nv\r\n");
    t.call(&["MULTI"]).await;
    t.call(&["PING"]).await;
    assert_eq!(t.call(&["EXEC"]).await, NULL_ARRAY);
    within("stop", srv.stop()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_their_errors() {
    let (srv, addr) = server(4).await;
    let mut a = Raw::open(addr).await;
    assert_eq!(a.call(&["BLPOP", "none", "0.01"]).await, NULL_ARRAY);
    assert_eq!(
        a.call(&["BRPOPLPUSH", "none", "x", "0.01"]).await,
        NULL_ARRAY
    );
    assert_eq!(
        a.call(&["BZMPOP", "0.01", "1", "none", "MIN"]).await,
        NULL_ARRAY
    );
    for (args, err) in [
        (&["BLPOP", "k", "-1"][..], "-ERR timeout is negative"),
        (
            &["BLPOP", "k", "x"],
            "-ERR timeout is not a float or out of range",
        ),
        (&["BZPOPMIN", "k", "1e30"], "-ERR timeout is out of range"),
        (
            &["BLMOVE", "a", "b", "UP", "LEFT", "0"],
            "-ERR syntax error",
        ),
        (
            &["BLMPOP", "0", "0", "k", "LEFT"],
            "-ERR numkeys should be greater than 0",
        ),
    ] {
        assert_eq!(a.call(args).await, format!("{err}\r\n"), "{args:?}");
    }
    // A deadline past: the client is unblocked, and its next command runs.
    a.send(&["BZPOPMAX", "none", "0.05"]).await;
    a.send(&["ECHO", "after"]).await;
    assert_eq!(a.reply().await, NULL_ARRAY);
    assert_eq!(a.reply().await, "$5\r\nafter\r\n");
    let mut w = Raw::open(addr).await;
    assert_eq!(blocked(&mut w).await, 0);
    within("stop", srv.stop()).await.unwrap();
}

/// Inside `MULTI`/`EXEC` the blocking commands run as their non-blocking forms; a client
/// blocked outside sees the transaction's writes only once `EXEC` is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_never_block_and_serve_after_exec() {
    let (srv, addr) = server(4).await;
    let mut a = Raw::open(addr).await;
    let mut w = Raw::open(addr).await;
    a.call(&["MULTI"]).await;
    for args in [
        &["BLPOP", "none", "0"][..],
        &["BLMOVE", "none", "x", "LEFT", "LEFT", "0"],
        &["BZPOPMIN", "none", "0"],
        &["BLMPOP", "0", "1", "none", "LEFT"],
    ] {
        assert_eq!(a.call(args).await, "+QUEUED\r\n");
    }
    assert_eq!(
        a.call(&["EXEC"]).await,
        "*4\r\n*-1\r\n$-1\r\n*-1\r\n*-1\r\n"
    );

    a.send(&["BLPOP", "blist", "0"]).await;
    until_blocked(&mut w, 1).await;
    w.call(&["MULTI"]).await;
    w.call(&["LPUSH", "blist", "a"]).await;
    w.call(&["LPUSH", "blist", "b"]).await;
    w.call(&["LPUSH", "blist", "c"]).await;
    assert_eq!(w.call(&["EXEC"]).await, "*3\r\n:1\r\n:2\r\n:3\r\n");
    assert_eq!(a.reply().await, pop_reply("blist", "c"));
    within("stop", srv.stop()).await.unwrap();
}

/// A write that leaves the key holding another type (or nothing) wakes nobody; `SORT ...
/// STORE` into a key wakes its waiters; a hexadecimal timeout past the range is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_key_of_the_awaited_type_wakes() {
    let (srv, addr) = server(4).await;
    let mut w = Raw::open(addr).await;
    let mut a = Raw::open(addr).await;
    a.send(&["BLPOP", "k", "0"]).await;
    until_blocked(&mut w, 1).await;
    w.call(&["MULTI"]).await;
    w.call(&["LPUSH", "k", "x"]).await;
    w.call(&["DEL", "k"]).await;
    w.call(&["SET", "k", "str"]).await;
    assert_eq!(w.call(&["EXEC"]).await, "*3\r\n:1\r\n:1\r\n+OK\r\n");
    assert_eq!(blocked(&mut w).await, 1);
    w.call(&["DEL", "k"]).await;
    w.call(&["RPUSH", "src", "3", "1", "2"]).await;
    w.call(&["SORT", "src", "STORE", "k"]).await;
    assert_eq!(a.reply().await, pop_reply("k", "1"));
    assert_eq!(
        a.call(&["BLPOP", "k", "0x7FFFFFFFFFFFFF"]).await,
        "-ERR timeout is out of range\r\n"
    );
    within("stop", srv.stop()).await.unwrap();
}

/// A client that disconnects while blocked leaves the queues: it is no longer counted, and a
/// later push stays in the list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_while_blocked_is_forgotten() {
    let (srv, addr) = server(4).await;
    let mut w = Raw::open(addr).await;
    let mut a = Raw::open(addr).await;
    a.send(&["BLPOP", "gone", "0"]).await;
    a.send(&["BZPOPMIN", "never", "runs", "0"]).await;
    until_blocked(&mut w, 1).await;
    drop(a);
    until_blocked(&mut w, 0).await;
    assert_eq!(w.call(&["RPUSH", "gone", "v"]).await, ":1\r\n");
    assert_eq!(
        w.call(&["LRANGE", "gone", "0", "-1"]).await,
        "*1\r\n$1\r\nv\r\n"
    );
    within("stop", srv.stop()).await.unwrap();
}

/// A blocked client holds no lock: with one shard, other clients read, write and run
/// transactions (which take every shard's write lock) on it meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_client_holds_no_shard_lock() {
    let (srv, addr) = server(1).await;
    let mut w = Raw::open(addr).await;
    let mut a = Raw::open(addr).await;
    a.send(&["BLPOP", "k", "0"]).await;
    until_blocked(&mut w, 1).await;
    assert_eq!(w.call(&["SET", "s", "1"]).await, "+OK\r\n");
    assert_eq!(w.call(&["GET", "s"]).await, "$1\r\n1\r\n");
    assert_eq!(w.call(&["RPUSH", "other", "x"]).await, ":1\r\n");
    w.call(&["MULTI"]).await;
    w.call(&["DBSIZE"]).await;
    w.call(&["FLUSHALL"]).await;
    assert_eq!(w.call(&["EXEC"]).await, "*2\r\n:2\r\n+OK\r\n");
    assert_eq!(blocked(&mut w).await, 1);
    w.call(&["RPUSH", "k", "v"]).await;
    assert_eq!(a.reply().await, pop_reply("k", "v"));
    within("stop", srv.stop()).await.unwrap();
}

/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`, and a RESP3 client served by a RESP2 writer gets its
/// reply in its own protocol.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_unblock_and_each_clients_protocol() {
    let (srv, addr) = server(4).await;
    let mut w = Raw::open(addr).await;
    let mut a = Raw::open(addr).await;
    let id = a.call(&["CLIENT", "ID"]).await;
    let id = id.trim_start_matches(':').trim().to_string();
    a.send(&["BLPOP", "k", "0"]).await;
    until_blocked(&mut w, 1).await;
    assert_eq!(w.call(&["CLIENT", "UNBLOCK", &id]).await, ":1\r\n");
    assert_eq!(a.reply().await, NULL_ARRAY);
    assert_eq!(w.call(&["CLIENT", "UNBLOCK", &id]).await, ":0\r\n");
    a.send(&["BZPOPMIN", "z", "0"]).await;
    until_blocked(&mut w, 1).await;
    assert_eq!(w.call(&["CLIENT", "UNBLOCK", &id, "ERROR"]).await, ":1\r\n");
    assert_eq!(
        a.reply().await,
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    assert!(a.call(&["HELLO", "3"]).await.starts_with('%'));
    a.send(&["BZPOPMIN", "z", "0"]).await;
    until_blocked(&mut w, 1).await;
    w.call(&["ZADD", "z", "1.5", "m"]).await;
    assert_eq!(a.reply().await, "*3\r\n$1\r\nz\r\n$1\r\nm\r\n,1.5\r\n");
    a.send(&["BLPOP", "k", "0.01"]).await;
    assert_eq!(a.reply().await, "_\r\n");
    within("stop", srv.stop()).await.unwrap();
}

/// `INFO persistence`'s `rdb_changes_since_last_save` counts a served pop as a change (as in
/// Redis' "BLPOP/BLMOVE should increase dirty"), and `SAVE` sets it back to 0. `MONITOR` shows
/// a blocking command once, when it blocks, not again when it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_pops_are_changes_and_monitors_see_them_once() {
    let dir = support::TempDir::new("blocking-dirty");
    let srv = start(config(LockKind::Rwsem, Some(dir.path()), Fsync::No)).await;
    let addr = srv.addr;
    let changes = |info: String| -> u64 {
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .expect("rdb_changes_since_last_save in INFO persistence");
        line.trim().parse().unwrap()
    };
    let (mut w, mut b, mut mon) = (
        Raw::open(addr).await,
        Raw::open(addr).await,
        Raw::open(addr).await,
    );
    assert_eq!(mon.call(&["MONITOR"]).await, "+OK\r\n");
    assert_eq!(w.call(&["SAVE"]).await, "+OK\r\n");
    assert_eq!(changes(w.call(&["INFO", "persistence"]).await), 0);
    b.send(&["BLPOP", "q", "0"]).await;
    until_blocked(&mut w, 1).await;
    assert_eq!(w.call(&["LPUSH", "q", "a"]).await, ":1\r\n");
    assert_eq!(b.reply().await, pop_reply("q", "a"));
    assert_eq!(changes(w.call(&["INFO", "persistence"]).await), 2);
    assert_eq!(w.call(&["SAVE"]).await, "+OK\r\n");
    assert_eq!(changes(w.call(&["INFO", "persistence"]).await), 0);
    // The monitor: the BLPOP (when it blocked), then the LPUSH that served it, once each.
    let mut lines = Vec::new();
    while !lines
        .last()
        .is_some_and(|l: &String| l.contains("\"lpush\""))
    {
        let l = mon.reply().await.to_lowercase();
        if !l.contains("\"info\"") {
            lines.push(l);
        }
    }
    assert!(lines[0].contains("\"blpop\" \"q\" \"0\""), "{lines:?}");
    assert_eq!(
        lines.iter().filter(|l| l.contains("blpop")).count(),
        1,
        "{lines:?}"
    );
    within("stop", srv.stop()).await.unwrap();
}
