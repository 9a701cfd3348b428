#!/usr/bin/env python3
"""Random commands, the same to kvserver and to redis-server, replies and data compared.

    python3 kvserver/random-versus-redis.py KVSERVER_PORT REDIS_PORT [SEED] [ROUNDS]

Both servers must listen on 127.0.0.1 and hold nothing of value (the run flushes them). Each
round sends one command of the server's own `COMMAND LIST` with 0 to 7 arguments drawn from a
list of keys, numbers in and out of range, floats as `strtod` reads them and the options the
commands take, to both servers over raw connections; it prints every reply that differs and,
where the replies agree, every command after which the data differs (keys, types, values,
whether a deadline is set), then starts both over from the same data. The commands whose
replies differ by nature are left out: random picks, unordered replies, times, the server's
own state (`INFO`, `CLIENT`, `CONFIG`, `DEBUG`, ...), and those that block or change the
connection's mode. Exits 1 if anything differed, or if kvserver stopped answering.
"""
import random
import socket
import sys

LEFT_OUT = {
    # the connection's mode, the whole server, blocking
    "shutdown", "debug", "monitor", "subscribe", "psubscribe", "ssubscribe", "unsubscribe",
    "punsubscribe", "sunsubscribe", "quit", "reset", "client", "flushall", "flushdb", "hello",
    "auth", "config", "save", "bgsave", "multi", "exec", "watch", "discard", "unwatch",
    "select", "blpop", "brpop", "blmove", "brpoplpush", "blmpop", "bzpopmin", "bzpopmax",
    "bzmpop",
    # random or unordered replies, times, the server's own state
    "spop", "srandmember", "hrandfield", "zrandmember", "randomkey", "smembers", "sinter",
    "sunion", "sdiff", "keys", "scan", "sscan", "hscan", "zscan", "sort", "sort_ro", "info",
    "command", "memory", "object", "time", "lastsave", "ttl", "pttl", "expiretime",
    "pexpiretime", "pubsub", "publish", "spublish", "function", "dbsize",
}
WORDS = [
    "0", "1", "-1", "2", "3", "-2", "100", "9223372036854775807", "-9223372036854775808",
    "9223372036854775808", "4294967296", "1.5", "-0", "inf", "-inf", "+inf", "nan", "(1", "(",
    "[a", "[", "-", "+", "(inf", "", "x", "k", "k2", "l", "h", "s", "z", "a", "b", "f", "NX",
    "XX", "GT", "LT", "CH", "INCR", "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "GET", "PERSIST",
    "LIMIT", "COUNT", "MATCH", "TYPE", "WITHSCORES", "WITHVALUES", "BYSCORE", "BYLEX", "REV",
    "LEFT", "RIGHT", "BEFORE", "AFTER", "MIN", "MAX", "WEIGHTS", "AGGREGATE", "SUM", "RANK",
    "MAXLEN", "IDX", "LEN", "MINMATCHLEN", "WITHMATCHLEN", "BIT", "BYTE", "REPLACE", "DB",
    "NOVALUES", "1e400", "1e-400", "0x10", "0x1p-2", " 1", "1 ", "1e3", "-1.5e2",
]
SETUP = [
    ["FLUSHALL"], ["SET", "k", "10"], ["SET", "x", "hello"], ["RPUSH", "l", "a", "b", "1", "c"],
    ["HSET", "h", "f", "1", "g", "x"], ["SADD", "s", "a", "1", "2"],
    ["ZADD", "z", "1", "a", "2", "b", "inf", "c"],
]


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def reply(f):
    """One whole reply, as its bytes."""
    line = f.readline()
    if not line:
        raise EOFError("the server closed the connection")
    kind, rest, out = line[:1], line[1:-2], line
    if kind in b"$=!" and int(rest) >= 0:
        out += f.read(int(rest) + 2)
    elif kind in b"*~>":
        for _ in range(max(int(rest), 0)):
            out += reply(f)
    elif kind in b"%|":
        for _ in range(2 * int(rest)):
            out += reply(f)
    return out


def bulks(raw):
    """The items of an array of bulk strings."""
    pos = raw.index(b"\r\n") + 2
    out = []
    for _ in range(int(raw[1:raw.index(b"\r\n")])):
        end = raw.index(b"\r\n", pos)
        n = int(raw[pos + 1:end])
        out.append(raw[end + 2:end + 2 + n])
        pos = end + 4 + n
    return out


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.sock.makefile("rb")

    def ask(self, args):
        self.sock.sendall(encode(args))
        return reply(self.f)

    def setup(self):
        for c in SETUP:
            self.ask(c)

    def data(self):
        out = []
        for k in sorted(bulks(self.ask(["KEYS", "*"]))):
            t = self.ask(["TYPE", k])
            v = {
                b"+string\r\n": lambda: self.ask(["GET", k]),
                b"+list\r\n": lambda: self.ask(["LRANGE", k, "0", "-1"]),
                b"+hash\r\n": lambda: self.ask(["HGETALL", k]),
                b"+set\r\n": lambda: sorted(bulks(self.ask(["SMEMBERS", k]))),
            }.get(t, lambda: self.ask(["ZRANGE", k, "0", "-1", "WITHSCORES"]))()
            out.append((k, t, v, self.ask(["TTL", k]) != b":-1\r\n"))
        return out


def main():
    ours, theirs = Conn(int(sys.argv[1])), Conn(int(sys.argv[2]))
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    rng = random.Random(seed)
    names = [n.decode() for n in bulks(ours.ask(["COMMAND", "LIST"]))]
    names = sorted(n for n in names if n not in LEFT_OUT)
    ours.setup()
    theirs.setup()
    differ = 0
    for i in range(rounds):
        args = [rng.choice(names)] + [rng.choice(WORDS) for _ in range(rng.randint(0, 7))]
        try:
            a = ours.ask(args)
        except (OSError, EOFError) as e:
            print("kvserver stopped answering after", args, e)
            sys.exit(1)
        b = theirs.ask(args)
        if a != b:
            print("REPLY", args, "\n  kvserver:    ", a[:300], "\n  redis-server:", b[:300])
        elif ours.data() != theirs.data():
            print("DATA", args, "reply", a[:100])
        else:
            if i % 300 == 299:
                ours.setup()
                theirs.setup()
            continue
        differ += 1
        ours.setup()
        theirs.setup()
    print("seed %d: %d commands, %d differed" % (seed, rounds, differ))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
