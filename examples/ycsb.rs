//! `ycsb`: a small YCSB-like load driver for any Redis-protocol server (the `kvserver`
//! example or a real `redis-server`), using the `redis` crate as the client.
//!
//! Workloads (as in YCSB's core workloads, on `user<N>` keys with `--value-size` values):
//! - `a`: 50% reads, 50% updates
//! - `b`: 95% reads, 5% updates
//! - `c`: 100% reads
//!
//! Keys are drawn from YCSB's scrambled Zipfian distribution (constant 0.99 by default) over
//! `--records` keys, so a few keys are hot and the hot ones are spread over the key space.
//!
//! ```text
//! cargo run --release --example ycsb -- --port 6380 --load --workloads a,b,c
//! cargo run --release --example ycsb -- --port 6380 --workloads a --json
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
    /// Workloads to run, in order: a (50/50), b (95/5), c (read only).
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
    /// Print one JSON object per workload instead of a table.
    #[arg(long)]
    json: bool,
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
    if !cli.json {
        println!("| workload | ops/s | p50 us | p99 us | p99.9 us | reads | updates | errors |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    }
    for w in &cli.workloads {
        let read_pct = match w.to_ascii_lowercase().as_str() {
            "a" => 50,
            "b" => 95,
            "c" => 100,
            other => {
                eprintln!("ycsb: unknown workload {other:?} (a, b or c)");
                std::process::exit(2);
            }
        };
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
