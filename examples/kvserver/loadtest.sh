#!/usr/bin/env bash
# Load test of the kvserver example under each --lock, side by side with a real redis-server
# when one is installed. Prints a Markdown table (and writes it to $OUT if set).
#
#   examples/kvserver/loadtest.sh                 # full run (a few minutes)
#   QUICK=1 examples/kvserver/loadtest.sh         # smaller, one repetition
#
# Needs redis-benchmark (Debian: apt-get install -y redis-tools; redis-server for the
# reference column). Everything listens on 127.0.0.1 only; every server started here is
# stopped on exit; every command runs under `timeout`.
#
# Knobs (environment): N (requests per redis-benchmark test), REPS (repetitions, median
# reported), SHARDS (the "default" shard count; empty = the server's default), RANDKEYS
# (-r for the random-key rows), SWEEP (shard counts for the sweep table; empty: no sweep),
# YCSB_OPS, YCSB_RECORDS, LOCKS, APPENDFSYNC, AOF_IO, THREADS.
set -euo pipefail

cd "$(dirname "$0")/../.."

QUICK=${QUICK:-}
N=${N:-$([ -n "$QUICK" ] && echo 200000 || echo 1000000)}
REPS=${REPS:-$([ -n "$QUICK" ] && echo 1 || echo 3)}
SHARDS=${SHARDS:-}
RANDKEYS=${RANDKEYS:-100000}
YCSB_OPS=${YCSB_OPS:-$([ -n "$QUICK" ] && echo 50000 || echo 200000)}
YCSB_RECORDS=${YCSB_RECORDS:-100000}
LOCKS=${LOCKS:-"rwsem tokio async-lock"}
APPENDFSYNC=${APPENDFSYNC:-everysec}
AOF_IO=${AOF_IO:-direct}
THREADS=${THREADS:-}
OUT=${OUT:-}
SWEEP=${SWEEP-"1 4 16 64"}

command -v redis-benchmark >/dev/null || {
    echo "redis-benchmark not found (Debian: apt-get install -y redis-tools)" >&2
    exit 1
}
HAVE_REDIS=$(command -v redis-server >/dev/null && echo 1 || echo "")

echo "building (release)..." >&2
timeout 900 cargo build --release --quiet --example kvserver --example ycsb
KV=target/release/examples/kvserver
YCSB=target/release/examples/ycsb

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvserver-loadtest.XXXXXX")
PID=""
stop_server() {
    if [ -n "$PID" ]; then
        kill "$PID" 2>/dev/null || true
        # graceful shutdown is bounded by the server's --shutdown-timeout; don't wait forever
        for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
        PID=""
    fi
}
cleanup() { stop_server; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
    local p
    for p in $(seq 16500 16600); do
        if port_free "$p"; then echo "$p"; return; fi
    done
    echo "no free port in 16500-16600" >&2
    exit 1
}
wait_ready() {
    for _ in $(seq 100); do
        if [ "$(timeout 2 redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; then return 0; fi
        sleep 0.1
    done
    echo "server on port $1 did not come up" >&2
    return 1
}

# start_kv LOCK SHARDS -> sets PORT, PID
start_kv() {
    PORT=$(pick_port)
    local dir="$WORK/data-$1-$2-$RANDOM"
    local args=(--port "$PORT" --lock "$1" --dir "$dir" --appendfsync "$APPENDFSYNC" --aof-io "$AOF_IO" --quiet)
    [ "$2" != default ] && args+=(--shards "$2")
    [ -n "$THREADS" ] && args+=(--threads "$THREADS")
    "$KV" "${args[@]}" 2>>"$WORK/server.log" &
    PID=$!
    wait_ready "$PORT"
}
start_redis() {
    PORT=$(pick_port)
    local dir="$WORK/redis-$RANDOM"
    mkdir -p "$dir"
    redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly yes \
        --appendfsync "$APPENDFSYNC" --dir "$dir" --daemonize no --logfile "$WORK/redis.log" &
    PID=$!
    wait_ready "$PORT"
}

# bench PORT [extra redis-benchmark args] -> prints "SET_RPS GET_RPS"
bench() {
    local port=$1
    shift
    timeout 300 redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -P 16 -c 50 -n "$N" --csv "$@" 2>/dev/null |
        awk -F, '{gsub(/"/, "")} $1=="SET"{s=$2} $1=="GET"{g=$2} END{printf "%.0f %.0f\n", s, g}'
}

median() { tr ' ' '\n' | awk 'NF' | sort -n | awk '{a[NR]=$1} END{if (NR==0) print 0; else print a[int((NR+1)/2)]}'; }

declare -A SET GET
# run_case NAME TARGET(lock|redis) SHARDS [extra bench args]
run_case() {
    local name=$1 target=$2 shards=$3
    shift 3
    if [ "$target" = redis ]; then start_redis; else start_kv "$target" "$shards"; fi
    local r
    r=$(bench "$PORT" "$@")
    stop_server
    SET[$name,$target]="${SET[$name,$target]:-} ${r% *}"
    GET[$name,$target]="${GET[$name,$target]:-} ${r#* }"
    echo "  $name $target: SET ${r% *} GET ${r#* }" >&2
}

TARGETS="$LOCKS"
[ -n "$HAVE_REDIS" ] && TARGETS="$TARGETS redis"

CASES=("1shard" "default" "default-r")
declare -A CASE_SHARDS=([1shard]=1 [default]=${SHARDS:-default} [default-r]=${SHARDS:-default})
declare -A CASE_ARGS=([1shard]="" [default]="" [default-r]="-r $RANDKEYS")
declare -A CASE_DESC=(
    [1shard]="1 shard, one key"
    [default]="default shards, one key"
    [default-r]="default shards, -r $RANDKEYS"
)

echo "redis-benchmark -t set,get -P 16 -c 50 -n $N, $REPS rep(s), locks interleaved" >&2
for rep in $(seq "$REPS"); do
    echo "rep $rep/$REPS" >&2
    for c in "${CASES[@]}"; do
        for t in $TARGETS; do
            # redis has no shards: one run per key pattern is enough
            if [ "$t" = redis ] && [ "$c" = 1shard ]; then continue; fi
            # shellcheck disable=SC2086
            run_case "$c" "$t" "${CASE_SHARDS[$c]}" ${CASE_ARGS[$c]}
        done
    done
done

# Shard-count sweep (random keys), for choosing the default.
for rep in $(seq "$REPS"); do
    for s in $SWEEP; do
        for t in rwsem tokio; do
            case " $LOCKS " in *" $t "*) ;; *) continue ;; esac
            run_case "sweep$s" "$t" "$s" -r "$RANDKEYS"
        done
    done
done

# YCSB-like workloads, one server per target, records loaded first.
declare -A YCSB_RES
for t in $TARGETS; do
    if [ "$t" = redis ]; then start_redis; else start_kv "$t" "${SHARDS:-default}"; fi
    while IFS= read -r line; do
        w=$(echo "$line" | sed -n 's/.*"workload":"\([a-z]*\)".*/\1/p')
        ops=$(echo "$line" | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*/\1/p')
        p99=$(echo "$line" | sed -n 's/.*"p99_us":\([0-9]*\).*/\1/p')
        [ -n "$w" ] && YCSB_RES[$w,$t]="$(printf '%.0f' "$ops") (p99 ${p99}us)"
    done < <(timeout 600 "$YCSB" --port "$PORT" --load --records "$YCSB_RECORDS" --ops "$YCSB_OPS" \
        --workloads a,b,c --clients 32 --max-secs 120 --json 2>>"$WORK/ycsb.log")
    stop_server
    echo "  ycsb $t: A ${YCSB_RES[a,$t]:-?} B ${YCSB_RES[b,$t]:-?} C ${YCSB_RES[c,$t]:-?}" >&2
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else print "-" }'; }

{
    echo "### redis-benchmark -t set,get -P 16 -c 50 -n $N (requests/s, median of $REPS)"
    echo
    echo "Machine: $(nproc) cores; appendfsync $APPENDFSYNC, aof-io $AOF_IO; redis-server: appendonly yes, save \"\"."
    echo
    echo "| case | server | SET | GET | SET vs tokio | GET vs tokio | SET vs redis | GET vs redis |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for c in "${CASES[@]}"; do
        ts=$(echo "${SET[$c,tokio]:-}" | median)
        tg=$(echo "${GET[$c,tokio]:-}" | median)
        rs=$(echo "${SET[$c,redis]:-}" | median)
        rg=$(echo "${GET[$c,redis]:-}" | median)
        for t in $TARGETS; do
            [ -z "${SET[$c,$t]:-}" ] && continue
            s=$(echo "${SET[$c,$t]}" | median)
            g=$(echo "${GET[$c,$t]}" | median)
            name=$t
            [ "$t" != redis ] && name="kvserver --lock $t"
            echo "| ${CASE_DESC[$c]} | $name | $s | $g | $(ratio "$s" "$ts") | $(ratio "$g" "$tg") | $(ratio "$s" "$rs") | $(ratio "$g" "$rg") |"
        done
    done
    if [ -n "$SWEEP" ]; then
        echo
        echo "### Shard sweep: redis-benchmark -t set,get -P 16 -c 50 -n $N -r $RANDKEYS (requests/s, median of $REPS)"
        echo
        echo "| shards | rwsem SET | tokio SET | rwsem GET | tokio GET |"
        echo "|---:|---:|---:|---:|---:|"
        for s in $SWEEP; do
            echo "| $s | $(echo "${SET[sweep$s,rwsem]:-}" | median) | $(echo "${SET[sweep$s,tokio]:-}" | median) | $(echo "${GET[sweep$s,rwsem]:-}" | median) | $(echo "${GET[sweep$s,tokio]:-}" | median) |"
        done
    fi
    echo
    echo "### YCSB-like (examples/ycsb.rs): $YCSB_RECORDS records, $YCSB_OPS ops, 32 clients, zipfian 0.99 (ops/s)"
    echo
    echo "| server | A (50/50) | B (95/5) | C (read only) |"
    echo "|---|---:|---:|---:|"
    for t in $TARGETS; do
        name=$t
        [ "$t" != redis ] && name="kvserver --lock $t"
        echo "| $name | ${YCSB_RES[a,$t]:-} | ${YCSB_RES[b,$t]:-} | ${YCSB_RES[c,$t]:-} |"
    done
} | tee ${OUT:+"$OUT"}
