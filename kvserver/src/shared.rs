//! What the connections and the commands share: the server's [`Config`], its counters, the
//! [`Shared`] state every connection holds and each client's [`ClientInfo`]. The TCP side
//! ([`crate::server`], `connection`) and [`crate::commands`] use it; it uses none of
//! them, and `commands` never uses the TCP side: the dependency goes one way (server ->
//! connection -> commands -> shared -> store -> aof). What it needs of the command table (its
//! length, a command's name) it is handed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::aof::Fsync;
use crate::lock::LockKind;
use crate::resp::Limits;
use crate::store::{Persistence, Policy, Store, DEFAULT_SAMPLES};

/// Everything the server can be told.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen (the CLI only allows loopback addresses).
    pub addr: SocketAddr,
    pub lock: LockKind,
    pub shards: usize,
    /// `None`: no persistence (`--appendonly no`).
    pub persistence: Option<Persistence>,
    pub limits: Limits,
    pub max_clients: usize,
    /// Unsent replies a client may have before the server stops reading its requests; a
    /// client over it for `output_buffer_grace` without taking any reply is disconnected
    /// (Redis' `client-output-buffer-limit`). 0: no limit.
    pub output_buffer_limit: usize,
    pub output_buffer_grace: Duration,
    /// Close connections idle (no request, or a reply not taken) this long; `None`: never.
    pub idle_timeout: Option<Duration>,
    /// How long shutdown waits for connections to finish their requests.
    pub shutdown_timeout: Duration,
    /// How often the expiry sweep runs.
    pub sweep_interval: Duration,
    /// Print nothing but errors.
    pub quiet: bool,
    /// `requirepass`: the password clients must give `AUTH` (`None`: none needed).
    pub requirepass: Option<Vec<u8>>,
    /// Unsent output (messages, `MONITOR` lines) past which a subscriber or monitor is
    /// disconnected (Redis' `client-output-buffer-limit pubsub` hard limit). 0: no limit.
    pub pubsub_output_buffer_limit: usize,
    /// `maxmemory` in bytes (0: no limit), its policy and `maxmemory-samples`.
    pub maxmemory: u64,
    pub maxmemory_policy: Policy,
    pub maxmemory_samples: usize,
}

impl Config {
    /// Defaults for a server on `addr` without persistence.
    pub fn new(addr: SocketAddr) -> Config {
        Config {
            addr,
            lock: LockKind::Tokio,
            shards: DEFAULT_SHARDS,
            persistence: None,
            limits: Limits::default(),
            max_clients: 10_000,
            output_buffer_limit: DEFAULT_OUTPUT_BUFFER_LIMIT,
            output_buffer_grace: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(300)),
            shutdown_timeout: Duration::from_secs(10),
            sweep_interval: Duration::from_millis(100),
            quiet: false,
            requirepass: None,
            pubsub_output_buffer_limit: crate::pubsub::DEFAULT_PUBSUB_OUTPUT_LIMIT,
            maxmemory: 0,
            maxmemory_policy: Policy::NoEviction,
            maxmemory_samples: DEFAULT_SAMPLES,
        }
    }
}

/// Default of [`Config::output_buffer_limit`].
pub const DEFAULT_OUTPUT_BUFFER_LIMIT: usize = 256 << 20;

/// Shard count when `--shards` is not given (see the README for the measurement).
pub const DEFAULT_SHARDS: usize = 4;

/// Server-wide counters for `INFO`.
#[derive(Default)]
pub struct Stats {
    pub connected: AtomicUsize,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Clients cut off for not taking their replies (`output_buffer_limit`).
    pub output_limit_disconnections: AtomicU64,
    pub commands: AtomicU64,
    pub protocol_errors: AtomicU64,
    /// Per command of the command table (`crate::commands::COMMANDS`, whose length the server
    /// passes to [`Stats::new`]): (calls, rejected calls), for `INFO commandstats`.
    pub per_command: Box<[(AtomicU64, AtomicU64)]>,
}

impl Stats {
    /// Counters for a table of `commands` commands.
    pub fn new(commands: usize) -> Stats {
        Stats {
            per_command: (0..commands).map(|_| Default::default()).collect(),
            ..Default::default()
        }
    }

    /// `CONFIG RESETSTAT`: the counters of `INFO stats` and `INFO commandstats` back to 0
    /// (the connected clients stay counted).
    pub fn reset(&self) {
        for c in [
            &self.total_connections,
            &self.rejected_connections,
            &self.output_limit_disconnections,
            &self.commands,
            &self.protocol_errors,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for (calls, rejected) in self.per_command.iter() {
            calls.store(0, Ordering::Relaxed);
            rejected.store(0, Ordering::Relaxed);
        }
    }

    /// Counts a call of command `index` (`rejected`: refused before it ran, as a wrong arity).
    pub fn count_command(&self, index: usize, rejected: bool) {
        if let Some(c) = self.per_command.get(index) {
            if rejected { &c.1 } else { &c.0 }.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn command_calls(&self, index: usize) -> (u64, u64) {
        self.per_command.get(index).map_or((0, 0), |c| {
            (c.0.load(Ordering::Relaxed), c.1.load(Ordering::Relaxed))
        })
    }
}

/// What every connection shares.
pub struct Shared<L> {
    pub store: Store<L>,
    pub config: Config,
    pub stats: Stats,
    pub started: Instant,
    pub port: u16,
    pub(crate) clients: std::sync::Mutex<std::collections::BTreeMap<u64, Arc<ClientInfo>>>,
    pub(crate) next_client_id: AtomicU64,
    /// Set by `SHUTDOWN`.
    pub(crate) shutdown_requested: tokio::sync::Notify,
    /// The keys clients `WATCH`.
    pub(crate) watches: Watches,
    /// The settings `CONFIG SET` can change (see [`Settings`]).
    pub settings: Settings,
    /// Strings Redis would hold `raw` (see [`RawStrings`]).
    pub raw_strings: RawStrings,
    /// The clients blocked on keys (`BLPOP`, ...).
    pub blocking: Arc<crate::blocking::Blocking>,
    /// Channels, patterns and their subscribers; the monitors.
    pub pubsub: crate::pubsub::PubSub,
    /// `notify-keyspace-events` ([`crate::notify`]'s flags; 0: off).
    pub notify_flags: std::sync::atomic::AtomicU32,
    /// The expiry sweep runs (`DEBUG SET-ACTIVE-EXPIRE 0` stops it).
    pub active_expire: AtomicBool,
    /// Held by the sweep for each of its passes: `DEBUG SET-ACTIVE-EXPIRE 0` takes it after
    /// clearing [`Shared::active_expire`], so that once it has replied no pass is running.
    pub sweep_pass: tokio::sync::Mutex<()>,
    /// `requirepass` (`None`: no password, every client is authenticated).
    pub(crate) password: std::sync::Mutex<Option<Vec<u8>>>,
}

/// The keys whose last write was an in-place change of a string (`APPEND`, `SETRANGE`,
/// `SETBIT`), which Redis keeps in its `raw` encoding whatever the content (so `OBJECT
/// ENCODING` says `raw` for them, as Redis does, until another write to the key). At most
/// [`RawStrings::MAX`] keys are remembered; writes look here only while it is not empty.
#[derive(Default)]
pub struct RawStrings {
    count: AtomicUsize,
    set: std::sync::Mutex<std::collections::HashSet<Vec<u8>>>,
}

impl RawStrings {
    pub const MAX: usize = 10_000;

    pub fn mark(&self, key: &[u8]) {
        let mut s = self.set.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() < Self::MAX {
            s.insert(key.to_vec());
            self.count.store(s.len(), Ordering::Release);
        }
    }

    /// Forgets `keys` (written otherwise); all of them with `None` (`FLUSHALL`).
    pub fn forget<'k>(&self, keys: Option<impl Iterator<Item = &'k [u8]>>) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut s = self.set.lock().unwrap_or_else(|e| e.into_inner());
        match keys {
            Some(keys) => keys.for_each(|k| {
                s.remove(k);
            }),
            None => s.clear(),
        }
        self.count.store(s.len(), Ordering::Release);
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.count.load(Ordering::Acquire) != 0
            && self
                .set
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(key)
    }
}

/// The settings `CONFIG SET` changes at run time: `timeout` (for connections made from then
/// on), `maxclients` (up to what the open files limit allowed at start) and the encoding
/// thresholds `OBJECT ENCODING` reports by (`hash-max-listpack-entries`, ...; the
/// `*-ziplist-*` names are aliases).
pub struct Settings {
    values: std::sync::Mutex<std::collections::BTreeMap<&'static str, i64>>,
    /// The most `maxclients` may be set to.
    pub max_clients_limit: usize,
}

/// The encoding thresholds and their defaults (Redis 7.2's, whose list and set encodings
/// `OBJECT ENCODING` names).
pub const ENCODING_SETTINGS: &[(&str, i64)] = &[
    ("hash-max-listpack-entries", 128),
    ("hash-max-listpack-value", 64),
    ("list-max-listpack-size", -2),
    ("set-max-intset-entries", 512),
    ("set-max-listpack-entries", 128),
    ("set-max-listpack-value", 64),
    ("zset-max-listpack-entries", 128),
    ("zset-max-listpack-value", 64),
];

impl Settings {
    pub fn new(config: &Config) -> Settings {
        let mut values: std::collections::BTreeMap<&'static str, i64> =
            ENCODING_SETTINGS.iter().copied().collect();
        values.insert("maxclients", config.max_clients as i64);
        // Kept in milliseconds (the flag takes fractions; CONFIG shows and takes seconds).
        values.insert(
            "timeout",
            config.idle_timeout.map_or(0, |t| t.as_millis() as i64),
        );
        Settings {
            values: std::sync::Mutex::new(values),
            max_clients_limit: config.max_clients,
        }
    }

    /// The canonical name of a setting `CONFIG SET` can change (aliases resolved).
    pub fn name(name: &str) -> Option<&'static str> {
        let name = name.replace("ziplist", "listpack");
        ["maxclients", "timeout"]
            .into_iter()
            .chain(ENCODING_SETTINGS.iter().map(|(n, _)| *n))
            .find(|n| *n == name)
    }

    /// A setting's value as `CONFIG GET` shows it.
    pub fn get(&self, name: &str) -> i64 {
        let v = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let raw = v.get(name).copied().unwrap_or(0);
        if name == "timeout" {
            raw / 1000
        } else {
            raw
        }
    }

    /// Checks a new value: the error `CONFIG SET` replies, or the number.
    pub fn check(&self, name: &'static str, value: &[u8]) -> Result<i64, String> {
        let bad = |why: &str| {
            Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        };
        let Some(v) = crate::resp::parse_int(value) else {
            return bad("argument couldn't be parsed into an integer");
        };
        match name {
            "maxclients" if v < 1 || v as u64 > self.max_clients_limit as u64 => bad(&format!(
                "must be between 1 and {} (the open files limit at start)",
                self.max_clients_limit
            )),
            "list-max-listpack-size" => Ok(v),
            _ if v < 0 => bad("argument must be a non-negative integer"),
            _ => Ok(v),
        }
    }

    /// Sets a setting to a value `check` accepted (as `CONFIG SET` takes it).
    pub fn set(&self, name: &'static str, value: i64) {
        let raw = if name == "timeout" {
            value.saturating_mul(1000)
        } else {
            value
        };
        self.values
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, raw);
    }

    pub fn max_clients(&self) -> usize {
        self.get("maxclients") as usize
    }

    pub fn idle_timeout(&self) -> Option<Duration> {
        let v = self.values.lock().unwrap_or_else(|e| e.into_inner());
        match v.get("timeout").copied().unwrap_or(0) {
            0 => None,
            ms => Some(Duration::from_millis(ms as u64)),
        }
    }
}

/// Who watches which key (`WATCH`): each watching client's flag, set when another command
/// may have changed the key. Writes look here only while some key is watched.
#[derive(Default)]
pub struct Watches {
    count: AtomicUsize,
    map: std::sync::Mutex<std::collections::HashMap<Vec<u8>, Vec<Arc<AtomicBool>>>>,
}

impl Watches {
    /// Whether any key is watched.
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) != 0
    }

    pub fn add(&self, key: &[u8], flag: &Arc<AtomicBool>) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let list = m.entry(key.to_vec()).or_default();
        if !list.iter().any(|f| Arc::ptr_eq(f, flag)) {
            list.push(flag.clone());
            self.count.fetch_add(1, Ordering::AcqRel);
        }
    }

    pub fn remove(&self, key: &[u8], flag: &Arc<AtomicBool>) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = m.get_mut(key) {
            let before = list.len();
            list.retain(|f| !Arc::ptr_eq(f, flag));
            self.count.fetch_sub(before - list.len(), Ordering::AcqRel);
            if list.is_empty() {
                m.remove(key);
            }
        }
    }

    /// Flags every client that watches one of `keys`.
    pub fn touch<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        let m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys {
            for f in m.get(k).into_iter().flatten() {
                f.store(true, Ordering::Release);
            }
        }
    }

    /// Every watched key.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        m.keys().cloned().collect()
    }
}

/// A client's `MULTI` and `WATCH` state.
#[derive(Default)]
pub struct TxState {
    /// The commands queued since `MULTI`.
    pub queued: Vec<crate::resp::Args>,
    /// A command was refused while queueing: `EXEC` fails with `EXECABORT`.
    pub refused: bool,
    /// The watched keys, each with its state when it was watched (see
    /// [`crate::store::Store::fingerprint`]).
    pub watched: Vec<(Vec<u8>, Option<u64>)>,
    /// Set when a watched key may have changed.
    pub dirty: Arc<AtomicBool>,
}

impl<L> Shared<L> {
    /// Every connected client, by id.
    pub fn clients(&self) -> Vec<Arc<ClientInfo>> {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The password `AUTH` wants (`requirepass`), if any.
    pub fn password(&self) -> Option<Vec<u8>> {
        self.password
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_password(&self, p: Option<Vec<u8>>) {
        *self.password.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }

    /// Asks the server to shut down gracefully (`SHUTDOWN`).
    pub fn request_shutdown(&self) {
        self.shutdown_requested.notify_one();
    }
}

/// What `CLIENT LIST` shows about a connection.
pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub fd: i32,
    pub(crate) name: std::sync::Mutex<Vec<u8>>,
    pub(crate) created: Instant,
    /// Milliseconds since the server started, at the last command.
    pub(crate) last_active_ms: AtomicU64,
    /// What other connections send it (pub/sub messages, `MONITOR` lines, `CLIENT KILL`), its
    /// subscriptions, its protocol version (2 or 3, as `HELLO` chose) and its unsent bytes.
    pub outbox: Arc<crate::pubsub::Outbox>,
    /// `CLIENT REPLY`: one of the `REPLY_*` values.
    pub reply: AtomicU8,
    /// It passed `AUTH` (or connected while no password was required).
    pub authenticated: AtomicBool,
    /// `MONITOR` made it a monitor (`flags=O`).
    pub monitor: AtomicBool,
    /// `CLIENT NO-EVICT` (`flags=e`).
    pub no_evict: AtomicBool,
    /// Bytes of requests read and not parsed yet.
    pub in_bytes: AtomicUsize,
    /// The last command run (the one running, from its own `CLIENT LIST`), as
    /// `crate::commands::last_command_name` reads it; [`NO_COMMAND`] before the first.
    pub last_cmd: AtomicUsize,
    /// `CLIENT SETINFO LIB-NAME` and `LIB-VER`.
    pub(crate) lib: std::sync::Mutex<(String, String)>,
    /// The client is inside `MULTI` (`flags=x`), with this many commands queued.
    pub multi: AtomicUsize,
    /// Its transaction and watches (only its own connection uses it).
    pub(crate) tx: std::sync::Mutex<TxState>,
}

/// [`ClientInfo::last_cmd`] before the first command.
pub const NO_COMMAND: usize = usize::MAX;
/// [`ClientInfo::multi`] outside `MULTI`.
pub const NOT_IN_MULTI: usize = usize::MAX;

/// [`ClientInfo::reply`]: replies are sent (`CLIENT REPLY ON`).
pub const REPLY_ON: u8 = 0;
/// `CLIENT REPLY OFF`: no reply is sent until `CLIENT REPLY ON`.
pub const REPLY_OFF: u8 = 1;
/// `CLIENT REPLY SKIP`: the next command's reply is not sent.
pub const REPLY_SKIP_NEXT: u8 = 2;
/// The command running is the one `SKIP` silences.
pub const REPLY_SKIPPING: u8 = 3;

impl ClientInfo {
    /// The protocol version (2 or 3) `HELLO` chose.
    pub fn resp(&self) -> u8 {
        self.outbox.resp.load(Ordering::Relaxed)
    }

    pub fn set_resp(&self, v: u8) {
        self.outbox.resp.store(v, Ordering::Relaxed);
    }

    pub fn name(&self) -> Vec<u8> {
        self.name.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_name(&self, name: &[u8]) {
        *self.name.lock().unwrap_or_else(|e| e.into_inner()) = name.to_vec();
    }

    /// A client as a connection starts it.
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, fd: i32, now_ms: u64) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            name: Default::default(),
            created: Instant::now(),
            last_active_ms: AtomicU64::new(now_ms),
            outbox: Arc::new(crate::pubsub::Outbox::new(id)),
            reply: AtomicU8::new(REPLY_ON),
            authenticated: AtomicBool::new(true),
            monitor: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            in_bytes: AtomicUsize::new(0),
            last_cmd: AtomicUsize::new(NO_COMMAND),
            lib: Default::default(),
            multi: AtomicUsize::new(NOT_IN_MULTI),
            tx: Default::default(),
        }
    }

    /// Sets `CLIENT SETINFO`'s library name (`name`) or version.
    pub fn set_lib(&self, name: bool, value: &str) {
        let mut lib = self.lib.lock().unwrap_or_else(|e| e.into_inner());
        if name {
            lib.0 = value.into();
        } else {
            lib.1 = value.into();
        }
    }

    /// One `CLIENT LIST` line (Redis 7.0's fields; those that have no meaning here are given
    /// their idle values); `cmd` names a [`ClientInfo::last_cmd`] value.
    pub fn describe(&self, started: Instant, cmd: impl Fn(usize) -> &'static str) -> String {
        let now_ms = started.elapsed().as_millis() as u64;
        let idle = now_ms.saturating_sub(self.last_active_ms.load(Ordering::Relaxed)) / 1000;
        let omem = self.outbox.out_bytes.load(Ordering::Relaxed);
        let (sub, psub, ssub) = self.outbox.counts();
        let qbuf = self.in_bytes.load(Ordering::Relaxed);
        let (lib_name, lib_ver) = self.lib.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let multi = self.multi.load(Ordering::Relaxed);
        let mut flags = String::new();
        if self.monitor.load(Ordering::Relaxed) {
            flags.push('O');
        }
        if sub + psub + ssub != 0 {
            flags.push('P');
        }
        if self.no_evict.load(Ordering::Relaxed) {
            flags.push('e');
        }
        let multi = if multi == NOT_IN_MULTI {
            -1
        } else {
            flags.push('x');
            multi as i64
        };
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={idle} flags={flags} db=0 sub={sub} psub={psub} ssub={ssub} multi={multi} watch={} qbuf={qbuf} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem={omem} tot-mem={} events=r cmd={} user=default redir=-1 resp={} lib-name={lib_name} lib-ver={lib_ver}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            String::from_utf8_lossy(&self.name()),
            self.created.elapsed().as_secs(),
            self.tx.lock().unwrap_or_else(|e| e.into_inner()).watched.len(),
            omem + qbuf,
            cmd(self.last_cmd.load(Ordering::Relaxed)),
            self.resp(),
        )
    }
}

/// The name of an `appendfsync` policy, as `CONFIG GET` and `INFO` print it.
pub fn fsync_name(f: Fsync) -> &'static str {
    match f {
        Fsync::Always => "always",
        Fsync::Everysec => "everysec",
        Fsync::No => "no",
    }
}
