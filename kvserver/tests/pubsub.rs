//! Pub/sub, `AUTH`/`requirepass`, `CLIENT KILL|REPLY`, `MONITOR`, `SORT`, `DEBUG` and `MEMORY`
//! through real connections: a script over several raw connections whose every reply must be
//! byte for byte `redis-server`'s (skipped, with a notice, where `redis-server` is not
//! installed), and the behaviour a transcript cannot compare (a slow subscriber cut off at the
//! output limit, passwords, kills, monitor lines).

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::raw::Raw;
use crate::support::reference;
use crate::support::*;
use kvserver::aof::Fsync;
use kvserver::lock::LockKind;

/// A `redis-server` with the test suite's `enable-debug-command`.
async fn redis_server() -> Option<reference::Redis> {
    reference::redis_server("redis-ref-pubsub", &["--enable-debug-command", "yes"]).await
}

/// One step of a transcript: on connection `conn`, send `cmd` (none: only read), then read
/// `replies` replies; `compare: false` for replies that differ by nature (ids, versions).
struct Step(usize, &'static [&'static str], usize, bool);

async fn transcript(addr: SocketAddr, steps: &[Step]) -> Vec<String> {
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(Raw::open(addr).await);
    }
    let mut out = Vec::new();
    for Step(conn, cmd, replies, compare) in steps {
        let c = &mut conns[*conn];
        if !cmd.is_empty() {
            c.send(cmd).await;
        }
        for _ in 0..*replies {
            let r = c.read().await;
            out.push(if *compare {
                format!("{conn} {cmd:?}: {}", String::from_utf8_lossy(&r))
            } else {
                format!("{conn} {cmd:?}: (not compared)")
            });
        }
    }
    out
}

/// The script: connections 0 and 1 speak RESP2, 2 switches to RESP3.
const SCRIPT: &[Step] = &[
    // Subscribing, publishing, the subscribed state's restrictions.
    Step(0, &["SUBSCRIBE", "ch1", "ch2"], 2, true),
    Step(1, &["PUBLISH", "ch1", "hello"], 1, true),
    Step(0, &[], 1, true),
    Step(0, &["GET", "k"], 1, true),
    Step(0, &["CLIENT", "LIST"], 1, true),
    Step(0, &["PING"], 1, true),
    Step(0, &["PING", "x"], 1, true),
    Step(0, &["SUBSCRIBE", "ch1"], 1, true),
    Step(0, &["PSUBSCRIBE", "c*"], 1, true),
    Step(1, &["PUBLISH", "ch2", "w"], 1, true),
    Step(0, &[], 2, true),
    Step(1, &["PUBLISH", "cx", "only-pattern"], 1, true),
    Step(0, &[], 1, true),
    Step(1, &["PUBSUB", "NUMSUB", "ch1", "ch2", "nope"], 1, true),
    Step(1, &["PUBSUB", "NUMSUB"], 1, true),
    Step(1, &["PUBSUB", "NUMPAT"], 1, true),
    Step(1, &["PUBSUB", "CHANNELS", "ch1"], 1, true),
    Step(1, &["PUBSUB", "CHANNELS", "zz*"], 1, true),
    Step(1, &["PUBSUB", "BOGUS"], 1, true),
    Step(1, &["PUBSUB", "NUMPAT", "x"], 1, true),
    Step(0, &["UNSUBSCRIBE", "ch1", "ch2"], 2, true),
    Step(0, &["UNSUBSCRIBE"], 1, true),
    Step(0, &["PUNSUBSCRIBE"], 1, true),
    Step(0, &["PUNSUBSCRIBE"], 1, true),
    Step(0, &["UNSUBSCRIBE", "nope"], 1, true),
    Step(0, &["PING"], 1, true),
    Step(1, &["PUBLISH", "ch1", "nobody"], 1, true),
    Step(1, &["SUBSCRIBE"], 1, true),
    // RESP3: pushes, any command while subscribed, a message to itself after the reply.
    Step(2, &["HELLO", "3"], 1, false),
    Step(2, &["SUBSCRIBE", "x"], 1, true),
    Step(2, &["GET", "k"], 1, true),
    // Redis 7.0 sends a message to itself before the PUBLISH reply, 7.2 and later after it
    // (as this server does; see publishing_to_itself_comes_after_the_reply).
    Step(2, &["PUBLISH", "x", "self"], 2, false),
    Step(2, &["PING"], 1, true),
    Step(2, &["SSUBSCRIBE", "s1"], 1, true),
    Step(1, &["SPUBLISH", "s1", "m"], 1, true),
    Step(2, &[], 1, true),
    Step(1, &["PUBSUB", "SHARDNUMSUB", "s1"], 1, true),
    Step(1, &["PUBSUB", "SHARDCHANNELS"], 1, true),
    Step(2, &["SUNSUBSCRIBE"], 1, true),
    Step(2, &["UNSUBSCRIBE", "x"], 1, true),
    Step(2, &["MULTI"], 1, true),
    Step(2, &["SUBSCRIBE", "m"], 1, true),
    Step(2, &["PUBLISH", "m", "in-multi"], 1, true),
    Step(2, &["EXEC"], 2, false),
    Step(2, &["RESET"], 1, true),
    Step(1, &["PUBLISH", "m", "after-reset"], 1, true),
    // CLIENT REPLY.
    Step(1, &["CLIENT", "REPLY", "OFF"], 0, true),
    Step(1, &["PING", "silenced"], 0, true),
    Step(1, &["CLIENT", "REPLY", "ON"], 1, true),
    Step(1, &["CLIENT", "REPLY", "SKIP"], 0, true),
    Step(1, &["PING", "skipped"], 0, true),
    Step(1, &["PING", "seen"], 1, true),
    Step(1, &["CLIENT", "REPLY", "SKIP"], 0, true),
    Step(1, &["CLIENT", "REPLY", "ON"], 1, true),
    Step(1, &["CLIENT", "REPLY", "MAYBE"], 1, true),
    Step(1, &["CLIENT", "NO-EVICT", "ON"], 1, true),
    Step(1, &["CLIENT", "NO-EVICT", "MAYBE"], 1, true),
    // CLIENT KILL's errors.
    Step(1, &["CLIENT", "KILL"], 1, true),
    Step(1, &["CLIENT", "KILL", "ID", "10", "extra"], 1, true),
    Step(1, &["CLIENT", "KILL", "ID", "0"], 1, true),
    Step(1, &["CLIENT", "KILL", "ID", "x"], 1, true),
    Step(1, &["CLIENT", "KILL", "TYPE", "bogus"], 1, true),
    Step(1, &["CLIENT", "KILL", "USER", "nobody"], 1, true),
    Step(1, &["CLIENT", "KILL", "SKIPME", "maybe"], 1, true),
    Step(1, &["CLIENT", "KILL", "1.2.3.4:5"], 1, true),
    Step(1, &["CLIENT", "KILL", "ID", "99999"], 1, true),
    // AUTH without a password set.
    Step(1, &["AUTH", "pw"], 1, true),
    Step(1, &["AUTH", "default", "anything"], 1, true),
    Step(1, &["AUTH", "bob", "pw"], 1, true),
    Step(1, &["AUTH", "a", "b", "c"], 1, true),
    // SORT and SORT_RO.
    Step(1, &["RPUSH", "l", "3", "1", "2", "10"], 1, true),
    Step(1, &["SORT", "l"], 1, true),
    Step(1, &["SORT", "l", "DESC"], 1, true),
    Step(1, &["SORT", "l", "LIMIT", "1", "2"], 1, true),
    Step(1, &["SORT", "l", "LIMIT", "-5", "2"], 1, true),
    Step(1, &["SORT", "l", "LIMIT", "9", "2"], 1, true),
    Step(1, &["SORT", "l", "LIMIT", "x", "2"], 1, true),
    Step(1, &["SORT", "l", "ALPHA"], 1, true),
    Step(
        1,
        &["SORT", "l", "ALPHA", "DESC", "LIMIT", "0", "3"],
        1,
        true,
    ),
    Step(
        1,
        &["MSET", "w_1", "3", "w_2", "2", "w_3", "1", "w_10", "x"],
        1,
        true,
    ),
    Step(1, &["SORT", "l", "BY", "w_*"], 1, true),
    Step(1, &["SORT", "l", "BY", "w_*", "ALPHA"], 1, true),
    Step(
        1,
        &["SORT", "l", "BY", "w_*", "GET", "#", "GET", "w_*"],
        1,
        true,
    ),
    Step(1, &["HSET", "h1", "f", "one", "g", "5"], 1, true),
    Step(1, &["HSET", "h2", "f", "two", "g", "4"], 1, true),
    Step(
        1,
        &["SORT", "l", "BY", "h*->g", "GET", "h*->f", "GET", "nokey*"],
        1,
        true,
    ),
    Step(1, &["SORT", "l", "BY", "nosort"], 1, true),
    Step(
        1,
        &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"],
        1,
        true,
    ),
    Step(1, &["SORT", "l", "STORE", "dst"], 1, true),
    Step(1, &["LRANGE", "dst", "0", "-1"], 1, true),
    Step(1, &["SORT", "l", "GET", "nokey*", "STORE", "dst"], 1, true),
    Step(1, &["LRANGE", "dst", "0", "-1"], 1, true),
    Step(1, &["SORT", "nokey", "STORE", "dst"], 1, true),
    Step(1, &["EXISTS", "dst"], 1, true),
    Step(1, &["SORT_RO", "l", "STORE", "x"], 1, true),
    Step(1, &["SORT_RO", "l", "BY", "w_*"], 1, true),
    Step(1, &["SADD", "s", "b", "a", "c"], 1, true),
    Step(1, &["SORT", "s", "ALPHA"], 1, true),
    Step(1, &["SORT", "s", "BY", "nosort", "STORE", "dst"], 1, true),
    Step(1, &["LRANGE", "dst", "0", "-1"], 1, true),
    Step(1, &["SORT", "s"], 1, true),
    Step(1, &["ZADD", "z", "1", "c", "2", "b", "3", "a"], 1, true),
    Step(
        1,
        &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "0", "2"],
        1,
        true,
    ),
    Step(1, &["SORT", "z", "ALPHA"], 1, true),
    Step(1, &["SET", "str", "x"], 1, true),
    Step(1, &["SORT", "str"], 1, true),
    Step(1, &["SORT", "l", "BOGUS"], 1, true),
    Step(1, &["MULTI"], 1, true),
    Step(
        1,
        &["SORT", "l", "BY", "w_*", "GET", "w_*", "STORE", "dst2"],
        1,
        true,
    ),
    Step(1, &["LRANGE", "dst2", "0", "-1"], 1, true),
    Step(1, &["EXEC"], 1, true),
    // DEBUG PROTOCOL in both protocols; DEBUG's and MEMORY's errors.
    Step(1, &["DEBUG", "PROTOCOL", "map"], 1, true),
    Step(1, &["DEBUG", "PROTOCOL", "attrib"], 1, true),
    Step(1, &["DEBUG", "PROTOCOL", "bignum"], 1, true),
    Step(1, &["DEBUG", "PROTOCOL", "true"], 1, true),
    Step(1, &["DEBUG", "PROTOCOL", "push"], 1, true),
    Step(1, &["DEBUG", "PROTOCOL", "nope"], 1, true),
    Step(2, &["HELLO", "3"], 1, false),
    Step(2, &["DEBUG", "PROTOCOL", "map"], 1, true),
    Step(2, &["DEBUG", "PROTOCOL", "attrib"], 1, true),
    Step(2, &["DEBUG", "PROTOCOL", "bignum"], 1, true),
    Step(2, &["DEBUG", "PROTOCOL", "set"], 1, true),
    Step(2, &["DEBUG", "PROTOCOL", "double"], 1, true),
    Step(2, &["DEBUG", "PROTOCOL", "verbatim"], 1, true),
    Step(2, &["DEBUG", "PROTOCOL", "push"], 2, true),
    Step(1, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"], 1, true),
    Step(1, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"], 1, true),
    Step(1, &["DEBUG", "SLEEP", "0"], 1, true),
    Step(1, &["DEBUG", "OBJECT", "nokey"], 1, true),
    Step(1, &["DEBUG", "RELOAD"], 1, true),
    Step(1, &["DEBUG", "DIGEST-VALUE", "nokey"], 1, true),
    Step(1, &["MEMORY", "USAGE", "nokey"], 1, true),
    Step(1, &["MEMORY", "USAGE", "l", "SAMPLES"], 1, true),
    Step(1, &["MEMORY", "USAGE", "l", "SAMPLES", "x"], 1, true),
    Step(1, &["MEMORY", "USAGE", "l", "BOGUS", "1"], 1, true),
    // Keyspace notifications, to a pattern subscriber on connection 0.
    Step(
        1,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        1,
        true,
    ),
    Step(1, &["CONFIG", "GET", "notify-keyspace-events"], 1, true),
    Step(0, &["PSUBSCRIBE", "__key*@0__:*"], 1, true),
    Step(1, &["SET", "nk", "v"], 1, true),
    Step(0, &[], 2, true),
    Step(1, &["SET", "nk", "v2", "EX", "100"], 1, true),
    Step(0, &[], 4, true),
    Step(1, &["SET", "nk", "v2"], 1, true),
    Step(0, &[], 2, true),
    Step(1, &["EXPIRE", "nk", "100"], 1, true),
    Step(0, &[], 2, true),
    Step(1, &["SET", "nk", "v3", "NX"], 1, true),
    Step(1, &["SREM", "nos", "x"], 1, true),
    Step(1, &["INCR", "nn"], 1, true),
    Step(0, &[], 2, true),
    Step(1, &["RPUSH", "nl", "a"], 1, true),
    Step(1, &["RPOP", "nl"], 1, true),
    Step(0, &[], 6, true),
    Step(1, &["DEL", "nk", "nothere"], 1, true),
    Step(0, &[], 2, true),
    Step(1, &["HSET", "nh", "f", "v"], 1, true),
    Step(1, &["ZADD", "nz", "1", "a"], 1, true),
    Step(1, &["ZINCRBY", "nz", "1", "a"], 1, true),
    Step(1, &["SADD", "ns", "a"], 1, true),
    Step(1, &["SADD", "ns", "a"], 1, true),
    Step(0, &[], 8, true),
    Step(1, &["RENAME", "nh", "nh2"], 1, true),
    Step(1, &["EXPIRE", "nh2", "0"], 1, true),
    Step(0, &[], 6, true),
    Step(
        1,
        &["CONFIG", "SET", "notify-keyspace-events", "El"],
        1,
        true,
    ),
    Step(1, &["SET", "quiet", "1"], 1, true),
    Step(1, &["LPUSH", "nl", "x", "y"], 1, true),
    Step(0, &[], 1, true),
    Step(
        1,
        &["CONFIG", "SET", "notify-keyspace-events", "Eq"],
        1,
        true,
    ),
    Step(
        1,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        1,
        true,
    ),
    Step(1, &["PSETEX", "soon", "1", "x"], 1, true),
    Step(0, &[], 6, true),
    // An eviction right when the limit is lowered, without another command.
    Step(
        1,
        &["CONFIG", "SET", "notify-keyspace-events", "Ee"],
        1,
        true,
    ),
    Step(1, &["FLUSHALL"], 1, true),
    Step(1, &["SET", "big", "v"], 1, true),
    Step(
        1,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        1,
        true,
    ),
    Step(1, &["CONFIG", "SET", "maxmemory", "1"], 1, true),
    Step(0, &[], 1, true),
    Step(1, &["CONFIG", "SET", "maxmemory", "0"], 1, true),
    Step(
        1,
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
        1,
        true,
    ),
    Step(1, &["CONFIG", "SET", "notify-keyspace-events", ""], 1, true),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_auth_client_sort_and_debug_reply_like_redis_byte_for_byte() {
    let Some(redis) = redis_server().await else {
        return;
    };
    let srv = start(config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let ours = transcript(srv.addr, SCRIPT).await;
    let theirs = transcript(([127, 0, 0, 1], redis.port).into(), SCRIPT).await;
    // CLIENT LIST names addresses, ids and ages: only the reply's kind is compared.
    let masked = |t: &[String]| -> Vec<String> {
        t.iter()
            .map(|l| {
                if l.contains("\"CLIENT\", \"LIST\"") {
                    l[..l.find(": ").unwrap() + 3].to_string()
                } else {
                    l.clone()
                }
            })
            .collect()
    };
    let (ours, theirs) = (masked(&ours), masked(&theirs));
    let differ: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("ours  {a:?}\nredis {b:?}"))
        .collect();
    assert_eq!(ours.len(), theirs.len());
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// As Redis 7.2 and later (the test suite's "publish to self inside multi"): a message a client
/// publishes to itself comes after the reply of the command that published it, and inside
/// `EXEC` after the whole `EXEC` reply; `MAXAGE` of `CLIENT KILL` (7.4) is known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_to_itself_comes_after_the_reply() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let mut c = Raw::open(srv.addr).await;
    c.call(&["HELLO", "3"]).await;
    c.call(&["SUBSCRIBE", "foo"]).await;
    let message = |m: &str| format!(">3\r\n$7\r\nmessage\r\n$3\r\nfoo\r\n$3\r\n{m}\r\n");
    assert_eq!(c.call(&["PUBLISH", "foo", "one"]).await, ":1\r\n");
    assert_eq!(String::from_utf8(c.read().await).unwrap(), message("one"));
    c.call(&["MULTI"]).await;
    c.call(&["PING", "abc"]).await;
    c.call(&["PUBLISH", "foo", "bar"]).await;
    c.call(&["PUBLISH", "foo", "vaz"]).await;
    assert_eq!(c.call(&["EXEC"]).await, "*3\r\n$3\r\nabc\r\n:1\r\n:1\r\n");
    assert_eq!(String::from_utf8(c.read().await).unwrap(), message("bar"));
    assert_eq!(String::from_utf8(c.read().await).unwrap(), message("vaz"));
    assert_eq!(
        c.call(&["CLIENT", "KILL", "MAXAGE", "x"]).await,
        "-ERR maxage is not an integer or out of range\r\n"
    );
    assert_eq!(
        c.call(&["CLIENT", "KILL", "MAXAGE", "-1"]).await,
        "-ERR maxage should be greater than 0\r\n"
    );
    assert_eq!(
        c.call(&["CLIENT", "KILL", "MAXAGE", "3600"]).await,
        ":0\r\n"
    );
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_is_disconnected_at_the_pubsub_output_limit() {
    let mut cfg = config(LockKind::Rwsem, None, Fsync::Everysec);
    cfg.pubsub_output_buffer_limit = 256 << 10;
    let srv = start(cfg).await;
    let mut sub = Raw::open(srv.addr).await;
    assert!(sub.call(&["SUBSCRIBE", "ch"]).await.contains("subscribe"));
    let mut fast = Raw::open(srv.addr).await;
    assert!(fast.call(&["SUBSCRIBE", "ch"]).await.contains("subscribe"));
    let mut publisher = connect(srv.addr).await;
    let payload = "x".repeat(64 << 10);
    // `sub` reads nothing: the kernel's buffers fill, then its unsent output passes the limit
    // and it is dropped; `fast` keeps reading and stays.
    let mut published = 0;
    loop {
        let n: i64 = cmd(&mut publisher, &["PUBLISH", "ch", &payload])
            .await
            .unwrap();
        published += 1;
        let m = fast.read().await;
        assert!(m.ends_with(format!("{payload}\r\n").as_bytes()));
        if n == 1 {
            break;
        }
        assert!(
            published < 10_000,
            "the subscriber that reads nothing was never disconnected"
        );
    }
    let info: String = cmd(&mut publisher, &["INFO", "stats"]).await.unwrap();
    assert!(
        info.contains("client_output_buffer_limit_disconnections:1"),
        "{info}"
    );
    let n: Vec<redis::Value> = cmd(&mut publisher, &["PUBSUB", "NUMSUB", "ch"])
        .await
        .unwrap();
    assert_eq!(n[1], redis::Value::Int(1));
    // What it was sent before the cut is all it gets, then the end of the connection.
    let rest = sub.rest().await;
    assert!(rest.len() < (published as usize) * payload.len());
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requirepass_and_auth() {
    let mut cfg = config(LockKind::Rwsem, None, Fsync::Everysec);
    cfg.requirepass = Some(b"s3cret".to_vec());
    let srv = start(cfg).await;
    let mut c = Raw::open(srv.addr).await;
    assert_eq!(
        c.call(&["GET", "k"]).await,
        "-NOAUTH Authentication required.\r\n"
    );
    // An unknown command and a wrong arity are told before the missing authentication.
    assert!(c
        .call(&["NOSUCH"])
        .await
        .starts_with("-ERR unknown command"));
    assert!(c.call(&["GET"]).await.starts_with("-ERR wrong number"));
    assert!(c
        .call(&["HELLO", "3"])
        .await
        .starts_with("-NOAUTH HELLO must be called with the client already authenticated"));
    let wrong = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    assert_eq!(c.call(&["AUTH", "nope"]).await, wrong);
    assert_eq!(c.call(&["AUTH", "bob", "s3cret"]).await, wrong);
    assert_eq!(c.call(&["HELLO", "3", "AUTH", "default", "x"]).await, wrong);
    assert_eq!(
        c.call(&["PING"]).await,
        "-NOAUTH Authentication required.\r\n"
    );
    // MULTI with a refused command: EXECABORT.
    assert_eq!(c.call(&["AUTH", "s3cret"]).await, "+OK\r\n");
    assert_eq!(c.call(&["SET", "k", "v"]).await, "+OK\r\n");
    let mut d = Raw::open(srv.addr).await;
    assert!(d
        .call(&["HELLO", "3", "AUTH", "default", "s3cret"])
        .await
        .starts_with('%'));
    assert_eq!(d.call(&["GET", "k"]).await, "$1\r\nv\r\n");
    // CONFIG SET changes it for new connections; authenticated ones stay so.
    assert_eq!(
        c.call(&["CONFIG", "SET", "requirepass", "other"]).await,
        "+OK\r\n"
    );
    assert!(c
        .call(&["CONFIG", "GET", "requirepass"])
        .await
        .contains("other"));
    assert_eq!(c.call(&["GET", "k"]).await, "$1\r\nv\r\n");
    let mut e = Raw::open(srv.addr).await;
    assert_eq!(e.call(&["AUTH", "s3cret"]).await, wrong);
    assert_eq!(e.call(&["AUTH", "default", "other"]).await, "+OK\r\n");
    // RESET deauthenticates while a password is set.
    assert_eq!(e.call(&["RESET"]).await, "+RESET\r\n");
    assert_eq!(
        e.call(&["GET", "k"]).await,
        "-NOAUTH Authentication required.\r\n"
    );
    // No password: everyone is let in, and AUTH with one argument is an error.
    assert_eq!(
        c.call(&["CONFIG", "SET", "requirepass", ""]).await,
        "+OK\r\n"
    );
    assert_eq!(e.call(&["GET", "k"]).await, "$1\r\nv\r\n");
    assert!(e
        .call(&["AUTH", "x"])
        .await
        .starts_with("-ERR AUTH <password> called without any password configured"));
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_kill_and_monitor() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let mut a = Raw::open(srv.addr).await;
    let mut b = Raw::open(srv.addr).await;
    let mut m = Raw::open(srv.addr).await;
    let b_id = b.call(&["CLIENT", "ID"]).await;
    assert_eq!(m.call(&["MONITOR"]).await, "+OK\r\n");
    let b_id = b_id.trim_start_matches(':').trim();
    // The monitor sees each command once, after it ran, with its arguments quoted; AUTH's
    // password is redacted; MONITOR itself (an admin command) is not shown.
    a.call(&["SET", "foo", "a \"b\"\n"]).await;
    a.call(&["AUTH", "pw"]).await;
    a.call(&["MULTI"]).await;
    a.call(&["GET", "foo"]).await;
    a.call(&["EXEC"]).await;
    let lines: Vec<String> = futures_lines(&mut m, 5).await;
    assert!(
        lines[0].ends_with(r#""SET" "foo" "a \"b\"\n""#),
        "{lines:?}"
    );
    assert!(lines[1].ends_with(r#""AUTH" "(redacted)""#), "{lines:?}");
    assert!(lines[2].ends_with(r#""MULTI""#), "{lines:?}");
    assert!(lines[3].ends_with(r#""GET" "foo""#), "{lines:?}");
    assert!(lines[4].ends_with(r#""EXEC""#), "{lines:?}");
    assert!(lines
        .iter()
        .all(|l| l.starts_with('+') && l.contains(" [0 127.0.0.1:")));
    // CLIENT KILL ID closes that client at once; the new form replies a count.
    assert_eq!(a.call(&["CLIENT", "KILL", "ID", b_id]).await, ":1\r\n");
    assert!(b.closed().await);
    // The old form names the address; killing itself, it gets its reply first.
    let info = a.call(&["CLIENT", "INFO"]).await;
    let addr = info
        .split_whitespace()
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert_eq!(a.call(&["CLIENT", "KILL", &addr]).await, "+OK\r\n");
    assert!(a.closed().await);
    // SKIPME yes (the default) spares the caller: only the monitor goes. The killed
    // clients leave the list when their connection tasks end, which may come a moment
    // after their sockets close: wait for that (bounded), so that the count is the monitor's.
    let mut c = Raw::open(srv.addr).await;
    for _ in 0..200 {
        let list = c.call(&["CLIENT", "LIST"]).await;
        if !list.contains(&format!("addr={addr} ")) && !list.contains(&format!("id={b_id} ")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        c.call(&["CLIENT", "KILL", "TYPE", "normal"]).await,
        ":1\r\n"
    );
    assert!(m.closed().await);
    assert_eq!(c.call(&["PING"]).await, "+PONG\r\n");
    srv.stop().await.unwrap();
}

async fn futures_lines(m: &mut Raw, n: usize) -> Vec<String> {
    let mut v = Vec::new();
    for _ in 0..n {
        let r = m.read().await;
        v.push(String::from_utf8_lossy(&r).trim_end().to_string());
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_and_memory_describe_the_data() {
    let srv = start(config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let mut c = Raw::open(srv.addr).await;
    assert_eq!(
        c.call(&["DEBUG", "DIGEST"]).await,
        "+0000000000000000000000000000000000000000\r\n"
    );
    c.call(&["RPUSH", "l", "a", "b"]).await;
    c.call(&["SADD", "s", "x", "y"]).await;
    let d1 = c.call(&["DEBUG", "DIGEST"]).await;
    let v1 = c.call(&["DEBUG", "DIGEST-VALUE", "l", "s"]).await;
    // The same data gives the same digest, whatever happened in between.
    c.call(&["SADD", "s", "z"]).await;
    assert_ne!(c.call(&["DEBUG", "DIGEST"]).await, d1);
    c.call(&["SREM", "s", "z"]).await;
    assert_eq!(c.call(&["DEBUG", "DIGEST"]).await, d1);
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", "l", "s"]).await, v1);
    // A copy's value digests as the original's (the key's name is not in it).
    c.call(&["COPY", "s", "s2"]).await;
    let (s1, s2) = (
        c.call(&["DEBUG", "DIGEST-VALUE", "s"]).await,
        c.call(&["DEBUG", "DIGEST-VALUE", "s2"]).await,
    );
    assert_eq!(s1, s2);
    assert_ne!(s1, c.call(&["DEBUG", "DIGEST-VALUE", "l"]).await);
    c.call(&["DEL", "s2"]).await;
    let obj = c.call(&["DEBUG", "OBJECT", "l"]).await;
    assert!(
        obj.starts_with("+Value at:") && obj.contains("encoding:listpack"),
        "{obj}"
    );
    let small = c.call(&["MEMORY", "USAGE", "l"]).await;
    c.call(&["RPUSH", "l", &"x".repeat(1000)]).await;
    let big = c.call(&["MEMORY", "USAGE", "l"]).await;
    let n = |s: &str| s.trim_start_matches(':').trim().parse::<i64>().unwrap();
    assert!(n(&big) >= n(&small) + 1000, "{small} {big}");
    // DEBUG SET-ACTIVE-EXPIRE 0 stops the sweep: a due key stays counted until read.
    c.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await;
    c.call(&["SET", "e", "v", "PX", "1"]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(c.call(&["DBSIZE"]).await, ":3\r\n");
    c.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).await;
    let mut d = connect(srv.addr).await;
    eventually("the sweep removes the key", || {
        let mut d = d.clone();
        async move { cmd::<i64>(&mut d, &["DBSIZE"]).await.unwrap() == 2 }
    })
    .await;
    let _ = &mut d;
    // CONFIG RESETSTAT zeroes the command statistics.
    c.call(&["GET", "nokey"]).await;
    assert!(c
        .call(&["INFO", "commandstats"])
        .await
        .contains("cmdstat_get:calls=1,"));
    assert_eq!(c.call(&["CONFIG", "RESETSTAT"]).await, "+OK\r\n");
    let after = c.call(&["INFO", "commandstats"]).await;
    assert!(!after.contains("cmdstat_get:"), "{after}");
    let stats = c.call(&["MEMORY", "STATS"]).await;
    assert!(stats.contains("keys.count"), "{stats}");
    srv.stop().await.unwrap();
}

/// A redis-py program (its `PubSub` object in RESP2 and RESP3, `sort`, `sort_ro`, `auth`,
/// `client_no_evict`, `memory_usage`) run against kvserver and against redis-server: the
/// printed results must be the same. Skipped where redis-py or redis-server is missing.
const REDIS_PY_SCRIPT: &str = r##"
import sys, time, redis
port = int(sys.argv[1])
for proto in (2, 3):
    r = redis.Redis(port=port, protocol=proto)
    r.flushall()
    p = r.pubsub()
    p.subscribe("ch", "ch2")
    p.psubscribe("c*")
    def msgs(n):
        out = []
        t0 = time.time()
        while len(out) < n and time.time() - t0 < 10:
            m = p.get_message(timeout=1)
            if m is not None:
                out.append(m)
        return out
    print(proto, "confirm", msgs(3))
    print(proto, "publish", r.publish("ch", "hi"), r.publish("zz", "no"))
    print(proto, "messages", msgs(2))
    print(proto, "numsub", r.pubsub_numsub("ch", "nope"), r.pubsub_numpat(), sorted(r.pubsub_channels("ch*")))
    p.unsubscribe("ch")
    p.punsubscribe()
    print(proto, "unsub", msgs(2))
    p.close()
    print(proto, "sort", r.rpush("l", 3, 1, 2), r.sort("l"), r.sort("l", desc=True, start=0, num=2), r.sort("l", alpha=True, store="d"), r.lrange("d", 0, -1))
    r.mset({"w_1": 3, "w_2": 2, "w_3": 1})
    print(proto, "sortby", r.sort("l", by="w_*", get=["#", "w_*"]), r.sort_ro("l", by="w_*"))
    try:
        r.auth("x")
    except redis.RedisError as e:
        print(proto, "auth", str(e))
    print(proto, "reply", r.client_no_evict("on"), r.memory_usage("nokey"))
    try:
        r.execute_command("GET")
    except redis.ResponseError as e:
        print(proto, "arity", str(e))
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_pubsub_sort_and_auth_agree_with_redis_server() {
    if !reference::redis_py_available() {
        return;
    }
    let Some(redis) = redis_server().await else {
        return;
    };
    let srv = start(config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let ours = reference::run_redis_py(REDIS_PY_SCRIPT, srv.addr.port()).await;
    let theirs = reference::run_redis_py(REDIS_PY_SCRIPT, redis.port).await;
    assert!(ours.contains("3 messages [{'type': 'message'"), "{ours}");
    assert_eq!(ours, theirs);
    srv.stop().await.unwrap();
}

/// As in Redis, `timeout` does not close subscribers and monitors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_subscribers_and_monitors_stay_connected() {
    let mut cfg = config(LockKind::Rwsem, None, Fsync::Everysec);
    cfg.idle_timeout = Some(Duration::from_millis(300));
    let srv = start(cfg).await;
    let mut sub = Raw::open(srv.addr).await;
    sub.call(&["SUBSCRIBE", "ch"]).await;
    let mut mon = Raw::open(srv.addr).await;
    mon.call(&["MONITOR"]).await;
    let mut plain = Raw::open(srv.addr).await;
    plain.call(&["PING"]).await;
    // The plain client, idle as long as the other two, is closed...
    assert!(plain.closed().await);
    // ...and they still are there.
    let mut p = connect(srv.addr).await;
    let n: i64 = cmd(&mut p, &["PUBLISH", "ch", "still"]).await.unwrap();
    assert_eq!(n, 1);
    assert!(String::from_utf8_lossy(&sub.read().await).contains("still"));
    // (after the lines of the commands before it: the plain client's PING, the new
    // connection's handshake)
    while !String::from_utf8_lossy(&mon.read().await).contains("\"PUBLISH\" \"ch\" \"still\"") {}
    srv.stop().await.unwrap();
}
