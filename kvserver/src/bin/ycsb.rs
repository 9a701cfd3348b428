//! `ycsb`: a small YCSB-like load driver for any Redis-protocol server (the `kvserver`
//! example or a real `redis-server`), using the `redis` crate as the client.
//!
//! Workloads (as in YCSB's core workloads, on `user<N>` keys with `--value-size` values):
//! - `a`: 50% reads, 50% updates
//! - `b`: 95% reads, 5% updates
//! - `c`: 100% reads
//! - `long`: the lock-sensitive scenario: `--clients` short clients send a stream of `GET`s
//!   and `SET`s (half each, uniform keys) while `--long-readers` clients run long readers in
//!   turn (`SCAN` steps of `--scan-count` keys, `KEYS` over the whole key space, `MGET` of
//!   `--mget-keys` keys, which holds every shard's read lock at once) and one client runs
//!   `SAVE` every `--save-every-ms` (a snapshot holds each shard's read lock across its file
//!   write). Runs `--secs` seconds and reports, per command class, throughput and p50, p99 and
//!   max latency: who waits, and for how long.
//!
//! - `sendall`: the pipeline of a client that writes everything before it reads (as
//!   redis-py's `pipeline.execute()` does with one `sendall()`): each of `--clients`
//!   connections sends `--sendall-ops` `SET`s in one write and only then reads the replies,
//!   then the same with `GET`s of those keys; reports requests/s for each (all clients
//!   together, from the first byte sent to the last reply read).
//!
//! Keys are drawn from YCSB's scrambled Zipfian distribution (constant 0.99 by default) over
//! `--records` keys, so a few keys are hot and the hot ones are spread over the key space.
//!
//! ```text
//! cargo run --release -p kvserver --bin ycsb -- --port 6380 --load --workloads a,b,c
//! cargo run --release -p kvserver --bin ycsb -- --port 6380 --workloads a --json
//! cargo run --release -p kvserver --bin ycsb -- --port 6380 --load --workloads long --secs 10
//! ```
//!
//! Every run is bounded: `--ops` operations per workload, and at most `--max-secs` seconds.

use std::time::{Duration, Instant};

use clap::Parser;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A YCSB-like driver for Redis-protocol servers.
#[derive(Parser, Debug, Clone)]
#[command(about)]
struct Cli {
    /// Server host (loopback only).
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    /// Server port.
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// Workloads to run, in order: a (50/50), b (95/5), c (read only), long (long readers and
    /// SAVE beside a SET/GET stream).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c")]
    workloads: Vec<String>,
    /// Number of keys.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Operations per workload (all clients together).
    #[arg(long, default_value_t = 200_000)]
    ops: u64,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 32)]
    clients: u64,
    /// Requests each client keeps in flight (pipelined).
    #[arg(long, default_value_t = 1)]
    pipeline: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Zipfian constant.
    #[arg(long, default_value_t = 0.99)]
    zipf: f64,
    /// Insert the records first (MSET batches).
    #[arg(long)]
    load: bool,
    /// Stop a workload after this many seconds even if not all operations are done.
    #[arg(long, default_value_t = 60)]
    max_secs: u64,
    /// Print one JSON object per workload (per command class for `long`) instead of a table.
    #[arg(long)]
    json: bool,
    /// `long`: seconds to run.
    #[arg(long, default_value_t = 10)]
    secs: u64,
    /// `long`: clients running long readers.
    #[arg(long, default_value_t = 4)]
    long_readers: u64,
    /// `long`: keys per `SCAN` step.
    #[arg(long, default_value_t = 1000)]
    scan_count: u64,
    /// `long`: keys per `MGET`.
    #[arg(long, default_value_t = 500)]
    mget_keys: u64,
    /// `long`: pause between two `SAVE`s, in ms (0: no `SAVE`).
    #[arg(long, default_value_t = 200)]
    save_every_ms: u64,
    /// `sendall`: commands per client, each pipeline sent whole before a reply is read.
    #[arg(long, default_value_t = 1_000_000)]
    sendall_ops: u64,
}

/// YCSB's `ZipfianGenerator` (Gray et al., "Quickly generating billion-record synthetic
/// databases"), over `0..n`.
struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    fn new(n: u64, theta: f64) -> Zipfian {
        let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zetan = zeta(n);
        let zeta2 = zeta(2.min(n));
        Zipfian {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    fn next(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: Zipfian ranks, FNV-hashed over the key space.
fn scrambled(z: &Zipfian, rng: &mut SmallRng, n: u64) -> u64 {
    fnv64(z.next(rng)) % n
}

fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

struct Outcome {
    ops: u64,
    reads: u64,
    updates: u64,
    errors: u64,
    hist: Histogram<u64>,
}

async fn client_loop(
    cli: Cli,
    read_pct: u32,
    ops: u64,
    seed: u64,
    deadline: Instant,
) -> redis::RedisResult<Outcome> {
    let client = redis::Client::open(format!("redis://{}:{}/", cli.host, cli.port))?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let zipf = Zipfian::new(cli.records, cli.zipf);
    let value = vec![b'x'; cli.value_size];
    let mut out = Outcome {
        ops: 0,
        reads: 0,
        updates: 0,
        errors: 0,
        hist: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
    };
    while out.ops < ops && Instant::now() < deadline {
        let batch = cli.pipeline.min(ops - out.ops).max(1);
        let mut p = redis::pipe();
        for _ in 0..batch {
            let key = format!("user{}", scrambled(&zipf, &mut rng, cli.records));
            if rng.gen_range(0..100) < read_pct {
                p.cmd("GET").arg(key);
                out.reads += 1;
            } else {
                p.cmd("SET").arg(key).arg(&value[..]).ignore();
                out.updates += 1;
            }
        }
        let t0 = Instant::now();
        let r: redis::RedisResult<redis::Value> = p.query_async(&mut con).await;
        let us = t0.elapsed().as_micros() as u64;
        if r.is_err() {
            out.errors += 1;
        }
        out.hist.saturating_record(us.max(1));
        out.ops += batch;
    }
    Ok(out)
}

async fn load(cli: &Cli) -> redis::RedisResult<Duration> {
    let t0 = Instant::now();
    let client = redis::Client::open(format!("redis://{}:{}/", cli.host, cli.port))?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let value = vec![b'x'; cli.value_size];
    let mut i = 0;
    while i < cli.records {
        let mut c = redis::cmd("MSET");
        for k in i..(i + 500).min(cli.records) {
            c.arg(format!("user{k}")).arg(&value[..]);
        }
        let () = c.query_async(&mut con).await?;
        i += 500;
    }
    Ok(t0.elapsed())
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if !cli.host.is_loopback() {
        eprintln!("ycsb: loopback hosts only");
        std::process::exit(2);
    }
    if cli.records == 0 || cli.clients == 0 {
        eprintln!("ycsb: --records and --clients must be positive");
        std::process::exit(2);
    }
    if cli.load {
        match load(&cli).await {
            Ok(t) => eprintln!("ycsb: loaded {} records in {t:.1?}", cli.records),
            Err(e) => {
                eprintln!("ycsb: load failed: {e}");
                std::process::exit(1);
            }
        }
    }
    let mut header = cli.json;
    for w in &cli.workloads {
        let read_pct = match w.to_ascii_lowercase().as_str() {
            "a" => 50,
            "b" => 95,
            "c" => 100,
            "long" => {
                long::run(&cli).await;
                continue;
            }
            "sendall" => {
                sendall::run(&cli).await;
                continue;
            }
            other => {
                eprintln!("ycsb: unknown workload {other:?} (a, b, c or long)");
                std::process::exit(2);
            }
        };
        if !header {
            header = true;
            println!(
                "| workload | ops/s | p50 us | p99 us | p99.9 us | reads | updates | errors |"
            );
            println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        }
        let deadline = Instant::now() + Duration::from_secs(cli.max_secs);
        let t0 = Instant::now();
        let per_client = cli.ops.div_ceil(cli.clients);
        let tasks: Vec<_> = (0..cli.clients)
            .map(|i| {
                tokio::spawn(client_loop(
                    cli.clone(),
                    read_pct,
                    per_client,
                    0x5eed + i,
                    deadline,
                ))
            })
            .collect();
        let mut total = Outcome {
            ops: 0,
            reads: 0,
            updates: 0,
            errors: 0,
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
        };
        for t in tasks {
            match t.await {
                Ok(Ok(o)) => {
                    total.ops += o.ops;
                    total.reads += o.reads;
                    total.updates += o.updates;
                    total.errors += o.errors;
                    let _ = total.hist.add(&o.hist);
                }
                Ok(Err(e)) => {
                    eprintln!("ycsb: client failed: {e}");
                    std::process::exit(1);
                }
                Err(e) => {
                    eprintln!("ycsb: client panicked: {e}");
                    std::process::exit(1);
                }
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let rate = total.ops as f64 / secs;
        let h = &total.hist;
        if cli.json {
            println!(
                "{}",
                serde_json::json!({
                    "workload": w, "ops": total.ops, "secs": secs, "ops_per_sec": rate,
                    "p50_us": h.value_at_quantile(0.5), "p99_us": h.value_at_quantile(0.99),
                    "p999_us": h.value_at_quantile(0.999), "reads": total.reads,
                    "updates": total.updates, "errors": total.errors,
                    "clients": cli.clients, "pipeline": cli.pipeline,
                })
            );
        } else {
            println!(
                "| {} | {:.0} | {} | {} | {} | {} | {} | {} |",
                w.to_ascii_uppercase(),
                rate,
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                total.reads,
                total.updates,
                total.errors
            );
        }
    }
}

/// The `long` workload: long readers and snapshots beside a stream of short writes.
mod long {
    use std::time::{Duration, Instant};

    use hdrhistogram::Histogram;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use redis::aio::MultiplexedConnection;

    use super::Cli;

    /// The command classes, in report order.
    pub const CLASSES: [&str; 6] = ["SET", "GET", "SCAN", "KEYS", "MGET", "SAVE"];

    struct Stats {
        hist: Vec<Histogram<u64>>,
        errors: Vec<u64>,
    }

    impl Stats {
        fn new() -> Stats {
            Stats {
                hist: CLASSES
                    .iter()
                    .map(|_| Histogram::new_with_bounds(1, 600_000_000, 3).unwrap())
                    .collect(),
                errors: vec![0; CLASSES.len()],
            }
        }
        fn merge(&mut self, o: &Stats) {
            for i in 0..CLASSES.len() {
                let _ = self.hist[i].add(&o.hist[i]);
                self.errors[i] += o.errors[i];
            }
        }
    }

    /// Times one command of class `class`.
    async fn timed(
        st: &mut Stats,
        class: usize,
        con: &mut MultiplexedConnection,
        cmd: &redis::Cmd,
    ) -> Option<redis::Value> {
        let t0 = Instant::now();
        let r: redis::RedisResult<redis::Value> = cmd.query_async(con).await;
        st.hist[class].saturating_record((t0.elapsed().as_micros() as u64).max(1));
        match r {
            Ok(v) => Some(v),
            Err(_) => {
                st.errors[class] += 1;
                None
            }
        }
    }

    async fn connect(cli: &Cli) -> MultiplexedConnection {
        let client =
            redis::Client::open(format!("redis://{}:{}/", cli.host, cli.port)).expect("client");
        match client.get_multiplexed_async_connection().await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("ycsb: cannot connect: {e}");
                std::process::exit(1);
            }
        }
    }

    async fn short_client(cli: Cli, seed: u64, until: Instant) -> Stats {
        let mut st = Stats::new();
        let mut con = connect(&cli).await;
        let mut rng = SmallRng::seed_from_u64(seed);
        let value = vec![b'x'; cli.value_size];
        while Instant::now() < until {
            let key = format!("user{}", rng.gen_range(0..cli.records));
            if rng.gen_bool(0.5) {
                let mut c = redis::cmd("SET");
                c.arg(key).arg(&value[..]);
                timed(&mut st, 0, &mut con, &c).await;
            } else {
                let mut c = redis::cmd("GET");
                c.arg(key);
                timed(&mut st, 1, &mut con, &c).await;
            }
        }
        st
    }

    async fn long_reader(cli: Cli, seed: u64, until: Instant) -> Stats {
        let mut st = Stats::new();
        let mut con = connect(&cli).await;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut cursor = 0u64;
        let mut turn = seed as usize;
        while Instant::now() < until {
            turn += 1;
            match turn % 3 {
                0 => {
                    let mut c = redis::cmd("SCAN");
                    c.arg(cursor).arg("COUNT").arg(cli.scan_count);
                    if let Some(redis::Value::Array(v)) = timed(&mut st, 2, &mut con, &c).await {
                        cursor = match v.first() {
                            Some(redis::Value::BulkString(b)) => std::str::from_utf8(b)
                                .ok()
                                .and_then(|s| s.parse().ok())
                                .unwrap_or(0),
                            _ => 0,
                        };
                    }
                }
                1 => {
                    // visits every key, matches none: a long read of every shard
                    let mut c = redis::cmd("KEYS");
                    c.arg("nomatch:*");
                    timed(&mut st, 3, &mut con, &c).await;
                }
                _ => {
                    let mut c = redis::cmd("MGET");
                    for _ in 0..cli.mget_keys {
                        c.arg(format!("user{}", rng.gen_range(0..cli.records)));
                    }
                    timed(&mut st, 4, &mut con, &c).await;
                }
            }
        }
        st
    }

    async fn saver(cli: Cli, until: Instant) -> Stats {
        let mut st = Stats::new();
        let mut con = connect(&cli).await;
        while Instant::now() < until {
            timed(&mut st, 5, &mut con, &redis::cmd("SAVE")).await;
            tokio::time::sleep(Duration::from_millis(cli.save_every_ms)).await;
        }
        st
    }

    pub async fn run(cli: &Cli) {
        let t0 = Instant::now();
        let until = t0 + Duration::from_secs(cli.secs);
        let mut tasks = Vec::new();
        for i in 0..cli.clients {
            tasks.push(tokio::spawn(short_client(cli.clone(), 0x5eed + i, until)));
        }
        for i in 0..cli.long_readers {
            tasks.push(tokio::spawn(long_reader(cli.clone(), 0xbeef + i, until)));
        }
        if cli.save_every_ms > 0 {
            tasks.push(tokio::spawn(saver(cli.clone(), until)));
        }
        let mut total = Stats::new();
        for t in tasks {
            match t.await {
                Ok(st) => total.merge(&st),
                Err(e) => {
                    eprintln!("ycsb: client panicked: {e}");
                    std::process::exit(1);
                }
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        if !cli.json {
            println!("| class | ops | ops/s | p50 us | p99 us | max us | errors |");
            println!("|---|---:|---:|---:|---:|---:|---:|");
        }
        for (i, class) in CLASSES.iter().enumerate() {
            let h = &total.hist[i];
            if h.is_empty() {
                continue;
            }
            let rate = h.len() as f64 / secs;
            if cli.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "workload": "long", "class": class, "ops": h.len(), "secs": secs,
                        "ops_per_sec": rate, "p50_us": h.value_at_quantile(0.5),
                        "p99_us": h.value_at_quantile(0.99), "max_us": h.max(),
                        "errors": total.errors[i], "clients": cli.clients,
                        "long_readers": cli.long_readers,
                    })
                );
            } else {
                println!(
                    "| {class} | {} | {rate:.0} | {} | {} | {} | {} |",
                    h.len(),
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.99),
                    h.max(),
                    total.errors[i]
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipfian_is_skewed_and_in_range() {
        let z = Zipfian::new(1000, 0.99);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[scrambled(&z, &mut rng, 1000) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        // the hottest key gets far more than a uniform share (100)
        assert!(counts[0] > 2000, "{}", counts[0]);
    }
}

mod sendall {
    use super::Cli;
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// One client: the whole pipeline in one write, then every reply; the bytes the replies
    /// should take are known in advance (`expect`), and the first bytes are checked.
    async fn one(cli: Cli, req: Vec<u8>, expect: usize, first: Vec<u8>) -> Result<(), String> {
        let mut s = TcpStream::connect((cli.host, cli.port))
            .await
            .map_err(|e| e.to_string())?;
        s.write_all(&req).await.map_err(|e| format!("send: {e}"))?;
        drop(req);
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0usize;
        let mut head = Vec::new();
        while got < expect {
            let n = s.read(&mut buf).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err(format!("closed after {got} of {expect} reply bytes"));
            }
            if head.len() < first.len() {
                head.extend_from_slice(&buf[..n.min(first.len() - head.len())]);
            }
            got += n;
        }
        if !head.starts_with(&first) || got != expect {
            return Err(format!(
                "unexpected replies: {:?}... ({got} bytes, {expect} expected)",
                String::from_utf8_lossy(&head)
            ));
        }
        Ok(())
    }

    async fn phase(cli: &Cli, class: &str, reqs: Vec<(Vec<u8>, usize, Vec<u8>)>) {
        let n = cli.sendall_ops * cli.clients;
        let t0 = Instant::now();
        let tasks: Vec<_> = reqs
            .into_iter()
            .map(|(req, expect, first)| tokio::spawn(one(cli.clone(), req, expect, first)))
            .collect();
        for t in tasks {
            match tokio::time::timeout(Duration::from_secs(cli.max_secs), t).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    eprintln!("ycsb: sendall {class}: {e}");
                    std::process::exit(1);
                }
                Ok(Err(e)) => {
                    eprintln!("ycsb: sendall client panicked: {e}");
                    std::process::exit(1);
                }
                Err(_) => {
                    eprintln!(
                        "ycsb: sendall {class}: no complete reply within {} s (a server that does not read while it writes stalls here)",
                        cli.max_secs
                    );
                    std::process::exit(1);
                }
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let rate = n as f64 / secs;
        if cli.json {
            println!(
                "{}",
                serde_json::json!({
                    "workload": "sendall", "class": class, "clients": cli.clients,
                    "ops_per_client": cli.sendall_ops, "secs": secs, "ops_per_sec": rate,
                })
            );
        } else {
            println!(
                "sendall {class}: {} clients x {} commands in {secs:.2} s: {rate:.0} requests/s",
                cli.clients, cli.sendall_ops
            );
        }
    }

    pub async fn run(cli: &Cli) {
        let value = vec![b'x'; cli.value_size];
        let vhead = format!("${}\r\n", value.len()).into_bytes();
        let (mut sets, mut gets) = (Vec::new(), Vec::new());
        for c in 0..cli.clients {
            let mut set = Vec::new();
            let mut get = Vec::new();
            for i in 0..cli.sendall_ops {
                let k = format!("sendall:{c}:{}", i % cli.records);
                let kh = format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n", k.len());
                set.extend_from_slice(kh.as_bytes());
                set.extend_from_slice(&vhead);
                set.extend_from_slice(&value);
                set.extend_from_slice(b"\r\n");
                get.extend_from_slice(
                    format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len()).as_bytes(),
                );
            }
            let n = cli.sendall_ops as usize;
            sets.push((set, 5 * n, b"+OK\r\n".to_vec()));
            let mut first = vhead.clone();
            first.extend_from_slice(&value);
            gets.push((get, n * (vhead.len() + value.len() + 2), first));
        }
        phase(cli, "SET", sets).await;
        phase(cli, "GET", gets).await;
    }
}
