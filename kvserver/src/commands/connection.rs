//! Connection commands (Redis' `networking.c` and the connection group of `server.c`):
//! `PING`, `ECHO`, `HELLO`, `AUTH`, `RESET`, `QUIT`, `SELECT`, `MONITOR` and `CLIENT`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::server::{unknown_subcommand, wrong_sub_args, REDIS_VERSION};
use super::{unknown, wrong_args, Flow, NOT_INT, SYNTAX};
use crate::lock::ShardLock;
use crate::pubsub::Kill;
use crate::resp::{self, parse_int, Args};
use crate::shared::{ClientInfo, Shared, REPLY_OFF, REPLY_ON, REPLY_SKIP_NEXT};
use crate::store::Shard;

/// Runs one command of this module (the dispatcher checked its name and arity).
pub(super) async fn execute<L: ShardLock<Shard>>(
    shared: &Arc<Shared<L>>,
    client: &ClientInfo,
    name: &[u8],
    args: &mut Args,
    out: &mut Vec<u8>,
) -> Flow {
    match name {
        // In RESP2's subscribed state PING replies as a message would: ["pong", argument].
        b"PING" if args.len() <= 2 && client.resp() == 2 && client.outbox.subscribed() => {
            resp::array_header(out, 2);
            resp::bulk(out, b"pong");
            resp::bulk(out, args.get(1).map_or(&b""[..], |a| &a[..]));
        }
        b"PING" => match args.len() {
            1 => resp::simple(out, "PONG"),
            2 => resp::bulk(out, &args[1]),
            _ => wrong_args(out, &args[0]),
        },
        b"ECHO" => resp::bulk(out, &args[1]),
        b"HELLO" => hello(shared, client, args, out),
        b"AUTH" => {
            let (user, pass) = match args.len() {
                2 => (&b"default"[..], &args[1][..]),
                3 => (&args[1][..], &args[2][..]),
                _ => return syntax(out),
            };
            if args.len() == 2 && shared.password().is_none() {
                resp::error(out, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            } else {
                match authenticate(shared, client, user, pass) {
                    Ok(()) => resp::ok(out),
                    Err(e) => resp::error(out, e),
                }
            }
        }
        b"RESET" => {
            // The connection's state back to a new one's: no transaction, no watches, no
            // subscriptions, not a monitor, replies on, no name, RESP2, authenticated only if
            // no password is needed (the library name and version stay, as in Redis).
            super::tx::discard(shared, client);
            shared.pubsub.forget(&client.outbox);
            client.monitor.store(false, Ordering::Relaxed);
            client.no_evict.store(false, Ordering::Relaxed);
            client.reply.store(REPLY_ON, Ordering::Relaxed);
            client
                .authenticated
                .store(shared.password().is_none(), Ordering::Relaxed);
            client.set_name(b"");
            resp::set_protocol(2);
            client.set_resp(2);
            resp::simple(out, "RESET");
        }
        b"QUIT" => {
            resp::ok(out);
            return Flow::Close;
        }
        b"SELECT" => match parse_int(&args[1]) {
            Some(0) => resp::ok(out),
            Some(_) => resp::error(out, "ERR DB index is out of range"),
            None => resp::error(out, NOT_INT),
        },
        b"MONITOR" => {
            // A second MONITOR is ignored (no reply), as in Redis.
            if !client.monitor.swap(true, Ordering::Relaxed) {
                shared.pubsub.monitor(&client.outbox);
                resp::ok(out);
            }
        }
        b"CLIENT" => client_cmd(shared, client, args, out),
        _ => unknown(out, args),
    }
    Flow::Continue
}

fn syntax(out: &mut Vec<u8>) -> Flow {
    resp::error(out, SYNTAX);
    Flow::Continue
}

/// `AUTH` and `HELLO ... AUTH`: only the `default` user exists; without `requirepass` it
/// takes any password (Redis' `nopass`).
fn authenticate<L>(
    shared: &Shared<L>,
    client: &ClientInfo,
    user: &[u8],
    pass: &[u8],
) -> Result<(), &'static str> {
    let ok = user == b"default" && shared.password().is_none_or(|p| p == pass);
    if !ok {
        return Err("WRONGPASS invalid username-password pair or user is disabled.");
    }
    client.authenticated.store(true, Ordering::Relaxed);
    Ok(())
}

/// The type `CLIENT LIST TYPE` and `CLIENT KILL TYPE` know a client by.
fn client_type(c: &ClientInfo) -> &'static [u8] {
    if c.outbox.subscribed() {
        b"pubsub"
    } else {
        b"normal"
    }
}

/// `CLIENT KILL addr` (replies OK, or an error if there was no such client) or `CLIENT KILL
/// [ID id] [TYPE type] [USER user] [ADDR addr] [LADDR addr] [SKIPME yes|no] [MAXAGE secs]`
/// (replies how many were killed). A killed client is closed at once; the caller itself after
/// this reply.
fn kill<L>(shared: &Shared<L>, me: &ClientInfo, args: &Args, out: &mut Vec<u8>) {
    let mut addr = None;
    let mut laddr = None;
    let mut kind: Option<Vec<u8>> = None;
    let mut id = None;
    let mut max_age = None;
    let mut skipme = true;
    let old_form = args.len() == 3;
    if old_form {
        addr = Some(&args[2][..]);
        skipme = false;
    } else {
        let mut i = 2;
        while i < args.len() {
            let Some(v) = args.get(i + 1) else {
                return resp::error(out, SYNTAX);
            };
            match &args[i].to_ascii_uppercase()[..] {
                b"ID" => match parse_int(v) {
                    Some(n) if n >= 1 => id = Some(n as u64),
                    _ => return resp::error(out, "ERR client-id should be greater than 0"),
                },
                b"MAXAGE" => match parse_int(v) {
                    Some(n) if n > 0 => max_age = Some(n as u64),
                    Some(_) => return resp::error(out, "ERR maxage should be greater than 0"),
                    None => {
                        return resp::error(out, "ERR maxage is not an integer or out of range")
                    }
                },
                b"TYPE" => {
                    let t = v.to_ascii_lowercase();
                    match &t[..] {
                        b"normal" | b"pubsub" | b"master" | b"replica" | b"slave" => kind = Some(t),
                        _ => {
                            return resp::error(
                                out,
                                &format!(
                                    "ERR Unknown client type '{}'",
                                    String::from_utf8_lossy(v)
                                ),
                            )
                        }
                    }
                }
                b"ADDR" => addr = Some(&v[..]),
                b"LADDR" => laddr = Some(&v[..]),
                b"USER" if v == b"default" => {}
                b"USER" => {
                    return resp::error(
                        out,
                        &format!("ERR No such user '{}'", String::from_utf8_lossy(v)),
                    )
                }
                b"SKIPME" if v.eq_ignore_ascii_case(b"yes") => skipme = true,
                b"SKIPME" if v.eq_ignore_ascii_case(b"no") => skipme = false,
                _ => return resp::error(out, SYNTAX),
            }
            i += 2;
        }
    }
    let mut killed = 0;
    for c in shared.clients() {
        let hit = addr.is_none_or(|a| c.addr.to_string().as_bytes() == a)
            && laddr.is_none_or(|a| c.laddr.to_string().as_bytes() == a)
            && kind.as_ref().is_none_or(|k| k[..] == *client_type(&c))
            && id.is_none_or(|i| c.id == i)
            && !(skipme && c.id == me.id)
            && max_age.is_none_or(|a| c.created.elapsed().as_secs() >= a);
        if hit {
            c.outbox.kill(Kill::Killed);
            killed += 1;
        }
    }
    if !old_form {
        resp::integer(out, killed);
    } else if killed == 0 {
        resp::error(out, "ERR No such client");
    } else {
        resp::ok(out);
    }
}

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "HELP",
    "    Print this help.",
];

/// `CLIENT ID|GETNAME|SETNAME|LIST|INFO|SETINFO|KILL|REPLY|NO-EVICT|NO-TOUCH|HELP`.
fn client_cmd<L: ShardLock<Shard>>(
    shared: &Shared<L>,
    client: &ClientInfo,
    args: &Args,
    out: &mut Vec<u8>,
) {
    let sub = args[1].to_ascii_uppercase();
    let n = args.len();
    match &sub[..] {
        b"ID" if n == 2 => resp::integer(out, client.id as i64),
        b"GETNAME" if n == 2 => {
            let name = client.name();
            if name.is_empty() {
                resp::null(out)
            } else {
                resp::bulk(out, &name)
            }
        }
        b"SETNAME" if n == 3 => {
            if !valid_name(&args[2]) {
                return resp::error(
                    out,
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            client.set_name(&args[2]);
            resp::ok(out)
        }
        b"SETINFO" if n == 4 => {
            let attr = args[2].to_ascii_lowercase();
            let which = match &attr[..] {
                b"lib-name" => true,
                b"lib-ver" => false,
                _ => {
                    return resp::error(
                        out,
                        &format!(
                            "ERR Unrecognized option '{}'",
                            String::from_utf8_lossy(&args[2])
                        ),
                    )
                }
            };
            if !valid_name(&args[3]) {
                return resp::error(
                    out,
                    &format!(
                        "ERR {} cannot contain spaces, newlines or special characters.",
                        String::from_utf8_lossy(&attr)
                    ),
                );
            }
            client.set_lib(which, &String::from_utf8_lossy(&args[3]));
            resp::ok(out)
        }
        b"UNBLOCK" if n == 3 || n == 4 => {
            let Some(id) = parse_int(&args[2]) else {
                return resp::error(out, NOT_INT);
            };
            let error = match args.get(3).map(|a| a.to_ascii_uppercase()).as_deref() {
                None | Some(b"TIMEOUT") => false,
                Some(b"ERROR") => true,
                Some(_) => {
                    return resp::error(out, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
                }
            };
            let done = id > 0 && super::blocking::unblock(shared, id as u64, error);
            resp::integer(out, done as i64)
        }
        b"LIST" => {
            let mut i = 2;
            let mut only: Option<Vec<u64>> = None;
            let mut kind: Option<Vec<u8>> = None;
            while i < n {
                let opt = args[i].to_ascii_uppercase();
                match &opt[..] {
                    b"TYPE" if i + 1 < n => {
                        let t = args[i + 1].to_ascii_lowercase();
                        if !matches!(
                            &t[..],
                            b"normal" | b"master" | b"replica" | b"slave" | b"pubsub"
                        ) {
                            return resp::error(
                                out,
                                &format!(
                                    "ERR Unknown client type '{}'",
                                    String::from_utf8_lossy(&args[i + 1])
                                ),
                            );
                        }
                        kind = Some(t);
                        i += 2;
                    }
                    b"ID" if i + 1 < n => {
                        let mut ids = Vec::new();
                        for a in &args[i + 1..] {
                            match parse_int(a) {
                                Some(v) if v > 0 => ids.push(v as u64),
                                _ => return resp::error(out, "ERR Invalid client ID"),
                            }
                        }
                        only = Some(ids);
                        i = n;
                    }
                    _ => return resp::error(out, SYNTAX),
                }
            }
            let mut text = String::new();
            for c in shared.clients() {
                if only.as_ref().is_none_or(|ids| ids.contains(&c.id))
                    && kind.as_ref().is_none_or(|k| k[..] == *client_type(&c))
                {
                    text.push_str(&c.describe(shared.started, super::last_command_name));
                    text.push('\n');
                }
            }
            resp::verbatim(out, text.as_bytes());
        }
        b"INFO" if n == 2 => {
            let mut text = client.describe(shared.started, super::last_command_name);
            text.push('\n');
            resp::verbatim(out, text.as_bytes());
        }
        b"KILL" if n >= 3 => kill(shared, client, args, out),
        b"REPLY" if n == 3 => match &args[2].to_ascii_uppercase()[..] {
            b"ON" => {
                client.reply.store(REPLY_ON, Ordering::Relaxed);
                resp::ok(out)
            }
            b"OFF" => client.reply.store(REPLY_OFF, Ordering::Relaxed),
            b"SKIP" => {
                if client.reply.load(Ordering::Relaxed) != REPLY_OFF {
                    client.reply.store(REPLY_SKIP_NEXT, Ordering::Relaxed);
                }
            }
            _ => resp::error(out, SYNTAX),
        },
        b"NO-EVICT" | b"NO-TOUCH" if n == 3 => match &args[2].to_ascii_uppercase()[..] {
            b"ON" | b"OFF" => {
                if sub == b"NO-EVICT" {
                    client
                        .no_evict
                        .store(args[2].eq_ignore_ascii_case(b"ON"), Ordering::Relaxed);
                }
                resp::ok(out)
            }
            _ => resp::error(out, SYNTAX),
        },
        b"HELP" if n == 2 => {
            resp::array_header(out, CLIENT_HELP.len());
            for line in CLIENT_HELP {
                resp::simple(out, line);
            }
        }
        b"ID" | b"GETNAME" | b"SETNAME" | b"SETINFO" | b"INFO" | b"KILL" | b"REPLY"
        | b"NO-EVICT" | b"NO-TOUCH" | b"HELP" => wrong_sub_args(out, args),
        _ => unknown_subcommand(out, args),
    }
}

/// A client name or library name: printable ASCII without spaces (may be empty).
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|b| (b'!'..=b'~').contains(b))
}

/// `HELLO [protover [AUTH username password] [SETNAME name]]`: switches the connection's
/// protocol (2 or 3) and replies with the server's description, in the new protocol; `AUTH`
/// authenticates first as the `AUTH` command does. Nothing changes unless every option is
/// valid.
fn hello<L>(shared: &Shared<L>, client: &ClientInfo, args: &Args, out: &mut Vec<u8>) {
    let mut version = None;
    if let Some(v) = args.get(1) {
        match parse_int(v) {
            Some(v @ 2..=3) => version = Some(v as u8),
            Some(_) => return resp::error(out, "NOPROTO unsupported protocol version"),
            None => {
                return resp::error(
                    out,
                    "ERR Protocol version is not an integer or out of range",
                )
            }
        }
    }
    let mut name = None;
    let mut auth = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match &opt[..] {
            b"AUTH" if i + 2 < args.len() => {
                auth = Some((&args[i + 1], &args[i + 2]));
                i += 3;
            }
            b"SETNAME" if i + 1 < args.len() => {
                if !valid_name(&args[i + 1]) {
                    return resp::error(
                        out,
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    );
                }
                name = Some(&args[i + 1]);
                i += 2;
            }
            _ => {
                return resp::error(
                    out,
                    &format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(&args[i])
                    ),
                )
            }
        }
    }
    if let Some((user, pass)) = auth {
        if let Err(e) = authenticate(shared, client, user, pass) {
            return resp::error(out, e);
        }
    }
    if !client.authenticated.load(Ordering::Relaxed) {
        return resp::error(out, "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(name) = name {
        client.set_name(name);
    }
    if let Some(v) = version {
        resp::set_protocol(v);
        client.set_resp(v);
    }
    resp::map_header(out, 7);
    for (k, v) in [("server", "redis"), ("version", REDIS_VERSION)] {
        resp::bulk(out, k.as_bytes());
        resp::bulk(out, v.as_bytes());
    }
    resp::bulk(out, b"proto");
    resp::integer(out, client.resp() as i64);
    resp::bulk(out, b"id");
    resp::integer(out, client.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        resp::bulk(out, k.as_bytes());
        resp::bulk(out, v.as_bytes());
    }
    resp::bulk(out, b"modules");
    resp::array_header(out, 0);
}
