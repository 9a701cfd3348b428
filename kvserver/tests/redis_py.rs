//! redis-py side by side with redis-server: one program (`redis_py_side_by_side.py`, every
//! data-type command, their options and errors, transactions, pipelines, `WATCH`, a `Lock`,
//! the connection and server commands, through redis-py's own methods under RESP2 and RESP3)
//! runs against this server and against Debian's `redis-server`, and their answers must be
//! the same except exactly where kvserver/README.md's table *redis-py side by side* says they
//! differ. Skipped, with a notice, where redis-py or redis-server is missing (CI installs both).

mod support;

use std::collections::BTreeSet;

use kvserver::aof::Fsync;
use kvserver::lock::LockKind;
use support::reference::{redis_py_available, redis_server, run_redis_py};
use support::{config, start};

const SCRIPT: &str = include_str!("redis_py_side_by_side.py");

/// The answers that differ, by label (each under both protocols), and why: the rows of the
/// README's table.
const DIFFERENT: &[(&str, &str)] = &[
    ("select.out", "one database: SELECT 1 is refused"),
    ("e.copy.db1", "one database: COPY ... DB 1 is refused"),
    (
        "e.encodings",
        "small lists and sets are listpacks, as in Redis 7.2",
    ),
    (
        "e.lock.release",
        "redis-py's Lock releases with a Lua script",
    ),
    ("e.client.list", "CLIENT LIST adds lib-name, lib-ver, watch"),
    ("e.client.info", "CLIENT INFO adds lib-name, lib-ver, watch"),
    (
        "e.command.info",
        "COMMAND INFO has no key specs, ACL categories",
    ),
    ("out.pfadd", "HyperLogLog stays out"),
    ("out.xadd", "streams stay out"),
    ("out.geoadd", "geo stays out"),
    ("out.eval", "scripting stays out"),
    ("out.move", "one database: MOVE is unknown"),
];

/// The answers of one run: "<protocol> <label>" -> the answer.
async fn answers(port: u16) -> Vec<(String, String)> {
    run_redis_py(SCRIPT, port)
        .await
        .lines()
        .map(|l| {
            let mut w = l.splitn(3, ' ');
            let (proto, label) = (w.next().unwrap(), w.next().unwrap());
            (format!("{proto} {label}"), w.next().unwrap_or("").into())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_answers_as_redis_server_does_except_where_the_readme_says() {
    if !redis_py_available() {
        return;
    }
    let Some(redis) = redis_server("redis-ref-py", &[]).await else {
        return;
    };
    let srv = start(config(LockKind::Rwsem, None, Fsync::Everysec)).await;
    let ours = answers(srv.addr.port()).await;
    let theirs = answers(redis.port).await;
    let labels = |a: &[(String, String)]| a.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>();
    assert_eq!(labels(&ours), labels(&theirs), "the same questions");
    // Every command group answered, under both protocols.
    assert!(ours.len() >= 600, "{} answers", ours.len());
    let mut differ = BTreeSet::new();
    let mut shown = Vec::new();
    for ((label, a), (_, b)) in ours.iter().zip(&theirs) {
        if a != b {
            differ.insert(label.split_once(' ').unwrap().1.to_string());
            shown.push(format!("{label}\n  kvserver:     {a}\n  redis-server: {b}"));
        }
    }
    let expected: BTreeSet<String> = DIFFERENT.iter().map(|(l, _)| l.to_string()).collect();
    assert_eq!(
        differ,
        expected,
        "the answers that differ are not the README's; all that differ:\n{}",
        shown.join("\n")
    );
    // Each known difference shows under both protocols.
    assert_eq!(shown.len(), 2 * DIFFERENT.len(), "{}", shown.join("\n"));
    srv.stop().await.unwrap();
}
