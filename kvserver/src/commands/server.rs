//! Server and connection commands (Redis' `server.c`/`networking.c`): `PING`, `ECHO`, `QUIT`,
//! `SELECT`, `CLIENT`, `DBSIZE`, `FLUSHALL`, `SAVE`/`BGSAVE`/`LASTSAVE`, `SHUTDOWN`, `INFO`,
//! `CONFIG GET`, `TIME`, `COMMAND`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{reply_ok, unknown, Flow, SYNTAX};
use super::{spec, Spec, COMMANDS};
use crate::glob;
use crate::lock::ShardLock;
use crate::resp::{self, Args};
use crate::shared::{fsync_name, Settings, Shared, ENCODING_SETTINGS};
use crate::store::{parse_bytes, Policy, Shard};

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let store = &shared.store;
    match name {
        b"DBSIZE" => resp::integer(out, store.dbsize().await as i64),
        b"FLUSHALL" | b"FLUSHDB" => {
            let mode_ok = args.len() == 1
                || (args.len() == 2
                    && (args[1].eq_ignore_ascii_case(b"SYNC")
                        || args[1].eq_ignore_ascii_case(b"ASYNC")));
            if mode_ok {
                reply_ok(out, store.flushall(seq).await);
            } else {
                resp::error(out, SYNTAX);
            }
        }
        b"SAVE" => match store.save().await {
            Ok(_) => resp::ok(out),
            Err(e) => resp::error(out, &e),
        },
        b"BGSAVE" => bgsave(shared, args, out),
        b"LASTSAVE" => resp::integer(out, store.saves.last_save.load(Ordering::Relaxed) as i64),
        b"SHUTDOWN" => return shutdown(shared, args, out).await,
        b"INFO" => {
            let text = info(shared, &args[1..]).await;
            resp::verbatim(out, text.as_bytes());
        }
        b"CONFIG" => config(shared, args, out).await,
        b"TIME" => {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            resp::array_header(out, 2);
            resp::bulk(out, d.as_secs().to_string().as_bytes());
            resp::bulk(out, d.subsec_micros().to_string().as_bytes());
        }
        b"COMMAND" => command(args, out),
        // There are no functions (nor scripts): FLUSH has nothing to delete, LIST nothing to
        // show. Redis' test suite flushes them before each group of tests.
        b"FUNCTION" => match &args[1].to_ascii_uppercase()[..] {
            b"FLUSH" if args.len() == 2 => resp::ok(out),
            b"FLUSH"
                if args.len() == 3
                    && (args[2].eq_ignore_ascii_case(b"SYNC")
                        || args[2].eq_ignore_ascii_case(b"ASYNC")) =>
            {
                resp::ok(out)
            }
            b"FLUSH" => resp::error(out, SYNTAX),
            b"LIST" => resp::array_header(out, 0),
            _ => unknown_subcommand(out, args),
        },
        _ => unknown(out, args),
    }
    Flow::Continue
}

/// `CONFIG GET pattern...` and `CONFIG SET name value...`: the settings of [`Settings`] can be
/// changed; the others (the flags the server was started with) only set to the value they
/// have. `RESETSTAT` zeroes the statistics; `REWRITE` is refused.
async fn config<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) {
    let sub = args[1].to_ascii_uppercase();
    let table = config_table(shared);
    match &sub[..] {
        b"GET" if args.len() >= 3 => {
            let mut hits: Vec<&(String, String)> = Vec::new();
            for pat in &args[2..] {
                let pat = pat.to_ascii_lowercase();
                for entry in &table {
                    if glob::matches(&pat, entry.0.as_bytes())
                        && !hits.iter().any(|h| h.0 == entry.0)
                    {
                        hits.push(entry);
                    }
                }
            }
            resp::map_header(out, hits.len());
            for (k, v) in hits {
                resp::bulk(out, k.as_bytes());
                resp::bulk(out, v.as_bytes());
            }
        }
        b"SET" if args.len() >= 4 && args.len() % 2 == 0 => {
            // Every pair is checked before any is applied.
            let mut changes = Vec::new();
            let mut password = None;
            let mut notify = None;
            let mut memory = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for pair in args[2..].chunks(2) {
                let name = String::from_utf8_lossy(&pair[0]).to_lowercase();
                // A setting named twice (by its alias too) is refused, as Redis 7.0 does.
                let canonical = name
                    .replace("ziplist", "listpack")
                    .replace("slaveof", "replicaof");
                if !seen.insert(canonical) {
                    return resp::error(
                        out,
                        &format!(
                            "ERR CONFIG SET failed (possibly related to argument '{}') - duplicate parameter",
                            String::from_utf8_lossy(&pair[0])
                        ),
                    );
                }
                if name == "notify-keyspace-events" {
                    match crate::notify::parse(&pair[1]) {
                        Some(f) => notify = Some(f),
                        None => return resp::error(out, "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
                    }
                    continue;
                }
                if name == "requirepass" {
                    // An empty password removes it (Redis' `nopass`).
                    password = Some((!pair[1].is_empty()).then(|| pair[1].clone()));
                    continue;
                }
                if let Some(change) = MemorySetting::parse(&name, &pair[1]) {
                    match change {
                        Ok(c) => memory.push(c),
                        Err(why) => {
                            return resp::error(
                                out,
                                &format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"),
                            )
                        }
                    }
                    continue;
                }
                if let Some(setting) = Settings::name(&name) {
                    match shared.settings.check(setting, &pair[1]) {
                        Ok(v) => changes.push((setting, v)),
                        Err(e) => return resp::error(out, &e),
                    }
                    continue;
                }
                match table.iter().find(|(k, _)| *k == name) {
                    Some((_, v)) if v.as_bytes() == &pair[1][..] => {}
                    Some(_) => {
                        return resp::error(
                            out,
                            &format!("ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"),
                        )
                    }
                    None => {
                        return resp::error(
                            out,
                            &format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'"),
                        )
                    }
                }
            }
            for (setting, v) in changes {
                shared.settings.set(setting, v);
            }
            if let Some(p) = password {
                shared.set_password(p);
            }
            if let Some(f) = notify {
                shared.notify_flags.store(f, Ordering::Relaxed);
            }
            for c in memory {
                match c {
                    MemorySetting::Max(b) => shared.store.set_maxmemory(b),
                    MemorySetting::Policy(p) => shared.store.set_policy(p).await,
                    MemorySetting::Samples(n) => shared.store.set_samples(n),
                }
            }
            resp::ok(out)
        }
        b"GET" | b"SET" => wrong_sub_args(out, args),
        b"RESETSTAT" if args.len() == 2 => {
            shared.stats.reset();
            resp::ok(out)
        }
        b"RESETSTAT" => wrong_sub_args(out, args),
        b"REWRITE" => resp::error(
            out,
            "ERR only CONFIG GET, CONFIG SET and CONFIG RESETSTAT are supported by this server",
        ),
        _ => unknown_subcommand(out, args),
    }
}

/// A change of the memory limit's settings, checked.
enum MemorySetting {
    Max(u64),
    Policy(Policy),
    Samples(usize),
}

impl MemorySetting {
    /// `None`: not one of them; `Err`: why the value is refused (Redis' words).
    fn parse(name: &str, value: &[u8]) -> Option<Result<MemorySetting, String>> {
        let v = String::from_utf8_lossy(value);
        Some(match name {
            "maxmemory" => parse_bytes(&v)
                .map(MemorySetting::Max)
                .ok_or_else(|| "argument must be a memory value".into()),
            "maxmemory-policy" => Policy::parse(&v).map(MemorySetting::Policy).ok_or_else(|| {
                "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction".into()
            }),
            "maxmemory-samples" => match v.parse::<usize>() {
                Ok(n) if (1..=64).contains(&n) => Ok(MemorySetting::Samples(n)),
                _ => Err("argument must be between 1 and 64 inclusive".into()),
            },
            _ => return None,
        })
    }
}

/// Every setting `CONFIG GET` shows, with its value now.
fn config_table<L: ShardLock<Shard>>(shared: &Shared<L>) -> Vec<(String, String)> {
    let c = &shared.config;
    let persist = c.persistence.as_ref();
    let mem = shared.store.memory_info();
    let mut table: Vec<(String, String)> = vec![
        ("save".into(), String::new()),
        (
            "appendonly".into(),
            if persist.is_some() { "yes" } else { "no" }.into(),
        ),
        (
            "appendfsync".into(),
            persist.map_or("no", |p| fsync_name(p.fsync)).into(),
        ),
        (
            "dir".into(),
            persist.map_or(String::new(), |p| p.dir.display().to_string()),
        ),
        ("databases".into(), "1".into()),
        ("port".into(), shared.port.to_string()),
        ("bind".into(), c.addr.ip().to_string()),
        (
            "proto-max-bulk-len".into(),
            c.limits.max_bulk_len.to_string(),
        ),
        (
            "requirepass".into(),
            String::from_utf8_lossy(&shared.password().unwrap_or_default()).into_owned(),
        ),
        (
            "notify-keyspace-events".into(),
            crate::notify::format(shared.notify_flags.load(Ordering::Relaxed)),
        ),
        ("maxmemory".into(), mem.maxmemory.to_string()),
        ("maxmemory-policy".into(), mem.policy.name().into()),
        ("maxmemory-samples".into(), mem.samples.to_string()),
        // Redis' defaults, which this server does not change: clients are not counted against
        // the limit, and an eviction cycle is bounded by keys, not by time.
        ("maxmemory-clients".into(), "0".into()),
        ("maxmemory-eviction-tenacity".into(), "10".into()),
        ("cluster-enabled".into(), "no".into()),
        ("daemonize".into(), "no".into()),
        ("replicaof".into(), String::new()),
        ("slaveof".into(), String::new()),
    ];
    for name in ["maxclients", "timeout"]
        .into_iter()
        .chain(ENCODING_SETTINGS.iter().map(|(n, _)| *n))
    {
        let v = shared.settings.get(name).to_string();
        if name.contains("listpack") {
            table.push((name.replace("listpack", "ziplist"), v.clone()));
        }
        table.push((name.into(), v));
    }
    table
}

/// `INFO [section]`: server, clients, stats, persistence, keyspace, lockstats.
async fn info<L: ShardLock<Shard>>(shared: &Shared<L>, sections: &[Vec<u8>]) -> String {
    const DEFAULT: &[&str] = &[
        "server",
        "clients",
        "memory",
        "persistence",
        "stats",
        "replication",
        "cpu",
        "keyspace",
        "lockstats",
    ];
    // No argument: the default sections (with this server's lockstats); `all`/`everything` add
    // commandstats.
    let all = sections
        .iter()
        .any(|x| x.eq_ignore_ascii_case(b"all") || x.eq_ignore_ascii_case(b"everything"));
    let default =
        sections.is_empty() || sections.iter().any(|x| x.eq_ignore_ascii_case(b"default"));
    let want = |s: &str| {
        all || (default && DEFAULT.contains(&s))
            || sections
                .iter()
                .any(|x| x.eq_ignore_ascii_case(s.as_bytes()))
    };
    let st = &shared.stats;
    let mut s = String::new();
    if want("server") {
        let _ = write!(
            s,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nkvserver_version:{}\r\nlock:{}\r\nshards:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nprocess_id:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            L::NAME,
            shared.store.shard_count(),
            shared.port,
            shared.started.elapsed().as_secs(),
            std::process::id(),
        );
    }
    if want("clients") {
        let _ = write!(
            s,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n\r\n",
            st.connected.load(Ordering::Relaxed),
            shared.settings.max_clients(),
            shared.blocking.blocked_clients()
        );
    }
    if want("stats") {
        let _ = write!(
            s,
            "# Stats\r\ntotal_connections_received:{}\r\nrejected_connections:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\nprotocol_errors:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n\r\n",
            st.total_connections.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
            st.commands.load(Ordering::Relaxed),
            st.protocol_errors.load(Ordering::Relaxed),
            shared.store.expired_keys(),
            shared.store.memory_info().evicted,
            st.output_limit_disconnections.load(Ordering::Relaxed),
        );
    }
    if want("memory") {
        memory_section(shared, &mut s);
    }
    if want("replication") {
        s.push_str(
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:0\r\n\r\n",
        );
    }
    if want("cpu") {
        let (user, sys) = cpu_seconds(libc::RUSAGE_SELF);
        let (cuser, csys) = cpu_seconds(libc::RUSAGE_CHILDREN);
        let _ = write!(
            s,
            "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{csys:.6}\r\nused_cpu_user_children:{cuser:.6}\r\n\r\n"
        );
    }
    if want("commandstats") {
        s.push_str("# Commandstats\r\n");
        for (i, spec) in COMMANDS.iter().enumerate() {
            let (calls, rejected) = shared.stats.command_calls(i);
            if calls + rejected > 0 {
                let _ = write!(
                    s,
                    "cmdstat_{}:calls={calls},usec=0,usec_per_call=0.00,rejected_calls={rejected},failed_calls=0\r\n",
                    spec.name
                );
            }
        }
        s.push_str("\r\n");
    }
    if want("persistence") {
        let _ = write!(s, "# Persistence\r\n");
        match shared.store.log() {
            Some(log) => {
                let (size, base) = log.size_and_base().await;
                let ls = log.stats();
                let sv = &shared.store.saves;
                let _ = write!(
                    s,
                    "rdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\naof_last_write_status:{}\r\naof_rollbacks:{}\r\n",
                    log.last_seq().saturating_sub(sv.saved_seq.load(Ordering::Relaxed)),
                    sv.bgsave_in_progress.load(Ordering::Acquire) as u8,
                    sv.last_save.load(Ordering::Relaxed),
                    if sv.last_bgsave_ok.load(Ordering::Relaxed) { "ok" } else { "err" },
                    if log.writes_accepted() { "ok" } else { "err" },
                    log.rollbacks(),
                );
                let _ = write!(
                    s,
                    "aof_enabled:1\r\naof_fsync:{}\r\naof_current_size:{size}\r\naof_base_snapshot:{base}\r\naof_records_written:{}\r\naof_bytes_written:{}\r\naof_batches_written:{}\r\naof_fsyncs:{}\r\naof_rewrites:{}\r\naof_write_errors:{}\r\naof_fsync_errors:{}\r\n\r\n",
                    fsync_name(log.fsync_policy()),
                    ls.records.load(Ordering::Relaxed),
                    ls.bytes.load(Ordering::Relaxed),
                    ls.batches.load(Ordering::Relaxed),
                    ls.fsyncs.load(Ordering::Relaxed),
                    ls.rewrites.load(Ordering::Relaxed),
                    ls.write_errors.load(Ordering::Relaxed),
                    ls.fsync_errors.load(Ordering::Relaxed),
                );
            }
            None => s.push_str("aof_enabled:0\r\n\r\n"),
        }
    }
    if want("keyspace") {
        let ks = shared.store.keyspace().await;
        let _ = write!(s, "# Keyspace\r\n");
        if ks.keys > 0 {
            let _ = write!(
                s,
                "db0:keys={},expires={},avg_ttl=0\r\n",
                ks.keys, ks.expires
            );
        }
        s.push_str("\r\n");
    }
    if want("lockstats") {
        let _ = write!(s, "# Lockstats\r\nlock:{}\r\n", L::NAME);
        for (i, text) in shared.store.lock_stats() {
            for line in text.lines() {
                let _ = write!(s, "shard{i}_{line}\r\n");
            }
        }
        s.push_str("\r\n");
    }
    s
}

fn reply_spec(out: &mut Vec<u8>, s: &Spec) {
    resp::array_header(out, 10);
    resp::bulk(out, s.name.as_bytes());
    resp::integer(out, s.arity as i64);
    resp::set_header(out, s.flags.len());
    for f in s.flags {
        resp::simple(out, f);
    }
    resp::integer(out, s.first_key);
    resp::integer(out, s.last_key);
    resp::integer(out, s.step);
    let cat = format!("@{}", s.group);
    resp::set_header(out, 1);
    resp::simple(out, &cat);
    resp::array_header(out, 0); // tips
    resp::array_header(out, 0); // key specs
    resp::array_header(out, 0); // subcommands
}

fn reply_docs(out: &mut Vec<u8>, s: &Spec) {
    resp::bulk(out, s.name.as_bytes());
    resp::map_header(out, 4);
    for (k, v) in [
        ("summary", s.summary),
        ("since", s.since),
        ("group", s.group),
        ("complexity", s.complexity),
    ] {
        resp::bulk(out, k.as_bytes());
        resp::bulk(out, v.as_bytes());
    }
}

pub(super) fn unknown_subcommand(out: &mut Vec<u8>, args: &Args) {
    resp::error(
        out,
        &format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            String::from_utf8_lossy(&args[1][..args[1].len().min(128)]),
            String::from_utf8_lossy(&args[0]).to_uppercase()
        ),
    );
}

pub(super) fn wrong_sub_args(out: &mut Vec<u8>, args: &Args) {
    resp::error(
        out,
        &format!(
            "ERR wrong number of arguments for '{}|{}' command",
            String::from_utf8_lossy(&args[0]).to_lowercase(),
            String::from_utf8_lossy(&args[1]).to_lowercase()
        ),
    );
}

/// `COMMAND`, `COMMAND COUNT|LIST|INFO|DOCS|GETKEYS`.
fn command(args: &Args, out: &mut Vec<u8>) {
    if args.len() == 1 {
        resp::array_header(out, COMMANDS.len());
        for s in COMMANDS {
            reply_spec(out, s);
        }
        return;
    }
    let sub = args[1].to_ascii_uppercase();
    match &sub[..] {
        b"COUNT" if args.len() == 2 => resp::integer(out, COMMANDS.len() as i64),
        b"LIST" if args.len() == 2 => {
            resp::array_header(out, COMMANDS.len());
            for s in COMMANDS {
                resp::bulk(out, s.name.as_bytes());
            }
        }
        b"INFO" => {
            if args.len() == 2 {
                return command(&vec![args[0].clone()], out);
            }
            resp::array_header(out, args.len() - 2);
            for a in &args[2..] {
                match spec(&a.to_ascii_uppercase()) {
                    Some(s) => reply_spec(out, s),
                    None => resp::null(out),
                }
            }
        }
        b"DOCS" => {
            let found: Vec<&Spec> = if args.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|a| spec(&a.to_ascii_uppercase()))
                    .collect()
            };
            resp::map_header(out, found.len());
            for s in found {
                reply_docs(out, s);
            }
        }
        b"GETKEYS" if args.len() >= 4 => {
            let req: Args = args[2..].to_vec();
            let Some(s) = spec(&req[0].to_ascii_uppercase()) else {
                return resp::error(out, "ERR Invalid command specified");
            };
            if !super::arity_ok(&req, s.arity) {
                return resp::error(out, "ERR Invalid number of arguments specified for command");
            }
            let keys: Vec<&[u8]> = super::tx::keys_of(s, &req).collect();
            if keys.is_empty() {
                return resp::error(out, "ERR The command has no key arguments");
            }
            resp::array_header(out, keys.len());
            keys.into_iter().for_each(|k| resp::bulk(out, k));
        }
        b"COUNT" | b"LIST" | b"GETKEYS" => wrong_sub_args(out, args),
        _ => unknown_subcommand(out, args),
    }
}

/// User and system CPU seconds of `who` (`getrusage`).
fn cpu_seconds(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_utime), secs(u.ru_stime))
}

/// `INFO memory`, Redis' fields from the server's own accounting: `used_memory` is the
/// estimate of the entries (`used_memory_dataset`, what `maxmemory` is compared with) plus the
/// shards' structures (`used_memory_startup`) and the clients' unsent replies and unparsed
/// requests (`mem_clients_normal`, which eviction does not count: `mem_not_counted_for_evict`).
fn memory_section<L: ShardLock<Shard>>(shared: &Shared<L>, s: &mut String) {
    let f = memory_figures(shared);
    let m = shared.store.memory_info();
    let (clients, overhead, used, peak) = (f.clients, f.startup + f.clients, f.used, f.peak);
    let rss = resident_bytes();
    // SAFETY: sysconf has no preconditions.
    let system = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) }.max(0) as u64
        * unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    let pct = |a: u64, b: u64| {
        if b == 0 {
            0.0
        } else {
            a as f64 * 100.0 / b as f64
        }
    };
    let _ = write!(
        s,
        "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_peak_perc:{:.2}%\r\nused_memory_overhead:{overhead}\r\nused_memory_startup:{}\r\nused_memory_dataset:{}\r\nused_memory_dataset_perc:{:.2}%\r\ntotal_system_memory:{system}\r\ntotal_system_memory_human:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\nmem_fragmentation_ratio:{:.2}\r\nmem_not_counted_for_evict:{clients}\r\nmem_clients_normal:{clients}\r\nmem_allocator:libc\r\n\r\n",
        human(used),
        human(rss),
        human(peak),
        pct(used, peak),
        m.startup,
        m.dataset,
        pct(m.dataset as u64, used.saturating_sub(m.startup as u64)),
        human(system),
        m.maxmemory,
        human(m.maxmemory),
        m.policy.name(),
        if used == 0 { 0.0 } else { rss as f64 / used as f64 },
    );
}

/// The memory figures `INFO memory` and `MEMORY STATS` show, in bytes.
pub(super) struct MemoryFigures {
    /// `used_memory`: the three below.
    pub used: u64,
    pub peak: u64,
    pub startup: usize,
    pub dataset: usize,
    /// The clients' unparsed requests and unsent replies.
    pub clients: usize,
}

pub(super) fn memory_figures<L: ShardLock<Shard>>(shared: &Shared<L>) -> MemoryFigures {
    let m = shared.store.memory_info();
    let clients: usize = shared
        .clients()
        .iter()
        .map(|c| c.in_bytes.load(Ordering::Relaxed) + c.outbox.out_bytes.load(Ordering::Relaxed))
        .sum();
    let used = (m.startup + clients + m.dataset) as u64;
    MemoryFigures {
        used,
        peak: shared.store.note_peak(used),
        startup: m.startup,
        dataset: m.dataset,
        clients,
    }
}

/// A byte count as Redis' `bytesToHuman` prints it (`1.50M`).
fn human(n: u64) -> String {
    let units = [
        (1u64 << 50, 'P'),
        (1 << 40, 'T'),
        (1 << 30, 'G'),
        (1 << 20, 'M'),
        (1 << 10, 'K'),
    ];
    match units.iter().find(|(u, _)| n >= *u) {
        Some(&(u, c)) => format!("{:.2}{c}", n as f64 / u as f64),
        None => format!("{n}B"),
    }
}

/// The process's resident set size in bytes (`/proc/self/statm`), 0 where unknown.
pub(super) fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64
}

/// The Redis version this server says it is (`INFO`, `HELLO`): the one whose commands and
/// replies it follows.
pub(super) const REDIS_VERSION: &str = "7.0.0";

/// `BGSAVE [SCHEDULE]`: the `SAVE` in a task of its own (shard read locks one at a time,
/// writers to that shard queue meanwhile); `INFO persistence` shows its progress and outcome.
fn bgsave<L: ShardLock<Shard>>(shared: &Arc<Shared<L>>, args: &Args, out: &mut Vec<u8>) {
    let schedule = match args.len() {
        1 => false,
        2 if args[1].eq_ignore_ascii_case(b"SCHEDULE") => true,
        _ => return resp::error(out, SYNTAX),
    };
    if shared.store.log().is_none() {
        return resp::error(out, "ERR persistence is disabled (--appendonly no)");
    }
    let saves = &shared.store.saves;
    if saves
        .bgsave_in_progress
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        if schedule {
            return resp::simple(out, "Background saving scheduled");
        }
        return resp::error(out, "ERR Background save already in progress");
    }
    let sh = shared.clone();
    tokio::spawn(async move {
        let r = sh.store.save().await;
        if let Err(e) = &r {
            eprintln!("kvserver: BGSAVE failed: {e}");
        }
        let saves = &sh.store.saves;
        saves.last_bgsave_ok.store(r.is_ok(), Ordering::Relaxed);
        saves.bgsave_in_progress.store(false, Ordering::Release);
    });
    resp::simple(out, "Background saving started")
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: a graceful shutdown (the log is flushed
/// and fsynced whatever the options); `SAVE` takes a snapshot first, and its failure cancels
/// the shutdown unless `FORCE` is given. Replies nothing when it goes ahead (the connection
/// closes), as Redis does.
async fn shutdown<L: ShardLock<Shard>>(shared: &Shared<L>, args: &Args, out: &mut Vec<u8>) -> Flow {
    let (mut save, mut nosave, mut force, mut abort, mut now) = (false, false, false, false, false);
    for a in &args[1..] {
        match &a.to_ascii_uppercase()[..] {
            b"SAVE" => save = true,
            b"NOSAVE" => nosave = true,
            b"FORCE" => force = true,
            b"ABORT" => abort = true,
            b"NOW" => now = true,
            _ => {
                resp::error(out, SYNTAX);
                return Flow::Continue;
            }
        }
    }
    if (abort && (save || nosave || force || now)) || (save && nosave) {
        resp::error(out, SYNTAX);
        return Flow::Continue;
    }
    if abort {
        resp::error(out, "ERR No shutdown in progress.");
        return Flow::Continue;
    }
    if save && shared.store.log().is_some() {
        if let Err(e) = shared.store.save().await {
            eprintln!("kvserver: SHUTDOWN SAVE: {e}");
            if !force {
                resp::error(out, "ERR Errors trying to SHUTDOWN. Check logs.");
                return Flow::Continue;
            }
        }
    }
    shared.request_shutdown();
    Flow::Close
}
