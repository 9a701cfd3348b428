#!/usr/bin/env bash
# SET and GET of kvserver against redis-server, as issue 30 measures them: each round starts
# a fresh kvserver, runs `redis-benchmark -t set` then `-t get` (the GET after that SET fill)
# against it, stops it, and does the same with a fresh redis-server; the rounds alternate
# kvserver and redis-server. Prints each round's rates and ratios, then the medians of the
# rates and of the per-round ratios, with the load average before and after.
#
#   kvserver/versus-redis.sh                # 3 rounds, --lock rwsem, appendfsync everysec
#   ROUNDS=5 LOCK=tokio kvserver/versus-redis.sh
#   ARGS="--threads 1" kvserver/versus-redis.sh   # one worker thread, as redis-server's one
#
# Knobs (environment): ROUNDS (3), LOCK (rwsem), FSYNC (everysec), N (400000), RANDKEYS
# (100000), BIN (the kvserver binary; built in release mode if unset), ARGS (more kvserver
# arguments, split on spaces).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
LOCK=${LOCK:-rwsem}
FSYNC=${FSYNC:-everysec}
N=${N:-400000}
RANDKEYS=${RANDKEYS:-100000}
for tool in redis-benchmark redis-cli redis-server; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
TARGET_DIR=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)
if [ -z "${BIN:-}" ]; then
    cargo build --release --quiet -p kvserver --bin kvserver
    BIN=$TARGET_DIR/release/kvserver
fi
# Data on the build's disk (not a tmpfs), so that the log's writes cost what they cost.
WORK=$(mktemp -d "$TARGET_DIR/versus-redis.XXXXXX")
PORT=16700
# shellcheck source=kvserver/servers.sh
. kvserver/servers.sh

start() { # kv|redis
    local dir
    dir=$(mktemp -d "$WORK/data.XXXXXX")
    if [ "$1" = redis ]; then
        redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly yes \
            --appendfsync "$FSYNC" --dir "$dir" --daemonize no --logfile "$WORK/redis.log" &
    else
        # shellcheck disable=SC2086 # ARGS is a list of arguments
        "$BIN" --port "$PORT" --lock "$LOCK" --dir "$dir" --appendfsync "$FSYNC" --quiet ${ARGS:-} \
            2>>"$WORK/kvserver.log" &
    fi
    PID=$!
    wait_ready "$PORT" || exit 1
}
rate() { # test -> requests/s
    timeout 300 redis-benchmark -h 127.0.0.1 -p "$PORT" -t "$1" -P 16 -c 50 -n "$N" \
        -r "$RANDKEYS" --csv 2>/dev/null | awk -F, '{gsub(/"/, "")} NR>1{printf "%.0f\n", $2}'
}
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round kv_set redis_set set_ratio kv_get redis_get get_ratio"
declare -a KS RS KG RG SR GR
for r in $(seq "$ROUNDS"); do
    for t in kv redis; do
        start "$t"
        s=$(rate set)
        g=$(rate get)
        stop_server
        if [ "$t" = kv ]; then KS[r]=$s; KG[r]=$g; else RS[r]=$s; RG[r]=$g; fi
    done
    SR[r]=$(awk -v a="${KS[r]}" -v b="${RS[r]}" 'BEGIN{printf "%.2f", a / b}')
    GR[r]=$(awk -v a="${KG[r]}" -v b="${RG[r]}" 'BEGIN{printf "%.2f", a / b}')
    echo "$r ${KS[r]} ${RS[r]} ${SR[r]} ${KG[r]} ${RG[r]} ${GR[r]}"
done
med() { printf '%s\n' "$@" | median; }
echo "median $(med "${KS[@]}") $(med "${RS[@]}") $(med "${SR[@]}") $(med "${KG[@]}") $(med "${RG[@]}") $(med "${GR[@]}")"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
