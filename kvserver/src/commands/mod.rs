//! Command dispatch: checks a request's name and arity against [`COMMANDS`], then hands it to
//! the module of its type (as Redis' `t_string.c`, `t_hash.c`, ...): `strings`, `lists`,
//! `hashes`, `sets`, `zsets`, `keys` (commands on keys of any type), `server`
//! (server and connection commands). Each checks
//! its arguments, calls the store and encodes the reply. No lock is touched here directly; the
//! store does that.

mod blocking;
mod connection;
mod debug;
mod hashes;
mod hooks;
mod keys;
mod list_moves;
mod lists;
mod server;
mod set_ops;
mod sets;
mod sort;
mod strings;
mod tx;
mod zset_ops;
mod zset_ranges;

pub use tx::unwatch;
mod zsets;

use std::fmt::Write as _;
use std::sync::Arc;

use crate::lock::ShardLock;
use crate::resp::{self, Args};
use crate::shared::{ClientInfo, Shared};
use crate::store::{Shard, OOM};
use crate::value::Value;

/// The `seq` a command leaves when its reply shows data but it logged nothing (a read, or a
/// write that changed nothing): the connection must not send it if a log failure may have
/// undone what it saw.
pub const READ: u64 = u64::MAX;

/// The memory limit's evictions before a command (see [`crate::store::Store::evict`]), each
/// told as an `evicted` keyspace notification when those are on; `false`: still over the
/// limit.
async fn evict<L: ShardLock<Shard>>(shared: &Shared<L>) -> bool {
    let flags = shared
        .notify_flags
        .load(std::sync::atomic::Ordering::Relaxed);
    if flags & crate::notify::EVICTED == 0 {
        return shared.store.evict().await;
    }
    let mut keys = Vec::new();
    let ok = shared.store.evict_collecting(Some(&mut keys)).await;
    for k in &keys {
        crate::notify::notify(&shared.pubsub, flags, crate::notify::EVICTED, "evicted", k);
    }
    ok
}

/// Whether the connection goes on after this command.
pub enum Flow {
    Continue,
    Close,
    /// The command blocked (`BLPOP` on empty lists): the connection runs nothing more until
    /// this brings the reply (served or timed out); dropping it unblocks the client.
    Block(crate::blocking::Blocked),
}

const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

/// A command name of up to 16 bytes, upper-cased and zero-padded, read as a number: how
/// [`spec_index`] finds it (`None`: longer, so unknown).
fn packed_name(name: &[u8]) -> Option<u128> {
    let mut b = [0u8; 16];
    if name.len() > b.len() {
        return None;
    }
    for (d, s) in b.iter_mut().zip(name) {
        *d = s.to_ascii_uppercase();
    }
    Some(u128::from_le_bytes(b))
}

fn wrong_args(out: &mut Vec<u8>, name: &[u8]) {
    resp::error(
        out,
        &format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name).to_lowercase()
        ),
    );
}

fn unknown(out: &mut Vec<u8>, args: &Args) {
    let mut msg = format!(
        "ERR unknown command '{}', with args beginning with: ",
        String::from_utf8_lossy(&args[0][..args[0].len().min(128)])
    );
    for a in args.iter().skip(1).take(8) {
        let _ = write!(msg, "'{}' ", String::from_utf8_lossy(&a[..a.len().min(64)]));
    }
    resp::error(out, &msg);
}

/// `arity` as in Redis' command table: exact if positive, a minimum if negative.
fn arity_ok(args: &Args, arity: isize) -> bool {
    let n = args.len() as isize;
    if arity >= 0 {
        n == arity
    } else {
        n >= -arity
    }
}

/// Runs one request and appends its reply to `out`. A write sets `seq` to the sequence
/// number of its log record: the connection must not send the reply before [`crate::aof::Log::wait`]
/// says that record is written (and must replace the reply by an error if it failed). After
/// it, the clients blocked on the keys it (or the transaction it ends) wrote are served.
pub async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    let flow = dispatch(shared, client, args, out, seq, false).await;
    if shared.blocking.has_ready() {
        blocking::serve_ready(shared).await;
    }
    flow
}

/// [`execute`] without the serving of blocked clients (`nested`: a command `EXEC` runs).
async fn dispatch<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
    nested: bool,
) -> Flow {
    let packed = packed_name(&args[0]).unwrap_or(0);
    let upper = packed.to_le_bytes();
    let name = &upper[..if packed == 0 { 0 } else { args[0].len() }];
    if hooks::refused(shared, client, name, packed, args, out) {
        return Flow::Continue;
    }
    let in_multi =
        client.multi.load(std::sync::atomic::Ordering::Relaxed) != crate::shared::NOT_IN_MULTI;
    if in_multi && !tx::runs_in_multi(name) {
        // Queued under the memory limit as Redis queues: a `denyoom` command is refused (and
        // the transaction with it) while nothing can be evicted.
        if spec(name).is_some_and(|s| s.deny_oom) && !evict(shared).await {
            tx::refuse(client, OOM, out);
            return Flow::Continue;
        }
        tx::queue(client, name, std::mem::take(args), out);
        return Flow::Continue;
    }
    let Some(index) = spec_index_packed(packed, args[0].len()) else {
        unknown(out, args);
        return Flow::Continue;
    };
    let spec = &COMMANDS[index];
    client.last_cmd.store(
        command_id(index, args),
        std::sync::atomic::Ordering::Relaxed,
    );
    if !arity_ok(args, spec.arity) {
        shared.stats.count_command(index, true);
        wrong_args(out, &args[0]);
        return Flow::Continue;
    }
    // The memory limit (Redis' `performEvictions` before every command): evict what the
    // policy allows; refuse a `denyoom` command (an `EXEC` that queued one) if still over.
    if shared.store.maxmemory() != 0
        && !evict(shared).await
        && (spec.deny_oom || (name == b"EXEC" && in_multi && tx::queued_deny_oom(client)))
    {
        shared.stats.count_command(index, true);
        if name == b"EXEC" {
            tx::abort(shared, client, OOM, out);
        } else {
            resp::error(out, OOM);
        }
        return Flow::Continue;
    }
    shared.stats.count_command(index, false);
    if spec.data {
        *seq = READ;
    }
    // SORT writes only its STORE destination, which it touches itself; a blocking command
    // and SMOVE flag the watchers of what they change themselves, when they change it.
    if spec.write && spec.module != Module::Sort {
        if shared.watches.any() && !spec.blocking && spec.name != "smove" {
            tx::touch(shared, spec, args).await;
        }
        match name {
            b"APPEND" | b"SETRANGE" | b"SETBIT" => shared.raw_strings.mark(&args[1]),
            b"FLUSHALL" | b"FLUSHDB" => shared.raw_strings.forget(None::<std::iter::Empty<&[u8]>>),
            _ => shared.raw_strings.forget(Some(tx::keys_of(spec, args))),
        }
    }
    // Redis feeds MONITOR after the command ran (so an EXEC after the commands it ran).
    let line = if shared.pubsub.monitored() && !spec.flags.contains(&"admin") {
        Some(crate::pubsub::monitor_line(
            &client.addr.to_string(),
            &crate::pubsub::redacted(name, args),
        ))
    } else {
        None
    };
    let notify = shared
        .notify_flags
        .load(std::sync::atomic::Ordering::Relaxed);
    if spec.blocking {
        // A command that blocks is shown once, when it first runs (as Redis shows it), not
        // once it is served.
        if let Some(line) = line {
            shared.pubsub.feed_monitors(&line);
        }
        return blocking::execute(shared, client, name, args, out, seq, nested).await;
    }
    // The keys a write may make ready for blocked clients (taken before the command, which
    // may consume its arguments).
    let wakes = (spec.write && shared.blocking.any()).then(|| blocking::written_keys(spec, args));
    let flow = if notify != 0 && spec.write {
        hooks::notifying(shared, client, spec, name, args, out, seq, notify).await
    } else if name == b"GET" {
        // The hot read, without `run`'s and the module's dispatch (their futures).
        strings::get(shared, &args[1], out).await;
        Flow::Continue
    } else {
        run(shared, client, spec, name, args, out, seq).await
    };
    if let Some(keys) = wakes {
        shared.blocking.signal(keys.iter().map(|k| &k[..]));
    }
    if let Some(line) = line {
        shared.pubsub.feed_monitors(&line);
    }
    // As Redis' eviction after `CONFIG SET maxmemory`: what is over a lowered limit goes now
    // (and its `evicted` notifications with it), not at the next command.
    if name == b"CONFIG" && shared.store.maxmemory() != 0 {
        evict(shared).await;
    }
    flow
}

pub(super) async fn run<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    spec: &Spec,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
    seq: &mut u64,
) -> Flow {
    match spec.module {
        Module::Tx => {
            tx::execute_tx(shared, client, name, args, out, seq).await;
            Flow::Continue
        }
        Module::PubSub => {
            crate::pubsub::execute(&shared.pubsub, &client.outbox, name, args, out);
            Flow::Continue
        }
        Module::Connection => connection::execute(shared, client, name, args, out).await,
        Module::Sort => {
            sort::execute(shared, name, args, out, seq).await;
            Flow::Continue
        }
        Module::Debug => {
            debug::execute(shared, name, args, out, seq).await;
            Flow::Continue
        }
        Module::Strings => strings::execute(shared, name, args, out, seq).await,
        Module::Lists => lists::execute(shared, name, args, out, seq).await,
        Module::Hashes => hashes::execute(shared, name, args, out, seq).await,
        Module::Sets => sets::execute(shared, name, args, out, seq).await,
        Module::Zsets => zsets::execute(shared, name, args, out, seq).await,
        Module::Keys => keys::execute(shared, name, args, out, seq).await,
        Module::Server => server::execute(shared, name, args, out, seq).await,
    }
}

/// The module a command runs in (by its group; the element scans of every type live with
/// `SCAN`), known at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    Strings,
    Lists,
    Hashes,
    Sets,
    Zsets,
    Keys,
    Tx,
    Server,
    /// `PING`, `ECHO`, `HELLO`, `AUTH`, `CLIENT`, `MONITOR`, `QUIT`, `RESET`, `SELECT`.
    Connection,
    PubSub,
    Sort,
    /// `DEBUG` and `MEMORY`.
    Debug,
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn has_flag(flags: &[&str], flag: &str) -> bool {
    let mut i = 0;
    while i < flags.len() {
        if str_eq(flags[i], flag) {
            return true;
        }
        i += 1;
    }
    false
}

const fn module_of(name: &str, group: &str) -> Module {
    if str_eq(name, "sscan") || str_eq(name, "hscan") || str_eq(name, "zscan") {
        return Module::Keys;
    }
    if str_eq(name, "sort") || str_eq(name, "sort_ro") {
        return Module::Sort;
    }
    if str_eq(name, "debug") || str_eq(name, "memory") {
        return Module::Debug;
    }
    if str_eq(name, "monitor") {
        return Module::Connection;
    }
    let groups: [(&str, Module); 10] = [
        ("transactions", Module::Tx),
        ("string", Module::Strings),
        ("bitmap", Module::Strings),
        ("list", Module::Lists),
        ("hash", Module::Hashes),
        ("set", Module::Sets),
        ("sorted-set", Module::Zsets),
        ("generic", Module::Keys),
        ("connection", Module::Connection),
        ("pubsub", Module::PubSub),
    ];
    let mut i = 0;
    while i < groups.len() {
        if str_eq(groups[i].0, group) {
            return groups[i].1;
        }
        i += 1;
    }
    Module::Server
}

fn reply_int(out: &mut Vec<u8>, r: Result<i64, String>) {
    match r {
        Ok(n) => resp::integer(out, n),
        Err(e) => resp::error(out, &e),
    }
}

fn reply_ok(out: &mut Vec<u8>, r: Result<(), String>) {
    match r {
        Ok(()) => resp::ok(out),
        Err(e) => resp::error(out, &e),
    }
}

/// An error reply for `r`'s error (the success was replied already).
fn reply_err(out: &mut Vec<u8>, r: Result<(), String>) {
    if let Err(e) = r {
        resp::error(out, &e)
    }
}

/// The outcome of a critical section over several shards (`Store::transaction`): its result,
/// and if it succeeded the sequence number of its log record put in `seq` (0: it logged
/// nothing).
fn settle<T>(seq: &mut u64, r: Result<(Result<T, String>, u64), String>) -> Result<T, String> {
    match r {
        Ok((Ok(v), record)) => {
            if record != 0 {
                *seq = record;
            }
            Ok(v)
        }
        Ok((Err(e), _)) | Err(e) => Err(e),
    }
}

/// A read of the value at `key` as one type (`get`: [`Value::list`], [`Value::hash`], ...):
/// `reply` writes the reply from it (`None`: no such key) under the shard's read lock; a key
/// of another type gets `WRONGTYPE`.
async fn read_as<L: ShardLock<Shard>, T: ?Sized>(
    shared: &Shared<L>,
    key: &[u8],
    get: fn(&Value) -> Result<&T, String>,
    out: &mut Vec<u8>,
    reply: impl FnOnce(Option<&T>, &mut Vec<u8>),
) {
    let r = shared
        .store
        .read(key, |v| {
            reply(v.map(get).transpose()?, out);
            Ok(())
        })
        .await;
    reply_err(out, r)
}

/// The RESP2 null array (`*-1`), as `LPOP key count` replies for a missing key.
fn null_array(out: &mut Vec<u8>) {
    resp::null_array(out)
}

/// Members with their scores (`ZRANGE ... WITHSCORES`, `ZPOPMIN` with a count): RESP2 a flat
/// array of member, score, ...; RESP3 an array of [member, double] pairs, as Redis replies.
fn scored_array<'a>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = (&'a [u8], f64)>) {
    let pairs = resp::protocol() == 3;
    resp::array_header(out, if pairs { items.len() } else { 2 * items.len() });
    for (m, s) in items {
        if pairs {
            resp::array_header(out, 2);
        }
        resp::bulk(out, m);
        resp::double(out, s);
    }
}

/// An array of bulk strings.
fn bulk_array<'a>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = &'a [u8]>) {
    resp::array_header(out, items.len());
    for it in items {
        resp::bulk(out, it);
    }
}

/// A `count` argument of `LPOP`/`SPOP`/`ZPOPMIN` and friends, read as Redis reads it.
fn parse_count(a: &[u8]) -> Result<u64, String> {
    match resp::parse_int(a) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err("ERR value is out of range, must be positive".into()),
    }
}

/// Redis' index range (`LRANGE`, `ZRANGE`): negative counts from the end; the inclusive
/// positions within `0..len`, or `None` if empty.
fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        stop + len
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

// ---- the command table ------------------------------------------------------------------

/// One command as `COMMAND` describes it (Redis' fields) and as the dispatcher checks it.
pub struct Spec {
    pub name: &'static str,
    /// Exact if positive, a minimum if negative (Redis' convention).
    pub arity: isize,
    pub flags: &'static [&'static str],
    pub first_key: i64,
    pub last_key: i64,
    pub step: i64,
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    /// Whether its reply shows stored data (see [`READ`]).
    pub data: bool,
    /// Whether `flags` has `write`.
    pub write: bool,
    /// Whether `flags` has `denyoom` (refused over the memory limit).
    pub deny_oom: bool,
    /// Whether `flags` has `blocking`.
    pub blocking: bool,
    /// Where it runs.
    pub module: Module,
}

macro_rules! spec {
    ($name:literal, $arity:expr, [$($flag:literal),*], $first:expr, $last:expr, $step:expr, $group:literal, $since:literal, $cx:literal, $data:expr, $summary:literal) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: &[$($flag),*],
            first_key: $first,
            last_key: $last,
            step: $step,
            group: $group,
            summary: $summary,
            since: $since,
            complexity: $cx,
            data: $data,
            write: has_flag(&[$($flag),*], "write"),
            deny_oom: has_flag(&[$($flag),*], "denyoom"),
            blocking: has_flag(&[$($flag),*], "blocking"),
            module: module_of($name, $group),
        }
    };
}

/// Every command this server knows, as `COMMAND` lists them.
pub const COMMANDS: &[Spec] = &[
    spec!("append", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "2.0.0", "O(1)", true, "Append a value to a key"),
    spec!("auth", -2, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "1.0.0", "O(N) where N is the number of passwords defined for the user", false, "Authenticate to the server"),
    spec!("bgsave", -1, ["admin", "noscript", "no_async_loading"], 0, 0, 0, "server", "1.0.0", "O(N)", false, "Asynchronously save the dataset to disk"),
    spec!("bitcount", -2, ["readonly"], 1, 1, 1, "bitmap", "2.6.0", "O(N)", true, "Count set bits in a string"),
    spec!("blmove", 6, ["write", "denyoom", "noscript", "blocking"], 1, 2, 1, "list", "6.2.0", "O(1)", true, "Pop an element from a list, push it to another list and return it; or block until one is available"),
    spec!("blmpop", -5, ["write", "blocking", "movablekeys"], 0, 0, 0, "list", "7.0.0", "O(N+M) where N is the number of provided keys and M is the number of elements returned.", true, "Pop elements from a list, or block until one is available"),
    spec!("blpop", -3, ["write", "noscript", "blocking"], 1, -2, 1, "list", "2.0.0", "O(N) where N is the number of provided keys.", true, "Remove and get the first element in a list, or block until one is available"),
    spec!("brpop", -3, ["write", "noscript", "blocking"], 1, -2, 1, "list", "2.0.0", "O(N) where N is the number of provided keys.", true, "Remove and get the last element in a list, or block until one is available"),
    spec!("brpoplpush", 4, ["write", "denyoom", "noscript", "blocking"], 1, 2, 1, "list", "2.2.0", "O(1)", true, "Pop an element from a list, push it to another list and return it; or block until one is available"),
    spec!("bzmpop", -5, ["write", "blocking", "movablekeys"], 0, 0, 0, "sorted-set", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", true, "Remove and return members with scores in a sorted set or block until one is available"),
    spec!("bzpopmax", -3, ["write", "noscript", "blocking", "fast"], 1, -2, 1, "sorted-set", "5.0.0", "O(log(N)) with N being the number of elements in the sorted set.", true, "Remove and return the member with the highest score from one or more sorted sets, or block until one is available"),
    spec!("bzpopmin", -3, ["write", "noscript", "blocking", "fast"], 1, -2, 1, "sorted-set", "5.0.0", "O(log(N)) with N being the number of elements in the sorted set.", true, "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available"),
    spec!("client", -2, [], 0, 0, 0, "connection", "2.4.0", "Depends on subcommand.", false, "A container for client connection commands"),
    spec!("command", -1, ["loading", "stale"], 0, 0, 0, "server", "2.8.13", "O(N) where N is the total number of Redis commands", false, "Get array of Redis command details"),
    spec!("config", -2, [], 0, 0, 0, "server", "2.0.0", "Depends on subcommand.", false, "A container for server configuration commands"),
    spec!("copy", -3, ["write", "denyoom"], 1, 2, 1, "generic", "6.2.0", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.", true, "Copy a key"),
    spec!("dbsize", 1, ["readonly", "fast"], 0, 0, 0, "server", "1.0.0", "O(1)", true, "Return the number of keys in the selected database"),
    spec!("debug", -2, ["admin", "noscript", "loading", "stale", "protected"], 0, 0, 0, "server", "1.0.0", "Depends on subcommand.", true, "A container for debugging commands"),
    spec!("decr", 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Decrement the integer value of a key by one"),
    spec!("decrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Decrement the integer value of a key by the given number"),
    spec!("del", -2, ["write"], 1, -1, 1, "generic", "1.0.0", "O(N) where N is the number of keys that will be removed.", true, "Delete a key"),
    spec!("discard", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "2.0.0", "O(N), when N is the number of queued commands", false, "Discard all commands issued after MULTI"),
    spec!("echo", 2, ["fast"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Echo the given string"),
    spec!("exec", 1, ["noscript", "loading", "stale", "skip_slowlog"], 0, 0, 0, "transactions", "1.2.0", "Depends on commands in the transaction", true, "Execute all commands issued after MULTI"),
    spec!("exists", -2, ["readonly", "fast"], 1, -1, 1, "generic", "1.0.0", "O(N) where N is the number of keys to check.", true, "Determine if a key exists"),
    spec!("expire", -3, ["write", "fast"], 1, 1, 1, "generic", "1.0.0", "O(1)", true, "Set a key's time to live in seconds"),
    spec!("expireat", -3, ["write", "fast"], 1, 1, 1, "generic", "1.2.0", "O(1)", true, "Set the expiration for a key as a UNIX timestamp"),
    spec!("expiretime", 2, ["readonly", "fast"], 1, 1, 1, "generic", "7.0.0", "O(1)", true, "Get the expiration Unix timestamp for a key"),
    spec!("flushall", -1, ["write"], 0, 0, 0, "server", "1.0.0", "O(N) where N is the total number of keys in all databases", true, "Remove all keys from all databases"),
    spec!("flushdb", -1, ["write"], 0, 0, 0, "server", "1.0.0", "O(N) where N is the number of keys in the selected database", true, "Remove all keys from the current database"),
    spec!("function", -2, [], 0, 0, 0, "scripting", "7.0.0", "Depends on subcommand.", false, "A container for function commands"),
    spec!("get", 2, ["readonly", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Get the value of a key"),
    spec!("getbit", 3, ["readonly", "fast"], 1, 1, 1, "bitmap", "2.2.0", "O(1)", true, "Returns the bit value at offset in the string value stored at key"),
    spec!("getdel", 2, ["write", "fast"], 1, 1, 1, "string", "6.2.0", "O(1)", true, "Get the value of a key and delete the key"),
    spec!("getex", -2, ["write", "fast"], 1, 1, 1, "string", "6.2.0", "O(1)", true, "Get the value of a key and optionally set its expiration"),
    spec!("getrange", 4, ["readonly"], 1, 1, 1, "string", "2.4.0", "O(N) where N is the length of the returned string.", true, "Get a substring of the string stored at a key"),
    spec!("getset", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Set the string value of a key and return its old value"),
    spec!("hdel", -3, ["write", "fast"], 1, 1, 1, "hash", "2.0.0", "O(N) in the fields removed", true, "Remove fields from a hash"),
    spec!("hello", -1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "6.0.0", "O(1)", false, "Handshake with Redis"),
    spec!("hexists", 3, ["readonly", "fast"], 1, 1, 1, "hash", "2.0.0", "O(1)", true, "Whether a hash has a field"),
    spec!("hget", 3, ["readonly", "fast"], 1, 1, 1, "hash", "2.0.0", "O(1)", true, "The value of a hash field"),
    spec!("hgetall", 2, ["readonly"], 1, 1, 1, "hash", "2.0.0", "O(N) in the hash size", true, "Every field and value of a hash"),
    spec!("hincrby", 4, ["write", "denyoom", "fast"], 1, 1, 1, "hash", "2.0.0", "O(1)", true, "Add an integer to a hash field"),
    spec!("hincrbyfloat", 4, ["write", "denyoom", "fast"], 1, 1, 1, "hash", "2.6.0", "O(1)", true, "Increment the float value of a hash field by the given amount"),
    spec!("hkeys", 2, ["readonly"], 1, 1, 1, "hash", "2.0.0", "O(N) in the hash size", true, "Every field of a hash"),
    spec!("hlen", 2, ["readonly", "fast"], 1, 1, 1, "hash", "2.0.0", "O(1)", true, "The number of fields of a hash"),
    spec!("hmget", -3, ["readonly", "fast"], 1, 1, 1, "hash", "2.0.0", "O(N) in the fields asked", true, "The values of several hash fields"),
    spec!("hmset", -4, ["write", "denyoom", "fast"], 1, 1, 1, "hash", "2.0.0", "O(N) in the fields set", true, "Set several hash fields (replies OK)"),
    spec!("hrandfield", -2, ["readonly"], 1, 1, 1, "hash", "6.2.0", "O(N) where N is the number of fields returned", true, "Get one or multiple random fields from a hash"),
    spec!("hscan", -3, ["readonly"], 1, 1, 1, "hash", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", true, "Incrementally iterate hash fields and associated values"),
    spec!("hset", -4, ["write", "denyoom", "fast"], 1, 1, 1, "hash", "2.0.0", "O(N) in the fields set", true, "Set hash fields; replies how many are new"),
    spec!("hsetnx", 4, ["write", "denyoom", "fast"], 1, 1, 1, "hash", "2.0.0", "O(1)", true, "Set the value of a hash field, only if the field does not exist"),
    spec!("hstrlen", 3, ["readonly", "fast"], 1, 1, 1, "hash", "3.2.0", "O(1)", true, "Get the length of the value of a hash field"),
    spec!("hvals", 2, ["readonly"], 1, 1, 1, "hash", "2.0.0", "O(N) in the hash size", true, "Every value of a hash"),
    spec!("incr", 2, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Increment the integer value of a key by one"),
    spec!("incrby", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Increment the integer value of a key by the given amount"),
    spec!("incrbyfloat", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "2.6.0", "O(1)", true, "Increment the float value of a key by the given amount"),
    spec!("info", -1, ["loading", "stale"], 0, 0, 0, "server", "1.0.0", "O(1)", false, "Get information and statistics about the server"),
    spec!("keys", 2, ["readonly"], 0, 0, 0, "generic", "1.0.0", "O(N) with N being the number of keys in the database", true, "Find all keys matching the given pattern"),
    spec!("lastsave", 1, ["loading", "stale", "fast"], 0, 0, 0, "server", "1.0.0", "O(1)", false, "Get the UNIX time stamp of the last successful save to disk"),
    spec!("lcs", -3, ["readonly"], 1, 2, 1, "string", "7.0.0", "O(N*M) where N and M are the lengths of s1 and s2, respectively", true, "Find longest common substring"),
    spec!("lindex", 3, ["readonly"], 1, 1, 1, "list", "1.0.0", "O(1)", true, "The list element at an index"),
    spec!("linsert", 5, ["write", "denyoom"], 1, 1, 1, "list", "2.2.0", "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).", true, "Insert an element before or after another element in a list"),
    spec!("llen", 2, ["readonly", "fast"], 1, 1, 1, "list", "1.0.0", "O(1)", true, "The length of a list"),
    spec!("lmove", 5, ["write", "denyoom"], 1, 2, 1, "list", "6.2.0", "O(1)", true, "Pop an element from a list, push it to another list and return it"),
    spec!("lmpop", -4, ["write", "movablekeys"], 0, 0, 0, "list", "7.0.0", "O(N+M) where N is the number of provided keys and M is the number of elements returned.", true, "Pop elements from a list"),
    spec!("lpop", -2, ["write", "fast"], 1, 1, 1, "list", "1.0.0", "O(N) in the elements popped", true, "Remove and return elements from the head of a list"),
    spec!("lpos", -3, ["readonly"], 1, 1, 1, "list", "6.0.6", "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.", true, "Return the index of matching elements on a list"),
    spec!("lpush", -3, ["write", "denyoom", "fast"], 1, 1, 1, "list", "1.0.0", "O(N) in the elements pushed", true, "Insert elements at the head of a list"),
    spec!("lpushx", -3, ["write", "denyoom", "fast"], 1, 1, 1, "list", "2.2.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", true, "Prepend an element to a list, only if the list exists"),
    spec!("lrange", 4, ["readonly"], 1, 1, 1, "list", "1.0.0", "O(S+N): S the start offset, N the elements returned", true, "A range of list elements by index"),
    spec!("lrem", 4, ["write"], 1, 1, 1, "list", "1.0.0", "O(N+M) where N is the length of the list and M is the number of elements removed.", true, "Remove elements from a list"),
    spec!("lset", 4, ["write", "denyoom"], 1, 1, 1, "list", "1.0.0", "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).", true, "Set the value of an element in a list by its index"),
    spec!("ltrim", 4, ["write"], 1, 1, 1, "list", "1.0.0", "O(N) where N is the number of elements to be removed by the operation.", true, "Trim a list to the specified range"),
    spec!("memory", -2, [], 0, 0, 0, "server", "4.0.0", "Depends on subcommand.", true, "A container for memory diagnostics commands"),
    spec!("mget", -2, ["readonly", "fast"], 1, -1, 1, "string", "1.0.0", "O(N) where N is the number of keys to retrieve.", true, "Get the values of all the given keys"),
    spec!("monitor", 1, ["admin", "noscript", "loading", "stale"], 0, 0, 0, "server", "1.0.0", "O(1)", false, "Listen for all requests received by the server in real-time"),
    spec!("mset", -3, ["write", "denyoom"], 1, -1, 2, "string", "1.0.1", "O(N) where N is the number of keys to set.", true, "Set multiple keys to multiple values"),
    spec!("msetnx", -3, ["write", "denyoom"], 1, -1, 2, "string", "1.0.1", "O(N) where N is the number of keys to set.", true, "Set multiple keys to multiple values, only if none of the keys exist"),
    spec!("multi", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "1.2.0", "O(1)", false, "Mark the start of a transaction block"),
    spec!("object", -2, [], 0, 0, 0, "generic", "2.2.3", "Depends on subcommand.", true, "A container for object introspection commands"),
    spec!("persist", 2, ["write", "fast"], 1, 1, 1, "generic", "2.2.0", "O(1)", true, "Remove the expiration from a key"),
    spec!("pexpire", -3, ["write", "fast"], 1, 1, 1, "generic", "2.6.0", "O(1)", true, "Set a key's time to live in milliseconds"),
    spec!("pexpireat", -3, ["write", "fast"], 1, 1, 1, "generic", "2.6.0", "O(1)", true, "Set the expiration for a key as a UNIX timestamp specified in milliseconds"),
    spec!("pexpiretime", 2, ["readonly", "fast"], 1, 1, 1, "generic", "7.0.0", "O(1)", true, "Get the expiration Unix timestamp for a key in milliseconds"),
    spec!("ping", -1, ["fast"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Ping the server"),
    spec!("psetex", 4, ["write", "denyoom"], 1, 1, 1, "string", "2.6.0", "O(1)", true, "Set the value and expiration in milliseconds of a key"),
    spec!("psubscribe", -2, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, "pubsub", "2.0.0", "O(N) where N is the number of patterns to subscribe to.", false, "Listen for messages published to channels matching the given patterns"),
    spec!("pttl", 2, ["readonly", "fast"], 1, 1, 1, "generic", "2.6.0", "O(1)", true, "Get the time to live for a key in milliseconds"),
    spec!("publish", 3, ["pubsub", "loading", "stale", "fast", "may_replicate"], 0, 0, 0, "pubsub", "2.0.0", "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).", false, "Post a message to a channel"),
    spec!("pubsub", -2, [], 0, 0, 0, "pubsub", "2.8.0", "Depends on subcommand.", false, "A container for Pub/Sub commands"),
    spec!("punsubscribe", -1, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, "pubsub", "2.0.0", "O(N) where N is the number of patterns to unsubscribe.", false, "Stop listening for messages posted to channels matching the given patterns"),
    spec!("quit", -1, ["allow_busy", "noscript", "loading", "stale", "fast", "no_auth"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Close the connection"),
    spec!("randomkey", 1, ["readonly"], 0, 0, 0, "generic", "1.0.0", "O(1)", true, "Return a random key from the keyspace"),
    spec!("rename", 3, ["write"], 1, 2, 1, "generic", "1.0.0", "O(1)", true, "Rename a key"),
    spec!("renamenx", 3, ["write", "fast"], 1, 2, 1, "generic", "1.0.0", "O(1)", true, "Rename a key, only if the new key does not exist"),
    spec!("reset", 1, ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], 0, 0, 0, "connection", "6.2.0", "O(1)", false, "Reset the connection"),
    spec!("rpop", -2, ["write", "fast"], 1, 1, 1, "list", "1.0.0", "O(N) in the elements popped", true, "Remove and return elements from the tail of a list"),
    spec!("rpoplpush", 3, ["write", "denyoom"], 1, 2, 1, "list", "1.2.0", "O(1)", true, "Remove the last element in a list, prepend it to another list and return it"),
    spec!("rpush", -3, ["write", "denyoom", "fast"], 1, 1, 1, "list", "1.0.0", "O(N) in the elements pushed", true, "Insert elements at the tail of a list"),
    spec!("rpushx", -3, ["write", "denyoom", "fast"], 1, 1, 1, "list", "2.2.0", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", true, "Append an element to a list, only if the list exists"),
    spec!("sadd", -3, ["write", "denyoom", "fast"], 1, 1, 1, "set", "1.0.0", "O(N) in the members added", true, "Add members to a set"),
    spec!("save", 1, ["admin", "noscript", "no_async_loading", "no_multi"], 0, 0, 0, "server", "1.0.0", "O(N) where N is the total number of keys in all databases", false, "Synchronously save the dataset to disk"),
    spec!("scan", -2, ["readonly"], 0, 0, 0, "generic", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", true, "Incrementally iterate the keys space"),
    spec!("scard", 2, ["readonly", "fast"], 1, 1, 1, "set", "1.0.0", "O(1)", true, "The number of members of a set"),
    spec!("sdiff", -2, ["readonly"], 1, -1, 1, "set", "1.0.0", "O(N) where N is the total number of elements in all given sets.", true, "Subtract multiple sets"),
    spec!("sdiffstore", -3, ["write", "denyoom"], 1, -1, 1, "set", "1.0.0", "O(N) where N is the total number of elements in all given sets.", true, "Subtract multiple sets and store the resulting set in a key"),
    spec!("select", 2, ["loading", "stale", "fast"], 0, 0, 0, "connection", "1.0.0", "O(1)", false, "Change the selected database for the current connection"),
    spec!("set", -3, ["write", "denyoom"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Set the string value of a key"),
    spec!("setbit", 4, ["write", "denyoom"], 1, 1, 1, "bitmap", "2.2.0", "O(1)", true, "Sets or clears the bit at offset in the string value stored at key"),
    spec!("setex", 4, ["write", "denyoom"], 1, 1, 1, "string", "2.0.0", "O(1)", true, "Set the value and expiration of a key"),
    spec!("setnx", 3, ["write", "denyoom", "fast"], 1, 1, 1, "string", "1.0.0", "O(1)", true, "Set the value of a key, only if the key does not exist"),
    spec!("setrange", 4, ["write", "denyoom"], 1, 1, 1, "string", "2.2.0", "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.", true, "Overwrite part of a string at key starting at the specified offset"),
    spec!("shutdown", -1, ["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"], 0, 0, 0, "server", "1.0.0", "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)", false, "Synchronously save the dataset to disk and then shut down the server"),
    spec!("sinter", -2, ["readonly"], 1, -1, 1, "set", "1.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", true, "Intersect multiple sets"),
    spec!("sintercard", -3, ["readonly", "movablekeys"], 0, 0, 0, "set", "7.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", true, "Intersect multiple sets and return the cardinality of the result"),
    spec!("sinterstore", -3, ["write", "denyoom"], 1, -1, 1, "set", "1.0.0", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", true, "Intersect multiple sets and store the resulting set in a key"),
    spec!("sismember", 3, ["readonly", "fast"], 1, 1, 1, "set", "1.0.0", "O(1)", true, "Whether a set has a member"),
    spec!("smembers", 2, ["readonly"], 1, 1, 1, "set", "1.0.0", "O(N) in the set size", true, "Every member of a set"),
    spec!("smismember", -3, ["readonly", "fast"], 1, 1, 1, "set", "6.2.0", "O(N) where N is the number of elements being checked for membership", true, "Returns the membership associated with the given elements for a set"),
    spec!("smove", 4, ["write", "fast"], 1, 2, 1, "set", "1.0.0", "O(1)", true, "Move a member from one set to another"),
    spec!("sort", -2, ["write", "denyoom", "movablekeys"], 1, 1, 1, "generic", "1.0.0", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).", true, "Sort the elements in a list, set or sorted set"),
    spec!("sort_ro", -2, ["readonly", "movablekeys"], 1, 1, 1, "generic", "7.0.0", "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).", true, "Sort the elements in a list, set or sorted set. Read-only variant of SORT."),
    spec!("spop", -2, ["write", "fast"], 1, 1, 1, "set", "1.0.0", "O(N) in the members popped", true, "Remove and return random members of a set"),
    spec!("spublish", 3, ["pubsub", "loading", "stale", "fast", "may_replicate"], 1, 1, 1, "pubsub", "7.0.0", "O(N) where N is the number of clients subscribed to the receiving shard channel.", false, "Post a message to a shard channel"),
    spec!("srandmember", -2, ["readonly"], 1, 1, 1, "set", "1.0.0", "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.", true, "Get one or multiple random members from a set"),
    spec!("srem", -3, ["write", "fast"], 1, 1, 1, "set", "1.0.0", "O(N) in the members removed", true, "Remove members from a set"),
    spec!("sscan", -3, ["readonly"], 1, 1, 1, "set", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", true, "Incrementally iterate Set elements"),
    spec!("ssubscribe", -2, ["pubsub", "noscript", "loading", "stale"], 1, -1, 1, "pubsub", "7.0.0", "O(N) where N is the number of shard channels to subscribe to.", false, "Listen for messages published to the given shard channels"),
    spec!("strlen", 2, ["readonly", "fast"], 1, 1, 1, "string", "2.2.0", "O(1)", true, "Get the length of the value stored in a key"),
    spec!("subscribe", -2, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, "pubsub", "2.0.0", "O(N) where N is the number of channels to subscribe to.", false, "Listen for messages published to the given channels"),
    spec!("substr", 4, ["readonly"], 1, 1, 1, "string", "1.0.0", "O(N) where N is the length of the returned string.", true, "Get a substring of the string stored at a key"),
    spec!("sunion", -2, ["readonly"], 1, -1, 1, "set", "1.0.0", "O(N) where N is the total number of elements in all given sets.", true, "Add multiple sets"),
    spec!("sunionstore", -3, ["write", "denyoom"], 1, -1, 1, "set", "1.0.0", "O(N) where N is the total number of elements in all given sets.", true, "Add multiple sets and store the resulting set in a key"),
    spec!("sunsubscribe", -1, ["pubsub", "noscript", "loading", "stale"], 1, -1, 1, "pubsub", "7.0.0", "O(N) where N is the number of shard channels to unsubscribe.", false, "Stop listening for messages posted to the given shard channels"),
    spec!("time", 1, ["loading", "stale", "fast"], 0, 0, 0, "server", "2.6.0", "O(1)", false, "Return the current server time"),
    spec!("touch", -2, ["readonly", "fast"], 1, -1, 1, "generic", "3.2.1", "O(N) where N is the number of keys that will be touched.", true, "Alters the last access time of a key(s). Returns the number of existing keys specified."),
    spec!("ttl", 2, ["readonly", "fast"], 1, 1, 1, "generic", "1.0.0", "O(1)", true, "Get the time to live for a key in seconds"),
    spec!("type", 2, ["readonly", "fast"], 1, 1, 1, "generic", "1.0.0", "O(1)", true, "Determine the type stored at key"),
    spec!("unlink", -2, ["write", "fast"], 1, -1, 1, "generic", "4.0.0", "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.", true, "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking."),
    spec!("unsubscribe", -1, ["pubsub", "noscript", "loading", "stale"], 0, 0, 0, "pubsub", "2.0.0", "O(N) where N is the number of channels to unsubscribe.", false, "Stop listening for messages posted to the given channels"),
    spec!("unwatch", 1, ["noscript", "loading", "stale", "fast", "allow_busy"], 0, 0, 0, "transactions", "2.2.0", "O(1)", false, "Forget about all watched keys"),
    spec!("watch", -2, ["noscript", "loading", "stale", "fast", "allow_busy"], 1, -1, 1, "transactions", "2.2.0", "O(1) for every key.", true, "Watch the given keys to determine execution of the MULTI/EXEC block"),
    spec!("zadd", -4, ["write", "denyoom", "fast"], 1, 1, 1, "sorted-set", "1.2.0", "O(log(N)) per member", true, "Add members to a sorted set or change their scores"),
    spec!("zcard", 2, ["readonly", "fast"], 1, 1, 1, "sorted-set", "1.2.0", "O(1)", true, "The number of members of a sorted set"),
    spec!("zcount", 4, ["readonly", "fast"], 1, 1, 1, "sorted-set", "2.0.0", "O(log(N)) with N being the number of elements in the sorted set.", true, "Count the members in a sorted set with scores within the given values"),
    spec!("zdiff", -3, ["readonly", "movablekeys"], 0, 0, 0, "sorted-set", "6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.", true, "Subtract multiple sorted sets"),
    spec!("zdiffstore", -4, ["write", "denyoom", "movablekeys"], 1, 1, 1, "sorted-set", "6.2.0", "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.", true, "Subtract multiple sorted sets and store the resulting sorted set in a new key"),
    spec!("zincrby", 4, ["write", "denyoom", "fast"], 1, 1, 1, "sorted-set", "1.2.0", "O(log(N))", true, "Add to the score of a sorted-set member"),
    spec!("zinter", -3, ["readonly", "movablekeys"], 0, 0, 0, "sorted-set", "6.2.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.", true, "Intersect multiple sorted sets"),
    spec!("zintercard", -3, ["readonly", "movablekeys"], 0, 0, 0, "sorted-set", "7.0.0", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.", true, "Intersect multiple sorted sets and return the cardinality of the result"),
    spec!("zinterstore", -4, ["write", "denyoom", "movablekeys"], 1, 1, 1, "sorted-set", "2.0.0", "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.", true, "Intersect multiple sorted sets and store the resulting sorted set in a new key"),
    spec!("zlexcount", 4, ["readonly", "fast"], 1, 1, 1, "sorted-set", "2.8.9", "O(log(N)) with N being the number of elements in the sorted set.", true, "Count the number of members in a sorted set between a given lexicographical range"),
    spec!("zmpop", -4, ["write", "movablekeys"], 0, 0, 0, "sorted-set", "7.0.0", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", true, "Remove and return members with scores in a sorted set"),
    spec!("zmscore", -3, ["readonly", "fast"], 1, 1, 1, "sorted-set", "6.2.0", "O(N) where N is the number of members being requested.", true, "Get the score associated with the given members in a sorted set"),
    spec!("zpopmax", -2, ["write", "fast"], 1, 1, 1, "sorted-set", "5.0.0", "O(log(N)*M) for M members popped", true, "Remove and return the members with the highest scores"),
    spec!("zpopmin", -2, ["write", "fast"], 1, 1, 1, "sorted-set", "5.0.0", "O(log(N)*M) for M members popped", true, "Remove and return the members with the lowest scores"),
    spec!("zrandmember", -2, ["readonly"], 1, 1, 1, "sorted-set", "6.2.0", "O(N) where N is the number of elements returned", true, "Get one or multiple random elements from a sorted set"),
    spec!("zrange", -4, ["readonly"], 1, 1, 1, "sorted-set", "1.2.0", "O(log(N)+M) for M members returned", true, "A range of sorted-set members by index or score"),
    spec!("zrangebylex", -4, ["readonly"], 1, 1, 1, "sorted-set", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", true, "Return a range of members in a sorted set, by lexicographical range"),
    spec!("zrangebyscore", -4, ["readonly"], 1, 1, 1, "sorted-set", "1.0.5", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", true, "Return a range of members in a sorted set, by score"),
    spec!("zrangestore", -5, ["write", "denyoom"], 1, 2, 1, "sorted-set", "6.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.", true, "Store a range of members from sorted set into another key"),
    spec!("zrank", 3, ["readonly", "fast"], 1, 1, 1, "sorted-set", "2.0.0", "O(log(N))", true, "Determine the index of a member in a sorted set"),
    spec!("zrem", -3, ["write", "fast"], 1, 1, 1, "sorted-set", "1.2.0", "O(M*log(N)) for M members removed", true, "Remove members from a sorted set"),
    spec!("zremrangebylex", 4, ["write"], 1, 1, 1, "sorted-set", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", true, "Remove all members in a sorted set between the given lexicographical range"),
    spec!("zremrangebyrank", 4, ["write"], 1, 1, 1, "sorted-set", "2.0.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", true, "Remove all members in a sorted set within the given indexes"),
    spec!("zremrangebyscore", 4, ["write"], 1, 1, 1, "sorted-set", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.", true, "Remove all members in a sorted set within the given scores"),
    spec!("zrevrange", -4, ["readonly"], 1, 1, 1, "sorted-set", "1.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.", true, "Return a range of members in a sorted set, by index, with scores ordered from high to low"),
    spec!("zrevrangebylex", -4, ["readonly"], 1, 1, 1, "sorted-set", "2.8.9", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", true, "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings."),
    spec!("zrevrangebyscore", -4, ["readonly"], 1, 1, 1, "sorted-set", "2.2.0", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).", true, "Return a range of members in a sorted set, by score, with scores ordered from high to low"),
    spec!("zrevrank", 3, ["readonly", "fast"], 1, 1, 1, "sorted-set", "2.0.0", "O(log(N))", true, "Determine the index of a member in a sorted set, with scores ordered from high to low"),
    spec!("zscan", -3, ["readonly"], 1, 1, 1, "sorted-set", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", true, "Incrementally iterate sorted sets elements and associated scores"),
    spec!("zscore", 3, ["readonly", "fast"], 1, 1, 1, "sorted-set", "1.2.0", "O(1)", true, "The score of a sorted-set member"),
    spec!("zunion", -3, ["readonly", "movablekeys"], 0, 0, 0, "sorted-set", "6.2.0", "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.", true, "Add multiple sorted sets"),
    spec!("zunionstore", -4, ["write", "denyoom", "movablekeys"], 1, 1, 1, "sorted-set", "2.0.0", "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.", true, "Add multiple sorted sets and store the resulting sorted set in a new key"),
];

/// The table entry of an upper-cased command name.
fn spec(upper_name: &[u8]) -> Option<&'static Spec> {
    spec_index(upper_name).map(|i| &COMMANDS[i])
}

/// The index in [`COMMANDS`] of a command name (any case).
fn spec_index(name: &[u8]) -> Option<usize> {
    spec_index_packed(packed_name(name)?, name.len())
}

/// The index in [`COMMANDS`] of a command name of `len` bytes given as [`packed_name`]: looked
/// up in an open-addressing table of the names' packed forms (built once; a probe or two);
/// the length check tells "GET" from "GET\0".
fn spec_index_packed(k: u128, len: usize) -> Option<usize> {
    const SLOTS: usize = 512; // a power of two, several times the commands
    fn slot(k: u128) -> usize {
        let x = (k as u64) ^ ((k >> 64) as u64).rotate_left(29);
        (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) as usize % SLOTS
    }
    static TABLE: std::sync::OnceLock<Vec<(u128, usize)>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = vec![(0u128, usize::MAX); SLOTS];
        for (i, s) in COMMANDS.iter().enumerate() {
            let k = packed_name(s.name.as_bytes()).expect("command names are short");
            let mut at = slot(k);
            while t[at].1 != usize::MAX {
                at = (at + 1) % SLOTS;
            }
            t[at] = (k, i);
        }
        t
    });
    let mut at = slot(k);
    loop {
        match table[at] {
            (_, usize::MAX) => return None,
            (kk, i) if kk == k => return (COMMANDS[i].name.len() == len).then_some(i),
            _ => at = (at + 1) % SLOTS,
        }
    }
}

/// The subcommands `CLIENT LIST` names as `container|sub` in its `cmd=` field.
const SUBCOMMANDS: &[&str] = &[
    "client|id",
    "client|getname",
    "client|setname",
    "client|list",
    "client|info",
    "client|setinfo",
    "client|kill",
    "client|reply",
    "client|help",
    "client|no-evict",
    "client|no-touch",
    "command|count",
    "command|list",
    "command|info",
    "command|docs",
    "debug|sleep",
    "debug|reload",
    "debug|object",
    "memory|usage",
    "memory|stats",
    "pubsub|channels",
    "pubsub|numsub",
    "pubsub|numpat",
    "config|get",
    "config|set",
    "config|resetstat",
    "config|rewrite",
    "function|flush",
    "object|encoding",
    "object|freq",
    "object|idletime",
    "object|refcount",
];

/// Where [`ClientInfo::last_cmd`] numbers [`SUBCOMMANDS`] from.
const SUB_BASE: usize = 1 << 16;

/// The [`ClientInfo::last_cmd`] value of a request for command `index`.
fn command_id(index: usize, args: &Args) -> usize {
    let name = COMMANDS[index].name;
    if let Some(sub) = args.get(1).filter(|_| COMMANDS[index].arity == -2) {
        if let Some(i) = SUBCOMMANDS.iter().position(|s| {
            s.len() == name.len() + 1 + sub.len()
                && s.starts_with(name)
                && s.as_bytes()[name.len() + 1..].eq_ignore_ascii_case(sub)
        }) {
            return SUB_BASE + i;
        }
    }
    index
}

/// The name `CLIENT LIST` shows for a [`ClientInfo::last_cmd`] value (`NULL` before any).
pub fn last_command_name(id: usize) -> &'static str {
    match id {
        i if i < COMMANDS.len() => COMMANDS[i].name,
        i if i >= SUB_BASE && i - SUB_BASE < SUBCOMMANDS.len() => SUBCOMMANDS[i - SUB_BASE],
        _ => "NULL",
    }
}
