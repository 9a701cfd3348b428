#!/usr/bin/env bash
# The lock-sensitive scenario alone (ycsb --workloads long: 32 GET/SET clients, long readers,
# SAVE every 200 ms, 100000 keys) in REPS interleaved rounds over LOCKS; prints, per lock
# and command class, the medians over the rounds of ops/s and of the p99 latency, and each
# round's figures. The comparison of the lock against tokio's in the demo server.
#
#   kvserver/long-scenario.sh                     # rwsem and tokio, 3 rounds of 10 s
#   LOCKS="rwsem tokio async-lock" REPS=5 SECS=8 kvserver/long-scenario.sh
#   LOCKS="rwsem fifo=rwsem:--rwsem-policy=fifo tokio" kvserver/long-scenario.sh
#
# An entry of LOCKS is a --lock choice, or NAME=LOCK:FLAGS (FLAGS: more of the server's
# flags, commas kept, e.g. a shard lock policy), reported as NAME.
#
# Everything listens on 127.0.0.1 only; the servers started here are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCKS=${LOCKS:-"rwsem tokio"}
REPS=${REPS:-3}
SECS=${SECS:-10}
LONG_READERS=${LONG_READERS:-4}
PORT=${PORT:-16790}
command -v redis-cli >/dev/null || { echo "redis-cli not found (apt-get install -y redis-tools)" >&2; exit 1; }
TARGET_DIR=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)
cargo build --release --quiet -p kvserver --bin kvserver --bin ycsb
WORK=$(mktemp -d "$TARGET_DIR/long-scenario.XXXXXX")
# shellcheck source=kvserver/servers.sh
. kvserver/servers.sh
for rep in $(seq "$REPS"); do
    for entry in $LOCKS; do
        name=$entry lock=$entry flags=()
        if [[ "$entry" == *=* ]]; then
            name=${entry%%=*} lock=${entry#*=}
            if [[ "$lock" == *:* ]]; then
                read -r -a flags <<<"${lock#*:}"
                lock=${lock%%:*}
            fi
        fi
        dir="$WORK/data-$name-$rep"
        mkdir -p "$dir"
        "$TARGET_DIR/release/kvserver" --port "$PORT" --lock "$lock" --dir "$dir" --quiet \
            "${flags[@]}" 2>>"$WORK/kvserver.log" &
        PID=$!
        wait_ready "$PORT"
        timeout 300 "$TARGET_DIR/release/ycsb" --port "$PORT" --load --records 100000 \
            --workloads long --secs "$SECS" --long-readers "$LONG_READERS" --json \
            2>>"$WORK/ycsb.log" | sed "s/^/$rep $name /" >>"$WORK/results.txt"
        stop_server
    done
done
python3 - "$WORK/results.txt" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    rep, lock, rest = line.split(" ", 2)
    try:
        r = json.loads(rest)
    except ValueError:
        continue
    if "class" not in r:
        continue
    rows.setdefault((lock, r["class"]), []).append((float(r["ops_per_sec"]), float(r["p99_us"]) / 1000))
print("| lock | class | ops/s (median) | p99 ms (median) | rounds: ops/s, p99 ms |")
print("|---|---|---:|---:|---|")
for (lock, cls), xs in rows.items():
    ops = statistics.median(x[0] for x in xs)
    p99 = statistics.median(x[1] for x in xs)
    each = "; ".join(f"{o:.0f}, {p:.1f}" for o, p in xs)
    print(f"| {lock} | {cls} | {ops:.0f} | {p99:.1f} | {each} |")
PY
