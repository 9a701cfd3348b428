//! Keyspace notifications (Redis' `notify.c`): with `notify-keyspace-events` set, a write
//! publishes `__keyspace@0__:<key>` with the event's name and `__keyevent@0__:<event>` with
//! the key, for the classes the setting names (`g` generic, `$` string, `l` list, `s` set,
//! `h` hash, `z` sorted set, `x` expired, `e` evicted, `t` stream, `d` module, `n` new key;
//! `A` the first ten; `K` and `E` choose the channels).
//!
//! Which keys a command changed is told by the store's fingerprint of each of its keys before
//! and after it ran (only while notifications are on): a command that changed nothing (an
//! `SREM` of a missing member, a `SET ... NX` that did not set) sends nothing, as in Redis.
//! The event's name is the one Redis gives the command ([`event`]).

use crate::pubsub::PubSub;

pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 13;
pub const NEW: u32 = 1 << 14;
/// `A`: every class but key misses and new keys.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

const LETTERS: &[(u8, u32)] = &[
    (b'g', GENERIC),
    (b'$', STRING),
    (b'l', LIST),
    (b's', SET),
    (b'h', HASH),
    (b'z', ZSET),
    (b'x', EXPIRED),
    (b'e', EVICTED),
    (b't', STREAM),
    (b'd', MODULE),
    (b'n', NEW),
];

/// The flags of a `notify-keyspace-events` value; `None` for an unknown letter.
pub fn parse(classes: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in classes {
        flags |= match c {
            b'A' => ALL,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b'm' => KEY_MISS,
            _ => LETTERS.iter().find(|(l, _)| *l == c)?.1,
        };
    }
    Some(flags)
}

/// The value `CONFIG GET notify-keyspace-events` shows for `flags`, as Redis spells it.
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A'); // and, as in Redis, not `n`
    } else {
        for &(l, f) in LETTERS {
            if flags & f != 0 {
                s.push(l as char);
            }
        }
    }
    for (l, f) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
        if flags & f != 0 {
            s.push(l);
        }
    }
    s
}

/// Publishes one event of class `class` about `key`, if `flags` wants it.
pub fn notify(ps: &PubSub, flags: u32, class: u32, event: &str, key: &[u8]) {
    if flags & class == 0 {
        return;
    }
    if flags & KEYSPACE != 0 {
        let channel = [b"__keyspace@0__:", key].concat();
        ps.publish(&channel, event.as_bytes(), false);
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@0__:{event}").into_bytes();
        ps.publish(&channel, key, false);
    }
}

/// Whether the command, given its reply, wrote its keys even if their content stayed the
/// same (Redis notifies `SET k v` over `v`, an `EXPIRE` to the same deadline, `HSET` of the
/// same value, `INCRBY k 0`): then the unchanged fingerprint does not mean "nothing done".
pub fn writes_anyway(cmd: &str, args: &[Vec<u8>], reply: &[u8]) -> bool {
    if reply.first() == Some(&b'-') {
        return false;
    }
    let conditional = args
        .iter()
        .skip(3)
        .any(|a| a.eq_ignore_ascii_case(b"NX") || a.eq_ignore_ascii_case(b"XX"));
    match cmd {
        "set" => !conditional,
        "setex" | "psetex" | "getset" | "mset" | "hset" | "hmset" | "lset" | "append"
        | "setrange" | "incr" | "decr" | "incrby" | "decrby" | "incrbyfloat" | "hincrby"
        | "hincrbyfloat" => true,
        "expire" | "pexpire" | "expireat" | "pexpireat" => reply == b":1\r\n",
        _ => false,
    }
}

/// The events Redis sends for command `cmd` (lower case) having changed its key number `pos`
/// (0-based, among the keys the command names) from `before` to `after` (whether the key
/// exists), in order.
pub fn event(
    cmd: &'static str,
    args: &[Vec<u8>],
    pos: usize,
    before: bool,
    after: bool,
) -> Vec<(u32, &'static str)> {
    let has = |opt: &str| {
        args.iter()
            .skip(2)
            .any(|a| a.eq_ignore_ascii_case(opt.as_bytes()))
    };
    let side = |i: usize, pop: bool| -> &'static str {
        let left = args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(b"LEFT"));
        match (pop, left) {
            (true, true) => "lpop",
            (true, false) => "rpop",
            (false, true) => "lpush",
            (false, false) => "rpush",
        }
    };
    let mut v = Vec::new();
    if !before && after {
        v.push((NEW, "new"));
    }
    if !after && cmd.ends_with("store") {
        v.push((GENERIC, "del"));
        return v;
    }
    let (class, name): (u32, &'static str) = match cmd {
        "set" | "setnx" | "setex" | "psetex" | "getset" | "mset" | "msetnx" => (STRING, "set"),
        "append" | "setrange" | "incrbyfloat" | "setbit" => (STRING, static_name(cmd)),
        "incr" | "decr" | "incrby" | "decrby" => (STRING, "incrby"),
        "getdel" | "del" | "unlink" => (GENERIC, "del"),
        "getex" if has("PERSIST") => (GENERIC, "persist"),
        "getex" | "expire" | "pexpire" | "expireat" | "pexpireat" if !after => (GENERIC, "del"),
        "getex" | "expire" | "pexpire" | "expireat" | "pexpireat" => (GENERIC, "expire"),
        "persist" => (GENERIC, "persist"),
        "rename" | "renamenx" if pos == 0 => (GENERIC, "rename_from"),
        "rename" | "renamenx" => (GENERIC, "rename_to"),
        "copy" => (GENERIC, "copy_to"),
        "lpush" | "lpushx" => (LIST, "lpush"),
        "rpush" | "rpushx" => (LIST, "rpush"),
        "lpop" | "blpop" => (LIST, "lpop"),
        "rpop" | "brpop" => (LIST, "rpop"),
        "rpoplpush" | "brpoplpush" => (LIST, if pos == 0 { "rpop" } else { "lpush" }),
        "lmove" | "blmove" => (LIST, side(3 + pos, pos == 0)),
        "lmpop" | "blmpop" => (LIST, if has("LEFT") { "lpop" } else { "rpop" }),
        "linsert" | "lset" | "lrem" | "ltrim" => (LIST, static_name(cmd)),
        "sadd" | "srem" | "spop" => (SET, static_name(cmd)),
        "smove" => (SET, if pos == 0 { "srem" } else { "sadd" }),
        "hset" | "hmset" | "hsetnx" => (HASH, "hset"),
        "hdel" | "hincrby" | "hincrbyfloat" => (HASH, static_name(cmd)),
        "zadd" if has("INCR") => (ZSET, "zincr"),
        "zadd" => (ZSET, "zadd"),
        "zincrby" => (ZSET, "zincr"),
        "zpopmin" | "bzpopmin" => (ZSET, "zpopmin"),
        "zpopmax" | "bzpopmax" => (ZSET, "zpopmax"),
        "zmpop" | "bzmpop" => (ZSET, if has("MIN") { "zpopmin" } else { "zpopmax" }),
        "zrem" | "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex" => {
            (ZSET, static_name(cmd))
        }
        "sort" => (LIST, "sortstore"),
        c if c.starts_with('s') && c.ends_with("store") => (SET, static_name(c)),
        c if c.starts_with('z') && c.ends_with("store") => (ZSET, static_name(c)),
        c => (GENERIC, static_name(c)),
    };
    v.push((class, name));
    let with_expiry = matches!(cmd, "setex" | "psetex")
        || (cmd == "set" && ["EX", "PX", "EXAT", "PXAT"].iter().any(|o| has(o)));
    if with_expiry {
        v.push((GENERIC, "expire"));
    }
    // An aggregate its command emptied goes too.
    if before && !after && class & (LIST | SET | HASH | ZSET) != 0 {
        v.push((GENERIC, "del"));
    }
    v
}

fn static_name(cmd: &'static str) -> &'static str {
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_as_redis_spells_them() {
        assert_eq!(format(parse(b"gKE").unwrap()), "gKE");
        assert_eq!(format(parse(b"$lshzxeKE").unwrap()), "$lshzxeKE");
        assert_eq!(format(parse(b"KA").unwrap()), "AK");
        assert_eq!(format(parse(b"EA").unwrap()), "AE");
        assert_eq!(format(parse(b"En").unwrap()), "nE");
        assert_eq!(parse(b"Kq"), None);
        assert_eq!(format(0), "");
    }

    #[test]
    fn event_names() {
        let a = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert_eq!(
            event("set", &a(&["set", "k", "v", "EX", "5"]), 0, false, true),
            vec![(NEW, "new"), (STRING, "set"), (GENERIC, "expire")]
        );
        assert_eq!(
            event("rpop", &a(&["rpop", "l"]), 0, true, false),
            vec![(LIST, "rpop"), (GENERIC, "del")]
        );
        assert_eq!(
            event(
                "lmove",
                &a(&["lmove", "a", "b", "LEFT", "RIGHT"]),
                1,
                true,
                true
            ),
            vec![(LIST, "rpush")]
        );
        assert_eq!(
            event(
                "sinterstore",
                &a(&["sinterstore", "d", "x"]),
                0,
                true,
                false
            ),
            vec![(GENERIC, "del")]
        );
    }
}
