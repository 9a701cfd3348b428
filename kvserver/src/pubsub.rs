//! Publish/subscribe (Redis' `pubsub.c`) and what else reaches a client from other
//! connections: `MONITOR` lines and `CLIENT KILL`.
//!
//! Each client has an [`Outbox`]: bytes other connections queue for it (messages, monitor
//! lines) and a kill flag, with a [`Notify`] that wakes its connection, which moves them into
//! its reply queue after the reply of the command it is running (a message a client publishes
//! to itself comes after its `PUBLISH` reply, as in Redis 7.2 and later). The [`PubSub`]
//! registry maps channels, patterns and shard channels to their subscribers' outboxes, in
//! subscription order. A subscriber whose unsent output passes the pub/sub output limit is
//! disconnected, as Redis does with `client-output-buffer-limit pubsub` (its hard limit).
//!
//! This module depends on nothing of the server's state: the command dispatcher hands it the
//! registry and the client's outbox.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use indexmap::{IndexMap, IndexSet};
use tokio::sync::Notify;

use crate::glob;
use crate::resp::{self, Args};

/// Why a client is being closed from elsewhere ([`Outbox::killed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// `CLIENT KILL`.
    Killed,
    /// Its unsent output passed the pub/sub output limit.
    OutputLimit,
}

/// What other connections send a client, and its subscriptions.
pub struct Outbox {
    /// The client's id (`CLIENT ID`).
    pub id: u64,
    /// Its protocol version (2 or 3): messages are encoded for it.
    pub resp: AtomicU8,
    /// Bytes of replies its connection queued and the client has not taken yet.
    pub out_bytes: AtomicUsize,
    buf: Mutex<Vec<u8>>,
    pending: AtomicUsize,
    /// 0: alive; else a [`Kill`] + 1.
    killed: AtomicU8,
    /// Wakes the connection: bytes are pending, or it is killed.
    pub notify: Notify,
    /// Its channels, patterns and shard channels, in subscription order.
    subs: Mutex<Subscriptions>,
    /// How many there are in all (read on every command: no lock).
    nsubs: AtomicUsize,
}

#[derive(Default)]
struct Subscriptions {
    channels: IndexSet<Vec<u8>>,
    patterns: IndexSet<Vec<u8>>,
    shard: IndexSet<Vec<u8>>,
}

impl Outbox {
    pub fn new(id: u64) -> Outbox {
        Outbox {
            id,
            resp: AtomicU8::new(2),
            out_bytes: AtomicUsize::new(0),
            buf: Mutex::new(Vec::new()),
            pending: AtomicUsize::new(0),
            killed: AtomicU8::new(0),
            notify: Notify::new(),
            subs: Mutex::default(),
            nsubs: AtomicUsize::new(0),
        }
    }

    /// Queues `bytes` for the client; past `limit` (0: none) of unsent output the client is
    /// killed instead ([`Kill::OutputLimit`]).
    pub fn push(&self, bytes: &[u8], limit: usize) {
        if self.killed().is_some() {
            return;
        }
        let unsent = self.pending.load(Ordering::Relaxed) + self.out_bytes.load(Ordering::Relaxed);
        if limit != 0 && unsent + bytes.len() > limit {
            self.kill(Kill::OutputLimit);
            return;
        }
        let mut b = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        b.extend_from_slice(bytes);
        self.pending.store(b.len(), Ordering::Relaxed);
        drop(b);
        self.notify.notify_one();
    }

    /// Whether bytes are waiting (a cheap look before [`Outbox::take_into`]).
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed) != 0
    }

    /// Appends the waiting bytes to `out`; returns how many.
    pub fn take_into(&self, out: &mut Vec<u8>) -> usize {
        let mut b = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let n = b.len();
        if out.is_empty() {
            std::mem::swap(out, &mut b);
        } else {
            out.extend_from_slice(&b);
            b.clear();
        }
        self.pending.store(0, Ordering::Relaxed);
        n
    }

    pub fn kill(&self, why: Kill) {
        let _ = self
            .killed
            .compare_exchange(0, why as u8 + 1, Ordering::AcqRel, Ordering::Acquire);
        self.notify.notify_one();
    }

    pub fn killed(&self) -> Option<Kill> {
        match self.killed.load(Ordering::Acquire) {
            0 => None,
            1 => Some(Kill::Killed),
            _ => Some(Kill::OutputLimit),
        }
    }

    /// (channels, patterns, shard channels) it is subscribed to.
    pub fn counts(&self) -> (usize, usize, usize) {
        let s = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        (s.channels.len(), s.patterns.len(), s.shard.len())
    }

    /// Whether it is in the subscribed state (RESP2 then allows only a few commands).
    pub fn subscribed(&self) -> bool {
        self.nsubs.load(Ordering::Relaxed) != 0
    }

    fn recount(&self, s: &Subscriptions) {
        self.nsubs.store(
            s.channels.len() + s.patterns.len() + s.shard.len(),
            Ordering::Relaxed,
        );
    }

    fn resp3(&self) -> bool {
        self.resp.load(Ordering::Relaxed) == 3
    }
}

/// The three kinds of subscription.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn names(self) -> (&'static [u8], &'static [u8]) {
        match self {
            Kind::Channel => (b"subscribe", b"unsubscribe"),
            Kind::Pattern => (b"psubscribe", b"punsubscribe"),
            Kind::Shard => (b"ssubscribe", b"sunsubscribe"),
        }
    }

    fn of_client(self, s: &mut Subscriptions) -> &mut IndexSet<Vec<u8>> {
        match self {
            Kind::Channel => &mut s.channels,
            Kind::Pattern => &mut s.patterns,
            Kind::Shard => &mut s.shard,
        }
    }
}

type Subscribers = IndexMap<Vec<u8>, Vec<Arc<Outbox>>>;

#[derive(Default)]
struct Registry {
    channels: Subscribers,
    patterns: Subscribers,
    shard: Subscribers,
    monitors: Vec<Arc<Outbox>>,
}

impl Registry {
    fn of(&mut self, kind: Kind) -> &mut Subscribers {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
}

/// Who is subscribed to what, and who monitors.
pub struct PubSub {
    registry: Mutex<Registry>,
    monitor_count: AtomicUsize,
    /// The pub/sub output limit (bytes of unsent output; 0: none).
    pub limit: usize,
}

/// Redis' default hard `client-output-buffer-limit` of pub/sub clients (32 MiB).
pub const DEFAULT_PUBSUB_OUTPUT_LIMIT: usize = 32 << 20;

fn header(out: &mut Vec<u8>, resp3: bool, len: usize) {
    out.push(if resp3 { b'>' } else { b'*' });
    out.extend_from_slice(len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

impl PubSub {
    pub fn new(limit: usize) -> PubSub {
        PubSub {
            registry: Mutex::default(),
            monitor_count: AtomicUsize::new(0),
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every subscription and monitor of a client that leaves.
    pub fn forget(&self, me: &Arc<Outbox>) {
        let subs = std::mem::take(&mut *me.subs.lock().unwrap_or_else(|e| e.into_inner()));
        me.nsubs.store(0, Ordering::Relaxed);
        let mut r = self.lock();
        for (kind, names) in [
            (Kind::Channel, subs.channels),
            (Kind::Pattern, subs.patterns),
            (Kind::Shard, subs.shard),
        ] {
            for n in names {
                remove(r.of(kind), &n, me);
            }
        }
        let before = r.monitors.len();
        r.monitors.retain(|m| !Arc::ptr_eq(m, me));
        self.monitor_count
            .fetch_sub(before - r.monitors.len(), Ordering::Relaxed);
    }

    /// `MONITOR`: `me` gets every command from now on.
    pub fn monitor(&self, me: &Arc<Outbox>) {
        let mut r = self.lock();
        if !r.monitors.iter().any(|m| Arc::ptr_eq(m, me)) {
            r.monitors.push(me.clone());
            self.monitor_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether anyone monitors (so that a command's line is built only then).
    pub fn monitored(&self) -> bool {
        self.monitor_count.load(Ordering::Relaxed) != 0
    }

    /// Sends one `MONITOR` line (see [`monitor_line`]) to every monitor.
    pub fn feed_monitors(&self, line: &[u8]) {
        let r = self.lock();
        for m in &r.monitors {
            m.push(line, self.limit);
        }
    }

    /// Publishes `msg` on `channel` (`shard`: `SPUBLISH`, patterns not looked at); returns
    /// the number of receivers.
    pub fn publish(&self, channel: &[u8], msg: &[u8], shard: bool) -> i64 {
        let r = self.lock();
        let mut n = 0;
        let (subs, kind): (&Subscribers, &[u8]) = if shard {
            (&r.shard, b"smessage")
        } else {
            (&r.channels, b"message")
        };
        let mut buf = Vec::new();
        for c in subs.get(channel).into_iter().flatten() {
            buf.clear();
            header(&mut buf, c.resp3(), 3);
            resp::bulk(&mut buf, kind);
            resp::bulk(&mut buf, channel);
            resp::bulk(&mut buf, msg);
            c.push(&buf, self.limit);
            n += 1;
        }
        if shard {
            return n;
        }
        for (pat, clients) in &r.patterns {
            if !glob::matches(pat, channel) {
                continue;
            }
            for c in clients {
                buf.clear();
                header(&mut buf, c.resp3(), 4);
                resp::bulk(&mut buf, b"pmessage");
                resp::bulk(&mut buf, pat);
                resp::bulk(&mut buf, channel);
                resp::bulk(&mut buf, msg);
                c.push(&buf, self.limit);
                n += 1;
            }
        }
        n
    }

    /// Subscribes `me` to `names` of `kind`, replying one confirmation per name.
    fn subscribe(&self, me: &Arc<Outbox>, kind: Kind, names: &[Vec<u8>], out: &mut Vec<u8>) {
        let mut subs = me.subs.lock().unwrap_or_else(|e| e.into_inner());
        for name in names {
            if kind.of_client(&mut subs).insert(name.clone()) {
                self.lock()
                    .of(kind)
                    .entry(name.clone())
                    .or_default()
                    .push(me.clone());
            }
            me.recount(&subs);
            confirm(out, kind.names().0, Some(name), count(&subs, kind));
        }
    }

    /// Unsubscribes `me` from `names` of `kind` (none: from all of them), replying one
    /// confirmation per name (one with a null name if there was none).
    fn unsubscribe(&self, me: &Arc<Outbox>, kind: Kind, names: &[Vec<u8>], out: &mut Vec<u8>) {
        let mut subs = me.subs.lock().unwrap_or_else(|e| e.into_inner());
        let all: Vec<Vec<u8>>;
        let names = if names.is_empty() {
            all = kind.of_client(&mut subs).iter().cloned().collect();
            if all.is_empty() {
                confirm(out, kind.names().1, None, count(&subs, kind));
                return;
            }
            &all[..]
        } else {
            names
        };
        for name in names {
            if kind.of_client(&mut subs).shift_remove(name) {
                remove(self.lock().of(kind), name, me);
                me.recount(&subs);
            }
            confirm(out, kind.names().1, Some(name), count(&subs, kind));
        }
    }
}

fn remove(subs: &mut Subscribers, name: &[u8], me: &Arc<Outbox>) {
    if let Some(list) = subs.get_mut(name) {
        list.retain(|c| !Arc::ptr_eq(c, me));
        if list.is_empty() {
            subs.shift_remove(name);
        }
    }
}

/// The count a confirmation shows: channels and patterns together; shard channels apart.
fn count(s: &Subscriptions, kind: Kind) -> i64 {
    match kind {
        Kind::Shard => s.shard.len() as i64,
        _ => (s.channels.len() + s.patterns.len()) as i64,
    }
}

/// A (un)subscribe confirmation, in the connection's own protocol (a push in RESP3).
fn confirm(out: &mut Vec<u8>, what: &[u8], name: Option<&[u8]>, count: i64) {
    header(out, resp::protocol() == 3, 3);
    resp::bulk(out, what);
    resp::opt_bulk(out, name);
    resp::integer(out, count);
}

/// Whether a command may run in RESP2's subscribed state (upper-case name).
pub fn allowed_when_subscribed(upper_name: &[u8]) -> bool {
    matches!(
        upper_name,
        b"PING"
            | b"SUBSCRIBE"
            | b"SSUBSCRIBE"
            | b"UNSUBSCRIBE"
            | b"SUNSUBSCRIBE"
            | b"PSUBSCRIBE"
            | b"PUNSUBSCRIBE"
            | b"QUIT"
            | b"RESET"
    )
}

/// Whether a command's replies are pub/sub confirmations, which `CLIENT REPLY OFF|SKIP`
/// does not silence (any case; no allocation: it is asked of every command).
pub fn is_confirmation(name: &[u8]) -> bool {
    name.len() >= 9
        && name[name.len() - 9..].eq_ignore_ascii_case(b"SUBSCRIBE")
        && (9..=12).contains(&name.len())
        && allowed_when_subscribed(&name.to_ascii_uppercase())
}

/// Runs `SUBSCRIBE`, `UNSUBSCRIBE`, `PSUBSCRIBE`, `PUNSUBSCRIBE`, `SSUBSCRIBE`,
/// `SUNSUBSCRIBE`, `PUBLISH`, `SPUBLISH` or `PUBSUB` (the dispatcher checked name and arity).
pub fn execute(ps: &PubSub, me: &Arc<Outbox>, upper_name: &[u8], args: &Args, out: &mut Vec<u8>) {
    let rest = &args[1..];
    match upper_name {
        b"SUBSCRIBE" => ps.subscribe(me, Kind::Channel, rest, out),
        b"PSUBSCRIBE" => ps.subscribe(me, Kind::Pattern, rest, out),
        b"SSUBSCRIBE" => ps.subscribe(me, Kind::Shard, rest, out),
        b"UNSUBSCRIBE" => ps.unsubscribe(me, Kind::Channel, rest, out),
        b"PUNSUBSCRIBE" => ps.unsubscribe(me, Kind::Pattern, rest, out),
        b"SUNSUBSCRIBE" => ps.unsubscribe(me, Kind::Shard, rest, out),
        b"PUBLISH" => resp::integer(out, ps.publish(&args[1], &args[2], false)),
        b"SPUBLISH" => resp::integer(out, ps.publish(&args[1], &args[2], true)),
        _ => pubsub_cmd(ps, args, out),
    }
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Print this help.",
];

/// `PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP`.
fn pubsub_cmd(ps: &PubSub, args: &Args, out: &mut Vec<u8>) {
    let sub = args[1].to_ascii_uppercase();
    let n = args.len();
    let r = ps.lock();
    match &sub[..] {
        b"HELP" if n == 2 => {
            resp::array_header(out, HELP.len());
            for line in HELP {
                resp::simple(out, line);
            }
        }
        b"CHANNELS" | b"SHARDCHANNELS" if n <= 3 => {
            let subs = if sub[0] == b'S' {
                &r.shard
            } else {
                &r.channels
            };
            let hits: Vec<&Vec<u8>> = subs
                .keys()
                .filter(|c| n == 2 || glob::matches(&args[2], c))
                .collect();
            resp::array_header(out, hits.len());
            for c in hits {
                resp::bulk(out, c);
            }
        }
        b"NUMSUB" | b"SHARDNUMSUB" => {
            let subs = if sub[0] == b'S' {
                &r.shard
            } else {
                &r.channels
            };
            resp::array_header(out, 2 * (n - 2));
            for c in &args[2..] {
                resp::bulk(out, c);
                resp::integer(out, subs.get(c).map_or(0, Vec::len) as i64);
            }
        }
        b"NUMPAT" if n == 2 => resp::integer(out, r.patterns.len() as i64),
        b"HELP" | b"CHANNELS" | b"SHARDCHANNELS" | b"NUMPAT" => resp::error(
            out,
            &format!(
                "ERR wrong number of arguments for 'pubsub|{}' command",
                String::from_utf8_lossy(&args[1]).to_lowercase()
            ),
        ),
        _ => resp::error(
            out,
            &format!(
                "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(&args[1])
            ),
        ),
    }
}

/// A `MONITOR` line: `+<seconds>.<micros> [0 <addr>] "arg" ...` with each argument quoted as
/// Redis' `sdscatrepr` does.
pub fn monitor_line(addr: &str, args: &[&[u8]]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut s = format!("+{}.{:06} [0 {addr}]", now.as_secs(), now.subsec_micros()).into_bytes();
    for a in args {
        s.extend_from_slice(b" \"");
        for &b in *a {
            match b {
                b'\\' => s.extend_from_slice(b"\\\\"),
                b'"' => s.extend_from_slice(b"\\\""),
                b'\n' => s.extend_from_slice(b"\\n"),
                b'\r' => s.extend_from_slice(b"\\r"),
                b'\t' => s.extend_from_slice(b"\\t"),
                7 => s.extend_from_slice(b"\\a"),
                8 => s.extend_from_slice(b"\\b"),
                b' '..=b'~' => s.push(b),
                _ => s.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            }
        }
        s.push(b'"');
    }
    s.extend_from_slice(b"\r\n");
    s
}

/// The arguments `MONITOR` shows of a request: passwords given to `AUTH`, `HELLO ... AUTH` and
/// `MIGRATE ... AUTH|AUTH2` read `(redacted)`.
pub fn redacted<'a>(upper_name: &[u8], args: &'a Args) -> Vec<&'a [u8]> {
    const R: &[u8] = b"(redacted)";
    let mut v: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
    match upper_name {
        b"AUTH" => v[1..].iter_mut().for_each(|a| *a = R),
        b"HELLO" | b"MIGRATE" => {
            let mut i = 1;
            while i < v.len() {
                // HELLO's AUTH and MIGRATE's AUTH2 take a user name and a password; MIGRATE's
                // AUTH takes a password.
                let secrets = if v[i].eq_ignore_ascii_case(b"AUTH2")
                    || (v[i].eq_ignore_ascii_case(b"AUTH") && upper_name == b"HELLO")
                {
                    2
                } else if v[i].eq_ignore_ascii_case(b"AUTH") {
                    1
                } else {
                    0
                };
                let to = (i + 1 + secrets).min(v.len());
                v[i + 1..to].iter_mut().for_each(|a| *a = R);
                i = to.max(i + 1);
            }
        }
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_quoting() {
        let line = monitor_line("1.2.3.4:5", &[b"set", b"a\"b", b"\x01\n"]);
        let text = String::from_utf8(line).unwrap();
        assert!(text.starts_with('+'));
        assert!(text.ends_with(" [0 1.2.3.4:5] \"set\" \"a\\\"b\" \"\\x01\\n\"\r\n"));
    }

    #[test]
    fn confirmations_are_told_by_name_in_any_case() {
        for n in ["subscribe", "PUNSUBSCRIBE", "SSubscribe", "sunsubscribe"] {
            assert!(is_confirmation(n.as_bytes()), "{n}");
        }
        for n in ["ping", "get", "xsubscribe", "resubscribe", "subscribes"] {
            assert!(!is_confirmation(n.as_bytes()), "{n}");
        }
    }

    #[test]
    fn redaction() {
        let args: Args = vec![
            b"HELLO".to_vec(),
            b"3".to_vec(),
            b"AUTH".to_vec(),
            b"u".to_vec(),
            b"p".to_vec(),
        ];
        assert_eq!(
            redacted(b"HELLO", &args),
            vec![&b"HELLO"[..], b"3", b"AUTH", b"(redacted)", b"(redacted)"]
        );
        let auth: Args = vec![b"AUTH".to_vec(), b"secret".to_vec()];
        assert_eq!(redacted(b"AUTH", &auth), vec![&b"AUTH"[..], b"(redacted)"]);
    }

    #[test]
    fn publish_reaches_channel_and_pattern_subscribers_once_each() {
        let ps = PubSub::new(0);
        let a = Arc::new(Outbox::new(1));
        let b = Arc::new(Outbox::new(2));
        let mut out = Vec::new();
        ps.subscribe(
            &a,
            Kind::Channel,
            &[b"ch".to_vec(), b"ch".to_vec()],
            &mut out,
        );
        ps.subscribe(&b, Kind::Pattern, &[b"c*".to_vec()], &mut out);
        assert_eq!(ps.publish(b"ch", b"hi", false), 2);
        let mut got = Vec::new();
        a.take_into(&mut got);
        assert_eq!(got, b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        ps.forget(&a);
        assert_eq!(ps.publish(b"ch", b"hi", false), 1);
        assert_eq!(ps.publish(b"ch", b"hi", true), 0);
    }

    #[test]
    fn a_subscriber_over_the_limit_is_killed() {
        let ps = PubSub::new(100);
        let a = Arc::new(Outbox::new(1));
        ps.subscribe(&a, Kind::Channel, &[b"ch".to_vec()], &mut Vec::new());
        ps.publish(b"ch", &[b'x'; 60], false);
        assert_eq!(a.killed(), None);
        ps.publish(b"ch", &[b'x'; 60], false);
        assert_eq!(a.killed(), Some(Kill::OutputLimit));
    }
}
