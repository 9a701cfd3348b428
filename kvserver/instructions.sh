#!/usr/bin/env bash
# Instructions per SET and per GET of the kvserver process, counted by callgrind (stable on a
# noisy machine), as the README's table of them: the release build under
# `valgrind --tool=callgrind`, 100000 SETs to fill, counters zeroed, then 50000 SETs and
# 50000 GETs of `redis-benchmark -P 16 -c 50 -r 100000`, each dumped apart; every
# instruction of the process counted, divided by the number of commands.
#
#   kvserver/instructions.sh            # builds the release binary first
#   BIN=path/to/kvserver kvserver/instructions.sh
#   REDIS=1 kvserver/instructions.sh    # redis-server the same way (appendonly, everysec)
#
# Knobs (environment): BIN, PORT (6399), N (50000), FILL (100000), LOCK (rwsem), KEEP (a
# directory to copy the SET and GET dumps to, as set.out and get.out, for callgrind_annotate).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-6399}
N=${N:-50000}
FILL=${FILL:-100000}
LOCK=${LOCK:-rwsem}
if [ -n "${REDIS:-}" ]; then
    LOCK=redis-server
elif [ -z "${BIN:-}" ]; then
    cargo build --release -q -p kvserver
    BIN=${CARGO_TARGET_DIR:-target}/release/kvserver
fi
for tool in valgrind callgrind_control redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
work=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/data"
if [ -n "${REDIS:-}" ]; then
    server=(redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly yes
        --appendfsync everysec --dir "$work/data" --logfile "$work/redis.log")
else
    server=("$BIN" --port "$PORT" --lock "$LOCK" --dir "$work/data" --appendfsync everysec --quiet)
fi
valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "${server[@]}" 2>"$work/valgrind.log" &
pid=$!
for _ in $(seq 600); do
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
done
bench() { # test requests
    redis-benchmark -h 127.0.0.1 -p "$PORT" -t "$1" -P 16 -c 50 -n "$2" -r 100000 -q >/dev/null
}
# The instructions of the dump callgrind_control wrote last (its "summary:" or "totals:").
last_dump() {
    local f
    f=$(ls -t "$work"/cg.out.* | head -1)
    sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$f" | head -1
}
bench set "$FILL"
callgrind_control -z "$pid" >/dev/null 2>&1
bench set "$N"
callgrind_control -d "$pid" >/dev/null 2>&1
set_ins=$(last_dump)
[ -z "${KEEP:-}" ] || cp "$(ls -t "$work"/cg.out.* | head -1)" "$KEEP/set.out"
bench get "$N"
callgrind_control -d "$pid" >/dev/null 2>&1
get_ins=$(last_dump)
[ -z "${KEEP:-}" ] || cp "$(ls -t "$work"/cg.out.* | head -1)" "$KEEP/get.out"
python3 -c "print(f'per SET {$set_ins / $N:.0f}  per GET {$get_ins / $N:.0f}  ($N each, $LOCK)')"
